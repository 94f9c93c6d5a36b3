//! Message trace (`enableMsgTrace`) end to end: a NameServer and a one-node group in process
//! (harness `t40_cluster`) with `traceTopicEnable`, the SDK's traced producer, transaction producer,
//! push consumer and lite pull consumer (`raftmq consume --msgTrace`), and `queryMsgTraceById`
//! through the SDK and the CLI.
//!
//! - t78: four messages (two single sends, a batch of two) consumed by a traced group; after both
//!   clients shut down (which flushes their records), each message's trace has its Pub (the
//!   producer group, SEND_OK, the broker, the send's offsetMsgId, its keys and tags), a SubBefore
//!   and a SubAfter of the consumer group with `success`, and a successful SubAfter of the lite
//!   consumer's group; a message the listener refused once has a
//!   failed SubAfter and, when redelivered, a successful one; a committed transaction has its Pub
//!   (a half) and an EndTransaction of COMMIT_MESSAGE; the CLI prints Java's layout; an untraced
//!   producer's message has only the consumer's records; the broker's admin HTTP API
//!   (`/api/v1/messages/{msgId}/trace`) shows the same kinds of record, and 404 for an unknown
//!   trace topic.
//! - t78b: a customized trace topic receives the records and the default one none.
//! - t78c: the broker's `regionId` comes back with SEND_OK, and its `traceOn = false` stops the
//!   producer's Pub records; both change at runtime (`updateBrokerConfig`).
//! - t78d: without `traceTopicEnable`, the first trace message creates the trace topic (TBW102).

use crate::harness;

use std::any::Any;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::sync::atomic::Ordering;

use anyhow::Context;
use anyhow::Result;
use anyhow::ensure;
use harness::cluster::Cluster;
use harness::cluster::Collector;
use raftmq_client::Admin;
use raftmq_client::LocalTransactionState;
use raftmq_client::Producer;
use raftmq_client::PushConsumer;
use raftmq_client::SendStatus;
use raftmq_client::TransactionListener;
use raftmq_client::TransactionProducer;
use raftmq_client::consumer::ConsumeConcurrentlyContext;
use raftmq_client::consumer::ConsumeConcurrentlyStatus;
use raftmq_client::consumer::ConsumeFrom;
use raftmq_common::message::Message;
use raftmq_common::message::MessageExt;
use raftmq_common::message::trace::TraceType;
use raftmq_common::message::trace::TraceView;

const TOPIC: &str = "T78Traced";
const PRODUCERS: &str = "t78-producers";
const CONSUMERS: &str = "t78-consumers";
const LITE: &str = "t78-lite";

struct Commit;

impl TransactionListener for Commit {
    fn execute_local_transaction(&self, _msg: &Message, _arg: &(dyn Any + Send + Sync)) -> LocalTransactionState {
        LocalTransactionState::CommitMessage
    }

    fn check_local_transaction(&self, _msg: &MessageExt) -> LocalTransactionState {
        LocalTransactionState::CommitMessage
    }
}

fn of(views: &[TraceView], t: TraceType) -> Vec<&TraceView> {
    views.iter().filter(|v| v.trace_type == t).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sends_listener_calls_and_transaction_ends_are_traced_and_queried_by_id() -> Result<()> {
    let cluster = Cluster::start_with(1, |c| c.trace_topic_enable = true).await?;
    cluster.create_topic(TOPIC, 2).await?;
    let leader = cluster.wait_leader(harness::cluster::WAIT).await?;
    let broker_addr = cluster.addr(leader);

    let producer = Producer::builder(PRODUCERS).namesrv_addr(&cluster.namesrv_addr).enable_msg_trace(true).build()?;
    producer.start().await?;
    let mut sent = Vec::new();
    for i in 0..2 {
        let msg = Message::new(TOPIC, format!("single-{i}")).with_tags("TagA").with_keys(format!("order-{i} shared"));
        sent.push(producer.send(msg).await?);
    }
    let batch = (0..2).map(|i| Message::new(TOPIC, format!("batch-{i}")).with_tags("TagB")).collect();
    let batch_result = producer.send_batch(batch).await?;
    let batch_offsets: Vec<&str> = batch_result.offset_msg_id.split(',').collect();
    let mut ids: Vec<(String, String)> = sent.iter().map(|r| (r.msg_id.clone(), r.offset_msg_id.clone())).collect();
    for (id, offset) in batch_result.msg_id.split(',').zip(batch_offsets) {
        ids.push((id.to_owned(), offset.to_owned()));
    }
    ensure!(ids.len() == 4, "four ids: {ids:?}");

    let untraced = Producer::builder("t78-untraced").namesrv_addr(&cluster.namesrv_addr).build()?;
    untraced.start().await?;
    let plain = untraced.send(Message::new(TOPIC, "untraced")).await?;
    untraced.shutdown().await;

    let tx = TransactionProducer::builder(
        Producer::builder("t78-tx-producers").namesrv_addr(&cluster.namesrv_addr).enable_msg_trace(true),
        Arc::new(Commit),
    )
    .build()?;
    tx.start().await?;
    let committed = tx.send_message_in_transaction(Message::new(TOPIC, "tx-commit"), &()).await?;
    ensure!(committed.local_transaction_state == LocalTransactionState::CommitMessage, "{committed:?}");
    tx.shutdown().await;

    // The first delivery of single-0 is refused once, so it is traced failed and then consumed.
    let refused = Arc::new(AtomicBool::new(false));
    let seen = Collector::default();
    let (sink, refused_once) = (seen.clone(), refused.clone());
    let consumer = PushConsumer::builder(CONSUMERS)
        .namesrv_addr(&cluster.namesrv_addr)
        .instance_name("t78")
        .subscribe(TOPIC, "*")
        .consume_from(ConsumeFrom::FirstOffset)
        // The group's retry topic may get its route after the first rebalance; the redelivery of
        // the refused message waits for the next one.
        .rebalance_interval(std::time::Duration::from_millis(500))
        .enable_msg_trace(true)
        .listener_concurrently(move |msgs: &[MessageExt], ctx: &mut ConsumeConcurrentlyContext| {
            if msgs.iter().any(|m| m.message.body.as_ref() == b"single-0") && !refused_once.swap(true, Ordering::AcqRel)
            {
                // Redelivered after 1 s (level 1), not the default 10 s.
                ctx.delay_level_when_next_consume = 1;
                return ConsumeConcurrentlyStatus::ReconsumeLater;
            }
            sink.record("c", msgs);
            ConsumeConcurrentlyStatus::ConsumeSuccess
        })
        .build()?;
    consumer.start().await?;
    let bodies: std::collections::BTreeSet<String> =
        ["single-0", "single-1", "batch-0", "batch-1", "untraced", "tx-commit"].map(str::to_owned).into();
    seen.wait_for_bodies(&bodies).await?;
    // Shutting down sends what each client's dispatcher holds.
    consumer.shutdown().await;
    producer.shutdown().await;

    // A lite pull consumer (`raftmq consume`, PullConsumer) traces the batches poll returns.
    lite_consume_traced(&cluster.namesrv_addr, 6).await?;

    let admin = Admin::new(&cluster.namesrv_addr)?;
    for (i, (id, offset_id)) in ids.iter().enumerate() {
        let views = admin.query_msg_trace_by_id(id, None).await?;
        let pubs = of(&views, TraceType::Pub);
        ensure!(pubs.len() == 1, "message {i} ({id}): one Pub, got {views:#?}");
        let p = pubs[0];
        ensure!(
            p.group_name == PRODUCERS
                && p.status == "success"
                && p.topic == TOPIC
                && p.store_host == broker_addr
                && p.offset_msg_id == *offset_id,
            "message {i}: {p:#?}"
        );
        if i < 2 {
            ensure!(p.tags == "TagA" && p.keys == format!("order-{i} shared"), "message {i} tags and keys: {p:#?}");
        } else {
            ensure!(p.tags == "TagB", "batch message {i} tags: {p:#?}");
        }
        let befores: Vec<_> =
            of(&views, TraceType::SubBefore).into_iter().filter(|v| v.group_name == CONSUMERS).collect();
        let afters = of(&views, TraceType::SubAfter);
        ensure!(!befores.is_empty(), "message {i}: {views:#?}");
        ensure!(
            of(&views, TraceType::SubBefore).iter().any(|v| v.group_name == LITE),
            "message {i}, lite SubBefore: {views:#?}"
        );
        ensure!(afters.iter().any(|v| v.group_name == CONSUMERS && v.status == "success"), "message {i}: {views:#?}");
        let lite = afters.iter().filter(|v| v.group_name == LITE).collect::<Vec<_>>();
        ensure!(lite.len() == 1 && lite[0].status == "success", "message {i}: one lite SubAfter: {views:#?}");
        if i == 0 {
            ensure!(befores.len() == 2, "single-0 was handed over twice to the push consumer: {views:#?}");
            ensure!(afters.iter().any(|v| v.status == "failed"), "single-0 was refused once: {views:#?}");
        }
    }

    let views = admin.query_msg_trace_by_id(&committed.send_result.msg_id, None).await?;
    let ends = of(&views, TraceType::EndTransaction);
    ensure!(
        ends.len() == 1
            && ends[0].transaction_state == "COMMIT_MESSAGE"
            && !ends[0].from_transaction_check
            && ends[0].group_name == "t78-tx-producers",
        "the transaction's end: {views:#?}"
    );
    ensure!(of(&views, TraceType::Pub).len() == 1, "the half's Pub: {views:#?}");

    // An untraced producer's message: no Pub, but the traced consumer's records.
    let views = admin.query_msg_trace_by_id(&plain.msg_id, None).await?;
    ensure!(of(&views, TraceType::Pub).is_empty() && !of(&views, TraceType::SubAfter).is_empty(), "{views:#?}");

    // The broker's admin HTTP API answers from its own copy of the trace topic.
    let http_addr = cluster.broker(leader).and_then(|b| b.admin_addr()).context("admin HTTP address")?;
    let (status, body) = http_get(&http_addr.to_string(), &format!("/api/v1/messages/{}/trace", ids[0].0)).await?;
    ensure!(status == 200, "GET trace: {status} {body}");
    let doc: serde_json::Value = serde_json::from_str(&body).context("trace JSON")?;
    let records = doc["records"].as_array().context("records")?;
    let kinds: std::collections::BTreeSet<&str> = records.iter().filter_map(|r| r["trace_type"].as_str()).collect();
    ensure!(kinds == ["Pub", "SubAfter", "SubBefore"].into(), "HTTP trace kinds: {doc}");
    let (status, body) =
        http_get(&http_addr.to_string(), &format!("/api/v1/messages/{}/trace?trace_topic=NoSuchTopic", ids[0].0))
            .await?;
    ensure!(status == 404 && body.contains("TOPIC_NOT_FOUND"), "an unknown trace topic: {status} {body}");

    let out = cli(&["admin", "queryMsgTraceById", "-n", &cluster.namesrv_addr, "-i", &ids[0].0]).await?;
    for want in ["#ProducerGroup", PRODUCERS, "#ConsumerGroup", CONSUMERS, "success", "failed"] {
        ensure!(out.contains(want), "queryMsgTraceById output lacks {want}:\n{out}");
    }
    let json = cli(&["admin", "queryMsgTraceById", "-n", &cluster.namesrv_addr, "-i", &ids[0].0, "--json"]).await?;
    let parsed: serde_json::Value = serde_json::from_str(json.trim()).context("queryMsgTraceById --json")?;
    ensure!(parsed["traces"].as_array().is_some_and(|t| t.len() >= 4), "{parsed}");
    admin.shutdown().await;
    cluster.shutdown().await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_customized_trace_topic_gets_the_records() -> Result<()> {
    const CUSTOM: &str = "T78CustomTrace";
    let cluster = Cluster::start_with(1, |c| c.trace_topic_enable = true).await?;
    cluster.create_topic(TOPIC, 1).await?;
    cluster.create_topic(CUSTOM, 1).await?;
    let producer = Producer::builder(PRODUCERS)
        .namesrv_addr(&cluster.namesrv_addr)
        .enable_msg_trace(true)
        .customized_trace_topic(CUSTOM)
        .build()?;
    producer.start().await?;
    let sent = producer.send(Message::new(TOPIC, "custom")).await?;
    ensure!(sent.status == SendStatus::SendOk, "{sent:?}");
    producer.shutdown().await;
    let admin = Admin::new(&cluster.namesrv_addr)?;
    let views = admin.query_msg_trace_by_id(&sent.msg_id, Some(CUSTOM)).await?;
    ensure!(of(&views, TraceType::Pub).len() == 1, "{views:#?}");
    ensure!(admin.query_msg_trace_by_id(&sent.msg_id, None).await?.is_empty(), "nothing in the default topic");
    let out =
        cli(&["admin", "queryMsgTraceById", "-n", &cluster.namesrv_addr, "-i", &sent.msg_id, "-t", CUSTOM]).await?;
    ensure!(out.contains(PRODUCERS), "{out}");
    admin.shutdown().await;
    cluster.shutdown().await
}

/// The broker's `regionId` reaches the producer with every SEND_OK, and with `traceOn = false` a
/// traced producer writes no Pub record of its sends to that broker.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_brokers_region_and_trace_switch_reach_the_producer() -> Result<()> {
    let cluster = Cluster::start_with(1, |c| {
        c.trace_topic_enable = true;
        c.trace_on = false;
        c.region_id = "eu-west-1".into();
    })
    .await?;
    cluster.create_topic(TOPIC, 1).await?;
    let producer = Producer::builder(PRODUCERS).namesrv_addr(&cluster.namesrv_addr).enable_msg_trace(true).build()?;
    producer.start().await?;
    let sent = producer.send(Message::new(TOPIC, "untraced by the broker")).await?;
    ensure!(sent.region_id == "eu-west-1" && !sent.trace_on, "{sent:?}");
    producer.shutdown().await;
    // A traced consumer still records it (traceOn is about sends), which shows the trace topic works.
    lite_consume_traced(&cluster.namesrv_addr, 1).await?;
    let admin = Admin::new(&cluster.namesrv_addr)?;
    let views = admin.query_msg_trace_by_id(&sent.msg_id, None).await?;
    ensure!(of(&views, TraceType::Pub).is_empty(), "traceOn=false: no Pub record: {views:#?}");
    ensure!(of(&views, TraceType::SubAfter).len() == 1, "the consumer's record: {views:#?}");

    // Both keys change while the broker runs (updateBrokerConfig), from the next SEND_OK.
    let leader = cluster.wait_leader(harness::cluster::WAIT).await?;
    let updates = [("traceOn", "true"), ("regionId", "eu-central-1")].map(|(k, v)| (k.to_owned(), v.to_owned()));
    admin.update_broker_config(&cluster.addr(leader), &updates.into()).await?;
    let producer = Producer::builder(PRODUCERS).namesrv_addr(&cluster.namesrv_addr).enable_msg_trace(true).build()?;
    producer.start().await?;
    let traced = producer.send(Message::new(TOPIC, "traced after the update")).await?;
    ensure!(traced.region_id == "eu-central-1" && traced.trace_on, "{traced:?}");
    producer.shutdown().await;
    let views = admin.query_msg_trace_by_id(&traced.msg_id, None).await?;
    ensure!(of(&views, TraceType::Pub).len() == 1, "traceOn=true at runtime: a Pub record: {views:#?}");
    admin.shutdown().await;
    cluster.shutdown().await
}

/// Without `traceTopicEnable` (a `raftmq dev` default), the first trace message creates the trace
/// topic through TBW102 (`autoCreateTopicEnable`), as a Java broker does, and the records are found.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_trace_topic_is_created_by_the_first_trace_message() -> Result<()> {
    let cluster = Cluster::start(1).await?;
    cluster.create_topic(TOPIC, 1).await?;
    let producer = Producer::builder(PRODUCERS).namesrv_addr(&cluster.namesrv_addr).enable_msg_trace(true).build()?;
    producer.start().await?;
    let sent = producer.send(Message::new(TOPIC, "auto-created trace topic")).await?;
    producer.shutdown().await;
    let admin = Admin::new(&cluster.namesrv_addr)?;
    // The broker registers the new topic with the NameServer at once; the query needs its route.
    let deadline = tokio::time::Instant::now() + harness::cluster::WAIT;
    let views = loop {
        match admin.query_msg_trace_by_id(&sent.msg_id, None).await {
            Ok(views) if !views.is_empty() => break views,
            other => ensure!(tokio::time::Instant::now() < deadline, "no trace of {} in time: {other:?}", sent.msg_id),
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    };
    ensure!(of(&views, TraceType::Pub).len() == 1, "{views:#?}");
    admin.shutdown().await;
    cluster.shutdown().await
}

/// One HTTP/1.1 GET over a fresh connection: the status and the body.
async fn http_get(addr: &str, path: &str) -> Result<(u16, String)> {
    use tokio::io::AsyncReadExt;
    use tokio::io::AsyncWriteExt;
    let mut stream = tokio::net::TcpStream::connect(addr).await?;
    stream.write_all(format!("GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n").as_bytes()).await?;
    let mut raw = Vec::new();
    tokio::time::timeout(harness::cluster::WAIT, stream.read_to_end(&mut raw))
        .await
        .context("HTTP answer timed out")??;
    let text = String::from_utf8(raw)?;
    let (head, body) = text.split_once("\r\n\r\n").context("no header end")?;
    let status = head.split(' ').nth(1).context("status line")?.parse()?;
    ensure!(!head.to_ascii_lowercase().contains("transfer-encoding: chunked"), "a chunked answer: {head}");
    Ok((status, body.to_owned()))
}

/// `raftmq consume --msgTrace` (a lite PullConsumer of group LITE) of `count` messages of TOPIC
/// from the first.
async fn lite_consume_traced(namesrv_addr: &str, count: u32) -> Result<()> {
    let count = count.to_string();
    let args = ["-n", namesrv_addr, "-t", TOPIC, "-g", LITE, "--from-first", "--count", &count, "--wait", "60s"];
    cli(&[&["consume"][..], &args, &["--msgTrace"]].concat()).await.map(drop)
}

/// Runs the `raftmq` binary; its stdout when it succeeded.
async fn cli(args: &[&str]) -> Result<String> {
    let out = tokio::process::Command::new(env!("CARGO_BIN_EXE_raftmq")).args(args).output().await?;
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    ensure!(out.status.success(), "raftmq {args:?} failed: {stdout}{}", String::from_utf8_lossy(&out.stderr));
    Ok(stdout)
}
