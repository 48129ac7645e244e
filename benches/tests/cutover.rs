//! A service switching from `scylla-cdc` 0.7 to shardwise-cdc, as it would:
//! `scylla-cdc` reads part of a live workload through the emulation front,
//! saving its progress with its `TableBackedCheckpointSaver`, and is stopped
//! while the writes go on; a shardwise reader built with
//! `resume_from_scylla_cdc` reads the rest. Together they deliver every
//! change, in order per key, none missing; the only changes both deliver
//! are the ones `scylla-cdc` read after the progress it saved (it saves a
//! window's start only once the next one begins), and shardwise reads
//! nothing of a stream before the time `scylla-cdc` saved for it.

use std::str::FromStr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use shardwise_cdc::checkpoint::scylla_cdc::ScyllaCdcCheckpoints;
use shardwise_cdc::{CdcReaderBuilder, CdcRow, Consumer, ConsumerError, GroupInfo, Millis, Operation, StreamId};
use shardwise_cdc_testkit::workload::{self, Ops, SAFETY};

/// One change as a reader delivered it.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Seen {
    pk: i32,
    operation: Operation,
    v: Option<i64>,
    stream: StreamId,
    /// `cdc$time`, in milliseconds.
    time: Millis,
}

type Log = Arc<Mutex<Vec<Seen>>>;

fn ops(log: &Log) -> Ops {
    let mut ops = Ops::new();
    for s in log.lock().expect("log").iter() {
        ops.entry(s.pk).or_default().push((s.operation, s.v));
    }
    ops
}

/// `scylla-cdc`'s consumer: every row into the log.
struct Official(Log);

#[async_trait::async_trait]
impl scylla_cdc::consumer::Consumer for Official {
    async fn consume_cdc(&mut self, row: scylla_cdc::consumer::CDCRow<'_>) -> anyhow::Result<()> {
        use scylla_cdc::consumer::OperationType;
        let operation = match row.operation {
            OperationType::RowInsert => Operation::Insert,
            OperationType::RowUpdate => Operation::Update,
            OperationType::RowDelete => Operation::RowDelete,
            other => anyhow::bail!("the workload makes no {other}"),
        };
        let pk = row.get_value("pk").as_ref().and_then(|v| v.as_int()).ok_or_else(|| anyhow::anyhow!("pk"))?;
        let v = row.get_value("v").as_ref().and_then(|v| v.as_bigint());
        let (secs, nanos) = row.time.get_timestamp().ok_or_else(|| anyhow::anyhow!("not a timeuuid"))?.to_unix();
        let time = Millis(secs as i64 * 1000 + i64::from(nanos / 1_000_000));
        let stream = StreamId::from_str(&row.stream_id.to_string())?;
        self.0.lock().expect("log").push(Seen { pk, operation, v, stream, time });
        Ok(())
    }
}

#[async_trait::async_trait]
impl scylla_cdc::consumer::ConsumerFactory for Official {
    async fn new_consumer(&self) -> Box<dyn scylla_cdc::consumer::Consumer> {
        Box::new(Official(self.0.clone()))
    }
}

/// shardwise-cdc's consumer factory: every row into the log.
fn ours(log: Log) -> Arc<dyn shardwise_cdc::ConsumerFactory> {
    Arc::new(move |_: &GroupInfo| -> Box<dyn Consumer> {
        let log = log.clone();
        Box::new(move |row: CdcRow<'_>| -> Result<(), ConsumerError> {
            let pk: i32 = row.value::<Option<i32>>("pk")?.ok_or_else(|| ConsumerError::failed("no pk"))?;
            let v = row.value::<Option<i64>>("v")?;
            let time = Millis(row.time_micros().div_euclid(1000));
            log.lock().expect("log").push(Seen { pk, operation: row.operation(), v, stream: row.stream_id(), time });
            Ok(())
        })
    })
}

fn since_epoch(t: SystemTime) -> Duration {
    t.duration_since(UNIX_EPOCH).unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reader_takes_over_from_scylla_cdc_with_no_gap() {
    let (front, session, ks) = workload::front_with_table("cutover").await;
    let plan = workload::plan(16, 900, 11);
    let expected = workload::expected_of(&plan);
    let start = SystemTime::now() - Duration::from_secs(1);

    // scylla-cdc, as a service runs it: its checkpoints in a table.
    let official = Arc::new(
        scylla::client::session_builder::SessionBuilder::new()
            .known_node_addr(front.addr())
            .build()
            .await
            .expect("the official driver through the front"),
    );
    let saver = scylla_cdc::checkpoints::TableBackedCheckpointSaver::new_with_default_ttl(
        official.clone(),
        &ks,
        "cdc_checkpoints",
    )
    .await
    .expect("scylla-cdc's checkpoint table");
    let first: Log = Log::default();
    let (mut old, running) = scylla_cdc::log_reader::CDCLogReaderBuilder::new()
        .session(official)
        .keyspace(&ks)
        .table_name("t")
        .start_timestamp(since_epoch(start))
        .window_size(Duration::from_millis(200))
        .safety_interval(SAFETY)
        .sleep_interval(Duration::from_millis(50))
        .should_save_progress(true)
        .pause_between_saves(Duration::from_millis(100))
        .checkpoint_saver(Arc::new(saver))
        .consumer_factory(Arc::new(Official(first.clone())))
        .build()
        .await
        .expect("scylla-cdc");

    // The workload, about 45 changes a second for 20 s; scylla-cdc is
    // stopped in the middle of it, once it has read a third.
    let writer = {
        let (session, ks, plan) = (session.clone(), ks.clone(), plan.clone());
        tokio::spawn(async move { workload::write(&session, &ks, &plan, 9, Duration::from_millis(200)).await })
    };
    let deadline = Instant::now() + Duration::from_secs(60);
    while first.lock().expect("log").len() < plan.len() / 3 {
        assert!(Instant::now() < deadline, "scylla-cdc read {} changes in 60 s", first.lock().expect("log").len());
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    old.stop();
    running.await.expect("scylla-cdc stopped cleanly");
    let stopped = first.lock().expect("log").len();
    writer.await.expect("writer");
    let written = SystemTime::now();

    // shardwise takes over from what scylla-cdc saved.
    let saved = ScyllaCdcCheckpoints::load(&session, &ks, "cdc_checkpoints").await.expect("read").expect("saved");
    assert!(!saved.streams.is_empty(), "scylla-cdc saved its streams");
    let second: Log = Log::default();
    let reader = CdcReaderBuilder::new(session.clone(), &ks, "t")
        .start(start)
        .end(written + Duration::from_millis(200))
        .window_size(Duration::from_millis(100))
        .safety_interval(SAFETY)
        .sleep_interval(Duration::from_millis(50))
        .workers(2)
        .resume_from_scylla_cdc(&ks, "cdc_checkpoints")
        .build(ours(second.clone()))
        .await
        .expect("the shardwise reader");
    tokio::time::timeout(Duration::from_secs(120), reader.join()).await.expect("finished in time").expect("read");

    // Every change, once per key in write order, none missing.
    let repeated = workload::check_resumed(&expected, &ops(&first), &ops(&second));
    let first = first.lock().expect("log").clone();
    let second = second.lock().expect("log").clone();
    println!(
        "scylla-cdc read {stopped} changes before it stopped ({} in all), shardwise {}; {repeated} read by both",
        first.len(),
        second.len()
    );
    let start_of = |s: &Seen| saved.start_of(s.stream).unwrap_or(Millis::MIN);
    for s in &second {
        assert!(s.time >= start_of(s), "shardwise read {s:?}, before its stream's saved time {:?}", start_of(s));
    }
    // What both read is exactly what scylla-cdc read past the progress it saved.
    let past_saved = first.iter().filter(|s| s.time >= start_of(s)).count();
    assert_eq!(repeated, past_saved, "changes read twice beyond what scylla-cdc had not saved");
    assert!(second.len() + first.len() - repeated == plan.len());
}
