//! The checkpoint store of a reader feeding the sink: the sink's checkpoint
//! topic, read with `read_committed` up to its high watermark.
//!
//! The sink writes a group's progress with each window it delivers, in the
//! window's transaction ([`shardwise_cdc::checkpoint::record`]), so the
//! topic never runs ahead of or behind the messages. The reader's own
//! periodic saves ([`KafkaCheckpoints::save`]) record only what windows
//! without changes moved (they write nothing): a restart reads less again,
//! and readers that share the table see each other's groups reach a
//! generation's end. Such a record is written by the group's producer, so
//! Kafka fences it as it fences windows.
//!
//! The topic is followed from its beginning by a [`Tail`], and read up to
//! where it ended when the read began, once every transaction written to it
//! by then is over: a `read_committed` read that stopped at the last stable
//! offset would miss this sink's records written after another writer's
//! transaction that is still open, and resume behind them. The tail makes
//! a read (one per takeover) a watermark query rather than a new consumer.
//!
//! Records are keyed by the changes' topic and the log
//! ([`crate::SinkConfig::record_log`]); an earlier version keyed them by the
//! log alone. Both are read: each group resumes from its furthest progress
//! under either name, in the newest generation under either
//! ([`RecordFold::checkpoint_of`]), so a group that only the earlier
//! version recorded resumes where it was too. A message of the topic that
//! is not a checkpoint record (a tombstone, another writer's record) is
//! skipped with a warning, and the tail goes on.
//!
//! A takeover ([`CheckpointStore::fence`], readers with leases) first
//! initialises the group's own producer, which fences the group's earlier
//! holder in Kafka ([`crate::producers`]), and only then reads the group's
//! progress: what the earlier holder committed is in it, and it can commit
//! nothing more.
//!
//! The topic also holds the positions records of windows split into parts
//! ([`crate::positions`]); a group taken (or resumed at start) takes its
//! positions from there, so that its consumer skips the rows those parts
//! committed. With [`crate::Fencing::Group`] a save writes a group's
//! progress only while the group is assigned here under the epoch it was
//! read in (a generation's final progress, epoch 0, whoever holds it).
//!
//! A generation is recorded once a window of it is delivered, and the reader
//! starts a generation only after every group of the one before has been
//! read to its end; so the newest generation in the topic is the one to
//! resume (`docs/kafka-sink.md` §2 and §3).

use std::collections::HashMap;
use std::sync::Arc;

use shardwise_cdc::checkpoint::record::{parse_message, record_key, RecordFold};
use shardwise_cdc::checkpoint::{Checkpoint, CheckpointError, CheckpointStore, Fence};
use shardwise_cdc::{BoxFuture, Millis, StreamId};

use crate::positions::{positions_key, record_key_of, Positions};
use crate::topic::{Tail, TopicMessage};
use crate::{KafkaSink, SinkError};

/// Loads checkpoints from the sink's checkpoint topic and fences takeovers
/// in Kafka; saves only what windows without changes moved (the sink
/// records progress in each window's transaction).
#[derive(Debug, Clone)]
pub struct KafkaCheckpoints {
    sink: KafkaSink,
}

impl KafkaCheckpoints {
    pub(crate) fn new(sink: KafkaSink) -> Self {
        KafkaCheckpoints { sink }
    }

    /// Every checkpoint record of the topic, folded, once every transaction
    /// written to the topic by now is over (blocking); messages that are
    /// not checkpoint records skipped (with a warning). An empty fold if
    /// the topic does not exist.
    pub fn read(&self) -> Result<RecordFold, SinkError> {
        Ok(self.read_all()?.records)
    }

    /// [`KafkaCheckpoints::read`], with the positions records.
    pub(crate) fn read_all(&self) -> Result<SinkFold, SinkError> {
        let c = &self.sink.shared.config;
        let mut tail = self.sink.shared.tail.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if tail.is_none() {
            let topic = c.checkpoint_topic.clone();
            let fold = move |fold: &mut SinkFold, m: TopicMessage| {
                fold.add(&topic, &m);
                Ok(())
            };
            *tail = Tail::start(&c.brokers(), &c.checkpoint_topic, c.timeout, SinkFold::default(), fold)?.map(Arc::new);
        }
        let started = tail.clone();
        // Reads wait for the tail side by side, not one after the other.
        drop(tail);
        let Some(tail) = started else { return Ok(SinkFold::default()) };
        tail.settled(c.timeout)
    }

    /// The positions `fold` holds of `group` (this sink's records).
    fn positions(&self, fold: &SinkFold, group: StreamId) -> Option<Positions> {
        fold.positions.get(&positions_key(&record_key(self.sink.record_log(), group))).cloned()
    }

    /// The checkpoint of the reader's `log` in `fold`: its records under
    /// this sink's name ([`crate::SinkConfig::record_log`]) and under the
    /// log alone (an earlier version's), each group at its furthest.
    fn checkpoint(&self, fold: &RecordFold, log: &str) -> Option<Checkpoint> {
        fold.checkpoint_of(&[&self.scoped(log), log])
    }

    /// The progress of `generation`'s groups of `log` in `fold`, under
    /// either name (see [`KafkaCheckpoints::checkpoint`]).
    fn generation(&self, fold: &RecordFold, log: &str, generation: Millis) -> Option<Checkpoint> {
        fold.generation_of(&[&self.scoped(log), log], generation)
    }

    /// This sink's name of the reader's `log`: `<topic>/<log>`.
    fn scoped(&self, log: &str) -> String {
        format!("{}/{log}", self.sink.shared.config.topic)
    }

    /// Runs `f` on a blocking thread; its errors as the store's.
    async fn blocking<T: Send + 'static>(
        &self,
        f: impl FnOnce(KafkaCheckpoints) -> Result<T, SinkError> + Send + 'static,
    ) -> Result<T, CheckpointError> {
        let this = self.clone();
        tokio::task::spawn_blocking(move || f(this))
            .await
            .map_err(|e| CheckpointError::Store(e.to_string()))?
            .map_err(|e| CheckpointError::Store(e.to_string()))
    }
}

impl CheckpointStore for KafkaCheckpoints {
    fn load<'a>(&'a self, table: &'a str) -> BoxFuture<'a, Result<Option<Checkpoint>, CheckpointError>> {
        Box::pin(async move {
            let fold = self.blocking(|this| this.read_all()).await?;
            let checkpoint = self.checkpoint(&fold.records, table);
            // Resuming: the positions of windows split in parts, of every
            // group this sink recorded them for, with a checkpoint record or
            // not (a group's first window may be all it wrote); each applies
            // to its own generation only.
            for (group, positions) in fold.positions_of(self.sink.record_log()) {
                self.sink.found_positions(group, Some(positions));
            }
            Ok(checkpoint)
        })
    }

    /// Records the progress of each group that windows without changes
    /// moved past its last record; groups whose producer was fenced are
    /// named in [`CheckpointError::Fenced`].
    fn save<'a>(&'a self, _table: &'a str, checkpoint: &'a Checkpoint) -> BoxFuture<'a, Result<(), CheckpointError>> {
        let checkpoint = checkpoint.clone();
        Box::pin(async move {
            let refused = self
                .blocking(move |this| {
                    let mut refused = Vec::new();
                    for g in &checkpoint.groups {
                        match this.sink.write_progress_of(checkpoint.generation, g.group, g.progress, g.epoch) {
                            Ok(()) => {}
                            Err(
                                SinkError::Fenced { .. }
                                | SinkError::NotHeld(_)
                                | SinkError::Unusable { .. }
                                | SinkError::CommitUnknown { .. }
                                | SinkError::NotAssigned(_)
                                | SinkError::Rebalanced { .. },
                            ) => refused.push(g.group),
                            Err(e) => return Err(e),
                        }
                    }
                    Ok(refused)
                })
                .await?;
            if refused.is_empty() {
                Ok(())
            } else {
                Err(CheckpointError::Fenced(refused))
            }
        })
    }

    fn load_generation<'a>(
        &'a self,
        table: &'a str,
        generation: Millis,
    ) -> BoxFuture<'a, Result<Option<Checkpoint>, CheckpointError>> {
        Box::pin(async move {
            let fold = self.blocking(|this| this.read()).await?;
            Ok(self.generation(&fold, table, generation))
        })
    }

    /// Fences the group's earlier holder in Kafka (the group's producer is
    /// made and initialised; with [`crate::Fencing::Group`], the consumer
    /// group's generation fences it, and the group was assigned here
    /// before this is called), then reads its progress and positions. The
    /// epoch stays 0: Kafka's producer epochs (or the group's generations)
    /// do the fencing, and saves are not made here.
    fn fence<'a>(
        &'a self,
        table: &'a str,
        generation: Millis,
        group: StreamId,
    ) -> BoxFuture<'a, Result<Fence, CheckpointError>> {
        Box::pin(async move {
            let fold = self
                .blocking(move |this| {
                    this.sink.shared.producers.fence(generation, group)?;
                    this.read_all()
                })
                .await?;
            let saved = self.generation(&fold.records, table, generation);
            let progress = saved.and_then(|cp| cp.progress_of(group));
            if let Some(progress) = progress {
                self.sink.shared.producers.found(group, (generation, progress));
            }
            self.sink.found_positions(group, self.positions(&fold, group));
            Ok(Fence { epoch: 0, progress })
        })
    }
}

/// The checkpoint topic folded: the checkpoint records, and the positions
/// records by key (the latest of each).
#[derive(Debug, Clone, Default)]
pub(crate) struct SinkFold {
    pub(crate) records: RecordFold,
    positions: HashMap<String, Positions>,
}

impl SinkFold {
    /// The positions records of the log `record_log` names, by group.
    fn positions_of(&self, record_log: &str) -> Vec<(StreamId, Positions)> {
        let prefix = format!("{record_log}/");
        self.positions
            .iter()
            .filter_map(|(key, positions)| {
                let group = record_key_of(key)?.strip_prefix(&prefix)?.parse().ok()?;
                Some((group, positions.clone()))
            })
            .collect()
    }

    /// Folds one message of the checkpoint topic `topic`: a positions
    /// record, else a checkpoint record (see [`fold_message`]).
    fn add(&mut self, topic: &str, m: &TopicMessage) {
        let key = m.key.as_deref().and_then(|k| std::str::from_utf8(k).ok());
        if let Some(key) = key.filter(|k| record_key_of(k).is_some()) {
            match m.value.as_deref().and_then(|v| std::str::from_utf8(v).ok()).and_then(Positions::parse) {
                Some(positions) => {
                    self.positions.insert(key.to_owned(), positions);
                }
                None => tracing::warn!(
                    topic,
                    partition = m.partition,
                    offset = m.offset,
                    "a positions record of the checkpoint topic that cannot be read is skipped"
                ),
            }
            return;
        }
        fold_message(&mut self.records, topic, m);
    }
}

/// Folds one message of the checkpoint topic `topic` into `fold`. A message
/// that is not a checkpoint record (a tombstone: no value; another
/// writer's: a key that is not a record's; a value that is not one) is
/// skipped with a warning: it says nothing of this sink's progress, and the
/// tail must go on past it.
fn fold_message(fold: &mut RecordFold, topic: &str, m: &TopicMessage) {
    match parse_message(m.key.as_deref(), m.value.as_deref()) {
        Ok(record) => fold.add(record),
        Err(error) => tracing::warn!(
            topic,
            partition = m.partition,
            offset = m.offset,
            %error,
            "a message of the checkpoint topic that is not a checkpoint record is skipped"
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const LOG: &str = "t/ks.t_scylla_cdc_log";

    fn message(offset: i64, key: Option<&str>, value: Option<&str>) -> TopicMessage {
        let bytes = |s: Option<&str>| s.map(|s| s.as_bytes().to_vec());
        TopicMessage { partition: 0, offset, key: bytes(key), value: bytes(value) }
    }

    /// Tombstones and other writers' messages are skipped, and the
    /// records around them are folded.
    #[test]
    fn messages_that_are_not_records_are_skipped() {
        let group = StreamId::from_bytes([7; 16]);
        let key = format!("{LOG}/{group}");
        let mut fold = RecordFold::new();
        for m in [
            message(0, Some(&key), Some("1000 100")),
            message(1, Some(&key), None),
            message(2, None, Some("1000 900")),
            message(3, Some("connect-offsets"), Some("{\"offset\":3}")),
            message(4, Some(&key), Some("not a value")),
            message(5, Some(&key), Some("1000 200")),
        ] {
            fold_message(&mut fold, "checkpoints", &m);
        }
        let cp = fold.checkpoint(LOG).expect("the records");
        assert_eq!(cp.groups.iter().map(|g| (g.group, g.progress)).collect::<Vec<_>>(), [(group, Millis(200))]);
    }

    /// Positions records are folded apart (the latest of each key), and
    /// found per group of the log whether the group has a checkpoint
    /// record or not; a bad one is skipped.
    #[test]
    fn positions_records_are_found_for_every_group() {
        let (a, b) = (StreamId::from_bytes([7; 16]), StreamId::from_bytes([8; 16]));
        let mut fold = SinkFold::default();
        let rows = |g: StreamId| positions_key(&format!("{LOG}/{g}"));
        let time = "b223c55e-6d07-11ea-7654-24e4fb3f20b9";
        for m in [
            message(0, Some(&format!("{LOG}/{a}")), Some("1000 100")),
            message(1, Some(&rows(a)), Some(&format!("1000 {a}@{time}#1"))),
            message(2, Some(&rows(a)), Some(&format!("1000 {a}@{time}#2"))),
            message(3, Some(&rows(b)), Some(&format!("1000 {b}@{time}#0"))),
            message(4, Some(&rows(b)), Some("not positions")),
            message(5, Some(&positions_key(&format!("other/{a}"))), Some("1000")),
        ] {
            fold.add("checkpoints", &m);
        }
        let mut found = fold.positions_of(LOG);
        found.sort_by_key(|(g, _)| *g);
        let seqs: Vec<(StreamId, Vec<i32>)> =
            found.iter().map(|(g, p)| (*g, p.streams.values().map(|r| r.seq).collect())).collect();
        assert_eq!(seqs, [(a, vec![2]), (b, vec![0])], "the latest of a, b's readable one, none of another log's");
        assert_eq!(fold.records.checkpoint(LOG).map(|cp| cp.groups.len()), Some(1), "positions are no checkpoint");
    }
}
