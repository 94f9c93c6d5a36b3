//! `GrpcServer`: the MessagingService of one replica on `grpcServerPort`, every interface (as the
//! remoting port), a deadline on every call, bounded message size and streams per connection.
//!
//! Life cycle: [`GrpcServer::start`] after `Broker::start`; [`GrpcServer::shutdown`] **before**
//! `Broker::shutdown`: it ends the Telemetry streams, stops accepting, drains calls for at most
//! `SHUTDOWN_DRAIN_MAX_MS` and then drops every handle it holds on the broker, so the broker's own
//! shutdown finds its Raft node unshared.

use std::net::SocketAddr;
use std::time::Duration;

use raftmq_broker::processors::bridge::Bridge;
use raftmq_common::limits::GRPC_DECODING_MESSAGE_MAX_BYTES;
use raftmq_common::limits::GRPC_REQUEST_TIMEOUT_MS;
use raftmq_common::limits::GRPC_STREAMS_PER_CONNECTION_MAX_COUNT;
use raftmq_common::limits::SHUTDOWN_DRAIN_MAX_MS;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;
use tonic::transport::Server;
use tonic::transport::server::TcpIncoming;

use crate::error::GrpcError;
use crate::pb::messaging_service_server::MessagingServiceServer;
use crate::service::Messaging;

/// A running MessagingService.
#[derive(Debug)]
pub struct GrpcServer {
    local_addr: SocketAddr,
    stopping: CancellationToken,
    task: JoinHandle<()>,
}

impl GrpcServer {
    /// Serves the bridge's replica on its `grpcServerPort`; `None` when the key is 0 (off).
    pub async fn start(bridge: Bridge) -> Result<Option<GrpcServer>, GrpcError> {
        let port = bridge.config().grpc_server_port;
        if port == 0 {
            return Ok(None);
        }
        Self::bind(bridge, SocketAddr::from(([0, 0, 0, 0], port))).await.map(Some)
    }

    /// Serves the bridge's replica on `addr` (port 0: an ephemeral one, see [`GrpcServer::local_addr`]).
    pub async fn bind(bridge: Bridge, addr: SocketAddr) -> Result<GrpcServer, GrpcError> {
        let listener = tokio::net::TcpListener::bind(addr).await.map_err(|source| GrpcError::Bind { addr, source })?;
        let local_addr = listener.local_addr().map_err(|source| GrpcError::Bind { addr, source })?;
        let stopping = CancellationToken::new();
        let service = MessagingServiceServer::new(Messaging::new(bridge, local_addr.port(), stopping.clone()))
            .max_decoding_message_size(GRPC_DECODING_MESSAGE_MAX_BYTES);
        let incoming = TcpIncoming::from(listener).with_nodelay(Some(true));
        let signal = stopping.clone().cancelled_owned();
        let router = Server::builder()
            .timeout(Duration::from_millis(GRPC_REQUEST_TIMEOUT_MS))
            .concurrency_limit_per_connection(GRPC_STREAMS_PER_CONNECTION_MAX_COUNT as usize)
            .max_concurrent_streams(Some(GRPC_STREAMS_PER_CONNECTION_MAX_COUNT))
            .add_service(service);
        let task = tokio::spawn(async move {
            if let Err(e) = router.serve_with_incoming_shutdown(incoming, signal).await {
                tracing::warn!(error = %e, "the gRPC server stopped");
            }
        });
        tracing::info!(%local_addr, "gRPC MessagingService serving");
        Ok(GrpcServer { local_addr, stopping, task })
    }

    /// The bound address.
    pub fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }

    /// Stops: open Telemetry streams end, no new call is accepted, calls in flight get at most
    /// `SHUTDOWN_DRAIN_MAX_MS`; then the server is gone.
    pub async fn shutdown(self) {
        self.stopping.cancel();
        let mut task = self.task;
        if tokio::time::timeout(Duration::from_millis(SHUTDOWN_DRAIN_MAX_MS), &mut task).await.is_err() {
            tracing::warn!(addr = %self.local_addr, "gRPC calls still running after the drain deadline: stopped");
            task.abort();
            // An aborted task reports a JoinError by design; only its end matters here.
            let _ = task.await;
        }
    }
}
