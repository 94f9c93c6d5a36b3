//! Every size, count and time limit of the wire protocol and message model, in one place.
//!
//! Names carry their unit last (`_bytes`, `_ms`, `_count`). Values that RocketMQ 4.x clients rely on
//! are RocketMQ's own (`NettyDecoder`, `DefaultMQProducer`, `TopicValidator`); relationships between
//! limits are checked at compile time below.

/// Largest remoting frame, length word excluded (`com.rocketmq.remoting.frameMaxLength`, 16 MiB).
pub const FRAME_SIZE_MAX_BYTES: usize = 16 * 1024 * 1024;

/// Largest header inside a frame: the 3-byte header-length field caps it at 2^24 - 1.
pub const HEADER_SIZE_MAX_BYTES: usize = (1 << 24) - 1;

/// Largest message body a producer may send (`maxMessageSize`, 4 MiB), before compression.
pub const MESSAGE_BODY_SIZE_MAX_BYTES: usize = 4 * 1024 * 1024;

/// Largest batch body (SEND_BATCH_MESSAGE): the whole batch must fit what one message may be.
pub const BATCH_BODY_SIZE_MAX_BYTES: usize = 4 * 1024 * 1024;

/// Message properties are stored behind an `i16` length (`PROPLEN`).
pub const PROPERTIES_SIZE_MAX_BYTES: usize = i16::MAX as usize;

/// Topic names: RocketMQ 4.x limit (`TopicValidator.TOPIC_MAX_LENGTH`); also what fits a v1 record's
/// one-byte topic length.
pub const TOPIC_NAME_LENGTH_MAX_CHARS: usize = 127;

/// Consumer and producer group names (`Validators.CHARACTER_MAX_LENGTH`).
pub const GROUP_NAME_LENGTH_MAX_CHARS: usize = 255;

/// A client compresses bodies larger than this (`compressMsgBodyOverHowmuch`, 4 KiB).
pub const COMPRESS_BODY_OVER_BYTES: usize = 4 * 1024;

/// Default timeout of one remoting call made by our clients (`sendMsgTimeout`).
pub const RPC_TIMEOUT_DEFAULT_MS: u64 = 3_000;

/// Requests one connection may have waiting for a response before new calls are refused.
pub const CONNECTION_INFLIGHT_MAX_COUNT: usize = 65_536;

/// How long a graceful shutdown waits for in-flight requests before closing connections.
pub const SHUTDOWN_DRAIN_MAX_MS: u64 = 5_000;

const _: () = assert!(MESSAGE_BODY_SIZE_MAX_BYTES < FRAME_SIZE_MAX_BYTES);
const _: () = assert!(BATCH_BODY_SIZE_MAX_BYTES < FRAME_SIZE_MAX_BYTES);
const _: () = assert!(TOPIC_NAME_LENGTH_MAX_CHARS <= i8::MAX as usize);
const _: () = assert!(HEADER_SIZE_MAX_BYTES < FRAME_SIZE_MAX_BYTES);
