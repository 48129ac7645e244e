//! The owned, dynamically typed [`CqlValue`] and the value types that have no
//! natural std equivalent (date, time, timestamp, duration, decimal, varint,
//! vector).
//!
//! [`CqlValue`]'s [`Display`](fmt::Display) writes CQL literal syntax
//! (`'it''s'`, `0xcafe`, `[1, 2]`, `{'k': 1}`, `1mo2d3ns`, ...), which is what
//! a CDC printer or a `cqlsh`-like tool shows.

use std::fmt;
use std::hash::{Hash, Hasher};
use std::net::IpAddr;

use uuid::Uuid;

/// A CQL `date`, in its wire form: days since the epoch, offset by 2^31 so
/// that `2^31` is 1970-01-01 (the spec's "unsigned integer representing days
/// with epoch centered at 2^31").
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct CqlDate(pub u32);

impl CqlDate {
    /// 1970-01-01.
    pub const EPOCH: CqlDate = CqlDate(1 << 31);

    /// The date `days` days after (or before, if negative) 1970-01-01.
    pub fn from_days_since_epoch(days: i32) -> Self {
        CqlDate((days as u32) ^ (1 << 31))
    }

    /// Days since 1970-01-01 (negative before it).
    pub fn days_since_epoch(self) -> i32 {
        (self.0 ^ (1 << 31)) as i32
    }

    /// A date of the proleptic Gregorian calendar, `None` if the month or
    /// day is invalid or the date is outside the range of `date`.
    pub fn from_ymd(year: i64, month: u32, day: u32) -> Option<Self> {
        if !(1..=12).contains(&month) || day == 0 || day > days_in_month(year, month) {
            return None;
        }
        let days = i32::try_from(days_from_civil(year, month, day)).ok()?;
        Some(Self::from_days_since_epoch(days))
    }

    /// Year, month (1–12) and day (1–31) in the proleptic Gregorian calendar.
    pub fn to_ymd(self) -> (i64, u32, u32) {
        civil_from_days(self.days_since_epoch().into())
    }
}

impl fmt::Display for CqlDate {
    /// `yyyy-mm-dd` (years outside 0–9999 are written as they are, with a sign if negative).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (y, m, d) = self.to_ymd();
        write!(f, "{y:04}-{m:02}-{d:02}")
    }
}

/// A CQL `time`: nanoseconds since midnight, `0..=86_399_999_999_999`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct CqlTime(pub i64);

impl CqlTime {
    /// Nanoseconds in a day; valid times are below it.
    pub const NANOS_PER_DAY: i64 = 86_400 * 1_000_000_000;

    /// A time of day, `None` if a component is out of range.
    pub fn from_hms_nano(hour: u32, minute: u32, second: u32, nano: u32) -> Option<Self> {
        if hour > 23 || minute > 59 || second > 59 || nano > 999_999_999 {
            return None;
        }
        let secs = i64::from(hour) * 3600 + i64::from(minute) * 60 + i64::from(second);
        Some(CqlTime(secs * 1_000_000_000 + i64::from(nano)))
    }

    /// Whether the value is within a day, as the protocol requires.
    pub fn is_valid(self) -> bool {
        (0..Self::NANOS_PER_DAY).contains(&self.0)
    }
}

impl fmt::Display for CqlTime {
    /// `hh:mm:ss.nnnnnnnnn` for valid times, the raw nanosecond count otherwise.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if !self.is_valid() {
            return write!(f, "{}", self.0);
        }
        let (secs, nanos) = (self.0 / 1_000_000_000, self.0 % 1_000_000_000);
        write!(f, "{:02}:{:02}:{:02}.{nanos:09}", secs / 3600, secs / 60 % 60, secs % 60)
    }
}

/// A CQL `timestamp`: milliseconds since 1970-01-01T00:00:00Z.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct CqlTimestamp(pub i64);

impl CqlTimestamp {
    /// Date and time of day (UTC) of the timestamp.
    pub fn to_date_time(self) -> ((i64, u32, u32), CqlTime) {
        let days = self.0.div_euclid(86_400_000);
        let ms = self.0.rem_euclid(86_400_000);
        (civil_from_days(days), CqlTime(ms * 1_000_000))
    }
}

impl fmt::Display for CqlTimestamp {
    /// ISO 8601 in UTC, `yyyy-mm-ddThh:mm:ss.mmmZ`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let ((y, mo, d), time) = self.to_date_time();
        let secs = time.0 / 1_000_000_000;
        let ms = time.0 / 1_000_000 % 1000;
        write!(f, "{y:04}-{mo:02}-{d:02}T{:02}:{:02}:{:02}.{ms:03}Z", secs / 3600, secs / 60 % 60, secs % 60)
    }
}

/// A CQL `duration`. All three components must have the same sign (all
/// `>= 0` or all `<= 0`); serializing a duration with mixed signs fails.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct CqlDuration {
    /// Months.
    pub months: i32,
    /// Days.
    pub days: i32,
    /// Nanoseconds.
    pub nanoseconds: i64,
}

impl CqlDuration {
    /// Whether the components share one sign, as the protocol requires.
    pub fn is_valid(&self) -> bool {
        let (m, d, n) = (self.months, self.days, self.nanoseconds);
        (m >= 0 && d >= 0 && n >= 0) || (m <= 0 && d <= 0 && n <= 0)
    }
}

impl fmt::Display for CqlDuration {
    /// The CQL duration literal, e.g. `1y2mo3d4h5m6s7ms8us9ns`, `-3d`, `0s`.
    /// Durations with mixed signs are written as `<months>mo<days>d<nanos>ns`
    /// with each sign kept.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if !self.is_valid() {
            return write!(f, "{}mo{}d{}ns", self.months, self.days, self.nanoseconds);
        }
        if self.months < 0 || self.days < 0 || self.nanoseconds < 0 {
            f.write_str("-")?;
        }
        let months = self.months.unsigned_abs();
        let days = self.days.unsigned_abs();
        let nanos = self.nanoseconds.unsigned_abs();
        let parts: [(u64, &str); 9] = [
            (u64::from(months / 12), "y"),
            (u64::from(months % 12), "mo"),
            (u64::from(days), "d"),
            (nanos / 3_600_000_000_000, "h"),
            (nanos / 60_000_000_000 % 60, "m"),
            (nanos / 1_000_000_000 % 60, "s"),
            (nanos / 1_000_000 % 1000, "ms"),
            (nanos / 1000 % 1000, "us"),
            (nanos % 1000, "ns"),
        ];
        let mut any = false;
        for (n, unit) in parts {
            if n != 0 {
                write!(f, "{n}{unit}")?;
                any = true;
            }
        }
        if !any {
            f.write_str("0s")?;
        }
        Ok(())
    }
}

/// A CQL `varint`: an arbitrary-precision integer, kept as its minimal
/// two's-complement big-endian bytes (the wire form; never empty).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct CqlVarint(Vec<u8>);

/// A [`CqlVarint`] does not fit in the requested integer type.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("varint out of range for {target}")]
pub struct VarintOutOfRange {
    /// The integer type requested.
    pub target: &'static str,
}

impl CqlVarint {
    /// A varint from two's-complement big-endian bytes, normalized to the
    /// minimal form (empty input is zero).
    pub fn from_signed_bytes_be(mut bytes: Vec<u8>) -> Self {
        if bytes.is_empty() {
            return CqlVarint(vec![0]);
        }
        let start = minimal_start(&bytes);
        bytes.drain(..start);
        CqlVarint(bytes)
    }

    /// Like [`Self::from_signed_bytes_be`], from a slice.
    pub fn from_signed_bytes_be_slice(bytes: &[u8]) -> Self {
        if bytes.is_empty() {
            return CqlVarint(vec![0]);
        }
        CqlVarint(bytes[minimal_start(bytes)..].to_vec())
    }

    /// The minimal two's-complement big-endian bytes (at least one).
    pub fn as_signed_bytes_be(&self) -> &[u8] {
        &self.0
    }

    /// The minimal two's-complement big-endian bytes (at least one).
    pub fn into_signed_bytes_be(self) -> Vec<u8> {
        self.0
    }

    /// Whether the value is below zero.
    pub fn is_negative(&self) -> bool {
        self.0.first().is_some_and(|b| b & 0x80 != 0)
    }

    fn to_fixed<const N: usize>(&self, target: &'static str) -> Result<[u8; N], VarintOutOfRange> {
        let len = self.0.len();
        if len > N {
            return Err(VarintOutOfRange { target });
        }
        let mut out = [if self.is_negative() { 0xff } else { 0 }; N];
        out[N - len..].copy_from_slice(&self.0);
        Ok(out)
    }
}

/// Index of the first byte of the minimal two's-complement form of `b`.
fn minimal_start(b: &[u8]) -> usize {
    let mut i = 0;
    while let [cur, next, ..] = b[i..] {
        let redundant = (cur == 0x00 && next & 0x80 == 0) || (cur == 0xff && next & 0x80 != 0);
        if !redundant {
            break;
        }
        i += 1;
    }
    i
}

macro_rules! varint_from {
    ($($t:ty),*) => {$(
        impl From<$t> for CqlVarint {
            fn from(v: $t) -> Self {
                CqlVarint::from_signed_bytes_be_slice(&i128::from(v).to_be_bytes())
            }
        }
    )*};
}
varint_from!(i8, i16, i32, i64, i128, u8, u16, u32, u64);

impl TryFrom<&CqlVarint> for i64 {
    type Error = VarintOutOfRange;
    fn try_from(v: &CqlVarint) -> Result<Self, Self::Error> {
        v.to_fixed("i64").map(i64::from_be_bytes)
    }
}

impl TryFrom<CqlVarint> for i64 {
    type Error = VarintOutOfRange;
    fn try_from(v: CqlVarint) -> Result<Self, Self::Error> {
        i64::try_from(&v)
    }
}

impl TryFrom<&CqlVarint> for i128 {
    type Error = VarintOutOfRange;
    fn try_from(v: &CqlVarint) -> Result<Self, Self::Error> {
        v.to_fixed("i128").map(i128::from_be_bytes)
    }
}

impl TryFrom<CqlVarint> for i128 {
    type Error = VarintOutOfRange;
    fn try_from(v: CqlVarint) -> Result<Self, Self::Error> {
        i128::try_from(&v)
    }
}

impl fmt::Display for CqlVarint {
    /// The value in decimal.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (negative, digits) = decimal_digits(&self.0);
        if negative {
            f.write_str("-")?;
        }
        f.write_str(&digits)
    }
}

/// Sign and decimal digits of the magnitude of a two's-complement number.
fn decimal_digits(bytes: &[u8]) -> (bool, String) {
    let negative = bytes.first().is_some_and(|b| b & 0x80 != 0);
    let mut magnitude = bytes.to_vec();
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
    // Big-endian base-2^32 limbs.
    let mut limbs: Vec<u32> = Vec::with_capacity(magnitude.len() / 4 + 1);
    let head = magnitude.len() % 4;
    if head > 0 {
        limbs.push(magnitude[..head].iter().fold(0, |acc, b| (acc << 8) | u32::from(*b)));
    }
    for chunk in magnitude[head..].chunks(4) {
        limbs.push(chunk.iter().fold(0, |acc, b| (acc << 8) | u32::from(*b)));
    }
    // Repeated division by 10^9, least significant chunk first.
    const CHUNK: u64 = 1_000_000_000;
    let mut chunks = Vec::new();
    loop {
        while limbs.first() == Some(&0) {
            limbs.remove(0);
        }
        if limbs.is_empty() {
            break;
        }
        let mut rem = 0u64;
        for limb in limbs.iter_mut() {
            let cur = (rem << 32) | u64::from(*limb);
            *limb = (cur / CHUNK) as u32;
            rem = cur % CHUNK;
        }
        chunks.push(rem as u32);
    }
    let mut out = String::with_capacity(chunks.len() * 9 + 1);
    match chunks.split_last() {
        None => out.push('0'),
        Some((first, rest)) => {
            out.push_str(&first.to_string());
            for c in rest.iter().rev() {
                out.push_str(&format!("{c:09}"));
            }
        }
    }
    (negative, out)
}

/// A CQL `decimal`: `unscaled × 10^(−scale)`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct CqlDecimal {
    /// The unscaled value.
    pub unscaled: CqlVarint,
    /// The power of ten the unscaled value is divided by.
    pub scale: i32,
}

impl fmt::Display for CqlDecimal {
    /// Plain notation (`-12.345`, `0.001`, `1200`), or `<digits>E<exponent>`
    /// when that would need more than 32 padding zeros.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        const MAX_PAD: i64 = 32;
        let (negative, digits) = decimal_digits(self.unscaled.as_signed_bytes_be());
        if negative {
            f.write_str("-")?;
        }
        let scale = i64::from(self.scale);
        let len = digits.len() as i64;
        if scale == 0 {
            f.write_str(&digits)
        } else if scale < 0 {
            if -scale <= MAX_PAD {
                write!(f, "{digits}{}", "0".repeat((-scale) as usize))
            } else {
                write!(f, "{digits}E+{}", -scale)
            }
        } else if scale < len {
            let (int, frac) = digits.split_at((len - scale) as usize);
            write!(f, "{int}.{frac}")
        } else if scale - len <= MAX_PAD {
            write!(f, "0.{}{digits}", "0".repeat((scale - len) as usize))
        } else {
            write!(f, "{digits}E-{scale}")
        }
    }
}

/// A CQL `vector<T, n>` (Cassandra 5): a fixed number of non-null elements.
///
/// Vectors are serialized differently from lists (no count, and elements of
/// fixed-size types without lengths), and a value's encoding here cannot
/// depend on the column type, so `Vec<T>` serializes only as `list`/`set`:
/// wrap it in `CqlVector` to bind a vector. Deserialization into `Vec<T>`
/// accepts vectors too.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct CqlVector<T>(pub Vec<T>);

/// An owned CQL value of any type.
///
/// Equality and hashing compare `float` and `double` values by their bit
/// patterns (the value on the wire), so a NaN equals itself, `0.0` differs
/// from `-0.0`, and `CqlValue` is `Eq + Hash`, usable as a map key.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub enum CqlValue {
    /// `ascii`
    Ascii(String),
    /// `bigint`
    BigInt(i64),
    /// `blob`
    Blob(Vec<u8>),
    /// `boolean`
    Boolean(bool),
    /// `counter`
    Counter(i64),
    /// A value of a custom type: its raw bytes.
    Custom(Vec<u8>),
    /// `date`
    Date(CqlDate),
    /// `decimal`
    Decimal(CqlDecimal),
    /// `double`
    Double(f64),
    /// `duration`
    Duration(CqlDuration),
    /// A zero-length value of a type whose values are otherwise never empty
    /// (an "empty" `int`, which CQL keeps apart from null for legacy reasons).
    Empty,
    /// `float`
    Float(f32),
    /// `inet`
    Inet(IpAddr),
    /// `int`
    Int(i32),
    /// `list<T>`
    List(Vec<CqlValue>),
    /// `map<K, V>`, entries in wire order.
    Map(Vec<(CqlValue, CqlValue)>),
    /// `set<T>`, elements in wire order.
    Set(Vec<CqlValue>),
    /// `smallint`
    SmallInt(i16),
    /// `text`
    Text(String),
    /// `time`
    Time(CqlTime),
    /// `timestamp`
    Timestamp(CqlTimestamp),
    /// `timeuuid`
    Timeuuid(Uuid),
    /// `tinyint`
    TinyInt(i8),
    /// `tuple<...>`; `None` elements are null.
    Tuple(Vec<Option<CqlValue>>),
    /// A user-defined type value.
    Udt {
        /// Keyspace of the type.
        keyspace: String,
        /// Name of the type.
        name: String,
        /// Field names and values, in declaration order; `None` is null. A
        /// value may have fewer fields than its type (the rest are null).
        fields: Vec<(String, Option<CqlValue>)>,
    },
    /// `uuid`
    Uuid(Uuid),
    /// `varint`
    Varint(CqlVarint),
    /// `vector<T, n>`
    Vector(Vec<CqlValue>),
}

impl CqlValue {
    /// A short name of the variant, for error messages (`"CqlValue::Int"`).
    pub fn variant_name(&self) -> &'static str {
        match self {
            CqlValue::Ascii(_) => "CqlValue::Ascii",
            CqlValue::BigInt(_) => "CqlValue::BigInt",
            CqlValue::Blob(_) => "CqlValue::Blob",
            CqlValue::Boolean(_) => "CqlValue::Boolean",
            CqlValue::Counter(_) => "CqlValue::Counter",
            CqlValue::Custom(_) => "CqlValue::Custom",
            CqlValue::Date(_) => "CqlValue::Date",
            CqlValue::Decimal(_) => "CqlValue::Decimal",
            CqlValue::Double(_) => "CqlValue::Double",
            CqlValue::Duration(_) => "CqlValue::Duration",
            CqlValue::Empty => "CqlValue::Empty",
            CqlValue::Float(_) => "CqlValue::Float",
            CqlValue::Inet(_) => "CqlValue::Inet",
            CqlValue::Int(_) => "CqlValue::Int",
            CqlValue::List(_) => "CqlValue::List",
            CqlValue::Map(_) => "CqlValue::Map",
            CqlValue::Set(_) => "CqlValue::Set",
            CqlValue::SmallInt(_) => "CqlValue::SmallInt",
            CqlValue::Text(_) => "CqlValue::Text",
            CqlValue::Time(_) => "CqlValue::Time",
            CqlValue::Timestamp(_) => "CqlValue::Timestamp",
            CqlValue::Timeuuid(_) => "CqlValue::Timeuuid",
            CqlValue::TinyInt(_) => "CqlValue::TinyInt",
            CqlValue::Tuple(_) => "CqlValue::Tuple",
            CqlValue::Udt { .. } => "CqlValue::Udt",
            CqlValue::Uuid(_) => "CqlValue::Uuid",
            CqlValue::Varint(_) => "CqlValue::Varint",
            CqlValue::Vector(_) => "CqlValue::Vector",
        }
    }

    /// The string of an `ascii` or `text` value.
    pub fn as_str(&self) -> Option<&str> {
        match self {
            CqlValue::Ascii(s) | CqlValue::Text(s) => Some(s),
            _ => None,
        }
    }

    /// The bytes of a `blob` or custom value.
    pub fn as_blob(&self) -> Option<&[u8]> {
        match self {
            CqlValue::Blob(b) | CqlValue::Custom(b) => Some(b),
            _ => None,
        }
    }

    /// The value of a `bigint` or `counter`.
    pub fn as_i64(&self) -> Option<i64> {
        match self {
            CqlValue::BigInt(v) | CqlValue::Counter(v) => Some(*v),
            _ => None,
        }
    }

    /// The value of an `int`.
    pub fn as_i32(&self) -> Option<i32> {
        match self {
            CqlValue::Int(v) => Some(*v),
            _ => None,
        }
    }

    /// The value of a `boolean`.
    pub fn as_bool(&self) -> Option<bool> {
        match self {
            CqlValue::Boolean(v) => Some(*v),
            _ => None,
        }
    }

    /// The value of a `uuid` or `timeuuid`.
    pub fn as_uuid(&self) -> Option<Uuid> {
        match self {
            CqlValue::Uuid(v) | CqlValue::Timeuuid(v) => Some(*v),
            _ => None,
        }
    }

    /// The elements of a `list`, `set` or `vector`.
    pub fn as_elements(&self) -> Option<&[CqlValue]> {
        match self {
            CqlValue::List(v) | CqlValue::Set(v) | CqlValue::Vector(v) => Some(v),
            _ => None,
        }
    }

    /// The entries of a `map`.
    pub fn as_map(&self) -> Option<&[(CqlValue, CqlValue)]> {
        match self {
            CqlValue::Map(v) => Some(v),
            _ => None,
        }
    }

    /// The serialized size of values of this variant if their CQL type is
    /// declared fixed-size (see [`crate::types::ColumnType::fixed_size`]);
    /// decides how the value is laid out inside a `vector`.
    pub fn fixed_size(&self) -> Option<usize> {
        match self {
            CqlValue::Boolean(_) => Some(1),
            CqlValue::Int(_) | CqlValue::Float(_) => Some(4),
            CqlValue::BigInt(_) | CqlValue::Double(_) | CqlValue::Timestamp(_) => Some(8),
            CqlValue::Uuid(_) | CqlValue::Timeuuid(_) => Some(16),
            CqlValue::Vector(elems) if !elems.is_empty() => {
                elems.iter().try_fold(0, |acc, e| Some(acc + e.fixed_size()?))
            }
            _ => None,
        }
    }
}

impl PartialEq for CqlValue {
    fn eq(&self, other: &Self) -> bool {
        use CqlValue as V;
        match (self, other) {
            (V::Ascii(a), V::Ascii(b)) | (V::Text(a), V::Text(b)) => a == b,
            (V::BigInt(a), V::BigInt(b)) | (V::Counter(a), V::Counter(b)) => a == b,
            (V::Blob(a), V::Blob(b)) | (V::Custom(a), V::Custom(b)) => a == b,
            (V::Boolean(a), V::Boolean(b)) => a == b,
            (V::Date(a), V::Date(b)) => a == b,
            (V::Decimal(a), V::Decimal(b)) => a == b,
            (V::Double(a), V::Double(b)) => a.to_bits() == b.to_bits(),
            (V::Duration(a), V::Duration(b)) => a == b,
            (V::Empty, V::Empty) => true,
            (V::Float(a), V::Float(b)) => a.to_bits() == b.to_bits(),
            (V::Inet(a), V::Inet(b)) => a == b,
            (V::Int(a), V::Int(b)) => a == b,
            (V::List(a), V::List(b)) | (V::Set(a), V::Set(b)) | (V::Vector(a), V::Vector(b)) => a == b,
            (V::Map(a), V::Map(b)) => a == b,
            (V::SmallInt(a), V::SmallInt(b)) => a == b,
            (V::Time(a), V::Time(b)) => a == b,
            (V::Timestamp(a), V::Timestamp(b)) => a == b,
            (V::Timeuuid(a), V::Timeuuid(b)) | (V::Uuid(a), V::Uuid(b)) => a == b,
            (V::TinyInt(a), V::TinyInt(b)) => a == b,
            (V::Tuple(a), V::Tuple(b)) => a == b,
            (V::Udt { keyspace: k1, name: n1, fields: f1 }, V::Udt { keyspace: k2, name: n2, fields: f2 }) => {
                k1 == k2 && n1 == n2 && f1 == f2
            }
            (V::Varint(a), V::Varint(b)) => a == b,
            _ => false,
        }
    }
}

impl Eq for CqlValue {}

impl Hash for CqlValue {
    fn hash<H: Hasher>(&self, state: &mut H) {
        use CqlValue as V;
        std::mem::discriminant(self).hash(state);
        match self {
            V::Ascii(s) | V::Text(s) => s.hash(state),
            V::BigInt(v) | V::Counter(v) => v.hash(state),
            V::Blob(b) | V::Custom(b) => b.hash(state),
            V::Boolean(v) => v.hash(state),
            V::Date(v) => v.hash(state),
            V::Decimal(v) => v.hash(state),
            V::Double(v) => v.to_bits().hash(state),
            V::Duration(v) => v.hash(state),
            V::Empty => {}
            V::Float(v) => v.to_bits().hash(state),
            V::Inet(v) => v.hash(state),
            V::Int(v) => v.hash(state),
            V::List(v) | V::Set(v) | V::Vector(v) => v.hash(state),
            V::Map(v) => v.hash(state),
            V::SmallInt(v) => v.hash(state),
            V::Time(v) => v.hash(state),
            V::Timestamp(v) => v.hash(state),
            V::Timeuuid(v) | V::Uuid(v) => v.hash(state),
            V::TinyInt(v) => v.hash(state),
            V::Tuple(v) => v.hash(state),
            V::Udt { keyspace, name, fields } => (keyspace, name, fields).hash(state),
            V::Varint(v) => v.hash(state),
        }
    }
}

macro_rules! cql_value_from {
    ($($t:ty => $variant:ident),* $(,)?) => {$(
        impl From<$t> for CqlValue {
            fn from(v: $t) -> Self {
                CqlValue::$variant(v.into())
            }
        }
    )*};
}
cql_value_from!(
    bool => Boolean, i8 => TinyInt, i16 => SmallInt, i32 => Int, i64 => BigInt, f32 => Float,
    f64 => Double, String => Text, &str => Text, Vec<u8> => Blob, &[u8] => Blob, Uuid => Uuid,
    IpAddr => Inet, CqlDate => Date, CqlTime => Time, CqlTimestamp => Timestamp,
    CqlDuration => Duration, CqlVarint => Varint, CqlDecimal => Decimal,
);

impl fmt::Display for CqlValue {
    /// CQL literal syntax. Strings, dates, times, timestamps and addresses
    /// are quoted (`'` doubled inside), blobs and custom values are `0x...`,
    /// `Empty` is `0x`, nulls inside tuples and UDTs are `null`, floats use
    /// `NaN`/`Infinity`. Dates, times and timestamps outside years 0–9999
    /// (or outside a day, for times) are written as their raw integers.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CqlValue::Ascii(s) | CqlValue::Text(s) => write_quoted(f, s),
            CqlValue::BigInt(v) | CqlValue::Counter(v) => write!(f, "{v}"),
            CqlValue::Blob(b) | CqlValue::Custom(b) => write_hex(f, b),
            CqlValue::Empty => f.write_str("0x"),
            CqlValue::Boolean(v) => write!(f, "{v}"),
            CqlValue::Date(d) => {
                let (y, _, _) = d.to_ymd();
                if (0..=9999).contains(&y) {
                    write!(f, "'{d}'")
                } else {
                    write!(f, "{}", d.0)
                }
            }
            CqlValue::Decimal(d) => write!(f, "{d}"),
            CqlValue::Double(v) => write_float(f, *v),
            CqlValue::Float(v) => write_float(f, f64::from(*v)),
            CqlValue::Duration(d) => write!(f, "{d}"),
            CqlValue::Inet(ip) => write!(f, "'{ip}'"),
            CqlValue::Int(v) => write!(f, "{v}"),
            CqlValue::SmallInt(v) => write!(f, "{v}"),
            CqlValue::TinyInt(v) => write!(f, "{v}"),
            CqlValue::Time(t) => {
                if t.is_valid() {
                    write!(f, "'{t}'")
                } else {
                    write!(f, "{}", t.0)
                }
            }
            CqlValue::Timestamp(ts) => {
                let ((y, _, _), _) = ts.to_date_time();
                if (0..=9999).contains(&y) {
                    write!(f, "'{ts}'")
                } else {
                    write!(f, "{}", ts.0)
                }
            }
            CqlValue::Uuid(u) | CqlValue::Timeuuid(u) => write!(f, "{u}"),
            CqlValue::Varint(v) => write!(f, "{v}"),
            CqlValue::List(items) | CqlValue::Vector(items) => {
                write_seq(f, "[", "]", items.iter().map(|v| Item::Value(Some(v))))
            }
            CqlValue::Set(items) => write_seq(f, "{", "}", items.iter().map(|v| Item::Value(Some(v)))),
            CqlValue::Map(entries) => write_seq(f, "{", "}", entries.iter().map(|(k, v)| Item::Entry(k, v))),
            CqlValue::Tuple(items) => write_seq(f, "(", ")", items.iter().map(|v| Item::Value(v.as_ref()))),
            CqlValue::Udt { fields, .. } => {
                write_seq(f, "{", "}", fields.iter().map(|(n, v)| Item::Field(n, v.as_ref())))
            }
        }
    }
}

enum Item<'v> {
    Value(Option<&'v CqlValue>),
    Entry(&'v CqlValue, &'v CqlValue),
    Field(&'v str, Option<&'v CqlValue>),
}

fn write_seq<'v>(
    f: &mut fmt::Formatter<'_>,
    open: &str,
    close: &str,
    items: impl Iterator<Item = Item<'v>>,
) -> fmt::Result {
    f.write_str(open)?;
    for (i, item) in items.enumerate() {
        if i > 0 {
            f.write_str(", ")?;
        }
        match item {
            Item::Value(v) => write_nullable(f, v)?,
            Item::Entry(k, v) => write!(f, "{k}: {v}")?,
            Item::Field(name, v) => {
                write_identifier(f, name)?;
                f.write_str(": ")?;
                write_nullable(f, v)?;
            }
        }
    }
    f.write_str(close)
}

fn write_nullable(f: &mut fmt::Formatter<'_>, v: Option<&CqlValue>) -> fmt::Result {
    match v {
        Some(v) => write!(f, "{v}"),
        None => f.write_str("null"),
    }
}

fn write_quoted(f: &mut fmt::Formatter<'_>, s: &str) -> fmt::Result {
    f.write_str("'")?;
    for (i, part) in s.split('\'').enumerate() {
        if i > 0 {
            f.write_str("''")?;
        }
        f.write_str(part)?;
    }
    f.write_str("'")
}

/// A CQL identifier, double-quoted unless it is a plain lowercase one.
fn write_identifier(f: &mut fmt::Formatter<'_>, name: &str) -> fmt::Result {
    let plain = name.starts_with(|c: char| c.is_ascii_lowercase())
        && name.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_');
    if plain {
        return f.write_str(name);
    }
    f.write_str("\"")?;
    for (i, part) in name.split('"').enumerate() {
        if i > 0 {
            f.write_str("\"\"")?;
        }
        f.write_str(part)?;
    }
    f.write_str("\"")
}

fn write_hex(f: &mut fmt::Formatter<'_>, b: &[u8]) -> fmt::Result {
    f.write_str("0x")?;
    for byte in b {
        write!(f, "{byte:02x}")?;
    }
    Ok(())
}

fn write_float(f: &mut fmt::Formatter<'_>, v: f64) -> fmt::Result {
    if v.is_nan() {
        f.write_str("NaN")
    } else if v.is_infinite() {
        f.write_str(if v > 0.0 { "Infinity" } else { "-Infinity" })
    } else {
        // `Debug` is the shortest representation that round-trips, with an
        // exponent for very large or small values (`1e-7`), valid in CQL.
        write!(f, "{v:?}")
    }
}

// ---------------------------------------------------------------- calendar
// Howard Hinnant's days_from_civil / civil_from_days (proleptic Gregorian).

fn days_in_month(year: i64, month: u32) -> u32 {
    match month {
        4 | 6 | 9 | 11 => 30,
        2 if year % 4 == 0 && (year % 100 != 0 || year % 400 == 0) => 29,
        2 => 28,
        _ => 31,
    }
}

fn days_from_civil(year: i64, month: u32, day: u32) -> i64 {
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let yoe = y.rem_euclid(400);
    let mp = i64::from((month + 9) % 12);
    let doy = (153 * mp + 2) / 5 + i64::from(day) - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let month = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let year = yoe + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

#[cfg(test)]
pub(crate) mod tests {
    use bytes::Bytes;

    use super::*;
    use crate::codec::Reader;
    use crate::error::EncodeError;
    use crate::types::de::{DeserializeError, DeserializeValue, FrameSlice};
    use crate::types::ser::SerializeValue;
    use crate::types::{sample_types, ColumnType};

    /// One sample value for every type of [`sample_types`] (the same types,
    /// in the same order), for round-trip and truncation tests.
    pub(crate) fn sample_values() -> Vec<(ColumnType, CqlValue)> {
        use ColumnType as T;
        let text = |s: &str| CqlValue::Text(s.into());
        let v1 = Uuid::parse_str("8d2a6f3e-1dd2-11b2-8000-0242ac120002").unwrap();
        let v4 = Uuid::parse_str("0f9b0e52-7b5c-4e9f-a1f4-3a8d1c2b5e6f").unwrap();
        vec![
            (T::Custom("com.example.MyType".into()), CqlValue::Custom(vec![1, 2, 3])),
            (T::Ascii, CqlValue::Ascii("hello 'cql'".into())),
            (T::BigInt, CqlValue::BigInt(-1_234_567_890_123)),
            (T::Blob, CqlValue::Blob(vec![0, 1, 0xfe, 0xff])),
            (T::Boolean, CqlValue::Boolean(true)),
            (T::Counter, CqlValue::Counter(42)),
            (T::Decimal, CqlValue::Decimal(CqlDecimal { unscaled: CqlVarint::from(-1_234_567_i64), scale: 3 })),
            (T::Double, CqlValue::Double(3.25)),
            (T::Float, CqlValue::Float(-1.5)),
            (T::Int, CqlValue::Int(-7)),
            (T::Timestamp, CqlValue::Timestamp(CqlTimestamp(1_700_000_000_123))),
            (T::Uuid, CqlValue::Uuid(v4)),
            (T::Text, text("héllo wörld ✓")),
            (T::Varint, CqlValue::Varint(CqlVarint::from(-(1_i128 << 100) + 12_345))),
            (T::Timeuuid, CqlValue::Timeuuid(v1)),
            (T::Inet, CqlValue::Inet("2001:db8::1".parse().unwrap())),
            (T::Date, CqlValue::Date(CqlDate::from_ymd(2024, 2, 29).unwrap())),
            (T::Time, CqlValue::Time(CqlTime::from_hms_nano(13, 5, 9, 123_456_789).unwrap())),
            (T::SmallInt, CqlValue::SmallInt(-300)),
            (T::TinyInt, CqlValue::TinyInt(-5)),
            (T::Duration, CqlValue::Duration(CqlDuration { months: -14, days: -3, nanoseconds: -5_000_000_001 })),
            (T::List(Box::new(T::Int)), CqlValue::List(vec![CqlValue::Int(1), CqlValue::Int(2), CqlValue::Int(-3)])),
            (T::Set(Box::new(T::Text)), CqlValue::Set(vec![text("a"), text("b")])),
            (
                T::Map(Box::new(T::Text), Box::new(T::List(Box::new(T::BigInt)))),
                CqlValue::Map(vec![
                    (text("k1"), CqlValue::List(vec![CqlValue::BigInt(1), CqlValue::BigInt(2)])),
                    (text("k2"), CqlValue::List(vec![])),
                ]),
            ),
            (
                T::Udt {
                    keyspace: "ks".into(),
                    name: "address".into(),
                    fields: vec![("street".into(), T::Text), ("zip".into(), T::Int)],
                },
                CqlValue::Udt {
                    keyspace: "ks".into(),
                    name: "address".into(),
                    fields: vec![("street".into(), Some(text("Main St"))), ("zip".into(), None)],
                },
            ),
            (
                T::Tuple(vec![T::Int, T::Text, T::Boolean]),
                CqlValue::Tuple(vec![Some(CqlValue::Int(1)), None, Some(CqlValue::Boolean(false))]),
            ),
            (
                T::Vector(Box::new(T::Float), 3),
                CqlValue::Vector(vec![CqlValue::Float(1.0), CqlValue::Float(2.5), CqlValue::Float(-3.0)]),
            ),
            (T::Vector(Box::new(T::Text), 2), CqlValue::Vector(vec![text("x"), text("yz")])),
        ]
    }

    /// The serialized value, `[int]` length included, checking that
    /// `encoded_len` is exact.
    pub(crate) fn serialize(v: &(impl SerializeValue + ?Sized)) -> Vec<u8> {
        let len = v.encoded_len().unwrap();
        let mut out = Vec::with_capacity(len);
        v.encode(&mut out);
        assert_eq!(out.len(), len, "encoded_len is exact");
        out
    }

    pub(crate) fn deserialize(typ: &ColumnType, bytes: &[u8]) -> Result<CqlValue, DeserializeError> {
        let frame = Bytes::copy_from_slice(bytes);
        CqlValue::deserialize(typ, Some(FrameSlice::whole(&frame)))
    }

    /// Index of a `ColumnType` variant; exhaustive, so a new variant fails
    /// to compile until it is added here (and to the sample tables).
    fn type_variant(t: &ColumnType) -> usize {
        use ColumnType as T;
        match t {
            T::Custom(_) => 0,
            T::Ascii => 1,
            T::BigInt => 2,
            T::Blob => 3,
            T::Boolean => 4,
            T::Counter => 5,
            T::Decimal => 6,
            T::Double => 7,
            T::Float => 8,
            T::Int => 9,
            T::Timestamp => 10,
            T::Uuid => 11,
            T::Text => 12,
            T::Varint => 13,
            T::Timeuuid => 14,
            T::Inet => 15,
            T::Date => 16,
            T::Time => 17,
            T::SmallInt => 18,
            T::TinyInt => 19,
            T::Duration => 20,
            T::List(_) => 21,
            T::Map(..) => 22,
            T::Set(_) => 23,
            T::Udt { .. } => 24,
            T::Tuple(_) => 25,
            T::Vector(..) => 26,
        }
    }
    const TYPE_VARIANTS: usize = 27;

    #[test]
    fn sample_values_cover_every_type() {
        let values = sample_values();
        let types: Vec<ColumnType> = values.iter().map(|(t, _)| t.clone()).collect();
        assert_eq!(types, sample_types(), "sample_values follows sample_types");
        let mut seen = [false; TYPE_VARIANTS];
        for t in &types {
            seen[type_variant(t)] = true;
        }
        assert!(seen.iter().all(|s| *s), "every ColumnType variant has a sample: {seen:?}");
        // Every CqlValue variant but Empty appears too.
        let mut names: Vec<&str> = values.iter().map(|(_, v)| v.variant_name()).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), 28 - 1, "{names:?}");
    }

    #[test]
    fn every_sample_round_trips() {
        for (typ, value) in sample_values() {
            value.check_type(&typ).unwrap_or_else(|e| panic!("{typ}: {e}"));
            let bytes = serialize(&value);
            let len = i32::from_be_bytes(bytes[..4].try_into().unwrap());
            assert_eq!(len as usize, bytes.len() - 4, "{typ}");
            assert_eq!(deserialize(&typ, &bytes[4..]).as_ref(), Ok(&value), "{typ}");
            if let Some(size) = typ.fixed_size() {
                assert_eq!(bytes.len() - 4, size, "{typ} has a fixed size");
                assert_eq!(value.fixed_size(), Some(size), "{typ}");
            }
            // Null and Option.
            let null = serialize(&None::<CqlValue>);
            assert_eq!(null, (-1i32).to_be_bytes());
            let frame = Bytes::new();
            assert_eq!(Option::<CqlValue>::deserialize(&typ, None), Ok(None));
            assert!(matches!(CqlValue::deserialize(&typ, None), Err(DeserializeError::UnexpectedNull { .. })));
            let _ = frame;
        }
    }

    /// Ends of the complete `[bytes]` elements of a tuple or UDT value.
    fn field_boundaries(body: &[u8]) -> Vec<usize> {
        let mut r = Reader::new(body);
        let mut out = vec![0];
        while r.bytes("field").is_ok() {
            out.push(body.len() - r.remaining());
            if r.is_empty() {
                break;
            }
        }
        out
    }

    /// Whether a proper prefix of `p` bytes of a value may legitimately
    /// decode: zero bytes are the `Empty` value (or an empty string or blob);
    /// strings, blobs and custom values take any length; varints any
    /// non-zero length, decimals anything from their 4-byte scale plus one
    /// byte; the first 4 bytes of an IPv6 address are an IPv4 address; and
    /// tuples and UDTs may omit trailing fields. Vectors never may.
    fn prefix_may_decode(typ: &ColumnType, body: &[u8], p: usize) -> bool {
        use ColumnType as T;
        match typ {
            T::Vector(..) => false,
            _ if p == 0 => true,
            T::Ascii | T::Text | T::Blob | T::Custom(_) | T::Varint => true,
            T::Decimal => p >= 5,
            T::Inet => p == 4,
            T::Tuple(_) | T::Udt { .. } => field_boundaries(body).contains(&p),
            _ => false,
        }
    }

    #[test]
    fn every_proper_prefix_fails_unless_it_is_a_valid_shorter_value() {
        for (typ, value) in sample_values() {
            let bytes = serialize(&value);
            let body = &bytes[4..];
            for p in 0..body.len() {
                match deserialize(&typ, &body[..p]) {
                    Ok(v) => assert!(prefix_may_decode(&typ, body, p), "{typ}: prefix {p} decoded to {v:?}"),
                    Err(DeserializeError::Malformed { .. }) => {
                        // Text may be cut inside a character; nothing else that
                        // may decode should fail.
                        let may_fail = matches!(typ, ColumnType::Text) || !prefix_may_decode(&typ, body, p);
                        assert!(may_fail, "{typ}: prefix {p} should decode");
                    }
                    Err(e) => panic!("{typ}: prefix {p}: unexpected error {e}"),
                }
            }
        }
    }

    #[test]
    fn trailing_bytes_fail() {
        use ColumnType as T;
        for (typ, value) in sample_values() {
            // Values whose last part takes the rest of the bytes.
            if matches!(typ, T::Ascii | T::Text | T::Blob | T::Custom(_) | T::Varint | T::Decimal) {
                continue;
            }
            let mut bytes = serialize(&value);
            bytes.push(0);
            assert!(
                matches!(deserialize(&typ, &bytes[4..]), Err(DeserializeError::Malformed { .. })),
                "{typ} with a trailing byte"
            );
        }
    }

    #[test]
    fn trailing_bytes_inside_elements_fail() {
        use ColumnType as T;
        let int_list = T::List(Box::new(T::Int));
        // [1, <int of 5 bytes>]
        let body = [0, 0, 0, 2, 0, 0, 0, 4, 0, 0, 0, 1, 0, 0, 0, 5, 0, 0, 0, 2, 9];
        assert!(matches!(deserialize(&int_list, &body), Err(DeserializeError::Malformed { .. })));
        // A map whose value (a list) has a byte after its last element.
        let map = T::Map(Box::new(T::Text), Box::new(int_list.clone()));
        let body = [0, 0, 0, 1, 0, 0, 0, 1, b'k', 0, 0, 0, 13, 0, 0, 0, 1, 0, 0, 0, 4, 0, 0, 0, 7, 0];
        assert!(matches!(deserialize(&map, &body), Err(DeserializeError::Malformed { .. })));
        // A tuple element (bigint) of 9 bytes.
        let tuple = T::Tuple(vec![T::BigInt]);
        let body = [0, 0, 0, 9, 0, 0, 0, 0, 0, 0, 0, 0, 1];
        assert!(matches!(deserialize(&tuple, &body), Err(DeserializeError::Malformed { .. })));
        // A variable-size vector element with a bad inner value (text, invalid UTF-8).
        let vector = T::Vector(Box::new(T::Text), 1);
        assert!(matches!(deserialize(&vector, &[1, 0xff]), Err(DeserializeError::Malformed { .. })));
        // A hostile element count.
        let body = [0x7f, 0xff, 0xff, 0xff, 0, 0, 0, 0];
        assert!(matches!(deserialize(&int_list, &body), Err(DeserializeError::Malformed { .. })));
        let body = [0xff, 0xff, 0xff, 0xff];
        assert!(matches!(deserialize(&int_list, &body), Err(DeserializeError::Malformed { .. })));
    }

    #[test]
    fn values_only_match_their_types() {
        let samples = sample_values();
        for (vt, value) in &samples {
            for (typ, _) in &samples {
                let compatible = vt == typ
                    || matches!((vt, typ), (ColumnType::Ascii, ColumnType::Text))
                    || matches!((vt, typ), (ColumnType::Timeuuid, ColumnType::Uuid));
                let result = value.check_type(typ);
                assert_eq!(result.is_ok(), compatible, "{} as {typ}: {result:?}", value.variant_name());
            }
        }
        // Empty fits any type; text must be ASCII for ascii; a uuid must be
        // time-based for timeuuid.
        for t in sample_types() {
            assert_eq!(CqlValue::Empty.check_type(&t), Ok(()));
        }
        assert!(matches!(
            CqlValue::Text("é".into()).check_type(&ColumnType::Ascii),
            Err(EncodeError::InvalidValue { .. })
        ));
        assert_eq!(CqlValue::Text("e".into()).check_type(&ColumnType::Ascii), Ok(()));
        let v1 = Uuid::parse_str("8d2a6f3e-1dd2-11b2-8000-0242ac120002").unwrap();
        assert_eq!(CqlValue::Uuid(v1).check_type(&ColumnType::Timeuuid), Ok(()));
        // UDT values match by fields, may have fewer, not more or renamed ones.
        let udt = &samples.iter().find(|(t, _)| matches!(t, ColumnType::Udt { .. })).unwrap().0;
        let with = |fields: Vec<(&str, Option<CqlValue>)>| CqlValue::Udt {
            keyspace: "other_ks".into(),
            name: "other".into(),
            fields: fields.into_iter().map(|(n, v)| (n.to_owned(), v)).collect(),
        };
        assert_eq!(with(vec![("street", None)]).check_type(udt), Ok(()));
        assert!(with(vec![("zip", None)]).check_type(udt).is_err());
        assert!(with(vec![("street", None), ("zip", None), ("x", None)]).check_type(udt).is_err());
        assert!(with(vec![("street", Some(CqlValue::Int(1)))]).check_type(udt).is_err());
        // A vector with an Empty element does not fit a fixed-size vector.
        let vector = ColumnType::Vector(Box::new(ColumnType::Float), 1);
        assert!(CqlValue::Vector(vec![CqlValue::Empty]).check_type(&vector).is_err());
    }

    #[test]
    fn empty_values() {
        use ColumnType as T;
        for t in [T::Int, T::Varint, T::Decimal, T::Inet, T::Boolean, T::List(Box::new(T::Int))] {
            assert_eq!(deserialize(&t, &[]), Ok(CqlValue::Empty), "{t}");
        }
        assert_eq!(deserialize(&T::Text, &[]), Ok(CqlValue::Text(String::new())));
        assert_eq!(deserialize(&T::Blob, &[]), Ok(CqlValue::Blob(vec![])));
        assert!(deserialize(&T::Vector(Box::new(T::Int), 1), &[]).is_err());
        assert_eq!(serialize(&CqlValue::Empty), [0, 0, 0, 0]);
    }

    #[test]
    fn udt_and_tuple_values_may_have_fewer_fields() {
        let (udt, _) = sample_values().into_iter().find(|(t, _)| matches!(t, ColumnType::Udt { .. })).unwrap();
        let v = deserialize(&udt, &[0, 0, 0, 1, b'x']).unwrap();
        let CqlValue::Udt { fields, .. } = v else { panic!() };
        assert_eq!(fields, [("street".into(), Some(CqlValue::Text("x".into()))), ("zip".into(), None)]);
        let tuple = ColumnType::Tuple(vec![ColumnType::Int, ColumnType::Int]);
        assert_eq!(
            deserialize(&tuple, &[0, 0, 0, 4, 0, 0, 0, 9]),
            Ok(CqlValue::Tuple(vec![Some(CqlValue::Int(9)), None]))
        );
    }

    #[test]
    fn duration_encoding() {
        let d = CqlValue::Duration(CqlDuration { months: 1, days: 2, nanoseconds: 3 });
        assert_eq!(serialize(&d), [0, 0, 0, 3, 0x02, 0x04, 0x06], "the spec's example");
        let mixed = CqlValue::Duration(CqlDuration { months: 1, days: -2, nanoseconds: 0 });
        assert!(matches!(mixed.encoded_len(), Err(EncodeError::InvalidValue { .. })));
        let t = ColumnType::Duration;
        // 1 month, -2 days: mixed signs on the wire.
        assert!(matches!(deserialize(&t, &[0x02, 0x03, 0x00]), Err(DeserializeError::Malformed { .. })));
        // Months beyond i32.
        let mut body = Vec::new();
        crate::codec::put_vint(&mut body, i64::from(i32::MAX) + 1);
        body.extend([0, 0]);
        assert!(matches!(deserialize(&t, &body), Err(DeserializeError::Malformed { .. })));
    }

    #[test]
    fn varint_conversions() {
        let values = [
            0i128,
            1,
            -1,
            127,
            128,
            -128,
            -129,
            255,
            256,
            32767,
            -32768,
            i64::MAX as i128,
            i64::MIN as i128,
            u64::MAX as i128,
            i128::MAX,
            i128::MIN,
            1 << 100,
            -(1 << 100),
        ];
        for v in values {
            let x = CqlVarint::from(v);
            let bytes = x.as_signed_bytes_be();
            // Minimal: as many bytes as needed, no more.
            let bits = if v < 0 { 128 - (!v).leading_zeros() } else { 128 - v.leading_zeros() } + 1;
            assert_eq!(bytes.len(), (bits as usize).div_ceil(8), "{v}");
            assert_eq!(i128::try_from(&x), Ok(v));
            assert_eq!(i64::try_from(&x).ok(), i64::try_from(v).ok(), "{v}");
            assert_eq!(x.to_string(), v.to_string());
            assert_eq!(x.is_negative(), v < 0);
        }
        assert_eq!(CqlVarint::from(0).as_signed_bytes_be(), [0]);
        assert_eq!(CqlVarint::from(128).as_signed_bytes_be(), [0, 0x80]);
        assert_eq!(CqlVarint::from(-129).as_signed_bytes_be(), [0xff, 0x7f]);
        // Non-minimal input is normalized; empty is zero.
        assert_eq!(CqlVarint::from_signed_bytes_be(vec![0, 0, 0, 5]), CqlVarint::from(5));
        assert_eq!(CqlVarint::from_signed_bytes_be(vec![0xff, 0xff, 0x80]), CqlVarint::from(-128));
        assert_eq!(CqlVarint::from_signed_bytes_be(vec![]), CqlVarint::from(0));
        let big = CqlVarint::from_signed_bytes_be(vec![1; 17]);
        assert!(i128::try_from(&big).is_err());
        assert_eq!(
            CqlVarint::from_signed_bytes_be(vec![0x01, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]).to_string(),
            "340282366920938463463374607431768211456"
        );
    }

    /// Mutated sample encodings never panic, and whatever decodes
    /// re-encodes to bytes that decode to the same value.
    #[test]
    fn mutated_values_never_panic_and_round_trip() {
        let mut seed = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = move || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed
        };
        let mut decoded = 0;
        for (typ, value) in sample_values() {
            let body = serialize(&value)[4..].to_vec();
            for _ in 0..3000 {
                let mut b = body.clone();
                for _ in 0..=(next() % 3) {
                    let r = next() as usize;
                    match r % 4 {
                        0 if !b.is_empty() => {
                            let i = r / 4 % b.len();
                            b[i] ^= 1 << (r / 64 % 8);
                        }
                        1 if !b.is_empty() => {
                            let i = r / 4 % b.len();
                            b[i] = (r >> 16) as u8;
                        }
                        2 => b.insert(r / 4 % (b.len() + 1), (r >> 16) as u8),
                        _ if !b.is_empty() => {
                            b.remove(r / 4 % b.len());
                        }
                        _ => {}
                    }
                }
                let Ok(v) = deserialize(&typ, &b) else { continue };
                decoded += 1;
                let Ok(len) = v.encoded_len() else { continue };
                let mut out = Vec::with_capacity(len);
                v.encode(&mut out);
                assert_eq!(out.len(), len);
                assert_eq!(deserialize(&typ, &out[4..]).as_ref(), Ok(&v), "{typ}: {b:02x?}");
            }
        }
        assert!(decoded > 1000, "{decoded}");
    }

    #[test]
    fn floats_compare_by_bits() {
        use std::collections::HashSet;
        assert_eq!(CqlValue::Double(f64::NAN), CqlValue::Double(f64::NAN));
        assert_ne!(CqlValue::Float(0.0), CqlValue::Float(-0.0));
        assert_ne!(CqlValue::Int(1), CqlValue::BigInt(1));
        let set: HashSet<CqlValue> = sample_values().into_iter().map(|(_, v)| v).collect();
        assert_eq!(set.len(), sample_values().len());
        assert!(set.contains(&CqlValue::Float(-1.5)));
        // What decodes re-encodes to the same value, NaN included.
        let t = ColumnType::List(Box::new(ColumnType::Double));
        let nan = CqlValue::List(vec![CqlValue::Double(f64::NAN)]);
        assert_eq!(deserialize(&t, &serialize(&nan)[4..]), Ok(nan));
    }

    #[test]
    fn decimal_display() {
        let d = |unscaled: i64, scale: i32| CqlDecimal { unscaled: unscaled.into(), scale }.to_string();
        assert_eq!(d(-1_234_567, 3), "-1234.567");
        assert_eq!(d(5, 3), "0.005");
        assert_eq!(d(0, 2), "0.00");
        assert_eq!(d(12, -3), "12000");
        assert_eq!(d(12, 0), "12");
        assert_eq!(d(-12, 2), "-0.12");
        assert_eq!(d(7, 100), "7E-100");
        assert_eq!(d(7, -100), "7E+100");
        assert_eq!(d(7, i32::MIN), "7E+2147483648");
    }

    #[test]
    fn calendar() {
        assert_eq!(CqlDate::EPOCH.to_ymd(), (1970, 1, 1));
        assert_eq!(CqlDate::from_ymd(1970, 1, 1), Some(CqlDate::EPOCH));
        assert_eq!(CqlDate::from_ymd(2024, 2, 29).map(CqlDate::days_since_epoch), Some(19_782));
        assert_eq!(CqlDate::from_ymd(2023, 2, 29), None);
        assert_eq!(CqlDate::from_ymd(2023, 13, 1), None);
        assert_eq!(CqlDate::from_ymd(1900, 2, 29), None);
        assert_eq!(CqlDate::from_ymd(2000, 2, 29).map(CqlDate::to_ymd), Some((2000, 2, 29)));
        for days in [i32::MIN, -1_000_000, -719_468, -1, 0, 1, 59, 365, 1_000_000, i32::MAX] {
            let d = CqlDate::from_days_since_epoch(days);
            assert_eq!(d.days_since_epoch(), days);
            let (y, m, dd) = d.to_ymd();
            assert_eq!(CqlDate::from_ymd(y, m, dd), Some(d), "{days}");
        }
        assert_eq!(CqlDate(0).to_ymd(), (-5_877_641, 6, 23), "the spec's minimum date");
        assert_eq!(CqlTimestamp(-1).to_string(), "1969-12-31T23:59:59.999Z");
        assert_eq!(CqlTimestamp(1_700_000_000_123).to_string(), "2023-11-14T22:13:20.123Z");
        assert_eq!(CqlTime(0).to_string(), "00:00:00.000000000");
        assert_eq!(CqlTime::from_hms_nano(24, 0, 0, 0), None);
        assert!(!CqlTime(CqlTime::NANOS_PER_DAY).is_valid());
    }

    #[test]
    fn display_is_cql_literal_syntax() {
        let cases: Vec<(CqlValue, &str)> = sample_values()
            .into_iter()
            .map(|(_, v)| v)
            .zip([
                "0x010203",
                "'hello ''cql'''",
                "-1234567890123",
                "0x0001feff",
                "true",
                "42",
                "-1234.567",
                "3.25",
                "-1.5",
                "-7",
                "'2023-11-14T22:13:20.123Z'",
                "0f9b0e52-7b5c-4e9f-a1f4-3a8d1c2b5e6f",
                "'héllo wörld ✓'",
                "-1267650600228229401496703193031",
                "8d2a6f3e-1dd2-11b2-8000-0242ac120002",
                "'2001:db8::1'",
                "'2024-02-29'",
                "'13:05:09.123456789'",
                "-300",
                "-5",
                "-1y2mo3d5s1ns",
                "[1, 2, -3]",
                "{'a', 'b'}",
                "{'k1': [1, 2], 'k2': []}",
                "{street: 'Main St', zip: null}",
                "(1, null, false)",
                "[1.0, 2.5, -3.0]",
                "['x', 'yz']",
            ])
            .collect();
        assert_eq!(cases.len(), sample_values().len());
        for (v, s) in cases {
            assert_eq!(v.to_string(), s);
        }
        for (v, s) in [
            (CqlValue::Double(f64::NAN), "NaN"),
            (CqlValue::Float(f32::NEG_INFINITY), "-Infinity"),
            (CqlValue::Double(1e-7), "1e-7"),
            (CqlValue::Empty, "0x"),
            (CqlValue::Duration(CqlDuration::default()), "0s"),
            (CqlValue::Duration(CqlDuration { months: 0, days: 0, nanoseconds: 3_723_004_005_006 }), "1h2m3s4ms5us6ns"),
            (CqlValue::Duration(CqlDuration { months: 1, days: -1, nanoseconds: 0 }), "1mo-1d0ns"),
            (CqlValue::Date(CqlDate(0)), "0"),
            (CqlValue::Time(CqlTime(-1)), "-1"),
            (CqlValue::Timestamp(CqlTimestamp(i64::MAX)), "9223372036854775807"),
            (CqlValue::Inet("10.0.0.1".parse().unwrap()), "'10.0.0.1'"),
            (
                CqlValue::Udt {
                    keyspace: "ks".into(),
                    name: "t".into(),
                    fields: vec![("Mixed\"Case".into(), Some(CqlValue::Int(1)))],
                },
                "{\"Mixed\"\"Case\": 1}",
            ),
        ] {
            assert_eq!(v.to_string(), s);
        }
    }
}
