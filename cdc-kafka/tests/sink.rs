//! The `kafka-sink` application as a separate process, through the Scylla
//! emulation front on a real Cassandra, into a real Kafka broker (started
//! by testkit): following a table live, it is killed with SIGKILL in the
//! middle of the stream, then restarted to the end. The topic read with
//! `read_committed` holds every change exactly once, in write order per
//! message key.
//!
//! The setup and the workload are those of `shardwise-cdc`'s tests,
//! included by path.

use std::collections::HashMap;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use shardwise_cdc::{CheckpointStore, GroupId, Millis, Operation, ReadWindow, StreamGroup, StreamId};
use shardwise_cdc_kafka::topic::{read_topic, Isolation};
use shardwise_cdc_kafka::{Delivery, Fencing, KafkaSink, KeyMode, SinkConfig, SinkError};
use testkit::Kafka;

use shardwise_cdc_testkit as common;
mod support;
use common::workload::{create_table, plan, safety_arg, write};
use common::{exit_of, held, signal};
use support::{changes_of, committed, number_after, Keyed, Reap};

const CHECKPOINTS: &str = "test-checkpoints";

/// The sink following `ks.t` from an absolute time (to an absolute time,
/// or forever) into the broker at `brokers`.
fn spawn_sink(
    db: std::net::SocketAddr,
    brokers: &str,
    ks: &str,
    start_ms: u64,
    end_ms: Option<u64>,
    stderr: Stdio,
) -> Child {
    let mut command = Command::new(env!("CARGO_BIN_EXE_kafka-sink"));
    if let Some(end) = end_ms {
        command.args(["--end-unix-ms", &end.to_string()]);
    }
    command
        .args(["--node", &db.to_string(), "--keyspace", ks, "--table", "t", "--consistency", "ONE"])
        .args(["--brokers", brokers, "--name", "cluster", "--partitions", "3", "--checkpoint-topic", CHECKPOINTS])
        .args(["--start-unix-ms", &start_ms.to_string(), "--kafka-timeout", "20", "--progress", "1"])
        .args(["--window", "0.2", "--safety", safety_arg().as_str(), "--sleep", "0.05", "--workers", "2"])
        .stdout(Stdio::null())
        .stderr(stderr)
        .stdin(Stdio::null())
        .spawn()
        .expect("spawn kafka-sink")
}

/// The value of the messages of the transaction left open.
const ZOMBIE: &[u8] = b"{\"zombie\"";

/// Opens a transaction as the sink's producer (fencing the killed one),
/// writes a message to `topic` for each of the first keys there and, for
/// each group recorded in the checkpoint topic, a record a day ahead, and
/// dies without committing or aborting; how many messages it left.
fn leave_a_transaction_open(brokers: &str, topic: &str) -> usize {
    use rdkafka::producer::{BaseRecord, Producer, ThreadedProducer};
    let producer: ThreadedProducer<rdkafka::producer::DefaultProducerContext> = rdkafka::ClientConfig::new()
        .set("bootstrap.servers", brokers)
        .set("transactional.id", format!("shardwise-cdc-{topic}"))
        .create()
        .expect("producer");
    producer.init_transactions(Duration::from_secs(20)).expect("init");
    producer.begin_transaction().expect("begin");
    let keys: Vec<Vec<u8>> = committed(brokers, topic).into_iter().filter_map(|m| m.key).take(10).collect();
    for key in &keys {
        producer.send(BaseRecord::to(topic).key(key).payload(ZOMBIE)).map_err(|(e, _)| e).expect("send");
    }
    let day_ms = 86_400_000;
    for record in committed(brokers, CHECKPOINTS) {
        let value = String::from_utf8(record.value.expect("value")).expect("utf-8");
        let (generation, progress) = value.split_once(' ').expect("a record");
        let ahead = format!("{generation} {}", progress.parse::<i64>().expect("progress") + day_ms);
        let key = record.key.expect("key");
        producer.send(BaseRecord::to(CHECKPOINTS).key(&key).payload(&ahead)).map_err(|(e, _)| e).expect("send");
    }
    producer.flush(Duration::from_secs(20)).expect("on the broker");
    // Dead: neither committed nor aborted, as after a SIGKILL.
    std::mem::forget(producer);
    keys.len()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_sink_leaves_every_change_exactly_once_in_the_topic() {
    let mut kafka = tokio::task::spawn_blocking(Kafka::start).await.expect("join").unwrap_or_else(|e| panic!("{e}"));
    let brokers = kafka.addr().to_string();
    let (front, session, ks) = common::front_and_keyspace("cdc_kafka").await;
    create_table(&session, &ks).await;
    let topic = format!("cluster.{ks}.t");
    let ms = |t: SystemTime| t.duration_since(UNIX_EPOCH).expect("epoch").as_millis() as u64;

    let plan = plan(30, 1500, 11);
    let mut expected = Keyed::new();
    for &(pk, ck, op, v) in &plan {
        expected.entry((pk, ck)).or_default().push((op, v));
    }
    let total = plan.len();
    let start = SystemTime::now() - Duration::from_millis(500);

    // The sink follows the table live (no end) while the changes are
    // written, 20 every 100 ms, and is killed once a fifth of them are in
    // the topic.
    let mut child = spawn_sink(front.addr(), &brokers, &ks, ms(start), None, Stdio::piped());
    let writer = {
        let (session, ks, plan) = (session.clone(), ks.clone(), plan.clone());
        tokio::spawn(async move { write(&session, &ks, &plan, 20, Duration::from_millis(100)).await })
    };
    // Its progress lines: "[kafka-sink] N messages in W windows, S s".
    let progress = std::io::BufReader::new(child.stderr.take().expect("stderr"));
    let fifth = tokio::task::spawn_blocking(move || {
        std::io::BufRead::lines(progress).map_while(Result::ok).any(|line| {
            let n: usize = line.split(' ').nth(1).and_then(|n| n.parse().ok()).unwrap_or(0);
            n >= total / 5
        })
    });
    let fifth = tokio::time::timeout(Duration::from_secs(90), fifth).await.expect("the sink writes").expect("join");
    assert!(fifth, "the sink exited before a fifth of the changes were in the topic");
    child.kill().expect("SIGKILL");
    let status = child.wait().expect("wait");
    assert!(!status.success(), "killed: {status:?}");
    let (b, t) = (brokers.clone(), topic.clone());
    let at_kill = tokio::task::spawn_blocking(move || committed(&b, &t).len()).await.expect("join");

    // A kill lands inside a transaction only now and then (a commit takes a
    // few milliseconds), so the test makes sure of that case too: as a sink
    // killed mid-transaction would, a producer with the sink's
    // transactional id leaves a transaction open, with messages and a
    // checkpoint record that moves a group far ahead. The restart must
    // abort it: none of it may count.
    let (b, t) = (brokers.clone(), topic.clone());
    let open = tokio::task::spawn_blocking(move || leave_a_transaction_open(&b, &t)).await.expect("join");
    // Restarted once the writes are done, now with an end: it resumes from
    // the checkpoint topic and runs to the end.
    writer.await.expect("writer");
    let end = SystemTime::now() + Duration::from_millis(500);
    let mut child = spawn_sink(front.addr(), &brokers, &ks, ms(start), Some(ms(end)), Stdio::null());
    let status = exit_of(&mut child, Instant::now() + Duration::from_secs(120), "the restarted sink").await;
    assert!(status.success(), "the restarted sink finished cleanly: {status:?}");

    let (b, t) = (brokers.clone(), topic.clone());
    let (messages, everything, records) = tokio::task::spawn_blocking(move || {
        let everything = read_topic(&b.as_str().into(), &t, Isolation::ReadUncommitted, Duration::from_secs(30))
            .expect("read uncommitted")
            .unwrap_or_default();
        (committed(&b, &t), everything.len(), committed(&b, CHECKPOINTS).len())
    })
    .await
    .expect("join");
    let (seen, n) = changes_of(&messages);
    assert!(at_kill < total, "killed mid-stream: {at_kill} of {total} committed");
    assert!(everything >= total + open, "the open transaction's messages are in the log, aborted");
    assert!(messages.iter().all(|m| !m.value.as_deref().unwrap_or_default().starts_with(ZOMBIE)), "none committed");
    for (key, ops) in &expected {
        assert_eq!(seen.get(key), Some(ops), "key {key:?}: every change once, in write order");
    }
    assert_eq!(seen.len(), expected.len(), "no key that was not written");
    assert_eq!(n, total, "every change exactly once");
    let sum = |k: &Keyed| k.values().flatten().filter_map(|(_, v)| *v).sum::<i64>();
    assert_eq!(sum(&seen), sum(&expected), "checksum of the values");
    eprintln!(
        "killed at {at_kill} committed of {total}, then {open} messages left in an open transaction; \
         the topic holds {n} committed messages, {everything} written in all (aborted ones included), \
         {records} checkpoint records"
    );

    // The at-least-once mode, into its own topics, over the same changes:
    // no transactions, and (with no crash) every change once too.
    let status = Command::new(env!("CARGO_BIN_EXE_kafka-sink"))
        .args(["--node", &front.addr().to_string(), "--keyspace", &ks, "--table", "t", "--consistency", "ONE"])
        .args([
            "--brokers",
            &brokers,
            "--at-least-once",
            "--name",
            "cluster",
            "--topic",
            "plain",
            "--checkpoint-topic",
            "plain-checkpoints",
        ])
        .args(["--start-unix-ms", &ms(start).to_string(), "--end-unix-ms", &ms(end).to_string()])
        .args(["--window", "1", "--safety", safety_arg().as_str(), "--sleep", "0.05", "--workers", "2"])
        .stdin(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .expect("kafka-sink runs");
    assert!(status.success(), "{status:?}");
    let b = brokers.clone();
    let plain = tokio::task::spawn_blocking(move || committed(&b, "plain")).await.expect("join");
    let (seen, n) = changes_of(&plain);
    assert_eq!((seen, n), (expected, total), "at least once: every change, in order per key");
    kafka.stop();
}

/// A database that does not answer ends the sink with one line that says
/// so, and a failure status.
#[test]
fn an_unreachable_database_is_one_clear_line() {
    let unused = std::net::TcpListener::bind("127.0.0.1:0").expect("port").local_addr().expect("addr").to_string();
    let out = Command::new(env!("CARGO_BIN_EXE_kafka-sink"))
        .args(["--node", &unused, "--keyspace", "ks", "--table", "t"])
        .args(["--brokers", &unused, "--kafka-timeout", "2"])
        .stdin(Stdio::null())
        .output()
        .expect("kafka-sink runs");
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(stderr.lines().count(), 1, "one line: {stderr:?}");
    assert!(stderr.starts_with("kafka-sink: ") && stderr.contains(&unused), "{stderr:?}");
}

/// The sink's own flags and those it shares with the printer, given a bad
/// value: one line naming the flag, and a failure status, before anything
/// connects (neither the node nor the brokers exist here).
#[test]
fn bad_flag_values_are_one_clear_line_before_connecting() {
    let unused = std::net::TcpListener::bind("127.0.0.1:0").expect("port").local_addr().expect("addr").to_string();
    let cases: [(&[&str], &str); 9] = [
        (&["--kafka-timeout", "inf"], "--kafka-timeout inf: not a number of seconds"),
        (&["--kafka-timeout", "0"], "--kafka-timeout 0: must be more than 0"),
        (&["--checkpoint-interval=-2"], "--checkpoint-interval -2: not a number of seconds"),
        (&["--partitions", "0"], "--partitions 0: a topic has at least one partition"),
        (&["-X", "acks=1"], "the kafka setting acks is the sink's own"),
        (&["--window", "nan"], "--window NaN: not a number of seconds"),
        (&["--progress", "1e300"], "--progress 1e300: not a number of seconds"),
        (&["--start-ago", "18446744073709551615"], "--start-ago 18446744073709551615: before the Unix epoch"),
        (&["--lease-keyspace", "ks", "--lease-heartbeat", "0"], "--lease-heartbeat 0: must be more than 0"),
    ];
    for (flags, expected) in cases {
        let out = Command::new(env!("CARGO_BIN_EXE_kafka-sink"))
            .args(["--node", &unused, "--keyspace", "ks", "--table", "t", "--brokers", &unused])
            .args(flags)
            .stdin(Stdio::null())
            .output()
            .expect("kafka-sink runs");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{flags:?}: {}", out.status);
        assert_eq!(stderr.lines().count(), 1, "{flags:?}: one line: {stderr:?}");
        assert!(stderr.starts_with("kafka-sink: ") && stderr.contains(expected), "{flags:?}: {stderr:?}");
    }
}

/// A window of `group` over `[from, to)` of generation 1000.
fn window(group: StreamId, from: i64, to: i64) -> ReadWindow {
    let streams = StreamGroup::new([group]).expect("one stream");
    ReadWindow { group: GroupId(0), generation: Millis(1000), streams, from: Millis(from), to: Millis(to), epoch: 0 }
}

/// A sink into `topic`, its records in `checkpoints`, fencing as told.
fn sink(brokers: &str, topic: &str, checkpoints: &str, fencing: Fencing) -> KafkaSink {
    let mut config = SinkConfig::new(brokers, "cluster", "ks", "t");
    (config.topic, config.checkpoint_topic, config.fencing) = (topic.into(), checkpoints.into(), fencing);
    config.key = KeyMode::PartitionKey(vec!["pk".into()]);
    config.delivery = Delivery::ExactlyOnce { transactional_id: format!("test-{topic}") };
    config.timeout = Duration::from_secs(20);
    KafkaSink::new(config).expect("a sink")
}

const LOG: &str = "ks.t_scylla_cdc_log";

/// Kafka alone, no database: the checkpoint store's reads, and fencing.
///
/// 1. Another writer's transaction left open on a shared checkpoint topic
///    hides nothing: a `read_committed` read stops at the last stable
///    offset (the open transaction's start), before this sink's own later
///    record; the store waits until that transaction is over and reads up
///    to the high watermark. Sinks of one table into different topics
///    keep their records apart; an earlier version's records are read.
/// 2. Two sinks that share a table through leases: the second takes a
///    group over, which fences the first in Kafka, so that the first can
///    commit no window of that group any more (it is told it was fenced),
///    while the second resumes exactly after the first's last commit.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn checkpoints_are_read_to_the_high_watermark_and_takeovers_are_fenced_in_kafka() {
    let mut kafka = tokio::task::spawn_blocking(Kafka::start).await.expect("join").unwrap_or_else(|e| panic!("{e}"));
    let brokers = kafka.addr().to_string();
    let group = StreamId::from_bytes([7; 16]);
    let message = |v: &str| vec![(r#"{"pk":1}"#.to_owned(), v.to_owned())];

    // 1. An open transaction of another writer, then this sink's record.
    let own = sink(&brokers, "own", "shared-checkpoints", Fencing::Process);
    own.create_topics(1).await.expect("topics");
    let (b, open_for) = (brokers.clone(), Duration::from_secs(5));
    let other = std::thread::spawn(move || {
        use rdkafka::producer::{BaseRecord, Producer, ThreadedProducer};
        let producer: ThreadedProducer<rdkafka::producer::DefaultProducerContext> = rdkafka::ClientConfig::new()
            .set("bootstrap.servers", &b)
            .set("transactional.id", "another-sink")
            .create()
            .expect("producer");
        producer.init_transactions(Duration::from_secs(20)).expect("init");
        producer.begin_transaction().expect("begin");
        let key = format!("elsewhere/{LOG}/{}", StreamId::from_bytes([9; 16]));
        producer
            .send(BaseRecord::to("shared-checkpoints").key(&key).payload("1000 5"))
            .map_err(|(e, _)| e)
            .expect("send");
        producer.flush(Duration::from_secs(20)).expect("on the broker");
        std::thread::sleep(open_for);
        producer.commit_transaction(Duration::from_secs(20)).expect("commit");
    });
    tokio::time::sleep(Duration::from_secs(1)).await;
    let (s, w) = (own.clone(), window(group, 0, 100));
    tokio::task::spawn_blocking(move || s.write_window(&message("a"), &w)).await.expect("join").expect("written");
    let b = brokers.clone();
    let hidden = tokio::task::spawn_blocking(move || committed(&b, "shared-checkpoints")).await.expect("join");
    assert!(hidden.is_empty(), "read to the last stable offset, the open transaction hides the record: {hidden:?}");
    let store = own.checkpoints();
    let began = Instant::now();
    let cp = store.load(LOG).await.expect("loaded").expect("this sink's record");
    assert!(began.elapsed() >= Duration::from_millis(500), "the load waited for the open transaction");
    assert_eq!((cp.generation, cp.groups.len(), cp.groups[0].progress), (Millis(1000), 1, Millis(100)));
    other.join().expect("the other writer");
    let elsewhere = sink(&brokers, "elsewhere", "shared-checkpoints", Fencing::Process).checkpoints();
    let theirs = elsewhere.load(LOG).await.expect("loaded").expect("the other sink's record");
    assert_eq!(theirs.groups.iter().map(|g| g.progress).collect::<Vec<_>>(), [Millis(5)], "kept apart");

    // Records of an earlier version, keyed by the log alone, are read (here
    // the topic holds nothing else for the table; beside the sink's own
    // records: `an_upgraded_sink_resumes_every_group_from_old_and_new_records`).
    let legacy = sink(&brokers, "legacy", "legacy-checkpoints", Fencing::Process);
    legacy.create_topics(1).await.expect("topics");
    let b = brokers.clone();
    tokio::task::spawn_blocking(move || {
        use rdkafka::producer::{BaseRecord, Producer, ThreadedProducer};
        let producer: ThreadedProducer<rdkafka::producer::DefaultProducerContext> =
            rdkafka::ClientConfig::new().set("bootstrap.servers", &b).create().expect("producer");
        let key = format!("{LOG}/{group}");
        producer
            .send(BaseRecord::to("legacy-checkpoints").key(&key).payload("1000 42"))
            .map_err(|(e, _)| e)
            .expect("send");
        producer.flush(Duration::from_secs(20)).expect("on the broker");
    })
    .await
    .expect("join");
    let cp = legacy.checkpoints().load(LOG).await.expect("loaded").expect("the earlier version's record");
    assert_eq!(cp.groups.iter().map(|g| g.progress).collect::<Vec<_>>(), [Millis(42)]);

    // 2. A takeover fences the earlier holder.
    let (a, b) = (
        sink(&brokers, "leased", "leased-checkpoints", Fencing::PerGroup),
        sink(&brokers, "leased", "leased-checkpoints", Fencing::PerGroup),
    );
    a.create_topics(1).await.expect("topics");
    let fence = a.checkpoints().fence(LOG, Millis(1000), group).await.expect("a takes the group");
    assert_eq!(fence.progress, None);
    let (s, w) = (a.clone(), window(group, 0, 100));
    tokio::task::spawn_blocking(move || s.write_window(&message("a1"), &w)).await.expect("join").expect("a writes");
    let fence = b.checkpoints().fence(LOG, Millis(1000), group).await.expect("b takes the group over");
    assert_eq!(fence.progress, Some(Millis(100)), "b resumes after a's last commit");
    let (s, w) = (a.clone(), window(group, 100, 200));
    let late = tokio::task::spawn_blocking(move || s.write_window(&message("a2"), &w)).await.expect("join");
    assert!(matches!(late, Err(SinkError::Fenced { .. })), "a is fenced: {late:?}");
    let (s, w) = (b.clone(), window(group, 100, 200));
    tokio::task::spawn_blocking(move || s.write_window(&message("b2"), &w)).await.expect("join").expect("b writes");
    let bk = brokers.clone();
    let values: Vec<String> = tokio::task::spawn_blocking(move || committed(&bk, "leased"))
        .await
        .expect("join")
        .into_iter()
        .map(|m| String::from_utf8(m.value.expect("value")).expect("utf-8"))
        .collect();
    assert_eq!(values, ["a1", "b2"], "the fenced holder's window is not in the topic");
    kafka.stop();
}

/// A window written while Kafka is paused (a stalled broker, or a sink
/// process paused mid-commit) fails its first transaction: its messages
/// time out. That transaction is aborted and the window written again, so
/// the sink goes on and the topic holds the window once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_transaction_that_fails_while_kafka_is_paused_is_aborted_and_written_again() {
    let mut kafka = tokio::task::spawn_blocking(Kafka::start).await.expect("join").unwrap_or_else(|e| panic!("{e}"));
    let brokers = kafka.addr().to_string();
    let mut config = SinkConfig::new(&brokers, "cluster", "ks", "t");
    (config.topic, config.checkpoint_topic) = ("stalled".into(), "stalled-checkpoints".into());
    config.key = KeyMode::PartitionKey(vec!["pk".into()]);
    config.delivery = Delivery::ExactlyOnce { transactional_id: "test-stalled".into() };
    // Messages time out after 2 s (the Kafka call timeout bounds them).
    config.timeout = Duration::from_secs(2);
    let sink = KafkaSink::new(config).expect("a sink");
    sink.create_topics(1).await.expect("topics");
    let group = StreamId::from_bytes([3; 16]);
    let message = |v: &str| vec![(r#"{"pk":1}"#.to_owned(), v.to_owned())];
    let (s, w) = (sink.clone(), window(group, 0, 100));
    tokio::task::spawn_blocking(move || s.write_window(&message("first"), &w)).await.expect("join").expect("written");

    kafka.pause();
    let (s, w) = (sink.clone(), window(group, 100, 200));
    let started = std::time::Instant::now();
    let writing = tokio::task::spawn_blocking(move || s.write_window(&message("second"), &w));
    tokio::time::sleep(Duration::from_millis(3500)).await;
    kafka.resume();
    writing.await.expect("join").expect("the window is written once Kafka is back");
    // Claim `kafka-abort-retry`: the first try failed (not merely a write
    // that waited for the broker): its transaction was aborted and written
    // again, or, when even the abort failed, the producer was replaced (the
    // new one's initialisation aborts the open transaction) and wrote it.
    // Here it is the second: librdkafka calls the failed abort fatal.
    let stats = sink.stats();
    eprintln!("{stats:?} after {:?}", started.elapsed());
    assert!(stats.aborted + stats.replaced >= 1, "the write only waited: {stats:?}");

    let bk = brokers.clone();
    let values: Vec<String> = tokio::task::spawn_blocking(move || committed(&bk, "stalled"))
        .await
        .expect("join")
        .into_iter()
        .map(|m| String::from_utf8(m.value.expect("value")).expect("utf-8"))
        .collect();
    assert_eq!(values, ["first", "second"], "each window once");
    let cp = sink.checkpoints().load(LOG).await.expect("loaded").expect("a record");
    assert_eq!(cp.groups.iter().map(|g| g.progress).collect::<Vec<_>>(), [Millis(200)]);
    kafka.stop();
}

/// Writes `records` (key, value; no value: a tombstone) to `topic` without a
/// transaction, as another writer, or an earlier version of the sink, would.
fn produce(brokers: &str, topic: &str, records: &[(String, Option<&str>)]) {
    use rdkafka::producer::{BaseRecord, Producer, ThreadedProducer};
    let producer: ThreadedProducer<rdkafka::producer::DefaultProducerContext> =
        rdkafka::ClientConfig::new().set("bootstrap.servers", brokers).create().expect("producer");
    for (key, value) in records {
        let mut record = BaseRecord::<str, str>::to(topic).key(key.as_str());
        if let Some(value) = value {
            record = record.payload(value);
        }
        producer.send(record).map_err(|(e, _)| e).expect("send");
    }
    producer.flush(Duration::from_secs(20)).expect("on the broker");
}

/// Each group's (group, progress) in `groups`.
fn progress_of(groups: &[shardwise_cdc::checkpoint::GroupProgress]) -> Vec<(StreamId, Millis)> {
    groups.iter().map(|g| (g.group, g.progress)).collect()
}

/// An upgraded sink's checkpoint topic holds the earlier version's records
/// (keyed by the log alone) beside its own (keyed by its topic and the
/// log). Once one group has a record of its own, a group with only an old
/// record still resumes from it (it does not start again at `--start`,
/// skipping changes): each group's progress is the furthest under either
/// name, and the newest generation under either is the one resumed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_upgraded_sink_resumes_every_group_from_old_and_new_records() {
    let mut kafka = tokio::task::spawn_blocking(Kafka::start).await.expect("join").unwrap_or_else(|e| panic!("{e}"));
    let brokers = kafka.addr().to_string();
    let upgraded = sink(&brokers, "upgraded", "upgraded-checkpoints", Fencing::Process);
    upgraded.create_topics(1).await.expect("topics");
    let [one, two, three, four] = [1, 2, 3, 4].map(|b| StreamId::from_bytes([b; 16]));
    let old = |records: Vec<(String, Option<&'static str>)>| {
        let b = brokers.clone();
        tokio::task::spawn_blocking(move || produce(&b, "upgraded-checkpoints", &records))
    };
    old(vec![
        (format!("{LOG}/{one}"), Some("1000 42")),
        (format!("{LOG}/{two}"), Some("1000 70")),
        (format!("{LOG}/{three}"), Some("500 9")),
    ])
    .await
    .expect("join");
    // The upgraded sink resumed group one and wrote a window of it.
    let (s, w) = (upgraded.clone(), window(one, 42, 60));
    tokio::task::spawn_blocking(move || s.write_window(&[(r#"{"pk":1}"#.into(), "v".into())], &w))
        .await
        .expect("join")
        .expect("written");

    let store = upgraded.checkpoints();
    let cp = store.load(LOG).await.expect("loaded").expect("a checkpoint");
    let both = vec![(one, Millis(60)), (two, Millis(70))];
    assert_eq!((cp.generation, progress_of(&cp.groups)), (Millis(1000), both.clone()), "both groups resume");
    let cp = store.load_generation(LOG, Millis(1000)).await.expect("loaded").expect("generation 1000");
    assert_eq!(progress_of(&cp.groups), both);
    let fence = store.fence(LOG, Millis(1000), two).await.expect("fenced");
    assert_eq!(fence.progress, Some(Millis(70)), "a takeover reads the old record too");

    // The newest generation under either name is the one resumed.
    old(vec![(format!("{LOG}/{four}"), Some("2000 5"))]).await.expect("join");
    let cp = store.load(LOG).await.expect("loaded").expect("a checkpoint");
    assert_eq!((cp.generation, progress_of(&cp.groups)), (Millis(2000), vec![(four, Millis(5))]));
    kafka.stop();
}

/// Records of the checkpoint topic that are not checkpoint records (a
/// tombstone, whose value is null; another writer's record, whose key is
/// not a checkpoint key; a checkpoint key with a value that is not one)
/// are skipped: the tail that follows the topic goes on, and loads and
/// takeovers read the records written after them, whether the tail was
/// following the topic when they came or started after them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn records_of_the_checkpoint_topic_that_are_not_checkpoints_are_skipped() {
    let mut kafka = tokio::task::spawn_blocking(Kafka::start).await.expect("join").unwrap_or_else(|e| panic!("{e}"));
    let brokers = kafka.addr().to_string();
    let skipping = sink(&brokers, "skipping", "skipping-checkpoints", Fencing::Process);
    skipping.create_topics(1).await.expect("topics");
    let group = StreamId::from_bytes([7; 16]);
    let message = |v: &str| vec![(r#"{"pk":1}"#.to_owned(), v.to_owned())];
    let (s, w) = (skipping.clone(), window(group, 0, 100));
    tokio::task::spawn_blocking(move || s.write_window(&message("a"), &w)).await.expect("join").expect("written");
    let store = skipping.checkpoints();
    let cp = store.load(LOG).await.expect("loaded").expect("a record");
    assert_eq!(progress_of(&cp.groups), [(group, Millis(100))], "the tail follows the topic");

    let b = brokers.clone();
    let key = format!("skipping/{LOG}/{group}");
    let foreign = vec![(key.clone(), None), ("not a checkpoint key".into(), Some("hello")), (key, Some("no value"))];
    tokio::task::spawn_blocking(move || produce(&b, "skipping-checkpoints", &foreign)).await.expect("join");
    let (s, w) = (skipping.clone(), window(group, 100, 200));
    tokio::task::spawn_blocking(move || s.write_window(&message("b"), &w)).await.expect("join").expect("written");

    let cp = store.load(LOG).await.expect("the tail went on").expect("a record");
    assert_eq!(progress_of(&cp.groups), [(group, Millis(200))], "the records after them are read");
    let fence = store.fence(LOG, Millis(1000), group).await.expect("fenced");
    assert_eq!(fence.progress, Some(Millis(200)));
    // A sink started afterwards: its tail meets them from the beginning.
    let later = sink(&brokers, "skipping", "skipping-checkpoints", Fencing::Process).checkpoints();
    let cp = later.load(LOG).await.expect("loaded past them").expect("a record");
    assert_eq!(progress_of(&cp.groups), [(group, Millis(200))]);
    kafka.stop();
}

/// A periodic progress record (`KafkaCheckpoints::save`) taken before a
/// window of its group ended, and written once that window's transaction
/// (with its further record) committed, is not written: the group's last
/// record, the one compaction keeps, is never behind one written before.
/// Kafka is paused (for less than a Kafka call may take, so that the
/// window's transaction is not aborted and written again, but waits) while
/// the window is written, so that the progress record waits for it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_progress_record_never_lands_behind_a_further_window_of_its_group() {
    let mut kafka = tokio::task::spawn_blocking(Kafka::start).await.expect("join").unwrap_or_else(|e| panic!("{e}"));
    let brokers = kafka.addr().to_string();
    let sink = sink(&brokers, "ordered", "ordered-checkpoints", Fencing::Process);
    sink.create_topics(1).await.expect("topics");
    let group = StreamId::from_bytes([3; 16]);
    let message = |v: &str| vec![(r#"{"pk":1}"#.to_owned(), v.to_owned())];
    let (s, w) = (sink.clone(), window(group, 0, 100));
    tokio::task::spawn_blocking(move || s.write_window(&message("first"), &w)).await.expect("join").expect("written");

    kafka.pause();
    let (s, w) = (sink.clone(), window(group, 100, 200));
    let writing = tokio::task::spawn_blocking(move || s.write_window(&message("second"), &w));
    tokio::time::sleep(Duration::from_millis(500)).await;
    // Taken while the window was being written: the group was at 150.
    let s = sink.clone();
    let saving = tokio::task::spawn_blocking(move || s.write_progress(Millis(1000), group, Millis(150)));
    tokio::time::sleep(Duration::from_millis(2000)).await;
    kafka.resume();
    writing.await.expect("join").expect("the window is written once Kafka is back");
    saving.await.expect("join").expect("the progress is not refused");

    let records = || {
        let b = brokers.clone();
        tokio::task::spawn_blocking(move || {
            let records = committed(&b, "ordered-checkpoints").into_iter();
            records.map(|m| String::from_utf8(m.value.expect("value")).expect("utf-8")).collect::<Vec<_>>()
        })
    };
    let values = records().await.expect("join");
    assert_eq!(values, ["1000 100", "1000 200"], "no record behind the window's after it");
    // Afterwards too: a progress behind what was written writes nothing,
    // one beyond it a record.
    let s = sink.clone();
    tokio::task::spawn_blocking(move || {
        s.write_progress(Millis(1000), group, Millis(150))?;
        s.write_progress(Millis(1000), group, Millis(250))
    })
    .await
    .expect("join")
    .expect("written");
    assert_eq!(records().await.expect("join"), ["1000 100", "1000 200", "1000 250"]);
    kafka.stop();
}

/// A sink sharing `ks.t` through leases in `ks` (TTL 3 s), keying messages
/// by the partition key, from `start_ms` to `end_ms`; its stderr goes to a
/// file of the temporary directory, named after it.
fn spawn_sharing(
    db: std::net::SocketAddr,
    brokers: &str,
    ks: &str,
    name: &str,
    (start_ms, end_ms): (u64, u64),
) -> Child {
    let log = std::env::temp_dir().join(format!("{ks}-{name}.log"));
    let log = std::fs::File::create(&log).unwrap_or_else(|e| panic!("{}: {e}", log.display()));
    Command::new(env!("CARGO_BIN_EXE_kafka-sink"))
        .args(["--node", &db.to_string(), "--keyspace", ks, "--table", "t", "--consistency", "ONE"])
        .args(["--brokers", brokers, "--name", "cluster", "--partitions", "3", "--key", "partition"])
        .args(["--start-unix-ms", &start_ms.to_string(), "--end-unix-ms", &end_ms.to_string()])
        // Each window with changes is a Kafka transaction: windows of up to
        // a second, read every half second.
        .args([
            "--window",
            "1",
            "--safety",
            safety_arg().as_str(),
            "--sleep",
            "0.5",
            "--workers",
            "2",
            "--kafka-timeout",
            "20",
        ])
        .args(["--lease-keyspace", ks, "--reader-name", name, "--lease-ttl", "3", "--lease-heartbeat", "0.5"])
        .args(["--streams-per-query", "4", "--checkpoint-interval", "0.2"])
        .stdout(Stdio::null())
        .stderr(Stdio::from(log))
        .stdin(Stdio::null())
        .spawn()
        .expect("spawn kafka-sink")
}

/// Two sinks share a table through leases, keying messages by partition
/// key. One is paused (SIGSTOP) mid-workload until its leases have run out
/// and the other took its groups over, then resumed (SIGCONT): whatever it
/// was writing when paused, Kafka fenced it when its groups were taken, so
/// the topic read with `read_committed` still holds every change exactly
/// once. Every change of a partition, its partition delete included, is in
/// one Kafka partition, in write order.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sinks_share_a_table_and_one_paused_past_its_lease_is_fenced() {
    let mut kafka = tokio::task::spawn_blocking(Kafka::start).await.expect("join").unwrap_or_else(|e| panic!("{e}"));
    let brokers = kafka.addr().to_string();
    let (front, session, ks) = common::front_and_keyspace("cdc_kafka_leases").await;
    create_table(&session, &ks).await;
    let topic = format!("cluster.{ks}.t");
    let ms = |t: SystemTime| t.duration_since(UNIX_EPOCH).expect("epoch").as_millis() as u64;

    let plan = plan(30, 2000, 13);
    let mut expected = Keyed::new();
    for &(pk, ck, op, v) in &plan {
        expected.entry((pk, ck)).or_default().push((op, v));
    }
    let deleted: Vec<i32> = (0..5).collect();
    let start = SystemTime::now() - Duration::from_millis(500);
    let end = SystemTime::now() + Duration::from_secs(60);
    let mut sinks = Reap(vec![
        spawn_sharing(front.addr(), &brokers, &ks, "a", (ms(start), ms(end))),
        spawn_sharing(front.addr(), &brokers, &ks, "b", (ms(start), ms(end))),
    ]);
    let writer = {
        let (session, ks, plan) = (session.clone(), ks.clone(), plan.clone());
        tokio::spawn(async move { write(&session, &ks, &plan, 20, Duration::from_millis(100)).await })
    };

    // Both hold groups and write; then a is paused past its leases.
    let deadline = Instant::now() + Duration::from_secs(60);
    let groups = loop {
        let held = held(&session, &ks, "cdc_leases").await;
        let (bk, t) = (brokers.clone(), topic.clone());
        let written = tokio::task::spawn_blocking(move || committed(&bk, &t).len()).await.expect("join");
        if held.len() == 2 && written > plan.len() / 5 {
            break held.values().sum::<usize>();
        }
        assert!(Instant::now() < deadline, "both sinks hold groups and write: {held:?}, {written} messages");
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    signal(&sinks.0[0], "STOP");
    let paused = Instant::now();
    let deadline = paused + Duration::from_secs(30);
    loop {
        let held = held(&session, &ks, "cdc_leases").await;
        if held.get("b") == Some(&groups) {
            break;
        }
        assert!(Instant::now() < deadline, "b takes every group over: {held:?} of {groups}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // b writes on for a while, then a wakes up.
    tokio::time::sleep(Duration::from_secs(1)).await;
    signal(&sinks.0[0], "CONT");
    let paused_for = paused.elapsed();

    writer.await.expect("writer");
    let delete = session.prepare(shardwise::Statement::new(format!("DELETE FROM {ks}.t WHERE pk = ?"))).await;
    let delete = delete.expect("prepare");
    for &pk in &deleted {
        session.execute(&delete, (pk,)).await.expect("partition delete");
    }
    assert!(SystemTime::now() + Duration::from_secs(2) < end, "the writes ended well before the sinks' end");
    let deadline = Instant::now() + Duration::from_secs(120);
    for (name, child) in ["a", "b"].into_iter().zip(&mut sinks.0) {
        let status = exit_of(child, deadline, &format!("sink {name}")).await;
        assert!(status.success(), "sink {name} finished cleanly: {status:?}");
    }

    // Every change once, in write order per (pk, ck); a partition's
    // changes in one Kafka partition, its partition delete last.
    let (bk, t) = (brokers.clone(), topic.clone());
    let messages = tokio::task::spawn_blocking(move || committed(&bk, &t)).await.expect("join");
    let mut seen = Keyed::new();
    let mut partition_of: HashMap<i32, i32> = HashMap::new();
    let mut last_of: HashMap<i32, bool> = HashMap::new();
    for m in &messages {
        let key = std::str::from_utf8(m.key.as_deref().expect("a key")).expect("utf-8 key");
        let value = std::str::from_utf8(m.value.as_deref().expect("a value")).expect("utf-8 value");
        let pk = number_after(key, "\"pk\":").unwrap_or_else(|| panic!("pk in {key}")) as i32;
        assert!(!key.contains("ck"), "keyed by the partition key alone: {key}");
        let part = *partition_of.entry(pk).or_insert(m.partition);
        assert_eq!(part, m.partition, "pk {pk}: one Kafka partition");
        let row = value.split(r#""before":"#).nth(1).unwrap_or(value);
        match number_after(row, "\"ck\":") {
            Some(ck) => {
                assert!(!last_of.get(&pk).copied().unwrap_or(false), "pk {pk}: nothing after its partition delete");
                let op = if value.contains(r#""op":"c""#) {
                    Operation::Insert
                } else if value.contains(r#""op":"u""#) {
                    Operation::Update
                } else {
                    Operation::RowDelete
                };
                let v = (op != Operation::RowDelete).then(|| number_after(value, r#""v":{"value":"#)).flatten();
                seen.entry((pk, ck as i32)).or_default().push((op, v));
            }
            None => {
                assert!(value.contains(r#""op":"d""#), "a partition delete: {value}");
                assert!(last_of.insert(pk, true).is_none(), "pk {pk}: one partition delete");
            }
        }
    }
    for (key, ops) in &expected {
        assert_eq!(seen.get(key), Some(ops), "key {key:?}: every change once, in write order");
    }
    assert_eq!(seen.len(), expected.len(), "no key that was not written");
    let deletes: Vec<i32> = {
        let mut d: Vec<i32> = last_of.keys().copied().collect();
        d.sort_unstable();
        d
    };
    assert_eq!(deletes, deleted, "every partition delete once");
    assert_eq!(messages.len(), plan.len() + deleted.len(), "every change exactly once");
    eprintln!(
        "{groups} groups; a paused {:.1} s; {} committed messages, every change once",
        paused_for.as_secs_f64(),
        messages.len()
    );
    for name in ["a", "b"] {
        let _ = std::fs::remove_file(std::env::temp_dir().join(format!("{ks}-{name}.log")));
    }
    kafka.stop();
}

/// A secured Kafka: the sink reaches the broker's SASL PLAIN listener with
/// librdkafka settings given as `-X KEY=VALUE`, and writes every change
/// once; a wrong password is a clear failure, not a hang; a setting that
/// exactly once rests on is refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_sink_writes_through_a_sasl_listener_with_its_kafka_settings() {
    let mut kafka = tokio::task::spawn_blocking(Kafka::start).await.expect("join").unwrap_or_else(|e| panic!("{e}"));
    let (front, ks, range, total) = secured_workload("cdc_kafka_sasl").await;
    let (user, password) = testkit::kafka::SASL_USER;
    let topic = format!("cluster.{ks}.t");
    let (name, secret) = (format!("sasl.username={user}"), format!("sasl.password={password}"));
    let sasl = ["-X", "security.protocol=SASL_PLAINTEXT", "-X", "sasl.mechanism=PLAIN", "-X", &name];
    let (db, brokers) = (front.addr(), kafka.sasl_addr());

    let (status, stderr) =
        secured_run(db, &ks, range, (brokers, &topic), &[&sasl[..], &["-X", &secret]].concat()).await;
    assert!(status.success(), "the sink through SASL: {status:?}\n{stderr}");
    let (all, written) = (kafka.addr().to_string(), topic.clone());
    let messages = tokio::task::spawn_blocking(move || committed(&all, &written)).await.expect("join");
    assert_eq!(changes_of(&messages).1, total, "every change once, written through the SASL listener");

    let wrong = ["-X", "sasl.password=not-the-password"];
    let (status, stderr) = secured_run(db, &ks, range, (brokers, &topic), &[&sasl[..], &wrong].concat()).await;
    assert!(!status.success(), "a wrong password fails the sink");
    let last = stderr.lines().last().unwrap_or_default();
    assert!(last.starts_with("kafka-sink: ") && last.contains("kafka"), "one line that names Kafka: {stderr}");

    let acks = ["-X", &secret, "-X", "acks=1"];
    let (status, stderr) = secured_run(db, &ks, range, (brokers, &topic), &[&sasl[..], &acks].concat()).await;
    assert!(!status.success(), "acks=1 is refused");
    assert!(stderr.contains("kafka setting acks is the sink's own"), "{stderr}");
    kafka.stop();
}

/// A secured Kafka's sink run: `kafka-sink` over the changes of `ks.t`
/// from `start_ms` to `end_ms`, into the topic `topic` through `brokers`,
/// with the secured cluster's arguments `extra`; its exit status and stderr.
async fn secured_run(
    db: std::net::SocketAddr,
    ks: &str,
    (start_ms, end_ms): (u64, u64),
    (brokers, topic): (std::net::SocketAddr, &str),
    extra: &[&str],
) -> (std::process::ExitStatus, String) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_kafka-sink"))
        .args(["--node", &db.to_string(), "--keyspace", ks, "--table", "t", "--consistency", "ONE"])
        .args(["--brokers", &brokers.to_string(), "--name", "cluster", "--partitions", "1"])
        .args(["--topic", topic, "--checkpoint-topic", &format!("{topic}.checkpoints")])
        .args(["--start-unix-ms", &start_ms.to_string(), "--end-unix-ms", &end_ms.to_string()])
        .args(["--window", "1", "--safety", safety_arg().as_str(), "--kafka-timeout", "5"])
        .args(extra)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .stdin(Stdio::null())
        .spawn()
        .expect("spawn kafka-sink");
    let status = exit_of(&mut child, Instant::now() + Duration::from_secs(90), topic).await;
    let mut stderr = String::new();
    std::io::Read::read_to_string(&mut child.stderr.take().expect("stderr"), &mut stderr).expect("stderr");
    (status, stderr)
}

/// A run that failed: a failure status, and its stderr one line that says
/// so and names Kafka.
fn one_line_failure(status: std::process::ExitStatus, stderr: &str, what: &str) {
    eprintln!("{what}: {}", stderr.trim_end());
    assert!(!status.success(), "{what} fails the sink: {stderr}");
    assert_eq!(stderr.lines().count(), 1, "{what}: one line: {stderr:?}");
    assert!(
        stderr.starts_with("kafka-sink: ") && stderr.contains("kafka"),
        "{what}: a line that names Kafka: {stderr}"
    );
}

/// How many of `messages` are change events: each has a key and an
/// envelope with an `op` (what the envelope holds, other tests check).
fn change_events(messages: &[shardwise_cdc_kafka::topic::TopicMessage]) -> usize {
    for m in messages {
        let value = std::str::from_utf8(m.value.as_deref().expect("a value")).expect("utf-8 value");
        assert!(m.key.is_some() && value.contains(r#""op":""#), "a change event: {value}");
    }
    messages.len()
}

/// The changes of `ks.t` written for the secured sink tests, the times
/// around them (unix ms) and how many there are.
async fn secured_workload(tag: &str) -> (shardwise_emu::FrontHandle, String, (u64, u64), usize) {
    let (front, session, ks) = common::front_and_keyspace(tag).await;
    create_table(&session, &ks).await;
    let ms = |t: SystemTime| t.duration_since(UNIX_EPOCH).expect("epoch").as_millis() as u64;
    let start = SystemTime::now() - Duration::from_millis(500);
    let plan = plan(10, 200, 5);
    write(&session, &ks, &plan, 50, Duration::ZERO).await;
    let end = SystemTime::now() + Duration::from_millis(500);
    (front, ks, (ms(start), ms(end)), plan.len())
}

/// TLS: the sink reaches the broker's TLS listener with
/// `security.protocol=SSL`, verifying the broker's certificate (made at the
/// broker's start) with `ssl.ca.location`, and writes every change once.
/// Without that certificate the broker is not trusted: one line, and a
/// failure status.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_sink_writes_over_tls_verifying_the_broker_with_the_generated_ca() {
    let mut kafka = tokio::task::spawn_blocking(Kafka::start).await.expect("join").unwrap_or_else(|e| panic!("{e}"));
    let (front, ks, range, total) = secured_workload("cdc_kafka_tls").await;
    let ca = format!("ssl.ca.location={}", kafka.ca_pem_path().display());

    let tls = ["-X", "security.protocol=SSL", "-X", ca.as_str()];
    let (status, stderr) = secured_run(front.addr(), &ks, range, (kafka.tls_addr(), "over-tls"), &tls).await;
    assert!(status.success(), "the sink over TLS: {status:?}\n{stderr}");
    let brokers = kafka.addr().to_string();
    let messages = tokio::task::spawn_blocking(move || committed(&brokers, "over-tls")).await.expect("join");
    assert_eq!(change_events(&messages), total, "every change once, written over TLS");

    // The system's certificate authorities do not know the broker's.
    let untrusted = ["-X", "security.protocol=SSL"];
    let (status, stderr) = secured_run(front.addr(), &ks, range, (kafka.tls_addr(), "untrusted"), &untrusted).await;
    one_line_failure(status, &stderr, "a broker certificate nobody vouches for");
    assert!(stderr.contains("certificate verify failed"), "it says why: {stderr}");
    kafka.stop();
}

/// SASL/SCRAM: the sink reaches the broker's SASL_SSL listener with
/// SCRAM-SHA-512, its settings read from a properties file (`-X` changing
/// one of them), and its SASL_PLAINTEXT listener with SCRAM-SHA-256 given
/// with `-X`; each run writes every change once. A wrong SCRAM password
/// (the file's, left alone) is one line and a failure status.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_sink_writes_through_sasl_scram_with_a_kafka_properties_file() {
    let mut kafka = tokio::task::spawn_blocking(Kafka::start).await.expect("join").unwrap_or_else(|e| panic!("{e}"));
    let (front, ks, range, total) = secured_workload("cdc_kafka_scram").await;
    let (user, password) = testkit::kafka::SCRAM_USER;
    let properties = kafka.dir().join("client.properties");
    let text = format!(
        "# the sink's client settings, as Kafka's tools take them\n\
         security.protocol = SASL_SSL\n\
         sasl.mechanism=SCRAM-SHA-512\n\
         sasl.username={user}\n\
         ! overridden by -X below, when it is given\n\
         sasl.password=not-the-password\n\
         ssl.ca.location={}\n",
        kafka.ca_pem_path().display()
    );
    std::fs::write(&properties, text).expect("the properties file");
    let file = properties.to_str().expect("a UTF-8 path");
    let read = |topic: &'static str| {
        let brokers = kafka.addr().to_string();
        tokio::task::spawn_blocking(move || change_events(&committed(&brokers, topic)))
    };

    let with_password = format!("sasl.password={password}");
    let args = ["--kafka-properties", file, "-X", with_password.as_str()];
    let (status, stderr) = secured_run(front.addr(), &ks, range, (kafka.sasl_tls_addr(), "scram-tls"), &args).await;
    assert!(status.success(), "the sink through SASL_SSL with SCRAM-SHA-512: {status:?}\n{stderr}");
    assert_eq!(read("scram-tls").await.expect("join"), total, "every change once, through SCRAM over TLS");

    let username = format!("sasl.username={user}");
    let args = ["-X", "security.protocol=SASL_PLAINTEXT", "-X", "sasl.mechanism=SCRAM-SHA-256"];
    let args = [&args[..], &["-X", username.as_str(), "-X", with_password.as_str()]].concat();
    let (status, stderr) = secured_run(front.addr(), &ks, range, (kafka.sasl_addr(), "scram-plain"), &args).await;
    assert!(status.success(), "the sink through SASL_PLAINTEXT with SCRAM-SHA-256: {status:?}\n{stderr}");
    assert_eq!(read("scram-plain").await.expect("join"), total, "every change once, through SCRAM");

    let args = ["--kafka-properties", file];
    let (status, stderr) = secured_run(front.addr(), &ks, range, (kafka.sasl_tls_addr(), "wrong"), &args).await;
    one_line_failure(status, &stderr, "a wrong SCRAM password");
    assert!(stderr.contains("SASL authentication error"), "it says why: {stderr}");
    kafka.stop();
}

/// A properties file that cannot be used ends the sink before it connects
/// to anything: one line naming the file (and the line), a failure status.
#[test]
fn a_kafka_properties_file_that_cannot_be_used_is_one_clear_line() {
    let dir = std::env::temp_dir().join(format!("shardwise-sink-properties-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("dir");
    let unused = std::net::TcpListener::bind("127.0.0.1:0").expect("port").local_addr().expect("addr").to_string();
    let run = |file: &std::path::Path| {
        let out = Command::new(env!("CARGO_BIN_EXE_kafka-sink"))
            .args(["--node", &unused, "--keyspace", "ks", "--table", "t", "--brokers", &unused])
            .args(["--kafka-timeout", "2", "--kafka-properties"])
            .arg(file)
            .stdin(Stdio::null())
            .output()
            .expect("kafka-sink runs");
        assert!(!out.status.success(), "{}: {out:?}", file.display());
        let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
        assert_eq!(stderr.lines().count(), 1, "one line: {stderr:?}");
        assert!(stderr.starts_with("kafka-sink: ") && !stderr.contains(&unused), "before connecting: {stderr:?}");
        stderr
    };
    let missing = dir.join("missing.properties");
    let stderr = run(&missing);
    assert!(stderr.starts_with(&format!("kafka-sink: kafka properties file {}: ", missing.display())), "{stderr}");

    let bad = dir.join("bad.properties");
    std::fs::write(&bad, "# a comment\nsecurity.protocol=SSL\nsasl.password hunter2\n").expect("write");
    let stderr = run(&bad);
    assert!(stderr.starts_with(&format!("kafka-sink: kafka properties file {}, line 3: ", bad.display())), "{stderr}");
    assert!(!stderr.contains("hunter2"), "the line's text is not repeated: {stderr}");

    let owned = dir.join("owned.properties");
    std::fs::write(&owned, "security.protocol=SSL\nenable.idempotence=false\n").expect("write");
    assert!(run(&owned).contains("kafka setting enable.idempotence is the sink's own"));
    let _ = std::fs::remove_dir_all(&dir);
}
