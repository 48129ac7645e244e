//! A scripted fake server that answers the handshake properly and then
//! misbehaves: every kind of bad frame must end in a typed error (and, for
//! framing errors, a closed connection) — never a panic, a hang, or a huge
//! allocation.

use std::time::Duration;

use shardwise::protocol::frame::ProtocolVersion;
use shardwise::protocol::response::{Response, ResponseMessage, ResultMessage};
use shardwise::protocol::DecodeError;
use shardwise::{Connection, ConnectionConfig, ConnectionError, ExecutionError};
use tokio::io::AsyncWriteExt;
use tokio::net::TcpListener;

use crate::common::{read_request, response};

/// Starts a fake that completes the handshake, then answers the first
/// request with `script(stream_id)` and keeps the socket open a while.
async fn fake(script: impl Fn(i16) -> Vec<u8> + Send + 'static) -> std::net::SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr");
    tokio::spawn(async move {
        let (mut socket, _) = listener.accept().await.expect("accept");
        let s = read_request(&mut socket).await.expect("OPTIONS");
        let supported = ResponseMessage::Supported(vec![("CQL_VERSION".into(), vec!["3.4.7".into()])]);
        socket.write_all(&response(s, supported)).await.expect("write");
        let s = read_request(&mut socket).await.expect("STARTUP");
        socket.write_all(&response(s, ResponseMessage::Ready)).await.expect("write");
        if let Some(s) = read_request(&mut socket).await {
            let _ = socket.write_all(&script(s)).await;
        }
        tokio::time::sleep(Duration::from_secs(5)).await;
    });
    addr
}

fn config() -> ConnectionConfig {
    ConnectionConfig {
        max_version: ProtocolVersion::V4,
        min_version: ProtocolVersion::V4,
        max_response_body: 1 << 20,
        heartbeat_interval: None,
        ..ConnectionConfig::default()
    }
}

async fn first_request(
    script: impl Fn(i16) -> Vec<u8> + Send + 'static,
) -> (Connection, Result<ResultMessage, ExecutionError>) {
    let addr = fake(script).await;
    let conn = Connection::open(addr, &config()).await.expect("handshake with the fake");
    let q = shardwise::protocol::request::Query {
        query: "SELECT 1",
        params: shardwise::protocol::request::QueryParameters::new(Default::default(), ()),
    };
    let result =
        tokio::time::timeout(Duration::from_secs(5), conn.send(&q, 0)).await.expect("no hang").and_then(|env| {
            match Response::from_envelope(env)?.message {
                ResponseMessage::Result(r) => Ok(r),
                _ => Err(ExecutionError::UnexpectedResponse("not a result")),
            }
        });
    (conn, result)
}

async fn assert_closed(conn: &Connection) {
    for _ in 0..50 {
        if conn.is_closed() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    panic!("connection still open after a framing error");
}

#[tokio::test]
async fn unknown_opcode_closes_the_connection() {
    let (conn, r) = first_request(|s| {
        let mut h = response(s, ResponseMessage::Ready);
        h[4] = 0x42;
        h
    })
    .await;
    assert!(
        matches!(r, Err(ExecutionError::Connection(ConnectionError::Decode(DecodeError::UnknownCode { .. })))),
        "{r:?}"
    );
    assert_closed(&conn).await;
}

#[tokio::test]
async fn oversized_frame_is_refused_without_allocating_it() {
    let (conn, r) = first_request(|s| {
        let mut h = response(s, ResponseMessage::Ready);
        h[5..9].copy_from_slice(&(1u32 << 30).to_be_bytes());
        h
    })
    .await;
    assert!(
        matches!(r, Err(ExecutionError::Connection(ConnectionError::Decode(DecodeError::TooLarge { .. })))),
        "{r:?}"
    );
    assert_closed(&conn).await;
}

#[tokio::test]
async fn truncated_frame_then_eof_fails_the_request() {
    let addr = {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("addr");
        tokio::spawn(async move {
            let (mut socket, _) = listener.accept().await.expect("accept");
            let s = read_request(&mut socket).await.expect("OPTIONS");
            socket.write_all(&response(s, ResponseMessage::Supported(vec![]))).await.expect("write");
            let s = read_request(&mut socket).await.expect("STARTUP");
            socket.write_all(&response(s, ResponseMessage::Ready)).await.expect("write");
            let s = read_request(&mut socket).await.expect("request");
            let full = response(s, ResponseMessage::Result(ResultMessage::SetKeyspace("ks".into())));
            socket.write_all(&full[..full.len() - 3]).await.expect("write");
            // Close mid-frame.
        });
        addr
    };
    let conn = Connection::open(addr, &config()).await.expect("handshake");
    let err = conn.send(&shardwise::protocol::request::Options, 0).await.expect_err("truncated");
    assert!(matches!(err, ExecutionError::Connection(ConnectionError::Closed | ConnectionError::Io(_))), "{err:?}");
    assert_closed(&conn).await;
}

#[tokio::test]
async fn response_for_an_unknown_stream_is_a_protocol_error() {
    let (conn, r) = first_request(|s| response(s.wrapping_add(77), ResponseMessage::Result(ResultMessage::Void))).await;
    assert!(matches!(r, Err(ExecutionError::Connection(ConnectionError::Protocol(_)))), "{r:?}");
    assert_closed(&conn).await;
}

#[tokio::test]
async fn malformed_body_is_a_decode_error_and_the_connection_survives() {
    let (conn, r) = first_request(|s| {
        let mut out = response(s, ResponseMessage::Result(ResultMessage::Void));
        let n = out.len();
        out[n - 1] = 99; // result kind 99
        out
    })
    .await;
    assert!(matches!(r, Err(ExecutionError::Decode(DecodeError::UnknownCode { .. }))), "{r:?}");
    assert!(!conn.is_closed(), "a bad body is the request's problem, not the connection's");
}

#[tokio::test]
async fn handshake_errors_are_typed() {
    // A server that answers OPTIONS with garbage.
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr");
    tokio::spawn(async move {
        let (mut socket, _) = listener.accept().await.expect("accept");
        let _ = read_request(&mut socket).await;
        let _ = socket.write_all(&[0x84, 0, 0, 0, 0x06, 0, 0, 0, 3, 0xff, 0xff, 0xff]).await;
        tokio::time::sleep(Duration::from_secs(5)).await;
    });
    let err = Connection::open(addr, &config()).await.expect_err("garbage SUPPORTED");
    assert!(matches!(err, ConnectionError::Decode(_)), "{err:?}");
}

/// A server that forgot a prepared statement answers UNPREPARED; the driver
/// prepares it again on that connection and retries, transparently.
#[tokio::test]
async fn unprepared_is_answered_by_re_preparing() {
    use shardwise::protocol::response::{code, ErrorKind, ErrorResponse, Prepared};
    use shardwise::protocol::rows::{PreparedMetadata, ResultMetadata};

    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr");
    let id = bytes::Bytes::from_static(b"statement-id-001");
    let prepared = {
        let id = id.clone();
        move || {
            ResponseMessage::Result(ResultMessage::Prepared(Box::new(Prepared {
                id: id.clone(),
                result_metadata_id: None,
                metadata: PreparedMetadata::default(),
                result_metadata: ResultMetadata::default(),
            })))
        }
    };
    let server = tokio::spawn(async move {
        let (mut socket, _) = listener.accept().await.expect("accept");
        let s = read_request(&mut socket).await.expect("OPTIONS");
        socket.write_all(&response(s, ResponseMessage::Supported(vec![]))).await.expect("write");
        let s = read_request(&mut socket).await.expect("STARTUP");
        socket.write_all(&response(s, ResponseMessage::Ready)).await.expect("write");
        let s = read_request(&mut socket).await.expect("PREPARE");
        socket.write_all(&response(s, prepared())).await.expect("write");
        // First EXECUTE: "I do not know this statement".
        let s = read_request(&mut socket).await.expect("EXECUTE");
        let unprepared = ErrorResponse {
            code: code::UNPREPARED,
            message: "unknown".into(),
            kind: ErrorKind::Unprepared { id: id.to_vec() },
        };
        socket.write_all(&response(s, ResponseMessage::Error(unprepared))).await.expect("write");
        // The driver prepares again, then retries the EXECUTE.
        let s = read_request(&mut socket).await.expect("re-PREPARE");
        socket.write_all(&response(s, prepared())).await.expect("write");
        let s = read_request(&mut socket).await.expect("EXECUTE again");
        socket.write_all(&response(s, ResponseMessage::Result(ResultMessage::Void))).await.expect("write");
        tokio::time::sleep(Duration::from_secs(2)).await;
    });
    let conn = Connection::open(addr, &config()).await.expect("handshake");
    let statement = conn.prepare("INSERT INTO ks.t (a) VALUES (1)").await.expect("prepare");
    let result = conn
        .execute(&statement, &(), shardwise::execute::Params::new(Default::default()))
        .await
        .expect("executed after re-preparing");
    assert!(matches!(result.message(), ResultMessage::Void));
    server.abort();
}

/// A connection that goes silent (TCP up, nothing answered) after one
/// request was abandoned: the heartbeat used to be skipped while anything
/// was in flight, orphans included, so the connection was never pinged
/// again and never closed. It must be closed within the heartbeat interval
/// plus its timeout.
#[tokio::test]
async fn silent_connection_with_an_orphan_is_closed_by_the_heartbeat() {
    let addr = fake(|_| Vec::new()).await;
    let interval = Duration::from_millis(300);
    let config = ConnectionConfig { heartbeat_interval: Some(interval), heartbeat_timeout: interval, ..config() };
    let conn = Connection::open(addr, &config).await.expect("handshake with the fake");
    let q = shardwise::protocol::request::Query {
        query: "SELECT 1",
        params: shardwise::protocol::request::QueryParameters::new(Default::default(), ()),
    };
    let abandoned = tokio::time::timeout(Duration::from_millis(50), conn.send(&q, 0)).await;
    assert!(abandoned.is_err(), "the fake never answers");
    assert_eq!(conn.orphans(), 1);
    let started = std::time::Instant::now();
    // Two intervals plus slack for a loaded machine.
    tokio::time::timeout(Duration::from_secs(3), conn.closed()).await.expect("closed by the heartbeat");
    assert!(matches!(conn.close_reason(), Some(ConnectionError::HeartbeatTimeout)), "{:?}", conn.close_reason());
    assert_eq!(conn.orphans(), 0, "orphans freed on close");
    eprintln!("silent connection closed after {:?}", started.elapsed());
}
