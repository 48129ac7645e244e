//! The session's latency at one percentile, kept for a moment: what a
//! percentile speculative execution waits ([`SpeculativePolicy::percentile`]).
//! Reading a percentile sums every stripe of the histogram (thousands of
//! loads and a copy), too much for each request; so the last one read is
//! kept in one atomic word, with its percentile and the 100 ms tick it was
//! read in, and read again only in a later tick or for another percentile.
//!
//! One word, stored and loaded whole: a reader sees a value some thread
//! computed for the percentile and tick in that word, never a mix of two.
//! Relaxed ordering suffices because nothing else is inferred from it;
//! two threads that both find it stale both read the histogram, and the
//! later store wins (either is a percentile of the latencies so far).
//!
//! [`SpeculativePolicy::percentile`]: crate::SpeculativePolicy::percentile

use std::time::Duration;

use super::histogram::LatencyHistogram;
use crate::sync::{AtomicU64, Ordering};

/// How long a percentile read is kept, in ns.
const TICK_NS: u64 = 100_000_000;
const DELAY_BITS: u32 = 24;
const TICK_BITS: u32 = 25;
/// Latencies kept are in µs, up to 2^24 − 1 (16.7 s; longer ones as that).
const DELAY_MASK: u64 = (1 << DELAY_BITS) - 1;
const TICK_MASK: u64 = (1 << TICK_BITS) - 1;

/// The key of `percentile`: hundredths of a percent, 1 ..= 10,000; `None`
/// outside (0, 100] (and for NaN).
fn key(percentile: f64) -> Option<u64> {
    if percentile.is_nan() || percentile <= 0.0 || percentile > 100.0 {
        return None;
    }
    Some(((percentile * 100.0).round() as u64).max(1))
}

/// The word: `[key: 14 bits | tick: 25 | delay in µs: 24]`; 0 is empty (no
/// key is 0).
fn pack(key: u64, tick: u64, micros: u64) -> u64 {
    (key << (TICK_BITS + DELAY_BITS)) | ((tick & TICK_MASK) << DELAY_BITS) | micros.min(DELAY_MASK)
}

/// See the module docs.
#[derive(Debug, Default)]
pub(crate) struct PercentileCache {
    word: AtomicU64,
}

impl PercentileCache {
    /// The latency at `percentile` (above 0, at most 100) of what
    /// `histogram` counted, as of `now_ns` (ns since the metrics' epoch):
    /// the one kept if it was read for this percentile in this tick, else
    /// read now. `None` when nothing was counted yet or the percentile is
    /// out of range.
    pub(crate) fn get(&self, histogram: &LatencyHistogram, percentile: f64, now_ns: u64) -> Option<Duration> {
        let key = key(percentile)?;
        let tick = now_ns / TICK_NS;
        let kept = self.word.load(Ordering::Relaxed);
        let fresh = pack(key, tick, 0);
        if kept != 0 && kept & !DELAY_MASK == fresh {
            return Some(Duration::from_micros(kept & DELAY_MASK));
        }
        let latency = histogram.snapshot().quantile(percentile / 100.0)?;
        let micros = u64::try_from(latency.as_micros()).unwrap_or(u64::MAX);
        self.word.store(pack(key, tick, micros), Ordering::Relaxed);
        Some(Duration::from_micros(micros.min(DELAY_MASK)))
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    /// The percentile of what was counted, kept within its tick and for
    /// its percentile, read again in the next tick or for another one.
    #[test]
    fn a_percentile_is_read_once_per_tick_and_percentile() {
        let h = LatencyHistogram::default();
        let cache = PercentileCache::default();
        assert_eq!(cache.get(&h, 99.0, 0), None, "nothing counted yet");
        for n in 1..=100 {
            h.record(ms(n));
        }
        let p90 = cache.get(&h, 90.0, 0).expect("p90");
        assert!(p90 >= ms(90) && p90 <= ms(93), "{p90:?}");
        for _ in 0..1000 {
            h.record(ms(500));
        }
        assert_eq!(cache.get(&h, 90.0, TICK_NS - 1), Some(p90), "kept within the tick");
        let p50 = cache.get(&h, 50.0, TICK_NS - 1).expect("p50");
        assert!(p50 >= ms(500), "another percentile is read afresh: {p50:?}");
        let later = cache.get(&h, 90.0, TICK_NS).expect("p90 later");
        assert!(later >= ms(500), "read again in the next tick: {later:?}");
    }

    #[test]
    fn a_percentile_out_of_range_has_no_latency() {
        let h = LatencyHistogram::default();
        h.record(ms(5));
        let cache = PercentileCache::default();
        for p in [0.0, -1.0, 100.5, f64::NAN, f64::INFINITY] {
            assert_eq!(cache.get(&h, p, 0), None, "{p}");
        }
        assert!(cache.get(&h, 100.0, 0).is_some_and(|d| d >= ms(5)));
        assert!(cache.get(&h, 0.001, 0).is_some(), "the smallest key is 1, not 0 (empty)");
    }

    /// A latency past the word's 16.7 s is kept as that, not wrapped.
    #[test]
    fn a_long_latency_is_kept_clamped() {
        let h = LatencyHistogram::default();
        h.record(Duration::from_secs(60));
        let cache = PercentileCache::default();
        let first = cache.get(&h, 50.0, 0).expect("read");
        assert_eq!(first, Duration::from_micros(DELAY_MASK));
        assert_eq!(cache.get(&h, 50.0, 0), Some(first), "kept");
    }
}
