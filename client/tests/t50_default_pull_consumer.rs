//! `DefaultPullConsumer` (RocketMQ's `DefaultMQPullConsumer`) against a real NameServer and the fake
//! broker of t30: the topic's queues, pulls by queue and offset (tag filter, no new message, an
//! offset out of range), a blocking pull held by the broker, and offsets stored and read back
//! only when the caller says so.

mod common;
mod t30_consumer_fake;

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

    // A blocking pull asks the broker to hold it (the fake holds it at most 300 ms): nothing new
    // at the end, the next message once there is one.
    let held = consumer.pull_block_if_not_found(&q1, "*", 5, 32).await?;
    assert_eq!((held.status, held.msgs.len()), (PullStatus::NoNewMsg, 0));
    let last = broker.data().pulls.last().cloned().expect("a pull");
    assert!(pull_sys_flag::has_suspend(last.sys_flag) && last.suspend_timeout_millis > 0);
    broker.append("TopicP", 1, None, "k5");
    let woken = consumer.pull_block_if_not_found(&q1, "*", 5, 32).await?;
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
