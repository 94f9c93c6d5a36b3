//! `TopicRates`: a consumer's per-topic rates, as GET_CONSUMER_RUNNING_INFO reports them in
//! `statusTable` (RocketMQ's `ConsumerStatsManager`): messages pulled, consumed and failed per
//! second over the last minute, the mean pull round trip and listener call, and the messages that
//! failed over the last hour.
//!
//! Each measure is a ring of 60 slots stamped with the second (or minute) they count, so a slot
//! from an earlier lap is recognised and read as empty: no timer clears anything. Time is passed
//! in (`now_s`), so the rules are tested without a clock.
//!
//! Invariants: memory is bounded by the topics recorded, which are the consumer's subscriptions;
//! a reading covers at most the last 60 seconds (60 minutes for failures).

use std::collections::HashMap;
use std::sync::Mutex;

use raftmq_common::protocol::body::consumer_running_info::ConsumeStatus;

const SLOTS: usize = 60;

/// One slot: which period it counts, the sum of the values and how many were recorded.
#[derive(Debug, Clone, Copy, Default)]
struct Slot {
    period: u64,
    sum: u64,
    times: u64,
}

/// Sums over the last [`SLOTS`] periods.
#[derive(Debug, Clone)]
struct Ring {
    slots: [Slot; SLOTS],
}

impl Default for Ring {
    fn default() -> Self {
        Ring { slots: [Slot::default(); SLOTS] }
    }
}

impl Ring {
    fn add(&mut self, period: u64, value: u64) {
        let slot = &mut self.slots[(period % SLOTS as u64) as usize];
        if slot.period != period {
            *slot = Slot { period, sum: 0, times: 0 };
        }
        slot.sum = slot.sum.saturating_add(value);
        slot.times += 1;
    }

    /// (sum, times) of the periods in `(now - SLOTS, now]`.
    fn read(&self, now: u64) -> (u64, u64) {
        self.slots
            .iter()
            .filter(|s| s.times > 0 && s.period <= now && now - s.period < SLOTS as u64)
            .fold((0, 0), |(sum, times), s| (sum.saturating_add(s.sum), times + s.times))
    }
}

#[derive(Debug, Default)]
struct TopicStats {
    pulled_msgs: Ring,
    pull_rt_ms: Ring,
    consume_ok: Ring,
    consume_failed: Ring,
    consume_rt_ms: Ring,
    /// Failed messages per minute.
    failed_by_minute: Ring,
}

/// Per-topic rates of one consumer; shared by its tasks and listener threads.
#[derive(Debug, Default)]
pub(crate) struct TopicRates {
    topics: Mutex<HashMap<String, TopicStats>>,
}

impl TopicRates {
    fn with<R>(&self, topic: &str, f: impl FnOnce(&mut TopicStats) -> R) -> R {
        let mut topics = self.topics.lock().unwrap_or_else(|p| p.into_inner());
        // Looked up first: the key is copied only the first time a topic is seen.
        if let Some(t) = topics.get_mut(topic) {
            return f(t);
        }
        f(topics.entry(topic.to_owned()).or_default())
    }

    /// A pull of `topic` answered after `rt_ms` with `msgs` messages.
    pub fn pulled(&self, topic: &str, now_s: u64, rt_ms: u64, msgs: usize) {
        self.with(topic, |t| {
            t.pull_rt_ms.add(now_s, rt_ms);
            t.pulled_msgs.add(now_s, msgs as u64);
        });
    }

    /// A listener call on `topic` took `rt_ms`; `ok` of its messages were consumed, `failed` not.
    pub fn consumed(&self, topic: &str, now_s: u64, rt_ms: u64, ok: usize, failed: usize) {
        self.with(topic, |t| {
            t.consume_rt_ms.add(now_s, rt_ms);
            t.consume_ok.add(now_s, ok as u64);
            t.consume_failed.add(now_s, failed as u64);
            if failed > 0 {
                t.failed_by_minute.add(now_s / 60, failed as u64);
            }
        });
    }

    /// Each recorded topic's rates at `now_s`.
    pub fn status_table(&self, now_s: u64) -> Vec<(String, ConsumeStatus)> {
        let topics = self.topics.lock().unwrap_or_else(|p| p.into_inner());
        let per_second = |r: &Ring| r.read(now_s).0 as f64 / SLOTS as f64;
        let mean = |r: &Ring| match r.read(now_s) {
            (_, 0) => 0.0,
            (sum, times) => sum as f64 / times as f64,
        };
        topics
            .iter()
            .map(|(topic, t)| {
                let status = ConsumeStatus {
                    consume_failed_msgs: i64::try_from(t.failed_by_minute.read(now_s / 60).0).unwrap_or(i64::MAX),
                    consume_failed_tps: per_second(&t.consume_failed),
                    consume_ok_tps: per_second(&t.consume_ok),
                    consume_rt: mean(&t.consume_rt_ms),
                    pull_rt: mean(&t.pull_rt_ms),
                    pull_tps: per_second(&t.pulled_msgs),
                };
                (topic.clone(), status)
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn status(s: &TopicRates, topic: &str, now_s: u64) -> ConsumeStatus {
        s.status_table(now_s).into_iter().find(|(t, _)| t == topic).map(|(_, st)| st).unwrap_or_default()
    }

    #[test]
    fn rates_cover_the_last_minute_and_means_are_per_call() {
        let s = TopicRates::default();
        s.pulled("T", 1000, 4, 30);
        s.pulled("T", 1001, 8, 30);
        s.consumed("T", 1001, 2, 50, 10);
        s.consumed("T", 1002, 6, 0, 0);
        let st = status(&s, "T", 1002);
        assert_eq!(st.pull_tps, 1.0, "60 messages over the minute");
        assert_eq!(st.pull_rt, 6.0);
        assert_eq!(st.consume_ok_tps, 50.0 / 60.0);
        assert_eq!(st.consume_failed_tps, 10.0 / 60.0);
        assert_eq!(st.consume_rt, 4.0);
        assert_eq!(st.consume_failed_msgs, 10);
        assert_eq!(status(&s, "Other", 1002), ConsumeStatus::default());
    }

    #[test]
    fn old_periods_fall_out_and_reused_slots_start_empty() {
        let s = TopicRates::default();
        s.pulled("T", 100, 5, 60);
        s.consumed("T", 100, 1, 0, 7);
        assert_eq!(status(&s, "T", 159).pull_tps, 1.0, "still inside the minute");
        let later = status(&s, "T", 160);
        assert_eq!((later.pull_tps, later.pull_rt), (0.0, 0.0), "a minute later it is gone");
        assert_eq!(later.consume_failed_msgs, 7, "failures count for an hour");
        // Second 160 reuses second 100's slot: the old counts must not be added to the new ones.
        s.pulled("T", 160, 9, 6);
        assert_eq!(status(&s, "T", 160).pull_tps, 0.1);
        assert_eq!(status(&s, "T", 160).pull_rt, 9.0);
        assert_eq!(status(&s, "T", 100 + 3600).consume_failed_msgs, 0, "an hour later failures are gone");
    }
}
