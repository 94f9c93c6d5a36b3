//! [`Outgoing`]: a message validated, completed (UNIQ_KEY, WAIT) and compressed once, then the
//! SEND_MESSAGE_V2 / SEND_BATCH_MESSAGE / SEND_REPLY_MESSAGE_V2 request every attempt of the send
//! reuses; and the trace records of an attempt that got an answer.

use std::time::Duration;

use bytes::Bytes;
use raftmq_common::message::Message;
use raftmq_common::message::MessageQueue;
use raftmq_common::message::batch::encode_batch;
use raftmq_common::message::batch::validate_batch;
use raftmq_common::message::properties;
use raftmq_common::message::properties::Properties;
use raftmq_common::message::sys_flag;
use raftmq_common::message::trace::TraceBean;
use raftmq_common::message::trace::TraceContext;
use raftmq_common::message::trace::TraceMessageType;
use raftmq_common::message::trace::TraceType;
use raftmq_common::message::validate::is_retry_topic;
use raftmq_common::message::validate::validate_message;
use raftmq_common::protocol::RemotingCommand;
use raftmq_common::protocol::RequestCode;
use raftmq_common::protocol::command::FieldStr;
use raftmq_common::protocol::header::send::SendMessageRequestHeaderV2;
use raftmq_common::sync::lock;

use crate::clock::now_ms;
use crate::error::ClientError;
use crate::error::Result;
use crate::send_result::SendResult;
use crate::send_result::SendStatus;

use super::inner::Producer;

/// A message ready for the wire: what every attempt of one send reuses.
#[derive(Debug, Clone)]
pub(super) struct Outgoing {
    /// Inline up to 24 bytes: copied into every attempt's header without an allocation.
    pub(super) topic: FieldStr,
    pub(super) body: Bytes,
    pub(super) sys_flag: i32,
    pub(super) flag: i32,
    pub(super) properties: String,
    pub(super) batch: bool,
    /// UNIQ_KEY, or the batch's comma-joined UNIQ_KEYs.
    pub(super) msg_id: String,
    pub(super) reconsume_times: i32,
    pub(super) max_reconsume_times: Option<i32>,
    /// A request/reply reply (`MSG_TYPE=reply`): sent as SEND_REPLY_MESSAGE_V2.
    pub(super) reply: bool,
    /// One Pub bean per message when the send is traced (filled in by the answer), else empty.
    pub(super) trace_beans: Vec<TraceBean>,
}

impl Producer {
    /// Validates and completes a single message (`Validators.checkMessage`, `setUniqID`,
    /// `tryToCompressMessage`), leaving `msg` with its UNIQ_KEY and WAIT set.
    pub(super) fn prepare(&self, msg: &mut Message, op: &'static str) -> Result<Outgoing> {
        validate_message(msg, self.inner.config.max_message_size_bytes)
            .map_err(|e| ClientError::invalid_argument(op, e.to_string()).with_context("topic", &msg.topic))?;
        self.complete_properties(msg);
        let mut sys_flag = 0;
        let mut body = msg.body.clone();
        if let Some((packed, flags)) = self.inner.config.compression.apply(&body) {
            (body, sys_flag) = (packed, sys_flag | flags);
        }
        if msg.is_transaction_prepared() {
            sys_flag |= sys_flag::TRANSACTION_PREPARED_TYPE;
        }
        // Messages sent back to a retry topic carry their counters in the header, not the properties.
        let (mut reconsume_times, mut max_reconsume_times) = (0, None);
        let wire_properties = if is_retry_topic(&msg.topic) {
            let mut props = msg.properties.clone();
            if let Some(v) = props.remove(properties::RECONSUME_TIME) {
                reconsume_times = v.parse().unwrap_or(0);
            }
            max_reconsume_times = props.remove(properties::MAX_RECONSUME_TIMES).and_then(|v| v.parse().ok());
            props.to_wire_string()
        } else {
            msg.properties.to_wire_string()
        };
        Ok(Outgoing {
            topic: FieldStr::from(msg.topic.as_str()),
            body,
            sys_flag,
            flag: msg.flag,
            properties: wire_properties,
            batch: false,
            msg_id: msg.uniq_key().unwrap_or_default().to_owned(),
            reconsume_times,
            max_reconsume_times,
            reply: crate::reply::is_reply(msg),
            trace_beans: self.trace_beans(std::slice::from_ref(msg)),
        })
    }

    /// `DefaultMQProducer.batch`: the batch rules, each message validated and given a UNIQ_KEY,
    /// batch-level properties = WAIT only; batch bodies are never compressed (as in Java).
    pub(super) fn prepare_batch(&self, mut messages: Vec<Message>) -> Result<Outgoing> {
        let op = "sendBatch";
        for msg in &mut messages {
            validate_message(msg, self.inner.config.max_message_size_bytes)
                .map_err(|e| ClientError::invalid_argument(op, e.to_string()).with_context("topic", &msg.topic))?;
            self.complete_properties(msg);
        }
        validate_batch(&messages).map_err(|e| ClientError::invalid_argument(op, e.to_string()))?;
        let body = encode_batch(&messages).map_err(|e| ClientError::invalid_argument(op, e.to_string()))?;
        if body.len() > self.inner.config.max_message_size_bytes {
            return Err(ClientError::invalid_argument(
                op,
                format!("the message body size over max value, MAX: {}", self.inner.config.max_message_size_bytes),
            ));
        }
        let first = messages.first().ok_or_else(|| ClientError::invalid_argument(op, "the batch is empty"))?;
        let mut batch_props = Properties::new();
        batch_props.insert(properties::WAIT, if first.wait_store_msg_ok() { "true" } else { "false" });
        let ids: Vec<&str> = messages.iter().map(|m| m.uniq_key().unwrap_or_default()).collect();
        Ok(Outgoing {
            topic: FieldStr::from(first.topic.as_str()),
            body,
            sys_flag: 0,
            flag: 0,
            properties: batch_props.to_wire_string(),
            batch: true,
            msg_id: ids.join(","),
            reconsume_times: 0,
            max_reconsume_times: None,
            reply: false,
            trace_beans: self.trace_beans(&messages),
        })
    }

    /// The Pub beans of `messages` (completed, so with their UNIQ_KEYs) when the producer traces
    /// and they are not trace records themselves.
    pub(super) fn trace_beans(&self, messages: &[Message]) -> Vec<TraceBean> {
        let Some(trace) = &self.inner.trace else { return Vec::new() };
        messages
            .iter()
            .filter(|m| m.topic != trace.topic())
            .map(|m| TraceBean {
                topic: m.topic.to_string(),
                msg_id: m.uniq_key().unwrap_or_default().to_owned(),
                tags: m.tags().unwrap_or_default().to_owned(),
                keys: m.keys().unwrap_or_default().to_owned(),
                body_length: i64::try_from(m.body.len()).unwrap_or(i64::MAX),
                msg_type: if m.is_transaction_prepared() {
                    TraceMessageType::TransHalf
                } else if m.delay_time_level() > 0 {
                    TraceMessageType::Delay
                } else {
                    TraceMessageType::Normal
                },
                ..TraceBean::default()
            })
            .collect()
    }

    /// Records one answered attempt (`SendMessageTraceHookImpl.sendMessageAfter`): a Pub per
    /// message, unless the broker turned tracing off (`TRACE_ON=false`).
    pub(super) fn trace_attempt(&self, out: &Outgoing, result: &SendResult, addr: &str, began_ms: i64, cost: Duration) {
        let Some(trace) = &self.inner.trace else { return };
        if out.trace_beans.is_empty() || !result.trace_on {
            return;
        }
        let cost_time_ms = i64::try_from(cost.as_millis()).unwrap_or(i64::MAX);
        let mut offset_ids = result.offset_msg_id.split(',');
        for bean in &out.trace_beans {
            let mut ctx = TraceContext::new(TraceType::Pub, began_ms, &self.inner.config.producer_group);
            ctx.region_id = result.region_id.clone();
            ctx.cost_time_ms = cost_time_ms;
            ctx.success = result.status == SendStatus::SendOk;
            let mut bean = bean.clone();
            bean.store_host = addr.to_owned();
            bean.offset_msg_id = offset_ids.next().unwrap_or_default().to_owned();
            ctx.beans.push(bean);
            trace.append(ctx);
        }
    }

    /// Records a transaction's end (`EndTransactionTraceHookImpl`), as it is sent: answering a
    /// broker's check when `from_check`.
    pub(crate) fn trace_end_transaction(
        &self,
        msg: &Message,
        msg_id: &str,
        transaction_id: &str,
        broker_addr: &str,
        state: &str,
        from_check: bool,
    ) {
        let Some(trace) = &self.inner.trace else { return };
        if msg.topic == trace.topic() {
            return;
        }
        let mut ctx = TraceContext::new(TraceType::EndTransaction, now_ms(), &self.inner.config.producer_group);
        ctx.beans.push(TraceBean {
            topic: msg.topic.to_string(),
            msg_id: msg_id.to_owned(),
            tags: msg.tags().unwrap_or_default().to_owned(),
            keys: msg.keys().unwrap_or_default().to_owned(),
            store_host: broker_addr.to_owned(),
            msg_type: TraceMessageType::TransCommit,
            transaction_id: transaction_id.to_owned(),
            transaction_state: state.to_owned(),
            from_transaction_check: from_check,
            ..TraceBean::default()
        });
        trace.append(ctx);
    }

    /// UNIQ_KEY (kept when already set, so a resend keeps its id) and WAIT=true unless set, as the
    /// Java `Message` constructor sets it.
    pub(super) fn complete_properties(&self, msg: &mut Message) {
        if msg.uniq_key().is_none() {
            let id = lock(&self.inner.uniq).next_id_now();
            msg.set_uniq_key(id);
        }
        if !msg.properties.contains_key(properties::WAIT) {
            msg.set_wait_store_msg_ok(true);
        }
    }

    /// The SEND_MESSAGE_V2 / SEND_BATCH_MESSAGE request for one attempt, fields as the 4.9.8 client
    /// fills them (`sendKernelImpl`).
    pub(super) fn send_command(&self, out: &Outgoing, mq: &MessageQueue) -> RemotingCommand {
        let config = &self.inner.config;
        let header = SendMessageRequestHeaderV2 {
            a: FieldStr::from(config.producer_group.as_str()),
            b: out.topic.clone(),
            c: FieldStr::from(config.create_topic_key.as_str()),
            d: config.default_topic_queue_nums,
            e: mq.queue_id,
            f: out.sys_flag,
            g: now_ms(),
            h: out.flag,
            i: Some(out.properties.clone()),
            j: Some(out.reconsume_times),
            k: Some(false),
            l: out.max_reconsume_times,
            m: Some(out.batch),
            n: Some(FieldStr::from(mq.broker_name.as_str())),
        };
        let code = match (out.batch, out.reply) {
            (true, _) => RequestCode::SendBatchMessage,
            (false, true) => RequestCode::SendReplyMessageV2,
            (false, false) => RequestCode::SendMessageV2,
        };
        let mut request = RemotingCommand::request_with_header(code, &header).with_body(out.body.clone());
        request.serialize_type = config.serialize_type;
        request
    }
}
