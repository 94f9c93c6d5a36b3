//! `raftmq send`: sends one message (or `--count` copies) and prints what the broker answered, one
//! line per message, e.g. `SEND_OK msgId=… offsetMsgId=… queue=broker-a:3 offset=17`.
//!
//! Exit status: 0 when every message was stored (any `SendStatus`), 1 otherwise. A send whose
//! outcome is unknown (timeout, connection lost) prints `SEND_UNKNOWN`: the message may be stored,
//! so it is not retried here.

use std::io::Read;

use anyhow::Context;
use anyhow::Result;
use anyhow::bail;
use clap::Args;
use raftmq_client::Producer;
use raftmq_client::SendResult;
use raftmq_common::message::Message;
use serde_json::json;

use crate::namesrv_addr::NamesrvAddrArgs;

/// `raftmq send` flags.
#[derive(Debug, Args)]
pub struct SendArgs {
    #[command(flatten)]
    namesrv: NamesrvAddrArgs,

    /// Topic.
    #[arg(short = 't', long = "topic")]
    topic: String,

    /// Tag (`TagA`).
    #[arg(long = "tag")]
    tag: Option<String>,

    /// Key(s), space-separated as RocketMQ stores them; indexed for `admin queryMsgByKey`.
    #[arg(short = 'k', long = "key")]
    key: Option<String>,

    /// A user property `name=value` (repeatable); SQL92 subscriptions select on these.
    #[arg(long = "property", value_parser = parse_property)]
    property: Vec<(String, String)>,

    /// Deliver after RocketMQ delay level N (`messageDelayLevel`: 1 = 1 s, 2 = 5 s, … 18 = 2 h).
    #[arg(long = "delayLevel", value_parser = clap::value_parser!(i32).range(1..), conflicts_with = "delay_ms")]
    delay_level: Option<i32>,

    /// Deliver this many milliseconds after it is stored (a RocketMQ 5 timer message, up to the
    /// broker's `timerMaxDelaySec`).
    #[arg(long = "delayMs")]
    delay_ms: Option<u64>,

    /// How many copies to send, one after another.
    #[arg(long = "count", default_value_t = 1, value_parser = clap::value_parser!(u64).range(1..))]
    count: u64,

    /// Producer group.
    #[arg(short = 'p', long = "producerGroup", default_value = "raftmq_cli_producer")]
    producer_group: String,

    /// Print one JSON object per message instead of a status line.
    #[arg(long)]
    json: bool,

    /// Trace the sends to the trace topic (`enableMsgTrace`); `admin queryMsgTraceById` shows them.
    #[arg(long = "msgTrace")]
    msg_trace: bool,

    /// With `--msgTrace`: the trace topic (default RMQ_SYS_TRACE_TOPIC).
    #[arg(long = "traceTopic", requires = "msg_trace")]
    trace_topic: Option<String>,

    /// Message body; `-` reads it from stdin.
    body: String,
}

/// `name=value` of `--property`.
fn parse_property(text: &str) -> Result<(String, String), String> {
    match text.split_once('=') {
        Some((name, value)) if !name.trim().is_empty() => Ok((name.trim().to_owned(), value.to_owned())),
        _ => Err(format!("expected name=value, got {text:?}")),
    }
}

/// Sends the messages and prints one line each.
pub async fn run(args: SendArgs) -> Result<()> {
    let body = if args.body == "-" {
        let mut buf = Vec::new();
        std::io::stdin().read_to_end(&mut buf)?;
        buf
    } else {
        args.body.clone().into_bytes()
    };
    let mut builder = Producer::builder(args.producer_group.as_str())
        .namesrv_addr(&args.namesrv.namesrv_addr)
        .send_timeout(args.namesrv.timeout)
        .credentials(args.namesrv.credentials()?)
        .tls(args.namesrv.tls())
        .enable_msg_trace(args.msg_trace);
    if let Some(topic) = &args.trace_topic {
        builder = builder.customized_trace_topic(topic.as_str());
    }
    let producer = builder.build()?;
    producer.start().await?;
    let mut failed = 0u64;
    for _ in 0..args.count {
        let mut msg = Message::new(args.topic.as_str(), body.clone());
        if let Some(tag) = &args.tag {
            msg.set_tags(tag.as_str());
        }
        if let Some(key) = &args.key {
            msg.set_keys(key.as_str());
        }
        if let Some(level) = args.delay_level {
            msg.set_delay_time_level(level);
        }
        if let Some(ms) = args.delay_ms {
            msg.set_delay_ms(ms);
        }
        for (name, value) in &args.property {
            msg.put_user_property(name.as_str(), value.as_str()).with_context(|| format!("property {name}={value}"))?;
        }
        match producer.send(msg).await {
            Ok(result) => print_result(&result, args.json),
            Err(e) => {
                failed += 1;
                let status = if e.is_outcome_unknown() { "SEND_UNKNOWN" } else { "SEND_FAILED" };
                if args.json {
                    println!("{}", json!({"status": status, "error": e.to_string()}));
                } else {
                    println!("{status} error={e}");
                }
            }
        }
    }
    producer.shutdown().await;
    if failed > 0 {
        bail!("{failed} of {} messages were not confirmed stored", args.count);
    }
    Ok(())
}

fn print_result(r: &SendResult, as_json: bool) {
    let mq = &r.message_queue;
    if as_json {
        let line = json!({
            "status": r.status.name(), "msgId": r.msg_id, "offsetMsgId": r.offset_msg_id,
            "brokerName": mq.broker_name, "queueId": mq.queue_id, "queueOffset": r.queue_offset,
        });
        println!("{line}");
    } else {
        println!(
            "{} msgId={} offsetMsgId={} queue={}:{} offset={}",
            r.status.name(),
            r.msg_id,
            r.offset_msg_id,
            mq.broker_name,
            mq.queue_id,
            r.queue_offset
        );
    }
}
