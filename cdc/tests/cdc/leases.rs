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

/// Two readers in one process share a table through leases, across a
/// generation switch: every change is delivered once, by one of them, and
/// the changes of a key come in write order across both (a reader leaves
/// a generation only when the other's groups finished it too). One reader
/// is slower than the other: it used to leave the first generation
/// without saving its groups' final progress there, and both then waited
/// for each other for good.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_readers_share_a_table_across_a_generation_switch() {
    use std::sync::atomic::{AtomicU64, Ordering};
    use std::sync::Mutex;
    use std::time::SystemTime;

    use shardwise_cdc::checkpoint::TableCheckpointStore;
    use shardwise_cdc::{CdcRow, Consumer, ConsumerError, GroupInfo, Operation};

    use crate::common::workload::{plan, write};

    let (front, session, ks) = setup("cdc_lease_gen").await;
    let table = LeaseTable::new(session.clone(), &ks, "cdc_leases");
    table.create_table().await.expect("lease table");
    let store = TableCheckpointStore::new(session.clone(), &ks, "cdc_checkpoints");
    store.create_table().await.expect("checkpoint table");
    let store = Arc::new(store);

    // Inserts and updates only: a change is known by its value.
    let changes =
        |seed| -> Vec<_> { plan(40, 500, seed).into_iter().filter(|c| c.2 != Operation::RowDelete).collect() };
    let (first, second) = (changes(21), changes(22));
    let start = SystemTime::now() - Duration::from_secs(1);
    write(&session, &ks, &first, first.len(), Duration::ZERO).await;
    front.new_generation_at(SystemTime::now() + Duration::from_secs(2)).await.expect("generation");
    tokio::time::sleep(Duration::from_millis(2500)).await;
    // The second batch's values follow the first's.
    let second: Vec<_> = second.into_iter().map(|(pk, ck, op, v)| (pk, ck, op, v.map(|v| v + 10_000))).collect();
    write(&session, &ks, &second, second.len(), Duration::ZERO).await;
    let end = SystemTime::now() + Duration::from_millis(500);

    // Every delivery: (reader, order of delivery over both, pk, v).
    type Delivery = (usize, u64, i32, i64);
    let deliveries: Arc<Mutex<Vec<Delivery>>> = Arc::default();
    let order = Arc::new(AtomicU64::new(0));
    let mut readers = Vec::new();
    for (index, name) in ["a", "b"].into_iter().enumerate() {
        let (deliveries, order) = (deliveries.clone(), order.clone());
        let factory = move |_: &GroupInfo| -> Box<dyn Consumer> {
            let (deliveries, order) = (deliveries.clone(), order.clone());
            Box::new(move |row: CdcRow<'_>| -> Result<(), ConsumerError> {
                let pk = row.value::<Option<i32>>("pk")?.ok_or_else(|| ConsumerError::failed("no pk"))?;
                let v = row.value::<Option<i64>>("v")?.ok_or_else(|| ConsumerError::failed("no v"))?;
                // Reader b is slow: it finishes each generation after a
                // did, and must still save its final progress there.
                if index == 1 {
                    std::thread::sleep(Duration::from_millis(5));
                }
                let at = order.fetch_add(1, Ordering::SeqCst);
                deliveries.lock().expect("lock").push((index, at, pk, v));
                Ok(())
            })
        };
        let reader = CdcReaderBuilder::new(session.clone(), &ks, "t")
            .start(start)
            .end(end)
            .window_size(Duration::from_secs(2))
            .safety_interval(Duration::from_millis(300))
            .sleep_interval(Duration::from_millis(50))
            .generation_poll_interval(Duration::from_millis(200))
            .workers(1)
            .streams_per_query(8)
            .checkpoints(store.clone(), Duration::from_millis(200))
            .leases(
                LeaseConfig::new(table.clone()).name(name).timing(Duration::from_secs(3), Duration::from_millis(500)),
            )
            .build(Arc::new(factory))
            .await
            .expect("reader");
        readers.push(reader);
    }
    for reader in readers {
        tokio::time::timeout(Duration::from_secs(180), reader.join())
            .await
            .expect("reader finishes")
            .unwrap_or_else(|e| panic!("a reader failed: {e}"));
    }
    assert!(table.leases(&format!("{ks}.t_scylla_cdc_log")).await.expect("leases").is_empty(), "leases given up");

    let mut deliveries = deliveries.lock().expect("lock").clone();
    deliveries.sort_by_key(|d| d.1);
    let written: Vec<i64> = first.iter().chain(&second).map(|c| c.3.expect("v")).collect();
    let mut delivered: Vec<i64> = deliveries.iter().map(|d| d.3).collect();
    delivered.sort();
    let mut expected = written.clone();
    expected.sort();
    assert_eq!(delivered, expected, "every change once");
    let mut last: std::collections::HashMap<i32, i64> = std::collections::HashMap::new();
    for &(_, _, pk, v) in &deliveries {
        let previous = last.insert(pk, v);
        assert!(previous.is_none_or(|p| p < v), "pk {pk}: {v} delivered after {previous:?}");
    }
    let by_a = deliveries.iter().filter(|d| d.0 == 0).count();
    assert!(by_a > 0 && by_a < deliveries.len(), "both readers read: {by_a} of {}", deliveries.len());
}
