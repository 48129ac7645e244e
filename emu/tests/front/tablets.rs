//! Tablets keyspaces through the front: the front judges each prepared
//! write by its tablet's replica (node and shard) and answers a misrouted
//! one with the tablet's `tablets-routing-v1` payload, as Scylla does.
//!
//! * the official `scylla` driver, unchanged, learns the tablets from those
//!   payloads and then routes (almost) every write to the tablet's shard:
//!   the payloads are what it expects;
//! * a raw connection sees the payload exactly when it is misrouted and
//!   negotiated the extension, and the payload is the tablet the front
//!   holds.

use std::sync::Arc;
use std::time::{Duration, Instant};

use scylla::errors::{DbError, ExecutionError, RequestAttemptError};
use shardwise_emu::tablets::TabletMap;
use shardwise_emu::{FrontConfig, Resize};
use shardwise_protocol::codec::RawValue;
use shardwise_protocol::consistency::Consistency;
use shardwise_protocol::request::{Execute, Options, Prepare, QueryParameters, Startup};
use shardwise_protocol::response::{ResponseMessage, ResultMessage};
use shardwise_protocol::tablets::{TabletRoute, PAYLOAD_KEY, TABLETS_ROUTING_V1};
use shardwise_protocol::token::Token;
use shardwise_protocol::types::ser::RawValues;

use crate::support::{self, session};

const SHARDS: u16 = 8;

fn front() -> shardwise_emu::FrontHandle {
    support::start_front(FrontConfig {
        shards: SHARDS,
        emu_keyspace: testkit::fresh_keyspace("emu_tablets"),
        ..FrontConfig::default()
    })
}

/// A front and the official driver through it, with a connection on every shard.
async fn front_and_session() -> (shardwise_emu::FrontHandle, Arc<scylla::client::session::Session>) {
    let front = front();
    let session = Arc::new(session(&front).await);
    let deadline = Instant::now() + Duration::from_secs(30);
    while front.stats().nodes[0].shards.iter().any(|s| s.connections_open == 0) {
        assert!(Instant::now() < deadline, "one connection per shard");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    (front, session)
}

/// Creates `ks.logged`, a table with CDC on.
async fn cdc_table(session: &scylla::client::session::Session, ks: &str) {
    session
        .query_unpaged(
            format!("CREATE TABLE {ks}.logged (pk bigint PRIMARY KEY, v text) WITH cdc = {{'enabled': true}}"),
            &[],
        )
        .await
        .expect("cdc table");
}

async fn tablets_keyspace(session: &scylla::client::session::Session, prefix: &str) -> String {
    let ks = testkit::fresh_keyspace(prefix);
    session
        .query_unpaged(
            format!(
                "CREATE KEYSPACE {ks} WITH replication = {{'class': 'SimpleStrategy', 'replication_factor': 1}} \
                 AND tablets = {{'enabled': true, 'initial': 8}}"
            ),
            &[],
        )
        .await
        .expect("keyspace");
    session.query_unpaged(format!("CREATE TABLE {ks}.kv (pk bigint PRIMARY KEY, v text)"), &[]).await.expect("table");
    ks
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_official_driver_learns_tablets_from_misroutes() {
    let (front, session) = front_and_session().await;
    let ks = tablets_keyspace(&session, "emu_tablets_official").await;
    let insert = session.prepare(format!("INSERT INTO {ks}.kv (pk, v) VALUES (?, ?)")).await.expect("prepare");
    let tablets = front.tablets(&ks, "kv").expect("a tablets table");
    assert_eq!(tablets.tablets().len(), 8);

    // Learning: the driver routes by the token's shard until a payload
    // tells it the tablet's.
    let (learning, stats) = learn_then_write(&front, &session, &insert, 1000).await;
    println!(
        "official driver on a tablets table: {} hits, {} misses while learning; then {} hits, {} misses ({:.4})",
        learning.hits(),
        learning.misses(),
        stats.hits(),
        stats.misses(),
        stats.hit_rate()
    );
    assert!(learning.misses() > 0, "the token's shard is not the tablet's: the driver had to learn");
    assert!(stats.hit_rate() >= 0.999, "hit rate {:.4} after learning:\n{stats}", stats.hit_rate());
}

/// Writes to learn from (200 keys), then [`ROWS`] writes from 8 tasks from
/// `base` on: the front's counters of both phases.
async fn learn_then_write(
    front: &shardwise_emu::FrontHandle,
    session: &Arc<scylla::client::session::Session>,
    insert: &scylla::statement::prepared::PreparedStatement,
    base: i64,
) -> (shardwise_emu::FrontStats, shardwise_emu::FrontStats) {
    front.reset_routing_stats();
    for pk in base..base + 200 {
        session.execute_unpaged(insert, (pk, "learn")).await.expect("insert");
    }
    let learning = front.stats();
    front.reset_routing_stats();
    let mut tasks = tokio::task::JoinSet::new();
    for chunk in 0..8i64 {
        let (session, insert) = (session.clone(), insert.clone());
        tasks.spawn(async move {
            for pk in (base + 1000 + chunk..base + 1000 + ROWS).step_by(8) {
                session.execute_unpaged(&insert, (pk, "value")).await.expect("insert");
            }
        });
    }
    while let Some(done) = tasks.join_next().await {
        done.expect("task");
    }
    let stats = front.stats();
    assert!(stats.hits() + stats.misses() >= ROWS as u64, "every write routed: {stats}");
    (learning, stats)
}

/// Writes measured after learning.
const ROWS: i64 = 4000;

/// `system.tablets` as a client reads it: (last token, replicas) per
/// tablet, with the table's names, tablet count and resize sequence number.
async fn system_tablets(
    session: &scylla::client::session::Session,
    ks: &str,
    table: &str,
) -> (Vec<(i64, Vec<(uuid::Uuid, i32)>)>, (String, String, i32, i64)) {
    let id = table_id(session, ks, table).await;
    let result = session
        .query_unpaged(
            "SELECT last_token, replicas, keyspace_name, table_name, tablet_count, resize_seq_number \
             FROM system.tablets WHERE table_id = ?",
            (id,),
        )
        .await
        .expect("system.tablets")
        .into_rows_result()
        .expect("rows");
    let mut tablets = Vec::new();
    let mut statics = None;
    type Row = (i64, Vec<(uuid::Uuid, i32)>, String, String, i32, i64);
    for row in result.rows::<Row>().expect("typed") {
        let (last, replicas, k, t, count, seq) = row.expect("row");
        tablets.push((last, replicas));
        statics = Some((k, t, count, seq));
    }
    (tablets, statics.expect("the table's partition"))
}

/// The id of `ks.table`.
async fn table_id(session: &scylla::client::session::Session, ks: &str, table: &str) -> uuid::Uuid {
    session
        .query_unpaged("SELECT id FROM system_schema.tables WHERE keyspace_name = ? AND table_name = ?", (ks, table))
        .await
        .expect("table id")
        .into_rows_result()
        .expect("rows")
        .single_row::<(uuid::Uuid,)>()
        .expect("one table")
        .0
}

/// What `system.tablets` should say of `map`.
fn expected_rows(front: &shardwise_emu::FrontHandle, map: &TabletMap) -> Vec<(i64, Vec<(uuid::Uuid, i32)>)> {
    let nodes = front.nodes();
    map.tablets()
        .iter()
        .map(|t| {
            let replicas = t.replicas.iter().map(|&(n, shard)| (nodes[n].host_id.expect("host id"), i32::from(shard)));
            (t.last_token, replicas.collect())
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn splits_and_merges_show_in_system_tablets_and_the_official_driver_follows() {
    let (front, session) = front_and_session().await;
    let ks = tablets_keyspace(&session, "emu_tablets_resize").await;
    let insert = session.prepare(format!("INSERT INTO {ks}.kv (pk, v) VALUES (?, ?)")).await.expect("prepare");
    let map = front.tablets(&ks, "kv").expect("a tablets table");
    let (rows, statics) = system_tablets(&session, &ks, "kv").await;
    assert_eq!(rows, expected_rows(&front, &map), "system.tablets after CREATE TABLE");
    assert_eq!(statics, (ks.clone(), "kv".to_owned(), 8, 0));
    let (_, before) = learn_then_write(&front, &session, &insert, 0).await;
    assert!(before.hit_rate() >= 0.999, "hit rate {:.4} before resizing:\n{before}", before.hit_rate());

    // A split halves each tablet in place: the halves keep their replicas,
    // so what the driver learned still routes every write right.
    let split = front.resize_tablets(&ks, "kv", Resize::Split).await.expect("split").expect("a tablets table");
    assert_eq!(split.tablets().len(), 16);
    let (rows, statics) = system_tablets(&session, &ks, "kv").await;
    assert_eq!(rows, expected_rows(&front, &split), "system.tablets after the split");
    assert_eq!((statics.2, statics.3), (16, 1), "tablet count and resize sequence number");
    let (after_split, _) = learn_then_write(&front, &session, &insert, 10_000).await;
    assert_eq!(after_split.misses(), 0, "a split moves nothing:\n{after_split}");

    // Two merges: every second sibling moves onto its partner's replicas,
    // so the driver is misrouted until the payloads of the merged tablets
    // replace what it knew.
    front.resize_tablets(&ks, "kv", Resize::Merge).await.expect("merge").expect("merged");
    let merged = front.resize_tablets(&ks, "kv", Resize::Merge).await.expect("merge").expect("merged");
    assert_eq!(merged.tablets().len(), 4);
    let (rows, statics) = system_tablets(&session, &ks, "kv").await;
    assert_eq!(rows, expected_rows(&front, &merged), "system.tablets after two merges");
    assert_eq!((statics.2, statics.3), (4, 3), "tablet count and resize sequence number");
    let (learning, after) = learn_then_write(&front, &session, &insert, 20_000).await;
    println!(
        "official driver across a split and two merges: {} hits, {} misses after the split; after the merges \
         {} misses while learning, then {} hits, {} misses ({:.4})",
        after_split.hits(),
        after_split.misses(),
        learning.misses(),
        after.hits(),
        after.misses(),
        after.hit_rate()
    );
    // Claim `tablets-relearn`: at most one miss per merged tablet (4), then 100%.
    let tablets = merged.tablets().len() as u64;
    assert!((1..=tablets).contains(&learning.misses()), "one miss per moved tablet at most:\n{learning}");
    assert_eq!(after.misses(), 0, "hit rate {:.4} after the merges, not 100%:\n{after}", after.hit_rate());

    assert!(front.resize_tablets(&ks, "nope", Resize::Split).await.expect("no table").is_none());
    let id = table_id(&session, &ks, "kv").await;
    session.query_unpaged(format!("DROP TABLE {ks}.kv"), &[]).await.expect("drop");
    let left = session
        .query_unpaged("SELECT last_token FROM system.tablets WHERE table_id = ?", (id,))
        .await
        .expect("system.tablets")
        .into_rows_result()
        .expect("rows")
        .rows_num();
    assert_eq!(left, 0, "a dropped table leaves system.tablets");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_misrouted_request_gets_its_tablet() {
    let front = front();
    let session = session(&front).await;
    let ks = tablets_keyspace(&session, "emu_tablets_raw").await;
    let tablets = front.tablets(&ks, "kv").expect("a tablets table");
    let host_id = front.nodes()[0].host_id.expect("a host id");
    let query = format!("INSERT INTO {ks}.kv (pk, v) VALUES (?, ?)");

    for negotiated in [true, false] {
        let mut raw = support::raw(front.addr());
        let ResponseMessage::Supported(options) = raw.request(&Options).expect("answer") else {
            panic!("SUPPORTED expected")
        };
        assert!(options.iter().any(|(k, _)| k == TABLETS_ROUTING_V1), "offered");
        let shard: u16 = options
            .iter()
            .find(|(k, _)| k == "SCYLLA_SHARD")
            .and_then(|(_, v)| v.first()?.parse().ok())
            .expect("SCYLLA_SHARD");
        let mut startup = vec![("CQL_VERSION", "3.0.0")];
        if negotiated {
            startup.push((TABLETS_ROUTING_V1, ""));
        }
        assert!(matches!(raw.request(&Startup { options: startup }).expect("answer"), ResponseMessage::Ready));
        let ResponseMessage::Result(ResultMessage::Prepared(prepared)) =
            raw.request(&Prepare { query: &query, keyspace: None }).expect("answer")
        else {
            panic!("PREPARED expected")
        };
        let before = front.stats();
        let (mut here, mut elsewhere) = (0, 0);
        for pk in 0i64..400 {
            let key = pk.to_be_bytes();
            let token = Token::murmur3(&key).value();
            let tablet = tablets.tablet_of(token);
            let values = RawValues { names: None, values: vec![RawValue::Value(&key), RawValue::Value(b"raw")] };
            let execute = Execute {
                id: &prepared.id,
                result_metadata_id: None,
                params: QueryParameters::new(Consistency::One, values),
            };
            let response = raw.response(&execute).expect("answer");
            assert!(matches!(response.message, ResponseMessage::Result(ResultMessage::Void)), "{response:?}");
            let payload: Vec<_> = response.custom_payload.iter().filter(|(k, _)| k == PAYLOAD_KEY).collect();
            if tablet.is_replica(0, shard) {
                here += 1;
                assert!(payload.is_empty(), "pk {pk}: a payload on the tablet's own shard");
            } else if negotiated {
                elsewhere += 1;
                let value = payload.first().and_then(|(_, v)| v.as_ref()).expect("the tablet's payload");
                let route = TabletRoute::decode(value).expect("a valid payload");
                assert!(route.contains(token), "pk {pk}: the payload's range holds the key");
                assert_eq!((route.first_token, route.last_token), (tablet.first_token, tablet.last_token));
                let replicas: Vec<_> = route.replicas.iter().map(|r| (r.host_id, r.shard)).collect();
                assert_eq!(replicas, vec![(host_id, tablet.replicas[0].1)], "pk {pk}");
            } else {
                elsewhere += 1;
                assert!(payload.is_empty(), "pk {pk}: a payload without the extension");
            }
        }
        let after = front.stats();
        let on = |s: &shardwise_emu::FrontStats| s.nodes[0].shards[usize::from(shard)];
        assert_eq!(on(&after).hits - on(&before).hits, here, "hits counted against the tablet");
        assert_eq!(on(&after).misses - on(&before).misses, elsewhere, "misses counted against the tablet");
        assert!(here > 0 && elsewhere > 0, "{here} keys on this shard's tablet, {elsewhere} elsewhere");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_misrouted_write_to_a_cdc_table_gets_its_tablet_too() {
    let (front, session) = front_and_session().await;
    let ks = tablets_keyspace(&session, "emu_tablets_cdc_route").await;
    cdc_table(&session, &ks).await;
    let insert = session.prepare(format!("INSERT INTO {ks}.logged (pk, v) VALUES (?, ?)")).await.expect("prepare");
    let (learning, stats) = learn_then_write(&front, &session, &insert, 0).await;
    println!(
        "official driver on a tablets CDC table: {} misses while learning; then {} hits, {} misses ({:.4}); {}",
        learning.misses(),
        stats.hits(),
        stats.misses(),
        stats.hit_rate(),
        front.stats()
    );
    assert!(learning.misses() > 0, "the driver had to learn");
    assert!(stats.hit_rate() >= 0.999, "hit rate {:.4} on the CDC-logged path:\n{stats}", stats.hit_rate());
    assert!(front.stats().cdc_log_rows >= 200 + ROWS as u64, "every write logged");
}

/// Scylla's `tablets_mode_for_new_keyspaces`: with `enabled` (Scylla's
/// default) a NetworkTopologyStrategy keyspace that says nothing gets
/// tablets, one that says `enabled: false` does not, and a SimpleStrategy
/// keyspace stays on vnodes; with `disabled` (the front's default) only a
/// keyspace that asks gets tablets.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn new_keyspaces_follow_the_tablets_mode() {
    for mode in [shardwise_emu::TabletsMode::Enabled, shardwise_emu::TabletsMode::Disabled] {
        let front = support::start_front(FrontConfig {
            shards: 2,
            emu_keyspace: testkit::fresh_keyspace("emu_tablets_mode"),
            tablets_mode: mode,
            ..FrontConfig::default()
        });
        let session = session(&front).await;
        let (dc,): (String,) = session
            .query_unpaged("SELECT data_center FROM system.local", &[])
            .await
            .expect("local")
            .into_rows_result()
            .expect("rows")
            .single_row()
            .expect("dc");
        let mut tablets = Vec::new();
        for (prefix, options) in [
            ("nts", format!("{{'class': 'NetworkTopologyStrategy', '{dc}': 1}}")),
            (
                "nts_off",
                format!("{{'class': 'NetworkTopologyStrategy', '{dc}': 1}} AND tablets = {{'enabled': false}}"),
            ),
            ("simple", "{'class': 'SimpleStrategy', 'replication_factor': 1}".to_owned()),
            (
                "asked",
                "{'class': 'SimpleStrategy', 'replication_factor': 1} AND tablets = {'enabled': true}".to_owned(),
            ),
        ] {
            let ks = testkit::fresh_keyspace(&format!("emu_mode_{prefix}"));
            session.query_unpaged(format!("CREATE KEYSPACE {ks} WITH replication = {options}"), &[]).await.expect("ks");
            session.query_unpaged(format!("CREATE TABLE {ks}.kv (pk int PRIMARY KEY)"), &[]).await.expect("table");
            let row = session
                .query_unpaged(
                    "SELECT initial_tablets FROM system_schema.scylla_keyspaces WHERE keyspace_name = ?",
                    (&ks,),
                )
                .await
                .expect("scylla_keyspaces")
                .into_rows_result()
                .expect("rows")
                .maybe_first_row::<(Option<i32>,)>()
                .expect("typed");
            assert_eq!(row.is_some(), front.tablets(&ks, "kv").is_some(), "{mode:?} {prefix}: scylla_keyspaces agrees");
            tablets.push(front.tablets(&ks, "kv").is_some());
        }
        let expected = match mode {
            shardwise_emu::TabletsMode::Enabled => [true, false, false, true],
            shardwise_emu::TabletsMode::Disabled => [false, false, false, true],
        };
        assert_eq!(tablets, expected, "{mode:?}: nts, nts with enabled false, simple, simple asking");
    }
}

/// Resizing through CQL, as on Scylla: `ALTER TABLE ... WITH tablets =
/// {'min_tablet_count': n}` splits up to the minimum, and a lower minimum
/// lets the (small) table merge down to it; a value that is not a count is
/// refused with a ConfigurationException naming it, as Scylla refuses it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn min_tablet_count_resizes_a_table() {
    let front = front();
    let session = session(&front).await;
    let ks = tablets_keyspace(&session, "emu_tablets_min").await;
    assert_eq!(front.tablets(&ks, "kv").expect("tablets").tablets().len(), 8);
    for (min, expected, seq) in [(32, 32, 2), (3, 4, 5), (4, 4, 5)] {
        session
            .query_unpaged(format!("ALTER TABLE {ks}.kv WITH tablets = {{'min_tablet_count': {min}}}"), &[])
            .await
            .expect("alter");
        let map = front.tablets(&ks, "kv").expect("tablets");
        assert_eq!(map.tablets().len(), expected, "min_tablet_count {min}");
        let (rows, statics) = system_tablets(&session, &ks, "kv").await;
        assert_eq!(rows, expected_rows(&front, &map), "system.tablets after min_tablet_count {min}");
        assert_eq!((statics.2, statics.3), (expected as i32, seq), "tablet count and resize sequence number");
    }
    // Other per-table options change nothing here; the table keeps working.
    session
        .query_unpaged(
            format!("ALTER TABLE {ks}.kv WITH comment = 'x' AND tablets = {{'expected_data_size_in_gb': 1}}"),
            &[],
        )
        .await
        .expect("alter");
    assert_eq!(front.tablets(&ks, "kv").expect("tablets").tablets().len(), 4);
    session.query_unpaged(format!("INSERT INTO {ks}.kv (pk, v) VALUES (1, 'one')"), &[]).await.expect("insert");
    // A bad value is refused by the server as Scylla refuses it: a
    // ConfigurationException naming the option, not a timeout or a broken
    // connection.
    // (Scylla reads values as C's `atol`, so `'x'` is 0 and accepted.)
    let bad =
        session.query_unpaged(format!("ALTER TABLE {ks}.kv WITH tablets = {{'min_tablet_count': -1}}"), &[]).await;
    match bad {
        Err(ExecutionError::LastAttemptError(RequestAttemptError::DbError(DbError::ConfigError, message))) => {
            assert_eq!(message, "Invalid value '-1' for min_tablet_count");
        }
        other => panic!("a bad option is refused with a ConfigurationException, got {other:?}"),
    }
}

/// Regression: `min_tablet_count` on a CDC log table (which has its base
/// table's tablets) looped for ever, resizing the base table's map under
/// the log's name; the log's resize is the base's, so nothing changes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn min_tablet_count_on_a_log_table_changes_nothing() {
    let (front, session) = front_and_session().await;
    let ks = tablets_keyspace(&session, "emu_tablets_log_min").await;
    cdc_table(&session, &ks).await;
    let before = front.tablets(&ks, "logged").expect("tablets").tablets().len();
    let alter = session.query_unpaged(
        format!("ALTER TABLE {ks}.logged_scylla_cdc_log WITH tablets = {{'min_tablet_count': 64}}"),
        &[],
    );
    let outcome = tokio::time::timeout(Duration::from_secs(20), alter).await.expect("the ALTER is answered");
    println!("ALTER of a log table's tablets: {:?}", outcome.map(|_| ()));
    assert_eq!(front.tablets(&ks, "logged").expect("tablets").tablets().len(), before);
    assert_eq!(front.tablet_streams(&ks, "logged").expect("stream sets").sets().len(), 1, "no new stream set");
}

/// Issue 40: through the front, the official driver reaches the owning shard
/// of a tablets table (8 tablets, 4 shards) for at least 99.9% of its routed
/// requests once warmed up, for prepared writes, single-partition reads and
/// conditional writes alike. What is measured: the front's hits and misses
/// over [`ROUTED`] requests of each kind on fresh keys, after a warm-up of 200
/// keys per statement in which the driver misses each tablet once and learns
/// it from the answer's `tablets-routing-v1` payload. The conditional writes
/// go to a table of their own, so they can only learn from the answers to
/// conditional writes (ScyllaDB attaches the payload to those too). BATCH
/// entries are counted apart, never as hits or misses: ScyllaDB sends no
/// payload for a BATCH, so how a driver routes one says nothing of the front.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_official_driver_routes_writes_reads_and_lwt_to_the_tablet_shard() {
    let front = support::start_front(FrontConfig {
        shards: 4,
        emu_keyspace: testkit::fresh_keyspace("emu_tablets_hits"),
        ..FrontConfig::default()
    });
    let session = Arc::new(session(&front).await);
    let deadline = Instant::now() + Duration::from_secs(30);
    while front.stats().nodes[0].shards.iter().any(|s| s.connections_open == 0) {
        assert!(Instant::now() < deadline, "one connection per shard");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let ks = tablets_keyspace(&session, "emu_tablets_hits").await;
    session.query_unpaged(format!("CREATE TABLE {ks}.cas (pk bigint PRIMARY KEY, v text)"), &[]).await.expect("table");
    assert_eq!(front.tablets(&ks, "kv").expect("tablets").tablets().len(), 8);
    assert_eq!(front.tablets(&ks, "cas").expect("tablets").tablets().len(), 8);
    let statements = Arc::new([
        session.prepare(format!("INSERT INTO {ks}.kv (pk, v) VALUES (?, ?)")).await.expect("prepare"),
        session.prepare(format!("SELECT v FROM {ks}.kv WHERE pk = ?")).await.expect("prepare"),
        session.prepare(format!("INSERT INTO {ks}.cas (pk, v) VALUES (?, ?) IF NOT EXISTS")).await.expect("prepare"),
    ]);
    async fn run(
        session: &scylla::client::session::Session,
        s: &[scylla::statement::prepared::PreparedStatement; 3],
        pk: i64,
    ) {
        session.execute_unpaged(&s[0], (pk, "v")).await.expect("insert");
        session.execute_unpaged(&s[1], (pk,)).await.expect("select");
        session.execute_unpaged(&s[2], (pk, "v")).await.expect("conditional insert");
    }

    front.reset_routing_stats();
    for pk in 0..200 {
        run(&session, &statements, pk).await;
    }
    let learning = front.stats();
    front.reset_routing_stats();
    let mut tasks = tokio::task::JoinSet::new();
    for chunk in 0..8i64 {
        let (session, statements) = (session.clone(), statements.clone());
        tasks.spawn(async move {
            for pk in (1000 + chunk..1000 + ROUTED).step_by(8) {
                run(&session, &statements, pk).await;
            }
        });
    }
    while let Some(done) = tasks.join_next().await {
        done.expect("task");
    }
    let stats = front.stats();

    front.reset_routing_stats();
    for pk in 0..400i64 {
        let mut batch = scylla::statement::batch::Batch::new(scylla::statement::batch::BatchType::Unlogged);
        batch.append_statement(statements[0].clone());
        session.batch(&batch, ((pk, "batched"),)).await.expect("batch");
    }
    let batches = front.stats();
    println!(
        "official driver, 8 tablets on 4 shards: {} misses in {} requests while learning; then {} hits, {} misses \
         ({:.4}) over writes, reads and conditional writes; batch entries {} hits, {} misses",
        learning.misses(),
        learning.hits() + learning.misses(),
        stats.hits(),
        stats.misses(),
        stats.hit_rate(),
        batches.batch_hits(),
        batches.batch_misses()
    );
    assert!(learning.misses() > 0, "the driver had to learn the tablets");
    assert!(stats.hits() + stats.misses() >= 3 * ROUTED as u64, "every request routed:\n{stats}");
    assert!(stats.hit_rate() >= 0.999, "hit rate {:.4} after warm-up:\n{stats}", stats.hit_rate());
    assert_eq!(batches.hits() + batches.misses(), 0, "batch entries are not counted as single statements");
    assert_eq!(batches.batch_hits() + batches.batch_misses(), 400, "every batch entry judged:\n{batches}");
}

/// Requests of each kind measured after warm-up.
const ROUTED: i64 = 2000;

/// A table created with tablet hints is born with the count they call for
/// (at least `min_tablet_count` rounded up to a power of two, at most
/// `max_tablet_count` rounded down; resize sequence number 0, no resize),
/// the hints are kept as DESCRIBE prints them, and an `ALTER KEYSPACE` of
/// `initial` sizes the tables created afterwards.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tablet_hints_at_creation_and_a_new_initial() {
    let front = front();
    let session = session(&front).await;
    let ks = tablets_keyspace(&session, "emu_tablets_hints").await;
    session
        .query_unpaged(
            format!(
                "CREATE TABLE {ks}.hinted (pk bigint PRIMARY KEY) WITH tablets = \
                 {{'min_tablet_count': 20, 'max_tablet_count': 100, 'min_per_shard_tablet_count': 0.5}}"
            ),
            &[],
        )
        .await
        .expect("create");
    let map = front.tablets(&ks, "hinted").expect("tablets");
    assert_eq!(map.tablets().len(), 32);
    let (rows, statics) = system_tablets(&session, &ks, "hinted").await;
    assert_eq!(rows, expected_rows(&front, &map));
    assert_eq!((statics.2, statics.3), (32, 0), "born with 32 tablets, never resized");
    let hints: Vec<(String, String)> = front.table_tablet_options(&ks, "hinted").expect("hints").into_iter().collect();
    assert_eq!(
        hints,
        [("max_tablet_count", "100"), ("min_per_shard_tablet_count", "0.5"), ("min_tablet_count", "20")]
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .to_vec()
    );
    assert_eq!(front.keyspace_tablets(&ks), Some(8));
    session
        .query_unpaged(
            format!(
                "ALTER KEYSPACE {ks} WITH replication = {{'class': 'SimpleStrategy', 'replication_factor': 1}} \
                 AND tablets = {{'initial': 2}}"
            ),
            &[],
        )
        .await
        .expect("alter keyspace");
    assert_eq!(front.keyspace_tablets(&ks), Some(2));
    session.query_unpaged(format!("CREATE TABLE {ks}.later (pk bigint PRIMARY KEY)"), &[]).await.expect("table");
    assert_eq!(front.tablets(&ks, "later").expect("tablets").tablets().len(), 2, "the new initial");
    assert_eq!(front.tablets(&ks, "kv").expect("tablets").tablets().len(), 8, "older tables keep theirs");
    session.query_unpaged(format!("DROP TABLE {ks}.hinted"), &[]).await.expect("drop");
    assert_eq!(front.table_tablet_options(&ks, "hinted"), None, "forgotten with the table");
}

/// The rows of `system.tablets` naming `ks.table`: (table id, last token,
/// tablet count), as test_tablets.py's `verify_tablets_presence` finds them.
async fn tablets_named(
    session: &scylla::client::session::Session,
    ks: &str,
    table: &str,
) -> Vec<(uuid::Uuid, i64, i32)> {
    session
        .query_unpaged(
            "SELECT table_id, last_token, tablet_count FROM system.tablets \
             WHERE keyspace_name = ? AND table_name = ? ALLOW FILTERING",
            (ks, table),
        )
        .await
        .expect("system.tablets")
        .into_rows_result()
        .expect("rows")
        .rows::<(uuid::Uuid, i64, i32)>()
        .expect("typed")
        .map(|r| r.expect("row"))
        .collect()
}

/// ScyllaDB's secondary index is a view on a hidden table `<index>_index`,
/// a tablet table of its own in a tablets keyspace (test_tablets.py,
/// `test_tablets_are_dropped_when_dropping_index`): its own table id, the
/// keyspace's tablet count, rows the front's map agrees with; gone with the
/// index, and with the base table; a custom (vector) index has none.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_secondary_index_has_tablets_of_its_own() {
    let (front, session) = front_and_session().await;
    let ks = tablets_keyspace(&session, "emu_tablets_index").await;
    let q = |s: String| {
        let session = session.clone();
        async move { session.query_unpaged(s, &[]).await.expect("statement") }
    };
    q(format!("CREATE INDEX kv_v ON {ks}.kv (v)")).await;
    let base_id = table_id(&session, &ks, "kv").await;
    let rows = tablets_named(&session, &ks, "kv_v_index").await;
    assert_eq!(rows.len(), 8, "the keyspace's initial count: {rows:?}");
    let index_id = rows[0].0;
    assert_ne!(index_id, base_id, "a table id of its own");
    assert!(rows.iter().all(|r| r.0 == index_id && r.2 == 8));
    let map = front.tablets(&ks, "kv_v_index").expect("the front's map of the index table");
    let lasts: Vec<i64> = map.tablets().iter().map(|t| t.last_token).collect();
    assert_eq!(rows.iter().map(|r| r.1).collect::<Vec<_>>(), lasts);
    assert_eq!(tablets_named(&session, &ks, "kv").await.len(), 8, "the base keeps its own");

    q(format!("DROP INDEX {ks}.kv_v")).await;
    assert!(tablets_named(&session, &ks, "kv_v_index").await.is_empty(), "dropped with the index");
    assert_eq!(tablets_named(&session, &ks, "kv").await.len(), 8);

    q(format!("CREATE INDEX ON {ks}.kv (v)")).await;
    assert_eq!(tablets_named(&session, &ks, "kv_v_idx_index").await.len(), 8, "the default index name");
    q(format!("CREATE TABLE {ks}.vec (pk int PRIMARY KEY, e vector<float, 3>) WITH cdc = {{'enabled': true, 'delta': 'full'}}"))
        .await;
    q(format!("CREATE INDEX vec_e ON {ks}.vec (e) USING 'vector_index'")).await;
    assert!(tablets_named(&session, &ks, "vec_e_index").await.is_empty(), "a custom index has no view");

    q(format!("DROP TABLE {ks}.kv")).await;
    assert!(tablets_named(&session, &ks, "kv_v_idx_index").await.is_empty(), "dropped with the base table");
    assert!(tablets_named(&session, &ks, "kv").await.is_empty());
    q(format!("DROP KEYSPACE {ks}")).await;
}

/// A materialized view in a tablets keyspace, as ScyllaDB keeps it (the
/// migration manager makes a view's tablets as a table's;
/// `test_tablets_are_dropped_when_dropping_view` in
/// `test/cqlpy/test_tablets.py`): rows in `system.tablets` under a table id
/// of its own, the keyspace's tablet count, gone with the view; and the view
/// is made and read, with the Cassandra behind the front letting views be
/// made as ScyllaDB does.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_materialized_view_has_tablets_of_its_own_and_is_read() {
    let (_front, session) = front_and_session().await;
    let ks = tablets_keyspace(&session, "emu_tablets_view").await;
    let q = |s: String| {
        let session = session.clone();
        async move { session.query_unpaged(s, &[]).await.expect("statement") }
    };
    q(format!(
        "CREATE MATERIALIZED VIEW {ks}.kv_by_v AS SELECT pk, v FROM {ks}.kv \
         WHERE v IS NOT NULL AND pk IS NOT NULL PRIMARY KEY (v, pk)"
    ))
    .await;
    let base_id = table_id(&session, &ks, "kv").await;
    let rows = tablets_named(&session, &ks, "kv_by_v").await;
    assert_eq!(rows.len(), 8, "the keyspace's initial count: {rows:?}");
    assert!(rows.iter().all(|r| r.0 == rows[0].0 && r.2 == 8), "{rows:?}");
    assert_ne!(rows[0].0, base_id, "a table id of its own");

    for (pk, v) in [(1i64, "a"), (2, "b"), (3, "a")] {
        q(format!("INSERT INTO {ks}.kv (pk, v) VALUES ({pk}, '{v}')")).await;
    }
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let result = q(format!("SELECT pk FROM {ks}.kv_by_v WHERE v = 'a'")).await;
        let mut pks: Vec<i64> = result
            .into_rows_result()
            .expect("rows")
            .rows::<(i64,)>()
            .expect("typed")
            .map(|r| r.expect("row").0)
            .collect();
        pks.sort_unstable();
        if pks == [1, 3] {
            break;
        }
        assert!(Instant::now() < deadline, "the view has the base's rows: {pks:?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }

    q(format!("DROP MATERIALIZED VIEW {ks}.kv_by_v")).await;
    assert!(tablets_named(&session, &ks, "kv_by_v").await.is_empty(), "dropped with the view");
    assert_eq!(tablets_named(&session, &ks, "kv").await.len(), 8, "the base keeps its own");
    q(format!("DROP KEYSPACE {ks}")).await;
}
