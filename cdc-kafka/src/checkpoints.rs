//! The checkpoint store of a reader feeding the sink: the sink's checkpoint
//! topic, read with `read_committed`.
//!
//! The sink writes a group's progress with each window it delivers, in the
//! window's transaction ([`shardwise_cdc::checkpoint::record`]), so the
//! topic never runs ahead of or behind the messages. The reader's own
//! periodic saves are therefore not needed: [`KafkaCheckpoints::save`] does
//! nothing, and a restarted reader resumes from what the topic says.
//!
//! A generation is recorded once a window of it is delivered, and the reader
//! starts a generation only after every group of the one before has been
//! read to its end; so the newest generation in the topic is the one to
//! resume, and its groups without a record start at its beginning
//! (`docs/kafka-sink.md` §2 and §3).

use std::time::Duration;

use shardwise_cdc::checkpoint::record::{parse_record, RecordFold};
use shardwise_cdc::checkpoint::{Checkpoint, CheckpointError, CheckpointStore};
use shardwise_cdc::BoxFuture;

use crate::topic::{read_topic, Isolation};
use crate::SinkError;

/// Loads checkpoints from the sink's checkpoint topic; saves nothing (the
/// sink records progress in each window's transaction).
#[derive(Debug, Clone)]
pub struct KafkaCheckpoints {
    brokers: String,
    topic: String,
    timeout: Duration,
}

impl KafkaCheckpoints {
    /// The checkpoints in `topic` of the cluster at `brokers`; reading the
    /// topic at start takes at most `timeout`.
    pub fn new(brokers: &str, topic: &str, timeout: Duration) -> Self {
        KafkaCheckpoints { brokers: brokers.to_owned(), topic: topic.to_owned(), timeout }
    }

    /// Every checkpoint record of the topic, folded (blocking).
    pub fn read(&self) -> Result<RecordFold, SinkError> {
        let mut fold = RecordFold::new();
        let messages = read_topic(&self.brokers, &self.topic, Isolation::ReadCommitted, self.timeout)?;
        for m in messages.unwrap_or_default() {
            let record = parse_record(m.key.as_deref().unwrap_or_default(), m.value.as_deref().unwrap_or_default())
                .map_err(|source| SinkError::Record {
                    topic: self.topic.clone(),
                    partition: m.partition,
                    offset: m.offset,
                    source,
                })?;
            fold.add(record);
        }
        Ok(fold)
    }

    async fn load_checkpoint(&self, log: &str) -> Result<Option<Checkpoint>, CheckpointError> {
        let this = self.clone();
        let fold = tokio::task::spawn_blocking(move || this.read())
            .await
            .map_err(|e| CheckpointError::Store(e.to_string()))?
            .map_err(|e| CheckpointError::Store(e.to_string()))?;
        Ok(fold.checkpoint(log))
    }
}

impl CheckpointStore for KafkaCheckpoints {
    fn load<'a>(&'a self, table: &'a str) -> BoxFuture<'a, Result<Option<Checkpoint>, CheckpointError>> {
        Box::pin(self.load_checkpoint(table))
    }

    fn save<'a>(&'a self, _table: &'a str, _checkpoint: &'a Checkpoint) -> BoxFuture<'a, Result<(), CheckpointError>> {
        Box::pin(std::future::ready(Ok(())))
    }
}
