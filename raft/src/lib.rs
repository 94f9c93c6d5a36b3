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
//! - `store_state`, `recovery`, `flusher`: in-memory state, crash recovery, group commit;
//! - [`log_store`]: the `RaftLogStorage` implementation;
//! - [`error`]: error types.

pub mod config;
pub mod entry;
pub mod error;
mod flusher;
mod log_index;
pub mod log_store;
mod mapped_file;
pub mod meta;
pub mod patcher;
pub mod payload_codec;
mod recovery;
mod segment;
mod store_state;
pub mod type_config;

pub use config::RaftConfig;
pub use error::{CorruptReason, StoreError};
pub use log_store::{EntryPosition, LogReader, LogStore};
pub use patcher::{NoPatch, PayloadPatcher};
pub use type_config::{AppPayload, AppReply, TypeConfig};
