//! Headers of PULL_MESSAGE (11) (`PullMessageRequestHeader`, `PullMessageResponseHeader`) and the pull
//! sysFlag bits (`PullSysFlag`).
//!
//! The response header's four fields are required in every response code (SUCCESS, PULL_NOT_FOUND,
//! PULL_RETRY_IMMEDIATELY, PULL_OFFSET_MOVED): the 4.x client reads `nextBeginOffset` from all of them.

use super::ext_header::ext_header;

ext_header! {
    /// PULL_MESSAGE (11) request.
    pub struct PullMessageRequestHeader {
        /// Consumer group.
        required consumer_group: String => "consumerGroup",
        /// Topic.
        required topic: String => "topic",
        /// Queue.
        required queue_id: i32 => "queueId",
        /// First ConsumeQueue offset wanted.
        required queue_offset: i64 => "queueOffset",
        /// At most this many messages.
        required max_msg_nums: i32 => "maxMsgNums",
        /// [`pull_sys_flag`] bits.
        required sys_flag: i32 => "sysFlag",
        /// Consumer offset to store when the commit-offset bit is set.
        required commit_offset: i64 => "commitOffset",
        /// Long-poll time when the suspend bit is set (15 000 from the push consumer).
        required suspend_timeout_millis: i64 => "suspendTimeoutMillis",
        /// Subscription expression; used when the subscription bit is set.
        optional subscription: Option<String> => "subscription",
        /// Version of the subscription the client holds.
        required sub_version: i64 => "subVersion",
        /// `TAG` or `SQL92`.
        optional expression_type: Option<String> => "expressionType",
        /// Target broker name (`RpcRequestHeader.bname`).
        optional bname: Option<String> => "bname",
    }
}

ext_header! {
    /// PULL_MESSAGE (11) response.
    pub struct PullMessageResponseHeader {
        /// brokerId to pull from next (0 = master/leader).
        required suggest_which_broker_id: i64 => "suggestWhichBrokerId",
        /// Offset to pull from next.
        required next_begin_offset: i64 => "nextBeginOffset",
        /// Queue's smallest offset.
        required min_offset: i64 => "minOffset",
        /// Queue's offset after the last message.
        required max_offset: i64 => "maxOffset",
    }
}

/// PULL_MESSAGE sysFlag bits (`org.apache.rocketmq.common.sysflag.PullSysFlag`).
pub mod pull_sys_flag {
    /// Store `commitOffset` as the group's consumer offset.
    pub const COMMIT_OFFSET: i32 = 0x1;
    /// Long-poll up to `suspendTimeoutMillis` when nothing is found.
    pub const SUSPEND: i32 = 0x2;
    /// Use the request's `subscription` instead of the one registered by HEART_BEAT.
    pub const SUBSCRIPTION: i32 = 0x4;
    /// Class filter mode (filter server; not supported by raftmq).
    pub const CLASS_FILTER: i32 = 0x8;
    /// Sent by the lite pull consumer.
    pub const LITE_PULL_MESSAGE: i32 = 0x10;

    /// `PullSysFlag.buildSysFlag` with the lite-pull bit.
    pub fn build(commit_offset: bool, suspend: bool, subscription: bool, class_filter: bool, lite_pull: bool) -> i32 {
        let mut flag = 0;
        for (on, bit) in [
            (commit_offset, COMMIT_OFFSET),
            (suspend, SUSPEND),
            (subscription, SUBSCRIPTION),
            (class_filter, CLASS_FILTER),
            (lite_pull, LITE_PULL_MESSAGE),
        ] {
            if on {
                flag |= bit;
            }
        }
        flag
    }

    /// `PullSysFlag.clearCommitOffsetFlag`: a slave/follower must not store the offset.
    pub fn clear_commit_offset(sys_flag: i32) -> i32 {
        sys_flag & !COMMIT_OFFSET
    }

    /// `PullSysFlag.hasCommitOffsetFlag`.
    pub fn has_commit_offset(sys_flag: i32) -> bool {
        sys_flag & COMMIT_OFFSET == COMMIT_OFFSET
    }

    /// `PullSysFlag.hasSuspendFlag`.
    pub fn has_suspend(sys_flag: i32) -> bool {
        sys_flag & SUSPEND == SUSPEND
    }

    /// `PullSysFlag.hasSubscriptionFlag`.
    pub fn has_subscription(sys_flag: i32) -> bool {
        sys_flag & SUBSCRIPTION == SUBSCRIPTION
    }

    /// `PullSysFlag.hasClassFilterFlag`.
    pub fn has_class_filter(sys_flag: i32) -> bool {
        sys_flag & CLASS_FILTER == CLASS_FILTER
    }

    /// `PullSysFlag.hasLitePullFlag`.
    pub fn has_lite_pull(sys_flag: i32) -> bool {
        sys_flag & LITE_PULL_MESSAGE == LITE_PULL_MESSAGE
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
    fn pull_headers_satisfy_header_properties() {
        check_header::<PullMessageRequestHeader>();
        check_header::<PullMessageResponseHeader>();
    }

    #[test]
    fn sys_flag_bits_match_java() {
        // DefaultMQPushConsumerImpl: commit offset + suspend, no subscription (postSubscriptionWhenPull=false).
        assert_eq!(pull_sys_flag::build(true, true, false, false, false), 3);
        assert_eq!(pull_sys_flag::build(true, true, true, true, true), 0x1f);
        let flag = pull_sys_flag::build(true, true, true, false, false);
        assert!(pull_sys_flag::has_commit_offset(flag));
        assert!(pull_sys_flag::has_suspend(flag));
        assert!(pull_sys_flag::has_subscription(flag));
        assert!(!pull_sys_flag::has_class_filter(flag));
        assert!(!pull_sys_flag::has_lite_pull(flag));
        assert_eq!(pull_sys_flag::clear_commit_offset(flag), 6);
        assert!(!pull_sys_flag::has_commit_offset(pull_sys_flag::clear_commit_offset(flag)));
    }

    #[test]
    fn java_push_consumer_pull_decodes() {
        let fields: ExtFields = [
            ("consumerGroup", "please_rename_unique_group_name_4"),
            ("topic", "TopicTest"),
            ("queueId", "2"),
            ("queueOffset", "118"),
            ("maxMsgNums", "32"),
            ("sysFlag", "3"),
            ("commitOffset", "117"),
            ("suspendTimeoutMillis", "15000"),
            ("subVersion", "1700000000000"),
            ("expressionType", "TAG"),
        ]
        .into_iter()
        .map(|(k, v)| (k.into(), v.into()))
        .collect();
        let header = PullMessageRequestHeader::read_ext_fields(&fields).expect("valid pull header");
        assert_eq!(header.queue_offset, 118);
        assert_eq!(header.subscription, None);
        assert_eq!(header.expression_type.as_deref(), Some("TAG"));
        assert_eq!(header.to_ext_fields(), fields);

        let mut missing = fields.clone();
        missing.shift_remove("subVersion");
        assert_eq!(
            PullMessageRequestHeader::read_ext_fields(&missing),
            Err(HeaderError::Missing { field: "subVersion" })
        );
    }
}
