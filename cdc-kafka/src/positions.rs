//! Where a window split into several transactions stands: per stream of a
//! group, the last row committed beyond the group's progress.
//!
//! A window's rows go out as one transaction unless they are more than
//! [`crate::SinkConfig::max_transaction_messages`] messages or
//! [`crate::SinkConfig::max_transaction_bytes`] bytes; then the sink commits
//! them in parts as they come, each part with the group's **positions
//! record** (key `<record key>/rows`, value `"<generation> <stream>@<cdc$time>#<batch_seq_no> …"`),
//! in the checkpoint topic beside the group's checkpoint record. The
//! window's last part carries the group's progress (the window's end), as
//! an unsplit window does.
//!
//! The reader resumes a group only at a window boundary (its progress, in
//! milliseconds), and a window's rows come stream by stream, each stream's
//! in log order (`cdc$time`, then `cdc$batch_seq_no`), so a part that
//! ended mid-window is not a position the reader could resume from. A
//! consumer that starts reading the group again (after a restart, a
//! takeover, a lost group) therefore reads the window again from its start
//! and **skips**, in each stream, the rows up to and including the one its
//! positions record names ([`Skip`]): rows before that row's `cdc$time`, its
//! rows of the same `cdc$time` up to its `cdc$batch_seq_no`, and (should the
//! named row be gone, expired by the log's TTL) the other rows of that
//! 100-ns tick. Rows of a later tick are never skipped. So the parts
//! committed are not written twice and nothing after them is skipped,
//! whatever the windows the reader reads the group in this time.
//!
//! A position older than the group's progress is inert (no row before the
//! progress is read again) and is dropped when the next part is written.

use std::collections::{BTreeMap, HashMap};

use shardwise_cdc::{Change, Millis, StreamId};
use uuid::Uuid;

/// One row of a stream: its `cdc$time` and `cdc$batch_seq_no`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RowAt {
    /// `cdc$time`.
    pub time: Uuid,
    /// `cdc$batch_seq_no`.
    pub seq: i32,
}

impl RowAt {
    /// The row of `change`.
    pub fn of(change: &Change) -> Self {
        RowAt { time: change.time, seq: change.batch_seq_no }
    }

    /// The row's 100-ns tick since 1582-10-15 (a version-1 UUID's timestamp).
    fn tick(&self) -> u64 {
        tick(&self.time)
    }
}

/// The 100-ns timestamp of a version-1 UUID (`cdc$time`), as the log's
/// clustering order compares it first.
fn tick(time: &Uuid) -> u64 {
    let b = time.as_bytes();
    let low = u64::from(u32::from_be_bytes([b[0], b[1], b[2], b[3]]));
    let mid = u64::from(u16::from_be_bytes([b[4], b[5]]));
    let high = u64::from(u16::from_be_bytes([b[6], b[7]]) & 0x0fff);
    (high << 48) | (mid << 32) | low
}

/// Ticks between the UUID epoch (1582-10-15) and the Unix epoch.
const UUID_EPOCH_OFFSET: u64 = 0x01b2_1dd2_1381_4000;

/// The first tick of millisecond `at` (what `minTimeuuid(at)` has): a row
/// is before `at` when its tick is below it.
fn tick_of(at: Millis) -> u64 {
    u64::try_from(at.0).map_or(0, |ms| ms.saturating_mul(10_000).saturating_add(UUID_EPOCH_OFFSET))
}

/// The positions of one group of one generation: per stream, the last row
/// committed beyond the group's progress.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Positions {
    /// The group's generation.
    pub generation: Millis,
    /// Per stream, its last committed row.
    pub streams: BTreeMap<StreamId, RowAt>,
}

impl Positions {
    /// No positions yet, in `generation`.
    pub fn new(generation: Millis) -> Self {
        Positions { generation, streams: BTreeMap::new() }
    }

    /// These positions moved to the rows of `last` (rows read after them).
    pub fn merge(&mut self, last: &HashMap<StreamId, RowAt>) {
        for (stream, at) in last {
            self.streams.insert(*stream, *at);
        }
    }

    /// Drops the positions before `progress`: no row of theirs is read
    /// again.
    pub fn prune(&mut self, progress: Millis) {
        let bound = tick_of(progress);
        self.streams.retain(|_, at| at.tick() >= bound);
    }

    /// The record's value: `"<generation> <stream>@<cdc$time>#<batch_seq_no> …"`.
    pub fn value(&self) -> String {
        let mut value = self.generation.0.to_string();
        for (stream, at) in &self.streams {
            value.push_str(&format!(" {stream}@{}#{}", at.time, at.seq));
        }
        value
    }

    /// Parses a record's value ([`Positions::value`]); `None` if it is not one.
    pub fn parse(value: &str) -> Option<Self> {
        let mut words = value.split(' ');
        let generation = Millis(words.next()?.parse().ok()?);
        let mut streams = BTreeMap::new();
        for word in words {
            let (stream, rest) = word.split_once('@')?;
            let (time, seq) = rest.split_once('#')?;
            streams.insert(stream.parse().ok()?, RowAt { time: time.parse().ok()?, seq: seq.parse().ok()? });
        }
        Some(Positions { generation, streams })
    }
}

/// The key of a group's positions record: its checkpoint record's key and
/// `/rows`.
pub fn positions_key(record_key: &str) -> String {
    format!("{record_key}/rows")
}

/// The checkpoint record key a positions record key belongs to, if `key` is
/// one.
pub fn record_key_of(key: &str) -> Option<&str> {
    key.strip_suffix("/rows")
}

/// What a consumer that reads a group again skips: per stream, the rows up
/// to its committed position (see the module docs).
#[derive(Debug, Default)]
pub struct Skip {
    /// Per stream still skipping: its position.
    streams: HashMap<StreamId, RowAt>,
}

impl Skip {
    /// Skips what `positions` say was committed.
    pub fn new(positions: Option<&Positions>) -> Self {
        Skip { streams: positions.map(|p| p.streams.iter().map(|(s, at)| (*s, *at)).collect()).unwrap_or_default() }
    }

    /// Whether `change` was committed already (and is not to be written
    /// again). A stream stops skipping at its position's row or at the
    /// first row past its tick.
    pub fn skips(&mut self, change: &Change) -> bool {
        let Some(at) = self.streams.get(&change.stream_id).copied() else { return false };
        let row = RowAt::of(change);
        let (tick, position) = (row.tick(), at.tick());
        let skipped = if tick != position {
            tick < position
        } else if row.time == at.time {
            row.seq <= at.seq
        } else {
            // Another row of the same tick, before the position's row or
            // with that row gone: the log orders them by the rest of the
            // UUID, which comes before the position's row here.
            true
        };
        if !skipped || (row == at) {
            self.streams.remove(&change.stream_id);
        }
        skipped
    }

    /// Whether nothing is left to skip.
    pub fn is_done(&self) -> bool {
        self.streams.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use shardwise_cdc::Operation;

    /// A version-1 UUID of tick `tick`, node byte `node`.
    fn uuid(tick: u64, node: u8) -> Uuid {
        let low = (tick & 0xffff_ffff) as u32;
        let mid = ((tick >> 32) & 0xffff) as u16;
        let high = (((tick >> 48) & 0x0fff) as u16) | 0x1000;
        let mut b = [0u8; 16];
        b[0..4].copy_from_slice(&low.to_be_bytes());
        b[4..6].copy_from_slice(&mid.to_be_bytes());
        b[6..8].copy_from_slice(&high.to_be_bytes());
        b[8] = 0x80;
        b[15] = node;
        Uuid::from_bytes(b)
    }

    fn change(stream: u8, time: Uuid, seq: i32) -> Change {
        Change {
            stream_id: StreamId::from_bytes([stream; 16]),
            time,
            batch_seq_no: seq,
            operation: Operation::Insert,
            expiration: false,
            ttl: None,
            end_of_batch: true,
            columns: Vec::new(),
        }
    }

    #[test]
    fn a_uuids_tick_is_its_timestamp() {
        let t = tick_of(Millis(1_700_000_000_123));
        assert_eq!(tick(&uuid(t, 1)), t);
        let real: Uuid = "b223c55e-6d07-11ea-7654-24e4fb3f20b9".parse().expect("a timeuuid");
        // As the reader reads a change's write time.
        let micros = shardwise_cdc::time::timeuuid_micros(&real);
        assert_eq!(((tick(&real) - UUID_EPOCH_OFFSET) / 10) as i64, micros);
        assert!(tick(&real) >= tick_of(Millis(micros / 1000)) && tick(&real) < tick_of(Millis(micros / 1000 + 1)));
    }

    /// Rows up to the position's are skipped, per stream; the first row
    /// after it, and every row after that, are not; a stream without a
    /// position skips nothing.
    #[test]
    fn rows_up_to_the_position_are_skipped_and_none_after() {
        let base = tick_of(Millis(1_000));
        let mut positions = Positions::new(Millis(500));
        let at = RowAt { time: uuid(base + 50, 1), seq: 1 };
        positions.streams.insert(StreamId::from_bytes([1; 16]), at);
        let mut skip = Skip::new(Some(&positions));
        let rows = [
            (change(1, uuid(base + 10, 3), 0), true),
            (change(1, uuid(base + 50, 1), 0), true),
            (change(2, uuid(base + 20, 1), 0), false),
            (change(1, uuid(base + 50, 1), 1), true),
            (change(1, uuid(base + 50, 1), 2), false),
            (change(1, uuid(base + 40, 1), 0), false),
        ];
        for (i, (c, skipped)) in rows.iter().enumerate() {
            assert_eq!(skip.skips(c), *skipped, "row {i}");
        }
        assert!(skip.is_done());
    }

    /// The position's row gone (expired): the rows of its tick are skipped,
    /// the first of a later tick is not, and skipping ends there.
    #[test]
    fn a_position_whose_row_is_gone_ends_at_the_next_tick() {
        let base = tick_of(Millis(1_000));
        let mut positions = Positions::new(Millis(500));
        positions.streams.insert(StreamId::from_bytes([1; 16]), RowAt { time: uuid(base + 50, 9), seq: 0 });
        let mut skip = Skip::new(Some(&positions));
        assert!(skip.skips(&change(1, uuid(base + 50, 2), 0)));
        assert!(!skip.skips(&change(1, uuid(base + 51, 2), 0)));
        assert!(!skip.skips(&change(1, uuid(base + 50, 3), 0)), "done: nothing more is skipped");
    }

    #[test]
    fn values_round_trip_and_old_positions_are_pruned() {
        let mut positions = Positions::new(Millis(1_700_000_000_000));
        positions
            .streams
            .insert(StreamId::from_bytes([1; 16]), RowAt { time: uuid(tick_of(Millis(5_000)), 1), seq: 3 });
        positions
            .streams
            .insert(StreamId::from_bytes([2; 16]), RowAt { time: uuid(tick_of(Millis(9_000)), 1), seq: 0 });
        let value = positions.value();
        assert_eq!(Positions::parse(&value), Some(positions.clone()), "{value}");
        assert_eq!(Positions::parse("1000"), Some(Positions::new(Millis(1000))));
        assert_eq!(Positions::parse("1000 nope"), None);
        assert_eq!(Positions::parse("x"), None);
        positions.prune(Millis(5_001));
        assert_eq!(positions.streams.len(), 1, "the row at 5,000 ms is before a progress of 5,001");
        positions.prune(Millis(9_000));
        assert_eq!(positions.streams.len(), 1, "the row at 9,000 ms is not before 9,000");
        assert_eq!(record_key_of(&positions_key("t/ks.t_scylla_cdc_log/ab")), Some("t/ks.t_scylla_cdc_log/ab"));
    }
}
