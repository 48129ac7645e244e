//! CDC of a table in a tablets keyspace through the front: the stream sets
//! in `system.cdc_timestamps`/`system.cdc_streams` (`docs/cdc-log.md` §11),
//! log rows written to the stream of the row's tablet in the set of the
//! write's timestamp, a new set on every split and merge; and `scylla-cdc`
//! 0.7, unchanged, reading the log across a split and a merge made
//! mid-workload: every change once, in write order per key.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use async_trait::async_trait;
use scylla::client::session::Session;
use scylla_cdc::cdc_types::StreamID;
use scylla_cdc::consumer::{CDCRow, Consumer, ConsumerFactory};
use scylla_cdc::log_reader::CDCLogReaderBuilder;
use shardwise_emu::tablet_streams::{TabletStreams, CLOSED, CURRENT, OPENED};
use shardwise_emu::{FrontConfig, FrontHandle, Resize};
use shardwise_protocol::token::Token;

use crate::support::{session, start_front};

/// Keys written, one writer.
const KEYS: i32 = 16;
/// Writes per phase.
const PER_PHASE: i32 = 80;
/// A write's request timeout: every acknowledged write took less.
const WRITE_TIMEOUT: Duration = Duration::from_millis(1000);
/// The reader's safety interval: longer than any acknowledged write took,
/// so that the window of a change is read after its write was applied.
const SAFETY: Duration = Duration::from_millis(1500);

/// Each delivered row: (pk, v, stream, cdc$time).
type Seen = Arc<Mutex<Vec<(i32, i32, StreamID, uuid::Uuid)>>>;

struct Collect(Seen);

#[async_trait]
impl Consumer for Collect {
    async fn consume_cdc(&mut self, row: CDCRow<'_>) -> anyhow::Result<()> {
        let pk = row.get_value("pk").as_ref().and_then(|v| v.as_int()).ok_or_else(|| anyhow::anyhow!("no pk"))?;
        let v = row.get_value("v").as_ref().and_then(|v| v.as_int()).ok_or_else(|| anyhow::anyhow!("no v"))?;
        if let Ok(mut seen) = self.0.lock() {
            seen.push((pk, v, row.stream_id.clone(), row.time));
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

/// `system.cdc_streams` of one set: stream ids per state.
async fn streams_at(session: &Session, ks: &str, ts: i64) -> HashMap<i8, Vec<Vec<u8>>> {
    let rows = session
        .query_unpaged(
            "SELECT stream_state, stream_id FROM system.cdc_streams WHERE keyspace_name = ? AND table_name = ? \
             AND timestamp = ?",
            (ks, "t", scylla::value::CqlTimestamp(ts)),
        )
        .await
        .expect("system.cdc_streams")
        .into_rows_result()
        .expect("rows");
    let mut by_state: HashMap<i8, Vec<Vec<u8>>> = HashMap::new();
    for row in rows.rows::<(i8, Vec<u8>)>().expect("typed") {
        let (state, id) = row.expect("row");
        by_state.entry(state).or_default().push(id);
    }
    by_state
}

/// The stream ids of `set`, as bytes.
fn ids(streams: &TabletStreams, set: usize) -> Vec<Vec<u8>> {
    let mut v: Vec<Vec<u8>> = streams.sets()[set].streams.iter().map(|s| s.as_bytes().to_vec()).collect();
    v.sort();
    v
}

fn sorted(mut v: Vec<Vec<u8>>) -> Vec<Vec<u8>> {
    v.sort();
    v
}

/// Checks what `system.cdc_timestamps`/`cdc_streams` say against the
/// front's sets: one timestamp per set, newest first; per set its streams
/// as current, the previous set's as closed and its own as opened.
async fn check_published(session: &Session, front: &FrontHandle, ks: &str) -> TabletStreams {
    let streams = front.tablet_streams(ks, "t").expect("a tablets CDC table has stream sets");
    let times: Vec<i64> = session
        .query_unpaged(
            "SELECT timestamp FROM system.cdc_timestamps WHERE keyspace_name = ? AND table_name = ?",
            (ks, "t"),
        )
        .await
        .expect("system.cdc_timestamps")
        .into_rows_result()
        .expect("rows")
        .rows::<(scylla::value::CqlTimestamp,)>()
        .expect("typed")
        .map(|r| r.expect("row").0 .0)
        .collect();
    let expected: Vec<i64> = streams.sets().iter().rev().map(|s| s.timestamp_ms).collect();
    assert_eq!(times, expected, "one timestamp per set, newest first");
    for (i, set) in streams.sets().iter().enumerate() {
        let by_state = streams_at(session, ks, set.timestamp_ms).await;
        assert_eq!(sorted(by_state.get(&CURRENT).cloned().unwrap_or_default()), ids(&streams, i), "set {i}: current");
        assert_eq!(sorted(by_state.get(&OPENED).cloned().unwrap_or_default()), ids(&streams, i), "set {i}: opened");
        let closed = if i == 0 { Vec::new() } else { ids(&streams, i - 1) };
        assert_eq!(sorted(by_state.get(&CLOSED).cloned().unwrap_or_default()), closed, "set {i}: closed");
    }
    streams
}

/// Writes `PER_PHASE` inserts from `from` on: key `n % KEYS`, `v = n`.
async fn write(session: &Session, insert: &scylla::statement::prepared::PreparedStatement, from: i32) -> i32 {
    let mut insert = insert.clone();
    insert.set_request_timeout(Some(WRITE_TIMEOUT));
    for n in from..from + PER_PHASE {
        let began = Instant::now();
        session.execute_unpaged(&insert, (n % KEYS, n % 3, n)).await.expect("insert");
        let took = began.elapsed();
        assert!(took < SAFETY, "insert {n} took {took:?}, past the reader's safety interval {SAFETY:?}");
    }
    from + PER_PHASE
}

/// Waits until the set that `resize` started operates.
async fn until_switch(streams: &TabletStreams) {
    let at = streams.sets().last().expect("a set").timestamp_ms;
    while (SystemTime::now().duration_since(UNIX_EPOCH).expect("clock").as_millis() as i64) < at + 50 {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scylla_cdc_reads_a_tablets_table_across_a_split_and_a_merge() {
    let front = start_front(FrontConfig {
        shards: 4,
        emu_keyspace: testkit::fresh_keyspace("emu_tablets_cdc"),
        ..FrontConfig::default()
    });
    let session = Arc::new(session(&front).await);
    let ks = testkit::fresh_keyspace("emu_tcdc");
    session
        .query_unpaged(
            format!(
                "CREATE KEYSPACE {ks} WITH replication = {{'class': 'SimpleStrategy', 'replication_factor': 1}} \
                 AND tablets = {{'enabled': true, 'initial': 4}}"
            ),
            &[],
        )
        .await
        .expect("keyspace");
    session
        .query_unpaged(
            format!("CREATE TABLE {ks}.t (pk int, ck int, v int, PRIMARY KEY (pk, ck)) WITH cdc = {{'enabled': true}}"),
            &[],
        )
        .await
        .expect("cdc table");
    let first = check_published(&session, &front, &ks).await;
    let map = front.tablets(&ks, "t").expect("tablets");
    let tokens: Vec<i64> = first.sets()[0].streams.iter().map(|s| s.raw_token()).collect();
    let last_tokens: Vec<i64> = map.tablets().iter().map(|t| t.last_token).collect();
    assert_eq!(tokens, last_tokens, "a stream per tablet, at its last token");

    let seen: Seen = Arc::default();
    let start = Duration::from_millis(first.sets()[0].timestamp_ms as u64);
    let (mut reader, handle) = CDCLogReaderBuilder::new()
        .session(session.clone())
        .keyspace(&ks)
        .table_name("t")
        .start_timestamp(start)
        .window_size(Duration::from_millis(500))
        .safety_interval(SAFETY)
        .sleep_interval(Duration::from_millis(200))
        .consumer_factory(Arc::new(Factory(seen.clone())))
        .build()
        .await
        .expect("CDCLogReader");

    let insert = session.prepare(format!("INSERT INTO {ks}.t (pk, ck, v) VALUES (?, ?, ?)")).await.expect("prepare");
    // Before the split; after it but before its set starts (still the old
    // streams); in the split's set; after a merge, in the merge's set.
    let mut n = write(&session, &insert, 0).await;
    front.resize_tablets(&ks, "t", Resize::Split).await.expect("split").expect("split");
    n = write(&session, &insert, n).await;
    let after_split = check_published(&session, &front, &ks).await;
    assert_eq!(after_split.sets().len(), 2);
    assert_eq!(after_split.sets()[1].streams.len(), 8);
    until_switch(&after_split).await;
    n = write(&session, &insert, n).await;
    front.resize_tablets(&ks, "t", Resize::Merge).await.expect("merge").expect("merge");
    let after_merge = check_published(&session, &front, &ks).await;
    assert_eq!(after_merge.sets()[2].streams.len(), 4);
    until_switch(&after_merge).await;
    n = write(&session, &insert, n).await;

    let deadline = Instant::now() + Duration::from_secs(60);
    while seen.lock().map(|s| s.len()).unwrap_or(0) < n as usize {
        assert!(Instant::now() < deadline, "the reader delivered {} of {n}", seen.lock().map(|s| s.len()).unwrap_or(0));
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    tokio::time::sleep(Duration::from_secs(1)).await;
    reader.stop_at(SystemTime::now().duration_since(UNIX_EPOCH).expect("clock"));
    tokio::time::timeout(Duration::from_secs(30), handle).await.expect("reader stops").expect("reader ran");

    let seen = seen.lock().expect("seen").clone();
    let mut per_key: HashMap<i32, Vec<i32>> = HashMap::new();
    let mut per_set = [0usize; 3];
    for (pk, v, stream, time) in &seen {
        per_key.entry(*pk).or_default().push(*v);
        let micros = {
            let (secs, nanos) = time.get_timestamp().expect("a timeuuid").to_unix();
            secs as i64 * 1_000_000 + i64::from(nanos) / 1_000
        };
        let token = Token::murmur3(&pk.to_be_bytes()).value();
        let expected = after_merge.stream_for(token, micros).expect("a set at the write's time");
        assert_eq!(*stream, StreamID::new(expected.as_bytes().to_vec()), "pk {pk} v {v}: the stream of its tablet");
        let set = after_merge.sets().iter().rposition(|s| s.timestamp_ms * 1000 <= micros).expect("a set");
        per_set[set] += 1;
    }
    println!(
        "scylla-cdc on a tablets table: {} changes written, {} delivered; per stream set (4, 8, 4 tablets): {per_set:?}",
        n,
        seen.len()
    );
    assert_eq!(seen.len(), n as usize, "every change once");
    for (pk, vs) in &per_key {
        let expected: Vec<i32> = (0..n).filter(|x| x % KEYS == *pk).collect();
        assert_eq!(vs, &expected, "pk {pk}: every change, in write order");
    }
    assert!(per_set.iter().all(|&c| c >= PER_PHASE as usize), "every set logged its phase: {per_set:?}");
}

/// A front started after CDC was turned on for a tablets table does not
/// know the table's stream sets: it refuses the table's writes instead of
/// logging them to streams no reader of a tablets table looks at.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_front_that_lost_the_stream_sets_refuses_writes() {
    let emu = testkit::fresh_keyspace("emu_tablets_cdc_restart");
    let config = || FrontConfig { shards: 2, emu_keyspace: emu.clone(), ..FrontConfig::default() };
    let first = start_front(config());
    let before = session(&first).await;
    let ks = testkit::fresh_keyspace("emu_tcdc_restart");
    before
        .query_unpaged(
            format!(
                "CREATE KEYSPACE {ks} WITH replication = {{'class': 'SimpleStrategy', 'replication_factor': 1}} \
                 AND tablets = {{'enabled': true, 'initial': 2}}"
            ),
            &[],
        )
        .await
        .expect("keyspace");
    before
        .query_unpaged(format!("CREATE TABLE {ks}.t (pk int PRIMARY KEY, v int) WITH cdc = {{'enabled': true}}"), &[])
        .await
        .expect("cdc table");
    before.query_unpaged(format!("INSERT INTO {ks}.t (pk, v) VALUES (1, 1)"), &[]).await.expect("logged write");
    drop(before);
    first.stop();

    let second = start_front(config());
    let after = session(&second).await;
    let refused = after.query_unpaged(format!("INSERT INTO {ks}.t (pk, v) VALUES (2, 2)"), &[]).await;
    let message = format!("{:?}", refused.expect_err("refused, not logged elsewhere"));
    assert!(message.contains("stream sets"), "{message}");
}
