//! Message queries: `queryMsgById`, `queryMsgByUniqueKey`, `queryMsgByOffset`, `queryMsgByKey`,
//! `queryMsgTraceById`, `resumeCheckHalfMessage`; with `-g -d`, a client consumes a found message
//! once (CONSUME_MESSAGE_DIRECTLY). Printed in Java's `QueryMsgByIdSubCommand` layout.

use std::collections::BTreeMap;

use anyhow::Context;
use anyhow::Result;
use anyhow::anyhow;
use anyhow::bail;
use clap::Args;
use raftmq_client::Admin;
use raftmq_common::limits::QUERY_MESSAGE_MAX_COUNT;
use raftmq_common::message::MessageExt;
use raftmq_common::message::OffsetMsgId;
use raftmq_common::message::trace::TraceType;
use raftmq_common::message::trace::TraceView;
use raftmq_common::protocol::RequestCode;
use raftmq_common::protocol::header::query::QueryMessageRequestHeader;
use serde_json::json;

use super::explain::explain;
use super::out::Out;
use super::render::message_json;
use super::target::group_read_addr;
use crate::namesrv_addr::human_time_ms;
use crate::table::Table;

#[derive(Debug, Args)]
pub(super) struct QueryMsgByIdArgs {
    /// offsetMsgId(s), comma-separated; with `-t`, client msgIds (UNIQ_KEY).
    #[arg(short = 'i', long = "msgId", value_delimiter = ',', required = true)]
    msg_ids: Vec<String>,
    /// Topic: look the ids up as client msgIds (UNIQ_KEY) through the index.
    #[arg(short = 't', long = "topic")]
    topic: Option<String>,
    /// With `-d`: have this group's client consume each message once (CONSUME_MESSAGE_DIRECTLY).
    #[arg(short = 'g', long = "consumerGroup", requires = "client_id")]
    consumer_group: Option<String>,
    /// With `-g`: the client (`ip@instanceName`) that consumes the messages.
    #[arg(short = 'd', long = "clientId", requires = "consumer_group")]
    client_id: Option<String>,
}

#[derive(Debug, Args)]
pub(super) struct QueryMsgByUniqueKeyArgs {
    /// Client msgId (UNIQ_KEY).
    #[arg(short = 'i', long = "msgId")]
    msg_id: String,
    /// Topic.
    #[arg(short = 't', long = "topic")]
    topic: String,
    /// With `-d`: have this group's client consume the message once (CONSUME_MESSAGE_DIRECTLY).
    #[arg(short = 'g', long = "consumerGroup", requires = "client_id")]
    consumer_group: Option<String>,
    /// With `-g`: the client (`ip@instanceName`) that consumes it.
    #[arg(short = 'd', long = "clientId", requires = "consumer_group")]
    client_id: Option<String>,
}

#[derive(Debug, Args)]
pub(super) struct QueryMsgByOffsetArgs {
    /// Topic.
    #[arg(short = 't', long = "topic")]
    topic: String,
    /// Broker group name.
    #[arg(short = 'b', long = "brokerName")]
    broker_name: String,
    /// Queue id.
    #[arg(short = 'i', long = "queueId")]
    queue_id: i32,
    /// Queue offset.
    #[arg(short = 'o', long = "offset")]
    offset: i64,
}

#[derive(Debug, Args)]
pub(super) struct QueryMsgByKeyArgs {
    /// Topic.
    #[arg(short = 't', long = "topic")]
    topic: String,
    /// Message key.
    #[arg(short = 'k', long = "msgKey")]
    key: String,
    /// Earliest store time, ms (default 0).
    #[arg(short = 'b', long = "beginTimestamp", default_value_t = 0)]
    begin_ms: i64,
    /// Latest store time, ms (default: no limit).
    #[arg(short = 'e', long = "endTimestamp", default_value_t = i64::MAX)]
    end_ms: i64,
    /// At most this many messages per broker group.
    #[arg(short = 'm', long = "maxNum", default_value_t = 64,
          value_parser = clap::value_parser!(i32).range(1..=i64::from(QUERY_MESSAGE_MAX_COUNT)))]
    max_num: i32,
}

#[derive(Debug, Args)]
pub(super) struct QueryMsgTraceByIdArgs {
    /// The message's msgId (UNIQ_KEY).
    #[arg(short = 'i', long = "msgId")]
    msg_id: String,
    /// The trace topic (default RMQ_SYS_TRACE_TOPIC).
    #[arg(short = 't', long = "traceTopic")]
    trace_topic: Option<String>,
}

#[derive(Debug, Args)]
pub(super) struct ResumeCheckHalfMessageArgs {
    /// The half message's offsetMsgId.
    #[arg(short = 'i', long = "msgId")]
    msg_id: String,
}

/// Java's `QueryMsgByIdSubCommand.printMsg` layout.
fn print_message(m: &MessageExt) {
    let field = |name: &str, value: &dyn std::fmt::Display| println!("{:<20} {value}", format!("{name}:"));
    field("OffsetID", &m.offset_msg_id());
    field("MsgId", &m.msg_id());
    field("Topic", &m.topic());
    field("Tags", &format!("[{}]", m.message.tags().unwrap_or_default()));
    field("Keys", &format!("[{}]", m.message.keys().unwrap_or_default()));
    field("Queue ID", &m.queue_id);
    field("Queue Offset", &m.queue_offset);
    field("CommitLog Offset", &m.commit_log_offset);
    field("Reconsume Times", &m.reconsume_times);
    field("Born Timestamp", &human_time_ms(m.born_timestamp));
    field("Store Timestamp", &human_time_ms(m.store_timestamp));
    field("Born Host", &m.born_host);
    field("Store Host", &m.store_host);
    field("System Flag", &m.sys_flag);
    let props: Vec<String> = m.message.properties.iter().map(|(k, v)| format!("{k}={v}")).collect();
    field("Properties", &format!("{{{}}}", props.join(", ")));
    field("Message Body", &String::from_utf8_lossy(&m.message.body));
}

pub(super) async fn query_msg_by_id(admin: &Admin, out: Out, a: QueryMsgByIdArgs) -> Result<()> {
    let mut found = Vec::new();
    for id in &a.msg_ids {
        let msg = match &a.topic {
            Some(topic) => by_unique_key(admin, topic, id).await?,
            None => {
                let offset_id: OffsetMsgId = id.parse().with_context(|| {
                    format!("queryMsgById: {id} is not an offsetMsgId (give -t TOPIC for a client msgId)")
                })?;
                admin
                    .view_message_by_id(&offset_id)
                    .await
                    .map_err(|e| explain("queryMsgById", RequestCode::ViewMessageById, e))?
            }
        };
        found.push(msg);
    }
    if let (Some(group), Some(client)) = (&a.consumer_group, &a.client_id) {
        return push_messages(admin, out, &found, group, client).await;
    }
    if out.json {
        out.json(&json!({"messages": found.iter().map(message_json).collect::<Vec<_>>()}));
    } else {
        for (i, m) in found.iter().enumerate() {
            if i > 0 {
                println!();
            }
            print_message(m);
        }
    }
    Ok(())
}

/// `queryMsgByUniqueKey`: `queryMsgById -t` with one id.
pub(super) async fn query_msg_by_unique_key(admin: &Admin, out: Out, a: QueryMsgByUniqueKeyArgs) -> Result<()> {
    let by_id = QueryMsgByIdArgs {
        msg_ids: vec![a.msg_id],
        topic: Some(a.topic),
        consumer_group: a.consumer_group,
        client_id: a.client_id,
    };
    query_msg_by_id(admin, out, by_id).await
}

/// `QueryMsgByIdSubCommand.pushMsg`: each message goes to the client's listener once, through the
/// broker that stored it; prints how the listener took it.
async fn push_messages(admin: &Admin, out: Out, msgs: &[MessageExt], group: &str, client: &str) -> Result<()> {
    let mut results = Vec::new();
    for m in msgs {
        let id = OffsetMsgId::new(m.store_host, m.commit_log_offset).to_string();
        let r = admin
            .consume_message_directly(&m.store_host.to_string(), group, client, &id)
            .await
            .map_err(|e| explain("queryMsgById", RequestCode::ConsumeMessageDirectly, e))?;
        results.push((id, r));
    }
    if out.json {
        let rows: Vec<_> = results
            .iter()
            .map(|(id, r)| {
                json!({"msgId": id, "consumeResult": r.consume_result, "order": r.order,
                "autoCommit": r.auto_commit, "remark": r.remark, "spentTimeMills": r.spent_time_mills})
            })
            .collect();
        out.json(&json!({"consumerGroup": group, "clientId": client, "results": rows}));
        return Ok(());
    }
    for (id, r) in &results {
        let result = r.consume_result.map(|c| json!(c)).and_then(|v| v.as_str().map(str::to_owned)).unwrap_or_default();
        println!(
            "{id}: ConsumeMessageDirectlyResult [order={}, autoCommit={}, consumeResult={result}, remark={}, spentTimeMills={}]",
            r.order,
            r.auto_commit,
            r.remark.as_deref().unwrap_or("null"),
            r.spent_time_mills
        );
    }
    Ok(())
}

/// `MQAdminImpl.queryMessageByUniqKey`: every group of the topic, the earliest stored match.
async fn by_unique_key(admin: &Admin, topic: &str, id: &str) -> Result<MessageExt> {
    let route = admin.topic_route(topic).await.context("queryMsgById")?;
    let query = QueryMessageRequestHeader {
        topic: topic.to_owned(),
        key: id.to_owned(),
        max_num: 32,
        begin_timestamp: 0,
        end_timestamp: i64::MAX,
        unique_key_query: Some(true),
    };
    let mut best: Option<MessageExt> = None;
    for (_, addr) in Admin::read_addrs_of_route(&route) {
        let msgs = admin
            .query_message(&addr, &query)
            .await
            .map_err(|e| explain("queryMsgById", RequestCode::QueryMessage, e))?;
        for m in msgs.into_iter().filter(|m| m.msg_id() == id) {
            if best.as_ref().is_none_or(|b| m.store_timestamp < b.store_timestamp) {
                best = Some(m);
            }
        }
    }
    best.ok_or_else(|| anyhow!("queryMsgById: no message {id} in topic {topic}"))
}

/// Java's `QueryMsgByOffsetSubCommand`: the unit at the offset (QUERY_CONSUME_QUEUE) names the
/// record, read from the group's leader (or lowest-id replica).
pub(super) async fn query_msg_by_offset(admin: &Admin, out: Out, a: QueryMsgByOffsetArgs) -> Result<()> {
    let cmd = "queryMsgByOffset";
    let route = admin.topic_route(&a.topic).await.context(cmd)?;
    let addr = group_read_addr(&route, cmd, &a.broker_name, &a.topic)?;
    let (cq, _) = admin
        .query_consume_queue(&addr, &a.topic, a.queue_id, a.offset, 1, None)
        .await
        .map_err(|e| explain(cmd, RequestCode::QueryConsumeQueue, e))?;
    let Some(unit) = cq.queue_data.first() else {
        bail!(
            "{cmd}: no message at offset {} of {}:{} (the queue holds {}..{})",
            a.offset,
            a.topic,
            a.queue_id,
            cq.min_queue_index,
            cq.max_queue_index
        );
    };
    let msg = admin
        .view_message(&addr, unit.physic_offset)
        .await
        .map_err(|e| explain(cmd, RequestCode::ViewMessageById, e))?;
    if out.json {
        out.json(&message_json(&msg));
    } else {
        print_message(&msg);
    }
    Ok(())
}

pub(super) async fn query_msg_by_key(admin: &Admin, out: Out, a: QueryMsgByKeyArgs) -> Result<()> {
    let route = admin.topic_route(&a.topic).await.context("queryMsgByKey")?;
    let query = QueryMessageRequestHeader {
        topic: a.topic.clone(),
        key: a.key.clone(),
        max_num: a.max_num,
        begin_timestamp: a.begin_ms,
        end_timestamp: a.end_ms,
        unique_key_query: None,
    };
    let mut found = Vec::new();
    for (_, addr) in Admin::read_addrs_of_route(&route) {
        let msgs = admin
            .query_message(&addr, &query)
            .await
            .map_err(|e| explain("queryMsgByKey", RequestCode::QueryMessage, e))?;
        // The IndexFile matches hashes; Java keeps only messages that really carry the key.
        found.extend(msgs.into_iter().filter(|m| m.message.key_list().any(|k| k == a.key)));
    }
    if out.json {
        out.json(
            &json!({"topic": a.topic, "key": a.key, "messages": found.iter().map(message_json).collect::<Vec<_>>()}),
        );
        return Ok(());
    }
    let mut table = Table::new(&["#Message ID", "#QID", "#Offset"]);
    for m in &found {
        table.row([m.msg_id(), m.queue_id.to_string(), m.queue_offset.to_string()]);
    }
    out.table(&table);
    Ok(())
}

/// Java's `QueryMsgTraceByIdSubCommand.printMessageTrace`: each send, then each consumer group's
/// listener outcomes (SubAfter), then, beyond Java, each transaction end.
pub(super) async fn query_msg_trace_by_id(admin: &Admin, out: Out, a: QueryMsgTraceByIdArgs) -> Result<()> {
    let views = admin.query_msg_trace_by_id(&a.msg_id, a.trace_topic.as_deref()).await.context("queryMsgTraceById")?;
    let time = |ms: i64| {
        use chrono::TimeZone;
        chrono::Local
            .timestamp_millis_opt(ms)
            .earliest()
            .map_or(ms.to_string(), |t| t.format("%Y-%m-%d %H:%M:%S").to_string())
    };
    if out.json {
        let rows: Vec<_> = views
            .iter()
            .map(|v| {
                json!({"type": v.trace_type.name(), "msgId": v.msg_id, "groupName": v.group_name,
                       "clientHost": v.client_host, "timeStamp": v.timestamp_ms, "costTime": v.cost_time_ms,
                       "status": v.status, "topic": v.topic, "tags": v.tags, "keys": v.keys,
                       "offSetMsgId": v.offset_msg_id, "storeHost": v.store_host,
                       "transactionState": v.transaction_state,
                       "fromTransactionCheck": v.from_transaction_check})
            })
            .collect();
        out.json(&json!({"msgId": a.msg_id, "traces": rows}));
        return Ok(());
    }
    let line = |cols: [&str; 6]| {
        println!("{:<10} {:<20} {:<20} {:<20} {:<10} {:<10}", cols[0], cols[1], cols[2], cols[3], cols[4], cols[5])
    };
    let mut consumers: BTreeMap<&str, Vec<&TraceView>> = BTreeMap::new();
    let mut ends = Vec::new();
    for v in &views {
        match v.trace_type {
            TraceType::Pub => {
                line(["#Type", "#ProducerGroup", "#ClientHost", "#SendTime", "#CostTimes", "#Status"]);
                let cost = format!("{}ms", v.cost_time_ms);
                line(["Pub", &v.group_name, &v.client_host, &time(v.timestamp_ms), &cost, v.status]);
                println!();
            }
            TraceType::SubAfter => consumers.entry(v.group_name.as_str()).or_default().push(v),
            TraceType::EndTransaction => ends.push(v),
            TraceType::SubBefore => {}
        }
    }
    for group in consumers.values() {
        line(["#Type", "#ConsumerGroup", "#ClientHost", "#ConsumerTime", "#CostTimes", "#Status"]);
        for v in group {
            let cost = format!("{}ms", v.cost_time_ms);
            line(["Sub", &v.group_name, &v.client_host, &time(v.timestamp_ms), &cost, v.status]);
        }
        println!();
    }
    if !ends.is_empty() {
        line(["#Type", "#ProducerGroup", "#ClientHost", "#EndTime", "#State", "#FromCheck"]);
        for v in ends {
            let from_check = v.from_transaction_check.to_string();
            line(["EndTx", &v.group_name, &v.client_host, &time(v.timestamp_ms), &v.transaction_state, &from_check]);
        }
        println!();
    }
    Ok(())
}

/// Java's `ResumeCheckHalfMessageCommand`: the half message goes back to checking, its count at 0.
pub(super) async fn resume_check_half_message(admin: &Admin, out: Out, a: ResumeCheckHalfMessageArgs) -> Result<()> {
    let id: OffsetMsgId =
        a.msg_id.parse().map_err(|e| anyhow!("resumeCheckHalfMessage: {} is not an offsetMsgId: {e}", a.msg_id))?;
    let addr = admin.resume_check_half_message(&id).await?;
    if out.json {
        out.json(&json!({"msgId": a.msg_id, "brokerAddr": addr}));
    } else {
        println!("resume check half message {} on {addr}: success", a.msg_id);
    }
    Ok(())
}
