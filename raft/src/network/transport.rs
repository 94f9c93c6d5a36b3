//! [`Transport`]: the small byte-level seam Raft RPC runs over (TCP in production, the in-memory
//! router in tests), with the [`RpcKind`] a message carries and the [`TransportError`]s openraft
//! tells apart (unreachable: back off; timeout: maybe processed; network: retry at once).

use std::future::Future;
use std::time::Duration;

use bytes::Bytes;

use crate::type_config::NodeId;

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
    /// Deliver `body` (an encoded [`RaftRequest`](super::wire::RaftRequest)) from `from` to `target` at `addr` and
    /// wait at most `timeout` for the encoded [`RaftReply`](super::wire::RaftReply).
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
