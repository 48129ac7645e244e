//! ScyllaDB's client routes (`system.client_routes` and the
//! `CLIENT_ROUTES_CHANGE` event), end to end through the emulation front,
//! which keeps the routes and announces their changes as ScyllaDB does.
//! Two TCP proxies in front of the front's node stand for two
//! PrivateLink-style endpoints:
//!
//! - a session following connection id `c1`, given endpoint `a` as its
//!   contact point, reaches the node at `c1`'s route (`a`) and nowhere
//!   else: a route of the node under another id (to `b`) is not used;
//! - the route of `c1` moved to `b` (written, then announced): the session
//!   moves its pool to `b` on the event (well before its periodic refresh),
//!   and keeps working after endpoint `a` closes every connection;
//! - a cluster without client routes (plain Cassandra), and a front with
//!   no route under the ids given, fail `build` with
//!   `NewSessionError::ClientRoutes`, saying why.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use shardwise::cluster::ClientRoutesConfig;
use shardwise::protocol::consistency::Consistency;
use shardwise::{NewSessionError, Session, SessionBuilder, Statement};
use shardwise_emu::{ClientRoute, Front, FrontConfig};
use testkit::fault::{Direction, FaultProxy, OnAccept};
use uuid::Uuid;

const QUERY: u8 = 0x07;

fn route(connection_id: &str, host_id: Uuid, at: SocketAddr) -> ClientRoute {
    ClientRoute {
        connection_id: connection_id.into(),
        host_id,
        address: at.ip().to_string(),
        port: at.port(),
        tls_port: None,
    }
}

/// The addresses of the session's open connections, deduplicated.
fn connected_to(session: &Session) -> Vec<SocketAddr> {
    let mut addrs: Vec<SocketAddr> = session.connections().iter().map(|c| c.addr()).collect();
    addrs.sort();
    addrs.dedup();
    addrs
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_reaches_the_node_at_its_route_and_follows_the_route_when_it_moves() {
    let upstream = testkit::shared_node().expect("server");
    let front = tokio::task::spawn_blocking(move || {
        Front::start(upstream, FrontConfig { shards: 2, emu_keyspace: "emu_routes".into(), ..FrontConfig::default() })
    })
    .await
    .expect("join")
    .expect("front");
    let host = front.nodes()[0].host_id.expect("the front's node has a host id");
    let (a, b) = (FaultProxy::start(front.addr()).expect("proxy"), FaultProxy::start(front.addr()).expect("proxy"));
    front.set_client_routes(vec![route("c1", host, a.addr()), route("c2", host, b.addr())]).await.expect("routes");

    let session = SessionBuilder::new()
        .known_node_addr(a.addr())
        .client_routes(ClientRoutesConfig::new(["c1"]))
        .topology_refresh_interval(None)
        .default_consistency(Consistency::One)
        .build()
        .await
        .expect("session through endpoint a");
    let nodes: Vec<SocketAddr> = session.topology().iter().map(|n| n.address).collect();
    assert_eq!(nodes, [a.addr()], "the node at its route, not at the front's own address");
    let deadline = Instant::now() + Duration::from_secs(20);
    while session.connections().len() < 2 {
        assert!(Instant::now() < deadline, "one connection per shard: {:?}", connected_to(&session));
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let select = Statement::new("SELECT release_version FROM system.local");
    let before = a.frames(Direction::ToServer, QUERY);
    for _ in 0..5 {
        session.execute(&select, ()).await.expect("select through a");
    }
    assert!(a.frames(Direction::ToServer, QUERY) >= before + 5, "through endpoint a");
    assert_eq!(connected_to(&session), [a.addr()]);
    assert_eq!(b.accepted(), 0, "c2's route is another endpoint's");

    // c1's route moves to b: followed on the event (no periodic refresh).
    front.set_client_routes(vec![route("c1", host, b.addr())]).await.expect("moved route");
    let deadline = Instant::now() + Duration::from_secs(10);
    while connected_to(&session) != [b.addr()] {
        assert!(Instant::now() < deadline, "still connected to {:?}", connected_to(&session));
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(session.topology().iter().map(|n| n.address).collect::<Vec<_>>(), [b.addr()]);
    a.on_accept(OnAccept::Drop);
    a.drop_open_connections();
    let before = b.frames(Direction::ToServer, QUERY);
    for _ in 0..5 {
        session.execute(&select, ()).await.expect("select through b, a closed");
    }
    assert!(b.frames(Direction::ToServer, QUERY) >= before + 5, "through endpoint b");

    // No route under the id asked for: a clear error, no fallback to the
    // endpoint as if it were a node.
    let none = SessionBuilder::new()
        .known_node_addr(b.addr())
        .client_routes(ClientRoutesConfig::new(["nobody"]))
        .build()
        .await;
    match none {
        Err(NewSessionError::ClientRoutes(why)) => assert!(why.contains("nobody"), "{why}"),
        other => panic!("expected ClientRoutes, got {:?}", other.map(|_| "a session")),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cluster_without_client_routes_fails_the_session_clearly() {
    let server = testkit::shared_node().expect("server");
    let built =
        SessionBuilder::new().known_node_addr(server).client_routes(ClientRoutesConfig::new(["c1"])).build().await;
    match built {
        Err(e @ NewSessionError::ClientRoutes(_)) => {
            assert!(e.to_string().contains("client_routes"), "names the table: {e}");
            println!("plain Cassandra: {e}");
        }
        other => panic!("expected ClientRoutes, got {:?}", other.map(|_| "a session")),
    }
    let translator: std::collections::HashMap<SocketAddr, SocketAddr> = Default::default();
    let both = SessionBuilder::new()
        .known_node_addr(server)
        .client_routes(ClientRoutesConfig::new(["c1"]))
        .address_translator(std::sync::Arc::new(translator))
        .build()
        .await;
    assert!(matches!(both, Err(NewSessionError::Config(_))), "routes are the translation");
}
