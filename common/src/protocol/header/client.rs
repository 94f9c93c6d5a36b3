//! Headers of the client-management requests: UNREGISTER_CLIENT (35), CONSUMER_SEND_MSG_BACK (36),
//! GET_CONSUMER_LIST_BY_GROUP (38), NOTIFY_CONSUMER_IDS_CHANGED (40, broker → client, oneway) and the
//! broker → client GET_CONSUMER_RUNNING_INFO (307) / CONSUME_MESSAGE_DIRECTLY (309) /
//! GET_CONSUMER_STATUS_FROM_CLIENT (221), and INVOKE_BROKER_TO_GET_CONSUMER_STATUS (223).
//!
//! HEART_BEAT (34) has no header (its `HeartbeatData` is a body), and GET_CONSUMER_LIST_BY_GROUP answers
//! with the `ConsumerListBody` body; their response headers are empty in Java.

use super::ext_header::ext_header;

ext_header! {
    /// UNREGISTER_CLIENT (35) request: the client leaves one producer and/or consumer group.
    pub struct UnregisterClientRequestHeader {
        /// `ip@instanceName` (the key really is spelled `clientID`).
        required client_id: String => "clientID",
        /// Producer group to leave.
        optional producer_group: Option<String> => "producerGroup",
        /// Consumer group to leave.
        optional consumer_group: Option<String> => "consumerGroup",
    }
}

ext_header! {
    /// CONSUMER_SEND_MSG_BACK (36) request: a consumer returns a message it failed to consume.
    pub struct ConsumerSendMsgBackRequestHeader {
        /// CommitLog physical offset of the failed message.
        required offset: i64 => "offset",
        /// Consumer group.
        required group: String => "group",
        /// Delay level; 0 lets the broker choose 3 + reconsumeTimes, negative sends to the DLQ.
        required delay_level: i32 => "delayLevel",
        /// msgId of the original message.
        optional origin_msg_id: Option<String> => "originMsgId",
        /// Topic of the original message.
        optional origin_topic: Option<String> => "originTopic",
        /// Unit mode; Java sends `false` when unset.
        optional unit_mode: Option<bool> => "unitMode",
        /// Retries before the DLQ (-1 / absent = the group's `retryMaxTimes`).
        optional max_reconsume_times: Option<i32> => "maxReconsumeTimes",
        /// Target broker name (`RpcRequestHeader.bname`).
        optional bname: Option<String> => "bname",
    }
}

ext_header! {
    /// GET_CONSUMER_LIST_BY_GROUP (38) request.
    pub struct GetConsumerListByGroupRequestHeader {
        /// Consumer group.
        required consumer_group: String => "consumerGroup",
    }
}

ext_header! {
    /// NOTIFY_CONSUMER_IDS_CHANGED (40), broker → client, oneway: rebalance now.
    pub struct NotifyConsumerIdsChangedRequestHeader {
        /// The group whose membership changed.
        required consumer_group: String => "consumerGroup",
    }
}

ext_header! {
    /// GET_CONSUMER_RUNNING_INFO (307), broker → client.
    pub struct GetConsumerRunningInfoRequestHeader {
        /// Consumer group.
        required consumer_group: String => "consumerGroup",
        /// The client asked.
        required client_id: String => "clientId",
        /// Include a thread dump.
        optional jstack_enable: Option<bool> => "jstackEnable",
    }
}

ext_header! {
    /// INVOKE_BROKER_TO_GET_CONSUMER_STATUS (223, admin → broker) and GET_CONSUMER_STATUS_FROM_CLIENT
    /// (221, broker → client): a group's offsets of a topic as its consumers hold them
    /// (`GetConsumerStatusRequestHeader`).
    pub struct GetConsumerStatusRequestHeader {
        /// Topic.
        required topic: String => "topic",
        /// Consumer group.
        required group: String => "group",
        /// Only this client id (absent or blank: every consumer of the group).
        optional client_addr: Option<String> => "clientAddr",
    }
}

ext_header! {
    /// CONSUME_MESSAGE_DIRECTLY (309), broker → client (`ConsumeMessageDirectlyResultRequestHeader`).
    pub struct ConsumeMessageDirectlyResultRequestHeader {
        /// Consumer group.
        required consumer_group: String => "consumerGroup",
        /// The client asked.
        optional client_id: Option<String> => "clientId",
        /// The message to consume.
        optional msg_id: Option<String> => "msgId",
        /// Broker holding the message.
        optional broker_name: Option<String> => "brokerName",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::ext_fields::ExtFields;
    use crate::protocol::header::CommandHeader;
    use crate::protocol::header::HeaderError;
    use crate::protocol::header::ext_header::testing::check_header;

    #[test]
    fn client_headers_satisfy_header_properties() {
        check_header::<UnregisterClientRequestHeader>();
        check_header::<ConsumerSendMsgBackRequestHeader>();
        check_header::<GetConsumerListByGroupRequestHeader>();
        check_header::<NotifyConsumerIdsChangedRequestHeader>();
        check_header::<GetConsumerRunningInfoRequestHeader>();
        check_header::<ConsumeMessageDirectlyResultRequestHeader>();
        check_header::<GetConsumerStatusRequestHeader>();
    }

    #[test]
    fn java_send_back_decodes() {
        let fields: ExtFields = [
            ("offset", "4242"),
            ("group", "cg"),
            ("delayLevel", "0"),
            ("originMsgId", "7F00000100002A9F0000000000000001"),
            ("originTopic", "TopicTest"),
            ("unitMode", "false"),
            ("maxReconsumeTimes", "16"),
        ]
        .into_iter()
        .map(|(k, v)| (k.into(), v.into()))
        .collect();
        let header = ConsumerSendMsgBackRequestHeader::read_ext_fields(&fields).expect("valid header");
        assert_eq!(header.offset, 4242);
        assert_eq!(header.max_reconsume_times, Some(16));
        assert_eq!(header.unit_mode, Some(false));
        let mut missing = fields;
        missing.shift_remove("group");
        assert_eq!(
            ConsumerSendMsgBackRequestHeader::read_ext_fields(&missing),
            Err(HeaderError::Missing { field: "group" })
        );
    }
}
