//! Headers of the admin requests a broker serves (`mqadmin` and the dashboard): topics, subscription
//! groups, consume stats, connections, offsets reset/clone, broker config and stats.
//!
//! Codes with no header fields (GET_ALL_TOPIC_CONFIG 21, GET_BROKER_RUNTIME_INFO 28,
//! GET_ALL_SUBSCRIPTIONGROUP_CONFIG 201, GET_ALL_CONSUMER_OFFSET 43, ...) have no struct here.
//! Java's unannotated primitive fields (`removeOffset`, `offline`) are optional here.

use super::ext_header::ext_header;

ext_header! {
    /// UPDATE_AND_CREATE_TOPIC (17) request (`CreateTopicRequestHeader`).
    pub struct CreateTopicRequestHeader {
        /// Topic.
        required topic: String => "topic",
        /// Template topic (`TBW102`).
        required default_topic: String => "defaultTopic",
        /// Queues consumers read.
        required read_queue_nums: i32 => "readQueueNums",
        /// Queues producers write.
        required write_queue_nums: i32 => "writeQueueNums",
        /// `PermName` bits (6 = read + write).
        required perm: i32 => "perm",
        /// `SINGLE_TAG` or `MULTI_TAG`.
        required topic_filter_type: String => "topicFilterType",
        /// Topic sysFlag.
        optional topic_sys_flag: Option<i32> => "topicSysFlag",
        /// Ordered topic.
        required order: bool => "order",
    }
}

ext_header! {
    /// DELETE_TOPIC_IN_BROKER (215) request (`DeleteTopicRequestHeader`; also used for
    /// DELETE_TOPIC_IN_NAMESRV by Java).
    pub struct DeleteTopicRequestHeader {
        /// Topic.
        required topic: String => "topic",
    }
}

ext_header! {
    /// DELETE_SUBSCRIPTIONGROUP (207) request.
    pub struct DeleteSubscriptionGroupRequestHeader {
        /// The group.
        required group_name: String => "groupName",
        /// Also drop the group's consumer offsets.
        optional remove_offset: Option<bool> => "removeOffset",
    }
}

ext_header! {
    /// GET_CONSUME_STATS (208) request; the response body is `ConsumeStats`.
    pub struct GetConsumeStatsRequestHeader {
        /// Consumer group.
        required consumer_group: String => "consumerGroup",
        /// Only this topic (all the group's topics when absent).
        optional topic: Option<String> => "topic",
    }
}

ext_header! {
    /// GET_TOPIC_STATS_INFO (202) request; the response body is `TopicStatsTable`.
    pub struct GetTopicStatsInfoRequestHeader {
        /// Topic.
        required topic: String => "topic",
    }
}

ext_header! {
    /// INVOKE_BROKER_TO_RESET_OFFSET (222) request; also broker → client RESET_CONSUMER_CLIENT_OFFSET (220).
    pub struct ResetOffsetRequestHeader {
        /// Topic.
        required topic: String => "topic",
        /// Consumer group.
        required group: String => "group",
        /// Reset to the first offset stored at or after this time, ms.
        required timestamp: i64 => "timestamp",
        /// Also move offsets forward (otherwise only backward).
        required is_force: bool => "isForce",
    }
}

ext_header! {
    /// GET_CONSUMER_RUNNING_INFO (307) request, admin → broker and, relayed, broker → client.
    pub struct GetConsumerRunningInfoRequestHeader {
        /// Consumer group.
        required consumer_group: String => "consumerGroup",
        /// The client asked (`ip@instanceName`).
        required client_id: String => "clientId",
        /// Whether to include a stack dump (a JVM notion; a Rust client has none to give).
        optional jstack_enable: Option<bool> => "jstackEnable",
    }
}

ext_header! {
    /// GET_CONSUMER_CONNECTION_LIST (203) request.
    pub struct GetConsumerConnectionListRequestHeader {
        /// Consumer group.
        required consumer_group: String => "consumerGroup",
    }
}

ext_header! {
    /// GET_PRODUCER_CONNECTION_LIST (204) request.
    pub struct GetProducerConnectionListRequestHeader {
        /// Producer group.
        required producer_group: String => "producerGroup",
    }
}

ext_header! {
    /// QUERY_TOPIC_CONSUME_BY_WHO (300) request.
    pub struct QueryTopicConsumeByWhoRequestHeader {
        /// Topic.
        required topic: String => "topic",
    }
}

ext_header! {
    /// QUERY_CONSUME_TIME_SPAN (303) request.
    pub struct QueryConsumeTimeSpanRequestHeader {
        /// Topic.
        required topic: String => "topic",
        /// Consumer group.
        required group: String => "group",
    }
}

ext_header! {
    /// CLONE_GROUP_OFFSET (314) request.
    pub struct CloneGroupOffsetRequestHeader {
        /// Group to copy offsets from.
        required src_group: String => "srcGroup",
        /// Group to copy offsets to.
        required dest_group: String => "destGroup",
        /// Only this topic.
        optional topic: Option<String> => "topic",
        /// The source group is offline.
        optional offline: Option<bool> => "offline",
    }
}

ext_header! {
    /// GET_BROKER_CONSUME_STATS (317) request (`GetConsumeStatsInBrokerHeader`).
    pub struct GetConsumeStatsInBrokerHeader {
        /// Only ordered (or only unordered) topics.
        required is_order: bool => "isOrder",
    }
}

ext_header! {
    /// INVOKE_BROKER_TO_GET_CONSUMER_STATUS (223) request.
    pub struct GetConsumerStatusRequestHeader {
        /// Topic.
        required topic: String => "topic",
        /// Consumer group.
        required group: String => "group",
        /// Only this client.
        optional client_addr: Option<String> => "clientAddr",
    }
}

ext_header! {
    /// GET_BROKER_CONFIG (26) response; the body is the config as a properties string.
    pub struct GetBrokerConfigResponseHeader {
        /// `DataVersion` of the config, as JSON.
        required version: String => "version",
    }
}

ext_header! {
    /// VIEW_BROKER_STATS_DATA (315) request.
    pub struct ViewBrokerStatsDataRequestHeader {
        /// Statistic, e.g. `TOPIC_PUT_NUMS`.
        required stats_name: String => "statsName",
        /// Its key, e.g. the topic.
        required stats_key: String => "statsKey",
    }
}

ext_header! {
    /// QUERY_CORRECTION_OFFSET (308) request (`QueryCorrectionOffsetHeader`).
    pub struct QueryCorrectionOffsetHeader {
        /// Comma-separated groups to compare with.
        optional filter_groups: Option<String> => "filterGroups",
        /// Group whose offsets are corrected.
        required compare_group: String => "compareGroup",
        /// Topic.
        required topic: String => "topic",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::ext_fields::ExtFields;
    use crate::protocol::header::CommandHeader;
    use crate::protocol::header::ext_header::testing::check_header;

    #[test]
    fn admin_headers_satisfy_header_properties() {
        check_header::<CreateTopicRequestHeader>();
        check_header::<DeleteTopicRequestHeader>();
        check_header::<DeleteSubscriptionGroupRequestHeader>();
        check_header::<GetConsumeStatsRequestHeader>();
        check_header::<GetTopicStatsInfoRequestHeader>();
        check_header::<ResetOffsetRequestHeader>();
        check_header::<GetConsumerRunningInfoRequestHeader>();
        check_header::<GetConsumerConnectionListRequestHeader>();
        check_header::<GetProducerConnectionListRequestHeader>();
        check_header::<QueryTopicConsumeByWhoRequestHeader>();
        check_header::<QueryConsumeTimeSpanRequestHeader>();
        check_header::<CloneGroupOffsetRequestHeader>();
        check_header::<GetConsumeStatsInBrokerHeader>();
        check_header::<GetConsumerStatusRequestHeader>();
        check_header::<GetBrokerConfigResponseHeader>();
        check_header::<ViewBrokerStatsDataRequestHeader>();
        check_header::<QueryCorrectionOffsetHeader>();
    }

    #[test]
    fn mqadmin_update_topic_decodes() {
        // `mqadmin updateTopic -t TopicTest -r 8 -w 8 -p 6` through MQClientAPIImpl.createTopic.
        let fields: ExtFields = [
            ("topic", "TopicTest"),
            ("defaultTopic", "TBW102"),
            ("readQueueNums", "8"),
            ("writeQueueNums", "8"),
            ("perm", "6"),
            ("topicFilterType", "SINGLE_TAG"),
            ("topicSysFlag", "0"),
            ("order", "false"),
        ]
        .into_iter()
        .map(|(k, v)| (k.into(), v.into()))
        .collect();
        let header = CreateTopicRequestHeader::read_ext_fields(&fields).expect("valid header");
        assert_eq!(header.read_queue_nums, 8);
        assert_eq!(header.topic_sys_flag, Some(0));
        assert!(!header.order);
        assert_eq!(header.to_ext_fields(), fields);
    }
}
