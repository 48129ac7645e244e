//! The replicator end to end, through the Scylla emulation front on a real
//! Cassandra: a mixed workload on a CDC-enabled table (inserts, updates
//! with nulls, map/set additions, removals and overwrites, collection
//! deletes, row, partition and range deletes, TTLs) is replayed from the
//! log into a table without CDC; both tables then hold the same rows, with
//! the same write times.

use std::time::{Duration, SystemTime};

use shardwise::protocol::types::CqlValue;
use shardwise::{Session, Statement};
use shardwise_cdc::replicator::Replicator;
use shardwise_cdc::CdcReaderBuilder;
use shardwise_emu::FrontHandle;

use crate::common::{self, run};

async fn setup(tag: &str) -> (FrontHandle, Session, String) {
    let (front, session, ks) = common::front_and_keyspace(tag).await;
    let columns = "(pk int, ck int, v1 int, v2 text, m map<int,text>, s set<int>, PRIMARY KEY (pk, ck))";
    run(&session, &format!("CREATE TABLE {ks}.src {columns} WITH cdc = {{'enabled': true}}")).await;
    run(&session, &format!("CREATE TABLE {ks}.dst {columns}")).await;
    (front, session, ks)
}

/// The rows of `table` with the write times of the atomic columns, sorted.
async fn dump(session: &Session, ks: &str, table: &str) -> Vec<String> {
    let text = format!("SELECT pk, ck, v1, v2, m, s, writetime(v1), writetime(v2) FROM {ks}.{table}");
    let result = session.execute(&Statement::new(text), ()).await.expect("select");
    let mut rows: Vec<String> =
        result.rows::<Vec<Option<CqlValue>>>().expect("rows").map(|r| format!("{:?}", r.expect("row"))).collect();
    rows.sort();
    rows
}

async fn workload(session: &Session, ks: &str) {
    let t = format!("{ks}.src");
    // Plain inserts over several partitions.
    for pk in 0..6 {
        for ck in 0..8 {
            run(
                session,
                &format!(
                    "INSERT INTO {t} (pk, ck, v1, v2, m, s) VALUES ({pk}, {ck}, {}, 'v{pk}_{ck}', {{1: 'a', 2: 'b'}}, {{1, 2, 3}})",
                    pk * 100 + ck
                ),
            )
            .await;
        }
    }
    let statements = [
        // Inserts naming only some columns; an insert with a null.
        format!("INSERT INTO {t} (pk, ck, v1) VALUES (7, 0, 70)"),
        format!("INSERT INTO {t} (pk, ck, v1, v2) VALUES (7, 1, 71, null)"),
        // Updates, with nulls.
        format!("UPDATE {t} SET v1 = 1000 WHERE pk = 0 AND ck = 0"),
        format!("UPDATE {t} SET v2 = null WHERE pk = 0 AND ck = 1"),
        format!("UPDATE {t} SET v1 = null, v2 = 'x' WHERE pk = 0 AND ck = 2"),
        format!("UPDATE {t} SET v1 = 5 WHERE pk = 8 AND ck = 8"),
        // Maps: add, remove, overwrite, element delete, collection delete.
        format!("UPDATE {t} SET m = m + {{3: 'c', 4: 'd'}} WHERE pk = 1 AND ck = 0"),
        format!("UPDATE {t} SET m = m - {{1}} WHERE pk = 1 AND ck = 1"),
        format!("UPDATE {t} SET m = {{9: 'z'}} WHERE pk = 1 AND ck = 2"),
        format!("DELETE m[2] FROM {t} WHERE pk = 1 AND ck = 3"),
        format!("DELETE m FROM {t} WHERE pk = 1 AND ck = 4"),
        format!("UPDATE {t} SET m = null WHERE pk = 1 AND ck = 5"),
        format!("UPDATE {t} SET m[7] = 'seven' WHERE pk = 1 AND ck = 6"),
        // Sets: add, remove, overwrite, delete.
        format!("UPDATE {t} SET s = s + {{10, 11}} WHERE pk = 2 AND ck = 0"),
        format!("UPDATE {t} SET s = s - {{2}} WHERE pk = 2 AND ck = 1"),
        format!("UPDATE {t} SET s = {{42}} WHERE pk = 2 AND ck = 2"),
        format!("DELETE s FROM {t} WHERE pk = 2 AND ck = 3"),
        format!("UPDATE {t} SET s = {{}} WHERE pk = 2 AND ck = 4"),
        format!("UPDATE {t} SET s = s + {{5}}, m = m - {{2}}, v1 = 9 WHERE pk = 2 AND ck = 5"),
        // Row deletes, a column delete.
        format!("DELETE FROM {t} WHERE pk = 3 AND ck = 0"),
        format!("DELETE FROM {t} WHERE pk = 3 AND ck = 7"),
        format!("DELETE v1, v2 FROM {t} WHERE pk = 3 AND ck = 1"),
        // Partition delete, then a write into it again.
        format!("DELETE FROM {t} WHERE pk = 4"),
        format!("INSERT INTO {t} (pk, ck, v1) VALUES (4, 3, 43)"),
        // Range deletes: closed, half-open, open-ended.
        format!("DELETE FROM {t} WHERE pk = 5 AND ck >= 2 AND ck <= 3"),
        format!("DELETE FROM {t} WHERE pk = 5 AND ck > 4 AND ck < 6"),
        format!("DELETE FROM {t} WHERE pk = 5 AND ck > 6"),
        format!("DELETE FROM {t} WHERE pk = 0 AND ck < 1"),
        // TTLs.
        format!("INSERT INTO {t} (pk, ck, v1, v2) VALUES (6, 0, 60, 'ttl') USING TTL 3600"),
        format!("UPDATE {t} USING TTL 3600 SET v1 = 61, s = s + {{99}} WHERE pk = 6 AND ck = 1"),
        format!("INSERT INTO {t} (pk, ck, v1, m) VALUES (6, 2, 62, {{5: 'e'}}) USING TTL 3600"),
        // Overwrites of earlier writes.
        format!("INSERT INTO {t} (pk, ck, v1, v2, m) VALUES (0, 3, 3, 'again', {{8: 'h'}})"),
        format!("UPDATE {t} SET v2 = 'last' WHERE pk = 0 AND ck = 3"),
    ];
    for s in &statements {
        run(session, s).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replica_equals_source() {
    let (front, session, ks) = setup("cdc_repl").await;
    let start = SystemTime::now() - Duration::from_secs(1);
    workload(&session, &ks).await;
    let end = SystemTime::now() + Duration::from_millis(500);
    assert_eq!(front.stats().cdc_log_failures, 0);

    let replicator = Replicator::new(&session, &ks, "src", session.clone(), &ks, "dst").await.expect("replicator");
    let reader = CdcReaderBuilder::new(session.clone(), &ks, "src")
        .start(start)
        .end(end)
        .window_size(Duration::from_secs(2))
        .safety_interval(Duration::from_millis(500))
        .sleep_interval(Duration::from_millis(100))
        .generation_poll_interval(Duration::from_millis(200))
        .workers(2)
        .build(replicator.clone())
        .await
        .expect("reader");
    tokio::time::timeout(Duration::from_secs(120), reader.join()).await.expect("reader finishes").expect("reader ok");
    assert!(replicator.rows() > 48, "rows consumed: {}", replicator.rows());

    let source = dump(&session, &ks, "src").await;
    let replica = dump(&session, &ks, "dst").await;
    assert!(!source.is_empty());
    eprintln!("{} rows consumed, {} writes, {} rows compared", replicator.rows(), replicator.writes(), source.len());
    for (a, b) in source.iter().zip(&replica) {
        assert_eq!(a, b);
    }
    assert_eq!(source.len(), replica.len());
}
