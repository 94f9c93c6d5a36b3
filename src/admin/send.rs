//! Commands that send through a tools producer (`PID_SMSC`) and time the sends: `sendMessage`,
//! `sendMsgStatus`, `checkMsgSendRT`, `clusterRT`. The producer is shut down whatever the outcome.

use std::collections::BTreeSet;

use anyhow::Context;
use anyhow::Result;
use anyhow::anyhow;
use anyhow::bail;
use clap::Args;
use raftmq_client::Admin;
use raftmq_common::message::Message;
use raftmq_common::message::MessageQueue;
use serde_json::json;

use super::out::Out;
use crate::namesrv_addr::NamesrvAddrArgs;
use crate::table::Table;

#[derive(Debug, Args)]
pub(super) struct SendMessageArgs {
    /// Topic.
    #[arg(short = 't', long = "topic")]
    topic: String,
    /// The body, as UTF-8 text.
    #[arg(short = 'p', long = "body")]
    body: String,
    /// Keys, space-separated.
    #[arg(short = 'k', long = "key")]
    keys: Option<String>,
    /// Tags.
    #[arg(short = 'c', long = "tags")]
    tags: Option<String>,
    /// Broker group to send to (with `-i`).
    #[arg(short = 'b', long = "broker")]
    broker_name: Option<String>,
    /// Queue to send to (needs `-b`).
    #[arg(short = 'i', long = "qid", requires = "broker_name")]
    queue_id: Option<i32>,
}

#[derive(Debug, Args)]
pub(super) struct SendMsgStatusArgs {
    /// Broker group name: its own topic of that name is sent to.
    #[arg(short = 'b', long = "brokerName")]
    broker_name: String,
    /// Body size in bytes.
    #[arg(short = 's', long = "messageSize", default_value_t = 128)]
    size: usize,
    /// Messages to send (after one warm-up send).
    #[arg(short = 'c', long = "count", default_value_t = 50)]
    count: u32,
}

#[derive(Debug, Args)]
pub(super) struct CheckMsgSendRtArgs {
    /// Topic.
    #[arg(short = 't', long = "topic")]
    topic: String,
    /// Messages to send.
    #[arg(short = 'a', long = "amount", default_value_t = 100)]
    amount: u32,
    /// Body size in bytes.
    #[arg(short = 's', long = "size", default_value_t = 128)]
    size: usize,
}

#[derive(Debug, Args)]
pub(super) struct ClusterRtArgs {
    /// Cluster name (default: every cluster).
    #[arg(short = 'c', long = "cluster")]
    cluster: Option<String>,
    /// Messages per broker group and round.
    #[arg(short = 'a', long = "amount", default_value_t = 100)]
    amount: u32,
    /// Body size in bytes.
    #[arg(short = 's', long = "size", default_value_t = 128)]
    size: usize,
    /// Print `time|machineRoom|cluster|broker|rt` lines, for logs.
    #[arg(short = 'p', long = "printLog", default_value_t = false, action = clap::ArgAction::Set)]
    print_log: bool,
    /// Machine room named in `-p` lines.
    #[arg(short = 'm', long = "machineRoom", default_value = "noname")]
    machine_room: String,
    /// Seconds between rounds; without it, one round (Java's loops every 10 s until interrupted).
    #[arg(short = 'i', long = "interval", value_parser = clap::value_parser!(u64).range(1..))]
    interval_s: Option<u64>,
}

/// A producer for the send commands, signed as the admin commands are.
async fn tools_producer(namesrv: &NamesrvAddrArgs) -> Result<raftmq_client::Producer> {
    let producer = raftmq_client::Producer::builder("PID_SMSC")
        .namesrv_addr(&namesrv.namesrv_addr)
        .send_timeout(namesrv.timeout)
        .credentials(namesrv.credentials()?)
        .tls(namesrv.tls())
        .build()?;
    producer.start().await?;
    Ok(producer)
}

/// Java's `SendMessageCommand`: one message, to a chosen queue with `-b` and `-i`, and its result.
pub(super) async fn send_message(namesrv: &NamesrvAddrArgs, out: Out, a: SendMessageArgs) -> Result<()> {
    let producer = tools_producer(namesrv).await?;
    let mut msg = Message::new(a.topic.as_str(), a.body.trim().as_bytes().to_vec());
    if let Some(tags) = &a.tags {
        msg.set_tags(tags.trim());
    }
    if let Some(keys) = &a.keys {
        msg.set_keys(keys.trim());
    }
    // Java sends to the queue only for an id above -1, and otherwise as usual.
    let sent = match (&a.broker_name, a.queue_id) {
        (Some(broker), Some(queue_id)) if queue_id > -1 => {
            producer.send_to_queue(msg, &MessageQueue::new(&a.topic, broker, queue_id)).await
        }
        _ => producer.send(msg).await,
    };
    producer.shutdown().await;
    let r = sent.context("sendMessage")?;
    if out.json {
        out.json(&json!({"brokerName": r.message_queue.broker_name, "queueId": r.message_queue.queue_id,
            "sendStatus": r.status.name(), "msgId": r.msg_id, "offsetMsgId": r.offset_msg_id,
            "queueOffset": r.queue_offset}));
        return Ok(());
    }
    let line = |b: &str, q: &str, s: &str, id: &str| println!("{b:<32}  {q:<4}  {s:<20}    {id}");
    line("#Broker Name", "#QID", "#Send Result", "#MsgId");
    line(&r.message_queue.broker_name, &r.message_queue.queue_id.to_string(), r.status.name(), &r.msg_id);
    Ok(())
}

/// Java's `SendResult.toString`.
fn send_result_text(r: &raftmq_client::SendResult) -> String {
    format!(
        "SendResult [sendStatus={}, msgId={}, offsetMsgId={}, messageQueue=MessageQueue [topic={}, brokerName={}, \
         queueId={}], queueOffset={}]",
        r.status.name(),
        r.msg_id,
        r.offset_msg_id,
        r.message_queue.topic,
        r.message_queue.broker_name,
        r.message_queue.queue_id,
        r.queue_offset
    )
}

/// Java's `SendMsgStatusCommand`: one warm-up send, then `-c` sends of `-s` bytes to the topic
/// named after the broker group, each printed with its round trip.
pub(super) async fn send_msg_status(namesrv: &NamesrvAddrArgs, out: Out, a: SendMsgStatusArgs) -> Result<()> {
    let producer = tools_producer(namesrv).await?;
    let outcome = async {
        producer.send(Message::new(a.broker_name.as_str(), vec![b'a'; 16])).await.context("sendMsgStatus")?;
        let mut rows = Vec::new();
        for _ in 0..a.count {
            let started = std::time::Instant::now();
            let r = producer.send(Message::new(a.broker_name.as_str(), vec![b'a'; a.size])).await.context("sendMsgStatus")?;
            let rt_ms = started.elapsed().as_millis();
            if out.json {
                rows.push(json!({"rtMs": rt_ms, "status": r.status.name(), "msgId": r.msg_id, "queueId": r.message_queue.queue_id}));
            } else {
                println!("rt:{rt_ms}ms, SendResult={}", send_result_text(&r));
            }
        }
        if out.json {
            out.json(&json!({"brokerName": a.broker_name, "sends": rows}));
        }
        Ok(())
    }
    .await;
    producer.shutdown().await;
    outcome
}

/// Java's `CheckMsgSendRTCommand`: `-a` sends, send `i` to queue `i mod queues`, each printed
/// with its broker, queue, success and round trip; the average leaves out the first send.
pub(super) async fn check_msg_send_rt(namesrv: &NamesrvAddrArgs, out: Out, a: CheckMsgSendRtArgs) -> Result<()> {
    let producer = tools_producer(namesrv).await?;
    let outcome = async {
        let route = producer.routes().publish_info(&a.topic, None).await.context("checkMsgSendRT")?;
        let queues = route.message_queues();
        if queues.is_empty() {
            bail!("checkMsgSendRT: topic {} has no writable queue", a.topic);
        }
        let mut table = Table::new(&["#Broker Name", "#QID", "#Send Result", "#RT"]);
        let mut rows = Vec::new();
        let mut total_ms = 0u128;
        for i in 0..a.amount {
            let mq = &queues[i as usize % queues.len()];
            let started = std::time::Instant::now();
            let ok = producer.send_to_queue(Message::new(a.topic.as_str(), vec![0u8; a.size]), mq).await.is_ok();
            let rt_ms = started.elapsed().as_millis();
            if i != 0 {
                total_ms += rt_ms;
            }
            table.row([mq.broker_name.clone(), mq.queue_id.to_string(), ok.to_string(), rt_ms.to_string()]);
            rows.push(json!({"brokerName": mq.broker_name, "queueId": mq.queue_id, "sendResult": ok, "rtMs": rt_ms}));
        }
        let average = if a.amount > 1 { total_ms as f64 / f64::from(a.amount - 1) } else { 0.0 };
        if out.json {
            out.json(&json!({"topic": a.topic, "sends": rows, "avgRtMs": average}));
        } else {
            out.table(&table);
            println!("Avg RT: {average:.2}");
        }
        Ok(())
    }
    .await;
    producer.shutdown().await;
    outcome
}

/// Java's `ClusterSendMsgRTCommand`: per broker group of the cluster(s), `-a` sends of `-s` bytes
/// to its own topic; the average round trip leaves out the first send. One round, or one every
/// `-i` seconds until interrupted.
pub(super) async fn cluster_rt(admin: &Admin, namesrv: &NamesrvAddrArgs, out: Out, a: ClusterRtArgs) -> Result<()> {
    let info = admin.cluster_info().await.context("clusterRT")?;
    let clusters: Vec<(String, BTreeSet<String>)> = match &a.cluster {
        Some(c) => {
            let names = info.cluster_addr_table.get(c).ok_or_else(|| anyhow!("clusterRT: cluster [{c}] not exist"))?;
            vec![(c.clone(), names.iter().cloned().collect())]
        }
        None => info.cluster_addr_table.iter().map(|(c, names)| (c.clone(), names.iter().cloned().collect())).collect(),
    };
    let producer = tools_producer(namesrv).await?;
    let outcome = async {
        loop {
            let mut table = Table::new(&["#Cluster Name", "#Broker Name", "#RT", "#successCount", "#failCount"]);
            let mut rows = Vec::new();
            for (cluster, brokers) in &clusters {
                for broker in brokers {
                    let (mut ok, mut failed, mut total_ms) = (0u32, 0u32, 0u128);
                    for i in 0..a.amount {
                        let started = std::time::Instant::now();
                        match producer.send(Message::new(broker.as_str(), vec![b'a'; a.size])).await {
                            Ok(_) => ok += 1,
                            Err(_) => failed += 1,
                        }
                        if i != 0 {
                            total_ms += started.elapsed().as_millis();
                        }
                    }
                    let rt = if a.amount > 1 { total_ms as f64 / f64::from(a.amount - 1) } else { 0.0 };
                    if a.print_log && !out.json {
                        let now = chrono::Local::now().format("%Y-%m-%d %H:%M:%S");
                        println!("{now}|{}|{cluster}|{broker}|{}", a.machine_room, rt.round());
                    }
                    table.row([cluster.clone(), broker.clone(), format!("{rt:.2}"), ok.to_string(), failed.to_string()]);
                    rows.push(json!({"cluster": cluster, "brokerName": broker, "rtMs": rt, "successCount": ok, "failCount": failed}));
                }
            }
            if out.json {
                out.json(&json!(rows));
            } else if !a.print_log {
                out.table(&table);
            }
            let Some(interval_s) = a.interval_s else { return Ok(()) };
            tokio::time::sleep(std::time::Duration::from_secs(interval_s)).await;
        }
    }
    .await;
    producer.shutdown().await;
    outcome
}
