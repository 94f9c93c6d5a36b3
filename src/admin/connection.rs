//! The clients of a group, as the brokers holding their connections see them: `consumerConnection`,
//! `consumerStatus`, `getConsumerStatus`, `producerConnection`. Answers of several brokers are
//! merged by client id.

use std::collections::BTreeMap;

use anyhow::Context;
use anyhow::Result;
use anyhow::bail;
use clap::Args;
use raftmq_client::Admin;
use raftmq_common::message::validate::RETRY_GROUP_TOPIC_PREFIX;
use raftmq_common::protocol::RequestCode;
use raftmq_common::protocol::ResponseCode;
use raftmq_common::protocol::body::connection::Connection as ConnectionBody;
use raftmq_common::protocol::body::connection::ConsumerConnection;
use raftmq_common::protocol::body::consumer_running_info::ConsumerRunningInfo;
use raftmq_common::protocol::body::consumer_running_info::PROP_CLIENT_VERSION;
use raftmq_common::protocol::body::consumer_running_info::PROP_CONSUME_ORDERLY;
use serde_json::json;

use super::explain::explain;
use super::out::Out;
use crate::table::Table;

#[derive(Debug, Args)]
pub(super) struct ConsumerConnectionArgs {
    /// Consumer group name.
    #[arg(short = 'g', long = "consumerGroup")]
    group: String,
}

#[derive(Debug, Args)]
pub(super) struct ConsumerStatusArgs {
    /// Consumer group name.
    #[arg(short = 'g', long = "consumerGroup")]
    group: String,
    /// One client of the group (`ip@instanceName`): print its whole report.
    #[arg(short = 'i', long = "clientId")]
    client_id: Option<String>,
    /// Ask for a stack dump (only JVM clients have one).
    #[arg(short = 's', long = "jstack")]
    jstack: bool,
}

#[derive(Debug, Args)]
pub(super) struct GetConsumerStatusArgs {
    /// Consumer group name.
    #[arg(short = 'g', long = "group")]
    group: String,
    /// Topic whose offsets are shown.
    #[arg(short = 't', long = "topic")]
    topic: String,
    /// Only this client of the group (`ip@instanceName`).
    #[arg(short = 'i', long = "originClientId")]
    client_id: Option<String>,
}

#[derive(Debug, Args)]
pub(super) struct ProducerConnectionArgs {
    /// Producer group name.
    #[arg(short = 'g', long = "producerGroup")]
    group: String,
    /// A topic the group sends to: its brokers are asked.
    #[arg(short = 't', long = "topic")]
    topic: String,
}

fn connection_json(c: &ConnectionBody) -> serde_json::Value {
    json!({"clientId": c.client_id, "clientAddr": c.client_addr, "language": c.language, "version": c.version})
}

fn connection_table(connections: &[ConnectionBody]) -> Table {
    let mut table = Table::new(&["#", "#ClientId", "#ClientAddr", "#Language", "#Version"]);
    for (i, c) in connections.iter().enumerate() {
        table.row([
            format!("{:06}", i + 1),
            c.client_id.clone(),
            c.client_addr.clone(),
            c.language.clone(),
            c.version.to_string(),
        ]);
    }
    table
}

/// `examineConsumerConnectionInfo`: every broker group's leader is asked (a group's clients
/// heartbeat each broker they read from), and the answers are merged.
pub(super) async fn consumer_connection(admin: &Admin, out: Out, a: ConsumerConnectionArgs) -> Result<()> {
    let groups = admin.read_addrs_of_all_groups().await.context("consumerConnection")?;
    let mut merged: Option<ConsumerConnection> = None;
    for (_, addr) in &groups {
        match admin.consumer_connection(addr, &a.group).await {
            Ok(c) => {
                let m = merged.get_or_insert_with(|| ConsumerConnection { connection_set: Vec::new(), ..c.clone() });
                m.subscription_table.extend(c.subscription_table);
                for conn in c.connection_set {
                    if !m.connection_set.iter().any(|x| x.client_id == conn.client_id) {
                        m.connection_set.push(conn);
                    }
                }
            }
            Err(e) if e.response_code() == Some(ResponseCode::ConsumerNotOnline) => {}
            Err(e) => return Err(explain("consumerConnection", RequestCode::GetConsumerConnectionList, e)),
        }
    }
    let Some(mut c) = merged else { bail!("consumerConnection: the consumer group[{}] not online", a.group) };
    c.connection_set.sort_by(|x, y| x.client_id.cmp(&y.client_id));
    let name = |v: Option<serde_json::Value>| v.and_then(|v| v.as_str().map(str::to_owned)).unwrap_or_default();
    let consume_type = name(c.consume_type.map(|t| json!(t)));
    let message_model = name(c.message_model.map(|m| json!(m)));
    let consume_from = name(c.consume_from_where.map(|f| json!(f)));
    if out.json {
        let subscriptions: Vec<_> = c
            .subscription_table
            .values()
            .map(|s| json!({"topic": s.topic, "subExpression": s.sub_string, "expressionType": s.expression_type}))
            .collect();
        out.json(
            &json!({"group": a.group, "connections": c.connection_set.iter().map(connection_json).collect::<Vec<_>>(),
            "subscriptions": subscriptions, "consumeType": consume_type, "messageModel": message_model,
            "consumeFromWhere": consume_from}),
        );
        return Ok(());
    }
    out.table(&connection_table(&c.connection_set));
    println!();
    println!("Below is subscription:");
    let mut subs = Table::new(&["#", "#Topic", "#SubExpression"]);
    for (i, s) in c.subscription_table.values().enumerate() {
        subs.row([format!("{:06}", i + 1), s.topic.clone(), s.sub_string.clone()]);
    }
    out.table(&subs);
    println!();
    println!("ConsumeType: {consume_type}");
    println!("MessageModel: {message_model}");
    println!("ConsumeFromWhere: {consume_from}");
    Ok(())
}

/// `ConsumerStatusSubCommand`: each client of the group (or the one named) is asked for its
/// running info through a broker leader holding its connection. With one client, its whole
/// report; otherwise a line per client and Java's two checks: every client subscribes the same,
/// and the queues held add up to the group's queues with none held twice.
pub(super) async fn consumer_status(admin: &Admin, out: Out, a: ConsumerStatusArgs) -> Result<()> {
    let cmd = "consumerStatus";
    let leaders: Vec<String> =
        admin.read_addrs_of_all_groups().await.context(cmd)?.into_iter().map(|(_, addr)| addr).collect();
    let mut clients: Vec<String> = Vec::new();
    for addr in &leaders {
        match admin.consumer_connection(addr, &a.group).await {
            Ok(c) => clients.extend(c.connection_set.into_iter().map(|c| c.client_id)),
            Err(e) if e.response_code() == Some(ResponseCode::ConsumerNotOnline) => {}
            Err(e) => return Err(explain(cmd, RequestCode::GetConsumerConnectionList, e)),
        }
    }
    clients.sort_unstable();
    clients.dedup();
    if let Some(id) = &a.client_id {
        if !clients.contains(id) {
            bail!("{cmd}: client {id} of group {} is not online", a.group);
        }
        clients = vec![id.clone()];
    }
    if clients.is_empty() {
        bail!("{cmd}: the consumer group[{}] not online", a.group);
    }
    let mut reports = Vec::new();
    for id in &clients {
        let mut last_err = None;
        let mut found = None;
        for addr in &leaders {
            match admin.consumer_running_info(addr, &a.group, id, a.jstack).await {
                Ok(r) => {
                    found = Some(r);
                    break;
                }
                Err(e) => last_err = Some(e),
            }
        }
        match (found, last_err) {
            (Some(r), _) => reports.push((id.clone(), r)),
            (None, Some(e)) => return Err(explain(cmd, RequestCode::GetConsumerRunningInfo, e)),
            (None, None) => bail!("{cmd}: no broker holds client {id}'s connection"),
        }
    }
    let queues_of = |r: &ConsumerRunningInfo| {
        r.mq_table.keys().filter(|mq| !mq.topic.starts_with(RETRY_GROUP_TOPIC_PREFIX)).count()
    };
    let same_subscription = reports.windows(2).all(|w| subscription_key(&w[0].1) == subscription_key(&w[1].1));
    let mut held: Vec<_> = reports.iter().flat_map(|(_, r)| r.mq_table.keys().cloned()).collect();
    let held_total = held.len();
    held.sort();
    held.dedup();
    let none_twice = held.len() == held_total;
    if out.json {
        let clients: Vec<_> = reports
            .iter()
            .map(|(id, r)| {
                let queues: Vec<_> = r
                    .mq_table
                    .iter()
                    .map(|(mq, q)| json!({"topic": mq.topic, "brokerName": mq.broker_name, "queueId": mq.queue_id,
                        "commitOffset": q.commit_offset, "cachedMsgCount": q.cached_msg_count,
                        "lastPullTimestamp": q.last_pull_timestamp, "lastConsumeTimestamp": q.last_consume_timestamp,
                        "locked": q.locked}))
                    .collect();
                json!({"clientId": id, "properties": r.properties, "subscriptions": r.subscription_set.iter()
                    .map(|s| json!({"topic": s.topic, "subExpression": s.sub_string, "expressionType": s.expression_type}))
                    .collect::<Vec<_>>(), "queues": queues, "jstack": r.jstack})
            })
            .collect();
        out.json(&json!({"group": a.group, "clients": clients, "sameSubscription": same_subscription,
            "noQueueHeldTwice": none_twice}));
        return Ok(());
    }
    if let [(id, r)] = reports.as_slice()
        && a.client_id.is_some()
    {
        println!("#Consumer Properties#");
        for (k, v) in &r.properties {
            println!("{k:<40}: {v}");
        }
        println!();
        println!("#Consumer Subscription#");
        let mut subs = Table::new(&["#", "#Topic", "#ClassFilterMode", "#SubExpression"]);
        for (i, s) in r.subscription_set.iter().enumerate() {
            subs.row([format!("{:03}", i + 1), s.topic.clone(), s.class_filter_mode.to_string(), s.sub_string.clone()]);
        }
        out.table(&subs);
        println!();
        println!("#Consumer Offset# ({id})");
        let mut q = Table::new(&[
            "#Topic",
            "#Broker Name",
            "#QID",
            "#Consumer Offset",
            "#Cached Msgs",
            "#Last Pull",
            "#Last Consume",
            "#Locked",
        ]);
        for (mq, p) in &r.mq_table {
            q.row([
                mq.topic.clone(),
                mq.broker_name.clone(),
                mq.queue_id.to_string(),
                p.commit_offset.to_string(),
                p.cached_msg_count.to_string(),
                p.last_pull_timestamp.to_string(),
                p.last_consume_timestamp.to_string(),
                p.locked.to_string(),
            ]);
        }
        out.table(&q);
        println!();
        println!("#Consumer RT&TPS#");
        let mut rt = Table::new(&[
            "#Topic",
            "#Pull RT",
            "#Pull TPS",
            "#Consume RT",
            "#ConsumeOK TPS",
            "#ConsumeFailed TPS",
            "#ConsumeFailedMsgsInHour",
        ]);
        for (topic, st) in &r.status_table {
            rt.row([
                topic.clone(),
                format!("{:.2}", st.pull_rt),
                format!("{:.2}", st.pull_tps),
                format!("{:.2}", st.consume_rt),
                format!("{:.2}", st.consume_ok_tps),
                format!("{:.2}", st.consume_failed_tps),
                st.consume_failed_msgs.to_string(),
            ]);
        }
        out.table(&rt);
        if let Some(stack) = &r.jstack {
            println!();
            println!("#Consumer jstack#");
            println!("{stack}");
        }
        return Ok(());
    }
    let mut t = Table::new(&["#", "#ClientId", "#Version", "#Orderly", "#Queues", "#Cached Msgs"]);
    for (i, (id, r)) in reports.iter().enumerate() {
        let prop = |k: &str| r.properties.get(k).cloned().unwrap_or_default();
        let cached: i64 = r.mq_table.values().map(|q| i64::from(q.cached_msg_count)).sum();
        t.row([
            format!("{:03}", i + 1),
            id.clone(),
            prop(PROP_CLIENT_VERSION),
            prop(PROP_CONSUME_ORDERLY),
            queues_of(r).to_string(),
            cached.to_string(),
        ]);
    }
    out.table(&t);
    println!();
    if same_subscription {
        println!("Same subscription in the same group of consumer");
    } else {
        println!("WARN: Different subscription in the same group of consumer!!!");
    }
    if none_twice {
        println!("Rebalance OK");
    } else {
        println!("WARN: a queue is held by more than one client; the group is rebalancing or misconfigured");
    }
    Ok(())
}

/// A client's subscriptions, comparable across clients (topic and expression).
fn subscription_key(r: &ConsumerRunningInfo) -> Vec<(String, String, String)> {
    let mut key: Vec<_> =
        r.subscription_set.iter().map(|s| (s.topic.clone(), s.expression_type.clone(), s.sub_string.clone())).collect();
    key.sort();
    key
}

/// `examineProducerConnectionInfo`: the topic's brokers are asked and their answers merged.
/// `GetConsumerStatusCommand`: the offsets of a topic each client of the group holds in memory
/// (INVOKE_BROKER_TO_GET_CONSUMER_STATUS; the broker asks its connected clients). Java asks the
/// first broker of the topic's route; here a broker holding none of the group's clients
/// (SYSTEM_ERROR) passes the question to the next.
pub(super) async fn get_consumer_status(admin: &Admin, out: Out, a: GetConsumerStatusArgs) -> Result<()> {
    let cmd = "getConsumerStatus";
    let route = admin.topic_route(&a.topic).await.context(cmd)?;
    let mut last_err = None;
    let mut found = None;
    for (_, addr) in Admin::read_addrs_of_route(&route) {
        match admin.consumer_status(&addr, &a.topic, &a.group, a.client_id.as_deref()).await {
            Ok(table) => {
                found = Some(table);
                break;
            }
            Err(e) if e.response_code() == Some(ResponseCode::SystemError) => last_err = Some(e),
            Err(e) => return Err(explain(cmd, RequestCode::InvokeBrokerToGetConsumerStatus, e)),
        }
    }
    let table = match (found, last_err) {
        (Some(table), _) => table,
        (None, Some(e)) => return Err(explain(cmd, RequestCode::InvokeBrokerToGetConsumerStatus, e)),
        (None, None) => bail!("{cmd}: topic {} has no broker to ask", a.topic),
    };
    if out.json {
        let clients: BTreeMap<&String, Vec<serde_json::Value>> = table
            .iter()
            .map(|(id, offsets)| {
                let rows = offsets
                    .iter()
                    .map(|(mq, offset)| json!({"topic": mq.topic, "brokerName": mq.broker_name, "queueId": mq.queue_id, "offset": offset}))
                    .collect();
                (id, rows)
            })
            .collect();
        out.json(&json!({"group": a.group, "topic": a.topic, "originClientId": a.client_id, "clients": clients}));
        return Ok(());
    }
    println!(
        "get consumer status from client. group={}, topic={}, originClientId={}",
        a.group,
        a.topic,
        a.client_id.as_deref().unwrap_or("null")
    );
    let mut rows = Table::new(&["#clientId", "#brokerName", "#queueId", "#offset"]);
    for (id, offsets) in &table {
        for (mq, offset) in offsets {
            rows.row([id.clone(), mq.broker_name.clone(), mq.queue_id.to_string(), offset.to_string()]);
        }
    }
    out.table(&rows);
    Ok(())
}

pub(super) async fn producer_connection(admin: &Admin, out: Out, a: ProducerConnectionArgs) -> Result<()> {
    let route = admin.topic_route(&a.topic).await.context("producerConnection")?;
    let mut connections: Vec<ConnectionBody> = Vec::new();
    let mut found = false;
    for (_, addr) in Admin::read_addrs_of_route(&route) {
        match admin.producer_connection(&addr, &a.group).await {
            Ok(p) => {
                found = true;
                for conn in p.connection_set {
                    if !connections.iter().any(|x| x.client_id == conn.client_id) {
                        connections.push(conn);
                    }
                }
            }
            Err(e) if e.response_code() == Some(ResponseCode::SystemError) => {}
            Err(e) => return Err(explain("producerConnection", RequestCode::GetProducerConnectionList, e)),
        }
    }
    if !found {
        bail!("producerConnection: the producer group[{}] not exist", a.group);
    }
    connections.sort_by(|x, y| x.client_id.cmp(&y.client_id));
    if out.json {
        out.json(
            &json!({"group": a.group, "connections": connections.iter().map(connection_json).collect::<Vec<_>>()}),
        );
        return Ok(());
    }
    out.table(&connection_table(&connections));
    Ok(())
}
