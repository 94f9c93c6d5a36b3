//! `BodyCompression`: which message bodies a producer compresses, and how — RocketMQ's
//! `compressMsgBodyOverHowmuch` (4 KiB) with RocketMQ 5's `compressType` (ZLIB, LZ4 or ZSTD; ZLIB by
//! default, as 4.x always did) and `compressLevel` (5, used by ZSTD). The body's `sysFlag` gets bit 0
//! and the type in bits 8–10, so any 5.x consumer (and ours, `raftmq_common::message::compress`)
//! reads it back. Batches are never compressed (as in Java).

use bytes::Bytes;
use raftmq_common::limits::COMPRESS_BODY_OVER_BYTES;
use raftmq_common::message::compress::ZSTD_LEVEL;
use raftmq_common::message::compress::compress_body_as;
use raftmq_common::message::compress::compressed_sys_flag;
use raftmq_common::message::sys_flag::CompressionType;

/// A producer's body compression settings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BodyCompression {
    /// Bodies of at least this many bytes are compressed.
    pub over_bytes: usize,
    /// The algorithm.
    pub kind: CompressionType,
    /// The level (ZSTD; zlib always uses 5 and LZ4 has none, as in RocketMQ 5).
    pub level: i32,
}

impl Default for BodyCompression {
    fn default() -> Self {
        BodyCompression { over_bytes: COMPRESS_BODY_OVER_BYTES, kind: CompressionType::Zlib, level: ZSTD_LEVEL }
    }
}

impl BodyCompression {
    /// The compressed body and its `sysFlag` bits, when `body` is large enough to be compressed.
    pub fn apply(&self, body: &[u8]) -> Option<(Bytes, i32)> {
        (body.len() >= self.over_bytes)
            .then(|| (Bytes::from(compress_body_as(self.kind, body, self.level)), compressed_sys_flag(self.kind)))
    }
}

#[cfg(test)]
mod tests {
    use raftmq_common::message::compress::uncompress_stored_body;

    use super::*;

    #[test]
    fn large_bodies_are_compressed_as_configured_and_read_back() {
        let body: Vec<u8> = (0..5_000u32).map(|i| (i % 17) as u8).collect();
        for (kind, flag) in
            [(CompressionType::Zlib, 0x301), (CompressionType::Lz4, 0x101), (CompressionType::Zstd, 0x201)]
        {
            let c = BodyCompression { kind, ..BodyCompression::default() };
            let (packed, sys_flag) = c.apply(&body).expect("over 4 KiB");
            assert_eq!(sys_flag, flag, "{kind:?}");
            assert!(packed.len() < body.len());
            assert_eq!(uncompress_stored_body(sys_flag, &packed).unwrap(), body);
            assert!(c.apply(&body[..4095]).is_none(), "below the threshold");
        }
    }
}
