//! The state every connection of every emulated node shares ([`Shared`]):
//! the configuration, the sharder, per-node counters, prepared statements,
//! the CDC registry, generations, schema caches and tablet maps, and the
//! schema reactions (CDC DDL, tablets, generations) that change them.
//! It sits below the front and the proxy: connections reach it through an
//! `Arc`, and it imports neither.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU16, AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use shardwise_protocol::response::{SchemaChange, SchemaChangeTarget, SchemaChangeType};
use shardwise_protocol::sharding::{Sharder, BIASED_TOKEN_ROUND_ROBIN};
use shardwise_protocol::token::Partitioner;

use crate::admin::{self, lit, Admin};
use crate::cdc::{self, log_table_name, BaseColumn, ColumnKind, Registry, META_COLUMNS};
use crate::cdclog::dml::Statement;
use crate::cdclog::schema::TableSchema;
use crate::cdclog::writer::LogWriter;
use crate::clock::{now_micros, now_ms};
use crate::config::{FrontConfig, TabletsMode};
use crate::delay_line::DelayLine;
use crate::error::EmuError;
use crate::generation::{self, Generation};
use crate::stats::{inc, Counters, FrontStats, NodeCounters};
use crate::tablet_streams::TabletStreams;
use crate::tablets::TabletMap;
use crate::vector_index::IndexDdl;
use crate::{system_tables, CdcOptions};

/// What the front learned from a PREPARED answer.
#[derive(Debug, Clone)]
pub(crate) struct StatementInfo {
    pub(crate) pk_indexes: Vec<u16>,
    /// The partition key is one column bound as a list (`pk IN ?`).
    pub(crate) in_list: bool,
    pub(crate) partitioner: Partitioner,
    /// The statement, when it is DML (for CDC log synthesis).
    pub(crate) dml: Option<Arc<Statement>>,
    /// The keyspace of its unqualified table names.
    pub(crate) keyspace: Option<String>,
    /// It was prepared while a `USE` was in flight and nothing in the
    /// answer named its keyspace: `keyspace` is a guess.
    pub(crate) keyspace_changing: bool,
    /// DML the front's parser could not read: the text and why (the CDC
    /// write guard refuses it when it may write a CDC table).
    pub(crate) unparsed: Option<(String, String)>,
    /// A `USE` statement: its execution changes the connection's keyspace.
    pub(crate) is_use: bool,
    /// The table of its bound columns (keyspace, table), when it has any.
    pub(crate) table: Option<(String, String)>,
}

pub(crate) struct NodeState {
    pub(crate) counters: NodeCounters,
    pub(crate) shard_aware: SocketAddr,
    /// The port SUPPORTED names as shard-aware, when not `shard_aware`'s
    /// (0): see [`FrontHandle::advertise_shard_aware_port`].
    pub(crate) advertised_shard_aware_port: AtomicU16,
    pub(crate) host_id: Option<uuid::Uuid>,
    pub(crate) rr: AtomicU32,
}

pub(crate) struct Shared {
    pub(crate) config: FrontConfig,
    pub(crate) sharder: Sharder,
    pub(crate) nodes: Vec<NodeState>,
    pub(crate) counters: Counters,
    pub(crate) prepared: Mutex<HashMap<Bytes, Arc<StatementInfo>>>,
    pub(crate) registry: Mutex<Registry>,
    pub(crate) generations: Mutex<Vec<Generation>>,
    pub(crate) admin: Admin,
    pub(crate) delay: Option<DelayLine>,
    /// Schemas of CDC tables, for log synthesis (dropped on DDL).
    pub(crate) cdc_schemas: Mutex<HashMap<(String, String), Arc<TableSchema>>>,
    /// Schemas of other tables written with conditions (for Scylla's LWT
    /// answer; dropped on DDL).
    pub(crate) table_schemas: Mutex<HashMap<(String, String), Arc<TableSchema>>>,
    /// Connections writing log rows and reading images.
    pub(crate) log_writer: LogWriter,
    /// Random bits for timeuuids.
    pub(crate) rng: std::sync::atomic::AtomicU64,
    /// The last write timestamp the front assigned (µs), so that the
    /// timestamps it assigns are unique and increasing.
    pub(crate) last_timestamp: std::sync::atomic::AtomicI64,
    /// Keyspaces with tablets: their `initial` option and replication factor.
    pub(crate) tablet_keyspaces: Mutex<HashMap<String, TabletKeyspace>>,
    /// The tablet map of each table of those keyspaces, made on first use.
    pub(crate) tablet_maps: Mutex<HashMap<(String, String), Arc<TabletMap>>>,
    /// The id and resize sequence number of each table whose map is in
    /// `system.tablets`.
    pub(crate) tablet_tables: Mutex<HashMap<(String, String), (uuid::Uuid, i64)>>,
    /// The CDC stream sets of CDC tables in tablets keyspaces (by base table).
    pub(crate) tablet_streams: Mutex<HashMap<(String, String), TabletStreams>>,
    /// Held through a resize.
    pub(crate) resize_lock: tokio::sync::Mutex<()>,
    /// Per-table `tablets = {...}` hints ([`crate::tablets_ddl`]).
    pub(crate) tablet_options: Mutex<HashMap<(String, String), crate::tablet_options::TabletOptions>>,
    /// The hidden tables of secondary indexes in tablets keyspaces, as
    /// ScyllaDB has them (`<index>_index`, [`crate::tablets_ddl`]): by
    /// (keyspace, index table), the base table and the table id the front
    /// gave it.
    pub(crate) index_tables: Mutex<HashMap<(String, String), (String, uuid::Uuid)>>,
}

/// The most tablets a table gets from `min_tablet_count` (the front writes
/// every tablet and stream to its stand-in tables on each resize).
pub const MAX_EMULATED_TABLETS: u32 = 4096;

/// A change of a table's tablet count, as Scylla's load balancer makes it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Resize {
    /// Every tablet halved.
    Split,
    /// Each pair of sibling tablets joined.
    Merge,
}

/// A keyspace created with tablets.
#[derive(Debug, Clone, Copy)]
pub(crate) struct TabletKeyspace {
    /// The `initial` tablets option (0: not given).
    pub(crate) initial: i32,
    /// Its replication factor.
    pub(crate) rf: usize,
}

impl NodeState {
    pub(crate) fn advertised_shard_aware_port(&self) -> u16 {
        match self.advertised_shard_aware_port.load(Ordering::Relaxed) {
            0 => self.shard_aware.port(),
            port => port,
        }
    }
}

impl Shared {
    pub(crate) fn stats(&self) -> FrontStats {
        let nodes: Vec<&NodeCounters> = self.nodes.iter().map(|n| &n.counters).collect();
        self.counters.snapshot(&nodes)
    }

    /// Scylla's SUPPORTED for a connection on `shard` of `node`.
    pub(crate) fn supported(&self, node: usize, shard: u16) -> Vec<(String, Vec<String>)> {
        let one = |k: &str, v: String| (k.to_string(), vec![v]);
        let n = &self.nodes[node];
        let mut v = vec![
            one("COMPRESSION", "lz4".into()),
            one("CQL_VERSION", "3.3.1".into()),
            one("SCYLLA_SHARD", shard.to_string()),
            one("SCYLLA_NR_SHARDS", self.sharder.nr_shards().to_string()),
            one("SCYLLA_PARTITIONER", Partitioner::Murmur3.class_name().into()),
            one("SCYLLA_SHARDING_ALGORITHM", BIASED_TOKEN_ROUND_ROBIN.into()),
            one("SCYLLA_SHARDING_IGNORE_MSB", self.sharder.ignore_msb().to_string()),
            one("SCYLLA_SHARD_AWARE_PORT", n.advertised_shard_aware_port().to_string()),
            one("SCYLLA_LWT_ADD_METADATA_MARK", "LWT_OPTIMIZATION_META_BIT_MASK=2147483648".into()),
            one("SCYLLA_RATE_LIMIT_ERROR", "ERROR_CODE=61440".into()),
            one("TABLETS_ROUTING_V1", String::new()),
        ];
        if let Some(id) = n.host_id {
            v.push(one("SCYLLA_HOST_ID", id.hyphenated().to_string()));
        }
        v
    }

    /// A write timestamp for a request that has none: now, but always above
    /// the last one assigned.
    pub(crate) fn next_timestamp(&self) -> i64 {
        let now = now_micros();
        let prev = self.last_timestamp.fetch_max(now, Ordering::Relaxed);
        if prev >= now {
            self.last_timestamp.fetch_add(1, Ordering::Relaxed) + 1
        } else {
            now
        }
    }

    pub(crate) fn partitioner_of(&self, keyspace: &str, table: &str) -> Partitioner {
        match self.registry.lock() {
            Ok(r) if r.is_log(keyspace, table) => Partitioner::Cdc,
            _ => Partitioner::Murmur3,
        }
    }

    /// The front that stands for the Cassandra node at `node`.
    pub(crate) fn front_address_of(&self, node: SocketAddr, default: usize) -> SocketAddr {
        self.nodes
            .iter()
            .find(|n| n.counters.upstream.ip() == node.ip())
            .map(|n| n.counters.front)
            .unwrap_or_else(|| SocketAddr::new(node.ip(), self.nodes[default].counters.front.port()))
    }

    fn emu(&self) -> &str {
        &self.config.emu_keyspace
    }

    /// The columns of a table that exists: on a cluster, the node the
    /// front's own connection uses may learn of a table just created
    /// through another node a moment later (no column yet), so the columns
    /// are read again until they show, for up to 20 s.
    async fn visible_columns(&self, keyspace: &str, table: &str) -> Result<Vec<BaseColumn>, EmuError> {
        let deadline = std::time::Instant::now() + Duration::from_secs(20);
        loop {
            let columns = self.base_columns(keyspace, table).await?;
            if !columns.is_empty() {
                return Ok(columns);
            }
            if std::time::Instant::now() >= deadline {
                return Err(EmuError::Server {
                    code: 0x0000,
                    message: format!("table {keyspace}.{table} did not reach every node within 20 s"),
                });
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    pub(crate) async fn base_columns(&self, keyspace: &str, table: &str) -> Result<Vec<BaseColumn>, EmuError> {
        let rows = self
            .admin
            .rows(&format!(
                "SELECT column_name, kind, position, type FROM system_schema.columns WHERE keyspace_name = {} AND table_name = {}",
                lit(keyspace),
                lit(table)
            ))
            .await?;
        Ok(rows
            .into_iter()
            .filter_map(|r| {
                // The hidden value column of a COMPACT STORAGE table with
                // only key columns (type `empty`): not a column to clients,
                // and not one Scylla's log has.
                if admin::text(&r[3]).is_some_and(|t| t == "empty") {
                    return None;
                }
                Some(BaseColumn {
                    name: admin::text(&r[0])?,
                    kind: ColumnKind::parse(&admin::text(&r[1])?)?,
                    position: r[2].as_ref().and_then(|v| v.as_i32()).unwrap_or(-1),
                    typ: admin::text(&r[3])?,
                })
            })
            .collect())
    }

    /// Creates (or re-attaches) the log of `keyspace.table` and records the options.
    async fn apply_cdc(&self, keyspace: &str, table: &str, options: CdcOptions, created: bool) -> Result<(), EmuError> {
        let log = log_table_name(table);
        let invalid = |message: String| EmuError::Server { code: 0x2200, message };
        if self.partitioner_of(keyspace, table) == Partitioner::Cdc {
            return Err(invalid(format!(
                "Cannot create a CDC log for a table {keyspace}.{table}, because creating nested CDC logs is not allowed"
            )));
        }
        if options.enabled {
            let columns = self.visible_columns(keyspace, table).await?;
            let log_exists = !self.base_columns(keyspace, &log).await?.is_empty();
            if log_exists {
                if self.partitioner_of(keyspace, &log) != Partitioner::Cdc {
                    return Err(invalid(format!(
                        "Cannot create CDC log table for table {keyspace}.{table} because a table of name {keyspace}.{log} already exists"
                    )));
                }
                self.sync_log(keyspace, table).await?;
            } else {
                let ddl = cdc::log_table_ddl(keyspace, table, &columns, &options)
                    .map_err(|m| invalid(format!("Cannot create CDC log for table {keyspace}.{table}. {m}")))?;
                self.admin.query(&ddl).await?;
                inc(&self.counters.cdc_logs_created);
                system_tables::record_table(&self.admin, self.emu(), keyspace, &log, Some(Partitioner::Cdc)).await?;
                if let Ok(mut r) = self.registry.lock() {
                    r.logs.insert((keyspace.to_string(), log.clone()));
                }
            }
        }
        if options.enabled {
            self.start_tablet_streams(keyspace, table).await?;
        }
        system_tables::save_cdc_options(&self.admin, self.emu(), keyspace, table, &options).await?;
        if created {
            system_tables::record_table(&self.admin, self.emu(), keyspace, table, None).await?;
        }
        if let Ok(mut r) = self.registry.lock() {
            r.tables.insert((keyspace.to_string(), table.to_string()), options);
        }
        self.admin.wait_schema_agreement(Duration::from_secs(20)).await
    }

    /// Mirrors the base table's columns into its log (after ALTER TABLE).
    async fn sync_log(&self, keyspace: &str, table: &str) -> Result<(), EmuError> {
        let log = log_table_name(table);
        let want = cdc::log_columns(&self.base_columns(keyspace, table).await?)
            .map_err(|m| EmuError::Server { code: 0x2200, message: m })?;
        let have: Vec<String> = self.base_columns(keyspace, &log).await?.into_iter().map(|c| c.name).collect();
        let add: Vec<String> =
            want.iter().filter(|(n, _)| !have.contains(n)).map(|(n, t)| format!("{} {t}", cdc::quote(n))).collect();
        let drop: Vec<String> = have
            .iter()
            .filter(|n| !META_COLUMNS.iter().any(|(m, _)| m == n) && !want.iter().any(|(w, _)| w == *n))
            .map(|n| cdc::quote(n))
            .collect();
        let target = format!("{}.{}", cdc::quote(keyspace), cdc::quote(&log));
        if !add.is_empty() {
            self.admin.query(&format!("ALTER TABLE {target} ADD ({})", add.join(", "))).await?;
        }
        if !drop.is_empty() {
            self.admin.query(&format!("ALTER TABLE {target} DROP ({})", drop.join(", "))).await?;
        }
        Ok(())
    }

    /// Runs after a schema statement succeeded, before the client sees the answer.
    pub(crate) async fn on_schema_change(
        &self,
        change: &SchemaChange,
        cdc: Option<CdcOptions>,
    ) -> Result<(), (i32, String)> {
        self.schema_change(change, cdc).await.map_err(EmuError::code_and_message)
    }

    async fn schema_change(&self, change: &SchemaChange, cdc: Option<CdcOptions>) -> Result<(), EmuError> {
        match (&change.target, change.change) {
            (SchemaChangeTarget::Table { keyspace, name }, SchemaChangeType::Dropped) => {
                self.forget_tablets(keyspace, Some(name)).await?
            }
            (SchemaChangeTarget::Keyspace { keyspace }, SchemaChangeType::Dropped) => {
                self.forget_tablets(keyspace, None).await?
            }
            _ => {}
        }
        match &change.target {
            SchemaChangeTarget::Table { keyspace, name } => self.forget_cdc_schema(keyspace, name),
            SchemaChangeTarget::Keyspace { keyspace } => {
                if let Ok(mut s) = self.cdc_schemas.lock() {
                    s.retain(|(k, _), _| k != keyspace);
                }
                if let Ok(mut s) = self.table_schemas.lock() {
                    s.retain(|(k, _), _| k != keyspace);
                }
            }
            // A changed user type changes the tables using it.
            _ => {
                if let Ok(mut s) = self.cdc_schemas.lock() {
                    s.clear();
                }
                if let Ok(mut s) = self.table_schemas.lock() {
                    s.clear();
                }
            }
        }
        if let (SchemaChangeTarget::Table { keyspace, name }, SchemaChangeType::Created) =
            (&change.target, change.change)
        {
            if let Some(map) = self.tablets_of(keyspace, name) {
                self.publish_tablets(keyspace, name, &map, false).await?;
            }
        }
        // CREATE INDEX and DROP INDEX answer as an update of the base table.
        if let (SchemaChangeTarget::Table { keyspace, name }, SchemaChangeType::Created | SchemaChangeType::Updated) =
            (&change.target, change.change)
        {
            self.sync_index_tablets(keyspace, name).await?;
        }
        match (&change.target, change.change) {
            (SchemaChangeTarget::Table { keyspace, name }, SchemaChangeType::Created) => match cdc {
                Some(options) => {
                    if let Err(e) = self.apply_cdc(keyspace, name, options, true).await {
                        // Scylla creates both tables or neither.
                        let _ = self
                            .admin
                            .query(&format!("DROP TABLE IF EXISTS {}.{}", cdc::quote(keyspace), cdc::quote(name)))
                            .await;
                        return Err(e);
                    }
                    Ok(())
                }
                None => system_tables::record_table(&self.admin, self.emu(), keyspace, name, None).await,
            },
            (SchemaChangeTarget::Table { keyspace, name }, SchemaChangeType::Updated) => match cdc {
                Some(options) => {
                    // The user's own options: CDC is no longer the index's doing.
                    if let Ok(mut r) = self.registry.lock() {
                        r.cdc_by_index.remove(&(keyspace.clone(), name.clone()));
                    }
                    self.apply_cdc(keyspace, name, options, false).await
                }
                None => {
                    let enabled =
                        self.registry.lock().ok().and_then(|r| r.options(keyspace, name)).is_some_and(|o| o.enabled);
                    if enabled {
                        self.sync_log(keyspace, name).await?;
                    }
                    Ok(())
                }
            },
            (SchemaChangeTarget::Table { keyspace, name }, SchemaChangeType::Dropped) => {
                let had_cdc = self.registry.lock().ok().and_then(|r| r.options(keyspace, name)).is_some();
                if had_cdc {
                    let log = log_table_name(name);
                    self.admin
                        .query(&format!("DROP TABLE IF EXISTS {}.{}", cdc::quote(keyspace), cdc::quote(&log)))
                        .await?;
                    system_tables::forget_table(&self.admin, self.emu(), keyspace, &log).await?;
                    if let Ok(mut r) = self.registry.lock() {
                        r.tables.remove(&(keyspace.clone(), name.clone()));
                        r.logs.remove(&(keyspace.clone(), log));
                    }
                }
                if let Ok(mut r) = self.registry.lock() {
                    r.vector_indexes.retain(|(k, _), t| !(k == keyspace && t == name));
                    r.cdc_by_index.remove(&(keyspace.clone(), name.clone()));
                }
                system_tables::forget_table(&self.admin, self.emu(), keyspace, name).await
            }
            (SchemaChangeTarget::Keyspace { keyspace }, SchemaChangeType::Dropped) => {
                if let Ok(mut r) = self.registry.lock() {
                    r.tables.retain(|(k, _), _| k != keyspace);
                    r.logs.retain(|(k, _)| k != keyspace);
                    r.vector_indexes.retain(|(k, _), _| k != keyspace);
                    r.cdc_by_index.retain(|(k, _)| k != keyspace);
                }
                system_tables::forget_keyspace(&self.admin, self.emu(), keyspace).await
            }
            _ => Ok(()),
        }
    }

    /// Runs after Cassandra created or dropped an index: a vector index
    /// turns CDC on for its table, and dropping the table's last one turns
    /// it off again if the index turned it on (`crate::vector_index`).
    pub(crate) async fn on_vector_index(&self, change: &SchemaChange, ddl: IndexDdl) -> Result<(), (i32, String)> {
        let SchemaChangeTarget::Table { keyspace, name } = &change.target else { return Ok(()) };
        let (keyspace, table) = (keyspace.clone(), name.clone());
        let key = (keyspace.clone(), table.clone());
        let (options, enable) = {
            let Ok(mut r) = self.registry.lock() else { return Ok(()) };
            let current = r.options(&keyspace, &table);
            match ddl {
                IndexDdl::Create { index, .. } => {
                    r.vector_indexes.insert((keyspace.clone(), index), table.clone());
                    if current.is_some_and(|o| o.enabled) {
                        return Ok(());
                    }
                    r.cdc_by_index.insert(key);
                    (current.unwrap_or_default(), true)
                }
                IndexDdl::Drop { index, .. } => {
                    if r.vector_indexes.remove(&(keyspace.clone(), index)).is_none()
                        || r.has_vector_index(&keyspace, &table)
                        || !r.cdc_by_index.contains(&key)
                    {
                        return Ok(());
                    }
                    match current {
                        Some(o) => (o, false),
                        None => return Ok(()),
                    }
                }
            }
        };
        let options = CdcOptions { enabled: enable, ..options };
        self.apply_cdc(&keyspace, &table, options, false).await.map_err(EmuError::code_and_message)
    }

    /// Records a keyspace created with tablets, as Scylla's
    /// `system_schema.scylla_keyspaces` shows it (`initial_tablets`; no row
    /// for a keyspace on vnodes), and gives its tables tablet maps.
    pub(crate) async fn record_tablets(&self, keyspace: &str, initial: i32) -> Result<(), (i32, String)> {
        let cql = format!(
            "INSERT INTO {}.scylla_keyspaces (keyspace_name, initial_tablets) VALUES ({}, {initial})",
            self.emu(),
            lit(keyspace)
        );
        self.admin.query(&cql).await.map(|_| ()).map_err(EmuError::code_and_message)?;
        let rf = system_tables::replication_factor(&self.admin, keyspace).await.map_err(EmuError::code_and_message)?;
        if let Ok(mut k) = self.tablet_keyspaces.lock() {
            k.insert(keyspace.to_owned(), TabletKeyspace { initial, rf });
        }
        Ok(())
    }

    /// After a `CREATE KEYSPACE` that said nothing of tablets: tablets when
    /// the front's [`TabletsMode`] gives them to new keyspaces and the
    /// keyspace's strategy is tablets-aware (NetworkTopologyStrategy; a
    /// SimpleStrategy keyspace stays on vnodes, as on Scylla).
    pub(crate) async fn default_tablets(&self, keyspace: &str) -> Result<(), (i32, String)> {
        if self.config.tablets_mode != TabletsMode::Enabled {
            return Ok(());
        }
        let class =
            system_tables::replication_class(&self.admin, keyspace).await.map_err(EmuError::code_and_message)?;
        if class.is_some_and(|c| c.ends_with("NetworkTopologyStrategy")) {
            self.record_tablets(keyspace, 0).await?;
        }
        Ok(())
    }

    /// The `initial` tablets option of a keyspace with tablets (0: not
    /// given); `None` for a keyspace on vnodes.
    pub(crate) fn initial_tablets(&self, keyspace: &str) -> Option<i32> {
        self.tablet_keyspaces.lock().ok()?.get(keyspace).map(|k| k.initial)
    }

    /// Whether `keyspace` was created with tablets.
    pub(crate) fn uses_tablets(&self, keyspace: &str) -> bool {
        self.tablet_keyspaces.lock().is_ok_and(|k| k.contains_key(keyspace))
    }

    /// The tablet map of `keyspace.table` when its keyspace uses tablets
    /// (made on first use: [`TabletMap::new`]).
    pub(crate) fn tablets_of(&self, keyspace: &str, table: &str) -> Option<Arc<TabletMap>> {
        let ks = *self.tablet_keyspaces.lock().ok()?.get(keyspace)?;
        // A CDC log is co-located with its base table: the base's tablets.
        let table = match table.strip_suffix(cdc::LOG_SUFFIX) {
            Some(base) if self.registry.lock().ok()?.logs.contains(&(keyspace.to_owned(), table.to_owned())) => base,
            _ => table,
        };
        let mut maps = self.tablet_maps.lock().ok()?;
        if let Some(m) = maps.get(&(keyspace.to_owned(), table.to_owned())) {
            return Some(m.clone());
        }
        let shards = self.sharder.nr_shards().get();
        let count = match usize::try_from(ks.initial) {
            Ok(n) if n > 0 => n,
            _ => self.nodes.len() * usize::from(shards),
        };
        let count = self.hinted_tablet_count(keyspace, table, count);
        let map = Arc::new(TabletMap::new(count, self.nodes.len(), shards, ks.rf));
        maps.insert((keyspace.to_owned(), table.to_owned()), map.clone());
        Some(map)
    }

    /// Writes the `system.tablets` rows of `keyspace.table` from `map`
    /// (with the next resize sequence number when `resized`).
    async fn publish_tablets(
        &self,
        keyspace: &str,
        table: &str,
        map: &TabletMap,
        resized: bool,
    ) -> Result<(), EmuError> {
        let key = (keyspace.to_owned(), table.to_owned());
        let known = self.tablet_tables.lock().ok().and_then(|t| t.get(&key).copied());
        let (id, seq) = match known {
            Some((id, seq)) => (id, if resized { seq + 1 } else { seq }),
            None => match self.tablet_table_id(keyspace, table).await? {
                Some(id) => (id, i64::from(resized)),
                None => return Ok(()),
            },
        };
        let host_id = |n: usize| self.nodes.get(n).and_then(|n| n.host_id);
        system_tables::write_tablets(&self.admin, self.emu(), (keyspace, table, id), map, seq, host_id).await?;
        if let Ok(mut t) = self.tablet_tables.lock() {
            t.insert(key, (id, seq));
        }
        Ok(())
    }

    /// The id `system.tablets` names `keyspace.table` by: a table's or a
    /// materialized view's id in `system_schema`, or the id the front gave
    /// the hidden table of a secondary index.
    async fn tablet_table_id(&self, keyspace: &str, table: &str) -> Result<Option<uuid::Uuid>, EmuError> {
        if let Some(id) = system_tables::table_id(&self.admin, keyspace, table).await? {
            return Ok(Some(id));
        }
        if let Some(id) = system_tables::view_id(&self.admin, keyspace, table).await? {
            return Ok(Some(id));
        }
        Ok(self.index_tables.lock().ok().and_then(|t| t.get(&(keyspace.to_owned(), table.to_owned())).map(|x| x.1)))
    }

    /// Gives the secondary indexes of `keyspace.base` tablet maps and
    /// `system.tablets` rows, and takes them from dropped ones, when the
    /// keyspace uses tablets ([`crate::tablets_ddl`]).
    pub(crate) async fn sync_index_tablets(&self, keyspace: &str, base: &str) -> Result<(), EmuError> {
        if !self.uses_tablets(keyspace) {
            return Ok(());
        }
        let want = system_tables::index_tables(&self.admin, keyspace, base).await?;
        let have: Vec<String> = match self.index_tables.lock() {
            Ok(t) => {
                t.iter().filter(|((k, _), (b, _))| k == keyspace && b == base).map(|((_, n), _)| n.clone()).collect()
            }
            Err(_) => return Ok(()),
        };
        for gone in have.iter().filter(|n| !want.contains(n)) {
            self.forget_tablets(keyspace, Some(gone)).await?;
        }
        for new in want.iter().filter(|n| !have.contains(n)) {
            let mut random = generation::random_source();
            let id = uuid::Builder::from_random_bytes(
                [random().to_be_bytes(), random().to_be_bytes()].concat().try_into().unwrap_or([0; 16]),
            )
            .into_uuid();
            if let Ok(mut t) = self.index_tables.lock() {
                t.insert((keyspace.to_owned(), new.clone()), (base.to_owned(), id));
            }
            if let Some(map) = self.tablets_of(keyspace, new) {
                self.publish_tablets(keyspace, new, &map, false).await?;
            }
        }
        Ok(())
    }

    /// The first CDC stream set of `keyspace.table` when it is in a tablets
    /// keyspace and has none yet (CDC turned on), from now on.
    async fn start_tablet_streams(&self, keyspace: &str, table: &str) -> Result<(), EmuError> {
        let Some(map) = self.tablets_of(keyspace, table) else { return Ok(()) };
        let key = (keyspace.to_owned(), table.to_owned());
        let streams = match self.tablet_streams.lock() {
            Ok(mut all) if !all.contains_key(&key) => {
                let streams = TabletStreams::new(&map, now_ms(), &mut generation::random_source());
                all.insert(key, streams.clone());
                streams
            }
            _ => return Ok(()),
        };
        system_tables::write_stream_set(&self.admin, self.emu(), (keyspace, table), &streams, 0).await
    }

    /// A new CDC stream set for `keyspace.table` after its tablets became
    /// `map` (when it has CDC streams).
    async fn resize_tablet_streams(&self, keyspace: &str, table: &str, map: &TabletMap) -> Result<(), EmuError> {
        let key = (keyspace.to_owned(), table.to_owned());
        let streams = match self.tablet_streams.lock() {
            Ok(mut all) => match all.get_mut(&key) {
                Some(streams) => {
                    streams.resized(map, now_ms(), &mut generation::random_source());
                    streams.clone()
                }
                None => return Ok(()),
            },
            Err(_) => return Ok(()),
        };
        let last = streams.sets().len() - 1;
        system_tables::write_stream_set(&self.admin, self.emu(), (keyspace, table), &streams, last).await
    }

    /// Splits or merges the tablets of `keyspace.table`; the new map, or
    /// `None` when the table has no tablets or cannot resize that way.
    pub(crate) async fn resize_tablets(
        &self,
        keyspace: &str,
        table: &str,
        resize: Resize,
    ) -> Result<Option<Arc<TabletMap>>, EmuError> {
        // One resize at a time: the map, `system.tablets` and the stream
        // sets change together.
        let _resizing = self.resize_lock.lock().await;
        let is_log = self.registry.lock().is_ok_and(|r| r.logs.contains(&(keyspace.to_owned(), table.to_owned())));
        if is_log || system_tables::table_id(&self.admin, keyspace, table).await?.is_none() {
            // A log has its base table's tablets: resizing is the base's.
            return Ok(None);
        }
        let Some(old) = self.tablets_of(keyspace, table) else { return Ok(None) };
        let new = match resize {
            Resize::Split => old.split(),
            Resize::Merge => old.merge(),
        };
        let Some(new) = new.map(Arc::new) else { return Ok(None) };
        if let Ok(mut maps) = self.tablet_maps.lock() {
            maps.insert((keyspace.to_owned(), table.to_owned()), new.clone());
        }
        self.publish_tablets(keyspace, table, &new, true).await?;
        self.resize_tablet_streams(keyspace, table, &new).await?;
        Ok(Some(new))
    }

    async fn forget_tablets(&self, keyspace: &str, table: Option<&str>) -> Result<(), EmuError> {
        // A dropped base table takes its indexes' hidden tables with it.
        let indexes: Vec<String> = match self.index_tables.lock() {
            Ok(mut t) => {
                let gone: Vec<String> = t
                    .iter()
                    .filter(|((k, n), (b, _))| {
                        k == keyspace && table.is_none_or(|x| x == b.as_str() || x == n.as_str())
                    })
                    .map(|((_, n), _)| n.clone())
                    .collect();
                t.retain(|(k, n), _| !(k == keyspace && gone.contains(n)));
                gone
            }
            Err(_) => Vec::new(),
        };
        if let Some(base) = table {
            for index in indexes.iter().filter(|n| n.as_str() != base) {
                Box::pin(self.forget_tablets(keyspace, Some(index))).await?;
            }
        }
        if let Ok(mut maps) = self.tablet_maps.lock() {
            maps.retain(|(k, t), _| k != keyspace || table.is_some_and(|table| t != table));
        }
        if let Ok(mut o) = self.tablet_options.lock() {
            o.retain(|(k, t), _| k != keyspace || table.is_some_and(|table| t != table));
        }
        let gone: Vec<uuid::Uuid> = match self.tablet_tables.lock() {
            Ok(mut tables) => {
                let ids = tables
                    .iter()
                    .filter(|((k, t), _)| k == keyspace && table.is_none_or(|table| t == table))
                    .map(|(_, &(id, _))| id)
                    .collect();
                tables.retain(|(k, t), _| k != keyspace || table.is_some_and(|table| t != table));
                ids
            }
            Err(_) => Vec::new(),
        };
        for id in gone {
            self.admin.query(&format!("DELETE FROM {}.tablets WHERE table_id = {id}", self.emu())).await?;
        }
        let streams_gone: Vec<(String, String)> = match self.tablet_streams.lock() {
            Ok(mut all) => {
                let gone = all
                    .keys()
                    .filter(|(k, t)| k == keyspace && table.is_none_or(|table| t == table))
                    .cloned()
                    .collect();
                all.retain(|(k, t), _| k != keyspace || table.is_some_and(|table| t != table));
                gone
            }
            Err(_) => Vec::new(),
        };
        for (k, t) in streams_gone {
            system_tables::forget_stream_sets(&self.admin, self.emu(), &k, &t).await?;
        }
        if table.is_none() {
            if let Ok(mut k) = self.tablet_keyspaces.lock() {
                k.remove(keyspace);
            }
        }
        Ok(())
    }

    pub(crate) async fn create_generation(&self, timestamp_ms: i64) -> Result<Generation, EmuError> {
        let (ring, _) = system_tables::read_ring(&self.admin).await?;
        let g = Generation::build(timestamp_ms, &ring, self.sharder, &mut generation::random_source())
            .ok_or_else(|| EmuError::Protocol("the Cassandra ring has no tokens".into()))?;
        system_tables::write_generation(&self.admin, self.emu(), &g).await?;
        if let Ok(mut gens) = self.generations.lock() {
            gens.push(g.clone());
            gens.sort_by_key(|g| g.timestamp_ms);
        }
        Ok(g)
    }
}
