//! Shared setup of the CDC integration tests (a dev-dependency of
//! `shardwise-cdc`, `shardwise-cdc-tools` and `shardwise-cdc-kafka`, instead
//! of each test binary including another crate's test files by path): an
//! emulation front (4 shards, its own stand-in keyspace, so its generation is
//! stable) over the shared Cassandra, a session through it with one connection
//! per shard, and a fresh keyspace.
//!
//! Modules:
//!
//! - this file: the front, the session, keyspaces (plain and with tablets),
//!   statements, child processes of the tools, lease counts;
//! - [`workload`]: a seeded workload of writes, the consumer that collects what
//!   the CDC readers see, the checks of what a resumed reader saw, and the
//!   stream group of each key as the shipped reader groups them.

pub mod workload;

use std::time::{Duration, Instant};

use shardwise::protocol::consistency::Consistency;
use shardwise::{Session, SessionBuilder, Statement};
use shardwise_emu::{Front, FrontConfig, FrontHandle};

/// Shards of the emulated node.
pub const SHARDS: u16 = 4;

/// A session straight to the shared Cassandra, past any front: for what
/// must be tested against Cassandra's own answers too.
pub async fn cassandra_session() -> Session {
    let node = testkit::shared_node().expect("server");
    SessionBuilder::new().known_node_addr(node).build().await.expect("session to Cassandra")
}

/// The front, a session through it, and a new keyspace named after `tag`.
pub async fn front_and_keyspace(tag: &str) -> (FrontHandle, Session, String) {
    let upstream = testkit::shared_node().expect("server");
    front_and_keyspace_with(tag, upstream, SessionBuilder::new()).await
}

/// [`front_and_keyspace`] with the front in front of `upstream` (a fault
/// proxy, say) and the session from `builder`.
pub async fn front_and_keyspace_with(
    tag: &str,
    upstream: std::net::SocketAddr,
    builder: SessionBuilder,
) -> (FrontHandle, Session, String) {
    let front = front_over(vec![upstream], tag, SHARDS).await;
    let session =
        builder.known_node_addr(front.addr()).default_consistency(Consistency::One).build().await.expect("session");
    let deadline = Instant::now() + Duration::from_secs(20);
    while session.connections().len() < usize::from(SHARDS) {
        assert!(Instant::now() < deadline, "per-shard connections");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let ks = testkit::fresh_keyspace(tag);
    run(&session, &testkit::create_keyspace(&ks, 1)).await;
    (front, session, ks)
}

/// A front of `shards` shards per node over the Cassandra nodes at
/// `upstreams`, with a stand-in keyspace of its own named after `tag`.
pub async fn front_over(upstreams: Vec<std::net::SocketAddr>, tag: &str, shards: u16) -> FrontHandle {
    let emu = testkit::fresh_keyspace(&format!("emu_{tag}"));
    tokio::task::spawn_blocking(move || {
        Front::start_cluster(&upstreams, FrontConfig { shards, emu_keyspace: emu, ..FrontConfig::default() })
    })
    .await
    .expect("join")
    .expect("front")
}

/// Runs a statement, panicking with its text on error.
pub async fn run(session: &Session, text: &str) {
    session.execute(&Statement::new(text.to_owned()), ()).await.unwrap_or_else(|e| panic!("{text}: {e}"));
}

/// A new keyspace with tablets (`initial` of them per table), named after
/// `tag`, created through `session`.
pub async fn tablets_keyspace(session: &Session, tag: &str, initial: usize) -> String {
    let ks = testkit::fresh_keyspace(tag);
    run(
        session,
        &format!(
            "CREATE KEYSPACE {ks} WITH replication = {{'class': 'SimpleStrategy', 'replication_factor': 1}} \
             AND tablets = {{'enabled': true, 'initial': {initial}}}"
        ),
    )
    .await;
    ks
}

/// Waits for `child` to exit on its own by `deadline` (killing it and
/// failing with `what` otherwise); its exit status. For the tests that run
/// the tools as processes.
pub async fn exit_of(child: &mut std::process::Child, deadline: Instant, what: &str) -> std::process::ExitStatus {
    loop {
        if let Some(status) = child.try_wait().expect("try_wait") {
            return status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("{what} did not finish");
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Sends `signal` (`STOP`, `CONT`) to `child`.
pub fn signal(child: &std::process::Child, signal: &str) {
    let status = std::process::Command::new("kill")
        .args([&format!("-{signal}"), &child.id().to_string()])
        .status()
        .expect("kill");
    assert!(status.success(), "kill -{signal}");
}

/// Leases held per reader of `ks.t`, from the lease table `table` of `ks`
/// (none while the table does not exist: the readers create it).
pub async fn held(session: &Session, ks: &str, table: &str) -> std::collections::BTreeMap<String, usize> {
    let table = shardwise_cdc::LeaseTable::new(session.clone(), ks, table);
    let mut held = std::collections::BTreeMap::new();
    for owner in table.leases(&format!("{ks}.t_scylla_cdc_log")).await.unwrap_or_default().into_values() {
        *held.entry(owner).or_insert(0) += 1;
    }
    held
}
