//! Looking like ScyllaDB to those who check the schema: ScyllaDB's test
//! suite decides "this is Scylla" by reading
//! `SELECT * FROM system_schema.tables WHERE keyspace_name = 'system'` and
//! looking for a table name containing `scylla` (`is_scylla` in
//! <https://github.com/scylladb/scylladb/blob/master/test/cqlpy/util.py>),
//! and its fixtures then read `system.config`, a table Cassandra lacks.
//!
//! - Reads of `system_schema.tables` sent as QUERY get rows for some of
//!   Scylla's own `system` tables ([`SCYLLA_SYSTEM_TABLES`], names from
//!   <https://github.com/scylladb/scylladb/blob/master/docs/dev/system_keyspace.md>)
//!   merged into Cassandra's answer: same columns as the other rows (the
//!   values of a Cassandra `system` row of the same page, with the name,
//!   a name-derived id and an empty comment), in Cassandra's clustering
//!   order (each goes right before the first `system` row whose name sorts
//!   after it, so a paged read gets each row exactly once). Forms the front
//!   cannot place a row in (aliases, functions, `DISTINCT`, bind markers,
//!   restrictions other than `=`/`IN` on the two key columns) are left as
//!   Cassandra answers them.
//! - `SELECT ... FROM system.config ...` is answered with no rows in
//!   Scylla's columns (`name`, `source`, `type`, `value`, all `text`): to a
//!   fixture that reads a setting, "not set".
//!
//! Not done: `system_schema.columns` has no rows for these tables (no
//! check found reads them; a driver's metadata shows the tables without
//! columns), and prepared reads of `system_schema.tables` are not merged.

use bytes::{BufMut, Bytes};
use shardwise_protocol::codec::Reader;
use shardwise_protocol::response::ResultMessage;
use shardwise_protocol::rows::{ResultMetadata, Rows};
use shardwise_protocol::types::{ColumnSpec, ColumnType};

use crate::tokens::{tokenize, Kind, Tok};

/// Scylla's `system` tables the front lists in `system_schema.tables`, by name.
pub const SCYLLA_SYSTEM_TABLES: [&str; 7] = [
    "cdc_generations_v3",
    "raft",
    "scylla_local",
    "scylla_table_schema_history",
    "scylla_views_builds_in_progress",
    "tablets",
    "topology",
];

/// The columns of Scylla's `system.config`.
const CONFIG_COLUMNS: [&str; 4] = ["name", "source", "type", "value"];

/// A restriction on one key column: any value, or one of these.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Filter {
    Any,
    OneOf(Vec<String>),
}

impl Filter {
    fn admits(&self, v: &str) -> bool {
        match self {
            Filter::Any => true,
            Filter::OneOf(values) => values.iter().any(|x| x == v),
        }
    }
}

/// What came before a page: the answer's start, the previous page's last
/// row (`Some(name)` for a `system` table, `None` for another keyspace's),
/// or a previous page the front no longer remembers.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Before {
    Start,
    Row(Option<Vec<u8>>),
    Unknown,
}

/// A read of `system_schema.tables` whose answer gets Scylla's rows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct TablesRead {
    keyspace: Filter,
    table: Filter,
    limit: Option<usize>,
    before: Before,
}

/// The last row of recent pages, by the paging state that continues after
/// them (the next page's request carries it): a row that belongs at a page
/// boundary goes into exactly one of the two pages.
static PAGE_ENDS: std::sync::Mutex<Vec<PageEnd>> = std::sync::Mutex::new(Vec::new());

/// A paging state and the `system` table name of the page's last row
/// (`None`: another keyspace's row).
type PageEnd = (Vec<u8>, Option<Vec<u8>>);

/// How many page ends are remembered (oldest forgotten first).
const PAGE_ENDS_KEPT: usize = 256;

fn remember_page_end(paging_state: &[u8], last: Option<Vec<u8>>) {
    if let Ok(mut ends) = PAGE_ENDS.lock() {
        if ends.len() >= PAGE_ENDS_KEPT {
            ends.remove(0);
        }
        ends.push((paging_state.to_vec(), last));
    }
}

impl TablesRead {
    /// The read continues after the page that `paging_state` follows.
    pub(crate) fn continuing(mut self, paging_state: Option<&[u8]>) -> TablesRead {
        self.before = match paging_state {
            None => Before::Start,
            Some(p) => match PAGE_ENDS.lock() {
                Ok(ends) => {
                    ends.iter().rev().find(|(k, _)| k == p).map_or(Before::Unknown, |(_, v)| Before::Row(v.clone()))
                }
                Err(_) => Before::Unknown,
            },
        };
        self
    }
}

/// What the front does with a statement for identity's sake.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Identity {
    /// Merge Scylla's rows into the answer.
    Tables(TablesRead),
    /// Answer a `system.config` read with no rows in these columns.
    Config(Vec<String>),
    /// A `system.config` read naming a column it does not have.
    ConfigUndefined(String),
}

fn contains_ci(hay: &str, needle: &str) -> bool {
    hay.as_bytes().windows(needle.len()).any(|w| w.eq_ignore_ascii_case(needle.as_bytes()))
}

/// What `text` needs, when it reads `system_schema.tables` or `system.config`.
pub(crate) fn plan(text: &str) -> Option<Identity> {
    if !(contains_ci(text, "system_schema") || contains_ci(text, "config")) {
        return None;
    }
    let toks = tokenize(text)?;
    let mut toks: &[Tok<'_>] = &toks;
    if toks.last().is_some_and(|t| t.is_punct(';')) {
        toks = &toks[..toks.len() - 1];
    }
    if !toks.first()?.is_kw("SELECT") {
        return None;
    }
    let from = toks.iter().position(|t| t.is_kw("FROM"))?;
    let (ks, table) = (toks.get(from + 1)?.ident()?, toks.get(from + 3)?.ident()?);
    if !toks.get(from + 2)?.is_punct('.') {
        return None;
    }
    let selectors = selectors(&toks[1..from]);
    match (ks.as_str(), table.as_str()) {
        ("system", "config") => {
            let columns = match selectors? {
                None => CONFIG_COLUMNS.iter().map(|c| c.to_string()).collect(),
                Some(named) => named,
            };
            if let Some(bad) = columns.iter().find(|c| !CONFIG_COLUMNS.contains(&c.as_str())) {
                return Some(Identity::ConfigUndefined(bad.clone()));
            }
            Some(Identity::Config(columns))
        }
        ("system_schema", "tables") => {
            selectors?;
            let read = tables_read(&toks[from + 4..])?;
            read.keyspace.admits("system").then_some(Identity::Tables(read))
        }
        _ => None,
    }
}

/// The selected columns: `Some(None)` for `*`, `Some(Some(names))` for
/// plain column names; `None` for anything else (functions, aliases,
/// `DISTINCT`, `JSON`).
fn selectors(toks: &[Tok<'_>]) -> Option<Option<Vec<String>>> {
    if toks.len() == 1 && toks[0].is_punct('*') {
        return Some(None);
    }
    let mut names = Vec::new();
    for (i, t) in toks.iter().enumerate() {
        if i % 2 == 1 {
            if !t.is_punct(',') {
                return None;
            }
        } else if t.is_kw("DISTINCT") || t.is_kw("JSON") || !matches!(t.kind, Kind::Ident | Kind::QuotedIdent) {
            return None;
        } else {
            names.push(t.ident()?);
        }
    }
    (!names.is_empty()).then_some(Some(names))
}

/// `[WHERE <key> = 'v' | <key> IN ('v', ...) [AND ...]] [LIMIT n] [ALLOW FILTERING]`.
fn tables_read(toks: &[Tok<'_>]) -> Option<TablesRead> {
    let mut read = TablesRead { keyspace: Filter::Any, table: Filter::Any, limit: None, before: Before::Start };
    let mut i = 0;
    if toks.first().is_some_and(|t| t.is_kw("WHERE")) {
        i = 1;
        loop {
            let column = toks.get(i)?.ident()?;
            let (values, next) = if toks.get(i + 1)?.is_punct('=') {
                (vec![toks.get(i + 2)?.string_value()?], i + 3)
            } else if toks.get(i + 1)?.is_kw("IN") && toks.get(i + 2)?.is_punct('(') {
                let mut values = Vec::new();
                let mut j = i + 3;
                loop {
                    values.push(toks.get(j)?.string_value()?);
                    match toks.get(j + 1)? {
                        t if t.is_punct(',') => j += 2,
                        t if t.is_punct(')') => break,
                        _ => return None,
                    }
                }
                (values, j + 2)
            } else {
                return None;
            };
            let slot = match column.as_str() {
                "keyspace_name" => &mut read.keyspace,
                "table_name" => &mut read.table,
                _ => return None,
            };
            if *slot != Filter::Any {
                return None;
            }
            *slot = Filter::OneOf(values);
            i = next;
            if toks.get(i).is_some_and(|t| t.is_kw("AND")) {
                i += 1;
            } else {
                break;
            }
        }
    }
    if toks.get(i).is_some_and(|t| t.is_kw("LIMIT")) {
        let n = toks.get(i + 1).filter(|t| t.kind == Kind::Number)?;
        read.limit = Some(n.text.parse().ok()?);
        i += 2;
    }
    if toks.get(i).is_some_and(|t| t.is_kw("ALLOW")) && toks.get(i + 1).is_some_and(|t| t.is_kw("FILTERING")) {
        i += 2;
    }
    (i == toks.len()).then_some(read)
}

/// The empty answer of a `system.config` read.
pub(crate) fn config_result(columns: &[String]) -> Option<ResultMessage> {
    let specs: Vec<ColumnSpec> = columns
        .iter()
        .map(|c| ColumnSpec {
            keyspace: "system".into(),
            table: "config".into(),
            name: c.clone(),
            typ: ColumnType::Text,
        })
        .collect();
    let metadata = ResultMetadata { columns_count: specs.len(), specs: Some(specs), ..Default::default() };
    Rows::from_raw(metadata, &[]).ok().map(ResultMessage::Rows)
}

/// A stable id for a Scylla table of keyspace `system` (derived from its
/// name; Scylla's are name-based too, by another hash).
fn table_id(name: &str) -> [u8; 16] {
    let mut h: u64 = 0;
    for b in format!("system.{name}").bytes() {
        h = crate::rng::mix(h ^ u64::from(b));
    }
    let hi = crate::rng::mix(h);
    let lo = crate::rng::mix(hi);
    let mut bytes = [0u8; 16];
    bytes[..8].copy_from_slice(&hi.to_be_bytes());
    bytes[8..].copy_from_slice(&lo.to_be_bytes());
    *uuid::Builder::from_bytes(bytes).with_version(uuid::Version::Md5).as_uuid().as_bytes()
}

/// The RESULT body `body` (message at `offset`) with Scylla's rows merged
/// in; `None` when it is not a page of rows the front can place them in.
pub(crate) fn amend(read: &TablesRead, body: &Bytes, offset: usize) -> Option<Bytes> {
    let mut r = Reader::new(body.get(offset..)?);
    if r.i32("result kind").ok()? != 0x0002 {
        return None;
    }
    let rows = Rows::decode(body.clone(), offset + 4).ok()?;
    let specs = rows.metadata.specs.clone()?;
    let column = |name: &str| specs.iter().position(|s| s.name == name);
    if specs.iter().any(|s| s.keyspace != "system_schema" || s.table != "tables") {
        return None;
    }
    let (ks_col, name_col, id_col, comment_col) =
        (column("keyspace_name"), column("table_name"), column("id"), column("comment"));
    // Without the name column the rows can be placed only when the read
    // names the tables itself.
    if name_col.is_none() && read.table == Filter::Any {
        return None;
    }
    let mut values: Vec<Vec<Option<&[u8]>>> = Vec::with_capacity(rows.rows_count() + SCYLLA_SYSTEM_TABLES.len());
    let mut raw = Reader::new(rows.raw_rows());
    for _ in 0..rows.rows_count() {
        let mut row = Vec::with_capacity(specs.len());
        for _ in 0..specs.len() {
            row.push(raw.bytes("row value").ok()?);
        }
        values.push(row);
    }
    let is_system = |row: &[Option<&[u8]>]| match ks_col {
        Some(k) => row[k] == Some(&b"system"[..]),
        None => read.keyspace == Filter::OneOf(vec!["system".into()]),
    };
    if ks_col.is_none() && !is_system(&[]) {
        return None;
    }
    fn name_of<'a>(row: &[Option<&'a [u8]>], name_col: Option<usize>) -> Option<&'a [u8]> {
        name_col.and_then(|c| row[c])
    }
    let last_page = rows.metadata.paging_state.is_none();
    let template: Option<Vec<Option<&[u8]>>> = values.iter().find(|r| is_system(r)).cloned();
    let ids: Vec<[u8; 16]> = SCYLLA_SYSTEM_TABLES.iter().map(|n| table_id(n)).collect();
    let mut added = 0;
    for (n, name) in SCYLLA_SYSTEM_TABLES.iter().enumerate() {
        if !read.table.admits(name)
            || values.iter().any(|r| is_system(r) && name_of(r, name_col) == Some(name.as_bytes()))
        {
            continue;
        }
        // Whatever precedes row `i` (in this page or before it) sorts
        // before `name` or ends another partition.
        let preceded = |i: usize| match i.checked_sub(1) {
            Some(_) => true,
            None => match &read.before {
                Before::Start | Before::Row(None) => true,
                Before::Row(Some(prev)) => prev.as_slice() < name.as_bytes(),
                Before::Unknown => false,
            },
        };
        let greater =
            values.iter().position(|r| is_system(r) && name_of(r, name_col).is_some_and(|x| x > name.as_bytes()));
        let at = match greater {
            // Before the first `system` table that sorts after it.
            Some(at) if preceded(at) => at,
            Some(_) => continue,
            // No `system` table sorts after it here: after the last
            // `system` row when another keyspace's row or the end of the
            // answer follows it, or at the end of the last page when the
            // read named it.
            None => match values.iter().rposition(|r| is_system(r)) {
                Some(l) if l + 1 < values.len() || last_page => l + 1,
                None if values.first().is_some_and(|r| !is_system(r))
                    && preceded(0)
                    && read.before != Before::Start =>
                {
                    0
                }
                None if last_page && read.table != Filter::Any => values.len(),
                _ => continue,
            },
        };
        let mut row: Vec<Option<&[u8]>> = match &template {
            Some(t) => t.clone(),
            None => vec![None; specs.len()],
        };
        if let Some(c) = ks_col {
            row[c] = Some(b"system");
        }
        if let Some(c) = name_col {
            row[c] = Some(name.as_bytes());
        }
        if let Some(c) = id_col {
            row[c] = Some(&ids[n][..]);
        }
        if let Some(c) = comment_col {
            row[c] = Some(b"");
        }
        values.insert(at, row);
        added += 1;
    }
    if let (Some(paging_state), Some(last)) = (&rows.metadata.paging_state, values.last()) {
        let last = if is_system(last) { Some(name_of(last, name_col).unwrap_or_default().to_vec()) } else { None };
        remember_page_end(paging_state, last);
    }
    if added == 0 {
        return None;
    }
    if let Some(limit) = read.limit {
        values.truncate(limit);
    }
    let amended = Rows::from_raw(rows.metadata.clone(), &values).ok()?;
    let mut out = Vec::with_capacity(body.len() + 256);
    out.put_slice(body.get(..offset)?);
    amended.encode(&mut out).ok()?;
    Some(Bytes::from(out))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn spec(name: &str) -> ColumnSpec {
        ColumnSpec {
            keyspace: "system_schema".into(),
            table: "tables".into(),
            name: name.into(),
            typ: ColumnType::Text,
        }
    }

    fn page(rows: &[(&str, &str)], paging: bool) -> Bytes {
        let metadata = ResultMetadata {
            columns_count: 3,
            specs: Some(vec![spec("keyspace_name"), spec("table_name"), spec("comment")]),
            paging_state: paging.then(|| Bytes::from_static(b"p")),
            ..Default::default()
        };
        let raw: Vec<Vec<Option<&[u8]>>> =
            rows.iter().map(|(k, t)| vec![Some(k.as_bytes()), Some(t.as_bytes()), Some(&b"c"[..])]).collect();
        let mut out = Vec::new();
        Rows::from_raw(metadata, &raw).unwrap().encode(&mut out).unwrap();
        Bytes::from(out)
    }

    fn names(body: &Bytes) -> Vec<(String, String)> {
        let rows = Rows::decode(body.clone(), 4).unwrap();
        rows.rows::<(String, String, String)>().unwrap().map(|r| r.unwrap()).map(|(k, t, _)| (k, t)).collect()
    }

    fn tables(text: &str) -> TablesRead {
        match plan(text) {
            Some(Identity::Tables(t)) => t,
            other => panic!("{text}: {other:?}"),
        }
    }

    #[test]
    fn plans() {
        assert!(matches!(
            plan("SELECT * FROM system_schema.tables WHERE keyspace_name = 'system'"),
            Some(Identity::Tables(_))
        ));
        assert!(matches!(plan("select table_name from SYSTEM_SCHEMA.tables;"), Some(Identity::Tables(_))));
        assert_eq!(plan("SELECT * FROM system_schema.tables WHERE keyspace_name = 'ks'"), None);
        assert_eq!(plan("SELECT * FROM system_schema.tables WHERE keyspace_name = ?"), None);
        assert_eq!(plan("SELECT count(*) FROM system_schema.tables"), None);
        assert_eq!(plan("SELECT table_name AS t FROM system_schema.tables"), None);
        assert_eq!(plan("SELECT * FROM system_schema.tables WHERE table_name > 'a' ALLOW FILTERING"), None);
        let t = tables("SELECT * FROM system_schema.tables WHERE keyspace_name IN ('ks', 'system') AND table_name = 'raft' LIMIT 3");
        assert_eq!((t.table, t.limit), (Filter::OneOf(vec!["raft".into()]), Some(3)));
        assert_eq!(
            plan("SELECT value FROM system.config WHERE name = 'consistent_cluster_management'"),
            Some(Identity::Config(vec!["value".into()]))
        );
        assert_eq!(plan("SELECT * FROM system.config").map(|_| ()), Some(()));
        assert_eq!(plan("SELECT nope FROM system.config"), Some(Identity::ConfigUndefined("nope".into())));
        assert_eq!(plan("SELECT * FROM ks.config"), None);
    }

    #[test]
    fn rows_go_in_clustering_order_once_across_pages() {
        let read = tables("SELECT keyspace_name, table_name, comment FROM system_schema.tables");
        // One page holding the whole `system` partition.
        let one = page(
            &[
                ("ks", "a"),
                ("system", "compaction_history"),
                ("system", "local"),
                ("system", "size_estimates"),
                ("system", "top_partitions"),
                ("system", "transferred_ranges"),
                ("x", "y"),
            ],
            false,
        );
        let got = names(&amend(&read, &one, 0).unwrap());
        let system: Vec<&str> = got.iter().filter(|(k, _)| k == "system").map(|(_, t)| t.as_str()).collect();
        let mut sorted = system.clone();
        sorted.sort();
        assert_eq!(system, sorted, "clustering order");
        assert_eq!(system.len(), 5 + SCYLLA_SYSTEM_TABLES.len());
        assert_eq!((got[0].1.as_str(), got[got.len() - 1].1.as_str()), ("a", "y"), "other keyspaces untouched");
        // Split pages: every row once, in order.
        let p1 = page(&[("system", "IndexInfo"), ("system", "compaction_history"), ("system", "local")], true);
        let p2 = page(&[("system", "size_estimates"), ("system", "tablets_x")], false);
        let mut all = Vec::new();
        for (p, state) in [(&p1, None), (&p2, Some(&b"p"[..]))] {
            let read = read.clone().continuing(state);
            all.extend(names(&amend(&read, p, 0).unwrap_or_else(|| p.clone())).into_iter().map(|(_, t)| t));
        }
        let mut sorted = all.clone();
        sorted.sort();
        assert_eq!(all, sorted);
        for n in SCYLLA_SYSTEM_TABLES {
            assert_eq!(all.iter().filter(|t| *t == n).count(), 1, "{n} once");
        }
    }

    #[test]
    fn a_named_table_is_answered_and_limits_hold() {
        let read = tables("SELECT keyspace_name, table_name, comment FROM system_schema.tables WHERE keyspace_name = 'system' AND table_name = 'scylla_local'");
        let got = names(&amend(&read, &page(&[], false), 0).unwrap());
        assert_eq!(got, vec![("system".to_string(), "scylla_local".to_string())]);
        let read = tables("SELECT keyspace_name, table_name, comment FROM system_schema.tables LIMIT 2");
        let got = names(&amend(&read, &page(&[("system", "local"), ("system", "size_estimates")], false), 0).unwrap());
        assert_eq!(got.len(), 2);
    }

    #[test]
    fn config_is_empty_in_scylla_columns() {
        let ResultMessage::Rows(rows) = config_result(&["value".into()]).unwrap() else { panic!() };
        assert_eq!(rows.rows_count(), 0);
        assert_eq!(rows.metadata.specs.unwrap()[0].name, "value");
    }
}
