//! Statements sent to one chosen node, and load-balancing policies per
//! execution profile, written as an official-driver user writes them
//! (`ExecutionProfile` with `load_balancing_policy`,
//! `SingleTargetLoadBalancingPolicy::new(NodeIdentifier::.., shard)`):
//!
//! - two proxies in front of one Cassandra are two "nodes"; each proxy's
//!   count of EXECUTE requests shows which one every request went to: a
//!   statement whose profile names a node goes there alone, one without
//!   spreads over both; a profile without a policy plans as the session's
//!   policy; a handle re-pointed to another profile changes node; a node
//!   the session does not know fails with `EmptyPlan`, one that is down with
//!   `PlanUnavailable` (no other node is tried), and the other statements
//!   keep working;
//! - through the Scylla emulation front (4 shards), whose per-shard
//!   counters show where each request arrived: a target with a shard gets
//!   every request on that shard, routed or not (the routed ones off their
//!   token's shard counted as misses), where the built-in plan puts each on
//!   its token's shard;
//! - on a 2-node cluster, the node's own `system.local` answers: a
//!   statement sent by host id, or by address, reads the `host_id` of the
//!   node it names, every time; a killed node's statements fail with
//!   `PlanUnavailable` while the other node's still answer.

use std::collections::BTreeSet;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use shardwise::load_balancing::{NodeIdentifier, SingleTargetLoadBalancingPolicy};
use shardwise::protocol::consistency::Consistency;
use shardwise::protocol::frame::ProtocolVersion;
use shardwise::{ExecutionError, ExecutionProfile, PreparedStatement, Session, SessionBuilder, Statement};
use shardwise_emu::{Front, FrontConfig, FrontHandle};
use testkit::fault::{Direction, FaultProxy, OnAccept};
use testkit::Cluster;
use uuid::Uuid;

const EXECUTE: u8 = 0x0a;

/// A profile whose statements go to `node` alone.
fn to(name: &str, node: NodeIdentifier) -> ExecutionProfile {
    ExecutionProfile::new(name).load_balancing_policy(SingleTargetLoadBalancingPolicy::new(node, None))
}

/// Runs `statement` `n` times and returns how many EXECUTE requests each
/// proxy forwarded meanwhile.
async fn sent(session: &Session, statement: &PreparedStatement, n: usize, proxies: [&FaultProxy; 2]) -> [usize; 2] {
    let before = proxies.map(|p| p.frames(Direction::ToServer, EXECUTE));
    for _ in 0..n {
        session.execute(statement, ()).await.expect("select");
    }
    let after = proxies.map(|p| p.frames(Direction::ToServer, EXECUTE));
    [after[0] - before[0], after[1] - before[1]]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_profiles_single_target_gets_every_request_and_nothing_falls_back() {
    let server = testkit::shared_node().expect("server");
    let (a, b) = (FaultProxy::start(server).expect("proxy"), FaultProxy::start(server).expect("proxy"));
    let builder = || {
        SessionBuilder::new()
            .known_node_addr(a.addr())
            .known_node_addr(b.addr())
            .protocol_versions(ProtocolVersion::V4, ProtocolVersion::V4)
            .discover_topology(false)
            .default_consistency(Consistency::One)
    };
    let session = builder().build().await.expect("session through the proxies");
    let text = "SELECT release_version FROM system.local";
    let select = session.prepare(text).await.expect("prepare");

    // Without a policy, requests spread over both nodes (so that the
    // counts below can tell a single target from the default plan).
    let [to_a, to_b] = sent(&session, &select, 20, [&a, &b]).await;
    assert!(to_a > 0 && to_b > 0 && to_a + to_b == 20, "the built-in plan spreads: {to_a}/{to_b}");

    // A statement with a profile that names node b: every request there.
    let only_b = select.clone().with_profile(to("only-b", NodeIdentifier::NodeAddress(b.addr())));
    assert_eq!(sent(&session, &only_b, 20, [&a, &b]).await, [0, 20], "the profile's node alone");
    // The same statement without the profile still spreads.
    let [to_a, to_b] = sent(&session, &select, 20, [&a, &b]).await;
    assert!(to_a > 0 && to_b > 0, "the other statements keep the session's plan: {to_a}/{to_b}");

    // A handle re-pointed to another profile: its statements change node.
    let handle = to("pinned", NodeIdentifier::NodeAddress(a.addr())).into_handle();
    let pinned = select.clone().with_profile(handle.clone());
    assert_eq!(sent(&session, &pinned, 10, [&a, &b]).await, [10, 0]);
    handle.map_to_another_profile(to("pinned", NodeIdentifier::NodeAddress(b.addr())));
    assert_eq!(sent(&session, &pinned, 10, [&a, &b]).await, [0, 10], "the handle now points to node b");

    // A session whose own policy is node a: statements whose profile sets
    // no policy plan with it, those whose profile sets one with that one.
    let on_a = builder()
        .load_balancing(SingleTargetLoadBalancingPolicy::new(a.addr(), None))
        .build()
        .await
        .expect("session with a policy");
    let select_a = on_a.prepare(text).await.expect("prepare");
    let quorum = select_a.clone().with_profile(ExecutionProfile::new("quorum").consistency(Consistency::One));
    assert_eq!(sent(&on_a, &quorum, 10, [&a, &b]).await, [10, 0], "a profile without a policy: the session's");
    let to_b_instead = select_a.clone().with_profile(to("b", NodeIdentifier::NodeAddress(b.addr())));
    assert_eq!(sent(&on_a, &to_b_instead, 10, [&a, &b]).await, [0, 10], "the profile's policy wins");
    // The session's default handle with a policy: every statement without a profile of its own.
    let default_b = to("default-b", NodeIdentifier::NodeAddress(b.addr())).into_handle();
    let via_default = builder().default_execution_profile_handle(default_b).build().await.expect("session");
    let select_default = via_default.prepare(text).await.expect("prepare");
    assert_eq!(sent(&via_default, &select_default, 10, [&a, &b]).await, [0, 10], "the default profile's policy");
    drop((on_a, via_default));

    // A node the session does not know: a typed error naming it, nothing sent.
    let nowhere: SocketAddr = "127.0.0.1:1".parse().expect("addr");
    let before = [&a, &b].map(|p| p.frames(Direction::ToServer, EXECUTE));
    let stranger = Uuid::from_u128(7);
    let unknowns = [
        (NodeIdentifier::NodeAddress(nowhere), nowhere.to_string()),
        (NodeIdentifier::HostId(stranger), stranger.to_string()),
    ];
    for (unknown, named) in unknowns {
        let lost = select.clone().with_profile(to("lost", unknown));
        match session.execute(&lost, ()).await {
            Err(e @ ExecutionError::EmptyPlan { .. }) => {
                assert!(e.to_string().contains(&named), "the error names the node: {e}");
                println!("unknown node: {e}");
            }
            other => panic!("{unknown:?}: expected EmptyPlan, got {other:?}"),
        }
    }
    assert_eq!([&a, &b].map(|p| p.frames(Direction::ToServer, EXECUTE)), before, "nothing was sent");

    // Node b goes down (its connections close, new ones are refused): its
    // statements fail with PlanUnavailable, none goes to node a instead;
    // the other statements go on with node a.
    b.on_accept(OnAccept::Drop);
    b.drop_open_connections();
    let deadline = Instant::now() + Duration::from_secs(20);
    while session.up_nodes().contains(&b.addr()) {
        assert!(Instant::now() < deadline, "node b still up: {:?}", session.up_nodes());
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let before_a = a.frames(Direction::ToServer, EXECUTE);
    match session.execute(&only_b, ()).await {
        Err(e @ ExecutionError::PlanUnavailable { last }) => {
            assert_eq!(last, b.addr(), "{e}");
            println!("down node: {e}");
        }
        other => panic!("expected PlanUnavailable, got {other:?}"),
    }
    assert_eq!(a.frames(Direction::ToServer, EXECUTE), before_a, "no fallback to node a");
    for _ in 0..5 {
        session.execute(&select, ()).await.expect("the session's plan goes on with node a");
    }
    assert_eq!(a.frames(Direction::ToServer, EXECUTE), before_a + 5);
}

const SHARDS: u16 = 4;

/// Per shard of the front's one node: (routed hits, routed misses, unrouted).
fn per_shard(front: &FrontHandle) -> Vec<(u64, u64, u64)> {
    front.stats().nodes[0].shards.iter().map(|s| (s.hits, s.misses, s.unrouted)).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_target_with_a_shard_gets_every_request_on_that_shard() {
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
    let deadline = Instant::now() + Duration::from_secs(20);
    while session.connections().len() < usize::from(SHARDS) {
        assert!(Instant::now() < deadline, "only {} connections: {}", session.connections().len(), front.stats());
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let node = session.topology().first().map(|n| n.host_id).expect("the front's node in the topology");
    let ks = crate::common::simple_keyspace(&session, "single_shard").await;
    session
        .execute(&Statement::new(format!("CREATE TABLE {ks}.kv (pk bigint PRIMARY KEY, v int)")), ())
        .await
        .expect("table");
    let insert = session.prepare(format!("INSERT INTO {ks}.kv (pk, v) VALUES (?, ?)")).await.expect("prepare");

    // The built-in plan: each write on its token's shard, over every shard.
    front.reset_routing_stats();
    for pk in 0..100i64 {
        session.execute(&insert, (pk, 1)).await.expect("insert");
    }
    let spread = per_shard(&front);
    assert!(spread.iter().all(|&(hits, misses, _)| hits > 0 && misses == 0), "on their own shards: {spread:?}");

    // Shard 2 of the node, by host id: every write there.
    let shard_2 = ExecutionProfile::new("shard-2")
        .load_balancing_policy(SingleTargetLoadBalancingPolicy::new(NodeIdentifier::HostId(node), Some(2)));
    let pinned = insert.clone().with_profile(shard_2.clone());
    front.reset_routing_stats();
    for pk in 0..100i64 {
        session.execute(&pinned, (pk, 2)).await.expect("insert on shard 2");
    }
    let got = per_shard(&front);
    let (hits, misses, _) = got[2];
    assert_eq!(hits + misses, 100, "every write on shard 2: {got:?}");
    assert!(misses > 0, "keys of other shards too, as misses: {got:?}");
    assert!(got.iter().enumerate().all(|(s, &(h, m, _))| s == 2 || h + m == 0), "no other shard: {got:?}");

    // Unrouted statements too.
    front.reset_routing_stats();
    let scan = Statement::new(format!("SELECT pk FROM {ks}.kv LIMIT 1")).with_profile(shard_2);
    for _ in 0..20 {
        session.execute(&scan, ()).await.expect("select on shard 2");
    }
    let got = per_shard(&front);
    assert_eq!(got.iter().map(|s| s.2).collect::<Vec<_>>(), [0, 0, 20, 0], "unrouted, on shard 2: {got:?}");
    drop(session);
    front.stop();
}

/// The host id that the node answering `statement` gives for itself.
async fn answering(session: &Session, statement: &Statement) -> Uuid {
    let result = session.execute(statement, ()).await.expect("system.local");
    let (id,): (Uuid,) = result.first_row().expect("typed").expect("a row");
    id
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn system_local_answers_from_the_node_the_statement_names() {
    let _turn = crate::common::own_servers().await;
    let mut cluster = tokio::task::spawn_blocking(|| Cluster::start(2)).await.expect("join").expect("a 2-node cluster");
    let nodes = cluster.contact_points();
    let deadline = Instant::now() + Duration::from_secs(90);
    let session = loop {
        let session = SessionBuilder::new()
            .known_node_addr(nodes[0])
            .default_consistency(Consistency::One)
            .build()
            .await
            .expect("session");
        if session.topology().len() == 2 && session.up_nodes().len() == 2 {
            break session;
        }
        assert!(Instant::now() < deadline, "discovered only {:?}", session.topology());
        tokio::time::sleep(Duration::from_secs(1)).await;
    };
    let local = Statement::new("SELECT host_id FROM system.local");
    let topology = session.topology();
    let ids: BTreeSet<Uuid> = topology.iter().map(|n| n.host_id).collect();
    assert_eq!(ids.len(), 2, "{topology:?}");

    // Without a target the answers come from both nodes.
    let mut seen = BTreeSet::new();
    for _ in 0..20 {
        seen.insert(answering(&session, &local).await);
    }
    assert_eq!(seen, ids, "the built-in plan asks both nodes");

    // By host id, and by address: the named node answers, every time.
    for node in &topology {
        let by_id = local.clone().with_profile(to("by-id", NodeIdentifier::HostId(node.host_id)));
        let by_addr = local.clone().with_profile(to("by-address", NodeIdentifier::NodeAddress(node.address)));
        for _ in 0..10 {
            assert_eq!(answering(&session, &by_id).await, node.host_id, "sent to {}", node.host_id);
            assert_eq!(answering(&session, &by_addr).await, node.host_id, "sent to {}", node.address);
        }
    }
    println!("system.local: every targeted statement answered by its node ({} nodes)", topology.len());

    // The second node is killed: its statements fail with a typed error
    // naming it, the first node's still answer.
    let victim = topology.iter().find(|n| n.address == nodes[1]).expect("the second node");
    let survivor = topology.iter().find(|n| n.address == nodes[0]).expect("the first node");
    tokio::task::block_in_place(|| cluster.nodes_mut()[1].kill());
    let deadline = Instant::now() + Duration::from_secs(60);
    while session.up_nodes().contains(&victim.address) {
        assert!(Instant::now() < deadline, "the killed node is still up: {:?}", session.up_nodes());
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let to_victim = local.clone().with_profile(to("victim", NodeIdentifier::HostId(victim.host_id)));
    match session.execute(&to_victim, ()).await {
        Err(ExecutionError::PlanUnavailable { last }) => assert_eq!(last, victim.address),
        other => panic!("expected PlanUnavailable, got {other:?}"),
    }
    let to_survivor = local.clone().with_profile(to("survivor", NodeIdentifier::HostId(survivor.host_id)));
    assert_eq!(answering(&session, &to_survivor).await, survivor.host_id);
    drop(session);
    tokio::task::spawn_blocking(move || drop(cluster)).await.expect("join");
}
