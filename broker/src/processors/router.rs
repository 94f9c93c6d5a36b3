//! `BrokerProcessor`: the broker's remoting entry point. Every request code the broker serves is
//! registered here ([`SERVED_CODES`]) and routed to its processor module; anything else gets the
//! transport's REQUEST_CODE_NOT_SUPPORTED. The router owns the [`crate::context::BrokerContext`]
//! and is the only file that knows every processor.
//!
//! ```text
//! RemotingServer ──code──▶ BrokerProcessor::process
//!    SEND_MESSAGE(_V2) / SEND_BATCH_MESSAGE ─▶ send ─▶ group_commit ─▶ raft
//!    CONSUMER_SEND_MSG_BACK ───────────────▶ send_back (%RETRY% via SCHEDULE_TOPIC_XXXX, or %DLQ%)
//!    PULL_MESSAGE ─────────────────────────▶ pull (long polling on the store)
//!    HEART_BEAT, UNREGISTER_CLIENT, offsets, locks ─▶ client_manage (offsets ─▶ offset_commit ─▶ raft)
//!    topics, groups, queue offsets ────────▶ admin (changes ─▶ raft)
//!    QUERY_MESSAGE, VIEW_MESSAGE_BY_ID, offsets by time ─▶ query (IndexFile, CommitLog reads)
//! ```

use std::sync::Arc;

use raftmq_common::protocol::RemotingCommand;
use raftmq_common::protocol::RequestCode;
use raftmq_common::remoting::ConnectionContext;
use raftmq_common::remoting::RequestProcessor;

use crate::context::BrokerContext;
use crate::processors::admin;
use crate::processors::client_manage;
use crate::processors::pull;
use crate::processors::query;
use crate::processors::send;
use crate::processors::send_back;

/// Request codes the broker answers.
pub const SERVED_CODES: &[RequestCode] = &[
    RequestCode::SendMessage,
    RequestCode::SendMessageV2,
    RequestCode::SendBatchMessage,
    RequestCode::SendReplyMessage,
    RequestCode::SendReplyMessageV2,
    RequestCode::ConsumerSendMsgBack,
    RequestCode::PullMessage,
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

/// The broker's request processor.
#[derive(Debug, Clone)]
pub struct BrokerProcessor {
    ctx: Arc<BrokerContext>,
}

impl BrokerProcessor {
    /// A processor over `ctx`.
    pub fn new(ctx: Arc<BrokerContext>) -> Self {
        BrokerProcessor { ctx }
    }
}

impl RequestProcessor for BrokerProcessor {
    async fn process(&self, conn: ConnectionContext, request: RemotingCommand) -> Option<RemotingCommand> {
        let ctx = &self.ctx;
        if let Some(acl) = &ctx.acl
            && let Err(denied) = acl.check(&request, conn.peer_addr().ip())
        {
            tracing::debug!(peer = %conn.peer_addr(), code = request.code, reason = %denied, "refused by the plain ACL");
            // Java answers an AclException from its RPC hook with SYSTEM_ERROR and the message.
            return Some(RemotingCommand::response(
                raftmq_common::protocol::ResponseCode::SystemError,
                Some(format!("AclException: {denied}")),
            ));
        }
        let result = match request.request_code() {
            RequestCode::SendMessage | RequestCode::SendMessageV2 | RequestCode::SendBatchMessage => {
                Ok(send::process_send(ctx, conn.peer_addr(), &request).await)
            }
            RequestCode::SendReplyMessage | RequestCode::SendReplyMessageV2 => {
                Ok(crate::processors::reply::process_reply(ctx, conn.peer_addr(), &request).await)
            }
            RequestCode::CheckClientConfig => client_manage::check_client_config(ctx, &request),
            RequestCode::EndTransaction => Ok(crate::processors::end_transaction::end_transaction(ctx, &request).await),
            RequestCode::ResumeCheckHalfMessage => {
                Ok(crate::processors::end_transaction::resume_check_half_message(ctx, &request).await)
            }
            RequestCode::ConsumerSendMsgBack => Ok(send_back::consumer_send_back(ctx, &request).await),
            RequestCode::PullMessage => Ok(pull::process_pull(Arc::clone(ctx), &request).await),
            RequestCode::HeartBeat => client_manage::heart_beat(ctx, &conn, &request),
            RequestCode::UnregisterClient => client_manage::unregister_client(ctx, &conn, &request),
            RequestCode::GetConsumerListByGroup => client_manage::consumer_list(ctx, &request),
            RequestCode::QueryConsumerOffset => client_manage::query_consumer_offset(ctx, &request).await,
            RequestCode::UpdateConsumerOffset => client_manage::update_consumer_offset(ctx, &request).await,
            RequestCode::LockBatchMq => client_manage::lock_batch(ctx, &request),
            RequestCode::UnlockBatchMq => client_manage::unlock_batch(ctx, &request),
            RequestCode::UpdateAndCreateTopic => admin::update_and_create_topic(ctx, &request).await,
            RequestCode::GetAllTopicConfig => admin::all_topic_config(ctx),
            RequestCode::DeleteTopicInBroker => admin::delete_topic(ctx, &request).await,
            RequestCode::UpdateAndCreateSubscriptiongroup => admin::update_and_create_group(ctx, &request).await,
            RequestCode::GetAllSubscriptiongroupConfig => admin::all_group_config(ctx),
            RequestCode::DeleteSubscriptiongroup => admin::delete_group(ctx, &request).await,
            RequestCode::GetAllConsumerOffset => admin::all_consumer_offset(ctx),
            RequestCode::GetAllDelayOffset => admin::all_delay_offset(ctx),
            RequestCode::GetSystemTopicListFromBroker => admin::system_topic_list(ctx),
            RequestCode::GetMaxOffset => admin::max_offset(ctx, &request),
            RequestCode::GetTopicStatsInfo => admin::topic_stats_info(ctx, &request),
            RequestCode::GetBrokerRuntimeInfo => admin::broker_runtime_info(ctx),
            RequestCode::GetBrokerConfig => admin::broker_config(ctx),
            RequestCode::UpdateBrokerConfig => admin::update_broker_config(ctx, &request),
            RequestCode::CloneGroupOffset => admin::clone_group_offset(ctx, &request).await,
            RequestCode::GetBrokerConsumeStats => admin::broker_consume_stats(ctx, &request),
            RequestCode::QueryTopicConsumeByWho => admin::topic_consume_by_who(ctx, &request),
            RequestCode::QueryConsumeTimeSpan => admin::consume_time_span(ctx, &request),
            RequestCode::QueryConsumeQueue => admin::query_consume_queue(ctx, &request),
            RequestCode::DeleteExpiredCommitlog => admin::delete_expired_commit_log(ctx),
            RequestCode::CleanExpiredConsumequeue => admin::clean_expired_consume_queue(ctx),
            RequestCode::ViewBrokerStatsData => admin::view_broker_stats_data(ctx, &request),
            RequestCode::GetConsumeStats => admin::consume_stats(ctx, &request),
            RequestCode::GetConsumerConnectionList => client_manage::consumer_connection_list(ctx, &request),
            RequestCode::GetProducerConnectionList => client_manage::producer_connection_list(ctx, &request),
            RequestCode::GetMinOffset => admin::min_offset(ctx, &request),
            RequestCode::QueryBrokerOffset => admin::broker_offset(ctx),
            RequestCode::GetConsumerRunningInfo => client_manage::consumer_running_info(ctx, &request).await,
            RequestCode::ConsumeMessageDirectly => client_manage::consume_message_directly(ctx, &request).await,
            RequestCode::InvokeBrokerToGetConsumerStatus => client_manage::consumer_status(ctx, &request).await,
            RequestCode::InvokeBrokerToResetOffset => {
                Ok(crate::processors::offset_reset::invoke_broker_to_reset_offset(ctx, &request).await)
            }
            RequestCode::SearchOffsetByTimestamp => query::search_offset_by_timestamp(&ctx.store, &request),
            RequestCode::GetEarliestMsgStoretime => query::earliest_msg_storetime(&ctx.store, &request),
            RequestCode::QueryMessage => query::query_message(&ctx.store, &request),
            RequestCode::ViewMessageById => query::view_message_by_id(&ctx.store, &request),
            RequestCode::RaftAddNode => admin::add_node(ctx, &request).await,
            RequestCode::RaftRemoveNode => admin::remove_node(ctx, &request).await,
            RequestCode::RaftTransferLeadership => admin::transfer_leadership(ctx, &request).await,
            RequestCode::RaftGroupStatus => admin::group_status(ctx),
            RequestCode::RaftNodeRemoved => admin::node_removed(ctx, &request),
            RequestCode::UpdateAndCreateAclConfig => {
                crate::processors::acl::update_and_create_acl_config(ctx, &request).await
            }
            RequestCode::DeleteAclConfig => crate::processors::acl::delete_acl_config(ctx, &request).await,
            RequestCode::UpdateGlobalWhiteAddrsConfig => {
                crate::processors::acl::update_global_white_addrs_config(ctx, &request).await
            }
            RequestCode::GetBrokerClusterAclInfo => crate::processors::acl::broker_cluster_acl_info(ctx),
            RequestCode::GetBrokerClusterAclConfig => crate::processors::acl::broker_cluster_acl_config(ctx),
            _ => Err(raftmq_common::remoting::processor::not_supported(&request)),
        };
        Some(result.unwrap_or_else(|refusal| refusal))
    }
}
