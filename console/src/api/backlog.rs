//! The Delayed & transactions page's call: per broker group, the delayed messages waiting per
//! delay level (GET_BROKER_RUNTIME_INFO's `scheduleMessageOffset_N` = "delivered,stored" of the
//! level's queue, named by the group's `messageDelayLevel`) and the half (prepared) messages the
//! transaction check has not passed yet (the lag of `CID_RMQ_SYS_TRANS` on the half topic, or the
//! whole half queue before the first check).

use std::sync::Arc;

use axum::Json;
use axum::extract::State;
use raftmq_broker::state::transaction::CID_RMQ_SYS_TRANS;
use raftmq_common::message::validate::RMQ_SYS_TRANS_HALF_TOPIC;
use serde_json::Value;
use serde_json::json;

use crate::api::error::ApiResult;
use crate::state::ConsoleState;
use crate::state::read_deadline;
use crate::upstream::encode_component;

/// `GET /console/api/backlog`.
pub async fn backlog(State(s): State<Arc<ConsoleState>>) -> ApiResult<Json<Value>> {
    let topology = s.topology().await?;
    let mut groups = Vec::new();
    for broker in &topology.groups {
        let Some(addr) = broker.leader_remoting_addr() else { continue };
        let mut errors = Vec::new();
        let names: Vec<String> = match tokio::time::timeout(read_deadline(), s.admin.broker_config(addr)).await {
            Ok(Ok(c)) => c
                .get("messageDelayLevel")
                .map(|l| l.split_whitespace().map(str::to_owned).collect())
                .unwrap_or_default(),
            _ => Vec::new(),
        };
        let mut levels = Vec::new();
        match tokio::time::timeout(read_deadline(), s.admin.broker_runtime_info(addr)).await {
            Ok(Ok(kv)) => {
                for (key, value) in &kv.table {
                    let Some(level) = key.strip_prefix("scheduleMessageOffset_").and_then(|l| l.parse::<usize>().ok())
                    else {
                        continue;
                    };
                    let mut parts = value.split(',').map(|p| p.trim().parse::<i64>().unwrap_or(0));
                    let (delivered, stored) = (parts.next().unwrap_or(0), parts.next().unwrap_or(0));
                    levels.push(json!({
                        "level": level,
                        "delay": names.get(level.wrapping_sub(1)),
                        "delivered": delivered,
                        "stored": stored,
                        "waiting": (stored - delivered).max(0),
                    }));
                }
                levels.sort_by_key(|l| l["level"].as_u64().unwrap_or(0));
            }
            Ok(Err(e)) => errors.push(e.to_string()),
            Err(_) => errors.push(format!("{addr}: no answer in time")),
        }
        let progress = format!("/api/v1/groups/{}/progress", encode_component(CID_RMQ_SYS_TRANS));
        let half_path = format!("/api/v1/topics/{}", encode_component(RMQ_SYS_TRANS_HALF_TOPIC));
        let half = match s.read(broker, &progress).await {
            Ok((_, a)) if a.ok() => {
                let rows = a.body["queues"].as_array().cloned().unwrap_or_default();
                let waiting: u64 = rows
                    .iter()
                    .filter(|r| r["topic"] == json!(RMQ_SYS_TRANS_HALF_TOPIC))
                    .map(|r| r["lag"].as_u64().unwrap_or(0))
                    .sum();
                json!({ "waiting": waiting, "checked": true })
            }
            _ => match s.read(broker, &half_path).await {
                Ok((_, a)) if a.ok() => {
                    let waiting: u64 = a.body["queues"]
                        .as_array()
                        .into_iter()
                        .flatten()
                        .map(|q| {
                            q["max_offset"].as_u64().unwrap_or(0).saturating_sub(q["min_offset"].as_u64().unwrap_or(0))
                        })
                        .sum();
                    json!({ "waiting": waiting, "checked": false })
                }
                Ok(_) => json!({ "waiting": 0, "checked": false }),
                Err(e) => {
                    errors.push(e.message);
                    Value::Null
                }
            },
        };
        groups.push(json!({ "name": broker.name, "levels": levels, "half": half, "errors": errors }));
    }
    Ok(Json(json!({ "groups": groups })))
}
