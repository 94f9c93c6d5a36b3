//! Delay-queue progress: how far the delivery of each `SCHEDULE_TOPIC_XXXX` queue (one per delay
//! level) has gone, replicated by DELAY_PROGRESS entries (RocketMQ's `delayOffset.json`), and each
//! level's backlog as this replica's applied state has it. The delivery itself is
//! [`crate::services::schedule`]. Invariant: a level's progress never moves back.

use std::collections::BTreeMap;

use crate::state::entry::DelayProgress;

/// Replicated delivery progress per `SCHEDULE_TOPIC_XXXX` queue (RocketMQ's `delayOffset.json`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DelayOffsetTable {
    offsets: BTreeMap<i32, i64>,
}

impl DelayOffsetTable {
    /// An empty table: every level starts at offset 0.
    pub fn new() -> Self {
        DelayOffsetTable::default()
    }

    /// Applies a replicated progress entry. A level only moves forward: a late entry of an older
    /// leader must not send a level back (that would only cause duplicates, but needlessly).
    pub fn apply(&mut self, levels: &[DelayProgress]) {
        for p in levels {
            let offset = self.offsets.entry(p.queue_id).or_insert(0);
            *offset = (*offset).max(p.offset);
        }
    }

    /// Next offset to deliver of `SCHEDULE_TOPIC_XXXX` queue `queue_id` (0 when never delivered).
    pub fn get(&self, queue_id: i32) -> i64 {
        self.offsets.get(&queue_id).copied().unwrap_or(0)
    }

    /// (queue id, next offset) pairs in queue order (GET_ALL_DELAY_OFFSET, tests).
    pub fn iter(&self) -> impl Iterator<Item = (i32, i64)> + '_ {
        self.offsets.iter().map(|(q, o)| (*q, *o))
    }
}

/// One delay level's queue: how far its replicated progress has delivered and how far it is
/// stored; the difference still waits (timer messages between hops included).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LevelBacklog {
    /// The level (1-based; its queue is `level - 1`).
    pub level: usize,
    /// Replicated delivery progress (queue offset).
    pub delivered: i64,
    /// The queue's max offset.
    pub stored: u64,
}

impl LevelBacklog {
    /// Messages stored and not delivered yet.
    pub fn waiting(&self) -> u64 {
        self.stored.saturating_sub(u64::try_from(self.delivered).unwrap_or(0))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn progress_only_moves_forward() {
        let mut t = DelayOffsetTable::new();
        assert_eq!(t.get(0), 0);
        t.apply(&[DelayProgress { queue_id: 0, offset: 5 }, DelayProgress { queue_id: 2, offset: 1 }]);
        t.apply(&[DelayProgress { queue_id: 0, offset: 3 }]);
        assert_eq!(t.iter().collect::<Vec<_>>(), vec![(0, 5), (2, 1)]);
    }
}
