//! The state every connection of every emulated node shares ([`Shared`]):
//! the configuration, the sharder, per-node counters, prepared statements
//! and the CDC registry here; the parts with reactions of their own in
//! submodules that own their maps:
//!
//! - `cdc_ddl`: CDC DDL (log tables created, mirrored, dropped; options kept);
//! - [`tablets`]: tablet keyspaces, maps, `system.tablets` rows, stream sets, resizes;
//! - `generations`: the CDC generations published;
//! - `schema_cache`: table schemas read for log synthesis and LWT answers;
//! - `client_routes`: `system.client_routes` and its change event.
//!
//! It sits below the front and the proxy: connections reach it through an
//! `Arc`, and it imports neither.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU16, AtomicU32, Ordering};
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use shardwise_protocol::sharding::{Sharder, BIASED_TOKEN_ROUND_ROBIN};
use shardwise_protocol::tablets::TABLETS_ROUTING_V2;
use shardwise_protocol::token::Partitioner;

use crate::admin::Admin;
use crate::cdc::Registry;
use crate::cdclog::dml::Statement;
use crate::cdclog::writer::LogWriter;
use crate::clock::now_micros;
use crate::config::FrontConfig;
use crate::delay_line::DelayLine;
use crate::stats::{Counters, FrontStats, NodeCounters};
use crate::tombstone_gc::TombstoneGc;

mod cdc_ddl;
pub(crate) mod client_routes;
mod generations;
mod schema_cache;
pub(crate) mod tablets;

pub(crate) use client_routes::RouteListeners;
pub(crate) use generations::Generations;
pub(crate) use schema_cache::SchemaCache;
pub(crate) use tablets::{Resize, TabletKeyspace, Tablets, MAX_EMULATED_TABLETS};

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
    /// A `BEGIN ... BATCH` text: answered without Cassandra's warnings.
    pub(crate) is_batch: bool,
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
    /// The CDC generations published so far.
    pub(crate) generations: Generations,
    pub(crate) admin: Admin,
    pub(crate) delay: Option<DelayLine>,
    /// Table schemas read for log synthesis and LWT answers (dropped on DDL).
    pub(crate) schemas: SchemaCache,
    /// Connections writing log rows and reading images.
    pub(crate) log_writer: LogWriter,
    /// Random bits for timeuuids.
    pub(crate) rng: std::sync::atomic::AtomicU64,
    /// The last write timestamp the front assigned (µs), so that the
    /// timestamps it assigns are unique and increasing.
    pub(crate) last_timestamp: std::sync::atomic::AtomicI64,
    /// Tablets: keyspaces, maps, stream sets, hints, index tables.
    pub(crate) tablets: Tablets,
    /// The `tombstone_gc` options given to tables (base or log) by
    /// `(keyspace, table)`; a table not here has ScyllaDB's default
    /// ([`crate::tombstone_gc`]).
    pub(crate) tombstone_gc: Mutex<HashMap<(String, String), TombstoneGc>>,
    /// Whether the `caching` last given to a table is enabled (ScyllaDB's
    /// `'enabled'` key, which Cassandra has not), by `(keyspace, table)`;
    /// in memory only: a table not here is judged by its caching (a CDC
    /// log caching nothing shows ScyllaDB's disabled caching).
    pub(crate) caching_enabled: Mutex<HashMap<(String, String), bool>>,
    /// The connections registered for `CLIENT_ROUTES_CHANGE`.
    pub(crate) route_listeners: RouteListeners,
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
            // Result metadata ids on v4 (docs/protocol.md §1.8; ScyllaDB's
            // docs/dev/protocol-extensions.md, "Negotiate sending metadata id").
            one("SCYLLA_USE_METADATA_ID", String::new()),
        ];
        if self.config.strongly_consistent_tables {
            v.push(one(TABLETS_ROUTING_V2, String::new()));
        }
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

    /// Keeps the `tombstone_gc` a CREATE or ALTER gave `keyspace.table`
    /// (in memory and in the front's keyspace).
    pub(crate) async fn set_tombstone_gc(
        &self,
        keyspace: &str,
        table: &str,
        options: TombstoneGc,
    ) -> Result<(), (i32, String)> {
        if let Ok(mut m) = self.tombstone_gc.lock() {
            m.insert((keyspace.to_string(), table.to_string()), options);
        }
        crate::system_tables::save_tombstone_gc(&self.admin, self.emu(), keyspace, table, options)
            .await
            .map_err(crate::EmuError::code_and_message)
    }

    /// The `tombstone_gc` of `keyspace.table` as ScyllaDB would show it:
    /// the one given, else the default for a base table or a CDC log.
    pub(crate) fn tombstone_gc_of(&self, keyspace: &str, table: &str, log: bool) -> TombstoneGc {
        let given =
            self.tombstone_gc.lock().ok().and_then(|m| m.get(&(keyspace.to_string(), table.to_string())).copied());
        given.unwrap_or_else(|| TombstoneGc::default_for(log))
    }

    /// Keeps whether the `caching` a CREATE or ALTER gave `keyspace.table`
    /// is enabled.
    pub(crate) fn set_caching_enabled(&self, keyspace: &str, table: &str, enabled: bool) {
        if let Ok(mut m) = self.caching_enabled.lock() {
            m.insert((keyspace.to_string(), table.to_string()), enabled);
        }
    }

    /// Whether the `caching` given to `keyspace.table` is enabled, when one
    /// was given through the front.
    pub(crate) fn caching_enabled_of(&self, keyspace: &str, table: &str) -> Option<bool> {
        self.caching_enabled.lock().ok()?.get(&(keyspace.to_string(), table.to_string())).copied()
    }

    /// Forgets the `tombstone_gc` and caching flag of a dropped table
    /// (`Some`) or of every table of a dropped keyspace, in memory (the rows in the front's
    /// keyspace go with the table's others: `system_tables::forget_table`).
    fn forget_tombstone_gc(&self, keyspace: &str, table: Option<&str>) {
        if let Ok(mut m) = self.tombstone_gc.lock() {
            m.retain(|(k, t), _| !(k == keyspace && table.is_none_or(|table| table == t)));
        }
        if let Ok(mut m) = self.caching_enabled.lock() {
            m.retain(|(k, t), _| !(k == keyspace && table.is_none_or(|table| table == t)));
        }
    }
}
