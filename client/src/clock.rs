//! The wall clock the wire wants: milliseconds since the Unix epoch, as Java's
//! `System.currentTimeMillis()` (born timestamps, subscription versions, trace records).
//!
//! Invariant: never panics; a clock before 1970 reads 0 and one past `i64::MAX` ms saturates.

use std::time::SystemTime;
use std::time::UNIX_EPOCH;

/// Wall-clock milliseconds since the Unix epoch.
pub(crate) fn now_ms() -> i64 {
    let ms = SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_millis()).unwrap_or(0);
    i64::try_from(ms).unwrap_or(i64::MAX)
}
