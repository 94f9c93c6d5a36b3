//! SendMessage: each proto `Message` becomes one remoting SEND_MESSAGE, with RocketMQ's property
//! names, so the broker stores it exactly as a remoting producer's message. Pure.
//!
//! | proto | stored as |
//! |---|---|
//! | `system_properties.message_id` | `UNIQ_KEY` (the id the client sees and the SendResultEntry returns) |
//! | `tag`, `keys` | `TAGS`, `KEYS` (space-joined) |
//! | `message_group` (FIFO) | `__SHARDINGKEY`, and the queue `hashCode(group) mod writeQueueNums` |
//! | `delivery_timestamp` (DELAY) | `TIMER_DELIVER_MS` (the broker's timer path), unless already due |
//! | TRANSACTION | `TRAN_MSG=true`, `PGROUP`, sysFlag PREPARED (the broker's half path) |
//! | `orphaned_transaction_recovery_duration` | `CHECK_IMMUNITY_TIME_IN_SECONDS` |
//! | `user_properties` | themselves; reserved names refused |
//! | GZIP `body_encoding` | the body inflated (bounded by `maxMessageSize`) and stored plain |
//!
//! Validation follows RocketMQ proxy's `SendMessageActivity` and answers its codes
//! (ILLEGAL_TOPIC, ILLEGAL_MESSAGE_TAG, ILLEGAL_MESSAGE_KEY, ILLEGAL_MESSAGE_GROUP,
//! ILLEGAL_MESSAGE_PROPERTY_KEY, ILLEGAL_MESSAGE_ID, MESSAGE_BODY_TOO_LARGE, MESSAGE_BODY_EMPTY,
//! MESSAGE_PROPERTIES_TOO_LARGE, MESSAGE_PROPERTY_CONFLICT_WITH_TYPE, ILLEGAL_DELIVERY_TIME);
//! a refused message is never sent to the broker.

use std::io::Read;

use raftmq_common::java::string_hash_code;
use raftmq_common::limits::GRPC_MESSAGE_GROUP_MAX_BYTES;
use raftmq_common::limits::GRPC_MESSAGE_ID_MAX_BYTES;
use raftmq_common::limits::GRPC_USER_PROPERTIES_MAX_BYTES;
use raftmq_common::message::properties;
use raftmq_common::message::properties::Properties;
use raftmq_common::message::sys_flag;
use raftmq_common::message::validate::AUTO_CREATE_TOPIC_KEY_TOPIC;
use raftmq_common::message::validate::ValidationError;
use raftmq_common::message::validate::validate_send_topic;
use raftmq_common::protocol::RemotingCommand;
use raftmq_common::protocol::RequestCode;
use raftmq_common::protocol::ResponseCode;
use raftmq_common::protocol::body::topic::TopicConfig;
use raftmq_common::protocol::command::FieldStr;
use raftmq_common::protocol::header::send::SendMessageRequestHeader;
use raftmq_common::protocol::header::send::SendMessageResponseHeader;

use crate::pb::Code;
use crate::pb::Encoding;
use crate::pb::Message;
use crate::pb::MessageType;
use crate::pb::SendResultEntry;
use crate::pb::Status;
use crate::pb::SystemProperties;
use crate::status::of_remoting;
use crate::status::ok;
use crate::status::status;
use crate::transaction::producer_group_of;
use crate::transaction::transaction_id;

/// Queues an auto-created topic gets (the remoting client's `defaultTopicQueueNums`).
const DEFAULT_TOPIC_QUEUE_COUNT: i32 = 4;
/// RocketMQ's separator of several keys in `KEYS`.
const KEY_SEPARATOR: &str = " ";

/// One message ready for the broker.
#[derive(Debug)]
pub struct SendPlan {
    /// The SEND_MESSAGE request.
    pub command: RemotingCommand,
    /// The client's message id (`UNIQ_KEY`).
    pub message_id: String,
    /// A transactional half.
    pub half: bool,
}

/// What the broker limits a send by.
#[derive(Debug, Clone, Copy)]
pub struct SendLimits {
    /// `maxMessageSize`.
    pub body_max_bytes: usize,
}

fn has_separator(s: &str) -> bool {
    s.contains([properties::NAME_VALUE_SEPARATOR, properties::PROPERTY_SEPARATOR])
}

fn topic_status(e: &ValidationError) -> Status {
    match e {
        ValidationError::NotAllowedSendTopic(_) => status(Code::Forbidden, e.to_string()),
        _ => status(Code::IllegalTopic, e.to_string()),
    }
}

/// The message type the properties make, checked against the one the client declared.
fn message_type(sp: &SystemProperties, delayed: bool) -> Result<MessageType, Status> {
    let grouped = sp.message_group.is_some();
    let declared = MessageType::try_from(sp.message_type).unwrap_or(MessageType::Unspecified);
    let conflict = |why: &str| Err(status(Code::MessagePropertyConflictWithType, why.to_owned()));
    match declared {
        MessageType::Unspecified | MessageType::Normal if grouped && delayed => {
            conflict("a message cannot have both a message group and a delivery timestamp")
        }
        MessageType::Unspecified if grouped => Ok(MessageType::Fifo),
        MessageType::Unspecified if delayed => Ok(MessageType::Delay),
        MessageType::Unspecified => Ok(MessageType::Normal),
        MessageType::Normal if grouped => conflict("a NORMAL message cannot have a message group"),
        MessageType::Fifo if !grouped => conflict("a FIFO message needs a message group"),
        MessageType::Fifo if delayed => conflict("a FIFO message cannot have a delivery timestamp"),
        MessageType::Transaction if grouped || delayed => {
            conflict("a TRANSACTION message cannot have a message group or a delivery timestamp")
        }
        MessageType::Normal | MessageType::Fifo | MessageType::Delay | MessageType::Transaction => Ok(declared),
        MessageType::Lite | MessageType::Priority => {
            Err(status(Code::Unsupported, format!("{} messages are not supported", declared.as_str_name())))
        }
    }
}

fn body_of(message: &Message, limits: SendLimits) -> Result<Vec<u8>, Status> {
    let too_large = |len: usize| {
        status(
            Code::MessageBodyTooLarge,
            format!("the message body is {len} bytes, over the max of {} bytes", limits.body_max_bytes),
        )
    };
    let encoding = message.system_properties.as_ref().map(|sp| sp.body_encoding).unwrap_or_default();
    let body = if encoding == Encoding::Gzip as i32 {
        let mut inflated = Vec::new();
        let cap = limits.body_max_bytes as u64 + 1;
        flate2::read::GzDecoder::new(message.body.as_slice())
            .take(cap)
            .read_to_end(&mut inflated)
            .map_err(|e| status(Code::MessageCorrupted, format!("the GZIP body cannot be inflated: {e}")))?;
        inflated
    } else {
        message.body.clone()
    };
    if body.is_empty() {
        return Err(status(Code::MessageBodyEmpty, "the message body is empty"));
    }
    if body.len() > limits.body_max_bytes {
        return Err(too_large(body.len()));
    }
    Ok(body)
}

fn user_properties(message: &Message) -> Result<Properties, Status> {
    let mut props = Properties::new();
    let mut size = 0usize;
    let mut keys: Vec<&String> = message.user_properties.keys().collect();
    keys.sort();
    for key in keys {
        let value = &message.user_properties[key];
        if key.trim().is_empty() || properties::is_reserved_key(key) || has_separator(key) || has_separator(value) {
            return Err(status(Code::IllegalMessagePropertyKey, format!("the user property {key:?} is not allowed")));
        }
        size += key.len() + value.len();
        if size > GRPC_USER_PROPERTIES_MAX_BYTES {
            return Err(status(
                Code::MessagePropertiesTooLarge,
                format!("the user properties are over {GRPC_USER_PROPERTIES_MAX_BYTES} bytes"),
            ));
        }
        props.insert(key.as_str(), value.as_str());
    }
    Ok(props)
}

fn timestamp_ms(t: &prost_types::Timestamp) -> i64 {
    t.seconds.saturating_mul(1_000).saturating_add(i64::from(t.nanos) / 1_000_000)
}

/// The system properties RocketMQ stores for `sp`, added to `props`.
fn system_properties(sp: &SystemProperties, props: &mut Properties) -> Result<(), Status> {
    let id = sp.message_id.as_str();
    if id.trim().is_empty() || id.len() > GRPC_MESSAGE_ID_MAX_BYTES || has_separator(id) {
        return Err(status(Code::IllegalMessageId, format!("the message id {id:?} is not allowed")));
    }
    props.insert(properties::UNIQ_KEY, id);
    if let Some(tag) = &sp.tag {
        if tag.trim().is_empty() || tag.contains('|') || has_separator(tag) {
            return Err(status(Code::IllegalMessageTag, format!("the tag {tag:?} is not allowed")));
        }
        props.insert(properties::TAGS, tag.as_str());
    }
    if !sp.keys.is_empty() {
        if let Some(bad) =
            sp.keys.iter().find(|k| k.trim().is_empty() || k.contains(char::is_whitespace) || has_separator(k))
        {
            return Err(status(Code::IllegalMessageKey, format!("the key {bad:?} is not allowed")));
        }
        props.insert(properties::KEYS, sp.keys.join(KEY_SEPARATOR));
    }
    if let Some(group) = &sp.message_group {
        if group.trim().is_empty() || group.len() > GRPC_MESSAGE_GROUP_MAX_BYTES || has_separator(group) {
            return Err(status(
                Code::IllegalMessageGroup,
                format!(
                    "the message group {group:?} is blank, over {GRPC_MESSAGE_GROUP_MAX_BYTES} bytes or not allowed"
                ),
            ));
        }
        props.insert(properties::SHARDING_KEY, group.as_str());
    }
    if let Some(trace) = &sp.trace_context
        && !trace.is_empty()
        && !has_separator(trace)
    {
        props.insert("TRACE_CONTEXT", trace.as_str());
    }
    Ok(())
}

/// The queue a message goes to: by message group hash for FIFO, else the client's choice when
/// the topic has it, else -1 (the broker chooses).
fn queue_id(sp: &SystemProperties, topic: Option<&TopicConfig>) -> i32 {
    let Some(config) = topic.filter(|c| c.write_queue_nums > 0) else {
        return -1;
    };
    if let Some(group) = &sp.message_group {
        return string_hash_code(group).rem_euclid(config.write_queue_nums);
    }
    if (0..config.write_queue_nums).contains(&sp.queue_id) { sp.queue_id } else { -1 }
}

/// The SEND_MESSAGE a proto message becomes; `topic` is the topic's config when it exists,
/// `now_ms` the broker's clock.
pub fn send_plan(
    message: &Message,
    topic: Option<&TopicConfig>,
    limits: SendLimits,
    now_ms: i64,
) -> Result<SendPlan, Status> {
    let topic_name = message.topic.as_ref().map(|t| t.name.as_str()).unwrap_or_default();
    validate_send_topic(topic_name).map_err(|e| topic_status(&e))?;
    let sp =
        message.system_properties.as_ref().ok_or_else(|| status(Code::BadRequest, "system_properties are missing"))?;
    let deliver_at_ms = match &sp.delivery_timestamp {
        Some(t) if t.seconds < 0 || !(0..1_000_000_000).contains(&t.nanos) => {
            return Err(status(Code::IllegalDeliveryTime, format!("the delivery timestamp {t:?} is not a time")));
        }
        Some(t) => Some(timestamp_ms(t)),
        None => None,
    };
    let kind = message_type(sp, deliver_at_ms.is_some())?;
    let body = body_of(message, limits)?;
    let mut props = user_properties(message)?;
    system_properties(sp, &mut props)?;
    // Already due: stored as a normal message, as RocketMQ's proxy does.
    if let Some(at) = deliver_at_ms.filter(|at| *at > now_ms) {
        props.insert(properties::TIMER_DELIVER_MS, at.to_string());
    }
    let producer_group = producer_group_of(topic_name);
    let half = kind == MessageType::Transaction;
    let mut sys = 0;
    if half {
        props.insert(properties::TRAN_MSG, "true");
        props.insert(properties::PGROUP, producer_group.as_str());
        sys |= sys_flag::TRANSACTION_PREPARED_TYPE;
        if let Some(d) = &sp.orphaned_transaction_recovery_duration
            && d.seconds > 0
        {
            props.insert(properties::CHECK_IMMUNITY_TIME_IN_SECONDS, d.seconds.to_string());
        }
    }
    let header = SendMessageRequestHeader {
        producer_group: FieldStr::from(producer_group),
        topic: FieldStr::from(topic_name),
        default_topic: FieldStr::const_new(AUTO_CREATE_TOPIC_KEY_TOPIC),
        default_topic_queue_nums: DEFAULT_TOPIC_QUEUE_COUNT,
        queue_id: queue_id(sp, topic),
        sys_flag: sys,
        born_timestamp: sp.born_timestamp.as_ref().map(timestamp_ms).unwrap_or(now_ms),
        flag: 0,
        properties: Some(props.to_wire_string()),
        reconsume_times: None,
        unit_mode: None,
        batch: None,
        max_reconsume_times: None,
        bname: None,
    };
    let command = RemotingCommand::request_with_header(RequestCode::SendMessage, &header).with_body(body);
    Ok(SendPlan { command, message_id: sp.message_id.clone(), half })
}

/// The result entry of one message from the broker's answer.
pub fn result_entry(plan: &SendPlan, response: &RemotingCommand) -> SendResultEntry {
    let refused =
        |s: Status| SendResultEntry { status: Some(s), message_id: plan.message_id.clone(), ..Default::default() };
    let code = response.response_code();
    if code != ResponseCode::Success {
        return refused(of_remoting(code, response.remark.as_deref()));
    }
    match response.decode_header::<SendMessageResponseHeader>() {
        Ok(h) => SendResultEntry {
            status: Some(ok()),
            message_id: plan.message_id.clone(),
            transaction_id: if plan.half { transaction_id(&h.msg_id, h.queue_offset) } else { String::new() },
            offset: h.queue_offset,
            recall_handle: String::new(),
        },
        Err(e) => refused(status(Code::InternalServerError, format!("the broker's send answer is unreadable: {e}"))),
    }
}

/// The status of a whole SendMessage: OK when every entry is, the one status when all agree,
/// else MULTIPLE_RESULTS.
pub fn overall_status(entries: &[SendResultEntry]) -> Status {
    let mut codes = entries.iter().filter_map(|e| e.status.as_ref());
    let Some(first) = codes.next() else {
        return status(Code::BadRequest, "no message to send");
    };
    if codes.all(|s| s.code == first.code) {
        return first.clone();
    }
    status(Code::MultipleResults, "the messages have different results; see each entry")
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use raftmq_common::message::sys_flag::TRANSACTION_PREPARED_TYPE;

    use super::*;
    use crate::pb::Resource;

    const LIMITS: SendLimits = SendLimits { body_max_bytes: 1024 };
    const NOW_MS: i64 = 1_700_000_000_000;

    fn message(kind: MessageType) -> Message {
        Message {
            topic: Some(Resource { resource_namespace: String::new(), name: "orders".into() }),
            user_properties: HashMap::from([("color".to_owned(), "blue".to_owned())]),
            system_properties: Some(SystemProperties {
                tag: Some("TagA".into()),
                keys: vec!["k1".into(), "k2".into()],
                message_id: "0123ABCD".into(),
                message_type: kind as i32,
                queue_id: 1,
                ..Default::default()
            }),
            body: b"hello".to_vec(),
        }
    }

    fn topic(queues: i32) -> TopicConfig {
        TopicConfig {
            topic_name: "orders".into(),
            read_queue_nums: queues,
            write_queue_nums: queues,
            ..TopicConfig::default()
        }
    }

    fn header(plan: &SendPlan) -> (SendMessageRequestHeader, Properties) {
        let h = SendMessageRequestHeader::read_request(&plan.command).unwrap();
        let p = Properties::from_wire_str(h.properties.as_deref().unwrap());
        (h, p)
    }

    #[test]
    fn a_normal_message_keeps_rocketmqs_property_names_and_the_clients_queue() {
        let plan = send_plan(&message(MessageType::Normal), Some(&topic(4)), LIMITS, NOW_MS).unwrap();
        let (h, p) = header(&plan);
        assert_eq!((h.topic.as_str(), h.queue_id, h.sys_flag), ("orders", 1, 0));
        assert_eq!(p.get(properties::UNIQ_KEY), Some("0123ABCD"));
        assert_eq!(p.get(properties::TAGS), Some("TagA"));
        assert_eq!(p.get(properties::KEYS), Some("k1 k2"));
        assert_eq!(p.get("color"), Some("blue"));
        assert_eq!(plan.command.body.as_ref(), b"hello");
        assert!(!plan.half);
    }

    #[test]
    fn fifo_goes_to_the_queue_of_its_groups_hash_and_delay_to_the_timer() {
        let mut m = message(MessageType::Fifo);
        m.system_properties.as_mut().unwrap().message_group = Some("order-7".into());
        let (h, p) = header(&send_plan(&m, Some(&topic(8)), LIMITS, NOW_MS).unwrap());
        assert_eq!(h.queue_id, string_hash_code("order-7").rem_euclid(8));
        assert_eq!(p.get(properties::SHARDING_KEY), Some("order-7"));

        let mut m = message(MessageType::Delay);
        let at = NOW_MS + 5_000;
        m.system_properties.as_mut().unwrap().delivery_timestamp =
            Some(prost_types::Timestamp { seconds: at / 1_000, nanos: 0 });
        let (_, p) = header(&send_plan(&m, Some(&topic(8)), LIMITS, NOW_MS).unwrap());
        assert_eq!(p.get(properties::TIMER_DELIVER_MS), Some(at.to_string().as_str()));
        // Already due: a normal message.
        m.system_properties.as_mut().unwrap().delivery_timestamp =
            Some(prost_types::Timestamp { seconds: 1, nanos: 0 });
        let (_, p) = header(&send_plan(&m, Some(&topic(8)), LIMITS, NOW_MS).unwrap());
        assert_eq!(p.get(properties::TIMER_DELIVER_MS), None);
    }

    #[test]
    fn a_transactional_message_is_a_half_of_the_topics_producer_group() {
        let plan = send_plan(&message(MessageType::Transaction), Some(&topic(4)), LIMITS, NOW_MS).unwrap();
        let (h, p) = header(&plan);
        assert!(plan.half);
        assert_eq!(h.sys_flag & TRANSACTION_PREPARED_TYPE, TRANSACTION_PREPARED_TYPE);
        assert_eq!(p.get(properties::TRAN_MSG), Some("true"));
        assert_eq!(p.get(properties::PGROUP), Some("GRPC_PRODUCER_orders"));
        assert_eq!(h.producer_group, "GRPC_PRODUCER_orders");
    }

    #[test]
    fn malformed_messages_get_the_proxys_codes() {
        let code = |m: Message| send_plan(&m, Some(&topic(4)), LIMITS, NOW_MS).unwrap_err().code;
        let mut m = message(MessageType::Normal);
        m.topic = None;
        assert_eq!(code(m), Code::IllegalTopic as i32);
        let mut m = message(MessageType::Normal);
        m.body = vec![0; 1025];
        assert_eq!(code(m), Code::MessageBodyTooLarge as i32);
        let mut m = message(MessageType::Normal);
        m.body.clear();
        assert_eq!(code(m), Code::MessageBodyEmpty as i32);
        let mut m = message(MessageType::Normal);
        m.system_properties.as_mut().unwrap().tag = Some("a|b".into());
        assert_eq!(code(m), Code::IllegalMessageTag as i32);
        let mut m = message(MessageType::Normal);
        m.system_properties.as_mut().unwrap().keys = vec!["a b".into()];
        assert_eq!(code(m), Code::IllegalMessageKey as i32);
        let mut m = message(MessageType::Normal);
        m.system_properties.as_mut().unwrap().message_id = String::new();
        assert_eq!(code(m), Code::IllegalMessageId as i32);
        let mut m = message(MessageType::Normal);
        m.user_properties.insert(properties::TAGS.into(), "x".into());
        assert_eq!(code(m), Code::IllegalMessagePropertyKey as i32);
        let mut m = message(MessageType::Normal);
        m.user_properties.insert("big".into(), "x".repeat(GRPC_USER_PROPERTIES_MAX_BYTES));
        assert_eq!(code(m), Code::MessagePropertiesTooLarge as i32);
        let m = message(MessageType::Fifo);
        assert_eq!(code(m), Code::MessagePropertyConflictWithType as i32);
        let mut m = message(MessageType::Fifo);
        m.system_properties.as_mut().unwrap().message_group = Some("g".repeat(GRPC_MESSAGE_GROUP_MAX_BYTES + 1));
        assert_eq!(code(m), Code::IllegalMessageGroup as i32);
        let mut m = message(MessageType::Delay);
        m.system_properties.as_mut().unwrap().delivery_timestamp =
            Some(prost_types::Timestamp { seconds: -1, nanos: 0 });
        assert_eq!(code(m), Code::IllegalDeliveryTime as i32);
        let mut m = message(MessageType::Normal);
        m.system_properties = None;
        assert_eq!(code(m), Code::BadRequest as i32);
    }

    #[test]
    fn a_gzip_body_is_stored_inflated_and_bounded() {
        use std::io::Write;
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
        gz.write_all(b"inflated").unwrap();
        let mut m = message(MessageType::Normal);
        m.body = gz.finish().unwrap();
        m.system_properties.as_mut().unwrap().body_encoding = Encoding::Gzip as i32;
        let plan = send_plan(&m, None, LIMITS, NOW_MS).unwrap();
        assert_eq!(plan.command.body.as_ref(), b"inflated");
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
        gz.write_all(&[7; 4096]).unwrap();
        m.body = gz.finish().unwrap();
        assert_eq!(send_plan(&m, None, LIMITS, NOW_MS).unwrap_err().code, Code::MessageBodyTooLarge as i32);
        m.body = b"not gzip".to_vec();
        assert_eq!(send_plan(&m, None, LIMITS, NOW_MS).unwrap_err().code, Code::MessageCorrupted as i32);
    }

    #[test]
    fn answers_become_entries_and_one_overall_status() {
        let plan = send_plan(&message(MessageType::Transaction), Some(&topic(4)), LIMITS, NOW_MS).unwrap();
        let h = SendMessageResponseHeader {
            msg_id: "7F00000100002A9F0000000000000200".into(),
            queue_id: 0,
            queue_offset: 3,
            transaction_id: None,
        };
        let mut answer = RemotingCommand::response(ResponseCode::Success, None);
        answer = answer.with_header(&h);
        let e = result_entry(&plan, &answer);
        assert_eq!((e.message_id.as_str(), e.offset), ("0123ABCD", 3));
        assert_eq!(e.transaction_id, "7F00000100002A9F0000000000000200:3");
        let refused = result_entry(&plan, &RemotingCommand::response(ResponseCode::TopicNotExist, Some("no".into())));
        assert_eq!(refused.status.as_ref().unwrap().code, Code::TopicNotFound as i32);
        assert_eq!(overall_status(std::slice::from_ref(&e)).code, Code::Ok as i32);
        assert_eq!(overall_status(&[e, refused]).code, Code::MultipleResults as i32);
        assert_eq!(overall_status(&[]).code, Code::BadRequest as i32);
    }
}
