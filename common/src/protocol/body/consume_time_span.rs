//! QUERY_CONSUME_TIME_SPAN (303) response body (`QueryConsumeTimeSpanBody`): per queue of a topic,
//! the store times of its first and last message, of the last message a group consumed, and how
//! long the next unconsumed message has waited (`QueueTimeSpan`), as the dashboard shows them.
//!
//! Fields are declared in fastjson's alphabetical key order. Java's `QueueTimeSpan` also has
//! `...Str` getters that fastjson writes as local-time strings; decoders ignore them, so they are
//! left out rather than tied to a time zone.

use serde::Deserialize;
use serde::Serialize;

use super::JsonBody;
use super::message_queue::MessageQueue;
use super::null_as_default;

/// One queue's time span (`QueueTimeSpan`); times in ms since the epoch, -1 when there is none.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct QueueTimeSpan {
    /// Store time of the last message the group consumed (the first message's when it consumed none).
    pub consume_time_stamp: i64,
    /// How long the next unconsumed message has been stored, ms (0 when the group is caught up; for
    /// a group without an offset, or behind the retention boundary, the oldest stored message's age).
    pub delay_time: i64,
    /// Store time of the queue's last message.
    pub max_time_stamp: i64,
    /// The queue.
    pub message_queue: MessageQueue,
    /// Store time of the queue's first message.
    pub min_time_stamp: i64,
}

/// Every queue's span (`QueryConsumeTimeSpanBody`).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct QueryConsumeTimeSpanBody {
    /// One entry per write queue.
    #[serde(deserialize_with = "null_as_default")]
    pub consume_time_span_set: Vec<QueueTimeSpan>,
}

impl JsonBody for QueryConsumeTimeSpanBody {
    const NAME: &'static str = "QueryConsumeTimeSpanBody";
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn javas_body_decodes_and_ours_is_in_fastjson_order() {
        let java = br#"{"consumeTimeSpanSet":[{"consumeTimeStamp":1700000000500,"consumeTimeStampStr":"2023-11-14 22:13:20,500","delayTime":1200,"maxTimeStamp":1700000001000,"maxTimeStampStr":"x","messageQueue":{"brokerName":"broker-a","queueId":1,"topic":"T"},"minTimeStamp":1700000000000,"minTimeStampStr":"y"}]}"#;
        let body = QueryConsumeTimeSpanBody::decode(java).expect("decodes");
        let span = &body.consume_time_span_set[0];
        assert_eq!(
            (span.min_time_stamp, span.consume_time_stamp, span.max_time_stamp),
            (1700000000000, 1700000000500, 1700000001000)
        );
        assert_eq!((span.delay_time, span.message_queue.queue_id), (1200, 1));
        assert_eq!(
            String::from_utf8(body.encode().unwrap()).unwrap(),
            r#"{"consumeTimeSpanSet":[{"consumeTimeStamp":1700000000500,"delayTime":1200,"maxTimeStamp":1700000001000,"messageQueue":{"brokerName":"broker-a","queueId":1,"topic":"T"},"minTimeStamp":1700000000000}]}"#
        );
        assert!(
            QueryConsumeTimeSpanBody::decode(br#"{"consumeTimeSpanSet":null}"#)
                .unwrap()
                .consume_time_span_set
                .is_empty()
        );
    }
}
