//! Cheap counters and latency histograms (the session's, and one per node),
//! updated with relaxed atomics on the request path and read as a
//! [`MetricsSnapshot`].
//!
//! The histograms are striped: each thread adds to a stripe of its own (on
//! a cache line of its own), and a snapshot sums the stripes. Counters that
//! every request touches on a single word would make the runtime's worker
//! threads fight over that cache line on every request. The session's
//! request count is its histogram's total.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::Duration;

/// Histogram buckets: bucket `i` holds latencies in `[2^i, 2^(i+1))` µs.
const BUCKETS: usize = 40;

/// Stripes per histogram (a power of two): threads beyond it share them.
const STRIPES: usize = 8;

/// This thread's stripe.
fn stripe() -> usize {
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    thread_local! {
        static STRIPE: usize = NEXT.fetch_add(1, Ordering::Relaxed) % STRIPES;
    }
    STRIPE.try_with(|s| *s).unwrap_or(0)
}

/// One stripe of buckets, on cache lines of its own.
#[derive(Debug)]
#[repr(align(128))]
struct Stripe([AtomicU64; BUCKETS]);

/// A latency histogram in power-of-two microsecond buckets.
#[derive(Debug)]
pub(crate) struct LatencyHistogram {
    stripes: Box<[Stripe]>,
}

impl Default for LatencyHistogram {
    fn default() -> Self {
        let stripes = (0..STRIPES).map(|_| Stripe(std::array::from_fn(|_| AtomicU64::new(0)))).collect();
        LatencyHistogram { stripes }
    }
}

impl LatencyHistogram {
    pub(crate) fn record(&self, latency: Duration) {
        let micros = latency.as_micros().max(1) as u64;
        let bucket = (63 - micros.leading_zeros() as usize).min(BUCKETS - 1);
        if let Some(stripe) = self.stripes.get(stripe()) {
            stripe.0[bucket].fetch_add(1, Ordering::Relaxed);
        }
    }

    pub(crate) fn snapshot(&self) -> [u64; BUCKETS] {
        std::array::from_fn(|i| self.stripes.iter().map(|s| s.0[i].load(Ordering::Relaxed)).sum())
    }
}

/// An upper bound of the `q` quantile of a histogram's latencies.
fn quantile(buckets: &[u64; BUCKETS], q: f64) -> Option<Duration> {
    let total: u64 = buckets.iter().sum();
    if total == 0 {
        return None;
    }
    let target = ((total as f64) * q.clamp(0.0, 1.0)).ceil().max(1.0) as u64;
    let mut seen = 0;
    for (i, n) in buckets.iter().enumerate() {
        seen += n;
        if seen >= target {
            return Some(Duration::from_micros(1 << (i + 1)));
        }
    }
    None
}

/// Session-wide counters.
#[derive(Debug)]
pub(crate) struct Metrics {
    errors: AtomicU64,
    retries: AtomicU64,
    timeouts: AtomicU64,
    attempt_timeouts: AtomicU64,
    latency: LatencyHistogram,
}

impl Default for Metrics {
    fn default() -> Self {
        Metrics {
            errors: AtomicU64::new(0),
            retries: AtomicU64::new(0),
            timeouts: AtomicU64::new(0),
            attempt_timeouts: AtomicU64::new(0),
            latency: LatencyHistogram::default(),
        }
    }
}

impl Metrics {
    pub(crate) fn request(&self, latency: Duration, ok: bool) {
        if !ok {
            self.errors.fetch_add(1, Ordering::Relaxed);
        }
        self.latency.record(latency);
    }
    pub(crate) fn retry(&self) {
        self.retries.fetch_add(1, Ordering::Relaxed);
    }
    pub(crate) fn timeout(&self) {
        self.timeouts.fetch_add(1, Ordering::Relaxed);
    }
    pub(crate) fn attempt_timeout(&self) {
        self.attempt_timeouts.fetch_add(1, Ordering::Relaxed);
    }
    /// The counters, with each node's attempt latencies (`nodes`).
    pub(crate) fn snapshot(&self, nodes: Vec<NodeLatency>) -> MetricsSnapshot {
        let latency_buckets = self.latency.snapshot();
        MetricsSnapshot {
            requests: latency_buckets.iter().sum(),
            errors: self.errors.load(Ordering::Relaxed),
            retries: self.retries.load(Ordering::Relaxed),
            timeouts: self.timeouts.load(Ordering::Relaxed),
            attempt_timeouts: self.attempt_timeouts.load(Ordering::Relaxed),
            latency_buckets,
            nodes,
        }
    }
}

/// A copy of the session's counters.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MetricsSnapshot {
    /// Requests completed (successfully or not).
    pub requests: u64,
    /// Requests that ended in an error.
    pub errors: u64,
    /// Retries made.
    pub retries: u64,
    /// Requests that timed out (the request timeout).
    pub timeouts: u64,
    /// Attempts that timed out (the attempt timeout), retried or not.
    pub attempt_timeouts: u64,
    /// Latency histogram: bucket `i` counts requests that took
    /// `[2^i, 2^(i+1))` microseconds.
    pub latency_buckets: [u64; BUCKETS],
    /// Per node: the latency of the attempts sent to it.
    pub nodes: Vec<NodeLatency>,
}

/// The attempts one node served, as a latency histogram.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeLatency {
    /// The node.
    pub addr: SocketAddr,
    /// Bucket `i` counts attempts that took `[2^i, 2^(i+1))` microseconds
    /// (answered or failed).
    pub latency_buckets: [u64; BUCKETS],
}

impl NodeLatency {
    /// Attempts counted.
    pub fn attempts(&self) -> u64 {
        self.latency_buckets.iter().sum()
    }
    /// An upper bound of the `q` quantile (0.0..=1.0) of the latency.
    pub fn latency_quantile(&self, q: f64) -> Option<Duration> {
        quantile(&self.latency_buckets, q)
    }
}

impl MetricsSnapshot {
    /// An upper bound of the `q` quantile (0.0..=1.0) of the latency.
    pub fn latency_quantile(&self, q: f64) -> Option<Duration> {
        quantile(&self.latency_buckets, q)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantiles_come_from_the_buckets() {
        let m = Metrics::default();
        for us in [1, 3, 100, 100, 5000] {
            m.request(Duration::from_micros(us), us != 3);
        }
        m.retry();
        let s = m.snapshot(Vec::new());
        assert_eq!((s.requests, s.errors, s.retries), (5, 1, 1));
        assert_eq!(s.latency_quantile(0.5), Some(Duration::from_micros(128)));
        assert_eq!(s.latency_quantile(1.0), Some(Duration::from_micros(8192)));
    }

    /// Threads add to stripes of their own; a snapshot counts every request
    /// once, whichever thread recorded it.
    #[test]
    fn requests_recorded_on_many_threads_are_all_counted() {
        let m = std::sync::Arc::new(Metrics::default());
        let threads: Vec<_> = (0..STRIPES + 3)
            .map(|t| {
                let m = m.clone();
                std::thread::spawn(move || {
                    for i in 0..1_000 {
                        m.request(Duration::from_micros(1 << t), i % 100 != 0);
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().expect("thread");
        }
        let s = m.snapshot(Vec::new());
        assert_eq!(s.requests, 1_000 * (STRIPES as u64 + 3));
        assert_eq!(s.errors, 10 * (STRIPES as u64 + 3));
        for t in 0..STRIPES + 3 {
            assert_eq!(s.latency_buckets[t], 1_000, "thread {t}'s bucket");
        }
    }
}
