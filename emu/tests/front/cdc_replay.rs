//! The log is a faithful record of the base table (issue 6, third test): a
//! randomized workload written through the front, replayed from the log
//! alone onto an empty copy of the table, reproduces the base table.
//!
//! The table has atomic columns (`a int`, `b text`), a static column, a map
//! and a set (lists are left out: the spec, §9.7, says their keys are not
//! reproducible on Cassandra). The workload (CQL text with literals, sent
//! by the official `scylla` crate through the front) is a random sequence
//! over 8 partitions × 6 rows of: inserts (all columns, keys only, static
//! only, static + clustering, with nulls, with an empty set), updates of
//! atomic and static columns, map `+`, `-`, `[k] =`, `[k] = null`,
//! overwrite, `= null`, `= {}`, set `+`, `-`, overwrite, column deletes
//! (atomic, static, whole collection, map element), row deletes (also
//! `ck IN (..)`), range deletes (every bound kind, open ends), partition
//! deletes, multi-column updates touching static and clustering columns,
//! and batches (text `BEGIN ... APPLY BATCH` and the driver's BATCH
//! message; one or several partitions; logged and unlogged; with a
//! batch-level timestamp or per-statement timestamps). About a third of
//! the writes carry `USING TTL 3600` (long: nothing expires during the
//! test) and about a third an explicit `USING TIMESTAMP` up to 300 ms in
//! the past, so writes of one key reach Cassandra out of timestamp order
//! and some batches mix timestamps (split records, §3.4).
//!
//! Then the whole log (`SELECT * FROM ks.t_scylla_cdc_log`) is read,
//! sorted per stream by (`cdc$time`, `cdc$batch_seq_no`) — each partition
//! key lives in one stream, so per-stream order is enough — and every
//! delta row is replayed onto the copy table `USING TIMESTAMP <cdc$time
//! µs>` (and `TTL <cdc$ttl>` when set), interpreting it per spec §3.1/§3.5:
//!
//! - insert (2): `INSERT` of the keys, values, `null` for deleted atomic
//!   columns and, for a collection with `cdc$deleted_X`, `X = <added
//!   elements>` (Cassandra writes that collection tombstone at T−1, as the
//!   base INSERT did);
//! - update (1, static row when `ck` is null): `X = v`, `X = null` for a
//!   deleted atomic column; for a collection, `X = <added>` if
//!   `cdc$deleted_X` (tombstone at T−1, cells at T — a `DELETE X` at T is
//!   logged at T+1 (§3.2) so this also gives back its tombstone at T),
//!   `X = null` if deleted and nothing added, `X = X + <added>` otherwise,
//!   and `X = X - <cdc$deleted_elements_X>` (a statement of its own, same
//!   timestamp);
//! - row delete (3), partition delete (4), range delete (5/6 start bound +
//!   7/8 end bound, a null `ck` = open end).
//!
//! Finally `SELECT *` of base and copy (sorted by key) must be equal, and
//! so must `WRITETIME` of every atomic and collection column (exact: the
//! log carries the write timestamps) and `TTL` (the copy's may be larger by
//! the time between the base write and the replay, never smaller). The seed
//! is printed and can be fixed with `EMU_CDC_SEED`; `EMU_CDC_OPS` sets the
//! number of writes (500).

use std::collections::{BTreeMap, HashMap};
use std::time::Instant;

use scylla::client::session::Session;
use scylla::statement::batch::{Batch, BatchType};
use scylla::statement::Statement;
use scylla::value::{CqlValue, Row};
use shardwise_emu::FrontConfig;
use testkit::fresh_keyspace;

use crate::support::{self, keyspace, now_micros, session, start_front};

/// Writes of the workload (`EMU_CDC_OPS` overrides, for longer explorations).
const OPS: usize = 500;
const PKS: i32 = 8;
const CKS: i32 = 6;
const TTL: i64 = 3600;
const ATOMIC: [&str; 3] = ["a", "b", "s"];
const COLLECTIONS: [&str; 2] = ["m", "st"];

// ---------------------------------------------------------------------------
// The test kit's deterministic generator.

use shardwise_emu::rng::SplitMix64 as Rng;

// ---------------------------------------------------------------------------
// The workload: CQL texts with literals.

struct Gen {
    rng: Rng,
    table: String,
    /// No explicit timestamp may precede the generation (§3.8).
    earliest: i64,
    counter: i32,
}

impl Gen {
    fn value(&mut self) -> i32 {
        self.counter += 1;
        self.counter
    }
    fn text(&mut self) -> String {
        let n = self.value();
        format!("'t{n}'")
    }
    fn map(&mut self) -> String {
        let n = 1 + self.rng.int(3);
        let mut entries = BTreeMap::new();
        for _ in 0..n {
            let k = self.rng.int(6);
            let v = self.text();
            entries.insert(k, v);
        }
        format!("{{{}}}", entries.iter().map(|(k, v)| format!("{k}: {v}")).collect::<Vec<_>>().join(", "))
    }
    fn keys(&mut self, n: i32) -> String {
        let n = 1 + self.rng.int(n);
        let keys: Vec<String> = (0..n).map(|_| self.rng.int(6).to_string()).collect();
        format!("{{{}}}", keys.join(", "))
    }
    fn elements(&mut self) -> String {
        let n = 1 + self.rng.int(3);
        let e: Vec<String> = (0..n).map(|_| self.rng.int(8).to_string()).collect();
        format!("{{{}}}", e.join(", "))
    }
    fn timestamp(&mut self) -> i64 {
        (now_micros() - self.rng.below(300_000) as i64).max(self.earliest)
    }
    /// A `USING` clause: TTL (upserts only) and/or an explicit timestamp.
    fn using(&mut self, ttl: bool, timestamp: bool) -> String {
        let ttl = ttl && self.rng.chance(35);
        let ts = timestamp && self.rng.chance(35);
        match (ttl, ts) {
            (false, false) => String::new(),
            (true, false) => format!(" USING TTL {TTL}"),
            (false, true) => format!(" USING TIMESTAMP {}", self.timestamp()),
            (true, true) => format!(" USING TTL {TTL} AND TIMESTAMP {}", self.timestamp()),
        }
    }

    /// One statement on partition `pk`; `ts`: whether it may carry its own
    /// timestamp. Returns the text and a name for the statistics.
    fn statement(&mut self, pk: i32, ts: bool) -> (String, &'static str) {
        let t = self.table.clone();
        let ck = self.rng.int(CKS);
        let row = format!("pk = {pk} AND ck = {ck}");
        let kind = self.rng.below(25);
        let u = self.using(true, ts);
        let d = self.using(false, ts);
        match kind {
            0 => {
                let (a, b) = (self.value(), self.text());
                (format!("INSERT INTO {t} (pk, ck, a, b) VALUES ({pk}, {ck}, {a}, {b}){u}"), "insert")
            }
            1 => {
                let (a, m, st) = (self.value(), self.map(), self.elements());
                (
                    format!("INSERT INTO {t} (pk, ck, a, m, st) VALUES ({pk}, {ck}, {a}, {m}, {st}){u}"),
                    "insert collections",
                )
            }
            2 => (format!("INSERT INTO {t} (pk, ck, b, st) VALUES ({pk}, {ck}, null, {{}}){u}"), "insert nulls"),
            3 => {
                let (s, a) = (self.value(), self.value());
                (format!("INSERT INTO {t} (pk, ck, s, a) VALUES ({pk}, {ck}, {s}, {a}){u}"), "insert static + row")
            }
            4 => {
                let s = self.value();
                (format!("INSERT INTO {t} (pk, s) VALUES ({pk}, {s}){u}"), "insert static")
            }
            5 => (format!("INSERT INTO {t} (pk, ck) VALUES ({pk}, {ck}){u}"), "insert keys"),
            6 => {
                let (a, b) = (self.value(), self.text());
                (format!("UPDATE {t}{u} SET a = {a}, b = {b} WHERE {row}"), "update")
            }
            7 => {
                let col = if self.rng.chance(50) { "a" } else { "b" };
                (format!("UPDATE {t}{u} SET {col} = null WHERE {row}"), "update = null")
            }
            8 => {
                let s = self.value();
                (format!("UPDATE {t}{u} SET s = {s} WHERE pk = {pk}"), "update static")
            }
            9 => (format!("DELETE s FROM {t}{d} WHERE pk = {pk}"), "delete static"),
            10 => {
                let m = self.map();
                (format!("UPDATE {t}{u} SET m = m + {m} WHERE {row}"), "map +")
            }
            11 => {
                let (k, v) = (self.rng.int(6), self.text());
                if self.rng.chance(25) {
                    (format!("UPDATE {t}{d} SET m[{k}] = null WHERE {row}"), "map [k] = null")
                } else {
                    (format!("UPDATE {t}{u} SET m[{k}] = {v} WHERE {row}"), "map [k] =")
                }
            }
            12 => {
                let keys = self.keys(3);
                (format!("UPDATE {t}{d} SET m = m - {keys} WHERE {row}"), "map -")
            }
            13 => {
                let m = self.map();
                (format!("UPDATE {t}{u} SET m = {m} WHERE {row}"), "map overwrite")
            }
            14 => {
                let v = if self.rng.chance(50) { "null" } else { "{}" };
                (format!("UPDATE {t}{d} SET m = {v} WHERE {row}"), "map = null/{}")
            }
            15 => {
                if self.rng.chance(50) {
                    (format!("DELETE m FROM {t}{d} WHERE {row}"), "delete map")
                } else {
                    let k = self.rng.int(6);
                    (format!("DELETE m[{k}] FROM {t}{d} WHERE {row}"), "delete map element")
                }
            }
            16 => match self.rng.below(4) {
                0 => {
                    let e = self.elements();
                    (format!("UPDATE {t}{u} SET st = st + {e} WHERE {row}"), "set +")
                }
                1 => {
                    let e = self.elements();
                    (format!("UPDATE {t}{d} SET st = st - {e} WHERE {row}"), "set -")
                }
                2 => {
                    let e = self.elements();
                    (format!("UPDATE {t}{u} SET st = {e} WHERE {row}"), "set overwrite")
                }
                _ => (format!("DELETE st FROM {t}{d} WHERE {row}"), "delete set"),
            },
            17 => {
                let (a, m, e, s) = (self.value(), self.map(), self.elements(), self.value());
                (
                    format!("UPDATE {t}{u} SET a = {a}, m = m + {m}, st = st - {e}, s = {s} WHERE {row}"),
                    "update static + row + collections",
                )
            }
            18 => {
                let cols = if self.rng.chance(50) { "a, b" } else { "b, m, s" };
                (format!("DELETE {cols} FROM {t}{d} WHERE {row}"), "delete columns")
            }
            19 => (format!("DELETE FROM {t}{d} WHERE {row}"), "row delete"),
            20 => {
                let ck2 = self.rng.int(CKS);
                if self.rng.chance(50) {
                    (format!("DELETE FROM {t}{d} WHERE pk = {pk} AND ck IN ({ck}, {ck2})"), "row delete IN")
                } else {
                    let a = self.value();
                    (format!("UPDATE {t}{u} SET a = {a} WHERE pk = {pk} AND ck IN ({ck}, {ck2})"), "update IN")
                }
            }
            21 => {
                let lo = self.rng.int(CKS);
                let hi = lo + self.rng.int(3);
                let lower = ["", &format!(" AND ck > {lo}"), &format!(" AND ck >= {lo}")][self.rng.below(3) as usize]
                    .to_string();
                let upper = ["", &format!(" AND ck < {hi}"), &format!(" AND ck <= {hi}")][self.rng.below(3) as usize]
                    .to_string();
                let upper = if lower.is_empty() && upper.is_empty() { format!(" AND ck <= {hi}") } else { upper };
                (format!("DELETE FROM {t}{d} WHERE pk = {pk}{lower}{upper}"), "range delete")
            }
            23 if self.rng.chance(40) => (format!("DELETE FROM {t}{d} WHERE pk = {pk}"), "partition delete"),
            _ => {
                let v = self.value();
                (format!("UPDATE {t}{u} SET a = {v} WHERE {row}"), "update")
            }
        }
    }
}

// ---------------------------------------------------------------------------
// Values as CQL literals, rows by column name.

fn literal(v: &CqlValue) -> String {
    match v {
        CqlValue::Int(n) => n.to_string(),
        CqlValue::BigInt(n) => n.to_string(),
        CqlValue::Text(s) => format!("'{}'", s.replace('\'', "''")),
        CqlValue::Map(entries) => {
            let e: Vec<String> = entries.iter().map(|(k, v)| format!("{}: {}", literal(k), literal(v))).collect();
            format!("{{{}}}", e.join(", "))
        }
        CqlValue::Set(items) => format!("{{{}}}", items.iter().map(literal).collect::<Vec<_>>().join(", ")),
        other => panic!("no literal for {other:?}"),
    }
}

type Named = HashMap<String, Option<CqlValue>>;

async fn named_rows(session: &Session, query: &str) -> Vec<Named> {
    let result = session.query_unpaged(query, &[]).await.unwrap_or_else(|e| panic!("{query}: {e}"));
    let rows = result.into_rows_result().expect("rows");
    let names: Vec<String> = rows.column_specs().iter().map(|c| c.name().to_string()).collect();
    rows.rows::<Row>().expect("rows").map(|r| names.iter().cloned().zip(r.expect("row").columns).collect()).collect()
}

fn get<'a>(row: &'a Named, col: &str) -> Option<&'a CqlValue> {
    row.get(col).unwrap_or_else(|| panic!("no column {col} in {row:?}")).as_ref()
}

fn micros_of(time: &[u8; 16]) -> i64 {
    let b = time;
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

/// One log row, decoded.
struct LogRow {
    stream: Vec<u8>,
    time: [u8; 16],
    micros: i64,
    seq: i32,
    op: i8,
    ttl: Option<i64>,
    row: Named,
}

impl LogRow {
    fn of(row: Named) -> LogRow {
        let time = match get(&row, "cdc$time") {
            Some(CqlValue::Timeuuid(t)) => *t.as_bytes(),
            other => panic!("cdc$time {other:?}"),
        };
        LogRow {
            stream: get(&row, "cdc$stream_id").and_then(CqlValue::as_blob).expect("stream id").clone(),
            time,
            micros: micros_of(&time),
            seq: get(&row, "cdc$batch_seq_no").and_then(CqlValue::as_int).expect("seq"),
            op: get(&row, "cdc$operation").and_then(CqlValue::as_tinyint).expect("operation"),
            ttl: get(&row, "cdc$ttl").and_then(CqlValue::as_bigint),
            row,
        }
    }
    fn int(&self, col: &str) -> Option<i32> {
        get(&self.row, col).and_then(CqlValue::as_int)
    }
    fn deleted(&self, col: &str) -> bool {
        get(&self.row, &format!("cdc$deleted_{col}")).and_then(CqlValue::as_boolean) == Some(true)
    }
    fn deleted_elements(&self, col: &str) -> Option<&CqlValue> {
        get(&self.row, &format!("cdc$deleted_elements_{col}"))
    }
    fn using(&self) -> String {
        match self.ttl {
            Some(ttl) => format!("USING TIMESTAMP {} AND TTL {ttl}", self.micros),
            None => format!("USING TIMESTAMP {}", self.micros),
        }
    }
    fn row_where(&self) -> String {
        let pk = self.int("pk").expect("pk");
        match self.int("ck") {
            Some(ck) => format!("pk = {pk} AND ck = {ck}"),
            None => format!("pk = {pk}"),
        }
    }
}

/// The statements that replay one delta row (or a range-delete pair) onto
/// `copy`, per spec §3.1/§3.5.
fn replay(copy: &str, row: &LogRow, end: Option<&LogRow>) -> Vec<String> {
    let pk = row.int("pk").expect("pk");
    let using = row.using();
    let mut out = Vec::new();
    // Element removals: a statement of their own, same timestamp.
    let removals = |out: &mut Vec<String>| {
        for col in COLLECTIONS {
            if let Some(keys) = row.deleted_elements(col) {
                out.push(format!(
                    "UPDATE {copy} USING TIMESTAMP {} SET {col} = {col} - {} WHERE {}",
                    row.micros,
                    literal(keys),
                    row.row_where()
                ));
            }
        }
    };
    match row.op {
        2 => {
            let ck = row.int("ck").expect("an insert has a clustering key");
            let mut names = vec!["pk".to_string(), "ck".to_string()];
            let mut values = vec![pk.to_string(), ck.to_string()];
            let mut additions = Vec::new();
            for col in ATOMIC {
                match get(&row.row, col) {
                    Some(v) => {
                        names.push(col.into());
                        values.push(literal(v));
                    }
                    None if row.deleted(col) => {
                        names.push(col.into());
                        values.push("null".into());
                    }
                    None => {}
                }
            }
            for col in COLLECTIONS {
                let added = get(&row.row, col);
                if row.deleted(col) {
                    names.push(col.into());
                    values.push(added.map_or("null".into(), literal));
                } else if let Some(added) = added {
                    additions.push(format!("{col} = {col} + {}", literal(added)));
                }
            }
            out.push(format!("INSERT INTO {copy} ({}) VALUES ({}) {using}", names.join(", "), values.join(", ")));
            if !additions.is_empty() {
                out.push(format!("UPDATE {copy} {using} SET {} WHERE {}", additions.join(", "), row.row_where()));
            }
            removals(&mut out);
        }
        1 => {
            let mut sets = Vec::new();
            for col in ATOMIC {
                match get(&row.row, col) {
                    Some(v) => sets.push(format!("{col} = {}", literal(v))),
                    None if row.deleted(col) => sets.push(format!("{col} = null")),
                    None => {}
                }
            }
            for col in COLLECTIONS {
                let added = get(&row.row, col);
                match (row.deleted(col), added) {
                    // The overwrite's own tombstone at T−1, elements at T.
                    (true, Some(added)) => sets.push(format!("{col} = {}", literal(added))),
                    (true, None) => sets.push(format!("{col} = null")),
                    (false, Some(added)) => sets.push(format!("{col} = {col} + {}", literal(added))),
                    (false, None) => {}
                }
            }
            if !sets.is_empty() {
                out.push(format!("UPDATE {copy} {using} SET {} WHERE {}", sets.join(", "), row.row_where()));
            }
            removals(&mut out);
        }
        3 => out.push(format!("DELETE FROM {copy} USING TIMESTAMP {} WHERE {}", row.micros, row.row_where())),
        4 => out.push(format!("DELETE FROM {copy} USING TIMESTAMP {} WHERE pk = {pk}", row.micros)),
        5 | 6 => {
            let end = end.expect("a range delete's end bound");
            assert!(matches!(end.op, 7 | 8), "range start followed by operation {}", end.op);
            assert_eq!((end.time, end.seq), (row.time, row.seq + 1), "range bounds in one record, consecutive");
            let mut wh = format!("pk = {pk}");
            if let Some(lo) = row.int("ck") {
                wh += &format!(" AND ck {} {lo}", if row.op == 5 { ">=" } else { ">" });
            }
            if let Some(hi) = end.int("ck") {
                wh += &format!(" AND ck {} {hi}", if end.op == 7 { "<=" } else { "<" });
            }
            out.push(format!("DELETE FROM {copy} USING TIMESTAMP {} WHERE {wh}", row.micros));
        }
        op => panic!("unexpected operation {op} (no images are enabled; range ends come with their starts)"),
    }
    out
}

// ---------------------------------------------------------------------------
// Comparison.

/// TTLs of one row: `ttl(a)`, `ttl(b)`, `ttl(s)`, `ttl(m)`, `ttl(st)` (one
/// per element), null for none.
type Ttls = Vec<Vec<Option<i32>>>;

/// A table's rows by (pk, ck): values and write times (compared exactly)
/// and TTLs (compared with slack).
async fn table_state(session: &Session, table: &str) -> BTreeMap<(i32, Option<i32>), (Vec<Option<CqlValue>>, Ttls)> {
    // Cassandra 5.0 answers WRITETIME and TTL of non-frozen collections
    // with one element per cell (CASSANDRA-8877).
    let exact =
        ["a", "b", "s", "m", "st", "writetime(a)", "writetime(b)", "writetime(s)", "writetime(m)", "writetime(st)"];
    let query = format!("SELECT pk, ck, {} FROM {table}", exact.join(", "));
    let result = session.query_unpaged(query.as_str(), &[]).await.unwrap_or_else(|e| panic!("{query}: {e}"));
    let rows = result.into_rows_result().expect("rows");
    let mut state = BTreeMap::new();
    for r in rows.rows::<Row>().expect("rows") {
        let mut cols = r.expect("row").columns;
        let pk = cols[0].as_ref().and_then(CqlValue::as_int).expect("pk");
        let ck = cols[1].as_ref().and_then(CqlValue::as_int);
        state.insert((pk, ck), (cols.split_off(2), Ttls::new()));
    }
    // TTLs of collections are lists with null elements: typed rows.
    let query = format!("SELECT pk, ck, ttl(a), ttl(b), ttl(s), ttl(m), ttl(st) FROM {table}");
    type TtlRow =
        (i32, Option<i32>, Option<i32>, Option<i32>, Option<i32>, Option<Vec<Option<i32>>>, Option<Vec<Option<i32>>>);
    let result = session.query_unpaged(query.as_str(), &[]).await.unwrap_or_else(|e| panic!("{query}: {e}"));
    for r in result.into_rows_result().expect("rows").rows::<TtlRow>().expect("typed rows") {
        let (pk, ck, a, b, s, m, st) = r.expect("row");
        if let Some(entry) = state.get_mut(&(pk, ck)) {
            entry.1 = vec![vec![a], vec![b], vec![s], m.unwrap_or_default(), st.unwrap_or_default()];
        }
    }
    state
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replaying_the_log_reproduces_the_base_table() {
    let seed = support::seed();
    let started = Instant::now();
    let front =
        start_front(FrontConfig { emu_keyspace: fresh_keyspace("emu_gen"), shards: 2, ..FrontConfig::default() });
    let generation = front.current_generation().expect("a generation at start");
    let session = session(&front).await;
    let ks = keyspace(&session, "emu_cdc_replay").await;
    let columns = "pk int, ck int, a int, b text, s int static, m map<int, text>, st set<int>, PRIMARY KEY (pk, ck)";
    session
        .query_unpaged(format!("CREATE TABLE {ks}.t ({columns}) WITH cdc = {{'enabled': true}}"), &[])
        .await
        .expect("cdc table");
    session.query_unpaged(format!("CREATE TABLE {ks}.copy ({columns})"), &[]).await.expect("copy table");
    let setup = started.elapsed();

    // The workload.
    let before = front.stats();
    let mut g =
        Gen { rng: Rng(seed), table: format!("{ks}.t"), earliest: (generation.timestamp_ms + 1) * 1000, counter: 0 };
    let mut kinds: BTreeMap<&'static str, usize> = BTreeMap::new();
    let ops = std::env::var("EMU_CDC_OPS").ok().and_then(|s| s.parse().ok()).unwrap_or(OPS);
    for _ in 0..ops {
        let pk = g.rng.int(PKS);
        if g.rng.chance(88) {
            let (text, kind) = g.statement(pk, true);
            *kinds.entry(kind).or_default() += 1;
            session.query_unpaged(text.as_str(), &[]).await.unwrap_or_else(|e| panic!("{text}: {e}"));
            continue;
        }
        // A batch: one partition or several; a batch-level timestamp or
        // per-statement ones.
        let n = 2 + g.rng.below(3) as usize;
        let one_partition = g.rng.chance(60);
        let batch_ts = g.rng.chance(30).then(|| g.timestamp());
        let logged = g.rng.chance(50);
        let mut texts = Vec::new();
        for _ in 0..n {
            let p = if one_partition { pk } else { g.rng.int(PKS) };
            let (text, kind) = g.statement(p, batch_ts.is_none());
            *kinds.entry(kind).or_default() += 1;
            texts.push(text);
        }
        *kinds.entry(if logged { "(logged batch)" } else { "(unlogged batch)" }).or_default() += 1;
        if g.rng.chance(50) {
            let using = batch_ts.map(|t| format!(" USING TIMESTAMP {t}")).unwrap_or_default();
            let text = format!(
                "BEGIN {}BATCH{using} {}; APPLY BATCH",
                if logged { "" } else { "UNLOGGED " },
                texts.join("; ")
            );
            session.query_unpaged(text.as_str(), &[]).await.unwrap_or_else(|e| panic!("{text}: {e}"));
        } else {
            let mut batch = Batch::new(if logged { BatchType::Logged } else { BatchType::Unlogged });
            for text in &texts {
                batch.append_statement(Statement::new(text.as_str()));
            }
            if let Some(t) = batch_ts {
                batch.set_timestamp(Some(t));
            }
            let values = vec![(); texts.len()];
            session.batch(&batch, values).await.unwrap_or_else(|e| panic!("{texts:?}: {e}"));
        }
    }
    let written = started.elapsed() - setup;
    let after = front.stats();
    assert_eq!(after.cdc_refused, before.cdc_refused, "writes refused by the front");
    assert_eq!(after.cdc_log_failures, before.cdc_log_failures, "log writes failed");

    // The log, per stream in (cdc$time, cdc$batch_seq_no) order.
    let mut log: Vec<LogRow> = named_rows(&session, &format!("SELECT * FROM {ks}.t_scylla_cdc_log"))
        .await
        .into_iter()
        .map(LogRow::of)
        .collect();
    assert_eq!(log.len() as u64, after.cdc_log_rows - before.cdc_log_rows, "log rows read = log rows written");
    log.sort_by(|x, y| (&x.stream, x.micros, x.time, x.seq).cmp(&(&y.stream, y.micros, y.time, y.seq)));
    // Each partition key lives in one stream.
    let mut stream_of: HashMap<i32, &[u8]> = HashMap::new();
    for r in &log {
        let pk = r.int("pk").expect("pk");
        assert_eq!(*stream_of.entry(pk).or_insert(&r.stream), &r.stream[..], "pk {pk} in two streams");
    }
    let copy = format!("{ks}.copy");
    let mut statements = 0;
    let mut ops: BTreeMap<i8, usize> = BTreeMap::new();
    let mut i = 0;
    while i < log.len() {
        let row = &log[i];
        *ops.entry(row.op).or_default() += 1;
        let end = matches!(row.op, 5 | 6).then(|| &log[i + 1]);
        for text in replay(&copy, row, end) {
            statements += 1;
            session.query_unpaged(text.as_str(), &[]).await.unwrap_or_else(|e| panic!("replay {text}: {e}"));
        }
        i += if end.is_some() { 2 } else { 1 };
    }
    println!("workload: {kinds:?}");
    println!(
        "{} log rows (by operation {ops:?}) in {} streams, replayed as {statements} statements; \
         set up in {setup:?}, written in {written:?}, replayed by {:?}",
        log.len(),
        stream_of.values().collect::<std::collections::HashSet<_>>().len(),
        started.elapsed()
    );

    // Compare: values and write times exactly, TTLs with slack.
    let base = table_state(&session, &format!("{ks}.t")).await;
    let replayed = table_state(&session, &copy).await;
    let slack = started.elapsed().as_secs() as i64 + 5;
    let mut failures = Vec::new();
    for key in base.keys().chain(replayed.keys()).collect::<std::collections::BTreeSet<_>>() {
        match (base.get(key), replayed.get(key)) {
            (Some(b), Some(r)) => {
                if b.0 != r.0 {
                    failures.push(format!("row {key:?}:\n  base   {:?}\n  replay {:?}", b.0, r.0));
                }
                for (x, y) in b.1.iter().zip(&r.1) {
                    let ok = x.len() == y.len()
                        && x.iter().zip(y).all(|(x, y)| match (x, y) {
                            (None, None) => true,
                            // The replay was written later, so its TTL runs out
                            // later, but it is read after the base: a second may
                            // tick between the two reads.
                            (Some(x), Some(y)) => {
                                let d = i64::from(*y) - i64::from(*x);
                                (-1..=slack).contains(&d)
                            }
                            _ => false,
                        });
                    if !ok {
                        failures.push(format!("row {key:?}: TTLs base {x:?}, replay {y:?}"));
                    }
                }
            }
            (Some(b), None) => failures.push(format!("row {key:?} only in base: {:?}", b.0)),
            (None, Some(r)) => failures.push(format!("row {key:?} only in the replay: {:?}", r.0)),
            (None, None) => {}
        }
    }
    println!("{} rows in the base table", base.len());
    println!("{}", front.stats());
    assert!(base.len() > 5, "the workload left too little to compare: {base:?}");
    assert!(failures.is_empty(), "seed {seed}: {} differences:\n{}", failures.len(), failures.join("\n"));
}

/// Regression (found by the replay above): two writes of one cell with the
/// same timestamp in one batch are merged into one mutation before CDC
/// sees it, and the survivor must be the one Cassandra (≥ 4.0,
/// CASSANDRA-14592) and Scylla (≥ 5.4, scylladb#14182) keep: a tombstone,
/// else an expiring cell over a non-expiring one, else the later
/// expiration, and only then the greater value. The same order holds for
/// row markers (`LivenessInfo.supersedes`). The front used to compare the
/// values first (and let the later row marker win), so it logged a cell the
/// base table does not have.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn same_timestamp_writes_in_a_batch_are_logged_as_cassandra_merges_them() {
    let front =
        start_front(FrontConfig { emu_keyspace: fresh_keyspace("emu_gen"), shards: 2, ..FrontConfig::default() });
    let session = session(&front).await;
    let ks = keyspace(&session, "emu_cdc_tie").await;
    session
        .query_unpaged(
            format!(
                "CREATE TABLE {ks}.t (pk int, ck int, a int, m map<int, text>, PRIMARY KEY (pk, ck)) \
                 WITH cdc = {{'enabled': true}}"
            ),
            &[],
        )
        .await
        .expect("cdc table");
    let t = format!("{ks}.t");
    // (pk, batch body, expected log rows as (operation, a, m, cdc$ttl)).
    type Expect = &'static [(i8, Option<i32>, Option<&'static str>, Option<i64>)];
    let cases: Vec<(i32, String, Expect)> = vec![
        (
            0,
            format!("UPDATE {t} USING TTL 3600 SET a = 1 WHERE pk = 0 AND ck = 0; UPDATE {t} SET a = 2 WHERE pk = 0 AND ck = 0"),
            &[(1, Some(1), None, Some(3600))],
        ),
        (
            1,
            format!("UPDATE {t} SET a = 2 WHERE pk = 1 AND ck = 0; UPDATE {t} USING TTL 3600 SET a = 1 WHERE pk = 1 AND ck = 0"),
            &[(1, Some(1), None, Some(3600))],
        ),
        (
            2,
            format!("UPDATE {t} USING TTL 3600 SET a = 3 WHERE pk = 2 AND ck = 0; UPDATE {t} USING TTL 100 SET a = 9 WHERE pk = 2 AND ck = 0"),
            &[(1, Some(3), None, Some(3600))],
        ),
        (
            3,
            format!("UPDATE {t} SET a = 5 WHERE pk = 3 AND ck = 0; UPDATE {t} SET a = 4 WHERE pk = 3 AND ck = 0"),
            &[(1, Some(5), None, None)],
        ),
        (
            4,
            format!("INSERT INTO {t} (pk, ck) VALUES (4, 0) USING TTL 3600; INSERT INTO {t} (pk, ck) VALUES (4, 0)"),
            &[(2, None, None, Some(3600))],
        ),
        (
            5,
            format!("UPDATE {t} USING TTL 3600 SET m[1] = 'a' WHERE pk = 5 AND ck = 0; UPDATE {t} SET m[1] = 'b' WHERE pk = 5 AND ck = 0"),
            &[(1, None, Some("{1: 'a'}"), Some(3600))],
        ),
    ];
    let mut failures = Vec::new();
    for (pk, body, expect) in &cases {
        let text = format!("BEGIN UNLOGGED BATCH {body}; APPLY BATCH");
        session.query_unpaged(text.as_str(), &[]).await.unwrap_or_else(|e| panic!("{text}: {e}"));
        let log =
            named_rows(&session, &format!("SELECT * FROM {t}_scylla_cdc_log WHERE pk = {pk} ALLOW FILTERING")).await;
        let mut rows: Vec<LogRow> = log.into_iter().map(LogRow::of).collect();
        rows.sort_by_key(|r| r.seq);
        let got: Vec<_> = rows.iter().map(|r| (r.op, r.int("a"), get(&r.row, "m").map(literal), r.ttl)).collect();
        let want: Vec<_> = expect.iter().map(|&(op, a, m, ttl)| (op, a, m.map(str::to_string), ttl)).collect();
        if got != want {
            failures.push(format!("{body}\n  logged   {got:?}\n  expected {want:?}"));
        }
        // And the base table agrees with the expectation.
        let base = named_rows(&session, &format!("SELECT a, m FROM {t} WHERE pk = {pk}")).await;
        let a = base.first().and_then(|r| get(r, "a").and_then(CqlValue::as_int));
        let m = base.first().and_then(|r| get(r, "m").map(literal));
        if (a, m.as_deref()) != (expect[0].1, expect[0].2) {
            failures.push(format!("{body}\n  base table has a = {a:?}, m = {m:?}"));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
