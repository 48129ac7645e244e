// Its own binary, not a module of tests/driver: the global allocator below counts the whole process.
//! Heap allocations per request, end to end against the real server,
//! counted by a global allocator: a prepared write must allocate nothing and
//! a single-page prepared read at most once (its response buffer).
//!
//! The session runs on one current-thread runtime and only allocations on
//! that thread are counted, so the count covers the request path, the
//! writer task and the reader task, and nothing else (not the emulation
//! front's threads in the tablets test). The tests take turns.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

use shardwise::protocol::consistency::Consistency;
use shardwise::protocol::frame::ProtocolVersion;
use shardwise::{Session, SessionBuilder, Statement};

struct Counting;

static ALLOCATIONS: AtomicUsize = AtomicUsize::new(0);

thread_local! {
    /// Count this thread's allocations.
    static COUNTING: Cell<bool> = const { Cell::new(false) };
}

/// The tests take turns: one count at a time.
static TURN: Mutex<()> = Mutex::new(());

fn counting() -> bool {
    COUNTING.try_with(Cell::get).unwrap_or(false)
}

// SAFETY: forwards every call to the system allocator; only counts.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if counting() {
            ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        }
        // SAFETY: the caller upholds `GlobalAlloc::alloc`'s contract.
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: the caller upholds `GlobalAlloc::dealloc`'s contract.
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        if counting() {
            ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        }
        // SAFETY: the caller upholds `GlobalAlloc::realloc`'s contract.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

async fn count<F: std::future::Future<Output = ()>>(f: F) -> usize {
    ALLOCATIONS.store(0, Ordering::SeqCst);
    COUNTING.with(|c| c.set(true));
    f.await;
    COUNTING.with(|c| c.set(false));
    ALLOCATIONS.load(Ordering::SeqCst)
}

async fn setup(version: ProtocolVersion) -> (Session, String) {
    let session = SessionBuilder::new()
        .known_node_addr(testkit::shared_node().expect("server"))
        .protocol_versions(version, version)
        .default_consistency(Consistency::One)
        .request_timeout(None)
        .build()
        .await
        .expect("session");
    let ks = testkit::fresh_keyspace("alloc");
    for ddl in [
        format!("CREATE KEYSPACE {ks} WITH replication = {{'class': 'SimpleStrategy', 'replication_factor': 1}}"),
        format!("CREATE TABLE {ks}.kv (pk bigint PRIMARY KEY, v1 bigint, v2 text)"),
    ] {
        session.execute(&Statement::new(ddl), ()).await.expect("ddl");
    }
    (session, ks)
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
        let insert = session
            .prepare(format!("INSERT INTO {ks}.kv (pk, v1, v2) VALUES (?, ?, ?)").as_str())
            .await
            .expect("prepare");
        let select =
            session.prepare(format!("SELECT v1, v2 FROM {ks}.kv WHERE pk = ?").as_str()).await.expect("prepare");
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
            let writes = count(async {
                for i in 0..N as i64 {
                    session.execute(&insert, (i, i * 2, text)).await.expect("insert");
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
    }
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
        let insert = session
            .prepare(format!("INSERT INTO {ks}.kv (pk, v1, v2) VALUES (?, ?, ?)").as_str())
            .await
            .expect("prepare");
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
