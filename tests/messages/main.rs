//! Message features end to end on the Raft CommitLog: queries, retry and delay, transactions, SQL92
//! filters, request/reply and message trace.
//!
//! One test binary per area (a module per file): the harness and the area's helpers compile once
//! and link once, not once per file. Run one file's tests with `cargo test --test messages <file>::`.

#[path = "../harness/mod.rs"]
mod harness;

mod t50_query;
mod t51_retry_delay;
mod t52_transaction;
mod t53_sql92_filter;
mod t54_request_reply;
mod t55_msg_trace;
