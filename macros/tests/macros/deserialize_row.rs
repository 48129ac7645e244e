//! `#[derive(DeserializeRow)]`: rows of a `Rows` result into structs.

#![allow(clippy::unwrap_used)] // A test may panic on a broken fixture.

use shardwise_macros::DeserializeRow;
use shardwise_protocol::rows::{ResultMetadata, Rows, RowsError};
use shardwise_protocol::types::de::{DeserializeError, DeserializeRow, TypeCheckError};
use shardwise_protocol::types::ser::SerializeValue;
use shardwise_protocol::types::{ColumnSpec, ColumnType};

use crate::common::spec;

fn text_list() -> ColumnType {
    ColumnType::List(Box::new(ColumnType::Text))
}

/// The value's bytes, without the `[int]` length.
fn value(v: impl SerializeValue) -> Vec<u8> {
    let mut buf = Vec::new();
    v.encode(&mut buf);
    buf.split_off(4)
}

/// A row set with the given columns and rows of values (`None` is null).
fn rows(specs: Vec<ColumnSpec>, data: &[Vec<Option<Vec<u8>>>]) -> Rows {
    let metadata = ResultMetadata { columns_count: specs.len(), specs: Some(specs), ..Default::default() };
    let raw: Vec<Vec<Option<&[u8]>>> = data.iter().map(|row| row.iter().map(|v| v.as_deref()).collect()).collect();
    Rows::from_raw(metadata, &raw).unwrap()
}

/// The type-check error of reading `rows` as `R`.
fn type_error<'a, R: DeserializeRow<'a> + std::fmt::Debug>(rows: &'a Rows) -> TypeCheckError {
    match rows.rows::<R>().map(|_| ()) {
        Err(RowsError::TypeCheck(e)) => e,
        other => panic!("expected a type-check error, got {other:?}"),
    }
}

#[derive(Debug, DeserializeRow, PartialEq)]
struct User<'a> {
    id: i64,
    name: &'a str,
    tags: Option<Vec<String>>,
}

/// `name, tags, id`: another order than the fields'.
fn users() -> Rows {
    rows(
        vec![spec("name", ColumnType::Text), spec("tags", text_list()), spec("id", ColumnType::BigInt)],
        &[
            vec![Some(value("ann")), Some(value(vec!["a", "b"])), Some(value(1i64))],
            vec![Some(value("bob")), None, Some(value(2i64))],
        ],
    )
}

#[test]
fn columns_are_matched_by_name() {
    let rows = users();
    let users: Vec<User> = rows.rows::<User>().unwrap().map(Result::unwrap).collect();
    assert_eq!(
        users,
        [
            User { id: 1, name: "ann", tags: Some(vec!["a".into(), "b".into()]) },
            User { id: 2, name: "bob", tags: None },
        ]
    );
}

#[test]
fn borrowed_fields_point_into_the_frame() {
    let rows = users();
    let body = rows.body().as_ptr_range();
    for user in rows.rows::<User>().unwrap() {
        let name = user.unwrap().name;
        assert!(body.contains(&name.as_ptr()), "{name} was copied");
    }
}

#[derive(Debug, DeserializeRow)]
#[allow(dead_code)]
struct Short {
    id: i64,
    name: String,
}

#[derive(Debug, DeserializeRow)]
#[allow(dead_code)]
struct Long<'a> {
    id: i64,
    name: &'a str,
    tags: Vec<String>,
    email: &'a str,
}

#[test]
fn missing_and_extra_columns_are_named() {
    let rows = users();
    let e = type_error::<Long>(&rows);
    assert_eq!(e.column.as_deref(), Some("email"));
    let msg = e.to_string();
    assert!(msg.contains("no column named \"email\""), "{msg}");
    assert!(msg.contains("name text, tags list<text>, id bigint"), "{msg}");

    let e = type_error::<Short>(&rows);
    assert_eq!(e.column.as_deref(), Some("tags"));
    assert!(e.to_string().contains("no field reads"), "{e}");
}

#[test]
fn duplicate_columns_are_an_error() {
    let rows =
        rows(vec![spec("id", ColumnType::BigInt), spec("name", ColumnType::Text), spec("id", ColumnType::BigInt)], &[]);
    let e = type_error::<Short>(&rows);
    assert_eq!(e.column.as_deref(), Some("id"));
    assert!(e.to_string().contains("two columns named \"id\""), "{e}");
}

#[test]
fn wrong_type_names_the_column() {
    let rows = rows(vec![spec("name", ColumnType::Int), spec("id", ColumnType::BigInt)], &[]);
    let e = type_error::<Short>(&rows);
    assert_eq!(e.column.as_deref(), Some("name"));
    assert_eq!(e.cql_type, "int");
    assert!(e.rust_type.contains("String"), "{e}");
    assert!(e.to_string().ends_with("(column name)"), "{e}");
}

#[test]
fn value_errors_are_wrapped_with_the_column() {
    // A null into a non-`Option` field, and a bigint of 3 bytes.
    let rows = rows(
        vec![spec("name", ColumnType::Text), spec("id", ColumnType::BigInt)],
        &[vec![None, Some(value(1i64))], vec![Some(value("x")), Some(vec![1, 2, 3])]],
    );
    let mut it = rows.rows::<Short>().unwrap();
    match it.next().unwrap().unwrap_err() {
        DeserializeError::Column { index: 0, name, source } => {
            assert_eq!(name, "name");
            assert!(matches!(*source, DeserializeError::UnexpectedNull { .. }), "{source:?}");
        }
        e => panic!("unexpected error {e:?}"),
    }
    match it.next().unwrap().unwrap_err() {
        DeserializeError::Column { index: 1, name, source } => {
            assert_eq!(name, "id");
            assert!(matches!(*source, DeserializeError::Malformed { .. }), "{source:?}");
        }
        e => panic!("unexpected error {e:?}"),
    }
    assert!(it.next().is_none());
}

#[derive(Debug, DeserializeRow, PartialEq)]
struct Renamed<'a> {
    #[shardwise(rename = "user_id")]
    id: i64,
    r#type: &'a [u8],
    #[shardwise(skip)]
    cached: Option<u32>,
}

#[test]
fn rename_raw_identifiers_and_skip() {
    let rows = rows(
        vec![spec("type", ColumnType::Blob), spec("user_id", ColumnType::BigInt)],
        &[vec![Some(vec![0xca, 0xfe]), Some(value(7i64))]],
    );
    let got: Vec<Renamed> = rows.rows::<Renamed>().unwrap().map(Result::unwrap).collect();
    assert_eq!(got, [Renamed { id: 7, r#type: &[0xca, 0xfe], cached: None }]);

    // The field's own name is not a column name once renamed.
    let rows = self::rows(vec![spec("type", ColumnType::Blob), spec("id", ColumnType::BigInt)], &[]);
    assert_eq!(type_error::<Renamed>(&rows).column.as_deref(), Some("user_id"));
}

#[derive(Debug, DeserializeRow, PartialEq)]
#[shardwise(flavor = "in_order")]
struct Positional<'a> {
    a: i32,
    b: &'a str,
    c: Option<f64>,
}

#[test]
fn in_order_flavor_matches_by_position() {
    // Names are not compared.
    let rows = rows(
        vec![spec("x", ColumnType::Int), spec("y", ColumnType::Text), spec("z", ColumnType::Double)],
        &[vec![Some(value(5i32)), Some(value("five")), None]],
    );
    let got: Vec<Positional> = rows.rows::<Positional>().unwrap().map(Result::unwrap).collect();
    assert_eq!(got, [Positional { a: 5, b: "five", c: None }]);

    // Types and count are.
    let swapped =
        self::rows(vec![spec("y", ColumnType::Text), spec("x", ColumnType::Int), spec("z", ColumnType::Double)], &[]);
    let e = type_error::<Positional>(&swapped);
    assert_eq!(e.column.as_deref(), Some("y"));
    assert_eq!(e.cql_type, "text");

    let short = self::rows(vec![spec("x", ColumnType::Int), spec("y", ColumnType::Text)], &[]);
    let e = type_error::<Positional>(&short);
    assert_eq!(e.column, None);
    assert!(e.to_string().contains("row of 2 columns (x int, y text), 3 expected"), "{e}");
}

#[test]
fn in_order_value_errors_are_wrapped_with_the_column() {
    let rows = rows(
        vec![spec("x", ColumnType::Int), spec("y", ColumnType::Text), spec("z", ColumnType::Double)],
        &[vec![Some(value(5i32)), Some(vec![0xff]), None]],
    );
    match rows.rows::<Positional>().unwrap().next().unwrap().unwrap_err() {
        DeserializeError::Column { index: 1, name, source } => {
            assert_eq!(name, "y");
            assert!(matches!(*source, DeserializeError::Malformed { .. }), "{source:?}");
        }
        e => panic!("unexpected error {e:?}"),
    }
}

#[derive(Debug, DeserializeRow, PartialEq)]
struct Generic<T, U: Default> {
    value: T,
    #[shardwise(skip)]
    extra: U,
}

#[derive(Debug, DeserializeRow, PartialEq)]
struct TwoLifetimes<'a, 'b> {
    a: &'a str,
    b: &'b str,
}

#[test]
fn generic_structs() {
    let rows = rows(vec![spec("value", ColumnType::Int)], &[vec![Some(value(3i32))]]);
    let got: Vec<Generic<i32, String>> = rows.rows().unwrap().map(Result::unwrap).collect();
    assert_eq!(got, [Generic { value: 3, extra: String::new() }]);
    let got: Vec<Generic<Option<i32>, ()>> = rows.rows().unwrap().map(Result::unwrap).collect();
    assert_eq!(got, [Generic { value: Some(3), extra: () }]);
    assert!(rows.rows::<Generic<String, ()>>().is_err());

    let rows = self::rows(
        vec![spec("b", ColumnType::Text), spec("a", ColumnType::Text)],
        &[vec![Some(value("bee")), Some(value("ay"))]],
    );
    let got: Vec<TwoLifetimes> = rows.rows().unwrap().map(Result::unwrap).collect();
    assert_eq!(got, [TwoLifetimes { a: "ay", b: "bee" }]);
}

#[derive(Debug, DeserializeRow, PartialEq)]
struct NoColumns {}

#[derive(Debug, DeserializeRow, PartialEq)]
#[shardwise(flavor = "in_order")]
struct NoColumnsInOrder {}

#[test]
fn structs_without_fields_read_rows_without_columns() {
    let empty = rows(vec![], &[vec![], vec![]]);
    assert_eq!(empty.rows::<NoColumns>().unwrap().map(Result::unwrap).count(), 2);
    assert_eq!(empty.rows::<NoColumnsInOrder>().unwrap().map(Result::unwrap).count(), 2);
    let one = rows(vec![spec("x", ColumnType::Int)], &[]);
    assert_eq!(type_error::<NoColumns>(&one).column.as_deref(), Some("x"));
    assert!(one.rows::<NoColumnsInOrder>().is_err());
}

#[test]
fn rows_with_the_prepared_metadata() {
    // Skip-metadata results are read against the statement's cached specs.
    let specs = vec![spec("id", ColumnType::BigInt), spec("name", ColumnType::Text)];
    let metadata = ResultMetadata { columns_count: 2, specs: None, ..Default::default() };
    let id = value(4i64);
    let raw = Rows::from_raw(metadata, &[vec![Some(&id[..]), Some(b"dee")]]).unwrap();
    let got: Vec<Short> = raw.rows_with(&specs).unwrap().map(Result::unwrap).collect();
    assert_eq!((got[0].id, got[0].name.as_str()), (4, "dee"));
}
