//! A CDC base table as the log synthesis needs it: every column with its
//! kind and parsed type, the key columns in order, the table's default TTL
//! and its CDC options. Built from `system_schema.columns` / `types` /
//! `tables` by the front and cached until the next schema change.

use shardwise_protocol::types::ColumnType;

use super::values::parse_type;
use crate::cdc::{BaseColumn, CdcOptions, ColumnKind};

/// One base column.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Column {
    /// Name, exactly.
    pub name: String,
    /// Key, static or regular.
    pub kind: ColumnKind,
    /// The parsed type.
    pub typ: ColumnType,
    /// A non-frozen collection or UDT (cells per element / field).
    pub multi_cell: bool,
}

impl Column {
    /// The kind of multi-cell column, if it is one.
    pub fn collection(&self) -> Option<CollectionKind> {
        if !self.multi_cell {
            return None;
        }
        match &self.typ {
            ColumnType::Map(..) => Some(CollectionKind::Map),
            ColumnType::Set(_) => Some(CollectionKind::Set),
            ColumnType::List(_) => Some(CollectionKind::List),
            ColumnType::Udt { .. } => Some(CollectionKind::Udt),
            _ => None,
        }
    }

    /// The type of the keys of a multi-cell column's cells (map key, set
    /// element, list timeuuid, UDT field index as smallint).
    pub fn key_type(&self) -> ColumnType {
        match &self.typ {
            ColumnType::Map(k, _) | ColumnType::Set(k) => (**k).clone(),
            ColumnType::List(_) => ColumnType::Timeuuid,
            _ => ColumnType::SmallInt,
        }
    }
}

/// The four kinds of multi-cell columns.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CollectionKind {
    /// `map<K, V>`
    Map,
    /// `set<T>`
    Set,
    /// `list<T>`
    List,
    /// A non-frozen UDT.
    Udt,
}

/// A base table of a CDC log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TableSchema {
    /// Keyspace.
    pub keyspace: String,
    /// Base table name.
    pub table: String,
    /// All columns.
    pub columns: Vec<Column>,
    /// Indexes of the partition-key columns, in key order.
    pub partition_key: Vec<usize>,
    /// Indexes of the clustering columns, in key order.
    pub clustering: Vec<usize>,
    /// `default_time_to_live` in seconds (0: none).
    pub default_ttl: i32,
    /// The table's CDC options.
    pub options: CdcOptions,
    /// A `COMPACT STORAGE` table: its rows have no row marker, so Scylla
    /// logs an INSERT into it as an UPDATE (operation 1).
    pub compact: bool,
}

impl TableSchema {
    /// Builds the schema from the rows of `system_schema.columns`; `udt`
    /// resolves a user type's fields.
    pub fn new(
        keyspace: &str,
        table: &str,
        base: &[BaseColumn],
        udt: &super::values::UdtResolver<'_>,
        default_ttl: i32,
        options: CdcOptions,
    ) -> Result<TableSchema, String> {
        let mut columns = Vec::with_capacity(base.len());
        let mut keys: Vec<(ColumnKind, i32, usize)> = Vec::new();
        for (i, c) in base.iter().enumerate() {
            let parsed = parse_type(&c.typ, keyspace, udt).map_err(|e| format!("column {}: {e}", c.name))?;
            if matches!(c.kind, ColumnKind::PartitionKey | ColumnKind::Clustering) {
                keys.push((c.kind, c.position, i));
            }
            columns.push(Column { name: c.name.clone(), kind: c.kind, typ: parsed.typ, multi_cell: !parsed.frozen });
        }
        keys.sort();
        let pick = |kind| keys.iter().filter(|k| k.0 == kind).map(|k| k.2).collect::<Vec<_>>();
        let partition_key = pick(ColumnKind::PartitionKey);
        if partition_key.is_empty() {
            return Err(format!("{keyspace}.{table} has no partition key"));
        }
        Ok(TableSchema {
            keyspace: keyspace.into(),
            table: table.into(),
            clustering: pick(ColumnKind::Clustering),
            partition_key,
            columns,
            default_ttl,
            options,
            compact: false,
        })
    }

    /// The index of a column by name.
    pub fn index(&self, name: &str) -> Option<usize> {
        self.columns.iter().position(|c| c.name == name)
    }

    /// Whether column `i` is part of the primary key.
    pub fn is_key(&self, i: usize) -> bool {
        matches!(self.columns[i].kind, ColumnKind::PartitionKey | ColumnKind::Clustering)
    }
}
