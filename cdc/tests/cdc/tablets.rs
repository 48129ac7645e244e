//! A table in a tablets keyspace, read live across a split and a merge of
//! its tablets made mid-workload (through the emulation front, which keeps
//! the table's CDC stream sets as Scylla does: `docs/cdc-log.md` §11). The
//! reader finds the stream sets by itself (the keyspace has
//! `initial_tablets`), reads each set up to the next one's timestamp and
//! the next from there: every change once, in write order per key, and
//! each set's streams are read.

use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use shardwise_cdc::CdcReaderBuilder;
use shardwise_emu::Resize;

use crate::common::{self, workload};

/// Waits until the newest stream set of `ks.t` operates.
async fn until_switch(front: &shardwise_emu::FrontHandle, ks: &str) {
    let at = front.tablet_streams(ks, "t").and_then(|s| s.sets().last().map(|s| s.timestamp_ms)).expect("a set");
    while (SystemTime::now().duration_since(UNIX_EPOCH).expect("clock").as_millis() as i64) < at + 50 {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_change_once_across_a_split_and_a_merge() {
    tokio::time::timeout(Duration::from_secs(150), async {
        let (front, session, _) = common::front_and_keyspace("cdc_tablets").await;
        let ks = common::tablets_keyspace(&session, "cdc_tablets_ks", 4).await;
        workload::create_table(&session, &ks).await;
        let sets = front.tablet_streams(&ks, "t").expect("a tablets CDC table has stream sets");
        assert_eq!(sets.sets()[0].streams.len(), 4, "a stream per tablet");

        let seen: workload::Seen = Default::default();
        let reader = CdcReaderBuilder::new(session.clone(), &ks, "t")
            .start(SystemTime::now() - Duration::from_secs(1))
            .window_size(Duration::from_millis(500))
            .safety_interval(workload::SAFETY)
            .sleep_interval(Duration::from_millis(50))
            .generation_poll_interval(Duration::from_millis(200))
            .workers(2)
            .build(workload::collector(seen.clone()))
            .await
            .expect("reader");

        // Before the split; after it but before its set starts (the old
        // streams still); in the split's set; after a merge, in its set.
        let plan = workload::plan(16, 400, 11);
        let phases: Vec<&[_]> = plan.chunks(100).collect();
        workload::write(&session, &ks, phases[0], 100, Duration::ZERO).await;
        front.resize_tablets(&ks, "t", Resize::Split).await.expect("split").expect("a tablets table");
        workload::write(&session, &ks, phases[1], 100, Duration::ZERO).await;
        until_switch(&front, &ks).await;
        workload::write(&session, &ks, phases[2], 100, Duration::ZERO).await;
        front.resize_tablets(&ks, "t", Resize::Merge).await.expect("merge").expect("a tablets table");
        until_switch(&front, &ks).await;
        workload::write(&session, &ks, phases[3], 100, Duration::ZERO).await;

        let deadline = Instant::now() + Duration::from_secs(60);
        while workload::count(&seen) < plan.len() {
            assert!(Instant::now() < deadline, "delivered {} of {}", workload::count(&seen), plan.len());
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        // Read on a little: nothing more may come.
        tokio::time::sleep(Duration::from_secs(1)).await;
        reader.handle().stop();
        tokio::time::timeout(Duration::from_secs(30), reader.join())
            .await
            .expect("the reader stops")
            .expect("the reader ends without error");

        let sets = front.tablet_streams(&ks, "t").expect("sets");
        let seen = seen.lock().expect("lock").clone();
        let delivered: usize = seen.values().map(Vec::len).sum();
        println!(
            "shardwise-cdc on a tablets table: {} changes written, {delivered} delivered, over {} stream sets of {:?} \
             streams; {}",
            plan.len(),
            sets.sets().len(),
            sets.sets().iter().map(|s| s.streams.len()).collect::<Vec<_>>(),
            front.stats()
        );
        assert_eq!(sets.sets().len(), 3, "the first set, the split's and the merge's");
        assert_eq!(delivered, plan.len(), "every change once");
        assert_eq!(seen, workload::expected_of(&plan), "every change of every key, in write order");
    })
    .await
    .expect("the test hung");
}
