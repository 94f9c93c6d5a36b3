//! The one harness of the end-to-end tests, included once by each area's test binary
//! (`tests/<area>/main.rs`) and by the standalone interop tests as
//! `#[path = "../harness/mod.rs"] mod harness;`.
//!
//! - [`ports`]: loopback ports chosen free at runtime, outside the ephemeral range;
//! - [`group`]: a NameServer and an in-process Raft broker group, spoken to on the wire;
//! - [`cluster`]: the same driven through the SDK, with replicas that can be killed;
//! - [`cli`]: fake broker nodes and a runner for the real `raftmq` binary;
//! - [`processes`]: broker replicas as real `raftmq broker` child processes (kill -9, restart);
//! - [`tls`]: certificates made at test time (with [`dev_certs`], `raftmq dev --tls`'s code);
//! - [`dev`]: the real `raftmq dev` (NameServer, a 3-replica group, the web console) as a process;
//! - [`script`]: a client driver that prints JSON events, run as a child process.
//!
//! Each binary uses only part of it.

#![allow(dead_code)]

pub mod cli;
pub mod cluster;
pub mod dev;
#[path = "../../src/dev_certs.rs"]
pub mod dev_certs;
pub mod group;
pub mod ports;
pub mod processes;
pub mod script;
pub mod tls;
