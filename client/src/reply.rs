//! Request/reply messaging (RocketMQ 4.6+): a requester's [`crate::producer::Producer::request`]
//! sends a message carrying CORRELATION_ID, REPLY_TO_CLIENT (its clientId) and TTL and waits; the
//! consumer that receives it answers with [`create_reply_message`] sent by any producer (as
//! SEND_REPLY_MESSAGE_V2, because of its `MSG_TYPE=reply`); the broker pushes the reply to the
//! requester's connection as PUSH_REPLY_MESSAGE_TO_CLIENT, which `accept_push` hands to the waiting
//! request by its correlation id.
//!
//! The waiting requests are one table per process, as Java's `RequestFutureHolder` is: producers
//! of one process share a clientId (`ip@pid` unless an instance name is set), so the broker may push
//! a reply to any of their connections, and whichever receives it completes the request.
//!
//! Invariants: a request is completed at most once (the first reply wins; a retried reply that
//! arrives again finds no waiter and is dropped); a waiter is removed when its request returns,
//! whatever the outcome, so the table holds only requests in progress. The broker finds the
//! requester by its producer heartbeat, so the requester must heartbeat the brokers of its routes.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::Mutex;

use bytes::Bytes;
use raftmq_common::limits::UNCOMPRESSED_BODY_SIZE_MAX_BYTES;
use raftmq_common::message::Message;
use raftmq_common::message::MessageExt;
use raftmq_common::message::compress::uncompress_body;
use raftmq_common::message::properties;
use raftmq_common::message::properties::Properties;
use raftmq_common::message::sys_flag;
use raftmq_common::message::validate::REPLY_MESSAGE_FLAG;
use raftmq_common::message::validate::reply_topic;
use raftmq_common::protocol::RemotingCommand;
use raftmq_common::protocol::ResponseCode;
use raftmq_common::protocol::header::CommandHeader;
use raftmq_common::protocol::header::reply::ReplyMessageRequestHeader;
use tokio::sync::oneshot;

use crate::error::ClientError;
use crate::error::Result;

/// The reply to `request` carrying `body` (`MessageUtil.createReplyMessage`): to the cluster's
/// reply topic, with the request's CORRELATION_ID, REPLY_TO_CLIENT and TTL and `MSG_TYPE=reply`.
/// Fails when the request lacks CLUSTER (it did not come from a broker) or REPLY_TO_CLIENT (it was
/// not sent with `request`).
pub fn create_reply_message(request: &MessageExt, body: impl Into<Bytes>) -> Result<Message> {
    let op = "createReplyMessage";
    let p = &request.message.properties;
    let Some(cluster) = p.get(properties::CLUSTER) else {
        return Err(ClientError::invalid_argument(op, "the request message has no CLUSTER property"));
    };
    let Some(reply_to) = p.get(properties::REPLY_TO_CLIENT) else {
        return Err(ClientError::invalid_argument(op, "the request message has no REPLY_TO_CLIENT property"));
    };
    let mut reply = Message::new(reply_topic(cluster), body.into());
    reply.properties.insert(properties::MSG_TYPE, REPLY_MESSAGE_FLAG);
    reply.properties.insert(properties::REPLY_TO_CLIENT, reply_to);
    for key in [properties::CORRELATION_ID, properties::TTL] {
        if let Some(v) = p.get(key) {
            reply.properties.insert(key, v);
        }
    }
    Ok(reply)
}

/// A new request's CORRELATION_ID: a random UUID, as Java's `CorrelationIdUtil` makes it, so
/// another client cannot guess the id of a request in flight and answer it.
pub fn correlation_id() -> String {
    let mut b: [u8; 16] = rand::random();
    b[6] = (b[6] & 0x0f) | 0x40;
    b[8] = (b[8] & 0x3f) | 0x80;
    let hex: String = b.iter().map(|x| format!("{x:02x}")).collect();
    format!("{}-{}-{}-{}-{}", &hex[0..8], &hex[8..12], &hex[12..16], &hex[16..20], &hex[20..32])
}

/// Whether `msg` is a reply (sent as SEND_REPLY_MESSAGE_V2).
pub fn is_reply(msg: &Message) -> bool {
    msg.properties.get(properties::MSG_TYPE) == Some(REPLY_MESSAGE_FLAG)
}

/// Requests waiting for their reply, by correlation id.
#[derive(Debug, Clone, Default)]
pub(crate) struct ReplyWaiters {
    waiting: Arc<Mutex<HashMap<String, oneshot::Sender<MessageExt>>>>,
}

/// The process's waiting requests (see the module docs).
pub(crate) fn process_waiters() -> &'static ReplyWaiters {
    static WAITERS: std::sync::OnceLock<ReplyWaiters> = std::sync::OnceLock::new();
    WAITERS.get_or_init(ReplyWaiters::default)
}

impl ReplyWaiters {
    fn table(&self) -> std::sync::MutexGuard<'_, HashMap<String, oneshot::Sender<MessageExt>>> {
        self.waiting.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Registers `correlation_id`; the guard removes it when the request returns.
    pub(crate) fn wait(&self, correlation_id: &str) -> (oneshot::Receiver<MessageExt>, WaiterGuard) {
        let (tx, rx) = oneshot::channel();
        self.table().insert(correlation_id.to_owned(), tx);
        (rx, WaiterGuard { waiters: self.clone(), correlation_id: correlation_id.to_owned() })
    }

    /// Completes the request `reply` answers; false when none waits for it.
    fn complete(&self, reply: MessageExt) -> bool {
        let Some(id) = reply.message.properties.get(properties::CORRELATION_ID).map(str::to_owned) else {
            return false;
        };
        match self.table().remove(&id) {
            Some(tx) => tx.send(reply).is_ok(),
            None => false,
        }
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        self.table().len()
    }
}

/// Removes a request's waiter when the request returns.
pub(crate) struct WaiterGuard {
    waiters: ReplyWaiters,
    correlation_id: String,
}

impl Drop for WaiterGuard {
    fn drop(&mut self) {
        self.waiters.table().remove(&self.correlation_id);
    }
}

/// The reply a PUSH_REPLY_MESSAGE_TO_CLIENT carries (`ClientRemotingProcessor.receiveReplyMessage`):
/// the header's fields, the body uncompressed when its sysFlag says so. Only a header without its
/// required fields is refused.
pub fn decode_push(request: &RemotingCommand) -> std::result::Result<MessageExt, String> {
    let h = ReplyMessageRequestHeader::read_ext_fields(&request.ext_fields).map_err(|e| e.to_string())?;
    let born_host = socket_addr_of(&h.born_host);
    let store_host = socket_addr_of(&h.store_host);
    let mut flag = h.sys_flag;
    let mut body = request.body.clone();
    if flag & sys_flag::COMPRESSED != 0 {
        // As Java's `processReplyMessage`: a body that does not uncompress is handed over as it came.
        match uncompress_body(&body, UNCOMPRESSED_BODY_SIZE_MAX_BYTES) {
            Ok(plain) => {
                body = Bytes::from(plain);
                flag &= !sys_flag::COMPRESSED;
            }
            Err(e) => tracing::warn!(error = %e, "a reply body does not uncompress; kept compressed"),
        }
    }
    let mut props = Properties::from_wire_str(h.properties.as_deref().unwrap_or(""));
    // As Java's `receiveReplyMessage`: when the reply reached the requester, in its clock.
    let arrived = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_millis());
    props.insert(properties::ARRIVE_TIME, arrived.to_string());
    let message = Message { topic: h.topic.as_str().into(), flag: h.flag, properties: props, body };
    Ok(MessageExt {
        message,
        queue_id: h.queue_id,
        sys_flag: flag,
        born_timestamp: h.born_timestamp,
        born_host,
        store_timestamp: h.store_timestamp,
        store_host,
        reconsume_times: h.reconsume_times.unwrap_or(0),
        ..MessageExt::default()
    })
}

/// An address as brokers write it: `ip:port` from ours, `InetSocketAddress.toString()` from Java's
/// (`/10.0.0.6:40000`, `host/10.0.0.6:40000`); what does not parse is `0.0.0.0:0`, as Java's
/// `string2SocketAddress` never fails a reply over it.
fn socket_addr_of(text: &str) -> SocketAddr {
    let tail = text.rsplit_once('/').map_or(text, |(_, t)| t);
    tail.parse().unwrap_or_else(|_| SocketAddr::from(([0, 0, 0, 0], 0)))
}

/// Handles one PUSH_REPLY_MESSAGE_TO_CLIENT: SUCCESS once read (a reply nobody waits for any more
/// is dropped, as Java does), SYSTEM_ERROR when it cannot be read.
pub(crate) fn accept_push(waiters: &ReplyWaiters, request: &RemotingCommand) -> RemotingCommand {
    match decode_push(request) {
        Ok(reply) => {
            let id = reply.message.properties.get(properties::CORRELATION_ID).unwrap_or_default().to_owned();
            if !waiters.complete(reply) {
                tracing::debug!(correlation_id = %id, "a reply no request waits for (timed out, or a duplicate)");
            }
            RemotingCommand::response(ResponseCode::Success, None)
        }
        Err(e) => {
            tracing::warn!(error = %e, "unreadable PUSH_REPLY_MESSAGE_TO_CLIENT");
            RemotingCommand::response(ResponseCode::SystemError, Some(format!("unreadable reply: {e}")))
        }
    }
}

#[cfg(test)]
mod tests {
    use raftmq_common::protocol::RequestCode;

    use super::*;

    fn request_message() -> MessageExt {
        let mut m = Message::new("Questions", &b"q"[..]);
        m.properties.insert(properties::CLUSTER, "DefaultCluster");
        m.properties.insert(properties::REPLY_TO_CLIENT, "10.0.0.5@1234");
        m.properties.insert(properties::CORRELATION_ID, "C-1");
        m.properties.insert(properties::TTL, "3000");
        MessageExt { message: m, ..MessageExt::default() }
    }

    fn push_of(reply: &Message, sys_flag: i32, body: Bytes) -> RemotingCommand {
        let h = ReplyMessageRequestHeader {
            producer_group: "replier".into(),
            topic: reply.topic.to_string(),
            default_topic: "TBW102".into(),
            default_topic_queue_nums: 4,
            queue_id: 0,
            sys_flag,
            born_timestamp: 1,
            flag: 0,
            properties: Some(reply.properties.to_wire_string()),
            reconsume_times: Some(0),
            unit_mode: Some(false),
            born_host: "10.0.0.6:40000".into(),
            store_host: "10.0.0.1:10911".into(),
            store_timestamp: 2,
        };
        RemotingCommand::request_with_header(RequestCode::PushReplyMessageToClient, &h).with_body(body)
    }

    #[test]
    fn correlation_ids_are_random_uuids() {
        let (a, b) = (correlation_id(), correlation_id());
        assert_ne!(a, b);
        assert_eq!(a.len(), 36);
        assert_eq!(a.split('-').map(str::len).collect::<Vec<_>>(), [8, 4, 4, 4, 12]);
        assert_eq!(&a[14..15], "4", "version 4: {a}");
    }

    #[test]
    fn java_style_hosts_are_read_and_unreadable_ones_do_not_fail_the_reply() {
        assert_eq!(socket_addr_of("10.0.0.6:40000").to_string(), "10.0.0.6:40000");
        assert_eq!(socket_addr_of("/10.0.0.6:40000").to_string(), "10.0.0.6:40000");
        assert_eq!(socket_addr_of("broker-a/10.0.0.6:40000").to_string(), "10.0.0.6:40000");
        assert_eq!(socket_addr_of("garbage").to_string(), "0.0.0.0:0");
    }

    #[test]
    fn a_reply_goes_to_the_cluster_reply_topic_with_the_request_ids() {
        let reply = create_reply_message(&request_message(), &b"answer"[..]).unwrap();
        assert_eq!(reply.topic.as_str(), "DefaultCluster_REPLY_TOPIC");
        assert!(is_reply(&reply));
        assert_eq!(reply.properties.get(properties::CORRELATION_ID), Some("C-1"));
        assert_eq!(reply.properties.get(properties::REPLY_TO_CLIENT), Some("10.0.0.5@1234"));
        assert_eq!(reply.properties.get(properties::TTL), Some("3000"));
        let mut no_cluster = request_message();
        no_cluster.message.properties.remove(properties::CLUSTER);
        assert!(create_reply_message(&no_cluster, &b""[..]).is_err_and(|e| e.to_string().contains("CLUSTER")));
        let mut plain = request_message();
        plain.message.properties.remove(properties::REPLY_TO_CLIENT);
        assert!(create_reply_message(&plain, &b""[..]).is_err_and(|e| e.to_string().contains("REPLY_TO_CLIENT")));
    }

    #[test]
    fn a_pushed_reply_completes_its_request_once_and_compressed_bodies_are_read() {
        let waiters = ReplyWaiters::default();
        let (mut rx, guard) = waiters.wait("C-1");
        let reply = create_reply_message(&request_message(), &b""[..]).unwrap();
        let body = Bytes::from(raftmq_common::message::compress::compress_body(b"the answer"));
        let answer = accept_push(&waiters, &push_of(&reply, sys_flag::COMPRESSED, body.clone()));
        assert_eq!(answer.response_code(), ResponseCode::Success);
        let got = rx.try_recv().expect("completed");
        assert_eq!(&got.message.body[..], b"the answer");
        assert!(got.message.properties.get(properties::ARRIVE_TIME).is_some(), "ARRIVE_TIME stamped");
        assert_eq!(got.store_host.to_string(), "10.0.0.1:10911");
        // A duplicate finds nobody and is still acknowledged.
        let again = accept_push(&waiters, &push_of(&reply, sys_flag::COMPRESSED, body));
        assert_eq!(again.response_code(), ResponseCode::Success);
        drop(guard);
        assert_eq!(waiters.len(), 0, "the waiter left with its request");
        let (_rx, guard) = waiters.wait("C-2");
        drop(guard);
        assert_eq!(waiters.len(), 0, "a request that returned without a reply leaves nothing behind");
        let mut bad = push_of(&reply, 0, Bytes::new());
        bad.ext_fields.shift_remove("producerGroup");
        assert_eq!(accept_push(&waiters, &bad).response_code(), ResponseCode::SystemError);
    }
}
