//! The front's side of CDC log synthesis: which requests are writes to CDC
//! tables, the schemas they need, the timestamp checks Scylla makes
//! (§3.8), the image reads, and the log writes.

use crate::clock::now_micros;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use bytes::Bytes;
use shardwise_protocol::codec::{RawValue, Reader};
use shardwise_protocol::consistency::Consistency;
use shardwise_protocol::response::ResultMessage;
use shardwise_protocol::token::Partitioner;
use shardwise_protocol::types::CqlValue;

use super::dml::{Statement, TableName};
use super::mutation::{self, Binds, Built, Context, PartitionMutation};
use super::schema::{CollectionKind, TableSchema};
use super::split::{self, Images, RowState, StateValue};
use super::values;
use super::writer::Write;
use crate::admin::{self, lit};
use crate::cdc::{quote, BaseColumn, CdcOptions, ColumnKind, PreImage};
use crate::shared::Shared;
use crate::stats::inc;
use crate::EmuError;

/// A bound value, owned (the request's body may be gone by the time the
/// log is written).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum OwnedValue {
    Null,
    Unset,
    Value(Bytes),
}

impl OwnedValue {
    pub(crate) fn of(v: RawValue<'_>) -> OwnedValue {
        match v {
            RawValue::Null => OwnedValue::Null,
            RawValue::Unset => OwnedValue::Unset,
            RawValue::Value(b) => OwnedValue::Value(Bytes::copy_from_slice(b)),
        }
    }
}

/// One statement of a write with its values.
#[derive(Debug, Clone)]
pub(crate) struct Item {
    pub(crate) statement: Arc<Statement>,
    /// The keyspace of unqualified table names.
    pub(crate) keyspace: Option<String>,
    pub(crate) values: Vec<OwnedValue>,
    pub(crate) names: Option<Vec<String>>,
}

/// Scylla's clock leeway for CDC writes (`generation_leeway`).
const LEEWAY_MICROS: i64 = 5_000_000;

/// splitmix64 over a shared counter: random bits for timeuuids.
pub(crate) fn random(state: &AtomicU64) -> u64 {
    use crate::rng::{mix, GAMMA};
    mix(state.fetch_add(GAMMA, Ordering::Relaxed).wrapping_add(GAMMA))
}

/// The consistency of log writes and image reads for a write at `cl` (§3.7).
pub(crate) fn log_consistency(cl: Consistency) -> Consistency {
    match cl {
        Consistency::Any => Consistency::One,
        Consistency::Serial => Consistency::Quorum,
        Consistency::LocalSerial => Consistency::LocalQuorum,
        other => other,
    }
}

fn resolve<'a>(t: &'a TableName, default: Option<&'a str>) -> Option<(&'a str, &'a str)> {
    Some((t.keyspace.as_deref().or(default)?, &t.table))
}

impl Shared {
    /// Forgets cached schemas of a table (after DDL).
    pub(crate) fn forget_cdc_schema(&self, keyspace: &str, table: &str) {
        let key = (keyspace.to_string(), table.to_string());
        if let Ok(mut s) = self.schemas.cdc.lock() {
            s.remove(&key);
        }
        if let Ok(mut s) = self.schemas.tables.lock() {
            s.remove(&key);
        }
    }

    /// The schema the log rows of `keyspace.table` are built from (`None`
    /// without CDC), cached until the next DDL on the table.
    pub(crate) async fn cdc_schema(&self, keyspace: &str, table: &str) -> Result<Option<Arc<TableSchema>>, EmuError> {
        let Some(options) = self.registry.lock().ok().and_then(|r| r.options(keyspace, table)).filter(|o| o.enabled)
        else {
            return Ok(None);
        };
        let key = (keyspace.to_string(), table.to_string());
        if let Some(s) = self.schemas.cdc.lock().ok().and_then(|s| s.get(&key).cloned()) {
            return Ok(Some(s));
        }
        let schema = Arc::new(self.load_schema(keyspace, table, options).await?);
        if let Ok(mut s) = self.schemas.cdc.lock() {
            s.insert(key, schema.clone());
        }
        Ok(Some(schema))
    }

    /// The schema of any table (CDC or not), for conditional writes;
    /// `None` when the table does not exist.
    pub(crate) async fn table_schema(&self, keyspace: &str, table: &str) -> Result<Option<Arc<TableSchema>>, EmuError> {
        if let Some(s) = self.cdc_schema(keyspace, table).await? {
            return Ok(Some(s));
        }
        let key = (keyspace.to_string(), table.to_string());
        if let Some(s) = self.schemas.tables.lock().ok().and_then(|s| s.get(&key).cloned()) {
            return Ok(Some(s));
        }
        if self.base_columns(keyspace, table).await?.is_empty() {
            return Ok(None);
        }
        let schema = Arc::new(self.load_schema(keyspace, table, CdcOptions::default()).await?);
        if let Ok(mut s) = self.schemas.tables.lock() {
            s.insert(key, schema.clone());
        }
        Ok(Some(schema))
    }

    /// Reads a table's schema from Cassandra's `system_schema`.
    async fn load_schema(&self, keyspace: &str, table: &str, options: CdcOptions) -> Result<TableSchema, EmuError> {
        let columns: Vec<BaseColumn> = self.base_columns(keyspace, table).await?;
        let mut types: HashMap<String, Vec<(String, String)>> = HashMap::new();
        for row in self
            .admin
            .rows(&format!(
                "SELECT type_name, field_names, field_types FROM system_schema.types WHERE keyspace_name = {}",
                lit(keyspace)
            ))
            .await?
        {
            let texts = |v: &Option<CqlValue>| -> Vec<String> {
                v.as_ref()
                    .and_then(|v| v.as_elements())
                    .map(|e| e.iter().filter_map(|x| x.as_str().map(str::to_owned)).collect())
                    .unwrap_or_default()
            };
            if let Some(name) = admin::text(&row[0]) {
                types.insert(name, texts(&row[1]).into_iter().zip(texts(&row[2])).collect());
            }
        }
        let table_row = self
            .admin
            .rows(&format!(
                "SELECT default_time_to_live, flags FROM system_schema.tables WHERE keyspace_name = {} AND table_name = {}",
                lit(keyspace),
                lit(table)
            ))
            .await?;
        let default_ttl = table_row.first().and_then(|r| r[0].as_ref().and_then(|v| v.as_i32())).unwrap_or(0);
        // COMPACT STORAGE tables are `dense` (clustered) or not `compound`.
        let flags: Option<Vec<String>> = table_row
            .first()
            .and_then(|r| r[1].as_ref().and_then(|v| v.as_elements()))
            .map(|e| e.iter().filter_map(|x| x.as_str().map(str::to_owned)).collect());
        let compact = flags.is_some_and(|f| f.iter().any(|f| f == "dense") || !f.iter().any(|f| f == "compound"));
        let udt = |_: &str, name: &str| types.get(name).cloned();
        let mut schema = TableSchema::new(keyspace, table, &columns, &udt, default_ttl, options)
            .map_err(|m| EmuError::Protocol(format!("schema of {keyspace}.{table}: {m}")))?;
        schema.compact = compact;
        Ok(schema)
    }

    /// The mutations of CDC tables that `items` make at timestamp `ts`.
    pub(crate) async fn cdc_mutations(&self, items: &[Item], ts: i64) -> Result<Built, (i32, String)> {
        let mut schemas: HashMap<(String, String), Option<Arc<TableSchema>>> = HashMap::new();
        for item in items {
            for t in item.statement.tables() {
                if let Some((k, t)) = resolve(t, item.keyspace.as_deref()) {
                    let key = (k.to_string(), t.to_string());
                    if let std::collections::hash_map::Entry::Vacant(slot) = schemas.entry(key) {
                        slot.insert(self.cdc_schema(k, t).await.map_err(|e| (0, e.to_string()))?);
                    }
                }
            }
        }
        let mut all = Built::default();
        for item in items {
            let default = item.keyspace.clone();
            let schema_of = |t: &TableName| {
                let (k, t) = resolve(t, default.as_deref())?;
                schemas.get(&(k.to_string(), t.to_string())).cloned().flatten()
            };
            let raw: Vec<RawValue<'_>> = item
                .values
                .iter()
                .map(|v| match v {
                    OwnedValue::Null => RawValue::Null,
                    OwnedValue::Unset => RawValue::Unset,
                    OwnedValue::Value(b) => RawValue::Value(&b[..]),
                })
                .collect();
            let names: Option<Vec<&str>> = item.names.as_ref().map(|n| n.iter().map(String::as_str).collect());
            let cx = Context {
                schema_of: &schema_of,
                binds: Binds { values: &raw, names: names.as_deref() },
                timestamp: ts,
                list_node: random(&self.rng),
            };
            let built = mutation::build(&item.statement, &cx).map_err(|e| (0x2200, format!("CDC emulation: {e}")))?;
            all.inexact += built.inexact;
            for m in built.mutations {
                let same = all.mutations.iter_mut().find(|o| {
                    o.schema.keyspace == m.schema.keyspace && o.schema.table == m.schema.table && o.key == m.key
                });
                match same {
                    // Several statements of a protocol BATCH on one partition.
                    Some(o) => o.absorb(m),
                    None => all.mutations.push(m),
                }
            }
        }
        Ok(all)
    }

    /// Scylla's refusal of a CDC write more than the leeway ahead (§3.8).
    fn check_not_from_the_future(ts: i64) -> Result<(), (i32, String)> {
        let now = now_micros();
        if ts > now + LEEWAY_MICROS {
            return Err((
                0x2200,
                format!("cdc: attempted to get a stream \"from the future\" ({ts}; current server time: {now})"),
            ));
        }
        Ok(())
    }

    /// Scylla's checks of a CDC write's timestamp on vnodes (§3.8).
    fn check_cdc_timestamp(gens: &[crate::Generation], ts: i64) -> Result<(), (i32, String)> {
        Self::check_not_from_the_future(ts)?;
        let now = now_micros();
        let invalid = |m: String| Err((0x2200, m));
        let at = |micros: i64| gens.iter().rev().find(|g| g.timestamp_ms * 1000 <= micros).map(|g| g.timestamp_ms);
        let Some(generation) = at(ts) else {
            return invalid(format!(
                "cdc::metadata::get_stream: could not find any CDC stream for timestamp {ts}. Are we in the middle of a cluster upgrade?"
            ));
        };
        if ts < now - LEEWAY_MICROS && at(now - LEEWAY_MICROS) != Some(generation) {
            return invalid(format!(
                "cdc: attempted to get a stream \"from the past\" ({ts}; current server time: {now})"
            ));
        }
        Ok(())
    }

    /// Reads the rows a mutation affects, for pre- and post-images.
    pub(crate) async fn cdc_images(&self, m: &PartitionMutation, cl: Consistency) -> Result<Images, EmuError> {
        let schema = &m.schema;
        let mut images = Images::default();
        if schema.options.preimage == PreImage::Off && !schema.options.postimage {
            return Ok(images);
        }
        let table = format!("{}.{}", quote(&schema.keyspace), quote(&schema.table));
        let pk_where: Vec<String> =
            schema.partition_key.iter().map(|&i| format!("{} = ?", quote(&schema.columns[i].name))).collect();
        let kind_columns = |kind: ColumnKind| -> Vec<usize> {
            (0..schema.columns.len()).filter(|&i| schema.columns[i].kind == kind).collect()
        };
        let select = |cols: &[usize]| -> String {
            let names: Vec<String> = if cols.is_empty() {
                vec![quote(&schema.columns[schema.partition_key[0]].name)]
            } else {
                cols.iter().map(|&i| quote(&schema.columns[i].name)).collect()
            };
            names.join(", ")
        };
        let statics = kind_columns(ColumnKind::Static);
        if !m.static_row.columns.is_empty() && !statics.is_empty() {
            let text = format!("SELECT {} FROM {table} WHERE {} LIMIT 1", select(&statics), pk_where.join(" AND "));
            let rows = raw_rows(self.log_writer.select(&text, &m.key, cl).await?)?;
            if let Some(row) = rows.first() {
                let state = self.state_of(schema, &statics, row);
                if !state.is_empty() {
                    images.static_row = Some(state);
                }
            }
        }
        let regular = kind_columns(ColumnKind::Regular);
        let mut keys: Vec<Vec<Bytes>> = m.rows.iter().filter(|(_, r)| !r.is_empty()).map(|(k, _)| k.clone()).collect();
        if m.partition_tombstone.is_some() && schema.clustering.is_empty() {
            keys.push(Vec::new());
        }
        let mut wh = pk_where.clone();
        wh.extend(schema.clustering.iter().map(|&i| format!("{} = ?", quote(&schema.columns[i].name))));
        let text = format!("SELECT {} FROM {table} WHERE {}", select(&regular), wh.join(" AND "));
        for ck in keys {
            let mut values = m.key.clone();
            values.extend(ck.iter().cloned());
            let rows = raw_rows(self.log_writer.select(&text, &values, cl).await?)?;
            if let Some(row) = rows.first() {
                let state = if regular.is_empty() { RowState::new() } else { self.state_of(schema, &regular, row) };
                images.rows.push((ck, state));
            }
        }
        Ok(images)
    }

    fn state_of(&self, schema: &TableSchema, columns: &[usize], row: &[Option<Bytes>]) -> RowState {
        let mut state = RowState::new();
        for (&i, v) in columns.iter().zip(row) {
            let Some(v) = v else { continue };
            let col = &schema.columns[i];
            let value = match col.collection() {
                None => StateValue::Atomic(v.clone()),
                Some(kind) => {
                    let cells: Vec<(Bytes, Bytes)> = match kind {
                        CollectionKind::Map => values::collection_entries(v)
                            .unwrap_or_default()
                            .into_iter()
                            .map(|(k, x)| (Bytes::copy_from_slice(k), Bytes::copy_from_slice(x.unwrap_or(&[]))))
                            .collect(),
                        CollectionKind::Set => values::collection_elements(v)
                            .unwrap_or_default()
                            .into_iter()
                            .flatten()
                            .map(|k| (Bytes::copy_from_slice(k), Bytes::new()))
                            .collect(),
                        CollectionKind::List => {
                            // Cassandra hides list keys: positional stand-ins.
                            inc(&self.counters.cdc_inexact);
                            values::collection_elements(v)
                                .unwrap_or_default()
                                .into_iter()
                                .enumerate()
                                .map(|(n, x)| {
                                    let key = values::timeuuid_from_micros(n as i64, 0);
                                    (Bytes::copy_from_slice(&key), Bytes::copy_from_slice(x.unwrap_or(&[])))
                                })
                                .collect()
                        }
                        CollectionKind::Udt => {
                            let n = match &col.typ {
                                shardwise_protocol::types::ColumnType::Udt { fields, .. } => fields.len(),
                                _ => 0,
                            };
                            values::udt_fields(v, n)
                                .unwrap_or_default()
                                .into_iter()
                                .enumerate()
                                .filter_map(|(i, f)| {
                                    f.map(|f| {
                                        (Bytes::copy_from_slice(&(i as i16).to_be_bytes()), Bytes::copy_from_slice(f))
                                    })
                                })
                                .collect()
                        }
                    };
                    StateValue::Cells(cells)
                }
            };
            state.insert(i, value);
        }
        state
    }

    /// The log writes for the mutations: one prepared `UPDATE` per log row.
    /// Returns the writes and whether they span several streams.
    pub(crate) fn cdc_log_writes(
        &self,
        mutations: &[(PartitionMutation, Images)],
    ) -> Result<(Vec<Write>, bool), (i32, String)> {
        // Held for this synchronous computation only: no copy of every
        // generation's streams per write.
        let guard = self.generations.list.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let gens: &[crate::Generation] = &guard;
        let tablet_streams = self.tablets.streams.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let mut writes = Vec::new();
        let mut streams = Vec::new();
        for (m, images) in mutations {
            let schema = &m.schema;
            let token = Partitioner::Murmur3
                .token_of_key(m.key.iter().map(|b| &b[..]))
                .ok()
                .flatten()
                .ok_or_else(|| (0x2200, "CDC emulation: partition key too long".to_string()))?;
            let log = format!("{}.{}", quote(&schema.keyspace), quote(&crate::cdc::log_table_name(&schema.table)));
            let sets = tablet_streams.get(&(schema.keyspace.clone(), schema.table.clone()));
            if sets.is_none() && self.uses_tablets(&schema.keyspace) {
                // A front restarted since CDC was turned on has lost the
                // table's stream sets: refuse rather than log to streams no
                // reader of a tablets table looks at.
                return Err((
                    0x0000,
                    format!(
                        "CDC emulation: the stream sets of {}.{} are unknown to this front (created before it started)",
                        schema.keyspace, schema.table
                    ),
                ));
            }
            for record in split::records(m, images) {
                let no_stream = || {
                    (
                        0x2200,
                        format!("cdc::metadata::get_stream: could not find any CDC stream for timestamp {}", record.ts),
                    )
                };
                let stream = match sets {
                    // A tablets table: its own stream sets (docs/cdc-log.md §11.3).
                    Some(sets) => {
                        Self::check_not_from_the_future(record.ts)?;
                        sets.stream_for(token.value(), record.ts).ok_or_else(no_stream)?
                    }
                    None => {
                        Self::check_cdc_timestamp(gens, record.ts)?;
                        let ms = record.ts.div_euclid(1000);
                        let generation = gens.iter().rev().find(|g| g.timestamp_ms <= ms).ok_or_else(no_stream)?;
                        generation.stream_for_token(token)
                    }
                };
                if !streams.contains(&stream) {
                    streams.push(stream);
                }
                let time = values::timeuuid_from_micros(record.ts, random(&self.rng));
                let n = record.rows.len();
                for (seq, row) in record.rows.into_iter().enumerate() {
                    let mut sets = vec!["\"cdc$operation\" = ?".to_string()];
                    let mut vals = vec![
                        Bytes::copy_from_slice(&record.ts.to_be_bytes()),
                        Bytes::copy_from_slice(&(schema.options.ttl.min(i32::MAX as u64) as i32).to_be_bytes()),
                        Bytes::copy_from_slice(&row.op.to_be_bytes()),
                    ];
                    if let Some(ttl) = row.ttl {
                        sets.push("\"cdc$ttl\" = ?".into());
                        vals.push(Bytes::copy_from_slice(&ttl.to_be_bytes()));
                    }
                    if seq + 1 == n {
                        sets.push("\"cdc$end_of_batch\" = ?".into());
                        vals.push(Bytes::from_static(&[1]));
                    }
                    for (name, v) in row.values {
                        sets.push(format!("{} = ?", quote(&name)));
                        vals.push(v);
                    }
                    vals.push(Bytes::copy_from_slice(stream.as_bytes()));
                    vals.push(Bytes::copy_from_slice(&time));
                    vals.push(Bytes::copy_from_slice(&(seq as i32).to_be_bytes()));
                    let text = format!(
                        "UPDATE {log} USING TIMESTAMP ? AND TTL ? SET {} WHERE \"cdc$stream_id\" = ? AND \"cdc$time\" = ? AND \"cdc$batch_seq_no\" = ?",
                        sets.join(", ")
                    );
                    writes.push((text, vals));
                }
            }
        }
        Ok((writes, streams.len() > 1))
    }
}

/// The rows of a result as raw column values.
pub(crate) fn raw_rows(result: ResultMessage) -> Result<Vec<Vec<Option<Bytes>>>, EmuError> {
    let ResultMessage::Rows(rows) = result else {
        return Err(EmuError::Protocol("an image read returned no rows result".into()));
    };
    let columns = rows.metadata.columns_count;
    let mut r = Reader::new(rows.raw_rows());
    let mut out = Vec::with_capacity(rows.rows_count());
    for _ in 0..rows.rows_count() {
        let mut row = Vec::with_capacity(columns);
        for _ in 0..columns {
            let v = r.bytes("value").map_err(|e| EmuError::Protocol(format!("image read: {e}")))?;
            row.push(v.map(Bytes::copy_from_slice));
        }
        out.push(row);
    }
    r.finish("image read").map_err(|e| EmuError::Protocol(format!("image read: {e}")))?;
    Ok(out)
}

/// A cheap test before parsing: the first word of `text` (after blanks and
/// comments) starts a DML statement.
pub(crate) fn may_be_dml(text: &str) -> bool {
    let word = leading_word(text);
    ["insert", "update", "delete", "begin"].iter().any(|w| word.eq_ignore_ascii_case(w))
}

/// Whether `text` is a `BEGIN ... BATCH` statement (its first word, after
/// blanks and comments, is `BEGIN`).
pub(crate) fn is_batch_text(text: &str) -> bool {
    leading_word(text).eq_ignore_ascii_case("begin")
}

/// The first word of `text` after blanks and comments.
fn leading_word(text: &str) -> &str {
    let mut rest = text.trim_start();
    loop {
        if let Some(r) = rest.strip_prefix("--").or_else(|| rest.strip_prefix("//")) {
            rest = r.split_once('\n').map_or("", |x| x.1).trim_start();
        } else if let Some(r) = rest.strip_prefix("/*") {
            rest = r.split_once("*/").map_or("", |x| x.1).trim_start();
        } else {
            break;
        }
    }
    let end = rest.find(|c: char| !c.is_ascii_alphabetic()).unwrap_or(rest.len());
    &rest[..end]
}
