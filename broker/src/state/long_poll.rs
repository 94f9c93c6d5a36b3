//! `LongPollRegistry`: pulls suspended until a message arrives on their queue or their deadline passes
//! (RocketMQ's `PullRequestHoldService` + `ManyPullRequest`), as a sans-IO state machine.
//!
//! ```text
//! pull finds nothing (PULL_NOT_FOUND + suspend) ─▶ suspend(topic, queue, offset, filter, deadline, T) ─▶ WaiterId
//! apply adds units to (topic, queue) ──────────▶ notify(topic, queue, max_offset, arrivals) ─▶ Vec<Woken<T>>
//! timer at next_deadline() ────────────────────▶ expire(now) ─▶ Vec<Woken<T>>
//! connection closed ───────────────────────────▶ cancel(id) ─▶ Option<T>
//! broker shutting down ────────────────────────▶ close() ─▶ Vec<T> (and every later suspend is refused)
//! ```
//!
//! The async shell owns one registry behind a mutex, stores a `oneshot::Sender` (or the request) as `T`,
//! and for every woken waiter re-runs the pull with suspension disallowed (`brokerAllowSuspend = false`),
//! as `PullMessageProcessor.executeRequestWhenWakeup` does. Time is passed in (ms), never read here.
//!
//! Invariants: a waiter is in exactly one place (its queue's list and the deadline index) until it is
//! returned by `notify`, `expire` or `cancel`, each exactly once; the registry never holds more than
//! `capacity` waiters ([`raftmq_common::limits::LONG_POLL_WAITERS_MAX_COUNT`] by default).

use std::collections::BTreeSet;
use std::collections::HashMap;

use raftmq_common::limits::LONG_POLL_WAITERS_MAX_COUNT;
use raftmq_common::message::CompactString;

use crate::state::pull::MessageFilter;

/// A message that just became readable, as much of it as a waiter's filter looks at: its unit's
/// tags code (TAG filters) and its properties in wire form (SQL92 filters).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Arrival<'a> {
    /// The ConsumeQueue unit's tags code.
    pub tags_code: i64,
    /// The record's properties string.
    pub properties: &'a str,
}

/// Handle of a suspended pull.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct WaiterId(pub u64);

/// Why a waiter was released.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WakeReason {
    /// A matching message arrived at or after the waiter's offset.
    MessageArrived,
    /// The deadline passed.
    Timeout,
}

/// A released waiter: re-run its pull (without suspension).
#[derive(Debug)]
pub struct Woken<T> {
    /// Its handle.
    pub id: WaiterId,
    /// Topic.
    pub topic: String,
    /// Queue.
    pub queue_id: i32,
    /// Why.
    pub reason: WakeReason,
    /// What the shell stored.
    pub payload: T,
}

#[derive(Debug)]
struct Waiter<T> {
    id: WaiterId,
    pull_from_offset: i64,
    deadline_ms: u64,
    filter: MessageFilter,
    payload: T,
}

/// The registry is full (or closed); the pull should be answered at once (PULL_NOT_FOUND) instead of
/// suspended.
#[derive(Debug)]
pub struct Full<T>(pub T);

/// Suspended pulls by (topic, queueId).
#[derive(Debug)]
pub struct LongPollRegistry<T> {
    /// Keyed by an inline topic name (up to 24 bytes): every applied entry looks its queues up here.
    by_queue: HashMap<(CompactString, i32), Vec<Waiter<T>>>,
    deadlines: BTreeSet<(u64, WaiterId)>,
    where_is: HashMap<WaiterId, (CompactString, i32)>,
    next_id: u64,
    capacity: usize,
    closed: bool,
}

impl<T> Default for LongPollRegistry<T> {
    fn default() -> Self {
        LongPollRegistry::with_capacity(LONG_POLL_WAITERS_MAX_COUNT)
    }
}

impl<T> LongPollRegistry<T> {
    /// An empty registry holding at most `capacity` waiters.
    pub fn with_capacity(capacity: usize) -> Self {
        LongPollRegistry {
            by_queue: HashMap::new(),
            deadlines: BTreeSet::new(),
            where_is: HashMap::new(),
            next_id: 0,
            capacity,
            closed: false,
        }
    }

    /// Waiters held.
    pub fn len(&self) -> usize {
        self.where_is.len()
    }

    /// Whether none is held.
    pub fn is_empty(&self) -> bool {
        self.where_is.is_empty()
    }

    /// Suspends a pull that wants `pull_from_offset` of a queue until `deadline_ms`.
    pub fn suspend(
        &mut self,
        topic: &str,
        queue_id: i32,
        pull_from_offset: i64,
        filter: MessageFilter,
        deadline_ms: u64,
        payload: T,
    ) -> Result<WaiterId, Full<T>> {
        if self.closed || self.len() >= self.capacity {
            return Err(Full(payload));
        }
        let id = WaiterId(self.next_id);
        self.next_id += 1;
        let key = (CompactString::from(topic), queue_id);
        self.by_queue.entry(key.clone()).or_default().push(Waiter {
            id,
            pull_from_offset,
            deadline_ms,
            filter,
            payload,
        });
        self.deadlines.insert((deadline_ms, id));
        self.where_is.insert(id, key);
        debug_assert_eq!(self.deadlines.len(), self.where_is.len());
        Ok(id)
    }

    /// Messages up to `max_offset` (exclusive) are now readable in a queue (`notifyMessageArriving`).
    /// Wakes the waiters whose offset is below it and whose filter matches one of `arrivals` (`None`:
    /// the messages are unknown, every such waiter wakes). A SQL92 waiter is matched on the
    /// properties, as Java's `isMatchedByCommitLog(null, properties)` does, so a subscription that
    /// selects few messages is not re-pulled for every message of its queue. Also wakes waiters whose
    /// deadline passed by `now_ms`.
    pub fn notify(
        &mut self,
        topic: &str,
        queue_id: i32,
        max_offset: i64,
        arrivals: Option<&[Arrival<'_>]>,
        now_ms: u64,
    ) -> Vec<Woken<T>> {
        let key = (CompactString::from(topic), queue_id);
        let Some(list) = self.by_queue.get_mut(&key) else { return Vec::new() };
        let mut woken = Vec::new();
        let mut kept = Vec::with_capacity(list.len());
        for w in list.drain(..) {
            let arrived = max_offset > w.pull_from_offset
                && arrivals.is_none_or(|list| list.iter().any(|a| w.filter.matches_arrival(a.tags_code, a.properties)));
            let reason = if arrived {
                Some(WakeReason::MessageArrived)
            } else if now_ms >= w.deadline_ms {
                Some(WakeReason::Timeout)
            } else {
                None
            };
            match reason {
                Some(reason) => woken.push((w, reason)),
                None => kept.push(w),
            }
        }
        if kept.is_empty() {
            self.by_queue.remove(&key);
        } else {
            *list = kept;
        }
        woken
            .into_iter()
            .map(|(w, reason)| {
                self.deadlines.remove(&(w.deadline_ms, w.id));
                self.where_is.remove(&w.id);
                Woken { id: w.id, topic: key.0.to_string(), queue_id, reason, payload: w.payload }
            })
            .collect()
    }

    /// Releases every waiter whose deadline is at or before `now_ms`.
    pub fn expire(&mut self, now_ms: u64) -> Vec<Woken<T>> {
        let due: Vec<(u64, WaiterId)> = self.deadlines.range(..=(now_ms, WaiterId(u64::MAX))).copied().collect();
        due.into_iter()
            .filter_map(|(_, id)| self.take(id).map(|(topic, queue_id, payload)| (id, topic, queue_id, payload)))
            .map(|(id, topic, queue_id, payload)| Woken { id, topic, queue_id, reason: WakeReason::Timeout, payload })
            .collect()
    }

    /// When the shell's timer should next call [`Self::expire`].
    pub fn next_deadline(&self) -> Option<u64> {
        self.deadlines.first().map(|(d, _)| *d)
    }

    /// Removes a waiter (its connection closed); its payload if it was still held.
    pub fn cancel(&mut self, id: WaiterId) -> Option<T> {
        self.take(id).map(|(_, _, payload)| payload)
    }

    /// Releases every waiter and refuses later suspensions: a stopping broker answers its parked pulls
    /// at once instead of holding its shutdown for their suspend timeouts.
    pub fn close(&mut self) -> Vec<T> {
        self.closed = true;
        let ids: Vec<WaiterId> = self.where_is.keys().copied().collect();
        ids.into_iter().filter_map(|id| self.cancel(id)).collect()
    }

    /// Queues with waiters (the periodic `checkHoldRequest` re-notifies them with their max offsets).
    pub fn queues(&self) -> impl Iterator<Item = (&str, i32)> {
        self.by_queue.keys().map(|(t, q)| (t.as_str(), *q))
    }

    fn take(&mut self, id: WaiterId) -> Option<(String, i32, T)> {
        let key = self.where_is.remove(&id)?;
        let list = self.by_queue.get_mut(&key)?;
        let index = list.iter().position(|w| w.id == id)?;
        let w = list.swap_remove(index);
        if list.is_empty() {
            self.by_queue.remove(&key);
        }
        self.deadlines.remove(&(w.deadline_ms, w.id));
        Some((key.0.into_string(), key.1, w.payload))
    }
}

#[cfg(test)]
mod tests {
    use raftmq_common::filter::SqlFilter;
    use raftmq_common::message::tag::tags_code;

    use super::*;

    fn only(tag: &str) -> MessageFilter {
        MessageFilter { all: false, codes: vec![tags_code(Some(tag)) as i32], tags: vec![tag.to_owned()], sql: None }
    }

    fn tagged(tag: &str) -> Arrival<'static> {
        Arrival { tags_code: tags_code(Some(tag)), properties: "" }
    }

    fn sql(expression: &str) -> MessageFilter {
        MessageFilter::sql(SqlFilter::compile(expression).expect("a valid expression"))
    }

    #[test]
    fn a_sql92_waiter_wakes_only_for_a_message_whose_properties_match() {
        let mut r = LongPollRegistry::with_capacity(8);
        let red = r.suspend("T", 0, 5, sql("color = 'red'"), 15_000, "red").unwrap();
        let big = r.suspend("T", 0, 5, sql("size > 10"), 15_000, "big").unwrap();
        let blue = "color\u{1}blue\u{2}size\u{1}3\u{2}";
        assert!(r.notify("T", 0, 6, Some(&[Arrival { tags_code: 0, properties: blue }]), 1_000).is_empty());
        assert_eq!(r.len(), 2);
        let red_and_big = "color\u{1}red\u{2}size\u{1}11\u{2}";
        let woken = r.notify(
            "T",
            0,
            8,
            Some(&[Arrival { tags_code: 0, properties: blue }, Arrival { tags_code: 0, properties: red_and_big }]),
            1_000,
        );
        let mut ids = woken.iter().map(|w| w.id).collect::<Vec<_>>();
        ids.sort_unstable();
        assert_eq!(ids, vec![red, big]);
        assert!(r.is_empty());
    }

    #[test]
    fn notify_wakes_waiters_behind_the_new_max_that_match() {
        let mut r = LongPollRegistry::with_capacity(8);
        let a = r.suspend("T", 0, 5, MessageFilter::all(), 15_000, "a").unwrap();
        let b = r.suspend("T", 0, 7, MessageFilter::all(), 15_000, "b").unwrap();
        let c = r.suspend("T", 0, 5, only("x"), 15_000, "c").unwrap();
        r.suspend("T", 1, 5, MessageFilter::all(), 15_000, "other queue").unwrap();
        let woken = r.notify("T", 0, 6, Some(&[tagged("y")]), 1_000);
        assert_eq!(woken.iter().map(|w| (w.id, w.payload)).collect::<Vec<_>>(), vec![(a, "a")]);
        assert_eq!(woken[0].reason, WakeReason::MessageArrived);
        assert_eq!(r.len(), 3);
        let woken = r.notify("T", 0, 8, Some(&[tagged("x")]), 1_000);
        assert_eq!(woken.iter().map(|w| w.id).collect::<Vec<_>>(), vec![b, c]);
        assert_eq!(r.notify("T", 0, 100, None, 1_000).len(), 0);
        assert_eq!(r.notify("nope", 0, 100, None, 1_000).len(), 0);
        assert_eq!(r.len(), 1);
    }

    #[test]
    fn expiry_and_cancel() {
        let mut r = LongPollRegistry::with_capacity(8);
        let a = r.suspend("T", 0, 5, MessageFilter::all(), 100, 1).unwrap();
        let b = r.suspend("T", 0, 5, MessageFilter::all(), 200, 2).unwrap();
        let c = r.suspend("U", 3, 0, MessageFilter::all(), 100, 3).unwrap();
        assert_eq!(r.next_deadline(), Some(100));
        let expired = r.expire(150);
        assert_eq!(expired.iter().map(|w| w.id).collect::<Vec<_>>(), vec![a, c]);
        assert!(expired.iter().all(|w| w.reason == WakeReason::Timeout));
        assert_eq!(r.next_deadline(), Some(200));
        assert_eq!(r.cancel(b), Some(2));
        assert_eq!(r.cancel(b), None);
        assert!(r.is_empty());
        assert_eq!(r.next_deadline(), None);
        assert_eq!(r.queues().count(), 0);
    }

    #[test]
    fn close_releases_everyone_and_refuses_later_waiters() {
        let mut r = LongPollRegistry::with_capacity(8);
        r.suspend("T", 0, 5, MessageFilter::all(), 100, 1).unwrap();
        r.suspend("U", 1, 5, MessageFilter::all(), 200, 2).unwrap();
        let mut released = r.close();
        released.sort_unstable();
        assert_eq!(released, vec![1, 2]);
        assert!(r.is_empty());
        assert_eq!(r.next_deadline(), None);
        assert!(matches!(r.suspend("T", 0, 5, MessageFilter::all(), 300, 3), Err(Full(3))));
    }

    #[test]
    fn notify_also_releases_timed_out_waiters_and_capacity_is_enforced() {
        let mut r = LongPollRegistry::with_capacity(2);
        r.suspend("T", 0, 5, only("x"), 100, 1).unwrap();
        r.suspend("T", 0, 5, only("x"), 500, 2).unwrap();
        assert!(matches!(r.suspend("T", 0, 5, MessageFilter::all(), 100, 3), Err(Full(3))));
        let woken = r.notify("T", 0, 9, Some(&[Arrival { tags_code: 0, properties: "" }]), 200);
        assert_eq!(woken.iter().map(|w| (w.payload, w.reason)).collect::<Vec<_>>(), vec![(1, WakeReason::Timeout)]);
        assert_eq!(r.len(), 1);
        assert_eq!(r.queues().collect::<Vec<_>>(), vec![("T", 0)]);
    }
}
