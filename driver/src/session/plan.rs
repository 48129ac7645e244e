//! The query plan: in which order a request tries the nodes (the token's
//! replicas first, those in the local rack, then the local datacenter,
//! then remote ones; then every node round-robin in the same tiers) and
//! which connection it takes from each (the one serving the token's
//! shard). Nodes that latency awareness penalizes come after every other
//! node that is up, and nodes that are down last. For a table with
//! tablets, the replicas are the tablet's, each with its own shard, when
//! the tablet is known.
//!
//! The order is a pure function over the snapshot's slices ([`Plan`]),
//! generic over the node ([`Candidate`]), so that it is tested here without
//! sockets; [`Session::pick`] applies it to the current snapshot. Nothing
//! is cached per token because nothing needs to be: the replicas of each
//! token range are computed once per snapshot ([`ReplicaTable`]), and a
//! plan walks them in place, allocating nothing.
//!
//! [`ReplicaTable`]: crate::cluster::ReplicaTable

use std::cell::Cell;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Instant;

use shardwise_protocol::consistency::Consistency;
use shardwise_protocol::token::Token;

use super::snapshot::ClusterState;
use super::Session;
use crate::cluster::node::Replica;
use crate::cluster::ring::NodeIndex;
use crate::connection::Connection;
use crate::error::ExecutionError;
use crate::execute::Route;
use crate::latency::{Average, LatencyAwareness, Penalty};
use crate::load_balancing::{ClusterSource, ClusterView, LoadBalancingPolicy, NodeView, RoutingInfo, Target};
use crate::pool::NodePool;
use uuid::Uuid;

/// What a request's plan needs to know of it besides its route: the
/// load-balancing policy that plans it (its profile's, else the session's;
/// `None`: the built-in plan), and what that policy is told.
#[derive(Debug, Clone, Copy)]
pub(super) struct Ask<'p> {
    pub(super) consistency: shardwise_protocol::consistency::Consistency,
    pub(super) idempotent: bool,
    pub(super) policy: Option<&'p dyn LoadBalancingPolicy>,
}

/// What a plan asks of a node.
pub(super) trait Candidate {
    /// A connection to the node.
    type Conn;
    /// Whether the node counts as up.
    fn is_up(&self) -> bool;
    /// Its average latency, for latency awareness.
    fn average(&self) -> Option<Average>;
    /// A connection to the node: to the shard owning `token` when it has
    /// one, else any (`seed` rotates between equally loaded ones).
    fn connection_for(&self, token: Option<Token>, seed: usize) -> Option<Self::Conn>;
    /// A connection to `shard` when the node has one, else any.
    fn connection_on_shard(&self, shard: u16, seed: usize) -> Option<Self::Conn>;
}

impl Candidate for Arc<NodePool> {
    type Conn = Connection;
    fn is_up(&self) -> bool {
        NodePool::is_up(self)
    }
    fn average(&self) -> Option<Average> {
        self.average.get()
    }
    fn connection_for(&self, token: Option<Token>, seed: usize) -> Option<Connection> {
        NodePool::connection_for(self, token, seed)
    }
    fn connection_on_shard(&self, shard: u16, seed: usize) -> Option<Connection> {
        NodePool::connection_on_shard(self, shard, seed)
    }
}

/// A request's seed: this thread's next, so that successive requests take
/// turns among equal nodes and connections without the runtime's workers
/// sharing (and bouncing) one counter.
pub(super) fn next_seed() -> usize {
    static THREADS: AtomicUsize = AtomicUsize::new(0);
    thread_local! {
        static NEXT: Cell<usize> = Cell::new(THREADS.fetch_add(1, Ordering::Relaxed).wrapping_mul(7919));
    }
    NEXT.try_with(|n| {
        let seed = n.get();
        n.set(seed.wrapping_add(1));
        seed
    })
    .unwrap_or(0)
}

/// Nanoseconds on the monotonic clock latency averages are kept on.
pub(super) fn now_ns() -> u64 {
    static EPOCH: OnceLock<Instant> = OnceLock::new();
    u64::try_from(EPOCH.get_or_init(Instant::now).elapsed().as_nanos()).unwrap_or(u64::MAX)
}

/// The passes of a plan, each over every position: the nodes that are up
/// and not penalized, then those penalized for their latency, then those
/// that are down (a DOWN event may be stale).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Pass {
    Preferred,
    Penalized,
    Down,
}

/// One request's plan over a snapshot.
pub(super) struct Plan<'a, N> {
    /// The nodes with pools: those of the local rack, then the rest of the
    /// local datacenter, then remote ones.
    pub(super) nodes: &'a [N],
    /// How many of `nodes` are in the local rack (a prefix of the local ones).
    pub(super) rack: usize,
    /// How many of `nodes` are local.
    pub(super) local: usize,
    /// The token's replicas (ring node indices, primary first); empty when
    /// the request is not routed by token.
    pub(super) replicas: &'a [NodeIndex],
    /// The replicas of the token's tablet as (host id, shard), when the
    /// table has tablets and this one is known; used instead of `replicas`.
    pub(super) tablet: &'a [(Uuid, u16)],
    /// The host id of each ring node, to find a tablet replica's node.
    pub(super) host_ids: &'a [Uuid],
    /// The index in `nodes` of each ring node; `None` for an ignored one.
    pub(super) pool_of: &'a [Option<usize>],
    /// The request's token, for the shard.
    pub(super) token: Option<Token>,
    /// Shuffles the replicas and rotates the other nodes, so that no node
    /// takes every first attempt; the same seed gives the same order (the
    /// retries of one request walk one plan).
    pub(super) seed: usize,
    /// A lightweight transaction: its replicas in ring order, primary first,
    /// whatever the seed (Paxos rounds on one partition from several
    /// coordinators contend; the official drivers do the same).
    pub(super) lwt: bool,
    /// Latency awareness: which nodes go after the others.
    pub(super) penalty: Option<Penalty>,
}

impl<'a, N: Candidate> Plan<'a, N> {
    /// The node and connection at plan position `from` or after, and the
    /// position it was found at. The plan: the token's replicas in the
    /// local rack, in the rest of the local datacenter, then remote ones
    /// (each tier shuffled by `seed`), then every node of each tier
    /// round-robin. That order is walked three times: for the nodes that
    /// are up and not penalized, then those penalized, then those down.
    /// A node without a connection is passed to `unavailable` and skipped.
    /// Allocates nothing.
    pub(super) fn pick(&self, from: usize, mut unavailable: impl FnMut(&N)) -> Option<(usize, &'a N, N::Conn)> {
        let (nodes, seed, token) = (self.nodes, self.seed, self.token);
        let tiers = [0..self.rack, self.rack..self.local, self.local..nodes.len()];
        let mut position = 0;
        for pass in [Pass::Preferred, Pass::Penalized, Pass::Down] {
            if pass == Pass::Penalized && self.penalty.is_none() {
                // Nobody is penalized: the pass would skip every position.
                position += self.positions();
                continue;
            }
            let mut visit = |node: &N, shard: Option<u16>| -> Option<(usize, N::Conn)> {
                let here = position;
                position += 1;
                let this_pass = match (node.is_up(), self.penalty) {
                    (false, _) => Pass::Down,
                    (true, Some(p)) if p.applies(node.average()) => Pass::Penalized,
                    (true, _) => Pass::Preferred,
                };
                if here < from || this_pass != pass {
                    return None;
                }
                let conn = match shard {
                    Some(shard) => node.connection_on_shard(shard, seed),
                    None => node.connection_for(token, seed),
                };
                match conn {
                    Some(c) => Some((here, c)),
                    None => {
                        unavailable(node);
                        None
                    }
                }
            };
            let n = self.replica_count();
            let order = if self.lwt { Shuffle::identity(n) } else { Shuffle::new(n, seed) };
            for tier in &tiers {
                for i in 0..n {
                    let Some((p, shard)) = self.replica(order.at(i)) else { continue };
                    if !tier.contains(&p) {
                        continue;
                    }
                    let node = &nodes[p];
                    if let Some((here, c)) = visit(node, shard) {
                        return Some((here, node, c));
                    }
                }
            }
            for tier in &tiers {
                let group = &nodes[tier.clone()];
                let n = group.len();
                for i in 0..n {
                    let node = &group[(seed + i) % n];
                    if let Some((here, c)) = visit(node, None) {
                        return Some((here, node, c));
                    }
                }
            }
        }
        None
    }

    /// Each replica with a pool, in replica order (primary first; a
    /// tablet's in its order): its index in `nodes` and its shard.
    pub(super) fn replicas(&self, mut f: impl FnMut(usize, Option<u16>)) {
        for i in 0..self.replica_count() {
            if let Some((p, shard)) = self.replica(i) {
                f(p, shard);
            }
        }
    }

    fn replica_count(&self) -> usize {
        if self.tablet.is_empty() {
            self.replicas.len()
        } else {
            self.tablet.len()
        }
    }

    /// The index in `nodes` of the `i`-th replica and the shard to ask it
    /// for (a tablet's), or `None` when it has no pool.
    fn replica(&self, i: usize) -> Option<(usize, Option<u16>)> {
        let (ring_index, shard) = if self.tablet.is_empty() {
            (Some(self.replicas[i]), None)
        } else {
            let (host, shard) = self.tablet[i];
            (self.host_ids.iter().position(|h| *h == host), Some(shard))
        };
        ring_index.and_then(|r| self.pool_of.get(r).copied().flatten()).map(|p| (p, shard))
    }

    /// How many positions one pass has: every replica with a pool, and every node.
    fn positions(&self) -> usize {
        (0..self.replica_count()).filter(|&i| self.replica(i).is_some()).count() + self.nodes.len()
    }
}

/// A pseudo-random order of `n` replicas from a request's seed, on the
/// stack: the replicas are shuffled (Fisher–Yates over a splitmix64 stream
/// of the seed), not rotated, so that with replication factor 3 each of
/// the 6 orders is as likely and a slow replica is not always followed by
/// the same one. More than [`Shuffle::MAX`] replicas are rotated instead.
#[derive(Debug, Clone, Copy)]
struct Shuffle {
    order: [u8; Shuffle::MAX],
    n: usize,
    rotation: usize,
}

impl Shuffle {
    const MAX: usize = 32;

    fn new(n: usize, seed: usize) -> Shuffle {
        let mut s = Shuffle::identity(n);
        let mut state = seed as u64;
        let mut next = || {
            state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
            let mut z = state;
            z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
            z ^ (z >> 31)
        };
        if n > Shuffle::MAX {
            s.rotation = (next() % n as u64) as usize;
            return s;
        }
        for i in (1..n).rev() {
            let j = (next() % (i as u64 + 1)) as usize;
            s.order.swap(i, j);
        }
        s
    }

    fn identity(n: usize) -> Shuffle {
        let mut order = [0u8; Shuffle::MAX];
        for (i, o) in order.iter_mut().enumerate() {
            *o = i as u8;
        }
        Shuffle { order, n, rotation: 0 }
    }

    /// The index of the `i`-th replica to try.
    fn at(&self, i: usize) -> usize {
        if self.n > Shuffle::MAX {
            (self.rotation + i) % self.n
        } else {
            usize::from(self.order[i])
        }
    }
}

impl Session {
    /// Picks the node for a request from plan position `from` on (see
    /// [`Plan::pick`]) in `state`, and returns the position it was found
    /// at. A node without a connection is reported down and refilled.
    pub(super) fn pick(
        &self,
        state: &ClusterState,
        seed: usize,
        from: usize,
        route: Option<Route<'_>>,
        penalty: Option<Penalty>,
        ask: Ask<'_>,
    ) -> Result<(usize, Arc<NodePool>, Connection), ExecutionError> {
        let token = route.map(|r| r.token);
        // A table with tablets: the tablet's replicas when it is known, else
        // none (the ring says nothing about tablets; the answer will).
        let tablets = route.and_then(|r| self.inner.tablets.table(r.keyspace, r.table));
        let tablet = match (&tablets, token) {
            (Some(t), Some(token)) => t.find(token.value()).map(|t| &t.replicas[..]),
            _ => None,
        };
        let table = match (route, &state.routing, &tablets) {
            (Some(route), Some(routing), None) => routing.table(route.keyspace),
            _ => None,
        };
        let (replicas, pool_of, host_ids): (&[NodeIndex], &[Option<usize>], &[Uuid]) =
            match (&table, &state.routing, token) {
                (Some(table), Some(routing), Some(token)) => (table.replicas(token), &routing.pool_of, &[]),
                (None, Some(routing), Some(_)) if tablet.is_some() => (&[], &routing.pool_of, &routing.host_ids),
                _ => (&[], &[], &[]),
            };
        let tablet = tablet.unwrap_or_default();
        let lwt = route.is_some_and(|r| r.lwt);
        let plan = Plan {
            nodes: &state.nodes,
            rack: state.rack,
            local: state.local,
            replicas,
            tablet,
            host_ids,
            pool_of,
            token,
            seed,
            lwt,
            penalty,
        };
        if let Some(policy) = ask.policy {
            let request = Session::routing_info(route, ask.consistency, ask.idempotent, seed);
            return self.pick_by_policy(policy, &request, state, &plan, from);
        }
        match plan.pick(from, |node| self.node_unavailable(node)) {
            Some((position, node, conn)) => Ok((position, node.clone(), conn)),
            None => Err(ExecutionError::NoConnection),
        }
    }

    /// The tablet version block of a request for `route` under tablets
    /// routing v2: a block of the version of its tablet as last learned
    /// (version 0 when unknown, or for a statement without a route), the
    /// block's index drawn from the request's seed, so that successive
    /// requests compare every part of the version (docs/protocol.md §1.7).
    pub(super) fn tablet_version_block(&self, route: Option<Route<'_>>, seed: usize) -> Option<u8> {
        let version = route
            .and_then(|r| self.inner.tablets.table(r.keyspace, r.table)?.find(r.token.value())?.version)
            .unwrap_or(0);
        Some(shardwise_protocol::tablets::version_block(version, (seed % 16) as u8))
    }

    /// What a policy is told of a request ([`RoutingInfo`]).
    pub(super) fn routing_info<'r>(
        route: Option<Route<'r>>,
        consistency: Consistency,
        idempotent: bool,
        seed: usize,
    ) -> RoutingInfo<'r> {
        RoutingInfo {
            table: route.map(|r| (r.keyspace, r.table)),
            token: route.map(|r| r.token),
            lwt: route.is_some_and(|r| r.lwt),
            consistency,
            idempotent,
            seed,
        }
    }

    /// Tells `policy` how an attempt it planned ended at `node`: answered
    /// (`error` none) or failed, after `latency`.
    pub(super) fn tell_policy(
        &self,
        policy: &dyn LoadBalancingPolicy,
        request: &RoutingInfo<'_>,
        node: &Arc<NodePool>,
        latency: std::time::Duration,
        error: Option<&ExecutionError>,
    ) {
        self.with_state(|state| {
            // A pool retired since the attempt began is no longer in the
            // snapshot: not local.
            let index = state.nodes.iter().position(|p| Arc::ptr_eq(p, node));
            let view = index.and_then(|i| state.node_view(i)).unwrap_or_else(|| NodeView {
                addr: node.addr,
                info: state.infos.iter().find(|i| i.address == node.addr),
                up: node.is_up(),
                local: false,
            });
            match error {
                None => policy.on_request_success(request, latency, view),
                Some(e) => policy.on_request_failure(request, latency, view, e),
            }
        });
    }

    /// [`Session::pick`] under the application's policy: the target at
    /// position `from` of the plan it writes, or after it, that connects.
    /// A plan without targets fails with [`ExecutionError::EmptyPlan`]
    /// (naming the policy: a single target that the cluster does not have,
    /// say); one whose targets from `from` on have no connection, with
    /// [`ExecutionError::PlanUnavailable`] naming the last of them (no other
    /// node is tried: the policy chose these).
    fn pick_by_policy(
        &self,
        policy: &dyn LoadBalancingPolicy,
        request: &RoutingInfo<'_>,
        state: &ClusterState,
        plan: &Plan<'_, Arc<NodePool>>,
        from: usize,
    ) -> Result<(usize, Arc<NodePool>, Connection), ExecutionError> {
        let mut targets = Vec::new();
        policy.plan(request, &ClusterView::new(&PolicyView { state, plan }), &mut targets);
        if targets.is_empty() {
            return Err(ExecutionError::EmptyPlan { policy: format!("{policy:?}").into() });
        }
        let mut unavailable = None;
        for (position, target) in targets.iter().enumerate().skip(from) {
            let Some(node) = state.nodes.get(target.node) else { continue };
            let conn = match target.shard {
                Some(shard) => node.connection_on_shard(shard, request.seed),
                None => node.connection_for(request.token, request.seed),
            };
            match conn {
                Some(conn) => return Ok((position, node.clone(), conn)),
                None => {
                    self.node_unavailable(node);
                    unavailable = Some(node.addr);
                }
            }
        }
        match unavailable {
            Some(last) => Err(ExecutionError::PlanUnavailable { last }),
            None => Err(ExecutionError::NoConnection),
        }
    }

    /// The latency penalty of a request's plan under `config`: the best
    /// average among the snapshot's nodes, now.
    pub(super) fn penalty(state: &ClusterState, config: Option<LatencyAwareness>) -> Option<Penalty> {
        Penalty::over(config?, state.nodes.iter().map(|n| n.average.get()), now_ns())
    }

    /// The nodes (in token-aware order) a request for `token` in `keyspace`
    /// would try first: its replicas. Empty without topology or replication
    /// information.
    pub fn replicas(&self, keyspace: &str, token: Token) -> Vec<SocketAddr> {
        let state = self.state();
        let Some(routing) = &state.routing else { return Vec::new() };
        let Some(table) = routing.table(keyspace) else { return Vec::new() };
        table
            .replicas(token)
            .iter()
            .filter_map(|r| routing.pool_of.get(*r).copied().flatten())
            .map(|p| state.nodes[p].addr)
            .collect()
    }
}

impl Session {
    /// The replicas of `token` in `keyspace.table`, in the order a
    /// token-aware request tries them (the official
    /// `ClusterState::get_token_endpoints`): for a table with tablets,
    /// those of the tablet holding the token, each with the tablet's shard;
    /// for one without, the ring's replicas, each with the shard its
    /// sharding gives the token. A table with tablets whose tablet is not
    /// learned yet (tablets are learned from the answers) is routed as
    /// requests route it: by the ring. Empty without topology or
    /// replication information.
    pub fn token_endpoints(&self, keyspace: &str, table: &str, token: Token) -> Vec<Replica> {
        let state = self.state();
        let host_id = |addr| state.infos.iter().find(|i| i.address == addr).map(|i| i.host_id);
        let tablets = self.inner.tablets.table(keyspace, table);
        if let Some(tablet) = tablets.as_ref().and_then(|t| t.find(token.value())) {
            return tablet
                .replicas
                .iter()
                .filter_map(|&(host, shard)| {
                    let info = state.infos.iter().find(|i| i.host_id == host)?;
                    Some(Replica { addr: info.address, host_id: Some(host), shard: Some(shard) })
                })
                .collect();
        }
        let Some(routing) = &state.routing else { return Vec::new() };
        let Some(ring) = routing.table(keyspace) else { return Vec::new() };
        ring.replicas(token)
            .iter()
            .filter_map(|r| routing.pool_of.get(*r).copied().flatten())
            .map(|p| {
                let pool = &state.nodes[p];
                let shard = pool
                    .slots
                    .open_connections()
                    .iter()
                    .find_map(|c| c.sharding().map(|s| s.sharder().shard_of(token)));
                Replica { addr: pool.addr, host_id: host_id(pool.addr), shard }
            })
            .collect()
    }
}

/// What a load-balancing policy's [`ClusterView`] shows of one request:
/// the snapshot's nodes and the request's plan over them.
struct PolicyView<'a> {
    state: &'a ClusterState,
    plan: &'a Plan<'a, Arc<NodePool>>,
}

impl<'a> ClusterSource<'a> for PolicyView<'a> {
    fn node_count(&self) -> usize {
        self.state.nodes.len()
    }

    fn node(&self, index: usize) -> Option<NodeView<'a>> {
        let state: &'a ClusterState = self.state;
        state.node_view(index)
    }

    fn replicas(&self, out: &mut Vec<Target>) {
        self.plan.replicas(|node, shard| out.push(Target { node, shard }));
    }

    fn default_plan(&self, out: &mut Vec<Target>) {
        let mut from = 0;
        while let Some((position, node, conn)) = self.plan.pick(from, |_| {}) {
            let Some(index) = self.state.nodes.iter().position(|n| Arc::ptr_eq(n, node)) else { break };
            out.push(Target { node: index, shard: conn.sharding().map(|_| conn.shard()) });
            from = position + 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use std::num::NonZeroU16;
    use std::sync::Arc;

    use shardwise_protocol::sharding::Sharder;
    use shardwise_protocol::token::Token;

    use super::{Candidate, Plan};
    use crate::cluster::{ReplicaTable, ReplicationStrategy, RingNode, TokenRing};
    use crate::latency::{Average, LatencyAwareness, Penalty};
    use crate::pool::pick_connection;
    use crate::pool::slots::{PoolConnection, Slots};

    /// A connection that is never closed nor busy, on `shard` of a node
    /// sharded by `sharder`.
    #[derive(Clone, Debug)]
    struct Conn {
        shard: Option<(u16, u16)>,
        sharder: Option<Sharder>,
    }

    impl PoolConnection for Conn {
        fn is_closed(&self) -> bool {
            false
        }
        fn in_flight(&self) -> usize {
            0
        }
        fn shard(&self) -> Option<(u16, u16)> {
            self.shard
        }
    }

    /// A node with real slots, picking its connection as a pool does.
    struct Node {
        id: usize,
        up: bool,
        slots: Slots<Conn>,
        average: Option<Average>,
    }

    impl Node {
        /// An up, unsharded node with one connection.
        fn new(id: usize) -> Node {
            let slots = Slots::new(1);
            let _ = slots.install(Conn { shard: None, sharder: None });
            Node { id, up: true, slots, average: None }
        }
        fn down(id: usize) -> Node {
            Node { up: false, ..Node::new(id) }
        }
        /// An up node that has no open connection.
        fn unconnected(id: usize) -> Node {
            Node { id, up: true, slots: Slots::new(1), average: None }
        }
        /// An up node sharded by `sharder`, with a connection on each of `shards`.
        fn sharded(id: usize, sharder: Sharder, shards: &[u16]) -> Node {
            let slots = Slots::new(1);
            let nr = sharder.nr_shards().get();
            for &s in shards {
                let _ = slots.install(Conn { shard: Some((s, nr)), sharder: Some(sharder) });
            }
            Node { id, up: true, slots, average: None }
        }
    }

    impl Candidate for Node {
        type Conn = Conn;
        fn is_up(&self) -> bool {
            self.up
        }
        fn average(&self) -> Option<Average> {
            self.average
        }
        fn connection_for(&self, token: Option<Token>, seed: usize) -> Option<Conn> {
            pick_connection(&self.slots, token, seed, crate::pool::slots::Lane::Shared, |c, token| {
                c.sharder.map_or(0, |s| s.shard_of(token))
            })
        }
        fn connection_on_shard(&self, shard: u16, seed: usize) -> Option<Conn> {
            self.slots.pick_shard(|_| shard).or_else(|| self.slots.pick_any(seed))
        }
    }

    const IDENTITY: &[Option<usize>] = &[Some(0), Some(1), Some(2), Some(3), Some(4), Some(5)];

    fn plan<'a>(nodes: &'a [Node], local: usize, replicas: &'a [usize], seed: usize) -> Plan<'a, Node> {
        Plan {
            nodes,
            rack: 0,
            local,
            replicas,
            tablet: &[],
            host_ids: &[],
            pool_of: &IDENTITY[..nodes.len()],
            token: None,
            seed,
            lwt: false,
            penalty: None,
        }
    }

    /// The ids of the nodes successive attempts try: each from the position
    /// after the previous one, as retries on the next node do.
    fn order(plan: &Plan<'_, Node>) -> Vec<usize> {
        let mut out = Vec::new();
        let mut from = 0;
        while let Some((at, node, _)) = plan.pick(from, |_| {}) {
            assert!(at >= from, "position {at} before {from}");
            out.push(node.id);
            from = at + 1;
        }
        out
    }

    #[test]
    fn replicas_first_then_every_node_round_robin() {
        // Ring node r owns token 100·r; the pools are listed in reverse.
        let ring = Arc::new(TokenRing::new(
            (0..4).map(|r| RingNode { datacenter: None, rack: None, tokens: vec![Token::new(100 * r)] }).collect(),
        ));
        let table = ReplicaTable::new(ring, ReplicationStrategy::Simple { rf: 2 });
        let replicas = table.replicas(Token::new(150));
        assert_eq!(replicas, &[2, 3]);
        let nodes: Vec<Node> = (0..4).rev().map(Node::new).collect();
        let pool_of = [Some(3), Some(2), Some(1), Some(0)];
        let with_seed = |seed| Plan {
            nodes: &nodes,
            rack: 0,
            local: 4,
            replicas,
            tablet: &[],
            host_ids: &[],
            pool_of: &pool_of,
            token: None,
            seed,
            lwt: false,
            penalty: None,
        };
        // The replicas (in an order the seed shuffles), then every node.
        for seed in 0..50 {
            let o = order(&with_seed(seed));
            assert_eq!(o.len(), 6, "seed {seed}: {o:?}");
            let mut first_two = o[..2].to_vec();
            first_two.sort();
            assert_eq!(first_two, [2, 3], "seed {seed}: the replicas first");
            let mut rest = o[2..].to_vec();
            rest.sort();
            assert_eq!(rest, [0, 1, 2, 3], "seed {seed}: then every node");
        }
        let firsts: std::collections::BTreeSet<usize> = (0..50).map(|seed| order(&with_seed(seed))[0]).collect();
        assert_eq!(firsts.len(), 2, "no replica takes every first attempt");
        // A lightweight transaction always starts at the primary replica.
        for seed in 0..4 {
            let lwt = Plan { lwt: true, ..with_seed(seed) };
            assert_eq!(order(&lwt)[..2], [2, 3], "seed {seed}");
        }
    }

    #[test]
    fn local_replicas_before_remote_ones_and_local_nodes_before_remote_ones() {
        let nodes: Vec<Node> = (0..4).map(Node::new).collect();
        // Nodes 0 and 1 are local; the primary replica (2) is remote.
        assert_eq!(order(&plan(&nodes, 2, &[2, 1], 0)), [1, 2, 0, 1, 2, 3]);
    }

    /// A tablet's replicas, named by host id, come first, each on its own
    /// shard (not the token's); then every node as usual.
    #[test]
    fn tablet_replicas_first_each_on_its_shard() {
        let sharder = Sharder::new(NonZeroU16::new(4).expect("shards"), 12).expect("sharder");
        let nodes: Vec<Node> = (0..3).map(|id| Node::sharded(id, sharder, &[0, 1, 2, 3])).collect();
        let host = |n: u128| uuid::Uuid::from_u128(n);
        // Ring nodes 0..3 are hosts 10, 11, 12; the tablet lives on host 12 shard 3, host 10 shard 1.
        let host_ids = [host(10), host(11), host(12)];
        let tablet = [(host(12), 3), (host(10), 1), (host(99), 0)];
        let token = Token::new(0);
        let p = Plan {
            nodes: &nodes,
            rack: 0,
            local: 3,
            replicas: &[],
            tablet: &tablet,
            host_ids: &host_ids,
            pool_of: &IDENTITY[..3],
            token: Some(token),
            seed: 0,
            lwt: false,
            penalty: None,
        };
        let (at, node, conn) = p.pick(0, |_| {}).expect("a replica");
        assert_eq!((at, node.id, conn.shard.map(|s| s.0)), (0, 2, Some(3)));
        let (at, node, conn) = p.pick(1, |_| {}).expect("the second replica");
        assert_eq!((at, node.id, conn.shard.map(|s| s.0)), (1, 0, Some(1)));
        // An unknown host is passed over; then every node, on the token's shard.
        assert_eq!(order(&p), [2, 0, 0, 1, 2]);
        // Another seed may start elsewhere; an LWT always at the tablet's first replica.
        let firsts: std::collections::BTreeSet<usize> = (0..50).map(|seed| order(&Plan { seed, ..p })[0]).collect();
        assert_eq!(firsts, [0, 2].into_iter().collect(), "both known replicas lead some plans");
        for seed in 0..20 {
            assert_eq!(order(&Plan { seed, lwt: true, ..p })[0], 2);
        }
        let (_, _, conn) = p.pick(2, |_| {}).expect("a node");
        assert_eq!(conn.shard.map(|s| s.0), Some(sharder.shard_of(token)));
    }

    #[test]
    fn replicas_are_shuffled_evenly_and_every_order_occurs() {
        let mut counts = std::collections::BTreeMap::new();
        for seed in 0..6000 {
            let s = super::Shuffle::new(3, seed);
            *counts.entry([s.at(0), s.at(1), s.at(2)]).or_insert(0) += 1;
        }
        assert_eq!(counts.len(), 6, "every order of 3 replicas: {counts:?}");
        assert!(counts.values().all(|&c| (800..1200).contains(&c)), "evenly: {counts:?}");
        let s = super::Shuffle::new(5, 42);
        let mut seen: Vec<usize> = (0..5).map(|i| s.at(i)).collect();
        seen.sort();
        assert_eq!(seen, [0, 1, 2, 3, 4], "a permutation");
        let big = super::Shuffle::new(40, 7);
        let mut seen: Vec<usize> = (0..40).map(|i| big.at(i)).collect();
        seen.sort();
        assert_eq!(seen, (0..40).collect::<Vec<_>>(), "many replicas: rotated, still each once");
    }

    #[test]
    fn ignored_replicas_are_passed_over() {
        let nodes: Vec<Node> = (0..2).map(Node::new).collect();
        // Ring node 1 has no pool: the distance policy ignores it.
        let pool_of = [Some(0), None, Some(1)];
        let p = Plan {
            nodes: &nodes,
            rack: 0,
            local: 2,
            replicas: &[1, 2],
            tablet: &[],
            host_ids: &[],
            pool_of: &pool_of,
            token: None,
            seed: 0,
            lwt: false,
            penalty: None,
        };
        assert_eq!(order(&p), [1, 0, 1]);
    }

    #[test]
    fn down_nodes_come_after_every_node_that_is_up() {
        let nodes = [Node::down(0), Node::new(1), Node::new(2)];
        // Positions in each pass: 0 replica 0 (down), 1 replica 1, then nodes 0 (down), 1, 2.
        let p = plan(&nodes, 3, &[0, 1], 0);
        let (at, node, _) = p.pick(0, |_| {}).expect("an up node");
        assert_eq!((at, node.id), (1, 1));
        assert_eq!(order(&p), [1, 1, 2, 0, 0], "the down node last, as a replica and as a node");
        assert!(p.pick(3 * 5, |_| {}).is_none(), "past the end of the plan");
    }

    #[test]
    fn down_nodes_are_tried_in_plan_order_when_none_is_up() {
        let nodes = [Node::down(0), Node::down(1), Node::down(2)];
        assert_eq!(order(&plan(&nodes, 3, &[2], 1)), [2, 1, 2, 0]);
    }

    #[test]
    fn without_a_route_local_nodes_then_remote_ones_round_robin() {
        let nodes: Vec<Node> = (0..5).map(Node::new).collect();
        // Three local nodes from 4 % 3 = 1, then two remote ones from 4 % 2 = 0.
        assert_eq!(order(&plan(&nodes, 3, &[], 4)), [1, 2, 0, 3, 4]);
        assert_eq!(order(&plan(&nodes, 3, &[], 0)), [0, 1, 2, 3, 4]);
    }

    #[test]
    fn a_node_without_connection_is_reported_and_the_plan_goes_on() {
        let nodes = [Node::unconnected(0), Node::new(1)];
        let p = plan(&nodes, 2, &[0], 0);
        let mut reported = Vec::new();
        let (at, node, _) = p.pick(0, |n| reported.push(n.id)).expect("node 1");
        assert_eq!((at, node.id), (2, 1), "replica 0, then node 0 again, then node 1");
        assert_eq!(reported, [0, 0]);
        let nothing = [Node::unconnected(0)];
        let mut reported = Vec::new();
        assert!(plan(&nothing, 1, &[], 0).pick(0, |n| reported.push(n.id)).is_none());
        assert_eq!(reported, [0], "once: it is up, so only the first pass considers it");
    }

    #[test]
    fn the_local_rack_then_the_local_datacenter_then_remote_nodes() {
        let nodes: Vec<Node> = (0..6).map(Node::new).collect();
        // Nodes 0 and 1 in the local rack, 2 and 3 elsewhere in the local
        // datacenter, 4 and 5 remote; replicas 5, 3 and 1.
        let p = |seed| Plan { rack: 2, ..plan(&nodes, 4, &[5, 3, 1], seed) };
        for seed in 0..20 {
            let o = order(&p(seed));
            assert_eq!(o[..3], [1, 3, 5], "seed {seed}: each tier's replicas in turn");
            let (mut rack, mut dc, mut remote) = (o[3..5].to_vec(), o[5..7].to_vec(), o[7..].to_vec());
            rack.sort();
            dc.sort();
            remote.sort();
            assert_eq!((rack, dc, remote), (vec![0, 1], vec![2, 3], vec![4, 5]), "seed {seed}: then each tier's nodes");
        }
        // Two replicas in the rack: shuffled between themselves, both before the others.
        let firsts: std::collections::BTreeSet<usize> =
            (0..40).map(|seed| order(&Plan { rack: 2, ..plan(&nodes, 4, &[2, 0, 1], seed) })[0]).collect();
        assert_eq!(firsts, [0, 1].into_iter().collect());
    }

    fn measured(mean_ms: u64, at_ns: u64) -> Option<Average> {
        Some(Average { mean_ns: (mean_ms * 1_000_000) as f64, at_ns, count: 100 })
    }

    #[test]
    fn slow_nodes_go_after_the_others_and_before_down_ones() {
        let now = 60_000_000_000;
        let mut nodes: Vec<Node> = (0..4).map(Node::new).collect();
        nodes[0].average = measured(10, now - 1_000_000);
        nodes[1].average = measured(1, now - 1_000_000);
        nodes[2].average = measured(3, now - 1_000_000);
        nodes[3].up = false;
        let averages = nodes.iter().map(|n| n.average);
        let penalty = Penalty::over(LatencyAwareness::default(), averages, now);
        let p = Plan { penalty, ..plan(&nodes, 4, &[0, 1], 0) };
        // Replica 1, node 1 (the fast ones), then the slow ones (0 and 2,
        // more than twice the best), replica 0 first; the down node last.
        assert_eq!(order(&p), [1, 1, 0, 0, 2, 3]);
        // Without latency awareness the plan is as before.
        assert_eq!(order(&plan(&nodes, 4, &[0, 1], 0)), [0, 1, 0, 1, 2, 3]);
        // A slow node whose numbers are older than the retry period is probed again.
        nodes[0].average = measured(10, now - 11_000_000_000);
        let penalty = Penalty::over(LatencyAwareness::default(), nodes.iter().map(|n| n.average), now);
        assert_eq!(order(&Plan { penalty, ..plan(&nodes, 4, &[0, 1], 0) }), [0, 1, 0, 1, 2, 3]);
    }

    #[test]
    fn the_connection_of_the_tokens_shard_is_taken() {
        let sharder = Sharder::new(NonZeroU16::new(4).expect("4"), 12).expect("sharder");
        // With 12 bits ignored, bits 51 and 50 of the biased token name the shard.
        let token_on = |s: i64| Token::new(i64::MIN + (s << 50));
        let full = [Node::sharded(0, sharder, &[0, 1, 2, 3])];
        for shard in 0..4u16 {
            let token = token_on(i64::from(shard));
            assert_eq!(sharder.shard_of(token), shard);
            let p = Plan { token: Some(token), ..plan(&full, 1, &[0], 0) };
            let (_, _, conn) = p.pick(0, |_| {}).expect("a connection");
            assert_eq!(conn.shard, Some((shard, 4)), "token {token:?}");
        }
        // A shard without connection: any other connection of the node.
        let partial = [Node::sharded(0, sharder, &[0, 1, 3])];
        let p = Plan { token: Some(token_on(2)), ..plan(&partial, 1, &[0], 0) };
        let (_, _, conn) = p.pick(0, |_| {}).expect("a connection");
        assert!(matches!(conn.shard, Some((0 | 1 | 3, 4))), "{:?}", conn.shard);
        // Fallback nodes (not replicas) are asked for the token's shard too.
        let p = Plan { token: Some(token_on(3)), ..plan(&full, 1, &[], 0) };
        let (_, _, conn) = p.pick(0, |_| {}).expect("a connection");
        assert_eq!(conn.shard, Some((3, 4)));
    }
}
