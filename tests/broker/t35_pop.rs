//! End-to-end POP consumption over remoting (RocketMQ 5's POP_MESSAGE, ACK_MESSAGE and
//! CHANGE_MESSAGE_INVISIBLETIME, what 5.x remoting consumers and the gRPC proxy use) on a
//! 3-replica group, with the default broker settings:
//! - every message sent is popped once; acked ones never come back; an ack or change with a stale
//!   receipt is refused (NO_MESSAGE, "stale receipt handle"); a changed receipt acks;
//! - a message left unacked comes back after its invisible time from `%RETRY%{group}_{topic}` with
//!   reconsumeTimes 1 and RETRY_TOPIC naming its topic, and acks from there; a pop long-polling
//!   since before that retry topic existed is woken by the revive that makes it;
//! - the group's committed offsets follow (lag and admin tools see POP groups);
//! - the leader stopped while a message is in flight: the new leader hands out nothing acked and
//!   gives the unacked message back after its time;
//! - poppers at once (the leader pipelines their pops): every message handed out once; FIFO
//!   poppers of one queue get its messages in order, never two batches of it in flight.
//!
//! Waits poll with a deadline (the pop's own long polling); nothing sleeps to synchronise.

use crate::harness;

use std::collections::BTreeSet;
use std::time::Duration;
use std::time::Instant;

use anyhow::Context;
use anyhow::Result;
use anyhow::bail;
use harness::group::Group;
use harness::group::query_offset;
use raftmq_client::Admin;
use raftmq_client::Producer;
use raftmq_common::message::Message;
use raftmq_common::message::MessageExt;
use raftmq_common::message::properties;
use raftmq_common::message::record::DecodeOptions;
use raftmq_common::message::record::decode_all;
use raftmq_common::protocol::RemotingCommand;
use raftmq_common::protocol::RequestCode;
use raftmq_common::protocol::ResponseCode;
use raftmq_common::protocol::body::topic::TopicConfig;
use raftmq_common::protocol::header::pop::AckMessageRequestHeader;
use raftmq_common::protocol::header::pop::ChangeInvisibleTimeRequestHeader;
use raftmq_common::protocol::header::pop::ChangeInvisibleTimeResponseHeader;
use raftmq_common::protocol::header::pop::ExtraInfo;
use raftmq_common::protocol::header::pop::PopMessageRequestHeader;
use raftmq_common::protocol::header::pop::PopMessageResponseHeader;
use raftmq_common::protocol::header::pop::PopTopicType;
use raftmq_common::protocol::header::pop::start_offset_of;
use raftmq_common::protocol::leader_hint::parse_leader_hint;
use raftmq_common::remoting::RemotingClient;

const WAIT: Duration = Duration::from_secs(30);
const TOPIC: &str = "T35_POP";
const GROUP: &str = "t35_pop_group";
const QUEUES: i32 = 2;
const SENT: usize = 10;
/// The invisible time the consumer asks for.
const INVISIBLE_MS: i64 = 2_000;
/// The invisible time of the concurrent poppers: longer than any election, so a message they hold
/// never comes back while its ack waits for a leader.
const HELD_INVISIBLE_MS: i64 = 120_000;
const RPC: Duration = Duration::from_secs(10);
/// The polling time of a pop that waits for a revived message.
const LONG_POLL_MS: i64 = 20_000;

/// A popped message with the receipt a client builds for it.
struct Delivery {
    message: MessageExt,
    extra: ExtraInfo,
}

impl Delivery {
    fn body(&self) -> String {
        String::from_utf8_lossy(&self.message.message.body).into_owned()
    }
}

async fn pop(client: &RemotingClient, addr: &str, max: i32, poll_ms: i64) -> Result<(ResponseCode, Vec<Delivery>)> {
    let (code, got, _) = pop_as(client, addr, (GROUP, TOPIC, false), max, poll_ms).await?;
    Ok((code, got))
}

/// A pop by `(group, topic, fifo)`.
async fn pop_as(
    client: &RemotingClient,
    addr: &str,
    (group, topic, fifo): (&str, &str, bool),
    max: i32,
    poll_ms: i64,
) -> Result<(ResponseCode, Vec<Delivery>, Option<String>)> {
    let header = PopMessageRequestHeader {
        consumer_group: group.into(),
        topic: topic.into(),
        queue_id: -1,
        max_msg_nums: max,
        invisible_time: if group == GROUP { INVISIBLE_MS } else { HELD_INVISIBLE_MS },
        poll_time: poll_ms,
        born_time: 0,
        init_mode: 0,
        exp_type: Some("TAG".into()),
        exp: Some("*".into()),
        order: Some(fifo),
        attempt_id: None,
    };
    let request = RemotingCommand::request_with_header(RequestCode::PopMessage, &header);
    let response = client.invoke(addr, request, RPC + Duration::from_millis(poll_ms as u64)).await?;
    let code = response.response_code();
    if code != ResponseCode::Success {
        return Ok((code, Vec::new(), response.remark));
    }
    let h: PopMessageResponseHeader = response.decode_header()?;
    let start_info = h.start_offset_info.clone().unwrap_or_default();
    let mut out = Vec::new();
    for message in decode_all(&response.body, DecodeOptions::verify_crc())? {
        let topic_type =
            if message.message.topic.as_str() == topic { PopTopicType::Normal } else { PopTopicType::Retry };
        let ck_offset = start_offset_of(&start_info, topic_type, message.queue_id)
            .with_context(|| format!("no start offset for {:?} {}", topic_type, message.queue_id))?;
        let extra = ExtraInfo {
            ck_offset,
            pop_time: h.pop_time,
            invisible_time: h.invisible_time,
            revive_qid: h.revive_qid,
            topic_type,
            broker_name: "broker-a".into(),
            queue_id: message.queue_id,
            queue_offset: Some(message.queue_offset),
        };
        out.push(Delivery { message, extra });
    }
    Ok((code, out, None))
}

async fn ack(client: &RemotingClient, addr: &str, d: &Delivery) -> Result<RemotingCommand> {
    ack_as(client, addr, (GROUP, TOPIC), d).await
}

async fn ack_as(
    client: &RemotingClient,
    addr: &str,
    (group, topic): (&str, &str),
    d: &Delivery,
) -> Result<RemotingCommand> {
    let header = AckMessageRequestHeader {
        consumer_group: group.into(),
        topic: topic.into(),
        queue_id: d.extra.queue_id,
        extra_info: d.extra.to_string(),
        offset: d.message.queue_offset,
    };
    Ok(client.invoke(addr, RemotingCommand::request_with_header(RequestCode::AckMessage, &header), RPC).await?)
}

/// Pops until `want` messages came or `WAIT` ends.
async fn pop_until(client: &RemotingClient, addr: &str, want: usize) -> Result<Vec<Delivery>> {
    let deadline = Instant::now() + WAIT;
    let mut got = Vec::new();
    while got.len() < want {
        if Instant::now() > deadline {
            bail!("popped {} of {want} messages in {WAIT:?}", got.len());
        }
        let (code, batch) = pop(client, addr, 32, 1_000).await?;
        match code {
            ResponseCode::Success | ResponseCode::PollingTimeout => got.extend(batch),
            // An election in progress.
            ResponseCode::ServiceNotAvailable | ResponseCode::SystemError => {
                tokio::time::sleep(Duration::from_millis(50)).await
            }
            other => bail!("pop answered {other:?}"),
        }
    }
    Ok(got)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn popped_messages_are_acked_once_come_back_when_unacked_and_survive_a_failover() -> Result<()> {
    let config_broker_name = "broker-a";
    let mut group = Group::start(3).await?;
    assert!(group.configs.values().all(|c| c.broker_name == config_broker_name));
    let leader = group.wait_leader(WAIT).await?;
    let admin = Admin::new(&group.namesrv_addr)?;
    let config = TopicConfig { read_queue_nums: QUEUES, write_queue_nums: QUEUES, ..TopicConfig::new(TOPIC) };
    admin.create_topic(&group.addr(leader), &config).await?;
    admin.shutdown().await;
    let producer = Producer::builder("t35_producer").namesrv_addr(&group.namesrv_addr).build()?;
    producer.start().await?;
    for i in 0..SENT {
        producer.send(Message::new(TOPIC, format!("m{i}"))).await?;
    }

    let client = RemotingClient::new();
    let addr = group.addr(leader);
    // A follower refuses, naming the leader.
    let follower = *group.brokers.keys().find(|id| **id != leader).context("a follower")?;
    let (code, _) = pop(&client, &group.addr(follower), 1, 0).await?;
    assert_eq!(code, ResponseCode::ServiceNotAvailable);

    let first = pop_until(&client, &addr, SENT).await?;
    let bodies: BTreeSet<String> = first.iter().map(Delivery::body).collect();
    assert_eq!(bodies.len(), SENT, "every message popped once");
    // Nothing more while they are invisible.
    let (code, more) = pop(&client, &addr, 32, 200).await?;
    assert_eq!((code, more.len()), (ResponseCode::PollingTimeout, 0));

    let (unacked, rest) = first.split_at(1);
    let (renewed, acked) = rest.split_at(1);
    for d in acked {
        let r = ack(&client, &addr, d).await?;
        assert_eq!(r.response_code(), ResponseCode::Success, "{:?}", r.remark);
    }
    // Acked twice: stale.
    let again = ack(&client, &addr, &acked[0]).await?;
    assert_eq!(again.response_code(), ResponseCode::NoMessage);
    assert!(again.remark.as_deref().is_some_and(|r| r.starts_with("stale receipt handle")), "{:?}", again.remark);

    // Renew one: the old receipt is stale, the new one acks.
    let d = &renewed[0];
    let change = ChangeInvisibleTimeRequestHeader {
        consumer_group: GROUP.into(),
        topic: TOPIC.into(),
        queue_id: d.extra.queue_id,
        extra_info: d.extra.to_string(),
        offset: d.message.queue_offset,
        invisible_time: 20_000,
    };
    let request = RemotingCommand::request_with_header(RequestCode::ChangeMessageInvisibletime, &change);
    let r = client.invoke(&addr, request, RPC).await?;
    assert_eq!(r.response_code(), ResponseCode::Success, "{:?}", r.remark);
    let changed: ChangeInvisibleTimeResponseHeader = r.decode_header()?;
    assert!(changed.pop_time > d.extra.pop_time);
    assert_eq!(ack(&client, &addr, d).await?.response_code(), ResponseCode::NoMessage);
    let renewed_receipt = Delivery {
        message: d.message.clone(),
        extra: ExtraInfo { pop_time: changed.pop_time, invisible_time: 20_000, ..d.extra.clone() },
    };
    assert_eq!(ack(&client, &addr, &renewed_receipt).await?.response_code(), ResponseCode::Success);

    // The unacked one comes back from the retry topic, once, with reconsumeTimes 1: to a pop parked
    // before the group's retry topic existed, woken by the revive that makes it (as Java's pop long
    // polling is woken by its retry topic), not at the end of its polling time.
    let parked_at = Instant::now();
    let (code, back) = pop(&client, &addr, 32, LONG_POLL_MS).await?;
    assert_eq!(code, ResponseCode::Success);
    assert!(
        parked_at.elapsed() < Duration::from_millis(LONG_POLL_MS as u64 / 2),
        "the revived message reached the parked pop only after {:?}",
        parked_at.elapsed()
    );
    assert_eq!(back.len(), 1);
    assert_eq!(back[0].body(), unacked[0].body());
    assert_eq!(back[0].message.reconsume_times, 1);
    assert_eq!(back[0].extra.topic_type, PopTopicType::Retry);
    assert_eq!(back[0].message.message.properties.get(properties::RETRY_TOPIC), Some(TOPIC));
    // The original delivery's receipt is stale now.
    assert_eq!(ack(&client, &addr, &unacked[0]).await?.response_code(), ResponseCode::NoMessage);

    // Left in flight across a failover: the new leader knows it.
    group.stop(leader).await;
    let new_leader = group.wait_leader(WAIT).await?;
    let addr = group.addr(new_leader);
    let again = pop_until(&client, &addr, 1).await?;
    assert_eq!(again.len(), 1, "only the unacked message comes back");
    assert_eq!(again[0].body(), unacked[0].body());
    assert_eq!(again[0].message.reconsume_times, 2, "its third delivery");
    let r = ack(&client, &addr, &again[0]).await?;
    assert_eq!(r.response_code(), ResponseCode::Success, "{:?}", r.remark);
    let (code, none) = pop(&client, &addr, 32, 3_000).await?;
    assert_eq!((code, none.len()), (ResponseCode::PollingTimeout, 0), "nothing acked is handed out again");

    // The group's committed offsets are at the queues' ends.
    for q in 0..QUEUES {
        let max = group.brokers[&new_leader].store().queue_offsets(TOPIC, q).1 as i64;
        assert_eq!(query_offset(&client, &addr, GROUP, TOPIC, q).await?, Some(max), "queue {q}");
    }
    producer.shutdown().await;
    group.shutdown().await;
    Ok(())
}

/// Several poppers at once, each acking what it got before it pops again.
async fn drain_concurrently(
    addr: &str,
    who: (&'static str, &'static str, bool),
    poppers: usize,
    max: i32,
    total: usize,
) -> Result<Vec<Vec<String>>> {
    let got = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let mut tasks = tokio::task::JoinSet::new();
    for _ in 0..poppers {
        let (mut addr, got) = (addr.to_owned(), got.clone());
        tasks.spawn(async move {
            let client = RemotingClient::new();
            let deadline = Instant::now() + WAIT;
            let mut batches = Vec::new();
            // An election under load: retried, at the leader a refusal names, after a short pause.
            let follow = |remark: Option<&str>, addr: &mut String| {
                if let Some(leader) = remark.and_then(parse_leader_hint) {
                    *addr = leader.to_owned();
                }
            };
            while got.load(std::sync::atomic::Ordering::SeqCst) < total {
                if Instant::now() > deadline {
                    bail!("{} of {total} popped in {WAIT:?}", got.load(std::sync::atomic::Ordering::SeqCst));
                }
                let (code, batch, remark) = pop_as(&client, &addr, who, max, 200).await?;
                match code {
                    ResponseCode::Success | ResponseCode::PollingTimeout => {}
                    ResponseCode::ServiceNotAvailable | ResponseCode::SystemError => {
                        follow(remark.as_deref(), &mut addr);
                        tokio::time::sleep(Duration::from_millis(50)).await;
                        continue;
                    }
                    other => bail!("pop answered {other:?}"),
                }
                got.fetch_add(batch.len(), std::sync::atomic::Ordering::SeqCst);
                for d in &batch {
                    let mut retried = false;
                    loop {
                        let r = ack_as(&client, &addr, (who.0, who.1), d).await?;
                        match r.response_code() {
                            ResponseCode::Success => break,
                            // An ack retried after an unknown outcome that had applied: its
                            // message cannot have come back (the invisible time is longer).
                            ResponseCode::NoMessage if retried => break,
                            ResponseCode::ServiceNotAvailable | ResponseCode::SystemError
                                if Instant::now() < deadline =>
                            {
                                retried = true;
                                follow(r.remark.as_deref(), &mut addr);
                                tokio::time::sleep(Duration::from_millis(50)).await
                            }
                            _ => bail!("ack: {:?} {:?}", r.response_code(), r.remark),
                        }
                    }
                }
                if !batch.is_empty() {
                    batches.push(batch.iter().map(Delivery::body).collect());
                }
            }
            Ok::<_, anyhow::Error>(batches)
        });
    }
    let mut all = Vec::new();
    while let Some(joined) = tasks.join_next().await {
        all.extend(joined??);
    }
    Ok(all)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_poppers_get_each_message_once_and_fifo_in_order() -> Result<()> {
    const TOPIC_C: &str = "T35_CONCURRENT";
    const TOPIC_F: &str = "T35_FIFO";
    const MESSAGES: usize = 400;
    const FIFO_MESSAGES: usize = 60;
    let group = Group::start(3).await?;
    let leader = group.wait_leader(WAIT).await?;
    let addr = group.addr(leader);
    let admin = Admin::new(&group.namesrv_addr)?;
    for (topic, queues) in [(TOPIC_C, 4), (TOPIC_F, 1)] {
        let config = TopicConfig { read_queue_nums: queues, write_queue_nums: queues, ..TopicConfig::new(topic) };
        admin.create_topic(&addr, &config).await?;
    }
    admin.shutdown().await;
    let producer = Producer::builder("t35_concurrent_producer").namesrv_addr(&group.namesrv_addr).build()?;
    producer.start().await?;
    for i in 0..MESSAGES {
        producer.send(Message::new(TOPIC_C, format!("c{i:04}"))).await?;
    }
    for i in 0..FIFO_MESSAGES {
        producer.send(Message::new(TOPIC_F, format!("f{i:04}"))).await?;
    }

    let batches = drain_concurrently(&addr, ("t35_concurrent", TOPIC_C, false), 8, 8, MESSAGES).await?;
    let bodies: Vec<String> = batches.into_iter().flatten().collect();
    let unique: BTreeSet<&String> = bodies.iter().collect();
    assert_eq!(unique.len(), MESSAGES, "every message popped");
    assert_eq!(bodies.len(), MESSAGES, "none popped twice");

    // FIFO, one queue: a batch is held until acked, so the batches, in any popper, are consecutive
    // runs of the queue, and together they are the queue once.
    let batches = drain_concurrently(&addr, ("t35_fifo", TOPIC_F, true), 4, 5, FIFO_MESSAGES).await?;
    let mut runs: Vec<Vec<String>> = batches;
    runs.sort();
    let flat: Vec<String> = runs.into_iter().flatten().collect();
    let expected: Vec<String> = (0..FIFO_MESSAGES).map(|i| format!("f{i:04}")).collect();
    assert_eq!(flat, expected, "FIFO batches are the queue in order, each message once");
    producer.shutdown().await;
    group.shutdown().await;
    Ok(())
}
