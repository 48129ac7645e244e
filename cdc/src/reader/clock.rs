//! The reader's clock: the local wall clock, held back to the cluster's
//! whenever the cluster's runs behind it.
//!
//! The planner reads a window once its end is older than the safety
//! interval. A reader whose clock runs ahead of the nodes' would read
//! windows that writes can still land in, and miss those writes. So the
//! time the planner sees is the earlier of the local clock and the
//! cluster's, the latter read from a node (`now()` through
//! `system.local`) when the reader starts and again, at most every
//! [`ClusterClock::REFRESH`], when a worker calls [`ClusterClock::refresh`]
//! (before it looks for generations).
//!
//! Between two readings the cluster's time is extrapolated on the
//! monotonic clock ([`Instant`]), not on the wall clock: a reading keeps
//! what the node read and the `Instant` its answer arrived, and the
//! cluster's time later is that plus the `Instant`s elapsed since. An
//! offset added to the wall clock would follow the wall clock's steps (an
//! NTP step, a VM resumed, an operator's `date -s`): a step forward after
//! a reading would move the planner's "now" forward and cut the safety
//! interval until the next reading, and the writes of the windows read
//! meanwhile are lost (issue 51). The monotonic clock does not step.
//!
//! Every estimate errs early, never late, so the horizon is never later
//! than the cluster's: the node read its clock before its answer arrived,
//! so the reading is early by at most one round trip (the arrival, not the
//! midpoint of the round trip, which could be late by half of one);
//! `toUnixTimestamp` truncates to the millisecond; and the monotonic clock
//! stops while the machine sleeps, so a machine resumed is behind the
//! cluster until the next reading. Only the monotonic clock's rate error
//! (NTP slews it too; unsynchronized, some parts per million) could make it
//! late, by milliseconds over [`ClusterClock::REFRESH`].
//!
//! A clock behind the cluster's needs nothing: its horizon is early
//! already, and the earlier of the two is its own. Before any reading (the
//! first failed) the local clock is used.
//!
//! The arithmetic ([`Reading`], [`planner_time`]) takes the clocks'
//! readings as arguments, so the tests step a virtual wall clock.

use std::time::{Duration, Instant, SystemTime};

// `loom-tests` models the clock's state without the driver: what queries
// a node is left out there.
#[cfg(not(loom))]
use shardwise::{ExecutionError, RowsAccessError, Session, Statement};

use crate::sync::{Mutex, MutexGuard};
use crate::time::Millis;

/// Why the cluster's time could not be read.
#[cfg(not(loom))]
#[derive(Debug, thiserror::Error)]
pub(super) enum ClockError {
    /// The query failed.
    #[error(transparent)]
    Query(#[from] ExecutionError),
    /// The answer had no row.
    #[error("system.local has no row")]
    NoRow,
    /// The answer's row was not a timestamp.
    #[error("the time in system.local's answer: {0}")]
    Row(#[from] RowsAccessError),
}

/// One reading of the cluster's clock.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Reading {
    /// The time a node read.
    cluster: Millis,
    /// When its answer arrived, on the monotonic clock.
    at: Instant,
}

impl Reading {
    /// The cluster's time at `now`: the reading plus the monotonic time
    /// since (none if `now` is before it).
    fn cluster_at(&self, now: Instant) -> Millis {
        self.cluster.saturating_add(now.saturating_duration_since(self.at))
    }
}

/// The planner's time when the wall clock reads `local` at `now`: the
/// earlier of `local` and the cluster's time extrapolated from `last`;
/// `local` before any reading.
fn planner_time(last: Option<Reading>, local: Millis, now: Instant) -> Millis {
    match last {
        Some(reading) => local.min(reading.cluster_at(now)),
        None => local,
    }
}

#[derive(Debug, Default)]
struct State {
    /// The last successful reading.
    last: Option<Reading>,
    /// When a reading was last begun (whether it succeeded or not).
    tried: Option<Instant>,
}

/// The reader's view of the cluster's time.
#[derive(Debug, Default)]
pub(super) struct ClusterClock {
    state: Mutex<State>,
    /// Never read the cluster's time: the local clock alone
    /// (`CdcReaderBuilder::cluster_clock` off).
    local_only: bool,
}

impl ClusterClock {
    /// How often [`ClusterClock::refresh`] reads the cluster's time again.
    pub(super) const REFRESH: Duration = Duration::from_secs(10);

    /// A clock that never reads the cluster's time: the planner then runs
    /// on the local clock alone.
    pub(super) fn local_only() -> Self {
        ClusterClock { local_only: true, ..ClusterClock::default() }
    }

    fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The earlier of the local time and the cluster's.
    pub(super) fn now(&self) -> Millis {
        let last = self.state().last;
        planner_time(last, Millis::from_system_time(SystemTime::now()), Instant::now())
    }

    /// Claims a reading if none was begun in the last [`Self::REFRESH`]
    /// before `now`: whether the caller should read the cluster's time.
    /// (`pub(super)` for `loom-tests`, which models it.)
    pub(super) fn claim(&self, now: Instant) -> bool {
        let mut state = self.state();
        let due = state.tried.is_none_or(|at| now.saturating_duration_since(at) >= Self::REFRESH);
        if due {
            state.tried = Some(now);
        }
        due
    }

    /// A node read `cluster`, and its answer arrived at `at`.
    pub(super) fn record(&self, cluster: Millis, at: Instant) {
        let mut state = self.state();
        // Of two readings, the later one (a slow answer may come after a
        // faster, later query's).
        if state.last.is_none_or(|last| last.at <= at) {
            state.last = Some(Reading { cluster, at });
        }
    }

    /// Reads the time of a node of `session` and records it.
    #[cfg(not(loom))]
    pub(super) async fn measure(&self, session: &Session) -> Result<(), ClockError> {
        if self.local_only {
            return Ok(());
        }
        self.state().tried = Some(Instant::now());
        let query = Statement::new("SELECT toUnixTimestamp(now()) FROM system.local");
        let result = session.execute(&query, ()).await?;
        // The answer's arrival: the node read its clock before it.
        let (at, local) = (Instant::now(), SystemTime::now());
        let (ms,) = result.first_row::<(i64,)>()?.ok_or(ClockError::NoRow)?;
        self.record(Millis(ms), at);
        let local = Millis::from_system_time(local);
        tracing::debug!(cluster_minus_local_ms = ms.saturating_sub(local.0), "read the cluster's time");
        Ok(())
    }

    /// Reads the cluster's time if none was read (or tried) in the last
    /// [`Self::REFRESH`]; a failure keeps the last reading. Cheap when not
    /// due (a lock and a comparison), so it may be called on every turn of
    /// a worker's loop; of workers calling it together, one reads.
    #[cfg(not(loom))]
    pub(super) async fn refresh(&self, session: &Session) {
        if self.local_only || !self.claim(Instant::now()) {
            return;
        }
        if let Err(e) = self.measure(session).await {
            // Read again once `REFRESH` has passed.
            tracing::warn!(error = %e, "reading the cluster's time failed; the last reading stays");
        }
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    const S: Duration = Duration::from_secs(1);

    #[test]
    fn before_any_reading_the_local_clock_is_used() {
        let t = Instant::now();
        assert_eq!(planner_time(None, Millis(10_000), t), Millis(10_000));
        let clock = ClusterClock::default();
        let (before, now, after) = (Millis::from_system_time(SystemTime::now()), clock.now(), SystemTime::now());
        assert!(before <= now && now <= Millis::from_system_time(after), "{before} {now}");
    }

    #[test]
    fn a_wall_clock_step_forward_after_a_reading_does_not_move_the_time_forward() {
        let t = Instant::now();
        // Both clocks read 10 s when the node's answer arrives.
        let reading = Some(Reading { cluster: Millis(10_000), at: t });
        assert_eq!(planner_time(reading, Millis(10_000), t), Millis(10_000));
        // A second later the wall clock steps 5 s forward (NTP, a VM
        // resumed): the time is the cluster's, 11 s, not 16 s.
        assert_eq!(planner_time(reading, Millis(16_000), t + S), Millis(11_000));
        // And it goes on with the monotonic clock, not the wall clock.
        assert_eq!(planner_time(reading, Millis(16_500), t + S + S / 2), Millis(11_500));
        assert_eq!(planner_time(reading, Millis(20_000), t + 5 * S), Millis(15_000));
    }

    #[test]
    fn a_clock_ahead_is_held_to_the_cluster_and_one_behind_keeps_its_own() {
        let t = Instant::now();
        // The reader runs 2 s ahead of the node.
        let ahead = Some(Reading { cluster: Millis(8_000), at: t });
        assert_eq!(planner_time(ahead, Millis(10_000), t), Millis(8_000));
        assert_eq!(planner_time(ahead, Millis(20_000), t + 10 * S), Millis(18_000));
        // The reader runs 2 s behind: its own time is the earlier, and
        // stays so as both advance, and when its clock steps back.
        let behind = Some(Reading { cluster: Millis(12_000), at: t });
        assert_eq!(planner_time(behind, Millis(10_000), t), Millis(10_000));
        assert_eq!(planner_time(behind, Millis(20_000), t + 10 * S), Millis(20_000));
        assert_eq!(planner_time(behind, Millis(15_000), t + 10 * S), Millis(15_000));
        // A step forward past the cluster's is held to the cluster's.
        assert_eq!(planner_time(behind, Millis(30_000), t + 10 * S), Millis(22_000));
    }

    #[test]
    fn an_instant_before_the_reading_extrapolates_nothing() {
        let t = Instant::now();
        let reading = Reading { cluster: Millis(10_000), at: t + S };
        assert_eq!(reading.cluster_at(t), Millis(10_000));
    }

    #[test]
    fn the_clock_keeps_the_later_reading_and_extrapolates_it() {
        let clock = ClusterClock::default();
        let t = Instant::now();
        clock.record(Millis(10_000), t + S);
        // An older reading that arrives late is not kept.
        clock.record(Millis(1_000), t);
        let last = clock.state().last;
        assert_eq!(last, Some(Reading { cluster: Millis(10_000), at: t + S }));
        assert_eq!(planner_time(last, Millis(i64::MAX), t + 3 * S), Millis(12_000));
        clock.record(Millis(20_000), t + 2 * S);
        assert_eq!(planner_time(clock.state().last, Millis(i64::MAX), t + 3 * S), Millis(21_000));
    }

    #[test]
    fn one_reading_is_claimed_per_refresh_period() {
        let clock = ClusterClock::default();
        let t = Instant::now();
        assert!(clock.claim(t), "never read");
        assert!(!clock.claim(t), "claimed already");
        assert!(!clock.claim(t + S));
        assert!(clock.claim(t + ClusterClock::REFRESH));
        assert!(!clock.claim(t + ClusterClock::REFRESH + S));
    }
}
