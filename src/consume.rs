//! `raftmq consume`: subscribes a consumer group (clustering) to a topic and prints one line per
//! message: `queue=broker-a:3 offset=17 msgId=… tag=TagA keys=K1,K2 body=…` (or JSON with `--json`).
//!
//! Built on the lite [`PullConsumer`] so the group's committed offsets stay exact: with `--count N`
//! the command prints N messages, moves each queue's consumed offset back to its first unprinted
//! message, commits (two-way: the group's leader has stored the offsets when the command exits) and
//! exits 0. Without `--count` it runs until SIGINT/SIGTERM; with `--timeout`
//! it gives up after that long (non-zero when `--count` was not reached).
//!
//! A polled message does not name its broker group, only its queue id and store host; the queue is
//! the assigned one with that id when unique, else the group whose member stored it.

use std::collections::BTreeMap;
use std::time::Duration;

use anyhow::Result;
use anyhow::bail;
use clap::Args;
use raftmq_client::Admin;
use raftmq_client::PullConsumer;
use raftmq_client::consumer::ConsumeFrom;
use raftmq_client::consumer::MessageSelector;
use raftmq_common::message::MessageExt;
use raftmq_common::message::MessageQueue;
use serde_json::json;
use tokio::time::Instant;

use crate::namesrv_addr::NamesrvAddrArgs;

/// How long one poll waits before the loop checks its deadline and signals again.
const POLL_WAIT: Duration = Duration::from_millis(500);

/// `raftmq consume` flags.
#[derive(Debug, Args)]
pub struct ConsumeArgs {
    #[command(flatten)]
    namesrv: NamesrvAddrArgs,

    /// Topic.
    #[arg(short = 't', long = "topic")]
    topic: String,

    /// Consumer group.
    #[arg(short = 'g', long = "group")]
    group: String,

    /// Tag expression: `*`, `TagA`, `TagA || TagB`.
    #[arg(long = "expr", default_value = "*")]
    expr: String,

    /// Select by a SQL92 expression over message properties instead of tags, e.g.
    /// `"a > 5 AND region = 'eu'"` (the broker needs `enablePropertyFilter = true`).
    #[arg(long = "sql", conflicts_with = "expr")]
    sql: Option<String>,

    /// A group without committed offsets starts at each queue's first message (default: its end).
    #[arg(long = "from-first")]
    from_first: bool,

    /// Exit after this many messages.
    #[arg(long = "count", value_parser = clap::value_parser!(u64).range(1..))]
    count: Option<u64>,

    /// Give up after this long, e.g. `30s` (an error when `--count` was not reached).
    #[arg(long = "wait", value_name = "DURATION", value_parser = humantime::parse_duration)]
    wait: Option<Duration>,

    /// Print one JSON object per message.
    #[arg(long)]
    json: bool,

    /// Trace the consumed messages to the trace topic (`enableMsgTrace`); `admin queryMsgTraceById`
    /// shows them.
    #[arg(long = "msgTrace")]
    msg_trace: bool,

    /// With `--msgTrace`: the trace topic (default RMQ_SYS_TRACE_TOPIC).
    #[arg(long = "traceTopic", requires = "msg_trace")]
    trace_topic: Option<String>,
}

/// Consumes and prints until the count, the deadline or a signal.
pub async fn run(args: ConsumeArgs) -> Result<()> {
    let from = if args.from_first { ConsumeFrom::FirstOffset } else { ConsumeFrom::LastOffset };
    let mut builder = PullConsumer::builder(args.group.as_str())
        .namesrv_addr(&args.namesrv.namesrv_addr)
        .subscribe_selector(
            args.topic.as_str(),
            match &args.sql {
                Some(sql) => MessageSelector::Sql92(sql.clone()),
                None => MessageSelector::Tag(args.expr.clone()),
            },
        )
        .consume_from(from)
        .rpc_timeout(args.namesrv.timeout)
        .credentials(args.namesrv.credentials()?)
        .tls(args.namesrv.tls())
        .enable_msg_trace(args.msg_trace);
    if let Some(topic) = &args.trace_topic {
        builder = builder.customized_trace_topic(topic.as_str());
    }
    let consumer = builder.build()?;
    consumer.start().await?;
    let admin = args.namesrv.admin()?;
    let result = consume_loop(&consumer, &admin, &args).await;
    let stored = consumer.try_commit().await;
    consumer.shutdown().await;
    admin.shutdown().await;
    let received = result?;
    stored?;
    if let Some(count) = args.count
        && received < count
    {
        bail!("received {received} of {count} messages before giving up");
    }
    Ok(())
}

/// Returns how many messages were printed.
async fn consume_loop(consumer: &PullConsumer, admin: &Admin, args: &ConsumeArgs) -> Result<u64> {
    let deadline = args.wait.map(|w| Instant::now() + w);
    let shutdown = crate::signal::shutdown();
    tokio::pin!(shutdown);
    let mut hosts = StoreHosts::default();
    let mut received = 0u64;
    loop {
        if deadline.is_some_and(|d| Instant::now() >= d) {
            return Ok(received);
        }
        let batch = tokio::select! {
            biased;
            _ = &mut shutdown => return Ok(received),
            batch = consumer.poll(POLL_WAIT) => batch?,
        };
        for (i, msg) in batch.iter().enumerate() {
            let mq = hosts.queue_of(consumer, admin, msg).await;
            if args.count.is_some_and(|c| received >= c) {
                // Not printed: the group must consume it again, so its queue goes back to it.
                if let Some(mq) = &mq {
                    consumer.seek(mq, msg.queue_offset)?;
                }
                tracing::debug!(skipped = batch.len() - i, "count reached inside a batch");
                return Ok(received);
            }
            print_message(msg, mq.as_ref(), args.json);
            received += 1;
        }
        if args.count.is_some_and(|c| received >= c) {
            return Ok(received);
        }
    }
}

/// Store host → broker group, learned from the NameServer's cluster view on demand.
#[derive(Default)]
struct StoreHosts {
    groups: BTreeMap<String, String>,
}

impl StoreHosts {
    async fn queue_of(&mut self, consumer: &PullConsumer, admin: &Admin, msg: &MessageExt) -> Option<MessageQueue> {
        let candidates: Vec<MessageQueue> = consumer
            .assignment()
            .into_iter()
            .filter(|mq| mq.topic == msg.topic() && mq.queue_id == msg.queue_id)
            .collect();
        if let [only] = candidates.as_slice() {
            return Some(only.clone());
        }
        let host = msg.store_host.to_string();
        if !self.groups.contains_key(&host)
            && let Ok(info) = admin.cluster_info().await
        {
            for (name, bd) in info.broker_addr_table {
                for addr in bd.broker_addrs.into_values() {
                    self.groups.insert(addr, name.clone());
                }
            }
        }
        let name = self.groups.get(&host)?;
        candidates.into_iter().find(|mq| &mq.broker_name == name)
    }
}

fn print_message(m: &MessageExt, mq: Option<&MessageQueue>, as_json: bool) {
    let broker = mq.map_or("?", |mq| mq.broker_name.as_str());
    let body = String::from_utf8_lossy(&m.message.body);
    if as_json {
        let line = json!({
            "brokerName": broker, "queueId": m.queue_id, "queueOffset": m.queue_offset, "msgId": m.msg_id(),
            "offsetMsgId": m.offset_msg_id().to_string(), "tags": m.message.tags(), "keys": m.message.keys(),
            "bornTimestamp": m.born_timestamp, "storeTimestamp": m.store_timestamp,
            "reconsumeTimes": m.reconsume_times, "body": body,
        });
        println!("{line}");
    } else {
        let keys: Vec<&str> = m.message.key_list().collect();
        println!(
            "queue={broker}:{} offset={} msgId={} tag={} keys={} body={body}",
            m.queue_id,
            m.queue_offset,
            m.msg_id(),
            m.message.tags().unwrap_or_default(),
            keys.join(",")
        );
    }
}
