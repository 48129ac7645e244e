//! # shardwise
//!
//! A latency-first ScyllaDB / Cassandra driver. Requests are serialized in
//! place into per-connection swap buffers and coalesced into one write per
//! buffer; responses are read into one buffer each and rows are borrowed
//! views over it. The wire format comes from the sans-IO
//! [`shardwise_protocol`] crate, re-exported as [`protocol`].

#![warn(missing_docs)]

pub mod auth;
pub mod cluster;
pub mod config;
pub mod connection;
pub mod error;
pub mod events;
pub mod execute;
mod metrics;
mod pool;
pub mod result;
pub mod retry;
pub mod routing;
pub mod session;
pub mod statement;
mod sync;

/// Derives for bind values (`SerializeValues`) and rows (`DeserializeRow`).
pub use shardwise_macros::{DeserializeRow, SerializeValues};
pub use shardwise_protocol as protocol;

pub use config::{Compression, ConnectionConfig, TlsConfig};
pub use connection::Connection;
pub use error::{ConnectionError, DbError, ExecutionError, NewSessionError, RowsAccessError};
pub use events::SessionEvent;
pub use metrics::MetricsSnapshot;
pub use result::{PagingState, QueryResult};
pub use session::{Session, SessionBuilder, SessionConfig, SpeculativePolicy};
pub use statement::{Batch, PreparedStatement, Statement, StatementOptions};
