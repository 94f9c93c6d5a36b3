//! Body compression as RocketMQ does it, flagged by `sysFlag` bit 0 with the type in bits 8–10
//! (docs/wire-format.md#body-compression): zlib (4.x; `java.util.zip.Deflater` level 5 in a
//! `DeflaterOutputStream`), and RocketMQ 5's `compressionType` LZ4 (`Lz4Compressor`: one LZ4 frame,
//! lz4-java's `LZ4FrameOutputStream`) and ZSTD (`ZstdCompressor`: one zstd frame, zstd-jni's
//! `ZstdOutputStream` at `compressLevel`, default 5).
//!
//! Invariants:
//! - Decompression is bounded: output beyond the caller's limit (normally
//!   [`UNCOMPRESSED_BODY_SIZE_MAX_BYTES`]) is refused once it is exceeded, with at most about twice the
//!   limit allocated, so a zip bomb costs bounded memory and time.
//! - A stream must end properly: truncated or corrupt input is an error, never a partial body.
//! - Every type RocketMQ names (zlib, LZ4, ZSTD) is read, under the same bound; a type value it
//!   does not name (4–7) is reported as unsupported.

use std::io::Read;
use std::io::Write;

use bytes::Bytes;
use flate2::Compression;
use flate2::Decompress;
use flate2::FlushDecompress;
use flate2::Status;
use flate2::write::ZlibEncoder;
use thiserror::Error;

use super::sys_flag;
use super::sys_flag::CompressionType;
use crate::limits::UNCOMPRESSED_BODY_SIZE_MAX_BYTES;

/// The zlib level RocketMQ's producer uses (`compressMsgBodyLevel`, default 5).
pub const ZLIB_LEVEL: u32 = 5;

/// Output grows by at least this much per step while inflating.
const GROW_STEP_BYTES: usize = 64 * 1024;

/// Why a body could not be decompressed.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum CompressError {
    /// The body is not a complete zlib stream.
    #[error("the compressed message body is corrupt: {0}")]
    Corrupt(String),
    /// The body decompresses to more than allowed.
    #[error("the compressed message body expands to more than {max_bytes} bytes")]
    TooLarge {
        /// The limit that was hit.
        max_bytes: usize,
    },
    /// `sysFlag` names a compression this broker does not implement.
    #[error("unsupported message body compression type {0}")]
    Unsupported(String),
}

/// zlib-compresses `body` at level 5.
pub fn compress_body(body: &[u8]) -> Vec<u8> {
    let mut encoder = ZlibEncoder::new(Vec::with_capacity(body.len() / 2 + 64), Compression::new(ZLIB_LEVEL));
    // Writing into a Vec cannot fail and deflate accepts every input, so these results are always Ok.
    encoder.write_all(body).expect("zlib into a Vec is infallible");
    encoder.finish().expect("zlib into a Vec is infallible")
}

/// The zstd level RocketMQ 5 uses (`rocketmq.message.compressLevel`, default 5).
pub const ZSTD_LEVEL: i32 = 5;

/// Compresses `body` as `kind` (zlib at level 5, an LZ4 frame, a zstd frame at `zstd_level`).
pub fn compress_body_as(kind: CompressionType, body: &[u8], zstd_level: i32) -> Vec<u8> {
    match kind {
        CompressionType::Zlib => compress_body(body),
        CompressionType::Lz4 => {
            let mut encoder = lz4_flex::frame::FrameEncoder::new(Vec::with_capacity(body.len() / 2 + 64));
            // Writing into a Vec cannot fail, and LZ4 takes every input.
            encoder.write_all(body).expect("lz4 into a Vec is infallible");
            encoder.finish().expect("lz4 into a Vec is infallible")
        }
        // zstd only fails on a bad parameter; the level is clamped to zstd's range.
        CompressionType::Zstd => zstd::bulk::compress(body, zstd_level.clamp(1, 22)).expect("zstd into a Vec"),
    }
}

/// `sysFlag` bits of a body compressed as `kind` (bit 0 and the type in bits 8–10).
pub fn compressed_sys_flag(kind: CompressionType) -> i32 {
    sys_flag::COMPRESSED
        | match kind {
            CompressionType::Zlib => sys_flag::COMPRESSION_ZLIB_TYPE,
            CompressionType::Lz4 => sys_flag::COMPRESSION_LZ4_TYPE,
            CompressionType::Zstd => sys_flag::COMPRESSION_ZSTD_TYPE,
        }
}

/// Reads a decompressing stream to its end, refusing output longer than `max_len_bytes`: at most
/// `max_len_bytes + 1` bytes are ever asked of it.
fn read_bounded(stream: impl Read, max_len_bytes: usize, what: &str) -> Result<Vec<u8>, CompressError> {
    let mut out = Vec::new();
    let cap = u64::try_from(max_len_bytes).unwrap_or(u64::MAX).saturating_add(1);
    stream.take(cap).read_to_end(&mut out).map_err(|e| CompressError::Corrupt(format!("{what}: {e}")))?;
    if out.len() > max_len_bytes {
        return Err(CompressError::TooLarge { max_bytes: max_len_bytes });
    }
    Ok(out)
}

/// Decompresses one LZ4 frame (lz4-java's `LZ4FrameInputStream` reads what it writes), refusing
/// output longer than `max_len_bytes`.
pub fn uncompress_lz4(compressed: &[u8], max_len_bytes: usize) -> Result<Vec<u8>, CompressError> {
    if !lz4_frame_complete(compressed) {
        return Err(CompressError::Corrupt("not a complete lz4 frame".to_owned()));
    }
    read_bounded(lz4_flex::frame::FrameDecoder::new(compressed), max_len_bytes, "lz4")
}

/// Whether `bytes` start with one whole LZ4 frame (header, blocks, end mark, checksum if flagged).
/// The decoder alone takes a frame cut between two blocks, or after its magic, as a shorter one.
fn lz4_frame_complete(bytes: &[u8]) -> bool {
    const MAGIC: [u8; 4] = [0x04, 0x22, 0x4D, 0x18];
    let (Some(magic), Some(&flg)) = (bytes.get(..4), bytes.get(4)) else { return false };
    if magic != MAGIC {
        return false;
    }
    let (block_checksum, content_size, content_checksum, dict_id) =
        (flg & 0x10 != 0, flg & 0x08 != 0, flg & 0x04 != 0, flg & 0x01 != 0);
    // FLG, BD, the optional content size and dictionary id, the header checksum.
    let mut at = 4 + 2 + if content_size { 8 } else { 0 } + if dict_id { 4 } else { 0 } + 1;
    loop {
        let Some(word) = bytes.get(at..at + 4).and_then(|w| <[u8; 4]>::try_from(w).ok()) else { return false };
        at += 4;
        let size = (u32::from_le_bytes(word) & 0x7FFF_FFFF) as usize;
        if size == 0 {
            break;
        }
        at = at.saturating_add(size).saturating_add(if block_checksum { 4 } else { 0 });
    }
    at + if content_checksum { 4 } else { 0 } <= bytes.len()
}

/// Decompresses zstd frames, refusing output longer than `max_len_bytes`.
pub fn uncompress_zstd(compressed: &[u8], max_len_bytes: usize) -> Result<Vec<u8>, CompressError> {
    if compressed.is_empty() {
        return Err(CompressError::Corrupt("empty zstd body".to_owned()));
    }
    let decoder = zstd::stream::read::Decoder::with_buffer(compressed)
        .map_err(|e| CompressError::Corrupt(format!("zstd: {e}")))?;
    read_bounded(decoder, max_len_bytes, "zstd")
}

/// Decompresses a zlib body, refusing output longer than `max_len_bytes`.
pub fn uncompress_body(compressed: &[u8], max_len_bytes: usize) -> Result<Vec<u8>, CompressError> {
    inflate(compressed, max_len_bytes, false)
}

/// The first `max_len_bytes` of a zlib body (all of it if shorter): what a viewer shows, for the
/// cost of inflating only that much.
pub fn uncompress_body_prefix(compressed: &[u8], max_len_bytes: usize) -> Result<Vec<u8>, CompressError> {
    inflate(compressed, max_len_bytes, true)
}

fn inflate(compressed: &[u8], max_len_bytes: usize, prefix: bool) -> Result<Vec<u8>, CompressError> {
    // Driving `Decompress` by hand (rather than `read_to_end`) tells a complete stream (StreamEnd)
    // from a truncated one, and lets the output grow only step by step up to the limit.
    let cap_bytes = max_len_bytes.saturating_add(1);
    let mut inflater = Decompress::new(true);
    let mut out: Vec<u8> = Vec::with_capacity(compressed.len().saturating_mul(4).max(64).min(cap_bytes));
    loop {
        if out.len() == out.capacity() {
            out.reserve_exact(out.len().max(GROW_STEP_BYTES).min(cap_bytes - out.len()));
        }
        let in_before = inflater.total_in();
        let out_before = inflater.total_out();
        let consumed = usize::try_from(in_before).unwrap_or(usize::MAX);
        let input = compressed.get(consumed..).unwrap_or(&[]);
        let status = inflater
            .decompress_vec(input, &mut out, FlushDecompress::None)
            .map_err(|e| CompressError::Corrupt(e.to_string()))?;
        if out.len() > max_len_bytes {
            if prefix {
                out.truncate(max_len_bytes);
                return Ok(out);
            }
            return Err(CompressError::TooLarge { max_bytes: max_len_bytes });
        }
        match status {
            // Bytes after the stream's end are ignored, as Java's InflaterInputStream does.
            Status::StreamEnd => return Ok(out),
            Status::Ok | Status::BufError => {
                let progressed = inflater.total_in() != in_before || inflater.total_out() != out_before;
                if !progressed && out.len() < out.capacity() {
                    return Err(CompressError::Corrupt("truncated zlib stream".to_owned()));
                }
            }
        }
    }
}

/// The original body of a stored message: `body` itself unless `sys_flag` marks it compressed.
pub fn uncompress_stored_body(sys_flag: i32, body: &Bytes) -> Result<Bytes, CompressError> {
    if !sys_flag::is_compressed(sys_flag) {
        return Ok(body.clone());
    }
    let max = UNCOMPRESSED_BODY_SIZE_MAX_BYTES;
    match sys_flag::compression_type(sys_flag) {
        Ok(CompressionType::Zlib) => Ok(Bytes::from(uncompress_body(body, max)?)),
        Ok(CompressionType::Lz4) => Ok(Bytes::from(uncompress_lz4(body, max)?)),
        Ok(CompressionType::Zstd) => Ok(Bytes::from(uncompress_zstd(body, max)?)),
        Err(value) => Err(CompressError::Unsupported(value.to_string())),
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;
    use crate::message::testing::body;

    #[test]
    fn a_prefix_inflates_only_what_is_asked() {
        let original: Vec<u8> = (0..100_000u32).map(|i| (i % 251) as u8).collect();
        let z = compress_body(&original);
        assert_eq!(uncompress_body_prefix(&z, 1000).unwrap(), original[..1000]);
        assert_eq!(uncompress_body_prefix(&z, 1 << 20).unwrap(), original);
        assert!(matches!(uncompress_body(&z, 1000), Err(CompressError::TooLarge { .. })));
    }

    #[test]
    fn zlib_stream_shape() {
        let packed = compress_body(b"hello hello hello hello");
        // zlib header: CM = 8 (deflate), and the 16-bit header is a multiple of 31 (RFC 1950).
        assert_eq!(packed[0] & 0x0F, 8);
        assert_eq!(u16::from_be_bytes([packed[0], packed[1]]) % 31, 0);
        assert_eq!(uncompress_body(&packed, 1024).unwrap(), b"hello hello hello hello");
    }

    #[test]
    fn decodes_a_java_deflater_stream() {
        // What `new DeflaterOutputStream(out, new Deflater(5))` writes for "abc": the bytes of zlib (the
        // library java.util.zip wraps) at level 5, from Python `zlib.compress(b"abc", 5)`: header 78 5E,
        // one fixed-Huffman block, Adler-32 trailer 024D0127.
        let java = [0x78, 0x5E, 0x4B, 0x4C, 0x4A, 0x06, 0x00, 0x02, 0x4D, 0x01, 0x27];
        assert_eq!(uncompress_body(&java, 16).unwrap(), b"abc");
    }

    #[test]
    fn bomb_is_refused_at_the_limit() {
        let zeros = vec![0u8; 1 << 20];
        let packed = compress_body(&zeros);
        assert!(packed.len() < 4096);
        assert_eq!(uncompress_body(&packed, (1 << 20) - 1), Err(CompressError::TooLarge { max_bytes: (1 << 20) - 1 }));
        assert_eq!(uncompress_body(&packed, 1 << 20).unwrap().len(), 1 << 20);
    }

    #[test]
    fn truncated_and_corrupt_streams_fail() {
        let packed = compress_body(b"some body that is long enough to matter, some body that is long enough");
        for cut in 0..packed.len() {
            assert!(uncompress_body(&packed[..cut], 1 << 20).is_err(), "cut at {cut}");
        }
        assert!(matches!(uncompress_body(b"not zlib at all", 1 << 20), Err(CompressError::Corrupt(_))));
        // Trailing bytes after a complete stream are ignored, as in Java.
        let mut trailing = packed.clone();
        trailing.extend_from_slice(b"junk");
        assert!(uncompress_body(&trailing, 1 << 20).is_ok());
    }

    #[test]
    fn stored_body_follows_sys_flag() {
        let raw = Bytes::from_static(b"payload");
        assert_eq!(uncompress_stored_body(0, &raw).unwrap(), raw);
        let packed = Bytes::from(compress_body(&raw));
        assert_eq!(uncompress_stored_body(sys_flag::COMPRESSED, &packed).unwrap(), raw);
        let zlib3 = sys_flag::COMPRESSED | sys_flag::COMPRESSION_ZLIB_TYPE;
        assert_eq!(uncompress_stored_body(zlib3, &packed).unwrap(), raw);
        let lz4 = sys_flag::COMPRESSED | sys_flag::COMPRESSION_LZ4_TYPE;
        assert!(
            matches!(uncompress_stored_body(lz4, &packed), Err(CompressError::Corrupt(_))),
            "zlib bytes are no lz4"
        );
        for kind in [CompressionType::Lz4, CompressionType::Zstd, CompressionType::Zlib] {
            let packed = Bytes::from(compress_body_as(kind, &raw, ZSTD_LEVEL));
            assert_eq!(uncompress_stored_body(compressed_sys_flag(kind), &packed).unwrap(), raw, "{kind:?}");
        }
        assert!(matches!(
            uncompress_stored_body(sys_flag::COMPRESSED | 0x700, &packed),
            Err(CompressError::Unsupported(_))
        ));
    }

    #[test]
    fn lz4_and_zstd_bombs_truncation_and_garbage_are_refused() {
        let zeros = vec![0u8; 1 << 20];
        for kind in [CompressionType::Lz4, CompressionType::Zstd] {
            let read = |b: &[u8], max| match kind {
                CompressionType::Lz4 => uncompress_lz4(b, max),
                _ => uncompress_zstd(b, max),
            };
            let packed = compress_body_as(kind, &zeros, ZSTD_LEVEL);
            assert!(packed.len() < 8192, "{kind:?} packs zeros");
            assert_eq!(read(&packed, (1 << 20) - 1), Err(CompressError::TooLarge { max_bytes: (1 << 20) - 1 }));
            assert_eq!(read(&packed, 1 << 20).unwrap().len(), 1 << 20);
            let text = compress_body_as(kind, b"some body that is long enough to matter, some body that is long", 5);
            for cut in 0..text.len() {
                assert!(read(&text[..cut], 1 << 20).is_err(), "{kind:?} cut at {cut}");
            }
            assert!(matches!(read(b"not compressed at all", 1 << 20), Err(CompressError::Corrupt(_))));
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(5_000))]

        #[test]
        fn round_trip(body in prop_oneof![
            body(2048),
            // Compressible input exercises back-references, not just literals.
            (0usize..4096, 1u8..8).prop_map(|(n, period)| Bytes::from((0..n).map(|i| (i % usize::from(period)) as u8).collect::<Vec<u8>>())),
        ]) {
            let packed = compress_body(&body);
            prop_assert_eq!(uncompress_body(&packed, body.len()).unwrap(), body.to_vec());
        }

        #[test]
        fn lz4_and_zstd_round_trip(body in body(2048), lz4 in any::<bool>()) {
            let kind = if lz4 { CompressionType::Lz4 } else { CompressionType::Zstd };
            let packed = compress_body_as(kind, &body, ZSTD_LEVEL);
            prop_assert_eq!(uncompress_stored_body(compressed_sys_flag(kind), &Bytes::from(packed)).unwrap(), body);
        }

        #[test]
        fn lz4_and_zstd_garbage_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..256), max in 0usize..4096) {
            for out in [uncompress_lz4(&bytes, max), uncompress_zstd(&bytes, max)].into_iter().flatten() {
                prop_assert!(out.len() <= max);
            }
        }

        #[test]
        fn arbitrary_input_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..256), max in 0usize..4096) {
            if let Ok(out) = uncompress_body(&bytes, max) {
                prop_assert!(out.len() <= max);
            }
        }
    }
}
