//! Topics: creating the sink's topics, and reading a topic to its end, as
//! a consumer sees it now ([`read_topic`]) or once every transaction
//! written to it so far is over ([`read_settled`], as the checkpoint store
//! reads).

use std::collections::{HashMap, HashSet};
use std::time::{Duration, Instant};

use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
use rdkafka::client::DefaultClientContext;
use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::{Message, Offset, TopicPartitionList};

use crate::SinkError;

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
pub async fn create_topic(brokers: &str, topic: &str, partitions: i32, compacted: bool) -> Result<(), SinkError> {
    let admin: AdminClient<DefaultClientContext> = ClientConfig::new()
        .set("bootstrap.servers", brokers)
        .create()
        .map_err(SinkError::kafka("creating the admin client"))?;
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
    brokers: &str,
    topic: &str,
    isolation: Isolation,
    timeout: Duration,
) -> Result<Option<Vec<TopicMessage>>, SinkError> {
    read(brokers, topic, isolation, false, timeout)
}

/// Every committed message of `topic` up to its high watermark as it is
/// now: waits (at most `timeout`) until each transaction written to the
/// topic so far is committed or aborted, so that one still open hides
/// nothing written after it. What the checkpoint store reads. Blocking.
pub fn read_settled(brokers: &str, topic: &str, timeout: Duration) -> Result<Option<Vec<TopicMessage>>, SinkError> {
    read(brokers, topic, Isolation::ReadCommitted, true, timeout)
}

fn consumer(brokers: &str, isolation: Isolation) -> Result<BaseConsumer, SinkError> {
    let group = format!("shardwise-read-{}-{:?}", std::process::id(), Instant::now());
    ClientConfig::new()
        .set("bootstrap.servers", brokers)
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

fn read(
    brokers: &str,
    topic: &str,
    isolation: Isolation,
    settled: bool,
    timeout: Duration,
) -> Result<Option<Vec<TopicMessage>>, SinkError> {
    let consumer = consumer(brokers, isolation)?;
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
    // Where each partition ends now, transactions still open included
    // (asked of a read_uncommitted client: a read_committed one may answer
    // with the last stable offset).
    let mut ends = HashMap::new();
    if settled {
        let watermarks = self::consumer(brokers, Isolation::ReadUncommitted)?;
        for &p in &partitions {
            let (_, high) = watermarks
                .fetch_watermarks(topic, p, timeout)
                .map_err(SinkError::kafka(format!("watermarks of {topic}/{p}")))?;
            ends.insert(p, high);
        }
    }
    let mut assignment = TopicPartitionList::new();
    for &p in &partitions {
        assignment
            .add_partition_offset(topic, p, Offset::Beginning)
            .map_err(SinkError::kafka(format!("assigning {topic}/{p}")))?;
    }
    consumer.assign(&assignment).map_err(SinkError::kafka(format!("assigning {topic}")))?;
    let deadline = Instant::now() + timeout;
    // Partitions read up to the last stable offset, and those settled too
    // (that offset past the end seen at the start).
    let (mut at_end, mut settled_ones, mut messages) = (HashSet::new(), HashSet::new(), Vec::new());
    while settled_ones.len() < partitions.len() {
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
                settled_ones.remove(&m.partition());
                messages.push(TopicMessage {
                    partition: m.partition(),
                    offset: m.offset(),
                    key: m.key().map(<[u8]>::to_vec),
                    value: m.payload().map(<[u8]>::to_vec),
                });
            }
        }
        // An aborted transaction moves the position without a message, so
        // the position is looked at after every poll.
        for &p in &at_end {
            let end = ends.get(&p).copied().unwrap_or(0);
            if !settled_ones.contains(&p) && (end <= 0 || position(&consumer, topic, p)? >= end) {
                settled_ones.insert(p);
            }
        }
    }
    messages.sort_by_key(|m| (m.partition, m.offset));
    Ok(Some(messages))
}

/// The offset `consumer` reads next in `topic`/`partition` (control
/// records and aborted messages it skipped included); 0 if none yet.
fn position(consumer: &BaseConsumer, topic: &str, partition: i32) -> Result<i64, SinkError> {
    let positions = consumer.position().map_err(SinkError::kafka(format!("position in {topic}")))?;
    Ok(match positions.find_partition(topic, partition).map(|e| e.offset()) {
        Some(Offset::Offset(o)) => o,
        _ => 0,
    })
}
