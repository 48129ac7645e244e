//! Which shard a generation's stream is on, and the groups that follow.
//!
//! A group of streams is read by one query per window, so its streams
//! should live on one shard; and readers that share a table must name the
//! same groups, so the grouping has to be a function of the generation,
//! never of the nodes a reader happens to be connected to. In a vnode
//! generation the cluster records it: a vnode's streams are one per shard
//! of the node that owned it when the generation was made (`docs/cdc-log.md`
//! §4.2), so a node with 4 shards and one with 8 each get their own count.

use std::num::NonZeroU16;

use shardwise::protocol::sharding::{Sharder, ShardingInfo};
use shardwise::protocol::token::Token;

use crate::stream::{StreamGroup, StreamId};

/// How a reader finds the shard of a generation's stream, which decides
/// the stream's group.
#[derive(Debug, Clone, Copy)]
pub(super) struct Shards {
    /// From the generation: a vnode's streams are one per shard of its
    /// owner when the generation was made (ScyllaDB's vnode generations,
    /// [`crate::GenerationSource::groups_are_vnodes`]), so its number of streams
    /// is that node's shard count; the bits ignored are the cluster's
    /// `murmur3_partitioner_ignore_msb_bits`, one setting for every node.
    /// Else from `sharding`, for sources whose groups are not vnodes
    /// (tablets' stream sets, a source of the caller's).
    pub(super) per_vnode: bool,
    /// The sharding of a node the session is connected to (`None`: every
    /// stream on shard 0).
    pub(super) sharding: Option<ShardingInfo>,
}

/// `murmur3_partitioner_ignore_msb_bits` unless a node says otherwise.
const DEFAULT_IGNORE_MSB: u8 = 12;

impl Shards {
    fn ignore_msb(&self) -> u8 {
        self.sharding.map_or(DEFAULT_IGNORE_MSB, |s| s.sharder().ignore_msb())
    }

    /// The shard of `stream`, one of the streams of `vnode` (a group of
    /// the generation as its source gave it).
    pub(super) fn of(&self, vnode: &StreamGroup, stream: StreamId) -> u16 {
        if !self.per_vnode {
            return shard_of(&self.sharding, stream);
        }
        u16::try_from(vnode.streams().len())
            .ok()
            .and_then(NonZeroU16::new)
            .and_then(|n| Sharder::new(n, self.ignore_msb()).ok())
            .map_or(0, |s| s.shard_of(Token::new(stream.token())))
    }

    /// The worker thread of a group: its first stream's shard under the
    /// session's sharding, modulo workers (where a group is read, not which
    /// streams it has: a local choice).
    pub(super) fn worker_of(&self, group: &StreamGroup, workers: usize) -> usize {
        usize::from(shard_of(&self.sharding, group.key())) % workers.max(1)
    }

    /// How a reader groups a log's streams: everything besides the
    /// generation that decides its groups, as readers sharing a table
    /// record it beside their leases.
    pub(super) fn grouping(&self, streams_per_query: usize) -> String {
        match self.sharding {
            _ if self.per_vnode => {
                format!("streams_per_query={streams_per_query} shards=per_vnode ignore_msb={}", self.ignore_msb())
            }
            Some(s) => format!(
                "streams_per_query={streams_per_query} shards={} ignore_msb={}",
                s.sharder().nr_shards(),
                s.sharder().ignore_msb()
            ),
            None => format!("streams_per_query={streams_per_query} shards=none"),
        }
    }
}

/// The shard of `stream` under `sharding` (0 without).
pub(super) fn shard_of(sharding: &Option<ShardingInfo>, stream: StreamId) -> u16 {
    sharding.as_ref().map_or(0, |s| s.sharder().shard_of(Token::new(stream.token())))
}

/// A generation's streams regrouped by shard (`shard_of` a stream of a
/// group as the source gave it), in chunks of `per_query` in stream order:
/// one query per group and window, served by that shard alone. A pure
/// function of the generation, never of which nodes this reader is
/// connected to: every reader, restarted or not, names the same groups, so
/// that lease rows and checkpoints keyed by a group's first stream stay
/// meaningful.
pub(super) fn regroup(
    groups: &[StreamGroup],
    per_query: usize,
    shard_of: impl Fn(&StreamGroup, StreamId) -> u16,
) -> Vec<StreamGroup> {
    let mut by_shard: std::collections::BTreeMap<u16, Vec<StreamId>> = std::collections::BTreeMap::new();
    for group in groups {
        for &s in group.streams() {
            by_shard.entry(shard_of(group, s)).or_default().push(s);
        }
    }
    let mut streams: Vec<StreamGroup> = Vec::new();
    for mut shard in by_shard.into_values() {
        // In stream order, whatever order the generation lists them in.
        shard.sort();
        shard.dedup();
        streams.extend(shard.chunks(per_query.max(1)).filter_map(|c| StreamGroup::new(c.iter().copied())));
    }
    streams.sort_by_key(StreamGroup::key);
    streams
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stream(n: u8) -> StreamId {
        StreamId::from_bytes([n; 16])
    }

    /// Streams regrouped by shard, in chunks, sorted by key: the same groups
    /// whatever order the generation lists its groups in, and nothing but
    /// the streams and their shards decides them (no connection state).
    #[test]
    fn regrouping_is_a_pure_function_of_the_streams_and_their_shards() {
        let vnodes: Vec<StreamGroup> =
            (0..6u8).filter_map(|v| StreamGroup::new((0..4u8).map(|s| stream(v * 16 + s)))).collect();
        let shard_of = |s: StreamId| u16::from(s.as_bytes()[0] % 16 % 4);
        let groups = regroup(&vnodes, 4, |_, s| shard_of(s));
        assert_eq!(groups.len(), 8, "4 shards of 6 streams, in chunks of 4");
        for g in &groups {
            let shard = shard_of(g.key());
            assert!(g.streams().iter().all(|s| shard_of(*s) == shard), "a group is served by one shard");
        }
        let mut reversed = vnodes.clone();
        reversed.reverse();
        assert_eq!(regroup(&reversed, 4, |_, s| shard_of(s)), groups, "the generation's order does not matter");
    }

    /// A stream of vnode `vnode` on shard `shard` of a node with `shards`
    /// shards (ignore_msb 12), as ScyllaDB makes a generation: its token is
    /// the first of that shard's tokens in the vnode's range.
    fn on_shard(vnode: u8, shard: u16, shards: u16) -> StreamId {
        let sharder = Sharder::new(NonZeroU16::new(shards).expect("shards"), 12).expect("sharder");
        let base = i64::from(vnode) << 56;
        let token = (0..64i64)
            .map(|i| base + i * (1 << 48))
            .find(|t| sharder.shard_of(Token::new(*t)) == shard)
            .expect("a token of the shard");
        let mut bytes = [0u8; 16];
        bytes[..8].copy_from_slice(&token.to_be_bytes());
        bytes[8..].copy_from_slice(&(u64::from(vnode) << 4 | 1).to_be_bytes());
        StreamId::from_bytes(bytes)
    }

    /// On nodes of different shard counts (a vnode of a 2-shard node, two
    /// of a 4-shard one) the generation's own counts group every stream
    /// with the streams of its shard, and a reader connected to a node of
    /// 8 shards, or to none with sharding, groups them alike. Grouped by
    /// the session's sharding (as before), a reader without one put every
    /// stream on shard 0, and readers connected to different nodes grouped
    /// differently.
    #[test]
    fn a_vnodes_streams_are_on_the_shards_of_its_own_node() {
        let owners = [(0u8, 2u16), (1, 4), (2, 4)];
        let mut shard_of_stream = std::collections::HashMap::new();
        let vnodes: Vec<StreamGroup> = owners
            .iter()
            .filter_map(|&(vnode, shards)| {
                let streams: Vec<StreamId> = (0..shards).map(|j| on_shard(vnode, j, shards)).collect();
                for (j, s) in streams.iter().enumerate() {
                    shard_of_stream.insert(*s, j as u16);
                }
                StreamGroup::new(streams)
            })
            .collect();
        let eight = ShardingInfo::from_entries([
            ("SCYLLA_SHARD", vec!["0"]),
            ("SCYLLA_NR_SHARDS", vec!["8"]),
            ("SCYLLA_SHARDING_IGNORE_MSB", vec!["12"]),
            ("SCYLLA_PARTITIONER", vec!["org.apache.cassandra.dht.Murmur3Partitioner"]),
            ("SCYLLA_SHARDING_ALGORITHM", vec!["biased-token-round-robin"]),
        ])
        .expect("sharding");
        assert!(eight.is_some());
        let grouped = |shards: Shards| regroup(&vnodes, 8, |vnode, s| shards.of(vnode, s));
        let groups = grouped(Shards { per_vnode: true, sharding: None });
        assert_eq!(groups.len(), 4, "shards 0 to 3: {groups:?}");
        for g in &groups {
            let shard = shard_of_stream[&g.key()];
            assert!(g.streams().iter().all(|s| shard_of_stream[s] == shard), "a group is one shard's: {g:?}");
        }
        assert_eq!(grouped(Shards { per_vnode: true, sharding: eight }), groups, "whatever node the reader knows");
        assert_eq!(
            Shards { per_vnode: true, sharding: None }.grouping(8),
            Shards { per_vnode: true, sharding: eight }.grouping(8),
            "and records the same grouping"
        );
        let by_session = grouped(Shards { per_vnode: false, sharding: None });
        assert_eq!(by_session.len(), 2, "without sharding, one shard: {by_session:?}");
    }
}
