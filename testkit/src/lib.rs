//! Test harness: the real Apache Cassandra 5.0 server (and a Kafka broker).
//!
//! Integration tests of the driver and the CDC engine run against a real
//! server, not a mock: the point is to find out what Cassandra actually sends.
//! This crate makes that cheap enough to do everywhere. Nothing here panics on
//! environment problems: every failure is a [`HarnessError`] that says what to
//! install or which log to read.
//!
//! Modules:
//!
//! - [`dist`]: finds Java 11+ and resolves `org.apache.cassandra:cassandra-all`
//!   (or Kafka's broker) with Maven into a cache outside the repository (once
//!   per machine).
//! - [`class_archive`]: the class data sharing archive that Cassandra's JVM
//!   maps instead of loading its classes from the jars (made once per cache).
//! - [`config`]: a minimal `cassandra.yaml` and the Java 17 command line, tuned
//!   for a small, fast-starting test server (each setting was checked against
//!   a real 5.0.4 log).
//! - [`node`]: starts a node in its own process group, waits until it answers
//!   CQL, and stops it — on [`Node::stop`], on drop, and when the test process
//!   dies (a pipe-based lifeline, so no JVM is ever left behind).
//! - [`cluster`]: several nodes on 127.0.0.1, .2, .3 for topology tests.
//! - [`shared`]: one server for all tests of a process ([`shared_node`], or
//!   the one `cargo xtask test` passes in `SHARDWISE_CASSANDRA`) and unique
//!   keyspace names ([`fresh_keyspace`]) and the statement creating one
//!   ([`create_keyspace`]).
//! - [`ports`]: free ports for test servers.
//! - [`raw`]: a blocking one-connection CQL client on the protocol crate's
//!   encoder and decoder, for readiness checks and tests that put exact
//!   requests on the wire — deliberately not the driver under test.
//! - [`samples`]: one table holding every CQL type and its rows, shared by the
//!   integration tests of every crate.
//! - [`fault`]: a TCP proxy that injects faults (delays, lost frames,
//!   silenced, dropped, reset or cut connections) between the driver and a
//!   server, per connection and per CQL frame.
//! - [`kafka`]: a real Apache Kafka broker (one KRaft node), resolved with
//!   Maven like Cassandra and started behind the same launcher.
//! - [`alloc`]: the counting global allocator of the allocation tests (per
//!   thread and per process).
//! - [`error`]: what can go wrong, as one [`HarnessError`].

pub mod alloc;
pub mod class_archive;
pub mod cluster;
pub mod config;
pub mod dist;
pub mod error;
pub mod fault;
pub mod kafka;
pub mod node;
pub mod ports;
pub mod process;
pub mod raw;
pub mod samples;
pub mod shared;

pub use cluster::Cluster;
pub use config::{Auth, ClientEncryption, Location, NodeConfig};
pub use dist::{Distribution, CASSANDRA_VERSION};
pub use error::{HarnessError, Result};
pub use fault::FaultProxy;
pub use kafka::{Kafka, KAFKA_VERSION};
pub use node::Node;
pub use raw::RawConnection;
pub use shared::{create_keyspace, fresh_keyspace, shared_node, SHARDWISE_CASSANDRA};
