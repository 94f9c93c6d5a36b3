//! GET_ALL_CONSUMER_OFFSET (43) response body (`ConsumerOffsetSerializeWrapper`):
//! `{"offsetTable":{"topic@group":{queueId:offset}}}` — also the shape of Java's `consumerOffset.json`;
//! and GET_ALL_DELAY_OFFSET (45)'s (`DelayOffsetSerializeWrapper`, Java's `delayOffset.json`):
//! `{"offsetTable":{delayLevel:offset}}`, a level being its `SCHEDULE_TOPIC_XXXX` queue id + 1.
//!
//! fastjson writes the `Integer` queue ids as bare numbers (`{0:12}`); we write them quoted
//! (`{"0":12}`), which fastjson reads as well, and decode either.

use std::collections::BTreeMap;

use serde::Deserialize;
use serde::Serialize;

use super::JsonBody;
use super::null_as_default;

/// Separator of topic and group in an `offsetTable` key (`ConsumerOffsetManager.TOPIC_GROUP_SEPARATOR`).
pub const TOPIC_GROUP_SEPARATOR: char = '@';

/// Every group's committed offsets on a broker.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ConsumerOffsetSerializeWrapper {
    /// `topic@group` → queueId → offset.
    #[serde(deserialize_with = "null_as_default")]
    pub offset_table: BTreeMap<String, BTreeMap<i32, i64>>,
}

impl ConsumerOffsetSerializeWrapper {
    /// The `offsetTable` key of a topic and group.
    pub fn key(topic: &str, group: &str) -> String {
        format!("{topic}{TOPIC_GROUP_SEPARATOR}{group}")
    }

    /// Splits an `offsetTable` key into (topic, group); `None` without a separator. Neither topic nor
    /// group names may contain `@`, so the first one splits.
    pub fn split_key(key: &str) -> Option<(&str, &str)> {
        key.split_once(TOPIC_GROUP_SEPARATOR)
    }
}

impl JsonBody for ConsumerOffsetSerializeWrapper {
    const NAME: &'static str = "ConsumerOffsetSerializeWrapper";
}

/// The delivery progress of each delay level on a broker.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct DelayOffsetSerializeWrapper {
    /// Delay level (from 1) → next `SCHEDULE_TOPIC_XXXX` queue offset to deliver.
    #[serde(deserialize_with = "null_as_default")]
    pub offset_table: BTreeMap<i32, i64>,
}

impl JsonBody for DelayOffsetSerializeWrapper {
    const NAME: &'static str = "DelayOffsetSerializeWrapper";
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;
    use crate::protocol::body::testing::check_body;
    use crate::protocol::body::testing::text;

    #[test]
    fn consumer_offsets_satisfy_body_properties() {
        check_body(
            proptest::collection::btree_map(
                text(),
                proptest::collection::btree_map(any::<i32>(), any::<i64>(), 0..4),
                0..4,
            )
            .prop_map(|offset_table| ConsumerOffsetSerializeWrapper { offset_table })
            .boxed(),
        );
    }

    #[test]
    fn java_fastjson_form_with_bare_integer_keys_decodes() {
        let java = br#"{"offsetTable":{"TopicTest@cg":{0:12,1:-1,3:7},"%RETRY%cg@cg":{0:0}}}"#;
        let w = ConsumerOffsetSerializeWrapper::decode(java).expect("decodes");
        assert_eq!(w.offset_table["TopicTest@cg"][&1], -1);
        assert_eq!(w.offset_table["%RETRY%cg@cg"][&0], 0);
        assert_eq!(
            String::from_utf8(w.encode().unwrap()).unwrap(),
            r#"{"offsetTable":{"%RETRY%cg@cg":{"0":0},"TopicTest@cg":{"0":12,"1":-1,"3":7}}}"#
        );
        let key = ConsumerOffsetSerializeWrapper::key("TopicTest", "cg");
        assert_eq!(ConsumerOffsetSerializeWrapper::split_key(&key), Some(("TopicTest", "cg")));
        assert_eq!(ConsumerOffsetSerializeWrapper::split_key("nosep"), None);
    }

    #[test]
    fn delay_offsets_read_java_and_write_quoted_levels() {
        let w = DelayOffsetSerializeWrapper::decode(br#"{"offsetTable":{1:5,3:0}}"#).expect("decodes");
        assert_eq!(w.offset_table, BTreeMap::from([(1, 5), (3, 0)]));
        assert_eq!(String::from_utf8(w.encode().unwrap()).unwrap(), r#"{"offsetTable":{"1":5,"3":0}}"#);
    }
}
