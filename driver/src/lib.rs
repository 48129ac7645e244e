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
//! - [`session`]: the session (pools, routing, execution, refresh) and its builder;
//! - [`connection`]: one CQL connection (handshake, writer and reader tasks);
//! - `pool`: the connections to one node, in per-shard slots;
//! - [`cluster`]: topology discovery, token ring and replica placement, node distance, host filters, address translation;
//! - [`routing`]: the token of a request's partition key;
//! - [`execute`]: how each kind of statement becomes a request;
//! - [`statement`]: statements, prepared statements, batches and their options;
//! - [`timestamp`]: client-side write timestamps (a generator for requests without one);
//! - [`result`]: query results and paging state;
//! - [`retry`]: retry policies (a session per request, made at its first failure);
//! - [`observer`]: a hook per request and attempt, for an application's own metrics;
//! - [`auth`]: SASL-style authentication;
//! - [`config`]: connection settings (compression, TLS, authentication);
//! - [`tls`]: TLS settings and handshake (the `tls` feature, on by default);
//! - [`events`]: session and database events;
//! - [`error`]: the error types;
//! - [`load_balancing`]: an application's own plan per request (the built-in one is the default);
//! - [`latency`]: latency awareness (each node's average, which nodes plans put last);
//! - `metrics`: request counters and the latency histograms (the session's, each node's);
//! - `sync`: the synchronization primitives (loom-checkable);
//! - `fuzzing` (hidden, the `fuzzing` feature): the harnesses of the fuzz targets that read what the driver reads.

#![forbid(unsafe_code)]
#![warn(missing_docs)]

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
pub mod latency;
pub mod load_balancing {
    //! Load-balancing policies: the application's plan for each request
    //! (see [`LoadBalancingPolicy`]); without one, the session's built-in
    //! plan, which [`DefaultPolicy`] returns.
    pub use crate::session::balancing::{
        ClusterView, DefaultPolicy, LoadBalancingPolicy, NodeView, RoutingInfo, Target,
    };
}
mod metrics;
pub mod observer;
mod pool;
pub mod result;
pub mod retry;
pub mod routing;
pub mod session;
pub mod statement;
mod sync;
pub mod timestamp;
pub mod tls;

/// Derives for bind values (`SerializeValues`), rows (`DeserializeRow`) and
/// user-defined types (`SerializeValue`, `DeserializeValue`).
pub use shardwise_macros::{DeserializeRow, DeserializeValue, SerializeValue, SerializeValues};
pub use shardwise_protocol as protocol;

pub use config::{Compression, ConnectionConfig, TlsConfig};
pub use connection::Connection;
pub use error::{ConnectionError, DbError, ExecutionError, NewSessionError, RowsAccessError, ServerError};
pub use events::SessionEvent;
pub use latency::LatencyAwareness;
pub use metrics::{MetricsSnapshot, NodeLatency};
pub use result::{PagingState, QueryResult};
pub use session::{
    ConnectionAffinity, ExecutionProfile, RowStream, RowStreamError, Session, SessionBuilder, SessionConfig,
    SpeculativePolicy, TracingInfo, TracingInfoError,
};
pub use statement::{Batch, PreparedStatement, Statement, StatementOptions};
