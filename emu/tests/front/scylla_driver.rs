//! The official `scylla` crate through the front: it must see a sharded
//! Scylla node, open one connection per shard through the shard-aware port,
//! and route prepared single-partition writes to the owning shard. A raw
//! connection that deliberately sends keys of other shards proves that the
//! miss counter counts.

use std::sync::Arc;
use std::time::{Duration, Instant};

use scylla::client::session::Session;
use shardwise_emu::{FrontConfig, FrontHandle};
use shardwise_protocol::codec::RawValue;
use shardwise_protocol::consistency::Consistency;
use shardwise_protocol::request::{Execute, Options, Prepare, QueryParameters, Startup};
use shardwise_protocol::response::{ResponseMessage, ResultMessage};
use shardwise_protocol::token::Token;
use shardwise_protocol::types::ser::RawValues;
use testkit::fresh_keyspace;

use crate::support::{self, keyspace, session};

const SHARDS: u16 = 8;

fn start_front() -> FrontHandle {
    support::start_front(FrontConfig { shards: SHARDS, ..FrontConfig::default() })
}

async fn wait_for_pool(front: &FrontHandle) {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let stats = front.stats();
        let node = &stats.nodes[0];
        if node.shards.iter().all(|s| s.connections_open > 0) && node.shard_aware_accepted >= u64::from(SHARDS) - 1 {
            return;
        }
        assert!(Instant::now() < deadline, "the driver did not open one connection per shard:\n{stats}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn official_driver_routes_to_the_owning_shard() {
    let front = start_front();
    let session: Arc<Session> = Arc::new(session(&front).await);
    wait_for_pool(&front).await;
    let stats = front.stats();
    println!("after connecting:\n{stats}");
    // One connection per shard at least, the non-first ones through the shard-aware port.
    assert!(stats.nodes[0].shards.iter().all(|s| s.connections_accepted >= 1));
    assert!(stats.nodes[0].shard_aware_accepted >= u64::from(SHARDS) - 1);
    assert!(stats.version_rejections <= 1, "{stats}");

    // The driver's view of the node: sharded.
    let state = session.get_cluster_state();
    let node = &state.get_nodes_info()[0];
    assert_eq!(node.sharder().map(|s| s.nr_shards.get()), Some(SHARDS), "driver did not detect the shards");

    let ks = keyspace(&session, "emu_driver").await;
    session.query_unpaged(format!("CREATE TABLE {ks}.kv (pk bigint PRIMARY KEY, v text)"), &[]).await.expect("table");
    session
        .query_unpaged(format!("CREATE TABLE {ks}.comp (a int, b text, c int, v int, PRIMARY KEY ((a, b), c))"), &[])
        .await
        .expect("table");
    let insert = session.prepare(format!("INSERT INTO {ks}.kv (pk, v) VALUES (?, ?)")).await.expect("prepare");
    let insert_comp =
        session.prepare(format!("INSERT INTO {ks}.comp (a, b, c, v) VALUES (?, ?, ?, ?)")).await.expect("prepare");
    front.reset_routing_stats();

    const ROWS: i64 = 2000;
    let mut tasks = tokio::task::JoinSet::new();
    for chunk in 0..8i64 {
        let (session, insert, insert_comp) = (session.clone(), insert.clone(), insert_comp.clone());
        tasks.spawn(async move {
            for pk in (chunk..ROWS).step_by(8) {
                session.execute_unpaged(&insert, (pk, format!("value {pk}"))).await.expect("insert");
                if pk % 10 == 0 {
                    let args = (pk as i32, format!("b{pk}"), 1i32, 2i32);
                    session.execute_unpaged(&insert_comp, args).await.expect("insert composite");
                }
            }
        });
    }
    while let Some(done) = tasks.join_next().await {
        done.expect("task");
    }
    let stats = front.stats();
    println!("after {ROWS} + {} prepared inserts:\n{stats}", ROWS / 10);
    let routed = stats.hits() + stats.misses();
    assert!(routed >= (ROWS + ROWS / 10) as u64, "every prepared insert is routed: {stats}");
    // Claim `shards-official`: every one on the owning shard.
    assert_eq!(stats.misses(), 0, "hit rate {:.4}, not 100%:\n{stats}", stats.hit_rate());

    // Reads through the front see the rows.
    let select = session.prepare(format!("SELECT v FROM {ks}.kv WHERE pk = ?")).await.expect("prepare");
    let rows = session.execute_unpaged(&select, (1234i64,)).await.expect("select").into_rows_result().expect("rows");
    let (v,): (String,) = rows.single_row().expect("one row");
    assert_eq!(v, "value 1234");

    // A deliberately misrouted connection: the regular port, then keys owned
    // by other shards than the one the front assigned.
    let mut raw = support::raw(front.addr());
    let ResponseMessage::Supported(options) = raw.request(&Options).expect("answer") else {
        panic!("SUPPORTED expected")
    };
    let shard: u16 = options
        .iter()
        .find(|(k, _)| k == "SCYLLA_SHARD")
        .and_then(|(_, v)| v.first()?.parse().ok())
        .expect("SCYLLA_SHARD");
    assert!(matches!(
        raw.request(&Startup { options: vec![("CQL_VERSION", "3.0.0")] }).expect("answer"),
        ResponseMessage::Ready
    ));
    let query = format!("INSERT INTO {ks}.kv (pk, v) VALUES (?, ?)");
    let ResponseMessage::Result(ResultMessage::Prepared(prepared)) =
        raw.request(&Prepare { query: &query, keyspace: None }).expect("answer")
    else {
        panic!("PREPARED expected")
    };
    let sharder = front.sharder();
    let before = front.stats();
    let (mut wrong, mut right) = (0u64, 0u64);
    for pk in 10_000i64.. {
        if wrong >= 50 && right >= 20 {
            break;
        }
        let key = pk.to_be_bytes();
        let owner = sharder.shard_of(Token::murmur3(&key));
        if owner == shard && right >= 20 || owner != shard && wrong >= 50 {
            continue;
        }
        let values = RawValues { names: None, values: vec![RawValue::Value(&key), RawValue::Value(b"raw")] };
        let execute = Execute {
            id: &prepared.id,
            result_metadata_id: None,
            params: QueryParameters::new(Consistency::One, values),
        };
        assert!(matches!(raw.request(&execute).expect("answer"), ResponseMessage::Result(ResultMessage::Void)));
        if owner == shard {
            right += 1;
        } else {
            wrong += 1;
        }
    }
    let after = front.stats();
    let on_shard = |s: &shardwise_emu::FrontStats| s.nodes[0].shards[usize::from(shard)];
    assert_eq!(on_shard(&after).misses - on_shard(&before).misses, wrong, "misses counted:\n{after}");
    assert!(on_shard(&after).hits - on_shard(&before).hits >= right, "hits counted:\n{after}");
    println!("misrouted connection on shard {shard}: {wrong} misses, {right} hits counted");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn miss_delay_slows_only_misses() {
    // Its own emulation keyspace: its shard count differs from the other fronts'.
    let front = support::start_front(FrontConfig {
        shards: 2,
        miss_delay: Some(Duration::from_millis(20)),
        emu_keyspace: fresh_keyspace("emu_gen"),
        ..FrontConfig::default()
    });
    let ks = fresh_keyspace("emu_delay");
    let mut raw = support::raw(front.addr());
    let ResponseMessage::Supported(options) = raw.request(&Options).expect("answer") else {
        panic!("SUPPORTED expected")
    };
    let shard: u16 = options
        .iter()
        .find(|(k, _)| k == "SCYLLA_SHARD")
        .and_then(|(_, v)| v.first()?.parse().ok())
        .expect("SCYLLA_SHARD");
    assert!(matches!(
        raw.request(&Startup { options: vec![("CQL_VERSION", "3.0.0")] }).expect("answer"),
        ResponseMessage::Ready
    ));
    for q in [testkit::create_keyspace(&ks, 1), format!("CREATE TABLE {ks}.kv (pk bigint PRIMARY KEY, v text)")] {
        let q = shardwise_protocol::request::Query { query: &q, params: QueryParameters::new(Consistency::One, ()) };
        assert!(matches!(raw.request(&q).expect("answer"), ResponseMessage::Result(_)));
    }
    let query = format!("INSERT INTO {ks}.kv (pk, v) VALUES (?, ?)");
    let ResponseMessage::Result(ResultMessage::Prepared(prepared)) =
        raw.request(&Prepare { query: &query, keyspace: None }).expect("answer")
    else {
        panic!("PREPARED expected")
    };
    let mut timing = |own: bool| {
        let mut total = Duration::ZERO;
        let mut n = 0;
        for pk in 0i64.. {
            if n == 10 {
                break;
            }
            let key = pk.to_be_bytes();
            if (front.sharder().shard_of(Token::murmur3(&key)) == shard) != own {
                continue;
            }
            let values = RawValues { names: None, values: vec![RawValue::Value(&key), RawValue::Value(b"x")] };
            let execute = Execute {
                id: &prepared.id,
                result_metadata_id: None,
                params: QueryParameters::new(Consistency::One, values),
            };
            let t = Instant::now();
            assert!(matches!(raw.request(&execute).expect("answer"), ResponseMessage::Result(ResultMessage::Void)));
            total += t.elapsed();
            n += 1;
        }
        total / 10
    };
    let hit = timing(true);
    let miss = timing(false);
    println!("mean latency: hit {hit:?}, miss {miss:?}");
    assert!(miss >= Duration::from_millis(20), "a miss waits the configured delay");
    assert!(miss > hit);
}

/// The official driver sees ScyllaDB by the test of ScyllaDB's own suite
/// (`is_scylla` in `test/cqlpy/util.py`: a `system` table whose name
/// contains `scylla`), read in pages of three rows as drivers page: every
/// one of Scylla's tables the front lists comes exactly once, in clustering
/// order, and `system.config` answers (no rows) instead of failing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn official_driver_sees_scylla_system_tables() {
    use futures::TryStreamExt;
    use scylla::statement::unprepared::Statement;

    let front = start_front();
    let session = session(&front).await;
    let mut statement =
        Statement::new("SELECT keyspace_name, table_name FROM system_schema.tables WHERE keyspace_name = 'system'");
    statement.set_page_size(3);
    let names: Vec<String> = session
        .query_iter(statement, &[])
        .await
        .expect("query")
        .rows_stream::<(String, String)>()
        .expect("typed rows")
        .map_ok(|(_, name)| name)
        .try_collect()
        .await
        .expect("pages");
    // The query itself, every column decoded by the driver.
    let all = session
        .query_unpaged("SELECT * FROM system_schema.tables WHERE keyspace_name = 'system'", &[])
        .await
        .expect("select *")
        .into_rows_result()
        .expect("rows");
    let rows: Vec<scylla::value::Row> =
        all.rows::<scylla::value::Row>().expect("rows").map(|r| r.expect("row")).collect();
    assert_eq!(rows.len(), names.len(), "paged and unpaged reads agree");
    println!("system tables: {names:?}");
    assert!(names.iter().any(|n| n.contains("scylla")), "is_scylla: {names:?}");
    for scylla in ["scylla_local", "scylla_table_schema_history", "scylla_views_builds_in_progress"] {
        assert_eq!(names.iter().filter(|n| *n == scylla).count(), 1, "{scylla} once in {names:?}");
    }
    let mut sorted = names.clone();
    sorted.sort();
    assert_eq!(names, sorted, "clustering order");
    let config = session
        .query_unpaged("SELECT value FROM system.config WHERE name = 'consistent_cluster_management'", &[])
        .await
        .expect("system.config")
        .into_rows_result()
        .expect("rows");
    assert_eq!(config.rows_num(), 0);
}
