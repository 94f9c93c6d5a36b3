//! Operations over HTTP (leader only):
//!
//! - `POST /api/v1/ops/transfer-leader {"to": id}`: this leader hands leadership to voter `to`
//!   ([`crate::services::membership::transfer_leader`]: `to` must have caught up, no membership change may be
//!   running) and answers 200 once `to` is a ready leader (504 if it is not in time).
//! - `POST /api/v1/ops/reset-offset {"group", "topic", "timestamp_ms"}`: sets the group's committed
//!   offset of every read queue of `topic` to the first offset stored at or after the time
//!   (`mqadmin resetOffsetByTime --force`, SEARCH_OFFSET_BY_TIMESTAMP's lower bound), as one
//!   replicated CONSUMER_OFFSETS entry, then pushes RESET_CONSUMER_CLIENT_OFFSET to the group's
//!   running consumers so they drop what they cached and continue from there
//!   ([`crate::processors::offset_reset`]). Works for a stopped group too.

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use axum::routing::post;
use raftmq_common::protocol::header::admin::ResetOffsetRequestHeader;
use serde::Deserialize;
use serde::Serialize;

use crate::http::Routes;
use crate::http::Shared;
use crate::http::ensure_writable;
use crate::http::error::ApiError;
use crate::http::error::ApiJson;
use crate::http::error::ApiResult;
use crate::http::error::code;
use crate::http::groups::check_group_name;
use crate::http::groups::group_known;
use crate::http::membership::api_error;
use crate::http::topics::check_topic_name;
use crate::http::topics::topic_config;
use crate::processors::offset_reset;
use crate::services::membership;

/// Routes of this module.
pub fn routes() -> Routes {
    Routes::new()
        .route("/api/v1/ops/transfer-leader", post(transfer_leader))
        .route("/api/v1/ops/reset-offset", post(reset_offset))
}

/// Body of transfer-leader.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TransferLeader {
    /// Raft id of the voter to lead next.
    pub to: u64,
}

async fn transfer_leader(
    State(ctx): State<Shared>,
    ApiJson(body): ApiJson<TransferLeader>,
) -> ApiResult<(StatusCode, Json<serde_json::Value>)> {
    let node = ctx.replica.node();
    let me = node.id();
    let status = node.status();
    if !status.voters.contains(&body.to) {
        return Err(ApiError::invalid(format!("node {} is not a voter of {:?}", body.to, status.voters)));
    }
    ensure_writable(&ctx)?;
    let to = body.to;
    let report = membership::run_detached(&ctx.membership, move |ctx| async move {
        membership::transfer_leader(&ctx, Some(to)).await
    })
    .await
    .map_err(|e| api_error(&ctx, e))?;
    Ok((
        StatusCode::OK,
        Json(serde_json::json!({
            "from": me, "to": to, "requested": to != me, "leader": report.leader, "term": report.term,
            "elapsed_ms": report.elapsed_ms,
        })),
    ))
}

/// Body of reset-offset.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ResetOffset {
    /// Consumer group.
    pub group: String,
    /// Topic.
    pub topic: String,
    /// Store time to rewind (or advance) to, ms since the epoch.
    pub timestamp_ms: i64,
}

/// One queue reset.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ResetRow {
    /// Queue.
    pub queue_id: i32,
    /// Committed offset before (`null`: none).
    pub previous: Option<i64>,
    /// Committed offset now.
    pub offset: i64,
}

async fn reset_offset(
    State(ctx): State<Shared>,
    ApiJson(body): ApiJson<ResetOffset>,
) -> ApiResult<Json<serde_json::Value>> {
    check_group_name(&body.group)?;
    check_topic_name(&body.topic)?;
    topic_config(&ctx, &body.topic)?;
    if !group_known(&ctx, &body.group) {
        return Err(ApiError::not_found(code::GROUP_NOT_FOUND, format!("group {} does not exist", body.group)));
    }
    ensure_writable(&ctx)?;
    let plan = offset_reset::plan(&ctx.store, &body.topic, &body.group, body.timestamp_ms, true).unwrap_or_default();
    offset_reset::commit(&ctx.replica, &body.topic, &body.group, &plan)
        .await
        .map_err(|e| ApiError::from_write(e, &ctx.replica))?;
    let rows: Vec<ResetRow> =
        plan.iter().map(|r| ResetRow { queue_id: r.queue_id, previous: r.previous, offset: r.offset }).collect();
    let consumers = ctx.clients.consumer_connections(&body.group);
    let consumers_notified = consumers.len();
    let header = ResetOffsetRequestHeader {
        topic: body.topic.clone(),
        group: body.group.clone(),
        timestamp: body.timestamp_ms,
        is_force: true,
    };
    offset_reset::notify_consumers(
        consumers,
        &header,
        &offset_reset::body(&ctx.config.broker_name, &body.topic, &plan),
    );
    Ok(Json(serde_json::json!({
        "group": body.group,
        "topic": body.topic,
        "timestamp_ms": body.timestamp_ms,
        "queues": rows,
        "consumers_notified": consumers_notified,
    })))
}
