//! The cluster as the session sees it, as one object
//! ([`Session::cluster_state`]; the official driver's
//! `Session::get_cluster_state()`): the cluster's name, every node with its
//! place, state, connections and sharding, and the replicas of a token.
//!
//! The nodes are a copy taken when asked; the replicas are read from the
//! session's view when asked, tablets learned since included.

use std::net::SocketAddr;
use std::sync::Arc;

use shardwise_protocol::sharding::Sharder;
use shardwise_protocol::token::Token;
use uuid::Uuid;

use super::Session;
use crate::cluster::node::Replica;

/// One node as [`ClusterInfo::get_nodes_info`] lists it (the official
/// driver's `Node`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeState {
    /// The address the driver connects to (after address translation).
    pub address: SocketAddr,
    /// Its host id, datacenter and rack, when the topology is discovered.
    pub host_id: Option<Uuid>,
    /// Its datacenter.
    pub datacenter: Option<String>,
    /// Its rack.
    pub rack: Option<String>,
    /// In the local datacenter (per the distance policy).
    pub local: bool,
    /// Counted as up (no DOWN event since it answered last).
    pub up: bool,
    /// Its open connections.
    pub connections: usize,
    /// Its sharding, on ScyllaDB, once a connection told it.
    pub sharder: Option<Sharder>,
}

impl NodeState {
    /// Whether the session has an open connection to it.
    pub fn is_connected(&self) -> bool {
        self.connections > 0
    }

    /// Its sharding (the official driver's `Node::sharder`).
    pub fn sharder(&self) -> Option<Sharder> {
        self.sharder
    }
}

/// The cluster as a session sees it.
#[derive(Clone)]
pub struct ClusterInfo {
    name: Option<Arc<str>>,
    nodes: Vec<NodeState>,
    session: Session,
}

impl std::fmt::Debug for ClusterInfo {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClusterInfo").field("name", &self.name).field("nodes", &self.nodes).finish()
    }
}

impl ClusterInfo {
    /// The cluster's name (`system.local`'s `cluster_name`, read when the
    /// session connected); `None` when it could not be read.
    pub fn cluster_name(&self) -> Option<&str> {
        self.name.as_deref()
    }

    /// Every node the session has a pool for, local ones first.
    pub fn get_nodes_info(&self) -> &[NodeState] {
        &self.nodes
    }

    /// The replicas of `token` in `keyspace.table`, each with the shard
    /// that owns it there ([`Session::token_endpoints`]: the tablet's for a
    /// table with tablets, as learned so far).
    pub fn get_token_endpoints(&self, keyspace: &str, table: &str, token: Token) -> Vec<Replica> {
        self.session.token_endpoints(keyspace, table, token)
    }
}

impl Session {
    /// The cluster as this session sees it now ([`ClusterInfo`]).
    pub fn cluster_state(&self) -> ClusterInfo {
        let nodes = self.with_state(|state| {
            state
                .nodes
                .iter()
                .enumerate()
                .filter_map(|(i, pool)| {
                    let view = state.node_view(i)?;
                    let open = pool.slots.open_connections();
                    Some(NodeState {
                        address: view.addr,
                        host_id: view.host_id(),
                        datacenter: view.datacenter().map(str::to_owned),
                        rack: view.rack().map(str::to_owned),
                        local: view.local,
                        up: view.up,
                        connections: open.len(),
                        sharder: open.iter().find_map(|c| c.sharding().map(|s| s.sharder())),
                    })
                })
                .collect()
        });
        let name = self.inner.cluster_name.clone();
        ClusterInfo { name, nodes, session: self.clone() }
    }
}
