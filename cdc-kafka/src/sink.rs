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
//! records without a transaction; the records are sent once Kafka
//! acknowledged the messages, and the window ends once it acknowledged the
//! records too. A crash between the messages and the record repeats the
//! window (what of it was on the broker), and none loses it.
//!
//! Windows without an envelope write nothing: reading them again after a
//! restart delivers nothing twice.
//!
//! **Bounded transactions**: a window of more than
//! [`SinkConfig::max_transaction_messages`] messages or
//! [`SinkConfig::max_transaction_bytes`] bytes (a long catch-up window, a
//! burst of writes) goes out in parts as its rows come, each part one
//! transaction with the group's positions record (per stream, the last row
//! committed); the last part carries the window's end as the group's
//! progress. A consumer that reads the group again skips the rows the
//! positions name, so a crash between two parts repeats and loses nothing
//! ([`crate::positions`]). No window is too big to commit.
//!
//! **Keys** ([`KeyMode`]): Kafka keeps order per partition only, and puts a
//! message in the partition its key hashes to; so the key decides which
//! changes a consumer sees in write order. By default a message is keyed by
//! the base table's partition key ([`KeyMode::PartitionKey`], read from the
//! schema by [`SinkConfig::load_table`]): every change of a partition, its
//! partition deletes included, goes to one Kafka partition, in order. The
//! connector's key, the primary key ([`KeyMode::PrimaryKey`]), stays for
//! consumers that expect it; but a partition delete has no clustering key,
//! so it gets another key than the rows it deletes and may land in another
//! Kafka partition, seen before or after their changes. That is why it is
//! not the default. Range deletes make no row event and are not written.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use shardwise::session::schema::KeyspaceMetadata;
use shardwise_cdc::checkpoint::log_name;
use shardwise_cdc::checkpoint::record::record_key;
use shardwise_cdc::debezium::{Envelopes, JsonSchemas, KeyColumns, Source, TableTypes, TypeError};
use shardwise_cdc::{
    Change, ChangeWithImages, Consumer, ConsumerError, ConsumerFactory, GroupInfo, ImagesConsumer, Millis, ReadWindow,
    StreamId, WithImages,
};

use crate::checkpoints::KafkaCheckpoints;
use crate::positions::{positions_key, Positions, RowAt, Skip};
use crate::producers::{Fencing, Producers, Write};
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

/// What a message's key is made of: Kafka keeps the messages of one key
/// in one partition, in order, and promises no order across partitions.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KeyMode {
    /// The base table's partition key (these columns), the default: every
    /// change of a partition, its partition deletes included, gets one key,
    /// and so goes to one Kafka partition, in write order. No columns (what
    /// [`SinkConfig::new`] sets): the table's partition key, still to be read
    /// from the schema ([`SinkConfig::load_table`]); [`KafkaSink::new`]
    /// refuses it unread.
    PartitionKey(Vec<String>),
    /// The primary key, as the ScyllaDB CDC Source Connector keys its
    /// messages (its Debezium key), for consumers that expect those keys. A
    /// partition delete (null clustering key) gets another key than its
    /// partition's rows, and so may land in another Kafka partition: a
    /// consumer may see it before or after their changes.
    PrimaryKey,
}

impl Default for KeyMode {
    /// The table's partition key, to be read from the schema.
    fn default() -> Self {
        KeyMode::PartitionKey(Vec::new())
    }
}

impl KeyMode {
    /// Whether this is the partition key with its columns still unknown.
    fn unresolved(&self) -> bool {
        matches!(self, KeyMode::PartitionKey(columns) if columns.is_empty())
    }

    /// The Kafka key of the message of `delta`, whose envelope's key (the
    /// connector's) is `connector_key`.
    fn message_key(&self, envelopes: &Envelopes, delta: &Change, connector_key: String) -> String {
        match self {
            KeyMode::PrimaryKey => connector_key,
            KeyMode::PartitionKey(columns) => envelopes.key(delta, KeyColumns::Only(columns)),
        }
    }
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
    /// no longer than its lease; with [`Fencing::Group`], what a killed
    /// sink's open transaction holds the group's next holder back).
    pub transaction_timeout: Duration,
    /// The most messages one transaction holds (10,000 by default): a
    /// window with more goes out in parts, each with its positions.
    pub max_transaction_messages: usize,
    /// The most bytes of keys and values one transaction holds (8 MiB by
    /// default; a message alone may exceed it).
    pub max_transaction_bytes: usize,
}

impl SinkConfig {
    /// Exactly-once delivery of `keyspace.table` to `brokers` under the
    /// logical name `name`: topic `name.keyspace.table`, checkpoints in
    /// `name.keyspace.table.checkpoints`, transactional id
    /// `shardwise-cdc-<topic>` for the process, keys of the table's
    /// partition key (its columns read by [`SinkConfig::load_table`]), 30 s
    /// per Kafka call, transactions of at most 60 s.
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
            key: KeyMode::default(),
            schemas: JsonSchemas::Without,
            types: None,
            timeout: Duration::from_secs(30),
            transaction_timeout: Duration::from_secs(60),
            max_transaction_messages: 10_000,
            max_transaction_bytes: 8 << 20,
        }
    }

    /// Reads what the sink needs of the base table from the session's
    /// schema: its column types ([`types`](Self::types)), unless set, and
    /// the columns of its partition key, unless [`key`](Self::key) names
    /// them or is [`KeyMode::PrimaryKey`].
    pub async fn load_table(&mut self, session: &shardwise::Session) -> Result<(), SinkError> {
        let schema = session.schema().await.map_err(|e| TypeError::Schema(e.to_string()))?;
        let keyspace = schema.keyspaces.get(&self.keyspace).ok_or_else(|| self.no_table())?;
        self.table_from_metadata(keyspace)
    }

    /// [`load_table`](Self::load_table) from the metadata of the table's
    /// keyspace ([`shardwise::Session::schema`]).
    pub fn table_from_metadata(&mut self, keyspace: &KeyspaceMetadata) -> Result<(), SinkError> {
        let table = keyspace.tables.get(&self.table).ok_or_else(|| self.no_table())?;
        if self.types.is_none() {
            self.types = Some(Arc::new(TableTypes::from_metadata(&self.keyspace, keyspace, &self.table)?));
        }
        if self.key.unresolved() {
            self.key = KeyMode::PartitionKey(table.partition_key.clone());
        }
        Ok(())
    }

    fn no_table(&self) -> TypeError {
        TypeError::NoTable(format!("{}.{}", self.keyspace, self.table))
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
    /// Transactions that held a part of a window (one over the bounds),
    /// each with its positions.
    pub parts: u64,
    /// Changes not written again because a part of their window was
    /// committed before (read again after a restart or a takeover).
    pub skipped: u64,
    /// Transactions that failed without a fence (messages timed out while
    /// the broker or this process was paused) and were aborted and written
    /// again.
    pub aborted: u64,
    /// Producers replaced because they could no longer write (their
    /// transaction could not even be aborted: the new producer's
    /// initialisation aborts it), the write then made by the new one.
    pub replaced: u64,
}

pub(crate) struct Shared {
    pub(crate) config: SinkConfig,
    envelopes: Envelopes,
    /// The checkpoint topic, followed once a checkpoint is first read.
    pub(crate) tail: Mutex<Option<Arc<Tail<crate::checkpoints::SinkFold>>>>,
    /// The log as the records name it ([`SinkConfig::record_log`]).
    log: String,
    pub(crate) producers: Producers,
    /// Per group: the positions committed of a window split into parts
    /// (seeded when a group is taken or resumed, moved by each part).
    positions: Mutex<HashMap<StreamId, Positions>>,
    messages: AtomicU64,
    windows: AtomicU64,
    no_event: AtomicU64,
    parts: AtomicU64,
    skipped: AtomicU64,
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
    /// Keys of a partition key whose columns were never read
    /// ([`SinkConfig::load_table`]) are refused first, before it talks to
    /// Kafka ([`SinkError::PartitionKeyUnknown`]).
    pub fn new(config: SinkConfig) -> Result<Self, SinkError> {
        if config.key.unresolved() {
            return Err(SinkError::PartitionKeyUnknown(format!("{}.{}", config.keyspace, config.table)));
        }
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
                positions: Mutex::new(HashMap::new()),
                messages: AtomicU64::new(0),
                windows: AtomicU64::new(0),
                no_event: AtomicU64::new(0),
                parts: AtomicU64::new(0),
                skipped: AtomicU64::new(0),
            }),
        })
    }

    /// Creates the changes' topic (`partitions` partitions), the
    /// compacted checkpoint topic (one partition) and, with
    /// [`Fencing::Group`], the control topic, if they do not exist.
    pub async fn create_topics(&self, partitions: i32) -> Result<(), SinkError> {
        let c = &self.shared.config;
        let brokers = c.brokers();
        crate::topic::create_topic(&brokers, &c.topic, partitions, false).await?;
        crate::topic::create_topic(&brokers, &c.checkpoint_topic, 1, true).await?;
        if let Fencing::Group(group) = &c.fencing {
            crate::topic::create_topic(&brokers, &group.control_topic, group.partitions.max(1), false).await?;
        }
        Ok(())
    }

    /// With [`Fencing::Group`]: joins the consumer group on the control
    /// topic (once; it must exist, [`KafkaSink::create_topics`]) and returns
    /// its assignment, to build the reader with
    /// ([`shardwise_cdc::CdcReaderBuilder::assignment`]). Blocking. Without
    /// it, [`SinkError::NoGroup`].
    pub fn join_group(&self) -> Result<Arc<dyn shardwise_cdc::Assignment>, SinkError> {
        let membership: Arc<dyn shardwise_cdc::Assignment> = self.shared.producers.join()?;
        Ok(membership)
    }

    /// Leaves the consumer group, if joined: its partitions go to the other
    /// members at once (rather than after the session timeout). Blocking.
    pub fn leave_group(&self) {
        self.shared.producers.leave();
    }

    /// The checkpoint store to build the reader with.
    pub fn checkpoints(&self) -> KafkaCheckpoints {
        KafkaCheckpoints::new(self.clone())
    }

    /// The consumer factory to build the reader with.
    pub fn factory(&self) -> Arc<dyn ConsumerFactory> {
        let sink = self.clone();
        Arc::new(move |info: &GroupInfo| -> Box<dyn Consumer> {
            let group = info.streams.key();
            let committed = sink.positions_of(info.generation, group);
            Box::new(WithImages::new(WindowBuffer {
                sink: sink.clone(),
                generation: info.generation,
                group,
                epoch: info.epoch,
                skip: Skip::new(committed.as_ref()),
                messages: Vec::new(),
                bytes: 0,
                last: HashMap::new(),
            }))
        })
    }

    /// What the sink did so far.
    pub fn stats(&self) -> SinkStats {
        let s = &self.shared;
        SinkStats {
            messages: s.messages.load(Ordering::Relaxed),
            windows: s.windows.load(Ordering::Relaxed),
            no_event: s.no_event.load(Ordering::Relaxed),
            parts: s.parts.load(Ordering::Relaxed),
            skipped: s.skipped.load(Ordering::Relaxed),
            aborted: s.producers.aborted.load(Ordering::Relaxed),
            replaced: s.producers.replaced.load(Ordering::Relaxed),
        }
    }

    /// The positions committed of `group` of `generation`, if a window of it
    /// was split.
    fn positions_of(&self, generation: Millis, group: StreamId) -> Option<Positions> {
        let positions = self.shared.positions.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        positions.get(&group).filter(|p| p.generation == generation).cloned()
    }

    /// `group` was taken (or resumed) with these positions found in the
    /// checkpoint topic.
    pub(crate) fn found_positions(&self, group: StreamId, found: Option<Positions>) {
        let mut positions = self.shared.positions.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        match found {
            Some(p) => positions.insert(group, p),
            None => positions.remove(&group),
        };
    }

    /// The log as the records name it ([`SinkConfig::record_log`]).
    pub(crate) fn record_log(&self) -> &str {
        &self.shared.log
    }

    /// Writes a part of a window of `group` (read under `epoch`): its
    /// envelopes and the group's `positions` (the last row of each stream
    /// committed with it), one transaction. Blocking; errors as
    /// [`KafkaSink::write_window`]'s.
    fn write_part(
        &self,
        messages: &[(String, String)],
        group: StreamId,
        epoch: u64,
        positions: &Positions,
    ) -> Result<(), SinkError> {
        let s = &*self.shared;
        let key = positions_key(&record_key(&s.log, group));
        let value = positions.value();
        s.producers.write(&Write {
            messages: (&s.config.topic, messages),
            checkpoints: &s.config.checkpoint_topic,
            group,
            record: None,
            positions: Some((&key, &value)),
            epoch,
        })?;
        s.messages.fetch_add(messages.len() as u64, Ordering::Relaxed);
        s.parts.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }

    /// Writes a window's envelopes (key, value) and the group's record: one
    /// transaction, or acknowledged messages in at-least-once mode.
    /// Blocking. A producer that a later holder of the group fenced fails
    /// with [`SinkError::Fenced`], and is forgotten.
    pub fn write_window(&self, messages: &[(String, String)], window: &ReadWindow) -> Result<(), SinkError> {
        self.write(messages, window.generation, window.streams.key(), window.to, window.epoch)?;
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
    ///
    /// With [`Fencing::Group`], written only while the group is assigned
    /// here (under any epoch); the reader's own saves go through
    /// [`KafkaCheckpoints`], which checks the epoch they were read under.
    pub fn write_progress(&self, generation: Millis, group: StreamId, progress: Millis) -> Result<(), SinkError> {
        let epoch = self.shared.producers.assigned(group).unwrap_or(0);
        self.write(&[], generation, group, progress, epoch)
    }

    /// [`KafkaSink::write_progress`] of a group read under `epoch`.
    pub(crate) fn write_progress_of(
        &self,
        generation: Millis,
        group: StreamId,
        progress: Millis,
        epoch: u64,
    ) -> Result<(), SinkError> {
        self.write(&[], generation, group, progress, epoch)
    }

    fn write(
        &self,
        messages: &[(String, String)],
        generation: Millis,
        group: StreamId,
        progress: Millis,
        epoch: u64,
    ) -> Result<(), SinkError> {
        let s = &*self.shared;
        let key = record_key(&s.log, group);
        s.producers.write(&Write {
            messages: (&s.config.topic, messages),
            checkpoints: &s.config.checkpoint_topic,
            group,
            record: Some((&key, (generation, progress))),
            positions: None,
            epoch,
        })
    }
}

/// One group's consumer: the envelopes of the window being read (or of
/// its part not committed yet).
struct WindowBuffer {
    sink: KafkaSink,
    generation: Millis,
    group: StreamId,
    /// The hold the consumer reads under.
    epoch: u64,
    /// What parts committed before hold already (see [`crate::positions`]).
    skip: Skip,
    messages: Vec<(String, String)>,
    /// Bytes of the messages' keys and values.
    bytes: usize,
    /// Per stream, the last row read by this consumer.
    last: HashMap<StreamId, RowAt>,
}

impl WindowBuffer {
    /// Whether the messages buffered make a transaction as big as allowed.
    fn full(&self) -> bool {
        let c = &self.sink.shared.config;
        self.messages.len() >= c.max_transaction_messages.max(1) || self.bytes >= c.max_transaction_bytes.max(1)
    }

    /// Commits the messages buffered as a part of the window, with the
    /// positions they reach.
    fn write_part(&mut self) -> Result<(), ConsumerError> {
        let mut positions =
            self.sink.positions_of(self.generation, self.group).unwrap_or(Positions::new(self.generation));
        positions.merge(&self.last);
        let result = self.sink.write_part(&self.messages, self.group, self.epoch, &positions);
        self.messages.clear();
        self.bytes = 0;
        result.map_err(consumer_error)?;
        self.sink.found_positions(self.group, Some(positions));
        Ok(())
    }
}

/// A sink error as the reader sees it: the group's hold is over (it is
/// left), or the reader stops.
fn consumer_error(e: SinkError) -> ConsumerError {
    match e {
        e @ (SinkError::Fenced { .. }
        | SinkError::NotHeld(_)
        | SinkError::Unusable { .. }
        | SinkError::CommitUnknown { .. }
        | SinkError::NotAssigned(_)
        | SinkError::Rebalanced { .. }) => ConsumerError::Fenced(Box::new(e)),
        e => ConsumerError::failed(e),
    }
}

impl ImagesConsumer for WindowBuffer {
    fn consume(&mut self, change: ChangeWithImages) -> Result<(), ConsumerError> {
        if self.skip.skips(&change.delta) {
            self.sink.shared.skipped.fetch_add(1, Ordering::Relaxed);
            return Ok(());
        }
        self.last.insert(change.delta.stream_id, RowAt::of(&change.delta));
        let (c, envelopes) = (&self.sink.shared.config, &self.sink.shared.envelopes);
        let now_ms = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_millis() as i64);
        match envelopes.envelope(&change, now_ms) {
            Some(e) => {
                let key = c.key.message_key(envelopes, &change.delta, e.key);
                self.bytes += key.len() + e.value.len();
                self.messages.push((key, e.value));
            }
            None => {
                self.sink.shared.no_event.fetch_add(1, Ordering::Relaxed);
            }
        }
        if self.full() {
            self.write_part()?;
        }
        Ok(())
    }

    fn window_end(&mut self, window: &ReadWindow) -> Result<(), ConsumerError> {
        self.last.clear();
        // While positions of parts are kept, the window ends with its record
        // even when its last part took every message (or the parts of an
        // earlier hold had, and every row was skipped): the positions are
        // pruned below, and the next part's positions record, without them,
        // would otherwise replace the one that has them while the group's
        // progress is still before this window (a takeover then read the
        // window again and wrote what the parts had committed a second
        // time).
        let positions = self.sink.positions_of(self.generation, self.group);
        if !self.messages.is_empty() || positions.is_some_and(|p| !p.streams.is_empty()) {
            let result = self.sink.write_window(&self.messages, window);
            // Written, or to be read again from the last checkpoint: either
            // way this window's envelopes are not kept.
            self.messages.clear();
            self.bytes = 0;
            result.map_err(consumer_error)?;
        }
        // The window is read: positions before its end are inert.
        if let Some(mut positions) = self.sink.positions_of(self.generation, self.group) {
            positions.prune(window.to);
            self.sink.found_positions(self.group, Some(positions));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use shardwise::protocol::types::CqlValue;
    use shardwise::session::schema::{ClusteringOrder, ColumnKind, ColumnMetadata, TableMetadata};
    use shardwise_cdc::{ChangeColumn, GroupId, Operation, StreamGroup};

    /// Issue 51: a window written in parts whose last part took every
    /// message still ends with its record (the group's progress at the
    /// window's end) before its positions are pruned. Before, it wrote
    /// none: the next window's part then replaced the positions record
    /// without this window's rows while the progress was still before it,
    /// and the group's next holder read the window again and wrote what
    /// the parts had committed a second time. librdkafka's mock broker.
    #[test]
    fn a_window_whose_last_part_took_every_message_still_records_its_end() {
        let mock = crate::producers::tests::Mock::new(&["out", "cp"]);
        let mut config = SinkConfig::new(&mock.servers, "n", "ks", "t");
        (config.topic, config.checkpoint_topic) = ("out".into(), "cp".into());
        config.key = KeyMode::PrimaryKey;
        config.max_transaction_messages = 2;
        let log = config.record_log();
        let sink = KafkaSink::new(config).expect("the sink");
        let streams = StreamGroup::new([StreamId::from_bytes([0x7f; 16])]).expect("a group");
        let group = streams.key();
        let generation = Millis(1);
        let mut buffer = WindowBuffer {
            sink: sink.clone(),
            generation,
            group,
            epoch: 0,
            skip: Skip::new(None),
            messages: Vec::new(),
            bytes: 0,
            last: HashMap::new(),
        };
        let window = |from: i64, to: i64| ReadWindow {
            group: GroupId(0),
            generation,
            streams: streams.clone(),
            from: Millis(from),
            to: Millis(to),
            epoch: 0,
        };
        for v in [1, 2] {
            buffer.consume(change(Operation::Insert, 1, Some(v), Some(i64::from(v)))).expect("consumed");
        }
        let end = 2_000_000_000_000;
        buffer.window_end(&window(0, end)).expect("the window ends");
        assert_eq!(mock.committed("out").len(), 2, "the part's messages");
        let fold = sink.checkpoints().read().expect("the checkpoint topic");
        let progress = fold.checkpoint_of(&[log.as_str()]).and_then(|c| c.progress_of(group));
        assert_eq!(progress, Some(Millis(end)), "the window's end is recorded");
    }

    #[test]
    fn defaults_are_the_connectors_names_and_a_checkpoint_topic_per_sink() {
        let config = SinkConfig::new("b:9092", "shop", "ks", "t");
        assert_eq!((config.topic.as_str(), config.checkpoint_topic.as_str()), ("shop.ks.t", "shop.ks.t.checkpoints"));
        assert_eq!(config.delivery, Delivery::ExactlyOnce { transactional_id: "shardwise-cdc-shop.ks.t".into() });
        assert_eq!((&config.fencing, &config.key), (&Fencing::Process, &KeyMode::PartitionKey(Vec::new())));
        assert_eq!(config.record_log(), "shop.ks.t/ks.t_scylla_cdc_log");
    }

    /// `ks`, holding `t (pk int, ck int, v bigint, PRIMARY KEY (pk, ck))`.
    fn keyspace() -> KeyspaceMetadata {
        let column = |name: &str, kind, typ: &str| ColumnMetadata {
            name: name.into(),
            kind,
            typ: typ.into(),
            position: if kind == ColumnKind::Regular { -1 } else { 0 },
            clustering_order: if kind == ColumnKind::Clustering { ClusteringOrder::Asc } else { ClusteringOrder::None },
        };
        let table = TableMetadata {
            columns: vec![
                column("pk", ColumnKind::PartitionKey, "int"),
                column("ck", ColumnKind::Clustering, "int"),
                column("v", ColumnKind::Regular, "bigint"),
            ],
            partition_key: vec!["pk".into()],
            clustering_key: vec!["ck".into()],
            ..TableMetadata::default()
        };
        KeyspaceMetadata { tables: [("t".to_owned(), table)].into(), ..KeyspaceMetadata::default() }
    }

    /// A change of `t` as the log has it: `pk`, `ck` (null for a partition
    /// delete) and `v`.
    fn change(operation: Operation, pk: i32, ck: Option<i32>, v: Option<i64>) -> ChangeWithImages {
        let col = |name: &str, key, value| ChangeColumn {
            name: Arc::from(name),
            key,
            value,
            deleted: false,
            deleted_elements: Vec::new(),
        };
        let delta = Change {
            stream_id: StreamId::from_bytes([0x7f; 16]),
            time: "b223c55e-6d07-11ea-7654-24e4fb3f20b9".parse().expect("a timeuuid"),
            batch_seq_no: 0,
            operation,
            expiration: false,
            ttl: None,
            end_of_batch: true,
            columns: vec![
                col("pk", true, Some(CqlValue::Int(pk))),
                col("ck", true, ck.map(CqlValue::Int)),
                col("v", false, v.map(CqlValue::BigInt)),
            ],
        };
        ChangeWithImages { delta, preimage: None, postimage: None }
    }

    /// The Kafka keys `config` gives these changes, as the sink's consumer
    /// makes them.
    fn keys(config: &SinkConfig, changes: &[ChangeWithImages]) -> Vec<String> {
        let source = Source { name: &config.name, keyspace: &config.keyspace, table: &config.table };
        let envelopes = Envelopes::new(&source).schemas(config.schemas);
        let key = |c: &ChangeWithImages| {
            let envelope = envelopes.envelope(c, 1_700_000_000_000).expect("a row event");
            config.key.message_key(&envelopes, &c.delta, envelope.key)
        };
        changes.iter().map(key).collect()
    }

    /// Issue 51: with the default settings, a partition delete has the key
    /// (so the Kafka partition) of the rows of its partition, whatever their
    /// clustering key; another partition has another key. The connector's
    /// keys, still available, differ.
    #[test]
    fn by_default_a_partition_delete_has_the_key_of_its_partitions_rows() {
        let changes = [
            change(Operation::Insert, 1, Some(2), Some(3)),
            change(Operation::Update, 1, Some(5), Some(4)),
            change(Operation::RowDelete, 1, Some(2), None),
            change(Operation::PartitionDelete, 1, None, None),
            change(Operation::Insert, 7, Some(2), Some(3)),
        ];
        for schemas in [JsonSchemas::Without, JsonSchemas::With] {
            let mut config = SinkConfig::new("b:9092", "shop", "ks", "t");
            config.schemas = schemas;
            config.table_from_metadata(&keyspace()).expect("the table");
            let keys = keys(&config, &changes);
            assert!(keys[..4].iter().all(|k| *k == keys[0]), "{schemas:?}: one key for partition 1: {keys:?}");
            assert_ne!(keys[4], keys[0], "{schemas:?}: another partition, another key");
            assert!(!keys[0].contains("ck"), "{schemas:?}: the partition key alone: {}", keys[0]);
            assert_eq!(config.key, KeyMode::PartitionKey(vec!["pk".into()]), "{schemas:?}");
        }
        let mut config = SinkConfig::new("b:9092", "shop", "ks", "t");
        config.key = KeyMode::PrimaryKey;
        config.table_from_metadata(&keyspace()).expect("the table");
        assert_eq!(config.key, KeyMode::PrimaryKey, "a key chosen is kept");
        let keys = keys(&config, &changes);
        assert_eq!(keys[0], r#"{"pk":1,"ck":2}"#, "the connector's key");
        assert_eq!(keys[3], r#"{"pk":1,"ck":null}"#, "a partition delete's connector key");
    }

    /// Columns given are kept; a table that is not in the schema is a typed
    /// error; a sink keyed by a partition key never read is refused before
    /// it talks to Kafka.
    #[test]
    fn the_partition_key_is_read_from_the_schema_or_the_sink_refused() {
        let mut config = SinkConfig::new("b:9092", "shop", "ks", "t");
        config.key = KeyMode::PartitionKey(vec!["ck".into()]);
        config.table_from_metadata(&keyspace()).expect("the table");
        assert_eq!(config.key, KeyMode::PartitionKey(vec!["ck".into()]));
        assert!(config.types.as_ref().is_some_and(|t| t.column("v").is_some()), "the types read too");

        let mut other = SinkConfig::new("b:9092", "shop", "ks", "nope");
        let err = other.table_from_metadata(&keyspace()).expect_err("no such table");
        assert!(matches!(err, SinkError::Table(TypeError::NoTable(ref t)) if t == "ks.nope"), "{err:?}");
        assert_eq!(other.key, KeyMode::default(), "nothing learnt");

        let err = KafkaSink::new(SinkConfig::new("b:9092", "shop", "ks", "t")).expect_err("refused");
        assert!(matches!(err, SinkError::PartitionKeyUnknown(ref t) if t == "ks.t"), "{err:?}");
        assert!(err.to_string().contains("SinkConfig::load_table"), "{err}");
    }
}
