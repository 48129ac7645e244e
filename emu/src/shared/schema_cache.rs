//! Table schemas the front read from Cassandra ([`SchemaCache`]), kept so
//! that log synthesis and Scylla's LWT answer need not read them per write;
//! any schema change drops what it may have changed.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use crate::cdclog::schema::TableSchema;

/// Cached schemas by (keyspace, table).
#[derive(Default)]
pub(crate) struct SchemaCache {
    /// Schemas of CDC tables, for log synthesis (dropped on DDL).
    pub(crate) cdc: Mutex<HashMap<(String, String), Arc<TableSchema>>>,
    /// Schemas of other tables written with conditions (for Scylla's LWT
    /// answer; dropped on DDL).
    pub(crate) tables: Mutex<HashMap<(String, String), Arc<TableSchema>>>,
}
