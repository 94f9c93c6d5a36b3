//! Statistics: `statsAll` (per topic and consumer group: backlog, TPS, 24-hour counts) and
//! `brokerConsumeStats` (every group's lag on one broker). A broker that cannot answer one statistic
//! counts as 0 for it, as in Java.

use std::collections::BTreeSet;

use anyhow::Context;
use anyhow::Result;
use clap::Args;
use raftmq_client::Admin;
use raftmq_common::message::validate::is_dlq_topic;
use raftmq_common::message::validate::is_retry_topic;
use raftmq_common::protocol::RequestCode;
use raftmq_common::protocol::body::broker_stats::BrokerStatsData;
use serde_json::json;

use super::explain::explain;
use super::out::Out;
use crate::namesrv_addr::human_time_ms;
use crate::table::Table;

#[derive(Debug, Args)]
pub(super) struct StatsAllArgs {
    /// Only this topic (default: every topic but retry and dead-letter ones).
    #[arg(short = 't', long = "topic")]
    topic: Option<String>,
    /// Only topics with messages in or out in the last 24 hours.
    #[arg(short = 'a', long = "activeTopic")]
    active: bool,
}

#[derive(Debug, Args)]
pub(super) struct BrokerConsumeStatsArgs {
    /// The broker's address (`ip:port`).
    #[arg(short = 'b', long = "brokerAddr")]
    broker: String,
    /// Only queues whose lag is at least this.
    #[arg(short = 'l', long = "level", default_value_t = 0)]
    level: i64,
    /// Only ordered topics.
    #[arg(short = 'o', long = "order", action = clap::ArgAction::Set, default_value_t = false)]
    order: bool,
}

/// One `statsAll` line.
#[derive(Debug, Clone, Default)]
struct StatsRow {
    topic: String,
    group: String,
    accumulation: i64,
    in_tps: f64,
    out_tps: f64,
    in_24h: u64,
    out_24h: u64,
}

/// Java's `compute24HourSum`: the day's sum, else the hour's, else the minute's (a young item has
/// no daily sample yet).
fn sum_24h(data: &BrokerStatsData) -> u64 {
    [data.stats_day.sum, data.stats_hour.sum, data.stats_minute.sum].into_iter().find(|s| *s != 0).unwrap_or(0)
}

/// Java's `StatsAllSubCommand`: for every topic, the put statistics of each group of its route,
/// then for each consumer group of it (`queryTopicConsumeByWho`) the backlog and get statistics.
/// A broker that cannot answer one statistic counts as 0 for it, as in Java.
pub(super) async fn stats_all(admin: &Admin, out: Out, a: StatsAllArgs) -> Result<()> {
    let topics: Vec<String> = match a.topic {
        Some(topic) => vec![topic],
        None => admin
            .all_topics()
            .await
            .context("statsAll")?
            .into_iter()
            // Java's statsAll skips only retry and dead-letter topics.
            .filter(|t| !is_retry_topic(t) && !is_dlq_topic(t))
            .collect(),
    };
    let mut rows = Vec::new();
    for topic in &topics {
        // A topic deleted since the listing, or not known to this NameServer yet, is skipped, as
        // Java skips a topic whose details fail.
        let route = match admin.topic_route(topic).await {
            Ok(route) => route,
            Err(e) => {
                tracing::debug!(topic, error = %e, "no route; skipped");
                continue;
            }
        };
        let targets = Admin::read_addrs_of_route(&route);
        let (mut in_tps, mut in_24h) = (0.0, 0);
        let mut groups = BTreeSet::new();
        for (_, addr) in &targets {
            if let Ok(data) = admin.view_broker_stats_data(addr, "TOPIC_PUT_NUMS", topic).await {
                in_tps += data.stats_minute.tps;
                in_24h += sum_24h(&data);
            }
            if let Ok(found) = admin.topic_consume_by_who(addr, topic).await {
                groups.extend(found);
            }
        }
        let base = StatsRow { topic: topic.clone(), in_tps, in_24h, ..StatsRow::default() };
        if groups.is_empty() {
            rows.push(base);
            continue;
        }
        for group in groups {
            let mut row = StatsRow { group: group.clone(), ..base.clone() };
            for (_, addr) in &targets {
                if let Ok(stats) = admin.consume_stats(addr, &group, Some(topic)).await {
                    row.accumulation +=
                        stats.offset_table.values().map(|o| o.broker_offset - o.consumer_offset).sum::<i64>();
                }
                let key = format!("{topic}@{group}");
                if let Ok(data) = admin.view_broker_stats_data(addr, "GROUP_GET_NUMS", &key).await {
                    row.out_tps += data.stats_minute.tps;
                    row.out_24h += sum_24h(&data);
                }
            }
            // An offset committed past the end (a reset, a manual update) is no backlog, as in Java.
            row.accumulation = row.accumulation.max(0);
            rows.push(row);
        }
    }
    if a.active {
        rows.retain(|r| r.in_24h > 0 || r.out_24h > 0);
    }
    if out.json {
        let rows: Vec<_> = rows
            .iter()
            .map(|r| {
                json!({"topic": r.topic, "consumerGroup": r.group, "accumulation": r.accumulation,
                       "inTps": r.in_tps, "outTps": r.out_tps, "inMsg24Hour": r.in_24h, "outMsg24Hour": r.out_24h})
            })
            .collect();
        out.json(&json!(rows));
        return Ok(());
    }
    let mut table = Table::new(&[
        "#Topic",
        "#Consumer Group",
        "#Accumulation",
        "#InTPS",
        "#OutTPS",
        "#InMsg24Hour",
        "#OutMsg24Hour",
    ]);
    for r in &rows {
        // A topic nobody consumes: Java's blank out TPS and NO_CONSUMER.
        let (out_tps, out_24h) = if r.group.is_empty() {
            (String::new(), "NO_CONSUMER".to_owned())
        } else {
            (format!("{:.2}", r.out_tps), r.out_24h.to_string())
        };
        table.row([
            r.topic.clone(),
            r.group.clone(),
            r.accumulation.to_string(),
            format!("{:.2}", r.in_tps),
            out_tps,
            r.in_24h.to_string(),
            out_24h,
        ]);
    }
    out.table(&table);
    Ok(())
}

/// Java's `BrokerConsumeStatsSubCommad`: one row per queue whose lag is at least `-l` and whose
/// group has consumed from it, then the broker's total lag.
pub(super) async fn broker_consume_stats(admin: &Admin, out: Out, a: BrokerConsumeStatsArgs) -> Result<()> {
    let list = admin
        .broker_consume_stats(&a.broker, a.order)
        .await
        .map_err(|e| explain("brokerConsumeStats", RequestCode::GetBrokerConsumeStats, e))?;
    let mut rows = Vec::new();
    for groups in &list.consume_stats_list {
        for (group, per_topic) in groups {
            for stats in per_topic {
                for (mq, w) in &stats.offset_table {
                    let diff = w.broker_offset.saturating_sub(w.consumer_offset);
                    if diff < a.level || w.last_timestamp <= 0 {
                        continue;
                    }
                    rows.push((group.clone(), mq.clone(), *w, diff));
                }
            }
        }
    }
    if out.json {
        let queues: Vec<serde_json::Value> = rows
            .iter()
            .map(|(group, mq, w, diff)| {
                json!({"topic": mq.topic, "group": group, "brokerName": mq.broker_name, "queueId": mq.queue_id,
                       "brokerOffset": w.broker_offset, "consumerOffset": w.consumer_offset, "diff": diff,
                       "lastTimestamp": w.last_timestamp})
            })
            .collect();
        out.json(&json!({"brokerAddr": list.broker_addr, "queues": queues, "diffTotal": list.total_diff}));
        return Ok(());
    }
    let mut table = Table::new(&[
        "#Topic",
        "#Group",
        "#Broker Name",
        "#QID",
        "#Broker Offset",
        "#Consumer Offset",
        "#Diff",
        "#LastTime",
    ]);
    for (group, mq, w, diff) in &rows {
        table.row([
            mq.topic.clone(),
            group.clone(),
            mq.broker_name.clone(),
            mq.queue_id.to_string(),
            w.broker_offset.to_string(),
            w.consumer_offset.to_string(),
            diff.to_string(),
            // Java's `brokerConsumeStats` prints the time to the second.
            human_time_ms(w.last_timestamp).split(',').next().unwrap_or_default().to_owned(),
        ]);
    }
    out.table(&table);
    println!("\nDiff Total: {}", list.total_diff);
    Ok(())
}
