//! The CDC reader's lease deadlines (`shardwise-cdc`'s
//! `reader/deadlines.rs`): the lease holder renews a group's deadline and
//! then, its lease lost, removes it, while a worker checks it before a
//! window and again before the window's end. Once a worker saw the lease
//! gone it never sees it held again, and a check made after the removal
//! never sees it held: no window of a lost group is started or ended.

use std::time::{Duration, Instant};

use loom::sync::Arc;
use loom::thread;

use crate::deadlines::Deadlines;

#[test]
fn a_lease_seen_gone_is_never_seen_held_again() {
    loom::model(|| {
        let deadlines = Arc::new(Deadlines::default());
        let far = Instant::now() + Duration::from_secs(3600);
        deadlines.set(7u32, far);
        let holder = {
            let deadlines = deadlines.clone();
            thread::spawn(move || {
                // Renewed, then lost.
                deadlines.set(7, far);
                deadlines.remove(7);
            })
        };
        let now = Instant::now();
        let before_window = deadlines.holds(7, now);
        let before_end = deadlines.holds(7, now);
        assert!(before_window || !before_end, "seen gone, then held again");
        holder.join().expect("holder");
        assert!(!deadlines.holds(7, now), "a check after the removal sees the lease gone");
    });
}
