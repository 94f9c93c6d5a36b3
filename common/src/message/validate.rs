//! Topic, group and message validation (`TopicValidator`, `client/.../Validators.java`, 4.9.8), and the
//! system and retry/DLQ topic names.
//!
//! Every check is a pure function returning a [`ValidationError`] whose `Display` text is suitable as
//! a response remark, and [`ValidationError::response_code`] says which code the broker answers with
//! (MESSAGE_ILLEGAL for a bad message, NO_PERMISSION for a forbidden topic, SYSTEM_ERROR otherwise,
//! as `SendMessageProcessor`/`TopicValidator` do).

use thiserror::Error;

use super::model::Message;
use super::properties::PropertiesError;
use crate::limits::GROUP_NAME_LENGTH_MAX_CHARS;
use crate::limits::PATH_COMPONENT_MAX_BYTES;
use crate::limits::TOPIC_NAME_LENGTH_MAX_CHARS;
use crate::limits::TOPIC_STORE_NAME_MAX_BYTES;
use crate::protocol::ResponseCode;

/// Created by the broker when `autoCreateTopicEnable`; the template for auto-created topics.
pub const AUTO_CREATE_TOPIC_KEY_TOPIC: &str = "TBW102";
/// Delayed messages wait here (queue = level − 1).
pub const RMQ_SYS_SCHEDULE_TOPIC: &str = "SCHEDULE_TOPIC_XXXX";
/// Reserved for the benchmark tool.
pub const RMQ_SYS_BENCHMARK_TOPIC: &str = "BenchmarkTest";
/// Transactional half messages.
pub const RMQ_SYS_TRANS_HALF_TOPIC: &str = "RMQ_SYS_TRANS_HALF_TOPIC";
/// Message trace records.
pub const RMQ_SYS_TRACE_TOPIC: &str = "RMQ_SYS_TRACE_TOPIC";
/// Suffix of the request/reply topic (`MixAll.REPLY_TOPIC_POSTFIX`).
pub const REPLY_TOPIC_POSTFIX: &str = "REPLY_TOPIC";
/// `MSG_TYPE` of a reply (`MixAll.REPLY_MESSAGE_FLAG`): the producer sends it as SEND_REPLY_MESSAGE_V2.
pub const REPLY_MESSAGE_FLAG: &str = "reply";

/// The cluster's request/reply topic, `<cluster>_REPLY_TOPIC` (`MixAll.getReplyTopic`).
pub fn reply_topic(cluster: &str) -> String {
    format!("{cluster}_{REPLY_TOPIC_POSTFIX}")
}
/// Commit/rollback markers of half messages.
pub const RMQ_SYS_TRANS_OP_HALF_TOPIC: &str = "RMQ_SYS_TRANS_OP_HALF_TOPIC";
/// Half messages checked too often.
pub const RMQ_SYS_TRANS_CHECK_MAX_TIME_TOPIC: &str = "TRANS_CHECK_MAX_TIME_TOPIC";
/// Broker self test.
pub const RMQ_SYS_SELF_TEST_TOPIC: &str = "SELF_TEST_TOPIC";
/// Offset-moved events.
pub const RMQ_SYS_OFFSET_MOVED_EVENT: &str = "OFFSET_MOVED_EVENT";
/// Any topic with this prefix is a system topic.
pub const SYSTEM_TOPIC_PREFIX: &str = "rmq_sys_";
/// Retry topic of a consumer group: `%RETRY%<group>`.
pub const RETRY_GROUP_TOPIC_PREFIX: &str = "%RETRY%";
/// Dead-letter topic of a consumer group: `%DLQ%<group>`.
pub const DLQ_GROUP_TOPIC_PREFIX: &str = "%DLQ%";

/// `TopicValidator.SYSTEM_TOPIC_SET` (4.9.8).
pub const SYSTEM_TOPICS: &[&str] = &[
    AUTO_CREATE_TOPIC_KEY_TOPIC,
    RMQ_SYS_SCHEDULE_TOPIC,
    RMQ_SYS_BENCHMARK_TOPIC,
    RMQ_SYS_TRANS_HALF_TOPIC,
    RMQ_SYS_TRACE_TOPIC,
    RMQ_SYS_TRANS_OP_HALF_TOPIC,
    RMQ_SYS_TRANS_CHECK_MAX_TIME_TOPIC,
    RMQ_SYS_SELF_TEST_TOPIC,
    RMQ_SYS_OFFSET_MOVED_EVENT,
];

/// `TopicValidator.NOT_ALLOWED_SEND_TOPIC_SET` (4.9.8): topics a client may not send to.
pub const NOT_ALLOWED_SEND_TOPICS: &[&str] = &[
    RMQ_SYS_SCHEDULE_TOPIC,
    RMQ_SYS_TRANS_HALF_TOPIC,
    RMQ_SYS_TRANS_OP_HALF_TOPIC,
    RMQ_SYS_TRANS_CHECK_MAX_TIME_TOPIC,
    RMQ_SYS_SELF_TEST_TOPIC,
    RMQ_SYS_OFFSET_MOVED_EVENT,
];

const VALID_CHARS: &str = "^[%|a-zA-Z0-9_-]+$";

/// Why a topic, group or message was refused.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum ValidationError {
    /// Empty or whitespace only.
    #[error("The specified topic is blank.")]
    TopicBlank,
    /// A character outside `[%|a-zA-Z0-9_-]`.
    #[error("The specified topic[{0}] contains illegal characters, allowing only {VALID_CHARS}")]
    TopicIllegalChars(String),
    /// Longer than [`TOPIC_NAME_LENGTH_MAX_CHARS`].
    #[error("The specified topic is longer than topic max length {max}.")]
    TopicTooLong {
        /// The limit.
        max: usize,
    },
    /// A reserved system topic where a user topic is required.
    #[error("The topic[{0}] is conflict with system topic.")]
    SystemTopic(String),
    /// A topic clients may not send to.
    #[error("Sending message to topic[{0}] is forbidden.")]
    NotAllowedSendTopic(String),
    /// Empty or whitespace only.
    #[error("the specified group is blank")]
    GroupBlank,
    /// A character outside `[%|a-zA-Z0-9_-]`.
    #[error("the specified group[{0}] contains illegal characters, allowing only {VALID_CHARS}")]
    GroupIllegalChars(String),
    /// Longer than [`GROUP_NAME_LENGTH_MAX_CHARS`].
    #[error("the specified group is longer than group max length {max}.")]
    GroupTooLong {
        /// The limit.
        max: usize,
    },
    /// A consumer group whose `%RETRY%` topic would be too long to store.
    #[error(
        "the specified group is longer than {max}: its retry topic %RETRY%<group> would pass the \
         {TOPIC_STORE_NAME_MAX_BYTES} bytes a ConsumeQueue directory name holds"
    )]
    ConsumerGroupTooLong {
        /// The limit.
        max: usize,
    },
    /// No body.
    #[error("the message body length is zero")]
    BodyEmpty,
    /// Body larger than allowed.
    #[error("the message body size over max value, MAX: {max}")]
    BodyTooLarge {
        /// Body length in bytes.
        len: usize,
        /// The limit in bytes.
        max: usize,
    },
    /// Properties that the wire format cannot carry.
    #[error("the message properties are illegal: {0}")]
    Properties(#[from] PropertiesError),
}

impl ValidationError {
    /// The response code a broker answers this error with.
    pub fn response_code(&self) -> ResponseCode {
        match self {
            ValidationError::NotAllowedSendTopic(_) => ResponseCode::NoPermission,
            ValidationError::BodyEmpty | ValidationError::BodyTooLarge { .. } | ValidationError::Properties(_) => {
                ResponseCode::MessageIllegal
            }
            _ => ResponseCode::SystemError,
        }
    }
}

fn is_blank(s: &str) -> bool {
    s.chars().all(char::is_whitespace)
}

fn has_illegal_chars(s: &str) -> bool {
    !s.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'%' | b'|' | b'_' | b'-'))
}

/// Checks a topic name: not blank, only `[%|a-zA-Z0-9_-]`, at most 127 chars.
pub fn validate_topic(topic: &str) -> Result<(), ValidationError> {
    validate_topic_at_most(topic, TOPIC_NAME_LENGTH_MAX_CHARS)
}

fn validate_topic_at_most(topic: &str, max: usize) -> Result<(), ValidationError> {
    if is_blank(topic) {
        return Err(ValidationError::TopicBlank);
    }
    if has_illegal_chars(topic) {
        return Err(ValidationError::TopicIllegalChars(topic.to_owned()));
    }
    // ASCII only past this point, so bytes are chars.
    if topic.len() > max {
        return Err(ValidationError::TopicTooLong { max });
    }
    Ok(())
}

/// Checks a topic a client sends to: [`validate_topic`] and not one of [`NOT_ALLOWED_SEND_TOPICS`].
pub fn validate_send_topic(topic: &str) -> Result<(), ValidationError> {
    validate_topic(topic)?;
    if is_not_allowed_send_topic(topic) {
        return Err(ValidationError::NotAllowedSendTopic(topic.to_owned()));
    }
    Ok(())
}

/// Checks a topic a user creates: [`validate_topic`] and not a system topic.
pub fn validate_user_topic(topic: &str) -> Result<(), ValidationError> {
    validate_topic(topic)?;
    if is_system_topic(topic) {
        return Err(ValidationError::SystemTopic(topic.to_owned()));
    }
    Ok(())
}

/// Whether `topic` is a system topic (`TopicValidator.isSystemTopic`).
pub fn is_system_topic(topic: &str) -> bool {
    SYSTEM_TOPICS.contains(&topic) || topic.starts_with(SYSTEM_TOPIC_PREFIX)
}

/// Whether clients may not send to `topic` (`TopicValidator.isNotAllowedSendTopic`).
pub fn is_not_allowed_send_topic(topic: &str) -> bool {
    NOT_ALLOWED_SEND_TOPICS.contains(&topic)
}

/// Checks a producer or consumer group name: not blank, only `[%|a-zA-Z0-9_-]`, at most 255 chars.
pub fn validate_group(group: &str) -> Result<(), ValidationError> {
    if is_blank(group) {
        return Err(ValidationError::GroupBlank);
    }
    if has_illegal_chars(group) {
        return Err(ValidationError::GroupIllegalChars(group.to_owned()));
    }
    if group.len() > GROUP_NAME_LENGTH_MAX_CHARS {
        return Err(ValidationError::GroupTooLong { max: GROUP_NAME_LENGTH_MAX_CHARS });
    }
    Ok(())
}

/// Checks a consumer group the broker keeps state for: [`validate_group`], and its `%RETRY%` topic
/// (which the broker creates) fits [`TOPIC_STORE_NAME_MAX_BYTES`]. Java allows such groups; their
/// retry topic cannot be stored, so they are refused where they come in (heartbeat, send-back,
/// offset commits), not when a replicated apply could fail on them.
pub fn validate_consumer_group(group: &str) -> Result<(), ValidationError> {
    validate_group(group)?;
    let max = TOPIC_STORE_NAME_MAX_BYTES - RETRY_GROUP_TOPIC_PREFIX.len();
    if group.len() > max {
        return Err(ValidationError::ConsumerGroupTooLong { max });
    }
    Ok(())
}

/// Checks a topic whose offsets or data the broker stores: not blank, only `[%|a-zA-Z0-9_-]`, at most
/// [`TOPIC_STORE_NAME_MAX_BYTES`] (a consumer group's `%RETRY%`/`%DLQ%` topic may pass 127).
pub fn validate_stored_topic(topic: &str) -> Result<(), ValidationError> {
    validate_topic_at_most(topic, TOPIC_STORE_NAME_MAX_BYTES)
}

/// Whether `name` is one safe file-name component: not empty, not `.` or `..`, no `/`, `\\` or
/// NUL (so not absolute, and never a path of several parts), at most [`PATH_COMPONENT_MAX_BYTES`].
/// Joined to a directory, such a name always names an entry of that directory and nothing else.
/// Every name from the network, the Raft log or a snapshot manifest passes this where it becomes a
/// path, whatever checked it before.
pub fn is_safe_path_component(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= PATH_COMPONENT_MAX_BYTES
        && name != "."
        && name != ".."
        && !name.bytes().any(|b| matches!(b, b'/' | b'\\' | 0))
}

/// Whether a ConsumeQueue directory of its own can be made for `topic`: one safe path component
/// ([`is_safe_path_component`]) of at most [`TOPIC_STORE_NAME_MAX_BYTES`]. The apply path decides
/// with it on every replica alike (a pure function of the entry), so a forged or corrupt entry
/// naming `a/../../x` is refused the same way everywhere and never touches a file outside the
/// store. Every door (`validate_stored_topic`, `validate_group` for `%RETRY%`/`%DLQ%` names) only
/// ever let `[%|a-zA-Z0-9_-]` through.
pub fn is_storable_topic_dir(topic: &str) -> bool {
    is_safe_path_component(topic) && topic.len() <= TOPIC_STORE_NAME_MAX_BYTES
}

/// Checks a message before sending or storing (`Validators.checkMessage`): a sendable topic, a body of
/// 1..=`body_max_bytes` bytes, and properties that survive the wire (≤ 32,767 bytes).
pub fn validate_message(msg: &Message, body_max_bytes: usize) -> Result<(), ValidationError> {
    validate_send_topic(&msg.topic)?;
    if msg.body.is_empty() {
        return Err(ValidationError::BodyEmpty);
    }
    if msg.body.len() > body_max_bytes {
        return Err(ValidationError::BodyTooLarge { len: msg.body.len(), max: body_max_bytes });
    }
    msg.properties.check_wire_safe()?;
    Ok(())
}

/// `%RETRY%<group>` (`MixAll.getRetryTopic`).
pub fn retry_topic(group: &str) -> String {
    format!("{RETRY_GROUP_TOPIC_PREFIX}{group}")
}

/// `%RETRY%<group>_<topic>`: where popped messages of `topic` not acked in time are re-put
/// (`KeyBuilder.buildPopRetryTopicV1`).
pub fn pop_retry_topic(group: &str, topic: &str) -> String {
    format!("{RETRY_GROUP_TOPIC_PREFIX}{group}_{topic}")
}

/// `%DLQ%<group>` (`MixAll.getDLQTopic`).
pub fn dlq_topic(group: &str) -> String {
    format!("{DLQ_GROUP_TOPIC_PREFIX}{group}")
}

/// Whether `topic` is a retry topic.
pub fn is_retry_topic(topic: &str) -> bool {
    topic.starts_with(RETRY_GROUP_TOPIC_PREFIX)
}

/// Whether `topic` is a dead-letter topic.
pub fn is_dlq_topic(topic: &str) -> bool {
    topic.starts_with(DLQ_GROUP_TOPIC_PREFIX)
}

/// The consumer group of a retry topic.
pub fn group_of_retry_topic(topic: &str) -> Option<&str> {
    topic.strip_prefix(RETRY_GROUP_TOPIC_PREFIX)
}

/// The consumer group of a dead-letter topic.
pub fn group_of_dlq_topic(topic: &str) -> Option<&str> {
    topic.strip_prefix(DLQ_GROUP_TOPIC_PREFIX)
}

#[cfg(test)]
mod tests {
    use bytes::Bytes;

    use super::*;
    use crate::limits::MESSAGE_BODY_SIZE_MAX_BYTES;

    #[test]
    fn topic_table() {
        let max = "a".repeat(127);
        let over = "a".repeat(128);
        let cases: &[(&str, Result<(), ValidationError>)] = &[
            ("TopicTest", Ok(())),
            ("%RETRY%group_1", Ok(())),
            ("a|b-c_d%9", Ok(())),
            (&max, Ok(())),
            ("", Err(ValidationError::TopicBlank)),
            ("  \t", Err(ValidationError::TopicBlank)),
            (&over, Err(ValidationError::TopicTooLong { max: 127 })),
            ("a b", Err(ValidationError::TopicIllegalChars("a b".into()))),
            ("topic.name", Err(ValidationError::TopicIllegalChars("topic.name".into()))),
            ("tópico", Err(ValidationError::TopicIllegalChars("tópico".into()))),
            ("a#b", Err(ValidationError::TopicIllegalChars("a#b".into()))),
        ];
        for (topic, expected) in cases {
            assert_eq!(&validate_topic(topic), expected, "{topic:?}");
        }
    }

    #[test]
    fn system_and_forbidden_topics() {
        for t in SYSTEM_TOPICS {
            assert!(is_system_topic(t), "{t}");
            assert_eq!(validate_user_topic(t), Err(ValidationError::SystemTopic((*t).into())));
        }
        assert!(is_system_topic("rmq_sys_anything"));
        assert!(!is_system_topic("TopicTest"));
        for t in NOT_ALLOWED_SEND_TOPICS {
            let err = validate_send_topic(t).unwrap_err();
            assert_eq!(err.response_code(), ResponseCode::NoPermission);
            assert_eq!(err.to_string(), format!("Sending message to topic[{t}] is forbidden."));
        }
        // TBW102, the trace and benchmark topics are system topics that clients may still send to.
        for t in [AUTO_CREATE_TOPIC_KEY_TOPIC, RMQ_SYS_TRACE_TOPIC, RMQ_SYS_BENCHMARK_TOPIC] {
            assert_eq!(validate_send_topic(t), Ok(()));
        }
    }

    #[test]
    fn group_table() {
        let over = "g".repeat(256);
        assert_eq!(validate_group("please_rename_unique_group_name"), Ok(()));
        assert_eq!(validate_group(&"g".repeat(255)), Ok(()));
        assert_eq!(validate_group(""), Err(ValidationError::GroupBlank));
        assert_eq!(validate_group(&over), Err(ValidationError::GroupTooLong { max: 255 }));
        assert_eq!(validate_group("g/1"), Err(ValidationError::GroupIllegalChars("g/1".into())));
        assert_eq!(
            validate_group("g/1").unwrap_err().to_string(),
            "the specified group[g/1] contains illegal characters, allowing only ^[%|a-zA-Z0-9_-]+$"
        );
    }

    #[test]
    fn consumer_group_and_stored_topic_tables() {
        // 248 + "%RETRY%" = 255 bytes, the most a directory name holds.
        assert_eq!(validate_consumer_group(&"g".repeat(248)), Ok(()));
        assert_eq!(retry_topic(&"g".repeat(248)).len(), TOPIC_STORE_NAME_MAX_BYTES);
        assert_eq!(validate_consumer_group(&"g".repeat(249)), Err(ValidationError::ConsumerGroupTooLong { max: 248 }));
        assert_eq!(validate_consumer_group(&"g".repeat(256)), Err(ValidationError::GroupTooLong { max: 255 }));
        assert_eq!(validate_consumer_group("../g"), Err(ValidationError::GroupIllegalChars("../g".into())));
        assert_eq!(validate_consumer_group(""), Err(ValidationError::GroupBlank));

        assert_eq!(validate_stored_topic(&retry_topic(&"g".repeat(248))), Ok(()));
        assert_eq!(validate_stored_topic(&"t".repeat(256)), Err(ValidationError::TopicTooLong { max: 255 }));
        assert_eq!(validate_stored_topic("a/b"), Err(ValidationError::TopicIllegalChars("a/b".into())));
        assert_eq!(validate_stored_topic(" "), Err(ValidationError::TopicBlank));

        let long = "t".repeat(256);
        let over = format!("%RETRY%{}", "g".repeat(249));
        let unstorable = [
            "",
            ".",
            "..",
            "/etc",
            "a\0b",
            long.as_str(),
            &format!("a/{long}"),
            &over,
            "a/b",
            "T/../../../x",
            "%RETRY%a/../b",
            "..\\x",
            "a\\b",
            "/",
        ];
        for name in unstorable {
            assert!(!is_storable_topic_dir(name), "{name:?}");
        }
        for storable in ["T", "%RETRY%g", "a.b", "...", ".hidden", &"t".repeat(255)] {
            assert!(is_storable_topic_dir(storable), "{storable:?}");
            assert!(is_safe_path_component(storable), "{storable:?}");
        }
    }

    #[test]
    fn message_table() {
        let ok = Message::new("T", &b"x"[..]);
        assert_eq!(validate_message(&ok, MESSAGE_BODY_SIZE_MAX_BYTES), Ok(()));

        let empty = Message::new("T", Bytes::new());
        let err = validate_message(&empty, MESSAGE_BODY_SIZE_MAX_BYTES).unwrap_err();
        assert_eq!(err, ValidationError::BodyEmpty);
        assert_eq!(err.response_code(), ResponseCode::MessageIllegal);

        let big = Message::new("T", vec![0u8; 11]);
        let err = validate_message(&big, 10).unwrap_err();
        assert_eq!(err, ValidationError::BodyTooLarge { len: 11, max: 10 });
        assert_eq!(err.to_string(), "the message body size over max value, MAX: 10");

        let mut props = Message::new("T", &b"x"[..]);
        props.properties.insert("k", "v".repeat(40_000));
        let err = validate_message(&props, MESSAGE_BODY_SIZE_MAX_BYTES).unwrap_err();
        assert!(matches!(err, ValidationError::Properties(PropertiesError::TooLong { .. })));
        assert_eq!(err.response_code(), ResponseCode::MessageIllegal);

        let bad_topic = Message::new("bad topic", &b"x"[..]);
        let err = validate_message(&bad_topic, MESSAGE_BODY_SIZE_MAX_BYTES).unwrap_err();
        assert_eq!(err.response_code(), ResponseCode::SystemError);
    }

    #[test]
    fn retry_and_dlq_topics() {
        assert_eq!(retry_topic("g1"), "%RETRY%g1");
        assert_eq!(dlq_topic("g1"), "%DLQ%g1");
        assert!(is_retry_topic("%RETRY%g1") && !is_retry_topic("g1"));
        assert!(is_dlq_topic("%DLQ%g1") && !is_dlq_topic("%RETRY%g1"));
        assert_eq!(group_of_retry_topic("%RETRY%g1"), Some("g1"));
        assert_eq!(group_of_dlq_topic("%DLQ%g1"), Some("g1"));
        assert_eq!(group_of_retry_topic("g1"), None);
        assert_eq!(validate_topic(&retry_topic("g1")), Ok(()));
    }
}
