//! The session: connection pools to the known nodes, the prepared-statement
//! cache, and the one `execute` for every kind of statement.
//!
//! The cluster-awareness work (topology, token-aware routing, shards) plugs
//! in behind the same API; for now the session spreads requests over the
//! known nodes in round-robin order and fails over between them.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant};

use shardwise_protocol::consistency::Consistency;
use shardwise_protocol::frame::ProtocolVersion;
use shardwise_protocol::request::{Query, QueryParameters, Register};
use shardwise_protocol::response::{Event, Response, ResponseMessage, ResultMessage};
use tokio::sync::broadcast;
use shardwise_protocol::types::de::DeserializeRow;
use uuid::Uuid;

use shardwise_protocol::sharding::{ShardPortIterator, ShardingInfo};
use shardwise_protocol::token::Token;

use crate::auth::{AuthenticatorProvider, PlainTextAuthenticator};
use crate::cluster::topology::{fetch_keyspaces, fetch_nodes};
use crate::cluster::{DistancePolicy, NodeDistance, NodeInfo, ReplicaTable, ReplicationStrategy, TokenRing};
use crate::config::{Compression, ConnectionConfig};
use crate::connection::Connection;
use crate::error::{ConnectionError, ExecutionError, NewSessionError};
use crate::events::SessionEvent;
use crate::execute::{Executable, Params};
use crate::metrics::{Metrics, MetricsSnapshot};
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
    /// Connections per node.
    pub connections_per_node: usize,
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
}

impl Default for SessionConfig {
    fn default() -> Self {
        SessionConfig {
            known_nodes: Vec::new(),
            connection: ConnectionConfig::default(),
            connections_per_node: 1,
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
    /// Connections per node.
    pub fn connections_per_node(mut self, n: usize) -> Self {
        self.config.connections_per_node = n;
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

/// The connections to one node, refilled in the background when some close.
struct NodePool {
    addr: SocketAddr,
    connections: RwLock<Vec<Connection>>,
    refilling: AtomicBool,
    next: AtomicUsize,
    /// Whether the node had a connection when last looked at.
    up: AtomicBool,
}

impl NodePool {
    /// The open connection of the shard owning `token` on a sharded node,
    /// else the least loaded one.
    fn connection_for(&self, token: Option<Token>) -> Option<Connection> {
        if let Some(token) = token {
            let conns = self.connections.read().unwrap_or_else(|e| e.into_inner());
            if let Some(sharding) = conns.iter().find_map(|c| c.sharding().copied()) {
                let shard = sharding.sharder().shard_of(token);
                let on_shard = conns.iter().filter(|c| !c.is_closed() && c.shard() == shard).min_by_key(|c| c.in_flight());
                if let Some(c) = on_shard {
                    return Some(c.clone());
                }
            }
        }
        self.connection()
    }

    /// The open connection with the fewest requests in flight.
    fn connection(&self) -> Option<Connection> {
        let conns = self.connections.read().unwrap_or_else(|e| e.into_inner());
        let start = self.next.fetch_add(1, Ordering::Relaxed);
        let n = conns.len();
        (0..n)
            .map(|i| &conns[(start + i) % n.max(1)])
            .filter(|c| !c.is_closed())
            .min_by_key(|c| c.in_flight())
            .cloned()
    }

    /// Whether connections are missing: `per_shard` for every shard of a
    /// sharded node, `target` in all otherwise.
    fn needs_refill(&self, target: usize) -> bool {
        self.missing_shard(target).is_some() || {
            let conns = self.connections.read().unwrap_or_else(|e| e.into_inner());
            conns.iter().all(|c| c.sharding().is_none()) && conns.iter().filter(|c| !c.is_closed()).count() < target
        }
    }

    /// A shard with fewer than `per_shard` open connections, with the
    /// sharding parameters, on a sharded node.
    fn missing_shard(&self, per_shard: usize) -> Option<(u16, ShardingInfo)> {
        let conns = self.connections.read().unwrap_or_else(|e| e.into_inner());
        let sharding = *conns.iter().find_map(|c| c.sharding())?;
        let n = sharding.sharder().nr_shards().get();
        (0..n)
            .find(|s| conns.iter().filter(|c| !c.is_closed() && c.shard() == *s).count() < per_shard)
            .map(|s| (s, sharding))
    }
}

/// What token-aware routing needs: the ring of every discovered node, which
/// pool serves each of them, and each keyspace's replica table.
struct Routing {
    ring: Arc<TokenRing>,
    /// Pool index (in `SessionInner::nodes`) of each ring node; `None` when
    /// the node is ignored.
    pool_of: Vec<Option<usize>>,
    strategies: RwLock<HashMap<String, ReplicationStrategy>>,
    tables: RwLock<HashMap<String, Arc<ReplicaTable>>>,
}

impl Routing {
    fn table(&self, keyspace: &str) -> Option<Arc<ReplicaTable>> {
        if let Some(t) = self.tables.read().unwrap_or_else(|e| e.into_inner()).get(keyspace) {
            return Some(t.clone());
        }
        let strategy = self.strategies.read().unwrap_or_else(|e| e.into_inner()).get(keyspace)?.clone();
        let table = Arc::new(ReplicaTable::new(self.ring.clone(), strategy));
        self.tables.write().unwrap_or_else(|e| e.into_inner()).insert(keyspace.to_owned(), table.clone());
        Some(table)
    }
}

struct SessionInner {
    config: SessionConfig,
    nodes: Vec<Arc<NodePool>>,
    routing: Option<Routing>,
    next_node: AtomicUsize,
    prepared: Mutex<HashMap<String, PreparedStatement>>,
    keyspace: RwLock<Option<String>>,
    metrics: Metrics,
    events: broadcast::Sender<SessionEvent>,
    /// Dropped with the session: tells background tasks to stop.
    _shutdown: tokio::sync::watch::Sender<()>,
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
        f.debug_struct("Session").field("nodes", &self.inner.nodes.iter().map(|n| n.addr).collect::<Vec<_>>()).finish()
    }
}

fn resolve(node: &str) -> Result<Vec<SocketAddr>, NewSessionError> {
    use std::net::ToSocketAddrs;
    let with_port = if node.parse::<SocketAddr>().is_ok() || node.rsplit_once(':').is_some_and(|(_, p)| p.parse::<u16>().is_ok()) {
        node.to_owned()
    } else {
        format!("{node}:9042")
    };
    with_port.to_socket_addrs().map(Iterator::collect).map_err(|_| NewSessionError::Resolve(node.to_owned()))
}

impl Session {
    async fn connect(config: SessionConfig) -> Result<Session, NewSessionError> {
        if config.known_nodes.is_empty() {
            return Err(NewSessionError::NoKnownNodes);
        }
        if config.connections_per_node == 0 {
            return Err(NewSessionError::Config("connections_per_node must be at least 1"));
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
                    Ok(control) => match (fetch_nodes(&control).await, fetch_keyspaces(&control).await) {
                        (Ok(found), Ok(keyspaces)) if !found.is_empty() => {
                            discovered = Some((found, keyspaces));
                            break;
                        }
                        (Err(e), _) | (_, Err(e)) => tracing::warn!(%addr, error = %e, "topology discovery failed"),
                        _ => {}
                    },
                    Err(e) => last_error = Some(e),
                }
            }
        }
        let targets: Vec<SocketAddr> = match &discovered {
            Some((found, _)) => {
                let mut usable: Vec<(NodeDistance, SocketAddr)> = found
                    .iter()
                    .map(|n| (config.distance.distance(n), n.address))
                    .filter(|(d, _)| *d != NodeDistance::Ignored)
                    .collect();
                usable.sort();
                usable.into_iter().map(|(_, a)| a).collect()
            }
            None => addrs,
        };
        let mut nodes = Vec::new();
        for addr in targets {
            let mut conns = Vec::new();
            for _ in 0..config.connections_per_node {
                match Connection::open(addr, &config.connection).await {
                    Ok(c) => conns.push(c),
                    Err(e) => {
                        tracing::warn!(%addr, error = %e, "cannot connect");
                        last_error = Some(e);
                        break;
                    }
                }
            }
            nodes.push(Arc::new(NodePool {
                addr,
                connections: RwLock::new(conns),
                refilling: AtomicBool::new(false),
                next: AtomicUsize::new(0),
                up: AtomicBool::new(true),
            }));
        }
        if nodes.iter().all(|n| n.connection().is_none()) {
            return Err(NewSessionError::Connect(last_error.unwrap_or(ConnectionError::Closed)));
        }
        let routing = discovered.map(|(found, keyspaces)| Routing {
            ring: Arc::new(TokenRing::new(found.iter().map(NodeInfo::ring_node).collect())),
            pool_of: found.iter().map(|n| nodes.iter().position(|p: &Arc<NodePool>| p.addr == n.address)).collect(),
            strategies: RwLock::new(keyspaces),
            tables: RwLock::new(HashMap::new()),
        });
        let (shutdown, shutdown_rx) = tokio::sync::watch::channel(());
        let session = Session {
            inner: Arc::new(SessionInner {
                keyspace: RwLock::new(None),
                config,
                nodes,
                routing,
                next_node: AtomicUsize::new(0),
                prepared: Mutex::new(HashMap::new()),
                metrics: Metrics::default(),
                events: broadcast::channel(256).0,
                _shutdown: shutdown,
            }),
        };
        if let Some(ks) = session.inner.config.keyspace.clone() {
            session.use_keyspace(&ks).await.map_err(NewSessionError::UseKeyspace)?;
        }
        for node in &session.inner.nodes {
            session.refill(node);
        }
        tokio::spawn(control_connection(Arc::downgrade(&session.inner), shutdown_rx));
        Ok(session)
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

    /// The nodes this session talks to.
    pub fn nodes(&self) -> Vec<SocketAddr> {
        self.inner.nodes.iter().map(|n| n.addr).collect()
    }

    /// The open connections to every node (for tools that need to pick one).
    pub fn connections(&self) -> Vec<Connection> {
        self.inner
            .nodes
            .iter()
            .flat_map(|n| n.connections.read().unwrap_or_else(|e| e.into_inner()).clone())
            .filter(|c| !c.is_closed())
            .collect()
    }

    /// A copy of the request counters and latency histogram.
    pub fn metrics(&self) -> MetricsSnapshot {
        self.inner.metrics.snapshot()
    }

    /// Opens missing connections to `node` in the background, with backoff.
    fn refill(&self, node: &Arc<NodePool>) {
        let target = self.inner.config.connections_per_node;
        if !node.needs_refill(target) || node.refilling.swap(true, Ordering::AcqRel) {
            return;
        }
        let weak = Arc::downgrade(&self.inner);
        let node = node.clone();
        tokio::spawn(async move {
            let mut backoff = Duration::from_millis(100);
            loop {
                let Some(inner) = weak.upgrade() else { return };
                if !node.needs_refill(target) {
                    node.refilling.store(false, Ordering::Release);
                    // A connection may have closed right after the check.
                    if !node.needs_refill(target) || node.refilling.swap(true, Ordering::AcqRel) {
                        return;
                    }
                }
                let per_shard = inner.config.connections_per_node;
                let attempt = match node.missing_shard(per_shard) {
                    Some((shard, sharding)) => open_to_shard(node.addr, shard, &sharding, &inner.config.connection).await,
                    None => Connection::open(node.addr, &inner.config.connection).await,
                };
                match attempt {
                    Ok(conn) => {
                        let ks = inner.keyspace.read().unwrap_or_else(|e| e.into_inner()).clone();
                        if let Some(ks) = ks {
                            if let Err(e) = use_keyspace_on(&conn, &ks).await {
                                tracing::warn!(addr = %node.addr, error = %e, "USE failed on a new connection");
                                continue;
                            }
                        }
                        let mut conns = node.connections.write().unwrap_or_else(|e| e.into_inner());
                        conns.retain(|c| !c.is_closed());
                        // Through the regular port the server picks the shard: drop a
                        // connection that landed on a shard already served.
                        let surplus = conn.sharding().is_some()
                            && conns.iter().filter(|c| c.shard() == conn.shard()).count() >= per_shard;
                        if !surplus {
                            inner.emit(SessionEvent::ConnectionOpened(node.addr));
                            if !node.up.swap(true, Ordering::AcqRel) {
                                inner.emit(SessionEvent::NodeUp(node.addr));
                            }
                            conns.push(conn);
                        }
                        backoff = Duration::from_millis(100);
                    }
                    Err(e) => {
                        tracing::debug!(addr = %node.addr, error = %e, ?backoff, "reconnect failed");
                        inner.emit(SessionEvent::ConnectionFailed { node: node.addr, error: e.to_string() });
                        drop(inner);
                        tokio::time::sleep(backoff).await;
                        backoff = (backoff * 2).min(Duration::from_secs(10));
                    }
                }
            }
        });
    }

    /// Prepares a statement (once per text: prepared statements are cached).
    pub async fn prepare(&self, statement: impl Into<Statement>) -> Result<PreparedStatement, ExecutionError> {
        let statement = statement.into();
        let cached = self.inner.prepared.lock().unwrap_or_else(|e| e.into_inner()).get(statement.text()).cloned();
        if let Some(p) = cached {
            return Ok(with_options(p, &statement));
        }
        let seed = self.inner.next_node.fetch_add(1, Ordering::Relaxed);
        let (node, conn) = self.pick(seed, 0, None)?;
        let p = match conn.prepare(statement.text()).await {
            Ok(p) => p,
            Err(e) => {
                self.note_failure(&node, &conn);
                return Err(e);
            }
        };
        // Prepare on the other nodes too, so EXECUTE works wherever it goes.
        for other in &self.inner.nodes {
            if !Arc::ptr_eq(other, &node) {
                if let Some(c) = other.connection() {
                    let _ = c.prepare(statement.text()).await;
                }
            }
        }
        self.inner.prepared.lock().unwrap_or_else(|e| e.into_inner()).insert(statement.text().to_owned(), p.clone());
        Ok(with_options(p, &statement))
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
            self.refresh_keyspaces().await;
        }
        Ok(result)
    }

    /// Re-reads every keyspace's replication (after a schema change).
    async fn refresh_keyspaces(&self) {
        let Some(routing) = &self.inner.routing else { return };
        let Ok((_, conn)) = self.pick(0, 0, None) else { return };
        match fetch_keyspaces(&conn).await {
            Ok(keyspaces) => {
                *routing.strategies.write().unwrap_or_else(|e| e.into_inner()) = keyspaces;
                routing.tables.write().unwrap_or_else(|e| e.into_inner()).clear();
            }
            Err(e) => tracing::warn!(error = %e, "cannot refresh keyspaces"),
        }
    }

    /// The nodes (in token-aware order) a request for `token` in `keyspace`
    /// would try first: its replicas. Empty without topology or replication
    /// information.
    pub fn replicas(&self, keyspace: &str, token: Token) -> Vec<SocketAddr> {
        let Some(routing) = &self.inner.routing else { return Vec::new() };
        let Some(table) = routing.table(keyspace) else { return Vec::new() };
        table
            .replicas(token)
            .iter()
            .filter_map(|r| routing.pool_of.get(*r).copied().flatten())
            .map(|p| self.inner.nodes[p].addr)
            .collect()
    }

    /// Iterates over every page of a statement's result.
    pub fn execute_iter<E: Executable<V>, V>(&self, statement: E, values: V) -> Pager<E, V> {
        Pager { session: self.clone(), statement, values, state: None, done: false }
    }

    /// Picks the node for attempt `offset` of a request: its replicas first
    /// (rotated by `seed` so no replica takes every first attempt), then the
    /// other nodes round-robin; nodes without a live connection are skipped.
    fn pick(
        &self,
        seed: usize,
        offset: usize,
        route: Option<(&str, Token)>,
    ) -> Result<(Arc<NodePool>, Connection), ExecutionError> {
        let nodes = &self.inner.nodes;
        if let (Some((keyspace, token)), Some(routing)) = (route, &self.inner.routing) {
            if let Some(table) = routing.table(keyspace) {
                let replicas = table.replicas(token);
                let n = replicas.len();
                for i in offset..n {
                    let r = replicas[(seed + i) % n];
                    let Some(pool) = routing.pool_of.get(r).copied().flatten() else { continue };
                    let node = &nodes[pool];
                    match node.connection_for(Some(token)) {
                        Some(c) => return Ok((node.clone(), c)),
                        None => self.node_unavailable(node),
                    }
                }
            }
        }
        let start = seed + offset;
        let token = route.map(|(_, t)| t);
        for i in 0..nodes.len() {
            let node = &nodes[(start + i) % nodes.len()];
            match node.connection_for(token) {
                Some(c) => return Ok((node.clone(), c)),
                None => self.node_unavailable(node),
            }
        }
        Err(ExecutionError::NoConnection)
    }

    fn node_unavailable(&self, node: &Arc<NodePool>) {
        if node.up.swap(false, Ordering::AcqRel) {
            self.inner.emit(SessionEvent::NodeDown(node.addr));
        }
        self.refill(node);
    }

    fn note_failure(&self, node: &Arc<NodePool>, conn: &Connection) {
        if conn.is_closed() {
            self.refill(node);
        }
    }

    async fn run<E: Executable<V>, V>(&self, statement: &E, values: &V, params: Params<'_>) -> Result<QueryResult, ExecutionError> {
        let idempotent = statement.options().idempotent;
        let speculative = self.inner.config.speculative.filter(|_| idempotent && self.inner.nodes.len() > 1);
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
        let mut offset = node_offset;
        let seed = self.inner.next_node.fetch_add(1, Ordering::Relaxed);
        let route = statement.route(values);
        let (mut node, mut conn) = self.pick(seed, offset, route)?;
        loop {
            let error = match self.attempt(&conn, statement, values, params).await {
                Ok(r) => return Ok(r),
                Err(e) => e,
            };
            self.note_failure(&node, &conn);
            match self.inner.config.retry_policy.decide(&error, retries, idempotent) {
                RetryDecision::DontRetry => return Err(error),
                RetryDecision::RetrySameNode => {
                    if let Some(c) = node.connection() {
                        conn = c;
                    }
                }
                RetryDecision::RetryNextNode => {
                    offset += 1;
                    (node, conn) = self.pick(seed, offset, route).map_err(|_| error.clone())?;
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
        let result = conn.execute(statement, values, params).await?;
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
    async fn schema_version_if_agreed(&self) -> Result<Option<Uuid>, ExecutionError> {
        let query = Statement::new("SELECT schema_version FROM system.local WHERE key = 'local'");
        let mut versions: Vec<Uuid> = Vec::new();
        let mut asked = 0;
        for node in &self.inner.nodes {
            let Some(conn) = node.connection() else { continue };
            asked += 1;
            let result = conn.execute(&query, &(), Params::new(Consistency::One)).await?;
            let row = result.first_row::<(Option<Uuid>,)>().map_err(|_| ExecutionError::UnexpectedResponse("schema version rows"))?;
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

/// Keeps one connection registered for server events, moving to another
/// node when it closes; forwards events and reacts to them (schema changes
/// refresh replication, a node coming up is reconnected at once).
async fn control_connection(weak: std::sync::Weak<SessionInner>, mut shutdown: tokio::sync::watch::Receiver<()>) {
    let mut next = 0usize;
    loop {
        let Some(inner) = weak.upgrade() else { return };
        let session = Session { inner };
        let conn = session.inner.nodes.iter().cycle().skip(next).take(session.inner.nodes.len()).find_map(|n| n.connection());
        next += 1;
        let Some(conn) = conn else {
            drop(session);
            tokio::time::sleep(Duration::from_millis(500)).await;
            continue;
        };
        let mut events = conn.events();
        let register = Register { events: vec!["TOPOLOGY_CHANGE", "STATUS_CHANGE", "SCHEMA_CHANGE"] };
        let registered = match conn.send(&register, 0).await.map(Response::from_envelope) {
            Ok(Ok(Response { message: ResponseMessage::Ready, .. })) => true,
            other => {
                tracing::debug!(addr = %conn.addr(), ?other, "REGISTER failed");
                false
            }
        };
        if !registered {
            drop(session);
            tokio::time::sleep(Duration::from_millis(500)).await;
            continue;
        }
        session.inner.emit(SessionEvent::ControlConnectionChanged(conn.addr()));
        let weak_inner = Arc::downgrade(&session.inner);
        drop(session);
        loop {
            let event = tokio::select! {
                e = events.recv() => e,
                _ = conn.closed() => break,
                // The session is gone: let go of its connection.
                _ = shutdown.changed() => return,
            };
            let Some(inner) = weak_inner.upgrade() else { return };
            let event = match event {
                Ok(e) => e,
                Err(broadcast::error::RecvError::Lagged(_)) => continue,
                Err(broadcast::error::RecvError::Closed) => break,
            };
            let session = Session { inner };
            match &event {
                Event::SchemaChange(_) => session.refresh_keyspaces().await,
                Event::StatusChange { change, node } if change == "UP" => {
                    for pool in session.inner.nodes.iter().filter(|p| p.addr.ip() == node.ip()) {
                        session.refill(pool);
                    }
                }
                _ => {}
            }
            session.inner.emit(SessionEvent::Database(event));
        }
    }
}

/// Opens a connection served by `shard`: through the shard-aware port from
/// a local port that maps to it (trying the candidates from a random start),
/// else through the regular port, where the server picks the shard.
async fn open_to_shard(
    addr: SocketAddr,
    shard: u16,
    sharding: &ShardingInfo,
    config: &ConnectionConfig,
) -> Result<Connection, ConnectionError> {
    if let Some(port) = sharding.shard_aware_port_for(config.tls.is_some()) {
        let target = SocketAddr::new(addr.ip(), port);
        let start = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.subsec_nanos() as usize);
        let nr = sharding.sharder().nr_shards();
        for local in ShardPortIterator::new(shard, nr, 49152..=65535, start).take(8) {
            match Connection::open_from(target, Some(local), config).await {
                Ok(conn) if conn.shard() == shard => return Ok(conn),
                Ok(conn) => {
                    // The port was rewritten on the way (NAT): the shard-aware port is of no use.
                    tracing::warn!(%addr, wanted = shard, got = conn.shard(), "shard-aware port gave another shard");
                    return Ok(conn);
                }
                Err(ConnectionError::Io(e))
                    if matches!(
                        e.kind(),
                        std::io::ErrorKind::AddrInUse | std::io::ErrorKind::AddrNotAvailable | std::io::ErrorKind::PermissionDenied
                    ) => {}
                Err(e) => {
                    tracing::debug!(%addr, error = %e, "shard-aware port failed, using the regular port");
                    break;
                }
            }
        }
    }
    Connection::open(addr, config).await
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
