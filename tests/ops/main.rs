//! Operations end to end: monitoring answers, offset resets, live config updates, ACL, the admin
//! HTTP API, group membership and retention.
//!
//! One test binary per area (a module per file): the harness and the area's helpers compile once
//! and link once, not once per file. Run one file's tests with `cargo test --test ops <file>::`.

#[path = "../harness/mod.rs"]
mod harness;

mod t60_admin_stats;
mod t61_offset_reset;
mod t62_broker_config_update;
mod t63_acl;
mod t64_http_api;
mod t65_membership;
mod t66_retention;
