//! The sender of `raftmq bench grpc-send` (the `bench produce` run of `bench.rs`: same workers,
//! pacing, stop conditions, interval lines and `[Complete]` summary) over RocketMQ 5's gRPC
//! `MessagingService.SendMessage`, one message per call, as the official 5.x clients send a
//! single message.
//!
//! Endpoints: every address given gets one HTTP/2 channel (the 5.x clients' one connection per
//! endpoint, its calls multiplexed as streams), and calls go round the channels in turn. Any
//! replica serves SendMessage (a follower relays it to the leader, `raftmq_broker`'s `Bridge`), so
//! a list of every replica keeps working through a failover; the leader's endpoint alone measures
//! the gRPC path without the relay hop.
//!
//! Outcomes in the remoting run's terms: a call answered with a status other than OK is "Response
//! Failed"; a call with no answer (transport error, deadline) is "Send Failed".

use std::sync::atomic::AtomicU64;
use std::sync::atomic::Ordering;
use std::time::Duration;
use std::time::SystemTime;
use std::time::UNIX_EPOCH;

use anyhow::Context;
use anyhow::Result;
use anyhow::bail;
use bytes::Bytes;
use raftmq_grpc::pb::Code;
use raftmq_grpc::pb::Encoding;
use raftmq_grpc::pb::Message;
use raftmq_grpc::pb::MessageType;
use raftmq_grpc::pb::Resource;
use raftmq_grpc::pb::SendMessageRequest;
use raftmq_grpc::pb::SystemProperties;
use raftmq_grpc::pb::messaging_service_client::MessagingServiceClient;
use tonic::transport::Channel;
use tonic::transport::Endpoint;

use crate::bench_run::Outcome;

/// SendMessage calls over one channel per endpoint, in turn.
pub(crate) struct GrpcSender {
    clients: Vec<MessagingServiceClient<Channel>>,
    next: AtomicU64,
    timeout: Duration,
    /// Prefix of this run's message ids (unique per process and start time).
    id_prefix: String,
    born_host: String,
}

impl GrpcSender {
    /// Connects to every endpoint (each within `timeout`).
    pub(crate) async fn connect(endpoints: &str, timeout: Duration) -> Result<GrpcSender> {
        let addrs: Vec<&str> = endpoints.split([';', ',']).map(str::trim).filter(|a| !a.is_empty()).collect();
        if addrs.is_empty() {
            bail!("--endpoints names no address");
        }
        let mut clients = Vec::with_capacity(addrs.len());
        for addr in addrs {
            let uri = if addr.contains("://") { addr.to_owned() } else { format!("http://{addr}") };
            let channel = Endpoint::from_shared(uri)
                .with_context(|| format!("endpoint {addr:?}"))?
                .connect_timeout(timeout)
                .tcp_nodelay(true)
                .connect()
                .await
                .with_context(|| format!("connecting to gRPC endpoint {addr}"))?;
            clients.push(MessagingServiceClient::new(channel));
        }
        let since_epoch = SystemTime::now().duration_since(UNIX_EPOCH).unwrap_or_default();
        Ok(GrpcSender {
            clients,
            next: AtomicU64::new(0),
            timeout,
            id_prefix: format!("{:08X}{:010X}", std::process::id(), since_epoch.as_millis() & 0xFF_FFFF_FFFF),
            born_host: "127.0.0.1".to_owned(),
        })
    }

    /// Sends message `index` of the run and tells how the call ended.
    pub(crate) async fn send(&self, topic: &str, body: &Bytes, tag: Option<&str>, keys: bool, index: u64) -> Outcome {
        let now = SystemTime::now().duration_since(UNIX_EPOCH).unwrap_or_default();
        let message = Message {
            topic: Some(Resource { resource_namespace: String::new(), name: topic.to_owned() }),
            user_properties: Default::default(),
            system_properties: Some(SystemProperties {
                tag: tag.map(str::to_owned),
                keys: if keys { vec![index.to_string()] } else { Vec::new() },
                // Unique within the run and across runs: the 5.x clients' ids are 34 hex digits too.
                message_id: format!("{}{index:016X}", self.id_prefix),
                body_encoding: Encoding::Identity as i32,
                message_type: MessageType::Normal as i32,
                born_timestamp: Some(prost_types::Timestamp {
                    seconds: i64::try_from(now.as_secs()).unwrap_or(i64::MAX),
                    nanos: i32::try_from(now.subsec_nanos()).unwrap_or(0),
                }),
                born_host: self.born_host.clone(),
                queue_id: -1,
                ..Default::default()
            }),
            body: body.to_vec(),
        };
        let mut request = tonic::Request::new(SendMessageRequest { messages: vec![message] });
        request.set_timeout(self.timeout);
        let turn = self.next.fetch_add(1, Ordering::Relaxed) as usize % self.clients.len();
        // A clone shares the channel: it is how tonic gives each concurrent call its own handle.
        let mut client = self.clients[turn].clone();
        match tokio::time::timeout(self.timeout, client.send_message(request)).await {
            Ok(Ok(answer)) => {
                let answer = answer.into_inner();
                let ok = |code: Option<i32>| code == Some(Code::Ok as i32);
                let entries_ok = answer.entries.iter().all(|e| ok(e.status.as_ref().map(|s| s.code)));
                if ok(answer.status.as_ref().map(|s| s.code)) && entries_ok {
                    Outcome::Ok
                } else {
                    Outcome::ResponseFailed
                }
            }
            Ok(Err(_)) | Err(_) => Outcome::SendFailed,
        }
    }
}
