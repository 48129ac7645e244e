//! Every row of the token and shard test vectors (`tests/data/`, described in its README),
//! checked against `token` and `sharding`.
//!
//! The files are read at test time. A missing file fails the test with the path it looked at;
//! it is never skipped.

#![allow(clippy::unwrap_used)] // A test may panic on a broken fixture.

use std::num::NonZeroU16;
use std::path::PathBuf;

use shardwise_protocol::sharding::Sharder;
use shardwise_protocol::token::{murmur3_h1, Murmur3Hasher, Partitioner, Token};

/// `tests/data/<name>` of this crate.
fn vector_path(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/data").join(name)
}

/// The data rows of a vector file: comment lines (`#`) and blank lines dropped, the header
/// checked and dropped; each row split on commas, with its 1-based line number.
fn rows(name: &str, header: &str) -> Vec<(usize, Vec<String>)> {
    let path = vector_path(name);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| {
        panic!("cannot read test vectors at {}: {e} (this test fails rather than skips)", path.display())
    });
    let mut lines = text
        .lines()
        .enumerate()
        .map(|(i, line)| (i + 1, line.trim()))
        .filter(|(_, line)| !line.is_empty() && !line.starts_with('#'));
    let (_, first) = lines.next().unwrap_or_else(|| panic!("{name}: no header line"));
    assert_eq!(first, header, "{name}: unexpected header");
    lines.map(|(n, line)| (n, line.split(',').map(str::to_owned).collect())).collect()
}

/// Decodes a hex string.
fn hex(s: &str) -> Vec<u8> {
    assert_eq!(s.len() % 2, 0, "odd-length hex {s:?}");
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap_or_else(|e| panic!("hex {s:?}: {e}")))
        .collect()
}

#[test]
fn shard_of_token_all_rows() {
    // nr_shards = 4, ignore_msb = 12 (see the file's comment line).
    let sharder = Sharder::new(NonZeroU16::new(4).unwrap(), 12).unwrap();
    let rows = rows("shard_of_token.csv", "token,shard");
    assert_eq!(rows.len(), 10_000, "shard_of_token.csv should hold 10 000 pairs");
    let mut failures = Vec::new();
    for (line, fields) in &rows {
        let [token, shard] = fields.as_slice() else {
            panic!("shard_of_token.csv:{line}: expected 2 fields, got {fields:?}");
        };
        let token: Token = token.parse().unwrap_or_else(|e| panic!("line {line}: token: {e}"));
        let shard: u16 = shard.parse().unwrap_or_else(|e| panic!("line {line}: shard: {e}"));
        let got = sharder.shard_of(token);
        if got != shard {
            failures.push(format!("line {line}: token {token} expected shard {shard}, got {got}"));
        }
    }
    assert!(failures.is_empty(), "{} mismatches:\n{}", failures.len(), failures.join("\n"));
}

#[test]
fn murmur3_token_all_rows() {
    let rows = rows("murmur3_token.csv", "kind,key_hex,token");
    assert_eq!(rows.len(), 976, "murmur3_token.csv should hold 976 rows");
    let mut kinds = [0usize; 3];
    let mut failures = Vec::new();
    for (line, fields) in &rows {
        let [kind, key_hex, token] = fields.as_slice() else {
            panic!("murmur3_token.csv:{line}: expected 3 fields, got {fields:?}");
        };
        // Kinds: `blob`, `bigint` and `composite_<types>` (e.g. `composite_int_text`).
        let composite = kind.starts_with("composite");
        match kind.as_str() {
            "blob" => kinds[0] += 1,
            "bigint" => kinds[1] += 1,
            _ if composite => kinds[2] += 1,
            other => panic!("murmur3_token.csv:{line}: unknown kind {other:?}"),
        }
        // key_hex is already the byte string that was hashed (composite keys serialized).
        let key = hex(key_hex);
        let expected: i64 = token.parse().unwrap_or_else(|e| panic!("line {line}: token: {e}"));

        let whole = Token::murmur3(&key);
        // The same bytes streamed one at a time, and in uneven 7-byte pieces.
        let mut bytewise = Murmur3Hasher::new();
        key.iter().for_each(|b| bytewise.write(std::slice::from_ref(b)));
        let mut pieces = Murmur3Hasher::new();
        key.chunks(7).for_each(|c| pieces.write(c));

        if whole.value() != expected
            || Token::normalized(murmur3_h1(&key)) != whole
            || bytewise.finish_token() != whole
            || pieces.finish_token() != whole
            || Partitioner::Murmur3.token_of_single(&key) != whole
        {
            failures.push(format!(
                "line {line}: {kind} {key_hex} expected {expected}, got {whole} \
                 (bytewise {}, pieces {})",
                bytewise.finish_token(),
                pieces.finish_token()
            ));
        }
        if composite {
            check_composite(*line, &key, expected, &mut failures);
        }
    }
    assert!(kinds.iter().all(|&n| n > 0), "every key kind should occur: {kinds:?}");
    assert!(failures.is_empty(), "{} mismatches:\n{}", failures.len(), failures.join("\n"));
}

/// Splits a serialized composite key back into components and hashes them through the
/// allocation-free composite path, which must give the same token.
fn check_composite(line: usize, key: &[u8], expected: i64, failures: &mut Vec<String>) {
    let mut components = Vec::new();
    let mut rest = key;
    while !rest.is_empty() {
        let Some((len, after)) = rest.split_first_chunk::<2>() else {
            panic!("line {line}: truncated component length");
        };
        let len = usize::from(u16::from_be_bytes(*len));
        assert!(after.len() > len && after[len] == 0, "line {line}: malformed component");
        components.push(&after[..len]);
        rest = &after[len + 1..];
    }
    assert!(components.len() >= 2, "line {line}: composite key with < 2 components");
    let composite = Partitioner::Murmur3
        .token_of_composite(components.iter().copied())
        .unwrap_or_else(|e| panic!("line {line}: {e}"));
    let by_key =
        Partitioner::Murmur3.token_of_key(components.iter().copied()).unwrap_or_else(|e| panic!("line {line}: {e}"));
    if composite.value() != expected || by_key != Some(composite) {
        failures.push(format!(
            "line {line}: composite components {components:02x?} expected {expected}, got \
             {composite} / {by_key:?}"
        ));
    }
}
