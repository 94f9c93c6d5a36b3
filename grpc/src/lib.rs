//! raftmq-grpc: RocketMQ 5's gRPC `apache.rocketmq.v2.MessagingService` (apache/rocketmq-apis,
//! vendored in `proto/`), served next to a broker replica on `grpcServerPort`, as RocketMQ's proxy
//! serves it in front of a broker.
//!
//! ```text
//! 5.x client ──gRPC──▶ server (tonic, deadline per call) ──▶ service (MessagingService)
//!    QueryRoute / QueryAssignment ─▶ route (pure: topic config → queues, endpoints)
//!    SendMessage ─▶ send (pure: pb Message → SEND_MESSAGE) ─▶ Bridge ─▶ the broker's send path
//!    EndTransaction ─▶ transaction (pure: transaction id ↔ half offsets) ─▶ Bridge ─▶ END_TRANSACTION
//!    Telemetry ─▶ telemetry (Settings answered, other commands refused with a status)
//!    response codes ◀─ status (remoting ResponseCode → apache.rocketmq.v2.Code, as the proxy maps)
//! ```
//!
//! The crate is kept apart from `raftmq-broker` so that tonic, prost and the generated code never
//! enter the broker's core: the broker only exposes its processors through
//! `raftmq_broker::processors::bridge::Bridge`, and a message sent over gRPC is stored by exactly the
//! remoting path (acknowledged after quorum fsync and apply).

pub mod error;
pub mod pb;
pub mod route;
pub mod send;
pub mod server;
pub mod service;
pub mod status;
pub mod telemetry;
pub mod transaction;

pub use error::GrpcError;
pub use server::GrpcServer;
