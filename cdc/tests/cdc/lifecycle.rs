//! A reader's life as a `scylla-cdc` user drives it: `stop_at` moves the
//! end of a running reader (it reads every change before that time and
//! finishes), dropping a reader stops it, and a detached one runs on until
//! its handle stops it.

use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use shardwise_cdc::CdcReaderBuilder;

use crate::common::workload::{collector, count, front_with_table as setup, plan, write, Seen, SAFETY};

/// Waits until `seen` holds `n` changes (at most 60 s).
async fn until(seen: &Seen, n: usize) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while count(seen) < n {
        assert!(Instant::now() < deadline, "{} of {n} changes in 60 s", count(seen));
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stop_at_ends_a_running_reader_and_dropping_one_stops_it() {
    let (_front, session, ks) = setup("cdc_life").await;
    let start = SystemTime::now() - Duration::from_secs(1);
    let reader = |seen: Seen| {
        CdcReaderBuilder::new(session.clone(), &ks, "t")
            .start(start)
            .window_size(Duration::from_millis(100))
            .safety_interval(SAFETY)
            .sleep_interval(Duration::from_millis(50))
            .workers(2)
            .build(collector(seen))
    };
    let changes = plan(8, 300, 5);

    // stop_at: a reader built without an end reads every change before
    // the time it is given, none after, and finishes.
    let seen: Seen = Arc::default();
    let running = reader(seen.clone()).await.expect("reader");
    // The end is kept in milliseconds (`cdc$time < minTimeuuid(end)`, as
    // scylla-cdc's), so the cut is taken a few milliseconds after the last
    // acknowledged write. It is given before the later writes: given after
    // them, a reader that had already read past the cut (the later writes
    // taking over a safety interval on a loaded machine) keeps what it read,
    // as documented (the CI failure of this test).
    write(&session, &ks, &changes[..100], 100, Duration::ZERO).await;
    tokio::time::sleep(Duration::from_millis(5)).await;
    let cut = SystemTime::now();
    running.stop_at(cut);
    tokio::time::sleep(Duration::from_millis(20)).await;
    write(&session, &ks, &changes[100..200], 100, Duration::ZERO).await;
    tokio::time::timeout(Duration::from_secs(60), running.join())
        .await
        .expect("finished at its new end")
        .expect("read cleanly");
    assert_eq!(count(&seen), 100, "exactly the changes written before the time given to stop_at");

    // Dropped: it stops, and reads nothing written afterwards.
    let dropped: Seen = Arc::default();
    let r = reader(dropped.clone()).await.expect("reader");
    until(&dropped, 200).await;
    drop(r);
    write(&session, &ks, &changes[200..250], 50, Duration::ZERO).await;
    tokio::time::sleep(SAFETY + Duration::from_secs(2)).await;
    assert_eq!(count(&dropped), 200, "a dropped reader read on");

    // Detached: it runs on until its handle stops it.
    let detached: Seen = Arc::default();
    let handle = reader(detached.clone()).await.expect("reader").detach();
    until(&detached, 250).await;
    write(&session, &ks, &changes[250..], 50, Duration::ZERO).await;
    until(&detached, 300).await;
    handle.stop();
}
