//! Models of the latency a percentile speculative execution waits
//! (`driver/src/metrics/percentile.rs`): requests asking for different
//! percentiles at once, in one tick, each get a latency read for their own
//! percentile, never the one kept for another.
//!
//! To see it fail (done by hand): in `PercentileCache::get` compare only
//! the tick of the word kept, not its percentile (`kept & !DELAY_MASK ==
//! fresh` becoming a comparison of the tick bits): loom finds one reader
//! taking the percentile the other kept (it printed "p50 read as
//! 10.24ms").

use std::time::Duration;

use loom::sync::Arc;
use loom::thread;

use crate::metrics::histogram::LatencyHistogram;
use crate::metrics::percentile::PercentileCache;
use crate::support::model_of_histograms;

const FAST: Duration = Duration::from_millis(1);
const SLOW: Duration = Duration::from_millis(10);

#[test]
fn racing_percentiles_each_get_their_own() {
    // Up to four reads of the histogram, 896 loom loads each.
    model_of_histograms(20_000, model);
}

fn model() {
    let histogram = Arc::new(LatencyHistogram::default());
    // p50 is FAST, p90 SLOW.
    for _ in 0..5 {
        histogram.record(FAST);
        histogram.record(SLOW);
    }
    let cache = Arc::new(PercentileCache::default());
    let p50 = {
        let (histogram, cache) = (histogram.clone(), cache.clone());
        thread::spawn(move || cache.get(&histogram, 50.0, 0))
    };
    for _ in 0..2 {
        let p90 = cache.get(&histogram, 90.0, 0).expect("p90");
        assert!(p90 >= SLOW, "p90 read as {p90:?}");
    }
    let p50 = p50.join().expect("p50").expect("a p50");
    assert!(p50 >= FAST && p50 < SLOW, "p50 read as {p50:?}");
}
