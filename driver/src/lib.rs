//! # shardwise
//!
//! A latency-first ScyllaDB / Cassandra driver. Requests are serialized in
//! place into per-connection swap buffers and coalesced into one write per
//! buffer; responses are read into one buffer each and rows are borrowed
//! views over it. The wire format comes from the sans-IO
//! [`shardwise_protocol`] crate, re-exported as [`protocol`].
//!
//! ## Modules
//!
//! Listed from the top down: a module uses those below it (and its own
//! submodules), with one exception, `settings`, which reads the session's
//! configuration (`SessionConfig`, which itself uses only modules below
//! `settings`). `cargo xtask imports driver` checks that no import circle
//! creeps back.
//!
//! - [`session`]: the session and its builder: pools, routing, refresh,
//!   and `session/request.rs`, one request from `execute` to its result
//!   (settings, speculative execution, retries, attempts);
//! - `settings`: the settings a request runs with, resolved once per request
//!   from the statement, its profile and the session;
//! - [`load_balancing`]: an application's own plan per request (the built-in one is the default);
//! - `pool`: the connections to one node, in per-shard slots;
//! - [`cluster`]: topology discovery, token ring and replica placement, node distance, host filters, address translation;
//! - [`connection`]: one CQL connection (handshake, writer and reader tasks), and its own
//!   `execute` and `prepare` (`connection/execute.rs`: one statement, no retries);
//! - [`execute`]: how each kind of statement becomes a protocol request (the [`execute::Executable`] trait);
//! - `params`: the parameters of one attempt ([`execute::Params`]), shared by requests and topology queries;
//! - [`statement`]: statements, prepared statements, batches and their options;
//! - [`routing`]: the token of a request's partition key;
//! - [`result`]: query results and paging state;
//! - [`profile`]: execution profiles (named bundles of execution settings) and speculative execution;
//! - [`affinity`]: connection affinity, which of a node's connections a request takes;
//! - [`history`]: an observer that keeps each request's attempts (node, timing, error, retry decision);
//! - [`observer`]: a hook per request and attempt, for an application's own metrics;
//! - [`retry`]: retry policies (a session per request, made at its first failure);
//! - [`latency`]: latency awareness (each node's average, which nodes plans put last);
//! - [`timestamp`]: client-side write timestamps (a generator for requests without one);
//! - [`config`]: connection settings (compression, TLS, authentication);
//! - [`tls`]: TLS settings and handshake (the `tls` feature, on by default);
//! - [`auth`]: SASL-style authentication;
//! - [`events`]: session and database events;
//! - `metrics`: request and connection counters, request rates and the latency histograms (the
//!   session's, each node's);
//! - [`error`]: the error types;
//! - `sync`: the synchronization primitives (loom-checkable);
//! - `replaced`: a value read in place until first replaced (a prepared statement's result shape;
//!   loom-checked);
//! - `fuzzing` (hidden, the `fuzzing` feature): the harnesses of the fuzz targets that read what the driver reads.

#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod affinity;
pub mod auth;
pub mod cluster;
pub mod config;
pub mod connection;
pub mod error;
pub mod events;
pub mod execute;
#[cfg(any(test, feature = "fuzzing"))]
#[doc(hidden)]
pub mod fuzzing;
pub mod history;
pub mod latency;
pub mod load_balancing;
mod metrics;
pub mod observer;
mod params;
mod pool;
pub mod profile;
mod replaced;
pub mod result;
pub mod retry;
pub mod routing;
pub mod session;
mod settings;
pub mod statement;
mod sync;
pub mod timestamp;
pub mod tls;

/// Derives for bind values (`SerializeValues`), rows (`DeserializeRow`) and
/// user-defined types (`SerializeValue`, `DeserializeValue`).
pub use shardwise_macros::{DeserializeRow, DeserializeValue, SerializeValue, SerializeValues};
pub use shardwise_protocol as protocol;

pub use config::{
    Compression, ConnectionConfig, InvalidShardAwarePortRange, SelfIdentity, ShardAwarePortRange, SocketOptions,
    TlsConfig,
};
pub use connection::Connection;
pub use error::{ConnectionError, DbError, ExecutionError, NewSessionError, RowsAccessError, ServerError};
pub use events::SessionEvent;
pub use latency::LatencyAwareness;
pub use metrics::{Latencies, MetricsSnapshot, NodeLatency, Rates};
pub use result::{Coordinator, PagingState, QueryResult};
pub use session::{
    ClusterInfo, ConnectionAffinity, ExecutionProfile, ExecutionProfileHandle, NodeState, PoolSize, RowStream,
    RowStreamError, Session, SessionBuilder, SessionConfig, SpeculativePolicy, TracingInfo, TracingInfoError,
    TracingInfoFetch,
};
pub use statement::{Batch, BatchStatement, PreparedStatement, Statement, StatementOptions};
