//! Consumer send-back: CONSUMER_SEND_MSG_BACK (36) and the retry/DLQ rule of sends to `%RETRY%`
//! topics (RocketMQ 4.9's `SendMessageProcessor.asyncConsumerSendMsgBack` / `handleRetryAndDLQ`).
//!
//! ```text
//! CONSUMER_SEND_MSG_BACK(offset, group, delayLevel, maxReconsumeTimes)
//!   ─▶ group (found | auto-created, replicated) ─▶ broker writable ─▶ retryQueueNums > 0 (else SUCCESS)
//!   ─▶ %RETRY%<group> (found | created: retryQueueNums queues, RW, replicated) ─▶ leader writable
//!   ─▶ original record read at `offset` from the committed CommitLog
//!   ─▶ decide_send_back(reconsumeTimes, max, delayLevel)
//!        DeadLetter ─▶ %DLQ%<group> (1 queue, RW), DELAY=0
//!        Retry{n}   ─▶ %RETRY%<group>, DELAY=n ─▶ schedule::redirect_delayed ─▶ SCHEDULE_TOPIC_XXXX n−1
//!   ─▶ RETRY_TOPIC (kept if set), ORIGIN_MESSAGE_ID (kept if set), reconsumeTimes + 1
//!   ─▶ group commit ─▶ SUCCESS once committed and applied
//! SEND to %RETRY%<group> with reconsumeTimes ≥ maxReconsumeTimes ─▶ the send goes to %DLQ%<group>
//! ```
//!
//! Invariants: every refusal happens before the message is proposed; topic and group creation are
//! replicated commands proposed by the leader (so every replica agrees on what exists); the decision
//! itself ([`decide_send_back`], [`build_send_back_message`]) is pure.
//!
//! The DLQ topic is created read-write as 4.9.x does (older 4.x created it write-only), so its
//! messages can be read back for inspection or resending.

use std::net::SocketAddr;

use bytes::BytesMut;
use raftmq_common::limits::TOPIC_QUEUE_NUMS_MAX_COUNT;
use raftmq_common::message::MessageExt;
use raftmq_common::message::properties;
use raftmq_common::message::record::DecodeOptions;
use raftmq_common::message::record::decode_record_bytes;
use raftmq_common::message::record::encode_record_into;
use raftmq_common::message::validate::dlq_topic;
use raftmq_common::message::validate::group_of_retry_topic;
use raftmq_common::message::validate::retry_topic;
use raftmq_common::message::validate::validate_consumer_group;
use raftmq_common::protocol::RemotingCommand;
use raftmq_common::protocol::ResponseCode;
use raftmq_common::protocol::body::subscription_group::SubscriptionGroupConfig;
use raftmq_common::protocol::body::topic::TopicConfig;
use raftmq_common::protocol::body::topic::perm;
use raftmq_common::protocol::header::client::ConsumerSendMsgBackRequestHeader;
use raftmq_common::protocol::header::send::SendMessageRequestHeader;

use crate::context::BrokerContext;
use crate::services::group_commit::RecordSlot;
use crate::services::group_commit::SendRequest;
use crate::services::schedule::redirect_delayed;
use crate::services::topic_create;
use crate::state::commit_log::record_at;
use crate::state::entry::BrokerCommand;
use crate::state::queue_offset::has_queue_offset;
use crate::state::store::now_ms;
use crate::state::subscription_group::GroupLookup;

/// Queues of a `%DLQ%` topic (`MixAll.DLQ_NUMS_PER_GROUP`).
pub const DLQ_QUEUE_NUM_COUNT: i32 = 1;
/// The delay level of a retry when the consumer leaves the choice to the broker: `3 + reconsumeTimes`.
pub const RETRY_DELAY_LEVEL_BASE: i32 = 3;
/// `TopicSysFlag.buildSysFlag(false, true)`: the topic sysFlag of a unit-mode retry topic.
const TOPIC_SYS_FLAG_UNIT_SUB: i32 = 2;

fn refuse(code: ResponseCode, remark: impl Into<String>) -> RemotingCommand {
    RemotingCommand::response(code, Some(remark.into()))
}

/// Where a failed message goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SendBackTarget {
    /// `%RETRY%<group>` after delay level `delay_level`.
    Retry {
        /// The delay level (≥ 1).
        delay_level: i32,
    },
    /// `%DLQ%<group>`: retried enough, or the consumer asked for it (negative delay level).
    DeadLetter,
}

/// The retry-or-DLQ rule: a message already redelivered `max_reconsume_times` times, or sent back with
/// a negative delay level, is dead; otherwise it is retried at `delay_level`, or at `3 + reconsumeTimes`
/// when the consumer sent 0.
pub fn decide_send_back(reconsume_times: i32, max_reconsume_times: i32, delay_level: i32) -> SendBackTarget {
    if reconsume_times >= max_reconsume_times || delay_level < 0 {
        return SendBackTarget::DeadLetter;
    }
    let delay_level =
        if delay_level == 0 { RETRY_DELAY_LEVEL_BASE.saturating_add(reconsume_times) } else { delay_level };
    SendBackTarget::Retry { delay_level }
}

/// The message a send-back stores, before delay redirection: the original's body, flag, sysFlag,
/// born time and host, and properties, plus `RETRY_TOPIC` (the original topic, unless already set),
/// `ORIGIN_MESSAGE_ID` (the original's offsetMsgId, unless already set), `WAIT=false`, `DELAY`, and
/// reconsumeTimes + 1.
pub fn build_send_back_message(
    original: &MessageExt,
    topic: &str,
    queue_id: i32,
    target: SendBackTarget,
    store_host: SocketAddr,
    store_timestamp: i64,
) -> MessageExt {
    let mut message = original.message.clone();
    message.topic = topic.into();
    if !message.properties.contains_key(properties::RETRY_TOPIC) {
        message.properties.insert(properties::RETRY_TOPIC, original.message.topic.as_str());
    }
    if message.properties.get(properties::ORIGIN_MESSAGE_ID).is_none_or(|id| id.trim().is_empty()) {
        message.properties.insert(properties::ORIGIN_MESSAGE_ID, original.offset_msg_id().to_string());
    }
    message.set_wait_store_msg_ok(false);
    // A retry waits its own level: the time of a timer message it was must not make it hop.
    message.properties.remove(properties::TIMER_OUT_MS);
    message.set_delay_time_level(match target {
        SendBackTarget::Retry { delay_level } => delay_level,
        SendBackTarget::DeadLetter => 0,
    });
    MessageExt {
        message,
        queue_id,
        sys_flag: original.sys_flag,
        born_timestamp: original.born_timestamp,
        born_host: original.born_host,
        store_timestamp,
        store_host,
        reconsume_times: original.reconsume_times.saturating_add(1),
        ..MessageExt::default()
    }
}

/// `%RETRY%<group>` as `asyncConsumerSendMsgBack` creates it.
pub fn retry_topic_config(group: &str, queues: i32, unit_mode: bool) -> TopicConfig {
    // A group's retryQueueNums from an older log may be anything: a topic gets no more queues than
    // one an admin may create (each queue used is a directory and a disk reservation per replica).
    let queues = queues.clamp(0, TOPIC_QUEUE_NUMS_MAX_COUNT);
    TopicConfig {
        read_queue_nums: queues,
        write_queue_nums: queues,
        perm: perm::READ_WRITE,
        topic_sys_flag: if unit_mode { TOPIC_SYS_FLAG_UNIT_SUB } else { 0 },
        ..TopicConfig::new(retry_topic(group))
    }
}

/// `%DLQ%<group>` as 4.9's send-back creates it (one queue, read-write).
pub fn dlq_topic_config(group: &str) -> TopicConfig {
    TopicConfig {
        read_queue_nums: DLQ_QUEUE_NUM_COUNT,
        write_queue_nums: DLQ_QUEUE_NUM_COUNT,
        perm: perm::READ_WRITE,
        ..TopicConfig::new(dlq_topic(group))
    }
}

/// `createTopicInSendMessageBackMethod` ([`topic_create::ensure_topic`]) with this broker's handles.
pub(crate) async fn ensure_topic(ctx: &BrokerContext, config: TopicConfig) -> Result<TopicConfig, RemotingCommand> {
    topic_create::ensure_topic(&ctx.store, &ctx.replica, &ctx.config.broker_name, &ctx.register_now, config).await
}

/// `findSubscriptionGroupConfig`: the group, created (replicated) when auto-creation allows it.
async fn find_group(ctx: &BrokerContext, group: &str) -> Result<SubscriptionGroupConfig, RemotingCommand> {
    let create =
        match ctx.store.metadata().groups.find_or_create(group, ctx.live.read(|c| c.auto_create_subscription_group)) {
            GroupLookup::Found(config) => return Ok(config.clone()),
            GroupLookup::Create(config) => config,
            GroupLookup::NotExist => {
                return Err(refuse(
                    ResponseCode::SubscriptionGroupNotExist,
                    format!("subscription group not exist, {group}"),
                ));
            }
        };
    let command = BrokerCommand::SubscriptionGroupUpsert { proposed_at_ms: now_ms() as i64, config: create.clone() };
    ctx.replica.propose(&command).await.map_err(|e| e.to_response(&ctx.config.broker_name))?;
    Ok(create)
}

/// `handleRetryAndDLQ` of a send: for a send to `%RETRY%<group>` whose reconsumeTimes reached
/// maxReconsumeTimes (header, else the group's `retryMaxTimes`), the DLQ topic the message goes to
/// instead (created if needed). `None`: send as asked.
pub(crate) async fn dead_letter_of_retry_send(
    ctx: &BrokerContext,
    h: &SendMessageRequestHeader,
) -> Result<Option<TopicConfig>, RemotingCommand> {
    let Some(group) = group_of_retry_topic(&h.topic) else { return Ok(None) };
    let group_config = find_group(ctx, group).await?;
    let max = h.max_reconsume_times.unwrap_or(group_config.retry_max_times);
    let times = h.reconsume_times.unwrap_or(0);
    if decide_send_back(times, max, 0) != SendBackTarget::DeadLetter {
        return Ok(None);
    }
    tracing::debug!(group, times, max, "a retry send exceeded its reconsume times: to the DLQ");
    ensure_topic(ctx, dlq_topic_config(group)).await.map(Some)
}

/// Handles CONSUMER_SEND_MSG_BACK.
pub async fn consumer_send_back(ctx: &BrokerContext, request: &RemotingCommand) -> RemotingCommand {
    match send_back(ctx, request).await {
        Ok(response) | Err(response) => response,
    }
}

async fn send_back(ctx: &BrokerContext, request: &RemotingCommand) -> Result<RemotingCommand, RemotingCommand> {
    let h: ConsumerSendMsgBackRequestHeader = request
        .decode_header()
        .map_err(|e| refuse(ResponseCode::SystemError, format!("the send-back request header is invalid: {e}")))?;
    // The group names the %RETRY%/%DLQ% topics this may create (ConsumeQueue directories).
    validate_consumer_group(&h.group).map_err(|e| refuse(e.response_code(), e.to_string()))?;
    let broker_name = &ctx.config.broker_name;
    // Writes (group or topic creation included) need the ready leader; refuse before anything else
    // so a follower answers with the leader hint and the consumer retries there or falls back.
    ctx.replica.check_writable().map_err(|e| e.to_response(broker_name))?;
    if let Some(ratio) = ctx.store.disk_full() {
        return Err(refuse(ResponseCode::ServiceNotAvailable, crate::services::retention::disk_full_remark(ratio)));
    }
    // Read before anything is created, so a bad offset or a refused message leaves nothing behind.
    let original = look_message_by_offset(ctx, h.offset)?;
    // Under the plain ACL the request was allowed for its group and `originTopic`: the message it
    // names by offset must be one of theirs, or send-back would copy any topic into a retry topic
    // the caller may read.
    if ctx.acl.is_some() && !is_send_back_of(original.topic(), h.origin_topic.as_deref(), &h.group) {
        return Err(refuse(
            ResponseCode::NoPermission,
            format!("the message at offset {} is not of topic {:?} nor of group {}", h.offset, h.origin_topic, h.group),
        ));
    }
    let group = find_group(ctx, &h.group).await?;
    if !perm::is_writeable(ctx.live.read(|c| c.broker_permission)) {
        return Err(refuse(
            ResponseCode::NoPermission,
            format!("the broker[{}] sending message is forbidden", ctx.config.broker_addr()),
        ));
    }
    if group.retry_queue_nums <= 0 {
        // RocketMQ drops the message: the group asked for no retries.
        return Ok(RemotingCommand::success());
    }
    let store_timestamp = now_ms() as i64;
    let retry =
        ensure_topic(ctx, retry_topic_config(&h.group, group.retry_queue_nums, h.unit_mode == Some(true))).await?;
    if !perm::is_writeable(retry.perm) {
        return Err(refuse(
            ResponseCode::NoPermission,
            format!("the topic[{}] sending message is forbidden", retry.topic_name),
        ));
    }
    let max = h.max_reconsume_times.unwrap_or(group.retry_max_times);
    let target = decide_send_back(original.reconsume_times, max, h.delay_level);
    let (topic, queues) = match target {
        SendBackTarget::DeadLetter => {
            (ensure_topic(ctx, dlq_topic_config(&h.group)).await?.topic_name, DLQ_QUEUE_NUM_COUNT)
        }
        // The topic's own queues, not the group's retryQueueNums: a topic made earlier (by a
        // heartbeat, or clamped) may have fewer, and a unit past them no consumer would ever pull.
        SendBackTarget::Retry { .. } => (retry.topic_name, retry.write_queue_nums),
    };
    // Java picks a random queue; the store clock is random enough and keeps this deterministic to test.
    let queue_id = store_timestamp.rem_euclid(i64::from(queues.max(1))) as i32;
    let mut msg = build_send_back_message(&original, &topic, queue_id, target, ctx.store_host, store_timestamp);
    redirect_delayed(&mut msg, ctx.store.delay_levels_ms().len());
    let mut records = BytesMut::new();
    encode_record_into(&msg, &mut records).map_err(|e| refuse(ResponseCode::MessageIllegal, e.to_string()))?;
    let slot = RecordSlot {
        topic: msg.message.topic.clone(),
        queue_id: msg.queue_id,
        has_queue_offset: has_queue_offset(msg.sys_flag),
        at: 0,
    };
    ctx.store_records(SendRequest { records, slots: vec![slot] }).await.map_err(|e| e.to_response(broker_name))?;
    tracing::debug!(group = %h.group, %topic, ?target, offset = h.offset, "message sent back");
    Ok(RemotingCommand::success())
}

/// Whether a message stored in `stored_topic` may be sent back as `origin_topic` by `group`: it is
/// in that topic, or it is a retry of the group.
fn is_send_back_of(stored_topic: &str, origin_topic: Option<&str>, group: &str) -> bool {
    origin_topic == Some(stored_topic) || group_of_retry_topic(stored_topic) == Some(group)
}

/// `lookMessageByOffset`: the committed record at `offset`, decoded.
fn look_message_by_offset(ctx: &BrokerContext, offset: i64) -> Result<MessageExt, RemotingCommand> {
    let failed =
        |why: String| refuse(ResponseCode::SystemError, format!("look message by offset failed, {offset}: {why}"));
    let bytes = record_at(ctx.store.commit_log(), offset).map_err(|e| failed(e.to_string()))?;
    let (msg, _) = decode_record_bytes(&bytes, DecodeOptions::default()).map_err(|e| failed(e.to_string()))?;
    Ok(msg)
}

#[cfg(test)]
mod tests {
    use raftmq_common::message::Message;
    use raftmq_common::message::validate::RMQ_SYS_SCHEDULE_TOPIC;

    use super::*;

    #[test]
    fn a_send_back_names_a_message_of_its_topic_or_its_groups_retries() {
        assert!(is_send_back_of("Orders", Some("Orders"), "billing"));
        assert!(is_send_back_of("%RETRY%billing", Some("Orders"), "billing"));
        assert!(!is_send_back_of("Payroll", Some("Orders"), "billing"), "another topic's message");
        assert!(!is_send_back_of("%RETRY%hr", Some("Orders"), "billing"), "another group's retry");
        assert!(!is_send_back_of("Orders", None, "billing"));
    }

    #[test]
    fn retry_or_dead_letter() {
        assert_eq!(decide_send_back(0, 16, 0), SendBackTarget::Retry { delay_level: 3 });
        assert_eq!(decide_send_back(5, 16, 0), SendBackTarget::Retry { delay_level: 8 });
        assert_eq!(decide_send_back(5, 16, 1), SendBackTarget::Retry { delay_level: 1 });
        assert_eq!(decide_send_back(15, 16, 0), SendBackTarget::Retry { delay_level: 18 });
        assert_eq!(decide_send_back(16, 16, 0), SendBackTarget::DeadLetter);
        assert_eq!(decide_send_back(0, 0, 0), SendBackTarget::DeadLetter);
        assert_eq!(decide_send_back(0, 16, -1), SendBackTarget::DeadLetter);
        assert_eq!(decide_send_back(2, 2, 1), SendBackTarget::DeadLetter);
    }

    fn original() -> MessageExt {
        let host: SocketAddr = "10.0.0.1:10911".parse().unwrap();
        MessageExt {
            message: Message::new("TopicA", &b"payload"[..]).with_tags("TagA").with_keys("k1"),
            queue_id: 2,
            queue_offset: 40,
            commit_log_offset: 4096,
            born_timestamp: 11,
            born_host: host,
            store_host: host,
            store_timestamp: 12,
            reconsume_times: 0,
            ..MessageExt::default()
        }
    }

    #[test]
    fn first_send_back_records_the_origin() {
        let me: SocketAddr = "10.0.0.2:10911".parse().unwrap();
        let orig = original();
        let mut m = build_send_back_message(&orig, "%RETRY%g", 0, SendBackTarget::Retry { delay_level: 3 }, me, 99);
        assert_eq!(m.message.property(properties::RETRY_TOPIC), Some("TopicA"));
        assert_eq!(m.message.property(properties::ORIGIN_MESSAGE_ID), Some(orig.offset_msg_id().to_string().as_str()));
        assert_eq!((m.reconsume_times, m.born_timestamp, m.store_timestamp, m.store_host), (1, 11, 99, me));
        assert_eq!(
            (m.message.tags(), m.message.keys(), &m.message.body[..]),
            (Some("TagA"), Some("k1"), &b"payload"[..])
        );
        assert!(!m.message.wait_store_msg_ok());
        assert!(redirect_delayed(&mut m, 18));
        assert_eq!((m.message.topic.as_str(), m.queue_id), (RMQ_SYS_SCHEDULE_TOPIC, 2));
        assert_eq!(m.message.property(properties::REAL_TOPIC), Some("%RETRY%g"));
    }

    #[test]
    fn later_send_backs_keep_the_origin_and_dead_letters_are_not_delayed() {
        let me: SocketAddr = "10.0.0.2:10911".parse().unwrap();
        let mut retried = original();
        retried.message.topic = "%RETRY%g".into();
        retried.message.properties.insert(properties::RETRY_TOPIC, "TopicA");
        retried.message.properties.insert(properties::ORIGIN_MESSAGE_ID, "ORIGIN");
        retried.message.properties.insert(properties::DELAY, "4");
        retried.reconsume_times = 16;
        let mut m = build_send_back_message(&retried, "%DLQ%g", 0, SendBackTarget::DeadLetter, me, 1);
        assert_eq!(m.message.property(properties::RETRY_TOPIC), Some("TopicA"));
        assert_eq!(m.message.property(properties::ORIGIN_MESSAGE_ID), Some("ORIGIN"));
        assert_eq!(m.reconsume_times, 17);
        assert!(!redirect_delayed(&mut m, 18));
        assert_eq!(m.message.topic, "%DLQ%g");
    }

    #[test]
    fn send_back_topics() {
        let retry = retry_topic_config("g", 2, false);
        assert_eq!((retry.topic_name.as_str(), retry.write_queue_nums, retry.perm), ("%RETRY%g", 2, 6));
        assert_eq!(retry_topic_config("g", 1, true).topic_sys_flag, 2);
        let dlq = dlq_topic_config("g");
        assert_eq!((dlq.topic_name.as_str(), dlq.read_queue_nums, dlq.perm), ("%DLQ%g", 1, 6));
    }
}
