//! The Topics page's calls: every topic over every group (queues summed, the groups named, the
//! current message rate), one topic's queues per group (min/max offset from the admin API, the
//! last store time from GET_TOPIC_STATS_INFO) with its rate history, and create / change / delete
//! relayed to each group's leader (a new topic goes to every group unless groups are named, as
//! `updateTopic -c` does).

use std::collections::BTreeMap;
use std::sync::Arc;

use axum::Json;
use axum::extract::State;
use axum::http::Method;
use axum::http::StatusCode;
use raftmq_broker::http::error::ApiJson;
use raftmq_broker::http::error::ApiPath;
use serde::Deserialize;
use serde_json::Value;
use serde_json::json;

use crate::api::error::ApiError;
use crate::api::error::ApiResult;
use crate::history::Kind;
use crate::state::ConsoleState;
use crate::state::read_deadline;
use crate::topology::BrokerGroup;
use crate::upstream::encode_component;

/// `GET /console/api/topics`.
pub async fn list(State(s): State<Arc<ConsoleState>>) -> ApiResult<Json<Value>> {
    let topology = s.topology().await?;
    let answers = futures::future::join_all(topology.groups.iter().map(|g| {
        let s = &s;
        async move { (g, s.read_ok(g, "/api/v1/topics").await) }
    }))
    .await;
    let mut topics: BTreeMap<String, Value> = BTreeMap::new();
    let mut errors = Vec::new();
    for (group, answer) in answers {
        let list = match answer {
            Ok(v) => v,
            Err(e) => {
                errors.push(e.message);
                continue;
            }
        };
        for t in list["topics"].as_array().into_iter().flatten() {
            let Some(name) = t["topic"].as_str() else { continue };
            let entry = topics.entry(name.to_owned()).or_insert_with(|| {
                json!({
                    "topic": name, "groups": [], "read_queue_nums": 0, "write_queue_nums": 0,
                    "perm_text": t["perm_text"], "order": t["order"], "system": t["system"],
                })
            });
            if let Some(groups) = entry["groups"].as_array_mut() {
                groups.push(json!(group.name));
            }
            for key in ["read_queue_nums", "write_queue_nums"] {
                entry[key] = json!(entry[key].as_i64().unwrap_or(0) + t[key].as_i64().unwrap_or(0));
            }
        }
    }
    let topics: Vec<Value> = topics
        .into_values()
        .map(|mut t| {
            let name = t["topic"].as_str().unwrap_or_default().to_owned();
            t["rate"] = json!(s.history.last_rate(Kind::TopicOffsets, &name));
            t
        })
        .collect();
    Ok(Json(json!({ "topics": topics, "errors": errors })))
}

/// `GET /console/api/topics/{topic}`.
pub async fn get_one(State(s): State<Arc<ConsoleState>>, ApiPath(topic): ApiPath<String>) -> ApiResult<Json<Value>> {
    let topology = s.topology().await?;
    let path = format!("/api/v1/topics/{}", encode_component(&topic));
    let mut config = Value::Null;
    let mut groups = Vec::new();
    let mut errors = Vec::new();
    for group in &topology.groups {
        let (addr, answer) = match s.read(group, &path).await {
            Ok(a) => a,
            Err(e) => {
                errors.push(e.message);
                continue;
            }
        };
        if answer.status == StatusCode::NOT_FOUND {
            continue;
        }
        if !answer.ok() {
            errors.push(ApiError::from_answer(&addr, &answer).message);
            continue;
        }
        let stored: BTreeMap<i32, i64> = match group.leader_remoting_addr() {
            Some(remoting) => tokio::time::timeout(read_deadline(), s.admin.topic_stats(remoting, &topic))
                .await
                .ok()
                .and_then(Result::ok)
                .map(|t| t.offset_table.iter().map(|(mq, o)| (mq.queue_id, o.last_update_timestamp)).collect())
                .unwrap_or_default(),
            None => BTreeMap::new(),
        };
        let queues: Vec<Value> = answer.body["queues"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|q| {
                let id = q["queue_id"].as_i64().and_then(|i| i32::try_from(i).ok()).unwrap_or(-1);
                json!({
                    "queue_id": id, "min_offset": q["min_offset"], "max_offset": q["max_offset"],
                    "last_store_ms": stored.get(&id).copied().filter(|t| *t > 0),
                })
            })
            .collect();
        if config.is_null() {
            config = answer.body.clone();
            if let Some(o) = config.as_object_mut() {
                o.remove("queues");
            }
        }
        groups.push(json!({ "name": group.name, "queues": queues }));
    }
    if groups.is_empty() && errors.is_empty() {
        return Err(ApiError::not_found(format!("no broker group has topic {topic}")));
    }
    Ok(Json(json!({
        "topic": topic, "config": config, "groups": groups, "errors": errors,
        "rates": s.history.rates(Kind::TopicOffsets, &topic),
    })))
}

/// Body of a create or change.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TopicBody {
    /// Name (create).
    pub topic: Option<String>,
    /// Read queues per group.
    pub read_queue_nums: Option<i32>,
    /// Write queues per group.
    pub write_queue_nums: Option<i32>,
    /// Permission bits (2 W, 4 R, 6 RW).
    pub perm: Option<i32>,
    /// Groups to create it in (create; default every group).
    pub groups: Option<Vec<String>>,
}

impl TopicBody {
    fn broker_body(&self) -> Value {
        let mut v = json!({});
        if let Some(t) = &self.topic {
            v["topic"] = json!(t);
        }
        for (k, x) in [
            ("read_queue_nums", self.read_queue_nums),
            ("write_queue_nums", self.write_queue_nums),
            ("perm", self.perm),
        ] {
            if let Some(x) = x {
                v[k] = json!(x);
            }
        }
        v
    }
}

/// Runs `one` on every group in `groups`; `{"results": [{group, ok, error?}]}`, an error when all fail.
async fn on_groups<'a, F, Fut>(groups: Vec<&'a BrokerGroup>, one: F) -> ApiResult<Json<Value>>
where
    F: Fn(&'a BrokerGroup) -> Fut,
    Fut: Future<Output = ApiResult<Value>>,
{
    if groups.is_empty() {
        return Err(ApiError::not_found("no broker group to change"));
    }
    let outcomes = futures::future::join_all(groups.iter().map(|g| one(g))).await;
    let mut results = Vec::new();
    let mut first_error = None;
    for (g, outcome) in groups.iter().zip(outcomes) {
        match outcome {
            Ok(_) => results.push(json!({ "group": g.name, "ok": true })),
            Err(e) => {
                results.push(json!({ "group": g.name, "ok": false, "error": e.message }));
                first_error.get_or_insert(e);
            }
        }
    }
    match first_error {
        Some(e) if results.iter().all(|r| r["ok"] == json!(false)) => Err(e),
        _ => Ok(Json(json!({ "results": results }))),
    }
}

/// `POST /console/api/topics`.
pub async fn create(State(s): State<Arc<ConsoleState>>, ApiJson(body): ApiJson<TopicBody>) -> ApiResult<Json<Value>> {
    if body.topic.as_deref().is_none_or(str::is_empty) {
        return Err(ApiError::invalid("topic is required"));
    }
    let topology = s.topology().await?;
    let targets: Vec<&BrokerGroup> = match &body.groups {
        Some(names) if !names.is_empty() => topology.groups.iter().filter(|g| names.contains(&g.name)).collect(),
        _ => topology.groups.iter().collect(),
    };
    let payload = body.broker_body();
    on_groups(targets, |g| {
        let s = &s;
        let payload = &payload;
        async move { s.change(g, Method::POST, "/api/v1/topics", Some(payload), read_deadline()).await }
    })
    .await
}

/// The groups that have `topic`.
pub(crate) async fn groups_with<'a>(s: &ConsoleState, groups: &'a [BrokerGroup], topic: &str) -> Vec<&'a BrokerGroup> {
    let path = format!("/api/v1/topics/{}", encode_component(topic));
    let found = futures::future::join_all(groups.iter().map(|g| {
        let path = &path;
        async move { s.read(g, path).await.map(|(_, a)| a.ok()).unwrap_or(false) }
    }))
    .await;
    groups.iter().zip(found).filter(|(_, has)| *has).map(|(g, _)| g).collect()
}

/// `PUT /console/api/topics/{topic}`.
pub async fn update(
    State(s): State<Arc<ConsoleState>>,
    ApiPath(topic): ApiPath<String>,
    ApiJson(body): ApiJson<TopicBody>,
) -> ApiResult<Json<Value>> {
    let topology = s.topology().await?;
    let targets = groups_with(&s, &topology.groups, &topic).await;
    let path = format!("/api/v1/topics/{}", encode_component(&topic));
    let payload = TopicBody { topic: None, groups: None, ..body }.broker_body();
    on_groups(targets, |g| {
        let (s, path, payload) = (&s, &path, &payload);
        async move { s.change(g, Method::PUT, path, Some(payload), read_deadline()).await }
    })
    .await
}

/// `DELETE /console/api/topics/{topic}`: from every group that has it, then from the NameServers'
/// routes (best effort: a NameServer with a cluster secret refuses an unsigned deletion, and the
/// route then goes with the groups' next registration).
pub async fn delete(State(s): State<Arc<ConsoleState>>, ApiPath(topic): ApiPath<String>) -> ApiResult<Json<Value>> {
    let topology = s.topology().await?;
    let targets = groups_with(&s, &topology.groups, &topic).await;
    let path = format!("/api/v1/topics/{}", encode_component(&topic));
    let Json(mut answer) = on_groups(targets, |g| {
        let (s, path) = (&s, &path);
        async move { s.change(g, Method::DELETE, path, None, read_deadline()).await }
    })
    .await?;
    if let Err(e) = s.admin.delete_topic_in_namesrv(&topic, None).await {
        answer["namesrv_note"] = json!(format!("routes stay until the next registration: {e}"));
    }
    Ok(Json(answer))
}
