//! The replicated state and the pure decisions over it: what raft applies to ([`store`]), the
//! commands it applies ([`entry`], [`dispatch`]), the files it keeps (CommitLog reads, ConsumeQueue,
//! IndexFile, checkpoint) and every replicated table. Nothing here imports processors, services,
//! http or metrics: those are built on this layer.

pub mod checkpoint;
pub mod clock;
pub mod commit_log;
pub mod consume_queue;
pub mod delay_offsets;
pub mod disk_space;
pub mod dispatch;
pub mod entry;
pub mod index_file;
pub mod long_poll;
pub mod manifest;
pub mod offsets;
pub mod pop;
pub mod pull;
pub mod queue_offset;
pub mod real_queue;
pub mod rebalance_lock;
pub mod store;
pub mod subscription_group;
pub mod topic_config;
pub mod transaction;
