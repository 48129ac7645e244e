#![forbid(unsafe_code)]
#![warn(missing_docs)]
//! shardwise-cdc: reads ScyllaDB's CDC log with thread-per-shard readers.
//!
//! The engine is being built on top of the [`shardwise`] driver; this crate is
//! a placeholder until then.

pub use shardwise;
