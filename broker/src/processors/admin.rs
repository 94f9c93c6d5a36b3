//! Administration requests (RocketMQ's `AdminBrokerProcessor`, the subset a Raft group serves):
//! topics and consumer groups (replicated through Raft, changed only by the leader), consumer offsets
//! and queue offsets (read on any replica).
//!
//! | code | what |
//! |---|---|
//! | UPDATE_AND_CREATE_TOPIC (17), DELETE_TOPIC_IN_BROKER (215) | replicated topic upsert / delete |
//! | GET_ALL_TOPIC_CONFIG (21) | `TopicConfigSerializeWrapper` |
//! | UPDATE_AND_CREATE_SUBSCRIPTIONGROUP (200), DELETE_SUBSCRIPTIONGROUP (207) | replicated group upsert / delete (with `removeOffset`, its committed offsets too) |
//! | GET_ALL_SUBSCRIPTIONGROUP_CONFIG (201) | `SubscriptionGroupWrapper` |
//! | GET_ALL_CONSUMER_OFFSET (43) | `ConsumerOffsetSerializeWrapper` |
//! | CLONE_GROUP_OFFSET (314) | one group's committed offsets copied to another, replicated |
//! | GET_BROKER_CONSUME_STATS (317) | `ConsumeStatsList`: every group's progress on this broker |
//! | GET_MAX_OFFSET (30), GET_MIN_OFFSET (31) | ConsumeQueue bounds |
//! | QUERY_BROKER_OFFSET (13) | CommitLog bounds in bytes: the committed end and the retention boundary |
//! | SEARCH_OFFSET_BY_TIMESTAMP (29) | first offset stored at or after a time (binary search) |
//! | GET_BROKER_CONFIG (26) | this replica's config now, as Java properties text, secrets masked |
//! | UPDATE_BROKER_CONFIG (25) | runtime keys of this replica's config ([`crate::config::live_config`]), persisted |
//! | QUERY_TOPIC_CONSUME_BY_WHO (300) | `GroupList`: groups subscribed to the topic or with an offset in it |
//! | VIEW_BROKER_STATS_DATA (315) | `BrokerStatsData` of one statistic and key ([`crate::observability::stats::StatsTable`]) |
//! | RAFT_ADD_NODE (20101), RAFT_REMOVE_NODE (20102), RAFT_TRANSFER_LEADERSHIP (20103) | [`crate::services::membership`], leader only (a follower answers with the leader hint) |
//! | RAFT_GROUP_STATUS (20104) | this node's view of its group (`GroupStatus`), any member |
//! | RAFT_NODE_REMOVED (20105) | the leader removed this node: stop registering with NameServers |

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::sync::atomic::AtomicU32;

use raftmq_common::limits::QUERY_CONSUME_QUEUE_MAX_COUNT;
use raftmq_common::limits::RETENTION_MANUAL_DELETE_ROUNDS_COUNT;
use raftmq_common::limits::TOPIC_QUEUE_NUMS_MAX_COUNT;
use raftmq_common::message::validate::DLQ_GROUP_TOPIC_PREFIX;
use raftmq_common::message::validate::RETRY_GROUP_TOPIC_PREFIX;
use raftmq_common::message::validate::is_system_topic;
use raftmq_common::message::validate::validate_consumer_group;
use raftmq_common::message::validate::validate_group;
use raftmq_common::message::validate::validate_stored_topic;
use raftmq_common::message::validate::validate_topic;
use raftmq_common::protocol::RemotingCommand;
use raftmq_common::protocol::ResponseCode;
use raftmq_common::protocol::body::JsonBody;
use raftmq_common::protocol::body::consume_queue_data::ConsumeQueueData;
use raftmq_common::protocol::body::consume_queue_data::QueryConsumeQueueResponseBody;
use raftmq_common::protocol::body::consume_stats::ConsumeStats;
use raftmq_common::protocol::body::consume_stats::ConsumeStatsList;
use raftmq_common::protocol::body::consume_stats::OffsetWrapper;
use raftmq_common::protocol::body::consume_time_span::QueryConsumeTimeSpanBody;
use raftmq_common::protocol::body::consume_time_span::QueueTimeSpan;
use raftmq_common::protocol::body::consumer_offset::DelayOffsetSerializeWrapper;
use raftmq_common::protocol::body::group_list::GroupList;
use raftmq_common::protocol::body::membership::AddNodeRequest;
use raftmq_common::protocol::body::membership::RemoveNodeRequest;
use raftmq_common::protocol::body::membership::TransferLeadershipRequest;
use raftmq_common::protocol::body::message_queue::MessageQueue;
use raftmq_common::protocol::body::properties_text;
use raftmq_common::protocol::body::register::KvTable;
use raftmq_common::protocol::body::register::TopicList;
use raftmq_common::protocol::body::subscription_group::SubscriptionGroupConfig;
use raftmq_common::protocol::body::topic::TopicConfig;
use raftmq_common::protocol::body::topic::TopicFilterType;
use raftmq_common::protocol::body::topic_stats::TopicOffset;
use raftmq_common::protocol::body::topic_stats::TopicStatsTable;
use raftmq_common::protocol::header::admin::CloneGroupOffsetRequestHeader;
use raftmq_common::protocol::header::admin::CreateTopicRequestHeader;
use raftmq_common::protocol::header::admin::DeleteSubscriptionGroupRequestHeader;
use raftmq_common::protocol::header::admin::DeleteTopicRequestHeader;
use raftmq_common::protocol::header::admin::GetBrokerConfigResponseHeader;
use raftmq_common::protocol::header::admin::GetConsumeStatsInBrokerHeader;
use raftmq_common::protocol::header::admin::GetConsumeStatsRequestHeader;
use raftmq_common::protocol::header::admin::GetTopicStatsInfoRequestHeader;
use raftmq_common::protocol::header::admin::QueryConsumeTimeSpanRequestHeader;
use raftmq_common::protocol::header::admin::QueryTopicConsumeByWhoRequestHeader;
use raftmq_common::protocol::header::admin::ViewBrokerStatsDataRequestHeader;
use raftmq_common::protocol::header::offset::GetMaxOffsetRequestHeader;
use raftmq_common::protocol::header::offset::GetMaxOffsetResponseHeader;
use raftmq_common::protocol::header::offset::GetMinOffsetRequestHeader;
use raftmq_common::protocol::header::offset::GetMinOffsetResponseHeader;
use raftmq_common::protocol::header::offset::QueryBrokerOffsetResponseHeader;
use raftmq_common::protocol::header::query::QueryConsumeQueueRequestHeader;

use raftmq_raft::Role;
use tokio::sync::Notify;

use crate::config::broker_config::BrokerConfig;
use crate::config::broker_config::ConfigError;
use crate::config::live_config::LiveConfig;
use crate::config::live_config::UpdateError;
use crate::observability::stats::BrokerTotals;
use crate::observability::stats::GroupGetStats;
use crate::observability::stats::StatsTable;
use crate::observability::stats::runtime_string;
use crate::processors::query::earliest_store_time;
use crate::processors::query::unit_store_time;
use crate::processors::refusal::header;
use crate::processors::refusal::refuse;
use crate::services::client_manager::ClientManager;
use crate::services::client_manager::SubscriptionMissing;
use crate::services::membership;
use crate::services::membership::GroupMembership;
use crate::services::offset_commit::offset_batches;
use crate::services::replica::Replica;
use crate::state::entry::BrokerCommand;
use crate::state::entry::OffsetCommit;
use crate::state::pull::CommitLogReader;
use crate::state::pull::MessageFilter;
use crate::state::store::MessageStore;
use crate::state::store::now_ms;

/// What the admin requests use: the store (topics, groups, offsets, queues), the replica's leader
/// view and proposals, membership changes, the boot and live config, connected clients' subscriptions
/// and the statistics they report. Built once by the router.
#[derive(Debug)]
pub struct AdminHandles {
    /// The config the broker booted with.
    pub config: Arc<BrokerConfig>,
    /// The config now, as UPDATE_BROKER_CONFIG changed it.
    pub live: Arc<LiveConfig>,
    /// Leader view and proposals.
    pub replica: Arc<Replica>,
    /// Topics, groups, offsets, ConsumeQueues and the CommitLog.
    pub store: Arc<MessageStore>,
    /// Connected clients' subscriptions.
    pub clients: Arc<ClientManager>,
    /// Adding and removing nodes, leadership transfer, the group's status.
    pub membership: Arc<GroupMembership>,
    /// Wakes NameServer registration (topics, permission or membership changed).
    pub register_now: Arc<Notify>,
    /// VIEW_BROKER_STATS_DATA.
    pub stats: Arc<StatsTable>,
    /// GET_CONSUME_STATS `consumeTps`.
    pub group_get_stats: Arc<GroupGetStats>,
    /// GET_BROKER_RUNTIME_INFO totals.
    pub broker_totals: Arc<BrokerTotals>,
    /// Retention rounds that delete expired CommitLog segments whatever the hour.
    pub manual_purge_rounds: Arc<AtomicU32>,
    /// Set by `Broker::shutdown`: config updates are refused.
    pub draining: Arc<AtomicBool>,
}

fn json<B: JsonBody>(value: &B) -> Result<RemotingCommand, RemotingCommand> {
    let body = value.encode().map_err(|e| refuse(ResponseCode::SystemError, e.to_string()))?;
    Ok(RemotingCommand::success().with_body(body))
}

fn body<B: JsonBody>(request: &RemotingCommand) -> Result<B, RemotingCommand> {
    B::decode(&request.body).map_err(|e| refuse(ResponseCode::SystemError, format!("the request body is invalid: {e}")))
}

/// RAFT_ADD_NODE: add a node (learner, catch-up, voter); answers a `MembershipReport`.
pub async fn add_node(ctx: &AdminHandles, request: &RemotingCommand) -> Result<RemotingCommand, RemotingCommand> {
    let req: AddNodeRequest = body(request)?;
    let report = membership::run_detached(&ctx.membership, move |ctx| async move {
        membership::add_node(&ctx, req.id, req.remoting_addr, req.raft_addr).await
    })
    .await
    .map_err(|e| e.to_response(&ctx.config.broker_name))?;
    json(&report)
}

/// RAFT_REMOVE_NODE: remove a voter or learner; answers a `MembershipReport`.
pub async fn remove_node(ctx: &AdminHandles, request: &RemotingCommand) -> Result<RemotingCommand, RemotingCommand> {
    let req: RemoveNodeRequest = body(request)?;
    let report =
        membership::run_detached(
            &ctx.membership,
            move |ctx| async move { membership::remove_node(&ctx, req.id).await },
        )
        .await
        .map_err(|e| e.to_response(&ctx.config.broker_name))?;
    json(&report)
}

/// RAFT_TRANSFER_LEADERSHIP: hand leadership to a voter; answers a `MembershipReport`.
pub async fn transfer_leadership(
    ctx: &AdminHandles,
    request: &RemotingCommand,
) -> Result<RemotingCommand, RemotingCommand> {
    // An empty body means "any caught-up voter".
    let req: TransferLeadershipRequest = if request.body.is_empty() { Default::default() } else { body(request)? };
    let report =
        membership::run_detached(
            &ctx.membership,
            move |ctx| async move { membership::transfer_leader(&ctx, req.to).await },
        )
        .await
        .map_err(|e| e.to_response(&ctx.config.broker_name))?;
    json(&report)
}

/// RAFT_GROUP_STATUS: this node's view of its group.
pub fn group_status(ctx: &AdminHandles) -> Result<RemotingCommand, RemotingCommand> {
    json(&membership::group_status(&ctx.membership))
}

/// RAFT_NODE_REMOVED: the leader removed this node from the group.
pub fn node_removed(ctx: &AdminHandles, request: &RemotingCommand) -> Result<RemotingCommand, RemotingCommand> {
    let req: RemoveNodeRequest = body(request)?;
    if req.id != ctx.replica.node_id() {
        return Err(refuse(
            ResponseCode::SystemError,
            format!("this is node {}, not node {}", ctx.replica.node_id(), req.id),
        ));
    }
    // Only the leader that removed this node sends it, and a leader never removes itself this way: a
    // notice to a leader, or from an older term, is stale or forged and would unroute a live group.
    let leadership = ctx.replica.leadership();
    if leadership.role == Role::Leader || req.term == 0 || req.term < leadership.term {
        return Err(refuse(
            ResponseCode::SystemError,
            format!(
                "refusing RAFT_NODE_REMOVED of term {} (this node: {:?} in term {})",
                req.term, leadership.role, leadership.term
            ),
        ));
    }
    tracing::warn!(id = req.id, "the leader removed this node from the raft group; it stops registering");
    ctx.replica.mark_removed();
    ctx.register_now.notify_one();
    Ok(RemotingCommand::success())
}

async fn replicate(ctx: &AdminHandles, command: BrokerCommand) -> Result<RemotingCommand, RemotingCommand> {
    ctx.replica.propose(&command).await.map_err(|e| e.to_response(&ctx.config.broker_name))?;
    ctx.register_now.notify_one();
    Ok(RemotingCommand::success())
}

/// UPDATE_AND_CREATE_TOPIC.
pub async fn update_and_create_topic(
    ctx: &AdminHandles,
    request: &RemotingCommand,
) -> Result<RemotingCommand, RemotingCommand> {
    let h: CreateTopicRequestHeader = header(request)?;
    validate_topic(&h.topic).map_err(|e| refuse(ResponseCode::SystemError, e.to_string()))?;
    if is_system_topic(&h.topic) {
        return Err(refuse(
            ResponseCode::SystemError,
            format!("The topic[{}] is conflict with system topic.", h.topic),
        ));
    }
    let queues = 1..=TOPIC_QUEUE_NUMS_MAX_COUNT;
    if !queues.contains(&h.read_queue_nums) || !queues.contains(&h.write_queue_nums) || !(0..=15).contains(&h.perm) {
        return Err(refuse(
            ResponseCode::SystemError,
            format!("queue numbers must be within 1..={TOPIC_QUEUE_NUMS_MAX_COUNT} and perm within 0..=15"),
        ));
    }
    let topic_filter_type = TopicFilterType::parse(&h.topic_filter_type).unwrap_or_default();
    let config = TopicConfig {
        topic_name: h.topic,
        read_queue_nums: h.read_queue_nums,
        write_queue_nums: h.write_queue_nums,
        perm: h.perm,
        topic_filter_type,
        topic_sys_flag: h.topic_sys_flag.unwrap_or(0),
        order: h.order,
    };
    replicate(ctx, BrokerCommand::TopicUpsert { proposed_at_ms: now_ms() as i64, config }).await
}

/// DELETE_TOPIC_IN_BROKER.
pub async fn delete_topic(ctx: &AdminHandles, request: &RemotingCommand) -> Result<RemotingCommand, RemotingCommand> {
    let h: DeleteTopicRequestHeader = header(request)?;
    // A group's %RETRY%/%DLQ% topic may be longer than a user topic; it can be deleted too.
    validate_stored_topic(&h.topic).map_err(|e| refuse(ResponseCode::SystemError, e.to_string()))?;
    if is_system_topic(&h.topic) {
        return Err(refuse(
            ResponseCode::SystemError,
            format!("The topic[{}] is conflict with system topic.", h.topic),
        ));
    }
    let topic = h.topic.clone();
    let answer = replicate(ctx, BrokerCommand::TopicDelete { proposed_at_ms: now_ms() as i64, topic: h.topic }).await?;
    ctx.stats.remove_topic(&topic);
    Ok(answer)
}

/// GET_ALL_TOPIC_CONFIG.
pub fn all_topic_config(ctx: &AdminHandles) -> Result<RemotingCommand, RemotingCommand> {
    let wrapper = ctx.store.metadata().topics.to_wrapper();
    json(&wrapper)
}

/// UPDATE_AND_CREATE_SUBSCRIPTIONGROUP (body: `SubscriptionGroupConfig`).
pub async fn update_and_create_group(
    ctx: &AdminHandles,
    request: &RemotingCommand,
) -> Result<RemotingCommand, RemotingCommand> {
    let config =
        SubscriptionGroupConfig::decode(&request.body).map_err(|e| refuse(ResponseCode::SystemError, e.to_string()))?;
    if !(0..=TOPIC_QUEUE_NUMS_MAX_COUNT).contains(&config.retry_queue_nums) || config.retry_max_times < 0 {
        return Err(refuse(
            ResponseCode::SystemError,
            format!("retryQueueNums must be within 0..={TOPIC_QUEUE_NUMS_MAX_COUNT} and retryMaxTimes not negative"),
        ));
    }
    // A new group must have a storable %RETRY% topic; an existing one can still be updated.
    if ctx.store.metadata().groups.get(&config.group_name).is_some() {
        validate_group(&config.group_name)
    } else {
        validate_consumer_group(&config.group_name)
    }
    .map_err(|e| refuse(ResponseCode::SystemError, e.to_string()))?;
    replicate(ctx, BrokerCommand::SubscriptionGroupUpsert { proposed_at_ms: now_ms() as i64, config }).await
}

/// DELETE_SUBSCRIPTIONGROUP.
pub async fn delete_group(ctx: &AdminHandles, request: &RemotingCommand) -> Result<RemotingCommand, RemotingCommand> {
    let h: DeleteSubscriptionGroupRequestHeader = header(request)?;
    validate_group(&h.group_name).map_err(|e| refuse(ResponseCode::SystemError, e.to_string()))?;
    let group = h.group_name.clone();
    let answer =
        replicate(ctx, BrokerCommand::SubscriptionGroupDelete { proposed_at_ms: now_ms() as i64, group: h.group_name })
            .await?;
    ctx.stats.remove_group(&group);
    // Java 4.9's `removeOffset`: the offsets go in an entry of their own after the group (a retry
    // after a failure here deletes both again, harmlessly).
    if h.remove_offset == Some(true) {
        replicate(ctx, BrokerCommand::GroupOffsetsDelete { proposed_at_ms: now_ms() as i64, group }).await?;
    }
    Ok(answer)
}

/// CLONE_GROUP_OFFSET (`mqadmin cloneGroupOffset`): the destination group gets the source group's
/// committed offsets of `topic`, as one replicated CONSUMER_OFFSETS entry. As in Java, a topic this
/// broker does not have is skipped, and so is one the source group's online clients do not
/// subscribe to, unless `offline`. Queues the source has no offset for keep the destination's
/// (Java replaces the destination's whole table of the topic).
///
/// With no topic named, Java copies nothing (it copies the empty topic name once per topic found);
/// here every topic the source has offsets for is copied, except its own `%RETRY%` and `%DLQ%`
/// topics, which belong to the source group.
pub async fn clone_group_offset(
    ctx: &AdminHandles,
    request: &RemotingCommand,
) -> Result<RemotingCommand, RemotingCommand> {
    let h: CloneGroupOffsetRequestHeader = header(request)?;
    validate_group(&h.src_group).map_err(|e| refuse(ResponseCode::SystemError, e.to_string()))?;
    // The destination gets offsets (and so may get consumers and a %RETRY% topic) from here on.
    validate_consumer_group(&h.dest_group).map_err(|e| refuse(ResponseCode::SystemError, e.to_string()))?;
    let offline = h.offline.unwrap_or(false);
    let commits: Vec<OffsetCommit> = {
        let meta = ctx.store.metadata();
        let topics: Vec<String> = match h.topic.as_deref().filter(|t| !t.is_empty()) {
            Some(topic) => vec![topic.to_owned()],
            None => meta
                .offsets
                .topics_of_group(&h.src_group)
                .into_iter()
                .filter(|t| !t.starts_with(RETRY_GROUP_TOPIC_PREFIX) && !t.starts_with(DLQ_GROUP_TOPIC_PREFIX))
                .map(str::to_owned)
                .collect(),
        };
        let mut commits = Vec::new();
        for topic in topics {
            let Some(config) = meta.topics.get(&topic) else {
                tracing::warn!(%topic, "cloneGroupOffset: no such topic here; skipped");
                continue;
            };
            // Only queues the topic has now, as an offset commit would be refused for any other.
            let queues = config.read_queue_nums.max(config.write_queue_nums);
            if !offline && matches!(ctx.clients.subscription(&h.src_group, &topic), Err(SubscriptionMissing::Topic)) {
                tracing::warn!(group = %h.src_group, %topic, "cloneGroupOffset: the online group does not subscribe to the topic; skipped");
                continue;
            }
            let Some(offsets) = meta.offsets.query_all(&topic, &h.src_group) else { continue };
            commits.extend(offsets.iter().filter(|(q, _)| (0..queues).contains(*q)).map(|(&queue_id, &offset)| {
                OffsetCommit { topic: topic.clone(), group: h.dest_group.clone(), queue_id, offset }
            }));
        }
        commits
    };
    tracing::info!(src = %h.src_group, dest = %h.dest_group, topic = ?h.topic, offsets = commits.len(), "CLONE_GROUP_OFFSET");
    // Entries of a bounded size, one after another: a group with many topics would otherwise make
    // one entry larger than a Raft entry may be (each batch is atomic, the whole clone is not, as in
    // Java).
    for batch in offset_batches(commits) {
        replicate(ctx, BrokerCommand::ConsumerOffsets(batch)).await?;
    }
    Ok(RemotingCommand::success())
}

/// GET_ALL_SUBSCRIPTIONGROUP_CONFIG.
pub fn all_group_config(ctx: &AdminHandles) -> Result<RemotingCommand, RemotingCommand> {
    let wrapper = ctx.store.metadata().groups.to_wrapper();
    json(&wrapper)
}

/// GET_ALL_CONSUMER_OFFSET.
pub fn all_consumer_offset(ctx: &AdminHandles) -> Result<RemotingCommand, RemotingCommand> {
    let wrapper = ctx.store.metadata().offsets.to_wrapper();
    json(&wrapper)
}

/// GET_ALL_DELAY_OFFSET: each delay level's delivery progress (replicated, so any replica knows it).
pub fn all_delay_offset(ctx: &AdminHandles) -> Result<RemotingCommand, RemotingCommand> {
    let offset_table =
        ctx.store.metadata().delay_offsets.iter().map(|(queue_id, offset)| (queue_id + 1, offset)).collect();
    json(&DelayOffsetSerializeWrapper { offset_table })
}

/// GET_SYSTEM_TOPIC_LIST_FROM_BROKER (after GET_SYSTEM_TOPIC_LIST_FROM_NS; the dashboard's topic
/// list): the topics `TopicConfigManager` creates on its own, as Java's `getSystemTopic()` lists them.
pub fn system_topic_list(ctx: &AdminHandles) -> Result<RemotingCommand, RemotingCommand> {
    let options = crate::state::topic_config::SystemTopicOptions::from(&*ctx.config);
    let topic_list = crate::state::topic_config::system_topics(&options).into_iter().map(|t| t.topic_name).collect();
    json(&TopicList { broker_addr: None, topic_list })
}

/// GET_TOPIC_STATS_INFO (`mqadmin topicStatus`, the dashboard's topic view): min and max offset
/// of each write queue and the store time of its last message (0 for an empty queue), from this
/// replica's applied state.
pub fn topic_stats_info(ctx: &AdminHandles, request: &RemotingCommand) -> Result<RemotingCommand, RemotingCommand> {
    let h: GetTopicStatsInfoRequestHeader = header(request)?;
    let Some(config) = ctx.store.metadata().topics.get(&h.topic).cloned() else {
        return Err(refuse(ResponseCode::TopicNotExist, format!("topic[{}] not exist", h.topic)));
    };
    let mut table = TopicStatsTable::default();
    // Bounded whatever an old log gave the topic: the answer is built in memory.
    let queues = config.write_queue_nums.clamp(0, TOPIC_QUEUE_NUMS_MAX_COUNT);
    for queue_id in 0..queues {
        let (min, max) = ctx.store.queue_offsets(&h.topic, queue_id);
        let last_update_timestamp = match max.checked_sub(1) {
            Some(last) => unit_store_time(&ctx.store, &h.topic, queue_id, last).unwrap_or(-1),
            None => 0,
        };
        let offset = TopicOffset {
            min_offset: i64::try_from(min).unwrap_or(i64::MAX),
            max_offset: i64::try_from(max).unwrap_or(i64::MAX),
            last_update_timestamp,
        };
        table.offset_table.insert(MessageQueue::new(&h.topic, &ctx.config.broker_name, queue_id), offset);
    }
    json(&table)
}

/// GET_CONSUME_STATS (`mqadmin consumerProgress`, the dashboard's lag view): for each read queue
/// of the group's topics (the one asked for, or every topic it has offsets on), the queue's max
/// offset, the group's committed offset and the store time of the last message it consumed; and
/// the group's pull rate over the last minute as `consumeTps`. A topic the online group does not
/// subscribe to is left out, as Java does.
pub fn consume_stats(ctx: &AdminHandles, request: &RemotingCommand) -> Result<RemotingCommand, RemotingCommand> {
    let h: GetConsumeStatsRequestHeader = header(request)?;
    let group = h.consumer_group.as_str();
    let topics: Vec<String> = match h.topic.as_deref().filter(|t| !t.is_empty()) {
        Some(topic) => vec![topic.to_owned()],
        None => ctx.store.metadata().offsets.topics_of_group(group).into_iter().map(str::to_owned).collect(),
    };
    let now_s = now_ms() / 1000;
    let mut stats = ConsumeStats::default();
    for topic in &topics {
        let Some(config) = ctx.store.metadata().topics.get(topic).cloned() else { continue };
        if matches!(ctx.clients.subscription(group, topic), Err(SubscriptionMissing::Topic)) {
            continue;
        }
        let committed = ctx.store.metadata().offsets.query_all(topic, group).cloned().unwrap_or_default();
        add_queue_progress(ctx, &mut stats, group, topic, config.read_queue_nums, &committed, now_s);
    }
    json(&stats)
}

/// QUERY_CONSUME_TIME_SPAN (the dashboard's consume time span): per write queue of the topic, the
/// store times of its first and last message and of the last message `group` consumed, and how long
/// the next unconsumed message has waited (Java's `AdminBrokerProcessor.queryConsumeTimeSpan`).
pub fn consume_time_span(ctx: &AdminHandles, request: &RemotingCommand) -> Result<RemotingCommand, RemotingCommand> {
    let h: QueryConsumeTimeSpanRequestHeader = header(request)?;
    let (queues, committed) = {
        let meta = ctx.store.metadata();
        let Some(config) = meta.topics.get(&h.topic) else {
            return Err(refuse(ResponseCode::TopicNotExist, format!("topic[{}] not exist", h.topic)));
        };
        (config.write_queue_nums, meta.offsets.query_all(&h.topic, &h.group).cloned().unwrap_or_default())
    };
    let now = i64::try_from(now_ms()).unwrap_or(i64::MAX);
    let time_at = |queue_id: i32, offset: i64| {
        u64::try_from(offset).ok().and_then(|o| unit_store_time(&ctx.store, &h.topic, queue_id, o)).unwrap_or(-1)
    };
    let mut body = QueryConsumeTimeSpanBody::default();
    for queue_id in 0..queues.max(0) {
        let (min, max) = ctx.store.queue_offsets(&h.topic, queue_id);
        let (min, max) = (i64::try_from(min).unwrap_or(i64::MAX), i64::try_from(max).unwrap_or(i64::MAX));
        let min_time_stamp = earliest_store_time(&ctx.store, &h.topic, queue_id);
        let consumer_offset = committed.get(&queue_id).copied().unwrap_or(-1);
        let consume_time_stamp =
            if consumer_offset > 0 { time_at(queue_id, consumer_offset - 1) } else { min_time_stamp };
        // Java measures from the next message; for a group with no offset it reads the store time of
        // offset -1 (-1) and reports now + 1. Here such a group, and one behind the retention
        // boundary, waits on the oldest message still stored; no message to wait on is 0.
        let delay_time = match time_at(queue_id, consumer_offset.max(min)) {
            next if consumer_offset < max && next > 0 => now.saturating_sub(next),
            _ => 0,
        };
        body.consume_time_span_set.push(QueueTimeSpan {
            consume_time_stamp,
            delay_time,
            max_time_stamp: time_at(queue_id, max - 1),
            message_queue: MessageQueue::new(&h.topic, &ctx.config.broker_name, queue_id),
            min_time_stamp,
        });
    }
    json(&body)
}

/// QUERY_CONSUME_QUEUE (`mqadmin queryCq`): up to `count` ConsumeQueue units of one queue from
/// `index` (at most [`QUERY_CONSUME_QUEUE_MAX_COUNT`], never past the queue's end), its bounds,
/// and with `consumerGroup` the group's subscription and whether each unit passes it at
/// ConsumeQueue level (a SQL92 filter needs the record: every unit passes here, as in Java). As
/// Java: a queue outside the topic's queues is SYSTEM_ERROR (one of the topic that stored nothing
/// yet is empty), an index outside the queue SUCCESS with no units and a remark saying so. (Java 4.9 encodes the body before filling it, so its answer is always empty;
/// this one is filled.)
pub fn query_consume_queue(ctx: &AdminHandles, request: &RemotingCommand) -> Result<RemotingCommand, RemotingCommand> {
    let h: QueryConsumeQueueRequestHeader = header(request)?;
    let topic = h.topic.unwrap_or_default();
    let queue_id = h.queue_id.unwrap_or(0);
    let index = h.index.unwrap_or(0);
    let count = h.count.unwrap_or(0).clamp(0, QUERY_CONSUME_QUEUE_MAX_COUNT);
    let mut body = QueryConsumeQueueResponseBody::default();
    let mut filter = None;
    if let Some(group) = h.consumer_group.filter(|g| !g.is_empty()) {
        match ctx.clients.subscription(&group, &topic) {
            Ok(sub) => {
                if sub.expression_type.eq_ignore_ascii_case("SQL92") {
                    body.filter_data = Some(sub.sub_string.clone());
                    filter = Some(MessageFilter::all());
                } else {
                    filter = Some(MessageFilter::from_subscription(&sub));
                }
                body.subscription_data = Some(sub);
            }
            Err(_) => body.filter_data = Some(format!("{group}@{topic} is not online!")),
        }
    }
    // A queue of a known topic that has stored nothing yet has no files: it is empty (Java creates
    // the ConsumeQueue on first lookup); any other queue does not exist.
    let known = ctx
        .store
        .metadata()
        .topics
        .get(&topic)
        .is_some_and(|t| (0..t.read_queue_nums.max(t.write_queue_nums)).contains(&queue_id));
    let units = {
        let queues = ctx.store.consume_queues();
        let queue = queues.get(&topic, queue_id);
        let (min, max) = match queue {
            Some(queue) => (queue.min_offset(), queue.max_offset()),
            None if known => (0, 0),
            None => return Err(refuse(ResponseCode::SystemError, format!("{queue_id}@{topic} is not exist!"))),
        };
        body.min_queue_index = i64::try_from(min).unwrap_or(i64::MAX);
        body.max_queue_index = i64::try_from(max).unwrap_or(i64::MAX);
        match (u64::try_from(index), queue) {
            (Ok(from), Some(queue)) if (min..max).contains(&from) => {
                let to = from.saturating_add(u64::try_from(count).unwrap_or(0)).min(max);
                (from..to).map(|o| queue.unit_at(o)).collect::<Vec<_>>()
            }
            _ => {
                let remark = format!("Index {index} of {queue_id}@{topic} is not exist!");
                let encoded = body.encode().map_err(|e| refuse(ResponseCode::SystemError, e.to_string()))?;
                return Ok(RemotingCommand::success().with_body(encoded).with_remark(remark));
            }
        }
    };
    body.queue_data = units
        .into_iter()
        .map(|unit| match unit {
            Some(u) => ConsumeQueueData {
                eval: filter.as_ref().is_some_and(|f| f.matches_code(u.tags_code)),
                physic_offset: u.phy_offset,
                physic_size: u.size,
                tags_code: u.tags_code,
                ..ConsumeQueueData::default()
            },
            // Below the minimum only through a purge racing this read.
            None => ConsumeQueueData { msg: Some("unit not readable".into()), ..ConsumeQueueData::default() },
        })
        .collect();
    json(&body)
}

/// DELETE_EXPIRED_COMMITLOG (`mqadmin deleteExpiredCommitLog`): the next
/// [`RETENTION_MANUAL_DELETE_ROUNDS_COUNT`] retention rounds delete expired CommitLog segments
/// whatever the `deleteWhen` hours (Java's `executeDeleteFilesManually`). Only a leader proposes a
/// purge; every replica follows it.
pub fn delete_expired_commit_log(ctx: &AdminHandles) -> Result<RemotingCommand, RemotingCommand> {
    ctx.manual_purge_rounds.store(RETENTION_MANUAL_DELETE_ROUNDS_COUNT, std::sync::atomic::Ordering::Release);
    tracing::info!(
        rounds = RETENTION_MANUAL_DELETE_ROUNDS_COUNT,
        "expired CommitLog segments deleted whatever the hour"
    );
    Ok(RemotingCommand::success())
}

/// CLEAN_EXPIRED_CONSUMEQUEUE (`mqadmin cleanExpiredCQ`): deletes the ConsumeQueue files and
/// IndexFiles wholly below the CommitLog's minimum now (a purge deletes them as it applies; this
/// retries any a failed deletion left). A deleted topic's queues already went with its deletion.
pub fn clean_expired_consume_queue(ctx: &AdminHandles) -> Result<RemotingCommand, RemotingCommand> {
    let min_pos = ctx.store.retention_boundary().map_or(0, |b| b.next_pos);
    let (cq_files, index_files) = ctx.store.delete_files_below(min_pos);
    tracing::info!(min_pos, cq_files, index_files, "expired ConsumeQueue and index files cleaned");
    Ok(RemotingCommand::success())
}

/// GET_BROKER_CONSUME_STATS (`mqadmin brokerConsumeStats`): for every subscription group, one
/// `ConsumeStats` per topic it has offsets on (write queues, as Java counts here), with the total
/// lag. `isOrder` keeps only ordered topics. As in GET_CONSUME_STATS, a topic the online group does
/// not subscribe to is left out.
pub fn broker_consume_stats(ctx: &AdminHandles, request: &RemotingCommand) -> Result<RemotingCommand, RemotingCommand> {
    let h: GetConsumeStatsInBrokerHeader = header(request)?;
    let now_s = now_ms() / 1000;
    // One applied state for the whole answer: groups, topics and committed offsets read under one
    // guard; the queues' ends and store times after it is dropped.
    let plan: Vec<(String, Vec<QueuesToReport>)> = {
        let meta = ctx.store.metadata();
        meta.groups
            .iter()
            .map(|g| {
                let group = g.group_name.clone();
                let topics = meta
                    .offsets
                    .topics_of_group(&group)
                    .into_iter()
                    .filter_map(|topic| {
                        let config = meta.topics.get(topic)?;
                        if h.is_order && !config.order {
                            return None;
                        }
                        if matches!(ctx.clients.subscription(&group, topic), Err(SubscriptionMissing::Topic)) {
                            return None;
                        }
                        let committed = meta.offsets.query_all(topic, &group).cloned().unwrap_or_default();
                        Some(QueuesToReport { topic: topic.to_owned(), queues: config.write_queue_nums, committed })
                    })
                    .collect();
                (group, topics)
            })
            .collect()
    };
    let mut list = ConsumeStatsList { broker_addr: ctx.config.broker_addr(), ..ConsumeStatsList::default() };
    for (group, topics) in plan {
        let mut per_topic = Vec::with_capacity(topics.len());
        for QueuesToReport { topic, queues, committed } in topics {
            let mut stats = ConsumeStats::default();
            add_queue_progress(ctx, &mut stats, &group, &topic, queues, &committed, now_s);
            list.total_diff = list.total_diff.saturating_add(stats.compute_total_diff());
            per_topic.push(stats);
        }
        list.consume_stats_list.push(BTreeMap::from([(group, per_topic)]));
    }
    json(&list)
}

/// One topic of one group in GET_BROKER_CONSUME_STATS, read from the applied state.
struct QueuesToReport {
    topic: String,
    queues: i32,
    committed: BTreeMap<i32, i64>,
}

/// Adds `queues` queues of `topic` to `stats`: each queue's max offset, `group`'s `committed` offset
/// and the store time of the last message it consumed; and the group's pull rate of the topic.
fn add_queue_progress(
    ctx: &AdminHandles,
    stats: &mut ConsumeStats,
    group: &str,
    topic: &str,
    queues: i32,
    committed: &BTreeMap<i32, i64>,
    now_s: u64,
) {
    for queue_id in 0..queues.max(0) {
        let (_, max) = ctx.store.queue_offsets(topic, queue_id);
        let consumer_offset = committed.get(&queue_id).copied().unwrap_or(0).max(0);
        let last_timestamp = u64::try_from(consumer_offset - 1)
            .ok()
            .and_then(|last| unit_store_time(&ctx.store, topic, queue_id, last))
            .filter(|t| *t > 0)
            .unwrap_or(0);
        let wrapper =
            OffsetWrapper { broker_offset: i64::try_from(max).unwrap_or(i64::MAX), consumer_offset, last_timestamp };
        stats.offset_table.insert(MessageQueue::new(topic, &ctx.config.broker_name, queue_id), wrapper);
    }
    stats.consume_tps += ctx.group_get_stats.tps(topic, group, now_s);
}

/// GET_BROKER_RUNTIME_INFO (`mqadmin brokerStatus`, the dashboard's cluster view): the
/// `KVTable` keys RocketMQ 4.9 reports that this broker can state truthfully. Message counts are of
/// records this replica stored as leader (sends, send-backs, delayed deliveries, transaction
/// records: Java's `putMessage` count) and messages its pulls returned, since it started; the Raft
/// keys say where it stands in its group.
pub fn broker_runtime_info(ctx: &AdminHandles) -> Result<RemotingCommand, RemotingCommand> {
    let now = now_ms();
    let totals = ctx.broker_totals.view(now);
    let mut table: BTreeMap<String, String> = totals.entries.into_iter().map(|(k, v)| (k.to_owned(), v)).collect();
    let mut put = |k: &str, v: String| {
        table.insert(k.to_owned(), v);
    };
    put("brokerVersionDesc", raftmq_common::protocol::code::version::V4_9_8_DESC.to_owned());
    put("brokerVersion", raftmq_common::protocol::code::version::V4_9_8.to_string());
    put("bootTimestamp", ctx.broker_totals.boot_ms().to_string());
    put("runtime", runtime_string(now.saturating_sub(ctx.broker_totals.boot_ms())));
    put("commitLogMaxOffset", ctx.store.commit_log().max_offset().to_string());
    if let Some(ratio) = crate::observability::metrics::disk_used_ratio(&ctx.config.store_path_root_dir) {
        put("commitLogDiskRatio", ratio.to_string());
    }
    let status = ctx.replica.node().status();
    put("raftRole", format!("{:?}", status.leadership.role).to_uppercase());
    put("raftTerm", status.leadership.term.to_string());
    if let Some(index) = status.last_log_index {
        put("raftLastLogIndex", index.to_string());
    }
    if let Some(applied) = status.applied {
        put("raftAppliedIndex", applied.index.to_string());
    }
    // Java's ScheduleMessageService keys, one per delay level: "delivered,stored" offsets of its
    // queue, whose difference still waits (timer messages between hops included).
    for b in ctx.store.level_backlogs() {
        put(&format!("scheduleMessageOffset_{}", b.level), format!("{},{}", b.delivered, b.stored));
    }
    json(&KvTable { table })
}

/// GET_BROKER_CONFIG (`mqadmin getBrokerConfig`): this replica's config as it stands now, as Java
/// properties text, secrets masked, with the Java keys a Raft group decides for itself (see
/// [`java_role_keys`]). Its version counts the runtime updates since boot (0 at boot, stamped
/// with the boot time).
pub fn broker_config(ctx: &AdminHandles) -> Result<RemotingCommand, RemotingCommand> {
    let now = ctx.live.snapshot();
    let mut entries = now
        .config
        .to_properties()
        .map_err(|e| refuse(ResponseCode::SystemError, format!("the config cannot be written out: {e}")))?;
    let follower_id = crate::services::namesrv_registration::follower_broker_id(ctx.replica.node_id());
    let broker_id = crate::services::namesrv_registration::registration(&ctx.replica).map_or(follower_id, |(id, _)| id);
    for (key, value) in java_role_keys(broker_id) {
        entries.entry(key.to_owned()).or_insert(value);
    }
    let version = serde_json::to_string(&now.version).map_err(|e| refuse(ResponseCode::SystemError, e.to_string()))?;
    Ok(RemotingCommand::success()
        .with_header(&GetBrokerConfigResponseHeader { version })
        .with_body(properties_text::encode(&entries)))
}

/// UPDATE_BROKER_CONFIG (`mqadmin updateBrokerConfig`): the body is Java properties text of the keys
/// to change. All apply or none: a key that cannot change while the broker runs is refused with
/// NO_PERMISSION (as Java refuses its black-listed keys), a bad value with SYSTEM_ERROR, both naming
/// the key. The change is made durable, then takes effect at once on this replica
/// ([`LiveConfig::update_and_announce`]).
pub fn update_broker_config(ctx: &AdminHandles, request: &RemotingCommand) -> Result<RemotingCommand, RemotingCommand> {
    if ctx.draining.load(std::sync::atomic::Ordering::Acquire) {
        return Err(refuse(ResponseCode::ServiceNotAvailable, "the broker is shutting down"));
    }
    let text = std::str::from_utf8(&request.body)
        .map_err(|_| refuse(ResponseCode::SystemError, "the config update is not UTF-8 properties text"))?;
    // An empty body changes nothing and succeeds, as in Java.
    let updates = properties_text::decode(text);
    ctx.live.update_and_announce(&updates, now_ms(), &ctx.register_now).map(drop).map_err(|e| {
        let code = match &e {
            UpdateError::Config(ConfigError::NotRuntimeUpdatable(_)) => ResponseCode::NoPermission,
            _ => ResponseCode::SystemError,
        };
        refuse(code, e.to_string())
    })?;
    Ok(RemotingCommand::success())
}

/// Keys of Java's `BrokerConfig` / `MessageStoreConfig` that a Raft group has no setting for, as
/// they hold here: the id and role this replica registers with (leader 0, SYNC_MASTER), every send
/// fsynced before SEND_OK (`slaveReadEnable` is a key of ours). `mqadmin exportConfigs` reads them and fails
/// on a missing one.
fn java_role_keys(broker_id: i64) -> [(&'static str, String); 5] {
    let role = if broker_id == 0 { "SYNC_MASTER" } else { "SLAVE" };
    [
        ("brokerId", broker_id.to_string()),
        ("brokerRole", role.to_owned()),
        ("flushDiskType", "SYNC_FLUSH".to_owned()),
        ("filterServerNums", "0".to_owned()),
        ("useTLS", "false".to_owned()),
    ]
}

/// QUERY_TOPIC_CONSUME_BY_WHO (`queryTopicConsumeByWho`; the dashboard's consumers of a topic):
/// groups with a connected client subscribed to the topic, and groups with a committed offset in
/// it (replicated, so every replica knows them).
pub fn topic_consume_by_who(ctx: &AdminHandles, request: &RemotingCommand) -> Result<RemotingCommand, RemotingCommand> {
    let h: QueryTopicConsumeByWhoRequestHeader = header(request)?;
    let mut group_list: std::collections::BTreeSet<String> =
        ctx.clients.groups_subscribing(&h.topic).into_iter().collect();
    group_list.extend(ctx.store.metadata().offsets.groups_of_topic(&h.topic).into_iter().map(str::to_owned));
    json(&GroupList { group_list })
}

/// VIEW_BROKER_STATS_DATA (`mqadmin statsAll`, the dashboard's charts): one statistic of one key
/// over the last minute, hour and day; one never counted answers as Java's does.
pub fn view_broker_stats_data(
    ctx: &AdminHandles,
    request: &RemotingCommand,
) -> Result<RemotingCommand, RemotingCommand> {
    let h: ViewBrokerStatsDataRequestHeader = header(request)?;
    match ctx.stats.view(&h.stats_name, &h.stats_key, ctx.stats.now_ms()) {
        Some(data) => json(&data),
        None => {
            Err(refuse(ResponseCode::SystemError, format!("The stats <{}> <{}> not exist", h.stats_name, h.stats_key)))
        }
    }
}

/// GET_MAX_OFFSET.
pub fn max_offset(ctx: &AdminHandles, request: &RemotingCommand) -> Result<RemotingCommand, RemotingCommand> {
    let h: GetMaxOffsetRequestHeader = header(request)?;
    let (_, max) = ctx.store.queue_offsets(&h.topic, h.queue_id);
    let offset = i64::try_from(max).unwrap_or(i64::MAX);
    Ok(RemotingCommand::success().with_header(&GetMaxOffsetResponseHeader { offset }))
}

/// QUERY_BROKER_OFFSET: this replica's CommitLog bounds, read like GET_MAX_OFFSET on any replica.
/// The end is the applied one (what pulls may read), not the log's unreplicated tail.
pub fn broker_offset(ctx: &AdminHandles) -> Result<RemotingCommand, RemotingCommand> {
    let offset = ctx.store.commit_log().max_offset();
    let min = ctx.store.retention_boundary().map_or(0, |b| b.next_pos);
    let min_offset = i64::try_from(min).unwrap_or(i64::MAX).min(offset);
    Ok(RemotingCommand::success().with_header(&QueryBrokerOffsetResponseHeader { offset, min_offset }))
}

/// GET_MIN_OFFSET.
pub fn min_offset(ctx: &AdminHandles, request: &RemotingCommand) -> Result<RemotingCommand, RemotingCommand> {
    let h: GetMinOffsetRequestHeader = header(request)?;
    let (min, _) = ctx.store.queue_offsets(&h.topic, h.queue_id);
    let offset = i64::try_from(min).unwrap_or(i64::MAX);
    Ok(RemotingCommand::success().with_header(&GetMinOffsetResponseHeader { offset }))
}
