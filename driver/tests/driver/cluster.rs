//! A 3-node Cassandra cluster on 127.0.0.1–3, started once for every
//! scenario of this file (a 3-node cluster takes minutes to start on two
//! cores), which run in order:
//!
//! 1. the session discovers every node, computes replicas exactly where the
//!    server places data (checked against the server itself through request
//!    tracing) and routes prepared statements to a replica;
//! 2. nodes on the distance policy's deny list get no connection (checked in
//!    the session and in the ignored node's own `system_views.clients`);
//! 3. a node is stopped and started again (same data): the session reports
//!    it down and up, skips it meanwhile and reconnects to it, and requests
//!    at ONE and QUORUM on an RF 3 keyspace keep succeeding throughout;
//! 4. a node is killed (SIGKILL, no shutdown) under 128 idempotent QUORUM
//!    writes in flight on an RF 3 keyspace, and started again: every write
//!    the driver acknowledged is readable at ALL afterwards (count and
//!    checksum), and the session's pool to the node comes back by itself;
//! 5. the node carrying the control connection is stopped: the control
//!    connection moves to another node and events keep arriving (a schema
//!    change made afterwards by another client is seen).
//!
//! The nodes keep their directories so that a stopped node can start again
//! with its data (same host id and tokens); the harness below removes them.

use std::collections::BTreeSet;
use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use shardwise::cluster::DistancePolicy;
use shardwise::execute::Params;
use shardwise::protocol::consistency::Consistency;
use shardwise::protocol::response::{ErrorKind, Event};
use shardwise::protocol::token::Partitioner;
use shardwise::routing::partition_token;
use shardwise::{Connection, ConnectionConfig, ExecutionError, Session, SessionBuilder, SessionEvent, Statement};
use testkit::Cluster;
use uuid::Uuid;

/// The cluster; node directories are kept until it is dropped, so that a
/// killed node restarts on its data.
struct TestCluster {
    cluster: Cluster,
}

impl TestCluster {
    fn start() -> TestCluster {
        TestCluster { cluster: Cluster::start_restartable(3).expect("3-node cluster") }
    }

    fn addr(&self, i: usize) -> SocketAddr {
        self.cluster.contact_points()[i]
    }

    fn index_of(&self, addr: SocketAddr) -> usize {
        self.cluster.contact_points().iter().position(|a| *a == addr).expect("a node of the cluster")
    }

    fn stop(&mut self, i: usize) {
        self.cluster.nodes_mut()[i].stop().expect("stop");
    }

    /// SIGKILL to node `i`'s processes: no shutdown, as a crash.
    fn kill(&mut self, i: usize) {
        self.cluster.nodes_mut()[i].kill();
    }

    fn restart(&mut self, i: usize) {
        self.cluster.restart(i).expect("restart on the same data");
    }
}

/// Every session event, with when it arrived.
#[derive(Clone, Default)]
struct EventLog(Arc<Mutex<Vec<(Instant, SessionEvent)>>>);

impl EventLog {
    fn record(session: &Session) -> EventLog {
        let log = EventLog::default();
        let mut rx = session.events();
        let sink = log.clone();
        tokio::spawn(async move {
            loop {
                match rx.recv().await {
                    Ok(e) => sink.0.lock().expect("log").push((Instant::now(), e)),
                    Err(tokio::sync::broadcast::error::RecvError::Lagged(n)) => panic!("{n} session events lost"),
                    Err(tokio::sync::broadcast::error::RecvError::Closed) => return,
                }
            }
        });
        log
    }

    fn len(&self) -> usize {
        self.0.lock().expect("log").len()
    }

    fn events(&self) -> Vec<(Instant, SessionEvent)> {
        self.0.lock().expect("log").clone()
    }

    /// When the first event from index `from` on that `want` accepts arrived.
    async fn wait(&self, from: usize, within: Duration, what: &str, want: impl Fn(&SessionEvent) -> bool) -> Instant {
        let deadline = Instant::now() + within;
        loop {
            let found = self.0.lock().expect("log").iter().skip(from).find(|(_, e)| want(e)).map(|(at, _)| *at);
            if let Some(at) = found {
                return at;
            }
            assert!(Instant::now() < deadline, "no {what} within {within:?}; events: {:#?}", &self.events()[from..]);
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}

fn status(event: &SessionEvent, change: &str, addr: SocketAddr) -> bool {
    matches!(event, SessionEvent::Database(Event::StatusChange { change: c, node }) if c == change && node.ip() == addr.ip())
}

/// The nodes that served a traced request: the replicas (each logs its
/// single-partition read) and the coordinator.
async fn traced(session: &Session, tracing_id: Uuid) -> (BTreeSet<IpAddr>, Option<IpAddr>) {
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut last = BTreeSet::new();
    loop {
        // Replicas write their events after the coordinator finished: read
        // until they stop changing.
        if let Ok(info) = session.tracing_info(tracing_id).await {
            let replicas: BTreeSet<IpAddr> = info
                .events
                .iter()
                .filter(|e| e.activity.as_deref().is_some_and(|a| a.starts_with("Executing single-partition query")))
                .filter_map(|e| e.source)
                .collect();
            if !replicas.is_empty() && replicas == last {
                return (replicas, info.coordinator);
            }
            last = replicas;
        }
        assert!(Instant::now() < deadline, "trace {tracing_id} incomplete");
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
}

/// The (address, port) of every client connection of this driver that the
/// node `probe` is connected to reports in `system_views.clients` (the
/// probe's own connection included).
async fn clients_of(probe: &Connection) -> BTreeSet<(IpAddr, i32)> {
    let result = probe
        .execute(
            &Statement::new("SELECT address, port, driver_name FROM system_views.clients"),
            &(),
            Params::new(Consistency::One),
        )
        .await
        .expect("system_views.clients");
    result
        .rows::<(IpAddr, i32, Option<String>)>()
        .expect("types")
        .map(|r| r.expect("row"))
        .filter(|(_, _, driver)| driver.as_deref() == Some("shardwise"))
        .map(|(a, p, _)| (a, p))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_node_cluster() {
    let _turn = crate::common::own_servers().await;
    let started = Instant::now();
    let mut cluster = tokio::task::spawn_blocking(TestCluster::start).await.expect("join");
    println!("cluster started in {:?}", started.elapsed());
    let contact = cluster.addr(0);
    let deadline = Instant::now() + Duration::from_secs(90);
    let session = loop {
        let session = SessionBuilder::new()
            .known_node_addr(contact)
            .default_consistency(Consistency::One)
            .topology_refresh_interval(Some(Duration::from_secs(5)))
            .topology_event_delay(Duration::from_millis(500))
            .build()
            .await
            .expect("session");
        if session.nodes().len() == 3 {
            break session;
        }
        assert!(Instant::now() < deadline, "discovered only {:?}", session.nodes());
        tokio::time::sleep(Duration::from_secs(1)).await;
    };
    let log = EventLog::record(&session);

    replicas_match_the_server(&session).await;
    ignored_nodes_get_no_connections(&cluster, &session).await;
    stopped_node_is_skipped_and_comes_back(&mut cluster, &session, &log).await;
    killed_node_loses_no_acknowledged_write(&mut cluster, &session, &log).await;
    control_connection_moves_when_its_node_stops(&mut cluster, &session, &log).await;

    // Periodic refreshes ran, and none of them dropped a node: a stopped node
    // stays in the topology (it is down, not gone).
    let refreshes: Vec<SessionEvent> = log
        .events()
        .into_iter()
        .map(|(_, e)| e)
        .filter(|e| matches!(e, SessionEvent::TopologyRefreshed { .. }))
        .collect();
    assert!(refreshes.len() >= 3, "periodic topology refreshes: {refreshes:?}");
    for r in &refreshes {
        assert!(
            matches!(r, SessionEvent::TopologyRefreshed { added, removed, nodes: 3, .. } if added.is_empty() && removed.is_empty()),
            "{r:?}"
        );
    }
    println!("{} topology refreshes, whole test {:?}", refreshes.len(), started.elapsed());
    drop(session);
    tokio::task::spawn_blocking(move || drop(cluster)).await.expect("join");
}

async fn replicas_match_the_server(session: &Session) {
    let keyspaces = [
        ("simple_rf2", "{'class': 'SimpleStrategy', 'replication_factor': 2}"),
        ("nts_rf2", "{'class': 'NetworkTopologyStrategy', 'datacenter1': 2}"),
    ];
    for (ks, replication) in keyspaces {
        session
            .execute(&Statement::new(format!("CREATE KEYSPACE {ks} WITH replication = {replication}")), ())
            .await
            .expect("ks");
        session
            .execute(&Statement::new(format!("CREATE TABLE {ks}.kv (pk int PRIMARY KEY, v int)")), ())
            .await
            .expect("table");
        let insert = session.prepare(format!("INSERT INTO {ks}.kv (pk, v) VALUES (?, ?)")).await.expect("prepare");
        let select = session
            .prepare(format!("SELECT v FROM {ks}.kv WHERE pk = ?"))
            .await
            .expect("prepare")
            .with_consistency(Consistency::All)
            .with_tracing(true);
        let mut routed_to_replica = 0;
        const KEYS: i32 = 24;
        for pk in 0..KEYS {
            session.execute(&insert, (pk, pk * 10)).await.expect("insert");
            let token = partition_token(&[0], &(pk,), Partitioner::Murmur3).expect("token");
            let ours: BTreeSet<IpAddr> = session.replicas(ks, token).iter().map(|a| a.ip()).collect();
            assert_eq!(ours.len(), 2, "{ks}: RF 2");
            let result = session.execute(&select, (pk,)).await.expect("select");
            let (servers, coordinator) = traced(session, result.tracing_id().expect("traced")).await;
            assert_eq!(ours, servers, "{ks} pk {pk}: computed replicas differ from the server's placement");
            routed_to_replica += usize::from(coordinator.is_some_and(|c| ours.contains(&c)));
        }
        assert_eq!(routed_to_replica, KEYS as usize, "{ks}: every prepared request went to a replica");
    }
    println!("replicas: 2 strategies x 24 keys match the server's placement");
}

async fn ignored_nodes_get_no_connections(cluster: &TestCluster, session: &Session) {
    let ignored = cluster.addr(1);
    let probe = Connection::open(ignored, &ConnectionConfig::default()).await.expect("probe connection");
    let before = clients_of(&probe).await;
    let denied = SessionBuilder::new()
        .known_node_addr(cluster.addr(0))
        .default_consistency(Consistency::One)
        .distance_policy(DistancePolicy { deny: vec![ignored.ip()], ..DistancePolicy::default() })
        .build()
        .await
        .expect("session with a deny list");
    let log = EventLog::record(&denied);
    assert_eq!(denied.topology().len(), 3, "the ignored node is still part of the topology");
    assert_eq!(denied.nodes().len(), 2);
    assert!(!denied.nodes().contains(&ignored), "{:?}", denied.nodes());
    // Replicas on the ignored node are not candidates; requests still succeed.
    let insert = denied.prepare("INSERT INTO simple_rf2.kv (pk, v) VALUES (?, ?)").await.expect("prepare");
    for pk in 0..60 {
        let token = partition_token(&[0], &(pk,), Partitioner::Murmur3).expect("token");
        let replicas = denied.replicas("simple_rf2", token);
        assert!(!replicas.contains(&ignored) && !replicas.is_empty(), "{replicas:?}");
        denied.execute(&insert, (pk, pk)).await.expect("insert with a node ignored");
    }
    // Let background refills and the control connection settle.
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert!(denied.connections().iter().all(|c| c.addr().ip() != ignored.ip()));
    for (_, e) in log.events() {
        let touched = match &e {
            SessionEvent::ConnectionOpened(a) | SessionEvent::NodeUp(a) | SessionEvent::NodeDown(a) => *a == ignored,
            SessionEvent::ConnectionFailed { node, .. } => *node == ignored,
            SessionEvent::ControlConnectionChanged(a) => *a == ignored,
            _ => false,
        };
        assert!(!touched, "the ignored node was touched: {e:?}");
    }
    let after = clients_of(&probe).await;
    probe.close();
    let new: Vec<_> = after.difference(&before).collect();
    assert!(new.is_empty(), "the ignored node sees new client connections: {new:?}");
    // The main session is unaffected.
    assert_eq!(session.nodes().len(), 3);
    drop(denied);
    println!("ignored node {ignored}: no connection (session view and the node's system_views.clients)");
}

/// Requests run in the background, and how they went.
#[derive(Default)]
struct Load {
    ok: usize,
    failed: Vec<(Instant, String)>,
}

fn start_load(session: &Session, stop: Arc<AtomicBool>) -> tokio::task::JoinHandle<Load> {
    let session = session.clone();
    tokio::spawn(async move {
        let read =
            session.prepare("SELECT v FROM failover.kv WHERE pk = ?").await.expect("prepare").with_idempotent(true);
        let read_one = read.clone().with_consistency(Consistency::One);
        let read_quorum = read.with_consistency(Consistency::Quorum);
        let write = session
            .prepare("INSERT INTO failover.kv (pk, v) VALUES (?, ?)")
            .await
            .expect("prepare")
            .with_consistency(Consistency::Quorum)
            .with_idempotent(true);
        let mut load = Load::default();
        let mut i = 0i32;
        while !stop.load(Ordering::Relaxed) {
            let pk = i % 100;
            let result = match i % 3 {
                0 => session.execute(&read_one, (pk,)).await.map(|r| r.rows_count() == 1),
                1 => session.execute(&read_quorum, (pk,)).await.map(|r| r.rows_count() == 1),
                _ => session.execute(&write, (pk, i)).await.map(|_| true),
            };
            match result {
                Ok(true) => load.ok += 1,
                Ok(false) => load.failed.push((Instant::now(), format!("request {i}: row missing"))),
                Err(e) => load.failed.push((Instant::now(), format!("request {i} (kind {}): {e}", i % 3))),
            }
            i += 1;
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        load
    })
}

async fn stopped_node_is_skipped_and_comes_back(cluster: &mut TestCluster, session: &Session, log: &EventLog) {
    session
        .execute(
            &Statement::new(
                "CREATE KEYSPACE failover WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 3}",
            ),
            (),
        )
        .await
        .expect("ks");
    session.execute(&Statement::new("CREATE TABLE failover.kv (pk int PRIMARY KEY, v int)"), ()).await.expect("table");
    let insert = session
        .prepare("INSERT INTO failover.kv (pk, v) VALUES (?, ?)")
        .await
        .expect("prepare")
        .with_consistency(Consistency::All);
    for pk in 0..100 {
        session.execute(&insert, (pk, pk)).await.expect("insert at ALL");
    }
    // Not the control connection's node (that is the next scenario), not the seed.
    let control = session.control_node().expect("a control connection");
    let victim = (1..3).map(|i| cluster.addr(i)).find(|a| *a != control).expect("a victim");
    let index = cluster.index_of(victim);
    let mark = log.len();
    let stop = Arc::new(AtomicBool::new(false));
    let load = start_load(session, stop.clone());
    tokio::time::sleep(Duration::from_secs(2)).await;

    let stopping = Instant::now();
    tokio::task::block_in_place(|| cluster.stop(index));
    let stopped = Instant::now();
    let down = log.wait(mark, Duration::from_secs(60), "NodeDown", |e| *e == SessionEvent::NodeDown(victim)).await;
    let reported = log.wait(mark, Duration::from_secs(60), "STATUS_CHANGE DOWN", |e| status(e, "DOWN", victim)).await;
    assert!(!session.up_nodes().contains(&victim), "a stopped node is not up: {:?}", session.up_nodes());
    println!(
        "stop {victim}: process exited after {:?}; NodeDown after {:?}, STATUS_CHANGE DOWN after {:?} (from the stop request)",
        stopped - stopping,
        down.saturating_duration_since(stopping),
        reported.saturating_duration_since(stopping),
    );
    // Down for a while, under load.
    tokio::time::sleep(Duration::from_secs(5)).await;
    let down_until = Instant::now();

    let restarting = Instant::now();
    let mark_up = log.len();
    tokio::task::block_in_place(|| cluster.restart(index));
    let ready = Instant::now();
    let up = log.wait(mark_up, Duration::from_secs(60), "NodeUp", |e| *e == SessionEvent::NodeUp(victim)).await;
    let reported_up = log.wait(mark_up, Duration::from_secs(60), "STATUS_CHANGE UP", |e| status(e, "UP", victim)).await;
    let deadline = Instant::now() + Duration::from_secs(30);
    while session.node_connections(victim, None).is_empty() {
        assert!(Instant::now() < deadline, "no connection to {victim} again");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(session.up_nodes().contains(&victim));
    // Requests reach it again: it coordinates some of the keys it replicates
    // (RF 3: every key), counted by the session's per-node attempts.
    let attempts_at =
        |session: &Session| session.metrics().nodes.iter().find(|n| n.addr == victim).map_or(0, |n| n.attempts());
    let attempts_before = attempts_at(session);
    tokio::time::sleep(Duration::from_secs(2)).await;
    let coordinated = attempts_at(session) - attempts_before;
    stop.store(true, Ordering::Relaxed);
    let load = load.await.expect("load");
    println!("restart {victim}: it coordinated {coordinated} requests of the load in the 2 s after its pool came back");
    assert!(coordinated > 0, "no request of the load reached {victim} in the 2 s after it came back");
    println!(
        "restart {victim}: serving CQL after {:?}; NodeUp {:?} and STATUS_CHANGE UP {:?} after it served",
        ready - restarting,
        up.saturating_duration_since(ready),
        reported_up.saturating_duration_since(ready),
    );
    let while_down = load.failed.iter().filter(|(at, _)| *at >= down && *at < down_until).count();
    println!(
        "load on the RF 3 keyspace (ONE and QUORUM, idempotent): {} succeeded, {} failed ({} while the node was known down)",
        load.ok,
        load.failed.len(),
        while_down
    );
    for (at, e) in &load.failed {
        println!("  failed {:?} after the stop request: {e}", at.saturating_duration_since(stopping));
    }
    assert!(load.ok > 100, "the load ran: {}", load.ok);
    assert!(load.failed.is_empty(), "requests failed while a node was stopped: {:?}", load.failed);
}

async fn control_connection_moves_when_its_node_stops(cluster: &mut TestCluster, session: &Session, log: &EventLog) {
    let control = session.control_node().expect("a control connection");
    let index = cluster.index_of(control);
    let mark = log.len();
    let stopping = Instant::now();
    tokio::task::block_in_place(|| cluster.stop(index));
    let stopped = Instant::now();
    let moved = log
        .wait(
            mark,
            Duration::from_secs(30),
            "ControlConnectionChanged",
            |e| matches!(e, SessionEvent::ControlConnectionChanged(a) if *a != control),
        )
        .await;
    let new_control = session.control_node().expect("a control connection again");
    assert_ne!(new_control, control);
    assert!(session.up_nodes().contains(&new_control));
    let down = log.wait(mark, Duration::from_secs(30), "NodeDown", |e| *e == SessionEvent::NodeDown(control)).await;
    println!(
        "control connection on {control}: node stopped (process exited after {:?}); moved to {new_control} {:?} after the stop request, NodeDown after {:?}",
        stopped - stopping,
        moved.saturating_duration_since(stopping),
        down.saturating_duration_since(stopping),
    );
    // Events still arrive: a schema change made by another client is seen.
    let other = SessionBuilder::new()
        .known_node_addr(new_control)
        .discover_topology(false)
        .build()
        .await
        .expect("other client");
    let mark = log.len();
    let changed = Instant::now();
    other
        .execute(&Statement::new("CREATE TABLE failover.after_move (pk int PRIMARY KEY, v int)"), ())
        .await
        .expect("DDL from another client");
    let seen = log
        .wait(
            mark,
            Duration::from_secs(30),
            "SCHEMA_CHANGE for failover.after_move",
            |e| matches!(e, SessionEvent::Database(Event::SchemaChange(c)) if format!("{c:?}").contains("after_move")),
        )
        .await;
    println!("schema change by another client seen {:?} after it was made", seen.saturating_duration_since(changed));
    // The other client waited for its own node only: wait until every node
    // knows the table, then use it through the session.
    session.await_schema_agreement().await.expect("schema agreement");
    let insert = session.prepare("INSERT INTO failover.after_move (pk, v) VALUES (?, ?)").await.expect("prepare");
    for pk in 0..30 {
        session
            .execute(&insert.clone().with_consistency(Consistency::One), (pk, pk))
            .await
            .expect("insert after the move");
    }
}

/// Writers in flight during the kill.
const WRITERS: i32 = 128;

/// How the writes around a kill ended.
#[derive(Default)]
struct Writes {
    acknowledged: Vec<i32>,
    /// Error kind (its first word) and when.
    failed: Vec<(Instant, String)>,
    hung: usize,
}

/// `WRITERS` concurrent writers of keys `w, w + WRITERS, …` (value `7k`),
/// idempotent at QUORUM, each paced by 20 ms, until `stop`.
fn start_writes(session: &Session, stop: Arc<AtomicBool>) -> tokio::task::JoinHandle<Writes> {
    let session = session.clone();
    tokio::spawn(async move {
        let insert = session
            .prepare("INSERT INTO sigkill.kv (k, v) VALUES (?, ?)")
            .await
            .expect("prepare")
            .with_consistency(Consistency::Quorum)
            .with_idempotent(true);
        let writes = Arc::new(Mutex::new(Writes::default()));
        let mut writers = tokio::task::JoinSet::new();
        for w in 0..WRITERS {
            let (session, insert, stop, writes) = (session.clone(), insert.clone(), stop.clone(), writes.clone());
            writers.spawn(async move {
                let mut key = w;
                while !stop.load(Ordering::Relaxed) {
                    // The request timeout (30 s) plus slack: longer is a hang.
                    let write = session.execute(&insert, (key, key.wrapping_mul(7)));
                    let outcome = tokio::time::timeout(Duration::from_secs(40), write).await;
                    {
                        let mut writes = writes.lock().expect("writes");
                        match outcome {
                            Ok(Ok(_)) => writes.acknowledged.push(key),
                            Ok(Err(e)) => {
                                let kind =
                                    format!("{e:?}").split(['(', ' ', '{']).next().unwrap_or_default().to_owned();
                                writes.failed.push((Instant::now(), kind));
                            }
                            Err(_) => writes.hung += 1,
                        }
                    }
                    key += WRITERS;
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
            });
        }
        while let Some(w) = writers.join_next().await {
            w.expect("writer");
        }
        let done = std::mem::take(&mut *writes.lock().expect("writes"));
        done
    })
}

async fn killed_node_loses_no_acknowledged_write(cluster: &mut TestCluster, session: &Session, log: &EventLog) {
    session
        .execute(
            &Statement::new(
                "CREATE KEYSPACE sigkill WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 3}",
            ),
            (),
        )
        .await
        .expect("ks");
    session.execute(&Statement::new("CREATE TABLE sigkill.kv (k int PRIMARY KEY, v int)"), ()).await.expect("table");
    let control = session.control_node().expect("a control connection");
    let victim = (1..3).map(|i| cluster.addr(i)).find(|a| *a != control).expect("a victim");
    let index = cluster.index_of(victim);
    let mark = log.len();
    let stop = Arc::new(AtomicBool::new(false));
    let writes = start_writes(session, stop.clone());
    tokio::time::sleep(Duration::from_secs(3)).await;

    let killed = Instant::now();
    tokio::task::block_in_place(|| cluster.kill(index));
    let down = log.wait(mark, Duration::from_secs(60), "NodeDown", |e| *e == SessionEvent::NodeDown(victim)).await;
    // Down for a while, under load.
    tokio::time::sleep(Duration::from_secs(3)).await;

    let restarting = Instant::now();
    let mark_up = log.len();
    tokio::task::block_in_place(|| cluster.restart(index));
    let ready = Instant::now();
    let up = log.wait(mark_up, Duration::from_secs(60), "NodeUp", |e| *e == SessionEvent::NodeUp(victim)).await;
    let deadline = Instant::now() + Duration::from_secs(30);
    while session.node_connections(victim, None).is_empty() {
        assert!(Instant::now() < deadline, "no connection to {victim} again");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let reconnected = Instant::now();
    assert!(session.up_nodes().contains(&victim), "{victim} up again: {:?}", session.up_nodes());
    // Writes go on through the restarted node for a moment.
    tokio::time::sleep(Duration::from_secs(2)).await;
    stop.store(true, Ordering::Relaxed);
    let writes = writes.await.expect("writes");

    // Every acknowledged key, read back at ALL (the restarted node included).
    let scan = Statement::new("SELECT k, v FROM sigkill.kv")
        .with_consistency(Consistency::All)
        .with_page_size(2000)
        .with_idempotent(true);
    let mut stored = std::collections::HashMap::new();
    let mut paging = None;
    loop {
        // A page at ALL just after the restart may time out on the server
        // (hints replaying, a loaded machine): ask again, as an operator would.
        let mut tries = 0;
        let page = loop {
            match session.execute_page(&scan, &(), paging.as_ref()).await {
                Err(ExecutionError::Db(e)) if tries < 5 && matches!(e.kind, ErrorKind::ReadTimeout { .. }) => {
                    tries += 1;
                    eprintln!("scan at ALL: {e}; again");
                    tokio::time::sleep(Duration::from_secs(1)).await;
                }
                page => break page.expect("scan at ALL"),
            }
        };
        for row in page.rows::<(i32, i32)>().expect("types") {
            let (k, v) = row.expect("row");
            stored.insert(k, v);
        }
        if !page.has_more_pages() {
            break;
        }
        paging = page.paging_state();
    }
    let expected: i64 = writes.acknowledged.iter().map(|k| i64::from(k.wrapping_mul(7))).sum();
    let found: Vec<i32> = writes.acknowledged.iter().filter_map(|k| stored.get(k).copied()).collect();
    let checksum: i64 = found.iter().map(|v| i64::from(*v)).sum();
    let lost = writes.acknowledged.len() - found.len();
    let mut kinds = std::collections::BTreeMap::<&str, usize>::new();
    for (_, kind) in &writes.failed {
        *kinds.entry(kind.as_str()).or_default() += 1;
    }
    println!(
        "SIGKILL {victim} under {WRITERS} QUORUM writes in flight: {} acknowledged, {} failed {kinds:?}, {} hung, {lost} lost; \
         NodeDown {:?} after the kill; restarted node served CQL after {:?}, NodeUp {:?} and a pool connection {:?} after that",
        writes.acknowledged.len(),
        writes.failed.len(),
        writes.hung,
        down.saturating_duration_since(killed),
        ready - restarting,
        up.saturating_duration_since(ready),
        reconnected.saturating_duration_since(ready),
    );
    for (at, kind) in writes.failed.iter().take(20) {
        println!("  failed {:?} after the kill: {kind}", at.saturating_duration_since(killed));
    }
    assert_eq!(writes.hung, 0, "writes hung");
    assert!(writes.acknowledged.len() > 1000, "the load ran: {}", writes.acknowledged.len());
    assert_eq!((lost, checksum), (0, expected), "acknowledged writes lost (count, checksum)");
}
