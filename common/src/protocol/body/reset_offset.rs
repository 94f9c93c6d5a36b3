//! `ResetOffsetBody`: the queue → offset table of an offset reset. It is the body of the
//! broker's answer to INVOKE_BROKER_TO_RESET_OFFSET (222) and of the RESET_CONSUMER_CLIENT_OFFSET
//! (220) request the broker then sends to each consumer of the group.
//!
//! Java declares `offsetTable` as a `Map<MessageQueue, Long>`. fastjson writes such a map with
//! object keys (`{{"brokerName":"b","queueId":0,"topic":"t"}:12}`), so [`JsonBody::encode`] writes
//! that form, the one Java clients parse. Decoding also takes the standard JSON form, with each
//! key's JSON as a string. See [`super::fastjson`].

use std::collections::BTreeMap;

use serde::Deserialize;
use serde::Serialize;

use super::BodyError;
use super::JsonBody;
use super::fastjson;
use crate::message::MessageQueue;

/// Queue → offset to consume next (`org.apache.rocketmq.common.protocol.body.ResetOffsetBody`).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ResetOffsetBody {
    /// The new offset of each queue.
    #[serde(with = "fastjson::object_keys")]
    pub offset_table: BTreeMap<MessageQueue, i64>,
}

impl JsonBody for ResetOffsetBody {
    const NAME: &'static str = "ResetOffsetBody";

    /// fastjson's form, with object keys (see the module docs).
    fn encode(&self) -> Result<Vec<u8>, BodyError> {
        let json = |source| BodyError::Json { body: Self::NAME, source };
        let mut out = Vec::with_capacity(32 + 72 * self.offset_table.len());
        out.extend_from_slice(b"{\"offsetTable\":");
        fastjson::write_object_keyed_map(&mut out, &self.offset_table).map_err(json)?;
        out.push(b'}');
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const JAVA_FASTJSON: &str = r#"{"offsetTable":{{"brokerName":"broker-a","queueId":1,"topic":"TopicTest"}:7,{"brokerName":"broker-a","queueId":0,"topic":"TopicTest"}:0}}"#;

    fn table() -> ResetOffsetBody {
        let mut offset_table = BTreeMap::new();
        offset_table.insert(MessageQueue::new("TopicTest", "broker-a", 0), 0);
        offset_table.insert(MessageQueue::new("TopicTest", "broker-a", 1), 7);
        ResetOffsetBody { offset_table }
    }

    #[test]
    fn reads_what_java_writes_and_writes_it_back_in_queue_order() {
        assert_eq!(ResetOffsetBody::decode(JAVA_FASTJSON.as_bytes()).unwrap(), table());
        let encoded = String::from_utf8(table().encode().unwrap()).unwrap();
        assert_eq!(
            encoded,
            r#"{"offsetTable":{{"brokerName":"broker-a","queueId":0,"topic":"TopicTest"}:0,{"brokerName":"broker-a","queueId":1,"topic":"TopicTest"}:7}}"#
        );
        assert_eq!(ResetOffsetBody::decode(encoded.as_bytes()).unwrap(), table());
    }

    #[test]
    fn reads_string_keys_and_rejects_garbage() {
        let standard = serde_json::to_vec(&table()).unwrap();
        assert_eq!(ResetOffsetBody::decode(&standard).unwrap(), table());
        assert_eq!(ResetOffsetBody::decode(br#"{"offsetTable":{}}"#).unwrap(), ResetOffsetBody::default());
        assert!(ResetOffsetBody::decode(br#"{"offsetTable":{{"queueId":"x"}:1}}"#).is_err());
        assert!(ResetOffsetBody::decode(b"\x00\xff").is_err());
    }
}
