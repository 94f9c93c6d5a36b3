//! Topics over HTTP: list, get (with each queue's min/max offsets), create (POST, 409 when it
//! exists), update (PUT, 404 when it does not), delete. Changes are the replicated
//! `TopicUpsert`/`TopicDelete` commands UPDATE_AND_CREATE_TOPIC and DELETE_TOPIC_IN_BROKER propose,
//! with the same name rules (`validate_topic` to create or change, `validate_stored_topic` to look
//! up or delete, no system topics) and config rules (positive queue counts, perm within 0..=15), so
//! both doors leave the same state.

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use axum::routing::get;
use raftmq_common::limits::ADMIN_PROGRESS_QUEUES_MAX_COUNT;
use raftmq_common::limits::TOPIC_QUEUE_NUMS_MAX_COUNT;
use raftmq_common::message::validate::is_system_topic;
use raftmq_common::message::validate::validate_stored_topic;
use raftmq_common::message::validate::validate_topic;
use raftmq_common::protocol::body::topic::TopicConfig;
use raftmq_common::protocol::body::topic::TopicFilterType;
use raftmq_common::protocol::body::topic::perm;
use serde::Deserialize;
use serde::Serialize;

use crate::context::BrokerContext;
use crate::http::Routes;
use crate::http::Shared;
use crate::http::ensure_writable;
use crate::http::error::ApiError;
use crate::http::error::ApiJson;
use crate::http::error::ApiPath;
use crate::http::error::ApiResult;
use crate::http::error::code;
use crate::http::replicate;
use crate::state::entry::BrokerCommand;
use crate::state::store::now_ms;

/// Routes of this module.
pub fn routes() -> Routes {
    Routes::new()
        .route("/api/v1/topics", get(list).post(create))
        .route("/api/v1/topics/{topic}", get(get_one).put(update).delete(delete))
}

/// A topic as the API shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct TopicView {
    /// Name.
    pub topic: String,
    /// Queues consumers read.
    pub read_queue_nums: i32,
    /// Queues producers write.
    pub write_queue_nums: i32,
    /// Permission bits (2 W, 4 R, 6 RW).
    pub perm: i32,
    /// `RW-` style.
    pub perm_text: String,
    /// Ordered topic.
    pub order: bool,
    /// `SINGLE_TAG` or `MULTI_TAG`.
    pub topic_filter_type: &'static str,
    /// Topic sysFlag.
    pub topic_sys_flag: i32,
    /// A system topic (created by the broker, not changeable here).
    pub system: bool,
}

impl From<&TopicConfig> for TopicView {
    fn from(c: &TopicConfig) -> Self {
        TopicView {
            topic: c.topic_name.clone(),
            read_queue_nums: c.read_queue_nums,
            write_queue_nums: c.write_queue_nums,
            perm: c.perm,
            perm_text: perm::to_display(c.perm),
            order: c.order,
            topic_filter_type: c.topic_filter_type.as_str(),
            topic_sys_flag: c.topic_sys_flag,
            system: is_system_topic(&c.topic_name),
        }
    }
}

/// One queue's bounds.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct QueueView {
    /// Queue id.
    pub queue_id: i32,
    /// Oldest offset still stored.
    pub min_offset: u64,
    /// Next offset to be written.
    pub max_offset: u64,
}

/// `GET /api/v1/topics/{topic}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct TopicDetail {
    /// The config.
    #[serde(flatten)]
    pub config: TopicView,
    /// Its read queues.
    pub queues: Vec<QueueView>,
}

/// Body of POST (with `topic`) and PUT (without, or equal to the path's). Absent fields take
/// RocketMQ's defaults on create and keep their value on update.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TopicBody {
    /// Name (POST).
    pub topic: Option<String>,
    /// Read queues.
    pub read_queue_nums: Option<i32>,
    /// Write queues.
    pub write_queue_nums: Option<i32>,
    /// Permission bits.
    pub perm: Option<i32>,
    /// Ordered.
    pub order: Option<bool>,
    /// `SINGLE_TAG` or `MULTI_TAG`.
    pub topic_filter_type: Option<String>,
}

/// A name that may be created or changed here: valid and not a system topic.
pub(crate) fn check_user_topic(topic: &str) -> ApiResult<()> {
    validate_topic(topic).map_err(|e| ApiError::invalid(e.to_string()))?;
    not_system(topic)
}

fn not_system(topic: &str) -> ApiResult<()> {
    if is_system_topic(topic) {
        return Err(ApiError::invalid(format!("The topic[{topic}] is conflict with system topic.")));
    }
    Ok(())
}

/// A name that may be looked up or deleted: one the broker may store, which includes the
/// `%RETRY%`/`%DLQ%` topics of groups with long names (past the 127 a user topic may have).
pub(crate) fn check_topic_name(topic: &str) -> ApiResult<()> {
    validate_stored_topic(topic).map_err(|e| ApiError::invalid(e.to_string()))
}

/// The topic's config, or 404 TOPIC_NOT_FOUND.
pub(crate) fn topic_config(ctx: &BrokerContext, topic: &str) -> ApiResult<TopicConfig> {
    ctx.store
        .metadata()
        .topics
        .get(topic)
        .cloned()
        .ok_or_else(|| ApiError::not_found(code::TOPIC_NOT_FOUND, format!("topic {topic} does not exist")))
}

fn apply_body(mut config: TopicConfig, body: &TopicBody) -> ApiResult<TopicConfig> {
    if let Some(n) = body.read_queue_nums {
        config.read_queue_nums = n;
    }
    if let Some(n) = body.write_queue_nums {
        config.write_queue_nums = n;
    }
    if let Some(p) = body.perm {
        config.perm = p;
    }
    if let Some(o) = body.order {
        config.order = o;
    }
    if let Some(t) = &body.topic_filter_type {
        config.topic_filter_type =
            TopicFilterType::parse(t).ok_or_else(|| ApiError::invalid(format!("unknown topic_filter_type {t:?}")))?;
    }
    // UPDATE_AND_CREATE_TOPIC's rule.
    let queues = 1..=TOPIC_QUEUE_NUMS_MAX_COUNT;
    if !queues.contains(&config.read_queue_nums)
        || !queues.contains(&config.write_queue_nums)
        || !(0..=15).contains(&config.perm)
    {
        return Err(ApiError::invalid(format!(
            "queue numbers must be within 1..={TOPIC_QUEUE_NUMS_MAX_COUNT} and perm within 0..=15"
        )));
    }
    Ok(config)
}

async fn list(State(ctx): State<Shared>) -> Json<serde_json::Value> {
    let topics: Vec<TopicView> = ctx.store.metadata().topics.iter().map(TopicView::from).collect();
    Json(serde_json::json!({ "topics": topics }))
}

async fn get_one(State(ctx): State<Shared>, ApiPath(topic): ApiPath<String>) -> ApiResult<Json<TopicDetail>> {
    check_topic_name(&topic)?;
    let config = topic_config(&ctx, &topic)?;
    let count = usize::try_from(config.read_queue_nums).unwrap_or(0).min(ADMIN_PROGRESS_QUEUES_MAX_COUNT);
    let queues = {
        let cq = ctx.store.consume_queues();
        (0..count)
            .filter_map(|q| i32::try_from(q).ok())
            .map(|queue_id| {
                let (min_offset, max_offset) = cq.offsets(&topic, queue_id);
                QueueView { queue_id, min_offset, max_offset }
            })
            .collect()
    };
    Ok(Json(TopicDetail { config: TopicView::from(&config), queues }))
}

async fn create(
    State(ctx): State<Shared>,
    ApiJson(body): ApiJson<TopicBody>,
) -> ApiResult<(StatusCode, Json<TopicView>)> {
    let topic = body.topic.clone().ok_or_else(|| ApiError::invalid("topic is required"))?;
    check_user_topic(&topic)?;
    let config = apply_body(TopicConfig::new(&topic), &body)?;
    ensure_writable(&ctx)?;
    if ctx.store.metadata().topics.get(&topic).is_some() {
        return Err(ApiError::new(StatusCode::CONFLICT, code::ALREADY_EXISTS, format!("topic {topic} exists")));
    }
    let view = TopicView::from(&config);
    replicate(&ctx, BrokerCommand::TopicUpsert { proposed_at_ms: now_ms() as i64, config }).await?;
    Ok((StatusCode::CREATED, Json(view)))
}

async fn update(
    State(ctx): State<Shared>,
    ApiPath(topic): ApiPath<String>,
    ApiJson(body): ApiJson<TopicBody>,
) -> ApiResult<Json<TopicView>> {
    check_user_topic(&topic)?;
    if body.topic.as_deref().is_some_and(|t| t != topic) {
        return Err(ApiError::invalid("the body's topic differs from the path's"));
    }
    ensure_writable(&ctx)?;
    let config = apply_body(topic_config(&ctx, &topic)?, &body)?;
    let view = TopicView::from(&config);
    replicate(&ctx, BrokerCommand::TopicUpsert { proposed_at_ms: now_ms() as i64, config }).await?;
    Ok(Json(view))
}

async fn delete(State(ctx): State<Shared>, ApiPath(topic): ApiPath<String>) -> ApiResult<Json<serde_json::Value>> {
    check_topic_name(&topic)?;
    not_system(&topic)?;
    ensure_writable(&ctx)?;
    topic_config(&ctx, &topic)?;
    replicate(&ctx, BrokerCommand::TopicDelete { proposed_at_ms: now_ms() as i64, topic: topic.clone() }).await?;
    Ok(Json(serde_json::json!({ "deleted": topic })))
}
