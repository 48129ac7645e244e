//! How far a reader has read and how far behind it is, for dashboards and
//! alerts: per group, the end of the last window handed to its consumer and
//! how far that lies behind the reader's horizon (the cluster's time minus
//! the safety interval: nothing later may be read yet); for the whole
//! reader, rows and windows delivered and windows retried. Counting costs
//! one relaxed atomic add per window and one per page.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, SystemTime};

use crate::plan::{GroupId, GroupState};
use crate::stream::StreamId;
use crate::time::Millis;

/// A reader's progress ([`CdcReader::progress`](super::CdcReader::progress)).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct ReaderProgress {
    /// The timestamp of the generation being read; `None` before the first.
    pub generation: Option<SystemTime>,
    /// The reader's horizon: the cluster's time minus the safety interval.
    pub horizon: SystemTime,
    /// The groups of the current generation this reader reads.
    pub groups: Vec<GroupLag>,
    /// Rows handed to consumers.
    pub rows: u64,
    /// Windows read to their end and handed to consumers.
    pub windows: u64,
    /// Window reads that failed and were tried again.
    pub windows_retried: u64,
    /// Bytes of the rows handed to consumers (the log rows as the server
    /// sent them).
    pub bytes: u64,
    /// Groups this reader took a lease of (0 without leases).
    pub groups_taken: u64,
    /// Groups this reader left: handed over, or a lease lost or run out.
    pub groups_left: u64,
}

impl ReaderProgress {
    /// The largest lag of any group this reader reads (zero with none).
    pub fn max_lag(&self) -> Duration {
        self.groups.iter().map(|g| g.lag).max().unwrap_or_default()
    }
}

/// One group's progress.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct GroupLag {
    /// The group within its generation.
    pub group: GroupId,
    /// Its first stream: the group's name across processes (leases and
    /// checkpoints are keyed by it).
    pub key: StreamId,
    /// Everything before this was delivered.
    pub progress: SystemTime,
    /// How far `progress` lies behind the horizon (zero when caught up).
    pub lag: Duration,
    /// Whether a window of it is being read now.
    pub reading: bool,
    /// The fencing epoch of this reader's hold on it (0 without leases).
    pub epoch: u64,
}

/// The reader's counters, shared by its workers.
#[derive(Debug, Default)]
pub(super) struct Counters {
    rows: AtomicU64,
    windows: AtomicU64,
    retried: AtomicU64,
    bytes: AtomicU64,
    taken: AtomicU64,
    left: AtomicU64,
}

impl Counters {
    pub(super) fn rows(&self, n: u64) {
        self.rows.fetch_add(n, Ordering::Relaxed);
    }

    pub(super) fn window(&self) {
        self.windows.fetch_add(1, Ordering::Relaxed);
    }

    pub(super) fn retried(&self) {
        self.retried.fetch_add(1, Ordering::Relaxed);
    }

    pub(super) fn bytes(&self, n: usize) {
        self.bytes.fetch_add(n as u64, Ordering::Relaxed);
    }

    pub(super) fn taken(&self) {
        self.taken.fetch_add(1, Ordering::Relaxed);
    }

    pub(super) fn left(&self) {
        self.left.fetch_add(1, Ordering::Relaxed);
    }
}

/// The progress of `groups` (those owned) at `horizon`, with `counters`.
pub(super) fn progress(
    generation: Option<Millis>,
    horizon: Millis,
    groups: &[GroupState],
    counters: &Counters,
) -> ReaderProgress {
    ReaderProgress {
        generation: generation.map(Millis::to_system_time),
        horizon: horizon.to_system_time(),
        groups: groups
            .iter()
            .filter(|g| g.owned)
            .map(|g| GroupLag {
                group: g.group,
                key: g.key,
                progress: g.progress.to_system_time(),
                lag: horizon.duration_since(g.progress),
                reading: g.reading,
                epoch: g.epoch,
            })
            .collect(),
        rows: counters.rows.load(Ordering::Relaxed),
        windows: counters.windows.load(Ordering::Relaxed),
        windows_retried: counters.retried.load(Ordering::Relaxed),
        bytes: counters.bytes.load(Ordering::Relaxed),
        groups_taken: counters.taken.load(Ordering::Relaxed),
        groups_left: counters.left.load(Ordering::Relaxed),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lag_is_how_far_each_owned_group_is_behind_the_horizon() {
        let state = |i: u32, owned, progress| GroupState {
            group: GroupId(i),
            key: StreamId::from_bytes([i as u8; 16]),
            owned,
            reading: false,
            progress: Millis(progress),
            epoch: 0,
        };
        let counters = Counters::default();
        counters.rows(7);
        counters.window();
        counters.retried();
        counters.bytes(100);
        counters.taken();
        counters.taken();
        counters.left();
        let p = progress(
            Some(Millis(1_000)),
            Millis(10_000),
            &[state(0, true, 9_500), state(1, false, 0), state(2, true, 12_000)],
            &counters,
        );
        assert_eq!(p.groups.len(), 2, "only the groups this reader reads");
        assert_eq!(p.groups[0].lag, Duration::from_millis(500));
        assert_eq!(p.groups[1].lag, Duration::ZERO, "ahead of the horizon is no lag");
        assert_eq!(p.max_lag(), Duration::from_millis(500));
        assert_eq!((p.rows, p.windows, p.windows_retried), (7, 1, 1));
        assert_eq!((p.bytes, p.groups_taken, p.groups_left), (100, 2, 1));
        assert_eq!(p.generation, Some(Millis(1_000).to_system_time()));
    }
}
