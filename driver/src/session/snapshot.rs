//! The cluster snapshot: the pools (local nodes first), the ring and the
//! replica tables, as one value replaced as a whole when the topology or
//! the schema is read again, so that a request plans against one
//! consistent view for the cost of a pointer copy.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, RwLock};

use super::{Session, SessionConfig};
use crate::cluster::{NodeDistance, NodeInfo, ReplicaTable, ReplicationStrategy, TokenRing};
use crate::pool::NodePool;

/// What token-aware routing needs besides the pools: the ring of every
/// discovered node, which pool serves each of them, and each keyspace's
/// replica table (computed on first use, then cached with the snapshot).
pub(super) struct Routing {
    pub(super) ring: Arc<TokenRing>,
    /// Pool index (in [`ClusterState::nodes`]) of each ring node; `None`
    /// when the node is ignored.
    pub(super) pool_of: Vec<Option<usize>>,
    /// The host id of each ring node (for tablet replicas, named by host id).
    pub(super) host_ids: Vec<uuid::Uuid>,
    pub(super) strategies: Arc<HashMap<String, ReplicationStrategy>>,
    pub(super) tables: RwLock<HashMap<String, Arc<ReplicaTable>>>,
}

impl Routing {
    pub(super) fn table(&self, keyspace: &str) -> Option<Arc<ReplicaTable>> {
        if let Some(t) = self.tables.read().unwrap_or_else(|e| e.into_inner()).get(keyspace) {
            return Some(t.clone());
        }
        let strategy = self.strategies.get(keyspace)?.clone();
        let table = Arc::new(ReplicaTable::new(self.ring.clone(), strategy));
        self.tables.write().unwrap_or_else(|e| e.into_inner()).insert(keyspace.to_owned(), table.clone());
        Some(table)
    }
}

/// One consistent view of the cluster. Replaced, never changed in place
/// (except for the replica-table cache inside [`Routing`]).
pub(super) struct ClusterState {
    /// Pools of the nodes that get connections: local ones first.
    pub(super) nodes: Vec<Arc<NodePool>>,
    /// How many of `nodes` are in the local rack (the first ones).
    pub(super) rack: usize,
    /// How many of `nodes` are local.
    pub(super) local: usize,
    /// The nodes the last topology reading found (ignored ones included);
    /// empty when the topology is not discovered.
    pub(super) infos: Vec<NodeInfo>,
    /// `None` without topology discovery.
    pub(super) routing: Option<Routing>,
}

impl ClusterState {
    /// The view of `infos`: pools (reused from `existing` by address and
    /// size, else new) for every node the distance policy does not ignore,
    /// each sized for its distance ([`SessionConfig::connections_for`]): a
    /// node whose distance changed to one with another size gets a new pool.
    pub(super) fn build(
        config: &SessionConfig,
        infos: Vec<NodeInfo>,
        strategies: Arc<HashMap<String, ReplicationStrategy>>,
        existing: &[Arc<NodePool>],
    ) -> ClusterState {
        // (distance, not in the local rack, address)
        let mut usable: Vec<(NodeDistance, bool, SocketAddr)> = Vec::new();
        for n in &infos {
            let d = config.distance.distance(n);
            if d != NodeDistance::Ignored && !usable.iter().any(|(_, _, a)| *a == n.address) {
                usable.push((d, !config.distance.in_local_rack(n), n.address));
            }
        }
        // Stable: discovery order within a distance, the local rack first.
        usable.sort_by_key(|(d, elsewhere, _)| (*d, *elsewhere));
        let local = usable.iter().filter(|(d, _, _)| *d == NodeDistance::Local).count();
        let rack = usable.iter().filter(|(d, elsewhere, _)| *d == NodeDistance::Local && !elsewhere).count();
        let nodes: Vec<Arc<NodePool>> = usable
            .iter()
            .map(|(distance, _, addr)| {
                let size = config.connections_for(*distance).max(1);
                existing
                    .iter()
                    .find(|p| p.addr == *addr && !p.is_retired() && p.slots.per_shard() == size)
                    .cloned()
                    .unwrap_or_else(|| Arc::new(NodePool::new(*addr, size)))
            })
            .collect();
        let routing = Routing {
            ring: Arc::new(TokenRing::new(infos.iter().map(NodeInfo::ring_node).collect())),
            pool_of: infos.iter().map(|n| nodes.iter().position(|p| p.addr == n.address)).collect(),
            host_ids: infos.iter().map(|n| n.host_id).collect(),
            strategies,
            tables: RwLock::new(HashMap::new()),
        };
        ClusterState { nodes, rack, local, infos, routing: Some(routing) }
    }

    /// The same view with other replication strategies (a schema change).
    pub(super) fn with_strategies(&self, strategies: Arc<HashMap<String, ReplicationStrategy>>) -> ClusterState {
        ClusterState {
            nodes: self.nodes.clone(),
            rack: self.rack,
            local: self.local,
            infos: self.infos.clone(),
            routing: self.routing.as_ref().map(|r| Routing {
                ring: r.ring.clone(),
                pool_of: r.pool_of.clone(),
                host_ids: r.host_ids.clone(),
                strategies,
                tables: RwLock::new(HashMap::new()),
            }),
        }
    }

    pub(super) fn pool(&self, addr: SocketAddr) -> Option<&Arc<NodePool>> {
        self.nodes.iter().find(|p| p.addr == addr)
    }
}

impl Session {
    /// The current view of the cluster.
    pub(super) fn state(&self) -> Arc<ClusterState> {
        self.inner.state.read().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// `f` of the current view of the cluster, read in place: no reference
    /// count of the shared view is touched (what every request's first
    /// pick needs, on whichever worker it runs).
    pub(super) fn with_state<R>(&self, f: impl FnOnce(&ClusterState) -> R) -> R {
        f(&self.inner.state.read().unwrap_or_else(|e| e.into_inner()))
    }

    pub(super) fn set_state(&self, state: ClusterState) {
        *self.inner.state.write().unwrap_or_else(|e| e.into_inner()) = Arc::new(state);
    }
}
