//! Harnesses for the fuzz targets in `fuzz/` (one thin target each). They
//! live here so that the normal test suite runs them on seed inputs too and
//! they cannot rot. Each asserts the properties a decoder must keep on any
//! input: no panic, and whatever decodes re-encodes to something that
//! decodes to the same value.
//!
//! Each target's seed corpus lives in `fuzz/seeds/<target>/`; the unit tests
//! of the crate holding a harness run it on every seed ([`seed_files`]).

use std::path::Path;

use bytes::{BufMut, Bytes};

use crate::codec::{self, Reader};
use crate::frame::envelope::{EnvelopeHeader, Flags, Opcode, ProtocolVersion, HEADER_LEN};
use crate::frame::exact::ExactDecoder;
use crate::frame::segment::SegmentCompression;
use crate::frame::FrameDecoder;
use crate::request::AnyRequest;
use crate::response::{Response, ResponseMessage, ResultMessage};
use crate::rows::{ResultMetadata, Rows};
use crate::sharding::{ShardPortIterator, ShardingInfo, BIASED_TOKEN_ROUND_ROBIN};
use crate::token::{Partitioner, Token};
use crate::types::de::{DeserializeValue, FrameSlice};
use crate::types::ser::SerializeValue;
use crate::types::{ColumnSpec, ColumnType, CqlValue};

fn version(b: u8) -> ProtocolVersion {
    if b & 1 == 0 {
        ProtocolVersion::V4
    } else {
        ProtocolVersion::V5
    }
}

/// Streams `data[1..]` through a [`FrameDecoder`] in the mode chosen by
/// `data[0]`, in chunks, and decodes every envelope as a message.
pub fn frame_decoder(data: &[u8]) {
    let Some((&mode, rest)) = data.split_first() else { return };
    let mut d = FrameDecoder::new().with_max_body(1 << 20);
    match mode % 4 {
        0 => {}
        1 => d.set_v4_lz4(true),
        2 => d.set_framed(SegmentCompression::None),
        _ => d.set_framed(SegmentCompression::Lz4),
    }
    let chunk = usize::from(mode / 4) + 1;
    if mode % 4 < 2 {
        exact_is_general(rest, mode % 4 == 1, chunk);
    }
    for part in rest.chunks(chunk) {
        d.feed(part);
        loop {
            match d.next_envelope() {
                Ok(Some(env)) => {
                    if env.header.is_response {
                        let _ = Response::from_envelope(env);
                    } else {
                        let _ = AnyRequest::decode(env.header.opcode, env.header.version, &env.body);
                    }
                }
                Ok(None) => break,
                Err(_) => return,
            }
        }
    }
}

/// The exact-size decoder yields the general decoder's envelopes, and fails
/// where it fails, whatever the chunking.
fn exact_is_general(wire: &[u8], lz4: bool, chunk: usize) {
    let mut general = FrameDecoder::new().with_max_body(1 << 20);
    general.set_v4_lz4(lz4);
    general.feed(wire);
    let mut expected = Vec::new();
    let expected_error = loop {
        match general.next_envelope() {
            Ok(Some(env)) => expected.push(env),
            Ok(None) => break false,
            Err(_) => break true,
        }
    };
    let mut exact = ExactDecoder::new(1 << 20, lz4);
    let mut got = Vec::new();
    let mut rest = wire;
    let mut error = false;
    while !rest.is_empty() {
        let buf = exact.read_buf();
        let n = buf.len().min(chunk).min(rest.len());
        buf[..n].copy_from_slice(&rest[..n]);
        rest = &rest[n..];
        match exact.filled(n) {
            Ok(env) => got.extend(env),
            Err(_) => {
                error = true;
                break;
            }
        }
    }
    assert_eq!(got, expected, "the exact decoder's envelopes differ");
    assert_eq!(error, expected_error, "one decoder failed, the other did not");
}

/// Decodes `data[HEADER_LEN..]` as the body of a response whose header is
/// `data[..HEADER_LEN]` (length fixed up); what decodes must re-encode and
/// decode to the same response.
pub fn response(data: &[u8]) {
    let Some(head) = data.first_chunk::<HEADER_LEN>() else { return };
    let body = Bytes::copy_from_slice(&data[HEADER_LEN..]);
    let Ok(opcode) = Opcode::from_byte(head[4]) else { return };
    let header = EnvelopeHeader {
        version: version(head[0]),
        is_response: true,
        flags: Flags(head[1] & (Flags::TRACING | Flags::WARNING | Flags::CUSTOM_PAYLOAD)),
        stream: 0,
        opcode,
        length: body.len() as u32,
    };
    metadata_id_response(&header, &body);
    let Ok(resp) = Response::decode(&header, body) else { return };
    for (key, value) in &resp.custom_payload {
        if let (crate::tablets::PAYLOAD_KEY | crate::tablets::PAYLOAD_KEY_V2, Some(value)) = (key.as_str(), value) {
            tablet_route(value);
        }
    }
    if let ResponseMessage::Result(ResultMessage::Rows(rows)) = &resp.message {
        if let Ok(iter) = rows.rows::<Vec<Option<CqlValue>>>() {
            for row in iter {
                let _ = row;
            }
        }
        if let Some(specs) = &rows.metadata.specs {
            known_columns(&header, &data[HEADER_LEN..], &resp, specs);
        }
    }
    let mut again = Vec::new();
    if resp.encode(header.version, 0, &mut again).is_ok() {
        let h = EnvelopeHeader::decode(again.first_chunk::<HEADER_LEN>().expect("encoded a header"), usize::MAX)
            .expect("own header decodes");
        let back = Response::decode(&h, Bytes::copy_from_slice(&again[HEADER_LEN..]));
        assert_eq!(back.as_ref().ok(), Some(&resp), "response re-encoding changed it");
    }
}

/// The response decoded on a connection that negotiated
/// `SCYLLA_USE_METADATA_ID` (v4 PREPARED answers carry a result metadata
/// id): what decodes survives a re-encoding and decodes the same way again.
fn metadata_id_response(header: &EnvelopeHeader, body: &[u8]) {
    let Ok(resp) = Response::decode_ext(header, Bytes::copy_from_slice(body), None, true) else { return };
    let mut again = Vec::new();
    if resp.encode(header.version, 0, &mut again).is_ok() {
        let h = EnvelopeHeader::decode(again.first_chunk::<HEADER_LEN>().expect("encoded a header"), usize::MAX)
            .expect("own header decodes");
        let back = Response::decode_ext(&h, Bytes::copy_from_slice(&again[HEADER_LEN..]), None, true);
        assert_eq!(back.as_ref().ok(), Some(&resp), "response re-encoding (metadata id) changed it");
    }
}

/// The response decoded knowing its own columns reads them in place and
/// leaves them out, and nothing else changes; knowing other columns (one
/// fewer, or one of another type) changes nothing.
fn known_columns(header: &EnvelopeHeader, body: &[u8], resp: &Response, specs: &[ColumnSpec]) {
    let decode = |known: &[ColumnSpec]| {
        Response::decode_known(header, Bytes::copy_from_slice(body), Some(known)).expect("decoded before")
    };
    let mut expected = resp.clone();
    if let ResponseMessage::Result(ResultMessage::Rows(rows)) = &mut expected.message {
        rows.metadata.specs = None;
    }
    assert_eq!(decode(specs), expected, "known columns read in place");
    if let Some((last, rest)) = specs.split_last() {
        assert_eq!(&decode(rest), resp, "one column fewer known");
        let mut other = specs.to_vec();
        let typ = if last.typ == ColumnType::Int { ColumnType::Text } else { ColumnType::Int };
        other.last_mut().expect("not empty").typ = typ;
        assert_eq!(&decode(&other), resp, "another type known");
    }
}

/// A `tablets-routing-v1` payload value: what decodes has a non-empty
/// range and re-encodes to the same bytes (the layout has one form).
pub fn tablet_route(value: &[u8]) {
    // As v1 and as v2 (the version after the replicas).
    for route in [crate::tablets::TabletRoute::decode(value), crate::tablets::TabletRoute::decode_v2(value)] {
        let Ok(route) = route else { continue };
        assert!(route.first_token < route.last_token, "{route:?}");
        let mut again = Vec::new();
        route.encode(&mut again);
        assert_eq!(again, value, "a tablet route re-encodes differently");
    }
}

/// Decodes `data[2..]` as a request body (opcode from `data[0]`, version
/// from `data[1]`); what decodes must survive a re-encoding.
pub fn request(data: &[u8]) {
    let [op, v, body @ ..] = data else { return };
    let Ok(opcode) = Opcode::from_byte(*op) else { return };
    let version = version(*v);
    // Without and with `SCYLLA_USE_METADATA_ID` (a v4 EXECUTE then carries a metadata id).
    for metadata_id in [false, true] {
        let Ok(req) = AnyRequest::decode_ext(opcode, version, metadata_id, body) else { continue };
        let mut again = Vec::new();
        if req.encode_ext(version, metadata_id, 0, 0, &mut again).is_ok() {
            let back = AnyRequest::decode_ext(opcode, version, metadata_id, &again[HEADER_LEN..]);
            assert_eq!(back.as_ref().ok(), Some(&req), "request re-encoding changed it");
        }
    }
}

/// Reads a column type from the start of `data` and a value of that type
/// from the rest; a value that decodes must round-trip.
pub fn value(data: &[u8]) {
    let mut r = Reader::new(data);
    let Ok(typ) = ColumnType::decode(&mut r) else { return };
    let frame = Bytes::copy_from_slice(r.rest());
    let Ok(v) = CqlValue::deserialize(&typ, Some(FrameSlice::whole(&frame))) else { return };
    let Ok(len) = SerializeValue::encoded_len(&v) else { return };
    let mut out = Vec::with_capacity(len);
    SerializeValue::encode(&v, &mut out);
    assert_eq!(out.len(), len, "encoded_len is exact");
    let again = Bytes::copy_from_slice(&out[4..]);
    let back = CqlValue::deserialize(&typ, Some(FrameSlice::whole(&again)));
    assert_eq!(back.as_ref().ok(), Some(&v), "value round trip for {typ}");
}

/// A page of rows built from a fuzz input, for the harnesses of row
/// readers (here and in the driver and CDC crates):
///
/// ```text
/// [u8 columns (mod 9)] { [u8 name] [option type] } per column, then the rows
/// section of a ROWS body: [int rows count] { [bytes] value } per cell
/// ```
///
/// Column `i` is named `names[name % (names.len() + 1)]`, or `other` when
/// that index is one past the end. `None` when the input does not build one.
pub fn rows(data: &[u8], names: &[&str]) -> Option<Rows> {
    let mut r = Reader::new(data);
    let count = usize::from(r.u8("columns").ok()? % 9);
    let mut specs = Vec::with_capacity(count);
    for _ in 0..count {
        let pick = usize::from(r.u8("column name").ok()?);
        let name = names.get(pick % (names.len() + 1)).copied().unwrap_or("other");
        let typ = ColumnType::decode(&mut r).ok()?;
        specs.push(ColumnSpec { keyspace: "ks".into(), table: "t".into(), name: name.into(), typ });
    }
    let metadata = ResultMetadata { columns_count: count, specs: Some(specs), ..Default::default() };
    let mut body = Vec::new();
    metadata.encode(&mut body).ok()?;
    body.extend_from_slice(r.rest());
    Rows::decode(Bytes::from(body), 0).ok()
}

/// The [`rows`] input of these columns (name index, type) and rows: what
/// seed inputs are made of.
///
/// # Panics
///
/// On more than 8 columns or values too large for the protocol.
pub fn rows_input(columns: &[(u8, ColumnType)], rows: &[Vec<Option<&[u8]>>]) -> Vec<u8> {
    assert!(columns.len() < 9, "at most 8 columns");
    let mut out = vec![columns.len() as u8];
    for (name, typ) in columns {
        out.push(*name);
        typ.encode(&mut out);
    }
    out.put_i32(i32::try_from(rows.len()).expect("row count fits"));
    for row in rows {
        for v in row {
            codec::write_bytes(&mut out, "value", *v).expect("value fits");
        }
    }
    out
}

/// `ShardingInfo` from a SUPPORTED body. `data` is `[long token][short low
/// port][short high port]` then the `[string multimap]`. The multimap is
/// read twice (as `&str` pairs and as generic entries) with the same
/// result; sharding that is accepted keeps its invariants (shard below the
/// shard count, every token and every candidate source port of the shard
/// in range), and its keys written back read back to the same sharding.
pub fn sharding(data: &[u8]) {
    let mut r = Reader::new(data);
    let (Ok(token), Ok(low), Ok(high)) = (r.i64("token"), r.u16("low port"), r.u16("high port")) else { return };
    let Ok(supported) = r.string_multimap("supported") else { return };
    // The other informational keys of SUPPORTED: a host id read is the one
    // value's, and writes back as it was read (lowercase hyphenated aside).
    let owned: Vec<(String, Vec<String>)> =
        supported.iter().map(|(k, v)| ((*k).to_owned(), v.iter().map(|s| (*s).to_owned()).collect())).collect();
    if let Some(id) = crate::handshake::host_id(&owned) {
        let written = owned.iter().find(|(k, _)| k == crate::handshake::HOST_ID).and_then(|(_, v)| v.first());
        assert_eq!(written.and_then(|w| uuid::Uuid::try_parse(w).ok()), Some(id));
    }
    let info = ShardingInfo::from_supported(&supported);
    let again = ShardingInfo::from_entries(supported.iter().map(|(k, v)| (*k, v.iter())));
    assert_eq!(info, again, "the two readers of SUPPORTED disagree");
    let Ok(Some(info)) = info else { return };
    let sharder = info.sharder();
    let nr = sharder.nr_shards();
    assert!(info.shard() < nr.get(), "{info:?}");
    assert!(sharder.ignore_msb() < 64, "{info:?}");
    assert!(sharder.shard_of(Token::from(token)) < nr.get(), "{info:?}: token {token}");

    let mut keys = vec![
        ("SCYLLA_SHARD", info.shard().to_string()),
        ("SCYLLA_NR_SHARDS", nr.to_string()),
        ("SCYLLA_SHARDING_IGNORE_MSB", sharder.ignore_msb().to_string()),
        ("SCYLLA_PARTITIONER", Partitioner::Murmur3.class_name().to_owned()),
        ("SCYLLA_SHARDING_ALGORITHM", BIASED_TOKEN_ROUND_ROBIN.to_owned()),
    ];
    if let Some(p) = info.shard_aware_port() {
        keys.push(("SCYLLA_SHARD_AWARE_PORT", p.to_string()));
    }
    if let Some(p) = info.shard_aware_port_ssl() {
        keys.push(("SCYLLA_SHARD_AWARE_PORT_SSL", p.to_string()));
    }
    let back = ShardingInfo::from_entries(keys.iter().map(|(k, v)| (*k, std::iter::once(v))));
    assert_eq!(back, Ok(Some(info)), "sharding written back reads differently");

    let ports = ShardPortIterator::new(info.shard(), nr, low..=high, token as usize);
    let expected = ports.len();
    let mut seen = 0;
    for port in ports {
        assert!((low..=high).contains(&port), "port {port} outside {low}..={high}");
        assert_eq!(sharder.shard_of_source_port(port), info.shard(), "port {port} of another shard");
        seen += 1;
    }
    assert_eq!(seen, expected, "ShardPortIterator's length");
}

/// The seed inputs of a fuzz target: every file in `dir` (sorted by name),
/// with its name. For the unit tests that run a harness on its seeds.
///
/// # Panics
///
/// When `dir` cannot be read or holds no file: seeds that silently vanish
/// would make those tests pass on nothing.
pub fn seed_files(dir: &Path) -> Vec<(String, Vec<u8>)> {
    let entries = std::fs::read_dir(dir).unwrap_or_else(|e| panic!("seed folder {}: {e}", dir.display()));
    let mut seeds: Vec<(String, Vec<u8>)> = entries
        .filter_map(Result::ok)
        .filter(|e| e.path().is_file())
        .map(|e| {
            let data = std::fs::read(e.path()).unwrap_or_else(|err| panic!("{}: {err}", e.path().display()));
            (e.file_name().to_string_lossy().into_owned(), data)
        })
        .collect();
    assert!(!seeds.is_empty(), "no seed in {}", dir.display());
    seeds.sort();
    seeds
}

/// Writes `seeds` (name, input) into `dir`, replacing files of the same
/// name: how the seed corpora are (re)generated, by the ignored
/// `write_seeds` tests.
///
/// # Panics
///
/// When a file cannot be written.
pub fn write_seed_files(dir: &Path, seeds: &[(&str, Vec<u8>)]) {
    std::fs::create_dir_all(dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
    for (name, data) in seeds {
        let path = dir.join(name);
        std::fs::write(&path, data).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    }
}

/// Inputs of every length below `lengths`, from a xorshift generator seeded with `seed`: the
/// garbage the harnesses' own tests feed them besides their seeds.
pub fn garbage(seed: u32, lengths: usize) -> impl Iterator<Item = Vec<u8>> {
    let mut x = seed.max(1);
    (0..lengths).map(move |len| {
        (0..len)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 17;
                x ^= x << 5;
                x as u8
            })
            .collect()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn seed_dir(target: &str) -> std::path::PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../fuzz/seeds").join(target)
    }

    /// A SUPPORTED multimap as the `sharding` target reads it.
    fn sharding_input(token: i64, low: u16, high: u16, entries: &[(&str, Vec<&str>)]) -> Vec<u8> {
        let mut out = Vec::new();
        out.put_i64(token);
        out.put_u16(low);
        out.put_u16(high);
        out.put_u16(entries.len() as u16);
        for (k, v) in entries {
            codec::write_string(&mut out, "key", k).expect("key");
            codec::write_string_list(&mut out, "values", v).expect("values");
        }
        out
    }

    fn scylla<'a>(shard: &'a str, nr: &'a str, msb: &'a str) -> Vec<(&'a str, Vec<&'a str>)> {
        vec![
            ("COMPRESSION", vec!["lz4", "snappy"]),
            ("SCYLLA_SHARD", vec![shard]),
            ("SCYLLA_NR_SHARDS", vec![nr]),
            ("SCYLLA_SHARDING_IGNORE_MSB", vec![msb]),
            ("SCYLLA_PARTITIONER", vec!["org.apache.cassandra.dht.Murmur3Partitioner"]),
            ("SCYLLA_SHARDING_ALGORITHM", vec!["biased-token-round-robin"]),
            ("SCYLLA_SHARD_AWARE_PORT", vec!["19042"]),
            ("SCYLLA_SHARD_AWARE_PORT_SSL", vec!["19142"]),
        ]
    }

    /// A Void RESULT carrying a `tablets-routing-v1` payload, as the response target reads it.
    fn void_with_tablet_route() -> Vec<u8> {
        let route = crate::tablets::TabletRoute {
            first_token: -100,
            last_token: 100,
            replicas: vec![crate::tablets::TabletReplica { host_id: uuid::Uuid::from_u128(7), shard: 1 }],
            version: None,
        };
        let mut value = Vec::new();
        route.encode(&mut value);
        let mut out = vec![0x84, Flags::CUSTOM_PAYLOAD, 0, 0, 0x08, 0, 0, 0, 0];
        out.put_u16(1);
        codec::write_string(&mut out, "key", crate::tablets::PAYLOAD_KEY).expect("key");
        out.put_i32(value.len() as i32);
        out.extend_from_slice(&value);
        out.put_i32(1);
        out
    }

    /// A v4 PREPARED with a result metadata id after the statement id, as
    /// ScyllaDB answers with `SCYLLA_USE_METADATA_ID` (no bind markers, one
    /// result column `ks.t.v text`).
    fn v4_prepared_with_metadata_id() -> Vec<u8> {
        let mut out = vec![0x84, 0, 0, 0, 0x08, 0, 0, 0, 0];
        out.extend([0, 0, 0, 4, 0, 1, 0xAA, 0, 2, b'M', b'D']);
        out.extend([0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2, b'k', b's', 0, 1, b't']);
        out.extend([0, 0, 0, 1, 0, 0, 0, 1, 0, 2, b'k', b's', 0, 1, b't', 0, 1, b'v', 0, 0x0D]);
        out
    }

    /// The seed corpora of this crate's targets.
    fn seeds() -> Vec<(&'static str, &'static str, Vec<u8>)> {
        let mut out = vec![
            ("frame_decoder", "v4_ready", vec![0, 0x84, 0, 0, 0, 0x02, 0, 0, 0, 0]),
            (
                "frame_decoder",
                "v5_segment",
                vec![2, 0x09, 0x00, 0x02, 0xa4, 0xc8, 0xc1, 0x05, 0, 0, 0, 0x05, 0, 0, 0, 0, 0x10, 0x86, 0x28, 0x4d],
            ),
            ("response", "void_result", vec![0x84, 0, 0, 0, 0x08, 0, 0, 0, 4, 0, 0, 0, 1]),
            ("response", "void_with_tablet_route", void_with_tablet_route()),
            ("request", "query", vec![0x07, 1, 0, 0, 0, 1, b'x', 0, 1, 0, 0, 0, 0]),
            // v4 EXECUTE with a result metadata id (SCYLLA_USE_METADATA_ID): id, metadata id, ONE, skip metadata.
            ("request", "v4_execute_metadata_id", vec![0x0A, 0, 0, 1, 0xAA, 0, 2, b'M', b'D', 0, 1, 0x02]),
            ("response", "v4_prepared_metadata_id", v4_prepared_with_metadata_id()),
            ("value", "int", vec![0, 0x09, 0, 0, 0, 42]),
        ];
        let list = ColumnType::List(Box::new(ColumnType::Text));
        let mut v = Vec::new();
        list.encode(&mut v);
        v.extend_from_slice(&[0, 0, 0, 2, 0, 0, 0, 1, b'a', 0, 0, 0, 2, b'b', b'c']);
        out.push(("value", "list_text", v));
        let shards = [
            ("scylla_4_shards", sharding_input(-42, 49152, 65535, &scylla("3", "4", "12"))),
            ("scylla_1_shard", sharding_input(i64::MIN, 1024, 1100, &scylla("0", "1", "0"))),
            (
                "cassandra",
                sharding_input(7, 49152, 65535, &[("COMPRESSION", vec!["lz4"]), ("CQL_VERSION", vec!["3.4.7"])]),
            ),
            (
                "missing_keys",
                sharding_input(7, 0, 65535, &[("SCYLLA_SHARD", vec!["1"]), ("SCYLLA_NR_SHARDS", vec!["2"])]),
            ),
        ];
        out.extend(shards.into_iter().map(|(name, data)| ("sharding", name, data)));
        out
    }

    /// Regenerates the seed files of this crate's targets:
    /// `cargo test -p shardwise-protocol --lib write_seeds -- --ignored`.
    #[test]
    #[ignore = "writes fuzz/seeds"]
    fn write_seeds() {
        for (target, name, data) in seeds() {
            write_seed_files(&seed_dir(target), &[(name, data)]);
        }
    }

    /// Every harness runs clean on its committed seeds, and the seeds are
    /// the ones [`seeds`] describes.
    #[test]
    fn harnesses_run_on_their_seeds() {
        type Harness = fn(&[u8]);
        let harnesses: [(&str, Harness); 5] = [
            ("frame_decoder", frame_decoder),
            ("response", response),
            ("request", request),
            ("value", value),
            ("sharding", sharding),
        ];
        for (target, harness) in harnesses {
            for (name, data) in seed_files(&seed_dir(target)) {
                eprintln!("{target}/{name}");
                harness(&data);
            }
        }
        for (target, name, data) in seeds() {
            let path = seed_dir(target).join(name);
            assert_eq!(std::fs::read(&path).ok(), Some(data), "{} is stale: run write_seeds", path.display());
        }
    }

    /// The sharding seeds reach what they are meant to: accepted sharding,
    /// no sharding, a typed error.
    #[test]
    fn sharding_seeds_reach_every_outcome() {
        let read = |data: &[u8]| {
            let mut r = Reader::new(&data[12..]);
            let m = r.string_multimap("m").expect("multimap");
            ShardingInfo::from_supported(&m)
        };
        let s = seeds();
        let get = |n: &str| &s.iter().find(|(t, name, _)| *t == "sharding" && *name == n).expect("seed").2;
        assert_eq!(read(get("scylla_4_shards")).expect("valid").map(|i| i.shard()), Some(3));
        assert_eq!(read(get("cassandra")), Ok(None));
        assert!(read(get("missing_keys")).is_err());
    }

    /// Inputs on which a fuzz target once failed; each must pass now.
    #[test]
    fn regressions() {
        // EXECUTE with the "values with names" flag and zero values: decoded as named,
        // re-encoded without values (fuzz `request`, fixed in QueryParameters::decode).
        request(&[0x0a, 0x00, 0, 0, 0, 0, 0x55, 0, 0, 0, 0, 0xfc, 0, 0, 0x07]);
        // ROWS with zero columns, HAS_MORE_PAGES and a null paging state,
        // 20 rows: the zero-column bound was the body size, which shrank by
        // the 4 bytes of the null paging state on re-encoding (fuzz
        // `response`, fixed in Rows::decode).
        response(&[
            0xef, 0x00, 0x3f, 0x00, 0x08, 0x00, 0xff, 0x01, 0x00, 0x00, 0x00, 0x00, 0x02, 0x06, 0x00, 0x00, 0x02, 0x00,
            0x00, 0x00, 0x00, 0xff, 0xff, 0xff, 0xff, 0x00, 0x00, 0x00, 0x14,
        ]);
    }

    /// A nested `vector` type whose size overflows `usize`, then a value:
    /// the size multiplied without a check (fuzz `value`, fixed in
    /// `parse_vector_args`).
    #[test]
    fn value_regression_nested_vector_overflow() {
        let class = concat!(
            "org.apache.cassandra.db.marshal.VectorType(",
            "org.apache.cassandra.db.marshal.VectorType(",
            "org.apache.cassandra.db.marshal.VectorType(org.apache.cassandra.db.marshal.UUIDType, 4294967295), ",
            "4294967295), 4294967295)"
        )
        .as_bytes();
        let mut data = vec![0, 0];
        data.extend_from_slice(&(class.len() as u16).to_be_bytes());
        data.extend_from_slice(class);
        data.extend_from_slice(&[0; 32]);
        value(&data);
    }

    #[test]
    fn harnesses_accept_seeds_and_garbage() {
        let seeds: [&[u8]; 6] = [
            &[],
            &[0, 0x84, 0, 0, 0, 0x02, 0, 0, 0, 0],
            &[2, 0x09, 0x00, 0x02, 0xa4, 0xc8, 0xc1, 0x05, 0, 0, 0, 0x05, 0, 0, 0, 0, 0x10, 0x86, 0x28, 0x4d],
            &[0x84, 0, 0, 0, 0x08, 0, 0, 0, 4, 0, 0, 0, 1],
            &[0x07, 1, 0, 0, 0, 1, b'x', 0, 1, 0, 0, 0, 0],
            &[0, 0x09, 0, 0, 0, 42],
        ];
        for s in seeds {
            frame_decoder(s);
            response(s);
            request(s);
            value(s);
        }
        for data in garbage(0x1234_5678, 300) {
            tablet_route(&data);
            frame_decoder(&data);
            response(&data);
            request(&data);
            value(&data);
            sharding(&data);
        }
    }
}
