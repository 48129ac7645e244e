//! Session events: what the cluster told us (database events received on
//! the control connection after REGISTER) and what the session itself did
//! (connections, nodes, control connection, schema agreement), delivered on
//! a broadcast channel ([`crate::Session::events`]).

use std::net::SocketAddr;

use shardwise_protocol::response::Event;
use uuid::Uuid;

/// Something that happened to the session or the cluster.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum SessionEvent {
    /// A server event (topology, status or schema change).
    Database(Event),
    /// A connection to a node was opened.
    ConnectionOpened(SocketAddr),
    /// Opening a connection to a node failed.
    ConnectionFailed {
        /// The node.
        node: SocketAddr,
        /// Why.
        error: String,
    },
    /// A node has no open connection left.
    NodeDown(SocketAddr),
    /// A node that was down has a connection again.
    NodeUp(SocketAddr),
    /// The control connection (which receives server events) moved to a node.
    ControlConnectionChanged(SocketAddr),
    /// Every node reported this schema version.
    SchemaAgreement(Uuid),
}
