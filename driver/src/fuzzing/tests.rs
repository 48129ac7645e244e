//! The driver's harnesses on their seed corpora, the inputs that once made
//! them fail, and the generator of the seeds.

use std::net::IpAddr;
use std::path::{Path, PathBuf};

use shardwise_protocol::frame::compression::compress_body;
use shardwise_protocol::frame::segment::{encode_envelopes, SegmentCompression};
use shardwise_protocol::frame::{Flags, HEADER_LEN};
use shardwise_protocol::fuzzing::{rows_input, seed_files, write_seed_files};
use shardwise_protocol::response::{ErrorKind, ErrorResponse, Response, ResponseMessage};
use shardwise_protocol::types::ser::SerializeValue;
use shardwise_protocol::types::ColumnType;

use super::*;

fn seed_dir(target: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../fuzz/seeds").join(target)
}

/// A value's bytes, without its length.
fn val(v: impl SerializeValue) -> Vec<u8> {
    let mut b = Vec::new();
    v.encode(&mut b);
    b.split_off(4)
}

fn list(t: ColumnType) -> ColumnType {
    ColumnType::List(Box::new(t))
}

fn map(k: ColumnType, v: ColumnType) -> ColumnType {
    ColumnType::Map(Box::new(k), Box::new(v))
}

/// `[which]` then a rows input.
fn with(which: u8, columns: &[(u8, ColumnType)], rows: &[Vec<Option<Vec<u8>>>]) -> Vec<u8> {
    let rows: Vec<Vec<Option<&[u8]>>> = rows.iter().map(|r| r.iter().map(|v| v.as_deref()).collect()).collect();
    let mut out = vec![which];
    out.extend(rows_input(columns, &rows));
    out
}

fn typed_seeds() -> Vec<(&'static str, Vec<u8>)> {
    use ColumnType::*;
    let attrs: BTreeMap<&str, i32> = [("a", 1), ("b", -2)].into();
    let extra: BTreeMap<&str, Vec<i32>> = [("k", vec![1, 2, 3])].into();
    let pair = Tuple(vec![Int, Text]);
    vec![
        (
            "tuple",
            with(
                0,
                &[(0, Int), (1, Text), (2, list(BigInt))],
                &[vec![Some(val(1i32)), Some(val("one")), Some(val(vec![1i64, 2]))], vec![Some(val(2i32)), None, None]],
            ),
        ),
        ("map", with(1, &[(3, map(Text, Int))], &[vec![Some(val(attrs.clone()))], vec![None]])),
        (
            "cql_value",
            with(
                3,
                &[(4, pair.clone()), (5, Set(Box::new(Uuid)))],
                &[vec![Some(val((7i32, "seven"))), Some(val(vec![uuid::Uuid::from_u128(9)]))]],
            ),
        ),
        ("row", with(4, &[(0, Varint), (1, Decimal), (2, Duration)], &[vec![Some(vec![1]), None, None]])),
        (
            "named",
            with(
                5,
                &[(1, Text), (0, BigInt), (2, list(Text)), (3, map(Text, Int))],
                &[vec![Some(val("n")), Some(val(5i64)), Some(val(vec!["x", "y"])), Some(val(attrs))]],
            ),
        ),
        (
            "in_order",
            with(
                6,
                &[(0, Int), (1, Text), (4, pair)],
                &[vec![Some(val(3i32)), Some(val("t")), Some(val((1i32, "p")))]],
            ),
        ),
        (
            "renamed",
            with(
                7,
                &[(5, map(Text, list(Int))), (4, Tuple(vec![BigInt, Blob]))],
                &[vec![Some(val(extra)), Some(val((4i64, vec![0xcau8, 0xfe])))]],
            ),
        ),
        ("lazy", with(9, &[(2, list(Int)), (3, map(Text, BigInt))], &[vec![Some(val(vec![1i32, 2])), None]])),
    ]
}

/// The server's side of a handshake: envelopes at `version`, the ones from
/// `framed_from` on in v5 segments, v4 bodies LZ4-compressed when `lz4`.
fn server(version: ProtocolVersion, lz4: bool, framed_from: usize, messages: Vec<ResponseMessage>) -> Vec<u8> {
    let mut out = Vec::new();
    for (i, m) in messages.into_iter().enumerate() {
        let mut env = Vec::new();
        Response::new(m).encode(version, 0, &mut env).expect("encodes");
        if lz4 && version == ProtocolVersion::V4 && i > 0 {
            let mut c = env[..HEADER_LEN].to_vec();
            compress_body(&env[HEADER_LEN..], &mut c).expect("compresses");
            c[1] |= Flags::COMPRESSION;
            let len = (c.len() - HEADER_LEN) as u32;
            c[5..HEADER_LEN].copy_from_slice(&len.to_be_bytes());
            env = c;
        }
        if version == ProtocolVersion::V5 && i >= framed_from {
            let c = if lz4 { SegmentCompression::Lz4 } else { SegmentCompression::None };
            encode_envelopes(&env, c, &mut out).expect("frames");
        } else {
            out.extend(env);
        }
    }
    out
}

fn supported(lz4: bool) -> ResponseMessage {
    let mut s = vec![("CQL_VERSION".to_owned(), vec!["3.4.7".to_owned()])];
    if lz4 {
        s.push(("COMPRESSION".to_owned(), vec!["snappy".to_owned(), "lz4".to_owned()]));
    }
    ResponseMessage::Supported(s)
}

fn handshake_seeds() -> Vec<(&'static str, Vec<u8>, HandshakeOutcome)> {
    use ProtocolVersion::{V4, V5};
    use ResponseMessage::*;
    let auth = || Authenticate("org.apache.cassandra.auth.PasswordAuthenticator".into());
    let rejection = Error(ErrorResponse {
        code: 0x000A,
        message: "Invalid or unsupported protocol version (5)".into(),
        kind: ErrorKind::ProtocolError,
    });
    let mode = |bits: u8, data: Vec<u8>| [vec![bits], data].concat();
    vec![
        (
            "v4_plain",
            mode(0xf8, server(V4, false, 9, vec![supported(false), Ready])),
            HandshakeOutcome::Connected(V4, Compression::None),
        ),
        (
            "v4_plain_bytewise",
            mode(0, server(V4, false, 9, vec![supported(false), Ready])),
            HandshakeOutcome::Connected(V4, Compression::None),
        ),
        (
            "v4_lz4",
            mode(0x22, server(V4, true, 9, vec![supported(true), Ready])),
            HandshakeOutcome::Connected(V4, Compression::Lz4),
        ),
        (
            "v4_auth_challenge",
            mode(
                0x3c,
                server(
                    V4,
                    false,
                    9,
                    vec![supported(false), auth(), AuthChallenge(Some("nonce".into())), AuthSuccess(None)],
                ),
            ),
            HandshakeOutcome::Connected(V4, Compression::None),
        ),
        (
            "v5_auth_framed",
            mode(0x45, server(V5, false, 2, vec![supported(false), auth(), AuthSuccess(Some("ok".into()))])),
            HandshakeOutcome::Connected(V5, Compression::None),
        ),
        (
            "v5_lz4",
            mode(0x13, server(V5, true, 2, vec![supported(true), Ready])),
            HandshakeOutcome::Connected(V5, Compression::Lz4),
        ),
        (
            "v5_lz4_auth_framed",
            mode(0x17, server(V5, true, 2, vec![supported(true), auth(), AuthSuccess(None)])),
            HandshakeOutcome::Connected(V5, Compression::Lz4),
        ),
        ("version_rejected", mode(0x81, server(V4, false, 9, vec![rejection])), HandshakeOutcome::VersionRejected),
    ]
}

fn system_seeds() -> Vec<(&'static str, Vec<u8>, SystemRows)> {
    use ColumnType::*;
    let set = |t| ColumnType::Set(Box::new(t));
    let id = |i: u128| Some(val(uuid::Uuid::from_u128(i)));
    let ip = |s: &str| Some(val(s.parse::<IpAddr>().expect("ip")));
    let tokens = |t: &[&str]| Some(val(t.to_vec()));
    let text = |s: &str| Some(val(s));
    let options = |o: &[(&str, &str)]| Some(val(o.iter().copied().collect::<BTreeMap<&str, &str>>()));
    let nodes = |n| SystemRows { nodes: n, ..Default::default() };
    vec![
        (
            "local",
            with(
                0,
                &[(0, Uuid), (0, Text), (0, Text), (0, set(Text))],
                &[vec![id(1), text("dc1"), text("r1"), tokens(&["-100", "200", "9223372036854775807"])]],
            ),
            nodes(1),
        ),
        (
            "peers_v2",
            with(
                1,
                &[(0, Uuid), (0, Inet), (0, Int), (0, Text), (0, Text), (0, set(Text))],
                &[
                    vec![id(2), ip("127.0.0.2"), Some(val(9043i32)), text("dc1"), text("r2"), tokens(&["0", "300"])],
                    vec![id(3), ip("::1"), None, text("dc2"), None, tokens(&["-5"])],
                    vec![None, ip("127.0.0.4"), None, None, None, None],
                ],
            ),
            nodes(2),
        ),
        (
            "peers",
            with(
                2,
                &[(0, Uuid), (0, Inet), (0, Inet), (0, Text), (0, Text), (0, set(Text))],
                &[
                    vec![id(2), ip("0.0.0.0"), ip("127.0.0.2"), text("dc1"), text("r1"), tokens(&["10"])],
                    vec![id(3), ip("127.0.0.3"), ip("10.0.0.3"), text("dc1"), text("r2"), tokens(&["20", "x"])],
                ],
            ),
            nodes(2),
        ),
        (
            "keyspaces",
            with(
                3,
                &[(0, Text), (0, map(Text, Text))],
                &[
                    vec![
                        text("a"),
                        options(&[
                            ("class", "org.apache.cassandra.locator.SimpleStrategy"),
                            ("replication_factor", "3"),
                        ]),
                    ],
                    vec![text("b"), options(&[("class", "NetworkTopologyStrategy"), ("dc1", "2"), ("dc2", "3/1")])],
                    vec![text("c"), options(&[("class", "org.apache.cassandra.locator.EverywhereStrategy")])],
                    vec![text("d"), options(&[("class", "LocalStrategy")])],
                    vec![text("e"), options(&[("class", "com.example.Mine")])],
                ],
            ),
            SystemRows { strategies: 5, ..Default::default() },
        ),
        (
            "partitioners",
            with(
                4,
                &[(0, Text), (0, Text), (0, Text)],
                &[
                    vec![text("ks"), text("t1"), None],
                    vec![text("ks"), text("t2"), text("org.apache.cassandra.dht.Murmur3Partitioner")],
                    vec![text("ks"), text("t3_scylla_cdc_log"), text("com.scylladb.dht.CDCPartitioner")],
                    vec![text("ks"), text("t4"), text("org.apache.cassandra.dht.ByteOrderedPartitioner")],
                ],
            ),
            SystemRows { partitioners: 4, ..Default::default() },
        ),
        (
            "huge_replication_factors",
            huge_replication_factors_input(),
            SystemRows { strategies: 3, ..Default::default() },
        ),
    ]
}

/// Regenerates the seed files of this crate's targets:
/// `cargo test -p shardwise --lib write_seeds -- --ignored`.
#[test]
#[ignore = "writes fuzz/seeds"]
fn write_seeds() {
    write_seed_files(&seed_dir("typed_row"), &typed_seeds());
    let handshake: Vec<_> = handshake_seeds().into_iter().map(|(n, d, _)| (n, d)).collect();
    write_seed_files(&seed_dir("handshake"), &handshake);
    let system: Vec<_> = system_seeds().into_iter().map(|(n, d, _)| (n, d)).collect();
    write_seed_files(&seed_dir("system_rows"), &system);
}

/// Each seed reaches what it was written for, and the committed files are
/// the current seeds.
#[test]
fn seeds_reach_their_paths() {
    for (name, data) in typed_seeds() {
        assert!(typed_row(&data) > 0, "typed_row/{name} reads no row");
        assert_eq!(std::fs::read(seed_dir("typed_row").join(name)).ok(), Some(data), "stale seed {name}");
    }
    for (name, data, expected) in handshake_seeds() {
        assert_eq!(handshake(&data), expected, "handshake/{name}");
        assert_eq!(std::fs::read(seed_dir("handshake").join(name)).ok(), Some(data), "stale seed {name}");
    }
    for (name, data, expected) in system_seeds() {
        assert_eq!(system_rows(&data), expected, "system_rows/{name}");
        assert_eq!(std::fs::read(seed_dir("system_rows").join(name)).ok(), Some(data), "stale seed {name}");
    }
}

/// Every committed seed, including any kept from a fuzzer's finding.
#[test]
fn harnesses_run_on_every_seed_file() {
    for (name, data) in seed_files(&seed_dir("typed_row")) {
        eprintln!("typed_row/{name}");
        typed_row(&data);
    }
    for (name, data) in seed_files(&seed_dir("handshake")) {
        eprintln!("handshake/{name}");
        handshake(&data);
    }
    for (name, data) in seed_files(&seed_dir("system_rows")) {
        eprintln!("system_rows/{name}");
        system_rows(&data);
    }
}

#[test]
fn harnesses_accept_garbage() {
    for data in shardwise_protocol::fuzzing::garbage(0x9e37_79b9, 400) {
        typed_row(&data);
        handshake(&data);
        system_rows(&data);
    }
}

/// Replication factors no cluster has, read from `system_schema.keyspaces`:
/// SimpleStrategy reserved room for `rf` replicas up front (capacity
/// overflow, or an allocation of `rf` words), and NetworkTopologyStrategy's
/// rack-repeat budget (`rf - racks` as `isize`) overflowed for `rf` ≥ 2^63.
/// Also a seed of `system_rows`.
fn huge_replication_factors_input() -> Vec<u8> {
    use ColumnType::*;
    let text = |s: &str| Some(val(s));
    let options = |o: &[(&str, &str)]| Some(val(o.iter().copied().collect::<BTreeMap<&str, &str>>()));
    with(
        3,
        &[(0, Text), (0, map(Text, Text))],
        &[
            vec![text("a"), options(&[("class", "SimpleStrategy"), ("replication_factor", "18446744073709551615")])],
            vec![text("b"), options(&[("class", "NetworkTopologyStrategy"), ("dc1", "9223372036854775808")])],
            vec![
                text("c"),
                options(&[("class", "NetworkTopologyStrategy"), ("dc1", "18446744073709551615"), ("dc2", "1")]),
            ],
        ],
    )
}

#[test]
fn huge_replication_factors() {
    let data = huge_replication_factors_input();
    assert_eq!(system_rows(&data), SystemRows { strategies: 3, ..Default::default() });
}
