//! Headers of the offset requests: QUERY_CONSUMER_OFFSET (14), UPDATE_CONSUMER_OFFSET (15),
//! SEARCH_OFFSET_BY_TIMESTAMP (29), GET_MAX_OFFSET (30), GET_MIN_OFFSET (31),
//! GET_EARLIEST_MSG_STORETIME (32) and QUERY_BROKER_OFFSET (13).
//!
//! Offsets are ConsumeQueue indexes (message counts), except QUERY_BROKER_OFFSET's, which are
//! CommitLog bytes. UPDATE_CONSUMER_OFFSET's response has no fields
//! (`UpdateConsumerOffsetResponseHeader` is empty in Java), and GET_ALL_CONSUMER_OFFSET (43) has a
//! body only. Java 4.9.8 defines QUERY_BROKER_OFFSET but serves it nowhere; its response header
//! here is raftmq's own, named like Java's other offset headers.
//! Every request here extends Java's `RpcRequestHeader`, hence the optional `bname`.

use super::ext_header::ext_header;

ext_header! {
    /// QUERY_CONSUMER_OFFSET (14) request.
    pub struct QueryConsumerOffsetRequestHeader {
        /// Consumer group.
        required consumer_group: String => "consumerGroup",
        /// Topic.
        required topic: String => "topic",
        /// Queue.
        required queue_id: i32 => "queueId",
        /// RocketMQ 5: `false` asks for QUERY_NOT_FOUND when the group has no offset, instead of
        /// 0 for a queue that still starts at 0 (absent: that 0).
        optional set_zero_if_not_found: Option<bool> => "setZeroIfNotFound",
        /// Target broker name (`RpcRequestHeader.bname`).
        optional bname: Option<String> => "bname",
    }
}

ext_header! {
    /// QUERY_CONSUMER_OFFSET (14) response; absent on QUERY_NOT_FOUND.
    pub struct QueryConsumerOffsetResponseHeader {
        /// The group's stored offset.
        required offset: i64 => "offset",
    }
}

ext_header! {
    /// UPDATE_CONSUMER_OFFSET (15) request; 4.x clients send it oneway every 5 s.
    pub struct UpdateConsumerOffsetRequestHeader {
        /// Consumer group.
        required consumer_group: String => "consumerGroup",
        /// Topic.
        required topic: String => "topic",
        /// Queue.
        required queue_id: i32 => "queueId",
        /// Offset of the next message the group will consume.
        required commit_offset: i64 => "commitOffset",
        /// Target broker name (`RpcRequestHeader.bname`).
        optional bname: Option<String> => "bname",
    }
}

ext_header! {
    /// GET_MAX_OFFSET (30) request.
    pub struct GetMaxOffsetRequestHeader {
        /// Topic.
        required topic: String => "topic",
        /// Queue.
        required queue_id: i32 => "queueId",
        /// Target broker name (`RpcRequestHeader.bname`).
        optional bname: Option<String> => "bname",
    }
}

ext_header! {
    /// GET_MAX_OFFSET (30) response.
    pub struct GetMaxOffsetResponseHeader {
        /// Offset after the queue's last message.
        required offset: i64 => "offset",
    }
}

ext_header! {
    /// GET_MIN_OFFSET (31) request.
    pub struct GetMinOffsetRequestHeader {
        /// Topic.
        required topic: String => "topic",
        /// Queue.
        required queue_id: i32 => "queueId",
        /// Target broker name (`RpcRequestHeader.bname`).
        optional bname: Option<String> => "bname",
    }
}

ext_header! {
    /// GET_MIN_OFFSET (31) response.
    pub struct GetMinOffsetResponseHeader {
        /// Offset of the queue's oldest retained message.
        required offset: i64 => "offset",
    }
}

ext_header! {
    /// QUERY_BROKER_OFFSET (13) response: the broker's CommitLog span in bytes (the request has no
    /// fields).
    pub struct QueryBrokerOffsetResponseHeader {
        /// End of the committed CommitLog: where the next record goes (Java's
        /// `commitLogMaxOffset`); consumers never read past it.
        required offset: i64 => "offset",
        /// Start of the retained CommitLog: the retention boundary, 0 before the first purge.
        required min_offset: i64 => "minOffset",
    }
}

ext_header! {
    /// SEARCH_OFFSET_BY_TIMESTAMP (29) request (`SearchOffsetRequestHeader`).
    pub struct SearchOffsetRequestHeader {
        /// Topic.
        required topic: String => "topic",
        /// Queue.
        required queue_id: i32 => "queueId",
        /// Store timestamp to search for, ms.
        required timestamp: i64 => "timestamp",
        /// Target broker name (`RpcRequestHeader.bname`).
        optional bname: Option<String> => "bname",
    }
}

ext_header! {
    /// SEARCH_OFFSET_BY_TIMESTAMP (29) response.
    pub struct SearchOffsetResponseHeader {
        /// Offset of the first message stored at or after the timestamp.
        required offset: i64 => "offset",
    }
}

ext_header! {
    /// GET_EARLIEST_MSG_STORETIME (32) request.
    pub struct GetEarliestMsgStoretimeRequestHeader {
        /// Topic.
        required topic: String => "topic",
        /// Queue.
        required queue_id: i32 => "queueId",
        /// Target broker name (`RpcRequestHeader.bname`).
        optional bname: Option<String> => "bname",
    }
}

ext_header! {
    /// GET_EARLIEST_MSG_STORETIME (32) response.
    pub struct GetEarliestMsgStoretimeResponseHeader {
        /// Store timestamp of the queue's oldest message, ms.
        required timestamp: i64 => "timestamp",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::header::ext_header::testing::check_header;

    #[test]
    fn offset_headers_satisfy_header_properties() {
        check_header::<QueryConsumerOffsetRequestHeader>();
        check_header::<QueryConsumerOffsetResponseHeader>();
        check_header::<UpdateConsumerOffsetRequestHeader>();
        check_header::<GetMaxOffsetRequestHeader>();
        check_header::<GetMaxOffsetResponseHeader>();
        check_header::<GetMinOffsetRequestHeader>();
        check_header::<GetMinOffsetResponseHeader>();
        check_header::<QueryBrokerOffsetResponseHeader>();
        check_header::<SearchOffsetRequestHeader>();
        check_header::<SearchOffsetResponseHeader>();
        check_header::<GetEarliestMsgStoretimeRequestHeader>();
        check_header::<GetEarliestMsgStoretimeResponseHeader>();
    }
}
