//! [`RemotingCodec`]: RocketMQ frames on a byte stream, as `tokio_util::codec` Decoder/Encoder.
//!
//! Framing is `LengthDelimitedCodec` (4-byte big-endian length that excludes itself, at most
//! [`FRAME_SIZE_MAX_BYTES`]), the same as RocketMQ's `NettyDecoder`. Before the length word is
//! handed to it, the codec checks it as a signed `i32` with [`check_frame_len`], so a negative, a
//! too-short or an oversized length is a [`DecodeError`] naming the value instead of a generic
//! "frame too big".
//!
//! Invariants:
//! - No input panics; every error is returned and the caller closes the connection, because after a
//!   bad frame the stream position can no longer be trusted.
//! - The encoder writes exactly what [`RemotingCommand::encode_into`] writes (length word included).

use bytes::BytesMut;
use thiserror::Error;
use tokio_util::codec::Decoder;
use tokio_util::codec::Encoder;
use tokio_util::codec::LengthDelimitedCodec;

use crate::limits::FRAME_SIZE_MAX_BYTES;
use crate::protocol::DecodeError;
use crate::protocol::EncodeError;
use crate::protocol::RemotingCommand;
use crate::protocol::command::check_frame_len;

const LENGTH_WORD_BYTES: usize = 4;

/// Decodes and encodes [`RemotingCommand`] frames.
#[derive(Debug)]
pub struct RemotingCodec {
    frames: LengthDelimitedCodec,
    /// Mirrors `LengthDelimitedCodec`'s state: true while it has not consumed the next length word,
    /// i.e. while the front of the buffer is a length word we must validate first.
    at_length_word: bool,
}

impl RemotingCodec {
    /// A codec with RocketMQ's framing and the 16 MiB frame limit.
    pub fn new() -> Self {
        let frames = LengthDelimitedCodec::builder()
            .length_field_length(LENGTH_WORD_BYTES)
            .max_frame_length(FRAME_SIZE_MAX_BYTES)
            .big_endian()
            .new_codec();
        Self { frames, at_length_word: true }
    }
}

impl Default for RemotingCodec {
    fn default() -> Self {
        Self::new()
    }
}

/// Why a stream of frames could not be read or written.
#[derive(Debug, Error)]
pub enum CodecError {
    /// The socket failed.
    #[error("i/o error: {0}")]
    Io(#[from] std::io::Error),
    /// The peer sent bytes that are not a valid frame.
    #[error("bad frame: {0}")]
    Decode(#[from] DecodeError),
    /// A command could not be encoded.
    #[error("cannot encode command: {0}")]
    Encode(#[from] EncodeError),
}

impl Decoder for RemotingCodec {
    type Item = RemotingCommand;
    type Error = CodecError;

    fn decode(&mut self, src: &mut BytesMut) -> Result<Option<RemotingCommand>, CodecError> {
        if self.at_length_word {
            let Some(word) = src.get(..LENGTH_WORD_BYTES) else {
                return Ok(None);
            };
            let total_len = i32::from_be_bytes([word[0], word[1], word[2], word[3]]);
            check_frame_len(total_len)?;
        }
        // With at least a length word buffered, LengthDelimitedCodec either yields the frame or
        // consumes the word and waits for data; without one it consumes nothing.
        let had_length_word = src.len() >= LENGTH_WORD_BYTES;
        match self.frames.decode(src)? {
            Some(frame) => {
                self.at_length_word = true;
                Ok(Some(RemotingCommand::decode_frame(frame.freeze())?))
            }
            None => {
                if self.at_length_word && had_length_word {
                    self.at_length_word = false;
                }
                Ok(None)
            }
        }
    }
}

impl Encoder<RemotingCommand> for RemotingCodec {
    type Error = CodecError;

    fn encode(&mut self, item: RemotingCommand, dst: &mut BytesMut) -> Result<(), CodecError> {
        item.encode_into(dst)?;
        Ok(())
    }
}

impl Encoder<&RemotingCommand> for RemotingCodec {
    type Error = CodecError;

    fn encode(&mut self, item: &RemotingCommand, dst: &mut BytesMut) -> Result<(), CodecError> {
        item.encode_into(dst)?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use bytes::BufMut;
    use proptest::prelude::*;

    use super::*;
    use crate::protocol::RequestCode;

    fn sample(opaque: i32) -> RemotingCommand {
        let mut cmd = RemotingCommand::request(RequestCode::HeartBeat).with_body(vec![7u8; 100]);
        cmd.opaque = opaque;
        cmd.ext_fields.insert("k".into(), format!("v{opaque}").into());
        cmd
    }

    fn decode_all(codec: &mut RemotingCodec, buf: &mut BytesMut) -> Result<Vec<RemotingCommand>, CodecError> {
        let mut out = Vec::new();
        while let Some(cmd) = codec.decode(buf)? {
            out.push(cmd);
        }
        Ok(out)
    }

    #[test]
    fn round_trips_several_frames_in_one_buffer() {
        let mut codec = RemotingCodec::new();
        let mut buf = BytesMut::new();
        for opaque in 0..3 {
            codec.encode(sample(opaque), &mut buf).unwrap();
        }
        let cmds = decode_all(&mut codec, &mut buf).unwrap();
        assert_eq!(cmds, vec![sample(0), sample(1), sample(2)]);
        assert!(buf.is_empty());
    }

    #[test]
    fn negative_length_is_a_bad_length() {
        let mut codec = RemotingCodec::new();
        let mut buf = BytesMut::new();
        buf.put_i32(-5);
        buf.put_slice(b"junk");
        let err = codec.decode(&mut buf).unwrap_err();
        assert!(matches!(err, CodecError::Decode(DecodeError::BadLength(-5))), "{err}");
    }

    #[test]
    fn too_short_length_is_a_bad_length() {
        let mut codec = RemotingCodec::new();
        let mut buf = BytesMut::from(&[0u8, 0, 0, 3, 1, 2, 3][..]);
        let err = codec.decode(&mut buf).unwrap_err();
        assert!(matches!(err, CodecError::Decode(DecodeError::BadLength(3))), "{err}");
    }

    #[test]
    fn oversized_length_is_refused_before_any_body_arrives() {
        let mut codec = RemotingCodec::new();
        let mut buf = BytesMut::new();
        buf.put_i32(FRAME_SIZE_MAX_BYTES as i32 + 1);
        let err = codec.decode(&mut buf).unwrap_err();
        assert!(matches!(err, CodecError::Decode(DecodeError::FrameTooLarge { .. })), "{err}");
    }

    #[test]
    fn undecodable_header_is_an_error() {
        let mut codec = RemotingCodec::new();
        let header = b"{not json";
        let mut buf = BytesMut::new();
        buf.put_i32(4 + header.len() as i32);
        buf.put_u32(header.len() as u32);
        buf.put_slice(header);
        let err = codec.decode(&mut buf).unwrap_err();
        assert!(matches!(err, CodecError::Decode(DecodeError::Json(_))), "{err}");
    }

    #[test]
    fn frame_split_at_every_byte_decodes() {
        let mut whole = BytesMut::new();
        let mut codec = RemotingCodec::new();
        codec.encode(sample(1), &mut whole).unwrap();
        codec.encode(sample(2), &mut whole).unwrap();
        for cut in 0..whole.len() {
            let mut codec = RemotingCodec::new();
            let mut buf = BytesMut::from(&whole[..cut]);
            let mut got = decode_all(&mut codec, &mut buf).unwrap();
            buf.extend_from_slice(&whole[cut..]);
            got.extend(decode_all(&mut codec, &mut buf).unwrap());
            assert_eq!(got, vec![sample(1), sample(2)], "cut at {cut}");
        }
    }

    proptest! {
        #[test]
        fn arbitrary_bytes_in_arbitrary_chunks_never_panic(
            bytes in proptest::collection::vec(any::<u8>(), 0..512),
            chunk in 1usize..64,
        ) {
            let mut codec = RemotingCodec::new();
            let mut buf = BytesMut::new();
            for piece in bytes.chunks(chunk) {
                buf.extend_from_slice(piece);
                while let Ok(Some(_)) = codec.decode(&mut buf) {}
            }
        }
    }
}
