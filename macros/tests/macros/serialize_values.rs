//! `#[derive(SerializeValues)]`: encoding, counts and `check_types`.

#![allow(clippy::unwrap_used)] // A test may panic on a broken fixture.

use std::collections::BTreeMap;
use std::marker::PhantomData;

use shardwise_macros::SerializeValues;
use shardwise_protocol::types::ser::{InMarkerOrder, SerializeValue, SerializeValues};
use shardwise_protocol::types::{ColumnSpec, ColumnType};
use shardwise_protocol::{EncodeError, FieldMismatch};

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

/// The bytes `v` writes for the bind markers `specs`, checking the length.
fn bytes_for(v: &impl SerializeValues, specs: &[ColumnSpec]) -> Vec<u8> {
    let mut buf = Vec::new();
    v.encode_for(specs, &mut buf);
    assert_eq!(v.encoded_len().unwrap(), buf.len());
    buf
}

/// The field mismatch of a failed `check_types`.
fn mismatch(r: Result<(), EncodeError>) -> FieldMismatch {
    match r {
        Err(EncodeError::Fields { mismatch, rust_type, cql_type }) => {
            assert!(rust_type.contains("Insert"), "{rust_type}");
            assert!(cql_type.starts_with("bind markers ("), "{cql_type}");
            *mismatch
        }
        other => panic!("expected a field mismatch, got {other:?}"),
    }
}

#[test]
fn markers_in_another_order_take_their_fields() {
    let v = Insert { id: 1, name: "x", tags: None, score: 2.0 };
    let mut specs = insert_specs();
    specs.swap(0, 3);
    specs.swap(1, 2);
    v.check_types(&specs).unwrap();
    let expected = bytes(&(2.0f64, None::<Vec<String>>, "x", 1i64));
    assert_eq!(bytes_for(&v, &specs), expected);
    // Through references and the driver's wrapper too.
    assert_eq!(bytes_for(&&v, &specs), expected);
    assert_eq!(bytes(&InMarkerOrder::new(&v, &specs)), expected);
    // In field order, `encode` and `encode_for` agree.
    assert_eq!(bytes_for(&v, &insert_specs()), bytes(&v));
}

#[test]
fn markers_and_fields_must_be_the_same_set() {
    let v = Insert { id: 1, name: "x", tags: None, score: 2.0 };
    let mut specs = insert_specs();
    specs.pop();
    assert_eq!(mismatch(v.check_types(&specs)), FieldMismatch::NoMarkerForField { field: "score".into() });
    assert_eq!(mismatch(v.check_types(&[])), FieldMismatch::NoMarkerForField { field: "id".into() });
    specs.push(spec("points", ColumnType::Double));
    let e = v.check_types(&specs).unwrap_err();
    assert!(e.to_string().contains("no field is named after bind marker \"points\""), "{e}");
    assert_eq!(mismatch(Err(e)), FieldMismatch::NoFieldForMarker { marker: "points".into() });
    specs = insert_specs();
    specs.push(spec("id", ColumnType::BigInt));
    assert_eq!(mismatch(v.check_types(&specs)), FieldMismatch::DuplicateMarker { marker: "id".into() });
    // Positional names (`[limit]`, expressions) have no field either.
    let anonymous: Vec<_> =
        insert_specs().into_iter().enumerate().map(|(i, s)| ColumnSpec { name: format!("[{i}]"), ..s }).collect();
    assert_eq!(mismatch(v.check_types(&anonymous)), FieldMismatch::NoFieldForMarker { marker: "[0]".into() });
    // Whatever the markers, exactly the fields' bytes are written: in
    // field order unless the markers are the fields.
    for specs in [anonymous.clone(), anonymous[..2].to_vec(), specs] {
        assert_eq!(bytes_for(&v, &specs), bytes(&v));
    }
}

#[test]
fn type_mismatch_names_the_bind_marker() {
    let v = Insert { id: 1, name: "x", tags: None, score: 2.0 };
    let mut specs = insert_specs();
    specs[3] = spec("score", ColumnType::Int);
    specs.swap(0, 3);
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

/// The bind values of `Insert`, by position.
#[derive(SerializeValues)]
#[shardwise(flavor = "in_order")]
struct Positional<'a> {
    id: i64,
    name: &'a str,
    tags: Option<Vec<String>>,
    score: f64,
}

#[test]
fn in_order_matches_by_position() {
    let v = Positional { id: 1, name: "x", tags: None, score: 2.0 };
    v.check_types(&insert_specs()).unwrap();
    assert_eq!(bytes_for(&v, &insert_specs()), bytes(&(1i64, "x", None::<Vec<String>>, 2.0f64)));
    // Other names (positional markers, expressions) are matched by position
    // with the types alone.
    let anonymous: Vec<_> =
        insert_specs().into_iter().enumerate().map(|(i, s)| ColumnSpec { name: format!("[{i}]"), ..s }).collect();
    v.check_types(&anonymous).unwrap();
    let mut specs = insert_specs();
    specs.pop();
    assert!(matches!(v.check_types(&specs), Err(EncodeError::InvalidValue { what: "bind values", .. })));
    assert!(matches!(v.check_types(&[]), Err(EncodeError::InvalidValue { .. })));

    // The same names in another order are an error, not a reordering.
    specs = insert_specs();
    specs.swap(0, 3);
    let err = v.check_types(&specs).unwrap_err();
    let EncodeError::InvalidValue { what, reason } = err else { panic!("unexpected error {err:?}") };
    assert_eq!(what, "bind values from struct `Positional`");
    assert!(reason.contains("not in order"), "{reason}");
    assert!(reason.contains("fields: id, name, tags, score"), "{reason}");
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
    // The renamed name, not the field's, is what markers are matched to.
    let swapped = [spec("type", ColumnType::Text), spec("user_id", ColumnType::Int)];
    v.check_types(&swapped).unwrap();
    assert_eq!(bytes_for(&v, &swapped), bytes(&("t", 9i32)));
    let by_field_name = [spec("id", ColumnType::Int), spec("type", ColumnType::Text)];
    assert!(matches!(v.check_types(&by_field_name), Err(EncodeError::Fields { .. })));
    // The skipped field has no marker.
    let with_skipped =
        [spec("user_id", ColumnType::Int), spec("type", ColumnType::Text), spec("_cache", ColumnType::Int)];
    assert!(matches!(v.check_types(&with_skipped), Err(EncodeError::Fields { .. })));
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
        spec("map", ColumnType::Map(Box::new(ColumnType::Int), Box::new(ColumnType::Text))),
        spec("key", ColumnType::Int),
    ];
    v.check_types(&specs).unwrap();
    assert_eq!(bytes_for(&v, &specs), bytes(&(&map, 5i32)));
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

    assert!(matches!(Empty {}.check_types(&[spec("x", ColumnType::Int)]), Err(EncodeError::Fields { .. })));
    assert!(bytes_for(&Empty {}, &[spec("x", ColumnType::Int)]).is_empty());

    let one = One { only: true };
    assert_eq!(bytes(&one), bytes(&(true,)));
    one.check_types(&[spec("only", ColumnType::Boolean)]).unwrap();
    assert!(one.check_types(&[spec("whatever", ColumnType::Boolean)]).is_err());
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
