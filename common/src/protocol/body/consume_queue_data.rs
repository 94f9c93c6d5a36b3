//! QUERY_CONSUME_QUEUE (321) response body (`QueryConsumeQueueResponseBody`, `mqadmin queryCq`):
//! ConsumeQueue units of one queue from an index, the queue's bounds, and, when a consumer group is
//! named, its subscription and whether each unit passes its filter at ConsumeQueue level.
//!
//! Fields are declared in fastjson's alphabetical key order; absent strings are omitted, as fastjson
//! omits nulls.

use serde::Deserialize;
use serde::Serialize;

use super::JsonBody;
use super::heartbeat::SubscriptionData;
use super::null_as_default;

/// One unit (`ConsumeQueueData`).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ConsumeQueueData {
    /// The filter bitmap of an extended unit (never written by raftmq, which keeps no ConsumeQueue ext).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bit_map: Option<String>,
    /// Whether the named group's filter passes the unit's tag code.
    pub eval: bool,
    /// The extended unit as JSON (never written by raftmq).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub extend_data_json: Option<String>,
    /// What went wrong reading the unit, if anything.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub msg: Option<String>,
    /// CommitLog offset of the record.
    pub physic_offset: i64,
    /// Record size in bytes.
    pub physic_size: i32,
    /// Tag hash code (the delivery time in `SCHEDULE_TOPIC_XXXX`).
    pub tags_code: i64,
}

/// The answer (`QueryConsumeQueueResponseBody`).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct QueryConsumeQueueResponseBody {
    /// The group's filter (a SQL92 expression), or why the group has none here.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub filter_data: Option<String>,
    /// The queue's max offset (the next unit's index).
    pub max_queue_index: i64,
    /// The queue's min offset.
    pub min_queue_index: i64,
    /// Units from the asked index.
    #[serde(deserialize_with = "null_as_default")]
    pub queue_data: Vec<ConsumeQueueData>,
    /// The named group's subscription to the topic, if it is online.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub subscription_data: Option<SubscriptionData>,
}

impl JsonBody for QueryConsumeQueueResponseBody {
    const NAME: &'static str = "QueryConsumeQueueResponseBody";
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn javas_body_decodes_and_ours_is_in_fastjson_order() {
        let java = br#"{"filterData":"g@T is not online!","maxQueueIndex":12,"minQueueIndex":2,"queueData":[{"eval":false,"physicOffset":4096,"physicSize":230,"tagsCode":2598919}]}"#;
        let body = QueryConsumeQueueResponseBody::decode(java).expect("decodes");
        assert_eq!((body.min_queue_index, body.max_queue_index), (2, 12));
        assert_eq!(body.queue_data[0].physic_offset, 4096);
        assert_eq!(body.subscription_data, None);
        assert_eq!(String::from_utf8(body.encode().unwrap()).unwrap(), String::from_utf8(java.to_vec()).unwrap());
        assert!(QueryConsumeQueueResponseBody::decode(br#"{"queueData":null}"#).unwrap().queue_data.is_empty());
    }
}
