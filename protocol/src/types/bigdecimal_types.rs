//! `bigdecimal::BigDecimal` as CQL `decimal` (feature `bigdecimal`): an
//! `[int]` scale and the unscaled value as a `varint`, as [`CqlDecimal`]
//! (both are `unscaled × 10^(−scale)`). A `BigDecimal`'s scale is an `i64`:
//! one that does not fit in 32 bits fails to be written
//! ([`EncodeError::InvalidValue`]) or converted (`TryFrom`, [`OutOfRange`]).
//! Writing one allocates nothing; reading one allocates the `BigDecimal`.

use bigdecimal::BigDecimal;
use bytes::BufMut;
use num_bigint::BigInt;

use crate::codec;
use crate::error::EncodeError;
use crate::types::bignum::{put_varint, varint_len};
use crate::types::de::{DeserializeError, DeserializeValue, FrameSlice, TypeCheckError};
use crate::types::ext::{accept, check, OutOfRange};
use crate::types::ser::{SerializeValue, SerializeVectorElement};
use crate::types::{ColumnType, CqlDecimal, CqlValue, CqlVarint};

/// The scale as an `[int]`.
fn scale_of(d: &BigDecimal) -> Result<i32, EncodeError> {
    let (_, scale) = d.as_bigint_and_scale();
    i32::try_from(scale)
        .map_err(|_| EncodeError::InvalidValue { what: "decimal", reason: "the scale does not fit in 32 bits" })
}

impl TryFrom<&BigDecimal> for CqlDecimal {
    type Error = OutOfRange;
    /// Fails if the scale does not fit in 32 bits.
    fn try_from(d: &BigDecimal) -> Result<Self, OutOfRange> {
        let (unscaled, scale) = d.as_bigint_and_scale();
        let scale = i32::try_from(scale).map_err(|_| OutOfRange::of::<CqlDecimal>("decimal"))?;
        Ok(CqlDecimal { unscaled: CqlVarint::from(&*unscaled), scale })
    }
}

impl TryFrom<BigDecimal> for CqlDecimal {
    type Error = OutOfRange;
    /// Fails if the scale does not fit in 32 bits.
    fn try_from(d: BigDecimal) -> Result<Self, OutOfRange> {
        CqlDecimal::try_from(&d)
    }
}

impl From<&CqlDecimal> for BigDecimal {
    fn from(d: &CqlDecimal) -> Self {
        BigDecimal::new(BigInt::from(&d.unscaled), d.scale.into())
    }
}

impl From<CqlDecimal> for BigDecimal {
    fn from(d: CqlDecimal) -> Self {
        BigDecimal::from(&d)
    }
}

impl TryFrom<BigDecimal> for CqlValue {
    type Error = OutOfRange;
    /// Fails if the scale does not fit in 32 bits.
    fn try_from(d: BigDecimal) -> Result<Self, OutOfRange> {
        CqlDecimal::try_from(&d).map(CqlValue::Decimal)
    }
}

impl SerializeVectorElement for BigDecimal {
    fn fixed_size(&self) -> Option<usize> {
        None
    }
    fn body_len(&self) -> Result<usize, EncodeError> {
        scale_of(self)?;
        let (unscaled, _) = self.as_bigint_and_scale();
        codec::check_int_len("decimal value", varint_len(&unscaled).saturating_add(4))
    }
    fn encode_body(&self, buf: &mut impl BufMut) {
        let (unscaled, scale) = self.as_bigint_and_scale();
        // Only called after `body_len` succeeded: the scale fits.
        buf.put_i32(scale as i32);
        put_varint(buf, &unscaled);
    }
}

impl SerializeValue for BigDecimal {
    fn check_type(&self, typ: &ColumnType) -> Result<(), EncodeError> {
        accept::<BigDecimal>(typ, *typ == ColumnType::Decimal)
    }
    fn encoded_len(&self) -> Result<usize, EncodeError> {
        Ok(4 + self.body_len()?)
    }
    fn encode(&self, buf: &mut impl BufMut) {
        let len = self.body_len().unwrap_or(0);
        buf.put_i32(len as i32);
        self.encode_body(buf)
    }
}

/// `decimal`: an `[int]` scale and a varint of at least one byte.
impl<'a> DeserializeValue<'a> for BigDecimal {
    fn type_check(typ: &ColumnType) -> Result<(), TypeCheckError> {
        check::<Self>(typ, *typ == ColumnType::Decimal)
    }
    fn deserialize(typ: &'a ColumnType, v: Option<FrameSlice<'a>>) -> Result<Self, DeserializeError> {
        let (scale, unscaled) = crate::types::de::decimal_parts::<Self>(typ, v)?;
        Ok(BigDecimal::new(BigInt::from_signed_bytes_be(unscaled), scale.into()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::bignum::tests::samples;
    use crate::types::ext::tests::{decode, encode, round_trip};
    use crate::types::CqlVector;

    fn dec(s: &str) -> BigDecimal {
        s.parse().unwrap()
    }

    #[test]
    fn encodes_as_cql_decimal_and_round_trips() {
        let mut values: Vec<BigDecimal> =
            ["0", "1", "-1", "0.001", "-12.345", "1200", "1e-40", "-1e40", "1e2147483647"]
                .into_iter()
                .map(dec)
                .collect();
        values.push(BigDecimal::new(BigInt::from(-7), -3));
        values.push(BigDecimal::new(BigInt::from(7), i64::from(i32::MIN)));
        values.push(BigDecimal::new(BigInt::from(7), i64::from(i32::MAX)));
        for unscaled in samples() {
            for scale in [0i64, 2, -5] {
                values.push(BigDecimal::new(unscaled.clone(), scale));
            }
        }
        for d in values {
            let cql = CqlDecimal::try_from(&d).unwrap();
            let (unscaled, scale) = d.as_bigint_and_scale();
            assert_eq!(i64::from(cql.scale), scale, "{d}");
            assert_eq!(cql.unscaled.as_signed_bytes_be(), unscaled.to_signed_bytes_be(), "{d}");
            assert_eq!(encode(&d), encode(&cql), "{d}");
            assert_eq!(BigDecimal::from(&cql), d);
            let back = round_trip(&ColumnType::Decimal, &d);
            assert_eq!(back.as_bigint_and_scale(), d.as_bigint_and_scale(), "{d}: scale kept");
        }
    }

    #[test]
    fn wire_form() {
        // -12.345: scale 3, unscaled -12345 = 0xcfc7.
        assert_eq!(encode(&dec("-12.345")), [0, 0, 0, 6, 0, 0, 0, 3, 0xcf, 0xc7]);
        // 1200 with scale -2: unscaled 12.
        let d = BigDecimal::new(BigInt::from(12), -2);
        assert_eq!(encode(&d), [0, 0, 0, 5, 0xff, 0xff, 0xff, 0xfe, 12]);
        assert_eq!(CqlDecimal::try_from(d).unwrap().to_string(), "1200");
        assert_eq!(decode::<BigDecimal>(&ColumnType::Decimal, &[0, 0, 0, 1, 0xff]), Ok(dec("-0.1")));
    }

    #[test]
    fn scales_beyond_32_bits_fail() {
        for scale in [i64::from(i32::MAX) + 1, i64::from(i32::MIN) - 1, i64::MAX, i64::MIN] {
            let d = BigDecimal::new(BigInt::from(5), scale);
            assert_eq!(CqlDecimal::try_from(&d), Err(OutOfRange::of::<CqlDecimal>("decimal")), "{scale}");
            assert!(matches!(d.encoded_len(), Err(EncodeError::InvalidValue { what: "decimal", .. })), "{scale}");
            assert!(CqlValue::try_from(d).is_err());
        }
    }

    #[test]
    fn malformed_values_types_and_nulls() {
        use ColumnType as T;
        for bad in [&[][..], &[0, 0, 0], &[0, 0, 0, 1]] {
            let r = decode::<BigDecimal>(&T::Decimal, bad);
            assert!(matches!(r, Err(DeserializeError::Malformed { .. })), "{bad:?}: {r:?}");
        }
        assert!(matches!(BigDecimal::deserialize(&T::Decimal, None), Err(DeserializeError::UnexpectedNull { .. })));
        for typ in [T::Double, T::Varint, T::Text] {
            assert!(matches!(dec("1.5").check_type(&typ), Err(EncodeError::TypeMismatch { .. })), "{typ}");
            assert!(BigDecimal::type_check(&typ).is_err(), "{typ}");
        }
        assert!(BigDecimal::type_check(&T::Decimal).is_ok());
        let v = CqlVector(vec![dec("1.5"), dec("-2")]);
        let cql = CqlVector(vec![CqlDecimal::try_from(dec("1.5")).unwrap(), CqlDecimal::try_from(dec("-2")).unwrap()]);
        assert_eq!(v.check_type(&T::Vector(Box::new(T::Decimal), 2)), Ok(()));
        assert_eq!(encode(&v), encode(&cql));
        let value = CqlValue::try_from(dec("0.5")).unwrap();
        assert_eq!(value, CqlValue::Decimal(CqlDecimal { unscaled: CqlVarint::from(5), scale: 1 }));
    }
}
