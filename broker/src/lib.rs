//! raftmq-broker: a broker replica, in layers that import only downwards.
//!
//! - [`state`]: what raft applies to and every replicated table (CommitLog reads, ConsumeQueue,
//!   IndexFile, offsets, topic/group tables, delay progress, the snapshot manifest) and the pure
//!   RocketMQ decisions over them. Imports nothing above it.
//! - [`services`]: background work started with the handles it uses (group commit, replica
//!   leadership, delay/timer delivery, retention, transaction check-back, NameServer registration,
//!   membership, client channels).
//! - [`processors`]: the remoting request handlers, one file per request family, and the router
//!   that owns the context and is the only file that knows every processor.
//! - [`config`]: `BrokerConfig` and the keys UPDATE_BROKER_CONFIG changes while running.
//! - [`observability`]: Prometheus metrics and per-minute pull statistics.
//! - [`acl`]: the plain ACL every request is checked against; [`http`]: the admin HTTP server.
//! - [`broker`]: `Broker::start` / `shutdown`, which wires the layers together.

pub mod acl;
pub mod config;
pub mod context;
pub mod observability;
pub mod processors;
pub mod services;
pub mod state;

pub mod broker;
pub mod http;

pub use broker::Broker;
pub use broker::BrokerError;
pub use config::broker_config::BrokerConfig;
