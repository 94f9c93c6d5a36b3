//! raftmq-grpc: RocketMQ 5's gRPC `apache.rocketmq.v2.MessagingService` (apache/rocketmq-apis,
//! vendored in `proto/`), served next to a broker replica on `grpcServerPort`, as RocketMQ's proxy
//! serves it in front of a broker.
//!
//! ```text
//! 5.x client ──gRPC──▶ server (tonic, deadline per call) ──▶ service (MessagingService)
//!    QueryRoute / QueryAssignment ─▶ route (pure: topic config → queues, endpoints)
//!    SendMessage ─▶ send (pure: pb Message → SEND_MESSAGE) ─▶ Bridge ─▶ the broker's send path
//!    EndTransaction ─▶ transaction (pure: transaction id ↔ half offsets) ─▶ Bridge ─▶ END_TRANSACTION
//!    Telemetry ─▶ telemetry_stream ─▶ telemetry (Settings answered; stack traces, verification refused)
//!       ◀─ check_back (RecoverOrphanedTransactionCommand) ◀─ the broker's transaction check service
//!    ReceiveMessage ─▶ receive (pure: POP_MESSAGE; records → a status and the messages) ─▶ Bridge
//!    AckMessage / ChangeInvisibleDuration / ForwardMessageToDeadLetterQueue ─▶ ack (pure: receipt
//!       handles as extraInfo) ─▶ Bridge ─▶ ACK_MESSAGE, CHANGE_MESSAGE_INVISIBLETIME, CONSUMER_SEND_MSG_BACK
//!    UpdateOffset / GetOffset / QueryOffset ─▶ offset (pure: queue checked) ─▶ Bridge ─▶
//!       UPDATE_CONSUMER_OFFSET, QUERY_CONSUMER_OFFSET, GET_MIN/MAX_OFFSET, SEARCH_OFFSET_BY_TIMESTAMP
//!    every request ─▶ namespace (pure: `Resource.resource_namespace` joined as `ns%name`)
//!    stored records ─▶ message (pure: MessageExt → pb Message, the proxy's system properties)
//!    response codes ◀─ status (remoting ResponseCode → apache.rocketmq.v2.Code, as the proxy maps)
//! ```
//!
//! The crate is kept apart from `raftmq-broker` so that tonic, prost and the generated code never
//! enter the broker's core: the broker only exposes its processors through
//! `raftmq_broker::processors::bridge::Bridge`, and a message sent over gRPC is stored by exactly the
//! remoting path (acknowledged after quorum fsync and apply).

pub mod ack;
pub mod acl;
pub mod check_back;
pub mod error;
pub mod message;
pub mod namespace;
pub mod offset;
pub mod pb;
pub mod receive;
pub mod route;
pub mod send;
pub mod server;
pub mod service;
pub mod status;
pub mod telemetry;
pub mod telemetry_stream;
pub mod transaction;

pub use error::GrpcError;
pub use server::GrpcServer;
