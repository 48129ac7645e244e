//! `kafka-sink`: follows a CDC-enabled table and writes every change to a
//! Kafka topic as the ScyllaDB CDC Source Connector's Debezium envelope,
//! exactly once for `read_committed` consumers (each window of a stream
//! group and its checkpoint record in one Kafka transaction), or at least
//! once with `--at-least-once`. Progress on stderr; Ctrl-C stops it after
//! the current window.
//!
//! ```text
//! kafka-sink --node 127.0.0.1:9042 --keyspace ks --table t --brokers 127.0.0.1:9092 --name shop
//! ```
//!
//! The checkpoint lives in Kafka (`--checkpoint-topic`): a restart with the
//! same `--transactional-id` resumes where the topic says, and the topic
//! holds each change once (`tests/sink.rs` kills it with SIGKILL and
//! restarts it). With `--lease-keyspace ks2`, any number of sinks share the
//! table: each writes the groups it holds a lease of, each group with its
//! own transactional id, so that a takeover fences the group's earlier
//! holder in Kafka (`tests/sink.rs` pauses one past its lease).
//!
//! Messages are keyed by the table's partition key (`--key partition`, the
//! default): Kafka orders messages within a partition only, and this way
//! every change of a table partition, its partition deletes included, is in
//! one Kafka partition, in write order. `--key connector` (also `primary`,
//! its earlier name) keys them as the ScyllaDB connector does, by the
//! primary key, for consumers that expect those keys; a partition delete's
//! key (null clustering key) then is another than its rows', so it may land
//! in another Kafka partition and be seen before or after their changes.

use std::sync::Arc;

use clap::Parser;
use shardwise_cdc_kafka::{Delivery, Fencing, KafkaSink, KeyMode, SinkConfig};
use shardwise_cdc_tools::reading::positive_seconds;

/// Writes the changes of a CDC-enabled table to Kafka as Debezium envelopes.
#[derive(Debug, Parser)]
#[command(version)]
struct Args {
    /// Credentials and TLS of the database.
    #[command(flatten)]
    connect: shardwise_cdc_tools::connect::ConnectArgs,
    /// A node to connect to (host:port).
    #[arg(long, default_value = "127.0.0.1:9042")]
    node: String,
    /// Keyspace of the table.
    #[arg(long)]
    keyspace: String,
    /// The base table (not its `_scylla_cdc_log`).
    #[arg(long)]
    table: String,
    /// Range, window, workers and consistency (a restart resumes from the
    /// checkpoint topic rather than the start).
    #[command(flatten)]
    reading: shardwise_cdc_tools::reading::ReadingArgs,
    /// The Kafka cluster (host:port[,host:port...]).
    #[arg(long, default_value = "127.0.0.1:9092")]
    brokers: String,
    /// A librdkafka setting for every Kafka client of the sink, as KEY=VALUE
    /// (repeat it): a secured cluster's, e.g. -X security.protocol=SASL_SSL
    /// -X sasl.mechanism=SCRAM-SHA-512 -X sasl.username=U -X sasl.password=P.
    /// Not the settings exactly once rests on (acks, idempotence,
    /// transactions, isolation) nor those with a flag of their own.
    #[arg(short = 'X', long = "kafka-setting", value_name = "KEY=VALUE", value_parser = setting)]
    kafka_settings: Vec<(String, String)>,
    /// A file of librdkafka settings, as Kafka's tools take them: KEY=VALUE
    /// lines, # and ! comments (e.g. a secured cluster's
    /// security.protocol, sasl.* and ssl.ca.location). -X settings win
    /// over the file's.
    #[arg(long, value_name = "FILE")]
    kafka_properties: Option<std::path::PathBuf>,
    /// The connector's logical name: the envelopes' `source.name` and the
    /// topic's prefix.
    #[arg(long, default_value = "shardwise")]
    name: String,
    /// The topic of the changes (default: NAME.KEYSPACE.TABLE).
    #[arg(long)]
    topic: Option<String>,
    /// Partitions of the changes' topic when the sink creates it.
    #[arg(long, default_value_t = 3)]
    partitions: i32,
    /// The compacted topic of the checkpoint records (default:
    /// TOPIC.checkpoints).
    #[arg(long)]
    checkpoint_topic: Option<String>,
    /// The producer's transactional id; keep it across restarts (default:
    /// shardwise-cdc-TOPIC; with leases, the prefix of one id per group).
    #[arg(long)]
    transactional_id: Option<String>,
    /// What the messages' keys are made of: `partition` (the table's
    /// partition key: every change of a partition, its partition deletes
    /// included, in one Kafka partition, in order) or `connector` (the
    /// primary key, as the ScyllaDB connector keys them; also `primary`:
    /// a partition delete may then land in another Kafka partition than
    /// its rows).
    #[arg(long, value_name = "partition|connector", default_value = "partition")]
    key: KeyArg,
    /// Share the table with other sinks through leases (their progress is
    /// shared in the checkpoint topic).
    #[command(flatten)]
    leases: shardwise_cdc_tools::leasing::LeaseArgs,
    /// No transactions: a crash may write the last window's changes twice.
    #[arg(long, conflicts_with = "transactional_id")]
    at_least_once: bool,
    /// Write keys and values as Kafka Connect's JSON converter does with
    /// `schemas.enable=true`: `{"schema":…,"payload":…}`.
    #[arg(long)]
    debezium_schemas: bool,
    /// Seconds between records of the progress that windows without
    /// changes made (they write nothing themselves): how long a restart
    /// may read such windows again, and how late the sinks sharing the
    /// table see each other's groups reach a generation's end.
    #[arg(long, default_value_t = 5.0)]
    checkpoint_interval: f64,
    /// Seconds any Kafka call may take.
    #[arg(long, default_value_t = 30.0)]
    kafka_timeout: f64,
}

/// The value of `--key`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum KeyArg {
    /// `partition`: the table's partition key.
    Partition,
    /// `connector` (or `primary`): the primary key, the connector's key.
    Connector,
}

/// A `--key` value that is none of them.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
#[error("{0:?} is not a key: partition (the table's partition key, the default) or connector (the primary key, as the connector keys messages; also primary)")]
struct BadKey(String);

impl std::str::FromStr for KeyArg {
    type Err = BadKey;

    fn from_str(value: &str) -> Result<Self, BadKey> {
        match value {
            "partition" => Ok(KeyArg::Partition),
            "connector" | "primary" => Ok(KeyArg::Connector),
            _ => Err(BadKey(value.to_owned())),
        }
    }
}

impl KeyArg {
    /// The sink's key mode: the partition key's columns are read with the
    /// table's types ([`SinkConfig::load_table`]).
    fn mode(self) -> KeyMode {
        match self {
            KeyArg::Partition => KeyMode::default(),
            KeyArg::Connector => KeyMode::PrimaryKey,
        }
    }
}

/// One `-X` value: `KEY=VALUE`, the key not empty.
fn setting(value: &str) -> Result<(String, String), String> {
    match value.split_once('=') {
        Some((key, value)) if !key.trim().is_empty() => Ok((key.trim().to_owned(), value.to_owned())),
        _ => Err("expected KEY=VALUE, e.g. security.protocol=SASL_SSL".into()),
    }
}

#[tokio::main(flavor = "multi_thread", worker_threads = 1)]
async fn main() -> std::process::ExitCode {
    shardwise_cdc_tools::exit("kafka-sink", run(Args::parse()).await)
}

async fn run(args: Args) -> Result<(), Box<dyn std::error::Error>> {
    // Every flag checked before anything connects: a bad value is its one
    // error line, whatever the cluster and the brokers.
    args.reading.check()?;
    let kafka_timeout = positive_seconds("kafka-timeout", args.kafka_timeout)?;
    let checkpoint_interval = positive_seconds("checkpoint-interval", args.checkpoint_interval)?;
    if args.partitions < 1 {
        return Err(format!("--partitions {}: a topic has at least one partition", args.partitions).into());
    }
    if args.leases.lease_keyspace.is_some() {
        positive_seconds("lease-heartbeat", args.leases.lease_heartbeat)?;
    }
    // The file's settings first, so that -X changes them.
    let mut kafka_settings = match &args.kafka_properties {
        Some(file) => shardwise_cdc_kafka::brokers::read_properties(file)?,
        None => Vec::new(),
    };
    kafka_settings.extend(args.kafka_settings.iter().cloned());
    let mut brokers = shardwise_cdc_kafka::Brokers::new(args.brokers.clone());
    for (key, value) in &kafka_settings {
        brokers = brokers.with(key.clone(), value.clone());
    }
    brokers.check()?;
    let session = args.connect.builder(&args.node)?.build().await?;
    let mut config = SinkConfig::new(&args.brokers, &args.name, &args.keyspace, &args.table);
    if let Some(topic) = &args.topic {
        config.topic = topic.clone();
        config.checkpoint_topic = format!("{topic}.checkpoints");
    }
    if let Some(topic) = &args.checkpoint_topic {
        config.checkpoint_topic = topic.clone();
    }
    config.timeout = kafka_timeout;
    config.kafka_settings = kafka_settings;
    config.delivery = match (&args.transactional_id, args.at_least_once) {
        (_, true) => Delivery::AtLeastOnce,
        (Some(id), false) => Delivery::ExactlyOnce { transactional_id: id.clone() },
        (None, false) => config.delivery,
    };
    // The table's column types, and the columns of its partition key
    // unless the keys are the connector's.
    config.key = args.key.mode();
    config.load_table(&session).await?;
    if args.debezium_schemas {
        config.schemas = shardwise_cdc::debezium::JsonSchemas::With;
    }
    let leases = args.leases.config(&session, &args.connect).await?;
    if let Some(ttl) = args.leases.ttl() {
        // A producer per group, so that a takeover fences the group's
        // earlier holder; its transactions last no longer than a lease.
        config.fencing = Fencing::PerGroup;
        config.transaction_timeout = ttl;
    }
    let sink = tokio::task::spawn_blocking(move || KafkaSink::new(config)).await??;
    sink.create_topics(args.partitions).await?;

    let mut builder = args
        .reading
        .builder(session, &args.keyspace, &args.table)?
        // Progress is recorded with each window; the reader's saves record
        // what windows without changes moved.
        .checkpoints(Arc::new(sink.checkpoints()), checkpoint_interval);
    if let Some(leases) = leases {
        builder = builder.leases(leases);
    }
    let reader = builder.build(sink.factory()).await?;
    args.reading.serve_metrics("kafka-sink", &reader, &args.keyspace, &args.table).await?;
    shardwise_cdc_tools::log_warnings(args.reading.verbose);

    let written = sink.clone();
    args.reading.report_progress("kafka-sink", "messages", &reader, move || written.stats().messages)?;
    let handle = reader.handle();
    tokio::spawn(async move {
        if tokio::signal::ctrl_c().await.is_ok() {
            handle.stop();
        }
    });
    reader.join().await?;
    let s = sink.stats();
    if s.no_event > 0 {
        eprintln!(
            "[kafka-sink] {} changes make no Debezium row event (range deletes, TTL expirations): not written",
            s.no_event
        );
    }
    eprintln!("[kafka-sink] done: {} messages in {} windows", s.messages, s.windows);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The flags the sink needs, and `extra`.
    fn parse(extra: &[&str]) -> Result<Args, clap::Error> {
        Args::try_parse_from([&["kafka-sink", "--keyspace", "ks", "--table", "t"][..], extra].concat())
    }

    /// Issue 51: `--key` is `partition` unless given, and takes
    /// `connector` and its earlier name `primary` (checked through the
    /// parser alone).
    #[test]
    fn the_key_flag_defaults_to_partition_and_takes_connector() {
        use clap::CommandFactory;
        let command = Args::command();
        let key = command.get_arguments().find(|a| a.get_id() == "key").expect("--key");
        assert_eq!(key.get_default_values(), [std::ffi::OsStr::new("partition")], "the default");
        for value in ["partition", "connector", "primary"] {
            assert!(parse(&["--key", value]).is_ok(), "--key {value}");
        }
    }

    /// Without `--key`, messages are keyed by the table's partition key;
    /// `connector` and `primary` are the connector's keys.
    #[test]
    fn each_key_value_is_its_key_mode() {
        let key = |extra: &[&str]| parse(extra).map(|a| (a.key, a.key.mode())).map_err(|e| e.to_string());
        let partition = Ok((KeyArg::Partition, KeyMode::PartitionKey(Vec::new())));
        assert_eq!(key(&[]), partition, "the default");
        assert_eq!(key(&["--key", "partition"]), partition);
        assert_eq!(key(&["--key", "connector"]), Ok((KeyArg::Connector, KeyMode::PrimaryKey)));
        assert_eq!(key(&["--key=primary"]), Ok((KeyArg::Connector, KeyMode::PrimaryKey)), "the earlier name");
    }

    /// A bad `--key` is the parser's error (its value refused), saying which
    /// values there are.
    #[test]
    fn a_bad_key_says_which_keys_there_are() {
        assert_eq!("Partition".parse::<KeyArg>(), Err(BadKey("Partition".into())));
        let err = parse(&["--key", "clustering"]).expect_err("not a key");
        assert_eq!(err.kind(), clap::error::ErrorKind::ValueValidation, "{err}");
        let text = err.to_string();
        for word in ["--key", "\"clustering\" is not a key", "partition", "connector", "primary"] {
            assert!(text.contains(word), "{word}: {text}");
        }
    }
}
