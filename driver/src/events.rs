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
    /// A node is down: it has no open connection left, or the cluster
    /// reported it down (STATUS_CHANGE). Query plans skip it until it is up.
    NodeDown(SocketAddr),
    /// A node that was down is up again: a connection to it opened, or the
    /// cluster reported it up while a connection was open.
    NodeUp(SocketAddr),
    /// The control connection (which receives server events) moved to a node.
    ControlConnectionChanged(SocketAddr),
    /// Every node reported this schema version.
    SchemaAgreement(Uuid),
    /// The topology was read again (after a topology or status event, a
    /// control connection move, or periodically) and the pools and the
    /// token ring now follow it.
    TopologyRefreshed {
        /// Nodes that got a connection pool.
        added: Vec<SocketAddr>,
        /// Nodes whose pool was closed (they left, or are now ignored).
        removed: Vec<SocketAddr>,
        /// Nodes (by address) whose host id, datacenter, rack or tokens
        /// changed, or that moved to this address.
        changed: Vec<SocketAddr>,
        /// Nodes with a connection pool now.
        nodes: usize,
    },
    /// A node answered `UNPREPARED` to a prepared statement (it restarted,
    /// or evicted the statement from its cache), and the session prepared
    /// the statement there again and retried the request.
    StatementReprepared {
        /// The node that had forgotten the statement.
        node: SocketAddr,
        /// The statement's CQL text.
        statement: String,
        /// The statement's id (the same before and after).
        id: Vec<u8>,
    },
}
