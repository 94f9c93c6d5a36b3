//! raftmq-common: the RocketMQ 4.x wire protocol and the remoting transport.
//!
//! Two halves with a hard line between them:
//! - **Codecs** (`protocol`, `message`, `limits`): pure functions from bytes to typed values and back.
//!   No I/O, no tokio, no clocks; every decoder returns an error on bad input and never panics.
//! - **Transport** (`remoting`): tokio server and client that move [`protocol::RemotingCommand`]
//!   frames over TCP with opaque-based request/response correlation.
//!
//! The transport sits behind the `remoting` cargo feature (on by default) so the codecs build and
//! test without tokio (`cargo test -p raftmq-common --no-default-features`): a tool, a fuzzer or a
//! compatibility checker can take the wire format without an async runtime, and the line between
//! the halves is enforced by the compiler, not by review.
//!
//! Data flow of a request: bytes → `remoting` framing → `protocol::command` (frame + header) →
//! a processor reads its typed header from `protocol::header` and its body from `protocol::body` or
//! `message` → a response command goes back the same way.

pub mod cluster_secret;
pub mod config_duration;
pub mod config_file;
pub mod filter;
pub mod java;
pub mod limits;
pub mod message;
pub mod protocol;
#[cfg(feature = "remoting")]
pub mod remoting;
pub mod sync;
pub mod test_skip;
pub mod tls_settings;
