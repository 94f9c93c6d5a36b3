//! [`RaftService`]: the server side of Raft RPC. Decodes a request, hands it to the local
//! openraft node, encodes the reply. Any failure (bad bytes, kind/body mismatch, node stopped)
//! becomes `RaftReply::Refused`, which the caller treats as "unreachable" and backs off.
//!
//! A replica whose store is damaged has no openraft node at all: it refuses every RPC, so it
//! neither votes nor accepts a leader's entries, and it never campaigns (see `node`).

use std::sync::Arc;

use bytes::Bytes;

use super::RpcKind;
use super::wire::{self, RaftReply, RaftRequest};
use crate::node::Raft;
use crate::state_machine::Snapshot;
use crate::type_config::NodeId;

/// Handles Raft RPCs addressed to one local node. Cheap to clone.
#[derive(Clone)]
pub struct RaftService {
    inner: Arc<Inner>,
}

struct Inner {
    id: NodeId,
    raft: Result<Raft, String>,
}

impl RaftService {
    /// Serve RPCs with `raft`.
    pub fn new(id: NodeId, raft: Raft) -> Self {
        Self { inner: Arc::new(Inner { id, raft: Ok(raft) }) }
    }

    /// Refuse every RPC, saying why (damaged store).
    pub fn refusing(id: NodeId, why: String) -> Self {
        Self { inner: Arc::new(Inner { id, raft: Err(why) }) }
    }

    /// The node this service answers for.
    pub fn id(&self) -> NodeId {
        self.inner.id
    }

    /// Process one encoded request of `kind`; always returns an encoded reply.
    pub async fn handle(&self, kind: RpcKind, body: &[u8]) -> Bytes {
        let reply = self.dispatch(kind, body).await.unwrap_or_else(RaftReply::Refused);
        wire::encode(&reply).unwrap_or_else(|e| {
            // A reply that cannot be encoded is a bug; the caller sees garbage and retries.
            tracing::error!(id = self.inner.id, %e, "cannot encode raft reply");
            Bytes::new()
        })
    }

    async fn dispatch(&self, kind: RpcKind, body: &[u8]) -> Result<RaftReply, String> {
        let raft = self.inner.raft.as_ref().map_err(|why| format!("node {} refuses: {why}", self.inner.id))?;
        let req: RaftRequest = wire::decode(body).map_err(|e| e.to_string())?;
        if req.kind() != kind {
            return Err(format!("request {:?} sent as {kind:?}", req.kind()));
        }
        let fail = |e: &dyn std::fmt::Display| format!("node {}: {e}", self.inner.id);
        Ok(match req {
            RaftRequest::AppendEntries(r) => {
                RaftReply::AppendEntries(raft.append_entries(r).await.map_err(|e| fail(&e))?)
            }
            RaftRequest::Vote(r) => RaftReply::Vote(raft.vote(r).await.map_err(|e| fail(&e))?),
            RaftRequest::PreVote(r) => RaftReply::Vote(raft.pre_vote(r).await.map_err(|e| fail(&e))?),
            RaftRequest::InstallSnapshot { vote, meta, data } => {
                let snap = Snapshot { meta, snapshot: Bytes::from(data) };
                RaftReply::InstallSnapshot(raft.install_full_snapshot(vote, snap).await.map_err(|e| fail(&e))?)
            }
            RaftRequest::TransferLeader(r) => {
                RaftReply::TransferLeader(raft.handle_transfer_leader(r).await.map_err(|e| fail(&e))?)
            }
        })
    }
}
