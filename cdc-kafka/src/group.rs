//! The multi-process mode on Kafka's own group protocol
//! ([`crate::Fencing::Group`]): the sinks sharing a table are the members
//! of one Kafka consumer group, and Kafka's group coordinator, not the
//! database, decides which sink writes which CDC stream group.
//!
//! * **The control topic** ([`GroupSettings::control_topic`]) has a fixed
//!   number of partitions, `P` (read from the topic, so every member agrees)
//!   and no messages. A CDC stream group belongs to partition
//!   `fnv1a(its first stream id) mod P` ([`partition_of`]): a pure function
//!   of the group, so it holds across CDC generations, whose groups differ.
//! * **Membership**: each sink's consumer subscribes to the control topic
//!   with the configured `group.id` (eager rebalancing: every rebalance
//!   revokes every partition, then assigns anew). The assignment it gets is
//!   what the reader reads ([`shardwise_cdc::Assignment`]); a partition
//!   assigned anew gets a new epoch, which the groups taken under it carry.
//!   A partition this member held before a rebalance it took part in (its
//!   assignment not lost: no other member held the partition in between)
//!   keeps its epoch, so its groups are read on without being fenced again.
//! * **Revocation**: the rebalance callback clears the assignment at once:
//!   no transaction of a revoked group begins after it (one of a partition
//!   this member may keep waits for the assignment, and begins if it kept
//!   it). It does not wait for
//!   the one under way (which may be waiting for the rebalance itself: the
//!   coordinator holds offset commits while the group rebalances); that one
//!   commits only if the coordinator accepts its offsets under the
//!   generation it began in, before the next generation exists (below).
//! * **Fencing (KIP-447)**: every transaction of the sink (a window, a part
//!   of one, a progress record) also commits, with
//!   `send_offsets_to_transaction`, an offset of the control partition of
//!   its group under the consumer's group metadata (member id and group
//!   generation), taken when the assignment came. The group coordinator
//!   refuses that commit from a member of an earlier group generation
//!   (`ILLEGAL_GENERATION`, `UNKNOWN_MEMBER_ID`): a sink that was paused past
//!   its session timeout, or cut off, and comes back cannot commit a window
//!   of a group that was given to another, even before it knows it lost
//!   it. The transaction is aborted and the group left until the next
//!   assignment. The messages are flushed (acknowledged by the partition
//!   leaders) before the offsets are sent: a transaction the coordinator
//!   accepted under a generation has its records in the log before any
//!   member of a later generation is assigned their group, and so before
//!   the new holder reads the group's progress (it waits for every
//!   transaction written to the checkpoint topic by then to end,
//!   [`crate::KafkaCheckpoints`]).
//! * **One producer per process**: its `transactional.id` is the sink's own
//!   (keep it across restarts, one per process): a restart fences the run
//!   before it and aborts what it left open.
//!
//! The partitions of the control topic must not change while sinks run: a
//! sink that is assigned a partition beyond the count it started with stops
//! being assigned anything ([`SinkError::ControlTopicChanged`] in its
//! writes); restart every sink after adding partitions.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use rdkafka::consumer::{BaseConsumer, Consumer, ConsumerContext, ConsumerGroupMetadata, Rebalance};
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::{ClientContext, Offset, TopicPartitionList};
use shardwise_cdc::StreamId;

use crate::{Brokers, SinkError};

/// How the sinks of a table form a Kafka consumer group.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupSettings {
    /// The consumer group's `group.id`: the same for every sink of the
    /// table.
    pub group_id: String,
    /// The control topic (no messages; its partitions are what the group's
    /// members are assigned; by default `<checkpoint topic>.groups`).
    pub control_topic: String,
    /// Its partitions when the sink creates it (an existing topic's count
    /// is used as it is): the most sinks that can share the work, and the
    /// finer the share.
    pub partitions: i32,
    /// The consumer's `session.timeout.ms`: how long a silent member (killed,
    /// paused, cut off) keeps its groups before the coordinator hands them
    /// to the others. At least the broker's `group.min.session.timeout.ms`
    /// (6 s by default).
    pub session_timeout: Duration,
}

impl GroupSettings {
    /// The group `group_id`, its control topic beside `checkpoint_topic`,
    /// 32 partitions, a 10 s session timeout.
    pub fn new(group_id: impl Into<String>, checkpoint_topic: &str) -> Self {
        GroupSettings {
            group_id: group_id.into(),
            control_topic: format!("{checkpoint_topic}.groups"),
            partitions: 32,
            session_timeout: Duration::from_secs(10),
        }
    }
}

/// The control partition of a CDC stream group (its first stream): FNV-1a
/// of the id's bytes, modulo `partitions`. Every member computes the same.
pub fn partition_of(group: StreamId, partitions: i32) -> i32 {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for b in group.as_bytes() {
        hash = (hash ^ u64::from(*b)).wrapping_mul(0x0100_0000_01b3);
    }
    let partitions = u64::try_from(partitions.max(1)).unwrap_or(1);
    i32::try_from(hash % partitions).unwrap_or(0)
}

/// What the consumer group gave this sink.
#[derive(Default)]
struct Given {
    /// The control partitions assigned, each with the epoch it was given
    /// under.
    partitions: HashMap<i32, u64>,
    /// What the last revocation took, if this member took part in the
    /// rebalance (its assignment was not lost): kept by the next one.
    revoked: HashMap<i32, u64>,
    /// Between such a revocation and the next assignment: the partitions
    /// revoked count as still held by the reader (a transaction waits for
    /// the assignment, [`Membership::hold`]).
    pending: bool,
    /// The consumer's group metadata as the assignment came (its member id
    /// and the group's generation): what every transaction is fenced with.
    metadata: Option<Arc<ConsumerGroupMetadata>>,
}

/// The assignment, shared by the consumer's rebalance callbacks, the
/// sink's transactions and the reader.
pub(crate) struct Membership {
    settings: GroupSettings,
    /// The control topic's partitions when the sink joined.
    partitions: i32,
    given: Mutex<Given>,
    /// Signalled when the assignment changes.
    changed: std::sync::Condvar,
    /// Epochs handed out so far.
    epochs: AtomicU64,
    /// Set when the coordinator refused a transaction's offsets (this
    /// member's generation is over): nothing is held until the next
    /// assignment.
    stale: AtomicBool,
    /// Why the assignment cannot be used (a partition beyond the count).
    broken: Mutex<Option<String>>,
}

/// A transaction's hold of its group: the group's control partition, and
/// the group metadata of the assignment that gave it.
pub(crate) struct Held<'a> {
    metadata: Arc<ConsumerGroupMetadata>,
    membership: &'a Membership,
    partition: i32,
}

impl Held<'_> {
    /// The offsets the transaction commits: its group's control partition,
    /// at 0 (nothing is consumed; the commit is the fence).
    pub(crate) fn offsets(&self) -> Result<TopicPartitionList, SinkError> {
        let mut offsets = TopicPartitionList::new();
        offsets
            .add_partition_offset(&self.membership.settings.control_topic, self.partition, Offset::Offset(0))
            .map_err(SinkError::kafka("the control partition's offset"))?;
        Ok(offsets)
    }

    /// The group metadata the assignment came with.
    pub(crate) fn metadata(&self) -> &ConsumerGroupMetadata {
        &self.metadata
    }

    /// The coordinator refused this member's offsets: its generation is
    /// over, and nothing is held until the next assignment (unless that
    /// came meanwhile: the refusal was of the assignment before).
    pub(crate) fn refused(&self) {
        let given = self.membership.given.lock().unwrap_or_else(PoisonError::into_inner);
        if given.metadata.as_ref().is_some_and(|m| Arc::ptr_eq(m, &self.metadata)) {
            self.membership.stale.store(true, Ordering::Release);
        }
    }
}

impl Membership {
    /// The epoch under which `group` is held now, if it is.
    pub(crate) fn epoch_of(&self, group: StreamId) -> Option<u64> {
        let given = self.given.lock().unwrap_or_else(PoisonError::into_inner);
        self.held_in(&given, group)
    }

    fn held_in(&self, given: &Given, group: StreamId) -> Option<u64> {
        if self.stale.load(Ordering::Acquire) {
            return None;
        }
        let partition = partition_of(group, self.partitions);
        match given.partitions.get(&partition) {
            Some(epoch) if given.metadata.is_some() => Some(*epoch),
            Some(_) => None,
            None if given.pending => given.revoked.get(&partition).copied(),
            None => None,
        }
    }

    /// Holds `group` for a transaction, if it is held under `epoch` (any
    /// epoch: `None`): the transaction is fenced with the metadata of the
    /// assignment that gave it.
    pub(crate) fn hold(&self, group: StreamId, epoch: Option<u64>) -> Result<Held<'_>, SinkError> {
        if let Some(reason) = self.broken.lock().unwrap_or_else(PoisonError::into_inner).clone() {
            return Err(SinkError::ControlTopicChanged(reason));
        }
        let partition = partition_of(group, self.partitions);
        let deadline = std::time::Instant::now() + self.settings.session_timeout.max(Duration::from_secs(1)) * 2;
        let mut given = self.given.lock().unwrap_or_else(PoisonError::into_inner);
        // Mid-rebalance, a partition this member may keep: wait for the
        // assignment (and its metadata).
        while given.pending && given.revoked.contains_key(&partition) && !self.stale.load(Ordering::Acquire) {
            let left = deadline.saturating_duration_since(std::time::Instant::now());
            if left.is_zero() {
                return Err(SinkError::NotAssigned(group));
            }
            given = self.changed.wait_timeout(given, left).unwrap_or_else(PoisonError::into_inner).0;
        }
        match (self.held_in(&given, group), &given.metadata) {
            (Some(now), Some(metadata)) if epoch.is_none_or(|e| e == now) => {
                Ok(Held { metadata: metadata.clone(), membership: self, partition })
            }
            _ => Err(SinkError::NotAssigned(group)),
        }
    }

    /// The rebalance took the assignment away: nothing is held from now on
    /// (a transaction under way goes on, fenced by its generation).
    /// A `lost` assignment (this member was dropped from the group) keeps
    /// nothing for the next one. A member whose transaction the coordinator refused counts as lost
    /// too.
    fn revoke(&self, lost: bool) {
        let lost = lost || self.stale.load(Ordering::Acquire);
        let mut given = self.given.lock().unwrap_or_else(PoisonError::into_inner);
        let taken = std::mem::take(&mut given.partitions);
        given.revoked = if lost { HashMap::new() } else { taken };
        given.pending = !lost;
        given.metadata = None;
        self.changed.notify_all();
        tracing::info!(group_id = %self.settings.group_id, lost, "the control partitions were revoked");
    }

    /// The rebalance assigned `partitions`, with the consumer's `metadata`.
    fn assign(&self, partitions: HashSet<i32>, metadata: Option<ConsumerGroupMetadata>) {
        if let Some(beyond) = partitions.iter().find(|p| **p >= self.partitions) {
            let reason = format!(
                "{} has partition {beyond} now, {} when this sink joined: restart every sink of the group",
                self.settings.control_topic, self.partitions
            );
            tracing::error!("{reason}");
            *self.broken.lock().unwrap_or_else(PoisonError::into_inner) = Some(reason);
        }
        let mut given = self.given.lock().unwrap_or_else(PoisonError::into_inner);
        let revoked = std::mem::take(&mut given.revoked);
        given.pending = false;
        let fresh = self.epochs.fetch_add(1, Ordering::AcqRel) + 1;
        given.partitions = partitions.iter().map(|p| (*p, revoked.get(p).copied().unwrap_or(fresh))).collect();
        tracing::info!(
            group_id = %self.settings.group_id,
            epoch = fresh,
            partitions = ?{ let mut p: Vec<_> = partitions.iter().copied().collect(); p.sort_unstable(); p },
            kept = partitions.iter().filter(|p| revoked.contains_key(p)).count(),
            "control partitions assigned"
        );
        given.metadata = metadata.map(Arc::new);
        self.stale.store(false, Ordering::Release);
        self.changed.notify_all();
    }
}

/// The reader's view of the assignment.
impl shardwise_cdc::Assignment for Membership {
    fn holds(&self, group: StreamId) -> Option<u64> {
        self.epoch_of(group)
    }
}

/// The consumer's callbacks.
struct MemberContext {
    membership: Arc<Membership>,
}

impl ClientContext for MemberContext {
    fn error(&self, error: KafkaError, reason: &str) {
        tracing::debug!("librdkafka (the group's consumer): {error}: {reason}");
    }
}

impl ConsumerContext for MemberContext {
    /// Before partitions are revoked (or a rebalance failed): nothing is
    /// held from now on.
    fn pre_rebalance(&self, consumer: &BaseConsumer<Self>, rebalance: &Rebalance<'_>) {
        match rebalance {
            Rebalance::Assign(_) => {}
            Rebalance::Revoke(_) => self.membership.revoke(consumer.assignment_lost()),
            Rebalance::Error(_) => self.membership.revoke(true),
        }
    }

    /// After partitions were assigned: the new assignment, with the group
    /// metadata of the generation that made it.
    fn post_rebalance(&self, consumer: &BaseConsumer<Self>, rebalance: &Rebalance<'_>) {
        if let Rebalance::Assign(list) = rebalance {
            let topic = &self.membership.settings.control_topic;
            let partitions = list.elements().iter().filter(|e| e.topic() == topic).map(|e| e.partition()).collect();
            self.membership.assign(partitions, consumer.group_metadata());
        }
    }
}

/// The sink's membership of the consumer group: its consumer, polled by a
/// thread of its own (which runs the rebalance callbacks), until dropped,
/// which leaves the group.
pub(crate) struct Member {
    pub(crate) membership: Arc<Membership>,
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl std::fmt::Debug for Member {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Member").field("group_id", &self.membership.settings.group_id).finish()
    }
}

impl Member {
    /// Joins the consumer group of `settings` on the control topic (which
    /// must exist): its partitions are counted, the consumer subscribes,
    /// and a thread polls it. Blocking (a metadata request).
    pub(crate) fn join(brokers: &Brokers, settings: &GroupSettings, timeout: Duration) -> Result<Self, SinkError> {
        let topic = &settings.control_topic;
        let probe: BaseConsumer =
            brokers.client(&[]).create().map_err(SinkError::kafka("creating a metadata client"))?;
        let metadata = probe
            .fetch_metadata(Some(topic), timeout)
            .map_err(SinkError::kafka(format!("metadata of the control topic {topic}")))?;
        let count = metadata.topics().iter().find(|t| t.name() == topic).map_or(0, |t| t.partitions().len());
        let partitions = i32::try_from(count).unwrap_or(i32::MAX);
        if partitions < 1 {
            return Err(SinkError::Topic { topic: topic.clone(), code: RDKafkaErrorCode::UnknownTopicOrPartition });
        }
        let membership = Arc::new(Membership {
            settings: settings.clone(),
            partitions,
            given: Mutex::new(Given::default()),
            changed: std::sync::Condvar::new(),
            epochs: AtomicU64::new(0),
            stale: AtomicBool::new(false),
            broken: Mutex::new(None),
        });
        let session = settings.session_timeout.as_millis().max(1);
        let context = MemberContext { membership: membership.clone() };
        let consumer: BaseConsumer<MemberContext> = brokers
            .client(&[])
            .set("group.id", &settings.group_id)
            .set("enable.auto.commit", "false")
            .set("enable.auto.offset.store", "false")
            .set("isolation.level", "read_committed")
            .set("partition.assignment.strategy", "roundrobin")
            .set("session.timeout.ms", session.to_string())
            .set("heartbeat.interval.ms", (session / 3).max(1).to_string())
            .set("allow.auto.create.topics", "false")
            .create_with_context(context)
            .map_err(SinkError::kafka("creating the group's consumer"))?;
        consumer.subscribe(&[topic]).map_err(SinkError::kafka(format!("subscribing to {topic}")))?;
        let stop = Arc::new(AtomicBool::new(false));
        let stopping = stop.clone();
        let thread = std::thread::Builder::new()
            .name("kafka-group".into())
            .spawn(move || {
                // The control topic has no messages: polling serves the
                // rebalance callbacks (and keeps max.poll.interval.ms).
                while !stopping.load(Ordering::Acquire) {
                    if let Some(Err(e)) = consumer.poll(Duration::from_millis(100)) {
                        tracing::debug!(error = %e, "the group's consumer");
                    }
                }
                // Dropping the consumer leaves the group (its partitions are
                // revoked first).
                drop(consumer);
            })
            .map_err(|e| SinkError::Tail { topic: topic.clone(), reason: e.to_string() })?;
        Ok(Member { membership, stop, thread: Some(thread) })
    }
}

impl Drop for Member {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Release);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}
