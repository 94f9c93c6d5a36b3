//! CommitLog and ConsumeQueue maintenance and inspection: `deleteExpiredCommitLog`, `cleanExpiredCQ`
//! (one request per replica: each replica keeps its own files), `queryCq`.

use std::collections::BTreeMap;

use anyhow::Context;
use anyhow::Result;
use clap::Args;
use raftmq_client::Admin;
use raftmq_client::ClientError;
use raftmq_common::limits::QUERY_CONSUME_QUEUE_DEFAULT_COUNT;
use raftmq_common::limits::QUERY_CONSUME_QUEUE_MAX_COUNT;
use raftmq_common::protocol::RequestCode;
use serde_json::json;

use super::explain::explain;
use super::out::Out;
use super::target::replica_addrs;

#[derive(Debug, Args)]
pub(super) struct ReplicaArgs {
    /// One broker's address (`ip:port`).
    #[arg(short = 'b', long = "brokerAddr", required_unless_present = "cluster")]
    broker: Option<String>,
    /// Every replica of every group of a cluster.
    #[arg(short = 'c', long = "cluster")]
    cluster: Option<String>,
}

#[derive(Debug, Args)]
pub(super) struct QueryCqArgs {
    /// Topic.
    #[arg(short = 't', long = "topic")]
    topic: String,
    /// Queue id.
    #[arg(short = 'q', long = "queue")]
    queue_id: i32,
    /// First ConsumeQueue index (queue offset).
    #[arg(short = 'i', long = "index")]
    index: i64,
    /// Units to list.
    #[arg(short = 'c', long = "count", default_value_t = QUERY_CONSUME_QUEUE_DEFAULT_COUNT,
          value_parser = clap::value_parser!(i32).range(1..=i64::from(QUERY_CONSUME_QUEUE_MAX_COUNT)))]
    count: i32,
    /// The broker to ask (`ip:port`; default: the leader of the first group in the topic's route).
    #[arg(short = 'b', long = "broker")]
    broker: Option<String>,
    /// A consumer group whose subscription each unit is checked against.
    #[arg(short = 'g', long = "consumer")]
    group: Option<String>,
}

/// One request per replica, as Java's `DeleteExpiredCommitLogSubCommand` / `CleanExpiredCQSubCommand`:
/// `success` (each address first with `-c`); the first refusal fails the command.
async fn for_each_replica<'a, F, Fut>(
    out: Out,
    addrs: &'a [String],
    command: &str,
    code: RequestCode,
    call: F,
) -> Result<()>
where
    F: Fn(&'a str) -> Fut,
    Fut: std::future::Future<Output = Result<(), ClientError>>,
{
    let mut done = BTreeMap::new();
    for addr in addrs {
        call(addr).await.map_err(|e| explain(command, code, e))?;
        done.insert(addr.clone(), true);
        if !out.json {
            if addrs.len() > 1 {
                println!("{addr}: success");
            } else {
                println!("success");
            }
        }
    }
    if out.json {
        out.json(&json!({ "brokers": done }));
    }
    Ok(())
}

/// Java's `QueryConsumeQueueCommand`: the group's subscription and filter when `-g` is given, the
/// queue's bounds, then one block per unit from `-i`.
pub(super) async fn query_cq(admin: &Admin, out: Out, a: QueryCqArgs) -> Result<()> {
    let addr = match a.broker {
        Some(addr) => addr,
        None => {
            let route = admin.topic_route(&a.topic).await?;
            Admin::leaders_of_route(&route)
                .into_iter()
                .find_map(|(_, leader)| leader)
                .with_context(|| format!("topic {} has no broker group with a leader", a.topic))?
        }
    };
    let (body, remark) = admin
        .query_consume_queue(&addr, &a.topic, a.queue_id, a.index, a.count, a.group.as_deref())
        .await
        .map_err(|e| explain("queryCq", RequestCode::QueryConsumeQueue, e))?;
    if out.json {
        let units: Vec<serde_json::Value> = body
            .queue_data
            .iter()
            .zip(a.index..)
            .map(|(u, idx)| {
                json!({"idx": idx, "physicOffset": u.physic_offset, "physicSize": u.physic_size,
                       "tagsCode": u.tags_code, "eval": u.eval, "msg": u.msg})
            })
            .collect();
        out.json(&json!({"brokerAddr": addr, "minQueueIndex": body.min_queue_index,
            "maxQueueIndex": body.max_queue_index, "subscriptionData": body.subscription_data,
            "filterData": body.filter_data, "remark": remark, "queueData": units}));
        return Ok(());
    }
    const RULE: &str = "======================================";
    if let Some(sub) = &body.subscription_data {
        println!("Subscription data: \n{}\n{RULE}", serde_json::to_string_pretty(sub)?);
    }
    if let Some(filter) = &body.filter_data {
        println!("Filter data: \n{filter}\n{RULE}");
    }
    println!("Queue data: \nmax: {}, min: {}\n{RULE}", body.max_queue_index, body.min_queue_index);
    if let Some(remark) = remark.filter(|_| body.queue_data.is_empty()) {
        println!("{remark}");
    }
    for (u, idx) in body.queue_data.iter().zip(a.index..) {
        println!(
            "idx: {idx}\nConsumeQueueData{{physicOffset={}, physicSize={}, tagsCode={}, extendDataJson='null', \
             bitMap='null', eval={}, msg='{}'}}\n{RULE}",
            u.physic_offset,
            u.physic_size,
            u.tags_code,
            u.eval,
            u.msg.as_deref().unwrap_or("null")
        );
    }
    Ok(())
}

/// Java's `DeleteExpiredCommitLogSubCommand`, on one replica or every replica of a cluster.
pub(super) async fn delete_expired_commit_log(admin: &Admin, out: Out, a: ReplicaArgs) -> Result<()> {
    let addrs = replica_addrs(admin, "deleteExpiredCommitLog", a.broker.as_deref(), a.cluster.as_deref()).await?;
    for_each_replica(out, &addrs, "deleteExpiredCommitLog", RequestCode::DeleteExpiredCommitlog, |addr| {
        admin.delete_expired_commit_log(addr)
    })
    .await
}

/// Java's `CleanExpiredCQSubCommand`, on one replica or every replica of a cluster.
pub(super) async fn clean_expired_cq(admin: &Admin, out: Out, a: ReplicaArgs) -> Result<()> {
    let addrs = replica_addrs(admin, "cleanExpiredCQ", a.broker.as_deref(), a.cluster.as_deref()).await?;
    for_each_replica(out, &addrs, "cleanExpiredCQ", RequestCode::CleanExpiredConsumequeue, |addr| {
        admin.clean_expired_consume_queue(addr)
    })
    .await
}
