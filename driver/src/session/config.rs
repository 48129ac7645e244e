//! The session's settings ([`SessionConfig`]) and the builder that collects
//! them ([`SessionBuilder`]): everything a session is told before it
//! connects, kept apart from what it does with it.

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use shardwise_protocol::consistency::Consistency;
use shardwise_protocol::frame::ProtocolVersion;

use super::trace::TracingInfoFetch;
use super::Session;
use crate::affinity::ConnectionAffinity;
use crate::auth::{AuthenticatorProvider, PlainTextAuthenticator};
use crate::cluster::{AddressTranslator, ClientRoutesConfig, DistancePolicy, HostFilter, NodeDistance};
use crate::config::{Compression, ConnectionConfig, SelfIdentity, TlsConfig};
use crate::error::NewSessionError;
use crate::latency::LatencyAwareness;
use crate::load_balancing::LoadBalancingPolicy;
use crate::observer::RequestObserver;
use crate::pool::slots::Sizes;
use crate::profile::{ExecutionProfile, ExecutionProfileHandle, SpeculativePolicy};
use crate::retry::{DefaultRetryPolicy, RetryPolicy};
use crate::timestamp::TimestampGenerator;

/// How many connections a node gets, in the official driver's words
/// ([`SessionBuilder::pool_size`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PoolSize {
    /// That many for each shard of a sharded node (for the node, on one
    /// that is not sharded).
    PerShard(std::num::NonZeroUsize),
    /// That many for each node, a sharded one's spread over its shards in
    /// turn.
    PerHost(std::num::NonZeroUsize),
}

/// Session settings. Build with [`SessionBuilder`].
#[derive(Debug, Clone)]
pub struct SessionConfig {
    /// Contact points (`host:port`).
    pub known_nodes: Vec<String>,
    /// How connections are opened. A session that discovers its cluster
    /// through a contact point lowers `max_version` to the version that
    /// contact point agreed on, so later connections do not ask again for
    /// a version the cluster refused.
    pub connection: ConnectionConfig,
    /// Connections to each local node (see [`NodeDistance::Local`]): per
    /// shard on a sharded (Scylla) node, per node otherwise, and then at
    /// least one per runtime worker with [`ConnectionAffinity::Auto`], the
    /// default. When the distance policy names no local datacenter every
    /// node is local.
    pub connections_per_node: usize,
    /// Connections to each remote node (see [`NodeDistance::Remote`]): per
    /// shard on a sharded node, per node otherwise. Remote nodes are only
    /// fallbacks, so the default is 1. Ignored nodes get none.
    pub remote_connections_per_node: usize,
    /// Whether `connections_per_node` and `remote_connections_per_node`
    /// count a sharded node's connections in all, spread over its shards in
    /// turn (the official `PoolSize::PerHost`; a shard left without one is
    /// served by another's connection), instead of per shard (`false`, the
    /// default, as the official `PoolSize::PerShard`). See
    /// [`SessionBuilder::pool_size`].
    pub connections_per_host: bool,
    /// Which of those connections a request takes.
    pub connection_affinity: ConnectionAffinity,
    /// Keyspace to `USE` on every connection.
    pub keyspace: Option<String>,
    /// Whether [`keyspace`](Self::keyspace) is taken as written (quoted)
    /// or, as CQL takes an unquoted name, in lower case.
    pub keyspace_case_sensitive: bool,
    /// Default consistency.
    pub consistency: Consistency,
    /// Default serial consistency.
    pub serial_consistency: Option<Consistency>,
    /// Default page size.
    pub page_size: i32,
    /// Default request timeout: bounds the whole request, every attempt,
    /// retry and speculative execution included, as the official drivers'
    /// request timeout does. When it fires the request ends with
    /// [`ExecutionError::Timeout`](crate::ExecutionError::Timeout), whatever
    /// the retry policy would have decided.
    pub request_timeout: Option<Duration>,
    /// Default timeout of each attempt (one request sent to one node) of an
    /// idempotent statement; a statement that is not idempotent has an
    /// attempt timeout only when it sets one itself
    /// ([`StatementOptions::attempt_timeout`](crate::StatementOptions::attempt_timeout)),
    /// and otherwise runs to the request timeout (a TRUNCATE, a long
    /// aggregate or `USING TIMEOUT` are not cut short). An attempt without
    /// an answer in time fails with
    /// [`ExecutionError::AttemptTimeout`](crate::ExecutionError::AttemptTimeout),
    /// which the retry policy sees like any other failure: the default
    /// policy retries an idempotent statement on the next node of the plan
    /// and returns the error for any other statement (it may have been
    /// applied). The request as a whole stays bounded by
    /// [`request_timeout`](Self::request_timeout) and by the policy's
    /// retry budget; an attempt timeout at or above the request timeout
    /// never fires. The default, 12 s as the DataStax drivers' read
    /// timeout, is above the servers' own timeouts (2 s for writes, 5 s for
    /// reads, 10 s for range scans), so a node that is alive but slow
    /// answers with its own timeout error first; `None`: attempts are only
    /// bounded by the request timeout.
    pub attempt_timeout: Option<Duration>,
    /// The session's default profile as a handle that can be re-pointed
    /// at run time ([`SessionBuilder::default_execution_profile_handle`]):
    /// consulted after a statement's profile, before the settings here.
    pub default_profile_handle: Option<ExecutionProfileHandle>,
    /// Retry policy.
    pub retry_policy: Arc<dyn RetryPolicy>,
    /// Speculative execution, for idempotent statements.
    pub speculative: Option<SpeculativePolicy>,
    /// Wait for schema agreement after DDL.
    pub await_schema_agreement: bool,
    /// How long to wait for schema agreement (all of it: the nodes' answers
    /// included). 60 s by default, as the official driver.
    pub schema_agreement_timeout: Duration,
    /// How long a contact point's name may take to resolve (`None`: as long
    /// as the resolver takes). 5 s by default, as the official driver.
    pub hostname_resolution_timeout: Option<Duration>,
    /// How [`Session::tracing_info`](crate::Session::tracing_info) reads a
    /// trace: how often the session row is read before the trace counts as
    /// incomplete (10), how long apart (3 ms), and at what consistency
    /// (ONE), as the official driver's `tracing_info_fetch_*` settings.
    pub tracing_info_fetch: TracingInfoFetch,
    /// How long the session's own queries of system tables may take
    /// (topology and schema refreshes, a table's partitioner, REGISTER on
    /// the control connection): a node that stops answering must not hold
    /// the refresh lock.
    pub system_query_timeout: Duration,
    /// The most prepared statements the session's cache keeps (the
    /// official `CachingSession`'s size): beyond it, the one used least
    /// recently is dropped (it stays valid where it is held; asked for
    /// again, it is prepared again). `None` (the default): no bound.
    /// Statements run with values but not prepared (`Statement`s) go
    /// through this cache too.
    pub prepared_cache_capacity: Option<usize>,
    /// Discover the cluster's nodes from the contact points and route by token.
    pub discover_topology: bool,
    /// The keyspaces whose replication (for routing by replica), table
    /// partitioners and schema metadata the session reads; empty (the
    /// default): every keyspace. Requests to a keyspace left out still
    /// work, routed to any node (a table with tablets still learns its
    /// tablets from the answers). As the official driver's
    /// `keyspaces_to_fetch`: for a cluster with many keyspaces of which a
    /// service uses few.
    pub keyspaces_to_fetch: Vec<String>,
    /// Which nodes get connections, and in which order they are tried.
    pub distance: DistancePolicy,
    /// Latency awareness: nodes much slower than the fastest are tried
    /// after the others; `None` (the default, as in the official drivers):
    /// off.
    pub latency_awareness: Option<LatencyAwareness>,
    /// Re-read the topology and schema at this interval (besides after
    /// topology and status events); `None`: only after events.
    pub topology_refresh_interval: Option<Duration>,
    /// How long to wait after a topology or status event before re-reading
    /// the topology (events are hints, and the peers table of a joining
    /// node fills in over a moment); events within the delay share one
    /// refresh.
    pub topology_event_delay: Duration,
    /// Turns the addresses of the peers tables (and of status events) into
    /// ones this client can reach; `None`: used as given. See
    /// [`AddressTranslator`].
    pub address_translator: Option<Arc<dyn AddressTranslator>>,
    /// Follow ScyllaDB's client routes of these connection ids
    /// (`system.client_routes`, PrivateLink-style endpoints): every node,
    /// the contact point's included, is reached at its route, and routes
    /// are followed as they change. `None` (the default): off. Not with
    /// an [`address_translator`](Self::address_translator) (the routes are
    /// the translation), and without the shard-aware port (an endpoint
    /// forwards one port). See [`ClientRoutesConfig`].
    pub client_routes: Option<ClientRoutesConfig>,
    /// Nodes the session may use at all, decided by code; refused ones
    /// are ignored. `None`: every node (the distance policy still
    /// applies). See [`HostFilter`].
    pub host_filter: Option<Arc<dyn HostFilter>>,
    /// Timestamps for requests without their own; `None` (the default):
    /// the coordinator stamps each write. See [`TimestampGenerator`].
    pub timestamp_generator: Option<Arc<dyn TimestampGenerator>>,
    /// An observer of every request's attempts (a profile's wins); `None`
    /// (the default): none. See [`crate::observer`].
    pub observer: Option<Arc<dyn RequestObserver>>,
    /// The application's load-balancing policy; `None` (the default): the
    /// built-in plan. See [`crate::load_balancing`].
    pub load_balancing: Option<Arc<dyn LoadBalancingPolicy>>,
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

    /// The pool of a node at `distance` (not ignored), on a runtime of
    /// `workers` worker threads: how many connections it gets (see
    /// [`SessionConfig::connections_per_node`]), and how requests choose
    /// between them. [`ConnectionAffinity::Auto`] shares the connections
    /// of a node given more than one per worker.
    pub(crate) fn pool_shape(&self, distance: NodeDistance, workers: usize) -> (Sizes, ConnectionAffinity) {
        let n = self.connections_for(distance).max(1);
        let per_node = match (self.connection_affinity, distance) {
            (ConnectionAffinity::Auto, NodeDistance::Local) => n.max(workers),
            _ => n,
        };
        let affinity = match self.connection_affinity {
            ConnectionAffinity::Auto if per_node > workers => ConnectionAffinity::LeastLoaded,
            affinity => affinity,
        };
        (Sizes { per_shard: n, per_node, per_host: self.connections_per_host.then_some(n) }, affinity)
    }
}

impl Default for SessionConfig {
    fn default() -> Self {
        SessionConfig {
            known_nodes: Vec::new(),
            connection: ConnectionConfig::default(),
            connections_per_node: 1,
            remote_connections_per_node: 1,
            connections_per_host: false,
            connection_affinity: ConnectionAffinity::Auto,
            keyspace: None,
            keyspace_case_sensitive: false,
            consistency: Consistency::LocalQuorum,
            serial_consistency: Some(Consistency::LocalSerial),
            page_size: 5000,
            request_timeout: Some(Duration::from_secs(30)),
            attempt_timeout: Some(Duration::from_secs(12)),
            default_profile_handle: None,
            retry_policy: Arc::new(DefaultRetryPolicy),
            speculative: None,
            await_schema_agreement: true,
            schema_agreement_timeout: Duration::from_secs(60),
            hostname_resolution_timeout: Some(crate::cluster::topology::RESOLVE_TIMEOUT),
            tracing_info_fetch: TracingInfoFetch::default(),
            system_query_timeout: Duration::from_secs(10),
            discover_topology: true,
            keyspaces_to_fetch: Vec::new(),
            prepared_cache_capacity: None,
            distance: DistancePolicy::default(),
            latency_awareness: None,
            topology_refresh_interval: Some(Duration::from_secs(60)),
            topology_event_delay: Duration::from_secs(1),
            address_translator: None,
            client_routes: None,
            host_filter: None,
            timestamp_generator: None,
            observer: None,
            load_balancing: None,
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
///
/// The connection settings the builder sets one by one ([`compression`],
/// [`user`], [`authenticator`], [`protocol_versions`], [`tls`]) win over a whole
/// [`ConnectionConfig`] given to [`connection_config`], whichever comes
/// first.
///
/// [`compression`]: SessionBuilder::compression
/// [`tls`]: SessionBuilder::tls
/// [`user`]: SessionBuilder::user
/// [`authenticator`]: SessionBuilder::authenticator
/// [`protocol_versions`]: SessionBuilder::protocol_versions
/// [`connection_config`]: SessionBuilder::connection_config
#[derive(Debug, Clone, Default)]
pub struct SessionBuilder {
    config: SessionConfig,
    /// The connection settings set one by one, re-applied over a later
    /// [`SessionBuilder::connection_config`].
    set: ConnectionSettings,
}

/// Connection settings given to the builder one by one.
#[derive(Debug, Clone, Default)]
struct ConnectionSettings {
    compression: Option<Compression>,
    authenticator: Option<Arc<dyn AuthenticatorProvider>>,
    versions: Option<(ProtocolVersion, ProtocolVersion)>,
    tls: Option<TlsConfig>,
    shard_aware_port: Option<bool>,
    tablets_routing_v2: Option<bool>,
    identity: Option<SelfIdentity>,
    nodelay: Option<bool>,
    port_range: Option<crate::ShardAwarePortRange>,
    local_ip: Option<Option<IpAddr>>,
    keepalive: Option<Duration>,
}

impl ConnectionSettings {
    fn apply(&self, c: &mut ConnectionConfig) {
        if let Some(compression) = self.compression {
            c.compression = compression;
        }
        if let Some(a) = &self.authenticator {
            c.authenticator = Some(a.clone());
        }
        if let Some((min, max)) = self.versions {
            c.min_version = min;
            c.max_version = max;
        }
        if let Some(tls) = &self.tls {
            c.tls = Some(tls.clone());
        }
        if let Some(on) = self.shard_aware_port {
            c.shard_aware_port = on;
        }
        if let Some(on) = self.tablets_routing_v2 {
            c.tablets_routing_v2 = on;
        }
        if let Some(identity) = &self.identity {
            c.identity = identity.clone();
        }
        if let Some(on) = self.nodelay {
            c.tcp_nodelay = on;
        }
        if let Some(range) = &self.port_range {
            c.shard_aware_local_port_range = range.clone();
        }
        if let Some(ip) = self.local_ip {
            c.socket.local_ip_address = ip;
        }
        if let Some(interval) = self.keepalive {
            c.socket.keepalive_interval = Some(interval);
        }
    }
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
        self.set.compression = Some(c);
        self.set.apply(&mut self.config.connection);
        self
    }
    /// Username/password authentication.
    pub fn user(self, username: impl Into<String>, password: impl Into<String>) -> Self {
        self.authenticator(Arc::new(PlainTextAuthenticator::new(username, password)))
    }
    /// TLS on every connection (see [`TlsConfig`]).
    pub fn tls(mut self, tls: TlsConfig) -> Self {
        self.set.tls = Some(tls);
        self.set.apply(&mut self.config.connection);
        self
    }
    /// Whether to keep away from the nodes' shard-aware port (as the
    /// official driver's method of this name): with `true`, connections go
    /// to the regular port only (see [`ConnectionConfig::shard_aware_port`]).
    pub fn disallow_shard_aware_port(mut self, disallow: bool) -> Self {
        self.set.shard_aware_port = Some(!disallow);
        self.set.apply(&mut self.config.connection);
        self
    }
    /// Whether to negotiate ScyllaDB's experimental tablets routing v2
    /// where nodes offer it (see [`ConnectionConfig::tablets_routing_v2`];
    /// off by default).
    pub fn tablets_routing_v2(mut self, on: bool) -> Self {
        self.set.tablets_routing_v2 = Some(on);
        self.set.apply(&mut self.config.connection);
        self
    }
    /// Who the driver says it is on every connection (the official
    /// driver's `custom_identity`): an application name and version, a
    /// client id, another driver name ([`SelfIdentity`]).
    pub fn custom_identity(mut self, identity: SelfIdentity) -> Self {
        self.set.identity = Some(identity);
        self.set.apply(&mut self.config.connection);
        self
    }
    /// The local ports connections to a shard-aware port are made from
    /// (49152..=65535 by default), as the official driver's method of this
    /// name: for hosts whose firewall or other services leave a narrower
    /// range free.
    pub fn shard_aware_local_port_range(mut self, range: crate::ShardAwarePortRange) -> Self {
        self.set.port_range = Some(range);
        self.set.apply(&mut self.config.connection);
        self
    }
    /// Whether connections disable Nagle's algorithm (the default: they
    /// do), as the official driver's `tcp_nodelay`.
    pub fn tcp_nodelay(mut self, nodelay: bool) -> Self {
        self.set.nodelay = Some(nodelay);
        self.set.apply(&mut self.config.connection);
        self
    }
    /// The local address every connection is made from (`None`: the
    /// system's choice, the default), as the official driver's
    /// `local_ip_address`; it must be of the nodes' address family (see
    /// [`SocketOptions`](crate::SocketOptions) for the other
    /// socket options).
    pub fn local_ip_address(mut self, ip: Option<impl Into<IpAddr>>) -> Self {
        self.set.local_ip = Some(ip.map(Into::into));
        self.set.apply(&mut self.config.connection);
        self
    }
    /// TCP keepalive on every connection, probing after this long idle and
    /// then every this long (off by default), as the official driver's
    /// `tcp_keepalive_interval`; besides the CQL heartbeat
    /// ([`ConnectionConfig::heartbeat_interval`]), it keeps idle
    /// connections through firewalls and NAT that forget them.
    pub fn tcp_keepalive_interval(mut self, interval: Duration) -> Self {
        self.set.keepalive = Some(interval);
        self.set.apply(&mut self.config.connection);
        self
    }
    /// The session's default execution profile as a handle: what the
    /// profile it points to sets is the session's default (statements and
    /// their own profiles still win), and re-pointing it
    /// ([`ExecutionProfileHandle::map_to_another_profile`]) changes the
    /// defaults of the requests that start afterwards, as the official
    /// driver's default handle does. Each request then reads the handle
    /// once.
    pub fn default_execution_profile_handle(mut self, handle: ExecutionProfileHandle) -> Self {
        self.config.default_profile_handle = Some(handle);
        self
    }
    /// The session's default execution profile: what it sets becomes the
    /// session's default (statements and their own profiles still win).
    pub fn default_profile(mut self, p: &ExecutionProfile) -> Self {
        let c = &mut self.config;
        if let Some(v) = p.consistency {
            c.consistency = v;
        }
        if let Some(v) = p.serial_consistency {
            c.serial_consistency = v;
        }
        if let Some(v) = p.request_timeout {
            c.request_timeout = v;
        }
        if let Some(v) = p.attempt_timeout {
            c.attempt_timeout = v;
        }
        if let Some(v) = &p.retry_policy {
            c.retry_policy = v.clone();
        }
        if let Some(v) = p.speculative {
            c.speculative = v;
        }
        if let Some(v) = p.latency_awareness {
            c.latency_awareness = v;
        }
        if let Some(v) = &p.observer {
            c.observer = Some(v.clone());
        }
        if let Some(v) = &p.load_balancing {
            c.load_balancing = Some(v.clone());
        }
        self
    }
    /// Custom authentication.
    pub fn authenticator(mut self, a: Arc<dyn AuthenticatorProvider>) -> Self {
        self.set.authenticator = Some(a);
        self.set.apply(&mut self.config.connection);
        self
    }
    /// Protocol versions to negotiate between.
    pub fn protocol_versions(mut self, min: ProtocolVersion, max: ProtocolVersion) -> Self {
        self.set.versions = Some((min, max));
        self.set.apply(&mut self.config.connection);
        self
    }
    /// The keyspace every connection uses (`USE`), as the official driver's
    /// method of this name: with `case_sensitive` the name is taken as
    /// written (quoted), else in lower case, as CQL takes an unquoted name
    /// (which must then be letters, digits and underscores). A keyspace
    /// that cannot be used fails [`build`](Self::build) with
    /// [`NewSessionError::UseKeyspace`].
    pub fn use_keyspace(mut self, keyspace: impl Into<String>, case_sensitive: bool) -> Self {
        self.config.keyspace = Some(keyspace.into());
        self.config.keyspace_case_sensitive = case_sensitive;
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
    /// Default request timeout, retries included (`None`: wait forever);
    /// see [`SessionConfig::request_timeout`].
    pub fn request_timeout(mut self, t: Option<Duration>) -> Self {
        self.config.request_timeout = t;
        self
    }
    /// Default timeout of each attempt (`None`: only the request timeout);
    /// see [`SessionConfig::attempt_timeout`].
    pub fn attempt_timeout(mut self, t: Option<Duration>) -> Self {
        self.config.attempt_timeout = t;
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
    /// The local nodes' pool size as the official builder's `pool_size`
    /// says it: [`PoolSize::PerShard`] is
    /// [`connections_per_node`](Self::connections_per_node);
    /// [`PoolSize::PerHost`] counts a sharded node's connections in all
    /// ([`SessionConfig::connections_per_host`], which applies to remote
    /// nodes' count too).
    pub fn pool_size(mut self, size: PoolSize) -> Self {
        let (n, per_host) = match size {
            PoolSize::PerShard(n) => (n, false),
            PoolSize::PerHost(n) => (n, true),
        };
        self.config.connections_per_node = n.get();
        self.config.connections_per_host = per_host;
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
    /// Which of a node's (a shard's) connections a request takes; see
    /// [`ConnectionAffinity`].
    pub fn connection_affinity(mut self, affinity: ConnectionAffinity) -> Self {
        self.config.connection_affinity = affinity;
        self
    }
    /// Connection settings (timeouts, heartbeat, buffers, TLS, ...). The
    /// settings given one by one ([`SessionBuilder::compression`],
    /// [`SessionBuilder::user`], [`SessionBuilder::authenticator`],
    /// [`SessionBuilder::protocol_versions`]) are kept, before or after.
    pub fn connection_config(mut self, c: ConnectionConfig) -> Self {
        self.config.connection = c;
        self.set.apply(&mut self.config.connection);
        self
    }
    /// Whether to discover the cluster and route requests to replicas.
    pub fn discover_topology(mut self, on: bool) -> Self {
        self.config.discover_topology = on;
        self
    }
    /// Bounds the session's cache of prepared statements
    /// ([`SessionConfig::prepared_cache_capacity`]); `None`: no bound (the
    /// default).
    pub fn prepared_cache_capacity(mut self, capacity: Option<usize>) -> Self {
        self.config.prepared_cache_capacity = capacity;
        self
    }
    /// Reads the replication, partitioners and schema metadata of these
    /// keyspaces only ([`SessionConfig::keyspaces_to_fetch`]); none: every
    /// keyspace (the default).
    pub fn keyspaces_to_fetch(mut self, keyspaces: impl IntoIterator<Item = impl Into<String>>) -> Self {
        self.config.keyspaces_to_fetch = keyspaces.into_iter().map(Into::into).collect();
        self
    }
    /// Prefers the nodes of `rack` in `datacenter`, then the datacenter's
    /// others, then (if the distance policy uses them) remote ones: rack
    /// awareness, on top of [`distance_policy`](Self::distance_policy).
    pub fn local_rack(mut self, datacenter: impl Into<String>, rack: impl Into<String>) -> Self {
        self.config.distance.local_datacenter = Some(datacenter.into());
        self.config.distance.local_rack = Some(rack.into());
        self
    }

    /// Latency awareness (`None`: off); an execution profile can override it.
    pub fn latency_awareness(mut self, l: Option<LatencyAwareness>) -> Self {
        self.config.latency_awareness = l;
        self
    }

    /// Translates the addresses the cluster gives for its nodes into ones
    /// this client reaches (NAT, a proxy per node); the contact points are
    /// used as given. See [`AddressTranslator`].
    ///
    /// ```
    /// use std::collections::HashMap;
    /// use std::net::SocketAddr;
    /// use std::sync::Arc;
    ///
    /// let proxies: HashMap<SocketAddr, SocketAddr> =
    ///     [("10.0.0.2:9042".parse().unwrap(), "127.0.0.1:19042".parse().unwrap())].into();
    /// let builder = shardwise::SessionBuilder::new().known_node("127.0.0.1:9042").address_translator(Arc::new(proxies));
    /// # let _ = builder;
    /// ```
    pub fn address_translator(mut self, translator: Arc<dyn AddressTranslator>) -> Self {
        self.config.address_translator = Some(translator);
        self
    }

    /// Follows ScyllaDB's client routes of `config`'s connection ids
    /// ([`SessionConfig::client_routes`]); the known nodes are the
    /// endpoints' addresses.
    ///
    /// ```
    /// use shardwise::cluster::ClientRoutesConfig;
    ///
    /// let builder = shardwise::SessionBuilder::new()
    ///     .known_node("privatelink-endpoint.example:9042")
    ///     .client_routes(ClientRoutesConfig::new(["endpoint-1"]));
    /// # let _ = builder;
    /// ```
    pub fn client_routes(mut self, config: ClientRoutesConfig) -> Self {
        self.config.client_routes = Some(config);
        self
    }

    /// Only the nodes `filter` accepts are used (the official driver's
    /// `host_filter`); see [`HostFilter`].
    pub fn host_filter(mut self, filter: Arc<dyn HostFilter>) -> Self {
        self.config.host_filter = Some(filter);
        self
    }

    /// Requests without a timestamp of their own carry one from
    /// `generator` (the official driver's `timestamp_generator`), e.g.
    /// [`MonotonicTimestampGenerator`](crate::timestamp::MonotonicTimestampGenerator);
    /// see [`TimestampGenerator`].
    pub fn timestamp_generator(mut self, generator: Arc<dyn TimestampGenerator>) -> Self {
        self.config.timestamp_generator = Some(generator);
        self
    }

    /// An observer of every request's attempts and outcome, for an
    /// application's own metrics (the official driver's history listener);
    /// see [`crate::observer`].
    pub fn request_observer(mut self, observer: Arc<dyn RequestObserver>) -> Self {
        self.config.observer = Some(observer);
        self
    }

    /// The application's own plan for each request, instead of the
    /// built-in one (token, tablet and shard aware; local rack, then
    /// datacenter, then remote). See [`crate::load_balancing`].
    pub fn load_balancing(mut self, policy: Arc<dyn LoadBalancingPolicy>) -> Self {
        self.config.load_balancing = Some(policy);
        self
    }

    /// Node distance (local datacenter and rack, allow and deny lists).
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

    /// How long to wait for schema agreement after DDL (default 60 s).
    pub fn schema_agreement_timeout(mut self, t: Duration) -> Self {
        self.config.schema_agreement_timeout = t;
        self
    }

    /// How often `tracing_info` reads a trace's session row before the
    /// trace counts as incomplete (default 10), as the official driver's
    /// method of this name.
    pub fn tracing_info_fetch_attempts(mut self, attempts: std::num::NonZeroU32) -> Self {
        self.config.tracing_info_fetch.attempts = attempts;
        self
    }

    /// The pause between two reads of a trace's session row (default
    /// 3 ms), as the official driver's method of this name.
    pub fn tracing_info_fetch_interval(mut self, interval: Duration) -> Self {
        self.config.tracing_info_fetch.interval = interval;
        self
    }

    /// The consistency a trace is read at (default ONE), as the official
    /// driver's method of this name.
    pub fn tracing_info_fetch_consistency(mut self, consistency: Consistency) -> Self {
        self.config.tracing_info_fetch.consistency = consistency;
        self
    }

    /// How long a contact point's name may take to resolve (default 5 s;
    /// `None`: no bound), as the official driver's method of this name. A
    /// name that does not resolve in time is skipped while another does.
    pub fn hostname_resolution_timeout(mut self, t: Option<Duration>) -> Self {
        self.config.hostname_resolution_timeout = t;
        self
    }

    /// How long the session's own system-table queries may take (default
    /// 10 s); see [`SessionConfig::system_query_timeout`].
    pub fn system_query_timeout(mut self, t: Duration) -> Self {
        self.config.system_query_timeout = t;
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

#[cfg(test)]
mod tests {
    use super::*;

    /// Regression: the default profile's latency awareness was dropped.
    #[test]
    fn the_default_profile_gives_every_setting_it_has() {
        let aware = LatencyAwareness::default();
        let profile = ExecutionProfile::new("p")
            .consistency(Consistency::Two)
            .request_timeout(None)
            .latency_awareness(Some(aware));
        let c = SessionBuilder::new().default_profile(&profile).config;
        assert_eq!((c.consistency, c.request_timeout), (Consistency::Two, None));
        assert_eq!(c.latency_awareness, Some(aware));
        let off = ExecutionProfile::new("off").latency_awareness(None);
        let c = SessionBuilder::new().latency_awareness(Some(aware)).default_profile(&off).config;
        assert_eq!(c.latency_awareness, None);
    }

    /// Regression: a whole `ConnectionConfig` given after `protocol_versions`
    /// (or compression, or credentials) silently dropped them.
    #[test]
    fn settings_given_one_by_one_survive_a_connection_config() {
        let timeouts = ConnectionConfig { connect_timeout: Duration::from_millis(1234), ..ConnectionConfig::default() };
        let before = SessionBuilder::new()
            .protocol_versions(ProtocolVersion::V4, ProtocolVersion::V4)
            .compression(Compression::Lz4)
            .user("u", "p")
            .connection_config(timeouts.clone());
        let after = SessionBuilder::new()
            .connection_config(timeouts)
            .protocol_versions(ProtocolVersion::V4, ProtocolVersion::V4)
            .compression(Compression::Lz4)
            .user("u", "p");
        for b in [before, after] {
            let c = &b.config.connection;
            assert_eq!((c.min_version, c.max_version), (ProtocolVersion::V4, ProtocolVersion::V4));
            assert_eq!(c.compression, Compression::Lz4);
            assert!(c.authenticator.is_some());
            assert_eq!(c.connect_timeout, Duration::from_millis(1234));
        }
        // Without them, the given config is taken as it is.
        let plain = ConnectionConfig::default();
        let b = SessionBuilder::new().connection_config(ConnectionConfig { compression: Compression::Lz4, ..plain });
        assert_eq!(b.config.connection.compression, Compression::Lz4);
        assert!(b.config.connection.authenticator.is_none());
    }

    /// The pools `Auto` makes: a connection per worker to a local node
    /// without shards, each thread keeping to its own; shared connections
    /// when asked for more than one per worker; other affinities as set.
    #[test]
    fn auto_sizes_local_pools_by_the_runtime_workers() {
        use ConnectionAffinity::{Auto, LeastLoaded, Thread};
        let shape = |affinity, n, distance, workers| {
            let b = SessionBuilder::new().connection_affinity(affinity).connections_per_node_for(distance, n);
            let (sizes, affinity) = b.config.pool_shape(distance, workers);
            (sizes.per_shard, sizes.per_node, affinity)
        };
        assert_eq!(SessionConfig::default().connection_affinity, Auto);
        assert_eq!(shape(Auto, 1, NodeDistance::Local, 4), (1, 4, Auto), "a connection per worker");
        assert_eq!(shape(Auto, 4, NodeDistance::Local, 4), (4, 4, Auto));
        assert_eq!(shape(Auto, 1, NodeDistance::Local, 1), (1, 1, Auto), "current-thread: one");
        assert_eq!(shape(Auto, 2, NodeDistance::Local, 1), (2, 2, LeastLoaded), "more than workers: shared");
        assert_eq!(shape(Auto, 3, NodeDistance::Local, 2), (3, 3, LeastLoaded));
        assert_eq!(shape(Auto, 1, NodeDistance::Remote, 4), (1, 1, Auto), "remote nodes: as set");
        assert_eq!(shape(Thread, 1, NodeDistance::Local, 4), (1, 1, Thread));
        assert_eq!(shape(LeastLoaded, 1, NodeDistance::Local, 4), (1, 1, LeastLoaded));
    }
}
