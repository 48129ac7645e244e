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
