//! Serialization of Rust values into CQL bind values.
//!
//! Every value knows its exact encoded size ([`SerializeValue::encoded_len`])
//! before it is written, so a request is written into a buffer reserved once.
//! Nothing here allocates for primitive values. A value's encoding never
//! depends on the column type (statements without metadata have none);
//! [`SerializeValue::check_type`] only accepts the types it fits.
//!
//! | Rust | CQL |
//! |---|---|
//! | `i8`, `i16`, `i32`, `f32`, `f64`, `bool` | `tinyint`, `smallint`, `int`, `float`, `double`, `boolean` |
//! | `i64` | `bigint`, `counter` |
//! | `str`, `String` | `text`, `ascii` (if the string is ASCII) |
//! | `[u8]`, `Vec<u8>`, `[u8; N]`, [`Bytes`] | `blob`, custom types |
//! | [`Uuid`] | `uuid`, `timeuuid` (if version 1) |
//! | [`IpAddr`] | `inet` |
//! | [`CqlDate`], [`CqlTime`], [`CqlTimestamp`], [`CqlDuration`], [`CqlVarint`], [`CqlDecimal`] | `date`, `time`, `timestamp`, `duration`, `varint`, `decimal` |
//! | `[T]`, `Vec<T>`, `[T; N]` (`T` not `u8`), `HashSet`, `BTreeSet` | `list`, `set` |
//! | `HashMap`, `BTreeMap` | `map` |
//! | tuples of up to 16 | `tuple` of the same arity |
//! | [`CqlVector<T>`] | `vector` (a `Vec` is a list: the layouts differ) |
//! | [`CqlValue`] | its variant's type |
//! | `Option<T>`, [`Unset`], [`MaybeUnset<T>`] | null / unset, any type |
//!
//! Blobs follow the official driver: `u8` is no CQL type (`tinyint` is
//! `i8`), so `Vec<u8>` can be a blob while `Vec<T>` of other `T` is a list.

use std::borrow::Cow;
use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::net::IpAddr;
use std::sync::Arc;

use bytes::{BufMut, Bytes};
use uuid::Uuid;

pub use super::dyn_values::DynValues;
use crate::codec::{self, RawValue};
use crate::error::EncodeError;
use crate::types::{
    ColumnSpec, ColumnType, CqlDate, CqlDecimal, CqlDuration, CqlTime, CqlTimestamp, CqlValue, CqlVarint, CqlVector,
};

/// A Rust value that can be sent as a CQL value.
pub trait SerializeValue {
    /// Checks that this value can be written as a column of type `typ`.
    fn check_type(&self, typ: &ColumnType) -> Result<(), EncodeError>;
    /// Size on the wire, including the `[int]` length prefix.
    fn encoded_len(&self) -> Result<usize, EncodeError>;
    /// Writes the value with its `[int]` length prefix. Must write exactly
    /// [`Self::encoded_len`] bytes; only called after `encoded_len` succeeded.
    fn encode(&self, buf: &mut impl BufMut);
}

/// A list of bind values: a tuple, a slice, a `Vec` of values, or
/// [`RawValues`] already serialized.
pub trait SerializeValues {
    /// Number of values.
    fn count(&self) -> usize;
    /// Whether values are sent with names (QUERY flag 0x40).
    fn with_names(&self) -> bool {
        false
    }
    /// Checks the values against the bind markers of a prepared statement.
    fn check_types(&self, specs: &[ColumnSpec]) -> Result<(), EncodeError>;
    /// Size of all values (and names) on the wire, without the `[short]` count.
    fn encoded_len(&self) -> Result<usize, EncodeError>;
    /// Writes all values (and names), without the `[short]` count.
    fn encode(&self, buf: &mut impl BufMut);
    /// Writes all values in the order of the bind markers `specs` of a
    /// prepared statement: exactly [`Self::encoded_len`] bytes, like
    /// [`Self::encode`]. Positional lists (tuples, slices) are in marker
    /// order already, so the default is [`Self::encode`]; structs that
    /// `#[derive(SerializeValues)]` matches to the markers by name write
    /// each marker's field. `specs` are those [`Self::check_types`]
    /// accepted; for statements without them (unprepared), names are
    /// unknown and [`Self::encode`] is used instead.
    fn encode_for(&self, specs: &[ColumnSpec], buf: &mut impl BufMut) {
        let _ = specs;
        self.encode(buf)
    }
    /// Whether the values are matched to the bind markers by name (a
    /// struct that `#[derive(SerializeValues)]`), and so need the markers'
    /// names: a statement without them (unprepared) cannot bind them.
    fn by_name(&self) -> bool {
        false
    }
}

/// Bind values together with the bind markers of the prepared statement
/// they are sent to: its [`SerializeValues::encode`] is the values'
/// [`SerializeValues::encode_for`] the markers, which puts values matched by
/// name in the markers' order. This is what a driver sends as the values of
/// an EXECUTE (or of a prepared statement in a BATCH), and what it hashes
/// the partition key from. No markers (`&[]`) stand for a statement whose
/// markers are unknown (unprepared): the values' own
/// [`SerializeValues::encode`] then. Two references: making one allocates
/// nothing.
pub struct InMarkerOrder<'a, V: ?Sized> {
    values: &'a V,
    specs: &'a [ColumnSpec],
}

impl<'a, V: SerializeValues + ?Sized> InMarkerOrder<'a, V> {
    /// `values` for the bind markers `specs`.
    pub fn new(values: &'a V, specs: &'a [ColumnSpec]) -> Self {
        InMarkerOrder { values, specs }
    }
}

impl<V: ?Sized> Clone for InMarkerOrder<'_, V> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<V: ?Sized> Copy for InMarkerOrder<'_, V> {}

impl<V: ?Sized> std::fmt::Debug for InMarkerOrder<'_, V> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let names: Vec<&str> = self.specs.iter().map(|s| s.name.as_str()).collect();
        f.debug_struct("InMarkerOrder").field("values", &std::any::type_name::<V>()).field("markers", &names).finish()
    }
}

impl<V: SerializeValues + ?Sized> SerializeValues for InMarkerOrder<'_, V> {
    fn count(&self) -> usize {
        self.values.count()
    }
    fn with_names(&self) -> bool {
        self.values.with_names()
    }
    fn check_types(&self, specs: &[ColumnSpec]) -> Result<(), EncodeError> {
        self.values.check_types(specs)
    }
    fn encoded_len(&self) -> Result<usize, EncodeError> {
        self.values.encoded_len()
    }
    fn encode(&self, buf: &mut impl BufMut) {
        if self.specs.is_empty() {
            self.values.encode(buf)
        } else {
            self.values.encode_for(self.specs, buf)
        }
    }
    fn encode_for(&self, _specs: &[ColumnSpec], buf: &mut impl BufMut) {
        self.encode(buf)
    }
    fn by_name(&self) -> bool {
        self.values.by_name()
    }
}

/// Bind values already in wire form, as read from a request (optionally
/// named).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RawValues<'a> {
    /// Names, present iff the values were sent with names.
    pub names: Option<Vec<&'a str>>,
    /// The values.
    pub values: Vec<RawValue<'a>>,
}

impl SerializeValues for RawValues<'_> {
    fn count(&self) -> usize {
        self.values.len()
    }
    fn with_names(&self) -> bool {
        self.names.is_some()
    }
    fn check_types(&self, _specs: &[ColumnSpec]) -> Result<(), EncodeError> {
        Ok(())
    }
    fn encoded_len(&self) -> Result<usize, EncodeError> {
        let mut n = self.values.iter().map(|v| v.wire_len()).sum();
        if let Some(names) = &self.names {
            if names.len() != self.values.len() {
                return Err(EncodeError::InvalidValue {
                    what: "named values",
                    reason: "names and values differ in number",
                });
            }
            for name in names {
                n += codec::string_len("value name", name)?;
            }
        }
        Ok(n)
    }
    fn encode(&self, buf: &mut impl BufMut) {
        for (i, v) in self.values.iter().enumerate() {
            if let Some(name) = self.names.as_ref().and_then(|n| n.get(i)) {
                codec::put_string(buf, name);
            }
            v.put(buf);
        }
    }
}

impl SerializeValue for RawValue<'_> {
    fn check_type(&self, _typ: &ColumnType) -> Result<(), EncodeError> {
        Ok(())
    }
    fn encoded_len(&self) -> Result<usize, EncodeError> {
        codec::check_int_len("value", self.as_bytes().map_or(0, <[u8]>::len))?;
        Ok(self.wire_len())
    }
    fn encode(&self, buf: &mut impl BufMut) {
        self.put(buf)
    }
}

// ---------------------------------------------------------------- helpers

/// The "cannot serialize `T` as `typ`" error.
fn mismatch<T: ?Sized>(typ: &ColumnType) -> EncodeError {
    EncodeError::TypeMismatch { rust_type: std::any::type_name::<T>(), cql_type: typ.to_string() }
}

/// `Ok` if `ok`, else a type mismatch between `T` and `typ`.
fn accept<T: ?Sized>(typ: &ColumnType, ok: bool) -> Result<(), EncodeError> {
    if ok {
        Ok(())
    } else {
        Err(mismatch::<T>(typ))
    }
}

/// Adds the bind marker's name to a type mismatch.
fn in_marker(e: EncodeError, spec: &ColumnSpec) -> EncodeError {
    match e {
        EncodeError::TypeMismatch { rust_type, cql_type } => {
            EncodeError::TypeMismatch { rust_type, cql_type: format!("{cql_type} (bind marker {})", spec.name) }
        }
        e => e,
    }
}

fn count_mismatch() -> EncodeError {
    EncodeError::InvalidValue {
        what: "bind values",
        reason: "the number of values differs from the number of bind markers",
    }
}

fn check_timeuuid(u: &Uuid) -> Result<(), EncodeError> {
    if u.get_version_num() == 1 {
        Ok(())
    } else {
        Err(EncodeError::InvalidValue { what: "timeuuid", reason: "not a version 1 (time-based) UUID" })
    }
}

fn check_text(s: &str, typ: &ColumnType) -> Result<(), EncodeError> {
    match typ {
        ColumnType::Text => Ok(()),
        ColumnType::Ascii if s.is_ascii() => Ok(()),
        ColumnType::Ascii => {
            Err(EncodeError::InvalidValue { what: "ascii", reason: "the string has non-ASCII characters" })
        }
        _ => Err(mismatch::<str>(typ)),
    }
}

fn duration_body_len(d: &CqlDuration) -> Result<usize, EncodeError> {
    if !d.is_valid() {
        return Err(EncodeError::InvalidValue {
            what: "duration",
            reason: "months, days and nanoseconds must not have different signs",
        });
    }
    Ok(codec::vint_len(d.months.into()) + codec::vint_len(d.days.into()) + codec::vint_len(d.nanoseconds))
}

fn put_duration(buf: &mut impl BufMut, d: &CqlDuration) {
    codec::put_vint(buf, d.months.into());
    codec::put_vint(buf, d.days.into());
    codec::put_vint(buf, d.nanoseconds);
}

fn check_time(t: CqlTime) -> Result<(), EncodeError> {
    if t.is_valid() {
        Ok(())
    } else {
        Err(EncodeError::InvalidValue { what: "time", reason: "not within 0..86399999999999 nanoseconds" })
    }
}

// ---------------------------------------------------------------- vector elements

/// A value that can be an element of a CQL `vector` (see [`CqlVector`]).
///
/// Inside a vector, elements of fixed-size types
/// ([`ColumnType::fixed_size`]) are written without a length, others with an
/// `[unsigned vint]` length; nulls are not allowed, so `Option` is not an
/// element type. Every [`SerializeValue`] of this crate except `Option`,
/// [`Unset`], tuples and collections implements it, and so does
/// [`CqlValue`] (which covers the rest).
pub trait SerializeVectorElement: SerializeValue {
    /// `Some(n)` if the value is written as exactly `n` bytes because its CQL
    /// type has a fixed size.
    fn fixed_size(&self) -> Option<usize>;
    /// Size of the value's bytes alone, without any length.
    fn body_len(&self) -> Result<usize, EncodeError>;
    /// Writes the value's bytes alone; only called after `body_len` succeeded.
    fn encode_body(&self, buf: &mut impl BufMut);
}

/// Implements [`SerializeValue`] from a [`SerializeVectorElement`] impl and a
/// type check.
macro_rules! serialize_via_body {
    ($t:ty, |$v:ident, $typ:ident| $check:expr) => {
        impl SerializeValue for $t {
            fn check_type(&self, $typ: &ColumnType) -> Result<(), EncodeError> {
                let $v = self;
                $check
            }
            fn encoded_len(&self) -> Result<usize, EncodeError> {
                Ok(4 + codec::check_int_len("value", SerializeVectorElement::body_len(self)?)?)
            }
            fn encode(&self, buf: &mut impl BufMut) {
                let len = SerializeVectorElement::body_len(self).unwrap_or(0);
                buf.put_i32(len as i32);
                SerializeVectorElement::encode_body(self, buf);
            }
        }
    };
}

/// Types of a fixed size with a straightforward type check; `$in_vector`
/// says whether Cassandra also treats them as fixed-size inside a vector
/// (see [`ColumnType::fixed_size`]).
macro_rules! impl_fixed {
    ($($t:ty, $size:expr, $in_vector:expr, $pat:pat, |$v:ident, $buf:ident| $put:expr;)*) => {$(
        impl SerializeVectorElement for $t {
            fn fixed_size(&self) -> Option<usize> {
                $in_vector.then_some($size)
            }
            fn body_len(&self) -> Result<usize, EncodeError> {
                Ok($size)
            }
            fn encode_body(&self, $buf: &mut impl BufMut) {
                let $v = self;
                $put
            }
        }
        impl SerializeValue for $t {
            fn check_type(&self, typ: &ColumnType) -> Result<(), EncodeError> {
                accept::<$t>(typ, matches!(typ, $pat))
            }
            fn encoded_len(&self) -> Result<usize, EncodeError> {
                Ok(4 + $size)
            }
            fn encode(&self, buf: &mut impl BufMut) {
                buf.put_i32($size);
                self.encode_body(buf);
            }
        }
    )*};
}

// `i64` is fixed-size in vectors as a `bigint` (counters cannot be vector
// elements).
impl_fixed! {
    i8, 1, false, ColumnType::TinyInt, |v, buf| buf.put_i8(*v);
    i16, 2, false, ColumnType::SmallInt, |v, buf| buf.put_i16(*v);
    i32, 4, true, ColumnType::Int, |v, buf| buf.put_i32(*v);
    i64, 8, true, ColumnType::BigInt | ColumnType::Counter, |v, buf| buf.put_i64(*v);
    f32, 4, true, ColumnType::Float, |v, buf| buf.put_f32(*v);
    f64, 8, true, ColumnType::Double, |v, buf| buf.put_f64(*v);
    bool, 1, true, ColumnType::Boolean, |v, buf| buf.put_u8(u8::from(*v));
    CqlDate, 4, false, ColumnType::Date, |v, buf| buf.put_u32(v.0);
    CqlTimestamp, 8, true, ColumnType::Timestamp, |v, buf| buf.put_i64(v.0);
}

impl SerializeVectorElement for Uuid {
    fn fixed_size(&self) -> Option<usize> {
        Some(16)
    }
    fn body_len(&self) -> Result<usize, EncodeError> {
        Ok(16)
    }
    fn encode_body(&self, buf: &mut impl BufMut) {
        buf.put_slice(self.as_bytes());
    }
}
serialize_via_body!(Uuid, |v, typ| match typ {
    ColumnType::Uuid => Ok(()),
    ColumnType::Timeuuid => check_timeuuid(v),
    _ => Err(mismatch::<Uuid>(typ)),
});

impl SerializeVectorElement for CqlTime {
    fn fixed_size(&self) -> Option<usize> {
        None
    }
    fn body_len(&self) -> Result<usize, EncodeError> {
        check_time(*self).map(|()| 8)
    }
    fn encode_body(&self, buf: &mut impl BufMut) {
        buf.put_i64(self.0);
    }
}
serialize_via_body!(CqlTime, |_v, typ| accept::<CqlTime>(typ, *typ == ColumnType::Time));

impl SerializeVectorElement for str {
    fn fixed_size(&self) -> Option<usize> {
        None
    }
    fn body_len(&self) -> Result<usize, EncodeError> {
        codec::check_int_len("text value", self.len())
    }
    fn encode_body(&self, buf: &mut impl BufMut) {
        buf.put_slice(self.as_bytes());
    }
}
serialize_via_body!(str, |v, typ| check_text(v, typ));

impl SerializeVectorElement for String {
    fn fixed_size(&self) -> Option<usize> {
        None
    }
    fn body_len(&self) -> Result<usize, EncodeError> {
        self.as_str().body_len()
    }
    fn encode_body(&self, buf: &mut impl BufMut) {
        self.as_str().encode_body(buf)
    }
}
serialize_via_body!(String, |v, typ| check_text(v, typ));

/// Blobs: `[u8]`, `Vec<u8>`, `[u8; N]` and [`Bytes`] are `blob` (or custom
/// type) values, while `[T]`, `Vec<T>` and `[T; N]` of other element types
/// are lists. (`u8` itself is no CQL type: `tinyint` is `i8`.)
macro_rules! impl_blob {
    ($([$($gen:tt)*] $t:ty),*) => {$(
        impl<$($gen)*> SerializeVectorElement for $t {
            fn fixed_size(&self) -> Option<usize> {
                None
            }
            fn body_len(&self) -> Result<usize, EncodeError> {
                codec::check_int_len("blob value", <[u8]>::len(self.as_ref()))
            }
            fn encode_body(&self, buf: &mut impl BufMut) {
                buf.put_slice(self.as_ref());
            }
        }
        impl<$($gen)*> SerializeValue for $t {
            fn check_type(&self, typ: &ColumnType) -> Result<(), EncodeError> {
                accept::<Self>(typ, matches!(typ, ColumnType::Blob | ColumnType::Custom(_)))
            }
            fn encoded_len(&self) -> Result<usize, EncodeError> {
                Ok(4 + self.body_len()?)
            }
            fn encode(&self, buf: &mut impl BufMut) {
                let b: &[u8] = self.as_ref();
                buf.put_i32(b.len() as i32);
                buf.put_slice(b);
            }
        }
    )*};
}
impl_blob!([] [u8], [] Vec<u8>, [const N: usize] [u8; N], [] Bytes);

impl SerializeVectorElement for IpAddr {
    fn fixed_size(&self) -> Option<usize> {
        None
    }
    fn body_len(&self) -> Result<usize, EncodeError> {
        Ok(codec::inetaddr_len(self) - 1)
    }
    fn encode_body(&self, buf: &mut impl BufMut) {
        match self {
            IpAddr::V4(a) => buf.put_slice(&a.octets()),
            IpAddr::V6(a) => buf.put_slice(&a.octets()),
        }
    }
}
serialize_via_body!(IpAddr, |_v, typ| accept::<IpAddr>(typ, *typ == ColumnType::Inet));

impl SerializeVectorElement for CqlVarint {
    fn fixed_size(&self) -> Option<usize> {
        None
    }
    fn body_len(&self) -> Result<usize, EncodeError> {
        codec::check_int_len("varint value", self.as_signed_bytes_be().len())
    }
    fn encode_body(&self, buf: &mut impl BufMut) {
        buf.put_slice(self.as_signed_bytes_be());
    }
}
serialize_via_body!(CqlVarint, |_v, typ| accept::<CqlVarint>(typ, *typ == ColumnType::Varint));

impl SerializeVectorElement for CqlDecimal {
    fn fixed_size(&self) -> Option<usize> {
        None
    }
    fn body_len(&self) -> Result<usize, EncodeError> {
        codec::check_int_len("decimal value", 4 + self.unscaled.as_signed_bytes_be().len())
    }
    fn encode_body(&self, buf: &mut impl BufMut) {
        buf.put_i32(self.scale);
        buf.put_slice(self.unscaled.as_signed_bytes_be());
    }
}
serialize_via_body!(CqlDecimal, |_v, typ| accept::<CqlDecimal>(typ, *typ == ColumnType::Decimal));

impl SerializeVectorElement for CqlDuration {
    fn fixed_size(&self) -> Option<usize> {
        None
    }
    fn body_len(&self) -> Result<usize, EncodeError> {
        duration_body_len(self)
    }
    fn encode_body(&self, buf: &mut impl BufMut) {
        put_duration(buf, self);
    }
}
serialize_via_body!(CqlDuration, |_v, typ| accept::<CqlDuration>(typ, *typ == ColumnType::Duration));

impl<T: SerializeVectorElement + ?Sized> SerializeVectorElement for &T {
    fn fixed_size(&self) -> Option<usize> {
        (**self).fixed_size()
    }
    fn body_len(&self) -> Result<usize, EncodeError> {
        (**self).body_len()
    }
    fn encode_body(&self, buf: &mut impl BufMut) {
        (**self).encode_body(buf)
    }
}

// ---------------------------------------------------------------- wrappers

/// The "unset" marker of protocol v4+: the bound column is left untouched
/// (no tombstone is written, unlike null). Valid for any column type, but
/// not inside collections, tuples or UDTs.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct Unset;

impl SerializeValue for Unset {
    fn check_type(&self, _typ: &ColumnType) -> Result<(), EncodeError> {
        Ok(())
    }
    fn encoded_len(&self) -> Result<usize, EncodeError> {
        Ok(4)
    }
    fn encode(&self, buf: &mut impl BufMut) {
        buf.put_i32(-2);
    }
}

/// A value that is either bound or left [`Unset`]: a partial update binds
/// `MaybeUnset::Unset` for the columns it leaves alone, with one prepared
/// statement for every combination (`MaybeUnset<Option<T>>` tells the three
/// apart: untouched, null, a value).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub enum MaybeUnset<T> {
    /// The column is left untouched.
    #[default]
    Unset,
    /// The column is set to this value.
    Set(T),
}

impl<T> From<Option<T>> for MaybeUnset<T> {
    /// `None` is unset (not null): the column is left untouched.
    fn from(value: Option<T>) -> Self {
        value.map_or(MaybeUnset::Unset, MaybeUnset::Set)
    }
}

impl<T: SerializeValue> SerializeValue for MaybeUnset<T> {
    fn check_type(&self, typ: &ColumnType) -> Result<(), EncodeError> {
        match self {
            MaybeUnset::Set(v) => v.check_type(typ),
            MaybeUnset::Unset => Ok(()),
        }
    }
    fn encoded_len(&self) -> Result<usize, EncodeError> {
        match self {
            MaybeUnset::Set(v) => v.encoded_len(),
            MaybeUnset::Unset => Unset.encoded_len(),
        }
    }
    fn encode(&self, buf: &mut impl BufMut) {
        match self {
            MaybeUnset::Set(v) => v.encode(buf),
            MaybeUnset::Unset => Unset.encode(buf),
        }
    }
}

/// `None` is null, which is valid for any column type.
impl<T: SerializeValue> SerializeValue for Option<T> {
    fn check_type(&self, typ: &ColumnType) -> Result<(), EncodeError> {
        match self {
            Some(v) => v.check_type(typ),
            None => Ok(()),
        }
    }
    fn encoded_len(&self) -> Result<usize, EncodeError> {
        match self {
            Some(v) => v.encoded_len(),
            None => Ok(4),
        }
    }
    fn encode(&self, buf: &mut impl BufMut) {
        match self {
            Some(v) => v.encode(buf),
            None => buf.put_i32(-1),
        }
    }
}

macro_rules! impl_deref {
    ($([$($gen:tt)*] $t:ty),*) => {$(
        impl<$($gen)*> SerializeValue for $t {
            fn check_type(&self, typ: &ColumnType) -> Result<(), EncodeError> {
                (**self).check_type(typ)
            }
            fn encoded_len(&self) -> Result<usize, EncodeError> {
                (**self).encoded_len()
            }
            fn encode(&self, buf: &mut impl BufMut) {
                (**self).encode(buf)
            }
        }
    )*};
}
impl_deref!(
    [T: SerializeValue + ?Sized] &T,
    [T: SerializeValue + ?Sized] Box<T>,
    [T: SerializeValue + ?Sized] Arc<T>,
    [T: SerializeValue + ToOwned + ?Sized] Cow<'_, T>
);

// ---------------------------------------------------------------- collections

/// Size of the body of a list or set: `[int]` count and the elements.
fn elements_body_len<'v, T: SerializeValue + 'v>(
    count: usize,
    items: impl IntoIterator<Item = &'v T>,
) -> Result<usize, EncodeError> {
    codec::check_int_len("collection size", count)?;
    let mut n = 4usize;
    for item in items {
        n = n.saturating_add(item.encoded_len()?);
    }
    codec::check_int_len("collection", n)
}

fn put_elements<'v, T: SerializeValue + 'v>(
    buf: &mut impl BufMut,
    body_len: usize,
    count: usize,
    items: impl IntoIterator<Item = &'v T>,
) {
    buf.put_i32(body_len as i32);
    buf.put_i32(count as i32);
    for item in items {
        item.encode(buf);
    }
}

fn check_elements<'v, T: SerializeValue + 'v>(
    elem: &ColumnType,
    items: impl IntoIterator<Item = &'v T>,
) -> Result<(), EncodeError> {
    items.into_iter().try_for_each(|item| item.check_type(elem))
}

/// Size of the body of a map: `[int]` count and the entries.
fn entries_body_len<'v, K: SerializeValue + 'v, V: SerializeValue + 'v>(
    count: usize,
    entries: impl IntoIterator<Item = (&'v K, &'v V)>,
) -> Result<usize, EncodeError> {
    codec::check_int_len("map size", count)?;
    let mut n = 4usize;
    for (k, v) in entries {
        n = n.saturating_add(k.encoded_len()?).saturating_add(v.encoded_len()?);
    }
    codec::check_int_len("map", n)
}

fn put_entries<'v, K: SerializeValue + 'v, V: SerializeValue + 'v>(
    buf: &mut impl BufMut,
    body_len: usize,
    count: usize,
    entries: impl IntoIterator<Item = (&'v K, &'v V)>,
) {
    buf.put_i32(body_len as i32);
    buf.put_i32(count as i32);
    for (k, v) in entries {
        k.encode(buf);
        v.encode(buf);
    }
}

fn check_entries<'v, K: SerializeValue + 'v, V: SerializeValue + 'v>(
    typ: &ColumnType,
    entries: impl IntoIterator<Item = (&'v K, &'v V)>,
    on_mismatch: impl Fn(&ColumnType) -> EncodeError,
) -> Result<(), EncodeError> {
    let ColumnType::Map(kt, vt) = typ else {
        return Err(on_mismatch(typ));
    };
    entries.into_iter().try_for_each(|(k, v)| {
        k.check_type(kt)?;
        v.check_type(vt)
    })
}

/// `list` and `set` values.
macro_rules! impl_list {
    ($([$($gen:tt)*] $t:ty),*) => {$(
        impl<$($gen)*> SerializeValue for $t {
            fn check_type(&self, typ: &ColumnType) -> Result<(), EncodeError> {
                match typ {
                    ColumnType::List(elem) | ColumnType::Set(elem) => check_elements(elem, self.iter()),
                    _ => Err(mismatch::<Self>(typ)),
                }
            }
            fn encoded_len(&self) -> Result<usize, EncodeError> {
                Ok(4 + elements_body_len(self.len(), self.iter())?)
            }
            fn encode(&self, buf: &mut impl BufMut) {
                let body = elements_body_len(self.len(), self.iter()).unwrap_or(0);
                put_elements(buf, body, self.len(), self.iter());
            }
        }
    )*};
}
impl_list!(
    [T: SerializeValue] [T],
    [T: SerializeValue] Vec<T>,
    [T: SerializeValue, const N: usize] [T; N],
    [T: SerializeValue, S] HashSet<T, S>,
    [T: SerializeValue] BTreeSet<T>
);

/// `map` values.
macro_rules! impl_map {
    ($([$($gen:tt)*] $t:ty),*) => {$(
        impl<$($gen)*> SerializeValue for $t {
            fn check_type(&self, typ: &ColumnType) -> Result<(), EncodeError> {
                check_entries(typ, self.iter(), mismatch::<Self>)
            }
            fn encoded_len(&self) -> Result<usize, EncodeError> {
                Ok(4 + entries_body_len(self.len(), self.iter())?)
            }
            fn encode(&self, buf: &mut impl BufMut) {
                let body = entries_body_len(self.len(), self.iter()).unwrap_or(0);
                put_entries(buf, body, self.len(), self.iter());
            }
        }
    )*};
}
impl_map!(
    [K: SerializeValue, V: SerializeValue, S] HashMap<K, V, S>,
    [K: SerializeValue, V: SerializeValue] BTreeMap<K, V>
);

// ---------------------------------------------------------------- vectors

/// Size of the body of a vector of `items`.
fn vector_body_len<'v, T: SerializeVectorElement + ?Sized + 'v>(
    items: impl IntoIterator<Item = &'v T>,
) -> Result<usize, EncodeError> {
    let mut n = 0usize;
    for item in items {
        let len = item.body_len()?;
        if item.fixed_size().is_none() {
            n = n.saturating_add(codec::unsigned_vint_len(len as u64));
        }
        n = n.saturating_add(len);
    }
    codec::check_int_len("vector", n)
}

fn put_vector_body<'v, T: SerializeVectorElement + ?Sized + 'v>(
    buf: &mut impl BufMut,
    items: impl IntoIterator<Item = &'v T>,
) {
    for item in items {
        if item.fixed_size().is_none() {
            codec::put_unsigned_vint(buf, item.body_len().unwrap_or(0) as u64);
        }
        item.encode_body(buf);
    }
}

/// Checks `items` against `typ`, which must be `vector<elem, items.len()>`,
/// including that the elements' layout (fixed size or not) matches.
fn check_vector<'v, T: SerializeVectorElement + 'v>(
    typ: &ColumnType,
    items: &'v [T],
    err: impl Fn() -> EncodeError,
) -> Result<(), EncodeError> {
    let ColumnType::Vector(elem, n) = typ else {
        return Err(err());
    };
    if items.len() != *n as usize {
        return Err(err());
    }
    for item in items {
        item.check_type(elem)?;
        if item.fixed_size() != elem.fixed_size() {
            return Err(err());
        }
    }
    Ok(())
}

fn vector_fixed_size<T: SerializeVectorElement>(items: &[T]) -> Option<usize> {
    if items.is_empty() {
        return None;
    }
    items.iter().try_fold(0, |acc, item| Some(acc + item.fixed_size()?))
}

impl<T: SerializeVectorElement> SerializeValue for CqlVector<T> {
    fn check_type(&self, typ: &ColumnType) -> Result<(), EncodeError> {
        check_vector(typ, &self.0, || mismatch::<Self>(typ))
    }
    fn encoded_len(&self) -> Result<usize, EncodeError> {
        Ok(4 + vector_body_len(&self.0)?)
    }
    fn encode(&self, buf: &mut impl BufMut) {
        buf.put_i32(vector_body_len(&self.0).unwrap_or(0) as i32);
        put_vector_body(buf, &self.0);
    }
}

impl<T: SerializeVectorElement> SerializeVectorElement for CqlVector<T> {
    fn fixed_size(&self) -> Option<usize> {
        vector_fixed_size(&self.0)
    }
    fn body_len(&self) -> Result<usize, EncodeError> {
        vector_body_len(&self.0)
    }
    fn encode_body(&self, buf: &mut impl BufMut) {
        put_vector_body(buf, &self.0);
    }
}

// ---------------------------------------------------------------- tuples

macro_rules! impl_tuples {
    ($($n:literal => ($($T:ident $idx:tt),+);)*) => {$(
        /// A CQL `tuple` of the same arity.
        impl<$($T: SerializeValue),+> SerializeValue for ($($T,)+) {
            fn check_type(&self, typ: &ColumnType) -> Result<(), EncodeError> {
                match typ {
                    ColumnType::Tuple(types) if types.len() == $n => {
                        $(self.$idx.check_type(&types[$idx])?;)+
                        Ok(())
                    }
                    _ => Err(mismatch::<Self>(typ)),
                }
            }
            fn encoded_len(&self) -> Result<usize, EncodeError> {
                let body = 0usize $(.saturating_add(self.$idx.encoded_len()?))+;
                Ok(4 + codec::check_int_len("tuple", body)?)
            }
            fn encode(&self, buf: &mut impl BufMut) {
                let body = SerializeValue::encoded_len(self).unwrap_or(4) - 4;
                buf.put_i32(body as i32);
                $(self.$idx.encode(buf);)+
            }
        }

        /// One bind value per element.
        impl<$($T: SerializeValue),+> SerializeValues for ($($T,)+) {
            fn count(&self) -> usize {
                $n
            }
            fn check_types(&self, specs: &[ColumnSpec]) -> Result<(), EncodeError> {
                if specs.len() != $n {
                    return Err(count_mismatch());
                }
                $(self.$idx.check_type(&specs[$idx].typ).map_err(|e| in_marker(e, &specs[$idx]))?;)+
                Ok(())
            }
            fn encoded_len(&self) -> Result<usize, EncodeError> {
                Ok(0usize $(.saturating_add(self.$idx.encoded_len()?))+)
            }
            fn encode(&self, buf: &mut impl BufMut) {
                $(self.$idx.encode(buf);)+
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

// ---------------------------------------------------------------- value lists

/// No bind values.
impl SerializeValues for () {
    fn count(&self) -> usize {
        0
    }
    fn check_types(&self, specs: &[ColumnSpec]) -> Result<(), EncodeError> {
        if specs.is_empty() {
            Ok(())
        } else {
            Err(count_mismatch())
        }
    }
    fn encoded_len(&self) -> Result<usize, EncodeError> {
        Ok(0)
    }
    fn encode(&self, _buf: &mut impl BufMut) {}
}

/// One bind value per element (e.g. `Vec<CqlValue>`).
impl<T: SerializeValue> SerializeValues for [T] {
    fn count(&self) -> usize {
        self.len()
    }
    fn check_types(&self, specs: &[ColumnSpec]) -> Result<(), EncodeError> {
        if specs.len() != self.len() {
            return Err(count_mismatch());
        }
        self.iter().zip(specs).try_for_each(|(v, spec)| v.check_type(&spec.typ).map_err(|e| in_marker(e, spec)))
    }
    fn encoded_len(&self) -> Result<usize, EncodeError> {
        codec::check_short_len("bind values", self.len())?;
        self.iter().try_fold(0usize, |acc, v| Ok(acc.saturating_add(v.encoded_len()?)))
    }
    fn encode(&self, buf: &mut impl BufMut) {
        for v in self {
            v.encode(buf);
        }
    }
}

macro_rules! impl_values_deref {
    ($([$($gen:tt)*] $t:ty => $target:ty),*) => {$(
        impl<$($gen)*> SerializeValues for $t {
            fn count(&self) -> usize {
                <$target as SerializeValues>::count(self)
            }
            fn with_names(&self) -> bool {
                <$target as SerializeValues>::with_names(self)
            }
            fn check_types(&self, specs: &[ColumnSpec]) -> Result<(), EncodeError> {
                <$target as SerializeValues>::check_types(self, specs)
            }
            fn encoded_len(&self) -> Result<usize, EncodeError> {
                <$target as SerializeValues>::encoded_len(self)
            }
            fn encode(&self, buf: &mut impl BufMut) {
                <$target as SerializeValues>::encode(self, buf)
            }
            fn encode_for(&self, specs: &[ColumnSpec], buf: &mut impl BufMut) {
                <$target as SerializeValues>::encode_for(self, specs, buf)
            }
            fn by_name(&self) -> bool {
                <$target as SerializeValues>::by_name(self)
            }
        }
    )*};
}
impl_values_deref!(
    [T: SerializeValue] Vec<T> => [T],
    [T: SerializeValue, const N: usize] [T; N] => [T],
    [V: SerializeValues + ?Sized] &V => V,
    [V: SerializeValues + ?Sized] Box<V> => V
);

// ---------------------------------------------------------------- CqlValue

impl CqlValue {
    fn mismatch(&self, typ: &ColumnType) -> EncodeError {
        EncodeError::TypeMismatch { rust_type: self.variant_name(), cql_type: typ.to_string() }
    }
}

/// A [`CqlValue`] serializes as the CQL type of its variant, checked
/// recursively. Exceptions: `Ascii` and `Text` values are both accepted for
/// `ascii` (if ASCII) and `text` columns; a `Timeuuid` may be written to a
/// `uuid` column and a version 1 `Uuid` to a `timeuuid` column; `Empty` is
/// accepted for any type. UDT values are matched by field names and types,
/// not by keyspace and type name, so a value read from one keyspace can be
/// written to another; they may have fewer fields than the type.
impl SerializeValue for CqlValue {
    fn check_type(&self, typ: &ColumnType) -> Result<(), EncodeError> {
        use ColumnType as T;
        match (self, typ) {
            (CqlValue::Ascii(s) | CqlValue::Text(s), T::Ascii | T::Text) => check_text(s, typ),
            (CqlValue::Timeuuid(u) | CqlValue::Uuid(u), T::Timeuuid) => check_timeuuid(u),
            (CqlValue::Empty, _)
            | (CqlValue::BigInt(_), T::BigInt)
            | (CqlValue::Blob(_), T::Blob)
            | (CqlValue::Boolean(_), T::Boolean)
            | (CqlValue::Counter(_), T::Counter)
            | (CqlValue::Custom(_), T::Custom(_))
            | (CqlValue::Date(_), T::Date)
            | (CqlValue::Decimal(_), T::Decimal)
            | (CqlValue::Double(_), T::Double)
            | (CqlValue::Duration(_), T::Duration)
            | (CqlValue::Float(_), T::Float)
            | (CqlValue::Inet(_), T::Inet)
            | (CqlValue::Int(_), T::Int)
            | (CqlValue::SmallInt(_), T::SmallInt)
            | (CqlValue::Time(_), T::Time)
            | (CqlValue::Timestamp(_), T::Timestamp)
            | (CqlValue::Timeuuid(_) | CqlValue::Uuid(_), T::Uuid)
            | (CqlValue::TinyInt(_), T::TinyInt)
            | (CqlValue::Varint(_), T::Varint) => Ok(()),
            (CqlValue::List(items), T::List(elem)) | (CqlValue::Set(items), T::Set(elem)) => {
                check_elements(elem, items)
            }
            (CqlValue::Map(entries), T::Map(..)) => {
                check_entries(typ, entries.iter().map(|(k, v)| (k, v)), |t| self.mismatch(t))
            }
            (CqlValue::Tuple(items), T::Tuple(types)) if items.len() == types.len() => {
                items.iter().zip(types).try_for_each(|(v, t)| v.check_type(t))
            }
            (CqlValue::Udt { fields, .. }, T::Udt { fields: types, .. }) if fields.len() <= types.len() => {
                for ((name, v), (field, t)) in fields.iter().zip(types) {
                    if name != field {
                        return Err(self.mismatch(typ));
                    }
                    v.check_type(t)?;
                }
                Ok(())
            }
            (CqlValue::Vector(items), T::Vector(..)) => check_vector(typ, items, || self.mismatch(typ)),
            _ => Err(self.mismatch(typ)),
        }
    }

    fn encoded_len(&self) -> Result<usize, EncodeError> {
        Ok(4 + self.body_len()?)
    }

    fn encode(&self, buf: &mut impl BufMut) {
        buf.put_i32(self.body_len().unwrap_or(0) as i32);
        self.encode_body(buf);
    }
}

impl SerializeVectorElement for CqlValue {
    fn fixed_size(&self) -> Option<usize> {
        CqlValue::fixed_size(self)
    }

    fn body_len(&self) -> Result<usize, EncodeError> {
        match self {
            CqlValue::Ascii(s) | CqlValue::Text(s) => s.as_str().body_len(),
            CqlValue::Blob(b) | CqlValue::Custom(b) => b.body_len(),
            CqlValue::Decimal(d) => d.body_len(),
            CqlValue::Duration(d) => d.body_len(),
            CqlValue::Empty => Ok(0),
            CqlValue::Inet(ip) => ip.body_len(),
            CqlValue::Time(t) => t.body_len(),
            CqlValue::Varint(v) => v.body_len(),
            CqlValue::List(items) | CqlValue::Set(items) => elements_body_len(items.len(), items),
            CqlValue::Map(entries) => entries_body_len(entries.len(), entries.iter().map(|(k, v)| (k, v))),
            CqlValue::Tuple(items) => {
                let n = items.iter().try_fold(0usize, |acc, v| Ok(acc.saturating_add(v.encoded_len()?)));
                codec::check_int_len("tuple", n?)
            }
            CqlValue::Udt { fields, .. } => {
                let n = fields.iter().try_fold(0usize, |acc, (_, v)| Ok(acc.saturating_add(v.encoded_len()?)));
                codec::check_int_len("udt", n?)
            }
            CqlValue::Vector(items) => vector_body_len(items),
            CqlValue::Boolean(_) | CqlValue::TinyInt(_) => Ok(1),
            CqlValue::SmallInt(_) => Ok(2),
            CqlValue::Int(_) | CqlValue::Float(_) | CqlValue::Date(_) => Ok(4),
            CqlValue::BigInt(_) | CqlValue::Counter(_) | CqlValue::Double(_) | CqlValue::Timestamp(_) => Ok(8),
            CqlValue::Timeuuid(_) | CqlValue::Uuid(_) => Ok(16),
        }
    }

    fn encode_body(&self, buf: &mut impl BufMut) {
        match self {
            CqlValue::Ascii(s) | CqlValue::Text(s) => buf.put_slice(s.as_bytes()),
            CqlValue::BigInt(v) | CqlValue::Counter(v) => buf.put_i64(*v),
            CqlValue::Blob(b) | CqlValue::Custom(b) => buf.put_slice(b),
            CqlValue::Boolean(v) => v.encode_body(buf),
            CqlValue::Date(v) => v.encode_body(buf),
            CqlValue::Decimal(v) => v.encode_body(buf),
            CqlValue::Double(v) => v.encode_body(buf),
            CqlValue::Duration(v) => v.encode_body(buf),
            CqlValue::Empty => {}
            CqlValue::Float(v) => v.encode_body(buf),
            CqlValue::Inet(v) => v.encode_body(buf),
            CqlValue::Int(v) => v.encode_body(buf),
            CqlValue::SmallInt(v) => v.encode_body(buf),
            CqlValue::Time(v) => v.encode_body(buf),
            CqlValue::Timestamp(v) => v.encode_body(buf),
            CqlValue::Timeuuid(v) | CqlValue::Uuid(v) => v.encode_body(buf),
            CqlValue::TinyInt(v) => v.encode_body(buf),
            CqlValue::Varint(v) => v.encode_body(buf),
            CqlValue::List(items) | CqlValue::Set(items) => {
                buf.put_i32(items.len() as i32);
                items.iter().for_each(|v| v.encode(buf));
            }
            CqlValue::Map(entries) => {
                buf.put_i32(entries.len() as i32);
                for (k, v) in entries {
                    k.encode(buf);
                    v.encode(buf);
                }
            }
            CqlValue::Tuple(items) => items.iter().for_each(|v| v.encode(buf)),
            CqlValue::Udt { fields, .. } => fields.iter().for_each(|(_, v)| v.encode(buf)),
            CqlValue::Vector(items) => put_vector_body(buf, items),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::net::Ipv4Addr;

    use super::*;
    use crate::types::sample_values;
    use crate::types::value::tests::serialize;

    /// `rust` serializes exactly like `cql`, and both fit `typ`.
    fn same_as<T: SerializeValue + ?Sized>(typ: &ColumnType, rust: &T, cql: &CqlValue) {
        assert_eq!(rust.check_type(typ), Ok(()), "{} as {typ}", std::any::type_name::<T>());
        assert_eq!(cql.check_type(typ), Ok(()), "{cql:?} as {typ}");
        assert_eq!(serialize(rust), serialize(cql), "{}", std::any::type_name::<T>());
    }

    fn sample(typ: &ColumnType) -> CqlValue {
        sample_values().into_iter().find(|(t, _)| t == typ).map(|(_, v)| v).unwrap()
    }

    fn is_mismatch<T>(r: Result<T, EncodeError>) -> bool {
        matches!(r, Err(EncodeError::TypeMismatch { .. }))
    }

    #[test]
    fn rust_types_serialize_like_cql_values() {
        use ColumnType as T;
        same_as(&T::TinyInt, &-5i8, &CqlValue::TinyInt(-5));
        same_as(&T::SmallInt, &-300i16, &CqlValue::SmallInt(-300));
        same_as(&T::Int, &-7i32, &CqlValue::Int(-7));
        same_as(&T::BigInt, &42i64, &CqlValue::BigInt(42));
        same_as(&T::Counter, &42i64, &CqlValue::Counter(42));
        same_as(&T::Float, &-1.5f32, &CqlValue::Float(-1.5));
        same_as(&T::Double, &3.25f64, &CqlValue::Double(3.25));
        same_as(&T::Boolean, &true, &CqlValue::Boolean(true));
        let text = sample(&T::Text);
        same_as(&T::Text, text.as_str().unwrap(), &text);
        same_as(&T::Text, &text.as_str().unwrap().to_owned(), &text);
        same_as(&T::Text, &Cow::Borrowed(text.as_str().unwrap()), &text);
        same_as(&T::Ascii, "abc", &CqlValue::Ascii("abc".into()));
        let blob = CqlValue::Blob(vec![1, 2, 3]);
        same_as(&T::Blob, &[1u8, 2, 3][..], &blob);
        same_as(&T::Blob, &vec![1u8, 2, 3], &blob);
        same_as(&T::Blob, &[1u8, 2, 3], &blob);
        same_as(&T::Blob, &Bytes::from_static(&[1, 2, 3]), &blob);
        same_as(&T::Custom("x".into()), &[1u8, 2, 3][..], &CqlValue::Custom(vec![1, 2, 3]));
        for t in [T::Uuid, T::Timeuuid, T::Inet, T::Date, T::Time, T::Timestamp, T::Duration, T::Varint, T::Decimal] {
            let v = sample(&t);
            match &v {
                CqlValue::Uuid(u) | CqlValue::Timeuuid(u) => same_as(&t, u, &v),
                CqlValue::Inet(ip) => same_as(&t, ip, &v),
                CqlValue::Date(d) => same_as(&t, d, &v),
                CqlValue::Time(x) => same_as(&t, x, &v),
                CqlValue::Timestamp(x) => same_as(&t, x, &v),
                CqlValue::Duration(x) => same_as(&t, x, &v),
                CqlValue::Varint(x) => same_as(&t, x, &v),
                CqlValue::Decimal(x) => same_as(&t, x, &v),
                _ => unreachable!(),
            }
        }
        let list = T::List(Box::new(T::Int));
        same_as(&list, &vec![1, 2, -3], &sample(&list));
        same_as(&list, &[1, 2, -3], &sample(&list));
        same_as(&list, &[1, 2, -3][..], &sample(&list));
        let set = T::Set(Box::new(T::Text));
        same_as(&set, &BTreeSet::from(["a", "b"]), &sample(&set));
        same_as(&set, &vec!["a", "b"], &sample(&set));
        let map = T::Map(Box::new(T::Text), Box::new(T::List(Box::new(T::BigInt))));
        let rust_map = BTreeMap::from([("k1".to_owned(), vec![1i64, 2]), ("k2".to_owned(), vec![])]);
        same_as(&map, &rust_map, &sample(&map));
        let one: HashMap<&str, Vec<i64>> = HashMap::from([("k1", vec![1, 2])]);
        let one_cql =
            CqlValue::Map(vec![(CqlValue::Text("k1".into()), CqlValue::List(vec![1i64.into(), 2i64.into()]))]);
        same_as(&map, &one, &one_cql);
        let one_set: HashSet<i32> = HashSet::from([9]);
        same_as(&T::Set(Box::new(T::Int)), &one_set, &CqlValue::Set(vec![CqlValue::Int(9)]));
        let tuple = T::Tuple(vec![T::Int, T::Text, T::Boolean]);
        same_as(&tuple, &(1, None::<&str>, Some(false)), &sample(&tuple));
        let floats = T::Vector(Box::new(T::Float), 3);
        same_as(&floats, &CqlVector(vec![1.0f32, 2.5, -3.0]), &sample(&floats));
        let texts = T::Vector(Box::new(T::Text), 2);
        same_as(&texts, &CqlVector(vec!["x", "yz"]), &sample(&texts));
        same_as(&texts, &CqlVector(vec!["x".to_owned(), "yz".to_owned()]), &sample(&texts));
        let nested = T::Vector(Box::new(T::Vector(Box::new(T::Int), 2)), 2);
        let rust = CqlVector(vec![CqlVector(vec![1, 2]), CqlVector(vec![3, 4])]);
        assert_eq!(rust.check_type(&nested), Ok(()));
        assert_eq!(serialize(&rust), [0, 0, 0, 16, 0, 0, 0, 1, 0, 0, 0, 2, 0, 0, 0, 3, 0, 0, 0, 4]);
        // smallint (like tinyint, date, time) has a fixed size but is not
        // declared fixed by Cassandra: vector elements carry a length.
        let shorts = T::Vector(Box::new(T::SmallInt), 2);
        let rust = CqlVector(vec![1i16, 2]);
        same_as(&shorts, &rust, &CqlValue::Vector(vec![CqlValue::SmallInt(1), CqlValue::SmallInt(2)]));
        assert_eq!(serialize(&rust), [0, 0, 0, 6, 2, 0, 1, 2, 0, 2]);
        let nested = T::Vector(Box::new(shorts), 1);
        let outer = CqlVector(vec![rust]);
        assert_eq!(outer.check_type(&nested), Ok(()));
        assert_eq!(serialize(&outer), [0, 0, 0, 7, 6, 2, 0, 1, 2, 0, 2]);
        let boxed: Box<i32> = Box::new(7);
        same_as(&T::Int, &boxed, &CqlValue::Int(7));
        same_as(&T::Int, &Arc::new(7), &CqlValue::Int(7));
        same_as(&T::Inet, &IpAddr::V4(Ipv4Addr::LOCALHOST), &CqlValue::Inet(IpAddr::V4(Ipv4Addr::LOCALHOST)));
    }

    #[test]
    fn null_and_unset() {
        for (typ, _) in sample_values() {
            assert_eq!(None::<i32>.check_type(&typ), Ok(()));
            assert_eq!(Unset.check_type(&typ), Ok(()));
        }
        assert_eq!(serialize(&None::<String>), [0xff, 0xff, 0xff, 0xff]);
        assert_eq!(serialize(&Unset), [0xff, 0xff, 0xff, 0xfe]);
        assert_eq!(serialize(&Some(1i8)), [0, 0, 0, 1, 1]);
        assert_eq!(serialize(&MaybeUnset::<i8>::Unset), [0xff, 0xff, 0xff, 0xfe]);
        assert_eq!(serialize(&MaybeUnset::Set(1i8)), [0, 0, 0, 1, 1]);
        assert_eq!(serialize(&MaybeUnset::Set(None::<i8>)), [0xff, 0xff, 0xff, 0xff], "set to null");
        assert_eq!(MaybeUnset::from(None::<i8>), MaybeUnset::Unset);
        assert!(is_mismatch(MaybeUnset::Set(1i8).check_type(&ColumnType::Text)));
        assert_eq!(MaybeUnset::<i8>::Unset.check_type(&ColumnType::Text), Ok(()));
        // Null elements inside a list are written as null elements.
        assert_eq!(serialize(&vec![None, Some(1i8)]), [0, 0, 0, 13, 0, 0, 0, 2, 0xff, 0xff, 0xff, 0xff, 0, 0, 0, 1, 1]);
    }

    #[test]
    fn type_checks_accept_only_what_the_rust_type_represents() {
        use ColumnType as T;
        assert!(is_mismatch(1i64.check_type(&T::Timestamp)));
        assert!(is_mismatch(1i32.check_type(&T::BigInt)));
        assert!(is_mismatch(1i64.check_type(&T::Int)));
        assert!(is_mismatch(1.0f64.check_type(&T::Float)));
        assert!(is_mismatch("x".check_type(&T::Blob)));
        assert!(is_mismatch(CqlTimestamp(0).check_type(&T::BigInt)));
        assert!(is_mismatch(CqlTime(0).check_type(&T::BigInt)));
        assert!(is_mismatch(vec![1u8].check_type(&T::List(Box::new(T::TinyInt)))));
        assert_eq!(vec![1i8].check_type(&T::List(Box::new(T::TinyInt))), Ok(()));
        assert!(is_mismatch(vec![1i8].check_type(&T::Blob)));
        assert!(is_mismatch(vec![1i32].check_type(&T::List(Box::new(T::Text)))));
        assert!(is_mismatch(BTreeMap::from([(1, 2)]).check_type(&T::Map(Box::new(T::Int), Box::new(T::Text)))));
        assert!(is_mismatch((1, 2).check_type(&T::Tuple(vec![T::Int]))));
        assert!(is_mismatch((1,).check_type(&T::Tuple(vec![T::Int, T::Int]))));
        // Vectors need CqlVector; the dimension and element layout must match.
        let floats = T::Vector(Box::new(T::Float), 3);
        assert!(is_mismatch(vec![1.0f32, 2.0, 3.0].check_type(&floats)));
        assert!(is_mismatch(CqlVector(vec![1.0f32, 2.0]).check_type(&floats)));
        assert!(is_mismatch(CqlVector(vec![1.0f64, 2.0, 3.0]).check_type(&floats)));
        assert!(is_mismatch(CqlVector(vec![1.0f32, 2.0, 3.0]).check_type(&T::List(Box::new(T::Float)))));
        // Value checks.
        assert!(matches!("é".check_type(&T::Ascii), Err(EncodeError::InvalidValue { .. })));
        let v4 = Uuid::from_u128(0x0f9b0e52_7b5c_4e9f_a1f4_3a8d1c2b5e6f);
        assert!(matches!(v4.check_type(&T::Timeuuid), Err(EncodeError::InvalidValue { .. })));
        assert_eq!(v4.check_type(&T::Uuid), Ok(()));
        assert!(matches!(CqlTime(-1).encoded_len(), Err(EncodeError::InvalidValue { .. })));
        let mixed = CqlDuration { months: -1, days: 1, nanoseconds: 0 };
        assert!(matches!(mixed.encoded_len(), Err(EncodeError::InvalidValue { .. })));
        assert!(matches!(SerializeValue::encoded_len(&vec![mixed]), Err(EncodeError::InvalidValue { .. })));
    }

    #[test]
    fn value_lists() {
        let spec = |name: &str, typ| ColumnSpec { keyspace: "ks".into(), table: "t".into(), name: name.into(), typ };
        let specs = [spec("id", ColumnType::Int), spec("name", ColumnType::Text)];
        let values = (7i32, "seven");
        assert_eq!(SerializeValues::count(&values), 2);
        assert_eq!(values.check_types(&specs), Ok(()));
        let len = SerializeValues::encoded_len(&values).unwrap();
        let mut out = Vec::new();
        SerializeValues::encode(&values, &mut out);
        assert_eq!(out.len(), len);
        assert_eq!(out, [0, 0, 0, 4, 0, 0, 0, 7, 0, 0, 0, 5, b's', b'e', b'v', b'e', b'n']);
        // The same through CqlValues in a Vec, a slice, an array and a reference.
        let dynamic = vec![CqlValue::Int(7), CqlValue::Text("seven".into())];
        for v in [&dynamic[..], &dynamic.clone()[..]] {
            assert_eq!(v.check_types(&specs), Ok(()));
            let mut again = Vec::new();
            SerializeValues::encode(&v, &mut again);
            assert_eq!(again, out);
        }
        let array = [Some(1i32), None];
        assert_eq!(SerializeValues::encoded_len(&array), Ok(12));
        assert_eq!(SerializeValues::count(&&array), 2);
        // Count and type mismatches; type errors name the bind marker.
        assert!(matches!((7i32,).check_types(&specs), Err(EncodeError::InvalidValue { .. })));
        assert!(matches!(().check_types(&specs), Err(EncodeError::InvalidValue { .. })));
        assert_eq!(().check_types(&[]), Ok(()));
        match ("x", "y").check_types(&specs) {
            Err(EncodeError::TypeMismatch { cql_type, .. }) => {
                assert!(cql_type.contains("id"), "{cql_type}")
            }
            other => panic!("{other:?}"),
        }
        let sixteen = (1i8, 2i16, 3i32, 4i64, 5f32, 6f64, true, "8", 9i8, 10i8, 11i8, 12i8, 13i8, 14i8, 15i8, 16i8);
        assert_eq!(SerializeValues::count(&sixteen), 16);
        let mut buf = Vec::new();
        SerializeValues::encode(&sixteen, &mut buf);
        assert_eq!(buf.len(), SerializeValues::encoded_len(&sixteen).unwrap());
    }

    #[test]
    fn primitive_encoding_does_not_grow_the_buffer() {
        let mut buf: Vec<u8> = Vec::with_capacity(64);
        let (ptr, cap) = (buf.as_ptr(), buf.capacity());
        let blob = [9u8; 8];
        7i32.encode(&mut buf);
        "text".encode(&mut buf);
        blob[..].encode(&mut buf);
        Some(1.5f64).encode(&mut buf);
        CqlValue::BigInt(3).encode(&mut buf);
        assert_eq!((buf.as_ptr(), buf.capacity()), (ptr, cap));
        assert_eq!(buf.len(), 8 + 8 + 12 + 12 + 12);
    }
}
