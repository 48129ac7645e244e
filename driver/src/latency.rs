//! Latency awareness: each node's average latency, and which nodes a plan
//! moves to its end because they are much slower than the fastest one.
//!
//! The average is exponentially weighted by time, as the Cassandra drivers
//! keep it: the weight of the past decays with the time since the previous
//! measurement over a `scale`, so that it follows a node that slows down or
//! recovers within about that long, whatever the request rate. A node is
//! penalized while its average exceeds the best node's by the exclusion
//! threshold; a penalized node that has had no measurement for the retry
//! period is not penalized any more, so its next request probes it and
//! either clears it or penalizes it again.
//!
//! The computations take the time as an argument (nanoseconds on a
//! monotonic clock) and are tested with a virtual one; `NodeAverage` is
//! the shared cell a node's attempts update, never waiting for a lock.

use std::time::Duration;

use crate::sync::{AtomicU64, Mutex, Ordering};

/// When a node counts as too slow. The defaults are those of the official
/// drivers: a threshold of 2, a scale of 100 ms, a retry period of 10 s and
/// 50 measurements.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LatencyAwareness {
    /// A node whose average exceeds the best node's times this is moved
    /// to the end of the plans.
    pub exclusion_threshold: f64,
    /// How fast the past loses weight: a measurement `scale` after the
    /// previous one weighs about 30%.
    pub scale: Duration,
    /// A penalized node without a measurement for this long is tried again.
    pub retry_period: Duration,
    /// Measurements a node needs before it can be penalized.
    pub minimum_measurements: u32,
}

impl Default for LatencyAwareness {
    fn default() -> Self {
        LatencyAwareness {
            exclusion_threshold: 2.0,
            scale: Duration::from_millis(100),
            retry_period: Duration::from_secs(10),
            minimum_measurements: 50,
        }
    }
}

/// A node's average latency as of its last measurement.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Average {
    /// The average, in nanoseconds.
    pub(crate) mean_ns: f64,
    /// When it was last measured (nanoseconds on the caller's clock).
    pub(crate) at_ns: u64,
    /// How many measurements it has seen.
    pub(crate) count: u32,
}

impl Average {
    /// The average after one more measurement of `latency_ns` at `now_ns`.
    pub(crate) fn next(previous: Option<Average>, now_ns: u64, latency_ns: u64, scale: Duration) -> Average {
        let Some(p) = previous else {
            return Average { mean_ns: latency_ns as f64, at_ns: now_ns, count: 1 };
        };
        let since = now_ns.saturating_sub(p.at_ns) as f64 / (scale.as_nanos().max(1) as f64);
        // The weight of the past: ln(1 + x) / x falls from 1 (no time passed)
        // towards 0 as the time since the last measurement grows.
        let keep = if since > 0.0 { (1.0 + since).ln() / since } else { 1.0 };
        Average {
            mean_ns: keep * p.mean_ns + (1.0 - keep) * latency_ns as f64,
            at_ns: now_ns.max(p.at_ns),
            count: p.count.saturating_add(1),
        }
    }
}

/// What makes a node penalized in one plan: the best average among the
/// nodes, at a time.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Penalty {
    pub(crate) config: LatencyAwareness,
    /// The lowest average among the nodes that count.
    pub(crate) best_ns: f64,
    pub(crate) now_ns: u64,
}

impl Penalty {
    /// Whether `average` counts: enough measurements, and recent ones.
    fn counts(config: &LatencyAwareness, average: &Average, now_ns: u64) -> bool {
        average.count >= config.minimum_measurements
            && u128::from(now_ns.saturating_sub(average.at_ns)) < config.retry_period.as_nanos()
    }

    /// The penalty over these averages at `now_ns`; `None` when no node
    /// counts yet (nobody is penalized then).
    pub(crate) fn over(
        config: LatencyAwareness,
        averages: impl IntoIterator<Item = Option<Average>>,
        now_ns: u64,
    ) -> Option<Penalty> {
        let best_ns = averages
            .into_iter()
            .flatten()
            .filter(|a| Self::counts(&config, a, now_ns))
            .map(|a| a.mean_ns)
            .min_by(f64::total_cmp)?;
        Some(Penalty { config, best_ns, now_ns })
    }

    /// Whether a node with `average` goes to the end of the plan.
    pub(crate) fn applies(&self, average: Option<Average>) -> bool {
        average.is_some_and(|a| {
            Self::counts(&self.config, &a, self.now_ns) && a.mean_ns > self.config.exclusion_threshold * self.best_ns
        })
    }
}

/// A node's average, updated by its attempts and read by every plan. An
/// update that finds another one under way is dropped rather than waited
/// for (one measurement less changes little); readers read three atomics
/// and never lock, so they may see the fields of two successive updates.
#[derive(Debug, Default)]
pub(crate) struct NodeAverage {
    update: Mutex<Option<Average>>,
    mean_ns: AtomicU64,
    at_ns: AtomicU64,
    count: AtomicU64,
}

impl NodeAverage {
    /// Counts one measurement, unless another update is under way.
    pub(crate) fn record(&self, now_ns: u64, latency_ns: u64, scale: Duration) {
        let Ok(mut current) = self.update.try_lock() else { return };
        let next = Average::next(*current, now_ns, latency_ns, scale);
        *current = Some(next);
        self.mean_ns.store(next.mean_ns.to_bits(), Ordering::Relaxed);
        self.at_ns.store(next.at_ns, Ordering::Relaxed);
        self.count.store(u64::from(next.count), Ordering::Release);
    }

    /// The average as of a recent update; `None` before the first.
    pub(crate) fn get(&self) -> Option<Average> {
        let count = self.count.load(Ordering::Acquire);
        (count > 0).then(|| Average {
            mean_ns: f64::from_bits(self.mean_ns.load(Ordering::Relaxed)),
            at_ns: self.at_ns.load(Ordering::Relaxed),
            count: u32::try_from(count).unwrap_or(u32::MAX),
        })
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    const MS: u64 = 1_000_000;

    fn after(n: u32, every_ns: u64, latency_ns: u64) -> Average {
        let mut a = None;
        for i in 0..n {
            a = Some(Average::next(a, u64::from(i) * every_ns, latency_ns, Duration::from_millis(100)));
        }
        a.expect("measured")
    }

    #[test]
    fn the_average_follows_a_change_within_about_the_scale() {
        let scale = Duration::from_millis(100);
        // 1 ms for a second, one request a millisecond: the average is 1 ms.
        let fast = after(1000, MS, MS);
        assert!((fast.mean_ns - MS as f64).abs() < 1.0, "{fast:?}");
        // Then 10 ms: after 50 ms it has moved part of the way, after 500 ms nearly all of it.
        let mut a = fast;
        for i in 1..=500u64 {
            a = Average::next(Some(a), fast.at_ns + i * MS, 10 * MS, scale);
            if i == 50 {
                assert!(a.mean_ns > 2.0 * MS as f64 && a.mean_ns < 9.0 * MS as f64, "{a:?}");
            }
        }
        assert!(a.mean_ns > 9.0 * MS as f64, "{a:?}");
        assert_eq!(a.count, 1500);
        // Measurements at the same instant do not move it.
        let same = Average::next(Some(a), a.at_ns, 0, scale);
        assert_eq!(same.mean_ns, a.mean_ns);
    }

    #[test]
    fn a_node_slower_than_twice_the_best_is_penalized_until_its_numbers_are_stale() {
        let config = LatencyAwareness::default();
        let now = 1000 * MS;
        let fast = Some(after(100, MS, MS));
        let slow_average = Average { at_ns: now - MS, ..after(100, MS, 5 * MS) };
        let slow = Some(slow_average);
        let fast = fast.map(|a| Average { at_ns: now - MS, ..a });
        let p = Penalty::over(config, [fast, slow, None], now).expect("a best");
        assert!((p.best_ns - MS as f64).abs() < 1.0);
        assert!(p.applies(slow) && !p.applies(fast) && !p.applies(None));
        // Too few measurements: not penalized, and not the best either.
        let young = Some(Average { count: 49, ..slow_average });
        assert!(!p.applies(young));
        // Stale (no measurement for the retry period): tried again.
        let later = Penalty { now_ns: now + 10_000 * MS, ..p };
        assert!(!later.applies(slow));
        // Nobody counts: nobody is penalized.
        assert!(Penalty::over(config, [young, None], now).is_none());
    }

    #[test]
    fn the_shared_cell_reads_what_was_recorded() {
        let cell = NodeAverage::default();
        assert_eq!(cell.get(), None);
        cell.record(5, 2 * MS, Duration::from_millis(100));
        assert_eq!(cell.get(), Some(Average { mean_ns: 2.0 * MS as f64, at_ns: 5, count: 1 }));
        let held = cell.update.try_lock().expect("free");
        cell.record(10, 4 * MS, Duration::from_millis(100));
        drop(held);
        assert_eq!(cell.get().map(|a| a.count), Some(1), "an update under way drops the other");
    }
}
