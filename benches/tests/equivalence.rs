//! The benchmarks in `benches/codec.rs` compare like with like: for each
//! pair, shardwise and the official driver produce the same output.

use bytes::Bytes;
use scylla_cql::serialize::row::RowSerializationContext;

#[path = "../pairs/mod.rs"]
mod pairs;

use pairs::*;

/// Both EXECUTE envelopes are byte for byte the same (v4, stream 0, no
/// flags), header included, through both official entry points.
#[test]
fn execute_bytes_match() {
    let sw_specs = sw_specs();
    let off_specs = off_specs();
    let ctx = RowSerializationContext::from_specs(&off_specs);
    for row in [ROW, (0, 0, ""), (i64::MIN, i64::MAX, "ünïcödé")] {
        let mut sw = Vec::new();
        let n = sw_execute(&mut sw, &sw_specs, &row);
        assert_eq!(n, sw.len());
        let mut off = vec![0xff; 3]; // a reused buffer is cleared first
        off_execute(&mut off, &ctx, &row);
        assert_eq!(sw, off, "EXECUTE of {row:?}");
        assert_eq!(sw, off_execute_make(&ctx, &row).get_data(), "EXECUTE of {row:?} via SerializedRequest::make");
    }
    // Reuse leaves no trace.
    let mut buf = Vec::new();
    sw_execute(&mut buf, &sw_specs, &(1, 2, "a much longer text than the next one"));
    let mut fresh = Vec::new();
    sw_execute(&mut fresh, &sw_specs, &ROW);
    sw_execute(&mut buf, &sw_specs, &ROW);
    assert_eq!(buf, fresh);
}

/// Both BATCH envelopes are byte for byte the same.
#[test]
fn batch_bytes_match() {
    let sw_specs = sw_specs();
    let off_specs = off_specs();
    let statements = off_batch_statements();
    let mut sw = Vec::new();
    let n = sw_batch(&mut sw, &sw_specs, &[ROW; BATCH_LEN]);
    assert_eq!(n, sw.len());
    let mut off = Vec::new();
    off_batch(&mut off, &statements, &off_specs, &[ROW; BATCH_LEN]);
    assert_eq!(sw, off);
    // Distinct rows land in order on both sides.
    let texts: Vec<String> = (0..BATCH_LEN).map(|i| "x".repeat(i)).collect();
    let rows: [Row<'_>; BATCH_LEN] = std::array::from_fn(|i| (i as i64, -(i as i64), texts[i].as_str()));
    sw_batch(&mut sw, &sw_specs, &rows);
    off_batch(&mut off, &statements, &off_specs, &rows);
    assert_eq!(sw, off);
    assert_eq!(sw[4], 0x0D, "BATCH opcode");
    assert_eq!(u16::from_be_bytes([sw[10], sw[11]]) as usize, BATCH_LEN);
}

/// Both sides reject values that do not fit the bind markers, so both pay
/// for the type check.
#[test]
fn both_sides_type_check() {
    use scylla_cql::serialize::row::SerializedValues;
    use shardwise_protocol::types::ser::SerializeValues;
    let wrong = (1_i64, "not a bigint", "x");
    assert!(wrong.check_types(&sw_specs()).is_err());
    let off_specs = off_specs();
    let ctx = RowSerializationContext::from_specs(&off_specs);
    assert!(SerializedValues::from_serializable(&ctx, &wrong).is_err());
}

/// Both decoders read the same 1,000 rows, borrowed and owned.
#[test]
fn rows_match() {
    let body: Bytes = rows_body();
    let expected: Vec<(i64, i64, String)> = (0..PAGE_ROWS).map(page_row).collect();
    assert_eq!(sw_rows_owned(&body), expected);
    assert_eq!(sw_rows_borrowed_vec(&body), expected);
    assert_eq!(off_rows_owned(&body), expected);
    assert_eq!(off_rows_borrowed_vec(&body), expected);
    assert_eq!(sw_rows_borrowed(&body), off_rows_borrowed(&body));
}

/// Same Murmur3 tokens for the benchmark keys and for every length from 0
/// to 100 bytes (all tail lengths, one and several 16-byte blocks, bytes
/// with the high bit set).
#[test]
fn tokens_match() {
    assert_eq!(sw_token(&KEY_8), off_token(&KEY_8));
    assert_eq!(sw_token(KEY_32), off_token(KEY_32));
    let bytes: Vec<u8> = (0..100_u32).map(|i| (i.wrapping_mul(151) ^ 0xa5) as u8).collect();
    for len in 0..=bytes.len() {
        let key = &bytes[..len];
        assert_eq!(sw_token(key), off_token(key), "key of {len} bytes");
    }
}

/// Same shards for the benchmark tokens, over several shard counts and
/// `ignore_msb` values.
#[test]
fn shards_match() {
    let tokens = shard_tokens();
    for (nr, msb) in [(NR_SHARDS, IGNORE_MSB), (1, 0), (3, 0), (7, 12), (64, 12), (255, 20), (u16::MAX, 63)] {
        let sw = sw_sharder(nr, msb);
        let off = off_sharder(nr, msb);
        for &t in &tokens {
            assert_eq!(
                u32::from(sw.shard_of(shardwise_protocol::token::Token::new(t))),
                off.shard_of(scylla::routing::Token::new(t)),
                "token {t}, {nr} shards, ignore_msb {msb}"
            );
        }
        assert_eq!(sw_shards(&sw, &tokens), off_shards(&off, &tokens));
    }
}
