//! Conditional writes answered as Scylla answers them: `[applied]` and the
//! columns of the table (or of the conditions), holding the row as it was
//! before the write, applied or not; and a PREPARED whose result metadata
//! announces those columns (the transcript `lwt_answers_test` covers the
//! unprepared shapes).

use shardwise_emu::FrontConfig;
use testkit::fresh_keyspace;

use crate::support::{session, start_front};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn prepared_conditional_writes_announce_and_answer_scylla_columns() {
    let front = start_front(FrontConfig::default());
    let session = session(&front).await;
    let ks = fresh_keyspace("emu_lwt");
    for ddl in [
        format!("CREATE KEYSPACE {ks} WITH replication = {{'class': 'SimpleStrategy', 'replication_factor': 1}}"),
        format!("CREATE TABLE {ks}.t (pk int, ck int, v int, PRIMARY KEY (pk, ck)) WITH cdc = {{'enabled': true}}"),
        format!("CREATE TABLE {ks}.plain (pk int PRIMARY KEY, v text)"),
    ] {
        session.query_unpaged(ddl, &[]).await.expect("ddl");
    }

    let insert = session
        .prepare(format!("INSERT INTO {ks}.t (pk, ck, v) VALUES (?, ?, ?) IF NOT EXISTS"))
        .await
        .expect("prepare");
    let names: Vec<String> =
        insert.get_current_result_set_col_specs().get().iter().map(|s| s.name().to_string()).collect();
    assert_eq!(names, ["[applied]", "pk", "ck", "v"], "PREPARED result metadata");
    type Row = (bool, Option<i32>, Option<i32>, Option<i32>);
    let run = |v: i32| {
        let (session, insert) = (&session, &insert);
        async move {
            let rows =
                session.execute_unpaged(insert, (1, 2, v)).await.expect("execute").into_rows_result().expect("rows");
            rows.rows::<Row>().expect("typed").map(|r| r.expect("row")).collect::<Vec<Row>>()
        }
    };
    assert_eq!(run(10).await, [(true, None, None, None)], "applied: the row did not exist");
    assert_eq!(run(20).await, [(false, Some(1), Some(2), Some(10))], "not applied: the existing row");

    let update = session.prepare(format!("UPDATE {ks}.plain SET v = ? WHERE pk = ? IF v = ?")).await.expect("prepare");
    let names: Vec<String> =
        update.get_current_result_set_col_specs().get().iter().map(|s| s.name().to_string()).collect();
    assert_eq!(names, ["[applied]", "v"]);
    session.query_unpaged(format!("INSERT INTO {ks}.plain (pk, v) VALUES (1, 'a')"), &[]).await.expect("insert");
    let rows =
        session.execute_unpaged(&update, ("b", 1, "a")).await.expect("execute").into_rows_result().expect("rows");
    let got: Vec<(bool, Option<String>)> = rows.rows().expect("typed").map(|r| r.expect("row")).collect();
    assert_eq!(got, [(true, Some("a".to_string()))], "applied: the old value");
    assert_eq!(front.stats().lwt_unshaped, 0);
}

/// Scylla's `x = x + v` in a conditional update is one Paxos round; the
/// front runs it as a serial read and a CAS on the value read, retrying a
/// lost race. Concurrent increments through the front must never lose one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_lwt_increments_never_lose_an_update() {
    let front = start_front(FrontConfig::default());
    let ks = fresh_keyspace("emu_lwt_inc");
    let setup = session(&front).await;
    for ddl in [
        format!("CREATE KEYSPACE {ks} WITH replication = {{'class': 'SimpleStrategy', 'replication_factor': 1}}"),
        format!("CREATE TABLE {ks}.t (pk int PRIMARY KEY, x bigint, y int)"),
        format!("INSERT INTO {ks}.t (pk, x, y) VALUES (1, 0, 0)"),
    ] {
        setup.query_unpaged(ddl, &[]).await.expect("setup");
    }
    const WORKERS: usize = 4;
    const EACH: usize = 25;
    let mut tasks = Vec::new();
    for w in 0..WORKERS {
        let s = session(&front).await;
        let ks = ks.clone();
        tasks.push(tokio::spawn(async move {
            let mut applied = 0;
            for i in 0..EACH {
                // Alternate the two kinds of condition.
                let ok = if (w + i) % 2 == 0 {
                    let q = format!("UPDATE {ks}.t SET x = x + 1 WHERE pk = 1 IF EXISTS");
                    let rows = s.query_unpaged(q, &[]).await.expect("increment").into_rows_result().expect("rows");
                    // `[applied]` and the old row: pk, x, y.
                    let (ok, _, _, _): (bool, Option<i32>, Option<i64>, Option<i32>) = rows.first_row().expect("typed");
                    ok
                } else {
                    let q = format!("UPDATE {ks}.t SET x = x + 1 WHERE pk = 1 IF y = 0");
                    let rows = s.query_unpaged(q, &[]).await.expect("increment").into_rows_result().expect("rows");
                    let (ok, _): (bool, Option<i32>) = rows.first_row().expect("typed");
                    ok
                };
                applied += usize::from(ok);
            }
            applied
        }));
    }
    let mut applied = 0;
    for t in tasks {
        applied += t.await.expect("task");
    }
    assert_eq!(applied, WORKERS * EACH, "every increment's condition held");
    let rows = setup
        .query_unpaged(format!("SELECT x FROM {ks}.t WHERE pk = 1"), &[])
        .await
        .expect("select")
        .into_rows_result()
        .expect("rows");
    let (x,): (i64,) = rows.first_row().expect("typed");
    assert_eq!(x, (WORKERS * EACH) as i64, "no increment lost");
}
