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

mod control;

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, RwLock, Weak};
use std::time::{Duration, Instant};

use shardwise_protocol::consistency::Consistency;
use shardwise_protocol::frame::ProtocolVersion;
use shardwise_protocol::request::{Query, QueryParameters};
use shardwise_protocol::response::{Response, ResponseMessage, ResultMessage};
use shardwise_protocol::token::{Partitioner, Token};
use shardwise_protocol::types::de::DeserializeRow;
use tokio::sync::{broadcast, watch};
use uuid::Uuid;

use crate::auth::{AuthenticatorProvider, PlainTextAuthenticator};
use crate::cluster::topology::{fetch_keyspaces, fetch_nodes, fetch_partitioners, TablePartitioners};
use crate::cluster::{DistancePolicy, NodeDistance, NodeInfo, ReplicaTable, ReplicationStrategy, TokenRing};
use crate::config::{Compression, ConnectionConfig};
use crate::connection::Connection;
use crate::error::{ConnectionError, ExecutionError, NewSessionError};
use crate::events::SessionEvent;
use crate::execute::{Executable, Params};
use crate::metrics::{Metrics, MetricsSnapshot};
use crate::pool::slots::Wanted;
use crate::pool::NodePool;
use crate::result::{PagingState, QueryResult};
use crate::retry::{DefaultRetryPolicy, RetryDecision, RetryPolicy};
use crate::statement::{PreparedStatement, Statement};

/// Speculative execution: for idempotent statements, start another attempt
/// on the next node when the first has not answered within `delay`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SpeculativePolicy {
    /// How long to wait before each extra attempt.
    pub delay: Duration,
    /// Extra attempts at most.
    pub max_extra: usize,
}

/// Session settings. Build with [`SessionBuilder`].
#[derive(Debug, Clone)]
pub struct SessionConfig {
    /// Contact points (`host:port`).
    pub known_nodes: Vec<String>,
    /// How connections are opened.
    pub connection: ConnectionConfig,
    /// Connections to each local node (see [`NodeDistance::Local`]): per
    /// shard on a sharded (Scylla) node, per node otherwise. When the
    /// distance policy names no local datacenter every node is local.
    pub connections_per_node: usize,
    /// Connections to each remote node (see [`NodeDistance::Remote`]): per
    /// shard on a sharded node, per node otherwise. Remote nodes are only
    /// fallbacks, so the default is 1. Ignored nodes get none.
    pub remote_connections_per_node: usize,
    /// Keyspace to `USE` on every connection.
    pub keyspace: Option<String>,
    /// Default consistency.
    pub consistency: Consistency,
    /// Default serial consistency.
    pub serial_consistency: Option<Consistency>,
    /// Default page size.
    pub page_size: i32,
    /// Default request timeout.
    pub request_timeout: Option<Duration>,
    /// Retry policy.
    pub retry_policy: Arc<dyn RetryPolicy>,
    /// Speculative execution, for idempotent statements.
    pub speculative: Option<SpeculativePolicy>,
    /// Wait for schema agreement after DDL.
    pub await_schema_agreement: bool,
    /// How long to wait for schema agreement.
    pub schema_agreement_timeout: Duration,
    /// Discover the cluster's nodes from the contact points and route by token.
    pub discover_topology: bool,
    /// Which nodes get connections, and in which order they are tried.
    pub distance: DistancePolicy,
    /// Re-read the topology and schema at this interval (besides after
    /// topology and status events); `None`: only after events.
    pub topology_refresh_interval: Option<Duration>,
    /// How long to wait after a topology or status event before re-reading
    /// the topology (events are hints, and the peers table of a joining
    /// node fills in over a moment); events within the delay share one
    /// refresh.
    pub topology_event_delay: Duration,
}

impl SessionConfig {
    /// How many connections a node at `distance` gets: per shard on a
    /// sharded node, per node otherwise; 0 for an ignored node.
    pub fn connections_for(&self, distance: NodeDistance) -> usize {
        match distance {
            NodeDistance::Local => self.connections_per_node,
            NodeDistance::Remote => self.remote_connections_per_node,
            NodeDistance::Ignored => 0,
        }
    }
}

impl Default for SessionConfig {
    fn default() -> Self {
        SessionConfig {
            known_nodes: Vec::new(),
            connection: ConnectionConfig::default(),
            connections_per_node: 1,
            remote_connections_per_node: 1,
            keyspace: None,
            consistency: Consistency::LocalQuorum,
            serial_consistency: Some(Consistency::LocalSerial),
            page_size: 5000,
            request_timeout: Some(Duration::from_secs(30)),
            retry_policy: Arc::new(DefaultRetryPolicy),
            speculative: None,
            await_schema_agreement: true,
            schema_agreement_timeout: Duration::from_secs(10),
            discover_topology: true,
            distance: DistancePolicy::default(),
            topology_refresh_interval: Some(Duration::from_secs(60)),
            topology_event_delay: Duration::from_secs(1),
        }
    }
}

/// Builds a [`Session`].
///
/// ```no_run
/// # async fn f() -> Result<(), Box<dyn std::error::Error>> {
/// use shardwise::{Compression, SessionBuilder};
///
/// let session = SessionBuilder::new()
///     .known_node("127.0.0.1:9042")
///     .compression(Compression::Lz4)
///     .user("cassandra", "cassandra")
///     .build()
///     .await?;
/// # let _ = session; Ok(()) }
/// ```
#[derive(Debug, Clone, Default)]
pub struct SessionBuilder {
    config: SessionConfig,
}

impl SessionBuilder {
    /// A builder with default settings and no known node.
    pub fn new() -> Self {
        Self::default()
    }
    /// Adds a contact point (`host:port`, or a host for port 9042).
    pub fn known_node(mut self, addr: impl Into<String>) -> Self {
        self.config.known_nodes.push(addr.into());
        self
    }
    /// Adds a contact point.
    pub fn known_node_addr(self, addr: SocketAddr) -> Self {
        self.known_node(addr.to_string())
    }
    /// Requests compression.
    pub fn compression(mut self, c: Compression) -> Self {
        self.config.connection.compression = c;
        self
    }
    /// Username/password authentication.
    pub fn user(self, username: impl Into<String>, password: impl Into<String>) -> Self {
        self.authenticator(Arc::new(PlainTextAuthenticator::new(username, password)))
    }
    /// Custom authentication.
    pub fn authenticator(mut self, a: Arc<dyn AuthenticatorProvider>) -> Self {
        self.config.connection.authenticator = Some(a);
        self
    }
    /// Protocol versions to negotiate between.
    pub fn protocol_versions(mut self, min: ProtocolVersion, max: ProtocolVersion) -> Self {
        self.config.connection.min_version = min;
        self.config.connection.max_version = max;
        self
    }
    /// Keyspace to use.
    pub fn use_keyspace(mut self, keyspace: impl Into<String>) -> Self {
        self.config.keyspace = Some(keyspace.into());
        self
    }
    /// Default consistency.
    pub fn default_consistency(mut self, c: Consistency) -> Self {
        self.config.consistency = c;
        self
    }
    /// Default serial consistency.
    pub fn default_serial_consistency(mut self, c: Option<Consistency>) -> Self {
        self.config.serial_consistency = c;
        self
    }
    /// Default page size.
    pub fn page_size(mut self, rows: i32) -> Self {
        self.config.page_size = rows;
        self
    }
    /// Default request timeout (`None`: wait forever).
    pub fn request_timeout(mut self, t: Option<Duration>) -> Self {
        self.config.request_timeout = t;
        self
    }
    /// Retry policy.
    pub fn retry_policy(mut self, p: Arc<dyn RetryPolicy>) -> Self {
        self.config.retry_policy = p;
        self
    }
    /// Speculative execution for idempotent statements.
    pub fn speculative_execution(mut self, p: Option<SpeculativePolicy>) -> Self {
        self.config.speculative = p;
        self
    }
    /// Connections per node (per shard on a sharded node) to local nodes;
    /// see [`SessionBuilder::connections_per_node_for`] for remote ones.
    pub fn connections_per_node(mut self, n: usize) -> Self {
        self.config.connections_per_node = n;
        self
    }
    /// Connections per node (per shard on a sharded node) to nodes at
    /// `distance`: [`NodeDistance::Local`] sets
    /// [`SessionConfig::connections_per_node`], [`NodeDistance::Remote`]
    /// [`SessionConfig::remote_connections_per_node`]. Ignored nodes never
    /// get connections, so [`NodeDistance::Ignored`] changes nothing.
    pub fn connections_per_node_for(mut self, distance: NodeDistance, n: usize) -> Self {
        match distance {
            NodeDistance::Local => self.config.connections_per_node = n,
            NodeDistance::Remote => self.config.remote_connections_per_node = n,
            NodeDistance::Ignored => {}
        }
        self
    }
    /// Connection settings.
    pub fn connection_config(mut self, c: ConnectionConfig) -> Self {
        self.config.connection = c;
        self
    }
    /// Whether to discover the cluster and route requests to replicas.
    pub fn discover_topology(mut self, on: bool) -> Self {
        self.config.discover_topology = on;
        self
    }
    /// Node distance (local datacenter, allow and deny lists).
    pub fn distance_policy(mut self, p: DistancePolicy) -> Self {
        self.config.distance = p;
        self
    }
    /// How often to re-read the topology and schema besides after events
    /// (`None`: only after events). Default 60 s.
    pub fn topology_refresh_interval(mut self, interval: Option<Duration>) -> Self {
        self.config.topology_refresh_interval = interval;
        self
    }
    /// How long to wait after a topology or status event before re-reading
    /// the topology. Default 1 s.
    pub fn topology_event_delay(mut self, delay: Duration) -> Self {
        self.config.topology_event_delay = delay;
        self
    }
    /// Whether to wait for schema agreement after DDL.
    pub fn await_schema_agreement(mut self, on: bool) -> Self {
        self.config.await_schema_agreement = on;
        self
    }
    /// The settings so far.
    pub fn config(&self) -> &SessionConfig {
        &self.config
    }
    /// Connects to the known nodes.
    pub async fn build(self) -> Result<Session, NewSessionError> {
        Session::connect(self.config).await
    }
}
/// What token-aware routing needs besides the pools: the ring of every
/// discovered node, which pool serves each of them, and each keyspace's
/// replica table (computed on first use, then cached with the snapshot).
struct Routing {
    ring: Arc<TokenRing>,
    /// Pool index (in [`ClusterState::nodes`]) of each ring node; `None`
    /// when the node is ignored.
    pool_of: Vec<Option<usize>>,
    strategies: Arc<HashMap<String, ReplicationStrategy>>,
    tables: RwLock<HashMap<String, Arc<ReplicaTable>>>,
}

impl Routing {
    fn table(&self, keyspace: &str) -> Option<Arc<ReplicaTable>> {
        if let Some(t) = self.tables.read().unwrap_or_else(|e| e.into_inner()).get(keyspace) {
            return Some(t.clone());
        }
        let strategy = self.strategies.get(keyspace)?.clone();
        let table = Arc::new(ReplicaTable::new(self.ring.clone(), strategy));
        self.tables.write().unwrap_or_else(|e| e.into_inner()).insert(keyspace.to_owned(), table.clone());
        Some(table)
    }
}

/// One consistent view of the cluster. Replaced, never changed in place
/// (except for the replica-table cache inside [`Routing`]).
struct ClusterState {
    /// Pools of the nodes that get connections: local ones first.
    nodes: Vec<Arc<NodePool>>,
    /// How many of `nodes` are local.
    local: usize,
    /// The nodes the last topology reading found (ignored ones included);
    /// empty when the topology is not discovered.
    infos: Vec<NodeInfo>,
    /// `None` without topology discovery.
    routing: Option<Routing>,
}

impl ClusterState {
    /// The view of `infos`: pools (reused from `existing` by address and
    /// size, else new) for every node the distance policy does not ignore,
    /// each sized for its distance ([`SessionConfig::connections_for`]): a
    /// node whose distance changed to one with another size gets a new pool.
    fn build(
        config: &SessionConfig,
        infos: Vec<NodeInfo>,
        strategies: Arc<HashMap<String, ReplicationStrategy>>,
        existing: &[Arc<NodePool>],
    ) -> ClusterState {
        let mut usable: Vec<(NodeDistance, SocketAddr)> = Vec::new();
        for n in &infos {
            let d = config.distance.distance(n);
            if d != NodeDistance::Ignored && !usable.iter().any(|(_, a)| *a == n.address) {
                usable.push((d, n.address));
            }
        }
        // Stable: discovery order within a distance.
        usable.sort_by_key(|(d, _)| *d);
        let local = usable.iter().filter(|(d, _)| *d == NodeDistance::Local).count();
        let nodes: Vec<Arc<NodePool>> = usable
            .iter()
            .map(|(distance, addr)| {
                let size = config.connections_for(*distance).max(1);
                existing
                    .iter()
                    .find(|p| p.addr == *addr && !p.is_retired() && p.slots.per_shard() == size)
                    .cloned()
                    .unwrap_or_else(|| Arc::new(NodePool::new(*addr, size)))
            })
            .collect();
        let routing = Routing {
            ring: Arc::new(TokenRing::new(infos.iter().map(NodeInfo::ring_node).collect())),
            pool_of: infos.iter().map(|n| nodes.iter().position(|p| p.addr == n.address)).collect(),
            strategies,
            tables: RwLock::new(HashMap::new()),
        };
        ClusterState { nodes, local, infos, routing: Some(routing) }
    }

    /// The same view with other replication strategies (a schema change).
    fn with_strategies(&self, strategies: Arc<HashMap<String, ReplicationStrategy>>) -> ClusterState {
        ClusterState {
            nodes: self.nodes.clone(),
            local: self.local,
            infos: self.infos.clone(),
            routing: self.routing.as_ref().map(|r| Routing {
                ring: r.ring.clone(),
                pool_of: r.pool_of.clone(),
                strategies,
                tables: RwLock::new(HashMap::new()),
            }),
        }
    }

    fn pool(&self, addr: SocketAddr) -> Option<&Arc<NodePool>> {
        self.nodes.iter().find(|p| p.addr == addr)
    }
}

/// The partitioner of each table, as last read.
#[derive(Debug, Default)]
struct Partitioners {
    /// `None` when the cluster has no `system_schema.scylla_tables`
    /// (Cassandra: every table uses Murmur3).
    tables: Option<TablePartitioners>,
}

impl Partitioners {
    /// The partitioner of `keyspace.table`: `Some(None)` for one the driver
    /// does not implement, `None` when the table is not known yet.
    fn lookup(&self, keyspace: &str, table: &str) -> Option<Option<Partitioner>> {
        match &self.tables {
            None => Some(Some(Partitioner::Murmur3)),
            Some(t) => t.get(&(keyspace.to_owned(), table.to_owned())).copied(),
        }
    }
}

pub(crate) struct SessionInner {
    config: SessionConfig,
    state: RwLock<Arc<ClusterState>>,
    /// Replication of every keyspace, as last read.
    strategies: RwLock<Arc<HashMap<String, ReplicationStrategy>>>,
    partitioners: RwLock<Partitioners>,
    /// One topology or schema refresh at a time.
    refresh_lock: tokio::sync::Mutex<()>,
    /// The node of the control connection.
    control: Mutex<Option<SocketAddr>>,
    next_node: AtomicUsize,
    prepared: Mutex<HashMap<String, PreparedStatement>>,
    keyspace: RwLock<Option<String>>,
    metrics: Metrics,
    events: broadcast::Sender<SessionEvent>,
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

fn resolve(node: &str) -> Result<Vec<SocketAddr>, NewSessionError> {
    use std::net::ToSocketAddrs;
    let with_port =
        if node.parse::<SocketAddr>().is_ok() || node.rsplit_once(':').is_some_and(|(_, p)| p.parse::<u16>().is_ok()) {
            node.to_owned()
        } else {
            format!("{node}:9042")
        };
    with_port.to_socket_addrs().map(Iterator::collect).map_err(|_| NewSessionError::Resolve(node.to_owned()))
}

/// The first connections of a node: one, and on an unsharded node up to
/// `per_node` (a sharded node's others are opened per shard by the refill).
async fn open_initial(
    addr: SocketAddr,
    config: ConnectionConfig,
    per_node: usize,
) -> (Vec<Connection>, Option<ConnectionError>) {
    let mut conns = Vec::new();
    for _ in 0..per_node {
        match Connection::open(addr, &config).await {
            Ok(c) => {
                let sharded = c.sharding().is_some();
                conns.push(c);
                if sharded {
                    break;
                }
            }
            Err(e) => {
                tracing::warn!(%addr, error = %e, "cannot connect");
                return (conns, Some(e));
            }
        }
    }
    (conns, None)
}

/// What the first successful contact point told of the cluster.
struct Discovered {
    nodes: Vec<NodeInfo>,
    keyspaces: HashMap<String, ReplicationStrategy>,
    partitioners: Option<TablePartitioners>,
}

async fn discover(conn: &Connection) -> Result<Discovered, ExecutionError> {
    Ok(Discovered {
        nodes: fetch_nodes(conn).await?,
        keyspaces: fetch_keyspaces(conn).await?,
        partitioners: fetch_partitioners(conn).await?,
    })
}

impl Session {
    async fn connect(config: SessionConfig) -> Result<Session, NewSessionError> {
        if config.known_nodes.is_empty() {
            return Err(NewSessionError::NoKnownNodes);
        }
        if config.connections_per_node == 0 {
            return Err(NewSessionError::Config("connections_per_node must be at least 1"));
        }
        if config.remote_connections_per_node == 0 {
            return Err(NewSessionError::Config(
                "remote_connections_per_node must be at least 1 (to keep remote nodes out, do not use them in the distance policy)",
            ));
        }
        let mut addrs = Vec::new();
        for node in &config.known_nodes {
            for a in resolve(node)? {
                if !addrs.contains(&a) {
                    addrs.push(a);
                }
            }
        }
        let mut last_error = None;
        let mut discovered = None;
        if config.discover_topology {
            for addr in &addrs {
                match Connection::open(*addr, &config.connection).await {
                    Ok(contact) => match discover(&contact).await {
                        Ok(d) if !d.nodes.is_empty() => {
                            discovered = Some(d);
                            break;
                        }
                        Ok(_) => {}
                        Err(e) => tracing::warn!(%addr, error = %e, "topology discovery failed"),
                    },
                    Err(e) => last_error = Some(e),
                }
            }
        }
        let (state, strategies, partitioners) = match discovered {
            Some(d) => {
                let strategies = Arc::new(d.keyspaces);
                (ClusterState::build(&config, d.nodes, strategies.clone(), &[]), strategies, d.partitioners)
            }
            None => {
                let nodes: Vec<Arc<NodePool>> =
                    addrs.iter().map(|a| Arc::new(NodePool::new(*a, config.connections_per_node))).collect();
                let local = nodes.len();
                (ClusterState { nodes, local, infos: Vec::new(), routing: None }, Arc::default(), None)
            }
        };
        let (shutdown, shutdown_rx) = watch::channel(());
        let session = Session {
            inner: Arc::new(SessionInner {
                keyspace: RwLock::new(None),
                state: RwLock::new(Arc::new(state)),
                strategies: RwLock::new(strategies),
                partitioners: RwLock::new(Partitioners { tables: partitioners }),
                refresh_lock: tokio::sync::Mutex::new(()),
                control: Mutex::new(None),
                config,
                next_node: AtomicUsize::new(0),
                prepared: Mutex::new(HashMap::new()),
                metrics: Metrics::default(),
                events: broadcast::channel(256).0,
                shutdown,
            }),
        };
        let state = session.state();
        let opening: Vec<_> = state
            .nodes
            .iter()
            .map(|node| {
                tokio::spawn(open_initial(node.addr, session.inner.config.connection.clone(), node.slots.per_shard()))
            })
            .collect();
        for (node, opening) in state.nodes.iter().zip(opening) {
            let (conns, error) = opening.await.unwrap_or_else(|_| (Vec::new(), Some(ConnectionError::Closed)));
            if let Some(e) = error {
                last_error = Some(e);
            }
            for conn in conns {
                session.install(node, conn);
            }
        }
        if state.nodes.iter().all(|n| !n.slots.has_open()) {
            return Err(NewSessionError::Connect(last_error.unwrap_or(ConnectionError::Closed)));
        }
        if let Some(ks) = session.inner.config.keyspace.clone() {
            session.use_keyspace(&ks).await.map_err(NewSessionError::UseKeyspace)?;
        }
        for node in &state.nodes {
            if !node.slots.has_open() && node.set_up(false) {
                session.inner.emit(SessionEvent::NodeDown(node.addr));
            }
            session.refill(node);
        }
        tokio::spawn(control::run(Arc::downgrade(&session.inner), shutdown_rx));
        Ok(session)
    }

    /// The current view of the cluster.
    fn state(&self) -> Arc<ClusterState> {
        self.inner.state.read().unwrap_or_else(|e| e.into_inner()).clone()
    }

    fn set_state(&self, state: ClusterState) {
        *self.inner.state.write().unwrap_or_else(|e| e.into_inner()) = Arc::new(state);
    }

    /// Session and database events. Subscribe early: events sent before
    /// subscribing are not replayed.
    pub fn events(&self) -> broadcast::Receiver<SessionEvent> {
        self.inner.events.subscribe()
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

    /// A copy of the request counters and latency histogram.
    pub fn metrics(&self) -> MetricsSnapshot {
        self.inner.metrics.snapshot()
    }

    /// Puts a new connection into `node`'s slots and watches it; closes
    /// what does not fit or was replaced.
    fn install(&self, node: &Arc<NodePool>, conn: Connection) {
        let installed = node.slots.install(conn.clone());
        for c in installed.dropped {
            c.close();
        }
        if let Some(c) = installed.surplus {
            c.close();
            return;
        }
        if node.is_retired() {
            node.retire();
            return;
        }
        self.watch(node, conn);
        self.inner.emit(SessionEvent::ConnectionOpened(node.addr));
        if node.set_up(true) {
            self.inner.emit(SessionEvent::NodeUp(node.addr));
        }
    }

    /// Waits in the background for `conn` to close, then reports the node
    /// down if it was its last connection and refills.
    fn watch(&self, node: &Arc<NodePool>, conn: Connection) {
        let weak = Arc::downgrade(&self.inner);
        let pool = Arc::downgrade(node);
        let mut shutdown = self.inner.shutdown.subscribe();
        tokio::spawn(async move {
            tokio::select! {
                _ = conn.closed() => {}
                _ = shutdown.changed() => return,
            }
            drop(conn);
            let (Some(inner), Some(node)) = (weak.upgrade(), pool.upgrade()) else { return };
            Session { inner }.connection_lost(&node);
        });
    }

    fn connection_lost(&self, node: &Arc<NodePool>) {
        if node.is_retired() {
            return;
        }
        if !node.slots.has_open() && node.set_up(false) {
            self.inner.emit(SessionEvent::NodeDown(node.addr));
        }
        self.refill(node);
    }

    /// Opens missing connections to `node` in the background, with backoff,
    /// unless a refill of the node is already running.
    fn refill(&self, node: &Arc<NodePool>) {
        if node.is_retired() || !node.slots.claim_refill() {
            return;
        }
        tokio::spawn(refill(Arc::downgrade(&self.inner), node.clone()));
    }

    /// Prepares a statement (once per text: prepared statements are cached).
    pub async fn prepare(&self, statement: impl Into<Statement>) -> Result<PreparedStatement, ExecutionError> {
        let statement = statement.into();
        let cached = self.inner.prepared.lock().unwrap_or_else(|e| e.into_inner()).get(statement.text()).cloned();
        if let Some(p) = cached {
            return Ok(with_options(p, &statement));
        }
        let seed = self.inner.next_node.fetch_add(1, Ordering::Relaxed);
        let state = self.state();
        let (_, node, conn) = self.pick(&state, seed, 0, None)?;
        let p = conn.prepare(statement.text()).await?;
        // Prepare on the other nodes too, so EXECUTE works wherever it goes.
        let others: Vec<Connection> = state
            .nodes
            .iter()
            .filter(|other| !Arc::ptr_eq(other, &node))
            .filter_map(|other| other.connection(seed))
            .collect();
        drop(state);
        for c in others {
            let _ = c.prepare(statement.text()).await;
        }
        let table = p.bind_specs().first().map(|spec| (spec.keyspace.clone(), spec.table.clone()));
        if let Some((keyspace, table)) = table {
            let partitioner = self.table_partitioner(&conn, keyspace, table).await;
            p.set_partitioner(partitioner);
        }
        self.inner.prepared.lock().unwrap_or_else(|e| e.into_inner()).insert(statement.text().to_owned(), p.clone());
        Ok(with_options(p, &statement))
    }

    /// The partitioner of `keyspace.table` as last read: from
    /// `system_schema.scylla_tables` where the cluster has it (CDC log
    /// tables use the CDC partitioner), Murmur3 otherwise and for tables
    /// not listed there. `None` for a partitioner the driver does not
    /// implement (requests to such a table are not routed by token).
    pub fn partitioner(&self, keyspace: &str, table: &str) -> Option<Partitioner> {
        let partitioners = self.inner.partitioners.read().unwrap_or_else(|e| e.into_inner());
        partitioners.lookup(keyspace, table).unwrap_or(Some(Partitioner::Murmur3))
    }

    /// The partitioner of a table being prepared: from the cache, else read
    /// from `system_schema.scylla_tables` through `conn` (a table created
    /// by another client since the last schema refresh).
    async fn table_partitioner(&self, conn: &Connection, keyspace: String, table: String) -> Option<Partitioner> {
        let cached = self.inner.partitioners.read().unwrap_or_else(|e| e.into_inner()).lookup(&keyspace, &table);
        if let Some(p) = cached {
            return p;
        }
        match crate::cluster::topology::fetch_table_partitioner(conn, &keyspace, &table).await {
            Ok(found) => {
                let p = found.unwrap_or(Some(Partitioner::Murmur3));
                let mut partitioners = self.inner.partitioners.write().unwrap_or_else(|e| e.into_inner());
                if let Some(tables) = &mut partitioners.tables {
                    tables.insert((keyspace, table), p);
                }
                p
            }
            Err(e) => {
                tracing::warn!(keyspace, table, error = %e, "cannot read the table's partitioner; using Murmur3");
                Some(Partitioner::Murmur3)
            }
        }
    }

    /// Runs a statement with its values and returns the first page.
    ///
    /// `statement` is a [`Statement`], a [`PreparedStatement`] or a
    /// [`crate::statement::Batch`]; `values` is a tuple, slice or derived
    /// struct (for a batch: one such per statement).
    pub async fn execute<E: Executable<V>, V>(&self, statement: &E, values: V) -> Result<QueryResult, ExecutionError> {
        self.execute_page(statement, &values, None).await
    }

    /// Runs a statement and returns the page after `paging_state`.
    pub async fn execute_page<E: Executable<V>, V>(
        &self,
        statement: &E,
        values: &V,
        paging_state: Option<&PagingState>,
    ) -> Result<QueryResult, ExecutionError> {
        let started = Instant::now();
        let options = statement.options();
        let params = Params {
            consistency: options.consistency.unwrap_or(self.inner.config.consistency),
            serial_consistency: options.serial_consistency.or(self.inner.config.serial_consistency),
            page_size: Some(options.page_size.unwrap_or(self.inner.config.page_size)),
            paging_state: paging_state.map(PagingState::as_bytes),
            timestamp: options.timestamp,
        };
        let timeout = options.timeout.or(self.inner.config.request_timeout);
        let run = self.run(statement, values, params);
        let result = match timeout {
            Some(t) => match tokio::time::timeout(t, run).await {
                Ok(r) => r,
                Err(_) => {
                    self.inner.metrics.timeout();
                    Err(ExecutionError::Timeout(t))
                }
            },
            None => run.await,
        };
        self.inner.metrics.request(started.elapsed(), result.is_ok());
        let result = result?;
        if result.schema_change().is_some() {
            if self.inner.config.await_schema_agreement {
                self.await_schema_agreement().await?;
            }
            self.refresh_schema().await;
        }
        Ok(result)
    }

    /// A connection for reading system tables: the control connection's
    /// node first, then any up node.
    fn system_connection(&self) -> Option<(SocketAddr, Connection)> {
        let state = self.state();
        let control = self.control_node();
        let preferred = control.and_then(|a| state.pool(a)).filter(|p| p.is_up());
        preferred
            .into_iter()
            .chain(state.nodes.iter().filter(|p| p.is_up()))
            .chain(state.nodes.iter())
            .find_map(|p| p.connection(0).map(|c| (p.addr, c)))
    }

    /// Re-reads every keyspace's replication and every table's partitioner
    /// (after a schema change): replica tables are computed afresh, and
    /// cached prepared statements take their table's new partitioner.
    pub(crate) async fn refresh_schema(&self) {
        let _guard = self.inner.refresh_lock.lock().await;
        let Some((_, conn)) = self.system_connection() else { return };
        let keyspaces = match fetch_keyspaces(&conn).await {
            Ok(k) => Arc::new(k),
            Err(e) => {
                tracing::warn!(error = %e, "cannot refresh keyspaces");
                return;
            }
        };
        match fetch_partitioners(&conn).await {
            Ok(tables) => *self.inner.partitioners.write().unwrap_or_else(|e| e.into_inner()) = Partitioners { tables },
            Err(e) => tracing::warn!(error = %e, "cannot refresh table partitioners"),
        }
        *self.inner.strategies.write().unwrap_or_else(|e| e.into_inner()) = keyspaces.clone();
        let state = self.state().with_strategies(keyspaces);
        self.set_state(state);
        let prepared: Vec<PreparedStatement> =
            self.inner.prepared.lock().unwrap_or_else(|e| e.into_inner()).values().cloned().collect();
        for p in prepared {
            if let Some(spec) = p.bind_specs().first() {
                p.set_partitioner(self.partitioner(&spec.keyspace, &spec.table));
            }
        }
    }

    /// Re-reads the topology: pools for new nodes (refilled in the
    /// background), closed pools for nodes that left or are now ignored, a
    /// new ring when anything changed. Emits
    /// [`SessionEvent::TopologyRefreshed`].
    pub async fn refresh_topology(&self) -> Result<(), ExecutionError> {
        if !self.inner.config.discover_topology {
            return Ok(());
        }
        let _guard = self.inner.refresh_lock.lock().await;
        let (addr, conn) = self.system_connection().ok_or(ExecutionError::NoConnection)?;
        let infos = crate::cluster::topology::fetch_nodes_at(&conn, addr).await?;
        if infos.is_empty() {
            return Err(ExecutionError::UnexpectedResponse("the topology lists no node"));
        }
        let old = self.state();
        let diff = crate::cluster::topology::diff_topology(&old.infos, &infos);
        let (added, removed) = if diff.is_empty() && old.routing.is_some() {
            (Vec::new(), Vec::new())
        } else {
            let strategies = self.inner.strategies.read().unwrap_or_else(|e| e.into_inner()).clone();
            let new = ClusterState::build(&self.inner.config, infos, strategies, &old.nodes);
            let added: Vec<Arc<NodePool>> =
                new.nodes.iter().filter(|p| !old.nodes.iter().any(|o| Arc::ptr_eq(o, p))).cloned().collect();
            let removed: Vec<Arc<NodePool>> =
                old.nodes.iter().filter(|o| !new.nodes.iter().any(|p| Arc::ptr_eq(o, p))).cloned().collect();
            self.set_state(new);
            for pool in &removed {
                pool.retire();
            }
            for pool in &added {
                self.refill(pool);
            }
            (added, removed)
        };
        let nodes = self.state().nodes.len();
        if !added.is_empty() || !removed.is_empty() {
            tracing::info!(added = added.len(), removed = removed.len(), nodes, "topology changed");
        }
        self.inner.emit(SessionEvent::TopologyRefreshed {
            added: added.iter().map(|p| p.addr).collect(),
            removed: removed.iter().map(|p| p.addr).collect(),
            changed: diff.changed,
            nodes,
        });
        Ok(())
    }

    /// The nodes (in token-aware order) a request for `token` in `keyspace`
    /// would try first: its replicas. Empty without topology or replication
    /// information.
    pub fn replicas(&self, keyspace: &str, token: Token) -> Vec<SocketAddr> {
        let state = self.state();
        let Some(routing) = &state.routing else { return Vec::new() };
        let Some(table) = routing.table(keyspace) else { return Vec::new() };
        table
            .replicas(token)
            .iter()
            .filter_map(|r| routing.pool_of.get(*r).copied().flatten())
            .map(|p| state.nodes[p].addr)
            .collect()
    }

    /// Iterates over every page of a statement's result.
    pub fn execute_iter<E: Executable<V>, V>(&self, statement: E, values: V) -> Pager<E, V> {
        Pager { session: self.clone(), statement, values, state: None, done: false }
    }

    /// Picks the node for a request from plan position `from` on, and
    /// returns the position it was found at. The plan: the token's local
    /// replicas, then its remote ones (each rotated by `seed`, so that no
    /// replica takes every first attempt), then every local node and every
    /// remote node round-robin. Nodes that are down are skipped; only when
    /// the whole plan has none up are they tried (a DOWN event may be
    /// stale). Allocates nothing.
    fn pick(
        &self,
        state: &ClusterState,
        seed: usize,
        from: usize,
        route: Option<(&str, Token)>,
    ) -> Result<(usize, Arc<NodePool>, Connection), ExecutionError> {
        let table = match (route, &state.routing) {
            (Some((keyspace, _)), Some(routing)) => routing.table(keyspace),
            _ => None,
        };
        let token = route.map(|(_, t)| t);
        for include_down in [false, true] {
            let mut position = 0;
            let mut visit = |node: &Arc<NodePool>| -> Option<(usize, Connection)> {
                let here = position;
                position += 1;
                if here < from || (!include_down && !node.is_up()) {
                    return None;
                }
                match node.connection_for(token, seed) {
                    Some(c) => Some((here, c)),
                    None => {
                        self.node_unavailable(node);
                        None
                    }
                }
            };
            if let (Some(table), Some(routing), Some(token)) = (&table, &state.routing, token) {
                let replicas = table.replicas(token);
                let n = replicas.len();
                for local in [true, false] {
                    for i in 0..n {
                        let Some(p) = routing.pool_of.get(replicas[(seed + i) % n]).copied().flatten() else {
                            continue;
                        };
                        if (p < state.local) != local {
                            continue;
                        }
                        let node = &state.nodes[p];
                        if let Some((here, c)) = visit(node) {
                            return Ok((here, node.clone(), c));
                        }
                    }
                }
            }
            for group in [&state.nodes[..state.local], &state.nodes[state.local..]] {
                let n = group.len();
                for i in 0..n {
                    let node = &group[(seed + i) % n];
                    if let Some((here, c)) = visit(node) {
                        return Ok((here, node.clone(), c));
                    }
                }
            }
        }
        Err(ExecutionError::NoConnection)
    }

    fn node_unavailable(&self, node: &Arc<NodePool>) {
        if node.set_up(false) {
            self.inner.emit(SessionEvent::NodeDown(node.addr));
        }
        self.refill(node);
    }

    fn note_failure(&self, node: &Arc<NodePool>, conn: &Connection) {
        if conn.is_closed() {
            self.refill(node);
        }
    }

    async fn run<E: Executable<V>, V>(
        &self,
        statement: &E,
        values: &V,
        params: Params<'_>,
    ) -> Result<QueryResult, ExecutionError> {
        let idempotent = statement.options().idempotent;
        let speculative = self.inner.config.speculative.filter(|_| idempotent && self.state().nodes.len() > 1);
        let Some(spec) = speculative else {
            return self.run_with_retries(statement, values, params, 0).await;
        };
        // Speculative execution: the first attempt to succeed wins.
        let mut attempts = vec![Some(Box::pin(self.run_with_retries(statement, values, params, 0)))];
        let mut last_error = None;
        loop {
            let can_add = attempts.len() <= spec.max_extra;
            let add = {
                let first = first_ok(&mut attempts, &mut last_error);
                let delay = tokio::time::sleep(spec.delay);
                tokio::select! {
                    r = first => return r,
                    _ = delay, if can_add => true,
                }
            };
            if add {
                let offset = attempts.len();
                attempts.push(Some(Box::pin(self.run_with_retries(statement, values, params, offset))));
            }
        }
    }

    async fn run_with_retries<E: Executable<V>, V>(
        &self,
        statement: &E,
        values: &V,
        params: Params<'_>,
        node_offset: usize,
    ) -> Result<QueryResult, ExecutionError> {
        let idempotent = statement.options().idempotent;
        let mut retries = 0;
        let seed = self.inner.next_node.fetch_add(1, Ordering::Relaxed);
        let route = statement.route(values);
        let state = self.state();
        let (mut position, mut node, mut conn) = self.pick(&state, seed, node_offset, route)?;
        loop {
            let error = match self.attempt(&conn, statement, values, params).await {
                Ok(r) => return Ok(r),
                Err(e) => e,
            };
            self.note_failure(&node, &conn);
            match self.inner.config.retry_policy.decide(&error, retries, idempotent) {
                RetryDecision::DontRetry => return Err(error),
                RetryDecision::RetrySameNode => {
                    if let Some(c) = node.connection(seed) {
                        conn = c;
                    }
                }
                RetryDecision::RetryNextNode => {
                    (position, node, conn) = self.pick(&state, seed, position + 1, route).map_err(|_| error.clone())?;
                }
            }
            retries += 1;
            self.inner.metrics.retry();
            tracing::debug!(%error, retries, "retrying");
        }
    }

    async fn attempt<E: Executable<V>, V>(
        &self,
        conn: &Connection,
        statement: &E,
        values: &V,
        params: Params<'_>,
    ) -> Result<QueryResult, ExecutionError> {
        let reprepared = |p: &PreparedStatement| {
            tracing::info!(addr = %conn.addr(), text = p.text(), "statement re-prepared");
            self.inner.emit(SessionEvent::StatementReprepared {
                node: conn.addr(),
                statement: p.text().to_owned(),
                id: p.id().to_vec(),
            });
        };
        let result = crate::execute::execute_observed(conn, statement, values, params, reprepared).await?;
        if let ResultMessage::SetKeyspace(ks) = result.message() {
            self.keyspace_changed(ks, conn).await;
        }
        Ok(result)
    }

    /// Sets the keyspace of every connection (`USE keyspace`).
    pub async fn use_keyspace(&self, keyspace: &str) -> Result<(), ExecutionError> {
        for conn in self.connections() {
            use_keyspace_on(&conn, keyspace).await?;
        }
        *self.inner.keyspace.write().unwrap_or_else(|e| e.into_inner()) = Some(keyspace.to_owned());
        Ok(())
    }

    async fn keyspace_changed(&self, keyspace: &str, already: &Connection) {
        *self.inner.keyspace.write().unwrap_or_else(|e| e.into_inner()) = Some(keyspace.to_owned());
        for conn in self.connections() {
            if conn.same_as(already) {
                continue;
            }
            if let Err(e) = use_keyspace_on(&conn, keyspace).await {
                tracing::warn!(addr = %conn.addr(), error = %e, "USE failed");
            }
        }
    }

    /// The keyspace set by `USE`, if any.
    pub fn keyspace(&self) -> Option<String> {
        self.inner.keyspace.read().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// Waits until every node reports the same schema version.
    pub async fn await_schema_agreement(&self) -> Result<Uuid, ExecutionError> {
        let timeout = self.inner.config.schema_agreement_timeout;
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(version) = self.schema_version_if_agreed().await? {
                self.inner.emit(SessionEvent::SchemaAgreement(version));
                return Ok(version);
            }
            if Instant::now() >= deadline {
                return Err(ExecutionError::SchemaAgreementTimeout(timeout));
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    /// Asks every node with a live connection for its schema version (as
    /// the official driver does): peers' views in `system.peers` can lag.
    /// Nodes that are down are left out.
    async fn schema_version_if_agreed(&self) -> Result<Option<Uuid>, ExecutionError> {
        let query = Statement::new("SELECT schema_version FROM system.local WHERE key = 'local'");
        let mut versions: Vec<Uuid> = Vec::new();
        let mut asked = 0;
        for node in &self.state().nodes {
            if !node.is_up() {
                continue;
            }
            let Some(conn) = node.connection(0) else { continue };
            let result = match conn.execute(&query, &(), Params::new(Consistency::One)).await {
                Ok(r) => r,
                // The node went away while asked: it does not take part.
                Err(ExecutionError::Connection(_)) => continue,
                Err(e) => return Err(e),
            };
            asked += 1;
            let row = result
                .first_row::<(Option<Uuid>,)>()
                .map_err(|_| ExecutionError::UnexpectedResponse("schema version rows"))?;
            if let Some((Some(v),)) = row {
                versions.push(v);
            }
        }
        if asked == 0 {
            return Err(ExecutionError::NoConnection);
        }
        versions.sort_unstable();
        versions.dedup();
        Ok(match versions.as_slice() {
            [one] => Some(*one),
            _ => None,
        })
    }
}

/// Opens the connections `node` misses, one at a time, with exponential
/// backoff after failures (cut short by an UP event for the node), until
/// none is missing, the node is retired or the session is gone.
async fn refill(weak: Weak<SessionInner>, node: Arc<NodePool>) {
    let mut backoff = Duration::from_millis(100);
    loop {
        if node.is_retired() {
            node.slots.abandon_refill();
            return;
        }
        let Some(inner) = weak.upgrade() else { return };
        let wanted = match node.slots.missing() {
            Some(w) => w,
            None if node.slots.release_refill() => return,
            // A connection went missing while the job was being let go.
            None => continue,
        };
        let config = &inner.config.connection;
        let attempt = match &wanted {
            Wanted::Shard { shard, sample } => match sample.sharding() {
                Some(sharding) => Connection::open_to_shard(node.addr, *shard, sharding, config).await,
                None => Connection::open(node.addr, config).await,
            },
            Wanted::Any => Connection::open(node.addr, config).await,
        };
        let attempt = match attempt {
            Ok(conn) => {
                let keyspace = inner.keyspace.read().unwrap_or_else(|e| e.into_inner()).clone();
                match keyspace {
                    Some(ks) => match use_keyspace_on(&conn, &ks).await {
                        Ok(()) => Ok(conn),
                        Err(e) => {
                            conn.close();
                            Err(e.to_string())
                        }
                    },
                    None => Ok(conn),
                }
            }
            Err(e) => Err(e.to_string()),
        };
        match attempt {
            Ok(conn) => {
                Session { inner }.install(&node, conn);
                backoff = Duration::from_millis(100);
            }
            Err(error) => {
                tracing::debug!(addr = %node.addr, %error, ?backoff, "reconnect failed");
                inner.emit(SessionEvent::ConnectionFailed { node: node.addr, error });
                let mut shutdown = inner.shutdown.subscribe();
                drop(inner);
                let woken = tokio::select! {
                    _ = tokio::time::sleep(backoff) => false,
                    _ = node.wake.notified() => true,
                    _ = shutdown.changed() => return,
                };
                backoff = if woken { Duration::from_millis(100) } else { (backoff * 2).min(Duration::from_secs(10)) };
            }
        }
    }
}

fn with_options(mut p: PreparedStatement, statement: &Statement) -> PreparedStatement {
    *p.options_mut() = statement.options().clone();
    p
}

async fn use_keyspace_on(conn: &Connection, keyspace: &str) -> Result<(), ExecutionError> {
    let cql = format!("USE \"{}\"", keyspace.replace('"', "\"\""));
    let q = Query { query: &cql, params: QueryParameters::new(Consistency::One, ()) };
    match Response::from_envelope(conn.send(&q, 0).await?)?.message {
        ResponseMessage::Result(ResultMessage::SetKeyspace(_)) => Ok(()),
        ResponseMessage::Error(e) => Err(e.into()),
        _ => Err(ExecutionError::UnexpectedResponse("USE not answered with Set_keyspace")),
    }
}

/// Polls every running attempt; resolves with the first success, or the
/// last error once all failed. Finished attempts are removed (set to `None`)
/// so they are never polled again.
async fn first_ok<F>(
    attempts: &mut [Option<std::pin::Pin<Box<F>>>],
    last_error: &mut Option<ExecutionError>,
) -> Result<QueryResult, ExecutionError>
where
    F: std::future::Future<Output = Result<QueryResult, ExecutionError>>,
{
    std::future::poll_fn(|cx| {
        for slot in attempts.iter_mut() {
            let Some(attempt) = slot else { continue };
            if let std::task::Poll::Ready(r) = attempt.as_mut().poll(cx) {
                *slot = None;
                match r {
                    Ok(v) => return std::task::Poll::Ready(Ok(v)),
                    Err(e) => *last_error = Some(e),
                }
            }
        }
        if attempts.iter().all(Option::is_none) {
            return std::task::Poll::Ready(Err(last_error.take().unwrap_or(ExecutionError::NoConnection)));
        }
        std::task::Poll::Pending
    })
    .await
}

/// Pages of a statement's result, fetched one at a time.
pub struct Pager<E, V> {
    session: Session,
    statement: E,
    values: V,
    state: Option<PagingState>,
    done: bool,
}

impl<E: Executable<V>, V> Pager<E, V> {
    /// The next page, or `None` after the last one.
    pub async fn next_page(&mut self) -> Option<Result<QueryResult, ExecutionError>> {
        if self.done {
            return None;
        }
        let result = self.session.execute_page(&self.statement, &self.values, self.state.as_ref()).await;
        match &result {
            Ok(r) => {
                self.state = r.paging_state();
                self.done = self.state.is_none();
            }
            Err(_) => self.done = true,
        }
        Some(result)
    }

    /// All remaining rows as owned values of type `R`, page by page.
    pub async fn collect_rows<R>(&mut self) -> Result<Vec<R>, ExecutionError>
    where
        R: for<'a> DeserializeRow<'a>,
    {
        let mut out = Vec::new();
        while let Some(page) = self.next_page().await {
            let page = page?;
            for row in page.rows::<R>().map_err(|_| ExecutionError::UnexpectedResponse("rows of another type"))? {
                out.push(row.map_err(|_| ExecutionError::UnexpectedResponse("undecodable row"))?);
            }
        }
        Ok(out)
    }
}
