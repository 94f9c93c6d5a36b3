//! `raftmq admin <command>`: RocketMQ's `mqadmin` with its command names and flags, on the SDK's
//! [`Admin`]. Default output is mqadmin's `#`-headed tables; `--json` prints one JSON document for
//! scripts instead.
//!
//! This file holds the command enum and its dispatch only; each command family lives in its own
//! file (topic, group, connection, message, pull, send, broker, store, namesrv, acl, cluster,
//! membership, stats), over shared pieces: `out` (tables or JSON), `explain` (error wording),
//! `target` (`-c`/`-b`), `render`, `timestamp`, `config_update`.
//!
//! Which broker answers (chosen by the SDK's [`Admin`], from the NameServer's routes and cluster
//! info; the commands only parse flags, call it and render):
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

mod acl;
mod broker;
mod cluster;
mod config_update;
mod connection;
mod explain;
mod group;
mod membership;
mod message;
mod namesrv;
mod out;
mod pull;
mod render;
mod send;
mod stats;
mod store;
mod target;
mod timestamp;
mod topic;

use anyhow::Result;
use clap::Args;
use clap::Subcommand;
use raftmq_client::Admin;

use out::Out;

use crate::namesrv_addr::NamesrvAddrArgs;

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
    UpdateTopic(topic::UpdateTopicArgs),
    /// Delete a topic from a cluster's brokers and from the NameServers.
    #[command(name = "deleteTopic")]
    DeleteTopic(topic::DeleteTopicArgs),
    /// List every topic the NameServer knows.
    #[command(name = "topicList")]
    TopicList,
    /// Show a topic's route: groups, addresses, queues.
    #[command(name = "topicRoute")]
    TopicRoute(topic::TopicArgs),
    /// Show min/max offsets of every queue of a topic.
    #[command(name = "topicStatus")]
    TopicStatus(topic::TopicArgs),
    /// List clusters, broker groups and their nodes.
    #[command(name = "clusterList")]
    ClusterList,
    /// Create or update a consumer group (subscription group).
    #[command(name = "updateSubGroup")]
    UpdateSubGroup(group::UpdateSubGroupArgs),
    /// Show a consumer group's offsets and lag per queue.
    #[command(name = "consumerProgress")]
    ConsumerProgress(group::ConsumerProgressArgs),
    /// Show a broker's runtime counters (messages in and out, rates, uptime, Raft position).
    #[command(name = "brokerStatus")]
    BrokerStatus(broker::BrokerStatusArgs),
    /// Show a broker's configuration (RocketMQ key names; secrets masked).
    #[command(name = "getBrokerConfig")]
    GetBrokerConfig(broker::BrokerStatusArgs),
    /// Change keys of broker configs while they run (one replica with `-b`, every replica of a
    /// cluster with `-c`); the keys a broker can change at runtime are listed in its refusal of any
    /// other. Persisted by the broker across restarts.
    #[command(name = "updateBrokerConfig")]
    UpdateBrokerConfig(broker::UpdateBrokerConfigArgs),
    /// Show the config of every NameServer (`-n`), key by key.
    #[command(name = "getNamesrvConfig")]
    GetNamesrvConfig,
    /// Change a key of every NameServer (`-n`) while it runs (orderMessageEnable,
    /// deleteTopicWithBrokerRegistration, enableAllTopicList, enableTopicList,
    /// brokerChannelExpiredTime); not written to its config file.
    #[command(name = "updateNamesrvConfig")]
    UpdateNamesrvConfig(namesrv::UpdateNamesrvConfigArgs),
    /// Clear the write permission of a broker group in every NameServer: producers stop choosing
    /// it, consumers still read it (until the group's topics change or its leader does).
    #[command(name = "wipeWritePerm")]
    WipeWritePerm(namesrv::BrokerNameArgs),
    /// Give a broker group read and write permission again in every NameServer.
    #[command(name = "addWritePerm")]
    AddWritePerm(namesrv::BrokerNameArgs),
    /// Change a topic's permission (2 write, 4 read, 6 read + write) on each target group, keeping
    /// its other settings.
    #[command(name = "updateTopicPerm")]
    UpdateTopicPerm(topic::UpdateTopicPermArgs),
    /// Delete a consumer group (its offsets stay unless `-r true`); with `-c`, also its retry and DLQ
    /// topics.
    #[command(name = "deleteSubGroup")]
    DeleteSubGroup(group::DeleteSubGroupArgs),
    /// Every consumer group's lag on one broker, per queue (rows with a lag of at least `-l`).
    #[command(name = "brokerConsumeStats")]
    BrokerConsumeStats(stats::BrokerConsumeStatsArgs),
    /// Copy a consumer group's committed offsets of a topic to another group, on every group of
    /// the topic (e.g. before renaming a consumer group).
    #[command(name = "cloneGroupOffset")]
    CloneGroupOffset(group::CloneGroupOffsetArgs),
    /// Set a KV config in every NameServer (e.g. `ORDER_TOPIC_CONFIG`).
    #[command(name = "updateKvConfig")]
    UpdateKvConfig(namesrv::KvConfigArgs),
    /// Delete a KV config from every NameServer.
    #[command(name = "deleteKvConfig")]
    DeleteKvConfig(namesrv::KvKeyArgs),
    /// Per topic and consumer group: backlog, TPS in and out over the last minute, messages in and
    /// out over the last 24 hours.
    #[command(name = "statsAll")]
    StatsAll(stats::StatsAllArgs),
    /// List a consumer group's connected clients and its subscriptions.
    #[command(name = "consumerConnection")]
    ConsumerConnection(connection::ConsumerConnectionArgs),
    /// Show what a consumer group's running clients report: settings, subscriptions, queues held.
    #[command(name = "consumerStatus")]
    ConsumerStatus(connection::ConsumerStatusArgs),
    /// Show the offsets of a topic each running client of a consumer group holds in memory.
    #[command(name = "getConsumerStatus")]
    GetConsumerStatus(connection::GetConsumerStatusArgs),
    /// List a producer group's connected clients on the brokers of a topic.
    #[command(name = "producerConnection")]
    ProducerConnection(connection::ProducerConnectionArgs),
    /// Show a message by its offsetMsgId (or by its client msgId with `-t`); with `-g` and `-d`, have
    /// that consumer client consume it once instead.
    #[command(name = "queryMsgById")]
    QueryMsgById(message::QueryMsgByIdArgs),
    /// Show a message by its client msgId (UNIQ_KEY), or with `-g` and `-d` have that consumer
    /// client consume it once.
    #[command(name = "queryMsgByUniqueKey")]
    QueryMsgByUniqueKey(message::QueryMsgByUniqueKeyArgs),
    /// Show what the trace records say happened to a message: its sends and every consumer
    /// group's listener calls (producers and consumers with `enableMsgTrace`).
    #[command(name = "queryMsgTraceById")]
    QueryMsgTraceById(message::QueryMsgTraceByIdArgs),
    /// Show the message at one offset of one queue.
    #[command(name = "queryMsgByOffset")]
    QueryMsgByOffset(message::QueryMsgByOffsetArgs),
    /// Print a topic's messages, every queue, optionally between two times and by tag.
    #[command(name = "printMsg")]
    PrintMsg(pull::PrintMsgArgs),
    /// Print one queue's messages, or count them by tag.
    #[command(name = "printMsgByQueue")]
    PrintMsgByQueue(pull::PrintMsgByQueueArgs),
    /// Send one message (to a chosen queue with `-b` and `-i`).
    #[command(name = "sendMessage")]
    SendMessage(send::SendMessageArgs),
    /// Pull messages of a topic, one queue (`-b`, `-i`) or from an offset (`-o`), and print them.
    #[command(name = "consumeMessage")]
    ConsumeMessage(pull::ConsumeMessageArgs),
    /// Send messages to a broker group's own topic (its name) and print each send's time.
    #[command(name = "sendMsgStatus")]
    SendMsgStatus(send::SendMsgStatusArgs),
    /// Send messages to every queue of a topic in turn and print each send's time and the average.
    #[command(name = "checkMsgSendRT")]
    CheckMsgSendRt(send::CheckMsgSendRtArgs),
    /// Send messages to every broker group's own topic of a cluster (or of all) and print each
    /// group's average round trip; with `-i`, again every interval until interrupted.
    #[command(name = "clusterRT")]
    ClusterRt(send::ClusterRtArgs),
    /// List the clusters whose broker groups serve a topic.
    #[command(name = "topicClusterList")]
    TopicClusterList(topic::TopicArgs),
    /// Show how a topic's queues are shared among consumers at the given addresses (averagely).
    #[command(name = "allocateMQ")]
    AllocateMq(topic::AllocateMqArgs),
    /// Get, put or delete an ordered topic's queue layout (`ORDER_TOPIC_CONFIG` in every NameServer).
    #[command(name = "updateOrderConf")]
    UpdateOrderConf(topic::UpdateOrderConfArgs),
    /// Find messages by key (IndexFile).
    #[command(name = "queryMsgByKey")]
    QueryMsgByKey(message::QueryMsgByKeyArgs),
    /// Put a half message (one given up after `transactionCheckMax` checks) back for checking, its
    /// check count at 0.
    #[command(name = "resumeCheckHalfMessage")]
    ResumeCheckHalfMessage(message::ResumeCheckHalfMessageArgs),
    /// Delete expired CommitLog segments now, whatever the `deleteWhen` hours (the next 20 retention
    /// rounds; `-b` one broker, `-c` every replica of a cluster).
    #[command(name = "deleteExpiredCommitLog")]
    DeleteExpiredCommitLog(store::ReplicaArgs),
    /// Delete ConsumeQueue and index files below the CommitLog's minimum now (`-b` one broker, `-c`
    /// every replica of a cluster).
    #[command(name = "cleanExpiredCQ")]
    CleanExpiredCq(store::ReplicaArgs),
    /// List ConsumeQueue units of one queue from an index (physical offset, size, tag code), and with
    /// `-g` whether each passes the group's subscription.
    #[command(name = "queryCq")]
    QueryCq(store::QueryCqArgs),
    /// Move a consumer group's offsets of a topic to a point in time.
    #[command(name = "resetOffsetByTime")]
    ResetOffsetByTime(group::ResetOffsetByTimeArgs),
    /// Show every member's view of a broker group's Raft state (term, leader, indexes, members).
    #[command(name = "groupStatus")]
    GroupStatus(membership::GroupArgs),
    /// Ask a broker group's Raft leader to hand leadership to another voter.
    #[command(name = "transferLeader")]
    TransferLeader(membership::TransferLeaderArgs),
    /// Add a node to a broker group: a learner until it has caught up, then a voter.
    #[command(name = "addNode")]
    AddNode(membership::AddNodeArgs),
    /// Remove a node (voter or learner, the leader included) from a broker group.
    #[command(name = "removeNode")]
    RemoveNode(membership::RemoveNodeArgs),
    /// Create or update a plain ACL account on each target group (every replica's ACL file).
    #[command(name = "updateAclConfig")]
    UpdateAclConfig(acl::UpdateAclConfigArgs),
    /// Delete a plain ACL account from each target group.
    #[command(name = "deleteAclConfig", alias = "deleteAccessConfig")]
    DeleteAclConfig(acl::DeleteAclConfigArgs),
    /// Replace the plain ACL's global white addresses on each target group.
    #[command(name = "updateGlobalWhiteAddr")]
    UpdateGlobalWhiteAddr(acl::UpdateGlobalWhiteAddrArgs),
    /// Show the plain ACL file version of every replica of a cluster (or of one broker).
    #[command(name = "clusterAclConfigVersion")]
    ClusterAclConfigVersion(acl::ClusterAclConfigVersionArgs),
    /// Show the plain ACL in force, secret keys included, on each group's leader of a cluster (or
    /// on one broker); needs an admin account.
    #[command(name = "getAccessConfigSubCommand", alias = "getAclConfig")]
    GetAccessConfig(acl::ClusterAclConfigVersionArgs),
}

/// Runs one admin command to completion.
pub async fn run(args: AdminArgs) -> Result<()> {
    let admin = args.namesrv.admin()?;
    let out = Out { json: args.json };
    let result = dispatch(&admin, &args.namesrv, out, args.command).await;
    admin.shutdown().await;
    result
}

/// Hands the command to its family's file; the send commands build their own producer.
async fn dispatch(admin: &Admin, namesrv: &NamesrvAddrArgs, out: Out, command: AdminCommand) -> Result<()> {
    match command {
        AdminCommand::PrintMsg(a) => pull::print_msg(admin, out, a).await,
        AdminCommand::PrintMsgByQueue(a) => pull::print_msg_by_queue(admin, out, a).await,
        AdminCommand::SendMessage(a) => send::send_message(namesrv, out, a).await,
        AdminCommand::ConsumeMessage(a) => pull::consume_message(admin, out, a).await,
        AdminCommand::SendMsgStatus(a) => send::send_msg_status(namesrv, out, a).await,
        AdminCommand::CheckMsgSendRt(a) => send::check_msg_send_rt(namesrv, out, a).await,
        AdminCommand::ClusterRt(a) => send::cluster_rt(admin, namesrv, out, a).await,
        AdminCommand::UpdateTopic(a) => topic::update_topic(admin, out, a).await,
        AdminCommand::DeleteTopic(a) => topic::delete_topic(admin, out, a).await,
        AdminCommand::TopicList => topic::topic_list(admin, out).await,
        AdminCommand::TopicRoute(a) => topic::topic_route(admin, out, a).await,
        AdminCommand::TopicStatus(a) => topic::topic_status(admin, out, a).await,
        AdminCommand::ClusterList => cluster::cluster_list(admin, out).await,
        AdminCommand::UpdateSubGroup(a) => group::update_sub_group(admin, out, a).await,
        AdminCommand::ConsumerProgress(a) => group::consumer_progress(admin, out, a).await,
        AdminCommand::BrokerStatus(a) => broker::broker_status(admin, out, a).await,
        AdminCommand::GetBrokerConfig(a) => broker::broker_config(admin, out, a).await,
        AdminCommand::UpdateBrokerConfig(a) => broker::update_broker_config(admin, out, a).await,
        AdminCommand::UpdateTopicPerm(a) => topic::update_topic_perm(admin, out, a).await,
        AdminCommand::GetNamesrvConfig => namesrv::namesrv_config(admin, out).await,
        AdminCommand::UpdateNamesrvConfig(a) => namesrv::update_namesrv_config(admin, out, a).await,
        AdminCommand::DeleteSubGroup(a) => group::delete_sub_group(admin, out, a).await,
        AdminCommand::BrokerConsumeStats(a) => stats::broker_consume_stats(admin, out, a).await,
        AdminCommand::CloneGroupOffset(a) => group::clone_group_offset(admin, out, a).await,
        AdminCommand::UpdateKvConfig(a) => namesrv::update_kv_config(admin, out, a).await,
        AdminCommand::DeleteKvConfig(a) => namesrv::delete_kv_config(admin, out, a).await,
        AdminCommand::WipeWritePerm(a) => namesrv::write_perm(admin, out, a, false).await,
        AdminCommand::AddWritePerm(a) => namesrv::write_perm(admin, out, a, true).await,
        AdminCommand::StatsAll(a) => stats::stats_all(admin, out, a).await,
        AdminCommand::ConsumerConnection(a) => connection::consumer_connection(admin, out, a).await,
        AdminCommand::ConsumerStatus(a) => connection::consumer_status(admin, out, a).await,
        AdminCommand::GetConsumerStatus(a) => connection::get_consumer_status(admin, out, a).await,
        AdminCommand::ProducerConnection(a) => connection::producer_connection(admin, out, a).await,
        AdminCommand::QueryMsgById(a) => message::query_msg_by_id(admin, out, a).await,
        AdminCommand::QueryMsgTraceById(a) => message::query_msg_trace_by_id(admin, out, a).await,
        AdminCommand::QueryMsgByUniqueKey(a) => message::query_msg_by_unique_key(admin, out, a).await,
        AdminCommand::QueryMsgByOffset(a) => message::query_msg_by_offset(admin, out, a).await,
        AdminCommand::TopicClusterList(a) => topic::topic_cluster_list(admin, out, a).await,
        AdminCommand::AllocateMq(a) => topic::allocate_mq(admin, out, a).await,
        AdminCommand::UpdateOrderConf(a) => topic::update_order_conf(admin, out, a).await,
        AdminCommand::QueryMsgByKey(a) => message::query_msg_by_key(admin, out, a).await,
        AdminCommand::ResumeCheckHalfMessage(a) => message::resume_check_half_message(admin, out, a).await,
        AdminCommand::QueryCq(a) => store::query_cq(admin, out, a).await,
        AdminCommand::DeleteExpiredCommitLog(a) => store::delete_expired_commit_log(admin, out, a).await,
        AdminCommand::CleanExpiredCq(a) => store::clean_expired_cq(admin, out, a).await,
        AdminCommand::ResetOffsetByTime(a) => group::reset_offset_by_time(admin, out, a).await,
        AdminCommand::GroupStatus(a) => membership::group_status(admin, out, a).await,
        AdminCommand::TransferLeader(a) => membership::transfer_leader(admin, out, a).await,
        AdminCommand::AddNode(a) => membership::add_node(admin, out, a).await,
        AdminCommand::RemoveNode(a) => membership::remove_node(admin, out, a).await,
        AdminCommand::UpdateAclConfig(a) => acl::update_acl_config(admin, out, a).await,
        AdminCommand::DeleteAclConfig(a) => acl::delete_acl_config(admin, out, a).await,
        AdminCommand::UpdateGlobalWhiteAddr(a) => acl::update_global_white_addr(admin, out, a).await,
        AdminCommand::ClusterAclConfigVersion(a) => acl::cluster_acl_config_version(admin, out, a).await,
        AdminCommand::GetAccessConfig(a) => acl::get_access_config(admin, out, a).await,
    }
}
