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
//! A takeover ([`CheckpointStore::fence`], readers with leases) first
//! initialises the group's own producer, which fences the group's earlier
//! holder in Kafka ([`crate::producers`]), and only then reads the group's
//! progress: what the earlier holder committed is in it, and it can commit
//! nothing more.
//!
//! A generation is recorded once a window of it is delivered, and the reader
//! starts a generation only after every group of the one before has been
//! read to its end; so the newest generation in the topic is the one to
//! resume (`docs/kafka-sink.md` §2 and §3).

use std::sync::Arc;

use shardwise_cdc::checkpoint::record::{parse_record, RecordFold};
use shardwise_cdc::checkpoint::{Checkpoint, CheckpointError, CheckpointStore, Fence};
use shardwise_cdc::{BoxFuture, Millis, StreamId};

use crate::topic::Tail;
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
    /// written to the topic by now is over (blocking). An empty fold if the
    /// topic does not exist.
    pub fn read(&self) -> Result<RecordFold, SinkError> {
        let c = &self.sink.shared.config;
        let mut tail = self.sink.shared.tail.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if tail.is_none() {
            let topic = c.checkpoint_topic.clone();
            let fold = move |fold: &mut RecordFold, m: crate::topic::TopicMessage| {
                let record = parse_record(m.key.as_deref().unwrap_or_default(), m.value.as_deref().unwrap_or_default())
                    .map_err(|source| SinkError::Record {
                        topic: topic.clone(),
                        partition: m.partition,
                        offset: m.offset,
                        source,
                    })?;
                fold.add(record);
                Ok(())
            };
            *tail = Tail::start(&c.brokers(), &c.checkpoint_topic, c.timeout, RecordFold::new(), fold)?.map(Arc::new);
        }
        let started = tail.clone();
        // Reads wait for the tail side by side, not one after the other.
        drop(tail);
        let Some(tail) = started else { return Ok(RecordFold::new()) };
        tail.settled(c.timeout)
    }

    /// The records' name of the reader's `log` (see
    /// [`crate::SinkConfig::record_log`]), or `log` itself where the topic
    /// holds only records of an earlier version, which named the log alone.
    fn named<'a>(&self, fold: &RecordFold, log: &'a str) -> std::borrow::Cow<'a, str> {
        let scoped = format!("{}/{log}", self.sink.shared.config.topic);
        if !fold.names(&scoped) && fold.names(log) {
            return log.into();
        }
        scoped.into()
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
            let fold = self.blocking(|this| this.read()).await?;
            Ok(fold.checkpoint(&self.named(&fold, table)))
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
                        match this.sink.write_progress(checkpoint.generation, g.group, g.progress) {
                            Ok(()) => {}
                            Err(SinkError::Fenced { .. } | SinkError::NotHeld(_) | SinkError::Unusable { .. }) => {
                                refused.push(g.group)
                            }
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
            Ok(fold.generation(&self.named(&fold, table), generation))
        })
    }

    /// Fences the group's earlier holder in Kafka (the group's producer is
    /// made and initialised), then reads its progress. The epoch stays 0:
    /// Kafka's producer epochs do the fencing, and saves are not made here.
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
                    this.read()
                })
                .await?;
            let saved = fold.generation(&self.named(&fold, table), generation);
            Ok(Fence { epoch: 0, progress: saved.and_then(|cp| cp.progress_of(group)) })
        })
    }
}
