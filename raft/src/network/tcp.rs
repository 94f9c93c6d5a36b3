//! Raft RPC over TCP with the remoting transport of `raftmq_common`: one RocketMQ frame per
//! RPC, request codes RAFT_APPEND_ENTRIES (20001), RAFT_VOTE (20002, vote and pre-vote),
//! RAFT_INSTALL_SNAPSHOT (20003), RAFT_TRANSFER_LEADER (20004); the body is the bincode
//! message of [`super::wire`]. One connection per peer address (the client reconnects after a
//! failure); every call is bounded by openraft's deadline. Replication is pipelined by default
//! (requests of a stream travel concurrently on the connection; the receiver restores their
//! order), [`TcpTransport::sequential`] sends one AppendEntries at a time.
//!
//! [`RaftServer`] binds the Raft port before the node exists (its address goes into the
//! membership) and answers "refused" until a [`RaftService`] is attached; a restarted node
//! attaches its new service to the same server.

use std::net::SocketAddr;
use std::sync::{Arc, RwLock};
use std::time::Duration;

use bytes::Bytes;
use raftmq_common::protocol::{RemotingCommand, RequestCode, ResponseCode};
use raftmq_common::remoting::{
    ConnectionContext, ProcessorTable, RemotingClient, RemotingError, RemotingServer, RequestProcessor,
};

use super::service::RaftService;
use super::transport::{RpcKind, Transport, TransportError};
use super::wire::{self, RaftReply};
use crate::type_config::NodeId;

fn code_of(kind: RpcKind) -> RequestCode {
    match kind {
        RpcKind::AppendEntries => RequestCode::RaftAppendEntries,
        RpcKind::Vote => RequestCode::RaftVote,
        RpcKind::InstallSnapshot => RequestCode::RaftInstallSnapshot,
        RpcKind::TransferLeader => RequestCode::RaftTransferLeader,
    }
}

fn kind_of(code: RequestCode) -> Option<RpcKind> {
    Some(match code {
        RequestCode::RaftAppendEntries => RpcKind::AppendEntries,
        RequestCode::RaftVote => RpcKind::Vote,
        RequestCode::RaftInstallSnapshot => RpcKind::InstallSnapshot,
        RequestCode::RaftTransferLeader => RpcKind::TransferLeader,
        _ => return None,
    })
}

/// Client side: sends Raft RPCs with a [`RemotingClient`]. Cheap to clone.
#[derive(Clone, Debug)]
pub struct TcpTransport {
    client: RemotingClient,
    pipelined: bool,
}

impl Default for TcpTransport {
    fn default() -> Self {
        Self::new()
    }
}

impl TcpTransport {
    /// A transport with its own remoting client; replication is pipelined.
    pub fn new() -> Self {
        Self { client: RemotingClient::new(), pipelined: true }
    }

    /// A transport that sends AppendEntries one at a time per follower (no pipelining).
    pub fn sequential() -> Self {
        Self { client: RemotingClient::new(), pipelined: false }
    }

    /// Close every connection (node shutdown).
    pub async fn close(&self) {
        self.client.close().await;
    }
}

impl Transport for TcpTransport {
    async fn call(
        &self,
        _from: NodeId,
        _target: NodeId,
        addr: &str,
        kind: RpcKind,
        body: Bytes,
        timeout: Duration,
    ) -> Result<Bytes, TransportError> {
        let req = RemotingCommand::request(code_of(kind)).with_body(body);
        let resp = self.client.invoke(addr, req, timeout).await.map_err(|e| match e {
            RemotingError::Timeout { .. } => TransportError::Timeout(timeout),
            RemotingError::ConnectionClosed { .. } | RemotingError::Encode(_) => TransportError::Network(e.to_string()),
            _ => TransportError::Unreachable(e.to_string()),
        })?;
        if resp.response_code() != ResponseCode::Success {
            return Err(TransportError::Unreachable(format!(
                "{addr} answered {:?}: {}",
                resp.response_code(),
                resp.remark.as_deref().unwrap_or("")
            )));
        }
        Ok(resp.body)
    }

    fn pipelined(&self) -> bool {
        self.pipelined
    }
}

type Slot = Arc<RwLock<Option<RaftService>>>;

struct RaftProcessor {
    slot: Slot,
}

impl RequestProcessor for RaftProcessor {
    async fn process(&self, _ctx: ConnectionContext, request: RemotingCommand) -> Option<RemotingCommand> {
        let service = self.slot.read().unwrap_or_else(|p| p.into_inner()).clone();
        let body = match (service, kind_of(request.request_code())) {
            (Some(s), Some(kind)) => s.handle(kind, &request.body).await,
            (None, _) => wire::encode(&RaftReply::Refused("raft node not started".into())).unwrap_or_default(),
            (Some(_), None) => wire::encode(&RaftReply::Refused("not a raft request".into())).unwrap_or_default(),
        };
        Some(RemotingCommand::success().answering(&request).with_body(body))
    }
}

/// Server side: the Raft port of one replica.
pub struct RaftServer {
    server: RemotingServer,
    slot: Slot,
}

impl RaftServer {
    /// Bind `addr` (port 0 picks a free port); RPCs are refused until [`Self::attach`].
    pub async fn bind(addr: SocketAddr) -> std::io::Result<Self> {
        let slot: Slot = Arc::default();
        let processor = Arc::new(RaftProcessor { slot: Arc::clone(&slot) });
        let mut table = ProcessorTable::new();
        for code in [
            RequestCode::RaftAppendEntries,
            RequestCode::RaftVote,
            RequestCode::RaftInstallSnapshot,
            RequestCode::RaftTransferLeader,
        ] {
            table.register(code, Arc::clone(&processor));
        }
        let server = RemotingServer::bind(addr, table).await?;
        Ok(Self { server, slot })
    }

    /// The bound address ("host:port" for the membership's `raft_addr`).
    pub fn local_addr(&self) -> SocketAddr {
        self.server.local_addr()
    }

    /// Serve RPCs with `service` (replacing any previous one).
    pub fn attach(&self, service: RaftService) {
        *self.slot.write().unwrap_or_else(|p| p.into_inner()) = Some(service);
    }

    /// Refuse RPCs again (the node stopped).
    pub fn detach(&self) {
        *self.slot.write().unwrap_or_else(|p| p.into_inner()) = None;
    }

    /// Stop listening and close connections.
    pub async fn shutdown(&self) {
        self.detach();
        self.server.shutdown().await;
    }
}
