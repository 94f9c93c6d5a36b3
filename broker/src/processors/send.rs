//! SEND_MESSAGE (10), SEND_MESSAGE_V2 (310) and SEND_BATCH_MESSAGE (320): RocketMQ's
//! `SendMessageProcessor` on a Raft group.
//!
//! ```text
//! header (V1 | V2) ─▶ broker perm ─▶ topic name ─▶ body / batch rules ─▶ writable? (leader, ready)
//!   ─▶ topic exists | auto-create from TBW102 (replicated upsert) ─▶ queue id
//!   ─▶ %RETRY% with reconsumeTimes ≥ max: %DLQ% instead (crate::processors::send_back) ─▶ records encoded
//!   (born host, store host, store timestamp, CLUSTER; a timer: TIMER_OUT_MS and a level, crate::services::timer;
//!   DELAY > 0: SCHEDULE_TOPIC_XXXX, crate::services::schedule; TRAN_MSG: the half queue, crate::state::transaction)
//!   ─▶ group commit ─▶ SEND_OK after commit + apply
//! ```
//!
//! Every refusal happens before anything is proposed, so a refused send leaves no record behind;
//! SEND_OK is answered only once the entry holding the records is committed and applied
//! (`msgId` = offsetMsgId of the first record, comma-joined for a batch; `queueOffset` = the first).

use std::net::IpAddr;
use std::net::SocketAddr;

use bytes::BytesMut;
use raftmq_common::message::Message;
use raftmq_common::message::MessageExt;
use raftmq_common::message::batch::decode_batch;
use raftmq_common::message::batch::merge_batch_properties;
use raftmq_common::message::msg_id::OffsetMsgId;
use raftmq_common::message::properties;
use raftmq_common::message::properties::Properties;
use raftmq_common::message::record::encode_record_into;
use raftmq_common::message::sys_flag::TransactionType;
use raftmq_common::message::validate::RMQ_SYS_TRANS_HALF_TOPIC;
use raftmq_common::message::validate::validate_send_topic;
use raftmq_common::protocol::RemotingCommand;
use raftmq_common::protocol::RequestCode;
use raftmq_common::protocol::ResponseCode;
use raftmq_common::protocol::body::topic::TopicConfig;
use raftmq_common::protocol::body::topic::perm;
use raftmq_common::protocol::command::FieldStr;
use raftmq_common::protocol::header::send::MSG_REGION_KEY;
use raftmq_common::protocol::header::send::SendMessageRequestHeader;
use raftmq_common::protocol::header::send::SendMessageResponseHeader;
use raftmq_common::protocol::header::send::TRACE_ON_KEY;

use crate::config::broker_config::BrokerConfig;
use crate::processors::refusal::refuse;
use crate::processors::send_back::dead_letter_of_retry_send;
use crate::processors::send_back::ensure_topic;
use crate::processors::send_handles::SendHandles;
use crate::services::group_commit::RecordSlot;
use crate::services::group_commit::SendRequest;
use crate::services::schedule::redirect_delayed;
use crate::services::timer::check_timer;
use crate::services::timer::has_timer;
use crate::services::timer::redirect_timer;
use crate::state::entry::BrokerCommand;
use crate::state::queue_offset::has_queue_offset;
use crate::state::store::now_ms;
use crate::state::topic_config::AutoCreate;
use crate::state::topic_config::SendTopic;
use crate::state::topic_config::check_send_queue_id;
use crate::state::topic_config::decide_send_topic;
use crate::state::topic_config::one_queue_topic;
use crate::state::transaction::redirect_half;

/// The peer address as RocketMQ stores it: IPv4-mapped IPv6 addresses as plain IPv4.
pub fn canonical_addr(addr: SocketAddr) -> SocketAddr {
    match addr.ip() {
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => SocketAddr::new(IpAddr::V4(v4), addr.port()),
            None => addr,
        },
        IpAddr::V4(_) => addr,
    }
}

/// Handles one send request.
pub async fn process_send(ctx: &SendHandles, peer: SocketAddr, request: &RemotingCommand) -> RemotingCommand {
    match send(ctx, peer, request).await {
        Ok(response) | Err(response) => response,
    }
}

/// The messages of a send: one, or a batch's entries with the batch-level properties merged in.
fn messages_of(
    live: &BrokerConfig,
    h: &SendMessageRequestHeader,
    request: &RemotingCommand,
) -> Result<Vec<Message>, RemotingCommand> {
    let max = live.max_message_size as usize;
    if request.body.len() > max {
        return Err(refuse(ResponseCode::MessageIllegal, format!("the message body size over max value, MAX: {max}")));
    }
    let header_properties = Properties::from_wire_str(h.properties.as_deref().unwrap_or(""));
    let batch = request.request_code() == RequestCode::SendBatchMessage || h.is_batch();
    if !batch {
        return Ok(vec![Message {
            topic: h.topic.as_str().into(),
            flag: h.flag,
            properties: header_properties,
            body: request.body.clone(),
        }]);
    }
    let mut entries = decode_batch(&request.body, &h.topic).map_err(|e| refuse(e.response_code(), e.to_string()))?;
    if entries.is_empty() {
        return Err(refuse(ResponseCode::MessageIllegal, "the batch is empty"));
    }
    for m in &mut entries {
        m.properties = merge_batch_properties(&m.properties, &header_properties);
        if m.delay_time_level() > 0 {
            return Err(refuse(ResponseCode::MessageIllegal, "TimeDelayLevel is not supported for batching"));
        }
        if has_timer(&m.properties) {
            return Err(refuse(ResponseCode::MessageIllegal, "timer messages are not supported for batching"));
        }
    }
    Ok(entries)
}

async fn topic_config(
    ctx: &SendHandles,
    live: &BrokerConfig,
    h: &SendMessageRequestHeader,
) -> Result<TopicConfig, RemotingCommand> {
    let decision = {
        let meta = ctx.store.metadata();
        let auto = AutoCreate {
            default_topic: &h.default_topic,
            client_default_queue_nums: h.default_topic_queue_nums,
            topic_sys_flag: i32::from(h.is_unit_mode()),
            auto_create_topic_enable: live.auto_create_topic_enable,
        };
        decide_send_topic(&meta.topics, &h.topic, &auto)
    };
    match decision {
        SendTopic::Exists(config) => Ok(config),
        SendTopic::NotExist(remark) => Err(refuse(ResponseCode::TopicNotExist, remark)),
        SendTopic::Create(config) => {
            tracing::info!(topic = %config.topic_name, queues = config.write_queue_nums, "auto-creating topic from the default topic");
            let command = BrokerCommand::TopicUpsert { proposed_at_ms: now_ms() as i64, config: config.clone() };
            ctx.replica.propose(&command).await.map_err(|e| e.to_response(&ctx.config.broker_name))?;
            ctx.register_now.notify_one();
            Ok(config)
        }
    }
}

async fn send(
    ctx: &SendHandles,
    peer: SocketAddr,
    request: &RemotingCommand,
) -> Result<RemotingCommand, RemotingCommand> {
    let started = std::time::Instant::now();
    let h = SendMessageRequestHeader::read_request(request)
        .map_err(|e| refuse(ResponseCode::SystemError, format!("the send request header is invalid: {e}")))?;
    let broker_name = &ctx.config.broker_name;
    // The runtime keys, read once: one request sees one config.
    let live = ctx.live.current();
    if !perm::is_writeable(live.broker_permission) {
        return Err(refuse(
            ResponseCode::NoPermission,
            format!("the broker[{}] sending message is forbidden", ctx.config.broker_addr()),
        ));
    }
    validate_send_topic(&h.topic).map_err(|e| refuse(e.response_code(), e.to_string()))?;
    let messages = messages_of(&live, &h, request)?;
    // A RocketMQ broker recognises a half message by its TRAN_MSG property; the client sets the
    // PREPARED sysFlag bit from it.
    let half = messages.iter().any(Message::is_transaction_prepared);
    if half && live.reject_transaction_message {
        return Err(refuse(
            ResponseCode::NoPermission,
            format!("the broker[{}] sending transaction message is forbidden", ctx.config.broker_addr()),
        ));
    }
    if half && messages.len() > 1 {
        return Err(refuse(ResponseCode::MessageIllegal, "a batch cannot hold transactional messages"));
    }
    if !half && TransactionType::of(h.sys_flag) == TransactionType::Prepared {
        // Stored as PREPARED it would get no queue unit and never be ended: invisible forever.
        return Err(refuse(ResponseCode::MessageIllegal, "a PREPARED sysFlag needs the TRAN_MSG property"));
    }
    ctx.replica.check_writable().map_err(|e| e.to_response(broker_name))?;
    if let Some(ratio) = ctx.store.disk_full() {
        return Err(refuse(ResponseCode::ServiceNotAvailable, crate::services::retention::disk_full_remark(ratio)));
    }
    let config = topic_config(ctx, &live, &h).await?;
    if !perm::is_writeable(config.perm) {
        return Err(refuse(ResponseCode::NoPermission, format!("the topic[{}] sending message is forbidden", h.topic)));
    }
    let store_timestamp = now_ms() as i64;
    let queue_id = if h.queue_id < 0 && config.write_queue_nums > 0 {
        // `queueIdInt < 0`: the broker picks one (Java: a random write queue).
        (store_timestamp.rem_euclid(i64::from(config.write_queue_nums))) as i32
    } else {
        h.queue_id
    };
    check_send_queue_id(&config, queue_id).map_err(|(code, remark)| refuse(code, remark))?;
    let target = match dead_letter_of_retry_send(ctx, &h).await? {
        Some(dlq) => Target { topic: FieldStr::from(dlq.topic_name), queue_id: 0, dead_letter: true, half: false },
        None => Target { topic: h.topic.clone(), queue_id, dead_letter: false, half },
    };
    if target.half {
        ensure_topic(ctx, one_queue_topic(RMQ_SYS_TRANS_HALF_TOPIC)).await?;
    }
    // Only a half answers with its UNIQ_KEY: ordinary sends copy nothing.
    let half_uniq_key =
        if target.half { messages.first().and_then(Message::uniq_key).map(str::to_owned) } else { None };
    let timer_max_delay_ms = live.timer_max_delay_sec.saturating_mul(1000);
    let (records, slots) = encode(ctx, &h, peer, &target, store_timestamp, timer_max_delay_ms, messages)?;
    let stored = ctx.store_records(SendRequest { records, slots }).await.map_err(|e| e.to_response(broker_name))?;
    let first = stored.first().map_or(0, |s| s.queue_offset);
    ctx.metrics.on_send(&h.topic, stored.len(), started.elapsed());
    let mut msg_id = String::new();
    for (i, s) in stored.iter().enumerate() {
        if i > 0 {
            msg_id.push(',');
        }
        OffsetMsgId::new(ctx.store_host, s.phy_offset).push_hex(&mut msg_id);
    }
    // A half answers with its own offsets in the half queue (END_TRANSACTION names them) and, as
    // RocketMQ 5 does, its UNIQ_KEY as the transaction id.
    let mut response = RemotingCommand::success().with_header(&SendMessageResponseHeader {
        msg_id,
        queue_id,
        queue_offset: first,
        transaction_id: half_uniq_key,
    });
    response.ext_fields.insert(FieldStr::const_new(MSG_REGION_KEY), FieldStr::from(live.region_id.as_str()));
    let trace_on = if live.trace_on { "true" } else { "false" };
    response.ext_fields.insert(FieldStr::const_new(TRACE_ON_KEY), FieldStr::const_new(trace_on));
    Ok(response)
}

/// Where a send's records go (the DLQ instead of an exhausted retry topic).
struct Target {
    topic: FieldStr,
    queue_id: i32,
    dead_letter: bool,
    /// A transactional half message: stored in the half queue ([`crate::state::transaction`]).
    half: bool,
}

fn encode(
    ctx: &SendHandles,
    h: &SendMessageRequestHeader,
    peer: SocketAddr,
    target: &Target,
    store_timestamp: i64,
    timer_max_delay_ms: u64,
    messages: Vec<Message>,
) -> Result<(BytesMut, Vec<RecordSlot>), RemotingCommand> {
    let mut out = BytesMut::new();
    let mut slots = Vec::with_capacity(messages.len());
    let born_host = canonical_addr(peer);
    let levels_ms = ctx.store.delay_levels_ms();
    for mut message in messages {
        message.properties.insert(properties::CLUSTER, ctx.config.broker_cluster_name.as_str());
        if message.topic != target.topic {
            message.topic = target.topic.clone();
        }
        if target.dead_letter {
            message.set_delay_time_level(0);
        }
        let mut record = MessageExt {
            message,
            queue_id: target.queue_id,
            sys_flag: h.sys_flag,
            born_timestamp: h.born_timestamp,
            born_host,
            store_timestamp,
            store_host: ctx.store_host,
            reconsume_times: h.reconsume_times.unwrap_or(0),
            ..MessageExt::default()
        };
        if target.half {
            // Timed at its commit; a bad timer is refused now, not dropped then.
            check_timer(&record, store_timestamp, levels_ms, timer_max_delay_ms)
                .map_err(|e| refuse(ResponseCode::MessageIllegal, e.to_string()))?;
            redirect_half(&mut record);
        } else {
            if !target.dead_letter {
                redirect_timer(&mut record, store_timestamp, levels_ms, timer_max_delay_ms)
                    .map_err(|e| refuse(ResponseCode::MessageIllegal, e.to_string()))?;
            }
            redirect_delayed(&mut record, levels_ms.len());
        }
        let at = out.len();
        encode_record_into(&record, &mut out).map_err(|e| refuse(ResponseCode::MessageIllegal, e.to_string()))?;
        slots.push(RecordSlot {
            topic: record.message.topic.clone(),
            queue_id: record.queue_id,
            has_queue_offset: has_queue_offset(record.sys_flag),
            at,
        });
    }
    Ok((out, slots))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mapped_ipv6_peers_are_stored_as_ipv4() {
        let mapped: SocketAddr = "[::ffff:10.0.0.7]:5000".parse().unwrap();
        assert_eq!(canonical_addr(mapped), "10.0.0.7:5000".parse::<SocketAddr>().unwrap());
        let v6: SocketAddr = "[2001:db8::1]:5000".parse().unwrap();
        assert_eq!(canonical_addr(v6), v6);
    }
}
