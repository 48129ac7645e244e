//! Benchmarks of shardwise beside its peers: criterion micro-benchmarks
//! (`benches/codec.rs`), the latte-style workload runner
//! (`src/bin/workload.rs`), a runner of latte's own workload scripts
//! (`src/bin/latte/`, scripts in `latte/`) and the CDC thesis benchmark
//! (`src/bin/cdc_thesis.rs`). This library holds what the binaries share.
//! The workload runner's counting global allocator is `testkit::alloc`, the
//! one the allocation tests use.
//!
//! - [`rusage`]: the process CPU clock (user and system time);
//! - [`interval`]: `-d`/`-w`, a time or a cycle count;
//! - [`consistency`]: consistency levels by name, for both drivers;
//! - [`json`]: the JSON strings and numbers of the runners' reports.

#![warn(missing_docs)]

pub mod consistency;
pub mod interval;
pub mod json;
pub mod rusage;

// The porting guide's snippets are doc tests of this crate, which depends on
// both the driver and the CDC engine (and is never published, so the path out
// of the crate's folder does not matter to `cargo package`).
#[cfg(doctest)]
#[doc = include_str!("../../docs/porting-from-scylla.md")]
pub struct PortingGuide;
