//! Latency histograms with a bounded relative error, in the log-linear
//! layout of HDR histograms: each power of two of microseconds is cut into
//! [`SUB`] equal sub-buckets, so a bucket is never wider than 1/32 of its
//! lower bound (under 64 µs every microsecond has a bucket of its own).
//!
//! Recording is one relaxed `fetch_add` on a bucket of the recording
//! thread's stripe (see the parent module); a snapshot sums the stripes
//! into a [`Latencies`], from which quantiles, the mean and the bucket
//! bounds are read.
//!
//! Memory is fixed: [`BUCKETS`] counters per stripe (7 KiB), covering
//! 0 µs to 2^32 µs (71 minutes); longer latencies are counted in the last
//! bucket.
//!
//! Error bounds, for a latency `t` recorded (as whole microseconds, `⌊t⌋`):
//! the bucket `[low, high)` that holds it has `high − low ≤ low / 32` once
//! `low ≥ 64 µs` and `high − low = 1 µs` below, so
//!
//! - a quantile ([`Latencies::quantile`], the bucket's upper end) is never
//!   below the true quantile and at most `t / 32 + 1 µs` above it (3.2 %);
//! - a bucket's midpoint ([`Latencies::mean`],
//!   [`Latencies::quantile_midpoint`]) is within `t / 64 + 1 µs` of `t`
//!   (1.6 %) either way.

use std::ops::Range;
use std::time::Duration;

use super::{stripe, STRIPES};
use crate::sync::{AtomicU64, Ordering};

/// Sub-buckets per power of two, as a power of two.
const SUB_BITS: u32 = 5;
/// Sub-buckets per power of two.
pub(crate) const SUB: usize = 1 << SUB_BITS;
/// Latencies up to `2^MAX_BITS − 1` µs have a bucket of their own.
const MAX_BITS: u32 = 32;
/// The largest latency with a bucket of its own, in µs.
const MAX_MICROS: u64 = (1 << MAX_BITS) - 1;
/// Buckets per histogram.
pub(crate) const BUCKETS: usize = (MAX_BITS - SUB_BITS + 1) as usize * SUB;

/// The bucket of a latency of `micros` µs.
pub(crate) fn index(micros: u64) -> usize {
    let v = micros.min(MAX_MICROS);
    if v < SUB as u64 {
        return v as usize;
    }
    // The highest bit set, at least SUB_BITS: the bucket's power of two.
    let top = 63 - v.leading_zeros();
    let shift = top - SUB_BITS;
    // The SUB_BITS bits below the highest one pick the sub-bucket.
    let sub = (v >> shift) as usize - SUB;
    (shift as usize + 1) * SUB + sub
}

/// The latencies bucket `i` holds: `[low, high)` µs.
pub(crate) fn bounds(i: usize) -> (u64, u64) {
    if i < SUB {
        return (i as u64, i as u64 + 1);
    }
    let shift = i / SUB - 1;
    let low = ((SUB + i % SUB) as u64) << shift;
    (low, low + (1 << shift))
}

/// One stripe of buckets, on cache lines of its own.
#[derive(Debug)]
#[repr(align(128))]
struct Stripe([AtomicU64; BUCKETS]);

/// A latency histogram that threads record into: striped, lock-free.
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
    /// Counts one latency: one relaxed add, on this thread's stripe.
    pub(crate) fn record(&self, latency: Duration) {
        let micros = u64::try_from(latency.as_micros()).unwrap_or(u64::MAX);
        if let Some(stripe) = self.stripes.get(stripe()) {
            stripe.0[index(micros)].fetch_add(1, Ordering::Relaxed);
        }
    }

    /// The counts so far, summed over the stripes.
    pub(crate) fn snapshot(&self) -> Latencies {
        let mut counts = vec![0u64; BUCKETS].into_boxed_slice();
        for stripe in self.stripes.iter() {
            for (sum, n) in counts.iter_mut().zip(stripe.0.iter()) {
                *sum += n.load(Ordering::Relaxed);
            }
        }
        Latencies { counts }
    }
}

/// A copy of a latency histogram: counts in log-linear buckets whose width
/// is at most 1/32 of their lower bound (1 µs under 64 µs), from 0 to
/// 2^32 µs (71 minutes; anything longer is counted in the last bucket).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Latencies {
    counts: Box<[u64]>,
}

impl Default for Latencies {
    fn default() -> Self {
        Latencies { counts: vec![0; BUCKETS].into_boxed_slice() }
    }
}

fn micros(us: u64) -> Duration {
    Duration::from_micros(us)
}

fn midpoint_ns(i: usize) -> u64 {
    let (low, high) = bounds(i);
    // In ns: (low + high) / 2 µs, exactly.
    (low + high) * 500
}

impl Latencies {
    /// Latencies counted.
    pub fn count(&self) -> u64 {
        self.counts.iter().sum()
    }

    /// Whether no latency was counted.
    pub fn is_empty(&self) -> bool {
        self.counts.iter().all(|&n| n == 0)
    }

    /// The bucket holding the `q` quantile (0.0..=1.0): the latency of
    /// rank `⌈q·count⌉` (the first for `q = 0`). `None` when empty or `q`
    /// is not a number.
    fn quantile_bucket(&self, q: f64) -> Option<usize> {
        if q.is_nan() {
            return None;
        }
        let total = self.count();
        if total == 0 {
            return None;
        }
        // Exact in f64 for counts up to 2^53; beyond, a rank off by a few.
        let rank = ((total as f64) * q.clamp(0.0, 1.0)).ceil().max(1.0) as u64;
        let mut seen = 0;
        for (i, &n) in self.counts.iter().enumerate() {
            seen += n;
            if seen >= rank {
                return Some(i);
            }
        }
        None
    }

    /// An upper bound of the `q` quantile (0.0..=1.0) of the latencies:
    /// the upper end of its bucket, never below the true value and at most
    /// 1/32 (+1 µs) above it. `None` when empty or `q` is NaN.
    pub fn quantile(&self, q: f64) -> Option<Duration> {
        self.quantile_bucket(q).map(|i| micros(bounds(i).1))
    }

    /// The `q` quantile (0.0..=1.0) as the midpoint of its bucket: within
    /// 1/64 (+1 µs) of the true value either way, as the official driver
    /// reports its percentiles. `None` when empty or `q` is NaN.
    pub fn quantile_midpoint(&self, q: f64) -> Option<Duration> {
        self.quantile_bucket(q).map(|i| Duration::from_nanos(midpoint_ns(i)))
    }

    /// The mean latency, counting each latency at its bucket's midpoint
    /// (within 1/64 + 1 µs of the true mean). `None` when empty.
    pub fn mean(&self) -> Option<Duration> {
        let mut total = 0u128;
        let mut sum_ns = 0u128;
        for (i, &n) in self.counts.iter().enumerate() {
            total += u128::from(n);
            sum_ns += u128::from(n) * u128::from(midpoint_ns(i));
        }
        let mean = sum_ns.checked_div(total)?;
        Some(Duration::from_nanos(u64::try_from(mean).unwrap_or(u64::MAX)))
    }

    /// The population standard deviation of the latencies, each counted at
    /// its bucket's midpoint as [`Self::mean`] does. `None` when empty.
    pub fn std_dev(&self) -> Option<Duration> {
        let total = self.count();
        if total == 0 {
            return None;
        }
        let mean = self.mean()?.as_nanos() as f64;
        let squares: f64 = self
            .counts
            .iter()
            .enumerate()
            .filter(|(_, &n)| n > 0)
            .map(|(i, &n)| n as f64 * (midpoint_ns(i) as f64 - mean).powi(2))
            .sum();
        Some(Duration::from_nanos((squares / total as f64).sqrt() as u64))
    }

    /// The lower end of the lowest bucket with a latency in it.
    pub fn min(&self) -> Option<Duration> {
        self.counts.iter().position(|&n| n > 0).map(|i| micros(bounds(i).0))
    }

    /// The upper end of the highest bucket with a latency in it.
    pub fn max(&self) -> Option<Duration> {
        self.counts.iter().rposition(|&n| n > 0).map(|i| micros(bounds(i).1))
    }

    /// The buckets with latencies in them, lowest first: each bucket's
    /// latencies (`low..high`) and how many were counted there (to export
    /// as a histogram of one's own, e.g. cumulative Prometheus buckets).
    pub fn buckets(&self) -> impl Iterator<Item = (Range<Duration>, u64)> + '_ {
        self.counts.iter().enumerate().filter(|(_, &n)| n > 0).map(|(i, &n)| {
            let (low, high) = bounds(i);
            (micros(low)..micros(high), n)
        })
    }

    /// Latencies at most `limit`, counted whole-bucket: the buckets whose
    /// upper end is at most `limit` (for an SLO: "requests under 10 ms").
    pub fn count_at_most(&self, limit: Duration) -> u64 {
        let limit = u64::try_from(limit.as_micros()).unwrap_or(u64::MAX);
        self.counts.iter().enumerate().filter(|(i, _)| bounds(*i).1 <= limit).map(|(_, &n)| n).sum()
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn buckets_tile_the_range_and_each_value_falls_in_its_own() {
        let mut expected_low = 0;
        for i in 0..BUCKETS {
            let (low, high) = bounds(i);
            assert_eq!(low, expected_low, "bucket {i} starts where {} ends", i.saturating_sub(1));
            assert!(high > low);
            assert_eq!(index(low), i);
            assert_eq!(index(high - 1), i);
            expected_low = high;
        }
        assert_eq!(expected_low, MAX_MICROS + 1);
        assert_eq!(index(u64::MAX), BUCKETS - 1);
    }

    #[test]
    fn no_bucket_is_wider_than_a_32nd_of_its_lower_end() {
        for i in 0..BUCKETS {
            let (low, high) = bounds(i);
            if low >= 64 {
                assert!((high - low) * 32 <= low, "bucket {i}: [{low}, {high})");
            } else {
                assert_eq!(high - low, 1, "bucket {i}");
            }
        }
    }

    /// Every quantile of a spread of latencies (log-uniform from 1 µs to
    /// 10 s, from a fixed generator) is within the documented error of the
    /// exact quantile of the sorted values.
    #[test]
    fn quantiles_are_within_the_error_bound() {
        let h = LatencyHistogram::default();
        let mut state = 0x9e37_79b9_7f4a_7c15u64;
        let mut values: Vec<u64> = (0..100_000)
            .map(|_| {
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                let unit = (state >> 11) as f64 / (1u64 << 53) as f64;
                (10f64.powf(unit * 7.0)) as u64
            })
            .collect();
        for &v in &values {
            h.record(Duration::from_micros(v));
        }
        values.sort_unstable();
        let s = h.snapshot();
        assert_eq!(s.count(), values.len() as u64);
        for q in [0.0, 0.001, 0.1, 0.25, 0.5, 0.75, 0.9, 0.95, 0.99, 0.999, 0.9999, 1.0] {
            let rank = ((values.len() as f64 * q).ceil() as usize).max(1);
            let exact = values[rank - 1] as f64;
            let upper = s.quantile(q).expect("a quantile").as_micros() as f64;
            assert!(upper > exact, "q {q}: {upper} µs under the exact {exact} µs");
            assert!(upper <= exact * (1.0 + 1.0 / 32.0) + 1.0, "q {q}: {upper} µs, exact {exact} µs");
            let mid = s.quantile_midpoint(q).expect("a quantile").as_nanos() as f64 / 1e3;
            assert!((mid - exact).abs() <= exact / 64.0 + 1.0, "q {q}: midpoint {mid} µs, exact {exact} µs");
        }
        let exact_mean = values.iter().map(|&v| v as f64).sum::<f64>() / values.len() as f64;
        let mean = s.mean().expect("a mean").as_nanos() as f64 / 1e3;
        assert!((mean - exact_mean).abs() <= exact_mean / 64.0 + 1.0, "mean {mean} µs, exact {exact_mean} µs");
        assert_eq!(s.min(), Some(Duration::from_micros(values[0])));
        assert!(
            s.max().expect("a max").as_micros() as f64 <= values[values.len() - 1] as f64 * (1.0 + 1.0 / 32.0) + 1.0
        );
    }

    #[test]
    fn small_latencies_are_exact_and_huge_ones_land_in_the_last_bucket() {
        let h = LatencyHistogram::default();
        for us in [0, 1, 3, 63] {
            h.record(Duration::from_micros(us));
        }
        h.record(Duration::from_secs(100_000));
        let s = h.snapshot();
        let buckets: Vec<_> = s.buckets().collect();
        assert_eq!(buckets.len(), 5);
        assert_eq!(buckets[2], (Duration::from_micros(3)..Duration::from_micros(4), 1));
        assert_eq!(buckets[4].0.end, Duration::from_micros(MAX_MICROS + 1));
        assert_eq!(s.quantile(0.5), Some(Duration::from_micros(4)));
        assert_eq!(s.quantile(0.0), Some(Duration::from_micros(1)));
        assert_eq!(s.count_at_most(Duration::from_micros(64)), 4);
        assert_eq!(s.quantile(f64::NAN), None);
        assert_eq!(Latencies::default().quantile(0.5), None);
        assert_eq!(Latencies::default().mean(), None);
    }
}
