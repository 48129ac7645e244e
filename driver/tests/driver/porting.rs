//! The calls a service ported from the official driver makes, written the
//! way its users write them, against the real Cassandra 5.0: batches built
//! at run time (`Batch::default()` and `append_statement` in a loop,
//! prepared and unprepared statements mixed, more than eight of them,
//! `prepare_batch`), and partial updates with unset values.

use shardwise::protocol::consistency::Consistency;
use shardwise::protocol::frame::ProtocolVersion;
use shardwise::protocol::types::ser::{DynValues, MaybeUnset};
use shardwise::{Batch, BatchStatement, ExecutionError, Session, SessionBuilder, Statement};

async fn session(version: ProtocolVersion) -> (Session, String) {
    let s = SessionBuilder::new()
        .known_node_addr(testkit::shared_node().expect("server"))
        .protocol_versions(version, version)
        .default_consistency(Consistency::One)
        .build()
        .await
        .expect("session");
    let ks = testkit::fresh_keyspace("porting");
    for ddl in [
        testkit::create_keyspace(&ks, 1),
        format!("CREATE TABLE {ks}.users (id bigint PRIMARY KEY, name text, email text, visits int)"),
        format!("CREATE TABLE {ks}.by_name (name text, id bigint, PRIMARY KEY (name, id))"),
    ] {
        s.execute(&Statement::new(ddl), ()).await.expect("ddl");
    }
    (s, ks)
}

async fn users(s: &Session, ks: &str) -> Vec<(i64, Option<String>, Option<String>, Option<i32>)> {
    let r = s.execute(&Statement::new(format!("SELECT id, name, email, visits FROM {ks}.users")), ()).await;
    let mut rows: Vec<_> = r.expect("select").rows().expect("types").map(|r| r.expect("row")).collect();
    rows.sort();
    rows
}

/// A denormalised write built at run time: per user one prepared insert
/// into each of two tables, an unprepared update, and deletes of users
/// gone, 2 + 3 × 12 statements with value lists of four types in one `Vec`.
#[tokio::test]
async fn a_batch_built_at_run_time_mixes_statements_and_value_types() {
    for version in [ProtocolVersion::V4, ProtocolVersion::V5] {
        let (s, ks) = session(version).await;
        let insert = s.prepare(format!("INSERT INTO {ks}.users (id, name) VALUES (?, ?)")).await.expect("prepare");
        let index = s.prepare(format!("INSERT INTO {ks}.by_name (name, id) VALUES (?, ?)")).await.expect("prepare");
        s.execute(&Statement::new(format!("INSERT INTO {ks}.users (id, name) VALUES (100, 'gone')")), ())
            .await
            .expect("insert");

        let names: Vec<String> = (0..12).map(|i| format!("user{i}")).collect();
        let rows: Vec<(i64, &str)> = names.iter().enumerate().map(|(i, n)| (i as i64, n.as_str())).collect();
        let index_rows: Vec<(&str, i64)> = rows.iter().map(|&(id, n)| (n, id)).collect();
        let visits: Vec<(i32, i64)> = rows.iter().map(|&(id, _)| (id as i32 * 10, id)).collect();
        let gone = (100i64,);
        let none = ();

        let mut batch: Batch = Batch::default();
        let mut values: Vec<&dyn DynValues> = Vec::new();
        for ((row, index_row), visit) in rows.iter().zip(&index_rows).zip(&visits) {
            batch.append_statement(&insert);
            values.push(row);
            batch.append_statement(&index);
            values.push(index_row);
            batch.append_statement(format!("UPDATE {ks}.users SET visits = ? WHERE id = ?"));
            values.push(visit);
        }
        batch.append_statement(Statement::new(format!("DELETE FROM {ks}.users WHERE id = ?")));
        values.push(&gone);
        batch.append_statement(format!("UPDATE {ks}.users SET email = 'first@example.com' WHERE id = 0"));
        values.push(&none);
        assert_eq!(batch.statements().len(), 38);
        s.execute(&batch, &values).await.expect("a run-time batch, unprepared statements included");

        let want: Vec<_> = (0..12i64)
            .map(|i| {
                let email = (i == 0).then(|| "first@example.com".to_owned());
                (i, Some(format!("user{i}")), email, Some(i as i32 * 10))
            })
            .collect();
        assert_eq!(users(&s, &ks).await, want, "{version:?}");
        let r = s.execute(&Statement::new(format!("SELECT count(*) FROM {ks}.by_name")), ()).await.expect("count");
        assert_eq!(r.first_row::<(i64,)>().expect("type"), Some((12,)));

        // prepare_batch: every statement prepared (each text once), so
        // the values are checked against the markers before anything is
        // sent.
        let prepared = s.prepare_batch(&batch).await.expect("prepare_batch");
        assert!(prepared.statements().iter().all(|st| matches!(st, BatchStatement::PreparedStatement(_))));
        assert_eq!(prepared.kind(), batch.kind());
        s.execute(&prepared, &values).await.expect("the prepared batch");
        let mut wrong = values.clone();
        let text = ("not a bigint",);
        wrong[37 - 1] = &text;
        let e = s.execute(&prepared, &wrong).await.expect_err("a value of the wrong type");
        assert!(e.to_string().contains("bigint") || e.to_string().contains("type"), "{e}");
        let short = &values[..10];
        let e = s.execute(&prepared, short).await.expect_err("fewer value lists than statements");
        assert!(e.to_string().contains("one value list per statement"), "{e}");
    }
}

/// A partial update with one prepared statement: the columns a caller does
/// not change are bound `MaybeUnset::Unset` and keep their values (no null,
/// no tombstone); `MaybeUnset::Set(None)` nulls one.
#[tokio::test]
async fn unset_values_leave_columns_untouched() {
    let (s, ks) = session(ProtocolVersion::V4).await;
    let upsert = s
        .prepare(format!("UPDATE {ks}.users SET name = ?, email = ?, visits = ? WHERE id = ?"))
        .await
        .expect("prepare");
    s.execute(&upsert, ("ann", "ann@example.com", 1i32, 1i64)).await.expect("write");
    let only_visits = (MaybeUnset::<&str>::Unset, MaybeUnset::<&str>::Unset, MaybeUnset::Set(2i32), 1i64);
    s.execute(&upsert, only_visits).await.expect("partial update");
    assert_eq!(
        users(&s, &ks).await,
        [(1, Some("ann".to_owned()), Some("ann@example.com".to_owned()), Some(2))],
        "untouched columns keep their values"
    );
    let null_email = (MaybeUnset::<&str>::Unset, MaybeUnset::Set(None::<&str>), MaybeUnset::<i32>::Unset, 1i64);
    s.execute(&upsert, null_email).await.expect("partial update");
    assert_eq!(users(&s, &ks).await, [(1, Some("ann".to_owned()), None, Some(2))]);
    let from_option: MaybeUnset<i32> = None.into();
    s.execute(&upsert, (MaybeUnset::Set("bo"), MaybeUnset::<&str>::Unset, from_option, 1i64)).await.expect("partial");
    assert_eq!(users(&s, &ks).await, [(1, Some("bo".to_owned()), None, Some(2))]);
}

/// The bind values of `UPDATE users SET name = ?, email = ? WHERE id = ?`,
/// by name, declared in another order than the markers.
#[derive(shardwise::SerializeValues)]
struct Contact<'a> {
    id: i64,
    email: &'a str,
    name: &'a str,
}

/// An unprepared statement with values is prepared first, as the official
/// driver's `query_unpaged` does: values matched to the markers by name
/// bind by name (regression: they were sent positionally, so `Contact`
/// wrote its email into `name`; then they were refused), and values are
/// checked against the columns' types before anything is sent (an `i32`
/// for a `bigint` is a typed error, where it went to the server untyped).
/// It is prepared once: the session caches it. A batch that was not
/// prepared still has no marker names: by-name values are refused there.
#[tokio::test]
async fn unprepared_statements_with_values_are_prepared_first() {
    let (s, ks) = session(ProtocolVersion::V4).await;
    let text = format!("UPDATE {ks}.users SET name = ?, email = ? WHERE id = ?");
    let prepares = s.metrics().prepares;
    let contact = Contact { id: 7, email: "ann@example.com", name: "ann" };
    s.execute(&Statement::new(text.clone()), &contact).await.expect("by name, unprepared");
    let rows = users(&s, &ks).await;
    assert_eq!(rows[0], (7, Some("ann".to_owned()), Some("ann@example.com".to_owned()), None), "bound by name");
    let e = s
        .execute(&Statement::new(text.clone()), ("bob", "bob@example.com", 8i32))
        .await
        .expect_err("an int for a bigint");
    assert!(matches!(e, ExecutionError::Encode(_)), "a typed error, before sending: {e:?}");
    s.execute(&Statement::new(text.clone()), ("bob", "bob@example.com", 8i64)).await.expect("positional");
    assert_eq!(s.metrics().prepares - prepares, 1, "prepared once, then from the session's cache");
    let rows = users(&s, &ks).await;
    assert_eq!(rows[1].1.as_deref(), Some("bob"));
    let mut batch: Batch = Batch::default();
    batch.append_statement(text.clone());
    let e = s.execute(&batch, [&contact as &dyn DynValues]).await.expect_err("by name in a batch not prepared");
    assert!(e.to_string().contains("need a prepared statement"), "{e}");
    // Sent as text when asked: untyped and positional, never prepared.
    let as_text = Statement::new(text.clone()).sent_as_text();
    let e = s.execute(&as_text, &contact).await.expect_err("by name, as text");
    assert!(e.to_string().contains("need a prepared statement"), "{e}");
    let e = s.execute(&as_text, ("cy", "cy@example.com", 9i32)).await.expect_err("an int for a bigint, as text");
    assert!(matches!(e, ExecutionError::Db(_)), "refused by the server: {e:?}");
    s.execute(&as_text, ("cy", "cy@example.com", 9i64)).await.expect("as text");
    assert_eq!(s.metrics().prepares - prepares, 1, "nothing prepared for the text");
}

/// `calculate_token` takes the values in the markers' order: a struct
/// bound by name gives the token of the key it binds. Regression: the
/// guide's recipe (`routing::partition_token(pk_indexes, &values, ..)`)
/// took a by-name struct in field order, and hashed its email as the key.
#[tokio::test]
async fn a_token_is_calculated_from_values_bound_by_name() {
    let (s, ks) = session(ProtocolVersion::V4).await;
    let update = s.prepare(format!("UPDATE {ks}.users SET name = ?, email = ? WHERE id = ?")).await.expect("prepare");
    let by_name = Contact { id: 42, email: "e@example.com", name: "n" };
    let positional = ("n", "e@example.com", 42i64);
    let token = update.calculate_token(&positional).expect("a token");
    assert_eq!(update.calculate_token(&by_name), Some(token));
    let key = s.prepare(format!("SELECT id FROM {ks}.users WHERE id = ?")).await.expect("prepare");
    assert_eq!(key.calculate_token(&(42i64,)), Some(token), "the token of id 42");
    let partitioner = update.partitioner().expect("murmur3");
    let naive = shardwise::routing::partition_token(update.pk_indexes(), &by_name, partitioner);
    assert_ne!(naive, Some(token), "field order hashes another column: the recipe's bug");
}
