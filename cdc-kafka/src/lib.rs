// Unsafe code only in the unit tests' mock-broker helper (librdkafka's C
// test API, `producers::tests`).
#![cfg_attr(not(test), forbid(unsafe_code))]
#![cfg_attr(test, deny(unsafe_code))]
#![warn(missing_docs)]
//! # shardwise-cdc-kafka
//!
//! A table's changes into Kafka as Debezium envelopes (the ScyllaDB CDC
//! Source Connector's format, [`shardwise_cdc::debezium`]), **exactly once**
//! for `read_committed` consumers: each window of a stream group is one Kafka
//! transaction holding the window's messages and the group's checkpoint
//! record, so the checkpoint lives in Kafka and moves only with what was
//! delivered. An at-least-once mode (no transactions) stays available.
//!
//! Modules (one concept each):
//! * [`brokers`]: the Kafka cluster and the librdkafka settings every
//!   client of the sink takes (a secured cluster's SASL and TLS settings);
//! * [`sink`]: the sink ([`KafkaSink`]): buffers a window's envelopes and
//!   writes them with the group's progress, in one transaction; keyed by
//!   the table's partition key by default ([`KeyMode`]), so that each
//!   partition's changes, its partition deletes included, keep their order
//!   in one Kafka partition;
//! * [`producers`]: its producers, and whom Kafka fences: a previous run,
//!   a group's earlier holder when sinks share a table through leases, or
//!   a member of an earlier generation of the consumer group the sinks
//!   form ([`Fencing`]);
//! * [`group`]: the multi-process mode on Kafka's group protocol: the
//!   sinks are the members of a Kafka consumer group on a control topic,
//!   whose assignment says which CDC stream groups each writes, and every
//!   transaction is fenced by the group's generation (KIP-447);
//! * [`positions`]: windows too big for one transaction, written in parts,
//!   and the rows a consumer that reads one again skips;
//! * [`checkpoints`]: the checkpoint store the reader resumes from, read
//!   from the sink's checkpoint topic ([`KafkaCheckpoints`]);
//! * [`topic`]: creating topics, reading one to its end, and following one
//!   as it grows ([`topic::Tail`]).
//!
//! The `kafka-sink` binary runs a reader with this sink.
//!
//! The client is `rdkafka` (librdkafka), the one Rust Kafka client with
//! transactions; librdkafka is built from the sources the crate vendors,
//! linked with the system's OpenSSL (`rdkafka`'s `ssl` feature: building
//! needs OpenSSL's headers and `pkg-config`, e.g. `apt-get install
//! libssl-dev pkg-config`) and with none of its other optional libraries
//! (compression, GSSAPI). So the sink reaches a secured cluster: TLS
//! (`security.protocol=SSL`, the broker verified with `ssl.ca.location`)
//! and SASL PLAIN, SCRAM-SHA-256 and SCRAM-SHA-512 (SCRAM needs OpenSSL
//! too), over plain TCP or TLS (`SASL_PLAINTEXT`, `SASL_SSL`); Kerberos
//! (GSSAPI) is not built in. The settings are given as [`Brokers`]'
//! settings, or read from a properties file
//! ([`brokers::read_properties`]).

pub mod brokers;
pub mod checkpoints;
pub mod group;
pub mod positions;
pub mod producers;
pub mod sink;
pub mod topic;

pub use brokers::Brokers;
pub use checkpoints::KafkaCheckpoints;
pub use group::GroupSettings;
pub use producers::Fencing;
pub use sink::{Delivery, KafkaSink, KeyMode, SinkConfig, SinkStats};

use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use shardwise_cdc::StreamId;

/// What can go wrong talking to Kafka.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SinkError {
    /// A Kafka call failed.
    #[error("kafka: {what}: {source}")]
    Kafka {
        /// What was being done.
        what: String,
        /// The client's error.
        source: KafkaError,
    },
    /// A later producer of this transactional id fenced this one: another
    /// run of the sink, or the group's next holder, took over.
    #[error("kafka fenced the producer {transactional_id}: another took over ({source})")]
    Fenced {
        /// The fenced producer's id.
        transactional_id: String,
        /// The client's error.
        source: KafkaError,
    },
    /// A transaction failed and could not be aborted: the producer can no
    /// longer write (librdkafka calls the error fatal). The process's
    /// producer is replaced; a group's producer is forgotten, and the
    /// group left until it is taken again.
    #[error("kafka producer {transactional_id} can no longer write ({source}); the transaction had failed: {failed}")]
    Unusable {
        /// The producer's id.
        transactional_id: String,
        /// Why the transaction failed.
        failed: Box<str>,
        /// Why aborting it failed.
        source: KafkaError,
    },
    /// A transaction's commit was not confirmed (the coordinator did not
    /// answer in time, tried [`crate::producers`]' attempts times): it may
    /// have committed. It is not aborted nor written again; the producer is
    /// replaced (its successor's initialisation completes or aborts it), and
    /// the group is left, to be read again from what Kafka holds (a reader
    /// without leases or a consumer group stops: restart it).
    #[error("kafka producer {transactional_id}: a transaction's commit was not confirmed ({source}); it may have committed, so it is not written again")]
    CommitUnknown {
        /// The producer's id.
        transactional_id: String,
        /// The client's last error.
        source: KafkaError,
    },
    /// A window of a group this sink has no producer for: with
    /// [`Fencing::PerGroup`], a group not taken through
    /// [`KafkaCheckpoints`]' fence (which needs leases), or taken over since.
    #[error("no producer for CDC group {0}: not taken through a lease, or taken over since")]
    NotHeld(StreamId),
    /// With [`Fencing::Group`]: a window (or progress) of a group that the
    /// consumer group does not assign to this sink now, or assigned it
    /// again since the window was read (not joined yet: nothing is).
    #[error("CDC group {0} is not assigned to this sink (now, or since its window was read)")]
    NotAssigned(StreamId),
    /// With [`Fencing::Group`]: the group coordinator refused the
    /// transaction's offsets: this member's generation of the consumer
    /// group is over (it was paused or cut off past its session timeout, or
    /// a rebalance is under way). The transaction was aborted; nothing is
    /// assigned here until the next rebalance.
    #[error("the kafka consumer group moved on: its coordinator refused this sink's transaction ({source})")]
    Rebalanced {
        /// The client's error.
        source: KafkaError,
    },
    /// [`crate::KafkaSink::join_group`] on a sink without [`Fencing::Group`].
    #[error("the sink is not configured to share its table through a kafka consumer group (Fencing::Group)")]
    NoGroup,
    /// The control topic's partitions changed while the sink ran: groups
    /// would map to partitions otherwise than the other sinks map them.
    #[error("the control topic changed: {0}")]
    ControlTopicChanged(String),
    /// Creating or reading a topic failed.
    #[error("kafka topic {topic}: {code}")]
    Topic {
        /// The topic.
        topic: String,
        /// The broker's answer.
        code: RDKafkaErrorCode,
    },
    /// Following a topic stopped.
    #[error("following kafka topic {topic}: {reason}")]
    Tail {
        /// The topic.
        topic: String,
        /// Why it stopped.
        reason: String,
    },
    /// A topic was not read to its end in time.
    #[error("reading kafka topic {topic} to its end took longer than {timeout:?}")]
    ReadTimeout {
        /// The topic.
        topic: String,
        /// The limit.
        timeout: std::time::Duration,
    },
    /// A librdkafka setting the sink sets itself was given
    /// ([`brokers::SINK_OWNED`]).
    #[error("the kafka setting {0} is the sink's own: exactly once rests on it, or it has a flag of its own")]
    OwnedSetting(String),
    /// A properties file of librdkafka settings could not be read, or a
    /// line of it is not a setting ([`brokers::read_properties`]).
    #[error(transparent)]
    Properties(#[from] brokers::PropertiesError),
    /// Messages keyed by the table's partition key ([`KeyMode`]'s default)
    /// whose columns were not read from the schema
    /// ([`SinkConfig::load_table`]).
    #[error(
        "messages are keyed by the partition key of {0}, which is not known: read it from the schema \
         (SinkConfig::load_table), or key them as the connector does (KeyMode::PrimaryKey)"
    )]
    PartitionKeyUnknown(String),
    /// The base table's schema could not be read, or has no such table
    /// ([`SinkConfig::load_table`]).
    #[error(transparent)]
    Table(#[from] shardwise_cdc::debezium::TypeError),
    /// Messages of an at-least-once window were not acknowledged.
    #[error("{failed} messages were not delivered to kafka; the last error: {last}")]
    Undelivered {
        /// How many.
        failed: u64,
        /// The last delivery error.
        last: String,
    },
}

impl SinkError {
    fn kafka(what: impl Into<String>) -> impl FnOnce(KafkaError) -> SinkError {
        let what = what.into();
        move |source| SinkError::Kafka { what, source }
    }
}
