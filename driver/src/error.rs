//! Errors, layered like the request path: a [`ConnectionError`] ends a
//! connection (and fails its in-flight requests), an [`ExecutionError`] is
//! what `Session::execute` returns, carrying the server's typed error
//! ([`DbError`]) when the server answered with one.

use std::net::SocketAddr;
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
    /// The server answered with an error; it names the node and shard that
    /// answered, and derefs to the [`DbError`].
    #[error(transparent)]
    Db(Box<ServerError>),
    /// The connection failed.
    #[error(transparent)]
    Connection(#[from] ConnectionError),
    /// No answer within the request timeout (the whole request, retries
    /// included).
    #[error("request timed out after {0:?} (SessionConfig::request_timeout, or the statement's)")]
    Timeout(std::time::Duration),
    /// One attempt got no answer within the attempt timeout, and the retry
    /// policy did not retry it (a statement that is not idempotent, or the
    /// retries spent). The node may still apply the request.
    #[error(
        "no answer from {node}{} within the attempt timeout of {after:?} (SessionConfig::attempt_timeout, or the statement's)",
        on_shard(*.shard)
    )]
    AttemptTimeout {
        /// The attempt timeout.
        after: std::time::Duration,
        /// The node that did not answer.
        node: SocketAddr,
        /// Its shard, on a sharded node.
        shard: Option<u16>,
    },
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
    /// The load-balancing policy (the statement's profile's, or the
    /// session's) planned no node for the request: e.g. a
    /// [`SingleTargetLoadBalancingPolicy`](crate::load_balancing::SingleTargetLoadBalancingPolicy)
    /// whose node the session does not know (not in the topology, or
    /// ignored by the distance policy or a host filter).
    #[error("the load-balancing policy {policy} planned no node for the request (a node the session does not know?)")]
    EmptyPlan {
        /// The policy, as its `Debug` form shows it (a single target names its node).
        policy: Box<str>,
    },
    /// None of the nodes the load-balancing policy planned has a
    /// connection (down, or not connected yet); no other node is tried.
    #[error(
        "no connection to the nodes the load-balancing policy planned (the last: {last}; down, or not connected yet)"
    )]
    PlanUnavailable {
        /// The last node of the plan that was tried.
        last: SocketAddr,
    },
    /// Schema agreement was not reached in time after a schema change.
    #[error("schema agreement not reached within {0:?} (SessionConfig::schema_agreement_timeout)")]
    SchemaAgreementTimeout(std::time::Duration),
    /// [`Session::use_keyspace`](crate::Session::use_keyspace) was given a
    /// name that cannot be a keyspace's.
    #[error("bad keyspace name {name:?}: {reason}")]
    BadKeyspaceName {
        /// The name given.
        name: String,
        /// What is wrong with it.
        reason: &'static str,
    },
}

impl From<DbError> for ExecutionError {
    fn from(error: DbError) -> Self {
        ExecutionError::Db(Box::new(ServerError { error, node: None, shard: None }))
    }
}

impl ExecutionError {
    /// The error as from `node` (and its `shard`): a server error not yet
    /// attributed gets them.
    pub(crate) fn answered_by(mut self, node: SocketAddr, shard: Option<u16>) -> Self {
        if let ExecutionError::Db(e) = &mut self {
            if e.node.is_none() {
                (e.node, e.shard) = (Some(node), shard);
            }
        }
        self
    }
}

/// A server's error and which node (and shard) sent it.
#[derive(Debug, Clone, PartialEq)]
pub struct ServerError {
    /// The error.
    pub error: DbError,
    /// The node that answered with it (`None` when not known, e.g. an error
    /// converted from a bare [`DbError`]).
    pub node: Option<SocketAddr>,
    /// Its shard, on a sharded node.
    pub shard: Option<u16>,
}

impl std::ops::Deref for ServerError {
    type Target = DbError;
    fn deref(&self) -> &DbError {
        &self.error
    }
}

impl std::fmt::Display for ServerError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.node {
            Some(node) => write!(f, "{} (from {node}{})", self.error, on_shard(self.shard)),
            None => self.error.fmt(f),
        }
    }
}

impl std::error::Error for ServerError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(&self.error)
    }
}

/// ", shard N" when there is one.
fn on_shard(shard: Option<u16>) -> String {
    shard.map(|s| format!(" shard {s}")).unwrap_or_default()
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
    /// No known node's address could be resolved; each name is given with
    /// why it failed (names that fail beside one that resolves are only
    /// logged).
    #[error("cannot resolve any known node: {0}")]
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
    /// Client routes were asked for and none could be followed: the
    /// cluster has no `system.client_routes` (not ScyllaDB 2026.1 or
    /// later), or no node has a route under the connection ids given.
    #[error("cannot follow client routes: {0}")]
    ClientRoutes(String),
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errors_name_the_node_and_shard() {
        let node: SocketAddr = "127.0.0.7:9042".parse().expect("addr");
        let kind = shardwise_protocol::response::ErrorKind::Invalid;
        let db = DbError { code: 0x2200, message: "no such table".into(), kind };
        let e = ExecutionError::from(db.clone()).answered_by(node, Some(3));
        assert_eq!(e.to_string(), format!("{db} (from 127.0.0.7:9042 shard 3)"));
        assert!(matches!(&e, ExecutionError::Db(s) if s.code == 0x2200), "derefs to the DbError");
        let again = e.answered_by("127.0.0.8:9042".parse().expect("addr"), None);
        assert!(again.to_string().contains("127.0.0.7:9042"), "the first node stays");
        let t = ExecutionError::AttemptTimeout { after: std::time::Duration::from_secs(2), node, shard: None };
        assert_eq!(
            t.to_string(),
            "no answer from 127.0.0.7:9042 within the attempt timeout of 2s (SessionConfig::attempt_timeout, or the statement's)"
        );
    }

    #[test]
    fn errors_stay_small() {
        assert!(std::mem::size_of::<ExecutionError>() <= 64, "{}", std::mem::size_of::<ExecutionError>());
        assert!(std::mem::size_of::<ConnectionError>() <= 48);
    }
}
