//! raftmq's Raft layer: the openraft type configuration of a broker group and the log store
//! that *is* the CommitLog (DLedger style: one copy of every message, in RocketMQ's record
//! layout, inside Raft entries in mapped segment files).
//!
//! Modules in data-flow order:
//! - [`config`]: timings and store limits, one struct with documented defaults;
//! - [`type_config`]: openraft types (`NodeId`, `Node`, `AppPayload`, ...);
//! - [`entry`]: entry header codec, blank record, deterministic roll (pure);
//! - [`payload_codec`]: entry payload ⇄ bytes, explicit membership layout (pure);
//! - [`patcher`]: the broker's hook to patch PHYSICALOFFSET at append time;
//! - `mapped_file`, `segment`, `log_index`, [`meta`]: the files;
//! - `store_state`, `recovery`, `flusher`, `page_cache`, `zero_ahead`: in-memory state, crash
//!   recovery, group commit, the page cache around the log end (blocks written ahead of it,
//!   synced bytes dropped behind it);
//! - [`log_store`]: the `RaftLogStorage` implementation;
//! - [`snapshot_file`]: the snapshot (manifest + where the log continues) on disk and on the wire;
//! - [`state_machine`]: the seam to the broker ([`ApplyHandler`]) and openraft's state machine;
//! - [`network`]: Raft RPC (TCP over the remoting transport, in-memory router for tests);
//! - [`node`]: [`RaftNode`], the replica the broker drives (propose, leadership, membership);
//! - [`node_runtime`]: [`NodeRuntime`], the tokio runtime a replica runs on, apart from clients;
//! - [`testing`]: a recording handler for tests;
//! - [`error`]: error types.

pub mod checkpoint_file;
pub mod config;
pub mod entry;
pub mod error;
mod flusher;
pub mod leadership;
mod log_index;
pub mod log_store;
mod mapped_file;
pub mod meta;
pub mod network;
pub mod node;
pub mod node_runtime;
mod page_cache;
pub mod patcher;
pub mod payload_codec;
mod recovery;
pub mod runtime;
mod segment;
pub mod snapshot_file;
pub mod state_machine;
mod store_state;
pub mod testing;
pub mod type_config;
pub mod vote_guard;
mod zero_ahead;

pub use config::RaftConfig;
pub use error::{CorruptReason, StoreError};
pub use flusher::{FLUSH_LATENCY_BUCKETS_SECONDS, FlushLatency};
pub use log_store::{EntryPosition, LogReader, LogStore, WeakLogStore};
pub use node::{
    Applied, CommittedJoint, Leadership, NodeConfig, NodeError, NodeStatus, ProposeError, RaftNode, Role, Submitted,
};
pub use node_runtime::{NODE_RUNTIME_WORKER_THREADS, NodeRuntime};
pub use patcher::{NoPatch, PayloadPatcher};
pub use state_machine::{ApplyHandler, CommittedEntry};
pub use type_config::{AppPayload, AppReply, TypeConfig};
