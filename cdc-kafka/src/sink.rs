//! The sink: a consumer per stream group that turns each change into its
//! Debezium envelope, keeps a window's envelopes, and at the window's end
//! writes them to the table's topic together with the group's checkpoint
//! record (`<log>/<group>` → `"<generation> <progress>"`) in the checkpoint
//! topic.
//!
//! **Exactly once** ([`Delivery::ExactlyOnce`]): the window's messages and
//! its checkpoint record are one Kafka transaction. The reader moves a
//! group's progress past a window only after its `window_end` returned, and
//! a restarted sink resumes from the checkpoint topic read with
//! `read_committed` ([`crate::KafkaCheckpoints`]). So a crash at any point
//! either committed a window with its record (not read again) or aborted
//! both (read again): a `read_committed` consumer of the topic sees every
//! change once. The producer's `transactional.id` must be the same across
//! restarts: initialising it fences a producer of the previous run that is
//! still alive and aborts the transaction it left open (`docs/kafka-sink.md`
//! §1 and §3).
//!
//! **At least once** ([`Delivery::AtLeastOnce`]): the same messages and
//! records without a transaction; the window ends once Kafka acknowledged
//! them all. A crash between the messages and the record repeats the window.
//!
//! The sink's producer is shared by the reader's workers: one window is
//! written at a time (a transactional producer has one open transaction).
//! Windows without an envelope write nothing: reading them again after a
//! restart delivers nothing twice.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use rdkafka::config::ClientConfig;
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::producer::{BaseRecord, DeliveryResult, Producer, ProducerContext, ThreadedProducer};
use rdkafka::ClientContext;
use shardwise_cdc::checkpoint::log_name;
use shardwise_cdc::checkpoint::record::{record_key, record_value};
use shardwise_cdc::debezium::{envelope, Source};
use shardwise_cdc::{
    ChangeWithImages, Consumer, ConsumerError, ConsumerFactory, GroupInfo, ImagesConsumer, ReadWindow, WithImages,
};

use crate::checkpoints::KafkaCheckpoints;
use crate::SinkError;

/// How messages reach Kafka.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Delivery {
    /// Each window and its checkpoint record in one transaction of a
    /// producer with this `transactional.id` (keep it across restarts).
    ExactlyOnce {
        /// The producer's `transactional.id`.
        transactional_id: String,
    },
    /// No transactions: a crash repeats the window being written.
    AtLeastOnce,
}

/// Where the sink writes, and how.
#[derive(Debug, Clone)]
pub struct SinkConfig {
    /// The Kafka cluster (`host:port[,host:port…]`).
    pub brokers: String,
    /// The connector's logical name (the envelopes' `source.name`).
    pub name: String,
    /// The base table's keyspace.
    pub keyspace: String,
    /// The base table.
    pub table: String,
    /// The topic of the changes (by default `name.keyspace.table`, the
    /// connector's).
    pub topic: String,
    /// The topic of the checkpoint records (compacted).
    pub checkpoint_topic: String,
    /// Exactly once or at least once.
    pub delivery: Delivery,
    /// The most a Kafka call (initialising the producer, committing a
    /// window, reading the checkpoints) may take.
    pub timeout: Duration,
}

impl SinkConfig {
    /// Exactly-once delivery of `keyspace.table` to `brokers` under the
    /// logical name `name`: topic `name.keyspace.table`, checkpoints in
    /// `shardwise-cdc-checkpoints`, transactional id
    /// `shardwise-cdc-<topic>`, 30 s per Kafka call.
    pub fn new(brokers: &str, name: &str, keyspace: &str, table: &str) -> Self {
        let topic = Source { name, keyspace, table }.topic();
        SinkConfig {
            brokers: brokers.to_owned(),
            name: name.to_owned(),
            keyspace: keyspace.to_owned(),
            table: table.to_owned(),
            delivery: Delivery::ExactlyOnce { transactional_id: format!("shardwise-cdc-{topic}") },
            topic,
            checkpoint_topic: "shardwise-cdc-checkpoints".to_owned(),
            timeout: Duration::from_secs(30),
        }
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

/// Counts failed deliveries, for the at-least-once mode (a transaction's
/// commit reports its own).
#[derive(Debug, Default)]
struct Deliveries {
    failed: AtomicU64,
    last: Mutex<Option<String>>,
}

impl ClientContext for Deliveries {}

impl ProducerContext for Deliveries {
    type DeliveryOpaque = ();

    fn delivery(&self, result: &DeliveryResult<'_>, _: ()) {
        if let Err((e, _)) = result {
            self.failed.fetch_add(1, Ordering::Relaxed);
            *self.last.lock().unwrap_or_else(|e| e.into_inner()) = Some(e.to_string());
        }
    }
}

struct Shared {
    config: SinkConfig,
    log: String,
    producer: ThreadedProducer<Deliveries>,
    /// One window written at a time.
    writing: Mutex<()>,
    messages: AtomicU64,
    windows: AtomicU64,
    no_event: AtomicU64,
}

/// The Kafka sink; cheap to clone.
#[derive(Clone)]
pub struct KafkaSink {
    shared: Arc<Shared>,
}

impl std::fmt::Debug for KafkaSink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KafkaSink").field("config", &self.shared.config).finish()
    }
}

impl KafkaSink {
    /// Creates the sink's producer; in exactly-once mode, initialises its
    /// transactions, which aborts what a previous run left open. Blocking.
    pub fn new(config: SinkConfig) -> Result<Self, SinkError> {
        let client = producer_config(&config);
        let producer: ThreadedProducer<Deliveries> =
            client.create_with_context(Deliveries::default()).map_err(SinkError::kafka("creating the producer"))?;
        if let Delivery::ExactlyOnce { transactional_id } = &config.delivery {
            producer
                .init_transactions(config.timeout)
                .map_err(SinkError::kafka(format!("initialising transactions of {transactional_id}")))?;
        }
        let log = log_name(&config.keyspace, &config.table);
        Ok(KafkaSink {
            shared: Arc::new(Shared {
                config,
                log,
                producer,
                writing: Mutex::new(()),
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
        crate::topic::create_topic(&c.brokers, &c.topic, partitions, false).await?;
        crate::topic::create_topic(&c.brokers, &c.checkpoint_topic, 1, true).await
    }

    /// The checkpoint store to build the reader with.
    pub fn checkpoints(&self) -> KafkaCheckpoints {
        let c = &self.shared.config;
        KafkaCheckpoints::new(&c.brokers, &c.checkpoint_topic, c.timeout)
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

    /// Writes a window's envelopes and the group's record: one transaction,
    /// or acknowledged messages in at-least-once mode.
    fn write_window(&self, messages: &[(String, String)], window: &ReadWindow) -> Result<(), SinkError> {
        let s = &*self.shared;
        let Some(&group) = window.streams.streams().first() else { return Ok(()) };
        let key = record_key(&s.log, group);
        let value = record_value(window.generation, window.to);
        let _writing = s.writing.lock().unwrap_or_else(|e| e.into_inner());
        let transactional = matches!(s.config.delivery, Delivery::ExactlyOnce { .. });
        if transactional {
            s.producer.begin_transaction().map_err(SinkError::kafka("beginning a transaction"))?;
        }
        let written = (|| {
            for (k, v) in messages {
                self.send(&s.config.topic, k, v)?;
            }
            self.send(&s.config.checkpoint_topic, &key, &value)?;
            if transactional {
                s.producer.commit_transaction(s.config.timeout).map_err(SinkError::kafka("committing a window"))
            } else {
                self.flushed()
            }
        })();
        match written {
            Ok(()) => {
                s.messages.fetch_add(messages.len() as u64, Ordering::Relaxed);
                s.windows.fetch_add(1, Ordering::Relaxed);
                Ok(())
            }
            Err(e) => {
                if transactional {
                    // Best effort: what is not aborted here is aborted when
                    // the next run initialises the same transactional id.
                    let _ = s.producer.abort_transaction(s.config.timeout);
                }
                Err(e)
            }
        }
    }

    /// Queues one message, waiting while the producer's queue is full.
    fn send(&self, topic: &str, key: &str, value: &str) -> Result<(), SinkError> {
        let mut record = BaseRecord::to(topic).key(key).payload(value);
        loop {
            match self.shared.producer.send(record) {
                Ok(()) => return Ok(()),
                Err((KafkaError::MessageProduction(RDKafkaErrorCode::QueueFull), back)) => {
                    record = back;
                    std::thread::sleep(Duration::from_millis(5));
                }
                Err((e, _)) => return Err(SinkError::Kafka { what: format!("producing to {topic}"), source: e }),
            }
        }
    }

    /// At least once: waits until Kafka acknowledged every queued message.
    fn flushed(&self) -> Result<(), SinkError> {
        let s = &*self.shared;
        s.producer.flush(s.config.timeout).map_err(SinkError::kafka("flushing a window"))?;
        let failed = s.producer.context().failed.swap(0, Ordering::Relaxed);
        if failed > 0 {
            let last = s.producer.context().last.lock().unwrap_or_else(|e| e.into_inner()).take();
            return Err(SinkError::Undelivered { failed, last: last.unwrap_or_default() });
        }
        Ok(())
    }
}

/// The producer's settings for `config`.
fn producer_config(config: &SinkConfig) -> ClientConfig {
    let mut client = ClientConfig::new();
    client
        .set("bootstrap.servers", &config.brokers)
        .set("enable.idempotence", "true")
        .set("acks", "all")
        .set("linger.ms", "5")
        .set("message.timeout.ms", config.timeout.as_millis().to_string());
    if let Delivery::ExactlyOnce { transactional_id } = &config.delivery {
        // A message may not outlive its transaction: librdkafka refuses a
        // message timeout above the transaction timeout (60 s by default).
        let transaction_ms = config.timeout.as_millis().max(60_000);
        client.set("transactional.id", transactional_id).set("transaction.timeout.ms", transaction_ms.to_string());
    }
    client
}

/// One group's consumer: the envelopes of the window being read.
struct WindowBuffer {
    sink: KafkaSink,
    messages: Vec<(String, String)>,
}

impl ImagesConsumer for WindowBuffer {
    fn consume(&mut self, change: ChangeWithImages) -> Result<(), ConsumerError> {
        let c = &self.sink.shared.config;
        let source = Source { name: &c.name, keyspace: &c.keyspace, table: &c.table };
        let now_ms = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_millis() as i64);
        match envelope(&change, &source, now_ms) {
            Some(e) => self.messages.push((e.key, e.value)),
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
        result.map_err(ConsumerError::failed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// librdkafka accepts the settings whatever the timeout (it refuses a
    /// message timeout above the transaction timeout), in both modes;
    /// creating a producer does not connect.
    #[test]
    fn the_producer_settings_are_accepted() {
        for timeout in [Duration::from_secs(1), Duration::from_secs(30), Duration::from_secs(600)] {
            for delivery in [Delivery::AtLeastOnce, Delivery::ExactlyOnce { transactional_id: "t".into() }] {
                let mut config = SinkConfig::new("127.0.0.1:1", "n", "ks", "t");
                (config.timeout, config.delivery) = (timeout, delivery.clone());
                let created: Result<ThreadedProducer<Deliveries>, _> =
                    producer_config(&config).create_with_context(Deliveries::default());
                assert!(created.is_ok(), "{timeout:?} {delivery:?}: {:?}", created.err());
            }
        }
        let config = SinkConfig::new("b:9092", "shop", "ks", "t");
        assert_eq!(
            (config.topic.as_str(), config.checkpoint_topic.as_str()),
            ("shop.ks.t", "shardwise-cdc-checkpoints")
        );
        assert_eq!(config.delivery, Delivery::ExactlyOnce { transactional_id: "shardwise-cdc-shop.ks.t".into() });
    }
}
