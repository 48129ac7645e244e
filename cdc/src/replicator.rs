//! Replication of a CDC-enabled table into another table, from its log.
//!
//! [`Replicator`] is a [`ConsumerFactory`]: its consumers turn every delta
//! row of the log into a write on the destination table, carrying the
//! source write time (`USING TIMESTAMP` = the row's `cdc$time` in µs) and
//! TTL (`cdc$ttl` → `USING TTL`). Because every write has its source
//! timestamp, replaying is idempotent and order-independent (last write
//! wins by timestamp, as on the source), so rows can be applied in any
//! order and windows can be read again after a failure.
//!
//! Mapping (see the CDC log spec §3.1):
//! * insert (op 2) → `INSERT` of the key and the non-null columns, `null`
//!   for columns whose `cdc$deleted_X` is set; collections with only added
//!   elements (no tombstone) and removals go into an extra `UPDATE`;
//! * update (op 1) → `UPDATE ... SET` the set columns, `= null` for deleted
//!   ones;
//! * collections: tombstone + elements ⇒ `X = {...}` (an overwrite writes
//!   the collection tombstone at `T − 1` itself, exactly as the source did;
//!   a tombstone alone ⇒ `X = null`, also at `T − 1`, which is where the
//!   source's tombstone is: `DELETE X` is logged at `T + 1`); elements only
//!   ⇒ `X = X + {...}`; `cdc$deleted_elements_X` ⇒ `X = X - {...}` for maps
//!   and sets, `X.f = null` for UDT fields (by index); UDT fields without a
//!   tombstone ⇒ `X.f = v`;
//! * lists (logged as `map<timeuuid, V>`): overwrite / append of the values
//!   in key order; elements whose keys lie before 2010-01-01 (Scylla's
//!   mirrored prepend keys) are prepended (`X = [...] + X`). The
//!   destination takes list keys from its own clock, so writes that add
//!   list elements are applied in log order ([`Write::ordered`]: the writer
//!   waits for the writes before them). **Not replicable**: removal of list
//!   elements by key (the timeuuid keys of list cells are hidden on
//!   Cassandra) — such rows are skipped with a warning; appends and
//!   prepends are not idempotent either (a replayed window adds the
//!   elements again, with new cell keys);
//! * row delete (op 3) → `DELETE` of the row; partition delete (op 4) →
//!   `DELETE` of the partition;
//! * range delete: a start bound row (op 5/6) followed by an end bound row
//!   (op 7/8) of the same record → `DELETE ... WHERE` key `AND (ck...) >=/>
//!   (...) AND (ck...) <=/< (...)` over the clustering prefix present in
//!   each bound;
//! * pre/post images (op 0/9) and expirations (op −3/−4: the destination
//!   expires by its own TTLs) are ignored. Counter tables are not supported
//!   (counter writes take no timestamp).
//!
//! Consumers are synchronous; writes are async. A consumer builds owned
//! [`Write`]s and sends them to one writer task per reader worker, running
//! on the runtime the [`Replicator`] was made on; `window_end` blocks until
//! the writer has applied everything sent before it and fails the window
//! (so that it is read again) if any write failed.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use shardwise::protocol::types::{ColumnType, CqlValue};
use shardwise::{ExecutionError, PreparedStatement, Session, Statement};
use tokio::sync::mpsc;

use crate::consumer::{Consumer, ConsumerError, ConsumerFactory};
use crate::plan::{GroupInfo, ReadWindow};
use crate::reader::quote;
use crate::row::{CdcRow, Operation};

/// Writes in flight per writer task.
const MAX_IN_FLIGHT: usize = 128;

/// What kind of column a base column is, for writing it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ColumnKind {
    /// Partition key column.
    PartitionKey,
    /// Clustering key column.
    Clustering,
    /// A regular or static column of an atomic (or frozen) type.
    Atomic,
    /// A non-frozen `list`.
    List,
    /// A non-frozen `set`.
    Set,
    /// A non-frozen `map`.
    Map,
    /// A non-frozen UDT.
    Udt,
}

/// The source table's columns, read once from `system_schema.columns`.
#[derive(Debug, Clone, Default)]
pub struct TableInfo {
    /// Partition key columns, in order.
    pub partition_key: Vec<String>,
    /// Clustering columns, in order.
    pub clustering: Vec<String>,
    /// Every column's kind.
    pub kinds: HashMap<String, ColumnKind>,
}

impl TableInfo {
    /// Reads the columns of `keyspace.table`.
    pub async fn load(session: &Session, keyspace: &str, table: &str) -> Result<Self, ReplicatorError> {
        let result = session
            .execute(
                &Statement::new(
                    "SELECT column_name, kind, position, type FROM system_schema.columns \
                     WHERE keyspace_name = ? AND table_name = ?",
                ),
                (keyspace, table),
            )
            .await?;
        let rows =
            result.rows::<(String, String, i32, String)>().map_err(|e| ReplicatorError::Schema(e.to_string()))?;
        let mut pk = Vec::new();
        let mut ck = Vec::new();
        let mut kinds = HashMap::new();
        for row in rows {
            let (name, kind, position, typ) = row.map_err(|e| ReplicatorError::Schema(e.to_string()))?;
            let k = match kind.as_str() {
                "partition_key" => {
                    pk.push((position, name.clone()));
                    ColumnKind::PartitionKey
                }
                "clustering" => {
                    ck.push((position, name.clone()));
                    ColumnKind::Clustering
                }
                _ => Self::kind_of_type(&typ),
            };
            kinds.insert(name, k);
        }
        if pk.is_empty() {
            return Err(ReplicatorError::Schema(format!("table {keyspace}.{table} not found")));
        }
        pk.sort();
        ck.sort();
        Ok(TableInfo {
            partition_key: pk.into_iter().map(|p| p.1).collect(),
            clustering: ck.into_iter().map(|p| p.1).collect(),
            kinds,
        })
    }

    /// The kind of a non-key column from its `system_schema` type string.
    pub fn kind_of_type(typ: &str) -> ColumnKind {
        let t = typ.trim();
        if t.starts_with("list<") {
            ColumnKind::List
        } else if t.starts_with("set<") {
            ColumnKind::Set
        } else if t.starts_with("map<") {
            ColumnKind::Map
        } else {
            // UDTs are recognised from the log's column type (a frozen UDT
            // has no `cdc$deleted_elements_` column and is atomic).
            ColumnKind::Atomic
        }
    }

    fn kind(&self, name: &str) -> ColumnKind {
        self.kinds.get(name).copied().unwrap_or(ColumnKind::Atomic)
    }
}

/// Replication failed to start or a write failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ReplicatorError {
    /// A query failed.
    #[error(transparent)]
    Execution(#[from] ExecutionError),
    /// The source table's schema could not be read.
    #[error("schema: {0}")]
    Schema(String),
}

/// One owned write on the destination: statement text and bind values.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Write {
    /// CQL text with `?` markers.
    pub text: String,
    /// Bind values (`None`: null).
    pub values: Vec<Option<CqlValue>>,
    /// Whether the write must be applied after every write sent before it
    /// has been applied: it adds list elements, whose keys the destination
    /// takes from its clock (not from the write timestamp), so that list
    /// writes applied out of order would order the elements differently.
    pub ordered: bool,
}

/// Turns log rows into [`Write`]s for one destination table. Keeps the
/// start bound of a range delete until its end bound comes.
#[derive(Debug)]
pub struct RowTranslator {
    info: Arc<TableInfo>,
    target: String,
    range_start: Option<(Vec<Option<CqlValue>>, Vec<CqlValue>, bool)>,
}

impl RowTranslator {
    /// Writes into `keyspace.table`.
    pub fn new(info: Arc<TableInfo>, keyspace: &str, table: &str) -> Self {
        RowTranslator { info, target: format!("{}.{}", quote(keyspace), quote(table)), range_start: None }
    }

    /// The writes for one log row (none for images and expirations).
    pub fn translate(&mut self, row: &CdcRow<'_>, out: &mut Vec<Write>) -> Result<(), ConsumerError> {
        if row.is_expiration() {
            // The replica's copy carries the TTL its write had: it expires there too.
            return Ok(());
        }
        let ts = CqlValue::BigInt(row.time_micros());
        let ttl = CqlValue::Int(row.ttl().map_or(0, |t| i32::try_from(t).unwrap_or(i32::MAX)));
        match row.operation() {
            Operation::Insert | Operation::Update => self.upsert(row, ts, ttl, out),
            Operation::RowDelete => {
                let (clause, mut values) = self.key_where(row, true)?;
                values.insert(0, Some(ts));
                out.push(Write {
                    text: format!("DELETE FROM {} USING TIMESTAMP ? WHERE {clause}", self.target),
                    values,
                    ordered: false,
                });
                Ok(())
            }
            Operation::PartitionDelete => {
                let (clause, mut values) = self.key_where(row, false)?;
                values.insert(0, Some(ts));
                out.push(Write {
                    text: format!("DELETE FROM {} USING TIMESTAMP ? WHERE {clause}", self.target),
                    values,
                    ordered: false,
                });
                Ok(())
            }
            op @ (Operation::RangeDeleteStartInclusive | Operation::RangeDeleteStartExclusive) => {
                let (_, pk) = self.key_where(row, false)?;
                let prefix = self.clustering_prefix(row)?;
                self.range_start = Some((pk, prefix, op == Operation::RangeDeleteStartInclusive));
                Ok(())
            }
            op @ (Operation::RangeDeleteEndInclusive | Operation::RangeDeleteEndExclusive) => {
                let Some((pk, start, start_incl)) = self.range_start.take() else {
                    return Err(ConsumerError::failed("range delete end bound without a start bound"));
                };
                let end = self.clustering_prefix(row)?;
                let (clause, _) = self.key_where(row, false)?;
                let mut text = format!("DELETE FROM {} USING TIMESTAMP ? WHERE {clause}", self.target);
                let mut values = vec![Some(ts)];
                values.extend(pk);
                for (bound, op) in [
                    (start, if start_incl { ">=" } else { ">" }),
                    (end, if op == Operation::RangeDeleteEndInclusive { "<=" } else { "<" }),
                ] {
                    if bound.is_empty() {
                        continue;
                    }
                    let names: Vec<String> = self.info.clustering[..bound.len()].iter().map(|c| quote(c)).collect();
                    let marks = vec!["?"; bound.len()].join(", ");
                    if bound.len() == 1 {
                        text.push_str(&format!(" AND {} {op} ?", names[0]));
                    } else {
                        text.push_str(&format!(" AND ({}) {op} ({marks})", names.join(", ")));
                    }
                    values.extend(bound.into_iter().map(Some));
                }
                out.push(Write { text, values, ordered: false });
                Ok(())
            }
            _ => Ok(()),
        }
    }

    /// The present leading clustering values of a bound row.
    fn clustering_prefix(&self, row: &CdcRow<'_>) -> Result<Vec<CqlValue>, ConsumerError> {
        let mut prefix = Vec::new();
        for c in &self.info.clustering {
            match row.value::<Option<CqlValue>>(c)? {
                Some(v) => prefix.push(v),
                None => break,
            }
        }
        Ok(prefix)
    }

    /// `pk = ? AND ...` (and the clustering columns present if `clustering`).
    fn key_where(&self, row: &CdcRow<'_>, clustering: bool) -> Result<(String, Vec<Option<CqlValue>>), ConsumerError> {
        let mut parts = Vec::new();
        let mut values = Vec::new();
        let cks: &[String] = if clustering { &self.info.clustering } else { &[] };
        for c in self.info.partition_key.iter().chain(cks) {
            match row.value::<Option<CqlValue>>(c)? {
                Some(v) => {
                    parts.push(format!("{} = ?", quote(c)));
                    values.push(Some(v));
                }
                None if self.info.kind(c) == ColumnKind::PartitionKey => {
                    return Err(ConsumerError::failed(format!("log row without partition key column {c}")));
                }
                None => {}
            }
        }
        Ok((parts.join(" AND "), values))
    }

    fn upsert(&self, row: &CdcRow<'_>, ts: CqlValue, ttl: CqlValue, out: &mut Vec<Write>) -> Result<(), ConsumerError> {
        let insert = row.operation() == Operation::Insert;
        // (column, value) for the INSERT or the SET clauses of the UPDATE.
        let mut assigned: Vec<(String, Option<CqlValue>)> = Vec::new();
        // Extra SET clauses (text, values) that an INSERT cannot express.
        let mut partial: Vec<(String, Vec<Option<CqlValue>>)> = Vec::new();
        // SET clauses that need an UPDATE of their own.
        let mut separate: Vec<(String, Vec<Option<CqlValue>>)> = Vec::new();
        // Whether list elements are written (see `Write::ordered`).
        let mut ordered = false;
        let schema = row.schema();
        for (i, col) in schema.columns().iter().enumerate() {
            let name = col.name();
            let kind = self.info.kind(name);
            if matches!(kind, ColumnKind::PartitionKey | ColumnKind::Clustering) {
                continue;
            }
            let q = quote(name);
            let deleted = row.is_deleted_at(i);
            let value: Option<CqlValue> = row.value_at(i)?;
            let removed: Vec<CqlValue> = match col.deleted_elements_index() {
                Some(_) => match row.deleted_elements_at::<Option<CqlValue>>(i)? {
                    Some(CqlValue::Set(v) | CqlValue::List(v)) => v,
                    Some(other) => vec![other],
                    None => Vec::new(),
                },
                None => Vec::new(),
            };
            let udt_fields = match &schema.specs()[col.value_index()].typ {
                ColumnType::Udt { fields, .. } if col.deleted_elements_index().is_some() => Some(fields.clone()),
                _ => None,
            };
            let kind = if udt_fields.is_some() { ColumnKind::Udt } else { kind };
            match kind {
                ColumnKind::Atomic => {
                    if value.is_some() || deleted {
                        assigned.push((name.to_owned(), value));
                    }
                }
                ColumnKind::Map | ColumnKind::Set | ColumnKind::List => {
                    // List entries come in key order; keys before
                    // 2010-01-01 are those of a prepend.
                    let mut prepended = Vec::new();
                    let value = match (kind, value) {
                        (ColumnKind::List, Some(CqlValue::Map(entries))) => {
                            let mut appended = Vec::new();
                            for (k, v) in entries {
                                if !deleted && is_prepended_list_key(&k) {
                                    prepended.push(v);
                                } else {
                                    appended.push(v);
                                }
                            }
                            ordered |= !appended.is_empty() || !prepended.is_empty();
                            (deleted || !appended.is_empty()).then_some(CqlValue::List(appended))
                        }
                        (_, v) => v,
                    };
                    if deleted {
                        assigned.push((name.to_owned(), value.clone()));
                    } else if let Some(v) = value.clone() {
                        partial.push((format!("{q} = {q} + ?"), vec![Some(v)]));
                    }
                    if !prepended.is_empty() {
                        // A column takes one operation per statement: a
                        // prepend next to an append goes into its own UPDATE.
                        let text = format!("{q} = ? + {q}");
                        let values = vec![Some(CqlValue::List(prepended))];
                        if value.is_some() && !deleted {
                            separate.push((text, values));
                        } else {
                            partial.push((text, values));
                        }
                    }
                    if !removed.is_empty() {
                        if kind == ColumnKind::List {
                            tracing::warn!(column = name, "list element removal by key is not replicable; skipped");
                        } else {
                            let added: Vec<&CqlValue> = match &value {
                                Some(CqlValue::Map(e)) => e.iter().map(|(k, _)| k).collect(),
                                Some(CqlValue::Set(e)) => e.iter().collect(),
                                _ => Vec::new(),
                            };
                            let keys: Vec<CqlValue> =
                                removed.into_iter().filter(|k| !(deleted && added.contains(&k))).collect();
                            if !keys.is_empty() {
                                partial.push((format!("{q} = {q} - ?"), vec![Some(CqlValue::Set(keys))]));
                            }
                        }
                    }
                }
                ColumnKind::Udt => {
                    let fields = udt_fields.unwrap_or_default();
                    if deleted {
                        assigned.push((name.to_owned(), value));
                    } else if let Some(CqlValue::Udt { fields: values, .. }) = value {
                        for (f, v) in values {
                            if let Some(v) = v {
                                partial.push((format!("{q}.{} = ?", quote(&f)), vec![Some(v)]));
                            }
                        }
                    }
                    for k in removed {
                        let idx = match k {
                            CqlValue::SmallInt(i) => usize::try_from(i).ok(),
                            CqlValue::Int(i) => usize::try_from(i).ok(),
                            _ => None,
                        };
                        if let Some((f, _)) = idx.and_then(|i| fields.get(i)) {
                            partial.push((format!("{q}.{} = ?", quote(f)), vec![None]));
                        }
                    }
                }
                ColumnKind::PartitionKey | ColumnKind::Clustering => {}
            }
        }
        let (clause, key_values) = self.key_where(row, true)?;
        if insert {
            let mut names: Vec<String> = Vec::new();
            let mut values: Vec<Option<CqlValue>> = Vec::new();
            for c in self.info.partition_key.iter().chain(&self.info.clustering) {
                if let Some(v) = row.value::<Option<CqlValue>>(c)? {
                    names.push(quote(c));
                    values.push(Some(v));
                }
            }
            for (n, v) in assigned {
                names.push(quote(&n));
                values.push(v);
            }
            let marks = vec!["?"; names.len()].join(", ");
            values.push(Some(ts.clone()));
            values.push(Some(ttl.clone()));
            out.push(Write {
                text: format!(
                    "INSERT INTO {} ({}) VALUES ({marks}) USING TIMESTAMP ? AND TTL ?",
                    self.target,
                    names.join(", ")
                ),
                values,
                ordered,
            });
        } else {
            partial.splice(0..0, assigned.into_iter().map(|(n, v)| (format!("{} = ?", quote(&n)), vec![v])));
        }
        for partial in [partial, separate] {
            if partial.is_empty() {
                continue;
            }
            let sets: Vec<&str> = partial.iter().map(|p| p.0.as_str()).collect();
            let mut values = vec![Some(ts.clone()), Some(ttl.clone())];
            for (_, v) in &partial {
                values.extend(v.iter().cloned());
            }
            values.extend(key_values.iter().cloned());
            out.push(Write {
                text: format!(
                    "UPDATE {} USING TIMESTAMP ? AND TTL ? SET {} WHERE {clause}",
                    self.target,
                    sets.join(", ")
                ),
                values,
                ordered,
            });
        }
        Ok(())
    }
}

/// Whether a list cell key (a timeuuid) is one of a prepend: prepends
/// take keys mirrored around 2010-01-01 (`T' = 2010-01-01 − (T −
/// 2010-01-01)`), appends and overwrites keys at the write's time.
fn is_prepended_list_key(key: &CqlValue) -> bool {
    /// 2010-01-01T00:00:00Z in 100 ns units since 1582-10-15, the epoch of
    /// version-1 UUIDs.
    const PREPEND_EPOCH: u64 = (1_262_304_000 + 12_219_292_800) * 10_000_000;
    match key {
        CqlValue::Timeuuid(u) | CqlValue::Uuid(u) if u.get_version_num() == 1 => {
            let b = u.as_bytes();
            let time_low = u64::from(u32::from_be_bytes([b[0], b[1], b[2], b[3]]));
            let time_mid = u64::from(u16::from_be_bytes([b[4], b[5]]));
            let time_hi = u64::from(u16::from_be_bytes([b[6], b[7]]) & 0x0fff);
            (time_hi << 48 | time_mid << 32 | time_low) < PREPEND_EPOCH
        }
        _ => false,
    }
}

enum Message {
    Write(Write),
    Flush(std::sync::mpsc::Sender<Result<(), String>>),
}

/// The consumer factory of a replication.
pub struct Replicator {
    info: Arc<TableInfo>,
    destination: Session,
    keyspace: String,
    table: String,
    runtime: tokio::runtime::Handle,
    writers: Mutex<HashMap<usize, mpsc::UnboundedSender<Message>>>,
    rows: Arc<AtomicU64>,
    writes: Arc<AtomicU64>,
}

impl std::fmt::Debug for Replicator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Replicator").field("keyspace", &self.keyspace).field("table", &self.table).finish()
    }
}

impl Replicator {
    /// A replication of `source_keyspace.source_table` (its schema is read
    /// from `source`) into `keyspace.table` on `destination`, a table with
    /// the same columns. Must be called on the runtime that will run the
    /// writes (a multi-thread runtime: the reader's workers block on it).
    pub async fn new(
        source: &Session,
        source_keyspace: &str,
        source_table: &str,
        destination: Session,
        keyspace: &str,
        table: &str,
    ) -> Result<Arc<Self>, ReplicatorError> {
        let info = Arc::new(TableInfo::load(source, source_keyspace, source_table).await?);
        Ok(Arc::new(Replicator {
            info,
            destination,
            keyspace: keyspace.into(),
            table: table.into(),
            runtime: tokio::runtime::Handle::current(),
            writers: Mutex::default(),
            rows: Arc::default(),
            writes: Arc::default(),
        }))
    }

    /// Log rows consumed so far.
    pub fn rows(&self) -> u64 {
        self.rows.load(Ordering::Relaxed)
    }

    /// Writes applied so far.
    pub fn writes(&self) -> u64 {
        self.writes.load(Ordering::Relaxed)
    }

    /// The source table's columns.
    pub fn table_info(&self) -> &TableInfo {
        &self.info
    }

    fn writer(&self, worker: usize) -> mpsc::UnboundedSender<Message> {
        let mut writers = self.writers.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(tx) = writers.get(&worker).filter(|tx| !tx.is_closed()) {
            return tx.clone();
        }
        let (tx, rx) = mpsc::unbounded_channel();
        self.runtime.spawn(writer_task(self.destination.clone(), rx, self.writes.clone()));
        writers.insert(worker, tx.clone());
        tx
    }
}

async fn writer_task(session: Session, mut rx: mpsc::UnboundedReceiver<Message>, applied: Arc<AtomicU64>) {
    let prepared: Arc<tokio::sync::Mutex<HashMap<String, PreparedStatement>>> = Arc::default();
    let mut tasks = tokio::task::JoinSet::new();
    let mut error: Option<String> = None;
    let note = |r: Result<Result<(), String>, tokio::task::JoinError>, error: &mut Option<String>| {
        let r = r.map_err(|e| e.to_string()).and_then(|r| r);
        match r {
            Ok(()) => {
                applied.fetch_add(1, Ordering::Relaxed);
            }
            Err(e) => {
                error.get_or_insert(e);
            }
        }
    };
    while let Some(msg) = rx.recv().await {
        match msg {
            Message::Write(w) => {
                while tasks.len() >= MAX_IN_FLIGHT {
                    if let Some(r) = tasks.join_next().await {
                        note(r, &mut error);
                    }
                }
                let session = session.clone();
                let prepared = prepared.clone();
                let Write { text, values, ordered } = w;
                if ordered {
                    // Everything sent before is applied first.
                    while let Some(r) = tasks.join_next().await {
                        note(r, &mut error);
                    }
                }
                tasks.spawn(async move {
                    let statement = {
                        let cached = prepared.lock().await.get(&text).cloned();
                        match cached {
                            Some(p) => p,
                            None => {
                                let p = session
                                    .prepare(Statement::new(text.clone()))
                                    .await
                                    .map_err(|e| format!("{text}: {e}"))?;
                                prepared.lock().await.insert(text.clone(), p.clone());
                                p
                            }
                        }
                    };
                    let result = session.execute(&statement, values).await;
                    result.map(|_| ()).map_err(|e| format!("{text}: {e}"))
                });
            }
            Message::Flush(ack) => {
                while let Some(r) = tasks.join_next().await {
                    note(r, &mut error);
                }
                let _ = ack.send(error.take().map_or(Ok(()), Err));
            }
        }
    }
    while let Some(r) = tasks.join_next().await {
        note(r, &mut error);
    }
}

impl ConsumerFactory for Replicator {
    fn new_consumer(&self, group: &GroupInfo) -> Box<dyn Consumer> {
        Box::new(ReplicatorConsumer {
            translator: RowTranslator::new(self.info.clone(), &self.keyspace, &self.table),
            tx: self.writer(group.worker),
            rows: self.rows.clone(),
            buf: Vec::new(),
        })
    }
}

struct ReplicatorConsumer {
    translator: RowTranslator,
    tx: mpsc::UnboundedSender<Message>,
    rows: Arc<AtomicU64>,
    buf: Vec<Write>,
}

impl Consumer for ReplicatorConsumer {
    fn consume(&mut self, row: CdcRow<'_>) -> Result<(), ConsumerError> {
        self.translator.translate(&row, &mut self.buf)?;
        for w in self.buf.drain(..) {
            self.tx.send(Message::Write(w)).map_err(|_| ConsumerError::failed("the writer task stopped"))?;
        }
        self.rows.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }

    fn window_end(&mut self, _window: &ReadWindow) -> Result<(), ConsumerError> {
        let (ack, done) = std::sync::mpsc::channel();
        self.tx.send(Message::Flush(ack)).map_err(|_| ConsumerError::failed("the writer task stopped"))?;
        match done.recv() {
            Ok(Ok(())) => Ok(()),
            Ok(Err(e)) => Err(ConsumerError::failed(e)),
            Err(_) => Err(ConsumerError::failed("the writer task stopped")),
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn timeuuid(micros_since_unix: i64) -> CqlValue {
        let ticks = (micros_since_unix * 10 + 122_192_928_000_000_000) as u64;
        let mut b = [0u8; 16];
        b[0..4].copy_from_slice(&((ticks & 0xffff_ffff) as u32).to_be_bytes());
        b[4..6].copy_from_slice(&(((ticks >> 32) & 0xffff) as u16).to_be_bytes());
        b[6..8].copy_from_slice(&((((ticks >> 48) & 0x0fff) as u16) | 0x1000).to_be_bytes());
        b[8] = 0x80;
        CqlValue::Timeuuid(uuid::Uuid::from_bytes(b))
    }

    #[test]
    fn prepended_list_keys_are_those_before_2010() {
        const Y2010: i64 = 1_262_304_000_000_000;
        let now = 1_790_000_000_000_000;
        assert!(!is_prepended_list_key(&timeuuid(now)), "an append's key");
        assert!(is_prepended_list_key(&timeuuid(Y2010 - (now - Y2010))), "a prepend's mirrored key");
        assert!(is_prepended_list_key(&timeuuid(Y2010 - 1)));
        assert!(!is_prepended_list_key(&timeuuid(Y2010)));
        assert!(!is_prepended_list_key(&CqlValue::Int(1)));
    }
}
