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
//!   assigned anew gets a new epoch, which the groups taken under it carry,
//!   so they are taken again (their progress read from Kafka).
//! * **A partition given back** to the member that held it before keeps its
//!   epoch, so its groups are read on without being taken again, only if
//!   nobody else wrote it in between. The member cannot tell that from the
//!   rebalances it sees: a generation whose assignment never reached it (its
//!   `SyncGroup` answered "rebalance in progress" because a third member
//!   joined, while the leader got its own assignment and wrote under it)
//!   looks like no generation at all, and reading on from its own progress
//!   then wrote the other member's windows a second time. So every
//!   transaction commits its control partition's offset with a tag as the
//!   offset's metadata (this process's run and the epoch it held the
//!   partition under, `Held::offsets`), and on a new assignment the member
//!   fetches the offsets committed to the partitions it held (with
//!   `read_committed`, librdkafka asks for stable offsets: the fetch waits
//!   for transactions still open): a partition whose last commit is its own
//!   tag under that epoch, or that nobody ever committed to, is kept
//!   (`kept`); any other, or a fetch that fails, is taken anew.
//! * **Revocation**: the rebalance callback clears the assignment at once:
//!   no transaction of a revoked group begins after it (one of a partition
//!   this member may keep waits for the assignment, and begins if the
//!   partition was kept; the reader reads such a partition's groups on
//!   meanwhile). It does not wait for
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

/// The tag a transaction of this `run` commits its control partition's
/// offset with, holding it under `epoch`.
fn tag(run: &str, epoch: u64) -> String {
    format!("shardwise {run} {epoch}")
}

/// Of the partitions given back (`back`, each with the epoch this run held
/// it under), those to keep: the ones whose last committed offset in
/// `committed` (of `topic`) carries this `run`'s tag under that epoch, or
/// that nobody committed to. Any other commit is another member's (or
/// another run's) since: the partition is taken anew.
fn kept(back: &HashMap<i32, u64>, committed: &TopicPartitionList, topic: &str, run: &str) -> HashMap<i32, u64> {
    back.iter()
        .filter(|(p, epoch)| {
            committed.find_partition(topic, **p).is_some_and(|e| {
                e.error().is_ok()
                    && match e.offset() {
                        Offset::Invalid => e.metadata().is_empty(),
                        _ => e.metadata() == tag(run, **epoch),
                    }
            })
        })
        .map(|(p, e)| (*p, *e))
        .collect()
}

/// What the consumer group gave this sink.
#[derive(Default)]
struct Given {
    /// The control partitions assigned, each with the epoch it was given
    /// under.
    partitions: HashMap<i32, u64>,
    /// What the last revocation took, if this member took part in the
    /// rebalance (its assignment was not lost): the partitions the next
    /// assignment may keep ([`kept`]).
    revoked: HashMap<i32, u64>,
    /// Between such a revocation and the next assignment: the partitions
    /// revoked count as still held by the reader, which reads on, and a
    /// transaction of one of them waits for the assignment
    /// ([`Membership::hold`]), which keeps or replaces its epoch.
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
    /// This run of the process, in the tags of its commits ([`tag`]).
    run: String,
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
    /// The epoch the partition is held under.
    epoch: u64,
}

impl Held<'_> {
    /// The offsets the transaction commits: its group's control partition,
    /// at 0 (nothing is consumed; the commit is the fence), tagged with
    /// this run and the hold's epoch ([`tag`]).
    pub(crate) fn offsets(&self) -> Result<TopicPartitionList, SinkError> {
        let mut offsets = TopicPartitionList::new();
        offsets
            .add_partition_offset(&self.membership.settings.control_topic, self.partition, Offset::Offset(0))
            .map_err(SinkError::kafka("the control partition's offset"))?;
        for mut e in offsets.elements() {
            e.set_metadata(tag(&self.membership.run, self.epoch));
        }
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
    /// Nothing assigned yet, on a control topic of `partitions` partitions.
    fn new(settings: GroupSettings, partitions: i32) -> Self {
        let started = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
        Membership {
            settings,
            partitions,
            given: Mutex::new(Given::default()),
            changed: std::sync::Condvar::new(),
            epochs: AtomicU64::new(0),
            run: format!("{}.{}", std::process::id(), started.as_nanos()),
            stale: AtomicBool::new(false),
            broken: Mutex::new(None),
        }
    }

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
                Ok(Held { metadata: metadata.clone(), membership: self, partition, epoch: now })
            }
            _ => Err(SinkError::NotAssigned(group)),
        }
    }

    /// The rebalance took the assignment away (`lost`: this member was
    /// dropped from the group): nothing is held from now on (a transaction
    /// under way goes on, fenced by its generation).
    /// A member whose transaction the coordinator refused counts as lost.
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

    /// The partitions of `assigned` that the last revocation took, with
    /// their epochs: those the assignment may keep ([`kept`]).
    fn given_back(&self, assigned: &HashSet<i32>) -> HashMap<i32, u64> {
        let given = self.given.lock().unwrap_or_else(PoisonError::into_inner);
        given.revoked.iter().filter(|(p, _)| assigned.contains(p)).map(|(p, e)| (*p, *e)).collect()
    }

    /// The rebalance assigned `partitions`, with the consumer's `metadata`;
    /// those in `keep` keep the epoch given (see [`kept`]), the others get
    /// a new one.
    fn assign(&self, partitions: HashSet<i32>, metadata: Option<ConsumerGroupMetadata>, keep: &HashMap<i32, u64>) {
        if let Some(beyond) = partitions.iter().find(|p| **p >= self.partitions) {
            let reason = format!(
                "{} has partition {beyond} now, {} when this sink joined: restart every sink of the group",
                self.settings.control_topic, self.partitions
            );
            tracing::error!("{reason}");
            *self.broken.lock().unwrap_or_else(PoisonError::into_inner) = Some(reason);
        }
        let mut given = self.given.lock().unwrap_or_else(PoisonError::into_inner);
        given.revoked.clear();
        given.pending = false;
        let epoch = self.epochs.fetch_add(1, Ordering::AcqRel) + 1;
        given.partitions = partitions.iter().map(|p| (*p, keep.get(p).copied().unwrap_or(epoch))).collect();
        tracing::info!(
            group_id = %self.settings.group_id,
            epoch,
            partitions = ?{ let mut p: Vec<_> = partitions.iter().copied().collect(); p.sort_unstable(); p },
            kept = keep.len(),
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
            let m = &self.membership;
            let topic = &m.settings.control_topic;
            let partitions = list.elements().iter().filter(|e| e.topic() == topic).map(|e| e.partition()).collect();
            let back = m.given_back(&partitions);
            let keep = if back.is_empty() {
                HashMap::new()
            } else {
                let mut asked = TopicPartitionList::new();
                for p in back.keys() {
                    asked.add_partition(topic, *p);
                }
                match consumer.committed_offsets(asked, m.settings.session_timeout.max(Duration::from_secs(1))) {
                    Ok(committed) => kept(&back, &committed, topic, &m.run),
                    Err(e) => {
                        tracing::warn!(error = %e, "the control partitions' commits could not be read; every partition is taken anew");
                        HashMap::new()
                    }
                }
            };
            m.assign(partitions, consumer.group_metadata(), &keep);
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
        let membership = Arc::new(Membership::new(settings.clone(), partitions));
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

#[cfg(test)]
mod tests {
    use super::*;

    /// A consumer's group metadata, as an assignment brings it (made
    /// without connecting).
    fn metadata() -> ConsumerGroupMetadata {
        let consumer: BaseConsumer = rdkafka::ClientConfig::new()
            .set("bootstrap.servers", "127.0.0.1:1")
            .set("group.id", "g")
            .create()
            .expect("a consumer");
        consumer.group_metadata().expect("group metadata")
    }

    /// Issue 51: a partition given back to the member that held it keeps
    /// its epoch only when its last commit is this run's, under that epoch,
    /// or nobody ever committed to it; a commit of another member (a
    /// generation whose assignment never reached this one) or of another
    /// run, an error, or no answer take it anew.
    #[test]
    fn a_partition_given_back_is_kept_only_if_its_last_commit_is_this_runs() {
        let back = HashMap::from([(0, 7), (1, 7), (2, 7), (3, 7), (4, 7), (5, 7)]);
        let mut committed = TopicPartitionList::new();
        let mut commit = |p: i32, offset: Offset, metadata: &str| {
            committed.add_partition_offset("control", p, offset).expect("an offset");
            committed.find_partition("control", p).expect("added").set_metadata(metadata);
        };
        commit(0, Offset::Offset(0), &tag("run", 7));
        commit(1, Offset::Invalid, "");
        commit(2, Offset::Offset(0), &tag("other", 7));
        commit(3, Offset::Offset(0), &tag("run", 6));
        commit(4, Offset::Offset(0), "");
        let kept = kept(&back, &committed, "control", "run");
        assert_eq!(kept, HashMap::from([(0, 7), (1, 7)]), "own last commit, or none; 5 unanswered");
    }

    /// A revocation this member took part in offers its partitions to the
    /// next assignment, which keeps the epochs it is told to keep and gives
    /// the others a new one; a lost assignment (or a refused transaction)
    /// offers nothing. Between the revocation and the assignment the
    /// partitions revoked still count as held and their transactions wait:
    /// one of a partition kept goes on, one read under an epoch not kept is
    /// refused.
    #[test]
    fn an_assignment_keeps_the_epochs_it_is_told_to_and_no_others() {
        let membership = Membership::new(GroupSettings::new("g", "cp"), 4);
        let a = StreamId::from_bytes([3; 16]);
        let b = (0..=u8::MAX)
            .map(|n| {
                let mut id = [3; 16];
                id[15] = n;
                StreamId::from_bytes(id)
            })
            .find(|b| partition_of(*b, 4) != partition_of(a, 4))
            .expect("another partition");
        let (pa, pb) = (partition_of(a, 4), partition_of(b, 4));
        assert_ne!(pa, pb, "two partitions");
        let both = HashSet::from([pa, pb]);
        membership.assign(both.clone(), Some(metadata()), &HashMap::new());
        let (ea, eb) = (membership.epoch_of(a).expect("a"), membership.epoch_of(b).expect("b"));

        membership.revoke(false);
        assert_eq!(membership.epoch_of(a), Some(ea), "read on mid-rebalance");
        let back = membership.given_back(&both);
        assert_eq!(back, HashMap::from([(pa, ea), (pb, eb)]));
        // Transactions mid-rebalance wait for the assignment.
        std::thread::scope(|scope| {
            let waiting_a = scope.spawn(|| membership.hold(a, Some(ea)).map(|_| ()));
            let waiting_b = scope.spawn(|| membership.hold(b, Some(eb)).map(|_| ()));
            std::thread::sleep(Duration::from_millis(100));
            membership.assign(both.clone(), Some(metadata()), &HashMap::from([(pa, ea)]));
            assert!(waiting_a.join().expect("join").is_ok(), "kept: the transaction goes on");
            let refused = waiting_b.join().expect("join");
            assert!(matches!(refused, Err(SinkError::NotAssigned(_))), "taken anew: {refused:?}");
        });
        assert_eq!(membership.epoch_of(a), Some(ea), "kept");
        let fresh = membership.epoch_of(b).expect("b again");
        assert_ne!(fresh, eb, "taken anew");
        assert!(membership.hold(b, Some(fresh)).is_ok());
        assert!(membership.given_back(&both).is_empty(), "offered to one assignment only");

        membership.revoke(true);
        assert!(membership.given_back(&both).is_empty(), "a lost assignment offers nothing");
        membership.assign(both.clone(), Some(metadata()), &HashMap::new());
        membership.hold(a, None).expect("held").refused();
        membership.revoke(false);
        assert!(membership.given_back(&both).is_empty(), "refused: counted as lost");
    }

    /// A refusal of the current assignment's transaction holds nothing
    /// until the next assignment; a refusal under an assignment since
    /// replaced changes nothing.
    #[test]
    fn a_refusal_holds_nothing_until_the_next_assignment() {
        let membership = Membership::new(GroupSettings::new("g", "cp"), 4);
        let group = StreamId::from_bytes([3; 16]);
        let partitions = HashSet::from([partition_of(group, 4)]);
        membership.assign(partitions.clone(), Some(metadata()), &HashMap::new());
        let held = membership.hold(group, None).expect("held");
        membership.assign(partitions.clone(), Some(metadata()), &HashMap::new());
        held.refused();
        assert!(membership.epoch_of(group).is_some(), "a refusal of the assignment before");
        membership.hold(group, None).expect("held").refused();
        assert_eq!(membership.epoch_of(group), None, "refused: nothing held");
        membership.assign(partitions, Some(metadata()), &HashMap::new());
        assert!(membership.epoch_of(group).is_some());
    }
}
