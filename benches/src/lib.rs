//! Benchmarks of shardwise beside its peers: criterion micro-benchmarks
//! (`benches/codec.rs`), the latte-style workload runner
//! (`src/bin/workload.rs`) and the CDC thesis benchmark
//! (`src/bin/cdc_thesis.rs`). This library holds what the binaries share:
//! a counting global allocator and the process CPU clock.

#![warn(missing_docs)]

pub mod alloc_count;
pub mod rusage;
