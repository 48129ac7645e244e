//! The session: connection pools to the cluster's nodes, the token ring
//! they route by, the prepared-statement cache, and the one `execute` for
//! every kind of statement.
//!
//! What the session knows of the cluster is one snapshot (the pools, local
//! nodes first, and the ring with its replica tables), replaced as a whole
//! when the topology or the schema is read again (by the control
//! connection's task, on events and periodically), so a request plans
//! against one consistent view without locking more than a pointer copy.
//! Each pool keeps its connections in per-shard slots, refilled in the
//! background and watched for closing.
//!
//! This module holds the session handle, its shared state and what it
//! tells of itself; the rest, one concept a module:
//!
//! - `config`: [`SessionConfig`] and [`SessionBuilder`];
//! - `cluster_info`: the cluster as one object ([`ClusterInfo`], [`Session::cluster_state`]);
//! - `connect`: opening a session;
//! - `snapshot`: the cluster snapshot (pools, ring, replica tables);
//! - `plan`: the per-request query plan (which node, which shard);
//! - `request`: one request, from `Session::execute` to its result: its
//!   settings resolved once, speculative execution, retries, each attempt on
//!   the connection the plan picked;
//! - `prepare`: preparing statements, once per text, on every node;
//! - `prepared_cache`: the session's cache of them, bounded or not;
//! - `keyspace`: `USE` on every connection;
//! - `refill`: keeping every pool filled, watching its connections;
//! - `refresh`: topology and schema refresh, schema agreement;
//! - `control`: the control connection and the server events;
//! - `pager`: paging through a result;
//! - [`row_stream`]: every row of a result as a stream, the next page fetched ahead;
//! - [`trace`]: reading the trace of a request sent with tracing on;
//! - [`schema`]: the schema metadata snapshot.

mod cluster_info;
mod config;
mod connect;
mod control;
mod keyspace;
mod pager;
mod plan;
mod prepare;
mod prepared_cache;
mod refill;
mod refresh;
mod request;
pub mod row_stream;
pub mod schema;
mod snapshot;
pub mod trace;

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, RwLock};

use shardwise_protocol::token::Token;
use tokio::sync::{broadcast, watch};

pub use cluster_info::{ClusterInfo, NodeState, TokenError};
pub use config::{PoolSize, SessionBuilder, SessionConfig};
pub use pager::Pager;
pub use row_stream::{RowStream, RowStreamError};
pub use schema::Schema;
pub use trace::{TracingEvent, TracingInfo, TracingInfoError, TracingInfoFetch};

// Configuration the session is given, defined below it (the statements and
// the pools read them too); kept here under their former paths.
pub use crate::affinity::ConnectionAffinity;
pub use crate::profile::{ExecutionProfile, ExecutionProfileHandle, SpeculativePolicy};

use crate::cluster::{NodeInfo, ReplicationStrategy};
use crate::connection::Connection;
use crate::events::SessionEvent;
use crate::metrics::{Metrics, MetricsSnapshot};
use crate::statement::PreparedStatement;
use refresh::Partitioners;
use snapshot::ClusterState;

/// What every clone of a [`Session`] shares; background tasks hold it
/// weakly, so that they end with the last clone.
pub(crate) struct SessionInner {
    config: SessionConfig,
    /// The worker threads of the runtime the session connected on, which
    /// size its pools ([`SessionConfig::connections_per_node`]).
    workers: usize,
    /// The runtime the session connected on: its background tasks (pool
    /// refills and the connections they open, connection watchers) run
    /// there, whichever runtime a request that started them runs on. A
    /// refill started by a request on a short-lived runtime (a CDC
    /// worker's thread) would otherwise leave connections in the pool whose
    /// tasks died with that runtime: nothing read their answers.
    runtime: tokio::runtime::Handle,
    /// Read by every request on whichever worker it runs: an `ArcSwap`
    /// reads it without writing a word other workers read (a lock's or a
    /// reference count's), so requests on two workers do not contend here.
    state: arc_swap::ArcSwap<ClusterState>,
    /// Replication of every keyspace, as last read.
    strategies: RwLock<Arc<HashMap<String, ReplicationStrategy>>>,
    partitioners: RwLock<Partitioners>,
    /// One topology or schema refresh at a time.
    refresh_lock: tokio::sync::Mutex<()>,
    /// The node of the control connection.
    control: Mutex<Option<SocketAddr>>,
    /// Prepared statements by (keyspace in effect when prepared, text).
    prepared: prepared_cache::PreparedCache<PreparedStatement>,
    keyspace: RwLock<Option<String>>,
    /// Tablets learned from the servers' answers.
    tablets: crate::cluster::tablets::TabletMap,
    /// The schema metadata, once asked for ([`Session::schema`]).
    schema: RwLock<Option<Arc<schema::Schema>>>,
    /// Schema metadata reads take turns (a later read is never replaced by
    /// an earlier one).
    schema_reads: tokio::sync::Mutex<()>,
    metrics: Metrics,
    events: broadcast::Sender<SessionEvent>,
    /// The client routes followed (also the session's address
    /// translator), when configured.
    routes: Option<Arc<crate::cluster::ClientRoutes>>,
    /// The cluster's name, as the contact point said it.
    cluster_name: Option<Arc<str>>,
    /// Dropped with the session: tells background tasks to stop.
    shutdown: watch::Sender<()>,
}

impl SessionInner {
    fn emit(&self, event: SessionEvent) {
        let _ = self.events.send(event);
    }
}

/// A session: the entry point for executing statements. Cheap to clone.
#[derive(Clone)]
pub struct Session {
    inner: Arc<SessionInner>,
}

impl std::fmt::Debug for Session {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Session").field("nodes", &self.nodes()).finish()
    }
}

impl Session {
    /// Session and database events. Subscribe early: events sent before
    /// subscribing are not replayed.
    pub fn events(&self) -> broadcast::Receiver<SessionEvent> {
        self.inner.events.subscribe()
    }

    /// The session's default execution profile handle, when it was built
    /// with one ([`SessionBuilder::default_execution_profile_handle`]):
    /// re-point it to change the session's defaults at run time.
    pub fn default_execution_profile_handle(&self) -> Option<&ExecutionProfileHandle> {
        self.inner.config.default_profile_handle.as_ref()
    }

    /// The session's settings.
    pub fn config(&self) -> &SessionConfig {
        &self.inner.config
    }

    /// The nodes this session has connection pools for (local ones first).
    pub fn nodes(&self) -> Vec<SocketAddr> {
        self.state().nodes.iter().map(|n| n.addr).collect()
    }

    /// The nodes this session has pools for that count as up (an open
    /// connection, and no DOWN event since).
    pub fn up_nodes(&self) -> Vec<SocketAddr> {
        self.state().nodes.iter().filter(|n| n.is_up() && n.slots.has_open()).map(|n| n.addr).collect()
    }

    /// The open connections to every node (for tools that need to pick one).
    pub fn connections(&self) -> Vec<Connection> {
        self.state().nodes.iter().flat_map(|n| n.slots.open_connections()).collect()
    }

    /// The open connections to the node at `node` (its client address as
    /// [`Session::nodes`] lists it), only those served by `shard` when
    /// given.
    pub fn node_connections(&self, node: SocketAddr, shard: Option<u16>) -> Vec<Connection> {
        let state = self.state();
        let Some(pool) = state.pool(node) else { return Vec::new() };
        pool.slots.open_connections().into_iter().filter(|c| shard.is_none_or(|s| c.shard() == s)).collect()
    }

    /// The shard of the node at `node` that owns `token`: `None` when the
    /// node is unknown or not sharded.
    pub fn shard_of(&self, node: SocketAddr, token: Token) -> Option<u16> {
        let state = self.state();
        let pool = state.pool(node)?;
        pool.slots.open_connections().iter().find_map(|c| c.sharding().map(|s| s.sharder().shard_of(token)))
    }

    /// The node the control connection (which receives server events) is
    /// on, if it is registered.
    pub fn control_node(&self) -> Option<SocketAddr> {
        *self.inner.control.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The nodes of the cluster as the last topology reading found them
    /// (ignored ones included); empty without topology discovery.
    pub fn topology(&self) -> Vec<NodeInfo> {
        self.state().infos.clone()
    }

    /// The node at `addr` (the address the driver connects to, as a
    /// [`Coordinator`](crate::Coordinator) names it) as the last topology
    /// reading found it: its host id, datacenter and rack; `None` for an
    /// address it did not find, and without topology discovery.
    pub fn node_info(&self, addr: SocketAddr) -> Option<NodeInfo> {
        self.with_state(|state| state.infos.iter().find(|n| n.address == addr).cloned())
    }

    /// A copy of the counters, request rates and latency histograms.
    pub fn metrics(&self) -> MetricsSnapshot {
        self.inner.metrics.snapshot(&self.state().nodes)
    }
}
