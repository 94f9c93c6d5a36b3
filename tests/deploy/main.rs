//! Deployment: the shipped configs load, `raftmq namesrv` runs as an operator runs it, and
//! docker-compose.yml starts for real (skipped, saying why, without Docker).
//!
//! One test binary per area (a module per file): the harness and the area's helpers compile once
//! and link once, not once per file. Run one file's tests with `cargo test --test deploy <file>::`.

#[path = "../harness/mod.rs"]
mod harness;

mod t10_deploy_configs;
mod t11_namesrv_cli;
mod t12_compose;
