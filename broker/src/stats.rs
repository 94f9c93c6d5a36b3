//! The counters and rates admin commands report, as RocketMQ's `BrokerStatsManager`,
//! `StoreStatsService` and `BrokerStats` keep them:
//! - [`GroupGetStats`]: messages pulled per (topic, consumer group) over the last minute
//!   (`GROUP_GET_NUMS`), which GET_CONSUME_STATS answers as `consumeTps`;
//! - [`BrokerTotals`]: records stored (every group-commit write, as Java counts `putMessage`) and
//!   messages pulled since boot, at the last two midnights (UTC), and
//!   per second over 10 s / 1 min / 10 min, for GET_BROKER_RUNTIME_INFO (`mqadmin brokerStatus`,
//!   the dashboard's cluster view).
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
use std::sync::Mutex;
use std::sync::MutexGuard;

use raftmq_common::limits::STATS_KEYS_MAX_COUNT;

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
