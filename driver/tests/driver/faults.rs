//! The driver under faults, against the real Cassandra through
//! [`testkit::fault::FaultProxy`]: 128 requests in flight while frames are
//! delayed or lost, connections silenced, dropped, reset or cut. Every
//! request must end within its timeout (plus slack) in a success or a typed
//! error — a hang fails the test — the session must be writing again once
//! the fault is gone, and every write it acknowledged must be readable.
//!
//! Sessions here speak protocol v4 (the proxy cuts v4 envelopes into
//! frames) and do not discover the topology, so that every connection goes
//! through the proxy.

use std::collections::BTreeMap;
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use shardwise::protocol::consistency::Consistency;
use shardwise::protocol::frame::ProtocolVersion;
use shardwise::{ConnectionConfig, ExecutionError, PreparedStatement, Session, SessionBuilder, Statement};
use testkit::fault::{Action, Direction, FaultProxy, OnAccept, Rule};

/// Requests in flight.
const IN_FLIGHT: usize = 128;
/// A request that has not ended this long after its timeout hangs.
const SLACK: Duration = Duration::from_secs(3);
/// EXECUTE.
const EXECUTE: u8 = 0x0a;

fn proxy() -> FaultProxy {
    FaultProxy::start(testkit::shared_node().expect("server")).expect("proxy")
}

async fn session(proxy: &FaultProxy, heartbeat: Duration, request_timeout: Duration) -> Session {
    let connection = ConnectionConfig {
        heartbeat_interval: Some(heartbeat),
        heartbeat_timeout: heartbeat,
        connect_timeout: Duration::from_secs(2),
        ..ConnectionConfig::default()
    };
    SessionBuilder::new()
        .known_node_addr(proxy.addr())
        .connection_config(connection)
        .protocol_versions(ProtocolVersion::V4, ProtocolVersion::V4)
        .discover_topology(false)
        .connections_per_node(2)
        .request_timeout(Some(request_timeout))
        .default_consistency(Consistency::One)
        .build()
        .await
        .expect("session through the proxy")
}

/// A fresh table `(k int PRIMARY KEY, v int)` and its prepared insert.
/// Schema changes and the final scan are not under test: on a loaded machine they may take
/// longer than the short request timeouts the faults are measured with.
const SETUP_TIMEOUT: Duration = Duration::from_secs(30);

async fn table(s: &Session, prefix: &str) -> (String, PreparedStatement) {
    let ks = testkit::fresh_keyspace(prefix);
    s.execute(&Statement::new(testkit::create_keyspace(&ks, 1)).with_timeout(SETUP_TIMEOUT), ())
        .await
        .expect("keyspace");
    let create = Statement::new(format!("CREATE TABLE {ks}.t (k int PRIMARY KEY, v int)")).with_timeout(SETUP_TIMEOUT);
    s.execute(&create, ()).await.expect("table");
    let insert = s.prepare(format!("INSERT INTO {ks}.t (k, v) VALUES (?, ?)")).await.expect("prepare");
    (ks, insert.with_idempotent(true))
}

/// How the requests of a load ended.
#[derive(Debug, Default)]
struct Tally {
    acknowledged: Vec<i32>,
    failed: BTreeMap<String, usize>,
    hung: usize,
    /// When each success completed, from the load's start.
    successes_at: Vec<Duration>,
}

impl Tally {
    fn failed(&self) -> usize {
        self.failed.values().sum()
    }

    /// The first success after `t`.
    fn first_success_after(&self, t: Duration) -> Option<Duration> {
        self.successes_at.iter().copied().filter(|s| *s > t).min()
    }
}

/// The error's kind, for the tally: its variant (and the connection
/// error's).
fn kind(e: &ExecutionError) -> String {
    let first = |d: String| d.split(['(', ' ', '{']).next().unwrap_or_default().to_owned();
    match e {
        ExecutionError::Connection(c) => format!("Connection::{}", first(format!("{c:?}"))),
        other => first(format!("{other:?}")),
    }
}

/// Writes keys `base..` from `IN_FLIGHT` concurrent writers for `duration`,
/// calling `during` (the fault) meanwhile; each request bounded by the
/// request timeout plus [`SLACK`].
async fn load<F: std::future::Future<Output = ()>>(
    s: &Session,
    insert: &PreparedStatement,
    base: i32,
    duration: Duration,
    request_timeout: Duration,
    during: F,
) -> Tally {
    let local = tokio::task::LocalSet::new();
    let tally = Rc::new(std::cell::RefCell::new(Tally::default()));
    let stop = Rc::new(AtomicBool::new(false));
    let started = Instant::now();
    local
        .run_until(async {
            let mut writers = Vec::new();
            for w in 0..IN_FLIGHT as i32 {
                let (s, insert, tally, stop) = (s.clone(), insert.clone(), tally.clone(), stop.clone());
                writers.push(tokio::task::spawn_local(async move {
                    let mut n = 0;
                    while !stop.load(Ordering::Acquire) {
                        let key = base + w + n * IN_FLIGHT as i32;
                        n += 1;
                        let write = s.execute(&insert, (key, key.wrapping_mul(7)));
                        match tokio::time::timeout(request_timeout + SLACK, write).await {
                            Ok(Ok(_)) => {
                                {
                                    let mut t = tally.borrow_mut();
                                    t.acknowledged.push(key);
                                    t.successes_at.push(started.elapsed());
                                }
                                // Paced: the point is many requests in flight, not throughput.
                                tokio::time::sleep(Duration::from_millis(10)).await;
                            }
                            Ok(Err(e)) => {
                                *tally.borrow_mut().failed.entry(kind(&e)).or_default() += 1;
                                // Do not spin on a session with no connection.
                                tokio::time::sleep(Duration::from_millis(20)).await;
                            }
                            Err(_) => tally.borrow_mut().hung += 1,
                        }
                    }
                }));
            }
            during.await;
            let left = duration.saturating_sub(started.elapsed());
            tokio::time::sleep(left).await;
            stop.store(true, Ordering::Release);
            for w in writers {
                w.await.expect("writer");
            }
        })
        .await;
    Rc::try_unwrap(tally).map(|t| t.into_inner()).unwrap_or_default()
}

/// Every acknowledged key is readable with its value (count and checksum),
/// read back by one paged scan of the table.
async fn assert_readable(s: &Session, ks: &str, acknowledged: &[i32]) {
    let scan = Statement::new(format!("SELECT k, v FROM {ks}.t")).with_page_size(5000).with_timeout(SETUP_TIMEOUT);
    let mut stored = std::collections::HashMap::new();
    let mut paging = None;
    loop {
        let r = s.execute_page(&scan, &(), paging.as_ref()).await.expect("scan");
        for row in r.rows::<(i32, i32)>().expect("types") {
            let (k, v) = row.expect("row");
            stored.insert(k, v);
        }
        if !r.has_more_pages() {
            break;
        }
        paging = r.paging_state();
    }
    let (mut found, mut sum, mut expected) = (0usize, 0i64, 0i64);
    for &k in acknowledged {
        expected += i64::from(k.wrapping_mul(7));
        if let Some(v) = stored.get(&k) {
            found += 1;
            sum += i64::from(*v);
        }
    }
    assert_eq!((found, sum), (acknowledged.len(), expected), "acknowledged writes lost");
}

/// What a fault must be seen to have done: a fault that did nothing would
/// let its test pass on a session that was never disturbed.
#[derive(Debug, Clone, Copy)]
enum Injected {
    /// It acted on every open connection (the count the fault returns):
    /// at least the session's pool connections, open when it struck.
    OpenConnections,
    /// Its rule acted on at least this many frames.
    FramesAtLeast(usize),
    /// Its rule acted on exactly this many frames.
    Frames(usize),
}

/// Runs one fault under load and checks the outcome: the fault was injected
/// (`injected`: `fault` returns the connections it acted on, the proxy
/// counts the frames its rules acted on), no hang, the session writes again
/// afterwards, nothing acknowledged lost.
async fn under_load(
    name: &str,
    injected: Injected,
    fault: impl FnOnce(&FaultProxy) -> usize,
    heal: impl FnOnce(&FaultProxy),
) -> Tally {
    let proxy = proxy();
    let request_timeout = Duration::from_secs(1);
    let s = session(&proxy, Duration::from_secs(1), request_timeout).await;
    let (ks, insert) = table(&s, "fault").await;
    let (mut session_connections, mut connections_hit, mut frames_acted_on) = (0, 0, 0);
    let tally = load(&s, &insert, 0, Duration::from_secs(5), request_timeout, async {
        tokio::time::sleep(Duration::from_millis(800)).await;
        session_connections = s.connections().len();
        connections_hit = fault(&proxy);
        tokio::time::sleep(Duration::from_millis(1500)).await;
        frames_acted_on = proxy.frames_acted_on();
        heal(&proxy);
    })
    .await;
    eprintln!(
        "{name}: {} acknowledged, {} failed {:?}, {} hung, {} connections accepted, {} EXECUTE frames; \
         the fault hit {connections_hit} connections (the session had {session_connections}), \
         its rules acted on {frames_acted_on} frames",
        tally.acknowledged.len(),
        tally.failed(),
        tally.failed,
        tally.hung,
        proxy.accepted(),
        proxy.frames(Direction::ToServer, EXECUTE)
    );
    match injected {
        Injected::OpenConnections => {
            assert!(session_connections > 0, "{name}: the session had no open connection when the fault struck");
            assert!(
                connections_hit >= session_connections,
                "{name}: the fault hit {connections_hit} connections, fewer than the session's {session_connections}"
            );
        }
        Injected::FramesAtLeast(n) => {
            assert!(frames_acted_on >= n, "{name}: the rule acted on {frames_acted_on} frames, expected at least {n}")
        }
        Injected::Frames(n) => {
            assert_eq!(frames_acted_on, n, "{name}: the rule acted on {frames_acted_on} frames, expected exactly {n}")
        }
    }
    assert_eq!(tally.hung, 0, "{name}: requests hung");
    // A fault of the network ends requests in connection errors and timeouts
    // only: a decode or protocol error would mean a broken stream was read.
    let foreign: Vec<_> = tally
        .failed
        .keys()
        .filter(|k| !(k.starts_with("Connection::") || *k == "Timeout" || *k == "NoConnection"))
        .collect();
    assert!(foreign.is_empty(), "{name}: errors that a network fault cannot explain: {:?}", tally.failed);
    assert!(!tally.acknowledged.is_empty(), "{name}: nothing written");
    // Writing again after the fault.
    let after = tally.first_success_after(Duration::from_millis(800 + 1500));
    assert!(after.is_some(), "{name}: no write succeeded after the fault was gone");
    s.execute(&insert, (-1i32, -7i32)).await.expect("a write after the fault");
    assert_readable(&s, &ks, &tally.acknowledged).await;
    tally
}

/// Bounds a whole test: a hang anywhere fails it.
async fn bounded<F: std::future::Future<Output = T>, T>(f: F) -> T {
    tokio::time::timeout(Duration::from_secs(120), f).await.expect("the test hung")
}

/// Responses delayed 30 ms each (later ones wait behind them) for 1.5 s.
#[tokio::test]
async fn delayed_responses() {
    bounded(under_load(
        "delay",
        Injected::FramesAtLeast(1),
        |p| {
            p.set_rules(vec![Rule::new(Action::Delay(Duration::from_millis(30))).direction(Direction::ToClient)]);
            0
        },
        FaultProxy::clear_rules,
    ))
    .await;
}

/// 40 EXECUTE frames dropped: each of those requests times out.
#[tokio::test]
async fn dropped_requests() {
    let t = bounded(under_load(
        "drop frame",
        Injected::Frames(40),
        |p| {
            p.set_rules(vec![Rule::new(Action::DropFrame).opcode(EXECUTE).times(40)]);
            0
        },
        FaultProxy::clear_rules,
    ))
    .await;
    // A dropped EXECUTE is never answered: each of the 40 ends in the request timeout (the
    // attempt timeout is longer, so none is retried), none hangs.
    // (More timeouts than drops only if the loaded machine made others late.)
    let timeouts = t.failed.get("Timeout").copied().unwrap_or(0);
    assert!(timeouts >= 40, "each dropped request timed out: {:?}", t.failed);
}

/// Every open connection closed (FIN) under load.
#[tokio::test]
async fn dropped_connections() {
    bounded(under_load("drop connection", Injected::OpenConnections, FaultProxy::drop_open_connections, |_| {})).await;
}

/// Every open connection reset (RST) under load.
#[tokio::test]
async fn reset_connections() {
    let t = bounded(under_load("reset", Injected::OpenConnections, FaultProxy::reset_open_connections, |_| {})).await;
    // The driver saw the resets: requests in flight on them failed with them.
    let seen = ["Connection::Io", "Connection::Closed"].iter().filter_map(|k| t.failed.get(*k)).sum::<usize>();
    assert!(seen > 0, "no request ended in the reset: {:?}", t.failed);
}

/// Two RESULT frames cut in half, each closing its connection.
#[tokio::test]
async fn cut_frames() {
    let t = bounded(under_load(
        "cut frame",
        Injected::Frames(2),
        |p| {
            p.set_rules(vec![Rule::new(Action::CutFrame).direction(Direction::ToClient).opcode(0x08).times(2)]);
            0
        },
        FaultProxy::clear_rules,
    ))
    .await;
    // Each cut closed its connection: the requests on it end as closed, never
    // as a frame decoded from half a frame (checked in `under_load`).
    assert!(
        t.failed.get("Connection::Closed").is_some_and(|&n| n > 0),
        "no connection closed by a cut: {:?}",
        t.failed
    );
}

/// Every open connection silenced, and new ones accepted but never
/// answered, for 1.5 s.
#[tokio::test]
async fn blackholed_connections_and_new_ones() {
    bounded(under_load(
        "blackhole",
        Injected::OpenConnections,
        |p| {
            p.on_accept(OnAccept::Blackhole);
            p.blackhole_open_connections()
        },
        |p| p.on_accept(OnAccept::Forward),
    ))
    .await;
}

/// The scenario: writes every 20 ms through the proxy, then every
/// open connection silenced (TCP up, nothing passes) while new connections
/// still get through; heartbeat 2 s, its timeout 2 s, request timeout 1 s.
/// The official driver writes again 4 s later; shardwise used to never
/// recover. Now within two heartbeat intervals (plus slack for a loaded
/// machine).
#[tokio::test]
async fn silenced_connections_are_replaced_within_two_heartbeats() {
    bounded(async {
        let proxy = proxy();
        let heartbeat = Duration::from_secs(2);
        let request_timeout = Duration::from_secs(1);
        let s = session(&proxy, heartbeat, request_timeout).await;
        let (ks, insert) = table(&s, "silence").await;
        let mut acknowledged = Vec::new();
        let mut silenced_at = None;
        let mut recovered_after = None;
        let (mut failed, mut hung) = (0, 0);
        let started = Instant::now();
        let mut key = 0i32;
        while started.elapsed() < Duration::from_secs(14) {
            if silenced_at.is_none() && started.elapsed() > Duration::from_secs(2) {
                assert!(proxy.blackhole_open_connections() > 0);
                silenced_at = Some(Instant::now());
            }
            key += 1;
            match tokio::time::timeout(request_timeout + SLACK, s.execute(&insert, (key, key.wrapping_mul(7)))).await {
                Ok(Ok(_)) => {
                    acknowledged.push(key);
                    if let (Some(at), None) = (silenced_at, recovered_after) {
                        recovered_after = Some(at.elapsed());
                    }
                }
                Ok(Err(e)) => {
                    // Typed: the request timed out, its connection failed, or (between the
                    // close and the refill) the node had no open connection.
                    assert!(
                        matches!(e, ExecutionError::Timeout(_) | ExecutionError::Connection(_) | ExecutionError::NoConnection),
                        "{e:?}"
                    );
                    failed += 1;
                }
                Err(_) => hung += 1,
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        eprintln!(
            "silence: {} acknowledged, {failed} failed, {hung} hung; writing again {recovered_after:?} after the silence",
            acknowledged.len()
        );
        assert_eq!(hung, 0);
        let recovered = recovered_after.expect("never wrote again after the silence");
        assert!(recovered <= 2 * heartbeat + SLACK, "recovered after {recovered:?}");
        assert_readable(&s, &ks, &acknowledged).await;
    })
    .await;
}

/// The post-DDL schema agreement asked the nodes without a timeout: with
/// the connections silenced (and no heartbeat to close them) it waited
/// forever. It is bounded by the schema agreement timeout now.
#[tokio::test]
async fn schema_agreement_is_bounded_when_nodes_stop_answering() {
    bounded(async {
        let proxy = proxy();
        let connection = ConnectionConfig { heartbeat_interval: None, ..ConnectionConfig::default() };
        let s = SessionBuilder::new()
            .known_node_addr(proxy.addr())
            .connection_config(connection)
            .protocol_versions(ProtocolVersion::V4, ProtocolVersion::V4)
            .discover_topology(false)
            .schema_agreement_timeout(Duration::from_secs(2))
            .build()
            .await
            .expect("session");
        s.await_schema_agreement().await.expect("agreement while all is well");
        assert!(s.check_schema_agreement().await.expect("asked").is_some(), "one node agrees with itself");
        proxy.blackhole_open_connections();
        let started = Instant::now();
        let r = tokio::time::timeout(Duration::from_secs(20), s.await_schema_agreement()).await;
        let r = r.expect("schema agreement hung on a silent node");
        assert!(matches!(r, Err(ExecutionError::SchemaAgreementTimeout(_))), "{r:?}");
        assert!(started.elapsed() < Duration::from_secs(2) + SLACK, "{:?}", started.elapsed());
    })
    .await;
}

/// Two "nodes" (two proxies in front of the same server), one of which
/// stops answering EXECUTE (it receives the frames and drops them; its
/// connections stay up and answer heartbeats). With an attempt timeout of
/// 3 s inside a request timeout of 8 s, idempotent writes that met the
/// stalled node first are retried on the other one and all succeed within
/// about one attempt timeout; non-idempotent writes are sent exactly once:
/// with an attempt timeout of their own, those that met the stalled node
/// end in a typed attempt timeout, and without one (the session's is for
/// idempotent statements) in the request timeout. When the request timeout
/// wrapped all the attempts, the stalled half waited it out and failed. The attempt
/// timeout leaves the live node room: with 1 s, 128 writes in flight on a
/// loaded 2-core machine sometimes took longer there too, and the exact
/// counts below (one attempt timeout per write that met the stalled node,
/// one answer per write from the live one) did not hold.
#[tokio::test]
async fn an_attempt_timeout_moves_idempotent_requests_to_the_next_node() {
    bounded(async {
        let addr = testkit::shared_node().expect("server");
        let proxies = [FaultProxy::start(addr).expect("proxy"), FaultProxy::start(addr).expect("proxy")];
        let attempt_timeout = Duration::from_secs(3);
        let request_timeout = Duration::from_secs(8);
        let s = SessionBuilder::new()
            .known_node_addr(proxies[0].addr())
            .known_node_addr(proxies[1].addr())
            .protocol_versions(ProtocolVersion::V4, ProtocolVersion::V4)
            .discover_topology(false)
            .request_timeout(Some(request_timeout))
            .attempt_timeout(Some(attempt_timeout))
            .default_consistency(Consistency::One)
            .build()
            .await
            .expect("session through the proxies");
        let (ks, idempotent) = table(&s, "attempt").await;
        // A statement that is not idempotent has the attempt timeout it
        // sets itself, not the session's.
        let plain = idempotent.clone().with_idempotent(false).with_attempt_timeout(attempt_timeout);
        let bare = idempotent.clone().with_idempotent(false);
        let executes = |p: &FaultProxy| p.frames(Direction::ToServer, EXECUTE);
        proxies[0].set_rules(vec![Rule::new(Action::DropFrame).opcode(EXECUTE).direction(Direction::ToServer)]);

        // All in flight at once; each one's outcome and duration.
        let run = |statement: &PreparedStatement, base: i32| {
            let mut set = tokio::task::JoinSet::new();
            for key in base..base + IN_FLIGHT as i32 {
                let (s, statement) = (s.clone(), statement.clone());
                set.spawn(async move {
                    let started = Instant::now();
                    let r = s.execute(&statement, (key, key.wrapping_mul(7))).await;
                    (key, r.map(|_| ()), started.elapsed())
                });
            }
            set
        };
        let bound = attempt_timeout + SLACK;

        let before = (executes(&proxies[0]), executes(&proxies[1]), s.metrics());
        let mut acknowledged = Vec::new();
        let mut set = run(&idempotent, 0);
        while let Some(done) = set.join_next().await {
            let (key, r, took) = done.expect("request task");
            assert!(r.is_ok(), "idempotent write {key} failed after {took:?}: {r:?}");
            assert!(took < bound, "idempotent write {key} took {took:?}, more than one attempt timeout");
            acknowledged.push(key);
        }
        let stalled = executes(&proxies[0]) - before.0;
        let answered = executes(&proxies[1]) - before.1;
        let after = s.metrics();
        eprintln!(
            "idempotent: {} acknowledged, {stalled} attempts timed out at the stalled node, {answered} sent to the other",
            acknowledged.len()
        );
        assert!(stalled > 0, "no request met the stalled node: the test proves nothing");
        assert_eq!(answered, IN_FLIGHT, "each write answered once by the live node");
        assert_eq!((after.attempt_timeouts - before.2.attempt_timeouts) as usize, stalled);
        assert_eq!((after.retries - before.2.retries) as usize, stalled);

        let before = (executes(&proxies[0]), executes(&proxies[1]));
        let (mut timed_out, mut ok) = (0, 0);
        let mut set = run(&plain, 1000);
        while let Some(done) = set.join_next().await {
            let (key, r, took) = done.expect("request task");
            assert!(took < bound, "non-idempotent write {key} took {took:?}, more than one attempt timeout");
            match r {
                Ok(()) => {
                    ok += 1;
                    acknowledged.push(key);
                }
                Err(ExecutionError::AttemptTimeout { after, .. }) if after == attempt_timeout => timed_out += 1,
                Err(e) => panic!("non-idempotent write {key}: {e:?}"),
            }
        }
        let sent = (executes(&proxies[0]) - before.0, executes(&proxies[1]) - before.1);
        eprintln!("non-idempotent: {ok} acknowledged, {timed_out} attempt timeouts, EXECUTE frames {sent:?}");
        assert_eq!(sent.0 + sent.1, IN_FLIGHT, "a non-idempotent write was sent more than once");
        assert_eq!((timed_out, ok), sent, "exactly the writes that met the stalled node timed out");
        assert!(timed_out > 0, "no request met the stalled node: the test proves nothing");

        // Without one of its own, it runs to the request timeout (as with
        // the official driver: a TRUNCATE is not cut at 12 s).
        let before = (executes(&proxies[0]), executes(&proxies[1]));
        let (mut timed_out, mut ok) = (0, 0);
        let mut set = run(&bare, 2000);
        while let Some(done) = set.join_next().await {
            let (key, r, took) = done.expect("request task");
            match r {
                Ok(()) => {
                    ok += 1;
                    acknowledged.push(key);
                }
                Err(ExecutionError::Timeout(after)) if after == request_timeout => {
                    assert!(took >= request_timeout, "write {key} timed out after {took:?}");
                    timed_out += 1;
                }
                Err(e) => panic!("non-idempotent write {key}: {e:?}"),
            }
        }
        let sent = (executes(&proxies[0]) - before.0, executes(&proxies[1]) - before.1);
        eprintln!("non-idempotent, no attempt timeout: {ok} acknowledged, {timed_out} request timeouts, {sent:?}");
        assert_eq!((timed_out, ok), sent, "exactly the writes that met the stalled node timed out, once each");
        assert!(timed_out > 0, "no request met the stalled node: the test proves nothing");

        proxies[0].clear_rules();
        assert_readable(&s, &ks, &acknowledged).await;
    })
    .await;
}
