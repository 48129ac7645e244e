//! The protocol crate on a real Cassandra 5.0, over a plain blocking
//! `TcpStream`: OPTIONS/SUPPORTED, STARTUP in v4 and v5 (with and without
//! LZ4), DDL, and a row holding every CQL type written with QUERY and with
//! a prepared EXECUTE, then read back with owned values and borrowed views.
//! This proves the codec against the server, not just against itself.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use shardwise_protocol::consistency::Consistency;
use shardwise_protocol::frame::compression::compress_body;
use shardwise_protocol::frame::segment::{encode_envelopes, SegmentCompression};
use shardwise_protocol::frame::{Flags, FrameDecoder, ProtocolVersion, HEADER_LEN};
use shardwise_protocol::request::{
    encode_request, Execute, Options, Prepare, Query, QueryParameters, Request, Startup,
};
use shardwise_protocol::response::{ErrorKind, Prepared, Response, ResponseMessage, ResultMessage};
use shardwise_protocol::rows::Rows;
use shardwise_protocol::types::de::{ListIter, Row};
use shardwise_protocol::types::ser::SerializeValues;
use shardwise_protocol::types::CqlValue;
use testkit::samples::{every_type_row, every_type_schema, EVERY_TYPE_COLUMNS as COLUMNS};

/// A deliberately tiny blocking client: one request at a time.
struct Client {
    socket: TcpStream,
    decoder: FrameDecoder,
    version: ProtocolVersion,
    lz4: bool,
    framed: bool,
    stream: i16,
}

impl Client {
    fn connect(version: ProtocolVersion, lz4: bool) -> (Client, Vec<(String, Vec<String>)>) {
        let addr = testkit::shared_node().expect("a running Cassandra");
        let socket = TcpStream::connect(addr).expect("connect");
        socket.set_read_timeout(Some(Duration::from_secs(30))).expect("timeout");
        socket.set_nodelay(true).expect("nodelay");
        let mut c = Client { socket, decoder: FrameDecoder::new(), version, lz4: false, framed: false, stream: 0 };
        let supported = match c.send(&Options).message {
            ResponseMessage::Supported(s) => s,
            other => panic!("OPTIONS answered {other:?}"),
        };
        let mut options = vec![("CQL_VERSION", "3.0.0"), ("DRIVER_NAME", "shardwise-testkit")];
        if lz4 {
            options.push(("COMPRESSION", "lz4"));
            // The server may already compress its answer to STARTUP (READY).
            c.decoder.set_v4_lz4(version == ProtocolVersion::V4);
        }
        match c.send(&Startup { options }).message {
            ResponseMessage::Ready => {}
            other => panic!("STARTUP answered {other:?}"),
        }
        // v5: everything after READY travels in segments; v4: bodies may be compressed.
        c.lz4 = lz4;
        if version == ProtocolVersion::V5 {
            c.framed = true;
            c.decoder.set_framed(if lz4 { SegmentCompression::Lz4 } else { SegmentCompression::None });
        }
        (c, supported)
    }

    fn send<R: Request>(&mut self, request: &R) -> Response {
        self.stream = (self.stream + 1) % 1000;
        let mut envelope = Vec::new();
        encode_request(request, self.version, self.stream, 0, &mut envelope).expect("encodes");
        let wire = if self.framed {
            let mut wire = Vec::new();
            let c = if self.lz4 { SegmentCompression::Lz4 } else { SegmentCompression::None };
            encode_envelopes(&envelope, c, &mut wire).expect("frames");
            wire
        } else if self.lz4 && !envelope[HEADER_LEN..].is_empty() {
            let mut compressed = envelope[..HEADER_LEN].to_vec();
            compress_body(&envelope[HEADER_LEN..], &mut compressed).expect("compresses");
            compressed[1] |= Flags::COMPRESSION;
            let len = (compressed.len() - HEADER_LEN) as u32;
            compressed[5..HEADER_LEN].copy_from_slice(&len.to_be_bytes());
            compressed
        } else {
            envelope
        };
        self.socket.write_all(&wire).expect("write");
        let mut buf = [0u8; 16 * 1024];
        loop {
            if let Some(env) = self.decoder.next_envelope().expect("well-formed response") {
                assert_eq!(env.header.stream, self.stream, "answers in order, one at a time");
                return Response::from_envelope(env).expect("decodable response");
            }
            let n = self.socket.read(&mut buf).expect("read");
            assert!(n > 0, "server closed the connection");
            self.decoder.feed(&buf[..n]);
        }
    }

    fn query<V: SerializeValues>(&mut self, cql: &str, values: V) -> ResultMessage {
        let q = Query { query: cql, params: QueryParameters::new(Consistency::One, values) };
        match self.send(&q).message {
            ResponseMessage::Result(r) => r,
            other => panic!("{cql}: {other:?}"),
        }
    }

    fn prepare(&mut self, cql: &str) -> Prepared {
        match self.send(&Prepare { query: cql, keyspace: None }).message {
            ResponseMessage::Result(ResultMessage::Prepared(p)) => *p,
            other => panic!("{cql}: {other:?}"),
        }
    }

    fn execute<V: SerializeValues>(&mut self, p: &Prepared, values: V) -> ResultMessage {
        values.check_types(&p.metadata.specs).expect("values match the bind markers");
        let e = Execute {
            id: &p.id,
            result_metadata_id: p.result_metadata_id.as_deref(),
            params: QueryParameters { skip_metadata: true, ..QueryParameters::new(Consistency::One, values) },
        };
        match self.send(&e).message {
            ResponseMessage::Result(r) => r,
            other => panic!("EXECUTE: {other:?}"),
        }
    }
}

fn select(c: &mut Client, ks: &str, pk: i32) -> Rows {
    let cql = format!("SELECT {COLUMNS} FROM {ks}.every_type WHERE pk = ?");
    match c.query(&cql, (pk,)) {
        ResultMessage::Rows(rows) => rows,
        other => panic!("{other:?}"),
    }
}

fn round_trip(version: ProtocolVersion, lz4: bool) {
    let (mut c, supported) = Client::connect(version, lz4);
    let keys: Vec<&str> = supported.iter().map(|(k, _)| k.as_str()).collect();
    assert!(keys.contains(&"CQL_VERSION") && keys.contains(&"PROTOCOL_VERSIONS"), "{supported:?}");
    assert!(supported.iter().any(|(k, v)| k == "COMPRESSION" && v.iter().any(|c| c == "lz4")));

    let ks = testkit::fresh_keyspace("proto");
    for ddl in every_type_schema(&ks) {
        assert!(matches!(c.query(&ddl, ()), ResultMessage::SchemaChange(_)), "{ddl}");
    }
    let placeholders = vec!["?"; COLUMNS.split(',').count()].join(", ");
    let insert = format!("INSERT INTO {ks}.every_type ({COLUMNS}) VALUES ({placeholders})");

    // Unprepared QUERY with bind values, then a prepared EXECUTE.
    let row1 = every_type_row(1, &ks);
    assert_eq!(c.query(&insert, &row1[..]), ResultMessage::Void);
    let prepared = c.prepare(&insert);
    assert_eq!(prepared.metadata.pk_indexes, [0], "partition key index from PREPARED");
    assert_eq!(version == ProtocolVersion::V5, prepared.result_metadata_id.is_some());
    let row2 = every_type_row(2, &ks);
    assert_eq!(c.execute(&prepared, &row2[..]), ResultMessage::Void);

    for (pk, expected) in [(1, &row1), (2, &row2)] {
        let rows = select(&mut c, &ks, pk);
        assert_eq!(rows.rows_count(), 1);
        let got: Vec<Row> = rows.rows::<Row>().expect("type check").map(|r| r.expect("row")).collect();
        assert_eq!(&got[0].columns, expected, "{version:?} lz4={lz4} pk={pk}");
    }

    // Borrowed views: &str, &[u8] and a lazy list iterator straight from the buffer.
    let rows = select(&mut c, &ks, 1);
    let view = format!("SELECT t, bl, l, i FROM {ks}.every_type WHERE pk = 1");
    let narrow = match c.query(&view, ()) {
        ResultMessage::Rows(r) => r,
        other => panic!("{other:?}"),
    };
    for row in narrow.rows::<(&str, &[u8], ListIter<'_, i32>, Option<i32>)>().expect("type check") {
        let (t, bl, l, i) = row.expect("row");
        assert_eq!(t, "zażółć gęślą jaźń");
        assert_eq!(bl, [0, 1, 2, 0xff]);
        let body = narrow.body().as_ref().as_ptr_range();
        assert!(body.contains(&t.as_ptr()), "text borrows the response buffer");
        assert_eq!(l.collect::<Result<Vec<_>, _>>().expect("list"), [3, 1, 2]);
        assert_eq!(i, None);
    }
    drop(rows);

    // Prepared SELECT with skip_metadata: the rows carry no specs; use the cached ones.
    let sel = c.prepare(&format!("SELECT {COLUMNS} FROM {ks}.every_type WHERE pk = ?"));
    let ResultMessage::Rows(rows) = c.execute(&sel, (2i32,)) else { panic!("rows") };
    assert!(rows.metadata.specs.is_none(), "server honoured skip_metadata");
    let specs = sel.result_metadata.specs.as_deref().expect("prepared result specs");
    let got: Vec<Row> = rows.rows_with::<Row>(specs).expect("types").map(|r| r.expect("row")).collect();
    assert_eq!(got[0].columns, row2);

    // Counters, and a server error mapped to a typed error.
    let inc = format!("UPDATE {ks}.counters SET c = c + ? WHERE pk = ?");
    assert_eq!(c.query(&inc, (CqlValue::Counter(5), 1i32)), ResultMessage::Void);
    let ResultMessage::Rows(rows) = c.query(&format!("SELECT c FROM {ks}.counters WHERE pk = 1"), ()) else {
        panic!("rows")
    };
    let counts: Vec<(i64,)> = rows.rows().expect("types").map(|r| r.expect("row")).collect();
    assert_eq!(counts, [(5,)]);
    let bad = Query { query: "SELECT nope FROM system.local", params: QueryParameters::<()>::default() };
    match c.send(&bad).message {
        ResponseMessage::Error(e) => assert_eq!(e.kind, ErrorKind::Invalid, "{e}"),
        other => panic!("{other:?}"),
    }
    let garbage = Query { query: "SELEKT 1", params: QueryParameters::<()>::default() };
    match c.send(&garbage).message {
        ResponseMessage::Error(e) => assert_eq!(e.kind, ErrorKind::SyntaxError, "{e}"),
        other => panic!("{other:?}"),
    }
    c.query(&format!("DROP KEYSPACE {ks}"), ());
}

#[test]
fn v4_every_type() {
    round_trip(ProtocolVersion::V4, false);
}

#[test]
fn v4_lz4_every_type() {
    round_trip(ProtocolVersion::V4, true);
}

#[test]
fn v5_every_type() {
    round_trip(ProtocolVersion::V5, false);
}

#[test]
fn v5_lz4_every_type() {
    round_trip(ProtocolVersion::V5, true);
}
