//! Tablets: the token ranges of a table in a tablets keyspace and where
//! each lives (replica nodes and the shard on each), as Scylla keeps them.
//! Cassandra still stores every row; the front owns the map only to count
//! hits and misses against it and to tell a misrouted client where the
//! tablet is (`tablets-routing-v1`, `docs/protocol.md` §1.6).
//!
//! Like Scylla, a table has a power-of-two number of tablets of equal
//! width: with `2^k` tablets, tablet `i` holds the biased tokens
//! `[i · 2^(64-k), (i + 1) · 2^(64-k))` (the biased token is
//! `token + 2^63`, as for shards). The count is the keyspace's
//! `initial` option rounded up to a power of two, or one tablet per shard
//! of the cluster when the keyspace gives none. Placement (Scylla's load
//! balancer decides it; any placement is valid to a client): replica `j`
//! of tablet `i` is node `(i + j) mod nodes`, on shard
//! `(i / nodes + j) mod shards`, so that tablets spread over every node and
//! shard.
//!
//! Splits and merges ([`TabletMap::split`], [`TabletMap::merge`]) follow
//! Scylla's resize: a split halves every tablet in place (both halves keep
//! the parent's replicas); a merge joins each pair of sibling tablets
//! `(2i, 2i + 1)` into one. Scylla first migrates siblings onto the same
//! replicas and then merges; the front does both at once, the merged
//! tablet taking the replicas of the first sibling.

use shardwise_protocol::tablets::{TabletReplica, TabletRoute};

/// One tablet: its last token and its replicas as (node index, shard).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Tablet {
    /// The first token, exclusive (`i64::MIN` for the first tablet).
    pub first_token: i64,
    /// The last token, inclusive.
    pub last_token: i64,
    /// (node index in the front, shard), in replica order.
    pub replicas: Vec<(usize, u16)>,
}

/// A table's tablets, in token order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TabletMap {
    tablets: Vec<Tablet>,
}

impl TabletMap {
    /// `count` tablets (rounded up to a power of two, at least 1, at most
    /// 2^20) over `nodes` nodes of `shards` shards, `rf` replicas each
    /// (clamped to `1..=nodes`).
    pub fn new(count: usize, nodes: usize, shards: u16, rf: usize) -> TabletMap {
        let count = count.clamp(1, 1 << 20).next_power_of_two();
        let (nodes, shards) = (nodes.max(1), usize::from(shards.max(1)));
        let rf = rf.clamp(1, nodes);
        let bits = count.trailing_zeros();
        let tablets = (0..count)
            .map(|i| {
                let first_token = if i == 0 { i64::MIN } else { last_token(bits, i - 1) };
                let replicas = (0..rf).map(|j| ((i + j) % nodes, ((i / nodes + j) % shards) as u16)).collect();
                Tablet { first_token, last_token: last_token(bits, i), replicas }
            })
            .collect();
        TabletMap { tablets }
    }

    /// The tablets, in token order.
    pub fn tablets(&self) -> &[Tablet] {
        &self.tablets
    }

    /// The map after a split: every tablet halved, at most 2^20 tablets
    /// (`None` when already there).
    pub fn split(&self) -> Option<TabletMap> {
        let bits = self.tablets.len().trailing_zeros() + 1;
        if self.tablets.len() >= 1 << 20 {
            return None;
        }
        let tablets = self
            .tablets
            .iter()
            .enumerate()
            .flat_map(|(i, t)| {
                let middle = last_token(bits, 2 * i);
                [
                    Tablet { first_token: t.first_token, last_token: middle, replicas: t.replicas.clone() },
                    Tablet { first_token: middle, last_token: t.last_token, replicas: t.replicas.clone() },
                ]
            })
            .collect();
        Some(TabletMap { tablets })
    }

    /// The map after a merge: each pair of siblings joined, on the first
    /// one's replicas (`None` for a table of one tablet).
    pub fn merge(&self) -> Option<TabletMap> {
        if self.tablets.len() < 2 {
            return None;
        }
        let tablets = self
            .tablets
            .chunks(2)
            .map(|pair| {
                let last = pair.last().map_or(pair[0].last_token, |t| t.last_token);
                Tablet { first_token: pair[0].first_token, last_token: last, replicas: pair[0].replicas.clone() }
            })
            .collect();
        Some(TabletMap { tablets })
    }

    /// The tablet holding `token`.
    pub fn tablet_of(&self, token: i64) -> &Tablet {
        let i = self.tablets.partition_point(|t| t.last_token < token);
        // The last tablet ends at i64::MAX, so `i` is always in range.
        &self.tablets[i.min(self.tablets.len() - 1)]
    }
}

impl Tablet {
    /// Whether (node, shard) is one of its replicas.
    pub fn is_replica(&self, node: usize, shard: u16) -> bool {
        self.replicas.contains(&(node, shard))
    }

    /// The `tablets-routing-v1` payload for it; `host_id` names each node
    /// (`None`: a node without a host id makes no payload).
    pub fn route(&self, host_id: impl Fn(usize) -> Option<uuid::Uuid>) -> Option<TabletRoute> {
        let replicas = self
            .replicas
            .iter()
            .map(|&(node, shard)| Some(TabletReplica { host_id: host_id(node)?, shard }))
            .collect::<Option<Vec<_>>>()?;
        Some(TabletRoute { first_token: self.first_token, last_token: self.last_token, replicas, version: None })
    }

    /// The `tablets-routing-v2` payload for it: as ScyllaDB sends it for an
    /// eventually consistent table (`locator/tablets.cc`,
    /// `check_tablet_version`), the replicas sorted by (host id, shard) and
    /// the version hashed from that list.
    pub fn route_v2(&self, host_id: impl Fn(usize) -> Option<uuid::Uuid>) -> Option<TabletRoute> {
        let mut route = self.route(host_id)?;
        route.replicas.sort_by_key(|r| (r.host_id, r.shard));
        route.version = Some(version_of(&route.replicas));
        Some(route)
    }
}

/// The version of a tablet whose (sorted) replicas are `replicas`: a 64-bit
/// hash of the list. ScyllaDB hashes it with xxHash64; the front with
/// FNV-1a, which a client cannot tell apart (it only echoes the version).
pub fn version_of(replicas: &[TabletReplica]) -> u64 {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for r in replicas {
        for byte in r.host_id.as_bytes().iter().chain(&u32::from(r.shard).to_be_bytes()) {
            hash = (hash ^ u64::from(*byte)).wrapping_mul(0x0100_0000_01b3);
        }
    }
    hash
}

/// The last token of tablet `i` of `2^bits`.
fn last_token(bits: u32, i: usize) -> i64 {
    let biased = if i as u64 == (1u64 << bits).wrapping_sub(1) || bits == 0 {
        u64::MAX
    } else {
        ((i as u64 + 1) << (64 - bits)) - 1
    };
    biased.wrapping_sub(1 << 63) as i64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn equal_power_of_two_ranges_cover_the_ring() {
        let m = TabletMap::new(3, 2, 4, 2);
        let t = m.tablets();
        assert_eq!(t.len(), 4, "rounded up to a power of two");
        assert_eq!(t[0].first_token, i64::MIN);
        assert_eq!(t[0].last_token, -(1i64 << 62) - 1);
        assert_eq!(t[1].last_token, -1);
        assert_eq!(t[2].last_token, (1i64 << 62) - 1);
        assert_eq!(t[3].last_token, i64::MAX);
        for w in t.windows(2) {
            assert_eq!(w[0].last_token, w[1].first_token, "contiguous");
        }
        assert_eq!(m.tablet_of(i64::MIN + 1), &t[0]);
        assert_eq!(m.tablet_of(-1), &t[1]);
        assert_eq!(m.tablet_of(0), &t[2]);
        assert_eq!(m.tablet_of(i64::MAX), &t[3]);
        let one = TabletMap::new(0, 1, 1, 1);
        assert_eq!(one.tablets().len(), 1);
        assert_eq!((one.tablets()[0].first_token, one.tablets()[0].last_token), (i64::MIN, i64::MAX));
    }

    #[test]
    fn replicas_spread_over_nodes_and_shards() {
        let m = TabletMap::new(8, 2, 4, 5);
        let t = m.tablets();
        assert_eq!(t[0].replicas, vec![(0, 0), (1, 1)], "rf clamped to the nodes");
        assert_eq!(t[1].replicas, vec![(1, 0), (0, 1)]);
        assert_eq!(t[2].replicas, vec![(0, 1), (1, 2)]);
        let shards: std::collections::BTreeSet<(usize, u16)> = t.iter().flat_map(|t| t.replicas.clone()).collect();
        assert_eq!(shards.len(), 8, "every (node, shard) holds a tablet");
        assert!(t[2].is_replica(1, 2) && !t[2].is_replica(1, 1));
        let route = t[2].route(|n| Some(uuid::Uuid::from_u128(n as u128 + 1))).expect("host ids");
        assert_eq!((route.first_token, route.last_token), (t[2].first_token, t[2].last_token));
        assert_eq!(route.replicas.iter().map(|r| (r.host_id.as_u128(), r.shard)).collect::<Vec<_>>(), [(1, 1), (2, 2)]);
        assert!(t[0].route(|_| None).is_none());
    }

    #[test]
    fn split_halves_and_merge_joins_siblings() {
        let m = TabletMap::new(4, 2, 4, 1);
        let split = m.split().expect("split");
        assert_eq!(split.tablets().len(), 8);
        let fresh = TabletMap::new(8, 2, 4, 1);
        for (a, b) in split.tablets().iter().zip(fresh.tablets()) {
            assert_eq!((a.first_token, a.last_token), (b.first_token, b.last_token), "the ranges of 8 tablets");
        }
        for (i, t) in split.tablets().iter().enumerate() {
            assert_eq!(t.replicas, m.tablets()[i / 2].replicas, "a half keeps its parent's replicas");
        }
        let merged = split.merge().expect("merge");
        assert_eq!(merged, m, "a merge undoes a split");
        let again = m.merge().expect("merge");
        assert_eq!(again.tablets().len(), 2);
        assert_eq!(again.tablets()[1].first_token, m.tablets()[1].last_token);
        assert_eq!(again.tablets()[1].replicas, m.tablets()[2].replicas, "the first sibling's replicas");
        let one = again.merge().expect("merge");
        assert_eq!((one.tablets()[0].first_token, one.tablets()[0].last_token), (i64::MIN, i64::MAX));
        assert!(one.merge().is_none(), "one tablet cannot merge");
    }
}
