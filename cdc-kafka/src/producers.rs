//! The sink's producers, and how Kafka fences an earlier writer.
//!
//! Kafka fences by `transactional.id`: initialising an id bumps its
//! producer epoch, aborts the transaction an earlier producer of that id
//! left open, and makes the broker refuse that producer's commits
//! (`docs/kafka-sink.md` §1). So the id decides who is fenced:
//!
//! * [`Fencing::Process`]: one producer per process, its id kept across
//!   restarts. A restart fences the run before it. One window is written
//!   at a time (a producer has one transaction open).
//! * [`Fencing::PerGroup`], for sinks that share a table through leases: one
//!   producer per held group, id `<id>.<group>`, initialised when the reader
//!   takes the group and before it reads the group's checkpoint
//!   ([`crate::KafkaCheckpoints`]), and dropped when Kafka fences it. Whoever held the group before can then
//!   neither commit a window nor leave one open, even if it was paused
//!   past its lease and does not know it lost the group yet; its commit
//!   fails with [`SinkError::Fenced`], and its reader leaves the group.
//!
//! * [`Fencing::Group`], for sinks that share a table as the members of a
//!   Kafka consumer group ([`crate::group`]): one producer per process, as
//!   with [`Fencing::Process`], and every transaction fenced by the group's
//!   generation (KIP-447): it commits an offset of its group's control
//!   partition with the consumer's group metadata, which the group
//!   coordinator refuses from a member of an earlier generation. A
//!   transaction begins only while its group is assigned to this sink
//!   under the epoch its window was read in.
//!
//! Without transactions ([`Delivery::AtLeastOnce`]) there is one producer
//! and nothing is fenced.
//!
//! A producer writes one window (or record alone) at a time, and a record
//! alone (the reader's periodic progress, [`crate::KafkaSink::write_progress`])
//! is written only if it is beyond the furthest record the sink's producers
//! wrote of its group, which is checked and noted while the producer is
//! held: a progress record that waited for a window of its group is not
//! written after that window's further record. So each group's last record,
//! the one compaction keeps, is its furthest.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use rdkafka::config::ClientConfig;
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::producer::{BaseRecord, DeliveryResult, Producer, ProducerContext, ThreadedProducer};
use rdkafka::ClientContext;
use shardwise_cdc::checkpoint::record::record_value;
use shardwise_cdc::stream::StreamId;
use shardwise_cdc::time::Millis;

use crate::group::{GroupSettings, Member, Membership};
use crate::sink::{Delivery, SinkConfig};
use crate::SinkError;

/// Which producer a window is written with, and so whom Kafka fences.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum Fencing {
    /// One transactional producer for the process: a restart with the same
    /// id fences the run before it. For a sink that reads the whole table.
    #[default]
    Process,
    /// One transactional producer per held group, initialised when the
    /// group is taken: for sinks that share a table through leases, so that
    /// a takeover fences the group's earlier holder in Kafka too.
    PerGroup,
    /// One transactional producer for the process, the groups it writes
    /// assigned by a Kafka consumer group, each transaction fenced by the
    /// group's generation (KIP-447; [`crate::group`]).
    Group(GroupSettings),
}

/// Counts failed deliveries, for the at-least-once mode (a transaction's
/// commit reports its own), and keeps the client's last error with the
/// brokers.
#[derive(Debug, Default)]
pub(crate) struct Deliveries {
    failed: AtomicU64,
    last: Mutex<Option<String>>,
    broker_error: Mutex<Option<String>>,
}

impl Deliveries {
    /// The client's last error with the brokers (a refused password, a
    /// certificate not trusted, a connection refused), if any.
    fn broker_error(&self) -> Option<String> {
        self.broker_error.lock().unwrap_or_else(PoisonError::into_inner).clone()
    }
}

impl ClientContext for Deliveries {
    /// Kept for the error of a call that then times out (which by itself
    /// says only that it timed out). "All brokers are down" follows the
    /// error that says why, and is not kept over it.
    fn error(&self, error: KafkaError, reason: &str) {
        tracing::debug!("librdkafka: {error}: {reason}");
        if error.rdkafka_error_code() != Some(RDKafkaErrorCode::AllBrokersDown) {
            *self.broker_error.lock().unwrap_or_else(PoisonError::into_inner) = Some(reason.to_owned());
        }
    }
}

impl ProducerContext for Deliveries {
    type DeliveryOpaque = ();

    fn delivery(&self, result: &DeliveryResult<'_>, _: ()) {
        if let Err((e, _)) = result {
            self.failed.fetch_add(1, Ordering::Relaxed);
            *self.last.lock().unwrap_or_else(PoisonError::into_inner) = Some(e.to_string());
        }
    }
}

/// Initialises the producer's transactions, trying again while the broker
/// says a later try may succeed: a transaction coordinator still loading
/// its log (a broker just started or moved, "Coordinator load in
/// progress") refuses the first tries. Up to [`INIT_ATTEMPTS`] tries, 100 ms
/// apart and doubling up to 2 s.
fn init_transactions(producer: &ThreadedProducer<Deliveries>, timeout: Duration) -> Result<(), KafkaError> {
    let mut pause = Duration::from_millis(100);
    for _ in 1..INIT_ATTEMPTS {
        match producer.init_transactions(timeout) {
            Err(KafkaError::Transaction(e)) if e.is_retriable() => {
                tracing::debug!(error = %e, "initialising transactions: trying again");
                std::thread::sleep(pause);
                pause = (pause * 2).min(Duration::from_secs(2));
            }
            done => return done,
        }
    }
    producer.init_transactions(timeout)
}

/// Tries of [`init_transactions`].
const INIT_ATTEMPTS: u32 = 8;

/// The settings of a producer for `config` with `transactional_id` (none:
/// no transactions).
pub(crate) fn producer_config(config: &SinkConfig, transactional_id: Option<&str>) -> ClientConfig {
    // A message may not outlive its transaction: librdkafka refuses a
    // message timeout above the transaction timeout.
    let transaction = config.transaction_timeout.max(Duration::from_secs(1));
    let message = match transactional_id {
        Some(_) => config.timeout.min(transaction),
        None => config.timeout,
    };
    let mut client = config.brokers().client(&[("linger.ms", "5")]);
    client
        .set("enable.idempotence", "true")
        .set("acks", "all")
        .set("message.timeout.ms", message.as_millis().max(1).to_string());
    if let Some(id) = transactional_id {
        client.set("transactional.id", id).set("transaction.timeout.ms", transaction.as_millis().to_string());
    }
    client
}

/// How many times a window's transaction is tried before the error is the
/// consumer's (each failed try aborted).
pub(crate) const TRANSACTION_ATTEMPTS: u32 = 3;

/// One transaction (or, at least once, one acknowledged batch): a
/// window's messages (or a part of them) and the group's records in the
/// checkpoint topic.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Write<'a> {
    /// The changes' topic and the messages (key, value).
    pub(crate) messages: (&'a str, &'a [(String, String)]),
    /// The checkpoint topic.
    pub(crate) checkpoints: &'a str,
    /// The group.
    pub(crate) group: StreamId,
    /// The group's checkpoint record (its key,
    /// [`shardwise_cdc::checkpoint::record::record_key`]), the group read
    /// up to (generation, progress): a window's end, or progress alone.
    /// `None` for a part of a window.
    pub(crate) record: Option<(&'a str, (Millis, Millis))>,
    /// The group's positions record (key, value;
    /// [`crate::positions`]): a part of a window.
    pub(crate) positions: Option<(&'a str, &'a str)>,
    /// The epoch of the hold the window was read under (with
    /// [`Fencing::Group`]: the assignment's; 0 for a generation's final
    /// progress, written whoever holds the group).
    pub(crate) epoch: u64,
}

impl Write<'_> {
    /// A record alone: no messages, no positions.
    fn alone(&self) -> bool {
        self.messages.1.is_empty() && self.positions.is_none()
    }
}

/// The furthest (generation, progress) the sink's producers wrote of each
/// group. Read and changed by a producer only while it is held for writing
/// ([`Writer::write`]).
#[derive(Debug, Default)]
pub(crate) struct Recorded(Mutex<HashMap<StreamId, (Millis, Millis)>>);

impl Recorded {
    /// Whether a record of `group` as far as `at` was written.
    fn covers(&self, group: StreamId, at: (Millis, Millis)) -> bool {
        self.0.lock().unwrap_or_else(PoisonError::into_inner).get(&group).is_some_and(|&r| r >= at)
    }

    /// Notes that a record of `group` at `at` was written.
    fn wrote(&self, group: StreamId, at: (Millis, Millis)) {
        let mut recorded = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        let furthest = recorded.entry(group).or_insert(at);
        *furthest = (*furthest).max(at);
    }
}

/// One producer, and the window it is writing.
pub(crate) struct Writer {
    producer: ThreadedProducer<Deliveries>,
    transactional_id: Option<String>,
    timeout: Duration,
    /// Held while a window or a record alone is written.
    writing: Mutex<()>,
}

impl Writer {
    /// A producer with `transactional_id`, its transactions initialised
    /// (which fences every earlier producer of that id). Blocking.
    fn new(config: &SinkConfig, transactional_id: Option<String>) -> Result<Self, SinkError> {
        let producer: ThreadedProducer<Deliveries> = producer_config(config, transactional_id.as_deref())
            .create_with_context(Deliveries::default())
            .map_err(SinkError::kafka("creating the producer"))?;
        if let Some(id) = &transactional_id {
            init_transactions(&producer, config.timeout).map_err(|source| {
                let what = match producer.context().broker_error() {
                    Some(last) => format!("initialising transactions of {id} (the brokers' last error: {last})"),
                    None => format!("initialising transactions of {id}"),
                };
                SinkError::Kafka { what, source }
            })?;
        }
        Ok(Writer { producer, transactional_id, timeout: config.timeout, writing: Mutex::new(()) })
    }

    /// Writes `write` (see [`Writer::deliver`]), noting its record in
    /// `recorded`. A record alone (no messages) that is not beyond what
    /// `recorded` holds of its group is not written: checked while this
    /// producer is held, so it never follows a further record of the group
    /// that this producer wrote meanwhile. With `membership`, each
    /// transaction is fenced by the consumer group's generation. Blocking.
    pub(crate) fn write(
        &self,
        write: &Write<'_>,
        recorded: &Recorded,
        membership: Option<&Membership>,
        aborted: &AtomicU64,
    ) -> Result<(), SinkError> {
        let _writing = self.writing.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some((_, at)) = write.record {
            if write.alone() && recorded.covers(write.group, at) {
                return Ok(());
            }
        }
        self.deliver(write, membership, aborted)?;
        if let Some((_, at)) = write.record {
            recorded.wrote(write.group, at);
        }
        Ok(())
    }

    /// Writes the messages and the records of `write`: one transaction, or,
    /// without transactions, the messages acknowledged and then the
    /// records. Blocking; the caller holds `writing`.
    ///
    /// A transaction that fails without this producer being fenced (its
    /// messages timed out while the process or the broker was paused, a
    /// broker was briefly gone) is aborted and written again, up to
    /// [`TRANSACTION_ATTEMPTS`] times: nothing of an aborted transaction is
    /// read by `read_committed` consumers, so writing it again repeats
    /// nothing. A producer that was fenced meanwhile finds out then.
    ///
    /// With `membership` ([`Fencing::Group`]), each try first holds the
    /// group (it must be assigned here under `write.epoch`), and before
    /// committing flushes
    /// the messages and sends the offset of the group's control partition
    /// with the consumer's group metadata: a transaction of an earlier
    /// group generation is refused ([`SinkError::Rebalanced`]), aborted,
    /// and not tried again.
    fn deliver(
        &self,
        write: &Write<'_>,
        membership: Option<&Membership>,
        aborted: &AtomicU64,
    ) -> Result<(), SinkError> {
        let value = write.record.map(|(key, (generation, progress))| (key, record_value(generation, progress)));
        let send_messages = || -> Result<(), SinkError> {
            let (topic, messages) = write.messages;
            for (k, v) in messages {
                self.send(topic, k, v)?;
            }
            Ok(())
        };
        let send_records = || -> Result<(), SinkError> {
            if let Some((key, value)) = &value {
                self.send(write.checkpoints, key, value)?;
            }
            if let Some((key, value)) = write.positions {
                self.send(write.checkpoints, key, value)?;
            }
            Ok(())
        };
        if self.transactional_id.is_none() {
            // At least once: the records that say the messages were
            // written are sent only once Kafka acknowledged the messages.
            // Sent together, a record (in another partition) could be on
            // the broker before them: a crash then, or a message refused,
            // would lose the window rather than repeat it.
            send_messages()?;
            if !write.messages.1.is_empty() {
                self.flushed()?;
            }
            send_records()?;
            return self.flushed();
        }
        let mut attempt = 1;
        loop {
            let held = match membership {
                None => None,
                // A generation's final progress: fenced if the group is held
                // here now, else written as it is (see `Write::epoch`).
                Some(m) if write.epoch == 0 && write.alone() => m.hold(write.group, None).ok(),
                Some(m) => Some(m.hold(write.group, (write.epoch != 0).then_some(write.epoch))?),
            };
            let written = (|| {
                self.producer.begin_transaction().map_err(|e| self.failed("beginning a transaction", e))?;
                send_messages()?;
                send_records()?;
                if let Some(held) = &held {
                    // On the log before the coordinator accepts the offsets
                    // (see `crate::group`).
                    self.producer.flush(self.timeout).map_err(|e| self.failed("flushing a transaction", e))?;
                    let offsets = held.offsets()?;
                    self.producer
                        .send_offsets_to_transaction(&offsets, held.metadata(), self.timeout)
                        .map_err(|e| self.failed("sending the group's offsets", e))?;
                }
                Ok(())
            })();
            let Err(e) = written.and_then(|()| self.commit()) else { return Ok(()) };
            if let SinkError::CommitUnknown { .. } = e {
                // Never aborted: its end may be on the coordinator's log.
                return Err(e);
            }
            if let (SinkError::Rebalanced { .. }, Some(held)) = (&e, &held) {
                held.refused();
            }
            if let Err(aborting) = self.abort() {
                // Fenced, or the producer can no longer write (librdkafka
                // calls the error fatal): the transaction is aborted when
                // the id is initialised again, or by the transaction
                // timeout.
                return Err(match self.failed("aborting a transaction", aborting) {
                    fenced @ SinkError::Fenced { .. } => fenced,
                    SinkError::Kafka { source, .. } | SinkError::Rebalanced { source, .. } => SinkError::Unusable {
                        transactional_id: self.transactional_id.clone().unwrap_or_default(),
                        failed: e.to_string().into(),
                        source,
                    },
                    other => other,
                });
            }
            if matches!(e, SinkError::Fenced { .. } | SinkError::Rebalanced { .. }) || attempt >= TRANSACTION_ATTEMPTS {
                return Err(e);
            }
            aborted.fetch_add(1, Ordering::Relaxed);
            tracing::warn!(error = %e, attempt, "a Kafka transaction failed and was aborted; writing it again");
            attempt += 1;
        }
    }

    /// Commits the open transaction. A commit that failed with an error a
    /// later try may get past (it timed out, say, the coordinator slow to
    /// answer) is resumed, up to [`TRANSACTION_ATTEMPTS`] tries, never
    /// aborted: the coordinator may have the transaction's end already, and
    /// aborting it (which librdkafka refuses then) and writing it again would
    /// commit the window twice. A commit still unconfirmed after that, or
    /// failed with an error that says neither (a fatal one), is
    /// [`SinkError::CommitUnknown`]: the producer is replaced, whose
    /// successor's initialisation completes or aborts it, and the group is
    /// read again from what Kafka holds. A commit the broker refused
    /// (librdkafka says it must be aborted), or whose messages could not be
    /// flushed before it was sent, is the caller's to abort and write
    /// again. Blocking.
    fn commit(&self) -> Result<(), SinkError> {
        let mut attempt = 1;
        loop {
            let error = match self.producer.commit_transaction(self.timeout) {
                Ok(()) => return Ok(()),
                Err(e) => e,
            };
            let failed = self.failed("committing a window", error.clone());
            let (resumable, abortable) = match &error {
                KafkaError::Transaction(e) => (e.is_retriable(), e.txn_requires_abort()),
                _ => (false, false),
            };
            match failed {
                fenced @ SinkError::Fenced { .. } => return Err(fenced),
                // The client's flush before the commit (rust-rdkafka's
                // `commit_transaction` flushes first): the commit was never
                // sent, and the transaction is the caller's to abort.
                not_sent if attempt == 1 && matches!(error, KafkaError::Flush(_)) => return Err(not_sent),
                refused if abortable => return Err(refused),
                _ if resumable && attempt < TRANSACTION_ATTEMPTS => {
                    tracing::warn!(error = %error, attempt, "a Kafka transaction's commit is not confirmed yet; resuming it");
                    attempt += 1;
                }
                _ => {
                    return Err(SinkError::CommitUnknown {
                        transactional_id: self.transactional_id.clone().unwrap_or_default(),
                        source: error,
                    })
                }
            }
        }
    }

    /// Aborts the open transaction, trying again while the error says a
    /// later try may succeed (a broker that did not answer in time).
    fn abort(&self) -> Result<(), KafkaError> {
        let mut attempt = 1;
        loop {
            match self.producer.abort_transaction(self.timeout) {
                Err(KafkaError::Transaction(e)) if e.is_retriable() && attempt < TRANSACTION_ATTEMPTS => attempt += 1,
                aborted => return aborted,
            }
        }
    }

    /// The error of a Kafka call: [`SinkError::Fenced`] when a later
    /// producer of this id fenced this one.
    fn failed(&self, what: &str, source: KafkaError) -> SinkError {
        let fatal = self.producer.client().fatal_error().map(|(code, _)| code);
        match (source.rdkafka_error_code(), &self.transactional_id) {
            (code, Some(id)) if fenced(code) || fenced(fatal) => {
                SinkError::Fenced { transactional_id: id.clone(), source }
            }
            (code, Some(_)) if rebalanced(code) => SinkError::Rebalanced { source },
            _ => SinkError::Kafka { what: what.to_owned(), source },
        }
    }

    /// Queues one message, waiting while the producer's queue is full.
    fn send(&self, topic: &str, key: &str, value: &str) -> Result<(), SinkError> {
        let mut record = BaseRecord::to(topic).key(key).payload(value);
        loop {
            match self.producer.send(record) {
                Ok(()) => return Ok(()),
                Err((KafkaError::MessageProduction(RDKafkaErrorCode::QueueFull), back)) => {
                    record = back;
                    std::thread::sleep(Duration::from_millis(5));
                }
                Err((e, _)) => return Err(self.failed(&format!("producing to {topic}"), e)),
            }
        }
    }

    /// At least once: waits until Kafka acknowledged every queued message.
    ///
    /// The queue is watched in steps of a millisecond: the client's own
    /// flush polls in steps of up to 100 ms while the producer's polling
    /// thread serves the acknowledgements, so that each flush took about
    /// 100 ms, twice a window. The queue counts a message until its
    /// acknowledgement was served, so the failures are counted by then.
    fn flushed(&self) -> Result<(), SinkError> {
        let deadline = std::time::Instant::now() + self.timeout;
        while self.producer.in_flight_count() > 0 && std::time::Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(1));
        }
        // Returns at once when the queue is empty; else the timeout's error.
        self.producer.flush(Duration::ZERO).map_err(SinkError::kafka("flushing a window"))?;
        let context = self.producer.context();
        let failed = context.failed.swap(0, Ordering::Relaxed);
        if failed > 0 {
            let last = context.last.lock().unwrap_or_else(PoisonError::into_inner).take();
            return Err(SinkError::Undelivered { failed, last: last.unwrap_or_default() });
        }
        Ok(())
    }
}

/// Whether `code` says a later producer of the same id fenced this one.
fn fenced(code: Option<RDKafkaErrorCode>) -> bool {
    matches!(
        code,
        Some(RDKafkaErrorCode::Fenced | RDKafkaErrorCode::ProducerFenced | RDKafkaErrorCode::InvalidProducerEpoch)
    )
}

/// Whether `code` says the consumer group's coordinator refused the
/// offsets of a member whose group generation is over (KIP-447).
fn rebalanced(code: Option<RDKafkaErrorCode>) -> bool {
    matches!(
        code,
        Some(
            RDKafkaErrorCode::IllegalGeneration
                | RDKafkaErrorCode::UnknownMemberId
                | RDKafkaErrorCode::FencedInstanceId
                | RDKafkaErrorCode::RebalanceInProgress
        )
    )
}

/// The producers of a sink.
pub(crate) struct Producers {
    config: SinkConfig,
    /// The process's producer ([`Fencing::Process`], or no transactions),
    /// replaced when it can no longer write.
    process: Option<Mutex<Arc<Writer>>>,
    /// With [`Fencing::PerGroup`]: the producer of each group taken, and
    /// the generation of the group.
    groups: Mutex<HashMap<StreamId, (Millis, Arc<Writer>)>>,
    /// The furthest record written of each group, by any of the producers
    /// (or found when the group was taken).
    recorded: Recorded,
    /// With [`Fencing::Group`], once joined: the consumer group's
    /// membership, and the assignment.
    member: Mutex<Option<Member>>,
    membership: std::sync::OnceLock<Arc<Membership>>,
    /// Transactions aborted and written again ([`crate::SinkStats::aborted`]).
    pub(crate) aborted: AtomicU64,
    /// Producers replaced because they could no longer write
    /// ([`crate::SinkStats::replaced`]).
    pub(crate) replaced: AtomicU64,
}

impl Producers {
    /// The producers of a sink with `config`; the process's producer is
    /// created (and its id initialised) now. Blocking.
    pub(crate) fn new(config: &SinkConfig) -> Result<Self, SinkError> {
        let process = match (&config.delivery, &config.fencing) {
            (Delivery::ExactlyOnce { .. }, Fencing::PerGroup) => None,
            (Delivery::ExactlyOnce { transactional_id }, Fencing::Process | Fencing::Group(_)) => {
                Some(Mutex::new(Arc::new(Writer::new(config, Some(transactional_id.clone()))?)))
            }
            (Delivery::AtLeastOnce, _) => Some(Mutex::new(Arc::new(Writer::new(config, None)?))),
        };
        Ok(Producers {
            config: config.clone(),
            process,
            groups: Mutex::new(HashMap::new()),
            recorded: Recorded::default(),
            member: Mutex::new(None),
            membership: std::sync::OnceLock::new(),
            aborted: AtomicU64::new(0),
            replaced: AtomicU64::new(0),
        })
    }

    /// With [`Fencing::Group`]: joins the consumer group (once) and returns
    /// its assignment. Blocking.
    pub(crate) fn join(&self) -> Result<Arc<Membership>, SinkError> {
        let Fencing::Group(settings) = &self.config.fencing else { return Err(SinkError::NoGroup) };
        let mut member = self.member.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(m) = self.membership.get() {
            return Ok(m.clone());
        }
        let joined = Member::join(&self.config.brokers(), settings, self.config.timeout)?;
        let membership = joined.membership.clone();
        *member = Some(joined);
        Ok(self.membership.get_or_init(|| membership).clone())
    }

    /// Leaves the consumer group (its partitions go to the other members).
    /// Blocking.
    pub(crate) fn leave(&self) {
        let member = self.member.lock().unwrap_or_else(PoisonError::into_inner).take();
        drop(member);
    }

    /// The group was taken with its checkpoint record at `at`: a record
    /// alone not beyond it is not written.
    pub(crate) fn found(&self, group: StreamId, at: (Millis, Millis)) {
        self.recorded.wrote(group, at);
    }

    /// With [`Fencing::Group`]: the epoch under which `group` is assigned
    /// here now.
    pub(crate) fn assigned(&self, group: StreamId) -> Option<u64> {
        self.membership.get().and_then(|m| m.epoch_of(group))
    }

    fn groups(&self) -> MutexGuard<'_, HashMap<StreamId, (Millis, Arc<Writer>)>> {
        self.groups.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Takes `group` of `generation` over in Kafka: a new producer with the
    /// group's id, which fences whoever wrote the group before. Producers
    /// of older generations are dropped. Nothing to do for a process's
    /// producer. Blocking.
    pub(crate) fn fence(&self, generation: Millis, group: StreamId) -> Result<(), SinkError> {
        let Delivery::ExactlyOnce { transactional_id } = &self.config.delivery else { return Ok(()) };
        if self.process.is_some() || matches!(self.config.fencing, Fencing::Group(_)) {
            return Ok(());
        }
        let writer = Arc::new(Writer::new(&self.config, Some(format!("{transactional_id}.{group}")))?);
        // Producers replaced are dropped outside the lock: closing one
        // waits for its queue, which must not hold up the other groups.
        let dropped: Vec<_> = {
            let mut groups = self.groups();
            let old: Vec<StreamId> = groups.iter().filter(|(_, (g, _))| *g < generation).map(|(k, _)| *k).collect();
            let mut dropped: Vec<_> = old.iter().filter_map(|k| groups.remove(k)).collect();
            dropped.extend(groups.insert(group, (generation, writer)));
            dropped
        };
        drop(dropped);
        Ok(())
    }

    /// The producer that writes `group`: the process's, or the group's,
    /// made when the group was taken. Never made here: a producer made
    /// after the group was lost would fence its new holder.
    fn writer(&self, group: StreamId) -> Result<Arc<Writer>, SinkError> {
        if let Some(process) = &self.process {
            return Ok(process.lock().unwrap_or_else(PoisonError::into_inner).clone());
        }
        self.groups().get(&group).map(|(_, w)| w.clone()).ok_or(SinkError::NotHeld(group))
    }

    /// Writes `write` (see [`Writer::write`]) with its group's producer.
    ///
    /// A group's producer that was fenced or can no longer write is
    /// forgotten (that producer: not one a later take of the group made
    /// meanwhile): its reader leaves the group, and takes it again (through
    /// a new producer) only with a lease. The process's producer that can no
    /// longer write is replaced by a new one of the same id, which aborts
    /// what the old one left open, and the window is written with it. With
    /// [`Fencing::Group`], a process's producer that was fenced (its
    /// transaction outlived the transaction timeout, say) is replaced too,
    /// and the window's group left until it is taken again. Blocking.
    pub(crate) fn write(&self, write: &Write<'_>) -> Result<(), SinkError> {
        let group_mode = matches!(self.config.fencing, Fencing::Group(_));
        let membership = if group_mode {
            match self.membership.get() {
                Some(m) => Some(m.as_ref()),
                None => return Err(SinkError::NotAssigned(write.group)),
            }
        } else {
            None
        };
        let writer = self.writer(write.group)?;
        match (writer.write(write, &self.recorded, membership, &self.aborted), &self.process) {
            (Err(e @ SinkError::CommitUnknown { .. }), Some(process)) => {
                tracing::warn!(error = %e, "a Kafka commit was not confirmed; the producer is replaced and the window not written again");
                self.replace(process, &writer)?;
                Err(e)
            }
            (Err(SinkError::Unusable { .. }), Some(process)) => {
                tracing::warn!("the Kafka producer can no longer write; it is replaced");
                self.replace(process, &writer)?.write(write, &self.recorded, membership, &self.aborted)
            }
            (Err(e @ SinkError::Fenced { .. }), Some(process)) if group_mode => {
                tracing::warn!(error = %e, "the Kafka producer was fenced; it is replaced");
                self.replace(process, &writer)?;
                Err(e)
            }
            (Err(e @ (SinkError::Fenced { .. } | SinkError::Unusable { .. } | SinkError::CommitUnknown { .. })), _) => {
                self.forget(write.group, &writer);
                Err(e)
            }
            (written, _) => written,
        }
    }

    /// The process's producer after `broken`: a new one of the same id,
    /// unless another window replaced `broken` already. Blocking.
    fn replace(&self, process: &Mutex<Arc<Writer>>, broken: &Arc<Writer>) -> Result<Arc<Writer>, SinkError> {
        let mut current = process.lock().unwrap_or_else(PoisonError::into_inner);
        if Arc::ptr_eq(&current, broken) {
            *current = Arc::new(Writer::new(&self.config, broken.transactional_id.clone())?);
            self.replaced.fetch_add(1, Ordering::Relaxed);
        }
        Ok(current.clone())
    }

    /// Forgets `writer`, the producer of `group` that was fenced or can no
    /// longer write (a later take makes another). Only that producer: one
    /// that a take of the group made since `writer` was fetched (which
    /// fenced `writer`) stays, with the group. Compared by identity, which
    /// holds while the caller holds `writer`.
    fn forget(&self, group: StreamId, writer: &Arc<Writer>) {
        let dropped = {
            let mut groups = self.groups();
            match groups.get(&group) {
                Some((_, held)) if Arc::ptr_eq(held, writer) => groups.remove(&group),
                _ => None,
            }
        };
        drop(dropped);
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// librdkafka accepts the settings whatever the timeouts (it refuses a
    /// message timeout above the transaction timeout), with or without
    /// transactions; creating a producer does not connect.
    #[test]
    fn the_producer_settings_are_accepted() {
        let timeouts = [Duration::from_secs(1), Duration::from_secs(30), Duration::from_secs(600)];
        for timeout in timeouts {
            for transaction_timeout in timeouts {
                for id in [None, Some("t")] {
                    let mut config = SinkConfig::new("127.0.0.1:1", "n", "ks", "t");
                    (config.timeout, config.transaction_timeout) = (timeout, transaction_timeout);
                    let created: Result<ThreadedProducer<Deliveries>, _> =
                        producer_config(&config, id).create_with_context(Deliveries::default());
                    assert!(created.is_ok(), "{timeout:?} {transaction_timeout:?} {id:?}: {:?}", created.err());
                }
            }
        }
    }

    /// A refusal of the group's older producer forgets that producer only:
    /// a newer one, made by a take of the group while the older one was
    /// writing, stays (and so does the group). Producers without
    /// transactions do not connect when made.
    #[test]
    fn forget_drops_only_the_producer_that_was_refused() {
        let config = SinkConfig::new("127.0.0.1:1", "n", "ks", "t");
        let producers = Producers {
            config: config.clone(),
            process: None,
            groups: Mutex::new(HashMap::new()),
            recorded: Recorded::default(),
            member: Mutex::new(None),
            membership: std::sync::OnceLock::new(),
            aborted: AtomicU64::new(0),
            replaced: AtomicU64::new(0),
        };
        let group = StreamId::from_bytes([7; 16]);
        let older = Arc::new(Writer::new(&config, None).expect("a producer"));
        let newer = Arc::new(Writer::new(&config, None).expect("a producer"));
        producers.groups().insert(group, (Millis(1), older.clone()));
        // Taken again while `older` was writing its window.
        producers.groups().insert(group, (Millis(1), newer.clone()));
        producers.forget(group, &older);
        let held = producers.writer(group).expect("the group is still held");
        assert!(Arc::ptr_eq(&held, &newer), "the newer producer stays");
        producers.forget(group, &newer);
        assert!(matches!(producers.writer(group), Err(SinkError::NotHeld(g)) if g == group));
    }

    /// librdkafka's mock cluster of two brokers, hosted by a client of its
    /// own (kept alive beside it), with `topics` of one partition.
    pub(crate) struct Mock {
        host: rdkafka::producer::BaseProducer,
        pub(crate) servers: String,
    }

    impl Mock {
        pub(crate) fn new(topics: &[&str]) -> Self {
            let host: rdkafka::producer::BaseProducer =
                ClientConfig::new().set("test.mock.num.brokers", "2").create().expect("a mock cluster");
            let cluster = host.client().mock_cluster().expect("the mock cluster");
            for topic in topics {
                cluster.create_topic(topic, 1, 1).expect("a mock topic");
            }
            let servers = cluster.bootstrap_servers();
            drop(cluster);
            Mock { host, servers }
        }

        /// Delays the answer to the next `EndTxn` request each broker gets
        /// by `delay`; the request itself is applied when it comes.
        #[allow(unsafe_code)]
        fn delay_next_end_txn(&self, delay: Duration) {
            const END_TXN: i16 = 26;
            let delay = i32::try_from(delay.as_millis()).expect("a delay in milliseconds");
            // SAFETY: the mock cluster is owned by `self.host`, alive for
            // the call; the variadic arguments are the (error code, delay in
            // ms) pairs the C API reads, `cnt` (1) of them, as C ints.
            unsafe {
                let cluster = rdkafka_sys::rd_kafka_handle_mock_cluster(self.host.client().native_ptr());
                assert!(!cluster.is_null(), "the host's mock cluster");
                for broker in [1, 2] {
                    let pushed = rdkafka_sys::rd_kafka_mock_broker_push_request_error_rtts(
                        cluster,
                        broker,
                        END_TXN,
                        1,
                        rdkafka_sys::rd_kafka_resp_err_t::RD_KAFKA_RESP_ERR_NO_ERROR,
                        delay,
                    );
                    assert_eq!(pushed, rdkafka_sys::rd_kafka_resp_err_t::RD_KAFKA_RESP_ERR_NO_ERROR);
                }
            }
        }

        /// The messages of `topic` committed (`read_committed`), by key.
        pub(crate) fn committed(&self, topic: &str) -> Vec<String> {
            use rdkafka::consumer::{BaseConsumer, Consumer};
            use rdkafka::{Message, Offset, TopicPartitionList};
            let consumer: BaseConsumer = ClientConfig::new()
                .set("bootstrap.servers", &self.servers)
                .set("group.id", "reader")
                .set("isolation.level", "read_committed")
                .set("enable.partition.eof", "true")
                .create()
                .expect("a consumer");
            let mut at = TopicPartitionList::new();
            at.add_partition_offset(topic, 0, Offset::Beginning).expect("a partition");
            consumer.assign(&at).expect("assigned");
            let deadline = std::time::Instant::now() + Duration::from_secs(20);
            let mut keys = Vec::new();
            while std::time::Instant::now() < deadline {
                match consumer.poll(Duration::from_millis(100)) {
                    Some(Ok(m)) => keys.extend(m.key().map(|k| String::from_utf8_lossy(k).into_owned())),
                    Some(Err(KafkaError::PartitionEOF(_))) => return keys,
                    _ => {}
                }
            }
            panic!("{topic} not read to its end in 20 s: {keys:?}");
        }
    }

    /// Issue 51: a commit whose answer comes after the producer's timeout
    /// (the coordinator has applied it) is resumed, not aborted and written
    /// again: the window is committed once. Before, the abort was refused
    /// (the commit was under way), the producer replaced and the window
    /// written again: committed twice.
    #[test]
    fn a_commit_answered_late_is_resumed_and_commits_once() {
        let mock = Mock::new(&["out", "cp"]);
        let mut config = SinkConfig::new(&mock.servers, "n", "ks", "t");
        config.delivery = Delivery::ExactlyOnce { transactional_id: "tx".into() };
        (config.timeout, config.transaction_timeout) = (Duration::from_secs(2), Duration::from_secs(60));
        let producers = Producers::new(&config).expect("the process's producer");
        mock.delay_next_end_txn(Duration::from_millis(3_000));
        let messages = [("k".to_owned(), "v".to_owned())];
        let write = Write {
            messages: ("out", &messages),
            checkpoints: "cp",
            group: StreamId::from_bytes([1; 16]),
            record: Some(("r", (Millis(1), Millis(2)))),
            positions: None,
            epoch: 0,
        };
        producers.write(&write).expect("written");
        assert_eq!(mock.committed("out"), ["k"], "the window committed once");
        assert_eq!(mock.committed("cp"), ["r"]);
        assert_eq!(producers.replaced.load(Ordering::Relaxed), 0, "the producer was kept");
    }

    #[test]
    fn fencing_codes() {
        assert!(fenced(Some(RDKafkaErrorCode::ProducerFenced)));
        assert!(fenced(Some(RDKafkaErrorCode::Fenced)));
        assert!(!fenced(Some(RDKafkaErrorCode::RequestTimedOut)));
        assert!(!fenced(None));
        assert!(rebalanced(Some(RDKafkaErrorCode::IllegalGeneration)));
        assert!(rebalanced(Some(RDKafkaErrorCode::UnknownMemberId)));
        assert!(!rebalanced(Some(RDKafkaErrorCode::ProducerFenced)));
    }
}
