//! Opening a connection: the socket (from a chosen local port for a
//! shard-aware one), TLS when configured, the handshake at the highest
//! protocol version both sides speak (a lower one when the node rejects
//! it), and then the reader, writer, sweeper and heartbeat tasks that the
//! rest of this module runs on.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64};
use std::sync::{Arc, OnceLock};
use std::time::Instant;

use shardwise_protocol::frame::segment::MAX_PAYLOAD;
use shardwise_protocol::frame::ProtocolVersion;
use shardwise_protocol::handshake::{lwt_mask, Established};
use shardwise_protocol::sharding::ShardingInfo;
use swap_buffer_queue::Queue;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpStream;
use tokio::sync::{broadcast, mpsc, Notify};

use super::stream::Streams;
use super::sweep::NextSweep;
use super::{direct, handshake, io, socket, Connection, Inner, Owner};
use crate::config::{Compression, ConnectionConfig};
use crate::error::ConnectionError;

impl Connection {
    /// Connects to `addr`, negotiates the highest protocol version both
    /// sides speak and starts the I/O tasks on the current tokio runtime.
    pub async fn open(addr: SocketAddr, config: &ConnectionConfig) -> Result<Connection, ConnectionError> {
        Self::open_from(addr, None, config).await
    }

    /// Connects from a chosen local port: Scylla's shard-aware port assigns
    /// the connection to shard `local_port % nr_shards`. A lower protocol
    /// version is tried from the same port, which the rejected connection
    /// may still hold (`AddrInUse`): [`Connection::open_to_shard`] moves to
    /// another port of the shard instead.
    pub async fn open_from(
        addr: SocketAddr,
        local_port: Option<u16>,
        config: &ConnectionConfig,
    ) -> Result<Connection, ConnectionError> {
        Self::open_at(addr, local_port, config, config.max_version).await
    }

    /// [`Connection::open_from`], starting at `version`.
    async fn open_at(
        addr: SocketAddr,
        local_port: Option<u16>,
        config: &ConnectionConfig,
        mut version: ProtocolVersion,
    ) -> Result<Connection, ConnectionError> {
        loop {
            match Self::attempt(addr, local_port, config, version).await? {
                Some(conn) => return Ok(conn),
                None => version = Self::lower(addr, version, config)?,
            }
        }
    }

    /// The version to try after `version` was rejected.
    fn lower(
        addr: SocketAddr,
        version: ProtocolVersion,
        config: &ConnectionConfig,
    ) -> Result<ProtocolVersion, ConnectionError> {
        if version > config.min_version {
            tracing::debug!(%addr, ?version, "protocol version rejected, trying a lower one");
            Ok(ProtocolVersion::V4)
        } else {
            Err(ConnectionError::NoCommonVersion)
        }
    }

    /// One connection at `version`: `None` when the node rejected it.
    async fn attempt(
        addr: SocketAddr,
        local_port: Option<u16>,
        config: &ConnectionConfig,
        version: ProtocolVersion,
    ) -> Result<Option<Connection>, ConnectionError> {
        tokio::time::timeout(config.connect_timeout, async {
            let socket = socket::connect(addr, local_port, config.tcp_nodelay, &config.socket).await?;
            match &config.tls {
                None => {
                    let split = |s: TcpStream| {
                        let (read, write) = s.into_split();
                        (read, direct::Shared(Arc::new(write)))
                    };
                    Self::negotiate(addr, socket, config, version, split).await
                }
                #[cfg(feature = "tls")]
                Some(tls) => {
                    let socket = tls.connect(addr, socket).await?;
                    let split = |s| {
                        let (read, write) = tokio::io::split(s);
                        (read, direct::Owned(write))
                    };
                    Self::negotiate(addr, socket, config, version, split).await
                }
                #[cfg(not(feature = "tls"))]
                Some(tls) => tls.unreachable(),
            }
        })
        .await
        .map_err(|_| ConnectionError::ConnectTimeout)?
    }

    /// Runs the handshake on `socket`; `None` when the version was rejected.
    async fn negotiate<S, R, W>(
        addr: SocketAddr,
        mut socket: S,
        config: &ConnectionConfig,
        version: ProtocolVersion,
        split: impl FnOnce(S) -> (R, W),
    ) -> Result<Option<Connection>, ConnectionError>
    where
        S: AsyncRead + AsyncWrite + Unpin,
        R: AsyncRead + Unpin + Send + 'static,
        W: direct::Sink,
    {
        match handshake::handshake(&mut socket, config, version).await {
            Ok(h) => {
                let (read, write) = split(socket);
                Ok(Some(Self::start(addr, read, write, h, config)))
            }
            Err(handshake::Failure::VersionRejected) => Ok(None),
            Err(handshake::Failure::Fatal(e)) => Err(e),
        }
    }

    pub(super) fn start<R, W>(
        addr: SocketAddr,
        read: R,
        write: W,
        h: Established,
        config: &ConnectionConfig,
    ) -> Connection
    where
        R: AsyncRead + Unpin + Send + 'static,
        W: direct::Sink,
    {
        let mut capacity = config.write_buffer_size.max(1024);
        if h.version == ProtocolVersion::V5 {
            capacity = capacity.min(MAX_PAYLOAD);
        }
        let sharding = ShardingInfo::from_entries(h.supported.iter().map(|(k, v)| (k, v))).unwrap_or_else(|e| {
            tracing::warn!(%addr, error = %e, "ignoring malformed sharding options");
            None
        });
        let (oversized, oversized_rx) = mpsc::unbounded_channel();
        let (events, _) = broadcast::channel(64);
        let lwt_mask = lwt_mask(&h.supported).unwrap_or(0);
        let inner = Arc::new(Inner {
            addr,
            version: h.version,
            compression: if h.lz4 { Compression::Lz4 } else { Compression::None },
            supported: h.supported,
            sharding,
            lwt_mask,
            metadata_id: h.metadata_id,
            tablets_v2: h.tablets_v2,
            host_id: h.host_id,
            streams: Streams::new(config.max_streams),
            queue: Queue::with_capacity(capacity),
            direct: write.shared().filter(|_| !h.lz4).map(|socket| direct::Direct::new(socket, h.version)),
            oversized,
            freed: Notify::new(),
            closed_notify: Notify::new(),
            closed: AtomicBool::new(false),
            error: OnceLock::new(),
            events,
            max_orphans: config.max_orphans,
            epoch: tokio::time::Instant::now(),
            next_sweep: NextSweep::default(),
            sweep: Notify::new(),
            read_epoch: Instant::now(),
            read_at: AtomicU64::new(0),
        });
        tokio::spawn(io::writer(inner.clone(), write, h.framer, oversized_rx));
        tokio::spawn(io::reader(inner.clone(), read, h.decoder, config.max_response_body));
        tokio::spawn(io::sweeper(inner.clone()));
        let conn = Connection { owner: Arc::new(Owner(inner)) };
        if let Some(interval) = config.heartbeat_interval {
            tokio::spawn(io::heartbeat(Arc::downgrade(&conn.owner.0), interval, config.heartbeat_timeout));
        }
        conn
    }

    /// Opens a connection to `shard` of the node at `addr`: through the
    /// node's shard-aware port with a source port that selects the shard
    /// when the node advertises one (`sharding` is what another connection
    /// to the node reported) and [`ConnectionConfig::shard_aware_port`]
    /// allows it, else the regular port (whose shard the node picks). What per-shard workers use to read data where it lives.
    pub async fn open_to_shard(
        addr: SocketAddr,
        shard: u16,
        sharding: &crate::protocol::sharding::ShardingInfo,
        config: &ConnectionConfig,
    ) -> Result<Connection, ConnectionError> {
        let mut version = config.max_version;
        if let Some(port) = sharding.shard_aware_port_for(config.tls.is_some()).filter(|_| config.shard_aware_port) {
            let target = SocketAddr::new(addr.ip(), port);
            let start = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.subsec_nanos() as usize);
            let nr = sharding.sharder().nr_shards();
            let mut ports = crate::protocol::sharding::ShardPortIterator::new(
                shard,
                nr,
                config.shard_aware_local_port_range.range(),
                start,
            );
            let mut busy = 0;
            while busy < 8 {
                let Some(local) = ports.next() else { break };
                // A rejected version is tried again from the next port, not
                // from this one: the side that closed the rejected
                // connection first keeps its address pair a while
                // (TIME_WAIT), and if that is this side, the port is taken.
                match Connection::attempt(target, Some(local), config, version).await {
                    Ok(Some(conn)) if conn.shard() == shard => return Ok(conn),
                    Ok(Some(conn)) => {
                        // The port was rewritten on the way (NAT): the shard-aware port is of no use.
                        tracing::warn!(%addr, wanted = shard, got = conn.shard(), "shard-aware port gave another shard");
                        return Ok(conn);
                    }
                    Ok(None) => version = Self::lower(target, version, config)?,
                    Err(ConnectionError::Io(e))
                        if matches!(
                            e.kind(),
                            std::io::ErrorKind::AddrInUse
                                | std::io::ErrorKind::AddrNotAvailable
                                | std::io::ErrorKind::PermissionDenied
                        ) =>
                    {
                        busy += 1
                    }
                    Err(e) => {
                        tracing::debug!(%addr, error = %e, "shard-aware port failed, using the regular port");
                        break;
                    }
                }
            }
        }
        Self::open_at(addr, None, config, version).await
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use crate::protocol::sharding::ShardingInfo;
    use crate::{ConnectionConfig, InvalidShardAwarePortRange, ShardAwarePortRange};

    use super::*;

    /// `shard_aware_local_port_range`: a connection to shard 2 of 4 through
    /// the shard-aware port comes from a port of the range set that
    /// selects shard 2 (the node here notes the port and closes, so the
    /// open fails, which does not matter to what is checked).
    #[tokio::test]
    async fn a_shard_aware_connection_comes_from_the_port_range_set() {
        let aware = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        let regular = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        let regular_addr = regular.local_addr().expect("addr");
        let port = aware.local_addr().expect("addr").port().to_string();
        let supported = vec![
            ("SCYLLA_SHARD", vec!["0"]),
            ("SCYLLA_NR_SHARDS", vec!["4"]),
            ("SCYLLA_SHARDING_IGNORE_MSB", vec!["12"]),
            ("SCYLLA_PARTITIONER", vec!["org.apache.cassandra.dht.Murmur3Partitioner"]),
            ("SCYLLA_SHARDING_ALGORITHM", vec!["biased-token-round-robin"]),
            ("SCYLLA_SHARD_AWARE_PORT", vec![port.as_str()]),
        ];
        let sharding = ShardingInfo::from_supported(&supported).expect("valid").expect("sharded");
        let config = ConnectionConfig {
            shard_aware_local_port_range: ShardAwarePortRange::new(41000..=41099).expect("range"),
            connect_timeout: Duration::from_millis(500),
            ..Default::default()
        };
        let node = std::thread::spawn(move || aware.accept().map(|(_, peer)| peer.port()));
        let regular_node = std::thread::spawn(move || drop(regular.accept()));
        let _ = Connection::open_to_shard(regular_addr, 2, &sharding, &config).await;
        let from = node.join().expect("node").expect("accepted");
        regular_node.join().expect("regular node");
        assert!((41000..=41099).contains(&from), "from port {from}");
        assert_eq!(from % 4, 2, "port {from} selects shard 2");
    }

    /// As the official driver: empty ranges and ranges reaching below 1024
    /// are refused.
    #[test]
    fn a_range_that_is_empty_or_below_1024_is_refused() {
        assert_eq!(ShardAwarePortRange::new(1000..=2000), Err(InvalidShardAwarePortRange { start: 1000, end: 2000 }));
        let (start, end) = (5000, 4999);
        assert!(ShardAwarePortRange::new(start..=end).is_err(), "empty");
        assert_eq!(ShardAwarePortRange::new(1024..=1024).map(|r| r.range()), Ok(1024..=1024));
        assert_eq!(ShardAwarePortRange::default(), ShardAwarePortRange::EPHEMERAL_PORT_RANGE);
    }
}
