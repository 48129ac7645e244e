#![forbid(unsafe_code)]
#![warn(missing_docs)]
//! # shardwise-cdc
//!
//! A change data capture engine for ScyllaDB's CDC log, built on the
//! [`shardwise`] driver.
//!
//! Modules (one concept each):
//! * [`stream`]: stream ids and stream groups;
//! * [`time`]: milliseconds since the epoch and the `cdc$time` timeuuid;
//! * [`plan`]: the sans-IO planner and the stream groups it hands out ([`GroupInfo`]);
//! * [`row`]: borrowed views of log rows ([`LogSchema`], [`LogPage`], [`CdcRow`]);
//! * [`consumer`]: what the application plugs in ([`Consumer`], [`ConsumerFactory`]) and the owned [`Change`];
//! * [`async_consumer`]: consumers that await ([`AsyncConsumer`], [`AsyncConsumerFactory`]), with back-pressure;
//! * [`images`]: each change with its pre- and post-image ([`WithImages`], [`ChangeWithImages`]);
//! * [`debezium`]: a change as the ScyllaDB CDC Source Connector's Debezium envelope (key and value, JSON);
//! * [`checkpoint`]: checkpoints and their stores;
//! * [`lease`]: leases that share a table's groups between reader processes ([`LeaseConfig`]);
//! * `coordination` (private): the sans-IO protocol of readers sharing a table (renewals, claims,
//!   fences, hand-overs, lease deadlines), driven by the reader's lease holder and by a deterministic
//!   simulator in the tests;
//! * [`generation`]: where generations and their streams come from;
//! * [`tablets`]: the stream sets of tables in tablets keyspaces, read as generations;
//! * [`reader`]: the worker threads around the planner ([`CdcReader`]);
//! * [`replicator`]: a consumer factory that replays a table's changes into another table;
//! * [`printer`]: one-line renderings of a change, human-readable or JSON;
//! * `sync` (private): the synchronization primitives of the shared state, in one place;
//! * `join` (private): several futures awaited at once on one task;
//! * `fuzzing` (hidden, the `fuzzing` feature): the entry point of the fuzz target.
//!
//! The command-line applications on this library, `printer` and
//! `replicator`, are in the `shardwise-cdc-tools` package; the Kafka sink
//! (`kafka-sink`) is in `shardwise-cdc-kafka`.
//!
//! Scylla writes every change of a CDC-enabled table into a log table
//! whose partitions are *streams*; the set of streams changes with each
//! *generation*. Reading the log means reading every stream of the current
//! generation, window after window, a safety interval behind the clock,
//! and moving on to the next generation once every stream has been read up
//! to its start.
//!
//! **Planning is sans-IO.** [`plan::Planner`] is a pure state machine in
//! the style of `quinn-proto`: time comes in as a parameter, inputs are
//! mutators ([`Planner::window_done`], [`Planner::next_generation_found`],
//! ...) and outputs are [`plan::Action`]s drained with
//! [`Planner::poll`] (read this window, look for the next generation, save
//! a checkpoint, sleep, finished). Window sizing, the safety interval,
//! generation switches, end timestamps and checkpoint cadence are all
//! decided there and tested with a virtual clock; the I/O around it lives
//! behind two small async traits, [`GenerationSource`] and
//! [`CheckpointStore`], with implementations on a [`shardwise::Session`].
//!
//! **Thread-per-shard workers.** Streams are grouped by vnode
//! ([`StreamGroup`]); each group is owned by one worker (a thread, one per
//! shard), chosen by the shard its streams live on. Workers poll the one
//! planner with their own index and get only their groups' windows, so the
//! rows of a group are read, decoded and consumed on one thread, next to
//! the connection of the shard that holds them, while the global decisions
//! (generation barrier, checkpoints) stay in one place.
//!
//! **Borrowed rows.** A page of the log is one response buffer. A
//! [`LogSchema`] is computed once per result metadata; [`LogPage`] indexes
//! a page into a reusable buffer and yields [`CdcRow`]s, views that decode
//! the `cdc$` columns once and base columns on demand, zero-copy. A
//! [`Consumer`] (one per group, made by a [`ConsumerFactory`]) receives
//! them synchronously on its worker; [`Change`] is the owned copy for code
//! that keeps rows.
//!
//! [`Planner::window_done`]: plan::Planner::window_done
//! [`Planner::next_generation_found`]: plan::Planner::next_generation_found
//! [`Planner::poll`]: plan::Planner::poll

pub mod async_consumer;
pub mod checkpoint;
pub mod consumer;
mod coordination;
pub mod debezium;
#[cfg(any(test, feature = "fuzzing"))]
#[doc(hidden)]
pub mod fuzzing;
pub mod generation;
pub mod images;
mod join;
pub mod lease;
pub mod plan;
pub mod printer;
pub mod reader;
pub mod replicator;
pub mod row;
pub mod stream;
mod sync;
pub mod tablets;
pub mod time;

use std::future::Future;
use std::pin::Pin;

pub use shardwise;

pub use async_consumer::{AsyncConsumer, AsyncConsumerFactory};
pub use checkpoint::{
    Checkpoint, CheckpointError, CheckpointStore, Fence, GroupProgress, MemoryCheckpointStore, TableCheckpointStore,
};
pub use consumer::{Change, ChangeColumn, Consumer, ConsumerError, ConsumerFactory, PendingWork};
pub use coordination::CoordinationError;
pub use generation::{GenerationError, GenerationSource, VnodeGenerations};
pub use images::{ChangeWithImages, ImagesConsumer, WithImages};
pub use lease::{LeaseConfig, LeaseError, LeaseTable};
pub use plan::{Action, GroupId, GroupInfo, GroupState, PlanError, Planner, PlannerConfig, ReadWindow};
pub use reader::{Assignment, CdcError, CdcReader, CdcReaderBuilder, CdcReaderHandle, GroupLag, ReaderProgress};
pub use row::{CdcRow, LogPage, LogSchema, Operation, RowError, RowIndex, SchemaError};
pub use stream::{StreamGroup, StreamId, StreamIdError};
pub use tablets::TabletGenerations;
pub use time::Millis;

/// A boxed, `Send` future: what the async traits of this crate return, so
/// that they can be used as trait objects.
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

#[cfg(test)]
mod tests {
    use std::mem::size_of;

    use super::*;

    #[test]
    fn errors_stay_small() {
        assert!(size_of::<RowError>() <= 40, "{}", size_of::<RowError>());
        assert!(size_of::<PlanError>() <= 40, "{}", size_of::<PlanError>());
        assert!(size_of::<SchemaError>() <= 64, "{}", size_of::<SchemaError>());
        assert!(size_of::<ConsumerError>() <= 48, "{}", size_of::<ConsumerError>());
        assert!(size_of::<CheckpointError>() <= 72, "{}", size_of::<CheckpointError>());
        assert!(size_of::<GenerationError>() <= 72, "{}", size_of::<GenerationError>());
    }

    #[test]
    fn public_types_are_send_and_sync() {
        fn send_sync<T: Send + Sync>() {}
        send_sync::<Planner>();
        send_sync::<LogSchema>();
        send_sync::<RowIndex>();
        send_sync::<CdcRow<'static>>();
        send_sync::<Change>();
        send_sync::<MemoryCheckpointStore>();
        send_sync::<TableCheckpointStore>();
        send_sync::<VnodeGenerations>();
    }
}
