//! Models of the CDC reader's clock (`cdc/src/reader/clock.rs`): the
//! workers of a reader share one `ClusterClock`, and every turn of a
//! worker's loop asks it whether a reading of the cluster's time is due.
//! Of workers asking at once, exactly one reads (the others would query a
//! node for nothing); and of two readings whose answers race, the one that
//! arrived later is kept whatever order they are recorded in (a slow
//! answer kept over a later one would hold the planner's time back by the
//! difference, and one kept wrongly the other way would move it ahead of
//! the cluster's). A worker reading the time meanwhile sees no reading, or
//! one of the two, never a mix.
//!
//! Only the clock's state is compiled here: the query of a node
//! (`measure`, `refresh`) needs the driver, so it is left out under
//! `cfg(loom)`.
//!
//! To see them fail (done by hand): in `ClusterClock::claim` check
//! `self.state().tried` and set it under a second `self.state()` (the lock
//! not held from the check to the store): loom finds two workers both
//! claiming (it printed "assertion `left == right` failed: 2 workers
//! claimed one reading"). In `ClusterClock::record` the same split (check
//! `self.state().last`, then store under a second lock): loom finds both
//! checks passing before either store and the earlier answer stored last
//! (it printed "the later reading was replaced: 5010000ms", the earlier
//! reading extrapolated by the 10 s between the two).

use std::time::{Duration, Instant};

use loom::sync::Arc;
use loom::thread;

use crate::clock::ClusterClock;
use crate::support::model;
use crate::time::Millis;

#[test]
fn of_workers_asking_at_once_one_reads() {
    model(|| {
        let clock = Arc::new(ClusterClock::default());
        let at = Instant::now();
        let others: Vec<_> = (0..2)
            .map(|_| {
                let clock = clock.clone();
                thread::spawn(move || clock.claim(at))
            })
            .collect();
        let mine = clock.claim(at);
        let claimed = others.into_iter().map(|w| w.join().expect("worker")).filter(|&c| c).count() + usize::from(mine);
        assert_eq!(claimed, 1, "{claimed} workers claimed one reading");
        // Not due again before the refresh period is over, due after it.
        assert!(!clock.claim(at + ClusterClock::REFRESH / 2));
        assert!(clock.claim(at + ClusterClock::REFRESH));
    });
}

/// Cluster times far before any wall clock, so that the planner's time is
/// the cluster's (extrapolated) and says which reading is kept.
const LATER: Millis = Millis(1_000_000);
const EARLIER: Millis = Millis(5_000_000);
const GAP: Duration = Duration::from_secs(10);

#[test]
fn the_later_of_two_racing_readings_is_kept() {
    model(|| {
        let clock = Arc::new(ClusterClock::default());
        let late = Instant::now();
        // An answer that arrived 10 s before the other, recorded at once
        // with it (a slow worker).
        let Some(early) = late.checked_sub(GAP) else { return };
        let slow = {
            let clock = clock.clone();
            thread::spawn(move || clock.record(EARLIER, early))
        };
        let fast = {
            let clock = clock.clone();
            thread::spawn(move || clock.record(LATER, late))
        };
        // A worker's planner time meanwhile: its own (no reading yet), or
        // extrapolated from one of the two.
        let seen = clock.now();
        let later = seen >= LATER && seen < EARLIER;
        let earlier = seen >= EARLIER.saturating_add(GAP) && seen < Millis(EARLIER.0 * 2);
        let local = seen.0 > 1_000_000_000_000;
        assert!(later || earlier || local, "a time from no reading: {seen}");
        slow.join().expect("slow");
        fast.join().expect("fast");
        let now = clock.now();
        assert!(now >= LATER && now < EARLIER, "the later reading was replaced: {now}");
    });
}
