//! The broker's wall clock: the system time plus an offset a failure-injection harness can set
//! (the jepsen `clock` nemesis). Every wall-clock read of the broker (store timestamps, lock and
//! client expiry, delay delivery, retention ages) goes through [`now_ms`]; Raft's timers use the
//! monotonic clock and are not affected, which is the point of the nemesis: it shows that nothing
//! the broker guarantees depends on synchronised wall clocks.
//!
//! The offset comes from a file named by the test-only key `testClockSkewFile`: one signed integer
//! (milliseconds), re-read every [`CLOCK_SKEW_POLL_MS`]. A missing or unreadable file means 0, so a
//! harness heals by deleting it. The offset is process-wide (one broker per process when it is used).
//!
//! Invariant: without the key the clock is exactly the system clock.

use std::path::PathBuf;
use std::sync::atomic::AtomicI64;
use std::sync::atomic::Ordering;
use std::time::Duration;

use raftmq_common::limits::CLOCK_SKEW_POLL_MS;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

static OFFSET_MS: AtomicI64 = AtomicI64::new(0);

/// Wall clock in ms since the epoch, skewed by the injected offset (never below 0).
pub fn now_ms() -> u64 {
    let system = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
        .unwrap_or(0);
    u64::try_from(system.saturating_add(OFFSET_MS.load(Ordering::Relaxed))).unwrap_or(0)
}

/// The injected offset now.
pub fn offset_ms() -> i64 {
    OFFSET_MS.load(Ordering::Relaxed)
}

/// Parses the skew file's text: one signed integer of milliseconds; anything else is 0.
pub fn parse_offset(text: &str) -> i64 {
    text.trim().parse().unwrap_or(0)
}

/// Follows `file` until `cancel`: the offset is what it holds, 0 when it is absent or unreadable.
pub fn spawn_skew_watcher(file: PathBuf, cancel: CancellationToken) -> JoinHandle<()> {
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(Duration::from_millis(CLOCK_SKEW_POLL_MS));
        loop {
            tokio::select! {
                biased;
                _ = cancel.cancelled() => break,
                _ = tick.tick() => {}
            }
            let offset = tokio::fs::read_to_string(&file).await.map(|t| parse_offset(&t)).unwrap_or(0);
            let before = OFFSET_MS.swap(offset, Ordering::Relaxed);
            if before != offset {
                tracing::warn!(offset_ms = offset, "test clock skew changed (testClockSkewFile)");
            }
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn offsets_parse_leniently() {
        assert_eq!(parse_offset("1500\n"), 1500);
        assert_eq!(parse_offset(" -30000 "), -30_000);
        assert_eq!(parse_offset(""), 0);
        assert_eq!(parse_offset("soon"), 0);
    }

    #[test]
    fn unskewed_clock_is_the_system_clock() {
        let system = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| u64::try_from(d.as_millis()).unwrap_or(0))
            .unwrap_or(0);
        assert_eq!(offset_ms(), 0);
        assert!(now_ms().abs_diff(system) < 60_000);
    }
}
