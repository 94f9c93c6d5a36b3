//! Administration requests (RocketMQ's `AdminBrokerProcessor`, the subset a Raft group serves):
//! topics and consumer groups (replicated through Raft, changed only by the leader), consumer offsets
//! and queue offsets (read on any replica).
//!
//! | code | what |
//! |---|---|
//! | UPDATE_AND_CREATE_TOPIC (17), DELETE_TOPIC_IN_BROKER (215) | replicated topic upsert / delete |
//! | GET_ALL_TOPIC_CONFIG (21) | `TopicConfigSerializeWrapper` |
//! | UPDATE_AND_CREATE_SUBSCRIPTIONGROUP (200), DELETE_SUBSCRIPTIONGROUP (207) | replicated group upsert / delete |
//! | GET_ALL_SUBSCRIPTIONGROUP_CONFIG (201) | `SubscriptionGroupWrapper` |
//! | GET_ALL_CONSUMER_OFFSET (43) | `ConsumerOffsetSerializeWrapper` |
//! | GET_MAX_OFFSET (30), GET_MIN_OFFSET (31) | ConsumeQueue bounds |
//! | SEARCH_OFFSET_BY_TIMESTAMP (29) | first offset stored at or after a time (binary search) |

use raftmq_common::message::record::DecodeOptions;
use raftmq_common::message::record::parse_record;
use raftmq_common::message::validate::is_system_topic;
use raftmq_common::message::validate::validate_group;
use raftmq_common::message::validate::validate_topic;
use raftmq_common::protocol::RemotingCommand;
use raftmq_common::protocol::ResponseCode;
use raftmq_common::protocol::body::JsonBody;
use raftmq_common::protocol::body::subscription_group::SubscriptionGroupConfig;
use raftmq_common::protocol::body::topic::TopicConfig;
use raftmq_common::protocol::body::topic::TopicFilterType;
use raftmq_common::protocol::header::admin::CreateTopicRequestHeader;
use raftmq_common::protocol::header::admin::DeleteSubscriptionGroupRequestHeader;
use raftmq_common::protocol::header::admin::DeleteTopicRequestHeader;
use raftmq_common::protocol::header::offset::GetMaxOffsetRequestHeader;
use raftmq_common::protocol::header::offset::GetMaxOffsetResponseHeader;
use raftmq_common::protocol::header::offset::GetMinOffsetRequestHeader;
use raftmq_common::protocol::header::offset::GetMinOffsetResponseHeader;
use raftmq_common::protocol::header::offset::SearchOffsetRequestHeader;
use raftmq_common::protocol::header::offset::SearchOffsetResponseHeader;

use crate::entry::BrokerCommand;
use crate::processor::BrokerContext;
use crate::pull::CommitLogReader;
use crate::store::now_ms;

fn refuse(code: ResponseCode, remark: impl Into<String>) -> RemotingCommand {
    RemotingCommand::response(code, Some(remark.into()))
}

fn header<H: raftmq_common::protocol::header::CommandHeader>(request: &RemotingCommand) -> Result<H, RemotingCommand> {
    request
        .decode_header()
        .map_err(|e| refuse(ResponseCode::SystemError, format!("the request header is invalid: {e}")))
}

fn json<B: JsonBody>(value: &B) -> Result<RemotingCommand, RemotingCommand> {
    let body = value.encode().map_err(|e| refuse(ResponseCode::SystemError, e.to_string()))?;
    Ok(RemotingCommand::success().with_body(body))
}

async fn replicate(ctx: &BrokerContext, command: BrokerCommand) -> Result<RemotingCommand, RemotingCommand> {
    ctx.replica.propose(&command).await.map_err(|e| e.to_response(&ctx.config.broker_name))?;
    ctx.register_now.notify_one();
    Ok(RemotingCommand::success())
}

/// UPDATE_AND_CREATE_TOPIC.
pub async fn update_and_create_topic(
    ctx: &BrokerContext,
    request: &RemotingCommand,
) -> Result<RemotingCommand, RemotingCommand> {
    let h: CreateTopicRequestHeader = header(request)?;
    validate_topic(&h.topic).map_err(|e| refuse(ResponseCode::SystemError, e.to_string()))?;
    if is_system_topic(&h.topic) {
        return Err(refuse(
            ResponseCode::SystemError,
            format!("The topic[{}] is conflict with system topic.", h.topic),
        ));
    }
    if h.read_queue_nums <= 0 || h.write_queue_nums <= 0 || !(0..=15).contains(&h.perm) {
        return Err(refuse(ResponseCode::SystemError, "queue numbers must be positive and perm within 0..=15"));
    }
    let topic_filter_type = TopicFilterType::parse(&h.topic_filter_type).unwrap_or_default();
    let config = TopicConfig {
        topic_name: h.topic,
        read_queue_nums: h.read_queue_nums,
        write_queue_nums: h.write_queue_nums,
        perm: h.perm,
        topic_filter_type,
        topic_sys_flag: h.topic_sys_flag.unwrap_or(0),
        order: h.order,
    };
    replicate(ctx, BrokerCommand::TopicUpsert { proposed_at_ms: now_ms() as i64, config }).await
}

/// DELETE_TOPIC_IN_BROKER.
pub async fn delete_topic(ctx: &BrokerContext, request: &RemotingCommand) -> Result<RemotingCommand, RemotingCommand> {
    let h: DeleteTopicRequestHeader = header(request)?;
    validate_topic(&h.topic).map_err(|e| refuse(ResponseCode::SystemError, e.to_string()))?;
    if is_system_topic(&h.topic) {
        return Err(refuse(
            ResponseCode::SystemError,
            format!("The topic[{}] is conflict with system topic.", h.topic),
        ));
    }
    replicate(ctx, BrokerCommand::TopicDelete { proposed_at_ms: now_ms() as i64, topic: h.topic }).await
}

/// GET_ALL_TOPIC_CONFIG.
pub fn all_topic_config(ctx: &BrokerContext) -> Result<RemotingCommand, RemotingCommand> {
    let wrapper = ctx.store.metadata().topics.to_wrapper();
    json(&wrapper)
}

/// UPDATE_AND_CREATE_SUBSCRIPTIONGROUP (body: `SubscriptionGroupConfig`).
pub async fn update_and_create_group(
    ctx: &BrokerContext,
    request: &RemotingCommand,
) -> Result<RemotingCommand, RemotingCommand> {
    let config =
        SubscriptionGroupConfig::decode(&request.body).map_err(|e| refuse(ResponseCode::SystemError, e.to_string()))?;
    validate_group(&config.group_name).map_err(|e| refuse(ResponseCode::SystemError, e.to_string()))?;
    replicate(ctx, BrokerCommand::SubscriptionGroupUpsert { proposed_at_ms: now_ms() as i64, config }).await
}

/// DELETE_SUBSCRIPTIONGROUP.
pub async fn delete_group(ctx: &BrokerContext, request: &RemotingCommand) -> Result<RemotingCommand, RemotingCommand> {
    let h: DeleteSubscriptionGroupRequestHeader = header(request)?;
    validate_group(&h.group_name).map_err(|e| refuse(ResponseCode::SystemError, e.to_string()))?;
    replicate(ctx, BrokerCommand::SubscriptionGroupDelete { proposed_at_ms: now_ms() as i64, group: h.group_name })
        .await
}

/// GET_ALL_SUBSCRIPTIONGROUP_CONFIG.
pub fn all_group_config(ctx: &BrokerContext) -> Result<RemotingCommand, RemotingCommand> {
    let wrapper = ctx.store.metadata().groups.to_wrapper();
    json(&wrapper)
}

/// GET_ALL_CONSUMER_OFFSET.
pub fn all_consumer_offset(ctx: &BrokerContext) -> Result<RemotingCommand, RemotingCommand> {
    let wrapper = ctx.store.metadata().offsets.to_wrapper();
    json(&wrapper)
}

/// GET_MAX_OFFSET.
pub fn max_offset(ctx: &BrokerContext, request: &RemotingCommand) -> Result<RemotingCommand, RemotingCommand> {
    let h: GetMaxOffsetRequestHeader = header(request)?;
    let (_, max) = ctx.store.queue_offsets(&h.topic, h.queue_id);
    let offset = i64::try_from(max).unwrap_or(i64::MAX);
    Ok(RemotingCommand::success().with_header(&GetMaxOffsetResponseHeader { offset }))
}

/// GET_MIN_OFFSET.
pub fn min_offset(ctx: &BrokerContext, request: &RemotingCommand) -> Result<RemotingCommand, RemotingCommand> {
    let h: GetMinOffsetRequestHeader = header(request)?;
    let (min, _) = ctx.store.queue_offsets(&h.topic, h.queue_id);
    let offset = i64::try_from(min).unwrap_or(i64::MAX);
    Ok(RemotingCommand::success().with_header(&GetMinOffsetResponseHeader { offset }))
}

/// SEARCH_OFFSET_BY_TIMESTAMP: the first offset whose store time is at or after `timestamp` (max
/// offset when none is), by binary search over the queue (store times grow with the offset).
pub fn search_offset(ctx: &BrokerContext, request: &RemotingCommand) -> Result<RemotingCommand, RemotingCommand> {
    let h: SearchOffsetRequestHeader = header(request)?;
    let queues = ctx.store.consume_queues();
    let log = ctx.store.commit_log();
    let (mut lo, mut hi) = queues.offsets(&h.topic, h.queue_id);
    let store_time = |offset: u64| -> Option<i64> {
        let unit = queues.get(&h.topic, h.queue_id)?.unit_at(offset)?;
        let bytes = log.read(unit.phy_offset, unit.size)?;
        parse_record(&bytes, DecodeOptions::default()).ok().map(|r| r.store_timestamp)
    };
    while lo < hi {
        let mid = lo + (hi - lo) / 2;
        match store_time(mid) {
            Some(t) if t < h.timestamp => lo = mid + 1,
            _ => hi = mid,
        }
    }
    let offset = i64::try_from(lo).unwrap_or(i64::MAX);
    Ok(RemotingCommand::success().with_header(&SearchOffsetResponseHeader { offset }))
}
