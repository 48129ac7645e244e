//! The reader's clock: the local wall clock, held back to the cluster's
//! whenever the cluster's runs behind it.
//!
//! The planner reads a window once its end is older than the safety
//! interval. A reader whose clock runs ahead of the nodes' would read
//! windows that writes can still land in, and miss those writes. So the
//! time the planner sees is the earlier of the local clock and the
//! cluster's, the latter read from a node (`now()` through
//! `system.local`) when the reader starts and again every
//! [`ClusterClock::REFRESH`] when a worker looks for generations. The
//! offset is the node's time minus the local time at which its answer
//! arrived: the node read its clock before that, so the estimate is early
//! by at most one round trip, and the horizon errs early, never late.
//! A clock behind the cluster's needs nothing: its horizon is early
//! already.

use std::sync::atomic::{AtomicI64, Ordering};
use std::time::{Duration, Instant, SystemTime};

use shardwise::{Session, Statement};

use crate::sync::Mutex;
use crate::time::Millis;

/// The reader's view of the cluster's time.
#[derive(Debug, Default)]
pub(super) struct ClusterClock {
    /// The cluster's clock minus the local one, in milliseconds, when the
    /// cluster's is behind; 0 otherwise.
    behind_ms: AtomicI64,
    /// When the offset was last measured.
    measured: Mutex<Option<Instant>>,
}

impl ClusterClock {
    /// How often the offset is measured again.
    pub(super) const REFRESH: Duration = Duration::from_secs(10);

    fn measured(&self) -> std::sync::MutexGuard<'_, Option<Instant>> {
        self.measured.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The earlier of the local time and the cluster's.
    pub(super) fn now(&self) -> Millis {
        self.at(Millis::from_system_time(SystemTime::now()))
    }

    /// The cluster's time when the local clock reads `local`, or `local` if
    /// the cluster's is ahead.
    fn at(&self, local: Millis) -> Millis {
        Millis(local.0.saturating_add(self.behind_ms.load(Ordering::Relaxed)))
    }

    /// Whether the offset should be measured again at `now`.
    pub(super) fn due(&self, now: Instant) -> bool {
        self.measured().is_none_or(|at| now.duration_since(at) >= Self::REFRESH)
    }

    /// A node read `node_ms` and its answer arrived at local time `local`.
    fn record(&self, node_ms: i64, local: Millis, at: Instant) {
        self.behind_ms.store(node_ms.saturating_sub(local.0).min(0), Ordering::Relaxed);
        *self.measured() = Some(at);
    }

    /// Reads the time of a node of `session` and records the offset.
    pub(super) async fn measure(&self, session: &Session) -> Result<(), String> {
        let query = Statement::new("SELECT toUnixTimestamp(now()) FROM system.local");
        let result = session.execute(&query, ()).await.map_err(|e| e.to_string())?;
        let local = Millis::from_system_time(SystemTime::now());
        let node_ms = match result.first_row::<(i64,)>() {
            Ok(Some((ms,))) => ms,
            Ok(None) => return Err("system.local has no row".into()),
            Err(e) => return Err(e.to_string()),
        };
        self.record(node_ms, local, Instant::now());
        Ok(())
    }

    /// Measures the offset if it is due; a failure keeps the last one.
    pub(super) async fn refresh(&self, session: &Session) {
        if !self.due(Instant::now()) {
            return;
        }
        if let Err(e) = self.measure(session).await {
            // Measured again on the next look for generations.
            tracing::warn!(error = %e, "reading the cluster's time failed; the last offset stays");
            *self.measured() = Some(Instant::now());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_clock_follows_a_cluster_behind_and_ignores_one_ahead() {
        let clock = ClusterClock::default();
        let t = Instant::now();
        assert!(clock.due(t), "never measured");
        assert_eq!(clock.at(Millis(10_000)), Millis(10_000));
        // The reader runs 2 s ahead of the node.
        clock.record(8_000, Millis(10_000), t);
        assert_eq!(clock.at(Millis(20_000)), Millis(18_000));
        assert!(!clock.due(t + Duration::from_secs(1)));
        assert!(clock.due(t + ClusterClock::REFRESH));
        // The reader runs 2 s behind: its own time is the earlier.
        clock.record(12_000, Millis(10_000), t);
        assert_eq!(clock.at(Millis(20_000)), Millis(20_000));
    }
}
