//! One table of sample messages, every opcode, for v4 and v5: each must
//! round-trip through the envelope encoder and the streaming decoder, every
//! proper prefix of its body must fail to decode, and trailing bytes must be
//! rejected.

use std::collections::HashSet;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};

use bytes::Bytes;
use shardwise_protocol::codec::RawValue;
use shardwise_protocol::consistency::Consistency;
use shardwise_protocol::frame::{EnvelopeHeader, FrameDecoder, Opcode, ProtocolVersion, HEADER_LEN};
use shardwise_protocol::request::*;
use shardwise_protocol::response::*;
use shardwise_protocol::rows::{PreparedMetadata, ResultMetadata, Rows, RowsError};
use shardwise_protocol::types::ser::RawValues;
use shardwise_protocol::types::{ColumnSpec, ColumnType};
use shardwise_protocol::DecodeError;

const VERSIONS: [ProtocolVersion; 2] = [ProtocolVersion::V4, ProtocolVersion::V5];

fn raw(values: &[RawValue<'static>]) -> RawValues<'static> {
    RawValues { names: None, values: values.to_vec() }
}

fn params(version: ProtocolVersion, full: bool) -> QueryParameters<'static, RawValues<'static>> {
    let v5 = version == ProtocolVersion::V5;
    QueryParameters {
        consistency: Consistency::LocalQuorum,
        values: raw(&[RawValue::Value(&[0, 0, 0, 42]), RawValue::Null, RawValue::Unset]),
        skip_metadata: full,
        page_size: full.then_some(5000),
        paging_state: full.then_some(&b"\x01\x02\x03"[..]),
        serial_consistency: full.then_some(Consistency::LocalSerial),
        timestamp: full.then_some(1_700_000_000_000_000),
        keyspace: None,
        now_in_seconds: (full && v5).then_some(1_700_000_000),
    }
}

fn requests(version: ProtocolVersion) -> Vec<AnyRequest<'static>> {
    let v5 = version == ProtocolVersion::V5;
    let mut named = params(version, false);
    named.values.names = Some(vec!["a", "b", "c"]);
    let mut with_ks = params(version, true);
    if v5 {
        with_ks.keyspace = Some("ks");
    }
    let batch_stmt = |kind| BatchStatement { kind, values: raw(&[RawValue::Value(b"x"), RawValue::Null]) };
    vec![
        AnyRequest::Startup(Startup { options: vec![("CQL_VERSION", "3.0.0"), ("COMPRESSION", "lz4")] }),
        AnyRequest::AuthResponse(AuthResponse { token: Some(b"\0cassandra\0cassandra") }),
        AnyRequest::AuthResponse(AuthResponse { token: None }),
        AnyRequest::Options(Options),
        AnyRequest::Query(Query { query: "SELECT * FROM ks.t WHERE pk = ?", params: params(version, false) }),
        AnyRequest::Query(Query { query: "SELECT * FROM t", params: with_ks }),
        AnyRequest::Query(Query { query: "INSERT INTO t (a, b, c) VALUES (:a, :b, :c)", params: named }),
        AnyRequest::Query(Query {
            query: "SELECT now() FROM system.local",
            params: QueryParameters { values: RawValues::default(), ..Default::default() },
        }),
        AnyRequest::Prepare(Prepare { query: "SELECT * FROM ks.t", keyspace: None }),
        AnyRequest::Prepare(Prepare { query: "SELECT * FROM t", keyspace: v5.then_some("ks") }),
        AnyRequest::Execute(Execute {
            id: &[0xde, 0xad, 0xbe, 0xef],
            result_metadata_id: v5.then_some(&[1, 2, 3][..]),
            params: params(version, true),
        }),
        AnyRequest::Register(Register { events: vec!["TOPOLOGY_CHANGE", "STATUS_CHANGE", "SCHEMA_CHANGE"] }),
        AnyRequest::Batch(Batch {
            kind: BatchType::Unlogged,
            statements: vec![
                batch_stmt(StatementKind::Query("INSERT INTO t (a, b) VALUES (?, ?)")),
                batch_stmt(StatementKind::Prepared(&[9, 9, 9])),
            ],
            consistency: Consistency::One,
            serial_consistency: Some(Consistency::Serial),
            timestamp: Some(-5),
            keyspace: v5.then_some("ks"),
            now_in_seconds: v5.then_some(7),
        }),
        AnyRequest::Batch(Batch { kind: BatchType::Counter, statements: vec![], ..Default::default() }),
    ]
}

fn spec(name: &str, typ: ColumnType) -> ColumnSpec {
    ColumnSpec { keyspace: "ks".into(), table: "t".into(), name: name.into(), typ }
}

fn responses(version: ProtocolVersion) -> Vec<Response> {
    let v5 = version == ProtocolVersion::V5;
    let failures =
        if v5 { Failures::Reasons(vec![(IpAddr::V4(Ipv4Addr::new(127, 0, 0, 2)), 2)]) } else { Failures::Count(1) };
    let err = |code, kind| Response::new(ResponseMessage::Error(ErrorResponse { code, message: "boom".into(), kind }));
    let cl = Consistency::Quorum;
    let metadata = ResultMetadata {
        columns_count: 3,
        paging_state: None,
        new_metadata_id: None,
        specs: Some(vec![
            spec("pk", ColumnType::BigInt),
            spec("v", ColumnType::Text),
            ColumnSpec {
                table: "other".into(),
                ..spec("m", ColumnType::Map(Box::new(ColumnType::Text), Box::new(ColumnType::Int)))
            },
        ]),
    };
    let rows = Rows::from_raw(
        metadata.clone(),
        &[
            vec![Some(&1i64.to_be_bytes()[..]), Some(b"one"), None],
            vec![Some(&2i64.to_be_bytes()[..]), None, Some(&[0, 0, 0, 0])],
        ],
    )
    .expect("rows");
    let paged = Rows::from_raw(
        ResultMetadata {
            columns_count: 1,
            paging_state: Some(Bytes::from_static(b"page-2")),
            new_metadata_id: v5.then(|| Bytes::from_static(b"mid")),
            specs: None,
        },
        &[vec![Some(b"x")]],
    )
    .expect("rows");
    let schema = SchemaChange {
        change: SchemaChangeType::Created,
        target: SchemaChangeTarget::Function {
            keyspace: "ks".into(),
            name: "f".into(),
            arg_types: vec!["int".into(), "text".into()],
        },
    };
    let mut traced = Response::new(ResponseMessage::Result(ResultMessage::Void));
    traced.tracing_id = Some(uuid::Uuid::from_u128(0x1234));
    traced.warnings = vec!["Aggregation query used without partition key".into()];
    traced.custom_payload =
        vec![("tablets-routing-v1".into(), Some(Bytes::from_static(b"\x00\x01"))), ("k".into(), None)];
    vec![
        err(code::SERVER_ERROR, ErrorKind::ServerError),
        err(code::PROTOCOL_ERROR, ErrorKind::ProtocolError),
        err(code::BAD_CREDENTIALS, ErrorKind::BadCredentials),
        err(code::UNAVAILABLE, ErrorKind::Unavailable { consistency: cl, required: 3, alive: 1 }),
        err(code::OVERLOADED, ErrorKind::Overloaded),
        err(code::IS_BOOTSTRAPPING, ErrorKind::IsBootstrapping),
        err(code::TRUNCATE_ERROR, ErrorKind::TruncateError),
        err(
            code::WRITE_TIMEOUT,
            ErrorKind::WriteTimeout {
                consistency: cl,
                received: 1,
                block_for: 2,
                write_type: WriteType::Simple,
                contentions: None,
            },
        ),
        err(
            code::WRITE_TIMEOUT,
            ErrorKind::WriteTimeout {
                consistency: cl,
                received: 0,
                block_for: 2,
                write_type: WriteType::Cas,
                contentions: Some(3),
            },
        ),
        err(
            code::READ_TIMEOUT,
            ErrorKind::ReadTimeout { consistency: cl, received: 1, block_for: 2, data_present: true },
        ),
        err(
            code::READ_FAILURE,
            ErrorKind::ReadFailure {
                consistency: cl,
                received: 1,
                block_for: 2,
                failures: failures.clone(),
                data_present: false,
            },
        ),
        err(
            code::FUNCTION_FAILURE,
            ErrorKind::FunctionFailure { keyspace: "ks".into(), function: "f".into(), arg_types: vec!["int".into()] },
        ),
        err(
            code::WRITE_FAILURE,
            ErrorKind::WriteFailure {
                consistency: cl,
                received: 1,
                block_for: 2,
                failures,
                write_type: WriteType::Batch,
            },
        ),
        err(code::CDC_WRITE_FAILURE, ErrorKind::CdcWriteFailure),
        err(code::CAS_WRITE_UNKNOWN, ErrorKind::CasWriteUnknown { consistency: cl, received: 1, block_for: 2 }),
        err(code::SYNTAX_ERROR, ErrorKind::SyntaxError),
        err(code::UNAUTHORIZED, ErrorKind::Unauthorized),
        err(code::INVALID, ErrorKind::Invalid),
        err(code::CONFIG_ERROR, ErrorKind::ConfigError),
        err(code::ALREADY_EXISTS, ErrorKind::AlreadyExists { keyspace: "ks".into(), table: "t".into() }),
        err(code::UNPREPARED, ErrorKind::Unprepared { id: vec![1, 2, 3, 4] }),
        err(code::SCYLLA_RATE_LIMIT, ErrorKind::RateLimitReached { op_type: 1, rejected_by_coordinator: true }),
        err(0x7777, ErrorKind::Other { payload: vec![] }),
        Response::new(ResponseMessage::Ready),
        Response::new(ResponseMessage::Authenticate("org.apache.cassandra.auth.PasswordAuthenticator".into())),
        Response::new(ResponseMessage::Supported(vec![
            ("CQL_VERSION".into(), vec!["3.4.7".into()]),
            ("COMPRESSION".into(), vec!["lz4".into(), "snappy".into()]),
            ("SCYLLA_NR_SHARDS".into(), vec!["8".into()]),
        ])),
        Response::new(ResponseMessage::Result(ResultMessage::Void)),
        Response::new(ResponseMessage::Result(ResultMessage::Rows(rows))),
        Response::new(ResponseMessage::Result(ResultMessage::Rows(paged))),
        Response::new(ResponseMessage::Result(ResultMessage::SetKeyspace("ks".into()))),
        Response::new(ResponseMessage::Result(ResultMessage::Prepared(Box::new(Prepared {
            id: Bytes::from_static(&[7; 16]),
            result_metadata_id: v5.then(|| Bytes::from_static(&[8; 16])),
            metadata: PreparedMetadata {
                flags: i32::MIN, // Scylla's LWT bit
                pk_indexes: vec![1, 0],
                specs: vec![spec("a", ColumnType::Int), spec("b", ColumnType::Text)],
            },
            result_metadata: metadata,
        })))),
        Response::new(ResponseMessage::Result(ResultMessage::SchemaChange(schema.clone()))),
        Response::new(ResponseMessage::Event(Event::TopologyChange {
            change: "NEW_NODE".into(),
            node: SocketAddr::new(IpAddr::V4(Ipv4Addr::new(127, 0, 0, 3)), 9042),
        })),
        Response::new(ResponseMessage::Event(Event::StatusChange {
            change: "DOWN".into(),
            node: "[::1]:9042".parse().expect("addr"),
        })),
        Response::new(ResponseMessage::Event(Event::SchemaChange(schema))),
        Response::new(ResponseMessage::Event(Event::ClientRoutesChange {
            change: "UPDATE_NODES".into(),
            connection_ids: vec!["c1".into(), "c1".into()],
            host_ids: vec![
                "4b8e7f3c-0c2f-4f55-9d9e-1f7a0b9d2a11".into(),
                "0d7c2c1e-6a3b-4c0e-8f1d-2b3c4d5e6f70".into(),
            ],
        })),
        Response::new(ResponseMessage::AuthChallenge(Some(Bytes::from_static(b"challenge")))),
        Response::new(ResponseMessage::AuthSuccess(None)),
        traced,
    ]
}

/// Messages whose last field is optional or free-form, so a shorter body is a
/// different valid message: a prefix must then decode to something else.
fn prefix_may_decode(r: &Response) -> bool {
    matches!(
        &r.message,
        ResponseMessage::Error(ErrorResponse {
            kind: ErrorKind::Other { .. } | ErrorKind::WriteTimeout { write_type: WriteType::Cas, .. },
            ..
        })
    )
}

fn decode_one(bytes: &[u8]) -> shardwise_protocol::frame::Envelope {
    let mut d = FrameDecoder::new();
    d.feed(bytes);
    let env = d.next_envelope().expect("decodes").expect("complete");
    assert_eq!(d.buffered(), 0);
    env
}

#[test]
fn every_request_round_trips_and_rejects_truncation_and_trailing_bytes() {
    for version in VERSIONS {
        let mut opcodes = HashSet::new();
        for req in requests(version) {
            opcodes.insert(req.opcode());
            let mut wire = Vec::new();
            let n = req.encode(version, 3, 0, &mut wire).expect("encodes");
            assert_eq!(n, wire.len(), "exact size for {req:?}");
            let env = decode_one(&wire);
            assert_eq!(env.header.opcode, req.opcode());
            assert_eq!(env.header.stream, 3);
            let back = AnyRequest::decode(env.header.opcode, version, &env.body).expect("decodes back");
            assert_eq!(back, req, "{version:?}");
            let body = &wire[HEADER_LEN..];
            for p in 0..body.len() {
                assert!(
                    AnyRequest::decode(req.opcode(), version, &body[..p]).is_err(),
                    "{version:?} {req:?}: prefix of {p} bytes decoded"
                );
            }
            let mut long = body.to_vec();
            long.push(0);
            assert!(matches!(AnyRequest::decode(req.opcode(), version, &long), Err(DecodeError::TrailingData { .. })));
        }
        let want: HashSet<Opcode> = [
            Opcode::Startup,
            Opcode::AuthResponse,
            Opcode::Options,
            Opcode::Query,
            Opcode::Prepare,
            Opcode::Execute,
            Opcode::Register,
            Opcode::Batch,
        ]
        .into();
        assert_eq!(opcodes, want, "the table covers every request opcode");
    }
}

/// Decodes a response and, for rows, checks the values' framing too: the
/// two together reject what a whole-body decoder would.
fn decode_checked(header: &EnvelopeHeader, body: Bytes) -> Result<Response, DecodeError> {
    let resp = Response::decode(header, body)?;
    if let ResponseMessage::Result(ResultMessage::Rows(rows)) = &resp.message {
        rows.check_framing()?;
    }
    Ok(resp)
}

#[test]
fn every_response_round_trips_and_rejects_truncation_and_trailing_bytes() {
    for version in VERSIONS {
        let mut opcodes = HashSet::new();
        for resp in responses(version) {
            opcodes.insert(resp.message.opcode());
            let mut wire = Vec::new();
            resp.encode(version, -1, &mut wire).expect("encodes");
            let env = decode_one(&wire);
            let header = env.header;
            let back = Response::from_envelope(env).expect("decodes back");
            assert_eq!(back, resp, "{version:?}");
            let mut again = Vec::new();
            back.encode(version, -1, &mut again).expect("re-encodes");
            assert_eq!(again, wire);

            let body = Bytes::copy_from_slice(&wire[HEADER_LEN..]);
            for p in 0..body.len() {
                match decode_checked(&header, body.slice(..p)) {
                    Err(_) => {}
                    Ok(other) => assert!(
                        prefix_may_decode(&resp) && other != resp,
                        "{version:?} {resp:?}: prefix of {p} bytes decoded"
                    ),
                }
            }
            let mut long = body.to_vec();
            long.push(0);
            let long = decode_checked(&header, Bytes::from(long));
            if !prefix_may_decode(&resp) {
                assert!(matches!(long, Err(DecodeError::TrailingData { .. })), "{resp:?}: {long:?}");
            } else {
                assert_ne!(long.ok(), Some(resp));
            }
        }
        let want: HashSet<Opcode> = [
            Opcode::Error,
            Opcode::Ready,
            Opcode::Authenticate,
            Opcode::Supported,
            Opcode::Result,
            Opcode::Event,
            Opcode::AuthChallenge,
            Opcode::AuthSuccess,
        ]
        .into();
        assert_eq!(opcodes, want, "the table covers every response opcode");
    }
}

#[test]
fn every_message_survives_v5_framing_with_and_without_lz4() {
    use shardwise_protocol::frame::segment::{encode_envelopes, SegmentCompression};
    for c in [SegmentCompression::None, SegmentCompression::Lz4] {
        let mut run = Vec::new();
        for (i, resp) in responses(ProtocolVersion::V5).iter().enumerate() {
            resp.encode(ProtocolVersion::V5, i as i16, &mut run).expect("encodes");
        }
        let mut wire = Vec::new();
        encode_envelopes(&run, c, &mut wire).expect("frames");
        let mut d = FrameDecoder::new();
        d.set_framed(c);
        d.feed(&wire);
        let mut got = Vec::new();
        while let Some(env) = d.next_envelope().expect("decodes") {
            got.push(Response::from_envelope(env).expect("message"));
        }
        assert_eq!(got, responses(ProtocolVersion::V5));
    }
}

#[test]
fn rows_are_read_as_borrowed_views() {
    let resp = &responses(ProtocolVersion::V4)[27];
    let ResponseMessage::Result(ResultMessage::Rows(rows)) = &resp.message else { panic!("rows sample moved") };
    let mut seen = Vec::new();
    for row in rows.rows::<(i64, Option<&str>, Option<shardwise_protocol::types::CqlValue>)>().expect("type check") {
        let (pk, v, _m) = row.expect("row");
        seen.push((pk, v));
    }
    assert_eq!(seen, [(1, Some("one")), (2, None)]);
    let err = rows.rows::<(i32, &str, i32)>().expect_err("bigint is not i32");
    assert!(err.to_string().contains("bigint"), "{err}");
}

/// Decoding bounds the row count by the body; the values' framing is
/// checked before typed rows are handed out, so a page with a value cut
/// short or a byte left over is an error, never rows read short.
#[test]
fn rows_framing_is_checked_before_typed_reading() {
    let resp = &responses(ProtocolVersion::V4)[27];
    let ResponseMessage::Result(ResultMessage::Rows(rows)) = &resp.message else { panic!("rows sample moved") };
    let mut wire = Vec::new();
    rows.encode(&mut wire).expect("encodes");
    let count_at = wire.len() - rows.raw_rows().len() - 4;
    let decode = |wire: &[u8]| Rows::decode(Bytes::copy_from_slice(wire), 4);
    type Row<'a> = (i64, Option<&'a str>, Option<shardwise_protocol::types::CqlValue>);

    let long = decode(&[&wire[..], &[0]].concat()).expect("the framing is not walked");
    assert!(matches!(long.rows::<Row<'_>>(), Err(RowsError::Malformed(DecodeError::TrailingData { .. }))));
    let short = decode(&wire[..wire.len() - 1]).expect("the framing is not walked");
    assert!(matches!(short.rows::<Row<'_>>(), Err(RowsError::Malformed(DecodeError::UnexpectedEnd { .. }))));

    // More rows than the body's bytes can hold are refused at once.
    let mut many = wire.clone();
    many[count_at..count_at + 4].copy_from_slice(&1000i32.to_be_bytes());
    assert!(matches!(decode(&many), Err(DecodeError::Invalid { what: "rows count", .. })));
    let whole = decode(&wire).expect("decodes");
    assert_eq!(whole.rows::<Row<'_>>().expect("framing and types check").count(), 2);
}
