//! `Messaging`: the `apache.rocketmq.v2.MessagingService` of one broker replica. Each RPC answers
//! with a proto `Status` in its response, as RocketMQ's proxy does; an RPC raftmq does not serve
//! yet answers gRPC UNIMPLEMENTED with a message at once, so no call hangs.
//!
//! Served: QueryRoute, Heartbeat, SendMessage, QueryAssignment, EndTransaction, Telemetry (with
//! transaction check-back), NotifyClientTermination, POP consumption (ReceiveMessage,
//! AckMessage, ChangeInvisibleDuration, ForwardMessageToDeadLetterQueue) and offsets (UpdateOffset,
//! GetOffset, QueryOffset). Not yet: PullMessage, RecallMessage, SyncLiteSubscription.
//!
//! Under `aclEnable` every call is admitted first ([`crate::acl`]: its credentials, what it needs)
//! or answered gRPC PERMISSION_DENIED with the ACL's reason, as Java's proxy answers; an admitted
//! call's requests are signed as its account (`Bridge::admit_grpc`).
//!
//! Requests go through `raftmq_broker`'s `Bridge`: the remoting processors on the leader, relayed
//! there by a follower. ReceiveMessage answers its stream at once and waits inside it, so its long
//! polling is bounded by the call's own deadline, not the server's per-call timeout; a follower's
//! relay of it waits for the leader's long polling too.

use std::net::IpAddr;
use std::net::SocketAddr;
use std::time::Duration;

use futures::StreamExt;
use futures::stream::BoxStream;
use raftmq_broker::acl::AclDenied;
use raftmq_broker::acl::GrpcCredentials;
use raftmq_broker::processors::bridge::Bridge;
use raftmq_broker::state::store::now_ms;
use raftmq_common::limits::GRPC_LONG_POLLING_MAX_MS;
use raftmq_common::limits::GRPC_RECEIVE_INVISIBLE_DEFAULT_MS;
use raftmq_common::limits::GRPC_SEND_MESSAGES_MAX_COUNT;
use raftmq_common::message::validate::validate_group;
use raftmq_common::message::validate::validate_topic;
use tokio_util::sync::CancellationToken;
use tonic::Request;
use tonic::Response;
use tonic::Streaming;

use crate::ack;
use crate::acl;
use crate::acl::Needs;
use crate::namespace::Namespaced;
use crate::offset;
use crate::pb::*;
use crate::receive;
use crate::receive::ReceiveLimits;
use crate::route::assignments;
use crate::route::endpoints_of;
use crate::route::message_queues;
use crate::route::route_endpoints;
use crate::send::SendLimits;
use crate::send::overall_status;
use crate::send::result_entry;
use crate::send::send_plan;
use crate::status::of_remoting;
use crate::status::ok;
use crate::status::status;
use crate::telemetry::ServerSettings;
use crate::telemetry_stream;
use crate::transaction::end_transaction_command;

/// A call's gRPC result.
type Answer<T> = Result<Response<T>, tonic::Status>;

/// How a receive is bounded.
const RECEIVE_LIMITS: ReceiveLimits = ReceiveLimits {
    polling_default_ms: GRPC_LONG_POLLING_MAX_MS,
    polling_max_ms: GRPC_LONG_POLLING_MAX_MS,
    invisible_default_ms: GRPC_RECEIVE_INVISIBLE_DEFAULT_MS,
};

/// The MessagingService of one replica.
#[derive(Debug, Clone)]
pub struct Messaging {
    bridge: Bridge,
    /// The bound gRPC port (what routes name for this replica).
    grpc_port: u16,
    /// Cancelled at shutdown: ends every open Telemetry stream, so the server can drain.
    stopping: CancellationToken,
}

/// UNIMPLEMENTED for an RPC raftmq does not serve yet.
fn not_served<T>(rpc: &str) -> Answer<T> {
    Err(tonic::Status::unimplemented(format!(
        "raftmq does not serve {rpc} yet: consume with POP (ReceiveMessage) or a remoting (4.x) consumer"
    )))
}

/// The topic a resource names (its namespace already joined), checked.
fn topic_of(resource: Option<&Resource>) -> Result<&str, Status> {
    let resource = resource.ok_or_else(|| status(Code::IllegalTopic, "the topic is missing"))?;
    validate_topic(&resource.name).map_err(|e| status(Code::IllegalTopic, e.to_string()))?;
    Ok(resource.name.as_str())
}

impl Messaging {
    /// The service over `bridge`, answering routes with `grpc_port`.
    pub fn new(bridge: Bridge, grpc_port: u16, stopping: CancellationToken) -> Self {
        Messaging { bridge, grpc_port, stopping }
    }

    fn own_endpoints(&self) -> Endpoints {
        endpoints_of(&self.bridge.config().broker_ip(), self.grpc_port)
    }

    fn peer<T>(request: &Request<T>) -> SocketAddr {
        request.remote_addr().unwrap_or_else(|| SocketAddr::from(([0, 0, 0, 0], 0)))
    }

    /// The service acting for `request` once the ACL admits it ([`Bridge::admit_grpc`] with the
    /// call's credentials and what `needs` says it touches), or PERMISSION_DENIED with the reason.
    /// Without `aclEnable`, this service. Every RPC's first step: it joins the request's
    /// namespaces into its names ([`Namespaced`]) first.
    fn admit<T: Namespaced>(
        &self,
        request: &mut Request<T>,
        needs: impl FnOnce(&T) -> Result<Needs, AclDenied>,
    ) -> Result<Messaging, tonic::Status> {
        // Before anything reads a name, the ACL included: an account granted `T` must not reach
        // `ns%T`.
        request.get_mut().join_namespace();
        if !self.bridge.acl_enabled() {
            return Ok(self.clone());
        }
        let credentials = acl::credentials(request.metadata()).map_err(acl::denied)?;
        let needed = needs(request.get_ref()).map_err(acl::denied)?;
        let bridge = self.admit_as(credentials.as_ref(), Self::peer(request).ip(), &needed)?;
        Ok(Messaging { bridge, grpc_port: self.grpc_port, stopping: self.stopping.clone() })
    }

    /// [`Bridge::admit_grpc`], a refusal logged and answered PERMISSION_DENIED.
    fn admit_as(
        &self,
        credentials: Option<&GrpcCredentials>,
        peer: IpAddr,
        needed: &[(raftmq_broker::acl::Resource, u8)],
    ) -> Result<Bridge, tonic::Status> {
        self.bridge.admit_grpc(credentials, peer, needed).map_err(|refusal| {
            tracing::debug!(%peer, reason = %refusal, "gRPC call refused by the ACL");
            acl::denied(refusal)
        })
    }

    /// The queues of the topic `request` names; they name it as the client did (`asked`).
    fn route(&self, request: &QueryRouteRequest, asked: &Resource) -> Result<Vec<MessageQueue>, Status> {
        let topic = topic_of(request.topic.as_ref())?;
        let config = self
            .bridge
            .topic(topic)
            .ok_or_else(|| status(Code::TopicNotFound, format!("topic {topic} does not exist on this cluster")))?;
        let endpoints = route_endpoints(request.endpoints.as_ref(), self.own_endpoints());
        Ok(message_queues(asked, &config, &self.bridge.config().broker_name, &endpoints))
    }

    /// The assignments of the topic `request` names; they name it as the client did (`asked`).
    fn assignment(&self, request: &QueryAssignmentRequest, asked: &Resource) -> Result<Vec<Assignment>, Status> {
        let topic = topic_of(request.topic.as_ref())?;
        let group = request.group.as_ref().map(|g| g.name.as_str()).unwrap_or_default();
        validate_group(group).map_err(|e| status(Code::IllegalConsumerGroup, e.to_string()))?;
        let config = self
            .bridge
            .topic(topic)
            .ok_or_else(|| status(Code::TopicNotFound, format!("topic {topic} does not exist on this cluster")))?;
        let endpoints = route_endpoints(request.endpoints.as_ref(), self.own_endpoints());
        Ok(assignments(asked, &config, &self.bridge.config().broker_name, &endpoints))
    }

    async fn send(&self, peer: SocketAddr, request: SendMessageRequest) -> SendMessageResponse {
        if request.messages.is_empty() || request.messages.len() > GRPC_SEND_MESSAGES_MAX_COUNT {
            let why =
                format!("a send carries 1 to {GRPC_SEND_MESSAGES_MAX_COUNT} messages, not {}", request.messages.len());
            return SendMessageResponse { status: Some(status(Code::BadRequest, why)), entries: Vec::new() };
        }
        let limits = SendLimits { body_max_bytes: self.bridge.max_message_size_bytes() as usize };
        let mut entries = Vec::with_capacity(request.messages.len());
        for message in &request.messages {
            let topic = message.topic.as_ref().and_then(|t| self.bridge.topic(&t.name));
            let entry = match send_plan(message, topic.as_ref(), limits, now_ms() as i64) {
                Ok(plan) => {
                    let answer = self.bridge.answer(peer, plan.command.clone()).await;
                    result_entry(&plan, &answer)
                }
                Err(refused) => SendResultEntry {
                    status: Some(refused),
                    message_id: message.system_properties.as_ref().map(|sp| sp.message_id.clone()).unwrap_or_default(),
                    ..Default::default()
                },
            };
            entries.push(entry);
        }
        SendMessageResponse { status: Some(overall_status(&entries)), entries }
    }

    /// The responses of one receive.
    async fn receive(
        bridge: Bridge,
        peer: SocketAddr,
        request: ReceiveMessageRequest,
        deadline: Option<Duration>,
    ) -> Vec<ReceiveMessageResponse> {
        let group = request.group.as_ref().map(|g| g.name.as_str()).unwrap_or_default();
        let fifo = bridge.subscription_group(group).is_some_and(|c| receive::is_fifo(&c));
        // A follower's relay waits for the leader's long polling too (`relay_hold_ms`).
        let responses = match receive::pop_command(&request, fifo, deadline, RECEIVE_LIMITS, now_ms() as i64) {
            Ok(command) => {
                let answer = bridge.answer(peer, command).await;
                receive::receive_responses(&answer, &bridge.config().broker_name)
            }
            Err(refused) => vec![receive::status_response(refused)],
        };
        receive::completed(responses, now_ms() as i64)
    }

    async fn ack(&self, peer: SocketAddr, request: AckMessageRequest) -> AckMessageResponse {
        let refused = |s: Status| AckMessageResponse { status: Some(s), entries: Vec::new() };
        let group = match receive::group_of(request.group.as_ref()) {
            Ok(g) => g,
            Err(s) => return refused(s),
        };
        let topic = match receive::topic_name(request.topic.as_ref()) {
            Ok(t) => t,
            Err(s) => return refused(s),
        };
        if request.entries.is_empty() {
            return refused(status(Code::BadRequest, "no entry to acknowledge"));
        }
        let broker_name = &self.bridge.config().broker_name;
        let entries = futures::future::join_all(request.entries.iter().map(|entry| async move {
            let status = match ack::receipt(&entry.receipt_handle, broker_name) {
                Ok(receipt) => {
                    let answer = self.bridge.answer(peer, ack::ack_command(group, topic, &receipt)).await;
                    ack::receipt_answer_status(&answer)
                }
                Err(invalid) => invalid,
            };
            ack::ack_result(&entry.message_id, &entry.receipt_handle, status)
        }))
        .await;
        AckMessageResponse { status: Some(ack::overall_status(&entries)), entries }
    }

    async fn change_invisible(
        &self,
        peer: SocketAddr,
        request: &ChangeInvisibleDurationRequest,
    ) -> Result<ChangeInvisibleDurationResponse, Status> {
        let group = receive::group_of(request.group.as_ref())?;
        let topic = receive::topic_name(request.topic.as_ref())?;
        let (command, old) = ack::change_command(request, group, topic, &self.bridge.config().broker_name)?;
        let answer = self.bridge.answer(peer, command).await;
        let (status, receipt_handle) = ack::change_answer(&answer, &old);
        Ok(ChangeInvisibleDurationResponse { status: Some(status), receipt_handle })
    }

    /// The proxy's dead-letter forward: the message sent back straight to `%DLQ%<group>`, then
    /// its handle acked.
    async fn dead_letter(&self, peer: SocketAddr, request: &ForwardMessageToDeadLetterQueueRequest) -> Status {
        let checked = receive::group_of(request.group.as_ref())
            .and_then(|g| receive::topic_name(request.topic.as_ref()).map(|t| (g, t)))
            .and_then(|(g, t)| {
                ack::receipt(&request.receipt_handle, &self.bridge.config().broker_name).map(|r| (g, t, r))
            });
        let (group, topic, receipt) = match checked {
            Ok(c) => c,
            Err(refused) => return refused,
        };
        let stored_topic = receipt.stored_topic(group, topic);
        let Some(commit_log_offset) = u64::try_from(receipt.queue_offset)
            .ok()
            .and_then(|offset| self.bridge.commit_log_offset(&stored_topic, receipt.info.queue_id, offset))
        else {
            return status(Code::InvalidReceiptHandle, "the message the receipt handle names is not stored here");
        };
        let command = ack::dead_letter_command(group, topic, &request.message_id, commit_log_offset);
        let answer = self.bridge.answer(peer, command).await;
        let sent = of_remoting(answer.response_code(), answer.remark.as_deref());
        if sent.code != Code::Ok as i32 {
            return sent;
        }
        let acked = self.bridge.answer(peer, ack::ack_command(group, topic, &receipt)).await;
        let acked = ack::receipt_answer_status(&acked);
        if acked.code != Code::Ok as i32 {
            // Already in the dead-letter queue; the handle was stale, so it may be delivered again.
            tracing::debug!(status = ?acked, "dead-lettered message not acked");
        }
        sent
    }

    /// The queue a request names, checked against this broker group and the topics here.
    fn queue<'a>(&self, queue: Option<&'a MessageQueue>) -> Result<offset::QueueRef<'a>, Status> {
        offset::queue_of(queue, &self.bridge.config().broker_name, |topic| self.bridge.topic(topic))
    }

    async fn commit_offset(&self, peer: SocketAddr, request: &UpdateOffsetRequest) -> Status {
        let command = receive::group_of(request.group.as_ref()).and_then(|group| {
            self.queue(request.message_queue.as_ref()).and_then(|q| offset::update_command(group, q, request.offset))
        });
        match command {
            Ok(command) => offset::update_answer(&self.bridge.answer(peer, command).await),
            Err(refused) => refused,
        }
    }

    async fn committed_offset(&self, peer: SocketAddr, request: &GetOffsetRequest) -> (Status, i64) {
        let command = receive::group_of(request.group.as_ref())
            .and_then(|group| self.queue(request.message_queue.as_ref()).map(|q| offset::get_command(group, q)));
        match command {
            Ok(command) => offset::get_answer(&self.bridge.answer(peer, command).await),
            Err(refused) => (refused, 0),
        }
    }

    async fn offset_by_policy(&self, peer: SocketAddr, request: &QueryOffsetRequest) -> (Status, i64) {
        let timestamp_ms = request.timestamp.as_ref().map(offset::timestamp_ms);
        let command = self
            .queue(request.message_queue.as_ref())
            .and_then(|q| offset::query_command(request.query_offset_policy, timestamp_ms, q));
        match command {
            Ok(command) => {
                let request_code = command.request_code();
                offset::query_answer(&self.bridge.answer(peer, command).await, request_code)
            }
            Err(refused) => (refused, 0),
        }
    }

    fn server_settings(&self) -> ServerSettings {
        ServerSettings { max_body_bytes: self.bridge.max_message_size_bytes() }
    }
}

#[tonic::async_trait]
impl messaging_service_server::MessagingService for Messaging {
    async fn query_route(&self, mut request: Request<QueryRouteRequest>) -> Answer<QueryRouteResponse> {
        let asked = request.get_ref().topic.clone().unwrap_or_default();
        let this = self.admit(&mut request, |r| Ok(acl::query_route(r)))?;
        let response = match this.route(request.get_ref(), &asked) {
            Ok(message_queues) => QueryRouteResponse { status: Some(ok()), message_queues },
            Err(refused) => QueryRouteResponse { status: Some(refused), message_queues: Vec::new() },
        };
        Ok(Response::new(response))
    }

    async fn heartbeat(&self, mut request: Request<HeartbeatRequest>) -> Answer<HeartbeatResponse> {
        self.admit(&mut request, acl::heartbeat)?;
        Ok(Response::new(HeartbeatResponse { status: Some(ok()) }))
    }

    async fn send_message(&self, mut request: Request<SendMessageRequest>) -> Answer<SendMessageResponse> {
        let this = self.admit(&mut request, acl::send)?;
        let peer = Self::peer(&request);
        Ok(Response::new(this.send(peer, request.into_inner()).await))
    }

    async fn query_assignment(&self, mut request: Request<QueryAssignmentRequest>) -> Answer<QueryAssignmentResponse> {
        let asked = request.get_ref().topic.clone().unwrap_or_default();
        let this = self.admit(&mut request, |r| Ok(acl::consuming(r.group.as_ref(), r.topic.as_ref())))?;
        let response = match this.assignment(request.get_ref(), &asked) {
            Ok(assignments) => QueryAssignmentResponse { status: Some(ok()), assignments },
            Err(refused) => QueryAssignmentResponse { status: Some(refused), assignments: Vec::new() },
        };
        Ok(Response::new(response))
    }

    type ReceiveMessageStream = BoxStream<'static, Result<ReceiveMessageResponse, tonic::Status>>;

    async fn receive_message(&self, mut request: Request<ReceiveMessageRequest>) -> Answer<Self::ReceiveMessageStream> {
        let this = self.admit(&mut request, |r| Ok(acl::receive(r)))?;
        let peer = Self::peer(&request);
        let deadline =
            request.metadata().get("grpc-timeout").and_then(|v| v.to_str().ok()).and_then(receive::grpc_timeout);
        let responses = Self::receive(this.bridge, peer, request.into_inner(), deadline);
        let stream = futures::stream::once(responses)
            .flat_map(|responses| futures::stream::iter(responses.into_iter().map(Ok)))
            .take_until(self.stopping.clone().cancelled_owned());
        Ok(Response::new(stream.boxed()))
    }

    async fn ack_message(&self, mut request: Request<AckMessageRequest>) -> Answer<AckMessageResponse> {
        let this = self.admit(&mut request, |r| Ok(acl::consuming(r.group.as_ref(), r.topic.as_ref())))?;
        let peer = Self::peer(&request);
        Ok(Response::new(this.ack(peer, request.into_inner()).await))
    }

    async fn forward_message_to_dead_letter_queue(
        &self,
        mut request: Request<ForwardMessageToDeadLetterQueueRequest>,
    ) -> Answer<ForwardMessageToDeadLetterQueueResponse> {
        let this = self.admit(&mut request, |r| Ok(acl::consuming(r.group.as_ref(), r.topic.as_ref())))?;
        let peer = Self::peer(&request);
        let status = this.dead_letter(peer, request.get_ref()).await;
        Ok(Response::new(ForwardMessageToDeadLetterQueueResponse { status: Some(status) }))
    }

    type PullMessageStream = BoxStream<'static, Result<PullMessageResponse, tonic::Status>>;

    async fn pull_message(&self, _request: Request<PullMessageRequest>) -> Answer<Self::PullMessageStream> {
        not_served("PullMessage")
    }

    async fn update_offset(&self, mut request: Request<UpdateOffsetRequest>) -> Answer<UpdateOffsetResponse> {
        let this = self.admit(&mut request, |r| Ok(acl::group_offset(r.group.as_ref(), r.message_queue.as_ref())))?;
        let peer = Self::peer(&request);
        let status = this.commit_offset(peer, request.get_ref()).await;
        Ok(Response::new(UpdateOffsetResponse { status: Some(status) }))
    }

    async fn get_offset(&self, mut request: Request<GetOffsetRequest>) -> Answer<GetOffsetResponse> {
        let this = self.admit(&mut request, |r| Ok(acl::group_offset(r.group.as_ref(), r.message_queue.as_ref())))?;
        let peer = Self::peer(&request);
        let (status, offset) = this.committed_offset(peer, request.get_ref()).await;
        Ok(Response::new(GetOffsetResponse { status: Some(status), offset }))
    }

    async fn query_offset(&self, mut request: Request<QueryOffsetRequest>) -> Answer<QueryOffsetResponse> {
        let this = self.admit(&mut request, |r| Ok(acl::topic_offset(r.message_queue.as_ref())))?;
        let peer = Self::peer(&request);
        let (status, offset) = this.offset_by_policy(peer, request.get_ref()).await;
        Ok(Response::new(QueryOffsetResponse { status: Some(status), offset }))
    }

    async fn end_transaction(&self, mut request: Request<EndTransactionRequest>) -> Answer<EndTransactionResponse> {
        let this = self.admit(&mut request, |r| Ok(acl::end_transaction(r)))?;
        let peer = Self::peer(&request);
        let status = match end_transaction_command(request.get_ref()) {
            Ok(command) => {
                let answer = this.bridge.answer(peer, command).await;
                of_remoting(answer.response_code(), answer.remark.as_deref())
            }
            Err(refused) => refused,
        };
        Ok(Response::new(EndTransactionResponse { status: Some(status) }))
    }

    type TelemetryStream = BoxStream<'static, Result<TelemetryCommand, tonic::Status>>;

    async fn telemetry(&self, request: Request<Streaming<TelemetryCommand>>) -> Answer<Self::TelemetryStream> {
        // The stream's commands are checked one by one (a `Settings` for what it names).
        let admission = match self.bridge.acl_enabled() {
            true => {
                let credentials = acl::credentials(request.metadata()).map_err(acl::denied)?;
                let peer = Self::peer(&request).ip();
                self.admit_as(credentials.as_ref(), peer, &[])?;
                Some(telemetry_stream::Admission { credentials, peer })
            }
            false => None,
        };
        let stream = telemetry_stream::open(
            self.bridge.clone(),
            admission,
            self.server_settings(),
            request.into_inner(),
            self.stopping.clone(),
        );
        Ok(Response::new(stream))
    }

    async fn notify_client_termination(
        &self,
        mut request: Request<NotifyClientTerminationRequest>,
    ) -> Answer<NotifyClientTerminationResponse> {
        self.admit(&mut request, |r| Ok(acl::notify_client_termination(r)))?;
        Ok(Response::new(NotifyClientTerminationResponse { status: Some(ok()) }))
    }

    async fn change_invisible_duration(
        &self,
        mut request: Request<ChangeInvisibleDurationRequest>,
    ) -> Answer<ChangeInvisibleDurationResponse> {
        let this = self.admit(&mut request, |r| Ok(acl::consuming(r.group.as_ref(), r.topic.as_ref())))?;
        let peer = Self::peer(&request);
        let response = this.change_invisible(peer, request.get_ref()).await.unwrap_or_else(|refused| {
            ChangeInvisibleDurationResponse { status: Some(refused), receipt_handle: String::new() }
        });
        Ok(Response::new(response))
    }

    async fn recall_message(&self, _request: Request<RecallMessageRequest>) -> Answer<RecallMessageResponse> {
        not_served("RecallMessage")
    }

    async fn sync_lite_subscription(
        &self,
        _request: Request<SyncLiteSubscriptionRequest>,
    ) -> Answer<SyncLiteSubscriptionResponse> {
        not_served("SyncLiteSubscription")
    }
}
