//! `MessageQueue` as it appears inside JSON bodies: `{"brokerName":"b","queueId":0,"topic":"t"}`.
//!
//! Same shape and ordering as the message model's queue (`crate::message` has its own copy until the
//! two are unified); ordered like Java's `MessageQueue.compareTo` (topic, brokerName, queueId) so
//! maps keyed by it iterate deterministically. Fields are declared in fastjson's alphabetical key order.

use std::cmp::Ordering;

use serde::Deserialize;
use serde::Serialize;

use super::null_as_default;

/// One queue of a topic on one broker group (`org.apache.rocketmq.common.message.MessageQueue`).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct MessageQueue {
    /// Broker group name (the Raft group in raftmq).
    #[serde(deserialize_with = "null_as_default")]
    pub broker_name: String,
    /// Queue index within the topic on that broker.
    pub queue_id: i32,
    /// Topic.
    #[serde(deserialize_with = "null_as_default")]
    pub topic: String,
}

impl MessageQueue {
    /// A queue.
    pub fn new(topic: impl Into<String>, broker_name: impl Into<String>, queue_id: i32) -> Self {
        MessageQueue { topic: topic.into(), broker_name: broker_name.into(), queue_id }
    }
}

impl Ord for MessageQueue {
    fn cmp(&self, other: &Self) -> Ordering {
        (&self.topic, &self.broker_name, self.queue_id).cmp(&(&other.topic, &other.broker_name, other.queue_id))
    }
}

impl PartialOrd for MessageQueue {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_is_fastjson_shaped_and_order_is_javas() {
        let q = MessageQueue::new("TopicTest", "broker-a", 3);
        assert_eq!(serde_json::to_string(&q).unwrap(), r#"{"brokerName":"broker-a","queueId":3,"topic":"TopicTest"}"#);
        let mut qs =
            vec![MessageQueue::new("T", "b", 1), MessageQueue::new("T", "a", 2), MessageQueue::new("S", "z", 9)];
        qs.sort();
        assert_eq!(
            qs,
            vec![MessageQueue::new("S", "z", 9), MessageQueue::new("T", "a", 2), MessageQueue::new("T", "b", 1)]
        );
    }
}
