//! Topic commands: `updateTopic`, `deleteTopic`, `topicList`, `topicRoute`, `topicStatus`,
//! `topicClusterList`, `updateTopicPerm`, `allocateMQ`, `updateOrderConf`. Writes go to each target
//! group's leader; an ordered topic's layout lives in the NameServers' `ORDER_TOPIC_CONFIG`.

use std::collections::BTreeMap;
use std::collections::BTreeSet;

use anyhow::Context;
use anyhow::Result;
use anyhow::bail;
use clap::Args;
use raftmq_client::Admin;
use raftmq_common::message::MessageQueue;
use raftmq_common::protocol::RequestCode;
use raftmq_common::protocol::body::topic::TopicConfig;
use raftmq_common::protocol::body::topic::perm;
use raftmq_common::protocol::body::topic_stats::TopicOffset;
use serde_json::json;

use super::explain::explain;
use super::explain::not_supported;
use super::out::Out;
use super::out::done;
use super::target::Target;
use super::target::write_targets;
use crate::namesrv_addr::human_time_ms;
use crate::table::Table;

/// KV namespace of ordered-topic queue layouts (`NamesrvUtil.NAMESPACE_ORDER_TOPIC_CONFIG`).
const ORDER_TOPIC_CONFIG_NAMESPACE: &str = "ORDER_TOPIC_CONFIG";

#[derive(Debug, Args)]
pub(super) struct UpdateTopicArgs {
    /// Topic name.
    #[arg(short = 't', long = "topic")]
    topic: String,
    #[command(flatten)]
    target: Target,
    /// Read queues.
    #[arg(short = 'r', long = "readQueueNums", default_value_t = 8)]
    read_queue_nums: i32,
    /// Write queues.
    #[arg(short = 'w', long = "writeQueueNums", default_value_t = 8)]
    write_queue_nums: i32,
    /// Permission: 2 write, 4 read, 6 read + write.
    #[arg(short = 'p', long = "perm", default_value_t = perm::READ_WRITE)]
    perm: i32,
    /// Ordered topic: also publishes the queue layout in the NameServers' ORDER_TOPIC_CONFIG.
    #[arg(short = 'o', long = "order", default_value_t = false, action = clap::ArgAction::Set)]
    order: bool,
}

#[derive(Debug, Args)]
pub(super) struct DeleteTopicArgs {
    /// Topic name.
    #[arg(short = 't', long = "topic")]
    topic: String,
    /// Cluster to delete it from.
    #[arg(short = 'c', long = "clusterName")]
    cluster: String,
}

#[derive(Debug, Args)]
pub(super) struct TopicArgs {
    /// Topic name.
    #[arg(short = 't', long = "topic")]
    topic: String,
}

#[derive(Debug, Args)]
pub(super) struct UpdateTopicPermArgs {
    /// Topic name.
    #[arg(short = 't', long = "topic")]
    topic: String,
    #[command(flatten)]
    target: Target,
    /// The new permission: 2 (write), 4 (read) or 6 (read + write).
    #[arg(short = 'p', long = "perm")]
    perm: i32,
}

#[derive(Debug, Args)]
pub(super) struct AllocateMqArgs {
    /// Topic.
    #[arg(short = 't', long = "topic")]
    topic: String,
    /// Consumer addresses (client ids), comma-separated, in the order the group lists them.
    #[arg(short = 'i', long = "ipList", value_delimiter = ',', required = true)]
    ips: Vec<String>,
}

#[derive(Debug, Args)]
pub(super) struct UpdateOrderConfArgs {
    /// Topic.
    #[arg(short = 't', long = "topic")]
    topic: String,
    /// `get`, `put` or `delete`.
    #[arg(short = 'm', long = "method", value_parser = ["get", "put", "delete"])]
    method: String,
    /// The layout for `put`: `brokerName:queues` items separated by `;` (`broker-a:4;broker-b:4`).
    #[arg(short = 'v', long = "orderConf", required_if_eq("method", "put"))]
    order_conf: Option<String>,
}

fn topic_config_line(c: &TopicConfig) -> String {
    format!(
        "TopicConfig [topicName={}, readQueueNums={}, writeQueueNums={}, perm={}, topicFilterType={}, topicSysFlag={}, order={}]",
        c.topic_name,
        c.read_queue_nums,
        c.write_queue_nums,
        perm::to_display(c.perm),
        c.topic_filter_type.as_str(),
        c.topic_sys_flag,
        c.order
    )
}

pub(super) async fn update_topic(admin: &Admin, out: Out, a: UpdateTopicArgs) -> Result<()> {
    if ![perm::WRITE, perm::READ, perm::READ_WRITE].contains(&a.perm) {
        bail!("updateTopic: -p must be 2 (write), 4 (read) or 6 (read + write), got {}", a.perm);
    }
    let config = TopicConfig {
        read_queue_nums: a.read_queue_nums,
        write_queue_nums: a.write_queue_nums,
        perm: a.perm,
        order: a.order,
        ..TopicConfig::new(a.topic.clone())
    };
    let targets = write_targets(admin, &a.target).await?;
    let mut written = Vec::with_capacity(targets.len());
    for (name, addr) in &targets {
        admin
            .create_topic(addr, &config)
            .await
            .map_err(|e| explain("updateTopic", RequestCode::UpdateAndCreateTopic, e))?;
        if !out.json {
            println!("create topic to {addr} success.");
        }
        written.push(json!({"brokerName": name, "addr": addr}));
    }
    if a.order {
        // Java's updateTopic -o publishes `brokerName:queueNums;...` so ordered producers see the layout.
        let layout: Vec<String> = targets.iter().map(|(name, _)| format!("{name}:{}", a.write_queue_nums)).collect();
        admin.put_kv_config(ORDER_TOPIC_CONFIG_NAMESPACE, &a.topic, &layout.join(";")).await?;
        if !out.json {
            println!("set cluster orderConf. isOrder={}, orderConf=[{}]", a.order, layout.join(";"));
        }
    }
    if out.json {
        out.json(&json!({"topic": a.topic, "written": written, "config": config}));
    } else {
        println!("{}", topic_config_line(&config));
    }
    Ok(())
}

/// Java's `UpdateTopicPermSubCommand`, except that the rest of the topic's config is the broker's
/// own (read from it), not rebuilt from the route: an ordered topic stays ordered. Every target's
/// config is read before any is written, so a topic missing from one group fails the command
/// before it changed anything.
pub(super) async fn update_topic_perm(admin: &Admin, out: Out, a: UpdateTopicPermArgs) -> Result<()> {
    if ![perm::WRITE, perm::READ, perm::READ_WRITE].contains(&a.perm) {
        bail!("updateTopicPerm: -p must be 2 (write), 4 (read) or 6 (read + write), got {}", a.perm);
    }
    let mut plans = Vec::new();
    for (name, addr) in write_targets(admin, &a.target).await? {
        let table = admin.all_topic_config(&addr).await.context("updateTopicPerm")?;
        let Some(old) = table.topic_config_table.get(&a.topic).cloned() else {
            bail!("updateTopicPerm: topic {} does not exist on broker {name} ({addr}); nothing changed", a.topic);
        };
        plans.push((name, addr, old));
    }
    let mut changed = Vec::new();
    for (name, addr, old) in plans {
        if old.perm == a.perm {
            if !out.json {
                println!("new perm equals to the old one!");
            }
            continue;
        }
        let config = TopicConfig { perm: a.perm, ..old.clone() };
        admin
            .create_topic(&addr, &config)
            .await
            .map_err(|e| explain("updateTopicPerm", RequestCode::UpdateAndCreateTopic, e))?;
        if !out.json {
            println!("update topic perm from {} to {} in {addr} success.", old.perm, a.perm);
        }
        changed.push(json!({"brokerName": name, "addr": addr, "from": old.perm, "to": a.perm}));
    }
    if out.json {
        out.json(&json!({"topic": a.topic, "changed": changed}));
    }
    Ok(())
}

pub(super) async fn delete_topic(admin: &Admin, out: Out, a: DeleteTopicArgs) -> Result<()> {
    admin
        .delete_topic(&a.topic, &a.cluster)
        .await
        .map_err(|e| explain("deleteTopic", RequestCode::DeleteTopicInBroker, e))?;
    if out.json {
        out.json(&json!({"topic": a.topic, "cluster": a.cluster, "deleted": true}));
    } else {
        println!("delete topic [{}] from cluster [{}] success.", a.topic, a.cluster);
        println!("delete topic [{}] from NameServer success.", a.topic);
    }
    Ok(())
}

pub(super) async fn topic_list(admin: &Admin, out: Out) -> Result<()> {
    let topics = admin.all_topics().await.context("topicList")?;
    if out.json {
        out.json(&json!({"topicList": topics}));
    } else {
        for topic in topics {
            println!("{topic}");
        }
    }
    Ok(())
}

pub(super) async fn topic_route(admin: &Admin, out: Out, a: TopicArgs) -> Result<()> {
    let topic = a.topic.as_str();
    let route = admin.topic_route(topic).await.context("topicRoute")?;
    if out.json {
        out.json(&serde_json::to_value(&route)?);
        return Ok(());
    }
    let mut brokers = Table::new(&["#Broker Name", "#Cluster", "#BID", "#Addr"]);
    for bd in &route.broker_datas {
        for (id, addr) in &bd.broker_addrs {
            brokers.row([bd.broker_name.as_str(), bd.cluster.as_str(), &id.to_string(), addr]);
        }
    }
    out.table(&brokers);
    println!();
    let mut queues = Table::new(&["#Broker Name", "#Read Queues", "#Write Queues", "#Perm"]);
    for qd in &route.queue_datas {
        queues.row([
            qd.broker_name.clone(),
            qd.read_queue_nums.to_string(),
            qd.write_queue_nums.to_string(),
            perm::to_display(qd.perm),
        ]);
    }
    out.table(&queues);
    Ok(())
}

pub(super) async fn topic_status(admin: &Admin, out: Out, a: TopicArgs) -> Result<()> {
    let topic = a.topic.as_str();
    let route = admin.topic_route(topic).await.context("topicStatus")?;
    let mut offsets: BTreeMap<MessageQueue, TopicOffset> = BTreeMap::new();
    for (name, addr) in Admin::read_addrs_of_route(&route) {
        match admin.topic_stats(&addr, topic).await {
            Ok(stats) => offsets.extend(stats.offset_table),
            Err(e) if not_supported(&e) => {
                let queues = route.queue_datas.iter().find(|q| q.broker_name == name).map_or(0, |q| q.read_queue_nums);
                for queue_id in 0..queues {
                    let min_offset = admin.min_offset(&addr, topic, queue_id).await?;
                    let max_offset = admin.max_offset(&addr, topic, queue_id).await?;
                    let offset = TopicOffset { min_offset, max_offset, last_update_timestamp: 0 };
                    offsets.insert(MessageQueue::new(topic, &name, queue_id), offset);
                }
            }
            Err(e) => return Err(explain("topicStatus", RequestCode::GetTopicStatsInfo, e)),
        }
    }
    if out.json {
        let queues: Vec<_> = offsets
            .iter()
            .map(|(mq, o)| {
                json!({"brokerName": mq.broker_name, "queueId": mq.queue_id, "minOffset": o.min_offset,
                       "maxOffset": o.max_offset, "lastUpdateTimestamp": o.last_update_timestamp})
            })
            .collect();
        out.json(&json!({"topic": topic, "queues": queues}));
        return Ok(());
    }
    let mut table = Table::new(&["#Broker Name", "#QID", "#Min Offset", "#Max Offset", "#Last Updated"]);
    for (mq, o) in &offsets {
        let last = if o.last_update_timestamp > 0 { human_time_ms(o.last_update_timestamp) } else { String::new() };
        table.row([
            mq.broker_name.clone(),
            mq.queue_id.to_string(),
            o.min_offset.to_string(),
            o.max_offset.to_string(),
            last,
        ]);
    }
    out.table(&table);
    Ok(())
}

/// Java's `TopicClusterSubCommand`: the cluster of each broker group in the topic's route.
pub(super) async fn topic_cluster_list(admin: &Admin, out: Out, a: TopicArgs) -> Result<()> {
    let topic = a.topic.as_str();
    let route = admin.topic_route(topic).await.context("topicClusterList")?;
    let clusters: BTreeSet<&str> = route.broker_datas.iter().map(|b| b.cluster.as_str()).collect();
    if out.json {
        out.json(&json!({"topic": topic, "clusters": clusters}));
    } else {
        clusters.iter().for_each(|c| println!("{c}"));
    }
    Ok(())
}

/// Java's `AllocateMQSubCommand`: each address's share of the topic's readable queues under
/// `AllocateMessageQueueAveragely`, printed as Java's `RebalanceResult` JSON. The addresses keep
/// the order given (a group sorts its client ids before allocating); the queues are sorted as a
/// consumer sorts them.
pub(super) async fn allocate_mq(admin: &Admin, out: Out, a: AllocateMqArgs) -> Result<()> {
    let route = admin.topic_route(&a.topic).await.context("allocateMQ")?;
    let mut mqs: Vec<MessageQueue> = raftmq_client::route::subscribe_queues(&a.topic, &route).into_iter().collect();
    mqs.sort_by(raftmq_client::consumer::rebalance::java_mq_cmp);
    let result: serde_json::Map<String, serde_json::Value> = a
        .ips
        .iter()
        .map(|ip| {
            let share = raftmq_client::consumer::rebalance::allocate_averagely(ip, &mqs, &a.ips);
            let queues = share
                .iter()
                .map(|mq| json!({"brokerName": mq.broker_name, "queueId": mq.queue_id, "topic": mq.topic}))
                .collect();
            (ip.clone(), serde_json::Value::Array(queues))
        })
        .collect();
    let doc = json!({ "result": result });
    done(out, &doc.to_string(), doc)
}

/// Java's `UpdateOrderConfCommand`: an ordered topic's layout in the NameServers' KV config
/// (`ORDER_TOPIC_CONFIG`), which routes then carry as `orderTopicConf`.
pub(super) async fn update_order_conf(admin: &Admin, out: Out, a: UpdateOrderConfArgs) -> Result<()> {
    let cmd = "updateOrderConf";
    match (a.method.as_str(), a.order_conf) {
        ("get", _) => {
            let conf = admin.get_kv_config(ORDER_TOPIC_CONFIG_NAMESPACE, &a.topic).await.context(cmd)?;
            let shown = conf.as_deref().unwrap_or("null");
            done(
                out,
                &format!("get orderConf success. topic=[{}], orderConf=[{shown}]", a.topic),
                json!({"topic": a.topic, "orderConf": conf}),
            )
        }
        ("put", Some(conf)) => {
            let conf = conf.trim().to_owned();
            if conf.is_empty() {
                bail!("{cmd}: -v ORDER_CONF is blank");
            }
            admin.put_kv_config(ORDER_TOPIC_CONFIG_NAMESPACE, &a.topic, &conf).await.context(cmd)?;
            done(
                out,
                &format!("update orderConf success. topic=[{}], orderConf=[{conf}]", a.topic),
                json!({"topic": a.topic, "orderConf": conf}),
            )
        }
        ("delete", _) => {
            admin.delete_kv_config(ORDER_TOPIC_CONFIG_NAMESPACE, &a.topic).await.context(cmd)?;
            done(out, &format!("delete orderConf success. topic=[{}]", a.topic), json!({"topic": a.topic}))
        }
        (method, _) => bail!("{cmd}: -m {method} needs -v ORDER_CONF"),
    }
}
