//! Subscription groups over HTTP — list, get, create (POST, 409 when it exists), update (PUT, 404
//! when it does not), delete — through the replicated `SubscriptionGroupUpsert`/`Delete` commands
//! UPDATE_AND_CREATE_SUBSCRIPTIONGROUP and DELETE_SUBSCRIPTIONGROUP propose (same `validate_group`,
//! and `validate_consumer_group` for a new group);
//! and a group's consumer progress (`mqadmin consumerProgress`): per topic and queue the broker
//! offset (max), the committed consumer offset and the lag, with totals.

use std::collections::BTreeMap;
use std::collections::BTreeSet;

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use axum::routing::get;
use raftmq_common::limits::ADMIN_PROGRESS_QUEUES_MAX_COUNT;
use raftmq_common::limits::TOPIC_QUEUE_NUMS_MAX_COUNT;
use raftmq_common::message::validate::validate_consumer_group;
use raftmq_common::message::validate::validate_group;
use raftmq_common::protocol::body::subscription_group::SubscriptionGroupConfig;
use serde::Deserialize;
use serde::Serialize;

use crate::http::Routes;
use crate::http::Shared;
use crate::http::ensure_writable;
use crate::http::error::ApiError;
use crate::http::error::ApiJson;
use crate::http::error::ApiPath;
use crate::http::error::ApiQuery;
use crate::http::error::ApiResult;
use crate::http::error::code;
use crate::http::handles::HttpHandles;
use crate::http::replicate;
use crate::state::entry::BrokerCommand;
use crate::state::store::now_ms;

/// Routes of this module.
pub fn routes() -> Routes {
    Routes::new()
        .route("/api/v1/groups", get(list).post(create))
        .route("/api/v1/groups/{group}", get(get_one).put(update).delete(delete))
        .route("/api/v1/groups/{group}/progress", get(progress))
}

/// A subscription group as the API shows it (RocketMQ's `SubscriptionGroupConfig`, snake_case).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct GroupView {
    /// Name.
    pub group: String,
    /// Consumption allowed.
    pub consume_enable: bool,
    /// Broadcasting allowed.
    pub consume_broadcast_enable: bool,
    /// New consumers start at the minimum offset when the first message is still stored.
    pub consume_from_min_enable: bool,
    /// Queues of `%RETRY%group`.
    pub retry_queue_nums: i32,
    /// Reconsumes before the DLQ.
    pub retry_max_times: i32,
    /// Broker the group consumes from.
    pub broker_id: i64,
    /// Broker suggested to a slow consumer.
    pub which_broker_when_consume_slowly: i64,
    /// NOTIFY_CONSUMER_IDS_CHANGED sent.
    pub notify_consumer_ids_changed_enable: bool,
}

impl From<&SubscriptionGroupConfig> for GroupView {
    fn from(c: &SubscriptionGroupConfig) -> Self {
        GroupView {
            group: c.group_name.clone(),
            consume_enable: c.consume_enable,
            consume_broadcast_enable: c.consume_broadcast_enable,
            consume_from_min_enable: c.consume_from_min_enable,
            retry_queue_nums: c.retry_queue_nums,
            retry_max_times: c.retry_max_times,
            broker_id: c.broker_id,
            which_broker_when_consume_slowly: c.which_broker_when_consume_slowly,
            notify_consumer_ids_changed_enable: c.notify_consumer_ids_changed_enable,
        }
    }
}

/// Body of POST (with `group`) and PUT. Absent fields take RocketMQ's defaults on create and keep
/// their value on update.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GroupBody {
    /// Name (POST).
    pub group: Option<String>,
    /// Consumption allowed.
    pub consume_enable: Option<bool>,
    /// Broadcasting allowed.
    pub consume_broadcast_enable: Option<bool>,
    /// Start at the minimum offset.
    pub consume_from_min_enable: Option<bool>,
    /// Retry queues.
    pub retry_queue_nums: Option<i32>,
    /// Reconsumes before the DLQ.
    pub retry_max_times: Option<i32>,
    /// Broker consumed from.
    pub broker_id: Option<i64>,
    /// Broker for slow consumers.
    pub which_broker_when_consume_slowly: Option<i64>,
    /// Notify consumers of membership changes.
    pub notify_consumer_ids_changed_enable: Option<bool>,
}

fn apply_body(mut c: SubscriptionGroupConfig, b: &GroupBody) -> ApiResult<SubscriptionGroupConfig> {
    c.consume_enable = b.consume_enable.unwrap_or(c.consume_enable);
    c.consume_broadcast_enable = b.consume_broadcast_enable.unwrap_or(c.consume_broadcast_enable);
    c.consume_from_min_enable = b.consume_from_min_enable.unwrap_or(c.consume_from_min_enable);
    c.retry_queue_nums = b.retry_queue_nums.unwrap_or(c.retry_queue_nums);
    c.retry_max_times = b.retry_max_times.unwrap_or(c.retry_max_times);
    c.broker_id = b.broker_id.unwrap_or(c.broker_id);
    c.which_broker_when_consume_slowly =
        b.which_broker_when_consume_slowly.unwrap_or(c.which_broker_when_consume_slowly);
    c.notify_consumer_ids_changed_enable =
        b.notify_consumer_ids_changed_enable.unwrap_or(c.notify_consumer_ids_changed_enable);
    if !(0..=TOPIC_QUEUE_NUMS_MAX_COUNT).contains(&c.retry_queue_nums) || c.retry_max_times < 0 {
        return Err(ApiError::invalid(format!(
            "retry_queue_nums must be within 0..={TOPIC_QUEUE_NUMS_MAX_COUNT} and retry_max_times not negative"
        )));
    }
    Ok(c)
}

/// A valid group name, else 400.
pub(crate) fn check_group_name(group: &str) -> ApiResult<()> {
    validate_group(group).map_err(|e| ApiError::invalid(e.to_string()))
}

/// A group being created: its `%RETRY%` topic must be storable too (a group that already exists is
/// still read, updated and deleted under [`check_group_name`]).
fn check_new_group_name(group: &str) -> ApiResult<()> {
    validate_consumer_group(group).map_err(|e| ApiError::invalid(e.to_string()))
}

fn group_config(ctx: &HttpHandles, group: &str) -> ApiResult<SubscriptionGroupConfig> {
    ctx.store
        .metadata()
        .groups
        .get(group)
        .cloned()
        .ok_or_else(|| ApiError::not_found(code::GROUP_NOT_FOUND, format!("subscription group {group} does not exist")))
}

/// Whether `group` is known here: a subscription group, or offsets committed under its name.
pub(crate) fn group_known(ctx: &HttpHandles, group: &str) -> bool {
    let meta = ctx.store.metadata();
    meta.groups.get(group).is_some() || !meta.offsets.topics_of_group(group).is_empty()
}

async fn list(State(ctx): State<Shared>) -> Json<serde_json::Value> {
    let groups: Vec<GroupView> = ctx.store.metadata().groups.iter().map(GroupView::from).collect();
    Json(serde_json::json!({ "groups": groups }))
}

async fn get_one(State(ctx): State<Shared>, ApiPath(group): ApiPath<String>) -> ApiResult<Json<GroupView>> {
    check_group_name(&group)?;
    Ok(Json(GroupView::from(&group_config(&ctx, &group)?)))
}

async fn create(
    State(ctx): State<Shared>,
    ApiJson(body): ApiJson<GroupBody>,
) -> ApiResult<(StatusCode, Json<GroupView>)> {
    let group = body.group.clone().ok_or_else(|| ApiError::invalid("group is required"))?;
    check_new_group_name(&group)?;
    let config = apply_body(SubscriptionGroupConfig::new(&group), &body)?;
    ensure_writable(&ctx)?;
    if ctx.store.metadata().groups.get(&group).is_some() {
        return Err(ApiError::new(StatusCode::CONFLICT, code::ALREADY_EXISTS, format!("group {group} exists")));
    }
    let view = GroupView::from(&config);
    replicate(&ctx, BrokerCommand::SubscriptionGroupUpsert { proposed_at_ms: now_ms() as i64, config }).await?;
    Ok((StatusCode::CREATED, Json(view)))
}

async fn update(
    State(ctx): State<Shared>,
    ApiPath(group): ApiPath<String>,
    ApiJson(body): ApiJson<GroupBody>,
) -> ApiResult<Json<GroupView>> {
    check_group_name(&group)?;
    if body.group.as_deref().is_some_and(|g| g != group) {
        return Err(ApiError::invalid("the body's group differs from the path's"));
    }
    ensure_writable(&ctx)?;
    let config = apply_body(group_config(&ctx, &group)?, &body)?;
    let view = GroupView::from(&config);
    replicate(&ctx, BrokerCommand::SubscriptionGroupUpsert { proposed_at_ms: now_ms() as i64, config }).await?;
    Ok(Json(view))
}

/// Query of the group delete.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DeleteQuery {
    /// Also drop the group's committed offsets (`mqadmin deleteSubGroup -r true`); default false.
    pub remove_offset: Option<bool>,
}

async fn delete(
    State(ctx): State<Shared>,
    ApiPath(group): ApiPath<String>,
    ApiQuery(query): ApiQuery<DeleteQuery>,
) -> ApiResult<Json<serde_json::Value>> {
    check_group_name(&group)?;
    ensure_writable(&ctx)?;
    group_config(&ctx, &group)?;
    replicate(&ctx, BrokerCommand::SubscriptionGroupDelete { proposed_at_ms: now_ms() as i64, group: group.clone() })
        .await?;
    let remove_offset = query.remove_offset.unwrap_or(false);
    if remove_offset {
        replicate(&ctx, BrokerCommand::GroupOffsetsDelete { proposed_at_ms: now_ms() as i64, group: group.clone() })
            .await?;
    }
    Ok(Json(serde_json::json!({ "deleted": group, "offsets_removed": remove_offset })))
}

/// One queue of a group's progress.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ProgressRow {
    /// Topic.
    pub topic: String,
    /// Queue.
    pub queue_id: i32,
    /// The queue's max offset (next to be written).
    pub broker_offset: u64,
    /// The group's committed offset (`null`: none committed).
    pub consumer_offset: Option<i64>,
    /// Messages not consumed yet: broker offset − committed offset (− min offset when none).
    pub lag: u64,
    /// POP deliveries of this queue in flight (handed out, neither acked nor revived).
    pub pop_in_flight: usize,
}

/// `GET /api/v1/groups/{group}/progress`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Progress {
    /// The group.
    pub group: String,
    /// Rows by topic and queue.
    pub queues: Vec<ProgressRow>,
    /// Sum of broker offsets.
    pub broker_offset_total: u64,
    /// Sum of committed offsets.
    pub consumer_offset_total: u64,
    /// Sum of lags (`Consume Diff Total`).
    pub lag_total: u64,
    /// POP deliveries of the group in flight, over every queue (its POP retry topics included).
    pub pop_in_flight_total: usize,
    /// Rows were cut at the limit.
    pub truncated: bool,
}

/// A topic's committed offsets of a group, and the queues to show.
type QueuesOfTopic = (BTreeMap<i32, i64>, BTreeSet<i32>);

/// A group's progress on every topic it has offsets for (its committed queues and the topic's read
/// queues), read from applied state: any replica answers.
pub fn progress_of(ctx: &HttpHandles, group: &str) -> Progress {
    // Offsets and topic configs first, then the queues: never two store locks at once.
    let (wanted, in_flight): (BTreeMap<String, QueuesOfTopic>, BTreeMap<(String, i32), usize>) = {
        let meta = ctx.store.metadata();
        let in_flight = meta
            .pop
            .queues()
            .filter(|(q, s)| q.group == group && !s.in_flight.is_empty())
            .map(|(q, s)| ((q.topic.clone(), q.queue_id), s.in_flight.len()))
            .collect();
        let wanted = meta
            .offsets
            .topics_of_group(group)
            .into_iter()
            .map(|topic| {
                let committed = meta.offsets.query_all(topic, group).cloned().unwrap_or_default();
                let read = meta.topics.get(topic).map_or(0, |c| c.read_queue_nums.max(0));
                let mut queues: BTreeSet<i32> = committed.keys().copied().collect();
                queues.extend((0..read).take(ADMIN_PROGRESS_QUEUES_MAX_COUNT));
                (topic.to_owned(), (committed, queues))
            })
            .collect();
        (wanted, in_flight)
    };
    let cq = ctx.store.consume_queues();
    let mut p = Progress {
        group: group.to_owned(),
        queues: Vec::new(),
        broker_offset_total: 0,
        consumer_offset_total: 0,
        lag_total: 0,
        pop_in_flight_total: in_flight.values().sum(),
        truncated: false,
    };
    'topics: for (topic, (committed, queues)) in wanted {
        for queue_id in queues {
            if p.queues.len() >= ADMIN_PROGRESS_QUEUES_MAX_COUNT {
                p.truncated = true;
                break 'topics;
            }
            let (min, max) = cq.offsets(&topic, queue_id);
            let consumer_offset = committed.get(&queue_id).copied();
            let from = consumer_offset.map_or(min, |o| u64::try_from(o).unwrap_or(0));
            let lag = max.saturating_sub(from);
            p.broker_offset_total = p.broker_offset_total.saturating_add(max);
            p.consumer_offset_total =
                p.consumer_offset_total.saturating_add(consumer_offset.map_or(0, |o| u64::try_from(o).unwrap_or(0)));
            p.lag_total = p.lag_total.saturating_add(lag);
            let pop_in_flight = in_flight.get(&(topic.clone(), queue_id)).copied().unwrap_or(0);
            p.queues.push(ProgressRow {
                topic: topic.clone(),
                queue_id,
                broker_offset: max,
                consumer_offset,
                lag,
                pop_in_flight,
            });
        }
    }
    p
}

async fn progress(State(ctx): State<Shared>, ApiPath(group): ApiPath<String>) -> ApiResult<Json<Progress>> {
    check_group_name(&group)?;
    if !group_known(&ctx, &group) {
        return Err(ApiError::not_found(code::GROUP_NOT_FOUND, format!("group {group} has no config and no offsets")));
    }
    Ok(Json(progress_of(&ctx, &group)))
}
