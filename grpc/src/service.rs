//! `Messaging`: the `apache.rocketmq.v2.MessagingService` of one broker replica. Each RPC answers
//! with a proto `Status` in its response, as RocketMQ's proxy does; an RPC raftmq does not serve
//! yet answers gRPC UNIMPLEMENTED with a message at once, so no call hangs.
//!
//! Served: QueryRoute, Heartbeat, SendMessage, QueryAssignment, EndTransaction, Telemetry,
//! NotifyClientTermination. Not yet (POP consumption and offsets, issue 33's next slices):
//! ReceiveMessage, AckMessage, ChangeInvisibleDuration, ForwardMessageToDeadLetterQueue,
//! PullMessage, UpdateOffset, GetOffset, QueryOffset, RecallMessage, SyncLiteSubscription.
//!
//! Writes go through `raftmq_broker`'s `Bridge`: the remoting processors on the leader, relayed
//! there by a follower.

use std::net::SocketAddr;

use futures::stream::BoxStream;
use raftmq_broker::processors::bridge::Bridge;
use raftmq_broker::state::store::now_ms;
use raftmq_common::limits::GRPC_SEND_MESSAGES_MAX_COUNT;
use raftmq_common::message::validate::validate_group;
use raftmq_common::message::validate::validate_topic;
use tokio_util::sync::CancellationToken;
use tonic::Request;
use tonic::Response;
use tonic::Streaming;

use crate::pb::*;
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
        "raftmq does not serve {rpc} yet: POP consumption over gRPC is not implemented; \
         consume with a remoting (4.x) consumer"
    )))
}

/// The topic a resource names; namespaces are not supported.
fn topic_of(resource: Option<&Resource>) -> Result<(&Resource, &str), Status> {
    let resource = resource.ok_or_else(|| status(Code::IllegalTopic, "the topic is missing"))?;
    if !resource.resource_namespace.is_empty() {
        return Err(status(Code::BadRequest, "raftmq has no namespaces: leave resource_namespace empty"));
    }
    validate_topic(&resource.name).map_err(|e| status(Code::IllegalTopic, e.to_string()))?;
    Ok((resource, resource.name.as_str()))
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

    fn route(&self, request: &QueryRouteRequest) -> Result<Vec<MessageQueue>, Status> {
        let (resource, topic) = topic_of(request.topic.as_ref())?;
        let config = self
            .bridge
            .topic(topic)
            .ok_or_else(|| status(Code::TopicNotFound, format!("topic {topic} does not exist on this cluster")))?;
        let endpoints = route_endpoints(request.endpoints.as_ref(), self.own_endpoints());
        Ok(message_queues(resource, &config, &self.bridge.config().broker_name, &endpoints))
    }

    fn assignment(&self, request: &QueryAssignmentRequest) -> Result<Vec<Assignment>, Status> {
        let (resource, topic) = topic_of(request.topic.as_ref())?;
        let group = request.group.as_ref().map(|g| g.name.as_str()).unwrap_or_default();
        validate_group(group).map_err(|e| status(Code::IllegalConsumerGroup, e.to_string()))?;
        let config = self
            .bridge
            .topic(topic)
            .ok_or_else(|| status(Code::TopicNotFound, format!("topic {topic} does not exist on this cluster")))?;
        let endpoints = route_endpoints(request.endpoints.as_ref(), self.own_endpoints());
        Ok(assignments(resource, &config, &self.bridge.config().broker_name, &endpoints))
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

    fn server_settings(&self) -> ServerSettings {
        ServerSettings { max_body_bytes: self.bridge.max_message_size_bytes() }
    }
}

#[tonic::async_trait]
impl messaging_service_server::MessagingService for Messaging {
    async fn query_route(&self, request: Request<QueryRouteRequest>) -> Answer<QueryRouteResponse> {
        let response = match self.route(request.get_ref()) {
            Ok(message_queues) => QueryRouteResponse { status: Some(ok()), message_queues },
            Err(refused) => QueryRouteResponse { status: Some(refused), message_queues: Vec::new() },
        };
        Ok(Response::new(response))
    }

    async fn heartbeat(&self, _request: Request<HeartbeatRequest>) -> Answer<HeartbeatResponse> {
        Ok(Response::new(HeartbeatResponse { status: Some(ok()) }))
    }

    async fn send_message(&self, request: Request<SendMessageRequest>) -> Answer<SendMessageResponse> {
        let peer = Self::peer(&request);
        Ok(Response::new(self.send(peer, request.into_inner()).await))
    }

    async fn query_assignment(&self, request: Request<QueryAssignmentRequest>) -> Answer<QueryAssignmentResponse> {
        let response = match self.assignment(request.get_ref()) {
            Ok(assignments) => QueryAssignmentResponse { status: Some(ok()), assignments },
            Err(refused) => QueryAssignmentResponse { status: Some(refused), assignments: Vec::new() },
        };
        Ok(Response::new(response))
    }

    type ReceiveMessageStream = BoxStream<'static, Result<ReceiveMessageResponse, tonic::Status>>;

    async fn receive_message(&self, _request: Request<ReceiveMessageRequest>) -> Answer<Self::ReceiveMessageStream> {
        not_served("ReceiveMessage")
    }

    async fn ack_message(&self, _request: Request<AckMessageRequest>) -> Answer<AckMessageResponse> {
        not_served("AckMessage")
    }

    async fn forward_message_to_dead_letter_queue(
        &self,
        _request: Request<ForwardMessageToDeadLetterQueueRequest>,
    ) -> Answer<ForwardMessageToDeadLetterQueueResponse> {
        not_served("ForwardMessageToDeadLetterQueue")
    }

    type PullMessageStream = BoxStream<'static, Result<PullMessageResponse, tonic::Status>>;

    async fn pull_message(&self, _request: Request<PullMessageRequest>) -> Answer<Self::PullMessageStream> {
        not_served("PullMessage")
    }

    async fn update_offset(&self, _request: Request<UpdateOffsetRequest>) -> Answer<UpdateOffsetResponse> {
        not_served("UpdateOffset")
    }

    async fn get_offset(&self, _request: Request<GetOffsetRequest>) -> Answer<GetOffsetResponse> {
        not_served("GetOffset")
    }

    async fn query_offset(&self, _request: Request<QueryOffsetRequest>) -> Answer<QueryOffsetResponse> {
        not_served("QueryOffset")
    }

    async fn end_transaction(&self, request: Request<EndTransactionRequest>) -> Answer<EndTransactionResponse> {
        let peer = Self::peer(&request);
        let status = match end_transaction_command(request.get_ref()) {
            Ok(command) => {
                let answer = self.bridge.answer(peer, command).await;
                of_remoting(answer.response_code(), answer.remark.as_deref())
            }
            Err(refused) => refused,
        };
        Ok(Response::new(EndTransactionResponse { status: Some(status) }))
    }

    type TelemetryStream = BoxStream<'static, Result<TelemetryCommand, tonic::Status>>;

    async fn telemetry(&self, request: Request<Streaming<TelemetryCommand>>) -> Answer<Self::TelemetryStream> {
        let stream = telemetry_stream::open(
            self.bridge.clone(),
            self.server_settings(),
            request.into_inner(),
            self.stopping.clone(),
        );
        Ok(Response::new(stream))
    }

    async fn notify_client_termination(
        &self,
        _request: Request<NotifyClientTerminationRequest>,
    ) -> Answer<NotifyClientTerminationResponse> {
        Ok(Response::new(NotifyClientTerminationResponse { status: Some(ok()) }))
    }

    async fn change_invisible_duration(
        &self,
        _request: Request<ChangeInvisibleDurationRequest>,
    ) -> Answer<ChangeInvisibleDurationResponse> {
        not_served("ChangeInvisibleDuration")
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
