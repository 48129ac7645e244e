//! Answers where Cassandra and ScyllaDB differ in what a client sees, the
//! front answering as ScyllaDB does (issue 55, front fidelity), each checked
//! against the Cassandra behind first, so that a pass proves the front did
//! the change: batches without warnings (scylladb#10196), and `INSERT JSON
//! ... IF NOT EXISTS` without its condition (scylladb#8682). Batches are
//! also refused at ScyllaDB's size threshold, which the testkit's Cassandra
//! is configured with (there is nothing for the front to change).

use scylla::client::session::Session;
use scylla::client::session_builder::SessionBuilder;
use scylla::statement::batch::{Batch, BatchType};
use shardwise_emu::FrontConfig;
use testkit::fresh_keyspace;

use crate::support::{session, start_front};

/// Rows of 1 KiB each, one partition apiece: more than Cassandra's 5 KiB
/// warning threshold and its 10 partitions for unlogged batches, less than
/// its 50 KiB failure threshold (Cassandra 5.0's defaults).
const ROWS: i32 = 12;

fn inserts(table: &str, from: i32) -> Vec<String> {
    let text = "x".repeat(1024);
    (from..from + ROWS).map(|k| format!("INSERT INTO {table} (k, t) VALUES ({k}, '{text}')")).collect()
}

fn batch_of(statements: &[String]) -> Batch {
    let mut batch = Batch::new(BatchType::Unlogged);
    for s in statements {
        batch.append_statement(s.as_str());
    }
    batch
}

fn text_batch(statements: &[String]) -> String {
    format!("BEGIN UNLOGGED BATCH\n{};\nAPPLY BATCH", statements.join(";\n"))
}

async fn count(session: &Session, table: &str) -> i64 {
    let rows = session.query_unpaged(format!("SELECT count(*) FROM {table}"), &[]).await.expect("count");
    rows.into_rows_result().expect("rows").single_row::<(i64,)>().expect("one row").0
}

/// A big unlogged batch over many partitions: Cassandra warns twice (size
/// and partitions); ScyllaDB sends no warning with any batch answer (its
/// size check only logs: `verify_batch_size` in
/// cql3/statements/batch_statement.cc; `test_warnings_are_returned_in_response`
/// in test/cqlpy/test_batch.py is an expected failure for scylladb#10196).
/// Through the front: none, as a BATCH request, as a `BEGIN BATCH` text
/// (unprepared and prepared), and on a CDC table (the front writes the log
/// around the batch).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn batches_come_back_without_cassandras_warnings() {
    let front = start_front(FrontConfig::default());
    let via_front = session(&front).await;
    let ks = fresh_keyspace("emu_batch_warn");
    for ddl in [
        testkit::create_keyspace(&ks, 1),
        format!("CREATE TABLE {ks}.t (k int PRIMARY KEY, t text)"),
        format!("CREATE TABLE {ks}.cdc_batches (k int PRIMARY KEY, t text) WITH cdc = {{'enabled': true}}"),
    ] {
        via_front.query_unpaged(ddl, &[]).await.expect("ddl");
    }
    let table = format!("{ks}.t");

    // The Cassandra behind warns.
    let direct = SessionBuilder::new()
        .known_node_addr(testkit::shared_node().expect("Cassandra"))
        .build()
        .await
        .expect("direct session");
    let statements = inserts(&table, 0);
    let values = vec![(); statements.len()];
    let answer = direct.batch(&batch_of(&statements), &values).await.expect("direct batch");
    let warnings: Vec<&str> = answer.warnings().collect();
    assert!(
        warnings.iter().any(|w| w.contains("exceeding specified threshold")),
        "Cassandra's own answer has its batch warnings: {warnings:?}"
    );

    // The front: none.
    let statements = inserts(&table, 100);
    let answer = via_front.batch(&batch_of(&statements), &values).await.expect("batch");
    assert_eq!(answer.warnings().count(), 0, "BATCH: {:?}", answer.warnings().collect::<Vec<_>>());
    let answer = via_front.query_unpaged(text_batch(&inserts(&table, 200)), &[]).await.expect("text batch");
    assert_eq!(answer.warnings().count(), 0, "BEGIN BATCH: {:?}", answer.warnings().collect::<Vec<_>>());
    let prepared = via_front.prepare(text_batch(&inserts(&table, 300))).await.expect("prepare");
    let answer = via_front.execute_unpaged(&prepared, ()).await.expect("prepared text batch");
    assert_eq!(answer.warnings().count(), 0, "prepared BEGIN BATCH: {:?}", answer.warnings().collect::<Vec<_>>());
    assert_eq!(count(&via_front, &table).await, i64::from(4 * ROWS), "every batch was applied");

    let cdc = format!("{ks}.cdc_batches");
    let statements = inserts(&cdc, 0);
    let answer = via_front.batch(&batch_of(&statements), &values).await.expect("CDC batch");
    assert_eq!(answer.warnings().count(), 0, "CDC BATCH: {:?}", answer.warnings().collect::<Vec<_>>());
    let answer = via_front.query_unpaged(text_batch(&inserts(&cdc, 100)), &[]).await.expect("CDC text batch");
    assert_eq!(answer.warnings().count(), 0, "CDC BEGIN BATCH: {:?}", answer.warnings().collect::<Vec<_>>());
    assert_eq!(count(&via_front, &cdc).await, i64::from(2 * ROWS));
    assert_eq!(count(&via_front, &format!("{cdc}_scylla_cdc_log")).await, i64::from(2 * ROWS), "logged");
}

/// ScyllaDB refuses a multi-partition batch over its
/// `batch_size_fail_threshold_in_kb` (1024 by default; `verify_batch_size`
/// in cql3/statements/batch_statement.cc: "Batch too large"), Cassandra over
/// 50 KiB by default: the testkit's Cassandra has ScyllaDB's threshold, so
/// that through the front a 300 KiB batch is applied and one over 1 MiB is
/// refused, in both words.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn batches_are_refused_at_scyllas_size_threshold() {
    let front = start_front(FrontConfig::default());
    let via_front = session(&front).await;
    let ks = fresh_keyspace("emu_batch_size");
    for ddl in [testkit::create_keyspace(&ks, 1), format!("CREATE TABLE {ks}.t (k int PRIMARY KEY, t text)")] {
        via_front.query_unpaged(ddl, &[]).await.expect("ddl");
    }
    let table = format!("{ks}.t");
    let rows = |from: i32, n: i32, kib: usize| -> Vec<String> {
        let text = "x".repeat(kib * 1024);
        (from..from + n).map(|k| format!("INSERT INTO {table} (k, t) VALUES ({k}, '{text}')")).collect()
    };
    let under = rows(0, 30, 10);
    via_front.batch(&batch_of(&under), &vec![(); under.len()]).await.expect("a 300 KiB batch, under 1 MiB");
    assert_eq!(count(&via_front, &table).await, 30, "applied");
    let over = rows(100, 40, 30);
    match via_front.batch(&batch_of(&over), &vec![(); over.len()]).await {
        Err(e) => assert!(e.to_string().contains("Batch too large"), "ScyllaDB's words: {e}"),
        Ok(_) => panic!("a 1.2 MiB batch over 40 partitions was applied"),
    }
    assert_eq!(count(&via_front, &table).await, 30, "nothing of the refused batch");
}

/// `INSERT INTO t JSON '...' IF NOT EXISTS` as ScyllaDB runs it (its known
/// bug scylladb#8682: `insert_json_statement::prepare_internal` in
/// cql3/statements/update_statement.cc leaves the flag unused, so the
/// statement has no condition): no `[applied]` row in the answer, and the
/// row written even when it exists. The reproducer upstream is
/// `test_lwt_insert_json_if_not_exists` in test/cqlpy/test_lwt.py (xfail,
/// #8682), on the same table; Cassandra passes it, so does a plain INSERT
/// through the front. ScyllaDB's PREPARED of it still lists `[applied]`
/// and the table's columns as its result columns.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn insert_json_if_not_exists_is_unconditional_as_on_scylla() {
    let front = start_front(FrontConfig::default());
    let via_front = session(&front).await;
    let ks = fresh_keyspace("emu_lwt_json");
    for ddl in [
        testkit::create_keyspace(&ks, 1),
        format!("CREATE TABLE {ks}.json_lwt (p int, c int, r int, s int STATIC, PRIMARY KEY (p, c))"),
    ] {
        via_front.query_unpaged(ddl, &[]).await.expect("ddl");
    }
    // A CDC table of the same name in another keyspace: the JSON inserts
    // below name theirs, and go through (the front cannot log a JSON insert
    // into the CDC table itself, and refuses that one).
    let other = fresh_keyspace("emu_lwt_json_cdc");
    for ddl in [
        testkit::create_keyspace(&other, 1),
        format!("CREATE TABLE {other}.json_lwt (p int PRIMARY KEY) WITH cdc = {{'enabled': true}}"),
    ] {
        via_front.query_unpaged(ddl, &[]).await.expect("ddl");
    }
    let refused = via_front.query_unpaged(format!(r#"INSERT INTO {other}.json_lwt JSON '{{"p": 1}}'"#), &[]).await;
    let message = format!("{:?}", refused.expect_err("a JSON insert into a CDC table"));
    assert!(message.contains("cannot log this write to CDC table json_lwt"), "{message}");
    let insert =
        |p: i32, r: i32| format!(r#"INSERT INTO {ks}.json_lwt JSON '{{"p": {p}, "c": 1, "r": {r}}}' IF NOT EXISTS"#);
    type Row = (i32, i32, Option<i32>, Option<i32>);
    let select = |p: i32| {
        let (session, ks) = (&via_front, &ks);
        async move {
            let rows = session.query_unpaged(format!("SELECT p, c, s, r FROM {ks}.json_lwt WHERE p = {p}"), &[]).await;
            rows.expect("select")
                .into_rows_result()
                .expect("rows")
                .rows::<Row>()
                .expect("typed")
                .map(|r| r.expect("row"))
                .collect::<Vec<Row>>()
        }
    };

    // Cassandra honours the condition.
    let direct = SessionBuilder::new()
        .known_node_addr(testkit::shared_node().expect("Cassandra"))
        .build()
        .await
        .expect("direct session");
    let answer = direct.query_unpaged(insert(1, 1), &[]).await.expect("direct insert");
    assert!(answer.is_rows(), "Cassandra answers [applied]");

    // ScyllaDB (the front): no rows, and the second insert is applied.
    let answer = via_front.query_unpaged(insert(2, 1), &[]).await.expect("insert");
    assert!(!answer.is_rows(), "no [applied] row");
    assert_eq!(select(2).await, [(2, 1, None, Some(1))]);
    let answer = via_front.query_unpaged(insert(2, 2), &[]).await.expect("insert again");
    assert!(!answer.is_rows(), "no [applied] row");
    assert_eq!(select(2).await, [(2, 1, None, Some(2))], "written although the row existed");

    // Prepared, with the JSON bound.
    let prepared = via_front
        .prepare(format!("INSERT INTO {ks}.json_lwt JSON ? IF NOT EXISTS"))
        .await
        .expect("prepare JSON insert");
    // Its PREPARED still announces the CAS columns (`prepare_conditions` builds them).
    let names: Vec<String> =
        prepared.get_current_result_set_col_specs().get().iter().map(|s| s.name().to_string()).collect();
    assert_eq!(names, ["[applied]", "p", "c", "s", "r"], "PREPARED result metadata");
    assert!(!prepared.is_confirmed_lwt(), "not an LWT to ScyllaDB");
    for r in [1, 3] {
        let answer =
            via_front.execute_unpaged(&prepared, (format!(r#"{{"p": 3, "c": 1, "r": {r}}}"#),)).await.expect("execute");
        assert!(!answer.is_rows(), "no [applied] row (prepared)");
    }
    assert_eq!(select(3).await, [(3, 1, None, Some(3))], "both executions written");

    // A plain conditional INSERT keeps its condition.
    let answer = via_front
        .query_unpaged(format!("INSERT INTO {ks}.json_lwt (p, c, r) VALUES (2, 1, 9) IF NOT EXISTS"), &[])
        .await
        .expect("plain LWT");
    type Cas = (bool, Option<i32>, Option<i32>, Option<i32>, Option<i32>);
    let cas = answer.into_rows_result().expect("rows").first_row::<Cas>().expect("[applied] row");
    assert_eq!(cas, (false, Some(2), Some(1), None, Some(2)), "not applied: the row exists");
    assert_eq!(select(2).await, [(2, 1, None, Some(2))]);

    // With USING TIMESTAMP ScyllaDB still refuses the condition's timestamp.
    let refused = via_front.query_unpaged(format!("{} USING TIMESTAMP 5", insert(4, 1)), &[]).await;
    let message = format!("{:?}", refused.expect_err("refused"));
    assert!(message.contains("Cannot provide custom timestamp for conditional updates"), "{message}");
}

/// The `create_statement` of the DESCRIBE row named `name`.
async fn described(session: &Session, query: &str, name: &str) -> String {
    let rows = session.query_unpaged(query, &[]).await.expect("describe").into_rows_result().expect("rows");
    type Desc = (Option<String>, String, String, Option<String>);
    let rows: Vec<Desc> = rows.rows::<Desc>().expect("typed").map(|r| r.expect("row")).collect();
    let row = rows.into_iter().find(|r| r.2 == name).unwrap_or_else(|| panic!("{query}: no row for {name}"));
    row.3.unwrap_or_default()
}

/// `tombstone_gc` as ScyllaDB takes it and shows it (the front keeps it:
/// `emu/src/tombstone_gc.rs`): any mode, printed with both keys by DESCRIBE
/// of the table (test/cqlpy/test_describe.py `test_desc_table_tombstone_gc`)
/// and of its CDC log (`test_log_table_tombstone_gc_present` and
/// `test_log_table_preserves_properties_after_reattachment` in
/// test/cqlpy/test_cdc.py, `test_describe_cdc_log_table_opts`); defaults
/// `repair` for a base table and `timeout` for a log; `repair` refused on a
/// log in ScyllaDB's words (alter_table_statement.cc).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tombstone_gc_is_kept_and_described_as_on_scylla() {
    let front = start_front(FrontConfig::default());
    let s = session(&front).await;
    let ks = fresh_keyspace("emu_tombstone_gc");
    s.query_unpaged(testkit::create_keyspace(&ks, 1), &[]).await.expect("keyspace");
    let given = "tombstone_gc = {'mode': 'timeout', 'propagation_delay_in_seconds': '73'}";
    s.query_unpaged(format!("CREATE TABLE {ks}.tgc_plain (p int PRIMARY KEY) WITH {given}"), &[])
        .await
        .expect("create a");
    let desc = described(&s, &format!("DESCRIBE TABLE {ks}.tgc_plain WITH INTERNALS"), "tgc_plain").await;
    assert!(desc.contains(given), "{desc}");
    // An ALTER of something else keeps it; a new one replaces it, the
    // delay left out back at 3600.
    s.query_unpaged(format!("ALTER TABLE {ks}.tgc_plain WITH comment = 'x'"), &[]).await.expect("alter comment");
    assert!(described(&s, &format!("DESC TABLE {ks}.tgc_plain"), "tgc_plain").await.contains(given));
    s.query_unpaged(format!("ALTER TABLE {ks}.tgc_plain WITH tombstone_gc = {{'mode': 'disabled'}}"), &[])
        .await
        .expect("alter tombstone_gc alone");
    let desc = described(&s, &format!("DESC TABLE {ks}.tgc_plain"), "tgc_plain").await;
    assert!(desc.contains("tombstone_gc = {'mode': 'disabled', 'propagation_delay_in_seconds': '3600'}"), "{desc}");
    // `CREATE TABLE IF NOT EXISTS` of a table that exists changes nothing.
    s.query_unpaged(
        format!(
            "CREATE TABLE IF NOT EXISTS {ks}.tgc_plain (p int PRIMARY KEY) WITH tombstone_gc = {{'mode': 'immediate'}}"
        ),
        &[],
    )
    .await
    .expect("create if not exists");
    let desc = described(&s, &format!("DESC TABLE {ks}.tgc_plain"), "tgc_plain").await;
    assert!(desc.contains("tombstone_gc = {'mode': 'disabled', 'propagation_delay_in_seconds': '3600'}"), "{desc}");
    s.query_unpaged(
        format!("CREATE TABLE IF NOT EXISTS {ks}.tgc_plain (p int PRIMARY KEY) WITH cdc = {{'enabled': true}}"),
        &[],
    )
    .await
    .expect("create if not exists with cdc");
    assert_eq!(front.cdc_options(&ks, "tgc_plain"), None, "no CDC turned on by a CREATE that did nothing");
    let bad = s.query_unpaged(format!("ALTER TABLE {ks}.tgc_plain WITH tombstone_gc = {{'mode': 'later'}}"), &[]).await;
    let message = format!("{:?}", bad.expect_err("bad mode"));
    assert!(message.contains("Invalid value for tombstone_gc option mode: later"), "{message}");

    // A table created without it: repair; its CDC log: timeout.
    s.query_unpaged(
        format!("CREATE TABLE {ks}.tgc_cdc (p int PRIMARY KEY, v int) WITH cdc = {{'enabled': true}}"),
        &[],
    )
    .await
    .expect("create b");
    let desc = described(&s, &format!("DESC TABLE {ks}.tgc_cdc"), "tgc_cdc").await;
    assert!(desc.contains("tombstone_gc = {'mode': 'repair', 'propagation_delay_in_seconds': '3600'}"), "{desc}");
    let log = "tgc_cdc_scylla_cdc_log";
    let alter = described(&s, &format!("DESCRIBE KEYSPACE {ks} WITH INTERNALS"), log).await;
    assert!(
        alter.contains("tombstone_gc = {'mode': 'timeout', 'propagation_delay_in_seconds': '3600'}"),
        "the log's ALTER in the keyspace: {alter}"
    );
    // Replaying the log's ALTER changes nothing (test_desc_log_table_properties_preserved_after_noop_alter).
    s.query_unpaged(alter.clone(), &[]).await.expect("no-op alter of the log");
    assert_eq!(described(&s, &format!("DESCRIBE KEYSPACE {ks} WITH INTERNALS"), log).await, alter);

    // The log takes every mode but repair.
    let immediate = "tombstone_gc = {'mode': 'immediate', 'propagation_delay_in_seconds': '17'}";
    s.query_unpaged(format!("ALTER TABLE {ks}.{log} WITH {immediate}"), &[]).await.expect("alter log");
    let desc = described(&s, &format!("DESCRIBE TABLE {ks}.{log} WITH INTERNALS"), log).await;
    assert!(desc.contains(immediate), "{desc}");
    let refused =
        s.query_unpaged(format!("ALTER TABLE {ks}.{log} WITH tombstone_gc = {{'mode': 'repair'}}"), &[]).await;
    let message = format!("{:?}", refused.expect_err("repair on a log"));
    assert!(message.contains("The 'repair' mode for tombstone_gc is not allowed on CDC log tables."), "{message}");

    // Kept by the log across detaching and re-attaching it.
    let kept = "tombstone_gc = {'mode': 'timeout', 'propagation_delay_in_seconds': '3719'}";
    s.query_unpaged(format!("ALTER TABLE {ks}.{log} WITH {kept}"), &[]).await.expect("alter log");
    for enabled in [false, true] {
        s.query_unpaged(format!("ALTER TABLE {ks}.tgc_cdc WITH cdc = {{'enabled': {enabled}}}"), &[])
            .await
            .expect("cdc on/off");
        let desc = described(&s, &format!("DESC TABLE {ks}.{log} WITH INTERNALS"), log).await;
        assert!(desc.contains(kept), "after cdc enabled = {enabled}: {desc}");
    }

    // A front started again still knows what it was given.
    drop(s);
    front.stop();
    let front = start_front(FrontConfig::default());
    let s = session(&front).await;
    let desc = described(&s, &format!("DESC TABLE {ks}.{log} WITH INTERNALS"), log).await;
    assert!(desc.contains(kept), "after a restart: {desc}");
    let desc = described(&s, &format!("DESC TABLE {ks}.tgc_plain"), "tgc_plain").await;
    assert!(desc.contains("tombstone_gc = {'mode': 'disabled', 'propagation_delay_in_seconds': '3600'}"), "{desc}");

    // Dropped and created again: the default again.
    s.query_unpaged(format!("DROP TABLE {ks}.tgc_plain"), &[]).await.expect("drop a");
    s.query_unpaged(format!("CREATE TABLE {ks}.tgc_plain (p int PRIMARY KEY)"), &[]).await.expect("create a again");
    let desc = described(&s, &format!("DESC TABLE {ks}.tgc_plain"), "tgc_plain").await;
    assert!(desc.contains("tombstone_gc = {'mode': 'repair', 'propagation_delay_in_seconds': '3600'}"), "{desc}");
    s.query_unpaged(format!("DROP KEYSPACE {ks}"), &[]).await.expect("drop keyspace");
}

/// A CDC log detached from its base (`cdc = {'enabled': false}`), the base
/// altered (a column dropped, one added, a key column renamed), then
/// re-attached: its DESCRIBE as ScyllaDB's (test/cqlpy/test_cdc.py
/// `test_reattach_cdc_log_table_after_altering_base`, whose expected text
/// this is, and `test_reattach_cdc_log_table_after_altering_base_schema`:
/// the same DESCRIBE as a log that was never detached).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reattached_log_describes_as_on_scylla() {
    let front = start_front(FrontConfig::default());
    let s = session(&front).await;
    // Both of ScyllaDB's keyspace flavours, as the upstream tests are run.
    for tablets in [false, true] {
        reattach_in(&s, tablets).await;
    }
}

async fn reattach_in(s: &Session, tablets: bool) {
    let ks = fresh_keyspace("emu_reattach");
    let ddl = testkit::create_keyspace(&ks, 1);
    let ddl = if tablets { format!("{ddl} AND tablets = {{'enabled': true}}") } else { ddl };
    s.query_unpaged(ddl, &[]).await.expect("keyspace");
    let schema = "(p int, v int, u int, a int, PRIMARY KEY (p, v)) WITH cdc = {'enabled': true}";
    for t in ["reattached", "attached"] {
        s.query_unpaged(format!("CREATE TABLE {ks}.{t} {schema}"), &[]).await.expect("create");
    }
    let table = format!("{ks}.reattached");
    let log = format!("{table}_scylla_cdc_log");
    s.query_unpaged(format!("INSERT INTO {table} (p, v, u, a) VALUES (1, 2, 3, 4)"), &[]).await.expect("insert");
    s.query_unpaged(format!("ALTER TABLE {table} WITH cdc = {{'enabled': false}}"), &[]).await.expect("detach");
    for t in ["reattached", "attached"] {
        for alter in ["DROP a", "ADD b double", "RENAME v TO v2"] {
            s.query_unpaged(format!("ALTER TABLE {ks}.{t} {alter}"), &[]).await.expect(alter);
        }
    }
    s.query_unpaged(format!("INSERT INTO {table} (p, v2, u, b) VALUES (5, 6, 7, 9.2)"), &[]).await.expect("insert");
    s.query_unpaged(format!("ALTER TABLE {table} WITH cdc = {{'enabled': true}}"), &[]).await.expect("re-attach");

    let desc = described(s, &format!("DESC TABLE {log} WITH INTERNALS"), "reattached_scylla_cdc_log").await;
    let expected = format!(
        "CREATE TABLE {log} (\n    \"cdc$stream_id\" blob,\n    \"cdc$time\" timeuuid,\n    \"cdc$batch_seq_no\" int,\n    \
         b double,\n    \"cdc$deleted_b\" boolean,\n    \"cdc$deleted_u\" boolean,\n    \"cdc$end_of_batch\" boolean,\n    \
         \"cdc$operation\" tinyint,\n    \"cdc$ttl\" bigint,\n    p int,\n    u int,\n    v2 int,\n    v int,\n    \
         \"cdc$deleted_a\" boolean,\n    a int,\n    PRIMARY KEY (\"cdc$stream_id\", \"cdc$time\", \"cdc$batch_seq_no\")\n)"
    );
    println!("{desc}");
    assert!(desc.contains(&expected), "{desc}");
    for dropped in ["v", "\"cdc$deleted_a\"", "a"] {
        assert!(desc.contains(&format!("ALTER TABLE {log} DROP {dropped}")), "{dropped}: {desc}");
    }

    let plain = |name: &str| format!("DESC TABLE {ks}.{name}_scylla_cdc_log");
    let reattached = described(s, &plain("reattached"), "reattached_scylla_cdc_log").await;
    let attached = described(s, &plain("attached"), "attached_scylla_cdc_log").await;
    println!("{attached}");
    assert_eq!(reattached.replace("reattached", "attached"), attached);
    s.query_unpaged(format!("DROP KEYSPACE {ks}"), &[]).await.expect("drop keyspace");
}

/// A CDC log's caching as ScyllaDB shows it: disabled when new
/// (`'enabled': 'false'`, `caching_options::get_disabled_caching_options`),
/// as given after an ALTER of the log, even when it caches nothing
/// (test/cqlpy/test_describe.py `test_describe_cdc_log_table_opts`), and
/// disabled again when an ALTER gives `'enabled': 'false'` (the log's ALTER
/// that DESCRIBE prints, replayed).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_log_caching_is_described_as_given() {
    let front = start_front(FrontConfig::default());
    let s = session(&front).await;
    let ks = fresh_keyspace("emu_log_caching");
    s.query_unpaged(testkit::create_keyspace(&ks, 1), &[]).await.expect("keyspace");
    s.query_unpaged(format!("CREATE TABLE {ks}.cached (p int PRIMARY KEY, v int) WITH cdc = {{'enabled': true}}"), &[])
        .await
        .expect("create");
    let log = "cached_scylla_cdc_log";
    let disabled = "caching = {'enabled': 'false', 'keys': 'NONE', 'rows_per_partition': 'NONE'}";
    let desc_query = format!("DESC TABLE {ks}.{log} WITH INTERNALS");
    assert!(described(&s, &desc_query, log).await.contains(disabled), "a new log");
    let alter = described(&s, &format!("DESCRIBE KEYSPACE {ks} WITH INTERNALS"), log).await;

    let given = "caching = {'keys': 'NONE', 'rows_per_partition': 'NONE'}";
    s.query_unpaged(format!("ALTER TABLE {ks}.{log} WITH {given}"), &[]).await.expect("alter caching");
    let now = described(&s, &desc_query, log).await;
    assert!(now.contains(&format!("AND {given}\n")), "as given: {now}");
    // The log's ALTER from before, replayed: disabled again.
    s.query_unpaged(alter, &[]).await.expect("replay");
    assert!(described(&s, &desc_query, log).await.contains(disabled), "after the replay");
    s.query_unpaged(format!("DROP KEYSPACE {ks}"), &[]).await.expect("drop keyspace");
}
