//! Commands that read queues by pulling as a tools consumer (no offset is committed): `printMsg`,
//! `printMsgByQueue`, `consumeMessage`. Each queue is read from its group's leader (else its
//! lowest-id replica), between the offsets two store times name.

use std::collections::BTreeMap;

use anyhow::Context;
use anyhow::Result;
use anyhow::anyhow;
use anyhow::bail;
use clap::Args;
use raftmq_client::Admin;
use raftmq_client::ClientError;
use raftmq_common::message::MessageExt;
use raftmq_common::message::MessageQueue;
use raftmq_common::protocol::RequestCode;
use serde_json::json;

use super::explain::explain;
use super::out::Out;
use super::render::message_json;
use super::target::group_read_addr;
use super::timestamp::parse_reset_timestamp;

#[derive(Debug, Args)]
pub(super) struct PrintMsgArgs {
    /// Topic.
    #[arg(short = 't', long = "topic")]
    topic: String,
    #[command(flatten)]
    filter: PrintFilterArgs,
    /// Print bodies (`-d false`: only the messages' metadata).
    #[arg(short = 'd', long = "printBody", default_value_t = true, action = clap::ArgAction::Set)]
    print_body: bool,
}

/// What `printMsg` and `printMsgByQueue` read: a charset, a tag expression and a store-time span.
#[derive(Debug, Args)]
struct PrintFilterArgs {
    /// Body charset; bodies are printed as UTF-8 (invalid bytes replaced).
    #[arg(short = 'c', long = "charsetName", default_value = "UTF-8")]
    charset: String,
    /// Tag expression (`TagA || TagB`, `*`).
    #[arg(short = 's', long = "subExpression", default_value = "*")]
    sub_expression: String,
    /// From this store time: milliseconds or `yyyy-MM-dd#HH:mm:ss:SSS` (local time).
    #[arg(short = 'b', long = "beginTimestamp")]
    begin: Option<String>,
    /// Up to this store time, in the same forms.
    #[arg(short = 'e', long = "endTimestamp")]
    end: Option<String>,
}

impl PrintFilterArgs {
    /// The span's store times in milliseconds, after checking the charset (bodies are printed as
    /// UTF-8; another charset is refused rather than printed wrongly).
    fn times(&self) -> Result<(Option<i64>, Option<i64>)> {
        if self.charset.to_ascii_lowercase().replace('-', "") != "utf8" {
            bail!("-c {}: bodies are printed as UTF-8 only", self.charset);
        }
        let begin = self.begin.as_deref().map(parse_reset_timestamp).transpose()?;
        let end = self.end.as_deref().map(parse_reset_timestamp).transpose()?;
        Ok((begin, end))
    }
}

#[derive(Debug, Args)]
pub(super) struct PrintMsgByQueueArgs {
    /// Topic.
    #[arg(short = 't', long = "topic")]
    topic: String,
    /// Broker group name.
    #[arg(short = 'a', long = "brokerName")]
    broker_name: String,
    /// Queue id.
    #[arg(short = 'i', long = "queueId")]
    queue_id: i32,
    #[command(flatten)]
    filter: PrintFilterArgs,
    /// Print each message.
    #[arg(short = 'p', long = "print", default_value_t = false, action = clap::ArgAction::Set)]
    print_msg: bool,
    /// Print bodies too.
    #[arg(short = 'd', long = "printBody", default_value_t = false, action = clap::ArgAction::Set)]
    print_body: bool,
    /// Count the messages by tag, most frequent first.
    #[arg(short = 'f', long = "calculate", default_value_t = false, action = clap::ArgAction::Set)]
    by_tag: bool,
}

#[derive(Debug, Args)]
pub(super) struct ConsumeMessageArgs {
    /// Topic.
    #[arg(short = 't', long = "topic")]
    topic: String,
    /// Broker group (with `-i`).
    #[arg(short = 'b', long = "brokerName")]
    broker_name: Option<String>,
    /// One queue (needs `-b`).
    #[arg(short = 'i', long = "queueId", requires = "broker_name")]
    queue_id: Option<i32>,
    /// Start at this offset of the queue (needs `-i`).
    #[arg(short = 'o', long = "offset", requires = "queue_id")]
    offset: Option<i64>,
    /// Consumer group the pulls name (default TOOLS_CONSUMER).
    #[arg(short = 'g', long = "consumerGroup", default_value = TOOLS_CONSUMER_GROUP)]
    group: String,
    /// Messages stored from this time: ms or `yyyy-MM-dd#HH:mm:ss:SSS`.
    #[arg(short = 's', long = "beginTimestamp")]
    begin: Option<String>,
    /// Messages stored before this time: ms or `yyyy-MM-dd#HH:mm:ss:SSS`.
    #[arg(short = 'e', long = "endTimestamp")]
    end: Option<String>,
    /// At most this many messages in all.
    #[arg(short = 'c', long = "MessageNumber", default_value_t = CONSUME_MESSAGE_DEFAULT_COUNT,
          value_parser = clap::value_parser!(u64).range(1..))]
    count: u64,
}

/// Messages `consumeMessage` prints at most without `-c` (Java's `messageCount`).
const CONSUME_MESSAGE_DEFAULT_COUNT: u64 = 128;

/// The group Java's tools pull as (`MixAll.TOOLS_CONSUMER_GROUP`).
const TOOLS_CONSUMER_GROUP: &str = "TOOLS_CONSUMER";

/// Messages per pull of `printMsg` / `printMsgByQueue` (Java's 32).
const PRINT_PULL_BATCH_COUNT: i32 = 32;

/// Java's printing of one message: `MSGID: <id> <message> BODY: <body>`.
fn print_line(m: &MessageExt, print_body: bool) {
    let body = if print_body { String::from_utf8_lossy(&m.message.body).into_owned() } else { "NOT PRINT BODY".into() };
    println!(
        "MSGID: {} MessageExt [topic={}, queueId={}, queueOffset={}, commitLogOffset={}, storeTimestamp={}, \
         tags={}, keys={}, reconsumeTimes={}] BODY: {body}",
        m.msg_id(),
        m.topic(),
        m.queue_id,
        m.queue_offset,
        m.commit_log_offset,
        m.store_timestamp,
        m.message.tags().unwrap_or_default(),
        m.message.keys().unwrap_or_default(),
        m.reconsume_times
    );
}

/// The offsets `[from, to)` of one queue between two optional store times (the queue's bounds
/// without them), as Java's print commands choose them.
async fn queue_span(
    admin: &Admin,
    addr: &str,
    topic: &str,
    queue_id: i32,
    begin: Option<i64>,
    end: Option<i64>,
) -> Result<(i64, i64)> {
    let from = match begin {
        Some(t) => admin.search_offset(addr, topic, queue_id, t).await?,
        None => admin.min_offset(addr, topic, queue_id).await?,
    };
    let to = match end {
        Some(t) => admin.search_offset(addr, topic, queue_id, t).await?,
        None => admin.max_offset(addr, topic, queue_id).await?,
    };
    Ok((from, to))
}

/// Every message of `[from, to)` of one queue matching `sub_expression`, pulled in batches;
/// `each` sees them in queue order. Stops when the broker has nothing more, and, unless
/// `past_unmatched`, at the first window with no match (`printMsgByQueue` stops there, as Java's
/// does; `printMsg` reads on).
async fn read_span(
    admin: &Admin,
    addr: &str,
    mq: &MessageQueue,
    (from, to): (i64, i64),
    sub_expression: &str,
    past_unmatched: bool,
    mut each: impl FnMut(&MessageExt),
) -> std::result::Result<(), ClientError> {
    use raftmq_client::consumer::PullStatus;
    let mut offset = from;
    while offset < to {
        let pulled = admin.pull(addr, TOOLS_CONSUMER_GROUP, mq, offset, PRINT_PULL_BATCH_COUNT, sub_expression).await?;
        match pulled.status {
            PullStatus::Found => pulled.msgs.iter().filter(|m| m.queue_offset < to).for_each(&mut each),
            PullStatus::NoMatchedMsg if past_unmatched => {}
            _ => break,
        }
        if pulled.next_begin_offset <= offset {
            break;
        }
        offset = pulled.next_begin_offset;
    }
    Ok(())
}

/// Java's `PrintMessageSubCommand`: each queue of the topic (sorted), its span, its messages.
pub(super) async fn print_msg(admin: &Admin, out: Out, a: PrintMsgArgs) -> Result<()> {
    let cmd = "printMsg";
    let (begin, end) = a.filter.times()?;
    let route = admin.topic_route(&a.topic).await.context(cmd)?;
    let targets: BTreeMap<String, String> = Admin::read_addrs_of_route(&route).into_iter().collect();
    let mut mqs: Vec<MessageQueue> = raftmq_client::route::subscribe_queues(&a.topic, &route).into_iter().collect();
    mqs.sort_by(raftmq_client::consumer::rebalance::java_mq_cmp);
    let mut json_rows = Vec::new();
    for mq in &mqs {
        let addr = targets.get(&mq.broker_name).with_context(|| format!("{cmd}: no address for {}", mq.broker_name))?;
        let span = queue_span(admin, addr, &a.topic, mq.queue_id, begin, end).await.context(cmd)?;
        if !out.json {
            println!(
                "minOffset={}, maxOffset={}, MessageQueue [topic={}, brokerName={}, queueId={}]",
                span.0, span.1, mq.topic, mq.broker_name, mq.queue_id
            );
        }
        read_span(admin, addr, mq, span, &a.filter.sub_expression, true, |m| {
            if out.json {
                json_rows.push(message_json(m));
            } else {
                print_line(m, a.print_body);
            }
        })
        .await
        .map_err(|e| explain(cmd, RequestCode::PullMessage, e))?;
    }
    if out.json {
        out.json(&json!({"topic": a.topic, "messages": json_rows}));
    }
    Ok(())
}

/// Java's `PrintMessageByQueueCommand`: one queue's messages printed (`-p`) and/or counted by tag
/// (`-f`, most frequent first).
pub(super) async fn print_msg_by_queue(admin: &Admin, out: Out, a: PrintMsgByQueueArgs) -> Result<()> {
    let cmd = "printMsgByQueue";
    let (begin, end) = a.filter.times()?;
    let route = admin.topic_route(&a.topic).await.context(cmd)?;
    let addr = group_read_addr(&route, cmd, &a.broker_name, &a.topic)?;
    let span = queue_span(admin, &addr, &a.topic, a.queue_id, begin, end).await.context(cmd)?;
    let mut by_tag: BTreeMap<String, u64> = BTreeMap::new();
    let mut json_rows = Vec::new();
    let mq = MessageQueue::new(&a.topic, &a.broker_name, a.queue_id);
    read_span(admin, &addr, &mq, span, &a.filter.sub_expression, false, |m| {
        // Java's `calculateByTag` counts tagged messages only.
        if let Some(tag) = m.message.tags().filter(|t| !t.trim().is_empty()) {
            *by_tag.entry(tag.to_owned()).or_default() += 1;
        }
        if out.json {
            json_rows.push(message_json(m));
        } else if a.print_msg {
            print_line(m, a.print_body);
        }
    })
    .await
    .map_err(|e| explain(cmd, RequestCode::PullMessage, e))?;
    let mut counted: Vec<(String, u64)> = by_tag.into_iter().collect();
    counted.sort_by(|x, y| y.1.cmp(&x.1).then_with(|| x.0.cmp(&y.0)));
    if out.json {
        let tags: Vec<_> = counted.iter().map(|(t, n)| json!({"tag": t, "count": n})).collect();
        out.json(&json!({"topic": a.topic, "brokerName": a.broker_name, "queueId": a.queue_id,
            "minOffset": span.0, "maxOffset": span.1, "messages": json_rows, "tags": tags}));
    } else if a.by_tag {
        for (tag, n) in &counted {
            println!("Tag: {tag:<30} Count: {n}");
        }
    }
    Ok(())
}

/// Java's `ConsumeMessageCommand`: every queue of the topic (sorted), or one queue from its start or
/// an offset, between two optional store times, at most `-c` messages in all; each pull's messages
/// printed after `Consume ok`, and why a queue ended.
pub(super) async fn consume_message(admin: &Admin, out: Out, a: ConsumeMessageArgs) -> Result<()> {
    let cmd = "consumeMessage";
    let time = |flag: &str, value: &Option<String>| -> Result<Option<i64>> {
        value
            .as_deref()
            .map(|v| {
                parse_reset_timestamp(v)
                    .map_err(|_| anyhow!("{flag} {v}: expected milliseconds or yyyy-MM-dd#HH:mm:ss:SSS"))
            })
            .transpose()
    };
    let (begin, end) = (time("-s", &a.begin)?, time("-e", &a.end)?);
    let route = admin.topic_route(&a.topic).await.context(cmd)?;
    let mqs: Vec<MessageQueue> = match (&a.broker_name, a.queue_id) {
        (Some(broker), Some(queue_id)) => vec![MessageQueue::new(&a.topic, broker, queue_id)],
        _ => {
            let mut mqs: Vec<MessageQueue> =
                raftmq_client::route::subscribe_queues(&a.topic, &route).into_iter().collect();
            mqs.sort_by(raftmq_client::consumer::rebalance::java_mq_cmp);
            mqs
        }
    };
    let mut left = a.count;
    let mut json_rows = Vec::new();
    for mq in &mqs {
        if left == 0 {
            break;
        }
        let addr = group_read_addr(&route, cmd, &mq.broker_name, &a.topic)?;
        let (mut from, to) = queue_span(admin, &addr, &a.topic, mq.queue_id, begin, end).await.context(cmd)?;
        let label =
            format!("MessageQueue [topic={}, brokerName={}, queueId={}]", mq.topic, mq.broker_name, mq.queue_id);
        if let Some(offset) = a.offset {
            if offset > to {
                if !out.json {
                    println!("{label} no matched msg, offset={offset}");
                }
                continue;
            }
            if offset == to {
                // Java pulls there and finds nothing new.
                if !out.json {
                    println!("{label} print msg finished. status=NO_NEW_MSG, offset={offset}");
                }
                continue;
            }
            from = from.max(offset);
        }
        let mut last = to;
        if u64::try_from(to.saturating_sub(from)).unwrap_or(0) > left {
            if !out.json {
                // Java's two wordings (and its spelling), for all queues and for one.
                match a.queue_id {
                    None => println!("The older {left} message of the {} queue will be provided", mq.queue_id),
                    Some(_) => println!("The oldler {left} message will be provided"),
                }
            }
            last = from.saturating_add(i64::try_from(left).unwrap_or(i64::MAX));
        }
        let mut offset = from;
        while offset < last {
            use raftmq_client::consumer::PullStatus;
            let want = i32::try_from(last.saturating_sub(offset).min(i64::from(PRINT_PULL_BATCH_COUNT))).unwrap_or(1);
            let pulled = admin
                .pull(&addr, &a.group, mq, offset, want, "*")
                .await
                .map_err(|e| explain(cmd, RequestCode::PullMessage, e))?;
            let next = pulled.next_begin_offset;
            match pulled.status {
                PullStatus::Found => {
                    let msgs: Vec<&MessageExt> = pulled.msgs.iter().filter(|m| m.queue_offset < last).collect();
                    left = left.saturating_sub(msgs.len() as u64);
                    if out.json {
                        json_rows.extend(msgs.iter().map(|m| message_json(m)));
                    } else {
                        println!("Consume ok");
                        msgs.iter().for_each(|m| print_line(m, true));
                    }
                }
                PullStatus::NoMatchedMsg => {
                    if !out.json {
                        println!("{label} no matched msg. status=NO_MATCHED_MSG, offset={next}");
                    }
                }
                status => {
                    if !out.json {
                        let name = if status == PullStatus::NoNewMsg { "NO_NEW_MSG" } else { "OFFSET_ILLEGAL" };
                        println!("{label} print msg finished. status={name}, offset={next}");
                    }
                    break;
                }
            }
            if next <= offset {
                break;
            }
            offset = next;
        }
    }
    if out.json {
        out.json(&json!({"topic": a.topic, "messages": json_rows}));
    }
    Ok(())
}
