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
//!
//! With a cluster secret ([`TcpTransport::signed`], [`RaftServer::bind_with`]) every request
//! carries a cluster signature (`raftmq_common::protocol::cluster_signature`) naming its sender
//! and target node; the server checks it, the target and the replay window before the request is
//! decoded, and answers anything else NO_PERMISSION: a non-member learns nothing and changes
//! nothing. Replies are not signed (an on-path attacker is outside what a MAC on requests stops).

use std::net::SocketAddr;
use std::sync::{Arc, RwLock};
use std::time::Duration;

use bytes::Bytes;
use raftmq_common::protocol::cluster_signature::{CLUSTER_TARGET, ClusterSigner, ClusterVerifier, wall_clock_ms};
use raftmq_common::protocol::{RemotingCommand, RequestCode, ResponseCode};
use raftmq_common::remoting::{
    ConnectionContext, ProcessorTable, RefusalLog, RemotingClient, RemotingError, RemotingServer, RequestProcessor,
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
    /// Signs every request with the cluster secret (none: unauthenticated, loopback groups).
    signer: Option<Arc<ClusterSigner>>,
}

impl Default for TcpTransport {
    fn default() -> Self {
        Self::new()
    }
}

impl TcpTransport {
    /// A transport with its own remoting client; replication is pipelined.
    pub fn new() -> Self {
        Self { client: RemotingClient::new(), pipelined: true, signer: None }
    }

    /// A transport that sends AppendEntries one at a time per follower (no pipelining).
    pub fn sequential() -> Self {
        Self { client: RemotingClient::new(), pipelined: false, signer: None }
    }

    /// This transport with every request signed by `signer` (the cluster secret).
    pub fn signed(mut self, signer: Arc<ClusterSigner>) -> Self {
        self.signer = Some(signer);
        self
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
        target: NodeId,
        addr: &str,
        kind: RpcKind,
        body: Bytes,
        timeout: Duration,
    ) -> Result<Bytes, TransportError> {
        let mut req = RemotingCommand::request(code_of(kind)).with_body(body);
        if let Some(signer) = &self.signer {
            req.ext_fields.insert(CLUSTER_TARGET.into(), target.to_string().into());
            signer.sign(&mut req, wall_clock_ms());
        }
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
    verifier: Option<Arc<ClusterVerifier>>,
    refusals: RefusalLog,
}

impl RaftProcessor {
    /// Why `request` is refused before it is decoded: a missing or bad cluster signature, a
    /// replay, or another target node.
    fn unauthenticated(&self, service: Option<&RaftService>, request: &RemotingCommand) -> Option<String> {
        let verifier = self.verifier.as_ref()?;
        match verifier.verify(request, wall_clock_ms()) {
            Err(e) => Some(format!("raft rpc refused: {e}")),
            Ok(v) => match (service, v.target) {
                (Some(s), Some(t)) if t == s.id().to_string() => None,
                (None, _) => None,
                (Some(s), t) => Some(format!("raft rpc refused: addressed to node {t:?}, this is node {}", s.id())),
            },
        }
    }
}

impl RequestProcessor for RaftProcessor {
    async fn process(&self, ctx: ConnectionContext, request: RemotingCommand) -> Option<RemotingCommand> {
        let service = self.slot.read().unwrap_or_else(|p| p.into_inner()).clone();
        if let Some(why) = self.unauthenticated(service.as_ref(), &request) {
            let response = RemotingCommand::response(ResponseCode::NoPermission, Some(why)).answering(&request);
            self.refusals.note(ctx.connection_id(), ctx.peer_addr(), &request, &response);
            return Some(response);
        }
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
    /// Bind `addr` (port 0 picks a free port); RPCs are refused until [`Self::attach`]. No
    /// cluster signature is asked for (a group on loopback).
    pub async fn bind(addr: SocketAddr) -> std::io::Result<Self> {
        Self::bind_with(addr, None).await
    }

    /// [`Self::bind`]; with `verifier`, every request must carry a valid cluster signature
    /// addressed to the attached node.
    pub async fn bind_with(addr: SocketAddr, verifier: Option<Arc<ClusterVerifier>>) -> std::io::Result<Self> {
        let slot: Slot = Arc::default();
        let refusals = RefusalLog::default();
        let processor = Arc::new(RaftProcessor { slot: Arc::clone(&slot), verifier, refusals });
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
