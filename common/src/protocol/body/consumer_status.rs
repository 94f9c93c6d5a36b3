//! `GetConsumerStatusBody`: what each consumer of a group holds as its offsets of one topic. A
//! consumer answers GET_CONSUMER_STATUS_FROM_CLIENT (221) with its own table in
//! `messageQueueTable`; the broker answers INVOKE_BROKER_TO_GET_CONSUMER_STATUS (223, `mqadmin
//! getConsumerStatus`) with every answer keyed by client id in `consumerTable`.
//!
//! Both maps are keyed by `MessageQueue` in Java, which fastjson writes with object keys; see
//! [`super::reset_offset`] and [`super::fastjson`]. [`JsonBody::encode`] writes that form, the one
//! Java parses; decoding takes it and the standard form with string keys.

use std::collections::BTreeMap;

use serde::Deserialize;
use serde::Deserializer;
use serde::Serialize;

use super::BodyError;
use super::JsonBody;
use super::fastjson;
use crate::message::MessageQueue;

/// Queue → offset, as one consumer holds it in memory.
pub type QueueOffsetTable = BTreeMap<MessageQueue, i64>;

/// `org.apache.rocketmq.common.protocol.body.GetConsumerStatusBody`.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct GetConsumerStatusBody {
    /// One consumer's table (its answer to the broker).
    #[serde(with = "fastjson::object_keys")]
    pub message_queue_table: QueueOffsetTable,
    /// Client id → that consumer's table (the broker's answer to an admin).
    #[serde(serialize_with = "serialize_tables", deserialize_with = "deserialize_tables")]
    pub consumer_table: BTreeMap<String, QueueOffsetTable>,
}

fn serialize_tables<S: serde::Serializer>(
    tables: &BTreeMap<String, QueueOffsetTable>,
    serializer: S,
) -> Result<S::Ok, S::Error> {
    use serde::ser::SerializeMap;
    struct Table<'a>(&'a QueueOffsetTable);
    impl Serialize for Table<'_> {
        fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
            fastjson::object_keys::serialize(self.0, s)
        }
    }
    let mut map = serializer.serialize_map(Some(tables.len()))?;
    for (client, table) in tables {
        map.serialize_entry(client, &Table(table))?;
    }
    map.end()
}

/// Each inner table through [`fastjson::object_keys`]; `null` is an empty map, as fastjson reads it.
fn deserialize_tables<'de, D: Deserializer<'de>>(
    deserializer: D,
) -> Result<BTreeMap<String, QueueOffsetTable>, D::Error> {
    let raw: Option<BTreeMap<String, serde_json::Value>> = Option::deserialize(deserializer)?;
    raw.unwrap_or_default()
        .into_iter()
        .map(|(client, table)| {
            fastjson::object_keys::deserialize(table).map(|t| (client, t)).map_err(serde::de::Error::custom)
        })
        .collect()
}

impl JsonBody for GetConsumerStatusBody {
    const NAME: &'static str = "GetConsumerStatusBody";

    /// fastjson's form, with object keys and its field order (see the module docs).
    fn encode(&self) -> Result<Vec<u8>, BodyError> {
        let json = |source| BodyError::Json { body: Self::NAME, source };
        let rows: usize =
            self.message_queue_table.len() + self.consumer_table.values().map(BTreeMap::len).sum::<usize>();
        let mut out = Vec::with_capacity(64 + 72 * rows);
        out.extend_from_slice(b"{\"consumerTable\":{");
        for (n, (client, table)) in self.consumer_table.iter().enumerate() {
            if n > 0 {
                out.push(b',');
            }
            serde_json::to_writer(&mut out, client).map_err(json)?;
            out.push(b':');
            fastjson::write_object_keyed_map(&mut out, table).map_err(json)?;
        }
        out.extend_from_slice(b"},\"messageQueueTable\":");
        fastjson::write_object_keyed_map(&mut out, &self.message_queue_table).map_err(json)?;
        out.push(b'}');
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const JAVA_CLIENT: &str = r#"{"consumerTable":{},"messageQueueTable":{{"brokerName":"broker-a","queueId":1,"topic":"TopicTest"}:7,{"brokerName":"broker-a","queueId":0,"topic":"TopicTest"}:3}}"#;

    fn table() -> QueueOffsetTable {
        BTreeMap::from([
            (MessageQueue::new("TopicTest", "broker-a", 0), 3),
            (MessageQueue::new("TopicTest", "broker-a", 1), 7),
        ])
    }

    #[test]
    fn reads_a_java_consumers_answer() {
        let body = GetConsumerStatusBody::decode(JAVA_CLIENT.as_bytes()).unwrap();
        assert_eq!(body, GetConsumerStatusBody { message_queue_table: table(), ..Default::default() });
    }

    #[test]
    fn the_brokers_answer_round_trips_in_fastjsons_form() {
        let body = GetConsumerStatusBody {
            message_queue_table: BTreeMap::new(),
            consumer_table: BTreeMap::from([
                ("10.0.0.1@1".to_owned(), table()),
                ("10.0.0.2@1".to_owned(), BTreeMap::new()),
            ]),
        };
        let encoded = String::from_utf8(body.encode().unwrap()).unwrap();
        assert_eq!(
            encoded,
            r#"{"consumerTable":{"10.0.0.1@1":{{"brokerName":"broker-a","queueId":0,"topic":"TopicTest"}:3,{"brokerName":"broker-a","queueId":1,"topic":"TopicTest"}:7},"10.0.0.2@1":{}},"messageQueueTable":{}}"#
        );
        assert_eq!(GetConsumerStatusBody::decode(encoded.as_bytes()).unwrap(), body);
        // The standard form (string keys), as serde writes it, reads back too.
        let standard = serde_json::to_vec(&body).unwrap();
        assert_eq!(GetConsumerStatusBody::decode(&standard).unwrap(), body);
    }

    #[test]
    fn nulls_are_empty_and_garbage_is_refused() {
        let empty = GetConsumerStatusBody::decode(br#"{"consumerTable":null,"messageQueueTable":null}"#).unwrap();
        assert_eq!(empty, GetConsumerStatusBody::default());
        assert!(GetConsumerStatusBody::decode(br#"{"consumerTable":{"c":{{"queueId":"x"}:1}}}"#).is_err());
        assert!(GetConsumerStatusBody::decode(br#"{"consumerTable":{"c":7}}"#).is_err());
        assert!(GetConsumerStatusBody::decode(b"\x00\xff").is_err());
    }
}
