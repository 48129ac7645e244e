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
use std::time::Instant;

use crate::stream::StreamId;
use crate::sync::Mutex;

/// The deadlines of the leases held, by group key.
#[derive(Debug, Default)]
pub(crate) struct Deadlines {
    until: Mutex<HashMap<StreamId, Instant>>,
}

impl Deadlines {
    fn map(&self) -> std::sync::MutexGuard<'_, HashMap<StreamId, Instant>> {
        self.until.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The lease of `group` is surely held until `until`.
    pub(crate) fn set(&self, group: StreamId, until: Instant) {
        self.map().insert(group, until);
    }

    /// The lease of `group` is no longer held.
    pub(crate) fn remove(&self, group: StreamId) {
        self.map().remove(&group);
    }

    /// Whether the lease of `group` is surely held at `now`.
    pub(crate) fn holds(&self, group: StreamId, now: Instant) -> bool {
        self.map().get(&group).is_some_and(|until| now < *until)
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[test]
    fn a_lease_is_held_until_its_deadline_only() {
        let deadlines = Deadlines::default();
        let (g, now) = (StreamId::from_bytes([1; 16]), Instant::now());
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
