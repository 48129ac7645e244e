//! The monotonic timestamp generator under racing requests: with the clock
//! standing still, every caller gets a timestamp of its own, each after
//! the clock, none repeated, whatever the interleaving.

use loom::sync::Arc;
use loom::thread;

use crate::timestamp::MonotonicTimestampGenerator;

#[test]
fn racing_requests_get_distinct_increasing_timestamps() {
    loom::model(|| {
        let g = Arc::new(MonotonicTimestampGenerator::new());
        let others: Vec<_> = (0..2)
            .map(|_| {
                let g = g.clone();
                thread::spawn(move || g.next_at(100))
            })
            .collect();
        let mine = g.next_at(100);
        let mut all: Vec<i64> = others.into_iter().map(|t| t.join().expect("thread")).collect();
        all.push(mine);
        all.sort_unstable();
        assert_eq!(all, vec![100, 101, 102], "one each, none repeated");
        assert_eq!(g.next_at(100), 103, "and the next after all of them");
    });
}
