//! Client requests (RocketMQ's `ClientManageProcessor` and `ConsumerManageProcessor`): HEART_BEAT,
//! UNREGISTER_CLIENT, GET_CONSUMER_LIST_BY_GROUP, QUERY_CONSUMER_OFFSET, UPDATE_CONSUMER_OFFSET,
//! LOCK_BATCH_MQ / UNLOCK_BATCH_MQ, NOTIFY_CONSUMER_IDS_CHANGED sent back on clients' connections,
//! the connection lists, GET_CONSUMER_RUNNING_INFO and CONSUME_MESSAGE_DIRECTLY relayed to the
//! client they name, and INVOKE_BROKER_TO_GET_CONSUMER_STATUS, asked of every client of the group
//! (GET_CONSUMER_STATUS_FROM_CLIENT).
//!
//! Offsets: a query is answered by the ready leader (a follower relays it); an update is stored only
//! through Raft — the leader batches it ([`crate::services::offset_commit`]), a follower refuses it with
//! SERVICE_NOT_AVAILABLE and the leader hint and never relays it: an update is stored as sent (a
//! reset may move an offset back), so a relayed one that waited in the follower→leader connection
//! through a partition would land after newer commits and rewind the group (jepsen seed 7000). A
//! late relayed query is harmless.

use raftmq_common::protocol::body::heartbeat::CheckClientRequestBody;
use raftmq_common::protocol::command::FLAG_RELAYED;

use std::sync::Arc;
use std::time::Duration;

use raftmq_common::limits::BROKER_CLIENT_CALL_TIMEOUT_MS;
use raftmq_common::limits::HEARTBEAT_REFUSAL_REMARK_MAX_BYTES;
use raftmq_common::limits::RPC_TIMEOUT_DEFAULT_MS;
use raftmq_common::message::OffsetMsgId;
use raftmq_common::message::validate::retry_topic;
use raftmq_common::message::validate::validate_consumer_group;
use raftmq_common::message::validate::validate_stored_topic;
use raftmq_common::protocol::RemotingCommand;
use raftmq_common::protocol::RequestCode;
use raftmq_common::protocol::ResponseCode;
use raftmq_common::protocol::body::JsonBody;
use raftmq_common::protocol::body::connection::ConsumerConnection;
use raftmq_common::protocol::body::connection::ProducerConnection;
use raftmq_common::protocol::body::consumer_list::ConsumerListBody;
use raftmq_common::protocol::body::consumer_status::GetConsumerStatusBody;
use raftmq_common::protocol::body::heartbeat::HeartbeatData;
use raftmq_common::protocol::body::lock_batch::LockBatchRequestBody;
use raftmq_common::protocol::body::lock_batch::LockBatchResponseBody;
use raftmq_common::protocol::body::lock_batch::UnlockBatchRequestBody;
use raftmq_common::protocol::body::message_queue::MessageQueue;
use raftmq_common::protocol::header::admin::GetConsumerConnectionListRequestHeader;
use raftmq_common::protocol::header::admin::GetConsumerRunningInfoRequestHeader;
use raftmq_common::protocol::header::admin::GetProducerConnectionListRequestHeader;
use raftmq_common::protocol::header::client::ConsumeMessageDirectlyResultRequestHeader;
use raftmq_common::protocol::header::client::GetConsumerListByGroupRequestHeader;
use raftmq_common::protocol::header::client::GetConsumerStatusRequestHeader;
use raftmq_common::protocol::header::client::NotifyConsumerIdsChangedRequestHeader;
use raftmq_common::protocol::header::client::UnregisterClientRequestHeader;
use raftmq_common::protocol::header::offset::QueryConsumerOffsetRequestHeader;
use raftmq_common::protocol::header::offset::QueryConsumerOffsetResponseHeader;
use raftmq_common::protocol::header::offset::UpdateConsumerOffsetRequestHeader;
use raftmq_common::remoting::Connection;
use raftmq_common::remoting::ConnectionContext;
use raftmq_common::remoting::RemotingClient;
use raftmq_common::remoting::RemotingError;
use tokio::sync::Notify;
use tracing::debug;

use crate::config::broker_config::BrokerConfig;
use crate::config::live_config::LiveConfig;
use crate::processors::pull::is_sql92;
use crate::processors::pull::sql_filter;
use crate::processors::refusal::header;
use crate::processors::refusal::refuse;
use crate::processors::send_back::retry_topic_config;
use crate::services::client_manager::ClientChannel;
use crate::services::client_manager::ClientManager;
use crate::services::offset_commit::OffsetCommitter;
use crate::services::rebalance_lock::RebalanceLocks;
use crate::services::replica::Replica;
use crate::services::replica::WriteError;
use crate::state::commit_log::record_at;
use crate::state::entry::BrokerCommand;
use crate::state::entry::OffsetCommit;
use crate::state::offsets::query_offset_answer;
use crate::state::pull::SqlFilterCache;
use crate::state::rebalance_lock::LockedQueue;
use crate::state::store::MessageStore;
use crate::state::store::check_lock_names;
use crate::state::store::now_ms;

fn body<B: JsonBody>(request: &RemotingCommand) -> Result<B, RemotingCommand> {
    B::decode(&request.body).map_err(|e| refuse(ResponseCode::SystemError, e.to_string()))
}

/// What the client requests use: connected clients and their locks, the replica's leader view,
/// the store's read side, the offset committer, the relay to the leader and the boot and live
/// config. Built once by the router.
#[derive(Debug)]
pub struct ClientHandles {
    /// The config the broker booted with (names, addresses).
    pub config: Arc<BrokerConfig>,
    /// The runtime keys (`enablePropertyFilter`, `brokerPermission`).
    pub live: Arc<LiveConfig>,
    /// Leader view and proposals (retry topics).
    pub replica: Arc<Replica>,
    /// Topics, groups, offsets and the committed CommitLog.
    pub store: Arc<MessageStore>,
    /// Connected clients.
    pub clients: Arc<ClientManager>,
    /// Orderly consumers' queue locks, through Raft.
    pub locks: Arc<RebalanceLocks>,
    /// Replication of consumer offsets.
    pub offsets: OffsetCommitter,
    /// Unsigned client relaying a follower's request to the leader.
    pub forwarder: RemotingClient,
    /// Wakes NameServer registration (a retry topic was created).
    pub register_now: Arc<Notify>,
    /// SQL92 subscriptions compiled once (CHECK_CLIENT_CONFIG).
    pub sql_filters: Arc<SqlFilterCache>,
}

/// HEART_BEAT: registers producers and consumers on this connection; notifies a consumer group whose
/// client set changed; makes sure each consumer group's retry topic exists (leader). A consumer group
/// [`validate_consumer_group`] refuses is left out (its `%RETRY%` topic would be replicated metadata
/// and a ConsumeQueue directory on every replica) and named in a SYSTEM_ERROR, after the client's
/// other groups were registered: one client instance heartbeats all its groups, and they keep working.
pub fn heart_beat(
    ctx: &ClientHandles,
    conn: &ConnectionContext,
    request: &RemotingCommand,
) -> Result<RemotingCommand, RemotingCommand> {
    let data: HeartbeatData = body(request)?;
    let now = now_ms();
    let channel = ClientChannel {
        client_id: data.client_id.clone(),
        connection: conn.connection().clone(),
        last_update_ms: now,
        language: request.language,
        version: request.version,
    };
    for producer in &data.producer_data_set {
        ctx.clients.register_producer(&producer.group_name, channel.clone());
    }
    let mut refused = Vec::new();
    for consumer in &data.consumer_data_set {
        if let Err(e) = validate_consumer_group(&consumer.group_name) {
            let shown: String = consumer.group_name.chars().take(64).collect();
            refused.push(format!("{shown}: {e}"));
            continue;
        }
        if ctx.clients.register_consumer(consumer, channel.clone()) {
            notify_consumer_ids_changed(&ctx.clients, &consumer.group_name);
        }
        ensure_retry_topic(ctx, &consumer.group_name);
    }
    if !refused.is_empty() {
        let mut remark = format!("consumer groups not registered: {}", refused.join("; "));
        // A group's name is in it, and a name can be as long as the frame.
        let mut cut = HEARTBEAT_REFUSAL_REMARK_MAX_BYTES.min(remark.len());
        while !remark.is_char_boundary(cut) {
            cut -= 1;
        }
        remark.truncate(cut);
        return Err(refuse(ResponseCode::SystemError, remark));
    }
    Ok(RemotingCommand::success())
}

/// `createTopicInSendMessageBackMethod` at heartbeat time: the group's `%RETRY%` topic, with the
/// group's `retryQueueNums` queues.
fn ensure_retry_topic(ctx: &ClientHandles, group: &str) {
    let topic = retry_topic(group);
    if ctx.store.metadata().topics.get(&topic).is_some() || ctx.replica.ready_term().is_none() {
        return;
    }
    // As Java's heartbeat: as many queues as the group retries on (clamped), one when it is new.
    let queues = ctx.store.metadata().groups.get(group).map_or(1, |g| g.retry_queue_nums.max(1));
    let config = retry_topic_config(group, queues, false);
    let (replica, register_now) = (Arc::clone(&ctx.replica), Arc::clone(&ctx.register_now));
    tokio::spawn(async move {
        let command = BrokerCommand::TopicUpsert { proposed_at_ms: now_ms() as i64, config };
        match replica.propose(&command).await {
            Ok(()) => register_now.notify_one(),
            Err(e) => debug!(error = %e, "creating a retry topic failed"),
        }
    });
}

/// Sends NOTIFY_CONSUMER_IDS_CHANGED (oneway) to every client of `group`, in the background.
pub fn notify_consumer_ids_changed(clients: &ClientManager, group: &str) {
    let connections = clients.consumer_connections(group);
    if connections.is_empty() {
        return;
    }
    let request = RemotingCommand::request_with_header(
        RequestCode::NotifyConsumerIdsChanged,
        &NotifyConsumerIdsChangedRequestHeader { consumer_group: group.to_owned() },
    );
    send_oneway_to_all(connections, request);
}

/// Sends `request` oneway on each of `connections` (clients' own connections), in the background;
/// a failed delivery is logged, as Java's broker does.
pub fn send_oneway_to_all(connections: Vec<Connection>, request: RemotingCommand) {
    let request = request.into_oneway();
    tokio::spawn(async move {
        for conn in connections {
            if let Err(e) = conn.invoke_oneway(request.clone(), Duration::from_millis(RPC_TIMEOUT_DEFAULT_MS)).await {
                let code = request.request_code();
                debug!(peer = %conn.peer_addr(), error = %e, ?code, "oneway request to a client not delivered");
            }
        }
    });
}

/// CHECK_CLIENT_CONFIG (`checkClientConfig`): whether this broker can filter by the consumer's
/// subscription. TAG always; SQL92 when `enablePropertyFilter` is on and the expression compiles.
pub fn check_client_config(ctx: &ClientHandles, request: &RemotingCommand) -> Result<RemotingCommand, RemotingCommand> {
    // Java answers SUCCESS when there is nothing to check.
    if request.body.is_empty() {
        return Ok(RemotingCommand::success());
    }
    let check: CheckClientRequestBody = body(request)?;
    let sub = &check.subscription_data;
    let kind = sub.expression_type.as_str();
    if kind.is_empty() || kind == "TAG" {
        return Ok(RemotingCommand::success());
    }
    if !is_sql92(Some(kind)) {
        if !ctx.live.read(|c| c.enable_property_filter) {
            return Err(refuse(
                ResponseCode::SystemError,
                format!("The broker does not support consumer to filter message by {kind}"),
            ));
        }
        return Err(refuse(ResponseCode::SubscriptionParseFailed, format!("unknown expression type {kind}")));
    }
    sql_filter(&ctx.live, &ctx.sql_filters, &sub.sub_string)?;
    Ok(RemotingCommand::success())
}

/// UNREGISTER_CLIENT.
pub fn unregister_client(
    ctx: &ClientHandles,
    conn: &ConnectionContext,
    request: &RemotingCommand,
) -> Result<RemotingCommand, RemotingCommand> {
    let h: UnregisterClientRequestHeader = header(request)?;
    let changed =
        ctx.clients.unregister(conn.connection_id(), h.producer_group.as_deref(), h.consumer_group.as_deref());
    for group in changed {
        notify_consumer_ids_changed(&ctx.clients, &group);
    }
    Ok(RemotingCommand::success())
}

/// GET_CONSUMER_LIST_BY_GROUP.
pub fn consumer_list(ctx: &ClientHandles, request: &RemotingCommand) -> Result<RemotingCommand, RemotingCommand> {
    let h: GetConsumerListByGroupRequestHeader = header(request)?;
    match ctx.clients.consumer_ids(&h.consumer_group) {
        Some(ids) if !ids.is_empty() => {
            let body = ConsumerListBody { consumer_id_list: ids }
                .encode()
                .map_err(|e| refuse(ResponseCode::SystemError, e.to_string()))?;
            Ok(RemotingCommand::success().with_body(body))
        }
        _ => Err(refuse(ResponseCode::SystemError, format!("no consumer for this group, {}", h.consumer_group))),
    }
}

/// GET_CONSUMER_CONNECTION_LIST (`mqadmin consumerConnection`): the group's live clients (address,
/// id, language, version), its subscriptions and consume settings; CONSUMER_NOT_ONLINE when no
/// client of the group is connected to this replica.
pub fn consumer_connection_list(
    ctx: &ClientHandles,
    request: &RemotingCommand,
) -> Result<RemotingCommand, RemotingCommand> {
    let h: GetConsumerConnectionListRequestHeader = header(request)?;
    let Some(info) = ctx.clients.consumer_group(&h.consumer_group).filter(|g| !g.channels.is_empty()) else {
        return Err(refuse(
            ResponseCode::ConsumerNotOnline,
            format!("the consumer group[{}] not online", h.consumer_group),
        ));
    };
    let mut connection_set: Vec<_> = info.channels.values().map(ClientChannel::to_connection_body).collect();
    connection_set.sort_by(|a, b| (&a.client_id, &a.client_addr).cmp(&(&b.client_id, &b.client_addr)));
    let body = ConsumerConnection {
        connection_set,
        consume_from_where: Some(info.consume_from_where),
        consume_type: Some(info.consume_type),
        message_model: Some(info.message_model),
        subscription_table: info.subscriptions.into_iter().collect(),
    };
    encode_body(&body)
}

/// GET_PRODUCER_CONNECTION_LIST (`mqadmin producerConnection`): the group's live producer clients;
/// SYSTEM_ERROR when the group never connected to this replica (Java's answer).
pub fn producer_connection_list(
    ctx: &ClientHandles,
    request: &RemotingCommand,
) -> Result<RemotingCommand, RemotingCommand> {
    let h: GetProducerConnectionListRequestHeader = header(request)?;
    let Some(channels) = ctx.clients.producer_channels(&h.producer_group) else {
        return Err(refuse(ResponseCode::SystemError, format!("the producer group[{}] not exist", h.producer_group)));
    };
    let body = ProducerConnection { connection_set: channels.iter().map(ClientChannel::to_connection_body).collect() };
    encode_body(&body)
}

/// GET_CONSUMER_RUNNING_INFO (`mqadmin consumerStatus`, the dashboard's consumer client view):
/// relayed to the client, whose answer (a `ConsumerRunningInfo`) is the answer.
pub async fn consumer_running_info(
    ctx: &ClientHandles,
    request: &RemotingCommand,
) -> Result<RemotingCommand, RemotingCommand> {
    let h: GetConsumerRunningInfoRequestHeader = header(request)?;
    let relayed = RemotingCommand::request_with_header(RequestCode::GetConsumerRunningInfo, &h);
    call_consumer(ctx, relayed, &h.consumer_group, &h.client_id).await
}

/// CONSUME_MESSAGE_DIRECTLY (`mqadmin queryMsgById -g -d`, the dashboard's "resend"): the stored
/// record the offset msgId names goes to the client in the body, with this broker's name in the
/// header; the client's `ConsumeMessageDirectlyResult` is the answer.
pub async fn consume_message_directly(
    ctx: &ClientHandles,
    request: &RemotingCommand,
) -> Result<RemotingCommand, RemotingCommand> {
    let mut h: ConsumeMessageDirectlyResultRequestHeader = header(request)?;
    let msg_id = h.msg_id.clone().unwrap_or_default();
    let id: OffsetMsgId = msg_id.parse().map_err(|e| {
        refuse(ResponseCode::SystemError, format!("msgId {msg_id} is not a message id of this broker: {e}"))
    })?;
    let record = record_at(ctx.store.commit_log(), id.commit_log_offset).map_err(|e| {
        refuse(ResponseCode::SystemError, format!("can not find message by the offset, {}: {e}", id.commit_log_offset))
    })?;
    h.broker_name = Some(ctx.config.broker_name.clone());
    let client_id = h.client_id.clone().unwrap_or_default();
    let relayed =
        RemotingCommand::request_with_header(RequestCode::ConsumeMessageDirectly, &h).with_body(record.to_vec());
    call_consumer(ctx, relayed, &h.consumer_group, &client_id).await
}

/// INVOKE_BROKER_TO_GET_CONSUMER_STATUS (`mqadmin getConsumerStatus`, Java's
/// `Broker2Client.getConsumeStatus`): the offsets of `topic` each consumer of the group connected
/// here holds in memory, asked with GET_CONSUMER_STATUS_FROM_CLIENT, keyed by client id. With
/// `clientAddr` only that client is asked. The consumers are asked all at once (Java asks them in
/// turn); one that fails or does not answer in time is left out of the table, as in Java.
pub async fn consumer_status(
    ctx: &ClientHandles,
    request: &RemotingCommand,
) -> Result<RemotingCommand, RemotingCommand> {
    let h: GetConsumerStatusRequestHeader = header(request)?;
    let clients = ctx.clients.consumer_clients(&h.group);
    if clients.is_empty() {
        return Err(refuse(
            ResponseCode::SystemError,
            format!("No Any Consumer online in the consumer group: [{}]", h.group),
        ));
    }
    let only = h.client_addr.as_deref().filter(|c| !c.trim().is_empty());
    let asked = RemotingCommand::request_with_header(
        RequestCode::GetConsumerStatusFromClient,
        &GetConsumerStatusRequestHeader { topic: h.topic.clone(), group: h.group.clone(), client_addr: None },
    );
    let calls = clients.into_iter().filter(|(id, _)| only.is_none_or(|o| o == id)).map(|(id, conn)| {
        let asked = asked.clone();
        async move {
            match conn.invoke(asked, Duration::from_millis(BROKER_CLIENT_CALL_TIMEOUT_MS)).await {
                Ok(answer) if answer.response_code() == ResponseCode::Success => {
                    match GetConsumerStatusBody::decode(&answer.body) {
                        Ok(body) => Some((id, body.message_queue_table)),
                        Err(e) => {
                            debug!(client = %id, error = %e, "a consumer's status does not decode; left out");
                            None
                        }
                    }
                }
                Ok(answer) => {
                    debug!(client = %id, code = answer.code, remark = ?answer.remark, "a consumer refused its status; left out");
                    None
                }
                Err(e) => {
                    debug!(client = %id, error = %e, "a consumer did not answer with its status; left out");
                    None
                }
            }
        }
    });
    let consumer_table = futures::future::join_all(calls).await.into_iter().flatten().collect();
    encode_body(&GetConsumerStatusBody { consumer_table, ..GetConsumerStatusBody::default() })
}

/// `callConsumer`: sends `relayed` to consumer `client` of `group` on its own connection and
/// answers with its answer. Java's codes: SYSTEM_ERROR when the client is not connected here or
/// the call fails, CONSUME_MSG_TIMEOUT when it does not answer in time.
async fn call_consumer(
    ctx: &ClientHandles,
    relayed: RemotingCommand,
    group: &str,
    client: &str,
) -> Result<RemotingCommand, RemotingCommand> {
    let Some(conn) = ctx.clients.consumer_connection(group, client) else {
        return Err(refuse(ResponseCode::SystemError, format!("The Consumer <{group}> <{client}> not online")));
    };
    match conn.invoke(relayed, Duration::from_millis(BROKER_CLIENT_CALL_TIMEOUT_MS)).await {
        Ok(answer) => Ok(answer),
        Err(e @ RemotingError::Timeout { .. }) => {
            Err(refuse(ResponseCode::ConsumeMsgTimeout, format!("consumer <{group}> <{client}> Timeout: {e}")))
        }
        Err(e) => {
            Err(refuse(ResponseCode::SystemError, format!("invoke consumer <{group}> <{client}> Exception: {e}")))
        }
    }
}

fn encode_body<B: JsonBody>(body: &B) -> Result<RemotingCommand, RemotingCommand> {
    body.encode()
        .map(|bytes| RemotingCommand::success().with_body(bytes))
        .map_err(|e| refuse(ResponseCode::SystemError, e.to_string()))
}

/// QUERY_CONSUMER_OFFSET: the replicated offset, 0 for a queue still starting at 0 (unless the
/// request sets `setZeroIfNotFound` false), else QUERY_NOT_FOUND.
pub async fn query_consumer_offset(
    ctx: &ClientHandles,
    request: &RemotingCommand,
) -> Result<RemotingCommand, RemotingCommand> {
    let h: QueryConsumerOffsetRequestHeader = header(request)?;
    // A consumer taking a queue starts from this answer: a follower still replaying its log after a
    // restart (or cut off from the group) holds older offsets, and answering from them would rewind
    // the group (seen by the jepsen soak). Only the ready leader answers; a follower relays.
    if ctx.replica.ready_term().is_none() {
        return match ctx.replica.leader_addr() {
            Some(leader) if leader != ctx.config.broker_addr() => {
                forward(&ctx.forwarder, &ctx.replica, &ctx.config.broker_name, &leader, request).await
            }
            leader_addr => Err(WriteError::NotLeader { leader_addr }.to_response(&ctx.config.broker_name)),
        };
    }
    let stored = ctx.store.metadata().offsets.query(&h.topic, &h.consumer_group, h.queue_id);
    let (min, _) = ctx.store.queue_offsets(&h.topic, h.queue_id);
    // A queue's first message is always readable here (mapped); RocketMQ 5's
    // `setZeroIfNotFound=false` asks for QUERY_NOT_FOUND instead of that 0.
    let zero_if_not_found = h.set_zero_if_not_found != Some(false);
    match query_offset_answer(stored, i64::try_from(min).unwrap_or(i64::MAX), zero_if_not_found) {
        Ok(offset) => Ok(RemotingCommand::success().with_header(&QueryConsumerOffsetResponseHeader { offset })),
        Err(code) => Err(refuse(code, "Not found, V3_0_6_SNAPSHOT maybe this group consumer boot first")),
    }
}

/// UPDATE_CONSUMER_OFFSET: replicated by the leader, refused by a follower (with the leader hint).
/// Never relayed: a relayed commit can wait in the follower's connection through a partition and
/// land after newer commits, moving the offset back (jepsen seed 7000; `t20_broker_failover`). A
/// consumer's next periodic commit, after its route refresh, carries the newest offset anyway.
pub async fn update_consumer_offset(
    ctx: &ClientHandles,
    request: &RemotingCommand,
) -> Result<RemotingCommand, RemotingCommand> {
    let h: UpdateConsumerOffsetRequestHeader = header(request)?;
    let broker_name = &ctx.config.broker_name;
    // A follower answers with the leader hint first: its own tables may lag the topic's creation.
    ctx.replica.check_writable().map_err(|e| e.to_response(broker_name))?;
    // Replicated with every other commit of its batch: a name the batch could not encode would
    // cost them all.
    validate_stored_topic(&h.topic).map_err(|e| refuse(e.response_code(), e.to_string()))?;
    validate_consumer_group(&h.consumer_group).map_err(|e| refuse(e.response_code(), e.to_string()))?;
    // Only queues that exist: every commit is replicated state that every replica keeps and every
    // snapshot carries, so any other would let a client grow it at will. RocketMQ 5 checks the
    // topic (with this remark); the queue range is ours.
    let queues = match ctx.store.metadata().topics.get(&h.topic) {
        Some(c) => c.read_queue_nums.max(c.write_queue_nums),
        None => return Err(refuse(ResponseCode::TopicNotExist, format!("Topic {} not exist!", h.topic))),
    };
    if !(0..queues).contains(&h.queue_id) {
        return Err(refuse(
            ResponseCode::SystemError,
            format!("queueId[{}] is illegal, topic:[{}] has {queues} queues", h.queue_id, h.topic),
        ));
    }
    let commit =
        OffsetCommit { topic: h.topic, group: h.consumer_group, queue_id: h.queue_id, offset: h.commit_offset };
    if request.is_oneway() {
        ctx.offsets.commit_later(commit).map_err(|e| e.to_response(broker_name))?;
    } else {
        ctx.offsets.commit(commit).await.map_err(|e| e.to_response(broker_name))?;
    }
    Ok(RemotingCommand::success())
}

/// How long the leader may hold a relayed request before it answers: a POP_MESSAGE's long polling
/// (its `pollTime`, bounded as the leader bounds it); nothing for anything else.
fn relay_hold_ms(request: &RemotingCommand) -> u64 {
    if request.request_code() != raftmq_common::protocol::RequestCode::PopMessage {
        return 0;
    }
    let poll_ms = request.ext_fields.get("pollTime").and_then(|v| v.trim().parse::<i64>().ok()).unwrap_or(0);
    poll_ms.clamp(0, raftmq_common::limits::POP_POLL_TIME_MAX_MS) as u64
}

/// Why a relay to the leader failed.
#[derive(Debug)]
pub(crate) enum RelayError {
    /// The request was relayed already ([`FLAG_RELAYED`]): this replica's NOT_LEADER refusal.
    Relayed(RemotingCommand),
    /// The leader could not be reached or did not answer.
    Remoting {
        /// The leader's address.
        leader: String,
        /// What failed: [`RemotingError::is_outcome_unknown`] tells whether the leader may have
        /// processed the request.
        error: RemotingError,
    },
}

impl RelayError {
    /// Whether the request certainly did not reach the leader (so another attempt cannot apply
    /// it twice).
    pub(crate) fn not_sent(&self) -> bool {
        matches!(self, RelayError::Remoting { error, .. } if !error.is_outcome_unknown())
    }

    /// The refusal a client gets.
    pub(crate) fn into_response(self) -> RemotingCommand {
        match self {
            RelayError::Relayed(refusal) => refusal,
            RelayError::Remoting { leader, error } => {
                refuse(ResponseCode::ServiceNotAvailable, format!("forwarding to the leader {leader} failed: {error}"))
            }
        }
    }
}

/// Relays a request to the leader once (a relayed request is never relayed again: [`FLAG_RELAYED`]);
/// its answer is ours.
pub(crate) async fn relay(
    forwarder: &RemotingClient,
    replica: &Replica,
    broker_name: &str,
    leader: &str,
    request: &RemotingCommand,
) -> Result<RemotingCommand, RelayError> {
    if request.flag & FLAG_RELAYED != 0 {
        let leader_addr = replica.leader_addr();
        return Err(RelayError::Relayed(WriteError::NotLeader { leader_addr }.to_response(broker_name)));
    }
    let mut relayed = request.clone();
    relayed.flag = FLAG_RELAYED;
    let timeout = Duration::from_millis(RPC_TIMEOUT_DEFAULT_MS + relay_hold_ms(request));
    let failed = |error: RemotingError| RelayError::Remoting { leader: leader.to_owned(), error };
    if request.is_oneway() {
        forwarder.invoke_oneway(leader, relayed.into_oneway(), timeout).await.map_err(failed)?;
        return Ok(RemotingCommand::success());
    }
    let mut response = forwarder.invoke(leader, relayed, timeout).await.map_err(failed)?;
    response.flag = 0;
    Ok(response)
}

/// [`relay`], a failure answered as SERVICE_NOT_AVAILABLE (or the NOT_LEADER refusal).
pub(crate) async fn forward(
    forwarder: &RemotingClient,
    replica: &Replica,
    broker_name: &str,
    leader: &str,
    request: &RemotingCommand,
) -> Result<RemotingCommand, RemotingCommand> {
    relay(forwarder, replica, broker_name, leader, request).await.map_err(RelayError::into_response)
}

/// The queues of a lock request that this broker locks, deduplicated: only its own (a client
/// locks each broker's queues there); the names checked as apply checks them, so a request
/// LOCK_BATCH_MQ takes never makes an entry that every replica refuses.
fn lock_request(
    ctx: &ClientHandles,
    group: &str,
    client_id: &str,
    mqs: &[MessageQueue],
) -> Result<Vec<LockedQueue>, RemotingCommand> {
    let mut queues: Vec<LockedQueue> = Vec::with_capacity(mqs.len());
    for mq in mqs.iter().filter(|mq| mq.broker_name == ctx.config.broker_name) {
        let q = LockedQueue { topic: mq.topic.clone(), broker_name: mq.broker_name.clone(), queue_id: mq.queue_id };
        if !queues.contains(&q) {
            queues.push(q);
        }
    }
    check_lock_names(group, client_id, &queues).map_err(|why| refuse(ResponseCode::SystemError, why))?;
    Ok(queues)
}

/// LOCK_BATCH_MQ: one QUEUE_LOCKS entry; the answer lists the queues the client holds once it is
/// applied (a follower or a leader not yet ready refuses with the leader hint).
pub async fn lock_batch(ctx: &ClientHandles, request: &RemotingCommand) -> Result<RemotingCommand, RemotingCommand> {
    let req: LockBatchRequestBody = body(request)?;
    let queues = lock_request(ctx, &req.consumer_group, &req.client_id, &req.mq_set)?;
    let locked = ctx
        .locks
        .lock_batch(&req.consumer_group, &req.client_id, queues)
        .await
        .map_err(|e| e.to_response(&ctx.config.broker_name))?;
    let lock_ok_mq_set = locked.into_iter().map(|q| MessageQueue::new(q.topic, q.broker_name, q.queue_id)).collect();
    let body = LockBatchResponseBody { lock_ok_mq_set }
        .encode()
        .map_err(|e| refuse(ResponseCode::SystemError, e.to_string()))?;
    Ok(RemotingCommand::success().with_body(body))
}

/// UNLOCK_BATCH_MQ: one QUEUE_LOCKS entry releasing the client's own locks.
pub async fn unlock_batch(ctx: &ClientHandles, request: &RemotingCommand) -> Result<RemotingCommand, RemotingCommand> {
    let req: UnlockBatchRequestBody = body(request)?;
    let queues = lock_request(ctx, &req.consumer_group, &req.client_id, &req.mq_set)?;
    ctx.locks
        .unlock_batch(&req.consumer_group, &req.client_id, queues)
        .await
        .map_err(|e| e.to_response(&ctx.config.broker_name))?;
    Ok(RemotingCommand::success())
}
