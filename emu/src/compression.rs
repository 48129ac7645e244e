//! ScyllaDB's sstable compressors in the options of the Cassandra behind
//! the front, and back in DESCRIBE.
//!
//! ScyllaDB 2026 compresses a user table given no `compression` with
//! `LZ4WithDictsCompressor` (`sstable_compression_user_table_options` in
//! `db/config.cc`, when the dictionary feature is on cluster-wide, as it
//! is on a current cluster), and DESCRIBE prints it
//! `{'sstable_compression': 'LZ4WithDictsCompressor'}`
//! (`test/cqlpy/test_describe.py`, the CDC log of a vector table). Names
//! of the Cassandra-compatible compressors print qualified
//! (`org.apache.cassandra.io.compress.LZ4Compressor`), the dictionary ones
//! short (`algorithm_to_qualified_name` in `sstables/compressor.cc`).
//!
//! Cassandra has no dictionary compressors, and its default (LZ4) is
//! another name. So the front writes each in Cassandra's words, keeping
//! which one was meant in the options themselves, where a restarted front
//! finds it: `LZ4WithDictsCompressor` (given, or no `compression` at all)
//! is Cassandra's plain `LZ4Compressor`; an `LZ4Compressor` asked for by
//! name carries `'lz4_compressor_type': 'fast'` besides, Cassandra's own
//! default for that option (the same compression), which marks it.
//! DESCRIBE reads them back: LZ4 without the mark is the dictionary
//! compressor, with it the plain one.
//!
//! Deviation: `ZstdWithDictsCompressor` is stored and described as
//! `ZstdCompressor` (no option of Cassandra's Zstd is free to mark it).

use std::collections::BTreeMap;

/// How Cassandra names its compressors' classes.
const QUALIFIED: &str = "org.apache.cassandra.io.compress.";
/// The mark of an LZ4 asked for by name.
const MARK: (&str, &str) = ("lz4_compressor_type", "fast");
/// Cassandra's default chunk length, which ScyllaDB does not print.
const CASSANDRA_CHUNK_KB: &str = "16";

fn unqualified(class: &str) -> &str {
    class.strip_prefix(QUALIFIED).unwrap_or(class)
}

/// The options of a `compression = {...}` given in ScyllaDB's words (the
/// compressor named by `sstable_compression`, which ScyllaDB requires), in
/// Cassandra's (`class`, see the module docs); `None` for options in
/// Cassandra's words already (`class`), which are left as they are: so a
/// statement the front rewrote is not rewritten again.
pub(crate) fn to_cassandra(entries: &[(String, String)]) -> Option<Vec<(String, String)>> {
    if !entries.iter().any(|(k, _)| k == "sstable_compression") {
        return None;
    }
    let mut out: Vec<(String, String)> = Vec::with_capacity(entries.len() + 1);
    let mut mark = false;
    for (k, v) in entries {
        if k != "sstable_compression" {
            out.push((k.clone(), v.clone()));
            continue;
        }
        let class = match unqualified(v) {
            "LZ4WithDictsCompressor" => "LZ4Compressor",
            "ZstdWithDictsCompressor" => "ZstdCompressor",
            "LZ4Compressor" => {
                mark = true;
                v.as_str()
            }
            _ => v.as_str(),
        };
        out.push(("class".to_owned(), class.to_owned()));
    }
    if mark && !entries.iter().any(|(k, _)| k == MARK.0) {
        out.push((MARK.0.to_owned(), MARK.1.to_owned()));
    }
    Some(out)
}

/// A table's compression options as Cassandra keeps them, as ScyllaDB's
/// DESCRIBE prints them (see the module docs).
pub(crate) fn as_scylla_prints(stored: &BTreeMap<String, String>) -> BTreeMap<String, String> {
    let marked = stored.get(MARK.0).is_some_and(|v| v == MARK.1);
    let mut out = BTreeMap::new();
    for (k, v) in stored {
        match k.as_str() {
            "chunk_length_in_kb" if v == CASSANDRA_CHUNK_KB => {}
            "lz4_compressor_type" if marked => {}
            "class" if unqualified(v) == "LZ4Compressor" && !marked => {
                out.insert("sstable_compression".to_owned(), "LZ4WithDictsCompressor".to_owned());
            }
            "class" => {
                out.insert("sstable_compression".to_owned(), v.clone());
            }
            _ => {
                out.insert(k.clone(), v.clone());
            }
        }
    }
    out
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn map(e: &[(&str, &str)]) -> Vec<(String, String)> {
        e.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    fn stored(e: &[(&str, &str)]) -> BTreeMap<String, String> {
        map(e).into_iter().collect()
    }

    #[test]
    fn scyllas_compressors_in_cassandras_words() {
        let dicts = to_cassandra(&map(&[("sstable_compression", "LZ4WithDictsCompressor")])).unwrap();
        assert_eq!(dicts, map(&[("class", "LZ4Compressor")]), "the dictionary LZ4 is Cassandra's LZ4, unmarked");
        let lz4 = to_cassandra(&map(&[("sstable_compression", QUALIFIED_LZ4), ("chunk_length_in_kb", "64")])).unwrap();
        assert_eq!(
            lz4,
            map(&[("class", QUALIFIED_LZ4), ("chunk_length_in_kb", "64"), MARK_PAIR]),
            "LZ4 by name, marked"
        );
        let zstd = to_cassandra(&map(&[("sstable_compression", "ZstdWithDictsCompressor")])).unwrap();
        assert_eq!(zstd, map(&[("class", "ZstdCompressor")]));
        let deflate = to_cassandra(&map(&[("sstable_compression", "DeflateCompressor")])).unwrap();
        assert_eq!(deflate, map(&[("class", "DeflateCompressor")]));
        for words in
            [map(&[("class", "LZ4Compressor")]), map(&[("class", "DeflateCompressor")]), map(&[("enabled", "false")])]
        {
            assert_eq!(to_cassandra(&words), None, "Cassandra's words already: {words:?}");
        }
        // What the front wrote is not rewritten again (the rewritten statement
        // passes the same check on its way).
        for name in ["LZ4WithDictsCompressor", "LZ4Compressor", "ZstdWithDictsCompressor"] {
            let once = to_cassandra(&map(&[("sstable_compression", name)])).unwrap();
            assert_eq!(to_cassandra(&once), None, "{name}");
        }
    }

    const QUALIFIED_LZ4: &str = "org.apache.cassandra.io.compress.LZ4Compressor";
    const MARK_PAIR: (&str, &str) = ("lz4_compressor_type", "fast");

    #[test]
    fn described_as_scylla_prints_them() {
        let default = stored(&[("chunk_length_in_kb", "16"), ("class", QUALIFIED_LZ4)]);
        assert_eq!(as_scylla_prints(&default), stored(&[("sstable_compression", "LZ4WithDictsCompressor")]));
        let named = stored(&[("chunk_length_in_kb", "64"), ("class", QUALIFIED_LZ4), MARK_PAIR]);
        assert_eq!(
            as_scylla_prints(&named),
            stored(&[("chunk_length_in_kb", "64"), ("sstable_compression", QUALIFIED_LZ4)])
        );
        let deflate = stored(&[("class", "org.apache.cassandra.io.compress.DeflateCompressor")]);
        assert_eq!(
            as_scylla_prints(&deflate),
            stored(&[("sstable_compression", "org.apache.cassandra.io.compress.DeflateCompressor")])
        );
        assert_eq!(as_scylla_prints(&stored(&[("enabled", "false")])), stored(&[("enabled", "false")]));
    }

    /// What the front writes for each name reads back as that name.
    #[test]
    fn every_name_round_trips() {
        for (given, printed) in [
            ("LZ4WithDictsCompressor", "LZ4WithDictsCompressor"),
            ("LZ4Compressor", "LZ4Compressor"),
            (QUALIFIED_LZ4, QUALIFIED_LZ4),
        ] {
            let written = to_cassandra(&map(&[("sstable_compression", given)])).unwrap();
            let kept: BTreeMap<String, String> = written.into_iter().collect();
            let shown = as_scylla_prints(&kept);
            assert_eq!(shown.get("sstable_compression").map(String::as_str), Some(printed), "{given}");
        }
    }
}
