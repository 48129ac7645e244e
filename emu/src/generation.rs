//! CDC generations: stream ids in Scylla's 16-byte layout, built from the
//! Cassandra ring exactly as Scylla builds a vnode generation.
//!
//! Follows `docs/cdc-log.md` §4.1–§4.3 and §5.2:
//!
//! - A stream id is two big-endian 64-bit words: the high word is the
//!   stream's token, the low word is `random(38) | vnode index(22) |
//!   version(4) = 1` ([`StreamId::new`]). Its token under the CDC partitioner
//!   is the high word ([`StreamId::token`]).
//! - Vnode `i` is the ring range `(t[i-1], t[i]]` of the sorted ring tokens;
//!   vnode 0 wraps around: `(t[n-1], t[0]]`. For every vnode and every shard
//!   `j` of the node owning the range end, the stream's token is the first
//!   token of the range that shard `j` owns under `biased-token-round-robin`
//!   sharding, or the range end when the shard owns no token of the range
//!   (only possible for tiny vnodes). The streams of a vnode are kept in
//!   shard order ([`VnodeStreams::streams`]).
//! - A base write's stream: the first vnode whose range end is at or after
//!   the key's token (else vnode 0), then `streams[shard_of(token)]`
//!   ([`Generation::stream_for_token`]) — what the log synthesis needs.
//!
//! The emulated nodes all have the same shard count, so "the shard count of
//! the node owning the range end" is simply the front's shard count.

use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

use shardwise_protocol::sharding::Sharder;
use shardwise_protocol::token::Token;

/// Stream-id version written in the low 4 bits (the only version there is).
pub const STREAM_ID_VERSION: u8 = 1;
/// Bits of the vnode index in the low word.
pub const VNODE_INDEX_BITS: u32 = 22;
/// Random bits in the low word.
pub const RANDOM_BITS: u32 = 38;

/// A CDC stream id: the 16-byte partition key of a CDC log table.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct StreamId([u8; 16]);

impl StreamId {
    /// A version-1 stream id for `token` in vnode `vnode_index`; the low 38
    /// bits of `random` fill the random field.
    pub fn new(token: i64, vnode_index: u32, random: u64) -> StreamId {
        let random = random & ((1u64 << RANDOM_BITS) - 1);
        let index = u64::from(vnode_index) & ((1u64 << VNODE_INDEX_BITS) - 1);
        let low = (random << (VNODE_INDEX_BITS + 4)) | (index << 4) | u64::from(STREAM_ID_VERSION);
        let mut bytes = [0u8; 16];
        bytes[..8].copy_from_slice(&token.to_be_bytes());
        bytes[8..].copy_from_slice(&low.to_be_bytes());
        StreamId(bytes)
    }

    /// A stream id from its 16 bytes.
    pub fn from_bytes(bytes: &[u8]) -> Option<StreamId> {
        bytes.try_into().ok().map(StreamId)
    }

    /// The 16 bytes, as stored in `cdc$stream_id`.
    pub fn as_bytes(&self) -> &[u8; 16] {
        &self.0
    }

    /// The high word: the token the stream was created for.
    pub fn raw_token(&self) -> i64 {
        let mut high = [0u8; 8];
        high.copy_from_slice(&self.0[..8]);
        i64::from_be_bytes(high)
    }

    /// The token of the stream under the CDC partitioner (the high word,
    /// normalized like every key token).
    pub fn token(&self) -> Token {
        Token::cdc(&self.0)
    }

    fn low(&self) -> u64 {
        let mut low = [0u8; 8];
        low.copy_from_slice(&self.0[8..]);
        u64::from_be_bytes(low)
    }

    /// The vnode index field.
    pub fn vnode_index(&self) -> u32 {
        ((self.low() >> 4) & ((1u64 << VNODE_INDEX_BITS) - 1)) as u32
    }

    /// The version field (1).
    pub fn version(&self) -> u8 {
        (self.low() & 0xF) as u8
    }

    /// Lowercase hex, as in a CQL blob literal without the `0x`.
    pub fn to_hex(&self) -> String {
        self.0.iter().map(|b| format!("{b:02x}")).collect()
    }
}

impl fmt::Debug for StreamId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "StreamId(0x{})", self.to_hex())
    }
}

impl fmt::Display for StreamId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "0x{}", self.to_hex())
    }
}

/// The smallest token `t >= from` that `shard` owns, or `None` when no token
/// from `from` up to `i64::MAX` belongs to it.
///
/// With `ignore_msb = k` the biased token space (`token + 2^63`) is cut into
/// `2^k` super-ranges of `2^(64-k)` tokens, each split into `nr_shards` equal
/// slices numbered like the shards; shard `j`'s slice of a super-range starts
/// at offset `ceil(j * 2^(64-k) / nr_shards)` (`docs/protocol.md` §2.1).
pub fn first_token_of_shard(sharder: &Sharder, from: i64, shard: u16) -> Option<i64> {
    let n = u128::from(sharder.nr_shards().get());
    if u128::from(shard) >= n {
        return None;
    }
    if sharder.shard_of(Token::new(from)) == shard {
        return Some(from);
    }
    let size: u128 = 1u128 << (64 - u32::from(sharder.ignore_msb()));
    let biased = u128::from((from as u64).wrapping_add(1 << 63));
    let offset = (u128::from(shard) * size).div_ceil(n);
    let first = biased / size;
    for super_range in [first, first + 1] {
        let candidate = super_range * size + offset;
        if candidate >= (1u128 << 64) {
            return None;
        }
        if candidate > biased {
            return Some((candidate as u64).wrapping_sub(1 << 63) as i64);
        }
    }
    None
}

/// The first token in the ring range `(start, end]` owned by `shard`, or
/// `end` when the shard owns none; `start >= end` is the wrap-around range
/// `(start, MAX] ∪ (MIN, end]` (`docs/cdc-log.md` §4.2).
pub fn first_token_in_range(sharder: &Sharder, start: i64, end: i64, shard: u16) -> i64 {
    if start < end {
        return match first_token_of_shard(sharder, start + 1, shard) {
            Some(t) if t <= end => t,
            _ => end,
        };
    }
    if start < i64::MAX {
        if let Some(t) = first_token_of_shard(sharder, start + 1, shard) {
            return t;
        }
    }
    match first_token_of_shard(sharder, i64::MIN + 1, shard) {
        Some(t) if t <= end => t,
        _ => end,
    }
}

/// One vnode of a generation and its streams.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VnodeStreams {
    /// Position of the vnode in the ring (0 = the wrap-around vnode).
    pub index: u32,
    /// The range start (exclusive): the previous ring token.
    pub range_start: i64,
    /// The range end (inclusive): the ring token that ends the vnode.
    pub range_end: i64,
    /// One stream per shard, in shard order.
    pub streams: Vec<StreamId>,
}

/// A CDC generation: a timestamp and the streams of every vnode.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Generation {
    /// When the generation starts operating, in milliseconds since the epoch
    /// (the `time` of `cdc_generation_timestamps`).
    pub timestamp_ms: i64,
    /// The sharding the streams were built for.
    pub sharder: Sharder,
    /// The vnodes in ring order (vnode 0 first).
    pub vnodes: Vec<VnodeStreams>,
}

impl Generation {
    /// Builds a generation for the ring `tokens` (any order, duplicates
    /// ignored); `random` supplies the random bits of each stream id.
    ///
    /// Returns `None` for an empty ring.
    pub fn build(
        timestamp_ms: i64,
        tokens: &[i64],
        sharder: Sharder,
        random: &mut dyn FnMut() -> u64,
    ) -> Option<Generation> {
        let mut ring = tokens.to_vec();
        ring.sort_unstable();
        ring.dedup();
        let last = *ring.last()?;
        let mut vnodes = Vec::with_capacity(ring.len());
        for (i, &end) in ring.iter().enumerate() {
            let start = if i == 0 { last } else { ring[i - 1] };
            let streams = (0..sharder.nr_shards().get())
                .map(|shard| {
                    let token = first_token_in_range(&sharder, start, end, shard);
                    StreamId::new(token, i as u32, random())
                })
                .collect();
            vnodes.push(VnodeStreams { index: i as u32, range_start: start, range_end: end, streams });
        }
        Some(Generation { timestamp_ms, sharder, vnodes })
    }

    /// Every stream of the generation, vnode by vnode in shard order.
    pub fn streams(&self) -> impl Iterator<Item = &StreamId> {
        self.vnodes.iter().flat_map(|v| v.streams.iter())
    }

    /// The vnode that owns `token`: the first whose range end is at or after
    /// it, else the wrap-around vnode 0.
    pub fn vnode_of(&self, token: Token) -> &VnodeStreams {
        let i = self.vnodes.partition_point(|v| v.range_end < token.value());
        self.vnodes.get(i).unwrap_or(&self.vnodes[0])
    }

    /// The stream a base write with partition-key token `token` goes to
    /// (`docs/cdc-log.md` §4.3).
    pub fn stream_for_token(&self, token: Token) -> StreamId {
        let vnode = self.vnode_of(token);
        let sharder = Sharder::new(
            std::num::NonZeroU16::new(vnode.streams.len() as u16).unwrap_or(self.sharder.nr_shards()),
            self.sharder.ignore_msb(),
        )
        .unwrap_or(self.sharder);
        vnode.streams[usize::from(sharder.shard_of(token)) % vnode.streams.len()]
    }
}

/// A small non-cryptographic generator (splitmix64) for the random bits of
/// stream ids, seeded from the clock, the process id and a counter.
pub(crate) fn random_source() -> impl FnMut() -> u64 {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let nanos = SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_nanos() as u64).unwrap_or(0);
    let state = nanos ^ (u64::from(std::process::id()) << 32) ^ COUNTER.fetch_add(crate::rng::GAMMA, Ordering::Relaxed);
    let mut rng = crate::rng::SplitMix64(state);
    move || rng.next_u64()
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use std::num::NonZeroU16;

    use super::*;

    fn sharder(n: u16, msb: u8) -> Sharder {
        Sharder::new(NonZeroU16::new(n).unwrap(), msb).unwrap()
    }

    #[test]
    fn layout_matches_the_documented_examples() {
        // docs/cdc-log.md §4.1.
        let id = StreamId::from_bytes(&[
            0x80, 0x7a, 0xe7, 0x3e, 0x07, 0xdb, 0xd4, 0x12, 0x2e, 0x32, 0xd3, 0x6e, 0x08, 0x00, 0x00, 0x11,
        ])
        .unwrap();
        assert_eq!(id.raw_token(), -9188777836090239982);
        assert_eq!((id.version(), id.vnode_index()), (1, 1));
        let made = StreamId::new(-42, 90, u64::MAX);
        assert_eq!((made.raw_token(), made.vnode_index(), made.version()), (-42, 90, 1));
        assert_eq!(made.token(), Token::new(-42));
    }

    #[test]
    fn first_token_of_shard_is_the_slice_start() {
        // docs/protocol.md §2.2: slice starts for 7 shards, ignore_msb 0 and 2.
        let s = sharder(7, 0);
        assert_eq!(first_token_of_shard(&s, i64::MIN + 1, 1), Some(-6588122883467697005));
        assert_eq!(first_token_of_shard(&s, -6588122883467697005, 1), Some(-6588122883467697005));
        assert_eq!(first_token_of_shard(&s, 0, 6), Some(6588122883467697006));
        assert_eq!(first_token_of_shard(&s, 6588122883467697007, 0), None);
        let s = sharder(7, 2);
        assert_eq!(first_token_of_shard(&s, -7000000000000000000, 0), Some(-4611686018427387904));
        assert_eq!(first_token_of_shard(&s, 1, 0), Some(1));
        assert_eq!(first_token_of_shard(&s, 658812288346769701, 0), Some(4611686018427387904));
        assert_eq!(first_token_of_shard(&s, 1, 1), Some(658812288346769701));
        let s = sharder(8, 12);
        let mut next = random_source();
        for _ in 0..2000 {
            let from = next() as i64;
            for shard in 0..8 {
                if let Some(t) = first_token_of_shard(&s, from, shard) {
                    assert!(t >= from);
                    assert_eq!(s.shard_of(Token::new(t)), shard);
                    if t > from {
                        assert_ne!(s.shard_of(Token::new(t - 1)), shard);
                    }
                }
            }
        }
    }

    #[test]
    fn single_shard_streams_start_after_the_previous_token() {
        // docs/cdc-log.md §4.2: one shard ⇒ token = previous ring token + 1.
        let g = Generation::build(0, &[100, -5, 7], sharder(1, 12), &mut random_source()).unwrap();
        let tokens: Vec<i64> = g.streams().map(StreamId::raw_token).collect();
        assert_eq!(tokens, [101, -4, 8]);
        assert_eq!(g.vnodes[0].range_end, -5);
        assert_eq!(g.stream_for_token(Token::new(50)).raw_token(), 8);
        assert_eq!(g.stream_for_token(Token::new(101)).raw_token(), 101);
        assert_eq!(g.stream_for_token(Token::new(-5)).raw_token(), 101);
    }
}
