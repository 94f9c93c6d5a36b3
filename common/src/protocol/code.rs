//! Request, response and language codes, numbered exactly as RocketMQ 4.9.8 numbers them
//! (`RequestCode.java`, `ResponseCode.java`, `RemotingSysResponseCode.java`, `LanguageCode.java`).
//!
//! Invariant: `from_i32(x).as_i32() == x` for every `x`. A number we do not know decodes to
//! `Unknown(x)` and is kept, so a proxy or a log never loses what the peer sent. Numbers are never
//! reused for another meaning: a retired code stays listed.

macro_rules! numbered_codes {
    ($(#[$meta:meta])* $name:ident { $($(#[$vmeta:meta])* $variant:ident = $num:literal => $wire:literal,)* }) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        pub enum $name {
            $($(#[$vmeta])* $variant,)*
            /// A number this build does not know; kept verbatim.
            Unknown(i32),
        }

        impl $name {
            /// Every known code, in declaration order.
            pub const ALL: &'static [$name] = &[$($name::$variant,)*];

            /// The code for a wire number; unknown numbers become `Unknown(n)`.
            pub fn from_i32(n: i32) -> Self {
                match n {
                    $($num => $name::$variant,)*
                    other => $name::Unknown(other),
                }
            }

            /// The wire number.
            pub fn as_i32(self) -> i32 {
                match self {
                    $($name::$variant => $num,)*
                    $name::Unknown(n) => n,
                }
            }

            /// RocketMQ's constant name (`SEND_MESSAGE_V2`), or `UNKNOWN` for unknown numbers.
            pub fn name(self) -> &'static str {
                match self {
                    $($name::$variant => $wire,)*
                    $name::Unknown(_) => "UNKNOWN",
                }
            }
        }

        impl From<i32> for $name {
            fn from(n: i32) -> Self {
                Self::from_i32(n)
            }
        }

        impl From<$name> for i32 {
            fn from(c: $name) -> i32 {
                c.as_i32()
            }
        }

        impl std::fmt::Display for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                write!(f, "{}({})", self.name(), self.as_i32())
            }
        }
    };
}

numbered_codes! {
    /// Request codes (`common/.../protocol/RequestCode.java`, 4.9.8), plus raftmq's private range.
    RequestCode {
        SendMessage = 10 => "SEND_MESSAGE",
        PullMessage = 11 => "PULL_MESSAGE",
        QueryMessage = 12 => "QUERY_MESSAGE",
        QueryBrokerOffset = 13 => "QUERY_BROKER_OFFSET",
        QueryConsumerOffset = 14 => "QUERY_CONSUMER_OFFSET",
        UpdateConsumerOffset = 15 => "UPDATE_CONSUMER_OFFSET",
        UpdateAndCreateTopic = 17 => "UPDATE_AND_CREATE_TOPIC",
        GetAllTopicConfig = 21 => "GET_ALL_TOPIC_CONFIG",
        GetTopicConfigList = 22 => "GET_TOPIC_CONFIG_LIST",
        GetTopicNameList = 23 => "GET_TOPIC_NAME_LIST",
        UpdateBrokerConfig = 25 => "UPDATE_BROKER_CONFIG",
        GetBrokerConfig = 26 => "GET_BROKER_CONFIG",
        TriggerDeleteFiles = 27 => "TRIGGER_DELETE_FILES",
        GetBrokerRuntimeInfo = 28 => "GET_BROKER_RUNTIME_INFO",
        SearchOffsetByTimestamp = 29 => "SEARCH_OFFSET_BY_TIMESTAMP",
        GetMaxOffset = 30 => "GET_MAX_OFFSET",
        GetMinOffset = 31 => "GET_MIN_OFFSET",
        GetEarliestMsgStoretime = 32 => "GET_EARLIEST_MSG_STORETIME",
        ViewMessageById = 33 => "VIEW_MESSAGE_BY_ID",
        HeartBeat = 34 => "HEART_BEAT",
        UnregisterClient = 35 => "UNREGISTER_CLIENT",
        ConsumerSendMsgBack = 36 => "CONSUMER_SEND_MSG_BACK",
        EndTransaction = 37 => "END_TRANSACTION",
        GetConsumerListByGroup = 38 => "GET_CONSUMER_LIST_BY_GROUP",
        CheckTransactionState = 39 => "CHECK_TRANSACTION_STATE",
        NotifyConsumerIdsChanged = 40 => "NOTIFY_CONSUMER_IDS_CHANGED",
        LockBatchMq = 41 => "LOCK_BATCH_MQ",
        UnlockBatchMq = 42 => "UNLOCK_BATCH_MQ",
        GetAllConsumerOffset = 43 => "GET_ALL_CONSUMER_OFFSET",
        GetAllDelayOffset = 45 => "GET_ALL_DELAY_OFFSET",
        CheckClientConfig = 46 => "CHECK_CLIENT_CONFIG",
        UpdateAndCreateAclConfig = 50 => "UPDATE_AND_CREATE_ACL_CONFIG",
        DeleteAclConfig = 51 => "DELETE_ACL_CONFIG",
        GetBrokerClusterAclInfo = 52 => "GET_BROKER_CLUSTER_ACL_INFO",
        UpdateGlobalWhiteAddrsConfig = 53 => "UPDATE_GLOBAL_WHITE_ADDRS_CONFIG",
        /// Up to 4.9.7 only (4.9.8 removed it): answered as unsupported, as 4.9.8 does.
        GetBrokerClusterAclConfig = 54 => "GET_BROKER_CLUSTER_ACL_CONFIG",
        PutKvConfig = 100 => "PUT_KV_CONFIG",
        GetKvConfig = 101 => "GET_KV_CONFIG",
        DeleteKvConfig = 102 => "DELETE_KV_CONFIG",
        RegisterBroker = 103 => "REGISTER_BROKER",
        UnregisterBroker = 104 => "UNREGISTER_BROKER",
        GetRouteinfoByTopic = 105 => "GET_ROUTEINFO_BY_TOPIC",
        GetBrokerClusterInfo = 106 => "GET_BROKER_CLUSTER_INFO",
        UpdateAndCreateSubscriptiongroup = 200 => "UPDATE_AND_CREATE_SUBSCRIPTIONGROUP",
        GetAllSubscriptiongroupConfig = 201 => "GET_ALL_SUBSCRIPTIONGROUP_CONFIG",
        GetTopicStatsInfo = 202 => "GET_TOPIC_STATS_INFO",
        GetConsumerConnectionList = 203 => "GET_CONSUMER_CONNECTION_LIST",
        GetProducerConnectionList = 204 => "GET_PRODUCER_CONNECTION_LIST",
        WipeWritePermOfBroker = 205 => "WIPE_WRITE_PERM_OF_BROKER",
        GetAllTopicListFromNameserver = 206 => "GET_ALL_TOPIC_LIST_FROM_NAMESERVER",
        DeleteSubscriptiongroup = 207 => "DELETE_SUBSCRIPTIONGROUP",
        GetConsumeStats = 208 => "GET_CONSUME_STATS",
        SuspendConsumer = 209 => "SUSPEND_CONSUMER",
        ResumeConsumer = 210 => "RESUME_CONSUMER",
        ResetConsumerOffsetInConsumer = 211 => "RESET_CONSUMER_OFFSET_IN_CONSUMER",
        ResetConsumerOffsetInBroker = 212 => "RESET_CONSUMER_OFFSET_IN_BROKER",
        AdjustConsumerThreadPool = 213 => "ADJUST_CONSUMER_THREAD_POOL",
        WhoConsumeTheMessage = 214 => "WHO_CONSUME_THE_MESSAGE",
        DeleteTopicInBroker = 215 => "DELETE_TOPIC_IN_BROKER",
        DeleteTopicInNamesrv = 216 => "DELETE_TOPIC_IN_NAMESRV",
        GetKvlistByNamespace = 219 => "GET_KVLIST_BY_NAMESPACE",
        ResetConsumerClientOffset = 220 => "RESET_CONSUMER_CLIENT_OFFSET",
        GetConsumerStatusFromClient = 221 => "GET_CONSUMER_STATUS_FROM_CLIENT",
        InvokeBrokerToResetOffset = 222 => "INVOKE_BROKER_TO_RESET_OFFSET",
        InvokeBrokerToGetConsumerStatus = 223 => "INVOKE_BROKER_TO_GET_CONSUMER_STATUS",
        GetTopicsByCluster = 224 => "GET_TOPICS_BY_CLUSTER",
        QueryTopicConsumeByWho = 300 => "QUERY_TOPIC_CONSUME_BY_WHO",
        RegisterFilterServer = 301 => "REGISTER_FILTER_SERVER",
        RegisterMessageFilterClass = 302 => "REGISTER_MESSAGE_FILTER_CLASS",
        QueryConsumeTimeSpan = 303 => "QUERY_CONSUME_TIME_SPAN",
        GetSystemTopicListFromNs = 304 => "GET_SYSTEM_TOPIC_LIST_FROM_NS",
        GetSystemTopicListFromBroker = 305 => "GET_SYSTEM_TOPIC_LIST_FROM_BROKER",
        CleanExpiredConsumequeue = 306 => "CLEAN_EXPIRED_CONSUMEQUEUE",
        GetConsumerRunningInfo = 307 => "GET_CONSUMER_RUNNING_INFO",
        QueryCorrectionOffset = 308 => "QUERY_CORRECTION_OFFSET",
        ConsumeMessageDirectly = 309 => "CONSUME_MESSAGE_DIRECTLY",
        SendMessageV2 = 310 => "SEND_MESSAGE_V2",
        GetUnitTopicList = 311 => "GET_UNIT_TOPIC_LIST",
        GetHasUnitSubTopicList = 312 => "GET_HAS_UNIT_SUB_TOPIC_LIST",
        GetHasUnitSubUnunitTopicList = 313 => "GET_HAS_UNIT_SUB_UNUNIT_TOPIC_LIST",
        CloneGroupOffset = 314 => "CLONE_GROUP_OFFSET",
        ViewBrokerStatsData = 315 => "VIEW_BROKER_STATS_DATA",
        CleanUnusedTopic = 316 => "CLEAN_UNUSED_TOPIC",
        GetBrokerConsumeStats = 317 => "GET_BROKER_CONSUME_STATS",
        UpdateNamesrvConfig = 318 => "UPDATE_NAMESRV_CONFIG",
        GetNamesrvConfig = 319 => "GET_NAMESRV_CONFIG",
        SendBatchMessage = 320 => "SEND_BATCH_MESSAGE",
        QueryConsumeQueue = 321 => "QUERY_CONSUME_QUEUE",
        QueryDataVersion = 322 => "QUERY_DATA_VERSION",
        ResumeCheckHalfMessage = 323 => "RESUME_CHECK_HALF_MESSAGE",
        SendReplyMessage = 324 => "SEND_REPLY_MESSAGE",
        SendReplyMessageV2 = 325 => "SEND_REPLY_MESSAGE_V2",
        PushReplyMessageToClient = 326 => "PUSH_REPLY_MESSAGE_TO_CLIENT",
        AddWritePermOfBroker = 327 => "ADD_WRITE_PERM_OF_BROKER",
        DeleteExpiredCommitlog = 329 => "DELETE_EXPIRED_COMMITLOG",
        /// 5.x POP: receive messages that stay invisible until acked or their time ends.
        PopMessage = 200_050 => "POP_MESSAGE",
        /// 5.x POP: ack one popped message by its extraInfo (receipt handle).
        AckMessage = 200_051 => "ACK_MESSAGE",
        /// 5.x POP: renew or shorten a popped message's invisible time.
        ChangeMessageInvisibletime = 200_053 => "CHANGE_MESSAGE_INVISIBLETIME",
        /// raftmq private: Raft AppendEntries between the nodes of one broker group (bincode body).
        RaftAppendEntries = 20_001 => "RAFT_APPEND_ENTRIES",
        /// raftmq private: Raft RequestVote.
        RaftVote = 20_002 => "RAFT_VOTE",
        /// raftmq private: Raft full snapshot transfer.
        RaftInstallSnapshot = 20_003 => "RAFT_INSTALL_SNAPSHOT",
        /// raftmq private: Raft leadership transfer notice.
        RaftTransferLeader = 20_004 => "RAFT_TRANSFER_LEADER",
        /// raftmq private: a follower forwards a write to the leader.
        RaftForward = 20_005 => "RAFT_FORWARD",
        /// raftmq private admin: add a node to a broker group (learner, catch-up, voter); JSON body
        /// `AddNodeRequest`, answer `MembershipReport`. Leader only; a follower answers
        /// SERVICE_NOT_AVAILABLE with `leader=<ip:port>`; a broker without membership answers
        /// REQUEST_CODE_NOT_SUPPORTED. The 20_1xx range is raftmq's group administration.
        RaftAddNode = 20_101 => "RAFT_ADD_NODE",
        /// raftmq private admin: remove a voter or learner (`RemoveNodeRequest` → `MembershipReport`).
        RaftRemoveNode = 20_102 => "RAFT_REMOVE_NODE",
        /// raftmq private admin: hand leadership to a node or to any caught-up voter
        /// (`TransferLeadershipRequest` → `MembershipReport`). Not RAFT_TRANSFER_LEADER (20_004),
        /// which is openraft's notice between the nodes of a group.
        RaftTransferLeadership = 20_103 => "RAFT_TRANSFER_LEADERSHIP",
        /// raftmq private admin: this node's view of its group (no body → `GroupStatus`); any member answers.
        RaftGroupStatus = 20_104 => "RAFT_GROUP_STATUS",
        /// raftmq private admin: the leader tells a node it removed that it is no longer a member
        /// (`RemoveNodeRequest`), so it stops registering with the NameServers.
        RaftNodeRemoved = 20_105 => "RAFT_NODE_REMOVED",
    }
}

numbered_codes! {
    /// Response codes (`RemotingSysResponseCode.java` 0–4 and `ResponseCode.java`, 4.9.8; 5.x additions marked).
    ResponseCode {
        Success = 0 => "SUCCESS",
        SystemError = 1 => "SYSTEM_ERROR",
        SystemBusy = 2 => "SYSTEM_BUSY",
        RequestCodeNotSupported = 3 => "REQUEST_CODE_NOT_SUPPORTED",
        TransactionFailed = 4 => "TRANSACTION_FAILED",
        FlushDiskTimeout = 10 => "FLUSH_DISK_TIMEOUT",
        SlaveNotAvailable = 11 => "SLAVE_NOT_AVAILABLE",
        FlushSlaveTimeout = 12 => "FLUSH_SLAVE_TIMEOUT",
        MessageIllegal = 13 => "MESSAGE_ILLEGAL",
        ServiceNotAvailable = 14 => "SERVICE_NOT_AVAILABLE",
        VersionNotSupported = 15 => "VERSION_NOT_SUPPORTED",
        NoPermission = 16 => "NO_PERMISSION",
        TopicNotExist = 17 => "TOPIC_NOT_EXIST",
        TopicExistAlready = 18 => "TOPIC_EXIST_ALREADY",
        PullNotFound = 19 => "PULL_NOT_FOUND",
        PullRetryImmediately = 20 => "PULL_RETRY_IMMEDIATELY",
        PullOffsetMoved = 21 => "PULL_OFFSET_MOVED",
        QueryNotFound = 22 => "QUERY_NOT_FOUND",
        SubscriptionParseFailed = 23 => "SUBSCRIPTION_PARSE_FAILED",
        SubscriptionNotExist = 24 => "SUBSCRIPTION_NOT_EXIST",
        SubscriptionNotLatest = 25 => "SUBSCRIPTION_NOT_LATEST",
        SubscriptionGroupNotExist = 26 => "SUBSCRIPTION_GROUP_NOT_EXIST",
        FilterDataNotExist = 27 => "FILTER_DATA_NOT_EXIST",
        FilterDataNotLatest = 28 => "FILTER_DATA_NOT_LATEST",
        /// 5.x only.
        InvalidParameter = 29 => "INVALID_PARAMETER",
        TransactionShouldCommit = 200 => "TRANSACTION_SHOULD_COMMIT",
        TransactionShouldRollback = 201 => "TRANSACTION_SHOULD_ROLLBACK",
        TransactionStateUnknow = 202 => "TRANSACTION_STATE_UNKNOW",
        TransactionStateGroupWrong = 203 => "TRANSACTION_STATE_GROUP_WRONG",
        NoBuyerId = 204 => "NO_BUYER_ID",
        NotInCurrentUnit = 205 => "NOT_IN_CURRENT_UNIT",
        ConsumerNotOnline = 206 => "CONSUMER_NOT_ONLINE",
        ConsumeMsgTimeout = 207 => "CONSUME_MSG_TIMEOUT",
        NoMessage = 208 => "NO_MESSAGE",
        /// 5.x's POLLING_FULL; 4.x's UPDATE_AND_CREATE_ACL_CONFIG_FAILED has the same number
        /// ([`ResponseCode::UPDATE_AND_CREATE_ACL_CONFIG_FAILED`]).
        PollingFull = 209 => "POLLING_FULL",
        /// 5.x's POLLING_TIMEOUT; 4.x's DELETE_ACL_CONFIG_FAILED has the same number
        /// ([`ResponseCode::DELETE_ACL_CONFIG_FAILED`]).
        PollingTimeout = 210 => "POLLING_TIMEOUT",
        UpdateGlobalWhiteAddrsConfigFailed = 211 => "UPDATE_GLOBAL_WHITE_ADDRS_CONFIG_FAILED",
        FlowControl = 215 => "FLOW_CONTROL",
        /// 5.x only.
        NotLeaderForQueue = 501 => "NOT_LEADER_FOR_QUEUE",
        /// 5.x only.
        IllegalOperation = 604 => "ILLEGAL_OPERATION",
        /// 5.x only.
        GoAway = 1500 => "GO_AWAY",
    }
}

impl ResponseCode {
    /// 4.x's UPDATE_AND_CREATE_ACL_CONFIG_FAILED (209), the number 5.x calls POLLING_FULL.
    pub const UPDATE_AND_CREATE_ACL_CONFIG_FAILED: ResponseCode = ResponseCode::PollingFull;
    /// 4.x's DELETE_ACL_CONFIG_FAILED (210), the number 5.x calls POLLING_TIMEOUT.
    pub const DELETE_ACL_CONFIG_FAILED: ResponseCode = ResponseCode::PollingTimeout;

    /// Codes on which a RocketMQ 4.x producer retries the send on another broker group
    /// (`DefaultMQProducer.retryResponseCodes`; 5.3.3 adds SYSTEM_BUSY and GO_AWAY).
    pub fn is_producer_retryable(self) -> bool {
        matches!(
            self,
            ResponseCode::TopicNotExist
                | ResponseCode::ServiceNotAvailable
                | ResponseCode::SystemError
                | ResponseCode::SystemBusy
                | ResponseCode::NoPermission
                | ResponseCode::NoBuyerId
                | ResponseCode::NotInCurrentUnit
                | ResponseCode::GoAway
        )
    }
}

numbered_codes! {
    /// The sender's implementation language (`LanguageCode.java`).
    LanguageCode {
        Java = 0 => "JAVA",
        Cpp = 1 => "CPP",
        Dotnet = 2 => "DOTNET",
        Python = 3 => "PYTHON",
        Delphi = 4 => "DELPHI",
        Erlang = 5 => "ERLANG",
        Ruby = 6 => "RUBY",
        Other = 7 => "OTHER",
        Http = 8 => "HTTP",
        Go = 9 => "GO",
        Php = 10 => "PHP",
        Oms = 11 => "OMS",
        Rust = 12 => "RUST",
    }
}

impl LanguageCode {
    /// The language for RocketMQ's constant name (as JSON headers carry it).
    pub fn from_name(name: &str) -> Option<Self> {
        Self::ALL.iter().copied().find(|c| c.name() == name)
    }
}

/// `MQVersion.Version` ordinals that matter on the wire.
pub mod version {
    /// RocketMQ 4.9.4: the first version that understands `acceptStandardJsonOnly`.
    pub const V4_9_4: i32 = 401;
    /// RocketMQ 4.9.8, the last 4.x release; what raftmq announces itself as.
    pub const V4_9_8: i32 = 409;
    /// [`V4_9_8`]'s name (`MQVersion.getVersionDesc`), where a version is reported as text.
    pub const V4_9_8_DESC: &str = "V4_9_8";
    /// RocketMQ 5.0.0.
    pub const V5_0_0: i32 = 413;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_numbers_match_rocketmq() {
        assert_eq!(RequestCode::SendMessageV2.as_i32(), 310);
        assert_eq!(RequestCode::SendBatchMessage.as_i32(), 320);
        assert_eq!(RequestCode::RegisterBroker.as_i32(), 103);
        assert_eq!(ResponseCode::ServiceNotAvailable.as_i32(), 14);
        assert_eq!(ResponseCode::PullOffsetMoved.as_i32(), 21);
        assert_eq!(LanguageCode::Rust.as_i32(), 12);
    }

    #[test]
    fn every_code_round_trips_and_numbers_are_unique() {
        let mut seen = std::collections::HashSet::new();
        for c in RequestCode::ALL {
            assert!(seen.insert(c.as_i32()), "request code {c} is listed twice");
            assert_eq!(RequestCode::from_i32(c.as_i32()), *c);
        }
        let mut seen = std::collections::HashSet::new();
        for c in ResponseCode::ALL {
            assert!(seen.insert(c.as_i32()), "response code {c} is listed twice");
            assert_eq!(ResponseCode::from_i32(c.as_i32()), *c);
        }
    }

    #[test]
    fn unknown_numbers_are_kept() {
        assert_eq!(RequestCode::from_i32(99_999), RequestCode::Unknown(99_999));
        assert_eq!(RequestCode::from_i32(99_999).as_i32(), 99_999);
        assert_eq!(ResponseCode::from_i32(-7).as_i32(), -7);
    }

    #[test]
    fn language_names() {
        assert_eq!(LanguageCode::from_name("JAVA"), Some(LanguageCode::Java));
        assert_eq!(LanguageCode::from_name("RUST"), Some(LanguageCode::Rust));
        assert_eq!(LanguageCode::from_name("COBOL"), None);
    }
}
