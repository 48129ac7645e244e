//! A node's latency average under concurrent attempts: an update never
//! waits for another (it is dropped instead), and a reader that sees a
//! count sees fields of updates at least as recent as the one that stored
//! it (maybe of two successive ones), never a value nobody recorded.

use std::time::Duration;

use loom::sync::Arc;
use loom::thread;

use crate::latency::NodeAverage;

const SCALE: Duration = Duration::from_millis(100);

#[test]
fn racing_updates_and_a_reader() {
    loom::model(|| {
        let cell = Arc::new(NodeAverage::default());
        let writers: Vec<_> = [(10, 1_000), (20, 3_000)]
            .into_iter()
            .map(|(at, latency)| {
                let cell = cell.clone();
                thread::spawn(move || cell.record(at, latency, SCALE))
            })
            .collect();
        if let Some(a) = cell.get() {
            assert!((1..=2).contains(&a.count), "{a:?}");
            assert!(a.mean_ns >= 1_000.0 && a.mean_ns <= 3_000.0, "{a:?}");
            assert!(a.at_ns == 10 || a.at_ns == 20, "{a:?}");
        }
        for w in writers {
            w.join().expect("writer");
        }
        // Both recorded, or one dropped because the other held the lock.
        let a = cell.get().expect("at least one update");
        assert!((1..=2).contains(&a.count), "{a:?}");
        assert!(a.mean_ns >= 1_000.0 && a.mean_ns <= 3_000.0, "{a:?}");
    });
}
