// Its own binary, not a module of tests/driver: the global allocator below counts the whole process.
//! Heap allocations per request, end to end against the real server,
//! counted by a global allocator: a prepared write must allocate nothing and
//! a single-page prepared read at most once (its response buffer), on v5 at
//! most 0.02 times (segments are split off a reused read buffer).
//!
//! The session runs on one current-thread runtime and only allocations on
//! that thread are counted, so the count covers the request path, the
//! writer task and the reader task, and nothing else (not the emulation
//! front's threads in the tablets test). On a 2-worker runtime with 256
//! requests in flight, every thread of the process is counted while only
//! the requests run. The tests take turns.

use std::sync::Mutex;

use shardwise::protocol::consistency::Consistency;
use shardwise::protocol::frame::ProtocolVersion;
use shardwise::protocol::types::ser::DynValues;
use shardwise::{Batch, Session, SessionBuilder, Statement};

/// The tests take turns: one count at a time.
static TURN: Mutex<()> = Mutex::new(());

#[global_allocator]
static GLOBAL: testkit::alloc::CountingAllocator = testkit::alloc::CountingAllocator;

/// Every thread's allocations so far.
fn process_allocations() -> usize {
    testkit::alloc::allocations() as usize
}

/// The allocations made on this thread while `f` runs.
async fn count<F: std::future::Future<Output = ()>>(f: F) -> usize {
    testkit::alloc::on_this_thread_async(f).await.1 as usize
}

async fn setup(version: ProtocolVersion) -> (Session, String) {
    setup_with(SessionBuilder::new().request_timeout(None), version).await
}

async fn setup_with(builder: SessionBuilder, version: ProtocolVersion) -> (Session, String) {
    let session = builder
        .known_node_addr(testkit::shared_node().expect("server"))
        .protocol_versions(version, version)
        .default_consistency(Consistency::One)
        .build()
        .await
        .expect("session");
    let ks = testkit::fresh_keyspace("alloc");
    for ddl in
        [testkit::create_keyspace(&ks, 1), format!("CREATE TABLE {ks}.kv (pk bigint PRIMARY KEY, v1 bigint, v2 text)")]
    {
        session.execute(&Statement::new(ddl), ()).await.expect("ddl");
    }
    (session, ks)
}

/// The bind values of `INSERT INTO kv (pk, v1, v2)`, by name.
#[derive(shardwise::SerializeValues)]
struct Kv<'a> {
    v2: &'a str,
    pk: i64,
    v1: i64,
}

#[test]
fn prepared_write_allocates_nothing_and_read_allocates_once() {
    let _turn = TURN.lock().unwrap_or_else(|e| e.into_inner());
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime");
    for version in [ProtocolVersion::V4, ProtocolVersion::V5] {
        rt.block_on(measure(version));
    }
}

async fn measure(version: ProtocolVersion) {
    {
        let (session, ks) = setup(version).await;
        let insert =
            session.prepare(format!("INSERT INTO {ks}.kv (pk, v1, v2) VALUES (?, ?, ?)")).await.expect("prepare");
        let select = session.prepare(format!("SELECT v1, v2 FROM {ks}.kv WHERE pk = ?")).await.expect("prepare");
        let text = "a value of some length";
        // Warm up: buffers, stream-id pages and timers reach their steady state.
        for i in 0..200i64 {
            session.execute(&insert, (i, i * 2, text)).await.expect("insert");
            session.execute(&select, (i,)).await.expect("select");
        }
        const N: usize = 1000;
        // Steady state: a round of N writes with no allocation at all. Server
        // events pushed to the control connection (the schema changes of this
        // test's own DDL arrive late) are read into a buffer like any
        // response, so up to five rounds are measured and every count is
        // reported.
        let mut rounds = Vec::new();
        for _ in 0..5 {
            // Half of them from a struct matched to the markers by name,
            // its fields in another order than the markers.
            let writes = count(async {
                for i in 0..N as i64 {
                    if i % 2 == 0 {
                        session.execute(&insert, (i, i * 2, text)).await.expect("insert");
                    } else {
                        session.execute(&insert, Kv { v2: text, pk: i, v1: i * 2 }).await.expect("insert");
                    }
                }
            })
            .await;
            rounds.push(writes);
            if writes == 0 {
                break;
            }
        }
        let writes = rounds.iter().copied().min().unwrap_or(usize::MAX);
        let mut checksum = 0i64;
        let reads = count(async {
            for i in 0..N as i64 {
                let result = session.execute(&select, (i,)).await.expect("select");
                let (v1, v2): (i64, &str) = result.first_row().expect("types").expect("row");
                checksum += v1 + v2.len() as i64;
            }
        })
        .await;
        println!("{version:?}: allocations in rounds of {N} prepared writes: {rounds:?}");
        assert_eq!(checksum, (0..N as i64).map(|i| i * 2 + text.len() as i64).sum::<i64>());
        println!("{version:?}: allocations per single-page prepared read: {:.3}", reads as f64 / N as f64);
        assert_eq!(writes, 0, "{version:?}: every round of {N} prepared writes allocated: {rounds:?}");
        assert!(reads <= N, "{version:?}: prepared reads allocated {reads} times in {N} requests");
        if version == ProtocolVersion::V5 {
            // v5 segments are split off a reused read buffer, replaced only once used up:
            // about 0.01 allocations per read, at most 0.02 (README).
            assert!(
                reads * 50 <= N,
                "{version:?}: prepared reads allocated {reads} times in {N} requests, more than 0.02 per read"
            );
        }
    }
}

/// A batch built at run time (a `Batch` of 16 prepared statements, its
/// value lists of two types in one `Vec<&dyn DynValues>`) allocates once
/// per request: the list of its statements' requests. A tuple batch
/// allocates nothing.
#[test]
fn a_run_time_batch_allocates_only_its_statement_list() {
    let _turn = TURN.lock().unwrap_or_else(|e| e.into_inner());
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime");
    rt.block_on(async {
        let (session, ks) = setup(ProtocolVersion::V4).await;
        let insert =
            session.prepare(format!("INSERT INTO {ks}.kv (pk, v1, v2) VALUES (?, ?, ?)")).await.expect("prepare");
        let update = session.prepare(format!("UPDATE {ks}.kv SET v1 = ? WHERE pk = ?")).await.expect("prepare");
        let text = "a value of some length";
        let inserts: Vec<(i64, i64, &str)> = (0..8).map(|i| (i, i * 2, text)).collect();
        let updates: Vec<(i64, i64)> = (0..8).map(|i| (i * 3, i)).collect();
        let mut batch: Batch = Batch::unlogged(Vec::new());
        let mut values: Vec<&dyn DynValues> = Vec::new();
        for (i, u) in inserts.iter().zip(&updates) {
            batch.append_statement(&insert);
            values.push(i);
            batch.append_statement(&update);
            values.push(u);
        }
        let tuple = Batch::unlogged((&insert, &update));
        for _ in 0..100 {
            session.execute(&batch, &values).await.expect("batch");
            session.execute(&tuple, ((1i64, 2i64, text), (3i64, 1i64))).await.expect("tuple batch");
        }
        const N: usize = 200;
        let (mut dynamic, mut tuples) = (Vec::new(), Vec::new());
        for _ in 0..5 {
            dynamic.push(
                count(async {
                    for _ in 0..N {
                        session.execute(&batch, &values).await.expect("batch");
                    }
                })
                .await,
            );
            tuples.push(
                count(async {
                    for _ in 0..N {
                        session.execute(&tuple, ((1i64, 2i64, text), (3i64, 1i64))).await.expect("tuple batch");
                    }
                })
                .await,
            );
        }
        println!("allocations in rounds of {N} run-time batches: {dynamic:?}, of {N} tuple batches: {tuples:?}");
        let best = |rounds: &[usize]| rounds.iter().copied().min().unwrap_or(usize::MAX);
        assert!(best(&dynamic) <= N, "a run-time batch allocated more than its statement list: {dynamic:?}");
        assert_eq!(best(&tuples), 0, "every round of tuple batches allocated: {tuples:?}");
    });
}

/// On a tablets keyspace (through the emulation front), once the session
/// has learned the tablets, a prepared write still allocates nothing: the
/// tablet lookup borrows from the learned map.
#[test]
fn tablet_routed_write_allocates_nothing_once_learned() {
    let _turn = TURN.lock().unwrap_or_else(|e| e.into_inner());
    let upstream = testkit::shared_node().expect("server");
    let front = shardwise_emu::Front::start(
        upstream,
        shardwise_emu::FrontConfig { shards: 4, ..shardwise_emu::FrontConfig::default() },
    )
    .expect("front");
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime");
    rt.block_on(async {
        let session = SessionBuilder::new()
            .known_node_addr(front.addr())
            .default_consistency(Consistency::One)
            .request_timeout(None)
            .build()
            .await
            .expect("session");
        let ks = testkit::fresh_keyspace("alloc_tablets");
        for ddl in [
            format!(
                "CREATE KEYSPACE {ks} WITH replication = {{'class': 'SimpleStrategy', 'replication_factor': 1}} \
                 AND tablets = {{'enabled': true, 'initial': 8}}"
            ),
            format!("CREATE TABLE {ks}.kv (pk bigint PRIMARY KEY, v1 bigint, v2 text)"),
        ] {
            session.execute(&Statement::new(ddl), ()).await.expect("ddl");
        }
        let insert =
            session.prepare(format!("INSERT INTO {ks}.kv (pk, v1, v2) VALUES (?, ?, ?)")).await.expect("prepare");
        const N: i64 = 1000;
        // Learning: the misrouted writes bring the tablets.
        for i in 0..N {
            session.execute(&insert, (i, i, "learn")).await.expect("insert");
        }
        front.reset_routing_stats();
        let mut rounds = Vec::new();
        for _ in 0..5 {
            let writes = count(async {
                for i in 0..N {
                    session.execute(&insert, (i, i * 2, "value")).await.expect("insert");
                }
            })
            .await;
            rounds.push(writes);
            if writes == 0 {
                break;
            }
        }
        let stats = front.stats();
        println!(
            "tablets: allocations in rounds of {N} prepared writes: {rounds:?}; {} hits, {} misses",
            stats.hits(),
            stats.misses()
        );
        assert_eq!(stats.misses(), 0, "every write on its tablet's shard");
        assert_eq!(rounds.iter().copied().min(), Some(0), "every round of {N} writes allocated: {rounds:?}");
    });
}

/// On a 2-worker runtime, 256 request loops (each its own task, as in a
/// service) write at once: once warm, rounds of writes allocate nothing in
/// the whole process.
#[test]
fn prepared_writes_on_two_workers_with_256_in_flight_allocate_nothing() {
    writes_on_two_workers_allocate_nothing(None);
}

/// The same with a write buffer that fills up (1 KiB: a dozen requests)
/// and a request timeout: requests wait for buffer space, bounded by their
/// deadline, and that wait allocates nothing either (a boxed timer once
/// did, about 0.3 times per write at 4 x 2,048 in flight).
#[test]
fn writes_waiting_for_a_full_buffer_allocate_nothing() {
    writes_on_two_workers_allocate_nothing(Some(1024));
}

/// 256 request loops on a 2-worker runtime, with `buffer` bytes of write
/// buffer (the default when `None`, without a request timeout; else with
/// one).
fn writes_on_two_workers_allocate_nothing(buffer: Option<usize>) {
    let _turn = TURN.lock().unwrap_or_else(|e| e.into_inner());
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().expect("runtime");
    rt.block_on(async {
        let (session, ks) = match buffer {
            None => setup(ProtocolVersion::V4).await,
            Some(size) => {
                let connection = shardwise::ConnectionConfig { write_buffer_size: size, ..Default::default() };
                let builder = SessionBuilder::new()
                    .connection_config(connection)
                    .request_timeout(Some(std::time::Duration::from_secs(30)));
                setup_with(builder, ProtocolVersion::V4).await
            }
        };
        let insert = std::sync::Arc::new(
            session
                .prepare(format!("INSERT INTO {ks}.kv (pk, v1, v2) VALUES (?, ?, ?)"))
                .await
                .expect("prepare"),
        );
        // The count sees another worker's allocation.
        let before = process_allocations();
        let v = tokio::spawn(async { std::hint::black_box(vec![1u8; 64]).len() }).await.expect("task");
        assert!(v == 64 && process_allocations() - before >= 1, "the process-wide count counts");
        const LOOPS: i64 = 256;
        const PER_LOOP: i64 = 40;
        // Each round: the loops are spawned and parked on a barrier before
        // counting starts (spawning allocates), and counting stops once all
        // reached the barrier after their writes.
        let mut rounds = Vec::new();
        for round in 0..8 {
            let start = std::sync::Arc::new(tokio::sync::Barrier::new(LOOPS as usize + 1));
            let end = std::sync::Arc::new(tokio::sync::Barrier::new(LOOPS as usize + 1));
            let mut tasks = Vec::with_capacity(LOOPS as usize);
            for l in 0..LOOPS {
                let (session, insert, start, end) = (session.clone(), insert.clone(), start.clone(), end.clone());
                tasks.push(tokio::spawn(async move {
                    start.wait().await;
                    for i in 0..PER_LOOP {
                        let pk = l * PER_LOOP + i;
                        session.execute(&*insert, (pk, pk * 2, "a value of some length")).await.expect("insert");
                    }
                    end.wait().await;
                }));
            }
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
            let before = process_allocations();
            start.wait().await;
            end.wait().await;
            let during = process_allocations() - before;
            // The first rounds warm up: stream ids, buffers, the runtime's queues.
            if round >= 3 {
                rounds.push(during);
            }
            for t in tasks {
                t.await.expect("loop");
            }
        }
        let writes = (LOOPS * PER_LOOP) as usize;
        println!("2 workers x {LOOPS} in flight, write buffer {buffer:?}: allocations in rounds of {writes} prepared writes: {rounds:?}");
        let best = rounds.iter().copied().min().unwrap_or(usize::MAX);
        assert_eq!(best, 0, "every round of {writes} writes on 2 workers allocated: {rounds:?}");
    });
}
