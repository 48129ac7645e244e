//! serde's `Serialize` and `Deserialize` for the value types (feature
//! `serde`), in the form `#[derive]` would give them, except for varints:
//!
//! - [`CqlDate`], [`CqlTime`], [`CqlTimestamp`]: newtype structs of their
//!   wire number (`CqlDate` is the day count offset by 2^31, `CqlTime`
//!   nanoseconds since midnight, `CqlTimestamp` milliseconds since the epoch);
//! - [`CqlDuration`]: a struct `{ months, days, nanoseconds }`;
//! - [`CqlVarint`]: in human-readable formats (JSON, ...) a string of its
//!   decimal digits (`"-123"`; integers are accepted too), in compact
//!   formats its minimal two's-complement big-endian bytes;
//! - [`CqlDecimal`]: a struct `{ unscaled, scale }`;
//! - [`CqlValue`]: an enum of the same variants (externally tagged:
//!   `{"Int": 5}`, `"Empty"`), blobs and custom values as sequences of
//!   bytes, UUIDs as uuid's serde feature writes them (a hyphenated string
//!   in human-readable formats, 16 bytes in compact ones).

use std::fmt;

use serde::de::{self, Deserializer, SeqAccess, Visitor};
use serde::ser::Serializer;
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use crate::types::{CqlDate, CqlDecimal, CqlDuration, CqlTime, CqlTimestamp, CqlValue, CqlVarint};

macro_rules! newtype {
    ($($t:ident($inner:ty) = $name:literal),*) => {$(
        impl Serialize for $t {
            fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.serialize_newtype_struct($name, &self.0)
            }
        }
        impl<'de> Deserialize<'de> for $t {
            fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                #[derive(Deserialize)]
                #[serde(rename = $name)]
                struct Repr($inner);
                Repr::deserialize(d).map(|Repr(v)| $t(v))
            }
        }
    )*};
}

newtype!(CqlDate(u32) = "CqlDate", CqlTime(i64) = "CqlTime", CqlTimestamp(i64) = "CqlTimestamp");

#[derive(Serialize, Deserialize)]
#[serde(rename = "CqlDuration")]
struct DurationRepr {
    months: i32,
    days: i32,
    nanoseconds: i64,
}

impl Serialize for CqlDuration {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        DurationRepr { months: self.months, days: self.days, nanoseconds: self.nanoseconds }.serialize(s)
    }
}

impl<'de> Deserialize<'de> for CqlDuration {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let DurationRepr { months, days, nanoseconds } = DurationRepr::deserialize(d)?;
        Ok(CqlDuration { months, days, nanoseconds })
    }
}

impl Serialize for CqlVarint {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        if s.is_human_readable() {
            s.collect_str(self)
        } else {
            s.serialize_bytes(self.as_signed_bytes_be())
        }
    }
}

impl<'de> Deserialize<'de> for CqlVarint {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        if d.is_human_readable() {
            d.deserialize_any(VarintVisitor)
        } else {
            d.deserialize_bytes(VarintVisitor)
        }
    }
}

struct VarintVisitor;

impl<'de> Visitor<'de> for VarintVisitor {
    type Value = CqlVarint;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a varint: a string of decimal digits, an integer, or two's-complement big-endian bytes")
    }
    fn visit_i64<E: de::Error>(self, v: i64) -> Result<CqlVarint, E> {
        Ok(v.into())
    }
    fn visit_u64<E: de::Error>(self, v: u64) -> Result<CqlVarint, E> {
        Ok(v.into())
    }
    fn visit_i128<E: de::Error>(self, v: i128) -> Result<CqlVarint, E> {
        Ok(v.into())
    }
    fn visit_u128<E: de::Error>(self, v: u128) -> Result<CqlVarint, E> {
        let mut bytes = [0; 17];
        bytes[1..].copy_from_slice(&v.to_be_bytes());
        Ok(CqlVarint::from_signed_bytes_be_slice(&bytes))
    }
    fn visit_str<E: de::Error>(self, v: &str) -> Result<CqlVarint, E> {
        parse_decimal(v).ok_or_else(|| E::invalid_value(de::Unexpected::Str(v), &self))
    }
    fn visit_bytes<E: de::Error>(self, v: &[u8]) -> Result<CqlVarint, E> {
        if v.is_empty() {
            return Err(E::invalid_length(0, &self));
        }
        Ok(CqlVarint::from_signed_bytes_be_slice(v))
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<CqlVarint, A::Error> {
        let mut bytes = Vec::with_capacity(seq.size_hint().unwrap_or(0).min(4096));
        while let Some(b) = seq.next_element::<u8>()? {
            bytes.push(b);
        }
        self.visit_bytes(&bytes)
    }
}

/// A varint from an optionally signed string of decimal digits.
fn parse_decimal(s: &str) -> Option<CqlVarint> {
    let (negative, digits) = match s.as_bytes() {
        [b'-', rest @ ..] => (true, rest),
        [b'+', rest @ ..] => (false, rest),
        rest => (false, rest),
    };
    if digits.is_empty() {
        return None;
    }
    // The magnitude, big-endian, with a leading zero byte for the sign.
    let mut magnitude: Vec<u8> = vec![0];
    for &c in digits {
        if !c.is_ascii_digit() {
            return None;
        }
        let mut carry = u32::from(c - b'0');
        for b in magnitude.iter_mut().rev() {
            let v = u32::from(*b) * 10 + carry;
            *b = (v & 0xff) as u8;
            carry = v >> 8;
        }
        if carry > 0 || magnitude[0] & 0x80 != 0 {
            magnitude.insert(0, carry as u8);
            if magnitude[0] & 0x80 != 0 {
                magnitude.insert(0, 0);
            }
        }
    }
    if negative {
        // Two's-complement negation: invert, then add one.
        let mut carry = true;
        for b in magnitude.iter_mut().rev() {
            *b = !*b;
            if carry {
                let (v, c) = b.overflowing_add(1);
                *b = v;
                carry = c;
            }
        }
    }
    Some(CqlVarint::from_signed_bytes_be(magnitude))
}

#[derive(Serialize)]
#[serde(rename = "CqlDecimal")]
struct DecimalRef<'a> {
    unscaled: &'a CqlVarint,
    scale: i32,
}

#[derive(Deserialize)]
#[serde(rename = "CqlDecimal")]
struct DecimalRepr {
    unscaled: CqlVarint,
    scale: i32,
}

impl Serialize for CqlDecimal {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        DecimalRef { unscaled: &self.unscaled, scale: self.scale }.serialize(s)
    }
}

impl<'de> Deserialize<'de> for CqlDecimal {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let DecimalRepr { unscaled, scale } = DecimalRepr::deserialize(d)?;
        Ok(CqlDecimal { unscaled, scale })
    }
}

/// Writes or reads [`CqlValue`]s through a mirror enum of the same variants:
/// `$ref` borrows, `$owned` owns.
macro_rules! value_repr {
    ($($variant:ident($ref:ty, $owned:ty)),* ; udt: $udt_fields:ty) => {
        #[derive(Serialize)]
        #[serde(rename = "CqlValue")]
        enum ValueRef<'a> {
            $($variant($ref),)*
            Empty,
            Udt { keyspace: &'a str, name: &'a str, fields: &'a $udt_fields },
        }

        #[derive(Deserialize)]
        #[serde(rename = "CqlValue")]
        enum ValueRepr {
            $($variant($owned),)*
            Empty,
            Udt { keyspace: String, name: String, fields: $udt_fields },
        }

        impl Serialize for CqlValue {
            fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                let repr = match self {
                    $(CqlValue::$variant(v) => ValueRef::$variant(v),)*
                    CqlValue::Empty => ValueRef::Empty,
                    CqlValue::Udt { keyspace, name, fields } => ValueRef::Udt { keyspace, name, fields },
                };
                repr.serialize(s)
            }
        }

        impl<'de> Deserialize<'de> for CqlValue {
            fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                Ok(match ValueRepr::deserialize(d)? {
                    $(ValueRepr::$variant(v) => CqlValue::$variant(v),)*
                    ValueRepr::Empty => CqlValue::Empty,
                    ValueRepr::Udt { keyspace, name, fields } => CqlValue::Udt { keyspace, name, fields },
                })
            }
        }
    };
}

value_repr! {
    Ascii(&'a String, String),
    BigInt(&'a i64, i64),
    Blob(&'a Vec<u8>, Vec<u8>),
    Boolean(&'a bool, bool),
    Counter(&'a i64, i64),
    Custom(&'a Vec<u8>, Vec<u8>),
    Date(&'a CqlDate, CqlDate),
    Decimal(&'a CqlDecimal, CqlDecimal),
    Double(&'a f64, f64),
    Duration(&'a CqlDuration, CqlDuration),
    Float(&'a f32, f32),
    Inet(&'a std::net::IpAddr, std::net::IpAddr),
    Int(&'a i32, i32),
    List(&'a Vec<CqlValue>, Vec<CqlValue>),
    Map(&'a Vec<(CqlValue, CqlValue)>, Vec<(CqlValue, CqlValue)>),
    Set(&'a Vec<CqlValue>, Vec<CqlValue>),
    SmallInt(&'a i16, i16),
    Text(&'a String, String),
    Time(&'a CqlTime, CqlTime),
    Timestamp(&'a CqlTimestamp, CqlTimestamp),
    Timeuuid(&'a Uuid, Uuid),
    TinyInt(&'a i8, i8),
    Tuple(&'a Vec<Option<CqlValue>>, Vec<Option<CqlValue>>),
    Uuid(&'a Uuid, Uuid),
    Varint(&'a CqlVarint, CqlVarint),
    Vector(&'a Vec<CqlValue>, Vec<CqlValue>);
    udt: Vec<(String, Option<CqlValue>)>
}

#[cfg(test)]
mod tests {
    use serde_test::{assert_de_tokens, assert_de_tokens_error, assert_tokens, Configure, Token};

    use super::*;
    use crate::types::sample_values;

    fn json<T: Serialize>(v: &T) -> String {
        serde_json::to_string(v).unwrap()
    }

    fn from_json<T: for<'de> Deserialize<'de>>(s: &str) -> Result<T, serde_json::Error> {
        serde_json::from_str(s)
    }

    #[test]
    fn dates_times_and_durations() {
        assert_eq!(json(&CqlDate::EPOCH), "2147483648");
        assert_eq!(json(&CqlTime(CqlTime::NANOS_PER_DAY - 1)), "86399999999999");
        assert_eq!(json(&CqlTimestamp(-1)), "-1");
        assert_eq!(from_json::<CqlDate>("2147483649").unwrap(), CqlDate(0x8000_0001));
        assert_eq!(from_json::<CqlTimestamp>("-1").unwrap(), CqlTimestamp(-1));
        assert!(from_json::<CqlDate>("-1").is_err(), "a date is a u32");
        assert_tokens(&CqlTime(5), &[Token::NewtypeStruct { name: "CqlTime" }, Token::I64(5)]);
        let d = CqlDuration { months: -1, days: -2, nanoseconds: -3 };
        assert_eq!(json(&d), r#"{"months":-1,"days":-2,"nanoseconds":-3}"#);
        assert_eq!(from_json::<CqlDuration>(&json(&d)).unwrap(), d);
        assert!(from_json::<CqlDuration>(r#"{"months":1,"days":2}"#).is_err());
    }

    #[test]
    fn varints_are_decimal_strings_or_bytes() {
        for v in
            [0i128, 1, -1, 127, 128, -128, -129, 255, 256, -256, i64::MIN.into(), u64::MAX.into(), i128::MIN, i128::MAX]
        {
            let cql = CqlVarint::from(v);
            assert_eq!(json(&cql), format!("\"{v}\""));
            assert_eq!(from_json::<CqlVarint>(&json(&cql)).unwrap(), cql, "{v}");
            assert_eq!(parse_decimal(&v.to_string()), Some(cql.clone()), "{v}");
            let bytes: &'static [u8] = Box::leak(cql.as_signed_bytes_be().into());
            assert_tokens(&cql.clone().compact(), &[Token::Bytes(bytes)]);
        }
        let two_pow_128 = "340282366920938463463374607431768211456";
        let mut bytes = vec![0u8; 17];
        bytes[0] = 1;
        assert_eq!(parse_decimal(two_pow_128), Some(CqlVarint::from_signed_bytes_be(bytes.clone())));
        bytes[0] = 0xff;
        let negative = CqlVarint::from_signed_bytes_be(bytes);
        assert_eq!(parse_decimal(&format!("-{two_pow_128}")), Some(negative.clone()));
        assert_eq!(negative.to_string(), format!("-{two_pow_128}"));
        assert_eq!(parse_decimal("+0042"), Some(CqlVarint::from(42)));
        assert_eq!(parse_decimal("-0"), Some(CqlVarint::from(0)));
        for bad in ["", "-", "+", "1a", "+-1", " 1", "1.0", "١"] {
            assert_eq!(parse_decimal(bad), None, "{bad:?}");
            assert!(from_json::<CqlVarint>(&format!("\"{bad}\"")).is_err(), "{bad:?}");
        }
        // Integers are accepted, and u128 beyond i128.
        assert_eq!(from_json::<CqlVarint>("-5").unwrap(), CqlVarint::from(-5));
        assert_eq!(from_json::<CqlVarint>("18446744073709551615").unwrap(), CqlVarint::from(u64::MAX));
        let big = CqlVarint::from_signed_bytes_be_slice(&[
            0, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
        ]);
        assert_eq!(VarintVisitor.visit_u128::<de::value::Error>(u128::MAX), Ok(big));
        assert_eq!(VarintVisitor.visit_i128::<de::value::Error>(-1), Ok(CqlVarint::from(-1)));
        assert_tokens(&CqlVarint::from(-2).readable(), &[Token::Str("-2")]);
        assert_de_tokens(
            &CqlVarint::from(-2).compact(),
            &[Token::Seq { len: Some(1) }, Token::U8(0xfe), Token::SeqEnd],
        );
        assert_de_tokens(&CqlVarint::from(1).compact(), &[Token::Bytes(&[0, 0, 1])]);
        assert_de_tokens_error::<serde_test::Compact<CqlVarint>>(
            &[Token::Bytes(&[])],
            "invalid length 0, expected a varint: a string of decimal digits, an integer, or two's-complement big-endian bytes",
        );
    }

    #[test]
    fn decimals() {
        let d = CqlDecimal { unscaled: CqlVarint::from(-12345), scale: 3 };
        assert_eq!(json(&d), r#"{"unscaled":"-12345","scale":3}"#);
        assert_eq!(from_json::<CqlDecimal>(&json(&d)).unwrap(), d);
        assert_eq!(from_json::<CqlDecimal>(r#"{"unscaled":7,"scale":-2}"#).unwrap().to_string(), "700");
        assert_tokens(
            &d.clone().compact(),
            &[
                Token::Struct { name: "CqlDecimal", len: 2 },
                Token::Str("unscaled"),
                Token::Bytes(&[0xcf, 0xc7]),
                Token::Str("scale"),
                Token::I32(3),
                Token::StructEnd,
            ],
        );
    }

    #[test]
    fn cql_values_round_trip() {
        assert_eq!(json(&CqlValue::Int(5)), r#"{"Int":5}"#);
        assert_eq!(json(&CqlValue::Empty), r#""Empty""#);
        assert_eq!(json(&CqlValue::Varint(CqlVarint::from(-3))), r#"{"Varint":"-3"}"#);
        let u = Uuid::from_u128(0x0f9b0e52_7b5c_4e9f_a1f4_3a8d1c2b5e6f);
        assert_eq!(json(&CqlValue::Uuid(u)), r#"{"Uuid":"0f9b0e52-7b5c-4e9f-a1f4-3a8d1c2b5e6f"}"#);
        let udt = CqlValue::Udt {
            keyspace: "ks".into(),
            name: "t".into(),
            fields: vec![("a".into(), Some(CqlValue::Text("x".into()))), ("b".into(), None)],
        };
        assert_eq!(json(&udt), r#"{"Udt":{"keyspace":"ks","name":"t","fields":[["a",{"Text":"x"}],["b",null]]}}"#);
        let mut values: Vec<CqlValue> = sample_values().into_iter().map(|(_, v)| v).collect();
        values.extend([udt, CqlValue::Empty, CqlValue::Custom(vec![1, 2])]);
        for v in values {
            assert_eq!(from_json::<CqlValue>(&json(&v)).unwrap(), v, "{v:?}");
        }
        assert!(from_json::<CqlValue>(r#"{"Nope":1}"#).is_err());
        assert!(from_json::<CqlValue>(r#"{"Int":"x"}"#).is_err());
        assert_tokens(
            &CqlValue::Varint(CqlVarint::from(1)).compact(),
            &[Token::NewtypeVariant { name: "CqlValue", variant: "Varint" }, Token::Bytes(&[1])],
        );
    }
}
