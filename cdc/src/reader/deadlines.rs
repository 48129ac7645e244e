//! Until when each lease is surely held, on the monotonic clock: written by
//! the lease holder, read by the workers.
//!
//! The holder alone cannot keep a reader from outliving its leases: a
//! renewal may hang for longer than the TTL, and a paused process resumes
//! with every worker mid-window before the holder runs again. So each
//! worker looks here itself before it starts a window of a group and
//! before it hands a window's end to the consumer: a group whose deadline
//! passed is left, whatever the holder is doing.

use std::collections::HashMap;
use std::hash::Hash;
use std::time::Instant;

use crate::sync::{Mutex, MutexGuard};

/// The deadlines of the leases held, by group key (a group's first
/// stream; generic so that the loom model can use plain numbers).
#[derive(Debug)]
pub(crate) struct Deadlines<K> {
    until: Mutex<HashMap<K, Instant>>,
}

impl<K> Default for Deadlines<K> {
    fn default() -> Self {
        Deadlines { until: Mutex::new(HashMap::new()) }
    }
}

impl<K: Hash + Eq> Deadlines<K> {
    fn map(&self) -> MutexGuard<'_, HashMap<K, Instant>> {
        self.until.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The lease of `group` is surely held until `until`.
    pub(crate) fn set(&self, group: K, until: Instant) {
        self.map().insert(group, until);
    }

    /// The lease of `group` is no longer held.
    pub(crate) fn remove(&self, group: K) {
        self.map().remove(&group);
    }

    /// Whether the lease of `group` is surely held at `now`.
    pub(crate) fn holds(&self, group: K, now: Instant) -> bool {
        self.map().get(&group).is_some_and(|until| now < *until)
    }
}

// Outside loom: the loom model (`loom-tests`) compiles this file too.
#[cfg(all(test, not(loom)))]
mod tests {
    use std::time::Duration;

    use super::*;

    #[test]
    fn a_lease_is_held_until_its_deadline_only() {
        let deadlines = Deadlines::default();
        let (g, now) = (1u32, Instant::now());
        assert!(!deadlines.holds(g, now), "never taken");
        deadlines.set(g, now + Duration::from_secs(1));
        assert!(deadlines.holds(g, now));
        assert!(!deadlines.holds(g, now + Duration::from_secs(1)), "the deadline itself is past");
        deadlines.set(g, now + Duration::from_secs(5));
        assert!(deadlines.holds(g, now + Duration::from_secs(2)), "renewed");
        deadlines.remove(g);
        assert!(!deadlines.holds(g, now));
    }
}
