//! The cluster snapshot: the pools (local nodes first), the ring and the
//! replica tables, as one value replaced as a whole when the topology or
//! the schema is read again, so that a request plans against one
//! consistent view for the cost of a pointer copy.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, OnceLock};

use super::{Session, SessionConfig};
use crate::cluster::{NodeDistance, NodeInfo, ReplicaTable, ReplicationStrategy, TokenRing};
use crate::load_balancing::NodeView;
use crate::pool::NodePool;
use crate::protocol::name_hash::BuildNameHasher;

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
    /// A slot per keyspace the schema names, its table made on first use: a
    /// lookup afterwards writes no shared word (no lock, no reference
    /// count), so requests on different workers do not contend here.
    pub(super) tables: HashMap<String, TableSlot, BuildNameHasher>,
}

/// A keyspace's replica table, made on first use.
pub(super) struct TableSlot {
    strategy: ReplicationStrategy,
    table: OnceLock<ReplicaTable>,
}

impl Routing {
    /// Empty replica-table slots for the keyspaces of `strategies`.
    pub(super) fn slots(
        strategies: &HashMap<String, ReplicationStrategy>,
    ) -> HashMap<String, TableSlot, BuildNameHasher> {
        strategies.iter().map(|(k, s)| (k.clone(), TableSlot { strategy: s.clone(), table: OnceLock::new() })).collect()
    }

    pub(super) fn table(&self, keyspace: &str) -> Option<&ReplicaTable> {
        let slot = self.tables.get(keyspace)?;
        Some(slot.table.get_or_init(|| ReplicaTable::new(self.ring.clone(), slot.strategy.clone())))
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
    /// each sized for its distance and the session's runtime `workers`
    /// ([`SessionConfig::connections_per_node`]): a node whose distance
    /// changed to one with another size gets a new pool.
    pub(super) fn build(
        config: &SessionConfig,
        workers: usize,
        infos: Vec<NodeInfo>,
        strategies: Arc<HashMap<String, ReplicationStrategy>>,
        existing: &[Arc<NodePool>],
    ) -> ClusterState {
        // (distance, not in the local rack, address)
        let mut usable: Vec<(NodeDistance, bool, SocketAddr)> = Vec::new();
        for n in &infos {
            let refused = config.host_filter.as_ref().is_some_and(|f| !f.accept(n));
            let d = if refused { NodeDistance::Ignored } else { config.distance.distance(n) };
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
                let (sizes, affinity) = config.pool_shape(*distance, workers);
                existing
                    .iter()
                    .find(|p| p.addr == *addr && !p.is_retired() && p.slots.sizes() == sizes)
                    .cloned()
                    .unwrap_or_else(|| Arc::new(NodePool::new(*addr, sizes, affinity)))
            })
            .collect();
        let routing = Routing {
            ring: Arc::new(TokenRing::new(infos.iter().map(NodeInfo::ring_node).collect())),
            pool_of: infos.iter().map(|n| nodes.iter().position(|p| p.addr == n.address)).collect(),
            host_ids: infos.iter().map(|n| n.host_id).collect(),
            tables: Routing::slots(&strategies),
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
                tables: Routing::slots(&strategies),
            }),
        }
    }

    /// The node at `index` of [`ClusterState::nodes`] as a policy (or the
    /// cluster-state object) sees it: address, topology row, up, local.
    pub(super) fn node_view(&self, index: usize) -> Option<NodeView<'_>> {
        let pool = self.nodes.get(index)?;
        Some(NodeView {
            addr: pool.addr,
            info: self.infos.iter().find(|i| i.address == pool.addr),
            up: pool.is_up(),
            local: index < self.local,
        })
    }

    pub(super) fn pool(&self, addr: SocketAddr) -> Option<&Arc<NodePool>> {
        self.nodes.iter().find(|p| p.addr == addr)
    }
}

impl Session {
    /// The current view of the cluster.
    pub(super) fn state(&self) -> Arc<ClusterState> {
        self.inner.state.load_full()
    }

    /// `f` of the current view of the cluster, read in place: no reference
    /// count of the shared view is touched (what every request's first
    /// pick needs, on whichever worker it runs).
    pub(super) fn with_state<R>(&self, f: impl FnOnce(&ClusterState) -> R) -> R {
        f(&self.inner.state.load())
    }

    pub(super) fn set_state(&self, state: ClusterState) {
        self.inner.state.store(Arc::new(state));
    }
}
