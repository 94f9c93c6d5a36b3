//! The gRPC crate's integration tests, one binary: each file a module, the shared harness pieces
//! (tests/harness/) compiled and linked once. One file's tests: `cargo test -p raftmq-grpc --test
//! grpc t82_grpc_leader_kill::`.

#[path = "../../tests/harness/cluster.rs"]
mod cluster;
#[path = "../../tests/harness/group.rs"]
mod group;
#[path = "../../tests/harness/ports.rs"]
mod ports;

mod t80_grpc_client;
mod t81_grpc_offsets;
mod t82_grpc_leader_kill;
mod t83_grpc_acl;
