//! `#[derive(SerializeValue)]` and `#[derive(DeserializeValue)]`: structs
//! as values of user-defined types, alone, inside collections, tuples and
//! `Option`, and inside derived rows and value lists.

#![allow(clippy::unwrap_used)] // A test may panic on a broken fixture.

use bytes::Bytes;
use shardwise_macros::{DeserializeRow, DeserializeValue, SerializeValue, SerializeValues};
use shardwise_protocol::rows::{ResultMetadata, Rows};
use shardwise_protocol::types::de::{DeserializeError, DeserializeValue, FrameSlice};
use shardwise_protocol::types::ser::{SerializeValue, SerializeValues};
use shardwise_protocol::types::{ColumnType, CqlValue};
use shardwise_protocol::{EncodeError, FieldMismatch};

use crate::common::spec;

/// `ks.address` with the given fields.
fn udt(fields: &[(&str, ColumnType)]) -> ColumnType {
    ColumnType::Udt {
        keyspace: "ks".into(),
        name: "address".into(),
        fields: fields.iter().map(|(n, t)| (n.to_string(), t.clone())).collect(),
    }
}

/// `address (street text, zip int, tags list<text>)`.
fn address() -> ColumnType {
    udt(&[
        ("street", ColumnType::Text),
        ("zip", ColumnType::Int),
        ("tags", ColumnType::List(Box::new(ColumnType::Text))),
    ])
}

/// A value's encoding (with its `[int]` length), checking `encoded_len`.
fn encode(v: &impl SerializeValue) -> Vec<u8> {
    let mut buf = Vec::new();
    v.encode(&mut buf);
    assert_eq!(v.encoded_len().unwrap(), buf.len());
    buf
}

/// Reads `bytes` (a value with its `[int]` length) as `T` of type `typ`.
fn decode<'a, T: DeserializeValue<'a>>(typ: &'a ColumnType, frame: &'a Bytes) -> Result<T, DeserializeError> {
    T::type_check(typ)?;
    let len = i32::from_be_bytes(frame[..4].try_into().unwrap());
    let value = (len >= 0).then(|| FrameSlice::new(frame, &frame[4..]));
    T::deserialize(typ, value)
}

#[derive(Debug, PartialEq, SerializeValue, DeserializeValue)]
struct Address<'a> {
    street: &'a str,
    zip: Option<i32>,
    #[shardwise(skip)]
    cached: u64,
}

/// The field mismatch of a failed `check_type`.
fn mismatch(r: Result<(), EncodeError>) -> FieldMismatch {
    match r {
        Err(EncodeError::Fields { mismatch, cql_type, rust_type }) => {
            assert_eq!(cql_type, "ks.address");
            assert!(rust_type.contains("Address"), "{rust_type}");
            *mismatch
        }
        other => panic!("expected a field mismatch, got {other:?}"),
    }
}

#[test]
fn writes_the_fields_in_order_like_a_tuple() {
    let home = Address { street: "Main", zip: Some(1234), cached: 99 };
    home.check_type(&address()).unwrap();
    assert_eq!(encode(&home), encode(&("Main", Some(1234i32))));
    // The same bytes as the dynamic UDT value with those fields.
    let cql = CqlValue::Udt {
        keyspace: "ks".into(),
        name: "address".into(),
        fields: vec![("street".into(), Some(CqlValue::Text("Main".into()))), ("zip".into(), Some(CqlValue::Int(1234)))],
    };
    assert_eq!(encode(&home), encode(&cql));
    // A null field is written as null.
    assert_eq!(encode(&Address { street: "", zip: None, cached: 0 }), encode(&("", None::<i32>)));
}

#[test]
fn the_type_must_have_the_fields_in_the_structs_order() {
    let home = Address { street: "Main", zip: Some(1), cached: 0 };
    // Exactly the fields, or more after them.
    home.check_type(&udt(&[("street", ColumnType::Text), ("zip", ColumnType::Int)])).unwrap();
    home.check_type(&address()).unwrap();
    // Another order.
    let swapped = udt(&[("zip", ColumnType::Int), ("street", ColumnType::Text)]);
    assert_eq!(
        mismatch(home.check_type(&swapped)),
        FieldMismatch::OutOfOrder { field: "street".into(), position: 0, expected: "zip".into() }
    );
    // A field of the type missing in the middle of the struct's.
    let gap = udt(&[("street", ColumnType::Text), ("city", ColumnType::Text), ("zip", ColumnType::Int)]);
    assert_eq!(
        mismatch(home.check_type(&gap)),
        FieldMismatch::OutOfOrder { field: "zip".into(), position: 1, expected: "city".into() }
    );
    // A field the type does not have, and a type shorter than the struct.
    let renamed = udt(&[("street", ColumnType::Text), ("postcode", ColumnType::Int)]);
    let e = home.check_type(&renamed).unwrap_err();
    assert!(e.to_string().contains("no field named \"zip\""), "{e}");
    assert_eq!(mismatch(Err(e)), FieldMismatch::NoSuchField { field: "zip".into() });
    let short = udt(&[("street", ColumnType::Text)]);
    assert_eq!(mismatch(home.check_type(&short)), FieldMismatch::NoSuchField { field: "zip".into() });
    // A field of another type: the field is named, its error inside.
    let wrong = udt(&[("street", ColumnType::Text), ("zip", ColumnType::BigInt)]);
    match mismatch(home.check_type(&wrong)) {
        FieldMismatch::FieldType { field, source } => {
            assert_eq!(field, "zip");
            assert!(matches!(*source, EncodeError::TypeMismatch { rust_type: "i32", .. }), "{source:?}");
        }
        other => panic!("{other:?}"),
    }
    // Not a UDT at all.
    assert!(matches!(home.check_type(&ColumnType::Text), Err(EncodeError::TypeMismatch { .. })));
    assert!(matches!(
        home.check_type(&ColumnType::Tuple(vec![ColumnType::Text, ColumnType::Int])),
        Err(EncodeError::TypeMismatch { .. })
    ));
}

#[test]
fn reads_fields_by_name_and_borrows() {
    // The type's order differs from the struct's, with a field the struct lacks.
    let typ = udt(&[("zip", ColumnType::Int), ("note", ColumnType::Text), ("street", ColumnType::Text)]);
    let frame = Bytes::from(encode(&(Some(42i32), "skipped", "Main")));
    let home: Address = decode(&typ, &frame).unwrap();
    assert_eq!(home, Address { street: "Main", zip: Some(42), cached: 0 });
    assert!(frame.as_ptr_range().contains(&home.street.as_ptr()), "the street was copied");
    // What the serialize derive writes, the deserialize derive reads.
    let written = Address { street: "Elm", zip: None, cached: 7 };
    let frame = Bytes::from(encode(&written));
    assert_eq!(decode::<Address>(&address(), &frame).unwrap(), Address { cached: 0, ..written });
}

#[test]
fn a_shorter_value_leaves_the_last_fields_null() {
    let typ = udt(&[("street", ColumnType::Text), ("zip", ColumnType::Int)]);
    let frame = Bytes::from(encode(&("Main",)));
    assert_eq!(decode::<Address>(&typ, &frame).unwrap(), Address { street: "Main", zip: None, cached: 0 });
    // A null or missing field into a non-`Option` field is named.
    let frame = Bytes::from(encode(&(None::<&str>, 1i32)));
    match decode::<Address>(&typ, &frame).unwrap_err() {
        DeserializeError::Field { field, source } => {
            assert_eq!(field, "street");
            assert!(matches!(*source, DeserializeError::UnexpectedNull { .. }), "{source:?}");
        }
        other => panic!("{other:?}"),
    }
    let reversed = udt(&[("zip", ColumnType::Int), ("street", ColumnType::Text)]);
    let frame = Bytes::from(encode(&(1i32,)));
    let e = decode::<Address>(&reversed, &frame).unwrap_err();
    assert!(e.to_string().starts_with("field street: unexpected null"), "{e}");
    // A null UDT value: only an `Option` takes it.
    let null = Bytes::from(encode(&None::<i32>));
    assert!(matches!(decode::<Address>(&typ, &null), Err(DeserializeError::UnexpectedNull { .. })));
    assert_eq!(decode::<Option<Address>>(&typ, &null).unwrap(), None);
    // Bytes after the last field, and a truncated field, are malformed.
    let mut long = encode(&("Main", 1i32, 2i32));
    long.truncate(long.len() - 1);
    let long = Bytes::from(long);
    assert!(matches!(decode::<Address>(&address(), &long), Err(DeserializeError::Malformed { .. })));
}

#[test]
fn type_check_names_the_missing_or_mistyped_field() {
    let missing = udt(&[("street", ColumnType::Text), ("postcode", ColumnType::Int)]);
    let e = Address::type_check(&missing).unwrap_err();
    assert!(e.cql_type.contains("no field named \"zip\" (fields: street, postcode)"), "{e}");
    let wrong = udt(&[("street", ColumnType::Text), ("zip", ColumnType::BigInt)]);
    let e = Address::type_check(&wrong).unwrap_err();
    assert_eq!(e.cql_type, "bigint (field zip of ks.address)");
    assert!(Address::type_check(&ColumnType::Text).is_err());
    // The skipped field need not exist.
    Address::type_check(&udt(&[("zip", ColumnType::Int), ("street", ColumnType::Ascii)])).unwrap();
}

#[derive(Debug, PartialEq, SerializeValue, DeserializeValue)]
struct Renamed {
    #[shardwise(rename = "street")]
    road: String,
    r#type: i32,
}

#[test]
fn rename_and_raw_identifiers() {
    let typ = udt(&[("street", ColumnType::Text), ("type", ColumnType::Int)]);
    let v = Renamed { road: "x".into(), r#type: 3 };
    v.check_type(&typ).unwrap();
    let frame = Bytes::from(encode(&v));
    assert_eq!(decode::<Renamed>(&typ, &frame).unwrap(), v);
    let by_field_name = udt(&[("road", ColumnType::Text), ("type", ColumnType::Int)]);
    assert!(v.check_type(&by_field_name).is_err());
    assert!(Renamed::type_check(&by_field_name).is_err());
}

#[test]
fn inside_collections_tuples_and_options() {
    let list = ColumnType::List(Box::new(address()));
    let homes = vec![Address { street: "a", zip: Some(1), cached: 0 }, Address { street: "b", zip: None, cached: 0 }];
    homes.check_type(&list).unwrap();
    let frame = Bytes::from(encode(&homes));
    assert_eq!(decode::<Vec<Address>>(&list, &frame).unwrap(), homes);
    // A wrong element type is named through the list.
    let wrong = ColumnType::List(Box::new(udt(&[("zip", ColumnType::Int)])));
    assert!(matches!(homes.check_type(&wrong), Err(EncodeError::Fields { .. })));
    assert!(Vec::<Address>::type_check(&wrong).is_err());

    let map = ColumnType::Map(Box::new(ColumnType::Int), Box::new(address()));
    let by_id = std::collections::BTreeMap::from([(1i32, Address { street: "m", zip: None, cached: 0 })]);
    by_id.check_type(&map).unwrap();
    let frame = Bytes::from(encode(&by_id));
    let back: std::collections::BTreeMap<i32, Address> = decode(&map, &frame).unwrap();
    assert_eq!(back, by_id);

    let tuple = ColumnType::Tuple(vec![ColumnType::Int, address()]);
    let pair = (5i32, Some(Address { street: "t", zip: Some(9), cached: 0 }));
    pair.check_type(&tuple).unwrap();
    let frame = Bytes::from(encode(&pair));
    assert_eq!(decode::<(i32, Option<Address>)>(&tuple, &frame).unwrap(), pair);

    // The dynamic value reads what the derive wrote.
    let frame = Bytes::from(encode(&homes[0]));
    let CqlValue::Udt { fields, .. } = decode::<CqlValue>(&address(), &frame).unwrap() else { panic!() };
    assert_eq!(fields[0], ("street".to_string(), Some(CqlValue::Text("a".into()))));
    assert_eq!(fields[1], ("zip".to_string(), Some(CqlValue::Int(1))));
    assert_eq!(fields[2], ("tags".to_string(), None));
}

#[derive(Debug, SerializeValues)]
struct Insert<'a> {
    homes: Vec<Address<'a>>,
    home: Address<'a>,
    id: i64,
}

#[derive(Debug, DeserializeRow)]
struct Person<'a> {
    id: i64,
    home: Option<Address<'a>>,
    homes: Vec<Address<'a>>,
}

#[test]
fn in_derived_rows_and_value_lists() {
    let list = ColumnType::List(Box::new(address()));
    let specs = [spec("id", ColumnType::BigInt), spec("home", address()), spec("homes", list.clone())];
    let v = Insert {
        homes: vec![Address { street: "x", zip: Some(2), cached: 0 }],
        home: Address { street: "y", zip: None, cached: 0 },
        id: 7,
    };
    v.check_types(&specs).unwrap();
    let mut values = Vec::new();
    v.encode_for(&specs, &mut values);
    assert_eq!(values.len(), v.encoded_len().unwrap());
    // The values, in the markers' order, as columns of a row.
    let mut columns = Vec::new();
    let mut r = shardwise_protocol::codec::Reader::new(&values);
    for _ in 0..3 {
        columns.push(r.value("value").unwrap().as_bytes().map(<[u8]>::to_vec));
    }
    let metadata = ResultMetadata { columns_count: 3, specs: Some(specs.to_vec()), ..Default::default() };
    let raw: Vec<Option<&[u8]>> = columns.iter().map(|c| c.as_deref()).collect();
    let rows = Rows::from_raw(metadata, &[raw]).unwrap();
    let person = rows.rows::<Person>().unwrap().next().unwrap().unwrap();
    assert_eq!(person.id, 7);
    assert_eq!(person.home, Some(Address { street: "y", zip: None, cached: 0 }));
    assert_eq!(person.homes, v.homes);
    // A wrong UDT field name in a bind marker's type is named.
    let bad = [spec("id", ColumnType::BigInt), spec("home", udt(&[("road", ColumnType::Text)])), spec("homes", list)];
    let e = v.check_types(&bad).unwrap_err();
    assert!(e.to_string().contains("no field named \"street\""), "{e}");
}

#[derive(Debug, PartialEq, SerializeValue, DeserializeValue)]
struct Empty {}

#[derive(Debug, PartialEq, SerializeValue, DeserializeValue)]
struct Generic<T> {
    value: T,
}

#[derive(Debug, PartialEq, DeserializeValue)]
struct TwoLifetimes<'a, 'b> {
    a: &'a str,
    b: &'b [u8],
}

#[test]
fn empty_generic_and_multi_lifetime_structs() {
    let typ = udt(&[("x", ColumnType::Int)]);
    Empty {}.check_type(&typ).unwrap();
    assert_eq!(encode(&Empty {}), [0, 0, 0, 0]);
    let frame = Bytes::from(encode(&(1i32,)));
    assert_eq!(decode::<Empty>(&typ, &frame).unwrap(), Empty {});

    let typ = udt(&[("value", ColumnType::BigInt)]);
    let g = Generic { value: 5i64 };
    g.check_type(&typ).unwrap();
    let frame = Bytes::from(encode(&g));
    assert_eq!(decode::<Generic<i64>>(&typ, &frame).unwrap(), g);
    assert!(Generic::<String>::type_check(&typ).is_err());

    let typ = udt(&[("b", ColumnType::Blob), ("a", ColumnType::Text)]);
    let frame = Bytes::from(encode(&(&[1u8, 2][..], "a")));
    assert_eq!(decode::<TwoLifetimes>(&typ, &frame).unwrap(), TwoLifetimes { a: "a", b: &[1, 2] });
}
