//! The query plan: in which order a request tries the nodes (the token's
//! replicas first, local before remote, then every node round-robin, nodes
//! that are down last) and which connection it takes from each (the one
//! serving the token's shard).
//!
//! The order is a pure function over the snapshot's slices ([`Plan`]),
//! generic over the node ([`Candidate`]), so that it is tested here without
//! sockets; [`Session::pick`] applies it to the current snapshot.

use std::net::SocketAddr;
use std::sync::Arc;

use shardwise_protocol::token::Token;

use super::snapshot::ClusterState;
use super::Session;
use crate::cluster::ring::NodeIndex;
use crate::connection::Connection;
use crate::error::ExecutionError;
use crate::pool::NodePool;

/// What a plan asks of a node.
pub(super) trait Candidate {
    /// A connection to the node.
    type Conn;
    /// Whether the node counts as up.
    fn is_up(&self) -> bool;
    /// A connection to the node: to the shard owning `token` when it has
    /// one, else any (`seed` rotates between equally loaded ones).
    fn connection_for(&self, token: Option<Token>, seed: usize) -> Option<Self::Conn>;
}

impl Candidate for Arc<NodePool> {
    type Conn = Connection;
    fn is_up(&self) -> bool {
        NodePool::is_up(self)
    }
    fn connection_for(&self, token: Option<Token>, seed: usize) -> Option<Connection> {
        NodePool::connection_for(self, token, seed)
    }
}

/// One request's plan over a snapshot.
pub(super) struct Plan<'a, N> {
    /// The nodes with pools, local ones first.
    pub(super) nodes: &'a [N],
    /// How many of `nodes` are local.
    pub(super) local: usize,
    /// The token's replicas (ring node indices, primary first); empty when
    /// the request is not routed by token.
    pub(super) replicas: &'a [NodeIndex],
    /// The index in `nodes` of each ring node; `None` for an ignored one.
    pub(super) pool_of: &'a [Option<usize>],
    /// The request's token, for the shard.
    pub(super) token: Option<Token>,
    /// Rotates the replicas and the nodes, so that no node takes every
    /// first attempt.
    pub(super) seed: usize,
}

impl<'a, N: Candidate> Plan<'a, N> {
    /// The node and connection at plan position `from` or after, and the
    /// position it was found at. The plan: the token's local replicas, then
    /// its remote ones (each rotated by `seed`), then every local node and
    /// every remote node round-robin. Nodes that are down are skipped; only
    /// when the whole plan has none up are they tried (a DOWN event may be
    /// stale). A node without a connection is passed to `unavailable` and
    /// skipped. Allocates nothing.
    pub(super) fn pick(&self, from: usize, mut unavailable: impl FnMut(&N)) -> Option<(usize, &'a N, N::Conn)> {
        let (nodes, local, seed, token) = (self.nodes, self.local, self.seed, self.token);
        for include_down in [false, true] {
            let mut position = 0;
            let mut visit = |node: &N| -> Option<(usize, N::Conn)> {
                let here = position;
                position += 1;
                if here < from || (!include_down && !node.is_up()) {
                    return None;
                }
                match node.connection_for(token, seed) {
                    Some(c) => Some((here, c)),
                    None => {
                        unavailable(node);
                        None
                    }
                }
            };
            let replicas = self.replicas;
            let n = replicas.len();
            for want_local in [true, false] {
                for i in 0..n {
                    let Some(p) = self.pool_of.get(replicas[(seed + i) % n]).copied().flatten() else {
                        continue;
                    };
                    if (p < local) != want_local {
                        continue;
                    }
                    let node = &nodes[p];
                    if let Some((here, c)) = visit(node) {
                        return Some((here, node, c));
                    }
                }
            }
            for group in [&nodes[..local], &nodes[local..]] {
                let n = group.len();
                for i in 0..n {
                    let node = &group[(seed + i) % n];
                    if let Some((here, c)) = visit(node) {
                        return Some((here, node, c));
                    }
                }
            }
        }
        None
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
        route: Option<(&str, Token)>,
    ) -> Result<(usize, Arc<NodePool>, Connection), ExecutionError> {
        let table = match (route, &state.routing) {
            (Some((keyspace, _)), Some(routing)) => routing.table(keyspace),
            _ => None,
        };
        let token = route.map(|(_, t)| t);
        let (replicas, pool_of): (&[NodeIndex], &[Option<usize>]) = match (&table, &state.routing, token) {
            (Some(table), Some(routing), Some(token)) => (table.replicas(token), &routing.pool_of),
            _ => (&[], &[]),
        };
        let plan = Plan { nodes: &state.nodes, local: state.local, replicas, pool_of, token, seed };
        match plan.pick(from, |node| self.node_unavailable(node)) {
            Some((position, node, conn)) => Ok((position, node.clone(), conn)),
            None => Err(ExecutionError::NoConnection),
        }
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

#[cfg(test)]
mod tests {
    use std::num::NonZeroU16;
    use std::sync::Arc;

    use shardwise_protocol::sharding::Sharder;
    use shardwise_protocol::token::Token;

    use super::{Candidate, Plan};
    use crate::cluster::{ReplicaTable, ReplicationStrategy, RingNode, TokenRing};
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
    }

    impl Node {
        /// An up, unsharded node with one connection.
        fn new(id: usize) -> Node {
            let slots = Slots::new(1);
            let _ = slots.install(Conn { shard: None, sharder: None });
            Node { id, up: true, slots }
        }
        fn down(id: usize) -> Node {
            Node { up: false, ..Node::new(id) }
        }
        /// An up node that has no open connection.
        fn unconnected(id: usize) -> Node {
            Node { id, up: true, slots: Slots::new(1) }
        }
        /// An up node sharded by `sharder`, with a connection on each of `shards`.
        fn sharded(id: usize, sharder: Sharder, shards: &[u16]) -> Node {
            let slots = Slots::new(1);
            let nr = sharder.nr_shards().get();
            for &s in shards {
                let _ = slots.install(Conn { shard: Some((s, nr)), sharder: Some(sharder) });
            }
            Node { id, up: true, slots }
        }
    }

    impl Candidate for Node {
        type Conn = Conn;
        fn is_up(&self) -> bool {
            self.up
        }
        fn connection_for(&self, token: Option<Token>, seed: usize) -> Option<Conn> {
            pick_connection(&self.slots, token, seed, |c, token| c.sharder.map_or(0, |s| s.shard_of(token)))
        }
    }

    const IDENTITY: &[Option<usize>] = &[Some(0), Some(1), Some(2), Some(3), Some(4)];

    fn plan<'a>(nodes: &'a [Node], local: usize, replicas: &'a [usize], seed: usize) -> Plan<'a, Node> {
        Plan { nodes, local, replicas, pool_of: &IDENTITY[..nodes.len()], token: None, seed }
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
        let with_seed = |seed| Plan { nodes: &nodes, local: 4, replicas, pool_of: &pool_of, token: None, seed };
        assert_eq!(order(&with_seed(0)), [2, 3, 3, 2, 1, 0]);
        // The seed rotates the replicas (no replica takes every first
        // attempt) and the other nodes.
        assert_eq!(order(&with_seed(1)), [3, 2, 2, 1, 0, 3]);
    }

    #[test]
    fn local_replicas_before_remote_ones_and_local_nodes_before_remote_ones() {
        let nodes: Vec<Node> = (0..4).map(Node::new).collect();
        // Nodes 0 and 1 are local; the primary replica (2) is remote.
        assert_eq!(order(&plan(&nodes, 2, &[2, 1], 0)), [1, 2, 0, 1, 2, 3]);
    }

    #[test]
    fn ignored_replicas_are_passed_over() {
        let nodes: Vec<Node> = (0..2).map(Node::new).collect();
        // Ring node 1 has no pool: the distance policy ignores it.
        let pool_of = [Some(0), None, Some(1)];
        let p = Plan { nodes: &nodes, local: 2, replicas: &[1, 2], pool_of: &pool_of, token: None, seed: 0 };
        assert_eq!(order(&p), [1, 0, 1]);
    }

    #[test]
    fn down_nodes_are_skipped_while_any_node_is_up() {
        let nodes = [Node::down(0), Node::new(1), Node::new(2)];
        // Positions: 0 replica 0 (down), 1 replica 1, then nodes 0 (down), 1, 2.
        let p = plan(&nodes, 3, &[0, 1], 0);
        let (at, node, _) = p.pick(0, |_| {}).expect("an up node");
        assert_eq!((at, node.id), (1, 1));
        assert_eq!(order(&p), [1, 1, 2]);
        assert!(p.pick(5, |_| {}).is_none(), "past the end of the plan");
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
        assert_eq!(reported, [0, 0], "once per pass: up nodes, then all");
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
