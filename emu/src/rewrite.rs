//! Statement rewriting: what Scylla accepts and Cassandra does not.
//!
//! A small CQL tokenizer (strings, `$$` strings, quoted identifiers and
//! comments are single tokens, so nothing inside them is ever touched) finds
//! the spots to change; edits are byte-range replacements on the original
//! text, so everything else reaches Cassandra exactly as written.
//!
//! - `BYPASS CACHE` (SELECT) is removed.
//! - `USING TIMEOUT <duration>` is removed, alone or among `TTL`/`TIMESTAMP`
//!   clauses (`USING TTL 5 AND TIMEOUT 1s` → `USING TTL 5`). A bound timeout
//!   (`USING TIMEOUT ?`) would change the statement's bind markers, so it is
//!   refused with an Invalid error instead (deviation from Scylla).
//! - `WITH cdc = {...}` in `CREATE TABLE`/`ALTER TABLE`: the map is validated
//!   ([`CdcOptions::parse`]) and replaced by Cassandra's own (unrelated,
//!   default) `cdc = false`; the caller creates the log table.
//! - `system_distributed.<t>` → `<emu keyspace>.<t>`;
//!   `system_schema.scylla_tables`/`scylla_keyspaces` → `<emu
//!   keyspace>.scylla_tables`/`scylla_keyspaces` (real stand-in tables).
//! - `system.tablets`, `system.cdc_timestamps` and `system.cdc_streams` →
//!   `<emu keyspace>.<t>` (the front's tablet maps, [`super::tablets`], and
//!   their CDC streams, [`super::tablet_streams`]).
//! - `system.peers_v2` does not exist on Scylla: answered with Scylla's
//!   Invalid error, so that drivers fall back to `system.peers` (whose
//!   addresses, with the front's port, lead to the fronts).
//! - `SELECT ... FROM <emu keyspace>.front_stats` is answered by the front.
//! - `INSERT INTO t JSON ... IF NOT EXISTS`: the condition is taken out, so
//!   the row is written whether it exists or not and the answer has no
//!   rows, which is what ScyllaDB does (its known bug scylladb#8682, see
//!   `json_insert_conditions`).
//!
//! The text is only tokenized when a cheap case-insensitive scan finds a
//! word that could need a change, so ordinary statements cost one scan.

use super::cdc::CdcOptions;
use super::tablet_options::{TabletOptions, TabletOptionsError};
use super::vector_index::{self, IndexDdl};
pub use crate::tokens::{tokenize, Kind, Tok};

/// What the front must do with a statement.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Rewrite {
    /// The text to send instead, when it changed.
    pub text: Option<String>,
    /// Answer the request locally instead of forwarding it.
    pub local: Option<LocalAnswer>,
    /// `CREATE TABLE`/`ALTER TABLE` with Scylla's `cdc` map.
    pub cdc: Option<CdcOptions>,
    /// A schema statement (CREATE/ALTER/DROP): its Schema_change result is
    /// observed (CDC log creation, log mirroring, clean-up).
    pub schema: bool,
    /// A conditional (LWT) modification: `INSERT/UPDATE/DELETE/BATCH ... IF`.
    pub lwt: bool,
    /// For `CREATE TABLE`/`ALTER TABLE`: the table named, `(keyspace if
    /// qualified, table)`.
    pub table: Option<(Option<String>, String)>,
    /// A `USE` statement.
    pub use_keyspace: bool,
    /// `CREATE KEYSPACE`/`ALTER KEYSPACE ... AND tablets = {...}`
    /// (stripped): `Some(n)` for tablets with `n` initial tablets (0 when
    /// not given), `None` for `'enabled': false`.
    pub tablets: Option<Option<i32>>,
    /// `CREATE INDEX ... USING 'vector_index'` (rewritten to SAI) or `DROP
    /// INDEX` (see [`crate::vector_index`]).
    pub vector_index: Option<IndexDdl>,
    /// `CREATE TABLE`/`ALTER TABLE ... WITH tablets = {...}` (stripped):
    /// the hints, or Scylla's refusal of them (given only once the
    /// keyspace is known to use tablets: [`crate::tablet_options`]).
    pub table_tablets: Option<Result<TabletOptions, TabletOptionsError>>,
    /// `CREATE KEYSPACE`/`ALTER KEYSPACE`: the keyspace named.
    pub keyspace: Option<String>,
    /// An `ALTER KEYSPACE` statement.
    pub alter_keyspace: bool,
    /// `ALTER KEYSPACE ... WITH tablets = {...}` with no other property:
    /// nothing is left for Cassandra (the front answers it itself).
    pub tablets_only: bool,
    /// `CREATE TABLE`/`ALTER TABLE ... WITH tombstone_gc = {...}` (taken
    /// out, checked): the options the front keeps ([`crate::tombstone_gc`]).
    pub(crate) tombstone_gc: Option<crate::tombstone_gc::TombstoneGc>,
    /// `INSERT INTO [ks.]t JSON ... IF NOT EXISTS` whose condition was taken
    /// out ([`json_insert_conditions`]): its table, `(keyspace if qualified,
    /// table)`, for the result columns ScyllaDB's PREPARED still announces.
    pub(crate) json_insert_table: Option<(Option<String>, String)>,
    /// `CREATE TABLE`/`ALTER TABLE ... WITH caching = {...}`: whether that
    /// caching is enabled (ScyllaDB's `'enabled'` key, taken out:
    /// `crate::properties`).
    pub(crate) caching_enabled: Option<bool>,
    /// A `CREATE` statement (a `CREATE ... IF NOT EXISTS` of something that
    /// exists changes nothing, and Cassandra answers Void).
    pub(crate) create: bool,
}

/// An answer the front gives itself.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LocalAnswer {
    /// An ERROR response.
    Error {
        /// Error code.
        code: i32,
        /// Message.
        message: String,
    },
    /// Rows of the front's statistics table.
    FrontStats,
}

const INVALID: i32 = 0x2200;
const CONFIG_ERROR: i32 = 0x2300;

fn contains_ci(hay: &str, needle: &str) -> bool {
    hay.as_bytes().windows(needle.len()).any(|w| w.eq_ignore_ascii_case(needle.as_bytes()))
}

fn first_word(text: &str) -> &str {
    let t = text.trim_start();
    let end = t.find(|c: char| !c.is_ascii_alphabetic()).unwrap_or(t.len());
    &t[..end]
}

/// Whether a statement might need [`rewrite`] at all (a cheap scan).
pub fn may_need_rewrite(text: &str, emu_keyspace: &str) -> bool {
    let w = first_word(text);
    ["create", "alter", "drop", "use"].iter().any(|k| w.eq_ignore_ascii_case(k))
        || text.trim_start().starts_with('/')
        || text.trim_start().starts_with('-')
        || [
            "bypass",
            "timeout",
            "system_distributed",
            "scylla_",
            "peers_v2",
            "tablets",
            "cdc_timestamps",
            "cdc_streams",
            "client_routes",
            "cdc$stream_id",
            "json",
            emu_keyspace,
        ]
        .iter()
        .any(|n| contains_ci(text, n))
}

/// Rewrites one statement for Cassandra. `prepare` adds LWT detection.
pub fn rewrite(text: &str, emu_keyspace: &str, prepare: bool) -> Rewrite {
    let mut out = Rewrite::default();
    let first = first_word(text).to_ascii_lowercase();
    out.schema = matches!(first.as_str(), "create" | "alter" | "drop");
    if !prepare && !may_need_rewrite(text, emu_keyspace) {
        return out;
    }
    let Some(toks) = tokenize(text) else {
        return out;
    };
    let first = toks.first().and_then(|t| t.ident()).unwrap_or_default();
    out.schema = matches!(first.as_str(), "create" | "alter" | "drop");
    out.use_keyspace = first == "use";
    out.create = first == "create";
    let view = toks.get(1).is_some_and(|t| t.is_kw("MATERIALIZED")) && toks.get(2).is_some_and(|t| t.is_kw("VIEW"));
    if matches!(first.as_str(), "create" | "alter")
        && (view || toks.get(1).is_some_and(|t| t.is_kw("TABLE") || t.is_kw("COLUMNFAMILY")))
    {
        let mut j = if view { 3 } else { 2 };
        while toks.get(j).is_some_and(|t| t.is_kw("IF") || t.is_kw("NOT") || t.is_kw("EXISTS")) {
            j += 1;
        }
        let a = toks.get(j).and_then(|t| t.ident());
        if toks.get(j + 1).is_some_and(|t| t.is_punct('.')) {
            out.table = toks.get(j + 2).and_then(|t| t.ident()).map(|t| (a, t));
        } else {
            out.table = a.map(|a| (None, a));
        }
    }
    if matches!(first.as_str(), "create" | "alter") && toks.get(1).is_some_and(|t| t.is_kw("KEYSPACE")) {
        let mut j = 2;
        while toks.get(j).is_some_and(|t| t.is_kw("IF") || t.is_kw("NOT") || t.is_kw("EXISTS")) {
            j += 1;
        }
        out.keyspace = toks.get(j).and_then(|t| t.ident());
        out.alter_keyspace = first == "alter";
    }
    let mut edits: Vec<(usize, usize, String)> = Vec::new();
    let json_conditions = json_insert_conditions(&toks);
    edits.extend(json_conditions.iter().map(|&(start, end)| (start, end, String::new())));
    if !json_conditions.is_empty() && first == "insert" {
        let a = toks.get(2).and_then(|t| t.ident());
        out.json_insert_table = match (a, toks.get(3).is_some_and(|t| t.is_punct('.'))) {
            (Some(ks), true) => toks.get(4).and_then(|t| t.ident()).map(|t| (Some(ks), t)),
            (Some(t), false) => Some((None, t)),
            (None, _) => None,
        };
    }
    match vector_index::scan(&toks) {
        Some(Ok((ddl, index_edits))) => {
            out.vector_index = Some(ddl);
            edits.extend(index_edits);
        }
        Some(Err(message)) => {
            out.local = Some(LocalAnswer::Error { code: INVALID, message });
            return out;
        }
        None => {}
    }
    let mut depth = 0i32;
    let mut i = 0;
    while i < toks.len() {
        let t = toks[i];
        let next = |k: usize| toks.get(i + k);
        if t.is_punct('(') || t.is_punct('{') || t.is_punct('[') {
            depth += 1;
        } else if t.is_punct(')') || t.is_punct('}') || t.is_punct(']') {
            depth -= 1;
        }
        let dotted = next(1).is_some_and(|d| d.is_punct('.'));
        let name = t.ident();
        if depth == 0 && t.is_kw("BYPASS") && next(1).is_some_and(|n| n.is_kw("CACHE")) {
            edits.push((t.start, toks[i + 1].end, String::new()));
            i += 2;
            continue;
        }
        if depth == 0 && t.is_kw("USING") {
            match using_clause(&toks, i) {
                Ok(Some((start, end, keep))) => {
                    edits.push((start, end, keep));
                }
                Ok(None) => {}
                Err(message) => {
                    out.local = Some(LocalAnswer::Error { code: INVALID, message });
                    return out;
                }
            }
        }
        if depth == 0
            && t.is_kw("IF")
            && matches!(first.as_str(), "insert" | "update" | "delete" | "begin")
            && !json_conditions.iter().any(|&(start, _)| t.start == start)
        {
            out.lwt = true;
        }
        if dotted {
            let table = next(2).and_then(|x| x.ident()).unwrap_or_default();
            match name.as_deref() {
                Some("system_distributed") => edits.push((t.start, t.end, emu_keyspace.to_string())),
                Some("system_schema") if table == "scylla_tables" || table == "scylla_keyspaces" => {
                    edits.push((t.start, t.end, emu_keyspace.to_string()))
                }
                Some("system")
                    if ["tablets", "cdc_timestamps", "cdc_streams", "client_routes"].contains(&table.as_str()) =>
                {
                    edits.push((t.start, t.end, emu_keyspace.to_string()))
                }
                Some("system") if table == "peers_v2" => {
                    out.local =
                        Some(LocalAnswer::Error { code: INVALID, message: "unconfigured table peers_v2".into() });
                    return out;
                }
                Some(ks) if ks == emu_keyspace && table == "front_stats" && first == "select" => {
                    out.local = Some(LocalAnswer::FrontStats);
                    return out;
                }
                _ => {}
            }
        }
        // Scylla's `tablets` keyspace option: stripped, the choice kept.
        if depth == 0
            && matches!(first.as_str(), "create" | "alter")
            && toks.get(1).is_some_and(|t| t.is_kw("KEYSPACE"))
            && name.as_deref() == Some("tablets")
            && next(1).is_some_and(|e| e.is_punct('='))
            && next(2).is_some_and(|b| b.is_punct('{'))
        {
            match tablets_map(&toks, i + 2) {
                Ok((end, choice)) => {
                    let (start, stop, only) = property_span(&toks, i, end);
                    edits.push((start, stop, String::new()));
                    out.tablets = Some(choice);
                    out.tablets_only = only && first == "alter";
                    i = end + 1;
                    continue;
                }
                Err(message) => {
                    out.local = Some(LocalAnswer::Error { code: CONFIG_ERROR, message });
                    return out;
                }
            }
        }
        // `"cdc$stream_id" = 0x`: Scylla answers no rows (a stream id is
        // 16 bytes); Cassandra refuses an empty key. A one-byte key matches
        // no stream either, so it stands in for the empty one.
        if first == "select" && t.kind == Kind::QuotedIdent && name.as_deref() == Some("cdc$stream_id") {
            let mut j = i + 1;
            if toks.get(j).is_some_and(|x| x.is_punct('=') || x.is_kw("IN")) {
                j += 1;
                let list = toks.get(j).is_some_and(|x| x.is_punct('('));
                while let Some(v) = toks.get(j) {
                    if v.kind == Kind::Number && v.text.eq_ignore_ascii_case("0x") {
                        edits.push((v.start, v.end, "0x00".into()));
                    }
                    if !list || v.is_punct(')') {
                        break;
                    }
                    j += 1;
                }
            }
        }
        // Scylla's per-table `tablets` options: stripped, the minimum kept.
        if depth == 0
            && name.as_deref() == Some("tablets")
            && matches!(first.as_str(), "create" | "alter")
            && (view || toks.get(1).is_some_and(|t| t.is_kw("TABLE")))
            && next(1).is_some_and(|e| e.is_punct('='))
            && next(2).is_some_and(|b| b.is_punct('{'))
        {
            match options_map(&toks, i + 2) {
                Ok((end, entries)) => {
                    let (start, stop, only) = property_span(&toks, i, end);
                    // The only property: Cassandra's own default keeps the statement whole.
                    edits.push((start, stop, if only { "cdc = false".to_string() } else { String::new() }));
                    out.table_tablets = Some(TabletOptions::parse(&entries));
                    i = end + 1;
                    continue;
                }
                Err(message) => {
                    out.local = Some(LocalAnswer::Error { code: CONFIG_ERROR, message });
                    return out;
                }
            }
        }
        if depth == 0
            && name.as_deref() == Some("cdc")
            && out.schema
            && next(1).is_some_and(|e| e.is_punct('='))
            && next(2).is_some_and(|b| b.is_punct('{'))
        {
            match cdc_map(&toks, i + 2) {
                Ok((end, options)) => {
                    edits.push((toks[i + 2].start, toks[end].end, "false".into()));
                    out.cdc = Some(options);
                    i = end + 1;
                    continue;
                }
                Err(message) => {
                    out.local = Some(LocalAnswer::Error { code: CONFIG_ERROR, message });
                    return out;
                }
            }
        }
        i += 1;
    }
    if !edits.is_empty() {
        edits.sort_by_key(|e| e.0);
        let mut s = String::with_capacity(text.len());
        let mut at = 0;
        for (start, end, with) in edits {
            // An edit overlapping the one before (`USING TIMEOUT USING
            // TIMEOUT 1s`: the first clause's value is the second `USING`)
            // is left out; Cassandra answers the statement's syntax error.
            if start < at {
                continue;
            }
            s.push_str(&text[at..start]);
            s.push_str(&with);
            at = end;
        }
        s.push_str(&text[at..]);
        out.text = Some(s);
    }
    if matches!(first.as_str(), "create" | "alter") {
        scylla_properties(&mut out, text);
    }
    out
}

/// The bytes of `IF NOT EXISTS` in `INSERT INTO t JSON <value> ...`, which
/// ScyllaDB ignores: its `insert_json_statement::prepare_internal`
/// (cql3/statements/update_statement.cc) never looks at the flag (a FIXME
/// naming scylladb#8682), so the statement has no condition; it writes
/// the row even when one exists, and its answer is a Void result, not an
/// `[applied]` row (the reproducer `test_lwt_insert_json_if_not_exists` in
/// test/cqlpy/test_lwt.py, marked xfail with #8682, asserts both; the issue
/// thread <https://github.com/scylladb/scylladb/issues/8682> states them).
/// Inside a batch the statement is unconditional too (a batch is
/// conditional by its statements' conditions).
///
/// One range per such insert (a batch may have several); none for an insert
/// with `USING
/// TIMESTAMP`: ScyllaDB still sees `IF NOT EXISTS` when it checks the
/// attributes and refuses it ("Cannot provide custom timestamp for
/// conditional updates", `prepare_conditions` in
/// cql3/statements/modification_statement.cc), which is what Cassandra
/// answers to the statement as written.
fn json_insert_conditions(toks: &[Tok<'_>]) -> Vec<(usize, usize)> {
    let mut out = Vec::new();
    let mut depth = 0i32;
    let mut i = 0;
    while i < toks.len() {
        let t = toks[i];
        if t.is_punct('(') || t.is_punct('{') || t.is_punct('[') {
            depth += 1;
        } else if t.is_punct(')') || t.is_punct('}') || t.is_punct(']') {
            depth -= 1;
        }
        let json_at = if toks.get(i + 3).is_some_and(|d| d.is_punct('.')) { i + 5 } else { i + 3 };
        let json_insert = depth == 0
            && t.is_kw("INSERT")
            && toks.get(i + 1).is_some_and(|x| x.is_kw("INTO"))
            && toks.get(json_at).is_some_and(|x| x.is_kw("JSON"));
        if !json_insert {
            i += 1;
            continue;
        }
        // The insert's own tokens: up to the next statement of a batch.
        let mut end = json_at + 1;
        let mut inner = 0i32;
        let (mut found, mut timestamp) = (None, false);
        while let Some(x) = toks.get(end) {
            if x.is_punct('(') || x.is_punct('{') || x.is_punct('[') {
                inner += 1;
            } else if x.is_punct(')') || x.is_punct('}') || x.is_punct(']') {
                inner -= 1;
            } else if inner == 0 && ["INSERT", "UPDATE", "DELETE", "APPLY"].iter().any(|k| x.is_kw(k)) {
                break;
            } else if inner == 0 && x.is_kw("TIMESTAMP") && (toks[end - 1].is_kw("USING") || toks[end - 1].is_kw("AND"))
            {
                timestamp = true;
            } else if inner == 0
                && x.is_kw("IF")
                && toks.get(end + 1).is_some_and(|n| n.is_kw("NOT"))
                && toks.get(end + 2).is_some_and(|e| e.is_kw("EXISTS"))
            {
                found = Some((x.start, toks[end + 2].end));
            }
            end += 1;
        }
        out.extend(found.filter(|_| !timestamp));
        i = end;
    }
    out
}

/// Scylla's table and keyspace properties ([`super::properties`]), checked
/// on the statement as it will reach Cassandra: the accepted Scylla-only
/// ones taken out, the others refused.
fn scylla_properties(out: &mut Rewrite, original: &str) {
    let current = out.text.clone().unwrap_or_else(|| original.to_string());
    let Some(toks) = tokenize(&current) else { return };
    match super::properties::check(&current, &toks) {
        Ok(checked) if checked.edits.is_empty() => {
            out.tombstone_gc = checked.tombstone_gc;
            out.caching_enabled = checked.caching_enabled;
        }
        Ok(checked) => {
            out.tombstone_gc = checked.tombstone_gc;
            out.caching_enabled = checked.caching_enabled;
            let mut edits = checked.edits;
            edits.sort_by_key(|e| e.0);
            let mut s = String::with_capacity(current.len());
            let mut at = 0;
            for (start, end, with) in edits {
                s.push_str(&current[at..start]);
                s.push_str(&with);
                at = end;
            }
            s.push_str(&current[at..]);
            out.text = Some(s);
        }
        Err((code, message)) => out.local = Some(LocalAnswer::Error { code, message }),
    }
}

/// Parses `USING <clause> [AND <clause>]...` at `toks[at]`. Returns the byte
/// range to replace and its replacement when a TIMEOUT clause is present.
fn using_clause(toks: &[Tok<'_>], at: usize) -> Result<Option<(usize, usize, String)>, String> {
    let is_clause =
        |t: Option<&Tok<'_>>| t.is_some_and(|t| t.is_kw("TTL") || t.is_kw("TIMESTAMP") || t.is_kw("TIMEOUT"));
    if !is_clause(toks.get(at + 1)) {
        return Ok(None);
    }
    let mut clauses = Vec::new(); // (is_timeout, start, end)
    let mut j = at + 1;
    loop {
        let name = toks[j];
        let mut v = j + 1;
        let Some(value) = toks.get(v) else { return Ok(None) };
        if value.is_punct('-') {
            v += 1;
        }
        let Some(value) = toks.get(v) else { return Ok(None) };
        let timeout = name.is_kw("TIMEOUT");
        if timeout && (value.kind == Kind::Marker || value.is_punct(':')) {
            return Err("USING TIMEOUT with a bind marker is not supported by the Scylla emulation front".into());
        }
        let end = if value.is_punct(':') { toks.get(v + 1).map_or(value.end, |t| t.end) } else { value.end };
        clauses.push((timeout, name.start, end));
        j = v + 1;
        if toks.get(j).is_some_and(|t| t.is_kw("AND")) && is_clause(toks.get(j + 1)) {
            j += 1;
        } else {
            break;
        }
    }
    if !clauses.iter().any(|c| c.0) {
        return Ok(None);
    }
    let last_end = clauses.last().map_or(toks[at].end, |c| c.2);
    let keep: Vec<(usize, usize)> = clauses.iter().filter(|c| !c.0).map(|c| (c.1, c.2)).collect();
    Ok(Some(if keep.is_empty() {
        (toks[at].start, last_end, String::new())
    } else {
        let text_of = |(s, e): (usize, usize)| -> String {
            toks.iter().filter(|t| t.start >= s && t.end <= e).map(|t| t.text).collect::<Vec<_>>().join(" ")
        };
        let kept: Vec<String> = keep.into_iter().map(text_of).collect();
        (toks[at + 1].start, last_end, kept.join(" AND "))
    }))
}

/// The bytes to remove for the property `name = {...}` of `toks[at..=end]`:
/// with the `AND` before it, or else the `AND` after it; `true` when it is
/// the statement's only property (no `AND` on either side).
fn property_span(toks: &[Tok<'_>], at: usize, end: usize) -> (usize, usize, bool) {
    if at > 0 && toks[at - 1].is_kw("AND") {
        (toks[at - 1].start, toks[end].end, false)
    } else if toks.get(end + 1).is_some_and(|t| t.is_kw("AND")) {
        (toks[at].start, toks[end + 1].end, false)
    } else {
        (toks[at].start, toks[end].end, true)
    }
}

/// Reads the map literal `{key: value, ...}` at `toks[open]`: the index of
/// the closing `}` and the entries as texts (strings unquoted, other
/// literals as written, a leading `-` kept).
fn options_map(toks: &[Tok<'_>], open: usize) -> Result<(usize, Vec<(String, String)>), String> {
    let mut entries = Vec::new();
    let mut j = open + 1;
    let value_of = |t: &Tok<'_>| t.string_value().unwrap_or_else(|| t.text.to_string());
    loop {
        let t = toks.get(j).ok_or("unterminated options map")?;
        if t.is_punct('}') {
            return Ok((j, entries));
        }
        if t.is_punct(',') {
            j += 1;
            continue;
        }
        if !toks.get(j + 1).is_some_and(|c| c.is_punct(':')) {
            return Err(format!("Invalid options map near {}", t.text));
        }
        let mut v = j + 2;
        let mut value = String::new();
        if toks.get(v).is_some_and(|x| x.is_punct('-')) {
            value.push('-');
            v += 1;
        }
        let vt = toks.get(v).ok_or("unterminated options map")?;
        value.push_str(&value_of(vt));
        entries.push((value_of(t), value));
        j = v + 1;
    }
}

/// Parses a keyspace's `{'enabled': <bool>, 'initial': <n>}` at
/// `toks[open]` as Scylla's `ks_prop_defs::get_initial_tablets` does
/// (<https://github.com/scylladb/scylladb/blob/master/cql3/statements/ks_prop_defs.cc>):
/// the index of the closing `}` and the choice (see [`Rewrite::tablets`]);
/// the refusals are Scylla's ConfigurationException texts.
fn tablets_map(toks: &[Tok<'_>], open: usize) -> Result<(usize, Option<i32>), String> {
    let (end, mut entries) = options_map(toks, open)?;
    if let Some(at) = entries.iter().position(|(k, _)| k == "enabled") {
        let (_, enabled) = entries.remove(at);
        match enabled.as_str() {
            "true" => {}
            "false" => return Ok((end, None)),
            other => return Err(format!("Tablets enabled value must be true or false; found: {other}")),
        }
    }
    let mut initial = 0i32;
    if let Some(at) = entries.iter().position(|(k, _)| k == "initial") {
        let (_, value) = entries.remove(at);
        // `std::stol`: leading digits are enough; none is an error.
        let digits = value.trim_start().trim_start_matches(['-', '+']);
        if !digits.starts_with(|c: char| c.is_ascii_digit()) {
            return Err(format!("Initial tablets value should be numeric; found {value}"));
        }
        let n = super::tablet_options::atol(&value);
        initial = i32::try_from(n.max(0)).unwrap_or(i32::MAX);
    }
    if let Some((key, _)) = entries.first() {
        return Err(format!("Unrecognized tablets option {key}"));
    }
    Ok((end, Some(initial)))
}

/// Parses the map literal starting at `toks[open]` (`{`): returns the index
/// of the closing `}` and the options.
fn cdc_map(toks: &[Tok<'_>], open: usize) -> Result<(usize, CdcOptions), String> {
    let mut entries: Vec<(String, String)> = Vec::new();
    let mut j = open + 1;
    let value_of = |t: &Tok<'_>| t.string_value().unwrap_or_else(|| t.text.to_string());
    loop {
        let t = toks.get(j).ok_or("unterminated cdc options map")?;
        if t.is_punct('}') {
            break;
        }
        if t.is_punct(',') {
            j += 1;
            continue;
        }
        let colon = toks.get(j + 1).ok_or("unterminated cdc options map")?;
        if !colon.is_punct(':') {
            return Err(format!("Invalid cdc options map near {}", t.text));
        }
        let mut v = j + 2;
        let mut value = String::new();
        if toks.get(v).is_some_and(|x| x.is_punct('-')) {
            value.push('-');
            v += 1;
        }
        let vt = toks.get(v).ok_or("unterminated cdc options map")?;
        value.push_str(&value_of(vt));
        entries.push((value_of(t), value));
        j = v + 1;
    }
    Ok((j, CdcOptions::parse(&entries)?))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn rw(s: &str) -> Rewrite {
        rewrite(s, "emu", false)
    }

    #[test]
    fn strips_scylla_only_syntax() {
        assert_eq!(rw("SELECT * FROM t WHERE a = 1 BYPASS CACHE").text.unwrap(), "SELECT * FROM t WHERE a = 1 ");
        assert_eq!(rw("select * from t using timeout 5s").text.unwrap(), "select * from t ");
        assert_eq!(rw("SELECT * FROM t BYPASS CACHE USING TIMEOUT 100ms;").text.unwrap(), "SELECT * FROM t  ;");
        assert_eq!(
            rw("INSERT INTO t (a) VALUES (1) USING TTL 10 AND TIMEOUT 1s AND TIMESTAMP 5").text.unwrap(),
            "INSERT INTO t (a) VALUES (1) USING TTL 10 AND TIMESTAMP 5"
        );
        assert_eq!(
            rw("UPDATE t USING TIMEOUT 1s AND TTL 3 SET v = 1 WHERE a = 1").text.unwrap(),
            "UPDATE t USING TTL 3 SET v = 1 WHERE a = 1"
        );
        assert_eq!(rw("SELECT 'BYPASS CACHE' FROM t").text, None);
        assert_eq!(rw("INSERT INTO t (a) VALUES (1) USING TTL 10").text, None);
        assert!(matches!(rw("SELECT * FROM t USING TIMEOUT ?").local, Some(LocalAnswer::Error { .. })));
    }

    /// Regression (found by the `rewrite` fuzz target): two `USING`
    /// clauses whose edits overlap sliced the text backwards and panicked.
    #[test]
    fn overlapping_using_clauses_are_not_a_panic() {
        let text = "SELECT * FROM t USING TIMEOUT  USING TIMEOUT 1s";
        assert_eq!(rw(text).text.unwrap(), "SELECT * FROM t  TIMEOUT 1s", "the first clause taken out");
        let _ = rewrite("create keyspac& USING TIMEOUT  USING TIMEOUT 1s */ SELECT * FROM s\0c", "emu", false);
    }

    #[test]
    fn renames_system_distributed_and_scylla_tables() {
        assert_eq!(
            rw("SELECT time FROM system_distributed.cdc_generation_timestamps WHERE key = 'timestamps'").text.unwrap(),
            "SELECT time FROM emu.cdc_generation_timestamps WHERE key = 'timestamps'"
        );
        assert_eq!(
            rw("SELECT keyspace_name, table_name, partitioner FROM system_schema.scylla_tables").text.unwrap(),
            "SELECT keyspace_name, table_name, partitioner FROM emu.scylla_tables"
        );
        assert_eq!(rw("SELECT * FROM system_schema.tables").text, None);
        assert!(matches!(rw("SELECT * FROM system.peers_v2").local, Some(LocalAnswer::Error { code: 0x2200, .. })));
        assert_eq!(rw("select * from emu.front_stats").local, Some(LocalAnswer::FrontStats));
        assert_eq!(
            rw("SELECT last_token, replicas FROM system.tablets WHERE table_id = ?").text.unwrap(),
            "SELECT last_token, replicas FROM emu.tablets WHERE table_id = ?"
        );
        assert_eq!(
            rw("SELECT stream_id FROM system.cdc_streams WHERE keyspace_name = ? AND table_name = ?").text.unwrap(),
            "SELECT stream_id FROM emu.cdc_streams WHERE keyspace_name = ? AND table_name = ?"
        );
        assert_eq!(
            rw("SELECT timestamp FROM system.cdc_timestamps WHERE keyspace_name = 'k'").text.unwrap(),
            "SELECT timestamp FROM emu.cdc_timestamps WHERE keyspace_name = 'k'"
        );
        assert_eq!(rw("SELECT * FROM system.local").text, None, "other system tables stay");
    }

    #[test]
    fn cdc_map_becomes_cassandras_flag() {
        let r = rw("CREATE TABLE ks.t (pk int PRIMARY KEY, v map<int, text>) WITH cdc = {'enabled': true, 'ttl': 60} AND comment = 'x'");
        assert_eq!(
            r.text.unwrap(),
            "CREATE TABLE ks.t (pk int PRIMARY KEY, v map<int, text>) WITH cdc = false AND comment = 'x'"
        );
        let o = r.cdc.unwrap();
        assert!(o.enabled);
        assert_eq!(o.ttl, 60);
        assert!(r.schema);
        let r = rw("ALTER TABLE t WITH cdc = {'enabled': 'false'}");
        assert_eq!(r.text.unwrap(), "ALTER TABLE t WITH cdc = false");
        assert!(!r.cdc.unwrap().enabled);
        assert!(matches!(
            rw("ALTER TABLE t WITH cdc = {'nope': 1}").local,
            Some(LocalAnswer::Error { code: 0x2300, .. })
        ));
        assert_eq!(rw("CREATE TABLE t (a int PRIMARY KEY) WITH cdc = true").cdc, None);
        assert_eq!(rw("ALTER TABLE \"Ks\".T WITH cdc = {}").table, Some((Some("Ks".into()), "t".into())));
        assert_eq!(rw("CREATE TABLE IF NOT EXISTS t (a int PRIMARY KEY)").table, Some((None, "t".into())));
    }

    #[test]
    fn table_tablets_options_are_stripped_and_kept() {
        let min = |r: &Rewrite| r.table_tablets.clone().map(|o| o.map(|o| o.min_tablet_count));
        let r = rw("ALTER TABLE ks.t WITH tablets = {'min_tablet_count': 16}");
        assert_eq!((r.text.as_deref(), min(&r)), (Some("ALTER TABLE ks.t WITH cdc = false"), Some(Ok(Some(16)))));
        let r = rw(
            "ALTER TABLE t WITH comment = 'x' AND tablets = {'min_tablet_count': '4', 'expected_data_size_in_gb': 1}",
        );
        assert_eq!((r.text.as_deref(), min(&r)), (Some("ALTER TABLE t WITH comment = 'x' "), Some(Ok(Some(4)))));
        let r = rw(
            "CREATE TABLE t (pk int PRIMARY KEY) WITH tablets = {'min_per_shard_tablet_count': 0.5} AND comment = 'x'",
        );
        assert_eq!(
            (r.text.as_deref(), min(&r)),
            (Some("CREATE TABLE t (pk int PRIMARY KEY) WITH  comment = 'x'"), Some(Ok(None)))
        );
        // Refusals wait for the keyspace's flavour: they ride along.
        let r = rw("ALTER TABLE t WITH tablets = {'min_tablet_count': -1}");
        assert_eq!(r.local, None);
        assert_eq!(r.table_tablets.unwrap().unwrap_err().to_string(), "Invalid value '-1' for min_tablet_count");
        let r = rw("CREATE TABLE t (p int PRIMARY KEY) WITH tablets = {'x': 1}");
        assert_eq!(r.table_tablets.unwrap().unwrap_err().to_string(), "Unknown tablet hint 'x'");
        assert_eq!(rw("SELECT tablets FROM t").table_tablets, None);
    }

    #[test]
    fn keyspace_tablets_map_in_scylla_words() {
        let err = |s: &str| match rw(s).local {
            Some(LocalAnswer::Error { code, message }) => (code, message),
            other => panic!("{s}: {other:?}"),
        };
        assert_eq!(
            err("CREATE KEYSPACE k WITH replication = {'class': 'NetworkTopologyStrategy'} AND tablets = {'enabled': 'yes'}"),
            (0x2300, "Tablets enabled value must be true or false; found: yes".to_string())
        );
        assert_eq!(
            err("ALTER KEYSPACE k WITH replication = {'class': 'NetworkTopologyStrategy'} AND tablets = {'initial': 'x'}"),
            (0x2300, "Initial tablets value should be numeric; found x".to_string())
        );
        assert_eq!(
            err("CREATE KEYSPACE k WITH replication = {'class': 'NetworkTopologyStrategy'} AND tablets = {'foo': 1}"),
            (0x2300, "Unrecognized tablets option foo".to_string())
        );
        let r = rw("ALTER KEYSPACE \"Ks\" WITH replication = {'class': 'NetworkTopologyStrategy', 'replication_factor': 1} AND tablets = {'initial': 1}");
        assert_eq!(
            (r.text.as_deref(), r.tablets, r.keyspace.as_deref(), r.tablets_only),
            (
                Some("ALTER KEYSPACE \"Ks\" WITH replication = {'class': 'NetworkTopologyStrategy', 'replication_factor': 1} "),
                Some(Some(1)),
                Some("Ks"),
                false
            )
        );
        let r = rw("ALTER KEYSPACE k WITH tablets = {'enabled': false}");
        assert_eq!((r.tablets, r.tablets_only), (Some(None), true));
        assert_eq!(rw("ALTER KEYSPACE k WITH durable_writes = true").tablets, None);
    }

    #[test]
    fn tablets_option_is_stripped_and_kept() {
        let r = rw("CREATE KEYSPACE k WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1} AND tablets = {'enabled': false}");
        assert_eq!(
            r.text.unwrap(),
            "CREATE KEYSPACE k WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1} "
        );
        assert_eq!(r.tablets, Some(None));
        let r = rw("CREATE KEYSPACE k WITH tablets = {'enabled': true, 'initial': 8} AND replication = {'class': 'SimpleStrategy'}");
        assert_eq!(r.text.unwrap(), "CREATE KEYSPACE k WITH  replication = {'class': 'SimpleStrategy'}");
        assert_eq!(r.tablets, Some(Some(8)));
    }

    #[test]
    fn empty_stream_id_matches_nothing() {
        assert_eq!(
            rw("SELECT * FROM t_scylla_cdc_log WHERE \"cdc$stream_id\" = 0x").text.unwrap(),
            "SELECT * FROM t_scylla_cdc_log WHERE \"cdc$stream_id\" = 0x00"
        );
        assert_eq!(
            rw("SELECT * FROM t_scylla_cdc_log WHERE \"cdc$stream_id\" IN (0x, 0x01)").text.unwrap(),
            "SELECT * FROM t_scylla_cdc_log WHERE \"cdc$stream_id\" IN (0x00, 0x01)"
        );
    }

    #[test]
    fn use_is_recognised_without_any_other_rewrite() {
        assert!(rw("USE ks").use_keyspace);
        assert!(rw("use \"Ks\";").use_keyspace);
        assert!(rw("-- pick one\nUSE ks").use_keyspace);
        assert!(!rw("SELECT * FROM used").use_keyspace);
    }

    #[test]
    fn json_insert_if_not_exists_loses_its_condition_as_on_scylla() {
        let rw = rewrite(r#"INSERT INTO ks.t JSON '{"p": 1, "c": 1}' IF NOT EXISTS"#, "emu", true);
        assert_eq!(rw.text.as_deref(), Some(r#"INSERT INTO ks.t JSON '{"p": 1, "c": 1}' "#));
        assert!(!rw.lwt, "not conditional on Scylla: no LWT mark");
        assert_eq!(rw.json_insert_table, Some((Some("ks".to_string()), "t".to_string())));
        let rw = rewrite("insert into t json ? default unset if not exists using ttl 5", "emu", false);
        assert_eq!(rw.text.as_deref(), Some("insert into t json ? default unset  using ttl 5"));
        // In a batch the JSON insert is unconditional too, the other kept.
        let rw = rewrite(
            "BEGIN BATCH INSERT INTO t JSON '{\"p\": 1}' IF NOT EXISTS; UPDATE t SET v = 1 WHERE p = 2 IF v = 0 APPLY BATCH",
            "emu",
            false,
        );
        assert_eq!(
            rw.text.as_deref(),
            Some("BEGIN BATCH INSERT INTO t JSON '{\"p\": 1}' ; UPDATE t SET v = 1 WHERE p = 2 IF v = 0 APPLY BATCH"),
        );
        assert!(rw.lwt, "the update's condition stays");
        for untouched in [
            "INSERT INTO t JSON '{\"p\": 1}' IF NOT EXISTS USING TIMESTAMP 5",
            "INSERT INTO t JSON ? IF NOT EXISTS USING TTL 5 AND TIMESTAMP 7",
            "INSERT INTO t (p, v) VALUES (1, 'json') IF NOT EXISTS",
            "INSERT INTO t JSON '{\"p\": 1}'",
            "SELECT JSON * FROM t",
        ] {
            assert_eq!(rewrite(untouched, "emu", true).text, None, "{untouched}");
        }
        assert!(rewrite("INSERT INTO t JSON ? IF NOT EXISTS USING TIMESTAMP 5", "emu", true).lwt);
    }

    #[test]
    fn lwt_detection() {
        assert!(rewrite("INSERT INTO t (a) VALUES (?) IF NOT EXISTS", "emu", true).lwt);
        assert!(rewrite("UPDATE t SET v = ? WHERE a = ? IF v = ?", "emu", true).lwt);
        assert!(!rewrite("INSERT INTO t (a) VALUES (?)", "emu", true).lwt);
        assert!(!rewrite("CREATE TABLE IF NOT EXISTS t (a int PRIMARY KEY)", "emu", true).lwt);
    }
}
