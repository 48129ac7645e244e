//! Topics: creating the sink's topics, and reading a topic to its end, as
//! the checkpoint store does at start and as a `read_committed` consumer
//! sees it.

use std::collections::HashSet;
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

/// Every message of `topic` up to its end as `isolation` sees it (for
/// `read_committed`, up to its last stable offset), partition by partition
/// in offset order; `None` if the topic does not exist. Blocking.
pub fn read_topic(
    brokers: &str,
    topic: &str,
    isolation: Isolation,
    timeout: Duration,
) -> Result<Option<Vec<TopicMessage>>, SinkError> {
    let group = format!("shardwise-read-{}-{:?}", std::process::id(), Instant::now());
    let consumer: BaseConsumer = ClientConfig::new()
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
        .map_err(SinkError::kafka("creating a consumer"))?;
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
                messages.push(TopicMessage {
                    partition: m.partition(),
                    offset: m.offset(),
                    key: m.key().map(<[u8]>::to_vec),
                    value: m.payload().map(<[u8]>::to_vec),
                });
            }
        }
    }
    messages.sort_by_key(|m| (m.partition, m.offset));
    Ok(Some(messages))
}
