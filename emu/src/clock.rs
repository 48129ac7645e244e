//! The wall clock as the front reads it: milliseconds (generations, tablet
//! stream sets) and microseconds (write timestamps, CDC log rows) since the
//! Unix epoch, 0 for a clock set before it.

use std::time::{SystemTime, UNIX_EPOCH};

/// Milliseconds since the Unix epoch.
pub(crate) fn now_ms() -> i64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_millis() as i64).unwrap_or(0)
}

/// Microseconds since the Unix epoch.
pub(crate) fn now_micros() -> i64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_micros() as i64).unwrap_or(0)
}
