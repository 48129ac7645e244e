//! ScyllaDB's `DESCRIBE`, answered by the front.
//!
//! Cassandra 5.0 describes its own schema: a CDC log is a plain table there,
//! tablets do not exist and the statements are worded the Cassandra way. So
//! the front answers the DESCRIBE forms whose answer ScyllaDB shapes
//! differently itself (`DESC SCHEMA`, `KEYSPACES`, `[ONLY] KEYSPACE`,
//! `TABLES`, `TABLE`, and a bare name), following
//! [cql3/statements/describe_statement.cc](https://github.com/scylladb/scylladb/blob/master/cql3/statements/describe_statement.cc):
//!
//! - four text columns `keyspace_name`, `type`, `name`, `create_statement`
//!   of table `system.describe`; three for listings;
//! - a keyspace: its row, then types, functions and aggregates, then its
//!   tables by name, each followed by its indexes and views and, when CDC is
//!   on, by `ALTER TABLE <ks>.<log> WITH <properties>;\n`;
//! - CDC logs hidden from every listing and keyspace description; a log
//!   asked for by name is its `CREATE TABLE` inside a do-not-execute block
//!   comment;
//! - `AND tablets = {...}` on every keyspace, and per-table tablet options.
//!
//! Statements are printed from `system_schema` ([`print`]); types,
//! functions, aggregates, indexes and views keep Cassandra's texts (taken
//! from its own DESCRIBE of the keyspace). Other forms (`CLUSTER`, `TYPE`,
//! `FUNCTION`, `INDEX`, ...) go to Cassandra unchanged.
//!
//! Deviations, all because Cassandra keeps no record of them: a property
//! left at Cassandra's default prints Cassandra's value (caching `keys ALL,
//! rows_per_partition NONE` where ScyllaDB's default is `ALL`/`ALL`); a log
//! whose caching is keys and rows `NONE` shows `'enabled': 'false'` unless
//! a caching without it was given through this front (which keeps that in
//! memory only); compaction options equal to
//! Cassandra's own additions (`max_threshold` 32, `min_threshold` 4) and
//! `chunk_length_in_kb` 16 are left out even when given; `tombstone_gc`
//! prints what the front was given, else ScyllaDB's default (repair for a
//! base table, timeout for a log: `tombstone_gc.rs`); dropped columns (`WITH
//! INTERNALS`) are listed by name, last first (ScyllaDB iterates an
//! unordered map: that is its order for a few columns, and the order
//! test_cdc.py pins; see `print`); listings show Cassandra's system keyspaces
//! and tables, not ScyllaDB's.

pub(crate) mod print;
mod replay;

pub use replay::cassandra_properties;

use std::collections::BTreeMap;

use bytes::Bytes;
use shardwise_protocol::response::ResultMessage;
use shardwise_protocol::rows::{ResultMetadata, Rows};
use shardwise_protocol::types::{ColumnSpec, ColumnType, CqlValue};

use crate::admin::{lit, Admin};
use crate::cdc::LOG_SUFFIX;
use crate::shared::Shared;
use crate::EmuError;
use print::{maybe_quote, Column, Dropped, KeyspaceRow, Properties, ScyllaExtras, Table};

/// The prefix ScyllaDB puts before the CREATE statement of a CDC log
/// (`table()` in describe_statement.cc; `CDC_LOG_TABLE_DESC_PREFIX` in
/// test/cqlpy/test_describe.py).
pub const CDC_LOG_DESC_PREFIX: &str = "/* Do NOT execute this statement! It's only for informational purposes.\n   A CDC log table is created automatically when creating the base with CDC\n   enabled option or creating the vector index on the base table's vector column.\n\n";
/// What follows the log's CREATE statement (which ends with `;\n`).
pub const CDC_LOG_DESC_SUFFIX: &str = "\n*/";

/// A DESCRIBE the front answers itself.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Describe {
    /// `DESC [FULL] SCHEMA [WITH INTERNALS [AND PASSWORDS]]`.
    Schema {
        /// `WITH INTERNALS`.
        internals: bool,
    },
    /// `DESC KEYSPACES`.
    Keyspaces,
    /// `DESC [ONLY] KEYSPACE [ks] [WITH INTERNALS]`.
    Keyspace {
        /// The keyspace (else the current one).
        name: Option<String>,
        /// `ONLY`.
        only: bool,
        /// `WITH INTERNALS`.
        internals: bool,
    },
    /// `DESC TABLES`.
    Tables,
    /// `DESC TABLE [ks.]t [WITH INTERNALS]`.
    Table {
        /// The keyspace given.
        keyspace: Option<String>,
        /// The table.
        name: String,
        /// `WITH INTERNALS`.
        internals: bool,
    },
    /// `DESC [ks.]name [WITH INTERNALS]`.
    Generic {
        /// The keyspace given.
        keyspace: Option<String>,
        /// The name.
        name: String,
        /// `WITH INTERNALS`.
        internals: bool,
    },
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Tok {
    /// An unquoted word, lower-cased.
    Word(String),
    /// A double-quoted identifier, case kept.
    Quoted(String),
    Dot,
}

fn tokens(text: &str) -> Option<Vec<Tok>> {
    let mut out = Vec::new();
    let mut chars = text.trim().trim_end_matches(';').trim_end().chars().peekable();
    while let Some(&c) = chars.peek() {
        if c.is_whitespace() {
            chars.next();
        } else if c == '.' {
            chars.next();
            out.push(Tok::Dot);
        } else if c == '"' {
            chars.next();
            let mut s = String::new();
            loop {
                match chars.next() {
                    Some('"') if chars.peek() == Some(&'"') => {
                        chars.next();
                        s.push('"');
                    }
                    Some('"') => break,
                    Some(x) => s.push(x),
                    None => return None,
                }
            }
            out.push(Tok::Quoted(s));
        } else if c.is_alphanumeric() || c == '_' {
            let mut s = String::new();
            while let Some(&x) = chars.peek() {
                if x.is_alphanumeric() || x == '_' {
                    s.push(x.to_ascii_lowercase());
                    chars.next();
                } else {
                    break;
                }
            }
            out.push(Tok::Word(s));
        } else {
            return None;
        }
    }
    Some(out)
}

fn is_word(t: Option<&Tok>, w: &str) -> bool {
    matches!(t, Some(Tok::Word(x)) if x == w)
}

fn name_of(t: &Tok) -> Option<String> {
    match t {
        Tok::Word(w) => Some(w.clone()),
        Tok::Quoted(q) => Some(q.clone()),
        Tok::Dot => None,
    }
}

/// `[ks.]name`, then the rest.
fn qualified(toks: &[Tok]) -> Option<(Option<String>, String, &[Tok])> {
    let first = name_of(toks.first()?)?;
    if toks.get(1) == Some(&Tok::Dot) {
        let second = name_of(toks.get(2)?)?;
        Some((Some(first), second, &toks[3..]))
    } else {
        Some((None, first, &toks[1..]))
    }
}

/// `WITH INTERNALS [AND PASSWORDS]` or nothing; `None` on anything else.
fn internals(rest: &[Tok], passwords_allowed: bool) -> Option<bool> {
    match rest {
        [] => Some(false),
        [Tok::Word(w), Tok::Word(i)] if w == "with" && i == "internals" => Some(true),
        [Tok::Word(w), Tok::Word(i), Tok::Word(a), Tok::Word(p)]
            if passwords_allowed && w == "with" && i == "internals" && a == "and" && p == "passwords" =>
        {
            Some(true)
        }
        _ => None,
    }
}

/// The DESCRIBE forms the front answers; `None` for every other statement
/// (including the DESCRIBE forms Cassandra answers).
pub fn parse(text: &str) -> Option<Describe> {
    let toks = tokens(text)?;
    if !(is_word(toks.first(), "desc") || is_word(toks.first(), "describe")) {
        return None;
    }
    let rest = &toks[1..];
    let word = match rest.first() {
        Some(Tok::Word(w)) => w.as_str(),
        Some(Tok::Quoted(_)) => "",
        _ => return None,
    };
    match word {
        "full" if is_word(rest.get(1), "schema") => Some(Describe::Schema { internals: internals(&rest[2..], true)? }),
        "schema" => Some(Describe::Schema { internals: internals(&rest[1..], true)? }),
        "keyspaces" if rest.len() == 1 => Some(Describe::Keyspaces),
        "tables" | "columnfamilies" if rest.len() == 1 => Some(Describe::Tables),
        "only" if is_word(rest.get(1), "keyspace") => keyspace(&rest[2..], true),
        "keyspace" => keyspace(&rest[1..], false),
        "table" | "columnfamily" => {
            let (keyspace, name, after) = qualified(&rest[1..])?;
            Some(Describe::Table { keyspace, name, internals: internals(after, false)? })
        }
        "cluster" | "type" | "types" | "function" | "functions" | "aggregate" | "aggregates" | "materialized"
        | "index" | "keyspaces" | "tables" | "columnfamilies" | "full" | "only" => None,
        _ => {
            let (keyspace, name, after) = qualified(rest)?;
            Some(Describe::Generic { keyspace, name, internals: internals(after, false)? })
        }
    }
}

fn keyspace(rest: &[Tok], only: bool) -> Option<Describe> {
    match rest.first() {
        None => Some(Describe::Keyspace { name: None, only, internals: false }),
        Some(Tok::Word(w)) if w == "with" => {
            Some(Describe::Keyspace { name: None, only, internals: internals(rest, false)? })
        }
        Some(t) => Some(Describe::Keyspace { name: Some(name_of(t)?), only, internals: internals(&rest[1..], false)? }),
    }
}

/// One row of the answer.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Row {
    keyspace: String,
    kind: String,
    name: String,
    statement: Option<String>,
}

const INVALID: i32 = 0x2200;

fn invalid(message: String) -> (i32, String) {
    (INVALID, message)
}

fn server(e: EmuError) -> (i32, String) {
    match e {
        EmuError::Server { code, message } => (code, message),
        other => (0, other.to_string()),
    }
}

/// Keyspaces that ScyllaDB's `get_user_keyspaces` leaves out (and the
/// front's own).
fn is_system_keyspace(name: &str, emu: &str) -> bool {
    name == emu
        || matches!(
            name,
            "system"
                | "system_schema"
                | "system_auth"
                | "system_distributed"
                | "system_traces"
                | "system_views"
                | "system_virtual_schema"
                | "system_cluster_metadata"
        )
}

/// The front's answer to `d`, or an error in ScyllaDB's words.
pub(crate) async fn answer(
    shared: &Shared,
    d: Describe,
    current: Option<String>,
) -> Result<ResultMessage, (i32, String)> {
    let ctx = Ctx { shared, admin: &shared.admin, emu: shared.config.emu_keyspace.as_str() };
    let (rows, listing) = match d {
        Describe::Keyspaces => {
            let rows = ctx
                .keyspace_names()
                .await?
                .into_iter()
                .map(|k| Row {
                    keyspace: maybe_quote(&k),
                    kind: "keyspace".into(),
                    name: maybe_quote(&k),
                    statement: None,
                })
                .collect();
            (rows, true)
        }
        Describe::Tables => {
            let keyspaces = match current {
                Some(k) => vec![k],
                None => ctx.keyspace_names().await?,
            };
            let mut rows = Vec::new();
            for ks in keyspaces {
                for t in ctx.visible_tables(&ks).await? {
                    rows.push(Row {
                        keyspace: maybe_quote(&ks),
                        kind: "table".into(),
                        name: maybe_quote(&t),
                        statement: None,
                    });
                }
            }
            (rows, true)
        }
        Describe::Schema { internals } => {
            let mut rows = Vec::new();
            for ks in ctx.keyspace_names().await? {
                if is_system_keyspace(&ks, ctx.emu) {
                    continue;
                }
                rows.extend(ctx.keyspace_elements(&ks, internals).await?);
            }
            (rows, false)
        }
        Describe::Keyspace { name, only, internals } => {
            let ks = name.or(current).ok_or_else(|| invalid("'' not found in keyspaces".into()))?;
            if only {
                (vec![ctx.keyspace_row(&ks).await?], false)
            } else {
                (ctx.keyspace_elements(&ks, internals).await?, false)
            }
        }
        Describe::Table { keyspace, name, internals } => {
            let ks =
                keyspace.or(current).ok_or_else(|| invalid("No keyspace specified and no current keyspace".into()))?;
            ctx.keyspace(&ks).await?;
            (ctx.table_group(&ks, &name, internals, None).await?, false)
        }
        Describe::Generic { keyspace, name, internals } => {
            if keyspace.is_none() && ctx.keyspace_names().await?.contains(&name) {
                (ctx.keyspace_elements(&name, internals).await?, false)
            } else {
                let ks = keyspace.or(current).ok_or_else(|| invalid(format!("'{name}' not found in keyspaces")))?;
                if ctx.keyspace(&ks).await.is_err() {
                    return Err(invalid(format!("'{name}' not found in keyspaces")));
                }
                if ctx.table_names(&ks).await?.contains(&name) {
                    (ctx.table_group(&ks, &name, internals, None).await?, false)
                } else {
                    // Views, indexes, types, functions: Cassandra's answer.
                    let cql = format!("DESCRIBE {}.{}", maybe_quote(&ks), maybe_quote(&name));
                    return ctx.admin.query(&cql).await.map_err(server);
                }
            }
        }
    };
    result(rows, listing)
}

fn result(rows: Vec<Row>, listing: bool) -> Result<ResultMessage, (i32, String)> {
    let spec = |name: &str| ColumnSpec {
        keyspace: "system".into(),
        table: "describe".into(),
        name: name.into(),
        typ: ColumnType::Text,
    };
    let mut specs = vec![spec("keyspace_name"), spec("type"), spec("name")];
    if !listing {
        specs.push(spec("create_statement"));
    }
    let owned: Vec<Vec<Option<Bytes>>> = rows
        .into_iter()
        .map(|r| {
            let mut v = vec![Some(Bytes::from(r.keyspace)), Some(Bytes::from(r.kind)), Some(Bytes::from(r.name))];
            if !listing {
                v.push(r.statement.map(Bytes::from));
            }
            v
        })
        .collect();
    let raw: Vec<Vec<Option<&[u8]>>> =
        owned.iter().map(|r| r.iter().map(|b| b.as_ref().map(|b| &b[..])).collect()).collect();
    let metadata = ResultMetadata { columns_count: specs.len(), specs: Some(specs), ..Default::default() };
    Rows::from_raw(metadata, &raw).map(ResultMessage::Rows).map_err(|e| (0, format!("building DESCRIBE rows: {e}")))
}

struct Ctx<'a> {
    shared: &'a Shared,
    admin: &'a Admin,
    emu: &'a str,
}

fn text(v: Option<&Option<CqlValue>>) -> String {
    v.and_then(|v| v.as_ref()).and_then(|v| v.as_str()).unwrap_or_default().to_string()
}

fn int(v: Option<&Option<CqlValue>>) -> i32 {
    match v.and_then(|v| v.as_ref()) {
        Some(CqlValue::Int(x)) => *x,
        _ => 0,
    }
}

fn double(v: Option<&Option<CqlValue>>) -> f64 {
    match v.and_then(|v| v.as_ref()) {
        Some(CqlValue::Double(x)) => *x,
        Some(CqlValue::Float(x)) => f64::from(*x),
        _ => 0.0,
    }
}

fn string_map(v: Option<&Option<CqlValue>>) -> BTreeMap<String, String> {
    v.and_then(|v| v.as_ref())
        .and_then(|v| v.as_map())
        .unwrap_or_default()
        .iter()
        .filter_map(|(k, v)| Some((k.as_str()?.to_string(), v.as_str()?.to_string())))
        .collect()
}

impl Ctx<'_> {
    async fn keyspace_names(&self) -> Result<Vec<String>, (i32, String)> {
        let rows = self.admin.rows("SELECT keyspace_name FROM system_schema.keyspaces").await.map_err(server)?;
        let mut names: Vec<String> =
            rows.iter().map(|r| text(r.first())).filter(|k| !k.is_empty() && k != self.emu).collect();
        names.sort();
        Ok(names)
    }

    async fn keyspace(&self, ks: &str) -> Result<KeyspaceRow, (i32, String)> {
        let rows = self
            .admin
            .rows(&format!(
                "SELECT keyspace_name, durable_writes, replication FROM system_schema.keyspaces WHERE keyspace_name = {}",
                lit(ks)
            ))
            .await
            .map_err(server)?;
        let Some(row) = rows.first().filter(|_| ks != self.emu) else {
            return Err(invalid(format!("'{ks}' not found in keyspaces")));
        };
        let durable_writes = row.get(1).and_then(|v| v.as_ref()).and_then(|v| v.as_bool()).unwrap_or(true);
        let tablets = self
            .admin
            .rows(&format!(
                "SELECT initial_tablets FROM {}.scylla_keyspaces WHERE keyspace_name = {}",
                maybe_quote(self.emu),
                lit(ks)
            ))
            .await
            .ok()
            .and_then(|r| r.first().map(|r| int(r.first())));
        Ok(KeyspaceRow { name: ks.to_string(), durable_writes, replication: string_map(row.get(2)), tablets })
    }

    async fn keyspace_row(&self, ks: &str) -> Result<Row, (i32, String)> {
        let k = self.keyspace(ks).await?;
        Ok(Row {
            keyspace: maybe_quote(ks),
            kind: "keyspace".into(),
            name: maybe_quote(ks),
            statement: Some(k.create_statement()),
        })
    }

    async fn table_names(&self, ks: &str) -> Result<Vec<String>, (i32, String)> {
        let rows = self
            .admin
            .rows(&format!("SELECT table_name FROM system_schema.tables WHERE keyspace_name = {}", lit(ks)))
            .await
            .map_err(server)?;
        let mut names: Vec<String> = rows.iter().map(|r| text(r.first())).collect();
        names.sort_by(|a, b| a.as_bytes().cmp(b.as_bytes()));
        Ok(names)
    }

    /// The base of `ks.table` when `table` is the log of a table with CDC
    /// on (`cdc::is_log_for_some_table`).
    fn log_base(&self, ks: &str, table: &str) -> Option<String> {
        let base = table.strip_suffix(LOG_SUFFIX)?;
        let registry = self.shared.registry.lock().ok()?;
        let on = registry.options(ks, base).is_some_and(|o| o.enabled);
        on.then(|| base.to_string())
    }

    fn cdc_on(&self, ks: &str, table: &str) -> bool {
        self.shared.registry.lock().ok().and_then(|r| r.options(ks, table)).is_some_and(|o| o.enabled)
    }

    /// Tables of `ks` without the CDC logs, by name.
    async fn visible_tables(&self, ks: &str) -> Result<Vec<String>, (i32, String)> {
        Ok(self.table_names(ks).await?.into_iter().filter(|t| self.log_base(ks, t).is_none()).collect())
    }

    async fn table(&self, ks: &str, name: &str) -> Result<Option<Table>, (i32, String)> {
        let rows = self
            .admin
            .rows(&format!(
                "SELECT id, bloom_filter_fp_chance, caching, comment, compaction, compression, crc_check_chance, \
                 default_time_to_live, gc_grace_seconds, max_index_interval, memtable_flush_period_in_ms, \
                 min_index_interval, speculative_retry FROM system_schema.tables \
                 WHERE keyspace_name = {} AND table_name = {}",
                lit(ks),
                lit(name)
            ))
            .await
            .map_err(server)?;
        let Some(r) = rows.first() else { return Ok(None) };
        let properties = Properties {
            bloom_filter_fp_chance: double(r.get(1)),
            caching: string_map(r.get(2)),
            comment: text(r.get(3)),
            compaction: string_map(r.get(4)),
            compression: string_map(r.get(5)),
            crc_check_chance: double(r.get(6)),
            default_time_to_live: int(r.get(7)),
            gc_grace_seconds: int(r.get(8)),
            max_index_interval: int(r.get(9)),
            memtable_flush_period_in_ms: int(r.get(10)),
            min_index_interval: int(r.get(11)),
            speculative_retry: text(r.get(12)),
        };
        let id = r.first().and_then(|v| v.as_ref()).and_then(|v| v.as_uuid());
        let columns = self
            .admin
            .rows(&format!(
                "SELECT column_name, kind, position, clustering_order, type FROM system_schema.columns \
                 WHERE keyspace_name = {} AND table_name = {}",
                lit(ks),
                lit(name)
            ))
            .await
            .map_err(server)?
            .iter()
            .map(|c| Column {
                name: text(c.first()),
                kind: text(c.get(1)),
                position: int(c.get(2)),
                order: text(c.get(3)),
                typ: text(c.get(4)),
            })
            .collect();
        let dropped = self
            .admin
            .rows(&format!(
                "SELECT column_name, type, dropped_time FROM system_schema.dropped_columns \
                 WHERE keyspace_name = {} AND table_name = {}",
                lit(ks),
                lit(name)
            ))
            .await
            .map_err(server)?
            .iter()
            .map(|c| Dropped {
                name: text(c.first()),
                typ: text(c.get(1)),
                micros: match c.get(2).and_then(|v| v.as_ref()) {
                    Some(CqlValue::Timestamp(ms)) => ms.0.saturating_mul(1000),
                    _ => 0,
                },
            })
            .collect();
        let is_log = self.log_base(ks, name).is_some() || self.shared.registry.lock().is_ok_and(|r| r.is_log(ks, name));
        // The caching given through the front says; else a log caching
        // nothing has the disabled caching ScyllaDB gives a new log.
        let caching_disabled = match self.shared.caching_enabled_of(ks, name) {
            Some(enabled) => !enabled,
            None => {
                is_log
                    && properties.caching.get("keys").is_some_and(|v| v == "NONE")
                    && properties.caching.get("rows_per_partition").is_some_and(|v| v == "NONE")
            }
        };
        let cdc = if is_log { None } else { self.shared.registry.lock().ok().and_then(|r| r.options(ks, name)) };
        let tombstone_gc = Some(self.shared.tombstone_gc_of(ks, name, is_log));
        let extras = ScyllaExtras {
            caching_disabled,
            tablets: self
                .shared
                .tablets
                .options
                .lock()
                .ok()
                .and_then(|m| m.get(&(ks.to_string(), name.to_string())).map(|o| o.to_map()))
                .unwrap_or_default(),
            cdc,
            tombstone_gc,
        };
        Ok(Some(Table { keyspace: ks.to_string(), name: name.to_string(), id, columns, dropped, properties, extras }))
    }

    /// `table()`: the table's row (a log's inside the block comment), its
    /// indexes and views (`extra`: Cassandra's rows for them, when known),
    /// and the log's ALTER when CDC is on.
    async fn table_group(
        &self,
        ks: &str,
        name: &str,
        internals: bool,
        extra: Option<Vec<Row>>,
    ) -> Result<Vec<Row>, (i32, String)> {
        let Some(table) = self.table(ks, name).await? else {
            let views = self
                .admin
                .rows(&format!(
                    "SELECT view_name FROM system_schema.views WHERE keyspace_name = {} AND view_name = {}",
                    lit(ks),
                    lit(name)
                ))
                .await
                .map_err(server)?;
            if !views.is_empty() {
                return Err(invalid(
                    "Cannot use DESC TABLE on materialized View. (Did you mean DESC MATERIALIZED VIEW)?".into(),
                ));
            }
            return Err(invalid(format!("Table '{name}' not found in keyspace '{ks}'")));
        };
        let mut statement = table.create_statement(internals);
        if self.log_base(ks, name).is_some() {
            statement = format!("{CDC_LOG_DESC_PREFIX}{statement}{CDC_LOG_DESC_SUFFIX}");
        }
        let mut rows = vec![Row {
            keyspace: maybe_quote(ks),
            kind: "table".into(),
            name: maybe_quote(name),
            statement: Some(statement),
        }];
        let extra = match extra {
            Some(e) => e,
            None => self.cassandra_group(ks, name).await.unwrap_or_default(),
        };
        rows.extend(extra);
        if self.cdc_on(ks, name) {
            let log = format!("{name}{LOG_SUFFIX}");
            if let Some(log_table) = self.table(ks, &log).await? {
                rows.push(Row {
                    keyspace: maybe_quote(ks),
                    kind: "table".into(),
                    name: maybe_quote(&log),
                    statement: Some(log_table.alter_with_properties()),
                });
            }
        }
        Ok(rows)
    }

    /// Cassandra's DESCRIBE rows of a keyspace, `type` in ScyllaDB's words.
    async fn cassandra_rows(&self, ks: &str) -> Result<Vec<Row>, (i32, String)> {
        let rows = self.admin.rows(&format!("DESCRIBE KEYSPACE {}", maybe_quote(ks))).await.map_err(server)?;
        Ok(rows
            .iter()
            .map(|r| {
                let kind = text(r.get(1));
                Row {
                    keyspace: text(r.first()),
                    kind: if kind == "materialized_view" { "view".into() } else { kind },
                    name: text(r.get(2)),
                    statement: r.get(3).and_then(|v| v.as_ref()).and_then(|v| v.as_str()).map(str::to_string),
                }
            })
            .collect())
    }

    /// The index and view rows Cassandra prints after `table`.
    async fn cassandra_group(&self, ks: &str, table: &str) -> Result<Vec<Row>, (i32, String)> {
        let rows = self.cassandra_rows(ks).await?;
        Ok(groups(rows).1.remove(&maybe_quote(table)).unwrap_or_default())
    }

    /// `describe_all_keyspace_elements`.
    async fn keyspace_elements(&self, ks: &str, internals: bool) -> Result<Vec<Row>, (i32, String)> {
        let mut out = vec![self.keyspace_row(ks).await?];
        let (head, mut tails) = groups(self.cassandra_rows(ks).await?);
        out.extend(head);
        for t in self.visible_tables(ks).await? {
            let extra = tails.remove(&maybe_quote(&t)).unwrap_or_default();
            out.extend(self.table_group(ks, &t, internals, Some(extra)).await?);
        }
        Ok(out)
    }
}

/// Splits Cassandra's rows of a keyspace into the types, functions and
/// aggregates, and the index and view rows following each table.
fn groups(rows: Vec<Row>) -> (Vec<Row>, BTreeMap<String, Vec<Row>>) {
    let mut head = Vec::new();
    let mut tails: BTreeMap<String, Vec<Row>> = BTreeMap::new();
    let mut current: Option<String> = None;
    for r in rows {
        match r.kind.as_str() {
            "keyspace" => {}
            "table" => {
                current = Some(r.name.clone());
                tails.entry(r.name).or_default();
            }
            "index" | "view" => match &current {
                Some(t) => tails.entry(t.clone()).or_default().push(r),
                None => head.push(r),
            },
            _ => head.push(r),
        }
    }
    (head, tails)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_forms_the_front_answers() {
        assert_eq!(parse("DESC TABLES"), Some(Describe::Tables));
        assert_eq!(parse("describe keyspaces;"), Some(Describe::Keyspaces));
        assert_eq!(parse("DESC SCHEMA WITH INTERNALS AND PASSWORDS"), Some(Describe::Schema { internals: true }));
        assert_eq!(parse("DESC FULL SCHEMA"), Some(Describe::Schema { internals: false }));
        assert_eq!(
            parse("DESC ONLY KEYSPACE \"Ks\""),
            Some(Describe::Keyspace { name: Some("Ks".into()), only: true, internals: false })
        );
        assert_eq!(parse("DESC KEYSPACE"), Some(Describe::Keyspace { name: None, only: false, internals: false }));
        assert_eq!(
            parse("DESCRIBE TABLE ks.T WITH INTERNALS;"),
            Some(Describe::Table { keyspace: Some("ks".into()), name: "t".into(), internals: true })
        );
        assert_eq!(parse("DESC t"), Some(Describe::Generic { keyspace: None, name: "t".into(), internals: false }));
        for other in [
            "DESC CLUSTER",
            "DESC TYPES",
            "DESC TYPE ks.u",
            "DESC MATERIALIZED VIEW ks.v",
            "SELECT 1",
            "DESC TABLE t WITH x",
        ] {
            assert_eq!(parse(other), None, "{other}");
        }
    }

    #[test]
    fn log_comment_matches_scylla_constants() {
        assert!(CDC_LOG_DESC_PREFIX.starts_with("/* Do NOT execute this statement!"));
        assert!(CDC_LOG_DESC_PREFIX.ends_with("vector column.\n\n"));
        assert_eq!(CDC_LOG_DESC_SUFFIX, "\n*/");
    }
}
