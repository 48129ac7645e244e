//! The CDC engine end to end, through the Scylla emulation front on a real
//! Cassandra: a random workload of inserts, updates and deletes over many
//! partitions, written with the ordinary driver API, is read back by the
//! engine — every change delivered, per partition key in write order, none
//! twice — across a generation switch in the middle of the workload, with
//! the log reads routed to the owning shard (front counters: every one a hit),
//! and resumed from a checkpoint after the reader is dropped.

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use shardwise::Session;
use shardwise_cdc::{CdcReaderBuilder, CheckpointStore, MemoryCheckpointStore, Millis};

use crate::common::workload::{
    check_resumed, collector, expected_of, front_with_table as setup, plan, resumable, write, Ops, Seen,
};

/// Writes `n` seeded changes over `partitions` keys, one after the other; returns the
/// expected (operation, v) sequence per key.
async fn workload(session: &Session, ks: &str, partitions: i32, n: i64, seed: u64) -> Ops {
    let plan = plan(partitions, n, seed);
    write(session, ks, &plan, plan.len(), Duration::ZERO).await;
    expected_of(&plan)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_change_in_order_across_a_generation_switch() {
    let (front, session, ks) = setup("cdc_e2e").await;
    let start = SystemTime::now() - Duration::from_secs(1);
    let mut expected = workload(&session, &ks, 40, 600, 1).await;
    // A topology change: a new generation two seconds from now; writes go on.
    let switch = SystemTime::now() + Duration::from_secs(2);
    front.new_generation_at(switch).await.expect("generation");
    tokio::time::sleep(Duration::from_millis(2500)).await;
    for (pk, ops) in workload(&session, &ks, 40, 600, 2).await {
        expected.entry(pk).or_default().extend(ops);
    }
    let end = SystemTime::now() + Duration::from_millis(500);
    assert_eq!(front.stats().cdc_log_failures, 0);

    front.reset_routing_stats();
    let seen: Seen = Arc::default();
    let reader = CdcReaderBuilder::new(session.clone(), &ks, "t")
        .start(start)
        .end(end)
        .window_size(Duration::from_secs(2))
        .safety_interval(Duration::from_millis(500))
        .sleep_interval(Duration::from_millis(100))
        .generation_poll_interval(Duration::from_millis(200))
        .workers(2)
        .bypass_cache(true)
        .build(collector(seen.clone()))
        .await
        .expect("reader");
    tokio::time::timeout(Duration::from_secs(120), reader.join()).await.expect("reader finishes").expect("reader ok");

    let seen = seen.lock().expect("lock").clone();
    let total: usize = expected.values().map(Vec::len).sum();
    assert_eq!(seen.values().map(Vec::len).sum::<usize>(), total, "every change once");
    for (pk, ops) in &expected {
        assert_eq!(seen.get(pk), Some(ops), "changes of pk {pk} in write order");
    }
    let stats = front.stats();
    // Claim `cdc-log-shard`: every log read on the shard that owns its streams.
    assert_eq!(stats.misses(), 0, "log reads on the owning shard: {stats}");
    assert!(stats.hits() > 0, "{stats}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn resumes_from_a_checkpoint_without_missing_a_row() {
    let (_front, session, ks) = setup("cdc_ckpt").await;
    let start = SystemTime::now() - Duration::from_secs(1);
    let expected = workload(&session, &ks, 20, 400, 3).await;
    let end = SystemTime::now() + Duration::from_millis(500);
    tokio::time::sleep(Duration::from_secs(1)).await;
    let store = Arc::new(MemoryCheckpointStore::new());
    let builder = |seen: Seen| {
        resumable(&session, &ks, (start, end), store.clone(), Duration::from_millis(1)).build(collector(seen))
    };
    // First run: stopped as soon as it has delivered something and saved progress (a fixed
    // pause could end before the first row on a loaded machine, or after the last on a quiet
    // one).
    let first: Seen = Arc::default();
    let reader = builder(first.clone()).await.expect("reader");
    let (waited, start_ms, log) =
        (std::time::Instant::now(), Millis::from_system_time(start), format!("{ks}.t_scylla_cdc_log"));
    loop {
        let delivered = first.lock().expect("lock").values().any(|v| !v.is_empty());
        let progress =
            store.load(&log).await.ok().flatten().is_some_and(|c| c.groups.iter().any(|g| g.progress > start_ms));
        if (delivered && progress) || waited.elapsed() > Duration::from_secs(60) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    reader.stop();
    reader.join().await.expect("stopped cleanly");
    // The first run read something and saved its progress; otherwise
    // nothing below would tell a resumed run from one that ignores
    // checkpoints.
    let delivered_first: usize = first.lock().expect("lock").values().map(Vec::len).sum();
    assert!(delivered_first > 0, "the first run delivered nothing");
    let saved = store.load(&log).await.expect("load").expect("a checkpoint was saved");
    assert!(saved.groups.iter().any(|g| g.progress > start_ms), "the checkpoint records progress: {saved:?}");
    // Second run: from the checkpoint to the end.
    let second: Seen = Arc::default();
    let reader = builder(second.clone()).await.expect("reader");
    tokio::time::timeout(Duration::from_secs(120), reader.join()).await.expect("finishes").expect("ok");
    let (first, second) = (first.lock().expect("lock").clone(), second.lock().expect("lock").clone());
    // At-least-once: the second run may repeat the tail of the first run's last window,
    // never skip anything.
    check_resumed(&expected, &first, &second);
    // The second run started after the checkpoint, not from the start.
    let total: usize = expected.values().map(Vec::len).sum();
    let delivered_second: usize = second.values().map(Vec::len).sum();
    assert!(
        delivered_second < total,
        "the second run re-read everything ({delivered_second} of {total}): the checkpoint was ignored"
    );
}

/// `build_stream` holds the readers back and saves only what its receiver
/// took: a receiver that takes a few changes of a bounded channel and then
/// dies leaves a checkpoint from which a second run delivers the rest, in
/// order, skipping nothing. (With an unbounded channel the readers pushed
/// every change into it and saved progress past what was taken.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stream_saves_only_what_its_receiver_took() {
    use shardwise::protocol::types::CqlValue;
    use shardwise_cdc::Change;

    let (_front, session, ks) = setup("cdc_stream").await;
    let start = SystemTime::now() - Duration::from_secs(1);
    let expected = workload(&session, &ks, 20, 400, 5).await;
    let end = SystemTime::now() + Duration::from_millis(500);
    tokio::time::sleep(Duration::from_secs(1)).await;
    let store = Arc::new(MemoryCheckpointStore::new());
    let builder = || resumable(&session, &ks, (start, end), store.clone(), Duration::from_millis(1));
    let record = |seen: &mut Ops, change: &Change| {
        let pk = match change.value("pk") {
            Some(CqlValue::Int(pk)) => *pk,
            other => panic!("pk {other:?}"),
        };
        let v = match change.value("v") {
            Some(CqlValue::BigInt(v)) => Some(*v),
            _ => None,
        };
        seen.entry(pk).or_default().push((change.operation, v));
    };

    let (reader, mut changes) = builder().build_stream(4).await.expect("reader");
    let mut first = Ops::new();
    for _ in 0..50 {
        let change = tokio::time::timeout(Duration::from_secs(60), changes.recv()).await.expect("a change");
        record(&mut first, &change.expect("open"));
    }
    // A slow receiver that dies: the reader fails for want of a receiver.
    tokio::time::sleep(Duration::from_millis(500)).await;
    drop(changes);
    let failed = tokio::time::timeout(Duration::from_secs(60), reader.join()).await.expect("the reader stops");
    assert!(failed.is_err(), "the reader noticed the receiver was gone");

    let second: Seen = Arc::default();
    let reader = builder().build(collector(second.clone())).await.expect("reader");
    tokio::time::timeout(Duration::from_secs(120), reader.join()).await.expect("finishes").expect("ok");
    let second = second.lock().expect("lock").clone();
    check_resumed(&expected, &first, &second);
}
