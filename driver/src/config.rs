//! Connection settings shared by every connection of a session.

use std::borrow::Cow;
use std::net::IpAddr;
use std::ops::RangeInclusive;
use std::sync::Arc;
use std::time::Duration;

use shardwise_protocol::frame::ProtocolVersion;
use shardwise_protocol::handshake::Identity;

use crate::auth::AuthenticatorProvider;
pub use crate::tls::{TlsConfig, TlsSetupError};

/// Compression negotiated in STARTUP.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Compression {
    /// No compression.
    #[default]
    None,
    /// LZ4: v4 compresses each body, v5 each segment.
    Lz4,
}

/// Who the driver says it is when it opens a connection (the official
/// driver's `SelfIdentity`, [`crate::SessionBuilder::custom_identity`]): by
/// default the driver's name (`shardwise`) and version; an application name
/// and version and a client id when set. Servers show them per connection
/// (Cassandra in `system_views.clients`, ScyllaDB in `system.clients`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SelfIdentity(pub(crate) Identity);

impl SelfIdentity {
    /// The driver's own name and version, nothing else.
    pub fn new() -> Self {
        SelfIdentity(Identity::driver("shardwise", env!("CARGO_PKG_VERSION")))
    }

    /// Another driver name (a wrapper library's, say).
    pub fn with_custom_driver_name(self, name: impl Into<Cow<'static, str>>) -> Self {
        SelfIdentity(self.0.with_custom_driver_name(name))
    }

    /// Another driver version.
    pub fn with_custom_driver_version(self, version: impl Into<Cow<'static, str>>) -> Self {
        SelfIdentity(self.0.with_custom_driver_version(version))
    }

    /// The application's name.
    pub fn with_application_name(self, name: impl Into<Cow<'static, str>>) -> Self {
        SelfIdentity(self.0.with_application_name(name))
    }

    /// The application's version.
    pub fn with_application_version(self, version: impl Into<Cow<'static, str>>) -> Self {
        SelfIdentity(self.0.with_application_version(version))
    }

    /// An id of this client instance (a pod's name, say).
    pub fn with_client_id(self, id: impl Into<Cow<'static, str>>) -> Self {
        SelfIdentity(self.0.with_client_id(id))
    }
}

impl Default for SelfIdentity {
    fn default() -> Self {
        SelfIdentity::new()
    }
}

/// Options of every connection's TCP socket besides Nagle's algorithm
/// ([`ConnectionConfig::tcp_nodelay`]); `None` leaves the system's default.
/// The official driver's builder settings `local_ip_address` and
/// `tcp_keepalive_interval` are [`crate::SessionBuilder::local_ip_address`]
/// and [`crate::SessionBuilder::tcp_keepalive_interval`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SocketOptions {
    /// The local address connections are made from (of the nodes' address
    /// family: a connection to a node of the other family fails).
    pub local_ip_address: Option<IpAddr>,
    /// TCP keepalive: the first probe after the connection was idle this
    /// long, then one every this long (where the system lets the interval
    /// be set).
    pub keepalive_interval: Option<Duration>,
    /// `SO_SNDBUF`.
    pub send_buffer_size: Option<u32>,
    /// `SO_RCVBUF`.
    pub recv_buffer_size: Option<u32>,
    /// `SO_REUSEADDR` (the official driver's `tcp_reuse_address`): a local
    /// address and port may be bound again while an earlier connection
    /// from them is in `TIME_WAIT`.
    pub reuse_address: Option<bool>,
    /// `SO_LINGER`: how long a close waits for unsent data.
    /// `Duration::ZERO` resets the connection on close (the official
    /// driver's `tcp_zero_linger`); a longer one blocks the thread that
    /// drops the connection's socket (a runtime worker) for up to that
    /// long, as the system's `close` does with it set.
    pub linger: Option<Duration>,
}

/// The local ports a connection to a shard-aware port is made from (the
/// port chooses the shard: `port % nr_shards`): an inclusive range within
/// 1024..=65535, [`ShardAwarePortRange::EPHEMERAL_PORT_RANGE`] by default,
/// as the official driver's type of this name. A range with no port of a
/// shard leaves that shard's connections to the regular port.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShardAwarePortRange(RangeInclusive<u16>);

impl ShardAwarePortRange {
    /// 49152..=65535, the ports IANA leaves for dynamic use.
    pub const EPHEMERAL_PORT_RANGE: ShardAwarePortRange = ShardAwarePortRange(49152..=65535);

    /// `range`, unless it is empty or starts below 1024 (the ports a
    /// system reserves).
    pub fn new(range: impl Into<RangeInclusive<u16>>) -> Result<Self, InvalidShardAwarePortRange> {
        let range = range.into();
        if range.is_empty() || *range.start() < 1024 {
            return Err(InvalidShardAwarePortRange { start: *range.start(), end: *range.end() });
        }
        Ok(ShardAwarePortRange(range))
    }

    /// The ports.
    pub fn range(&self) -> RangeInclusive<u16> {
        self.0.clone()
    }
}

impl Default for ShardAwarePortRange {
    fn default() -> Self {
        ShardAwarePortRange::EPHEMERAL_PORT_RANGE
    }
}

/// A shard-aware local port range that is empty or starts below 1024
/// ([`ShardAwarePortRange::new`]).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("shard-aware local port range {start}..={end} is empty or starts below 1024")]
pub struct InvalidShardAwarePortRange {
    /// The range's first port.
    pub start: u16,
    /// Its last port.
    pub end: u16,
}

/// How connections are opened and run.
#[derive(Debug, Clone)]
pub struct ConnectionConfig {
    /// Highest protocol version to try first.
    pub max_version: ProtocolVersion,
    /// Lowest acceptable version when the server refuses the higher one.
    pub min_version: ProtocolVersion,
    /// Compression to request (used only if the server supports it).
    pub compression: Compression,
    /// Authentication, for servers that require it.
    pub authenticator: Option<Arc<dyn AuthenticatorProvider>>,
    /// Timeout of TCP connect plus handshake.
    pub connect_timeout: Duration,
    /// Size of each of the two swap write buffers; requests that do not fit
    /// take a separate (allocating) path.
    pub write_buffer_size: usize,
    /// Maximum concurrent requests per connection (≤ 32768).
    pub max_streams: usize,
    /// Close the connection when more requests than this were abandoned
    /// (e.g. timed out) and are still unanswered.
    pub max_orphans: Option<usize>,
    /// Send OPTIONS at this interval, also while requests are in flight: a
    /// connection that stops answering is closed within the interval plus
    /// [`heartbeat_timeout`](Self::heartbeat_timeout).
    pub heartbeat_interval: Option<Duration>,
    /// A heartbeat unanswered for this long closes the connection.
    pub heartbeat_timeout: Duration,
    /// Largest accepted response body.
    pub max_response_body: usize,
    /// Disable Nagle's algorithm.
    pub tcp_nodelay: bool,
    /// The socket's other options.
    pub socket: SocketOptions,
    /// TLS, when the server requires it.
    pub tls: Option<TlsConfig>,
    /// Open per-shard connections through the node's shard-aware port when
    /// it advertises one (the default). Off, every connection goes to the
    /// regular port and the node picks its shard: for clients whose source
    /// ports are rewritten on the way (NAT) or that must pass a proxy in
    /// front of the regular port. The official driver's
    /// `disallow_shard_aware_port(true)` is this set to `false`.
    pub shard_aware_port: bool,
    /// The local ports connections to a shard-aware port are made from.
    pub shard_aware_local_port_range: ShardAwarePortRange,
    /// Negotiate ScyllaDB's tablets routing v2
    /// (`TABLETS_ROUTING_V2_EXPERIMENTAL`, docs/protocol.md §1.7) where a
    /// node offers it, instead of v1: every EXECUTE then carries a block of
    /// the tablet version the driver knows, and a node answers with the
    /// tablet's replicas (for strongly consistent tables the Raft leader
    /// first) whenever that version is stale, not only when the request
    /// missed. Off by default while ScyllaDB calls it experimental (its
    /// nodes offer it only with the `strongly-consistent-tables` feature).
    pub tablets_routing_v2: bool,
    /// Who the driver says it is in each connection's STARTUP.
    pub identity: SelfIdentity,
}

impl Default for ConnectionConfig {
    fn default() -> Self {
        ConnectionConfig {
            max_version: ProtocolVersion::V5,
            min_version: ProtocolVersion::V4,
            compression: Compression::None,
            authenticator: None,
            connect_timeout: Duration::from_secs(5),
            write_buffer_size: 64 * 1024,
            max_streams: 32768,
            max_orphans: Some(1024),
            heartbeat_interval: Some(Duration::from_secs(30)),
            heartbeat_timeout: Duration::from_secs(30),
            max_response_body: 256 * 1024 * 1024,
            tcp_nodelay: true,
            socket: SocketOptions::default(),
            tls: None,
            shard_aware_port: true,
            shard_aware_local_port_range: ShardAwarePortRange::default(),
            tablets_routing_v2: false,
            identity: SelfIdentity::new(),
        }
    }
}
