//! Time as the CDC engine sees it: [`Millis`], milliseconds since the Unix
//! epoch (the unit of generation timestamps, window bounds and checkpoints),
//! and the microsecond write time carried by a `cdc$time` timeuuid.
//!
//! Nothing here reads a clock: callers pass the current time in.

use std::fmt;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

// `loom-tests` compiles this file (for `reader/clock.rs`) without the driver.
#[cfg(not(loom))]
use shardwise::protocol::types::CqlTimestamp;
use uuid::Uuid;

/// Milliseconds since 1970-01-01T00:00:00Z, the resolution of CQL
/// `timestamp`s and therefore of generation timestamps and log windows.
///
/// Arithmetic saturates at [`Millis::MIN`] and [`Millis::MAX`], which stand
/// for "the beginning" and "never".
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Millis(pub i64);

impl Millis {
    /// The earliest representable time.
    pub const MIN: Millis = Millis(i64::MIN);
    /// The latest representable time; an end timestamp of `MAX` means "never".
    pub const MAX: Millis = Millis(i64::MAX);

    /// The time `t` (saturating outside the `i64` range).
    pub fn from_system_time(t: SystemTime) -> Self {
        match t.duration_since(UNIX_EPOCH) {
            Ok(after) => Millis(duration_ms(after)),
            Err(before) => Millis(duration_ms(before.duration()).saturating_neg()),
        }
    }

    /// As a [`SystemTime`] (the epoch for times before it; the latest the
    /// platform can hold for times past it).
    pub fn to_system_time(self) -> SystemTime {
        let after = Duration::from_millis(self.0.max(0).unsigned_abs());
        UNIX_EPOCH
            .checked_add(after)
            .unwrap_or_else(|| UNIX_EPOCH + Duration::from_secs(i64::MAX.unsigned_abs() / 1000))
    }

    /// `self + d`, saturating.
    pub fn saturating_add(self, d: Duration) -> Self {
        Millis(self.0.saturating_add(duration_ms(d)))
    }

    /// `self - d`, saturating.
    pub fn saturating_sub(self, d: Duration) -> Self {
        Millis(self.0.saturating_sub(duration_ms(d)))
    }

    /// The time from `earlier` to `self`; zero if `earlier` is later.
    pub fn duration_since(self, earlier: Millis) -> Duration {
        let ms = (i128::from(self.0) - i128::from(earlier.0)).max(0);
        // At most 2^64 - 1.
        Duration::from_millis(u64::try_from(ms).unwrap_or(u64::MAX))
    }
}

impl fmt::Display for Millis {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}ms", self.0)
    }
}

#[cfg(not(loom))]
impl From<CqlTimestamp> for Millis {
    fn from(t: CqlTimestamp) -> Self {
        Millis(t.0)
    }
}

#[cfg(not(loom))]
impl From<Millis> for CqlTimestamp {
    fn from(t: Millis) -> Self {
        CqlTimestamp(t.0)
    }
}

/// Whole milliseconds of `d`, saturating at `i64::MAX`.
pub(crate) fn duration_ms(d: Duration) -> i64 {
    i64::try_from(d.as_millis()).unwrap_or(i64::MAX)
}

/// 100-ns intervals between 1582-10-15 (the UUID epoch) and 1970-01-01.
const GREGORIAN_OFFSET: i64 = 0x01B2_1DD2_1381_4000;

/// The write time, in microseconds since the Unix epoch, encoded in a
/// version-1 timeuuid such as `cdc$time` (whose 100-ns digit is always 0).
///
/// ```
/// # use shardwise_cdc::time::timeuuid_micros;
/// let t: uuid::Uuid = "b223c55e-6d07-11ea-7654-24e4fb3f20b9".parse().unwrap();
/// assert_eq!(timeuuid_micros(&t), 1584969040910883);
/// ```
pub fn timeuuid_micros(t: &Uuid) -> i64 {
    let b = t.as_bytes();
    let low = i64::from(u32::from_be_bytes([b[0], b[1], b[2], b[3]]));
    let mid = i64::from(u16::from_be_bytes([b[4], b[5]]));
    let high = i64::from(u16::from_be_bytes([b[6], b[7]]) & 0x0FFF);
    // At most 60 bits: no overflow.
    let ticks = (high << 48) | (mid << 32) | low;
    (ticks - GREGORIAN_OFFSET).div_euclid(10)
}

#[cfg(all(test, not(loom)))]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn arithmetic_saturates() {
        assert_eq!(Millis(10).saturating_add(Duration::from_millis(5)), Millis(15));
        assert_eq!(Millis::MAX.saturating_add(Duration::from_secs(1)), Millis::MAX);
        assert_eq!(Millis::MIN.saturating_sub(Duration::from_secs(1)), Millis::MIN);
        assert_eq!(Millis(10).saturating_add(Duration::MAX), Millis::MAX);
        assert_eq!(Millis(15).duration_since(Millis(10)), Duration::from_millis(5));
        assert_eq!(Millis(10).duration_since(Millis(15)), Duration::ZERO);
        assert_eq!(Millis::MAX.duration_since(Millis::MIN), Duration::from_millis(u64::MAX));
    }

    #[test]
    fn system_time_conversion() {
        let t = UNIX_EPOCH + Duration::from_millis(1_700_000_000_123);
        assert_eq!(Millis::from_system_time(t), Millis(1_700_000_000_123));
        let before = UNIX_EPOCH - Duration::from_millis(5);
        assert_eq!(Millis::from_system_time(before), Millis(-5));
        assert_eq!(CqlTimestamp::from(Millis(7)), CqlTimestamp(7));
        assert_eq!(Millis::from(CqlTimestamp(7)), Millis(7));
    }

    #[test]
    fn timeuuid_write_time() {
        // The example of Scylla's CDC docs.
        let t: Uuid = "b223c55e-6d07-11ea-7654-24e4fb3f20b9".parse().unwrap();
        assert_eq!(timeuuid_micros(&t), 1_584_969_040_910_883);
        // Built from a known time: T µs × 10 + offset, version 1.
        let micros: i64 = 1_606_390_225_588_947;
        let ticks = micros * 10 + GREGORIAN_OFFSET;
        let mut b = [0u8; 16];
        b[0..4].copy_from_slice(&((ticks & 0xFFFF_FFFF) as u32).to_be_bytes());
        b[4..6].copy_from_slice(&(((ticks >> 32) & 0xFFFF) as u16).to_be_bytes());
        b[6..8].copy_from_slice(&((((ticks >> 48) & 0x0FFF) as u16) | 0x1000).to_be_bytes());
        b[8] = 0x80;
        assert_eq!(timeuuid_micros(&Uuid::from_bytes(b)), micros);
    }
}
