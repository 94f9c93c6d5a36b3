//! The Rust SDK against real groups: sends and consumption, crash failover for producers, consumers
//! and queue locks, and follower reads.
//!
//! One test binary per area (a module per file): the harness and the area's helpers compile once
//! and link once, not once per file. Run one file's tests with `cargo test --test sdk <file>::`.

#[path = "../harness/mod.rs"]
mod harness;

mod t40_real_cluster;
mod t41_failover;
mod t42_consumer_failover;
mod t43_queue_lock_failover;
mod t44_follower_reads;
