//! Opening a connection to a chosen shard through a node's shard-aware
//! port, against a fake node that speaks protocol v4 only, as Scylla does:
//! it rejects v5 and then waits for the client to close, so the client's
//! side of the rejected connection keeps its address pair (TIME_WAIT) and
//! its source port cannot be bound again for a while.

use std::sync::{Arc, Mutex};

use shardwise::protocol::frame::ProtocolVersion;
use shardwise::protocol::response::{code, ErrorKind, ErrorResponse, ResponseMessage};
use shardwise::protocol::sharding::ShardingInfo;
use shardwise::{Connection, ConnectionConfig};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

use crate::common::{read_request_of_any_version, response};

const NR_SHARDS: u16 = 2;

/// The SUPPORTED entries of a node with `NR_SHARDS` shards whose
/// shard-aware port is `port`, for a connection on `shard`.
fn entries(shard: u16, port: u16) -> Vec<(String, Vec<String>)> {
    [
        ("SCYLLA_SHARD", shard.to_string()),
        ("SCYLLA_NR_SHARDS", NR_SHARDS.to_string()),
        ("SCYLLA_SHARDING_IGNORE_MSB", "12".into()),
        ("SCYLLA_PARTITIONER", "org.apache.cassandra.dht.Murmur3Partitioner".into()),
        ("SCYLLA_SHARDING_ALGORITHM", "biased-token-round-robin".into()),
        ("SCYLLA_SHARD_AWARE_PORT", port.to_string()),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), vec![v]))
    .collect()
}

/// Serves one client connection on shard `peer port % NR_SHARDS`; logs
/// its source port and the version of its first request in `log`.
async fn serve(mut socket: TcpStream, port: u16, log: Log) {
    let Ok(peer) = socket.peer_addr() else { return };
    let Some((version, stream)) = read_request_of_any_version(&mut socket).await else { return };
    log.lock().expect("lock").push((peer.port(), version));
    if version != 4 {
        let rejection = ErrorResponse {
            code: code::PROTOCOL_ERROR,
            message: format!("Invalid or unsupported protocol version: {version}"),
            kind: ErrorKind::ProtocolError,
        };
        let _ = socket.write_all(&response(stream, ResponseMessage::Error(rejection))).await;
    } else {
        let supported = ResponseMessage::Supported(entries(peer.port() % NR_SHARDS, port));
        let _ = socket.write_all(&response(stream, supported)).await;
        let Some((_, stream)) = read_request_of_any_version(&mut socket).await else { return };
        let _ = socket.write_all(&response(stream, ResponseMessage::Ready)).await;
    }
    // The client closes first.
    let mut rest = [0u8; 64];
    while matches!(socket.read(&mut rest).await, Ok(n) if n > 0) {}
}

/// The (source port, version of the first request) of each connection.
type Log = Arc<Mutex<Vec<(u16, u8)>>>;

/// Starts the fake; returns its address and its log.
async fn fake() -> (std::net::SocketAddr, Log) {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr");
    let seen: Log = Arc::default();
    let log = seen.clone();
    tokio::spawn(async move {
        while let Ok((socket, _)) = listener.accept().await {
            tokio::spawn(serve(socket, addr.port(), log.clone()));
        }
    });
    (addr, seen)
}

/// Regression: the v4 attempt after a rejected v5 one was made from the
/// same source port, still held by the rejected connection; after eight
/// such ports the driver fell back to the regular port, whose shard the
/// node picks — a CDC reader's query then went to a shard that does not
/// hold its streams.
#[tokio::test]
async fn a_rejected_version_is_tried_again_from_another_port_of_the_shard() {
    let (addr, seen) = fake().await;
    let sharding = ShardingInfo::from_entries(entries(0, addr.port())).expect("valid").expect("sharded");
    let config = ConnectionConfig {
        max_version: ProtocolVersion::V5,
        min_version: ProtocolVersion::V4,
        heartbeat_interval: None,
        ..ConnectionConfig::default()
    };
    for shard in [1, 0] {
        seen.lock().expect("lock").clear();
        let conn = Connection::open_to_shard(addr, shard, &sharding, &config).await.expect("opens");
        assert_eq!((conn.shard(), conn.version()), (shard, ProtocolVersion::V4));
        let seen = seen.lock().expect("lock").clone();
        assert_eq!(
            seen.iter().map(|&(_, v)| v).collect::<Vec<_>>(),
            [5, 4],
            "one rejection, one v4 connection: {seen:?}"
        );
        assert!(seen.iter().all(|&(p, _)| p % NR_SHARDS == shard), "both from ports of shard {shard}: {seen:?}");
        assert_ne!(seen[0].0, seen[1].0, "v4 from another port than the rejected v5");
    }
}

/// With the shard-aware port disallowed (`disallow_shard_aware_port`, as
/// for clients behind NAT or a proxy), a connection to a shard goes to the
/// node's regular port and never to the shard-aware one it advertises;
/// allowed, the shard-aware port is used.
#[tokio::test]
async fn a_disallowed_shard_aware_port_is_never_connected_to() {
    let (regular, on_regular) = fake().await;
    let (aware, on_aware) = fake().await;
    let sharding = ShardingInfo::from_entries(entries(0, aware.port())).expect("valid").expect("sharded");
    let config = |shard_aware_port| ConnectionConfig {
        max_version: ProtocolVersion::V4,
        min_version: ProtocolVersion::V4,
        heartbeat_interval: None,
        shard_aware_port,
        ..ConnectionConfig::default()
    };

    let conn = Connection::open_to_shard(regular, 1, &sharding, &config(false)).await.expect("opens");
    drop(conn);
    assert_eq!(on_aware.lock().expect("lock").len(), 0, "the shard-aware port was connected to");
    assert_eq!(on_regular.lock().expect("lock").len(), 1, "one connection to the regular port");

    let conn = Connection::open_to_shard(regular, 1, &sharding, &config(true)).await.expect("opens");
    assert_eq!(conn.shard(), 1, "the shard-aware port picks the shard");
    assert_eq!(on_aware.lock().expect("lock").len(), 1, "allowed, the shard-aware port is used");
}
