//! # shardwise-macros
//!
//! Derive macros for the traits of `shardwise-protocol`:
//!
//! - [`macro@SerializeValues`]: a struct with named fields is a list of bind
//!   values, sent in field order.
//! - [`macro@DeserializeRow`]: a struct with named fields is built from a row,
//!   its fields matched to the columns by name (or by position with
//!   `#[shardwise(flavor = "in_order")]`), borrowing from the frame where
//!   the field types do (`&'a str`, `&'a [u8]`).
//!
//! ```
//! use shardwise_macros::{DeserializeRow, SerializeValues};
//!
//! /// Bind values of `INSERT INTO users (id, name) VALUES (?, ?)`.
//! #[derive(SerializeValues)]
//! struct NewUser<'a> {
//!     id: i64,
//!     name: &'a str,
//! }
//!
//! /// A row of `SELECT name, id, tags FROM users`: columns in any order.
//! #[derive(DeserializeRow)]
//! struct User<'a> {
//!     id: i64,
//!     name: &'a str,
//!     tags: Option<Vec<String>>,
//! }
//! ```
//!
//! ## Modules
//!
//! - `attrs`: parsing of the derive input and its `#[shardwise(...)]` attributes;
//! - `ser`: `#[derive(SerializeValues)]`;
//! - `de`: `#[derive(DeserializeRow)]`;
//! - `tests`: compile errors of the derives, checked on the macro functions.
//!
//! ## The protocol crate's path
//!
//! Generated code names the protocol crate `::shardwise_protocol` when the
//! deriving crate depends on it, and `::shardwise::protocol` when it depends
//! only on the driver (which re-exports these derives). Any other path is
//! given with `#[shardwise(crate = "path")]`:
//!
//! ```
//! extern crate shardwise_protocol as proto;
//!
//! #[derive(shardwise_macros::SerializeValues)]
//! #[shardwise(crate = "proto")]
//! struct Key {
//!     id: i64,
//! }
//! ```
//!
//! The generated code names `bytes::BufMut` through the protocol crate's
//! hidden re-export, so deriving crates need no `bytes` dependency.
//!
//! ## Attributes
//!
//! | attribute | on | effect |
//! |---|---|---|
//! | `#[shardwise(crate = "path")]` | struct | path of the protocol crate |
//! | `#[shardwise(flavor = "in_order")]` | struct | `DeserializeRow`: match columns by position, not by name (`"by_name"` is the default) |
//! | `#[shardwise(rename = "column")]` | field | the column or bind marker name, instead of the field's name |
//! | `#[shardwise(skip)]` | field | `SerializeValues`: not sent; `DeserializeRow`: not read, set to `Default::default()` |
//!
//! Enums, unions, tuple structs and unit structs are rejected at compile
//! time (values without names are better written as tuples):
//!
//! ```compile_fail
//! #[derive(shardwise_macros::DeserializeRow)]
//! struct Pair(i64, String);
//! ```

#![forbid(unsafe_code)]
#![warn(missing_docs)]

mod attrs;
mod de;
mod ser;

use proc_macro::TokenStream;
use syn::{parse_macro_input, DeriveInput};

/// Derives `SerializeValues` for a struct with named fields: its fields
/// (except those with `#[shardwise(skip)]`) are the bind values, in field
/// order.
///
/// - `count()` is the number of fields, `with_names()` is `false`, and
///   `encoded_len()` / `encode()` sum and write each field's
///   `SerializeValue` encoding in order: the same bytes as the tuple of the
///   fields.
/// - `check_types(specs)` fails with `EncodeError::InvalidValue` when the
///   number of bind markers differs, and when the markers carry the fields'
///   names (`#[shardwise(rename = "...")]` renames) in a different order:
///   values are never reordered, so the struct must declare its fields in
///   bind-marker order. Then each field's `check_type` is checked against
///   its marker's type, and a mismatch names the marker.
///
/// Generic structs and structs with lifetimes (`struct W<'a> { name: &'a str }`)
/// are supported; fields whose type mentions a type parameter get a
/// `SerializeValue` bound.
///
/// ```
/// use shardwise_macros::SerializeValues;
/// use shardwise_protocol::types::ser::SerializeValues as _;
///
/// #[derive(SerializeValues)]
/// struct Insert<'a> {
///     id: i32,
///     name: &'a str,
///     #[shardwise(skip)]
///     _note: &'static str,
/// }
///
/// let v = Insert { id: 7, name: "seven", _note: "not sent" };
/// let (mut a, mut b) = (Vec::new(), Vec::new());
/// v.encode(&mut a);
/// (7i32, "seven").encode(&mut b);
/// assert_eq!((v.count(), a), (2, b));
/// ```
#[proc_macro_derive(SerializeValues, attributes(shardwise))]
pub fn derive_serialize_values(input: TokenStream) -> TokenStream {
    let ast = parse_macro_input!(input as DeriveInput);
    ser::derive(&ast).unwrap_or_else(syn::Error::into_compile_error).into()
}

/// Derives `DeserializeRow<'a>` for a struct with named fields.
///
/// By default columns are matched to fields **by name** (the field's name,
/// or `#[shardwise(rename = "column")]`), in any order:
///
/// - `type_check(specs)` fails with a `TypeCheckError` naming the column
///   when a field has no column, when a column has no field, when two
///   columns have the same name, or when a field's type cannot hold its
///   column's type.
/// - `deserialize(row)` reads the columns in result order, assigns each to
///   its field with a `match` on the column name, and wraps a failure in
///   `DeserializeError::Column { index, name, source }`. Nothing is
///   allocated beyond what the field types allocate.
///
/// With `#[shardwise(flavor = "in_order")]`, column `i` is field `i`:
/// names are not compared (only the count and the types are checked), which
/// makes each row a little cheaper.
///
/// A struct with one lifetime parameter borrows from the frame with it
/// (`impl<'a> DeserializeRow<'a> for R<'a>`); fields with
/// `#[shardwise(skip)]` are not read but set to `Default::default()`.
///
/// ```
/// use shardwise_macros::DeserializeRow;
/// use shardwise_protocol::rows::{ResultMetadata, Rows};
/// use shardwise_protocol::types::{ColumnSpec, ColumnType};
///
/// #[derive(DeserializeRow)]
/// struct User<'a> {
///     id: i32,
///     #[shardwise(rename = "user_name")]
///     name: &'a str,
/// }
///
/// let spec = |name: &str, typ| ColumnSpec { keyspace: "ks".into(), table: "t".into(), name: name.into(), typ };
/// let metadata = ResultMetadata {
///     columns_count: 2,
///     specs: Some(vec![spec("user_name", ColumnType::Text), spec("id", ColumnType::Int)]),
///     ..Default::default()
/// };
/// let rows = Rows::from_raw(metadata, &[vec![Some(b"seven"), Some(&7i32.to_be_bytes()[..])]]).unwrap();
/// let user = rows.rows::<User>().unwrap().next().unwrap().unwrap();
/// assert_eq!((user.id, user.name), (7, "seven"));
/// ```
#[proc_macro_derive(DeserializeRow, attributes(shardwise))]
pub fn derive_deserialize_row(input: TokenStream) -> TokenStream {
    let ast = parse_macro_input!(input as DeriveInput);
    de::derive(&ast).unwrap_or_else(syn::Error::into_compile_error).into()
}

#[cfg(test)]
mod tests;
