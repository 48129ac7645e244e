//! Scylla's vector index, and the CDC it switches on.
//!
//! Scylla's vector store follows a table by reading its CDC log, so
//! `CREATE INDEX ... USING 'vector_index'` turns CDC on for the table (with
//! the table's own CDC options if it has any, the defaults otherwise), and
//! dropping the table's last vector index turns it off again; the log table
//! stays, detached, and is re-attached when an index is created again.
//!
//! Cassandra 5.0 has no `vector_index` class; its index for vector columns
//! is SAI. [`scan`] therefore rewrites the statement to `USING 'sai'`,
//! keeping only the options SAI understands too, and the front does the CDC
//! part itself once Cassandra has created or dropped the index
//! (`shared::Shared::on_vector_index`).
//!
//! Scylla refuses a vector index, in its own words (`refusal`), when the
//! user explicitly disabled CDC on the table, or when the table's CDC
//! options do not give the vector store what it needs: a log TTL of at least
//! [`VS_TTL_SECONDS`] (or none) and full deltas or post-images.
//!
//! Not reproduced: Scylla's requirement that the keyspace use tablets, the
//! validation of the values of the index options, and indexes whose target
//! list has more than the vector column. The front remembers which indexes
//! are vector indexes in memory only, so a restarted front treats the
//! indexes created before as plain ones.

use crate::cdc::{CdcOptions, Delta, Registry};
use crate::tokens::{Kind, Tok};

/// The shortest log TTL the vector store accepts, in seconds (24 hours).
pub const VS_TTL_SECONDS: u64 = 86400;

/// The class name Scylla's vector index is created with.
const CLASS: &str = "vector_index";

/// Options of a vector index that SAI understands too (sent on).
const SAI_OPTIONS: &[&str] = &["similarity_function", "source_model"];

/// Options of a vector index that only Scylla's vector store uses (dropped).
const STORE_OPTIONS: &[&str] = &[
    "maximum_node_connections",
    "construction_beam_width",
    "search_beam_width",
    "quantization",
    "oversampling",
    "rescoring",
];

/// A statement that creates a vector index or drops an index.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum IndexDdl {
    /// `CREATE [CUSTOM] INDEX ... USING 'vector_index'`.
    Create {
        /// The keyspace, when the table name is qualified.
        keyspace: Option<String>,
        /// The table.
        table: String,
        /// The index name, given or Cassandra's (and Scylla's) default
        /// `<table>_<column>_idx`.
        index: String,
    },
    /// `DROP INDEX` (of any index: the front knows which are vector indexes).
    Drop {
        /// The keyspace, when the name is qualified.
        keyspace: Option<String>,
        /// The index name.
        index: String,
    },
}

impl IndexDdl {
    /// The statement with its keyspace filled in from `current` when unqualified.
    pub fn resolved(self, current: Option<String>) -> IndexDdl {
        match self {
            IndexDdl::Create { keyspace, table, index } => {
                IndexDdl::Create { keyspace: keyspace.or(current), table, index }
            }
            IndexDdl::Drop { keyspace, index } => IndexDdl::Drop { keyspace: keyspace.or(current), index },
        }
    }
}

/// A byte-range replacement of the statement text.
pub type Edit = (usize, usize, String);

/// `[ks.]name` at `toks[at]`: the parts and the index after it.
fn name_at(toks: &[Tok<'_>], at: usize) -> Option<(Option<String>, String, usize)> {
    let a = toks.get(at)?.ident()?;
    if toks.get(at + 1).is_some_and(|t| t.is_punct('.')) {
        Some((Some(a), toks.get(at + 2)?.ident()?, at + 3))
    } else {
        Some((None, a, at + 1))
    }
}

/// Recognises `CREATE INDEX ... USING 'vector_index'` (with the edits that
/// make it an SAI index) and `DROP INDEX`. `None` for any other statement;
/// an error (Scylla's text) for an option a vector index does not have.
pub fn scan(toks: &[Tok<'_>]) -> Option<Result<(IndexDdl, Vec<Edit>), String>> {
    let first = toks.first()?;
    if first.is_kw("DROP") {
        if !toks.get(1)?.is_kw("INDEX") {
            return None;
        }
        let at = if toks.get(2).is_some_and(|t| t.is_kw("IF")) { 4 } else { 2 };
        let (keyspace, index, _) = name_at(toks, at)?;
        return Some(Ok((IndexDdl::Drop { keyspace, index }, Vec::new())));
    }
    if !first.is_kw("CREATE") {
        return None;
    }
    let mut j = 1;
    if toks.get(j)?.is_kw("CUSTOM") {
        j += 1;
    }
    if !toks.get(j)?.is_kw("INDEX") {
        return None;
    }
    j += 1;
    if toks.get(j).is_some_and(|t| t.is_kw("IF")) {
        j += 3;
    }
    let mut name = None;
    if !toks.get(j)?.is_kw("ON") {
        name = toks.get(j)?.ident();
        j += 1;
    }
    if !toks.get(j)?.is_kw("ON") {
        return None;
    }
    let (keyspace, table, after) = name_at(toks, j + 1)?;
    if !toks.get(after)?.is_punct('(') {
        return None;
    }
    let column = toks.get(after + 1)?.ident()?;
    let mut k = after + 1;
    let mut depth = 1;
    while depth > 0 {
        let t = toks.get(k)?;
        if t.is_punct('(') {
            depth += 1;
        } else if t.is_punct(')') {
            depth -= 1;
        }
        k += 1;
    }
    if !toks.get(k)?.is_kw("USING") {
        return None;
    }
    let class = toks.get(k + 1)?;
    if class.kind != Kind::Str || !class.string_value()?.eq_ignore_ascii_case(CLASS) {
        return None;
    }
    let mut edits = vec![(class.start, class.end, "'sai'".to_string())];
    if toks.get(k + 2).is_some_and(|t| t.is_kw("WITH")) {
        match options(toks, k + 2) {
            Ok(Some(edit)) => edits.push(edit),
            Ok(None) => {}
            Err(message) => return Some(Err(message)),
        }
    }
    let index = name.unwrap_or_else(|| {
        format!("{table}_{column}_idx").chars().filter(|c| c.is_ascii_alphanumeric() || *c == '_').collect()
    });
    Some(Ok((IndexDdl::Create { keyspace, table, index }, edits)))
}

/// `WITH OPTIONS = {...}` at `toks[with]`: the edit that keeps only SAI's
/// options (removing the clause when none is left).
fn options(toks: &[Tok<'_>], with: usize) -> Result<Option<Edit>, String> {
    let shape = toks.get(with + 1).is_some_and(|t| t.is_kw("OPTIONS"))
        && toks.get(with + 2).is_some_and(|t| t.is_punct('='))
        && toks.get(with + 3).is_some_and(|t| t.is_punct('{'));
    if !shape {
        return Ok(None);
    }
    let mut kept = Vec::new();
    let mut j = with + 4;
    loop {
        let Some(t) = toks.get(j) else { return Ok(None) };
        if t.is_punct('}') {
            break;
        }
        if t.is_punct(',') {
            j += 1;
            continue;
        }
        let (Some(key), Some(value)) = (t.string_value(), toks.get(j + 2)) else { return Ok(None) };
        let lower = key.to_ascii_lowercase();
        if SAI_OPTIONS.contains(&lower.as_str()) {
            kept.push(format!("{}: {}", t.text, value.text));
        } else if !STORE_OPTIONS.contains(&lower.as_str()) {
            return Err(format!("Unsupported option {key} for vector index"));
        }
        j += 3;
    }
    let start = toks[with].start;
    let end = toks[j].end;
    let with = if kept.is_empty() { String::new() } else { format!("WITH OPTIONS = {{{}}}", kept.join(", ")) };
    Ok(Some((start, end, with)))
}

/// Scylla's refusal of a vector index on `keyspace.table`, given the CDC
/// options the front keeps (`None` when it accepts).
pub(crate) fn refusal(registry: &Registry, keyspace: &str, table: &str) -> Option<String> {
    let key = (keyspace.to_string(), table.to_string());
    let options = registry.options(keyspace, table)?;
    if !options.enabled {
        // Off because a dropped vector index turned it off is not the
        // user's choice; off by `WITH cdc` is.
        return (!registry.cdc_by_index.contains(&key)).then(|| {
            format!(
                "Cannot create the vector index when CDC is explicitly disabled.\nPlease enable CDC with the required \
                 parameters first.\nCDC's TTL must be at least {VS_TTL_SECONDS} seconds (24 hours), and the CDC's \
                 delta mode must be set to 'full' or postimage must be enabled to enable Vector Search.\nCheck \
                 documentation on how to setup CDC's parameters - \
                 https://docs.scylladb.com/manual/branch-2025.2/features/cdc/cdc-intro.html#cdc-parameters"
            )
        });
    }
    options_refusal(&options, registry.has_vector_index(keyspace, table))
}

/// Scylla's refusal of CDC options too weak for the vector store: worded
/// for a table that has a vector index (`indexed`, on `ALTER TABLE`) or is
/// getting one.
pub(crate) fn options_refusal(options: &CdcOptions, indexed: bool) -> Option<String> {
    let weak =
        (options.ttl != 0 && options.ttl < VS_TTL_SECONDS) || (options.delta != Delta::Full && !options.postimage);
    if !options.enabled || !weak {
        return None;
    }
    Some(if indexed {
        format!(
            "Vector Search is enabled on this table.\nThe CDC log must meet the minimal requirements of Vector \
             Search.\nThis means that the CDC's TTL must be at least {VS_TTL_SECONDS} seconds (24 hours), and the \
             CDC's delta mode must be set to 'full' or postimage must be enabled.\n"
        )
    } else {
        format!(
            "To enable Vector Search on this table, the CDC log must meet the minimal requirements of Vector \
             Search.\nCDC's TTL must be at least {VS_TTL_SECONDS} seconds (24 hours), and the CDC's delta mode must \
             be set to 'full' or postimage must be enabled to enable Vector Search.\nCheck documentation on how to \
             setup CDC's parameters - \
             https://docs.scylladb.com/manual/branch-2025.2/features/cdc/cdc-intro.html#cdc-parameters"
        )
    })
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::tokens::tokenize;

    fn apply(text: &str) -> (IndexDdl, String) {
        let toks = tokenize(text).unwrap();
        let (ddl, edits) = scan(&toks).unwrap().unwrap();
        let mut s = String::new();
        let mut at = 0;
        for (start, end, with) in edits {
            s.push_str(&text[at..start]);
            s.push_str(&with);
            at = end;
        }
        s.push_str(&text[at..]);
        (ddl, s)
    }

    #[test]
    fn vector_index_becomes_sai() {
        let (ddl, text) = apply("create index on ks.t (v) using 'vector_index'");
        assert_eq!(ddl, IndexDdl::Create { keyspace: Some("ks".into()), table: "t".into(), index: "t_v_idx".into() });
        assert_eq!(text, "create index on ks.t (v) using 'sai'");
        let (ddl, text) = apply(
            "CREATE CUSTOM INDEX IF NOT EXISTS vi ON t (v) USING 'vector_index' WITH OPTIONS = \
             {'similarity_function': 'COSINE', 'maximum_node_connections': '16'}",
        );
        assert_eq!(ddl, IndexDdl::Create { keyspace: None, table: "t".into(), index: "vi".into() });
        assert_eq!(text, "CREATE CUSTOM INDEX IF NOT EXISTS vi ON t (v) USING 'sai' WITH OPTIONS = {'similarity_function': 'COSINE'}");
        let (_, text) = apply("create index on t (v) using 'vector_index' with options = {'quantization': 'i8'}");
        assert_eq!(text, "create index on t (v) using 'sai' ");
    }

    #[test]
    fn other_indexes_and_unknown_options() {
        assert!(scan(&tokenize("create index on t (v) using 'sai'").unwrap()).is_none());
        assert!(scan(&tokenize("create index on t (v)").unwrap()).is_none());
        let err = scan(&tokenize("create index on t (v) using 'vector_index' with options = {'x': '1'}").unwrap());
        assert_eq!(err, Some(Err("Unsupported option x for vector index".into())));
        assert_eq!(
            scan(&tokenize("drop index if exists ks.t_v_idx").unwrap()).unwrap().unwrap().0,
            IndexDdl::Drop { keyspace: Some("ks".into()), index: "t_v_idx".into() }
        );
    }

    #[test]
    fn weak_cdc_options_are_refused() {
        let ok = CdcOptions { enabled: true, ..CdcOptions::default() };
        assert_eq!(options_refusal(&ok, false), None);
        assert_eq!(options_refusal(&CdcOptions { ttl: 0, ..ok }, false), None);
        assert!(options_refusal(&CdcOptions { ttl: 3600, ..ok }, false).is_some());
        assert!(options_refusal(&CdcOptions { delta: Delta::Keys, ..ok }, true).is_some());
        assert_eq!(options_refusal(&CdcOptions { delta: Delta::Keys, postimage: true, ..ok }, true), None);
    }
}
