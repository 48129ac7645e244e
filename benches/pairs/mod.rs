//! The operations compared in `benches/codec.rs`, one function per side, so
//! that `tests/equivalence.rs` checks exactly the code that is timed.
//!
//! Each pair does the same work on both sides:
//!
//! - EXECUTE / BATCH: from typed bind values `(i64, i64, &str)` and the bind
//!   markers of the prepared statement (`pk bigint, v1 bigint, v2 text`),
//!   type-check the values and write a whole protocol-v4 envelope (header and
//!   body) into a reused `Vec`. The official driver first serializes the
//!   values into a `SerializedValues` and then the request around them, as
//!   its connection layer does; `official_execute_make` is its own framing
//!   entry point (`SerializedRequest::make`, a fresh `Vec` per request).
//! - ROWS: from the body of a RESULT (a `Bytes`, shared, not copied), decode
//!   the Rows result and its metadata, then read every row as
//!   `(i64, i64, &str)` or `(i64, i64, String)`.
//! - Tokens and shards: the public partitioner and sharder of each side.
#![allow(dead_code)]

use std::borrow::Cow;
use std::num::NonZeroU16;

use bytes::Bytes;

use shardwise_protocol::consistency::Consistency as SwConsistency;
use shardwise_protocol::frame::ProtocolVersion;
use shardwise_protocol::request::{
    encode_request, Batch as SwBatch, BatchStatement as SwBatchStatement, BatchType, Execute as SwExecute,
    QueryParameters as SwQueryParameters, StatementKind,
};
use shardwise_protocol::response::ResultMessage;
use shardwise_protocol::rows::{ResultMetadata, Rows};
use shardwise_protocol::sharding::Sharder as SwSharder;
use shardwise_protocol::token::Token as SwToken;
use shardwise_protocol::types::ser::SerializeValues;
use shardwise_protocol::types::{ColumnSpec as SwColumnSpec, ColumnType as SwColumnType};

use scylla::routing::partitioner::{Murmur3Partitioner, Partitioner};
use scylla::routing::{Sharder as OffSharder, Token as OffToken};
use scylla_cql::frame::protocol_features::ProtocolFeatures;
use scylla_cql::frame::request::batch::{
    Batch as OffBatch, BatchStatement as OffBatchStatement, BatchType as OffBatchType,
};
use scylla_cql::frame::request::execute::ExecuteV2;
use scylla_cql::frame::request::query::QueryParameters as OffQueryParameters;
use scylla_cql::frame::request::SerializableRequest;
use scylla_cql::frame::response::result::cow_bytes::CowBytes;
use scylla_cql::frame::response::result::{
    deserialize_with_features, ColumnSpec as OffColumnSpec, ColumnType as OffColumnType, NativeType,
    Result as OffResult, TableSpec,
};
use scylla_cql::frame::SerializedRequest;
use scylla_cql::serialize::raw_batch::RawBatchValuesAdapter;
use scylla_cql::serialize::row::{RowSerializationContext, SerializedValues};
use scylla_cql::Consistency as OffConsistency;

/// A prepared statement id (Scylla's are 16-byte MD5 digests).
pub const STATEMENT_ID: &[u8] =
    &[0x5c, 0x1d, 0xa7, 0x03, 0x9e, 0x41, 0x22, 0x88, 0x0b, 0xf4, 0x6a, 0x17, 0xd2, 0x3e, 0x90, 0x4c];

/// One row of bind values for `INSERT INTO ks.t (pk, v1, v2) VALUES (?, ?, ?)`.
pub type Row<'a> = (i64, i64, &'a str);

/// The bind values used by the EXECUTE and BATCH benchmarks.
pub const ROW: Row<'static> = (4_242_424_242, -17, "a text value of about thirty b");

/// Statements per BATCH.
pub const BATCH_LEN: usize = 16;

/// Rows per RESULT page.
pub const PAGE_ROWS: usize = 1_000;

/// Envelope header length of protocol v4.
const HEADER_LEN: usize = 9;

// --- fixtures ------------------------------------------------------------

/// The bind markers / result columns, shardwise form.
pub fn sw_specs() -> Vec<SwColumnSpec> {
    let spec = |name: &str, typ| SwColumnSpec { keyspace: "ks".into(), table: "t".into(), name: name.into(), typ };
    vec![spec("pk", SwColumnType::BigInt), spec("v1", SwColumnType::BigInt), spec("v2", SwColumnType::Text)]
}

/// The bind markers / result columns, official form.
pub fn off_specs() -> Vec<OffColumnSpec<'static>> {
    let table = TableSpec::borrowed("ks", "t");
    vec![
        OffColumnSpec::borrowed("pk", OffColumnType::Native(NativeType::BigInt), table.clone()),
        OffColumnSpec::borrowed("v1", OffColumnType::Native(NativeType::BigInt), table.clone()),
        OffColumnSpec::borrowed("v2", OffColumnType::Native(NativeType::Text), table),
    ]
}

/// The official batch's statement list (built once, as a `Batch` is).
pub fn off_batch_statements() -> Vec<OffBatchStatement<'static>> {
    vec![OffBatchStatement::Prepared { id: Cow::Borrowed(STATEMENT_ID) }; BATCH_LEN]
}

/// Row `i` of the page used by the ROWS benchmarks.
pub fn page_row(i: usize) -> (i64, i64, String) {
    let i = i as i64;
    (i * 7_919 - 1_000_000, i.wrapping_mul(0x9e37_79b9_7f4a_7c15_u64 as i64), format!("row-{i:06}-payload-text"))
}

/// The body of a RESULT message (kind Rows, full metadata, [`PAGE_ROWS`]
/// rows of `(bigint, bigint, text)`), as it arrives after the envelope
/// header. Built with shardwise's encoder; the official decoder reading it
/// back identically is part of the equivalence test.
pub fn rows_body() -> Bytes {
    let specs = sw_specs();
    let metadata = ResultMetadata { columns_count: specs.len(), specs: Some(specs), ..Default::default() };
    let owned: Vec<(i64, i64, String)> = (0..PAGE_ROWS).map(page_row).collect();
    let cells: Vec<[[u8; 8]; 2]> = owned.iter().map(|r| [r.0.to_be_bytes(), r.1.to_be_bytes()]).collect();
    let rows: Vec<Vec<Option<&[u8]>>> =
        owned.iter().zip(&cells).map(|(r, c)| vec![Some(&c[0][..]), Some(&c[1][..]), Some(r.2.as_bytes())]).collect();
    let rows = Rows::from_raw(metadata, &rows).expect("valid rows");
    let mut body = Vec::new();
    ResultMessage::Rows(rows).encode(ProtocolVersion::V4, &mut body).expect("encodable rows");
    Bytes::from(body)
}

/// Partition keys of 8 bytes (a serialized bigint) and 32 bytes (a text key).
pub const KEY_8: [u8; 8] = 4_242_424_242_i64.to_be_bytes();
pub const KEY_32: &[u8; 32] = b"user:0000000000042:session:abcde";

/// Tokens for the shard benchmark: spread over the ring, plus the edges.
pub fn shard_tokens() -> Vec<i64> {
    let mut t: Vec<i64> = (0..1_021_u64).map(|i| SwToken::murmur3(&i.to_be_bytes()).value()).collect();
    t.extend([i64::MIN + 1, -1, 0, 1, i64::MAX]);
    t
}

/// A node with 8 shards and Scylla's default `ignore_msb` of 12.
pub const NR_SHARDS: u16 = 8;
pub const IGNORE_MSB: u8 = 12;

pub fn sw_sharder(nr_shards: u16, ignore_msb: u8) -> SwSharder {
    SwSharder::new(NonZeroU16::new(nr_shards).expect("nonzero"), ignore_msb).expect("msb < 64")
}

pub fn off_sharder(nr_shards: u16, ignore_msb: u8) -> OffSharder {
    OffSharder::new(NonZeroU16::new(nr_shards).expect("nonzero"), ignore_msb)
}

// --- EXECUTE ---------------------------------------------------------------

/// shardwise: check the values against the bind markers (as the driver's
/// `PreparedStatement` does) and write the envelope into `buf`.
pub fn sw_execute(buf: &mut Vec<u8>, specs: &[SwColumnSpec], row: &Row<'_>) -> usize {
    buf.clear();
    row.check_types(specs).expect("values fit the bind markers");
    let request = SwExecute {
        id: STATEMENT_ID,
        result_metadata_id: None,
        params: SwQueryParameters::new(SwConsistency::LocalQuorum, row),
    };
    encode_request(&request, ProtocolVersion::V4, 0, 0, buf).expect("encodable EXECUTE")
}

/// Writes the v4 request header the way `SerializedRequest::make` does
/// (no compression, no tracing, stream 0), over the 9 bytes reserved first.
fn off_finish_header(buf: &mut [u8], opcode: u8) {
    buf[0] = 4;
    buf[4] = opcode;
    let len = (buf.len() - HEADER_LEN) as u32;
    buf[5..HEADER_LEN].copy_from_slice(&len.to_be_bytes());
}

fn off_execute_request<'a>(values: &'a SerializedValues) -> ExecuteV2<'a> {
    ExecuteV2 {
        id: CowBytes::Borrowed(STATEMENT_ID),
        result_metadata_id: None,
        parameters: OffQueryParameters {
            consistency: OffConsistency::LocalQuorum,
            values: Cow::Borrowed(values),
            ..Default::default()
        },
        tablet_version_block: None,
    }
}

/// official: serialize (and type-check) the values into `SerializedValues`,
/// then the EXECUTE around them into `buf`, header included.
pub fn off_execute(buf: &mut Vec<u8>, ctx: &RowSerializationContext<'_>, row: &Row<'_>) -> usize {
    buf.clear();
    buf.resize(HEADER_LEN, 0);
    let values = SerializedValues::from_serializable(ctx, row).expect("values fit the bind markers");
    off_execute_request(&values).serialize(buf).expect("serializable EXECUTE");
    off_finish_header(buf, ExecuteV2::OPCODE as u8);
    buf.len()
}

/// official, as its connection layer frames a request:
/// `SerializedRequest::make` into a fresh `Vec`.
pub fn off_execute_make(ctx: &RowSerializationContext<'_>, row: &Row<'_>) -> SerializedRequest {
    let values = SerializedValues::from_serializable(ctx, row).expect("values fit the bind markers");
    SerializedRequest::make(&off_execute_request(&values), None, false).expect("serializable EXECUTE")
}

// --- BATCH ---------------------------------------------------------------

/// shardwise: a logged batch of [`BATCH_LEN`] prepared statements, each
/// checked against its bind markers (as the driver's `BatchEntry::check`
/// does), written into `buf`. The rows are passed as an array, not one row
/// repeated, so the compiler cannot hoist the 16 checks into one.
pub fn sw_batch(buf: &mut Vec<u8>, specs: &[SwColumnSpec], rows: &[Row<'_>; BATCH_LEN]) -> usize {
    buf.clear();
    let statements: [SwBatchStatement<'_, &Row<'_>>; BATCH_LEN] = std::array::from_fn(|i| {
        rows[i].check_types(specs).expect("values fit the bind markers");
        SwBatchStatement { kind: StatementKind::Prepared(STATEMENT_ID), values: &rows[i] }
    });
    let batch = SwBatch {
        kind: BatchType::Logged,
        statements,
        consistency: SwConsistency::LocalQuorum,
        serial_consistency: None,
        timestamp: None,
        keyspace: None,
        now_in_seconds: None,
    };
    encode_request(&batch, ProtocolVersion::V4, 0, 0, buf).expect("encodable BATCH")
}

/// official: the same batch, values serialized through a
/// `RawBatchValuesAdapter` with one serialization context per statement, as
/// its connection layer does.
pub fn off_batch(
    buf: &mut Vec<u8>,
    statements: &[OffBatchStatement<'static>],
    specs: &[OffColumnSpec<'static>],
    rows: &[Row<'_>; BATCH_LEN],
) -> usize {
    buf.clear();
    buf.resize(HEADER_LEN, 0);
    let contexts = statements.iter().map(|_| RowSerializationContext::from_specs(specs));
    let batch = OffBatch {
        statements: Cow::Borrowed(statements),
        batch_type: OffBatchType::Logged,
        consistency: OffConsistency::LocalQuorum,
        serial_consistency: None,
        timestamp: None,
        values: RawBatchValuesAdapter::new(&rows[..], contexts),
    };
    batch.serialize(buf).expect("serializable BATCH");
    off_finish_header(buf, 0x0D);
    buf.len()
}

// --- ROWS ------------------------------------------------------------------

fn sw_rows(body: &Bytes) -> Rows {
    match ResultMessage::decode(ProtocolVersion::V4, body.clone(), 0).expect("valid RESULT") {
        ResultMessage::Rows(rows) => rows,
        other => panic!("not rows: {other:?}"),
    }
}

/// shardwise: decode, then read every row as borrowed `(i64, i64, &str)`;
/// returns a checksum so nothing is optimized away.
pub fn sw_rows_borrowed(body: &Bytes) -> u64 {
    let rows = sw_rows(body);
    let mut sum = 0u64;
    for row in rows.rows::<(i64, i64, &str)>().expect("row type fits") {
        let (a, b, c) = row.expect("valid row");
        sum = sum.wrapping_add(a as u64).wrapping_add(b as u64).wrapping_add(c.len() as u64);
    }
    sum
}

/// shardwise: decode, then collect every row as owned `(i64, i64, String)`.
pub fn sw_rows_owned(body: &Bytes) -> Vec<(i64, i64, String)> {
    let rows = sw_rows(body);
    rows.rows::<(i64, i64, String)>().expect("row type fits").map(|r| r.expect("valid row")).collect()
}

/// shardwise: borrowed rows collected, for the equivalence test.
pub fn sw_rows_borrowed_vec(body: &Bytes) -> Vec<(i64, i64, String)> {
    let rows = sw_rows(body);
    rows.rows::<(i64, i64, &str)>()
        .expect("row type fits")
        .map(|r| r.map(|(a, b, c)| (a, b, c.to_owned())).expect("valid row"))
        .collect()
}

fn off_rows(body: &Bytes) -> scylla_cql::frame::response::result::DeserializedMetadataAndRawRows {
    match deserialize_with_features(body.clone(), None, &ProtocolFeatures::default()).expect("valid RESULT") {
        OffResult::Rows((raw, _paging)) => raw.deserialize_metadata().expect("valid metadata"),
        other => panic!("not rows: {other:?}"),
    }
}

/// official: decode (RESULT, then metadata), then read every row as
/// borrowed `(i64, i64, &str)`.
pub fn off_rows_borrowed(body: &Bytes) -> u64 {
    let rows = off_rows(body);
    let mut sum = 0u64;
    for row in rows.rows_iter::<(i64, i64, &str)>().expect("row type fits") {
        let (a, b, c) = row.expect("valid row");
        sum = sum.wrapping_add(a as u64).wrapping_add(b as u64).wrapping_add(c.len() as u64);
    }
    sum
}

/// official: decode, then collect every row as owned `(i64, i64, String)`.
pub fn off_rows_owned(body: &Bytes) -> Vec<(i64, i64, String)> {
    let rows = off_rows(body);
    rows.rows_iter::<(i64, i64, String)>().expect("row type fits").map(|r| r.expect("valid row")).collect()
}

/// official: borrowed rows collected, for the equivalence test.
pub fn off_rows_borrowed_vec(body: &Bytes) -> Vec<(i64, i64, String)> {
    let rows = off_rows(body);
    rows.rows_iter::<(i64, i64, &str)>()
        .expect("row type fits")
        .map(|r| r.map(|(a, b, c)| (a, b, c.to_owned())).expect("valid row"))
        .collect()
}

// --- tokens and shards ---------------------------------------------------

pub fn sw_token(key: &[u8]) -> i64 {
    SwToken::murmur3(key).value()
}

pub fn off_token(key: &[u8]) -> i64 {
    Murmur3Partitioner.hash_one(key).value()
}

/// Sum of the shards of `tokens` (the loop is what is timed).
pub fn sw_shards(sharder: &SwSharder, tokens: &[i64]) -> u64 {
    tokens.iter().map(|&t| u64::from(sharder.shard_of(SwToken::new(t)))).sum()
}

pub fn off_shards(sharder: &OffSharder, tokens: &[i64]) -> u64 {
    tokens.iter().map(|&t| u64::from(sharder.shard_of(OffToken::new(t)))).sum()
}
