//! `BrokerMetrics`: this replica's Prometheus metrics, rendered by `GET /metrics` on the admin port.
//!
//! ```text
//! processors::send ─on_send─▶ ┐                      ┌─▶ counters + histograms (PrometheusRecorder)
//! processors::pull ─on_pull─▶ ┴─ BrokerMetrics ──────┤
//! GET /metrics ─▶ render ─ recorder text ────────────┴─▶ + scrape-time families read from the store and replica:
//!                  Raft status, flusher latency, consumer lag, delayed messages waiting, disk usage,
//!                  table sizes
//! ```
//!
//! One recorder **per broker**, never the process-global one: tests run several brokers in one
//! process, and `metrics` allows a single global recorder. Events are recorded through
//! `metrics::with_local_recorder` on this broker's own `PrometheusRecorder`, so two brokers in one
//! process never mix their series. Every series carries the labels `cluster`, `broker_name` and
//! `node_id`, so series scraped from several replicas stay apart after aggregation too.
//!
//! Values that already live in the replica (Raft indexes, fsync latency, lag) are not mirrored into
//! the recorder: they are read at scrape time and rendered after the recorder's text, so a deleted
//! group's lag disappears with it and nothing is kept twice. Label cardinality is bounded: topics
//! and groups appear only after a successful send or pull (so they exist), and consumer-lag series
//! are capped at [`METRICS_CONSUMER_LAG_SERIES_MAX_COUNT`].
//!
//! Names follow RocketMQ's exporter (`rocketmq_*`) with raftmq's own under `raftmq_*`.
//!
//! The handles of the per-send and per-pull series are looked up once and kept: building a
//! labelled key and finding it in the registry on every send cost 2.5 % of a busy broker's CPU.

use std::collections::BTreeMap;
use std::collections::HashMap;
use std::fmt::Write as _;
use std::path::Path;
use std::sync::RwLock;
use std::time::Duration;

use metrics_exporter_prometheus::PrometheusBuilder;
use metrics_exporter_prometheus::PrometheusHandle;
use metrics_exporter_prometheus::PrometheusRecorder;
use raftmq_common::limits::METRICS_CONSUMER_LAG_SERIES_MAX_COUNT;
use raftmq_common::limits::METRICS_UPKEEP_INTERVAL_MS;
use raftmq_common::protocol::body::consumer_offset::ConsumerOffsetSerializeWrapper;
use raftmq_raft::FlushLatency;
use raftmq_raft::NodeStatus;
use raftmq_raft::Role;
use tokio_util::sync::CancellationToken;

use crate::services::disk_guard::disk_full_reason;
use crate::services::replica::Replica;
use crate::state::store::MessageStore;

/// Messages stored, by topic (counter).
pub const MESSAGES_IN_TOTAL: &str = "rocketmq_messages_in_total";
/// Messages handed to consumers by pulls, by topic and group (counter).
pub const MESSAGES_OUT_TOTAL: &str = "rocketmq_messages_out_total";
/// Time from a send request's arrival to its SEND_OK (histogram, seconds).
pub const SEND_LATENCY_SECONDS: &str = "rocketmq_send_latency_seconds";
/// Messages a group has not consumed yet, by group, topic and queue (gauge, at scrape).
pub const CONSUMER_LAG: &str = "rocketmq_consumer_lag";
/// Topics on this broker (gauge, at scrape).
pub const TOPIC_NUMBER: &str = "rocketmq_topic_number";
/// Subscription groups on this broker (gauge, at scrape).
pub const CONSUMER_GROUP_NUMBER: &str = "rocketmq_consumer_group_number";
/// Current Raft term (gauge, at scrape).
pub const RAFT_TERM: &str = "raftmq_raft_term";
/// Committed log index as this replica knows it (gauge, at scrape).
pub const RAFT_COMMIT_INDEX: &str = "raftmq_raft_commit_index";
/// Last applied log index (gauge, at scrape).
pub const RAFT_APPLIED_INDEX: &str = "raftmq_raft_applied_index";
/// Last log index (gauge, at scrape).
pub const RAFT_LAST_LOG_INDEX: &str = "raftmq_raft_last_log_index";
/// 1 on the leader, else 0 (gauge, at scrape).
pub const RAFT_IS_LEADER: &str = "raftmq_raft_is_leader";
/// On the leader, per follower: entries of the leader's log it has not matched yet (gauge, at
/// scrape; label `follower`, its Raft node id).
pub const RAFT_FOLLOWER_LAG_ENTRIES: &str = "raftmq_raft_follower_lag_entries";
/// Time a group commit of the Raft log took to sync (histogram, seconds, at scrape).
pub const FSYNC_LATENCY_SECONDS: &str = "raftmq_fsync_latency_seconds";
/// Sync system calls of the Raft log (counter, at scrape).
pub const FSYNC_TOTAL: &str = "raftmq_fsync_total";
/// CommitLog bytes handed back to the kernel's page cache behind the replica's window
/// (`raftPageCache{Leader,Follower}WindowBytes`; counter, at scrape).
pub const PAGE_CACHE_DROPPED_BYTES_TOTAL: &str = "raftmq_page_cache_dropped_bytes_total";
/// Used fraction of the file system holding the store, 0..1 (gauge, at scrape).
pub const DISK_USED_RATIO: &str = "raftmq_disk_used_ratio";
/// Delayed messages stored in a delay level's queue and not delivered yet, timer messages between
/// hops included, by level (gauge, at scrape; levels that never held a message are left out).
pub const DELAY_MESSAGES_WAITING: &str = "raftmq_delay_messages_waiting";
/// POP deliveries in flight (handed out, neither acked nor revived), by consumer group (gauge, at
/// scrape; groups with none are left out).
pub const POP_IN_FLIGHT: &str = "raftmq_pop_in_flight";
/// 1 while the store has a fault of this `kind` (`damaged`, `poisoned`: a failed log append or
/// fsync such as ENOSPC, `apply_failed`: a failed ConsumeQueue write), with its `reason`; else 0
/// (gauge, at scrape). Any 1 keeps the replica unready.
pub const STORAGE_FAULT: &str = "raftmq_storage_fault";
/// CommitLog reads that failed with an I/O error (EIO, EMFILE, ...), not for a record that is
/// gone (counter, at scrape). What needed the record retries it later.
pub const COMMITLOG_READ_ERRORS_TOTAL: &str = "raftmq_commitlog_read_errors_total";

/// Bucket bounds of [`SEND_LATENCY_SECONDS`].
const SEND_LATENCY_BUCKETS_SECONDS: &[f64] =
    &[0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0];

/// One broker's metrics.
pub struct BrokerMetrics {
    recorder: PrometheusRecorder,
    handle: PrometheusHandle,
    /// `cluster`, `broker_name`, `node_id`: on every series.
    labels: Vec<(&'static str, String)>,
    send_latency: ::metrics::Histogram,
    /// [`MESSAGES_IN_TOTAL`] by topic.
    messages_in: CounterCache<String>,
    /// [`MESSAGES_OUT_TOTAL`] by (topic, group).
    messages_out: CounterCache<(String, String)>,
}

/// Counter handles by label values, registered on first use. Grows only with topics (and groups)
/// that stored or served a message, as the recorder's own series do.
type CounterCache<K> = RwLock<HashMap<K, ::metrics::Counter>>;

/// The cached counter of `key`, registered through `register` the first time.
fn cached_counter<K, Q>(
    cache: &CounterCache<K>,
    key: &Q,
    register: impl FnOnce() -> ::metrics::Counter,
) -> ::metrics::Counter
where
    K: std::borrow::Borrow<Q> + std::hash::Hash + Eq,
    Q: std::hash::Hash + Eq + ToOwned<Owned = K> + ?Sized,
{
    // A poisoned lock only means another thread panicked mid-insert; the map is still whole.
    if let Some(counter) = cache.read().unwrap_or_else(|e| e.into_inner()).get(key) {
        return counter.clone();
    }
    let mut map = cache.write().unwrap_or_else(|e| e.into_inner());
    map.entry(key.to_owned()).or_insert_with(register).clone()
}

impl std::fmt::Debug for BrokerMetrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BrokerMetrics").field("labels", &self.labels).finish()
    }
}

impl BrokerMetrics {
    /// A recorder of its own for the replica `node_id` of `broker_name` in `cluster`.
    pub fn new(cluster: &str, broker_name: &str, node_id: u64) -> Self {
        let labels = vec![
            ("cluster", cluster.to_owned()),
            ("broker_name", broker_name.to_owned()),
            ("node_id", node_id.to_string()),
        ];
        // Only fails for an empty bucket list, which this is not; the fallback renders a summary.
        let mut builder = PrometheusBuilder::new()
            .set_buckets_for_metric(
                metrics_exporter_prometheus::Matcher::Full(SEND_LATENCY_SECONDS.to_owned()),
                SEND_LATENCY_BUCKETS_SECONDS,
            )
            .unwrap_or_else(|_| PrometheusBuilder::new());
        for (k, v) in &labels {
            builder = builder.add_global_label(*k, v.clone());
        }
        let recorder = builder.build_recorder();
        let handle = recorder.handle();
        let send_latency = ::metrics::with_local_recorder(&recorder, || {
            ::metrics::describe_counter!(MESSAGES_IN_TOTAL, "Messages stored, by topic.");
            ::metrics::describe_counter!(MESSAGES_OUT_TOTAL, "Messages handed to consumers by pulls.");
            ::metrics::describe_histogram!(
                SEND_LATENCY_SECONDS,
                ::metrics::Unit::Seconds,
                "Time from a send request's arrival to its SEND_OK."
            );
            ::metrics::histogram!(SEND_LATENCY_SECONDS)
        });
        BrokerMetrics {
            recorder,
            handle,
            labels,
            send_latency,
            messages_in: CounterCache::default(),
            messages_out: CounterCache::default(),
        }
    }

    /// A send of `messages` records to `topic` was stored and answered SEND_OK after `latency`.
    pub fn on_send(&self, topic: &str, messages: usize, latency: Duration) {
        let counter = cached_counter(&self.messages_in, topic, || {
            ::metrics::with_local_recorder(
                &self.recorder,
                || ::metrics::counter!(MESSAGES_IN_TOTAL, "topic" => topic.to_owned()),
            )
        });
        counter.increment(messages as u64);
        self.send_latency.record(latency.as_secs_f64());
    }

    /// A pull of `group` returned `messages` records of `topic`.
    pub fn on_pull(&self, topic: &str, group: &str, messages: usize) {
        if messages == 0 {
            return;
        }
        let key = (topic.to_owned(), group.to_owned());
        let counter = cached_counter(&self.messages_out, &key, || {
            ::metrics::with_local_recorder(
                &self.recorder,
                || ::metrics::counter!(MESSAGES_OUT_TOTAL, "topic" => topic.to_owned(), "group" => group.to_owned()),
            )
        });
        counter.increment(messages as u64);
    }

    /// Drains histogram samples into their buckets; without it an unscraped broker keeps every sample.
    pub fn run_upkeep(&self) {
        self.handle.run_upkeep();
    }

    /// The Prometheus text of this broker: recorded series, then the scrape-time families.
    pub fn render(&self, store: &MessageStore, replica: &Replica) -> String {
        let mut out = self.handle.render();
        render_scrape(&mut out, &self.labels, &Scrape::collect(store, replica));
        out
    }
}

/// Runs [`BrokerMetrics::run_upkeep`] every [`METRICS_UPKEEP_INTERVAL_MS`] until `cancel` fires.
pub async fn upkeep(metrics: &BrokerMetrics, cancel: CancellationToken) {
    let mut interval = tokio::time::interval(Duration::from_millis(METRICS_UPKEEP_INTERVAL_MS));
    loop {
        tokio::select! {
            biased;
            _ = cancel.cancelled() => break,
            _ = interval.tick() => metrics.run_upkeep(),
        }
    }
}

/// One queue's consumer lag.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LagRow {
    /// Consumer group.
    pub group: String,
    /// Topic.
    pub topic: String,
    /// Queue.
    pub queue_id: i32,
    /// Messages between the committed offset and the queue's max offset (never negative).
    pub lag: u64,
}

/// What one scrape reads from the replica.
#[derive(Debug, Clone)]
pub struct Scrape {
    /// Raft view of this replica.
    pub status: NodeStatus,
    /// Flusher sync latency.
    pub flush: FlushLatency,
    /// Sync system calls so far.
    pub fsyncs: u64,
    /// CommitLog bytes dropped from the page cache so far.
    pub page_cache_dropped_bytes: u64,
    /// Used fraction of the store's file system, when it can be read.
    pub disk_used_ratio: Option<f64>,
    /// Consumer lag rows (at most [`METRICS_CONSUMER_LAG_SERIES_MAX_COUNT`]).
    pub lags: Vec<LagRow>,
    /// (group, POP deliveries in flight) of every group with any (at most
    /// [`METRICS_CONSUMER_LAG_SERIES_MAX_COUNT`]).
    pub pop_in_flight: Vec<(String, usize)>,
    /// (delay level, messages waiting) of every level whose queue ever held a message.
    pub delay_waiting: Vec<(usize, u64)>,
    /// Topics.
    pub topics: usize,
    /// Subscription groups.
    pub groups: usize,
    /// Why applying to local storage failed, if it did.
    pub apply_failure: Option<String>,
    /// Why this replica cannot take writes for lack of disk space, while so.
    pub disk_full: Option<String>,
    /// CommitLog reads failed with an I/O error so far.
    pub commitlog_read_errors: u64,
}

impl Scrape {
    /// Reads everything a scrape renders (never holds two store locks at once).
    pub fn collect(store: &MessageStore, replica: &Replica) -> Scrape {
        let node = replica.node();
        let (offsets, topics, groups, pop_in_flight) = {
            let meta = store.metadata();
            let pop = meta.pop.in_flight_by_group();
            let pop =
                pop.into_iter().take(METRICS_CONSUMER_LAG_SERIES_MAX_COUNT).map(|(g, n)| (g.to_owned(), n)).collect();
            (meta.offsets.to_wrapper().offset_table, meta.topics.len(), meta.groups.iter().count(), pop)
        };
        let status = node.status();
        Scrape {
            disk_full: disk_full_reason(&status, store),
            status,
            flush: node.store().flush_latency(),
            fsyncs: node.store().fsync_count(),
            page_cache_dropped_bytes: node.store().page_cache_dropped_bytes(),
            disk_used_ratio: disk_used_ratio(store.store_root()),
            lags: consumer_lags(store, &offsets),
            pop_in_flight,
            // Levels that never held a message are left out.
            delay_waiting: store
                .level_backlogs()
                .into_iter()
                .filter(|b| b.stored > 0)
                .map(|b| (b.level, b.waiting()))
                .collect(),
            topics,
            groups,
            apply_failure: store.failure(),
            commitlog_read_errors: store.commit_log().read_errors(),
        }
    }
}

fn consumer_lags(store: &MessageStore, offsets: &BTreeMap<String, BTreeMap<i32, i64>>) -> Vec<LagRow> {
    let queues = store.consume_queues();
    let mut rows = Vec::new();
    for (key, per_queue) in offsets {
        let Some((topic, group)) = ConsumerOffsetSerializeWrapper::split_key(key) else { continue };
        for (queue_id, committed) in per_queue {
            if rows.len() >= METRICS_CONSUMER_LAG_SERIES_MAX_COUNT {
                return rows;
            }
            let (_, max) = queues.offsets(topic, *queue_id);
            let committed = u64::try_from(*committed).unwrap_or(0);
            rows.push(LagRow {
                group: group.to_owned(),
                topic: topic.to_owned(),
                queue_id: *queue_id,
                lag: max.saturating_sub(committed),
            });
        }
    }
    rows
}

/// Used fraction (0..1) of the file system holding `path` (RocketMQ's
/// `getDiskPartitionSpaceUsedPercent`: blocks not free over all blocks).
pub fn disk_used_ratio(path: &Path) -> Option<f64> {
    let s = nix::sys::statvfs::statvfs(path).ok()?;
    let total = s.blocks() as f64;
    let free = s.blocks_free() as f64;
    (total > 0.0).then(|| ((total - free) / total).clamp(0.0, 1.0))
}

/// Prometheus label value escaping: backslash, double quote and newline.
fn escape(value: &str) -> String {
    value.replace('\\', "\\\\").replace('"', "\\\"").replace('\n', "\\n")
}

fn labels_text(global: &[(&'static str, String)], own: &[(&str, &str)]) -> String {
    let all = global.iter().map(|(k, v)| (*k, v.as_str())).chain(own.iter().copied());
    let parts: Vec<String> = all.map(|(k, v)| format!("{k}=\"{}\"", escape(v))).collect();
    format!("{{{}}}", parts.join(","))
}

fn header(out: &mut String, name: &str, kind: &str, help: &str) {
    // Writing into a String cannot fail.
    let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} {kind}");
}

fn sample(out: &mut String, name: &str, labels: &str, value: f64) {
    let _ = writeln!(out, "{name}{labels} {value}");
}

fn gauge(out: &mut String, global: &[(&'static str, String)], name: &str, help: &str, value: f64) {
    header(out, name, "gauge", help);
    sample(out, name, &labels_text(global, &[]), value);
}

/// Appends the scrape-time families to `out` (Prometheus text format 0.0.4).
pub fn render_scrape(out: &mut String, global: &[(&'static str, String)], s: &Scrape) {
    if !out.is_empty() && !out.ends_with('\n') {
        out.push('\n');
    }
    let l = &s.status.leadership;
    gauge(out, global, RAFT_TERM, "Current Raft term.", l.term as f64);
    let commit = s.status.committed.map_or(0, |c| c.index);
    gauge(out, global, RAFT_COMMIT_INDEX, "Committed Raft log index as this replica knows it.", commit as f64);
    let applied = s.status.applied.map_or(0, |a| a.index);
    gauge(out, global, RAFT_APPLIED_INDEX, "Last applied Raft log index.", applied as f64);
    let last = s.status.last_log_index.unwrap_or(0);
    gauge(out, global, RAFT_LAST_LOG_INDEX, "Last Raft log index.", last as f64);
    let leader = if l.role == Role::Leader { 1.0 } else { 0.0 };
    gauge(out, global, RAFT_IS_LEADER, "1 when this replica leads its group.", leader);
    if !s.status.followers.is_empty() {
        header(out, RAFT_FOLLOWER_LAG_ENTRIES, "gauge", "Entries of the leader's log a follower has not matched yet.");
        for (follower, matched) in &s.status.followers {
            let lag = match (s.status.last_log_index, matched) {
                (None, _) => 0,
                // Nothing matched yet: the whole log, from index 0, is to come.
                (Some(last), None) => last + 1,
                (Some(last), Some(m)) => last.saturating_sub(*m),
            };
            let id = follower.to_string();
            sample(out, RAFT_FOLLOWER_LAG_ENTRIES, &labels_text(global, &[("follower", &id)]), lag as f64);
        }
    }
    gauge(out, global, TOPIC_NUMBER, "Topics on this broker.", s.topics as f64);
    gauge(out, global, CONSUMER_GROUP_NUMBER, "Subscription groups on this broker.", s.groups as f64);
    if let Some(ratio) = s.disk_used_ratio {
        gauge(out, global, DISK_USED_RATIO, "Used fraction of the file system holding the store.", ratio);
    }

    header(out, FSYNC_TOTAL, "counter", "Sync system calls of the Raft log (data, directory, meta).");
    sample(out, FSYNC_TOTAL, &labels_text(global, &[]), s.fsyncs as f64);
    header(
        out,
        PAGE_CACHE_DROPPED_BYTES_TOTAL,
        "counter",
        "CommitLog bytes dropped from the page cache behind the window.",
    );
    sample(out, PAGE_CACHE_DROPPED_BYTES_TOTAL, &labels_text(global, &[]), s.page_cache_dropped_bytes as f64);

    header(out, FSYNC_LATENCY_SECONDS, "histogram", "Time a group commit of the Raft log took to sync.");
    let bucket = format!("{FSYNC_LATENCY_SECONDS}_bucket");
    for (bound, count) in &s.flush.cumulative {
        sample(out, &bucket, &labels_text(global, &[("le", &bound.to_string())]), *count as f64);
    }
    sample(out, &bucket, &labels_text(global, &[("le", "+Inf")]), s.flush.count as f64);
    sample(out, &format!("{FSYNC_LATENCY_SECONDS}_sum"), &labels_text(global, &[]), s.flush.sum_seconds);
    sample(out, &format!("{FSYNC_LATENCY_SECONDS}_count"), &labels_text(global, &[]), s.flush.count as f64);

    header(
        out,
        STORAGE_FAULT,
        "gauge",
        "1 while the store has a fault of this kind (the replica is unready), with its reason.",
    );
    let st = &s.status;
    for (kind, reason) in [
        ("damaged", &st.damaged),
        ("poisoned", &st.poisoned),
        ("apply_failed", &s.apply_failure),
        ("disk_full", &s.disk_full),
    ] {
        let own = [("kind", kind), ("reason", reason.as_deref().unwrap_or(""))];
        sample(out, STORAGE_FAULT, &labels_text(global, &own), if reason.is_some() { 1.0 } else { 0.0 });
    }
    header(out, COMMITLOG_READ_ERRORS_TOTAL, "counter", "CommitLog reads failed with an I/O error (retried later).");
    sample(out, COMMITLOG_READ_ERRORS_TOTAL, &labels_text(global, &[]), s.commitlog_read_errors as f64);

    if !s.delay_waiting.is_empty() {
        header(out, DELAY_MESSAGES_WAITING, "gauge", "Delayed messages not delivered yet, per delay level.");
        for (level, waiting) in &s.delay_waiting {
            let level = level.to_string();
            sample(out, DELAY_MESSAGES_WAITING, &labels_text(global, &[("level", level.as_str())]), *waiting as f64);
        }
    }

    if !s.pop_in_flight.is_empty() {
        header(
            out,
            POP_IN_FLIGHT,
            "gauge",
            "POP deliveries handed out and neither acked nor revived, per consumer group.",
        );
        for (group, n) in &s.pop_in_flight {
            sample(out, POP_IN_FLIGHT, &labels_text(global, &[("group", group.as_str())]), *n as f64);
        }
    }

    if !s.lags.is_empty() {
        header(out, CONSUMER_LAG, "gauge", "Messages a consumer group has not consumed yet, per queue.");
        for row in &s.lags {
            let queue = row.queue_id.to_string();
            let own = [("group", row.group.as_str()), ("topic", row.topic.as_str()), ("queue", queue.as_str())];
            sample(out, CONSUMER_LAG, &labels_text(global, &own), row.lag as f64);
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use raftmq_raft::Leadership;

    use super::*;

    fn status() -> NodeStatus {
        NodeStatus {
            last_log_index: Some(12),
            voters: BTreeSet::from([1, 2, 3]),
            followers: BTreeMap::from([(1, Some(9)), (3, None)]),
            ..NodeStatus::new(2, Leadership { term: 7, leader_id: Some(2), role: Role::Leader })
        }
    }

    #[test]
    fn two_brokers_in_one_process_keep_their_series_apart() {
        let a = BrokerMetrics::new("C", "broker-a", 1);
        let b = BrokerMetrics::new("C", "broker-a", 2);
        a.on_send("T", 3, Duration::from_millis(2));
        b.on_pull("T", "g", 4);
        b.on_pull("T", "g", 0);
        let (ta, tb) = (a.handle.render(), b.handle.render());
        assert!(
            ta.contains(r#"rocketmq_messages_in_total{cluster="C",broker_name="broker-a",node_id="1",topic="T"} 3"#),
            "{ta}"
        );
        assert!(ta.contains("rocketmq_send_latency_seconds_bucket"), "a histogram, not a summary: {ta}");
        assert!(!ta.contains(MESSAGES_OUT_TOTAL), "{ta}");
        assert!(tb.contains(r#"node_id="2",topic="T",group="g"} 4"#), "{tb}");
        assert!(!tb.contains(MESSAGES_IN_TOTAL), "{tb}");
    }

    #[test]
    fn scrape_families_are_valid_text_with_escaped_labels() {
        let global = vec![("cluster", "C".to_owned()), ("broker_name", "b\"x".to_owned()), ("node_id", "2".into())];
        let s = Scrape {
            status: status(),
            flush: FlushLatency { cumulative: vec![(0.001, 1), (1.0, 2)], count: 3, sum_seconds: 2.5 },
            fsyncs: 9,
            page_cache_dropped_bytes: 4096,
            disk_used_ratio: Some(0.25),
            lags: vec![LagRow { group: "g".into(), topic: "%RETRY%g".into(), queue_id: 1, lag: 5 }],
            pop_in_flight: vec![("g".into(), 7)],
            delay_waiting: vec![(2, 3)],
            topics: 4,
            groups: 1,
            apply_failure: None,
            disk_full: None,
            commitlog_read_errors: 0,
        };
        let mut out = String::from("previous 1");
        render_scrape(&mut out, &global, &s);
        let g = r#"cluster="C",broker_name="b\"x",node_id="2""#;
        for line in [
            format!("{RAFT_TERM}{{{g}}} 7"),
            format!("{RAFT_IS_LEADER}{{{g}}} 1"),
            format!("{RAFT_LAST_LOG_INDEX}{{{g}}} 12"),
            format!("{RAFT_FOLLOWER_LAG_ENTRIES}{{{g},follower=\"1\"}} 3"),
            format!("{RAFT_FOLLOWER_LAG_ENTRIES}{{{g},follower=\"3\"}} 13"),
            format!("{DISK_USED_RATIO}{{{g}}} 0.25"),
            format!("{PAGE_CACHE_DROPPED_BYTES_TOTAL}{{{g}}} 4096"),
            format!("{FSYNC_LATENCY_SECONDS}_bucket{{{g},le=\"0.001\"}} 1"),
            format!("{FSYNC_LATENCY_SECONDS}_bucket{{{g},le=\"+Inf\"}} 3"),
            format!("{FSYNC_LATENCY_SECONDS}_count{{{g}}} 3"),
            format!("{CONSUMER_LAG}{{{g},group=\"g\",topic=\"%RETRY%g\",queue=\"1\"}} 5"),
            format!("{DELAY_MESSAGES_WAITING}{{{g},level=\"2\"}} 3"),
            format!("{POP_IN_FLIGHT}{{{g},group=\"g\"}} 7"),
        ] {
            assert!(out.lines().any(|l| l == line), "missing {line} in\n{out}");
        }
        assert!(out.lines().any(|l| l == format!("{STORAGE_FAULT}{{{g},kind=\"poisoned\",reason=\"\"}} 0")), "{out}");
        assert!(out.starts_with("previous 1\n# HELP"));
        let types = out.lines().filter(|l| l.starts_with("# TYPE ")).count();
        let helps = out.lines().filter(|l| l.starts_with("# HELP ")).count();
        assert_eq!(types, helps);
    }

    /// Hole 6 of issue 31: a store poisoned by ENOSPC stopped Raft while the process kept running,
    /// and only a log line said so. The scrape reports each fault with its reason.
    #[test]
    fn hole6_a_poisoned_or_failed_store_is_reported_with_its_reason() {
        let global = vec![("node_id", "2".to_owned())];
        let s = Scrape {
            status: NodeStatus { poisoned: Some("append: No space left on device (os error 28)".into()), ..status() },
            flush: FlushLatency { cumulative: Vec::new(), count: 0, sum_seconds: 0.0 },
            fsyncs: 0,
            page_cache_dropped_bytes: 0,
            disk_used_ratio: None,
            lags: Vec::new(),
            pop_in_flight: Vec::new(),
            delay_waiting: Vec::new(),
            topics: 0,
            groups: 0,
            apply_failure: Some("ConsumeQueue write failed".into()),
            disk_full: Some("disk full: 0 bytes free, 4194304 needed".into()),
            commitlog_read_errors: 3,
        };
        let mut out = String::new();
        render_scrape(&mut out, &global, &s);
        for line in [
            format!(
                "{STORAGE_FAULT}{{node_id=\"2\",kind=\"poisoned\",reason=\"append: No space left on device (os error 28)\"}} 1"
            ),
            format!("{STORAGE_FAULT}{{node_id=\"2\",kind=\"apply_failed\",reason=\"ConsumeQueue write failed\"}} 1"),
            format!("{STORAGE_FAULT}{{node_id=\"2\",kind=\"damaged\",reason=\"\"}} 0"),
            format!(
                "{STORAGE_FAULT}{{node_id=\"2\",kind=\"disk_full\",reason=\"disk full: 0 bytes free, 4194304 needed\"}} 1"
            ),
            format!("{COMMITLOG_READ_ERRORS_TOTAL}{{node_id=\"2\"}} 3"),
        ] {
            assert!(out.lines().any(|l| l == line), "missing {line} in\n{out}");
        }
    }

    #[test]
    fn disk_usage_of_a_real_directory_is_a_fraction() {
        let dir = tempfile::tempdir().unwrap();
        let r = disk_used_ratio(dir.path()).expect("statvfs");
        assert!((0.0..=1.0).contains(&r));
        assert_eq!(disk_used_ratio(&dir.path().join("missing")), None);
    }
}
