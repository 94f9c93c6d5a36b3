//! `QueueOffsetTable`: the leader's next queue offset per (topic, queueId), assigned to records before
//! they are proposed (docs/raft-log.md#queue-offsets; DLedger's `getQueueOffsetByKey`, RocketMQ's
//! `CommitLog.topicQueueTable`).
//!
//! Rules the send path must keep (apply rejects entries that break them, see [`crate::state::dispatch`]):
//! - **Reserve and submit in one critical section.** Entries reach the log in submission order, and apply
//!   accepts a record only at its queue's next offset, so the lock guarding this table must be held from
//!   [`QueueOffsetTable::assign`] until the entry is handed to Raft (`raft.write(..)` / `client_write_ff`
//!   only enqueues; it does not wait for commit).
//! - **Start from applied state.** A queue not in the table starts at the ConsumeQueue's max offset, read
//!   after everything committed before this leader's term has been applied
//!   (docs/raft-log.md#leader-readiness).
//! - **Reset after any failed write.** A proposal that was rejected, discarded (`LogEntryDiscarded`) or
//!   rejected by apply leaves offsets that will never be filled: call [`QueueOffsetTable::reset`]
//!   (after in-flight writes settle, or accept that those in flight are rejected too and retried).
//! - Transaction PREPARED and ROLLBACK records take offset 0 and no slot (`CommitLog.DefaultAppendMessageCallback`).

use std::collections::HashMap;

use raftmq_common::message::MessageExt;
use raftmq_common::message::sys_flag::TransactionType;

/// Whether a record with this sysFlag gets a ConsumeQueue unit (PREPARED and ROLLBACK records do not).
pub fn has_queue_offset(sys_flag: i32) -> bool {
    !matches!(TransactionType::of(sys_flag), TransactionType::Prepared | TransactionType::Rollback)
}

/// Next queue offset per topic-queue, as the leader sees it.
#[derive(Debug, Default)]
pub struct QueueOffsetTable {
    next: HashMap<String, HashMap<i32, u64>>,
}

impl QueueOffsetTable {
    /// An empty table (every queue starts from applied state).
    pub fn new() -> Self {
        QueueOffsetTable::default()
    }

    /// Reserves `count` consecutive offsets of a queue and returns the first. `applied_max` gives the
    /// queue's ConsumeQueue max offset when the table does not know the queue yet.
    pub fn reserve(&mut self, topic: &str, queue_id: i32, count: u64, applied_max: impl FnOnce() -> u64) -> u64 {
        let by_queue = match self.next.get_mut(topic) {
            Some(q) => q,
            None => self.next.entry(topic.to_owned()).or_default(),
        };
        let next = by_queue.entry(queue_id).or_insert_with(applied_max);
        let first = *next;
        *next = first.checked_add(count).expect("queue offsets exhausted u64");
        first
    }

    /// Writes QUEUEOFFSET into each message (0 for PREPARED/ROLLBACK), in order.
    pub fn assign(&mut self, messages: &mut [MessageExt], mut applied_max: impl FnMut(&str, i32) -> u64) {
        for msg in messages.iter_mut() {
            if !has_queue_offset(msg.sys_flag) {
                msg.queue_offset = 0;
                continue;
            }
            let topic = msg.message.topic.clone();
            let offset = self.reserve(&topic, msg.queue_id, 1, || applied_max(&topic, msg.queue_id));
            // Offsets are i64 on the wire; u64 beyond i64::MAX would take centuries of messages.
            msg.queue_offset = i64::try_from(offset).unwrap_or(i64::MAX);
        }
    }

    /// The next offset of a queue, if cached.
    pub fn peek(&self, topic: &str, queue_id: i32) -> Option<u64> {
        self.next.get(topic)?.get(&queue_id).copied()
    }

    /// Forgets everything; queues restart from applied state.
    pub fn reset(&mut self) {
        self.next.clear();
    }

    /// Forgets a topic (deleted).
    pub fn remove_topic(&mut self, topic: &str) {
        self.next.remove(topic);
    }
}

#[cfg(test)]
mod tests {
    use raftmq_common::message::Message;
    use raftmq_common::message::sys_flag;

    use super::*;

    #[test]
    fn reserves_consecutively_from_applied_state() {
        let mut t = QueueOffsetTable::new();
        assert_eq!(t.reserve("T", 0, 3, || 10), 10);
        assert_eq!(t.reserve("T", 0, 1, || unreachable!("cached")), 13);
        assert_eq!(t.reserve("T", 1, 1, || 0), 0);
        assert_eq!(t.peek("T", 0), Some(14));
        t.reset();
        assert_eq!(t.peek("T", 0), None);
        assert_eq!(t.reserve("T", 0, 1, || 12), 12);
    }

    #[test]
    fn assign_skips_prepared_and_rollback() {
        let mut t = QueueOffsetTable::new();
        let mk = |flag| MessageExt { message: Message::new("T", &b"x"[..]), sys_flag: flag, ..MessageExt::default() };
        let mut msgs = vec![
            mk(0),
            mk(sys_flag::TRANSACTION_PREPARED_TYPE),
            mk(sys_flag::TRANSACTION_COMMIT_TYPE),
            mk(sys_flag::TRANSACTION_ROLLBACK_TYPE),
        ];
        msgs[1].queue_offset = 99;
        t.assign(&mut msgs, |_, _| 7);
        assert_eq!(msgs.iter().map(|m| m.queue_offset).collect::<Vec<_>>(), vec![7, 0, 8, 0]);
        t.remove_topic("T");
        assert_eq!(t.peek("T", 0), None);
    }
}
