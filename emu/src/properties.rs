//! Table and keyspace properties: the ones ScyllaDB knows and Cassandra 5.0
//! does not, and the other way round. Nothing Scylla-only is dropped
//! silently: a property whose value is what Cassandra behaves as anyway is
//! taken out before Cassandra sees the statement (accepted, as ScyllaDB
//! accepts it), any other value of it is refused with an error saying the
//! front does not reproduce it, and a name neither knows gets ScyllaDB's
//! own `Unknown property '<name>'` SyntaxException.
//!
//! ScyllaDB's lists (`cf_prop_defs::validate` in
//! <https://github.com/scylladb/scylladb/blob/master/cql3/statements/cf_prop_defs.cc>,
//! `property_definitions::validate` in
//! <https://github.com/scylladb/scylladb/blob/master/cql3/statements/property_definitions.cc>,
//! `ks_prop_defs` in
//! <https://github.com/scylladb/scylladb/blob/master/cql3/statements/ks_prop_defs.cc>):
//!
//! - table keywords: `comment`, `gc_grace_seconds`, `caching`,
//!   `default_time_to_live`, `min_index_interval`, `max_index_interval`,
//!   `speculative_retry`, `bloom_filter_fp_chance`,
//!   `memtable_flush_period_in_ms`, `compaction`, `compression`,
//!   `crc_check_chance`, `id` (Cassandra has them too), `paxos_grace_seconds`,
//!   `synchronous_updates`, `tablets` (Scylla only), plus the schema
//!   extensions `cdc`, `tombstone_gc` and `per_partition_rate_limit`
//!   (Scylla only; `scylla_encryption_options` in ScyllaDB Enterprise);
//! - obsolete table keywords ScyllaDB accepts and ignores:
//!   `index_interval`, `replicate_on_write`, `populate_io_cache_on_flush`,
//!   `read_repair_chance`, `dclocal_read_repair_chance` (the front takes
//!   them out, Cassandra 5.0 would refuse them);
//! - keyspace keywords: `replication`, `durable_writes`, `storage`,
//!   `tablets`.
//!
//! What each Scylla-only property is accepted with (ScyllaDB's default,
//! which is how Cassandra behaves): `synchronous_updates` false,
//! `paxos_grace_seconds` 864000 (ScyllaDB's default, the default
//! `gc_grace_seconds`), `per_partition_rate_limit` with no limit,
//! keyspace `storage` of type `LOCAL`. `tombstone_gc` is accepted with
//! every value ScyllaDB accepts, checked in its words and kept by the front
//! ([`crate::tombstone_gc`]). `cdc` and `tablets` are the business of
//! [`crate::rewrite`]. Cassandra-only properties
//! (`additional_write_policy`, `read_repair`, `memtable`,
//! `incremental_backups`, `allow_auto_snapshot`, `extensions`, ...) are
//! unknown to ScyllaDB and refused as such.
//!
//! Scylla checks the names before the values, in name order (its properties
//! are a sorted map), so the first unknown name by order is the one named.

use crate::admin::lit;
use crate::tokens::{Kind, Tok};
use crate::tombstone_gc::TombstoneGc;

const SYNTAX: i32 = 0x2000;
const INVALID: i32 = 0x2200;

/// Table properties both know.
const TABLE_COMMON: &[&str] = &[
    "bloom_filter_fp_chance",
    "caching",
    "comment",
    "compaction",
    "compression",
    "crc_check_chance",
    "default_time_to_live",
    "gc_grace_seconds",
    "id",
    "max_index_interval",
    "memtable_flush_period_in_ms",
    "min_index_interval",
    "speculative_retry",
];

/// Table properties only Scylla knows, handled elsewhere ([`crate::rewrite`]).
const TABLE_HANDLED: &[&str] = &["cdc", "tablets"];

/// Table properties only Scylla knows, accepted with their default value.
const TABLE_SCYLLA: &[&str] = &[
    "paxos_grace_seconds",
    "per_partition_rate_limit",
    "scylla_encryption_options",
    "synchronous_updates",
    "tombstone_gc",
];

/// Obsolete table properties ScyllaDB accepts and ignores.
const TABLE_OBSOLETE: &[&str] = &[
    "dclocal_read_repair_chance",
    "index_interval",
    "populate_io_cache_on_flush",
    "read_repair_chance",
    "replicate_on_write",
];

/// Keyspace properties both know (`tablets` is [`crate::rewrite`]'s).
const KEYSPACE_KNOWN: &[&str] = &["durable_writes", "replication", "tablets"];

/// ScyllaDB's default `paxos_grace_seconds` (the default `gc_grace_seconds`).
const DEFAULT_PAXOS_GRACE_SECONDS: &str = "864000";

/// A byte-range replacement of the statement text.
pub(crate) type Edit = (usize, usize, String);

/// One `name = value` of a `WITH` clause.
#[derive(Debug)]
struct Property {
    name: String,
    /// The value as written (a map as its entries, unquoted).
    value: Value,
    /// The index of its name token.
    start: usize,
}

#[derive(Debug)]
enum Value {
    Simple(String),
    Map(Vec<(String, String)>),
}

/// What a statement's properties call for, when they are not refused.
#[derive(Debug, Default)]
pub(crate) struct Checked {
    /// The edits that take out the accepted Scylla-only properties.
    pub(crate) edits: Vec<Edit>,
    /// The table's `tombstone_gc`, when given (taken out, kept by the front).
    pub(crate) tombstone_gc: Option<TombstoneGc>,
    /// Whether the `caching` given is enabled, when given (see
    /// [`caching_words`]).
    pub(crate) caching_enabled: Option<bool>,
}

/// What a statement's properties call for: the edits that take out the
/// accepted Scylla-only ones (and the `tombstone_gc` given), or Scylla's (or
/// the front's) refusal.
pub(crate) fn check(text: &str, toks: &[Tok<'_>]) -> Result<Checked, (i32, String)> {
    let Some(keyspace) = statement_kind(toks) else { return Ok(Checked::default()) };
    let Some(with) = with_at(toks) else { return Ok(Checked::default()) };
    let props = properties(toks, with);
    let mut names: Vec<&str> = props.iter().map(|p| p.name.as_str()).collect();
    names.sort_unstable();
    for name in names {
        let known = if keyspace {
            KEYSPACE_KNOWN.contains(&name) || name == "storage"
        } else {
            [TABLE_COMMON, TABLE_HANDLED, TABLE_SCYLLA, TABLE_OBSOLETE].iter().any(|l| l.contains(&name))
        };
        if !known {
            return Err((SYNTAX, format!("Unknown property '{name}'")));
        }
    }
    let mut strip = Vec::new();
    let mut replace = Vec::new();
    let mut tombstone_gc = None;
    let mut caching_enabled = None;
    for (i, p) in props.iter().enumerate() {
        if let (false, "caching", Value::Map(entries)) = (keyspace, p.name.as_str(), &p.value) {
            let (words, enabled) = caching_words(entries);
            caching_enabled = Some(enabled);
            replace.extend(words.map(|w| (i, w)));
            continue;
        }
        if !keyspace && p.name == "tombstone_gc" {
            if let Value::Map(entries) = &p.value {
                let options =
                    TombstoneGc::parse(entries).map_err(|e| (crate::tombstone_gc::CONFIG_ERROR, e.to_string()))?;
                tombstone_gc = Some(options);
                strip.push(i);
                continue;
            }
        }
        let accepted = if keyspace {
            match p.name.as_str() {
                "storage" => storage_is_local(&p.value),
                _ => continue,
            }
        } else if TABLE_OBSOLETE.contains(&p.name.as_str()) {
            true
        } else if TABLE_SCYLLA.contains(&p.name.as_str()) {
            scylla_default(&p.name, &p.value)
        } else {
            continue;
        };
        if !accepted {
            let what = if keyspace { "keyspace" } else { "table" };
            let message = if p.name == "scylla_encryption_options" {
                "The Scylla emulation front does not reproduce the table property 'scylla_encryption_options' \
                 (encryption at rest)"
                    .to_string()
            } else {
                format!(
                    "The Scylla emulation front does not reproduce the {what} property '{}' with this value \
                     (only ScyllaDB's default is accepted)",
                    p.name
                )
            };
            return Err((INVALID, message));
        }
        strip.push(i);
    }
    if keyspace && !strip.is_empty() && strip.len() == props.len() {
        // `ALTER KEYSPACE k WITH storage = {...}` alone: nothing would be left.
        return Err((INVALID, "The Scylla emulation front does not reproduce altering a keyspace's storage".into()));
    }
    Ok(Checked { edits: removals(text, toks, with, &props, &strip, &replace), tombstone_gc, caching_enabled })
}

/// `Some(true)` for a keyspace statement, `Some(false)` for a table or view
/// one (`CREATE`/`ALTER` of `TABLE`, `COLUMNFAMILY`, `MATERIALIZED VIEW`).
fn statement_kind(toks: &[Tok<'_>]) -> Option<bool> {
    let (first, second) = (toks.first()?, toks.get(1)?);
    if !(first.is_kw("CREATE") || first.is_kw("ALTER")) {
        return None;
    }
    if second.is_kw("KEYSPACE") {
        Some(true)
    } else if second.is_kw("TABLE") || second.is_kw("COLUMNFAMILY") || second.is_kw("MATERIALIZED") {
        Some(false)
    } else {
        None
    }
}

/// The index of the statement's top-level `WITH`.
fn with_at(toks: &[Tok<'_>]) -> Option<usize> {
    let mut depth = 0i32;
    for (i, t) in toks.iter().enumerate() {
        if t.is_punct('(') || t.is_punct('{') || t.is_punct('[') {
            depth += 1;
        } else if t.is_punct(')') || t.is_punct('}') || t.is_punct(']') {
            depth -= 1;
        } else if depth == 0 && t.is_kw("WITH") {
            return Some(i);
        }
    }
    None
}

/// The `name = value` items after `toks[with]` (clauses without `=`, such as
/// `CLUSTERING ORDER BY (...)` and `COMPACT STORAGE`, are skipped).
fn properties(toks: &[Tok<'_>], with: usize) -> Vec<Property> {
    let mut out = Vec::new();
    let mut i = with + 1;
    while i < toks.len() {
        let t = toks[i];
        let is_property = matches!(t.kind, Kind::Ident | Kind::QuotedIdent)
            && toks.get(i + 1).is_some_and(|e| e.is_punct('='))
            && (i == with + 1 || toks[i - 1].is_kw("AND"));
        if !is_property {
            i = item_end(toks, i) + 1;
            continue;
        }
        let name = t.ident().unwrap_or_default();
        let v = i + 2;
        let (value, end) = match toks.get(v) {
            Some(b) if b.is_punct('{') => {
                let end = item_end(toks, v);
                // An unclosed `{` at the end has no inside (and `end == v`).
                (Value::Map(map_entries(toks.get(v + 1..end).unwrap_or_default())), end)
            }
            Some(_) => {
                let end = item_end(toks, v);
                let text: String =
                    toks[v..=end].iter().map(|t| t.string_value().unwrap_or_else(|| t.text.to_string())).collect();
                (Value::Simple(text), end)
            }
            None => (Value::Simple(String::new()), i + 1),
        };
        out.push(Property { name, value, start: i });
        i = end + 1;
    }
    out
}

/// The last token of the item starting at `toks[at]`: up to the next
/// top-level `AND` (exclusive) or the statement's end (a `;` excluded).
fn item_end(toks: &[Tok<'_>], at: usize) -> usize {
    let mut depth = 0i32;
    let mut j = at;
    while j < toks.len() {
        let t = toks[j];
        if t.is_punct('(') || t.is_punct('{') || t.is_punct('[') {
            depth += 1;
        } else if t.is_punct(')') || t.is_punct('}') || t.is_punct(']') {
            depth -= 1;
        } else if depth == 0 && (t.is_kw("AND") || t.is_punct(';')) {
            return j.saturating_sub(1).max(at);
        }
        j += 1;
    }
    toks.len() - 1
}

/// The entries of a map literal's inside: `key: value` pairs, unquoted.
fn map_entries(inside: &[Tok<'_>]) -> Vec<(String, String)> {
    let text = |t: &Tok<'_>| t.string_value().unwrap_or_else(|| t.text.to_string());
    inside
        .split(|t| t.is_punct(','))
        .filter_map(|entry| {
            let colon = entry.iter().position(|t| t.is_punct(':'))?;
            let key: String = entry[..colon].iter().map(text).collect();
            let value: String = entry[colon + 1..].iter().map(text).collect();
            Some((key.to_ascii_lowercase(), value))
        })
        .collect()
}

/// Whether a Scylla-only table property has ScyllaDB's default value.
fn scylla_default(name: &str, value: &Value) -> bool {
    match (name, value) {
        // `get_boolean`: "1", "true" and "yes" are true, anything else false.
        ("synchronous_updates", Value::Simple(v)) => !matches!(v.to_ascii_lowercase().as_str(), "1" | "true" | "yes"),
        ("paxos_grace_seconds", Value::Simple(v)) => v == DEFAULT_PAXOS_GRACE_SECONDS,
        ("per_partition_rate_limit", Value::Map(entries)) => entries.is_empty(),
        _ => false,
    }
}

/// Whether a keyspace's `storage` is the local one (ScyllaDB's default).
fn storage_is_local(value: &Value) -> bool {
    match value {
        Value::Map(entries) => entries.iter().all(|(k, v)| k == "type" && v.eq_ignore_ascii_case("LOCAL")),
        Value::Simple(_) => false,
    }
}

/// The edits that take out `props[strip]`, each with one `AND` next to it.
/// When nothing would be left after a table's `WITH`, what is left is
/// `cdc = false` (Cassandra's own CDC flag, which the front always keeps
/// off).
fn removals(
    text: &str,
    toks: &[Tok<'_>],
    with: usize,
    props: &[Property],
    strip: &[usize],
    replace: &[(usize, String)],
) -> Vec<Edit> {
    if strip.is_empty() && replace.is_empty() {
        return Vec::new();
    }
    // Items after WITH: properties and other clauses, by token range.
    let mut items: Vec<(usize, usize, bool, Option<&str>)> = Vec::new(); // (start, end, stripped, new text)
    let mut i = with + 1;
    while i < toks.len() && !toks[i].is_punct(';') {
        let end = item_end(toks, i);
        let at = props.iter().position(|p| p.start == i);
        let stripped = at.is_some_and(|n| strip.contains(&n));
        let new = at.and_then(|n| replace.iter().find(|(r, _)| *r == n)).map(|(_, t)| t.as_str());
        items.push((i, end, stripped, new));
        i = end + 1;
        if toks.get(i).is_some_and(|t| t.is_kw("AND")) {
            i += 1;
        }
    }
    let kept: Vec<&(usize, usize, bool, Option<&str>)> = items.iter().filter(|x| !x.2).collect();
    let Some(last) = items.last() else { return Vec::new() };
    let span_end = toks[last.1].end;
    if kept.is_empty() {
        return vec![(toks[with + 1].start, span_end, "cdc = false".to_string())];
    }
    let kept: Vec<&str> =
        kept.iter().map(|(s, e, _, new)| new.unwrap_or(&text[toks[*s].start..toks[*e].end])).collect();
    vec![(toks[with + 1].start, span_end, kept.join(" AND "))]
}

/// A table's `caching` in Cassandra's words and whether it is enabled, as
/// ScyllaDB reads it (`caching_options::from_map`: `enabled` defaults to
/// true). ScyllaDB's `'enabled': 'false'` (which DESCRIBE prints for a CDC
/// log) is no key of Cassandra's: it is taken out, and the keys and rows
/// cached become `NONE` (no caching, what it means). `None` for the item
/// text when there is nothing to change.
fn caching_words(entries: &[(String, String)]) -> (Option<String>, bool) {
    let Some((_, enabled)) = entries.iter().find(|(k, _)| k == "enabled") else { return (None, true) };
    let off = enabled.eq_ignore_ascii_case("false");
    let inner: Vec<String> = entries
        .iter()
        .filter(|(k, _)| k != "enabled")
        .map(|(k, v)| format!("{}: {}", lit(k), lit(if off { "NONE" } else { v })))
        .collect();
    (Some(format!("caching = {{{}}}", inner.join(", "))), !off)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::tokens::tokenize;

    fn run(s: &str) -> Result<String, (i32, String)> {
        let toks = tokenize(s).unwrap();
        let edits = check(s, &toks)?.edits;
        let mut out = s.to_string();
        for (start, end, with) in edits.into_iter().rev() {
            out.replace_range(start..end, &with);
        }
        Ok(out)
    }

    /// Regression (found by the `rewrite` fuzz target): a map value opened
    /// as the statement's last token (`WITH comment = {`) sliced its inside
    /// backwards and panicked; it is now an empty map, and Cassandra
    /// reports the syntax error.
    #[test]
    fn a_map_left_open_at_the_end_is_not_a_panic() {
        for s in ["ALTER TABLE ks.kv WITH comment = {", "CREATE TABLE t (p int PRIMARY KEY) WITH caching = {"] {
            assert_eq!(run(s), Ok(s.to_string()), "{s}");
        }
    }

    #[test]
    fn unknown_names_get_scyllas_syntax_error_first_by_name() {
        let e = run("CREATE TABLE t (p int PRIMARY KEY) WITH read_repair = 'NONE' AND additional_write_policy = '99p'")
            .unwrap_err();
        assert_eq!(e, (0x2000, "Unknown property 'additional_write_policy'".to_string()));
        let e = run("CREATE KEYSPACE k WITH replication = {'class': 'SimpleStrategy'} AND graph = 1").unwrap_err();
        assert_eq!(e, (0x2000, "Unknown property 'graph'".to_string()));
        // An unknown name wins over a value the front would refuse.
        let e = run("ALTER TABLE t WITH tombstone_gc = {'mode': 'bogus'} AND memtable = 'x'").unwrap_err();
        assert_eq!(e.1, "Unknown property 'memtable'");
    }

    #[test]
    fn defaults_are_taken_out_and_other_values_refused() {
        assert_eq!(
            run("CREATE TABLE t (p int PRIMARY KEY) WITH synchronous_updates = false AND comment = 'x'").unwrap(),
            "CREATE TABLE t (p int PRIMARY KEY) WITH comment = 'x'"
        );
        assert_eq!(
            run("CREATE TABLE t (p int, c int, PRIMARY KEY (p, c)) WITH CLUSTERING ORDER BY (c DESC) AND tombstone_gc = {'mode': 'timeout', 'propagation_delay_in_seconds': '3600'};").unwrap(),
            "CREATE TABLE t (p int, c int, PRIMARY KEY (p, c)) WITH CLUSTERING ORDER BY (c DESC);"
        );
        assert_eq!(
            run("ALTER TABLE t WITH paxos_grace_seconds = 864000 AND per_partition_rate_limit = {}").unwrap(),
            "ALTER TABLE t WITH cdc = false"
        );
        assert_eq!(run("ALTER TABLE t WITH read_repair_chance = 0.1").unwrap(), "ALTER TABLE t WITH cdc = false");
        assert_eq!(
            run("CREATE KEYSPACE k WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1} AND storage = {'type': 'LOCAL'}").unwrap(),
            "CREATE KEYSPACE k WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}"
        );
        for refused in [
            "ALTER TABLE t WITH synchronous_updates = true",
            "ALTER TABLE t WITH paxos_grace_seconds = 10",
            "ALTER TABLE t WITH per_partition_rate_limit = {'max_writes_per_second': 10}",
            "ALTER TABLE t WITH scylla_encryption_options = {'cipher_algorithm': 'AES/ECB/PKCS5Padding'}",
            "CREATE KEYSPACE k WITH replication = {'class': 'SimpleStrategy'} AND storage = {'type': 'S3'}",
            "ALTER KEYSPACE k WITH storage = {'type': 'LOCAL'}",
        ] {
            let (code, message) = run(refused).unwrap_err();
            assert_eq!(code, 0x2200, "{refused}");
            assert!(message.contains("does not reproduce"), "{refused}: {message}");
        }
    }

    #[test]
    fn tombstone_gc_is_taken_out_with_any_value_scylla_accepts_and_kept() {
        let s = "CREATE TABLE t (p int PRIMARY KEY) WITH tombstone_gc = {'mode': 'repair', 'propagation_delay_in_seconds': 120} AND comment = 'x'";
        let toks = tokenize(s).unwrap();
        let checked = check(s, &toks).unwrap();
        assert_eq!(
            checked.tombstone_gc.map(|g| g.to_string()).as_deref(),
            Some("{'mode': 'repair', 'propagation_delay_in_seconds': '120'}")
        );
        assert_eq!(run(s).unwrap(), "CREATE TABLE t (p int PRIMARY KEY) WITH comment = 'x'");
        for mode in ["timeout", "disabled", "immediate", "repair"] {
            let s = format!("ALTER TABLE t WITH tombstone_gc = {{'mode': '{mode}'}}");
            assert_eq!(run(&s).unwrap(), "ALTER TABLE t WITH cdc = false", "{s}");
        }
        assert_eq!(
            run("ALTER TABLE t WITH tombstone_gc = {'mode': 'never'}").unwrap_err(),
            (0x2300, "Invalid value for tombstone_gc option mode: never".to_string())
        );
        assert_eq!(
            run("ALTER TABLE t WITH tombstone_gc = {'propagation_delay_in_seconds': '-1'}").unwrap_err(),
            (0x2300, "Invalid value for tombstone_gc option propagation_delay_in_seconds: -1".to_string())
        );
        let none = "ALTER TABLE t WITH comment = 'x'";
        assert!(check(none, &tokenize(none).unwrap()).unwrap().tombstone_gc.is_none());
    }

    #[test]
    fn scyllas_caching_enabled_key_is_taken_out_and_kept() {
        let alter = "ALTER TABLE ks.t_scylla_cdc_log WITH bloom_filter_fp_chance = 0.01\n    AND caching = {'enabled': 'false', 'keys': 'NONE', 'rows_per_partition': 'NONE'}\n    AND comment = 'caching = {''enabled'': 1}'";
        assert_eq!(
            run(alter).unwrap(),
            "ALTER TABLE ks.t_scylla_cdc_log WITH bloom_filter_fp_chance = 0.01 AND caching = {'keys': 'NONE', 'rows_per_partition': 'NONE'} AND comment = 'caching = {''enabled'': 1}'"
        );
        let checked = |s: &str| check(s, &tokenize(s).unwrap()).unwrap().caching_enabled;
        assert_eq!(checked(alter), Some(false));
        let off = "CREATE TABLE t (p int PRIMARY KEY) WITH caching = {'enabled': 'false', 'keys': 'ALL', 'rows_per_partition': 'ALL'}";
        assert_eq!(
            run(off).unwrap(),
            "CREATE TABLE t (p int PRIMARY KEY) WITH caching = {'keys': 'NONE', 'rows_per_partition': 'NONE'}"
        );
        let plain = "ALTER TABLE t WITH caching = {'keys': 'NONE', 'rows_per_partition': 'NONE'}";
        assert_eq!(run(plain).unwrap(), plain, "Cassandra's words stay");
        assert_eq!(checked(plain), Some(true), "ScyllaDB's default: enabled");
        assert_eq!(checked("ALTER TABLE t WITH comment = 'x'"), None);
    }

    #[test]
    fn statements_without_scylla_only_properties_are_untouched() {
        for s in [
            "CREATE TABLE t (p int PRIMARY KEY) WITH comment = 'a = b' AND gc_grace_seconds = 10",
            "CREATE TABLE t (p int PRIMARY KEY)",
            "ALTER TABLE t ADD v int",
            "CREATE TABLE t (p int PRIMARY KEY) WITH COMPACT STORAGE",
            "CREATE MATERIALIZED VIEW v AS SELECT * FROM t WHERE p IS NOT NULL AND c = 1 PRIMARY KEY (c, p) WITH comment = 'x'",
            "INSERT INTO t (p) VALUES (1)",
        ] {
            assert_eq!(run(s).unwrap(), s);
        }
    }
}
