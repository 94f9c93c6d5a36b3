//! Per-minute rates that admin commands report, as RocketMQ's `BrokerStatsManager` keeps them:
//! messages pulled per (topic, consumer group) (`GROUP_GET_NUMS`), which GET_CONSUME_STATS answers as
//! `consumeTps`. Prometheus keeps the raw counters (`metrics.rs`); this keeps the window a RocketMQ
//! admin tool expects an answer from.
//!
//! Pure state: the caller passes the time in whole seconds.
//!
//! Invariants: a window counts only the [`RATE_WINDOW_SECONDS`] seconds before and including `now`
//! (older buckets are reused, never summed); the table holds at most
//! [`STATS_KEYS_MAX_COUNT`] (topic, group) pairs, dropping pairs idle for a whole window first and
//! refusing new pairs (uncounted, never unbounded memory) when every pair is active.

use std::collections::HashMap;
use std::sync::Mutex;
use std::sync::MutexGuard;

use raftmq_common::limits::STATS_KEYS_MAX_COUNT;

/// Seconds one rate is averaged over (Java's "in minute" statistics).
pub const RATE_WINDOW_SECONDS: usize = 60;

/// Counts per second over the last [`RATE_WINDOW_SECONDS`].
#[derive(Debug, Clone)]
pub struct RateWindow {
    /// `(second, count)` per slot `second % RATE_WINDOW_SECONDS`.
    slots: [(u64, u64); RATE_WINDOW_SECONDS],
    last_second: u64,
}

impl Default for RateWindow {
    fn default() -> Self {
        RateWindow { slots: [(0, 0); RATE_WINDOW_SECONDS], last_second: 0 }
    }
}

impl RateWindow {
    /// Adds `n` events at `now_s`.
    pub fn add(&mut self, now_s: u64, n: u64) {
        let slot = &mut self.slots[(now_s % RATE_WINDOW_SECONDS as u64) as usize];
        if slot.0 != now_s {
            *slot = (now_s, 0);
        }
        slot.1 = slot.1.saturating_add(n);
        self.last_second = self.last_second.max(now_s);
    }

    /// Events per second over the window ending at `now_s`.
    pub fn per_second(&self, now_s: u64) -> f64 {
        let oldest = now_s.saturating_sub(RATE_WINDOW_SECONDS as u64 - 1);
        let sum: u64 = self.slots.iter().filter(|(s, _)| *s >= oldest && *s <= now_s).map(|(_, n)| *n).sum();
        sum as f64 / RATE_WINDOW_SECONDS as f64
    }

    fn idle_at(&self, now_s: u64) -> bool {
        self.last_second + (RATE_WINDOW_SECONDS as u64) <= now_s
    }
}

/// Messages pulled per topic and group, by the minute.
#[derive(Debug, Default)]
pub struct GroupGetStats {
    /// topic → group → window: looked up by `&str` on every pull, without allocating.
    by_topic: Mutex<HashMap<String, HashMap<String, RateWindow>>>,
}

impl GroupGetStats {
    /// A pull of `group` returned `messages` records of `topic` at `now_s`.
    pub fn on_pull(&self, topic: &str, group: &str, messages: u64, now_s: u64) {
        if messages == 0 {
            return;
        }
        let mut by_topic = self.lock();
        if let Some(w) = by_topic.get_mut(topic).and_then(|groups| groups.get_mut(group)) {
            w.add(now_s, messages);
            return;
        }
        let keys: usize = by_topic.values().map(HashMap::len).sum();
        if keys >= STATS_KEYS_MAX_COUNT {
            by_topic.retain(|_, groups| {
                groups.retain(|_, w| !w.idle_at(now_s));
                !groups.is_empty()
            });
            if by_topic.values().map(HashMap::len).sum::<usize>() >= STATS_KEYS_MAX_COUNT {
                return;
            }
        }
        let mut w = RateWindow::default();
        w.add(now_s, messages);
        by_topic.entry(topic.to_owned()).or_default().insert(group.to_owned(), w);
    }

    /// `tpsGroupGetNums`: messages per second `group` pulled from `topic` over the last minute.
    pub fn tps(&self, topic: &str, group: &str, now_s: u64) -> f64 {
        self.lock().get(topic).and_then(|groups| groups.get(group)).map_or(0.0, |w| w.per_second(now_s))
    }

    fn lock(&self) -> MutexGuard<'_, HashMap<String, HashMap<String, RateWindow>>> {
        self.by_topic.lock().unwrap_or_else(|p| p.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_window_averages_the_last_minute_and_forgets_older_seconds() {
        let mut w = RateWindow::default();
        w.add(100, 60);
        w.add(130, 60);
        assert_eq!(w.per_second(130), 2.0);
        assert_eq!(w.per_second(159), 2.0, "second 100 is still inside (100..=159)");
        assert_eq!(w.per_second(160), 1.0, "second 100 left the window");
        // Slot 100 % 60 is reused by second 160, not added to.
        w.add(160, 6);
        assert_eq!(w.per_second(160), 1.1);
        assert_eq!(w.per_second(500), 0.0);
    }

    #[test]
    fn rates_are_per_topic_and_group_and_the_table_stays_bounded() {
        let s = GroupGetStats::default();
        s.on_pull("T", "g", 120, 10);
        s.on_pull("T", "h", 60, 10);
        s.on_pull("T", "g", 0, 10);
        assert_eq!(s.tps("T", "g", 10), 2.0);
        assert_eq!(s.tps("T", "h", 10), 1.0);
        assert_eq!(s.tps("U", "g", 10), 0.0);
        for i in 0..STATS_KEYS_MAX_COUNT {
            s.on_pull("Full", &format!("g{i}"), 1, 20);
        }
        assert_eq!(s.tps("Full", &format!("g{}", STATS_KEYS_MAX_COUNT - 1), 20), 0.0, "refused: table full");
        assert_eq!(s.tps("Full", "g0", 20), 1.0 / 60.0);
        // A minute later the old pairs are idle and make room.
        s.on_pull("New", "g", 60, 200);
        assert_eq!(s.tps("New", "g", 200), 1.0);
        assert_eq!(s.tps("T", "g", 200), 0.0);
    }
}
