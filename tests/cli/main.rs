//! The `raftmq` command line end to end: `admin`, `send`, `bench` and `dev`, against in-process or
//! fake brokers and real groups.
//!
//! One test binary per area (a module per file): the harness and the area's helpers compile once
//! and link once, not once per file. Run one file's tests with `cargo test --test cli <file>::`.

#[path = "../harness/mod.rs"]
mod harness;

mod t30_admin;
mod t31_send_bench;
mod t32_dev;
mod t33_membership;
mod t34_bench_grpc_pop;
