//! `time` values (feature `time`):
//!
//! | Rust | CQL | |
//! |---|---|---|
//! | [`Date`] | `date` | every `Date` is a `date`; `date`s beyond time's range (±9999 years, ±999 999 with time's `large-dates`) do not read |
//! | [`Time`] | `time` | nanoseconds |
//! | [`OffsetDateTime`] | `timestamp` | milliseconds, finer precision truncated toward the past; read in UTC |
//! | [`PrimitiveDateTime`] | `timestamp` | taken as UTC |
//!
//! Out-of-range values fail with typed errors:
//! [`DeserializeError::Overflow`](crate::types::de::DeserializeError::Overflow)
//! when reading, [`OutOfRange`] from the `TryFrom` conversions with
//! [`CqlDate`], [`CqlTime`] and [`CqlTimestamp`]. (Every value of these types
//! can be written.)

use time::{Date, OffsetDateTime, PrimitiveDateTime, Time};

use crate::types::ext::{impl_via_cql, OutOfRange};
use crate::types::{ColumnType, CqlDate, CqlTime, CqlTimestamp, CqlValue};

/// The Julian day number of 1970-01-01.
const EPOCH_JULIAN_DAY: i32 = 2_440_588;

const NANOS_PER_SEC: i64 = 1_000_000_000;

impl From<Date> for CqlDate {
    fn from(d: Date) -> Self {
        // time's dates (±999 999 years at most) are far within `date`'s
        // ±5.8 million years, and their Julian days far from overflowing.
        CqlDate::from_days_since_epoch(d.to_julian_day() - EPOCH_JULIAN_DAY)
    }
}

impl TryFrom<CqlDate> for Date {
    type Error = OutOfRange;
    /// Fails for dates beyond time's range.
    fn try_from(d: CqlDate) -> Result<Self, OutOfRange> {
        let err = OutOfRange::of::<Date>("date");
        let julian = d.days_since_epoch().checked_add(EPOCH_JULIAN_DAY).ok_or(err)?;
        Date::from_julian_day(julian).map_err(|_| err)
    }
}

impl From<Time> for CqlTime {
    fn from(t: Time) -> Self {
        let (h, m, s, nanos) = t.as_hms_nano();
        let secs = i64::from(h) * 3600 + i64::from(m) * 60 + i64::from(s);
        CqlTime(secs * NANOS_PER_SEC + i64::from(nanos))
    }
}

impl TryFrom<CqlTime> for Time {
    type Error = OutOfRange;
    /// Fails for values outside a day (which the protocol forbids).
    fn try_from(t: CqlTime) -> Result<Self, OutOfRange> {
        let err = OutOfRange::of::<Time>("time");
        if !t.is_valid() {
            return Err(err);
        }
        let secs = t.0 / NANOS_PER_SEC;
        let byte = |v: i64| u8::try_from(v).map_err(|_| err);
        let nanos = u32::try_from(t.0 % NANOS_PER_SEC).map_err(|_| err)?;
        Time::from_hms_nano(byte(secs / 3600)?, byte(secs / 60 % 60)?, byte(secs % 60)?, nanos).map_err(|_| err)
    }
}

impl From<OffsetDateTime> for CqlTimestamp {
    /// Milliseconds since the epoch, truncated toward the past.
    fn from(t: OffsetDateTime) -> Self {
        // Seconds of ±999 999 years times 1000 are far from overflowing;
        // offsets are whole seconds, so the local millisecond is UTC's.
        CqlTimestamp(t.unix_timestamp() * 1000 + i64::from(t.millisecond()))
    }
}

impl TryFrom<CqlTimestamp> for OffsetDateTime {
    type Error = OutOfRange;
    /// The timestamp in UTC; fails for timestamps beyond time's range.
    fn try_from(t: CqlTimestamp) -> Result<Self, OutOfRange> {
        OffsetDateTime::from_unix_timestamp_nanos(i128::from(t.0) * 1_000_000)
            .map_err(|_| OutOfRange::of::<OffsetDateTime>("timestamp"))
    }
}

impl From<PrimitiveDateTime> for CqlTimestamp {
    /// The date and time taken as UTC, then as an `OffsetDateTime`.
    fn from(t: PrimitiveDateTime) -> Self {
        t.assume_utc().into()
    }
}

impl TryFrom<CqlTimestamp> for PrimitiveDateTime {
    type Error = OutOfRange;
    /// The date and time in UTC; fails for timestamps beyond time's range.
    fn try_from(t: CqlTimestamp) -> Result<Self, OutOfRange> {
        let utc = OffsetDateTime::try_from(t).map_err(|_| OutOfRange::of::<PrimitiveDateTime>("timestamp"))?;
        Ok(PrimitiveDateTime::new(utc.date(), utc.time()))
    }
}

impl From<Date> for CqlValue {
    fn from(d: Date) -> Self {
        CqlValue::Date(d.into())
    }
}

impl From<Time> for CqlValue {
    fn from(t: Time) -> Self {
        CqlValue::Time(t.into())
    }
}

impl From<OffsetDateTime> for CqlValue {
    fn from(t: OffsetDateTime) -> Self {
        CqlValue::Timestamp(t.into())
    }
}

impl_via_cql!(Date => CqlDate, ColumnType::Date,
    sample: CqlDate::EPOCH,
    to: |d| Ok(CqlDate::from(*d)),
    from: Date::try_from,
);
impl_via_cql!(Time => CqlTime, ColumnType::Time,
    sample: CqlTime(0),
    to: |t| Ok(CqlTime::from(*t)),
    from: Time::try_from,
);
impl_via_cql!(OffsetDateTime => CqlTimestamp, ColumnType::Timestamp,
    sample: CqlTimestamp(0),
    to: |t| Ok(CqlTimestamp::from(*t)),
    from: OffsetDateTime::try_from,
);
impl_via_cql!(PrimitiveDateTime => CqlTimestamp, ColumnType::Timestamp,
    sample: CqlTimestamp(0),
    to: |t| Ok(CqlTimestamp::from(*t)),
    from: PrimitiveDateTime::try_from,
);

#[cfg(test)]
mod tests {
    use time::{Duration, Month, UtcOffset};

    use super::*;
    use crate::error::EncodeError;
    use crate::types::de::{DeserializeError, DeserializeValue};
    use crate::types::ext::tests::{decode, encode, round_trip};
    use crate::types::ser::SerializeValue;
    use crate::types::CqlVector;

    fn date(y: i32, m: u8, d: u8) -> Date {
        Date::from_calendar_date(y, Month::try_from(m).unwrap(), d).unwrap()
    }

    fn utc(ms: i64) -> OffsetDateTime {
        OffsetDateTime::from_unix_timestamp_nanos(i128::from(ms) * 1_000_000).unwrap()
    }

    #[test]
    fn dates_encode_as_cql_dates() {
        assert_eq!(encode(&date(1970, 1, 1)), [0, 0, 0, 4, 0x80, 0, 0, 0]);
        assert_eq!(encode(&date(1969, 12, 31)), [0, 0, 0, 4, 0x7f, 0xff, 0xff, 0xff]);
        for d in [Date::MIN, Date::MAX, date(2000, 2, 29), date(1, 1, 1), date(0, 12, 31), date(-1, 3, 1)] {
            let cql = CqlDate::from_ymd(d.year().into(), u8::from(d.month()).into(), d.day().into()).unwrap();
            assert_eq!(CqlDate::from(d), cql, "{d}");
            assert_eq!(encode(&d), encode(&cql), "{d}");
            assert_eq!(Date::try_from(cql), Ok(d));
            assert_eq!(round_trip(&ColumnType::Date, &d), d);
        }
    }

    #[test]
    fn dates_beyond_time_fail() {
        let before = CqlDate::from_days_since_epoch(CqlDate::from(Date::MIN).days_since_epoch() - 1);
        let after = CqlDate::from_days_since_epoch(CqlDate::from(Date::MAX).days_since_epoch() + 1);
        for cql in [before, after, CqlDate(0), CqlDate(u32::MAX)] {
            assert_eq!(Date::try_from(cql), Err(OutOfRange::of::<Date>("date")), "{cql:?}");
            let r = decode::<Date>(&ColumnType::Date, &cql.0.to_be_bytes());
            assert!(matches!(r, Err(DeserializeError::Overflow { .. })), "{r:?}");
        }
    }

    #[test]
    fn times_encode_as_cql_times() {
        assert_eq!(encode(&Time::MIDNIGHT), [0, 0, 0, 8, 0, 0, 0, 0, 0, 0, 0, 0]);
        let last = Time::from_hms_nano(23, 59, 59, 999_999_999).unwrap();
        assert_eq!(CqlTime::from(last), CqlTime(CqlTime::NANOS_PER_DAY - 1));
        for (h, m, s, n) in [(0, 0, 0, 0), (23, 59, 59, 999_999_999), (12, 34, 56, 789), (0, 0, 1, 0)] {
            let t = Time::from_hms_nano(h, m, s, n).unwrap();
            let cql = CqlTime::from_hms_nano(h.into(), m.into(), s.into(), n).unwrap();
            assert_eq!(CqlTime::from(t), cql);
            assert_eq!(encode(&t), encode(&cql), "{t}");
            assert_eq!(Time::try_from(cql), Ok(t));
            assert_eq!(round_trip(&ColumnType::Time, &t), t);
        }
    }

    #[test]
    fn invalid_times_fail() {
        for bad in [CqlTime(-1), CqlTime(CqlTime::NANOS_PER_DAY), CqlTime(i64::MAX)] {
            assert_eq!(Time::try_from(bad), Err(OutOfRange::of::<Time>("time")), "{bad:?}");
            let r = decode::<Time>(&ColumnType::Time, &bad.0.to_be_bytes());
            assert!(matches!(r, Err(DeserializeError::Malformed { .. })), "{r:?}");
        }
    }

    #[test]
    fn timestamps_encode_as_cql_timestamps() {
        assert_eq!(encode(&utc(0)), [0, 0, 0, 8, 0, 0, 0, 0, 0, 0, 0, 0]);
        assert_eq!(encode(&utc(-1)), [0, 0, 0, 8, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff]);
        let min = CqlTimestamp::from(Date::MIN.midnight().assume_utc()).0;
        let max = CqlTimestamp::from(Date::MAX.with_hms_milli(23, 59, 59, 999).unwrap().assume_utc()).0;
        for ms in [0, -1, 1, 1_700_000_000_123, -62_135_596_800_000, min, max] {
            let t = utc(ms);
            assert_eq!(CqlTimestamp::from(t), CqlTimestamp(ms));
            assert_eq!(encode(&t), encode(&CqlTimestamp(ms)), "{ms}");
            assert_eq!(OffsetDateTime::try_from(CqlTimestamp(ms)), Ok(t));
            assert_eq!(round_trip(&ColumnType::Timestamp, &t), t);
            let p = PrimitiveDateTime::new(t.date(), t.time());
            assert_eq!(encode(&p), encode(&CqlTimestamp(ms)), "{ms}");
            assert_eq!(round_trip(&ColumnType::Timestamp, &p), p);
        }
        let last = date(1969, 12, 31).with_hms_milli(23, 59, 59, 999).unwrap();
        assert_eq!(PrimitiveDateTime::try_from(CqlTimestamp(-1)), Ok(last));
    }

    #[test]
    fn offsets_and_precision() {
        // The same instant at another offset is the same timestamp, read back in UTC.
        let offset = UtcOffset::from_hms(5, 30, 0).unwrap();
        let t = utc(1_700_000_000_123).to_offset(offset);
        assert_eq!(CqlTimestamp::from(t), CqlTimestamp(1_700_000_000_123));
        let back = round_trip(&ColumnType::Timestamp, &t);
        assert_eq!(back, t);
        assert_eq!(back.offset(), UtcOffset::UTC);
        let before_epoch = utc(0) - Duration::nanoseconds(1);
        assert_eq!(CqlTimestamp::from(before_epoch), CqlTimestamp(-1));
        assert_eq!(CqlTimestamp::from(utc(5) + Duration::microseconds(999)), CqlTimestamp(5));
        let before = utc(-1_500) + Duration::microseconds(1);
        assert_eq!(CqlTimestamp::from(before.to_offset(offset)), CqlTimestamp(-1_500));
    }

    #[test]
    fn timestamps_beyond_time_fail() {
        for ms in [i64::MAX, i64::MIN, 300_000_000_000_000] {
            assert_eq!(OffsetDateTime::try_from(CqlTimestamp(ms)), Err(OutOfRange::of::<OffsetDateTime>("timestamp")));
            let r = decode::<OffsetDateTime>(&ColumnType::Timestamp, &ms.to_be_bytes());
            assert!(matches!(r, Err(DeserializeError::Overflow { .. })), "{r:?}");
            let r = decode::<PrimitiveDateTime>(&ColumnType::Timestamp, &ms.to_be_bytes());
            assert!(matches!(r, Err(DeserializeError::Overflow { .. })), "{r:?}");
        }
    }

    #[test]
    fn types_are_checked_and_nulls_rejected() {
        use ColumnType as T;
        let mismatch = |r: Result<(), EncodeError>| matches!(r, Err(EncodeError::TypeMismatch { .. }));
        assert!(mismatch(date(2020, 1, 1).check_type(&T::Timestamp)));
        assert!(mismatch(Time::MIDNIGHT.check_type(&T::BigInt)));
        assert!(mismatch(utc(0).check_type(&T::BigInt)));
        assert!(mismatch(utc(0).check_type(&T::Date)));
        assert!(mismatch(PrimitiveDateTime::new(date(2020, 1, 1), Time::MIDNIGHT).check_type(&T::Time)));
        assert!(Date::type_check(&T::Date).is_ok());
        assert!(Date::type_check(&T::Int).is_err());
        assert!(Time::type_check(&T::BigInt).is_err());
        assert!(OffsetDateTime::type_check(&T::BigInt).is_err());
        assert!(PrimitiveDateTime::type_check(&T::Date).is_err());
        assert!(matches!(Date::deserialize(&T::Date, None), Err(DeserializeError::UnexpectedNull { .. })));
        assert!(matches!(Time::deserialize(&T::Time, None), Err(DeserializeError::UnexpectedNull { .. })));
        assert_eq!(Option::<OffsetDateTime>::deserialize(&T::Timestamp, None), Ok(None));
        let r = decode::<OffsetDateTime>(&T::Timestamp, &[0; 4]);
        assert!(matches!(r, Err(DeserializeError::Malformed { .. })), "{r:?}");
    }

    #[test]
    fn vectors_and_cql_values_match_the_cql_types() {
        let ts = CqlVector(vec![utc(1), utc(-2)]);
        let typ = ColumnType::Vector(Box::new(ColumnType::Timestamp), 2);
        assert_eq!(ts.check_type(&typ), Ok(()));
        assert_eq!(encode(&ts), encode(&CqlVector(vec![CqlTimestamp(1), CqlTimestamp(-2)])));
        let times = CqlVector(vec![Time::MIDNIGHT]);
        assert_eq!(encode(&times), encode(&CqlVector(vec![CqlTime(0)])));
        assert_eq!(CqlValue::from(date(1970, 1, 2)), CqlValue::Date(CqlDate(0x8000_0001)));
        assert_eq!(CqlValue::from(Time::MIDNIGHT), CqlValue::Time(CqlTime(0)));
        assert_eq!(CqlValue::from(utc(-5)), CqlValue::Timestamp(CqlTimestamp(-5)));
    }
}
