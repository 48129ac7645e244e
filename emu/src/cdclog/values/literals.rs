//! Literals and terms to serialized values of a column's type, and the few
//! functions a write may call (`now()`, `uuid()`, ...).

use super::*;

/// Serializes a literal as a value of `typ` (`None` for `null`). Literals
/// are accepted as Cassandra accepts them: integers for integer, float,
/// decimal, timestamp, date and time types; strings for text, timestamps,
/// dates, times and addresses; `{}` for empty sets, maps and UDTs. Function
/// calls `now()`, `currentTimeUUID()`, `uuid()`, `currentTimestamp()`,
/// `currentDate()`, `currentTime()`, `toTimestamp(now())`, `toDate(now())`
/// and `toUnixTimestamp(now())` are evaluated here, to fresh values (a front
/// must substitute them into the base write too for the log to match).
/// Bind markers inside the literal are [`ValueError::Unsupported`]: see
/// [`term_bytes`].
pub fn literal_bytes(lit: &Literal, typ: &ColumnType) -> Result<Option<Vec<u8>>, ValueError> {
    literal(lit, typ, &|_| Err(ValueError::Unsupported("a bind marker inside a literal".into())))
}

/// Serializes a term as a value of `typ`, taking the values of bind
/// markers (also those nested in literals) from `bound` (serialized, `None`
/// for null); bound sets and maps are [normalized](normalize).
pub fn term_bytes(term: &Term, typ: &ColumnType, bound: &BoundValues<'_>) -> Result<Option<Vec<u8>>, ValueError> {
    match term {
        Term::Bind(m) => bound(m)?.map(|b| normalize(typ, &b)).transpose(),
        Term::Literal(lit) => literal(lit, typ, bound),
    }
}

fn describe(lit: &Literal) -> &'static str {
    match lit {
        Literal::Null => "null",
        Literal::Bool(_) => "a boolean",
        Literal::Integer(_) => "an integer",
        Literal::Float(_) => "a float",
        Literal::String(_) => "a string",
        Literal::Uuid(_) => "a UUID",
        Literal::Blob(_) => "a blob",
        Literal::Duration(_) => "a duration",
        Literal::List(_) => "a list",
        Literal::Set(_) => "a set",
        Literal::Map(_) => "a map",
        Literal::Udt(_) => "a UDT literal",
        Literal::Tuple(_) => "a tuple",
        Literal::Function { .. } => "a function call",
    }
}

fn literal(lit: &Literal, typ: &ColumnType, bound: &BoundValues<'_>) -> Result<Option<Vec<u8>>, ValueError> {
    use ColumnType as T;
    use Literal as L;
    let number = |s: &str| -> Result<i128, ValueError> {
        s.parse::<i128>().map_err(|_| invalid(typ, format!("{s} is out of range")))
    };
    let fit = |s: &str, min: i128, max: i128| -> Result<i128, ValueError> {
        number(s).and_then(|n| {
            if (min..=max).contains(&n) {
                Ok(n)
            } else {
                Err(invalid(typ, format!("{s} is out of range")))
            }
        })
    };
    let value = match (lit, typ) {
        (L::Null, _) => return Ok(None),
        (L::Function { name, args }, _) => return function(name, args, typ).map(Some),
        (L::String(s), T::Ascii) if !s.is_ascii() => return Err(invalid(typ, "non-ASCII characters")),
        (L::String(s), T::Ascii) => CqlValue::Ascii(s.clone()),
        (L::String(s), T::Text) => CqlValue::Text(s.clone()),
        (L::Integer(s), T::BigInt) => CqlValue::BigInt(fit(s, i64::MIN.into(), i64::MAX.into())? as i64),
        (L::Integer(s), T::Counter) => CqlValue::Counter(fit(s, i64::MIN.into(), i64::MAX.into())? as i64),
        (L::Integer(s), T::Int) => CqlValue::Int(fit(s, i32::MIN.into(), i32::MAX.into())? as i32),
        (L::Integer(s), T::SmallInt) => CqlValue::SmallInt(fit(s, i16::MIN.into(), i16::MAX.into())? as i16),
        (L::Integer(s), T::TinyInt) => CqlValue::TinyInt(fit(s, i8::MIN.into(), i8::MAX.into())? as i8),
        (L::Integer(s), T::Varint) => {
            CqlValue::Varint(parse_varint(s).ok_or_else(|| invalid(typ, format!("{s} is not an integer")))?)
        }
        (L::Integer(s) | L::Float(s), T::Decimal) => {
            CqlValue::Decimal(parse_decimal(s).ok_or_else(|| invalid(typ, format!("{s} is not a decimal number")))?)
        }
        (L::Integer(s) | L::Float(s), T::Double) => {
            CqlValue::Double(s.parse().map_err(|_| invalid(typ, format!("{s} is not a number")))?)
        }
        (L::Integer(s) | L::Float(s), T::Float) => {
            CqlValue::Float(s.parse().map_err(|_| invalid(typ, format!("{s} is not a number")))?)
        }
        (L::Bool(b), T::Boolean) => CqlValue::Boolean(*b),
        (L::Uuid(s), T::Uuid | T::Timeuuid) => {
            let u = Uuid::parse_str(s).map_err(|e| invalid(typ, e.to_string()))?;
            if *typ == T::Timeuuid {
                CqlValue::Timeuuid(u)
            } else {
                CqlValue::Uuid(u)
            }
        }
        (L::Integer(s), T::Timestamp) => {
            CqlValue::Timestamp(CqlTimestamp(fit(s, i64::MIN.into(), i64::MAX.into())? as i64))
        }
        (L::String(s), T::Timestamp) => CqlValue::Timestamp(CqlTimestamp(
            parse_timestamp(s).ok_or_else(|| invalid(typ, format!("unable to parse '{s}'")))?,
        )),
        (L::Integer(s), T::Date) => CqlValue::Date(CqlDate(fit(s, 0, u32::MAX.into())? as u32)),
        (L::String(s), T::Date) => {
            CqlValue::Date(parse_date(s).ok_or_else(|| invalid(typ, format!("unable to parse '{s}'")))?)
        }
        (L::Integer(s), T::Time) => CqlValue::Time(CqlTime(fit(s, 0, (CqlTime::NANOS_PER_DAY - 1).into())? as i64)),
        (L::String(s), T::Time) => {
            CqlValue::Time(parse_time(s).ok_or_else(|| invalid(typ, format!("unable to parse '{s}'")))?)
        }
        (L::String(s), T::Inet) => {
            CqlValue::Inet(s.parse::<IpAddr>().map_err(|_| invalid(typ, format!("'{s}' is not an address")))?)
        }
        (L::Blob(b), T::Blob | T::Custom(_)) => return Ok(Some(b.clone())),
        (L::Duration(s), T::Duration) => CqlValue::Duration(parse_duration(s).map_err(|e| invalid(typ, e))?),
        (L::List(items), T::List(e)) => {
            return Ok(Some(build_collection(elements(items, e, bound)?.iter().map(|v| &v[..]))))
        }
        (L::Set(items), T::Set(e)) => return Ok(Some(build_set(e, elements(items, e, bound)?.iter().map(|v| &v[..])))),
        (L::Map(entries), T::Set(_)) if entries.is_empty() => return Ok(Some(build_collection([]))),
        (L::Map(entries), T::Map(kt, vt)) => {
            let mut pairs = Vec::with_capacity(entries.len());
            for (k, v) in entries {
                pairs.push((element(k, kt, bound)?, element(v, vt, bound)?));
            }
            return Ok(Some(build_sorted_map(kt, pairs.iter().map(|(k, v)| (&k[..], &v[..])))));
        }
        (L::Map(entries), T::Udt { fields, .. }) if entries.is_empty() => {
            return Ok(Some(build_udt(&vec![None; fields.len()])))
        }
        (L::Udt(given), T::Udt { fields, .. }) => {
            for (i, (name, _)) in given.iter().enumerate() {
                if !fields.iter().any(|(f, _)| f == name) {
                    return Err(invalid(typ, format!("unknown field {name}")));
                }
                if given[..i].iter().any(|(n, _)| n == name) {
                    return Err(invalid(typ, format!("field {name} given twice")));
                }
            }
            let mut values = Vec::with_capacity(fields.len());
            for (name, ft) in fields {
                values.push(match given.iter().find(|(n, _)| n == name) {
                    Some((_, t)) => term_bytes(t, ft, bound)?,
                    None => None,
                });
            }
            return Ok(Some(build_udt(&values.iter().map(Option::as_deref).collect::<Vec<_>>())));
        }
        (L::Tuple(items), T::Tuple(types)) => {
            if items.len() > types.len() {
                return Err(invalid(typ, format!("{} elements for {} components", items.len(), types.len())));
            }
            let mut out = Vec::new();
            for (t, ct) in items.iter().zip(types) {
                codec::put_bytes(&mut out, term_bytes(t, ct, bound)?.as_deref());
            }
            return Ok(Some(out));
        }
        (L::List(items), T::Vector(e, n)) => {
            if items.len() != *n as usize {
                return Err(invalid(typ, format!("{} elements for dimension {n}", items.len())));
            }
            let mut out = Vec::new();
            for v in elements(items, e, bound)? {
                match e.fixed_size() {
                    Some(size) if v.len() != size => return Err(invalid(typ, format!("element of {} bytes", v.len()))),
                    Some(_) => {}
                    None => codec::put_unsigned_vint(&mut out, v.len() as u64),
                }
                out.extend_from_slice(&v);
            }
            return Ok(Some(out));
        }
        _ => return Err(invalid(typ, format!("{} is not a {typ} literal", describe(lit)))),
    };
    cql_bytes(&value, typ).map(Some)
}

/// A non-null element of a collection.
fn element(t: &Term, typ: &ColumnType, bound: &BoundValues<'_>) -> Result<Vec<u8>, ValueError> {
    term_bytes(t, typ, bound)?.ok_or_else(|| invalid(typ, "null is not supported inside collections"))
}

fn elements(items: &[Term], typ: &ColumnType, bound: &BoundValues<'_>) -> Result<Vec<Vec<u8>>, ValueError> {
    items.iter().map(|t| element(t, typ, bound)).collect()
}

/// The serialized value (without its length) through the protocol crate.
pub(super) fn cql_bytes(v: &CqlValue, typ: &ColumnType) -> Result<Vec<u8>, ValueError> {
    let bad = |e: shardwise_protocol::EncodeError| invalid(typ, e.to_string());
    v.check_type(typ).map_err(bad)?;
    let mut out = Vec::with_capacity(v.encoded_len().map_err(bad)?);
    v.encode(&mut out);
    out.drain(..4.min(out.len()));
    Ok(out)
}

fn function(name: &str, args: &[Term], typ: &ColumnType) -> Result<Vec<u8>, ValueError> {
    let short = |n: &str| n.strip_prefix("system.").unwrap_or(n).to_string();
    let is_now = |t: &Term| {
        matches!(t, Term::Literal(Literal::Function { name, args })
            if args.is_empty() && matches!(short(name).as_str(), "now" | "currenttimeuuid"))
    };
    let micros = now_micros();
    let ms = micros.div_euclid(1000);
    let name = short(name);
    let value = match (name.as_str(), args) {
        ("now" | "currenttimeuuid", []) => CqlValue::Timeuuid(Uuid::from_bytes(timeuuid_from_micros(micros, random()))),
        ("uuid", []) => {
            let mut b = [0u8; 16];
            b[..8].copy_from_slice(&random().to_be_bytes());
            b[8..].copy_from_slice(&random().to_be_bytes());
            b[6] = (b[6] & 0x0f) | 0x40;
            b[8] = (b[8] & 0x3f) | 0x80;
            CqlValue::Uuid(Uuid::from_bytes(b))
        }
        ("currenttimestamp", []) => CqlValue::Timestamp(CqlTimestamp(ms)),
        ("totimestamp", [a]) if is_now(a) => CqlValue::Timestamp(CqlTimestamp(ms)),
        ("tounixtimestamp", [a]) if is_now(a) => CqlValue::BigInt(ms),
        ("currentdate", []) => CqlValue::Date(CqlDate::from_days_since_epoch(ms.div_euclid(86_400_000) as i32)),
        ("todate", [a]) if is_now(a) => {
            CqlValue::Date(CqlDate::from_days_since_epoch(ms.div_euclid(86_400_000) as i32))
        }
        ("currenttime", []) => CqlValue::Time(CqlTime(micros.rem_euclid(86_400_000_000) * 1000)),
        _ => return Err(ValueError::Unsupported(format!("function {name}()"))),
    };
    cql_bytes(&value, typ)
}

fn now_micros() -> i64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_micros() as i64).unwrap_or(0)
}

fn random() -> u64 {
    crate::generation::random_source()()
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::super::testing::*;
    use super::*;

    #[test]
    fn scalar_literals_round_trip_through_the_protocol_crate() {
        let uuid = Uuid::parse_str("123e4567-e89b-12d3-a456-426614174000").unwrap();
        let v1 = Uuid::parse_str("b223c55e-6d07-11ea-7654-24e4fb3f20b9").unwrap();
        let cases: Vec<(&str, ColumnType, CqlValue)> = vec![
            ("'abc'", T::Ascii, CqlValue::Ascii("abc".into())),
            ("'héllo ''✓'''", T::Text, CqlValue::Text("héllo '✓'".into())),
            ("$$x$$", T::Text, CqlValue::Text("x".into())),
            ("-9223372036854775808", T::BigInt, CqlValue::BigInt(i64::MIN)),
            ("42", T::Counter, CqlValue::Counter(42)),
            ("-2147483648", T::Int, CqlValue::Int(i32::MIN)),
            ("32767", T::SmallInt, CqlValue::SmallInt(32767)),
            ("-128", T::TinyInt, CqlValue::TinyInt(-128)),
            ("1.5", T::Double, CqlValue::Double(1.5)),
            ("7", T::Double, CqlValue::Double(7.0)),
            ("-2.5e-3", T::Float, CqlValue::Float(-2.5e-3)),
            ("Infinity", T::Double, CqlValue::Double(f64::INFINITY)),
            ("-Infinity", T::Float, CqlValue::Float(f32::NEG_INFINITY)),
            ("NaN", T::Double, CqlValue::Double(f64::NAN)),
            ("true", T::Boolean, CqlValue::Boolean(true)),
            ("123e4567-e89b-12d3-a456-426614174000", T::Uuid, CqlValue::Uuid(uuid)),
            ("b223c55e-6d07-11ea-7654-24e4fb3f20b9", T::Timeuuid, CqlValue::Timeuuid(v1)),
            ("1299038700000", T::Timestamp, CqlValue::Timestamp(CqlTimestamp(1_299_038_700_000))),
            ("'2011-02-03 04:05+0000'", T::Timestamp, CqlValue::Timestamp(CqlTimestamp(1_296_705_900_000))),
            ("'2011-02-03T04:05:00.000Z'", T::Timestamp, CqlValue::Timestamp(CqlTimestamp(1_296_705_900_000))),
            (
                "'2011-02-03T04:05:06.789+01:00'",
                T::Timestamp,
                CqlValue::Timestamp(CqlTimestamp(1_296_705_906_789 - 3_600_000)),
            ),
            (
                "'2011-02-03 04:05:06 -0130'",
                T::Timestamp,
                CqlValue::Timestamp(CqlTimestamp(1_296_705_906_000 + 5_400_000)),
            ),
            ("'2011-02-03'", T::Timestamp, CqlValue::Timestamp(CqlTimestamp(1_296_691_200_000))),
            ("'1969-12-31 23:59:59.999 UTC'", T::Timestamp, CqlValue::Timestamp(CqlTimestamp(-1))),
            ("'1299038700000'", T::Timestamp, CqlValue::Timestamp(CqlTimestamp(1_299_038_700_000))),
            ("'1970-01-01'", T::Date, CqlValue::Date(CqlDate::EPOCH)),
            ("'2024-02-29'", T::Date, CqlValue::Date(CqlDate::from_ymd(2024, 2, 29).unwrap())),
            ("'-0044-03-15'", T::Date, CqlValue::Date(CqlDate::from_ymd(-44, 3, 15).unwrap())),
            ("2147483648", T::Date, CqlValue::Date(CqlDate::EPOCH)),
            ("'13:05:09.123456789'", T::Time, CqlValue::Time(CqlTime::from_hms_nano(13, 5, 9, 123_456_789).unwrap())),
            ("'08:12:54.1'", T::Time, CqlValue::Time(CqlTime::from_hms_nano(8, 12, 54, 100_000_000).unwrap())),
            ("'00:00:01'", T::Time, CqlValue::Time(CqlTime(1_000_000_000))),
            ("86399999999999", T::Time, CqlValue::Time(CqlTime(86_399_999_999_999))),
            ("'192.168.0.1'", T::Inet, CqlValue::Inet("192.168.0.1".parse().unwrap())),
            ("'2001:db8::1'", T::Inet, CqlValue::Inet("2001:db8::1".parse().unwrap())),
            ("0xcafe", T::Blob, CqlValue::Blob(vec![0xca, 0xfe])),
            ("0x", T::Blob, CqlValue::Blob(vec![])),
            ("0x01", T::Custom("x.Y".into()), CqlValue::Custom(vec![1])),
            (
                "-12345678901234567890123456789",
                T::Varint,
                CqlValue::Varint(CqlVarint::from(-12_345_678_901_234_567_890_123_456_789_i128)),
            ),
            ("-12.345e3", T::Decimal, CqlValue::Decimal(CqlDecimal { unscaled: CqlVarint::from(-12345), scale: 0 })),
            ("0.001", T::Decimal, CqlValue::Decimal(CqlDecimal { unscaled: CqlVarint::from(1), scale: 3 })),
            ("1e3", T::Decimal, CqlValue::Decimal(CqlDecimal { unscaled: CqlVarint::from(1), scale: -3 })),
            ("1.50", T::Decimal, CqlValue::Decimal(CqlDecimal { unscaled: CqlVarint::from(150), scale: 2 })),
            ("7", T::Decimal, CqlValue::Decimal(CqlDecimal { unscaled: CqlVarint::from(7), scale: 0 })),
        ];
        for (text, typ, want) in cases {
            assert_eq!(value(text, &typ), want, "{text} as {typ}");
        }
        assert_eq!(literal_bytes(&Literal::Null, &T::Int), Ok(None));
        assert_eq!(bytes("1", &T::Int), [0, 0, 0, 1]);
        // Doubles keep the sign of zero and the exact NaN Java writes.
        assert_eq!(bytes("-0.0", &T::Double), (-0.0f64).to_be_bytes());
    }

    #[test]
    fn bad_literals_are_errors() {
        let literal_errors = [
            ("128", T::TinyInt),
            ("-32769", T::SmallInt),
            ("2147483648", T::Int),
            ("9223372036854775808", T::BigInt),
            ("99999999999999999999999999999999999999999", T::BigInt),
            ("1.5", T::Int),
            ("'1'", T::Int),
            ("1", T::Text),
            ("'é'", T::Ascii),
            ("NaN", T::Decimal),
            ("Infinity", T::Decimal),
            ("0f9b0e52-7b5c-4e9f-a1f4-3a8d1c2b5e6f", T::Timeuuid),
            ("'2011-02-30'", T::Date),
            ("'2011-02-03 25:00'", T::Timestamp),
            ("'2011-02-03 04:05 +99'", T::Timestamp),
            ("'2011-02-03 04:05 PST'", T::Timestamp),
            ("'yesterday'", T::Timestamp),
            ("'24:00:00'", T::Time),
            ("'12:00'", T::Time),
            ("86400000000000", T::Time),
            ("-1", T::Date),
            ("4294967296", T::Date),
            ("'localhost'", T::Inet),
            ("1", T::Boolean),
            ("'abc'", T::Blob),
            ("[1]", T::Set(Box::new(T::Int))),
            ("{1}", T::List(Box::new(T::Int))),
            ("{}", T::List(Box::new(T::Int))),
            ("[1, null]", T::List(Box::new(T::Int))),
            ("{1: null}", T::Map(Box::new(T::Int), Box::new(T::Int))),
            ("[1, 2]", T::Vector(Box::new(T::Float), 3)),
            ("(1, 2, 3)", T::Tuple(vec![T::Int, T::Int])),
            ("{c: 1}", ut()),
            ("{a: 1, a: 2}", ut()),
            ("{a: 'x'}", ut()),
            ("1x", T::Duration),
        ];
        for (text, typ) in literal_errors {
            if text == "1x" {
                assert!(parse_duration("1x").is_err());
                continue;
            }
            assert!(
                matches!(fails(text, &typ), ValueError::Literal { .. }),
                "{text} as {typ}: {:?}",
                literal_bytes(&lit(text), &typ)
            );
        }
        assert_eq!(
            fails("[1, ?]", &T::List(Box::new(T::Int))),
            ValueError::Unsupported("a bind marker inside a literal".into())
        );
        assert_eq!(fails("token(1)", &T::BigInt), ValueError::Unsupported("function token()".into()));
        assert_eq!(fails("now(1)", &T::Timeuuid), ValueError::Unsupported("function now()".into()));
        assert!(fails("'x'", &T::Int).to_string().contains("a string is not a int literal"));
    }

    #[test]
    fn collections_sorted_as_cassandra_stores_them() {
        let ints = |v: &[i32]| CqlValue::List(v.iter().map(|i| CqlValue::Int(*i)).collect());
        let list = T::List(Box::new(T::Int));
        assert_eq!(value("[3, 1, 3]", &list), ints(&[3, 1, 3]));
        assert_eq!(value("[]", &list), ints(&[]));
        let set = T::Set(Box::new(T::Int));
        assert_eq!(
            value("{3, -1, 2, 3, -1}", &set),
            CqlValue::Set(vec![CqlValue::Int(-1), CqlValue::Int(2), CqlValue::Int(3)])
        );
        assert_eq!(value("{}", &set), CqlValue::Set(vec![]));
        let texts = T::Set(Box::new(T::Text));
        let CqlValue::Set(t) = value("{'b', 'a', 'B', 'é', 'a'}", &texts) else { panic!() };
        assert_eq!(t.iter().map(|v| v.as_str().unwrap()).collect::<Vec<_>>(), ["B", "a", "b", "é"]);
        // Equal decimals are one element (the first kept).
        let decimals = T::Set(Box::new(T::Decimal));
        let CqlValue::Set(d) = value("{1.00, 0.5, 1.0}", &decimals) else { panic!() };
        assert_eq!(d.iter().map(ToString::to_string).collect::<Vec<_>>(), ["0.5", "1.00"]);
        let map = T::Map(Box::new(T::Int), Box::new(T::Text));
        let entry = |k, v: &str| (CqlValue::Int(k), CqlValue::Text(v.into()));
        assert_eq!(value("{2: 'b', 1: 'a', 2: 'c'}", &map), CqlValue::Map(vec![entry(1, "a"), entry(2, "c")]));
        assert_eq!(value("{}", &map), CqlValue::Map(vec![]));
        let nested = T::Map(Box::new(T::Text), Box::new(T::Set(Box::new(T::Int))));
        assert_eq!(
            value("{'k': {2, 1}}", &nested),
            CqlValue::Map(vec![(CqlValue::Text("k".into()), CqlValue::Set(vec![CqlValue::Int(1), CqlValue::Int(2)]))])
        );
        // Sets of frozen collections sort element-wise, then by size.
        let lists = T::Set(Box::new(T::List(Box::new(T::Int))));
        assert_eq!(value("{[2], [1, 5], [1]}", &lists), CqlValue::Set(vec![ints(&[1]), ints(&[1, 5]), ints(&[2])]));
    }

    #[test]
    fn tuples_udts_and_vectors() {
        let tuple = T::Tuple(vec![T::Int, T::Text, T::Boolean]);
        assert_eq!(
            value("(1, null, true)", &tuple),
            CqlValue::Tuple(vec![Some(CqlValue::Int(1)), None, Some(CqlValue::Boolean(true))])
        );
        assert_eq!(bytes("(1)", &tuple), [0, 0, 0, 4, 0, 0, 0, 1]);
        let u = ut();
        let udt = |a: Option<i32>, b: Option<&str>| CqlValue::Udt {
            keyspace: "ks".into(),
            name: "ut".into(),
            fields: vec![("a".into(), a.map(CqlValue::Int)), ("b".into(), b.map(|b| CqlValue::Text(b.into())))],
        };
        assert_eq!(value("{b: 'x', a: 1}", &u), udt(Some(1), Some("x")));
        assert_eq!(value("{b: 'x'}", &u), udt(None, Some("x")));
        assert_eq!(bytes("{}", &u), [0xff; 8]);
        assert_eq!(bytes("{a: null}", &u), [0xff; 8]);
        let my = ty("frozen<\"MyType\">").typ;
        let CqlValue::Udt { fields, .. } = value("{x: {a: 7}, \"Y\": [1]}", &my) else { panic!() };
        assert_eq!(fields[1], ("Y".into(), Some(CqlValue::List(vec![CqlValue::Int(1)]))));
        let floats = T::Vector(Box::new(T::Float), 3);
        assert_eq!(
            bytes("[1, 2.5, -3]", &floats),
            ser(&CqlValue::Vector(vec![CqlValue::Float(1.0), CqlValue::Float(2.5), CqlValue::Float(-3.0)]))
        );
        assert_eq!(
            value("[1, 2.5, -3]", &floats),
            CqlValue::Vector(vec![CqlValue::Float(1.0), CqlValue::Float(2.5), CqlValue::Float(-3.0)])
        );
        let texts = T::Vector(Box::new(T::Text), 2);
        let mut want = Vec::new();
        CqlVector(vec!["x", "yz"]).encode(&mut want);
        assert_eq!(bytes("['x', 'yz']", &texts), want[4..]);
        let shorts = T::Vector(Box::new(T::SmallInt), 2);
        assert_eq!(bytes("[1, 2]", &shorts), [2, 0, 1, 2, 0, 2]);
    }

    #[test]
    fn functions_give_fresh_values() {
        let before = now_micros();
        let t = bytes("now()", &T::Timeuuid);
        let u: [u8; 16] = t.clone().try_into().unwrap();
        assert_eq!(Uuid::from_bytes(u).get_version_num(), 1);
        assert!((before..before + 60_000_000).contains(&micros_of_timeuuid(&u)));
        assert_ne!(bytes("now()", &T::Timeuuid), t);
        assert_eq!(bytes("currentTimeUUID()", &T::Uuid).len(), 16);
        let v4 = Uuid::from_bytes(bytes("uuid()", &T::Uuid).try_into().unwrap());
        assert_eq!((v4.get_version_num(), v4.get_variant()), (4, uuid::Variant::RFC4122));
        let ms = |b: Vec<u8>| i64::from_be_bytes(b.try_into().unwrap());
        for f in ["currentTimestamp()", "toTimestamp(now())", "system.totimestamp(system.now())"] {
            assert!((before / 1000..before / 1000 + 60_000).contains(&ms(bytes(f, &T::Timestamp))), "{f}");
        }
        assert!((before / 1000..before / 1000 + 60_000).contains(&ms(bytes("toUnixTimestamp(now())", &T::BigInt))));
        let CqlValue::Date(d) = value("currentDate()", &T::Date) else { panic!() };
        assert_eq!(i64::from(d.days_since_epoch()), before / 86_400_000_000);
        assert_eq!(value("toDate(now())", &T::Date), CqlValue::Date(d));
        let CqlValue::Time(time) = value("currentTime()", &T::Time) else { panic!() };
        assert!(time.is_valid());
        assert!(matches!(fails("uuid()", &T::Timeuuid), ValueError::Literal { .. }));
        assert!(matches!(fails("now()", &T::Int), ValueError::Literal { .. }));
        assert!(matches!(fails("toTimestamp(1)", &T::Timestamp), ValueError::Unsupported(_)));
    }

    #[test]
    fn terms_with_bound_values() {
        let set = T::Set(Box::new(T::Int));
        let unsorted = build_collection([&[0, 0, 0, 2][..], &[0, 0, 0, 1], &[0, 0, 0, 2]]);
        let sorted = build_collection([&[0, 0, 0, 1][..], &[0, 0, 0, 2]]);
        let bound = |m: &BindMarker| Ok(if m.index == 0 { Some(unsorted.clone()) } else { None });
        let term = |text: &str| match parse(&format!("INSERT INTO t (c) VALUES ({text})")) {
            Ok(Statement::Insert(mut i)) => i.values.remove(0),
            other => panic!("{other:?}"),
        };
        assert_eq!(term_bytes(&term("?"), &set, &bound), Ok(Some(sorted.clone())));
        assert_eq!(term_bytes(&term("?"), &T::Int, &|_| Ok(None)), Ok(None));
        let nested = T::List(Box::new(set.clone()));
        assert_eq!(
            term_bytes(&term("[?, {1}]"), &nested, &bound),
            Ok(Some(build_collection([&sorted[..], &build_collection([&[0, 0, 0, 1][..]])])))
        );
        assert!(matches!(term_bytes(&term("[?, ?]"), &nested, &bound), Err(ValueError::Literal { .. })));
        assert_eq!(
            term_bytes(&term("{a: ?}"), &ut(), &|_| Ok(Some(vec![0, 0, 0, 9]))),
            Ok(Some(vec![0, 0, 0, 4, 0, 0, 0, 9, 255, 255, 255, 255]))
        );
    }

    #[test]
    fn any_literal_for_any_type_never_panics() {
        let texts = [
            "null",
            "true",
            "0",
            "-1",
            "99999999999999999999999",
            "1.5e300",
            "-0.0",
            "NaN",
            "-Infinity",
            "''",
            "'x'",
            "'2011-02-03 04:05:06.123456789+05:30'",
            "'12:00:00'",
            "'::1'",
            "'1'",
            "0x",
            "0xff",
            "123e4567-e89b-12d3-a456-426614174000",
            "1h",
            "P1W",
            "P0001-02-03T04:05:06",
            "[]",
            "[1, 2]",
            "['a']",
            "{}",
            "{1}",
            "{1: 'a'}",
            "{a: 1}",
            "{b: 'x', a: null}",
            "(1, 'a')",
            "(null)",
            "now()",
            "uuid()",
            "currentDate()",
            "f(1)",
            "[[1], [2, 3]]",
            "{'k': {1, 2}}",
            "[1.5, 2, 3]",
        ];
        let mut types = vec![
            T::Ascii,
            T::BigInt,
            T::Blob,
            T::Boolean,
            T::Counter,
            T::Date,
            T::Decimal,
            T::Double,
            T::Duration,
            T::Float,
            T::Inet,
            T::Int,
            T::SmallInt,
            T::Text,
            T::Time,
            T::Timestamp,
            T::Timeuuid,
            T::TinyInt,
            T::Uuid,
            T::Varint,
            T::Custom("x".into()),
            ut(),
            T::Tuple(vec![T::Int, T::Text]),
            T::Vector(Box::new(T::Float), 3),
            T::Vector(Box::new(T::Text), 1),
        ];
        for t in types.clone() {
            types.push(T::List(Box::new(t.clone())));
            types.push(T::Set(Box::new(t.clone())));
            types.push(T::Map(Box::new(t.clone()), Box::new(t)));
        }
        for text in texts {
            let l = lit(text);
            for t in &types {
                if let Ok(Some(b)) = literal_bytes(&l, t) {
                    assert_eq!(compare(t, &b, &b), Ordering::Equal, "{text} as {t}");
                    assert_eq!(normalize(t, &b).as_ref(), Ok(&b), "{text} as {t} is already normal");
                    let _ = decode(t, &b);
                }
                for b in [&[][..], &[0xff; 3], &[0, 0, 0, 1, 0, 0, 0, 9], &[0x80; 17]] {
                    let _ = (compare(t, b, &[0, 0, 0, 0]), normalize(t, b));
                }
            }
        }
    }
}
