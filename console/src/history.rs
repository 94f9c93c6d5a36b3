//! [`History`]: what the charts draw — per topic the sum of its queues' max offsets (the message
//! rate is its slope) and per consumer group its total lag, sampled every
//! [`CONSOLE_SAMPLE_INTERVAL_MS`] by the console's sampler task.
//!
//! Invariants: a series keeps at most [`CONSOLE_HISTORY_SAMPLES_MAX_COUNT`] samples, oldest
//! dropped first; at most [`CONSOLE_SAMPLED_SERIES_MAX_COUNT`] series of each kind exist (a name
//! beyond it is not sampled); a series not sampled for a whole window is dropped (a deleted topic).

use std::collections::BTreeMap;
use std::collections::VecDeque;

use raftmq_common::limits::CONSOLE_HISTORY_SAMPLES_MAX_COUNT;
use raftmq_common::limits::CONSOLE_SAMPLE_INTERVAL_MS;
use raftmq_common::limits::CONSOLE_SAMPLED_SERIES_MAX_COUNT;
use raftmq_common::sync::lock;
use serde::Serialize;

/// The wall clock in ms since the epoch (sample times).
pub fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

/// One sample: time (ms since the epoch) and value.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Point {
    /// When.
    pub t: i64,
    /// What.
    pub v: f64,
}

/// The kinds of series.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Kind {
    /// A topic's summed max offsets.
    TopicOffsets,
    /// A consumer group's total lag.
    GroupLag,
}

/// Every series.
#[derive(Debug, Default)]
pub struct History {
    series: std::sync::Mutex<BTreeMap<(Kind, String), VecDeque<Point>>>,
}

impl History {
    /// No samples.
    pub fn new() -> Self {
        History::default()
    }

    /// Records `value` for `name` at `t_ms` (skipped when the series is new and the limit is reached).
    pub fn record(&self, kind: Kind, name: &str, t_ms: i64, value: f64) {
        let mut series = lock(&self.series);
        let key = (kind, name.to_owned());
        if !series.contains_key(&key)
            && series.keys().filter(|(k, _)| *k == kind).count() >= CONSOLE_SAMPLED_SERIES_MAX_COUNT
        {
            return;
        }
        let points = series.entry(key).or_default();
        points.push_back(Point { t: t_ms, v: value });
        while points.len() > CONSOLE_HISTORY_SAMPLES_MAX_COUNT {
            points.pop_front();
        }
    }

    /// [`Self::record`], unless the newest sample of `name` is less than a sample interval old: a
    /// page showing a series the sampler does not follow (a group with offsets but no
    /// subscription group) samples it as it is viewed, at the sampler's pace at most.
    pub fn record_if_due(&self, kind: Kind, name: &str, t_ms: i64, value: f64) {
        let interval = i64::try_from(CONSOLE_SAMPLE_INTERVAL_MS).unwrap_or(i64::MAX);
        let due = lock(&self.series)
            .get(&(kind, name.to_owned()))
            .and_then(|p| p.back())
            .is_none_or(|p| t_ms - p.t >= interval);
        if due {
            self.record(kind, name, t_ms, value);
        }
    }

    /// Drops series whose newest sample is older than a whole window before `now_ms`.
    pub fn forget_stale(&self, now_ms: i64) {
        let window = i64::try_from(CONSOLE_SAMPLE_INTERVAL_MS).unwrap_or(i64::MAX)
            * i64::try_from(CONSOLE_HISTORY_SAMPLES_MAX_COUNT).unwrap_or(i64::MAX);
        lock(&self.series).retain(|_, points| points.back().is_some_and(|p| now_ms - p.t <= window));
    }

    /// The samples of `name`, oldest first.
    pub fn points(&self, kind: Kind, name: &str) -> Vec<Point> {
        lock(&self.series).get(&(kind, name.to_owned())).map(|p| p.iter().copied().collect()).unwrap_or_default()
    }

    /// Per second between consecutive samples of a cumulative series (offsets): the message rate.
    pub fn rates(&self, kind: Kind, name: &str) -> Vec<Point> {
        rates_of(&self.points(kind, name))
    }

    /// The newest rate of `name`, if two samples exist.
    pub fn last_rate(&self, kind: Kind, name: &str) -> Option<f64> {
        self.rates(kind, name).last().map(|p| p.v)
    }
}

/// Rates between consecutive samples; a fall (a topic deleted and made again) counts as 0.
pub fn rates_of(points: &[Point]) -> Vec<Point> {
    points
        .windows(2)
        .filter(|w| w[1].t > w[0].t)
        .map(|w| {
            let per_s = (w[1].v - w[0].v).max(0.0) * 1_000.0 / (w[1].t - w[0].t) as f64;
            Point { t: w[1].t, v: per_s }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn series_are_bounded_and_rates_are_slopes() {
        let h = History::new();
        for i in 0..(CONSOLE_HISTORY_SAMPLES_MAX_COUNT as i64 + 5) {
            h.record(Kind::TopicOffsets, "T", i * 1_000, (i * 10) as f64);
        }
        let points = h.points(Kind::TopicOffsets, "T");
        assert_eq!(points.len(), CONSOLE_HISTORY_SAMPLES_MAX_COUNT);
        assert_eq!(points[0].t, 5_000);
        assert_eq!(h.last_rate(Kind::TopicOffsets, "T"), Some(10.0));
        assert!(h.points(Kind::GroupLag, "T").is_empty(), "kinds are apart");
        let fell = rates_of(&[Point { t: 0, v: 100.0 }, Point { t: 1_000, v: 0.0 }]);
        assert_eq!(fell, vec![Point { t: 1_000, v: 0.0 }]);
        h.record_if_due(Kind::GroupLag, "g", 0, 1.0);
        h.record_if_due(Kind::GroupLag, "g", 1, 2.0);
        assert_eq!(h.points(Kind::GroupLag, "g").len(), 1, "a sample within the interval is skipped");
        h.forget_stale(1_000_000_000);
        assert!(h.points(Kind::TopicOffsets, "T").is_empty());
    }

    #[test]
    fn series_count_is_bounded() {
        let h = History::new();
        for i in 0..=CONSOLE_SAMPLED_SERIES_MAX_COUNT {
            h.record(Kind::GroupLag, &format!("g{i}"), 0, 1.0);
        }
        assert!(h.points(Kind::GroupLag, &format!("g{CONSOLE_SAMPLED_SERIES_MAX_COUNT}")).is_empty());
        assert_eq!(h.points(Kind::GroupLag, "g0").len(), 1);
    }
}
