//! The front's shard math against the spec's vectors, and the invariants of
//! the CDC generations it builds — pure, no server.

use std::num::NonZeroU16;

use shardwise_emu::generation::{first_token_in_range, first_token_of_shard};
use shardwise_emu::{Generation, StreamId};
use shardwise_protocol::sharding::Sharder;
use shardwise_protocol::token::{Partitioner, Token};

fn sharder(n: u16, msb: u8) -> Sharder {
    Sharder::new(NonZeroU16::new(n).expect("non-zero"), msb).expect("msb < 64")
}

/// A deterministic generator for rings and probe tokens.
fn lcg(seed: u64) -> impl FnMut() -> u64 {
    let mut s = seed;
    move || {
        s = s.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        let mut z = s;
        z = (z ^ (z >> 33)).wrapping_mul(0xff51afd7ed558ccd);
        z ^ (z >> 33)
    }
}

#[test]
fn shard_of_token_matches_the_spec_vectors() {
    let csv = include_str!(concat!(env!("CARGO_MANIFEST_DIR"), "/../protocol/tests/data/shard_of_token.csv"));
    let s = sharder(4, 12);
    let mut checked = 0;
    for line in csv.lines().filter(|l| !l.starts_with('#') && !l.starts_with("token")) {
        let (token, shard) = line.split_once(',').expect("token,shard");
        let token: i64 = token.trim().parse().expect("token");
        let shard: u16 = shard.trim().parse().expect("shard");
        assert_eq!(s.shard_of(Token::new(token)), shard, "token {token}");
        // The front's slice search agrees: the first token of that shard at
        // or after `token` is `token` itself.
        assert_eq!(first_token_of_shard(&s, token, shard), Some(token));
        checked += 1;
    }
    assert_eq!(checked, 10_000);
}

#[test]
fn slice_boundaries_of_the_spec() {
    // docs/protocol.md §2.2, nr_shards = 7, ignore_msb = 2: 28 slices, slice i → shard i mod 7.
    let starts: [i64; 28] = [
        -9223372036854775807,
        -8564559748508006107,
        -7905747460161236406,
        -7246935171814466706,
        -6588122883467697005,
        -5929310595120927305,
        -5270498306774157604,
        -4611686018427387904,
        -3952873730080618203,
        -3294061441733848502,
        -2635249153387078802,
        -1976436865040309101,
        -1317624576693539401,
        -658812288346769700,
        0,
        658812288346769701,
        1317624576693539402,
        1976436865040309102,
        2635249153387078803,
        3294061441733848503,
        3952873730080618204,
        4611686018427387904,
        5270498306774157605,
        5929310595120927306,
        6588122883467697006,
        7246935171814466707,
        7905747460161236407,
        8564559748508006108,
    ];
    let s = sharder(7, 2);
    for (i, &start) in starts.iter().enumerate() {
        let shard = (i % 7) as u16;
        assert_eq!(s.shard_of(Token::new(start)), shard, "slice {i}");
        if i > 0 {
            assert_eq!(s.shard_of(Token::new(start - 1)), ((i - 1) % 7) as u16);
            // From just after the previous slice's start, the next token of this shard is `start`.
            assert_eq!(first_token_of_shard(&s, starts[i - 1] + 1, shard), Some(start), "slice {i}");
        }
    }
}

fn in_range(token: i64, start: i64, end: i64) -> bool {
    if start < end {
        token > start && token <= end
    } else {
        token > start || token <= end
    }
}

fn check_generation(g: &Generation, ring: &[i64]) {
    let n = usize::from(g.sharder.nr_shards().get());
    assert_eq!(g.vnodes.len(), ring.len());
    let mut seen = std::collections::HashSet::new();
    for (i, v) in g.vnodes.iter().enumerate() {
        assert_eq!(v.index as usize, i);
        assert_eq!(v.range_end, ring[i]);
        assert_eq!(v.range_start, ring[(i + ring.len() - 1) % ring.len()]);
        assert_eq!(v.streams.len(), n);
        for (shard, id) in v.streams.iter().enumerate() {
            assert!(seen.insert(*id), "duplicate stream {id}");
            assert_eq!(id.version(), 1);
            assert_eq!(id.vnode_index() as usize, i);
            let t = id.raw_token();
            // The CDC partitioner's token of the id is its high 64 bits.
            assert_eq!(Partitioner::Cdc.token_of_single(id.as_bytes()), Token::new(t));
            assert_eq!(StreamId::from_bytes(id.as_bytes()), Some(*id));
            assert!(
                in_range(t, v.range_start, v.range_end),
                "vnode {i} shard {shard}: {t} outside ({}, {}]",
                v.range_start,
                v.range_end
            );
            if g.sharder.shard_of(Token::new(t)) as usize != shard {
                // Only allowed when the shard owns no token of the vnode: then the range end is used.
                assert_eq!(t, v.range_end, "vnode {i} shard {shard}");
                assert_eq!(first_token_in_range(&g.sharder, v.range_start, v.range_end, shard as u16), v.range_end);
            } else {
                // And it is the *first* token of that shard in the range.
                assert_eq!(first_token_in_range(&g.sharder, v.range_start, v.range_end, shard as u16), t);
            }
        }
    }
}

#[test]
fn generation_streams_lie_in_their_vnode_and_shard() {
    let mut next = lcg(42);
    // Three nodes × 16 vnodes, like a 3-node test cluster.
    let mut ring: Vec<i64> = (0..48).map(|_| next() as i64).collect();
    ring.sort_unstable();
    for (shards, msb) in [(8, 12), (1, 12), (3, 0), (12, 4)] {
        let g = Generation::build(1_700_000_000_000, &ring, sharder(shards, msb), &mut next).expect("ring");
        check_generation(&g, &ring);
        // Every stream token maps to its own stream (the token is in its vnode and shard).
        for v in &g.vnodes {
            for (shard, id) in v.streams.iter().enumerate() {
                if g.sharder.shard_of(id.token()) as usize == shard {
                    assert_eq!(g.stream_for_token(id.token()), *id);
                }
            }
        }
        // Arbitrary key tokens map to a stream of the vnode that owns them, on their shard.
        for _ in 0..5000 {
            let t = Token::murmur3(&next().to_be_bytes());
            let id = g.stream_for_token(t);
            let v = &g.vnodes[id.vnode_index() as usize];
            assert!(in_range(t.value(), v.range_start, v.range_end));
            let shard = g.sharder.shard_of(t) as usize;
            assert_eq!(v.streams[shard], id);
        }
    }
}

#[test]
fn tiny_and_wrapping_vnodes() {
    let mut next = lcg(7);
    // Adjacent tokens (vnodes of one token), a vnode ending at i64::MAX and one wrapping through MIN.
    let ring = vec![i64::MIN + 5, -3, -2, -1, 0, 1000, i64::MAX - 1, i64::MAX];
    let g = Generation::build(0, &ring, sharder(8, 12), &mut next).expect("ring");
    check_generation(&g, &ring);
    // A single-token ring: one vnode covering the whole ring.
    let g = Generation::build(0, &[12345], sharder(8, 12), &mut next).expect("ring");
    check_generation(&g, &[12345]);
    for v in &g.vnodes {
        for (shard, id) in v.streams.iter().enumerate() {
            assert_eq!(g.sharder.shard_of(id.token()) as usize, shard);
        }
    }
}
