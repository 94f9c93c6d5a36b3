//! The RocketMQ 4.x remoting protocol as pure codecs.
//!
//! - [`code`]: request, response and language codes with RocketMQ's numbers.
//! - [`command`]: [`RemotingCommand`] and its frame (length, serialize type, JSON or ROCKETMQ header, body).
//! - [`header`]: typed request/response headers, carried flattened in a command's `extFields`.
//! - [`body`]: JSON bodies (heartbeats, routes, registrations, lock sets, ...).
//! - [`acl`]: plain-ACL request signatures (`AccessKey`, `Signature`), shared by client and broker.
//! - [`cluster_signature`]: the HMAC-SHA256 proof of membership on Raft RPCs and NameServer writes.
//! - [`replay_window`]: each cluster-signed request accepted once (per-session sliding window).
//! - [`acl_account`]: one plain-ACL account as the file and the edit request write it.
//! - [`leader_hint`]: the `leader=<ip:port>` remark a non-leader broker adds to SERVICE_NOT_AVAILABLE.
//!
//! Nothing here performs I/O; decoders return [`DecodeError`] and never panic on any input.

pub mod acl;
pub mod acl_account;
pub mod body;
pub mod cluster_signature;
pub mod code;
pub mod command;
pub mod ext_fields;
pub mod header;
pub mod leader_hint;
pub mod replay_window;

pub use code::LanguageCode;
pub use code::RequestCode;
pub use code::ResponseCode;
pub use command::DecodeError;
pub use command::EncodeError;
pub use command::RemotingCommand;
pub use command::SerializeType;
pub use ext_fields::ExtFields;
