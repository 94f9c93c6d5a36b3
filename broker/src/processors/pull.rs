//! PULL_MESSAGE (11): RocketMQ's `PullMessageProcessor` over the replicated store, with long polling.
//!
//! ```text
//! header ─▶ broker/group/topic/queue checks ─▶ filter (request subscription | HEART_BEAT's)
//!   ─▶ commitOffset piggyback (leader only, replicated) ─▶ get_message ─▶ pull_outcome
//!   ─▶ suspend? ─▶ MessageStore::suspend_pull ─▶ woken by apply (or deadline) ─▶ run again, no suspend
//! ```
//!
//! Every replica serves what it has applied (committed data only). A follower keeps the client's
//! offset where a leader would correct it (`offset_check`), because a follower that is merely behind
//! must never move a consumer backwards; it never stores the piggybacked offset (only the leader
//! proposes it, as a Java slave ignores it).

use raftmq_common::filter::EXPRESSION_TYPE_SQL92;
use std::sync::Arc;
use std::time::Duration;

use bytes::BytesMut;
use raftmq_common::limits::PULL_REQUEST_HEADER_MAX_BYTES;
use raftmq_common::message::validate::validate_consumer_group;
use raftmq_common::message::validate::validate_stored_topic;
use raftmq_common::protocol::RemotingCommand;
use raftmq_common::protocol::ResponseCode;
use raftmq_common::protocol::body::topic::perm;
use raftmq_common::protocol::header::pull::PullMessageRequestHeader;
use raftmq_common::protocol::header::pull::PullMessageResponseHeader;
use raftmq_common::protocol::header::pull::pull_sys_flag;
use tracing::debug;
use tracing::warn;

use crate::config::broker_config::BrokerConfig;
use crate::config::live_config::LiveConfig;
use crate::observability::metrics::BrokerMetrics;
use crate::observability::stats::BrokerTotals;
use crate::observability::stats::GroupGetStats;
use crate::observability::stats::StatsTable;
use crate::processors::refusal::refuse;
use crate::services::client_manager::ClientManager;
use crate::services::client_manager::SubscriptionMissing;
use crate::services::offset_commit::OffsetCommitter;
use crate::services::replica::Replica;
use crate::state::entry::BrokerCommand;
use crate::state::entry::OffsetCommit;
use crate::state::pull::GetMessageRequest;
use crate::state::pull::MessageFilter;
use crate::state::pull::OffsetCheck;
use crate::state::pull::PullLimits;
use crate::state::pull::PullOutcome;
use crate::state::pull::PullPolicy;
use crate::state::pull::SlaveRead;
use crate::state::pull::SqlFilterCache;
use crate::state::pull::build_subscription;
use crate::state::pull::get_message;
use crate::state::pull::pull_outcome;
use crate::state::pull::should_store_offset;
use crate::state::store::MessageStore;
use crate::state::store::now_ms;
use crate::state::subscription_group::GroupLookup;

/// What a pull uses: the store's read side, the replica's leader view, the consumers' subscriptions,
/// the offset committer (piggybacked offsets) and the counters a served pull adds to. Built once by
/// the router.
#[derive(Debug)]
pub struct PullHandles {
    /// The config the broker booted with (its address in refusals).
    pub config: Arc<BrokerConfig>,
    /// The runtime keys (permission, long polling, property filters).
    pub live: Arc<LiveConfig>,
    /// Leader view: who may move or store a consumer's offset.
    pub replica: Arc<Replica>,
    /// Topics, groups, ConsumeQueues and the committed CommitLog.
    pub store: Arc<MessageStore>,
    /// The subscriptions consumers sent with HEART_BEAT.
    pub clients: Arc<ClientManager>,
    /// Replication of piggybacked consumer offsets.
    pub offsets: OffsetCommitter,
    /// Transfer limits of one pull.
    pub pull_limits: PullLimits,
    /// SQL92 subscriptions compiled once for all pulls.
    pub sql_filters: Arc<SqlFilterCache>,
    /// Messages out, by topic and group.
    pub metrics: Arc<BrokerMetrics>,
    /// GET_CONSUME_STATS `consumeTps`.
    pub group_get_stats: Arc<GroupGetStats>,
    /// GET_BROKER_RUNTIME_INFO totals.
    pub broker_totals: Arc<BrokerTotals>,
    /// VIEW_BROKER_STATS_DATA.
    pub stats: Arc<StatsTable>,
}

/// Handles one pull request (may wait up to its suspend timeout).
pub async fn process_pull(ctx: &PullHandles, request: &RemotingCommand) -> RemotingCommand {
    match pull(ctx, request).await {
        Ok(r) | Err(r) => r,
    }
}

fn check_group(ctx: &PullHandles, group: &str) -> Result<(), RemotingCommand> {
    // Before a lookup that may create it: a group name is replicated metadata.
    validate_consumer_group(group).map_err(|e| refuse(e.response_code(), e.to_string()))?;
    let create =
        match ctx.store.metadata().groups.find_or_create(group, ctx.live.read(|c| c.auto_create_subscription_group)) {
            GroupLookup::Found(config) if !config.consume_enable => {
                return Err(refuse(ResponseCode::NoPermission, format!("subscription group no permission, {group}")));
            }
            GroupLookup::Found(_) => None,
            GroupLookup::NotExist => {
                return Err(refuse(
                    ResponseCode::SubscriptionGroupNotExist,
                    format!("subscription group [{group}] does not exist"),
                ));
            }
            GroupLookup::Create(config) => Some(config),
        };
    // Auto-creation is replicated; only a ready leader proposes it, and the pull does not wait for it.
    if let Some(config) = create
        && ctx.replica.ready_term().is_some()
    {
        let replica = Arc::clone(&ctx.replica);
        tokio::spawn(async move {
            let command = BrokerCommand::SubscriptionGroupUpsert { proposed_at_ms: now_ms() as i64, config };
            if let Err(e) = replica.propose(&command).await {
                debug!(error = %e, "auto-creating a subscription group failed");
            }
        });
    }
    Ok(())
}

/// A SQL92 subscription's filter, when `enablePropertyFilter` allows one (RocketMQ's remarks).
pub fn sql_filter(
    live: &LiveConfig,
    sql_filters: &SqlFilterCache,
    expression: &str,
) -> Result<MessageFilter, RemotingCommand> {
    if !live.read(|c| c.enable_property_filter) {
        return Err(refuse(
            ResponseCode::SystemError,
            format!("The broker does not support consumer to filter message by {EXPRESSION_TYPE_SQL92}"),
        ));
    }
    sql_filters.get_or_compile(expression).map(MessageFilter::sql_shared).map_err(|e| {
        refuse(
            ResponseCode::SubscriptionParseFailed,
            format!("parse the consumer's subscription[{expression}] failed: {e}"),
        )
    })
}

/// Whether an `expressionType` names SQL92, exactly as RocketMQ compares it (absent or anything
/// else is filtered as TAG).
pub fn is_sql92(expression_type: Option<&str>) -> bool {
    expression_type == Some(EXPRESSION_TYPE_SQL92)
}

fn filter_of(ctx: &PullHandles, h: &PullMessageRequestHeader) -> Result<MessageFilter, RemotingCommand> {
    let sub = if pull_sys_flag::has_subscription(h.sys_flag) {
        if is_sql92(h.expression_type.as_deref()) {
            return sql_filter(&ctx.live, &ctx.sql_filters, h.subscription.as_deref().unwrap_or(""));
        }
        build_subscription(&h.topic, h.subscription.as_deref().unwrap_or("*")).map_err(|e| {
            refuse(ResponseCode::SubscriptionParseFailed, format!("parse the consumer's subscription failed: {e}"))
        })?
    } else {
        let sub = ctx.clients.subscription(&h.consumer_group, &h.topic).map_err(|missing| match missing {
            SubscriptionMissing::Group => refuse(
                ResponseCode::SubscriptionNotExist,
                format!("the consumer's group info not exist: {}", h.consumer_group),
            ),
            SubscriptionMissing::Topic => refuse(
                ResponseCode::SubscriptionNotExist,
                format!("the consumer's subscription not exist: {}", h.topic),
            ),
        })?;
        if sub.sub_version < h.sub_version {
            return Err(refuse(ResponseCode::SubscriptionNotLatest, "the consumer's subscription not latest"));
        }
        if is_sql92(Some(&sub.expression_type)) {
            return sql_filter(&ctx.live, &ctx.sql_filters, &sub.sub_string);
        }
        sub
    };
    Ok(MessageFilter::from_subscription(&sub))
}

async fn pull(ctx: &PullHandles, request: &RemotingCommand) -> Result<RemotingCommand, RemotingCommand> {
    check_frame_size(request)?;
    let h: PullMessageRequestHeader = request
        .decode_header()
        .map_err(|e| refuse(ResponseCode::SystemError, format!("the pull request header is invalid: {e}")))?;
    if !perm::is_readable(ctx.live.read(|c| c.broker_permission)) {
        return Err(refuse(
            ResponseCode::NoPermission,
            format!("the broker[{}] pulling message is forbidden", ctx.config.broker_addr()),
        ));
    }
    // A consumer group's own %RETRY% topic may be longer than the 127 a client may create.
    validate_stored_topic(&h.topic).map_err(|e| refuse(e.response_code(), e.to_string()))?;
    check_group(ctx, &h.consumer_group)?;
    let read_queue_nums = match ctx.store.metadata().topics.get(&h.topic) {
        None => {
            return Err(refuse(
                ResponseCode::TopicNotExist,
                format!("topic[{}] not exist, apply first please!", h.topic),
            ));
        }
        Some(c) if !perm::is_readable(c.perm) => {
            return Err(refuse(
                ResponseCode::NoPermission,
                format!("the topic[{}] pulling message is forbidden", h.topic),
            ));
        }
        Some(c) => c.read_queue_nums,
    };
    if h.queue_id < 0 || h.queue_id >= read_queue_nums {
        return Err(refuse(
            ResponseCode::SystemError,
            format!(
                "queueId[{}] is illegal, topic:[{}] topicConfig.readQueueNums:[{read_queue_nums}] consumer:[{}]",
                h.queue_id,
                h.topic,
                request_peer(request)
            ),
        ));
    }
    let filter = filter_of(ctx, &h)?;
    let is_leader = ctx.replica.ready_term().is_some();
    if should_store_offset(true, h.sys_flag, is_leader) {
        let commit = OffsetCommit {
            topic: h.topic.clone(),
            group: h.consumer_group.clone(),
            queue_id: h.queue_id,
            offset: h.commit_offset,
        };
        if let Err(e) = ctx.offsets.commit_forward(commit) {
            debug!(error = %e, "piggybacked consumer offset not queued");
        }
    }
    let (mut response, outcome) = run(ctx, &h, &filter, true);
    let Some(suspend_ms) = outcome.suspend_ms else { return Ok(response) };
    let deadline = now_ms().saturating_add(suspend_ms);
    match ctx.store.suspend_pull(&h.topic, h.queue_id, h.queue_offset, filter.clone(), deadline) {
        Ok(Some((id, woken))) => {
            if tokio::time::timeout(Duration::from_millis(suspend_ms), woken).await.is_err() {
                ctx.store.cancel_pull(id);
            }
        }
        Ok(None) => {}
        // Too many suspended pulls: answer now (PULL_NOT_FOUND), the client pulls again.
        Err(_) => return Ok(response),
    }
    (response, _) = run(ctx, &h, &filter, false);
    Ok(response)
}

/// A pull may be parked for its suspend timeout with its request: it carries no body (RocketMQ's
/// clients send none) and at most [`PULL_REQUEST_HEADER_MAX_BYTES`] of header fields, so parked
/// pulls hold little memory however a peer builds its frames.
fn check_frame_size(request: &RemotingCommand) -> Result<(), RemotingCommand> {
    if !request.body.is_empty() {
        return Err(refuse(
            ResponseCode::SystemError,
            format!("PULL_MESSAGE carries no body; this one has {} bytes", request.body.len()),
        ));
    }
    let fields = request.ext_fields.iter().map(|(k, v)| k.len() + v.len()).sum::<usize>();
    let header = fields + request.remark.as_ref().map_or(0, String::len);
    if header > PULL_REQUEST_HEADER_MAX_BYTES {
        return Err(refuse(
            ResponseCode::SystemError,
            format!("the pull request header has {header} bytes, more than {PULL_REQUEST_HEADER_MAX_BYTES}"),
        ));
    }
    Ok(())
}

fn request_peer(request: &RemotingCommand) -> String {
    request.ext_fields.get("clientId").map(|c| c.to_string()).unwrap_or_default()
}

fn run(
    ctx: &PullHandles,
    h: &PullMessageRequestHeader,
    filter: &MessageFilter,
    allow_suspend: bool,
) -> (RemotingCommand, PullOutcome) {
    // Only the group's real leader moves a consumer's offset (RocketMQ: only the master), and only
    // forward unless its apply covers its whole log. A leader cut off in a minority still thinks it is
    // ready (hence the lease), and a leader whose apply trails its log has queue ends older than what
    // a follower may already have served: moving back to them rewinds consumers that read past them
    // (redelivery, jepsen seeds 6014/7002/7004). Otherwise the consumer keeps its offset and retries.
    let node = ctx.replica.node();
    let offset_check = if ctx.replica.ready_term().is_none() || !node.leader_lease_valid() {
        OffsetCheck::Keep
    } else if node.apply_caught_up() {
        OffsetCheck::All
    } else {
        OffsetCheck::ForwardOnly
    };
    let result = {
        let queues = ctx.store.consume_queues();
        let req = GetMessageRequest { offset: h.queue_offset, max_msg_nums: h.max_msg_nums, filter, offset_check };
        get_message(queues.get(&h.topic, h.queue_id), &req, ctx.store.commit_log(), &ctx.pull_limits)
    };
    let (long_polling_enable, short_polling, slave_read_enable) =
        ctx.live.read(|c| (c.long_polling_enable, c.short_polling_time_mills, c.slave_read_enable));
    let slave_read = slave_read_enable.then(|| {
        let meta = ctx.store.metadata();
        let group = meta.groups.get(&h.consumer_group);
        SlaveRead {
            when_slow: group.map_or(1, |g| g.which_broker_when_consume_slowly),
            otherwise: group.map_or(0, |g| g.broker_id),
        }
    });
    let policy = PullPolicy {
        broker_allow_suspend: allow_suspend,
        long_polling_enable,
        short_polling_ms: u64::try_from(short_polling.as_millis()).unwrap_or(u64::MAX),
        offset_check,
        slave_read,
    };
    let outcome = pull_outcome(&result, h.queue_offset, h.sys_flag, h.suspend_timeout_millis, &policy);
    if outcome.offset_moved_event && outcome.next_begin_offset < h.queue_offset {
        // A move backwards re-delivers what the consumer already read: rare by design (the queue
        // ends below an offset the consumer reached), so everything that explains it is logged.
        let status = node.status();
        let committed = ctx.store.metadata().offsets.query(&h.topic, &h.consumer_group, h.queue_id);
        warn!(topic = %h.topic, queue_id = h.queue_id, group = %h.consumer_group,
            requested = h.queue_offset, next = outcome.next_begin_offset, min = result.min_offset,
            max = result.max_offset, status = ?result.status, ?offset_check, group_committed = ?committed,
            term = status.leadership.term, log_end = ?status.last_log_index, committed_index = ?status.committed,
            applied = ?status.applied, store_applied = ?*ctx.store.applied().borrow(),
            "consumer offset moved backwards");
    } else if outcome.offset_moved_event {
        debug!(topic = %h.topic, queue_id = h.queue_id, group = %h.consumer_group, requested = h.queue_offset,
            next = outcome.next_begin_offset, "consumer offset moved");
    }
    let header = PullMessageResponseHeader {
        suggest_which_broker_id: outcome.suggest_which_broker_id,
        next_begin_offset: outcome.next_begin_offset,
        min_offset: outcome.min_offset,
        max_offset: outcome.max_offset,
    };
    let mut response = RemotingCommand::response(outcome.code, Some(outcome.remark.to_owned())).with_header(&header);
    if outcome.code == ResponseCode::Success {
        ctx.metrics.on_pull(&h.topic, &h.consumer_group, result.messages.len());
        let now = now_ms();
        ctx.group_get_stats.on_pull(&h.topic, &h.consumer_group, result.messages.len() as u64, now / 1000);
        ctx.broker_totals.on_get(result.messages.len() as u64, now);
        let stats_now = ctx.stats.now_ms();
        ctx.stats.on_get(
            &h.topic,
            &h.consumer_group,
            result.messages.len() as u64,
            result.buffer_total_size,
            stats_now,
        );
        let mut body = BytesMut::with_capacity(usize::try_from(result.buffer_total_size).unwrap_or(0));
        for m in &result.messages {
            body.extend_from_slice(m);
        }
        response = response.with_body(body.freeze());
    }
    (response, outcome)
}
