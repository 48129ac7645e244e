//! The reader through a node crash: three Cassandra nodes (RF 3), the
//! emulation front in front of each, writers at QUORUM and a live reader at
//! QUORUM; one node gets SIGKILL under load, stays down for a while and is
//! started again on its data. Every acknowledged change must be delivered,
//! in write order per key, none twice (the reader runs on through the crash:
//! nothing is replayed). A write that failed may or may not have been
//! applied, so its change may be delivered or not, but only once.
//!
//! The guarantee is that of Scylla's CDC: a change whose write takes less
//! than the safety interval is read. Its `cdc$time` is the write's
//! timestamp, taken by the coordinator after the client sent it; its window
//! is read no earlier than a safety interval after that, so a write
//! acknowledged within the safety interval is visible to that read. Writes
//! here have a request timeout below the safety interval, so every
//! acknowledged one falls under it (the first writes to a fresh cluster on a
//! loaded machine take about a second: a 500 ms interval let a reader close
//! to real time read their windows before they were applied).
//!
//! The victim is neither the first node (the front's own connections for
//! log writes and its stand-in tables use it) nor the session's control
//! node; it is the primary replica of some of the log's streams.
//!
//! Its own test binary: starting three more Cassandra nodes loads the
//! machine enough to disturb the timing of the other CDC tests (a
//! per-shard connection that times out falls back to another shard), and
//! test binaries run one after another.

use shardwise_cdc_testkit as common;

use std::collections::{BTreeMap, HashMap, HashSet};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

use shardwise::protocol::consistency::Consistency;
use shardwise::protocol::token::Token;
use shardwise::{Session, SessionBuilder, Statement};
use shardwise_cdc::{CdcReaderBuilder, Operation};
use testkit::Cluster;

use common::{run, workload};

/// Concurrent writers, each on its own partition key, one write at a time.
const WRITERS: i32 = 32;

/// A write's request timeout, retries included: an acknowledged write took
/// less than this.
const WRITE_TIMEOUT: Duration = Duration::from_secs(2);

/// The reader's safety interval: longer than any acknowledged write took.
const SAFETY: Duration = Duration::from_secs(3);

/// What the writers did, per partition key: the `v` of acknowledged and of
/// failed writes.
#[derive(Default)]
struct Writes {
    acknowledged: HashMap<i32, Vec<i64>>,
    failed: HashMap<i32, Vec<i64>>,
    errors: BTreeMap<String, usize>,
    /// How long each acknowledged write took, by (pk, v).
    took: HashMap<(i32, i64), Duration>,
}

/// Each writer inserts `(pk = writer, ck = v % 4, v)` with increasing `v`
/// until `stop`; a failed write is not retried (it may have been applied).
fn start_writes(session: &Session, ks: &str, stop: Arc<AtomicBool>) -> tokio::task::JoinHandle<Writes> {
    let session = session.clone();
    let ks = ks.to_owned();
    tokio::spawn(async move {
        let insert = Arc::new(
            session
                .prepare(
                    Statement::new(format!("INSERT INTO {ks}.t (pk, ck, v) VALUES (?, ?, ?)"))
                        .with_consistency(Consistency::Quorum)
                        .with_timeout(WRITE_TIMEOUT),
                )
                .await
                .expect("prepare"),
        );
        let writes = Arc::new(Mutex::new(Writes::default()));
        let mut tasks = tokio::task::JoinSet::new();
        for pk in 0..WRITERS {
            let (session, insert, writes, stop) = (session.clone(), insert.clone(), writes.clone(), stop.clone());
            tasks.spawn(async move {
                let mut v = 0i64;
                while !stop.load(Ordering::Relaxed) {
                    let ck = (v % 4) as i32;
                    let sent = Instant::now();
                    let outcome = tokio::time::timeout(Duration::from_secs(30), session.execute(&*insert, (pk, ck, v)))
                        .await
                        .expect("a write hung");
                    {
                        let mut w = writes.lock().expect("lock");
                        match outcome {
                            Ok(_) => {
                                w.acknowledged.entry(pk).or_default().push(v);
                                w.took.insert((pk, v), sent.elapsed());
                            }
                            Err(e) => {
                                w.failed.entry(pk).or_default().push(v);
                                let kind = format!("{e:?}");
                                let kind = kind.split([' ', '(', '{']).next().unwrap_or("").to_owned();
                                if !w.errors.contains_key(&kind) {
                                    eprintln!("first {kind} error of a write: {e}");
                                }
                                *w.errors.entry(kind).or_default() += 1;
                            }
                        }
                    }
                    v += 1;
                    tokio::time::sleep(Duration::from_millis(5)).await;
                }
            });
        }
        while let Some(t) = tasks.join_next().await {
            t.expect("writer");
        }
        let done = std::mem::take(&mut *writes.lock().expect("lock"));
        done
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_reader_delivers_every_change_through_a_node_crash() {
    let started = Instant::now();
    let mut cluster =
        tokio::task::spawn_blocking(|| Cluster::start_restartable(3)).await.expect("join").expect("3-node cluster");
    println!("cluster up in {:?}", started.elapsed());
    let front = common::front_over(cluster.contact_points(), "cdc_crash", 2).await;
    let front_nodes = front.nodes();
    let session = SessionBuilder::new()
        .known_node_addr(front.addr())
        .default_consistency(Consistency::Quorum)
        .topology_event_delay(Duration::from_millis(500))
        .build()
        .await
        .expect("session");
    let deadline = Instant::now() + Duration::from_secs(60);
    while session.up_nodes().len() < 3 || front_nodes.iter().any(|n| session.node_connections(n.addr, None).is_empty())
    {
        assert!(Instant::now() < deadline, "the session reaches every node: {:?}", session.up_nodes());
        tokio::time::sleep(Duration::from_millis(100)).await;
    }

    let ks = testkit::fresh_keyspace("cdc_crash");
    run(&session, &testkit::create_keyspace(&ks, 3)).await;
    workload::create_table(&session, &ks).await;

    // The victim, and the streams it is the primary replica of.
    let control = session.control_node().expect("a control connection");
    let victim = (1..3).find(|&i| front_nodes[i].addr != control).expect("a victim");
    let victim_addr: SocketAddr = front_nodes[victim].addr;
    let generation = front.current_generation().expect("a generation");
    let streams: Vec<Token> = generation.streams().map(|s| s.token()).collect();
    let held = streams.iter().filter(|t| session.replicas(&ks, **t).first() == Some(&victim_addr)).count();
    assert!(held > 0, "{victim_addr} is the primary replica of none of the {} streams", streams.len());

    let seen: workload::Seen = Arc::default();
    let reader = CdcReaderBuilder::new(session.clone(), &ks, "t")
        .start(SystemTime::now() - Duration::from_secs(1))
        .window_size(Duration::from_millis(500))
        .safety_interval(SAFETY)
        .sleep_interval(Duration::from_millis(100))
        .consistency(Consistency::Quorum)
        .workers(2)
        .query_timeout(Duration::from_secs(2))
        .query_attempts(1000)
        .build(workload::collector(seen.clone()))
        .await
        .expect("reader");

    let stop = Arc::new(AtomicBool::new(false));
    let writes = start_writes(&session, &ks, stop.clone());
    // The kill comes once the reader is reading: it lags by the window and
    // the safety interval, and by much more on a loaded machine (a fixed 3 s
    // wait once ended with nothing read yet).
    let deadline = Instant::now() + Duration::from_secs(60);
    while workload::count(&seen) == 0 && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    tokio::time::sleep(Duration::from_secs(1)).await;
    let before = workload::count(&seen);
    let killed = Instant::now();
    tokio::task::block_in_place(|| cluster.nodes_mut()[victim].kill());
    tokio::time::sleep(Duration::from_secs(4)).await;
    let restarting = Instant::now();
    tokio::task::block_in_place(|| cluster.restart(victim)).expect("restart on the same data");
    let down_for = restarting - killed;
    let restarted_in = restarting.elapsed();
    // Writes go on with the node back for a while.
    let deadline = Instant::now() + Duration::from_secs(60);
    while session.node_connections(victim_addr, None).is_empty() {
        assert!(Instant::now() < deadline, "no connection to {victim_addr} again");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    tokio::time::sleep(Duration::from_secs(2)).await;
    stop.store(true, Ordering::Relaxed);
    let writes = writes.await.expect("writes");

    // Every acknowledged change delivered (the reader lags by the window and
    // the safety interval), then a little longer for any late duplicate.
    let acknowledged: usize = writes.acknowledged.values().map(Vec::len).sum();
    let drained = Instant::now();
    let deadline = drained + Duration::from_secs(60);
    loop {
        let got = seen.lock().expect("lock").clone();
        // (pk, v, how long its write took) of each acknowledged change not delivered.
        let missing: Vec<(i32, i64, Option<Duration>)> = writes
            .acknowledged
            .iter()
            .flat_map(|(pk, vs)| {
                let delivered: HashSet<i64> = got.get(pk).into_iter().flatten().filter_map(|(_, v)| *v).collect();
                vs.iter()
                    .filter(move |v| !delivered.contains(v))
                    .map(|v| (*pk, *v, writes.took.get(&(*pk, *v)).copied()))
            })
            .collect();
        if missing.is_empty() {
            break;
        }
        assert!(!reader.is_finished(), "the reader ended");
        if Instant::now() >= deadline {
            // Why: a reader whose workers stopped on an error says so at join.
            reader.stop();
            let joined = tokio::time::timeout(Duration::from_secs(30), reader.join()).await;
            let n = missing.len();
            let some = &missing[..n.min(10)];
            panic!("{n} acknowledged changes still missing after 60 s, (pk, v, write took) {some:?}; the reader: {joined:?}");
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let caught_up = drained.elapsed();
    tokio::time::sleep(Duration::from_secs(2)).await;
    reader.stop();
    tokio::time::timeout(Duration::from_secs(60), reader.join())
        .await
        .expect("the reader stops")
        .expect("the reader ends without error");

    let got = seen.lock().expect("lock").clone();
    let mut delivered = 0;
    let mut delivered_of_failed = 0;
    let (mut expected_sum, mut delivered_sum) = (0i64, 0i64);
    for pk in 0..WRITERS {
        let acked = writes.acknowledged.get(&pk).cloned().unwrap_or_default();
        let failed: HashSet<i64> = writes.failed.get(&pk).into_iter().flatten().copied().collect();
        let changes = got.get(&pk).cloned().unwrap_or_default();
        assert!(changes.iter().all(|(op, _)| *op == Operation::Insert), "pk {pk}: only inserts were written");
        let vs: Vec<i64> = changes.iter().map(|(_, v)| v.expect("v")).collect();
        // In write order and none twice: strictly increasing.
        assert!(vs.windows(2).all(|w| w[0] < w[1]), "pk {pk}: out of order or repeated: {vs:?}");
        let acked_set: HashSet<i64> = acked.iter().copied().collect();
        for v in &vs {
            assert!(acked_set.contains(v) || failed.contains(v), "pk {pk}: v {v} was never written");
            if !acked_set.contains(v) {
                delivered_of_failed += 1;
            } else {
                delivered_sum = delivered_sum.wrapping_add(checksum(pk, *v));
            }
        }
        expected_sum = acked.iter().fold(expected_sum, |s, v| s.wrapping_add(checksum(pk, *v)));
        delivered += vs.len();
    }
    let failed: usize = writes.failed.values().map(Vec::len).sum();
    let slowest = writes.took.values().max().copied().unwrap_or_default();
    println!(
        "CDC through a SIGKILL of {victim_addr} (primary replica of {held} of {} streams), down {down_for:?}, \
         restart took {restarted_in:?}: {acknowledged} writes acknowledged (the slowest in {slowest:?}), \
         {failed} failed {:?}; \
         {delivered} changes delivered ({} acknowledged, {delivered_of_failed} of failed writes), 0 duplicated; \
         {before} delivered before the kill; all delivered {caught_up:?} after the writes stopped",
        streams.len(),
        writes.errors,
        delivered - delivered_of_failed,
    );
    assert!(acknowledged > 1000, "the load ran: {acknowledged}");
    assert!(slowest < SAFETY, "an acknowledged write took {slowest:?}, past the safety interval");
    assert!(before > 0, "the reader was reading before the kill");
    assert_eq!(
        (delivered - delivered_of_failed, delivered_sum),
        (acknowledged, expected_sum),
        "every acknowledged change once (count, checksum)"
    );
    drop(session);
    front.stop();
    tokio::task::spawn_blocking(move || drop(cluster)).await.expect("join");
}

/// A change's contribution to the checksum: a change delivered for another
/// key or with another value shows.
fn checksum(pk: i32, v: i64) -> i64 {
    i64::from(pk).wrapping_mul(1_000_003).wrapping_add(v)
}
