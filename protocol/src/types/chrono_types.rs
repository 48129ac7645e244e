//! `chrono` values (feature `chrono`):
//!
//! | Rust | CQL | |
//! |---|---|---|
//! | [`NaiveDate`] | `date` | every `NaiveDate` is a `date`; `date`s beyond chrono's ±262 000 years do not read |
//! | [`NaiveTime`] | `time` | nanoseconds; a leap second (`23:59:60`) is no `time` |
//! | [`DateTime<Utc>`] | `timestamp` | milliseconds: finer precision is truncated toward the past |
//!
//! Out-of-range values fail with typed errors:
//! [`EncodeError::InvalidValue`](crate::EncodeError::InvalidValue) when
//! writing, [`DeserializeError::Overflow`](crate::types::de::DeserializeError::Overflow)
//! when reading, [`OutOfRange`] from the `TryFrom` conversions with
//! [`CqlDate`], [`CqlTime`] and [`CqlTimestamp`].

use chrono::{DateTime, Datelike, NaiveDate, NaiveTime, Timelike, Utc};

use crate::types::ext::{impl_via_cql, OutOfRange};
use crate::types::{ColumnType, CqlDate, CqlTime, CqlTimestamp, CqlValue};

/// `NaiveDate::num_days_from_ce` of 1970-01-01.
const EPOCH_DAYS_FROM_CE: i32 = 719_163;

const NANOS_PER_SEC: i64 = 1_000_000_000;

impl From<NaiveDate> for CqlDate {
    fn from(d: NaiveDate) -> Self {
        // chrono's dates span about ±262 000 years: their day counts are far
        // from overflowing, and within the ±5.8 million years of `date`.
        CqlDate::from_days_since_epoch(d.num_days_from_ce() - EPOCH_DAYS_FROM_CE)
    }
}

impl TryFrom<CqlDate> for NaiveDate {
    type Error = OutOfRange;
    /// Fails for dates beyond chrono's range.
    fn try_from(d: CqlDate) -> Result<Self, OutOfRange> {
        d.days_since_epoch()
            .checked_add(EPOCH_DAYS_FROM_CE)
            .and_then(NaiveDate::from_num_days_from_ce_opt)
            .ok_or(OutOfRange::of::<NaiveDate>("date"))
    }
}

impl TryFrom<NaiveTime> for CqlTime {
    type Error = OutOfRange;
    /// Fails for a leap second (a nanosecond field of a second or more).
    fn try_from(t: NaiveTime) -> Result<Self, OutOfRange> {
        let nanos = i64::from(t.nanosecond());
        if nanos >= NANOS_PER_SEC {
            return Err(OutOfRange::of::<CqlTime>("time"));
        }
        Ok(CqlTime(i64::from(t.num_seconds_from_midnight()) * NANOS_PER_SEC + nanos))
    }
}

impl TryFrom<CqlTime> for NaiveTime {
    type Error = OutOfRange;
    /// Fails for values outside a day (which the protocol forbids).
    fn try_from(t: CqlTime) -> Result<Self, OutOfRange> {
        let err = OutOfRange::of::<NaiveTime>("time");
        if !t.is_valid() {
            return Err(err);
        }
        let secs = u32::try_from(t.0 / NANOS_PER_SEC).map_err(|_| err)?;
        let nanos = u32::try_from(t.0 % NANOS_PER_SEC).map_err(|_| err)?;
        NaiveTime::from_num_seconds_from_midnight_opt(secs, nanos).ok_or(err)
    }
}

impl From<DateTime<Utc>> for CqlTimestamp {
    /// Milliseconds since the epoch, truncated toward the past (chrono's
    /// range, ±262 000 years, fits).
    fn from(t: DateTime<Utc>) -> Self {
        CqlTimestamp(t.timestamp_millis())
    }
}

impl TryFrom<CqlTimestamp> for DateTime<Utc> {
    type Error = OutOfRange;
    /// Fails for timestamps beyond chrono's range.
    fn try_from(t: CqlTimestamp) -> Result<Self, OutOfRange> {
        DateTime::from_timestamp_millis(t.0).ok_or(OutOfRange::of::<DateTime<Utc>>("timestamp"))
    }
}

impl From<NaiveDate> for CqlValue {
    fn from(d: NaiveDate) -> Self {
        CqlValue::Date(d.into())
    }
}

impl From<DateTime<Utc>> for CqlValue {
    fn from(t: DateTime<Utc>) -> Self {
        CqlValue::Timestamp(t.into())
    }
}

impl_via_cql!(NaiveDate => CqlDate, ColumnType::Date,
    sample: CqlDate::EPOCH,
    to: |d| Ok(CqlDate::from(*d)),
    from: NaiveDate::try_from,
);
impl_via_cql!(NaiveTime => CqlTime, ColumnType::Time,
    sample: CqlTime(0),
    to: |t| CqlTime::try_from(*t),
    from: NaiveTime::try_from,
);
impl_via_cql!(DateTime<Utc> => CqlTimestamp, ColumnType::Timestamp,
    sample: CqlTimestamp(0),
    to: |t| Ok(CqlTimestamp::from(*t)),
    from: DateTime::<Utc>::try_from,
);

#[cfg(test)]
mod tests {
    use chrono::TimeDelta;

    use super::*;
    use crate::error::EncodeError;
    use crate::types::de::{DeserializeError, DeserializeValue};
    use crate::types::ext::tests::{decode, encode, round_trip};
    use crate::types::ser::SerializeValue;
    use crate::types::CqlVector;

    fn date(y: i32, m: u32, d: u32) -> NaiveDate {
        NaiveDate::from_ymd_opt(y, m, d).unwrap()
    }

    fn utc(ms: i64) -> DateTime<Utc> {
        DateTime::from_timestamp_millis(ms).unwrap()
    }

    #[test]
    fn dates_encode_as_cql_dates() {
        let epoch = date(1970, 1, 1);
        assert_eq!(encode(&epoch), [0, 0, 0, 4, 0x80, 0, 0, 0]);
        assert_eq!(encode(&date(1969, 12, 31)), [0, 0, 0, 4, 0x7f, 0xff, 0xff, 0xff]);
        assert_eq!(encode(&date(1970, 1, 2)), [0, 0, 0, 4, 0x80, 0, 0, 1]);
        for d in [NaiveDate::MIN, NaiveDate::MAX, date(2000, 2, 29), date(1, 1, 1), date(0, 12, 31), date(-1, 3, 1)] {
            let cql = CqlDate::from_ymd(d.year().into(), d.month(), d.day()).unwrap();
            assert_eq!(CqlDate::from(d), cql, "{d}");
            assert_eq!(encode(&d), encode(&cql), "{d}");
            assert_eq!(NaiveDate::try_from(cql), Ok(d));
            assert_eq!(round_trip(&ColumnType::Date, &d), d);
        }
    }

    #[test]
    fn dates_beyond_chrono_fail() {
        let past = NaiveDate::MIN.pred_opt();
        assert_eq!(past, None, "MIN is chrono's first date");
        let before = CqlDate::from_days_since_epoch(CqlDate::from(NaiveDate::MIN).days_since_epoch() - 1);
        let after = CqlDate::from_days_since_epoch(CqlDate::from(NaiveDate::MAX).days_since_epoch() + 1);
        for cql in [before, after, CqlDate(0), CqlDate(u32::MAX)] {
            assert_eq!(NaiveDate::try_from(cql), Err(OutOfRange::of::<NaiveDate>("date")), "{cql:?}");
            let r = decode::<NaiveDate>(&ColumnType::Date, &cql.0.to_be_bytes());
            assert!(matches!(r, Err(DeserializeError::Overflow { .. })), "{r:?}");
        }
    }

    #[test]
    fn times_encode_as_cql_times() {
        let midnight = NaiveTime::MIN;
        assert_eq!(encode(&midnight), [0, 0, 0, 8, 0, 0, 0, 0, 0, 0, 0, 0]);
        let last = NaiveTime::from_hms_nano_opt(23, 59, 59, 999_999_999).unwrap();
        assert_eq!(CqlTime::try_from(last), Ok(CqlTime(CqlTime::NANOS_PER_DAY - 1)));
        let noonish = NaiveTime::from_hms_nano_opt(12, 34, 56, 789).unwrap();
        for (t, h, m, s, n) in [(midnight, 0, 0, 0, 0), (last, 23, 59, 59, 999_999_999), (noonish, 12, 34, 56, 789)] {
            let cql = CqlTime::from_hms_nano(h, m, s, n).unwrap();
            assert_eq!(CqlTime::try_from(t), Ok(cql));
            assert_eq!(encode(&t), encode(&cql), "{t}");
            assert_eq!(NaiveTime::try_from(cql), Ok(t));
            assert_eq!(round_trip(&ColumnType::Time, &t), t);
        }
    }

    #[test]
    fn leap_seconds_and_invalid_times_fail() {
        let leap = NaiveTime::from_hms_nano_opt(23, 59, 59, 1_500_000_000).unwrap();
        assert_eq!(CqlTime::try_from(leap), Err(OutOfRange::of::<CqlTime>("time")));
        assert!(matches!(leap.encoded_len(), Err(EncodeError::InvalidValue { what: "time", .. })));
        for bad in [CqlTime(-1), CqlTime(CqlTime::NANOS_PER_DAY), CqlTime(i64::MIN)] {
            assert_eq!(NaiveTime::try_from(bad), Err(OutOfRange::of::<NaiveTime>("time")), "{bad:?}");
            let r = decode::<NaiveTime>(&ColumnType::Time, &bad.0.to_be_bytes());
            assert!(matches!(r, Err(DeserializeError::Malformed { .. })), "{r:?}");
        }
    }

    #[test]
    fn timestamps_encode_as_cql_timestamps() {
        assert_eq!(encode(&utc(0)), [0, 0, 0, 8, 0, 0, 0, 0, 0, 0, 0, 0]);
        assert_eq!(encode(&utc(-1)), [0, 0, 0, 8, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff]);
        let min = DateTime::<Utc>::MIN_UTC.timestamp_millis();
        let max = DateTime::<Utc>::MAX_UTC.timestamp_millis();
        for ms in [0, -1, 1, 1_700_000_000_123, -62_135_596_800_000, min, max] {
            let t = utc(ms);
            assert_eq!(CqlTimestamp::from(t), CqlTimestamp(ms));
            assert_eq!(encode(&t), encode(&CqlTimestamp(ms)), "{ms}");
            assert_eq!(DateTime::<Utc>::try_from(CqlTimestamp(ms)), Ok(t));
            assert_eq!(round_trip(&ColumnType::Timestamp, &t), t);
        }
        let last = date(1969, 12, 31).and_hms_milli_opt(23, 59, 59, 999).unwrap();
        assert_eq!(utc(-1).naive_utc(), last);
    }

    #[test]
    fn sub_millisecond_precision_truncates_toward_the_past() {
        let t = utc(5) + TimeDelta::microseconds(999);
        assert_eq!(CqlTimestamp::from(t), CqlTimestamp(5));
        let before_epoch = utc(0) - TimeDelta::nanoseconds(1);
        assert_eq!(CqlTimestamp::from(before_epoch), CqlTimestamp(-1));
        assert_eq!(round_trip(&ColumnType::Timestamp, &before_epoch), utc(-1));
    }

    #[test]
    fn timestamps_beyond_chrono_fail() {
        let max = DateTime::<Utc>::MAX_UTC.timestamp_millis();
        for ms in [i64::MAX, i64::MIN, max + 1] {
            assert_eq!(DateTime::<Utc>::try_from(CqlTimestamp(ms)), Err(OutOfRange::of::<DateTime<Utc>>("timestamp")));
            let r = decode::<DateTime<Utc>>(&ColumnType::Timestamp, &ms.to_be_bytes());
            assert!(matches!(r, Err(DeserializeError::Overflow { .. })), "{r:?}");
        }
    }

    #[test]
    fn types_are_checked_and_nulls_rejected() {
        use ColumnType as T;
        let mismatch = |r: Result<(), EncodeError>| matches!(r, Err(EncodeError::TypeMismatch { .. }));
        assert!(mismatch(date(2020, 1, 1).check_type(&T::Timestamp)));
        assert!(mismatch(date(2020, 1, 1).check_type(&T::Int)));
        assert!(mismatch(NaiveTime::MIN.check_type(&T::BigInt)));
        assert!(mismatch(NaiveTime::MIN.check_type(&T::Timestamp)));
        assert!(mismatch(utc(0).check_type(&T::BigInt)));
        assert!(mismatch(utc(0).check_type(&T::Date)));
        assert!(NaiveDate::type_check(&T::Date).is_ok());
        assert!(NaiveDate::type_check(&T::Timestamp).is_err());
        assert!(NaiveTime::type_check(&T::BigInt).is_err());
        assert!(DateTime::<Utc>::type_check(&T::BigInt).is_err());
        assert!(DateTime::<Utc>::type_check(&T::Date).is_err());
        let e = decode::<NaiveDate>(&T::Int, &[0, 0, 0, 0]).unwrap_err();
        assert!(matches!(e, DeserializeError::TypeCheck(ref t) if t.rust_type.contains("NaiveDate")), "{e:?}");
        assert!(matches!(NaiveDate::deserialize(&T::Date, None), Err(DeserializeError::UnexpectedNull { .. })));
        assert!(matches!(
            DateTime::<Utc>::deserialize(&T::Timestamp, None),
            Err(DeserializeError::UnexpectedNull { .. })
        ));
        assert_eq!(Option::<NaiveTime>::deserialize(&T::Time, None), Ok(None));
        let r = decode::<NaiveDate>(&T::Date, &[0, 0, 0]);
        assert!(matches!(r, Err(DeserializeError::Malformed { .. })), "{r:?}");
    }

    #[test]
    fn vectors_and_cql_values_match_the_cql_types() {
        let ts = CqlVector(vec![utc(1), utc(-2)]);
        let cql = CqlVector(vec![CqlTimestamp(1), CqlTimestamp(-2)]);
        let typ = ColumnType::Vector(Box::new(ColumnType::Timestamp), 2);
        assert_eq!(ts.check_type(&typ), Ok(()));
        assert_eq!(encode(&ts), encode(&cql));
        let dates = CqlVector(vec![date(1970, 1, 1)]);
        assert_eq!(encode(&dates), encode(&CqlVector(vec![CqlDate::EPOCH])));
        assert_eq!(CqlValue::from(date(1970, 1, 2)), CqlValue::Date(CqlDate(0x8000_0001)));
        assert_eq!(CqlValue::from(utc(-5)), CqlValue::Timestamp(CqlTimestamp(-5)));
    }
}
