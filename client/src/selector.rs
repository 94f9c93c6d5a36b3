//! [`MessageQueueSelector`]: user-chosen queues for partition-ordered sends
//! (`MessageQueueSelector.java`, `SelectMessageQueueByHash.java`).
//!
//! Invariant: a selector sees the topic's publish queues in a stable order (groups by brokerName,
//! queue ids ascending), so the same argument picks the same queue as long as the route is unchanged.

use raftmq_common::java::string_hash_code;
use raftmq_common::message::Message;
use raftmq_common::message::MessageQueue;

/// Picks the queue for a message; returns an index into `queues`, or `None` to refuse the send.
pub trait MessageQueueSelector<A: ?Sized>: Send + Sync {
    /// The index of the chosen queue.
    fn select(&self, queues: &[MessageQueue], msg: &Message, arg: &A) -> Option<usize>;
}

impl<A: ?Sized, F> MessageQueueSelector<A> for F
where
    F: Fn(&[MessageQueue], &Message, &A) -> Option<usize> + Send + Sync,
{
    fn select(&self, queues: &[MessageQueue], msg: &Message, arg: &A) -> Option<usize> {
        self(queues, msg, arg)
    }
}

/// `SelectMessageQueueByHash` for string keys: `abs(key.hashCode() % n)` with Java's `String.hashCode`,
/// so a Java producer and this one put a sharding key on the same queue.
#[derive(Debug, Clone, Copy, Default)]
pub struct SelectMessageQueueByHash;

impl SelectMessageQueueByHash {
    /// The queue index of `key` among `n` queues; `None` when `n` is 0.
    pub fn index_of(key: &str, n: usize) -> Option<usize> {
        let n = i64::try_from(n).ok().filter(|n| *n > 0)?;
        // Java: `int value = arg.hashCode() % mqs.size(); if (value < 0) value = Math.abs(value);`
        let value = (i64::from(string_hash_code(key)) % n).abs();
        usize::try_from(value).ok()
    }
}

impl MessageQueueSelector<str> for SelectMessageQueueByHash {
    fn select(&self, queues: &[MessageQueue], _msg: &Message, key: &str) -> Option<usize> {
        Self::index_of(key, queues.len())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hash_selection_matches_java() {
        // "hello".hashCode() = 99162322; 99162322 % 8 = 2.
        assert_eq!(SelectMessageQueueByHash::index_of("hello", 8), Some(2));
        // "polygenelubricants".hashCode() = i32::MIN; i32::MIN % 3 = -2 → 2.
        assert_eq!(SelectMessageQueueByHash::index_of("polygenelubricants", 3), Some(2));
        assert_eq!(SelectMessageQueueByHash::index_of("x", 0), None);
        for key in ["a", "order-17", "中文"] {
            assert!(SelectMessageQueueByHash::index_of(key, 5).is_some_and(|i| i < 5));
        }
    }

    #[test]
    fn closures_are_selectors() {
        let queues = vec![MessageQueue::new("T", "a", 0), MessageQueue::new("T", "a", 1)];
        let last = |qs: &[MessageQueue], _: &Message, _: &u32| qs.len().checked_sub(1);
        assert_eq!(last.select(&queues, &Message::default(), &7), Some(1));
    }
}
