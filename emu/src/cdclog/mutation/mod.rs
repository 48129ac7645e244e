//! What a write does to one partition, at the level of cells and
//! tombstones, as Scylla's coordinator sees it before CDC looks at it.
//!
//! CDC's output (`docs/cdc-log.md` §3) is a function of the *mutation*, not
//! of the statement text: an overwrite `m = {...}` is a collection tombstone
//! at `T − 1` plus element cells at `T`, an INSERT is a row marker plus
//! cells, a BATCH merges every statement touching one partition into one
//! mutation. So statements are first turned into [`PartitionMutation`]s
//! here, faithfully to those rules, and [`super::split`] derives the log
//! rows from them exactly as Scylla's `cdc/split.cc` does.
//!
//! Lists: Cassandra never shows list keys, so keys of appended/prepended or
//! overwritten elements are synthesized with Scylla's scheme; `l[i] = v`,
//! `DELETE l[i]` and `l = l - [v]` would need the existing keys, which only
//! Scylla has: they are logged with positional keys (`l[i]`) or without the
//! removed keys (`l - [v]`) and counted as inexact ([`Built::inexact`]).
//!
//! The builder (`builder`) is split by statement kind: `insert`,
//! `update`, `delete` and `batch`, with the collection cells they
//! share in `cells`.

use std::cmp::Ordering;
use std::collections::BTreeMap;
use std::sync::Arc;

use bytes::Bytes;
use shardwise_protocol::codec::RawValue;
use shardwise_protocol::types::ColumnType;

use super::dml::{
    Assignment, Batch, BatchKind, CompareOp, Delete, DeleteTarget, InValues, Insert, Literal, MultiValues, Relation,
    Statement, TableName, Term, Update,
};
use super::schema::{CollectionKind, TableSchema};
use super::values::{self, compare, literal_bytes};
use crate::cdc::ColumnKind;

mod batch;
mod builder;
mod cells;
mod delete;
mod insert;
mod update;

use builder::{product, Builder, PREPEND_EPOCH_MICROS};
use cells::positional_key;

/// Why a write could not be turned into log rows.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MutationError {
    /// A column the table does not have.
    #[error("unknown column {0}")]
    UnknownColumn(String),
    /// A bind marker without a value.
    #[error("no value for bind marker {0}")]
    MissingValue(usize),
    /// A value that does not fit its column.
    #[error("bad value for {column}: {reason}")]
    BadValue {
        /// The column.
        column: String,
        /// What is wrong.
        reason: String,
    },
    /// A WHERE clause the front cannot map to rows.
    #[error("unsupported WHERE clause: {0}")]
    Where(String),
    /// Something else the front does not model.
    #[error("unsupported: {0}")]
    Unsupported(String),
}

type Result<T> = std::result::Result<T, MutationError>;

/// An atomic cell: a value (live) or `None` (dead), with its write time and
/// TTL (0: none).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cell {
    /// Write timestamp, µs.
    pub ts: i64,
    /// TTL in seconds, 0 for none (dead cells have none).
    pub ttl: i32,
    /// The value; `None` for a dead cell.
    pub value: Option<Bytes>,
}

/// One cell of a multi-cell column: a map entry, a set element, a list
/// element (key = timeuuid) or a UDT field (key = field index as smallint).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ElementCell {
    /// The cell key.
    pub key: Bytes,
    /// Write timestamp, µs.
    pub ts: i64,
    /// TTL, 0 for none.
    pub ttl: i32,
    /// The value (empty for set elements); `None` tombstones the key.
    pub value: Option<Bytes>,
}

/// Changes to a multi-cell column.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CollectionChange {
    /// A collection-wide tombstone's timestamp, as written (`T − 1` for
    /// overwrites, `T` for `DELETE X`).
    pub tombstone: Option<i64>,
    /// Element cells and element tombstones.
    pub cells: Vec<ElementCell>,
}

/// Changes to one column.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ColumnChange {
    /// An atomic column.
    Atomic(Cell),
    /// A multi-cell column.
    Collection(CollectionChange),
}

/// Changes to one row (the static row or a clustering row).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RowChange {
    /// Row marker `(ts, ttl)` (INSERT).
    pub marker: Option<(i64, i32)>,
    /// Row tombstone timestamp.
    pub tombstone: Option<i64>,
    /// Column changes by schema index.
    pub columns: BTreeMap<usize, ColumnChange>,
}

impl RowChange {
    /// Nothing at all.
    pub fn is_empty(&self) -> bool {
        self.marker.is_none() && self.tombstone.is_none() && self.columns.is_empty()
    }
}

/// One end of a range tombstone: a clustering prefix.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RangeBound {
    /// Values of the first clustering columns.
    pub prefix: Vec<Bytes>,
    /// Whether the bound includes the prefix.
    pub inclusive: bool,
}

/// A range tombstone.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RangeTombstone {
    /// Start bound.
    pub start: RangeBound,
    /// End bound.
    pub end: RangeBound,
    /// Timestamp.
    pub ts: i64,
}

/// Everything a write does to one partition of one table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PartitionMutation {
    /// The table.
    pub schema: Arc<TableSchema>,
    /// Partition-key values in key order.
    pub key: Vec<Bytes>,
    /// The static row.
    pub static_row: RowChange,
    /// Clustering rows, in clustering order.
    pub rows: Vec<(Vec<Bytes>, RowChange)>,
    /// Range tombstones, in statement order.
    pub ranges: Vec<RangeTombstone>,
    /// Partition tombstone timestamp.
    pub partition_tombstone: Option<i64>,
}

/// Orders clustering keys (prefixes compare shorter-first on ties).
pub fn compare_clustering(schema: &TableSchema, a: &[Bytes], b: &[Bytes]) -> Ordering {
    for (i, (x, y)) in a.iter().zip(b).enumerate() {
        let typ = &schema.columns[schema.clustering[i]].typ;
        match compare(typ, x, y) {
            Ordering::Equal => {}
            other => return other,
        }
    }
    a.len().cmp(&b.len())
}

/// Cassandra's reconciliation of two versions of one cell `(ts, ttl,
/// value)` (`Cells.reconcile` since CASSANDRA-14592; Scylla the same since
/// scylladb#14182): the later write wins; on a tie a tombstone wins, then an
/// expiring cell over a non-expiring one, then the later expiration (the
/// cells of one write share "now": the larger TTL), then the greater value.
fn newer(a: (i64, i32, Option<&Bytes>), b: (i64, i32, Option<&Bytes>)) -> bool {
    match a.0.cmp(&b.0) {
        Ordering::Greater => true,
        Ordering::Less => false,
        Ordering::Equal => match (a.2, b.2) {
            (None, _) => true,
            (Some(_), None) => false,
            (Some(x), Some(y)) => (a.1, x) > (b.1, y),
        },
    }
}

impl RowChange {
    fn merge(&mut self, other: RowChange) {
        if let Some(m) = other.marker {
            // `LivenessInfo.supersedes`: on a tie the expiring (later) marker.
            if self.marker.is_none_or(|o| m >= o) {
                self.marker = Some(m);
            }
        }
        if let Some(t) = other.tombstone {
            self.tombstone = Some(self.tombstone.map_or(t, |o| o.max(t)));
        }
        for (i, change) in other.columns {
            match (self.columns.get_mut(&i), change) {
                (None, change) => {
                    self.columns.insert(i, change);
                }
                (Some(ColumnChange::Atomic(old)), ColumnChange::Atomic(new)) => {
                    if newer((new.ts, new.ttl, new.value.as_ref()), (old.ts, old.ttl, old.value.as_ref())) {
                        *old = new;
                    }
                }
                (Some(ColumnChange::Collection(old)), ColumnChange::Collection(new)) => {
                    if let Some(t) = new.tombstone {
                        old.tombstone = Some(old.tombstone.map_or(t, |o| o.max(t)));
                    }
                    for cell in new.cells {
                        match old.cells.iter_mut().find(|c| c.key == cell.key) {
                            Some(o) => {
                                if newer((cell.ts, cell.ttl, cell.value.as_ref()), (o.ts, o.ttl, o.value.as_ref())) {
                                    *o = cell;
                                }
                            }
                            None => old.cells.push(cell),
                        }
                    }
                }
                (Some(slot), change) => *slot = change,
            }
        }
    }
}

impl PartitionMutation {
    fn new(schema: Arc<TableSchema>, key: Vec<Bytes>) -> PartitionMutation {
        PartitionMutation {
            schema,
            key,
            static_row: RowChange::default(),
            rows: Vec::new(),
            ranges: Vec::new(),
            partition_tombstone: None,
        }
    }

    fn row_mut(&mut self, ck: Vec<Bytes>) -> &mut RowChange {
        let schema = self.schema.clone();
        let at = self.rows.binary_search_by(|(k, _)| compare_clustering(&schema, k, &ck));
        let i = match at {
            Ok(i) => i,
            Err(i) => {
                self.rows.insert(i, (ck, RowChange::default()));
                i
            }
        };
        &mut self.rows[i].1
    }

    pub(crate) fn absorb(&mut self, other: PartitionMutation) {
        self.static_row.merge(other.static_row);
        for (ck, row) in other.rows {
            self.row_mut(ck).merge(row);
        }
        self.ranges.extend(other.ranges);
        if let Some(t) = other.partition_tombstone {
            self.partition_tombstone = Some(self.partition_tombstone.map_or(t, |o| o.max(t)));
        }
    }

    /// Whether the mutation changes nothing.
    pub fn is_empty(&self) -> bool {
        self.static_row.is_empty()
            && self.rows.iter().all(|(_, r)| r.is_empty())
            && self.ranges.is_empty()
            && self.partition_tombstone.is_none()
    }
}

/// The bound values of a request.
#[derive(Debug, Clone, Copy)]
pub struct Binds<'a> {
    /// Values in marker order (or in name order, with `names`).
    pub values: &'a [RawValue<'a>],
    /// Names, when the values were sent with names.
    pub names: Option<&'a [&'a str]>,
}

impl Binds<'static> {
    /// No values.
    pub const NONE: Binds<'static> = Binds { values: &[], names: None };
}

/// A value: bound, null, or "unset" (leave the column alone).
#[derive(Debug, Clone, PartialEq, Eq)]
enum Val {
    Unset,
    Null,
    Bytes(Bytes),
}

/// The result of turning a statement into mutations.
#[derive(Debug, Default)]
pub struct Built {
    /// One mutation per (table, partition), in first-touch order.
    pub mutations: Vec<PartitionMutation>,
    /// List operations whose keys could only be guessed.
    pub inexact: u32,
}

/// What the builder needs besides the statement.
pub struct Context<'a> {
    /// The schema of a CDC-enabled table, `None` for other tables (their
    /// writes produce no log rows).
    pub schema_of: &'a dyn Fn(&TableName) -> Option<Arc<TableSchema>>,
    /// Bound values.
    pub binds: Binds<'a>,
    /// The write timestamp when the statement does not name one (µs).
    pub timestamp: i64,
    /// Random bits for synthesized list keys (node and clock sequence).
    pub list_node: u64,
}

/// Turns a statement (or batch) into per-partition mutations of CDC tables.
pub fn build(statement: &Statement, cx: &Context<'_>) -> Result<Built> {
    let mut b = Builder { cx, out: Built::default(), list_seq: 0 };
    match statement {
        Statement::Batch(batch) => b.batch(batch)?,
        other => b.statement(other, cx.timestamp)?,
    }
    Ok(b.out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn same_timestamp_cells_reconcile_like_cassandra() {
        let (one, two) = (Bytes::from_static(&[1]), Bytes::from_static(&[2]));
        // A later write wins whatever else.
        assert!(newer((11, 0, Some(&one)), (10, 3600, None)));
        // Tie: a tombstone, then an expiring cell, then the later expiry, then the value.
        assert!(newer((10, 0, None), (10, 3600, Some(&two))));
        assert!(!newer((10, 3600, Some(&two)), (10, 0, None)));
        assert!(newer((10, 3600, Some(&one)), (10, 0, Some(&two))));
        assert!(!newer((10, 0, Some(&two)), (10, 3600, Some(&one))));
        assert!(newer((10, 3600, Some(&one)), (10, 100, Some(&two))));
        assert!(newer((10, 0, Some(&two)), (10, 0, Some(&one))));
        assert!(!newer((10, 0, Some(&one)), (10, 0, Some(&two))));
        // Row markers: on a tie the expiring one.
        let mut row = RowChange { marker: Some((10, 3600)), ..RowChange::default() };
        row.merge(RowChange { marker: Some((10, 0)), ..RowChange::default() });
        assert_eq!(row.marker, Some((10, 3600)));
        row.merge(RowChange { marker: Some((11, 0)), ..RowChange::default() });
        assert_eq!(row.marker, Some((11, 0)));
    }
}
