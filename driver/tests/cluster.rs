//! A 3-node Cassandra cluster on 127.0.0.1–3: the session discovers every
//! node, computes replicas exactly where the server places data (checked
//! against the server itself through request tracing), routes prepared
//! statements to a replica, and keeps serving while a node is stopped.

use std::collections::BTreeSet;
use std::net::IpAddr;
use std::time::{Duration, Instant};

use shardwise::protocol::consistency::Consistency;
use shardwise::protocol::token::Partitioner;
use shardwise::routing::partition_token;
use shardwise::{Session, SessionBuilder, Statement};
use testkit::Cluster;
use uuid::Uuid;

/// The nodes that served a traced request: the replicas (each logs its
/// single-partition read) and the coordinator.
async fn traced(session: &Session, tracing_id: Uuid) -> (BTreeSet<IpAddr>, Option<IpAddr>) {
    let events = Statement::new("SELECT source, activity FROM system_traces.events WHERE session_id = ?")
        .with_consistency(Consistency::One);
    let coordinator = Statement::new("SELECT coordinator FROM system_traces.sessions WHERE session_id = ?")
        .with_consistency(Consistency::One);
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut last = BTreeSet::new();
    loop {
        let rows = session.execute(&events, (tracing_id,)).await.expect("trace events");
        let replicas: BTreeSet<IpAddr> = rows
            .rows::<(Option<IpAddr>, Option<&str>)>()
            .expect("types")
            .filter_map(|r| r.ok())
            .filter(|(_, a)| a.is_some_and(|a| a.starts_with("Executing single-partition query")))
            .filter_map(|(s, _)| s)
            .collect();
        let coord = session.execute(&coordinator, (tracing_id,)).await.expect("trace session");
        let coord: Option<IpAddr> = coord.first_row::<(Option<IpAddr>,)>().expect("types").and_then(|(c,)| c);
        // Trace events are written asynchronously: wait until they stop changing.
        if !replicas.is_empty() && replicas == last && coord.is_some() {
            return (replicas, coord);
        }
        last = replicas;
        assert!(Instant::now() < deadline, "trace {tracing_id} incomplete");
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_nodes_replicas_routing_and_failover() {
    let mut cluster = tokio::task::spawn_blocking(|| Cluster::start(3)).await.expect("join").expect("3-node cluster");
    let contact = cluster.contact_points()[0];
    // Gossip may still be spreading the last node's arrival (a joining node is listed
    // before its tokens are): wait until the contact point knows every peer's tokens.
    let deadline = Instant::now() + Duration::from_secs(90);
    let probe = SessionBuilder::new().known_node_addr(contact).discover_topology(false).build().await.expect("probe session");
    loop {
        let peers = probe
            .execute(&Statement::new("SELECT peer, tokens FROM system.peers").with_consistency(Consistency::One), ())
            .await
            .expect("peers");
        let settled = peers
            .rows::<(IpAddr, Option<Vec<String>>)>()
            .expect("types")
            .filter(|r| r.as_ref().is_ok_and(|(_, t)| t.as_ref().is_some_and(|t| !t.is_empty())))
            .count();
        if settled == 2 {
            break;
        }
        assert!(Instant::now() < deadline, "peers still joining");
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    drop(probe);
    let session = loop {
        let session = SessionBuilder::new()
            .known_node_addr(contact)
            .default_consistency(Consistency::One)
            .build()
            .await
            .expect("session");
        if session.nodes().len() == 3 {
            break session;
        }
        assert!(Instant::now() < deadline, "discovered only {:?}", session.nodes());
        tokio::time::sleep(Duration::from_secs(1)).await;
    };

    let keyspaces = [
        ("simple_rf2", "{'class': 'SimpleStrategy', 'replication_factor': 2}"),
        ("nts_rf2", "{'class': 'NetworkTopologyStrategy', 'datacenter1': 2}"),
    ];
    for (ks, replication) in keyspaces {
        session.execute(&Statement::new(format!("CREATE KEYSPACE {ks} WITH replication = {replication}")), ()).await.expect("ks");
        session.execute(&Statement::new(format!("CREATE TABLE {ks}.kv (pk int PRIMARY KEY, v int)")), ()).await.expect("table");
        let insert = session.prepare(format!("INSERT INTO {ks}.kv (pk, v) VALUES (?, ?)").as_str()).await.expect("prepare");
        let select = session
            .prepare(format!("SELECT v FROM {ks}.kv WHERE pk = ?").as_str())
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
            let (servers, coordinator) = traced(&session, result.tracing_id().expect("traced")).await;
            assert_eq!(ours, servers, "{ks} pk {pk}: computed replicas differ from the server's placement");
            routed_to_replica += usize::from(coordinator.is_some_and(|c| ours.contains(&c)));
        }
        assert_eq!(routed_to_replica, KEYS as usize, "{ks}: every prepared request went to a replica");
    }

    // Stop a node: idempotent requests keep succeeding on the others.
    let stopped = cluster.contact_points()[2];
    cluster.nodes_mut()[2].stop().expect("stop node 3");
    let read = session
        .prepare("SELECT v FROM simple_rf2.kv WHERE pk = ?")
        .await
        .expect("prepare")
        .with_consistency(Consistency::One)
        .with_idempotent(true);
    for pk in 0..50 {
        let r = session.execute(&read, (pk % 24,)).await.unwrap_or_else(|e| panic!("pk {pk} with {stopped} down: {e}"));
        assert_eq!(r.rows_count(), 1);
    }
}
