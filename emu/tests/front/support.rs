//! What the test modules share: a front on the shared Cassandra, an official
//! `scylla` session through it, a raw protocol client, the clock, and the
//! seed of randomized workloads.

use std::net::SocketAddr;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use scylla::client::session::Session;
use scylla::client::session_builder::SessionBuilder;
use shardwise_emu::{Front, FrontConfig, FrontHandle};
use testkit::RawConnection;

/// A front on the shared Cassandra ([`testkit::shared_node`]).
pub fn start_front(config: FrontConfig) -> FrontHandle {
    Front::start(testkit::shared_node().expect("Cassandra"), config).expect("front")
}

/// The official driver connected through `front`.
pub async fn session(front: &FrontHandle) -> Session {
    SessionBuilder::new().known_node_addr(front.addr()).build().await.expect("session")
}

/// A fresh keyspace named after `prefix`, replication factor 1, created through `session`.
pub async fn keyspace(session: &Session, prefix: &str) -> String {
    let ks = testkit::fresh_keyspace(prefix);
    session.query_unpaged(testkit::create_keyspace(&ks, 1), &[]).await.expect("keyspace");
    ks
}

/// Now, in µs since the epoch.
pub fn now_micros() -> i64 {
    SystemTime::now().duration_since(UNIX_EPOCH).expect("clock").as_micros() as i64
}

/// The seed of a randomized workload: `EMU_CDC_SEED`, else the clock; printed
/// so that a failing run can be repeated.
pub fn seed() -> u64 {
    let seed = std::env::var("EMU_CDC_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| SystemTime::now().duration_since(UNIX_EPOCH).expect("clock").as_nanos() as u64);
    println!("seed {seed} (EMU_CDC_SEED={seed} to repeat)");
    seed
}

/// A raw protocol connection to `addr` (testkit's client on the protocol crate).
pub fn raw(addr: SocketAddr) -> RawConnection {
    RawConnection::connect(addr, Duration::from_secs(20)).expect("connect")
}
