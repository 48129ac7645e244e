//! Through the Scylla emulation front (8 shards): the session detects the
//! shards, opens one connection per shard through the shard-aware port,
//! routes prepared single-partition requests to the owning shard (the
//! front's counters must show ≥ 99% hits), and spreads requests without a
//! routable key over every shard.

use std::time::{Duration, Instant};

use shardwise::protocol::consistency::Consistency;
use shardwise::{Session, SessionBuilder, Statement};
use testkit::emu::{Front, FrontConfig, FrontHandle};

const SHARDS: u16 = 8;

async fn setup() -> (FrontHandle, Session) {
    let upstream = testkit::shared_node().expect("server");
    let front = tokio::task::spawn_blocking(move || Front::start(upstream, FrontConfig { shards: SHARDS, ..FrontConfig::default() }))
        .await
        .expect("join")
        .expect("front");
    let session = SessionBuilder::new()
        .known_node_addr(front.addr())
        .default_consistency(Consistency::One)
        .build()
        .await
        .expect("session through the front");
    // The per-shard connections open in the background.
    let deadline = Instant::now() + Duration::from_secs(20);
    while session.connections().len() < usize::from(SHARDS) {
        assert!(Instant::now() < deadline, "only {} connections", session.connections().len());
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    (front, session)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shard_aware_routing_through_the_emulated_scylla() {
    let (front, session) = setup().await;
    let conns = session.connections();
    let mut shards: Vec<u16> = conns.iter().map(|c| c.shard()).collect();
    shards.sort_unstable();
    shards.dedup();
    assert_eq!(shards.len(), usize::from(SHARDS), "one connection per shard: {shards:?}");
    assert!(conns.iter().all(|c| c.sharding().is_some_and(|s| s.sharder().nr_shards().get() == SHARDS)));
    let stats = front.stats();
    assert!(stats.nodes[0].shard_aware_accepted >= u64::from(SHARDS) - 1, "shard-aware port used: {stats:?}");

    let ks = testkit::fresh_keyspace("shards");
    session
        .execute(&Statement::new(format!("CREATE KEYSPACE {ks} WITH replication = {{'class': 'SimpleStrategy', 'replication_factor': 1}}")), ())
        .await
        .expect("ks");
    session.execute(&Statement::new(format!("CREATE TABLE {ks}.kv (pk bigint, ck int, v text, PRIMARY KEY ((pk, ck)))")), ()).await.expect("table");
    let insert = session.prepare(format!("INSERT INTO {ks}.kv (pk, ck, v) VALUES (?, ?, ?)").as_str()).await.expect("prepare");
    front.reset_routing_stats();
    for pk in 0..2000i64 {
        session.execute(&insert, (pk, (pk % 7) as i32, "v")).await.expect("insert");
    }
    let stats = front.stats();
    println!("shard hits {} misses {} rate {:.4}", stats.hits(), stats.misses(), stats.hit_rate());
    assert!(stats.hit_rate() >= 0.99, "hit rate {} ({} misses)", stats.hit_rate(), stats.misses());

    // Statements without a routable key are spread over the shards.
    front.reset_routing_stats();
    let any = Statement::new(format!("SELECT pk FROM {ks}.kv LIMIT 1"));
    for _ in 0..200 {
        session.execute(&any, ()).await.expect("select");
    }
    let stats = front.stats();
    let used = stats.nodes[0].shards.iter().filter(|s| s.unrouted > 0).count();
    assert!(used >= usize::from(SHARDS) / 2, "unroutable requests went to {used} shards: {stats:?}");

    // Dropping the session closes every connection, the control connection included.
    drop(conns);
    drop(session);
    let deadline = Instant::now() + Duration::from_secs(10);
    while front.stats().connections_open() > 0 {
        assert!(Instant::now() < deadline, "connections left open: {:?}", front.stats());
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}
