//! `WITH cdc = {...}`: the options, and the log table Scylla would create.
//!
//! Cassandra rejects Scylla's `cdc` map (it has an unrelated boolean `cdc`
//! flag), so the front sends the base DDL with `cdc = false` and then creates
//! `<table>_scylla_cdc_log` itself, with the schema of `docs/cdc-log.md`
//! §1.2–§1.5, computed from the base table's columns as Cassandra reports
//! them in `system_schema.columns`:
//!
//! - metadata columns `"cdc$stream_id" blob` (partition key), `"cdc$time"
//!   timeuuid`, `"cdc$batch_seq_no" int` (clustering, ascending),
//!   `"cdc$operation" tinyint`, `"cdc$ttl" bigint`, `"cdc$end_of_batch"
//!   boolean`;
//! - base key columns as regular columns of the same type;
//! - every static/regular column `X` as `X` plus `"cdc$deleted_X" boolean`,
//!   non-frozen collections and UDTs frozen (a list as
//!   `frozen<map<timeuuid, V>>`) with `"cdc$deleted_elements_X"`;
//! - table properties: comment `CDC log for <ks>.<table>`,
//!   TimeWindowCompactionStrategy with the window derived from the CDC TTL,
//!   `gc_grace_seconds = 0` (TTL > 0), caching off.
//!
//! What Cassandra cannot express: the log's partitioner. Cassandra places log
//! partitions by Murmur3 of the 16-byte stream id; the CDC partitioner is
//! what the front *reports* (in `system_schema.scylla_tables`) and what it
//! uses for shard accounting. Readers do not depend on co-location.
//!
//! Options are validated as Scylla does (unknown key, negative TTL) and kept
//! by the front ([`CdcTable`]) for the log-synthesis work.

use std::collections::{HashMap, HashSet};

/// Suffix of a CDC log table's name.
pub const LOG_SUFFIX: &str = "_scylla_cdc_log";

/// `preimage` option.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum PreImage {
    /// No pre-image.
    #[default]
    Off,
    /// Pre-image of the changed columns (`true`).
    On,
    /// Pre-image of the whole row (`'full'`).
    Full,
}

/// `delta` option.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Delta {
    /// All written columns (`'full'`, the default).
    #[default]
    Full,
    /// Only the key columns (`'keys'`).
    Keys,
}

/// The options of `WITH cdc = {...}` (`docs/cdc-log.md` §6).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CdcOptions {
    /// `enabled`.
    pub enabled: bool,
    /// `preimage`.
    pub preimage: PreImage,
    /// `postimage`.
    pub postimage: bool,
    /// `delta`.
    pub delta: Delta,
    /// `ttl` in seconds; 0 means log rows do not expire.
    pub ttl: u64,
}

impl Default for CdcOptions {
    fn default() -> Self {
        CdcOptions { enabled: false, preimage: PreImage::Off, postimage: false, delta: Delta::Full, ttl: 86400 }
    }
}

fn parse_bool(key: &str, value: &str) -> Result<bool, String> {
    match value.to_ascii_lowercase().as_str() {
        "true" | "1" => Ok(true),
        "false" | "0" => Ok(false),
        _ => Err(format!("Invalid value for CDC option \"{key}\": {value}")),
    }
}

impl CdcOptions {
    /// Parses the map's entries (keys and values as written, strings
    /// unquoted). Errors carry Scylla's message texts.
    pub fn parse<K: AsRef<str>, V: AsRef<str>>(entries: &[(K, V)]) -> Result<CdcOptions, String> {
        let mut o = CdcOptions::default();
        for (key, value) in entries {
            let (key, value) = (key.as_ref(), value.as_ref());
            match key.to_ascii_lowercase().as_str() {
                "enabled" => o.enabled = parse_bool(key, value)?,
                "postimage" => o.postimage = parse_bool(key, value)?,
                "preimage" => {
                    o.preimage = if value.eq_ignore_ascii_case("full") {
                        PreImage::Full
                    } else if parse_bool(key, value)? {
                        PreImage::On
                    } else {
                        PreImage::Off
                    }
                }
                "delta" => {
                    o.delta = match value.to_ascii_lowercase().as_str() {
                        "full" => Delta::Full,
                        "keys" => Delta::Keys,
                        _ => return Err(format!("Invalid value for CDC option \"delta\": {value}")),
                    }
                }
                "ttl" => {
                    let ttl: i64 =
                        value.parse().map_err(|_| format!("Invalid value for CDC option \"ttl\": {value}"))?;
                    if ttl < 0 {
                        return Err("Invalid CDC option: ttl must be >= 0".into());
                    }
                    o.ttl = ttl as u64;
                }
                _ => return Err(format!("Invalid CDC option: {key}")),
            }
        }
        Ok(o)
    }

    /// The options as Scylla serializes them (keys `delta`, `enabled`,
    /// `postimage`, `preimage`, `ttl`).
    pub fn to_map(&self) -> Vec<(&'static str, String)> {
        vec![
            (
                "delta",
                match self.delta {
                    Delta::Full => "full",
                    Delta::Keys => "keys",
                }
                .into(),
            ),
            ("enabled", self.enabled.to_string()),
            ("postimage", self.postimage.to_string()),
            (
                "preimage",
                match self.preimage {
                    PreImage::Off => "false",
                    PreImage::On => "true",
                    PreImage::Full => "full",
                }
                .into(),
            ),
            ("ttl", self.ttl.to_string()),
        ]
    }
}

/// A base table with CDC options, as the front remembers it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CdcTable {
    /// Keyspace of the base (and log) table.
    pub keyspace: String,
    /// The base table.
    pub table: String,
    /// The options last set (CDC may have been disabled again: the log is
    /// then kept, detached, as Scylla does).
    pub options: CdcOptions,
}

impl CdcTable {
    /// The log table's name.
    pub fn log_table(&self) -> String {
        log_table_name(&self.table)
    }
}

/// `<table>_scylla_cdc_log`.
pub fn log_table_name(base: &str) -> String {
    format!("{base}{LOG_SUFFIX}")
}

/// The kind of a column in `system_schema.columns`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum ColumnKind {
    /// `partition_key`
    PartitionKey,
    /// `clustering`
    Clustering,
    /// `static`
    Static,
    /// `regular`
    Regular,
}

impl ColumnKind {
    /// From the `kind` text.
    pub fn parse(kind: &str) -> Option<ColumnKind> {
        match kind {
            "partition_key" => Some(ColumnKind::PartitionKey),
            "clustering" => Some(ColumnKind::Clustering),
            "static" => Some(ColumnKind::Static),
            "regular" => Some(ColumnKind::Regular),
            _ => None,
        }
    }
}

/// A base column from `system_schema.columns`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BaseColumn {
    /// The column name, exactly (case kept).
    pub name: String,
    /// Its kind.
    pub kind: ColumnKind,
    /// Its position among the key columns (−1 for others).
    pub position: i32,
    /// The CQL type text, as Cassandra prints it.
    pub typ: String,
}

/// Quotes a column name for CQL: `"name"` with `"` doubled.
pub fn quote(name: &str) -> String {
    format!("\"{}\"", name.replace('"', "\"\""))
}

const NATIVE: &[&str] = &[
    "ascii",
    "bigint",
    "blob",
    "boolean",
    "counter",
    "date",
    "decimal",
    "double",
    "duration",
    "float",
    "inet",
    "int",
    "smallint",
    "text",
    "time",
    "timestamp",
    "timeuuid",
    "tinyint",
    "uuid",
    "varchar",
    "varint",
];

/// Splits `name<args>` into the name and its top-level arguments.
fn split_type(typ: &str) -> (String, Vec<String>) {
    let typ = typ.trim();
    let Some(open) = typ.find('<') else {
        return (typ.to_string(), Vec::new());
    };
    let name = typ[..open].trim().to_ascii_lowercase();
    let inner = typ[open + 1..].trim_end().strip_suffix('>').unwrap_or(&typ[open + 1..]);
    let mut args = Vec::new();
    let (mut depth, mut start, mut quoted) = (0i32, 0usize, false);
    for (i, c) in inner.char_indices() {
        match c {
            '"' => quoted = !quoted,
            '<' if !quoted => depth += 1,
            '>' if !quoted => depth -= 1,
            ',' if !quoted && depth == 0 => {
                args.push(inner[start..i].trim().to_string());
                start = i + 1;
            }
            _ => {}
        }
    }
    args.push(inner[start..].trim().to_string());
    (name, args)
}

/// How a base column's type appears in the log: `(value type, deleted-elements
/// type if the column is a non-frozen collection or UDT)`.
///
/// # Errors
///
/// Counter columns: Scylla refuses CDC on counter tables.
pub fn log_types(typ: &str) -> Result<(String, Option<String>), String> {
    let (name, args) = split_type(typ);
    let frozen = |t: &str| format!("frozen<{t}>");
    match (name.as_str(), args.as_slice()) {
        ("counter", _) => Err("Counter support not implemented".into()),
        ("map", [k, _]) => Ok((frozen(typ.trim()), Some(frozen(&format!("set<{k}>"))))),
        ("set", [k]) => Ok((frozen(typ.trim()), Some(frozen(&format!("set<{k}>"))))),
        ("list", [v]) => Ok((frozen(&format!("map<timeuuid, {v}>")), Some("frozen<set<timeuuid>>".into()))),
        ("frozen" | "tuple" | "vector", _) => Ok((typ.trim().to_string(), None)),
        (n, []) if NATIVE.contains(&n.to_ascii_lowercase().as_str()) => Ok((typ.trim().to_string(), None)),
        // Anything else is a user-defined type, multi-cell unless frozen.
        (_, []) => Ok((frozen(typ.trim()), Some("frozen<set<smallint>>".into()))),
        _ => Ok((typ.trim().to_string(), None)),
    }
}

/// The metadata columns of every log table, in declaration order.
pub const META_COLUMNS: &[(&str, &str)] = &[
    ("cdc$stream_id", "blob"),
    ("cdc$time", "timeuuid"),
    ("cdc$batch_seq_no", "int"),
    ("cdc$operation", "tinyint"),
    ("cdc$ttl", "bigint"),
    ("cdc$end_of_batch", "boolean"),
];

/// The non-metadata columns of the log of a table with `columns`: key
/// columns first (partition key, then clustering, by position), then the
/// others by name, each followed by its `cdc$deleted_` companions.
pub fn log_columns(columns: &[BaseColumn]) -> Result<Vec<(String, String)>, String> {
    let mut sorted: Vec<&BaseColumn> = columns.iter().collect();
    sorted.sort_by(|a, b| {
        let key = |c: &BaseColumn| match c.kind {
            ColumnKind::PartitionKey | ColumnKind::Clustering => (c.kind, c.position, String::new()),
            _ => (ColumnKind::Static, 0, c.name.clone()),
        };
        key(a).cmp(&key(b))
    });
    let mut out = Vec::new();
    for c in sorted {
        match c.kind {
            ColumnKind::PartitionKey | ColumnKind::Clustering => {
                if c.typ.trim().eq_ignore_ascii_case("counter") {
                    return Err("Counter support not implemented".into());
                }
                out.push((c.name.clone(), c.typ.trim().to_string()));
            }
            ColumnKind::Static | ColumnKind::Regular => {
                let (value, elements) = log_types(&c.typ)?;
                out.push((c.name.clone(), value));
                out.push((format!("cdc$deleted_{}", c.name), "boolean".into()));
                if let Some(e) = elements {
                    out.push((format!("cdc$deleted_elements_{}", c.name), e));
                }
            }
        }
    }
    Ok(out)
}

/// The `WITH` clause of a new log table (`docs/cdc-log.md` §1.5).
pub fn log_table_properties(keyspace: &str, table: &str, options: &CdcOptions) -> String {
    let comment = format!("CDC log for {keyspace}.{table}").replace('\'', "''");
    let caching = "caching = {'keys': 'NONE', 'rows_per_partition': 'NONE'}";
    if options.ttl > 0 {
        let window_seconds = options.ttl.div_ceil(24);
        let minutes = window_seconds.div_ceil(60).max(1);
        let check = (minutes * 60 / 2).max(1);
        format!(
            "comment = '{comment}' AND compaction = {{'class': 'TimeWindowCompactionStrategy', \
             'compaction_window_unit': 'MINUTES', 'compaction_window_size': '{minutes}', \
             'expired_sstable_check_frequency_seconds': '{check}'}} AND gc_grace_seconds = 0 AND {caching}"
        )
    } else {
        format!("comment = '{comment}' AND compaction = {{'class': 'TimeWindowCompactionStrategy'}} AND {caching}")
    }
}

/// `CREATE TABLE` for the log of `keyspace.table`.
pub fn log_table_ddl(
    keyspace: &str,
    table: &str,
    columns: &[BaseColumn],
    options: &CdcOptions,
) -> Result<String, String> {
    let mut defs: Vec<String> = META_COLUMNS.iter().map(|(n, t)| format!("{} {t}", quote(n))).collect();
    for (n, t) in log_columns(columns)? {
        defs.push(format!("{} {t}", quote(&n)));
    }
    defs.push("PRIMARY KEY (\"cdc$stream_id\", \"cdc$time\", \"cdc$batch_seq_no\")".into());
    Ok(format!(
        "CREATE TABLE {}.{} ({}) WITH {}",
        quote(keyspace),
        quote(&log_table_name(table)),
        defs.join(", "),
        log_table_properties(keyspace, table, options)
    ))
}

/// The base tables with CDC options and the log tables the front knows.
#[derive(Debug, Default)]
pub(crate) struct Registry {
    pub(crate) tables: HashMap<(String, String), CdcOptions>,
    pub(crate) logs: HashSet<(String, String)>,
    /// Vector indexes, `(keyspace, index)` → table (`crate::vector_index`).
    pub(crate) vector_indexes: HashMap<(String, String), String>,
    /// Tables whose CDC a vector index turned on, not the user's `WITH cdc`.
    pub(crate) cdc_by_index: HashSet<(String, String)>,
}

impl Registry {
    pub(crate) fn is_log(&self, keyspace: &str, table: &str) -> bool {
        self.logs.contains(&(keyspace.to_string(), table.to_string()))
    }
    pub(crate) fn options(&self, keyspace: &str, table: &str) -> Option<CdcOptions> {
        self.tables.get(&(keyspace.to_string(), table.to_string())).copied()
    }
    /// Whether `keyspace.table` has a vector index.
    pub(crate) fn has_vector_index(&self, keyspace: &str, table: &str) -> bool {
        self.vector_indexes.iter().any(|((k, _), t)| k == keyspace && t == table)
    }
    /// Whether a table of this name has CDC enabled in some keyspace.
    pub(crate) fn enabled_anywhere(&self, table: &str) -> bool {
        self.tables.iter().any(|((_, t), o)| t == table && o.enabled)
    }
    /// The names of the tables with CDC enabled.
    pub(crate) fn enabled_names(&self) -> Vec<String> {
        self.tables.iter().filter(|(_, o)| o.enabled).map(|((_, t), _)| t.clone()).collect()
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn col(name: &str, kind: ColumnKind, position: i32, typ: &str) -> BaseColumn {
        BaseColumn { name: name.into(), kind, position, typ: typ.into() }
    }

    #[test]
    fn options_parse_like_scylla() {
        let o = CdcOptions::parse(&[("enabled", "true"), ("preimage", "full"), ("ttl", "3600")]).unwrap();
        assert!(o.enabled);
        assert_eq!((o.preimage, o.ttl, o.delta), (PreImage::Full, 3600, Delta::Full));
        assert_eq!(CdcOptions::parse(&[("bogus", "1")]).unwrap_err(), "Invalid CDC option: bogus");
        assert_eq!(CdcOptions::parse(&[("ttl", "-1")]).unwrap_err(), "Invalid CDC option: ttl must be >= 0");
        assert_eq!(CdcOptions::parse::<&str, &str>(&[]).unwrap(), CdcOptions::default());
    }

    #[test]
    fn log_schema_of_the_spec_example() {
        // docs/cdc-log.md §1.4.
        let cols = [
            col("pk", ColumnKind::PartitionKey, 0, "int"),
            col("ck", ColumnKind::Clustering, 0, "int"),
            col("s", ColumnKind::Static, -1, "int"),
            col("v1", ColumnKind::Regular, -1, "int"),
            col("v2", ColumnKind::Regular, -1, "int"),
            col("m", ColumnKind::Regular, -1, "map<int, text>"),
            col("l", ColumnKind::Regular, -1, "list<text>"),
            col("u", ColumnKind::Regular, -1, "ut"),
            col("f", ColumnKind::Regular, -1, "frozen<list<int>>"),
        ];
        let got = log_columns(&cols).unwrap();
        let want: Vec<(String, String)> = [
            ("pk", "int"),
            ("ck", "int"),
            ("f", "frozen<list<int>>"),
            ("cdc$deleted_f", "boolean"),
            ("l", "frozen<map<timeuuid, text>>"),
            ("cdc$deleted_l", "boolean"),
            ("cdc$deleted_elements_l", "frozen<set<timeuuid>>"),
            ("m", "frozen<map<int, text>>"),
            ("cdc$deleted_m", "boolean"),
            ("cdc$deleted_elements_m", "frozen<set<int>>"),
            ("s", "int"),
            ("cdc$deleted_s", "boolean"),
            ("u", "frozen<ut>"),
            ("cdc$deleted_u", "boolean"),
            ("cdc$deleted_elements_u", "frozen<set<smallint>>"),
            ("v1", "int"),
            ("cdc$deleted_v1", "boolean"),
            ("v2", "int"),
            ("cdc$deleted_v2", "boolean"),
        ]
        .iter()
        .map(|(a, b)| (a.to_string(), b.to_string()))
        .collect();
        assert_eq!(got, want);
        assert!(log_columns(&[col("c", ColumnKind::Regular, -1, "counter")]).is_err());
        let props = log_table_properties("ks", "t", &CdcOptions::default());
        assert!(props.contains("'compaction_window_size': '60'"), "{props}");
        assert!(props.contains("'expired_sstable_check_frequency_seconds': '1800'"), "{props}");
    }
}
