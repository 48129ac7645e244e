//! Restarts from the table-backed checkpoint store, through the Scylla
//! emulation front on a real Cassandra: a reader with a
//! [`TableCheckpointStore`] is stopped mid-run and dropped; a new reader
//! resumes from the table and delivers the rest, skipping nothing
//! (at-least-once: only the tail of the last window may come again).
//! The same across a process kill (SIGKILL of the `printer` application)
//! is tested in `shardwise-cdc-tools` (`tests/printer.rs`).

use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use shardwise_cdc::checkpoint::TableCheckpointStore;
use shardwise_cdc::{CdcReaderBuilder, CheckpointStore};

use crate::common::run;
use crate::common::workload::{
    check_resumed, collector, count, expected_of, front_with_table as setup, plan, resumable, write, Seen, SAFETY,
};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn resumes_from_the_table_checkpoint_without_missing_a_row() {
    let (_front, session, ks) = setup("cdc_tckpt").await;
    let store = TableCheckpointStore::new(session.clone(), &ks, "cdc_checkpoints");
    store.create_table().await.expect("checkpoint table");
    let store = Arc::new(store);
    let log = &format!("{ks}.t_scylla_cdc_log");
    assert_eq!(store.load(log).await.expect("load"), None, "a fresh table has no checkpoint");

    let start = SystemTime::now() - Duration::from_secs(1);
    let plan = plan(20, 400, 3);
    write(&session, &ks, &plan, 400, Duration::ZERO).await;
    let expected = expected_of(&plan);
    let total = plan.len();
    let end = SystemTime::now() + Duration::from_millis(500);
    tokio::time::sleep(Duration::from_secs(1)).await;
    let builder = |seen: Seen| {
        resumable(&session, &ks, (start, end), store.clone(), Duration::from_millis(100)).build(collector(seen))
    };

    // First run: stopped once about a quarter of the changes came, then dropped.
    let first: Seen = Arc::default();
    let reader = builder(first.clone()).await.expect("reader");
    let deadline = Instant::now() + Duration::from_secs(60);
    while count(&first) < total / 4 {
        assert!(Instant::now() < deadline, "the first run delivers changes");
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    reader.stop();
    reader.join().await.expect("stopped cleanly");
    let first_count = count(&first);
    assert!(first_count < total, "the first run was stopped before the end ({first_count} of {total})");

    // The table holds the checkpoint: the generation and every group, some
    // of them past the start.
    let saved = store.load(log).await.expect("load").expect("a checkpoint was saved");
    assert!(!saved.groups.is_empty(), "{saved:?}");
    let start_ms = start.duration_since(UNIX_EPOCH).expect("epoch").as_millis() as i64;
    assert!(saved.groups.iter().any(|g| g.progress.0 > start_ms), "some progress saved: {saved:?}");
    assert!(saved.groups.iter().all(|g| g.progress.0 >= saved.generation.0), "{saved:?}");

    // Second run: a new reader, from the table's checkpoint to the end.
    let second: Seen = Arc::default();
    let reader = builder(second.clone()).await.expect("reader");
    tokio::time::timeout(Duration::from_secs(120), reader.join()).await.expect("finishes").expect("ok");
    let second_count = count(&second);
    let (first, second) = (first.lock().expect("lock").clone(), second.lock().expect("lock").clone());
    let repeated = check_resumed(&expected, &first, &second);
    assert!(
        second_count < total,
        "the second run resumed from the checkpoint, not from the start ({second_count} of {total})"
    );
    assert_eq!(first_count + second_count - repeated, total);
    eprintln!("first run {first_count}, second run {second_count}, repeated {repeated}, of {total}");

    // The finished run's checkpoint is at the end for every group.
    let done = store.load(log).await.expect("load").expect("checkpoint");
    let end_ms = end.duration_since(UNIX_EPOCH).expect("epoch").as_millis() as i64;
    assert!(done.groups.iter().all(|g| g.progress.0 >= end_ms), "{done:?}");

    // Claim `cdc-ttl`: every saved row expires 7 days after its save.
    let ttls = session
        .execute(
            &shardwise::Statement::new(format!("SELECT TTL(progress) FROM {ks}.cdc_checkpoints WHERE table_name = ?")),
            (log.as_str(),),
        )
        .await
        .expect("TTLs");
    let ttls: Vec<Option<i32>> = ttls.rows::<(Option<i32>,)>().expect("types").map(|r| r.expect("row").0).collect();
    let week = 7 * 24 * 3600;
    assert!(ttls.iter().flatten().count() >= done.groups.len(), "a TTL on every group row: {ttls:?}");
    assert!(ttls.iter().flatten().all(|t| (week - 600..=week).contains(t)), "7-day TTLs: {ttls:?}");
}

/// Readers of two tables with the same name in two keyspaces share one
/// checkpoint table: each keeps its own checkpoint (the key is the log's
/// `keyspace.table`), so the second does not resume from the first's
/// progress and skip its own rows.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tables_of_the_same_name_in_two_keyspaces_keep_separate_checkpoints() {
    let (_front, session, ks) = setup("cdc_ckpt_ks1").await;
    let ks2 = testkit::fresh_keyspace("cdc_ckpt_ks2");
    run(&session, &testkit::create_keyspace(&ks2, 1)).await;
    run(
        &session,
        &format!(
            "CREATE TABLE {ks2}.t (pk int, ck int, v bigint, PRIMARY KEY (pk, ck)) WITH cdc = {{'enabled': true}}"
        ),
    )
    .await;
    let store = TableCheckpointStore::new(session.clone(), &ks, "cdc_checkpoints");
    store.create_table().await.expect("checkpoint table");
    let store = Arc::new(store);

    let start = SystemTime::now() - Duration::from_secs(1);
    let (plan1, plan2) = (plan(10, 100, 11), plan(10, 100, 12));
    write(&session, &ks, &plan1, 100, Duration::ZERO).await;
    write(&session, &ks2, &plan2, 100, Duration::ZERO).await;
    let end = SystemTime::now() + Duration::from_millis(500);
    let read = |keyspace: String, seen: Seen| {
        CdcReaderBuilder::new(session.clone(), &keyspace, "t")
            .start(start)
            .end(end)
            .window_size(Duration::from_secs(1))
            .safety_interval(SAFETY)
            .sleep_interval(Duration::from_millis(50))
            .workers(2)
            .checkpoints(store.clone(), Duration::from_millis(100))
            .build(collector(seen))
    };
    for (keyspace, plan) in [(ks.clone(), &plan1), (ks2.clone(), &plan2)] {
        let seen: Seen = Arc::default();
        let reader = read(keyspace.clone(), seen.clone()).await.expect("reader");
        tokio::time::timeout(Duration::from_secs(120), reader.join()).await.expect("finishes").expect("ok");
        let seen = seen.lock().expect("lock").clone();
        assert_eq!(seen, expected_of(plan), "every change of {keyspace}.t, in order");
    }
    for keyspace in [&ks, &ks2] {
        let key = format!("{keyspace}.t_scylla_cdc_log");
        assert!(store.load(&key).await.expect("load").is_some(), "a checkpoint under {key}");
    }
}

/// Fencing in the table store (a lightweight transaction per takeover):
/// each takeover of a group gets a greater epoch and the progress saved
/// before it; a save with an older epoch is refused, naming the group,
/// while the other groups of the same save are saved; saves without an
/// epoch (readers that do not share the table) are not fenced.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_takeover_fences_the_earlier_holder() {
    use shardwise_cdc::checkpoint::{Checkpoint, CheckpointError, GroupProgress};
    use shardwise_cdc::{Millis, StreamId};

    let (_front, session, ks) = setup("cdc_fence").await;
    let store = TableCheckpointStore::new(session.clone(), &ks, "cdc_checkpoints");
    store.create_table().await.expect("checkpoint table");
    store.create_table().await.expect("creating it again (the epoch column exists) is fine");
    let (log, generation) = (format!("{ks}.t_scylla_cdc_log"), Millis(1_000));
    let (a, b) = (StreamId::from_bytes([1; 16]), StreamId::from_bytes([2; 16]));
    let progress = |group, at, epoch| GroupProgress { group, progress: Millis(at), epoch };
    let save = |groups: Vec<GroupProgress>| {
        let store = store.clone();
        let log = log.clone();
        async move { store.save(&log, &Checkpoint { generation, groups }).await }
    };

    let first = store.fence(&log, generation, a).await.expect("fence");
    assert_eq!((first.epoch, first.progress), (1, None), "a group never saved");
    save(vec![progress(a, 1_500, first.epoch)]).await.expect("the holder saves");

    // Taken over (the first holder paused past its lease, say).
    let second = store.fence(&log, generation, a).await.expect("fence");
    assert_eq!((second.epoch, second.progress), (2, Some(Millis(1_500))), "the progress saved before the fence");
    let refused = save(vec![progress(a, 1_900, first.epoch), progress(b, 1_200, 0)]).await;
    assert!(matches!(&refused, Err(CheckpointError::Fenced(groups)) if groups == &[a]), "{refused:?}");
    save(vec![progress(a, 1_700, second.epoch)]).await.expect("the new holder saves");

    let saved = store.load_generation(&log, generation).await.expect("load").expect("saved");
    let find = |g| saved.groups.iter().find(|p| p.group == g).map(|p| (p.progress, p.epoch));
    assert_eq!(find(a), Some((Millis(1_700), 2)), "the old holder's later save did not set the group back");
    assert_eq!(find(b), Some((Millis(1_200), 0)), "the unfenced group of the refused save was saved");
    assert_eq!(store.fence(&log, generation, a).await.expect("fence").epoch, 3, "epochs only grow");
}

/// Groups taken over together are fenced together: each gets an epoch
/// above any it had and the progress its earlier holders saved, and the
/// earlier holder's saves are refused from then on. Through the front and
/// straight to Cassandra (their answers to a refused conditional batch
/// differ).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn groups_are_fenced_together() {
    use shardwise_cdc::checkpoint::{Checkpoint, CheckpointError, GroupProgress};
    use shardwise_cdc::{Millis, StreamId};

    let (_front, session, ks) = setup("cdc_fence_all").await;
    let direct = crate::common::cassandra_session().await;
    for (via, session) in [("front", session), ("cassandra", direct)] {
        let store = TableCheckpointStore::new(session, &ks, &format!("cdc_checkpoints_{via}"));
        store.create_table().await.expect("checkpoint table");
        let (log, generation) = ("ks.t_scylla_cdc_log", Millis(1_000));
        let groups: Vec<StreamId> = (1..=70u8).map(|n| StreamId::from_bytes([n; 16])).collect();
        let first = store.fence_all(log, generation, &groups).await;
        let first: Vec<_> = first.into_iter().map(|f| f.expect("fenced")).collect();
        assert!(first.iter().all(|f| f.epoch == 1 && f.progress.is_none()), "{via}: never fenced, never saved");

        // The first holder saves two groups; one more is fenced alone.
        let save = |epoch: u64, progress: i64, gs: &[StreamId]| Checkpoint {
            generation,
            groups: gs.iter().map(|g| GroupProgress { group: *g, progress: Millis(progress), epoch }).collect(),
        };
        store.save(log, &save(1, 5_000, &groups[..2])).await.expect("saved");
        assert_eq!(store.fence(log, generation, groups[69]).await.expect("fence").epoch, 2, "{via}");

        let second: Vec<_> =
            store.fence_all(log, generation, &groups).await.into_iter().map(|f| f.expect("fenced")).collect();
        assert_eq!((second[0].epoch, second[0].progress), (2, Some(Millis(5_000))), "{via}: the saved progress");
        assert_eq!((second[2].epoch, second[2].progress), (2, None), "{via}");
        assert_eq!(second[69].epoch, 3, "{via}: above the epoch it had");
        match store.save(log, &save(1, 9_000, &groups[..2])).await {
            Err(CheckpointError::Fenced(refused)) => assert_eq!(refused, groups[..2].to_vec(), "{via}"),
            other => panic!("{via}: the earlier holder's save must be refused: {other:?}"),
        }
        store.save(log, &save(2, 9_000, &groups[..1])).await.expect("the new holder saves");
        let loaded = store.load_generation(log, generation).await.expect("load").expect("saved");
        assert_eq!(loaded.progress_of(groups[0]), Some(Millis(9_000)), "{via}");
        assert_eq!(loaded.progress_of(groups[1]), Some(Millis(5_000)), "{via}: the refused save left it");
    }
}

/// A reader's saves never set a group's progress back: a save that was
/// overtaken (taken first, written after a later one: here the first save
/// with progress takes a second, and two workers save in turn) used to
/// write its older progress over the newer one. Every save the store
/// receives moves each group forward or leaves it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_overtaken_save_never_sets_progress_back() {
    use std::collections::HashMap;
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Mutex;

    use shardwise_cdc::checkpoint::{Checkpoint, CheckpointError};
    use shardwise_cdc::{BoxFuture, MemoryCheckpointStore, Millis, StreamId};

    /// Records every progress written, in the order written; the first
    /// save past the start is held for a second.
    struct Slow {
        inner: MemoryCheckpointStore,
        start: Millis,
        held: AtomicBool,
        written: Mutex<Vec<(StreamId, Millis)>>,
    }
    impl CheckpointStore for Slow {
        fn load<'a>(&'a self, table: &'a str) -> BoxFuture<'a, Result<Option<Checkpoint>, CheckpointError>> {
            self.inner.load(table)
        }
        fn save<'a>(
            &'a self,
            table: &'a str,
            checkpoint: &'a Checkpoint,
        ) -> BoxFuture<'a, Result<(), CheckpointError>> {
            Box::pin(async move {
                let past = checkpoint.groups.iter().any(|g| g.progress > self.start);
                if past && !self.held.swap(true, Ordering::SeqCst) {
                    tokio::time::sleep(Duration::from_secs(1)).await;
                }
                self.written.lock().expect("lock").extend(checkpoint.groups.iter().map(|g| (g.group, g.progress)));
                self.inner.save(table, checkpoint).await
            })
        }
    }

    let (_front, session, ks) = setup("cdc_overtaken").await;
    let start = SystemTime::now() - Duration::from_secs(1);
    let plan = plan(20, 300, 9);
    write(&session, &ks, &plan, 300, Duration::ZERO).await;
    let end = SystemTime::now() + Duration::from_secs(3);
    let store = Arc::new(Slow {
        inner: MemoryCheckpointStore::new(),
        start: Millis::from_system_time(start),
        held: AtomicBool::new(false),
        written: Mutex::new(Vec::new()),
    });
    let seen: Seen = Arc::default();
    let reader = resumable(&session, &ks, (start, end), store.clone(), Duration::from_millis(100))
        .workers(2)
        .build(collector(seen))
        .await
        .expect("reader");
    tokio::time::timeout(Duration::from_secs(120), reader.join()).await.expect("finishes").expect("reader");
    assert!(store.held.load(Ordering::SeqCst), "a save was held");
    let mut furthest: HashMap<StreamId, Millis> = HashMap::new();
    let written = store.written.lock().expect("lock");
    for (group, progress) in written.iter() {
        let before = furthest.insert(*group, *progress).unwrap_or(Millis(i64::MIN));
        assert!(*progress >= before, "group {group} set back from {before:?} to {progress:?}");
    }
}
