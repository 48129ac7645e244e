//! `#[derive(SerializeValues)]`: encoding, counts and `check_types`.

#![allow(clippy::unwrap_used)] // A test may panic on a broken fixture.

use std::collections::BTreeMap;
use std::marker::PhantomData;

use shardwise_macros::SerializeValues;
use shardwise_protocol::types::ser::{SerializeValue, SerializeValues};
use shardwise_protocol::types::{ColumnSpec, ColumnType};
use shardwise_protocol::EncodeError;

use crate::common::spec;

/// Encoding and length of a value list, checking they agree.
fn bytes(v: &impl SerializeValues) -> Vec<u8> {
    let mut buf = Vec::new();
    v.encode(&mut buf);
    assert_eq!(v.encoded_len().unwrap(), buf.len());
    buf
}

#[derive(SerializeValues)]
struct Insert<'a> {
    id: i64,
    name: &'a str,
    tags: Option<Vec<String>>,
    score: f64,
}

fn insert_specs() -> Vec<ColumnSpec> {
    vec![
        spec("id", ColumnType::BigInt),
        spec("name", ColumnType::Text),
        spec("tags", ColumnType::List(Box::new(ColumnType::Text))),
        spec("score", ColumnType::Double),
    ]
}

#[test]
fn encodes_like_the_tuple_of_its_fields() {
    let name = String::from("ann");
    let v = Insert { id: -3, name: &name, tags: Some(vec!["a".into(), "bc".into()]), score: 1.5 };
    let tuple = (-3i64, "ann", Some(vec!["a".to_string(), "bc".to_string()]), 1.5f64);
    assert_eq!(bytes(&v), bytes(&tuple));
    assert_eq!(v.count(), 4);
    assert!(!v.with_names());
    v.check_types(&insert_specs()).unwrap();

    let null = Insert { id: 1, name: "", tags: None, score: 0.0 };
    assert_eq!(bytes(&null), bytes(&(1i64, "", None::<Vec<String>>, 0.0f64)));
}

#[test]
fn references_to_derived_structs_are_values_too() {
    let v = Insert { id: 1, name: "x", tags: None, score: 2.0 };
    assert_eq!(bytes(&&v), bytes(&v));
    assert_eq!(<&Insert as SerializeValues>::count(&&v), 4);
}

#[test]
fn count_mismatch_is_an_invalid_value() {
    let v = Insert { id: 1, name: "x", tags: None, score: 2.0 };
    let mut specs = insert_specs();
    specs.pop();
    assert!(matches!(v.check_types(&specs), Err(EncodeError::InvalidValue { what: "bind values", .. })));
    specs.extend(insert_specs());
    assert!(matches!(v.check_types(&specs), Err(EncodeError::InvalidValue { .. })));
    assert!(matches!(v.check_types(&[]), Err(EncodeError::InvalidValue { .. })));
}

#[test]
fn type_mismatch_names_the_bind_marker() {
    let v = Insert { id: 1, name: "x", tags: None, score: 2.0 };
    let mut specs = insert_specs();
    specs[3] = spec("score", ColumnType::Int);
    let err = v.check_types(&specs).unwrap_err();
    match &err {
        EncodeError::TypeMismatch { rust_type, cql_type } => {
            assert_eq!(*rust_type, "f64");
            assert_eq!(cql_type, "int (bind marker score)");
        }
        e => panic!("unexpected error {e:?}"),
    }
    // Value-level checks other than type mismatches pass through.
    specs = insert_specs();
    specs[1] = spec("name", ColumnType::Ascii);
    let v = Insert { id: 1, name: "é", tags: None, score: 2.0 };
    assert!(matches!(v.check_types(&specs), Err(EncodeError::InvalidValue { what: "ascii", .. })));
}

#[test]
fn same_names_in_another_order_are_an_error_not_a_reordering() {
    let v = Insert { id: 1, name: "x", tags: None, score: 2.0 };
    let mut specs = insert_specs();
    specs.swap(0, 3);
    let err = v.check_types(&specs).unwrap_err();
    let EncodeError::InvalidValue { what, reason } = err else { panic!("unexpected error {err:?}") };
    assert_eq!(what, "bind values from struct `Insert`");
    assert!(reason.contains("not in order"), "{reason}");
    assert!(reason.contains("fields: id, name, tags, score"), "{reason}");
    assert!(err.to_string().contains("order"), "{err}");

    // Other names (positional markers, expressions) are matched by position
    // with the types alone.
    let anonymous: Vec<_> =
        insert_specs().into_iter().enumerate().map(|(i, s)| ColumnSpec { name: format!("[{i}]"), ..s }).collect();
    v.check_types(&anonymous).unwrap();
    // Names that only partly match are not taken as a reordering either.
    let mut partial = insert_specs();
    partial.swap(0, 3);
    partial[1].name = "other".into();
    assert!(matches!(v.check_types(&partial), Err(EncodeError::TypeMismatch { .. })));
}

#[derive(SerializeValues)]
struct Renamed {
    #[shardwise(rename = "user_id")]
    id: i32,
    #[shardwise(skip)]
    _cache: Vec<u64>,
    r#type: String,
}

#[test]
fn skip_and_rename() {
    let v = Renamed { id: 9, _cache: vec![1, 2, 3], r#type: "t".into() };
    assert_eq!(v.count(), 2);
    assert_eq!(bytes(&v), bytes(&(9i32, "t")));
    let specs = [spec("user_id", ColumnType::Int), spec("type", ColumnType::Text)];
    v.check_types(&specs).unwrap();
    // The renamed name, not the field's, is what the order check compares.
    let swapped = [spec("type", ColumnType::Text), spec("user_id", ColumnType::Int)];
    assert!(matches!(v.check_types(&swapped), Err(EncodeError::InvalidValue { .. })));
}

#[derive(SerializeValues)]
struct Generic<'a, K, V: Clone>
where
    K: Ord,
{
    key: K,
    map: &'a BTreeMap<K, V>,
    #[shardwise(skip)]
    _marker: PhantomData<V>,
}

#[test]
fn generic_structs() {
    let map = BTreeMap::from([(1i32, "one".to_string()), (2, "two".to_string())]);
    let v = Generic { key: 5i32, map: &map, _marker: PhantomData };
    assert_eq!(bytes(&v), bytes(&(5i32, &map)));
    let specs = [
        spec("key", ColumnType::Int),
        spec("map", ColumnType::Map(Box::new(ColumnType::Int), Box::new(ColumnType::Text))),
    ];
    v.check_types(&specs).unwrap();
}

#[derive(SerializeValues)]
struct Empty {}

#[derive(SerializeValues)]
struct One {
    only: bool,
}

#[test]
fn empty_and_single_field_structs() {
    assert_eq!(Empty {}.count(), 0);
    assert!(bytes(&Empty {}).is_empty());
    Empty {}.check_types(&[]).unwrap();
    assert!(Empty {}.check_types(&[spec("x", ColumnType::Int)]).is_err());

    let one = One { only: true };
    assert_eq!(bytes(&one), bytes(&(true,)));
    one.check_types(&[spec("whatever", ColumnType::Boolean)]).unwrap();
}

#[test]
fn too_long_values_fail_encoded_len() {
    #[derive(SerializeValues)]
    struct Bad {
        t: shardwise_protocol::types::CqlTime,
    }
    let bad = Bad { t: shardwise_protocol::types::CqlTime(-1) };
    assert!(bad.encoded_len().is_err());
    assert!(SerializeValue::encoded_len(&bad.t).is_err());
}

mod path {
    //! The protocol crate under another path.
    pub use shardwise_protocol as proto;

    #[derive(shardwise_macros::SerializeValues)]
    #[shardwise(crate = "crate::serialize_values::path::proto")]
    pub struct Quoted {
        pub a: i32,
    }

    #[derive(shardwise_macros::SerializeValues)]
    #[shardwise(crate = self::proto)]
    pub struct Unquoted {
        pub a: i32,
    }
}

#[test]
fn crate_path_attribute() {
    assert_eq!(bytes(&path::Quoted { a: 1 }), bytes(&(1i32,)));
    assert_eq!(bytes(&path::Unquoted { a: 1 }), bytes(&(1i32,)));
}
