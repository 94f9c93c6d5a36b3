//! `DefaultPullConsumer` (RocketMQ's `DefaultMQPullConsumer`) against a real NameServer and the fake
//! broker of t30: the topic's queues, pulls by queue and offset (tag filter, no new message, an
//! offset out of range), a blocking pull woken by an arrival, and offsets stored and read back
//! only when the caller says so.

mod common;
mod t30_consumer_fake;

use std::time::Duration;

use anyhow::Result;
use raftmq_client::DefaultPullConsumer;
use raftmq_client::consumer::PullStatus;
use raftmq_common::message::MessageQueue;
use raftmq_common::protocol::RequestCode;
use raftmq_common::protocol::header::pull::pull_sys_flag;
use t30_consumer_fake::ConsumerBroker;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn t50_pull_by_queue_and_offset_with_caller_kept_offsets() -> Result<()> {
    let ns = common::start_namesrv().await?;
    let ns_addr = ns.local_addr().to_string();
    let broker = ConsumerBroker::start("broker-a").await?;
    broker.register(&ns_addr, &[("TopicP", 2)]).await?;
    for i in 0..5 {
        broker.append("TopicP", 1, Some(if i % 2 == 0 { "A" } else { "B" }), &format!("k{i}"));
    }
    let consumer = DefaultPullConsumer::builder("GP").namesrv_addr(&ns_addr).instance_name("p1").build()?;

    let queues = consumer.fetch_subscribe_message_queues("TopicP").await?;
    let q1 = MessageQueue::new("TopicP", "broker-a", 1);
    assert_eq!(queues, [MessageQueue::new("TopicP", "broker-a", 0), q1.clone()].into_iter().collect());

    let all = consumer.pull(&q1, "*", 0, 32).await?;
    assert_eq!(all.status, PullStatus::Found);
    assert_eq!(all.msgs.iter().map(|m| m.queue_offset).collect::<Vec<_>>(), vec![0, 1, 2, 3, 4]);
    assert_eq!((all.next_begin_offset, all.min_offset, all.max_offset), (5, 0, 5));
    let two = consumer.pull(&q1, "*", 1, 2).await?;
    assert_eq!(two.msgs.iter().map(|m| m.queue_offset).collect::<Vec<_>>(), vec![1, 2]);
    let tagged = consumer.pull(&q1, "A", 0, 32).await?;
    assert_eq!(tagged.msgs.iter().map(|m| m.message.tags().unwrap_or_default()).collect::<Vec<_>>(), ["A"; 3]);
    assert_eq!(consumer.pull(&q1, "*", 5, 32).await?.status, PullStatus::NoNewMsg);
    let moved = consumer.pull(&q1, "*", 99, 32).await?;
    assert_eq!((moved.status, moved.next_begin_offset), (PullStatus::OffsetIllegal, 5));
    assert!(consumer.pull(&q1, "*", -1, 32).await.is_err(), "a negative offset is the caller's error");
    {
        // No pull commits an offset, and each carries its subscription (no heartbeat needed).
        let data = broker.data();
        assert!(data.pulls.iter().all(|p| !pull_sys_flag::has_commit_offset(p.sys_flag)));
        assert!(data.pulls.iter().all(|p| p.subscription.is_some()));
        assert!(!data.codes.contains(&RequestCode::HeartBeat));
    }

    // A blocking pull waits for the next message and returns it.
    let waiting = {
        let consumer = consumer.clone();
        let q1 = q1.clone();
        tokio::spawn(async move { consumer.pull_block_if_not_found(&q1, "*", 5, 32).await })
    };
    broker
        .wait_until("the blocking pull arrived", |d| {
            d.pulls.iter().any(|p| p.queue_offset == 5 && pull_sys_flag::has_suspend(p.sys_flag))
        })
        .await?;
    broker.append("TopicP", 1, None, "k5");
    let woken = tokio::time::timeout(Duration::from_secs(20), waiting).await???;
    assert_eq!(woken.msgs.iter().map(|m| m.queue_offset).collect::<Vec<_>>(), vec![5]);

    // Offsets: none stored until the caller stores one.
    assert_eq!(consumer.fetch_consume_offset(&q1).await?, -1);
    consumer.update_consume_offset(&q1, 6).await?;
    assert_eq!(consumer.fetch_consume_offset(&q1).await?, 6);
    assert_eq!(broker.data().offsets.get(&("GP".into(), "TopicP".into(), 1)), Some(&6));
    assert!(consumer.update_consume_offset(&q1, -2).await.is_err());

    consumer.shutdown().await;
    broker.shutdown().await;
    Ok(())
}
