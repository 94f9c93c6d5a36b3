//! GET_TOPIC_STATS_INFO (202) response body: `TopicStatsTable` with one `TopicOffset` per queue.
//!
//! Like `ConsumeStats`, `offsetTable` is a `HashMap<MessageQueue, TopicOffset>` that fastjson writes
//! with object keys; encoded in that form and decoded from it or the string-keyed standard form
//! (see [`super::fastjson`]).

use std::collections::BTreeMap;

use serde::Deserialize;
use serde::Serialize;

use super::BodyError;
use super::JsonBody;
use super::fastjson;
use super::message_queue::MessageQueue;

/// One queue's offsets (`org.apache.rocketmq.common.admin.TopicOffset`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct TopicOffset {
    /// Store time of the queue's last message, ms.
    pub last_update_timestamp: i64,
    /// Offset after the last message.
    pub max_offset: i64,
    /// Offset of the oldest retained message.
    pub min_offset: i64,
}

/// A topic's queues on one broker (`org.apache.rocketmq.common.admin.TopicStatsTable`).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct TopicStatsTable {
    /// Per-queue offsets.
    #[serde(with = "fastjson::object_keys")]
    pub offset_table: BTreeMap<MessageQueue, TopicOffset>,
}

impl JsonBody for TopicStatsTable {
    const NAME: &'static str = "TopicStatsTable";

    /// fastjson's form, with object keys.
    fn encode(&self) -> Result<Vec<u8>, BodyError> {
        let mut out = Vec::with_capacity(32 + 96 * self.offset_table.len());
        out.extend_from_slice(b"{\"offsetTable\":");
        fastjson::write_object_keyed_map(&mut out, &self.offset_table)
            .map_err(|source| BodyError::Json { body: Self::NAME, source })?;
        out.push(b'}');
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;
    use crate::protocol::body::lock_batch::tests::arb_mq;
    use crate::protocol::body::testing::check_body;

    #[test]
    fn topic_stats_satisfies_body_properties() {
        let offset = any::<(i64, i64, i64)>().prop_map(|(last_update_timestamp, max_offset, min_offset)| TopicOffset {
            last_update_timestamp,
            max_offset,
            min_offset,
        });
        check_body(
            proptest::collection::btree_map(arb_mq(), offset, 0..4)
                .prop_map(|offset_table| TopicStatsTable { offset_table })
                .boxed(),
        );
    }

    #[test]
    fn java_fastjson_form_round_trips_byte_exactly() {
        let java = r#"{"offsetTable":{{"brokerName":"broker-a","queueId":0,"topic":"TopicTest"}:{"lastUpdateTimestamp":1700000000000,"maxOffset":12,"minOffset":0}}}"#;
        let table = TopicStatsTable::decode(java.as_bytes()).expect("decodes");
        assert_eq!(table.offset_table[&MessageQueue::new("TopicTest", "broker-a", 0)].max_offset, 12);
        assert_eq!(String::from_utf8(table.encode().unwrap()).unwrap(), java);
    }
}
