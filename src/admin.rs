//! `raftmq admin <command>`: RocketMQ's `mqadmin` with its command names and flags, on the SDK's
//! [`Admin`]. Default output is mqadmin's `#`-headed tables; `--json` prints one JSON document for
//! scripts instead.
//!
//! Which broker answers:
//! - writes (`updateTopic`, `updateTopicPerm`, `updateSubGroup`, `deleteSubGroup`,
//!   `resetOffsetByTime`) go to each group's brokerId 0, the Raft leader; `-b` takes a group name
//!   (`broker-a`) or one address (`ip:port`), `-c` a cluster; `cloneGroupOffset` goes to the leader
//!   of every group in the topic's route;
//! - a broker config (`updateBrokerConfig`) is per replica: `-b` one address, `-c` every replica;
//!   so are `deleteExpiredCommitLog` (the leader purges, the others follow) and `cleanExpiredCQ`;
//! - NameServer state (`updateKvConfig`, `deleteKvConfig`, `wipeWritePerm`, `addWritePerm`) is
//!   written to every NameServer, since they share nothing;
//! - reads go to the leader when the group has one, else to its lowest-id replica; those that name
//!   one broker address (`brokerStatus`, `getBrokerConfig`, `brokerConsumeStats` with `-b`) ask
//!   exactly that replica.
//!
//! Where a raftmq broker does not serve Java's admin request yet, the command says so and fails
//! (REQUEST_CODE_NOT_SUPPORTED → "`<command>`: the broker does not support `<CODE>` yet"), except
//! where Java's own tools have an older path built from requests the broker does serve:
//! `topicStatus` (GET_MIN/MAX_OFFSET per queue), `consumerProgress` (GET_ALL_CONSUMER_OFFSET +
//! GET_MAX_OFFSET) and `resetOffsetByTime` (`resetOffsetByTimeOld`: SEARCH_OFFSET_BY_TIMESTAMP +
//! UPDATE_CONSUMER_OFFSET, used when the group has no consumer online, as Java does).
//!
//! `consumerStatus` and `getConsumerStatus` ask the group's clients themselves
//! (GET_CONSUMER_RUNNING_INFO, GET_CONSUMER_STATUS_FROM_CLIENT), through a broker holding the
//! client's connection.
//!
//! Raft group administration (raftmq's own, no mqadmin counterpart): `groupStatus` asks every member
//! of a group for its own view (RAFT_GROUP_STATUS; brokers without it fall back to the NameServer's
//! view), `addNode`, `removeNode` and `transferLeader` go to the group's leader, following leader hints.

use std::collections::BTreeMap;
use std::collections::BTreeSet;

use anyhow::Context;
use anyhow::Result;
use anyhow::anyhow;
use anyhow::bail;
use clap::ArgGroup;
use clap::Args;
use clap::Subcommand;
use raftmq_client::Admin;
use raftmq_client::ClientError;
use raftmq_client::admin::PlainAccessConfig;
use raftmq_common::limits::QUERY_CONSUME_QUEUE_DEFAULT_COUNT;
use raftmq_common::limits::QUERY_CONSUME_QUEUE_MAX_COUNT;
use raftmq_common::limits::QUERY_MESSAGE_MAX_COUNT;
use raftmq_common::message::Message;
use raftmq_common::message::MessageExt;
use raftmq_common::message::MessageQueue;
use raftmq_common::message::OffsetMsgId;
use raftmq_common::message::trace::TraceType;
use raftmq_common::message::trace::TraceView;
use raftmq_common::message::validate::DLQ_GROUP_TOPIC_PREFIX;
use raftmq_common::message::validate::RETRY_GROUP_TOPIC_PREFIX;
use raftmq_common::message::validate::is_dlq_topic;
use raftmq_common::message::validate::is_retry_topic;
use raftmq_common::protocol::RequestCode;
use raftmq_common::protocol::ResponseCode;
use raftmq_common::protocol::body::broker_stats::BrokerStatsData;
use raftmq_common::protocol::body::connection::Connection as ConnectionBody;
use raftmq_common::protocol::body::connection::ConsumerConnection;
use raftmq_common::protocol::body::consume_stats::ConsumeStats;
use raftmq_common::protocol::body::consume_stats::OffsetWrapper;
use raftmq_common::protocol::body::consumer_offset::ConsumerOffsetSerializeWrapper;
use raftmq_common::protocol::body::consumer_running_info::ConsumerRunningInfo;
use raftmq_common::protocol::body::consumer_running_info::PROP_CLIENT_VERSION;
use raftmq_common::protocol::body::consumer_running_info::PROP_CONSUME_ORDERLY;
use raftmq_common::protocol::body::membership::MembershipReport;
use raftmq_common::protocol::body::route::MASTER_ID;
use raftmq_common::protocol::body::route::TopicRouteData;
use raftmq_common::protocol::body::subscription_group::SubscriptionGroupConfig;
use raftmq_common::protocol::body::topic::TopicConfig;
use raftmq_common::protocol::body::topic::perm;
use raftmq_common::protocol::body::topic_stats::TopicOffset;
use raftmq_common::protocol::header::query::QueryMessageRequestHeader;
use serde_json::json;

use crate::namesrv_addr::NamesrvAddrArgs;
use crate::namesrv_addr::human_time_ms;
use crate::namesrv_addr::now_ms;
use crate::table::Table;

/// KV namespace of ordered-topic queue layouts (`NamesrvUtil.NAMESPACE_ORDER_TOPIC_CONFIG`).
const ORDER_TOPIC_CONFIG_NAMESPACE: &str = "ORDER_TOPIC_CONFIG";

/// `raftmq admin` flags.
#[derive(Debug, Args)]
pub struct AdminArgs {
    #[command(flatten)]
    namesrv: NamesrvAddrArgs,

    /// Print one JSON document instead of tables.
    #[arg(long, global = true)]
    json: bool,

    #[command(subcommand)]
    command: AdminCommand,
}

/// mqadmin's commands.
#[derive(Debug, Subcommand)]
enum AdminCommand {
    /// Create or update a topic on a cluster's or one group's leader.
    #[command(name = "updateTopic")]
    UpdateTopic(UpdateTopicArgs),
    /// Delete a topic from a cluster's brokers and from the NameServers.
    #[command(name = "deleteTopic")]
    DeleteTopic(DeleteTopicArgs),
    /// List every topic the NameServer knows.
    #[command(name = "topicList")]
    TopicList,
    /// Show a topic's route: groups, addresses, queues.
    #[command(name = "topicRoute")]
    TopicRoute(TopicArgs),
    /// Show min/max offsets of every queue of a topic.
    #[command(name = "topicStatus")]
    TopicStatus(TopicArgs),
    /// List clusters, broker groups and their nodes.
    #[command(name = "clusterList")]
    ClusterList,
    /// Create or update a consumer group (subscription group).
    #[command(name = "updateSubGroup")]
    UpdateSubGroup(UpdateSubGroupArgs),
    /// Show a consumer group's offsets and lag per queue.
    #[command(name = "consumerProgress")]
    ConsumerProgress(ConsumerProgressArgs),
    /// Show a broker's runtime counters (messages in and out, rates, uptime, Raft position).
    #[command(name = "brokerStatus")]
    BrokerStatus(BrokerStatusArgs),
    /// Show a broker's configuration (RocketMQ key names; secrets masked).
    #[command(name = "getBrokerConfig")]
    GetBrokerConfig(BrokerStatusArgs),
    /// Change keys of broker configs while they run (one replica with `-b`, every replica of a
    /// cluster with `-c`); the keys a broker can change at runtime are listed in its refusal of any
    /// other. Persisted by the broker across restarts.
    #[command(name = "updateBrokerConfig")]
    UpdateBrokerConfig(UpdateBrokerConfigArgs),
    /// Show the config of every NameServer (`-n`), key by key.
    #[command(name = "getNamesrvConfig")]
    GetNamesrvConfig,
    /// Change a key of every NameServer (`-n`) while it runs (orderMessageEnable,
    /// deleteTopicWithBrokerRegistration, enableAllTopicList, enableTopicList,
    /// brokerChannelExpiredTime); not written to its config file.
    #[command(name = "updateNamesrvConfig")]
    UpdateNamesrvConfig(UpdateNamesrvConfigArgs),
    /// Clear the write permission of a broker group in every NameServer: producers stop choosing
    /// it, consumers still read it (until the group's topics change or its leader does).
    #[command(name = "wipeWritePerm")]
    WipeWritePerm(BrokerNameArgs),
    /// Give a broker group read and write permission again in every NameServer.
    #[command(name = "addWritePerm")]
    AddWritePerm(BrokerNameArgs),
    /// Change a topic's permission (2 write, 4 read, 6 read + write) on each target group, keeping
    /// its other settings.
    #[command(name = "updateTopicPerm")]
    UpdateTopicPerm(UpdateTopicPermArgs),
    /// Delete a consumer group (its offsets stay unless `-r true`); with `-c`, also its retry and DLQ
    /// topics.
    #[command(name = "deleteSubGroup")]
    DeleteSubGroup(DeleteSubGroupArgs),
    /// Every consumer group's lag on one broker, per queue (rows with a lag of at least `-l`).
    #[command(name = "brokerConsumeStats")]
    BrokerConsumeStats(BrokerConsumeStatsArgs),
    /// Copy a consumer group's committed offsets of a topic to another group, on every group of
    /// the topic (e.g. before renaming a consumer group).
    #[command(name = "cloneGroupOffset")]
    CloneGroupOffset(CloneGroupOffsetArgs),
    /// Set a KV config in every NameServer (e.g. `ORDER_TOPIC_CONFIG`).
    #[command(name = "updateKvConfig")]
    UpdateKvConfig(KvConfigArgs),
    /// Delete a KV config from every NameServer.
    #[command(name = "deleteKvConfig")]
    DeleteKvConfig(KvKeyArgs),
    /// Per topic and consumer group: backlog, TPS in and out over the last minute, messages in and
    /// out over the last 24 hours.
    #[command(name = "statsAll")]
    StatsAll(StatsAllArgs),
    /// List a consumer group's connected clients and its subscriptions.
    #[command(name = "consumerConnection")]
    ConsumerConnection(ConsumerConnectionArgs),
    /// Show what a consumer group's running clients report: settings, subscriptions, queues held.
    #[command(name = "consumerStatus")]
    ConsumerStatus(ConsumerStatusArgs),
    /// Show the offsets of a topic each running client of a consumer group holds in memory.
    #[command(name = "getConsumerStatus")]
    GetConsumerStatus(GetConsumerStatusArgs),
    /// List a producer group's connected clients on the brokers of a topic.
    #[command(name = "producerConnection")]
    ProducerConnection(ProducerConnectionArgs),
    /// Show a message by its offsetMsgId (or by its client msgId with `-t`); with `-g` and `-d`, have
    /// that consumer client consume it once instead.
    #[command(name = "queryMsgById")]
    QueryMsgById(QueryMsgByIdArgs),
    /// Show a message by its client msgId (UNIQ_KEY), or with `-g` and `-d` have that consumer
    /// client consume it once.
    #[command(name = "queryMsgByUniqueKey")]
    QueryMsgByUniqueKey(QueryMsgByUniqueKeyArgs),
    /// Show what the trace records say happened to a message: its sends and every consumer
    /// group's listener calls (producers and consumers with `enableMsgTrace`).
    #[command(name = "queryMsgTraceById")]
    QueryMsgTraceById(QueryMsgTraceByIdArgs),
    /// Show the message at one offset of one queue.
    #[command(name = "queryMsgByOffset")]
    QueryMsgByOffset(QueryMsgByOffsetArgs),
    /// Print a topic's messages, every queue, optionally between two times and by tag.
    #[command(name = "printMsg")]
    PrintMsg(PrintMsgArgs),
    /// Print one queue's messages, or count them by tag.
    #[command(name = "printMsgByQueue")]
    PrintMsgByQueue(PrintMsgByQueueArgs),
    /// Send one message (to a chosen queue with `-b` and `-i`).
    #[command(name = "sendMessage")]
    SendMessage(SendMessageArgs),
    /// Pull messages of a topic, one queue (`-b`, `-i`) or from an offset (`-o`), and print them.
    #[command(name = "consumeMessage")]
    ConsumeMessage(ConsumeMessageArgs),
    /// Send messages to a broker group's own topic (its name) and print each send's time.
    #[command(name = "sendMsgStatus")]
    SendMsgStatus(SendMsgStatusArgs),
    /// Send messages to every queue of a topic in turn and print each send's time and the average.
    #[command(name = "checkMsgSendRT")]
    CheckMsgSendRt(CheckMsgSendRtArgs),
    /// Send messages to every broker group's own topic of a cluster (or of all) and print each
    /// group's average round trip; with `-i`, again every interval until interrupted.
    #[command(name = "clusterRT")]
    ClusterRt(ClusterRtArgs),
    /// List the clusters whose broker groups serve a topic.
    #[command(name = "topicClusterList")]
    TopicClusterList(TopicArgs),
    /// Show how a topic's queues are shared among consumers at the given addresses (averagely).
    #[command(name = "allocateMQ")]
    AllocateMq(AllocateMqArgs),
    /// Get, put or delete an ordered topic's queue layout (`ORDER_TOPIC_CONFIG` in every NameServer).
    #[command(name = "updateOrderConf")]
    UpdateOrderConf(UpdateOrderConfArgs),
    /// Find messages by key (IndexFile).
    #[command(name = "queryMsgByKey")]
    QueryMsgByKey(QueryMsgByKeyArgs),
    /// Put a half message (one given up after `transactionCheckMax` checks) back for checking, its
    /// check count at 0.
    #[command(name = "resumeCheckHalfMessage")]
    ResumeCheckHalfMessage(ResumeCheckHalfMessageArgs),
    /// Delete expired CommitLog segments now, whatever the `deleteWhen` hours (the next 20 retention
    /// rounds; `-b` one broker, `-c` every replica of a cluster).
    #[command(name = "deleteExpiredCommitLog")]
    DeleteExpiredCommitLog(ReplicaArgs),
    /// Delete ConsumeQueue and index files below the CommitLog's minimum now (`-b` one broker, `-c`
    /// every replica of a cluster).
    #[command(name = "cleanExpiredCQ")]
    CleanExpiredCq(ReplicaArgs),
    /// List ConsumeQueue units of one queue from an index (physical offset, size, tag code), and with
    /// `-g` whether each passes the group's subscription.
    #[command(name = "queryCq")]
    QueryCq(QueryCqArgs),
    /// Move a consumer group's offsets of a topic to a point in time.
    #[command(name = "resetOffsetByTime")]
    ResetOffsetByTime(ResetOffsetByTimeArgs),
    /// Show every member's view of a broker group's Raft state (term, leader, indexes, members).
    #[command(name = "groupStatus")]
    GroupStatus(GroupArgs),
    /// Ask a broker group's Raft leader to hand leadership to another voter.
    #[command(name = "transferLeader")]
    TransferLeader(TransferLeaderArgs),
    /// Add a node to a broker group: a learner until it has caught up, then a voter.
    #[command(name = "addNode")]
    AddNode(AddNodeArgs),
    /// Remove a node (voter or learner, the leader included) from a broker group.
    #[command(name = "removeNode")]
    RemoveNode(RemoveNodeArgs),
    /// Create or update a plain ACL account on each target group (every replica's ACL file).
    #[command(name = "updateAclConfig")]
    UpdateAclConfig(UpdateAclConfigArgs),
    /// Delete a plain ACL account from each target group.
    #[command(name = "deleteAclConfig", alias = "deleteAccessConfig")]
    DeleteAclConfig(DeleteAclConfigArgs),
    /// Replace the plain ACL's global white addresses on each target group.
    #[command(name = "updateGlobalWhiteAddr")]
    UpdateGlobalWhiteAddr(UpdateGlobalWhiteAddrArgs),
    /// Show the plain ACL file version of every replica of a cluster (or of one broker).
    #[command(name = "clusterAclConfigVersion")]
    ClusterAclConfigVersion(ClusterAclConfigVersionArgs),
    /// Show the plain ACL in force, secret keys included, on each group's leader of a cluster (or
    /// on one broker); needs an admin account.
    #[command(name = "getAccessConfigSubCommand", alias = "getAclConfig")]
    GetAccessConfig(ClusterAclConfigVersionArgs),
}

#[derive(Args)]
struct UpdateAclConfigArgs {
    #[command(flatten)]
    target: Target,
    /// The account's access key, more than 6 characters (mqadmin's `-a`; `--accessKey` is the key
    /// that signs this request).
    #[arg(short = 'a', long = "aclAccessKey")]
    account: String,
    /// The account's secret key, more than 6 characters, required on updates too (mqadmin's `-s`).
    #[arg(short = 's', long = "aclSecretKey")]
    account_secret: String,
    /// Peers that need no signature for this account (e.g. `192.168.1.*`).
    #[arg(short = 'w', long = "whiteRemoteAddress")]
    white_remote_address: Option<String>,
    /// Default topic permission: DENY, PUB, SUB or PUB|SUB.
    #[arg(short = 'i', long = "defaultTopicPerm")]
    default_topic_perm: Option<String>,
    /// Default group permission: DENY, PUB, SUB or PUB|SUB.
    #[arg(short = 'u', long = "defaultGroupPerm")]
    default_group_perm: Option<String>,
    /// Topic permissions, `topicA=DENY,topicB=PUB|SUB` (replaces the account's list).
    #[arg(short = 't', long = "topicPerms")]
    topic_perms: Option<String>,
    /// Group permissions, `groupA=DENY,groupB=SUB` (replaces the account's list).
    #[arg(short = 'g', long = "groupPerms")]
    group_perms: Option<String>,
    /// Whether the account may send admin requests (always set, as in Java: default false).
    #[arg(short = 'm', long = "admin", action = clap::ArgAction::Set, default_value_t = false)]
    admin: bool,
}

impl std::fmt::Debug for UpdateAclConfigArgs {
    // The account's secret stays out of any debug output.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("UpdateAclConfigArgs")
            .field("target", &self.target)
            .field("account", &self.account)
            .finish_non_exhaustive()
    }
}

#[derive(Debug, Args)]
struct DeleteAclConfigArgs {
    #[command(flatten)]
    target: Target,
    /// The account's access key (mqadmin's `-a`; `--accessKey` is the key that signs this request).
    #[arg(short = 'a', long = "aclAccessKey")]
    account: String,
}

#[derive(Debug, Args)]
struct UpdateGlobalWhiteAddrArgs {
    #[command(flatten)]
    target: Target,
    /// The new global white addresses, comma-separated (they replace the list).
    #[arg(short = 'g', long = "globalWhiteRemoteAddresses")]
    addresses: String,
}

#[derive(Debug, Args)]
#[command(group(ArgGroup::new("acl_target").required(true).args(["cluster", "broker"])))]
struct ClusterAclConfigVersionArgs {
    /// Cluster name: every replica of every group of the cluster.
    #[arg(short = 'c', long = "clusterName")]
    cluster: Option<String>,
    /// One broker address (`ip:port`).
    #[arg(short = 'b', long = "brokerAddr")]
    broker: Option<String>,
}

/// Where a write goes: a cluster (`-c`) or one broker group / address (`-b`).
#[derive(Debug, Args)]
#[command(group(ArgGroup::new("target").required(true).args(["cluster", "broker"])))]
struct Target {
    /// Cluster name: every group of the cluster.
    #[arg(short = 'c', long = "clusterName")]
    cluster: Option<String>,
    /// Broker group name (`broker-a`) or one broker address (`ip:port`).
    #[arg(short = 'b', long = "brokerAddr")]
    broker: Option<String>,
}

#[derive(Debug, Args)]
struct UpdateTopicArgs {
    /// Topic name.
    #[arg(short = 't', long = "topic")]
    topic: String,
    #[command(flatten)]
    target: Target,
    /// Read queues.
    #[arg(short = 'r', long = "readQueueNums", default_value_t = 8)]
    read_queue_nums: i32,
    /// Write queues.
    #[arg(short = 'w', long = "writeQueueNums", default_value_t = 8)]
    write_queue_nums: i32,
    /// Permission: 2 write, 4 read, 6 read + write.
    #[arg(short = 'p', long = "perm", default_value_t = perm::READ_WRITE)]
    perm: i32,
    /// Ordered topic: also publishes the queue layout in the NameServers' ORDER_TOPIC_CONFIG.
    #[arg(short = 'o', long = "order", default_value_t = false, action = clap::ArgAction::Set)]
    order: bool,
}

#[derive(Debug, Args)]
struct DeleteTopicArgs {
    /// Topic name.
    #[arg(short = 't', long = "topic")]
    topic: String,
    /// Cluster to delete it from.
    #[arg(short = 'c', long = "clusterName")]
    cluster: String,
}

#[derive(Debug, Args)]
struct TopicArgs {
    /// Topic name.
    #[arg(short = 't', long = "topic")]
    topic: String,
}

#[derive(Debug, Args)]
struct UpdateSubGroupArgs {
    /// Consumer group name.
    #[arg(short = 'g', long = "groupName")]
    group: String,
    #[command(flatten)]
    target: Target,
    /// Consumption allowed.
    #[arg(short = 's', long = "consumeEnable", action = clap::ArgAction::Set)]
    consume_enable: Option<bool>,
    /// A new group starts at the queue's minimum offset.
    #[arg(short = 'm', long = "consumeFromMinEnable", action = clap::ArgAction::Set)]
    consume_from_min_enable: Option<bool>,
    /// Broadcasting consumption allowed.
    #[arg(short = 'd', long = "consumeBroadcastEnable", action = clap::ArgAction::Set)]
    consume_broadcast_enable: Option<bool>,
    /// Queues of the group's `%RETRY%` topic.
    #[arg(short = 'q', long = "retryQueueNums")]
    retry_queue_nums: Option<i32>,
    /// Reconsumes before a message goes to the DLQ.
    #[arg(short = 'r', long = "retryMaxTimes")]
    retry_max_times: Option<i32>,
    /// brokerId the group normally consumes from.
    #[arg(short = 'i', long = "brokerId")]
    broker_id: Option<i64>,
    /// brokerId suggested when the group falls behind.
    #[arg(short = 'w', long = "whichBrokerWhenConsumeSlowly")]
    which_broker_when_consume_slowly: Option<i64>,
}

#[derive(Debug, Args)]
struct ConsumerProgressArgs {
    /// Consumer group name.
    #[arg(short = 'g', long = "groupName")]
    group: String,
    /// Only this topic.
    #[arg(short = 't', long = "topicName")]
    topic: Option<String>,
}

#[derive(Debug, Args)]
struct StatsAllArgs {
    /// Only this topic (default: every topic but retry and dead-letter ones).
    #[arg(short = 't', long = "topic")]
    topic: Option<String>,
    /// Only topics with messages in or out in the last 24 hours.
    #[arg(short = 'a', long = "activeTopic")]
    active: bool,
}

#[derive(Debug, Args)]
struct BrokerStatusArgs {
    /// One broker's address (`ip:port`).
    #[arg(short = 'b', long = "brokerAddr", required_unless_present = "cluster")]
    broker: Option<String>,
    /// Every broker of a cluster (each group's leader).
    #[arg(short = 'c', long = "clusterName")]
    cluster: Option<String>,
}

#[derive(Debug, Args)]
struct UpdateNamesrvConfigArgs {
    /// The config key (e.g. `enableAllTopicList`).
    #[arg(short = 'k', long = "key")]
    key: String,
    /// The new value.
    #[arg(short = 'v', long = "value")]
    value: String,
}

#[derive(Debug, Args)]
struct UpdateTopicPermArgs {
    /// Topic name.
    #[arg(short = 't', long = "topic")]
    topic: String,
    #[command(flatten)]
    target: Target,
    /// The new permission: 2 (write), 4 (read) or 6 (read + write).
    #[arg(short = 'p', long = "perm")]
    perm: i32,
}

#[derive(Debug, Args)]
struct DeleteSubGroupArgs {
    /// Consumer group name.
    #[arg(short = 'g', long = "groupName")]
    group: String,
    #[command(flatten)]
    target: Target,
    /// Also drop the group's committed consumer offsets.
    #[arg(short = 'r', long = "removeOffset", action = clap::ArgAction::Set, default_value_t = false)]
    remove_offset: bool,
}

#[derive(Debug, Args)]
struct BrokerConsumeStatsArgs {
    /// The broker's address (`ip:port`).
    #[arg(short = 'b', long = "brokerAddr")]
    broker: String,
    /// Only queues whose lag is at least this.
    #[arg(short = 'l', long = "level", default_value_t = 0)]
    level: i64,
    /// Only ordered topics.
    #[arg(short = 'o', long = "order", action = clap::ArgAction::Set, default_value_t = false)]
    order: bool,
}

#[derive(Debug, Args)]
struct CloneGroupOffsetArgs {
    /// The group whose offsets are copied.
    #[arg(short = 's', long = "srcGroup")]
    src: String,
    /// The group that gets them.
    #[arg(short = 'd', long = "destGroup")]
    dest: String,
    /// Topic.
    #[arg(short = 't', long = "topic")]
    topic: String,
    /// Copy even when the source group's online clients do not subscribe to the topic.
    #[arg(short = 'o', long = "offline", action = clap::ArgAction::Set, default_value_t = false)]
    offline: bool,
}

#[derive(Debug, Args)]
struct KvConfigArgs {
    /// Namespace (`ORDER_TOPIC_CONFIG`, ...).
    #[arg(short = 's', long = "namespace")]
    namespace: String,
    /// Key.
    #[arg(short = 'k', long = "key")]
    key: String,
    /// Value.
    #[arg(short = 'v', long = "value")]
    value: String,
}

#[derive(Debug, Args)]
struct KvKeyArgs {
    /// Namespace.
    #[arg(short = 's', long = "namespace")]
    namespace: String,
    /// Key.
    #[arg(short = 'k', long = "key")]
    key: String,
}

#[derive(Debug, Args)]
struct UpdateBrokerConfigArgs {
    /// One replica's address (`ip:port`).
    #[arg(short = 'b', long = "brokerAddr", required_unless_present = "cluster")]
    broker: Option<String>,
    /// Every replica of every broker group of a cluster.
    #[arg(short = 'c', long = "clusterName")]
    cluster: Option<String>,
    /// The config key (RocketMQ's name, e.g. `brokerPermission`).
    #[arg(short = 'k', long = "key")]
    key: String,
    /// The new value.
    #[arg(short = 'v', long = "value")]
    value: String,
}

#[derive(Debug, Args)]
struct BrokerNameArgs {
    /// The broker group's name (`brokerName`).
    #[arg(short = 'b', long = "brokerName")]
    broker_name: String,
}

#[derive(Debug, Args)]
struct ConsumerConnectionArgs {
    /// Consumer group name.
    #[arg(short = 'g', long = "consumerGroup")]
    group: String,
}

#[derive(Debug, Args)]
struct ConsumerStatusArgs {
    /// Consumer group name.
    #[arg(short = 'g', long = "consumerGroup")]
    group: String,
    /// One client of the group (`ip@instanceName`): print its whole report.
    #[arg(short = 'i', long = "clientId")]
    client_id: Option<String>,
    /// Ask for a stack dump (only JVM clients have one).
    #[arg(short = 's', long = "jstack")]
    jstack: bool,
}

#[derive(Debug, Args)]
struct GetConsumerStatusArgs {
    /// Consumer group name.
    #[arg(short = 'g', long = "group")]
    group: String,
    /// Topic whose offsets are shown.
    #[arg(short = 't', long = "topic")]
    topic: String,
    /// Only this client of the group (`ip@instanceName`).
    #[arg(short = 'i', long = "originClientId")]
    client_id: Option<String>,
}

#[derive(Debug, Args)]
struct ProducerConnectionArgs {
    /// Producer group name.
    #[arg(short = 'g', long = "producerGroup")]
    group: String,
    /// A topic the group sends to: its brokers are asked.
    #[arg(short = 't', long = "topic")]
    topic: String,
}

#[derive(Debug, Args)]
struct QueryMsgByIdArgs {
    /// offsetMsgId(s), comma-separated; with `-t`, client msgIds (UNIQ_KEY).
    #[arg(short = 'i', long = "msgId", value_delimiter = ',', required = true)]
    msg_ids: Vec<String>,
    /// Topic: look the ids up as client msgIds (UNIQ_KEY) through the index.
    #[arg(short = 't', long = "topic")]
    topic: Option<String>,
    /// With `-d`: have this group's client consume each message once (CONSUME_MESSAGE_DIRECTLY).
    #[arg(short = 'g', long = "consumerGroup", requires = "client_id")]
    consumer_group: Option<String>,
    /// With `-g`: the client (`ip@instanceName`) that consumes the messages.
    #[arg(short = 'd', long = "clientId", requires = "consumer_group")]
    client_id: Option<String>,
}

#[derive(Debug, Args)]
struct ReplicaArgs {
    /// One broker's address (`ip:port`).
    #[arg(short = 'b', long = "brokerAddr", required_unless_present = "cluster")]
    broker: Option<String>,
    /// Every replica of every group of a cluster.
    #[arg(short = 'c', long = "cluster")]
    cluster: Option<String>,
}

#[derive(Debug, Args)]
struct QueryCqArgs {
    /// Topic.
    #[arg(short = 't', long = "topic")]
    topic: String,
    /// Queue id.
    #[arg(short = 'q', long = "queue")]
    queue_id: i32,
    /// First ConsumeQueue index (queue offset).
    #[arg(short = 'i', long = "index")]
    index: i64,
    /// Units to list.
    #[arg(short = 'c', long = "count", default_value_t = QUERY_CONSUME_QUEUE_DEFAULT_COUNT,
          value_parser = clap::value_parser!(i32).range(1..=i64::from(QUERY_CONSUME_QUEUE_MAX_COUNT)))]
    count: i32,
    /// The broker to ask (`ip:port`; default: the leader of the first group in the topic's route).
    #[arg(short = 'b', long = "broker")]
    broker: Option<String>,
    /// A consumer group whose subscription each unit is checked against.
    #[arg(short = 'g', long = "consumer")]
    group: Option<String>,
}

#[derive(Debug, Args)]
struct ResumeCheckHalfMessageArgs {
    /// The half message's offsetMsgId.
    #[arg(short = 'i', long = "msgId")]
    msg_id: String,
}

#[derive(Debug, Args)]
struct QueryMsgByUniqueKeyArgs {
    /// Client msgId (UNIQ_KEY).
    #[arg(short = 'i', long = "msgId")]
    msg_id: String,
    /// Topic.
    #[arg(short = 't', long = "topic")]
    topic: String,
    /// With `-d`: have this group's client consume the message once (CONSUME_MESSAGE_DIRECTLY).
    #[arg(short = 'g', long = "consumerGroup", requires = "client_id")]
    consumer_group: Option<String>,
    /// With `-g`: the client (`ip@instanceName`) that consumes it.
    #[arg(short = 'd', long = "clientId", requires = "consumer_group")]
    client_id: Option<String>,
}

#[derive(Debug, Args)]
struct QueryMsgTraceByIdArgs {
    /// The message's msgId (UNIQ_KEY).
    #[arg(short = 'i', long = "msgId")]
    msg_id: String,
    /// The trace topic (default RMQ_SYS_TRACE_TOPIC).
    #[arg(short = 't', long = "traceTopic")]
    trace_topic: Option<String>,
}

#[derive(Debug, Args)]
struct QueryMsgByOffsetArgs {
    /// Topic.
    #[arg(short = 't', long = "topic")]
    topic: String,
    /// Broker group name.
    #[arg(short = 'b', long = "brokerName")]
    broker_name: String,
    /// Queue id.
    #[arg(short = 'i', long = "queueId")]
    queue_id: i32,
    /// Queue offset.
    #[arg(short = 'o', long = "offset")]
    offset: i64,
}

#[derive(Debug, Args)]
struct PrintMsgArgs {
    /// Topic.
    #[arg(short = 't', long = "topic")]
    topic: String,
    #[command(flatten)]
    filter: PrintFilterArgs,
    /// Print bodies (`-d false`: only the messages' metadata).
    #[arg(short = 'd', long = "printBody", default_value_t = true, action = clap::ArgAction::Set)]
    print_body: bool,
}

/// What `printMsg` and `printMsgByQueue` read: a charset, a tag expression and a store-time span.
#[derive(Debug, Args)]
struct PrintFilterArgs {
    /// Body charset; bodies are printed as UTF-8 (invalid bytes replaced).
    #[arg(short = 'c', long = "charsetName", default_value = "UTF-8")]
    charset: String,
    /// Tag expression (`TagA || TagB`, `*`).
    #[arg(short = 's', long = "subExpression", default_value = "*")]
    sub_expression: String,
    /// From this store time: milliseconds or `yyyy-MM-dd#HH:mm:ss:SSS` (local time).
    #[arg(short = 'b', long = "beginTimestamp")]
    begin: Option<String>,
    /// Up to this store time, in the same forms.
    #[arg(short = 'e', long = "endTimestamp")]
    end: Option<String>,
}

impl PrintFilterArgs {
    /// The span's store times in milliseconds, after checking the charset (bodies are printed as
    /// UTF-8; another charset is refused rather than printed wrongly).
    fn times(&self) -> Result<(Option<i64>, Option<i64>)> {
        if self.charset.to_ascii_lowercase().replace('-', "") != "utf8" {
            bail!("-c {}: bodies are printed as UTF-8 only", self.charset);
        }
        let begin = self.begin.as_deref().map(parse_reset_timestamp).transpose()?;
        let end = self.end.as_deref().map(parse_reset_timestamp).transpose()?;
        Ok((begin, end))
    }
}

#[derive(Debug, Args)]
struct PrintMsgByQueueArgs {
    /// Topic.
    #[arg(short = 't', long = "topic")]
    topic: String,
    /// Broker group name.
    #[arg(short = 'a', long = "brokerName")]
    broker_name: String,
    /// Queue id.
    #[arg(short = 'i', long = "queueId")]
    queue_id: i32,
    #[command(flatten)]
    filter: PrintFilterArgs,
    /// Print each message.
    #[arg(short = 'p', long = "print", default_value_t = false, action = clap::ArgAction::Set)]
    print_msg: bool,
    /// Print bodies too.
    #[arg(short = 'd', long = "printBody", default_value_t = false, action = clap::ArgAction::Set)]
    print_body: bool,
    /// Count the messages by tag, most frequent first.
    #[arg(short = 'f', long = "calculate", default_value_t = false, action = clap::ArgAction::Set)]
    by_tag: bool,
}

#[derive(Debug, Args)]
struct SendMessageArgs {
    /// Topic.
    #[arg(short = 't', long = "topic")]
    topic: String,
    /// The body, as UTF-8 text.
    #[arg(short = 'p', long = "body")]
    body: String,
    /// Keys, space-separated.
    #[arg(short = 'k', long = "key")]
    keys: Option<String>,
    /// Tags.
    #[arg(short = 'c', long = "tags")]
    tags: Option<String>,
    /// Broker group to send to (with `-i`).
    #[arg(short = 'b', long = "broker")]
    broker_name: Option<String>,
    /// Queue to send to (needs `-b`).
    #[arg(short = 'i', long = "qid", requires = "broker_name")]
    queue_id: Option<i32>,
}

#[derive(Debug, Args)]
struct ConsumeMessageArgs {
    /// Topic.
    #[arg(short = 't', long = "topic")]
    topic: String,
    /// Broker group (with `-i`).
    #[arg(short = 'b', long = "brokerName")]
    broker_name: Option<String>,
    /// One queue (needs `-b`).
    #[arg(short = 'i', long = "queueId", requires = "broker_name")]
    queue_id: Option<i32>,
    /// Start at this offset of the queue (needs `-i`).
    #[arg(short = 'o', long = "offset", requires = "queue_id")]
    offset: Option<i64>,
    /// Consumer group the pulls name (default TOOLS_CONSUMER).
    #[arg(short = 'g', long = "consumerGroup", default_value = TOOLS_CONSUMER_GROUP)]
    group: String,
    /// Messages stored from this time: ms or `yyyy-MM-dd#HH:mm:ss:SSS`.
    #[arg(short = 's', long = "beginTimestamp")]
    begin: Option<String>,
    /// Messages stored before this time: ms or `yyyy-MM-dd#HH:mm:ss:SSS`.
    #[arg(short = 'e', long = "endTimestamp")]
    end: Option<String>,
    /// At most this many messages in all.
    #[arg(short = 'c', long = "MessageNumber", default_value_t = CONSUME_MESSAGE_DEFAULT_COUNT,
          value_parser = clap::value_parser!(u64).range(1..))]
    count: u64,
}

#[derive(Debug, Args)]
struct SendMsgStatusArgs {
    /// Broker group name: its own topic of that name is sent to.
    #[arg(short = 'b', long = "brokerName")]
    broker_name: String,
    /// Body size in bytes.
    #[arg(short = 's', long = "messageSize", default_value_t = 128)]
    size: usize,
    /// Messages to send (after one warm-up send).
    #[arg(short = 'c', long = "count", default_value_t = 50)]
    count: u32,
}

#[derive(Debug, Args)]
struct CheckMsgSendRtArgs {
    /// Topic.
    #[arg(short = 't', long = "topic")]
    topic: String,
    /// Messages to send.
    #[arg(short = 'a', long = "amount", default_value_t = 100)]
    amount: u32,
    /// Body size in bytes.
    #[arg(short = 's', long = "size", default_value_t = 128)]
    size: usize,
}

#[derive(Debug, Args)]
struct ClusterRtArgs {
    /// Cluster name (default: every cluster).
    #[arg(short = 'c', long = "cluster")]
    cluster: Option<String>,
    /// Messages per broker group and round.
    #[arg(short = 'a', long = "amount", default_value_t = 100)]
    amount: u32,
    /// Body size in bytes.
    #[arg(short = 's', long = "size", default_value_t = 128)]
    size: usize,
    /// Print `time|machineRoom|cluster|broker|rt` lines, for logs.
    #[arg(short = 'p', long = "printLog", default_value_t = false, action = clap::ArgAction::Set)]
    print_log: bool,
    /// Machine room named in `-p` lines.
    #[arg(short = 'm', long = "machineRoom", default_value = "noname")]
    machine_room: String,
    /// Seconds between rounds; without it, one round (Java's loops every 10 s until interrupted).
    #[arg(short = 'i', long = "interval", value_parser = clap::value_parser!(u64).range(1..))]
    interval_s: Option<u64>,
}

#[derive(Debug, Args)]
struct AllocateMqArgs {
    /// Topic.
    #[arg(short = 't', long = "topic")]
    topic: String,
    /// Consumer addresses (client ids), comma-separated, in the order the group lists them.
    #[arg(short = 'i', long = "ipList", value_delimiter = ',', required = true)]
    ips: Vec<String>,
}

#[derive(Debug, Args)]
struct UpdateOrderConfArgs {
    /// Topic.
    #[arg(short = 't', long = "topic")]
    topic: String,
    /// `get`, `put` or `delete`.
    #[arg(short = 'm', long = "method", value_parser = ["get", "put", "delete"])]
    method: String,
    /// The layout for `put`: `brokerName:queues` items separated by `;` (`broker-a:4;broker-b:4`).
    #[arg(short = 'v', long = "orderConf", required_if_eq("method", "put"))]
    order_conf: Option<String>,
}

#[derive(Debug, Args)]
struct QueryMsgByKeyArgs {
    /// Topic.
    #[arg(short = 't', long = "topic")]
    topic: String,
    /// Message key.
    #[arg(short = 'k', long = "msgKey")]
    key: String,
    /// Earliest store time, ms (default 0).
    #[arg(short = 'b', long = "beginTimestamp", default_value_t = 0)]
    begin_ms: i64,
    /// Latest store time, ms (default: no limit).
    #[arg(short = 'e', long = "endTimestamp", default_value_t = i64::MAX)]
    end_ms: i64,
    /// At most this many messages per broker group.
    #[arg(short = 'm', long = "maxNum", default_value_t = 64,
          value_parser = clap::value_parser!(i32).range(1..=i64::from(QUERY_MESSAGE_MAX_COUNT)))]
    max_num: i32,
}

#[derive(Debug, Args)]
struct ResetOffsetByTimeArgs {
    /// Consumer group.
    #[arg(short = 'g', long = "group")]
    group: String,
    /// Topic.
    #[arg(short = 't', long = "topic")]
    topic: String,
    /// When: `now`, milliseconds since the epoch, or `yyyy-MM-dd#HH:mm:ss:SSS` (local time).
    #[arg(short = 's', long = "timestamp")]
    timestamp: String,
    /// Also move offsets forward (default true, as mqadmin).
    #[arg(short = 'f', long = "force", default_value_t = true, action = clap::ArgAction::Set)]
    force: bool,
}

#[derive(Debug, Args)]
struct GroupArgs {
    /// Broker group name (= Raft group).
    #[arg(short = 'b', long = "brokerName")]
    broker_name: String,
}

#[derive(Debug, Args)]
struct TransferLeaderArgs {
    /// Broker group name (= Raft group), or one member's address (`ip:port`).
    #[arg(short = 'b', long = "brokerName")]
    broker_name: String,
    /// Raft node id of the new leader (default: the most up-to-date voter).
    #[arg(short = 'i', long = "to", value_name = "NODE")]
    to: Option<u64>,
}

#[derive(Debug, Args)]
struct AddNodeArgs {
    /// Broker group name (= Raft group), or one member's address (`ip:port`).
    #[arg(short = 'b', long = "brokerName")]
    broker_name: String,
    /// Raft node id of the new node: never used before in this group.
    #[arg(short = 'i', long = "nodeId")]
    id: u64,
    /// The new node's remoting address (`brokerIP1:listenPort`).
    #[arg(short = 'r', long = "remotingAddr")]
    remoting_addr: String,
    /// The new node's Raft address.
    #[arg(short = 'a', long = "raftAddr")]
    raft_addr: String,
}

#[derive(Debug, Args)]
struct RemoveNodeArgs {
    /// Broker group name (= Raft group), or one member's address (`ip:port`).
    #[arg(short = 'b', long = "brokerName")]
    broker_name: String,
    /// Raft node id of the node to remove.
    #[arg(short = 'i', long = "nodeId")]
    id: u64,
}

/// Runs one admin command to completion.
pub async fn run(args: AdminArgs) -> Result<()> {
    let admin = args.namesrv.admin()?;
    let out = Out { json: args.json };
    let result = dispatch(&admin, &args.namesrv, out, args.command).await;
    admin.shutdown().await;
    result
}

async fn dispatch(admin: &Admin, namesrv: &NamesrvAddrArgs, out: Out, command: AdminCommand) -> Result<()> {
    match command {
        AdminCommand::PrintMsg(a) => print_msg(admin, out, a).await,
        AdminCommand::PrintMsgByQueue(a) => print_msg_by_queue(admin, out, a).await,
        AdminCommand::SendMessage(a) => send_message(namesrv, out, a).await,
        AdminCommand::ConsumeMessage(a) => consume_message(admin, out, a).await,
        AdminCommand::SendMsgStatus(a) => send_msg_status(namesrv, out, a).await,
        AdminCommand::CheckMsgSendRt(a) => check_msg_send_rt(namesrv, out, a).await,
        AdminCommand::ClusterRt(a) => cluster_rt(admin, namesrv, out, a).await,
        AdminCommand::UpdateTopic(a) => update_topic(admin, out, a).await,
        AdminCommand::DeleteTopic(a) => delete_topic(admin, out, a).await,
        AdminCommand::TopicList => topic_list(admin, out).await,
        AdminCommand::TopicRoute(a) => topic_route(admin, out, &a.topic).await,
        AdminCommand::TopicStatus(a) => topic_status(admin, out, &a.topic).await,
        AdminCommand::ClusterList => cluster_list(admin, out).await,
        AdminCommand::UpdateSubGroup(a) => update_sub_group(admin, out, a).await,
        AdminCommand::ConsumerProgress(a) => consumer_progress(admin, out, a).await,
        AdminCommand::BrokerStatus(a) => broker_status(admin, out, a).await,
        AdminCommand::GetBrokerConfig(a) => broker_config(admin, out, a).await,
        AdminCommand::UpdateBrokerConfig(a) => update_broker_config(admin, out, a).await,
        AdminCommand::UpdateTopicPerm(a) => update_topic_perm(admin, out, a).await,
        AdminCommand::GetNamesrvConfig => namesrv_config(admin, out).await,
        AdminCommand::UpdateNamesrvConfig(a) => update_namesrv_config(admin, out, a).await,
        AdminCommand::DeleteSubGroup(a) => delete_sub_group(admin, out, a).await,
        AdminCommand::BrokerConsumeStats(a) => broker_consume_stats(admin, out, a).await,
        AdminCommand::CloneGroupOffset(a) => clone_group_offset(admin, out, a).await,
        AdminCommand::UpdateKvConfig(a) => {
            admin.put_kv_config(&a.namespace, &a.key, &a.value).await.context("updateKvConfig")?;
            done(
                out,
                "create or update kv config to namespace success.",
                json!({"namespace": a.namespace, "key": a.key}),
            )
        }
        AdminCommand::DeleteKvConfig(a) => {
            admin.delete_kv_config(&a.namespace, &a.key).await.context("deleteKvConfig")?;
            done(out, "delete kv config from namespace success.", json!({"namespace": a.namespace, "key": a.key}))
        }
        AdminCommand::WipeWritePerm(a) => write_perm(admin, out, &a.broker_name, false).await,
        AdminCommand::AddWritePerm(a) => write_perm(admin, out, &a.broker_name, true).await,
        AdminCommand::StatsAll(a) => stats_all(admin, out, a).await,
        AdminCommand::ConsumerConnection(a) => consumer_connection(admin, out, a).await,
        AdminCommand::ConsumerStatus(a) => consumer_status(admin, out, a).await,
        AdminCommand::GetConsumerStatus(a) => get_consumer_status(admin, out, a).await,
        AdminCommand::ProducerConnection(a) => producer_connection(admin, out, a).await,
        AdminCommand::QueryMsgById(a) => query_msg_by_id(admin, out, a).await,
        AdminCommand::QueryMsgTraceById(a) => query_msg_trace_by_id(admin, out, a).await,
        AdminCommand::QueryMsgByUniqueKey(a) => {
            let by_id = QueryMsgByIdArgs {
                msg_ids: vec![a.msg_id],
                topic: Some(a.topic),
                consumer_group: a.consumer_group,
                client_id: a.client_id,
            };
            query_msg_by_id(admin, out, by_id).await
        }
        AdminCommand::QueryMsgByOffset(a) => query_msg_by_offset(admin, out, a).await,
        AdminCommand::TopicClusterList(a) => topic_cluster_list(admin, out, &a.topic).await,
        AdminCommand::AllocateMq(a) => allocate_mq(admin, out, a).await,
        AdminCommand::UpdateOrderConf(a) => update_order_conf(admin, out, a).await,
        AdminCommand::QueryMsgByKey(a) => query_msg_by_key(admin, out, a).await,
        AdminCommand::ResumeCheckHalfMessage(a) => {
            let id: OffsetMsgId = a
                .msg_id
                .parse()
                .map_err(|e| anyhow!("resumeCheckHalfMessage: {} is not an offsetMsgId: {e}", a.msg_id))?;
            let addr = admin.resume_check_half_message(&id).await?;
            if out.json {
                out.json(&json!({"msgId": a.msg_id, "brokerAddr": addr}));
            } else {
                println!("resume check half message {} on {addr}: success", a.msg_id);
            }
            Ok(())
        }
        AdminCommand::QueryCq(a) => query_cq(admin, out, a).await,
        AdminCommand::DeleteExpiredCommitLog(a) => {
            let addrs =
                replica_addrs(admin, "deleteExpiredCommitLog", a.broker.as_deref(), a.cluster.as_deref()).await?;
            for_each_replica(out, &addrs, "deleteExpiredCommitLog", RequestCode::DeleteExpiredCommitlog, |addr| {
                admin.delete_expired_commit_log(addr)
            })
            .await
        }
        AdminCommand::CleanExpiredCq(a) => {
            let addrs = replica_addrs(admin, "cleanExpiredCQ", a.broker.as_deref(), a.cluster.as_deref()).await?;
            for_each_replica(out, &addrs, "cleanExpiredCQ", RequestCode::CleanExpiredConsumequeue, |addr| {
                admin.clean_expired_consume_queue(addr)
            })
            .await
        }
        AdminCommand::ResetOffsetByTime(a) => reset_offset_by_time(admin, out, a).await,
        AdminCommand::GroupStatus(a) => group_status(admin, out, &a.broker_name).await,
        AdminCommand::TransferLeader(a) => {
            let report = admin.transfer_leader(&a.broker_name, a.to).await;
            print_report(out, "transferLeader", RequestCode::RaftTransferLeadership, &a.broker_name, report)
        }
        AdminCommand::AddNode(a) => {
            let report = admin.add_node(&a.broker_name, a.id, &a.remoting_addr, &a.raft_addr).await;
            print_report(out, "addNode", RequestCode::RaftAddNode, &a.broker_name, report)
        }
        AdminCommand::RemoveNode(a) => {
            let report = admin.remove_node(&a.broker_name, a.id).await;
            print_report(out, "removeNode", RequestCode::RaftRemoveNode, &a.broker_name, report)
        }
        AdminCommand::UpdateAclConfig(a) => update_acl_config(admin, out, a).await,
        AdminCommand::DeleteAclConfig(a) => {
            let (op, code) = ("deleteAclConfig", RequestCode::DeleteAclConfig);
            let line = "delete plain access config account from {addr} success.";
            let written = acl_edit_each(admin, out, &a.target, op, code, line, async |addr| {
                admin.delete_acl_config(addr, &a.account).await
            })
            .await?;
            if out.json {
                out.json(&json!({"accessKey": a.account, "written": written}));
            }
            Ok(())
        }
        AdminCommand::UpdateGlobalWhiteAddr(a) => {
            let addresses = raftmq_common::protocol::header::acl::split_list(&a.addresses);
            let (op, code) = ("updateGlobalWhiteAddr", RequestCode::UpdateGlobalWhiteAddrsConfig);
            let line = "update global white remote addresses to {addr} success.";
            let written = acl_edit_each(admin, out, &a.target, op, code, line, async |addr| {
                admin.update_global_white_addrs(addr, &addresses).await
            })
            .await?;
            if out.json {
                out.json(&json!({"globalWhiteRemoteAddresses": addresses, "written": written}));
            }
            Ok(())
        }
        AdminCommand::ClusterAclConfigVersion(a) => cluster_acl_config_version(admin, out, a).await,
        AdminCommand::GetAccessConfig(a) => get_access_config(admin, out, a).await,
    }
}

/// Sends one ACL edit to each target group's leader (which replicates it to the group), printing
/// `line` (its `{addr}` filled in) per group; the `{brokerName, addr}` of each, for `--json`.
async fn acl_edit_each(
    admin: &Admin,
    out: Out,
    target: &Target,
    op: &'static str,
    code: RequestCode,
    line: &str,
    edit: impl AsyncFn(&str) -> raftmq_client::Result<()>,
) -> Result<Vec<serde_json::Value>> {
    let mut written = Vec::new();
    for (name, addr) in write_targets(admin, target).await? {
        edit(&addr).await.map_err(|e| explain(op, code, e))?;
        if !out.json {
            println!("{}", line.replace("{addr}", &addr));
        }
        written.push(json!({"brokerName": name, "addr": addr}));
    }
    Ok(written)
}

/// Java's `UpdateAccessConfigSubCommand`: to each target group's leader, which replicates it.
async fn update_acl_config(admin: &Admin, out: Out, a: UpdateAclConfigArgs) -> Result<()> {
    let split = |list: &Option<String>| list.as_deref().map(raftmq_common::protocol::header::acl::split_list);
    let config = PlainAccessConfig {
        access_key: a.account.clone(),
        secret_key: a.account_secret.clone(),
        white_remote_address: a.white_remote_address.clone(),
        admin: a.admin,
        default_topic_perm: a.default_topic_perm.clone(),
        default_group_perm: a.default_group_perm.clone(),
        topic_perms: split(&a.topic_perms),
        group_perms: split(&a.group_perms),
    };
    let (op, code) = ("updateAclConfig", RequestCode::UpdateAndCreateAclConfig);
    let line = "create or update plain access config to {addr} success.";
    let written =
        acl_edit_each(admin, out, &a.target, op, code, line, async |addr| admin.update_acl_config(addr, &config).await)
            .await?;
    if out.json {
        out.json(&json!({"accessKey": a.account, "admin": a.admin, "written": written}));
    }
    Ok(())
}

/// Java's `ClusterAclConfigVersionListSubCommand`, on every replica (Java asks masters only): a
/// replica still behind its group's last edit shows an older counter.
async fn cluster_acl_config_version(admin: &Admin, out: Out, a: ClusterAclConfigVersionArgs) -> Result<()> {
    let addrs = replica_addrs(admin, "clusterAclConfigVersion", a.broker.as_deref(), a.cluster.as_deref()).await?;
    let mut rows = Vec::new();
    let mut table = Table::new(&[
        "#Cluster Name",
        "#Broker Name",
        "#Broker Addr",
        "#AclFilePath",
        "#AclConfigVersionNum",
        "#AclLastUpdateTime",
    ]);
    for addr in &addrs {
        let info = admin
            .acl_version(addr)
            .await
            .map_err(|e| explain("clusterAclConfigVersion", RequestCode::GetBrokerClusterAclInfo, e))?;
        for (path, version) in &info.files {
            table.row(vec![
                info.cluster_name.clone(),
                info.broker_name.clone(),
                info.broker_addr.clone(),
                path.clone(),
                version.counter.to_string(),
                human_time_ms(version.timestamp),
            ]);
        }
        rows.push(json!({
            "clusterName": info.cluster_name,
            "brokerName": info.broker_name,
            "brokerAddr": info.broker_addr,
            "files": info.files.iter().map(|(p, v)| (p.clone(), json!({"counter": v.counter, "timestamp": v.timestamp}))).collect::<serde_json::Map<_, _>>(),
        }));
    }
    if out.json {
        out.json(&json!(rows));
    } else {
        out.table(&table);
    }
    Ok(())
}

/// Java's `GetAccessConfigSubCommand`: for `-b` that broker, for `-c` each group's leader, the
/// global white addresses and every account field by field (Java's layout; absent fields empty).
async fn get_access_config(admin: &Admin, out: Out, a: ClusterAclConfigVersionArgs) -> Result<()> {
    let cmd = "getAccessConfigSubCommand";
    let addrs: Vec<String> = match &a.broker {
        Some(b) => vec![b.clone()],
        None => write_targets(admin, &Target { cluster: a.cluster.clone(), broker: None })
            .await?
            .into_iter()
            .map(|(_, addr)| addr)
            .collect(),
    };
    let mut docs = Vec::new();
    for addr in &addrs {
        let config =
            admin.acl_config(addr).await.map_err(|e| explain(cmd, RequestCode::GetBrokerClusterAclConfig, e))?;
        if out.json {
            docs.push(json!({"brokerAddr": addr, "globalWhiteAddrs": config.global_white_addrs,
                "accounts": config.plain_access_configs.iter().map(|c| json!({
                    "accessKey": c.access_key, "secretKey": c.secret_key, "whiteRemoteAddress": c.white_remote_address,
                    "admin": c.admin, "defaultTopicPerm": c.default_topic_perm, "defaultGroupPerm": c.default_group_perm,
                    "topicPerms": c.topic_perms, "groupPerms": c.group_perms})).collect::<Vec<_>>()}));
            continue;
        }
        if addrs.len() > 1 {
            println!("{addr}:");
        }
        println!();
        println!("{:<20}: [{}]", "globalWhiteRemoteAddresses", config.global_white_addrs.join(", "));
        println!();
        println!("accounts:");
        let field = |name: &str, value: &str| println!("  {name:<18}: {value}");
        for c in &config.plain_access_configs {
            field("accessKey", &c.access_key);
            field("secretKey", &c.secret_key);
            field("whiteRemoteAddress", c.white_remote_address.as_deref().unwrap_or(""));
            field("admin", &c.admin.to_string());
            field("defaultTopicPerm", c.default_topic_perm.as_deref().unwrap_or(""));
            field("defaultGroupPerm", c.default_group_perm.as_deref().unwrap_or(""));
            field("topicPerms", &format!("[{}]", c.topic_perms.join(", ")));
            field("groupPerms", &format!("[{}]", c.group_perms.join(", ")));
            println!();
        }
    }
    if out.json {
        out.json(&json!(docs));
    }
    Ok(())
}

/// How results are printed.
#[derive(Debug, Clone, Copy)]
struct Out {
    json: bool,
}

impl Out {
    fn json(self, value: &serde_json::Value) {
        println!("{value}");
    }

    fn table(self, table: &Table) {
        print!("{}", table.render());
    }
}

/// Whether the broker refused the request because it does not implement it.
fn not_supported(e: &ClientError) -> bool {
    e.response_code() == Some(ResponseCode::RequestCodeNotSupported)
}

/// The error a command reports: a clear sentence when the broker lacks the request, else the SDK's.
fn explain(command: &str, request: RequestCode, e: ClientError) -> anyhow::Error {
    if not_supported(&e) {
        anyhow!("{command}: the broker does not support {} yet", request.name())
    } else {
        anyhow::Error::new(e).context(command.to_owned())
    }
}

/// One broker address (`-b`), or every replica of every group of a cluster (`-c`), sorted.
async fn replica_addrs(
    admin: &Admin,
    op: &'static str,
    broker: Option<&str>,
    cluster: Option<&str>,
) -> Result<Vec<String>> {
    match (broker, cluster) {
        (Some(b), _) => Ok(vec![b.to_owned()]),
        (None, Some(c)) => {
            let info = admin.cluster_info().await.context(op)?;
            let names = info.cluster_addr_table.get(c).ok_or_else(|| anyhow!("cluster {c} is unknown"))?;
            let addrs: BTreeSet<String> = names
                .iter()
                .filter_map(|name| info.broker_addr_table.get(name))
                .flat_map(|group| group.broker_addrs.values().cloned())
                .collect();
            Ok(addrs.into_iter().collect())
        }
        (None, None) => bail!("give -b BROKER_ADDR or -c CLUSTER"),
    }
}

/// `(group name, leader address)` of each target group; an address given with `-b` is its own name.
async fn write_targets(admin: &Admin, target: &Target) -> Result<Vec<(String, String)>> {
    match (&target.cluster, &target.broker) {
        (Some(cluster), _) => {
            let masters = admin.master_addrs_of_cluster(cluster).await?;
            if masters.is_empty() {
                bail!("cluster {cluster} has no broker group with a leader");
            }
            Ok(masters)
        }
        (None, Some(broker)) if broker.contains(':') => Ok(vec![(broker.clone(), broker.clone())]),
        (None, Some(name)) => Ok(vec![(name.clone(), admin.master_addr_of_group(name).await?)]),
        (None, None) => bail!("give -c CLUSTER or -b BROKER"),
    }
}

/// `(group name, address to read from)` of each group serving `route`: the leader, else the lowest id.
fn read_targets(route: &TopicRouteData) -> Vec<(String, String)> {
    route
        .broker_datas
        .iter()
        .filter_map(|bd| bd.select_broker_addr().map(|addr| (bd.broker_name.clone(), addr.to_owned())))
        .collect()
}

fn topic_config_line(c: &TopicConfig) -> String {
    format!(
        "TopicConfig [topicName={}, readQueueNums={}, writeQueueNums={}, perm={}, topicFilterType={}, topicSysFlag={}, order={}]",
        c.topic_name,
        c.read_queue_nums,
        c.write_queue_nums,
        perm::to_display(c.perm),
        c.topic_filter_type.as_str(),
        c.topic_sys_flag,
        c.order
    )
}

async fn update_topic(admin: &Admin, out: Out, a: UpdateTopicArgs) -> Result<()> {
    if ![perm::WRITE, perm::READ, perm::READ_WRITE].contains(&a.perm) {
        bail!("updateTopic: -p must be 2 (write), 4 (read) or 6 (read + write), got {}", a.perm);
    }
    let config = TopicConfig {
        read_queue_nums: a.read_queue_nums,
        write_queue_nums: a.write_queue_nums,
        perm: a.perm,
        order: a.order,
        ..TopicConfig::new(a.topic.clone())
    };
    let targets = write_targets(admin, &a.target).await?;
    let mut written = Vec::with_capacity(targets.len());
    for (name, addr) in &targets {
        admin
            .create_topic(addr, &config)
            .await
            .map_err(|e| explain("updateTopic", RequestCode::UpdateAndCreateTopic, e))?;
        if !out.json {
            println!("create topic to {addr} success.");
        }
        written.push(json!({"brokerName": name, "addr": addr}));
    }
    if a.order {
        // Java's updateTopic -o publishes `brokerName:queueNums;...` so ordered producers see the layout.
        let layout: Vec<String> = targets.iter().map(|(name, _)| format!("{name}:{}", a.write_queue_nums)).collect();
        admin.put_kv_config(ORDER_TOPIC_CONFIG_NAMESPACE, &a.topic, &layout.join(";")).await?;
        if !out.json {
            println!("set cluster orderConf. isOrder={}, orderConf=[{}]", a.order, layout.join(";"));
        }
    }
    if out.json {
        out.json(&json!({"topic": a.topic, "written": written, "config": config}));
    } else {
        println!("{}", topic_config_line(&config));
    }
    Ok(())
}

/// Java's line, or the JSON document.
fn done(out: Out, line: &str, value: serde_json::Value) -> Result<()> {
    if out.json {
        out.json(&value);
    } else {
        println!("{line}");
    }
    Ok(())
}

/// Java's `UpdateTopicPermSubCommand`, except that the rest of the topic's config is the broker's
/// own (read from it), not rebuilt from the route: an ordered topic stays ordered. Every target's
/// config is read before any is written, so a topic missing from one group fails the command
/// before it changed anything.
async fn update_topic_perm(admin: &Admin, out: Out, a: UpdateTopicPermArgs) -> Result<()> {
    if ![perm::WRITE, perm::READ, perm::READ_WRITE].contains(&a.perm) {
        bail!("updateTopicPerm: -p must be 2 (write), 4 (read) or 6 (read + write), got {}", a.perm);
    }
    let mut plans = Vec::new();
    for (name, addr) in write_targets(admin, &a.target).await? {
        let table = admin.all_topic_config(&addr).await.context("updateTopicPerm")?;
        let Some(old) = table.topic_config_table.get(&a.topic).cloned() else {
            bail!("updateTopicPerm: topic {} does not exist on broker {name} ({addr}); nothing changed", a.topic);
        };
        plans.push((name, addr, old));
    }
    let mut changed = Vec::new();
    for (name, addr, old) in plans {
        if old.perm == a.perm {
            if !out.json {
                println!("new perm equals to the old one!");
            }
            continue;
        }
        let config = TopicConfig { perm: a.perm, ..old.clone() };
        admin
            .create_topic(&addr, &config)
            .await
            .map_err(|e| explain("updateTopicPerm", RequestCode::UpdateAndCreateTopic, e))?;
        if !out.json {
            println!("update topic perm from {} to {} in {addr} success.", old.perm, a.perm);
        }
        changed.push(json!({"brokerName": name, "addr": addr, "from": old.perm, "to": a.perm}));
    }
    if out.json {
        out.json(&json!({"topic": a.topic, "changed": changed}));
    }
    Ok(())
}

/// One request per replica, as Java's `DeleteExpiredCommitLogSubCommand` / `CleanExpiredCQSubCommand`:
/// `success` (each address first with `-c`); the first refusal fails the command.
async fn for_each_replica<'a, F, Fut>(
    out: Out,
    addrs: &'a [String],
    command: &str,
    code: RequestCode,
    call: F,
) -> Result<()>
where
    F: Fn(&'a str) -> Fut,
    Fut: std::future::Future<Output = Result<(), ClientError>>,
{
    let mut done = BTreeMap::new();
    for addr in addrs {
        call(addr).await.map_err(|e| explain(command, code, e))?;
        done.insert(addr.clone(), true);
        if !out.json {
            if addrs.len() > 1 {
                println!("{addr}: success");
            } else {
                println!("success");
            }
        }
    }
    if out.json {
        out.json(&json!({ "brokers": done }));
    }
    Ok(())
}

/// Java's `QueryConsumeQueueCommand`: the group's subscription and filter when `-g` is given, the
/// queue's bounds, then one block per unit from `-i`.
async fn query_cq(admin: &Admin, out: Out, a: QueryCqArgs) -> Result<()> {
    let addr = match a.broker {
        Some(addr) => addr,
        None => {
            let route = admin.topic_route(&a.topic).await?;
            route
                .broker_datas
                .iter()
                .find_map(|b| b.broker_addrs.get(&MASTER_ID).cloned())
                .with_context(|| format!("topic {} has no broker group with a leader", a.topic))?
        }
    };
    let (body, remark) = admin
        .query_consume_queue(&addr, &a.topic, a.queue_id, a.index, a.count, a.group.as_deref())
        .await
        .map_err(|e| explain("queryCq", RequestCode::QueryConsumeQueue, e))?;
    if out.json {
        let units: Vec<serde_json::Value> = body
            .queue_data
            .iter()
            .zip(a.index..)
            .map(|(u, idx)| {
                json!({"idx": idx, "physicOffset": u.physic_offset, "physicSize": u.physic_size,
                       "tagsCode": u.tags_code, "eval": u.eval, "msg": u.msg})
            })
            .collect();
        out.json(&json!({"brokerAddr": addr, "minQueueIndex": body.min_queue_index,
            "maxQueueIndex": body.max_queue_index, "subscriptionData": body.subscription_data,
            "filterData": body.filter_data, "remark": remark, "queueData": units}));
        return Ok(());
    }
    const RULE: &str = "======================================";
    if let Some(sub) = &body.subscription_data {
        println!("Subscription data: \n{}\n{RULE}", serde_json::to_string_pretty(sub)?);
    }
    if let Some(filter) = &body.filter_data {
        println!("Filter data: \n{filter}\n{RULE}");
    }
    println!("Queue data: \nmax: {}, min: {}\n{RULE}", body.max_queue_index, body.min_queue_index);
    if let Some(remark) = remark.filter(|_| body.queue_data.is_empty()) {
        println!("{remark}");
    }
    for (u, idx) in body.queue_data.iter().zip(a.index..) {
        println!(
            "idx: {idx}\nConsumeQueueData{{physicOffset={}, physicSize={}, tagsCode={}, extendDataJson='null', \
             bitMap='null', eval={}, msg='{}'}}\n{RULE}",
            u.physic_offset,
            u.physic_size,
            u.tags_code,
            u.eval,
            u.msg.as_deref().unwrap_or("null")
        );
    }
    Ok(())
}

/// Java's `BrokerConsumeStatsSubCommad`: one row per queue whose lag is at least `-l` and whose
/// group has consumed from it, then the broker's total lag.
async fn broker_consume_stats(admin: &Admin, out: Out, a: BrokerConsumeStatsArgs) -> Result<()> {
    let list = admin
        .broker_consume_stats(&a.broker, a.order)
        .await
        .map_err(|e| explain("brokerConsumeStats", RequestCode::GetBrokerConsumeStats, e))?;
    let mut rows = Vec::new();
    for groups in &list.consume_stats_list {
        for (group, per_topic) in groups {
            for stats in per_topic {
                for (mq, w) in &stats.offset_table {
                    let diff = w.broker_offset.saturating_sub(w.consumer_offset);
                    if diff < a.level || w.last_timestamp <= 0 {
                        continue;
                    }
                    rows.push((group.clone(), mq.clone(), *w, diff));
                }
            }
        }
    }
    if out.json {
        let queues: Vec<serde_json::Value> = rows
            .iter()
            .map(|(group, mq, w, diff)| {
                json!({"topic": mq.topic, "group": group, "brokerName": mq.broker_name, "queueId": mq.queue_id,
                       "brokerOffset": w.broker_offset, "consumerOffset": w.consumer_offset, "diff": diff,
                       "lastTimestamp": w.last_timestamp})
            })
            .collect();
        out.json(&json!({"brokerAddr": list.broker_addr, "queues": queues, "diffTotal": list.total_diff}));
        return Ok(());
    }
    let mut table = Table::new(&[
        "#Topic",
        "#Group",
        "#Broker Name",
        "#QID",
        "#Broker Offset",
        "#Consumer Offset",
        "#Diff",
        "#LastTime",
    ]);
    for (group, mq, w, diff) in &rows {
        table.row([
            mq.topic.clone(),
            group.clone(),
            mq.broker_name.clone(),
            mq.queue_id.to_string(),
            w.broker_offset.to_string(),
            w.consumer_offset.to_string(),
            diff.to_string(),
            // Java's `brokerConsumeStats` prints the time to the second.
            human_time_ms(w.last_timestamp).split(',').next().unwrap_or_default().to_owned(),
        ]);
    }
    out.table(&table);
    println!("\nDiff Total: {}", list.total_diff);
    Ok(())
}

/// `mqadmin cloneGroupOffset`, by `DefaultMQAdminExt.cloneGroupOffset`: the leader of every group
/// serving the topic copies the source group's committed offsets. (Java 4.9's command instead writes
/// each queue's max offset, for every topic of the source group; this copies what was committed.)
/// Every group's leader is found before any is asked, so a group without one changes nothing.
async fn clone_group_offset(admin: &Admin, out: Out, a: CloneGroupOffsetArgs) -> Result<()> {
    let route = admin.topic_route(&a.topic).await.context("cloneGroupOffset")?;
    let mut leaders = Vec::with_capacity(route.broker_datas.len());
    for bd in &route.broker_datas {
        let Some(addr) = bd.broker_addrs.get(&MASTER_ID) else {
            bail!("cloneGroupOffset: broker group {} has no leader now; nothing changed, try again", bd.broker_name);
        };
        leaders.push((bd, addr));
    }
    let mut cloned = Vec::new();
    for (bd, addr) in leaders {
        admin
            .clone_group_offset(addr, &a.src, &a.dest, Some(&a.topic), a.offline)
            .await
            .map_err(|e| explain("cloneGroupOffset", RequestCode::CloneGroupOffset, e))?;
        cloned.push(json!({"brokerName": bd.broker_name, "addr": addr}));
    }
    done(
        out,
        &format!("clone group offset success. srcGroup[{}], destGroup=[{}], topic[{}]", a.src, a.dest, a.topic),
        json!({"srcGroup": a.src, "destGroup": a.dest, "topic": a.topic, "brokers": cloned}),
    )
}

/// Java's `DeleteSubscriptionGroupCommand`: from each target group's leader; with `-c`, the group's
/// `%RETRY%` and `%DLQ%` topics go too (a missing one is no error, as in Java).
async fn delete_sub_group(admin: &Admin, out: Out, a: DeleteSubGroupArgs) -> Result<()> {
    let mut deleted = Vec::new();
    for (name, addr) in write_targets(admin, &a.target).await? {
        admin
            .delete_subscription_group(&addr, &a.group, a.remove_offset)
            .await
            .map_err(|e| explain("deleteSubGroup", RequestCode::DeleteSubscriptiongroup, e))?;
        if !out.json {
            match &a.target.cluster {
                Some(c) => {
                    println!("delete subscription group [{}] from broker [{addr}] in cluster [{c}] success.", a.group)
                }
                None => println!("delete subscription group [{}] from broker [{addr}] success.", a.group),
            }
        }
        deleted.push(json!({"brokerName": name, "addr": addr}));
    }
    let mut topics = Vec::new();
    if let Some(cluster) = &a.target.cluster {
        for topic in [format!("{RETRY_GROUP_TOPIC_PREFIX}{}", a.group), format!("{DLQ_GROUP_TOPIC_PREFIX}{}", a.group)]
        {
            // Deleting a topic that does not exist succeeds; what fails here is the call itself,
            // which Java swallows: said on stderr, and the group is deleted all the same.
            match admin.delete_topic(&topic, cluster).await {
                Ok(()) => {
                    if !out.json {
                        println!("delete topic [{topic}] from cluster [{cluster}] success.");
                        println!("delete topic [{topic}] from NameServer success.");
                    }
                    topics.push(topic);
                }
                Err(e) => eprintln!("deleteSubGroup: cannot delete topic {topic} from cluster {cluster}: {e}"),
            }
        }
    }
    if out.json {
        out.json(&json!({"group": a.group, "deleted": deleted, "topicsDeleted": topics}));
    }
    Ok(())
}

async fn delete_topic(admin: &Admin, out: Out, a: DeleteTopicArgs) -> Result<()> {
    admin
        .delete_topic(&a.topic, &a.cluster)
        .await
        .map_err(|e| explain("deleteTopic", RequestCode::DeleteTopicInBroker, e))?;
    if out.json {
        out.json(&json!({"topic": a.topic, "cluster": a.cluster, "deleted": true}));
    } else {
        println!("delete topic [{}] from cluster [{}] success.", a.topic, a.cluster);
        println!("delete topic [{}] from NameServer success.", a.topic);
    }
    Ok(())
}

async fn topic_list(admin: &Admin, out: Out) -> Result<()> {
    let topics = admin.all_topics().await.context("topicList")?;
    if out.json {
        out.json(&json!({"topicList": topics}));
    } else {
        for topic in topics {
            println!("{topic}");
        }
    }
    Ok(())
}

async fn topic_route(admin: &Admin, out: Out, topic: &str) -> Result<()> {
    let route = admin.topic_route(topic).await.context("topicRoute")?;
    if out.json {
        out.json(&serde_json::to_value(&route)?);
        return Ok(());
    }
    let mut brokers = Table::new(&["#Broker Name", "#Cluster", "#BID", "#Addr"]);
    for bd in &route.broker_datas {
        for (id, addr) in &bd.broker_addrs {
            brokers.row([bd.broker_name.as_str(), bd.cluster.as_str(), &id.to_string(), addr]);
        }
    }
    out.table(&brokers);
    println!();
    let mut queues = Table::new(&["#Broker Name", "#Read Queues", "#Write Queues", "#Perm"]);
    for qd in &route.queue_datas {
        queues.row([
            qd.broker_name.clone(),
            qd.read_queue_nums.to_string(),
            qd.write_queue_nums.to_string(),
            perm::to_display(qd.perm),
        ]);
    }
    out.table(&queues);
    Ok(())
}

async fn topic_status(admin: &Admin, out: Out, topic: &str) -> Result<()> {
    let route = admin.topic_route(topic).await.context("topicStatus")?;
    let mut offsets: BTreeMap<MessageQueue, TopicOffset> = BTreeMap::new();
    for (name, addr) in read_targets(&route) {
        match admin.topic_stats(&addr, topic).await {
            Ok(stats) => offsets.extend(stats.offset_table),
            Err(e) if not_supported(&e) => {
                let queues = route.queue_datas.iter().find(|q| q.broker_name == name).map_or(0, |q| q.read_queue_nums);
                for queue_id in 0..queues {
                    let min_offset = admin.min_offset(&addr, topic, queue_id).await?;
                    let max_offset = admin.max_offset(&addr, topic, queue_id).await?;
                    let offset = TopicOffset { min_offset, max_offset, last_update_timestamp: 0 };
                    offsets.insert(MessageQueue::new(topic, &name, queue_id), offset);
                }
            }
            Err(e) => return Err(explain("topicStatus", RequestCode::GetTopicStatsInfo, e)),
        }
    }
    if out.json {
        let queues: Vec<_> = offsets
            .iter()
            .map(|(mq, o)| {
                json!({"brokerName": mq.broker_name, "queueId": mq.queue_id, "minOffset": o.min_offset,
                       "maxOffset": o.max_offset, "lastUpdateTimestamp": o.last_update_timestamp})
            })
            .collect();
        out.json(&json!({"topic": topic, "queues": queues}));
        return Ok(());
    }
    let mut table = Table::new(&["#Broker Name", "#QID", "#Min Offset", "#Max Offset", "#Last Updated"]);
    for (mq, o) in &offsets {
        let last = if o.last_update_timestamp > 0 { human_time_ms(o.last_update_timestamp) } else { String::new() };
        table.row([
            mq.broker_name.clone(),
            mq.queue_id.to_string(),
            o.min_offset.to_string(),
            o.max_offset.to_string(),
            last,
        ]);
    }
    out.table(&table);
    Ok(())
}

/// A node's role as the route shows it: brokerId 0 is the group's Raft leader, `n + 1` is node `n`.
fn role_of(broker_id: i64) -> (&'static str, String) {
    if broker_id == MASTER_ID { ("LEADER", "-".to_owned()) } else { ("FOLLOWER", (broker_id - 1).to_string()) }
}

async fn cluster_list(admin: &Admin, out: Out) -> Result<()> {
    let info = admin.cluster_info().await.context("clusterList")?;
    if out.json {
        out.json(&serde_json::to_value(&info)?);
        return Ok(());
    }
    // Java's clusterList also shows each broker's GET_BROKER_RUNTIME_INFO; a broker that does not
    // answer keeps its row, with `-` for what it would have said. Today is since midnight, UTC.
    let mut table = Table::new(&[
        "#Cluster Name",
        "#Broker Name",
        "#BID",
        "#Addr",
        "#Role",
        "#Version",
        "#InTPS",
        "#OutTPS",
        "#InTotalToday",
        "#OutTotalToday",
    ]);
    for (cluster, names) in &info.cluster_addr_table {
        for name in names {
            let Some(bd) = info.broker_addr_table.get(name) else { continue };
            for (id, addr) in &bd.broker_addrs {
                let runtime = admin.broker_runtime_info(addr).await.map(|kv| kv.table).unwrap_or_default();
                let value = |k: &str| runtime.get(k).cloned().unwrap_or_else(|| "-".to_owned());
                // Java shows the 10-second rate (the first of the three) and today's counts as the
                // total now less the total at midnight.
                let rate = |k: &str| value(k).split(' ').next().unwrap_or("-").to_owned();
                let since_midnight = |now: &str, morning: &str| {
                    let count = |k: &str| runtime.get(k).and_then(|v| v.parse::<u64>().ok());
                    match (count(now), count(morning)) {
                        (Some(n), Some(m)) => n.saturating_sub(m).to_string(),
                        _ => "-".to_owned(),
                    }
                };
                table.row([
                    cluster.clone(),
                    name.clone(),
                    id.to_string(),
                    addr.clone(),
                    role_of(*id).0.to_owned(),
                    value("brokerVersionDesc"),
                    rate("putTps"),
                    rate("getTransferedTps"),
                    since_midnight("msgPutTotalTodayNow", "msgPutTotalTodayMorning"),
                    since_midnight("msgGetTotalTodayNow", "msgGetTotalTodayMorning"),
                ]);
            }
        }
    }
    out.table(&table);
    Ok(())
}

async fn update_sub_group(admin: &Admin, out: Out, a: UpdateSubGroupArgs) -> Result<()> {
    let mut config = SubscriptionGroupConfig::new(a.group.clone());
    config.consume_enable = a.consume_enable.unwrap_or(config.consume_enable);
    config.consume_from_min_enable = a.consume_from_min_enable.unwrap_or(config.consume_from_min_enable);
    config.consume_broadcast_enable = a.consume_broadcast_enable.unwrap_or(config.consume_broadcast_enable);
    config.retry_queue_nums = a.retry_queue_nums.unwrap_or(config.retry_queue_nums);
    config.retry_max_times = a.retry_max_times.unwrap_or(config.retry_max_times);
    config.broker_id = a.broker_id.unwrap_or(config.broker_id);
    config.which_broker_when_consume_slowly =
        a.which_broker_when_consume_slowly.unwrap_or(config.which_broker_when_consume_slowly);
    let mut written = Vec::new();
    for (name, addr) in write_targets(admin, &a.target).await? {
        admin
            .create_subscription_group(&addr, &config)
            .await
            .map_err(|e| explain("updateSubGroup", RequestCode::UpdateAndCreateSubscriptiongroup, e))?;
        if !out.json {
            println!("create subscription group to {addr} success.");
        }
        written.push(json!({"brokerName": name, "addr": addr}));
    }
    if out.json {
        out.json(&json!({"group": a.group, "written": written, "config": config}));
    } else {
        println!("{config:?}");
    }
    Ok(())
}

/// One group's progress on the broker at `addr`: GET_CONSUME_STATS, or (broker without it) the
/// committed offsets from GET_ALL_CONSUMER_OFFSET against each queue's GET_MAX_OFFSET.
async fn consume_stats_of(
    admin: &Admin,
    name: &str,
    addr: &str,
    group: &str,
    topic: Option<&str>,
) -> Result<ConsumeStats> {
    match admin.consume_stats(addr, group, topic).await {
        Ok(stats) => return Ok(stats),
        Err(e) if not_supported(&e) => {}
        Err(e) => return Err(explain("consumerProgress", RequestCode::GetConsumeStats, e)),
    }
    let all = admin
        .all_consumer_offset(addr)
        .await
        .map_err(|e| explain("consumerProgress", RequestCode::GetAllConsumerOffset, e))?;
    let mut stats = ConsumeStats::default();
    for (key, queues) in &all.offset_table {
        let Some((t, g)) = ConsumerOffsetSerializeWrapper::split_key(key) else { continue };
        if g != group || topic.is_some_and(|wanted| wanted != t) {
            continue;
        }
        for (&queue_id, &consumer_offset) in queues {
            let broker_offset = admin.max_offset(addr, t, queue_id).await?;
            let wrapper = OffsetWrapper { broker_offset, consumer_offset, last_timestamp: 0 };
            stats.offset_table.insert(MessageQueue::new(t, name, queue_id), wrapper);
        }
    }
    Ok(stats)
}

async fn consumer_progress(admin: &Admin, out: Out, a: ConsumerProgressArgs) -> Result<()> {
    // Every group may hold offsets of the consumer group; Java asks the groups of %RETRY%<group>,
    // which a group that never failed a message does not have yet.
    let info = admin.cluster_info().await.context("consumerProgress")?;
    let mut total = ConsumeStats::default();
    for (name, bd) in &info.broker_addr_table {
        let Some(addr) = bd.select_broker_addr() else { continue };
        let stats = consume_stats_of(admin, name, addr, &a.group, a.topic.as_deref()).await?;
        total.consume_tps += stats.consume_tps;
        total.offset_table.extend(stats.offset_table);
    }
    let diff_total = total.compute_total_diff();
    if out.json {
        let queues: Vec<_> = total
            .offset_table
            .iter()
            .map(|(mq, w)| {
                json!({"topic": mq.topic, "brokerName": mq.broker_name, "queueId": mq.queue_id,
                       "brokerOffset": w.broker_offset, "consumerOffset": w.consumer_offset,
                       "diff": w.broker_offset.saturating_sub(w.consumer_offset), "lastTimestamp": w.last_timestamp})
            })
            .collect();
        out.json(
            &json!({"group": a.group, "consumeTps": total.consume_tps, "diffTotal": diff_total, "queues": queues}),
        );
        return Ok(());
    }
    let mut table =
        Table::new(&["#Topic", "#Broker Name", "#QID", "#Broker Offset", "#Consumer Offset", "#Diff", "#LastTime"]);
    for (mq, w) in &total.offset_table {
        let last = if w.last_timestamp > 0 { human_time_ms(w.last_timestamp) } else { "N/A".to_owned() };
        table.row([
            mq.topic.clone(),
            mq.broker_name.clone(),
            mq.queue_id.to_string(),
            w.broker_offset.to_string(),
            w.consumer_offset.to_string(),
            w.broker_offset.saturating_sub(w.consumer_offset).to_string(),
            last,
        ]);
    }
    out.table(&table);
    println!();
    println!("Consume TPS: {:.2}", total.consume_tps);
    println!("Consume Diff Total: {diff_total}");
    Ok(())
}

/// The brokers `-b` or `-c` names: one address, or each group leader of a cluster.
async fn broker_addrs(admin: &Admin, command: &str, a: &BrokerStatusArgs) -> Result<Vec<String>> {
    Ok(match (&a.broker, &a.cluster) {
        (Some(b), _) => vec![b.clone()],
        (None, Some(c)) => {
            admin.master_addrs_of_cluster(c).await.context(command.to_owned())?.into_iter().map(|(_, a)| a).collect()
        }
        (None, None) => bail!("give -b BROKER_ADDR or -c CLUSTER"),
    })
}

/// Java's `BrokerStatusSubCommand`: `key: value` lines (`%-32s: %s`), or with `-c` each broker's
/// lines prefixed by its address.
async fn broker_status(admin: &Admin, out: Out, a: BrokerStatusArgs) -> Result<()> {
    let addrs = broker_addrs(admin, "brokerStatus", &a).await?;
    let mut all = BTreeMap::new();
    for addr in &addrs {
        let kv = admin
            .broker_runtime_info(addr)
            .await
            .map_err(|e| explain("brokerStatus", RequestCode::GetBrokerRuntimeInfo, e))?;
        all.insert(addr.clone(), kv.table);
    }
    print_key_values(out, &addrs, &all);
    Ok(())
}

async fn broker_config(admin: &Admin, out: Out, a: BrokerStatusArgs) -> Result<()> {
    let addrs = broker_addrs(admin, "getBrokerConfig", &a).await?;
    let mut all = BTreeMap::new();
    for addr in &addrs {
        let config =
            admin.broker_config(addr).await.map_err(|e| explain("getBrokerConfig", RequestCode::GetBrokerConfig, e))?;
        all.insert(addr.clone(), config);
    }
    print_key_values(out, &addrs, &all);
    Ok(())
}

/// Java's `GetNamesrvConfigCommand`: each NameServer's config; one that cannot answer fails the
/// command, after the others are shown.
async fn namesrv_config(admin: &Admin, out: Out) -> Result<()> {
    let addrs = admin.namesrv_addrs().to_vec();
    let mut all = BTreeMap::new();
    let mut failed = Vec::new();
    for addr in &addrs {
        match admin.namesrv_config(addr).await {
            Ok(config) => {
                all.insert(addr.clone(), config);
            }
            Err(e) => failed.push(format!("{addr}: {}", explain("getNamesrvConfig", RequestCode::GetNamesrvConfig, e))),
        }
    }
    let answered: Vec<String> = addrs.iter().filter(|a| all.contains_key(*a)).cloned().collect();
    print_key_values(out, &answered, &all);
    if !failed.is_empty() {
        bail!("getNamesrvConfig: {}", failed.join("; "));
    }
    Ok(())
}

/// Java's `UpdateNamesrvConfigCommand`: every NameServer is told on its own (they share nothing);
/// every one is tried and the command fails if any refused.
async fn update_namesrv_config(admin: &Admin, out: Out, a: UpdateNamesrvConfigArgs) -> Result<()> {
    let addrs = admin.namesrv_addrs().to_vec();
    let lines = UpdateLines { op: "updateNamesrvConfig", noun: "name server", ok: "success!", servers: "NameServers" };
    update_config_each(out, &addrs, lines, (&a.key, &a.value), async |addr, updates| {
        admin.update_namesrv_config(addr, updates).await
    })
    .await
}

/// Java's `UpdateBrokerConfigSubCommand`: `-b` updates one replica; `-c` every replica of the
/// cluster (Java's masters and slaves), each told on its own. Every broker is tried; the command
/// fails if any refused.
async fn update_broker_config(admin: &Admin, out: Out, a: UpdateBrokerConfigArgs) -> Result<()> {
    let addrs = replica_addrs(admin, "updateBrokerConfig", a.broker.as_deref(), a.cluster.as_deref()).await?;
    let lines = UpdateLines { op: "updateBrokerConfig", noun: "broker", ok: "success, ", servers: "brokers" };
    update_config_each(out, &addrs, lines, (&a.key, &a.value), async |addr, updates| {
        admin.update_broker_config(addr, updates).await
    })
    .await
}

/// The words of a config update's lines: `update {noun} config {ok}{addr}` (Java's), the command's
/// name and what the servers are called when some refused.
struct UpdateLines {
    op: &'static str,
    noun: &'static str,
    ok: &'static str,
    servers: &'static str,
}

/// Sends `key=value` to each of `addrs` on its own, one line (or a JSON entry) per server; every
/// server is tried and the command fails if any refused.
async fn update_config_each(
    out: Out,
    addrs: &[String],
    lines: UpdateLines,
    (key, value): (&str, &str),
    update: impl AsyncFn(&str, &BTreeMap<String, String>) -> raftmq_client::Result<()>,
) -> Result<()> {
    let updates = BTreeMap::from([(key.to_owned(), value.to_owned())]);
    let mut results = BTreeMap::new();
    let mut failed = 0;
    for addr in addrs {
        let result = update(addr, &updates).await;
        if !out.json {
            match &result {
                Ok(()) => println!("update {} config {}{addr}", lines.noun, lines.ok),
                Err(e) => println!("update {} config failed, {addr}: {e}", lines.noun),
            }
        }
        failed += usize::from(result.is_err());
        results.insert(addr.clone(), result.map_or_else(|e| json!({"error": e.to_string()}), |()| json!("OK")));
    }
    if out.json {
        out.json(&json!(results));
    }
    if failed > 0 {
        bail!("{}: {failed} of {} {} refused {key}={value}", lines.op, addrs.len(), lines.servers);
    }
    Ok(())
}

/// Java's `WipeWritePermSubCommand` / `AddWritePermSubCommand`: every NameServer is told on its own
/// (they share nothing); one line per NameServer with the number of topics changed.
async fn write_perm(admin: &Admin, out: Out, broker_name: &str, add: bool) -> Result<()> {
    let (verb, command) = if add { ("add", "addWritePerm") } else { ("wipe", "wipeWritePerm") };
    let mut results = BTreeMap::new();
    let mut failed = 0;
    for namesrv in admin.namesrv_addrs() {
        let result = if add {
            admin.add_write_perm(namesrv, broker_name).await
        } else {
            admin.wipe_write_perm(namesrv, broker_name).await
        };
        let code = if add { RequestCode::AddWritePermOfBroker } else { RequestCode::WipeWritePermOfBroker };
        let result = result.map_err(|e| explain(command, code, e));
        if !out.json {
            match &result {
                Ok(n) => println!("{verb} write perm of broker[{broker_name}] in name server[{namesrv}] OK, {n}"),
                Err(e) => {
                    println!("{verb} write perm of broker[{broker_name}] in name server[{namesrv}] Failed: {e:#}")
                }
            }
        }
        failed += usize::from(result.is_err());
        results.insert(namesrv.clone(), result.map_or_else(|e| json!({"error": format!("{e:#}")}), |n| json!(n)));
    }
    if out.json {
        out.json(&json!(results));
    }
    if failed > 0 {
        bail!("{command}: {failed} of {} NameServers failed", admin.namesrv_addrs().len());
    }
    Ok(())
}

/// `key: value` per line (prefixed by the broker when there are several), or one JSON object of
/// broker → table.
fn print_key_values(out: Out, addrs: &[String], all: &BTreeMap<String, BTreeMap<String, String>>) {
    if out.json {
        out.json(&json!(all));
        return;
    }
    for (addr, table) in all {
        for (k, v) in table {
            if addrs.len() == 1 {
                println!("{k:<32}: {v}");
            } else {
                println!("{addr:<24} {k:<32}: {v}");
            }
        }
    }
}

/// One `statsAll` line.
#[derive(Debug, Clone, Default)]
struct StatsRow {
    topic: String,
    group: String,
    accumulation: i64,
    in_tps: f64,
    out_tps: f64,
    in_24h: u64,
    out_24h: u64,
}

/// Java's `compute24HourSum`: the day's sum, else the hour's, else the minute's (a young item has
/// no daily sample yet).
fn sum_24h(data: &BrokerStatsData) -> u64 {
    [data.stats_day.sum, data.stats_hour.sum, data.stats_minute.sum].into_iter().find(|s| *s != 0).unwrap_or(0)
}

/// Java's `StatsAllSubCommand`: for every topic, the put statistics of each group of its route,
/// then for each consumer group of it (`queryTopicConsumeByWho`) the backlog and get statistics.
/// A broker that cannot answer one statistic counts as 0 for it, as in Java.
async fn stats_all(admin: &Admin, out: Out, a: StatsAllArgs) -> Result<()> {
    let topics: Vec<String> = match a.topic {
        Some(topic) => vec![topic],
        None => admin
            .all_topics()
            .await
            .context("statsAll")?
            .into_iter()
            // Java's statsAll skips only retry and dead-letter topics.
            .filter(|t| !is_retry_topic(t) && !is_dlq_topic(t))
            .collect(),
    };
    let mut rows = Vec::new();
    for topic in &topics {
        // A topic deleted since the listing, or not known to this NameServer yet, is skipped, as
        // Java skips a topic whose details fail.
        let route = match admin.topic_route(topic).await {
            Ok(route) => route,
            Err(e) => {
                tracing::debug!(topic, error = %e, "no route; skipped");
                continue;
            }
        };
        let targets = read_targets(&route);
        let (mut in_tps, mut in_24h) = (0.0, 0);
        let mut groups = BTreeSet::new();
        for (_, addr) in &targets {
            if let Ok(data) = admin.view_broker_stats_data(addr, "TOPIC_PUT_NUMS", topic).await {
                in_tps += data.stats_minute.tps;
                in_24h += sum_24h(&data);
            }
            if let Ok(found) = admin.topic_consume_by_who(addr, topic).await {
                groups.extend(found);
            }
        }
        let base = StatsRow { topic: topic.clone(), in_tps, in_24h, ..StatsRow::default() };
        if groups.is_empty() {
            rows.push(base);
            continue;
        }
        for group in groups {
            let mut row = StatsRow { group: group.clone(), ..base.clone() };
            for (_, addr) in &targets {
                if let Ok(stats) = admin.consume_stats(addr, &group, Some(topic)).await {
                    row.accumulation +=
                        stats.offset_table.values().map(|o| o.broker_offset - o.consumer_offset).sum::<i64>();
                }
                let key = format!("{topic}@{group}");
                if let Ok(data) = admin.view_broker_stats_data(addr, "GROUP_GET_NUMS", &key).await {
                    row.out_tps += data.stats_minute.tps;
                    row.out_24h += sum_24h(&data);
                }
            }
            // An offset committed past the end (a reset, a manual update) is no backlog, as in Java.
            row.accumulation = row.accumulation.max(0);
            rows.push(row);
        }
    }
    if a.active {
        rows.retain(|r| r.in_24h > 0 || r.out_24h > 0);
    }
    if out.json {
        let rows: Vec<_> = rows
            .iter()
            .map(|r| {
                json!({"topic": r.topic, "consumerGroup": r.group, "accumulation": r.accumulation,
                       "inTps": r.in_tps, "outTps": r.out_tps, "inMsg24Hour": r.in_24h, "outMsg24Hour": r.out_24h})
            })
            .collect();
        out.json(&json!(rows));
        return Ok(());
    }
    let mut table = Table::new(&[
        "#Topic",
        "#Consumer Group",
        "#Accumulation",
        "#InTPS",
        "#OutTPS",
        "#InMsg24Hour",
        "#OutMsg24Hour",
    ]);
    for r in &rows {
        // A topic nobody consumes: Java's blank out TPS and NO_CONSUMER.
        let (out_tps, out_24h) = if r.group.is_empty() {
            (String::new(), "NO_CONSUMER".to_owned())
        } else {
            (format!("{:.2}", r.out_tps), r.out_24h.to_string())
        };
        table.row([
            r.topic.clone(),
            r.group.clone(),
            r.accumulation.to_string(),
            format!("{:.2}", r.in_tps),
            out_tps,
            r.in_24h.to_string(),
            out_24h,
        ]);
    }
    out.table(&table);
    Ok(())
}

fn connection_json(c: &ConnectionBody) -> serde_json::Value {
    json!({"clientId": c.client_id, "clientAddr": c.client_addr, "language": c.language, "version": c.version})
}

fn connection_table(connections: &[ConnectionBody]) -> Table {
    let mut table = Table::new(&["#", "#ClientId", "#ClientAddr", "#Language", "#Version"]);
    for (i, c) in connections.iter().enumerate() {
        table.row([
            format!("{:06}", i + 1),
            c.client_id.clone(),
            c.client_addr.clone(),
            c.language.clone(),
            c.version.to_string(),
        ]);
    }
    table
}

/// `examineConsumerConnectionInfo`: every broker group's leader is asked (a group's clients
/// heartbeat each broker they read from), and the answers are merged.
async fn consumer_connection(admin: &Admin, out: Out, a: ConsumerConnectionArgs) -> Result<()> {
    let info = admin.cluster_info().await.context("consumerConnection")?;
    let mut merged: Option<ConsumerConnection> = None;
    for bd in info.broker_addr_table.values() {
        let Some(addr) = bd.select_broker_addr() else { continue };
        match admin.consumer_connection(addr, &a.group).await {
            Ok(c) => {
                let m = merged.get_or_insert_with(|| ConsumerConnection { connection_set: Vec::new(), ..c.clone() });
                m.subscription_table.extend(c.subscription_table);
                for conn in c.connection_set {
                    if !m.connection_set.iter().any(|x| x.client_id == conn.client_id) {
                        m.connection_set.push(conn);
                    }
                }
            }
            Err(e) if e.response_code() == Some(ResponseCode::ConsumerNotOnline) => {}
            Err(e) => return Err(explain("consumerConnection", RequestCode::GetConsumerConnectionList, e)),
        }
    }
    let Some(mut c) = merged else { bail!("consumerConnection: the consumer group[{}] not online", a.group) };
    c.connection_set.sort_by(|x, y| x.client_id.cmp(&y.client_id));
    let name = |v: Option<serde_json::Value>| v.and_then(|v| v.as_str().map(str::to_owned)).unwrap_or_default();
    let consume_type = name(c.consume_type.map(|t| json!(t)));
    let message_model = name(c.message_model.map(|m| json!(m)));
    let consume_from = name(c.consume_from_where.map(|f| json!(f)));
    if out.json {
        let subscriptions: Vec<_> = c
            .subscription_table
            .values()
            .map(|s| json!({"topic": s.topic, "subExpression": s.sub_string, "expressionType": s.expression_type}))
            .collect();
        out.json(
            &json!({"group": a.group, "connections": c.connection_set.iter().map(connection_json).collect::<Vec<_>>(),
            "subscriptions": subscriptions, "consumeType": consume_type, "messageModel": message_model,
            "consumeFromWhere": consume_from}),
        );
        return Ok(());
    }
    out.table(&connection_table(&c.connection_set));
    println!();
    println!("Below is subscription:");
    let mut subs = Table::new(&["#", "#Topic", "#SubExpression"]);
    for (i, s) in c.subscription_table.values().enumerate() {
        subs.row([format!("{:06}", i + 1), s.topic.clone(), s.sub_string.clone()]);
    }
    out.table(&subs);
    println!();
    println!("ConsumeType: {consume_type}");
    println!("MessageModel: {message_model}");
    println!("ConsumeFromWhere: {consume_from}");
    Ok(())
}

/// `ConsumerStatusSubCommand`: each client of the group (or the one named) is asked for its
/// running info through a broker leader holding its connection. With one client, its whole
/// report; otherwise a line per client and Java's two checks: every client subscribes the same,
/// and the queues held add up to the group's queues with none held twice.
async fn consumer_status(admin: &Admin, out: Out, a: ConsumerStatusArgs) -> Result<()> {
    let cmd = "consumerStatus";
    let info = admin.cluster_info().await.context(cmd)?;
    let leaders: Vec<String> =
        info.broker_addr_table.values().filter_map(|bd| bd.select_broker_addr().map(str::to_owned)).collect();
    let mut clients: Vec<String> = Vec::new();
    for addr in &leaders {
        match admin.consumer_connection(addr, &a.group).await {
            Ok(c) => clients.extend(c.connection_set.into_iter().map(|c| c.client_id)),
            Err(e) if e.response_code() == Some(ResponseCode::ConsumerNotOnline) => {}
            Err(e) => return Err(explain(cmd, RequestCode::GetConsumerConnectionList, e)),
        }
    }
    clients.sort_unstable();
    clients.dedup();
    if let Some(id) = &a.client_id {
        if !clients.contains(id) {
            bail!("{cmd}: client {id} of group {} is not online", a.group);
        }
        clients = vec![id.clone()];
    }
    if clients.is_empty() {
        bail!("{cmd}: the consumer group[{}] not online", a.group);
    }
    let mut reports = Vec::new();
    for id in &clients {
        let mut last_err = None;
        let mut found = None;
        for addr in &leaders {
            match admin.consumer_running_info(addr, &a.group, id, a.jstack).await {
                Ok(r) => {
                    found = Some(r);
                    break;
                }
                Err(e) => last_err = Some(e),
            }
        }
        match (found, last_err) {
            (Some(r), _) => reports.push((id.clone(), r)),
            (None, Some(e)) => return Err(explain(cmd, RequestCode::GetConsumerRunningInfo, e)),
            (None, None) => bail!("{cmd}: no broker holds client {id}'s connection"),
        }
    }
    let queues_of = |r: &ConsumerRunningInfo| {
        r.mq_table.keys().filter(|mq| !mq.topic.starts_with(RETRY_GROUP_TOPIC_PREFIX)).count()
    };
    let same_subscription = reports.windows(2).all(|w| subscription_key(&w[0].1) == subscription_key(&w[1].1));
    let mut held: Vec<_> = reports.iter().flat_map(|(_, r)| r.mq_table.keys().cloned()).collect();
    let held_total = held.len();
    held.sort();
    held.dedup();
    let none_twice = held.len() == held_total;
    if out.json {
        let clients: Vec<_> = reports
            .iter()
            .map(|(id, r)| {
                let queues: Vec<_> = r
                    .mq_table
                    .iter()
                    .map(|(mq, q)| json!({"topic": mq.topic, "brokerName": mq.broker_name, "queueId": mq.queue_id,
                        "commitOffset": q.commit_offset, "cachedMsgCount": q.cached_msg_count,
                        "lastPullTimestamp": q.last_pull_timestamp, "lastConsumeTimestamp": q.last_consume_timestamp,
                        "locked": q.locked}))
                    .collect();
                json!({"clientId": id, "properties": r.properties, "subscriptions": r.subscription_set.iter()
                    .map(|s| json!({"topic": s.topic, "subExpression": s.sub_string, "expressionType": s.expression_type}))
                    .collect::<Vec<_>>(), "queues": queues, "jstack": r.jstack})
            })
            .collect();
        out.json(&json!({"group": a.group, "clients": clients, "sameSubscription": same_subscription,
            "noQueueHeldTwice": none_twice}));
        return Ok(());
    }
    if let [(id, r)] = reports.as_slice()
        && a.client_id.is_some()
    {
        println!("#Consumer Properties#");
        for (k, v) in &r.properties {
            println!("{k:<40}: {v}");
        }
        println!();
        println!("#Consumer Subscription#");
        let mut subs = Table::new(&["#", "#Topic", "#ClassFilterMode", "#SubExpression"]);
        for (i, s) in r.subscription_set.iter().enumerate() {
            subs.row([format!("{:03}", i + 1), s.topic.clone(), s.class_filter_mode.to_string(), s.sub_string.clone()]);
        }
        out.table(&subs);
        println!();
        println!("#Consumer Offset# ({id})");
        let mut q = Table::new(&[
            "#Topic",
            "#Broker Name",
            "#QID",
            "#Consumer Offset",
            "#Cached Msgs",
            "#Last Pull",
            "#Last Consume",
            "#Locked",
        ]);
        for (mq, p) in &r.mq_table {
            q.row([
                mq.topic.clone(),
                mq.broker_name.clone(),
                mq.queue_id.to_string(),
                p.commit_offset.to_string(),
                p.cached_msg_count.to_string(),
                p.last_pull_timestamp.to_string(),
                p.last_consume_timestamp.to_string(),
                p.locked.to_string(),
            ]);
        }
        out.table(&q);
        println!();
        println!("#Consumer RT&TPS#");
        let mut rt = Table::new(&[
            "#Topic",
            "#Pull RT",
            "#Pull TPS",
            "#Consume RT",
            "#ConsumeOK TPS",
            "#ConsumeFailed TPS",
            "#ConsumeFailedMsgsInHour",
        ]);
        for (topic, st) in &r.status_table {
            rt.row([
                topic.clone(),
                format!("{:.2}", st.pull_rt),
                format!("{:.2}", st.pull_tps),
                format!("{:.2}", st.consume_rt),
                format!("{:.2}", st.consume_ok_tps),
                format!("{:.2}", st.consume_failed_tps),
                st.consume_failed_msgs.to_string(),
            ]);
        }
        out.table(&rt);
        if let Some(stack) = &r.jstack {
            println!();
            println!("#Consumer jstack#");
            println!("{stack}");
        }
        return Ok(());
    }
    let mut t = Table::new(&["#", "#ClientId", "#Version", "#Orderly", "#Queues", "#Cached Msgs"]);
    for (i, (id, r)) in reports.iter().enumerate() {
        let prop = |k: &str| r.properties.get(k).cloned().unwrap_or_default();
        let cached: i64 = r.mq_table.values().map(|q| i64::from(q.cached_msg_count)).sum();
        t.row([
            format!("{:03}", i + 1),
            id.clone(),
            prop(PROP_CLIENT_VERSION),
            prop(PROP_CONSUME_ORDERLY),
            queues_of(r).to_string(),
            cached.to_string(),
        ]);
    }
    out.table(&t);
    println!();
    if same_subscription {
        println!("Same subscription in the same group of consumer");
    } else {
        println!("WARN: Different subscription in the same group of consumer!!!");
    }
    if none_twice {
        println!("Rebalance OK");
    } else {
        println!("WARN: a queue is held by more than one client; the group is rebalancing or misconfigured");
    }
    Ok(())
}

/// A client's subscriptions, comparable across clients (topic and expression).
fn subscription_key(r: &ConsumerRunningInfo) -> Vec<(String, String, String)> {
    let mut key: Vec<_> =
        r.subscription_set.iter().map(|s| (s.topic.clone(), s.expression_type.clone(), s.sub_string.clone())).collect();
    key.sort();
    key
}

/// `examineProducerConnectionInfo`: the topic's brokers are asked and their answers merged.
/// `GetConsumerStatusCommand`: the offsets of a topic each client of the group holds in memory
/// (INVOKE_BROKER_TO_GET_CONSUMER_STATUS; the broker asks its connected clients). Java asks the
/// first broker of the topic's route; here a broker holding none of the group's clients
/// (SYSTEM_ERROR) passes the question to the next.
async fn get_consumer_status(admin: &Admin, out: Out, a: GetConsumerStatusArgs) -> Result<()> {
    let cmd = "getConsumerStatus";
    let route = admin.topic_route(&a.topic).await.context(cmd)?;
    let mut last_err = None;
    let mut found = None;
    for (_, addr) in read_targets(&route) {
        match admin.consumer_status(&addr, &a.topic, &a.group, a.client_id.as_deref()).await {
            Ok(table) => {
                found = Some(table);
                break;
            }
            Err(e) if e.response_code() == Some(ResponseCode::SystemError) => last_err = Some(e),
            Err(e) => return Err(explain(cmd, RequestCode::InvokeBrokerToGetConsumerStatus, e)),
        }
    }
    let table = match (found, last_err) {
        (Some(table), _) => table,
        (None, Some(e)) => return Err(explain(cmd, RequestCode::InvokeBrokerToGetConsumerStatus, e)),
        (None, None) => bail!("{cmd}: topic {} has no broker to ask", a.topic),
    };
    if out.json {
        let clients: BTreeMap<&String, Vec<serde_json::Value>> = table
            .iter()
            .map(|(id, offsets)| {
                let rows = offsets
                    .iter()
                    .map(|(mq, offset)| json!({"topic": mq.topic, "brokerName": mq.broker_name, "queueId": mq.queue_id, "offset": offset}))
                    .collect();
                (id, rows)
            })
            .collect();
        out.json(&json!({"group": a.group, "topic": a.topic, "originClientId": a.client_id, "clients": clients}));
        return Ok(());
    }
    println!(
        "get consumer status from client. group={}, topic={}, originClientId={}",
        a.group,
        a.topic,
        a.client_id.as_deref().unwrap_or("null")
    );
    let mut rows = Table::new(&["#clientId", "#brokerName", "#queueId", "#offset"]);
    for (id, offsets) in &table {
        for (mq, offset) in offsets {
            rows.row([id.clone(), mq.broker_name.clone(), mq.queue_id.to_string(), offset.to_string()]);
        }
    }
    out.table(&rows);
    Ok(())
}

async fn producer_connection(admin: &Admin, out: Out, a: ProducerConnectionArgs) -> Result<()> {
    let route = admin.topic_route(&a.topic).await.context("producerConnection")?;
    let mut connections: Vec<ConnectionBody> = Vec::new();
    let mut found = false;
    for (_, addr) in read_targets(&route) {
        match admin.producer_connection(&addr, &a.group).await {
            Ok(p) => {
                found = true;
                for conn in p.connection_set {
                    if !connections.iter().any(|x| x.client_id == conn.client_id) {
                        connections.push(conn);
                    }
                }
            }
            Err(e) if e.response_code() == Some(ResponseCode::SystemError) => {}
            Err(e) => return Err(explain("producerConnection", RequestCode::GetProducerConnectionList, e)),
        }
    }
    if !found {
        bail!("producerConnection: the producer group[{}] not exist", a.group);
    }
    connections.sort_by(|x, y| x.client_id.cmp(&y.client_id));
    if out.json {
        out.json(
            &json!({"group": a.group, "connections": connections.iter().map(connection_json).collect::<Vec<_>>()}),
        );
        return Ok(());
    }
    out.table(&connection_table(&connections));
    Ok(())
}

fn message_json(m: &MessageExt) -> serde_json::Value {
    json!({
        "msgId": m.msg_id(), "offsetMsgId": m.offset_msg_id().to_string(), "topic": m.topic(),
        "tags": m.message.tags(), "keys": m.message.keys(), "queueId": m.queue_id, "queueOffset": m.queue_offset,
        "commitLogOffset": m.commit_log_offset, "reconsumeTimes": m.reconsume_times,
        "bornTimestamp": m.born_timestamp, "storeTimestamp": m.store_timestamp,
        "bornHost": m.born_host.to_string(), "storeHost": m.store_host.to_string(), "sysFlag": m.sys_flag,
        "properties": m.message.properties.iter().collect::<BTreeMap<_, _>>(),
        "body": String::from_utf8_lossy(&m.message.body),
    })
}

/// Java's `QueryMsgByIdSubCommand.printMsg` layout.
fn print_message(m: &MessageExt) {
    let field = |name: &str, value: &dyn std::fmt::Display| println!("{:<20} {value}", format!("{name}:"));
    field("OffsetID", &m.offset_msg_id());
    field("MsgId", &m.msg_id());
    field("Topic", &m.topic());
    field("Tags", &format!("[{}]", m.message.tags().unwrap_or_default()));
    field("Keys", &format!("[{}]", m.message.keys().unwrap_or_default()));
    field("Queue ID", &m.queue_id);
    field("Queue Offset", &m.queue_offset);
    field("CommitLog Offset", &m.commit_log_offset);
    field("Reconsume Times", &m.reconsume_times);
    field("Born Timestamp", &human_time_ms(m.born_timestamp));
    field("Store Timestamp", &human_time_ms(m.store_timestamp));
    field("Born Host", &m.born_host);
    field("Store Host", &m.store_host);
    field("System Flag", &m.sys_flag);
    let props: Vec<String> = m.message.properties.iter().map(|(k, v)| format!("{k}={v}")).collect();
    field("Properties", &format!("{{{}}}", props.join(", ")));
    field("Message Body", &String::from_utf8_lossy(&m.message.body));
}

async fn query_msg_by_id(admin: &Admin, out: Out, a: QueryMsgByIdArgs) -> Result<()> {
    let mut found = Vec::new();
    for id in &a.msg_ids {
        let msg = match &a.topic {
            Some(topic) => by_unique_key(admin, topic, id).await?,
            None => {
                let offset_id: OffsetMsgId = id.parse().with_context(|| {
                    format!("queryMsgById: {id} is not an offsetMsgId (give -t TOPIC for a client msgId)")
                })?;
                admin
                    .view_message_by_id(&offset_id)
                    .await
                    .map_err(|e| explain("queryMsgById", RequestCode::ViewMessageById, e))?
            }
        };
        found.push(msg);
    }
    if let (Some(group), Some(client)) = (&a.consumer_group, &a.client_id) {
        return push_messages(admin, out, &found, group, client).await;
    }
    if out.json {
        out.json(&json!({"messages": found.iter().map(message_json).collect::<Vec<_>>()}));
    } else {
        for (i, m) in found.iter().enumerate() {
            if i > 0 {
                println!();
            }
            print_message(m);
        }
    }
    Ok(())
}

/// `QueryMsgByIdSubCommand.pushMsg`: each message goes to the client's listener once, through the
/// broker that stored it; prints how the listener took it.
async fn push_messages(admin: &Admin, out: Out, msgs: &[MessageExt], group: &str, client: &str) -> Result<()> {
    let mut results = Vec::new();
    for m in msgs {
        let id = OffsetMsgId::new(m.store_host, m.commit_log_offset).to_string();
        let r = admin
            .consume_message_directly(&m.store_host.to_string(), group, client, &id)
            .await
            .map_err(|e| explain("queryMsgById", RequestCode::ConsumeMessageDirectly, e))?;
        results.push((id, r));
    }
    if out.json {
        let rows: Vec<_> = results
            .iter()
            .map(|(id, r)| {
                json!({"msgId": id, "consumeResult": r.consume_result, "order": r.order,
                "autoCommit": r.auto_commit, "remark": r.remark, "spentTimeMills": r.spent_time_mills})
            })
            .collect();
        out.json(&json!({"consumerGroup": group, "clientId": client, "results": rows}));
        return Ok(());
    }
    for (id, r) in &results {
        let result = r.consume_result.map(|c| json!(c)).and_then(|v| v.as_str().map(str::to_owned)).unwrap_or_default();
        println!(
            "{id}: ConsumeMessageDirectlyResult [order={}, autoCommit={}, consumeResult={result}, remark={}, spentTimeMills={}]",
            r.order,
            r.auto_commit,
            r.remark.as_deref().unwrap_or("null"),
            r.spent_time_mills
        );
    }
    Ok(())
}

/// `MQAdminImpl.queryMessageByUniqKey`: every group of the topic, the earliest stored match.
async fn by_unique_key(admin: &Admin, topic: &str, id: &str) -> Result<MessageExt> {
    let route = admin.topic_route(topic).await.context("queryMsgById")?;
    let query = QueryMessageRequestHeader {
        topic: topic.to_owned(),
        key: id.to_owned(),
        max_num: 32,
        begin_timestamp: 0,
        end_timestamp: i64::MAX,
        unique_key_query: Some(true),
    };
    let mut best: Option<MessageExt> = None;
    for (_, addr) in read_targets(&route) {
        let msgs = admin
            .query_message(&addr, &query)
            .await
            .map_err(|e| explain("queryMsgById", RequestCode::QueryMessage, e))?;
        for m in msgs.into_iter().filter(|m| m.msg_id() == id) {
            if best.as_ref().is_none_or(|b| m.store_timestamp < b.store_timestamp) {
                best = Some(m);
            }
        }
    }
    best.ok_or_else(|| anyhow!("queryMsgById: no message {id} in topic {topic}"))
}

/// The address to read group `broker_name`'s queues of `topic` from (see [`read_targets`]).
fn group_read_addr(route: &TopicRouteData, cmd: &str, broker_name: &str, topic: &str) -> Result<String> {
    read_targets(route)
        .into_iter()
        .find(|(name, _)| name == broker_name)
        .map(|(_, addr)| addr)
        .ok_or_else(|| anyhow!("{cmd}: broker group {broker_name} does not serve topic {topic}"))
}

/// Java's `QueryMsgByOffsetSubCommand`: the unit at the offset (QUERY_CONSUME_QUEUE) names the
/// record, read from the group's leader (or lowest-id replica).
async fn query_msg_by_offset(admin: &Admin, out: Out, a: QueryMsgByOffsetArgs) -> Result<()> {
    let cmd = "queryMsgByOffset";
    let route = admin.topic_route(&a.topic).await.context(cmd)?;
    let addr = group_read_addr(&route, cmd, &a.broker_name, &a.topic)?;
    let (cq, _) = admin
        .query_consume_queue(&addr, &a.topic, a.queue_id, a.offset, 1, None)
        .await
        .map_err(|e| explain(cmd, RequestCode::QueryConsumeQueue, e))?;
    let Some(unit) = cq.queue_data.first() else {
        bail!(
            "{cmd}: no message at offset {} of {}:{} (the queue holds {}..{})",
            a.offset,
            a.topic,
            a.queue_id,
            cq.min_queue_index,
            cq.max_queue_index
        );
    };
    let msg = admin
        .view_message(&addr, unit.physic_offset)
        .await
        .map_err(|e| explain(cmd, RequestCode::ViewMessageById, e))?;
    if out.json {
        out.json(&message_json(&msg));
    } else {
        print_message(&msg);
    }
    Ok(())
}

/// Messages `consumeMessage` prints at most without `-c` (Java's `messageCount`).
const CONSUME_MESSAGE_DEFAULT_COUNT: u64 = 128;
/// The group Java's tools pull as (`MixAll.TOOLS_CONSUMER_GROUP`).
const TOOLS_CONSUMER_GROUP: &str = "TOOLS_CONSUMER";
/// Messages per pull of `printMsg` / `printMsgByQueue` (Java's 32).
const PRINT_PULL_BATCH_COUNT: i32 = 32;

/// Java's printing of one message: `MSGID: <id> <message> BODY: <body>`.
fn print_line(m: &MessageExt, print_body: bool) {
    let body = if print_body { String::from_utf8_lossy(&m.message.body).into_owned() } else { "NOT PRINT BODY".into() };
    println!(
        "MSGID: {} MessageExt [topic={}, queueId={}, queueOffset={}, commitLogOffset={}, storeTimestamp={}, \
         tags={}, keys={}, reconsumeTimes={}] BODY: {body}",
        m.msg_id(),
        m.topic(),
        m.queue_id,
        m.queue_offset,
        m.commit_log_offset,
        m.store_timestamp,
        m.message.tags().unwrap_or_default(),
        m.message.keys().unwrap_or_default(),
        m.reconsume_times
    );
}

/// The offsets `[from, to)` of one queue between two optional store times (the queue's bounds
/// without them), as Java's print commands choose them.
async fn queue_span(
    admin: &Admin,
    addr: &str,
    topic: &str,
    queue_id: i32,
    begin: Option<i64>,
    end: Option<i64>,
) -> Result<(i64, i64)> {
    let from = match begin {
        Some(t) => admin.search_offset(addr, topic, queue_id, t).await?,
        None => admin.min_offset(addr, topic, queue_id).await?,
    };
    let to = match end {
        Some(t) => admin.search_offset(addr, topic, queue_id, t).await?,
        None => admin.max_offset(addr, topic, queue_id).await?,
    };
    Ok((from, to))
}

/// Every message of `[from, to)` of one queue matching `sub_expression`, pulled in batches;
/// `each` sees them in queue order. Stops when the broker has nothing more, and, unless
/// `past_unmatched`, at the first window with no match (`printMsgByQueue` stops there, as Java's
/// does; `printMsg` reads on).
async fn read_span(
    admin: &Admin,
    addr: &str,
    mq: &MessageQueue,
    (from, to): (i64, i64),
    sub_expression: &str,
    past_unmatched: bool,
    mut each: impl FnMut(&MessageExt),
) -> std::result::Result<(), ClientError> {
    use raftmq_client::consumer::PullStatus;
    let mut offset = from;
    while offset < to {
        let pulled = admin.pull(addr, TOOLS_CONSUMER_GROUP, mq, offset, PRINT_PULL_BATCH_COUNT, sub_expression).await?;
        match pulled.status {
            PullStatus::Found => pulled.msgs.iter().filter(|m| m.queue_offset < to).for_each(&mut each),
            PullStatus::NoMatchedMsg if past_unmatched => {}
            _ => break,
        }
        if pulled.next_begin_offset <= offset {
            break;
        }
        offset = pulled.next_begin_offset;
    }
    Ok(())
}

/// Java's `PrintMessageSubCommand`: each queue of the topic (sorted), its span, its messages.
async fn print_msg(admin: &Admin, out: Out, a: PrintMsgArgs) -> Result<()> {
    let cmd = "printMsg";
    let (begin, end) = a.filter.times()?;
    let route = admin.topic_route(&a.topic).await.context(cmd)?;
    let targets: BTreeMap<String, String> = read_targets(&route).into_iter().collect();
    let mut mqs: Vec<MessageQueue> = raftmq_client::route::subscribe_queues(&a.topic, &route).into_iter().collect();
    mqs.sort_by(raftmq_client::consumer::rebalance::java_mq_cmp);
    let mut json_rows = Vec::new();
    for mq in &mqs {
        let addr = targets.get(&mq.broker_name).with_context(|| format!("{cmd}: no address for {}", mq.broker_name))?;
        let span = queue_span(admin, addr, &a.topic, mq.queue_id, begin, end).await.context(cmd)?;
        if !out.json {
            println!(
                "minOffset={}, maxOffset={}, MessageQueue [topic={}, brokerName={}, queueId={}]",
                span.0, span.1, mq.topic, mq.broker_name, mq.queue_id
            );
        }
        read_span(admin, addr, mq, span, &a.filter.sub_expression, true, |m| {
            if out.json {
                json_rows.push(message_json(m));
            } else {
                print_line(m, a.print_body);
            }
        })
        .await
        .map_err(|e| explain(cmd, RequestCode::PullMessage, e))?;
    }
    if out.json {
        out.json(&json!({"topic": a.topic, "messages": json_rows}));
    }
    Ok(())
}

/// Java's `PrintMessageByQueueCommand`: one queue's messages printed (`-p`) and/or counted by tag
/// (`-f`, most frequent first).
async fn print_msg_by_queue(admin: &Admin, out: Out, a: PrintMsgByQueueArgs) -> Result<()> {
    let cmd = "printMsgByQueue";
    let (begin, end) = a.filter.times()?;
    let route = admin.topic_route(&a.topic).await.context(cmd)?;
    let addr = group_read_addr(&route, cmd, &a.broker_name, &a.topic)?;
    let span = queue_span(admin, &addr, &a.topic, a.queue_id, begin, end).await.context(cmd)?;
    let mut by_tag: BTreeMap<String, u64> = BTreeMap::new();
    let mut json_rows = Vec::new();
    let mq = MessageQueue::new(&a.topic, &a.broker_name, a.queue_id);
    read_span(admin, &addr, &mq, span, &a.filter.sub_expression, false, |m| {
        // Java's `calculateByTag` counts tagged messages only.
        if let Some(tag) = m.message.tags().filter(|t| !t.trim().is_empty()) {
            *by_tag.entry(tag.to_owned()).or_default() += 1;
        }
        if out.json {
            json_rows.push(message_json(m));
        } else if a.print_msg {
            print_line(m, a.print_body);
        }
    })
    .await
    .map_err(|e| explain(cmd, RequestCode::PullMessage, e))?;
    let mut counted: Vec<(String, u64)> = by_tag.into_iter().collect();
    counted.sort_by(|x, y| y.1.cmp(&x.1).then_with(|| x.0.cmp(&y.0)));
    if out.json {
        let tags: Vec<_> = counted.iter().map(|(t, n)| json!({"tag": t, "count": n})).collect();
        out.json(&json!({"topic": a.topic, "brokerName": a.broker_name, "queueId": a.queue_id,
            "minOffset": span.0, "maxOffset": span.1, "messages": json_rows, "tags": tags}));
    } else if a.by_tag {
        for (tag, n) in &counted {
            println!("Tag: {tag:<30} Count: {n}");
        }
    }
    Ok(())
}

/// A producer for the send commands, signed as the admin commands are.
async fn tools_producer(namesrv: &NamesrvAddrArgs) -> Result<raftmq_client::Producer> {
    let producer = raftmq_client::Producer::builder("PID_SMSC")
        .namesrv_addr(&namesrv.namesrv_addr)
        .send_timeout(namesrv.timeout)
        .credentials(namesrv.credentials()?)
        .build()?;
    producer.start().await?;
    Ok(producer)
}

/// Java's `SendMessageCommand`: one message, to a chosen queue with `-b` and `-i`, and its result.
async fn send_message(namesrv: &NamesrvAddrArgs, out: Out, a: SendMessageArgs) -> Result<()> {
    let producer = tools_producer(namesrv).await?;
    let mut msg = Message::new(a.topic.as_str(), a.body.trim().as_bytes().to_vec());
    if let Some(tags) = &a.tags {
        msg.set_tags(tags.trim());
    }
    if let Some(keys) = &a.keys {
        msg.set_keys(keys.trim());
    }
    // Java sends to the queue only for an id above -1, and otherwise as usual.
    let sent = match (&a.broker_name, a.queue_id) {
        (Some(broker), Some(queue_id)) if queue_id > -1 => {
            producer.send_to_queue(msg, &MessageQueue::new(&a.topic, broker, queue_id)).await
        }
        _ => producer.send(msg).await,
    };
    producer.shutdown().await;
    let r = sent.context("sendMessage")?;
    if out.json {
        out.json(&json!({"brokerName": r.message_queue.broker_name, "queueId": r.message_queue.queue_id,
            "sendStatus": r.status.name(), "msgId": r.msg_id, "offsetMsgId": r.offset_msg_id,
            "queueOffset": r.queue_offset}));
        return Ok(());
    }
    let line = |b: &str, q: &str, s: &str, id: &str| println!("{b:<32}  {q:<4}  {s:<20}    {id}");
    line("#Broker Name", "#QID", "#Send Result", "#MsgId");
    line(&r.message_queue.broker_name, &r.message_queue.queue_id.to_string(), r.status.name(), &r.msg_id);
    Ok(())
}

/// Java's `ConsumeMessageCommand`: every queue of the topic (sorted), or one queue from its start or
/// an offset, between two optional store times, at most `-c` messages in all; each pull's messages
/// printed after `Consume ok`, and why a queue ended.
async fn consume_message(admin: &Admin, out: Out, a: ConsumeMessageArgs) -> Result<()> {
    let cmd = "consumeMessage";
    let time = |flag: &str, value: &Option<String>| -> Result<Option<i64>> {
        value
            .as_deref()
            .map(|v| {
                parse_reset_timestamp(v)
                    .map_err(|_| anyhow!("{flag} {v}: expected milliseconds or yyyy-MM-dd#HH:mm:ss:SSS"))
            })
            .transpose()
    };
    let (begin, end) = (time("-s", &a.begin)?, time("-e", &a.end)?);
    let route = admin.topic_route(&a.topic).await.context(cmd)?;
    let mqs: Vec<MessageQueue> = match (&a.broker_name, a.queue_id) {
        (Some(broker), Some(queue_id)) => vec![MessageQueue::new(&a.topic, broker, queue_id)],
        _ => {
            let mut mqs: Vec<MessageQueue> =
                raftmq_client::route::subscribe_queues(&a.topic, &route).into_iter().collect();
            mqs.sort_by(raftmq_client::consumer::rebalance::java_mq_cmp);
            mqs
        }
    };
    let mut left = a.count;
    let mut json_rows = Vec::new();
    for mq in &mqs {
        if left == 0 {
            break;
        }
        let addr = group_read_addr(&route, cmd, &mq.broker_name, &a.topic)?;
        let (mut from, to) = queue_span(admin, &addr, &a.topic, mq.queue_id, begin, end).await.context(cmd)?;
        let label =
            format!("MessageQueue [topic={}, brokerName={}, queueId={}]", mq.topic, mq.broker_name, mq.queue_id);
        if let Some(offset) = a.offset {
            if offset > to {
                if !out.json {
                    println!("{label} no matched msg, offset={offset}");
                }
                continue;
            }
            if offset == to {
                // Java pulls there and finds nothing new.
                if !out.json {
                    println!("{label} print msg finished. status=NO_NEW_MSG, offset={offset}");
                }
                continue;
            }
            from = from.max(offset);
        }
        let mut last = to;
        if u64::try_from(to.saturating_sub(from)).unwrap_or(0) > left {
            if !out.json {
                // Java's two wordings (and its spelling), for all queues and for one.
                match a.queue_id {
                    None => println!("The older {left} message of the {} queue will be provided", mq.queue_id),
                    Some(_) => println!("The oldler {left} message will be provided"),
                }
            }
            last = from.saturating_add(i64::try_from(left).unwrap_or(i64::MAX));
        }
        let mut offset = from;
        while offset < last {
            use raftmq_client::consumer::PullStatus;
            let want = i32::try_from(last.saturating_sub(offset).min(i64::from(PRINT_PULL_BATCH_COUNT))).unwrap_or(1);
            let pulled = admin
                .pull(&addr, &a.group, mq, offset, want, "*")
                .await
                .map_err(|e| explain(cmd, RequestCode::PullMessage, e))?;
            let next = pulled.next_begin_offset;
            match pulled.status {
                PullStatus::Found => {
                    let msgs: Vec<&MessageExt> = pulled.msgs.iter().filter(|m| m.queue_offset < last).collect();
                    left = left.saturating_sub(msgs.len() as u64);
                    if out.json {
                        json_rows.extend(msgs.iter().map(|m| message_json(m)));
                    } else {
                        println!("Consume ok");
                        msgs.iter().for_each(|m| print_line(m, true));
                    }
                }
                PullStatus::NoMatchedMsg => {
                    if !out.json {
                        println!("{label} no matched msg. status=NO_MATCHED_MSG, offset={next}");
                    }
                }
                status => {
                    if !out.json {
                        let name = if status == PullStatus::NoNewMsg { "NO_NEW_MSG" } else { "OFFSET_ILLEGAL" };
                        println!("{label} print msg finished. status={name}, offset={next}");
                    }
                    break;
                }
            }
            if next <= offset {
                break;
            }
            offset = next;
        }
    }
    if out.json {
        out.json(&json!({"topic": a.topic, "messages": json_rows}));
    }
    Ok(())
}

/// Java's `SendResult.toString`.
fn send_result_text(r: &raftmq_client::SendResult) -> String {
    format!(
        "SendResult [sendStatus={}, msgId={}, offsetMsgId={}, messageQueue=MessageQueue [topic={}, brokerName={}, \
         queueId={}], queueOffset={}]",
        r.status.name(),
        r.msg_id,
        r.offset_msg_id,
        r.message_queue.topic,
        r.message_queue.broker_name,
        r.message_queue.queue_id,
        r.queue_offset
    )
}

/// Java's `SendMsgStatusCommand`: one warm-up send, then `-c` sends of `-s` bytes to the topic
/// named after the broker group, each printed with its round trip.
async fn send_msg_status(namesrv: &NamesrvAddrArgs, out: Out, a: SendMsgStatusArgs) -> Result<()> {
    let producer = tools_producer(namesrv).await?;
    let outcome = async {
        producer.send(Message::new(a.broker_name.as_str(), vec![b'a'; 16])).await.context("sendMsgStatus")?;
        let mut rows = Vec::new();
        for _ in 0..a.count {
            let started = std::time::Instant::now();
            let r = producer.send(Message::new(a.broker_name.as_str(), vec![b'a'; a.size])).await.context("sendMsgStatus")?;
            let rt_ms = started.elapsed().as_millis();
            if out.json {
                rows.push(json!({"rtMs": rt_ms, "status": r.status.name(), "msgId": r.msg_id, "queueId": r.message_queue.queue_id}));
            } else {
                println!("rt:{rt_ms}ms, SendResult={}", send_result_text(&r));
            }
        }
        if out.json {
            out.json(&json!({"brokerName": a.broker_name, "sends": rows}));
        }
        Ok(())
    }
    .await;
    producer.shutdown().await;
    outcome
}

/// Java's `CheckMsgSendRTCommand`: `-a` sends, send `i` to queue `i mod queues`, each printed
/// with its broker, queue, success and round trip; the average leaves out the first send.
async fn check_msg_send_rt(namesrv: &NamesrvAddrArgs, out: Out, a: CheckMsgSendRtArgs) -> Result<()> {
    let producer = tools_producer(namesrv).await?;
    let outcome = async {
        let route = producer.routes().publish_info(&a.topic, None).await.context("checkMsgSendRT")?;
        let queues = route.message_queues();
        if queues.is_empty() {
            bail!("checkMsgSendRT: topic {} has no writable queue", a.topic);
        }
        let mut table = Table::new(&["#Broker Name", "#QID", "#Send Result", "#RT"]);
        let mut rows = Vec::new();
        let mut total_ms = 0u128;
        for i in 0..a.amount {
            let mq = &queues[i as usize % queues.len()];
            let started = std::time::Instant::now();
            let ok = producer.send_to_queue(Message::new(a.topic.as_str(), vec![0u8; a.size]), mq).await.is_ok();
            let rt_ms = started.elapsed().as_millis();
            if i != 0 {
                total_ms += rt_ms;
            }
            table.row([mq.broker_name.clone(), mq.queue_id.to_string(), ok.to_string(), rt_ms.to_string()]);
            rows.push(json!({"brokerName": mq.broker_name, "queueId": mq.queue_id, "sendResult": ok, "rtMs": rt_ms}));
        }
        let average = if a.amount > 1 { total_ms as f64 / f64::from(a.amount - 1) } else { 0.0 };
        if out.json {
            out.json(&json!({"topic": a.topic, "sends": rows, "avgRtMs": average}));
        } else {
            out.table(&table);
            println!("Avg RT: {average:.2}");
        }
        Ok(())
    }
    .await;
    producer.shutdown().await;
    outcome
}

/// Java's `ClusterSendMsgRTCommand`: per broker group of the cluster(s), `-a` sends of `-s` bytes
/// to its own topic; the average round trip leaves out the first send. One round, or one every
/// `-i` seconds until interrupted.
async fn cluster_rt(admin: &Admin, namesrv: &NamesrvAddrArgs, out: Out, a: ClusterRtArgs) -> Result<()> {
    let info = admin.cluster_info().await.context("clusterRT")?;
    let clusters: Vec<(String, BTreeSet<String>)> = match &a.cluster {
        Some(c) => {
            let names = info.cluster_addr_table.get(c).ok_or_else(|| anyhow!("clusterRT: cluster [{c}] not exist"))?;
            vec![(c.clone(), names.iter().cloned().collect())]
        }
        None => info.cluster_addr_table.iter().map(|(c, names)| (c.clone(), names.iter().cloned().collect())).collect(),
    };
    let producer = tools_producer(namesrv).await?;
    let outcome = async {
        loop {
            let mut table = Table::new(&["#Cluster Name", "#Broker Name", "#RT", "#successCount", "#failCount"]);
            let mut rows = Vec::new();
            for (cluster, brokers) in &clusters {
                for broker in brokers {
                    let (mut ok, mut failed, mut total_ms) = (0u32, 0u32, 0u128);
                    for i in 0..a.amount {
                        let started = std::time::Instant::now();
                        match producer.send(Message::new(broker.as_str(), vec![b'a'; a.size])).await {
                            Ok(_) => ok += 1,
                            Err(_) => failed += 1,
                        }
                        if i != 0 {
                            total_ms += started.elapsed().as_millis();
                        }
                    }
                    let rt = if a.amount > 1 { total_ms as f64 / f64::from(a.amount - 1) } else { 0.0 };
                    if a.print_log && !out.json {
                        let now = chrono::Local::now().format("%Y-%m-%d %H:%M:%S");
                        println!("{now}|{}|{cluster}|{broker}|{}", a.machine_room, rt.round());
                    }
                    table.row([cluster.clone(), broker.clone(), format!("{rt:.2}"), ok.to_string(), failed.to_string()]);
                    rows.push(json!({"cluster": cluster, "brokerName": broker, "rtMs": rt, "successCount": ok, "failCount": failed}));
                }
            }
            if out.json {
                out.json(&json!(rows));
            } else if !a.print_log {
                out.table(&table);
            }
            let Some(interval_s) = a.interval_s else { return Ok(()) };
            tokio::time::sleep(std::time::Duration::from_secs(interval_s)).await;
        }
    }
    .await;
    producer.shutdown().await;
    outcome
}

/// Java's `TopicClusterSubCommand`: the cluster of each broker group in the topic's route.
async fn topic_cluster_list(admin: &Admin, out: Out, topic: &str) -> Result<()> {
    let route = admin.topic_route(topic).await.context("topicClusterList")?;
    let clusters: BTreeSet<&str> = route.broker_datas.iter().map(|b| b.cluster.as_str()).collect();
    if out.json {
        out.json(&json!({"topic": topic, "clusters": clusters}));
    } else {
        clusters.iter().for_each(|c| println!("{c}"));
    }
    Ok(())
}

/// Java's `AllocateMQSubCommand`: each address's share of the topic's readable queues under
/// `AllocateMessageQueueAveragely`, printed as Java's `RebalanceResult` JSON. The addresses keep
/// the order given (a group sorts its client ids before allocating); the queues are sorted as a
/// consumer sorts them.
async fn allocate_mq(admin: &Admin, out: Out, a: AllocateMqArgs) -> Result<()> {
    let route = admin.topic_route(&a.topic).await.context("allocateMQ")?;
    let mut mqs: Vec<MessageQueue> = raftmq_client::route::subscribe_queues(&a.topic, &route).into_iter().collect();
    mqs.sort_by(raftmq_client::consumer::rebalance::java_mq_cmp);
    let result: serde_json::Map<String, serde_json::Value> = a
        .ips
        .iter()
        .map(|ip| {
            let share = raftmq_client::consumer::rebalance::allocate_averagely(ip, &mqs, &a.ips);
            let queues = share
                .iter()
                .map(|mq| json!({"brokerName": mq.broker_name, "queueId": mq.queue_id, "topic": mq.topic}))
                .collect();
            (ip.clone(), serde_json::Value::Array(queues))
        })
        .collect();
    let doc = json!({ "result": result });
    done(out, &doc.to_string(), doc)
}

/// Java's `UpdateOrderConfCommand`: an ordered topic's layout in the NameServers' KV config
/// (`ORDER_TOPIC_CONFIG`), which routes then carry as `orderTopicConf`.
async fn update_order_conf(admin: &Admin, out: Out, a: UpdateOrderConfArgs) -> Result<()> {
    let cmd = "updateOrderConf";
    match (a.method.as_str(), a.order_conf) {
        ("get", _) => {
            let conf = admin.get_kv_config(ORDER_TOPIC_CONFIG_NAMESPACE, &a.topic).await.context(cmd)?;
            let shown = conf.as_deref().unwrap_or("null");
            done(
                out,
                &format!("get orderConf success. topic=[{}], orderConf=[{shown}]", a.topic),
                json!({"topic": a.topic, "orderConf": conf}),
            )
        }
        ("put", Some(conf)) => {
            let conf = conf.trim().to_owned();
            if conf.is_empty() {
                bail!("{cmd}: -v ORDER_CONF is blank");
            }
            admin.put_kv_config(ORDER_TOPIC_CONFIG_NAMESPACE, &a.topic, &conf).await.context(cmd)?;
            done(
                out,
                &format!("update orderConf success. topic=[{}], orderConf=[{conf}]", a.topic),
                json!({"topic": a.topic, "orderConf": conf}),
            )
        }
        ("delete", _) => {
            admin.delete_kv_config(ORDER_TOPIC_CONFIG_NAMESPACE, &a.topic).await.context(cmd)?;
            done(out, &format!("delete orderConf success. topic=[{}]", a.topic), json!({"topic": a.topic}))
        }
        (method, _) => bail!("{cmd}: -m {method} needs -v ORDER_CONF"),
    }
}

/// Java's `QueryMsgTraceByIdSubCommand.printMessageTrace`: each send, then each consumer group's
/// listener outcomes (SubAfter), then, beyond Java, each transaction end.
async fn query_msg_trace_by_id(admin: &Admin, out: Out, a: QueryMsgTraceByIdArgs) -> Result<()> {
    let views = admin.query_msg_trace_by_id(&a.msg_id, a.trace_topic.as_deref()).await.context("queryMsgTraceById")?;
    let time = |ms: i64| {
        use chrono::TimeZone;
        chrono::Local
            .timestamp_millis_opt(ms)
            .earliest()
            .map_or(ms.to_string(), |t| t.format("%Y-%m-%d %H:%M:%S").to_string())
    };
    if out.json {
        let rows: Vec<_> = views
            .iter()
            .map(|v| {
                json!({"type": v.trace_type.name(), "msgId": v.msg_id, "groupName": v.group_name,
                       "clientHost": v.client_host, "timeStamp": v.timestamp_ms, "costTime": v.cost_time_ms,
                       "status": v.status, "topic": v.topic, "tags": v.tags, "keys": v.keys,
                       "offSetMsgId": v.offset_msg_id, "storeHost": v.store_host,
                       "transactionState": v.transaction_state,
                       "fromTransactionCheck": v.from_transaction_check})
            })
            .collect();
        out.json(&json!({"msgId": a.msg_id, "traces": rows}));
        return Ok(());
    }
    let line = |cols: [&str; 6]| {
        println!("{:<10} {:<20} {:<20} {:<20} {:<10} {:<10}", cols[0], cols[1], cols[2], cols[3], cols[4], cols[5])
    };
    let mut consumers: BTreeMap<&str, Vec<&TraceView>> = BTreeMap::new();
    let mut ends = Vec::new();
    for v in &views {
        match v.trace_type {
            TraceType::Pub => {
                line(["#Type", "#ProducerGroup", "#ClientHost", "#SendTime", "#CostTimes", "#Status"]);
                let cost = format!("{}ms", v.cost_time_ms);
                line(["Pub", &v.group_name, &v.client_host, &time(v.timestamp_ms), &cost, v.status]);
                println!();
            }
            TraceType::SubAfter => consumers.entry(v.group_name.as_str()).or_default().push(v),
            TraceType::EndTransaction => ends.push(v),
            TraceType::SubBefore => {}
        }
    }
    for group in consumers.values() {
        line(["#Type", "#ConsumerGroup", "#ClientHost", "#ConsumerTime", "#CostTimes", "#Status"]);
        for v in group {
            let cost = format!("{}ms", v.cost_time_ms);
            line(["Sub", &v.group_name, &v.client_host, &time(v.timestamp_ms), &cost, v.status]);
        }
        println!();
    }
    if !ends.is_empty() {
        line(["#Type", "#ProducerGroup", "#ClientHost", "#EndTime", "#State", "#FromCheck"]);
        for v in ends {
            let from_check = v.from_transaction_check.to_string();
            line(["EndTx", &v.group_name, &v.client_host, &time(v.timestamp_ms), &v.transaction_state, &from_check]);
        }
        println!();
    }
    Ok(())
}

async fn query_msg_by_key(admin: &Admin, out: Out, a: QueryMsgByKeyArgs) -> Result<()> {
    let route = admin.topic_route(&a.topic).await.context("queryMsgByKey")?;
    let query = QueryMessageRequestHeader {
        topic: a.topic.clone(),
        key: a.key.clone(),
        max_num: a.max_num,
        begin_timestamp: a.begin_ms,
        end_timestamp: a.end_ms,
        unique_key_query: None,
    };
    let mut found = Vec::new();
    for (_, addr) in read_targets(&route) {
        let msgs = admin
            .query_message(&addr, &query)
            .await
            .map_err(|e| explain("queryMsgByKey", RequestCode::QueryMessage, e))?;
        // The IndexFile matches hashes; Java keeps only messages that really carry the key.
        found.extend(msgs.into_iter().filter(|m| m.message.key_list().any(|k| k == a.key)));
    }
    if out.json {
        out.json(
            &json!({"topic": a.topic, "key": a.key, "messages": found.iter().map(message_json).collect::<Vec<_>>()}),
        );
        return Ok(());
    }
    let mut table = Table::new(&["#Message ID", "#QID", "#Offset"]);
    for m in &found {
        table.row([m.msg_id(), m.queue_id.to_string(), m.queue_offset.to_string()]);
    }
    out.table(&table);
    Ok(())
}

/// mqadmin's `-s`: `now`, epoch milliseconds, or `yyyy-MM-dd#HH:mm:ss:SSS` in local time.
fn parse_reset_timestamp(s: &str) -> Result<i64> {
    if s == "now" {
        return Ok(now_ms());
    }
    if let Ok(ms) = s.parse::<i64>() {
        return Ok(ms);
    }
    use chrono::TimeZone;
    let naive = chrono::NaiveDateTime::parse_from_str(s, "%Y-%m-%d#%H:%M:%S:%3f")
        .with_context(|| format!("-s {s}: expected now, milliseconds or yyyy-MM-dd#HH:mm:ss:SSS"))?;
    chrono::Local
        .from_local_datetime(&naive)
        .earliest()
        .map(|t| t.timestamp_millis())
        .ok_or_else(|| anyhow!("-s {s}: no such local time"))
}

async fn reset_offset_by_time(admin: &Admin, out: Out, a: ResetOffsetByTimeArgs) -> Result<()> {
    let timestamp_ms = parse_reset_timestamp(&a.timestamp)?;
    let route = admin.topic_route(&a.topic).await.context("resetOffsetByTime")?;
    let mut rows = Vec::new();
    for bd in &route.broker_datas {
        let Some(addr) = bd.broker_addrs.get(&MASTER_ID) else {
            bail!("resetOffsetByTime: group {} has no leader; try again after its election", bd.broker_name);
        };
        match admin.reset_offset_by_time(addr, &a.topic, &a.group, timestamp_ms, a.force).await {
            Ok(table) => {
                for (mq, offset) in table {
                    rows.push(ResetRow {
                        mq,
                        broker_offset: None,
                        consumer_offset: None,
                        timestamp_offset: None,
                        reset: offset,
                    });
                }
            }
            Err(e) if not_supported(&e) || e.response_code() == Some(ResponseCode::ConsumerNotOnline) => {
                let queues =
                    route.queue_datas.iter().find(|q| q.broker_name == bd.broker_name).map_or(0, |q| q.read_queue_nums);
                for queue_id in 0..queues {
                    let mq = MessageQueue::new(&a.topic, &bd.broker_name, queue_id);
                    rows.push(reset_queue_old(admin, addr, &a, mq, timestamp_ms).await?);
                }
            }
            Err(e) => return Err(explain("resetOffsetByTime", RequestCode::InvokeBrokerToResetOffset, e)),
        }
    }
    print_reset(out, &a, timestamp_ms, &rows);
    Ok(())
}

struct ResetRow {
    mq: MessageQueue,
    broker_offset: Option<i64>,
    consumer_offset: Option<i64>,
    timestamp_offset: Option<i64>,
    reset: i64,
}

/// `ResetOffsetByTimeOldCommand` for one queue: the offset at `timestamp_ms` becomes the group's
/// committed offset when forced or when it moves the group backward.
async fn reset_queue_old(
    admin: &Admin,
    addr: &str,
    a: &ResetOffsetByTimeArgs,
    mq: MessageQueue,
    timestamp_ms: i64,
) -> Result<ResetRow> {
    let cmd = "resetOffsetByTime";
    let broker_offset = admin.max_offset(addr, &mq.topic, mq.queue_id).await?;
    let consumer_offset = admin.query_consumer_offset(addr, &a.group, &mq.topic, mq.queue_id).await?.unwrap_or(0);
    let timestamp_offset = admin
        .search_offset(addr, &mq.topic, mq.queue_id, timestamp_ms)
        .await
        .map_err(|e| explain(cmd, RequestCode::SearchOffsetByTimestamp, e))?;
    let reset = if a.force || timestamp_offset <= consumer_offset {
        admin
            .update_consumer_offset(addr, &a.group, &mq.topic, mq.queue_id, timestamp_offset)
            .await
            .map_err(|e| explain(cmd, RequestCode::UpdateConsumerOffset, e))?;
        timestamp_offset
    } else {
        consumer_offset
    };
    Ok(ResetRow {
        mq,
        broker_offset: Some(broker_offset),
        consumer_offset: Some(consumer_offset),
        timestamp_offset: Some(timestamp_offset),
        reset,
    })
}

fn print_reset(out: Out, a: &ResetOffsetByTimeArgs, timestamp_ms: i64, rows: &[ResetRow]) {
    if out.json {
        let queues: Vec<_> = rows
            .iter()
            .map(|r| {
                json!({"brokerName": r.mq.broker_name, "queueId": r.mq.queue_id, "brokerOffset": r.broker_offset,
                       "consumerOffset": r.consumer_offset, "timestampOffset": r.timestamp_offset, "resetOffset": r.reset})
            })
            .collect();
        out.json(
            &json!({"group": a.group, "topic": a.topic, "timestamp": timestamp_ms, "force": a.force, "queues": queues}),
        );
        return;
    }
    println!(
        "rollback consumer offset by specified consumerGroup[{}], topic[{}], force[{}], timestamp(string)[{}], timestamp(long)[{}]",
        a.group, a.topic, a.force, a.timestamp, timestamp_ms
    );
    let opt = |v: Option<i64>| v.map_or_else(|| "-".to_owned(), |v| v.to_string());
    let mut table = Table::new(&[
        "#brokerName",
        "#queueId",
        "#brokerOffset",
        "#consumerOffset",
        "#timestampOffset",
        "#resetOffset",
    ]);
    for r in rows {
        table.row([
            r.mq.broker_name.clone(),
            r.mq.queue_id.to_string(),
            opt(r.broker_offset),
            opt(r.consumer_offset),
            opt(r.timestamp_offset),
            r.reset.to_string(),
        ]);
    }
    out.table(&table);
}

/// `-` for an absent value.
fn opt<T: ToString>(v: Option<T>) -> String {
    v.map_or_else(|| "-".to_owned(), |v| v.to_string())
}

fn ids(ids: impl IntoIterator<Item = u64>) -> String {
    let list: Vec<String> = ids.into_iter().map(|i| i.to_string()).collect();
    if list.is_empty() { "-".to_owned() } else { list.join(",") }
}

/// Prints the outcome of a membership change or transfer.
fn print_report(
    out: Out,
    command: &str,
    request: RequestCode,
    broker_name: &str,
    report: std::result::Result<MembershipReport, ClientError>,
) -> Result<()> {
    let r = report.map_err(|e| explain(command, request, e))?;
    if out.json {
        let mut v = serde_json::to_value(&r)?;
        v["brokerName"] = json!(broker_name);
        out.json(&v);
        return Ok(());
    }
    println!("{command} {} on group {broker_name} success ({} ms).", opt(r.node_id), r.elapsed_ms);
    let mut table = Table::new(&["#Broker Name", "#Term", "#Leader", "#Leader Addr", "#Voters", "#Learners"]);
    table.row([
        broker_name.to_owned(),
        r.term.to_string(),
        opt(r.leader),
        opt(r.leader_addr.clone()),
        ids(r.voters.iter().copied()),
        ids(r.learners.iter().copied()),
    ]);
    out.table(&table);
    Ok(())
}

/// Every member's own view (RAFT_GROUP_STATUS); the NameServer's view when no member serves it.
async fn group_status(admin: &Admin, out: Out, broker_name: &str) -> Result<()> {
    let views = admin.group_status_all(broker_name).await.context("groupStatus")?;
    if !views.values().any(|v| v.is_ok()) && views.values().all(|v| v.as_ref().is_err_and(not_supported)) {
        eprintln!("groupStatus: the brokers do not support RAFT_GROUP_STATUS; showing the NameServer's view");
        return namesrv_group_status(admin, out, broker_name).await;
    }
    let leader = views.values().filter_map(|v| v.as_ref().ok()).filter(|s| s.role == "LEADER").max_by_key(|s| s.term);
    if out.json {
        let members: Vec<_> = views
            .iter()
            .map(|(addr, v)| match v {
                Ok(s) => json!({"addr": addr, "status": s}),
                Err(e) => json!({"addr": addr, "error": e.to_string()}),
            })
            .collect();
        let leader = leader.map(|s| json!({"id": s.node_id, "addr": s.addr, "term": s.term}));
        out.json(&json!({"brokerName": broker_name, "leader": leader, "members": members}));
        return Ok(());
    }
    let mut table = Table::new(&[
        "#Broker Name",
        "#Node",
        "#Addr",
        "#Role",
        "#Term",
        "#Leader",
        "#Last Index",
        "#Committed",
        "#Applied",
        "#Voters",
        "#Learners",
        "#Note",
    ]);
    for (addr, view) in &views {
        match view {
            Ok(s) => {
                let mut note: Vec<String> = Vec::new();
                if s.ready {
                    note.push("ready".into());
                }
                if s.removed {
                    note.push("removed".into());
                }
                if let Some(c) = &s.membership_change {
                    note.push(format!("change: {c}"));
                }
                if let Some(d) = s.damaged.as_ref().or(s.poisoned.as_ref()) {
                    note.push(format!("damaged: {d}"));
                }
                table.row([
                    broker_name.to_owned(),
                    s.node_id.to_string(),
                    addr.clone(),
                    s.role.clone(),
                    s.term.to_string(),
                    opt(s.leader),
                    opt(s.last_log_index),
                    opt(s.committed_index),
                    opt(s.applied_index),
                    ids(s.voters.iter().map(|m| m.id)),
                    ids(s.learners.iter().map(|m| m.id)),
                    if note.is_empty() { "-".to_owned() } else { note.join("; ") },
                ]);
            }
            Err(e) => {
                let why = if not_supported(e) { "not supported by this broker".to_owned() } else { e.to_string() };
                table.row([broker_name, "-", addr, "UNREACHABLE", "-", "-", "-", "-", "-", "-", "-", &why]);
            }
        }
    }
    out.table(&table);
    println!();
    let Some(leader) = leader else {
        println!("Leader: none (election in progress, or the group lost its quorum)");
        return Ok(());
    };
    println!("Leader: {} (node {}, term {})", leader.addr, leader.node_id, leader.term);
    if !leader.followers.is_empty() {
        println!();
        let mut table = Table::new(&["#Node", "#Match Index", "#Lag"]);
        for f in &leader.followers {
            table.row([f.id.to_string(), opt(f.match_index), opt(f.lag)]);
        }
        out.table(&table);
    }
    Ok(())
}

/// The group as the NameServer lists it (brokers without RAFT_GROUP_STATUS).
async fn namesrv_group_status(admin: &Admin, out: Out, broker_name: &str) -> Result<()> {
    let info = admin.cluster_info().await.context("groupStatus")?;
    let bd = info
        .broker_addr_table
        .get(broker_name)
        .ok_or_else(|| anyhow!("groupStatus: no broker group {broker_name} is registered with the NameServer"))?;
    let leader = bd.broker_addrs.get(&MASTER_ID);
    if out.json {
        let members: Vec<_> = bd
            .broker_addrs
            .iter()
            .map(|(id, addr)| {
                let (role, node) = role_of(*id);
                json!({"brokerId": id, "raftNodeId": (*id != MASTER_ID).then_some(id - 1), "role": role, "addr": addr,
                       "node": node})
            })
            .collect();
        out.json(&json!({"brokerName": broker_name, "cluster": bd.cluster, "leader": leader, "members": members}));
        return Ok(());
    }
    let mut table = Table::new(&["#Broker Name", "#BID", "#Raft Node", "#Role", "#Addr"]);
    for (id, addr) in &bd.broker_addrs {
        let (role, node) = role_of(*id);
        table.row([broker_name, &id.to_string(), &node, role, addr]);
    }
    out.table(&table);
    println!();
    match leader {
        Some(addr) => println!("Leader: {addr}"),
        None => println!("Leader: none registered (election in progress, or the group lost its quorum)"),
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reset_timestamps_parse_like_mqadmin() {
        assert_eq!(parse_reset_timestamp("1700000000000").unwrap(), 1_700_000_000_000);
        assert!(parse_reset_timestamp("now").unwrap() > 1_700_000_000_000);
        let local = parse_reset_timestamp("2024-01-02#03:04:05:006").unwrap();
        assert_eq!(local.rem_euclid(1000), 6, "milliseconds are kept");
        assert!(parse_reset_timestamp("yesterday").is_err());
    }

    #[test]
    fn route_ids_map_to_raft_roles() {
        assert_eq!(role_of(0), ("LEADER", "-".to_owned()));
        assert_eq!(role_of(3), ("FOLLOWER", "2".to_owned()));
    }
}
