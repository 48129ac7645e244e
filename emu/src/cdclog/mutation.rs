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

use std::cmp::Ordering;
use std::collections::BTreeMap;
use std::sync::Arc;

use bytes::Bytes;
use shardwise_protocol::codec::RawValue;
use shardwise_protocol::types::ColumnType;

use super::dml::{
    Assignment, BatchKind, CompareOp, DeleteTarget, InValues, Insert, Literal, MultiValues, Relation, Statement,
    TableName, Term,
};
use super::schema::{CollectionKind, TableSchema};
use super::values::{self, compare, literal_bytes};
use crate::cdc::ColumnKind;

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
        Statement::Batch(batch) => {
            if batch.kind == BatchKind::Counter {
                return Ok(Built::default());
            }
            let ts = match &batch.using.timestamp {
                Some(t) => b.bigint(t)?.unwrap_or(cx.timestamp),
                None => cx.timestamp,
            };
            for s in &batch.statements {
                b.statement(s, ts)?;
            }
        }
        other => b.statement(other, cx.timestamp)?,
    }
    Ok(b.out)
}

struct Builder<'a, 'c> {
    cx: &'a Context<'c>,
    out: Built,
    list_seq: u32,
}

/// Microseconds of 2010-01-01T00:00:00Z, the mirror of list prepends.
const PREPEND_EPOCH_MICROS: i64 = 1_262_304_000_000_000;

impl Builder<'_, '_> {
    fn value(&self, term: &Term, typ: &ColumnType, column: &str) -> Result<Val> {
        match term {
            Term::Bind(m) => {
                let raw = match (self.cx.binds.names, &m.name) {
                    (Some(names), Some(name)) => names
                        .iter()
                        .position(|n| n.eq_ignore_ascii_case(name))
                        .and_then(|i| self.cx.binds.values.get(i)),
                    _ => self.cx.binds.values.get(m.index),
                };
                match raw.copied().ok_or(MutationError::MissingValue(m.index))? {
                    RawValue::Null => Ok(Val::Null),
                    RawValue::Unset => Ok(Val::Unset),
                    RawValue::Value(b) => Ok(Val::Bytes(Bytes::copy_from_slice(b))),
                }
            }
            Term::Literal(Literal::Null) => Ok(Val::Null),
            Term::Literal(lit) => match literal_bytes(lit, typ) {
                Ok(Some(b)) => Ok(Val::Bytes(Bytes::from(b))),
                Ok(None) => Ok(Val::Null),
                Err(e) => Err(MutationError::BadValue { column: column.into(), reason: e.to_string() }),
            },
        }
    }

    fn bigint(&self, term: &Term) -> Result<Option<i64>> {
        match self.value(term, &ColumnType::BigInt, "USING TIMESTAMP")? {
            Val::Bytes(b) => {
                let arr: [u8; 8] = b[..].try_into().map_err(|_| MutationError::BadValue {
                    column: "USING TIMESTAMP".into(),
                    reason: format!("{} bytes", b.len()),
                })?;
                Ok(Some(i64::from_be_bytes(arr)))
            }
            _ => Ok(None),
        }
    }

    fn ttl(&self, term: &Option<Term>, schema: &TableSchema) -> Result<i32> {
        let Some(term) = term else { return Ok(schema.default_ttl) };
        match self.value(term, &ColumnType::Int, "USING TTL")? {
            Val::Bytes(b) => {
                let arr: [u8; 4] = b[..].try_into().map_err(|_| MutationError::BadValue {
                    column: "USING TTL".into(),
                    reason: format!("{} bytes", b.len()),
                })?;
                Ok(i32::from_be_bytes(arr))
            }
            Val::Null | Val::Unset => Ok(schema.default_ttl),
        }
    }

    fn statement(&mut self, s: &Statement, default_ts: i64) -> Result<()> {
        let (table, using) = match s {
            Statement::Insert(i) => (&i.table, &i.using),
            Statement::Update(u) => (&u.table, &u.using),
            Statement::Delete(d) => (&d.table, &d.using),
            Statement::Batch(_) => return Err(MutationError::Unsupported("nested batch".into())),
        };
        let Some(schema) = (self.cx.schema_of)(table) else { return Ok(()) };
        let ts = match &using.timestamp {
            Some(t) => self.bigint(t)?.unwrap_or(default_ts),
            None => default_ts,
        };
        let ttl = self.ttl(&using.ttl, &schema)?;
        self.list_seq = 0;
        let mutations = match s {
            Statement::Insert(i) => self.insert(&schema, i, ts, ttl)?,
            Statement::Update(u) => {
                let partitions = self.partition_keys(&schema, &u.relations)?;
                let rows = self.clustering_keys(&schema, &u.relations)?;
                let mut out = Vec::new();
                for pk in partitions {
                    let mut m = PartitionMutation::new(schema.clone(), pk);
                    for a in &u.assignments {
                        self.assignment(&mut m, &rows, a, ts, ttl)?;
                    }
                    out.push(m);
                }
                out
            }
            Statement::Delete(d) => {
                let partitions = self.partition_keys(&schema, &d.relations)?;
                let mut out = Vec::new();
                for pk in partitions {
                    let mut m = PartitionMutation::new(schema.clone(), pk);
                    if d.targets.is_empty() {
                        self.delete_rows(&mut m, &d.relations, ts)?;
                    } else {
                        let rows = self.clustering_keys(&schema, &d.relations)?;
                        for t in &d.targets {
                            self.delete_target(&mut m, &rows, t, ts)?;
                        }
                    }
                    out.push(m);
                }
                out
            }
            Statement::Batch(_) => Vec::new(),
        };
        for m in mutations {
            if m.is_empty() {
                continue;
            }
            let same =
                self.out.mutations.iter_mut().find(|o| {
                    o.schema.keyspace == m.schema.keyspace && o.schema.table == m.schema.table && o.key == m.key
                });
            match same {
                Some(o) => o.absorb(m),
                None => self.out.mutations.push(m),
            }
        }
        Ok(())
    }

    fn column(&self, schema: &TableSchema, name: &str) -> Result<usize> {
        schema.index(name).ok_or_else(|| MutationError::UnknownColumn(name.into()))
    }

    fn insert(&mut self, schema: &Arc<TableSchema>, i: &Insert, ts: i64, ttl: i32) -> Result<Vec<PartitionMutation>> {
        if i.columns.len() != i.values.len() {
            return Err(MutationError::Unsupported("INSERT with unequal column and value counts".into()));
        }
        let mut pk: Vec<Option<Bytes>> = vec![None; schema.partition_key.len()];
        let mut ck: Vec<Option<Bytes>> = vec![None; schema.clustering.len()];
        let mut cells = Vec::new();
        for (name, term) in i.columns.iter().zip(&i.values) {
            let idx = self.column(schema, name)?;
            let col = &schema.columns[idx];
            let v = self.value(term, &col.typ, name)?;
            let key_value = |v: Val| match v {
                Val::Bytes(b) => Ok(b),
                _ => Err(MutationError::BadValue { column: name.clone(), reason: "null or unset key".into() }),
            };
            if let Some(p) = schema.partition_key.iter().position(|&k| k == idx) {
                pk[p] = Some(key_value(v)?);
            } else if let Some(p) = schema.clustering.iter().position(|&k| k == idx) {
                ck[p] = Some(key_value(v)?);
            } else {
                cells.push((idx, v));
            }
        }
        let pk: Vec<Bytes> = pk
            .into_iter()
            .collect::<Option<_>>()
            .ok_or_else(|| MutationError::Where("INSERT without the full partition key".into()))?;
        let mut m = PartitionMutation::new(schema.clone(), pk);
        let ck: Option<Vec<Bytes>> = ck.into_iter().collect();
        let has_row = ck.is_some();
        if let Some(ck) = &ck {
            m.row_mut(ck.clone()).marker = Some((ts, ttl));
        }
        for (idx, v) in cells {
            let is_static = schema.columns[idx].kind == ColumnKind::Static;
            if !is_static && !has_row {
                return Err(MutationError::Where("INSERT without the full clustering key".into()));
            }
            let change = self.overwrite(schema, idx, v, ts, ttl)?;
            let Some(change) = change else { continue };
            let row = if is_static { &mut m.static_row } else { m.row_mut(ck.clone().unwrap_or_default()) };
            row.merge(RowChange { columns: BTreeMap::from([(idx, change)]), ..RowChange::default() });
        }
        Ok(vec![m])
    }

    /// `X = v` (INSERT or UPDATE): a cell, or a collection tombstone just
    /// before `ts` plus the new elements.
    fn overwrite(
        &mut self,
        schema: &TableSchema,
        idx: usize,
        v: Val,
        ts: i64,
        ttl: i32,
    ) -> Result<Option<ColumnChange>> {
        let col = &schema.columns[idx];
        if v == Val::Unset {
            return Ok(None);
        }
        let Some(kind) = col.collection() else {
            return Ok(Some(ColumnChange::Atomic(match v {
                Val::Bytes(b) => Cell { ts, ttl, value: Some(b) },
                _ => Cell { ts, ttl: 0, value: None },
            })));
        };
        let mut change = CollectionChange { tombstone: Some(ts - 1), cells: Vec::new() };
        if let Val::Bytes(b) = v {
            change.cells = self.elements(schema, idx, kind, &b, ts, ttl, false)?;
        }
        Ok(Some(ColumnChange::Collection(change)))
    }

    /// The cells a serialized collection value adds.
    #[allow(clippy::too_many_arguments)]
    fn elements(
        &mut self,
        schema: &TableSchema,
        idx: usize,
        kind: CollectionKind,
        bytes: &[u8],
        ts: i64,
        ttl: i32,
        prepend: bool,
    ) -> Result<Vec<ElementCell>> {
        let col = &schema.columns[idx];
        let bad = |e: values::ValueError| MutationError::BadValue { column: col.name.clone(), reason: e.to_string() };
        let cell = |key: &[u8], value: Option<&[u8]>| ElementCell {
            key: Bytes::copy_from_slice(key),
            ts,
            ttl,
            value: Some(Bytes::copy_from_slice(value.unwrap_or(&[]))),
        };
        Ok(match kind {
            CollectionKind::Map => {
                values::collection_entries(bytes).map_err(bad)?.into_iter().map(|(k, v)| cell(k, v)).collect()
            }
            CollectionKind::Set => {
                values::collection_elements(bytes).map_err(bad)?.into_iter().flatten().map(|e| cell(e, None)).collect()
            }
            CollectionKind::List => {
                let elements = values::collection_elements(bytes).map_err(bad)?;
                let mut out = Vec::with_capacity(elements.len());
                for e in elements {
                    let key = self.list_key(ts, prepend);
                    out.push(cell(&key, e));
                }
                out
            }
            CollectionKind::Udt => {
                let ColumnType::Udt { fields, .. } = &col.typ else { return Ok(Vec::new()) };
                values::udt_fields(bytes, fields.len())
                    .map_err(bad)?
                    .into_iter()
                    .enumerate()
                    .filter_map(|(i, f)| f.map(|f| cell(&(i as i16).to_be_bytes(), Some(f))))
                    .collect()
            }
        })
    }

    /// A list key in Scylla's scheme: a timeuuid of the write time plus a
    /// per-statement sequence, mirrored around 2010-01-01 for prepends so
    /// that they sort before appended keys.
    fn list_key(&mut self, ts: i64, prepend: bool) -> [u8; 16] {
        let seq = self.list_seq;
        self.list_seq += 1;
        let micros = if prepend { PREPEND_EPOCH_MICROS - (ts - PREPEND_EPOCH_MICROS) } else { ts };
        let mut key = values::timeuuid_from_micros(micros, self.cx.list_node);
        // The sub-microsecond digit and the clock sequence carry `seq`, so
        // keys grow in element order.
        let time = (u64::from_be_bytes([0, 0, 0, 0, key[0], key[1], key[2], key[3]]) + u64::from(seq % 10)) as u32;
        key[0..4].copy_from_slice(&time.to_be_bytes());
        let clock = ((seq / 10) & 0x3fff) as u16 | 0x8000;
        key[8..10].copy_from_slice(&clock.to_be_bytes());
        key
    }

    fn assignment(
        &mut self,
        m: &mut PartitionMutation,
        rows: &Option<Vec<Vec<Bytes>>>,
        a: &Assignment,
        ts: i64,
        ttl: i32,
    ) -> Result<()> {
        let schema = m.schema.clone();
        let name = match a {
            Assignment::Set { column, .. }
            | Assignment::Append { column, .. }
            | Assignment::Prepend { column, .. }
            | Assignment::Remove { column, .. }
            | Assignment::SetElement { column, .. }
            | Assignment::SetField { column, .. } => column,
        };
        let idx = self.column(&schema, name)?;
        if schema.is_key(idx) {
            return Err(MutationError::Unsupported(format!("assignment to key column {name}")));
        }
        let col = schema.columns[idx].clone();
        let kind = col.collection();
        let change = match (a, kind) {
            (Assignment::Set { value, .. }, _) => {
                let v = self.value(value, &col.typ, name)?;
                self.overwrite(&schema, idx, v, ts, ttl)?
            }
            (Assignment::Append { value, .. } | Assignment::Prepend { value, .. }, Some(kind)) => {
                let prepend = matches!(a, Assignment::Prepend { .. });
                match self.value(value, &col.typ, name)? {
                    Val::Bytes(b) => {
                        let cells = self.elements(&schema, idx, kind, &b, ts, ttl, prepend)?;
                        Some(ColumnChange::Collection(CollectionChange { tombstone: None, cells }))
                    }
                    _ => None,
                }
            }
            (Assignment::Remove { value, .. }, Some(kind)) => {
                let typ = match (&col.typ, kind) {
                    (ColumnType::Map(k, _), CollectionKind::Map) => ColumnType::Set(k.clone()),
                    (t, _) => t.clone(),
                };
                match (self.value(value, &typ, name)?, kind) {
                    (Val::Bytes(b), CollectionKind::Map | CollectionKind::Set) => {
                        let bad = |e: values::ValueError| MutationError::BadValue {
                            column: name.clone(),
                            reason: e.to_string(),
                        };
                        let cells = values::collection_elements(&b)
                            .map_err(bad)?
                            .into_iter()
                            .flatten()
                            .map(|k| ElementCell { key: Bytes::copy_from_slice(k), ts, ttl: 0, value: None })
                            .collect();
                        Some(ColumnChange::Collection(CollectionChange { tombstone: None, cells }))
                    }
                    (Val::Bytes(_), _) => {
                        // `l = l - [v]`: the keys holding v are Scylla's secret.
                        self.out.inexact += 1;
                        Some(ColumnChange::Collection(CollectionChange::default()))
                    }
                    _ => None,
                }
            }
            (Assignment::SetElement { key, value, .. }, Some(CollectionKind::Map)) => {
                let ColumnType::Map(kt, vt) = &col.typ else { return Ok(()) };
                let Val::Bytes(k) = self.value(key, kt, name)? else {
                    return Err(MutationError::BadValue { column: name.clone(), reason: "null map key".into() });
                };
                self.element(k, self.value(value, vt, name)?, ts, ttl)
            }
            (Assignment::SetElement { key, value, .. }, Some(CollectionKind::List)) => {
                let ColumnType::List(vt) = &col.typ else { return Ok(()) };
                let Val::Bytes(i) = self.value(key, &ColumnType::Int, name)? else {
                    return Err(MutationError::BadValue { column: name.clone(), reason: "null list index".into() });
                };
                self.out.inexact += 1;
                let v = self.value(value, vt, name)?;
                self.element(positional_key(&i), v, ts, ttl)
            }
            (Assignment::SetField { field, value, .. }, Some(CollectionKind::Udt)) => {
                let ColumnType::Udt { fields, .. } = &col.typ else { return Ok(()) };
                let f = fields
                    .iter()
                    .position(|(n, _)| n == field)
                    .ok_or_else(|| MutationError::UnknownColumn(format!("{name}.{field}")))?;
                let v = self.value(value, &fields[f].1, name)?;
                self.element(Bytes::copy_from_slice(&(f as i16).to_be_bytes()), v, ts, ttl)
            }
            _ => return Err(MutationError::Unsupported(format!("this assignment to {name} ({:?})", col.typ))),
        };
        let Some(change) = change else { return Ok(()) };
        self.apply(m, rows, idx, change)
    }

    fn element(&self, key: Bytes, v: Val, ts: i64, ttl: i32) -> Option<ColumnChange> {
        let cell = match v {
            Val::Unset => return None,
            Val::Null => ElementCell { key, ts, ttl: 0, value: None },
            Val::Bytes(b) => ElementCell { key, ts, ttl, value: Some(b) },
        };
        Some(ColumnChange::Collection(CollectionChange { tombstone: None, cells: vec![cell] }))
    }

    /// Puts a column change on the static row or on every selected row.
    fn apply(
        &self,
        m: &mut PartitionMutation,
        rows: &Option<Vec<Vec<Bytes>>>,
        idx: usize,
        change: ColumnChange,
    ) -> Result<()> {
        let schema = m.schema.clone();
        let one = || RowChange { columns: BTreeMap::from([(idx, change.clone())]), ..RowChange::default() };
        if schema.columns[idx].kind == ColumnKind::Static {
            m.static_row.merge(one());
            return Ok(());
        }
        let rows = rows.as_ref().ok_or_else(|| {
            MutationError::Where(format!("a write to {} needs the full clustering key", schema.columns[idx].name))
        })?;
        for ck in rows {
            m.row_mut(ck.clone()).merge(one());
        }
        Ok(())
    }

    fn delete_target(
        &mut self,
        m: &mut PartitionMutation,
        rows: &Option<Vec<Vec<Bytes>>>,
        t: &DeleteTarget,
        ts: i64,
    ) -> Result<()> {
        let schema = m.schema.clone();
        let name = match t {
            DeleteTarget::Column(c)
            | DeleteTarget::Element { column: c, .. }
            | DeleteTarget::Field { column: c, .. } => c,
        };
        let idx = self.column(&schema, name)?;
        let col = schema.columns[idx].clone();
        let change = match (t, col.collection()) {
            (DeleteTarget::Column(_), None) => ColumnChange::Atomic(Cell { ts, ttl: 0, value: None }),
            (DeleteTarget::Column(_), Some(_)) => {
                ColumnChange::Collection(CollectionChange { tombstone: Some(ts), cells: Vec::new() })
            }
            (DeleteTarget::Element { key, .. }, Some(CollectionKind::Map | CollectionKind::Set)) => {
                let kt = col.key_type();
                let Val::Bytes(k) = self.value(key, &kt, name)? else { return Ok(()) };
                let cell = ElementCell { key: k, ts, ttl: 0, value: None };
                ColumnChange::Collection(CollectionChange { tombstone: None, cells: vec![cell] })
            }
            (DeleteTarget::Element { key, .. }, Some(CollectionKind::List)) => {
                let Val::Bytes(i) = self.value(key, &ColumnType::Int, name)? else { return Ok(()) };
                self.out.inexact += 1;
                let cell = ElementCell { key: positional_key(&i), ts, ttl: 0, value: None };
                ColumnChange::Collection(CollectionChange { tombstone: None, cells: vec![cell] })
            }
            (DeleteTarget::Field { field, .. }, Some(CollectionKind::Udt)) => {
                let ColumnType::Udt { fields, .. } = &col.typ else { return Ok(()) };
                let f = fields
                    .iter()
                    .position(|(n, _)| n == field)
                    .ok_or_else(|| MutationError::UnknownColumn(format!("{name}.{field}")))?;
                let cell =
                    ElementCell { key: Bytes::copy_from_slice(&(f as i16).to_be_bytes()), ts, ttl: 0, value: None };
                ColumnChange::Collection(CollectionChange { tombstone: None, cells: vec![cell] })
            }
            _ => return Err(MutationError::Unsupported(format!("this DELETE of {name}"))),
        };
        self.apply(m, rows, idx, change)
    }

    /// Values of one column's `=` / `IN` relation.
    fn equal_values(&self, schema: &TableSchema, idx: usize, relations: &[Relation]) -> Result<Option<Vec<Bytes>>> {
        let col = &schema.columns[idx];
        let key = |v: Val| match v {
            Val::Bytes(b) => Ok(b),
            _ => Err(MutationError::Where(format!("null key value for {}", col.name))),
        };
        for r in relations {
            match r {
                Relation::Compare { column, op: CompareOp::Eq, value } if *column == col.name => {
                    return Ok(Some(vec![key(self.value(value, &col.typ, column)?)?]));
                }
                Relation::In { column, values } if *column == col.name => {
                    return Ok(Some(match values {
                        InValues::List(terms) => {
                            terms.iter().map(|t| key(self.value(t, &col.typ, column)?)).collect::<Result<_>>()?
                        }
                        InValues::Marker(t) => {
                            match self.value(t, &ColumnType::List(Box::new(col.typ.clone())), column)? {
                                Val::Bytes(b) => values::collection_elements(&b)
                                    .map_err(|e| MutationError::BadValue {
                                        column: column.clone(),
                                        reason: e.to_string(),
                                    })?
                                    .into_iter()
                                    .flatten()
                                    .map(Bytes::copy_from_slice)
                                    .collect(),
                                _ => return Err(MutationError::Where(format!("null IN list for {column}"))),
                            }
                        }
                    }));
                }
                _ => {}
            }
        }
        Ok(None)
    }

    fn partition_keys(&self, schema: &TableSchema, relations: &[Relation]) -> Result<Vec<Vec<Bytes>>> {
        let mut keys: Vec<Vec<Bytes>> = vec![Vec::new()];
        for &idx in &schema.partition_key {
            let values = self.equal_values(schema, idx, relations)?.ok_or_else(|| {
                MutationError::Where(format!("no value for partition key column {}", schema.columns[idx].name))
            })?;
            keys = product(keys, &values);
        }
        Ok(keys)
    }

    /// Full clustering keys selected by `=`/`IN`, `None` when the WHERE
    /// clause names no clustering column (a static-only write).
    fn clustering_keys(&self, schema: &TableSchema, relations: &[Relation]) -> Result<Option<Vec<Vec<Bytes>>>> {
        if schema.clustering.is_empty() {
            return Ok(Some(vec![Vec::new()]));
        }
        let mut keys: Vec<Vec<Bytes>> = vec![Vec::new()];
        for (n, &idx) in schema.clustering.iter().enumerate() {
            match self.equal_values(schema, idx, relations)? {
                Some(values) => keys = product(keys, &values),
                None if n == 0 => return Ok(None),
                None => {
                    return Err(MutationError::Where(format!(
                        "no value for clustering column {}",
                        schema.columns[idx].name
                    )))
                }
            }
        }
        Ok(Some(keys))
    }

    /// `DELETE FROM` without columns: a partition, rows, or a range.
    fn delete_rows(&self, m: &mut PartitionMutation, relations: &[Relation], ts: i64) -> Result<()> {
        let schema = m.schema.clone();
        // Equality prefix.
        let mut prefixes: Vec<Vec<Bytes>> = vec![Vec::new()];
        let mut n = 0;
        while n < schema.clustering.len() {
            match self.equal_values(&schema, schema.clustering[n], relations)? {
                Some(values) => prefixes = product(prefixes, &values),
                None => break,
            }
            n += 1;
        }
        if n == 0 && !has_slice(&schema, relations) {
            m.partition_tombstone = Some(ts);
            return Ok(());
        }
        if n == schema.clustering.len() {
            for ck in prefixes {
                m.row_mut(ck).tombstone = Some(ts);
            }
            return Ok(());
        }
        // A slice on the next column(s).
        let (mut lower, mut upper): (Option<SliceBound>, Option<SliceBound>) = (None, None);
        for r in relations {
            let (columns, op, values): (Vec<&String>, CompareOp, Vec<&Term>) = match r {
                Relation::Compare { column, op, value } if *op != CompareOp::Eq => (vec![column], *op, vec![value]),
                Relation::MultiCompare { columns, op, values: MultiValues::List(terms) } => {
                    (columns.iter().collect(), *op, terms.iter().collect())
                }
                Relation::MultiCompare { .. } => {
                    return Err(MutationError::Where("a tuple relation with a single bind marker".into()))
                }
                _ => continue,
            };
            let mut bound = Vec::new();
            for (i, (c, t)) in columns.iter().zip(values).enumerate() {
                let Some(&idx) = schema.clustering.get(n + i) else {
                    return Err(MutationError::Where(format!("{c} is not the next clustering column")));
                };
                if schema.columns[idx].name != **c {
                    return Err(MutationError::Where(format!("{c} is not the next clustering column")));
                }
                match self.value(t, &schema.columns[idx].typ, c)? {
                    Val::Bytes(b) => bound.push(b),
                    _ => return Err(MutationError::Where(format!("null bound for {c}"))),
                }
            }
            match op {
                CompareOp::Gt => lower = Some((bound, false)),
                CompareOp::Ge => lower = Some((bound, true)),
                CompareOp::Lt => upper = Some((bound, false)),
                CompareOp::Le => upper = Some((bound, true)),
                CompareOp::Eq => {}
            }
        }
        for prefix in prefixes {
            let bound = |b: &Option<SliceBound>| match b {
                Some((values, inclusive)) => {
                    let mut p = prefix.clone();
                    p.extend(values.iter().cloned());
                    RangeBound { prefix: p, inclusive: *inclusive }
                }
                None => RangeBound { prefix: prefix.clone(), inclusive: true },
            };
            let (start, end) = (bound(&lower), bound(&upper));
            if !range_is_empty(&schema, &start, &end) {
                m.ranges.push(RangeTombstone { start, end, ts });
            }
        }
        Ok(())
    }
}

/// A slice bound before it is put after the equality prefix: values and inclusiveness.
type SliceBound = (Vec<Bytes>, bool);

fn has_slice(schema: &TableSchema, relations: &[Relation]) -> bool {
    relations.iter().any(|r| match r {
        Relation::Compare { column, .. } | Relation::In { column, .. } => {
            schema.clustering.iter().any(|&i| schema.columns[i].name == *column)
        }
        Relation::MultiCompare { .. } => true,
    })
}

/// A list key standing for position `i` (inexact, see the module docs).
fn positional_key(i: &[u8]) -> Bytes {
    let mut key = [0u8; 16];
    key[6] = 0x10;
    key[8] = 0x80;
    let n = i.len().min(4);
    key[16 - n..].copy_from_slice(&i[i.len() - n..]);
    Bytes::copy_from_slice(&key)
}

fn product(keys: Vec<Vec<Bytes>>, values: &[Bytes]) -> Vec<Vec<Bytes>> {
    let mut out = Vec::with_capacity(keys.len() * values.len());
    for k in keys {
        for v in values {
            let mut k = k.clone();
            k.push(v.clone());
            out.push(k);
        }
    }
    out
}

/// A range that selects nothing (`ck < 1 AND ck > 2`) writes no tombstone.
fn range_is_empty(schema: &TableSchema, start: &RangeBound, end: &RangeBound) -> bool {
    let common = start.prefix.len().min(end.prefix.len());
    match compare_clustering(schema, &start.prefix[..common], &end.prefix[..common]) {
        Ordering::Greater => true,
        Ordering::Less => false,
        Ordering::Equal => start.prefix.len() == end.prefix.len() && !(start.inclusive && end.inclusive),
    }
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
