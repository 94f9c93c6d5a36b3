//! The sampler task: every [`CONSOLE_SAMPLE_INTERVAL_MS`] it records each user topic's summed max
//! offsets and each consumer group's total lag into [`crate::history::History`], so a chart has the
//! last minutes the moment a page opens. Read-only; a broker down only leaves a gap.

use std::collections::BTreeMap;
use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use raftmq_common::limits::CONSOLE_SAMPLE_INTERVAL_MS;
use raftmq_common::limits::CONSOLE_SAMPLED_SERIES_MAX_COUNT;
use tokio_util::sync::CancellationToken;

use crate::api::consumer_groups::progress;
use crate::history::Kind;
use crate::history::now_ms;
use crate::state::ConsoleState;
use crate::upstream::encode_component;

/// Runs until `stop`.
pub async fn run(s: Arc<ConsoleState>, stop: CancellationToken) {
    let mut tick = tokio::time::interval(Duration::from_millis(CONSOLE_SAMPLE_INTERVAL_MS));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
    loop {
        tokio::select! {
            _ = stop.cancelled() => return,
            _ = tick.tick() => {}
        }
        tokio::select! {
            _ = stop.cancelled() => return,
            _ = sample(&s) => {}
        }
    }
}

async fn sample(s: &ConsoleState) {
    let Ok(topology) = s.topology().await else { return };
    let now = now_ms();
    let mut offsets: BTreeMap<String, u64> = BTreeMap::new();
    let mut groups: BTreeSet<String> = BTreeSet::new();
    for broker in &topology.groups {
        if let Ok(list) = s.read_ok(broker, "/api/v1/topics").await {
            let names: Vec<&str> = list["topics"]
                .as_array()
                .into_iter()
                .flatten()
                .filter(|t| t["system"] != serde_json::json!(true))
                .filter_map(|t| t["topic"].as_str())
                .take(CONSOLE_SAMPLED_SERIES_MAX_COUNT)
                .collect();
            for name in names {
                let Ok(detail) = s.read_ok(broker, &format!("/api/v1/topics/{}", encode_component(name))).await else {
                    continue;
                };
                let sum: u64 = detail["queues"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .map(|q| q["max_offset"].as_u64().unwrap_or(0))
                    .sum();
                *offsets.entry(name.to_owned()).or_default() += sum;
            }
        }
        if let Ok(list) = s.read_ok(broker, "/api/v1/groups").await {
            groups.extend(
                list["groups"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter_map(|g| g["group"].as_str())
                    .take(CONSOLE_SAMPLED_SERIES_MAX_COUNT)
                    .map(str::to_owned),
            );
        }
    }
    for (topic, sum) in offsets {
        s.history.record(Kind::TopicOffsets, &topic, now, sum as f64);
    }
    for group in groups.iter().take(CONSOLE_SAMPLED_SERIES_MAX_COUNT) {
        let (rows, lag, errors) = progress(s, &topology.groups, group).await;
        if errors.is_empty() && !rows.is_empty() {
            s.history.record(Kind::GroupLag, group, now, lag as f64);
        }
    }
    s.history.forget_stale(now);
}
