//! The front's own connection to Cassandra, for what it does by itself:
//! reading the ring, creating its stand-in tables, writing generations,
//! creating CDC log tables. One request at a time (these are rare), v4,
//! statements as text with literals (no bind values needed), reconnecting
//! after an I/O error.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use shardwise_protocol::consistency::Consistency;
use shardwise_protocol::frame::{FrameDecoder, ProtocolVersion};
use shardwise_protocol::request::{encode_request, AuthResponse, Query, QueryParameters, Request, Startup};
use shardwise_protocol::response::{Response, ResponseMessage, ResultMessage};
use shardwise_protocol::types::de::Row;
use shardwise_protocol::types::CqlValue;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::Mutex;

use super::EmuError;

/// A handshaken connection (STARTUP and authentication done).
pub(crate) struct Conn {
    pub(crate) stream: TcpStream,
    pub(crate) decoder: FrameDecoder,
}

impl Conn {
    pub(crate) async fn connect(addr: SocketAddr, credentials: Option<&(String, String)>) -> Result<Conn, EmuError> {
        let stream = TcpStream::connect(addr).await.map_err(|e| EmuError::io(format!("connecting to {addr}"), e))?;
        let _ = stream.set_nodelay(true);
        let mut conn = Conn { stream, decoder: FrameDecoder::new() };
        let startup = Startup { options: vec![("CQL_VERSION", "3.0.0")] };
        match conn.roundtrip(&startup).await?.message {
            ResponseMessage::Ready => Ok(conn),
            ResponseMessage::Authenticate(_) => {
                let (user, pass) = credentials.ok_or_else(|| {
                    EmuError::Config(format!("{addr} requires authentication; set FrontConfig::credentials"))
                })?;
                let mut token = vec![0u8];
                token.extend_from_slice(user.as_bytes());
                token.push(0);
                token.extend_from_slice(pass.as_bytes());
                match conn.roundtrip(&AuthResponse { token: Some(&token) }).await?.message {
                    ResponseMessage::AuthSuccess(_) => Ok(conn),
                    ResponseMessage::Error(e) => Err(EmuError::Server { code: e.code, message: e.message }),
                    other => Err(EmuError::Protocol(format!("unexpected answer to AUTH_RESPONSE: {other:?}"))),
                }
            }
            ResponseMessage::Error(e) => Err(EmuError::Server { code: e.code, message: e.message }),
            other => Err(EmuError::Protocol(format!("unexpected answer to STARTUP: {other:?}"))),
        }
    }

    pub(crate) async fn roundtrip<R: Request>(&mut self, request: &R) -> Result<Response, EmuError> {
        let mut buf = Vec::new();
        encode_request(request, ProtocolVersion::V4, 0, 0, &mut buf)
            .map_err(|e| EmuError::Protocol(format!("encoding a request: {e}")))?;
        self.stream.write_all(&buf).await.map_err(|e| EmuError::io("writing to Cassandra", e))?;
        loop {
            match self.decoder.next_envelope() {
                Ok(Some(env)) if env.header.stream == 0 => {
                    return Response::from_envelope(env)
                        .map_err(|e| EmuError::Protocol(format!("decoding an answer: {e}")));
                }
                Ok(Some(_)) => continue,
                Ok(None) => {}
                Err(e) => return Err(EmuError::Protocol(format!("decoding an answer: {e}"))),
            }
            let input = self.decoder.input_mut();
            input.reserve(64 * 1024);
            let n = self.stream.read_buf(input).await.map_err(|e| EmuError::io("reading from Cassandra", e))?;
            if n == 0 {
                return Err(EmuError::Protocol("Cassandra closed the connection".into()));
            }
        }
    }
}

/// A serialized connection with reconnect.
pub(crate) struct Admin {
    addr: SocketAddr,
    credentials: Option<(String, String)>,
    conn: Mutex<Option<Conn>>,
    /// ONE for a single node, QUORUM otherwise (Scylla's `quorum_if_many`).
    pub(crate) consistency: std::sync::Mutex<Consistency>,
}

impl Admin {
    pub(crate) fn new(addr: SocketAddr, credentials: Option<(String, String)>) -> Admin {
        Admin { addr, credentials, conn: Mutex::new(None), consistency: std::sync::Mutex::new(Consistency::One) }
    }

    fn consistency(&self) -> Consistency {
        self.consistency.lock().map(|c| *c).unwrap_or(Consistency::One)
    }

    /// Runs one statement; server errors come back as [`EmuError::Server`].
    pub(crate) async fn query(&self, cql: &str) -> Result<ResultMessage, EmuError> {
        let mut guard = self.conn.lock().await;
        for attempt in 0..2 {
            if guard.is_none() {
                *guard = Some(Conn::connect(self.addr, self.credentials.as_ref()).await?);
            }
            let Some(conn) = guard.as_mut() else { continue };
            let q = Query { query: cql, params: QueryParameters::new(self.consistency(), ()) };
            match conn.roundtrip(&q).await {
                Ok(r) => {
                    return match r.message {
                        ResponseMessage::Result(res) => Ok(res),
                        ResponseMessage::Error(e) => Err(EmuError::Server { code: e.code, message: e.message }),
                        other => Err(EmuError::Protocol(format!("unexpected answer to QUERY: {other:?}"))),
                    }
                }
                Err(e) if attempt == 0 => {
                    *guard = None;
                    let _ = e;
                }
                Err(e) => return Err(e),
            }
        }
        Err(EmuError::Protocol("no connection".into()))
    }

    /// Runs a SELECT and returns its rows (one page: callers keep results small).
    pub(crate) async fn rows(&self, cql: &str) -> Result<Vec<Vec<Option<CqlValue>>>, EmuError> {
        match self.query(cql).await? {
            ResultMessage::Rows(rows) => {
                let typed = rows.rows::<Row>().map_err(|e| EmuError::Protocol(format!("rows of {cql}: {e}")))?;
                let mut out = Vec::new();
                for row in typed {
                    out.push(row.map_err(|e| EmuError::Protocol(format!("rows of {cql}: {e}")))?.into_columns());
                }
                Ok(out)
            }
            other => Err(EmuError::Protocol(format!("{cql} returned {other:?}"))),
        }
    }

    /// Waits until every node reports the same schema version (after DDL).
    pub(crate) async fn wait_schema_agreement(&self, timeout: Duration) -> Result<(), EmuError> {
        let deadline = Instant::now() + timeout;
        loop {
            let local = self.rows("SELECT schema_version FROM system.local WHERE key = 'local'").await?;
            let peers = self.rows("SELECT schema_version FROM system.peers").await?;
            let mut versions: Vec<Option<uuid::Uuid>> = local
                .iter()
                .chain(peers.iter())
                .map(|r| r.first().cloned().flatten().and_then(|v| v.as_uuid()))
                .collect();
            versions.sort();
            versions.dedup();
            if versions.len() <= 1 || Instant::now() >= deadline {
                return Ok(());
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
}

/// A CQL string literal.
pub(crate) fn lit(s: &str) -> String {
    format!("'{}'", s.replace('\'', "''"))
}

/// A CQL blob literal.
pub(crate) fn blob(b: &[u8]) -> String {
    let mut s = String::with_capacity(2 + 2 * b.len());
    s.push_str("0x");
    for x in b {
        s.push_str(&format!("{x:02x}"));
    }
    s
}

pub(crate) fn text(v: &Option<CqlValue>) -> Option<String> {
    v.as_ref().and_then(|v| v.as_str().map(str::to_owned))
}
