//! Zero-copy deserialization of CQL values and rows.
//!
//! A result set keeps the response body as one [`Bytes`]; values are read
//! as views borrowing from it (`&str`, `&[u8]`, [`Bytes`] slices via
//! [`FrameSlice::to_bytes`], lazy collection iterators). Types are checked
//! once per result set ([`DeserializeRow::type_check`]), then each row is
//! decoded without allocating.
//!
//! Values: the Rust types of [`crate::types::ser`] (borrowed `&str` and
//! `&[u8]` too; `Vec<T>` also reads `vector`s), [`ListIter`] and
//! [`MapIter`] (lazy, borrowed), and [`CqlValue`] for any type. Null is
//! [`DeserializeError::UnexpectedNull`] except into `Option<T>`, and into
//! lists, sets and maps, which read null as empty (CQL stores an empty
//! collection as null). Rows: tuples of up to 16 values, `Vec<T>` (any
//! number of columns) and [`Row`].

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use bytes::Bytes;
use uuid::Uuid;

pub use crate::types::collections::{ListIter, MapIter};

use crate::codec::Reader;
use crate::error::DecodeError;
use crate::types::{
    ColumnSpec, ColumnType, CqlDate, CqlDecimal, CqlDuration, CqlTime, CqlTimestamp, CqlValue, CqlVarint,
};

/// A value's bytes together with the buffer they live in, so that an owned
/// [`Bytes`] handle can be made without copying.
#[derive(Debug, Clone, Copy)]
pub struct FrameSlice<'a> {
    frame: &'a Bytes,
    slice: &'a [u8],
}

impl<'a> FrameSlice<'a> {
    /// A view of `slice`, which must lie inside `frame` (or be any slice when
    /// `to_bytes` may copy).
    pub fn new(frame: &'a Bytes, slice: &'a [u8]) -> Self {
        FrameSlice { frame, slice }
    }
    /// A view of a whole buffer.
    pub fn whole(frame: &'a Bytes) -> Self {
        FrameSlice { frame, slice: frame.as_ref() }
    }
    /// The bytes.
    pub fn as_slice(&self) -> &'a [u8] {
        self.slice
    }
    /// The buffer the bytes live in.
    pub fn frame(&self) -> &'a Bytes {
        self.frame
    }
    /// An owned handle on the same bytes, sharing the buffer (no copy).
    pub fn to_bytes(&self) -> Bytes {
        let range = self.frame.as_ptr_range();
        let inside = range.start <= self.slice.as_ptr() && self.slice.as_ptr_range().end <= range.end;
        if inside && !self.slice.is_empty() {
            self.frame.slice_ref(self.slice)
        } else {
            Bytes::copy_from_slice(self.slice)
        }
    }
    /// A sub-view of the same buffer.
    pub fn sub(&self, slice: &'a [u8]) -> FrameSlice<'a> {
        FrameSlice { frame: self.frame, slice }
    }
}

/// A Rust type cannot hold values of a CQL type.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{rust_type} cannot hold values of CQL type {cql_type}{}", column.as_ref().map(|c| format!(" (column {c})")).unwrap_or_default())]
pub struct TypeCheckError {
    /// The Rust type requested.
    pub rust_type: &'static str,
    /// The CQL type of the column, as written in CQL.
    pub cql_type: String,
    /// The column name, when known.
    pub column: Option<String>,
}

impl TypeCheckError {
    /// A mismatch between `T` and `typ`.
    pub fn new<T: ?Sized>(typ: &ColumnType) -> Self {
        TypeCheckError { rust_type: std::any::type_name::<T>(), cql_type: typ.to_string(), column: None }
    }
}

/// A value could not be deserialized.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum DeserializeError {
    /// The Rust type does not match the column type.
    #[error(transparent)]
    TypeCheck(#[from] TypeCheckError),
    /// A null was found where the Rust type cannot represent it (use `Option`).
    #[error("unexpected null for {rust_type}")]
    UnexpectedNull {
        /// The Rust type requested.
        rust_type: &'static str,
    },
    /// The bytes are not a valid value of the column type.
    #[error("malformed {cql_type} value: {source}")]
    Malformed {
        /// The CQL type.
        cql_type: String,
        /// What was wrong.
        source: DecodeError,
    },
    /// The value does not fit the Rust type (e.g. a varint into `i64`).
    #[error("{cql_type} value does not fit in {rust_type}")]
    Overflow {
        /// The CQL type.
        cql_type: String,
        /// The Rust type requested.
        rust_type: &'static str,
    },
    /// A row has a different number of columns than the Rust type expects.
    #[error("row has {actual} columns, {expected} expected")]
    ColumnCount {
        /// Columns the Rust type wants.
        expected: usize,
        /// Columns in the result.
        actual: usize,
    },
    /// Deserializing one field of a user-defined type value failed.
    #[error("field {field}: {source}")]
    Field {
        /// The field's name in the type.
        field: String,
        /// What failed.
        source: Box<DeserializeError>,
    },
    /// Deserializing one column failed.
    #[error("column {index} ({name}): {source}")]
    Column {
        /// Column index.
        index: usize,
        /// Column name.
        name: String,
        /// What failed.
        source: Box<DeserializeError>,
    },
}

impl DeserializeError {
    /// A [`DeserializeError::Malformed`] for `typ`.
    pub fn malformed(typ: &ColumnType, source: DecodeError) -> Self {
        DeserializeError::Malformed { cql_type: typ.to_string(), source }
    }
}

/// A Rust type that can be read from a CQL value borrowed from a frame.
pub trait DeserializeValue<'a>: Sized {
    /// Checks whether this Rust type can hold values of `typ`.
    fn type_check(typ: &ColumnType) -> Result<(), TypeCheckError>;
    /// Reads a value (`None` is null). `typ` passed [`Self::type_check`].
    fn deserialize(typ: &'a ColumnType, v: Option<FrameSlice<'a>>) -> Result<Self, DeserializeError>;
}

/// One column of a row: its spec and its raw bytes (`None` is null).
#[derive(Debug, Clone, Copy)]
pub struct RawColumn<'a> {
    /// Position in the row.
    pub index: usize,
    /// The column's spec.
    pub spec: &'a ColumnSpec,
    /// The bytes, `None` for null.
    pub value: Option<FrameSlice<'a>>,
}

/// Iterates over the columns of one row, reading their lengths lazily.
#[derive(Debug, Clone)]
pub struct ColumnIterator<'a> {
    specs: &'a [ColumnSpec],
    frame: &'a Bytes,
    reader: Reader<'a>,
    index: usize,
}

impl<'a> ColumnIterator<'a> {
    /// Columns of the row starting at `reader`.
    pub fn new(specs: &'a [ColumnSpec], frame: &'a Bytes, reader: Reader<'a>) -> Self {
        ColumnIterator { specs, frame, reader, index: 0 }
    }
    /// Column specs of the row.
    pub fn specs(&self) -> &'a [ColumnSpec] {
        self.specs
    }
    /// Columns not yet read.
    pub fn columns_remaining(&self) -> usize {
        self.specs.len() - self.index
    }
    /// The reader positioned after the columns read so far.
    pub fn reader(&self) -> Reader<'a> {
        self.reader
    }
}

impl<'a> Iterator for ColumnIterator<'a> {
    type Item = Result<RawColumn<'a>, DecodeError>;

    fn next(&mut self) -> Option<Self::Item> {
        let spec = self.specs.get(self.index)?;
        let index = self.index;
        self.index += 1;
        Some(self.reader.bytes("column value").map(|b| RawColumn {
            index,
            spec,
            value: b.map(|s| FrameSlice::new(self.frame, s)),
        }))
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        let n = self.columns_remaining();
        (n, Some(n))
    }
}

/// A Rust type built from a whole row: tuples of [`DeserializeValue`]s,
/// [`crate::types::de::Row`] views, or derived structs.
pub trait DeserializeRow<'a>: Sized {
    /// Checks the Rust type against the column specs of the result, once per
    /// result set.
    fn type_check(specs: &[ColumnSpec]) -> Result<(), TypeCheckError>;
    /// Reads one row. `specs` passed [`Self::type_check`].
    fn deserialize(row: ColumnIterator<'a>) -> Result<Self, DeserializeError>;
}

// ---------------------------------------------------------------- helpers

fn check<T: ?Sized>(typ: &ColumnType, ok: bool) -> Result<(), TypeCheckError> {
    if ok {
        Ok(())
    } else {
        Err(TypeCheckError::new::<T>(typ))
    }
}

/// The value, or [`DeserializeError::UnexpectedNull`] for `T`.
fn non_null<'a, T: ?Sized>(v: Option<FrameSlice<'a>>) -> Result<FrameSlice<'a>, DeserializeError> {
    // `ok_or_else`: an error built eagerly is dropped for every value that
    // is there (the error type has drop glue), a call per column of every row.
    v.ok_or_else(|| DeserializeError::UnexpectedNull { rust_type: std::any::type_name::<T>() })
}

/// Exactly `N` bytes.
fn exact<const N: usize>(typ: &ColumnType, b: &[u8]) -> Result<[u8; N], DeserializeError> {
    // The common case without a reader; the reader names what is wrong.
    if let Ok(array) = <[u8; N]>::try_from(b) {
        return Ok(array);
    }
    let mut r = Reader::new(b);
    let out = r.array::<N>("value").map_err(|e| DeserializeError::malformed(typ, e))?;
    r.finish("value").map_err(|e| DeserializeError::malformed(typ, e))?;
    Ok(out)
}

fn invalid(typ: &ColumnType, what: &'static str, reason: &'static str) -> DeserializeError {
    DeserializeError::malformed(typ, DecodeError::Invalid { what, reason })
}

// ---------------------------------------------------------------- scalars

/// Types of a fixed size: the value must have exactly that many bytes.
macro_rules! impl_fixed {
    ($($t:ty, $pat:pat, |$typ:ident, $b:ident: [u8; $n:literal]| $conv:expr;)*) => {$(
        impl<'a> DeserializeValue<'a> for $t {
            fn type_check(typ: &ColumnType) -> Result<(), TypeCheckError> {
                check::<$t>(typ, matches!(typ, $pat))
            }
            fn deserialize(
                $typ: &'a ColumnType,
                v: Option<FrameSlice<'a>>,
            ) -> Result<Self, DeserializeError> {
                let $b: [u8; $n] = exact($typ, non_null::<$t>(v)?.as_slice())?;
                $conv
            }
        }
    )*};
}

impl_fixed! {
    i8, ColumnType::TinyInt, |typ, b: [u8; 1]| Ok(i8::from_be_bytes(b));
    i16, ColumnType::SmallInt, |typ, b: [u8; 2]| Ok(i16::from_be_bytes(b));
    i32, ColumnType::Int, |typ, b: [u8; 4]| Ok(i32::from_be_bytes(b));
    i64, ColumnType::BigInt | ColumnType::Counter, |typ, b: [u8; 8]| Ok(i64::from_be_bytes(b));
    f32, ColumnType::Float, |typ, b: [u8; 4]| Ok(f32::from_be_bytes(b));
    f64, ColumnType::Double, |typ, b: [u8; 8]| Ok(f64::from_be_bytes(b));
    bool, ColumnType::Boolean, |typ, b: [u8; 1]| Ok(b[0] != 0);
    Uuid, ColumnType::Uuid | ColumnType::Timeuuid, |typ, b: [u8; 16]| Ok(Uuid::from_bytes(b));
    CqlDate, ColumnType::Date, |typ, b: [u8; 4]| Ok(CqlDate(u32::from_be_bytes(b)));
    CqlTimestamp, ColumnType::Timestamp, |typ, b: [u8; 8]| Ok(CqlTimestamp(i64::from_be_bytes(b)));
    CqlTime, ColumnType::Time, |typ, b: [u8; 8]| {
        let t = CqlTime(i64::from_be_bytes(b));
        if t.is_valid() {
            Ok(t)
        } else {
            Err(invalid(typ, "time", "not within 0..86399999999999 nanoseconds"))
        }
    };
}

/// `text` or `ascii` (which must then be ASCII), borrowed.
impl<'a> DeserializeValue<'a> for &'a str {
    fn type_check(typ: &ColumnType) -> Result<(), TypeCheckError> {
        check::<Self>(typ, matches!(typ, ColumnType::Text | ColumnType::Ascii))
    }
    fn deserialize(typ: &'a ColumnType, v: Option<FrameSlice<'a>>) -> Result<Self, DeserializeError> {
        let b = non_null::<Self>(v)?.as_slice();
        let s = std::str::from_utf8(b)
            .map_err(|_| DeserializeError::malformed(typ, DecodeError::InvalidText { what: "text" }))?;
        if *typ == ColumnType::Ascii && !s.is_ascii() {
            return Err(DeserializeError::malformed(typ, DecodeError::InvalidText { what: "ascii" }));
        }
        Ok(s)
    }
}

/// `text` or `ascii`.
impl<'a> DeserializeValue<'a> for String {
    fn type_check(typ: &ColumnType) -> Result<(), TypeCheckError> {
        check::<Self>(typ, matches!(typ, ColumnType::Text | ColumnType::Ascii))
    }
    fn deserialize(typ: &'a ColumnType, v: Option<FrameSlice<'a>>) -> Result<Self, DeserializeError> {
        <&str>::deserialize(typ, v).map(str::to_owned)
    }
}

fn is_blob(typ: &ColumnType) -> bool {
    matches!(typ, ColumnType::Blob | ColumnType::Custom(_))
}

/// `blob` or a custom type, borrowed.
impl<'a> DeserializeValue<'a> for &'a [u8] {
    fn type_check(typ: &ColumnType) -> Result<(), TypeCheckError> {
        check::<Self>(typ, is_blob(typ))
    }
    fn deserialize(_typ: &'a ColumnType, v: Option<FrameSlice<'a>>) -> Result<Self, DeserializeError> {
        Ok(non_null::<Self>(v)?.as_slice())
    }
}

/// `blob` or a custom type, copied. (`Vec<T>` of other `T` is a list.)
impl<'a> DeserializeValue<'a> for Vec<u8> {
    fn type_check(typ: &ColumnType) -> Result<(), TypeCheckError> {
        check::<Self>(typ, is_blob(typ))
    }
    fn deserialize(_typ: &'a ColumnType, v: Option<FrameSlice<'a>>) -> Result<Self, DeserializeError> {
        Ok(non_null::<Self>(v)?.as_slice().to_vec())
    }
}

/// `blob` or a custom type, sharing the frame's buffer (no copy).
impl<'a> DeserializeValue<'a> for Bytes {
    fn type_check(typ: &ColumnType) -> Result<(), TypeCheckError> {
        check::<Self>(typ, is_blob(typ))
    }
    fn deserialize(_typ: &'a ColumnType, v: Option<FrameSlice<'a>>) -> Result<Self, DeserializeError> {
        Ok(non_null::<Self>(v)?.to_bytes())
    }
}

/// `inet`: 4 or 16 bytes.
impl<'a> DeserializeValue<'a> for IpAddr {
    fn type_check(typ: &ColumnType) -> Result<(), TypeCheckError> {
        check::<Self>(typ, *typ == ColumnType::Inet)
    }
    fn deserialize(typ: &'a ColumnType, v: Option<FrameSlice<'a>>) -> Result<Self, DeserializeError> {
        let b = non_null::<Self>(v)?.as_slice();
        if let Ok(a) = <[u8; 4]>::try_from(b) {
            Ok(IpAddr::V4(Ipv4Addr::from(a)))
        } else if let Ok(a) = <[u8; 16]>::try_from(b) {
            Ok(IpAddr::V6(Ipv6Addr::from(a)))
        } else {
            let len = b.len() as i64;
            Err(DeserializeError::malformed(typ, DecodeError::InvalidLength { what: "inet", len }))
        }
    }
}

/// `varint`: at least one byte (non-minimal encodings are normalized).
impl<'a> DeserializeValue<'a> for CqlVarint {
    fn type_check(typ: &ColumnType) -> Result<(), TypeCheckError> {
        check::<Self>(typ, *typ == ColumnType::Varint)
    }
    fn deserialize(typ: &'a ColumnType, v: Option<FrameSlice<'a>>) -> Result<Self, DeserializeError> {
        let b = non_null::<Self>(v)?.as_slice();
        if b.is_empty() {
            let e = DecodeError::UnexpectedEnd { what: "varint", needed: 1, remaining: 0 };
            return Err(DeserializeError::malformed(typ, e));
        }
        Ok(CqlVarint::from_signed_bytes_be_slice(b))
    }
}

/// A `decimal` value read as `T`: its scale and its unscaled varint's bytes
/// (at least one).
pub(crate) fn decimal_parts<'a, T: ?Sized>(
    typ: &ColumnType,
    v: Option<FrameSlice<'a>>,
) -> Result<(i32, &'a [u8]), DeserializeError> {
    let mut r = Reader::new(non_null::<T>(v)?.as_slice());
    let scale = r.i32("decimal scale").map_err(|e| DeserializeError::malformed(typ, e))?;
    if r.is_empty() {
        let e = DecodeError::UnexpectedEnd { what: "decimal unscaled value", needed: 1, remaining: 0 };
        return Err(DeserializeError::malformed(typ, e));
    }
    Ok((scale, r.rest()))
}

/// `decimal`: an `[int]` scale and a varint of at least one byte.
impl<'a> DeserializeValue<'a> for CqlDecimal {
    fn type_check(typ: &ColumnType) -> Result<(), TypeCheckError> {
        check::<Self>(typ, *typ == ColumnType::Decimal)
    }
    fn deserialize(typ: &'a ColumnType, v: Option<FrameSlice<'a>>) -> Result<Self, DeserializeError> {
        let (scale, unscaled) = decimal_parts::<Self>(typ, v)?;
        Ok(CqlDecimal { unscaled: CqlVarint::from_signed_bytes_be_slice(unscaled), scale })
    }
}

/// `duration`: three vints sharing one sign.
impl<'a> DeserializeValue<'a> for CqlDuration {
    fn type_check(typ: &ColumnType) -> Result<(), TypeCheckError> {
        check::<Self>(typ, *typ == ColumnType::Duration)
    }
    fn deserialize(typ: &'a ColumnType, v: Option<FrameSlice<'a>>) -> Result<Self, DeserializeError> {
        let malformed = |e| DeserializeError::malformed(typ, e);
        let mut r = Reader::new(non_null::<Self>(v)?.as_slice());
        let months = r.vint("duration months").map_err(malformed)?;
        let days = r.vint("duration days").map_err(malformed)?;
        let nanoseconds = r.vint("duration nanoseconds").map_err(malformed)?;
        r.finish("duration").map_err(malformed)?;
        let d = CqlDuration {
            months: i32::try_from(months).map_err(|_| invalid(typ, "duration", "months out of range"))?,
            days: i32::try_from(days).map_err(|_| invalid(typ, "duration", "days out of range"))?,
            nanoseconds,
        };
        if !d.is_valid() {
            return Err(invalid(typ, "duration", "components have different signs"));
        }
        Ok(d)
    }
}

/// Null is `None`; every other type fails on null with
/// [`DeserializeError::UnexpectedNull`] (except lists, sets and maps, which
/// read null as empty).
impl<'a, T: DeserializeValue<'a>> DeserializeValue<'a> for Option<T> {
    fn type_check(typ: &ColumnType) -> Result<(), TypeCheckError> {
        T::type_check(typ)
    }
    fn deserialize(typ: &'a ColumnType, v: Option<FrameSlice<'a>>) -> Result<Self, DeserializeError> {
        v.map(|v| T::deserialize(typ, Some(v))).transpose()
    }
}

// ---------------------------------------------------------------- CqlValue

/// Any type. A zero-length value of a type other than `ascii`, `text`,
/// `blob`, custom types and `vector` is [`CqlValue::Empty`]. Null is an
/// error: read `Option<CqlValue>`.
impl<'a> DeserializeValue<'a> for CqlValue {
    fn type_check(_typ: &ColumnType) -> Result<(), TypeCheckError> {
        Ok(())
    }
    fn deserialize(typ: &'a ColumnType, v: Option<FrameSlice<'a>>) -> Result<Self, DeserializeError> {
        cql_value(typ, non_null::<Self>(v)?)
    }
}

fn cql_value<'a>(typ: &'a ColumnType, v: FrameSlice<'a>) -> Result<CqlValue, DeserializeError> {
    use ColumnType as T;
    if v.as_slice().is_empty() && !matches!(typ, T::Ascii | T::Text | T::Blob | T::Custom(_) | T::Vector(..)) {
        return Ok(CqlValue::Empty);
    }
    fn de<'a, V: DeserializeValue<'a>>(typ: &'a ColumnType, v: FrameSlice<'a>) -> Result<V, DeserializeError> {
        V::deserialize(typ, Some(v))
    }
    Ok(match typ {
        T::Custom(_) => CqlValue::Custom(v.as_slice().to_vec()),
        T::Ascii => CqlValue::Ascii(de(typ, v)?),
        T::BigInt => CqlValue::BigInt(de(typ, v)?),
        T::Blob => CqlValue::Blob(de(typ, v)?),
        T::Boolean => CqlValue::Boolean(de(typ, v)?),
        T::Counter => CqlValue::Counter(de(typ, v)?),
        T::Decimal => CqlValue::Decimal(de(typ, v)?),
        T::Double => CqlValue::Double(de(typ, v)?),
        T::Float => CqlValue::Float(de(typ, v)?),
        T::Int => CqlValue::Int(de(typ, v)?),
        T::Timestamp => CqlValue::Timestamp(de(typ, v)?),
        T::Uuid => CqlValue::Uuid(de(typ, v)?),
        T::Text => CqlValue::Text(de(typ, v)?),
        T::Varint => CqlValue::Varint(de(typ, v)?),
        T::Timeuuid => CqlValue::Timeuuid(de(typ, v)?),
        T::Inet => CqlValue::Inet(de(typ, v)?),
        T::Date => CqlValue::Date(de(typ, v)?),
        T::Time => CqlValue::Time(de(typ, v)?),
        T::SmallInt => CqlValue::SmallInt(de(typ, v)?),
        T::TinyInt => CqlValue::TinyInt(de(typ, v)?),
        T::Duration => CqlValue::Duration(de(typ, v)?),
        T::List(_) => CqlValue::List(de(typ, v)?),
        T::Set(_) => CqlValue::Set(de(typ, v)?),
        T::Vector(..) => CqlValue::Vector(de(typ, v)?),
        T::Map(..) => CqlValue::Map(de::<MapIter<'a, CqlValue, CqlValue>>(typ, v)?.collect::<Result<_, _>>()?),
        T::Tuple(types) => {
            let mut fields = Fields::new(typ, v);
            let mut items = Vec::with_capacity(types.len());
            for t in types {
                items.push(Option::<CqlValue>::deserialize(t, fields.next()?)?);
            }
            fields.finish()?;
            CqlValue::Tuple(items)
        }
        T::Udt { keyspace, name, fields: types } => {
            let mut fields = Fields::new(typ, v);
            let mut items = Vec::with_capacity(types.len());
            for (field, t) in types {
                items.push((field.clone(), Option::<CqlValue>::deserialize(t, fields.next()?)?));
            }
            fields.finish()?;
            CqlValue::Udt { keyspace: keyspace.clone(), name: name.clone(), fields: items }
        }
    })
}

/// Reads the `[bytes]` elements of a tuple or UDT value. A value may have
/// fewer elements than its type; the missing trailing ones read as null.
pub(crate) struct Fields<'a> {
    typ: &'a ColumnType,
    value: FrameSlice<'a>,
    reader: Reader<'a>,
}

impl<'a> Fields<'a> {
    pub(crate) fn new(typ: &'a ColumnType, value: FrameSlice<'a>) -> Self {
        Fields { typ, value, reader: Reader::new(value.as_slice()) }
    }

    pub(crate) fn next(&mut self) -> Result<Option<FrameSlice<'a>>, DeserializeError> {
        if self.reader.is_empty() {
            return Ok(None);
        }
        let b = self.reader.bytes("field").map_err(|e| DeserializeError::malformed(self.typ, e))?;
        Ok(b.map(|b| self.value.sub(b)))
    }

    pub(crate) fn finish(&self) -> Result<(), DeserializeError> {
        self.reader.finish("last field").map_err(|e| DeserializeError::malformed(self.typ, e))
    }
}

// ---------------------------------------------------------------- tuples and rows

/// Adds the column's name to a type check error.
fn in_column(mut e: TypeCheckError, spec: &ColumnSpec) -> TypeCheckError {
    e.column = Some(spec.name.clone());
    e
}

fn column_error(index: usize, spec: &ColumnSpec, e: DeserializeError) -> DeserializeError {
    DeserializeError::Column { index, name: spec.name.clone(), source: Box::new(e) }
}

/// A row type has a different number of columns than the result.
fn row_mismatch<R: ?Sized>(specs: &[ColumnSpec]) -> TypeCheckError {
    let types: Vec<String> = specs.iter().map(|s| s.typ.to_string()).collect();
    TypeCheckError {
        rust_type: std::any::type_name::<R>(),
        cql_type: format!("row ({})", types.join(", ")),
        column: None,
    }
}

/// Reads the next column of `row` as `T`, naming the column in errors.
fn next_column<'a, T: DeserializeValue<'a>>(row: &mut ColumnIterator<'a>) -> Result<Option<T>, DeserializeError> {
    let index = row.specs().len() - row.columns_remaining();
    match row.next() {
        None => Ok(None),
        Some(Err(e)) => {
            let spec = &row.specs()[index];
            Err(column_error(index, spec, DeserializeError::malformed(&spec.typ, e)))
        }
        Some(Ok(col)) => {
            T::deserialize(&col.spec.typ, col.value).map(Some).map_err(|e| column_error(index, col.spec, e))
        }
    }
}

macro_rules! impl_tuples {
    ($($n:literal => ($($T:ident $idx:tt),+);)*) => {$(
        /// A CQL `tuple` of the same arity. A value with fewer elements
        /// reads the missing trailing ones as null.
        impl<'a, $($T: DeserializeValue<'a>),+> DeserializeValue<'a> for ($($T,)+) {
            fn type_check(typ: &ColumnType) -> Result<(), TypeCheckError> {
                match typ {
                    ColumnType::Tuple(types) if types.len() == $n => {
                        $($T::type_check(&types[$idx]).map_err(|_| TypeCheckError::new::<Self>(typ))?;)+
                        Ok(())
                    }
                    _ => Err(TypeCheckError::new::<Self>(typ)),
                }
            }
            fn deserialize(
                typ: &'a ColumnType,
                v: Option<FrameSlice<'a>>,
            ) -> Result<Self, DeserializeError> {
                let v = non_null::<Self>(v)?;
                let types = match typ {
                    ColumnType::Tuple(types) if types.len() == $n => types,
                    _ => return Err(TypeCheckError::new::<Self>(typ).into()),
                };
                let mut fields = Fields::new(typ, v);
                let out = ($($T::deserialize(&types[$idx], fields.next()?)?,)+);
                fields.finish()?;
                Ok(out)
            }
        }

        /// One column per element.
        impl<'a, $($T: DeserializeValue<'a>),+> DeserializeRow<'a> for ($($T,)+) {
            fn type_check(specs: &[ColumnSpec]) -> Result<(), TypeCheckError> {
                if specs.len() != $n {
                    return Err(row_mismatch::<Self>(specs));
                }
                $($T::type_check(&specs[$idx].typ).map_err(|e| in_column(e, &specs[$idx]))?;)+
                Ok(())
            }
            fn deserialize(mut row: ColumnIterator<'a>) -> Result<Self, DeserializeError> {
                let actual = row.columns_remaining();
                let count = || DeserializeError::ColumnCount { expected: $n, actual };
                if actual != $n {
                    return Err(count());
                }
                Ok(($(next_column::<$T>(&mut row)?.ok_or_else(count)?,)+))
            }
        }
    )*};
}

impl_tuples! {
    1 => (A 0);
    2 => (A 0, B 1);
    3 => (A 0, B 1, C 2);
    4 => (A 0, B 1, C 2, D 3);
    5 => (A 0, B 1, C 2, D 3, E 4);
    6 => (A 0, B 1, C 2, D 3, E 4, F 5);
    7 => (A 0, B 1, C 2, D 3, E 4, F 5, G 6);
    8 => (A 0, B 1, C 2, D 3, E 4, F 5, G 6, H 7);
    9 => (A 0, B 1, C 2, D 3, E 4, F 5, G 6, H 7, I 8);
    10 => (A 0, B 1, C 2, D 3, E 4, F 5, G 6, H 7, I 8, J 9);
    11 => (A 0, B 1, C 2, D 3, E 4, F 5, G 6, H 7, I 8, J 9, K 10);
    12 => (A 0, B 1, C 2, D 3, E 4, F 5, G 6, H 7, I 8, J 9, K 10, L 11);
    13 => (A 0, B 1, C 2, D 3, E 4, F 5, G 6, H 7, I 8, J 9, K 10, L 11, M 12);
    14 => (A 0, B 1, C 2, D 3, E 4, F 5, G 6, H 7, I 8, J 9, K 10, L 11, M 12, N 13);
    15 => (A 0, B 1, C 2, D 3, E 4, F 5, G 6, H 7, I 8, J 9, K 10, L 11, M 12, N 13, O 14);
    16 => (A 0, B 1, C 2, D 3, E 4, F 5, G 6, H 7, I 8, J 9, K 10, L 11, M 12, N 13, O 14, P 15);
}

/// An owned row of any columns: one `Option<CqlValue>` per column (`None`
/// is null).
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct Row {
    /// The column values, in result order.
    pub columns: Vec<Option<CqlValue>>,
}

impl Row {
    /// Number of columns.
    pub fn len(&self) -> usize {
        self.columns.len()
    }

    /// Whether the row has no columns.
    pub fn is_empty(&self) -> bool {
        self.columns.is_empty()
    }

    /// The value of column `index`; `None` if it is null or out of range.
    pub fn get(&self, index: usize) -> Option<&CqlValue> {
        self.columns.get(index).and_then(Option::as_ref)
    }

    /// Iterates over the column values.
    pub fn iter(&self) -> std::slice::Iter<'_, Option<CqlValue>> {
        self.columns.iter()
    }

    /// The column values.
    pub fn into_columns(self) -> Vec<Option<CqlValue>> {
        self.columns
    }
}

impl std::ops::Index<usize> for Row {
    type Output = Option<CqlValue>;
    fn index(&self, index: usize) -> &Self::Output {
        &self.columns[index]
    }
}

impl IntoIterator for Row {
    type Item = Option<CqlValue>;
    type IntoIter = std::vec::IntoIter<Option<CqlValue>>;
    fn into_iter(self) -> Self::IntoIter {
        self.columns.into_iter()
    }
}

impl<'r> IntoIterator for &'r Row {
    type Item = &'r Option<CqlValue>;
    type IntoIter = std::slice::Iter<'r, Option<CqlValue>>;
    fn into_iter(self) -> Self::IntoIter {
        self.columns.iter()
    }
}

/// Any columns.
impl<'a> DeserializeRow<'a> for Row {
    fn type_check(_specs: &[ColumnSpec]) -> Result<(), TypeCheckError> {
        Ok(())
    }
    fn deserialize(row: ColumnIterator<'a>) -> Result<Self, DeserializeError> {
        <Vec<Option<CqlValue>> as DeserializeRow>::deserialize(row).map(|columns| Row { columns })
    }
}

/// Any number of columns, each read as `T` (e.g. `Vec<Option<CqlValue>>`).
impl<'a, T: DeserializeValue<'a>> DeserializeRow<'a> for Vec<T> {
    fn type_check(specs: &[ColumnSpec]) -> Result<(), TypeCheckError> {
        specs.iter().try_for_each(|spec| T::type_check(&spec.typ).map_err(|e| in_column(e, spec)))
    }
    fn deserialize(mut row: ColumnIterator<'a>) -> Result<Self, DeserializeError> {
        let mut columns = Vec::with_capacity(row.columns_remaining());
        while let Some(v) = next_column::<T>(&mut row)? {
            columns.push(v);
        }
        Ok(columns)
    }
}

#[cfg(test)]
mod tests {
    use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};

    use super::*;
    use crate::types::sample_values;
    use crate::types::value::tests::serialize;
    use crate::types::CqlVector;

    /// Decodes `body` (no length prefix) as `T` of `typ`, after the type check.
    fn de<T>(typ: &ColumnType, body: &[u8]) -> Result<T, DeserializeError>
    where
        T: for<'a> DeserializeValue<'a>,
    {
        T::type_check(typ)?;
        let frame = Bytes::copy_from_slice(body);
        T::deserialize(typ, Some(FrameSlice::whole(&frame)))
    }

    fn sample(typ: &ColumnType) -> (CqlValue, Vec<u8>) {
        let v = sample_values().into_iter().find(|(t, _)| t == typ).map(|(_, v)| v).unwrap();
        let bytes = serialize(&v)[4..].to_vec();
        (v, bytes)
    }

    fn is_malformed<T>(r: Result<T, DeserializeError>) -> bool {
        matches!(r, Err(DeserializeError::Malformed { .. }))
    }

    fn is_type_error<T>(r: Result<T, DeserializeError>) -> bool {
        matches!(r, Err(DeserializeError::TypeCheck(_)))
    }

    #[test]
    fn scalars() {
        use ColumnType as T;
        assert_eq!(de::<i8>(&T::TinyInt, &[0xfb]), Ok(-5));
        assert_eq!(de::<i16>(&T::SmallInt, &[0xfe, 0xd4]), Ok(-300));
        assert_eq!(de::<i32>(&T::Int, &[0, 0, 1, 0]), Ok(256));
        assert_eq!(de::<i64>(&T::Counter, &[0, 0, 0, 0, 0, 0, 0, 42]), Ok(42));
        assert_eq!(de::<f32>(&T::Float, &1.5f32.to_be_bytes()), Ok(1.5));
        assert_eq!(de::<f64>(&T::Double, &(-2.0f64).to_be_bytes()), Ok(-2.0));
        assert_eq!(de::<bool>(&T::Boolean, &[0]), Ok(false));
        assert_eq!(de::<bool>(&T::Boolean, &[7]), Ok(true), "any non-zero byte is true");
        assert_eq!(de::<String>(&T::Ascii, b"abc"), Ok("abc".into()));
        assert_eq!(de::<Vec<u8>>(&T::Blob, &[1, 2]), Ok(vec![1, 2]));
        assert_eq!(de::<IpAddr>(&T::Inet, &[10, 0, 0, 1]), Ok("10.0.0.1".parse().unwrap()));
        for t in [T::Uuid, T::Timeuuid, T::Inet, T::Date, T::Time, T::Timestamp, T::Duration, T::Varint, T::Decimal] {
            let (v, bytes) = sample(&t);
            let ok = match v {
                CqlValue::Uuid(x) | CqlValue::Timeuuid(x) => de::<Uuid>(&t, &bytes) == Ok(x),
                CqlValue::Inet(x) => de::<IpAddr>(&t, &bytes) == Ok(x),
                CqlValue::Date(x) => de::<CqlDate>(&t, &bytes) == Ok(x),
                CqlValue::Time(x) => de::<CqlTime>(&t, &bytes) == Ok(x),
                CqlValue::Timestamp(x) => de::<CqlTimestamp>(&t, &bytes) == Ok(x),
                CqlValue::Duration(x) => de::<CqlDuration>(&t, &bytes) == Ok(x),
                CqlValue::Varint(x) => de::<CqlVarint>(&t, &bytes) == Ok(x),
                CqlValue::Decimal(x) => de::<CqlDecimal>(&t, &bytes) == Ok(x),
                _ => false,
            };
            assert!(ok, "{t}");
        }
    }

    #[test]
    fn malformed_scalars_fail() {
        use ColumnType as T;
        assert!(is_malformed(de::<i32>(&T::Int, &[0, 0, 1])));
        assert!(is_malformed(de::<i32>(&T::Int, &[0, 0, 0, 1, 0])));
        assert!(is_malformed(de::<i32>(&T::Int, &[])), "an empty int is not an i32");
        assert!(is_malformed(de::<i64>(&T::BigInt, &[0; 9])));
        assert!(is_malformed(de::<Uuid>(&T::Uuid, &[0; 15])));
        assert!(is_malformed(de::<bool>(&T::Boolean, &[1, 1])));
        assert!(is_malformed(de::<String>(&T::Text, &[0xff, 0xfe])));
        assert!(is_malformed(de::<String>(&T::Ascii, "é".as_bytes())));
        assert!(is_malformed(de::<IpAddr>(&T::Inet, &[1, 2, 3, 4, 5])));
        assert!(is_malformed(de::<CqlTime>(&T::Time, &CqlTime::NANOS_PER_DAY.to_be_bytes())));
        assert!(is_malformed(de::<CqlTime>(&T::Time, &(-1i64).to_be_bytes())));
        assert!(is_malformed(de::<CqlVarint>(&T::Varint, &[])));
        assert!(is_malformed(de::<CqlDecimal>(&T::Decimal, &[0, 0, 0, 1])));
        assert!(is_malformed(de::<CqlDuration>(&T::Duration, &[2, 4])));
    }

    #[test]
    fn type_mismatches_and_nulls() {
        use ColumnType as T;
        assert!(is_type_error(de::<i32>(&T::BigInt, &[0; 8])));
        assert!(is_type_error(de::<i64>(&T::Timestamp, &[0; 8])));
        assert!(is_type_error(de::<String>(&T::Blob, b"x")));
        assert!(is_type_error(de::<Vec<u8>>(&T::List(Box::new(T::TinyInt)), &[])));
        assert!(is_type_error(de::<Vec<i8>>(&T::Blob, &[])));
        assert!(is_type_error(de::<Vec<i32>>(&T::List(Box::new(T::Text)), &[])));
        assert!(is_type_error(de::<CqlVector<f32>>(&T::List(Box::new(T::Float)), &[])));
        assert!(is_type_error(de::<HashMap<String, i32>>(&T::Map(Box::new(T::Text), Box::new(T::Text)), &[])));
        assert!(is_type_error(de::<(i32, i32)>(&T::Tuple(vec![T::Int]), &[])));
        let e = <Vec<i32> as DeserializeValue>::type_check(&T::Set(Box::new(T::Text))).unwrap_err();
        assert_eq!(e.cql_type, "set<text>");
        assert!(e.rust_type.contains("Vec<i32>"), "{}", e.rust_type);
        // Null fails for everything but Option, and collections (read as empty).
        assert!(matches!(i32::deserialize(&T::Int, None), Err(DeserializeError::UnexpectedNull { .. })));
        assert!(matches!(<&str>::deserialize(&T::Text, None), Err(DeserializeError::UnexpectedNull { .. })));
        assert_eq!(Option::<i32>::deserialize(&T::Int, None), Ok(None));
        let list = T::List(Box::new(T::Int));
        assert_eq!(<Vec<i32> as DeserializeValue>::deserialize(&list, None), Ok(vec![]));
        assert_eq!(Option::<Vec<i32>>::deserialize(&list, None), Ok(None));
        assert_eq!(de::<Vec<i32>>(&list, &[]), Ok(vec![]), "a zero-length list is empty");
        let map = T::Map(Box::new(T::Int), Box::new(T::Int));
        assert_eq!(BTreeMap::<i32, i32>::deserialize(&map, None), Ok(BTreeMap::new()));
        let vector = T::Vector(Box::new(T::Int), 2);
        assert!(matches!(
            <Vec<i32> as DeserializeValue>::deserialize(&vector, None),
            Err(DeserializeError::UnexpectedNull { .. })
        ));
    }

    #[test]
    fn borrowed_values_point_into_the_frame() {
        let frame = Bytes::from_static(b"hello world");
        let slice = &frame[6..];
        let v = FrameSlice::new(&frame, slice);
        let s = <&str>::deserialize(&ColumnType::Text, Some(v)).unwrap();
        assert_eq!(s.as_ptr(), slice.as_ptr());
        let b = <&[u8]>::deserialize(&ColumnType::Blob, Some(v)).unwrap();
        assert_eq!(b.as_ptr(), slice.as_ptr());
        let owned = Bytes::deserialize(&ColumnType::Blob, Some(v)).unwrap();
        assert_eq!(owned.as_ptr(), slice.as_ptr(), "Bytes shares the frame");
        assert_eq!(owned, &b"world"[..]);
    }

    #[test]
    fn collections() {
        use ColumnType as T;
        let (_, list) = sample(&T::List(Box::new(T::Int)));
        let t = T::List(Box::new(T::Int));
        assert_eq!(de::<Vec<i32>>(&t, &list), Ok(vec![1, 2, -3]));
        assert_eq!(de::<BTreeSet<i32>>(&t, &list), Ok(BTreeSet::from([1, 2, -3])));
        assert_eq!(de::<Vec<Option<i32>>>(&t, &list), Ok(vec![Some(1), Some(2), Some(-3)]));
        let (_, set) = sample(&T::Set(Box::new(T::Text)));
        let t = T::Set(Box::new(T::Text));
        assert_eq!(de::<HashSet<String>>(&t, &set), Ok(HashSet::from(["a".into(), "b".into()])));
        assert_eq!(de::<Vec<String>>(&t, &set), Ok(vec!["a".into(), "b".into()]));
        let map_t = T::Map(Box::new(T::Text), Box::new(T::List(Box::new(T::BigInt))));
        let (_, map) = sample(&map_t);
        let expect = BTreeMap::from([("k1".to_owned(), vec![1i64, 2]), ("k2".to_owned(), vec![])]);
        assert_eq!(de::<BTreeMap<String, Vec<i64>>>(&map_t, &map), Ok(expect.clone()));
        let hashed: HashMap<String, Vec<i64>> = de(&map_t, &map).unwrap();
        assert_eq!(hashed.into_iter().collect::<BTreeMap<_, _>>(), expect);
        let floats = T::Vector(Box::new(T::Float), 3);
        let (_, vector) = sample(&floats);
        assert_eq!(de::<Vec<f32>>(&floats, &vector), Ok(vec![1.0, 2.5, -3.0]));
        assert_eq!(de::<CqlVector<f32>>(&floats, &vector), Ok(CqlVector(vec![1.0, 2.5, -3.0])));
        let texts = T::Vector(Box::new(T::Text), 2);
        let (_, vector) = sample(&texts);
        assert_eq!(de::<CqlVector<String>>(&texts, &vector), Ok(CqlVector(vec!["x".into(), "yz".into()])));
        // A null element is an error unless the element type is an Option.
        let body = [0, 0, 0, 2, 0xff, 0xff, 0xff, 0xff, 0, 0, 0, 4, 0, 0, 0, 5];
        let t = T::List(Box::new(T::Int));
        assert_eq!(de::<Vec<Option<i32>>>(&t, &body), Ok(vec![None, Some(5)]));
        assert!(matches!(de::<Vec<i32>>(&t, &body), Err(DeserializeError::UnexpectedNull { .. })));
        assert!(matches!(de::<CqlValue>(&t, &body), Err(DeserializeError::UnexpectedNull { .. })));
    }

    #[test]
    fn iterators_are_lazy_and_report_errors_in_place() {
        use ColumnType as T;
        let t = T::List(Box::new(T::Int));
        // [1, 2, <3-byte int>, 4]
        let body =
            [0, 0, 0, 4, 0, 0, 0, 4, 0, 0, 0, 1, 0, 0, 0, 4, 0, 0, 0, 2, 0, 0, 0, 3, 0, 0, 3, 0, 0, 0, 4, 0, 0, 0, 4];
        let frame = Bytes::copy_from_slice(&body);
        let mut it = ListIter::<i32>::deserialize(&t, Some(FrameSlice::whole(&frame))).unwrap();
        assert_eq!(it.remaining(), 4);
        assert_eq!(it.next(), Some(Ok(1)));
        assert_eq!(it.next(), Some(Ok(2)));
        assert!(is_malformed(it.next().unwrap()));
        assert_eq!(it.next(), None, "exhausted after an error");
        // Trailing bytes come as a last error.
        let body = [0, 0, 0, 1, 0, 0, 0, 4, 0, 0, 0, 1, 0xee];
        let frame = Bytes::copy_from_slice(&body);
        let mut it = ListIter::<i32>::deserialize(&t, Some(FrameSlice::whole(&frame))).unwrap();
        assert_eq!(it.next(), Some(Ok(1)));
        assert!(is_malformed(it.next().unwrap()));
        assert_eq!(it.next(), None);
        // Borrowed elements.
        let texts = T::Set(Box::new(T::Text));
        let (_, body) = sample(&texts);
        let frame = Bytes::copy_from_slice(&body);
        let it = ListIter::<&str>::deserialize(&texts, Some(FrameSlice::whole(&frame))).unwrap();
        assert_eq!(it.collect::<Result<Vec<_>, _>>(), Ok(vec!["a", "b"]));
        // Maps, with a key of the wrong size in the second entry.
        let m = T::Map(Box::new(T::Int), Box::new(T::Boolean));
        let body = [0, 0, 0, 2, 0, 0, 0, 4, 0, 0, 0, 1, 0, 0, 0, 1, 1, 0, 0, 0, 1, 2, 0, 0, 0, 1, 0];
        let frame = Bytes::copy_from_slice(&body);
        let mut it = MapIter::<i32, bool>::deserialize(&m, Some(FrameSlice::whole(&frame))).unwrap();
        assert_eq!(it.remaining(), 2);
        assert_eq!(it.next(), Some(Ok((1, true))));
        assert!(is_malformed(it.next().unwrap()));
        assert_eq!(it.next(), None);
        // Hostile counts fail up front.
        let body = [0, 0, 0x10, 0, 0, 0, 0, 0];
        let frame = Bytes::copy_from_slice(&body);
        assert!(is_malformed(MapIter::<i32, bool>::deserialize(&m, Some(FrameSlice::whole(&frame)))));
        assert!(is_malformed(ListIter::<i32>::deserialize(&t, Some(FrameSlice::whole(&frame)))));
        let huge = T::Vector(Box::new(T::Text), u32::MAX);
        assert!(is_malformed(ListIter::<&str>::deserialize(&huge, Some(FrameSlice::whole(&frame)))));
        let huge = T::Vector(Box::new(T::Double), u32::MAX);
        assert!(is_malformed(ListIter::<f64>::deserialize(&huge, Some(FrameSlice::whole(&frame)))));
    }

    #[test]
    fn tuples() {
        use ColumnType as T;
        let t = T::Tuple(vec![T::Int, T::Text, T::Boolean]);
        let (_, body) = sample(&t);
        assert_eq!(de::<(i32, Option<String>, bool)>(&t, &body), Ok((1, None, false)));
        assert!(matches!(de::<(i32, String, bool)>(&t, &body), Err(DeserializeError::UnexpectedNull { .. })));
        // Fewer elements than the type: the rest are null.
        assert_eq!(de::<(i32, Option<String>, Option<bool>)>(&t, &[0, 0, 0, 4, 0, 0, 0, 9]), Ok((9, None, None)));
        let mut long = body.clone();
        long.extend([0, 0, 0, 0]);
        assert!(is_malformed(de::<(i32, Option<String>, bool)>(&t, &long)));
    }

    fn spec(name: &str, typ: ColumnType) -> ColumnSpec {
        ColumnSpec { keyspace: "ks".into(), table: "t".into(), name: name.into(), typ }
    }

    /// A row of `[bytes]` columns.
    fn row_bytes(columns: &[Option<&[u8]>]) -> Bytes {
        let mut out = Vec::new();
        for c in columns {
            crate::codec::put_bytes(&mut out, *c);
        }
        Bytes::from(out)
    }

    fn read_row<'a, R: DeserializeRow<'a>>(specs: &'a [ColumnSpec], frame: &'a Bytes) -> Result<R, DeserializeError> {
        R::type_check(specs)?;
        R::deserialize(ColumnIterator::new(specs, frame, Reader::new(frame)))
    }

    #[test]
    fn rows() {
        let specs = [
            spec("id", ColumnType::Int),
            spec("name", ColumnType::Text),
            spec("tags", ColumnType::List(Box::new(ColumnType::Text))),
        ];
        let frame = row_bytes(&[Some(&[0, 0, 0, 7]), Some(b"seven"), None]);
        let row: (i32, &str, Vec<String>) = read_row(&specs, &frame).unwrap();
        assert_eq!(row, (7, "seven", vec![]));
        let row: (Option<i32>, String, Option<Vec<String>>) = read_row(&specs, &frame).unwrap();
        assert_eq!(row, (Some(7), "seven".into(), None));
        let row: Row = read_row(&specs, &frame).unwrap();
        assert_eq!(row.len(), 3);
        assert_eq!(row.get(0), Some(&CqlValue::Int(7)));
        assert_eq!(row[1], Some(CqlValue::Text("seven".into())));
        assert_eq!(row.get(2), None);
        let columns: Vec<Option<CqlValue>> = read_row(&specs, &frame).unwrap();
        assert_eq!(columns, row.into_columns());

        // Type check errors name the column; a count mismatch names none.
        let e = <(i32, i32, Vec<String>) as DeserializeRow>::type_check(&specs).unwrap_err();
        assert_eq!(e.column.as_deref(), Some("name"));
        assert_eq!(e.cql_type, "text");
        let e = <(i32, &str) as DeserializeRow>::type_check(&specs).unwrap_err();
        assert_eq!((e.column, e.cql_type.as_str()), (None, "row (int, text, list<text>)"));
        let e = <Vec<i32> as DeserializeRow>::type_check(&specs[..2]).unwrap_err();
        assert_eq!(e.column.as_deref(), Some("name"));
        assert!(e.to_string().contains("column name"), "{e}");

        // Value errors name the column too.
        let bad = row_bytes(&[Some(&[0, 0, 7]), Some(b"seven"), None]);
        match read_row::<(i32, &str, Vec<String>)>(&specs, &bad) {
            Err(DeserializeError::Column { index: 0, name, source }) => {
                assert_eq!(name, "id");
                assert!(matches!(*source, DeserializeError::Malformed { .. }));
            }
            other => panic!("{other:?}"),
        }
        let null = row_bytes(&[Some(&[0, 0, 0, 7]), None, None]);
        match read_row::<(i32, &str, Vec<String>)>(&specs, &null) {
            Err(DeserializeError::Column { index: 1, source, .. }) => {
                assert!(matches!(*source, DeserializeError::UnexpectedNull { .. }))
            }
            other => panic!("{other:?}"),
        }
        // A truncated row.
        let short = Bytes::from_static(&[0, 0, 0, 4, 0, 0, 0, 7, 0, 0, 0, 5, b's']);
        assert!(matches!(read_row::<Row>(&specs, &short), Err(DeserializeError::Column { index: 1, .. })));
        // A row type applied to the wrong number of columns.
        let it = ColumnIterator::new(&specs[..1], &frame, Reader::new(&frame));
        assert_eq!(
            <(i32, &str) as DeserializeRow>::deserialize(it),
            Err(DeserializeError::ColumnCount { expected: 2, actual: 1 })
        );
    }

    #[test]
    fn every_sample_reads_as_row_columns() {
        let samples = sample_values();
        let specs: Vec<ColumnSpec> =
            samples.iter().enumerate().map(|(i, (t, _))| spec(&format!("c{i}"), t.clone())).collect();
        let mut body = Vec::new();
        for (_, v) in &samples {
            body.extend(serialize(v));
        }
        let frame = Bytes::from(body);
        let row: Row = read_row(&specs, &frame).unwrap();
        let expect: Vec<Option<CqlValue>> = samples.into_iter().map(|(_, v)| Some(v)).collect();
        assert_eq!(row.columns, expect);
    }
}
