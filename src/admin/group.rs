//! Consumer (subscription) group commands and their offsets: `updateSubGroup`, `deleteSubGroup`,
//! `cloneGroupOffset`, `consumerProgress`, `resetOffsetByTime`. Offsets are changed at each group's
//! leader only; a group without a leader fails the command (`cloneGroupOffset` finds every leader
//! before it changes anything).

use anyhow::Context;
use anyhow::Result;
use anyhow::bail;
use clap::Args;
use raftmq_client::Admin;
use raftmq_common::message::MessageQueue;
use raftmq_common::message::validate::DLQ_GROUP_TOPIC_PREFIX;
use raftmq_common::message::validate::RETRY_GROUP_TOPIC_PREFIX;
use raftmq_common::protocol::RequestCode;
use raftmq_common::protocol::ResponseCode;
use raftmq_common::protocol::body::consume_stats::ConsumeStats;
use raftmq_common::protocol::body::consume_stats::OffsetWrapper;
use raftmq_common::protocol::body::consumer_offset::ConsumerOffsetSerializeWrapper;
use raftmq_common::protocol::body::subscription_group::SubscriptionGroupConfig;
use serde_json::json;

use super::explain::explain;
use super::explain::not_supported;
use super::out::Out;
use super::out::done;
use super::target::Target;
use super::target::write_targets;
use super::timestamp::parse_reset_timestamp;
use crate::namesrv_addr::human_time_ms;
use crate::table::Table;

#[derive(Debug, Args)]
pub(super) struct UpdateSubGroupArgs {
    /// Consumer group name.
    #[arg(short = 'g', long = "groupName")]
    group: String,
    #[command(flatten)]
    target: Target,
    /// Consumption allowed.
    #[arg(short = 's', long = "consumeEnable", action = clap::ArgAction::Set)]
    consume_enable: Option<bool>,
    /// A new group starts at the queue's minimum offset.
    #[arg(short = 'm', long = "consumeFromMinEnable", action = clap::ArgAction::Set)]
    consume_from_min_enable: Option<bool>,
    /// Broadcasting consumption allowed.
    #[arg(short = 'd', long = "consumeBroadcastEnable", action = clap::ArgAction::Set)]
    consume_broadcast_enable: Option<bool>,
    /// Queues of the group's `%RETRY%` topic.
    #[arg(short = 'q', long = "retryQueueNums")]
    retry_queue_nums: Option<i32>,
    /// Reconsumes before a message goes to the DLQ.
    #[arg(short = 'r', long = "retryMaxTimes")]
    retry_max_times: Option<i32>,
    /// brokerId the group normally consumes from.
    #[arg(short = 'i', long = "brokerId")]
    broker_id: Option<i64>,
    /// brokerId suggested when the group falls behind.
    #[arg(short = 'w', long = "whichBrokerWhenConsumeSlowly")]
    which_broker_when_consume_slowly: Option<i64>,
}

#[derive(Debug, Args)]
pub(super) struct DeleteSubGroupArgs {
    /// Consumer group name.
    #[arg(short = 'g', long = "groupName")]
    group: String,
    #[command(flatten)]
    target: Target,
    /// Also drop the group's committed consumer offsets.
    #[arg(short = 'r', long = "removeOffset", action = clap::ArgAction::Set, default_value_t = false)]
    remove_offset: bool,
}

#[derive(Debug, Args)]
pub(super) struct CloneGroupOffsetArgs {
    /// The group whose offsets are copied.
    #[arg(short = 's', long = "srcGroup")]
    src: String,
    /// The group that gets them.
    #[arg(short = 'd', long = "destGroup")]
    dest: String,
    /// Topic.
    #[arg(short = 't', long = "topic")]
    topic: String,
    /// Copy even when the source group's online clients do not subscribe to the topic.
    #[arg(short = 'o', long = "offline", action = clap::ArgAction::Set, default_value_t = false)]
    offline: bool,
}

#[derive(Debug, Args)]
pub(super) struct ConsumerProgressArgs {
    /// Consumer group name.
    #[arg(short = 'g', long = "groupName")]
    group: String,
    /// Only this topic.
    #[arg(short = 't', long = "topicName")]
    topic: Option<String>,
}

#[derive(Debug, Args)]
pub(super) struct ResetOffsetByTimeArgs {
    /// Consumer group.
    #[arg(short = 'g', long = "group")]
    group: String,
    /// Topic.
    #[arg(short = 't', long = "topic")]
    topic: String,
    /// When: `now`, milliseconds since the epoch, or `yyyy-MM-dd#HH:mm:ss:SSS` (local time).
    #[arg(short = 's', long = "timestamp")]
    timestamp: String,
    /// Also move offsets forward (default true, as mqadmin).
    #[arg(short = 'f', long = "force", default_value_t = true, action = clap::ArgAction::Set)]
    force: bool,
}

pub(super) async fn update_sub_group(admin: &Admin, out: Out, a: UpdateSubGroupArgs) -> Result<()> {
    let mut config = SubscriptionGroupConfig::new(a.group.clone());
    config.consume_enable = a.consume_enable.unwrap_or(config.consume_enable);
    config.consume_from_min_enable = a.consume_from_min_enable.unwrap_or(config.consume_from_min_enable);
    config.consume_broadcast_enable = a.consume_broadcast_enable.unwrap_or(config.consume_broadcast_enable);
    config.retry_queue_nums = a.retry_queue_nums.unwrap_or(config.retry_queue_nums);
    config.retry_max_times = a.retry_max_times.unwrap_or(config.retry_max_times);
    config.broker_id = a.broker_id.unwrap_or(config.broker_id);
    config.which_broker_when_consume_slowly =
        a.which_broker_when_consume_slowly.unwrap_or(config.which_broker_when_consume_slowly);
    let mut written = Vec::new();
    for (name, addr) in write_targets(admin, &a.target).await? {
        admin
            .create_subscription_group(&addr, &config)
            .await
            .map_err(|e| explain("updateSubGroup", RequestCode::UpdateAndCreateSubscriptiongroup, e))?;
        if !out.json {
            println!("create subscription group to {addr} success.");
        }
        written.push(json!({"brokerName": name, "addr": addr}));
    }
    if out.json {
        out.json(&json!({"group": a.group, "written": written, "config": config}));
    } else {
        println!("{config:?}");
    }
    Ok(())
}

/// Java's `DeleteSubscriptionGroupCommand`: from each target group's leader; with `-c`, the group's
/// `%RETRY%` and `%DLQ%` topics go too (a missing one is no error, as in Java).
pub(super) async fn delete_sub_group(admin: &Admin, out: Out, a: DeleteSubGroupArgs) -> Result<()> {
    let mut deleted = Vec::new();
    for (name, addr) in write_targets(admin, &a.target).await? {
        admin
            .delete_subscription_group(&addr, &a.group, a.remove_offset)
            .await
            .map_err(|e| explain("deleteSubGroup", RequestCode::DeleteSubscriptiongroup, e))?;
        if !out.json {
            match &a.target.cluster {
                Some(c) => {
                    println!("delete subscription group [{}] from broker [{addr}] in cluster [{c}] success.", a.group)
                }
                None => println!("delete subscription group [{}] from broker [{addr}] success.", a.group),
            }
        }
        deleted.push(json!({"brokerName": name, "addr": addr}));
    }
    let mut topics = Vec::new();
    if let Some(cluster) = &a.target.cluster {
        for topic in [format!("{RETRY_GROUP_TOPIC_PREFIX}{}", a.group), format!("{DLQ_GROUP_TOPIC_PREFIX}{}", a.group)]
        {
            // Deleting a topic that does not exist succeeds; what fails here is the call itself,
            // which Java swallows: said on stderr, and the group is deleted all the same.
            match admin.delete_topic(&topic, cluster).await {
                Ok(()) => {
                    if !out.json {
                        println!("delete topic [{topic}] from cluster [{cluster}] success.");
                        println!("delete topic [{topic}] from NameServer success.");
                    }
                    topics.push(topic);
                }
                Err(e) => eprintln!("deleteSubGroup: cannot delete topic {topic} from cluster {cluster}: {e}"),
            }
        }
    }
    if out.json {
        out.json(&json!({"group": a.group, "deleted": deleted, "topicsDeleted": topics}));
    }
    Ok(())
}

/// `mqadmin cloneGroupOffset`, by `DefaultMQAdminExt.cloneGroupOffset`: the leader of every group
/// serving the topic copies the source group's committed offsets. (Java 4.9's command instead writes
/// each queue's max offset, for every topic of the source group; this copies what was committed.)
/// Every group's leader is found before any is asked, so a group without one changes nothing.
pub(super) async fn clone_group_offset(admin: &Admin, out: Out, a: CloneGroupOffsetArgs) -> Result<()> {
    let route = admin.topic_route(&a.topic).await.context("cloneGroupOffset")?;
    let mut leaders = Vec::with_capacity(route.broker_datas.len());
    for (name, leader) in Admin::leaders_of_route(&route) {
        let Some(addr) = leader else {
            bail!("cloneGroupOffset: broker group {name} has no leader now; nothing changed, try again");
        };
        leaders.push((name, addr));
    }
    let mut cloned = Vec::new();
    for (name, addr) in leaders {
        admin
            .clone_group_offset(&addr, &a.src, &a.dest, Some(&a.topic), a.offline)
            .await
            .map_err(|e| explain("cloneGroupOffset", RequestCode::CloneGroupOffset, e))?;
        cloned.push(json!({"brokerName": name, "addr": addr}));
    }
    done(
        out,
        &format!("clone group offset success. srcGroup[{}], destGroup=[{}], topic[{}]", a.src, a.dest, a.topic),
        json!({"srcGroup": a.src, "destGroup": a.dest, "topic": a.topic, "brokers": cloned}),
    )
}

/// One group's progress on the broker at `addr`: GET_CONSUME_STATS, or (broker without it) the
/// committed offsets from GET_ALL_CONSUMER_OFFSET against each queue's GET_MAX_OFFSET.
async fn consume_stats_of(
    admin: &Admin,
    name: &str,
    addr: &str,
    group: &str,
    topic: Option<&str>,
) -> Result<ConsumeStats> {
    match admin.consume_stats(addr, group, topic).await {
        Ok(stats) => return Ok(stats),
        Err(e) if not_supported(&e) => {}
        Err(e) => return Err(explain("consumerProgress", RequestCode::GetConsumeStats, e)),
    }
    let all = admin
        .all_consumer_offset(addr)
        .await
        .map_err(|e| explain("consumerProgress", RequestCode::GetAllConsumerOffset, e))?;
    let mut stats = ConsumeStats::default();
    for (key, queues) in &all.offset_table {
        let Some((t, g)) = ConsumerOffsetSerializeWrapper::split_key(key) else { continue };
        if g != group || topic.is_some_and(|wanted| wanted != t) {
            continue;
        }
        for (&queue_id, &consumer_offset) in queues {
            let broker_offset = admin.max_offset(addr, t, queue_id).await?;
            let wrapper = OffsetWrapper { broker_offset, consumer_offset, last_timestamp: 0 };
            stats.offset_table.insert(MessageQueue::new(t, name, queue_id), wrapper);
        }
    }
    Ok(stats)
}

pub(super) async fn consumer_progress(admin: &Admin, out: Out, a: ConsumerProgressArgs) -> Result<()> {
    // Every group may hold offsets of the consumer group; Java asks the groups of %RETRY%<group>,
    // which a group that never failed a message does not have yet.
    let groups = admin.read_addrs_of_all_groups().await.context("consumerProgress")?;
    let mut total = ConsumeStats::default();
    for (name, addr) in &groups {
        let stats = consume_stats_of(admin, name, addr, &a.group, a.topic.as_deref()).await?;
        total.consume_tps += stats.consume_tps;
        total.offset_table.extend(stats.offset_table);
    }
    let diff_total = total.compute_total_diff();
    if out.json {
        let queues: Vec<_> = total
            .offset_table
            .iter()
            .map(|(mq, w)| {
                json!({"topic": mq.topic, "brokerName": mq.broker_name, "queueId": mq.queue_id,
                       "brokerOffset": w.broker_offset, "consumerOffset": w.consumer_offset,
                       "diff": w.broker_offset.saturating_sub(w.consumer_offset), "lastTimestamp": w.last_timestamp})
            })
            .collect();
        out.json(
            &json!({"group": a.group, "consumeTps": total.consume_tps, "diffTotal": diff_total, "queues": queues}),
        );
        return Ok(());
    }
    let mut table =
        Table::new(&["#Topic", "#Broker Name", "#QID", "#Broker Offset", "#Consumer Offset", "#Diff", "#LastTime"]);
    for (mq, w) in &total.offset_table {
        let last = if w.last_timestamp > 0 { human_time_ms(w.last_timestamp) } else { "N/A".to_owned() };
        table.row([
            mq.topic.clone(),
            mq.broker_name.clone(),
            mq.queue_id.to_string(),
            w.broker_offset.to_string(),
            w.consumer_offset.to_string(),
            w.broker_offset.saturating_sub(w.consumer_offset).to_string(),
            last,
        ]);
    }
    out.table(&table);
    println!();
    println!("Consume TPS: {:.2}", total.consume_tps);
    println!("Consume Diff Total: {diff_total}");
    Ok(())
}

pub(super) async fn reset_offset_by_time(admin: &Admin, out: Out, a: ResetOffsetByTimeArgs) -> Result<()> {
    let timestamp_ms = parse_reset_timestamp(&a.timestamp)?;
    let route = admin.topic_route(&a.topic).await.context("resetOffsetByTime")?;
    let mut rows = Vec::new();
    for (name, leader) in Admin::leaders_of_route(&route) {
        let Some(addr) = leader else {
            bail!("resetOffsetByTime: group {name} has no leader; try again after its election");
        };
        match admin.reset_offset_by_time(&addr, &a.topic, &a.group, timestamp_ms, a.force).await {
            Ok(table) => {
                for (mq, offset) in table {
                    rows.push(ResetRow {
                        mq,
                        broker_offset: None,
                        consumer_offset: None,
                        timestamp_offset: None,
                        reset: offset,
                    });
                }
            }
            Err(e) if not_supported(&e) || e.response_code() == Some(ResponseCode::ConsumerNotOnline) => {
                let queues = route.queue_datas.iter().find(|q| q.broker_name == name).map_or(0, |q| q.read_queue_nums);
                for queue_id in 0..queues {
                    let mq = MessageQueue::new(&a.topic, &name, queue_id);
                    rows.push(reset_queue_old(admin, &addr, &a, mq, timestamp_ms).await?);
                }
            }
            Err(e) => return Err(explain("resetOffsetByTime", RequestCode::InvokeBrokerToResetOffset, e)),
        }
    }
    print_reset(out, &a, timestamp_ms, &rows);
    Ok(())
}

struct ResetRow {
    mq: MessageQueue,
    broker_offset: Option<i64>,
    consumer_offset: Option<i64>,
    timestamp_offset: Option<i64>,
    reset: i64,
}

/// `ResetOffsetByTimeOldCommand` for one queue: the offset at `timestamp_ms` becomes the group's
/// committed offset when forced or when it moves the group backward.
async fn reset_queue_old(
    admin: &Admin,
    addr: &str,
    a: &ResetOffsetByTimeArgs,
    mq: MessageQueue,
    timestamp_ms: i64,
) -> Result<ResetRow> {
    let cmd = "resetOffsetByTime";
    let broker_offset = admin.max_offset(addr, &mq.topic, mq.queue_id).await?;
    let consumer_offset = admin.query_consumer_offset(addr, &a.group, &mq.topic, mq.queue_id).await?.unwrap_or(0);
    let timestamp_offset = admin
        .search_offset(addr, &mq.topic, mq.queue_id, timestamp_ms)
        .await
        .map_err(|e| explain(cmd, RequestCode::SearchOffsetByTimestamp, e))?;
    let reset = if a.force || timestamp_offset <= consumer_offset {
        admin
            .update_consumer_offset(addr, &a.group, &mq.topic, mq.queue_id, timestamp_offset)
            .await
            .map_err(|e| explain(cmd, RequestCode::UpdateConsumerOffset, e))?;
        timestamp_offset
    } else {
        consumer_offset
    };
    Ok(ResetRow {
        mq,
        broker_offset: Some(broker_offset),
        consumer_offset: Some(consumer_offset),
        timestamp_offset: Some(timestamp_offset),
        reset,
    })
}

fn print_reset(out: Out, a: &ResetOffsetByTimeArgs, timestamp_ms: i64, rows: &[ResetRow]) {
    if out.json {
        let queues: Vec<_> = rows
            .iter()
            .map(|r| {
                json!({"brokerName": r.mq.broker_name, "queueId": r.mq.queue_id, "brokerOffset": r.broker_offset,
                       "consumerOffset": r.consumer_offset, "timestampOffset": r.timestamp_offset, "resetOffset": r.reset})
            })
            .collect();
        out.json(
            &json!({"group": a.group, "topic": a.topic, "timestamp": timestamp_ms, "force": a.force, "queues": queues}),
        );
        return;
    }
    println!(
        "rollback consumer offset by specified consumerGroup[{}], topic[{}], force[{}], timestamp(string)[{}], timestamp(long)[{}]",
        a.group, a.topic, a.force, a.timestamp, timestamp_ms
    );
    let opt = |v: Option<i64>| v.map_or_else(|| "-".to_owned(), |v| v.to_string());
    let mut table = Table::new(&[
        "#brokerName",
        "#queueId",
        "#brokerOffset",
        "#consumerOffset",
        "#timestampOffset",
        "#resetOffset",
    ]);
    for r in rows {
        table.row([
            r.mq.broker_name.clone(),
            r.mq.queue_id.to_string(),
            opt(r.broker_offset),
            opt(r.consumer_offset),
            opt(r.timestamp_offset),
            r.reset.to_string(),
        ]);
    }
    out.table(&table);
}
