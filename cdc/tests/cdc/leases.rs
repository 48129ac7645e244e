//! The lease table on a real Cassandra, through the Scylla emulation front:
//! a lease has one holder at a time (claims and renewals are lightweight
//! transactions), members are listed, and a reader cannot share a table
//! without a checkpoint store all readers share. Processes sharing a table
//! (three printers, one killed, a fourth joining) are tested in
//! `shardwise-cdc-tools` (`tests/printer.rs`).

use std::sync::Arc;
use std::time::Duration;

use shardwise_cdc::{CdcError, CdcReaderBuilder, LeaseConfig, LeaseTable, StreamId};

use crate::common::workload::{collector, front_with_table as setup};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lease_has_one_holder_at_a_time() {
    let (_front, session, ks) = setup("cdc_lease_table").await;
    let table = LeaseTable::new(session.clone(), &ks, "cdc_leases");
    table.create_table().await.expect("lease table");
    let (log, group) = ("ks.t_scylla_cdc_log", StreamId::from_bytes([7; 16]));
    assert!(table.claim(log, group, "a", 30).await.expect("claim"), "a free lease is taken");
    assert!(!table.claim(log, group, "b", 30).await.expect("claim"), "a held lease is not");
    assert!(!table.renew(log, group, "b", 30).await.expect("renew"), "only the holder renews");
    assert!(!table.release(log, group, "b",).await.expect("release"), "only the holder releases");
    assert!(table.renew(log, group, "a", 30).await.expect("renew"));
    assert_eq!(table.leases(log).await.expect("leases").get(&group).map(String::as_str), Some("a"));
    assert!(table.release(log, group, "a").await.expect("release"));
    assert!(table.claim(log, group, "b", 30).await.expect("claim"), "a released lease is free");
    assert!(table.leases("another log").await.expect("leases").is_empty(), "leases are per log");

    table.heartbeat(log, "b", 30).await.expect("heartbeat");
    table.heartbeat(log, "a", 30).await.expect("heartbeat");
    assert_eq!(table.members(log).await.expect("members"), vec!["a".to_string(), "b".to_string()]);
    table.leave(log, "a").await.expect("leave");
    assert_eq!(table.members(log).await.expect("members"), vec!["b".to_string()]);

    // A lease not renewed expires.
    let other = StreamId::from_bytes([8; 16]);
    assert!(table.claim(log, other, "a", 1).await.expect("claim"));
    tokio::time::sleep(Duration::from_millis(2100)).await;
    assert!(table.claim(log, other, "b", 30).await.expect("claim"), "an expired lease is free");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sharing_needs_a_checkpoint_store_and_sane_timing() {
    let (_front, session, ks) = setup("cdc_lease_config").await;
    let table = LeaseTable::new(session.clone(), &ks, "cdc_leases");
    let seen = Default::default();
    let built = CdcReaderBuilder::new(session.clone(), &ks, "t")
        .leases(LeaseConfig::new(table.clone()))
        .build(collector(Arc::clone(&seen)))
        .await;
    assert!(matches!(&built, Err(CdcError::Config(m)) if m.contains("checkpoint")), "{built:?}");
    let store = Arc::new(shardwise_cdc::MemoryCheckpointStore::new());
    let built = CdcReaderBuilder::new(session.clone(), &ks, "t")
        .checkpoints(store, Duration::from_secs(1))
        .leases(LeaseConfig::new(table).timing(Duration::from_secs(2), Duration::from_secs(2)))
        .build(collector(Arc::clone(&seen)))
        .await;
    assert!(matches!(&built, Err(CdcError::Config(m)) if m.contains("heartbeat")), "{built:?}");
    let missing = LeaseTable::new(session.clone(), &ks, "no_such_table");
    let built = CdcReaderBuilder::new(session, &ks, "t")
        .checkpoints(Arc::new(shardwise_cdc::MemoryCheckpointStore::new()), Duration::from_secs(1))
        .leases(LeaseConfig::new(missing))
        .build(collector(seen))
        .await;
    assert!(matches!(&built, Err(CdcError::Lease(_))), "a lease table that does not exist: {built:?}");
}
