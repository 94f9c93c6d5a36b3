//! GET_CONSUME_STATS (208) response body: `ConsumeStats` (`{"consumeTps":..,"offsetTable":{..}}`) with
//! one `OffsetWrapper` per queue; and GET_BROKER_CONSUME_STATS (317)'s `ConsumeStatsList`, every
//! group's `ConsumeStats` on one broker.
//!
//! `offsetTable` is a Java `HashMap<MessageQueue, OffsetWrapper>`, which fastjson writes with object
//! keys: `{{"brokerName":"b","queueId":0,"topic":"t"}:{"brokerOffset":9,..}}` — not JSON. [`encode`]
//! writes exactly that form (queues in Java's `compareTo` order), since it is what Java's `mqadmin`
//! and dashboard parse; [`decode`] reads it and also the standard form with the key's JSON as a
//! string. See [`super::fastjson`].
//!
//! [`encode`]: JsonBody::encode
//! [`decode`]: JsonBody::decode

use std::collections::BTreeMap;

use serde::Deserialize;
use serde::Serialize;

use super::BodyError;
use super::JsonBody;
use super::fastjson;
use super::message_queue::MessageQueue;

/// One queue's progress (`org.apache.rocketmq.common.admin.OffsetWrapper`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct OffsetWrapper {
    /// Queue's max offset.
    pub broker_offset: i64,
    /// Group's committed offset.
    pub consumer_offset: i64,
    /// Store time of the last consumed message, ms.
    pub last_timestamp: i64,
}

/// A group's consumption progress (`org.apache.rocketmq.common.admin.ConsumeStats`).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ConsumeStats {
    /// Messages consumed per second.
    pub consume_tps: f64,
    /// Per-queue progress.
    #[serde(with = "fastjson::object_keys")]
    pub offset_table: BTreeMap<MessageQueue, OffsetWrapper>,
}

impl ConsumeStats {
    /// `ConsumeStats.computeTotalDiff`: messages not yet consumed, over all queues.
    pub fn compute_total_diff(&self) -> i64 {
        self.offset_table
            .values()
            .map(|w| w.broker_offset.saturating_sub(w.consumer_offset))
            .fold(0, i64::saturating_add)
    }
}

impl JsonBody for ConsumeStats {
    const NAME: &'static str = "ConsumeStats";

    /// fastjson's form, with object keys (see the module docs).
    fn encode(&self) -> Result<Vec<u8>, BodyError> {
        let json = |source| BodyError::Json { body: Self::NAME, source };
        let mut out = Vec::with_capacity(64 + 96 * self.offset_table.len());
        out.extend_from_slice(b"{\"consumeTps\":");
        serde_json::to_writer(&mut out, &self.consume_tps).map_err(json)?;
        out.extend_from_slice(b",\"offsetTable\":");
        fastjson::write_object_keyed_map(&mut out, &self.offset_table).map_err(json)?;
        out.push(b'}');
        Ok(out)
    }
}

/// Every consumer group's progress on one broker (`org.apache.rocketmq.common.protocol.body.ConsumeStatsList`,
/// GET_BROKER_CONSUME_STATS): per group, one `ConsumeStats` per topic.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ConsumeStatsList {
    /// One single-entry map (group → its topics' stats) per group, as Java builds it.
    pub consume_stats_list: Vec<BTreeMap<String, Vec<ConsumeStats>>>,
    /// The answering broker.
    pub broker_addr: String,
    /// Messages not yet consumed, over every group and queue listed.
    pub total_diff: i64,
}

impl JsonBody for ConsumeStatsList {
    const NAME: &'static str = "ConsumeStatsList";

    /// fastjson's form: each `ConsumeStats` with object keys, fields in fastjson's (alphabetical) order.
    fn encode(&self) -> Result<Vec<u8>, BodyError> {
        let json = |source| BodyError::Json { body: Self::NAME, source };
        let mut out = Vec::with_capacity(128);
        out.extend_from_slice(b"{\"brokerAddr\":");
        serde_json::to_writer(&mut out, &self.broker_addr).map_err(json)?;
        out.extend_from_slice(b",\"consumeStatsList\":[");
        for (i, groups) in self.consume_stats_list.iter().enumerate() {
            if i > 0 {
                out.push(b',');
            }
            out.push(b'{');
            for (j, (group, stats)) in groups.iter().enumerate() {
                if j > 0 {
                    out.push(b',');
                }
                serde_json::to_writer(&mut out, group).map_err(json)?;
                out.extend_from_slice(b":[");
                for (k, one) in stats.iter().enumerate() {
                    if k > 0 {
                        out.push(b',');
                    }
                    out.extend_from_slice(&one.encode()?);
                }
                out.push(b']');
            }
            out.push(b'}');
        }
        out.extend_from_slice(b"],\"totalDiff\":");
        serde_json::to_writer(&mut out, &self.total_diff).map_err(json)?;
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
    fn consume_stats_satisfies_body_properties() {
        let wrapper = any::<(i64, i64, i64)>().prop_map(|(broker_offset, consumer_offset, last_timestamp)| {
            OffsetWrapper { broker_offset, consumer_offset, last_timestamp }
        });
        // Hundredths up to 10^7: decimals serde_json parses back exactly (no float_roundtrip needed).
        let tps = (0u32..1_000_000_000).prop_map(|n| f64::from(n) / 100.0);
        check_body(
            (tps, proptest::collection::btree_map(arb_mq(), wrapper, 0..4))
                .prop_map(|(consume_tps, offset_table)| ConsumeStats { consume_tps, offset_table })
                .boxed(),
        );
    }

    const JAVA_FASTJSON: &str = r#"{"consumeTps":1.5,"offsetTable":{{"brokerName":"broker-a","queueId":1,"topic":"TopicTest"}:{"brokerOffset":100,"consumerOffset":90,"lastTimestamp":1700000000000},{"brokerName":"broker-a","queueId":0,"topic":"TopicTest"}:{"brokerOffset":50,"consumerOffset":50,"lastTimestamp":1700000000001}}}"#;

    #[test]
    fn java_fastjson_form_decodes_and_is_what_we_encode() {
        let stats = ConsumeStats::decode(JAVA_FASTJSON.as_bytes()).expect("fastjson form decodes");
        assert_eq!(stats.consume_tps, 1.5);
        assert_eq!(stats.offset_table.len(), 2);
        assert_eq!(stats.offset_table[&MessageQueue::new("TopicTest", "broker-a", 1)].consumer_offset, 90);
        assert_eq!(stats.compute_total_diff(), 10);
        let encoded = String::from_utf8(stats.encode().unwrap()).unwrap();
        // Same form, queues sorted by Java's compareTo (queue 0 first).
        assert!(encoded.starts_with(r#"{"consumeTps":1.5,"offsetTable":{{"brokerName":"broker-a","queueId":0,"topic":"TopicTest"}:{"brokerOffset":50,"#));
        assert_eq!(ConsumeStats::decode(encoded.as_bytes()).unwrap(), stats);
    }

    #[test]
    fn standard_form_with_string_keys_decodes() {
        let stats = ConsumeStats {
            consume_tps: 0.0,
            offset_table: [(MessageQueue::new("T", "b", 0), OffsetWrapper { broker_offset: 1, ..Default::default() })]
                .into(),
        };
        let standard = serde_json::to_vec(&stats).unwrap();
        assert!(standard.starts_with(br#"{"consumeTps":0.0,"offsetTable":{"{\"brokerName\""#));
        assert_eq!(ConsumeStats::decode(&standard).unwrap(), stats);
        assert_eq!(ConsumeStats::decode(br#"{"consumeTps":0.0,"offsetTable":null}"#).unwrap(), ConsumeStats::default());
    }

    #[test]
    fn consume_stats_list_round_trips_in_fastjson_form() {
        let stats = ConsumeStats::decode(JAVA_FASTJSON.as_bytes()).unwrap();
        let list = ConsumeStatsList {
            consume_stats_list: vec![
                [("g1".to_owned(), vec![stats.clone()])].into(),
                [("g2".to_owned(), vec![])].into(),
            ],
            broker_addr: "10.0.0.1:10911".into(),
            total_diff: 10,
        };
        let encoded = String::from_utf8(list.encode().unwrap()).unwrap();
        assert!(
            encoded.starts_with(
                r#"{"brokerAddr":"10.0.0.1:10911","consumeStatsList":[{"g1":[{"consumeTps":1.5,"offsetTable":{{"#
            ),
            "{encoded}"
        );
        assert!(encoded.ends_with(r#"{"g2":[]}],"totalDiff":10}"#), "{encoded}");
        assert_eq!(ConsumeStatsList::decode(encoded.as_bytes()).unwrap(), list);
    }

    #[test]
    fn bad_key_is_an_error() {
        assert!(ConsumeStats::decode(br#"{"offsetTable":{"not json":{}}}"#).is_err());
        assert!(ConsumeStats::decode(br#"{"offsetTable":{{"queueId":"x"}:{}}}"#).is_err());
    }
}
