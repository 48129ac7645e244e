#![warn(missing_docs)]
//! shardwise: a latency-first ScyllaDB / Cassandra driver.
//!
//! The I/O layer (connections, sessions, routing) is built on the sans-IO
//! [`shardwise_protocol`] crate, which is re-exported as [`protocol`].

pub use shardwise_protocol as protocol;
