//! Body compression as RocketMQ 4.x does it: zlib (`java.util.zip.Deflater` level 5 in a
//! `DeflaterOutputStream`), flagged by `sysFlag` bit 0 (docs/wire-format.md#body-compression).
//!
//! Invariants:
//! - Decompression is bounded: output beyond the caller's limit (normally
//!   [`UNCOMPRESSED_BODY_SIZE_MAX_BYTES`]) is refused once it is exceeded, with at most about twice the
//!   limit allocated, so a zip bomb costs bounded memory and time.
//! - A stream must end properly: truncated or corrupt input is an error, never a partial body.
//! - Only zlib is supported; LZ4/ZSTD (4.9.5+ bits 8–10) are reported as unsupported.

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
    match sys_flag::compression_type(sys_flag) {
        Ok(CompressionType::Zlib) => Ok(Bytes::from(uncompress_body(body, UNCOMPRESSED_BODY_SIZE_MAX_BYTES)?)),
        Ok(other) => Err(CompressError::Unsupported(format!("{other:?}"))),
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
        assert!(matches!(uncompress_stored_body(lz4, &packed), Err(CompressError::Unsupported(_))));
        assert!(matches!(
            uncompress_stored_body(sys_flag::COMPRESSED | 0x700, &packed),
            Err(CompressError::Unsupported(_))
        ));
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
        fn arbitrary_input_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..256), max in 0usize..4096) {
            if let Ok(out) = uncompress_body(&bytes, max) {
                prop_assert!(out.len() <= max);
            }
        }
    }
}
