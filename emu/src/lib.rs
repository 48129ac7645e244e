//! The Scylla emulation front: a CQL proxy on loopback that forwards to a
//! real Cassandra 5.0 and adds what clients see of ScyllaDB at the protocol
//! level, so that unmodified Scylla clients (the official `scylla` crate,
//! `scylla-cdc`, the Python `scylla-driver`) and our own driver can be tested
//! and benchmarked against "Scylla" on a machine that only has Cassandra.
//!
//! It is an instrument: everything it does is counted ([`FrontStats`], also
//! readable as `SELECT * FROM <emu keyspace>.front_stats` through the front
//! and printed by `cargo xtask emu`).
//!
//! What it emulates (details in the submodules):
//!
//! - **Shards** ([`proxy`]): every emulated node reports `shards` shards in
//!   SUPPORTED with Scylla's keys (`docs/protocol.md` §1.2: `COMPRESSION`,
//!   `CQL_VERSION` 3.3.1, `SCYLLA_SHARD`, `SCYLLA_NR_SHARDS`,
//!   `SCYLLA_PARTITIONER`, `SCYLLA_SHARDING_ALGORITHM`,
//!   `SCYLLA_SHARDING_IGNORE_MSB`, `SCYLLA_SHARD_AWARE_PORT`,
//!   `SCYLLA_LWT_ADD_METADATA_MARK`, `SCYLLA_RATE_LIMIT_ERROR`,
//!   `TABLETS_ROUTING_V1`, `SCYLLA_USE_METADATA_ID`, `SCYLLA_HOST_ID`, and
//!   with [`FrontConfig::strongly_consistent_tables`]
//!   `TABLETS_ROUTING_V2_EXPERIMENTAL`, whose EXECUTE byte the front takes
//!   off and whose stale versions it answers with the tablet); connections on
//!   the regular port get shards round-robin, connections on the shard-aware
//!   port get `source_port % shards` (§2.4). Prepared requests whose
//!   partition key is known are counted as shard hits or misses, with an
//!   optional delay per miss modelling the cross-shard hop.
//! - **Scylla system tables** ([`system_tables`]): `system_schema.scylla_tables`
//!   and `scylla_keyspaces`, `system_distributed.cdc_generation_timestamps` and
//!   `cdc_streams_descriptions_v2` as real tables in the front's keyspace,
//!   reached by rewriting the statements that name them ([`rewrite`]).
//! - **CDC generations** ([`generation`]): at start the front publishes a
//!   generation built from the Cassandra ring exactly as Scylla would for
//!   that ring and shard count (reusing the last one when it still fits);
//!   [`FrontHandle::new_generation_at`] publishes another at a chosen time,
//!   as a topology change would.
//! - **CDC DDL** ([`cdc`]): `WITH cdc = {...}` creates the base table without
//!   the Scylla-only option plus `<table>_scylla_cdc_log` with Scylla's
//!   schema; the options are kept ([`FrontHandle::cdc_tables`]).
//! - **CDC log rows** ([`cdclog`]): every base write through the front gets
//!   the log rows Scylla would write for it.
//! - **Syntax** ([`rewrite`]): `BYPASS CACHE` and `USING TIMEOUT` are accepted
//!   and stripped.
//! - **Identity** (`identity`): reads of `system_schema.tables` list some of
//!   Scylla's own `system` tables (`scylla_local`, ...), so ScyllaDB's
//!   `is_scylla` check answers true; `system.config` answers with no rows.
//! - **Tablets DDL** (`tablets_ddl`, [`tablet_options`]): `ALTER KEYSPACE`
//!   keeps the vnodes/tablets flavour (Scylla's refusal otherwise) and
//!   records a new `initial`; per-table `tablets = {...}` hints are checked
//!   in Scylla's words and size the table's tablets; a secondary index's
//!   hidden table `<index>_index` (and a materialized view) gets tablets of
//!   its own.
//! - **Properties** (`properties`, `tombstone_gc`): Scylla-only table and
//!   keyspace properties accepted at ScyllaDB's defaults, refused otherwise
//!   (`tombstone_gc` accepted with every value ScyllaDB takes, kept by the
//!   front and shown by DESCRIBE); names ScyllaDB does not know refused in
//!   its words.
//! - **Client routes** (`shared::client_routes`, [`ClientRoute`]): ScyllaDB
//!   2026.1's `system.client_routes` as a real table in the front's keyspace;
//!   [`FrontHandle::set_client_routes`] writes routes (ScyllaDB takes them
//!   through its REST API) and announces them with `CLIENT_ROUTES_CHANGE` to
//!   the connections registered for it, which the front answers itself
//!   (Cassandra knows no such event).
//!
//! With several Cassandra nodes there is one front per node
//! ([`Front::start_cluster`]), each on its node's address and all on the same
//! two ports, so that the addresses drivers find in `system.peers`
//! (`rpc_address` + the port they connected to) lead to the fronts.
//!
//! Deviations from Scylla, all deliberate: protocol v4 only (Scylla also
//! speaks v3); `COMPRESSION` offers `lz4` only and answers uncompressed;
//! the TLS shard-aware port is not offered; client routes are set through
//! [`FrontHandle`], not a REST API; a batch's size limit is the Cassandra
//! behind's `batch_size_fail_threshold` (the testkit's Cassandra has
//! ScyllaDB's 1 MiB; Cassandra's default is 50 KiB);
//! `USING TIMEOUT ?` (a bound timeout) is refused; the CDC log's real
//! placement in Cassandra is by Murmur3 of the stream id (the CDC partitioner
//! is reported and used for shard accounting only); node-level routing is
//! not counted, only shards; `scylla_tables` has rows only for tables created
//! through a front; result metadata of rewritten statements names the
//! front's keyspace instead of `system_distributed`; Scylla's `system`
//! tables appear in unprepared reads of `system_schema.tables` only (not in
//! prepared ones, nor with columns in `system_schema.columns`); per-table
//! tablet hints live in the front's memory (a restarted front forgets
//! them) and `min_per_shard_tablet_count` does not change tablet counts;
//! index tables get ids of the front's own (not in `system_schema.views`,
//! forgotten by a restarted front); materialized views exist only when the
//! Cassandra behind has them enabled (else the front refuses them);
//! `ZstdWithDictsCompressor` is kept and described as `ZstdCompressor`.
//!
//! The `shardwise-emu` binary runs a front in front of an already-running
//! Cassandra; `cargo xtask emu` starts a Cassandra (through `testkit`) and a
//! front together.
//!
//! Modules:
//!
//! - [`cdc`]: CDC options of `WITH cdc = {...}` and the log table's schema (DDL side).
//! - [`cdclog`]: synthesis of the CDC log rows for base writes (DML side).
//! - [`describe`]: ScyllaDB's DESCRIBE (CDC logs hidden or commented, tablets), answered by the front.
//! - [`generation`]: CDC generations and stream ids built from the ring.
//! - [`proxy`]: one client connection: the frame-level forwarding, SUPPORTED, shard accounting (files: connection, request, response, frame).
//! - [`rewrite`]: statement rewrites (Scylla system tables, Scylla-only syntax).
//! - [`serve`]: the front's command-line flags, its announcement and its counter reports.
//! - [`rng`]: splitmix64, the small deterministic generator (also used by the tests' workloads).
//! - [`stats`]: the counters ([`FrontStats`]).
//! - [`system_tables`]: the Scylla system tables as real tables in the front's keyspace.
//! - [`tablets`]: tablet maps of tables in tablets keyspaces, their splits and merges.
//! - [`tablet_options`]: Scylla's per-table `tablets = {...}` hints, parsed and checked.
//! - [`tablet_streams`]: the CDC stream sets of tables in tablets keyspaces.
//! - [`transcript`]: CQL transcripts in ScyllaDB's `test/cql` format, run through a front.
//! - [`vector_index`]: Scylla's vector index, sent to Cassandra as SAI, and the CDC it turns on.
//! - `admin` (private): the front's own minimal CQL connection to Cassandra.
//! - `identity` (private): Scylla's `system` tables in `system_schema.tables` reads, and `system.config`.
//! - `guard` (private): no write to a CDC table is applied without its log rows or an error.
//! - `tablets_ddl` (private): tablets DDL refused or recorded around Cassandra (flavour, hints).
//! - `properties` (private): Scylla-only table and keyspace properties accepted at their defaults or refused, unknown ones in Scylla's words.
//! - `compression` (private): ScyllaDB's sstable compressors (its dictionary LZ4 the default) in Cassandra's options and back in DESCRIBE.
//! - `tombstone_gc` (private): ScyllaDB's `tombstone_gc` table option, checked in its words, its defaults (repair for base tables, timeout for CDC logs), kept per table.
//! - `refusals` (private): Scylla's refusals of CDC-related schema statements, in Scylla's words.
//! - `front` (private): [`Front`], [`FrontHandle`], their listeners and the accept loop.
//! - `shared` (private): the state every connection shares (`Shared`); its submodules own CDC DDL (`cdc_ddl`), tablets (`tablets`: maps, rows, stream sets, resizes; [`Resize`]), generations (`generations`), the schema cache (`schema_cache`) and client routes (`client_routes`; [`ClientRoute`]).
//! - `config` (private): [`FrontConfig`] and [`TabletsMode`].
//! - `error` (private): [`EmuError`], at the bottom so every module can return it.
//! - `tokens` (private): the CQL tokenizer the rewrites, properties, vector index, refusals, identity and guard read statements with.
//! - `delay_line` (private): the cross-shard miss delay (one thread forwarding delayed requests).
//! - `clock` (private): the wall clock in milliseconds and microseconds.
//! - `fuzzing` (hidden, the `fuzzing` feature): the fuzz targets' harnesses for the rewriter, DESCRIBE and EXECUTE values.
//!
//! Layers (no module imports one above it; `cargo xtask imports emu` checks
//! there is no circle): `error`, `clock`, `config`, `tokens`, `rng` at the
//! bottom; then the pure parts (`cdc`, `generation`, `tablets`,
//! `tablet_options`, `tablet_streams`, `tombstone_gc`, `properties`, `vector_index`,
//! `rewrite`, `cdclog`'s parser and builders) and `admin`, `system_tables`;
//! then `shared`; then what reads it per request (`guard`, `refusals`,
//! `tablets_ddl`, `lwt`, `describe`, `cdclog::synth`); then `proxy`; then
//! `front`; `serve` and `transcript` on top.

#![forbid(unsafe_code)]

mod admin;
pub mod cdc;
pub mod cdclog;
mod clock;
mod compression;
mod config;
mod delay_line;
pub mod describe;
mod error;
mod front;
#[cfg(any(test, feature = "fuzzing"))]
#[doc(hidden)]
pub mod fuzzing;
pub mod generation;
mod guard;
mod identity;
mod lwt;
mod properties;
pub mod proxy;
mod refusals;
pub mod rewrite;
pub mod rng;
pub mod serve;
mod shared;
pub mod stats;
pub mod system_tables;
pub mod tablet_options;
pub mod tablet_streams;
pub mod tablets;
mod tablets_ddl;
mod tokens;
mod tombstone_gc;
pub mod transcript;
pub mod vector_index;

pub use cdc::{CdcOptions, CdcTable, Delta, PreImage};
pub use config::{FrontConfig, TabletsMode};
pub use error::EmuError;
pub use front::{EmulatedNode, Front, FrontHandle};
pub use generation::{Generation, StreamId, VnodeStreams};
pub use shared::client_routes::ClientRoute;
pub use shared::tablets::{Resize, MAX_EMULATED_TABLETS};
pub use stats::{FrontStats, NodeStats, ShardStats};
