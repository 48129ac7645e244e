//! The connection layer against the real Cassandra: every protocol version
//! and compression, many concurrent requests coalescing into few writes,
//! oversized requests, abandoned requests.

use std::sync::Arc;

use shardwise::protocol::consistency::Consistency;
use shardwise::protocol::frame::ProtocolVersion;
use shardwise::protocol::request::{Query, QueryParameters};
use shardwise::protocol::response::{Response, ResponseMessage, ResultMessage};
use shardwise::{Compression, Connection, ConnectionConfig};

fn config(version: ProtocolVersion, compression: Compression) -> ConnectionConfig {
    ConnectionConfig { max_version: version, min_version: version, compression, ..Default::default() }
}

async fn query(conn: &Connection, cql: &str) -> ResultMessage {
    let q = Query { query: cql, params: QueryParameters::new(Consistency::One, ()) };
    let env = conn.send(&q, 0).await.expect("answer");
    match Response::from_envelope(env).expect("decodes").message {
        ResponseMessage::Result(r) => r,
        other => panic!("{}: {other:?}", &cql[..cql.len().min(80)]),
    }
}

async fn exercise(version: ProtocolVersion, compression: Compression) {
    let addr = testkit::shared_node().expect("server");
    let conn = Connection::open(addr, &config(version, compression)).await.expect("connect");
    assert_eq!(conn.version(), version);
    assert_eq!(conn.compression(), compression);
    let ResultMessage::Rows(rows) = query(&conn, "SELECT release_version FROM system.local").await else {
        panic!("rows")
    };
    let versions: Vec<(&str,)> = rows.rows().expect("types").map(|r| r.expect("row")).collect();
    assert!(versions[0].0.starts_with("5.0"), "{versions:?}");

    // Many requests in flight at once on one connection.
    let conn = Arc::new(conn);
    let mut tasks = Vec::new();
    for i in 0..500 {
        let conn = conn.clone();
        tasks.push(tokio::spawn(async move {
            let cql = format!("SELECT key, cluster_name AS c{i} FROM system.local");
            match query(&conn, &cql).await {
                ResultMessage::Rows(rows) => rows.rows_count(),
                _ => 0,
            }
        }));
    }
    for t in tasks {
        assert_eq!(t.await.expect("task"), 1);
    }
    // A request larger than the write buffer (and than a v5 segment).
    let big = format!("SELECT key FROM system.local WHERE cluster_name = '{}' ALLOW FILTERING", "x".repeat(300_000));
    let ResultMessage::Rows(rows) = query(&conn, &big).await else { panic!("rows") };
    assert_eq!(rows.rows_count(), 0);
    assert_eq!(conn.in_flight(), 0);
    conn.ping().await.expect("ping");
}

#[tokio::test]
async fn v4_plain() {
    exercise(ProtocolVersion::V4, Compression::None).await;
}

#[tokio::test]
async fn v4_lz4() {
    exercise(ProtocolVersion::V4, Compression::Lz4).await;
}

#[tokio::test]
async fn v5_plain() {
    exercise(ProtocolVersion::V5, Compression::None).await;
}

#[tokio::test]
async fn v5_lz4() {
    exercise(ProtocolVersion::V5, Compression::Lz4).await;
}

#[tokio::test]
async fn negotiates_v5_by_default() {
    let addr = testkit::shared_node().expect("server");
    let conn = Connection::open(addr, &ConnectionConfig::default()).await.expect("connect");
    assert_eq!(conn.version(), ProtocolVersion::V5);
}

/// Requests abandoned after they were sent become orphans (their ids stay
/// reserved), and the late answers free them. The answers are held back by
/// a proxy, so the orphans are there to be counted before they are freed:
/// a 1 µs timeout against the server itself could give up before sending
/// (no orphan at all) or count after the answers came.
#[tokio::test]
async fn abandoned_requests_become_orphans_then_free() {
    use testkit::fault::{Action, Direction, FaultProxy, Rule};
    let proxy = FaultProxy::start(testkit::shared_node().expect("server")).expect("proxy");
    // v4: the proxy acts on v4 frames (it passes v5 segments through untouched).
    let conn = Connection::open(proxy.addr(), &config(ProtocolVersion::V4, Compression::None)).await.expect("connect");
    proxy.set_rules(vec![
        Rule::new(Action::Delay(std::time::Duration::from_millis(100))).direction(Direction::ToClient)
    ]);
    const ABANDONED: usize = 20;
    for _ in 0..ABANDONED {
        let q =
            Query { query: "SELECT * FROM system_schema.columns", params: QueryParameters::new(Consistency::One, ()) };
        // Give up on the request once it is surely sent, long before its answer.
        let r = tokio::time::timeout(std::time::Duration::from_millis(20), conn.send(&q, 0)).await;
        assert!(r.is_err(), "an answer came within 20 ms through a proxy that holds answers back 100 ms");
    }
    let orphans = conn.orphans();
    assert!(orphans > 0, "no abandoned request was left as an orphan: the cleanup below proves nothing");
    assert_eq!(conn.in_flight(), orphans, "the ids in use are the orphans'");
    for _ in 0..200 {
        if conn.in_flight() == 0 {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    assert_eq!(conn.in_flight(), 0, "answers to abandoned requests free their ids");
    assert_eq!(conn.orphans(), 0, "the {orphans} orphans were freed by their answers");
    proxy.clear_rules();
    conn.ping().await.expect("still usable");
}

#[tokio::test]
async fn closing_fails_new_requests() {
    let addr = testkit::shared_node().expect("server");
    let conn = Connection::open(addr, &ConnectionConfig::default()).await.expect("connect");
    conn.close();
    assert!(conn.is_closed());
    assert!(conn.ping().await.is_err());
}

/// The path a CDC worker takes: its own thread and current-thread runtime, a
/// connection it opened itself, a prepared statement executed on it, rows
/// read as views.
#[test]
fn a_worker_thread_executes_on_its_own_connection() {
    let addr = testkit::shared_node().expect("server");
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime");
        rt.block_on(async {
            let conn = Connection::open(addr, &ConnectionConfig::default()).await.expect("connect");
            let select =
                conn.prepare("SELECT key, cluster_name FROM system.local WHERE key = ?").await.expect("prepare");
            let params = shardwise::execute::Params::new(Consistency::One);
            let result = conn.execute(&select, &("local",), params).await.expect("execute");
            let (key, cluster): (&str, &str) = result.first_row().expect("types").expect("row");
            assert_eq!(key, "local");
            assert!(!cluster.is_empty());
        });
    })
    .join()
    .expect("worker");
}

/// With only two stream ids, fifty concurrent requests wait for free ids
/// instead of failing.
#[tokio::test]
async fn back_pressure_when_every_stream_id_is_in_use() {
    let addr = testkit::shared_node().expect("server");
    let config = ConnectionConfig { max_streams: 2, ..Default::default() };
    let conn = Arc::new(Connection::open(addr, &config).await.expect("connect"));
    let tasks: Vec<_> = (0..50)
        .map(|_| {
            let conn = conn.clone();
            tokio::spawn(async move { query(&conn, "SELECT key FROM system.local").await })
        })
        .collect();
    for t in tasks {
        assert!(matches!(t.await.expect("task"), ResultMessage::Rows(_)));
    }
    assert_eq!(conn.in_flight(), 0);
}
