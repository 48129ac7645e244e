//! The sink's multi-process mode on Kafka's own group protocol
//! (`--group-id`), and windows written in parts, through the Scylla
//! emulation front on a real Cassandra into a real Kafka broker (testkit).
//!
//! * Three `kafka-sink`s form one consumer group over a table's live
//!   workload; one is killed with SIGKILL, another paused with SIGSTOP past
//!   its session timeout and resumed: a `read_committed` consumer of the
//!   topic finds every change exactly once, in write order per key.
//! * The group coordinator refuses the offsets of a member of an earlier
//!   generation (KIP-447), which is what fences a paused sink's late
//!   transaction: checked with the bare client, a zombie member's
//!   transaction (messages and a checkpoint record far ahead) refused and
//!   none of it committed.
//! * A catch-up window far over the transaction bounds goes out in parts;
//!   the sink is killed between parts and restarted: the restart skips
//!   exactly what the parts committed.

use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use rdkafka::consumer::{BaseConsumer, Consumer};
use shardwise_cdc_kafka::topic::{read_topic, Isolation};
use testkit::Kafka;

use shardwise_cdc_testkit as common;
mod support;
use common::workload::{create_table, plan, safety_arg, write};
use common::{exit_of, signal};
use support::{changes_of, committed, Keyed, Reap};

const GROUP: &str = "sinks";
const CHECKPOINTS: &str = "group-checkpoints";

fn ms(t: SystemTime) -> u64 {
    t.duration_since(UNIX_EPOCH).expect("epoch").as_millis() as u64
}

/// A sink of `ks.t` in the consumer group [`GROUP`] as `name`, from
/// `start_ms` to `end_ms`, its transactions at most 20 messages; its stderr
/// goes to a file of the temporary directory, named after it.
fn spawn_member(
    db: std::net::SocketAddr,
    brokers: &str,
    ks: &str,
    name: &str,
    (start_ms, end_ms): (u64, u64),
) -> Child {
    let log = std::env::temp_dir().join(format!("{ks}-{name}.log"));
    let log = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&log)
        .unwrap_or_else(|e| panic!("{}: {e}", log.display()));
    let mut command = Command::new(env!("CARGO_BIN_EXE_kafka-sink"));
    if std::env::var_os("SINK_VERBOSE").is_some() {
        command.arg("--verbose");
    }
    command
        .args(["--node", &db.to_string(), "--keyspace", ks, "--table", "t", "--consistency", "ONE"])
        .args(["--brokers", brokers, "--name", "cluster", "--partitions", "3", "--checkpoint-topic", CHECKPOINTS])
        .args(["--start-unix-ms", &start_ms.to_string(), "--end-unix-ms", &end_ms.to_string()])
        .args(["--window", "1", "--safety", safety_arg().as_str(), "--sleep", "0.3", "--workers", "2"])
        .args(["--kafka-timeout", "20", "--streams-per-query", "4", "--checkpoint-interval", "0.2"])
        .args(["--max-windows-in-flight", "2"])
        .args(["--group-id", GROUP, "--reader-name", name, "--group-partitions", "12"])
        .args(["--group-session-timeout", "6", "--max-transaction-messages", "5", "--progress", "0"])
        .stdout(Stdio::null())
        .stderr(Stdio::from(log))
        .stdin(Stdio::null())
        .spawn()
        .expect("spawn kafka-sink")
}

/// The members of the consumer group [`GROUP`] now.
fn members(brokers: &str) -> usize {
    let client: BaseConsumer =
        rdkafka::ClientConfig::new().set("bootstrap.servers", brokers).create().expect("a client");
    match client.fetch_group_list(Some(GROUP), Duration::from_secs(10)) {
        Ok(list) => list.groups().iter().find(|g| g.name() == GROUP).map_or(0, |g| g.members().len()),
        Err(_) => 0,
    }
}

/// Waits (at most 40 s) until the group has `n` members.
async fn members_become(brokers: &str, n: usize, what: &str) {
    let deadline = Instant::now() + Duration::from_secs(40);
    loop {
        let b = brokers.to_owned();
        let now = tokio::task::spawn_blocking(move || members(&b)).await.expect("join");
        if now == n {
            return;
        }
        assert!(Instant::now() < deadline, "{what}: the group has {now} members, not {n}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// Three sinks in one consumer group share a table under a live workload.
/// Once all write, `a` is killed (SIGKILL); `b` is paused (SIGSTOP) until
/// the coordinator dropped both and `c` holds every group and writes on,
/// then resumed (SIGCONT): whatever `b` was writing is refused by the
/// coordinator (its generation is over), and it rejoins. `a` is started
/// again under its name (its transactional id aborts what it left open).
/// The topic read with `read_committed` holds every change exactly once, in
/// write order per key, each partition's changes in one Kafka partition.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sinks_in_a_consumer_group_survive_a_kill_and_a_pause_past_the_session_timeout() {
    let mut kafka = tokio::task::spawn_blocking(Kafka::start).await.expect("join").unwrap_or_else(|e| panic!("{e}"));
    let brokers = kafka.addr().to_string();
    let (front, session, ks) = common::front_and_keyspace("cdc_kafka_group").await;
    create_table(&session, &ks).await;
    let topic = format!("cluster.{ks}.t");
    for name in ["a", "b", "c"] {
        let _ = std::fs::remove_file(std::env::temp_dir().join(format!("{ks}-{name}.log")));
    }

    let plan = plan(30, 3000, 17);
    let mut expected = Keyed::new();
    for &(pk, ck, op, v) in &plan {
        expected.entry((pk, ck)).or_default().push((op, v));
    }
    let start = SystemTime::now() - Duration::from_millis(500);
    // The writes take 30 s of ticks plus 3,000 writes' latency: on a loaded
    // machine (the suite's lanes side by side) that came to over 48 s.
    let end = SystemTime::now() + Duration::from_secs(75);
    let range = (ms(start), ms(end));
    let db = front.addr();
    let mut sinks = Reap(vec![
        spawn_member(db, &brokers, &ks, "a", range),
        spawn_member(db, &brokers, &ks, "b", range),
        spawn_member(db, &brokers, &ks, "c", range),
    ]);
    // 100 changes a second for 30 s.
    let writer = {
        let (session, ks, plan) = (session.clone(), ks.clone(), plan.clone());
        tokio::spawn(async move { write(&session, &ks, &plan, 10, Duration::from_millis(100)).await })
    };
    members_become(&brokers, 3, "all three joined").await;
    let deadline = Instant::now() + Duration::from_secs(40);
    loop {
        let (b, t) = (brokers.clone(), topic.clone());
        let written = tokio::task::spawn_blocking(move || committed(&b, &t).len()).await.expect("join");
        if written > plan.len() / 6 {
            break;
        }
        assert!(Instant::now() < deadline, "the sinks write: {written} messages");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }

    let t0 = Instant::now();
    eprintln!("[test] killing a");
    sinks.0[0].kill().expect("SIGKILL a");
    let _ = sinks.0[0].wait();
    let killed = Instant::now();
    tokio::time::sleep(Duration::from_millis(1000)).await;
    signal(&sinks.0[1], "STOP");
    eprintln!("[test] b paused at {:?}", t0.elapsed());
    let paused = Instant::now();
    // a's and b's sessions time out (6 s, the broker's least): c alone
    // holds the group.
    members_become(&brokers, 1, "a killed and b paused").await;
    eprintln!("[test] one member at {:?}", t0.elapsed());
    // Written, not committed: a transaction that a or b left open holds
    // read_committed readers back until it times out (10 s).
    let written = |brokers: &str, topic: &str| {
        let (b, t) = (brokers.to_owned(), topic.to_owned());
        tokio::task::spawn_blocking(move || {
            read_topic(&b.as_str().into(), &t, Isolation::ReadUncommitted, Duration::from_secs(30))
                .expect("read uncommitted")
                .map_or(0, |m| m.len())
        })
    };
    let before = written(&brokers, &topic).await.expect("join");
    tokio::time::sleep(Duration::from_millis(2000)).await;
    let after = written(&brokers, &topic).await.expect("join");
    assert!(after > before, "c writes every group meanwhile: {before} then {after} messages");
    signal(&sinks.0[1], "CONT");
    let paused_for = paused.elapsed();
    sinks.0[0] = spawn_member(db, &brokers, &ks, "a", range);
    let down_for = killed.elapsed();
    members_become(&brokers, 3, "b resumed and a restarted").await;

    writer.await.expect("writer");
    assert!(SystemTime::now() + Duration::from_secs(2) < end, "the writes ended well before the sinks' end");
    let deadline = Instant::now() + Duration::from_secs(120);
    for (name, child) in ["a", "b", "c"].into_iter().zip(&mut sinks.0) {
        let status = exit_of(child, deadline, &format!("sink {name}")).await;
        assert!(status.success(), "sink {name} finished cleanly: {status:?}");
    }

    let (b, t) = (brokers.clone(), topic.clone());
    let messages = tokio::task::spawn_blocking(move || committed(&b, &t)).await.expect("join");
    let (seen, n) = changes_of(&messages);
    for (key, ops) in &expected {
        assert_eq!(seen.get(key), Some(ops), "key {key:?}: every change once, in write order");
    }
    assert_eq!(seen.len(), expected.len(), "no key that was not written");
    assert_eq!(n, plan.len(), "every change exactly once");
    let log = |name: &str| std::fs::read_to_string(std::env::temp_dir().join(format!("{ks}-{name}.log")));
    let b_log = log("b").unwrap_or_default();
    let refused = b_log.matches("consumer group moved on").count();
    let parts: u64 = ["a", "b", "c"]
        .iter()
        .filter_map(|name| log(name).ok())
        .flat_map(|text| text.lines().filter(|l| l.contains("] done:")).map(str::to_owned).collect::<Vec<_>>())
        .filter_map(|line| line.split(" and ").nth(1)?.split(' ').next()?.parse::<u64>().ok())
        .sum();
    eprintln!(
        "a killed (down {:.1} s, restarted), b paused {:.1} s: {n} committed messages, every change once; \
         b's refused transactions after its pause: {refused}; parts of windows written: {parts}",
        down_for.as_secs_f64(),
        paused_for.as_secs_f64()
    );
    if std::env::var_os("KEEP_SINK_LOGS").is_none() {
        for name in ["a", "b", "c"] {
            let _ = std::fs::remove_file(std::env::temp_dir().join(format!("{ks}-{name}.log")));
        }
    }
    kafka.stop();
}

/// KIP-447 as the sink relies on it, with the bare client: a member that
/// stopped polling is dropped from the group once a new member joins (and
/// its rebalance timeout passes); its transaction, carrying its group
/// metadata, is refused by the coordinator (`UNKNOWN_MEMBER_ID` or
/// `ILLEGAL_GENERATION`), so none of its messages, nor its checkpoint
/// record far ahead, is committed. A transaction under the current
/// generation's metadata commits.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_group_coordinator_refuses_a_transaction_of_an_earlier_generation() {
    use rdkafka::error::RDKafkaErrorCode;
    use rdkafka::producer::{BaseRecord, Producer, ThreadedProducer};
    use rdkafka::{Offset, TopicPartitionList};

    let mut kafka = tokio::task::spawn_blocking(Kafka::start).await.expect("join").unwrap_or_else(|e| panic!("{e}"));
    let brokers = kafka.addr().to_string();
    let b = brokers.clone();
    // The Kafka clients' calls run on a thread of their own, bounded: a
    // call that never returns fails the test naming the step it was at,
    // instead of hanging the test binary (`spawn_blocking` would be waited
    // for when the test's runtime is dropped).
    let step = Arc::new(Mutex::new("starting"));
    let at = step.clone();
    let (done, outcome) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let at = |name: &'static str| *at.lock().unwrap_or_else(std::sync::PoisonError::into_inner) = name;
        let brokers: shardwise_cdc_kafka::Brokers = b.as_str().into();
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime");
        rt.block_on(async {
            for (topic, partitions) in [("zombie-out", 1), ("zombie-control", 2)] {
                shardwise_cdc_kafka::topic::create_topic(&brokers, topic, partitions, false).await.expect("topic");
            }
        });
        let member = |id: &str| -> BaseConsumer {
            let consumer: BaseConsumer = rdkafka::ClientConfig::new()
                .set("bootstrap.servers", &b)
                .set("group.id", "zombies")
                .set("client.id", id)
                .set("session.timeout.ms", "6000")
                .set("max.poll.interval.ms", "7000")
                .set("enable.auto.commit", "false")
                .create()
                .expect("a consumer");
            consumer.subscribe(&["zombie-control"]).expect("subscribe");
            consumer
        };
        let assigned = |c: &BaseConsumer| {
            let deadline = Instant::now() + Duration::from_secs(30);
            while c.assignment().map_or(0, |a| a.count()) == 0 {
                assert!(Instant::now() < deadline, "assigned");
                let _ = c.poll(Duration::from_millis(100));
            }
        };
        let producer = |id: &str| -> ThreadedProducer<rdkafka::producer::DefaultProducerContext> {
            let p: ThreadedProducer<_> = rdkafka::ClientConfig::new()
                .set("bootstrap.servers", &b)
                .set("transactional.id", id)
                .create()
                .expect("producer");
            p.init_transactions(Duration::from_secs(20)).expect("init");
            p
        };
        let mut offsets = TopicPartitionList::new();
        offsets.add_partition_offset("zombie-control", 0, Offset::Offset(0)).expect("offset");
        at("the zombie joins");
        let zombie = member("zombie");
        assigned(&zombie);
        let stale = zombie.group_metadata().expect("metadata");
        // The zombie stops polling; a new member joins and, once the
        // zombie's rebalance timeout passed, holds every partition.
        at("the live member joins");
        let live = member("live");
        assigned(&live);
        let deadline = Instant::now() + Duration::from_secs(30);
        while live.assignment().map_or(0, |a| a.count()) < 2 {
            assert!(Instant::now() < deadline, "the live member holds both partitions");
            let _ = live.poll(Duration::from_millis(100));
        }
        at("the zombie's transaction");
        let late = producer("zombie-producer");
        late.begin_transaction().expect("begin");
        late.send(BaseRecord::to("zombie-out").key("k").payload("zombie")).map_err(|(e, _)| e).expect("send");
        late.flush(Duration::from_secs(20)).expect("flushed");
        let refused = late.send_offsets_to_transaction(&offsets, &stale, Duration::from_secs(20));
        let code = refused.as_ref().err().and_then(|e| e.rdkafka_error_code());
        let committed_anyway = refused.is_ok() && late.commit_transaction(Duration::from_secs(20)).is_ok();
        if !committed_anyway {
            let _ = late.abort_transaction(Duration::from_secs(20));
        }
        at("the live member's transaction");
        let fresh = producer("live-producer");
        fresh.begin_transaction().expect("begin");
        fresh.send(BaseRecord::to("zombie-out").key("k").payload("live")).map_err(|(e, _)| e).expect("send");
        let metadata = live.group_metadata().expect("metadata");
        fresh.send_offsets_to_transaction(&offsets, &metadata, Duration::from_secs(20)).expect("offsets accepted");
        fresh.commit_transaction(Duration::from_secs(20)).expect("committed");
        at("done");
        let _ = done.send((code, committed_anyway));
        // Not closed: closing a consumer that left a rebalance unserved
        // (the zombie, on purpose) can block in librdkafka for good; the
        // test process ends them.
        std::mem::forget((zombie, live));
    });
    let waited = tokio::task::spawn_blocking(move || outcome.recv_timeout(Duration::from_secs(240))).await;
    let step = *step.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    let (code, committed_anyway) = match waited.expect("join") {
        Ok(outcome) => outcome,
        Err(e) => panic!("the Kafka calls did not finish ({e}) at the step: {step}"),
    };
    assert!(!committed_anyway, "the zombie's transaction must not commit");
    assert!(
        matches!(code, Some(RDKafkaErrorCode::UnknownMemberId | RDKafkaErrorCode::IllegalGeneration)),
        "refused as a member of an earlier generation: {code:?}"
    );
    let values: Vec<String> =
        read_topic(&brokers.as_str().into(), "zombie-out", Isolation::ReadCommitted, Duration::from_secs(20))
            .expect("read")
            .unwrap_or_default()
            .into_iter()
            .map(|m| String::from_utf8(m.value.expect("value")).expect("utf-8"))
            .collect();
    assert_eq!(values, ["live"], "only the live member's transaction");
    eprintln!("the zombie's offsets were refused with {code:?}");
    kafka.stop();
}

/// The sink catching up on a table whose changes are all in one window
/// (`--window 600`), with transactions of at most 10 messages: every
/// group's window goes out in parts. It is killed (SIGKILL) once some
/// parts are committed and no window ended, and started again: it resumes
/// each group at the window's start, skips what the parts committed, and
/// the topic holds every change exactly once, in order per key.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_window_too_big_for_one_transaction_is_written_in_parts_and_resumed_exactly() {
    let mut kafka = tokio::task::spawn_blocking(Kafka::start).await.expect("join").unwrap_or_else(|e| panic!("{e}"));
    let brokers = kafka.addr().to_string();
    let (front, session, ks) = common::front_and_keyspace("cdc_kafka_parts").await;
    create_table(&session, &ks).await;
    let topic = format!("cluster.{ks}.t");
    let plan = plan(30, 3000, 19);
    let mut expected = Keyed::new();
    for &(pk, ck, op, v) in &plan {
        expected.entry((pk, ck)).or_default().push((op, v));
    }
    let start = SystemTime::now() - Duration::from_millis(500);
    write(&session, &ks, &plan, 100, Duration::from_millis(5)).await;
    // Past the safety interval of the last write: one window reads it all.
    tokio::time::sleep(common::workload::SAFETY + Duration::from_millis(500)).await;
    let end = SystemTime::now();
    let spawn = |stderr: Stdio, progress: &str| {
        Command::new(env!("CARGO_BIN_EXE_kafka-sink"))
            .args(["--node", &front.addr().to_string(), "--keyspace", &ks, "--table", "t", "--consistency", "ONE"])
            .args([
                "--brokers",
                &brokers,
                "--name",
                "cluster",
                "--partitions",
                "3",
                "--checkpoint-topic",
                "parts-checkpoints",
            ])
            .args(["--start-unix-ms", &ms(start).to_string(), "--end-unix-ms", &ms(end).to_string()])
            .args(["--window", "600", "--safety", safety_arg().as_str(), "--sleep", "0.05", "--workers", "1"])
            .args(["--max-transaction-messages", "10", "--kafka-timeout", "20", "--progress", progress])
            .stdout(Stdio::null())
            .stderr(stderr)
            .stdin(Stdio::null())
            .spawn()
            .expect("spawn kafka-sink")
    };
    let mut child = Reap(vec![spawn(Stdio::piped(), "0.05")]);
    // Its progress lines: "[kafka-sink] N messages ...", every 50 ms.
    let progress = std::io::BufReader::new(child.0[0].stderr.take().expect("stderr"));
    let some = tokio::task::spawn_blocking(move || {
        std::io::BufRead::lines(progress).map_while(Result::ok).any(|line| {
            let n: usize = line.split(' ').nth(1).and_then(|n| n.parse().ok()).unwrap_or(0);
            n >= 300
        })
    });
    let some = tokio::time::timeout(Duration::from_secs(60), some).await.expect("the sink writes").expect("join");
    assert!(some, "the sink exited before 300 changes were in the topic");
    child.0[0].kill().expect("SIGKILL");
    let _ = child.0[0].wait();
    let (b, t) = (brokers.clone(), topic.clone());
    let at_kill = tokio::task::spawn_blocking(move || committed(&b, &t).len()).await.expect("join");
    let b = brokers.clone();
    let records = tokio::task::spawn_blocking(move || committed(&b, "parts-checkpoints")).await.expect("join");
    let key_of = |m: &shardwise_cdc_kafka::topic::TopicMessage| {
        String::from_utf8(m.key.clone().unwrap_or_default()).expect("utf-8")
    };
    let rows: std::collections::HashSet<String> = records.iter().map(key_of).filter(|k| k.ends_with("/rows")).collect();
    // Groups with parts committed and their window not ended (their
    // progress is before the end): resumed mid-window.
    let progress: std::collections::HashMap<String, u64> = records
        .iter()
        .filter_map(|m| {
            let value = String::from_utf8(m.value.clone()?).ok()?;
            Some((key_of(m), value.split(' ').nth(1)?.parse().ok()?))
        })
        .collect();
    let mid_window =
        rows.iter().filter(|k| progress.get(k.trim_end_matches("/rows")).is_none_or(|p| *p < ms(end))).count();
    assert!(!rows.is_empty(), "parts were committed with their positions");
    assert!(at_kill < plan.len(), "killed before the end: {at_kill} of {}", plan.len());

    let log = std::env::temp_dir().join(format!("{ks}-parts.log"));
    let file = std::fs::File::create(&log).expect("log");
    child.0[0] = spawn(Stdio::from(file), "0");
    let status = exit_of(&mut child.0[0], Instant::now() + Duration::from_secs(120), "the restarted sink").await;
    assert!(status.success(), "the restarted sink finished cleanly: {status:?}");
    let text = std::fs::read_to_string(&log).unwrap_or_default();
    let _ = std::fs::remove_file(&log);
    let done = text.lines().find(|l| l.contains("] done:")).unwrap_or_else(|| panic!("a done line: {text}")).to_owned();

    let (b, t) = (brokers.clone(), topic.clone());
    let messages = tokio::task::spawn_blocking(move || committed(&b, &t)).await.expect("join");
    let (seen, n) = changes_of(&messages);
    for (key, ops) in &expected {
        assert_eq!(seen.get(key), Some(ops), "key {key:?}: every change once, in write order");
    }
    assert_eq!(n, plan.len(), "every change exactly once");
    let skipped: u64 = done.split("; ").nth(1).and_then(|s| s.split(' ').next()?.parse().ok()).unwrap_or(0);
    // Killed between two windows, nothing is skipped (and nothing needs to).
    assert!(skipped > 0 || mid_window == 0, "the restart skipped what the parts committed: {done}");
    eprintln!(
        "killed with {at_kill} of {} committed ({} positions records, {mid_window} groups mid-window); the restart: {done}",
        plan.len(),
        rows.len()
    );
    kafka.stop();
}
