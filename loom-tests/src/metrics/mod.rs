//! What `histogram.rs` takes from its parent in the driver
//! (`driver/src/metrics.rs`, which needs the pool and the request path):
//! the stripes and the recording thread's stripe. Here there is one
//! stripe, which every thread shares (as threads beyond the driver's
//! `STRIPES` do), so that records race on one counter.

/// Stripes per histogram.
pub(crate) const STRIPES: usize = 1;

/// This thread's stripe.
pub(crate) fn stripe() -> usize {
    0
}

#[allow(dead_code, unreachable_pub, rustdoc::private_intra_doc_links)]
#[path = "../../../driver/src/metrics/histogram.rs"]
pub mod histogram;

// Its docs name the driver's speculative policy, left out here.
#[allow(dead_code, unreachable_pub, rustdoc::private_intra_doc_links, rustdoc::broken_intra_doc_links)]
#[path = "../../../driver/src/metrics/percentile.rs"]
pub mod percentile;
