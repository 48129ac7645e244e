//! The harness against real Cassandra nodes, as one test binary (one module
//! per area). Tests of one binary run concurrently: the ones that start
//! nodes of their own take [`support::own_nodes`] so that, as when they were
//! separate binaries, only one of them starts JVMs at a time.

mod support;

mod auth;
mod cluster;
mod kafka;
mod lifeline;
mod protocol_on_cassandra;
mod start_stop;
