//! Cassandra's comparator on serialized values (clustering order, set and
//! map order).

use super::*;

/// Cassandra's comparator on serialized values of `typ`: signed integers,
/// bytewise text, blobs, addresses and booleans, `Double.compare` order for
/// floats (−0 < 0, NaN last), UUIDs as `UUIDType` (version, then time for
/// version 1, then bytes unsigned) and timeuuids as `TimeUUIDType` (time,
/// then the low 8 bytes as signed bytes), biased dates unsigned, varints and
/// decimals numerically, collections, tuples, UDTs and vectors element-wise
/// (then by size). Empty values sort first. Malformed values compare
/// bytewise (never a panic).
pub fn compare(typ: &ColumnType, a: &[u8], b: &[u8]) -> Ordering {
    if a.is_empty() || b.is_empty() {
        return a.len().cmp(&b.len());
    }
    typed_cmp(typ, a, b).unwrap_or_else(|| a.cmp(b))
}

/// [`compare`] for non-empty values; `None` if one is malformed.
fn typed_cmp(typ: &ColumnType, a: &[u8], b: &[u8]) -> Option<Ordering> {
    use ColumnType as T;
    Some(match typ {
        T::TinyInt | T::SmallInt | T::Int | T::BigInt | T::Counter | T::Timestamp | T::Time | T::Varint => {
            varint_cmp(a, b)
        }
        T::Double => java_cmp(f64::from_be_bytes(a.try_into().ok()?), f64::from_be_bytes(b.try_into().ok()?)),
        T::Float => {
            java_cmp(f32::from_be_bytes(a.try_into().ok()?).into(), f32::from_be_bytes(b.try_into().ok()?).into())
        }
        T::Uuid | T::Timeuuid => uuid_cmp(a.try_into().ok()?, b.try_into().ok()?, *typ == T::Timeuuid),
        T::Decimal => decimal_key(a)?.cmp_with(&decimal_key(b)?),
        T::List(e) | T::Set(e) => {
            let (x, y) = (collection_elements(a).ok()?, collection_elements(b).ok()?);
            let pairs = x.iter().zip(&y).map(|(p, q)| option_cmp(e, *p, *q));
            pairs.fold(Ordering::Equal, Ordering::then).then(x.len().cmp(&y.len()))
        }
        T::Map(kt, vt) => {
            let (x, y) = (collection_entries(a).ok()?, collection_entries(b).ok()?);
            let pairs = x.iter().zip(&y).map(|(p, q)| compare(kt, p.0, q.0).then_with(|| option_cmp(vt, p.1, q.1)));
            pairs.fold(Ordering::Equal, Ordering::then).then(x.len().cmp(&y.len()))
        }
        T::Tuple(ts) => fields_cmp(a, b, |i| ts.get(i))?,
        T::Udt { fields, .. } => fields_cmp(a, b, |i| fields.get(i).map(|(_, t)| t))?,
        T::Vector(e, n) => {
            let (x, y) = (vector_elements(e, *n, a)?, vector_elements(e, *n, b)?);
            x.iter().zip(&y).map(|(p, q)| compare(e, p, q)).fold(Ordering::Equal, Ordering::then)
        }
        // Bytewise: text, ascii, blob, inet, boolean, date (biased), duration, custom.
        _ => a.cmp(b),
    })
}

fn option_cmp(typ: &ColumnType, a: Option<&[u8]>, b: Option<&[u8]>) -> Ordering {
    match (a, b) {
        (Some(a), Some(b)) => compare(typ, a, b),
        _ => a.is_some().cmp(&b.is_some()),
    }
}

/// Two's-complement big-endian integers of any length.
fn varint_cmp(a: &[u8], b: &[u8]) -> Ordering {
    let negative = |x: &[u8]| x[0] & 0x80 != 0;
    fn trim(mut x: &[u8]) -> &[u8] {
        while x.len() > 1 && ((x[0] == 0 && x[1] & 0x80 == 0) || (x[0] == 0xff && x[1] & 0x80 != 0)) {
            x = &x[1..];
        }
        x
    }
    match (negative(a), negative(b)) {
        (true, false) => Ordering::Less,
        (false, true) => Ordering::Greater,
        (neg, _) => {
            let (a, b) = (trim(a), trim(b));
            match a.len().cmp(&b.len()) {
                Ordering::Equal => a.cmp(b),
                longer if neg => longer.reverse(),
                longer => longer,
            }
        }
    }
}

/// Java's `Double.compare`: numeric, then −0 < 0 and NaN above everything.
fn java_cmp(a: f64, b: f64) -> Ordering {
    let bits = |v: f64| if v.is_nan() { 0x7ff8_0000_0000_0000_i64 } else { v.to_bits() as i64 };
    a.partial_cmp(&b).filter(|o| o.is_ne()).unwrap_or_else(|| bits(a).cmp(&bits(b)))
}

fn uuid_cmp(a: [u8; 16], b: [u8; 16], time_uuid: bool) -> Ordering {
    let halves = |u: [u8; 16]| (u128::from_be_bytes(u) >> 64) as u64;
    let (am, bm) = (halves(a), halves(b));
    let (al, bl) = (u128::from_be_bytes(a) as u64, u128::from_be_bytes(b) as u64);
    // time_hi, time_mid, time_low: the 60-bit timestamp (version on top).
    let time = |m: u64| ((m << 48) | ((m << 16) & 0xFFFF_0000_0000) | (m >> 32)) as i64;
    let version = |m: u64| (m >> 12) & 0xf;
    if time_uuid {
        let signed_bytes = |l: u64| (l ^ 0x0080_8080_8080_8080) as i64;
        return time(am).cmp(&time(bm)).then(signed_bytes(al).cmp(&signed_bytes(bl)));
    }
    let high = match version(am).cmp(&version(bm)) {
        Ordering::Equal if version(am) == 1 => time(am).cmp(&time(bm)),
        Ordering::Equal => am.cmp(&bm),
        other => other,
    };
    high.then(al.cmp(&bl))
}

/// A decimal as sign, exponent and significant digits: the value is
/// `sign × 0.digits × 10^exponent` (digits without trailing zeros).
struct DecimalKey {
    sign: i8,
    exponent: i64,
    digits: String,
}

impl DecimalKey {
    fn cmp_with(&self, other: &DecimalKey) -> Ordering {
        let magnitude = || (self.exponent, &self.digits).cmp(&(other.exponent, &other.digits));
        match self.sign.cmp(&other.sign) {
            Ordering::Equal if self.sign == 0 => Ordering::Equal,
            Ordering::Equal if self.sign < 0 => magnitude().reverse(),
            Ordering::Equal => magnitude(),
            other => other,
        }
    }
}

fn decimal_key(b: &[u8]) -> Option<DecimalKey> {
    let scale = i32::from_be_bytes(b.get(..4)?.try_into().ok()?);
    let unscaled = b.get(4..).filter(|u| !u.is_empty())?;
    let text = CqlVarint::from_signed_bytes_be_slice(unscaled).to_string();
    let (negative, all) = text.strip_prefix('-').map_or((false, text.as_str()), |d| (true, d));
    let digits = all.trim_end_matches('0');
    if digits.is_empty() {
        return Some(DecimalKey { sign: 0, exponent: 0, digits: String::new() });
    }
    Some(DecimalKey {
        sign: if negative { -1 } else { 1 },
        exponent: all.len() as i64 - i64::from(scale),
        digits: digits.to_string(),
    })
}

/// Tuples and UDTs: field by field, null first; a value with fewer fields
/// sorts first.
fn fields_cmp<'t>(a: &[u8], b: &[u8], types: impl Fn(usize) -> Option<&'t ColumnType>) -> Option<Ordering> {
    let (mut x, mut y) = (Reader::new(a), Reader::new(b));
    let mut i = 0;
    while !x.is_empty() && !y.is_empty() {
        let (p, q) = (x.bytes("field").ok()?, y.bytes("field").ok()?);
        let o = match types(i) {
            Some(t) => option_cmp(t, p, q),
            None => p.cmp(&q),
        };
        if o.is_ne() {
            return Some(o);
        }
        i += 1;
    }
    Some(y.is_empty().cmp(&x.is_empty()))
}

/// The elements of a serialized vector (fixed-size ones without lengths,
/// others with an unsigned vint length).
fn vector_elements<'a>(elem: &ColumnType, n: u32, bytes: &'a [u8]) -> Option<Vec<&'a [u8]>> {
    if let Some(size) = elem.fixed_size() {
        return (size > 0 && Some(bytes.len()) == size.checked_mul(n as usize)).then(|| bytes.chunks(size).collect());
    }
    let mut r = Reader::new(bytes);
    let mut out = Vec::new();
    for _ in 0..n {
        let len = usize::try_from(r.unsigned_vint("vector element").ok()?).ok()?;
        out.push(r.take(len, "vector element").ok()?);
    }
    r.is_empty().then_some(out)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::super::testing::*;
    use super::*;

    #[test]
    fn comparator_orders_like_cassandra() {
        let sorted = |typ: &ColumnType, values: &[&str]| {
            let b: Vec<Vec<u8>> = values.iter().map(|v| bytes(v, typ)).collect();
            for i in 0..b.len() {
                for j in 0..b.len() {
                    assert_eq!(compare(typ, &b[i], &b[j]), i.cmp(&j), "{typ}: {} vs {}", values[i], values[j]);
                }
            }
        };
        sorted(&T::Int, &["-2147483648", "-1", "0", "1", "2147483647"]);
        sorted(&T::BigInt, &["-9223372036854775808", "-256", "-1", "0", "255", "9223372036854775807"]);
        sorted(&T::TinyInt, &["-128", "-1", "0", "127"]);
        sorted(&T::Timestamp, &["-1", "0", "'2011-02-03'"]);
        sorted(&T::Time, &["0", "'00:00:01'", "'23:59:59.999999999'"]);
        sorted(
            &T::Varint,
            &["-100000000000000000000", "-129", "-128", "-1", "0", "1", "127", "128", "100000000000000000000"],
        );
        sorted(&T::Decimal, &["-1e10", "-1.5", "-1.25", "-0.001", "0", "0.001", "0.5", "1", "1.05", "10", "1e10"]);
        sorted(&T::Double, &["-Infinity", "-1e300", "-1", "-0.0", "0.0", "1e-300", "1", "Infinity", "NaN"]);
        sorted(&T::Float, &["-Infinity", "-1", "-0.0", "0", "1", "Infinity", "NaN"]);
        sorted(&T::Text, &["''", "'A'", "'B'", "'a'", "'ab'", "'b'", "'é'"]);
        sorted(&T::Blob, &["0x", "0x00", "0x0000", "0x01", "0xff"]);
        sorted(&T::Boolean, &["false", "true"]);
        sorted(&T::Inet, &["'::1'", "'1.2.3.4'", "'9.0.0.0'"]);
        sorted(&T::Date, &["'-0044-03-15'", "'1969-12-31'", "'1970-01-01'", "'2024-02-29'"]);
        // Time-based UUIDs by time; other versions after version 1, by bytes (unsigned).
        sorted(
            &T::Uuid,
            &[
                "ffffffff-ffff-1000-8000-000000000000",
                "00000000-0000-1001-0000-000000000000",
                "00000000-0000-1001-ff00-000000000000",
                "00000000-0000-4000-8000-000000000000",
                "ffffffff-0000-4000-8000-000000000000",
            ],
        );
        // Timeuuids: by time (including the 100-ns digit), then low bytes as signed bytes.
        sorted(
            &T::Timeuuid,
            &[
                "00000001-0000-1000-ff00-000000000000",
                "00000001-0000-1000-0000-000000000000",
                "00000001-0000-1000-7f00-000000000000",
                "00000002-0000-1000-8000-000000000000",
                "00000000-0001-1000-8000-000000000000",
                "00000000-0000-1001-8000-000000000000",
            ],
        );
        sorted(&T::List(Box::new(T::Int)), &["[-1]", "[-1, 0]", "[1]", "[1, -5]", "[2]"]);
        sorted(&T::Map(Box::new(T::Int), Box::new(T::Int)), &["{1: 1}", "{1: 2}", "{1: 2, 3: 9}", "{2: 0}"]);
        sorted(&T::Tuple(vec![T::Int, T::Text]), &["(-1)", "(-1, null)", "(-1, 'a')", "(1, null)", "(1, 'a')"]);
        sorted(&ut(), &["{a: null}", "{a: -1}", "{a: 1, b: 'a'}", "{a: 1, b: 'b'}"]);
        sorted(&T::Vector(Box::new(T::Float), 2), &["[-1, 5]", "[0, -1]", "[0, 0]"]);
        sorted(&T::Vector(Box::new(T::Text), 2), &["['a', 'z']", "['b', '']", "['b', 'a']"]);
        // Empty values first; malformed values bytewise, never a panic.
        assert_eq!(compare(&T::Int, &[], &[0x80, 0, 0, 0]), Ordering::Less);
        assert_eq!(compare(&T::Int, &[], &[]), Ordering::Equal);
        for typ in [
            T::Double,
            T::Float,
            T::Uuid,
            T::Timeuuid,
            T::Decimal,
            T::List(Box::new(T::Int)),
            T::Map(Box::new(T::Int), Box::new(T::Int)),
            T::Tuple(vec![T::Int]),
            T::Vector(Box::new(T::Int), 2),
            T::Vector(Box::new(T::Text), 2),
        ] {
            assert_eq!(compare(&typ, &[1, 2, 3], &[1, 2, 4]), Ordering::Less, "{typ}");
            assert_eq!(compare(&typ, &[0xff], &[0xff]), Ordering::Equal, "{typ}");
        }
    }
}
