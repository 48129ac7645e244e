//! Errors, layered like the request path: a [`ConnectionError`] ends a
//! connection (and fails its in-flight requests), an [`ExecutionError`] is
//! what `Session::execute` returns, carrying the server's typed error
//! ([`DbError`]) when the server answered with one.

use std::sync::Arc;

use shardwise_protocol::response::ErrorResponse;
use shardwise_protocol::rows::RowsError;
use shardwise_protocol::types::de::DeserializeError;
use shardwise_protocol::{DecodeError, EncodeError};

/// The server's typed error (code, message and code-specific payload).
pub type DbError = ErrorResponse;

/// Why a connection could not be opened or stopped working.
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum ConnectionError {
    /// A socket error.
    #[error("I/O error: {0}")]
    Io(Arc<std::io::Error>),
    /// The TLS handshake failed (e.g. the server's certificate is not trusted).
    #[error("TLS handshake failed: {0}")]
    Tls(Arc<str>),
    /// Connecting took longer than the connect timeout.
    #[error("connect timed out")]
    ConnectTimeout,
    /// The server sent bytes that are not a valid frame or message.
    #[error("malformed data from the server: {0}")]
    Decode(#[from] DecodeError),
    /// The server answered the handshake with an error.
    #[error("handshake failed: {0}")]
    Handshake(Box<DbError>),
    /// The server wants authentication and no authenticator is configured,
    /// or the authenticator failed.
    #[error("authentication failed: {0}")]
    Auth(String),
    /// The server sent something the protocol does not allow here.
    #[error("protocol violation: {0}")]
    Protocol(&'static str),
    /// No protocol version in the configured range is accepted by the server.
    #[error("the server accepts no protocol version in the configured range")]
    NoCommonVersion,
    /// The connection was closed (by us, or the server went away).
    #[error("connection closed")]
    Closed,
    /// Too many requests were abandoned without their answers.
    #[error("too many orphaned streams ({0})")]
    TooManyOrphans(usize),
    /// Heartbeat got no answer in time.
    #[error("heartbeat timed out")]
    HeartbeatTimeout,
}

impl From<std::io::Error> for ConnectionError {
    fn from(e: std::io::Error) -> Self {
        ConnectionError::Io(Arc::new(e))
    }
}

/// Why a request failed.
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum ExecutionError {
    /// The server answered with an error.
    #[error(transparent)]
    Db(Box<DbError>),
    /// The connection failed.
    #[error(transparent)]
    Connection(#[from] ConnectionError),
    /// No answer within the request timeout (the whole request, retries
    /// included).
    #[error("request timed out after {0:?}")]
    Timeout(std::time::Duration),
    /// One attempt got no answer within the attempt timeout, and the retry
    /// policy did not retry it (a statement that is not idempotent, or the
    /// retries spent). The node may still apply the request.
    #[error("no answer from the node within the attempt timeout of {0:?}")]
    AttemptTimeout(std::time::Duration),
    /// The request could not be serialized (e.g. values of the wrong type).
    #[error("cannot serialize the request: {0}")]
    Encode(#[from] EncodeError),
    /// The response could not be decoded.
    #[error("cannot decode the response: {0}")]
    Decode(#[from] DecodeError),
    /// The server answered with a message that does not fit the request.
    #[error("unexpected response: {0}")]
    UnexpectedResponse(&'static str),
    /// No node could be reached.
    #[error("no connection available")]
    NoConnection,
    /// Schema agreement was not reached in time after a schema change.
    #[error("schema agreement not reached within {0:?}")]
    SchemaAgreementTimeout(std::time::Duration),
}

impl From<DbError> for ExecutionError {
    fn from(e: DbError) -> Self {
        ExecutionError::Db(Box::new(e))
    }
}

/// Why rows could not be read from a result.
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum RowsAccessError {
    /// The result has no rows (it was a write, a schema change...).
    #[error("the result is not a set of rows")]
    NotRows,
    /// The row type does not match the columns.
    #[error(transparent)]
    Rows(#[from] RowsError),
    /// A value could not be read.
    #[error(transparent)]
    Deserialize(#[from] DeserializeError),
}

/// Errors of building a session.
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum NewSessionError {
    /// No known node was given.
    #[error("no known nodes configured")]
    NoKnownNodes,
    /// A known node address could not be resolved.
    #[error("cannot resolve {0}")]
    Resolve(String),
    /// No known node could be connected to; the last failure is given.
    #[error("could not connect to any known node (the last tried, {node}: {source})")]
    Connect {
        /// The node of the last failure.
        node: std::net::SocketAddr,
        /// Why it failed.
        source: ConnectionError,
    },
    /// Setting the keyspace failed.
    #[error("cannot use keyspace: {0}")]
    UseKeyspace(ExecutionError),
    /// The configuration is invalid.
    #[error("invalid configuration: {0}")]
    Config(&'static str),
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errors_stay_small() {
        assert!(std::mem::size_of::<ExecutionError>() <= 64, "{}", std::mem::size_of::<ExecutionError>());
        assert!(std::mem::size_of::<ConnectionError>() <= 48);
    }
}
