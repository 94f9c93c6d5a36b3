//! The RocketMQ message model and its byte formats, as pure codecs (no I/O, no clocks).
//!
//! ```text
//!  producer                 SEND header `i` / batch body         CommitLog record / PULL body
//!  Message ── properties ──► "k\u1v\u2k\u1v" ── batch ──► entries ── record ──► bytes
//!             sys_flag, compress (body)                     msg_id: offsetMsgId / UNIQ_KEY
//! ```
//!
//! - [`properties`]: the `key U+0001 value U+0002` map and the well-known keys (`MessageConst`).
//! - [`sys_flag`]: `MessageSysFlag` bits.
//! - [`tag`]: Java `String.hashCode` tag codes (ConsumeQueue) and IndexFile key hashes.
//! - [`model`]: [`Message`], [`MessageExt`], [`MessageQueue`].
//! - [`validate`]: topic/group/message rules, system topics, retry/DLQ names.
//! - [`namespace`]: `ns%name`, a namespace joined into a topic or group name.
//! - [`compress`]: zlib bodies, bounded decompression.
//! - [`msg_id`]: offsetMsgId and UNIQ_KEY.
//! - [`record`]: the CommitLog record codec (v1/v2, IPv4/IPv6), offset patching.
//! - [`batch`]: the SEND_BATCH_MESSAGE body and batch rules.
//! - [`trace`]: message trace records (`TraceDataEncoder`), written to the trace topic.
//!
//! Every decoder returns an error on malformed input and never panics (layouts:
//! docs/wire-format.md#batch-body, docs/store-format.md#commitlog-record).

pub mod batch;
pub mod compress;
pub mod model;
pub mod msg_id;
pub mod namespace;
pub mod properties;
pub mod record;
pub mod sys_flag;
pub mod tag;
pub mod trace;
pub mod validate;

#[cfg(test)]
pub(crate) mod testing;

pub use compact_str::CompactString;
pub use model::Message;
pub use model::MessageExt;
pub use model::MessageQueue;
pub use msg_id::OffsetMsgId;
pub use properties::Properties;
pub use record::RecordError;
