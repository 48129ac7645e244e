//! Replaying DESCRIBE's statements: the table properties ScyllaDB prints in
//! its own words, turned into the words Cassandra takes.
//!
//! Replaying the rows of `DESC KEYSPACE` recreates a keyspace on ScyllaDB
//! (test_describe.py `test_hide_cdc_table`, `test_desc_restore`). Two of
//! the properties the front prints as ScyllaDB does are refused by
//! Cassandra as written: `compression = {'sstable_compression': ...}`
//! (Cassandra wants `class`, and has no dictionary compressors: see
//! [`crate::compression`]) and the `'enabled'` key of `caching`, which a
//! CDC log has (Cassandra knows only `keys` and `rows_per_partition`). In a
//! `CREATE TABLE`/`ALTER TABLE` the front renames the first here; the
//! second is the properties check's, which keeps whether caching is
//! enabled (`crate::properties`). The `tombstone_gc` ScyllaDB gives every table (which the front
//! prints) stays: the front takes it, as ScyllaDB does, on the statement's
//! way to Cassandra ([`crate::tombstone_gc`]). Everything else in the
//! statement stays as written.

use crate::admin::lit;

/// The statement with ScyllaDB's property words replaced, or `None` when
/// there is nothing to replace (or it is not a table DDL).
pub fn cassandra_properties(text: &str) -> Option<String> {
    let mut words = text.split_whitespace().map(str::to_ascii_lowercase);
    let (first, second) = (words.next()?, words.next()?);
    if !(matches!(first.as_str(), "create" | "alter") && matches!(second.as_str(), "table" | "columnfamily")) {
        return None;
    }
    let mut out = text.to_string();
    let mut changed = false;
    if let Some((start, end)) = map_after(&out, "compression") {
        let entries = entries(&out[start + 1..end - 1])?;
        if let Some(fixed) = crate::compression::to_cassandra(&entries) {
            out.replace_range(start..end, &render(&fixed));
            changed = true;
        }
    }
    changed.then_some(out)
}

/// The byte range of the `{...}` map given to property `name` (`name = {`),
/// outside string literals.
fn map_after(text: &str, name: &str) -> Option<(usize, usize)> {
    let lower = text.to_ascii_lowercase();
    let b = lower.as_bytes();
    let mut i = 0;
    let mut in_string = false;
    while i < b.len() {
        if b[i] == b'\'' {
            in_string = !in_string;
            i += 1;
            continue;
        }
        let boundary = i == 0 || !(b[i - 1].is_ascii_alphanumeric() || b[i - 1] == b'_');
        // Bytes, not `lower[i..]`: `i` may be inside a character (a quoted
        // identifier's `é`), where slicing the text panics.
        if !in_string && boundary && b[i..].starts_with(name.as_bytes()) {
            let mut j = i + name.len();
            while j < b.len() && b[j].is_ascii_whitespace() {
                j += 1;
            }
            if j < b.len() && b[j] == b'=' {
                j += 1;
                while j < b.len() && b[j].is_ascii_whitespace() {
                    j += 1;
                }
                if j < b.len() && b[j] == b'{' {
                    let mut k = j + 1;
                    let mut quoted = false;
                    while k < b.len() {
                        match b[k] {
                            b'\'' => quoted = !quoted,
                            b'}' if !quoted => return Some((j, k + 1)),
                            _ => {}
                        }
                        k += 1;
                    }
                    return None;
                }
            }
        }
        i += 1;
    }
    None
}

/// The entries of a map literal's inside: `'k': 'v'` or `'k': v`.
fn entries(inner: &str) -> Option<Vec<(String, String)>> {
    let mut out = Vec::new();
    let mut items = Vec::new();
    let mut cur = String::new();
    let mut quoted = false;
    for c in inner.chars() {
        match c {
            '\'' => {
                quoted = !quoted;
                cur.push(c);
            }
            ',' if !quoted => items.push(std::mem::take(&mut cur)),
            _ => cur.push(c),
        }
    }
    if !cur.trim().is_empty() {
        items.push(cur);
    }
    let unquote = |s: &str| {
        let s = s.trim();
        match s.strip_prefix('\'').and_then(|s| s.strip_suffix('\'')) {
            Some(inner) => inner.replace("''", "'"),
            None => s.to_string(),
        }
    };
    for item in items {
        let (k, v) = split_colon(&item)?;
        out.push((unquote(k), unquote(v)));
    }
    Some(out)
}

fn split_colon(item: &str) -> Option<(&str, &str)> {
    let mut quoted = false;
    for (i, c) in item.char_indices() {
        match c {
            '\'' => quoted = !quoted,
            ':' if !quoted => return Some((&item[..i], &item[i + 1..])),
            _ => {}
        }
    }
    None
}

fn render(entries: &[(String, String)]) -> String {
    let inner: Vec<String> = entries.iter().map(|(k, v)| format!("{}: {}", lit(k), lit(v))).collect();
    format!("{{{}}}", inner.join(", "))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn scylla_words_become_cassandra_words() {
        let alter = "ALTER TABLE ks.t_scylla_cdc_log WITH bloom_filter_fp_chance = 0.01\n    AND caching = {'enabled': 'false', 'keys': 'NONE', 'rows_per_partition': 'NONE'}\n    AND comment = 'caching = {''enabled'': 1}'\n    AND compression = {'sstable_compression': 'org.apache.cassandra.io.compress.LZ4Compressor'};\n";
        let fixed = cassandra_properties(alter).unwrap();
        assert!(
            fixed.contains(
                "compression = {'class': 'org.apache.cassandra.io.compress.LZ4Compressor', 'lz4_compressor_type': 'fast'}"
            ),
            "{fixed}"
        );
        assert!(fixed.contains("comment = 'caching = {''enabled'': 1}'"), "{fixed}");
        // `caching`'s `'enabled'` is the properties check's (it keeps the flag).
        assert!(
            fixed.contains("caching = {'enabled': 'false', 'keys': 'NONE', 'rows_per_partition': 'NONE'}"),
            "{fixed}"
        );
        let off = "CREATE TABLE t (p int PRIMARY KEY) WITH caching = {'enabled': 'false', 'keys': 'ALL', 'rows_per_partition': 'ALL'}";
        assert_eq!(cassandra_properties(off), None);
        // `tombstone_gc` is the properties check's (it is kept by the front).
        let kept = "CREATE TABLE t (p int PRIMARY KEY) WITH comment = '' AND tombstone_gc = {'mode': 'timeout', 'propagation_delay_in_seconds': '3600'}";
        assert_eq!(cassandra_properties(kept), None);
    }

    /// Regression (found by the `describe` fuzz target): a character of
    /// more than one byte outside strings, before a property name, panicked
    /// the scan (it sliced the text inside the character).
    #[test]
    fn names_that_are_not_ascii_are_passed_over() {
        let text =
            "CREATE TABLE ks.\"tablé\" (p int PRIMARY KEY) WITH compression = {'sstable_compression': 'LZ4Compressor'}";
        let fixed = cassandra_properties(text).unwrap();
        assert!(fixed.ends_with("compression = {'class': 'LZ4Compressor', 'lz4_compressor_type': 'fast'}"), "{fixed}");
        assert_eq!(cassandra_properties("ALTER TABLE \"ڄ\" WITH comment = 'x'"), None);
    }

    /// ScyllaDB's default compressor, printed by DESCRIBE and replayed, is
    /// Cassandra's LZ4 without the mark of an LZ4 asked for by name.
    #[test]
    fn the_dictionary_compressor_is_replayed_as_cassandras_lz4() {
        let text =
            "CREATE TABLE t (p int PRIMARY KEY) WITH compression = {'sstable_compression': 'LZ4WithDictsCompressor'}";
        let fixed = cassandra_properties(text).unwrap();
        assert!(fixed.ends_with("compression = {'class': 'LZ4Compressor'}"), "{fixed}");
    }

    #[test]
    fn other_statements_stay() {
        assert_eq!(
            cassandra_properties("CREATE TABLE t (p int PRIMARY KEY) WITH compression = {'class': 'LZ4Compressor'}"),
            None
        );
        assert_eq!(cassandra_properties("SELECT caching FROM system_schema.tables"), None);
        assert_eq!(cassandra_properties("INSERT INTO t (p, v) VALUES (1, 'caching = {''enabled'': 1}')"), None);
    }
}
