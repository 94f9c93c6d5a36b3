//! The counters and rates admin commands report, as RocketMQ's `BrokerStatsManager`,
//! `StoreStatsService` and `BrokerStats` keep them:
//! - [`GroupGetStats`]: messages pulled per (topic, consumer group) over the last minute
//!   (`GROUP_GET_NUMS`), which GET_CONSUME_STATS answers as `consumeTps`;
//! - [`BrokerTotals`]: records stored (every group-commit write, as Java counts `putMessage`) and
//!   messages pulled since boot, at the last two midnights (UTC), and
//!   per second over 10 s / 1 min / 10 min, for GET_BROKER_RUNTIME_INFO (`mqadmin brokerStatus`,
//!   the dashboard's cluster view);
//! - [`StatsTable`]: Java's `StatsItem`s (`TOPIC_PUT_NUMS`/`SIZE` of a topic, `GROUP_GET_NUMS`/
//!   `SIZE` of `topic@group`, `BROKER_PUT/GET_NUMS` of the cluster), sampled every 10 s, 10 min and
//!   hour as Java samples them, on a monotonic clock, for VIEW_BROKER_STATS_DATA (`mqadmin
//!   statsAll`, the dashboard's charts). Every stored record counts under its topic, as for
//!   GET_BROKER_RUNTIME_INFO: sends, send-backs, delayed deliveries and transaction records.
//!
//! Prometheus keeps the raw counters (`metrics.rs`); this keeps the windows a RocketMQ admin tool
//! expects an answer from. Pure state: the caller passes the time.
//!
//! Invariants: a window counts only the seconds before and including `now` that it covers (older
//! buckets are reused, never summed); a midnight snapshot is the total before the first event of
//! the new day, which is the total at midnight; the table holds at most
//! [`STATS_KEYS_MAX_COUNT`] (topic, group) pairs, dropping pairs idle for a whole window first and
//! refusing new pairs (uncounted, never unbounded memory) when every pair is active.

use std::collections::HashMap;
use std::collections::VecDeque;
use std::sync::Mutex;
use std::sync::MutexGuard;

use raftmq_common::limits::STATS_KEYS_MAX_COUNT;
use raftmq_common::protocol::body::broker_stats::BrokerStatsData;
use raftmq_common::protocol::body::broker_stats::BrokerStatsItem;

/// Seconds one rate is averaged over (Java's "in minute" statistics).
pub const RATE_WINDOW_SECONDS: usize = 60;

/// Counts per second over the last [`RATE_WINDOW_SECONDS`], and when it last counted (to tell idle
/// pairs apart).
#[derive(Debug, Clone, Default)]
pub struct RateWindow {
    counter: SecondCounter<RATE_WINDOW_SECONDS>,
    last_second: u64,
}

impl RateWindow {
    /// Adds `n` events at `now_s`.
    pub fn add(&mut self, now_s: u64, n: u64) {
        self.counter.add(now_s, n);
        self.last_second = self.last_second.max(now_s);
    }

    /// Events per second over the window ending at `now_s`.
    pub fn per_second(&self, now_s: u64) -> f64 {
        self.counter.per_second(now_s, RATE_WINDOW_SECONDS)
    }

    fn idle_at(&self, now_s: u64) -> bool {
        self.last_second + (RATE_WINDOW_SECONDS as u64) <= now_s
    }
}

/// Counts per second over the last `N` seconds.
#[derive(Debug, Clone)]
pub struct SecondCounter<const N: usize> {
    /// `(second, count)` per slot `second % N`.
    slots: [(u64, u64); N],
}

impl<const N: usize> Default for SecondCounter<N> {
    fn default() -> Self {
        SecondCounter { slots: [(0, 0); N] }
    }
}

impl<const N: usize> SecondCounter<N> {
    /// Adds `n` events at `now_s`.
    pub fn add(&mut self, now_s: u64, n: u64) {
        let slot = &mut self.slots[(now_s % N as u64) as usize];
        if slot.0 != now_s {
            *slot = (now_s, 0);
        }
        slot.1 = slot.1.saturating_add(n);
    }

    /// Events per second over the `seconds` (at most `N`) ending at `now_s`.
    pub fn per_second(&self, now_s: u64, seconds: usize) -> f64 {
        let seconds = seconds.clamp(1, N);
        let oldest = now_s.saturating_sub(seconds as u64 - 1);
        let sum: u64 = self.slots.iter().filter(|(s, _)| *s >= oldest && *s <= now_s).map(|(_, n)| *n).sum();
        sum as f64 / seconds as f64
    }
}

/// Seconds the broker-wide rates look back at most (Java's 10-minute TPS).
pub const BROKER_RATE_WINDOW_SECONDS: usize = 600;

const DAY_MS: u64 = 86_400_000;

/// Messages stored (`put`) or pulled (`get`) by this replica.
#[derive(Debug, Clone, Default)]
struct Direction {
    total: u64,
    today_morning: u64,
    yesterday_morning: u64,
    per_second: SecondCounter<BROKER_RATE_WINDOW_SECONDS>,
}

impl Direction {
    /// Java's `%.2f %.2f %.2f` of the rate over 10 s, 1 min and 10 min.
    fn tps(&self, now_s: u64) -> String {
        let r = |s| self.per_second.per_second(now_s, s);
        format!("{:.2} {:.2} {:.2}", r(10), r(60), r(600))
    }
}

/// Broker-wide message counts for GET_BROKER_RUNTIME_INFO.
#[derive(Debug)]
pub struct BrokerTotals {
    boot_ms: u64,
    inner: Mutex<TotalsInner>,
}

#[derive(Debug)]
struct TotalsInner {
    day: u64,
    put: Direction,
    get: Direction,
}

/// What GET_BROKER_RUNTIME_INFO reports of [`BrokerTotals`], as its `KVTable` keys name them.
#[derive(Debug, Clone, PartialEq)]
pub struct TotalsView {
    /// `(key, value)` in Java's names.
    pub entries: Vec<(&'static str, String)>,
}

impl BrokerTotals {
    /// Counting from `boot_ms` (the midnight snapshots of the boot day are 0, as in Java).
    pub fn new(boot_ms: u64) -> Self {
        let inner = TotalsInner { day: boot_ms / DAY_MS, put: Direction::default(), get: Direction::default() };
        BrokerTotals { boot_ms, inner: Mutex::new(inner) }
    }

    /// When counting began (ms).
    pub fn boot_ms(&self) -> u64 {
        self.boot_ms
    }

    /// `messages` were stored at `now_ms`.
    pub fn on_put(&self, messages: u64, now_ms: u64) {
        let mut inner = self.lock();
        inner.roll(now_ms);
        inner.put.total = inner.put.total.saturating_add(messages);
        inner.put.per_second.add(now_ms / 1000, messages);
    }

    /// `messages` were handed to a consumer at `now_ms`.
    pub fn on_get(&self, messages: u64, now_ms: u64) {
        let mut inner = self.lock();
        inner.roll(now_ms);
        inner.get.total = inner.get.total.saturating_add(messages);
        inner.get.per_second.add(now_ms / 1000, messages);
    }

    /// The counters at `now_ms`.
    pub fn view(&self, now_ms: u64) -> TotalsView {
        let mut inner = self.lock();
        inner.roll(now_ms);
        let now_s = now_ms / 1000;
        let entries = vec![
            ("msgPutTotalYesterdayMorning", inner.put.yesterday_morning.to_string()),
            ("msgPutTotalTodayMorning", inner.put.today_morning.to_string()),
            ("msgPutTotalTodayNow", inner.put.total.to_string()),
            ("msgGetTotalYesterdayMorning", inner.get.yesterday_morning.to_string()),
            ("msgGetTotalTodayMorning", inner.get.today_morning.to_string()),
            ("msgGetTotalTodayNow", inner.get.total.to_string()),
            ("putTps", inner.put.tps(now_s)),
            ("getTransferedTps", inner.get.tps(now_s)),
        ];
        TotalsView { entries }
    }

    fn lock(&self) -> MutexGuard<'_, TotalsInner> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }
}

impl TotalsInner {
    /// Takes the midnight snapshots of every day boundary since the last event.
    fn roll(&mut self, now_ms: u64) {
        let day = now_ms / DAY_MS;
        if day <= self.day {
            return;
        }
        for d in [&mut self.put, &mut self.get] {
            // Nothing happened since the last event, so the total then is the total at each
            // midnight in between: a gap of several days leaves both snapshots equal.
            d.yesterday_morning = if day == self.day + 1 { d.today_morning } else { d.total };
            d.today_morning = d.total;
        }
        self.day = day;
    }
}

/// Java's `runtime` string: `[ 0 days, 1 hours, 2 minutes, 3 seconds ]`.
pub fn runtime_string(elapsed_ms: u64) -> String {
    let s = elapsed_ms / 1000;
    format!("[ {} days, {} hours, {} minutes, {} seconds ]", s / 86_400, s % 86_400 / 3600, s % 3600 / 60, s % 60)
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

/// Java's `BrokerStatsManager` names of the statistics kept.
pub mod stats_name {
    /// Messages stored, by topic.
    pub const TOPIC_PUT_NUMS: &str = "TOPIC_PUT_NUMS";
    /// Bytes stored, by topic.
    pub const TOPIC_PUT_SIZE: &str = "TOPIC_PUT_SIZE";
    /// Messages pulled, by `topic@group`.
    pub const GROUP_GET_NUMS: &str = "GROUP_GET_NUMS";
    /// Bytes pulled, by `topic@group`.
    pub const GROUP_GET_SIZE: &str = "GROUP_GET_SIZE";
    /// Messages stored, by cluster name.
    pub const BROKER_PUT_NUMS: &str = "BROKER_PUT_NUMS";
    /// Messages pulled, by cluster name.
    pub const BROKER_GET_NUMS: &str = "BROKER_GET_NUMS";
}

/// How one window of a [`StatsItem`] samples: every `period_ms`, the last `kept` samples (Java's
/// `samplingInSeconds` / `samplingInMinutes` / `samplingInHour`).
#[derive(Debug, Clone, Copy)]
struct Sampling {
    period_ms: u64,
    kept: usize,
}

const MINUTE: Sampling = Sampling { period_ms: 10_000, kept: 7 };
const HOUR: Sampling = Sampling { period_ms: 600_000, kept: 7 };
const DAY: Sampling = Sampling { period_ms: 3_600_000, kept: 25 };

/// The item's running totals at one sampling time (`CallSnapshot`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Snapshot {
    value: u64,
    times: u64,
    at_ms: u64,
}

/// Java's `StatsItem`: a running sum and the number of additions, with the samples of each window.
/// Samples are taken when the item is touched, at the period boundaries Java's timer would have
/// hit since the last one (the totals did not move in between: every addition samples first).
#[derive(Debug, Clone)]
pub struct StatsItem {
    value: u64,
    times: u64,
    windows: [VecDeque<Snapshot>; 3],
    last_add_ms: u64,
}

const SAMPLINGS: [Sampling; 3] = [MINUTE, HOUR, DAY];

impl StatsItem {
    /// An item first touched at `now_ms`.
    pub fn new(now_ms: u64) -> Self {
        let first = Snapshot { value: 0, times: 0, at_ms: now_ms };
        StatsItem { value: 0, times: 0, windows: std::array::from_fn(|_| VecDeque::from([first])), last_add_ms: now_ms }
    }

    fn sample(&mut self, now_ms: u64) {
        for (window, sampling) in self.windows.iter_mut().zip(SAMPLINGS) {
            let Some(last) = window.back().copied() else { continue };
            if now_ms < last.at_ms.saturating_add(sampling.period_ms) {
                continue;
            }
            let due = (now_ms - last.at_ms) / sampling.period_ms;
            // Only the last `kept` boundaries can stay; earlier ones would be dropped at once.
            let first = due.saturating_sub(sampling.kept as u64).max(1);
            for k in first..=due {
                let at_ms = last.at_ms + k * sampling.period_ms;
                window.push_back(Snapshot { value: self.value, times: self.times, at_ms });
            }
            while window.len() > sampling.kept {
                window.pop_front();
            }
        }
    }

    /// Adds `value` (one addition) at `now_ms`.
    pub fn add(&mut self, value: u64, now_ms: u64) {
        self.sample(now_ms);
        self.value = self.value.saturating_add(value);
        self.times = self.times.saturating_add(1);
        self.last_add_ms = now_ms;
    }

    /// Adds `value` without counting an addition (Java's `BROKER_*_NUMS`, whose avgpt stays 0).
    pub fn add_value(&mut self, value: u64, now_ms: u64) {
        self.sample(now_ms);
        self.value = self.value.saturating_add(value);
        self.last_add_ms = now_ms;
    }

    /// The three windows as of `now_ms` (`computeStatsData` of each: first sample to last).
    pub fn view(&mut self, now_ms: u64) -> BrokerStatsData {
        self.sample(now_ms);
        let item = |window: &VecDeque<Snapshot>| match (window.front(), window.back()) {
            (Some(first), Some(last)) => {
                let sum = last.value - first.value;
                let times = last.times - first.times;
                let ms = last.at_ms - first.at_ms;
                BrokerStatsItem {
                    sum,
                    tps: if ms > 0 { sum as f64 * 1000.0 / ms as f64 } else { 0.0 },
                    avgpt: if times > 0 { sum as f64 / times as f64 } else { 0.0 },
                }
            }
            _ => BrokerStatsItem::default(),
        };
        BrokerStatsData {
            stats_minute: item(&self.windows[0]),
            stats_hour: item(&self.windows[1]),
            stats_day: item(&self.windows[2]),
        }
    }
}

/// What one topic's sends add: `TOPIC_PUT_NUMS` and `TOPIC_PUT_SIZE`.
#[derive(Debug, Clone)]
struct PutItems {
    nums: StatsItem,
    size: StatsItem,
}

/// What one group's pulls of one topic add: `GROUP_GET_NUMS` and `GROUP_GET_SIZE`.
#[derive(Debug, Clone)]
struct GetItems {
    nums: StatsItem,
    size: StatsItem,
}

#[derive(Debug)]
struct Tables {
    /// `BROKER_PUT_NUMS` / `BROKER_GET_NUMS` of this broker's cluster (Java adds their values
    /// without counting additions, so their avgpt is 0).
    broker_put: StatsItem,
    broker_get: StatsItem,
    puts: HashMap<String, PutItems>,
    /// topic → group: looked up by `&str` on every pull, without allocating a `topic@group` key.
    gets: HashMap<String, HashMap<String, GetItems>>,
    get_count: usize,
    /// No sweep for idle items before this (one per [`STATS_SWEEP_PERIOD_MS`] at most).
    next_sweep_ms: u64,
}

/// Items idle this long are dropped when a table is full.
const STATS_IDLE_MS: u64 = 24 * 3_600_000;
/// A full table looks for idle items at most this often; in between, a new key is not counted.
const STATS_SWEEP_PERIOD_MS: u64 = 60_000;

/// Java's `BrokerStatsManager` items this broker keeps, by statistic and key. Each kind (topics,
/// `topic@group` pairs) holds at most [`STATS_KEYS_MAX_COUNT`] keys: when one is full, items with
/// no addition for a day go first (one sweep a minute at most), and past that a new key is not
/// counted (never unbounded memory). Time is monotonic, from the table's creation: a wall-clock
/// step cannot freeze or flush the windows.
#[derive(Debug)]
pub struct StatsTable {
    epoch: std::time::Instant,
    cluster: String,
    tables: Mutex<Tables>,
}

impl StatsTable {
    /// An empty table for a broker of `cluster` (the key of `BROKER_PUT_NUMS` / `BROKER_GET_NUMS`).
    pub fn new(cluster: impl Into<String>) -> Self {
        StatsTable {
            epoch: std::time::Instant::now(),
            cluster: cluster.into(),
            tables: Mutex::new(Tables {
                broker_put: StatsItem::new(0),
                broker_get: StatsItem::new(0),
                puts: HashMap::new(),
                gets: HashMap::new(),
                get_count: 0,
                next_sweep_ms: 0,
            }),
        }
    }

    /// Milliseconds since the table was made: the clock every item is sampled by.
    pub fn now_ms(&self) -> u64 {
        u64::try_from(self.epoch.elapsed().as_millis()).unwrap_or(u64::MAX)
    }

    /// One put of `messages` records, `bytes` long, to `topic` (per run of one topic in a write).
    pub fn on_put(&self, topic: &str, messages: u64, bytes: u64, now_ms: u64) {
        let mut t = self.lock();
        t.broker_put.add_value(messages, now_ms);
        if let Some(items) = t.puts.get_mut(topic) {
            items.nums.add(messages, now_ms);
            items.size.add(bytes, now_ms);
            return;
        }
        if t.puts.len() >= STATS_KEYS_MAX_COUNT && !t.sweep(now_ms) {
            return;
        }
        let (mut nums, mut size) = (StatsItem::new(now_ms), StatsItem::new(now_ms));
        nums.add(messages, now_ms);
        size.add(bytes, now_ms);
        t.puts.insert(topic.to_owned(), PutItems { nums, size });
    }

    /// One pull by `group` that returned `messages` records of `topic`, `bytes` long.
    pub fn on_get(&self, topic: &str, group: &str, messages: u64, bytes: u64, now_ms: u64) {
        let mut t = self.lock();
        t.broker_get.add_value(messages, now_ms);
        if let Some(items) = t.gets.get_mut(topic).and_then(|groups| groups.get_mut(group)) {
            items.nums.add(messages, now_ms);
            items.size.add(bytes, now_ms);
            return;
        }
        if t.get_count >= STATS_KEYS_MAX_COUNT && !t.sweep(now_ms) {
            return;
        }
        let (mut nums, mut size) = (StatsItem::new(now_ms), StatsItem::new(now_ms));
        nums.add(messages, now_ms);
        size.add(bytes, now_ms);
        t.gets.entry(topic.to_owned()).or_default().insert(group.to_owned(), GetItems { nums, size });
        t.get_count += 1;
    }

    /// `name` of `key` as of `now_ms`; `None` when nothing was ever counted under it (Java: "not
    /// exist"). Keys: the topic for `TOPIC_*`, `topic@group` for `GROUP_GET_*`, the cluster name
    /// for `BROKER_*`.
    pub fn view(&self, name: &str, key: &str, now_ms: u64) -> Option<BrokerStatsData> {
        let mut t = self.lock();
        let item = match name {
            stats_name::BROKER_PUT_NUMS if key == self.cluster => &mut t.broker_put,
            stats_name::BROKER_GET_NUMS if key == self.cluster => &mut t.broker_get,
            stats_name::TOPIC_PUT_NUMS => &mut t.puts.get_mut(key)?.nums,
            stats_name::TOPIC_PUT_SIZE => &mut t.puts.get_mut(key)?.size,
            stats_name::GROUP_GET_NUMS | stats_name::GROUP_GET_SIZE => {
                let (topic, group) = key.split_once('@')?;
                let items = t.gets.get_mut(topic)?.get_mut(group)?;
                if name == stats_name::GROUP_GET_NUMS { &mut items.nums } else { &mut items.size }
            }
            _ => return None,
        };
        Some(item.view(now_ms))
    }

    /// Forgets a deleted topic (its puts and every group's pulls of it), as Java's `onTopicDeleted`.
    pub fn remove_topic(&self, topic: &str) {
        let mut t = self.lock();
        t.puts.remove(topic);
        if let Some(groups) = t.gets.remove(topic) {
            t.get_count -= groups.len();
        }
    }

    /// Forgets a deleted group's pulls, as Java's `onGroupDeleted`.
    pub fn remove_group(&self, group: &str) {
        let mut t = self.lock();
        let mut removed = 0;
        t.gets.retain(|_, groups| {
            removed += usize::from(groups.remove(group).is_some());
            !groups.is_empty()
        });
        t.get_count -= removed;
    }

    fn lock(&self) -> MutexGuard<'_, Tables> {
        self.tables.lock().unwrap_or_else(|p| p.into_inner())
    }
}

impl Tables {
    /// Drops items idle for [`STATS_IDLE_MS`] if a sweep is due; whether one ran.
    fn sweep(&mut self, now_ms: u64) -> bool {
        if now_ms < self.next_sweep_ms {
            return false;
        }
        self.next_sweep_ms = now_ms.saturating_add(STATS_SWEEP_PERIOD_MS);
        let idle_before = now_ms.saturating_sub(STATS_IDLE_MS);
        self.puts.retain(|_, items| items.nums.last_add_ms >= idle_before);
        self.gets.retain(|_, groups| {
            groups.retain(|_, items| items.nums.last_add_ms >= idle_before);
            !groups.is_empty()
        });
        self.get_count = self.gets.values().map(HashMap::len).sum();
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stats_item_reports_each_window_as_javas_sampling_would() {
        let t0 = 1_000_000;
        let mut item = StatsItem::new(t0);
        // 10 puts of 3 messages, one every 5 s, over 50 s.
        for i in 0..10 {
            item.add(3, t0 + i * 5_000);
        }
        // At t0 + 60 s the minute window holds samples t0, t0+10 s, ..., t0+60 s.
        let v = item.view(t0 + 60_000);
        assert_eq!(v.stats_minute.sum, 30);
        assert_eq!(v.stats_minute.tps, 0.5);
        assert_eq!(v.stats_minute.avgpt, 3.0);
        // The hour and day windows have one sample only so far: nothing to compare yet, as in Java.
        assert_eq!((v.stats_hour.sum, v.stats_day.sum), (0, 0));
        // Two minutes later the puts left the minute window; the first ten-minute sample holds them.
        let v = item.view(t0 + 180_000);
        assert_eq!((v.stats_minute.sum, v.stats_minute.tps), (0, 0.0));
        let v = item.view(t0 + 600_000);
        assert_eq!(v.stats_hour.sum, 30);
        assert_eq!(v.stats_hour.tps, 0.05);
        // A long idle gap fills the windows with unchanged samples, never more than kept.
        let v = item.view(t0 + 100 * 3_600_000);
        assert_eq!((v.stats_minute.sum, v.stats_hour.sum, v.stats_day.sum), (0, 0, 0));
        assert!(item.windows.iter().zip(SAMPLINGS).all(|(w, s)| w.len() <= s.kept));
        item.add(6, t0 + 100 * 3_600_000 + 1);
        let v = item.view(t0 + 100 * 3_600_000 + 10_000);
        assert_eq!((v.stats_minute.sum, v.stats_minute.avgpt), (6, 6.0));
    }

    #[test]
    fn the_stats_table_knows_only_what_was_counted_and_forgets_deleted_names() {
        let table = StatsTable::new("DefaultCluster");
        table.on_put("T", 2, 2_000, 10_000);
        table.on_get("T", "g", 2, 2_000, 10_000);
        for (name, key) in [
            (stats_name::TOPIC_PUT_NUMS, "T"),
            (stats_name::TOPIC_PUT_SIZE, "T"),
            (stats_name::GROUP_GET_NUMS, "T@g"),
            (stats_name::GROUP_GET_SIZE, "T@g"),
            (stats_name::BROKER_PUT_NUMS, "DefaultCluster"),
            (stats_name::BROKER_GET_NUMS, "DefaultCluster"),
        ] {
            assert!(table.view(name, key, 20_000).is_some(), "{name} {key}");
        }
        for (name, key) in [
            (stats_name::TOPIC_PUT_NUMS, "U"),
            (stats_name::GROUP_GET_NUMS, "T"),
            (stats_name::GROUP_GET_NUMS, "T@h"),
            (stats_name::BROKER_PUT_NUMS, "OtherCluster"),
            ("SNDBCK_PUT_NUMS", "T"),
        ] {
            assert!(table.view(name, key, 20_000).is_none(), "{name} {key}");
        }
        // The broker items add values only: Java's avgpt of them is 0.
        let broker = table.view(stats_name::BROKER_PUT_NUMS, "DefaultCluster", 20_000).unwrap();
        assert_eq!((broker.stats_minute.sum, broker.stats_minute.avgpt), (2, 0.0));
        table.remove_group("g");
        assert!(table.view(stats_name::GROUP_GET_NUMS, "T@g", 20_000).is_none());
        table.on_get("T", "g", 1, 10, 30_000);
        table.remove_topic("T");
        assert!(table.view(stats_name::TOPIC_PUT_NUMS, "T", 40_000).is_none());
        assert!(table.view(stats_name::GROUP_GET_NUMS, "T@g", 40_000).is_none());
        assert_eq!(table.lock().get_count, 0);
    }

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
    fn broker_totals_keep_since_boot_midnight_snapshots_and_three_rates() {
        let boot = 10 * DAY_MS + 1_000;
        let t = BrokerTotals::new(boot);
        t.on_put(100, boot + 1_000);
        t.on_get(40, boot + 2_000);
        let get = |v: &TotalsView, k: &str| v.entries.iter().find(|(n, _)| *n == k).map(|(_, v)| v.clone());
        let v = t.view(boot + 5_000);
        assert_eq!(get(&v, "msgPutTotalTodayNow").as_deref(), Some("100"));
        assert_eq!(get(&v, "msgPutTotalTodayMorning").as_deref(), Some("0"), "boot day: 0, as in Java");
        assert_eq!(get(&v, "putTps").as_deref(), Some("10.00 1.67 0.17"));
        // The next day: this morning's snapshot is the total before its first event.
        t.on_put(5, 11 * DAY_MS + 10);
        let v = t.view(11 * DAY_MS + 20);
        assert_eq!(get(&v, "msgPutTotalTodayMorning").as_deref(), Some("100"));
        assert_eq!(get(&v, "msgPutTotalYesterdayMorning").as_deref(), Some("0"));
        assert_eq!(get(&v, "msgPutTotalTodayNow").as_deref(), Some("105"));
        assert_eq!(get(&v, "msgGetTotalTodayMorning").as_deref(), Some("40"));
        // Three quiet days later both snapshots are the total.
        let v = t.view(14 * DAY_MS);
        assert_eq!(get(&v, "msgPutTotalYesterdayMorning").as_deref(), Some("105"));
        assert_eq!(get(&v, "msgPutTotalTodayMorning").as_deref(), Some("105"));
        assert_eq!(get(&v, "putTps").as_deref(), Some("0.00 0.00 0.00"));
        assert_eq!(runtime_string(90_061_000), "[ 1 days, 1 hours, 1 minutes, 1 seconds ]");
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
