//! Client-side write timestamps (the official driver's `TimestampGenerator`):
//! with a generator, every request without a timestamp of its own carries
//! one (the protocol's default timestamp), so that two writes of one client
//! are ordered as it sent them whichever coordinators apply them. Without
//! one (the default, as in the official driver) the coordinator stamps
//! each write when it receives it. A statement's own timestamp
//! ([`StatementOptions::timestamp`](crate::StatementOptions)) still wins.

use std::time::{SystemTime, UNIX_EPOCH};

use crate::sync::{AtomicI64, Ordering};

/// Gives the timestamps (microseconds since the Unix epoch) of requests
/// that have none of their own. Called once per such request, on its task.
pub trait TimestampGenerator: Send + Sync + std::fmt::Debug {
    /// The next timestamp.
    fn next_timestamp(&self) -> i64;
}

/// The wall clock in microseconds, never the same value twice and never
/// going back: when the clock stands still or steps back, each timestamp is
/// the one before plus one microsecond.
#[derive(Debug, Default)]
pub struct MonotonicTimestampGenerator {
    last: AtomicI64,
}

impl MonotonicTimestampGenerator {
    /// A generator starting from the clock.
    pub fn new() -> Self {
        Self::default()
    }

    /// The next timestamp when the clock reads `now` (microseconds).
    pub(crate) fn next_at(&self, now: i64) -> i64 {
        let step = |last: i64| Some(now.max(last.saturating_add(1)));
        // The closure always returns Some: the update cannot fail.
        let previous = match self.last.fetch_update(Ordering::AcqRel, Ordering::Acquire, step) {
            Ok(p) | Err(p) => p,
        };
        now.max(previous.saturating_add(1))
    }
}

impl TimestampGenerator for MonotonicTimestampGenerator {
    fn next_timestamp(&self) -> i64 {
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| i64::try_from(d.as_micros()).unwrap_or(i64::MAX));
        self.next_at(now)
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn timestamps_follow_the_clock_and_never_repeat_or_go_back() {
        let g = MonotonicTimestampGenerator::new();
        assert_eq!(g.next_at(1_000), 1_000);
        assert_eq!(g.next_at(1_000), 1_001, "the clock stood still");
        assert_eq!(g.next_at(900), 1_002, "the clock stepped back");
        assert_eq!(g.next_at(5_000), 5_000);
        let now = g.next_timestamp();
        assert!(now > 1_700_000_000_000_000, "microseconds of the wall clock: {now}");
        assert!(g.next_timestamp() > now);
    }
}
