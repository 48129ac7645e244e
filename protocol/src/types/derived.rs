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

use crate::codec;
use crate::error::{EncodeError, FieldMismatch};
use crate::types::de::{DeserializeError, Fields, FrameSlice, TypeCheckError};
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
