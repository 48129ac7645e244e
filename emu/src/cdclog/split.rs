//! From a [`PartitionMutation`] to the log rows Scylla writes for it:
//! records, `cdc$batch_seq_no`, operations, `cdc$ttl`, deleted flags and
//! elements, pre- and post-images — `docs/cdc-log.md` §3.1–§3.7.
//!
//! A mutation whose changes share one timestamp and one TTL (and that an
//! INSERT, UPDATE or DELETE could have produced) becomes one record in
//! visiting order; any other is split into one record per timestamp
//! (collection tombstones count as `ts + 1`), each ordered static updates,
//! inserts, clustering updates (by TTL), row deletes, range deletes, the
//! partition delete. Images come from the row states read before the write
//! ([`Images`]); later records of one mutation see the effect of earlier ones.

use std::collections::{BTreeMap, BTreeSet};

use bytes::Bytes;

use super::mutation::{compare_clustering, ColumnChange, PartitionMutation, RangeBound, RangeTombstone};
use super::schema::{CollectionKind, TableSchema};
use super::values::{build_collection, build_map, build_udt, compare};
use crate::cdc::{ColumnKind, Delta, PreImage};

/// `cdc$operation` codes (§2).
pub mod op {
    /// Pre-image.
    pub const PRE_IMAGE: i8 = 0;
    /// Update.
    pub const UPDATE: i8 = 1;
    /// Insert.
    pub const INSERT: i8 = 2;
    /// Row delete.
    pub const ROW_DELETE: i8 = 3;
    /// Partition delete.
    pub const PARTITION_DELETE: i8 = 4;
    /// Range delete, start bound inclusive.
    pub const RANGE_START_INCLUSIVE: i8 = 5;
    /// Range delete, start bound exclusive.
    pub const RANGE_START_EXCLUSIVE: i8 = 6;
    /// Range delete, end bound inclusive.
    pub const RANGE_END_INCLUSIVE: i8 = 7;
    /// Range delete, end bound exclusive.
    pub const RANGE_END_EXCLUSIVE: i8 = 8;
    /// Post-image.
    pub const POST_IMAGE: i8 = 9;
}

/// One log row: its operation, `cdc$ttl` and the non-null columns (log
/// column name → serialized value). Metadata columns other than
/// `cdc$operation` and `cdc$ttl` are added by the writer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogRow {
    /// `cdc$operation`.
    pub op: i8,
    /// `cdc$ttl`.
    pub ttl: Option<i64>,
    /// Non-null base-derived columns, in schema order.
    pub values: Vec<(String, Bytes)>,
}

/// One record: rows sharing one `cdc$time`, numbered from 0.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogRecord {
    /// Write timestamp of the record (µs).
    pub ts: i64,
    /// The rows in `cdc$batch_seq_no` order.
    pub rows: Vec<LogRow>,
}

/// A value in a row state (for images).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StateValue {
    /// An atomic value.
    Atomic(Bytes),
    /// A multi-cell column's cells, sorted by key.
    Cells(Vec<(Bytes, Bytes)>),
}

/// The columns of one row that are not null.
pub type RowState = BTreeMap<usize, StateValue>;

/// The affected rows as they were before the write (rows absent here did
/// not exist).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Images {
    /// The static row, if it had any value.
    pub static_row: Option<RowState>,
    /// Clustering rows that existed.
    pub rows: Vec<(Vec<Bytes>, RowState)>,
}

const TRUE: &[u8] = &[1];

fn bucket_ts_of(change: &ColumnChange) -> Vec<(i64, i32)> {
    match change {
        ColumnChange::Atomic(c) => vec![(c.ts, if c.value.is_some() { c.ttl } else { 0 })],
        ColumnChange::Collection(c) => {
            let mut v: Vec<(i64, i32)> = c.tombstone.map(|t| (t + 1, 0)).into_iter().collect();
            v.extend(c.cells.iter().map(|e| (e.ts, if e.value.is_some() { e.ttl } else { 0 })));
            v
        }
    }
}

/// The part of a column change written at `ts` with `ttl`.
fn slice(change: &ColumnChange, ts: i64, ttl: i32) -> Option<ColumnChange> {
    match change {
        ColumnChange::Atomic(c) => {
            let c_ttl = if c.value.is_some() { c.ttl } else { 0 };
            (c.ts == ts && c_ttl == ttl).then(|| change.clone())
        }
        ColumnChange::Collection(c) => {
            let tombstone = c.tombstone.filter(|t| t + 1 == ts && ttl == 0);
            let cells: Vec<_> = c
                .cells
                .iter()
                .filter(|e| e.ts == ts && (if e.value.is_some() { e.ttl } else { 0 }) == ttl)
                .cloned()
                .collect();
            (tombstone.is_some() || !cells.is_empty())
                .then(|| ColumnChange::Collection(super::mutation::CollectionChange { tombstone, cells }))
        }
    }
}

fn has_live(change: &ColumnChange) -> bool {
    match change {
        ColumnChange::Atomic(c) => c.value.is_some(),
        ColumnChange::Collection(c) => c.cells.iter().any(|e| e.value.is_some()),
    }
}

/// `should_split` of §3.4.
fn should_split(m: &PartitionMutation) -> bool {
    let mut tss = BTreeSet::new();
    let mut ttls = BTreeSet::new();
    let mut note = |items: Vec<(i64, i32)>| {
        for (ts, ttl) in items {
            tss.insert(ts);
            ttls.insert(ttl);
        }
    };
    let had_static = !m.static_row.columns.is_empty();
    for c in m.static_row.columns.values() {
        note(bucket_ts_of(c));
    }
    let (mut had_upsert, mut had_row) = (false, false);
    for (_, row) in &m.rows {
        if row.is_empty() {
            continue;
        }
        if had_static {
            return true;
        }
        if let Some((ts, ttl)) = row.marker {
            note(vec![(ts, ttl)]);
        }
        for c in row.columns.values() {
            if row.marker.is_some() && matches!(c, ColumnChange::Collection(_)) && has_live(c) {
                return true;
            }
            note(bucket_ts_of(c));
        }
        if row.marker.is_some() || !row.columns.is_empty() {
            had_upsert = true;
        }
        if let Some(t) = row.tombstone {
            if had_static || had_upsert {
                return true;
            }
            note(vec![(t, 0)]);
        }
        had_row = true;
    }
    for r in &m.ranges {
        if had_static || had_row {
            return true;
        }
        note(vec![(r.ts, 0)]);
    }
    if m.partition_tombstone.is_some() && (had_static || had_row || !m.ranges.is_empty()) {
        return true;
    }
    tss.len() != 1 || ttls.len() > 1
}

/// Builds the records of one mutation.
pub fn records(m: &PartitionMutation, images: &Images) -> Vec<LogRecord> {
    let mut w = Writer { m, schema: &m.schema, state: images.clone() };
    if !should_split(m) {
        return w.unsplit().into_iter().collect();
    }
    let mut buckets = BTreeSet::new();
    for c in m.static_row.columns.values() {
        buckets.extend(bucket_ts_of(c).into_iter().map(|x| x.0));
    }
    for (_, row) in &m.rows {
        buckets.extend(row.marker.map(|x| x.0));
        buckets.extend(row.tombstone);
        for c in row.columns.values() {
            buckets.extend(bucket_ts_of(c).into_iter().map(|x| x.0));
        }
    }
    buckets.extend(m.ranges.iter().map(|r| r.ts));
    buckets.extend(m.partition_tombstone);
    buckets.into_iter().filter_map(|ts| w.bucket(ts)).collect()
}

/// A row's key: `None` for the static row.
type RowKey = Option<Vec<Bytes>>;

struct Writer<'a> {
    m: &'a PartitionMutation,
    schema: &'a TableSchema,
    state: Images,
}

/// A delta row before it is rendered.
struct DeltaRow {
    op: i8,
    key: RowKey,
    ttl: i32,
    columns: BTreeMap<usize, ColumnChange>,
}

impl Writer<'_> {
    fn unsplit(&mut self) -> Option<LogRecord> {
        let m = self.m;
        let mut items: Vec<(i64, i32)> = Vec::new();
        let mut deltas = Vec::new();
        if !m.static_row.columns.is_empty() {
            m.static_row.columns.values().for_each(|c| items.extend(bucket_ts_of(c)));
            deltas.push(DeltaRow { op: op::UPDATE, key: None, ttl: 0, columns: m.static_row.columns.clone() });
        }
        for (ck, row) in &m.rows {
            if row.marker.is_some() || !row.columns.is_empty() {
                items.extend(row.marker);
                row.columns.values().for_each(|c| items.extend(bucket_ts_of(c)));
                let op = if row.marker.is_some() { op::INSERT } else { op::UPDATE };
                deltas.push(DeltaRow { op, key: Some(ck.clone()), ttl: 0, columns: row.columns.clone() });
            }
            if let Some(t) = row.tombstone {
                items.push((t, 0));
                deltas.push(DeltaRow { op: op::ROW_DELETE, key: Some(ck.clone()), ttl: 0, columns: BTreeMap::new() });
            }
        }
        items.extend(m.ranges.iter().map(|r| (r.ts, 0)));
        // One timestamp and one TTL (or none) by `should_split`.
        let ttl = items.iter().map(|x| x.1).max().unwrap_or(0);
        for d in &mut deltas {
            let live = d.columns.values().any(has_live) || d.op == op::INSERT;
            d.ttl = if live { ttl } else { 0 };
        }
        let ts = items.first().map(|x| x.0).or(m.partition_tombstone)?;
        Some(self.record(ts, deltas, &m.ranges, m.partition_tombstone.is_some()))
    }

    fn bucket(&mut self, ts: i64) -> Option<LogRecord> {
        let m = self.m;
        let mut statics = Vec::new();
        let mut groups: BTreeMap<i32, BTreeMap<usize, ColumnChange>> = BTreeMap::new();
        for (&i, c) in &m.static_row.columns {
            for (t, ttl) in bucket_ts_of(c) {
                if t == ts {
                    if let Some(part) = slice(c, ts, ttl) {
                        groups.entry(ttl).or_default().insert(i, part);
                    }
                }
            }
        }
        for (ttl, columns) in groups {
            statics.push(DeltaRow { op: op::UPDATE, key: None, ttl, columns });
        }
        let (mut inserts, mut updates, mut deletes) = (Vec::new(), Vec::new(), Vec::new());
        for (ck, row) in &m.rows {
            let mut groups: BTreeMap<i32, BTreeMap<usize, ColumnChange>> = BTreeMap::new();
            for (&i, c) in &row.columns {
                for (t, ttl) in bucket_ts_of(c) {
                    if t == ts {
                        if let Some(part) = slice(c, ts, ttl) {
                            groups.entry(ttl).or_default().insert(i, part);
                        }
                    }
                }
            }
            let marker = row.marker.filter(|mk| mk.0 == ts);
            let mut row_updates = Vec::new();
            if let Some((_, mttl)) = marker {
                let mut columns = groups.remove(&mttl).unwrap_or_default();
                // Collection columns that only add cells cannot be part of an
                // INSERT: they move to an update with the same TTL.
                let moved: BTreeMap<usize, ColumnChange> = columns
                    .iter()
                    .filter(|(_, c)| matches!(c, ColumnChange::Collection(cc) if cc.tombstone.is_none()))
                    .map(|(i, c)| (*i, c.clone()))
                    .collect();
                columns.retain(|i, _| !moved.contains_key(i));
                inserts.push(DeltaRow { op: op::INSERT, key: Some(ck.clone()), ttl: mttl, columns });
                if !moved.is_empty() {
                    groups.insert(mttl, moved);
                }
            }
            for (ttl, columns) in groups {
                row_updates.push(DeltaRow { op: op::UPDATE, key: Some(ck.clone()), ttl, columns });
            }
            updates.extend(row_updates);
            if row.tombstone == Some(ts) {
                deletes.push(DeltaRow { op: op::ROW_DELETE, key: Some(ck.clone()), ttl: 0, columns: BTreeMap::new() });
            }
        }
        let ranges: Vec<_> = m.ranges.iter().filter(|r| r.ts == ts).cloned().collect();
        let partition = m.partition_tombstone == Some(ts);
        let mut deltas = statics;
        deltas.extend(inserts);
        deltas.extend(updates);
        deltas.extend(deletes);
        if deltas.is_empty() && ranges.is_empty() && !partition {
            return None;
        }
        for d in &mut deltas {
            if !(d.columns.values().any(has_live) || d.op == op::INSERT) {
                d.ttl = 0;
            }
        }
        Some(self.record(ts, deltas, &ranges, partition))
    }

    /// Renders a record: pre-images, deltas, ranges, partition delete,
    /// post-images; and moves the row states past it.
    fn record(&mut self, ts: i64, deltas: Vec<DeltaRow>, ranges: &[RangeTombstone], partition: bool) -> LogRecord {
        let options = self.schema.options;
        let mut rows = Vec::new();
        // Rows whose images matter, in order: static first, then clustering.
        let mut affected: Vec<(RowKey, BTreeSet<usize>, bool)> = Vec::new();
        for d in &deltas {
            let touched: BTreeSet<usize> =
                if d.op == op::ROW_DELETE { self.kind_columns(&d.key) } else { d.columns.keys().copied().collect() };
            match affected.iter_mut().find(|a| a.0 == d.key) {
                Some(a) => {
                    a.1.extend(touched);
                    a.2 |= d.op == op::ROW_DELETE;
                }
                None => affected.push((d.key.clone(), touched, d.op == op::ROW_DELETE)),
            }
        }
        if partition && self.schema.clustering.is_empty() {
            affected.push((Some(Vec::new()), self.kind_columns(&Some(Vec::new())), true));
        }
        affected.sort_by(|a, b| match (&a.0, &b.0) {
            (None, None) => std::cmp::Ordering::Equal,
            (None, _) => std::cmp::Ordering::Less,
            (_, None) => std::cmp::Ordering::Greater,
            (Some(x), Some(y)) => compare_clustering(self.schema, x, y),
        });
        if options.preimage != PreImage::Off {
            for (key, touched, _) in &affected {
                let Some(state) = self.state_of(key).cloned() else { continue };
                let included =
                    if options.preimage == PreImage::Full { self.kind_columns(key) } else { touched.clone() };
                let mut values = self.key_values(key.as_deref());
                for i in included {
                    let name = &self.schema.columns[i].name;
                    match state.get(&i) {
                        Some(v) => values.push((name.clone(), self.render_state(i, v))),
                        None => values.push((format!("cdc$deleted_{name}"), Bytes::from_static(TRUE))),
                    }
                }
                rows.push(LogRow { op: op::PRE_IMAGE, ttl: None, values: self.order(values) });
            }
        }
        for d in &deltas {
            let mut values = self.key_values(d.key.as_deref());
            if options.delta == Delta::Full {
                for (&i, c) in &d.columns {
                    values.extend(self.render_change(i, c));
                }
            }
            let ttl = (d.ttl > 0).then_some(i64::from(d.ttl));
            // No row marker in a compact table: Scylla sees an update.
            let op = if self.schema.compact && d.op == op::INSERT { op::UPDATE } else { d.op };
            rows.push(LogRow { op, ttl, values: self.order(values) });
            self.apply(d);
        }
        for r in ranges {
            let start = if r.start.inclusive { op::RANGE_START_INCLUSIVE } else { op::RANGE_START_EXCLUSIVE };
            let end = if r.end.inclusive { op::RANGE_END_INCLUSIVE } else { op::RANGE_END_EXCLUSIVE };
            rows.push(LogRow { op: start, ttl: None, values: self.bound_values(&r.start) });
            rows.push(LogRow { op: end, ttl: None, values: self.bound_values(&r.end) });
            let schema = self.schema;
            self.state.rows.retain(|(ck, _)| !in_range(schema, ck, &r.start, &r.end));
        }
        if partition {
            rows.push(LogRow { op: op::PARTITION_DELETE, ttl: None, values: self.key_values(None) });
            self.state = Images::default();
        }
        if options.postimage {
            for (key, _, _) in &affected {
                if key.is_some() && self.state_of(key).is_none() {
                    continue;
                }
                let state = self.state_of(key).cloned().unwrap_or_default();
                let mut values = self.key_values(key.as_deref());
                for (i, v) in &state {
                    values.push((self.schema.columns[*i].name.clone(), self.render_state(*i, v)));
                }
                rows.push(LogRow { op: op::POST_IMAGE, ttl: None, values: self.order(values) });
            }
        }
        LogRecord { ts, rows }
    }

    /// Static columns for the static row, regular columns for a clustering row.
    fn kind_columns(&self, key: &RowKey) -> BTreeSet<usize> {
        let want = if key.is_none() { ColumnKind::Static } else { ColumnKind::Regular };
        (0..self.schema.columns.len()).filter(|&i| self.schema.columns[i].kind == want).collect()
    }

    fn state_of(&self, key: &RowKey) -> Option<&RowState> {
        match key {
            None => self.state.static_row.as_ref(),
            Some(ck) => self.state.rows.iter().find(|(k, _)| k == ck).map(|(_, s)| s),
        }
    }

    /// Applies a delta to the row states (for later images).
    fn apply(&mut self, d: &DeltaRow) {
        let schema = self.schema;
        if d.op == op::ROW_DELETE {
            self.state.rows.retain(|(k, _)| Some(k) != d.key.as_ref());
            return;
        }
        let state: &mut RowState = match &d.key {
            None => self.state.static_row.get_or_insert_with(RowState::new),
            Some(ck) => {
                let pos = match self.state.rows.iter().position(|(k, _)| k == ck) {
                    Some(p) => p,
                    None => {
                        self.state.rows.push((ck.clone(), RowState::new()));
                        self.state.rows.len() - 1
                    }
                };
                &mut self.state.rows[pos].1
            }
        };
        for (&i, c) in &d.columns {
            match c {
                ColumnChange::Atomic(cell) => match &cell.value {
                    Some(v) => {
                        state.insert(i, StateValue::Atomic(v.clone()));
                    }
                    None => {
                        state.remove(&i);
                    }
                },
                ColumnChange::Collection(cc) => {
                    let mut cells = match state.remove(&i) {
                        Some(StateValue::Cells(c)) if cc.tombstone.is_none() => c,
                        _ => Vec::new(),
                    };
                    let kt = schema.columns[i].key_type();
                    for e in &cc.cells {
                        cells.retain(|(k, _)| *k != e.key);
                        if let Some(v) = &e.value {
                            cells.push((e.key.clone(), v.clone()));
                        }
                    }
                    cells.sort_by(|a, b| compare(&kt, &a.0, &b.0));
                    if !cells.is_empty() {
                        state.insert(i, StateValue::Cells(cells));
                    }
                }
            }
        }
        // A clustering row with neither marker nor value no longer exists;
        // one written by an INSERT does.
        if let Some(ck) = &d.key {
            if d.op != op::INSERT {
                let empty = self.state.rows.iter().any(|(k, s)| k == ck && s.is_empty());
                if empty {
                    self.state.rows.retain(|(k, _)| k != ck);
                }
            }
        }
    }

    fn key_values(&self, ck: Option<&[Bytes]>) -> Vec<(String, Bytes)> {
        let mut v: Vec<(String, Bytes)> = self
            .schema
            .partition_key
            .iter()
            .zip(&self.m.key)
            .map(|(&i, b)| (self.schema.columns[i].name.clone(), b.clone()))
            .collect();
        if let Some(ck) = ck {
            v.extend(
                self.schema.clustering.iter().zip(ck).map(|(&i, b)| (self.schema.columns[i].name.clone(), b.clone())),
            );
        }
        v
    }

    fn bound_values(&self, b: &RangeBound) -> Vec<(String, Bytes)> {
        self.key_values(Some(&b.prefix))
    }

    /// Puts columns in schema order (key columns first), so rows compare
    /// independently of how they were assembled.
    fn order(&self, mut values: Vec<(String, Bytes)>) -> Vec<(String, Bytes)> {
        let rank = |name: &str| {
            let base = name
                .strip_prefix("cdc$deleted_elements_")
                .or_else(|| name.strip_prefix("cdc$deleted_"))
                .unwrap_or(name);
            let i = self.schema.index(base).unwrap_or(usize::MAX);
            let sub = if name.starts_with("cdc$deleted_elements_") {
                2
            } else {
                usize::from(name.starts_with("cdc$deleted_"))
            };
            (i, sub)
        };
        values.sort_by_key(|(n, _)| rank(n));
        values
    }

    fn render_change(&self, i: usize, c: &ColumnChange) -> Vec<(String, Bytes)> {
        let col = &self.schema.columns[i];
        let name = &col.name;
        let mut out = Vec::new();
        match c {
            ColumnChange::Atomic(cell) => match &cell.value {
                Some(v) => out.push((name.clone(), v.clone())),
                None => out.push((format!("cdc$deleted_{name}"), Bytes::from_static(TRUE))),
            },
            ColumnChange::Collection(cc) => {
                let kt = col.key_type();
                let mut live: Vec<(Bytes, Bytes)> =
                    cc.cells.iter().filter_map(|e| e.value.clone().map(|v| (e.key.clone(), v))).collect();
                live.sort_by(|a, b| compare(&kt, &a.0, &b.0));
                let mut dead: Vec<Bytes> =
                    cc.cells.iter().filter(|e| e.value.is_none()).map(|e| e.key.clone()).collect();
                dead.sort_by(|a, b| compare(&kt, a, b));
                dead.dedup();
                let is_udt = col.collection() == Some(CollectionKind::Udt);
                if !live.is_empty() || is_udt {
                    out.push((name.clone(), self.render_cells(i, &live)));
                }
                if cc.tombstone.is_some() {
                    out.push((format!("cdc$deleted_{name}"), Bytes::from_static(TRUE)));
                }
                if !dead.is_empty() {
                    out.push((
                        format!("cdc$deleted_elements_{name}"),
                        Bytes::from(build_collection(dead.iter().map(|b| &b[..]))),
                    ));
                }
            }
        }
        out
    }

    fn render_state(&self, i: usize, v: &StateValue) -> Bytes {
        match v {
            StateValue::Atomic(b) => b.clone(),
            StateValue::Cells(cells) => self.render_cells(i, cells),
        }
    }

    /// A multi-cell column's cells as its frozen log type.
    fn render_cells(&self, i: usize, cells: &[(Bytes, Bytes)]) -> Bytes {
        let col = &self.schema.columns[i];
        Bytes::from(match col.collection() {
            Some(CollectionKind::Set) => build_collection(cells.iter().map(|(k, _)| &k[..])),
            Some(CollectionKind::Udt) => {
                let n = match &col.typ {
                    shardwise_protocol::types::ColumnType::Udt { fields, .. } => fields.len(),
                    _ => 0,
                };
                let mut fields: Vec<Option<&[u8]>> = vec![None; n];
                for (k, v) in cells {
                    if let Ok(idx) = <[u8; 2]>::try_from(&k[..]) {
                        if let Some(slot) = fields.get_mut(i16::from_be_bytes(idx) as usize) {
                            *slot = Some(&v[..]);
                        }
                    }
                }
                build_udt(&fields)
            }
            _ => build_map(cells.iter().map(|(k, v)| (&k[..], &v[..]))),
        })
    }
}

/// Whether clustering key `ck` lies between two bounds.
fn in_range(schema: &TableSchema, ck: &[Bytes], start: &RangeBound, end: &RangeBound) -> bool {
    let cmp_prefix = |b: &RangeBound| compare_clustering(schema, &ck[..b.prefix.len().min(ck.len())], &b.prefix);
    let after_start = match cmp_prefix(start) {
        std::cmp::Ordering::Greater => true,
        std::cmp::Ordering::Equal => start.inclusive,
        std::cmp::Ordering::Less => false,
    };
    let before_end = match cmp_prefix(end) {
        std::cmp::Ordering::Less => true,
        std::cmp::Ordering::Equal => end.inclusive,
        std::cmp::Ordering::Greater => false,
    };
    after_start && before_end
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::cdc::{BaseColumn, CdcOptions};
    use crate::cdclog::dml::parse;
    use crate::cdclog::mutation::{build, Binds, Context};
    use crate::cdclog::schema::TableSchema;

    const T: i64 = 1_700_000_000_000_000;

    fn schema(options: CdcOptions) -> Arc<TableSchema> {
        let col = |name: &str, kind: ColumnKind, position: i32, typ: &str| BaseColumn {
            name: name.into(),
            kind,
            position,
            typ: typ.into(),
        };
        let cols = [
            col("pk", ColumnKind::PartitionKey, 0, "int"),
            col("ck", ColumnKind::Clustering, 0, "int"),
            col("s", ColumnKind::Static, -1, "int"),
            col("v1", ColumnKind::Regular, -1, "int"),
            col("v2", ColumnKind::Regular, -1, "int"),
            col("m", ColumnKind::Regular, -1, "map<int, text>"),
            col("st", ColumnKind::Regular, -1, "set<int>"),
            col("l", ColumnKind::Regular, -1, "list<text>"),
            col("u", ColumnKind::Regular, -1, "ut"),
        ];
        let udt = |_: &str, name: &str| {
            (name == "ut").then(|| ["a", "b", "c"].iter().map(|f| (f.to_string(), "int".to_string())).collect())
        };
        Arc::new(TableSchema::new("ks", "t", &cols, &udt, 0, CdcOptions { enabled: true, ..options }).unwrap())
    }

    /// `(ts offset, op, ttl, column names)` of every row of every record.
    fn log(schema: &Arc<TableSchema>, cql: &str) -> Vec<(i64, i8, Option<i64>, Vec<String>)> {
        let statement = parse(cql).unwrap();
        let s = schema.clone();
        let schema_of = move |_: &crate::cdclog::dml::TableName| Some(s.clone());
        let cx = Context { schema_of: &schema_of, binds: Binds::NONE, timestamp: T, list_node: 7 };
        let built = build(&statement, &cx).unwrap();
        let mut out = Vec::new();
        for m in &built.mutations {
            for r in records(m, &Images::default()) {
                for row in r.rows {
                    out.push((r.ts - T, row.op, row.ttl, row.values.into_iter().map(|v| v.0).collect()));
                }
            }
        }
        out
    }

    fn names(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn inserts_updates_and_deletes() {
        let s = schema(CdcOptions::default());
        assert_eq!(
            log(&s, "INSERT INTO t (pk, ck, v1, v2) VALUES (0, 0, 1, 2)"),
            vec![(0, op::INSERT, None, names(&["pk", "ck", "v1", "v2"]))]
        );
        assert_eq!(
            log(&s, "INSERT INTO t (pk, ck, v2) VALUES (0, 0, null)"),
            vec![(0, op::INSERT, None, names(&["pk", "ck", "cdc$deleted_v2"]))]
        );
        assert_eq!(
            log(&s, "DELETE v2 FROM t WHERE pk = 0 AND ck = 0"),
            vec![(0, 1, None, names(&["pk", "ck", "cdc$deleted_v2"]))]
        );
        assert_eq!(
            log(&s, "DELETE FROM t WHERE pk = 0 AND ck = 0"),
            vec![(0, op::ROW_DELETE, None, names(&["pk", "ck"]))]
        );
        assert_eq!(log(&s, "DELETE FROM t WHERE pk = 0"), vec![(0, op::PARTITION_DELETE, None, names(&["pk"]))]);
        assert_eq!(
            log(&s, "DELETE FROM t WHERE pk = 0 AND ck > 0 AND ck <= 2"),
            vec![(0, 6, None, names(&["pk", "ck"])), (0, 7, None, names(&["pk", "ck"]))]
        );
        assert_eq!(
            log(&s, "DELETE FROM t WHERE pk = 0 AND ck < 3"),
            vec![(0, 5, None, names(&["pk"])), (0, 8, None, names(&["pk", "ck"]))]
        );
        assert!(log(&s, "DELETE FROM t WHERE pk = 0 AND ck < 1 AND ck > 2").is_empty());
        // E8: static and clustering in one statement.
        assert_eq!(
            log(&s, "UPDATE t SET s = 0, v1 = 0 WHERE pk = 0 AND ck = 0"),
            vec![(0, 1, None, names(&["pk", "s"])), (0, 1, None, names(&["pk", "ck", "v1"]))]
        );
        // E9: TTL with a null.
        assert_eq!(
            log(&s, "UPDATE t USING TTL 5 SET v1 = 0, v2 = null WHERE pk = 0 AND ck = 0"),
            vec![(0, 1, None, names(&["pk", "ck", "cdc$deleted_v2"])), (0, 1, Some(5), names(&["pk", "ck", "v1"]))]
        );
        assert_eq!(
            log(&s, "INSERT INTO t (pk, ck, v1, v2) VALUES (0, 0, 0, null) USING TTL 5"),
            vec![(0, 2, Some(5), names(&["pk", "ck", "v1"])), (0, 1, None, names(&["pk", "ck", "cdc$deleted_v2"]))]
        );
    }

    #[test]
    fn collections_and_udts() {
        let s = schema(CdcOptions::default());
        assert_eq!(
            log(&s, "UPDATE t SET m = m + {1: 'a'} WHERE pk = 0 AND ck = 0"),
            vec![(0, 1, None, names(&["pk", "ck", "m"]))]
        );
        assert_eq!(
            log(&s, "UPDATE t SET m = {1: 'a'} WHERE pk = 0 AND ck = 0"),
            vec![(0, 1, None, names(&["pk", "ck", "m", "cdc$deleted_m"]))]
        );
        assert_eq!(
            log(&s, "UPDATE t SET m = m + {3: 'c'}, m = m - {2} WHERE pk = 0 AND ck = 0"),
            vec![(0, 1, None, names(&["pk", "ck", "m", "cdc$deleted_elements_m"]))]
        );
        // A column delete of a collection is logged at T + 1.
        assert_eq!(
            log(&s, "DELETE m FROM t WHERE pk = 0 AND ck = 0"),
            vec![(1, 1, None, names(&["pk", "ck", "cdc$deleted_m"]))]
        );
        assert_eq!(
            log(&s, "INSERT INTO t (pk, ck, m) VALUES (0, 0, {1: 'a'})"),
            vec![(0, 2, None, names(&["pk", "ck", "m", "cdc$deleted_m"]))]
        );
        // E14: overwrite with a TTL splits tombstone and elements.
        assert_eq!(
            log(&s, "UPDATE t USING TTL 5 SET m = {0: 'x'} WHERE pk = 0 AND ck = 0"),
            vec![(0, 1, None, names(&["pk", "ck", "cdc$deleted_m"])), (0, 1, Some(5), names(&["pk", "ck", "m"]))]
        );
        // A touched UDT always has a value; field deletions are indices.
        assert_eq!(
            log(&s, "UPDATE t SET u.a = null WHERE pk = 0 AND ck = 0"),
            vec![(0, 1, None, names(&["pk", "ck", "u", "cdc$deleted_elements_u"]))]
        );
        assert_eq!(
            log(&s, "UPDATE t SET l = l + ['a', 'b'] WHERE pk = 0 AND ck = 0"),
            vec![(0, 1, None, names(&["pk", "ck", "l"]))]
        );
    }

    #[test]
    fn the_mixed_batch_of_the_spec() {
        // E16 (test_change_splitting).
        let s = schema(CdcOptions::default());
        let got = log(
            &s,
            &format!(
                "BEGIN UNLOGGED BATCH \
                 DELETE FROM t USING TIMESTAMP {t0} WHERE pk = 1; \
                 DELETE FROM t USING TIMESTAMP {t1} WHERE pk = 1 AND ck >= 0 AND ck < 3; \
                 DELETE FROM t USING TIMESTAMP {t2} WHERE pk = 1 AND ck = 0; \
                 INSERT INTO t (pk, ck, v1) VALUES (1, 0, 1) USING TIMESTAMP {t3}; \
                 UPDATE t USING TIMESTAMP {t3} SET v2 = 2 WHERE pk = 1 AND ck = 0; \
                 INSERT INTO t (pk, ck, m) VALUES (1, 0, {{3: '3'}}) USING TIMESTAMP {t4}; \
                 INSERT INTO t (pk, ck, m) VALUES (1, 1, {{4: '4'}}) USING TIMESTAMP {t5} AND TTL 5; \
                 APPLY BATCH",
                t0 = T,
                t1 = T + 1,
                t2 = T + 2,
                t3 = T + 3,
                t4 = T + 4,
                t5 = T + 5
            ),
        );
        let want = vec![
            (0, 4, None, names(&["pk"])),
            (1, 5, None, names(&["pk", "ck"])),
            (1, 8, None, names(&["pk", "ck"])),
            (2, 3, None, names(&["pk", "ck"])),
            (3, 1, None, names(&["pk", "ck", "v1", "v2"])),
            (4, 2, None, names(&["pk", "ck", "m", "cdc$deleted_m"])),
            (5, 2, Some(5), names(&["pk", "ck"])),
            (5, 1, None, names(&["pk", "ck", "cdc$deleted_m"])),
            (5, 1, Some(5), names(&["pk", "ck", "m"])),
        ];
        assert_eq!(got, want);
    }

    #[test]
    fn images_before_and_after() {
        let s = schema(CdcOptions { preimage: PreImage::Full, postimage: true, ..CdcOptions::default() });
        let statement = parse("INSERT INTO t (pk, ck, v2) VALUES (0, 0, 0)").unwrap();
        let s2 = s.clone();
        let schema_of = move |_: &crate::cdclog::dml::TableName| Some(s2.clone());
        let cx = Context { schema_of: &schema_of, binds: Binds::NONE, timestamp: T, list_node: 7 };
        let m = &build(&statement, &cx).unwrap().mutations[0];
        let v1 = s.index("v1").unwrap();
        let zero = Bytes::copy_from_slice(&0i32.to_be_bytes());
        let images = Images {
            static_row: None,
            rows: vec![(vec![zero.clone()], RowState::from([(v1, StateValue::Atomic(zero.clone()))]))],
        };
        let recs = records(m, &images);
        let rows = &recs[0].rows;
        assert_eq!(rows.iter().map(|r| r.op).collect::<Vec<_>>(), vec![0, 2, 9]);
        let pre: Vec<&str> = rows[0].values.iter().map(|v| v.0.as_str()).collect();
        assert!(pre.contains(&"v1") && pre.contains(&"cdc$deleted_v2"), "{pre:?}");
        let post: Vec<&str> = rows[2].values.iter().map(|v| v.0.as_str()).collect();
        assert_eq!(post, vec!["pk", "ck", "v1", "v2"]);
    }
}
