//! `scylla-cdc` 0.7, unchanged, reads through the front: it finds the
//! generation in the stand-ins of `system_distributed`, groups its streams
//! by vnode, and reads the log with `BYPASS CACHE` queries. The log row is
//! filled by hand (so this test depends on the front's generations only, not on its log synthesis): an
//! INSERT into the log table with a stream id of the current generation and
//! a timeuuid of now. Then a new generation is published at a chosen time
//! (a simulated topology change) and the reader must follow it.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use async_trait::async_trait;
use scylla_cdc::consumer::{CDCRow, Consumer, ConsumerFactory, OperationType};
use scylla_cdc::log_reader::CDCLogReaderBuilder;
use shardwise_emu::{FrontConfig, StreamId};
use testkit::fresh_keyspace;

use crate::support::{keyspace, session, start_front};

type Seen = Arc<Mutex<Vec<(scylla_cdc::cdc_types::StreamID, OperationType, Option<i32>, Option<String>)>>>;

struct Collect(Seen);

#[async_trait]
impl Consumer for Collect {
    async fn consume_cdc(&mut self, row: CDCRow<'_>) -> anyhow::Result<()> {
        let pk = row.get_value("pk").as_ref().and_then(|v| v.as_int());
        let v = row.get_value("v").as_ref().and_then(|v| v.as_text().cloned());
        if let Ok(mut seen) = self.0.lock() {
            seen.push((row.stream_id.clone(), row.operation.clone(), pk, v));
        }
        Ok(())
    }
}

struct Factory(Seen);

#[async_trait]
impl ConsumerFactory for Factory {
    async fn new_consumer(&self) -> Box<dyn Consumer> {
        Box::new(Collect(self.0.clone()))
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scylla_cdc_reads_generation_and_log_through_the_front() {
    // Its own stand-in keyspace: a generation of its own, whatever other tests do.
    let emu = fresh_keyspace("emu_gen");
    let front = start_front(FrontConfig { shards: 4, emu_keyspace: emu.clone(), ..FrontConfig::default() });
    let generation = front.current_generation().expect("a generation at start");
    assert_eq!(generation.vnodes[0].streams.len(), 4);

    let session = Arc::new(session(&front).await);
    // The generation as clients read it (rewritten to the stand-ins).
    let times = session
        .query_unpaged("SELECT time FROM system_distributed.cdc_generation_timestamps WHERE key = 'timestamps'", &[])
        .await
        .expect("generation timestamps")
        .into_rows_result()
        .expect("rows")
        .rows::<(scylla::value::CqlTimestamp,)>()
        .expect("typed")
        .map(|r| r.expect("row").0 .0)
        .collect::<Vec<i64>>();
    assert!(times.contains(&generation.timestamp_ms), "{times:?}");

    let ks = keyspace(&session, "emu_cdc_read").await;
    session
        .query_unpaged(
            format!(
                "CREATE TABLE {ks}.t (pk int, ck int, v text, PRIMARY KEY (pk, ck)) WITH cdc = {{'enabled': true}}"
            ),
            &[],
        )
        .await
        .expect("cdc table");

    let seen: Seen = Arc::default();
    let start = Duration::from_millis(generation.timestamp_ms as u64);
    let (mut reader, handle) = CDCLogReaderBuilder::new()
        .session(session.clone())
        .keyspace(&ks)
        .table_name("t")
        .start_timestamp(start)
        .window_size(Duration::from_millis(500))
        .safety_interval(Duration::from_millis(500))
        .sleep_interval(Duration::from_millis(300))
        .consumer_factory(Arc::new(Factory(seen.clone())))
        .build()
        .await
        .expect("CDCLogReader");

    // A hand-filled log row: the stream a base write of pk 7 would use (§4.3).
    let token = shardwise_protocol::token::Token::murmur3(&7i32.to_be_bytes());
    let stream: StreamId = generation.stream_for_token(token);
    session
        .query_unpaged(
            format!(
                "INSERT INTO {ks}.t_scylla_cdc_log (\"cdc$stream_id\", \"cdc$time\", \"cdc$batch_seq_no\", \
                 \"cdc$operation\", \"cdc$end_of_batch\", pk, ck, v) VALUES ({stream}, now(), 0, 2, true, 7, 1, 'seven')"
            ),
            &[],
        )
        .await
        .expect("log row");

    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        if seen.lock().map(|s| !s.is_empty()).unwrap_or(false) {
            break;
        }
        assert!(Instant::now() < deadline, "the consumer never received the log row");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    // A topology change: a new generation two seconds from now. The reader
    // must switch to it and read a row written to one of its streams.
    let next = front.new_generation_at(SystemTime::now() + Duration::from_secs(2)).await.expect("new generation");
    assert!(next.timestamp_ms > generation.timestamp_ms);
    assert_eq!(front.generations().last(), Some(&next));
    let stream2 = next.stream_for_token(shardwise_protocol::token::Token::murmur3(&8i32.to_be_bytes()));
    assert_ne!(stream2, generation.stream_for_token(shardwise_protocol::token::Token::murmur3(&8i32.to_be_bytes())));
    while SystemTime::now().duration_since(UNIX_EPOCH).expect("clock").as_millis() as i64 <= next.timestamp_ms + 100 {
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    session
        .query_unpaged(
            format!(
                "INSERT INTO {ks}.t_scylla_cdc_log (\"cdc$stream_id\", \"cdc$time\", \"cdc$batch_seq_no\", \
                 \"cdc$operation\", \"cdc$end_of_batch\", pk, ck, v) VALUES ({stream2}, now(), 0, 2, true, 8, 1, 'eight')"
            ),
            &[],
        )
        .await
        .expect("log row in the new generation");
    let deadline = Instant::now() + Duration::from_secs(30);
    while seen.lock().map(|s| s.len()).unwrap_or(0) < 2 {
        assert!(Instant::now() < deadline, "the reader did not move to the new generation");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    // Read on for a moment: no errors, no duplicates.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let now = SystemTime::now().duration_since(UNIX_EPOCH).expect("clock");
    reader.stop_at(now);
    tokio::time::timeout(Duration::from_secs(30), handle)
        .await
        .expect("reader stops")
        .expect("reader ran without errors");
    let seen = seen.lock().expect("seen").clone();
    assert_eq!(seen.len(), 2, "{seen:?}");
    let (id, op, pk, v) = &seen[0];
    assert_eq!(*id, scylla_cdc::cdc_types::StreamID::new(stream.as_bytes().to_vec()));
    assert_eq!(*op, OperationType::RowInsert);
    assert_eq!((*pk, v.as_deref()), (Some(7), Some("seven")));
    let (id, _, pk, v) = &seen[1];
    assert_eq!(*id, scylla_cdc::cdc_types::StreamID::new(stream2.as_bytes().to_vec()));
    assert_eq!((*pk, v.as_deref()), (Some(8), Some("eight")));
    println!("scylla-cdc consumed {seen:?}\n{}", front.stats());
}
