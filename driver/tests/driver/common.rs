//! What several test modules share: the encoding of the fake servers'
//! answers, the turn-taking of the tests that start Cassandra servers of
//! their own, and a fresh keyspace.

use shardwise::protocol::frame::ProtocolVersion;
use shardwise::protocol::response::{Response, ResponseMessage};
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
