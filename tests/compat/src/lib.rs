//! raftmq-compat: test-only checks of raftmq's wire and store bytes against `rocketmq-protocol`
//! (mxsm/rocketmq-rust), an implementation written independently of ours from the Java client.
//!
//! It is a workspace member but not a default member: `cargo build` skips its large dependency
//! tree, while `cargo test --workspace` (the README's test command, and CI) runs it. The tests are
//! in `tests/`: frames both ways, NameServer routes, CommitLog records.
