//! Raft RPC between the replicas of a group: openraft's network traits implemented once over a
//! small byte-level [`Transport`], so the same encoding runs over TCP in production and over the
//! in-memory router in tests and simulation.
//!
//! ```text
//! openraft ──RaftNetworkV2──▶ PeerClient ──wire::encode──▶ Transport::call(target, kind, bytes, timeout)
//!                                                              │  tcp: RemotingClient, codes 20001..20004
//!                                                              │  memory: MemRouter (partitions, seeded delays)
//!                                                              ▼
//!                       RaftService::handle(kind, bytes) ──▶ raft.append_entries / vote / pre_vote / ...
//! ```
//!
//! - [`wire`]: request/response enums and their bincode-2 (serde, standard config) encoding;
//! - [`peer`]: [`NetworkFactory`] and [`PeerClient`], the openraft client side;
//! - [`pipeline`]: openraft's `stream_append` with several AppendEntries in flight per follower
//!   (when the transport says it [pipelines](Transport::pipelined));
//! - [`service`]: [`RaftService`], the server side (refuses votes on a damaged store);
//! - [`append_stream`]: the server side of a pipelined stream, in `seq` order into openraft;
//! - [`snapshot_chunks`]: reassembly of a snapshot too large for one frame, sent in chunks;
//! - [`tcp`]: [`TcpTransport`] and [`RaftServer`] over `raftmq_common::remoting`;
//! - [`memory`]: [`MemRouter`], in-process links with partitions and deterministic delays.
//!
//! Every call is bounded by the deadline openraft passes in its `RPCOption` (a chunked snapshot:
//! each chunk); decode errors of network input are errors, never panics.

use std::future::Future;
use std::time::Duration;

use bytes::Bytes;

use crate::type_config::NodeId;

pub mod append_stream;
pub mod memory;
pub mod peer;
pub mod pipeline;
pub mod service;
pub mod snapshot_chunks;
pub mod tcp;
pub mod wire;

pub use memory::MemRouter;
pub use peer::{NetworkFactory, PeerClient};
pub use pipeline::StreamWindow;
pub use service::RaftService;
pub use tcp::{RaftServer, TcpTransport};

/// Which RPC a message carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RpcKind {
    /// AppendEntries (also heartbeats).
    AppendEntries,
    /// RequestVote and Pre-Vote (the body says which).
    Vote,
    /// A full snapshot (the manifest).
    InstallSnapshot,
    /// Leadership transfer notice.
    TransferLeader,
}

/// Why a transport call failed, as openraft needs to know it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TransportError {
    /// The peer could not be reached; the request was not delivered (back off).
    #[error("unreachable: {0}")]
    Unreachable(String),
    /// No reply before the deadline; the request may have been processed.
    #[error("timed out after {0:?}")]
    Timeout(Duration),
    /// The connection failed mid-call or the reply was garbage (retry at once).
    #[error("network: {0}")]
    Network(String),
}

/// Sends one encoded request to a peer and returns the encoded reply.
pub trait Transport: Send + Sync + 'static {
    /// Deliver `body` (an encoded [`wire::RaftRequest`]) from `from` to `target` at `addr` and
    /// wait at most `timeout` for the encoded [`wire::RaftReply`].
    fn call(
        &self,
        from: NodeId,
        target: NodeId,
        addr: &str,
        kind: RpcKind,
        body: Bytes,
        timeout: Duration,
    ) -> impl Future<Output = Result<Bytes, TransportError>> + Send;

    /// Whether concurrent calls to one target may be in flight for a replication stream
    /// (pipelining). Without it, AppendEntries go one at a time, each waiting for its reply.
    fn pipelined(&self) -> bool {
        false
    }
}
