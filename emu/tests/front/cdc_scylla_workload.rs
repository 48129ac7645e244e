//! `scylla-cdc` 0.7, unchanged, reads through the front the log of a
//! randomized workload written by the official `scylla` crate 1.9 (issue 6,
//! second test), and sees every change, in write order per partition key.
//!
//! The table has a clustering key, an atomic column, a static column, a
//! map and a set, with CDC on (default options). Four writer tasks own
//! disjoint sets of partition keys (48 in all) and each writes its keys one
//! statement at a time, all through prepared statements: inserts (with and
//! without `USING TTL`, with a map), updates (atomic, static, TTL, map
//! `+`, `-`, `[k] =`, overwrite, set `+`, `-`), column deletes (atomic,
//! whole map, map element), row, partition and range deletes, and
//! batches (logged and unlogged) of several rows of one partition (with
//! and without a static update) or of several partitions. Every write
//! carries a value from a per-task counter, so per key the values increase
//! in write order. The front assigns the timestamps (the driver sends
//! none), so `cdc$time` follows the write order.
//!
//! For every write the test derives the records the spec
//! (`docs/cdc-log.md` §3) says Scylla logs: per partition
//! key a list of records, each a list of `(operation, ck, columns)` rows,
//! where `columns` renders the non-null value, `cdc$deleted_X`,
//! `cdc$deleted_elements_X` and `cdc$ttl` columns (e.g. `m={7:7} del_m`).
//! Batch rows follow §3.4's emission order: the static row first; then,
//! when the batch also has a static row (split path, rule 4), all inserts
//! before all updates, each in clustering order; otherwise clustering order.
//!
//! A `CDCLogReader` started before the workload (small window, safety
//! interval and sleep) and stopped shortly after it consumes the log; the
//! consumer records every row in delivery order. Per key the delivered
//! rows, grouped into records by `cdc$time`, must equal the expected
//! records exactly (same order); every record has `cdc$batch_seq_no`
//! 0..n−1 and `cdc$end_of_batch` on its last row only, records of a key have
//! strictly increasing `cdc$time`, and nothing else is delivered. The seed
//! is printed (and can be fixed with `EMU_CDC_SEED`).

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use async_trait::async_trait;
use scylla::client::session::Session;
use scylla::statement::batch::{Batch, BatchType};
use scylla::statement::prepared::PreparedStatement;
use scylla::value::CqlValue;
use scylla_cdc::consumer::{CDCRow, Consumer, ConsumerFactory, OperationType};
use scylla_cdc::log_reader::CDCLogReaderBuilder;
use shardwise_emu::FrontConfig;
use testkit::fresh_keyspace;

use crate::support::{self, keyspace, session, start_front};

const TASKS: i32 = 4;
const KEYS_PER_TASK: i32 = 12;
const OPS_PER_TASK: usize = 250;
const CKS: i32 = 8;
const TTL: i32 = 3600;

// ---------------------------------------------------------------------------
// The test kit's deterministic generator.

use shardwise_emu::rng::SplitMix64 as Rng;

// ---------------------------------------------------------------------------
// What the reader delivers, and what is expected.

/// One log row as the test compares it.
type Change = (OperationType, Option<i32>, String);

/// One delivered row with its record metadata.
#[derive(Debug, Clone)]
struct Delivered {
    time: uuid::Uuid,
    seq: i32,
    end_of_batch: bool,
    change: Change,
}

type Seen = Arc<Mutex<HashMap<Option<i32>, Vec<Delivered>>>>;

fn render(v: &CqlValue) -> String {
    match v {
        CqlValue::Int(n) => n.to_string(),
        CqlValue::Map(entries) => {
            let e: Vec<String> = entries.iter().map(|(k, v)| format!("{}:{}", render(k), render(v))).collect();
            format!("{{{}}}", e.join(","))
        }
        CqlValue::Set(items) | CqlValue::List(items) => {
            format!("{{{}}}", items.iter().map(render).collect::<Vec<_>>().join(","))
        }
        other => format!("{other:?}"),
    }
}

/// The non-key columns of a row: `X=value`, `del_X`, `delel_X={...}`, `ttl=n`.
fn describe(row: &CDCRow<'_>) -> String {
    let mut parts = Vec::new();
    for col in ["v", "s", "m", "st"] {
        if let Some(v) = row.get_value(col) {
            parts.push(format!("{col}={}", render(v)));
        }
        if row.is_value_deleted(col) {
            parts.push(format!("del_{col}"));
        }
        if row.collection_exists(col) {
            let d = row.get_deleted_elements(col);
            if !d.is_empty() {
                parts.push(format!("delel_{col}={{{}}}", d.iter().map(render).collect::<Vec<_>>().join(",")));
            }
        }
    }
    if let Some(ttl) = row.ttl {
        parts.push(format!("ttl={ttl}"));
    }
    parts.join(" ")
}

struct Collect(Seen);

#[async_trait]
impl Consumer for Collect {
    async fn consume_cdc(&mut self, row: CDCRow<'_>) -> anyhow::Result<()> {
        let pk = row.get_value("pk").as_ref().and_then(CqlValue::as_int);
        let ck = row.get_value("ck").as_ref().and_then(CqlValue::as_int);
        let delivered = Delivered {
            time: row.time,
            seq: row.batch_seq_no,
            end_of_batch: row.end_of_batch,
            change: (row.operation.clone(), ck, describe(&row)),
        };
        if let Ok(mut seen) = self.0.lock() {
            seen.entry(pk).or_default().push(delivered);
        }
        Ok(())
    }
}

struct Factory(Seen);

#[async_trait]
impl ConsumerFactory for Factory {
    async fn new_consumer(&self) -> Box<dyn Consumer> {
        Box::new(Collect(self.0.clone()))
    }
}

// ---------------------------------------------------------------------------
// The workload.

struct Statements {
    insert: PreparedStatement,
    insert_ttl: PreparedStatement,
    insert_m: PreparedStatement,
    update_v: PreparedStatement,
    update_v_ttl: PreparedStatement,
    update_s: PreparedStatement,
    m_add: PreparedStatement,
    m_put: PreparedStatement,
    m_remove: PreparedStatement,
    m_set: PreparedStatement,
    st_add: PreparedStatement,
    st_remove: PreparedStatement,
    del_v: PreparedStatement,
    del_m: PreparedStatement,
    del_m_elem: PreparedStatement,
    del_row: PreparedStatement,
    del_partition: PreparedStatement,
    del_range: PreparedStatement,
}

impl Statements {
    async fn prepare(session: &Session, ks: &str) -> Statements {
        let p = |text: String| async move { session.prepare(text).await.expect("prepare") };
        Statements {
            insert: p(format!("INSERT INTO {ks}.t (pk, ck, v) VALUES (?, ?, ?)")).await,
            insert_ttl: p(format!("INSERT INTO {ks}.t (pk, ck, v) VALUES (?, ?, ?) USING TTL ?")).await,
            insert_m: p(format!("INSERT INTO {ks}.t (pk, ck, v, m) VALUES (?, ?, ?, ?)")).await,
            update_v: p(format!("UPDATE {ks}.t SET v = ? WHERE pk = ? AND ck = ?")).await,
            update_v_ttl: p(format!("UPDATE {ks}.t USING TTL {TTL} SET v = ? WHERE pk = ? AND ck = ?")).await,
            update_s: p(format!("UPDATE {ks}.t SET s = ? WHERE pk = ?")).await,
            m_add: p(format!("UPDATE {ks}.t SET m = m + ? WHERE pk = ? AND ck = ?")).await,
            m_put: p(format!("UPDATE {ks}.t SET m[?] = ? WHERE pk = ? AND ck = ?")).await,
            m_remove: p(format!("UPDATE {ks}.t SET m = m - ? WHERE pk = ? AND ck = ?")).await,
            m_set: p(format!("UPDATE {ks}.t SET m = ? WHERE pk = ? AND ck = ?")).await,
            st_add: p(format!("UPDATE {ks}.t SET st = st + ? WHERE pk = ? AND ck = ?")).await,
            st_remove: p(format!("UPDATE {ks}.t SET st = st - ? WHERE pk = ? AND ck = ?")).await,
            del_v: p(format!("DELETE v FROM {ks}.t WHERE pk = ? AND ck = ?")).await,
            del_m: p(format!("DELETE m FROM {ks}.t WHERE pk = ? AND ck = ?")).await,
            del_m_elem: p(format!("DELETE m[?] FROM {ks}.t WHERE pk = ? AND ck = ?")).await,
            del_row: p(format!("DELETE FROM {ks}.t WHERE pk = ? AND ck = ?")).await,
            del_partition: p(format!("DELETE FROM {ks}.t WHERE pk = ?")).await,
            del_range: p(format!("DELETE FROM {ks}.t WHERE pk = ? AND ck > ? AND ck <= ?")).await,
        }
    }
}

/// Expected records per partition key, in write order.
type Expected = HashMap<i32, Vec<Vec<Change>>>;

fn one(op: OperationType, ck: Option<i32>, cols: impl Into<String>) -> Vec<Change> {
    vec![(op, ck, cols.into())]
}

/// One writer task: `OPS_PER_TASK` writes to its own keys, sequentially.
async fn writer(
    session: Arc<Session>,
    st: Arc<Statements>,
    task: i32,
    seed: u64,
) -> (Expected, BTreeMap<&'static str, usize>) {
    use OperationType::*;
    let mut rng = Rng(seed ^ (task as u64).wrapping_mul(0xA24B_AED4_963E_E407));
    let keys: Vec<i32> = (0..KEYS_PER_TASK).map(|i| 1000 + i * TASKS + task).collect();
    let mut expected: Expected = HashMap::new();
    let mut kinds: BTreeMap<&'static str, usize> = BTreeMap::new();
    // Values increase with every write of the task, hence per key.
    let mut n: i32 = task * 1_000_000;
    for _ in 0..OPS_PER_TASK {
        n += 10;
        let pk = rng.pick(&keys);
        let ck = rng.below(CKS as u64) as i32;
        let kind = rng.below(21);
        let (name, records): (&'static str, Vec<(i32, Vec<Change>)>) = match kind {
            0 | 1 => {
                session.execute_unpaged(&st.insert, (pk, ck, n)).await.expect("insert");
                ("insert", vec![(pk, one(RowInsert, Some(ck), format!("v={n}")))])
            }
            2 => {
                session.execute_unpaged(&st.insert_ttl, (pk, ck, n, TTL)).await.expect("insert ttl");
                ("insert ttl", vec![(pk, one(RowInsert, Some(ck), format!("v={n} ttl={TTL}")))])
            }
            3 => {
                let m = BTreeMap::from([(n, n + 1)]);
                session.execute_unpaged(&st.insert_m, (pk, ck, n, m)).await.expect("insert with map");
                ("insert map", vec![(pk, one(RowInsert, Some(ck), format!("v={n} m={{{n}:{}}} del_m", n + 1)))])
            }
            4 | 5 => {
                session.execute_unpaged(&st.update_v, (n, pk, ck)).await.expect("update");
                ("update", vec![(pk, one(RowUpdate, Some(ck), format!("v={n}")))])
            }
            6 => {
                session.execute_unpaged(&st.update_v_ttl, (n, pk, ck)).await.expect("update ttl");
                ("update ttl", vec![(pk, one(RowUpdate, Some(ck), format!("v={n} ttl={TTL}")))])
            }
            7 => {
                session.execute_unpaged(&st.update_s, (n, pk)).await.expect("update static");
                ("update static", vec![(pk, one(RowUpdate, None, format!("s={n}")))])
            }
            8 => {
                let m = BTreeMap::from([(n, n + 1), (n + 2, n + 3)]);
                session.execute_unpaged(&st.m_add, (m, pk, ck)).await.expect("m = m + ?");
                ("map add", vec![(pk, one(RowUpdate, Some(ck), format!("m={{{n}:{},{}:{}}}", n + 1, n + 2, n + 3)))])
            }
            9 => {
                session.execute_unpaged(&st.m_put, (n, n + 1, pk, ck)).await.expect("m[?] = ?");
                ("map put", vec![(pk, one(RowUpdate, Some(ck), format!("m={{{n}:{}}}", n + 1)))])
            }
            10 => {
                // Keys of earlier writes, mostly absent: still logged.
                let keys = vec![n - 10, n];
                session.execute_unpaged(&st.m_remove, (keys, pk, ck)).await.expect("m = m - ?");
                ("map remove", vec![(pk, one(RowUpdate, Some(ck), format!("delel_m={{{},{n}}}", n - 10)))])
            }
            11 => {
                let m = BTreeMap::from([(n, n + 1)]);
                session.execute_unpaged(&st.m_set, (m, pk, ck)).await.expect("m = ?");
                ("map overwrite", vec![(pk, one(RowUpdate, Some(ck), format!("m={{{n}:{}}} del_m", n + 1)))])
            }
            12 => {
                session.execute_unpaged(&st.st_add, (vec![n, n + 1], pk, ck)).await.expect("st = st + ?");
                ("set add", vec![(pk, one(RowUpdate, Some(ck), format!("st={{{n},{}}}", n + 1)))])
            }
            13 => {
                session.execute_unpaged(&st.st_remove, (vec![n], pk, ck)).await.expect("st = st - ?");
                ("set remove", vec![(pk, one(RowUpdate, Some(ck), format!("delel_st={{{n}}}")))])
            }
            14 => {
                session.execute_unpaged(&st.del_v, (pk, ck)).await.expect("DELETE v");
                ("delete column", vec![(pk, one(RowUpdate, Some(ck), "del_v"))])
            }
            15 => {
                // Logged at T+1 (§3.2); the next write of the key is later still.
                session.execute_unpaged(&st.del_m, (pk, ck)).await.expect("DELETE m");
                ("delete map", vec![(pk, one(RowUpdate, Some(ck), "del_m"))])
            }
            16 => {
                session.execute_unpaged(&st.del_m_elem, (n, pk, ck)).await.expect("DELETE m[?]");
                ("delete map element", vec![(pk, one(RowUpdate, Some(ck), format!("delel_m={{{n}}}")))])
            }
            17 => {
                session.execute_unpaged(&st.del_row, (pk, ck)).await.expect("row delete");
                ("row delete", vec![(pk, one(RowDelete, Some(ck), ""))])
            }
            18 => {
                if rng.below(2) == 0 {
                    session.execute_unpaged(&st.del_partition, (pk,)).await.expect("partition delete");
                    ("partition delete", vec![(pk, one(PartitionDelete, None, ""))])
                } else {
                    let (lo, hi) = (ck.min(CKS - 2), ck.min(CKS - 2) + 1 + rng.below(3) as i32);
                    session.execute_unpaged(&st.del_range, (pk, lo, hi)).await.expect("range delete");
                    let rows = vec![
                        (RowRangeDelExclLeft, Some(lo), String::new()),
                        (RowRangeDelInclRight, Some(hi), String::new()),
                    ];
                    ("range delete", vec![(pk, rows)])
                }
            }
            19 => {
                // Several rows of one partition in one batch: one record.
                let mut batch = Batch::new(if rng.below(2) == 0 { BatchType::Unlogged } else { BatchType::Logged });
                let mut values: Vec<(i32, i32, i32)> = Vec::new();
                let mut statics = None;
                let mut cks: Vec<i32> = (0..CKS).collect();
                let rows = 2 + rng.below(3) as usize;
                let mut inserts = Vec::new();
                let mut updates = Vec::new();
                for i in 0..rows {
                    let c = cks.remove(rng.below(cks.len() as u64) as usize);
                    let v = n + i as i32;
                    if rng.below(2) == 0 {
                        batch.append_statement(st.insert.clone());
                        values.push((pk, c, v));
                        inserts.push((c, v));
                    } else {
                        batch.append_statement(st.update_v.clone());
                        values.push((v, pk, c));
                        updates.push((c, v));
                    }
                }
                let with_static = rng.below(2) == 0;
                if with_static {
                    batch.append_statement(st.update_s.clone());
                    statics = Some(n + 5);
                }
                // Mixed value shapes: bind as CqlValue rows.
                let mut bound: Vec<Vec<CqlValue>> = values
                    .iter()
                    .map(|&(a, b, c)| vec![CqlValue::Int(a), CqlValue::Int(b), CqlValue::Int(c)])
                    .collect();
                if let Some(s) = statics {
                    bound.push(vec![CqlValue::Int(s), CqlValue::Int(pk)]);
                }
                session.batch(&batch, bound).await.expect("single-partition batch");
                let mut record: Vec<Change> = Vec::new();
                if let Some(s) = statics {
                    record.push((RowUpdate, None, format!("s={s}")));
                }
                inserts.sort();
                updates.sort();
                let ins = inserts.iter().map(|&(c, v)| (c, (RowInsert, Some(c), format!("v={v}"))));
                let upd = updates.iter().map(|&(c, v)| (c, (RowUpdate, Some(c), format!("v={v}"))));
                if with_static {
                    // Split path (§3.4 rule 4): inserts, then updates.
                    record.extend(ins.chain(upd).map(|x| x.1));
                } else {
                    // Unsplit path: clustering order.
                    let mut all: Vec<(i32, Change)> = ins.chain(upd).collect();
                    all.sort_by_key(|x| x.0);
                    record.extend(all.into_iter().map(|x| x.1));
                }
                (if with_static { "batch one partition + static" } else { "batch one partition" }, vec![(pk, record)])
            }
            _ => {
                // Several partitions in one batch: one record per partition.
                let mut batch = Batch::new(if rng.below(2) == 0 { BatchType::Unlogged } else { BatchType::Logged });
                let mut pks = keys.clone();
                let mut bound = Vec::new();
                let mut records = Vec::new();
                for i in 0..(2 + rng.below(2) as i32) {
                    let p = pks.remove(rng.below(pks.len() as u64) as usize);
                    batch.append_statement(st.insert.clone());
                    bound.push((p, ck, n + i));
                    records.push((p, one(RowInsert, Some(ck), format!("v={}", n + i))));
                }
                session.batch(&batch, bound).await.expect("multi-partition batch");
                ("batch partitions", records)
            }
        };
        *kinds.entry(name).or_default() += 1;
        for (pk, record) in records {
            expected.entry(pk).or_default().push(record);
        }
    }
    (expected, kinds)
}

fn micros_of(time: &uuid::Uuid) -> i64 {
    let b = time.as_bytes();
    let ticks = (u64::from(b[6] & 0x0f) << 56)
        | (u64::from(b[7]) << 48)
        | (u64::from(b[4]) << 40)
        | (u64::from(b[5]) << 32)
        | (u64::from(b[0]) << 24)
        | (u64::from(b[1]) << 16)
        | (u64::from(b[2]) << 8)
        | u64::from(b[3]);
    (ticks.wrapping_sub(0x01B2_1DD2_1381_4000) / 10) as i64
}

fn now() -> Duration {
    SystemTime::now().duration_since(UNIX_EPOCH).expect("clock")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scylla_cdc_sees_a_randomized_workload_in_write_order() {
    let seed = support::seed();
    let started = Instant::now();

    let front =
        start_front(FrontConfig { emu_keyspace: fresh_keyspace("emu_gen"), shards: 2, ..FrontConfig::default() });
    let generation = front.current_generation().expect("a generation at start");
    let session = Arc::new(session(&front).await);
    let ks = keyspace(&session, "emu_cdc_wl").await;
    session
        .query_unpaged(
            format!(
                "CREATE TABLE {ks}.t (pk int, ck int, v int, s int static, m map<int, int>, st set<int>, \
                 PRIMARY KEY (pk, ck)) WITH cdc = {{'enabled': true}}"
            ),
            &[],
        )
        .await
        .expect("cdc table");
    let statements = Arc::new(Statements::prepare(&session, &ks).await);

    // The reader, started before the workload and reading while it runs.
    let seen: Seen = Arc::default();
    let start =
        now().saturating_sub(Duration::from_millis(200)).max(Duration::from_millis(generation.timestamp_ms as u64));
    let (mut reader, handle) = CDCLogReaderBuilder::new()
        .session(session.clone())
        .keyspace(&ks)
        .table_name("t")
        .start_timestamp(start)
        .window_size(Duration::from_millis(1000))
        .safety_interval(Duration::from_millis(3000))
        .sleep_interval(Duration::from_millis(200))
        .consumer_factory(Arc::new(Factory(seen.clone())))
        .build()
        .await
        .expect("CDCLogReader");

    let setup = started.elapsed();
    let before = front.stats();
    let tasks: Vec<_> =
        (0..TASKS).map(|t| tokio::spawn(writer(session.clone(), statements.clone(), t, seed))).collect();
    let mut expected: Expected = HashMap::new();
    let mut kinds: BTreeMap<&'static str, usize> = BTreeMap::new();
    for t in tasks {
        let (e, k) = t.await.expect("writer task");
        expected.extend(e);
        for (name, count) in k {
            *kinds.entry(name).or_default() += count;
        }
    }
    let written = started.elapsed() - setup;
    let after = front.stats();

    // Stop shortly after the last write; the reader waits out its safety interval.
    reader.stop_at(now() + Duration::from_millis(100));
    tokio::time::timeout(Duration::from_secs(30), handle)
        .await
        .expect("the reader stops")
        .expect("the reader ran without errors");

    let expected_rows: usize = expected.values().flatten().map(Vec::len).sum();
    let expected_records: usize = expected.values().map(Vec::len).sum();
    println!("workload: {kinds:?}");
    println!(
        "{} keys, {expected_records} records, {expected_rows} log rows; set up in {setup:?}, written in {written:?}, all read by {:?}",
        expected.len(),
        started.elapsed()
    );
    assert_eq!(after.cdc_refused, before.cdc_refused, "writes refused by the front");
    assert_eq!(after.cdc_log_failures, before.cdc_log_failures, "log writes failed");
    assert_eq!(after.cdc_log_rows - before.cdc_log_rows, expected_rows as u64, "log rows the front wrote");

    let seen = seen.lock().expect("seen").clone();
    let mut failures = Vec::new();
    for pk in seen.keys() {
        if !pk.is_some_and(|k| expected.contains_key(&k)) {
            failures.push(format!("rows of an unexpected key {pk:?}: {:?}", seen[pk]));
        }
    }
    let mut keys: Vec<&i32> = expected.keys().collect();
    keys.sort();
    for pk in keys {
        let want = &expected[pk];
        let got = seen.get(&Some(*pk)).cloned().unwrap_or_default();
        // Group the delivered rows into records by cdc$time, in delivery order.
        let mut records: Vec<Vec<Delivered>> = Vec::new();
        for d in got {
            match records.last_mut() {
                Some(r) if r[0].time == d.time => r.push(d),
                _ => records.push(vec![d]),
            }
        }
        for r in &records {
            let seqs: Vec<i32> = r.iter().map(|d| d.seq).collect();
            let eobs: Vec<bool> = r.iter().map(|d| d.end_of_batch).collect();
            let want_seqs: Vec<i32> = (0..r.len() as i32).collect();
            let mut want_eobs = vec![false; r.len()];
            want_eobs[r.len() - 1] = true;
            if seqs != want_seqs || eobs != want_eobs {
                failures.push(format!("pk {pk}: record at {} has seq {seqs:?}, end_of_batch {eobs:?}", r[0].time));
            }
        }
        for w in records.windows(2) {
            if micros_of(&w[0][0].time) >= micros_of(&w[1][0].time) {
                failures.push(format!(
                    "pk {pk}: cdc$time does not increase: {} then {}",
                    micros_of(&w[0][0].time),
                    micros_of(&w[1][0].time)
                ));
            }
        }
        let got: Vec<Vec<Change>> = records.into_iter().map(|r| r.into_iter().map(|d| d.change).collect()).collect();
        if &got != want {
            let first = got.iter().zip(want).position(|(g, w)| g != w).unwrap_or(got.len().min(want.len()));
            failures.push(format!(
                "pk {pk}: {} records delivered, {} written; first difference at record {first}:\n  delivered {:?}\n  written   {:?}",
                got.len(),
                want.len(),
                got.get(first),
                want.get(first)
            ));
        }
    }
    println!("{}", front.stats());
    assert!(failures.is_empty(), "seed {seed}: {} failures:\n{}", failures.len(), failures.join("\n"));
}
