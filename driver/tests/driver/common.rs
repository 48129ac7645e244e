//! What several test modules share: the encoding of the fake servers'
//! answers, the turn-taking of the tests that start Cassandra servers of
//! their own, and a fresh keyspace.

use std::time::Duration;

use shardwise::protocol::frame::ProtocolVersion;
use shardwise::protocol::response::{Response, ResponseMessage};
use shardwise::{Session, TracingInfo, TracingInfoError};
use tokio::sync::{Mutex, MutexGuard};

/// `message` as a protocol v4 response envelope on `stream`, as a fake
/// server sends it.
pub fn response(stream: i16, message: ResponseMessage) -> Vec<u8> {
    let mut out = Vec::new();
    Response::new(message).encode(ProtocolVersion::V4, stream, &mut out).expect("encodes");
    out
}

/// Held for the whole test by each test that starts Cassandra servers of
/// its own (`auth`, `tls`, `cluster`): in one binary tests run
/// concurrently, and two of them starting their JVMs at once on a small
/// machine (besides the shared node) would slow each other past their
/// startup timeouts and the cluster scenario's deadlines. Separate test
/// binaries used to run them one after another.
pub async fn own_servers() -> MutexGuard<'static, ()> {
    static TURN: Mutex<()> = Mutex::const_new(());
    TURN.lock().await
}

/// A fresh keyspace named after `prefix`, SimpleStrategy with one replica,
/// created through `session`.
pub async fn simple_keyspace(session: &shardwise::Session, prefix: &str) -> String {
    let ks = testkit::fresh_keyspace(prefix);
    let ddl = format!("CREATE KEYSPACE {ks} WITH replication = {{'class': 'SimpleStrategy', 'replication_factor': 1}}");
    session.execute(&shardwise::Statement::new(ddl), ()).await.expect("keyspace");
    ks
}

/// The trace `id`, asked for again while the server has not finished
/// writing it: a loaded Cassandra can take longer than `tracing_info`'s own
/// few attempts. Still incomplete after 20 s, the last error.
pub async fn finished_trace(session: &Session, id: uuid::Uuid) -> Result<TracingInfo, TracingInfoError> {
    let give_up = tokio::time::Instant::now() + Duration::from_secs(20);
    loop {
        match session.tracing_info(id).await {
            Err(TracingInfoError::Incomplete { .. }) if tokio::time::Instant::now() < give_up => {
                tokio::time::sleep(Duration::from_millis(50)).await
            }
            done => return done,
        }
    }
}
