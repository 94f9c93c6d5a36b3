//! [`PeerClient`]: RPCs to one peer over a [`Transport`]: a request is encoded ([`super::wire`]),
//! sent under the caller's deadline, and its reply decoded; failures are mapped to openraft's error
//! classes (unreachable ⇒ back off, timeout, network ⇒ retry). The openraft trait it implements is in
//! [`super::peer`]; the pipelined stream that drives it in [`super::pipeline`].
//!
//! A refusal from a replica whose store is empty and still guarded
//! ([`GUARDED_REFUSAL_MARKER`]) makes the client introduce this node to it (Introduce: id and
//! Raft address), at most once per [`RAFT_INTRODUCE_INTERVAL_MIN_MS`] per peer: that replica may
//! know none of the current members, and learns them by probing us.

use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use openraft::error::{NetworkError, RPCError, Timeout, Unreachable};
use openraft::network::RPCTypes;
use tokio::time::Instant;

use raftmq_common::limits::RAFT_INTRODUCE_INTERVAL_MIN_MS;

use super::stream_window::StreamWindow;
use super::transport::{Transport, TransportError};
use super::wire::{self, RaftReply, RaftRequest};
use crate::type_config::{NodeId, TypeConfig};
use crate::vote_guard::{GUARDED_REFUSAL_MARKER, VoteGuard};

/// RPCs to one peer.
pub struct PeerClient<T> {
    pub(super) id: NodeId,
    pub(super) target: NodeId,
    pub(super) addr: String,
    pub(super) transport: Arc<T>,
    pub(super) window: StreamWindow,
    pub(super) guard: Arc<VoteGuard>,
    /// A larger snapshot goes in chunks of this size (never 0).
    pub(super) snapshot_chunk_bytes: usize,
    /// This node's Raft address, for introductions.
    pub(super) raft_addr: Option<String>,
    /// When this node last introduced itself to the peer.
    pub(super) introduced_at: Mutex<Option<Instant>>,
}

/// Why a call produced no usable reply.
pub(super) enum CallError {
    Transport(TransportError),
    Refused(String),
    Garbage(String),
}

impl<T: Transport> PeerClient<T> {
    /// The sending node.
    pub fn id(&self) -> NodeId {
        self.id
    }

    /// The peer.
    pub fn target(&self) -> NodeId {
        self.target
    }

    pub(super) async fn call(&self, req: &RaftRequest, timeout: Duration) -> Result<RaftReply, CallError> {
        if self.target == self.id {
            return Err(CallError::Refused("a node never sends RPCs to itself".into()));
        }
        let body = wire::encode_sized(req, req.size_hint()).map_err(|e| CallError::Garbage(e.to_string()))?;
        let reply = self
            .transport
            .call(self.id, self.target, &self.addr, req.kind(), body, timeout)
            .await
            .map_err(CallError::Transport)?;
        match wire::decode::<RaftReply>(&reply) {
            Ok(RaftReply::Refused(why)) => {
                if why.contains(GUARDED_REFUSAL_MARKER) {
                    self.introduce(timeout).await;
                }
                Err(CallError::Refused(why))
            }
            Ok(r) => Ok(r),
            Err(e) => Err(CallError::Garbage(e.to_string())),
        }
    }

    /// Tells the peer, an empty-store replica that refused us, where this node is, unless that
    /// was done less than [`RAFT_INTRODUCE_INTERVAL_MIN_MS`] ago. Best effort: the peer refuses
    /// again and we come back.
    async fn introduce(&self, timeout: Duration) {
        let Some(raft_addr) = &self.raft_addr else { return };
        {
            let mut at = self.introduced_at.lock().unwrap_or_else(PoisonError::into_inner);
            let now = Instant::now();
            if at.is_some_and(|t| now < t + Duration::from_millis(RAFT_INTRODUCE_INTERVAL_MIN_MS)) {
                return;
            }
            *at = Some(now);
        }
        let req = RaftRequest::Introduce { from: self.id, raft_addr: raft_addr.clone() };
        let Ok(body) = wire::encode(&req) else { return };
        let reply = self.transport.call(self.id, self.target, &self.addr, req.kind(), body, timeout).await;
        match reply.map(|b| wire::decode::<RaftReply>(&b)) {
            Ok(Ok(RaftReply::Introduced { taken })) => {
                tracing::debug!(id = self.id, target = self.target, taken, "introduced to an empty-store replica");
            }
            other => tracing::debug!(id = self.id, target = self.target, ?other, "introduction not answered"),
        }
    }

    pub(super) fn rpc_error(&self, e: CallError, action: RPCTypes, timeout: Duration) -> RPCError<TypeConfig> {
        match e {
            CallError::Transport(TransportError::Unreachable(m)) | CallError::Refused(m) => {
                RPCError::Unreachable(Unreachable::from_string(format!("{} -> {}: {m}", self.id, self.target)))
            }
            CallError::Transport(TransportError::Timeout(_)) => {
                RPCError::Timeout(Timeout { action, id: self.id, target: self.target, timeout })
            }
            CallError::Transport(TransportError::Network(m)) | CallError::Garbage(m) => {
                RPCError::Network(NetworkError::from_string(format!("{} -> {}: {m}", self.id, self.target)))
            }
        }
    }
}

pub(super) fn unexpected(r: &RaftReply) -> CallError {
    CallError::Garbage(format!("unexpected reply {r:?}"))
}
