//! Issue 7 acceptance, SDK against a real cluster: a NameServer and a 3-replica Raft broker group in
//! process over loopback sockets (harness `t40_cluster`), driven only through `raftmq_client`.
//!
//! - t40: every send mode (sync, async, callback, oneway, batch) lands and is consumed; a tag
//!   subscription delivers only its tags; broadcasting delivers every message to every member.
//! - t41: ordered sends (`send_orderly` by key) keep each key in one queue in send order; orderly
//!   consumption hands each queue over in order and never runs one queue on two tasks, even while
//!   a second member joins and takes queues away.
//! - t42: two members of a group split the queues; when one shuts down the survivor takes them over
//!   where the leaver stopped (give or take its last pull batch).
//! - t43: after a restart, push and lite-pull consumers resume at their committed offsets: the lite
//!   consumer (no piggybacked commits) delivers nothing again; the push consumer at most its last pull
//!   batch per queue (see `assert_resumed`).

use crate::harness;

use std::collections::BTreeMap;
use std::collections::BTreeSet;
use std::collections::HashMap;
use std::sync::Arc;
use std::sync::Mutex;
use std::sync::atomic::AtomicUsize;
use std::sync::atomic::Ordering;
use std::time::Duration;

use anyhow::Context;
use anyhow::Result;
use anyhow::ensure;
use harness::cluster::Cluster;
use harness::cluster::Collector;
use harness::cluster::WAIT;
use harness::cluster::wait_assignment;
use raftmq_client::Producer;
use raftmq_client::PullConsumer;
use raftmq_client::PushConsumer;
use raftmq_client::SendStatus;
use raftmq_client::consumer::ConsumeConcurrentlyContext;
use raftmq_client::consumer::ConsumeConcurrentlyStatus;
use raftmq_client::consumer::ConsumeFrom;
use raftmq_client::consumer::ConsumeOrderlyContext;
use raftmq_client::consumer::ConsumeOrderlyStatus;
use raftmq_client::consumer::MessageModel;
use raftmq_client::consumer::PushConsumerBuilder;
use raftmq_common::message::Message;
use raftmq_common::message::MessageExt;
use raftmq_common::message::MessageQueue;

/// A push consumer of `topic` reading from the first offset. Rebalances are driven by the broker's
/// NOTIFY_CONSUMER_IDS_CHANGED; the short period is only a safety net.
fn push_builder(cluster: &Cluster, group: &str, topic: &str, expression: &str) -> PushConsumerBuilder {
    PushConsumer::builder(group)
        .namesrv_addr(&cluster.namesrv_addr)
        .subscribe(topic, expression)
        .consume_from(ConsumeFrom::FirstOffset)
        .rebalance_interval(Duration::from_secs(2))
        .pull_delay_when_exception(Duration::from_millis(200))
}

/// A concurrent consumer recording what it consumes as `label` into `collector`.
async fn start_collecting(builder: PushConsumerBuilder, label: &str, collector: &Collector) -> Result<PushConsumer> {
    let (label, sink) = (label.to_owned(), collector.clone());
    let consumer = builder
        .instance_name(label.clone())
        .listener_concurrently(move |msgs: &[MessageExt], _ctx: &mut ConsumeConcurrentlyContext| {
            sink.record(&label, msgs);
            ConsumeConcurrentlyStatus::ConsumeSuccess
        })
        .build()?;
    consumer.start().await?;
    Ok(consumer)
}

async fn producer(cluster: &Cluster, group: &str) -> Result<Producer> {
    let producer = Producer::builder(group).namesrv_addr(&cluster.namesrv_addr).build()?;
    producer.start().await?;
    Ok(producer)
}

fn bodies(prefix: &str, n: usize) -> BTreeSet<String> {
    (0..n).map(|i| format!("{prefix}-{i}")).collect()
}

fn all_queues(topic: &str, n: i32) -> BTreeSet<MessageQueue> {
    (0..n).map(|q| MessageQueue::new(topic, harness::cluster::BROKER_NAME, q)).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn send_modes_land_tags_filter_and_broadcast_reaches_every_member() -> Result<()> {
    const TOPIC: &str = "T40_MODES";
    const TAGS_TOPIC: &str = "T40_TAGS";
    const BCAST_TOPIC: &str = "T40_BCAST";
    const N: usize = 10;
    let cluster = Cluster::start(3).await?;
    cluster.create_topic(TOPIC, 4).await?;
    cluster.create_topic(TAGS_TOPIC, 4).await?;
    cluster.create_topic(BCAST_TOPIC, 2).await?;
    let producer = producer(&cluster, "t40_producer").await?;

    // Every send mode.
    let mut acked = Vec::new();
    for i in 0..N {
        acked.push(producer.send(Message::new(TOPIC, format!("sync-{i}")).with_tags("TagA")).await?);
    }
    let pending: Vec<_> =
        (0..N).map(|i| producer.send_async(Message::new(TOPIC, format!("async-{i}")).with_tags("TagA"))).collect();
    for send in pending {
        acked.push(send.await?);
    }
    let (tx, mut rx) = tokio::sync::mpsc::channel(N);
    for i in 0..N {
        let tx = tx.clone();
        producer.send_with_callback(Message::new(TOPIC, format!("callback-{i}")).with_tags("TagA"), move |r| {
            // Capacity N: never full.
            tx.try_send(r).expect("callback channel has room");
        });
    }
    drop(tx);
    while let Some(r) = tokio::time::timeout(WAIT, rx.recv()).await? {
        acked.push(r?);
    }
    for i in 0..N {
        producer.send_oneway(Message::new(TOPIC, format!("oneway-{i}")).with_tags("TagA")).await?;
    }
    let batch: Vec<Message> = (0..N).map(|i| Message::new(TOPIC, format!("batch-{i}")).with_tags("TagA")).collect();
    let batch_result = producer.send_batch(batch).await?;
    assert_eq!(batch_result.status, SendStatus::SendOk);
    assert_eq!(batch_result.msg_id.split(',').count(), N, "one msgId per batched message");
    assert_eq!(acked.len(), 3 * N);
    assert!(acked.iter().all(|r| r.status == SendStatus::SendOk));

    let collector = Collector::default();
    let consumer = start_collecting(push_builder(&cluster, "t40_modes", TOPIC, "*"), "c", &collector).await?;
    let mut want = BTreeSet::new();
    for mode in ["sync", "async", "callback", "oneway", "batch"] {
        want.extend(bodies(mode, N));
    }
    collector.wait_for_bodies(&want).await?;
    let got = collector.all();
    for r in &acked {
        let m = got.iter().find(|m| m.uniq_key.as_deref() == Some(r.msg_id.as_str())).context("acked, not consumed")?;
        assert_eq!((m.queue_id, m.queue_offset), (r.message_queue.queue_id, r.queue_offset), "{m:?}");
    }
    // A batch lands contiguously in one queue from the offset its result names.
    let mut batch_offsets: Vec<(i32, i64)> =
        got.iter().filter(|m| m.body.starts_with("batch-")).map(|m| (m.queue_id, m.queue_offset)).collect();
    batch_offsets.sort();
    batch_offsets.dedup();
    let first = (batch_result.message_queue.queue_id, batch_result.queue_offset);
    let expected: Vec<(i32, i64)> = (0..N as i64).map(|k| (first.0, first.1 + k)).collect();
    assert_eq!(batch_offsets, expected);
    consumer.shutdown().await;

    // Tag subscription: only TagA and TagC. A TagA fence after everything, in every queue, proves
    // that the pulls have passed every TagB message.
    for i in 0..N {
        for tag in ["TagA", "TagB", "TagC"] {
            producer.send(Message::new(TAGS_TOPIC, format!("{tag}-{i}")).with_tags(tag)).await?;
        }
    }
    for q in all_queues(TAGS_TOPIC, 4) {
        producer.send_to_queue(Message::new(TAGS_TOPIC, format!("fence-{}", q.queue_id)).with_tags("TagA"), &q).await?;
    }
    let collector = Collector::default();
    let consumer =
        start_collecting(push_builder(&cluster, "t40_tags", TAGS_TOPIC, "TagA || TagC"), "c", &collector).await?;
    let mut want = bodies("TagA", N);
    want.extend(bodies("TagC", N));
    want.extend(bodies("fence", 4));
    collector.wait_for_bodies(&want).await?;
    consumer.shutdown().await;
    let tags: BTreeSet<Option<String>> = collector.all().into_iter().map(|r| r.tags).collect();
    assert_eq!(tags, [Some("TagA".to_owned()), Some("TagC".to_owned())].into_iter().collect());
    assert_eq!(collector.distinct_bodies(), want, "nothing but the subscribed tags");

    // Broadcasting: every member gets every message.
    let offsets_dir = tempfile::tempdir()?;
    let collector = Collector::default();
    let mut members = Vec::new();
    for label in ["b1", "b2"] {
        let builder = push_builder(&cluster, "t40_bcast", BCAST_TOPIC, "*")
            .message_model(MessageModel::Broadcasting)
            .offset_store_dir(offsets_dir.path());
        let member = start_collecting(builder, label, &collector).await?;
        let mut assignment = member.assignment_watch();
        let topic_queues = |a: &BTreeSet<MessageQueue>| a.iter().filter(|mq| mq.topic == BCAST_TOPIC).count();
        wait_assignment("broadcast member reads every queue", &mut assignment, |a| topic_queues(a) == 2).await?;
        members.push(member);
    }
    for i in 0..N {
        producer.send(Message::new(BCAST_TOPIC, format!("bcast-{i}"))).await?;
    }
    let want = bodies("bcast", N);
    collector
        .wait_until("every member got every broadcast", |got| {
            ["b1", "b2"].iter().all(|label| {
                let have: BTreeSet<&str> =
                    got.iter().filter(|r| r.consumer == *label).map(|r| r.body.as_str()).collect();
                want.iter().all(|b| have.contains(b.as_str()))
            })
        })
        .await?;
    for member in members {
        member.shutdown().await;
    }
    producer.shutdown().await;
    cluster.crash_all().await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn orderly_sends_keep_key_order_and_a_queue_never_runs_on_two_tasks() -> Result<()> {
    const TOPIC: &str = "T41_ORDER";
    const KEYS: usize = 8;
    const PER_KEY: usize = 40;
    let cluster = Cluster::start(3).await?;
    cluster.create_topic(TOPIC, 4).await?;
    let producer = producer(&cluster, "t41_producer").await?;

    // Shared by both members: a queue's listener calls in flight, and overlaps seen.
    let in_flight: Arc<Mutex<HashMap<i32, usize>>> = Arc::default();
    let overlaps = Arc::new(AtomicUsize::new(0));
    let collector = Collector::default();
    let orderly = |label: &str| -> Result<PushConsumer> {
        let (label, sink, in_flight, overlaps) =
            (label.to_owned(), collector.clone(), in_flight.clone(), overlaps.clone());
        let consumer = push_builder(&cluster, "t41_orderly", TOPIC, "*")
            .instance_name(label.clone())
            .consume_message_batch_max_size(4)
            .listener_orderly(move |msgs: &[MessageExt], _ctx: &mut ConsumeOrderlyContext| {
                let queue_id = msgs.first().map_or(-1, |m| m.queue_id);
                let before = {
                    let mut map = in_flight.lock().unwrap_or_else(|p| p.into_inner());
                    let n = map.entry(queue_id).or_default();
                    *n += 1;
                    *n - 1
                };
                if before > 0 {
                    overlaps.fetch_add(1, Ordering::SeqCst);
                }
                // Give a concurrent call on the same queue the chance to show itself.
                std::thread::yield_now();
                sink.record(&label, msgs);
                *in_flight.lock().unwrap_or_else(|p| p.into_inner()).entry(queue_id).or_default() -= 1;
                ConsumeOrderlyStatus::Success
            })
            .build()?;
        Ok(consumer)
    };
    let first = orderly("o1")?;
    first.start().await?;

    let mut queue_of_key: BTreeMap<usize, i32> = BTreeMap::new();
    let mut second = None;
    for i in 0..PER_KEY {
        if i == PER_KEY / 2 {
            // A second member joins mid-stream: queues move from o1 to o2 while messages flow.
            let member = orderly("o2")?;
            member.start().await?;
            second = Some(member);
        }
        for k in 0..KEYS {
            let key = format!("order-{k}");
            let r = producer.send_orderly(Message::new(TOPIC, format!("{key}:{i}")).with_keys(&key), &key).await?;
            let q = *queue_of_key.entry(k).or_insert(r.message_queue.queue_id);
            assert_eq!(r.message_queue.queue_id, q, "{key} changed queue");
        }
    }
    let mut want = BTreeSet::new();
    for k in 0..KEYS {
        want.extend((0..PER_KEY).map(|i| format!("order-{k}:{i}")));
    }
    collector.wait_for_bodies(&want).await?;
    first.shutdown().await;
    if let Some(second) = second {
        second.shutdown().await;
    }
    producer.shutdown().await;

    assert_eq!(overlaps.load(Ordering::SeqCst), 0, "a queue ran on two listener calls at once");
    let got = collector.all();
    // Per key, queue order is send order.
    for k in 0..KEYS {
        let prefix = format!("order-{k}:");
        let mut by_offset: Vec<(i64, usize)> = got
            .iter()
            .filter_map(|r| r.body.strip_prefix(&prefix).map(|seq| (r.queue_offset, seq.parse().unwrap_or(usize::MAX))))
            .collect();
        by_offset.sort();
        by_offset.dedup();
        let seqs: Vec<usize> = by_offset.iter().map(|(_, s)| *s).collect();
        assert_eq!(seqs, (0..PER_KEY).collect::<Vec<_>>(), "order-{k} out of send order in its queue");
    }
    // Per queue, delivery never skips ahead: each message is the next offset, or an earlier one
    // again after a hand-over (at-least-once).
    let mut last: HashMap<i32, i64> = HashMap::new();
    let mut redelivered = 0;
    for r in &got {
        let previous = last.insert(r.queue_id, r.queue_offset);
        let next = previous.map_or(0, |p| p + 1);
        assert!(r.queue_offset <= next, "queue {} jumped from {previous:?} to {}", r.queue_id, r.queue_offset);
        if r.queue_offset < next {
            redelivered += 1;
        }
    }
    eprintln!("t41: {} deliveries, {redelivered} restarts at an earlier offset", got.len());
    cluster.crash_all().await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn group_members_split_queues_and_the_survivor_takes_over() -> Result<()> {
    const TOPIC: &str = "T42_SPLIT";
    const QUEUES: i32 = 8;
    const N: usize = 80;
    let cluster = Cluster::start(3).await?;
    cluster.create_topic(TOPIC, QUEUES).await?;
    let producer = producer(&cluster, "t42_producer").await?;
    let collector = Collector::default();
    let builder = push_builder(&cluster, "t42_group", TOPIC, "*").pull_batch_size(RESUME_PULL_BATCH);
    let c1 = start_collecting(builder.clone(), "c1", &collector).await?;
    let c2 = start_collecting(builder, "c2", &collector).await?;
    let (mut w1, mut w2) = (c1.assignment_watch(), c2.assignment_watch());
    // The assignment also holds the group's retry topic; only the topic's queues count here.
    let mine = |a: &BTreeSet<MessageQueue>| a.iter().filter(|mq| mq.topic == TOPIC).cloned().collect::<BTreeSet<_>>();
    let half = |a: &BTreeSet<MessageQueue>| mine(a).len() == QUEUES as usize / 2;
    wait_assignment("c1 holds half the queues", &mut w1, half).await?;
    wait_assignment("c2 holds half the queues", &mut w2, half).await?;
    let (a1, a2) = (mine(&c1.assigned_queues()), mine(&c2.assigned_queues()));
    assert!(a1.is_disjoint(&a2), "{a1:?} / {a2:?}");
    assert_eq!(a1.union(&a2).cloned().collect::<BTreeSet<_>>(), all_queues(TOPIC, QUEUES));

    for i in 0..N {
        producer.send(Message::new(TOPIC, format!("before-{i}"))).await?;
    }
    collector.wait_for_bodies(&bodies("before", N)).await?;
    for r in collector.all() {
        let owner = if a1.iter().any(|mq| mq.queue_id == r.queue_id) { "c1" } else { "c2" };
        assert_eq!(r.consumer, owner, "queue {} consumed by a member that does not own it", r.queue_id);
    }

    c2.shutdown().await;
    wait_assignment("c1 takes every queue", &mut w1, |a| mine(a).len() == QUEUES as usize).await?;
    for i in 0..N {
        producer.send(Message::new(TOPIC, format!("after-{i}"))).await?;
    }
    collector.wait_for_bodies(&bodies("after", N)).await?;
    c1.shutdown().await;
    producer.shutdown().await;

    let got = collector.all();
    assert!(got.iter().filter(|r| r.body.starts_with("after-")).all(|r| r.consumer == "c1"));
    // c2 stored its offsets two-way before leaving, so c1 resumes exactly where c2 stopped.
    // c2 stored its offsets two-way before leaving, so c1 resumes where c2 stopped, give or take
    // the last pull batch (see `assert_resumed`).
    assert_resumed(&got, "c1")?;
    cluster.crash_all().await
}

/// Pull batch of the consumers whose resumption is checked: a redelivery bound, and smaller than
/// the messages per queue, so that a restart from the beginning would exceed it.
const RESUME_PULL_BATCH: u32 = 4;

/// `resumer` (a member that took queues over, or a restarted consumer) received again at most the
/// last pull batch per queue of what others consumed before it. The bound is not zero because the
/// broker handles requests on separate tasks: a pull sent before the previous owner's final two-way
/// UPDATE_CONSUMER_OFFSET can apply its piggybacked (older) commitOffset after it.
fn assert_resumed(got: &[harness::cluster::Received], resumer: &str) -> Result<()> {
    let earlier: BTreeSet<&str> = got.iter().filter(|r| r.consumer != resumer).map(|r| r.body.as_str()).collect();
    let mut again: BTreeMap<i32, Vec<i64>> = BTreeMap::new();
    for r in got.iter().filter(|r| r.consumer == resumer && earlier.contains(r.body.as_str())) {
        again.entry(r.queue_id).or_default().push(r.queue_offset);
    }
    if !again.is_empty() {
        eprintln!("{resumer} received again (queue -> offsets): {again:?}");
    }
    for (queue, offsets) in &again {
        ensure!(offsets.len() <= RESUME_PULL_BATCH as usize, "queue {queue} redelivered {offsets:?} to {resumer}");
    }
    Ok(())
}

/// Polls `consumer` until `n` messages arrived; their bodies.
async fn poll_bodies(consumer: &PullConsumer, n: usize) -> Result<Vec<String>> {
    let deadline = tokio::time::Instant::now() + WAIT;
    let mut out = Vec::new();
    while out.len() < n {
        ensure!(tokio::time::Instant::now() < deadline, "polled {} of {n} messages", out.len());
        for m in consumer.poll(Duration::from_millis(500)).await? {
            out.push(String::from_utf8_lossy(&m.message.body).into_owned());
        }
    }
    Ok(out)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn push_and_pull_consumers_resume_at_committed_offsets_after_a_restart() -> Result<()> {
    const PUSH_TOPIC: &str = "T43_RESUME_PUSH";
    const PULL_TOPIC: &str = "T43_RESUME_PULL";
    const N: usize = 40;
    let cluster = Cluster::start(3).await?;
    cluster.create_topic(PUSH_TOPIC, 4).await?;
    cluster.create_topic(PULL_TOPIC, 4).await?;
    let producer = producer(&cluster, "t43_producer").await?;

    // Push: consume N, shut down (offsets stored two-way), send N more, restart.
    for i in 0..N {
        producer.send(Message::new(PUSH_TOPIC, format!("first-{i}"))).await?;
    }
    let collector = Collector::default();
    let builder = push_builder(&cluster, "t43_push", PUSH_TOPIC, "*").pull_batch_size(RESUME_PULL_BATCH);
    let consumer = start_collecting(builder.clone(), "p1", &collector).await?;
    collector.wait_for_bodies(&bodies("first", N)).await?;
    consumer.shutdown().await;
    for i in 0..N {
        producer.send(Message::new(PUSH_TOPIC, format!("second-{i}"))).await?;
    }
    let consumer = start_collecting(builder, "p2", &collector).await?;
    collector.wait_for_bodies(&bodies("second", N)).await?;
    // Shutdown waits for running listener calls: whatever was redelivered is recorded by now.
    consumer.shutdown().await;
    assert_resumed(&collector.all(), "p2")?;

    // Lite pull: the same, with the commit of shutdown (auto-commit on).
    for i in 0..N {
        producer.send(Message::new(PULL_TOPIC, format!("first-{i}"))).await?;
    }
    let lite = || {
        PullConsumer::builder("t43_pull")
            .namesrv_addr(&cluster.namesrv_addr)
            .subscribe(PULL_TOPIC, "*")
            .consume_from(ConsumeFrom::FirstOffset)
            .build()
    };
    let consumer = lite()?;
    consumer.start().await?;
    let polled: BTreeSet<String> = poll_bodies(&consumer, N).await?.into_iter().collect();
    assert_eq!(polled, bodies("first", N));
    consumer.shutdown().await;
    for i in 0..N {
        producer.send(Message::new(PULL_TOPIC, format!("second-{i}"))).await?;
    }
    let consumer = lite()?;
    consumer.start().await?;
    let polled = poll_bodies(&consumer, N).await?;
    consumer.shutdown().await;
    assert_eq!(polled.iter().cloned().collect::<BTreeSet<_>>(), bodies("second", N), "resumed after the commit");
    producer.shutdown().await;
    cluster.crash_all().await
}
