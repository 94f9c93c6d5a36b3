//! SEND_REPLY_MESSAGE (324) and SEND_REPLY_MESSAGE_V2 (325): the replies of request/reply
//! messaging (RocketMQ's `ReplyMessageProcessor`). A requester sends an ordinary message carrying
//! CORRELATION_ID, REPLY_TO_CLIENT (its clientId) and TTL; a consumer answers it with a reply to
//! `<cluster>_REPLY_TOPIC` through one of these codes; the broker hands the reply to the requester.
//!
//! ```text
//! reply ─▶ header (V1 | V2), REPLY_TO_CLIENT present, to `<our cluster>_REPLY_TOPIC`, not a batch,
//!   a half or a delayed message
//!   ─▶ storeReplyMessageEnable? stored as a send (crate::processors::send: every check, group commit,
//!      answered after commit) : topic name and body size checked only
//!   ─▶ the requester's connection (a producer heartbeat with that clientId) ─▶ PUSH_REPLY_MESSAGE_TO_CLIENT (326)
//!   ─▶ the store's answer (SEND_OK, msgId, queue offset) when pushed; SYSTEM_ERROR naming the client when not
//! ```
//!
//! As in Java 4.9 a failed push is answered SYSTEM_ERROR (the replier retries); a retried reply
//! may reach the requester twice, and it completes its request on the first. Three choices differ:
//! - the reply is stored before it is pushed (Java pushes first), so a requester never receives a
//!   reply whose store was refused; a full disk or a read-only broker therefore delivers no reply
//!   where Java would still push one;
//! - a reply without REPLY_TO_CLIENT is refused MESSAGE_ILLEGAL before anything is stored;
//! - only the cluster's reply topic is taken, and no half or delayed message: replies are not
//!   checked against the ACL's resources (as in Java), so this path must not write where a send
//!   would have been checked.

use std::net::SocketAddr;
use std::time::Duration;

use raftmq_common::limits::BROKER_CLIENT_CALL_TIMEOUT_MS;
use raftmq_common::message::properties;
use raftmq_common::message::properties::Properties;
use raftmq_common::message::sys_flag::TransactionType;
use raftmq_common::message::validate::reply_topic;
use raftmq_common::message::validate::validate_send_topic;
use raftmq_common::protocol::RemotingCommand;
use raftmq_common::protocol::RequestCode;
use raftmq_common::protocol::ResponseCode;
use raftmq_common::protocol::header::reply::ReplyMessageRequestHeader;
use raftmq_common::protocol::header::send::SendMessageRequestHeader;
use raftmq_common::protocol::header::send::SendMessageResponseHeader;

use crate::processors::refusal::refuse;
use crate::processors::send;
use crate::processors::send::canonical_addr;
use crate::processors::send_handles::SendHandles;
use crate::state::store::now_ms;

/// Handles one reply.
pub async fn process_reply(ctx: &SendHandles, peer: SocketAddr, request: &RemotingCommand) -> RemotingCommand {
    let h = match SendMessageRequestHeader::read_request(request) {
        Ok(h) => h,
        Err(e) => return refuse(ResponseCode::SystemError, format!("the reply request header is invalid: {e}")),
    };
    if h.is_batch() {
        return refuse(ResponseCode::MessageIllegal, "a reply cannot be a batch");
    }
    let props = Properties::from_wire_str(h.properties.as_deref().unwrap_or(""));
    let Some(client_id) = props.get(properties::REPLY_TO_CLIENT).filter(|c| !c.is_empty()).map(str::to_owned) else {
        return refuse(
            ResponseCode::MessageIllegal,
            "a reply needs the REPLY_TO_CLIENT property (the requester's clientId)",
        );
    };
    let reply_topic = reply_topic(&ctx.config.broker_cluster_name);
    if h.topic != reply_topic {
        return refuse(ResponseCode::MessageIllegal, format!("a reply goes to {reply_topic}, not to {}", h.topic));
    }
    let delayed = props.get(properties::DELAY).and_then(|d| d.parse::<i32>().ok()).is_some_and(|d| d > 0);
    if props.contains_key(properties::TRAN_MSG) || TransactionType::of(h.sys_flag) != TransactionType::Not || delayed {
        return refuse(ResponseCode::MessageIllegal, "a reply cannot be a transactional or delayed message");
    }
    // The runtime keys, read once: one request sees one config.
    let live = ctx.live.current();
    let response = if live.store_reply_message_enable {
        let stored = send::process_send(ctx, peer, request).await;
        if stored.response_code() != ResponseCode::Success {
            return stored;
        }
        stored
    } else {
        if let Err(e) = validate_send_topic(&h.topic) {
            return refuse(e.response_code(), e.to_string());
        }
        let max = live.max_message_size as usize;
        if request.body.len() > max {
            return refuse(ResponseCode::MessageIllegal, format!("the message body size over max value, MAX: {max}"));
        }
        RemotingCommand::success().with_header(&SendMessageResponseHeader {
            msg_id: String::new(),
            queue_id: h.queue_id,
            queue_offset: 0,
            transaction_id: None,
        })
    };
    match push(ctx, peer, &h, props, &client_id, request).await {
        Ok(()) => response,
        Err(remark) => {
            tracing::debug!(client = %client_id, %remark, "reply not pushed");
            refuse(ResponseCode::SystemError, remark)
        }
    }
}

/// PUSH_REPLY_MESSAGE_TO_CLIENT to the requester's connection; the error is the replier's remark.
async fn push(
    ctx: &SendHandles,
    peer: SocketAddr,
    h: &SendMessageRequestHeader,
    mut props: Properties,
    client_id: &str,
    request: &RemotingCommand,
) -> Result<(), String> {
    let Some(connection) = ctx.clients.producer_connection_of_client(client_id) else {
        return Err(format!("push reply message to {client_id} failed: the client is not connected to this broker"));
    };
    let store_timestamp = now_ms() as i64;
    props.insert(properties::PUSH_REPLY_TIME, store_timestamp.to_string());
    let header = ReplyMessageRequestHeader {
        producer_group: h.producer_group.to_string(),
        topic: h.topic.to_string(),
        default_topic: h.default_topic.to_string(),
        default_topic_queue_nums: h.default_topic_queue_nums,
        queue_id: h.queue_id,
        sys_flag: h.sys_flag,
        born_timestamp: h.born_timestamp,
        flag: h.flag,
        properties: Some(props.to_wire_string()),
        reconsume_times: h.reconsume_times,
        unit_mode: h.unit_mode,
        born_host: canonical_addr(peer).to_string(),
        store_host: ctx.store_host.to_string(),
        store_timestamp,
    };
    let push = RemotingCommand::request_with_header(RequestCode::PushReplyMessageToClient, &header)
        .with_body(request.body.clone());
    // Shorter than the replier's own send timeout, so it hears why instead of timing out.
    match connection.invoke(push, Duration::from_millis(BROKER_CLIENT_CALL_TIMEOUT_MS)).await {
        Ok(answer) if answer.response_code() == ResponseCode::Success => Ok(()),
        Ok(answer) => Err(format!(
            "push reply message to {client_id} failed: the client answered {} ({})",
            answer.code,
            answer.remark.as_deref().unwrap_or("no remark")
        )),
        Err(e) => Err(format!("push reply message to {client_id} failed: {e}")),
    }
}
