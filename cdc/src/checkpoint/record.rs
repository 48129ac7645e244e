//! Checkpoints as key/value records, for stores that keep records rather
//! than rows (a compacted Kafka topic). Sans-IO: encoding, parsing and the
//! fold that turns the records read back into a [`Checkpoint`].
//!
//! One record per group and window: the key names the log and the group
//! (`ks.t_scylla_cdc_log/<first stream id in hex>`), the value the
//! generation and the progress in milliseconds (`"<generation> <progress>"`).
//! Keys are per group so that compaction keeps each group's latest record;
//! the group id (its first stream) is unique across generations. A record
//! is written with the window it covers, in one transaction, so a store
//! read with `read_committed` holds exactly the progress of what was
//! delivered.
//!
//! A writer that renamed the log in its keys (the Kafka sink added its
//! topic, `<topic>/<log>`) looks the checkpoint up under every name it gave
//! the log ([`RecordFold::checkpoint_of`]): each group's furthest progress
//! under any of them, so that a group recorded only under an older name
//! resumes from there too. A message of the store that is not a record (a
//! tombstone, another writer's) is a [`RecordError`] of
//! [`parse_message`], for the store to skip.

use std::collections::{BTreeMap, HashMap};

use crate::checkpoint::{Checkpoint, GroupProgress};
use crate::stream::StreamId;
use crate::time::Millis;

/// A record that is not a checkpoint record.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum RecordError {
    /// The key is not `<log>/<group id in hex>`.
    #[error("bad checkpoint record key {0:?}")]
    Key(String),
    /// The value is not `<generation ms> <progress ms>`.
    #[error("bad checkpoint record value {0:?}")]
    Value(String),
    /// A message with this key and no value: a tombstone, which deletes
    /// the key's earlier records in a compacted topic.
    #[error("a tombstone (no value) with the key {0:?}")]
    Tombstone(String),
}

/// The key of `group`'s record in `log`.
pub fn record_key(log: &str, group: StreamId) -> String {
    format!("{log}/{group}")
}

/// The value of a record: `group` of `generation` was read up to `progress`.
pub fn record_value(generation: Millis, progress: Millis) -> String {
    format!("{} {}", generation.0, progress.0)
}

/// One parsed record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Record {
    /// The log, as the reader names it (`keyspace.table_scylla_cdc_log`).
    pub log: String,
    /// The group's generation.
    pub generation: Millis,
    /// The group and its progress.
    pub progress: GroupProgress,
}

/// Parses a record's key and value.
pub fn parse_record(key: &[u8], value: &[u8]) -> Result<Record, RecordError> {
    let lossy = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
    let bad_key = || RecordError::Key(lossy(key));
    let bad_value = || RecordError::Value(lossy(value));
    let key_text = std::str::from_utf8(key).map_err(|_| bad_key())?;
    let (log, group) = key_text.rsplit_once('/').ok_or_else(bad_key)?;
    if log.is_empty() {
        return Err(bad_key());
    }
    let group: StreamId = group.parse().map_err(|_| bad_key())?;
    let value_text = std::str::from_utf8(value).map_err(|_| bad_value())?;
    let (generation, progress) = value_text.split_once(' ').ok_or_else(bad_value)?;
    let generation = generation.parse().map_err(|_| bad_value())?;
    let progress = progress.parse().map_err(|_| bad_value())?;
    Ok(Record {
        log: log.to_owned(),
        generation: Millis(generation),
        progress: GroupProgress { group, progress: Millis(progress), epoch: 0 },
    })
}

/// Parses a message of the store, whose key or value may be missing: no
/// key is a [`RecordError::Key`], no value a [`RecordError::Tombstone`].
pub fn parse_message(key: Option<&[u8]>, value: Option<&[u8]>) -> Result<Record, RecordError> {
    let key = key.ok_or_else(|| RecordError::Key(String::new()))?;
    let value = value.ok_or_else(|| RecordError::Tombstone(String::from_utf8_lossy(key).into_owned()))?;
    parse_record(key, value)
}

/// The records read back, folded: per log and generation, each group's
/// furthest progress (a group only moves forward, so the order in which
/// records are read does not matter).
#[derive(Debug, Default, Clone)]
pub struct RecordFold {
    logs: HashMap<String, BTreeMap<Millis, HashMap<StreamId, Millis>>>,
}

impl RecordFold {
    /// An empty fold.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds one record.
    pub fn add(&mut self, record: Record) {
        let groups = self.logs.entry(record.log).or_default().entry(record.generation).or_default();
        let progress = groups.entry(record.progress.group).or_insert(record.progress.progress);
        *progress = (*progress).max(record.progress.progress);
    }

    /// The checkpoint of `log`: its newest generation and the progress of
    /// that generation's groups (sorted by group); `None` if no record names
    /// `log`. Groups of the generation without a record start from its
    /// beginning.
    pub fn checkpoint(&self, log: &str) -> Option<Checkpoint> {
        self.checkpoint_of(&[log])
    }

    /// The checkpoint of one log that records name in several ways
    /// (`names`, the names versions of the writer gave it): the newest
    /// generation under any name, and the progress of that generation's
    /// groups, each the furthest under any name (sorted by group); `None`
    /// if no record has any of the names.
    pub fn checkpoint_of(&self, names: &[&str]) -> Option<Checkpoint> {
        let newest = names.iter().filter_map(|name| self.logs.get(*name)?.last_key_value().map(|(g, _)| *g)).max()?;
        self.generation_of(names, newest)
    }

    /// Whether any record names `log`.
    pub fn names(&self, log: &str) -> bool {
        self.logs.contains_key(log)
    }

    /// The progress recorded for the groups of `generation` of `log`;
    /// `None` if no record names them.
    pub fn generation(&self, log: &str, generation: Millis) -> Option<Checkpoint> {
        self.generation_of(&[log], generation)
    }

    /// The progress recorded for the groups of `generation` of the log
    /// that records name in the ways `names` holds, each group's the
    /// furthest under any name; `None` if no record under any of the names
    /// has that generation.
    pub fn generation_of(&self, names: &[&str], generation: Millis) -> Option<Checkpoint> {
        let mut merged: Option<HashMap<StreamId, Millis>> = None;
        for groups in names.iter().filter_map(|name| self.logs.get(*name)?.get(&generation)) {
            let merged = merged.get_or_insert_with(HashMap::new);
            for (&group, &progress) in groups {
                let furthest = merged.entry(group).or_insert(progress);
                *furthest = (*furthest).max(progress);
            }
        }
        merged.map(|groups| Self::of(generation, &groups))
    }

    fn of(generation: Millis, groups: &HashMap<StreamId, Millis>) -> Checkpoint {
        let mut groups: Vec<GroupProgress> =
            groups.iter().map(|(&group, &progress)| GroupProgress { group, progress, epoch: 0 }).collect();
        groups.sort_by_key(|g| g.group);
        Checkpoint { generation, groups }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    const LOG: &str = "ks.t_scylla_cdc_log";

    fn record(generation: i64, group: u8, progress: i64) -> Record {
        let key = record_key(LOG, StreamId::from_bytes([group; 16]));
        parse_record(key.as_bytes(), record_value(Millis(generation), Millis(progress)).as_bytes()).unwrap()
    }

    #[test]
    fn records_round_trip() {
        let r = record(5, 7, 9);
        assert_eq!(r.log, LOG);
        assert_eq!(
            (r.generation, r.progress.group, r.progress.progress),
            (Millis(5), StreamId::from_bytes([7; 16]), Millis(9))
        );
        assert_eq!(record_key(LOG, StreamId::from_bytes([0xab; 16])), format!("{LOG}/{}", "ab".repeat(16)));
        assert_eq!(record_value(Millis(-1), Millis(i64::MAX)), format!("-1 {}", i64::MAX));
    }

    #[test]
    fn bad_records_are_typed_errors() {
        let key = record_key(LOG, StreamId::from_bytes([7; 16])).into_bytes();
        let bad_keys: [&[u8]; 4] = [b"no-slash", b"/07070707070707070707070707070707", b"ks.t/not-hex", b"\xff/00"];
        for bad in bad_keys {
            assert!(matches!(parse_record(bad, b"1 2"), Err(RecordError::Key(_))), "{bad:?}");
        }
        for bad in [&b"12"[..], b"1 x", b"\xff 2", b""] {
            assert!(matches!(parse_record(&key, bad), Err(RecordError::Value(_))), "{bad:?}");
        }
        assert!(parse_record(&key, b"1 2").is_ok());
    }

    #[test]
    fn the_fold_keeps_the_newest_generation_and_the_furthest_progress() {
        let mut fold = RecordFold::new();
        assert_eq!(fold.checkpoint(LOG), None);
        for r in [record(1, 1, 50), record(1, 2, 40), record(2, 3, 70), record(2, 4, 60), record(2, 3, 65)] {
            fold.add(r);
        }
        let mut other = record(9, 1, 10);
        other.log = "ks.u_scylla_cdc_log".into();
        fold.add(other);
        let cp = fold.checkpoint(LOG).unwrap();
        assert_eq!(cp.generation, Millis(2));
        let groups: Vec<(StreamId, Millis)> = cp.groups.iter().map(|g| (g.group, g.progress)).collect();
        assert_eq!(
            groups,
            vec![(StreamId::from_bytes([3; 16]), Millis(70)), (StreamId::from_bytes([4; 16]), Millis(60))]
        );
        assert_eq!(fold.checkpoint("ks.u_scylla_cdc_log").unwrap().generation, Millis(9));
        let older = fold.generation(LOG, Millis(1)).unwrap();
        assert_eq!(older.groups.iter().map(|g| g.progress).collect::<Vec<_>>(), [Millis(50), Millis(40)]);
        assert_eq!(fold.generation(LOG, Millis(3)), None);
    }

    /// A log recorded under two names (an earlier version's and the
    /// current one's): each group at its furthest progress under either,
    /// groups recorded under one name only included, in the newest
    /// generation under either.
    #[test]
    fn a_log_under_two_names_folds_into_one_checkpoint() {
        const NEW: &str = "shop.ks.t/ks.t_scylla_cdc_log";
        let mut fold = RecordFold::new();
        let named =
            |log: &str, generation, group, progress| Record { log: log.into(), ..record(generation, group, progress) };
        for r in [
            named(LOG, 1, 1, 40),
            named(LOG, 1, 2, 70),
            named(LOG, 1, 3, 90),
            named(NEW, 1, 1, 60),
            named(NEW, 1, 3, 80),
            named(NEW, 1, 4, 10),
        ] {
            fold.add(r);
        }
        let progress =
            |cp: Checkpoint| cp.groups.iter().map(|g| (g.group.as_bytes()[0], g.progress.0)).collect::<Vec<_>>();
        let merged = [(1, 60), (2, 70), (3, 90), (4, 10)];
        assert_eq!(fold.checkpoint_of(&[NEW, LOG]).map(progress), Some(merged.to_vec()));
        assert_eq!(fold.checkpoint_of(&[LOG, NEW]).map(progress), Some(merged.to_vec()), "in any order");
        assert_eq!(fold.generation_of(&[NEW, LOG], Millis(1)).map(progress), Some(merged.to_vec()));
        assert_eq!(fold.checkpoint_of(&[NEW]).map(progress), Some(vec![(1, 60), (3, 80), (4, 10)]));
        assert_eq!(fold.generation_of(&[NEW, LOG], Millis(2)), None);
        assert_eq!(fold.checkpoint_of(&["ks.u_scylla_cdc_log"]), None);
        assert_eq!(fold.checkpoint_of(&[]), None);

        // The newest generation under either name, whichever it is under.
        fold.add(named(LOG, 2, 5, 5));
        let cp = fold.checkpoint_of(&[NEW, LOG]).unwrap();
        assert_eq!((cp.generation, progress(cp)), (Millis(2), vec![(5, 5)]));
        fold.add(named(NEW, 3, 6, 7));
        let cp = fold.checkpoint_of(&[NEW, LOG]).unwrap();
        assert_eq!((cp.generation, progress(cp)), (Millis(3), vec![(6, 7)]));
        assert_eq!(fold.generation_of(&[NEW, LOG], Millis(2)).map(progress), Some(vec![(5, 5)]));
    }

    /// What a store holds that is not a record: no key, no value (a
    /// tombstone), a key that is not a record's; each a typed error.
    #[test]
    fn messages_that_are_not_records_are_typed_errors() {
        let key = record_key(LOG, StreamId::from_bytes([7; 16]));
        assert_eq!(parse_message(None, Some(b"1 2")), Err(RecordError::Key(String::new())));
        assert_eq!(parse_message(Some(key.as_bytes()), None), Err(RecordError::Tombstone(key.clone())));
        assert_eq!(
            parse_message(Some(b"offsets-of-another"), None),
            Err(RecordError::Tombstone("offsets-of-another".into()))
        );
        assert!(matches!(parse_message(Some(b"not a key"), Some(b"1 2")), Err(RecordError::Key(_))));
        assert!(matches!(parse_message(Some(key.as_bytes()), Some(b"{}")), Err(RecordError::Value(_))));
        assert_eq!(parse_message(Some(key.as_bytes()), Some(b"1 2")), parse_record(key.as_bytes(), b"1 2"));
    }

    /// A log named with a prefix (`<topic>/<log>`, as the Kafka sink names
    /// it) round-trips: the group is what follows the last slash.
    #[test]
    fn a_prefixed_log_round_trips() {
        let group = StreamId::from_bytes([5; 16]);
        let key = record_key("shop.ks.t/ks.t_scylla_cdc_log", group);
        let r = parse_record(key.as_bytes(), b"1 2").unwrap();
        assert_eq!((r.log.as_str(), r.progress.group), ("shop.ks.t/ks.t_scylla_cdc_log", group));
    }
}
