//! The derives against Cassandra, as a user of the official driver writes
//! them: bind values matched to the markers by name (fields in another order
//! than the markers), structs as user-defined type values (alone and in a
//! `list<frozen<udt>>`), rows read back into structs, and the errors of a
//! wrong field name.

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

    // Without the markers' names (unprepared), fields go in their order.
    let unprepared = Statement::new(format!("INSERT INTO {ks}.people (homes, name, home, id) VALUES (?, ?, ?, ?)"));
    s.execute(&unprepared, person(7)).await.expect("unprepared insert in field order");
    let r = s.execute(&select, (7i64,)).await.expect("select");
    assert_eq!(r.first_row::<Person<'_>>().expect("types").expect("row").home, Some(person(7).home));
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
