//! A blocking one-connection CQL client on the protocol crate's encoder and
//! decoder: readiness checks, topology checks, and tests that must put exact
//! requests on the wire (pipelined streams, hand-built EXECUTEs, custom
//! payloads read back whole).
//!
//! It is deliberately not the driver (testkit must not depend on it, and a
//! harness that asks the code under test whether the server is up would hide
//! the driver's bugs). Frames are encoded by `shardwise_protocol::request` and
//! decoded by its `FrameDecoder` and `Response`, so no opcode or header byte is
//! written by hand here: what the client sends is what the protocol crate's own
//! tests pin down. Protocol v4, no compression, one request at a time unless the
//! caller pipelines with [`RawConnection::send`] and [`RawConnection::responses`].

use std::collections::HashMap;
use std::io::{Read, Write};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, TcpStream};
use std::time::Duration;

use shardwise_protocol::codec::Reader;
use shardwise_protocol::consistency::Consistency;
use shardwise_protocol::frame::{FrameDecoder, ProtocolVersion};
use shardwise_protocol::request::{encode_request, AuthResponse, Options, Query, QueryParameters, Request, Startup};
use shardwise_protocol::response::{Response, ResponseMessage, ResultMessage, SchemaChange};
use shardwise_protocol::types::ser::RawValues;
use shardwise_protocol::types::ColumnSpec;

use crate::error::{HarnessError, Result};

/// One blocking connection speaking protocol v4.
#[derive(Debug)]
pub struct RawConnection {
    stream: TcpStream,
    addr: SocketAddr,
    decoder: FrameDecoder,
    next_stream: i16,
}

fn proto(addr: SocketAddr, message: impl Into<String>) -> HarnessError {
    HarnessError::Protocol { addr, message: message.into() }
}

impl RawConnection {
    /// Connects, with `timeout` for the connect and for every read and write.
    pub fn connect(addr: SocketAddr, timeout: Duration) -> Result<RawConnection> {
        let stream = TcpStream::connect_timeout(&addr, timeout)
            .map_err(|e| HarnessError::io(format!("connecting to {addr}"), e))?;
        stream
            .set_read_timeout(Some(timeout))
            .and_then(|()| stream.set_write_timeout(Some(timeout)))
            .and_then(|()| stream.set_nodelay(true))
            .map_err(|e| HarnessError::io(format!("configuring the socket to {addr}"), e))?;
        Ok(RawConnection { stream, addr, decoder: FrameDecoder::new(), next_stream: 1 })
    }

    /// The server's address.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Writes `request` on `stream` without waiting for its answer (requests
    /// sent this way are pipelined: the server sees the next before the first
    /// is answered). Collect the answers with [`RawConnection::responses`].
    pub fn send<R: Request>(&mut self, request: &R, stream: i16) -> Result<()> {
        let mut buf = Vec::new();
        encode_request(request, ProtocolVersion::V4, stream, 0, &mut buf)
            .map_err(|e| proto(self.addr, format!("encoding a request: {e}")))?;
        self.stream.write_all(&buf).map_err(|e| HarnessError::io(format!("sending to {}", self.addr), e))
    }

    /// The answers on `streams`, whole (warnings, custom payload), in whatever
    /// order they come. An answer on any other stream is an error.
    pub fn responses(&mut self, streams: &[i16]) -> Result<HashMap<i16, Response>> {
        let mut got = HashMap::new();
        while got.len() < streams.len() {
            let envelope = self.decoder.next_envelope().map_err(|e| proto(self.addr, e.to_string()))?;
            if let Some(envelope) = envelope {
                let stream = envelope.header.stream;
                if !streams.contains(&stream) {
                    return Err(proto(self.addr, format!("an answer on stream {stream}, expected {streams:?}")));
                }
                let response = Response::from_envelope(envelope).map_err(|e| proto(self.addr, e.to_string()))?;
                got.insert(stream, response);
                continue;
            }
            let mut chunk = [0u8; 65536];
            let n =
                self.stream.read(&mut chunk).map_err(|e| HarnessError::io(format!("reading from {}", self.addr), e))?;
            if n == 0 {
                return Err(proto(self.addr, "the server closed the connection"));
            }
            self.decoder.feed(&chunk[..n]);
        }
        Ok(got)
    }

    /// [`RawConnection::responses`], messages only.
    pub fn answers(&mut self, streams: &[i16]) -> Result<HashMap<i16, ResponseMessage>> {
        Ok(self.responses(streams)?.into_iter().map(|(s, r)| (s, r.message)).collect())
    }

    /// One request on the next stream id, its whole answer. An ERROR answer
    /// is an answer here (tests look at it), not an `Err`.
    pub fn response<R: Request>(&mut self, request: &R) -> Result<Response> {
        let stream = self.next_stream;
        self.next_stream = if stream == i16::MAX { 1 } else { stream + 1 };
        self.send(request, stream)?;
        self.responses(&[stream])?
            .remove(&stream)
            .ok_or_else(|| proto(self.addr, format!("no answer on stream {stream}")))
    }

    /// One request, its answer's message.
    pub fn request<R: Request>(&mut self, request: &R) -> Result<ResponseMessage> {
        Ok(self.response(request)?.message)
    }

    /// One request whose ERROR answer is an `Err` ([`HarnessError::Server`]).
    fn call<R: Request>(&mut self, request: &R) -> Result<ResponseMessage> {
        match self.request(request)? {
            ResponseMessage::Error(e) => {
                Err(HarnessError::Server { addr: self.addr, code: e.code, message: e.message })
            }
            other => Ok(other),
        }
    }

    /// OPTIONS → the SUPPORTED string multimap.
    pub fn options(&mut self) -> Result<Vec<(String, Vec<String>)>> {
        match self.call(&Options)? {
            ResponseMessage::Supported(options) => Ok(options),
            other => Err(proto(self.addr, format!("OPTIONS answered with {:?}", other.opcode()))),
        }
    }

    /// STARTUP with `CQL_VERSION` 3.0.0, answering an AUTHENTICATE challenge
    /// with `credentials` (PLAIN: `\0user\0password`).
    pub fn startup(&mut self, credentials: Option<(&str, &str)>) -> Result<()> {
        match self.call(&Startup { options: vec![("CQL_VERSION", "3.0.0")] })? {
            ResponseMessage::Ready => Ok(()),
            ResponseMessage::Authenticate(_) => {
                let (user, pass) = credentials.ok_or_else(|| {
                    proto(self.addr, "the server requires authentication and no credentials were given")
                })?;
                let mut token = vec![0u8];
                token.extend_from_slice(user.as_bytes());
                token.push(0);
                token.extend_from_slice(pass.as_bytes());
                match self.call(&AuthResponse { token: Some(&token) })? {
                    ResponseMessage::AuthSuccess(_) => Ok(()),
                    other => Err(proto(self.addr, format!("AUTH_RESPONSE answered with {:?}", other.opcode()))),
                }
            }
            other => Err(proto(self.addr, format!("STARTUP answered with {:?}", other.opcode()))),
        }
    }

    /// QUERY at consistency ONE, no values, no paging options; rows as raw cells.
    pub fn query(&mut self, cql: &str) -> Result<QueryResult> {
        let query = Query { query: cql, params: QueryParameters::new(Consistency::One, RawValues::default()) };
        match self.call(&query)? {
            ResponseMessage::Result(result) => QueryResult::from_message(result).map_err(|e| proto(self.addr, e)),
            other => Err(proto(self.addr, format!("QUERY answered with {:?}", other.opcode()))),
        }
    }
}

/// Connects, sends OPTIONS, returns SUPPORTED.
pub fn options(addr: SocketAddr, timeout: Duration) -> Result<Vec<(String, Vec<String>)>> {
    RawConnection::connect(addr, timeout)?.options()
}

/// Connects, starts up and runs `SELECT release_version FROM system.local`.
pub fn release_version(addr: SocketAddr, credentials: Option<(&str, &str)>, timeout: Duration) -> Result<String> {
    let mut c = RawConnection::connect(addr, timeout)?;
    c.startup(credentials)?;
    match c.query("SELECT release_version FROM system.local")? {
        QueryResult::Rows(rows) => {
            rows.text(0, "release_version").ok_or_else(|| proto(addr, "system.local has no release_version"))
        }
        other => Err(proto(addr, format!("unexpected result {other:?}"))),
    }
}

/// The result of a QUERY, rows copied out as raw cells.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum QueryResult {
    /// No result (DML).
    Void,
    /// Rows.
    Rows(Rows),
    /// `USE` succeeded.
    SetKeyspace(String),
    /// DDL succeeded.
    SchemaChange(SchemaChange),
    /// A PREPARED result (not asked for by [`RawConnection::query`]).
    Prepared,
}

impl QueryResult {
    /// Copies a decoded RESULT out; an error says which part of the rows is
    /// malformed.
    pub fn from_message(result: ResultMessage) -> std::result::Result<QueryResult, String> {
        Ok(match result {
            ResultMessage::Void => QueryResult::Void,
            ResultMessage::SetKeyspace(ks) => QueryResult::SetKeyspace(ks),
            ResultMessage::SchemaChange(change) => QueryResult::SchemaChange(change),
            ResultMessage::Prepared(_) => QueryResult::Prepared,
            ResultMessage::Rows(rows) => {
                let columns = rows.metadata.specs.clone().unwrap_or_default();
                let count = rows.metadata.columns_count;
                let mut r = Reader::new(rows.raw_rows());
                let mut cells = Vec::with_capacity(rows.rows_count());
                for _ in 0..rows.rows_count() {
                    let mut row = Vec::with_capacity(count);
                    for _ in 0..count {
                        row.push(r.bytes("cell").map_err(|e| e.to_string())?.map(<[u8]>::to_vec));
                    }
                    cells.push(row);
                }
                r.finish("rows").map_err(|e| e.to_string())?;
                QueryResult::Rows(Rows { columns, rows: cells })
            }
        })
    }
}

/// A rows result as raw cells, `None` for null.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Rows {
    /// The columns (empty when the server sent no metadata).
    pub columns: Vec<ColumnSpec>,
    /// The rows, each with one cell per column.
    pub rows: Vec<Vec<Option<Vec<u8>>>>,
}

impl Rows {
    /// The index of a column.
    pub fn column(&self, name: &str) -> Option<usize> {
        self.columns.iter().position(|c| c.name == name)
    }

    fn cell(&self, row: usize, column: &str) -> Option<&[u8]> {
        let c = self.column(column)?;
        self.rows.get(row)?.get(c)?.as_deref()
    }

    /// A cell as text (for varchar/ascii columns).
    pub fn text(&self, row: usize, column: &str) -> Option<String> {
        Some(String::from_utf8_lossy(self.cell(row, column)?).into_owned())
    }

    /// A cell as an IP address (for inet columns).
    pub fn inet(&self, row: usize, column: &str) -> Option<IpAddr> {
        let cell = self.cell(row, column)?;
        if let Ok(b) = <[u8; 4]>::try_from(cell) {
            Some(IpAddr::V4(Ipv4Addr::from(b)))
        } else {
            <[u8; 16]>::try_from(cell).ok().map(|b| IpAddr::V6(Ipv6Addr::from(b)))
        }
    }
}

#[cfg(test)]
mod tests {
    use std::net::TcpListener;
    use std::thread;

    use shardwise_protocol::frame::Opcode;
    use shardwise_protocol::response::ErrorResponse;
    use shardwise_protocol::rows::{ResultMetadata, Rows as ProtocolRows};
    use shardwise_protocol::types::ColumnType;

    use super::*;

    /// A server that reads one request per answer in `answers` and replies to
    /// each on its stream (or on `stream_override`), returning the opcodes seen.
    fn server(answers: Vec<Response>, stream_override: Option<i16>) -> (SocketAddr, thread::JoinHandle<Vec<u8>>) {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let handle = thread::spawn(move || {
            let (mut s, _) = listener.accept().unwrap();
            let mut seen = Vec::new();
            for answer in answers {
                let mut header = [0u8; 9];
                s.read_exact(&mut header).unwrap();
                assert_eq!(header[0], 0x04, "a v4 request");
                let len = u32::from_be_bytes([header[5], header[6], header[7], header[8]]) as usize;
                let mut body = vec![0u8; len];
                s.read_exact(&mut body).unwrap();
                seen.push(header[4]);
                let stream = stream_override.unwrap_or(i16::from_be_bytes([header[2], header[3]]));
                let mut out = Vec::new();
                answer.encode(ProtocolVersion::V4, stream, &mut out).unwrap();
                s.write_all(&out).unwrap();
            }
            seen
        });
        (addr, handle)
    }

    fn spec(name: &str, typ: ColumnType) -> ColumnSpec {
        ColumnSpec { keyspace: "system".into(), table: "local".into(), name: name.into(), typ }
    }

    #[test]
    fn startup_and_query_rows() {
        let metadata = ResultMetadata {
            columns_count: 2,
            paging_state: None,
            new_metadata_id: None,
            specs: Some(vec![spec("release_version", ColumnType::Text), spec("peer", ColumnType::Inet)]),
        };
        let rows = ProtocolRows::from_raw(metadata, &[vec![Some(b"5.0.4".as_slice()), Some(&[127, 0, 0, 2])]]).unwrap();
        let answers = vec![
            Response::new(ResponseMessage::Ready),
            Response::new(ResponseMessage::Result(ResultMessage::Rows(rows))),
        ];
        let (addr, handle) = server(answers, None);
        let mut c = RawConnection::connect(addr, Duration::from_secs(5)).unwrap();
        c.startup(None).unwrap();
        let QueryResult::Rows(rows) = c.query("SELECT release_version, peer FROM system.local").unwrap() else {
            panic!("rows expected")
        };
        assert_eq!(rows.text(0, "release_version").as_deref(), Some("5.0.4"));
        assert_eq!(rows.inet(0, "peer"), Some("127.0.0.2".parse().unwrap()));
        assert_eq!(rows.text(1, "peer"), None);
        assert_eq!(handle.join().unwrap(), vec![Opcode::Startup as u8, Opcode::Query as u8]);
    }

    #[test]
    fn inet_cells_of_both_families() {
        let rows = Rows {
            columns: vec![spec("peer", ColumnType::Inet)],
            rows: vec![vec![Some(vec![127, 0, 0, 2])], vec![Some([0; 16].to_vec())], vec![Some(vec![1, 2, 3])]],
        };
        assert_eq!(rows.inet(0, "peer"), Some("127.0.0.2".parse().unwrap()));
        assert_eq!(rows.inet(1, "peer"), Some("::".parse().unwrap()));
        assert_eq!(rows.inet(2, "peer"), None);
        assert_eq!(rows.inet(0, "nope"), None);
    }

    #[test]
    fn authentication_answers_with_plain_credentials() {
        let answers = vec![
            Response::new(ResponseMessage::Authenticate("PasswordAuthenticator".into())),
            Response::new(ResponseMessage::AuthSuccess(None)),
        ];
        let (addr, handle) = server(answers, None);
        let mut c = RawConnection::connect(addr, Duration::from_secs(5)).unwrap();
        c.startup(Some(("cassandra", "cassandra"))).unwrap();
        assert_eq!(handle.join().unwrap(), vec![Opcode::Startup as u8, Opcode::AuthResponse as u8]);

        let (addr, _server) = server(vec![Response::new(ResponseMessage::Authenticate("x".into()))], None);
        let mut c = RawConnection::connect(addr, Duration::from_secs(5)).unwrap();
        assert!(matches!(c.startup(None), Err(HarnessError::Protocol { .. })));
    }

    #[test]
    fn server_errors_are_typed_and_answers_kept_raw() {
        let error = || {
            Response::new(ResponseMessage::Error(ErrorResponse {
                code: 0x2200,
                message: "bad".into(),
                kind: shardwise_protocol::response::ErrorKind::Invalid,
            }))
        };
        let (addr, _server) = server(vec![error(), error()], None);
        let mut c = RawConnection::connect(addr, Duration::from_secs(5)).unwrap();
        assert!(matches!(c.query("SELECT"), Err(HarnessError::Server { code: 0x2200, .. })));
        assert!(matches!(c.request(&Options), Ok(ResponseMessage::Error(_))));
    }

    #[test]
    fn an_answer_on_another_stream_is_an_error() {
        let (addr, _server) = server(vec![Response::new(ResponseMessage::Ready)], Some(99));
        let mut c = RawConnection::connect(addr, Duration::from_secs(5)).unwrap();
        assert!(matches!(c.request(&Options), Err(HarnessError::Protocol { .. })));
    }

    #[test]
    fn a_closed_connection_is_an_error() {
        let (addr, _server) = server(Vec::new(), None);
        let mut c = RawConnection::connect(addr, Duration::from_secs(5)).unwrap();
        let err = c.options().unwrap_err();
        assert!(matches!(err, HarnessError::Protocol { .. } | HarnessError::Io { .. }), "{err}");
    }
}
