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
//! - [`transport`]: the [`Transport`] seam, [`RpcKind`] and [`TransportError`];
//! - [`stream_window`]: [`StreamWindow`], how much one replication stream may have in flight;
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

pub mod append_stream;
pub mod memory;
pub mod peer;
pub mod peer_client;
pub mod pipeline;
pub mod service;
pub mod snapshot_chunks;
pub mod stream_window;
pub mod tcp;
pub mod transport;
pub mod wire;

pub use memory::MemRouter;
pub use peer::NetworkFactory;
pub use peer_client::PeerClient;
pub use service::RaftService;
pub use stream_window::StreamWindow;
pub use tcp::{RaftServer, TcpTransport};
pub use transport::{RpcKind, Transport, TransportError};
