//! What several test modules share: the fake servers' reading of requests
//! and encoding of answers, the turn-taking of the tests that start Cassandra servers of
//! their own, and a fresh keyspace.

use std::time::Duration;

use shardwise::protocol::frame::{EnvelopeHeader, ProtocolVersion, HEADER_LEN};
use shardwise::protocol::response::{Response, ResponseMessage};
use shardwise::{Session, TracingInfo, TracingInfoError};
use tokio::io::AsyncReadExt;
use tokio::net::TcpStream;
use tokio::sync::{Mutex, MutexGuard};

/// Reads one request envelope, as a fake server does; returns its stream id.
pub async fn read_request(socket: &mut TcpStream) -> Option<i16> {
    read_request_of_any_version(socket).await.map(|(_, stream)| stream)
}

/// [`read_request`] of an envelope of any version (a v5 one is read with
/// v4's header layout, which the handshake's envelopes share); returns its
/// version and stream id.
pub async fn read_request_of_any_version(socket: &mut TcpStream) -> Option<(u8, i16)> {
    let mut head = [0u8; HEADER_LEN];
    socket.read_exact(&mut head).await.ok()?;
    let version = head[0] & 0x7f;
    head[0] = (head[0] & 0x80) | 4;
    let header = EnvelopeHeader::decode(&head, 1 << 20).ok()?;
    let mut body = vec![0u8; header.length as usize];
    socket.read_exact(&mut body).await.ok()?;
    Some((version, header.stream))
}

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
    let ddl = testkit::create_keyspace(&ks, 1);
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
