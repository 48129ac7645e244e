//! The derives against Cassandra, as a user of the official driver writes
//! them: bind values matched to the markers by name (fields in another order
//! than the markers), structs as user-defined type values (alone and in a
//! `list<frozen<udt>>`), rows read back into structs, and the errors of a
//! wrong field name; then the official attributes: a flattened key struct,
//! a UDT field null in the database read with `default_when_null`, a UDT
//! that gained a field (`ALTER TYPE ADD`) read by structs without it and
//! with `allow_missing`, and newtype ids bound and read back.

use shardwise::execute::Executable;
use shardwise::protocol::frame::ProtocolVersion;
use shardwise::protocol::types::ser::InMarkerOrder;
use shardwise::protocol::{EncodeError, FieldMismatch};
use shardwise::routing::partition_token;
use shardwise::{Batch, DeserializeRow, ExecutionError, SerializeValues, Session, SessionBuilder, Statement};
use shardwise_macros::{DeserializeValue, SerializeValue};
use shardwise_protocol::consistency::Consistency;

use crate::common::simple_keyspace;

/// A value of `address (street text, zip int, note text)`: the type's first
/// two fields, so `note` is left out (null) when written.
#[derive(Debug, PartialEq, SerializeValue, DeserializeValue)]
struct Address<'a> {
    street: &'a str,
    zip: Option<i32>,
}

/// The same type read with its fields in another order, `note` included.
#[derive(Debug, PartialEq, DeserializeValue)]
struct FullAddress {
    note: Option<String>,
    zip: i32,
    street: String,
}

/// Bind values of `INSERT INTO people (id, name, home, homes) VALUES (?, ?, ?, ?)`,
/// in another order than the markers.
#[derive(SerializeValues)]
struct NewPerson<'a> {
    homes: Vec<Address<'a>>,
    name: &'a str,
    home: Address<'a>,
    id: i64,
}

/// A row of `SELECT homes, id, home, name ...`.
#[derive(Debug, PartialEq, DeserializeRow)]
struct Person<'a> {
    id: i64,
    name: &'a str,
    home: Option<Address<'a>>,
    homes: Vec<Address<'a>>,
}

/// A field that is no bind marker's name.
#[derive(SerializeValues)]
struct Misnamed<'a> {
    id: i64,
    nam: &'a str,
    home: Address<'a>,
    homes: Vec<Address<'a>>,
}

/// A UDT value with a field the type does not have.
#[derive(SerializeValue)]
struct Road<'a> {
    road: &'a str,
}

#[derive(SerializeValues)]
struct WrongHome<'a> {
    id: i64,
    name: &'a str,
    home: Road<'a>,
    homes: Vec<Address<'a>>,
}

async fn session() -> Session {
    SessionBuilder::new()
        .known_node_addr(testkit::shared_node().expect("server"))
        .protocol_versions(ProtocolVersion::V4, ProtocolVersion::V5)
        .default_consistency(Consistency::One)
        .build()
        .await
        .expect("session")
}

fn person(id: i64) -> NewPerson<'static> {
    NewPerson {
        homes: vec![Address { street: "first", zip: Some(1) }, Address { street: "second", zip: None }],
        name: "Ada",
        home: Address { street: "Main", zip: Some(1234) },
        id,
    }
}

#[tokio::test]
async fn by_name_values_and_udts_round_trip() {
    let s = session().await;
    let ks = simple_keyspace(&s, "derives").await;
    for ddl in [
        format!("CREATE TYPE {ks}.address (street text, zip int, note text)"),
        format!(
            "CREATE TABLE {ks}.people (id bigint PRIMARY KEY, name text, home frozen<address>, \
             homes list<frozen<address>>)"
        ),
    ] {
        s.execute(&Statement::new(ddl), ()).await.expect("ddl");
    }
    let insert = s
        .prepare(format!("INSERT INTO {ks}.people (id, name, home, homes) VALUES (?, ?, ?, ?)"))
        .await
        .expect("prepare");
    s.execute(&insert, person(1)).await.expect("insert by name");

    let select =
        s.prepare(format!("SELECT homes, id, home, name FROM {ks}.people WHERE id = ?")).await.expect("prepare");
    let r = s.execute(&select, (1i64,)).await.expect("select");
    let row: Person<'_> = r.first_row().expect("types").expect("row");
    let expected = person(1);
    assert_eq!(
        row,
        Person { id: 1, name: "Ada", home: Some(expected.home), homes: expected.homes },
        "each value in its column"
    );

    // The type's fields in another order, and the one the writer left out.
    let r = s.execute(&Statement::new(format!("SELECT home FROM {ks}.people WHERE id = 1")), ()).await.expect("select");
    let (home,): (FullAddress,) = r.first_row().expect("types").expect("row");
    assert_eq!(home, FullAddress { note: None, zip: 1234, street: "Main".into() });
    // An `Option` field absent from a written value is None; another is an error.
    let r = s.execute(&select, (1i64,)).await.expect("select");
    let err = r.rows::<(Vec<FullAddress>, i64, FullAddress, String)>().expect("types").next().expect("row");
    let err = err.expect_err("the second home has no zip");
    assert!(err.to_string().contains("field zip: unexpected null"), "{err}");

    // Batches of prepared statements match by name too.
    let batch = Batch::logged((&insert, &insert));
    s.execute(&batch, (person(2), person(3))).await.expect("batch");
    let batch = Batch::unlogged(vec![&insert, &insert]);
    s.execute(&batch, vec![person(4), person(5)]).await.expect("batch of a Vec");
    for id in 2..=5 {
        let r = s.execute(&select, (id,)).await.expect("select");
        let row: Person<'_> = r.first_row().expect("types").expect("row");
        assert_eq!((row.id, row.name, row.homes.len()), (id, "Ada", 2), "row {id}");
    }

    // The partition key's token is hashed from the marker's value (`id`),
    // not from the struct's first field.
    let partitioner = insert.partitioner().expect("partitioner");
    let six = person(6);
    let route = insert.route(&six).expect("routed");
    assert_eq!(Some(route.token), partition_token(&[0], &(6i64,), partitioner));
    let in_order = InMarkerOrder::new(&six, insert.bind_specs());
    assert_eq!(partition_token(insert.pk_indexes(), &in_order, partitioner), Some(route.token));

    // Unprepared, the session prepares it first: by name too.
    let unprepared = Statement::new(format!("INSERT INTO {ks}.people (homes, name, home, id) VALUES (?, ?, ?, ?)"));
    s.execute(&unprepared, person(7)).await.expect("by name on an unprepared insert");
    let r = s.execute(&select, (7i64,)).await.expect("select");
    assert_eq!(r.first_row::<Person<'_>>().expect("types").map(|p| p.id), Some(7), "written by name");
}

#[tokio::test]
async fn wrong_field_names_are_clear_errors() {
    let s = session().await;
    let ks = simple_keyspace(&s, "derives_err").await;
    for ddl in [
        format!("CREATE TYPE {ks}.address (street text, zip int, note text)"),
        format!(
            "CREATE TABLE {ks}.people (id bigint PRIMARY KEY, name text, home frozen<address>, \
             homes list<frozen<address>>)"
        ),
    ] {
        s.execute(&Statement::new(ddl), ()).await.expect("ddl");
    }
    let insert = s
        .prepare(format!("INSERT INTO {ks}.people (id, name, home, homes) VALUES (?, ?, ?, ?)"))
        .await
        .expect("prepare");

    let misnamed = Misnamed { id: 1, nam: "Ada", home: Address { street: "x", zip: None }, homes: vec![] };
    let err = s.execute(&insert, misnamed).await.expect_err("no field for marker `name`");
    let ExecutionError::Encode(EncodeError::Fields { mismatch, cql_type, .. }) = &err else { panic!("{err:?}") };
    assert_eq!(**mismatch, FieldMismatch::NoFieldForMarker { marker: "name".into() });
    assert!(cql_type.contains("name text"), "{cql_type}");
    assert!(err.to_string().contains("bind marker \"name\""), "{err}");

    let wrong = WrongHome { id: 1, name: "Ada", home: Road { road: "x" }, homes: vec![] };
    let err = s.execute(&insert, wrong).await.expect_err("no UDT field `road`");
    let ExecutionError::Encode(EncodeError::Fields { mismatch, cql_type, .. }) = &err else { panic!("{err:?}") };
    assert_eq!(**mismatch, FieldMismatch::NoSuchField { field: "road".into() });
    assert_eq!(*cql_type, format!("{ks}.address"));

    // Nothing was written.
    let r = s.execute(&Statement::new(format!("SELECT id FROM {ks}.people")), ()).await.expect("select");
    assert_eq!(r.rows_count(), 0);
}

// ---------------------------------------------------------------- the official attributes

/// The key columns of `events`, a struct of its own shared by statements.
#[derive(Debug, Clone, PartialEq, SerializeValues, DeserializeRow)]
struct EventKey {
    tenant: String,
    id: i64,
}

/// A whole `events` row: the key flattened in, as with the official
/// `#[scylla(flatten)]`.
#[derive(Debug, PartialEq, SerializeValues, DeserializeRow)]
struct Event {
    author: String,
    #[shardwise(flatten)]
    key: EventKey,
    note: Option<String>,
}

#[tokio::test]
async fn flattened_structs_bind_and_read_by_name() {
    let s = session().await;
    let ks = simple_keyspace(&s, "derives_flat").await;
    let ddl =
        format!("CREATE TABLE {ks}.events (tenant text, id bigint, note text, author text, PRIMARY KEY (tenant, id))");
    s.execute(&Statement::new(ddl), ()).await.expect("ddl");
    // The markers in another order than the struct's fields, the key's in the middle.
    let insert = s
        .prepare(format!("INSERT INTO {ks}.events (note, id, author, tenant) VALUES (?, ?, ?, ?)"))
        .await
        .expect("prepare");
    let event = |id, note: Option<&str>| Event {
        author: "ada".into(),
        key: EventKey { tenant: "acme".into(), id },
        note: note.map(Into::into),
    };
    s.execute(&insert, event(1, Some("first"))).await.expect("insert");
    s.execute(&insert, event(2, None)).await.expect("insert");

    // The key struct alone binds the WHERE clause; the row reads back whole.
    let select = s
        .prepare(format!("SELECT id, note, tenant, author FROM {ks}.events WHERE tenant = ? AND id = ?"))
        .await
        .expect("prepare");
    for (id, note) in [(1, Some("first")), (2, None)] {
        let key = EventKey { tenant: "acme".into(), id };
        let r = s.execute(&select, key).await.expect("select");
        assert_eq!(r.first_row::<Event>().expect("types"), Some(event(id, note)), "event {id}");
    }
    // The flattened struct's columns count as the parent's: one missing from
    // the query is named.
    let r = s
        .execute(&Statement::new(format!("SELECT note, author, id FROM {ks}.events WHERE tenant = 'acme'")), ())
        .await
        .expect("select");
    let err = r.rows::<Event>().map(|_| ()).expect_err("no tenant column");
    assert!(err.to_string().contains("no column named \"tenant\""), "{err}");
}

/// `stats (hits int, label text)`: `hits` is left null by a writer.
#[derive(Debug, PartialEq, DeserializeValue)]
struct Stats {
    #[shardwise(default_when_null)]
    hits: i32,
    label: String,
}

/// The same without the attribute.
#[derive(Debug, DeserializeValue)]
struct StrictStats {
    #[allow(dead_code)]
    hits: i32,
}

#[tokio::test]
async fn udt_fields_null_in_the_database_read_as_defaults() {
    let s = session().await;
    let ks = simple_keyspace(&s, "derives_null").await;
    for ddl in [
        format!("CREATE TYPE {ks}.stats (hits int, label text)"),
        format!("CREATE TABLE {ks}.pages (id int PRIMARY KEY, stats frozen<stats>)"),
        // `hits` not given: null in the stored value.
        format!("INSERT INTO {ks}.pages (id, stats) VALUES (1, {{label: 'home'}})"),
        format!("INSERT INTO {ks}.pages (id, stats) VALUES (2, {{hits: 7, label: 'about'}})"),
    ] {
        s.execute(&Statement::new(ddl), ()).await.expect("cql");
    }
    let select = s.prepare(format!("SELECT stats FROM {ks}.pages WHERE id = ?")).await.expect("prepare");
    let r = s.execute(&select, (1,)).await.expect("select");
    assert_eq!(r.first_row::<(Stats,)>().expect("types"), Some((Stats { hits: 0, label: "home".into() },)));
    let r = s.execute(&select, (2,)).await.expect("select");
    assert_eq!(r.first_row::<(Stats,)>().expect("types"), Some((Stats { hits: 7, label: "about".into() },)));
    // Without `default_when_null` the null is an error naming the field.
    let r = s.execute(&select, (1,)).await.expect("select");
    let err = r.rows::<(StrictStats,)>().expect("types").next().expect("row").expect_err("hits is null");
    assert!(err.to_string().contains("field hits: unexpected null"), "{err}");
}

/// `stats (hits int, label text)` read by a struct that reads `label` only,
/// refusing fields it does not read.
#[derive(Debug, PartialEq, DeserializeValue)]
#[shardwise(forbid_excess_udt_fields)]
struct LabelOnly {
    label: String,
}

/// The same struct reading both fields.
#[derive(Debug, PartialEq, DeserializeValue)]
#[shardwise(forbid_excess_udt_fields)]
struct BothStats {
    label: String,
    hits: Option<i32>,
}

/// `forbid_excess_udt_fields` (the official attribute): a type with a field
/// the struct does not read fails the type check, naming the field; the
/// same type read by a struct with every field, or without the attribute
/// (`Stats` above skips nothing, `LabelOnly` without it would skip
/// `hits`), reads.
#[tokio::test]
async fn excess_udt_fields_are_refused_when_asked() {
    let s = session().await;
    let ks = simple_keyspace(&s, "derives_excess").await;
    for ddl in [
        format!("CREATE TYPE {ks}.stats (hits int, label text)"),
        format!("CREATE TABLE {ks}.pages (id int PRIMARY KEY, stats frozen<stats>)"),
        format!("INSERT INTO {ks}.pages (id, stats) VALUES (1, {{hits: 3, label: 'home'}})"),
    ] {
        s.execute(&Statement::new(ddl), ()).await.expect("cql");
    }
    let select = s.prepare(format!("SELECT stats FROM {ks}.pages WHERE id = ?")).await.expect("prepare");
    let r = s.execute(&select, (1,)).await.expect("select");
    let err = r.rows::<(LabelOnly,)>().map(|_| ()).expect_err("hits is not read");
    assert!(err.to_string().contains("field \"hits\", which the struct does not read"), "{err}");
    let both = r.first_row::<(BothStats,)>().expect("every field read");
    assert_eq!(both, Some((BothStats { label: "home".into(), hits: Some(3) },)));
}

/// `profile` as first created: `(nick text)`.
#[derive(Debug, PartialEq, SerializeValue, DeserializeValue)]
struct ProfileV1 {
    nick: String,
}

/// A newer program's view: `badge` comes with `ALTER TYPE ... ADD`, `stars`
/// never existed in the type.
#[derive(Debug, PartialEq, DeserializeValue)]
struct ProfileV2 {
    nick: String,
    #[shardwise(allow_missing)]
    badge: Option<String>,
    #[shardwise(allow_missing)]
    stars: i32,
}

/// The same without `allow_missing`.
#[derive(Debug, DeserializeValue)]
struct ProfileStrict {
    #[allow(dead_code)]
    stars: i32,
}

#[tokio::test]
async fn udts_read_across_alter_type_add() {
    let s = session().await;
    let ks = simple_keyspace(&s, "derives_alter").await;
    for ddl in [
        format!("CREATE TYPE {ks}.profile (nick text)"),
        format!("CREATE TABLE {ks}.members (id int PRIMARY KEY, profile frozen<profile>)"),
    ] {
        s.execute(&Statement::new(ddl), ()).await.expect("ddl");
    }
    let insert = s.prepare(format!("INSERT INTO {ks}.members (id, profile) VALUES (?, ?)")).await.expect("prepare");
    s.execute(&insert, (1, ProfileV1 { nick: "ann".into() })).await.expect("insert");
    let select = Statement::new(format!("SELECT profile FROM {ks}.members WHERE id = 1"));
    let read = |r: shardwise::QueryResult| r.first_row::<(ProfileV2,)>().expect("types").map(|(p,)| p);

    // Before the type has `badge` or `stars`: both their defaults.
    let v2 = ProfileV2 { nick: "ann".into(), badge: None, stars: 0 };
    assert_eq!(read(s.execute(&select, ()).await.expect("select")), Some(v2));
    let r = s.execute(&select, ()).await.expect("select");
    let err = r.rows::<(ProfileStrict,)>().map(|_| ()).expect_err("no field stars");
    assert!(err.to_string().contains("no field named \"stars\""), "{err}");

    s.execute(&Statement::new(format!("ALTER TYPE {ks}.profile ADD badge text")), ()).await.expect("alter");
    s.execute(
        &Statement::new(format!("INSERT INTO {ks}.members (id, profile) VALUES (2, {{nick: 'bob', badge: 'gold'}})")),
        (),
    )
    .await
    .expect("insert");
    // The old struct, without the new field, reads old and new values.
    for (id, nick) in [(1, "ann"), (2, "bob")] {
        let r = s
            .execute(&Statement::new(format!("SELECT profile FROM {ks}.members WHERE id = {id}")), ())
            .await
            .expect("select");
        assert_eq!(r.first_row::<(ProfileV1,)>().expect("types"), Some((ProfileV1 { nick: nick.into() },)));
    }
    // The new one reads `badge` once the type has it (null in the old value).
    assert_eq!(
        read(s.execute(&select, ()).await.expect("select")),
        Some(ProfileV2 { nick: "ann".into(), badge: None, stars: 0 })
    );
    let r = s.execute(&Statement::new(format!("SELECT profile FROM {ks}.members WHERE id = 2")), ()).await;
    assert_eq!(read(r.expect("select")), Some(ProfileV2 { nick: "bob".into(), badge: Some("gold".into()), stars: 0 }));
    // And the old struct still writes to the altered type (its fields are the type's first).
    s.execute(&insert, (3, ProfileV1 { nick: "cyd".into() })).await.expect("insert after alter");
}

/// A newtype id, as official users hand-write `SerializeValue` for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, SerializeValue, DeserializeValue)]
struct UserId(uuid::Uuid);

/// A borrowed newtype.
#[derive(Debug, PartialEq, SerializeValue, DeserializeValue)]
struct Nick<'a>(&'a str);

#[derive(SerializeValues)]
struct NewUser<'a> {
    id: UserId,
    nick: Nick<'a>,
    friends: Vec<UserId>,
}

#[derive(Debug, PartialEq, DeserializeRow)]
struct UserRow<'a> {
    id: UserId,
    nick: Nick<'a>,
    friends: Option<Vec<UserId>>,
}

#[tokio::test]
async fn newtype_ids_bind_and_read_back() {
    let s = session().await;
    let ks = simple_keyspace(&s, "derives_newtype").await;
    let ddl = format!("CREATE TABLE {ks}.users (id uuid PRIMARY KEY, nick text, friends list<uuid>)");
    s.execute(&Statement::new(ddl), ()).await.expect("ddl");
    let (ann, bob) = (UserId(uuid::Uuid::from_u128(1)), UserId(uuid::Uuid::from_u128(2)));
    let insert =
        s.prepare(format!("INSERT INTO {ks}.users (id, nick, friends) VALUES (?, ?, ?)")).await.expect("prepare");
    s.execute(&insert, NewUser { id: ann, nick: Nick("ann"), friends: vec![bob] }).await.expect("insert");
    s.execute(&insert, (bob, Nick("bob"), None::<Vec<UserId>>)).await.expect("insert a tuple");

    let select = s.prepare(format!("SELECT friends, nick, id FROM {ks}.users WHERE id = ?")).await.expect("prepare");
    let r = s.execute(&select, (ann,)).await.expect("select");
    assert_eq!(
        r.first_row::<UserRow>().expect("types"),
        Some(UserRow { id: ann, nick: Nick("ann"), friends: Some(vec![bob]) })
    );
    let r = s.execute(&select, (bob,)).await.expect("select");
    let (friends, nick, id) = r.first_row::<(Option<Vec<UserId>>, String, UserId)>().expect("types").expect("row");
    assert_eq!((friends, nick.as_str(), id), (None, "bob", bob));
    // The newtype has its field's type: not a text.
    let by_nick =
        s.prepare(format!("SELECT id FROM {ks}.users WHERE nick = ? ALLOW FILTERING")).await.expect("prepare");
    let err = s.execute(&by_nick, (ann,)).await.expect_err("a uuid for a text marker");
    assert!(matches!(err, ExecutionError::Encode(EncodeError::TypeMismatch { .. })), "{err:?}");
}
