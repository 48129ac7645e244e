//! Schema metadata: keyspaces, tables, columns, user types, indexes and
//! materialized views, as `system_schema` describes them.
//!
//! Read on first use ([`Session::schema`]) and read again, as a whole, on
//! every `SCHEMA_CHANGE` event the control connection receives (and on its
//! periodic refresh); readers get the current snapshot, an `Arc` swapped as
//! a whole, so a snapshot never changes under them. Column types are kept
//! as the CQL text the server stores (`map<text, frozen<list<int>>>`, a
//! user type's name).

use std::collections::BTreeMap;

use shardwise_protocol::consistency::Consistency;

use super::Session;
use crate::error::{ExecutionError, RowsAccessError};
use crate::statement::Statement;

/// The cluster's schema, at one moment.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Schema {
    /// Keyspaces by name.
    pub keyspaces: BTreeMap<String, KeyspaceMetadata>,
}

/// One keyspace.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct KeyspaceMetadata {
    /// The replication options (`class` and its parameters).
    pub replication: BTreeMap<String, String>,
    /// Whether writes go through the commit log.
    pub durable_writes: bool,
    /// Tables by name.
    pub tables: BTreeMap<String, TableMetadata>,
    /// Materialized views by name.
    pub views: BTreeMap<String, ViewMetadata>,
    /// User-defined types by name.
    pub user_types: BTreeMap<String, UserType>,
}

/// One table.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TableMetadata {
    /// Every column: the partition key, the clustering key, then the others
    /// by name.
    pub columns: Vec<ColumnMetadata>,
    /// The partition key's columns, in key order.
    pub partition_key: Vec<String>,
    /// The clustering key's columns, in key order.
    pub clustering_key: Vec<String>,
    /// Secondary indexes by name.
    pub indexes: BTreeMap<String, IndexMetadata>,
}

impl TableMetadata {
    /// The column named `name`.
    pub fn column(&self, name: &str) -> Option<&ColumnMetadata> {
        self.columns.iter().find(|c| c.name == name)
    }
}

/// One materialized view.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ViewMetadata {
    /// The table it is built from.
    pub base_table: String,
    /// Whether it selects every column of the base table.
    pub include_all_columns: bool,
    /// Its `WHERE` clause.
    pub where_clause: String,
    /// Its columns and keys, as a table's.
    pub table: TableMetadata,
}

/// One column.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ColumnMetadata {
    /// Its name.
    pub name: String,
    /// Its role.
    pub kind: ColumnKind,
    /// Its CQL type, as the server writes it.
    pub typ: String,
    /// Its position in its key (as the server stores it: -1 for regular and
    /// static columns).
    pub position: i32,
    /// The clustering order, for clustering columns.
    pub clustering_order: ClusteringOrder,
}

/// A column's role.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum ColumnKind {
    /// Part of the partition key.
    PartitionKey,
    /// Part of the clustering key.
    Clustering,
    /// A static column.
    Static,
    /// A regular column.
    Regular,
}

/// The order of a clustering column.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClusteringOrder {
    /// Not a clustering column.
    None,
    /// Ascending.
    Asc,
    /// Descending.
    Desc,
}

/// A user-defined type.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct UserType {
    /// Its fields: (name, CQL type), in order.
    pub fields: Vec<(String, String)>,
}

/// A secondary index.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct IndexMetadata {
    /// `COMPOSITES`, `KEYS` or `CUSTOM`.
    pub kind: String,
    /// Its options (`target`, `class_name`, ...).
    pub options: BTreeMap<String, String>,
}

/// Reading the schema failed.
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum SchemaError {
    /// A read of `system_schema` failed.
    #[error("reading system_schema.{table}: {source}")]
    Query {
        /// The table read.
        table: &'static str,
        /// Why.
        source: ExecutionError,
    },
    /// A `system_schema` table has unexpected columns.
    #[error("reading system_schema.{table}: {source}")]
    Rows {
        /// The table read.
        table: &'static str,
        /// Why.
        source: RowsAccessError,
    },
}

/// The rows of one `system_schema` table, owned.
async fn read<R>(session: &Session, table: &'static str, columns: &str) -> Result<Vec<R>, SchemaError>
where
    R: for<'a> shardwise_protocol::types::de::DeserializeRow<'a>,
{
    let only = crate::cluster::topology::only(&session.inner.config.keyspaces_to_fetch);
    let statement = Statement::new(format!("SELECT {columns} FROM system_schema.{table}{only}"))
        .with_consistency(Consistency::One)
        .with_idempotent(true)
        .with_page_size(5000);
    let mut pages = session.execute_pages(statement, ());
    let mut out = Vec::new();
    while let Some(page) = pages.next_page().await {
        let page = page.map_err(|source| SchemaError::Query { table, source })?;
        if page.raw_rows().is_none() {
            continue;
        }
        for row in page.rows::<R>().map_err(|source| SchemaError::Rows { table, source })? {
            out.push(row.map_err(|e| SchemaError::Rows { table, source: e.into() })?);
        }
    }
    Ok(out)
}

/// Options as `system_schema` stores them.
type Options = Option<BTreeMap<String, String>>;
/// `keyspace_name, durable_writes, replication`.
type KeyspaceRow = (String, Option<bool>, Options);
/// `keyspace_name, table_name, column_name, kind, clustering_order, position, type`.
type ColumnRow = (String, String, String, Option<String>, Option<String>, Option<i32>, Option<String>);
/// `keyspace_name, view_name, base_table_name, include_all_columns, where_clause`.
type ViewRow = (String, String, Option<String>, Option<bool>, Option<String>);
/// `keyspace_name, type_name, field_names, field_types`.
type TypeRow = (String, String, Option<Vec<String>>, Option<Vec<String>>);
/// `keyspace_name, table_name, index_name, kind, options`.
type IndexRow = (String, String, String, Option<String>, Options);

/// Reads the whole schema.
pub(crate) async fn fetch(session: &Session) -> Result<Schema, SchemaError> {
    let mut schema = Schema::default();
    let keyspaces: Vec<KeyspaceRow> = read(session, "keyspaces", "keyspace_name, durable_writes, replication").await?;
    for (name, durable, replication) in keyspaces {
        let ks = KeyspaceMetadata {
            replication: replication.unwrap_or_default(),
            durable_writes: durable.unwrap_or(true),
            ..KeyspaceMetadata::default()
        };
        schema.keyspaces.insert(name, ks);
    }
    let mut columns: BTreeMap<(String, String), TableMetadata> = BTreeMap::new();
    let rows: Vec<ColumnRow> =
        read(session, "columns", "keyspace_name, table_name, column_name, kind, clustering_order, position, type")
            .await?;
    for (keyspace, table, name, kind, order, position, typ) in rows {
        let kind = match kind.as_deref() {
            Some("partition_key") => ColumnKind::PartitionKey,
            Some("clustering") => ColumnKind::Clustering,
            Some("static") => ColumnKind::Static,
            _ => ColumnKind::Regular,
        };
        let clustering_order = match (kind, order.as_deref()) {
            (ColumnKind::Clustering, Some("desc")) => ClusteringOrder::Desc,
            (ColumnKind::Clustering, _) => ClusteringOrder::Asc,
            _ => ClusteringOrder::None,
        };
        let column = ColumnMetadata {
            name,
            kind,
            typ: typ.unwrap_or_default(),
            position: position.unwrap_or(0),
            clustering_order,
        };
        columns.entry((keyspace, table)).or_default().columns.push(column);
    }
    for t in columns.values_mut() {
        // Keys in key order, then the others by name.
        t.columns.sort_by(|a, b| (a.kind, a.position, &a.name).cmp(&(b.kind, b.position, &b.name)));
        let key = |kind| t.columns.iter().filter(|c| c.kind == kind).map(|c| c.name.clone()).collect();
        t.partition_key = key(ColumnKind::PartitionKey);
        t.clustering_key = key(ColumnKind::Clustering);
    }
    let tables: Vec<(String, String)> = read(session, "tables", "keyspace_name, table_name").await?;
    for (keyspace, table) in tables {
        let metadata = columns.remove(&(keyspace.clone(), table.clone())).unwrap_or_default();
        if let Some(ks) = schema.keyspaces.get_mut(&keyspace) {
            ks.tables.insert(table, metadata);
        }
    }
    let views: Vec<ViewRow> =
        read(session, "views", "keyspace_name, view_name, base_table_name, include_all_columns, where_clause").await?;
    for (keyspace, view, base, all, where_clause) in views {
        let table = columns.remove(&(keyspace.clone(), view.clone())).unwrap_or_default();
        let metadata = ViewMetadata {
            base_table: base.unwrap_or_default(),
            include_all_columns: all.unwrap_or(false),
            where_clause: where_clause.unwrap_or_default(),
            table,
        };
        if let Some(ks) = schema.keyspaces.get_mut(&keyspace) {
            ks.views.insert(view, metadata);
        }
    }
    let types: Vec<TypeRow> = read(session, "types", "keyspace_name, type_name, field_names, field_types").await?;
    for (keyspace, name, names, types) in types {
        let fields = names.unwrap_or_default().into_iter().zip(types.unwrap_or_default()).collect();
        if let Some(ks) = schema.keyspaces.get_mut(&keyspace) {
            ks.user_types.insert(name, UserType { fields });
        }
    }
    let indexes: Vec<IndexRow> =
        read(session, "indexes", "keyspace_name, table_name, index_name, kind, options").await?;
    for (keyspace, table, name, kind, options) in indexes {
        let index = IndexMetadata { kind: kind.unwrap_or_default(), options: options.unwrap_or_default() };
        if let Some(t) = schema.keyspaces.get_mut(&keyspace).and_then(|k| k.tables.get_mut(&table)) {
            t.indexes.insert(name, index);
        }
    }
    Ok(schema)
}

impl Session {
    /// The schema: read on first use, then kept current by the server's
    /// schema events; a snapshot that never changes under the caller (call
    /// again for a newer one).
    pub async fn schema(&self) -> Result<std::sync::Arc<Schema>, SchemaError> {
        if let Some(s) = self.inner.schema.read().unwrap_or_else(|e| e.into_inner()).clone() {
            return Ok(s);
        }
        // Reads take turns: a refresh after an event waits for this one and
        // then reads again, so no older read replaces a newer one.
        let _turn = self.inner.schema_reads.lock().await;
        if let Some(s) = self.inner.schema.read().unwrap_or_else(|e| e.into_inner()).clone() {
            return Ok(s);
        }
        let fresh = std::sync::Arc::new(fetch(self).await?);
        *self.inner.schema.write().unwrap_or_else(|e| e.into_inner()) = Some(fresh.clone());
        Ok(fresh)
    }

    /// Reads the schema again, when it has been asked for (after a schema
    /// event). Boxed: reading executes statements, whose futures contain
    /// the schema refresh that calls this.
    pub(crate) fn refresh_schema_metadata(
        &self,
    ) -> std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send + '_>> {
        Box::pin(async move {
            if self.inner.schema.read().unwrap_or_else(|e| e.into_inner()).is_none() {
                return;
            }
            let _turn = self.inner.schema_reads.lock().await;
            match fetch(self).await {
                Ok(s) => *self.inner.schema.write().unwrap_or_else(|e| e.into_inner()) = Some(std::sync::Arc::new(s)),
                Err(e) => tracing::warn!(error = %e, "cannot refresh the schema metadata"),
            }
        })
    }
}
