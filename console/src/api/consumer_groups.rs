//! The Consumer groups page's calls: every subscription group over every broker group (with its
//! newest total lag), one group's progress per queue (the admin API's `progress`), its connected
//! clients and their subscriptions (GET_CONSUMER_LIST_BY_GROUP on every replica: a client talks to
//! the replicas it pulls from), its consume TPS (GET_CONSUME_STATS) and lag history; reset offsets
//! by time, clone offsets to another group, delete; the group's DLQ (`%DLQ%group`) and resending
//! one of its messages to the group's retry topic, so only this group consumes it again.

use std::collections::BTreeMap;
use std::sync::Arc;

use axum::Json;
use axum::extract::State;
use axum::http::Method;
use axum::http::StatusCode;
use raftmq_broker::http::error::ApiJson;
use raftmq_broker::http::error::ApiPath;
use raftmq_client::consumer::pull_api::PullStatus;
use raftmq_common::limits::CONSOLE_MESSAGES_PER_QUEUE_MAX_COUNT;
use raftmq_common::message::Message;
use raftmq_common::message::MessageQueue;
use raftmq_common::message::msg_id::OffsetMsgId;
use raftmq_common::message::properties;
use raftmq_common::message::validate::DLQ_GROUP_TOPIC_PREFIX;
use raftmq_common::message::validate::RETRY_GROUP_TOPIC_PREFIX;
use serde::Deserialize;
use serde_json::Value;
use serde_json::json;

use crate::api::error::ApiError;
use crate::api::error::ApiResult;
use crate::api::message_view::message_json;
use crate::api::topics::groups_with;
use crate::history::Kind;
use crate::state::ConsoleState;
use crate::state::read_deadline;
use crate::topology::BrokerGroup;
use crate::upstream::encode_component;

/// The group the console pulls as (Java's tools pull as this group too).
const TOOLS_GROUP: &str = "TOOLS_CONSUMER";

/// `GET /console/api/consumer-groups`.
pub async fn list(State(s): State<Arc<ConsoleState>>) -> ApiResult<Json<Value>> {
    let topology = s.topology().await?;
    let answers = futures::future::join_all(topology.groups.iter().map(|g| {
        let s = &s;
        async move { (g, s.read_ok(g, "/api/v1/groups").await) }
    }))
    .await;
    let mut groups: BTreeMap<String, Vec<String>> = BTreeMap::new();
    let mut errors = Vec::new();
    for (broker, answer) in answers {
        match answer {
            Ok(v) => {
                for g in v["groups"].as_array().into_iter().flatten() {
                    if let Some(name) = g["group"].as_str() {
                        groups.entry(name.to_owned()).or_default().push(broker.name.clone());
                    }
                }
            }
            Err(e) => errors.push(e.message),
        }
    }
    let groups: Vec<Value> = groups
        .into_iter()
        .map(|(name, brokers)| {
            let lag = s.history.points(Kind::GroupLag, &name).last().map(|p| p.v);
            json!({ "group": name, "brokers": brokers, "lag": lag, "system": is_system_group(&name) })
        })
        .collect();
    Ok(Json(json!({ "groups": groups, "errors": errors })))
}

/// Groups the broker itself uses.
fn is_system_group(name: &str) -> bool {
    name.starts_with("CID_RMQ_SYS_")
        || matches!(
            name,
            "TOOLS_CONSUMER"
                | "FILTERSRV_CONSUMER"
                | "SELF_TEST_C_GROUP"
                | "CID_ONSAPI_OWNER"
                | "CID_ONSAPI_PERMISSION"
                | "CID_ONSAPI_PULL"
                | "CID_ONS-HTTP-PROXY"
                | "__MONITOR_CONSUMER"
                | "CID_SYS_RMQ_TRANS"
        )
}

/// One group's progress rows over every broker group, and the total lag.
pub async fn progress(s: &ConsoleState, groups: &[BrokerGroup], group: &str) -> (Vec<Value>, u64, Vec<String>) {
    let path = format!("/api/v1/groups/{}/progress", encode_component(group));
    let answers = futures::future::join_all(groups.iter().map(|g| {
        let path = &path;
        async move { (g, s.read(g, path).await) }
    }))
    .await;
    let mut rows = Vec::new();
    let mut total = 0u64;
    let mut errors = Vec::new();
    for (broker, answer) in answers {
        match answer {
            Ok((_, a)) if a.ok() => {
                total = total.saturating_add(a.body["lag_total"].as_u64().unwrap_or(0));
                for q in a.body["queues"].as_array().into_iter().flatten() {
                    let mut q = q.clone();
                    q["broker"] = json!(broker.name);
                    rows.push(q);
                }
            }
            Ok((_, a)) if a.status == StatusCode::NOT_FOUND => {}
            Ok((addr, a)) => errors.push(ApiError::from_answer(&addr, &a).message),
            Err(e) => errors.push(e.message),
        }
    }
    (rows, total, errors)
}

/// `GET /console/api/consumer-groups/{group}`.
pub async fn get_one(State(s): State<Arc<ConsoleState>>, ApiPath(group): ApiPath<String>) -> ApiResult<Json<Value>> {
    let topology = s.topology().await?;
    let (queues, lag_total, mut errors) = progress(&s, &topology.groups, &group).await;
    if errors.is_empty() && !queues.is_empty() {
        s.history.record_if_due(Kind::GroupLag, &group, crate::history::now_ms(), lag_total as f64);
    }
    let replicas: Vec<String> = topology.groups.iter().flat_map(BrokerGroup::remoting_addrs).collect();
    let connections = futures::future::join_all(replicas.iter().map(|addr| {
        let (s, group) = (&s, &group);
        async move { tokio::time::timeout(read_deadline(), s.admin.consumer_connection(addr, group)).await }
    }))
    .await;
    let mut clients: BTreeMap<String, Value> = BTreeMap::new();
    let mut subscriptions: BTreeMap<String, String> = BTreeMap::new();
    let mut model = Value::Null;
    let mut consume_type = Value::Null;
    for c in connections.into_iter().flatten().flatten() {
        for conn in &c.connection_set {
            clients.insert(
                conn.client_id.clone(),
                json!({ "client_id": conn.client_id, "client_addr": conn.client_addr, "language": conn.language, "version": conn.version }),
            );
        }
        for (topic, sub) in &c.subscription_table {
            subscriptions
                .insert(topic.clone(), format!("{} {}", sub.expression_type, sub.sub_string).trim().to_owned());
        }
        if let Some(m) = &c.message_model {
            model = serde_json::to_value(m).unwrap_or(Value::Null);
        }
        if let Some(t) = &c.consume_type {
            consume_type = serde_json::to_value(t).unwrap_or(Value::Null);
        }
    }
    let mut tps = 0.0;
    for broker in &topology.groups {
        let Some(addr) = broker.leader_remoting_addr() else { continue };
        match tokio::time::timeout(read_deadline(), s.admin.consume_stats(addr, &group, None)).await {
            Ok(Ok(stats)) => tps += stats.consume_tps,
            Ok(Err(e)) if queues.iter().any(|q| q["broker"] == json!(broker.name)) => errors.push(e.to_string()),
            _ => {}
        }
    }
    let subscriptions: Vec<Value> = subscriptions
        .into_iter()
        .map(|(topic, expression)| json!({ "topic": topic, "expression": expression }))
        .collect();
    Ok(Json(json!({
        "group": group,
        "queues": queues,
        "lag_total": lag_total,
        "connections": clients.into_values().collect::<Vec<_>>(),
        "subscriptions": subscriptions,
        "message_model": model,
        "consume_type": consume_type,
        "consume_tps": tps,
        "lag_history": s.history.points(Kind::GroupLag, &group),
        "errors": errors,
    })))
}

/// `DELETE /console/api/consumer-groups/{group}`: the subscription group and its offsets, on every
/// broker group that has it.
pub async fn delete(State(s): State<Arc<ConsoleState>>, ApiPath(group): ApiPath<String>) -> ApiResult<Json<Value>> {
    let topology = s.topology().await?;
    let path = format!("/api/v1/groups/{}", encode_component(&group));
    let mut results = Vec::new();
    for broker in &topology.groups {
        match s.read(broker, &path).await {
            Ok((_, a)) if a.ok() => {}
            _ => continue,
        }
        let delete = format!("{path}?remove_offset=true");
        let r = s.change(broker, Method::DELETE, &delete, None, read_deadline()).await;
        results.push(match r {
            Ok(_) => json!({ "group": broker.name, "ok": true }),
            Err(e) => json!({ "group": broker.name, "ok": false, "error": e.message }),
        });
    }
    if results.is_empty() {
        return Err(ApiError::not_found(format!("no broker group has subscription group {group}")));
    }
    Ok(Json(json!({ "results": results })))
}

/// Body of a reset.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ResetBody {
    /// Topic.
    pub topic: String,
    /// Store time to move to, ms since the epoch.
    pub timestamp_ms: i64,
}

/// `POST /console/api/consumer-groups/{group}/reset-offset`: on every broker group with the topic.
pub async fn reset_offset(
    State(s): State<Arc<ConsoleState>>,
    ApiPath(group): ApiPath<String>,
    ApiJson(body): ApiJson<ResetBody>,
) -> ApiResult<Json<Value>> {
    let topology = s.topology().await?;
    let targets = groups_with(&s, &topology.groups, &body.topic).await;
    if targets.is_empty() {
        return Err(ApiError::not_found(format!("no broker group has topic {}", body.topic)));
    }
    let payload = json!({ "group": group, "topic": body.topic, "timestamp_ms": body.timestamp_ms });
    let mut results = Vec::new();
    for broker in targets {
        let r = s.change(broker, Method::POST, "/api/v1/ops/reset-offset", Some(&payload), read_deadline()).await;
        results.push(match r {
            Ok(v) => json!({ "group": broker.name, "ok": true, "queues": v["queues"], "consumers_notified": v["consumers_notified"] }),
            Err(e) => json!({ "group": broker.name, "ok": false, "error": e.message }),
        });
    }
    Ok(Json(json!({ "results": results })))
}

/// Body of a clone.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CloneBody {
    /// The group that gets the offsets.
    pub to: String,
    /// Only this topic (default: every topic of the source group).
    pub topic: Option<String>,
}

/// `POST /console/api/consumer-groups/{group}/clone-offsets`: CLONE_GROUP_OFFSET on each broker
/// group's leader (offline: the source group's clients need not be running).
pub async fn clone_offsets(
    State(s): State<Arc<ConsoleState>>,
    ApiPath(group): ApiPath<String>,
    ApiJson(body): ApiJson<CloneBody>,
) -> ApiResult<Json<Value>> {
    let topology = s.topology().await?;
    let topic = body.topic.as_deref().filter(|t| !t.is_empty());
    let mut results = Vec::new();
    let mut ok = false;
    for broker in &topology.groups {
        let Some(addr) = broker.leader_remoting_addr() else { continue };
        let r = s.admin.clone_group_offset(addr, &group, &body.to, topic, true).await;
        ok |= r.is_ok();
        results.push(match r {
            Ok(()) => json!({ "group": broker.name, "ok": true }),
            Err(e) => json!({ "group": broker.name, "ok": false, "error": e.to_string() }),
        });
    }
    if !ok {
        let why = results.iter().filter_map(|r| r["error"].as_str()).collect::<Vec<_>>().join("; ");
        return Err(ApiError::upstream(format!("no broker group cloned the offsets: {why}")));
    }
    Ok(Json(json!({ "results": results })))
}

/// `GET /console/api/consumer-groups/{group}/dlq`: the oldest messages of `%DLQ%group` per queue.
pub async fn dlq(State(s): State<Arc<ConsoleState>>, ApiPath(group): ApiPath<String>) -> ApiResult<Json<Value>> {
    let topology = s.topology().await?;
    let topic = format!("{DLQ_GROUP_TOPIC_PREFIX}{group}");
    let path = format!("/api/v1/topics/{}", encode_component(&topic));
    let mut messages = Vec::new();
    let mut total = 0u64;
    let mut errors = Vec::new();
    for broker in &topology.groups {
        let answer = match s.read(broker, &path).await {
            Ok((_, a)) if a.ok() => a.body,
            Ok(_) => continue,
            Err(e) => {
                errors.push(e.message);
                continue;
            }
        };
        let Some(addr) = broker.leader_remoting_addr() else { continue };
        for q in answer["queues"].as_array().into_iter().flatten() {
            let (min, max) = (q["min_offset"].as_i64().unwrap_or(0), q["max_offset"].as_i64().unwrap_or(0));
            total = total.saturating_add(u64::try_from(max - min).unwrap_or(0));
            let queue_id = q["queue_id"].as_i64().and_then(|i| i32::try_from(i).ok()).unwrap_or(0);
            if max <= min {
                continue;
            }
            let mq = MessageQueue::new(&topic, &broker.name, queue_id);
            let pulled = tokio::time::timeout(
                read_deadline(),
                s.admin.pull(addr, TOOLS_GROUP, &mq, min, CONSOLE_MESSAGES_PER_QUEUE_MAX_COUNT, "*"),
            )
            .await;
            match pulled {
                Ok(Ok(r)) if r.status == PullStatus::Found => messages.extend(r.msgs.iter().map(message_json)),
                Ok(Ok(_)) => {}
                Ok(Err(e)) => errors.push(e.to_string()),
                Err(_) => errors.push(format!("{addr}: no answer in time")),
            }
        }
    }
    Ok(Json(json!({ "group": group, "topic": topic, "total": total, "messages": messages, "errors": errors })))
}

/// Body of a resend.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ResendBody {
    /// offsetMsgId of the DLQ message.
    pub msg_id: String,
}

/// `POST /console/api/consumer-groups/{group}/dlq/resend`: the DLQ message, sent again to
/// `%RETRY%group` with its original topic in `RETRY_TOPIC`: the group's consumers take it as a
/// message of the original topic; no other group sees it.
pub async fn resend(
    State(s): State<Arc<ConsoleState>>,
    ApiPath(group): ApiPath<String>,
    ApiJson(body): ApiJson<ResendBody>,
) -> ApiResult<Json<Value>> {
    let id: OffsetMsgId = body.msg_id.parse().map_err(|e| ApiError::invalid(format!("not an offsetMsgId: {e}")))?;
    let found = s.admin.view_message_by_id(&id).await?;
    let dlq = format!("{DLQ_GROUP_TOPIC_PREFIX}{group}");
    if found.topic() != dlq {
        return Err(ApiError::invalid(format!("{} is a message of {}, not of {dlq}", body.msg_id, found.topic())));
    }
    let original = found.message.properties.get(properties::RETRY_TOPIC).map(str::to_owned);
    let mut message = Message::new(format!("{RETRY_GROUP_TOPIC_PREFIX}{group}"), found.message.body.clone());
    for (k, v) in found.message.properties.iter() {
        if matches!(k, properties::UNIQ_KEY | properties::REAL_TOPIC | properties::REAL_QID) {
            continue;
        }
        message.properties.insert(k, v);
    }
    if let Some(original) = &original {
        message.properties.insert(properties::RETRY_TOPIC, original.as_str());
    }
    let producer = s.resend_producer().await?;
    let sent = producer.send(message).await?;
    Ok(Json(
        json!({ "resent": body.msg_id, "to": format!("{RETRY_GROUP_TOPIC_PREFIX}{group}"), "original_topic": original, "msg_id": sent.msg_id }),
    ))
}
