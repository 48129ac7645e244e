//! `Session::execute` against the real Cassandra 5.0, in v4 and v5: every
//! CQL type prepared and unprepared, batches, paging, LWT, USE, schema
//! changes, METADATA_CHANGED, timeouts, compression and typed server errors.

use std::time::Duration;

use shardwise::protocol::consistency::Consistency;
use shardwise::protocol::frame::ProtocolVersion;
use shardwise::protocol::response::{ErrorKind, Event};
use shardwise::protocol::types::de::Row;
use shardwise::protocol::types::CqlValue;
use shardwise::{Batch, Compression, ExecutionError, Session, SessionBuilder, SessionEvent, Statement};
use testkit::fault::{Action, Direction, FaultProxy, Rule};
use testkit::samples::{every_type_row, every_type_schema, EVERY_TYPE_COLUMNS};
use tokio::sync::broadcast::error::TryRecvError;

async fn session(version: ProtocolVersion, compression: Compression) -> Session {
    SessionBuilder::new()
        .known_node_addr(testkit::shared_node().expect("server"))
        .protocol_versions(version, version)
        .compression(compression)
        .default_consistency(Consistency::One)
        .build()
        .await
        .expect("session")
}

/// A session through `proxy` alone (the fault proxy frames v4 only).
async fn through(proxy: &FaultProxy) -> Session {
    SessionBuilder::new()
        .known_node_addr(proxy.addr())
        .protocol_versions(ProtocolVersion::V4, ProtocolVersion::V4)
        .discover_topology(false)
        .default_consistency(Consistency::One)
        .build()
        .await
        .expect("session through the proxy")
}

async fn keyspace(s: &Session, prefix: &str) -> String {
    let ks = testkit::fresh_keyspace(prefix);
    for ddl in every_type_schema(&ks) {
        let r = s.execute(&Statement::new(ddl), ()).await.expect("ddl");
        assert!(r.schema_change().is_some());
    }
    ks
}

async fn every_type(version: ProtocolVersion, compression: Compression) {
    let s = session(version, compression).await;
    let ks = keyspace(&s, "sess").await;
    let marks = vec!["?"; EVERY_TYPE_COLUMNS.split(',').count()].join(", ");
    let insert = format!("INSERT INTO {ks}.every_type ({EVERY_TYPE_COLUMNS}) VALUES ({marks})");
    let select = format!("SELECT {EVERY_TYPE_COLUMNS} FROM {ks}.every_type WHERE pk = ?");

    let row1 = every_type_row(1, &ks);
    s.execute(&Statement::new(insert.as_str()), row1.as_slice()).await.expect("unprepared insert");
    let prepared = s.prepare(insert.as_str()).await.expect("prepare");
    let row2 = every_type_row(2, &ks);
    let r = s.execute(&prepared, row2.as_slice()).await.expect("prepared insert");
    assert_eq!(r.rows_count(), 0);

    let unprepared = s.execute(&Statement::new(select.as_str()), (1i32,)).await.expect("select");
    let got: Option<Row> = unprepared.first_row().expect("row type");
    assert_eq!(got.expect("a row").columns, row1);
    let select = s.prepare(select.as_str()).await.expect("prepare select");
    let r = s.execute(&select, (2i32,)).await.expect("prepared select");
    assert_eq!(r.first_row::<Row>().expect("type").expect("row").columns, row2);
    // Borrowed views straight from the response buffer.
    let narrow = s.prepare(format!("SELECT t, bl FROM {ks}.every_type WHERE pk = ?")).await.expect("prepare");
    let r = s.execute(&narrow, (2i32,)).await.expect("select");
    let (t, bl): (&str, &[u8]) = r.first_row().expect("type").expect("row");
    assert_eq!((t, bl), ("zażółć gęślą jaźń", &[0u8, 1, 2, 0xff][..]));
    // A wrong Rust type is a typed error naming the column.
    let err = r.rows::<(i32, &[u8])>().expect_err("text is not int");
    assert!(err.to_string().contains("text"), "{err}");
    // Values of the wrong type are refused before anything is sent.
    let err = s.execute(&prepared, (1i32,)).await.expect_err("too few values");
    assert!(matches!(err, ExecutionError::Encode(_)), "{err:?}");
}

#[tokio::test]
async fn every_type_v4() {
    every_type(ProtocolVersion::V4, Compression::None).await;
}

#[tokio::test]
async fn every_type_v5() {
    every_type(ProtocolVersion::V5, Compression::None).await;
}

#[tokio::test]
async fn every_type_v4_lz4() {
    every_type(ProtocolVersion::V4, Compression::Lz4).await;
}

#[tokio::test]
async fn every_type_v5_lz4() {
    every_type(ProtocolVersion::V5, Compression::Lz4).await;
}

#[tokio::test]
async fn batches_of_every_kind() {
    for version in [ProtocolVersion::V4, ProtocolVersion::V5] {
        let s = session(version, Compression::None).await;
        let ks = keyspace(&s, "batch").await;
        let insert = s.prepare(format!("INSERT INTO {ks}.every_type (pk, t) VALUES (?, ?)")).await.expect("prepare");
        let delete = Statement::new(format!("DELETE FROM {ks}.every_type WHERE pk = ?"));
        // A logged batch of a prepared and an unprepared statement, values as a tuple of tuples.
        let batch = Batch::logged((&insert, &insert, &delete));
        s.execute(&batch, ((10i32, "ten"), (11i32, "eleven"), (10i32,))).await.expect("logged batch");
        // An unlogged batch over a Vec.
        let many = Batch::unlogged(vec![&insert; 5]);
        let values: Vec<(i32, String)> = (20..25).map(|i| (i, format!("v{i}"))).collect();
        s.execute(&many, values).await.expect("unlogged batch");
        // A counter batch.
        let inc = s.prepare(format!("UPDATE {ks}.counters SET c = c + ? WHERE pk = ?")).await.expect("prepare");
        let counters = Batch::counter((&inc, &inc));
        s.execute(&counters, ((CqlValue::Counter(2), 1i32), (CqlValue::Counter(3), 1i32)))
            .await
            .expect("counter batch");

        let r = s.execute(&Statement::new(format!("SELECT pk, t FROM {ks}.every_type")), ()).await.expect("select");
        let mut rows: Vec<(i32, String)> = r.rows().expect("types").map(|r| r.expect("row")).collect();
        rows.sort();
        let want: Vec<(i32, String)> =
            [(11, "eleven".to_owned())].into_iter().chain((20..25).map(|i| (i, format!("v{i}")))).collect();
        assert_eq!(rows, want);
        let r =
            s.execute(&Statement::new(format!("SELECT c FROM {ks}.counters WHERE pk = 1")), ()).await.expect("select");
        assert_eq!(r.first_row::<(i64,)>().expect("type"), Some((5,)));
    }
}

#[tokio::test]
async fn paging_over_thousands_of_rows() {
    let s = session(ProtocolVersion::V5, Compression::None).await;
    let ks = keyspace(&s, "page").await;
    s.execute(&Statement::new(format!("CREATE TABLE {ks}.wide (pk int, ck int, v text, PRIMARY KEY (pk, ck))")), ())
        .await
        .expect("ddl");
    let insert = s.prepare(format!("INSERT INTO {ks}.wide (pk, ck, v) VALUES (?, ?, ?)")).await.expect("prepare");
    let mut tasks = Vec::new();
    for ck in 0..3000i32 {
        let (s, insert) = (s.clone(), insert.clone());
        tasks.push(tokio::spawn(async move { s.execute(&insert, (1i32, ck, format!("row {ck}"))).await.map(drop) }));
    }
    for t in tasks {
        t.await.expect("task").expect("insert");
    }
    let select =
        s.prepare(format!("SELECT ck, v FROM {ks}.wide WHERE pk = ?")).await.expect("prepare").with_page_size(700);
    let mut pager = s.execute_pages(select.clone(), (1i32,));
    let mut pages = 0;
    let mut seen = 0;
    while let Some(page) = pager.next_page().await {
        let page = page.expect("page");
        pages += 1;
        for row in page.rows::<(i32, &str)>().expect("types") {
            let (ck, v) = row.expect("row");
            assert_eq!(v, format!("row {ck}"));
            seen += 1;
        }
    }
    assert_eq!((pages, seen), (5, 3000));
    let all: Vec<(i32, String)> = s.execute_pages(select.clone(), (1i32,)).collect_rows().await.expect("rows");
    assert_eq!(all.len(), 3000);
    assert!(all.windows(2).all(|w| w[0].0 < w[1].0), "clustering order");
    // Unpaged, as the official `execute_unpaged`: every row in one answer,
    // whatever the statement's page size; `execute` stops at the first page.
    let unpaged = s.execute_unpaged(&select, (1i32,)).await.expect("unpaged");
    assert_eq!((unpaged.rows_count(), unpaged.has_more_pages()), (3000, false));
    let first = s.execute(&select, (1i32,)).await.expect("first page");
    assert_eq!((first.rows_count(), first.has_more_pages()), (700, true));
}

/// A query resumed from a saved paging state: the first page's state is
/// kept as bytes (as an application would store it), and later, from
/// another session, turned back into a `PagingState` that fetches the rest:
/// the rows continue exactly where the first page ended (none repeated,
/// none skipped), for a prepared statement and an unprepared one, in v4 and
/// v5.
#[tokio::test]
async fn a_query_resumes_from_a_saved_paging_state() {
    const ROWS: i32 = 250;
    const PAGE: i32 = 100;
    for version in [ProtocolVersion::V4, ProtocolVersion::V5] {
        let s = session(version, Compression::None).await;
        let ks = crate::common::simple_keyspace(&s, "resume").await;
        let ddl = format!("CREATE TABLE {ks}.wide (pk int, ck int, v text, PRIMARY KEY (pk, ck))");
        s.execute(&Statement::new(ddl), ()).await.expect("table");
        let insert = s.prepare(format!("INSERT INTO {ks}.wide (pk, ck, v) VALUES (?, ?, ?)")).await.expect("prepare");
        for ck in 0..ROWS {
            s.execute(&insert, (1i32, ck, format!("row {ck}"))).await.expect("insert");
        }
        let text = format!("SELECT ck, v FROM {ks}.wide WHERE pk = 1");
        let rows_of = |r: &shardwise::QueryResult| -> Vec<(i32, String)> {
            r.rows::<(i32, &str)>()
                .expect("types")
                .map(|row| row.map(|(ck, v)| (ck, v.to_owned())).expect("row"))
                .collect()
        };
        let expected = |from: i32| -> Vec<(i32, String)> { (from..ROWS).map(|ck| (ck, format!("row {ck}"))).collect() };

        // Unprepared, then prepared: the first page, and its state saved as bytes.
        let unprepared = Statement::new(text.clone()).with_page_size(PAGE);
        let first = s.execute_page(&unprepared, &(), None).await.expect("first page");
        assert_eq!(rows_of(&first), expected(0)[..PAGE as usize], "{version:?}: the first page");
        assert!(first.has_more_pages(), "{version:?}: more pages follow the first");
        let saved_unprepared = first.paging_state().expect("a paging state").as_bytes().to_vec();
        let prepared = s.prepare(text.clone()).await.expect("prepare").with_page_size(PAGE);
        let first = s.execute_page(&prepared, &(), None).await.expect("first page");
        assert_eq!(rows_of(&first), expected(0)[..PAGE as usize], "{version:?}: the first prepared page");
        let saved_prepared = first.paging_state().expect("a paging state").as_bytes().to_vec();
        drop((first, s));

        // Later, another session: the rest, from the saved bytes.
        let later = session(version, Compression::None).await;
        let prepared_again = later.prepare(text.clone()).await.expect("prepare").with_page_size(PAGE);
        let resumed = [
            ("unprepared", rest_from(&later, &unprepared, &saved_unprepared).await),
            ("prepared", rest_from(&later, &prepared_again, &saved_prepared).await),
        ];
        for (what, (rows, pages)) in resumed {
            assert_eq!(rows, expected(PAGE), "{version:?}, {what}: the rows after the first page, exactly");
            assert_eq!(pages, 2, "{version:?}, {what}: {} rows left in pages of {PAGE}", ROWS - PAGE);
        }
    }
}

/// The rows `(ck, v)` of `statement` from the paging state saved as
/// `saved` to the last page, and the number of pages.
async fn rest_from<E: shardwise::execute::Executable<()>>(
    s: &Session,
    statement: &E,
    saved: &[u8],
) -> (Vec<(i32, String)>, usize) {
    let (mut rows, mut pages) = (Vec::new(), 0);
    let mut state = Some(shardwise::PagingState::from_bytes(saved));
    while let Some(from) = state.take() {
        let page = s.execute_page(statement, &(), Some(&from)).await.expect("a page resumed from the saved state");
        for row in page.rows::<(i32, &str)>().expect("types") {
            let (ck, v) = row.expect("row");
            rows.push((ck, v.to_owned()));
        }
        pages += 1;
        state = page.paging_state().filter(|_| page.has_more_pages());
    }
    (rows, pages)
}

/// `SessionBuilder::use_keyspace`: the session starts in the keyspace, on
/// every pool connection (each checked on its own), so unqualified
/// statements, unprepared and prepared, run in it; a keyspace that does not
/// `prepared_cache_capacity` (the official `CachingSession`'s size): a
/// statement run with values but not prepared is prepared once while it is
/// among the two used last, and again once two others pushed it out; a
/// statement dropped from the cache still runs where it is held.
#[tokio::test]
async fn a_bounded_prepared_cache_prepares_again_what_it_dropped() {
    let setup = session(ProtocolVersion::V4, Compression::None).await;
    let ks = keyspace(&setup, "bounded_cache").await;
    let s = SessionBuilder::new()
        .known_node_addr(testkit::shared_node().expect("server"))
        .prepared_cache_capacity(Some(2))
        .build()
        .await
        .expect("session");
    let text = |c: &str| Statement::new(format!("INSERT INTO {ks}.every_type (pk, {c}) VALUES (?, ?)"));
    let prepares = || s.metrics().prepares;
    let before = prepares();
    s.execute(&text("i"), (1i32, 1i32)).await.expect("i");
    s.execute(&text("i"), (2i32, 2i32)).await.expect("i again");
    assert_eq!(prepares() - before, 1, "prepared once, then found in the cache");
    let held = s.prepare(text("i")).await.expect("held");
    s.execute(&text("b"), (3i32, 3i64)).await.expect("b");
    s.execute(&text("si"), (4i32, 4i16)).await.expect("si");
    assert_eq!(prepares() - before, 3);
    s.execute(&text("i"), (5i32, 5i32)).await.expect("i after two others");
    assert_eq!(prepares() - before, 4, "dropped from the cache, prepared again");
    s.execute(&held, (6i32, 6i32)).await.expect("a statement dropped from the cache still runs");
}

/// exist fails `build` with a typed error carrying the server's `Invalid`.
#[tokio::test]
async fn a_session_built_with_use_keyspace_runs_unqualified_statements_in_it() {
    let setup = session(ProtocolVersion::V5, Compression::None).await;
    let ks = keyspace(&setup, "builder_use").await;
    setup
        .execute(&Statement::new(format!("INSERT INTO {ks}.every_type (pk, t) VALUES (1, 'here')")), ())
        .await
        .expect("insert");
    let s = SessionBuilder::new()
        .known_node_addr(testkit::shared_node().expect("server"))
        .connections_per_node(3)
        .use_keyspace(&ks, false)
        .build()
        .await
        .expect("a session in the keyspace");
    assert_eq!(s.keyspace().as_deref(), Some(ks.as_str()), "the session's keyspace");
    let select = Statement::new("SELECT t FROM every_type WHERE pk = 1");
    let r = s.execute(&select, ()).await.expect("an unqualified select");
    assert_eq!(r.first_row::<(&str,)>().expect("type"), Some(("here",)));
    let prepared = s.prepare("SELECT t FROM every_type WHERE pk = ?").await.expect("an unqualified prepare");
    let r = s.execute(&prepared, (1i32,)).await.expect("an unqualified prepared select");
    assert_eq!(r.first_row::<(&str,)>().expect("type"), Some(("here",)));
    // Every connection, including those the pool opened after `build`.
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while s.connections().len() < 3 {
        assert!(std::time::Instant::now() < deadline, "only {} connections", s.connections().len());
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    for conn in s.connections() {
        let params = shardwise::execute::Params::new(Consistency::One);
        let r = conn.execute(&select, &(), params).await.expect("an unqualified select on one connection");
        assert_eq!(r.first_row::<(&str,)>().expect("type"), Some(("here",)), "connection {}", conn.addr());
    }

    let err = SessionBuilder::new()
        .known_node_addr(testkit::shared_node().expect("server"))
        .use_keyspace("no_such_keyspace_anywhere", false)
        .build()
        .await
        .expect_err("a keyspace that does not exist");
    assert!(
        matches!(&err, shardwise::NewSessionError::UseKeyspace(ExecutionError::Db(e)) if e.kind == ErrorKind::Invalid),
        "{err:?}"
    );
}

#[tokio::test]
async fn lwt_use_keyspace_and_typed_errors() {
    let s = session(ProtocolVersion::V5, Compression::None).await;
    let ks = keyspace(&s, "lwt").await;
    // Unquoted (not case-sensitive), a name in upper case is the keyspace
    // in lower case; quoted, it is another keyspace (none here); a name CQL
    // cannot take unquoted is refused before anything is sent.
    s.use_keyspace(ks.to_uppercase(), false).await.expect("use, case-insensitive");
    assert_eq!(s.keyspace().as_deref(), Some(ks.as_str()));
    let quoted = s.use_keyspace(ks.to_uppercase(), true).await.expect_err("no keyspace of that case");
    assert!(matches!(&quoted, ExecutionError::Db(e) if e.kind == ErrorKind::Invalid), "{quoted:?}");
    let bad = s.use_keyspace("no such keyspace", false).await.expect_err("not an identifier");
    assert!(matches!(bad, ExecutionError::BadKeyspaceName { .. }), "{bad:?}");
    s.use_keyspace(&ks, true).await.expect("use, as written");
    assert_eq!(s.keyspace().as_deref(), Some(ks.as_str()));
    let lwt = s.prepare("INSERT INTO every_type (pk, t) VALUES (?, ?) IF NOT EXISTS").await.expect("prepare");
    let first = s.execute(&lwt, (7i32, "first")).await.expect("lwt");
    assert_eq!(first.applied(), Some(true));
    let second = s.execute(&lwt, (7i32, "second")).await.expect("lwt");
    assert_eq!(second.applied(), Some(false));

    // `USE` through execute applies to the whole session.
    let other = keyspace(&s, "lwt2").await;
    s.execute(&Statement::new(format!("USE {other}")), ()).await.expect("use");
    assert_eq!(s.keyspace().as_deref(), Some(other.as_str()));

    let err = s.execute(&Statement::new("SELEKT 1"), ()).await.expect_err("syntax");
    assert!(matches!(&err, ExecutionError::Db(e) if e.kind == ErrorKind::SyntaxError), "{err:?}");
    let node = s.nodes()[0];
    assert!(matches!(&err, ExecutionError::Db(e) if e.node == Some(node)), "{err:?}");
    assert!(err.to_string().ends_with(&format!("(from {node})")), "the message names the node: {err}");
    let err = s.execute(&Statement::new("SELECT * FROM no_such_table"), ()).await.expect_err("invalid");
    assert!(matches!(&err, ExecutionError::Db(e) if e.kind == ErrorKind::Invalid), "{err:?}");
    let err = s.execute(&Statement::new(testkit::create_keyspace(&ks, 1)), ()).await.expect_err("exists");
    assert!(
        matches!(&err, ExecutionError::Db(e) if matches!(&e.kind, ErrorKind::AlreadyExists { keyspace, .. } if *keyspace == ks)),
        "{err:?}"
    );
}

/// The prepared-statement cache was keyed by text only: after `USE` of
/// another keyspace, an unqualified statement got the one prepared against
/// the first keyspace (and read its table).
#[tokio::test]
async fn prepared_cache_follows_use() {
    let s = session(ProtocolVersion::V5, Compression::None).await;
    let mut keyspaces = Vec::new();
    for (prefix, value) in [("usea", "first"), ("useb", "second")] {
        let ks = keyspace(&s, prefix).await;
        s.execute(&Statement::new(format!("INSERT INTO {ks}.every_type (pk, t) VALUES (1, '{value}')")), ())
            .await
            .expect("insert");
        keyspaces.push(ks);
    }
    let text = "SELECT t FROM every_type WHERE pk = ?";
    for (ks, value) in keyspaces.iter().zip(["first", "second"]) {
        s.use_keyspace(ks, false).await.expect("use");
        let select = s.prepare(text).await.expect("prepare");
        let r = s.execute(&select, (1i32,)).await.expect("select");
        assert_eq!(r.first_row::<(&str,)>().expect("type"), Some((value,)), "after USE {ks}");
    }
    // `USE` as a statement switches the cache back too.
    s.execute(&Statement::new(format!("USE {}", keyspaces[0])), ()).await.expect("use");
    let select = s.prepare(text).await.expect("prepare");
    let r = s.execute(&select, (1i32,)).await.expect("select");
    assert_eq!(r.first_row::<(&str,)>().expect("type"), Some(("first",)));
}

/// A prepared `SELECT *` keeps being read right while its table gains a
/// column: every result is read with the columns it was sent with, and
/// once the column is added, it is read. Regression: on v4 (no metadata
/// id) the driver asked the server to skip the metadata and read the rows
/// with the columns cached at prepare time.
#[tokio::test]
async fn prepared_select_follows_alter_table() {
    for version in [ProtocolVersion::V4, ProtocolVersion::V5] {
        let s = session(version, Compression::None).await;
        let ks = keyspace(&s, "alter").await;
        s.execute(&Statement::new(format!("CREATE TABLE {ks}.t (pk int PRIMARY KEY, a int)")), ()).await.expect("ddl");
        s.execute(&Statement::new(format!("INSERT INTO {ks}.t (pk, a) VALUES (1, 10)")), ()).await.expect("insert");
        let select = s.prepare(format!("SELECT * FROM {ks}.t WHERE pk = ?")).await.expect("prepare");
        let r = s.execute(&select, (1i32,)).await.expect("select");
        assert_eq!(r.first_row::<(i32, i32)>().expect("type"), Some((1, 10)));
        // Readers running while the table changes.
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let readers: Vec<_> = (0..4)
            .map(|_| {
                let (s, select, stop) = (s.clone(), select.clone(), stop.clone());
                tokio::spawn(async move {
                    let mut reads = 0;
                    while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                        let r = s.execute(&select, (1i32,)).await.expect("select");
                        match r.column_specs().map(<[_]>::len) {
                            Some(2) => assert_eq!(r.first_row::<(i32, i32)>().expect("2 columns"), Some((1, 10))),
                            Some(3) => {
                                let (pk, a, _) = r.first_row::<(i32, i32, Option<&str>)>().expect("3").expect("row");
                                assert_eq!((pk, a), (1, 10));
                            }
                            other => panic!("{other:?} columns"),
                        }
                        reads += 1;
                    }
                    reads
                })
            })
            .collect();
        tokio::time::sleep(Duration::from_millis(100)).await;
        s.execute(&Statement::new(format!("ALTER TABLE {ks}.t ADD b text")), ()).await.expect("alter");
        s.execute(&Statement::new(format!("UPDATE {ks}.t SET b = 'new' WHERE pk = 1")), ()).await.expect("update");
        tokio::time::sleep(Duration::from_millis(100)).await;
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        for reader in readers {
            assert!(reader.await.expect("reader") > 0);
        }
        let r = s.execute(&select, (1i32,)).await.expect("select after alter");
        assert_eq!(
            r.first_row::<(i32, i32, Option<&str>)>().expect("the new column"),
            Some((1, 10, Some("new"))),
            "{version:?}"
        );
        assert_eq!(select.result_specs().expect("specs").len(), 3, "{version:?}: cache updated");
    }
}

/// A request whose answer comes after its timeout fails with `Timeout`, and
/// the session goes on working. The answers are held back by a proxy: a
/// 1 µs timeout on a real query raced the server, and a quiet machine
/// answered within the millisecond a deadline is rounded up to.
#[tokio::test]
async fn request_timeout_is_a_typed_error() {
    let proxy = FaultProxy::start(testkit::shared_node().expect("server")).expect("proxy");
    let s = through(&proxy).await;
    proxy.set_rules(vec![Rule::new(Action::Delay(Duration::from_millis(500))).direction(Direction::ToClient)]);
    let slow = Statement::new("SELECT key FROM system.local").with_timeout(Duration::from_millis(50));
    let err = s.execute(&slow, ()).await.expect_err("timeout");
    assert!(matches!(err, ExecutionError::Timeout(t) if t == Duration::from_millis(50)), "{err:?}");
    assert!(s.metrics().timeouts >= 1);
    // The session still works afterwards.
    proxy.clear_rules();
    s.execute(&Statement::new("SELECT key FROM system.local"), ()).await.expect("ok");
    let m = s.metrics();
    assert!(m.requests >= 2 && m.latency_quantile(0.5).is_some());
}

#[derive(Debug, PartialEq, shardwise::SerializeValues)]
struct NewUser<'a> {
    pk: i32,
    t: &'a str,
    bo: bool,
}

#[derive(Debug, PartialEq, shardwise::DeserializeRow)]
struct UserRow<'a> {
    bo: Option<bool>,
    pk: i32,
    t: &'a str,
}

#[tokio::test]
async fn derived_structs_bind_values_and_read_rows() {
    let s = session(ProtocolVersion::V5, Compression::None).await;
    let ks = keyspace(&s, "derive").await;
    let insert = s.prepare(format!("INSERT INTO {ks}.every_type (pk, t, bo) VALUES (?, ?, ?)")).await.expect("prepare");
    s.execute(&insert, NewUser { pk: 5, t: "five", bo: true }).await.expect("insert");
    let select = s.prepare(format!("SELECT pk, t, bo FROM {ks}.every_type WHERE pk = ?")).await.expect("prepare");
    let r = s.execute(&select, (5i32,)).await.expect("select");
    // Columns are matched by name, whatever the field order.
    let row: UserRow<'_> = r.first_row().expect("types").expect("row");
    assert_eq!(row, UserRow { bo: Some(true), pk: 5, t: "five" });
}

/// Speculative execution of unprepared statements (QUERY), counted at the
/// wire: two "nodes" that are proxies in front of the same server, a
/// speculative delay shorter than any answer. Idempotent statements get
/// extra attempts and every one answers; a statement not marked idempotent
/// is sent exactly once.
#[tokio::test]
async fn speculative_execution_for_idempotent_statements() {
    const QUERY: u8 = 0x07;
    let addr = testkit::shared_node().expect("server");
    let proxies = [FaultProxy::start(addr).expect("proxy"), FaultProxy::start(addr).expect("proxy")];
    let s = SessionBuilder::new()
        .known_node_addr(proxies[0].addr())
        .known_node_addr(proxies[1].addr())
        .discover_topology(false)
        .protocol_versions(ProtocolVersion::V4, ProtocolVersion::V4)
        .speculative_execution(Some(shardwise::SpeculativePolicy::fixed(2, Duration::from_micros(1))))
        .default_consistency(Consistency::One)
        .build()
        .await
        .expect("session");
    let queries = || proxies.iter().map(|p| p.frames(Direction::ToServer, QUERY)).sum::<usize>();
    // Non-idempotent statements are never sent twice. (First: the losing extra attempts of
    // the idempotent reads below may reach the proxies after their reads returned.)
    // The proxies also count the session's own schema reads (two QUERY frames after each
    // schema change, which the other tests of this binary make on the shared server), so a
    // window in which one happened is measured again.
    let write = Statement::new("SELECT key FROM system.local");
    let mut windows = 0;
    let sent = loop {
        let mut events = s.events();
        let before = queries();
        for _ in 0..20 {
            s.execute(&write, ()).await.expect("plain read");
        }
        let sent = queries() - before;
        // The event is emitted once the refresh it caused is done.
        tokio::time::sleep(Duration::from_secs(1)).await;
        let mut schema_read = false;
        loop {
            match events.try_recv() {
                Ok(event) => schema_read |= matches!(event, SessionEvent::Database(Event::SchemaChange(_))),
                // Events were dropped: one of them may have been a schema change.
                Err(TryRecvError::Lagged(_)) => schema_read = true,
                Err(TryRecvError::Empty | TryRecvError::Closed) => break,
            }
        }
        windows += 1;
        if !schema_read {
            break sent;
        }
        assert!(windows < 10, "a schema change in each of {windows} windows of 20 statements");
    };
    assert_eq!(sent, 20, "20 statements not marked idempotent sent {sent} QUERY frames: one was sent more than once");
    let read = Statement::new("SELECT key FROM system.local").with_idempotent(true);
    let before = queries();
    for _ in 0..20 {
        let r = s.execute(&read, ()).await.expect("speculative read");
        assert_eq!(r.rows_count(), 1);
    }
    let sent = queries() - before;
    assert!(sent > 20, "20 idempotent reads sent {sent} QUERY frames: speculative execution sent no extra attempt");
}

/// The same for prepared statements (EXECUTE), counted at the wire: two
/// "nodes" that are proxies in front of the same server, a speculative
/// delay shorter than any answer. Idempotent statements are sent more than
/// once; non-idempotent ones exactly once.
#[tokio::test]
async fn speculative_execution_never_sends_a_non_idempotent_statement_twice() {
    use testkit::fault::{Direction, FaultProxy};
    const EXECUTE: u8 = 0x0a;
    let addr = testkit::shared_node().expect("server");
    let proxies = [FaultProxy::start(addr).expect("proxy"), FaultProxy::start(addr).expect("proxy")];
    let s = SessionBuilder::new()
        .known_node_addr(proxies[0].addr())
        .known_node_addr(proxies[1].addr())
        .discover_topology(false)
        .protocol_versions(ProtocolVersion::V4, ProtocolVersion::V4)
        .speculative_execution(Some(shardwise::SpeculativePolicy::fixed(2, Duration::from_micros(1))))
        .default_consistency(Consistency::One)
        .build()
        .await
        .expect("session");
    let executes = || proxies.iter().map(|p| p.frames(Direction::ToServer, EXECUTE)).sum::<usize>();
    let text = "SELECT key FROM system.local WHERE key = 'local'";
    let plain = s.prepare(text).await.expect("prepare");
    let before = executes();
    for _ in 0..20 {
        s.execute(&plain, ()).await.expect("read");
    }
    assert_eq!(executes() - before, 20, "a non-idempotent statement was sent more than once");
    let idempotent = plain.clone().with_idempotent(true);
    let before = executes();
    for _ in 0..20 {
        s.execute(&idempotent, ()).await.expect("speculative read");
    }
    assert!(executes() - before > 20, "speculative execution sent no extra attempt");
}

#[tokio::test]
async fn events_from_the_control_connection() {
    let s = session(ProtocolVersion::V5, Compression::None).await;
    let mut events = s.events();
    let ks = keyspace(&s, "events").await;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    let mut saw_schema_change = false;
    while !saw_schema_change {
        let event =
            tokio::time::timeout_at(deadline, events.recv()).await.expect("an event in time").expect("open channel");
        if let shardwise::SessionEvent::Database(shardwise::protocol::response::Event::SchemaChange(c)) = event {
            saw_schema_change = format!("{c:?}").contains(&ks);
        }
    }
}

/// `Session::tracing_info`: the trace of a traced prepared read, read once
/// the coordinator finished writing its session row.
#[tokio::test]
async fn tracing_info_of_a_traced_read() {
    let s = session(ProtocolVersion::V4, Compression::None).await;
    let ks = crate::common::simple_keyspace(&s, "tracing").await;
    s.execute(&Statement::new(format!("CREATE TABLE {ks}.kv (pk int PRIMARY KEY, v text)")), ()).await.expect("table");
    let select = s.prepare(format!("SELECT v FROM {ks}.kv WHERE pk = ?")).await.expect("prepare");
    let plain = s.execute(&select, (1,)).await.expect("read");
    assert_eq!(plain.tracing_id(), None, "no trace unless asked");
    let traced = s.execute(&select.clone().with_tracing(true), (1,)).await.expect("traced read");
    let id = traced.tracing_id().expect("a tracing id");
    let info = crate::common::finished_trace(&s, id).await.expect("the trace completes");
    let node = testkit::shared_node().expect("server").ip();
    assert_eq!(info.coordinator, Some(node));
    assert!(info.duration.is_some_and(|d| d > 0), "{info:?}");
    assert_eq!(info.command.as_deref(), Some("QUERY"), "Cassandra records prepared executions as QUERY");
    assert!(info.parameters.get("query").is_some_and(|q| q.contains(&ks)), "{:?}", info.parameters);
    assert!(info.started_at.is_some() && info.client.is_some());
    assert!(!info.events.is_empty(), "events");
    assert!(info.events.iter().all(|e| e.source == Some(node)), "one node");
    let unknown = s.tracing_info_with(uuid::Uuid::from_u128(7), 2, Duration::from_millis(1)).await;
    assert!(matches!(unknown, Err(shardwise::TracingInfoError::Incomplete { attempts: 2, .. })), "{unknown:?}");
}

/// The official driver's `tracing_info_fetch_*` settings are what
/// `tracing_info` does: an unknown trace is given up after the attempts
/// set, the interval apart, and every read is at the consistency set (THREE
/// on one node: unavailable).
#[tokio::test]
async fn tracing_info_follows_the_fetch_settings() {
    let build = |attempts: u32, consistency: Consistency| {
        SessionBuilder::new()
            .known_node_addr(testkit::shared_node().expect("server"))
            .tracing_info_fetch_attempts(std::num::NonZeroU32::new(attempts).expect("non-zero"))
            .tracing_info_fetch_interval(Duration::from_millis(100))
            .tracing_info_fetch_consistency(consistency)
            .build()
    };
    let s = build(3, Consistency::One).await.expect("session");
    let started = std::time::Instant::now();
    let unknown = s.tracing_info(uuid::Uuid::from_u128(7)).await;
    assert!(matches!(unknown, Err(shardwise::TracingInfoError::Incomplete { attempts: 3, .. })), "{unknown:?}");
    assert!(started.elapsed() >= Duration::from_millis(200), "two pauses: {:?}", started.elapsed());
    let three = build(1, Consistency::Three).await.expect("session");
    match three.tracing_info(uuid::Uuid::from_u128(7)).await {
        Err(shardwise::TracingInfoError::Query { source: ExecutionError::Db(e), .. }) => {
            assert!(matches!(e.kind, ErrorKind::Unavailable { consistency: Consistency::Three, .. }), "{e:?}")
        }
        other => panic!("expected an unavailable read, got {other:?}"),
    }
}

/// `Session::execute_stream`: 100,000 rows as a stream of owned rows; the
/// next page is requested only once half of the current one is taken; a
/// server error mid-stream ends it with that error after the rows received.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn row_stream_over_100k_rows() {
    let s = session(ProtocolVersion::V4, Compression::None).await;
    let ks = crate::common::simple_keyspace(&s, "row_stream").await;
    s.execute(&Statement::new(format!("CREATE TABLE {ks}.t (pk int, ck int, v bigint, PRIMARY KEY (pk, ck))")), ())
        .await
        .expect("table");
    let insert = std::sync::Arc::new(
        s.prepare(format!("INSERT INTO {ks}.t (pk, ck, v) VALUES (?, ?, ?)")).await.expect("prepare"),
    );
    const PARTITIONS: i32 = 100;
    const PER_PARTITION: i32 = 1000;
    let mut tasks = tokio::task::JoinSet::new();
    for pk in 0..PARTITIONS {
        let (s, insert) = (s.clone(), insert.clone());
        tasks.spawn(async move {
            for chunk in (0..PER_PARTITION).collect::<Vec<_>>().chunks(100) {
                let rows: Vec<(i32, i32, i64)> =
                    chunk.iter().map(|&ck| (pk, ck, i64::from(pk * PER_PARTITION + ck))).collect();
                let batch = Batch::unlogged(vec![&*insert; rows.len()]);
                s.execute(&batch, rows).await.expect("batch");
            }
        });
    }
    while let Some(t) = tasks.join_next().await {
        t.expect("writer");
    }
    let total = (PARTITIONS * PER_PARTITION) as usize;
    let select = Statement::new(format!("SELECT pk, ck, v FROM {ks}.t")).with_page_size(5000);
    let mut stream = s.execute_stream::<_, _, (i32, i32, i64)>(select, ());
    let (mut n, mut sum) = (0usize, 0i64);
    while let Some(row) = stream.next_row().await {
        let (pk, ck, v) = row.expect("row");
        assert_eq!(v, i64::from(pk * PER_PARTITION + ck));
        n += 1;
        sum += v;
    }
    let expected_sum = (0..total as i64).sum::<i64>();
    println!("row stream: {n} rows in {} pages", stream.pages_requested());
    assert_eq!((n, sum), (total, expected_sum), "every row once");
    assert_eq!(stream.pages_requested(), total / 5000 + 1, "the last page says there is no more");

    // Back-pressure: the second page only once half of the first is taken.
    let select = Statement::new(format!("SELECT pk, ck, v FROM {ks}.t")).with_page_size(1000);
    let mut stream = s.execute_stream::<_, _, (i32, i32, i64)>(select.clone(), ());
    for taken in 1..=1500 {
        stream.next_row().await.expect("a row").expect("row");
        tokio::task::yield_now().await;
        let expected = match taken {
            ..500 => 1,
            500..1500 => 2,
            _ => 3,
        };
        assert_eq!(stream.pages_requested(), expected, "after {taken} rows");
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(stream.pages_requested(), 3, "a slow consumer holds the stream back");
    drop(stream);

    // A server error mid-stream: the table is dropped after the first page.
    let mut stream = s.execute_stream::<_, _, (i32, i32, i64)>(select, ());
    stream.next_row().await.expect("a row").expect("row");
    s.execute(&Statement::new(format!("DROP TABLE {ks}.t")), ()).await.expect("drop");
    let mut rows = 1;
    let error = loop {
        match stream.next_row().await {
            Some(Ok(_)) => rows += 1,
            Some(Err(e)) => break e,
            None => panic!("the stream ended without the error"),
        }
    };
    println!("row stream after DROP TABLE: {rows} rows, then {error}");
    assert_eq!(rows, 1000, "the first page's rows, then the error");
    assert!(matches!(error, shardwise::RowStreamError::Execution(ExecutionError::Db(_))), "{error:?}");
    assert!(stream.next_row().await.is_none(), "nothing after the error");
}

/// Counts the decisions its sessions are asked for; never retries.
#[derive(Debug, Default)]
struct CountingPolicy(std::sync::Arc<std::sync::atomic::AtomicUsize>);

impl shardwise::retry::RetryPolicy for CountingPolicy {
    fn new_session(&self) -> Box<dyn shardwise::retry::RetrySession> {
        Box::new(CountingPolicy(self.0.clone()))
    }
}

impl shardwise::retry::RetrySession for CountingPolicy {
    fn decide(&mut self, _: shardwise::retry::RequestInfo<'_>) -> shardwise::retry::RetryDecision {
        self.0.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        shardwise::retry::RetryDecision::DontRetry
    }
}

/// Execution profiles against the server: the session's default profile, a
/// statement's profile over it, the statement's own options over both, for
/// the consistency and the retry policy (the precedence of every setting is
/// unit-tested with the settings' resolution).
#[tokio::test]
async fn execution_profiles_layer_over_the_session() {
    use shardwise::ExecutionProfile;
    use std::sync::Arc;
    // THREE on a one-node cluster: Unavailable, whatever the statement.
    let strict = ExecutionProfile::new("strict").consistency(Consistency::Three);
    let s = SessionBuilder::new()
        .known_node_addr(testkit::shared_node().expect("server"))
        .default_profile(&strict)
        .build()
        .await
        .expect("session");
    let unavailable = |r: Result<shardwise::QueryResult, ExecutionError>| matches!(r, Err(ExecutionError::Db(e)) if e.kind == ErrorKind::Unavailable { consistency: Consistency::Three, required: 3, alive: 1 });
    let read = Statement::new("SELECT release_version FROM system.local");
    assert!(unavailable(s.execute(&read.clone().with_consistency(Consistency::Three), ()).await));
    let ks = crate::common::simple_keyspace(&s, "profiles").await;
    s.execute(&Statement::new(format!("CREATE TABLE {ks}.kv (pk int PRIMARY KEY)")), ()).await.expect("table");
    let insert = s.prepare(format!("INSERT INTO {ks}.kv (pk) VALUES (?)")).await.expect("prepare");
    assert!(unavailable(s.execute(&insert, (1,)).await), "the session's default profile: THREE");

    let counting = Arc::new(CountingPolicy::default());
    let relaxed =
        Arc::new(ExecutionProfile::new("relaxed").consistency(Consistency::One).retry_policy(counting.clone()));
    s.execute(&insert.clone().with_profile(relaxed.clone()), (1,)).await.expect("the statement's profile: ONE");
    let own = insert.clone().with_profile(relaxed.clone()).with_consistency(Consistency::Three);
    assert!(unavailable(s.execute(&own, (2,)).await), "the statement's own consistency wins");
    assert_eq!(counting.0.load(std::sync::atomic::Ordering::Relaxed), 1, "the profile's retry policy decided");

    assert_eq!(relaxed.name(), "relaxed");

    // Two profiles and a handle the service re-points at run time: every
    // statement holding the handle (a prepared one and its clones, an
    // unprepared one) switches at once, for the requests that start after.
    let handle = ExecutionProfile::new("oltp").consistency(Consistency::One).into_handle();
    let write = insert.clone().with_profile(handle.clone());
    let read = Statement::new(format!("SELECT pk FROM {ks}.kv WHERE pk = 1")).with_profile(handle.clone());
    s.execute(&write, (3,)).await.expect("oltp: ONE");
    s.execute(&read, ()).await.expect("oltp: ONE");
    handle.map_to_another_profile(strict.clone());
    assert!(unavailable(s.execute(&write, (4,)).await), "re-pointed to THREE");
    assert!(unavailable(s.execute(&read, ()).await), "re-pointed to THREE");
    assert!(unavailable(s.execute(&write.clone(), (4,)).await), "a clone holds the same handle");
    handle.map_to_another_profile(ExecutionProfile::new("back").consistency(Consistency::One));
    s.execute(&write, (4,)).await.expect("back to ONE");
    assert_eq!(handle.profile().name(), "back");

    // The session's default handle, re-pointed: the defaults of every
    // statement without a profile change; a statement's profile still wins.
    let defaults = ExecutionProfile::new("defaults").consistency(Consistency::One).into_handle();
    let s2 = SessionBuilder::new()
        .known_node_addr(testkit::shared_node().expect("server"))
        .default_execution_profile_handle(defaults.clone())
        .build()
        .await
        .expect("session");
    let plain = s2.prepare(format!("INSERT INTO {ks}.kv (pk) VALUES (?)")).await.expect("prepare");
    s2.execute(&plain, (5,)).await.expect("the default handle: ONE");
    let default_handle = s2.default_execution_profile_handle().expect("built with one");
    default_handle.map_to_another_profile(strict.clone());
    assert!(unavailable(s2.execute(&plain, (6,)).await), "the default handle re-pointed to THREE");
    s2.execute(&plain.clone().with_profile(relaxed.clone()), (6,)).await.expect("the statement's profile wins");
}

/// A retry policy's session can change the consistency of the next
/// attempt, and keeps its state for the request: the downgrading policy
/// retries a write that THREE cannot meet on one node at ONE, once, and a
/// user's policy that asks for a consistency no better sees its request
/// fail after the one retry it allowed.
#[tokio::test]
async fn a_retry_session_changes_the_consistency_of_the_next_attempt() {
    use shardwise::retry::{DowngradingConsistencyRetryPolicy, RequestInfo, RetryDecision, RetryPolicy, RetrySession};
    use shardwise::ExecutionProfile;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;
    let s = session(ProtocolVersion::V4, Compression::None).await;
    let ks = crate::common::simple_keyspace(&s, "downgrade").await;
    s.execute(&Statement::new(format!("CREATE TABLE {ks}.kv (pk int PRIMARY KEY, v int)")), ()).await.expect("table");
    let insert = s.prepare(format!("INSERT INTO {ks}.kv (pk, v) VALUES (?, ?)")).await.expect("prepare");
    let three = insert.clone().with_consistency(Consistency::Three);
    let failed = s.execute(&three, (1, 1)).await;
    assert!(
        matches!(&failed, Err(ExecutionError::Db(e)) if matches!(e.kind, ErrorKind::Unavailable { .. })),
        "{failed:?}"
    );
    let downgrading = ExecutionProfile::new("downgrading").retry_policy(Arc::new(DowngradingConsistencyRetryPolicy));
    let retried = three.clone().with_profile(Arc::new(downgrading));
    s.execute(&retried, (1, 1)).await.expect("retried at ONE");
    let read = s.prepare(format!("SELECT v FROM {ks}.kv WHERE pk = ?")).await.expect("prepare");
    let row = s.execute(&read, (1,)).await.expect("read").first_row::<(i32,)>().expect("typed");
    assert_eq!(row, Some((1,)), "the downgraded write was applied");

    /// Asks for QUORUM (no better than THREE on one node) and counts its
    /// attempts; its state lives in the session, one per request.
    #[derive(Debug, Default)]
    struct Stubborn(Arc<AtomicUsize>);
    struct StubbornSession(u32);
    impl RetryPolicy for Stubborn {
        fn new_session(&self) -> Box<dyn RetrySession> {
            self.0.fetch_add(1, Ordering::Relaxed);
            Box::new(StubbornSession(0))
        }
    }
    impl RetrySession for StubbornSession {
        fn decide(&mut self, info: RequestInfo<'_>) -> RetryDecision {
            self.0 += 1;
            assert_eq!(info.attempt + 1, self.0, "one session per request");
            match self.0 {
                1 => {
                    assert_eq!(info.consistency, Consistency::Three);
                    RetryDecision::RetrySameNode(Some(Consistency::Quorum))
                }
                _ => {
                    assert_eq!(info.consistency, Consistency::Quorum, "the retry went at the new consistency");
                    RetryDecision::DontRetry
                }
            }
        }
    }
    let sessions = Arc::new(AtomicUsize::new(0));
    let stubborn = ExecutionProfile::new("stubborn").retry_policy(Arc::new(Stubborn(sessions.clone())));
    let stubborn = three.with_profile(Arc::new(stubborn));
    for pk in 2..4 {
        let failed = s.execute(&stubborn, (pk, pk)).await;
        // QUORUM of RF 1 is one replica: the second attempt succeeds.
        failed.expect("the retry at QUORUM succeeds on one node");
    }
    assert_eq!(sessions.load(Ordering::Relaxed), 2, "a session per failed request");
    s.execute(&insert, (9, 9)).await.expect("a write that succeeds at once");
    assert_eq!(sessions.load(Ordering::Relaxed), 2, "no session for a request that did not fail");
}

/// A request observer hears of each attempt (node, consistency, the retry
/// decision after a failure) and of each request's end, set on the
/// session or on a profile (which wins).
#[tokio::test]
async fn a_request_observer_hears_every_attempt_and_request() {
    use shardwise::observer::{AttemptInfo, RequestId, RequestObserver};
    use shardwise::retry::{DowngradingConsistencyRetryPolicy, RetryDecision};
    use shardwise::ExecutionProfile;
    use std::sync::{Arc, Mutex};

    /// Writes down what it hears.
    #[derive(Debug, Default)]
    struct Recorder(Mutex<Vec<String>>);
    impl Recorder {
        fn take(&self) -> Vec<String> {
            std::mem::take(&mut *self.0.lock().expect("lock"))
        }
        fn push(&self, line: String) {
            self.0.lock().expect("lock").push(line);
        }
    }
    impl RequestObserver for Recorder {
        fn attempt_started(&self, a: &AttemptInfo<'_>) {
            self.push(format!("start {} retry {} {:?} {:?}", a.node, a.retry, a.consistency, a.table.map(|t| t.1)));
        }
        fn attempt_succeeded(&self, _: &AttemptInfo<'_>, _: Duration) {
            self.push("ok".into());
        }
        fn attempt_failed(&self, _: &AttemptInfo<'_>, e: &ExecutionError, _: Duration, d: Option<RetryDecision>) {
            let unavailable = matches!(e, ExecutionError::Db(e) if matches!(e.kind, ErrorKind::Unavailable { .. }));
            self.push(format!("failed unavailable={unavailable} {d:?}"));
        }
        fn request_finished(&self, _: RequestId, outcome: Result<(), &ExecutionError>, took: Duration) {
            assert!(took > Duration::ZERO);
            self.push(format!("finished ok={}", outcome.is_ok()));
        }
    }

    let node = testkit::shared_node().expect("server");
    let heard = Arc::new(Recorder::default());
    let s = SessionBuilder::new().known_node_addr(node).request_observer(heard.clone()).build().await.expect("session");
    let ks = crate::common::simple_keyspace(&s, "observed").await;
    s.execute(&Statement::new(format!("CREATE TABLE {ks}.kv (pk int PRIMARY KEY)")), ()).await.expect("table");
    let insert = s.prepare(format!("INSERT INTO {ks}.kv (pk) VALUES (?)")).await.expect("prepare");
    heard.take();
    s.execute(&insert, (1,)).await.expect("insert");
    assert_eq!(
        heard.take(),
        [format!("start {node} retry 0 LocalQuorum Some(\"kv\")"), "ok".into(), "finished ok=true".into()]
    );

    // A profile's observer wins over the session's; here it sees a retry
    // at the consistency the policy chose.
    let own = Arc::new(Recorder::default());
    let profile = ExecutionProfile::new("observed")
        .retry_policy(Arc::new(DowngradingConsistencyRetryPolicy))
        .request_observer(own.clone());
    let three = insert.clone().with_consistency(Consistency::Three).with_profile(Arc::new(profile));
    s.execute(&three, (2,)).await.expect("downgraded");
    assert_eq!(
        own.take(),
        [
            format!("start {node} retry 0 Three Some(\"kv\")"),
            "failed unavailable=true Some(RetrySameNode(Some(One)))".into(),
            format!("start {node} retry 1 One Some(\"kv\")"),
            "ok".into(),
            "finished ok=true".into()
        ]
    );
    assert!(heard.take().is_empty(), "the session's observer was not asked");
}

/// `Session::metrics` counts each node's attempts in a latency histogram
/// of its own.
#[tokio::test]
async fn metrics_have_a_latency_histogram_per_node() {
    let s = session(ProtocolVersion::V4, Compression::None).await;
    let before = s.metrics();
    let read = Statement::new("SELECT release_version FROM system.local");
    for _ in 0..50 {
        s.execute(&read, ()).await.expect("read");
    }
    let after = s.metrics();
    let node = testkit::shared_node().expect("server");
    assert_eq!(after.nodes.iter().map(|n| n.addr).collect::<Vec<_>>(), [node], "one node");
    let attempts = after.nodes[0].attempts() - before.nodes.first().map_or(0, |n| n.attempts());
    assert!(attempts >= 50, "{attempts} attempts counted for 50 requests");
    let p99 = after.nodes[0].latency_quantile(0.99).expect("a p99");
    assert!(p99 > Duration::ZERO && p99 <= after.latency_quantile(1.0).expect("session max"), "{p99:?}");
}

/// `Session::metrics` counts each request once, by kind (unpaged, first
/// pages, later pages), with its latency in the session's histogram and
/// in the rates; the connections open equal the pool's size; a request
/// timeout is counted, once.
#[tokio::test]
async fn metrics_count_requests_by_kind_connections_and_timeouts() {
    let node = testkit::shared_node().expect("server");
    let s = SessionBuilder::new()
        .known_node_addr(node)
        .connections_per_node(3)
        .connection_affinity(shardwise::ConnectionAffinity::LeastLoaded)
        .default_consistency(Consistency::One)
        .build()
        .await
        .expect("session");
    // The pool fills in the background: 3 connections, none closed.
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while s.metrics().connections < 3 {
        assert!(std::time::Instant::now() < deadline, "{:?}", s.metrics());
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let before = s.metrics();
    assert_eq!((before.connections, before.connections_opened, before.connections_closed), (3, 3, 0), "{before:?}");
    assert_eq!((before.connect_failures, before.connect_timeouts), (0, 0));

    let read = s.prepare("SELECT release_version FROM system.local WHERE key = ?").await.expect("prepare");
    for _ in 0..20 {
        s.execute(&read, ("local",)).await.expect("read");
    }
    for _ in 0..5 {
        s.execute_unpaged(&read, ("local",)).await.expect("unpaged read");
    }
    // Three pages of 2 rows of a table with more rows than that.
    let columns = Statement::new("SELECT column_name FROM system_schema.columns").with_page_size(2);
    let mut pages = s.execute_pages(columns, ());
    for _ in 0..3 {
        pages.next_page().await.expect("a page").expect("read a page");
    }
    let bad = Statement::new("SELECT nope FROM system.local");
    s.execute(&bad, ()).await.expect_err("no such column");
    s.execute_unpaged(&bad, ()).await.expect_err("no such column, unpaged");

    let after = s.metrics();
    let delta = |f: fn(&shardwise::MetricsSnapshot) -> u64| f(&after) - f(&before);
    assert_eq!(delta(|m| m.first_pages), 20 + 1 + 1, "{after:?}");
    assert_eq!(delta(|m| m.unpaged), 5 + 1);
    assert_eq!(delta(|m| m.next_pages), 2);
    assert_eq!(delta(|m| m.requests), 30);
    assert_eq!(delta(|m| m.errors), 2);
    // By kind, as the official driver's `get_errors_unpaged_num` and
    // the paged ones.
    assert_eq!((delta(|m| m.unpaged_errors), delta(|m| m.first_page_errors), delta(|m| m.next_page_errors)), (1, 1, 0));
    assert_eq!(delta(|m| m.prepares), 1);
    assert_eq!(delta(|m| m.timeouts), 0);
    assert_eq!(after.latency.count(), after.requests);
    let mean = after.latency.mean().expect("a mean");
    assert!(mean > Duration::ZERO && mean <= after.latency.max().expect("a max"), "{mean:?}");
    assert!(after.latency_percentile_ms(50.0).is_some());
    // Every request so far counted in the mean rate (requests per second
    // since the session started).
    assert!(after.rates.mean > 0.0, "{:?}", after.rates);
    assert_eq!(after.connections, 3, "{after:?}");

    // A request timeout, through a proxy that holds the answers back.
    let proxy = FaultProxy::start(node).expect("proxy");
    let slow = through(&proxy).await;
    let before = slow.metrics();
    proxy.set_rules(vec![Rule::new(Action::Delay(Duration::from_millis(500))).direction(Direction::ToClient)]);
    let late = Statement::new("SELECT key FROM system.local").with_timeout(Duration::from_millis(50));
    slow.execute(&late, ()).await.expect_err("timeout");
    let after = slow.metrics();
    assert_eq!(after.timeouts - before.timeouts, 1, "{after:?}");
    assert_eq!(after.errors - before.errors, 1);
    assert_eq!(after.requests - before.requests, 1);
}

/// A span's name and its fields, formatted.
type RecordedSpan = (String, Vec<(String, String)>);

/// Spans of the request attempts, as a minimal subscriber records them.
#[derive(Default)]
struct SpanRecorder(std::sync::Mutex<Vec<RecordedSpan>>);

struct FieldsOf<'a>(&'a mut Vec<(String, String)>);

impl tracing::field::Visit for FieldsOf<'_> {
    fn record_debug(&mut self, field: &tracing::field::Field, value: &dyn std::fmt::Debug) {
        self.0.push((field.name().to_owned(), format!("{value:?}")));
    }
}

impl tracing::Subscriber for SpanRecorder {
    fn enabled(&self, _: &tracing::Metadata<'_>) -> bool {
        true
    }
    fn new_span(&self, span: &tracing::span::Attributes<'_>) -> tracing::span::Id {
        let mut fields = Vec::new();
        span.record(&mut FieldsOf(&mut fields));
        let mut spans = self.0.lock().expect("lock");
        spans.push((span.metadata().name().to_owned(), fields));
        tracing::span::Id::from_u64(spans.len() as u64)
    }
    fn record(&self, _: &tracing::span::Id, _: &tracing::span::Record<'_>) {}
    fn record_follows_from(&self, _: &tracing::span::Id, _: &tracing::span::Id) {}
    fn event(&self, _: &tracing::Event<'_>) {}
    fn enter(&self, _: &tracing::span::Id) {}
    fn exit(&self, _: &tracing::span::Id) {}
}

/// Each attempt runs in a `request` span naming its keyspace, table,
/// node, shard and attempt number (the allocation test shows it costs no
/// allocation when nothing listens).
#[tokio::test]
async fn each_attempt_has_a_span() {
    let s = session(ProtocolVersion::V4, Compression::None).await;
    let ks = crate::common::simple_keyspace(&s, "spans").await;
    s.execute(&Statement::new(format!("CREATE TABLE {ks}.kv (pk int PRIMARY KEY)")), ()).await.expect("table");
    let insert = s.prepare(format!("INSERT INTO {ks}.kv (pk) VALUES (?)")).await.expect("prepare");
    let recorder = std::sync::Arc::new(SpanRecorder::default());
    let dispatch = tracing::Dispatch::from(recorder.clone());
    {
        let _guard = tracing::dispatcher::set_default(&dispatch);
        s.execute(&insert, (7,)).await.expect("insert");
    }
    let spans = recorder.0.lock().expect("lock").clone();
    let (_, fields) = spans.iter().find(|(name, _)| name == "request").expect("a request span");
    let field = |n: &str| fields.iter().find(|(k, _)| k == n).map(|(_, v)| v.clone());
    let node = testkit::shared_node().expect("server");
    assert_eq!(field("keyspace"), Some(format!("{ks:?}")), "{fields:?}");
    assert_eq!(field("table"), Some("\"kv\"".to_owned()));
    assert_eq!(field("node"), Some(node.to_string()));
    assert_eq!((field("shard"), field("attempt")), (Some("0".to_owned()), Some("0".to_owned())));
}

/// `Duration::MAX` as a timeout (the session's, a statement's, an
/// attempt's) means no timeout: the request runs, nothing panics on a
/// deadline past what the clock can count.
#[tokio::test]
async fn a_timeout_of_duration_max_is_no_timeout() {
    let s = SessionBuilder::new()
        .known_node_addr(testkit::shared_node().expect("server"))
        .default_consistency(Consistency::One)
        .request_timeout(Some(Duration::MAX))
        .attempt_timeout(Some(Duration::MAX))
        .build()
        .await
        .expect("session");
    let select = Statement::new("SELECT release_version FROM system.local");
    s.execute(&select, ()).await.expect("the session's timeouts at Duration::MAX");
    let own = select.clone().with_timeout(Duration::MAX).with_attempt_timeout(Duration::MAX);
    s.execute(&own, ()).await.expect("the statement's timeouts at Duration::MAX");
    let prepared = s.prepare(select).await.expect("prepare").with_timeout(Duration::MAX);
    s.execute(&prepared, ()).await.expect("a prepared statement's timeout at Duration::MAX");
}

/// A timestamp generator of the user's stamps every write that has no
/// timestamp of its own (`WRITETIME` shows it), a statement's own wins, a
/// batch takes one; the built-in monotonic one stamps increasing times
/// close to the clock.
#[tokio::test]
async fn writes_carry_the_timestamp_generators_timestamps() {
    use shardwise::timestamp::{MonotonicTimestampGenerator, TimestampGenerator};
    use std::sync::atomic::{AtomicI64, Ordering};
    use std::sync::Arc;

    #[derive(Debug)]
    struct Counting(AtomicI64);
    impl TimestampGenerator for Counting {
        fn next_timestamp(&self) -> i64 {
            self.0.fetch_add(1, Ordering::Relaxed)
        }
    }
    let build = |generator: Arc<dyn TimestampGenerator>| {
        SessionBuilder::new()
            .known_node_addr(testkit::shared_node().expect("server"))
            .default_consistency(Consistency::One)
            .timestamp_generator(generator)
            .build()
    };
    let counting = Arc::new(Counting(AtomicI64::new(1_000_000)));
    let s = build(counting.clone()).await.expect("session");
    let ks = keyspace(&s, "stamps").await;
    let writetime = |pk: i32| {
        let (s, ks) = (s.clone(), ks.clone());
        async move {
            let r = s
                .execute(&Statement::new(format!("SELECT WRITETIME(t) FROM {ks}.every_type WHERE pk = {pk}")), ())
                .await
                .expect("select");
            r.first_row::<(Option<i64>,)>().expect("type").and_then(|(t,)| t).expect("a write time")
        }
    };
    let insert = s.prepare(format!("INSERT INTO {ks}.every_type (pk, t) VALUES (?, ?)")).await.expect("prepare");
    // Every request without a timestamp takes one (the DDL and reads too).
    let next = counting.0.load(Ordering::Relaxed);
    s.execute(&insert, (1i32, "a")).await.expect("insert");
    s.execute(&insert, (2i32, "b")).await.expect("insert");
    assert_eq!((writetime(1).await, writetime(2).await), (next, next + 1), "the generator's, in order");
    s.execute(&insert.clone().with_timestamp(42), (3i32, "c")).await.expect("insert");
    assert_eq!(writetime(3).await, 42, "a statement's own timestamp wins");
    let next = counting.0.load(Ordering::Relaxed);
    s.execute(&Batch::unlogged((&insert, &insert)), ((4i32, "d"), (5i32, "e"))).await.expect("batch");
    assert_eq!((writetime(4).await, writetime(5).await), (next, next), "a batch takes one");

    let m = build(Arc::new(MonotonicTimestampGenerator::new())).await.expect("session");
    let before = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).expect("clock").as_micros() as i64;
    let insert = m.prepare(format!("INSERT INTO {ks}.every_type (pk, t) VALUES (?, ?)")).await.expect("prepare");
    m.execute(&insert, (6i32, "f")).await.expect("insert");
    m.execute(&insert, (7i32, "g")).await.expect("insert");
    let (a, b) = (writetime(6).await, writetime(7).await);
    assert!(before <= a && a < b && b < before + 60_000_000, "increasing and near the clock: {before} {a} {b}");
}
