//! Operations over HTTP (leader only):
//!
//! - `POST /api/v1/ops/transfer-leader {"to": id}`: this leader hands leadership to voter `to`
//!   ([`crate::membership::transfer_leader`]: `to` must have caught up, no membership change may be
//!   running) and answers 200 once `to` is a ready leader (504 if it is not in time).
//! - `POST /api/v1/ops/reset-offset {"group", "topic", "timestamp_ms"}`: sets the group's committed
//!   offset of every read queue of `topic` to the first offset stored at or after the time
//!   (`mqadmin resetOffsetByTime`, SEARCH_OFFSET_BY_TIMESTAMP's lower bound), as one replicated
//!   CONSUMER_OFFSETS entry. Applying such an entry stores whatever it says (`ConsumerOffsetTable`
//!   lets an offset move backwards), so a reset needs no command of its own. A consumer that is
//!   running keeps its in-memory offsets and may commit them over the reset: stop it first (Java's
//!   broker would push RESET_CONSUMER_CLIENT_OFFSET to it; this broker does not yet).

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use axum::routing::post;
use raftmq_common::limits::ADMIN_PROGRESS_QUEUES_MAX_COUNT;
use serde::Deserialize;
use serde::Serialize;

use crate::entry::BrokerCommand;
use crate::entry::OffsetCommit;
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
use crate::http::replicate;
use crate::http::topics::check_topic_name;
use crate::http::topics::topic_config;
use crate::membership;
use crate::query_processor::offset_by_time;

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
    let report =
        membership::run_detached(&ctx, move |ctx| async move { membership::transfer_leader(&ctx, Some(to)).await })
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
    let config = topic_config(&ctx, &body.topic)?;
    if !group_known(&ctx, &body.group) {
        return Err(ApiError::not_found(code::GROUP_NOT_FOUND, format!("group {} does not exist", body.group)));
    }
    ensure_writable(&ctx)?;
    let queues = usize::try_from(config.read_queue_nums).unwrap_or(0).min(ADMIN_PROGRESS_QUEUES_MAX_COUNT);
    let mut rows = Vec::with_capacity(queues);
    for queue_id in (0..queues).filter_map(|q| i32::try_from(q).ok()) {
        let offset = offset_by_time(&ctx.store, &body.topic, queue_id, body.timestamp_ms);
        let previous = ctx.store.metadata().offsets.query(&body.topic, &body.group, queue_id);
        rows.push(ResetRow { queue_id, previous, offset: i64::try_from(offset).unwrap_or(i64::MAX) });
    }
    let commits = rows
        .iter()
        .map(|r| OffsetCommit {
            topic: body.topic.clone(),
            group: body.group.clone(),
            queue_id: r.queue_id,
            offset: r.offset,
        })
        .collect::<Vec<_>>();
    if !commits.is_empty() {
        replicate(&ctx, BrokerCommand::ConsumerOffsets(commits)).await?;
    }
    Ok(Json(serde_json::json!({
        "group": body.group,
        "topic": body.topic,
        "timestamp_ms": body.timestamp_ms,
        "queues": rows,
    })))
}
