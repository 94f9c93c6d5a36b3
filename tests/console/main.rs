//! The web console in a real browser (headless chromium through chromedriver) against `raftmq dev`:
//! its pages, message search and consumer lag. Each test skips, saying why, without chromium.
//!
//! One test binary per area (a module per file): the harness and the area's helpers compile once
//! and link once, not once per file. Run one file's tests with `cargo test --test console <file>::`.

#[path = "../harness/mod.rs"]
mod harness;

mod browser;
mod fixture;

mod t90_console_pages;
mod t91_console_messages;
mod t92_console_lag;
