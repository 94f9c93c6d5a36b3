//! [`Admin`]: the administration calls behind `mqadmin` (`DefaultMQAdminExt` / `MQClientAPIImpl`):
//! NameServer queries and writes, and broker-side topic, group, offset and message-query calls.
//!
//! Invariants:
//! - NameServer reads ask one NameServer (failover, last good first); NameServer writes (KV config,
//!   topic deletion) go to **every** NameServer, as the Java client does, because NameServers share
//!   no state.
//! - Broker writes go to a group's brokerId 0 address only: in raftmq that is the Raft leader, which
//!   replicates the change to its group; a follower would refuse it. `replica` decides which
//!   replica a call asks.
//! - Every call is bounded by the admin's timeout; every non-SUCCESS answer is an
//!   [`ErrorKind::Broker`](crate::error::ErrorKind::Broker) error carrying the code and remark.
//! - Group administration (raftmq's private RAFT_ADD_NODE, RAFT_REMOVE_NODE, RAFT_TRANSFER_LEADERSHIP)
//!   goes to the group's leader, following leader hints at most [`LEADER_HINT_HOPS_MAX`] times
//!   (`membership`); [`Admin::group_status_all`] asks every member for its own view.
//!
//! One file per family of calls, each an `impl Admin` block: `client` (the handle and how a call
//! goes out), `response` (reading answers), then `namesrv`, `config`, `replica`, `topic`,
//! `offset`, `group`, `stats`, `message`, `store`, `acl`, `membership`.

mod acl;
mod client;
mod config;
mod group;
mod membership;
mod message;
mod namesrv;
mod offset;
mod replica;
mod response;
mod stats;
mod store;
mod topic;

pub use acl::AclVersionInfo;
pub use acl::PlainAccessConfig;
pub use client::Admin;
pub use membership::LEADER_HINT_HOPS_MAX;
