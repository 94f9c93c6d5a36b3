//! Broker end-to-end tests: sends, pulls and POP on in-process groups and on real `raftmq broker`
//! processes; failover, kill -9, checkpoints, full disks, edge limits, TLS and hostile peers.
//!
//! One test binary per area (a module per file): the harness and the area's helpers compile once
//! and link once, not once per file. Run one file's tests with `cargo test --test broker <file>::`.

#[path = "../harness/mod.rs"]
mod harness;

mod t20_send_pull;
mod t21_failover;
mod t22_kill9;
mod t23_checkpoint;
mod t24_disk_full;
mod t25_edge_bounds;
mod t26_tls_modes;
mod t27_tls_cluster;
mod t28_tls_rotation;
mod t29_hostile_peer;
mod t35_pop;
