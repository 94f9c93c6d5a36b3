//! raftmq's web console: one page app for the whole cluster, served by `raftmq console -n NAMESRV`
//! and by `raftmq dev`. The browser talks only to the console; the console talks to the
//! NameServers and to each broker (its admin HTTP API, and its remoting port through the SDK's
//! `Admin` for what only remoting tells: connections, consume TPS, topic stats, runtime info).
//!
//! ```text
//! browser ─▶ server.rs ─▶ gate.rs (Host/Origin, JSON, session) ─▶ assets.rs (embedded page)
//!                                                               └▶ api/ (one file per page)
//!   api/ ─▶ state.rs ─▶ topology.rs (NameServers: groups, replicas; admin addresses)
//!                    ├▶ upstream.rs (brokers' admin API)       ─▶ brokers
//!                    └▶ raftmq_client::Admin (remoting)          ─▶ NameServers, brokers
//!   sampler.rs ─▶ history.rs (offsets and lag for the charts)
//! ```
//!
//! A crate of its own: it is a server over the client SDK, which the broker must not depend on,
//! and the CLI only wires it (`src/console.rs`).
//!
//! Invariants: nothing secret reaches the page but a session cookie (HttpOnly, SameSite=Strict);
//! without a token the console listens on loopback only; every upstream call is bounded in time;
//! no asset comes from anywhere but this binary.

pub mod api;
pub mod assets;
pub mod config;
pub mod gate;
pub mod history;
pub mod sampler;
pub mod server;
pub mod session;
pub mod state;
pub mod topology;
pub mod upstream;

pub use config::ConsoleConfig;
pub use server::Console;
