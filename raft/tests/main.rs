//! The raft crate's integration tests, one binary: each file a module, the group harness
//! (`cluster/`) compiled and linked once. One file's tests: `cargo test -p raftmq-raft --test raft
//! t50_sim::`.

mod cluster;

mod recovery;
mod storage_faults;
mod storage_suite;
mod t10_cluster;
mod t15_pipeline;
mod t20_crash;
mod t50_sim;
