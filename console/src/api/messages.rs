//! The Messages page's calls: find by offsetMsgId, by key, by store-time range in a topic, and a
//! message's trace — each asked of every broker group (a topic spreads over groups; an id names a
//! physical offset, which any replica of its group answers), through the admin API, except the
//! time range: its first offset per queue is SEARCH_OFFSET_BY_TIMESTAMP, its messages a pull.

use std::sync::Arc;

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use raftmq_broker::http::error::ApiQuery;
use raftmq_client::consumer::pull_api::PullStatus;
use raftmq_common::limits::CONSOLE_MESSAGES_LISTED_MAX_COUNT;
use raftmq_common::limits::CONSOLE_MESSAGES_PER_QUEUE_MAX_COUNT;
use raftmq_common::message::MessageQueue;
use serde::Deserialize;
use serde_json::Value;
use serde_json::json;

use crate::api::error::ApiError;
use crate::api::error::ApiResult;
use crate::api::message_view::message_json;
use crate::api::topics::groups_with;
use crate::state::ConsoleState;
use crate::state::read_deadline;
use crate::upstream::encode_component;

/// The group the console pulls as.
const TOOLS_GROUP: &str = "TOOLS_CONSUMER";

/// Every 2xx answer of `path` over the groups, each with its group's name; errors apart.
async fn ask_every_group(s: &ConsoleState, path: &str) -> ApiResult<(Vec<(String, Value)>, Vec<String>)> {
    let topology = s.topology().await?;
    let answers = futures::future::join_all(
        topology.groups.iter().map(|g| async move { (g.name.clone(), s.read(g, path).await) }),
    )
    .await;
    let mut found = Vec::new();
    let mut errors = Vec::new();
    for (name, answer) in answers {
        match answer {
            Ok((_, a)) if a.ok() => found.push((name, a.body)),
            Ok((_, a)) if a.status == StatusCode::NOT_FOUND => {}
            Ok((addr, a)) => errors.push(ApiError::from_answer(&addr, &a).message),
            Err(e) => errors.push(e.message),
        }
    }
    Ok((found, errors))
}

/// Query naming one message.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ById {
    /// offsetMsgId (by-id) or client msgId (trace).
    pub msg_id: String,
}

/// `GET /console/api/messages/by-id?msg_id`.
pub async fn by_id(State(s): State<Arc<ConsoleState>>, ApiQuery(q): ApiQuery<ById>) -> ApiResult<Json<Value>> {
    let id = q.msg_id.trim();
    if id.is_empty() {
        return Err(ApiError::invalid("msg_id is empty"));
    }
    let (found, errors) = ask_every_group(&s, &format!("/api/v1/messages/{}", encode_component(id))).await?;
    let messages: Vec<Value> = found
        .into_iter()
        .map(|(broker, mut m)| {
            m["broker"] = json!(broker);
            m
        })
        .collect();
    if messages.is_empty() && errors.is_empty() {
        return Err(ApiError::not_found(format!("no broker group holds message {id}")));
    }
    Ok(Json(json!({ "messages": messages, "errors": errors })))
}

/// Query by key.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ByKey {
    /// Topic.
    pub topic: String,
    /// One of the message's keys.
    pub key: String,
}

/// `GET /console/api/messages/by-key?topic&key`.
pub async fn by_key(State(s): State<Arc<ConsoleState>>, ApiQuery(q): ApiQuery<ByKey>) -> ApiResult<Json<Value>> {
    if q.topic.trim().is_empty() || q.key.trim().is_empty() {
        return Err(ApiError::invalid("topic and key are both needed"));
    }
    let path = format!(
        "/api/v1/messages/by-key?topic={}&key={}",
        encode_component(q.topic.trim()),
        encode_component(q.key.trim())
    );
    let (found, errors) = ask_every_group(&s, &path).await?;
    let mut messages = Vec::new();
    for (broker, answer) in found {
        for m in answer["messages"].as_array().into_iter().flatten() {
            let mut m = m.clone();
            m["broker"] = json!(broker);
            messages.push(m);
        }
    }
    messages.sort_by_key(|m| std::cmp::Reverse(m["store_timestamp"].as_i64().unwrap_or(0)));
    messages.truncate(CONSOLE_MESSAGES_LISTED_MAX_COUNT);
    Ok(Json(json!({ "messages": messages, "errors": errors })))
}

/// Query by time range.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ByTime {
    /// Topic.
    pub topic: String,
    /// Earliest store time, ms.
    pub begin_ms: i64,
    /// Latest store time, ms.
    pub end_ms: i64,
}

/// `GET /console/api/messages/by-time?topic&begin_ms&end_ms`: per queue, up to
/// [`CONSOLE_MESSAGES_PER_QUEUE_MAX_COUNT`] messages from the first stored at or after `begin_ms`.
pub async fn by_time(State(s): State<Arc<ConsoleState>>, ApiQuery(q): ApiQuery<ByTime>) -> ApiResult<Json<Value>> {
    if q.begin_ms > q.end_ms {
        return Err(ApiError::invalid("the range begins after it ends"));
    }
    let topic = q.topic.trim().to_owned();
    let topology = s.topology().await?;
    let path = format!("/api/v1/topics/{}", encode_component(&topic));
    let mut messages = Vec::new();
    let mut errors = Vec::new();
    for broker in groups_with(&s, &topology.groups, &topic).await {
        let Some(addr) = broker.leader_remoting_addr() else { continue };
        let detail = match s.read_ok(broker, &path).await {
            Ok(v) => v,
            Err(e) => {
                errors.push(e.message);
                continue;
            }
        };
        for queue in detail["queues"].as_array().into_iter().flatten() {
            let queue_id = queue["queue_id"].as_i64().and_then(|i| i32::try_from(i).ok()).unwrap_or(0);
            let from = match s.admin.search_offset(addr, &topic, queue_id, q.begin_ms).await {
                Ok(o) => o,
                Err(e) => {
                    errors.push(e.to_string());
                    continue;
                }
            };
            let mq = MessageQueue::new(&topic, &broker.name, queue_id);
            let pulled = tokio::time::timeout(
                read_deadline(),
                s.admin.pull(addr, TOOLS_GROUP, &mq, from, CONSOLE_MESSAGES_PER_QUEUE_MAX_COUNT, "*"),
            )
            .await;
            match pulled {
                Ok(Ok(r)) if r.status == PullStatus::Found => messages.extend(
                    r.msgs.iter().filter(|m| (q.begin_ms..=q.end_ms).contains(&m.store_timestamp)).map(|m| {
                        let mut v = message_json(m);
                        v["broker"] = json!(broker.name);
                        v
                    }),
                ),
                Ok(Ok(_)) => {}
                Ok(Err(e)) => errors.push(e.to_string()),
                Err(_) => errors.push(format!("{addr}: no answer in time")),
            }
        }
    }
    messages.sort_by_key(|m| m["store_timestamp"].as_i64().unwrap_or(0));
    messages.truncate(CONSOLE_MESSAGES_LISTED_MAX_COUNT);
    Ok(Json(json!({ "messages": messages, "errors": errors })))
}

/// `GET /console/api/messages/trace?msg_id`: the trace records of a client msgId, oldest first.
pub async fn trace(State(s): State<Arc<ConsoleState>>, ApiQuery(q): ApiQuery<ById>) -> ApiResult<Json<Value>> {
    let id = q.msg_id.trim();
    if id.is_empty() {
        return Err(ApiError::invalid("msg_id is empty"));
    }
    let (found, errors) = ask_every_group(&s, &format!("/api/v1/messages/{}/trace", encode_component(id))).await?;
    let mut records: Vec<Value> =
        found.into_iter().flat_map(|(_, a)| a["records"].as_array().cloned().unwrap_or_default()).collect();
    records.sort_by_key(|r| r["timestamp_ms"].as_i64().unwrap_or(0));
    Ok(Json(json!({ "msg_id": id, "records": records, "errors": errors })))
}
