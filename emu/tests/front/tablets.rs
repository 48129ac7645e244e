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

use shardwise_emu::FrontConfig;
use shardwise_protocol::codec::RawValue;
use shardwise_protocol::consistency::Consistency;
use shardwise_protocol::request::{Execute, Options, Prepare, QueryParameters, Startup};
use shardwise_protocol::response::{ResponseMessage, ResultMessage};
use shardwise_protocol::tablets::{TabletRoute, PAYLOAD_KEY, TABLETS_ROUTING_V1};
use shardwise_protocol::token::Token;
use shardwise_protocol::types::ser::RawValues;

use crate::support::{self, session, Raw};

const SHARDS: u16 = 8;

fn front() -> shardwise_emu::FrontHandle {
    support::start_front(FrontConfig {
        shards: SHARDS,
        emu_keyspace: testkit::fresh_keyspace("emu_tablets"),
        ..FrontConfig::default()
    })
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
    let front = front();
    let session = Arc::new(session(&front).await);
    let deadline = Instant::now() + Duration::from_secs(30);
    while front.stats().nodes[0].shards.iter().any(|s| s.connections_open == 0) {
        assert!(Instant::now() < deadline, "one connection per shard");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let ks = tablets_keyspace(&session, "emu_tablets_official").await;
    let insert = session.prepare(format!("INSERT INTO {ks}.kv (pk, v) VALUES (?, ?)")).await.expect("prepare");
    let tablets = front.tablets(&ks, "kv").expect("a tablets table");
    assert_eq!(tablets.tablets().len(), 8);

    // Learning: the driver routes by the token's shard until a payload
    // tells it the tablet's.
    front.reset_routing_stats();
    for pk in 0..200i64 {
        session.execute_unpaged(&insert, (pk, "learn")).await.expect("insert");
    }
    let learning = front.stats();
    front.reset_routing_stats();
    const ROWS: i64 = 4000;
    let mut tasks = tokio::task::JoinSet::new();
    for chunk in 0..8i64 {
        let (session, insert) = (session.clone(), insert.clone());
        tasks.spawn(async move {
            for pk in (1000 + chunk..1000 + ROWS).step_by(8) {
                session.execute_unpaged(&insert, (pk, "value")).await.expect("insert");
            }
        });
    }
    while let Some(done) = tasks.join_next().await {
        done.expect("task");
    }
    let stats = front.stats();
    println!(
        "official driver on a tablets table: {} hits, {} misses while learning; then {} hits, {} misses ({:.4})",
        learning.hits(),
        learning.misses(),
        stats.hits(),
        stats.misses(),
        stats.hit_rate()
    );
    assert!(learning.misses() > 0, "the token's shard is not the tablet's: the driver had to learn");
    assert!(stats.hits() + stats.misses() >= ROWS as u64, "every write routed: {stats}");
    assert!(stats.hit_rate() >= 0.999, "hit rate {:.4} after learning:\n{stats}", stats.hit_rate());
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
        let mut raw = Raw::connect(front.addr());
        let ResponseMessage::Supported(options) = raw.request(&Options) else { panic!("SUPPORTED expected") };
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
        assert!(matches!(raw.request(&Startup { options: startup }), ResponseMessage::Ready));
        let ResponseMessage::Result(ResultMessage::Prepared(prepared)) =
            raw.request(&Prepare { query: &query, keyspace: None })
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
            let response = raw.response(&execute);
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
