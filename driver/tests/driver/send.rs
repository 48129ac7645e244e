//! The driver's futures are `Send` whatever the bind values borrow: `&str`,
//! `&[u8]`, `Option<&str>`, slices and `Vec`s of `&str`, derived structs
//! with a lifetime, batches, paging, preparing, and the connection's own
//! `execute` and `prepare`. Spawned tasks and handlers (every axum or tonic
//! handler is one) bind borrowed values; each such future used to be
//! rejected with "implementation of `Send` is not general enough".
//!
//! Most of this module is checked by the compiler: `tokio::spawn` and
//! [`assert_send`] do not compile when a future is not `Send`. rustc only
//! finds the problem when the driver's future is part of another future's
//! state (as in a spawned task), so each check wraps the call in an `async`
//! block instead of asserting on the driver's future alone. The tests then
//! run the same futures against the real server on a multi-threaded
//! runtime.

use std::future::Future;
use std::sync::Arc;

use shardwise::execute::Params;
use shardwise::protocol::consistency::Consistency;
use shardwise::protocol::frame::ProtocolVersion;
use shardwise::{Batch, Connection, ExecutionError, Session, SessionBuilder, Statement};

/// Does not compile unless `future` is `Send`; returns it to be awaited.
fn assert_send<F: Future + Send>(future: F) -> F {
    future
}

async fn session(version: ProtocolVersion) -> Session {
    SessionBuilder::new()
        .known_node_addr(testkit::shared_node().expect("server"))
        .protocol_versions(version, version)
        .default_consistency(Consistency::One)
        .build()
        .await
        .expect("session")
}

/// A fresh keyspace with the tables the tests write.
async fn keyspace(s: &Session) -> String {
    let ks = testkit::fresh_keyspace("send");
    for ddl in [
        testkit::create_keyspace(&ks, 1),
        format!("CREATE TABLE {ks}.kv (pk bigint PRIMARY KEY, v1 bigint, v2 text, b blob, o text, l list<text>)"),
        format!("CREATE TABLE {ks}.words (k text PRIMARY KEY, v text)"),
    ] {
        s.execute(&Statement::new(ddl), ()).await.expect("ddl");
    }
    ks
}

async fn v2(s: &Session, ks: &str, pk: i64) -> Option<String> {
    let select = s.prepare(format!("SELECT v2 FROM {ks}.kv WHERE pk = ?")).await.expect("prepare");
    let r = s.execute(&select, (pk,)).await.expect("select");
    r.first_row::<(Option<String>,)>().expect("types").and_then(|(v,)| v)
}

/// The README's pattern in a spawned task: a `&str` in the values tuple.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn spawned_tasks_bind_a_str() {
    let session = Arc::new(session(ProtocolVersion::V5).await);
    let ks = keyspace(&session).await;
    let insert =
        Arc::new(session.prepare(format!("INSERT INTO {ks}.kv (pk, v1, v2) VALUES (?, ?, ?)")).await.expect("prepare"));
    let mut tasks = Vec::new();
    for pk in 0..200i64 {
        let (s, ins) = (session.clone(), insert.clone());
        tasks.push(tokio::spawn(async move { s.execute(&*ins, (pk, pk * 2, "some text")).await.map(drop) }));
    }
    for t in tasks {
        t.await.expect("task").expect("insert");
    }
    assert_eq!(v2(&session, &ks, 199).await.as_deref(), Some("some text"));
}

/// A request handler borrowing its argument from the caller, as web
/// frameworks write them.
async fn handle(s: Arc<Session>, ks: &str, pk: i64, name: &str) -> Result<usize, ExecutionError> {
    let insert = s.prepare(format!("INSERT INTO {ks}.kv (pk, v1, v2) VALUES (?, ?, ?)")).await?;
    s.execute(&insert, (pk, pk * 2, name)).await?;
    let words = s.prepare(format!("INSERT INTO {ks}.words (k, v) VALUES (?, ?)")).await?;
    s.execute(&words, (name, name)).await?;
    Ok(name.len())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_handler_borrowing_its_arguments_is_spawned() {
    let session = Arc::new(session(ProtocolVersion::V4).await);
    let ks = keyspace(&session).await;
    let mut tasks = Vec::new();
    for pk in 0..50i64 {
        let (s, ks, owned_name) = (session.clone(), ks.clone(), format!("name {pk}"));
        tasks.push(tokio::spawn(async move { handle(s, &ks, pk, &owned_name).await }));
    }
    for t in tasks {
        t.await.expect("task").expect("handled");
    }
    assert_eq!(v2(&session, &ks, 7).await.as_deref(), Some("name 7"));
}

#[derive(shardwise::SerializeValues)]
struct Entry<'a> {
    pk: i64,
    v2: &'a str,
    b: &'a [u8],
}

/// Every shape of borrowed values, through every entry point: each future
/// is checked `Send` while borrowing the test's locals, then run.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_borrowed_value_shape_and_entry_point() {
    let s = session(ProtocolVersion::V5).await;
    let ks = keyspace(&s).await;
    let name = String::from("borrowed");
    let name = name.as_str();
    let bytes = vec![0u8, 1, 2, 0xff];
    let blob = bytes.as_slice();

    // `prepare` of a borrowed text.
    let cql = format!("INSERT INTO {ks}.kv (pk, v1, v2, b, o, l) VALUES (?, ?, ?, ?, ?, ?)");
    let insert = assert_send(async { s.prepare(cql.as_str()).await }).await.expect("prepare");
    let insert = &insert;

    // A tuple of `&str`, `&[u8]`, `Option<&str>` and a list given as `&[&str]`.
    let list = [name, "two"];
    assert_send(async { s.execute(insert, (1i64, 2i64, name, blob, Some(name), &list[..])).await })
        .await
        .expect("tuple");
    // `None` of a borrowed type, and a list given as `Vec<&str>`.
    assert_send(async { s.execute(insert, (2i64, 4i64, name, blob, None::<&str>, vec![name])).await })
        .await
        .expect("none");

    // A derived struct with a lifetime parameter.
    let partial = s.prepare(format!("INSERT INTO {ks}.kv (pk, v2, b) VALUES (?, ?, ?)")).await.expect("prep");
    let partial = &partial;
    assert_send(async { s.execute(partial, Entry { pk: 3, v2: name, b: blob }).await }).await.expect("struct");

    // Values as a slice and as a `Vec` of `&str`, prepared and not.
    let words = s.prepare(format!("INSERT INTO {ks}.words (k, v) VALUES (?, ?)")).await.expect("prepare");
    let words = &words;
    let pair = [name, "slice"];
    assert_send(async { s.execute(words, &pair[..]).await }).await.expect("slice");
    let unprepared = Statement::new(format!("INSERT INTO {ks}.words (k, v) VALUES (?, ?)"));
    assert_send(async { s.execute(&unprepared, vec!["vec", name]).await }).await.expect("vec");

    // Batches: a tuple of tuples and a `Vec` of tuples with borrowed values.
    let batch = Batch::logged((partial, partial));
    assert_send(async { s.execute(&batch, ((10i64, name, blob), (11i64, name, blob))).await }).await.expect("batch");
    let many = Batch::unlogged(vec![partial; 2]);
    let rows = vec![(12i64, name, blob), (13i64, name, blob)];
    assert_send(async { s.execute(&many, rows).await }).await.expect("vec batch");

    // A page, and every page through the pager, selected by a `&str`.
    let select = s.prepare(format!("SELECT v FROM {ks}.words WHERE k = ?")).await.expect("prepare");
    let select = &select;
    let key = (name,);
    let page = assert_send(async { s.execute_page(select, &key, None).await }).await.expect("page");
    assert_eq!(page.first_row::<(&str,)>().expect("types"), Some(("slice",)));
    let mut pager = s.execute_pages(select, (name,));
    let all: Vec<(String,)> = assert_send(async { pager.collect_rows().await }).await.expect("rows");
    assert_eq!(all, [("slice".to_owned(),)]);
    let vec_row = assert_send(async { s.execute(select, ("vec",)).await }).await.expect("select");
    assert_eq!(vec_row.first_row::<(&str,)>().expect("types"), Some((name,)));

    // The connection's own `prepare` and `execute`.
    let conn = Connection::open(testkit::shared_node().expect("server"), &Default::default()).await.expect("connect");
    let conn = &conn;
    let on_conn = assert_send(async { conn.prepare(cql.as_str()).await }).await.expect("prepare on connection");
    let on_conn = &on_conn;
    let values = (4i64, 8i64, name, blob, Some(name), &list[..]);
    let params = Params::new(Consistency::One);
    assert_send(async { conn.execute(on_conn, &values, params).await }).await.expect("execute on connection");

    for (pk, want) in [(1, Some(name)), (2, Some(name)), (3, Some(name)), (4, Some(name)), (10, Some(name))] {
        assert_eq!(v2(&s, &ks, pk).await.as_deref(), want, "pk {pk}");
    }
    let r = s.execute(&Statement::new(format!("SELECT b, o, l FROM {ks}.kv WHERE pk = 1")), ()).await.expect("select");
    let row: Option<(&[u8], &str, Vec<&str>)> = r.first_row().expect("types");
    assert_eq!(row, Some((blob, name, list.to_vec())));
}

/// The same futures spawned, owning what they borrow from: the compile-time
/// check `tokio::spawn` makes (`Send + 'static`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn spawned_batches_pages_and_connection_requests() {
    let s = session(ProtocolVersion::V5).await;
    let ks = keyspace(&s).await;
    let insert =
        Arc::new(s.prepare(format!("INSERT INTO {ks}.kv (pk, v2, b) VALUES (?, ?, ?)")).await.expect("prepare"));
    let select = Arc::new(s.prepare(format!("SELECT v2 FROM {ks}.kv WHERE pk = ?")).await.expect("prepare"));
    let conn = Connection::open(testkit::shared_node().expect("server"), &Default::default()).await.expect("connect");
    let mut tasks = Vec::new();
    for pk in 0..20i64 {
        let (s, insert, select, conn, ks) = (s.clone(), insert.clone(), select.clone(), conn.clone(), ks.clone());
        tasks.push(tokio::spawn(async move {
            let name = format!("n{pk}");
            let name = name.as_str();
            let blob: &[u8] = &[1, 2, 3];
            let batch = Batch::unlogged((&*insert, &*insert));
            s.execute(&batch, ((pk, name, blob), (pk + 1000, name, blob))).await?;
            s.execute(&*insert, Entry { pk: pk + 2000, v2: name, b: blob }).await?;
            let page = s.execute_page(&*select, &(pk,), None).await?;
            assert_eq!(page.first_row::<(&str,)>().expect("types"), Some((name,)));
            let cql = format!("SELECT v2 FROM {ks}.kv WHERE pk = ?");
            let on_conn = conn.prepare(&cql).await?;
            let r = conn.execute(&on_conn, &(pk + 1000,), Params::new(Consistency::One)).await?;
            assert_eq!(r.first_row::<(&str,)>().expect("types"), Some((name,)));
            Ok::<_, ExecutionError>(())
        }));
    }
    for t in tasks {
        t.await.expect("task").expect("requests");
    }
}
