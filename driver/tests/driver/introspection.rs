//! What a service ported from the official driver asks of a request after
//! the fact, written as its users write the calls, against the real
//! Cassandra:
//!
//! - `result.request_coordinator()`: two proxies in front of one Cassandra
//!   are two "nodes", and the proxy whose EXECUTE count grew is the node
//!   each result names; on a session that discovers the topology, the node
//!   it names is the one whose `system.local` answered, by host id; through
//!   the Scylla emulation front (4 shards), the shard it names is the one
//!   whose counters show the request (its token's, or the one a
//!   single-target profile names);
//! - a history of attempts per request, from a `HistoryCollector` set on
//!   one statement (the official `set_history_listener`): a request whose
//!   first node reset the connection shows that attempt failed with the
//!   retry decision and the next one answered; a speculative execution
//!   beside a slow node shows as a fiber of its own;
//! - `check_schema_agreement()`: the version it agrees on is the node's
//!   `system.local` schema version, before and after a schema change;
//! - tracing of PREPARE and of every page of a row stream;
//! - `cluster_state()`: the cluster name and every node as the system tables
//!   and the front's sharding give them.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use shardwise::history::{AttemptResult, HistoryCollector, RequestResult};
use shardwise::load_balancing::{NodeIdentifier, SingleTargetLoadBalancingPolicy};
use shardwise::protocol::consistency::Consistency;
use shardwise::protocol::frame::ProtocolVersion;
use shardwise::retry::RetryDecision;
use shardwise::{
    ExecutionError, ExecutionProfile, PreparedStatement, Session, SessionBuilder, SpeculativePolicy, Statement,
};
use shardwise_emu::{Front, FrontConfig};
use testkit::fault::{Action, Direction, FaultProxy, Rule};
use uuid::Uuid;

const EXECUTE: u8 = 0x0a;

/// Two proxies in front of the shared node, and a session that knows them
/// as two nodes.
async fn two_nodes() -> (Session, [FaultProxy; 2]) {
    let server = testkit::shared_node().expect("server");
    let proxies = [FaultProxy::start(server).expect("proxy"), FaultProxy::start(server).expect("proxy")];
    let session = SessionBuilder::new()
        .known_node_addr(proxies[0].addr())
        .known_node_addr(proxies[1].addr())
        .protocol_versions(ProtocolVersion::V4, ProtocolVersion::V4)
        .discover_topology(false)
        .default_consistency(Consistency::One)
        .build()
        .await
        .expect("session through the proxies");
    (session, proxies)
}

/// How many EXECUTE requests each proxy forwarded so far.
fn executes(proxies: &[FaultProxy; 2]) -> [usize; 2] {
    [0, 1].map(|i| proxies[i].frames(Direction::ToServer, EXECUTE))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn request_coordinator_is_the_node_that_answered() {
    let (session, proxies) = two_nodes().await;
    let select = session.prepare("SELECT release_version FROM system.local").await.expect("prepare");
    let mut seen = [0; 2];
    for _ in 0..20 {
        let before = executes(&proxies);
        let result = session.execute(&select, ()).await.expect("select");
        let after = executes(&proxies);
        let went = if after[0] > before[0] { 0 } else { 1 };
        assert_eq!(after[went] - before[went], 1, "one request, one EXECUTE");
        let coordinator = result.request_coordinator();
        assert_eq!(coordinator.node(), proxies[went].addr(), "the result names the node it came from");
        assert_eq!(coordinator.connection_address(), coordinator.node());
        assert_eq!(coordinator.shard(), None, "Cassandra has no shards");
        seen[went] += 1;
    }
    assert!(seen[0] > 0 && seen[1] > 0, "both nodes answered some: {seen:?}");
}

#[tokio::test]
async fn request_coordinator_names_the_node_by_its_host_id() {
    let node = testkit::shared_node().expect("server");
    let session = SessionBuilder::new().known_node_addr(node).build().await.expect("session");
    let local = Statement::new("SELECT host_id FROM system.local");
    let result = session.execute(&local, ()).await.expect("system.local");
    let (host_id,) = result.first_row::<(Uuid,)>().expect("typed").expect("a row");
    let coordinator = result.request_coordinator();
    assert_eq!(coordinator.node(), node);
    let info = session.node_info(coordinator.node()).expect("the coordinator is in the topology");
    assert_eq!(info.host_id, host_id, "the node that answered, by host id");
    assert!(session.node_info(SocketAddr::from(([127, 0, 0, 1], 1))).is_none(), "an address of no node");

    // Each page names its own coordinator.
    let mut pages =
        session.execute_pages(Statement::new("SELECT keyspace_name FROM system_schema.tables").with_page_size(5), ());
    let mut n = 0;
    while let Some(page) = pages.next_page().await {
        assert_eq!(page.expect("page").request_coordinator().node(), node);
        n += 1;
    }
    assert!(n > 1, "several pages: {n}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn request_coordinator_names_the_shard_on_a_sharded_node() {
    const SHARDS: u16 = 4;
    let upstream = testkit::shared_node().expect("server");
    let front = tokio::task::spawn_blocking(move || {
        Front::start(upstream, FrontConfig { shards: SHARDS, ..FrontConfig::default() })
    })
    .await
    .expect("join")
    .expect("front");
    let session = SessionBuilder::new()
        .known_node_addr(front.addr())
        .default_consistency(Consistency::One)
        .build()
        .await
        .expect("session through the front");
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while session.connections().len() < usize::from(SHARDS) {
        assert!(std::time::Instant::now() < deadline, "only {} connections", session.connections().len());
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let ks = crate::common::simple_keyspace(&session, "coordinator_shard").await;
    session
        .execute(&Statement::new(format!("CREATE TABLE {ks}.kv (pk bigint PRIMARY KEY, v int)")), ())
        .await
        .expect("table");
    let insert = session.prepare(format!("INSERT INTO {ks}.kv (pk, v) VALUES (?, ?)")).await.expect("prepare");
    // Routed hits per shard of the front's one node.
    let hits = || front.stats().nodes[0].shards.iter().map(|s| s.hits).collect::<Vec<_>>();
    let mut shards_seen = std::collections::BTreeSet::new();
    for pk in 0..40i64 {
        let before = hits();
        let result = session.execute(&insert, (pk, 1)).await.expect("insert");
        let after = hits();
        let coordinator = result.request_coordinator();
        assert_eq!(session.nodes(), [coordinator.node()], "the front's node, by its address");
        let connected = coordinator.connection_address();
        assert_eq!(connected.ip(), coordinator.node().ip(), "the node's address, perhaps its shard-aware port");
        let shard = coordinator.shard().expect("a sharded node names its shard");
        let token = insert.calculate_token(&(pk, 1)).expect("a routed statement");
        assert_eq!(Some(shard), session.shard_of(coordinator.node(), token), "its token's shard");
        let grew: Vec<usize> = (0..before.len()).filter(|&s| after[s] > before[s]).collect();
        assert_eq!(grew, [usize::from(shard)], "the front counted it on that shard");
        shards_seen.insert(shard);
    }
    assert_eq!(shards_seen.len(), usize::from(SHARDS), "every shard answered some: {shards_seen:?}");

    // The history names the same node and shard.
    let history = Arc::new(HistoryCollector::new());
    let observed = insert.clone().with_request_observer(history.clone());
    let coordinator = session.execute(&observed, (7i64, 1)).await.expect("insert").request_coordinator();
    let h = history.take_structured_history();
    let attempt = h.requests[0].attempts().next().expect("an attempt");
    assert_eq!((attempt.node, attempt.shard), (coordinator.node(), coordinator.shard()), "{h}");

    // A statement a profile sends to shard 3: the result says so.
    let node = session.topology().first().map(|n| n.host_id).expect("the front's node in the topology");
    let shard_3 = ExecutionProfile::new("shard-3")
        .load_balancing_policy(SingleTargetLoadBalancingPolicy::new(NodeIdentifier::HostId(node), Some(3)));
    let scan = Statement::new(format!("SELECT pk FROM {ks}.kv LIMIT 1")).with_profile(shard_3);
    for _ in 0..5 {
        assert_eq!(session.execute(&scan, ()).await.expect("select").request_coordinator().shard(), Some(3));
    }
    drop(session);
    front.stop();
}

/// Runs `select` until a request's history says `wanted` of it, at most
/// `tries` times; returns that request's history and result's coordinator.
async fn until<F>(
    session: &Session,
    select: &PreparedStatement,
    history: &HistoryCollector,
    tries: usize,
    wanted: F,
) -> Option<(shardwise::history::RequestHistory, SocketAddr)>
where
    F: Fn(&shardwise::history::RequestHistory) -> bool,
{
    for _ in 0..tries {
        history.take_structured_history();
        let coordinator = session.execute(select, ()).await.expect("select").request_coordinator().node();
        let mut h = history.take_structured_history();
        assert_eq!(h.requests.len(), 1, "the statement's collector hears its own requests: {h}");
        let request = h.requests.remove(0);
        if wanted(&request) {
            return Some((request, coordinator));
        }
    }
    None
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_statements_history_shows_a_failed_attempt_and_the_retry() {
    let (session, proxies) = two_nodes().await;
    let history = Arc::new(HistoryCollector::new());
    let select = session
        .prepare("SELECT release_version FROM system.local")
        .await
        .expect("prepare")
        .with_idempotent(true)
        .with_request_observer(history.clone());
    // Without faults: one attempt, answered, on the node the result names.
    let result = session.execute(&select, ()).await.expect("select");
    let h = history.take_structured_history();
    let [request] = &h.requests[..] else { panic!("one request: {h}") };
    assert!(matches!(request.result, Some(RequestResult::Success { .. })), "{h}");
    let attempts: Vec<_> = request.attempts().collect();
    let [only] = &attempts[..] else { panic!("one attempt: {h}") };
    assert_eq!(only.node, result.request_coordinator().node());
    assert!(matches!(only.result, Some(AttemptResult::Success { took }) if took > Duration::ZERO), "{h}");
    assert_eq!((only.retry, only.consistency), (0, Consistency::One));
    assert!(request.speculative_fibers.is_empty());

    // Node 0 resets the connection on the next EXECUTE it gets: a request
    // planned there first fails over to node 1.
    proxies[0].add_rule(Rule::new(Action::Reset).direction(Direction::ToServer).opcode(EXECUTE).times(1));
    let failed_over = until(&session, &select, &history, 40, |r| r.attempts().count() == 2).await;
    let (request, coordinator) = failed_over.expect("a request planned on node 0 first");
    let attempts: Vec<_> = request.attempts().collect();
    assert_eq!(attempts[0].node, proxies[0].addr());
    assert!(
        matches!(
            &attempts[0].result,
            Some(AttemptResult::Error {
                error: ExecutionError::Connection(_),
                decision: Some(RetryDecision::RetryNextNode(None)),
                ..
            })
        ),
        "{attempts:?}"
    );
    assert_eq!((attempts[1].node, attempts[1].retry), (proxies[1].addr(), 1));
    assert!(matches!(attempts[1].result, Some(AttemptResult::Success { .. })), "{attempts:?}");
    assert!(attempts[1].started >= attempts[0].started);
    assert!(matches!(request.result, Some(RequestResult::Success { .. })));
    assert_eq!(coordinator, proxies[1].addr(), "the result names the node that answered");

    // A statement without the collector is not heard by it.
    session.execute(&Statement::new("SELECT release_version FROM system.local"), ()).await.expect("select");
    assert!(history.clone_structured_history().requests.is_empty(), "another statement's request");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_speculative_execution_is_a_fiber_of_its_own() {
    let (session, proxies) = two_nodes().await;
    let history = Arc::new(HistoryCollector::new());
    let speculative = ExecutionProfile::new("speculative")
        .speculative_execution(Some(SpeculativePolicy::fixed(1, Duration::from_millis(30))));
    let select = session
        .prepare("SELECT release_version FROM system.local")
        .await
        .expect("prepare")
        .with_idempotent(true)
        .with_profile(speculative)
        .with_request_observer(history.clone());
    // Node 0 answers late: a request sent there first is outrun by a
    // speculative execution on node 1.
    proxies[0].add_rule(Rule::new(Action::Delay(Duration::from_millis(400))).direction(Direction::ToClient));
    let outrun = until(&session, &select, &history, 30, |r| {
        r.fiber.attempts.first().is_some_and(|a| a.node == proxies[0].addr())
            && r.speculative_fibers.first().is_some_and(|f| f.attempts.iter().any(|a| a.node == proxies[1].addr()))
    })
    .await;
    let (request, coordinator) = outrun.expect("a request sent to the slow node first");
    assert!(request.fiber.attempts[0].result.is_none(), "the outrun attempt has no answer: {request:?}");
    let fiber = &request.speculative_fibers[0];
    assert!(fiber.started > request.started, "the speculative fiber started later");
    let answered = fiber.attempts.last().expect("an attempt");
    assert_eq!(answered.node, proxies[1].addr());
    assert!(matches!(answered.result, Some(AttemptResult::Success { .. })), "{request:?}");
    assert_eq!(coordinator, proxies[1].addr(), "the speculative execution's node answered");
    proxies[0].clear_rules();
}

/// `SpeculativePolicy::percentile` (the official percentile policy): the
/// extra attempt leaves once the request has waited the session's latency
/// at that percentile, here a local round trip, not the fixed delay (20 s)
/// nor the slow node's answer (1 s).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_percentile_speculative_execution_waits_the_sessions_latency_at_it() {
    let (session, proxies) = two_nodes().await;
    let history = Arc::new(HistoryCollector::new());
    let policy = SpeculativePolicy { delay: Duration::from_secs(20), ..SpeculativePolicy::percentile(1, 90.0) };
    let select = session
        .prepare("SELECT release_version FROM system.local")
        .await
        .expect("prepare")
        .with_idempotent(true)
        .with_profile(ExecutionProfile::new("p90").speculative_execution(Some(policy)))
        .with_request_observer(history.clone());
    for _ in 0..50 {
        session.execute(&select, ()).await.expect("measured first");
    }
    let p90 = session.metrics().latency_percentile_ms(90.0).expect("a p90");
    proxies[0].add_rule(Rule::new(Action::Delay(Duration::from_secs(1))).direction(Direction::ToClient));
    let outrun = until(&session, &select, &history, 30, |r| {
        r.fiber.attempts.first().is_some_and(|a| a.node == proxies[0].addr()) && !r.speculative_fibers.is_empty()
    })
    .await;
    proxies[0].clear_rules();
    let (request, coordinator) = outrun.expect("a request sent to the slow node first, then speculated");
    let waited = request.speculative_fibers[0].started.duration_since(request.started).unwrap_or_default();
    assert!(waited < Duration::from_millis(800), "speculated after {waited:?} (p90 {p90} ms)");
    assert_eq!(coordinator, proxies[1].addr(), "the extra attempt answered");
}

/// The node's own schema version.
async fn schema_version(session: &Session) -> Uuid {
    let local = Statement::new("SELECT schema_version FROM system.local");
    let r = session.execute(&local, ()).await.expect("system.local");
    r.first_row::<(Uuid,)>().expect("typed").expect("a row").0
}

/// What `check_schema_agreement` says while the node's version stays put:
/// other tests change the shared node's schema at any time, so it is
/// asked again until the version read before and after it is the same.
async fn agreement_on_a_steady_schema(session: &Session) -> (Option<Uuid>, Uuid) {
    for _ in 0..50 {
        let before = schema_version(session).await;
        let agreed = session.check_schema_agreement().await.expect("asked");
        if schema_version(session).await == before {
            return (agreed, before);
        }
    }
    panic!("the schema kept changing");
}

#[tokio::test]
async fn check_schema_agreement_returns_the_agreed_version() {
    let node = testkit::shared_node().expect("server");
    let session = SessionBuilder::new().known_node_addr(node).build().await.expect("session");
    let (before, version) = agreement_on_a_steady_schema(&session).await;
    assert_eq!(before, Some(version), "the node's own version");

    let ks = crate::common::simple_keyspace(&session, "agreement").await;
    session.execute(&Statement::new(format!("CREATE TABLE {ks}.t (pk int PRIMARY KEY)")), ()).await.expect("ddl");
    let (after, version) = agreement_on_a_steady_schema(&session).await;
    assert_eq!(after, Some(version));
    assert_ne!(after, before, "a schema change makes another version");

    // Through two proxies the "two nodes" are one server: they agree.
    let (two, _proxies) = two_nodes().await;
    let (agreed, version) = agreement_on_a_steady_schema(&two).await;
    assert_eq!(agreed, Some(version));
}

/// `session.cluster_state()` (the official `get_cluster_state()`): on
/// Cassandra, the cluster's name as `system.local` gives it and its one
/// node with host id, datacenter and rack, up and connected, unsharded;
/// through the Scylla emulation front (4 shards), the node's sharding; the
/// replicas of a token are the session's `token_endpoints`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_cluster_state_names_the_cluster_and_every_node() {
    let server = testkit::shared_node().expect("server");
    let session = SessionBuilder::new().known_node_addr(server).build().await.expect("session");
    let state = session.cluster_state();
    let local = session
        .execute(&Statement::new("SELECT cluster_name, host_id, data_center, rack FROM system.local"), ())
        .await
        .expect("local");
    let (name, host_id, dc, rack) = local.first_row::<(String, Uuid, String, String)>().expect("row").expect("one row");
    assert_eq!(state.cluster_name(), Some(name.as_str()));
    let nodes = state.get_nodes_info();
    assert_eq!(nodes.len(), 1, "{nodes:?}");
    let node = &nodes[0];
    assert_eq!(
        (node.address, node.host_id, node.datacenter.as_deref(), node.rack.as_deref()),
        (server, Some(host_id), Some(dc.as_str()), Some(rack.as_str()))
    );
    assert!(node.up && node.local && node.is_connected(), "{node:?}");
    assert_eq!(node.sharder(), None, "Cassandra is not sharded");
    let ks = crate::common::simple_keyspace(&session, "cluster_state").await;
    let token = shardwise::protocol::token::Token::from(42i64);
    let endpoints = state.get_token_endpoints(&ks, "any", token);
    assert_eq!(endpoints, session.token_endpoints(&ks, "any", token));
    assert_eq!(endpoints.iter().map(|r| r.addr).collect::<Vec<_>>(), [server], "the one replica");

    const SHARDS: u16 = 4;
    let front = tokio::task::spawn_blocking(move || {
        Front::start(server, FrontConfig { shards: SHARDS, ..FrontConfig::default() })
    })
    .await
    .expect("join")
    .expect("front");
    let through = SessionBuilder::new().known_node_addr(front.addr()).build().await.expect("session through the front");
    let sharder = through.cluster_state().get_nodes_info()[0].sharder().expect("a sharded node");
    assert_eq!(sharder.nr_shards().get(), SHARDS);
}

/// `keyspaces_to_fetch` (the official builder's): the session reads the
/// replication, partitioners and schema of the keyspaces named only, by
/// partition key; a request to another keyspace still works, routed
/// without replicas.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_reads_the_metadata_of_the_keyspaces_to_fetch_only() {
    let server = testkit::shared_node().expect("server");
    let setup = SessionBuilder::new().known_node_addr(server).build().await.expect("session");
    let fetched = crate::common::simple_keyspace(&setup, "fetched").await;
    let other = crate::common::simple_keyspace(&setup, "not_fetched").await;
    for ks in [&fetched, &other] {
        let ddl = format!("CREATE TABLE {ks}.t (pk int PRIMARY KEY, v int)");
        setup.execute(&Statement::new(ddl), ()).await.expect("table");
    }
    let session = SessionBuilder::new()
        .known_node_addr(server)
        .keyspaces_to_fetch([fetched.as_str()])
        .build()
        .await
        .expect("session");
    let schema = session.schema().await.expect("schema");
    assert_eq!(schema.keyspaces.keys().collect::<Vec<_>>(), [&fetched], "the one keyspace named");
    assert!(schema.keyspaces[&fetched].tables.contains_key("t"));
    let token = shardwise::protocol::token::Token::from(7i64);
    assert_eq!(session.token_endpoints(&fetched, "t", token).len(), 1, "its replication was read");
    assert!(session.token_endpoints(&other, "t", token).is_empty(), "no replication read for the other");
    let insert = session.prepare(format!("INSERT INTO {other}.t (pk, v) VALUES (?, ?)")).await.expect("prepare");
    session.execute(&insert, (1i32, 2i32)).await.expect("a keyspace left out is still written to");
}

/// The key of `ks.pairs` as a struct matched by name (fields in another
/// order than the key's columns).
#[derive(shardwise::SerializeValues)]
struct PairKey<'a> {
    b: &'a str,
    a: i32,
}

/// `compute_token` as the official `ClusterState::compute_token` is called:
/// the token of a composite and of a single-column key is the server's own
/// `token(..)` of that row, from a tuple in key order or a struct matched by
/// name, and a prepared statement's `calculate_token` agrees; a wrong count,
/// a wrong type, a null key value and an unknown table are typed errors.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn compute_token_is_the_servers_token_of_the_key() {
    use shardwise::protocol::token::Token;
    use shardwise::session::TokenError;
    let server = testkit::shared_node().expect("server");
    let session = SessionBuilder::new().known_node_addr(server).build().await.expect("session");
    let ks = crate::common::simple_keyspace(&session, "compute_token").await;
    for ddl in [
        format!("CREATE TABLE {ks}.pairs (a int, b text, c int, v int, PRIMARY KEY ((a, b), c))"),
        format!("CREATE TABLE {ks}.single (k bigint PRIMARY KEY, v int)"),
    ] {
        session.execute(&Statement::new(ddl), ()).await.expect("table");
    }
    session.await_schema_agreement().await.expect("agreement");
    let server_token = |text: String| {
        let session = session.clone();
        async move {
            let result = session.execute(&Statement::new(text), ()).await.expect("token()");
            let (token,) = result.first_row::<(i64,)>().expect("row").expect("a row");
            Token::from(token)
        }
    };
    session
        .execute(&Statement::new(format!("INSERT INTO {ks}.pairs (a, b, c, v) VALUES (7, 'seven', 1, 1)")), ())
        .await
        .expect("insert");
    session
        .execute(&Statement::new(format!("INSERT INTO {ks}.single (k, v) VALUES (-3, 1)")), ())
        .await
        .expect("insert");
    let pair = server_token(format!("SELECT token(a, b) FROM {ks}.pairs WHERE a = 7 AND b = 'seven'")).await;
    let single = server_token(format!("SELECT token(k) FROM {ks}.single WHERE k = -3")).await;
    assert_ne!(pair, single);

    let state = session.cluster_state();
    assert_eq!(state.compute_token(&ks, "pairs", &(7i32, "seven")).await.expect("a token"), pair);
    assert_eq!(state.compute_token(&ks, "pairs", &PairKey { b: "seven", a: 7 }).await.expect("by name"), pair);
    assert_eq!(state.compute_token(&ks, "single", &(-3i64,)).await.expect("a token"), single);
    let prepared = session.prepare(format!("SELECT v FROM {ks}.pairs WHERE a = ? AND b = ?")).await.expect("prepare");
    assert_eq!(prepared.calculate_token(&(7i32, "seven")), Some(pair));

    let count = state.compute_token(&ks, "pairs", &(7i32,)).await;
    assert!(matches!(&count, Err(TokenError::Count { key, given: 1, .. }) if key == "a, b"), "{count:?}");
    let typed = state.compute_token(&ks, "single", &(-3i32,)).await;
    assert!(matches!(typed, Err(TokenError::Values(_))), "an int for a bigint: {typed:?}");
    let null = state.compute_token(&ks, "single", &(None::<i64>,)).await;
    assert!(matches!(null, Err(TokenError::NoToken)), "{null:?}");
    let missing = state.compute_token(&ks, "nothing", &(1i32,)).await;
    assert!(matches!(missing, Err(TokenError::NoTable { .. })), "{missing:?}");
}

/// `local_ip_address` makes every connection of the session come from
/// that address (127.0.0.2 here: the loopback network answers all of
/// 127/8), as the server sees it; the TCP settings pass the handshake.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_server_sees_connections_from_the_local_address_set() {
    let server = testkit::shared_node().expect("server");
    let local: std::net::IpAddr = "127.0.0.2".parse().expect("ip");
    let session = SessionBuilder::new()
        .known_node_addr(server)
        .local_ip_address(Some(local))
        .tcp_keepalive_interval(std::time::Duration::from_secs(20))
        .tcp_nodelay(false)
        .custom_identity(shardwise::SelfIdentity::new().with_client_id("from-127.0.0.2"))
        .build()
        .await
        .expect("session");
    let result = session
        .execute(&Statement::new("SELECT address, client_options FROM system_views.clients"), ())
        .await
        .expect("system_views.clients");
    type Client = (Option<std::net::IpAddr>, Option<std::collections::HashMap<String, String>>);
    let listed: Vec<Client> = result.rows::<Client>().expect("typed").map(|r| r.expect("row")).collect();
    let ours: Vec<&Client> = listed
        .iter()
        .filter(|c| c.1.as_ref().and_then(|o| o.get("CLIENT_ID")).map(String::as_str) == Some("from-127.0.0.2"))
        .collect();
    assert!(!ours.is_empty(), "{listed:?}");
    assert!(ours.iter().all(|c| c.0 == Some(local)), "every connection from {local}: {ours:?}");
}

/// The identity a session says it is (`custom_identity`, the official
/// `SelfIdentity`) is what the server keeps of each of its connections:
/// Cassandra's `system_views.clients` has the driver's name and version, and
/// the application's name and version and the client id among the STARTUP
/// options it keeps; a session that sets none says only the driver's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_server_sees_the_identity_the_session_says() {
    use std::collections::HashMap;
    let server = testkit::shared_node().expect("server");
    let client_id = format!("pod-{}", std::process::id());
    let identity = shardwise::SelfIdentity::new()
        .with_application_name("billing")
        .with_application_version("1.2.3")
        .with_client_id(client_id.clone());
    let session =
        SessionBuilder::new().known_node_addr(server).custom_identity(identity).build().await.expect("session");
    type Client = (Option<String>, Option<String>, Option<HashMap<String, String>>);
    let clients = |session: Session| async move {
        let result = session
            .execute(
                &Statement::new("SELECT driver_name, driver_version, client_options FROM system_views.clients"),
                (),
            )
            .await
            .expect("system_views.clients");
        result.rows::<Client>().expect("typed").map(|r| r.expect("row")).collect::<Vec<Client>>()
    };
    let listed = clients(session.clone()).await;
    let ours: Vec<&Client> =
        listed.iter().filter(|c| c.2.as_ref().and_then(|o| o.get("CLIENT_ID")) == Some(&client_id)).collect();
    assert!(!ours.is_empty(), "the session's connections are listed: {listed:?}");
    for (name, version, options) in ours {
        let options = options.as_ref().expect("options");
        assert_eq!((name.as_deref(), version.as_deref()), (Some("shardwise"), Some(env!("CARGO_PKG_VERSION"))));
        assert_eq!(options.get("APPLICATION_NAME").map(String::as_str), Some("billing"));
        assert_eq!(options.get("APPLICATION_VERSION").map(String::as_str), Some("1.2.3"));
    }

    let plain = SessionBuilder::new()
        .known_node_addr(server)
        .custom_identity(shardwise::SelfIdentity::new().with_custom_driver_name("plain-driver"))
        .build()
        .await
        .expect("session");
    let listed = clients(plain).await;
    let theirs: Vec<&Client> = listed.iter().filter(|c| c.0.as_deref() == Some("plain-driver")).collect();
    assert!(!theirs.is_empty(), "{listed:?}");
    for (_, _, options) in theirs {
        let options = options.clone().unwrap_or_default();
        for key in ["APPLICATION_NAME", "APPLICATION_VERSION", "CLIENT_ID"] {
            assert!(!options.contains_key(key), "{key} not said: {options:?}");
        }
    }
}

/// Tracing beyond one request's answer, as the official driver offers it:
/// a statement prepared with tracing on has its PREPARE's tracing id
/// (`get_prepare_tracing_ids`), whose trace is a prepare; every page of a
/// traced row stream has its own (`QueryPager::tracing_ids`), one per page
/// requested, each a trace of its own. Without tracing, none.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn prepares_and_every_page_of_a_stream_are_traced() {
    let server = testkit::shared_node().expect("server");
    let session = SessionBuilder::new().known_node_addr(server).build().await.expect("session");
    let ks = crate::common::simple_keyspace(&session, "traced_pages").await;
    session
        .execute(&Statement::new(format!("CREATE TABLE {ks}.kv (pk int, ck int, PRIMARY KEY (pk, ck))")), ())
        .await
        .expect("table");
    for ck in 0..10 {
        session
            .execute(&Statement::new(format!("INSERT INTO {ks}.kv (pk, ck) VALUES (1, {ck})")), ())
            .await
            .expect("row");
    }
    let text = format!("SELECT ck FROM {ks}.kv WHERE pk = ?");
    let plain = session.prepare(text.clone()).await.expect("prepare");
    assert!(plain.prepare_tracing_ids().is_empty(), "no tracing asked for");
    let traced_text = format!("SELECT ck, pk FROM {ks}.kv WHERE pk = ?");
    let prepared = session.prepare(Statement::new(traced_text).with_tracing(true)).await.expect("traced prepare");
    let ids = prepared.prepare_tracing_ids().to_vec();
    assert_eq!(ids.len(), 1, "one node, one PREPARE traced: {ids:?}");
    let trace = crate::common::finished_trace(&session, ids[0]).await.expect("the PREPARE's trace");
    assert_eq!(trace.command.as_deref(), Some("QUERY"), "{trace:?}");
    assert!(trace.request.as_deref().is_some_and(|r| r.contains("Prepar")), "a prepare: {:?}", trace.request);

    let statement = plain.clone().with_page_size(3).with_tracing(true);
    let mut stream = session.execute_stream::<_, _, (i32,)>(statement, (1,));
    let mut rows = 0;
    while let Some(row) = stream.next_row().await {
        row.expect("row");
        rows += 1;
    }
    assert_eq!(rows, 10);
    let pages = stream.tracing_ids().to_vec();
    assert_eq!(pages.len(), stream.pages_requested(), "one tracing id per page: {pages:?}");
    assert!(pages.len() >= 4, "10 rows at 3 a page: {} pages", pages.len());
    let distinct: std::collections::BTreeSet<_> = pages.iter().collect();
    assert_eq!(distinct.len(), pages.len(), "each page its own trace");
    for id in &pages {
        let trace = crate::common::finished_trace(&session, *id).await.expect("a page's trace");
        assert_eq!(trace.command.as_deref(), Some("QUERY"), "EXECUTE is traced as a QUERY command: {trace:?}");
    }
    let mut untraced = session.execute_stream::<_, _, (i32,)>(plain.with_page_size(3), (1,));
    while untraced.next_row().await.is_some() {}
    assert!(untraced.tracing_ids().is_empty(), "no tracing, no ids");
}
