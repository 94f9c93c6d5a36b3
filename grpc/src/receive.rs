//! ReceiveMessage as RocketMQ's proxy serves it (`ReceiveMessageActivity`,
//! `ReceiveMessageResponseStreamWriter`), over the broker's remoting POP_MESSAGE: the request
//! checked and turned into one POP_MESSAGE, the answer into the stream of responses. Pure.
//!
//! | ReceiveMessageRequest | POP_MESSAGE |
//! |---|---|
//! | `group`, `message_queue.topic` | `consumerGroup`, `topic`; `queueId` -1 (any queue: the proxy picks by broker only) |
//! | `batch_size` (1..=32) | `maxMsgNums` |
//! | `invisible_duration` (auto-renewing clients may leave it out: a default) | `invisibleTime` |
//! | `long_polling_timeout`, bounded by the call's deadline | `pollTime` |
//! | `filter_expression` TAG / SQL | `expType` TAG / SQL92, `exp` |
//! | the group's `consumeMessageOrderly` (`fifo`) | `order` |
//! | `attempt_id` | `attemptId` |
//!
//! A found batch streams one OK status and then each message (the proxy's order; clients read
//! every response whatever the order); nothing found streams MESSAGE_NOT_FOUND. Every stream,
//! whatever it carried, ends with the time the server completed it ([`completed`]). Each message's
//! receipt handle is the `extraInfo` the broker acks it by ([`ExtraInfo`]: the queue's start offset,
//! the pop time and invisible time, whether it came from the POP retry topic, the message's own
//! queue and offset); in FIFO mode the delivery attempt counts the queue's earlier deliveries.

use std::time::Duration;

use raftmq_common::limits::POP_BATCH_MAX_COUNT;
use raftmq_common::limits::POP_INVISIBLE_MAX_MS;
use raftmq_common::limits::POP_INVISIBLE_MIN_MS;
use raftmq_common::message::MessageExt;
use raftmq_common::message::record::DecodeOptions;
use raftmq_common::message::record::decode_all;
use raftmq_common::message::validate::RETRY_GROUP_TOPIC_PREFIX;
use raftmq_common::message::validate::validate_consumer_group;
use raftmq_common::message::validate::validate_topic;
use raftmq_common::protocol::RemotingCommand;
use raftmq_common::protocol::RequestCode;
use raftmq_common::protocol::ResponseCode;
use raftmq_common::protocol::body::subscription_group::SubscriptionGroupConfig;
use raftmq_common::protocol::header::pop::ExtraInfo;
use raftmq_common::protocol::header::pop::PopMessageRequestHeader;
use raftmq_common::protocol::header::pop::PopMessageResponseHeader;
use raftmq_common::protocol::header::pop::PopTopicType;
use raftmq_common::protocol::header::pop::order_count_of;
use raftmq_common::protocol::header::pop::start_offset_of;

use crate::message::Delivery;
use crate::message::pb_message;
use crate::message::timestamp;
use crate::pb::Code;
use crate::pb::FilterType;
use crate::pb::ReceiveMessageRequest;
use crate::pb::ReceiveMessageResponse;
use crate::pb::Status;
use crate::pb::receive_message_response::Content;
use crate::status::of_remoting;
use crate::status::ok;
use crate::status::status;

/// Time left of a call for the broker's answer to reach the client.
pub const ANSWER_MARGIN_MS: u64 = 1_000;
/// The proxy's `initMode` for gRPC consumers: a group without an offset starts at the queue's end
/// (`ConsumeInitMode.MAX`).
pub const INIT_MODE_MAX: i32 = 1;

/// What bounds a receive.
#[derive(Debug, Clone, Copy)]
pub struct ReceiveLimits {
    /// Long-polling time when the request names none.
    pub polling_default_ms: u64,
    /// Longest long-polling time.
    pub polling_max_ms: u64,
    /// Invisible time of an auto-renewing request that names none.
    pub invisible_default_ms: u64,
}

/// Whether a subscription group receives each message group in order.
pub fn is_fifo(config: &SubscriptionGroupConfig) -> bool {
    config.consume_message_orderly
}

fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

fn std_duration(d: &prost_types::Duration) -> Option<Duration> {
    let seconds = u64::try_from(d.seconds).ok()?;
    let nanos = u32::try_from(d.nanos).ok()?;
    Some(Duration::new(seconds, 0) + Duration::from_nanos(u64::from(nanos)))
}

/// A proto duration in ms; negative ones are refused (`None`).
pub fn duration_ms(d: &prost_types::Duration) -> Option<u64> {
    std_duration(d).map(millis)
}

/// The time a call's `grpc-timeout` header gives it (`<digits><unit>`, units H M S m u n).
pub fn grpc_timeout(value: &str) -> Option<Duration> {
    let unit = value.chars().last()?;
    let digits = value.get(..value.len() - unit.len_utf8())?;
    if digits.is_empty() || digits.len() > 8 || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let n: u64 = digits.parse().ok()?;
    Some(match unit {
        'H' => Duration::from_secs(n * 3_600),
        'M' => Duration::from_secs(n * 60),
        'S' => Duration::from_secs(n),
        'm' => Duration::from_millis(n),
        'u' => Duration::from_micros(n),
        'n' => Duration::from_nanos(n),
        _ => return None,
    })
}

/// How long a receive may wait for messages: `requested` (else `limits.polling_default_ms`), at
/// most the call's `deadline` less [`ANSWER_MARGIN_MS`] and `limits.polling_max_ms`.
pub fn polling_ms(requested: Option<Duration>, deadline: Option<Duration>, limits: ReceiveLimits) -> u64 {
    let wanted = requested.map_or(limits.polling_default_ms, millis);
    let room = deadline.map_or(u64::MAX, |d| millis(d).saturating_sub(ANSWER_MARGIN_MS));
    wanted.min(room).min(limits.polling_max_ms)
}

/// An invisible time the broker accepts, else ILLEGAL_INVISIBLE_TIME.
pub fn invisible_ms(requested: Option<&prost_types::Duration>) -> Result<u64, Status> {
    let bounds = POP_INVISIBLE_MIN_MS as u64..=POP_INVISIBLE_MAX_MS as u64;
    match requested.map(duration_ms) {
        Some(Some(ms)) if bounds.contains(&ms) => Ok(ms),
        Some(_) => Err(status(
            Code::IllegalInvisibleTime,
            format!("the invisible duration must be within {} ms and {} ms", bounds.start(), bounds.end()),
        )),
        None => Err(status(Code::IllegalInvisibleTime, "the invisible duration is missing")),
    }
}

/// The consumer group a request names, checked.
pub fn group_of(group: Option<&crate::pb::Resource>) -> Result<&str, Status> {
    let name = group.map(|g| g.name.as_str()).unwrap_or_default();
    validate_consumer_group(name).map_err(|e| status(Code::IllegalConsumerGroup, e.to_string()))?;
    Ok(name)
}

/// The topic a request names, checked.
pub fn topic_name(topic: Option<&crate::pb::Resource>) -> Result<&str, Status> {
    let name = topic.map(|t| t.name.as_str()).unwrap_or_default();
    validate_topic(name).map_err(|e| status(Code::IllegalTopic, e.to_string()))?;
    Ok(name)
}

/// The POP_MESSAGE of a receive; `fifo` from the group, `deadline` the call's time left.
pub fn pop_command(
    request: &ReceiveMessageRequest,
    fifo: bool,
    deadline: Option<Duration>,
    limits: ReceiveLimits,
    now_ms: i64,
) -> Result<RemotingCommand, Status> {
    let group = group_of(request.group.as_ref())?;
    let topic = topic_name(request.message_queue.as_ref().and_then(|q| q.topic.as_ref()))?;
    let batch = usize::try_from(request.batch_size).unwrap_or(0);
    if !(1..=POP_BATCH_MAX_COUNT).contains(&batch) {
        return Err(status(
            Code::BadRequest,
            format!("the batch size must be within 1 and {POP_BATCH_MAX_COUNT}, not {}", request.batch_size),
        ));
    }
    let invisible = match (&request.invisible_duration, request.auto_renew) {
        // The client renews the invisible time itself: the default is only the first lease.
        (None, true) => limits.invisible_default_ms,
        (requested, _) => invisible_ms(requested.as_ref())?,
    };
    let (exp_type, exp) = match &request.filter_expression {
        None => ("TAG", "*".to_owned()),
        Some(f) => {
            let exp = if f.expression.trim().is_empty() { "*".to_owned() } else { f.expression.clone() };
            match FilterType::try_from(f.r#type) {
                Ok(FilterType::Sql) => ("SQL92", exp),
                Ok(FilterType::Tag | FilterType::Unspecified) => ("TAG", exp),
                Err(_) => return Err(status(Code::IllegalFilterExpression, "the filter type is unknown")),
            }
        }
    };
    let requested_polling = request.long_polling_timeout.as_ref().and_then(std_duration);
    let header = PopMessageRequestHeader {
        consumer_group: group.to_owned(),
        topic: topic.to_owned(),
        queue_id: -1,
        max_msg_nums: batch as i32,
        invisible_time: invisible as i64,
        poll_time: polling_ms(requested_polling, deadline, limits) as i64,
        born_time: now_ms,
        init_mode: INIT_MODE_MAX,
        exp_type: Some(exp_type.to_owned()),
        exp: Some(exp),
        order: Some(fifo),
        attempt_id: request.attempt_id.clone(),
    };
    Ok(RemotingCommand::request_with_header(RequestCode::PopMessage, &header))
}

/// A status-only response.
pub fn status_response(s: Status) -> ReceiveMessageResponse {
    ReceiveMessageResponse { content: Some(Content::Status(s)) }
}

fn not_found() -> Vec<ReceiveMessageResponse> {
    vec![status_response(status(Code::MessageNotFound, "no new message"))]
}

/// Whether a popped message came from its group's POP retry topic.
fn topic_type(ext: &MessageExt) -> PopTopicType {
    if ext.message.topic.starts_with(RETRY_GROUP_TOPIC_PREFIX) { PopTopicType::Retry } else { PopTopicType::Normal }
}

/// The receipt handle of one popped message.
pub fn receipt_of(ext: &MessageExt, header: &PopMessageResponseHeader, broker_name: &str) -> ExtraInfo {
    let topic_type = topic_type(ext);
    let ck_offset = header
        .start_offset_info
        .as_deref()
        .and_then(|info| start_offset_of(info, topic_type, ext.queue_id))
        .unwrap_or(ext.queue_offset);
    ExtraInfo {
        ck_offset,
        pop_time: header.pop_time,
        invisible_time: header.invisible_time,
        revive_qid: header.revive_qid,
        topic_type,
        broker_name: broker_name.to_owned(),
        queue_id: ext.queue_id,
        queue_offset: Some(ext.queue_offset),
    }
}

/// The responses of a receive from the broker's answer to its POP_MESSAGE.
pub fn receive_responses(answer: &RemotingCommand, broker_name: &str) -> Vec<ReceiveMessageResponse> {
    match answer.response_code() {
        ResponseCode::Success => {}
        ResponseCode::PollingTimeout | ResponseCode::NoMessage | ResponseCode::PullNotFound => return not_found(),
        ResponseCode::PollingFull => return vec![status_response(status(Code::TooManyRequests, "polling full"))],
        code => return vec![status_response(of_remoting(code, answer.remark.as_deref()))],
    }
    let header: PopMessageResponseHeader = match answer.decode_header() {
        Ok(h) => h,
        Err(e) => {
            return vec![status_response(status(Code::InternalServerError, format!("bad POP_MESSAGE answer: {e}")))];
        }
    };
    let messages = match decode_all(&answer.body, DecodeOptions::default()) {
        Ok(m) => m,
        Err(e) => {
            return vec![status_response(status(Code::InternalServerError, format!("bad POP_MESSAGE records: {e}")))];
        }
    };
    if messages.is_empty() {
        return not_found();
    }
    let mut out = Vec::with_capacity(messages.len() + 1);
    out.push(status_response(ok()));
    for mut ext in messages {
        let receipt = receipt_of(&ext, &header, broker_name);
        if let Some(count) =
            header.order_count_info.as_deref().and_then(|info| order_count_of(info, receipt.topic_type, ext.queue_id))
        {
            // FIFO: the queue's earlier deliveries are this message's (Java's client reads them so).
            ext.reconsume_times = ext.reconsume_times.max(count);
        }
        let delivery = Delivery {
            receipt_handle: receipt.to_string(),
            invisible_ms: u64::try_from(header.invisible_time).unwrap_or(0),
        };
        out.push(ReceiveMessageResponse { content: Some(Content::Message(pb_message(&ext, Some(&delivery)))) });
    }
    out
}

/// `responses` with the response that ends every receive stream: the time the server completed it
/// (the proxy's `ReceiveMessageResponseStreamWriter.onComplete`). Clients take it as the delivery
/// time of the batch; Apache's Python client fails a PushConsumer's receive without it.
pub fn completed(mut responses: Vec<ReceiveMessageResponse>, now_ms: i64) -> Vec<ReceiveMessageResponse> {
    responses.push(ReceiveMessageResponse { content: Some(Content::DeliveryTimestamp(timestamp(now_ms))) });
    responses
}

#[cfg(test)]
mod tests {
    use bytes::BytesMut;
    use raftmq_common::message::properties;
    use raftmq_common::message::record::encode_record_into;

    use super::*;
    use crate::pb::FilterExpression;
    use crate::pb::MessageQueue;
    use crate::pb::Resource;

    const LIMITS: ReceiveLimits =
        ReceiveLimits { polling_default_ms: 15_000, polling_max_ms: 20_000, invisible_default_ms: 30_000 };

    fn resource(name: &str) -> Option<Resource> {
        Some(Resource { resource_namespace: String::new(), name: name.into() })
    }

    fn request() -> ReceiveMessageRequest {
        ReceiveMessageRequest {
            group: resource("G"),
            message_queue: Some(MessageQueue { topic: resource("T"), ..Default::default() }),
            filter_expression: Some(FilterExpression { r#type: FilterType::Tag as i32, expression: "TagA".into() }),
            batch_size: 16,
            invisible_duration: Some(prost_types::Duration { seconds: 15, nanos: 0 }),
            auto_renew: false,
            long_polling_timeout: Some(prost_types::Duration { seconds: 40, nanos: 0 }),
            attempt_id: Some("a1".into()),
        }
    }

    #[test]
    fn fifo_is_the_groups_orderly_flag() {
        let mut config = SubscriptionGroupConfig::new("g");
        assert!(!is_fifo(&config));
        config.consume_message_orderly = true;
        assert!(is_fifo(&config));
    }

    #[test]
    fn polling_is_bounded_by_the_deadline_and_the_maximum() {
        let s = Duration::from_secs;
        assert_eq!(polling_ms(Some(s(10)), Some(s(30)), LIMITS), 10_000);
        assert_eq!(polling_ms(Some(s(15)), Some(s(10)), LIMITS), 9_000);
        assert_eq!(polling_ms(None, None, LIMITS), 15_000);
        assert_eq!(polling_ms(Some(s(120)), None, LIMITS), 20_000);
        assert_eq!(polling_ms(Some(s(5)), Some(Duration::from_millis(500)), LIMITS), 0);
    }

    #[test]
    fn grpc_timeouts_parse_as_the_protocol_writes_them() {
        assert_eq!(grpc_timeout("40S"), Some(Duration::from_secs(40)));
        assert_eq!(grpc_timeout("2500m"), Some(Duration::from_millis(2_500)));
        assert_eq!(grpc_timeout("1H"), Some(Duration::from_secs(3_600)));
        for bad in ["", "S", "40", "40s", "123456789S", "-1S", "1.5S"] {
            assert_eq!(grpc_timeout(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn a_receive_becomes_one_pop_of_any_queue() {
        let command = pop_command(&request(), true, Some(Duration::from_secs(40)), LIMITS, 7).unwrap();
        assert_eq!(command.request_code(), RequestCode::PopMessage);
        let h: PopMessageRequestHeader = command.decode_header().unwrap();
        assert_eq!((h.consumer_group.as_str(), h.topic.as_str(), h.queue_id), ("G", "T", -1));
        assert_eq!((h.max_msg_nums, h.invisible_time, h.poll_time), (16, 15_000, 20_000));
        assert_eq!((h.exp_type.as_deref(), h.exp.as_deref()), (Some("TAG"), Some("TagA")));
        assert_eq!((h.order, h.init_mode, h.born_time), (Some(true), INIT_MODE_MAX, 7));
        assert_eq!(h.attempt_id.as_deref(), Some("a1"));

        let mut r = request();
        r.filter_expression = Some(FilterExpression { r#type: FilterType::Sql as i32, expression: "a > 1".into() });
        r.invisible_duration = None;
        r.auto_renew = true;
        let h: PopMessageRequestHeader = pop_command(&r, false, None, LIMITS, 0).unwrap().decode_header().unwrap();
        assert_eq!((h.exp_type.as_deref(), h.invisible_time, h.order), (Some("SQL92"), 30_000, Some(false)));
    }

    #[test]
    fn bad_receives_get_the_proxys_codes() {
        let code = |r: ReceiveMessageRequest| pop_command(&r, false, None, LIMITS, 0).unwrap_err().code;
        let mut r = request();
        r.batch_size = 33;
        assert_eq!(code(r), Code::BadRequest as i32);
        let mut r = request();
        r.invisible_duration = Some(prost_types::Duration { seconds: 0, nanos: 1 });
        assert_eq!(code(r), Code::IllegalInvisibleTime as i32);
        let mut r = request();
        r.invisible_duration = None;
        assert_eq!(code(r), Code::IllegalInvisibleTime as i32);
        let mut r = request();
        r.group = resource("bad group");
        assert_eq!(code(r), Code::IllegalConsumerGroup as i32);
        let mut r = request();
        r.message_queue = None;
        assert_eq!(code(r), Code::IllegalTopic as i32);
    }

    fn stored(topic: &str, queue_id: i32, queue_offset: i64, reconsume_times: i32) -> MessageExt {
        let mut ext = MessageExt {
            message: raftmq_common::message::Message::new(topic, &b"body"[..]),
            queue_id,
            queue_offset,
            reconsume_times,
            ..MessageExt::default()
        };
        ext.message.set_uniq_key(format!("ID-{queue_offset}"));
        ext
    }

    fn pop_answer(records: &[MessageExt], order_count_info: Option<&str>) -> RemotingCommand {
        let header = PopMessageResponseHeader {
            pop_time: 1_000,
            invisible_time: 15_000,
            revive_qid: 0,
            rest_num: 0,
            start_offset_info: Some("0 2 5;1 0 0".into()),
            msg_offset_info: Some("0 2 5,6;1 0 0".into()),
            order_count_info: order_count_info.map(str::to_owned),
        };
        let mut body = BytesMut::new();
        for r in records {
            encode_record_into(r, &mut body).unwrap();
        }
        RemotingCommand::success().with_header(&header).with_body(body.freeze())
    }

    fn messages(responses: &[ReceiveMessageResponse]) -> Vec<crate::pb::Message> {
        responses
            .iter()
            .filter_map(|r| match &r.content {
                Some(Content::Message(m)) => Some(m.clone()),
                _ => None,
            })
            .collect()
    }

    #[test]
    fn found_messages_stream_a_status_then_each_with_its_receipt() {
        let mut retried = stored("%RETRY%G_T", 0, 0, 1);
        retried.message.properties.insert(properties::RETRY_TOPIC, "T");
        let answer = pop_answer(&[stored("T", 2, 5, 0), stored("T", 2, 6, 0), retried], None);
        let responses = receive_responses(&answer, "broker-a");
        assert!(matches!(&responses[0].content, Some(Content::Status(s)) if s.code == Code::Ok as i32));
        let got = messages(&responses);
        assert_eq!(got.len(), 3);
        let sp = got[1].system_properties.clone().unwrap();
        assert_eq!(sp.receipt_handle.as_deref(), Some("5 1000 15000 0 0 broker-a 2 6"));
        assert_eq!(sp.invisible_duration, Some(prost_types::Duration { seconds: 15, nanos: 0 }));
        assert_eq!(sp.delivery_attempt, Some(1));
        let retry = got[2].system_properties.clone().unwrap();
        assert_eq!(retry.receipt_handle.as_deref(), Some("0 1000 15000 0 1 broker-a 0 0"));
        assert_eq!(retry.delivery_attempt, Some(2), "a retried message's attempt is reconsumeTimes + 1");
        assert_eq!(got[2].topic.as_ref().unwrap().name, "T");
        let parsed = ExtraInfo::parse(sp.receipt_handle.as_deref().unwrap()).unwrap();
        assert_eq!((parsed.queue_id, parsed.queue_offset), (2, Some(6)));
    }

    #[test]
    fn fifo_attempts_count_the_queues_deliveries() {
        let answer = pop_answer(&[stored("T", 2, 5, 0)], Some("0 2 2"));
        let got = messages(&receive_responses(&answer, "b"));
        assert_eq!(got[0].system_properties.as_ref().unwrap().delivery_attempt, Some(3));
    }

    #[test]
    fn nothing_found_and_refusals_are_one_status() {
        let only = |answer: RemotingCommand| {
            let r = receive_responses(&answer, "b");
            assert_eq!(r.len(), 1);
            match &r[0].content {
                Some(Content::Status(s)) => s.code,
                other => panic!("not a status: {other:?}"),
            }
        };
        assert_eq!(only(RemotingCommand::response(ResponseCode::PollingTimeout, None)), Code::MessageNotFound as i32);
        assert_eq!(only(pop_answer(&[], None)), Code::MessageNotFound as i32);
        assert_eq!(only(RemotingCommand::response(ResponseCode::PollingFull, None)), Code::TooManyRequests as i32);
        assert_eq!(
            only(RemotingCommand::response(ResponseCode::SubscriptionGroupNotExist, Some("no group".into()))),
            Code::ConsumerGroupNotFound as i32
        );
    }

    #[test]
    fn every_stream_ends_with_the_time_it_completed() {
        for responses in [receive_responses(&pop_answer(&[stored("T", 2, 5, 0)], None), "b"), not_found()] {
            let before = responses.len();
            let ended = completed(responses, 1_700_000_000_123);
            assert_eq!(ended.len(), before + 1);
            match &ended[before].content {
                Some(Content::DeliveryTimestamp(t)) => assert_eq!((t.seconds, t.nanos), (1_700_000_000, 123_000_000)),
                other => panic!("the last response is not the completion time: {other:?}"),
            }
        }
    }
}
