//! Load balancing against real servers:
//!
//! - latency awareness: two proxies in front of one Cassandra are two
//!   "nodes"; one delays its answers by 20 ms. Without latency awareness it
//!   gets half the requests; with it, a few (its measurements, then a
//!   probe each retry period), and once it is fast again the probes bring
//!   it back;
//! - rack and datacenter awareness: a 3-node cluster with nodes in rack r1
//!   and r2 of dc1 and in dc2. Request tracing shows which node
//!   coordinated each request: the replica in the client's rack, or the
//!   client's datacenter, and never a remote node while a local one is up;
//!   a user's load-balancing policy that puts the remote node first sends
//!   every request there;
//! - connection affinity: through a proxy that counts each connection's
//!   requests, a thread-affine session sends all of a thread's requests on
//!   one connection;
//! - lightweight transactions: through the emulation front on a 3-node
//!   cluster (replication factor 3), whose per-node counters show which
//!   node each request reached, every conditional write goes to its
//!   partition's primary replica, while plain writes spread over the
//!   replicas;
//! - a policy hears how each attempt it planned ended, answered or failed
//!   (and where), through two proxies, one of which drops its answers.

use std::collections::BTreeMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use shardwise::cluster::{DatacenterFilter, DistancePolicy, HostFilter, NodeInfo};
use shardwise::load_balancing::{ClusterView, LoadBalancingPolicy, RoutingInfo, Target};
use shardwise::protocol::consistency::Consistency;
use shardwise::protocol::frame::ProtocolVersion;
use shardwise::protocol::token::Token;
use shardwise::{ConnectionAffinity, LatencyAwareness, PreparedStatement, Session, SessionBuilder, Statement};
use shardwise_emu::{Front, FrontConfig, FrontHandle};
use testkit::fault::{Action, Direction, FaultProxy, Rule};
use testkit::{Cluster, Location};

const EXECUTE: u8 = 0x0a;
const RESULT: u8 = 0x08;

async fn through(proxies: &[&FaultProxy], latency: Option<LatencyAwareness>) -> Session {
    let mut b = SessionBuilder::new()
        .protocol_versions(ProtocolVersion::V4, ProtocolVersion::V4)
        .discover_topology(false)
        .default_consistency(Consistency::One)
        .latency_awareness(latency);
    for p in proxies {
        b = b.known_node_addr(p.addr());
    }
    b.build().await.expect("session through the proxies")
}

/// Runs `n` writes one after the other and returns how many EXECUTE
/// requests each proxy forwarded meanwhile.
async fn writes(s: &Session, insert: &PreparedStatement, n: i32, proxies: [&FaultProxy; 2]) -> [usize; 2] {
    let before = proxies.map(|p| p.frames(Direction::ToServer, EXECUTE));
    for k in 0..n {
        s.execute(insert, (k, k)).await.expect("write");
    }
    let after = proxies.map(|p| p.frames(Direction::ToServer, EXECUTE));
    [after[0] - before[0], after[1] - before[1]]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn latency_awareness_puts_a_slow_node_last_and_probes_it_back() {
    let server = testkit::shared_node().expect("server");
    let (fast, slow) = (FaultProxy::start(server).expect("proxy"), FaultProxy::start(server).expect("proxy"));
    let setup = through(&[&fast], None).await;
    let ks = testkit::fresh_keyspace("latency");
    let replication = "{'class': 'SimpleStrategy', 'replication_factor': 1}";
    setup
        .execute(&Statement::new(format!("CREATE KEYSPACE {ks} WITH replication = {replication}")), ())
        .await
        .expect("ks");
    setup.execute(&Statement::new(format!("CREATE TABLE {ks}.t (k int PRIMARY KEY, v int)")), ()).await.expect("table");
    let text = format!("INSERT INTO {ks}.t (k, v) VALUES (?, ?)");
    let delay = || Rule::new(Action::Delay(Duration::from_millis(20))).direction(Direction::ToClient).opcode(RESULT);

    // Without latency awareness the slow node takes its share.
    let plain = through(&[&fast, &slow], None).await;
    let insert = plain.prepare(text.as_str()).await.expect("prepare");
    slow.set_rules(vec![delay()]);
    let [to_fast, to_slow] = writes(&plain, &insert, 100, [&fast, &slow]).await;
    println!("without latency awareness: fast {to_fast}, slow {to_slow}");
    assert!(to_slow >= 25, "the slow node's share without latency awareness: {to_slow} of 100");

    // With it: after its first measurements, the slow node only gets probes.
    let config = LatencyAwareness {
        minimum_measurements: 5,
        retry_period: Duration::from_millis(500),
        ..LatencyAwareness::default()
    };
    slow.clear_rules();
    let aware = through(&[&fast, &slow], Some(config)).await;
    let insert = aware.prepare(text.as_str()).await.expect("prepare");
    let _ = writes(&aware, &insert, 40, [&fast, &slow]).await;
    slow.set_rules(vec![delay()]);
    let [warm_fast, warm_slow] = writes(&aware, &insert, 100, [&fast, &slow]).await;
    let [to_fast, to_slow] = writes(&aware, &insert, 400, [&fast, &slow]).await;
    println!("with latency awareness: warming {warm_fast}/{warm_slow}, then fast {to_fast}, slow {to_slow}");
    assert!(to_slow <= 20, "the slow node is tried last, and probed now and then: {to_slow} of 400");
    assert_eq!(to_fast + to_slow, 400);

    // Fast again: each retry period a probe finds it faster, until its
    // average is back within the threshold and it takes its share again
    // (from 20 ms to 1 ms, the time-weighted average needs a few probes).
    slow.clear_rules();
    let mut probes = 0;
    let [to_fast, to_slow] = loop {
        tokio::time::sleep(config.retry_period + Duration::from_millis(100)).await;
        probes += 1;
        let share = writes(&aware, &insert, 100, [&fast, &slow]).await;
        if share[1] >= 25 || probes == 20 {
            break share;
        }
    };
    println!("recovered after {probes} retry periods: fast {to_fast}, slow {to_slow}");
    assert!(to_slow >= 25, "the recovered node's share after {probes} retry periods: {to_slow} of 100");
}

/// The node that coordinated a traced request.
async fn coordinator(session: &Session, result: &shardwise::QueryResult) -> IpAddr {
    let id = result.tracing_id().expect("traced");
    crate::common::finished_trace(session, id).await.expect("trace").coordinator.expect("a coordinator")
}

/// Coordinators of `n` traced requests, counted.
async fn coordinators(
    session: &Session,
    n: i32,
    run: impl AsyncFn(i32) -> shardwise::QueryResult,
) -> BTreeMap<IpAddr, usize> {
    let mut seen = BTreeMap::new();
    for k in 0..n {
        let r = run(k).await;
        *seen.entry(coordinator(session, &r).await).or_insert(0) += 1;
    }
    seen
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rack_then_datacenter_then_remote() {
    let _turn = crate::common::own_servers().await;
    let locations = [Location::new("dc1", "r1"), Location::new("dc1", "r2"), Location::new("dc2", "r1")];
    let cluster = tokio::task::spawn_blocking(move || Cluster::start_located(&locations))
        .await
        .expect("join")
        .expect("a cluster of two racks and two datacenters");
    let nodes: Vec<SocketAddr> = cluster.contact_points();
    let ip = |i: usize| nodes[i].ip();

    let session = |policy: DistancePolicy| {
        SessionBuilder::new()
            .known_node_addr(nodes[0])
            .distance_policy(policy)
            .default_consistency(Consistency::One)
            .build()
    };
    let admin = session(DistancePolicy::default()).await.expect("session");
    let ks = "racks";
    // Every token has a replica on each node: two in dc1 (one per rack), one in dc2.
    let replication = "{'class': 'NetworkTopologyStrategy', 'dc1': 2, 'dc2': 1}";
    admin
        .execute(&Statement::new(format!("CREATE KEYSPACE {ks} WITH replication = {replication}")), ())
        .await
        .expect("ks");
    admin.execute(&Statement::new(format!("CREATE TABLE {ks}.t (k int PRIMARY KEY, v int)")), ()).await.expect("table");

    for (rack, want) in [("r1", 0), ("r2", 1)] {
        let s = SessionBuilder::new()
            .known_node_addr(nodes[0])
            .local_rack("dc1", rack)
            .default_consistency(Consistency::One)
            .build()
            .await
            .expect("session");
        assert_eq!(s.nodes().len(), 2, "remote nodes are ignored unless asked for: {:?}", s.nodes());
        let insert = s.prepare(format!("INSERT INTO {ks}.t (k, v) VALUES (?, ?)")).await.expect("prepare");
        let insert = insert.with_tracing(true);
        let seen = coordinators(&s, 20, async |k| s.execute(&insert, (k, k)).await.expect("insert")).await;
        assert_eq!(seen, BTreeMap::from([(ip(want), 20)]), "rack {rack}: the replica in the rack coordinates");
        // Without a route (no partition key): the rack's node still comes first.
        let local = Statement::new("SELECT key FROM system.local").with_tracing(true);
        let seen = coordinators(&s, 10, async |_| s.execute(&local, ()).await.expect("select")).await;
        assert_eq!(seen, BTreeMap::from([(ip(want), 10)]), "rack {rack}: unrouted requests too");
    }

    // The other datacenter as the local one, dc1 as remote fallback: dc2's node coordinates.
    let remote = DistancePolicy { local_datacenter: Some("dc2".into()), use_remote: true, ..DistancePolicy::default() };
    let s = session(remote).await.expect("session");
    assert_eq!(s.nodes().len(), 3);
    let insert = s.prepare(format!("INSERT INTO {ks}.t (k, v) VALUES (?, ?)")).await.expect("prepare");
    let insert = insert.with_tracing(true);
    let seen = coordinators(&s, 20, async |k| s.execute(&insert, (k, k)).await.expect("insert")).await;
    assert_eq!(seen, BTreeMap::from([(ip(2), 20)]), "the local datacenter's replica, not a remote one");
    // A host filter of the user's: nodes it refuses (rack r2 of dc1, and
    // dc2 through the built-in datacenter filter) get no pool and no
    // request, whatever the replicas.
    #[derive(Debug)]
    struct NotRack(&'static str);
    impl HostFilter for NotRack {
        fn accept(&self, node: &NodeInfo) -> bool {
            node.rack.as_deref() != Some(self.0)
        }
    }
    let s = SessionBuilder::new()
        .known_node_addr(nodes[0])
        .host_filter(Arc::new(NotRack("r2")))
        .default_consistency(Consistency::One)
        .build()
        .await
        .expect("session");
    let sorted = |mut v: Vec<SocketAddr>| {
        v.sort();
        v
    };
    assert_eq!(sorted(s.nodes()), sorted(vec![nodes[0], nodes[2]]), "rack r2's node is filtered out");
    let insert = s.prepare(format!("INSERT INTO {ks}.t (k, v) VALUES (?, ?)")).await.expect("prepare");
    let insert = insert.with_tracing(true);
    let seen = coordinators(&s, 20, async |k| s.execute(&insert, (k, k)).await.expect("insert")).await;
    assert!(!seen.contains_key(&ip(1)) && seen.values().sum::<usize>() == 20, "none to the filtered node: {seen:?}");
    let dc1 = SessionBuilder::new()
        .known_node_addr(nodes[0])
        .host_filter(Arc::new(DatacenterFilter("dc1".into())))
        .build()
        .await
        .expect("session");
    assert_eq!(sorted(dc1.nodes()), sorted(vec![nodes[0], nodes[1]]), "dc2's node is filtered out");
    drop(dc1);

    // A load-balancing policy of the user's, over the built-in plan: the
    // remote datacenter's node first. Every request goes there, and the
    // policy was told each request's table and token.
    /// A request's table, and whether it had a token.
    type Asked = (Option<(String, String)>, bool);
    #[derive(Debug, Default)]
    struct RemoteFirst(std::sync::Mutex<Vec<Asked>>);
    impl LoadBalancingPolicy for RemoteFirst {
        fn plan(&self, request: &RoutingInfo<'_>, cluster: &ClusterView<'_>, plan: &mut Vec<Target>) {
            let table = request.table.map(|(k, t)| (k.to_owned(), t.to_owned()));
            self.0.lock().expect("lock").push((table, request.token.is_some()));
            cluster.default_plan(plan);
            let remote = |t: &Target| cluster.node(t.node).is_some_and(|n| n.datacenter() == Some("dc2"));
            plan.sort_by_key(|t| !remote(t));
        }
    }
    let policy = Arc::new(RemoteFirst::default());
    let everywhere =
        DistancePolicy { local_datacenter: Some("dc1".into()), use_remote: true, ..DistancePolicy::default() };
    let own = SessionBuilder::new()
        .known_node_addr(nodes[0])
        .distance_policy(everywhere)
        .load_balancing(policy.clone())
        .default_consistency(Consistency::One)
        .build()
        .await
        .expect("session");
    let insert = own.prepare(format!("INSERT INTO {ks}.t (k, v) VALUES (?, ?)")).await.expect("prepare");
    let insert = insert.with_tracing(true);
    policy.0.lock().expect("lock").clear();
    let seen = coordinators(&own, 20, async |k| own.execute(&insert, (k, k)).await.expect("insert")).await;
    assert_eq!(seen, BTreeMap::from([(ip(2), 20)]), "the policy's plan, not the built-in one");
    let asked = policy.0.lock().expect("lock").clone();
    let routed = (Some((ks.to_owned(), "t".to_owned())), true);
    assert!(asked.iter().filter(|a| **a == routed).count() >= 20, "each insert's table and token: {asked:?}");
    drop(own);
    println!("racks and datacenters: every request coordinated in the client's rack, else its datacenter");
    drop((s, admin));
    tokio::task::spawn_blocking(move || drop(cluster)).await.expect("join");
}

/// Requests each thread sends in the affinity test.
const PER_THREAD: usize = 20;

/// The EXECUTE requests each connection through `proxy` forwarded while
/// `select` ran [`PER_THREAD`] times, one after the other, on a thread of
/// its own.
fn on_a_thread_of_its_own(proxy: &FaultProxy, session: &Session, select: &PreparedStatement) -> BTreeMap<usize, usize> {
    let before = proxy.frames_by_connection(Direction::ToServer, EXECUTE);
    let (handle, session, select) = (tokio::runtime::Handle::current(), session.clone(), select.clone());
    std::thread::spawn(move || {
        handle.block_on(async {
            for _ in 0..PER_THREAD {
                session.execute(&select, ()).await.expect("select");
            }
        })
    })
    .join()
    .expect("the thread ends");
    let after = proxy.frames_by_connection(Direction::ToServer, EXECUTE);
    after.into_iter().map(|(c, n)| (c, n - before.get(&c).copied().unwrap_or(0))).filter(|(_, n)| *n > 0).collect()
}

/// Connection affinity, with two connections to one node: thread-affine,
/// every request of a thread goes to one of them; least loaded, a thread's
/// requests one after the other take turns between them. The default
/// (`Auto`) opens a connection per runtime worker to a node without shards
/// and keeps each thread to one, as `Thread` does.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_thread_affine_session_keeps_each_thread_on_one_connection() {
    let proxy = FaultProxy::start(testkit::shared_node().expect("server")).expect("proxy");
    for affinity in [ConnectionAffinity::Thread, ConnectionAffinity::LeastLoaded, ConnectionAffinity::Auto] {
        let builder = SessionBuilder::new()
            .known_node_addr(proxy.addr())
            .protocol_versions(ProtocolVersion::V4, ProtocolVersion::V4)
            .discover_topology(false)
            .default_consistency(Consistency::One);
        let builder = match affinity {
            // Two connections because the runtime has two workers.
            ConnectionAffinity::Auto => builder,
            _ => builder.connections_per_node(2).connection_affinity(affinity),
        };
        assert_eq!(builder.config().connection_affinity, affinity);
        let session = builder.build().await.expect("session through the proxy");
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while session.connections().len() < 2 {
            assert!(std::time::Instant::now() < deadline, "{affinity:?}: the second connection did not open");
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        let select = session.prepare("SELECT release_version FROM system.local").await.expect("prepare");
        for thread in 0..2 {
            let used = on_a_thread_of_its_own(&proxy, &session, &select);
            assert_eq!(used.values().sum::<usize>(), PER_THREAD, "{affinity:?}, thread {thread}: {used:?}");
            let connections = if affinity == ConnectionAffinity::LeastLoaded { 2 } else { 1 };
            assert_eq!(used.len(), connections, "{affinity:?}, thread {thread}: {used:?}");
        }
        assert_eq!(session.connections().len(), 2, "{affinity:?}: two connections, no more");
    }
}

/// Routed requests (shard hits and misses) each emulated node counted, by
/// the address of the Cassandra node behind it.
fn routed_per_node(front: &FrontHandle) -> BTreeMap<IpAddr, u64> {
    front.stats().nodes.iter().map(|n| (n.upstream.ip(), n.shards.iter().map(|s| s.hits + s.misses).sum())).collect()
}

/// Each node's requests in `after` that were not in `before`, without the
/// nodes that got none.
fn delta(before: &BTreeMap<IpAddr, u64>, after: &BTreeMap<IpAddr, u64>) -> BTreeMap<IpAddr, u64> {
    after.iter().map(|(ip, n)| (*ip, n - before.get(ip).copied().unwrap_or(0))).filter(|(_, n)| *n > 0).collect()
}

/// The token ring read from each Cassandra node's own `system.local` (not
/// through the driver's topology or the front): (token, node), sorted.
async fn ring_of(nodes: &[SocketAddr]) -> Vec<(i64, IpAddr)> {
    let mut ring = Vec::new();
    for &node in nodes {
        let direct = SessionBuilder::new()
            .known_node_addr(node)
            .discover_topology(false)
            .build()
            .await
            .expect("a session to one node");
        let local = Statement::new("SELECT tokens FROM system.local WHERE key = 'local'");
        let result = direct.execute(&local, ()).await.expect("system.local");
        let (tokens,): (Vec<String>,) = result.first_row().expect("typed").expect("a row");
        ring.extend(tokens.iter().map(|t| (t.parse::<i64>().expect("a Murmur3 token"), node.ip())));
    }
    ring.sort_unstable();
    ring
}

/// The primary replica of `token` on `ring`: the node of the first token
/// at or after it, wrapping around (SimpleStrategy's first replica).
fn primary(ring: &[(i64, IpAddr)], token: i64) -> IpAddr {
    ring.iter().find(|(t, _)| *t >= token).unwrap_or(&ring[0]).1
}

/// Lightweight transactions go to the primary replica: on a 3-node cluster
/// behind the emulation front (which marks prepared conditional statements
/// as Scylla does, `SCYLLA_LWT_ADD_METADATA_MARK`), with replication factor
/// 3, every `IF NOT EXISTS` insert of each of 30 keys reaches, by the
/// front's per-node counters, the node that owns the key's token on the
/// ring read from the nodes themselves; the same keys' plain inserts
/// spread over the three replicas (the driver shuffles them), so the LWT
/// routing is not merely the token-aware default.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lwt_requests_go_to_the_primary_replica_and_plain_ones_spread() {
    let _turn = crate::common::own_servers().await;
    let cluster = tokio::task::spawn_blocking(|| Cluster::start(3)).await.expect("join").expect("a 3-node cluster");
    let upstreams = cluster.contact_points();
    let front = {
        let upstreams = upstreams.clone();
        let emu = testkit::fresh_keyspace("emu_lwt_primary");
        tokio::task::spawn_blocking(move || {
            Front::start_cluster(&upstreams, FrontConfig { shards: 2, emu_keyspace: emu, ..FrontConfig::default() })
        })
        .await
        .expect("join")
        .expect("a front on each node")
    };
    let session = SessionBuilder::new()
        .known_node_addr(front.addr())
        .default_consistency(Consistency::One)
        .build()
        .await
        .expect("a session through the fronts");
    let ks = testkit::fresh_keyspace("lwt_primary");
    let replication = "{'class': 'SimpleStrategy', 'replication_factor': 3}";
    session
        .execute(&Statement::new(format!("CREATE KEYSPACE {ks} WITH replication = {replication}")), ())
        .await
        .expect("ks");
    session
        .execute(&Statement::new(format!("CREATE TABLE {ks}.t (k int PRIMARY KEY, v int)")), ())
        .await
        .expect("table");
    session.refresh_topology().await.expect("refresh");
    assert_eq!(session.nodes().len(), 3, "the three fronts: {:?}", session.nodes());
    let lwt = session.prepare(format!("INSERT INTO {ks}.t (k, v) VALUES (?, ?) IF NOT EXISTS")).await.expect("prepare");
    let plain = session.prepare(format!("INSERT INTO {ks}.t (k, v) VALUES (?, ?)")).await.expect("prepare");
    assert!(lwt.is_lwt() && !plain.is_lwt(), "the front marks the conditional insert, and only it");

    let ring = ring_of(&upstreams).await;
    let mut plain_elsewhere = 0;
    let mut primaries = std::collections::BTreeSet::new();
    for k in 0..30i32 {
        let token = Token::murmur3(&k.to_be_bytes());
        let want = primary(&ring, token.value());
        primaries.insert(want);
        assert_eq!(session.replicas(&ks, token).len(), 3, "key {k}: the driver knows its three replicas");
        let before = routed_per_node(&front);
        for v in 0..4 {
            session.execute(&lwt, (k, v)).await.expect("conditional insert");
        }
        let seen = delta(&before, &routed_per_node(&front));
        assert_eq!(seen, BTreeMap::from([(want, 4)]), "key {k} (token {token}): every LWT at the primary replica");
        let before = routed_per_node(&front);
        for v in 0..4 {
            session.execute(&plain, (k, v)).await.expect("insert");
        }
        let seen = delta(&before, &routed_per_node(&front));
        assert_eq!(seen.values().sum::<u64>(), 4, "key {k}: every plain insert counted: {seen:?}");
        plain_elsewhere += seen.iter().filter(|(ip, _)| **ip != want).map(|(_, n)| n).sum::<u64>();
    }
    println!("LWT: 120 of 120 at the primary replica; plain inserts: {plain_elsewhere} of 120 at another replica");
    assert_eq!(primaries.len(), 3, "the keys' primaries are all three nodes: {primaries:?}");
    assert!(plain_elsewhere >= 20, "plain inserts spread over the replicas: {plain_elsewhere} of 120 elsewhere");
    drop(session);
    front.stop();
    tokio::task::spawn_blocking(move || drop(cluster)).await.expect("join");
}

/// What [`Listening`] heard: (node, token, error text) per attempt.
type Heard = std::sync::Mutex<Vec<(SocketAddr, Option<Token>, Option<String>)>>;

/// Plans as the session does and keeps what it is told of each attempt.
#[derive(Debug, Default)]
struct Listening(Heard);

impl LoadBalancingPolicy for Listening {
    fn plan(&self, _: &RoutingInfo<'_>, cluster: &ClusterView<'_>, plan: &mut Vec<Target>) {
        cluster.default_plan(plan);
    }
    fn on_request_success(
        &self,
        request: &RoutingInfo<'_>,
        _: Duration,
        node: shardwise::load_balancing::NodeView<'_>,
    ) {
        self.0.lock().expect("lock").push((node.addr, request.token, None));
    }
    fn on_request_failure(
        &self,
        request: &RoutingInfo<'_>,
        _: Duration,
        node: shardwise::load_balancing::NodeView<'_>,
        error: &shardwise::ExecutionError,
    ) {
        self.0.lock().expect("lock").push((node.addr, request.token, Some(error.to_string())));
    }
}

/// A policy hears each attempt it planned (the official driver's
/// `on_request_success` / `on_request_failure`): through two proxies, one
/// success per request at the node that answered, with the request's
/// token; a statement the server refuses, one failure with its error; a
/// node cut off mid-request, a failure there and a success at the other
/// node, for the one request retried.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_policy_hears_how_each_attempt_it_planned_ended() {
    let server = testkit::shared_node().expect("server");
    let (a, b) = (FaultProxy::start(server).expect("proxy"), FaultProxy::start(server).expect("proxy"));
    let policy = Arc::new(Listening::default());
    let session = SessionBuilder::new()
        .known_node_addr(a.addr())
        .known_node_addr(b.addr())
        // v4: the proxies tell frames apart (v5 wraps them in segments).
        .protocol_versions(ProtocolVersion::V4, ProtocolVersion::V4)
        .discover_topology(false)
        .default_consistency(Consistency::One)
        .load_balancing(policy.clone())
        .build()
        .await
        .expect("session");
    let select = session.prepare("SELECT release_version FROM system.local").await.expect("prepare");
    policy.0.lock().expect("lock").clear();
    for _ in 0..10 {
        session.execute(&select, ()).await.expect("select");
    }
    let heard = std::mem::take(&mut *policy.0.lock().expect("lock"));
    assert_eq!(heard.len(), 10, "one success per request: {heard:?}");
    assert!(heard.iter().all(|(node, _, e)| e.is_none() && [a.addr(), b.addr()].contains(node)), "{heard:?}");

    let refused = session.execute(&Statement::new("SELECT * FROM system.no_such_table"), ()).await;
    assert!(refused.is_err());
    let heard = std::mem::take(&mut *policy.0.lock().expect("lock"));
    assert_eq!(heard.len(), 1, "{heard:?}");
    assert!(heard[0].2.as_deref().is_some_and(|e| e.contains("no_such_table")), "the error: {heard:?}");

    // Node a's answers are dropped: an idempotent read there times out
    // (its attempt), and is retried at b.
    a.add_rule(Rule::new(Action::DropFrame).direction(Direction::ToClient).opcode(RESULT));
    let patient = select.clone().with_idempotent(true).with_attempt_timeout(Duration::from_millis(300));
    let mut tries = 0;
    loop {
        policy.0.lock().expect("lock").clear();
        session.execute(&patient, ()).await.expect("answered at b");
        let heard = std::mem::take(&mut *policy.0.lock().expect("lock"));
        if heard.len() == 2 {
            assert_eq!(heard[0].0, a.addr(), "{heard:?}");
            assert!(heard[0].2.is_some(), "a's attempt failed: {heard:?}");
            assert_eq!((heard[1].0, heard[1].2.is_none()), (b.addr(), true), "then b answered: {heard:?}");
            break;
        }
        assert_eq!(heard.len(), 1, "{heard:?}");
        assert_eq!(heard[0].0, b.addr(), "planned at b first: {heard:?}");
        tries += 1;
        assert!(tries < 30, "never planned at a first");
    }
}
