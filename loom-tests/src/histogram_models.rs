//! Models of the driver's latency histogram (`driver/src/metrics/histogram.rs`):
//! requests on different threads record their latencies into one stripe
//! at once (threads beyond the stripes share them) while a snapshot sums
//! it. No record is lost, and a snapshot taken meanwhile counts each
//! record at most once, in its own bucket.
//!
//! A snapshot reads every bucket of every stripe (896 per stripe), each a
//! loom operation: two snapshots pass loom's default bound of 1,000
//! branches per execution ("Model exceeded maximum number of branches"),
//! so the model raises it; loom still explores only the orders of the
//! accesses that conflict (the records' bucket), in well under a second.
//! The parent's stripe choice is a stand-in (`loom-tests/src/metrics`).
//!
//! To see it fail (done by hand): in `LatencyHistogram::record` replace the
//! `fetch_add` by a load and a store of the sum: loom finds both records
//! loading 0 (it printed "assertion `left == right` failed: a record was
//! lost, left: 1").

use std::time::Duration;

use loom::sync::Arc;
use loom::thread;

use crate::metrics::histogram::LatencyHistogram;
use crate::support::model_of_histograms;

const LATENCY: Duration = Duration::from_micros(1_500);

#[test]
fn racing_records_are_all_counted() {
    model_of_histograms(10_000, model);
}

fn model() {
    let histogram = Arc::new(LatencyHistogram::default());
    let records: Vec<_> = (0..2)
        .map(|_| {
            let histogram = histogram.clone();
            thread::spawn(move || histogram.record(LATENCY))
        })
        .collect();
    let seen = histogram.snapshot();
    assert!(seen.count() <= 2, "a record counted twice: {}", seen.count());
    if let Some(max) = seen.max() {
        assert!(max >= LATENCY && seen.min() <= Some(LATENCY), "a record in another bucket");
    }
    for r in records {
        r.join().expect("record");
    }
    let all = histogram.snapshot();
    assert_eq!(all.count(), 2, "a record was lost");
    assert!(all.quantile(1.0).is_some_and(|q| q >= LATENCY && q <= LATENCY + LATENCY / 32));
}
