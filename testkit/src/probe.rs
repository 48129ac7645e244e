//! A tiny blocking CQL v4 client over `std::net::TcpStream`, for the harness
//! itself: readiness checks, `xtask demo`, and checks in topology tests.
//!
//! It is deliberately not the driver (testkit must not depend on it, and a
//! harness that uses the code under test to decide whether the server is up
//! would hide the driver's bugs). It speaks just enough of protocol v4 —
//! OPTIONS, STARTUP, password AUTH_RESPONSE, QUERY at consistency ONE with
//! rows decoded to raw cells — one request at a time, and decodes with the
//! bounds-checked `shardwise_protocol::codec::Reader`.

use std::io::{Read, Write};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, TcpStream};
use std::time::Duration;

use shardwise_protocol::codec::Reader;

use crate::error::{HarnessError, Result};

/// An OPTIONS request in protocol v4: version 4, no flags, stream 0,
/// opcode 0x05, empty body.
pub const OPTIONS_V4: [u8; 9] = [0x04, 0x00, 0x00, 0x00, 0x05, 0x00, 0x00, 0x00, 0x00];

/// Opcodes used here.
pub mod opcode {
    /// ERROR.
    pub const ERROR: u8 = 0x00;
    /// STARTUP.
    pub const STARTUP: u8 = 0x01;
    /// READY.
    pub const READY: u8 = 0x02;
    /// AUTHENTICATE.
    pub const AUTHENTICATE: u8 = 0x03;
    /// OPTIONS.
    pub const OPTIONS: u8 = 0x05;
    /// SUPPORTED.
    pub const SUPPORTED: u8 = 0x06;
    /// QUERY.
    pub const QUERY: u8 = 0x07;
    /// RESULT.
    pub const RESULT: u8 = 0x08;
    /// AUTH_RESPONSE.
    pub const AUTH_RESPONSE: u8 = 0x0F;
    /// AUTH_SUCCESS.
    pub const AUTH_SUCCESS: u8 = 0x10;
}

/// The largest response body accepted (the protocol's own limit is 256 MiB).
const MAX_BODY: usize = 256 * 1024 * 1024;

/// A response frame.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Frame {
    /// The version byte (0x84 for a v4 response).
    pub version: u8,
    /// The header flags.
    pub flags: u8,
    /// The stream id.
    pub stream: i16,
    /// The opcode.
    pub opcode: u8,
    /// The body, after the tracing id, custom payload and warnings the flags
    /// announce have been stripped.
    pub body: Vec<u8>,
    /// Warnings the server attached.
    pub warnings: Vec<String>,
}

/// One column of a rows result.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Column {
    /// The column name.
    pub name: String,
    /// The type id of its `[option]` (0x000D varchar, 0x0010 inet, ...).
    pub type_id: u16,
}

/// A decoded rows result: raw cells, `None` for null.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Rows {
    /// The columns.
    pub columns: Vec<Column>,
    /// The rows, each with one cell per column.
    pub rows: Vec<Vec<Option<Vec<u8>>>>,
}

impl Rows {
    /// The index of a column.
    pub fn column(&self, name: &str) -> Option<usize> {
        self.columns.iter().position(|c| c.name == name)
    }

    /// A cell as text (for varchar/ascii columns).
    pub fn text(&self, row: usize, column: &str) -> Option<String> {
        let c = self.column(column)?;
        let cell = self.rows.get(row)?.get(c)?.as_ref()?;
        Some(String::from_utf8_lossy(cell).into_owned())
    }

    /// A cell as an IP address (for inet columns).
    pub fn inet(&self, row: usize, column: &str) -> Option<IpAddr> {
        let c = self.column(column)?;
        let cell = self.rows.get(row)?.get(c)?.as_ref()?;
        match cell.len() {
            4 => <[u8; 4]>::try_from(cell.as_slice()).ok().map(|b| IpAddr::V4(Ipv4Addr::from(b))),
            16 => <[u8; 16]>::try_from(cell.as_slice()).ok().map(|b| IpAddr::V6(Ipv6Addr::from(b))),
            _ => None,
        }
    }
}

/// The result of a QUERY.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum QueryResult {
    /// No result (DML).
    Void,
    /// Rows.
    Rows(Rows),
    /// `USE` succeeded.
    SetKeyspace(String),
    /// DDL succeeded: change type, target, keyspace.
    SchemaChange(String, String, String),
    /// Any other result kind.
    Other(i32),
}

/// One blocking connection, one request at a time.
#[derive(Debug)]
pub struct ProbeConnection {
    stream: TcpStream,
    addr: SocketAddr,
    next_stream: i16,
}

fn proto(addr: SocketAddr, message: impl Into<String>) -> HarnessError {
    HarnessError::Protocol { addr, message: message.into() }
}

impl ProbeConnection {
    /// Connects, with `timeout` for the connect and for every read and write.
    pub fn connect(addr: SocketAddr, timeout: Duration) -> Result<ProbeConnection> {
        let stream = TcpStream::connect_timeout(&addr, timeout)
            .map_err(|e| HarnessError::io(format!("connecting to {addr}"), e))?;
        stream
            .set_read_timeout(Some(timeout))
            .and_then(|()| stream.set_write_timeout(Some(timeout)))
            .and_then(|()| stream.set_nodelay(true))
            .map_err(|e| HarnessError::io(format!("configuring the socket to {addr}"), e))?;
        Ok(ProbeConnection { stream, addr, next_stream: 1 })
    }

    /// The server's address.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Sends one request and reads its response.
    pub fn request(&mut self, op: u8, body: &[u8]) -> Result<Frame> {
        let stream = self.next_stream;
        self.next_stream = if stream == i16::MAX { 1 } else { stream + 1 };
        let len = u32::try_from(body.len()).map_err(|_| proto(self.addr, "request body too large"))?;
        let mut frame = Vec::with_capacity(9 + body.len());
        frame.push(0x04);
        frame.push(0x00);
        frame.extend_from_slice(&stream.to_be_bytes());
        frame.push(op);
        frame.extend_from_slice(&len.to_be_bytes());
        frame.extend_from_slice(body);
        self.stream.write_all(&frame).map_err(|e| HarnessError::io(format!("sending to {}", self.addr), e))?;
        let response = self.read_frame()?;
        if response.stream != stream {
            return Err(proto(
                self.addr,
                format!("response on stream {} to a request on stream {stream}", response.stream),
            ));
        }
        if response.opcode == opcode::ERROR {
            let mut r = Reader::new(&response.body);
            let code = r.i32("error code").map_err(|e| proto(self.addr, e.to_string()))?;
            let message = r.string("error message").map_err(|e| proto(self.addr, e.to_string()))?;
            return Err(HarnessError::Server { addr: self.addr, code, message: message.to_string() });
        }
        Ok(response)
    }

    fn read_frame(&mut self) -> Result<Frame> {
        let mut header = [0u8; 9];
        self.stream
            .read_exact(&mut header)
            .map_err(|e| HarnessError::io(format!("reading a frame header from {}", self.addr), e))?;
        let [version, flags, s0, s1, op, l0, l1, l2, l3] = header;
        if version & 0x80 == 0 {
            return Err(proto(self.addr, format!("version byte {version:#04x} is not a response")));
        }
        let len = u32::from_be_bytes([l0, l1, l2, l3]) as usize;
        if len > MAX_BODY {
            return Err(proto(self.addr, format!("body length {len} over the limit")));
        }
        let mut raw = vec![0u8; len];
        self.stream
            .read_exact(&mut raw)
            .map_err(|e| HarnessError::io(format!("reading a {len}-byte body from {}", self.addr), e))?;
        if flags & 0x01 != 0 {
            return Err(proto(self.addr, "compressed response to an uncompressed connection"));
        }
        let mut r = Reader::new(&raw);
        let strip = |r: &mut Reader<'_>| -> std::result::Result<Vec<String>, shardwise_protocol::DecodeError> {
            if flags & 0x02 != 0 {
                r.take(16, "tracing id")?;
            }
            let mut warnings = Vec::new();
            if flags & 0x08 != 0 {
                warnings = r.string_list("warnings")?.into_iter().map(String::from).collect();
            }
            if flags & 0x04 != 0 {
                r.bytes_map("custom payload")?;
            }
            Ok(warnings)
        };
        let warnings = strip(&mut r).map_err(|e| proto(self.addr, e.to_string()))?;
        Ok(Frame {
            version,
            flags,
            stream: i16::from_be_bytes([s0, s1]),
            opcode: op,
            body: r.rest().to_vec(),
            warnings,
        })
    }

    /// OPTIONS → the SUPPORTED string multimap.
    pub fn options(&mut self) -> Result<Vec<(String, Vec<String>)>> {
        let f = self.request(opcode::OPTIONS, &[])?;
        if f.opcode != opcode::SUPPORTED {
            return Err(proto(self.addr, format!("OPTIONS answered with opcode {:#04x}", f.opcode)));
        }
        decode_supported(&f.body).map_err(|e| proto(self.addr, e))
    }

    /// STARTUP with `CQL_VERSION` 3.0.0, answering an AUTHENTICATE challenge
    /// with `credentials` (PLAIN: `\0user\0password`).
    pub fn startup(&mut self, credentials: Option<(&str, &str)>) -> Result<()> {
        let mut body = Vec::new();
        put_string_map(&mut body, &[("CQL_VERSION", "3.0.0")]);
        let f = self.request(opcode::STARTUP, &body)?;
        match f.opcode {
            opcode::READY => Ok(()),
            opcode::AUTHENTICATE => {
                let (user, pass) = credentials.ok_or_else(|| {
                    proto(self.addr, "the server requires authentication and no credentials were given")
                })?;
                let mut token = vec![0u8];
                token.extend_from_slice(user.as_bytes());
                token.push(0);
                token.extend_from_slice(pass.as_bytes());
                let mut body = Vec::with_capacity(4 + token.len());
                let n = i32::try_from(token.len()).map_err(|_| proto(self.addr, "credentials too long"))?;
                body.extend_from_slice(&n.to_be_bytes());
                body.extend_from_slice(&token);
                let f = self.request(opcode::AUTH_RESPONSE, &body)?;
                if f.opcode == opcode::AUTH_SUCCESS {
                    Ok(())
                } else {
                    Err(proto(self.addr, format!("AUTH_RESPONSE answered with opcode {:#04x}", f.opcode)))
                }
            }
            other => Err(proto(self.addr, format!("STARTUP answered with opcode {other:#04x}"))),
        }
    }

    /// QUERY at consistency ONE, no values, no paging options.
    pub fn query(&mut self, cql: &str) -> Result<QueryResult> {
        let n = i32::try_from(cql.len()).map_err(|_| proto(self.addr, "query too long"))?;
        let mut body = Vec::with_capacity(cql.len() + 7);
        body.extend_from_slice(&n.to_be_bytes());
        body.extend_from_slice(cql.as_bytes());
        body.extend_from_slice(&1u16.to_be_bytes()); // ONE
        body.push(0); // no flags
        let f = self.request(opcode::QUERY, &body)?;
        if f.opcode != opcode::RESULT {
            return Err(proto(self.addr, format!("QUERY answered with opcode {:#04x}", f.opcode)));
        }
        decode_result(&f.body).map_err(|e| proto(self.addr, e))
    }
}

/// Connects, sends OPTIONS, returns SUPPORTED.
pub fn options(addr: SocketAddr, timeout: Duration) -> Result<Vec<(String, Vec<String>)>> {
    ProbeConnection::connect(addr, timeout)?.options()
}

/// Connects, starts up and runs `SELECT release_version FROM system.local`.
pub fn release_version(addr: SocketAddr, credentials: Option<(&str, &str)>, timeout: Duration) -> Result<String> {
    let mut c = ProbeConnection::connect(addr, timeout)?;
    c.startup(credentials)?;
    match c.query("SELECT release_version FROM system.local")? {
        QueryResult::Rows(rows) => {
            rows.text(0, "release_version").ok_or_else(|| proto(addr, "system.local has no release_version"))
        }
        other => Err(proto(addr, format!("unexpected result {other:?}"))),
    }
}

fn put_string_map(out: &mut Vec<u8>, map: &[(&str, &str)]) {
    out.extend_from_slice(&(map.len() as u16).to_be_bytes());
    for (k, v) in map {
        for s in [k, v] {
            out.extend_from_slice(&(s.len() as u16).to_be_bytes());
            out.extend_from_slice(s.as_bytes());
        }
    }
}

/// Decodes a SUPPORTED body.
pub fn decode_supported(body: &[u8]) -> std::result::Result<Vec<(String, Vec<String>)>, String> {
    let mut r = Reader::new(body);
    let map = r.string_multimap("SUPPORTED").map_err(|e| e.to_string())?;
    r.finish("SUPPORTED").map_err(|e| e.to_string())?;
    Ok(map.into_iter().map(|(k, v)| (k.to_string(), v.into_iter().map(String::from).collect())).collect())
}

fn skip_type(r: &mut Reader<'_>, depth: u32) -> std::result::Result<u16, String> {
    if depth > 64 {
        return Err("type nesting too deep".into());
    }
    let e = |e: shardwise_protocol::DecodeError| e.to_string();
    let id = r.u16("type id").map_err(e)?;
    match id {
        0x0000 => {
            r.string("custom type").map_err(e)?;
        }
        0x0020 | 0x0022 => {
            skip_type(r, depth + 1)?;
        }
        0x0021 => {
            skip_type(r, depth + 1)?;
            skip_type(r, depth + 1)?;
        }
        0x0030 => {
            r.string("udt keyspace").map_err(e)?;
            r.string("udt name").map_err(e)?;
            let n = r.u16("udt field count").map_err(e)?;
            for _ in 0..n {
                r.string("udt field").map_err(e)?;
                skip_type(r, depth + 1)?;
            }
        }
        0x0031 => {
            let n = r.u16("tuple arity").map_err(e)?;
            for _ in 0..n {
                skip_type(r, depth + 1)?;
            }
        }
        _ => {}
    }
    Ok(id)
}

/// Decodes a RESULT body.
pub fn decode_result(body: &[u8]) -> std::result::Result<QueryResult, String> {
    let e = |e: shardwise_protocol::DecodeError| e.to_string();
    let mut r = Reader::new(body);
    match r.i32("result kind").map_err(e)? {
        1 => Ok(QueryResult::Void),
        2 => {
            let flags = r.i32("metadata flags").map_err(e)?;
            let count = r.len_i32("column count").map_err(e)?;
            if flags & 0x0002 != 0 {
                r.bytes("paging state").map_err(e)?;
            }
            let mut columns = Vec::new();
            if flags & 0x0004 == 0 {
                let global = flags & 0x0001 != 0;
                if global {
                    r.string("keyspace").map_err(e)?;
                    r.string("table").map_err(e)?;
                }
                for _ in 0..count {
                    if !global {
                        r.string("keyspace").map_err(e)?;
                        r.string("table").map_err(e)?;
                    }
                    let name = r.string("column name").map_err(e)?.to_string();
                    let type_id = skip_type(&mut r, 0)?;
                    columns.push(Column { name, type_id });
                }
            }
            let n = r.len_i32("row count").map_err(e)?;
            let mut rows = Vec::with_capacity(n.min(r.remaining() / 4 + 1));
            for _ in 0..n {
                let mut row = Vec::with_capacity(count.min(r.remaining() / 4 + 1));
                for _ in 0..count {
                    row.push(r.bytes("cell").map_err(e)?.map(<[u8]>::to_vec));
                }
                rows.push(row);
            }
            Ok(QueryResult::Rows(Rows { columns, rows }))
        }
        3 => Ok(QueryResult::SetKeyspace(r.string("keyspace").map_err(e)?.to_string())),
        5 => {
            let change = r.string("change type").map_err(e)?.to_string();
            let target = r.string("target").map_err(e)?.to_string();
            let keyspace = r.string("keyspace").map_err(e)?.to_string();
            Ok(QueryResult::SchemaChange(change, target, keyspace))
        }
        other => Ok(QueryResult::Other(other)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(out: &mut Vec<u8>, v: &str) {
        out.extend_from_slice(&(v.len() as u16).to_be_bytes());
        out.extend_from_slice(v.as_bytes());
    }

    #[test]
    fn supported_multimap() {
        let mut b = vec![0, 2];
        s(&mut b, "CQL_VERSION");
        b.extend_from_slice(&[0, 1]);
        s(&mut b, "3.4.7");
        s(&mut b, "COMPRESSION");
        b.extend_from_slice(&[0, 2]);
        s(&mut b, "snappy");
        s(&mut b, "lz4");
        let m = decode_supported(&b).unwrap();
        assert_eq!(m[0], ("CQL_VERSION".into(), vec!["3.4.7".into()]));
        assert_eq!(m[1].1, vec!["snappy".to_string(), "lz4".to_string()]);
        assert!(decode_supported(&b[..b.len() - 1]).is_err());
    }

    #[test]
    fn rows_with_global_spec_and_collection() {
        let mut b = Vec::new();
        b.extend_from_slice(&2i32.to_be_bytes());
        b.extend_from_slice(&1i32.to_be_bytes()); // global table spec
        b.extend_from_slice(&2i32.to_be_bytes());
        s(&mut b, "system");
        s(&mut b, "local");
        s(&mut b, "release_version");
        b.extend_from_slice(&0x000Du16.to_be_bytes());
        s(&mut b, "tokens");
        b.extend_from_slice(&0x0022u16.to_be_bytes());
        b.extend_from_slice(&0x000Du16.to_be_bytes());
        b.extend_from_slice(&1i32.to_be_bytes()); // one row
        b.extend_from_slice(&5i32.to_be_bytes());
        b.extend_from_slice(b"5.0.4");
        b.extend_from_slice(&(-1i32).to_be_bytes());
        let QueryResult::Rows(rows) = decode_result(&b).unwrap() else { panic!("not rows") };
        assert_eq!(rows.columns[1], Column { name: "tokens".into(), type_id: 0x22 });
        assert_eq!(rows.text(0, "release_version").as_deref(), Some("5.0.4"));
        assert_eq!(rows.rows[0][1], None);
        assert!(decode_result(&b[..b.len() - 2]).is_err());
    }

    #[test]
    fn inet_cells() {
        let rows = Rows {
            columns: vec![Column { name: "peer".into(), type_id: 0x10 }],
            rows: vec![vec![Some(vec![127, 0, 0, 2])]],
        };
        assert_eq!(rows.inet(0, "peer"), Some("127.0.0.2".parse().unwrap()));
    }
}
