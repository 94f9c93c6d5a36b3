//! `TableClock`: the leader's clock for a replicated table whose entries carry time (the queue
//! locks' and the POP table's), docs/broker.md#queue-locks.
//!
//! When this replica first stamps in a term, it takes the table's clock (the largest stamp
//! applied; every earlier term's entries are applied by then: the readiness gate) as its base,
//! and from then on stamps `base + monotonic time elapsed`, never below the table's clock.
//! Invariant: table time moves no faster than real time, whatever the replicas' wall clocks say —
//! a leader's stamps move at its monotonic clock's rate, and each leader starts from a stamp some
//! predecessor made no later than that moment. The wall clock only seeds the very first base of a
//! table that never held anything.

use std::sync::Mutex;
use std::time::Instant;

use raftmq_common::sync::lock;

use crate::state::store::now_ms;

/// Where this replica's clock of a term started.
#[derive(Debug, Clone, Copy)]
struct TermBase {
    term: u64,
    base_ms: u64,
    started: Instant,
}

/// One table's leader clock.
#[derive(Debug, Default)]
pub struct TableClock {
    base: Mutex<Option<TermBase>>,
}

/// The stamp at `elapsed_ms` after a term's base, given the table clock now.
fn stamp_at(base_ms: u64, elapsed_ms: u64, table_clock_ms: u64) -> u64 {
    base_ms.saturating_add(elapsed_ms).max(table_clock_ms)
}

impl TableClock {
    /// A clock with no base yet.
    pub fn new() -> Self {
        TableClock::default()
    }

    /// The stamp of an entry proposed now in `term`, for a table whose clock is `table_clock_ms`.
    pub fn stamp(&self, term: u64, table_clock_ms: u64) -> u64 {
        let mut base = lock(&self.base);
        let b = match *base {
            Some(b) if b.term == term => b,
            _ => {
                // A table that never held anything protects nothing: the wall clock seeds it.
                let base_ms = if table_clock_ms == 0 { now_ms() } else { table_clock_ms };
                let b = TermBase { term, base_ms, started: Instant::now() };
                *base = Some(b);
                b
            }
        };
        let elapsed = u64::try_from(b.started.elapsed().as_millis()).unwrap_or(u64::MAX);
        stamp_at(b.base_ms, elapsed, table_clock_ms)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stamps_move_with_elapsed_time_from_the_base_and_never_below_the_table_clock() {
        assert_eq!(stamp_at(100_000, 0, 100_000), 100_000);
        assert_eq!(stamp_at(100_000, 2_500, 100_000), 102_500);
        // Entries of this term applied meanwhile moved the table clock past the base's reckoning
        // (another stamp of the same term raced ahead): never go below it.
        assert_eq!(stamp_at(100_000, 2_500, 103_000), 103_000);
        assert_eq!(stamp_at(u64::MAX - 1, 5, 0), u64::MAX);
    }

    #[test]
    fn a_new_term_takes_the_table_clock_as_its_base() {
        let clock = TableClock::new();
        assert!(clock.stamp(1, 5_000) >= 5_000);
        assert!(clock.stamp(2, 9_000) >= 9_000);
    }
}
