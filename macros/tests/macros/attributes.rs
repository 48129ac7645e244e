//! The attributes a user of the official driver brings along: `flatten`
//! (values and rows), `default_when_null` (rows and UDTs), `allow_missing`
//! (UDTs read from a type without the field), `skip_name_checks` (in
//! order), and newtypes derived as their one field's value.

#![allow(clippy::unwrap_used)] // A test may panic on a broken fixture.

use bytes::Bytes;
use shardwise_macros::{DeserializeRow, DeserializeValue, SerializeValue, SerializeValues};
use shardwise_protocol::rows::{ResultMetadata, Rows, RowsError};
use shardwise_protocol::types::de::{DeserializeError, DeserializeValue, FrameSlice};
use shardwise_protocol::types::ser::{InMarkerOrder, SerializeValue, SerializeValues};
use shardwise_protocol::types::{ColumnSpec, ColumnType};
use shardwise_protocol::{EncodeError, FieldMismatch};
use uuid::Uuid;

use crate::common::spec;

/// The key part of a row, shared by several statements.
#[derive(Debug, PartialEq, SerializeValues, DeserializeRow)]
struct Key<'a> {
    tenant: &'a str,
    id: i64,
}

/// A statement's values: the key's fields and one of its own.
#[derive(Debug, PartialEq, SerializeValues, DeserializeRow)]
struct Entry<'a> {
    note: Option<&'a str>,
    #[shardwise(flatten)]
    key: Key<'a>,
}

/// Two levels of flattening.
#[derive(Debug, PartialEq, SerializeValues, DeserializeRow)]
struct Audited<'a> {
    #[shardwise(flatten)]
    entry: Entry<'a>,
    by: &'a str,
}

fn bytes(v: &impl SerializeValues) -> Vec<u8> {
    let mut buf = Vec::new();
    v.encode(&mut buf);
    assert_eq!(v.encoded_len().unwrap(), buf.len());
    buf
}

fn in_marker_order(v: &impl SerializeValues, specs: &[ColumnSpec]) -> Vec<u8> {
    v.check_types(specs).unwrap();
    bytes(&InMarkerOrder::new(v, specs))
}

fn value(v: impl SerializeValue) -> Vec<u8> {
    let mut buf = Vec::new();
    v.encode(&mut buf);
    buf.split_off(4)
}

fn rows(specs: Vec<ColumnSpec>, data: &[Vec<Option<Vec<u8>>>]) -> Rows {
    let metadata = ResultMetadata { columns_count: specs.len(), specs: Some(specs), ..Default::default() };
    let raw: Vec<Vec<Option<&[u8]>>> = data.iter().map(|row| row.iter().map(|v| v.as_deref()).collect()).collect();
    Rows::from_raw(metadata, &raw).unwrap()
}

fn entry() -> Entry<'static> {
    Entry { note: Some("hi"), key: Key { tenant: "acme", id: 7 } }
}

#[test]
fn flattened_values_are_matched_by_name_like_the_parents_own() {
    let e = entry();
    assert_eq!(e.count(), 3);
    // In field order: the parent's, then the flattened struct's in its order.
    assert_eq!(bytes(&e), bytes(&(Some("hi"), "acme", 7i64)));
    // Markers in any order take the value of their name.
    let specs = [spec("id", ColumnType::BigInt), spec("note", ColumnType::Text), spec("tenant", ColumnType::Text)];
    assert_eq!(in_marker_order(&e, &specs), bytes(&(7i64, Some("hi"), "acme")));
    // Two levels.
    let a = Audited { entry: entry(), by: "root" };
    let specs = [
        spec("by", ColumnType::Text),
        spec("tenant", ColumnType::Text),
        spec("note", ColumnType::Text),
        spec("id", ColumnType::BigInt),
    ];
    assert_eq!(a.count(), 4);
    assert_eq!(in_marker_order(&a, &specs), bytes(&("root", "acme", Some("hi"), 7i64)));
}

#[test]
fn flattened_values_report_the_same_errors() {
    let e = entry();
    let fields = |r: Result<(), EncodeError>| match r {
        Err(EncodeError::Fields { mismatch, .. }) => *mismatch,
        other => panic!("{other:?}"),
    };
    // A flattened field without a marker is named.
    let specs = [spec("note", ColumnType::Text), spec("tenant", ColumnType::Text)];
    assert_eq!(fields(e.check_types(&specs)), FieldMismatch::NoMarkerForField { field: "id".into() });
    // A marker nobody has.
    let specs = [spec("note", ColumnType::Text), spec("tenant", ColumnType::Text), spec("idx", ColumnType::BigInt)];
    assert_eq!(fields(e.check_types(&specs)), FieldMismatch::NoFieldForMarker { marker: "idx".into() });
    // A flattened marker twice.
    let specs = [spec("id", ColumnType::BigInt), spec("id", ColumnType::BigInt), spec("tenant", ColumnType::Text)];
    assert_eq!(fields(e.check_types(&specs)), FieldMismatch::DuplicateMarker { marker: "id".into() });
    // A flattened value of the wrong type.
    let specs = [spec("id", ColumnType::Int), spec("note", ColumnType::Text), spec("tenant", ColumnType::Text)];
    let err = e.check_types(&specs).unwrap_err();
    assert!(
        matches!(err, EncodeError::TypeMismatch { ref cql_type, .. } if cql_type.contains("bind marker id")),
        "{err}"
    );
}

#[test]
fn flattened_rows_are_read_by_name() {
    let specs = vec![
        spec("by", ColumnType::Text),
        spec("id", ColumnType::BigInt),
        spec("note", ColumnType::Text),
        spec("tenant", ColumnType::Text),
    ];
    let r = rows(specs, &[vec![Some(value("root")), Some(value(7i64)), None, Some(value("acme"))]]);
    let a: Vec<Audited> = r.rows::<Audited>().unwrap().map(Result::unwrap).collect();
    assert_eq!(a, [Audited { entry: Entry { note: None, key: Key { tenant: "acme", id: 7 } }, by: "root" }]);

    // A flattened struct's column missing from the row is named.
    let r =
        rows(vec![spec("by", ColumnType::Text), spec("note", ColumnType::Text), spec("id", ColumnType::BigInt)], &[]);
    match r.rows::<Audited>().map(|_| ()) {
        Err(RowsError::TypeCheck(e)) => {
            assert_eq!(e.column.as_deref(), Some("tenant"));
            assert!(e.cql_type.contains("no column named \"tenant\""), "{e}");
        }
        other => panic!("{other:?}"),
    }
    // A column of the wrong type inside the flattened struct.
    let r = rows(
        vec![
            spec("by", ColumnType::Text),
            spec("note", ColumnType::Text),
            spec("id", ColumnType::Text),
            spec("tenant", ColumnType::Text),
        ],
        &[],
    );
    match r.rows::<Audited>().map(|_| ()) {
        Err(RowsError::TypeCheck(e)) => assert_eq!(e.column.as_deref(), Some("id"), "{e}"),
        other => panic!("{other:?}"),
    }
}

/// The same in order: a flattened struct takes as many positions as it has
/// fields.
#[derive(Debug, PartialEq, SerializeValues, DeserializeRow)]
#[shardwise(flavor = "in_order")]
struct Pair {
    a: i32,
    b: i32,
}

#[derive(Debug, PartialEq, SerializeValues, DeserializeRow)]
#[shardwise(flavor = "in_order")]
struct Triple {
    first: i64,
    #[shardwise(flatten)]
    pair: Pair,
    last: Option<String>,
}

#[test]
fn flattened_in_order() {
    let t = Triple { first: 1, pair: Pair { a: 2, b: 3 }, last: Some("x".into()) };
    let specs = vec![
        spec("c1", ColumnType::BigInt),
        spec("c2", ColumnType::Int),
        spec("c3", ColumnType::Int),
        spec("c4", ColumnType::Text),
    ];
    t.check_types(&specs).unwrap();
    assert_eq!(bytes(&t), bytes(&(1i64, 2i32, 3i32, "x")));
    let err = t.check_types(&specs[..3]).unwrap_err();
    assert!(matches!(err, EncodeError::InvalidValue { .. }), "{err}");
    let mut wrong = specs.clone();
    wrong[2] = spec("c3", ColumnType::Text);
    assert!(matches!(t.check_types(&wrong), Err(EncodeError::TypeMismatch { .. })));

    let r = rows(specs, &[vec![Some(value(1i64)), Some(value(2i32)), Some(value(3i32)), None]]);
    let read: Vec<Triple> = r.rows::<Triple>().unwrap().map(Result::unwrap).collect();
    assert_eq!(read, [Triple { first: 1, pair: Pair { a: 2, b: 3 }, last: None }]);
    let r = rows(vec![spec("c1", ColumnType::BigInt), spec("c2", ColumnType::Int), spec("c3", ColumnType::Int)], &[]);
    match r.rows::<Triple>().map(|_| ()) {
        Err(RowsError::TypeCheck(e)) => assert!(e.cql_type.contains("4 expected"), "{e}"),
        other => panic!("{other:?}"),
    }
}

/// Fields named after the markers, in another order.
#[derive(SerializeValues)]
#[shardwise(flavor = "in_order")]
struct Swapped {
    b: i32,
    a: i32,
}

#[derive(SerializeValues)]
#[shardwise(flavor = "in_order", skip_name_checks)]
struct SwappedOnPurpose {
    b: i32,
    a: i32,
}

#[test]
fn skip_name_checks_accepts_names_in_another_order() {
    let specs = [spec("a", ColumnType::Int), spec("b", ColumnType::Int)];
    let err = Swapped { b: 1, a: 2 }.check_types(&specs).unwrap_err();
    assert!(err.to_string().contains("skip_name_checks"), "{err}");
    let v = SwappedOnPurpose { b: 1, a: 2 };
    v.check_types(&specs).unwrap();
    assert_eq!(bytes(&v), bytes(&(1i32, 2i32)));
}

/// A row whose null columns read as defaults.
#[derive(Debug, PartialEq, DeserializeRow)]
struct Counters {
    id: i64,
    #[shardwise(default_when_null)]
    hits: i32,
    #[shardwise(default_when_null)]
    tags: Vec<String>,
    plain: Option<i32>,
}

#[derive(Debug, PartialEq, DeserializeRow)]
#[shardwise(flavor = "in_order")]
struct CountersInOrder {
    id: i64,
    #[shardwise(default_when_null)]
    hits: i32,
}

#[test]
fn default_when_null_in_rows() {
    let specs = vec![
        spec("hits", ColumnType::Int),
        spec("plain", ColumnType::Int),
        spec("id", ColumnType::BigInt),
        spec("tags", ColumnType::List(Box::new(ColumnType::Text))),
    ];
    let r = rows(
        specs,
        &[
            vec![None, None, Some(value(1i64)), None],
            vec![Some(value(5i32)), Some(value(6i32)), Some(value(2i64)), Some(value(vec!["t"]))],
        ],
    );
    let read: Vec<Counters> = r.rows::<Counters>().unwrap().map(Result::unwrap).collect();
    assert_eq!(
        read,
        [
            Counters { id: 1, hits: 0, tags: vec![], plain: None },
            Counters { id: 2, hits: 5, tags: vec!["t".into()], plain: Some(6) },
        ]
    );
    // Without the attribute a null is an error, as before.
    let r = rows(vec![spec("id", ColumnType::BigInt), spec("hits", ColumnType::Int)], &[vec![None, None]]);
    let err = r.rows::<CountersInOrder>().unwrap().next().unwrap().unwrap_err();
    assert!(err.to_string().contains("unexpected null"), "{err}");
    let r = rows(vec![spec("id", ColumnType::BigInt), spec("hits", ColumnType::Int)], &[vec![Some(value(3i64)), None]]);
    let read: Vec<CountersInOrder> = r.rows::<CountersInOrder>().unwrap().map(Result::unwrap).collect();
    assert_eq!(read, [CountersInOrder { id: 3, hits: 0 }]);
}

/// `ks.profile` with the given fields.
fn udt(fields: &[(&str, ColumnType)]) -> ColumnType {
    ColumnType::Udt {
        keyspace: "ks".into(),
        name: "profile".into(),
        fields: fields.iter().map(|(n, t)| (n.to_string(), t.clone())).collect(),
    }
}

/// A value's bytes with their `[int]` length.
fn udt_value(v: impl SerializeValue) -> Bytes {
    let mut b = Vec::new();
    v.encode(&mut b);
    Bytes::from(b)
}

fn decode<'a, T: DeserializeValue<'a>>(typ: &'a ColumnType, frame: &'a Bytes) -> Result<T, DeserializeError> {
    T::type_check(typ)?;
    let len = i32::from_be_bytes(frame[..4].try_into().unwrap());
    let value = (len >= 0).then(|| FrameSlice::new(frame, &frame[4..]));
    T::deserialize(typ, value)
}

/// A UDT value read by a newer program: `level` may be null, `badge` may
/// not exist in the type yet.
#[derive(Debug, PartialEq, SerializeValue, DeserializeValue)]
struct Profile<'a> {
    nick: &'a str,
    #[shardwise(default_when_null)]
    level: i32,
}

#[derive(Debug, PartialEq, DeserializeValue)]
struct NewProfile {
    nick: String,
    #[shardwise(allow_missing)]
    badge: Option<String>,
    #[shardwise(allow_missing, default_when_null)]
    stars: i32,
}

#[test]
fn default_when_null_and_allow_missing_in_udts() {
    let old = udt(&[("nick", ColumnType::Text), ("level", ColumnType::Int)]);
    // `level` null: its default.
    let frame = udt_value(("ann", None::<i32>));
    assert_eq!(decode::<Profile>(&old, &frame).unwrap(), Profile { nick: "ann", level: 0 });
    // A value shorter than its type: the missing field is null too.
    let frame = udt_value(("bob",));
    assert_eq!(decode::<Profile>(&old, &frame).unwrap(), Profile { nick: "bob", level: 0 });
    // `badge` and `stars` are not in the type: their defaults.
    let frame = udt_value(("cyd", 3i32));
    assert_eq!(decode::<NewProfile>(&old, &frame).unwrap(), NewProfile { nick: "cyd".into(), badge: None, stars: 0 });
    // Once the type has them, they are read, with their types checked.
    let new = udt(&[
        ("nick", ColumnType::Text),
        ("level", ColumnType::Int),
        ("badge", ColumnType::Text),
        ("stars", ColumnType::Int),
    ]);
    let frame = udt_value(("dan", 1i32, "gold", None::<i32>));
    assert_eq!(
        decode::<NewProfile>(&new, &frame).unwrap(),
        NewProfile { nick: "dan".into(), badge: Some("gold".into()), stars: 0 }
    );
    let wrong = udt(&[("nick", ColumnType::Text), ("badge", ColumnType::Int)]);
    let err = NewProfile::type_check(&wrong).unwrap_err();
    assert!(err.cql_type.contains("field badge"), "{err}");
    // The serializing derive ignores `default_when_null`: the field is sent.
    let p = Profile { nick: "eve", level: 0 };
    p.check_type(&old).unwrap();
    assert_eq!(udt_value(p), udt_value(("eve", 0i32)));
}

/// Newtype ids, as official users hand-write them.
#[derive(Debug, Clone, Copy, PartialEq, SerializeValue, DeserializeValue)]
struct UserId(Uuid);

#[derive(Debug, PartialEq, SerializeValue, DeserializeValue)]
struct Nick<'a>(&'a str);

#[derive(Debug, PartialEq, SerializeValue, DeserializeValue)]
struct Wrapper<T>(T);

#[derive(Debug, PartialEq, SerializeValues, DeserializeRow)]
struct UserRow<'a> {
    id: UserId,
    nick: Nick<'a>,
    friends: Vec<UserId>,
}

#[test]
fn newtypes_are_their_fields_value() {
    let u = Uuid::from_u128(0x1234);
    let id = UserId(u);
    id.check_type(&ColumnType::Uuid).unwrap();
    assert!(matches!(id.check_type(&ColumnType::Text), Err(EncodeError::TypeMismatch { .. })));
    assert_eq!(value(id), value(u));
    assert_eq!(value(Wrapper(5i32)), value(5i32));
    assert!(UserId::type_check(&ColumnType::Text).is_err());

    let specs = vec![
        spec("nick", ColumnType::Text),
        spec("id", ColumnType::Uuid),
        spec("friends", ColumnType::List(Box::new(ColumnType::Uuid))),
    ];
    let row = UserRow { id, nick: Nick("ann"), friends: vec![UserId(Uuid::from_u128(9))] };
    row.check_types(&specs).unwrap();
    let r = rows(specs, &[vec![Some(value("ann")), Some(value(u)), Some(value(vec![Uuid::from_u128(9)]))]]);
    let read: Vec<UserRow> = r.rows::<UserRow>().unwrap().map(Result::unwrap).collect();
    assert_eq!(read, [row]);
    // Borrowed: the nick points into the frame.
    let nick = read[0].nick.0;
    assert!(r.body().as_ptr_range().contains(&nick.as_ptr()), "{nick} was copied");
    // Generic newtypes read their parameter's type.
    let seven = udt_value(7i64);
    assert_eq!(decode::<Wrapper<i64>>(&ColumnType::BigInt, &seven).unwrap(), Wrapper(7));
    assert!(Wrapper::<i64>::deserialize(&ColumnType::BigInt, None).is_err());
}
