//! [`ProcessQueue`]: the messages of one assigned queue that were pulled but not yet consumed
//! (RocketMQ's `ProcessQueue`), and the per-queue state of the push consumer.
//!
//! Invariants:
//! - The offset committed for a queue is the smallest offset still cached (in flight), or
//!   `max cached + 1` when none is: [`ProcessQueue::remove_messages`] returns exactly that, so a
//!   crash never skips a message whose listener has not returned.
//! - Orderly: at most one consume task per process queue. [`ProcessQueue::put_messages`] reports
//!   "dispatch" only when no task is consuming and sets the flag in the same critical section;
//!   [`ProcessQueue::take_messages`] clears it, in its critical section, when nothing is left.
//! - No offset commit lands after a drop: commits run through [`ProcessQueue::unless_dropped`]
//!   and [`ProcessQueue::set_dropped`] takes the same lock, so a released or reset queue's stored
//!   offset is never overwritten by its old pull or listener task.
//! - `space` is notified whenever messages leave the cache or the queue is dropped, so a pull loop
//!   paused by flow control waits for it instead of polling.
//! - Only an orderly queue keeps the messages themselves (its task takes them from here); a
//!   concurrently consumed queue keeps offsets alone, since its listener jobs own the messages and
//!   a deep copy of each (topic, properties) cost a consuming client more than its listener calls.

use std::collections::BTreeMap;
use std::sync::Mutex;
use std::sync::MutexGuard;
use std::sync::atomic::AtomicBool;
use std::sync::atomic::AtomicU64;
use std::sync::atomic::Ordering;

use raftmq_common::message::MessageExt;
use raftmq_common::protocol::body::consumer_running_info::ProcessQueueInfo;
use tokio::sync::Notify;
use tokio::time::Instant;

#[derive(Debug, Default)]
struct Cache {
    /// Cached offsets (`msgTreeMap`), each with its message when the queue keeps them (orderly).
    /// Boxed, so that a concurrently consumed queue's offsets-only entries stay 8 bytes: the tree
    /// moves its values within a node on every insert and remove.
    msgs: BTreeMap<i64, Option<Box<MessageExt>>>,
    /// Body bytes of `msgs` and of `consuming`.
    size_bytes: u64,
    /// Messages taken by an orderly task and not yet committed (`consumingMsgOrderlyTreeMap`).
    consuming: BTreeMap<i64, MessageExt>,
    /// Highest offset ever cached (`queueOffsetMax`).
    queue_offset_max: i64,
    /// An orderly task is consuming this queue.
    consuming_flag: bool,
}

/// One assigned queue's cache and flags.
#[derive(Debug)]
pub(crate) struct ProcessQueue {
    cache: Mutex<Cache>,
    /// Orderly: the cache holds the messages, not only their offsets.
    keeps_messages: bool,
    dropped: AtomicBool,
    locked: AtomicBool,
    /// ms since `epoch` of the last successful broker lock.
    last_lock_ms: AtomicU64,
    /// ms since `epoch` of the last pull answer and of the last listener call, for
    /// GET_CONSUMER_RUNNING_INFO (0: none yet). Taken from instants the caller already read, so
    /// the consume path reads no clock for them.
    last_pull_ms: AtomicU64,
    last_consume_ms: AtomicU64,
    epoch: Instant,
    /// Messages left the cache, the lock changed, or the queue was dropped.
    pub space: Notify,
}

impl ProcessQueue {
    /// A queue's state; `keeps_messages` for orderly consumption (see [`Self::take_messages`]).
    pub fn new(epoch: Instant, keeps_messages: bool) -> Self {
        ProcessQueue {
            cache: Mutex::default(),
            keeps_messages,
            dropped: AtomicBool::new(false),
            locked: AtomicBool::new(false),
            last_lock_ms: AtomicU64::new(0),
            last_pull_ms: AtomicU64::new(0),
            last_consume_ms: AtomicU64::new(0),
            epoch,
            space: Notify::new(),
        }
    }

    fn cache(&self) -> MutexGuard<'_, Cache> {
        // Every critical section leaves the maps and counters consistent before it can panic.
        self.cache.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub fn is_dropped(&self) -> bool {
        self.dropped.load(Ordering::Acquire)
    }

    /// Marks the queue dropped. Taken under the cache lock, so once this returns no
    /// [`Self::unless_dropped`] closure runs for it any more.
    pub fn set_dropped(&self) {
        {
            let _cache = self.cache();
            self.dropped.store(true, Ordering::Release);
        }
        self.space.notify_waiters();
    }

    /// Runs `f` (an offset commit) unless the queue was dropped, under the cache lock: a task that
    /// has not seen a drop yet can never commit after it (a released or reset queue's offset would
    /// otherwise be overwritten by a late commit from its old pull or listener task).
    pub fn unless_dropped(&self, f: impl FnOnce()) {
        let _cache = self.cache();
        if !self.dropped.load(Ordering::Acquire) {
            f();
        }
    }

    pub fn is_locked(&self) -> bool {
        self.locked.load(Ordering::Acquire)
    }

    /// Records a successful (re)lock now, or a lost lock.
    pub fn set_locked(&self, locked: bool) {
        if locked {
            self.last_lock_ms.store(self.now_ms(), Ordering::Release);
        }
        self.locked.store(locked, Ordering::Release);
        self.space.notify_waiters();
    }

    /// The lock was not renewed within `max_live_ms` (`isLockExpired`).
    pub fn is_lock_expired(&self, max_live_ms: u64) -> bool {
        self.now_ms().saturating_sub(self.last_lock_ms.load(Ordering::Acquire)) > max_live_ms
    }

    fn now_ms(&self) -> u64 {
        u64::try_from(self.epoch.elapsed().as_millis()).unwrap_or(u64::MAX)
    }

    /// Caches `msgs`; returns whether an orderly consume task must be started (`putMessage`).
    pub fn put_messages(&self, msgs: &[MessageExt]) -> bool {
        let mut cache = self.cache();
        for msg in msgs {
            let kept = self.keeps_messages.then(|| Box::new(msg.clone()));
            if cache.msgs.insert(msg.queue_offset, kept).is_none() {
                cache.size_bytes += msg.message.body.len() as u64;
            }
            cache.queue_offset_max = cache.queue_offset_max.max(msg.queue_offset);
        }
        let dispatch = !cache.msgs.is_empty() && !cache.consuming_flag;
        if dispatch {
            cache.consuming_flag = true;
        }
        dispatch
    }

    /// Uncaches consumed `msgs`; returns the offset to commit, or `None` when nothing was cached
    /// (`removeMessage`).
    pub fn remove_messages(&self, msgs: &[MessageExt]) -> Option<i64> {
        let result = {
            let mut cache = self.cache();
            if cache.msgs.is_empty() {
                None
            } else {
                for msg in msgs {
                    if cache.msgs.remove(&msg.queue_offset).is_some() {
                        cache.size_bytes = cache.size_bytes.saturating_sub(msg.message.body.len() as u64);
                    }
                }
                Some(cache.msgs.keys().next().copied().unwrap_or(cache.queue_offset_max + 1))
            }
        };
        self.space.notify_waiters();
        result
    }

    /// A pull for this queue was answered at `at`.
    pub fn mark_pulled(&self, at: std::time::Instant) {
        self.last_pull_ms.store(self.ms_at(at), Ordering::Relaxed);
    }

    /// A listener call for this queue started at `at`.
    pub fn mark_consumed(&self, at: std::time::Instant) {
        self.last_consume_ms.store(self.ms_at(at), Ordering::Relaxed);
    }

    /// ms since `epoch` of `at`, at least 1 so that 0 keeps meaning "never".
    fn ms_at(&self, at: std::time::Instant) -> u64 {
        u64::try_from(at.saturating_duration_since(self.epoch.into_std()).as_millis()).unwrap_or(u64::MAX).max(1)
    }

    /// The queue as GET_CONSUMER_RUNNING_INFO reports it at wall-clock `wall_now_ms`
    /// (`ProcessQueue.fillProcessQueueInfo`); `commit_offset` is the caller's to fill in.
    pub fn info(&self, wall_now_ms: i64) -> ProcessQueueInfo {
        // Stamps are ms since `epoch`; the report wants wall-clock ms (0 for never).
        let now = self.now_ms();
        let wall = |v: u64| match v {
            0 => 0,
            at => wall_now_ms.saturating_sub(i64::try_from(now.saturating_sub(at)).unwrap_or(i64::MAX)),
        };
        let last_lock_timestamp = wall(self.last_lock_ms.load(Ordering::Acquire));
        let last_pull_timestamp = wall(self.last_pull_ms.load(Ordering::Relaxed));
        let last_consume_timestamp = wall(self.last_consume_ms.load(Ordering::Relaxed));
        let cache = self.cache();
        let (cached_min, cached_max) = (cache.msgs.keys().next().copied(), cache.msgs.keys().next_back().copied());
        let (consuming_min, consuming_max) =
            (cache.consuming.keys().next().copied(), cache.consuming.keys().next_back().copied());
        ProcessQueueInfo {
            cached_msg_count: i32::try_from(cache.msgs.len()).unwrap_or(i32::MAX),
            cached_msg_max_offset: cached_max.unwrap_or(0),
            cached_msg_min_offset: cached_min.unwrap_or(0),
            cached_msg_size_in_mib: i32::try_from(cache.size_bytes / (1024 * 1024)).unwrap_or(i32::MAX),
            commit_offset: 0,
            droped: self.is_dropped(),
            last_consume_timestamp,
            last_lock_timestamp,
            last_pull_timestamp,
            locked: self.is_locked(),
            transaction_msg_count: i32::try_from(cache.consuming.len()).unwrap_or(i32::MAX),
            transaction_msg_max_offset: consuming_max.unwrap_or(0),
            transaction_msg_min_offset: consuming_min.unwrap_or(0),
            try_unlock_times: 0,
        }
    }

    /// Cached messages (orderly: including those being consumed).
    pub fn msg_count(&self) -> u64 {
        let cache = self.cache();
        (cache.msgs.len() + cache.consuming.len()) as u64
    }

    /// Cached body bytes.
    pub fn msg_size_bytes(&self) -> u64 {
        self.cache().size_bytes
    }

    /// Last cached offset − first cached offset (`getMaxSpan`).
    pub fn max_span(&self) -> i64 {
        let cache = self.cache();
        match (cache.msgs.keys().next(), cache.msgs.keys().next_back()) {
            (Some(first), Some(last)) => last - first,
            _ => 0,
        }
    }

    /// Orderly: moves up to `n` messages, in offset order, to the consuming set; with none left it
    /// clears the consuming flag and returns nothing (`takeMessages`). A queue that does not keep
    /// its messages has none to give.
    pub fn take_messages(&self, n: usize) -> Vec<MessageExt> {
        let mut cache = self.cache();
        let mut out = Vec::with_capacity(n.min(cache.msgs.len()));
        while self.keeps_messages && out.len() < n {
            let Some((offset, kept)) = cache.msgs.pop_first() else { break };
            // Every entry of a queue that keeps messages holds one (put_messages).
            let Some(msg) = kept else { continue };
            cache.consuming.insert(offset, (*msg).clone());
            out.push(*msg);
        }
        if out.is_empty() {
            cache.consuming_flag = false;
        }
        out
    }

    /// Orderly: the taken messages are done; returns the offset to commit (`commit`).
    pub fn commit(&self) -> Option<i64> {
        let result = {
            let mut cache = self.cache();
            let next = cache.consuming.keys().next_back().map(|last| last + 1);
            let released: u64 = cache.consuming.values().map(|m| m.message.body.len() as u64).sum();
            cache.size_bytes = cache.size_bytes.saturating_sub(released);
            cache.consuming.clear();
            next
        };
        self.space.notify_waiters();
        result
    }

    /// Orderly: puts taken messages back to be consumed again, each with `reconsume_times + 1`
    /// (`makeMessageToConsumeAgain`).
    pub fn make_messages_to_consume_again(&self, msgs: &[MessageExt]) {
        let mut cache = self.cache();
        for msg in msgs {
            if let Some(mut m) = cache.consuming.remove(&msg.queue_offset) {
                m.reconsume_times = m.reconsume_times.saturating_add(1);
                cache.msgs.insert(m.queue_offset, Some(Box::new(m)));
            }
        }
    }

    /// Whether an orderly task holds the queue.
    #[cfg(test)]
    pub fn is_consuming(&self) -> bool {
        self.cache().consuming_flag
    }
}

#[cfg(test)]
mod tests {
    use raftmq_common::message::Message;

    use super::*;

    fn msgs(offsets: &[i64]) -> Vec<MessageExt> {
        offsets
            .iter()
            .map(|o| MessageExt { message: Message::new("T", vec![0u8; 10]), queue_offset: *o, ..Default::default() })
            .collect()
    }

    #[test]
    fn committed_offset_is_the_smallest_in_flight() {
        committed_offset_is_the_smallest_in_flight_when(true);
        committed_offset_is_the_smallest_in_flight_when(false);
    }

    fn committed_offset_is_the_smallest_in_flight_when(keeps_messages: bool) {
        let pq = ProcessQueue::new(Instant::now(), keeps_messages);
        assert!(pq.put_messages(&msgs(&[5, 6, 7, 8])));
        assert_eq!((pq.msg_count(), pq.msg_size_bytes(), pq.max_span()), (4, 40, 3));
        // 6 and 8 done while 5 is still running: the queue may not pass 5.
        assert_eq!(pq.remove_messages(&msgs(&[6, 8])), Some(5));
        assert_eq!(pq.remove_messages(&msgs(&[5])), Some(7));
        assert_eq!(pq.remove_messages(&msgs(&[7])), Some(9));
        assert_eq!(pq.remove_messages(&msgs(&[7])), None, "nothing cached");
        assert_eq!((pq.msg_count(), pq.msg_size_bytes()), (0, 0));
    }

    #[test]
    fn a_queue_that_keeps_offsets_only_has_no_messages_to_take() {
        let pq = ProcessQueue::new(Instant::now(), false);
        pq.put_messages(&msgs(&[0, 1]));
        assert!(pq.take_messages(10).is_empty());
        assert_eq!((pq.msg_count(), pq.msg_size_bytes()), (2, 20), "still counted for flow control");
    }

    #[test]
    fn orderly_dispatch_flag_admits_one_task() {
        let pq = ProcessQueue::new(Instant::now(), true);
        assert!(pq.put_messages(&msgs(&[0, 1, 2])));
        assert!(!pq.put_messages(&msgs(&[3])), "a task already consumes");
        let first = pq.take_messages(2);
        assert_eq!(first.iter().map(|m| m.queue_offset).collect::<Vec<_>>(), vec![0, 1]);
        pq.make_messages_to_consume_again(&first);
        let again = pq.take_messages(2);
        assert_eq!(again.iter().map(|m| (m.queue_offset, m.reconsume_times)).collect::<Vec<_>>(), vec![(0, 1), (1, 1)]);
        assert_eq!(pq.commit(), Some(2));
        assert_eq!(pq.take_messages(10).len(), 2);
        assert_eq!(pq.commit(), Some(4));
        assert!(pq.take_messages(10).is_empty());
        assert!(!pq.is_consuming());
        assert!(pq.put_messages(&msgs(&[4])), "the next put starts a task again");
        assert_eq!(pq.msg_count(), 1);
    }

    #[test]
    fn lock_expiry() {
        let pq = ProcessQueue::new(Instant::now(), true);
        assert!(!pq.is_locked());
        pq.set_locked(true);
        assert!(pq.is_locked() && !pq.is_lock_expired(30_000));
        assert!(pq.is_lock_expired(0) || pq.now_ms() == 0);
    }
}
