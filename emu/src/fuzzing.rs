//! Fuzzing harnesses for what the front reads from clients and from
//! Cassandra besides DML (`cdclog::fuzzing` has that one): the statement
//! rewriter and its CQL tokenizer (`rewrite`), the DESCRIBE statements and
//! the DESCRIBE output the front reads back (`describe`), and the bound
//! values of EXECUTE requests as the CDC log decodes them (`execute_values`),
//! each a target in `fuzz/` with seeds in `fuzz/seeds/<target>/`. They call
//! the shipped functions; public only for the fuzz crate. Any panic is a
//! bug, errors are expected.
//!
//! The text targets' seeds are the statements of the front's tests and
//! transcripts (and the DESCRIBE answers of the transcripts' results); the
//! EXECUTE seeds are written by `write_seeds` below, from the statements
//! of [`PREPARED`] and values of their columns' types.

use std::cmp::Ordering;

use shardwise_protocol::codec::RawValue;
use shardwise_protocol::frame::{Opcode, ProtocolVersion};
use shardwise_protocol::request::AnyRequest;
use shardwise_protocol::types::ColumnType;

use crate::cdclog::dml::{parse, TableName};
use crate::cdclog::mutation::{build, Binds, Context};
use crate::cdclog::split::{records, Images};
use crate::cdclog::values::{collection_elements, collection_entries, compare, normalize, parse_type, udt_fields};
use crate::describe::print::{format_double, speculative_retry};
use crate::tokens::{next_token, tokenize};

/// The front's keyspace in the `rewrite` harness.
const EMU: &str = "emu";

/// `data[0]` bit 0: the statement is being prepared; the rest is the
/// statement. Every token lies in the text, in order, as the one-at-a-time
/// reader finds it; a rewritten statement can be rewritten again.
pub fn rewrite(data: &[u8]) {
    let Some((&flags, rest)) = data.split_first() else { return };
    let Ok(text) = std::str::from_utf8(rest) else { return };
    if let Some(toks) = tokenize(text) {
        let mut end = 0;
        for t in &toks {
            assert!(end <= t.start && t.start < t.end && t.end <= text.len(), "token {t:?} after {end}");
            assert_eq!(text.get(t.start..t.end), Some(t.text), "token text");
            end = t.end;
            let _ = (t.ident(), t.string_value());
        }
        let mut from = 0;
        for t in &toks {
            let next = next_token(text, from);
            assert_eq!(next, Ok(Some(*t)), "read one at a time from {from}");
            from = t.end;
        }
        assert_eq!(next_token(text, from), Ok(None), "a token after the last");
    }
    let _ = crate::rewrite::may_need_rewrite(text, EMU);
    let prepare = flags & 1 == 1;
    let out = crate::rewrite::rewrite(text, EMU, prepare);
    if let Some(again) = &out.text {
        let _ = crate::rewrite::rewrite(again, EMU, prepare);
    }
}

/// `data` (UTF-8) as a DESCRIBE statement, as a statement of DESCRIBE's
/// answer replayed (`cassandra_properties`) and as a `speculative_retry`
/// value of Cassandra's schema. A replayed statement that changes is
/// another statement.
pub fn describe(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else { return };
    let _ = crate::describe::parse(text);
    if let Some(fixed) = crate::describe::cassandra_properties(text) {
        assert_ne!(fixed, text, "a change that changes nothing");
    }
    let _ = speculative_retry(text);
    if let Ok(x) = text.trim().parse::<f64>() {
        let _ = format_double(x);
    }
}

/// The prepared statements on `cdclog::fuzzing`'s example table that an
/// `execute_values` input executes (`data[0] & 0x7f` picks one).
pub const PREPARED: [&str; 11] = [
    "INSERT INTO ks.t (pk, ck, ck2, s, v1, v2, m, st, l, u, f) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
    "INSERT INTO ks.t (pk, ck, ck2, v1) VALUES (?, ?, ?, ?) USING TTL ? AND TIMESTAMP ?",
    "UPDATE ks.t USING TTL ? SET m = m + ?, st = st - ?, l = l + ?, u.b = ? WHERE pk = ? AND ck = ? AND ck2 = ?",
    "UPDATE ks.t SET m[?] = ?, l[?] = ?, v2 = ?, f = ? WHERE pk = ? AND ck = ? AND ck2 = ?",
    "UPDATE ks.t SET st = ?, u = ?, s = ? WHERE pk IN ? AND ck = ? AND ck2 = ?",
    "DELETE m[?], st, u.a FROM ks.t USING TIMESTAMP ? WHERE pk = ? AND ck = ? AND ck2 = ?",
    "DELETE FROM ks.t WHERE pk = ? AND (ck, ck2) > (?, ?) AND ck < ?",
    "DELETE FROM ks.t WHERE pk IN (?, ?) AND ck IN ?",
    "BEGIN BATCH INSERT INTO ks.t (pk, ck, ck2, v1) VALUES (?, ?, ?, ?); UPDATE ks.t SET l = ? + l WHERE pk = ? AND ck = ? AND ck2 = ?; APPLY BATCH",
    "INSERT INTO ks.t (pk, ck, ck2, v2, m) VALUES (:pk, :ck, :ck2, :v2, :m)",
    "UPDATE ks.t SET l = l - ?, st = st + ? WHERE pk = ? AND ck = ? AND ck2 = ? IF v1 = ?",
];

/// Types the bound values are also read as, beyond the example table's:
/// every comparator and every nesting the log normalizes.
const MORE_TYPES: [&str; 9] = [
    "set<double>",
    "set<uuid>",
    "set<timeuuid>",
    "map<decimal, varint>",
    "set<frozen<map<int, text>>>",
    "tuple<float, inet, date>",
    "vector<float, 3>",
    "list<frozen<set<bigint>>>",
    "set<frozen<tuple<int, text>>>",
];

/// What [`execute_values`] made of an input.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Executed {
    /// Values in the EXECUTE.
    pub values: usize,
    /// Partition mutations built for the picked statement (`None`: an error).
    pub mutations: Option<usize>,
}

/// `data[0]`: bit 7 for a connection with `SCYLLA_USE_METADATA_ID`, the
/// rest picks one of [`PREPARED`]; `data[1..]` is a v4 EXECUTE body, decoded
/// as the front decodes it. Each bound value is taken apart as a
/// collection, a map and a UDT, normalized and compared as every column
/// type (normalizing twice changes nothing; comparing is antisymmetric),
/// then the values are bound to the statement, built into the mutations
/// of the CDC log and split into log rows. `None` when it is no EXECUTE.
pub fn execute_values(data: &[u8]) -> Option<Executed> {
    let (&pick, body) = data.split_first()?;
    let metadata_id = pick & 0x80 != 0;
    let Ok(AnyRequest::Execute(execute)) =
        AnyRequest::decode_ext(Opcode::Execute, ProtocolVersion::V4, metadata_id, body)
    else {
        return None;
    };
    let values = &execute.params.values;
    let schema = crate::cdclog::fuzzing::schema()?;
    let mut types: Vec<ColumnType> = schema.columns.iter().map(|c| c.typ.clone()).collect();
    types.extend(MORE_TYPES.iter().filter_map(|t| parse_type(t, "ks", &|_, _| None).ok()).map(|p| p.typ));
    let bytes: Vec<&[u8]> = values.values.iter().filter_map(|v| v.as_bytes()).collect();
    for &v in &bytes {
        let _ = (collection_elements(v), collection_entries(v), udt_fields(v, 3));
        for typ in &types {
            if let Ok(once) = normalize(typ, v) {
                assert_eq!(normalize(typ, &once).as_ref(), Ok(&once), "normalized twice as {typ}");
            }
        }
    }
    for pair in bytes.windows(2) {
        for typ in &types {
            let (ab, ba) = (compare(typ, pair[0], pair[1]), compare(typ, pair[1], pair[0]));
            assert_eq!(ab, ba.reverse(), "{typ}: not antisymmetric");
            assert_eq!(compare(typ, pair[0], pair[0]), Ordering::Equal, "{typ}: a value unequal to itself");
        }
    }
    let text = PREPARED[usize::from(pick & 0x7f) % PREPARED.len()];
    let statement = parse(text).ok()?;
    let schema_of = move |_: &TableName| Some(schema.clone());
    let raw: &[RawValue<'_>] = &values.values;
    let binds = Binds { values: raw, names: values.names.as_deref() };
    let cx = Context { schema_of: &schema_of, binds, timestamp: 1_700_000_000_000_000, list_node: 1 };
    let built = build(&statement, &cx).ok();
    for m in built.iter().flat_map(|b| &b.mutations) {
        let _ = records(m, &Images::default());
    }
    Some(Executed { values: raw.len(), mutations: built.map(|b| b.mutations.len()) })
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use std::path::{Path, PathBuf};

    use shardwise_protocol::consistency::Consistency;
    use shardwise_protocol::fuzzing::{garbage, seed_files, write_seed_files};
    use shardwise_protocol::request::{Execute, QueryParameters, Request};
    use shardwise_protocol::types::ser::RawValues;

    use super::*;
    use crate::cdclog::values::{build_collection, build_map, build_udt};
    use crate::rng::SplitMix64;

    fn seed_dir(target: &str) -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../fuzz/seeds").join(target)
    }

    /// A value of the example table's column `name` (or of a bind marker's
    /// other parts: `ttl`, `timestamp`, the `IN` list `pks`, a map key
    /// `mk`, a list index `li`, a UDT field `field`).
    fn value(name: &str, rng: &mut SplitMix64) -> Vec<u8> {
        let int = |rng: &mut SplitMix64| rng.int(100).to_be_bytes().to_vec();
        let text = |rng: &mut SplitMix64| format!("v{}", rng.below(1000)).into_bytes();
        let n = rng.below(4) as usize;
        match name {
            "pk" | "ck" | "s" | "v1" | "mk" | "field" | "ttl" => int(rng),
            "li" => (rng.below(2) as i32).to_be_bytes().to_vec(),
            "timestamp" => (1_700_000_000_000_000i64 + rng.below(1_000_000) as i64).to_be_bytes().to_vec(),
            "ck2" | "v2" => text(rng),
            "m" => {
                let entries: Vec<(Vec<u8>, Vec<u8>)> = (0..n).map(|_| (int(rng), text(rng))).collect();
                build_map(entries.iter().map(|(k, v)| (&k[..], &v[..])))
            }
            "st" | "pks" => {
                let elements: Vec<Vec<u8>> = (0..n.max(1)).map(|_| int(rng)).collect();
                build_collection(elements.iter().map(|e| &e[..]))
            }
            "l" => {
                let elements: Vec<Vec<u8>> = (0..n).map(|_| text(rng)).collect();
                build_collection(elements.iter().map(|e| &e[..]))
            }
            "u" => {
                let (a, b) = (int(rng), int(rng));
                build_udt(&[Some(&a), Some(&b), None])
            }
            "f" => {
                let tuples: Vec<Vec<u8>> = (0..n).map(|_| build_udt(&[Some(&int(rng)), Some(&text(rng))])).collect();
                build_collection(tuples.iter().map(|t| &t[..]))
            }
            other => panic!("no value for {other}"),
        }
    }

    /// The markers of each of [`PREPARED`], by what they bind.
    const MARKERS: [&[&str]; 11] = [
        &["pk", "ck", "ck2", "s", "v1", "v2", "m", "st", "l", "u", "f"],
        &["pk", "ck", "ck2", "v1", "ttl", "timestamp"],
        &["ttl", "m", "st", "l", "field", "pk", "ck", "ck2"],
        &["mk", "v2", "li", "v2", "v2", "f", "pk", "ck", "ck2"],
        &["st", "u", "s", "pks", "ck", "ck2"],
        &["mk", "timestamp", "pk", "ck", "ck2"],
        &["pk", "ck", "ck2", "ck"],
        &["pk", "pk", "pks"],
        &["pk", "ck", "ck2", "v1", "l", "pk", "ck", "ck2"],
        &["pk", "ck", "ck2", "v2", "m"],
        &["l", "st", "pk", "ck", "ck2", "v1"],
    ];

    /// Three EXECUTEs of each prepared statement (the last with a metadata
    /// id), a fourth with a null and an unset value; expected: whether the
    /// mutations build.
    fn execute_seeds() -> Vec<(String, Vec<u8>, bool)> {
        let mut rng = SplitMix64(54);
        let mut out = Vec::new();
        for (i, markers) in MARKERS.iter().enumerate() {
            for round in 0..4 {
                let owned: Vec<Vec<u8>> = markers.iter().map(|m| value(m, &mut rng)).collect();
                let mut values: Vec<RawValue<'_>> = owned.iter().map(|v| RawValue::Value(v)).collect();
                if round == 3 {
                    // A null regular value and an unset one, where there are any.
                    let regular: Vec<usize> =
                        (0..markers.len()).filter(|&j| matches!(markers[j], "v1" | "v2" | "m" | "l" | "s")).collect();
                    if let Some(&j) = regular.first() {
                        values[j] = RawValue::Null;
                    }
                    if let Some(&j) = regular.get(1) {
                        values[j] = RawValue::Unset;
                    }
                }
                let names = (i == 9).then(|| markers.to_vec());
                let metadata_id = round == 2;
                let execute = Execute {
                    id: &[0x5c; 16],
                    result_metadata_id: metadata_id.then_some(&[7u8; 16][..]),
                    params: QueryParameters::new(Consistency::LocalQuorum, RawValues { names, values }),
                };
                let mut body = vec![u8::try_from(i).unwrap() | if metadata_id { 0x80 } else { 0 }];
                execute.body_len_ext(ProtocolVersion::V4, metadata_id).unwrap();
                execute.encode_body_ext(ProtocolVersion::V4, metadata_id, &mut body);
                out.push((format!("{i:02}_{round}"), body, true));
            }
        }
        out
    }

    /// Regenerates the `execute_values` seeds:
    /// `cargo test -p shardwise-emu --lib fuzzing::tests::write_seeds -- --ignored`.
    #[test]
    #[ignore = "writes fuzz/seeds"]
    fn write_seeds() {
        let seeds: Vec<(String, Vec<u8>, bool)> = execute_seeds();
        let seeds: Vec<(&str, Vec<u8>)> = seeds.iter().map(|(n, d, _)| (n.as_str(), d.clone())).collect();
        write_seed_files(&seed_dir("execute_values"), &seeds);
    }

    #[test]
    fn every_prepared_statement_parses_with_its_markers() {
        for (text, markers) in PREPARED.iter().zip(MARKERS) {
            let statement = parse(text).unwrap_or_else(|e| panic!("{text}: {e}"));
            assert_eq!(statement.bind_count(), markers.len(), "{text}");
        }
    }

    /// Each seed is an EXECUTE that builds its statement's mutations, and
    /// the committed files are the current seeds.
    #[test]
    fn execute_seeds_reach_the_log() {
        for (name, data, builds) in execute_seeds() {
            let done = execute_values(&data).unwrap_or_else(|| panic!("execute_values/{name}: no EXECUTE"));
            assert_eq!(done.mutations.is_some(), builds, "execute_values/{name}: {done:?}");
            assert_eq!(std::fs::read(seed_dir("execute_values").join(&name)).ok(), Some(data), "stale seed {name}");
        }
    }

    /// Every committed seed, including any kept from a fuzzer's finding.
    #[test]
    fn harnesses_run_on_every_seed_file() {
        for (target, harness) in [
            ("rewrite", rewrite as fn(&[u8])),
            ("describe", describe),
            ("execute_values", |d: &[u8]| {
                execute_values(d);
            }),
        ] {
            let seeds = seed_files(&seed_dir(target));
            assert!(seeds.len() >= 24, "{target}: {} seeds", seeds.len());
            for (name, data) in seeds {
                eprintln!("{target}/{name}");
                harness(&data);
            }
        }
    }

    #[test]
    fn garbage_is_not_a_panic() {
        for data in garbage(54, 300) {
            rewrite(&data);
            describe(&data);
            execute_values(&data);
        }
    }
}
