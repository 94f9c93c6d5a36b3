//! Group membership over HTTP (leader only), on [`crate::services::membership`]:
//!
//! - `POST /api/v1/ops/nodes {"id", "remoting_addr", "raft_addr"}`: add a node (a learner until it
//!   has caught up, then a voter); 200 with the group afterwards.
//! - `DELETE /api/v1/ops/nodes/{id}`: remove a voter or learner (this leader included).
//!
//! Errors: 421 NOT_LEADER (naming the leader), 409 BUSY while another change runs, 400
//! INVALID_ARGUMENT (reused id, already a voter, bad address), 404 NOT_FOUND (not a member), 504
//! TIMEOUT (catch-up or hand-over not done in time). A change runs on its own task: the server's
//! request deadline may answer 504 first, but the change itself goes on to its end (the learner is
//! promoted, a removed leader hands over); `/api/v1/status` shows the outcome.

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use axum::routing::delete;
use axum::routing::post;
use serde::Deserialize;

use crate::context::BrokerContext;
use crate::http::Routes;
use crate::http::Shared;
use crate::http::error::ApiError;
use crate::http::error::ApiJson;
use crate::http::error::ApiPath;
use crate::http::error::ApiResult;
use crate::http::error::code;
use crate::services::membership;
use crate::services::membership::MembershipError;
use crate::services::membership::MembershipReport;

/// Routes of this module.
pub fn routes() -> Routes {
    Routes::new().route("/api/v1/ops/nodes", post(add_node)).route("/api/v1/ops/nodes/{id}", delete(remove_node))
}

/// Body of POST /api/v1/ops/nodes.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AddNode {
    /// Raft id, never used before in this group.
    pub id: u64,
    /// The node's remoting address (`brokerIP1:listenPort`).
    pub remoting_addr: String,
    /// The node's Raft address.
    pub raft_addr: String,
}

pub(crate) fn api_error(ctx: &BrokerContext, e: MembershipError) -> ApiError {
    match e {
        MembershipError::NotLeader { leader_addr } => {
            let mut err = ApiError::not_leader(&ctx.replica);
            err.body.leader_addr = leader_addr.or(err.body.leader_addr);
            err
        }
        MembershipError::Write(w) => ApiError::from_write(w, &ctx.replica),
        MembershipError::InProgress(_) => ApiError::new(StatusCode::CONFLICT, code::BUSY, e.to_string()),
        MembershipError::NotMember(_) => ApiError::not_found(code::NOT_FOUND, e.to_string()),
        MembershipError::IdReused(_) | MembershipError::AlreadyVoter(_) | MembershipError::Invalid(_) => {
            ApiError::invalid(e.to_string())
        }
        MembershipError::CatchUpTimeout { .. } | MembershipError::TransferTimeout { .. } => {
            ApiError::new(StatusCode::GATEWAY_TIMEOUT, code::TIMEOUT, e.to_string())
        }
        MembershipError::Raft(_) => ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, code::RAFT_ERROR, e.to_string()),
    }
}

/// The report in this API's snake_case.
fn report_json(r: MembershipReport) -> Json<serde_json::Value> {
    Json(serde_json::json!({
        "operation": r.operation,
        "node_id": r.node_id,
        "term": r.term,
        "leader": r.leader,
        "leader_addr": r.leader_addr,
        "voters": r.voters,
        "learners": r.learners,
        "elapsed_ms": r.elapsed_ms,
    }))
}

async fn add_node(State(ctx): State<Shared>, ApiJson(body): ApiJson<AddNode>) -> ApiResult<Json<serde_json::Value>> {
    let report = membership::run_detached(&ctx.membership, move |ctx| async move {
        membership::add_node(&ctx, body.id, body.remoting_addr, body.raft_addr).await
    })
    .await
    .map_err(|e| api_error(&ctx, e))?;
    Ok(report_json(report))
}

async fn remove_node(State(ctx): State<Shared>, ApiPath(id): ApiPath<u64>) -> ApiResult<Json<serde_json::Value>> {
    let report =
        membership::run_detached(&ctx.membership, move |ctx| async move { membership::remove_node(&ctx, id).await })
            .await
            .map_err(|e| api_error(&ctx, e))?;
    Ok(report_json(report))
}
