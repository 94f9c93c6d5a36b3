//! `BrokerProcessor`: the broker's remoting entry point. Every request code the broker serves is
//! registered here ([`SERVED_CODES`]) and routed to its processor module; anything else gets the
//! transport's REQUEST_CODE_NOT_SUPPORTED. The router owns the [`crate::context::BrokerContext`],
//! builds each processor family's handles from it once, and is the only file that knows every
//! processor; a processor sees only its handles.
//!
//! ```text
//! RemotingServer ──code──▶ BrokerProcessor::process
//!    SEND_MESSAGE(_V2) / SEND_BATCH_MESSAGE ─▶ send ─▶ group_commit ─▶ raft
//!    CONSUMER_SEND_MSG_BACK ───────────────▶ send_back (%RETRY% via SCHEDULE_TOPIC_XXXX, or %DLQ%)
//!    PULL_MESSAGE ─────────────────────────▶ pull (long polling on the store)
//!    POP_MESSAGE, ACK_MESSAGE, CHANGE_MESSAGE_INVISIBLETIME ─▶ pop ─▶ services::pop ─▶ raft
//!    HEART_BEAT, UNREGISTER_CLIENT, offsets, locks ─▶ client_manage (offsets ─▶ offset_commit ─▶ raft)
//!    topics, groups, queue offsets ────────▶ admin (changes ─▶ raft)
//!    QUERY_MESSAGE, VIEW_MESSAGE_BY_ID, offsets by time ─▶ query (IndexFile, CommitLog reads)
//! ```

use std::sync::Arc;

use raftmq_common::protocol::RemotingCommand;
use raftmq_common::protocol::RequestCode;
use raftmq_common::remoting::ConnectionContext;
use raftmq_common::remoting::RefusalLog;
use raftmq_common::remoting::RequestProcessor;

use crate::context::BrokerContext;
use crate::processors::acl::AclHandles;
use crate::processors::admin;
use crate::processors::admin::AdminHandles;
use crate::processors::client_manage;
use crate::processors::client_manage::ClientHandles;
use crate::processors::pop;
use crate::processors::pop::PopProcessorHandles;
use crate::processors::pull;
use crate::processors::pull::PullHandles;
use crate::processors::query;
use crate::processors::send;
use crate::processors::send_back;
use crate::processors::send_handles::SendHandles;

/// Request codes the broker answers.
pub const SERVED_CODES: &[RequestCode] = &[
    RequestCode::SendMessage,
    RequestCode::SendMessageV2,
    RequestCode::SendBatchMessage,
    RequestCode::SendReplyMessage,
    RequestCode::SendReplyMessageV2,
    RequestCode::ConsumerSendMsgBack,
    RequestCode::PullMessage,
    RequestCode::PopMessage,
    RequestCode::AckMessage,
    RequestCode::ChangeMessageInvisibletime,
    RequestCode::HeartBeat,
    RequestCode::UnregisterClient,
    RequestCode::GetConsumerListByGroup,
    RequestCode::QueryConsumerOffset,
    RequestCode::UpdateConsumerOffset,
    RequestCode::LockBatchMq,
    RequestCode::UnlockBatchMq,
    RequestCode::UpdateAndCreateTopic,
    RequestCode::GetAllTopicConfig,
    RequestCode::DeleteTopicInBroker,
    RequestCode::UpdateAndCreateSubscriptiongroup,
    RequestCode::GetAllSubscriptiongroupConfig,
    RequestCode::DeleteSubscriptiongroup,
    RequestCode::GetAllConsumerOffset,
    RequestCode::GetAllDelayOffset,
    RequestCode::GetSystemTopicListFromBroker,
    RequestCode::GetMaxOffset,
    RequestCode::GetMinOffset,
    RequestCode::QueryBrokerOffset,
    RequestCode::SearchOffsetByTimestamp,
    RequestCode::GetEarliestMsgStoretime,
    RequestCode::QueryMessage,
    RequestCode::ViewMessageById,
    RequestCode::RaftAddNode,
    RequestCode::RaftRemoveNode,
    RequestCode::RaftTransferLeadership,
    RequestCode::RaftGroupStatus,
    RequestCode::RaftNodeRemoved,
    RequestCode::UpdateAndCreateAclConfig,
    RequestCode::DeleteAclConfig,
    RequestCode::UpdateGlobalWhiteAddrsConfig,
    RequestCode::GetBrokerClusterAclInfo,
    RequestCode::GetBrokerClusterAclConfig,
    RequestCode::EndTransaction,
    RequestCode::ResumeCheckHalfMessage,
    RequestCode::CheckClientConfig,
    RequestCode::GetTopicStatsInfo,
    RequestCode::GetBrokerRuntimeInfo,
    RequestCode::GetBrokerConfig,
    RequestCode::UpdateBrokerConfig,
    RequestCode::CloneGroupOffset,
    RequestCode::GetBrokerConsumeStats,
    RequestCode::QueryTopicConsumeByWho,
    RequestCode::QueryConsumeTimeSpan,
    RequestCode::QueryConsumeQueue,
    RequestCode::DeleteExpiredCommitlog,
    RequestCode::CleanExpiredConsumequeue,
    RequestCode::ViewBrokerStatsData,
    RequestCode::GetConsumeStats,
    RequestCode::GetConsumerConnectionList,
    RequestCode::GetProducerConnectionList,
    RequestCode::InvokeBrokerToResetOffset,
    RequestCode::GetConsumerRunningInfo,
    RequestCode::ConsumeMessageDirectly,
    RequestCode::InvokeBrokerToGetConsumerStatus,
];

/// The broker's request processor: the context, and the handles each processor family is given.
#[derive(Debug, Clone)]
pub struct BrokerProcessor {
    ctx: Arc<BrokerContext>,
    send: Arc<SendHandles>,
    pull: Arc<PullHandles>,
    pop: Arc<PopProcessorHandles>,
    client: Arc<ClientHandles>,
    admin: Arc<AdminHandles>,
    acl: Arc<AclHandles>,
    /// Refused requests, logged once per connection and code.
    refusals: Arc<RefusalLog>,
}

impl BrokerProcessor {
    /// A processor over `ctx`.
    pub fn new(ctx: Arc<BrokerContext>) -> Self {
        let send = Arc::new(send_handles(&ctx));
        let pull = Arc::new(pull_handles(&ctx));
        let pop = Arc::new(PopProcessorHandles {
            config: Arc::clone(&ctx.config),
            live: Arc::clone(&ctx.live),
            replica: Arc::clone(&ctx.replica),
            store: Arc::clone(&ctx.store),
            service: Arc::clone(&ctx.pop),
            sql_filters: Arc::clone(&ctx.sql_filters),
        });
        let client = Arc::new(client_handles(&ctx));
        let admin = Arc::new(admin_handles(&ctx));
        let acl = Arc::new(AclHandles {
            acl: ctx.acl.clone(),
            config: Arc::clone(&ctx.config),
            replica: Arc::clone(&ctx.replica),
            store: Arc::clone(&ctx.store),
            forwarder: ctx.forwarder.clone(),
        });
        BrokerProcessor { ctx, send, pull, pop, client, admin, acl, refusals: Arc::new(RefusalLog::default()) }
    }
}

/// What the admin requests use.
fn admin_handles(ctx: &BrokerContext) -> AdminHandles {
    AdminHandles {
        config: Arc::clone(&ctx.config),
        live: Arc::clone(&ctx.live),
        replica: Arc::clone(&ctx.replica),
        store: Arc::clone(&ctx.store),
        clients: Arc::clone(&ctx.clients),
        membership: Arc::clone(&ctx.membership),
        register_now: Arc::clone(&ctx.register_now),
        stats: Arc::clone(&ctx.stats),
        group_get_stats: Arc::clone(&ctx.group_get_stats),
        broker_totals: Arc::clone(&ctx.broker_totals),
        manual_purge_rounds: Arc::clone(&ctx.manual_purge_rounds),
        draining: Arc::clone(&ctx.draining),
    }
}

/// What the client requests and INVOKE_BROKER_TO_RESET_OFFSET use.
fn client_handles(ctx: &BrokerContext) -> ClientHandles {
    ClientHandles {
        config: Arc::clone(&ctx.config),
        live: Arc::clone(&ctx.live),
        replica: Arc::clone(&ctx.replica),
        store: Arc::clone(&ctx.store),
        clients: Arc::clone(&ctx.clients),
        locks: Arc::clone(&ctx.locks),
        offsets: ctx.offsets.clone(),
        forwarder: ctx.forwarder.clone(),
        register_now: Arc::clone(&ctx.register_now),
        sql_filters: Arc::clone(&ctx.sql_filters),
    }
}

/// What a pull uses.
fn pull_handles(ctx: &BrokerContext) -> PullHandles {
    PullHandles {
        config: Arc::clone(&ctx.config),
        live: Arc::clone(&ctx.live),
        replica: Arc::clone(&ctx.replica),
        store: Arc::clone(&ctx.store),
        clients: Arc::clone(&ctx.clients),
        offsets: ctx.offsets.clone(),
        pull_limits: ctx.pull_limits,
        sql_filters: Arc::clone(&ctx.sql_filters),
        metrics: Arc::clone(&ctx.metrics),
        group_get_stats: Arc::clone(&ctx.group_get_stats),
        broker_totals: Arc::clone(&ctx.broker_totals),
        stats: Arc::clone(&ctx.stats),
    }
}

/// What send, reply, send-back and end transaction use.
fn send_handles(ctx: &BrokerContext) -> SendHandles {
    SendHandles {
        config: Arc::clone(&ctx.config),
        live: Arc::clone(&ctx.live),
        replica: Arc::clone(&ctx.replica),
        store: Arc::clone(&ctx.store),
        writer: ctx.writer.clone(),
        register_now: Arc::clone(&ctx.register_now),
        store_host: ctx.store_host,
        metrics: Arc::clone(&ctx.metrics),
        acl_enabled: ctx.acl.is_some(),
        clients: Arc::clone(&ctx.clients),
        transactions: Arc::clone(&ctx.transactions),
    }
}

impl RequestProcessor for BrokerProcessor {
    async fn process(&self, conn: ConnectionContext, request: RemotingCommand) -> Option<RemotingCommand> {
        let response = self.answer(&conn, &request).await;
        self.refusals.note(conn.connection_id(), conn.peer_addr(), &request, &response);
        Some(response)
    }
}

impl BrokerProcessor {
    /// The response to a request that came over another protocol (`crate::processors::bridge`):
    /// the ACL check, then the codes that need no connection (sends, END_TRANSACTION, POP, consumer
    /// and queue offsets).
    pub(crate) async fn answer_bridged(
        &self,
        peer: std::net::SocketAddr,
        request: &RemotingCommand,
    ) -> RemotingCommand {
        if let Some(acl) = &self.ctx.acl
            && let Err(denied) = acl.check(request, peer.ip())
        {
            tracing::debug!(%peer, code = request.code, reason = %denied, "bridged request refused by the plain ACL");
            return RemotingCommand::response(
                raftmq_common::protocol::ResponseCode::SystemError,
                Some(format!("AclException: {denied}")),
            );
        }
        match request.request_code() {
            RequestCode::SendMessage | RequestCode::SendMessageV2 => {
                send::process_send(&self.send, peer, request).await
            }
            RequestCode::EndTransaction => {
                crate::processors::end_transaction::end_transaction(&self.send, request).await
            }
            RequestCode::PopMessage => pop::pop_message(&self.pop, request).await,
            RequestCode::AckMessage => pop::ack_message(&self.pop, request).await,
            RequestCode::ChangeMessageInvisibletime => pop::change_invisible_time(&self.pop, request).await,
            RequestCode::ConsumerSendMsgBack => send_back::consumer_send_back(&self.send, request).await,
            RequestCode::UpdateConsumerOffset => {
                client_manage::update_consumer_offset(&self.client, request).await.unwrap_or_else(|refused| refused)
            }
            RequestCode::QueryConsumerOffset => {
                client_manage::query_consumer_offset(&self.client, request).await.unwrap_or_else(|refused| refused)
            }
            RequestCode::GetMinOffset => admin::min_offset(&self.admin, request).unwrap_or_else(|refused| refused),
            RequestCode::GetMaxOffset => admin::max_offset(&self.admin, request).unwrap_or_else(|refused| refused),
            RequestCode::SearchOffsetByTimestamp => {
                query::search_offset_by_timestamp(&self.ctx.store, request).unwrap_or_else(|refused| refused)
            }
            _ => raftmq_common::remoting::processor::not_supported(request),
        }
    }

    /// The response to `request`, refusals included.
    async fn answer(&self, conn: &ConnectionContext, request: &RemotingCommand) -> RemotingCommand {
        let ctx = &self.ctx;
        if let Some(acl) = &ctx.acl
            && let Err(denied) = acl.check(request, conn.peer_addr().ip())
        {
            tracing::debug!(peer = %conn.peer_addr(), code = request.code, reason = %denied, "refused by the plain ACL");
            // Java answers an AclException from its RPC hook with SYSTEM_ERROR and the message.
            return RemotingCommand::response(
                raftmq_common::protocol::ResponseCode::SystemError,
                Some(format!("AclException: {denied}")),
            );
        }
        let result = match request.request_code() {
            RequestCode::SendMessage | RequestCode::SendMessageV2 | RequestCode::SendBatchMessage => {
                Ok(send::process_send(&self.send, conn.peer_addr(), request).await)
            }
            RequestCode::SendReplyMessage | RequestCode::SendReplyMessageV2 => {
                Ok(crate::processors::reply::process_reply(&self.send, conn.peer_addr(), request).await)
            }
            RequestCode::CheckClientConfig => client_manage::check_client_config(&self.client, request),
            RequestCode::EndTransaction => {
                Ok(crate::processors::end_transaction::end_transaction(&self.send, request).await)
            }
            RequestCode::ResumeCheckHalfMessage => {
                Ok(crate::processors::end_transaction::resume_check_half_message(&self.send, request).await)
            }
            RequestCode::ConsumerSendMsgBack => Ok(send_back::consumer_send_back(&self.send, request).await),
            RequestCode::PullMessage => Ok(pull::process_pull(&self.pull, request).await),
            RequestCode::PopMessage => Ok(pop::pop_message(&self.pop, request).await),
            RequestCode::AckMessage => Ok(pop::ack_message(&self.pop, request).await),
            RequestCode::ChangeMessageInvisibletime => Ok(pop::change_invisible_time(&self.pop, request).await),
            RequestCode::HeartBeat => client_manage::heart_beat(&self.client, conn, request),
            RequestCode::UnregisterClient => client_manage::unregister_client(&self.client, conn, request),
            RequestCode::GetConsumerListByGroup => client_manage::consumer_list(&self.client, request),
            RequestCode::QueryConsumerOffset => client_manage::query_consumer_offset(&self.client, request).await,
            RequestCode::UpdateConsumerOffset => client_manage::update_consumer_offset(&self.client, request).await,
            RequestCode::LockBatchMq => client_manage::lock_batch(&self.client, request).await,
            RequestCode::UnlockBatchMq => client_manage::unlock_batch(&self.client, request).await,
            RequestCode::UpdateAndCreateTopic => admin::update_and_create_topic(&self.admin, request).await,
            RequestCode::GetAllTopicConfig => admin::all_topic_config(&self.admin),
            RequestCode::DeleteTopicInBroker => admin::delete_topic(&self.admin, request).await,
            RequestCode::UpdateAndCreateSubscriptiongroup => admin::update_and_create_group(&self.admin, request).await,
            RequestCode::GetAllSubscriptiongroupConfig => admin::all_group_config(&self.admin),
            RequestCode::DeleteSubscriptiongroup => admin::delete_group(&self.admin, request).await,
            RequestCode::GetAllConsumerOffset => admin::all_consumer_offset(&self.admin),
            RequestCode::GetAllDelayOffset => admin::all_delay_offset(&self.admin),
            RequestCode::GetSystemTopicListFromBroker => admin::system_topic_list(&self.admin),
            RequestCode::GetMaxOffset => admin::max_offset(&self.admin, request),
            RequestCode::GetTopicStatsInfo => admin::topic_stats_info(&self.admin, request),
            RequestCode::GetBrokerRuntimeInfo => admin::broker_runtime_info(&self.admin),
            RequestCode::GetBrokerConfig => admin::broker_config(&self.admin),
            RequestCode::UpdateBrokerConfig => admin::update_broker_config(&self.admin, request),
            RequestCode::CloneGroupOffset => admin::clone_group_offset(&self.admin, request).await,
            RequestCode::GetBrokerConsumeStats => admin::broker_consume_stats(&self.admin, request),
            RequestCode::QueryTopicConsumeByWho => admin::topic_consume_by_who(&self.admin, request),
            RequestCode::QueryConsumeTimeSpan => admin::consume_time_span(&self.admin, request),
            RequestCode::QueryConsumeQueue => admin::query_consume_queue(&self.admin, request),
            RequestCode::DeleteExpiredCommitlog => admin::delete_expired_commit_log(&self.admin),
            RequestCode::CleanExpiredConsumequeue => admin::clean_expired_consume_queue(&self.admin),
            RequestCode::ViewBrokerStatsData => admin::view_broker_stats_data(&self.admin, request),
            RequestCode::GetConsumeStats => admin::consume_stats(&self.admin, request),
            RequestCode::GetConsumerConnectionList => client_manage::consumer_connection_list(&self.client, request),
            RequestCode::GetProducerConnectionList => client_manage::producer_connection_list(&self.client, request),
            RequestCode::GetMinOffset => admin::min_offset(&self.admin, request),
            RequestCode::QueryBrokerOffset => admin::broker_offset(&self.admin),
            RequestCode::GetConsumerRunningInfo => client_manage::consumer_running_info(&self.client, request).await,
            RequestCode::ConsumeMessageDirectly => client_manage::consume_message_directly(&self.client, request).await,
            RequestCode::InvokeBrokerToGetConsumerStatus => client_manage::consumer_status(&self.client, request).await,
            RequestCode::InvokeBrokerToResetOffset => {
                Ok(crate::processors::offset_reset::invoke_broker_to_reset_offset(&self.client, request).await)
            }
            RequestCode::SearchOffsetByTimestamp => query::search_offset_by_timestamp(&ctx.store, request),
            RequestCode::GetEarliestMsgStoretime => query::earliest_msg_storetime(&ctx.store, request),
            RequestCode::QueryMessage => query::query_message(&ctx.store, request),
            RequestCode::ViewMessageById => query::view_message_by_id(&ctx.store, request),
            RequestCode::RaftAddNode => admin::add_node(&self.admin, request).await,
            RequestCode::RaftRemoveNode => admin::remove_node(&self.admin, request).await,
            RequestCode::RaftTransferLeadership => admin::transfer_leadership(&self.admin, request).await,
            RequestCode::RaftGroupStatus => admin::group_status(&self.admin),
            RequestCode::RaftNodeRemoved => admin::node_removed(&self.admin, request),
            RequestCode::UpdateAndCreateAclConfig => {
                crate::processors::acl::update_and_create_acl_config(&self.acl, request).await
            }
            RequestCode::DeleteAclConfig => crate::processors::acl::delete_acl_config(&self.acl, request).await,
            RequestCode::UpdateGlobalWhiteAddrsConfig => {
                crate::processors::acl::update_global_white_addrs_config(&self.acl, request).await
            }
            RequestCode::GetBrokerClusterAclInfo => crate::processors::acl::broker_cluster_acl_info(&self.acl),
            RequestCode::GetBrokerClusterAclConfig => crate::processors::acl::broker_cluster_acl_config(&self.acl),
            _ => Err(raftmq_common::remoting::processor::not_supported(request)),
        };
        result.unwrap_or_else(|refusal| refusal)
    }
}
