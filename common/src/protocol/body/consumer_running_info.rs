//! `ConsumerRunningInfo`: a running consumer's own account of itself, the answer to
//! GET_CONSUMER_RUNNING_INFO (307), which an admin sends to a broker and the broker relays to the
//! client (`mqadmin consumerStatus`, the dashboard's "consumer client" view).
//!
//! Keys follow fastjson: alphabetical, absent when null, and `mqTable`, a Java
//! `TreeMap<MessageQueue, ProcessQueueInfo>`, written with object keys (see [`super::fastjson`]),
//! which is why [`JsonBody::encode`] is written out here.

use std::collections::BTreeMap;

use serde::Deserialize;
use serde::Serialize;

use super::BodyError;
use super::JsonBody;
use super::fastjson;
use super::heartbeat::SubscriptionData;
use crate::message::MessageQueue;

/// `properties` key: the NameServer addresses, `;`-separated (`PROP_NAMESERVER_ADDR`).
pub const PROP_NAMESERVER_ADDR: &str = "PROP_NAMESERVER_ADDR";
/// `properties` key: `CONSUME_PASSIVELY` (push) or `CONSUME_ACTIVELY` (pull) (`PROP_CONSUME_TYPE`).
pub const PROP_CONSUME_TYPE: &str = "PROP_CONSUME_TYPE";
/// `properties` key: whether the listener is orderly (`PROP_CONSUME_ORDERLY`).
pub const PROP_CONSUME_ORDERLY: &str = "PROP_CONSUME_ORDERLY";
/// `properties` key: listener threads (`PROP_THREADPOOL_CORE_SIZE`).
pub const PROP_THREADPOOL_CORE_SIZE: &str = "PROP_THREADPOOL_CORE_SIZE";
/// `properties` key: when the consumer started, ms (`PROP_CONSUMER_START_TIMESTAMP`).
pub const PROP_CONSUMER_START_TIMESTAMP: &str = "PROP_CONSUMER_START_TIMESTAMP";
/// `properties` key: the client's version name (`PROP_CLIENT_VERSION`).
pub const PROP_CLIENT_VERSION: &str = "PROP_CLIENT_VERSION";

/// One assigned queue as the consumer holds it (`ProcessQueueInfo`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ProcessQueueInfo {
    /// Messages cached, pulled and not yet consumed.
    pub cached_msg_count: i32,
    /// Highest cached offset (0 when none).
    pub cached_msg_max_offset: i64,
    /// Lowest cached offset (0 when none).
    pub cached_msg_min_offset: i64,
    /// Body bytes cached, MiB (rounded down).
    #[serde(rename = "cachedMsgSizeInMiB")]
    pub cached_msg_size_in_mib: i32,
    /// The offset the consumer will commit for the queue.
    pub commit_offset: i64,
    /// The queue was released (Java's spelling).
    pub droped: bool,
    /// Last listener call, ms.
    pub last_consume_timestamp: i64,
    /// Last successful broker lock (orderly), ms.
    pub last_lock_timestamp: i64,
    /// Last pull, ms.
    pub last_pull_timestamp: i64,
    /// Locked on the broker (orderly).
    pub locked: bool,
    /// Orderly messages being consumed.
    pub transaction_msg_count: i32,
    /// Highest offset being consumed orderly.
    pub transaction_msg_max_offset: i64,
    /// Lowest offset being consumed orderly.
    pub transaction_msg_min_offset: i64,
    /// Unlock attempts (orderly).
    pub try_unlock_times: i64,
}

/// A topic's consumption rates over the last minute (`ConsumeStatus`).
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct ConsumeStatus {
    /// Messages whose consumption failed in the last hour.
    #[serde(rename = "consumeFailedMsgs")]
    pub consume_failed_msgs: i64,
    /// Failed consumptions per second.
    #[serde(rename = "consumeFailedTPS")]
    pub consume_failed_tps: f64,
    /// Successful consumptions per second.
    #[serde(rename = "consumeOKTPS")]
    pub consume_ok_tps: f64,
    /// Mean listener time, ms.
    #[serde(rename = "consumeRT")]
    pub consume_rt: f64,
    /// Mean pull round trip, ms.
    #[serde(rename = "pullRT")]
    pub pull_rt: f64,
    /// Messages pulled per second.
    #[serde(rename = "pullTPS")]
    pub pull_tps: f64,
}

/// What a consumer reports about itself (`ConsumerRunningInfo`).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ConsumerRunningInfo {
    /// A stack dump when asked for one (JVM clients only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub jstack: Option<String>,
    /// Each assigned queue.
    #[serde(with = "fastjson::object_keys")]
    pub mq_table: BTreeMap<MessageQueue, ProcessQueueInfo>,
    /// Configuration and the `PROP_*` keys.
    pub properties: BTreeMap<String, String>,
    /// Rates per topic.
    pub status_table: BTreeMap<String, ConsumeStatus>,
    /// Subscriptions.
    pub subscription_set: Vec<SubscriptionData>,
}

impl JsonBody for ConsumerRunningInfo {
    const NAME: &'static str = "ConsumerRunningInfo";

    /// fastjson's form, with object keys in `mqTable` (see the module docs).
    fn encode(&self) -> Result<Vec<u8>, BodyError> {
        let json = |source| BodyError::Json { body: Self::NAME, source };
        let mut out = Vec::with_capacity(512 + 320 * self.mq_table.len());
        out.push(b'{');
        if let Some(jstack) = &self.jstack {
            out.extend_from_slice(b"\"jstack\":");
            serde_json::to_writer(&mut out, jstack).map_err(json)?;
            out.push(b',');
        }
        out.extend_from_slice(b"\"mqTable\":");
        fastjson::write_object_keyed_map(&mut out, &self.mq_table).map_err(json)?;
        out.extend_from_slice(b",\"properties\":");
        serde_json::to_writer(&mut out, &self.properties).map_err(json)?;
        out.extend_from_slice(b",\"statusTable\":");
        serde_json::to_writer(&mut out, &self.status_table).map_err(json)?;
        out.extend_from_slice(b",\"subscriptionSet\":");
        serde_json::to_writer(&mut out, &self.subscription_set).map_err(json)?;
        out.push(b'}');
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Abridged from a Java 4.9 push consumer's answer.
    const JAVA: &str = r#"{"jstack":"","mqTable":{{"brokerName":"broker-a","queueId":0,"topic":"TopicTest"}:{"cachedMsgCount":2,"cachedMsgMaxOffset":11,"cachedMsgMinOffset":10,"cachedMsgSizeInMiB":0,"commitOffset":10,"droped":false,"lastConsumeTimestamp":1700000000100,"lastLockTimestamp":1700000000000,"lastPullTimestamp":1700000000200,"locked":false,"transactionMsgCount":0,"transactionMsgMaxOffset":0,"transactionMsgMinOffset":0,"tryUnlockTimes":0}},"properties":{"PROP_CONSUME_TYPE":"CONSUME_PASSIVELY","consumerGroup":"cg"},"statusTable":{"TopicTest":{"consumeFailedMsgs":0,"consumeFailedTPS":0.0,"consumeOKTPS":1.5,"consumeRT":2.0,"pullRT":3.0,"pullTPS":1.5}},"subscriptionSet":[{"classFilterMode":false,"codeSet":[],"expressionType":"TAG","subString":"*","subVersion":1700000000000,"tagsSet":[],"topic":"TopicTest"}]}"#;

    #[test]
    fn reads_what_java_writes_and_writes_it_back() {
        let info = ConsumerRunningInfo::decode(JAVA.as_bytes()).unwrap();
        let mq = MessageQueue::new("TopicTest", "broker-a", 0);
        assert_eq!(info.mq_table[&mq].commit_offset, 10);
        assert_eq!(info.mq_table[&mq].cached_msg_count, 2);
        assert_eq!(info.status_table["TopicTest"].consume_ok_tps, 1.5);
        assert_eq!(info.properties[PROP_CONSUME_TYPE], "CONSUME_PASSIVELY");
        assert_eq!(info.subscription_set[0].sub_string, "*");
        assert_eq!(String::from_utf8(info.encode().unwrap()).unwrap(), JAVA);
    }

    #[test]
    fn an_absent_stack_is_left_out_and_garbage_is_an_error() {
        let info = ConsumerRunningInfo::default();
        let encoded = String::from_utf8(info.encode().unwrap()).unwrap();
        assert_eq!(encoded, r#"{"mqTable":{},"properties":{},"statusTable":{},"subscriptionSet":[]}"#);
        assert_eq!(ConsumerRunningInfo::decode(encoded.as_bytes()).unwrap(), info);
        assert!(ConsumerRunningInfo::decode(br#"{"mqTable":{{"queueId":"x"}:{}}}"#).is_err());
        assert!(ConsumerRunningInfo::decode(b"[1,2").is_err());
    }
}
