//! raftmq-namesrv: the NameServer. Brokers register their topics and Raft role; clients ask where
//! a topic lives. NameServers never talk to each other: every broker registers with each of them.
//!
//! Modules in data-flow order:
//! - [`config`]: `NamesrvConfig` (TOML, RocketMQ's camelCase keys).
//! - [`server`]: `NameServer::start` / `shutdown` and [`server::run`]: remoting server, liveness
//!   scanner, connection-closed hook.
//! - [`processor`]: the request handlers, one per request code.
//! - [`route_info`]: the route tables as pure state (registration, term-based leader choice,
//!   liveness expiry, queries).
//! - [`kv_config`]: namespace → key → value, persisted as RocketMQ's `kvConfig.json`.

pub mod config;
pub mod kv_config;
pub mod processor;
pub mod route_info;
pub mod server;

pub use config::NamesrvConfig;
pub use server::NameServer;
pub use server::NamesrvError;
pub use server::run;
