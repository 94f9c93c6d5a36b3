//! [`MqFaultStrategy`]: which queue a send goes to, avoiding broker groups that just failed or were
//! slow (RocketMQ's `MQFaultStrategy` + `LatencyFaultToleranceImpl`, 4.9.8).
//!
//! Pure state: the caller passes a monotonic clock reading (`now_ms`) and the measured latency, so
//! every decision is testable without sockets or sleeps.
//!
//! Rules:
//! - After each attempt the group's latency is recorded; it is unavailable for the back-off that
//!   latency falls into ([`LATENCY_MAX_MS`] → [`NOT_AVAILABLE_DURATION_MS`]: under 550 ms never; 550 ms
//!   → 30 s; … 15 s → 10 min). A failed attempt counts as [`ISOLATION_LATENCY_MS`].
//! - Selection walks the queues round-robin from the topic's index and takes the first queue whose
//!   group is available and is not the group of the previous (failed) attempt; then any available
//!   one; then a queue of the least-bad faulty group other than the previous one; then plain
//!   round-robin. So a retry goes to another group whenever one exists (Java's `pickOneAtLeast`
//!   may pick the group that just failed), and a send never fails only because every group is marked.
//! - With the strategy disabled (RocketMQ's default), only the previous attempt's group is avoided.

use std::collections::HashMap;

use raftmq_common::message::MessageQueue;

use crate::route::TopicPublishInfo;

/// Latency thresholds (`MQFaultStrategy.latencyMax`).
pub const LATENCY_MAX_MS: [u64; 7] = [50, 100, 550, 1_000, 2_000, 3_000, 15_000];
/// Back-off for a latency at or above the threshold of the same index (`notAvailableDuration`).
pub const NOT_AVAILABLE_DURATION_MS: [u64; 7] = [0, 0, 30_000, 60_000, 120_000, 180_000, 600_000];
/// The latency a failed attempt is recorded as (`updateFaultItem(.., isolation=true)`).
pub const ISOLATION_LATENCY_MS: u64 = 30_000;

const _: () = assert!(LATENCY_MAX_MS.len() == NOT_AVAILABLE_DURATION_MS.len());

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct FaultItem {
    latency_ms: u64,
    available_from_ms: u64,
}

/// Latency-based queue selection for one producer.
#[derive(Debug, Clone)]
pub struct MqFaultStrategy {
    enabled: bool,
    items: HashMap<String, FaultItem>,
    which_item_worst: u32,
}

impl MqFaultStrategy {
    /// A strategy; `enabled` = `sendLatencyFaultEnable`.
    pub fn new(enabled: bool) -> Self {
        MqFaultStrategy { enabled, items: HashMap::new(), which_item_worst: 0 }
    }

    /// Whether latency-based avoidance is on.
    pub fn is_enabled(&self) -> bool {
        self.enabled
    }

    /// The back-off for a measured latency (`computeNotAvailableDuration`).
    pub fn not_available_duration_ms(latency_ms: u64) -> u64 {
        LATENCY_MAX_MS
            .iter()
            .zip(NOT_AVAILABLE_DURATION_MS)
            .rev()
            .find(|(max, _)| latency_ms >= **max)
            .map_or(0, |(_, duration)| duration)
    }

    /// Records an attempt on `broker_name` that took `latency_ms`; `isolation` marks a failure.
    pub fn update_fault_item(&mut self, broker_name: &str, latency_ms: u64, isolation: bool, now_ms: u64) {
        if !self.enabled {
            return;
        }
        let duration = Self::not_available_duration_ms(if isolation { ISOLATION_LATENCY_MS } else { latency_ms });
        let item = FaultItem { latency_ms, available_from_ms: now_ms.saturating_add(duration) };
        // Every answered send lands here: the group's name is copied only the first time.
        match self.items.get_mut(broker_name) {
            Some(known) => *known = item,
            None => {
                self.items.insert(broker_name.to_owned(), item);
            }
        }
    }

    /// Forgets what is known about `broker_name`.
    pub fn remove(&mut self, broker_name: &str) {
        self.items.remove(broker_name);
    }

    /// Whether sends may go to `broker_name` now.
    pub fn is_available(&self, broker_name: &str, now_ms: u64) -> bool {
        self.items.get(broker_name).is_none_or(|item| now_ms >= item.available_from_ms)
    }

    /// Picks the queue for the next attempt; `last_broker` is the group of the previous failed
    /// attempt of the same send. `None` only when the topic has no queues.
    pub fn select_one_message_queue(
        &mut self,
        info: &TopicPublishInfo,
        last_broker: Option<&str>,
        now_ms: u64,
    ) -> Option<MessageQueue> {
        let mqs = info.message_queues();
        if mqs.is_empty() {
            return None;
        }
        let n = mqs.len();
        let at = |index: u32, i: usize| &mqs[(index as usize).wrapping_add(i) % n];
        let index = info.next_index();
        let not_last = |mq: &MessageQueue| last_broker != Some(mq.broker_name.as_str());
        if !self.enabled {
            let found = (0..n).map(|i| at(index, i)).find(|mq| not_last(mq));
            return Some(found.unwrap_or(at(index, 0)).clone());
        }
        let available = |mq: &&MessageQueue| self.is_available(&mq.broker_name, now_ms);
        if let Some(mq) = (0..n).map(|i| at(index, i)).filter(available).find(|mq| not_last(mq)) {
            return Some(mq.clone());
        }
        if let Some(mq) = (0..n).map(|i| at(index, i)).find(available) {
            return Some(mq.clone());
        }
        if let Some(broker) = self.pick_one_at_least(now_ms, last_broker) {
            match info.write_queue_nums_of(&broker).filter(|nums| *nums > 0) {
                Some(nums) => {
                    let queue_id = (info.next_index() % nums.unsigned_abs()) as i32;
                    return Some(MessageQueue::new(info.topic(), broker, queue_id));
                }
                // The group no longer serves this topic: forget it (Java does the same).
                None => self.remove(&broker),
            }
        }
        let index = info.next_index();
        let found = (0..n).map(|i| at(index, i)).find(|mq| not_last(mq));
        Some(found.unwrap_or(at(index, 0)).clone())
    }

    /// The least-bad known group (`pickOneAtLeast`): available first, then lower latency, then
    /// sooner available; rotating over the better half so one group does not take every fallback.
    /// `exclude` (the previous attempt's group) is passed over when any other group is known.
    fn pick_one_at_least(&mut self, now_ms: u64, exclude: Option<&str>) -> Option<String> {
        let mut items: Vec<(&String, &FaultItem)> = self.items.iter().collect();
        if items.iter().any(|(name, _)| Some(name.as_str()) != exclude) {
            items.retain(|(name, _)| Some(name.as_str()) != exclude);
        }
        if items.is_empty() {
            return None;
        }
        items.sort_by_key(|(name, item)| {
            (now_ms < item.available_from_ms, item.latency_ms, item.available_from_ms, *name)
        });
        let half = items.len() / 2;
        let i = if half == 0 {
            0
        } else {
            self.which_item_worst = self.which_item_worst.wrapping_add(1);
            self.which_item_worst as usize % half
        };
        items.get(i).map(|(name, _)| (*name).clone())
    }
}

#[cfg(test)]
mod tests {
    use raftmq_common::protocol::body::route::BrokerData;
    use raftmq_common::protocol::body::route::QueueData;
    use raftmq_common::protocol::body::route::TopicRouteData;

    use super::*;

    fn info(groups: &[(&str, i32)]) -> TopicPublishInfo {
        let route = TopicRouteData {
            queue_datas: groups
                .iter()
                .map(|(name, nums)| QueueData {
                    broker_name: (*name).into(),
                    perm: 6,
                    read_queue_nums: *nums,
                    topic_sys_flag: 0,
                    write_queue_nums: *nums,
                })
                .collect(),
            broker_datas: groups
                .iter()
                .map(|(name, _)| BrokerData {
                    broker_addrs: [(0, format!("{name}:1"))].into(),
                    broker_name: (*name).into(),
                    ..Default::default()
                })
                .collect(),
            ..Default::default()
        };
        TopicPublishInfo::from_route("T", &route, 0)
    }

    #[test]
    fn back_off_table_matches_rocketmq() {
        let cases = [(0, 0), (49, 0), (100, 0), (549, 0), (550, 30_000), (1_000, 60_000), (2_999, 120_000)];
        for (latency, want) in cases {
            assert_eq!(MqFaultStrategy::not_available_duration_ms(latency), want, "{latency}");
        }
        assert_eq!(MqFaultStrategy::not_available_duration_ms(ISOLATION_LATENCY_MS), 600_000);
    }

    #[test]
    fn round_robin_visits_every_queue() {
        let info = info(&[("a", 2), ("b", 2)]);
        let mut s = MqFaultStrategy::new(true);
        let picked: Vec<_> =
            (0..4).map(|_| s.select_one_message_queue(&info, None, 0).map(|q| (q.broker_name, q.queue_id))).collect();
        let mut sorted: Vec<_> = picked.into_iter().flatten().collect();
        sorted.sort();
        assert_eq!(sorted, vec![("a".into(), 0), ("a".into(), 1), ("b".into(), 0), ("b".into(), 1)]);
    }

    #[test]
    fn failed_group_is_avoided_until_its_back_off_ends() {
        let info = info(&[("a", 2), ("b", 2)]);
        let mut s = MqFaultStrategy::new(true);
        s.update_fault_item("a", 10, true, 1_000);
        for _ in 0..8 {
            assert_eq!(s.select_one_message_queue(&info, None, 2_000).unwrap().broker_name, "b");
        }
        // Slow but under 550 ms: no back-off.
        s.update_fault_item("b", 120, false, 2_000);
        assert!(s.is_available("b", 2_000));
        // Every group marked: the least-bad one still gets the send.
        s.update_fault_item("b", 10, true, 2_000);
        let mq = s.select_one_message_queue(&info, None, 3_000).unwrap();
        assert!(mq.queue_id < 2);
        assert!(!s.is_available("a", 600_999) && s.is_available("a", 601_000));
    }

    #[test]
    fn retry_leaves_the_previous_group_when_another_exists() {
        for enabled in [false, true] {
            let info = info(&[("a", 3), ("b", 1)]);
            let mut s = MqFaultStrategy::new(enabled);
            for _ in 0..8 {
                assert_eq!(s.select_one_message_queue(&info, Some("a"), 0).unwrap().broker_name, "b");
                assert_eq!(s.select_one_message_queue(&info, Some("b"), 0).unwrap().broker_name, "a");
            }
            // Every group backed off: the retry still leaves the group that just failed.
            s.update_fault_item("a", 1, true, 0);
            s.update_fault_item("b", 1, true, 0);
            for _ in 0..4 {
                assert_eq!(s.select_one_message_queue(&info, Some("a"), 1).unwrap().broker_name, "b");
                assert_eq!(s.select_one_message_queue(&info, Some("b"), 1).unwrap().broker_name, "a");
            }
            let single = self::info(&[("a", 1)]);
            assert_eq!(s.select_one_message_queue(&single, Some("a"), 0).unwrap().broker_name, "a");
        }
    }

    #[test]
    fn disabled_strategy_records_nothing() {
        let mut s = MqFaultStrategy::new(false);
        s.update_fault_item("a", 10, true, 0);
        assert!(s.is_available("a", 0));
        assert!(!s.is_enabled());
    }
}
