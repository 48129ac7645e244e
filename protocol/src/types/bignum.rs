//! `num_bigint::BigInt` as CQL `varint` (feature `num-bigint`): minimal
//! two's-complement big-endian bytes, as [`CqlVarint`]. Writing one
//! allocates nothing (its bytes are produced from the integer's digits), and
//! every `BigInt` up to the 2 GiB limit of a value is a `varint`; reading
//! one allocates the `BigInt`. It converts to and from [`CqlVarint`] with
//! `From`.

use bytes::BufMut;
use num_bigint::{BigInt, Sign};

use crate::codec;
use crate::error::EncodeError;
use crate::types::de::{DeserializeError, DeserializeValue, FrameSlice, TypeCheckError};
use crate::types::ext::{accept, check, non_null};
use crate::types::ser::{SerializeValue, SerializeVectorElement};
use crate::types::{ColumnType, CqlValue, CqlVarint};

/// Length of the minimal two's-complement big-endian form of `n` (at least 1).
pub(crate) fn varint_len(n: &BigInt) -> usize {
    let bits = n.bits();
    // A magnitude of `bits` bits needs a sign bit more, except that of a
    // negative power of two (-128 is one byte, 0x80).
    let negative_power_of_two = n.sign() == Sign::Minus && n.trailing_zeros() == Some(bits - 1);
    let len = if negative_power_of_two { bits.div_ceil(8) } else { bits / 8 + 1 };
    usize::try_from(len).unwrap_or(usize::MAX)
}

/// Writes the [`varint_len`] bytes of `n`'s minimal two's-complement
/// big-endian form, most significant first, from its 64-bit digits.
pub(crate) fn put_varint(buf: &mut impl BufMut, n: &BigInt) {
    let len = varint_len(n);
    let negative = n.sign() == Sign::Minus;
    // Negation is `!m + 1`: the `+ 1` carries into byte `k` of the
    // magnitude `m` iff the bytes below it are all zero.
    let trailing_zeros = n.trailing_zeros().unwrap_or(0);
    let mut digits = n.magnitude().iter_u64_digits();
    let n_digits = digits.len();
    // The digit holding the bytes being written. The first byte written is
    // in the most significant digit (or above all digits), and the bytes go
    // down one digit at a time, so `next_back` yields each digit in turn.
    let mut current: Option<(usize, u64)> = None;
    for k in (0..len).rev() {
        let index = k / 8;
        let digit = if index >= n_digits {
            0
        } else {
            match current {
                Some((i, d)) if i == index => d,
                _ => {
                    let d = digits.next_back().unwrap_or(0);
                    current = Some((index, d));
                    d
                }
            }
        };
        let byte = (digit >> (8 * (k % 8))) as u8;
        if negative {
            let carry = trailing_zeros >= 8 * k as u64;
            buf.put_u8((!byte).wrapping_add(u8::from(carry)));
        } else {
            buf.put_u8(byte);
        }
    }
}

impl From<&BigInt> for CqlVarint {
    fn from(n: &BigInt) -> Self {
        CqlVarint::from_signed_bytes_be(n.to_signed_bytes_be())
    }
}

impl From<BigInt> for CqlVarint {
    fn from(n: BigInt) -> Self {
        CqlVarint::from(&n)
    }
}

impl From<&CqlVarint> for BigInt {
    fn from(v: &CqlVarint) -> Self {
        BigInt::from_signed_bytes_be(v.as_signed_bytes_be())
    }
}

impl From<CqlVarint> for BigInt {
    fn from(v: CqlVarint) -> Self {
        BigInt::from(&v)
    }
}

impl From<BigInt> for CqlValue {
    fn from(n: BigInt) -> Self {
        CqlValue::Varint(n.into())
    }
}

impl SerializeVectorElement for BigInt {
    fn fixed_size(&self) -> Option<usize> {
        None
    }
    fn body_len(&self) -> Result<usize, EncodeError> {
        codec::check_int_len("varint value", varint_len(self))
    }
    fn encode_body(&self, buf: &mut impl BufMut) {
        put_varint(buf, self)
    }
}

impl SerializeValue for BigInt {
    fn check_type(&self, typ: &ColumnType) -> Result<(), EncodeError> {
        accept::<BigInt>(typ, *typ == ColumnType::Varint)
    }
    fn encoded_len(&self) -> Result<usize, EncodeError> {
        Ok(4 + self.body_len()?)
    }
    fn encode(&self, buf: &mut impl BufMut) {
        // `encoded_len` succeeded: the length fits.
        buf.put_i32(varint_len(self) as i32);
        put_varint(buf, self)
    }
}

/// `varint`: at least one byte (non-minimal encodings are accepted).
impl<'a> DeserializeValue<'a> for BigInt {
    fn type_check(typ: &ColumnType) -> Result<(), TypeCheckError> {
        check::<Self>(typ, *typ == ColumnType::Varint)
    }
    fn deserialize(typ: &'a ColumnType, v: Option<FrameSlice<'a>>) -> Result<Self, DeserializeError> {
        let b = non_null::<Self>(v)?.as_slice();
        if b.is_empty() {
            let e = crate::DecodeError::UnexpectedEnd { what: "varint", needed: 1, remaining: 0 };
            return Err(DeserializeError::malformed(typ, e));
        }
        Ok(BigInt::from_signed_bytes_be(b))
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::types::ext::tests::{decode, encode, round_trip};
    use crate::types::CqlVector;

    /// Zero, small and large values of both signs, powers of two (which
    /// need a sign byte when positive and not when negative) and their
    /// neighbours across byte and 64-bit digit boundaries.
    pub(crate) fn samples() -> Vec<BigInt> {
        let mut out: Vec<BigInt> = [0i64, 1, -1, 127, 128, -128, -129, 255, 256, -256, -255, -257, i64::MAX, i64::MIN]
            .into_iter()
            .map(BigInt::from)
            .collect();
        for bits in [7u32, 8, 15, 16, 31, 32, 63, 64, 65, 127, 128, 129, 200, 512, 1000] {
            let p = BigInt::from(1) << bits;
            for d in [-1i32, 0, 1] {
                let v = &p + d;
                out.push(v.clone());
                out.push(-v);
            }
        }
        let huge: BigInt = "-123456789012345678901234567890123456789012345678901234567890".parse().unwrap();
        out.push(huge.clone());
        out.push(-huge);
        out
    }

    fn put(n: &BigInt) -> Vec<u8> {
        let mut out = Vec::new();
        put_varint(&mut out, n);
        out
    }

    #[test]
    fn bytes_are_minimal_twos_complement() {
        let cases: [(i64, &[u8]); 10] = [
            (0, &[0]),
            (1, &[1]),
            (-1, &[0xff]),
            (127, &[0x7f]),
            (128, &[0, 0x80]),
            (-128, &[0x80]),
            (-129, &[0xff, 0x7f]),
            (256, &[1, 0]),
            (-256, &[0xff, 0]),
            (i64::MIN, &[0x80, 0, 0, 0, 0, 0, 0, 0]),
        ];
        for (v, bytes) in cases {
            assert_eq!(put(&BigInt::from(v)), bytes, "{v}");
        }
        let two_pow_64 = BigInt::from(1) << 64;
        assert_eq!(put(&two_pow_64), [1, 0, 0, 0, 0, 0, 0, 0, 0]);
        assert_eq!(put(&-&two_pow_64), [0xff, 0, 0, 0, 0, 0, 0, 0, 0]);
        assert_eq!(put(&(BigInt::from(u64::MAX))), [0, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff]);
    }

    #[test]
    fn encodes_as_cql_varint_and_round_trips() {
        for n in samples() {
            let cql = CqlVarint::from(&n);
            assert_eq!(cql.as_signed_bytes_be(), n.to_signed_bytes_be(), "{n}");
            assert_eq!(put(&n), cql.as_signed_bytes_be(), "{n}");
            assert_eq!(varint_len(&n), cql.as_signed_bytes_be().len(), "{n}");
            assert_eq!(encode(&n), encode(&cql), "{n}");
            assert_eq!(cql.to_string(), n.to_string());
            assert_eq!(BigInt::from(&cql), n);
            assert_eq!(round_trip(&ColumnType::Varint, &n), n);
        }
        let i = CqlVarint::from(-300i64);
        assert_eq!(BigInt::from(i), BigInt::from(-300));
    }

    #[test]
    fn reads_non_minimal_and_rejects_empty_values() {
        assert_eq!(decode::<BigInt>(&ColumnType::Varint, &[0, 0, 1]), Ok(BigInt::from(1)));
        assert_eq!(decode::<BigInt>(&ColumnType::Varint, &[0xff, 0xff, 0x80]), Ok(BigInt::from(-128)));
        let r = decode::<BigInt>(&ColumnType::Varint, &[]);
        assert!(matches!(r, Err(DeserializeError::Malformed { .. })), "{r:?}");
        assert!(matches!(BigInt::deserialize(&ColumnType::Varint, None), Err(DeserializeError::UnexpectedNull { .. })));
    }

    #[test]
    fn types_are_checked() {
        use ColumnType as T;
        let n = BigInt::from(5);
        for typ in [T::BigInt, T::Int, T::Decimal, T::Blob] {
            assert!(matches!(n.check_type(&typ), Err(EncodeError::TypeMismatch { .. })), "{typ}");
            assert!(BigInt::type_check(&typ).is_err(), "{typ}");
        }
        assert!(BigInt::type_check(&T::Varint).is_ok());
        let v = CqlVector(vec![BigInt::from(1), BigInt::from(-300)]);
        assert_eq!(v.check_type(&T::Vector(Box::new(T::Varint), 2)), Ok(()));
        assert_eq!(encode(&v), encode(&CqlVector(vec![CqlVarint::from(1), CqlVarint::from(-300)])));
        assert_eq!(CqlValue::from(BigInt::from(7)), CqlValue::Varint(CqlVarint::from(7)));
    }
}
