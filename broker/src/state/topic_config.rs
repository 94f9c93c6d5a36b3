//! `TopicConfigTable`: the broker group's topics (RocketMQ's `TopicConfigManager`), preloaded with the
//! system topics 4.9.8 creates, changed only by applied replicated commands, and the pure send-side
//! decision "does this topic exist, may it be auto-created from `TBW102`, is the queue id valid".
//!
//! Invariants: the `DataVersion` counter grows by one per applied change and its timestamp is the
//! proposing leader's clock carried in the command, so every replica reports the same version to the
//! NameServers; system topics are present from construction (not replicated: every replica derives them
//! from its own config, as Java brokers do).

use std::collections::BTreeMap;

use raftmq_common::message::validate::AUTO_CREATE_TOPIC_KEY_TOPIC;
use raftmq_common::message::validate::RETRY_GROUP_TOPIC_PREFIX;
use raftmq_common::message::validate::RMQ_SYS_BENCHMARK_TOPIC;
use raftmq_common::message::validate::RMQ_SYS_OFFSET_MOVED_EVENT;
use raftmq_common::message::validate::RMQ_SYS_SCHEDULE_TOPIC;
use raftmq_common::message::validate::RMQ_SYS_SELF_TEST_TOPIC;
use raftmq_common::protocol::ResponseCode;
use raftmq_common::protocol::body::register::TopicConfigSerializeWrapper;
use raftmq_common::protocol::body::topic::DataVersion;
use raftmq_common::protocol::body::topic::TopicConfig;
use raftmq_common::protocol::body::topic::perm;

use crate::config::broker_config::BrokerConfig;

/// `ScheduleMessageService`'s queue count of `SCHEDULE_TOPIC_XXXX` (one per delay level).
pub const SCHEDULE_TOPIC_QUEUE_NUM_COUNT: i32 = 18;

/// What the system-topic preload depends on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SystemTopicOptions {
    /// `brokerClusterName` (a topic of that name is created).
    pub broker_cluster_name: String,
    /// `brokerName` (a topic of that name is created).
    pub broker_name: String,
    /// `autoCreateTopicEnable`: create `TBW102`.
    pub auto_create_topic_enable: bool,
    /// `defaultTopicQueueNums`: `TBW102`'s queues.
    pub default_topic_queue_nums: i32,
    /// `clusterTopicEnable`.
    pub cluster_topic_enable: bool,
    /// `brokerTopicEnable`.
    pub broker_topic_enable: bool,
    /// `traceTopicEnable`.
    pub trace_topic_enable: bool,
    /// `msgTraceTopicName`.
    pub msg_trace_topic_name: String,
}

impl From<&BrokerConfig> for SystemTopicOptions {
    fn from(c: &BrokerConfig) -> Self {
        SystemTopicOptions {
            broker_cluster_name: c.broker_cluster_name.clone(),
            broker_name: c.broker_name.clone(),
            auto_create_topic_enable: c.auto_create_topic_enable,
            default_topic_queue_nums: c.default_topic_queue_nums,
            cluster_topic_enable: c.cluster_topic_enable,
            broker_topic_enable: c.broker_topic_enable,
            trace_topic_enable: c.trace_topic_enable,
            msg_trace_topic_name: c.msg_trace_topic_name.clone(),
        }
    }
}

fn queues(name: &str, n: i32) -> TopicConfig {
    TopicConfig { read_queue_nums: n, write_queue_nums: n, ..TopicConfig::new(name) }
}

/// A system topic of one read and one write queue (the transaction half, op and check-max topics).
pub fn one_queue_topic(name: &str) -> TopicConfig {
    queues(name, 1)
}

/// The topics `TopicConfigManager`'s constructor creates (4.9.8), in its order.
pub fn system_topics(o: &SystemTopicOptions) -> Vec<TopicConfig> {
    let mut out = vec![queues(RMQ_SYS_SELF_TEST_TOPIC, 1)];
    if o.auto_create_topic_enable {
        out.push(TopicConfig {
            perm: perm::INHERIT | perm::READ | perm::WRITE,
            ..queues(AUTO_CREATE_TOPIC_KEY_TOPIC, o.default_topic_queue_nums)
        });
    }
    out.push(queues(RMQ_SYS_BENCHMARK_TOPIC, 1024));
    let rw_if = |enabled: bool| if enabled { perm::INHERIT | perm::READ_WRITE } else { perm::INHERIT };
    out.push(TopicConfig { perm: rw_if(o.cluster_topic_enable), ..TopicConfig::new(o.broker_cluster_name.as_str()) });
    out.push(TopicConfig { perm: rw_if(o.broker_topic_enable), ..queues(&o.broker_name, 1) });
    out.push(queues(RMQ_SYS_OFFSET_MOVED_EVENT, 1));
    out.push(queues(RMQ_SYS_SCHEDULE_TOPIC, SCHEDULE_TOPIC_QUEUE_NUM_COUNT));
    if o.trace_topic_enable {
        out.push(queues(&o.msg_trace_topic_name, 1));
    }
    out.push(queues(&raftmq_common::message::validate::reply_topic(&o.broker_cluster_name), 1));
    out
}

/// The broker group's topic table.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct TopicConfigTable {
    table: BTreeMap<String, TopicConfig>,
    data_version: DataVersion,
}

impl TopicConfigTable {
    /// A table holding the system topics.
    pub fn with_system_topics(options: &SystemTopicOptions) -> Self {
        let mut t = TopicConfigTable::default();
        for config in system_topics(options) {
            t.table.insert(config.topic_name.clone(), config);
        }
        t
    }

    /// A topic's config (`selectTopicConfig`).
    pub fn get(&self, topic: &str) -> Option<&TopicConfig> {
        self.table.get(topic)
    }

    /// Number of topics.
    pub fn len(&self) -> usize {
        self.table.len()
    }

    /// Whether the table is empty.
    pub fn is_empty(&self) -> bool {
        self.table.is_empty()
    }

    /// Topics in name order.
    pub fn iter(&self) -> impl Iterator<Item = &TopicConfig> {
        self.table.values()
    }

    /// The table's version.
    pub fn data_version(&self) -> DataVersion {
        self.data_version
    }

    /// Applies a replicated upsert.
    pub fn upsert(&mut self, config: TopicConfig, proposed_at_ms: i64) {
        self.table.insert(config.topic_name.clone(), config);
        self.data_version.next_version(proposed_at_ms);
    }

    /// Applies a replicated delete; returns the removed config.
    pub fn delete(&mut self, topic: &str, proposed_at_ms: i64) -> Option<TopicConfig> {
        let removed = self.table.remove(topic);
        if removed.is_some() {
            self.data_version.next_version(proposed_at_ms);
        }
        removed
    }

    /// The REGISTER_BROKER / GET_ALL_TOPIC_CONFIG body (`topics.json`).
    pub fn to_wrapper(&self) -> TopicConfigSerializeWrapper {
        TopicConfigSerializeWrapper { data_version: self.data_version, topic_config_table: self.table.clone() }
    }

    /// Restores a table from a wrapper (snapshot manifest), then adds any missing system topic.
    pub fn from_wrapper(wrapper: TopicConfigSerializeWrapper, options: &SystemTopicOptions) -> Self {
        let mut t = TopicConfigTable { table: wrapper.topic_config_table, data_version: wrapper.data_version };
        for config in system_topics(options) {
            t.table.entry(config.topic_name.clone()).or_insert(config);
        }
        t
    }
}

/// Outcome of looking up a send's topic (`AbstractSendMessageProcessor.msgCheck` +
/// `createTopicInSendMessageMethod` / `createTopicInSendMessageBackMethod`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SendTopic {
    /// The topic exists.
    Exists(TopicConfig),
    /// Unknown topic that may be created: propose this upsert, then send.
    Create(TopicConfig),
    /// TOPIC_NOT_EXIST, with RocketMQ's remark.
    NotExist(String),
}

/// What a send to an unknown topic may create.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AutoCreate<'a> {
    /// Request header `defaultTopic` (`TBW102`).
    pub default_topic: &'a str,
    /// Request header `defaultTopicQueueNums` (the client's, 4 by default).
    pub client_default_queue_nums: i32,
    /// Topic sysFlag for the new topic (unit mode).
    pub topic_sys_flag: i32,
    /// `autoCreateTopicEnable`.
    pub auto_create_topic_enable: bool,
}

/// Decides whether a send's topic exists or may be created: from an inheritable default topic with
/// `min(client queues, default topic's write queues)` queues and its perm minus INHERIT; `TBW102` is not
/// inheritable when `autoCreateTopicEnable` is off; a `%RETRY%` topic falls back to 1 queue, read-write.
pub fn decide_send_topic(table: &TopicConfigTable, topic: &str, auto: &AutoCreate<'_>) -> SendTopic {
    if let Some(config) = table.get(topic) {
        return SendTopic::Exists(config.clone());
    }
    if let Some(default) = table.get(auto.default_topic) {
        // With auto-creation off, Java strips INHERIT from TBW102 (`setPerm(READ | WRITE)`).
        let tbw102_allowed = auto.auto_create_topic_enable || auto.default_topic != AUTO_CREATE_TOPIC_KEY_TOPIC;
        let inherit = perm::is_inherited(default.perm) && tbw102_allowed;
        if inherit {
            let n = auto.client_default_queue_nums.min(default.write_queue_nums).max(0);
            return SendTopic::Create(TopicConfig {
                perm: default.perm & !perm::INHERIT,
                topic_sys_flag: auto.topic_sys_flag,
                topic_filter_type: default.topic_filter_type,
                ..queues(topic, n)
            });
        }
    }
    if topic.starts_with(RETRY_GROUP_TOPIC_PREFIX) {
        return SendTopic::Create(TopicConfig {
            perm: perm::READ_WRITE,
            topic_sys_flag: auto.topic_sys_flag,
            ..queues(topic, 1)
        });
    }
    SendTopic::NotExist(format!("topic[{topic}] not exist, apply first please!"))
}

/// The queue-id check of `msgCheck`: below `max(writeQueueNums, readQueueNums)`, else SYSTEM_ERROR.
pub fn check_send_queue_id(config: &TopicConfig, queue_id: i32) -> Result<(), (ResponseCode, String)> {
    let valid = config.write_queue_nums.max(config.read_queue_nums);
    if queue_id < 0 || queue_id >= valid {
        return Err((ResponseCode::SystemError, format!("request queueId[{queue_id}] is illegal, {config:?}")));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn options(auto: bool) -> SystemTopicOptions {
        SystemTopicOptions::from(&BrokerConfig { auto_create_topic_enable: auto, ..BrokerConfig::default() })
    }

    fn auto(enabled: bool) -> AutoCreate<'static> {
        AutoCreate {
            default_topic: AUTO_CREATE_TOPIC_KEY_TOPIC,
            client_default_queue_nums: 4,
            topic_sys_flag: 0,
            auto_create_topic_enable: enabled,
        }
    }

    #[test]
    fn system_topics_match_rocketmq() {
        let t = TopicConfigTable::with_system_topics(&options(true));
        let tbw = t.get("TBW102").unwrap();
        assert_eq!((tbw.perm, tbw.read_queue_nums, tbw.write_queue_nums), (7, 8, 8));
        assert_eq!(t.get("SELF_TEST_TOPIC").unwrap().write_queue_nums, 1);
        assert_eq!(t.get("BenchmarkTest").unwrap().write_queue_nums, 1024);
        assert_eq!(t.get("SCHEDULE_TOPIC_XXXX").unwrap().read_queue_nums, 18);
        assert_eq!(t.get("OFFSET_MOVED_EVENT").unwrap().read_queue_nums, 1);
        assert_eq!(t.get("DefaultCluster").unwrap().perm, 7);
        assert_eq!(t.get("DefaultCluster").unwrap().read_queue_nums, 16);
        assert_eq!(t.get("broker-a").unwrap().write_queue_nums, 1);
        assert!(t.get("DefaultCluster_REPLY_TOPIC").is_some());
        assert!(t.get("RMQ_SYS_TRACE_TOPIC").is_none());
        assert_eq!(t.data_version().counter, 0);
        assert!(TopicConfigTable::with_system_topics(&options(false)).get("TBW102").is_none());
    }

    #[test]
    fn auto_create_from_tbw102() {
        let t = TopicConfigTable::with_system_topics(&options(true));
        match decide_send_topic(&t, "NewTopic", &auto(true)) {
            SendTopic::Create(c) => {
                assert_eq!(
                    (c.topic_name.as_str(), c.read_queue_nums, c.write_queue_nums, c.perm),
                    ("NewTopic", 4, 4, 6)
                );
            }
            other => panic!("{other:?}"),
        }
        let more = AutoCreate { client_default_queue_nums: 64, ..auto(true) };
        assert!(matches!(decide_send_topic(&t, "NewTopic", &more), SendTopic::Create(c) if c.write_queue_nums == 8));
        assert!(matches!(decide_send_topic(&t, "TBW102", &auto(true)), SendTopic::Exists(_)));
        // Disabled: TBW102 (even if present, e.g. restored) does not inherit.
        assert!(
            matches!(decide_send_topic(&t, "NewTopic", &auto(false)), SendTopic::NotExist(r) if r.contains("NewTopic"))
        );
        let t_off = TopicConfigTable::with_system_topics(&options(false));
        assert!(matches!(decide_send_topic(&t_off, "NewTopic", &auto(true)), SendTopic::NotExist(_)));
        // A non-inheritable default topic creates nothing; retry topics fall back to 1 queue.
        let plain = AutoCreate { default_topic: "SELF_TEST_TOPIC", ..auto(true) };
        assert!(matches!(decide_send_topic(&t, "X", &plain), SendTopic::NotExist(_)));
        assert!(
            matches!(decide_send_topic(&t_off, "%RETRY%g", &auto(false)), SendTopic::Create(c) if c.write_queue_nums == 1 && c.perm == 6)
        );
    }

    #[test]
    fn replicated_changes_bump_the_version_identically() {
        let mut a = TopicConfigTable::with_system_topics(&options(true));
        let mut b = a.clone();
        for t in [&mut a, &mut b] {
            t.upsert(queues("T", 8), 1_000);
            t.upsert(queues("T", 4), 2_000);
            assert!(t.delete("missing", 3_000).is_none());
        }
        assert_eq!(a, b);
        assert_eq!(a.data_version(), DataVersion { counter: 2, timestamp: 2_000 });
        assert_eq!(a.delete("T", 4_000).map(|c| c.write_queue_nums), Some(4));
        let restored = TopicConfigTable::from_wrapper(a.to_wrapper(), &options(true));
        assert_eq!(restored, a);
    }

    #[test]
    fn queue_id_check() {
        let c = TopicConfig { read_queue_nums: 4, write_queue_nums: 2, ..TopicConfig::new("T") };
        assert!(check_send_queue_id(&c, 3).is_ok());
        assert_eq!(check_send_queue_id(&c, 4).unwrap_err().0, ResponseCode::SystemError);
        assert!(check_send_queue_id(&c, -1).is_err());
    }
}
