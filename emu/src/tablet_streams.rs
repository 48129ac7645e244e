//! CDC streams of a table in a tablets keyspace, as Scylla keeps them
//! (`docs/cdc-log.md` §11).
//!
//! A vnode keyspace's log follows the cluster's generations; a tablets
//! table has stream sets of its own. Each set holds one stream per tablet,
//! whose token is the tablet's last token (so the log partition lives in
//! the base partition's tablet, on the same replicas), with version 1,
//! index 0 and fresh random bits. The first set starts when CDC is turned
//! on; every split or merge starts a new set for the whole table, with new
//! random bits for every stream, so every old stream closes and every new
//! one opens. The new set starts [`SWITCH_DELAY_MS`] after the resize (and
//! at least a millisecond after the previous set): Scylla adds
//! `2 × ring_delay` plus its 5 s clock leeway, so that no write it already
//! accepted (up to 5 s ahead) carries a later timestamp than the switch and
//! every coordinator knows the set before it starts; the front models a
//! `ring_delay` near zero. A write goes to the stream of the newest set that started at
//! or before its timestamp: the first stream whose token is not below the
//! partition's.
//!
//! Clients read the sets from `system.cdc_timestamps` (one row per set) and
//! `system.cdc_streams` (per set: the current streams with state 0, the
//! streams it closed with state 1 and those it opened with state 2; the
//! first set lists its streams as both current and opened).

use std::collections::HashSet;

use crate::generation::StreamId;
use crate::tablets::TabletMap;

/// How long after a resize its stream set starts: Scylla's 5 s leeway.
pub const SWITCH_DELAY_MS: i64 = 5_000;

/// `stream_state` of a stream of the set.
pub const CURRENT: i8 = 0;
/// `stream_state` of a stream the set closed.
pub const CLOSED: i8 = 1;
/// `stream_state` of a stream the set opened.
pub const OPENED: i8 = 2;

/// The streams of a table from one timestamp on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StreamSet {
    /// When the set starts (ms since the epoch).
    pub timestamp_ms: i64,
    /// One stream per tablet, in token order.
    pub streams: Vec<StreamId>,
}

/// Every stream set of one table, oldest first.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TabletStreams {
    sets: Vec<StreamSet>,
}

impl TabletStreams {
    /// The first set, for `map`, from `timestamp_ms` on.
    pub fn new(map: &TabletMap, timestamp_ms: i64, random: &mut impl FnMut() -> u64) -> TabletStreams {
        TabletStreams { sets: vec![StreamSet { timestamp_ms, streams: streams_of(map, random) }] }
    }

    /// Starts a new set for the resized `map`, [`SWITCH_DELAY_MS`] after
    /// `now_ms` or a millisecond after the last set, whichever is later.
    pub fn resized(&mut self, map: &TabletMap, now_ms: i64, random: &mut impl FnMut() -> u64) -> &StreamSet {
        let after = self.sets.last().map_or(i64::MIN, |s| s.timestamp_ms.saturating_add(1));
        let at = now_ms.saturating_add(SWITCH_DELAY_MS).max(after);
        self.sets.push(StreamSet { timestamp_ms: at, streams: streams_of(map, random) });
        let last = self.sets.len() - 1;
        &self.sets[last]
    }

    /// The sets, oldest first (never empty).
    pub fn sets(&self) -> &[StreamSet] {
        &self.sets
    }

    /// The set operating at `micros` (µs since the epoch): the newest that
    /// started at or before it; `None` before the first.
    pub fn set_at(&self, micros: i64) -> Option<&StreamSet> {
        self.sets.iter().rev().find(|s| s.timestamp_ms.saturating_mul(1000) <= micros)
    }

    /// The stream a write of `token` at `micros` goes to.
    pub fn stream_for(&self, token: i64, micros: i64) -> Option<StreamId> {
        let set = self.set_at(micros)?;
        let i = set.streams.partition_point(|s| s.raw_token() < token);
        set.streams.get(i.min(set.streams.len().saturating_sub(1))).copied()
    }

    /// The `system.cdc_streams` rows of set `i`: (stream_state, stream).
    pub fn rows(&self, i: usize) -> Vec<(i8, StreamId)> {
        let Some(set) = self.sets.get(i) else { return Vec::new() };
        let mut rows: Vec<(i8, StreamId)> = set.streams.iter().map(|&s| (CURRENT, s)).collect();
        match i.checked_sub(1).and_then(|p| self.sets.get(p)) {
            Some(previous) => {
                let (now, before): (HashSet<_>, HashSet<_>) =
                    (set.streams.iter().collect(), previous.streams.iter().collect());
                rows.extend(previous.streams.iter().filter(|s| !now.contains(s)).map(|&s| (CLOSED, s)));
                rows.extend(set.streams.iter().filter(|s| !before.contains(s)).map(|&s| (OPENED, s)));
            }
            None => rows.extend(set.streams.iter().map(|&s| (OPENED, s))),
        }
        rows
    }
}

fn streams_of(map: &TabletMap, random: &mut impl FnMut() -> u64) -> Vec<StreamId> {
    map.tablets().iter().map(|t| StreamId::new(t.last_token, 0, random())).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn counter() -> impl FnMut() -> u64 {
        let mut n = 0;
        move || {
            n += 1;
            n
        }
    }

    #[test]
    fn a_stream_per_tablet_at_its_last_token() {
        let map = TabletMap::new(4, 1, 2, 1);
        let s = TabletStreams::new(&map, 1_000, &mut counter());
        let set = &s.sets()[0];
        assert_eq!(set.streams.len(), 4);
        for (stream, tablet) in set.streams.iter().zip(map.tablets()) {
            assert_eq!(stream.raw_token(), tablet.last_token);
            assert_eq!((stream.version(), stream.vnode_index()), (1, 0));
        }
        for token in [i64::MIN, -5, 0, 1 << 62, i64::MAX] {
            let stream = s.stream_for(token, 1_000_000).expect("a stream");
            assert_eq!(stream.raw_token(), map.tablet_of(token).last_token, "token {token}");
        }
        assert_eq!(s.stream_for(0, 999_999), None, "before the first set");
        let rows = s.rows(0);
        assert_eq!(rows.iter().filter(|r| r.0 == CURRENT).count(), 4);
        assert_eq!(rows.iter().filter(|r| r.0 == OPENED).count(), 4, "the first set opens every stream");
    }

    #[test]
    fn a_resize_starts_a_new_set_and_closes_every_old_stream() {
        let map = TabletMap::new(2, 1, 2, 1);
        let mut rng = counter();
        let mut s = TabletStreams::new(&map, 5_000, &mut rng);
        let split = map.split().expect("split");
        let ts = s.resized(&split, -1_000, &mut rng).timestamp_ms;
        assert_eq!(ts, 5_001, "at least a millisecond after the last set");
        let rows = s.rows(1);
        let count = |state| rows.iter().filter(|r| r.0 == state).count();
        assert_eq!((count(CURRENT), count(CLOSED), count(OPENED)), (4, 2, 4));
        assert_eq!(s.stream_for(-1, 5_000_999), Some(s.sets()[0].streams[0]), "old set until the new one starts");
        assert_eq!(s.stream_for(-1, 5_001_000), Some(s.sets()[1].streams[1]));
        let merged = split.merge().expect("merge");
        assert_eq!(s.resized(&merged, 9_000, &mut rng).timestamp_ms, 9_000 + SWITCH_DELAY_MS, "after the delay");
        assert_eq!(s.stream_for(-1, 14_000_000).map(|x| x.raw_token()), Some(-1));
        assert!(s.rows(7).is_empty());
    }
}
