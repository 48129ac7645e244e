//! The emulation front against a real Cassandra, as one test binary (one
//! module per area). The tests run concurrently on one shared server, so
//! each uses keyspaces of its own ([`testkit::fresh_keyspace`]), and every
//! front whose generations a test reads, or whose shard count differs from
//! the default, has an emulation keyspace of its own too.

mod support;

mod cdc_ddl;
mod cdc_first_writes;
mod cdc_guard;
mod cdc_log;
mod cdc_replay;
mod cdc_scylla_workload;
mod describe;
mod fidelity;
mod lwt;
mod metadata_id;
mod python;
mod scylla_cdc;
mod scylla_driver;
mod shards;
mod tablets;
mod tablets_cdc;
mod transcripts;
