//! No write to a CDC table is applied without its log rows or an error to
//! the client, on every path a write takes through the front: unprepared
//! QUERY after `USE` (INSERT, UPDATE, DELETE, BATCH), an unqualified
//! `ALTER TABLE ... WITH cdc` after `USE`, a DML text the front's parser
//! cannot read, an EXECUTE of an id the front never saw prepared, a
//! prepared `USE`.

use scylla::client::session::Session;
use scylla::client::session_builder::SessionBuilder;
use scylla::statement::batch::{Batch, BatchType};
use shardwise_emu::{Delta, FrontConfig};
use testkit::fresh_keyspace;

use crate::support::{self, session, start_front};

async fn exec(session: &Session, q: &str) -> Result<(), String> {
    session.query_unpaged(q, &[]).await.map(|_| ()).map_err(|e| e.to_string())
}

/// `(operation, pk, v)` of every log row, in log order per partition,
/// partitions by pk.
async fn log_rows(session: &Session, ks: &str, table: &str) -> Vec<(i8, i32, Option<i32>)> {
    let rows = session
        .query_unpaged(format!("SELECT \"cdc$operation\", pk, v FROM {ks}.{table}_scylla_cdc_log"), &[])
        .await
        .expect("log")
        .into_rows_result()
        .expect("rows");
    let mut v: Vec<(i8, i32, Option<i32>)> =
        rows.rows::<(i8, i32, Option<i32>)>().expect("typed").map(|r| r.expect("row")).collect();
    v.sort_by_key(|r| r.1);
    v
}

async fn setup(session: &Session, ks: &str) {
    exec(session, &testkit::create_keyspace(ks, 1)).await.expect("keyspace");
    exec(session, &format!("CREATE TABLE {ks}.t (pk int PRIMARY KEY, v int) WITH cdc = {{'enabled': true}}"))
        .await
        .expect("table");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unprepared_writes_after_use_are_logged() {
    let front = start_front(FrontConfig::default());
    let session = session(&front).await;
    let ks = fresh_keyspace("emu_guard_use");
    setup(&session, &ks).await;
    exec(&session, &format!("USE {ks}")).await.expect("USE");

    exec(&session, "INSERT INTO t (pk, v) VALUES (1, 10)").await.expect("insert");
    exec(&session, "UPDATE t SET v = 20 WHERE pk = 2").await.expect("update");
    exec(&session, "DELETE FROM t WHERE pk = 3").await.expect("delete");
    let mut batch = Batch::new(BatchType::Unlogged);
    batch.append_statement("INSERT INTO t (pk, v) VALUES (4, 40)");
    batch.append_statement("UPDATE t SET v = 50 WHERE pk = 5");
    session.batch(&batch, ((), ())).await.expect("batch");
    exec(&session, "BEGIN BATCH INSERT INTO t (pk, v) VALUES (6, 60); APPLY BATCH").await.expect("batch text");

    assert_eq!(
        log_rows(&session, &ks, "t").await,
        vec![(2, 1, Some(10)), (1, 2, Some(20)), (4, 3, None), (2, 4, Some(40)), (1, 5, Some(50)), (2, 6, Some(60))]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unqualified_alter_after_use_changes_the_options() {
    let front = start_front(FrontConfig::default());
    let session = session(&front).await;
    let ks = fresh_keyspace("emu_guard_alter");
    setup(&session, &ks).await;
    exec(&session, &format!("USE {ks}")).await.expect("USE");
    exec(&session, "ALTER TABLE t WITH cdc = {'enabled': true, 'delta': 'keys'}").await.expect("alter delta");
    assert_eq!(front.cdc_options(&ks, "t").map(|o| o.delta), Some(Delta::Keys));
    exec(&session, "INSERT INTO t (pk, v) VALUES (1, 10)").await.expect("insert");
    assert_eq!(log_rows(&session, &ks, "t").await, vec![(2, 1, None)]);
    exec(&session, "ALTER TABLE t WITH cdc = {'enabled': false}").await.expect("disable");
    assert_eq!(front.cdc_options(&ks, "t").map(|o| o.enabled), Some(false));
    exec(&session, "INSERT INTO t (pk, v) VALUES (2, 20)").await.expect("insert");
    assert_eq!(log_rows(&session, &ks, "t").await, vec![(2, 1, None)]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_write_the_front_cannot_read_is_refused_not_applied() {
    let front = start_front(FrontConfig::default());
    let session = session(&front).await;
    let ks = fresh_keyspace("emu_guard_unread");
    setup(&session, &ks).await;
    let before = front.stats().cdc_refused;
    // INSERT JSON: valid CQL the front's DML parser does not represent.
    let err = exec(&session, &format!("INSERT INTO {ks}.t JSON '{{\"pk\": 1, \"v\": 10}}'")).await.unwrap_err();
    assert!(err.contains("cannot log this write"), "{err}");
    assert_eq!(front.stats().cdc_refused, before + 1);
    let rows = session
        .query_unpaged(format!("SELECT pk FROM {ks}.t"), &[])
        .await
        .expect("select")
        .into_rows_result()
        .expect("rows");
    assert_eq!(rows.rows_num(), 0, "the refused write was applied");
    // The same on a table without CDC goes through.
    exec(&session, &format!("CREATE TABLE {ks}.plain (pk int PRIMARY KEY, v int)")).await.expect("plain");
    exec(&session, &format!("INSERT INTO {ks}.plain JSON '{{\"pk\": 1, \"v\": 10}}'")).await.expect("json");
    // Prepared, the same verdict.
    let p = session.prepare(format!("INSERT INTO {ks}.t JSON ?")).await.expect("Cassandra prepares INSERT ... JSON ?");
    let e = session.execute_unpaged(&p, ("{\"pk\": 2, \"v\": 20}",)).await.unwrap_err().to_string();
    assert!(e.contains("cannot log this write"), "{e}");
    assert!(log_rows(&session, &ks, "t").await.is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn statements_prepared_behind_the_fronts_back_are_prepared_again() {
    let front = start_front(FrontConfig::default());
    let through = session(&front).await;
    let ks = fresh_keyspace("emu_guard_unprep");
    setup(&through, &ks).await;
    // Prepared directly on Cassandra: the front never saw the id.
    let direct =
        SessionBuilder::new().known_node_addr(testkit::shared_node().expect("node")).build().await.expect("direct");
    let p = direct.prepare(format!("INSERT INTO {ks}.t (pk, v) VALUES (?, ?)")).await.expect("prepare");
    through.execute_unpaged(&p, (7, 70)).await.expect("execute through the front");
    assert_eq!(log_rows(&through, &ks, "t").await, vec![(2, 7, Some(70))]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_prepared_use_sets_the_keyspace() {
    let front = start_front(FrontConfig::default());
    let session = session(&front).await;
    let ks = fresh_keyspace("emu_guard_puse");
    setup(&session, &ks).await;
    // One connection, so that USE and the write meet on it.
    let one = SessionBuilder::new()
        .known_node_addr(front.addr())
        .pool_size(scylla::client::PoolSize::PerHost(std::num::NonZeroUsize::MIN))
        .disallow_shard_aware_port(true)
        .build()
        .await
        .expect("session");
    let p = one.prepare(format!("USE {ks}")).await.expect("prepare USE");
    one.execute_unpaged(&p, ()).await.expect("USE");
    one.query_unpaged("INSERT INTO t (pk, v) VALUES (8, 80)", &[]).await.expect("insert");
    assert_eq!(log_rows(&session, &ks, "t").await, vec![(2, 8, Some(80))]);
}

/// A statement prepared while a `USE` is still on its way, with no bound
/// column to name its keyspace: the front cannot know which keyspace its
/// unqualified table is in. Here `t` is a plain table in the first keyspace
/// and a CDC table in the second; Cassandra prepares it against the second.
/// Executing it must be logged there or refused, never applied unlogged.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_statement_prepared_during_a_use_is_never_applied_unlogged() {
    use shardwise_protocol::consistency::Consistency;
    use shardwise_protocol::request::{Execute, Prepare, Query, QueryParameters, Startup};
    use shardwise_protocol::response::{ResponseMessage, ResultMessage};
    use shardwise_protocol::types::ser::RawValues;

    let front = start_front(FrontConfig::default());
    let session = session(&front).await;
    let (plain, logged) = (fresh_keyspace("emu_guard_plain"), fresh_keyspace("emu_guard_cdc"));
    setup(&session, &logged).await;
    exec(&session, &testkit::create_keyspace(&plain, 1)).await.expect("keyspace");
    exec(&session, &format!("CREATE TABLE {plain}.t (pk int PRIMARY KEY, v int)")).await.expect("table");

    let addr = front.addr();
    let (use_plain, use_logged) = (format!("USE {plain}"), format!("USE {logged}"));
    let verdict = tokio::task::spawn_blocking(move || {
        fn query(q: &str) -> Query<'_, RawValues<'_>> {
            Query { query: q, params: QueryParameters::new(Consistency::One, RawValues::default()) }
        }
        let mut raw = support::raw(addr);
        assert!(matches!(
            raw.request(&Startup { options: vec![("CQL_VERSION", "3.0.0")] }).expect("answer"),
            ResponseMessage::Ready
        ));
        assert!(matches!(raw.request(&query(&use_plain)).expect("answer"), ResponseMessage::Result(_)));
        // Pipelined: the PREPARE reaches the front before the USE is answered.
        raw.send(&query(&use_logged), 1).expect("send");
        raw.send(&Prepare { query: "INSERT INTO t (pk, v) VALUES (7, 70)", keyspace: None }, 2).expect("send");
        let mut answers = raw.answers(&[1, 2]).expect("answers");
        let Some(ResponseMessage::Result(ResultMessage::Prepared(prepared))) = answers.remove(&2) else {
            panic!("PREPARED expected")
        };
        let execute = Execute {
            id: &prepared.id,
            result_metadata_id: None,
            params: QueryParameters::new(Consistency::One, RawValues::default()),
        };
        raw.request(&execute).expect("answer")
    })
    .await
    .expect("raw client");
    let rows = log_rows(&session, &logged, "t").await;
    match verdict {
        ResponseMessage::Error(_) => assert!(rows.is_empty(), "refused, yet logged: {rows:?}"),
        other => {
            assert!(matches!(other, ResponseMessage::Result(ResultMessage::Void)), "{other:?}");
            assert_eq!(rows, vec![(2, 7, Some(70))], "applied to {logged}.t without its log row");
        }
    }
}

/// Claim `cdc-log-write-error`: a base write whose log write fails is
/// answered with an error, never acknowledged as if it were logged. The
/// log table is dropped behind the front's back (straight on Cassandra),
/// so the front's log write fails after the base write was applied.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_log_write_is_an_error_to_the_client() {
    let front = start_front(FrontConfig::default());
    let session = session(&front).await;
    let ks = fresh_keyspace("emu_log_fails");
    setup(&session, &ks).await;
    exec(&session, &format!("INSERT INTO {ks}.t (pk, v) VALUES (1, 1)")).await.expect("a logged write");
    assert_eq!(front.stats().cdc_log_failures, 0);

    let cassandra = SessionBuilder::new()
        .known_node_addr(testkit::shared_node().expect("Cassandra"))
        .build()
        .await
        .expect("a session straight to Cassandra");
    exec(&cassandra, &format!("DROP TABLE {ks}.t_scylla_cdc_log")).await.expect("the log dropped behind the front");

    let e = exec(&session, &format!("INSERT INTO {ks}.t (pk, v) VALUES (2, 2)")).await.expect_err("an error");
    assert!(e.contains("CDC log write failed"), "{e}");
    assert_eq!(front.stats().cdc_log_failures, 1, "the failure counted");
}
