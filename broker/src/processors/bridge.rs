//! `Bridge`: the requests that reach a replica over another protocol (the gRPC MessagingService
//! of `raftmq-grpc`), answered as remoting requests by the same processors, so a message sent over
//! gRPC takes exactly the remoting path: validation, the replicated send (acknowledged after quorum
//! fsync and apply), timer and half redirects, END_TRANSACTION.
//!
//! ```text
//! gRPC adapter ──RemotingCommand──▶ Bridge::answer
//!    ready leader ─▶ BrokerProcessor (ACL check, send / end_transaction / pop / offsets)
//!    follower, leader known ─▶ relayed once to the leader's remoting port (FLAG_RELAYED),
//!       except UPDATE_CONSUMER_OFFSET: the follower's own refusal, naming the leader;
//!       a relay that never reached the leader (gone) waits, as below, for the next one
//!    no ready leader known ─▶ waits (bounded) for one, then SERVICE_NOT_AVAILABLE naming the leader
//! ```
//!
//! Under `aclEnable` a gRPC call is admitted by its own credentials ([`Bridge::admit_grpc`],
//! `crate::acl::credentials`); the requests it turns into are then signed with its account's secret,
//! as a 4.x client signs, and checked again like any remoting request: here, or by the leader when
//! relayed (a relay forwards the signature unchanged).
//!
//! Transaction check-back reaches a gRPC producer through the checker its adapter registers
//! ([`Bridge::register_transaction_checker`]).
//!
//! Invariants: only [`BRIDGED_CODES`] are answered (anything else is REQUEST_CODE_NOT_SUPPORTED);
//! a bridged request has no connection, so nothing here registers a client channel; a relayed
//! request is never relayed again; [`NEVER_RELAYED_CODES`] are served only by the ready leader (a
//! relayed offset commit delayed in a connection could land after newer commits, docs/broker.md
//! invariants).

use std::net::IpAddr;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;
use std::time::Instant;

use raftmq_common::limits::BRIDGE_LEADER_POLL_MS;
use raftmq_common::limits::BRIDGE_LEADER_WAIT_MAX_MS;
use raftmq_common::protocol::RemotingCommand;
use raftmq_common::protocol::RequestCode;
use raftmq_common::protocol::acl::SessionCredentials;
use raftmq_common::protocol::body::subscription_group::SubscriptionGroupConfig;
use raftmq_common::protocol::body::topic::TopicConfig;

use crate::acl::AclDenied;
use crate::acl::GrpcCaller;
use crate::acl::GrpcCredentials;
use crate::acl::Resource;
use crate::config::broker_config::BrokerConfig;
use crate::context::BrokerContext;
use crate::processors::client_manage::relay;
use crate::processors::router::BrokerProcessor;
use crate::services::transaction_checker::CheckerRegistration;
use crate::services::transaction_checker::TransactionChecker;

/// The request codes a bridge answers.
pub const BRIDGED_CODES: &[RequestCode] = &[
    RequestCode::SendMessage,
    RequestCode::EndTransaction,
    RequestCode::PopMessage,
    RequestCode::AckMessage,
    RequestCode::ChangeMessageInvisibletime,
    // A gRPC consumer's ForwardMessageToDeadLetterQueue (straight to `%DLQ%<group>`).
    RequestCode::ConsumerSendMsgBack,
    // UpdateOffset, GetOffset, QueryOffset (BEGINNING, END, TIMESTAMP).
    RequestCode::UpdateConsumerOffset,
    RequestCode::QueryConsumerOffset,
    RequestCode::GetMinOffset,
    RequestCode::GetMaxOffset,
    RequestCode::SearchOffsetByTimestamp,
];

/// Bridged codes a follower answers itself (with the leader hint) instead of relaying.
pub const NEVER_RELAYED_CODES: &[RequestCode] = &[RequestCode::UpdateConsumerOffset];

/// One replica's processors as another protocol reaches them.
#[derive(Debug, Clone)]
pub struct Bridge {
    ctx: Arc<BrokerContext>,
    processor: BrokerProcessor,
    /// The account whose secret signs every request answered (a gRPC call admitted as it).
    signer: Option<Arc<str>>,
}

impl Bridge {
    pub(crate) fn new(ctx: Arc<BrokerContext>, processor: BrokerProcessor) -> Self {
        Bridge { ctx, processor, signer: None }
    }

    /// Whether requests are checked against a plain ACL (`aclEnable`).
    pub fn acl_enabled(&self) -> bool {
        self.ctx.acl.is_some()
    }

    /// Whether a gRPC call from `peer` presenting `credentials` may do what `needed` lists, under
    /// the ACL in force (`AclConfig::check_grpc`). If so: the bridge that answers the call's
    /// requests, signed as the account that was admitted (unsigned for a globally white-listed
    /// peer). Without `aclEnable`: this bridge, whatever the credentials.
    pub fn admit_grpc(
        &self,
        credentials: Option<&GrpcCredentials>,
        peer: IpAddr,
        needed: &[(Resource, u8)],
    ) -> Result<Bridge, AclDenied> {
        let Some(acl) = &self.ctx.acl else { return Ok(self.clone()) };
        let signer = match acl.current().check_grpc(credentials, peer, needed)? {
            GrpcCaller::Anonymous => None,
            GrpcCaller::Account(access_key) => Some(Arc::from(access_key)),
        };
        Ok(Bridge { signer, ..self.clone() })
    }

    /// `request` signed as the admitted account, with its secret in force now (an account removed
    /// since leaves it unsigned, and the check refuses it).
    fn signed(&self, mut request: RemotingCommand) -> RemotingCommand {
        let (Some(access_key), Some(acl)) = (&self.signer, &self.ctx.acl) else { return request };
        let config = acl.current();
        let Some(secret_key) = config.secret_key_of(access_key) else { return request };
        match SessionCredentials::new(access_key.as_ref(), secret_key) {
            Ok(credentials) => credentials.sign(&mut request),
            // An account the ACL file admits always has usable keys; refused unsigned otherwise.
            Err(e) => tracing::warn!(%access_key, error = %e, "cannot sign a gRPC call's request as its account"),
        }
        request
    }

    /// The config the replica booted with.
    pub fn config(&self) -> &BrokerConfig {
        &self.ctx.config
    }

    /// The topic's config, when the topic exists.
    pub fn topic(&self, topic: &str) -> Option<TopicConfig> {
        self.ctx.store.metadata().topics.get(topic).cloned()
    }

    /// The subscription group's config, when the group exists.
    pub fn subscription_group(&self, group: &str) -> Option<SubscriptionGroupConfig> {
        self.ctx.store.metadata().groups.get(group).cloned()
    }

    /// The CommitLog offset of message `queue_offset` of (`topic`, `queue_id`), when this replica
    /// has applied it (a gRPC dead-letter forward names a message by its queue and offset).
    pub fn commit_log_offset(&self, topic: &str, queue_id: i32, queue_offset: u64) -> Option<i64> {
        let queues = self.ctx.store.consume_queues();
        let unit = queues.get(topic, queue_id)?.unit_at(queue_offset)?;
        unit.is_message().then_some(unit.phy_offset)
    }

    /// Whether this replica leads and takes writes now.
    pub fn is_ready_leader(&self) -> bool {
        self.ctx.replica.ready_term().is_some()
    }

    /// The leader's remoting address, as far as this replica knows.
    pub fn leader_addr(&self) -> Option<String> {
        self.ctx.replica.leader_addr()
    }

    /// Registers `checker` as a producer of `group` for transaction check-back until the
    /// registration is dropped (a gRPC producer's Telemetry stream). Only the leader checks, so
    /// only producers whose stream reaches the leader's adapter are asked.
    pub fn register_transaction_checker(
        &self,
        group: &str,
        checker: Arc<dyn TransactionChecker>,
    ) -> CheckerRegistration {
        self.ctx.clients.transaction_checkers().register(group, checker)
    }

    /// `maxMessageSize` now (UPDATE_BROKER_CONFIG may have changed it).
    pub fn max_message_size_bytes(&self) -> u32 {
        self.ctx.live.current().max_message_size
    }

    /// The answer to `request` (one of [`BRIDGED_CODES`]) from a client at `peer`: served here
    /// when this replica is the ready leader, else relayed once to the leader; while no ready
    /// leader is known (an election, a new leader catching up) it waits up to
    /// `BRIDGE_LEADER_WAIT_MAX_MS` first. One of [`NEVER_RELAYED_CODES`] is answered by a follower
    /// itself: its refusal names the leader. A relay is tried again (on the next leader known,
    /// within the same wait) only when it never reached the leader (no connection); nothing is
    /// retried after a serve or a relay the leader may have processed, so no message is stored
    /// twice by the bridge.
    pub async fn answer(&self, peer: SocketAddr, request: RemotingCommand) -> RemotingCommand {
        if !BRIDGED_CODES.contains(&request.request_code()) {
            return raftmq_common::remoting::processor::not_supported(&request);
        }
        let request = self.signed(request);
        let broker_name = &self.ctx.config.broker_name;
        let own = self.ctx.config.broker_addr();
        let deadline = Instant::now() + Duration::from_millis(BRIDGE_LEADER_WAIT_MAX_MS);
        loop {
            if self.is_ready_leader() {
                return self.processor.answer_bridged(peer, &request).await;
            }
            if let Some(leader) = self.leader_addr().filter(|leader| *leader != own) {
                if NEVER_RELAYED_CODES.contains(&request.request_code()) {
                    return self.processor.answer_bridged(peer, &request).await;
                }
                match relay(&self.ctx.forwarder, &self.ctx.replica, broker_name, &leader, &request).await {
                    Ok(answer) => return answer,
                    // The leader this replica knows is gone (crashed, or deposed and not yet
                    // replaced here) and the request never reached it: wait for the next leader.
                    Err(e) if e.not_sent() && Instant::now() < deadline => {
                        tracing::debug!(%leader, error = ?e, "bridged request not relayed; waiting for a leader");
                    }
                    Err(e) => return e.into_response(),
                }
            } else if Instant::now() >= deadline {
                // The replica's own refusal, which names the leader when it knows one.
                return match self.ctx.replica.check_writable() {
                    Ok(_) => self.processor.answer_bridged(peer, &request).await,
                    Err(e) => e.to_response(broker_name),
                };
            }
            // Leadership and apply readiness have no joint subscription: look again shortly.
            tokio::time::sleep(Duration::from_millis(BRIDGE_LEADER_POLL_MS)).await;
        }
    }
}
