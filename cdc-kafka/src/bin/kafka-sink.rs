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
//! holder in Kafka (`tests/sink.rs` pauses one past its lease). With
//! `--group-id G --reader-name NAME` they share it on Kafka's own group
//! protocol instead, as the members of consumer group G: the group
//! coordinator assigns the CDC stream groups (through the partitions of a
//! control topic), and every transaction is fenced by the group's
//! generation (KIP-447), with one producer per process, transactional id
//! `shardwise-cdc-TOPIC.NAME` (`tests/group.rs` kills one and pauses
//! another past its session timeout).
//!
//! A window of more than `--max-transaction-messages` messages or
//! `--max-transaction-bytes` bytes is written in parts, each a transaction
//! with the positions it reached, which a restart resumes from exactly.
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
use std::time::Duration;

use clap::Parser;
use shardwise_cdc_kafka::{Delivery, Fencing, GroupSettings, KafkaSink, KeyMode, SinkConfig};
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
    /// Share the table with the other sinks of this Kafka consumer group
    /// (the same GROUP for all): Kafka's group coordinator assigns each its
    /// CDC stream groups, and each transaction is fenced by the group's
    /// generation (KIP-447). Needs --reader-name (or --transactional-id):
    /// this sink's name in the group, kept across restarts.
    #[arg(long, value_name = "GROUP", conflicts_with_all = ["lease_keyspace", "at_least_once"])]
    group_id: Option<String>,
    /// With --group-id: the control topic, whose partitions the members are
    /// assigned (default: CHECKPOINT_TOPIC.groups).
    #[arg(long, requires = "group_id")]
    control_topic: Option<String>,
    /// With --group-id: the control topic's partitions when the sink
    /// creates it (the most sinks that share the work).
    #[arg(long, default_value_t = 32)]
    group_partitions: i32,
    /// With --group-id: seconds a silent member (killed, paused, cut off)
    /// keeps its groups before the others get them (Kafka's
    /// session.timeout.ms; at least the broker's minimum, 6 s by default).
    #[arg(long, default_value_t = 10.0)]
    group_session_timeout: f64,
    /// The most messages one transaction holds: a window with more is
    /// written in parts, each with the positions it reached.
    #[arg(long, default_value_t = 10_000)]
    max_transaction_messages: usize,
    /// The most bytes of keys and values one transaction holds (a window
    /// with more is written in parts).
    #[arg(long, default_value_t = 8 << 20)]
    max_transaction_bytes: usize,
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

/// With `--group-id`: how long Kafka keeps a transaction open before it
/// aborts it (Kafka Streams' default with exactly once).
const GROUP_TRANSACTION_TIMEOUT: Duration = Duration::from_secs(10);

/// With `--group-id`: how often the reader follows the assignment (and
/// reads the other members' progress).
const GROUP_FOLLOW_INTERVAL: Duration = Duration::from_millis(500);

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
    let group_session = positive_seconds("group-session-timeout", args.group_session_timeout)?;
    if args.group_id.is_some() {
        if args.group_partitions < 1 {
            return Err(
                format!("--group-partitions {}: a topic has at least one partition", args.group_partitions).into()
            );
        }
        if args.leases.reader_name.is_none() && args.transactional_id.is_none() {
            return Err("--group-id needs --reader-name NAME (or --transactional-id): this sink's name in the group, \
                        kept across restarts, so that a restart aborts what the run before it left open"
                .into());
        }
    }
    if args.max_transaction_messages < 1 || args.max_transaction_bytes < 1 {
        return Err("--max-transaction-messages and --max-transaction-bytes are at least 1".into());
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
        (None, false) => match (&args.group_id, &args.leases.reader_name) {
            // One producer per member, its id kept across restarts.
            (Some(_), Some(name)) => {
                Delivery::ExactlyOnce { transactional_id: format!("shardwise-cdc-{}.{name}", config.topic) }
            }
            _ => config.delivery,
        },
    };
    config.max_transaction_messages = args.max_transaction_messages;
    config.max_transaction_bytes = args.max_transaction_bytes;
    if let Some(group_id) = &args.group_id {
        let mut group = GroupSettings::new(group_id.clone(), &config.checkpoint_topic);
        if let Some(topic) = &args.control_topic {
            group.control_topic = topic.clone();
        }
        group.partitions = args.group_partitions;
        group.session_timeout = group_session;
        config.fencing = Fencing::Group(group);
        // What a killed member's open transaction holds its groups' next
        // holder (and read_committed consumers) back.
        config.transaction_timeout = GROUP_TRANSACTION_TIMEOUT;
    }
    // The table's column types, and the columns of its partition key
    // unless the keys are the connector's.
    config.key = args.key.mode();
    config.load_table(&session).await?;
    if args.debezium_schemas {
        config.schemas = shardwise_cdc::debezium::JsonSchemas::With;
    }
    let leases = args.leases.config(&session, &args.connect).await?;
    leased_transactions(&mut config, &args);
    let sink = tokio::task::spawn_blocking(move || KafkaSink::new(config)).await??;
    sink.create_topics(args.partitions).await?;
    let assignment = match &args.group_id {
        Some(_) => {
            let s = sink.clone();
            Some(tokio::task::spawn_blocking(move || s.join_group()).await??)
        }
        None => None,
    };

    let mut builder = args
        .reading
        .builder(session, &args.keyspace, &args.table)?
        // Progress is recorded with each window; the reader's saves record
        // what windows without changes moved.
        .checkpoints(Arc::new(sink.checkpoints()), checkpoint_interval);
    if let Some(leases) = leases {
        builder = builder.leases(leases);
    }
    if let Some(assignment) = assignment {
        builder = builder.assignment(assignment, GROUP_FOLLOW_INTERVAL);
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
    let joined = reader.join().await;
    // Its groups go to the other members now, not after the session timeout.
    let leaving = sink.clone();
    tokio::task::spawn_blocking(move || leaving.leave_group()).await?;
    joined?;
    let s = sink.stats();
    if s.no_event > 0 {
        eprintln!(
            "[kafka-sink] {} changes make no Debezium row event (range deletes, TTL expirations): not written",
            s.no_event
        );
    }
    eprintln!(
        "[kafka-sink] done: {} messages in {} windows and {} parts of windows; {} changes skipped as written before",
        s.messages, s.windows, s.parts, s.skipped
    );
    Ok(())
}

/// With leases (`--lease-keyspace`): a producer per group, so that a
/// takeover fences the group's earlier holder, and transactions that last
/// no longer than a lease.
fn leased_transactions(config: &mut SinkConfig, args: &Args) {
    if let Some(ttl) = args.leases.ttl() {
        config.fencing = Fencing::PerGroup;
        config.transaction_timeout = ttl;
    }
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

    /// Claim `kafka-txn-in-lease`: with leases, a transaction lasts no
    /// longer than a lease (Kafka aborts it at the lease TTL), each group
    /// with a producer of its own.
    #[test]
    fn with_leases_transactions_last_no_longer_than_a_lease() {
        let config = || SinkConfig::new("127.0.0.1:1", "cluster", "ks", "t");
        let args = parse(&["--lease-keyspace", "leases", "--lease-ttl", "7"]).expect("flags");
        let mut leased = config();
        leased_transactions(&mut leased, &args);
        assert_eq!(leased.transaction_timeout, Duration::from_secs(7));
        assert!(matches!(leased.fencing, Fencing::PerGroup), "{:?}", leased.fencing);
        let mut alone = config();
        leased_transactions(&mut alone, &parse(&[]).expect("flags"));
        assert_eq!(alone.transaction_timeout, config().transaction_timeout, "no leases: the default");
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
