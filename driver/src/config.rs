//! Connection settings shared by every connection of a session.

use std::borrow::Cow;
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
    /// TLS, when the server requires it.
    pub tls: Option<TlsConfig>,
    /// Open per-shard connections through the node's shard-aware port when
    /// it advertises one (the default). Off, every connection goes to the
    /// regular port and the node picks its shard: for clients whose source
    /// ports are rewritten on the way (NAT) or that must pass a proxy in
    /// front of the regular port. The official driver's
    /// `disallow_shard_aware_port(true)` is this set to `false`.
    pub shard_aware_port: bool,
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
            tls: None,
            shard_aware_port: true,
            tablets_routing_v2: false,
            identity: SelfIdentity::new(),
        }
    }
}
