//! raftmq-broker: the broker's pure core (issue 5 groundwork): configuration, the replicated command
//! codec, ConsumeQueue files, and the RocketMQ decisions (pull outcome, offsets, topic/group tables,
//! long-poll wake-ups) as functions and state machines an async shell drives.
//!
//! Modules in data-flow order:
//! - [`config`]: `BrokerConfig` (RocketMQ keys + the Raft group).
//! - [`topic_config`], [`subscription_group`]: topic and consumer-group tables, auto-create decisions.
//! - [`queue_offset`]: the leader's queue offsets, assigned before a send is proposed.
//! - [`entry`]: the replicated commands (Raft entry payloads by tag) and the PHYSICALOFFSET patcher.
//! - [`dispatch`]: apply of a MESSAGES entry: accept or reject, then ConsumeQueue units.
//! - [`consume_queue`]: ConsumeQueue files and the lazily opened store of them.
//! - [`offsets`]: committed consumer offsets.
//! - [`index_file`]: IndexFile lookups by message key and UNIQ_KEY.
//! - [`pull`]: `getMessage` + `PullMessageProcessor` outcome.
//! - [`long_poll`]: suspended pulls and their wake-ups.

pub mod config;
pub mod consume_queue;
pub mod dispatch;
pub mod entry;
pub mod index_file;
pub mod long_poll;
pub mod offsets;
pub mod pull;
pub mod queue_offset;
pub mod subscription_group;
pub mod topic_config;
