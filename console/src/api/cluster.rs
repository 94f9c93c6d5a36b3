//! The Cluster page's calls: the NameServers (each asked on its own, so one down shows as down),
//! every group with each replica's `/api/v1/status` and disk use (GET_BROKER_RUNTIME_INFO's
//! `commitLogDiskRatio`), and the group changes: leader transfer, add and remove a node, relayed
//! to the group's leader.

use std::sync::Arc;
use std::time::Duration;

use axum::Json;
use axum::extract::State;
use axum::http::Method;
use raftmq_broker::http::error::ApiJson;
use raftmq_broker::http::error::ApiPath;
use raftmq_common::limits::CONSOLE_CHANGE_TIMEOUT_MS;
use serde::Deserialize;
use serde_json::Value;
use serde_json::json;

use crate::api::error::ApiResult;
use crate::state::ConsoleState;
use crate::state::read_deadline;
use crate::upstream::encode_component;

/// `GET /console/api/cluster`.
pub async fn cluster(State(s): State<Arc<ConsoleState>>) -> ApiResult<Json<Value>> {
    let namesrvs = futures::future::join_all(s.namesrv_admins.iter().map(|(addr, admin)| async move {
        match tokio::time::timeout(read_deadline(), admin.cluster_info()).await {
            Ok(Ok(info)) => json!({ "addr": addr, "ok": true, "groups": info.broker_addr_table.len() }),
            Ok(Err(e)) => json!({ "addr": addr, "ok": false, "error": e.to_string() }),
            Err(_) => json!({ "addr": addr, "ok": false, "error": "no answer in time" }),
        }
    }))
    .await;
    let topology = s.topology().await?;
    let mut groups = Vec::new();
    for group in &topology.groups {
        let replicas = futures::future::join_all(group.replicas.iter().map(|r| {
            let s = Arc::clone(&s);
            async move {
                let status = match &r.admin_addr {
                    Some(addr) => match s.http.call(addr, Method::GET, "/api/v1/status", None, read_deadline()).await {
                        Ok(a) if a.ok() => Ok(a.body),
                        Ok(a) => Err(format!("{addr}: {}", a.message())),
                        Err(e) => Err(e.to_string()),
                    },
                    None => Err(r.admin_error.clone().unwrap_or_else(|| "admin address unknown".to_owned())),
                };
                let disk = tokio::time::timeout(read_deadline(), s.admin.broker_runtime_info(&r.remoting_addr))
                    .await
                    .ok()
                    .and_then(Result::ok)
                    .and_then(|kv| kv.table.get("commitLogDiskRatio").and_then(|v| v.parse::<f64>().ok()));
                let (ok, status, error) = match status {
                    Ok(v) => (true, v, Value::Null),
                    Err(e) => (false, Value::Null, Value::String(e)),
                };
                json!({
                    "broker_id": r.broker_id,
                    "remoting_addr": r.remoting_addr,
                    "admin_addr": r.admin_addr,
                    "ok": ok,
                    "error": error,
                    "status": status,
                    "disk_used_ratio": disk,
                })
            }
        }))
        .await;
        groups.push(json!({ "name": group.name, "cluster": group.cluster, "replicas": replicas }));
    }
    Ok(Json(json!({ "namesrvs": namesrvs, "groups": groups })))
}

/// Body of a leader transfer.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TransferBody {
    /// The voter to lead next.
    pub to: u64,
}

fn change_deadline() -> Duration {
    Duration::from_millis(CONSOLE_CHANGE_TIMEOUT_MS)
}

/// `POST /console/api/brokers/{group}/transfer-leader {"to"}`.
pub async fn transfer_leader(
    State(s): State<Arc<ConsoleState>>,
    ApiPath(name): ApiPath<String>,
    ApiJson(body): ApiJson<TransferBody>,
) -> ApiResult<Json<Value>> {
    let group = s.group(&name).await?;
    let body = json!({ "to": body.to });
    s.change(&group, Method::POST, "/api/v1/ops/transfer-leader", Some(&body), change_deadline()).await.map(Json)
}

/// Body of an add-node.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AddNodeBody {
    /// Raft id never used in the group.
    pub id: u64,
    /// `ip:port` of its remoting server.
    pub remoting_addr: String,
    /// `ip:port` of its Raft server.
    pub raft_addr: String,
}

/// `POST /console/api/brokers/{group}/nodes`.
pub async fn add_node(
    State(s): State<Arc<ConsoleState>>,
    ApiPath(name): ApiPath<String>,
    ApiJson(body): ApiJson<AddNodeBody>,
) -> ApiResult<Json<Value>> {
    let group = s.group(&name).await?;
    let body = json!({ "id": body.id, "remoting_addr": body.remoting_addr, "raft_addr": body.raft_addr });
    s.change(&group, Method::POST, "/api/v1/ops/nodes", Some(&body), change_deadline()).await.map(Json)
}

/// `DELETE /console/api/brokers/{group}/nodes/{id}`.
pub async fn remove_node(
    State(s): State<Arc<ConsoleState>>,
    ApiPath((name, id)): ApiPath<(String, u64)>,
) -> ApiResult<Json<Value>> {
    let group = s.group(&name).await?;
    let path = format!("/api/v1/ops/nodes/{}", encode_component(&id.to_string()));
    s.change(&group, Method::DELETE, &path, None, change_deadline()).await.map(Json)
}
