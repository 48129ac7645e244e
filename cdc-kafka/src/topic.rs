//! Topics: creating the sink's topics, reading a topic to its end as a
//! consumer sees it now ([`read_topic`]), and following one as it grows
//! ([`Tail`]), which the checkpoint store reads.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex, PoisonError};
use std::time::{Duration, Instant};

use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
use rdkafka::client::DefaultClientContext;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::{Message, Offset, TopicPartitionList};

use crate::{Brokers, SinkError};

/// What a consumer of the topic is allowed to see.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Isolation {
    /// Only messages of committed transactions (and non-transactional ones).
    ReadCommitted,
    /// Everything written, aborted transactions included.
    ReadUncommitted,
}

/// One message read back.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TopicMessage {
    /// Its partition.
    pub partition: i32,
    /// Its offset in the partition.
    pub offset: i64,
    /// Its key.
    pub key: Option<Vec<u8>>,
    /// Its value.
    pub value: Option<Vec<u8>>,
}

/// Creates `topic` with `partitions` partitions (compacted if `compacted`)
/// unless it exists; the replication factor is the broker's default.
pub async fn create_topic(brokers: &Brokers, topic: &str, partitions: i32, compacted: bool) -> Result<(), SinkError> {
    let admin: AdminClient<DefaultClientContext> =
        brokers.client(&[]).create().map_err(SinkError::kafka("creating the admin client"))?;
    let mut new = NewTopic::new(topic, partitions, TopicReplication::Fixed(-1));
    if compacted {
        new = new.set("cleanup.policy", "compact");
    }
    let options = AdminOptions::new().operation_timeout(Some(Duration::from_secs(30)));
    let results =
        admin.create_topics([&new], &options).await.map_err(SinkError::kafka(format!("creating topic {topic}")))?;
    for result in results {
        match result {
            Ok(_) | Err((_, RDKafkaErrorCode::TopicAlreadyExists)) => {}
            Err((topic, code)) => return Err(SinkError::Topic { topic, code }),
        }
    }
    Ok(())
}

/// Every message of `topic` up to its end as `isolation` sees it now (for
/// `read_committed`, up to its last stable offset: a transaction still
/// open hides everything after its first message), partition by partition
/// in offset order; `None` if the topic does not exist. Blocking.
pub fn read_topic(
    brokers: &Brokers,
    topic: &str,
    isolation: Isolation,
    timeout: Duration,
) -> Result<Option<Vec<TopicMessage>>, SinkError> {
    let consumer = consumer(brokers, isolation)?;
    let Some(partitions) = assign(&consumer, topic, timeout)? else { return Ok(None) };
    let deadline = Instant::now() + timeout;
    let (mut at_end, mut messages) = (HashSet::new(), Vec::new());
    while at_end.len() < partitions.len() {
        if Instant::now() > deadline {
            return Err(SinkError::ReadTimeout { topic: topic.to_owned(), timeout });
        }
        match consumer.poll(Duration::from_millis(100)) {
            None => {}
            Some(Err(KafkaError::PartitionEOF(p))) => {
                at_end.insert(p);
            }
            Some(Err(e)) => return Err(SinkError::Kafka { what: format!("reading {topic}"), source: e }),
            Some(Ok(m)) => {
                at_end.remove(&m.partition());
                messages.push(message(&m));
            }
        }
    }
    messages.sort_by_key(|m| (m.partition, m.offset));
    Ok(Some(messages))
}

fn message(m: &rdkafka::message::BorrowedMessage<'_>) -> TopicMessage {
    TopicMessage {
        partition: m.partition(),
        offset: m.offset(),
        key: m.key().map(<[u8]>::to_vec),
        value: m.payload().map(<[u8]>::to_vec),
    }
}

fn consumer(brokers: &Brokers, isolation: Isolation) -> Result<BaseConsumer, SinkError> {
    let group = format!("shardwise-read-{}-{:?}", std::process::id(), Instant::now());
    brokers
        .client(&[])
        .set("group.id", &group)
        .set("enable.auto.commit", "false")
        .set("enable.partition.eof", "true")
        .set("allow.auto.create.topics", "false")
        .set(
            "isolation.level",
            match isolation {
                Isolation::ReadCommitted => "read_committed",
                Isolation::ReadUncommitted => "read_uncommitted",
            },
        )
        .create()
        .map_err(SinkError::kafka("creating a consumer"))
}

/// The partitions of `topic` (`None` if it does not exist), each assigned
/// to `consumer` from its beginning.
fn assign(consumer: &BaseConsumer, topic: &str, timeout: Duration) -> Result<Option<Vec<i32>>, SinkError> {
    let metadata =
        consumer.fetch_metadata(Some(topic), timeout).map_err(SinkError::kafka(format!("metadata of {topic}")))?;
    let Some(meta) = metadata.topics().iter().find(|t| t.name() == topic) else { return Ok(None) };
    if let Some(e) = meta.error() {
        let code = RDKafkaErrorCode::from(e);
        return match code {
            RDKafkaErrorCode::UnknownTopicOrPartition => Ok(None),
            code => Err(SinkError::Topic { topic: topic.to_owned(), code }),
        };
    }
    let partitions: Vec<i32> = meta.partitions().iter().map(|p| p.id()).collect();
    if partitions.is_empty() {
        return Ok(None);
    }
    let mut assignment = TopicPartitionList::new();
    for &p in &partitions {
        assignment
            .add_partition_offset(topic, p, Offset::Beginning)
            .map_err(SinkError::kafka(format!("assigning {topic}/{p}")))?;
    }
    consumer.assign(&assignment).map_err(SinkError::kafka(format!("assigning {topic}")))?;
    Ok(Some(partitions))
}

/// What a [`Tail`] folded so far.
struct Followed<T> {
    value: T,
    /// The offset read next in each partition (control records and aborted
    /// messages passed included).
    positions: HashMap<i32, i64>,
    /// Why following stopped, if it did.
    failed: Option<String>,
}

type Shared<T> = Arc<(Mutex<Followed<T>>, Condvar)>;

/// A topic followed with `read_committed` from its beginning by a thread
/// of its own, each message folded into a value as it arrives. A
/// [`Tail::settled`] read waits until the tail has passed the topic's high
/// watermark as it was when the read began, so every transaction written
/// to the topic by then is over and none still open hides what was
/// written after it; a read costs a watermark query, not a new consumer.
/// The thread ends when the tail is dropped.
pub struct Tail<T> {
    topic: String,
    partitions: Vec<i32>,
    /// Asks the high watermarks: `read_uncommitted`, since a
    /// `read_committed` client may answer with the last stable offset.
    watermarks: BaseConsumer,
    followed: Shared<T>,
    stop: Arc<AtomicBool>,
}

impl<T> std::fmt::Debug for Tail<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tail").field("topic", &self.topic).field("partitions", &self.partitions).finish()
    }
}

impl<T: Clone + Send + 'static> Tail<T> {
    /// Follows `topic` from its beginning, folding each committed message
    /// into `value` with `fold`; `None` if the topic does not exist. A fold
    /// error stops the tail, and later reads return it. Blocking.
    pub fn start<F>(
        brokers: &Brokers,
        topic: &str,
        timeout: Duration,
        value: T,
        fold: F,
    ) -> Result<Option<Self>, SinkError>
    where
        F: FnMut(&mut T, TopicMessage) -> Result<(), SinkError> + Send + 'static,
    {
        let consumer = consumer(brokers, Isolation::ReadCommitted)?;
        let Some(partitions) = assign(&consumer, topic, timeout)? else { return Ok(None) };
        let watermarks = self::consumer(brokers, Isolation::ReadUncommitted)?;
        let followed: Shared<T> =
            Arc::new((Mutex::new(Followed { value, positions: HashMap::new(), failed: None }), Condvar::new()));
        let stop = Arc::new(AtomicBool::new(false));
        let (f, s, t, p) = (followed.clone(), stop.clone(), topic.to_owned(), partitions.clone());
        std::thread::Builder::new()
            .name(format!("tail-{topic}"))
            .spawn(move || follow(&consumer, &t, &p, &f, &s, fold))
            .map_err(|e| SinkError::Tail { topic: topic.to_owned(), reason: e.to_string() })?;
        Ok(Some(Tail { topic: topic.to_owned(), partitions, watermarks, followed, stop }))
    }

    /// The value once the tail passed the topic's end as it is now (every
    /// transaction written by now committed or aborted); at most `timeout`.
    /// Blocking.
    pub fn settled(&self, timeout: Duration) -> Result<T, SinkError> {
        let deadline = Instant::now() + timeout;
        let mut ends = HashMap::new();
        for &p in &self.partitions {
            let (_, high) = self
                .watermarks
                .fetch_watermarks(&self.topic, p, timeout)
                .map_err(SinkError::kafka(format!("watermarks of {}/{p}", self.topic)))?;
            ends.insert(p, high);
        }
        let (lock, changed) = &*self.followed;
        let mut followed = lock.lock().unwrap_or_else(PoisonError::into_inner);
        loop {
            if let Some(reason) = &followed.failed {
                return Err(SinkError::Tail { topic: self.topic.clone(), reason: reason.clone() });
            }
            if ends.iter().all(|(p, &end)| end <= 0 || followed.positions.get(p).is_some_and(|&at| at >= end)) {
                return Ok(followed.value.clone());
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(SinkError::ReadTimeout { topic: self.topic.clone(), timeout });
            }
            followed = changed.wait_timeout(followed, left).unwrap_or_else(PoisonError::into_inner).0;
        }
    }
}

impl<T> Drop for Tail<T> {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Release);
    }
}

/// The tail's thread: polls, folds, and publishes the positions.
fn follow<T, F>(
    consumer: &BaseConsumer,
    topic: &str,
    partitions: &[i32],
    followed: &Shared<T>,
    stop: &AtomicBool,
    mut fold: F,
) where
    F: FnMut(&mut T, TopicMessage) -> Result<(), SinkError>,
{
    let (lock, changed) = &**followed;
    while !stop.load(Ordering::Acquire) {
        let polled = consumer.poll(Duration::from_millis(20));
        let positions = consumer.position();
        let mut f = lock.lock().unwrap_or_else(PoisonError::into_inner);
        // Other errors of the client are passing (a broker away for a
        // while): it retries by itself, and a read that waits on it times
        // out.
        f.failed = match polled {
            Some(Ok(m)) => fold(&mut f.value, message(&m)).err().map(|e| e.to_string()),
            Some(Err(e @ KafkaError::MessageConsumptionFatal(_))) => Some(e.to_string()),
            _ => None,
        };
        if let Ok(list) = positions {
            for &p in partitions {
                if let Some(Offset::Offset(at)) = list.find_partition(topic, p).map(|e| e.offset()) {
                    f.positions.insert(p, at);
                }
            }
        }
        let stopped = f.failed.is_some();
        drop(f);
        changed.notify_all();
        if stopped {
            return;
        }
    }
}
