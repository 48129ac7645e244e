//! The sink: a consumer per stream group that turns each change into its
//! Debezium envelope, keeps a window's envelopes, and at the window's end
//! writes them to the table's topic together with the group's checkpoint
//! record (`<topic>/<log>/<group>` → `"<generation> <progress>"`) in the
//! checkpoint topic.
//!
//! **Exactly once** ([`Delivery::ExactlyOnce`]): the window's messages and
//! its checkpoint record are one Kafka transaction. The reader moves a
//! group's progress past a window only after its `window_end` returned, and
//! a restarted sink resumes from the checkpoint topic read with
//! `read_committed` up to its high watermark ([`crate::KafkaCheckpoints`]).
//! So a crash at any point either committed a window with its record (not
//! read again) or aborted both (read again): a `read_committed` consumer of
//! the topic sees every change once. Who is fenced, a previous run or a
//! group's earlier holder, is [`crate::producers`]' concern
//! (`docs/kafka-sink.md` §1 and §3).
//!
//! **At least once** ([`Delivery::AtLeastOnce`]): the same messages and
//! records without a transaction; the window ends once Kafka acknowledged
//! them all. A crash between the messages and the record repeats the window.
//!
//! Windows without an envelope write nothing: reading them again after a
//! restart delivers nothing twice. Messages are keyed by the primary key,
//! as the connector keys them, or by the partition key alone
//! ([`KeyMode::PartitionKey`]) so that a partition delete lands in the
//! Kafka partition of its partition's rows.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use shardwise_cdc::checkpoint::log_name;
use shardwise_cdc::checkpoint::record::{record_key, RecordFold};
use shardwise_cdc::debezium::{Envelopes, JsonSchemas, KeyColumns, Source, TableTypes};
use shardwise_cdc::{
    ChangeWithImages, Consumer, ConsumerError, ConsumerFactory, GroupInfo, ImagesConsumer, Millis, ReadWindow,
    StreamId, WithImages,
};

use crate::checkpoints::KafkaCheckpoints;
use crate::producers::{Fencing, GroupRecord, Producers};
use crate::topic::Tail;
use crate::Brokers;
use crate::SinkError;

/// How messages reach Kafka.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Delivery {
    /// Each window and its checkpoint record in one transaction of a
    /// producer with this `transactional.id` (keep it across restarts;
    /// with [`Fencing::PerGroup`], the prefix of the groups' ids).
    ExactlyOnce {
        /// The producer's `transactional.id`.
        transactional_id: String,
    },
    /// No transactions: a crash repeats the window being written.
    AtLeastOnce,
}

/// What a message's key is made of.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum KeyMode {
    /// The primary key, as the ScyllaDB connector keys its messages. A
    /// partition delete (null clustering key) gets another key, and so may
    /// land in another Kafka partition, than its partition's rows.
    #[default]
    PrimaryKey,
    /// The partition key alone (these columns): every change of a partition
    /// goes to one Kafka partition, in order.
    PartitionKey(Vec<String>),
}

/// Where the sink writes, and how.
#[derive(Debug, Clone)]
pub struct SinkConfig {
    /// The Kafka cluster (`host:port[,host:port…]`).
    pub brokers: String,
    /// librdkafka settings for every client of the sink: a secured
    /// cluster's (`security.protocol`, `sasl.*`, `ssl.*`) or others; not
    /// those the sink sets itself ([`crate::brokers::SINK_OWNED`]).
    pub kafka_settings: Vec<(String, String)>,
    /// The connector's logical name (the envelopes' `source.name`).
    pub name: String,
    /// The base table's keyspace.
    pub keyspace: String,
    /// The base table.
    pub table: String,
    /// The topic of the changes (by default `name.keyspace.table`, the
    /// connector's).
    pub topic: String,
    /// The topic of the checkpoint records (compacted; by default
    /// `<topic>.checkpoints`, one per sink). Records are keyed by the
    /// changes' topic as well, so sinks may share one.
    pub checkpoint_topic: String,
    /// Exactly once or at least once.
    pub delivery: Delivery,
    /// Whom a transactional producer fences: a previous run, or a group's
    /// earlier holder (readers that share the table through leases).
    pub fencing: Fencing,
    /// What the messages' keys are made of.
    pub key: KeyMode,
    /// With or without Kafka Connect schemas (`JsonConverter`'s
    /// `schemas.enable`); without by default.
    pub schemas: JsonSchemas,
    /// The base table's column types ([`TableTypes::load`]), for non-frozen
    /// collections and the schemas of null columns; without them, columns
    /// are written from their values.
    pub types: Option<Arc<TableTypes>>,
    /// The most a Kafka call (initialising a producer, committing a
    /// window, reading the checkpoints) may take.
    pub timeout: Duration,
    /// How long Kafka keeps a transaction open before it aborts it (60 s
    /// by default; below the lease TTL for readers with leases, so that a
    /// holder that hangs mid-window holds `read_committed` consumers back
    /// no longer than its lease).
    pub transaction_timeout: Duration,
}

impl SinkConfig {
    /// Exactly-once delivery of `keyspace.table` to `brokers` under the
    /// logical name `name`: topic `name.keyspace.table`, checkpoints in
    /// `name.keyspace.table.checkpoints`, transactional id
    /// `shardwise-cdc-<topic>` for the process, keys of the primary key,
    /// 30 s per Kafka call, transactions of at most 60 s.
    pub fn new(brokers: &str, name: &str, keyspace: &str, table: &str) -> Self {
        let topic = Source { name, keyspace, table }.topic();
        SinkConfig {
            brokers: brokers.to_owned(),
            kafka_settings: Vec::new(),
            name: name.to_owned(),
            keyspace: keyspace.to_owned(),
            table: table.to_owned(),
            delivery: Delivery::ExactlyOnce { transactional_id: format!("shardwise-cdc-{topic}") },
            checkpoint_topic: format!("{topic}.checkpoints"),
            topic,
            fencing: Fencing::Process,
            key: KeyMode::PrimaryKey,
            schemas: JsonSchemas::Without,
            types: None,
            timeout: Duration::from_secs(30),
            transaction_timeout: Duration::from_secs(60),
        }
    }

    /// The cluster: [`brokers`](Self::brokers) with
    /// [`kafka_settings`](Self::kafka_settings).
    pub fn brokers(&self) -> Brokers {
        Brokers { servers: self.brokers.clone(), settings: self.kafka_settings.clone() }
    }

    /// The name the sink's checkpoint records give the log: the changes'
    /// topic and the log (`<topic>/<keyspace>.<table>_scylla_cdc_log`), so
    /// that sinks of one table into different topics keep apart.
    pub fn record_log(&self) -> String {
        format!("{}/{}", self.topic, log_name(&self.keyspace, &self.table))
    }
}

/// What the sink did so far.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SinkStats {
    /// Envelopes written (committed, in exactly-once mode).
    pub messages: u64,
    /// Windows written (each a transaction in exactly-once mode).
    pub windows: u64,
    /// Changes that make no Debezium row event (range deletes, TTL
    /// expirations): not written.
    pub no_event: u64,
}

pub(crate) struct Shared {
    pub(crate) config: SinkConfig,
    envelopes: Envelopes,
    /// The checkpoint topic, followed once a checkpoint is first read.
    pub(crate) tail: Mutex<Option<Arc<Tail<RecordFold>>>>,
    /// The log as the records name it ([`SinkConfig::record_log`]).
    log: String,
    pub(crate) producers: Producers,
    messages: AtomicU64,
    windows: AtomicU64,
    no_event: AtomicU64,
}

/// The Kafka sink; cheap to clone.
#[derive(Clone)]
pub struct KafkaSink {
    pub(crate) shared: Arc<Shared>,
}

impl std::fmt::Debug for KafkaSink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KafkaSink").field("config", &self.shared.config).finish()
    }
}

impl KafkaSink {
    /// Creates the sink's producer; in exactly-once mode with
    /// [`Fencing::Process`], initialises its transactions, which aborts
    /// what a previous run left open (with [`Fencing::PerGroup`], each
    /// group's producer is made when the reader takes the group). Blocking.
    pub fn new(config: SinkConfig) -> Result<Self, SinkError> {
        config.brokers().check()?;
        let producers = Producers::new(&config)?;
        let log = config.record_log();
        let mut envelopes =
            Envelopes::new(&Source { name: &config.name, keyspace: &config.keyspace, table: &config.table })
                .schemas(config.schemas);
        if let Some(types) = &config.types {
            envelopes = envelopes.types(types.clone());
        }
        Ok(KafkaSink {
            shared: Arc::new(Shared {
                config,
                envelopes,
                tail: Mutex::new(None),
                log,
                producers,
                messages: AtomicU64::new(0),
                windows: AtomicU64::new(0),
                no_event: AtomicU64::new(0),
            }),
        })
    }

    /// Creates the changes' topic (`partitions` partitions) and the
    /// compacted checkpoint topic (one partition) if they do not exist.
    pub async fn create_topics(&self, partitions: i32) -> Result<(), SinkError> {
        let c = &self.shared.config;
        let brokers = c.brokers();
        crate::topic::create_topic(&brokers, &c.topic, partitions, false).await?;
        crate::topic::create_topic(&brokers, &c.checkpoint_topic, 1, true).await
    }

    /// The checkpoint store to build the reader with.
    pub fn checkpoints(&self) -> KafkaCheckpoints {
        KafkaCheckpoints::new(self.clone())
    }

    /// The consumer factory to build the reader with.
    pub fn factory(&self) -> Arc<dyn ConsumerFactory> {
        let sink = self.clone();
        Arc::new(move |_: &GroupInfo| -> Box<dyn Consumer> {
            Box::new(WithImages::new(WindowBuffer { sink: sink.clone(), messages: Vec::new() }))
        })
    }

    /// What the sink did so far.
    pub fn stats(&self) -> SinkStats {
        let s = &self.shared;
        SinkStats {
            messages: s.messages.load(Ordering::Relaxed),
            windows: s.windows.load(Ordering::Relaxed),
            no_event: s.no_event.load(Ordering::Relaxed),
        }
    }

    /// Writes a window's envelopes (key, value) and the group's record: one
    /// transaction, or acknowledged messages in at-least-once mode.
    /// Blocking. A producer that a later holder of the group fenced fails
    /// with [`SinkError::Fenced`], and is forgotten.
    pub fn write_window(&self, messages: &[(String, String)], window: &ReadWindow) -> Result<(), SinkError> {
        self.write(messages, window.generation, window.streams.key(), window.to)?;
        let s = &*self.shared;
        s.messages.fetch_add(messages.len() as u64, Ordering::Relaxed);
        s.windows.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }

    /// Records that `group` of `generation` was read up to `progress` by
    /// windows without changes (which write nothing): one transaction with
    /// the record alone, unless the sink already wrote a record of the
    /// group as far. That is checked while the group's producer is held: a
    /// progress taken before a window of the group ended, and written once
    /// the window's further record was, writes nothing, so the group's last
    /// record (the one compaction keeps) never goes back. Other readers
    /// sharing the table wait for such records at a generation's end.
    /// Blocking; errors as [`KafkaSink::write_window`]'s.
    pub fn write_progress(&self, generation: Millis, group: StreamId, progress: Millis) -> Result<(), SinkError> {
        self.write(&[], generation, group, progress)
    }

    fn write(
        &self,
        messages: &[(String, String)],
        generation: Millis,
        group: StreamId,
        progress: Millis,
    ) -> Result<(), SinkError> {
        let s = &*self.shared;
        let key = record_key(&s.log, group);
        let record = GroupRecord { topic: &s.config.checkpoint_topic, key: &key, group, at: (generation, progress) };
        s.producers.write((&s.config.topic, messages), &record)
    }
}

/// One group's consumer: the envelopes of the window being read.
struct WindowBuffer {
    sink: KafkaSink,
    messages: Vec<(String, String)>,
}

impl ImagesConsumer for WindowBuffer {
    fn consume(&mut self, change: ChangeWithImages) -> Result<(), ConsumerError> {
        let (c, envelopes) = (&self.sink.shared.config, &self.sink.shared.envelopes);
        let now_ms = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_millis() as i64);
        match envelopes.envelope(&change, now_ms) {
            Some(e) => {
                let key = match &c.key {
                    KeyMode::PrimaryKey => e.key,
                    KeyMode::PartitionKey(columns) => envelopes.key(&change.delta, KeyColumns::Only(columns)),
                };
                self.messages.push((key, e.value));
            }
            None => {
                self.sink.shared.no_event.fetch_add(1, Ordering::Relaxed);
            }
        }
        Ok(())
    }

    fn window_end(&mut self, window: &ReadWindow) -> Result<(), ConsumerError> {
        if self.messages.is_empty() {
            return Ok(());
        }
        let result = self.sink.write_window(&self.messages, window);
        // Written, or to be read again from the last checkpoint: either way
        // this window's envelopes are not kept.
        self.messages.clear();
        result.map_err(|e| match e {
            e @ (SinkError::Fenced { .. } | SinkError::NotHeld(_) | SinkError::Unusable { .. }) => {
                ConsumerError::Fenced(Box::new(e))
            }
            e => ConsumerError::failed(e),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_the_connectors_names_and_a_checkpoint_topic_per_sink() {
        let config = SinkConfig::new("b:9092", "shop", "ks", "t");
        assert_eq!((config.topic.as_str(), config.checkpoint_topic.as_str()), ("shop.ks.t", "shop.ks.t.checkpoints"));
        assert_eq!(config.delivery, Delivery::ExactlyOnce { transactional_id: "shardwise-cdc-shop.ks.t".into() });
        assert_eq!((config.fencing, &config.key), (Fencing::Process, &KeyMode::PrimaryKey));
        assert_eq!(config.record_log(), "shop.ks.t/ks.t_scylla_cdc_log");
    }
}
