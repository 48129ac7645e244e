//! Sample schema and rows shared by the integration tests of every crate:
//! one table holding every CQL type, so each layer proves every type on the
//! real server.

use std::net::{IpAddr, Ipv4Addr};

use shardwise_protocol::types::{CqlDate, CqlDecimal, CqlDuration, CqlTime, CqlTimestamp, CqlValue, CqlVarint};
use uuid::Uuid;

/// The columns of `every_type`, in the order of [`every_type_row`].
pub const EVERY_TYPE_COLUMNS: &str =
    "pk, a, b, bl, bo, dec, dbl, dur, f, ip, i, si, t, tm, ts, tu, ti, u, vi, d, l, s, m, tup, ud, vec";

/// DDL creating keyspace `ks` with a UDT, a table holding every CQL type
/// (`every_type`) and a counter table (`counters`).
pub fn every_type_schema(ks: &str) -> [String; 4] {
    [
        crate::shared::create_keyspace(ks, 1),
        format!("CREATE TYPE {ks}.addr (street text, zip int)"),
        format!(
            "CREATE TABLE {ks}.every_type (pk int PRIMARY KEY, a ascii, b bigint, bl blob, bo boolean, \
             dec decimal, dbl double, dur duration, f float, ip inet, i int, si smallint, t text, \
             tm time, ts timestamp, tu timeuuid, ti tinyint, u uuid, vi varint, d date, \
             l list<int>, s set<text>, m map<text, int>, tup tuple<int, text>, ud frozen<addr>, \
             vec vector<float, 3>)"
        ),
        format!("CREATE TABLE {ks}.counters (pk int PRIMARY KEY, c counter)"),
    ]
}

/// A row of `every_type` with partition key `pk`: one non-trivial value of
/// every type (and one null), as owned values.
pub fn every_type_row(pk: i32, ks: &str) -> Vec<Option<CqlValue>> {
    let v = |x| Some(x);
    vec![
        v(CqlValue::Int(pk)),
        v(CqlValue::Ascii("ascii only".into())),
        v(CqlValue::BigInt(-9_000_000_000)),
        v(CqlValue::Blob(vec![0, 1, 2, 0xff])),
        v(CqlValue::Boolean(true)),
        v(CqlValue::Decimal(CqlDecimal { unscaled: CqlVarint::from(-12345i64), scale: 3 })),
        v(CqlValue::Double(2.5e100)),
        v(CqlValue::Duration(CqlDuration { months: 1, days: 2, nanoseconds: 3_000_000_004 })),
        v(CqlValue::Float(-1.5)),
        v(CqlValue::Inet(IpAddr::V4(Ipv4Addr::new(10, 1, 2, 3)))),
        None, // i: null
        v(CqlValue::SmallInt(-300)),
        v(CqlValue::Text("zażółć gęślą jaźń".into())),
        v(CqlValue::Time(CqlTime(13 * 3_600_000_000_000 + 5))),
        v(CqlValue::Timestamp(CqlTimestamp(1_700_000_000_123))),
        v(CqlValue::Timeuuid(Uuid::parse_str("8e14e760-7fa8-11eb-bc66-000000000001").unwrap_or_default())),
        v(CqlValue::TinyInt(-7)),
        v(CqlValue::Uuid(Uuid::from_u128(0x0123_4567_89ab_cdef_0123_4567_89ab_cdef))),
        v(CqlValue::Varint(CqlVarint::from(i128::MAX))),
        v(CqlValue::Date(CqlDate::from_ymd(2024, 2, 29).unwrap_or(CqlDate::EPOCH))),
        v(CqlValue::List(vec![CqlValue::Int(3), CqlValue::Int(1), CqlValue::Int(2)])),
        v(CqlValue::Set(vec![CqlValue::Text("a".into()), CqlValue::Text("b".into())])),
        v(CqlValue::Map(vec![(CqlValue::Text("k".into()), CqlValue::Int(1))])),
        v(CqlValue::Tuple(vec![Some(CqlValue::Int(1)), None])),
        v(CqlValue::Udt {
            keyspace: ks.into(),
            name: "addr".into(),
            fields: vec![
                ("street".into(), Some(CqlValue::Text("Main".into()))),
                ("zip".into(), Some(CqlValue::Int(12345))),
            ],
        }),
        v(CqlValue::Vector(vec![CqlValue::Float(1.0), CqlValue::Float(-2.0), CqlValue::Float(0.5)])),
    ]
}
