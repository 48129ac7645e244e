//! The integration tests of `shardwise-cdc`, in one binary (one link, one
//! shared Cassandra per run). Every test runs through its own Scylla
//! emulation front (with its own stand-in keyspace, so its generations and
//! routing counters are its own) and writes into a keyspace of its own
//! ([`testkit::fresh_keyspace`]), so the tests can run concurrently.
//!
//! * [`engine`]: every change once and in order across a generation switch;
//!   resuming from an in-memory checkpoint;
//! * [`checkpoint`]: resuming from the table-backed checkpoint store;
//! * [`leases`]: the lease table (one holder at a time, expiry, members)
//!   and the settings of readers that share a table;
//! * [`lifecycle`]: `stop_at`, a dropped reader stopping, a detached one running on;
//! * [`faults`]: the reader's log queries stalled (through a fault proxy
//!   between the front and the server), then released or not; delayed,
//!   dropped, blackholed, closed, reset and cut mid-window;
//! * [`tablets`]: a table in a tablets keyspace read across a split and a
//!   merge;
//! * [`images`]: each change with the pre- and post-image of its row, on
//!   tables with `preimage: true`, `'full'` and `postimage: true`;
//! * [`replicator`]: a mixed workload replayed into another table;
//! * [`replicator_types`]: the replicator for every type family;
//! * [`readme`]: the README's example, compiled;
//! * `common`: the shared setup (front, session, keyspace), the
//!   `shardwise-cdc-testkit` crate the other CDC crates' tests use too.

mod checkpoint;
mod engine;
mod faults;
mod images;
mod leases;
mod lifecycle;
mod readme;
mod replicator;
mod replicator_types;
mod tablets;

use shardwise_cdc_testkit as common;
