//! `TopicConfig`, `DataVersion` and the `PermName` bits: the topic nouns shared by broker bodies
//! (GET_ALL_TOPIC_CONFIG, UPDATE_AND_CREATE_TOPIC) and NameServer bodies (REGISTER_BROKER).
//!
//! Invariants: JSON keys are exactly RocketMQ 4.9.8's fastjson names, declared in alphabetical order so
//! `encode()` emits what fastjson emits; a missing key decodes to Java's field default, unknown keys are
//! ignored.

use serde::Deserialize;
use serde::Serialize;

use super::JsonBody;

/// `TopicSysFlag` bits of a topic's `topicSysFlag` (unitization; raftmq stores and routes them).
pub mod topic_sys_flag {
    /// `FLAG_UNIT`: the topic is a unit topic.
    pub const FLAG_UNIT: i32 = 0x1;
    /// `FLAG_UNIT_SUB`: the topic has unit subscriptions.
    pub const FLAG_UNIT_SUB: i32 = 0x1 << 1;
}

/// Permission bits of a topic or broker (`org.apache.rocketmq.common.constant.PermName`).
pub mod perm {
    /// Priority topic (not used for routing decisions by 4.x clients).
    pub const PRIORITY: i32 = 8;
    /// Consumers may read.
    pub const READ: i32 = 4;
    /// Producers may write.
    pub const WRITE: i32 = 2;
    /// Topic config may be inherited by auto-created topics (`TBW102`).
    pub const INHERIT: i32 = 1;
    /// The usual topic permission: read and write (6).
    pub const READ_WRITE: i32 = READ | WRITE;

    /// `PermName.isReadable`.
    pub fn is_readable(perm: i32) -> bool {
        perm & READ == READ
    }

    /// `PermName.isWriteable`.
    pub fn is_writeable(perm: i32) -> bool {
        perm & WRITE == WRITE
    }

    /// `PermName.isInherited`.
    pub fn is_inherited(perm: i32) -> bool {
        perm & INHERIT == INHERIT
    }

    /// `PermName.perm2String`: `R`, `W`, `X` or `-` for read, write, inherit, e.g. `RW-`.
    pub fn to_display(perm: i32) -> String {
        let mut s = String::with_capacity(3);
        s.push(if is_readable(perm) { 'R' } else { '-' });
        s.push(if is_writeable(perm) { 'W' } else { '-' });
        s.push(if is_inherited(perm) { 'X' } else { '-' });
        s
    }
}

/// How a topic's messages carry tags (`TopicFilterType`); 4.x brokers always use `SINGLE_TAG`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum TopicFilterType {
    /// One tag per message.
    #[default]
    SingleTag,
    /// Several tags per message (sysFlag MULTI_TAGS).
    MultiTag,
}

impl TopicFilterType {
    /// The Java enum constant name, as written in the compressed REGISTER_BROKER body.
    pub fn as_str(self) -> &'static str {
        match self {
            TopicFilterType::SingleTag => "SINGLE_TAG",
            TopicFilterType::MultiTag => "MULTI_TAG",
        }
    }

    /// Parses the Java enum constant name.
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "SINGLE_TAG" => Some(TopicFilterType::SingleTag),
            "MULTI_TAG" => Some(TopicFilterType::MultiTag),
            _ => None,
        }
    }
}

/// Java's `TopicConfig.defaultReadQueueNums` / `defaultWriteQueueNums`.
pub const TOPIC_QUEUE_NUMS_DEFAULT_COUNT: i32 = 16;

/// One topic's configuration on a broker (`org.apache.rocketmq.common.TopicConfig`).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct TopicConfig {
    /// Ordered topic (`isOrder`).
    pub order: bool,
    /// [`perm`] bits.
    pub perm: i32,
    /// Queues consumers read.
    pub read_queue_nums: i32,
    /// Tag layout.
    pub topic_filter_type: TopicFilterType,
    /// The topic.
    pub topic_name: String,
    /// Topic sysFlag (unit flags; 0 normally).
    pub topic_sys_flag: i32,
    /// Queues producers write.
    pub write_queue_nums: i32,
}

impl Default for TopicConfig {
    fn default() -> Self {
        TopicConfig {
            order: false,
            perm: perm::READ_WRITE,
            read_queue_nums: TOPIC_QUEUE_NUMS_DEFAULT_COUNT,
            topic_filter_type: TopicFilterType::SingleTag,
            topic_name: String::new(),
            topic_sys_flag: 0,
            write_queue_nums: TOPIC_QUEUE_NUMS_DEFAULT_COUNT,
        }
    }
}

impl TopicConfig {
    /// A topic with Java's defaults (16/16 queues, perm 6, `SINGLE_TAG`).
    pub fn new(topic_name: impl Into<String>) -> Self {
        TopicConfig { topic_name: topic_name.into(), ..TopicConfig::default() }
    }
}

impl JsonBody for TopicConfig {
    const NAME: &'static str = "TopicConfig";
}

/// Version of a broker's topic table (`org.apache.rocketmq.common.DataVersion`): the NameServer
/// re-reads a registration only when this changes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct DataVersion {
    /// Bumped on every change (an `AtomicLong` in Java, serialized as a number).
    pub counter: i64,
    /// Milliseconds since the epoch of the last change. Early 4.x releases spelled the key
    /// `timestatmp`; it is accepted on input.
    #[serde(alias = "timestatmp")]
    pub timestamp: i64,
}

impl DataVersion {
    /// `DataVersion.nextVersion`: a new timestamp and the counter plus one.
    pub fn next_version(&mut self, now_ms: i64) {
        self.timestamp = now_ms;
        self.counter = self.counter.wrapping_add(1);
    }
}

impl JsonBody for DataVersion {
    const NAME: &'static str = "DataVersion";
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;
    use crate::protocol::body::testing::check_body;
    use crate::protocol::body::testing::text;

    #[test]
    fn topic_bodies_satisfy_body_properties() {
        let filter = prop_oneof![Just(TopicFilterType::SingleTag), Just(TopicFilterType::MultiTag)];
        check_body(
            (any::<bool>(), any::<i32>(), any::<i32>(), filter, text(), any::<i32>(), any::<i32>())
                .prop_map(
                    |(
                        order,
                        perm,
                        read_queue_nums,
                        topic_filter_type,
                        topic_name,
                        topic_sys_flag,
                        write_queue_nums,
                    )| {
                        TopicConfig {
                            order,
                            perm,
                            read_queue_nums,
                            topic_filter_type,
                            topic_name,
                            topic_sys_flag,
                            write_queue_nums,
                        }
                    },
                )
                .boxed(),
        );
        check_body(any::<(i64, i64)>().prop_map(|(counter, timestamp)| DataVersion { counter, timestamp }).boxed());
    }

    #[test]
    fn java_topic_config_round_trips_byte_exactly() {
        let java = r#"{"order":false,"perm":6,"readQueueNums":8,"topicFilterType":"SINGLE_TAG","topicName":"TopicTest","topicSysFlag":0,"writeQueueNums":8}"#;
        let config = TopicConfig::decode(java.as_bytes()).expect("decodes");
        assert_eq!(config, TopicConfig { read_queue_nums: 8, write_queue_nums: 8, ..TopicConfig::new("TopicTest") });
        assert_eq!(String::from_utf8(config.encode().unwrap()).unwrap(), java);
        // Missing keys take Java's defaults; 5.x `attributes` is ignored.
        let sparse = TopicConfig::decode(br#"{"topicName":"T","attributes":{"+message.type":"NORMAL"}}"#).unwrap();
        assert_eq!(sparse, TopicConfig::new("T"));
        assert_eq!(TopicFilterType::parse(TopicFilterType::MultiTag.as_str()), Some(TopicFilterType::MultiTag));
        assert_eq!(TopicFilterType::parse("NONE"), None);
    }

    #[test]
    fn data_version_reads_old_spelling_and_advances() {
        let mut v = DataVersion::decode(br#"{"counter":7,"timestatmp":1700000000000}"#).expect("decodes");
        assert_eq!(v, DataVersion { counter: 7, timestamp: 1_700_000_000_000 });
        v.next_version(1_700_000_000_500);
        assert_eq!(v.encode().unwrap(), br#"{"counter":8,"timestamp":1700000000500}"#.to_vec());
    }

    #[test]
    fn perm_bits_match_java() {
        assert_eq!(perm::READ_WRITE, 6);
        assert!(perm::is_readable(6) && perm::is_writeable(6) && !perm::is_inherited(6));
        assert_eq!(perm::to_display(6), "RW-");
        assert_eq!(perm::to_display(perm::READ | perm::INHERIT), "R-X");
        assert_eq!(perm::to_display(perm::PRIORITY), "---");
    }
}
