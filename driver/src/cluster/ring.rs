//! The token ring and replica placement (SimpleStrategy,
//! NetworkTopologyStrategy with racks, Everywhere, Local), computed exactly
//! as the servers place data, and cached per ring position so that routing
//! a request is a binary search plus an index.

use std::collections::HashSet;
use std::sync::{Arc, OnceLock};

use shardwise_protocol::token::Token;

/// Index of a node in the topology's node list.
pub type NodeIndex = usize;

/// A node as the ring sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RingNode {
    /// Datacenter.
    pub datacenter: Option<String>,
    /// Rack.
    pub rack: Option<String>,
    /// Tokens owned.
    pub tokens: Vec<Token>,
}

/// How a keyspace places replicas.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ReplicationStrategy {
    /// `SimpleStrategy`: the next `rf` distinct nodes on the ring.
    Simple {
        /// Replication factor.
        rf: usize,
    },
    /// `NetworkTopologyStrategy`: per datacenter, rack-aware.
    NetworkTopology {
        /// Replication factor per datacenter.
        datacenters: Vec<(String, usize)>,
    },
    /// Every node owning tokens (Scylla's `EverywhereStrategy`).
    Everywhere,
    /// Node-local data (system keyspaces): not routable.
    Local,
}

impl ReplicationStrategy {
    /// Parses `system_schema.keyspaces.replication`. Unknown strategies fall
    /// back to SimpleStrategy with RF 1 (the primary owner), as the
    /// official driver does.
    pub fn from_options<'a>(options: impl IntoIterator<Item = (&'a str, &'a str)>) -> Self {
        let options: Vec<(&str, &str)> = options.into_iter().collect();
        let class = options.iter().find(|(k, _)| *k == "class").map_or("", |(_, v)| *v);
        let class = class.rsplit('.').next().unwrap_or(class);
        let rf = |v: &str| v.split('/').next().and_then(|n| n.trim().parse::<usize>().ok()).unwrap_or(0);
        match class {
            "SimpleStrategy" => ReplicationStrategy::Simple {
                rf: options.iter().find(|(k, _)| *k == "replication_factor").map_or(1, |(_, v)| rf(v)),
            },
            "NetworkTopologyStrategy" => ReplicationStrategy::NetworkTopology {
                datacenters: options
                    .iter()
                    .filter(|(k, _)| *k != "class" && *k != "replication_factor")
                    .map(|(k, v)| ((*k).to_owned(), rf(v)))
                    .collect(),
            },
            "EverywhereStrategy" => ReplicationStrategy::Everywhere,
            "LocalStrategy" => ReplicationStrategy::Local,
            _ => ReplicationStrategy::Simple { rf: 1 },
        }
    }
}

/// The ring: every (token, owner) pair sorted by token.
#[derive(Debug)]
pub struct TokenRing {
    nodes: Vec<RingNode>,
    entries: Vec<(Token, NodeIndex)>,
}

/// The replicas of every ring position under one strategy, each computed on
/// first use and then read without locking: routing a token is a binary
/// search plus an index.
#[derive(Debug)]
pub struct ReplicaTable {
    ring: Arc<TokenRing>,
    strategy: ReplicationStrategy,
    positions: Box<[OnceLock<Box<[NodeIndex]>>]>,
}

impl ReplicaTable {
    /// The table of `strategy` on `ring`.
    pub fn new(ring: Arc<TokenRing>, strategy: ReplicationStrategy) -> Self {
        let positions = (0..ring.entries.len()).map(|_| OnceLock::new()).collect();
        ReplicaTable { ring, strategy, positions }
    }

    /// Replicas of `token`, primary first.
    pub fn replicas(&self, token: Token) -> &[NodeIndex] {
        if self.positions.is_empty() {
            return &[];
        }
        let position = self.ring.position(token);
        self.positions[position].get_or_init(|| self.ring.compute(position, &self.strategy).into())
    }

    /// The strategy.
    pub fn strategy(&self) -> &ReplicationStrategy {
        &self.strategy
    }

    /// The ring.
    pub fn ring(&self) -> &Arc<TokenRing> {
        &self.ring
    }
}

impl TokenRing {
    /// A ring of `nodes`.
    pub fn new(nodes: Vec<RingNode>) -> Self {
        let mut entries: Vec<(Token, NodeIndex)> =
            nodes.iter().enumerate().flat_map(|(i, n)| n.tokens.iter().map(move |t| (*t, i))).collect();
        entries.sort_unstable();
        TokenRing { nodes, entries }
    }

    /// The nodes.
    pub fn nodes(&self) -> &[RingNode] {
        &self.nodes
    }

    /// Position of the first ring entry with a token ≥ `token` (wrapping).
    pub fn position(&self, token: Token) -> usize {
        let p = self.entries.partition_point(|(t, _)| *t < token);
        if p == self.entries.len() {
            0
        } else {
            p
        }
    }

    /// The primary owner of `token`.
    pub fn primary(&self, token: Token) -> Option<NodeIndex> {
        self.entries.get(self.position(token)).map(|(_, n)| *n)
    }

    fn walk(&self, position: usize) -> impl Iterator<Item = NodeIndex> + '_ {
        let n = self.entries.len();
        (0..n).map(move |i| self.entries[(position + i) % n].1)
    }

    fn compute(&self, position: usize, strategy: &ReplicationStrategy) -> Vec<NodeIndex> {
        match strategy {
            ReplicationStrategy::Local => Vec::new(),
            ReplicationStrategy::Simple { rf } => {
                // `rf` comes from the server: never more replicas than nodes.
                let mut out = Vec::with_capacity((*rf).min(self.nodes.len()));
                for node in self.walk(position) {
                    if out.len() == *rf {
                        break;
                    }
                    if !out.contains(&node) {
                        out.push(node);
                    }
                }
                out
            }
            ReplicationStrategy::Everywhere => {
                let mut out = Vec::new();
                for node in self.walk(position) {
                    if !out.contains(&node) {
                        out.push(node);
                    }
                }
                out
            }
            ReplicationStrategy::NetworkTopology { datacenters } => self.nts(position, datacenters),
        }
    }

    /// Cassandra's rack-aware placement (`NetworkTopologyStrategy`): one
    /// global walk, each node offered to its datacenter. A node on a rack
    /// not seen yet is taken; on a seen rack it is taken while rack repeats
    /// remain (`rf − racks`), else set aside; once every rack of the
    /// datacenter is seen, the set-aside nodes are taken in walk order.
    fn nts(&self, position: usize, datacenters: &[(String, usize)]) -> Vec<NodeIndex> {
        struct Dc<'a> {
            name: &'a str,
            left: usize,
            rack_repeats_left: isize,
            racks: usize,
            seen_racks: HashSet<Option<&'a str>>,
            skipped: Vec<NodeIndex>,
        }
        let mut dcs: Vec<Dc<'_>> = datacenters
            .iter()
            .filter(|(_, rf)| *rf > 0)
            .map(|(name, rf)| {
                let members: Vec<&RingNode> = self
                    .nodes
                    .iter()
                    .filter(|n| n.datacenter.as_deref() == Some(name.as_str()) && !n.tokens.is_empty())
                    .collect();
                let racks: HashSet<Option<&str>> = members.iter().map(|n| n.rack.as_deref()).collect();
                Dc {
                    name,
                    left: (*rf).min(members.len()),
                    // `rf` comes from the server and may exceed `isize`.
                    rack_repeats_left: isize::try_from(*rf).unwrap_or(isize::MAX).saturating_sub(racks.len() as isize),
                    racks: racks.len(),
                    seen_racks: HashSet::new(),
                    skipped: Vec::new(),
                }
            })
            .collect();
        let mut out = Vec::new();
        for node in self.walk(position) {
            if dcs.iter().all(|d| d.left == 0) {
                break;
            }
            if out.contains(&node) {
                continue;
            }
            let ring_node = &self.nodes[node];
            let Some(dc) = dcs.iter_mut().find(|d| Some(d.name) == ring_node.datacenter.as_deref()) else {
                continue;
            };
            if dc.left == 0 || dc.skipped.contains(&node) {
                continue;
            }
            let rack = ring_node.rack.as_deref();
            if dc.seen_racks.insert(rack) {
                out.push(node);
                dc.left -= 1;
                if dc.seen_racks.len() == dc.racks {
                    for skipped in std::mem::take(&mut dc.skipped) {
                        if dc.left == 0 {
                            break;
                        }
                        out.push(skipped);
                        dc.left -= 1;
                    }
                }
            } else if dc.rack_repeats_left > 0 {
                dc.rack_repeats_left -= 1;
                out.push(node);
                dc.left -= 1;
            } else {
                dc.skipped.push(node);
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(dc: &str, rack: &str, tokens: &[i64]) -> RingNode {
        RingNode {
            datacenter: Some(dc.into()),
            rack: Some(rack.into()),
            tokens: tokens.iter().map(|t| Token::from(*t)).collect(),
        }
    }

    #[test]
    fn parses_replication_options() {
        assert_eq!(
            ReplicationStrategy::from_options([
                ("class", "org.apache.cassandra.locator.SimpleStrategy"),
                ("replication_factor", "3")
            ]),
            ReplicationStrategy::Simple { rf: 3 }
        );
        assert_eq!(
            ReplicationStrategy::from_options([("class", "NetworkTopologyStrategy"), ("dc1", "2"), ("dc2", "3/1")]),
            ReplicationStrategy::NetworkTopology { datacenters: vec![("dc1".into(), 2), ("dc2".into(), 3)] }
        );
        assert_eq!(ReplicationStrategy::from_options([("class", "LocalStrategy")]), ReplicationStrategy::Local);
        assert_eq!(
            ReplicationStrategy::from_options([("class", "com.example.Mine")]),
            ReplicationStrategy::Simple { rf: 1 }
        );
    }

    #[test]
    fn simple_strategy_walks_distinct_nodes_from_the_first_token_at_or_after() {
        let ring = Arc::new(TokenRing::new(vec![
            node("dc", "r", &[0, 300]),
            node("dc", "r", &[100]),
            node("dc", "r", &[200]),
        ]));
        let rf2 = ReplicaTable::new(ring.clone(), ReplicationStrategy::Simple { rf: 2 });
        assert_eq!(rf2.replicas(Token::from(50)), &[1, 2]);
        assert_eq!(rf2.replicas(Token::from(100)), &[1, 2], "a token equal to a ring token belongs to it");
        assert_eq!(rf2.replicas(Token::from(250)), &[0, 1]);
        assert_eq!(rf2.replicas(Token::from(301)), &[0, 1], "wraps around");
        let rf9 = ReplicaTable::new(ring.clone(), ReplicationStrategy::Simple { rf: 9 });
        assert_eq!(rf9.replicas(Token::from(1)), &[1, 2, 0]);
        assert_eq!(ring.primary(Token::from(-5)), Some(0));
    }

    #[test]
    fn network_topology_prefers_new_racks_then_fills() {
        // dc1: racks a, a, b; dc2: one node.
        let ring = Arc::new(TokenRing::new(vec![
            node("dc1", "a", &[0]),
            node("dc1", "a", &[10]),
            node("dc1", "b", &[20]),
            node("dc2", "x", &[15]),
        ]));
        let table = |dcs: &[(&str, usize)]| {
            let datacenters = dcs.iter().map(|(d, rf)| ((*d).to_owned(), *rf)).collect();
            ReplicaTable::new(ring.clone(), ReplicationStrategy::NetworkTopology { datacenters })
        };
        // Walk from 0: n0(dc1,a) n1(dc1,a: rack seen, no repeats left -> set aside) n3(dc2) n2(dc1,b).
        assert_eq!(table(&[("dc1", 2), ("dc2", 1)]).replicas(Token::from(0)), &[0, 3, 2]);
        // RF 3 in dc1 with 2 racks: one repeat allowed.
        assert_eq!(table(&[("dc1", 3)]).replicas(Token::from(0)), &[0, 1, 2]);
        // From 5: n1(a) n3(dc2, ignored) n2(b: all racks seen) -> dc1 done at RF 2.
        assert_eq!(table(&[("dc1", 2)]).replicas(Token::from(5)), &[1, 2]);
        // A datacenter that does not exist contributes nothing.
        assert!(table(&[("dcx", 3)]).replicas(Token::from(0)).is_empty());
    }
}
