//! The front's keyspace of stand-in tables, and the tables it answers itself.
//!
//! Cassandra refuses tables in `system_distributed` and `system_schema`, so
//! the Scylla tables clients read live as *real* tables in one keyspace of
//! the front's own (default `shardwise_emu`), with Scylla's schemas, and
//! statements naming them are rewritten ([`super::rewrite`]). Real tables
//! rather than synthesized answers because clients query them in every
//! form — paged, prepared, `WHERE keyspace_name IN ?`, `ORDER BY time DESC
//! LIMIT 1` — and Cassandra then answers all of them correctly.
//!
//! - `cdc_generation_timestamps`, `cdc_streams_descriptions_v2`: the
//!   schemas of `docs/cdc-log.md` §5.2.
//! - `scylla_tables (keyspace_name, table_name, version, cdc, partitioner,
//!   committed_by_group0)`: Scylla's schema; as on Scylla, `partitioner` is
//!   set only for non-default partitioners (the CDC log tables) and `cdc` is
//!   left empty (Scylla keeps CDC options in a schema extension). Rows are
//!   written for tables created through the front (deviation: Scylla has a
//!   row for every table; a missing row means the default partitioner to
//!   every driver, so nothing is lost).
//! - `scylla_keyspaces (keyspace_name, storage_type, storage_options,
//!   initial_tablets)`: a row for every keyspace created through a front
//!   with `tablets = {'enabled': true}` (`initial_tablets` 0 unless
//!   `'initial'` was given), as on Scylla; none for keyspaces on vnodes.
//!   (Cassandra stores such a keyspace as any other; the front keeps its
//!   tablet maps, [`super::tablets`].)
//! - `tablets`: Scylla's `system.tablets` (one partition per table id, one
//!   row per tablet keyed by its last token; `replicas` as (host id, shard)
//!   pairs; the table's names, tablet count and resize sequence number as
//!   static columns), for the tables of keyspaces with tablets, rewritten
//!   whenever the front makes or resizes a map.
//! - `cdc_timestamps`, `cdc_streams`: Scylla's `system.cdc_timestamps` and
//!   `system.cdc_streams` (`docs/cdc-log.md` §11.1), the CDC stream sets of
//!   tables in tablets keyspaces.
//! - `cdc_options`: the front's memory of `WITH cdc = {...}` per base table
//!   (not a Scylla table).
//! - `tombstone_gc`: the front's memory of the `tombstone_gc` given to a
//!   table (ScyllaDB keeps it in a schema extension; not a Scylla table).
//! - `front_stats`: not a table at all; `SELECT * FROM <emu>.front_stats`
//!   is answered by the front with its counters.
//!
//! Replication: SimpleStrategy with `min(3, nodes)` replicas. Scylla's
//! `system_distributed` has RF 3 even on one node (so QUORUM fails there);
//! the stand-in is more lenient so that any consistency level works on a
//! one-node test cluster.

use std::collections::{BTreeMap, HashMap};

use bytes::Bytes;
use shardwise_protocol::response::ResultMessage;
use shardwise_protocol::rows::{ResultMetadata, Rows};
use shardwise_protocol::sharding::Sharder;
use shardwise_protocol::token::Partitioner;
use shardwise_protocol::types::{ColumnSpec, ColumnType, CqlValue};

use super::admin::{blob, lit, text, Admin};
use super::cdc::{CdcOptions, Registry};
use super::generation::{Generation, StreamId, VnodeStreams};
use super::stats::FrontStats;
use super::tablet_streams::TabletStreams;
use super::tablets::TabletMap;
use super::tombstone_gc::TombstoneGc;
use super::EmuError;

/// DDL of the stand-in keyspace.
pub(crate) fn keyspace_ddl(emu: &str, replication_factor: usize) -> Vec<String> {
    vec![
        format!(
            "CREATE KEYSPACE IF NOT EXISTS {emu} WITH replication = {{'class': 'SimpleStrategy', 'replication_factor': {replication_factor}}}"
        ),
        format!(
            "CREATE TABLE IF NOT EXISTS {emu}.cdc_generation_timestamps (key text, time timestamp, expired timestamp, \
             PRIMARY KEY (key, time)) WITH CLUSTERING ORDER BY (time DESC)"
        ),
        format!(
            "CREATE TABLE IF NOT EXISTS {emu}.cdc_streams_descriptions_v2 (time timestamp, range_end bigint, \
             streams frozen<set<blob>>, PRIMARY KEY (time, range_end))"
        ),
        format!(
            "CREATE TABLE IF NOT EXISTS {emu}.scylla_tables (keyspace_name text, table_name text, version uuid, \
             cdc map<text, text>, partitioner text, committed_by_group0 boolean, PRIMARY KEY (keyspace_name, table_name))"
        ),
        format!(
            "CREATE TABLE IF NOT EXISTS {emu}.scylla_keyspaces (keyspace_name text PRIMARY KEY, storage_type text, \
             storage_options map<text, text>, initial_tablets int)"
        ),
        format!(
            "CREATE TABLE IF NOT EXISTS {emu}.tablets (table_id uuid, last_token bigint, keyspace_name text static, \
             table_name text static, tablet_count int static, resize_type text static, resize_seq_number bigint static, \
             replicas frozen<list<frozen<tuple<uuid, int>>>>, new_replicas frozen<list<frozen<tuple<uuid, int>>>>, \
             stage text, transition text, session uuid, PRIMARY KEY (table_id, last_token))"
        ),
        format!(
            "CREATE TABLE IF NOT EXISTS {emu}.client_routes (connection_id text, host_id uuid, address text, port int, \
             tls_port int, alternator_port int, alternator_https_port int, PRIMARY KEY (connection_id, host_id))"
        ),
        format!(
            "CREATE TABLE IF NOT EXISTS {emu}.cdc_timestamps (keyspace_name text, table_name text, timestamp timestamp, \
             PRIMARY KEY ((keyspace_name, table_name), timestamp)) WITH CLUSTERING ORDER BY (timestamp DESC)"
        ),
        format!(
            "CREATE TABLE IF NOT EXISTS {emu}.cdc_streams (keyspace_name text, table_name text, timestamp timestamp, \
             stream_state tinyint, stream_id blob, \
             PRIMARY KEY ((keyspace_name, table_name), timestamp, stream_state, stream_id))"
        ),
        format!(
            "CREATE TABLE IF NOT EXISTS {emu}.cdc_options (keyspace_name text, table_name text, options map<text, text>, \
             PRIMARY KEY (keyspace_name, table_name))"
        ),
        format!(
            "CREATE TABLE IF NOT EXISTS {emu}.tombstone_gc (keyspace_name text, table_name text, mode text, \
             propagation_delay_in_seconds bigint, PRIMARY KEY (keyspace_name, table_name))"
        ),
    ]
}

/// Loads the CDC registry (base tables with options, log tables).
pub(crate) async fn load_registry(admin: &Admin, emu: &str) -> Result<Registry, EmuError> {
    let mut reg = Registry::default();
    for row in admin.rows(&format!("SELECT keyspace_name, table_name, options FROM {emu}.cdc_options")).await? {
        let (Some(ks), Some(t)) = (text(&row[0]), text(&row[1])) else { continue };
        let entries: Vec<(String, String)> = row[2]
            .as_ref()
            .and_then(|m| m.as_map())
            .map(|m| m.iter().filter_map(|(k, v)| Some((k.as_str()?.to_owned(), v.as_str()?.to_owned()))).collect())
            .unwrap_or_default();
        if let Ok(o) = CdcOptions::parse(&entries) {
            reg.tables.insert((ks, t), o);
        }
    }
    for row in admin.rows(&format!("SELECT keyspace_name, table_name, partitioner FROM {emu}.scylla_tables")).await? {
        let (Some(ks), Some(t)) = (text(&row[0]), text(&row[1])) else { continue };
        if text(&row[2]).and_then(|p| Partitioner::from_class_name(&p)) == Some(Partitioner::Cdc) {
            reg.logs.insert((ks, t));
        }
    }
    Ok(reg)
}

/// Records a table in `scylla_tables` (`partitioner` only when not the default).
pub(crate) async fn record_table(
    admin: &Admin,
    emu: &str,
    keyspace: &str,
    table: &str,
    partitioner: Option<Partitioner>,
) -> Result<(), EmuError> {
    let mut random = super::generation::random_source();
    let version = uuid::Uuid::from_u64_pair(random(), random()).hyphenated().to_string();
    let p = partitioner.map_or("null".to_string(), |p| lit(p.class_name()));
    admin
        .query(&format!(
            "INSERT INTO {emu}.scylla_tables (keyspace_name, table_name, version, partitioner) VALUES ({}, {}, {version}, {p})",
            lit(keyspace),
            lit(table)
        ))
        .await
        .map(drop)
}

/// The keyspaces with a row in `scylla_keyspaces` (created with tablets)
/// and their `initial_tablets`.
pub(crate) async fn tablet_keyspaces(admin: &Admin, emu: &str) -> Result<Vec<(String, i32)>, EmuError> {
    let rows = admin.rows(&format!("SELECT keyspace_name, initial_tablets FROM {emu}.scylla_keyspaces")).await?;
    Ok(rows
        .into_iter()
        .filter_map(|r| {
            let keyspace = r.first()?.as_ref()?.as_str()?.to_owned();
            Some((keyspace, r.get(1)?.as_ref()?.as_i32()?))
        })
        .collect())
}

/// A keyspace's replication options from `system_schema.keyspaces`
/// (`class` and its parameters); empty when the keyspace is unknown.
async fn replication(admin: &Admin, keyspace: &str) -> Result<Vec<(String, String)>, EmuError> {
    let rows = admin
        .rows(&format!("SELECT replication FROM system_schema.keyspaces WHERE keyspace_name = {}", lit(keyspace)))
        .await?;
    let Some(Some(options)) = rows.into_iter().next().and_then(|r| r.into_iter().next()) else {
        return Ok(Vec::new());
    };
    Ok(options
        .as_map()
        .unwrap_or_default()
        .iter()
        .filter_map(|(k, v)| Some((k.as_str()?.to_owned(), v.as_str()?.to_owned())))
        .collect())
}

/// A keyspace's replication class.
pub(crate) async fn replication_class(admin: &Admin, keyspace: &str) -> Result<Option<String>, EmuError> {
    Ok(replication(admin, keyspace).await?.into_iter().find(|(k, _)| k == "class").map(|(_, v)| v))
}

/// A keyspace's replication factor from `system_schema.keyspaces`:
/// `replication_factor` (SimpleStrategy) or the largest per-datacenter
/// count (NetworkTopologyStrategy); 1 when neither reads.
pub(crate) async fn replication_factor(admin: &Admin, keyspace: &str) -> Result<usize, EmuError> {
    let rf = replication(admin, keyspace)
        .await?
        .into_iter()
        .filter(|(k, _)| k != "class")
        .filter_map(|(_, v)| v.parse::<usize>().ok())
        .max();
    Ok(rf.unwrap_or(1).max(1))
}

/// The id of `keyspace.table` in `system_schema.tables`.
pub(crate) async fn table_id(admin: &Admin, keyspace: &str, table: &str) -> Result<Option<uuid::Uuid>, EmuError> {
    let rows = admin
        .rows(&format!(
            "SELECT id FROM system_schema.tables WHERE keyspace_name = {} AND table_name = {}",
            lit(keyspace),
            lit(table)
        ))
        .await?;
    Ok(rows.into_iter().next().and_then(|r| r.into_iter().next().flatten()).and_then(|v| v.as_uuid()))
}

/// The id of the materialized view `keyspace.view` in `system_schema.views`.
pub(crate) async fn view_id(admin: &Admin, keyspace: &str, view: &str) -> Result<Option<uuid::Uuid>, EmuError> {
    let rows = admin
        .rows(&format!(
            "SELECT id FROM system_schema.views WHERE keyspace_name = {} AND view_name = {}",
            lit(keyspace),
            lit(view)
        ))
        .await?;
    Ok(rows.into_iter().next().and_then(|r| r.into_iter().next().flatten()).and_then(|v| v.as_uuid()))
}

/// The name ScyllaDB gives the hidden table of index `index`
/// (`index_table_name` in `test/cqlpy/util.py`).
pub(crate) fn index_table_name(index: &str) -> String {
    format!("{index}_index")
}

/// The hidden tables of the secondary indexes of `keyspace.base` (custom
/// indexes have none), by name.
pub(crate) async fn index_tables(admin: &Admin, keyspace: &str, base: &str) -> Result<Vec<String>, EmuError> {
    let rows = admin
        .rows(&format!(
            "SELECT index_name, kind FROM system_schema.indexes WHERE keyspace_name = {} AND table_name = {}",
            lit(keyspace),
            lit(base)
        ))
        .await?;
    let mut names: Vec<String> = rows
        .into_iter()
        .filter_map(|r| {
            let name = text(r.first()?)?;
            let kind = text(r.get(1)?).unwrap_or_default();
            (kind != "CUSTOM").then(|| index_table_name(&name))
        })
        .collect();
    names.sort();
    Ok(names)
}

/// Writes the `tablets` rows of one table: its partition replaced by the
/// map's tablets (the old rows deleted one microsecond before the new ones
/// are written, so that the two never tie). A replica whose node has no
/// host id is left out of `replicas`.
pub(crate) async fn write_tablets(
    admin: &Admin,
    emu: &str,
    (keyspace, table, table_id): (&str, &str, uuid::Uuid),
    map: &TabletMap,
    resize_seq_number: i64,
    host_id: impl Fn(usize) -> Option<uuid::Uuid>,
) -> Result<(), EmuError> {
    let at =
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_micros() as i64).unwrap_or(0);
    admin.query(&format!("DELETE FROM {emu}.tablets USING TIMESTAMP {at} WHERE table_id = {table_id}")).await?;
    let mut batch = format!("BEGIN UNLOGGED BATCH USING TIMESTAMP {} ", at + 1);
    for (i, tablet) in map.tablets().iter().enumerate() {
        let replicas: Vec<String> =
            tablet.replicas.iter().filter_map(|&(n, shard)| Some(format!("({}, {shard})", host_id(n)?))).collect();
        let statics = if i == 0 {
            format!(
                ", keyspace_name, table_name, tablet_count, resize_type, resize_seq_number) VALUES ({table_id}, {}, [{}], \
                 {}, {}, {}, 'none', {resize_seq_number}",
                tablet.last_token,
                replicas.join(", "),
                lit(keyspace),
                lit(table),
                map.tablets().len()
            )
        } else {
            format!(") VALUES ({table_id}, {}, [{}]", tablet.last_token, replicas.join(", "))
        };
        batch.push_str(&format!("INSERT INTO {emu}.tablets (table_id, last_token, replicas{statics}); "));
    }
    batch.push_str("APPLY BATCH");
    admin.query(&batch).await.map(drop)
}

/// Writes stream set `i` of `keyspace.table` to `cdc_streams`, then its
/// timestamp to `cdc_timestamps` (a reader that sees the timestamp finds
/// its streams).
pub(crate) async fn write_stream_set(
    admin: &Admin,
    emu: &str,
    (keyspace, table): (&str, &str),
    streams: &TabletStreams,
    i: usize,
) -> Result<(), EmuError> {
    let Some(set) = streams.sets().get(i) else { return Ok(()) };
    let (ks, t, ts) = (lit(keyspace), lit(table), set.timestamp_ms);
    let mut batch = String::from("BEGIN UNLOGGED BATCH ");
    for (state, stream) in streams.rows(i) {
        batch.push_str(&format!(
            "INSERT INTO {emu}.cdc_streams (keyspace_name, table_name, timestamp, stream_state, stream_id) \
             VALUES ({ks}, {t}, {ts}, {state}, {}); ",
            blob(stream.as_bytes())
        ));
    }
    batch.push_str("APPLY BATCH");
    admin.query(&batch).await?;
    admin
        .query(&format!(
            "INSERT INTO {emu}.cdc_timestamps (keyspace_name, table_name, timestamp) VALUES ({ks}, {t}, {ts})"
        ))
        .await
        .map(drop)
}

/// Forgets the stream sets of a dropped table.
pub(crate) async fn forget_stream_sets(admin: &Admin, emu: &str, keyspace: &str, table: &str) -> Result<(), EmuError> {
    forget_rows(admin, emu, &["cdc_timestamps", "cdc_streams"], keyspace, table).await
}

/// Forgets a dropped table.
pub(crate) async fn forget_table(admin: &Admin, emu: &str, keyspace: &str, table: &str) -> Result<(), EmuError> {
    forget_rows(admin, emu, &["scylla_tables", "cdc_options", "tombstone_gc"], keyspace, table).await
}

/// Deletes the rows of `keyspace.table` from the stand-in `tables`.
async fn forget_rows(admin: &Admin, emu: &str, tables: &[&str], keyspace: &str, table: &str) -> Result<(), EmuError> {
    for t in tables {
        admin
            .query(&format!(
                "DELETE FROM {emu}.{t} WHERE keyspace_name = {} AND table_name = {}",
                lit(keyspace),
                lit(table)
            ))
            .await?;
    }
    Ok(())
}

/// Forgets a dropped keyspace.
pub(crate) async fn forget_keyspace(admin: &Admin, emu: &str, keyspace: &str) -> Result<(), EmuError> {
    for t in ["scylla_tables", "cdc_options", "scylla_keyspaces", "tombstone_gc"] {
        admin.query(&format!("DELETE FROM {emu}.{t} WHERE keyspace_name = {}", lit(keyspace))).await?;
    }
    Ok(())
}

/// Saves the `tombstone_gc` given to a table.
pub(crate) async fn save_tombstone_gc(
    admin: &Admin,
    emu: &str,
    keyspace: &str,
    table: &str,
    options: TombstoneGc,
) -> Result<(), EmuError> {
    admin
        .query(&format!(
            "INSERT INTO {emu}.tombstone_gc (keyspace_name, table_name, mode, propagation_delay_in_seconds) \
             VALUES ({}, {}, {}, {})",
            lit(keyspace),
            lit(table),
            lit(options.mode.as_str()),
            options.propagation_delay_in_seconds
        ))
        .await
        .map(drop)
}

/// The `tombstone_gc` given to tables through a front, by `(keyspace,
/// table)` (a row ScyllaDB would not take is passed over).
pub(crate) async fn load_tombstone_gc(
    admin: &Admin,
    emu: &str,
) -> Result<HashMap<(String, String), TombstoneGc>, EmuError> {
    let mut out = HashMap::new();
    let query = format!("SELECT keyspace_name, table_name, mode, propagation_delay_in_seconds FROM {emu}.tombstone_gc");
    for row in admin.rows(&query).await? {
        let (Some(ks), Some(t), Some(mode)) = (text(&row[0]), text(&row[1]), text(&row[2])) else { continue };
        let Some(CqlValue::BigInt(delay)) = row.get(3).cloned().flatten() else { continue };
        let entries = [("mode".to_string(), mode), ("propagation_delay_in_seconds".to_string(), delay.to_string())];
        if let Ok(options) = TombstoneGc::parse(&entries) {
            out.insert((ks, t), options);
        }
    }
    Ok(out)
}

/// Saves a base table's CDC options.
pub(crate) async fn save_cdc_options(
    admin: &Admin,
    emu: &str,
    keyspace: &str,
    table: &str,
    options: &CdcOptions,
) -> Result<(), EmuError> {
    let map: Vec<String> = options.to_map().iter().map(|(k, v)| format!("{}: {}", lit(k), lit(v))).collect();
    admin
        .query(&format!(
            "INSERT INTO {emu}.cdc_options (keyspace_name, table_name, options) VALUES ({}, {}, {{{}}})",
            lit(keyspace),
            lit(table),
            map.join(", ")
        ))
        .await
        .map(drop)
}

/// The ring: every token of `system.local` and `system.peers`, and the
/// number of nodes.
pub(crate) async fn read_ring(admin: &Admin) -> Result<(Vec<i64>, usize), EmuError> {
    let mut tokens = Vec::new();
    let mut nodes = 0;
    for q in ["SELECT tokens FROM system.local WHERE key = 'local'", "SELECT tokens FROM system.peers"] {
        for row in admin.rows(q).await? {
            nodes += 1;
            if let Some(set) = row[0].as_ref().and_then(|v| v.as_elements()) {
                tokens.extend(set.iter().filter_map(|t| t.as_str()?.parse::<i64>().ok()));
            }
        }
    }
    tokens.sort_unstable();
    tokens.dedup();
    Ok((tokens, nodes))
}

/// Publishes a generation: the streams first, the timestamp second, so that
/// a visible timestamp implies complete streams (`docs/cdc-log.md` §5.2).
pub(crate) async fn write_generation(admin: &Admin, emu: &str, g: &Generation) -> Result<(), EmuError> {
    for v in &g.vnodes {
        let streams: Vec<String> = v.streams.iter().map(|s| blob(s.as_bytes())).collect();
        admin
            .query(&format!(
                "INSERT INTO {emu}.cdc_streams_descriptions_v2 (time, range_end, streams) VALUES ({}, {}, {{{}}})",
                g.timestamp_ms,
                v.range_end,
                streams.join(", ")
            ))
            .await?;
    }
    admin
        .query(&format!(
            "INSERT INTO {emu}.cdc_generation_timestamps (key, time) VALUES ('timestamps', {})",
            g.timestamp_ms
        ))
        .await
        .map(drop)
}

/// Reads every published generation (oldest first), rebuilding the shard
/// order of each vnode's streams with `sharder`.
pub(crate) async fn read_generations(admin: &Admin, emu: &str, sharder: Sharder) -> Result<Vec<Generation>, EmuError> {
    let mut times: Vec<i64> = admin
        .rows(&format!("SELECT time FROM {emu}.cdc_generation_timestamps WHERE key = 'timestamps'"))
        .await?
        .into_iter()
        .filter_map(|r| match r.first().cloned().flatten() {
            Some(CqlValue::Timestamp(t)) => Some(t.0),
            _ => None,
        })
        .collect();
    times.sort_unstable();
    let mut out = Vec::new();
    for t in times {
        let rows = admin
            .rows(&format!("SELECT range_end, streams FROM {emu}.cdc_streams_descriptions_v2 WHERE time = {t}"))
            .await?;
        let mut by_end: BTreeMap<i64, Vec<StreamId>> = BTreeMap::new();
        for r in rows {
            let Some(end) = r[0].as_ref().and_then(|v| v.as_i64()) else { continue };
            let streams: Vec<StreamId> = r[1]
                .as_ref()
                .and_then(|v| v.as_elements())
                .map(|s| s.iter().filter_map(|b| StreamId::from_bytes(b.as_blob()?)).collect())
                .unwrap_or_default();
            by_end.insert(end, streams);
        }
        let ends: Vec<i64> = by_end.keys().copied().collect();
        let vnodes = by_end
            .into_iter()
            .enumerate()
            .map(|(i, (end, mut streams))| {
                streams.sort_by_key(|s| (sharder.shard_of(s.token()), s.raw_token()));
                let start = if i == 0 { ends[ends.len() - 1] } else { ends[i - 1] };
                VnodeStreams { index: i as u32, range_start: start, range_end: end, streams }
            })
            .collect();
        out.push(Generation { timestamp_ms: t, sharder, vnodes });
    }
    Ok(out)
}

/// Whether `g` was built for this ring and sharding (so it can be reused).
pub(crate) fn matches_ring(g: &Generation, ring: &[i64], sharder: Sharder) -> bool {
    g.vnodes.len() == ring.len()
        && g.vnodes.iter().zip(ring).all(|(v, &t)| {
            v.range_end == t
                && v.streams.len() == usize::from(sharder.nr_shards().get())
                && v.streams.iter().all(|s| s.version() == 1 && s.vnode_index() == v.index)
        })
}

/// The rows of `front_stats`: one per node and shard.
pub(crate) fn front_stats_result(emu: &str, stats: &FrontStats) -> Result<ResultMessage, EmuError> {
    let spec =
        |name: &str, typ| ColumnSpec { keyspace: emu.into(), table: "front_stats".into(), name: name.into(), typ };
    let specs = vec![
        spec("node", ColumnType::Text),
        spec("shard", ColumnType::Int),
        spec("connections_open", ColumnType::BigInt),
        spec("connections_accepted", ColumnType::BigInt),
        spec("hits", ColumnType::BigInt),
        spec("misses", ColumnType::BigInt),
        spec("unrouted", ColumnType::BigInt),
        spec("batch_hits", ColumnType::BigInt),
        spec("batch_misses", ColumnType::BigInt),
    ];
    let mut owned: Vec<Vec<Bytes>> = Vec::new();
    for n in &stats.nodes {
        for (i, s) in n.shards.iter().enumerate() {
            owned.push(vec![
                Bytes::from(n.upstream.to_string()),
                Bytes::copy_from_slice(&(i as i32).to_be_bytes()),
                Bytes::copy_from_slice(&(s.connections_open as i64).to_be_bytes()),
                Bytes::copy_from_slice(&(s.connections_accepted as i64).to_be_bytes()),
                Bytes::copy_from_slice(&(s.hits as i64).to_be_bytes()),
                Bytes::copy_from_slice(&(s.misses as i64).to_be_bytes()),
                Bytes::copy_from_slice(&(s.unrouted as i64).to_be_bytes()),
                Bytes::copy_from_slice(&(s.batch_hits as i64).to_be_bytes()),
                Bytes::copy_from_slice(&(s.batch_misses as i64).to_be_bytes()),
            ]);
        }
    }
    let rows: Vec<Vec<Option<&[u8]>>> = owned.iter().map(|r| r.iter().map(|b| Some(&b[..])).collect()).collect();
    let metadata = ResultMetadata { columns_count: specs.len(), specs: Some(specs), ..Default::default() };
    Rows::from_raw(metadata, &rows)
        .map(ResultMessage::Rows)
        .map_err(|e| EmuError::Protocol(format!("building front_stats rows: {e}")))
}
