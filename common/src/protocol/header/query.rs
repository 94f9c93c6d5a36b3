//! Headers of the message queries: QUERY_MESSAGE (12, by key through the IndexFile), VIEW_MESSAGE_BY_ID
//! (33, by CommitLog offset) and QUERY_CONSUME_QUEUE (321, ConsumeQueue units for admin tools).
//!
//! QUERY_MESSAGE carries one key that is not a field of Java's header class: the client adds
//! `_UNIQUE_KEY_QUERY` (`MixAll.UNIQUE_MSG_QUERY_FLAG`) to say `key` is a `UNIQ_KEY`, and the broker
//! reads it from `extFields`; it is modelled here as an optional field so it is not lost.

use super::ext_header::ext_header;

ext_header! {
    /// QUERY_MESSAGE (12) request.
    pub struct QueryMessageRequestHeader {
        /// Topic.
        required topic: String => "topic",
        /// The key (a `KEYS` entry, or a `UNIQ_KEY` when `unique_key_query`).
        required key: String => "key",
        /// At most this many messages.
        required max_num: i32 => "maxNum",
        /// Earliest store time, ms.
        required begin_timestamp: i64 => "beginTimestamp",
        /// Latest store time, ms.
        required end_timestamp: i64 => "endTimestamp",
        /// `_UNIQUE_KEY_QUERY`: the key is a client msgId.
        optional unique_key_query: Option<bool> => "_UNIQUE_KEY_QUERY",
    }
}

ext_header! {
    /// QUERY_MESSAGE (12) response; the body is the found records, concatenated.
    pub struct QueryMessageResponseHeader {
        /// Store time of the newest indexed message, ms.
        required index_last_update_timestamp: i64 => "indexLastUpdateTimestamp",
        /// CommitLog offset of the newest indexed message (the key really is spelled `Phyoffset`).
        required index_last_update_phyoffset: i64 => "indexLastUpdatePhyoffset",
    }
}

ext_header! {
    /// VIEW_MESSAGE_BY_ID (33) request (`ViewMessageRequestHeader`); the response body is one record.
    pub struct ViewMessageRequestHeader {
        /// CommitLog physical offset (decoded from the offsetMsgId).
        required offset: i64 => "offset",
    }
}

ext_header! {
    /// QUERY_CONSUME_QUEUE (321) request. Java's fields are unannotated primitives, so all are optional
    /// here although Java always sends them.
    pub struct QueryConsumeQueueRequestHeader {
        /// Topic.
        optional topic: Option<String> => "topic",
        /// Queue.
        optional queue_id: Option<i32> => "queueId",
        /// First ConsumeQueue index.
        optional index: Option<i64> => "index",
        /// Units wanted.
        optional count: Option<i32> => "count",
        /// Group whose subscription filters the units.
        optional consumer_group: Option<String> => "consumerGroup",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::ext_fields::ExtFields;
    use crate::protocol::header::CommandHeader;
    use crate::protocol::header::ext_header::testing::check_header;

    #[test]
    fn query_headers_satisfy_header_properties() {
        check_header::<QueryMessageRequestHeader>();
        check_header::<QueryMessageResponseHeader>();
        check_header::<ViewMessageRequestHeader>();
        check_header::<QueryConsumeQueueRequestHeader>();
    }

    #[test]
    fn unique_key_flag_is_read() {
        let fields: ExtFields = [
            ("topic", "TopicTest"),
            ("key", "7F00000100002A9F0000000000000001"),
            ("maxNum", "32"),
            ("beginTimestamp", "0"),
            ("endTimestamp", "9223372036854775807"),
            ("_UNIQUE_KEY_QUERY", "true"),
        ]
        .into_iter()
        .map(|(k, v)| (k.into(), v.into()))
        .collect();
        let header = QueryMessageRequestHeader::read_ext_fields(&fields).expect("valid header");
        assert_eq!(header.unique_key_query, Some(true));
        assert_eq!(header.end_timestamp, i64::MAX);
    }
}
