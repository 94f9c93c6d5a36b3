//! The message model: [`Message`] (what a producer sends), [`MessageExt`] (a stored CommitLog record
//! with every field) and [`MessageQueue`] (topic, brokerName, queueId; re-exported from
//! `protocol::body::message_queue` so the model and JSON bodies share one type).
//!
//! Plain data with public fields, as RocketMQ's Java beans are; the codecs in `record` and `batch` turn
//! them into bytes. Invariants kept by the codecs, not by these types:
//! - `MessageExt::message.body` is the body **as stored** (compressed when `sys_flag` bit 0 is set);
//!   `compress::uncompress_body` gives the original.
//! - The offsetMsgId is not a field: it is derived from `store_host` and `commit_log_offset`
//!   ([`MessageExt::offset_msg_id`]), so patching the physical offset can never leave a stale id.

use std::net::IpAddr;
use std::net::Ipv4Addr;
use std::net::SocketAddr;

use bytes::Bytes;
use compact_str::CompactString;

use super::msg_id::OffsetMsgId;
use super::properties;
use super::properties::Properties;
use super::properties::PropertiesError;
use super::tag;

/// A message as a producer builds it (`org.apache.rocketmq.common.message.Message`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Message {
    /// Destination topic.
    pub topic: CompactString,
    /// User flag, stored untouched (FLAG).
    pub flag: i32,
    /// Properties: tags, keys, UNIQ_KEY and user properties.
    pub properties: Properties,
    /// Payload.
    pub body: Bytes,
}

/// Why a user property was refused (`Message.putUserProperty`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum UserPropertyError {
    /// The name is one of [`properties::RESERVED_KEYS`].
    #[error("The Property<{0}> is used by system, input another please")]
    Reserved(String),
    /// Name or value is blank.
    #[error("The name or value of property can not be null or blank string!")]
    Blank,
    /// The pair would not survive the wire format.
    #[error(transparent)]
    NotWireSafe(#[from] PropertiesError),
}

impl Message {
    /// A message with `topic` and `body`, no properties.
    pub fn new(topic: impl Into<CompactString>, body: impl Into<Bytes>) -> Self {
        Message { topic: topic.into(), flag: 0, properties: Properties::new(), body: body.into() }
    }

    /// Builder-style [`Self::set_tags`].
    pub fn with_tags(mut self, tags: impl Into<CompactString>) -> Self {
        self.set_tags(tags);
        self
    }

    /// Builder-style [`Self::set_keys`].
    pub fn with_keys(mut self, keys: impl Into<CompactString>) -> Self {
        self.set_keys(keys);
        self
    }

    /// The `TAGS` property.
    pub fn tags(&self) -> Option<&str> {
        self.properties.get(properties::TAGS)
    }

    /// Sets `TAGS`; an empty tag removes it (Java's constructor skips empty tags).
    pub fn set_tags(&mut self, tags: impl Into<CompactString>) {
        let tags = tags.into();
        if tags.is_empty() {
            self.properties.remove(properties::TAGS);
        } else {
            self.properties.insert(properties::TAGS, tags);
        }
    }

    /// The ConsumeQueue tags code of this message (0 without tags).
    pub fn tags_code(&self) -> i64 {
        tag::tags_code(self.tags())
    }

    /// The raw `KEYS` property (space-separated).
    pub fn keys(&self) -> Option<&str> {
        self.properties.get(properties::KEYS)
    }

    /// The business keys, split on spaces, empty pieces dropped.
    pub fn key_list(&self) -> impl Iterator<Item = &str> {
        self.keys().unwrap_or("").split(properties::KEY_SEPARATOR).filter(|k| !k.is_empty())
    }

    /// Sets `KEYS`; empty removes it.
    pub fn set_keys(&mut self, keys: impl Into<CompactString>) {
        let keys = keys.into();
        if keys.is_empty() {
            self.properties.remove(properties::KEYS);
        } else {
            self.properties.insert(properties::KEYS, keys);
        }
    }

    /// Sets `KEYS` from a list, joined with spaces (`Message.setKeys(Collection)`).
    pub fn set_key_list<I, S>(&mut self, keys: I)
    where
        I: IntoIterator<Item = S>,
        S: AsRef<str>,
    {
        let joined: Vec<String> = keys.into_iter().map(|k| k.as_ref().to_owned()).collect();
        self.set_keys(joined.join(" "));
    }

    /// The `UNIQ_KEY` property: the client message id.
    pub fn uniq_key(&self) -> Option<&str> {
        self.properties.get(properties::UNIQ_KEY)
    }

    /// Sets `UNIQ_KEY`.
    pub fn set_uniq_key(&mut self, id: impl Into<CompactString>) {
        self.properties.insert(properties::UNIQ_KEY, id);
    }

    /// The `DELAY` level; absent or unparsable is 0 (not delayed).
    pub fn delay_time_level(&self) -> i32 {
        self.properties.get(properties::DELAY).and_then(|v| v.parse().ok()).unwrap_or(0)
    }

    /// Sets the `DELAY` level.
    pub fn set_delay_time_level(&mut self, level: i32) {
        self.properties.insert(properties::DELAY, level.to_string());
    }

    /// Asks for delivery `delay_ms` after the message is stored: a timer message (RocketMQ 5's
    /// `TIMER_DELAY_MS`), any delay up to the broker's `timerMaxDelaySec`, not a fixed level.
    pub fn set_delay_ms(&mut self, delay_ms: u64) {
        self.properties.insert(properties::TIMER_DELAY_MS, delay_ms.to_string());
    }

    /// Asks for delivery at `deliver_ms`, ms since the epoch (RocketMQ 5's `TIMER_DELIVER_MS`).
    pub fn set_deliver_time_ms(&mut self, deliver_ms: i64) {
        self.properties.insert(properties::TIMER_DELIVER_MS, deliver_ms.to_string());
    }

    /// waitStoreMsgOK: absent is true; otherwise Java `Boolean.parseBoolean` (only "true", any case).
    pub fn wait_store_msg_ok(&self) -> bool {
        self.properties.get(properties::WAIT).is_none_or(|v| v.eq_ignore_ascii_case("true"))
    }

    /// Sets `WAIT`.
    pub fn set_wait_store_msg_ok(&mut self, wait: bool) {
        self.properties.insert(properties::WAIT, if wait { "true" } else { "false" });
    }

    /// Whether this is a transactional half message (`TRAN_MSG` = "true").
    pub fn is_transaction_prepared(&self) -> bool {
        self.properties.get(properties::TRAN_MSG).is_some_and(|v| v.eq_ignore_ascii_case("true"))
    }

    /// A property by name.
    pub fn property(&self, key: &str) -> Option<&str> {
        self.properties.get(key)
    }

    /// Sets a user property, refusing reserved names, blank names/values and separators.
    pub fn put_user_property(
        &mut self,
        key: impl Into<String>,
        value: impl Into<String>,
    ) -> Result<(), UserPropertyError> {
        let key = key.into();
        let value = value.into();
        if properties::is_reserved_key(&key) {
            return Err(UserPropertyError::Reserved(key));
        }
        if key.trim().is_empty() || value.trim().is_empty() {
            return Err(UserPropertyError::Blank);
        }
        let probe: Properties = [(key.as_str(), value.as_str())].into_iter().collect();
        probe.check_wire_safe()?;
        self.properties.insert(key, value);
        Ok(())
    }
}

/// A stored message with every CommitLog record field (`MessageExt`, docs/store-format.md#commitlog-record).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MessageExt {
    /// Topic, flag, properties and the body as stored.
    pub message: Message,
    /// Queue within the topic on this broker.
    pub queue_id: i32,
    /// TOTALSIZE of the record; set by the decoder, ignored by the encoder.
    pub store_size: i32,
    /// ConsumeQueue index of the message in its queue.
    pub queue_offset: i64,
    /// CommitLog byte position of the record.
    pub commit_log_offset: i64,
    /// [`super::sys_flag`] bits. The encoder sets the host-v6 bits from the addresses.
    pub sys_flag: i32,
    /// Producer clock, ms since the epoch.
    pub born_timestamp: i64,
    /// Producer address as the broker saw it.
    pub born_host: SocketAddr,
    /// Broker clock when stored, ms since the epoch.
    pub store_timestamp: i64,
    /// Broker address (brokerIP1:listenPort); part of the offsetMsgId.
    pub store_host: SocketAddr,
    /// BODYCRC as read from a record (`crc32 & 0x7FFFFFFF`); the encoder recomputes it.
    pub body_crc: u32,
    /// How often the message was redelivered.
    pub reconsume_times: i32,
    /// For commit/rollback records: the half message's CommitLog offset.
    pub prepared_transaction_offset: i64,
}

impl Default for MessageExt {
    fn default() -> Self {
        let unspecified = SocketAddr::new(IpAddr::V4(Ipv4Addr::UNSPECIFIED), 0);
        MessageExt {
            message: Message::default(),
            queue_id: 0,
            store_size: 0,
            queue_offset: 0,
            commit_log_offset: 0,
            sys_flag: 0,
            born_timestamp: 0,
            born_host: unspecified,
            store_timestamp: 0,
            store_host: unspecified,
            body_crc: 0,
            reconsume_times: 0,
            prepared_transaction_offset: 0,
        }
    }
}

impl MessageExt {
    /// The offsetMsgId (`MessageDecoder.createMessageId`): store host + physical offset.
    pub fn offset_msg_id(&self) -> OffsetMsgId {
        OffsetMsgId { store_host: self.store_host, commit_log_offset: self.commit_log_offset }
    }

    /// The msgId a 4.x client shows (`MessageClientExt.getMsgId`): `UNIQ_KEY` when present, else the
    /// offsetMsgId.
    pub fn msg_id(&self) -> String {
        match self.message.uniq_key() {
            Some(uniq) => uniq.to_owned(),
            None => self.offset_msg_id().to_string(),
        }
    }

    /// The topic.
    pub fn topic(&self) -> &str {
        &self.message.topic
    }
}

/// One queue of a topic on one broker group. A single type serves the model and JSON bodies: it is
/// defined with fastjson's key order in `protocol::body::message_queue` and re-exported here.
pub use crate::protocol::body::message_queue::MessageQueue;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn message_helpers() {
        let mut m = Message::new("T", &b"x"[..]).with_tags("TagA").with_keys("k1  k2");
        assert_eq!(m.tags(), Some("TagA"));
        assert_eq!(m.tags_code(), 2_598_919);
        assert_eq!(m.key_list().collect::<Vec<_>>(), vec!["k1", "k2"]);
        m.set_key_list(["a", "b"]);
        assert_eq!(m.keys(), Some("a b"));
        m.set_tags("");
        assert_eq!(m.tags(), None);
        assert!(m.wait_store_msg_ok());
        m.set_wait_store_msg_ok(false);
        assert!(!m.wait_store_msg_ok());
        assert_eq!(m.delay_time_level(), 0);
        m.set_delay_time_level(3);
        assert_eq!(m.delay_time_level(), 3);
        m.properties.insert(properties::DELAY, "x");
        assert_eq!(m.delay_time_level(), 0);
        assert!(!m.is_transaction_prepared());
        m.properties.insert(properties::TRAN_MSG, "true");
        assert!(m.is_transaction_prepared());
    }

    #[test]
    fn user_properties_refuse_reserved_and_blank() {
        let mut m = Message::new("T", Bytes::new());
        assert_eq!(m.put_user_property("TAGS", "x"), Err(UserPropertyError::Reserved("TAGS".into())));
        assert_eq!(m.put_user_property(" ", "x"), Err(UserPropertyError::Blank));
        assert_eq!(m.put_user_property("k", " "), Err(UserPropertyError::Blank));
        assert!(matches!(m.put_user_property("k", "a\u{2}b"), Err(UserPropertyError::NotWireSafe(_))));
        assert_eq!(m.put_user_property("k", "v"), Ok(()));
        assert_eq!(m.property("k"), Some("v"));
    }

    #[test]
    fn msg_id_prefers_uniq_key() {
        let mut ext =
            MessageExt { store_host: "10.0.0.1:10911".parse().unwrap(), commit_log_offset: 7, ..Default::default() };
        assert_eq!(ext.msg_id(), "0A00000100002A9F0000000000000007");
        ext.message.set_uniq_key("ABC");
        assert_eq!(ext.msg_id(), "ABC");
        assert_eq!(ext.offset_msg_id().to_string(), "0A00000100002A9F0000000000000007");
    }

    #[test]
    fn message_queue_serde_and_order() {
        let q = MessageQueue::new("T", "broker-a", 3);
        let json = serde_json::to_string(&q).unwrap();
        assert_eq!(json, r#"{"brokerName":"broker-a","queueId":3,"topic":"T"}"#);
        assert_eq!(serde_json::from_str::<MessageQueue>(&json).unwrap(), q);
        let mut qs = [
            MessageQueue::new("T", "b", 1),
            MessageQueue::new("T", "a", 2),
            MessageQueue::new("S", "z", 9),
            MessageQueue::new("T", "a", 0),
        ];
        qs.sort();
        let order: Vec<_> = qs.iter().map(|q| (q.topic.as_str(), q.broker_name.as_str(), q.queue_id)).collect();
        assert_eq!(order, vec![("S", "z", 9), ("T", "a", 0), ("T", "a", 2), ("T", "b", 1)]);
    }
}
