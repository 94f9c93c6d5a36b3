//! The openraft client side of the network: [`NetworkFactory`] hands openraft one
//! [`PeerClient`] per target; each RPC is encoded ([`super::wire`]), sent through the
//! [`Transport`] under openraft's deadline (a snapshot sent in chunks: each chunk under it), and its
//! reply decoded and mapped to openraft's error classes (unreachable ⇒ back off, timeout, network ⇒
//! retry).
//!
//! A node never gets a client to itself (openraft asserts on it); the factory refuses by
//! returning a client whose every call is `Unreachable`.
//!
//! The client itself (encoding, the call, error mapping, introductions to a guarded replica) is
//! [`PeerClient`] in [`super::peer_client`].

use std::future::Future;
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use futures::Stream;
use openraft::base::{BoxFuture, BoxStream};
use openraft::error::{RPCError, ReplicationClosed, StreamingError};
use openraft::network::stream_append_sequential;
use openraft::network::{RPCOption, RPCTypes, RaftNetworkFactory};
use openraft::raft::{
    AppendEntriesRequest, AppendEntriesResponse, SnapshotResponse, TransferLeaderRequest, TransferLeaderResponse,
    VoteRequest, VoteResponse,
};
use openraft::{OptionalSend, RaftNetworkV2};

use raftmq_common::limits::RAFT_SNAPSHOT_MAX_BYTES;

pub use super::peer_client::PeerClient;
use super::peer_client::{CallError, unexpected};
use super::pipeline::{self, StreamItem};
use super::stream_window::StreamWindow;
use super::transport::Transport;
use super::wire::{RaftReply, RaftRequest};
use crate::state_machine::Snapshot;
use crate::type_config::{Node, NodeId, TypeConfig, Vote};
use crate::vote_guard::VoteGuard;

/// openraft's network factory over a [`Transport`].
pub struct NetworkFactory<T> {
    id: NodeId,
    /// This node's Raft address, as it introduces itself (none: it never does).
    raft_addr: Option<String>,
    transport: Arc<T>,
    window: StreamWindow,
    guard: Arc<VoteGuard>,
    snapshot_chunk_bytes: usize,
}

impl<T: Transport> NetworkFactory<T> {
    /// A factory for node `id`; replication streams keep at most `window` in flight when the
    /// transport pipelines. While `guard` is not open, this node asks nobody for a vote. A
    /// snapshot larger than `snapshot_chunk_bytes` is sent in chunks of that size. `raft_addr` is
    /// where this node listens, named when it introduces itself to a guarded replica.
    pub fn new(
        id: NodeId,
        raft_addr: Option<String>,
        transport: Arc<T>,
        window: StreamWindow,
        guard: Arc<VoteGuard>,
        snapshot_chunk_bytes: usize,
    ) -> Self {
        Self { id, raft_addr, transport, window, guard, snapshot_chunk_bytes: snapshot_chunk_bytes.max(1) }
    }
}

impl<T: Transport> RaftNetworkFactory<TypeConfig> for NetworkFactory<T> {
    type Network = PeerClient<T>;

    async fn new_client(&mut self, target: NodeId, node: &Node) -> Self::Network {
        if target == self.id {
            tracing::error!(id = self.id, "openraft asked for a network client to this node itself");
        }
        PeerClient {
            id: self.id,
            target,
            addr: node.raft_addr.clone(),
            transport: Arc::clone(&self.transport),
            window: self.window,
            guard: Arc::clone(&self.guard),
            snapshot_chunk_bytes: self.snapshot_chunk_bytes,
            raft_addr: self.raft_addr.clone(),
            introduced_at: Mutex::new(None),
        }
    }
}

impl<T: Transport> PeerClient<T> {
    async fn vote_call(
        &self,
        req: RaftRequest,
        option: RPCOption,
    ) -> Result<VoteResponse<TypeConfig>, RPCError<TypeConfig>> {
        let t = option.hard_ttl();
        // An empty store still catching up must not lead: it may lack entries the group committed.
        let term = match &req {
            RaftRequest::Vote(r) | RaftRequest::PreVote(r) => r.vote.leader_id.term,
            _ => 0,
        };
        if let Err(why) = self.guard.may_campaign(term) {
            return Err(self.rpc_error(CallError::Refused(format!("no campaign: {why}")), RPCTypes::Vote, t));
        }
        match self.call(&req, t).await {
            Ok(RaftReply::Vote(r)) => Ok(r),
            Ok(other) => Err(self.rpc_error(unexpected(&other), RPCTypes::Vote, t)),
            Err(e) => Err(self.rpc_error(e, RPCTypes::Vote, t)),
        }
    }
}

impl<T: Transport> RaftNetworkV2<TypeConfig> for PeerClient<T> {
    type SnapshotData = Bytes;

    async fn append_entries(
        &mut self,
        rpc: AppendEntriesRequest<TypeConfig>,
        option: RPCOption,
    ) -> Result<AppendEntriesResponse<TypeConfig>, RPCError<TypeConfig>> {
        // The soft deadline leaves openraft room to act before its hard one.
        let t = option.soft_ttl();
        match self.call(&RaftRequest::AppendEntries(rpc), t).await {
            Ok(RaftReply::AppendEntries(r)) => Ok(r),
            Ok(other) => Err(self.rpc_error(unexpected(&other), RPCTypes::AppendEntries, t)),
            Err(e) => Err(self.rpc_error(e, RPCTypes::AppendEntries, t)),
        }
    }

    fn stream_append<'s, S>(
        &'s mut self,
        input: S,
        option: RPCOption,
    ) -> BoxFuture<'s, Result<BoxStream<'s, StreamItem>, RPCError<TypeConfig>>>
    where
        S: Stream<Item = AppendEntriesRequest<TypeConfig>> + OptionalSend + Unpin + 'static,
    {
        if !self.transport.pipelined() || self.window.count <= 1 {
            return stream_append_sequential(self, input, option);
        }
        let window = self.window;
        Box::pin(pipeline::stream_append(&*self, input, option, window))
    }

    async fn vote(
        &mut self,
        rpc: VoteRequest<TypeConfig>,
        option: RPCOption,
    ) -> Result<VoteResponse<TypeConfig>, RPCError<TypeConfig>> {
        self.vote_call(RaftRequest::Vote(rpc), option).await
    }

    async fn pre_vote(
        &mut self,
        rpc: VoteRequest<TypeConfig>,
        option: RPCOption,
    ) -> Result<VoteResponse<TypeConfig>, RPCError<TypeConfig>> {
        self.vote_call(RaftRequest::PreVote(rpc), option).await
    }

    async fn full_snapshot(
        &mut self,
        vote: Vote,
        snapshot: Snapshot,
        cancel: impl Future<Output = ReplicationClosed> + Send + 'static,
        option: RPCOption,
    ) -> Result<SnapshotResponse<TypeConfig>, StreamingError<TypeConfig>> {
        let t = option.hard_ttl();
        let data = snapshot.snapshot;
        let mut cancel = std::pin::pin!(cancel);
        if data.len() <= self.snapshot_chunk_bytes {
            let req = RaftRequest::InstallSnapshot { vote, meta: snapshot.meta, data: data.to_vec() };
            let res = tokio::select! {
                biased;
                closed = &mut cancel => return Err(StreamingError::Closed(closed)),
                r = self.call(&req, t) => r,
            };
            return match res {
                Ok(RaftReply::InstallSnapshot(r)) => Ok(r),
                Ok(other) => Err(self.rpc_error(unexpected(&other), RPCTypes::InstallSnapshot, t).into()),
                Err(e) => Err(self.rpc_error(e, RPCTypes::InstallSnapshot, t).into()),
            };
        }
        // Too large for one frame: chunks in order, each acknowledged. Any error ends the call and
        // openraft sends the snapshot again, from the first chunk.
        let total = data.len() as u64;
        if total > RAFT_SNAPSHOT_MAX_BYTES {
            tracing::error!(
                id = self.id,
                target = self.target,
                total,
                max = RAFT_SNAPSHOT_MAX_BYTES,
                "the snapshot is larger than a replica takes: this follower cannot be caught up"
            );
        }
        for (i, part) in data.chunks(self.snapshot_chunk_bytes).enumerate() {
            let offset = (i * self.snapshot_chunk_bytes) as u64;
            let end = offset + part.len() as u64;
            let req = RaftRequest::InstallSnapshotChunk {
                vote,
                meta: snapshot.meta.clone(),
                offset,
                total,
                data: part.to_vec(),
            };
            let res = tokio::select! {
                biased;
                closed = &mut cancel => return Err(StreamingError::Closed(closed)),
                r = self.call(&req, t) => r,
            };
            match res {
                Ok(RaftReply::SnapshotChunk { received }) if end < total && received == end => {}
                // The last chunk's answer, or an earlier one's from a replica with a newer vote.
                Ok(RaftReply::InstallSnapshot(r)) => return Ok(r),
                Ok(other) => return Err(self.rpc_error(unexpected(&other), RPCTypes::InstallSnapshot, t).into()),
                Err(e) => return Err(self.rpc_error(e, RPCTypes::InstallSnapshot, t).into()),
            }
        }
        Err(self
            .rpc_error(
                CallError::Garbage("the last snapshot chunk was not installed".into()),
                RPCTypes::InstallSnapshot,
                t,
            )
            .into())
    }

    async fn transfer_leader(
        &mut self,
        req: TransferLeaderRequest<TypeConfig>,
        option: RPCOption,
    ) -> Result<TransferLeaderResponse<TypeConfig>, RPCError<TypeConfig>> {
        let t = option.hard_ttl();
        match self.call(&RaftRequest::TransferLeader(req), t).await {
            Ok(RaftReply::TransferLeader(r)) => Ok(r),
            Ok(other) => Err(self.rpc_error(unexpected(&other), RPCTypes::TransferLeader, t)),
            Err(e) => Err(self.rpc_error(e, RPCTypes::TransferLeader, t)),
        }
    }
}
