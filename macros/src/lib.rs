//! # shardwise-macros
//!
//! Derive macros for the traits of `shardwise-protocol`:
//!
//! - [`macro@SerializeValues`]: a struct with named fields is a list of bind
//!   values, matched to the bind markers of a prepared statement **by name**
//!   (as the official driver's `SerializeRow`), or by position with
//!   `#[shardwise(flavor = "in_order")]`.
//! - [`macro@DeserializeRow`]: a struct with named fields is built from a row,
//!   its fields matched to the columns by name (or by position with
//!   `#[shardwise(flavor = "in_order")]`), borrowing from the frame where
//!   the field types do (`&'a str`, `&'a [u8]`).
//! - [`macro@SerializeValue`] and [`macro@DeserializeValue`]: a struct with
//!   named fields is a value of a user-defined type (UDT), anywhere a value
//!   goes: a column, a bind value, inside collections, tuples and `Option`;
//!   a tuple struct of one field (`struct UserId(Uuid)`) is its field's value.
//!
//! ```
//! use shardwise_macros::{DeserializeRow, DeserializeValue, SerializeValue, SerializeValues};
//!
//! /// A value of `CREATE TYPE address (street text, zip int)`.
//! #[derive(SerializeValue, DeserializeValue)]
//! struct Address<'a> {
//!     street: &'a str,
//!     zip: Option<i32>,
//! }
//!
//! /// Bind values of `INSERT INTO users (name, id, home) VALUES (?, ?, ?)`:
//! /// matched by name, in any order.
//! #[derive(SerializeValues)]
//! struct NewUser<'a> {
//!     id: i64,
//!     name: &'a str,
//!     home: Address<'a>,
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
//! - `manifest`: where the deriving crate reaches the protocol crate, read
//!   from its `Cargo.toml`;
//! - `ser`: `#[derive(SerializeValues)]`;
//! - `de`: `#[derive(DeserializeRow)]`, and the code generation for reading
//!   from a frame that `udt_de` shares;
//! - `udt_ser`: `#[derive(SerializeValue)]`;
//! - `udt_de`: `#[derive(DeserializeValue)]`;
//! - `newtype`: both value derives on a one-field tuple struct;
//! - `tests`: compile errors of the derives, checked on the macro functions.
//!
//! ## The protocol crate's path
//!
//! Generated code names the protocol crate by the path the deriving crate
//! reaches it at, read from the `[dependencies]` and `[dev-dependencies]`
//! tables of its `Cargo.toml` (also `[target.'...'.dependencies]`,
//! `[dependencies.name]` tables, and `workspace = true` entries, whose
//! renames are read from the workspace root):
//!
//! | the crate depends on | generated code names |
//! |---|---|
//! | `shardwise-protocol` (as `name`) | `::name` |
//! | else `shardwise` (as `name`, e.g. `sw = { package = "shardwise" }`) | `::name::protocol` |
//! | else `shardwise-cdc` (as `name`) | `::name::shardwise::protocol` |
//! | none of them, or no readable manifest | a compile error asking for `crate = "..."` |
//!
//! Any other path is given with `#[shardwise(crate = "path")]`:
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
//! | `#[shardwise(flavor = "in_order")]` | struct | `SerializeValues`, `DeserializeRow`: match bind markers or columns by position, not by name (`"by_name"` is the default); names are not compared one by one (the official `enforce_order` compares them), but `SerializeValues` refuses fields named after the markers in another order; refused on the UDT derives |
//! | `#[shardwise(forbid_excess_udt_fields)]` | struct | `DeserializeValue`: a UDT type with a field the struct does not read (none of its fields, or a skipped one) fails the type check, naming the field (by default such fields are skipped, as official); a compile error on the other derives |
//! | `#[shardwise(skip_name_checks)]` | struct | with `flavor = "in_order"` only: `SerializeValues` accepts fields named like the markers in another order; `rename` is refused with it (as official); a compile error elsewhere |
//! | `#[shardwise(rename = "name")]` | field | the column, bind marker or UDT field name, instead of the field's name |
//! | `#[shardwise(skip)]` | field | `SerializeValues`, `SerializeValue`: not sent; `DeserializeRow`, `DeserializeValue`: not read, set to `Default::default()` |
//! | `#[shardwise(flatten)]` | field | `SerializeValues`, `DeserializeRow`: the field's type (a struct with the same derive and flavor) contributes its fields as if they were the parent's, matched by name or taking their positions in order; not with `rename`; a compile error on the UDT derives |
//! | `#[shardwise(default_when_null)]` | field | `DeserializeRow`, `DeserializeValue`: a null column or UDT field (or one past the end of a shorter UDT value) reads as `Default::default()`; ignored by `SerializeValues` and `SerializeValue` (as official) |
//! | `#[shardwise(allow_missing)]` | field | `DeserializeValue`: a UDT type without the field (an older type, before `ALTER TYPE ... ADD`) reads it as `Default::default()`; a compile error on `SerializeValue` (a value is written the same whatever the type, so a field the type lacks cannot be left out) and on the row derives |
//!
//! A flattened struct:
//!
//! ```
//! use shardwise_macros::{DeserializeRow, SerializeValues};
//!
//! /// The key of `events (tenant text, id bigint, note text, PRIMARY KEY (tenant, id))`.
//! #[derive(SerializeValues, DeserializeRow)]
//! struct Key<'a> {
//!     tenant: &'a str,
//!     id: i64,
//! }
//!
//! /// A whole row: `tenant`, `id` and `note`, by name in any order.
//! #[derive(SerializeValues, DeserializeRow)]
//! struct Event<'a> {
//!     #[shardwise(flatten)]
//!     key: Key<'a>,
//!     #[shardwise(default_when_null)]
//!     note: String,
//! }
//! ```
//!
//! ## Newtypes
//!
//! `#[derive(SerializeValue, DeserializeValue)]` on a tuple struct of one
//! field is that field's value (its type checks, encoding, and borrowing):
//!
//! ```
//! use shardwise_macros::{DeserializeValue, SerializeValue};
//!
//! /// A `uuid` column, typed.
//! #[derive(Clone, Copy, SerializeValue, DeserializeValue)]
//! struct UserId(uuid::Uuid);
//!
//! /// A `text` column, borrowed from the response.
//! #[derive(SerializeValue, DeserializeValue)]
//! struct Nick<'a>(&'a str);
//! ```
//!
//! Enums, unions, unit structs and tuple structs of several fields are
//! rejected at compile time (values without names are better written as
//! tuples; an enum is a hand-written impl, see the porting guide):
//!
//! ```compile_fail
//! #[derive(shardwise_macros::DeserializeRow)]
//! struct Pair(i64, String);
//! ```
//!
//! An attribute a derive cannot honour is a compile error naming it:
//!
//! ```compile_fail
//! #[derive(shardwise_macros::SerializeValue)]
//! struct Profile {
//!     nick: String,
//!     #[shardwise(allow_missing)] // only DeserializeValue can leave it out
//!     badge: Option<String>,
//! }
//! ```

#![forbid(unsafe_code)]
#![warn(missing_docs)]

mod attrs;
mod de;
mod manifest;
mod newtype;
mod ser;
mod udt_de;
mod udt_ser;

use proc_macro::TokenStream;
use syn::{parse_macro_input, DeriveInput};

/// Derives `SerializeValues` for a struct with named fields: its fields
/// (except those with `#[shardwise(skip)]`) are the bind values.
///
/// By default fields are matched to the bind markers of a prepared
/// statement **by name** (the field's name, or `#[shardwise(rename = "...")]`),
/// as the official driver's `SerializeRow` does:
///
/// - `check_types(specs)` fails with `EncodeError::Fields` naming the marker
///   or field when a marker has no field of its name, a field has no marker
///   of its name, or a marker name appears twice (`c > ? AND c < ?`: bind a
///   tuple, or name the markers `:lo` and `:hi`); a field whose type does not
///   fit its marker's is an `EncodeError::TypeMismatch` naming the marker.
/// - `encode_for(specs, buf)` writes the fields in the markers' order, with a
///   `match` on each marker's name (no allocation). The driver uses it for
///   prepared statements, batches of them, and the partition key's token.
/// - `encode(buf)` writes them in field order: what a statement without
///   bind-marker metadata (an unprepared `Statement`) gets, since the names
///   of its markers are unknown. Such a statement needs the fields in the
///   order of its `?` markers (or use a tuple).
/// - `count()` is the number of fields, `with_names()` is `false`, and
///   `encoded_len()` does not depend on the order.
///
/// With `#[shardwise(flavor = "in_order")]`, field `i` is marker `i`: the
/// count and the types are checked, names are not, except that fields
/// carrying the markers' names in another order are refused (an
/// `EncodeError::InvalidValue`), as surely a mistake.
///
/// A `#[shardwise(flatten)]` field (a struct deriving `SerializeValues` with
/// the same flavor) contributes its values as if they were the struct's
/// own: by name, each of its markers is matched like the struct's fields;
/// in order, it takes as many positions as it has values.
///
/// Generic structs and structs with lifetimes (`struct W<'a> { name: &'a str }`)
/// are supported; fields whose type mentions a type parameter get a
/// `SerializeValue` bound.
///
/// ```
/// use shardwise_macros::SerializeValues;
/// use shardwise_protocol::types::ser::SerializeValues as _;
/// use shardwise_protocol::types::{ColumnSpec, ColumnType};
///
/// #[derive(SerializeValues)]
/// struct Insert<'a> {
///     id: i32,
///     name: &'a str,
///     #[shardwise(skip)]
///     _note: &'static str,
/// }
///
/// let spec = |name: &str, typ| ColumnSpec { keyspace: "ks".into(), table: "t".into(), name: name.into(), typ };
/// // `INSERT INTO t (name, id) VALUES (?, ?)`: markers in another order than the fields.
/// let markers = [spec("name", ColumnType::Text), spec("id", ColumnType::Int)];
/// let v = Insert { id: 7, name: "seven", _note: "not sent" };
/// v.check_types(&markers).unwrap();
/// let (mut a, mut b) = (Vec::new(), Vec::new());
/// v.encode_for(&markers, &mut a);
/// ("seven", 7i32).encode(&mut b);
/// assert_eq!((v.count(), a), (2, b));
/// // A marker without a field is an error naming it.
/// let wrong = [spec("name", ColumnType::Text), spec("user_id", ColumnType::Int)];
/// assert!(v.check_types(&wrong).unwrap_err().to_string().contains("\"user_id\""));
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
/// `#[shardwise(skip)]` are not read but set to `Default::default()`, and
/// fields with `#[shardwise(default_when_null)]` are `Default::default()`
/// when their column is null. A `#[shardwise(flatten)]` field (a struct
/// deriving `DeserializeRow` with the same flavor) reads its own columns,
/// by name among the struct's, or at its positions in order.
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

/// Derives `SerializeValue` for a struct with named fields, written as a
/// value of a CQL user-defined type (UDT).
///
/// A value's encoding never depends on the column type, so the fields
/// (except those with `#[shardwise(skip)]`) are written in declaration
/// order, and `check_type(typ)` accepts a UDT only when the struct's fields
/// are, in order, the type's fields by name (`#[shardwise(rename = "...")]`
/// renames): the type may have more fields after them, which the value
/// leaves out (they read as null). Anything else fails with
/// `EncodeError::Fields` naming the field: a field the type does not have,
/// a field at another position than the type's (reorder the struct's fields),
/// or a field whose value does not fit the type's field (its error inside).
/// A column that is no UDT is an `EncodeError::TypeMismatch`.
///
/// The derived type is a value like any other: a column, a bind value,
/// inside `Option`, lists, sets, maps and tuples, and in a
/// `#[derive(SerializeValues)]` struct. `#[shardwise(default_when_null)]`
/// is accepted and ignored (it is for reading); `allow_missing` is a
/// compile error, since a value is written the same whatever the type.
///
/// On a tuple struct of one field (`struct UserId(Uuid)`), the derive
/// writes the field's value: `check_type`, `encoded_len` and `encode` are
/// the field's.
///
/// ```
/// use shardwise_macros::SerializeValue;
/// use shardwise_protocol::types::ser::SerializeValue as _;
/// use shardwise_protocol::types::ColumnType;
///
/// #[derive(SerializeValue)]
/// struct Address<'a> {
///     street: &'a str,
///     zip: i32,
/// }
///
/// let udt = |fields: &[(&str, ColumnType)]| ColumnType::Udt {
///     keyspace: "ks".into(),
///     name: "address".into(),
///     fields: fields.iter().map(|(n, t)| (n.to_string(), t.clone())).collect(),
/// };
/// let home = Address { street: "Main", zip: 1234 };
/// // The type may have more fields than the struct, after its own.
/// home.check_type(&udt(&[("street", ColumnType::Text), ("zip", ColumnType::Int), ("note", ColumnType::Text)]))
///     .unwrap();
/// // The same fields in another order are refused, naming the field.
/// let swapped = udt(&[("zip", ColumnType::Int), ("street", ColumnType::Text)]);
/// assert!(home.check_type(&swapped).unwrap_err().to_string().contains("field \"street\""));
/// // Written like the tuple of its fields.
/// let (mut a, mut b) = (Vec::new(), Vec::new());
/// home.encode(&mut a);
/// ("Main", 1234i32).encode(&mut b);
/// assert_eq!(a, b);
/// ```
#[proc_macro_derive(SerializeValue, attributes(shardwise))]
pub fn derive_serialize_value(input: TokenStream) -> TokenStream {
    let ast = parse_macro_input!(input as DeriveInput);
    let tokens = match newtype::field(&ast) {
        Some(field) => newtype::serialize(&ast, field),
        None => udt_ser::derive(&ast),
    };
    tokens.unwrap_or_else(syn::Error::into_compile_error).into()
}

/// Derives `DeserializeValue<'a>` for a struct with named fields, read
/// from a value of a CQL user-defined type (UDT).
///
/// - `type_check(typ)` fails with a `TypeCheckError` when `typ` is no UDT,
///   when a field (except those with `#[shardwise(skip)]`) has no UDT field
///   of its name (`#[shardwise(rename = "...")]` renames), and when a field's
///   type cannot hold its UDT field's type (the error names the UDT field).
/// - `deserialize` reads the value's fields in the type's order and assigns
///   each to the struct field of its name, in any order; the type's fields
///   that the struct lacks are skipped. A value may have fewer fields than
///   its type: the missing ones are null, so an `Option` field is `None`
///   and another fails with `UnexpectedNull`. A field's error is wrapped
///   in `DeserializeError::Field` naming it; a null UDT value is
///   `UnexpectedNull` (read an `Option` of the struct).
///
/// Field attributes: `#[shardwise(default_when_null)]` reads a null field
/// (or one past the end of a shorter value) as `Default::default()`;
/// `#[shardwise(allow_missing)]` accepts a type without the field (an older
/// type, before `ALTER TYPE ... ADD`) and sets it to `Default::default()`.
/// On a tuple struct of one field, the derive reads the field's value, and
/// borrows where the field does (`struct Nick<'a>(&'a str)`).
///
/// The struct borrows from the frame where its fields do (`&'a str`), as
/// `DeserializeRow` does, and is a value like any other: a column, inside
/// `Option`, lists, sets, maps and tuples, and in a `#[derive(DeserializeRow)]`
/// struct.
///
/// ```
/// use shardwise_macros::{DeserializeValue, SerializeValue};
/// use shardwise_protocol::types::de::{DeserializeValue as _, FrameSlice};
/// use shardwise_protocol::types::ser::SerializeValue as _;
/// use shardwise_protocol::types::ColumnType;
///
/// #[derive(DeserializeValue)]
/// struct Address<'a> {
///     zip: Option<i32>,
///     street: &'a str,
/// }
///
/// let typ = ColumnType::Udt {
///     keyspace: "ks".into(),
///     name: "address".into(),
///     fields: vec![("street".into(), ColumnType::Text), ("note".into(), ColumnType::Text), ("zip".into(), ColumnType::Int)],
/// };
/// Address::type_check(&typ).unwrap();
/// // A value with the first two fields only: `zip` is missing, so null.
/// let mut bytes = Vec::new();
/// ("Main", "a note").encode(&mut bytes);
/// let frame = bytes::Bytes::from(bytes.split_off(4));
/// let home = Address::deserialize(&typ, Some(FrameSlice::whole(&frame))).unwrap();
/// assert_eq!((home.street, home.zip), ("Main", None));
/// ```
#[proc_macro_derive(DeserializeValue, attributes(shardwise))]
pub fn derive_deserialize_value(input: TokenStream) -> TokenStream {
    let ast = parse_macro_input!(input as DeriveInput);
    let tokens = match newtype::field(&ast) {
        Some(field) => newtype::deserialize(&ast, field),
        None => udt_de::derive(&ast),
    };
    tokens.unwrap_or_else(syn::Error::into_compile_error).into()
}

#[cfg(test)]
mod tests;
