//! The replicated POP table (RocketMQ 5's check points, acks and revive progress), pure: every
//! replica applies the same POP entries ([`crate::state::entry`], tag 14) and revive records in
//! log order and so holds the same table, which is part of the snapshot manifest and the
//! checkpoint. A new leader therefore knows every message its predecessors handed out.
//!
//! Per (group, topic, queue) the table keeps a `cursor` (every offset below it was handed out at
//! least once, or skipped by the group's filter) and the offsets in flight: handed out, neither
//! acked nor revived. `topic` is the topic read: the consumer's topic, or its POP retry topic
//! `%RETRY%{group}_{topic}` where expired messages are re-put.
//!
//! Time is the entries': each carries the leader's stamp (`services/pop.rs` takes it from the
//! same kind of clock as the queue locks), the table's clock is the largest time applied, and
//! each pop or invisible-time change takes the epoch `max(stamp, clock + 1)`. Epochs are thus
//! unique per table and increasing, and one is the `popTime` of the receipts it issued: an ack or
//! change naming an older epoch than the in-flight record's is stale.
//!
//! Invariants:
//! - An offset is in flight at most once per (group, topic, queue); an acked or revived offset is
//!   never in flight again (the cursor never moves back), except a FIFO message re-popped in
//!   place after its invisible time, which keeps its offset and gets attempt + 1.
//! - At most [`POP_IN_FLIGHT_MAX_COUNT`] messages in flight over all groups: a pop past it hands
//!   out nothing.
//! - The group's committed consumer offset of a queue is its lowest offset in flight, or the
//!   cursor when none is ([`PopTable::committed_offset`]), so lag and admin tools see POP groups
//!   like any other.

use std::collections::BTreeMap;

use raftmq_common::limits::POP_IN_FLIGHT_MAX_COUNT;
use raftmq_common::limits::POP_QUEUES_MAX_COUNT;

/// A queue of a group, as the table keys it.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct PopQueue {
    /// Consumer group.
    pub group: String,
    /// The topic read (the consumer's, or its POP retry topic).
    pub topic: String,
    /// Queue id.
    pub queue_id: i32,
}

/// A message handed out and neither acked nor revived.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct InFlight {
    /// The epoch of the pop or change that issued its current receipt (its `popTime`).
    pub epoch_ms: u64,
    /// When it becomes visible again (table time, ms).
    pub invisible_until_ms: u64,
    /// Deliveries so far in place (1 on the first; FIFO re-pops add one).
    pub attempt: u32,
    /// Popped in FIFO mode: its queue is held until it is acked, and it is re-popped in place.
    pub fifo: bool,
}

/// One queue's state.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct QueueState {
    /// Every offset below it was handed out at least once or skipped.
    pub cursor: i64,
    /// Offsets in flight.
    pub in_flight: BTreeMap<i64, InFlight>,
}

/// A receipt's reference to an in-flight message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Receipt {
    /// The queue it was read from.
    pub queue: PopQueue,
    /// Its offset there.
    pub offset: i64,
    /// The epoch the receipt names.
    pub epoch_ms: u64,
}

/// A pop as the leader planned it, applied as one entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PopPlan {
    /// The queue.
    pub queue: PopQueue,
    /// The cursor the leader read from (apply refuses the plan if the table's moved meanwhile).
    pub from: i64,
    /// The new cursor: every offset in `[from, to)` not in `offsets` was skipped by the filter.
    pub to: i64,
    /// New offsets handed out, ascending, all in `[from, to)`.
    pub offsets: Vec<i64>,
    /// FIFO re-pops: offsets in flight whose invisible time ended, handed out again in place.
    pub again: Vec<i64>,
    /// Invisible time granted, ms.
    pub invisible_ms: u64,
    /// FIFO mode.
    pub fifo: bool,
}

/// Why a POP entry changed nothing (decided alike on every replica).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PopRefusal {
    /// Another pop moved the cursor since the leader read (it retries).
    #[error("the queue's pop cursor is {actual}, not {planned}: popped concurrently")]
    CursorMoved {
        /// The plan's.
        planned: i64,
        /// The table's.
        actual: i64,
    },
    /// The plan is not well formed.
    #[error("malformed pop plan: {0}")]
    Malformed(&'static str),
    /// The table is full.
    #[error(
        "the POP table is full ({POP_IN_FLIGHT_MAX_COUNT} messages in flight or {POP_QUEUES_MAX_COUNT} queues): ack some first"
    )]
    Full,
    /// The receipt names a message no longer in flight, or an older epoch.
    #[error("stale receipt handle: the message was acked, redelivered or renewed since")]
    Stale,
}

/// The POP table of a broker group.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PopTable {
    queues: BTreeMap<PopQueue, QueueState>,
    count: usize,
    clock_ms: u64,
}

impl PopTable {
    /// Empty, clock 0.
    pub fn new() -> Self {
        PopTable::default()
    }

    /// The table's clock: the largest time applied.
    pub fn clock_ms(&self) -> u64 {
        self.clock_ms
    }

    /// Messages in flight over all groups.
    pub fn in_flight_count(&self) -> usize {
        self.count
    }

    /// Messages in flight per group (for metrics and the admin API).
    pub fn in_flight_by_group(&self) -> BTreeMap<&str, usize> {
        let mut out: BTreeMap<&str, usize> = BTreeMap::new();
        for (q, s) in &self.queues {
            if !s.in_flight.is_empty() {
                *out.entry(q.group.as_str()).or_default() += s.in_flight.len();
            }
        }
        out
    }

    /// A queue's state, if it was ever popped.
    pub fn queue(&self, queue: &PopQueue) -> Option<&QueueState> {
        self.queues.get(queue)
    }

    /// Every queue with its state, in key order.
    pub fn queues(&self) -> impl Iterator<Item = (&PopQueue, &QueueState)> {
        self.queues.iter()
    }

    /// Advances the clock to `stamp_ms` and takes a fresh epoch.
    fn epoch(&mut self, stamp_ms: u64) -> u64 {
        self.clock_ms = stamp_ms.max(self.clock_ms.saturating_add(1));
        self.clock_ms
    }

    /// The group's committed offset of a popped queue: the lowest offset in flight, else the cursor.
    pub fn committed_offset(&self, queue: &PopQueue) -> Option<i64> {
        let state = self.queues.get(queue)?;
        Some(state.in_flight.keys().next().copied().unwrap_or(state.cursor))
    }

    /// Checks one plan against the table at `now` (`added`: offsets the plans before it add).
    fn check(&self, plan: &PopPlan, now: u64) -> Result<(), PopRefusal> {
        if plan.from > plan.to || plan.from < 0 || plan.invisible_ms == 0 {
            return Err(PopRefusal::Malformed("cursor range or invisible time"));
        }
        if !plan.offsets.windows(2).all(|w| w[0] < w[1])
            || plan.offsets.first().is_some_and(|o| *o < plan.from)
            || plan.offsets.last().is_some_and(|o| *o >= plan.to)
        {
            return Err(PopRefusal::Malformed("offsets not ascending within the cursor range"));
        }
        let state = self.queues.get(&plan.queue);
        let actual = state.map_or(plan.from, |s| s.cursor);
        if actual != plan.from {
            return Err(PopRefusal::CursorMoved { planned: plan.from, actual });
        }
        let all_due = plan
            .again
            .iter()
            .all(|o| state.and_then(|s| s.in_flight.get(o)).is_some_and(|f| f.invisible_until_ms <= now));
        if !all_due {
            return Err(PopRefusal::Malformed("a re-pop names an offset not in flight or still invisible"));
        }
        Ok(())
    }

    /// Applies a pop of one or more queues at `stamp_ms`, all or nothing; the epoch of its receipts.
    pub fn pop(&mut self, plans: &[PopPlan], stamp_ms: u64) -> Result<u64, PopRefusal> {
        let now = self.clock_ms.max(stamp_ms);
        let mut seen = std::collections::BTreeSet::new();
        for plan in plans {
            if !seen.insert(&plan.queue) {
                return Err(PopRefusal::Malformed("a queue planned twice"));
            }
            self.check(plan, now)?;
        }
        let added: usize = plans.iter().map(|p| p.offsets.len()).sum();
        let new_queues = plans.iter().filter(|p| !self.queues.contains_key(&p.queue)).count();
        if self.count + added > POP_IN_FLIGHT_MAX_COUNT || self.queues.len() + new_queues > POP_QUEUES_MAX_COUNT {
            return Err(PopRefusal::Full);
        }
        let epoch_ms = self.epoch(stamp_ms);
        for plan in plans {
            let invisible_until_ms = epoch_ms.saturating_add(plan.invisible_ms);
            let state = self
                .queues
                .entry(plan.queue.clone())
                .or_insert_with(|| QueueState { cursor: plan.from, ..Default::default() });
            for offset in &plan.again {
                if let Some(f) = state.in_flight.get_mut(offset) {
                    f.epoch_ms = epoch_ms;
                    f.invisible_until_ms = invisible_until_ms;
                    f.attempt = f.attempt.saturating_add(1);
                }
            }
            for offset in &plan.offsets {
                let fresh = InFlight { epoch_ms, invisible_until_ms, attempt: 1, fifo: plan.fifo };
                if state.in_flight.insert(*offset, fresh).is_none() {
                    self.count += 1;
                }
            }
            state.cursor = plan.to;
        }
        Ok(epoch_ms)
    }

    /// Acks a receipt at `stamp_ms`: the message leaves the table for good.
    pub fn ack(&mut self, receipt: &Receipt, stamp_ms: u64) -> Result<(), PopRefusal> {
        self.clock_ms = self.clock_ms.max(stamp_ms);
        self.remove(receipt)
    }

    /// Removes a receipt's message (acked, or re-put into its retry topic or the DLQ).
    pub fn remove(&mut self, receipt: &Receipt) -> Result<(), PopRefusal> {
        let state = self.queues.get_mut(&receipt.queue).ok_or(PopRefusal::Stale)?;
        match state.in_flight.get(&receipt.offset) {
            Some(f) if f.epoch_ms == receipt.epoch_ms => {
                state.in_flight.remove(&receipt.offset);
                self.count -= 1;
                Ok(())
            }
            _ => Err(PopRefusal::Stale),
        }
    }

    /// Changes a receipt's invisible time to `invisible_ms` from `stamp_ms`; the new epoch.
    pub fn change_invisible(&mut self, receipt: &Receipt, invisible_ms: u64, stamp_ms: u64) -> Result<u64, PopRefusal> {
        let current = self
            .queues
            .get(&receipt.queue)
            .and_then(|s| s.in_flight.get(&receipt.offset))
            .filter(|f| f.epoch_ms == receipt.epoch_ms)
            .copied()
            .ok_or(PopRefusal::Stale)?;
        let epoch_ms = self.epoch(stamp_ms);
        if let Some(f) = self.queues.get_mut(&receipt.queue).and_then(|s| s.in_flight.get_mut(&receipt.offset)) {
            *f = InFlight { epoch_ms, invisible_until_ms: epoch_ms.saturating_add(invisible_ms), ..current };
        }
        Ok(epoch_ms)
    }

    /// In-flight messages whose invisible time ended by `now_ms`, oldest deadline first, at most
    /// `max`: what the revive service re-puts (FIFO ones only past `fifo_attempts_max`; before
    /// that they are re-popped in place).
    pub fn expired(
        &self,
        now_ms: u64,
        fifo_attempts_max: impl Fn(&str) -> u32,
        max: usize,
    ) -> Vec<(Receipt, InFlight)> {
        let mut due: Vec<(Receipt, InFlight)> = self
            .queues
            .iter()
            .flat_map(|(queue, state)| {
                state.in_flight.iter().filter(move |(_, f)| f.invisible_until_ms <= now_ms).map(move |(offset, f)| {
                    (Receipt { queue: queue.clone(), offset: *offset, epoch_ms: f.epoch_ms }, *f)
                })
            })
            .filter(|(r, f)| !f.fifo || f.attempt >= fifo_attempts_max(&r.queue.group))
            .collect();
        due.sort_by_key(|(r, f)| (f.invisible_until_ms, r.offset));
        due.truncate(max);
        due
    }

    /// Drops every queue of `group` (the group was deleted).
    pub fn remove_group(&mut self, group: &str) {
        self.queues.retain(|q, _| q.group != group);
        self.count = self.queues.values().map(|s| s.in_flight.len()).sum();
    }

    /// Drops a group's state of one queue (its offset was reset: it pops from the new offset).
    pub fn reset_queue(&mut self, queue: &PopQueue) {
        if let Some(state) = self.queues.remove(queue) {
            self.count -= state.in_flight.len();
        }
    }

    /// The table from a manifest.
    pub fn from_parts(clock_ms: u64, queues: Vec<(PopQueue, QueueState)>) -> Self {
        let count = queues.iter().map(|(_, s)| s.in_flight.len()).sum();
        PopTable { queues: queues.into_iter().collect(), count, clock_ms }
    }
}

/// The mark a revived message carries (property `POP_REVIVE_OF`): the delivery it replaces.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PopReviveMark {
    /// Consumer group.
    pub group: String,
    /// The topic the consumer subscribed to (the retry topic is named after it).
    pub origin_topic: String,
    /// The topic the expired message was read from (`origin_topic` or its POP retry topic).
    pub read_topic: String,
    /// Its queue there.
    pub queue_id: i32,
    /// Its offset there.
    pub offset: i64,
    /// The epoch of the delivery that expired.
    pub epoch_ms: u64,
}

impl PopReviveMark {
    /// The property value: `group originTopic readTopic queueId offset epochMs`.
    pub fn value(&self) -> String {
        format!(
            "{} {} {} {} {} {}",
            self.group, self.origin_topic, self.read_topic, self.queue_id, self.offset, self.epoch_ms
        )
    }

    /// Reads a property value (`None`: malformed).
    pub fn parse(value: &str) -> Option<PopReviveMark> {
        let mut f = value.split(' ');
        let mark = PopReviveMark {
            group: f.next()?.to_owned(),
            origin_topic: f.next()?.to_owned(),
            read_topic: f.next()?.to_owned(),
            queue_id: f.next()?.parse().ok()?,
            offset: f.next()?.parse().ok()?,
            epoch_ms: f.next()?.parse().ok()?,
        };
        f.next().is_none().then_some(mark)
    }

    /// The receipt of the delivery it replaces.
    pub fn receipt(&self) -> Receipt {
        Receipt {
            queue: PopQueue { group: self.group.clone(), topic: self.read_topic.clone(), queue_id: self.queue_id },
            offset: self.offset,
            epoch_ms: self.epoch_ms,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn q() -> PopQueue {
        PopQueue { group: "g".into(), topic: "t".into(), queue_id: 0 }
    }

    fn plan(from: i64, to: i64, offsets: Vec<i64>) -> PopPlan {
        PopPlan { queue: q(), from, to, offsets, again: vec![], invisible_ms: 1_000, fifo: false }
    }

    fn receipt(offset: i64, epoch_ms: u64) -> Receipt {
        Receipt { queue: q(), offset, epoch_ms }
    }

    #[test]
    fn pop_ack_and_change_move_epochs_and_the_committed_offset() {
        let mut t = PopTable::new();
        let e1 = t.pop(&[plan(0, 3, vec![0, 2])], 100).unwrap();
        assert_eq!(e1, 100);
        assert_eq!(t.committed_offset(&q()), Some(0));
        assert_eq!(t.in_flight_count(), 2);
        // The same stamp twice still gives a fresh epoch.
        let e2 = t.pop(&[plan(3, 4, vec![3])], 100).unwrap();
        assert_eq!(e2, 101);
        assert_eq!(t.ack(&receipt(0, e1), 150), Ok(()));
        assert_eq!(t.ack(&receipt(0, e1), 150), Err(PopRefusal::Stale), "acked twice");
        assert_eq!(t.committed_offset(&q()), Some(2));
        let e3 = t.change_invisible(&receipt(2, e1), 5_000, 160).unwrap();
        assert!(e3 > e2);
        assert_eq!(t.ack(&receipt(2, e1), 170), Err(PopRefusal::Stale), "the receipt before the change");
        assert_eq!(t.ack(&receipt(2, e3), 170), Ok(()));
        assert_eq!(t.ack(&receipt(3, e2), 170), Ok(()));
        assert_eq!(t.committed_offset(&q()), Some(4));
        assert_eq!(t.in_flight_count(), 0);
    }

    #[test]
    fn a_pop_planned_on_a_moved_cursor_or_malformed_is_refused_whole() {
        let mut t = PopTable::new();
        t.pop(&[plan(5, 7, vec![5, 6])], 10).unwrap();
        assert_eq!(t.pop(&[plan(5, 8, vec![7])], 20), Err(PopRefusal::CursorMoved { planned: 5, actual: 7 }));
        assert!(matches!(t.pop(&[plan(7, 9, vec![9])], 20), Err(PopRefusal::Malformed(_))));
        assert!(matches!(t.pop(&[plan(7, 9, vec![8, 7])], 20), Err(PopRefusal::Malformed(_))));
        assert_eq!(t.in_flight_count(), 2);
    }

    #[test]
    fn expired_messages_are_listed_oldest_first_and_fifo_ones_only_past_their_attempts() {
        let mut t = PopTable::new();
        let e = t.pop(&[plan(0, 2, vec![0, 1])], 1_000).unwrap();
        assert!(t.expired(1_999, |_| 16, 10).is_empty());
        let due = t.expired(2_000, |_| 16, 10);
        assert_eq!(due.len(), 2);
        assert_eq!(due[0].0, receipt(0, e));
        t.remove(&due[0].0).unwrap();
        assert_eq!(t.committed_offset(&q()), Some(1));

        let fifo = PopQueue { topic: "f".into(), ..q() };
        let mut p = plan(0, 1, vec![0]);
        p.queue = fifo.clone();
        p.fifo = true;
        t.pop(&[p.clone()], 3_000).unwrap();
        assert!(
            t.expired(10_000, |_| 2, 10).iter().all(|(r, _)| r.queue != fifo),
            "attempt 1 of 2: re-popped in place"
        );
        let again = PopPlan { again: vec![0], offsets: vec![], from: 1, to: 1, ..p };
        let e2 = t.pop(&[again], 10_000).unwrap();
        assert_eq!(t.queue(&fifo).unwrap().in_flight[&0].attempt, 2);
        assert!(t.expired(10_500, |_| 2, 10).iter().all(|(r, _)| r.queue != fifo), "invisible again");
        let due = t.expired(20_000, |_| 2, 10);
        assert!(due.iter().any(|(r, f)| r.queue == fifo && r.epoch_ms == e2 && f.attempt == 2));
    }

    #[test]
    fn the_table_is_bounded() {
        let mut t = PopTable::new();
        let all: Vec<i64> = (0..POP_IN_FLIGHT_MAX_COUNT as i64).collect();
        t.pop(&[plan(0, all.len() as i64, all.clone())], 1).unwrap();
        let next = all.len() as i64;
        assert_eq!(t.pop(&[plan(next, next + 1, vec![next])], 2), Err(PopRefusal::Full));
        // Skipping (the filter) needs no room.
        assert!(t.pop(&[plan(next, next + 1, vec![])], 2).is_ok());
        t.remove_group("g");
        assert_eq!(t.in_flight_count(), 0);
    }
}
