//! A node of the cluster as the topology queries learn it: its own module so
//! that what only needs the type (load-balancing policies, the ring) does not
//! import the queries that fill it in (`topology`).

use std::net::SocketAddr;

use shardwise_protocol::token::Token;
use uuid::Uuid;

use super::ring::RingNode;

/// A node of the cluster.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeInfo {
    /// Stable identity.
    pub host_id: Uuid,
    /// Address clients connect to.
    pub address: SocketAddr,
    /// Datacenter.
    pub datacenter: Option<String>,
    /// Rack.
    pub rack: Option<String>,
    /// Tokens owned.
    pub tokens: Vec<Token>,
}

impl NodeInfo {
    /// The node as the ring sees it.
    pub fn ring_node(&self) -> RingNode {
        RingNode { datacenter: self.datacenter.clone(), rack: self.rack.clone(), tokens: self.tokens.clone() }
    }
}

/// One replica of a token, as
/// [`Session::token_endpoints`](crate::Session::token_endpoints) lists it:
/// the node and, on ScyllaDB, the shard that owns the token there.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Replica {
    /// The address the driver connects to.
    pub addr: SocketAddr,
    /// Its host id, when the topology is known.
    pub host_id: Option<Uuid>,
    /// The shard that owns the token on that node: the tablet's for a
    /// table with tablets, else the node's sharding's; `None` when the
    /// node is not sharded (Cassandra) or its sharding is not known yet.
    pub shard: Option<u16>,
}
