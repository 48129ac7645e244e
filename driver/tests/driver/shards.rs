//! Through the Scylla emulation front (8 shards): the session detects the
//! shards, opens one connection per shard through the shard-aware port,
//! routes prepared single-partition requests to the owning shard (the
//! front's counters must show every one a hit), and spreads requests without a
//! routable key over every shard. The partitioner of a CDC log table is
//! learned from `system_schema.scylla_tables` (which the front provides):
//! reads of a log table by stream id are routed by the CDC partitioner.
//! Against Cassandra itself (no `scylla_tables`) every table is Murmur3,
//! whatever its name.

use std::sync::Arc;
use std::time::{Duration, Instant};

use shardwise::protocol::consistency::Consistency;
use shardwise::protocol::token::Partitioner;
use shardwise::{Session, SessionBuilder, Statement};
use shardwise_emu::{Front, FrontConfig, FrontHandle, Resize};

const SHARDS: u16 = 8;

async fn start_front() -> FrontHandle {
    start_front_with(FrontConfig { shards: SHARDS, ..FrontConfig::default() }).await
}

async fn start_front_with(config: FrontConfig) -> FrontHandle {
    let upstream = testkit::shared_node().expect("server");
    tokio::task::spawn_blocking(move || Front::start(upstream, config)).await.expect("join").expect("front")
}

/// A session through `front`, once it has a connection per shard.
async fn session_through(front: &FrontHandle) -> Session {
    session_through_with(front, |b| b).await
}

/// [`session_through`] with the builder's settings changed by `with`.
async fn session_through_with(front: &FrontHandle, with: impl FnOnce(SessionBuilder) -> SessionBuilder) -> Session {
    let builder = SessionBuilder::new().known_node_addr(front.addr()).default_consistency(Consistency::One);
    let session = with(builder).build().await.expect("session through the front");
    // The per-shard connections open in the background.
    let deadline = Instant::now() + Duration::from_secs(20);
    while session.connections().len() < usize::from(SHARDS) {
        assert!(Instant::now() < deadline, "only {} connections: {}", session.connections().len(), front.stats());
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    session
}

async fn setup() -> (FrontHandle, Session) {
    let front = start_front().await;
    let session = session_through(&front).await;
    (front, session)
}

/// `pool_size(PoolSize::PerHost(3))` (the official builder's): three
/// connections to the eight-shard node in all, on shards 0, 1 and 2, and
/// no more opened later; requests for the other shards go over them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pool_sized_per_host_spreads_its_connections_over_the_shards() {
    let front = start_front().await;
    let three = std::num::NonZeroUsize::new(3).expect("three");
    let session = SessionBuilder::new()
        .known_node_addr(front.addr())
        .default_consistency(Consistency::One)
        .pool_size(shardwise::PoolSize::PerHost(three))
        .build()
        .await
        .expect("session");
    let deadline = Instant::now() + Duration::from_secs(20);
    while session.connections().len() < 3 {
        assert!(Instant::now() < deadline, "only {} connections", session.connections().len());
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    let mut shards: Vec<u16> = session.connections().iter().map(|c| c.shard()).collect();
    shards.sort_unstable();
    assert_eq!(shards, [0, 1, 2], "three in all, one each on the first three shards");
    let ks = crate::common::simple_keyspace(&session, "per_host").await;
    let ddl = format!("CREATE TABLE {ks}.kv (pk bigint PRIMARY KEY, v text)");
    session.execute(&Statement::new(ddl), ()).await.expect("table");
    let insert = session.prepare(format!("INSERT INTO {ks}.kv (pk, v) VALUES (?, ?)")).await.expect("prepare");
    for pk in 0..50i64 {
        session.execute(&insert, (pk, "v")).await.expect("every shard's keys are written");
    }
    assert_eq!(session.connections().len(), 3, "still three");
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
    // The front speaks v4 only, like Scylla: asked for v5 once, by the contact point.
    assert_eq!(stats.version_rejections, 1, "{stats}");

    let ks = crate::common::simple_keyspace(&session, "shards").await;
    session
        .execute(
            &Statement::new(format!("CREATE TABLE {ks}.kv (pk bigint, ck int, v text, PRIMARY KEY ((pk, ck)))")),
            (),
        )
        .await
        .expect("table");
    let insert = session.prepare(format!("INSERT INTO {ks}.kv (pk, ck, v) VALUES (?, ?, ?)")).await.expect("prepare");
    front.reset_routing_stats();
    for pk in 0..2000i64 {
        session.execute(&insert, (pk, (pk % 7) as i32, "v")).await.expect("insert");
    }
    let stats = front.stats();
    println!("shard hits {} misses {} rate {:.4}", stats.hits(), stats.misses(), stats.hit_rate());
    // Deterministic: every shard has its connection (`session_through` waited for them) and
    // none churns, so every write goes to its token's shard.
    assert_eq!(
        (stats.hits(), stats.misses()),
        (2000, 0),
        "2,000 prepared writes with a connection per shard: every one on its shard"
    );

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

/// Behind a NAT (here a TCP proxy in front of the shard-aware port: the
/// node sees the proxy's source ports, not the driver's), connections land
/// on shards the driver did not ask for. The first one that does makes the
/// session fill the pool through the regular port. Before, it kept asking
/// the shard-aware port, closing what landed on a shard it already had;
/// with source ports of one parity it never filled the other shards.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn behind_a_nat_the_pool_fills_through_the_regular_port() {
    let front = start_front().await;
    let nat = testkit::FaultProxy::start(front.shard_aware_addr()).expect("proxy");
    front.advertise_shard_aware_port(nat.addr().port());
    let session = session_through(&front).await;
    let mut shards: Vec<u16> = session.connections().iter().map(|c| c.shard()).collect();
    shards.sort_unstable();
    shards.dedup();
    assert_eq!(shards.len(), usize::from(SHARDS), "one connection per shard: {shards:?}");
    let stats = front.stats();
    // Asked through the NAT until a connection lands on another shard: 7 in 8 do.
    assert!(stats.nodes[0].shard_aware_accepted < u64::from(SHARDS), "{stats}");
}

/// 16-byte stream ids whose first 8 bytes (the CDC token) spread over the
/// whole ring.
fn stream_ids(n: usize) -> Vec<[u8; 16]> {
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    (0..n)
        .map(|_| {
            let mut id = [0u8; 16];
            for chunk in id.chunks_mut(8) {
                // splitmix64
                x = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
                let mut z = x;
                z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
                z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
                chunk.copy_from_slice(&(z ^ (z >> 31)).to_be_bytes());
            }
            id
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cdc_log_partitioner_is_learned_from_scylla_tables() {
    let (front, session) = setup().await;
    let ks = crate::common::simple_keyspace(&session, "cdcpart").await;
    session
        .execute(
            &Statement::new(format!("CREATE TABLE {ks}.t (pk int PRIMARY KEY, v int) WITH cdc = {{'enabled': true}}")),
            (),
        )
        .await
        .expect("CDC table");
    assert_eq!(session.partitioner(&ks, "t_scylla_cdc_log"), Some(Partitioner::Cdc), "the log table's partitioner");
    assert_eq!(session.partitioner(&ks, "t"), Some(Partitioner::Murmur3), "the base table's partitioner");

    let read = session
        .prepare(format!("SELECT \"cdc$time\" FROM {ks}.t_scylla_cdc_log WHERE \"cdc$stream_id\" = ?"))
        .await
        .expect("prepare a read of the log");
    assert_eq!(read.partitioner(), Some(Partitioner::Cdc));
    let base = session.prepare(format!("SELECT v FROM {ks}.t WHERE pk = ?")).await.expect("prepare");
    assert_eq!(base.partitioner(), Some(Partitioner::Murmur3));

    front.reset_routing_stats();
    for id in stream_ids(2000) {
        session.execute(&read, (&id[..],)).await.expect("read the log");
    }
    let stats = front.stats();
    println!(
        "CDC log reads by stream id: shard hits {} misses {} rate {:.4}",
        stats.hits(),
        stats.misses(),
        stats.hit_rate()
    );
    assert_eq!(stats.hits(), 2000, "{stats:?}");
    assert_eq!(stats.misses(), 0, "every read of the log went to the shard owning its stream: {stats:?}");
}

/// Regression: a table was taken for a CDC log by its name alone. Against
/// Cassandra (no `system_schema.scylla_tables`) a table named like a log is
/// an ordinary Murmur3 table.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_scylla_tables_every_table_is_murmur3() {
    let session = SessionBuilder::new()
        .known_node_addr(testkit::shared_node().expect("server"))
        .default_consistency(Consistency::One)
        .build()
        .await
        .expect("session");
    let ks = crate::common::simple_keyspace(&session, "murmur").await;
    session
        .execute(
            &Statement::new(format!("CREATE TABLE {ks}.t_scylla_cdc_log (\"cdc$stream_id\" blob PRIMARY KEY, v int)")),
            (),
        )
        .await
        .expect("table");
    assert_eq!(session.partitioner(&ks, "t_scylla_cdc_log"), Some(Partitioner::Murmur3));
    let read = session
        .prepare(format!("SELECT v FROM {ks}.t_scylla_cdc_log WHERE \"cdc$stream_id\" = ?"))
        .await
        .expect("prepare");
    assert_eq!(read.partitioner(), Some(Partitioner::Murmur3));
    let id = stream_ids(1)[0];
    let token = shardwise::routing::partition_token(&[0], &(&id[..],), Partitioner::Murmur3).expect("token");
    assert_eq!(session.replicas(&ks, token).len(), 1);
    session.execute(&read, (&id[..],)).await.expect("read");
}

/// A fresh keyspace named after `prefix` with 16 tablets, and its table
/// `kv (pk bigint PRIMARY KEY, v text)`.
async fn tablets_table(session: &Session, prefix: &str) -> String {
    let ks = testkit::fresh_keyspace(prefix);
    session
        .execute(
            &Statement::new(format!(
                "CREATE KEYSPACE {ks} WITH replication = {{'class': 'SimpleStrategy', 'replication_factor': 1}} \
                 AND tablets = {{'enabled': true, 'initial': 16}}"
            )),
            (),
        )
        .await
        .expect("ks");
    session
        .execute(&Statement::new(format!("CREATE TABLE {ks}.kv (pk bigint PRIMARY KEY, v text)")), ())
        .await
        .expect("table");
    ks
}

/// A keyspace with tablets: the ring says nothing about where a key's
/// tablet is, the front's answers to misrouted writes do. Once the session
/// has learned a tablet from them, writes to it go to its shard: one miss
/// per tablet while learning (16), then every one of 10,000 prepared writes
/// a hit; after two merges, misses while learning again, then every write
/// a hit again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tablets_are_learned_from_misroutes_and_then_hit() {
    let (front, session) = setup().await;
    let ks = tablets_table(&session, "tablets").await;
    let tablets = front.tablets(&ks, "kv").expect("a tablets table in the front");
    assert_eq!(tablets.tablets().len(), 16);
    let insert =
        Arc::new(session.prepare(format!("INSERT INTO {ks}.kv (pk, v) VALUES (?, ?)")).await.expect("prepare"));

    let (learning, stats) = learn_then_write(&front, &session, &insert, 0).await;
    println!(
        "tablets: {} hits, {} misses while learning; then {} hits, {} misses over {TABLET_WRITES} writes ({:.4})",
        learning.hits(),
        learning.misses(),
        stats.hits(),
        stats.misses(),
        stats.hit_rate()
    );
    // Each tablet is learned from its first misrouted write and never misrouted again (a write
    // to a tablet not yet learned lands on its shard by chance, 1 in 8: each tablet's ~19 of
    // the 300 writes all doing so is out of the question).
    assert_eq!(learning.misses(), 16, "one miss per tablet while learning the 16 tablets");
    assert_eq!(stats.misses(), 0, "{TABLET_WRITES} writes once every tablet is learned: every one a hit");

    // Two merges move every second sibling onto its partner's replicas: the
    // merged tablets' payloads must replace the two tablets each overlaps.
    front.resize_tablets(&ks, "kv", Resize::Merge).await.expect("merge").expect("merged");
    let merged = front.resize_tablets(&ks, "kv", Resize::Merge).await.expect("merge").expect("merged");
    assert_eq!(merged.tablets().len(), 4);
    let (learning, stats) = learn_then_write(&front, &session, &insert, 100_000).await;
    println!(
        "tablets after two merges: {} misses while learning; then {} hits, {} misses over {TABLET_WRITES} writes ({:.4})",
        learning.misses(),
        stats.hits(),
        stats.misses(),
        stats.hit_rate()
    );
    // Claim `tablets-relearn`: at most one miss per merged tablet (4), then 100%.
    let tablets = merged.tablets().len() as u64;
    assert!((1..=tablets).contains(&learning.misses()), "the session learned each merged tablet once:\n{learning}");
    assert_eq!(stats.misses(), 0, "{TABLET_WRITES} writes once the merged tablets are learned: every one a hit");
}

/// `Session::token_endpoints` (the official `get_token_endpoints`): for a
/// table with tablets, the replica and shard of the tablet that holds the
/// token, as the front placed it, once learned; for a table without, the
/// node and the shard its sharding gives the token.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn token_endpoints_name_the_tablet_or_the_rings_replica_and_shard() {
    let (front, session) = setup().await;
    let ks = testkit::fresh_keyspace("endpoints");
    let ddl = [
        format!(
            "CREATE KEYSPACE {ks} WITH replication = {{'class': 'SimpleStrategy', 'replication_factor': 1}} \
             AND tablets = {{'enabled': true, 'initial': 8}}"
        ),
        format!("CREATE TABLE {ks}.kv (pk bigint PRIMARY KEY, v text)"),
    ];
    for text in ddl {
        session.execute(&Statement::new(text), ()).await.expect("ddl");
    }
    let insert = session.prepare(format!("INSERT INTO {ks}.kv (pk, v) VALUES (?, ?)")).await.expect("prepare");
    let placed = front.tablets(&ks, "kv").expect("a tablets table in the front");
    let node = session.nodes()[0];
    let host = session.node_info(node).map(|n| n.host_id);
    for pk in 0..64i64 {
        session.execute(&insert, (pk, "learn")).await.expect("insert");
    }
    for pk in 0..64i64 {
        let token = insert.calculate_token(&(pk, "x")).expect("a token");
        let tablet = placed
            .tablets()
            .iter()
            .find(|t| t.first_token < token.value() && token.value() <= t.last_token)
            .expect("a tablet holds every token");
        let endpoints = session.token_endpoints(&ks, "kv", token);
        let want = shardwise::cluster::node::Replica { addr: node, host_id: host, shard: Some(tablet.replicas[0].1) };
        assert_eq!(endpoints, [want], "pk {pk}: the tablet's replica and shard");
    }
    let vnodes = testkit::fresh_keyspace("endpoints_ring");
    session
        .execute(
            &Statement::new(format!(
                "CREATE KEYSPACE {vnodes} WITH replication = {{'class': 'SimpleStrategy', 'replication_factor': 1}}"
            )),
            (),
        )
        .await
        .expect("ks");
    let mut shards = std::collections::HashSet::new();
    for pk in 0..64i64 {
        let token = Partitioner::Murmur3.token_of_single(&pk.to_be_bytes());
        let endpoints = session.token_endpoints(&vnodes, "kv", token);
        let shard = session.shard_of(node, token);
        assert!(shard.is_some(), "the front is sharded");
        assert_eq!(endpoints, [shardwise::cluster::node::Replica { addr: node, host_id: host, shard }]);
        shards.extend(shard);
    }
    assert!(shards.len() > 1, "the tokens spread over shards: {shards:?}");
}

/// Writes measured after learning.
const TABLET_WRITES: i64 = 10_000;

/// 300 writes to learn from, then [`TABLET_WRITES`] from 16 tasks, keys from
/// `base` on: the front's counters of both phases.
async fn learn_then_write(
    front: &shardwise_emu::FrontHandle,
    session: &Session,
    insert: &Arc<shardwise::PreparedStatement>,
    base: i64,
) -> (shardwise_emu::FrontStats, shardwise_emu::FrontStats) {
    front.reset_routing_stats();
    for pk in base..base + 300 {
        session.execute(&**insert, (pk, "learn")).await.expect("insert");
    }
    let learning = front.stats();
    front.reset_routing_stats();
    let mut tasks = tokio::task::JoinSet::new();
    for task in 0..16i64 {
        let (session, insert) = (session.clone(), insert.clone());
        tasks.spawn(async move {
            for pk in (base + 1_000 + task..base + 1_000 + TABLET_WRITES).step_by(16) {
                session.execute(&*insert, (pk, "value")).await.expect("insert");
            }
        });
    }
    while let Some(t) = tasks.join_next().await {
        t.expect("writer");
    }
    let stats = front.stats();
    assert_eq!(stats.hits() + stats.misses(), TABLET_WRITES as u64, "every write routed");
    if stats.misses() > 0 {
        let m = session.metrics();
        println!(
            "misses after learning: {stats}\nlearning: {learning}\nsession: {} connections, {} opened, {} closed",
            m.connections, m.connections_opened, m.connections_closed
        );
    }
    (learning, stats)
}

/// Scylla marks prepared conditional statements (`SCYLLA_LWT_ADD_METADATA_MARK`,
/// negotiated in STARTUP); the session then sends them to the primary
/// replica first. Cassandra offers no mark: nothing is an LWT there.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn conditional_statements_are_marked_as_lwt() {
    let (_front, session) = setup().await;
    let ks = crate::common::simple_keyspace(&session, "lwt_mark").await;
    session
        .execute(&Statement::new(format!("CREATE TABLE {ks}.kv (pk bigint PRIMARY KEY, v text)")), ())
        .await
        .expect("table");
    let conditional =
        session.prepare(format!("INSERT INTO {ks}.kv (pk, v) VALUES (?, ?) IF NOT EXISTS")).await.expect("lwt");
    let update = session.prepare(format!("UPDATE {ks}.kv SET v = ? WHERE pk = ? IF v = ?")).await.expect("lwt update");
    let plain = session.prepare(format!("INSERT INTO {ks}.kv (pk, v) VALUES (?, ?)")).await.expect("plain");
    assert!(conditional.is_lwt() && update.is_lwt(), "conditional statements carry Scylla's LWT mark");
    assert!(!plain.is_lwt(), "a plain insert is no LWT");
    let first = session.execute(&conditional, (1i64, "one")).await.expect("insert");
    assert_eq!(first.applied(), Some(true));
    let again = session.execute(&conditional, (1i64, "uno")).await.expect("insert again");
    assert_eq!(again.applied(), Some(false));
    assert_eq!(session.execute(&update, ("eins", 1i64, "one")).await.expect("update").applied(), Some(true));

    let cassandra = SessionBuilder::new()
        .known_node_addr(testkit::shared_node().expect("server"))
        .build()
        .await
        .expect("session on Cassandra");
    let there = cassandra
        .prepare(format!("INSERT INTO {ks}.kv (pk, v) VALUES (?, ?) IF NOT EXISTS"))
        .await
        .expect("lwt on Cassandra");
    assert!(!there.is_lwt(), "Cassandra offers no LWT mark");
}

/// ScyllaDB's tablets routing v2 (`TABLETS_ROUTING_V2_EXPERIMENTAL`, asked
/// for with `tablets_routing_v2(true)`; the front offers it as ScyllaDB does
/// with its `strongly-consistent-tables` feature): every connection
/// negotiates it, every EXECUTE carries a block of the tablet version the
/// session knows, and the front answers with the tablet and its version
/// whenever the block is stale, a hit or not. Once every tablet is learned
/// with its version, no write misses and no answer carries a route; a split
/// (same replicas, same versions) sends none either; after merges that move
/// half of each merged tablet's range, one route per merged tablet, then
/// every write hits again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tablets_routing_v2_learns_tablet_versions_and_then_sends_no_route() {
    let front =
        start_front_with(FrontConfig { shards: SHARDS, strongly_consistent_tables: true, ..FrontConfig::default() })
            .await;
    let session = session_through_with(&front, |b| b.tablets_routing_v2(true)).await;
    assert!(session.connections().iter().all(|c| c.uses_tablets_routing_v2()), "v2 negotiated everywhere");
    let ks = tablets_table(&session, "tablets_v2").await;
    let insert =
        Arc::new(session.prepare(format!("INSERT INTO {ks}.kv (pk, v) VALUES (?, ?)")).await.expect("prepare"));
    let select = session.prepare(format!("SELECT v FROM {ks}.kv WHERE pk = ?")).await.expect("prepare");

    let routes = || front.stats().tablet_routes;
    let before = routes();
    let (learning, stats) = learn_then_write(&front, &session, &insert, 0).await;
    let sent = routes() - before;
    println!(
        "v2: {} misses and {sent} routes while learning and writing; then {} misses",
        learning.misses(),
        stats.misses()
    );
    // Each tablet answers with its route once, to the first request whose
    // block does not match its version; a block of version 0 matches the
    // real version by chance one time in 16, and such a request gets no
    // route (and may miss): a few more misses than tablets, never more
    // routes.
    assert!(learning.misses() <= 32, "about one miss per tablet: {learning}");
    assert_eq!(stats.misses(), 0, "every write a hit once the tablets are learned");
    assert_eq!(sent, 16, "one route per tablet, none once its version is known");
    let quiet = routes();
    for pk in 0..200i64 {
        let row = session.execute(&select, (pk,)).await.expect("select");
        assert_eq!(row.rows::<(String,)>().expect("rows").count(), 1, "pk {pk} reads back");
    }
    assert_eq!(routes(), quiet, "every version current: no answer carries a route");

    // A session that does not ask for v2 keeps v1 on the same front.
    let v1 = SessionBuilder::new().known_node_addr(front.addr()).build().await.expect("v1 session");
    assert!(v1.connections().iter().all(|c| !c.uses_tablets_routing_v2()), "v2 only when asked for");
    let row = v1.execute(&select, (7i64,)).await.expect("v1 select");
    assert_eq!(row.rows::<(String,)>().expect("rows").count(), 1);

    // A split keeps each half on its parent's replicas: the version (a
    // hash of the replicas, as in ScyllaDB) is unchanged, no route is sent,
    // and the tablets learned still route every write right.
    let split = front.resize_tablets(&ks, "kv", Resize::Split).await.expect("split").expect("split");
    assert_eq!(split.tablets().len(), 32);
    let before = routes();
    let (learning, stats) = learn_then_write(&front, &session, &insert, 100_000).await;
    assert_eq!((learning.misses(), stats.misses(), routes() - before), (0, 0, 0), "nothing moved");
    // Two merges (32, 16, then 8 tablets): each merged tablet takes its
    // first sibling's replicas, so the second sibling's range has a new
    // version: one route for each of the 8, then every write a hit.
    front.resize_tablets(&ks, "kv", Resize::Merge).await.expect("merge").expect("merged");
    let merged = front.resize_tablets(&ks, "kv", Resize::Merge).await.expect("merge").expect("merged");
    assert_eq!(merged.tablets().len(), 8);
    let before = routes();
    let (_, stats) = learn_then_write(&front, &session, &insert, 200_000).await;
    assert_eq!(stats.misses(), 0, "the merged tablets are learned and hit");
    assert_eq!(routes() - before, 8, "one route per merged tablet whose replicas moved");
}
