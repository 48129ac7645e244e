//! The first writes to a CDC table just created (DROP TABLE IF EXISTS, then
//! CREATE TABLE ... WITH cdc), prepared and executed by 16 writers at once
//! through a front of 4 shards, as `xtask demo`'s CDC step does: each leaves
//! its log row, and each is answered (so its log row is visible) well within
//! the demo reader's 100 ms safety interval after its `cdc$time` (taken when
//! the front received it).
//!
//! The demo lost the first change of each writer: the first writes loaded the
//! table's schema themselves (16 at once, each reading `system_schema`), which
//! took 126-246 ms here, so their log rows appeared behind a live reader that
//! had already read past their `cdc$time`. The front now loads it with the
//! CREATE TABLE; the first writes take 25-50 ms here, the later ones 5-30 ms.

use std::sync::Arc;
use std::time::{Duration, Instant};

use shardwise_emu::FrontConfig;
use testkit::fresh_keyspace;

use crate::support::{keyspace, session, start_front};

const WRITERS: i32 = 16;
const PER_WRITER: i32 = 20;
/// The demo reader's safety interval.
const SAFETY: Duration = Duration::from_millis(100);

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn every_first_write_to_a_fresh_cdc_table_is_logged() {
    let front =
        start_front(FrontConfig { emu_keyspace: fresh_keyspace("emu_first"), shards: 4, ..FrontConfig::default() });
    let session = Arc::new(session(&front).await);
    let ks = keyspace(&session, "emu_cdc_first").await;
    for round in 0..2 {
        session.query_unpaged(format!("DROP TABLE IF EXISTS {ks}.orders"), &[]).await.expect("drop");
        session
            .query_unpaged(
                format!(
                    "CREATE TABLE {ks}.orders (customer int, id int, qty int, PRIMARY KEY (customer, id)) \
                     WITH cdc = {{'enabled': true}}"
                ),
                &[],
            )
            .await
            .expect("create");
        let insert = Arc::new(
            session
                .prepare(format!("INSERT INTO {ks}.orders (customer, id, qty) VALUES (?, ?, ?)"))
                .await
                .expect("prepare"),
        );
        let mut writers = tokio::task::JoinSet::new();
        for w in 0..WRITERS {
            let (session, insert) = (session.clone(), insert.clone());
            writers.spawn(async move {
                let (mut first, mut later) = (Duration::ZERO, Duration::ZERO);
                for i in 0..PER_WRITER {
                    let sent = Instant::now();
                    session.execute_unpaged(&insert, (w, i, 1 + i % 5)).await.expect("insert");
                    match i {
                        0 => first = sent.elapsed(),
                        _ => later = later.max(sent.elapsed()),
                    }
                }
                (first, later)
            });
        }
        let (mut firsts, mut later) = (Vec::new(), Duration::ZERO);
        while let Some(done) = writers.join_next().await {
            let (first, rest) = done.expect("writer");
            firsts.push(first.as_millis());
            later = later.max(rest);
        }
        firsts.sort();
        println!("round {round}: the first writes took {firsts:?} ms, the later ones at most {later:?}");
        // Within the safety interval, or (on a machine loaded enough to slow
        // every write) within three times the slowest later write: a first
        // write that loads the schema itself took 126-246 ms where later
        // ones took at most 30.
        let slowest = firsts.last().copied().unwrap_or_default();
        let bound = SAFETY.as_millis().max(3 * later.as_millis());
        assert!(
            slowest < bound,
            "round {round}: a first write took {slowest} ms (bound {bound} ms), its log row behind a {} ms safety \
             interval",
            SAFETY.as_millis()
        );
        let base = session
            .query_unpaged(format!("SELECT customer, id FROM {ks}.orders"), &[])
            .await
            .expect("base")
            .into_rows_result()
            .expect("rows")
            .rows::<(i32, i32)>()
            .expect("typed")
            .count();
        assert_eq!(base, (WRITERS * PER_WRITER) as usize, "round {round}: base rows");
        let log = session
            .query_unpaged(format!("SELECT customer, id FROM {ks}.orders_scylla_cdc_log"), &[])
            .await
            .expect("log")
            .into_rows_result()
            .expect("rows");
        let mut keys: Vec<(i32, i32)> = log.rows::<(i32, i32)>().expect("typed").map(|r| r.expect("row")).collect();
        keys.sort();
        let missing: Vec<(i32, i32)> = (0..WRITERS)
            .flat_map(|w| (0..PER_WRITER).map(move |i| (w, i)))
            .filter(|k| keys.binary_search(k).is_err())
            .collect();
        assert!(missing.is_empty(), "round {round}: no log row for {missing:?} ({} log rows)", keys.len());
    }
}
