//! Conditional writes answered as Scylla answers them: `[applied]` and the
//! columns of the table (or of the conditions), holding the row as it was
//! before the write, applied or not; and a PREPARED whose result metadata
//! announces those columns (the transcript `lwt_answers_test` covers the
//! unprepared shapes).

use shardwise_emu::{FrontConfig, FrontHandle};
use testkit::fresh_keyspace;

use crate::support::{self, session, start_front};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn prepared_conditional_writes_announce_and_answer_scylla_columns() {
    let front = start_front(FrontConfig::default());
    let session = session(&front).await;
    let ks = fresh_keyspace("emu_lwt");
    for ddl in [
        testkit::create_keyspace(&ks, 1),
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
        testkit::create_keyspace(&ks, 1),
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

/// The table of upstream `test/cqlpy/test_lwt.py`'s `table1`, in a fresh
/// keyspace, created through `front`.
async fn table1(front: &FrontHandle, prefix: &str) -> (String, scylla::client::session::Session) {
    let s = session(front).await;
    let ks = fresh_keyspace(prefix);
    for ddl in [
        testkit::create_keyspace(&ks, 1),
        format!("CREATE TABLE {ks}.t (p int, c int, r int, s int static, PRIMARY KEY (p, c))"),
    ] {
        s.query_unpaged(ddl, &[]).await.expect("ddl");
    }
    (format!("{ks}.t"), s)
}

async fn r_of(s: &scylla::client::session::Session, table: &str, p: i32, c: i32) -> Option<i32> {
    let rows = s
        .query_unpaged(format!("SELECT r FROM {table} WHERE p = {p} AND c = {c}"), &[])
        .await
        .expect("select")
        .into_rows_result()
        .expect("rows");
    let (r,): (Option<i32>,) = rows.first_row().expect("one row");
    r
}

fn applied(result: scylla::response::query_result::QueryResult) -> bool {
    let rows = result.into_rows_result().expect("rows");
    assert_eq!(rows.rows_num(), 1, "one row per statement");
    // `[applied]` first; the rest is the old row (IF EXISTS: p, c, s, r).
    let spec = rows.column_specs();
    assert_eq!(spec.get_by_index(0).map(|s| s.name()), Some("[applied]"));
    let row = rows.first_row::<scylla::value::Row>().expect("row");
    matches!(row.columns.first(), Some(Some(scylla::value::CqlValue::Boolean(true))))
}

/// Upstream `test_lwt_counter_syntax_prepared`,
/// `test_lwt_counter_syntax_float_on_integer` and the prepared part of
/// `test_lwt_counter_syntax_overflow` (test/cqlpy/test_lwt.py), through the
/// official driver: Cassandra refuses to prepare `r = r + ?` on an int
/// column, ScyllaDB prepares it and binds an int.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn prepared_increments_as_scylla_prepares_them() {
    let front = start_front(FrontConfig::default());
    let (table, s) = table1(&front, "emu_lwt_prep").await;
    let p = 17;
    s.query_unpaged(format!("INSERT INTO {table} (p, c, r) VALUES ({p}, 1, 10)"), &[]).await.expect("insert");
    let inc_text = format!("UPDATE {table} SET r = r + ? WHERE p = ? AND c = ? IF EXISTS");
    let inc = s.prepare(inc_text.clone()).await.expect("prepare r = r + ?");
    let dec =
        s.prepare(format!("UPDATE {table} SET r = r - ? WHERE p = ? AND c = ? IF EXISTS")).await.expect("prepare");
    // The markers as ScyllaDB names and types them: the increment binds r's type.
    let markers: Vec<(String, String)> =
        inc.get_variable_col_specs().iter().map(|c| (c.name().to_string(), format!("{:?}", c.typ()))).collect();
    let names: Vec<&str> = markers.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(names, ["r", "p", "c"]);
    assert!(markers.iter().all(|(_, t)| t.contains("Int")), "{markers:?}");
    assert_eq!(inc.get_variable_pk_indexes().iter().map(|i| i.index).collect::<Vec<_>>(), [1]);
    let result: Vec<String> =
        inc.get_current_result_set_col_specs().get().iter().map(|c| c.name().to_string()).collect();
    assert_eq!(result, ["[applied]", "p", "c", "s", "r"]);
    assert!(inc.is_confirmed_lwt(), "the LWT mark of SCYLLA_LWT_ADD_METADATA_MARK");

    assert!(applied(s.execute_unpaged(&inc, (5, p, 1)).await.expect("inc")));
    assert_eq!(r_of(&s, &table, p, 1).await, Some(15));
    assert!(applied(s.execute_unpaged(&dec, (3, p, 1)).await.expect("dec")));
    assert_eq!(r_of(&s, &table, p, 1).await, Some(12));
    assert!(applied(s.execute_unpaged(&inc, (5, p, 1)).await.expect("inc again")));
    assert_eq!(r_of(&s, &table, p, 1).await, Some(17));
    // c = 999 does not exist: not applied, r unchanged.
    assert!(!applied(s.execute_unpaged(&dec, (100, p, 999)).await.expect("dec missing")));
    assert_eq!(r_of(&s, &table, p, 1).await, Some(17));

    // A float constant is refused at PREPARE; a bound float is caught by
    // the driver, which knows from PREPARED that r is an int.
    let err = s
        .prepare(format!("UPDATE {table} SET r = r + 3.5 WHERE p = ? AND c = ? IF EXISTS"))
        .await
        .expect_err("3.5 is not an int");
    assert!(err.to_string().contains("of type int"), "{err}");
    assert!(s.execute_unpaged(&inc, (3.5f64, p, 1)).await.is_err(), "the driver refuses a double for an int");

    // -1 - MIN is MAX (no overflow); MAX + 1 overflows.
    s.query_unpaged(format!("UPDATE {table} SET r = -1 WHERE p = {p} AND c = 1"), &[]).await.expect("set");
    let sub =
        s.prepare(format!("UPDATE {table} SET r = r - ? WHERE p = ? AND c = 1 IF r = -1")).await.expect("prepare");
    assert!(applied(s.execute_unpaged(&sub, (i32::MIN, p)).await.expect("-1 - MIN")));
    assert_eq!(r_of(&s, &table, p, 1).await, Some(i32::MAX));
    let err = s.execute_unpaged(&inc, (1, p, 1)).await.expect_err("MAX + 1");
    assert!(err.to_string().contains("overflow"), "{err}");

    // Another front never saw the id: it answers UNPREPARED, the driver
    // prepares again there and must get the same id (MD5 of keyspace and
    // text, as ScyllaDB computes it), or it fails the request.
    s.query_unpaged(format!("UPDATE {table} SET r = 0 WHERE p = {p} AND c = 1"), &[]).await.expect("reset");
    let other = start_front(FrontConfig::default());
    let s2 = session(&other).await;
    assert!(applied(s2.execute_unpaged(&inc, (1, p, 1)).await.expect("re-prepared on the other front")));
    assert_eq!(r_of(&s, &table, p, 1).await, Some(1));
    let again = s2.prepare(inc_text).await.expect("prepare again");
    assert_eq!(again.get_id(), inc.get_id(), "the same id for the same text and keyspace");
}

/// Upstream `test_lwt_not_in` (test/cqlpy/test_lwt.py), prepared: Cassandra's
/// grammar has no `NOT IN` in conditions; ScyllaDB prepares `IF r NOT IN ?`
/// (one marker, `in(r)` of type `list<int>`) and `IF r NOT IN (?, ?, ?)`,
/// and treats null as an ordinary value. Through this repository's driver.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn prepared_not_in_through_shardwise() {
    let front = start_front(FrontConfig::default());
    let (table, setup) = table1(&front, "emu_lwt_notin").await;
    let s = shardwise::SessionBuilder::new().known_node_addr(front.addr()).build().await.expect("shardwise session");
    let p = 3;
    setup.query_unpaged(format!("INSERT INTO {table} (p, c, r) VALUES ({p}, 1, 1)"), &[]).await.expect("insert");
    let list = s
        .prepare(format!("UPDATE {table} SET r = ? WHERE p = ? AND c = ? IF r NOT IN ?"))
        .await
        .expect("prepare NOT IN ?");
    let specs: Vec<(String, String)> = list.bind_specs().iter().map(|c| (c.name.clone(), c.typ.to_string())).collect();
    let want = [("r", "int"), ("p", "int"), ("c", "int"), ("in(r)", "list<int>")];
    assert_eq!(specs, want.map(|(n, t)| (n.to_string(), t.to_string())));
    assert_eq!(list.pk_indexes(), [1]);
    assert!(list.is_lwt());
    let run = |values: (i32, i32, i32, Vec<i32>)| {
        let (s, list) = (&s, &list);
        async move {
            let result = s.execute(list, &values).await.expect("execute");
            let rows: Vec<(bool, Option<i32>)> = result.rows().expect("rows").map(|r| r.expect("row")).collect();
            rows
        }
    };
    // The answer: `[applied]` and the tested column as it was.
    assert_eq!(run((2, p, 1, vec![1, 2])).await, [(false, Some(1))]);
    assert_eq!(run((2, p, 1, vec![2, 1])).await, [(false, Some(1))], "the whole list is looked at");
    assert_eq!(run((2, p, 1, vec![7, 8])).await, [(true, Some(1))]);
    assert_eq!(r_of(&setup, &table, p, 1).await, Some(2));

    let three = s
        .prepare(format!("UPDATE {table} SET r = ? WHERE p = ? AND c = ? IF r NOT IN (?, ?, ?)"))
        .await
        .expect("prepare NOT IN (?, ?, ?)");
    let names: Vec<&str> = three.bind_specs().iter().map(|c| c.name.as_str()).collect();
    assert_eq!(names, ["r", "p", "c", "r", "r", "r"]);
    let values = (None::<i32>, p, 1, None::<i32>, 7, 8);
    let once = s.execute(&three, &values).await.expect("execute");
    let got: Vec<(bool, Option<i32>)> = once.rows().expect("rows").map(|r| r.expect("row")).collect();
    assert_eq!(got, [(true, Some(2))], "2 is not in (null, 7, 8)");
    assert_eq!(r_of(&setup, &table, p, 1).await, None);
    let twice = s.execute(&three, &values).await.expect("execute");
    let got: Vec<(bool, Option<i32>)> = twice.rows().expect("rows").map(|r| r.expect("row")).collect();
    assert_eq!(got, [(false, None)], "null is in (null, 7, 8)");

    // The unprepared form with a bound list takes the same path.
    let unprepared = shardwise::Statement::new(format!("UPDATE {table} SET r = ? WHERE p = ? AND c = ? IF r NOT IN ?"));
    let result = s.execute(&unprepared, &(5, p, 1, vec![1, 2])).await.expect("unprepared NOT IN ?");
    let got: Vec<(bool, Option<i32>)> = result.rows().expect("rows").map(|r| r.expect("row")).collect();
    assert_eq!(got, [(true, None)]);
    assert_eq!(r_of(&setup, &table, p, 1).await, Some(5));
}

/// The same through the official driver, which also checks the id it gets
/// when it prepares again, and a bound value of the wrong size sent raw:
/// ScyllaDB refuses it when it binds it (`Exception while binding column`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn prepared_not_in_through_the_official_driver_and_raw() {
    use shardwise_protocol::codec::RawValue;
    use shardwise_protocol::consistency::Consistency;
    use shardwise_protocol::request::{Execute, Prepare, QueryParameters, Startup};
    use shardwise_protocol::response::{ResponseMessage, ResultMessage};
    use shardwise_protocol::types::ser::RawValues;

    let front = start_front(FrontConfig::default());
    let (table, s) = table1(&front, "emu_lwt_notin2").await;
    let p = 4;
    s.query_unpaged(format!("INSERT INTO {table} (p, c, r) VALUES ({p}, 1, 1)"), &[]).await.expect("insert");
    let text = format!("UPDATE {table} SET r = ? WHERE p = ? AND c = ? IF r NOT IN ?");
    let list = s.prepare(text.clone()).await.expect("prepare NOT IN ?");
    let names: Vec<&str> = list.get_variable_col_specs().iter().map(|c| c.name()).collect();
    assert_eq!(names, ["r", "p", "c", "in(r)"]);
    let rows =
        s.execute_unpaged(&list, (2, p, 1, vec![1, 2])).await.expect("execute").into_rows_result().expect("rows");
    let got: (bool, Option<i32>) = rows.first_row().expect("row");
    assert_eq!(got, (false, Some(1)));
    let rows =
        s.execute_unpaged(&list, (2, p, 1, vec![7, 8])).await.expect("execute").into_rows_result().expect("rows");
    let got: (bool, Option<i32>) = rows.first_row().expect("row");
    assert_eq!(got, (true, Some(1)));
    assert_eq!(r_of(&s, &table, p, 1).await, Some(2));

    let mut raw = support::raw(front.addr());
    assert!(matches!(
        raw.request(&Startup { options: vec![("CQL_VERSION", "3.0.0")] }).expect("answer"),
        ResponseMessage::Ready
    ));
    let ResponseMessage::Result(ResultMessage::Prepared(prepared)) =
        raw.request(&Prepare { query: &text, keyspace: None }).expect("answer")
    else {
        panic!("PREPARED expected")
    };
    assert_eq!(&prepared.id[..], list.get_id().as_ref(), "one id per text and keyspace");
    let (r, key, ck) = (2.5f64.to_be_bytes(), p.to_be_bytes(), 1i32.to_be_bytes());
    let mut in_list = 1i32.to_be_bytes().to_vec();
    in_list.extend(4i32.to_be_bytes());
    in_list.extend(9i32.to_be_bytes());
    let values = RawValues {
        names: None,
        values: vec![RawValue::Value(&r), RawValue::Value(&key), RawValue::Value(&ck), RawValue::Value(&in_list)],
    };
    let execute =
        Execute { id: &prepared.id, result_metadata_id: None, params: QueryParameters::new(Consistency::One, values) };
    let ResponseMessage::Error(e) = raw.request(&execute).expect("answer") else { panic!("an error expected") };
    assert_eq!(e.code, 0x2200);
    assert!(e.message.starts_with("Exception while binding column r: marshaling error:"), "{}", e.message);
    assert_eq!(r_of(&s, &table, p, 1).await, Some(2), "nothing written");
}
