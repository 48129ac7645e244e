//! Benchmarks of shardwise beside its peers: criterion micro-benchmarks
//! (`benches/codec.rs`), the latte-style workload runner
//! (`src/bin/workload.rs`) and the CDC thesis benchmark
//! (`src/bin/cdc_thesis.rs`). This library holds what the binaries share:
//! the process CPU clock. The workload runner's counting global allocator is
//! `testkit::alloc`, the one the allocation tests use.

#![warn(missing_docs)]

pub mod rusage;

// The porting guide's snippets are doc tests of this crate, which depends on
// both the driver and the CDC engine (and is never published, so the path out
// of the crate's folder does not matter to `cargo package`).
#[cfg(doctest)]
#[doc = include_str!("../../docs/porting-from-scylla.md")]
pub struct PortingGuide;
