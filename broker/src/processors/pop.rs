//! The POP request codes of RocketMQ 5 (POP_MESSAGE 200050, ACK_MESSAGE 200051,
//! CHANGE_MESSAGE_INVISIBLETIME 200053): headers checked and answered as Java's broker answers
//! them, the work done by [`crate::services::pop::PopService`] on the ready leader. A follower
//! refuses with SERVICE_NOT_AVAILABLE naming the leader (the gRPC bridge relays there).
//!
//! Refusals: TOPIC_NOT_EXIST, SUBSCRIPTION_GROUP_NOT_EXIST, NO_PERMISSION, INVALID_PARAMETER
//! (batch size, invisible time, queue id), SUBSCRIPTION_PARSE_FAILED; a stale receipt is
//! NO_MESSAGE with a remark starting "stale receipt handle"; a pop that found nothing in its poll
//! time is POLLING_TIMEOUT.

use std::sync::Arc;

use bytes::BytesMut;
use raftmq_common::limits::POP_BATCH_MAX_COUNT;
use raftmq_common::limits::POP_INVISIBLE_MAX_MS;
use raftmq_common::limits::POP_INVISIBLE_MIN_MS;
use raftmq_common::limits::POP_POLL_TIME_MAX_MS;
use raftmq_common::message::validate::pop_retry_topic;
use raftmq_common::message::validate::validate_consumer_group;
use raftmq_common::message::validate::validate_topic;
use raftmq_common::protocol::RemotingCommand;
use raftmq_common::protocol::ResponseCode;
use raftmq_common::protocol::body::topic::perm;
use raftmq_common::protocol::header::pop::AckMessageRequestHeader;
use raftmq_common::protocol::header::pop::ChangeInvisibleTimeRequestHeader;
use raftmq_common::protocol::header::pop::ChangeInvisibleTimeResponseHeader;
use raftmq_common::protocol::header::pop::ExtraInfo;
use raftmq_common::protocol::header::pop::PopMessageRequestHeader;
use raftmq_common::protocol::header::pop::PopMessageResponseHeader;
use raftmq_common::protocol::header::pop::PopTopicType;
use raftmq_common::protocol::header::pop::offset_infos;

use crate::config::broker_config::BrokerConfig;
use crate::config::live_config::LiveConfig;
use crate::processors::pull::is_sql92;
use crate::processors::pull::sql_filter;
use crate::processors::refusal::header;
use crate::processors::refusal::refuse;
use crate::services::pop::PopRequest;
use crate::services::pop::PopService;
use crate::services::replica::Replica;
use crate::state::entry::BrokerCommand;
use crate::state::pop::PopQueue;
use crate::state::pop::Receipt;
use crate::state::pull::MessageFilter;
use crate::state::pull::SqlFilterCache;
use crate::state::pull::build_subscription;
use crate::state::store::MessageStore;
use crate::state::store::now_ms;
use crate::state::subscription_group::GroupLookup;

/// What the POP processors use.
#[derive(Debug)]
pub struct PopProcessorHandles {
    /// The config the broker booted with (its name and address in refusals).
    pub config: Arc<BrokerConfig>,
    /// The runtime keys (permission, group auto-creation, property filters).
    pub live: Arc<LiveConfig>,
    /// Leader view.
    pub replica: Arc<Replica>,
    /// Topics and groups.
    pub store: Arc<MessageStore>,
    /// The leader side of POP.
    pub service: Arc<PopService>,
    /// SQL92 subscriptions compiled once.
    pub sql_filters: Arc<SqlFilterCache>,
}

/// Java's ACK and change answer for a receipt no longer in flight.
fn stale() -> RemotingCommand {
    refuse(ResponseCode::NoMessage, "stale receipt handle: the message was acked, redelivered or renewed since")
}

fn check_invisible(invisible_ms: i64) -> Result<u64, RemotingCommand> {
    if !(POP_INVISIBLE_MIN_MS..=POP_INVISIBLE_MAX_MS).contains(&invisible_ms) {
        return Err(refuse(
            ResponseCode::InvalidParameter,
            format!("invisibleTime {invisible_ms} ms is outside {POP_INVISIBLE_MIN_MS}..={POP_INVISIBLE_MAX_MS} ms"),
        ));
    }
    Ok(invisible_ms as u64)
}

/// The group's retryMaxTimes, creating the group when auto-creation allows (replicated).
async fn find_group(ctx: &PopProcessorHandles, group: &str) -> Result<(u32, bool), RemotingCommand> {
    validate_consumer_group(group).map_err(|e| refuse(e.response_code(), e.to_string()))?;
    let create =
        match ctx.store.metadata().groups.find_or_create(group, ctx.live.read(|c| c.auto_create_subscription_group)) {
            GroupLookup::Found(config) if !config.consume_enable => {
                return Err(refuse(ResponseCode::NoPermission, format!("subscription group no permission, {group}")));
            }
            GroupLookup::Found(config) => {
                return Ok((config.retry_max_times.max(1) as u32, config.consume_message_orderly));
            }
            GroupLookup::NotExist => {
                return Err(refuse(
                    ResponseCode::SubscriptionGroupNotExist,
                    format!("subscription group [{group}] does not exist"),
                ));
            }
            GroupLookup::Create(config) => config,
        };
    let found = (create.retry_max_times.max(1) as u32, create.consume_message_orderly);
    let command = BrokerCommand::SubscriptionGroupUpsert { proposed_at_ms: now_ms() as i64, config: create };
    ctx.replica.propose(&command).await.map_err(|e| e.to_response(&ctx.config.broker_name))?;
    Ok(found)
}

fn filter_of(ctx: &PopProcessorHandles, h: &PopMessageRequestHeader) -> Result<MessageFilter, RemotingCommand> {
    let exp = h.exp.as_deref().unwrap_or("*");
    if is_sql92(h.exp_type.as_deref()) {
        return sql_filter(&ctx.live, &ctx.sql_filters, exp);
    }
    let sub = build_subscription(&h.topic, exp).map_err(|e| {
        refuse(ResponseCode::SubscriptionParseFailed, format!("parse the consumer's subscription failed: {e}"))
    })?;
    Ok(MessageFilter::from_subscription(&sub))
}

/// Handles POP_MESSAGE (may wait up to its pollTime).
pub async fn pop_message(ctx: &PopProcessorHandles, request: &RemotingCommand) -> RemotingCommand {
    match pop(ctx, request).await {
        Ok(r) | Err(r) => r,
    }
}

async fn pop(ctx: &PopProcessorHandles, request: &RemotingCommand) -> Result<RemotingCommand, RemotingCommand> {
    let h: PopMessageRequestHeader = header(request)?;
    let broker_name = &ctx.config.broker_name;
    ctx.replica.check_writable().map_err(|e| e.to_response(broker_name))?;
    if !perm::is_readable(ctx.live.read(|c| c.broker_permission)) {
        return Err(refuse(
            ResponseCode::NoPermission,
            format!("the broker[{}] pop message is forbidden", ctx.config.broker_addr()),
        ));
    }
    if h.max_msg_nums < 1 || h.max_msg_nums as usize > POP_BATCH_MAX_COUNT {
        return Err(refuse(
            ResponseCode::InvalidParameter,
            format!("the broker[{}] pop message's num must be 1 to {POP_BATCH_MAX_COUNT}", ctx.config.broker_addr()),
        ));
    }
    let invisible_ms = check_invisible(h.invisible_time)?;
    validate_topic(&h.topic).map_err(|e| refuse(e.response_code(), e.to_string()))?;
    let read_queue_nums = match ctx.store.metadata().topics.get(&h.topic) {
        None => {
            return Err(refuse(
                ResponseCode::TopicNotExist,
                format!("topic[{}] not exist, apply first please!", h.topic),
            ));
        }
        Some(c) if !perm::is_readable(c.perm) => {
            return Err(refuse(
                ResponseCode::NoPermission,
                format!("the topic[{}] peeking message is forbidden", h.topic),
            ));
        }
        Some(c) => c.read_queue_nums,
    };
    if h.queue_id >= read_queue_nums || h.queue_id < -1 {
        return Err(refuse(
            ResponseCode::InvalidParameter,
            format!(
                "queueId[{}] is illegal, topic:[{}] topicConfig.readQueueNums:[{read_queue_nums}]",
                h.queue_id, h.topic
            ),
        ));
    }
    // The POP retry topic is named after group and topic: it must be storable too.
    raftmq_common::message::validate::validate_stored_topic(&pop_retry_topic(&h.consumer_group, &h.topic))
        .map_err(|e| refuse(ResponseCode::InvalidParameter, format!("the group's POP retry topic: {e}")))?;
    let (retry_max_times, _) = find_group(ctx, &h.consumer_group).await?;
    let filter = filter_of(ctx, &h)?;
    let pop_request = PopRequest {
        group: h.consumer_group.clone(),
        topic: h.topic.clone(),
        queue_id: (h.queue_id >= 0).then_some(h.queue_id),
        max_count: h.max_msg_nums as usize,
        invisible_ms,
        poll_ms: h.poll_time.clamp(0, POP_POLL_TIME_MAX_MS) as u64,
        init_at_max: h.init_mode == 1,
        filter,
        fifo: h.order == Some(true),
        retry_max_times,
    };
    let popped = ctx.service.pop(&pop_request).await.map_err(|e| e.to_response(broker_name))?;
    let (start_offset_info, msg_offset_info, order_count_info) = offset_infos(&popped.queues);
    let response_header = PopMessageResponseHeader {
        pop_time: popped.epoch_ms as i64,
        invisible_time: invisible_ms as i64,
        revive_qid: 0,
        rest_num: popped.rest_count,
        start_offset_info: Some(start_offset_info),
        msg_offset_info: Some(msg_offset_info),
        order_count_info,
    };
    if popped.records.is_empty() {
        return Ok(RemotingCommand::response(ResponseCode::PollingTimeout, Some("POLLING_TIMEOUT".into()))
            .with_header(&response_header));
    }
    let mut body = BytesMut::with_capacity(popped.records.iter().map(|r| r.len()).sum());
    for record in &popped.records {
        body.extend_from_slice(record);
    }
    Ok(RemotingCommand::response(ResponseCode::Success, Some("FOUND".into()))
        .with_header(&response_header)
        .with_body(body.freeze()))
}

/// The receipt an ACK or change names, checked against this broker group.
fn receipt_of(
    ctx: &PopProcessorHandles,
    group: &str,
    topic: &str,
    queue_id: i32,
    offset: i64,
    extra_info: &str,
) -> Result<Receipt, RemotingCommand> {
    validate_consumer_group(group).map_err(|e| refuse(e.response_code(), e.to_string()))?;
    validate_topic(topic).map_err(|e| refuse(e.response_code(), e.to_string()))?;
    let extra = ExtraInfo::parse(extra_info).map_err(|e| refuse(ResponseCode::InvalidParameter, e.to_string()))?;
    if extra.broker_name != ctx.config.broker_name {
        return Err(refuse(
            ResponseCode::InvalidParameter,
            format!("the receipt handle was issued by broker {}, not {}", extra.broker_name, ctx.config.broker_name),
        ));
    }
    if queue_id < 0 || offset < 0 {
        return Err(refuse(ResponseCode::InvalidParameter, "queueId and offset must not be negative"));
    }
    let read_topic = match extra.topic_type {
        PopTopicType::Normal => topic.to_owned(),
        PopTopicType::Retry => pop_retry_topic(group, topic),
    };
    Ok(Receipt {
        queue: PopQueue { group: group.to_owned(), topic: read_topic, queue_id },
        offset,
        epoch_ms: extra.pop_time as u64,
    })
}

/// Handles ACK_MESSAGE.
pub async fn ack_message(ctx: &PopProcessorHandles, request: &RemotingCommand) -> RemotingCommand {
    let result = async {
        let h: AckMessageRequestHeader = header(request)?;
        let receipt = receipt_of(ctx, &h.consumer_group, &h.topic, h.queue_id, h.offset, &h.extra_info)?;
        match ctx.service.ack(receipt).await {
            Ok(true) => Ok(RemotingCommand::success()),
            Ok(false) => Err(stale()),
            Err(e) => Err(e.to_response(&ctx.config.broker_name)),
        }
    };
    match result.await {
        Ok(r) | Err(r) => r,
    }
}

/// Handles CHANGE_MESSAGE_INVISIBLETIME.
pub async fn change_invisible_time(ctx: &PopProcessorHandles, request: &RemotingCommand) -> RemotingCommand {
    let result = async {
        let h: ChangeInvisibleTimeRequestHeader = header(request)?;
        let invisible_ms = check_invisible(h.invisible_time)?;
        let receipt = receipt_of(ctx, &h.consumer_group, &h.topic, h.queue_id, h.offset, &h.extra_info)?;
        match ctx.service.change_invisible(receipt, invisible_ms).await {
            Ok(Some(epoch_ms)) => Ok(RemotingCommand::success().with_header(&ChangeInvisibleTimeResponseHeader {
                pop_time: epoch_ms as i64,
                invisible_time: invisible_ms as i64,
                revive_qid: 0,
            })),
            Ok(None) => Err(stale()),
            Err(e) => Err(e.to_response(&ctx.config.broker_name)),
        }
    };
    match result.await {
        Ok(r) | Err(r) => r,
    }
}
