//! What the conversions for other crates' types (the `chrono`, `time`,
//! `num-bigint` and `bigdecimal` features) share: the [`OutOfRange`] error of
//! their `TryFrom` conversions, and the impls of a type written as one of
//! this crate's value types.

/// A value does not fit the range of the type it is converted to (a CQL
/// `date` of year 3 000 000 as a `chrono::NaiveDate`, a decimal whose scale
/// does not fit in 32 bits, ...).
#[cfg(any(feature = "chrono", feature = "time", feature = "bigdecimal"))]
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("{what} value out of range for {target}")]
pub struct OutOfRange {
    /// The kind of value converted (`"date"`, `"time"`, `"timestamp"`, `"decimal"`).
    pub what: &'static str,
    /// The type it was converted to.
    pub target: &'static str,
}

#[cfg(any(feature = "chrono", feature = "time", feature = "bigdecimal"))]
impl OutOfRange {
    pub(crate) fn of<T: ?Sized>(what: &'static str) -> Self {
        OutOfRange { what, target: std::any::type_name::<T>() }
    }
}

/// The "cannot serialize `T` as `typ`" error, or `Ok` if `ok`.
#[cfg(any(feature = "chrono", feature = "time", feature = "num-bigint"))]
pub(crate) fn accept<T: ?Sized>(typ: &crate::types::ColumnType, ok: bool) -> Result<(), crate::EncodeError> {
    if ok {
        Ok(())
    } else {
        Err(crate::EncodeError::TypeMismatch { rust_type: std::any::type_name::<T>(), cql_type: typ.to_string() })
    }
}

/// The "`T` cannot hold values of `typ`" error, or `Ok` if `ok`.
#[cfg(any(feature = "chrono", feature = "time", feature = "num-bigint"))]
pub(crate) fn check<T: ?Sized>(
    typ: &crate::types::ColumnType,
    ok: bool,
) -> Result<(), crate::types::de::TypeCheckError> {
    if ok {
        Ok(())
    } else {
        Err(crate::types::de::TypeCheckError::new::<T>(typ))
    }
}

/// The value's bytes, or [`DeserializeError::UnexpectedNull`](crate::types::de::DeserializeError) for `T`.
#[cfg(any(feature = "chrono", feature = "time", feature = "num-bigint"))]
pub(crate) fn non_null<'a, T: ?Sized>(
    v: Option<crate::types::de::FrameSlice<'a>>,
) -> Result<crate::types::de::FrameSlice<'a>, crate::types::de::DeserializeError> {
    v.ok_or(crate::types::de::DeserializeError::UnexpectedNull { rust_type: std::any::type_name::<T>() })
}

/// Implements `SerializeValue`, `SerializeVectorElement` and
/// `DeserializeValue` for a type `$t` written exactly as the crate's value
/// type `$cql` (of CQL type `$col`):
///
/// - `to`: `&$t` to `Result<$cql, OutOfRange>`; an error fails
///   `encoded_len` with [`EncodeError::InvalidValue`](crate::EncodeError);
/// - `from`: `$cql` to `Result<$t, OutOfRange>`; an error is
///   [`DeserializeError::Overflow`](crate::types::de::DeserializeError);
/// - `sample`: any `$cql` value, which says whether the type is of a fixed
///   size inside a vector (as `$cql` is).
#[cfg(any(feature = "chrono", feature = "time"))]
macro_rules! impl_via_cql {
    ($t:ty => $cql:ty, $col:expr, sample: $sample:expr, to: $to:expr, from: $from:expr $(,)?) => {
        impl $crate::types::ser::SerializeVectorElement for $t {
            fn fixed_size(&self) -> Option<usize> {
                $crate::types::ser::SerializeVectorElement::fixed_size(&$sample)
            }
            fn body_len(&self) -> Result<usize, $crate::EncodeError> {
                let to: fn(&$t) -> Result<$cql, $crate::types::ext::OutOfRange> = $to;
                let cql = to(self).map_err(|e| $crate::EncodeError::InvalidValue {
                    what: e.what,
                    reason: "out of the range of the CQL type",
                })?;
                $crate::types::ser::SerializeVectorElement::body_len(&cql)
            }
            fn encode_body(&self, buf: &mut impl bytes::BufMut) {
                let to: fn(&$t) -> Result<$cql, $crate::types::ext::OutOfRange> = $to;
                // Only called after `body_len` succeeded, so `to` does.
                if let Ok(cql) = to(self) {
                    $crate::types::ser::SerializeVectorElement::encode_body(&cql, buf)
                }
            }
        }

        impl $crate::types::ser::SerializeValue for $t {
            fn check_type(&self, typ: &$crate::types::ColumnType) -> Result<(), $crate::EncodeError> {
                $crate::types::ext::accept::<$t>(typ, *typ == $col)
            }
            fn encoded_len(&self) -> Result<usize, $crate::EncodeError> {
                Ok(4 + $crate::types::ser::SerializeVectorElement::body_len(self)?)
            }
            fn encode(&self, buf: &mut impl bytes::BufMut) {
                let len = $crate::types::ser::SerializeVectorElement::body_len(self).unwrap_or(0);
                bytes::BufMut::put_i32(buf, len as i32);
                $crate::types::ser::SerializeVectorElement::encode_body(self, buf)
            }
        }

        impl<'a> $crate::types::de::DeserializeValue<'a> for $t {
            fn type_check(typ: &$crate::types::ColumnType) -> Result<(), $crate::types::de::TypeCheckError> {
                $crate::types::ext::check::<$t>(typ, *typ == $col)
            }
            fn deserialize(
                typ: &'a $crate::types::ColumnType,
                v: Option<$crate::types::de::FrameSlice<'a>>,
            ) -> Result<Self, $crate::types::de::DeserializeError> {
                let v = $crate::types::ext::non_null::<$t>(v)?;
                let cql = <$cql as $crate::types::de::DeserializeValue>::deserialize(typ, Some(v))?;
                let from: fn($cql) -> Result<$t, $crate::types::ext::OutOfRange> = $from;
                from(cql).map_err(|_| $crate::types::de::DeserializeError::Overflow {
                    cql_type: typ.to_string(),
                    rust_type: std::any::type_name::<$t>(),
                })
            }
        }
    };
}

#[cfg(any(feature = "chrono", feature = "time"))]
pub(crate) use impl_via_cql;

#[cfg(test)]
pub(crate) mod tests {
    use bytes::Bytes;

    use crate::types::de::{DeserializeError, DeserializeValue, FrameSlice};
    use crate::types::ser::SerializeValue;
    use crate::types::ColumnType;

    /// The value with its length prefix, as a bind value (checking that
    /// `encoded_len` is exact).
    pub(crate) fn encode(v: &(impl SerializeValue + ?Sized)) -> Vec<u8> {
        crate::types::value::tests::serialize(v)
    }

    /// Reads the body (without length prefix) `body` as `T` of `typ`, after
    /// the type check.
    pub(crate) fn decode<T>(typ: &ColumnType, body: &[u8]) -> Result<T, DeserializeError>
    where
        T: for<'a> DeserializeValue<'a>,
    {
        T::type_check(typ)?;
        let frame = Bytes::copy_from_slice(body);
        T::deserialize(typ, Some(FrameSlice::whole(&frame)))
    }

    /// Encodes `v` as `typ` (checking the type) and reads it back.
    pub(crate) fn round_trip<T>(typ: &ColumnType, v: &T) -> T
    where
        T: SerializeValue + for<'a> DeserializeValue<'a>,
    {
        assert_eq!(v.check_type(typ), Ok(()), "{} as {typ}", std::any::type_name::<T>());
        let bytes = encode(v);
        decode(typ, &bytes[4..]).unwrap()
    }
}
