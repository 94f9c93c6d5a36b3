//! Issue 35, follower reads as RocketMQ's slave reads: with `slaveReadEnable` a pull answer
//! suggests the group's `brokerId` to a consumer at the tail (and `whichBrokerWhenConsumeSlowly` to
//! one reading past the tail kept in memory, `state/pull.rs` tests); the SDK follows it, so a group
//! configured with `brokerId = 1` is served by a follower, which holds every committed message,
//! after the first pull of each queue (at the leader, whose answer sends it there).
//! With the key off, every answer suggests the leader and followers serve nothing.

use crate::harness;

use std::collections::BTreeSet;
use std::sync::Arc;
use std::sync::Mutex;

use anyhow::Context;
use anyhow::Result;
use harness::cluster::Cluster;
use harness::cluster::WAIT;
use harness::cluster::until;
use raftmq_client::Admin;
use raftmq_client::Producer;
use raftmq_client::PushConsumer;
use raftmq_client::consumer::ConsumeConcurrentlyContext;
use raftmq_client::consumer::ConsumeConcurrentlyStatus;
use raftmq_client::consumer::ConsumeFrom;
use raftmq_common::message::Message;
use raftmq_common::message::MessageExt;
use raftmq_common::protocol::body::subscription_group::SubscriptionGroupConfig;

const TOPIC: &str = "T44_FOLLOWER_READS";
const COUNT: usize = 200;
const QUEUES: usize = 2;
/// Messages one pull returns (`pullBatchSize`, 32).
const PULL_BATCH: usize = 32;

/// Messages the replica at `addr` handed to consumers since it booted (`msgGetTotalTodayNow`).
async fn gets(admin: &Admin, addr: &str) -> Result<u64> {
    let table = admin.broker_runtime_info(addr).await?;
    Ok(table.table.get("msgGetTotalTodayNow").and_then(|v| v.parse().ok()).unwrap_or(0))
}

/// Sends [`COUNT`] messages and consumes them in group `group` (with `broker_id` as its
/// `brokerId`); returns the messages each replica served, by node id.
async fn consume_all(cluster: &Cluster, group: &str, broker_id: i64) -> Result<Vec<(u64, u64)>> {
    let leader = cluster.wait_leader(WAIT).await?;
    let admin = Admin::new(&cluster.namesrv_addr)?;
    let config = SubscriptionGroupConfig { broker_id, ..SubscriptionGroupConfig::new(group) };
    admin.create_subscription_group(&cluster.addr(leader), &config).await?;
    let before: Vec<u64> = {
        let mut v = Vec::new();
        for id in cluster.running() {
            v.push(gets(&admin, &cluster.addr(id)).await?);
        }
        v
    };
    let producer = Producer::builder("t44_producer").namesrv_addr(&cluster.namesrv_addr).build()?;
    producer.start().await?;
    for i in 0..COUNT {
        producer.send(Message::new(TOPIC, format!("{group}-{i}"))).await?;
    }
    let got = Arc::new(Mutex::new(BTreeSet::new()));
    let sink = Arc::clone(&got);
    let consumer = PushConsumer::builder(group)
        .namesrv_addr(&cluster.namesrv_addr)
        .subscribe(TOPIC, "*")
        .consume_from(ConsumeFrom::FirstOffset)
        .listener_concurrently(move |msgs: &[MessageExt], _: &mut ConsumeConcurrentlyContext| {
            let mut seen = sink.lock().unwrap_or_else(|p| p.into_inner());
            for m in msgs {
                seen.insert(String::from_utf8_lossy(&m.message.body).into_owned());
            }
            ConsumeConcurrentlyStatus::ConsumeSuccess
        })
        .build()?;
    consumer.start().await?;
    let prefix = format!("{group}-");
    until(
        "every message consumed",
        || {
            let got = Arc::clone(&got);
            let prefix = prefix.clone();
            async move {
                Ok(got.lock().unwrap_or_else(|p| p.into_inner()).iter().filter(|v| v.starts_with(&prefix)).count())
            }
        },
        |n| *n >= COUNT,
    )
    .await?;
    consumer.shutdown().await;
    producer.shutdown().await;
    let mut served = Vec::new();
    for (id, b) in cluster.running().into_iter().zip(before) {
        served.push((id, gets(&admin, &cluster.addr(id)).await?.saturating_sub(b)));
    }
    admin.shutdown().await;
    Ok(served)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_group_sent_to_a_follower_is_served_there_and_the_leader_serves_without_the_key() -> Result<()> {
    let cluster = Cluster::start_with(3, |c| c.slave_read_enable = true).await?;
    cluster.create_topic(TOPIC, QUEUES as i32).await?;
    let leader = cluster.wait_leader(WAIT).await?;
    let served = consume_all(&cluster, "t44_on_follower", 1).await?;
    eprintln!("slaveReadEnable, brokerId 1: served by node {served:?} (leader {leader})");
    // Each queue's first pull goes to the leader (brokerId 0), whose answer sends the rest away.
    let at_leader = served.iter().find(|(id, _)| *id == leader).map(|(_, n)| *n).context("the leader")?;
    let by_followers: u64 = served.iter().filter(|(id, _)| *id != leader).map(|(_, n)| n).sum();
    assert!(at_leader as usize <= QUEUES * PULL_BATCH, "the leader served {at_leader}: {served:?}");
    assert!(by_followers as usize >= COUNT - QUEUES * PULL_BATCH, "followers served {by_followers}: {served:?}");
    cluster.crash_all().await?;

    let cluster = Cluster::start(3).await?;
    cluster.create_topic(TOPIC, QUEUES as i32).await?;
    let leader = cluster.wait_leader(WAIT).await?;
    let served = consume_all(&cluster, "t44_on_leader", 1).await?;
    eprintln!("key off, brokerId 1: served by node {served:?} (leader {leader})");
    let at_leader = served.iter().find(|(id, _)| *id == leader).map(|(_, n)| *n).context("the leader")?;
    assert!(at_leader as usize >= COUNT, "the leader served {at_leader} of {COUNT}: {served:?}");
    let by_followers: u64 = served.iter().filter(|(id, _)| *id != leader).map(|(_, n)| n).sum();
    assert_eq!(by_followers, 0, "without slaveReadEnable followers serve nothing: {served:?}");
    cluster.crash_all().await
}
