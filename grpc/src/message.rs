//! Stored messages as the proto `Message` a RocketMQ 5 client receives (ReceiveMessage,
//! RecoverOrphanedTransactionCommand), with the system properties RocketMQ's proxy fills
//! (`GrpcConverter.buildMessage`). The inverse of [`crate::send`]. Pure.
//!
//! | stored | proto |
//! |---|---|
//! | `UNIQ_KEY` (else the offsetMsgId) | `message_id` |
//! | `TAGS`, `KEYS` | `tag`, `keys` (split on spaces) |
//! | `__SHARDINGKEY` | `message_group` |
//! | `TIMER_DELIVER_MS` | `delivery_timestamp` |
//! | `TRAN_MSG`, a delay or timer key, `__SHARDINGKEY` | `message_type` TRANSACTION, DELAY, FIFO (else NORMAL) |
//! | born and store time and host, queue id and offset | themselves |
//! | `reconsumeTimes` | `delivery_attempt` = reconsumeTimes + 1 |
//! | a compressed body (zlib, LZ4, ZSTD) | the body inflated, `body_encoding` IDENTITY, MD5 digest of it |
//! | a POP retry topic with `RETRY_TOPIC` | the original topic |
//! | a topic in a namespace, `ns%T` | `topic` = `{resource_namespace: ns, name: T}` |
//! | properties not reserved by RocketMQ | `user_properties` |

use std::collections::HashMap;
use std::net::SocketAddr;

use bytes::Bytes;
use md5::Digest as _;
use md5::Md5;
use raftmq_common::message::MessageExt;
use raftmq_common::message::compress::uncompress_stored_body;
use raftmq_common::message::namespace;
use raftmq_common::message::properties;
use raftmq_common::message::validate::RETRY_GROUP_TOPIC_PREFIX;
use tracing::warn;

use crate::pb::Digest;
use crate::pb::DigestType;
use crate::pb::Encoding;
use crate::pb::Message;
use crate::pb::MessageType;
use crate::pb::Resource;
use crate::pb::SystemProperties;

/// What a POP delivery adds to a message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Delivery {
    /// The receipt handle the client acks or renews with.
    pub receipt_handle: String,
    /// How long the message stays invisible.
    pub invisible_ms: u64,
}

/// A proto timestamp of `ms` since the epoch.
pub fn timestamp(ms: i64) -> prost_types::Timestamp {
    prost_types::Timestamp { seconds: ms.div_euclid(1_000), nanos: (ms.rem_euclid(1_000) * 1_000_000) as i32 }
}

/// A proto duration of `ms`.
pub fn duration(ms: u64) -> prost_types::Duration {
    prost_types::Duration { seconds: (ms / 1_000) as i64, nanos: ((ms % 1_000) * 1_000_000) as i32 }
}

fn host(addr: &SocketAddr) -> String {
    addr.to_string()
}

/// A stored name as the client names it: its namespace apart (`GrpcConverter.buildResource`).
pub fn resource_of(stored: &str) -> Resource {
    let (namespace, name) = namespace::split(stored);
    Resource { resource_namespace: namespace.to_owned(), name }
}

/// The topic the client subscribed to: a message from a POP retry topic names its original topic.
pub fn client_topic(ext: &MessageExt) -> &str {
    let topic = ext.message.topic.as_str();
    match ext.message.property(properties::RETRY_TOPIC) {
        Some(original) if topic.starts_with(RETRY_GROUP_TOPIC_PREFIX) && !original.is_empty() => original,
        _ => topic,
    }
}

fn message_type(ext: &MessageExt) -> MessageType {
    let m = &ext.message;
    if m.property(properties::TRAN_MSG) == Some("true") {
        MessageType::Transaction
    } else if [properties::DELAY, properties::TIMER_DELIVER_MS, properties::TIMER_DELAY_SEC, properties::TIMER_DELAY_MS]
        .iter()
        .any(|k| m.property(k).is_some())
    {
        MessageType::Delay
    } else if m.property(properties::SHARDING_KEY).is_some() {
        MessageType::Fifo
    } else {
        MessageType::Normal
    }
}

/// The body as the producer sent it: a stored compressed body is inflated (bounded).
fn plain_body(ext: &MessageExt) -> Bytes {
    match uncompress_stored_body(ext.sys_flag, &ext.message.body) {
        Ok(body) => body,
        Err(e) => {
            // Delivered as stored rather than dropped: the client can still see and ack it.
            warn!(topic = %ext.message.topic, queue_offset = ext.queue_offset, error = %e, "stored body cannot be inflated; delivered as stored");
            ext.message.body.clone()
        }
    }
}

/// The proto `Message` of a stored message, with the POP `delivery` fields when it was received.
pub fn pb_message(ext: &MessageExt, delivery: Option<&Delivery>) -> Message {
    let m = &ext.message;
    let body = plain_body(ext);
    let md5 = Md5::digest(&body);
    let checksum: String = md5.iter().map(|b| format!("{b:02X}")).collect();
    let keys = m.keys().map(|k| k.split(properties::KEY_SEPARATOR).filter(|k| !k.is_empty()).map(str::to_owned));
    let system = SystemProperties {
        tag: m.tags().map(str::to_owned),
        keys: keys.map(Iterator::collect).unwrap_or_default(),
        message_id: ext.msg_id(),
        body_digest: Some(Digest { r#type: DigestType::Md5 as i32, checksum }),
        body_encoding: Encoding::Identity as i32,
        message_type: message_type(ext) as i32,
        born_timestamp: Some(timestamp(ext.born_timestamp)),
        born_host: host(&ext.born_host),
        store_timestamp: Some(timestamp(ext.store_timestamp)),
        store_host: host(&ext.store_host),
        delivery_timestamp: m
            .property(properties::TIMER_DELIVER_MS)
            .and_then(|ms| ms.parse::<i64>().ok())
            .map(timestamp),
        receipt_handle: delivery.map(|d| d.receipt_handle.clone()),
        queue_id: ext.queue_id,
        queue_offset: Some(ext.queue_offset),
        invisible_duration: delivery.map(|d| duration(d.invisible_ms)),
        delivery_attempt: Some(ext.reconsume_times.saturating_add(1)),
        message_group: m.property(properties::SHARDING_KEY).map(str::to_owned),
        trace_context: None,
        orphaned_transaction_recovery_duration: None,
        dead_letter_queue: None,
        lite_topic: None,
        priority: None,
    };
    let user_properties: HashMap<String, String> = m
        .properties
        .iter()
        .filter(|(k, _)| !properties::is_reserved_key(k) && *k != properties::SHARDING_KEY)
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect();
    Message {
        topic: Some(resource_of(client_topic(ext))),
        user_properties,
        system_properties: Some(system),
        body: body.to_vec(),
    }
}

#[cfg(test)]
mod tests {
    use raftmq_common::message::compress::compress_body;
    use raftmq_common::message::sys_flag;

    use super::*;

    fn stored() -> MessageExt {
        let mut ext = MessageExt {
            message: raftmq_common::message::Message::new("T", &b"hello"[..]).with_tags("TagA").with_keys("k1 k2"),
            queue_id: 3,
            queue_offset: 42,
            born_timestamp: 1_700_000_000_123,
            store_timestamp: 1_700_000_000_456,
            born_host: "10.0.0.1:5000".parse().unwrap(),
            store_host: "10.0.0.2:10911".parse().unwrap(),
            ..MessageExt::default()
        };
        ext.message.set_uniq_key("01ABCDEF");
        ext.message.put_user_property("color", "blue").unwrap();
        ext
    }

    #[test]
    fn a_stored_message_carries_the_proxys_system_properties() {
        let m = pb_message(&stored(), None);
        let sp = m.system_properties.unwrap();
        assert_eq!(m.topic.unwrap().name, "T");
        assert_eq!((sp.message_id.as_str(), sp.tag.as_deref()), ("01ABCDEF", Some("TagA")));
        assert_eq!(sp.keys, vec!["k1", "k2"]);
        assert_eq!((sp.queue_id, sp.queue_offset), (3, Some(42)));
        assert_eq!(sp.born_timestamp, Some(prost_types::Timestamp { seconds: 1_700_000_000, nanos: 123_000_000 }));
        assert_eq!((sp.born_host.as_str(), sp.store_host.as_str()), ("10.0.0.1:5000", "10.0.0.2:10911"));
        assert_eq!(sp.delivery_attempt, Some(1));
        assert_eq!(sp.message_type, MessageType::Normal as i32);
        assert_eq!(sp.body_digest.unwrap().checksum, "5D41402ABC4B2A76B9719D911017C592");
        assert!(sp.receipt_handle.is_none() && sp.invisible_duration.is_none());
        assert_eq!(m.user_properties, HashMap::from([("color".to_owned(), "blue".to_owned())]));
        assert_eq!(m.body, b"hello");
    }

    #[test]
    fn fifo_delay_transaction_retry_and_delivery_fields() {
        let mut ext = stored();
        ext.message.properties.insert(properties::SHARDING_KEY, "order-A");
        ext.reconsume_times = 2;
        let d = Delivery { receipt_handle: "rh".into(), invisible_ms: 1_500 };
        let sp = pb_message(&ext, Some(&d)).system_properties.unwrap();
        assert_eq!((sp.message_type, sp.message_group.as_deref()), (MessageType::Fifo as i32, Some("order-A")));
        assert_eq!(sp.delivery_attempt, Some(3));
        assert_eq!(sp.receipt_handle.as_deref(), Some("rh"));
        assert_eq!(sp.invisible_duration, Some(prost_types::Duration { seconds: 1, nanos: 500_000_000 }));

        let mut ext = stored();
        ext.message.properties.insert(properties::TIMER_DELIVER_MS, "1700000005000");
        let sp = pb_message(&ext, None).system_properties.unwrap();
        assert_eq!(sp.message_type, MessageType::Delay as i32);
        assert_eq!(sp.delivery_timestamp.map(|t| t.seconds), Some(1_700_000_005));

        let mut ext = stored();
        ext.message.properties.insert(properties::TRAN_MSG, "true");
        assert_eq!(pb_message(&ext, None).system_properties.unwrap().message_type, MessageType::Transaction as i32);

        let mut ext = stored();
        ext.message.topic = "%RETRY%G_T".into();
        ext.message.properties.insert(properties::RETRY_TOPIC, "T");
        let m = pb_message(&ext, None);
        assert_eq!(m.topic.unwrap().name, "T", "a retried message names the topic the client subscribed to");
        assert!(!m.user_properties.contains_key(properties::RETRY_TOPIC));

        let mut ext = stored();
        ext.message.topic = "%RETRY%ns%G_ns%T".into();
        ext.message.properties.insert(properties::RETRY_TOPIC, "ns%T");
        let topic = pb_message(&ext, None).topic.unwrap();
        assert_eq!((topic.resource_namespace.as_str(), topic.name.as_str()), ("ns", "T"), "in its namespace");
    }

    #[test]
    fn a_compressed_body_is_delivered_inflated() {
        let mut ext = stored();
        let plain = b"compressible ".repeat(100);
        ext.message.body = Bytes::from(compress_body(&plain));
        ext.sys_flag |= sys_flag::COMPRESSED;
        let m = pb_message(&ext, None);
        assert_eq!(m.body, plain);
        assert_eq!(m.system_properties.unwrap().body_encoding, Encoding::Identity as i32);
    }
}
