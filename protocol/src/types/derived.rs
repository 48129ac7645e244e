//! What the derives of `shardwise-macros` generate calls to: the checks of
//! a struct's fields against a user-defined type's fields or a statement's
//! bind markers, the reader of a UDT value's fields, and the errors that
//! name the field. Each is a plain function so that the generated code
//! stays small; they are public for that code, and usable by hand-written
//! impls of the same shape.
//!
//! The rules they implement:
//!
//! - **Writing a struct as a UDT value** (`#[derive(SerializeValue)]`): a
//!   value's encoding never depends on the column type, so the fields are
//!   written in the struct's order, and [`udt_field`] accepts a UDT only if
//!   the struct's fields are, in order, its first fields. The type may have
//!   more fields after them: a UDT value may have fewer fields than its
//!   type, the missing ones are null.
//! - **Reading a UDT value into a struct** (`#[derive(DeserializeValue)]`):
//!   the value's fields are read in the type's order with a [`UdtReader`]
//!   and given to the struct's fields by name; fields of the type the
//!   struct does not have are skipped, fields missing at the end of a
//!   shorter value are null.
//! - **Bind markers by name** (`#[derive(SerializeValues)]`): the struct's
//!   names and the markers' names must be the same set, each marker once
//!   ([`FieldMismatch`] says which is not).

use bytes::BufMut;

use crate::codec;
use crate::error::{EncodeError, FieldMismatch};
use crate::types::de::{ColumnIterator, DeserializeError, Fields, FrameSlice, RawColumn, TypeCheckError};
use crate::types::ser::SerializeValues;
use crate::types::{ColumnSpec, ColumnType};

// ---------------------------------------------------------------- UDT values, writing

/// The field types of `typ` when it is a user-defined type.
pub fn udt_fields(typ: &ColumnType) -> Option<&[(String, ColumnType)]> {
    match typ {
        ColumnType::Udt { fields, .. } => Some(fields),
        _ => None,
    }
}

/// `Ok` when `typ` is a user-defined type, else the mismatch between it and
/// struct `T`.
pub fn check_udt<T: ?Sized>(typ: &ColumnType) -> Result<(), EncodeError> {
    match typ {
        ColumnType::Udt { .. } => Ok(()),
        _ => Err(EncodeError::TypeMismatch { rust_type: std::any::type_name::<T>(), cql_type: typ.to_string() }),
    }
}

/// The type of field `position` of the UDT `typ`, which struct `T` writes
/// from its field `name`: an [`EncodeError`] when `typ` is no UDT, has no
/// field `name`, or has it at another position.
pub fn udt_field<'t, T: ?Sized>(
    typ: &'t ColumnType,
    position: usize,
    name: &str,
) -> Result<&'t ColumnType, EncodeError> {
    let Some(fields) = udt_fields(typ) else {
        return Err(EncodeError::TypeMismatch { rust_type: std::any::type_name::<T>(), cql_type: typ.to_string() });
    };
    match fields.get(position) {
        Some((field, t)) if field == name => Ok(t),
        Some((expected, _)) if fields.iter().any(|(f, _)| f == name) => Err(fields_error::<T>(
            typ,
            FieldMismatch::OutOfOrder { field: name.to_owned(), position, expected: expected.clone() },
        )),
        _ => Err(fields_error::<T>(typ, FieldMismatch::NoSuchField { field: name.to_owned() })),
    }
}

/// Names the field `name` of struct `T` in the error of its value's type
/// check against the UDT `typ`.
pub fn in_udt_field<T: ?Sized>(typ: &ColumnType, name: &str, e: EncodeError) -> EncodeError {
    fields_error::<T>(typ, FieldMismatch::FieldType { field: name.to_owned(), source: Box::new(e) })
}

/// The encoded size of a UDT value whose fields' encodings (each with its
/// `[int]` length) add up to `body`: `body` and the value's own length.
pub fn udt_len(body: usize) -> Result<usize, EncodeError> {
    Ok(4 + codec::check_int_len("user-defined type value", body)?)
}

fn fields_error<T: ?Sized>(typ: &ColumnType, mismatch: FieldMismatch) -> EncodeError {
    EncodeError::Fields {
        rust_type: std::any::type_name::<T>(),
        cql_type: typ.to_string(),
        mismatch: Box::new(mismatch),
    }
}

// ---------------------------------------------------------------- UDT values, reading

/// Reads the `[bytes]` fields of a UDT value one by one, in the type's
/// order. A value may have fewer fields than its type: the missing last ones
/// read as null (`None`).
pub struct UdtReader<'a> {
    fields: Fields<'a>,
}

impl std::fmt::Debug for UdtReader<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("UdtReader").finish_non_exhaustive()
    }
}

impl<'a> UdtReader<'a> {
    /// The fields of `value`, a value of `typ`.
    pub fn new(typ: &'a ColumnType, value: FrameSlice<'a>) -> Self {
        UdtReader { fields: Fields::new(typ, value) }
    }

    /// The next field's bytes (`None`: null, or past the value's end).
    pub fn next_field(&mut self) -> Result<Option<FrameSlice<'a>>, DeserializeError> {
        self.fields.next()
    }

    /// Fails if bytes are left after the fields read.
    pub fn finish(&self) -> Result<(), DeserializeError> {
        self.fields.finish()
    }
}

/// The type check of struct `T` read from `typ`: the type of the UDT's
/// field `name`, or the error that `typ` is no UDT or has no such field.
pub fn udt_field_type<'t, T: ?Sized>(typ: &'t ColumnType, name: &str) -> Result<&'t ColumnType, TypeCheckError> {
    let Some(fields) = udt_fields(typ) else {
        return Err(TypeCheckError::new::<T>(typ));
    };
    match fields.iter().find(|(f, _)| f == name) {
        Some((_, t)) => Ok(t),
        None => {
            let names: Vec<&str> = fields.iter().map(|(f, _)| f.as_str()).collect();
            Err(TypeCheckError {
                rust_type: std::any::type_name::<T>(),
                cql_type: format!("{typ} with no field named {name:?} (fields: {})", names.join(", ")),
                column: None,
            })
        }
    }
}

/// The type of the UDT field `name` of `typ`, if `typ` is a UDT with such a
/// field (for `allow_missing` fields, which may be absent).
pub fn udt_field_type_if_any<'t>(typ: &'t ColumnType, name: &str) -> Option<&'t ColumnType> {
    udt_fields(typ)?.iter().find(|(f, _)| f == name).map(|(_, t)| t)
}

/// Names the UDT field `name` (of `typ`) in the type-check error of the
/// struct field that reads it.
pub fn in_udt_field_check(typ: &ColumnType, name: &str, mut e: TypeCheckError) -> TypeCheckError {
    e.cql_type = format!("{} (field {name} of {typ})", e.cql_type);
    e
}

/// Names the UDT field `name` in the error of reading its value.
pub fn in_udt_field_value(name: &str, e: DeserializeError) -> DeserializeError {
    DeserializeError::Field { field: name.to_owned(), source: Box::new(e) }
}

/// The error of a UDT type with field `name`, which struct `T` (deriving
/// with `forbid_excess_udt_fields`) does not read.
pub fn excess_udt_field<T: ?Sized>(typ: &ColumnType, name: &str) -> TypeCheckError {
    TypeCheckError {
        rust_type: std::any::type_name::<T>(),
        cql_type: format!("{typ} with field {name:?}, which the struct does not read (forbid_excess_udt_fields)"),
        column: None,
    }
}

/// The error for a struct field that a UDT value did not set, because the
/// type has no such field (only when the type was not checked first).
pub fn missing_udt_field<T: ?Sized>(typ: &ColumnType, name: &str) -> DeserializeError {
    match udt_field_type::<T>(typ, name) {
        Err(e) => e.into(),
        Ok(_) => DeserializeError::UnexpectedNull { rust_type: std::any::type_name::<T>() },
    }
}

// ---------------------------------------------------------------- bind markers by name

/// The error of struct `T`'s fields against the bind markers `specs`.
pub fn markers_error<T: ?Sized>(specs: &[ColumnSpec], mismatch: FieldMismatch) -> EncodeError {
    let mut cql_type = String::from("bind markers (");
    for (i, spec) in specs.iter().enumerate() {
        if i > 0 {
            cql_type.push_str(", ");
        }
        cql_type.push_str(&spec.name);
        cql_type.push(' ');
        cql_type.push_str(&spec.typ.to_string());
    }
    cql_type.push(')');
    EncodeError::Fields { rust_type: std::any::type_name::<T>(), cql_type, mismatch: Box::new(mismatch) }
}

/// A bind marker that no field of `T` is named after.
pub fn no_field_for_marker<T: ?Sized>(specs: &[ColumnSpec], marker: &str) -> EncodeError {
    markers_error::<T>(specs, FieldMismatch::NoFieldForMarker { marker: marker.to_owned() })
}

/// A field of `T` that no bind marker is named after.
pub fn no_marker_for_field<T: ?Sized>(specs: &[ColumnSpec], field: &str) -> EncodeError {
    markers_error::<T>(specs, FieldMismatch::NoMarkerForField { field: field.to_owned() })
}

/// A bind marker name that appears twice.
pub fn duplicate_marker<T: ?Sized>(specs: &[ColumnSpec], marker: &str) -> EncodeError {
    markers_error::<T>(specs, FieldMismatch::DuplicateMarker { marker: marker.to_owned() })
}

/// Adds the bind marker's name to a type mismatch of its value.
pub fn in_marker(e: EncodeError, spec: &ColumnSpec) -> EncodeError {
    match e {
        EncodeError::TypeMismatch { rust_type, cql_type } => {
            EncodeError::TypeMismatch { rust_type, cql_type: format!("{cql_type} (bind marker {})", spec.name) }
        }
        e => e,
    }
}

// ---------------------------------------------------------------- structs the derives build on

/// What a struct matched by name makes of a column or bind marker name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NameMatch {
    /// No field (of the struct or of a flattened one) has the name.
    NotMine,
    /// A field has it, seen for the first time.
    Matched,
    /// A field has it, but an earlier column or marker had the same name.
    Duplicate,
}

/// Marks the name of index `i` in `seen`: [`NameMatch::Duplicate`] when it
/// was already.
pub fn mark_seen(seen: &mut [bool], i: usize) -> NameMatch {
    match seen.get_mut(i).map(|seen| std::mem::replace(seen, true)) {
        Some(false) => NameMatch::Matched,
        _ => NameMatch::Duplicate,
    }
}

/// A struct whose fields are bind values matched to the markers by name:
/// what `#[derive(SerializeValues)]` implements besides `SerializeValues`,
/// so that another struct can take its fields with `#[shardwise(flatten)]`.
/// The names are those of the fields and, in order after them, of the
/// flattened fields' own.
#[diagnostic::on_unimplemented(
    message = "`{Self}` cannot be flattened into bind values matched by name",
    label = "needs `#[derive(SerializeValues)]` (by name, the default flavor)",
    note = "a `#[shardwise(flatten)]` field of a by-name struct must be a struct deriving `SerializeValues` by name"
)]
pub trait ValuesByName: SerializeValues {
    /// Which names a marker was found for.
    type Seen;
    /// Nothing seen yet.
    fn new_seen() -> Self::Seen;
    /// Marks `name` as seen.
    fn mark(name: &str, seen: &mut Self::Seen) -> NameMatch;
    /// Checks the value named after `spec` against its type: `Ok(false)`
    /// when no value has the name.
    fn check_named(&self, spec: &ColumnSpec) -> Result<bool, EncodeError>;
    /// The first name not seen.
    fn unseen(seen: &Self::Seen) -> Option<&'static str>;
    /// Writes the value named `name`: `false` when no value has the name.
    fn encode_named(&self, name: &str, buf: &mut impl BufMut) -> bool;
}

/// `SerializeValues::check_types` of a struct matched by name: each marker
/// needs a value of its name, each value a marker, and no marker name
/// appears twice.
pub fn check_by_name<T: ValuesByName + ?Sized>(values: &T, specs: &[ColumnSpec]) -> Result<(), EncodeError> {
    let mut seen = T::new_seen();
    for spec in specs {
        match T::mark(&spec.name, &mut seen) {
            NameMatch::NotMine => return Err(no_field_for_marker::<T>(specs, &spec.name)),
            NameMatch::Duplicate => return Err(duplicate_marker::<T>(specs, &spec.name)),
            NameMatch::Matched => {
                values.check_named(spec)?;
            }
        }
    }
    match T::unseen(&seen) {
        Some(name) => Err(no_marker_for_field::<T>(specs, name)),
        None => Ok(()),
    }
}

/// `SerializeValues::encode_for` of a struct matched by name: the values in
/// the markers' order when each marker names one value and each value one
/// marker (what [`check_by_name`] accepts), else in their own order, so
/// that exactly `encoded_len` bytes are written either way.
pub fn encode_by_name<T: ValuesByName + ?Sized>(values: &T, specs: &[ColumnSpec], buf: &mut impl BufMut) {
    if specs.len() != values.count() {
        return values.encode(buf);
    }
    let mut seen = T::new_seen();
    if specs.iter().any(|spec| T::mark(&spec.name, &mut seen) != NameMatch::Matched) {
        return values.encode(buf);
    }
    for spec in specs {
        values.encode_named(&spec.name, buf);
    }
}

/// A struct whose fields are bind values in the markers' order: what
/// `#[derive(SerializeValues)]` with `flavor = "in_order"` implements
/// besides `SerializeValues`, so that another such struct can take its
/// fields with `#[shardwise(flatten)]`.
#[diagnostic::on_unimplemented(
    message = "`{Self}` cannot be flattened into bind values in order",
    label = "needs `#[derive(SerializeValues)]` with `#[shardwise(flavor = \"in_order\")]`",
    note = "a `#[shardwise(flatten)]` field of an in-order struct must be a struct deriving `SerializeValues` in order"
)]
pub trait ValuesInOrder: SerializeValues {
    /// Checks the values against `specs`, which must be exactly as many.
    fn check_in_order(&self, specs: &[ColumnSpec]) -> Result<(), EncodeError>;
}

/// The error of values in order against another number of markers.
pub fn marker_count_mismatch() -> EncodeError {
    EncodeError::InvalidValue {
        what: "bind values",
        reason: "the number of values differs from the number of bind markers",
    }
}

/// The markers `at..at + n` of `specs`, or the count mismatch.
pub fn markers_at(specs: &[ColumnSpec], at: usize, n: usize) -> Result<&[ColumnSpec], EncodeError> {
    at.checked_add(n).and_then(|end| specs.get(at..end)).ok_or_else(marker_count_mismatch)
}

/// A struct read from a row's columns by name: what `#[derive(DeserializeRow)]`
/// implements besides `DeserializeRow`, so that another struct can take its
/// fields with `#[shardwise(flatten)]`.
#[diagnostic::on_unimplemented(
    message = "`{Self}` cannot be flattened into a row read by name",
    label = "needs `#[derive(DeserializeRow)]` (by name, the default flavor)",
    note = "a `#[shardwise(flatten)]` field of a by-name row must be a struct deriving `DeserializeRow` by name"
)]
pub trait RowByName<'a>: Sized {
    /// Which columns were found.
    type Seen;
    /// The fields read so far.
    type Partial;
    /// Nothing seen yet.
    fn new_seen() -> Self::Seen;
    /// Nothing read yet.
    fn new_partial() -> Self::Partial;
    /// Marks column `name` as found.
    fn mark(name: &str, seen: &mut Self::Seen) -> NameMatch;
    /// The type check of the field reading column `spec`: `Ok(false)` when
    /// none does.
    fn check_named(spec: &ColumnSpec) -> Result<bool, TypeCheckError>;
    /// The first column not found.
    fn unseen(seen: &Self::Seen) -> Option<&'static str>;
    /// Reads `column` into the field of its name: `Ok(false)` when none has it.
    fn read_named(column: &RawColumn<'a>, partial: &mut Self::Partial) -> Result<bool, DeserializeError>;
    /// The struct, or the name of a column not read.
    fn finish(partial: Self::Partial) -> Result<Self, &'static str>;
}

/// `DeserializeRow::type_check` of a struct read by name.
pub fn row_type_check_by_name<'a, T: RowByName<'a>>(specs: &[ColumnSpec]) -> Result<(), TypeCheckError> {
    let rust_type = std::any::type_name::<T>();
    let mut seen = T::new_seen();
    let mut extra = None;
    for spec in specs {
        match T::mark(&spec.name, &mut seen) {
            NameMatch::Duplicate => return Err(duplicate_column(rust_type, spec)),
            NameMatch::Matched => {
                T::check_named(spec).map_err(|e| in_column(e, spec))?;
            }
            NameMatch::NotMine => {
                extra.get_or_insert(spec);
            }
        }
    }
    if let Some(name) = T::unseen(&seen) {
        return Err(missing_column(rust_type, name, specs));
    }
    match extra {
        Some(spec) => Err(extra_column(rust_type, spec)),
        None => Ok(()),
    }
}

/// `DeserializeRow::deserialize` of a struct read by name.
pub fn row_deserialize_by_name<'a, T: RowByName<'a>>(row: ColumnIterator<'a>) -> Result<T, DeserializeError> {
    let specs = row.specs();
    let start = specs.len() - row.columns_remaining();
    let mut partial = T::new_partial();
    for (i, column) in row.enumerate() {
        let column = column.map_err(|e| malformed_column(start + i, specs, e))?;
        if !T::read_named(&column, &mut partial).map_err(|e| in_raw_column(&column, e))? {
            let e = extra_column(std::any::type_name::<T>(), column.spec);
            return Err(in_raw_column(&column, e.into()));
        }
    }
    T::finish(partial).map_err(|name| missing_column(std::any::type_name::<T>(), name, specs).into())
}

/// A struct read from a row's columns in order: what `#[derive(DeserializeRow)]`
/// with `flavor = "in_order"` implements besides `DeserializeRow`, so that
/// another such struct can take its fields with `#[shardwise(flatten)]`.
#[diagnostic::on_unimplemented(
    message = "`{Self}` cannot be flattened into a row read in order",
    label = "needs `#[derive(DeserializeRow)]` with `#[shardwise(flavor = \"in_order\")]`",
    note = "a `#[shardwise(flatten)]` field of an in-order row must be a struct deriving `DeserializeRow` in order"
)]
pub trait RowInOrder<'a>: Sized {
    /// The number of columns read.
    fn column_count() -> usize;
    /// The type check against `specs`, exactly [`Self::column_count`] of them.
    fn check_in_order(specs: &[ColumnSpec]) -> Result<(), TypeCheckError>;
    /// Reads the next [`Self::column_count`] columns of `row`.
    fn read_in_order(row: &mut ColumnIterator<'a>) -> Result<Self, DeserializeError>;
}

/// `DeserializeRow::type_check` of a struct read in order.
pub fn row_type_check_in_order<'a, T: RowInOrder<'a>>(specs: &[ColumnSpec]) -> Result<(), TypeCheckError> {
    if specs.len() != T::column_count() {
        return Err(column_count_error(std::any::type_name::<T>(), specs, T::column_count()));
    }
    T::check_in_order(specs)
}

/// `DeserializeRow::deserialize` of a struct read in order.
pub fn row_deserialize_in_order<'a, T: RowInOrder<'a>>(mut row: ColumnIterator<'a>) -> Result<T, DeserializeError> {
    let (expected, actual) = (T::column_count(), row.columns_remaining());
    if actual != expected {
        return Err(DeserializeError::ColumnCount { expected, actual });
    }
    T::read_in_order(&mut row)
}

/// The column `at` of `specs` (or `at..at + n`), for a struct read in order,
/// or the count mismatch.
pub fn columns_at<T: ?Sized>(specs: &[ColumnSpec], at: usize, n: usize) -> Result<&[ColumnSpec], TypeCheckError> {
    at.checked_add(n)
        .and_then(|end| specs.get(at..end))
        .ok_or_else(|| column_count_error(std::any::type_name::<T>(), specs, at.saturating_add(n)))
}

/// The next column of `row`, for a struct read in order: its bytes framed,
/// or the error naming it.
pub fn next_column<'a>(row: &mut ColumnIterator<'a>) -> Result<RawColumn<'a>, DeserializeError> {
    let specs = row.specs();
    let index = specs.len() - row.columns_remaining();
    match row.next() {
        Some(Ok(column)) => Ok(column),
        Some(Err(e)) => Err(malformed_column(index, specs, e)),
        None => Err(DeserializeError::ColumnCount { expected: index + 1, actual: index }),
    }
}

/// Names `column` in the error of reading it.
pub fn in_raw_column(column: &RawColumn<'_>, e: DeserializeError) -> DeserializeError {
    DeserializeError::Column { index: column.index, name: column.spec.name.clone(), source: Box::new(e) }
}

/// Names column `spec` in a type-check error.
pub fn in_column(mut e: TypeCheckError, spec: &ColumnSpec) -> TypeCheckError {
    e.column = Some(spec.name.clone());
    e
}

/// The error of the column `index` of `specs` whose bytes could not be
/// framed.
pub fn malformed_column(index: usize, specs: &[ColumnSpec], e: crate::DecodeError) -> DeserializeError {
    match specs.get(index) {
        Some(spec) => DeserializeError::Column {
            index,
            name: spec.name.clone(),
            source: Box::new(DeserializeError::malformed(&spec.typ, e)),
        },
        None => DeserializeError::Malformed { cql_type: String::from("row"), source: e },
    }
}

/// The columns of a row, as `name type, ...`.
fn describe_columns(specs: &[ColumnSpec]) -> String {
    let mut out = String::new();
    for (i, spec) in specs.iter().enumerate() {
        if i > 0 {
            out.push_str(", ");
        }
        out.push_str(&spec.name);
        out.push(' ');
        out.push_str(&spec.typ.to_string());
    }
    out
}

/// A row without a column `column` that `rust_type` reads.
pub fn missing_column(rust_type: &'static str, column: &str, specs: &[ColumnSpec]) -> TypeCheckError {
    TypeCheckError {
        rust_type,
        cql_type: format!("row with no column named {column:?} (columns: {})", describe_columns(specs)),
        column: Some(column.to_owned()),
    }
}

/// A row with column `spec` that no field of `rust_type` reads.
pub fn extra_column(rust_type: &'static str, spec: &ColumnSpec) -> TypeCheckError {
    TypeCheckError {
        rust_type,
        cql_type: format!("row with column {:?} of type {}, which no field reads", spec.name, spec.typ),
        column: Some(spec.name.clone()),
    }
}

/// A row with two columns named as `spec`.
pub fn duplicate_column(rust_type: &'static str, spec: &ColumnSpec) -> TypeCheckError {
    TypeCheckError {
        rust_type,
        cql_type: format!("row with two columns named {:?}", spec.name),
        column: Some(spec.name.clone()),
    }
}

/// A row of another number of columns than the `expected` that
/// `rust_type` reads in order.
pub fn column_count_error(rust_type: &'static str, specs: &[ColumnSpec], expected: usize) -> TypeCheckError {
    TypeCheckError {
        rust_type,
        cql_type: format!("row of {} columns ({}), {expected} expected", specs.len(), describe_columns(specs)),
        column: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn udt() -> ColumnType {
        ColumnType::Udt {
            keyspace: "ks".into(),
            name: "address".into(),
            fields: vec![
                ("street".into(), ColumnType::Text),
                ("zip".into(), ColumnType::Int),
                ("note".into(), ColumnType::Text),
            ],
        }
    }

    #[test]
    fn udt_fields_must_come_in_the_types_order() {
        let t = udt();
        assert_eq!(udt_field::<str>(&t, 0, "street"), Ok(&ColumnType::Text));
        assert_eq!(udt_field::<str>(&t, 1, "zip"), Ok(&ColumnType::Int));
        match udt_field::<str>(&t, 0, "zip") {
            Err(EncodeError::Fields { cql_type, mismatch, .. }) => match *mismatch {
                FieldMismatch::OutOfOrder { field, position, expected } => assert_eq!(
                    (cql_type.as_str(), field.as_str(), position, expected.as_str()),
                    ("ks.address", "zip", 0, "street")
                ),
                other => panic!("{other:?}"),
            },
            other => panic!("{other:?}"),
        }
        let e = udt_field::<str>(&t, 3, "city").unwrap_err();
        assert!(
            matches!(&e, EncodeError::Fields { mismatch, .. } if matches!(&**mismatch, FieldMismatch::NoSuchField { field } if field == "city"))
        );
        assert!(e.to_string().contains("no field named \"city\""), "{e}");
        assert!(matches!(udt_field::<str>(&ColumnType::Int, 0, "street"), Err(EncodeError::TypeMismatch { .. })));
    }

    #[test]
    fn udt_reads_name_the_missing_field() {
        let t = udt();
        assert_eq!(udt_field_type::<str>(&t, "note"), Ok(&ColumnType::Text));
        let e = udt_field_type::<str>(&t, "city").unwrap_err();
        assert!(e.cql_type.contains("no field named \"city\" (fields: street, zip, note)"), "{e}");
        assert!(udt_field_type::<str>(&ColumnType::Int, "city").is_err());
        assert!(matches!(missing_udt_field::<str>(&t, "city"), DeserializeError::TypeCheck(_)));
    }

    #[test]
    fn marker_errors_describe_the_markers() {
        let specs = [ColumnSpec { keyspace: "ks".into(), table: "t".into(), name: "id".into(), typ: ColumnType::Int }];
        let e = no_field_for_marker::<str>(&specs, "id");
        assert_eq!(e.to_string(), "cannot serialize str as bind markers (id int): no field is named after bind marker \"id\" (rename one with #[shardwise(rename = \"...\")])");
    }
}
