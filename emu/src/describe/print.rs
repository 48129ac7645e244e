//! ScyllaDB's texts for keyspaces and tables, printed from the rows of
//! Cassandra's `system_schema`.
//!
//! Cassandra's own DESCRIBE output differs from ScyllaDB's in layout (the
//! primary key inline, `AND additional_write_policy`, `cdc = false`, ...)
//! and in the words of several properties, so the front prints the
//! statements itself, as `schema::get_create_statement`,
//! `schema::schema_properties` and `keyspace_metadata::describe` do
//! (<https://github.com/scylladb/scylladb/blob/master/schema/schema.cc>,
//! <https://github.com/scylladb/scylladb/blob/master/data_dictionary/data_dictionary.cc>).
//! Where Cassandra stores a property in another form, the value is turned
//! into ScyllaDB's: compaction class without its package, `sstable_compression`
//! for the compressor, `99.0PERCENTILE` for `99p`; the defaults Cassandra
//! adds on its own (`max_threshold`/`min_threshold` 32/4 in compaction,
//! `chunk_length_in_kb` 16 in compression) are left out, as ScyllaDB keeps
//! only the options it was given.

use std::collections::BTreeMap;

use crate::admin::lit as single_quote;
use crate::cdc::CdcOptions;
use crate::tombstone_gc::TombstoneGc;

/// A keyspace as `system_schema.keyspaces` has it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct KeyspaceRow {
    pub(crate) name: String,
    pub(crate) durable_writes: bool,
    /// The replication map, `class` included, sorted by key.
    pub(crate) replication: BTreeMap<String, String>,
    /// `None`: vnodes; `Some(0)`: tablets without `initial`; `Some(n)`.
    pub(crate) tablets: Option<i32>,
}

/// One column of a table (`system_schema.columns`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Column {
    pub(crate) name: String,
    /// `partition_key`, `clustering`, `static` or `regular`.
    pub(crate) kind: String,
    pub(crate) position: i32,
    /// `asc`, `desc` or `none`.
    pub(crate) order: String,
    pub(crate) typ: String,
}

/// A dropped column (`system_schema.dropped_columns`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Dropped {
    pub(crate) name: String,
    pub(crate) typ: String,
    /// The drop time in microseconds (`USING TIMESTAMP`).
    pub(crate) micros: i64,
}

/// A table's properties as `system_schema.tables` has them.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct Properties {
    pub(crate) bloom_filter_fp_chance: f64,
    pub(crate) caching: BTreeMap<String, String>,
    pub(crate) comment: String,
    pub(crate) compaction: BTreeMap<String, String>,
    pub(crate) compression: BTreeMap<String, String>,
    pub(crate) crc_check_chance: f64,
    pub(crate) default_time_to_live: i32,
    pub(crate) gc_grace_seconds: i32,
    pub(crate) max_index_interval: i32,
    pub(crate) memtable_flush_period_in_ms: i32,
    pub(crate) min_index_interval: i32,
    pub(crate) speculative_retry: String,
}

/// What ScyllaDB keeps beside Cassandra's properties.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct ScyllaExtras {
    /// A CDC log whose caching is still the disabled caching ScyllaDB gives
    /// a new log (`'enabled': 'false'`).
    pub(crate) caching_disabled: bool,
    /// Per-table tablet options, sorted by key (`tablet_options::to_map`).
    pub(crate) tablets: BTreeMap<String, String>,
    /// The table's `cdc` extension.
    pub(crate) cdc: Option<CdcOptions>,
    /// The table's `tombstone_gc` extension (every table has one: the one
    /// given or ScyllaDB's default, [`crate::tombstone_gc`]); `None` prints
    /// none.
    pub(crate) tombstone_gc: Option<TombstoneGc>,
}

/// A table, everything DESCRIBE prints of it.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Table {
    pub(crate) keyspace: String,
    pub(crate) name: String,
    pub(crate) id: Option<uuid::Uuid>,
    pub(crate) columns: Vec<Column>,
    pub(crate) dropped: Vec<Dropped>,
    pub(crate) properties: Properties,
    pub(crate) extras: ScyllaExtras,
}

/// `cql3::util::maybe_quote`: the name as is when it is a plain lower-case
/// identifier, else in double quotes with `"` doubled.
pub(crate) fn maybe_quote(name: &str) -> String {
    let plain = !name.is_empty()
        && name.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_')
        && !name.as_bytes()[0].is_ascii_digit()
        && !crate::cdclog::dml::lexer::is_reserved(name);
    if plain {
        name.to_string()
    } else {
        format!("\"{}\"", name.replace('"', "\"\""))
    }
}

/// A double as C++'s `ostream << double` writes it (`%g`, 6 significant
/// digits): `0.01`, `1`, `0.5`, `1e-05`.
pub(crate) fn format_double(x: f64) -> String {
    if !x.is_finite() {
        return if x.is_nan() {
            "nan".into()
        } else if x > 0.0 {
            "inf".into()
        } else {
            "-inf".into()
        };
    }
    if x == 0.0 {
        return "0".into();
    }
    let exp = x.abs().log10().floor() as i32;
    // Round to 6 significant digits first: the exponent may move.
    let sci = format!("{:.5e}", x);
    let (mantissa, e) = sci.split_once('e').unwrap_or((sci.as_str(), "0"));
    let e: i32 = e.parse().unwrap_or(exp);
    let trim = |s: String| {
        if s.contains('.') {
            s.trim_end_matches('0').trim_end_matches('.').to_string()
        } else {
            s
        }
    };
    if !(-4..6).contains(&e) {
        let m = trim(mantissa.to_string());
        let sign = if e < 0 { '-' } else { '+' };
        format!("{m}e{sign}{:02}", e.abs())
    } else {
        let decimals = (5 - e).max(0) as usize;
        trim(format!("{:.*}", decimals, x))
    }
}

fn map_as_cql_param<'a>(entries: impl Iterator<Item = (&'a str, &'a str)>) -> String {
    entries.map(|(k, v)| format!("'{k}': '{v}'")).collect::<Vec<_>>().join(", ")
}

/// Cassandra's `speculative_retry` text in ScyllaDB's words.
pub(crate) fn speculative_retry(cassandra: &str) -> String {
    let t = cassandra.trim();
    let upper = t.to_ascii_uppercase();
    let number = |s: &str| s.trim().parse::<f64>().ok();
    if upper == "ALWAYS" {
        return "ALWAYS".into();
    }
    if upper == "NEVER" || upper == "NONE" {
        return "NONE".into();
    }
    let percentile = upper.strip_suffix("PERCENTILE").or_else(|| upper.strip_suffix('P')).and_then(number).map(|v| {
        let s = format!("{v}");
        let s = if s.contains('.') { s } else { format!("{s}.0") };
        format!("{s}PERCENTILE")
    });
    if let Some(p) = percentile {
        return p;
    }
    if let Some(ms) = upper.strip_suffix("MS").and_then(number) {
        return format!("{ms:.2}ms");
    }
    t.to_string()
}

impl Table {
    /// Scylla's `all_columns()` order: partition key and clustering columns
    /// by position, then static and regular columns, each by name.
    fn ordered_columns(&self) -> Vec<&Column> {
        let rank = |k: &str| match k {
            "partition_key" => 0,
            "clustering" => 1,
            "static" => 2,
            _ => 3,
        };
        let mut cols: Vec<&Column> = self.columns.iter().collect();
        cols.sort_by(|a, b| {
            let (ra, rb) = (rank(&a.kind), rank(&b.kind));
            ra.cmp(&rb).then_with(|| {
                if ra < 2 {
                    a.position.cmp(&b.position)
                } else {
                    a.name.as_bytes().cmp(b.name.as_bytes())
                }
            })
        });
        cols
    }

    fn key_columns(&self, kind: &str) -> Vec<&Column> {
        let mut cols: Vec<&Column> = self.columns.iter().filter(|c| c.kind == kind).collect();
        cols.sort_by_key(|c| c.position);
        cols
    }

    fn qualified(&self) -> String {
        format!("{}.{}", maybe_quote(&self.keyspace), maybe_quote(&self.name))
    }

    /// Dropped columns in the order the front prints them: by name, last
    /// first. ScyllaDB iterates `schema::dropped_columns()`, a
    /// `std::unordered_map` filled in name order from
    /// `system_schema.dropped_columns`; libstdc++ puts a new element first
    /// when its bucket is empty, so a few columns come out in reverse name
    /// order, whatever their drop times. The one upstream pin agrees:
    /// `test_reattach_cdc_log_table_after_altering_base` in
    /// test/cqlpy/test_cdc.py expects `v`, `"cdc$deleted_a"`, `a` (dropped
    /// together). With more columns (bucket collisions, rehashes) ScyllaDB's
    /// order is its hash's, which the front does not reproduce.
    fn dropped_sorted(&self) -> Vec<&Dropped> {
        let mut d: Vec<&Dropped> = self.dropped.iter().collect();
        d.sort_by(|a, b| b.name.cmp(&a.name));
        d
    }

    /// `CREATE TABLE ...;\n` as `schema::get_create_statement` prints it.
    pub(crate) fn create_statement(&self, with_internals: bool) -> String {
        let mut os = format!("CREATE TABLE {} (", self.qualified());
        let dropped = self.dropped_sorted();
        for c in self.ordered_columns() {
            if with_internals && dropped.iter().any(|d| d.name == c.name) {
                continue;
            }
            os.push_str("\n    ");
            os.push_str(&column_as_cql(c));
            os.push(',');
        }
        if with_internals {
            for d in &dropped {
                os.push_str(&format!("\n    {} {},", maybe_quote(&d.name), d.typ));
            }
        }
        let pk = self.key_columns("partition_key");
        let ck = self.key_columns("clustering");
        os.push_str("\n    PRIMARY KEY (");
        let pk_names: Vec<String> = pk.iter().map(|c| maybe_quote(&c.name)).collect();
        if pk.len() > 1 {
            os.push_str(&format!("({})", pk_names.join(", ")));
        } else {
            os.push_str(&pk_names.join(", "));
        }
        for c in &ck {
            os.push_str(", ");
            os.push_str(&maybe_quote(&c.name));
        }
        os.push_str(")\n) WITH ");
        if with_internals {
            if let Some(id) = self.id {
                os.push_str(&format!("ID = {id}\nAND "));
            }
        }
        if !ck.is_empty() {
            let order: Vec<String> = ck
                .iter()
                .map(|c| {
                    let dir = if c.order.eq_ignore_ascii_case("desc") { "DESC" } else { "ASC" };
                    format!("{} {dir}", maybe_quote(&c.name))
                })
                .collect();
            os.push_str(&format!("CLUSTERING ORDER BY ({})\n    AND ", order.join(", ")));
        }
        os.push_str(&self.properties_text());
        os.push_str(";\n");
        if with_internals {
            for d in &dropped {
                os.push_str(&format!(
                    "\nALTER TABLE {} DROP {} USING TIMESTAMP {};",
                    self.qualified(),
                    maybe_quote(&d.name),
                    d.micros
                ));
                if let Some(c) = self.columns.iter().find(|c| c.name == d.name) {
                    os.push_str(&format!("\nALTER TABLE {} ADD {};", self.qualified(), column_as_cql(c)));
                }
            }
        }
        os
    }

    /// `ALTER TABLE ks.t WITH <properties>;\n`
    /// (`schema::describe_alter_with_properties`).
    pub(crate) fn alter_with_properties(&self) -> String {
        format!("ALTER TABLE {} WITH {};\n", self.qualified(), self.properties_text())
    }

    /// `schema::schema_properties`.
    fn properties_text(&self) -> String {
        let p = &self.properties;
        let mut caching = p.caching.clone();
        if self.extras.caching_disabled {
            caching.insert("enabled".into(), "false".into());
        }
        let compaction_class = p
            .compaction
            .get("class")
            .map(|c| c.rsplit('.').next().unwrap_or(c).to_string())
            .unwrap_or_else(|| "SizeTieredCompactionStrategy".into());
        let compaction_rest = p.compaction.iter().filter(|(k, v)| match k.as_str() {
            "class" => false,
            "max_threshold" => v.as_str() != "32",
            "min_threshold" => v.as_str() != "4",
            _ => true,
        });
        let mut compaction = format!("{{'class': '{compaction_class}'");
        for (k, v) in compaction_rest {
            compaction.push_str(&format!(", '{k}': '{v}'"));
        }
        compaction.push('}');
        let compression = crate::compression::as_scylla_prints(&p.compression);
        let mut lines = vec![
            format!("bloom_filter_fp_chance = {}", format_double(p.bloom_filter_fp_chance)),
            format!("caching = {{{}}}", map_as_cql_param(caching.iter().map(|(k, v)| (k.as_str(), v.as_str())))),
            format!("comment = {}", single_quote(&p.comment)),
            format!("compaction = {compaction}"),
            format!(
                "compression = {{{}}}",
                map_as_cql_param(compression.iter().map(|(k, v)| (k.as_str(), v.as_str())))
            ),
            format!("crc_check_chance = {}", format_double(p.crc_check_chance)),
            format!("default_time_to_live = {}", p.default_time_to_live),
            format!("gc_grace_seconds = {}", p.gc_grace_seconds),
            format!("max_index_interval = {}", p.max_index_interval),
            format!("memtable_flush_period_in_ms = {}", p.memtable_flush_period_in_ms),
            format!("min_index_interval = {}", p.min_index_interval),
            format!("speculative_retry = '{}'", speculative_retry(&p.speculative_retry)),
        ];
        if !self.extras.tablets.is_empty() {
            lines.push(format!(
                "tablets = {{{}}}",
                map_as_cql_param(self.extras.tablets.iter().map(|(k, v)| (k.as_str(), v.as_str())))
            ));
        }
        if let Some(cdc) = &self.extras.cdc {
            let map = cdc.to_map();
            lines.push(format!("cdc = {{{}}}", map_as_cql_param(map.iter().map(|(k, v)| (*k, v.as_str())))));
        }
        if let Some(gc) = &self.extras.tombstone_gc {
            lines.push(format!("tombstone_gc = {gc}"));
        }
        lines.join("\n    AND ")
    }
}

fn column_as_cql(c: &Column) -> String {
    let mut s = format!("{} {}", maybe_quote(&c.name), c.typ);
    if c.kind == "static" {
        s.push_str(" STATIC");
    }
    s
}

impl KeyspaceRow {
    /// `keyspace_metadata::describe`: replication with the qualified class
    /// and the other options sorted, durable writes, and the tablets flag a
    /// cluster with the tablets feature prints for every keyspace.
    pub(crate) fn create_statement(&self) -> String {
        let class = self.replication.get("class").cloned().unwrap_or_else(|| "NetworkTopologyStrategy".into());
        let class = if class.contains('.') { class } else { format!("org.apache.cassandra.locator.{class}") };
        let mut os = format!(
            "CREATE KEYSPACE {} WITH replication = {{'class': {}",
            maybe_quote(&self.name),
            single_quote(&class)
        );
        for (k, v) in self.replication.iter().filter(|(k, _)| k.as_str() != "class") {
            os.push_str(&format!(", {}: {}", single_quote(k), single_quote(v)));
        }
        os.push_str(&format!("}} AND durable_writes = {}", self.durable_writes));
        match self.tablets {
            None => os.push_str(" AND tablets = {'enabled': false}"),
            Some(0) => os.push_str(" AND tablets = {'enabled': true}"),
            Some(n) => os.push_str(&format!(" AND tablets = {{'enabled': true, 'initial': {n}}}")),
        }
        os.push(';');
        os
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn doubles_print_like_cpp_streams() {
        assert_eq!(format_double(0.01), "0.01");
        assert_eq!(format_double(1.0), "1");
        assert_eq!(format_double(0.5), "0.5");
        assert_eq!(format_double(0.1), "0.1");
        assert_eq!(format_double(1e-5), "1e-05");
        assert_eq!(format_double(0.123456789), "0.123457");
        assert_eq!(format_double(1234567.0), "1.23457e+06");
    }

    #[test]
    fn speculative_retry_in_scylla_words() {
        assert_eq!(speculative_retry("99p"), "99.0PERCENTILE");
        assert_eq!(speculative_retry("99.5p"), "99.5PERCENTILE");
        assert_eq!(speculative_retry("17.0PERCENTILE"), "17.0PERCENTILE");
        assert_eq!(speculative_retry("50ms"), "50.00ms");
        assert_eq!(speculative_retry("ALWAYS"), "ALWAYS");
        assert_eq!(speculative_retry("NEVER"), "NONE");
    }

    #[test]
    fn names_quoted_only_when_needed() {
        assert_eq!(maybe_quote("ks"), "ks");
        assert_eq!(maybe_quote("cdc$time"), "\"cdc$time\"");
        assert_eq!(maybe_quote("Quoted_KS"), "\"Quoted_KS\"");
        assert_eq!(maybe_quote("a\"b"), "\"a\"\"b\"");
        assert_eq!(maybe_quote("select"), "\"select\"");
    }

    #[test]
    fn keyspace_statement_with_tablets_flag() {
        let mut replication = BTreeMap::new();
        replication.insert("class".to_string(), "org.apache.cassandra.locator.NetworkTopologyStrategy".to_string());
        replication.insert("datacenter1".to_string(), "1".to_string());
        let mut k = KeyspaceRow { name: "ks".into(), durable_writes: true, replication, tablets: None };
        assert_eq!(
            k.create_statement(),
            "CREATE KEYSPACE ks WITH replication = {'class': 'org.apache.cassandra.locator.NetworkTopologyStrategy', \
             'datacenter1': '1'} AND durable_writes = true AND tablets = {'enabled': false};"
        );
        k.tablets = Some(0);
        assert!(k.create_statement().ends_with("AND tablets = {'enabled': true};"));
        k.tablets = Some(4);
        assert!(k.create_statement().ends_with("AND tablets = {'enabled': true, 'initial': 4};"));
    }
}
