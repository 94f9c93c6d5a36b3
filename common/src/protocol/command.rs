//! [`RemotingCommand`] and its frame: the unit every RocketMQ request and response travels in.
//!
//! ```text
//! | total_len: i32 | serialize_type: u8, header_len: u24 | header (JSON or ROCKETMQ) | body |
//!   total_len = 4 + header_len + body_len (it excludes itself)
//! ```
//!
//! Invariants:
//! - `decode_frame(encode(cmd))` equals `cmd` for every command the encoder accepts.
//! - Decoders never panic and never allocate more than the input length: every length field is
//!   checked against what remains before it is used.
//! - JSON headers are emitted as fastjson emits them: keys in alphabetical order, null fields left
//!   out, `extFields` values always strings. Responses are encoded in the request's serialize type.

use bytes::Buf;
use bytes::BufMut;
use bytes::Bytes;
use bytes::BytesMut;
use compact_str::ToCompactString;
use serde::Deserialize;
use serde::Serialize;
use thiserror::Error;

use super::code::LanguageCode;
use super::code::RequestCode;
use super::code::ResponseCode;
use super::code::version;
use super::header::CommandHeader;
use super::header::HeaderError;
use crate::limits::EXT_FIELDS_MAX_COUNT;
use crate::limits::FRAME_SIZE_MAX_BYTES;
use crate::limits::HEADER_SIZE_MAX_BYTES;

pub use super::ext_fields::ExtFields;
pub use super::ext_fields::FieldStr;

/// The most `extFields` entries a decoder reserves room for before reading them (a send header
/// has 14; more than this still decode, by growing the vector).
const EXT_FIELDS_PRESIZE_MAX_COUNT: usize = 32;

/// Room an encoder reserves for a header's fields before writing them (a send header has 14,
/// signing adds a few).
const HEADER_FIELDS_TYPICAL_COUNT: usize = 16;

/// `flag` bit 0: this command is a response (`RemotingCommand.RPC_TYPE`).
pub const FLAG_RESPONSE: i32 = 0b01;
/// `flag` bit 1: no response is expected (`RemotingCommand.RPC_ONEWAY`).
pub const FLAG_ONEWAY: i32 = 0b10;
/// raftmq's own bit, unused by RocketMQ: a request a follower relayed to its leader. A replica
/// never relays such a request again, so two replicas that each take the other for the leader
/// (during an election) cannot pass one request back and forth.
pub const FLAG_RELAYED: i32 = 0b100;

/// How the header is serialized (`SerializeType.java`): the high byte of the second frame word.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SerializeType {
    /// fastjson header; what 4.x clients send by default.
    #[default]
    Json,
    /// `RocketMQSerializable` binary header.
    RocketMq,
}

impl SerializeType {
    /// The wire byte.
    pub fn as_u8(self) -> u8 {
        match self {
            SerializeType::Json => 0,
            SerializeType::RocketMq => 1,
        }
    }

    /// The serialize type for a wire byte.
    pub fn from_u8(b: u8) -> Option<Self> {
        match b {
            0 => Some(SerializeType::Json),
            1 => Some(SerializeType::RocketMq),
            _ => None,
        }
    }

    fn name(self) -> &'static str {
        match self {
            SerializeType::Json => "JSON",
            SerializeType::RocketMq => "ROCKETMQ",
        }
    }
}

/// One request or response.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RemotingCommand {
    /// Request code in a request, response code in a response; see [`Self::request_code`] and
    /// [`Self::response_code`].
    pub code: i32,
    /// The sender's language.
    pub language: LanguageCode,
    /// The sender's `MQVersion` ordinal.
    pub version: i32,
    /// Correlates a response with its request; chosen by the requester.
    pub opaque: i32,
    /// [`FLAG_RESPONSE`] and [`FLAG_ONEWAY`] bits, and raftmq's [`FLAG_RELAYED`].
    pub flag: i32,
    /// Human-readable error text.
    pub remark: Option<String>,
    /// The flattened typed header.
    pub ext_fields: ExtFields,
    /// How the header is (or will be) serialized.
    pub serialize_type: SerializeType,
    /// Opaque to the header: message bytes, a JSON body, or a Raft RPC.
    pub body: Bytes,
}

impl RemotingCommand {
    fn new(code: i32, flag: i32) -> Self {
        Self {
            code,
            language: LanguageCode::Rust,
            version: version::V4_9_8,
            opaque: 0,
            flag,
            remark: None,
            ext_fields: ExtFields::default(),
            serialize_type: SerializeType::Json,
            body: Bytes::new(),
        }
    }

    /// A request with no header fields; the transport assigns the opaque.
    pub fn request(code: RequestCode) -> Self {
        Self::new(code.as_i32(), 0)
    }

    /// A request carrying a typed header.
    pub fn request_with_header(code: RequestCode, header: &impl CommandHeader) -> Self {
        let mut cmd = Self::request(code);
        // One allocation for the common headers (a send's has 14 fields) instead of a doubling
        // series; a larger one grows as usual.
        cmd.ext_fields.reserve(HEADER_FIELDS_TYPICAL_COUNT);
        header.write_ext_fields(&mut cmd.ext_fields);
        cmd
    }

    /// A response with a code and remark, not yet tied to a request (see [`Self::answering`]).
    pub fn response(code: ResponseCode, remark: impl Into<Option<String>>) -> Self {
        let mut cmd = Self::new(code.as_i32(), FLAG_RESPONSE);
        cmd.remark = remark.into();
        cmd
    }

    /// A SUCCESS response.
    pub fn success() -> Self {
        Self::response(ResponseCode::Success, None)
    }

    /// Ties this response to `request`: same opaque, same serialize type.
    pub fn answering(mut self, request: &RemotingCommand) -> Self {
        self.opaque = request.opaque;
        self.serialize_type = request.serialize_type;
        self.flag |= FLAG_RESPONSE;
        self
    }

    /// Sets the body.
    pub fn with_body(mut self, body: impl Into<Bytes>) -> Self {
        self.body = body.into();
        self
    }

    /// Adds a typed header's fields.
    pub fn with_header(mut self, header: &impl CommandHeader) -> Self {
        header.write_ext_fields(&mut self.ext_fields);
        self
    }

    /// Sets the remark.
    pub fn with_remark(mut self, remark: impl Into<String>) -> Self {
        self.remark = Some(remark.into());
        self
    }

    /// Marks the request oneway: the peer sends no response.
    pub fn into_oneway(mut self) -> Self {
        self.flag |= FLAG_ONEWAY;
        self
    }

    /// Whether this is a response.
    pub fn is_response(&self) -> bool {
        self.flag & FLAG_RESPONSE != 0
    }

    /// Whether this is a oneway request.
    pub fn is_oneway(&self) -> bool {
        self.flag & FLAG_ONEWAY != 0
    }

    /// The code read as a request code.
    pub fn request_code(&self) -> RequestCode {
        RequestCode::from_i32(self.code)
    }

    /// The code read as a response code.
    pub fn response_code(&self) -> ResponseCode {
        ResponseCode::from_i32(self.code)
    }

    /// Reads a typed header from `extFields`.
    pub fn decode_header<H: CommandHeader>(&self) -> Result<H, HeaderError> {
        H::read_ext_fields(&self.ext_fields)
    }

    /// Encodes the whole frame, length word included.
    pub fn encode(&self) -> Result<BytesMut, EncodeError> {
        let mut dst = BytesMut::new();
        self.encode_into(&mut dst)?;
        Ok(dst)
    }

    /// Appends the whole frame, length word included, to `dst`. On error `dst` is unchanged.
    pub fn encode_into(&self, dst: &mut BytesMut) -> Result<(), EncodeError> {
        match self.serialize_type {
            SerializeType::Json => {
                let header = self.encode_json_header();
                let frame_len = self.frame_len(header.len())?;
                dst.reserve(4 + frame_len);
                self.put_frame_prefix(dst, frame_len, header.len());
                dst.put_slice(&header);
            }
            SerializeType::RocketMq => {
                // Sized first, then written straight into `dst`: every response and every request
                // a client sends goes through here, and a header buffer cost two allocations and a
                // copy each time.
                let (header_len, ext_len) = self.rocketmq_header_len()?;
                let frame_len = self.frame_len(header_len)?;
                dst.reserve(4 + frame_len);
                self.put_frame_prefix(dst, frame_len, header_len);
                self.put_rocketmq_header(dst, ext_len);
            }
        }
        dst.put_slice(&self.body);
        Ok(())
    }

    /// The frame length (without its length word) for a header of `header_len` bytes, checked
    /// against the limits.
    fn frame_len(&self, header_len: usize) -> Result<usize, EncodeError> {
        if header_len > HEADER_SIZE_MAX_BYTES {
            return Err(EncodeError::HeaderTooLarge { header_len_bytes: header_len });
        }
        let frame_len = 4 + header_len + self.body.len();
        if frame_len > FRAME_SIZE_MAX_BYTES {
            return Err(EncodeError::FrameTooLarge { frame_len_bytes: frame_len });
        }
        Ok(frame_len)
    }

    fn put_frame_prefix(&self, dst: &mut BytesMut, frame_len: usize, header_len: usize) {
        // Both casts are checked by `frame_len`: frame_len <= 16 MiB, header_len < 2^24.
        dst.put_i32(frame_len as i32);
        dst.put_u32(((self.serialize_type.as_u8() as u32) << 24) | header_len as u32);
    }

    /// Encodes the header alone, in this command's serialize type.
    pub fn encode_header(&self) -> Result<Vec<u8>, EncodeError> {
        let header = match self.serialize_type {
            SerializeType::Json => self.encode_json_header(),
            SerializeType::RocketMq => {
                let (header_len, ext_len) = self.rocketmq_header_len()?;
                let mut out = Vec::with_capacity(header_len);
                self.put_rocketmq_header(&mut out, ext_len);
                out
            }
        };
        if header.len() > HEADER_SIZE_MAX_BYTES {
            return Err(EncodeError::HeaderTooLarge { header_len_bytes: header.len() });
        }
        Ok(header)
    }

    fn encode_json_header(&self) -> Vec<u8> {
        let header = JsonHeaderOut {
            code: self.code,
            ext_fields: if self.ext_fields.is_empty() { None } else { Some(JavaOrderedFields(&self.ext_fields)) },
            flag: self.flag,
            language: self.language_name(),
            opaque: self.opaque,
            remark: self.remark.as_deref(),
            serialize_type_current_rpc: self.serialize_type.name(),
            version: self.version,
        };
        // Serializing a struct of strings, integers and a string map cannot fail.
        serde_json::to_vec(&header).unwrap_or_default()
    }

    fn language_name(&self) -> &'static str {
        match self.language {
            // fastjson writes the enum constant name; an unknown byte has none, so say OTHER.
            LanguageCode::Unknown(_) => LanguageCode::Other.name(),
            known => known.name(),
        }
    }

    /// The ROCKETMQ header's length and its `extFields` part's, once every field is checked to fit
    /// its length word (and the code and version their `i16`s).
    fn rocketmq_header_len(&self) -> Result<(usize, usize), EncodeError> {
        i16::try_from(self.code).map_err(|_| EncodeError::CodeOutOfRange { code: self.code })?;
        i16::try_from(self.version).map_err(|_| EncodeError::VersionOutOfRange { version: self.version })?;
        let remark_len = self.remark.as_deref().map_or(0, str::len);
        len_i32(remark_len)?;
        let mut ext_len = 0usize;
        for (key, value) in &self.ext_fields {
            i16::try_from(key.len()).map_err(|_| EncodeError::ExtKeyTooLong { key_len: key.len() })?;
            len_i32(value.len())?;
            ext_len += 2 + key.len() + 4 + value.len();
        }
        len_i32(ext_len)?;
        // code i16, language u8, version i16, opaque i32, flag i32, remark i32 + bytes, ext i32 + bytes
        Ok((2 + 1 + 2 + 4 + 4 + 4 + remark_len + 4 + ext_len, ext_len))
    }

    /// Writes the ROCKETMQ header, `extFields` in Java `HashMap` order. Every length was checked by
    /// [`Self::rocketmq_header_len`], which also gave `ext_len`, so the casts below cannot truncate.
    fn put_rocketmq_header(&self, out: &mut impl BufMut, ext_len: usize) {
        let language = u8::try_from(self.language.as_i32()).unwrap_or(LanguageCode::Other.as_i32() as u8);
        out.put_i16(self.code as i16);
        out.put_u8(language);
        out.put_i16(self.version as i16);
        out.put_i32(self.opaque);
        out.put_i32(self.flag);
        let remark = self.remark.as_deref().unwrap_or("");
        out.put_i32(remark.len() as i32);
        out.put_slice(remark.as_bytes());
        out.put_i32(ext_len as i32);
        let written: Result<(), std::convert::Infallible> =
            crate::java::hash_map_order_visit(self.ext_fields.keys().map(FieldStr::as_str), |i| {
                if let Some((key, value)) = self.ext_fields.get_index(i) {
                    out.put_i16(key.len() as i16);
                    out.put_slice(key.as_bytes());
                    out.put_i32(value.len() as i32);
                    out.put_slice(value.as_bytes());
                }
                Ok(())
            });
        let Ok(()) = written;
    }

    /// Decodes a frame whose leading length word is present (as it arrives on a socket).
    pub fn decode(buf: &[u8]) -> Result<Self, DecodeError> {
        if buf.len() < 4 {
            return Err(DecodeError::Truncated { what: "frame length", needed: 4, available: buf.len() });
        }
        let total_len = i32::from_be_bytes([buf[0], buf[1], buf[2], buf[3]]);
        let total_len = check_frame_len(total_len)?;
        let rest = &buf[4..];
        if rest.len() != total_len {
            return Err(DecodeError::LengthMismatch { declared: total_len, actual: rest.len() });
        }
        Self::decode_frame(Bytes::copy_from_slice(rest))
    }

    /// Decodes a frame without its length word (as `LengthDelimitedCodec` yields it).
    /// The body shares `frame`'s allocation.
    pub fn decode_frame(frame: Bytes) -> Result<Self, DecodeError> {
        if frame.len() > FRAME_SIZE_MAX_BYTES {
            return Err(DecodeError::FrameTooLarge { frame_len_bytes: frame.len() });
        }
        if frame.len() < 4 {
            return Err(DecodeError::Truncated { what: "header length", needed: 4, available: frame.len() });
        }
        let word = u32::from_be_bytes([frame[0], frame[1], frame[2], frame[3]]);
        let serialize_byte = (word >> 24) as u8;
        let header_len = (word & 0x00FF_FFFF) as usize;
        let serialize_type =
            SerializeType::from_u8(serialize_byte).ok_or(DecodeError::UnknownSerializeType(serialize_byte))?;
        let available = frame.len() - 4;
        if header_len > available {
            return Err(DecodeError::Truncated { what: "header", needed: header_len, available });
        }
        let header = &frame[4..4 + header_len];
        let mut cmd = match serialize_type {
            SerializeType::Json => decode_json_header(header)?,
            SerializeType::RocketMq => decode_rocketmq_header(header)?,
        };
        cmd.serialize_type = serialize_type;
        cmd.body = frame.slice(4 + header_len..);
        Ok(cmd)
    }
}

/// Validates a frame length word read from the wire.
pub fn check_frame_len(total_len: i32) -> Result<usize, DecodeError> {
    if total_len < 4 {
        return Err(DecodeError::BadLength(total_len));
    }
    let len = total_len as usize;
    if len > FRAME_SIZE_MAX_BYTES {
        return Err(DecodeError::FrameTooLarge { frame_len_bytes: len });
    }
    Ok(len)
}

fn len_i32(len: usize) -> Result<i32, EncodeError> {
    i32::try_from(len).map_err(|_| EncodeError::FrameTooLarge { frame_len_bytes: len })
}

/// Why a command could not be encoded.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum EncodeError {
    /// The frame would exceed [`FRAME_SIZE_MAX_BYTES`].
    #[error("the frame would be {frame_len_bytes} bytes, over the {FRAME_SIZE_MAX_BYTES}-byte limit")]
    FrameTooLarge {
        /// The frame length without the length word.
        frame_len_bytes: usize,
    },
    /// The header would not fit the 24-bit header length.
    #[error("the header would be {header_len_bytes} bytes, over the {HEADER_SIZE_MAX_BYTES}-byte limit")]
    HeaderTooLarge {
        /// The header length.
        header_len_bytes: usize,
    },
    /// The ROCKETMQ header carries the code as an `i16`.
    #[error("code {code} does not fit the ROCKETMQ binary header (i16); use JSON")]
    CodeOutOfRange {
        /// The code.
        code: i32,
    },
    /// The ROCKETMQ header carries the version as an `i16`.
    #[error("version {version} does not fit the ROCKETMQ binary header (i16)")]
    VersionOutOfRange {
        /// The version.
        version: i32,
    },
    /// The ROCKETMQ header carries ext keys behind an `i16` length.
    #[error("an extFields key of {key_len} bytes does not fit the ROCKETMQ binary header")]
    ExtKeyTooLong {
        /// The key length.
        key_len: usize,
    },
}

/// Why bytes are not a command. Every variant closes the connection it arrived on: after a bad
/// frame the stream position can no longer be trusted.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum DecodeError {
    /// The length word is negative or shorter than the header-length word.
    #[error("bad frame length {0}")]
    BadLength(i32),
    /// The frame exceeds [`FRAME_SIZE_MAX_BYTES`].
    #[error("frame of {frame_len_bytes} bytes is over the {FRAME_SIZE_MAX_BYTES}-byte limit")]
    FrameTooLarge {
        /// The declared or actual frame length.
        frame_len_bytes: usize,
    },
    /// The length word disagrees with the bytes given.
    #[error("frame declares {declared} bytes but {actual} follow")]
    LengthMismatch {
        /// Declared length.
        declared: usize,
        /// Bytes present.
        actual: usize,
    },
    /// A field runs past the end of its enclosing data.
    #[error("truncated {what}: needs {needed} bytes, {available} available")]
    Truncated {
        /// Which field.
        what: &'static str,
        /// Bytes the field needs.
        needed: usize,
        /// Bytes left.
        available: usize,
    },
    /// The serialize-type byte is neither JSON (0) nor ROCKETMQ (1).
    #[error("unknown serialize type {0}")]
    UnknownSerializeType(u8),
    /// The JSON header does not parse.
    #[error("undecodable JSON header: {0}")]
    Json(String),
    /// More `extFields` entries than any RocketMQ header has.
    #[error("more than {max} extFields in the header")]
    TooManyExtFields {
        /// [`EXT_FIELDS_MAX_COUNT`].
        max: usize,
    },
    /// A string in the ROCKETMQ header is not UTF-8.
    #[error("the {0} in the ROCKETMQ header is not UTF-8")]
    Utf8(&'static str),
    /// A negative length in the ROCKETMQ header.
    #[error("negative {what} length {len} in the ROCKETMQ header")]
    NegativeLength {
        /// Which field.
        what: &'static str,
        /// The length.
        len: i64,
    },
}

/// The JSON header as fastjson writes it: bean fields in alphabetical order, nulls omitted.
#[derive(Serialize)]
struct JsonHeaderOut<'a> {
    code: i32,
    #[serde(rename = "extFields", skip_serializing_if = "Option::is_none")]
    ext_fields: Option<JavaOrderedFields<'a>>,
    flag: i32,
    language: &'static str,
    opaque: i32,
    #[serde(skip_serializing_if = "Option::is_none")]
    remark: Option<&'a str>,
    #[serde(rename = "serializeTypeCurrentRPC")]
    serialize_type_current_rpc: &'static str,
    version: i32,
}

/// `extFields` serialized in the order a Java `HashMap` iterates them, as a Java peer emits them;
/// keys that share a bucket keep insertion order, as in Java.
struct JavaOrderedFields<'a>(&'a ExtFields);

impl Serialize for JavaOrderedFields<'_> {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let mut map = serializer.serialize_map(Some(self.0.len()))?;
        crate::java::hash_map_order_visit(self.0.keys().map(FieldStr::as_str), |i| match self.0.get_index(i) {
            Some((key, value)) => map.serialize_entry(key.as_str(), value.as_str()),
            None => Ok(()),
        })?;
        map.end()
    }
}

/// The JSON header as any RocketMQ implementation may write it: lenient about key order, missing
/// optional keys, language as a name or a number, and ext values that are not strings.
#[derive(Deserialize)]
struct JsonHeaderIn {
    code: i32,
    #[serde(default)]
    language: Option<serde_json::Value>,
    #[serde(default)]
    version: Option<i32>,
    #[serde(default)]
    opaque: Option<i32>,
    #[serde(default)]
    flag: Option<i32>,
    #[serde(default)]
    remark: Option<String>,
    #[serde(default, rename = "extFields")]
    ext_fields: Option<ExtFieldsIn>,
}

/// `extFields` read straight into [`ExtFields`]: on the send path this map is most of the header, and
/// going through `serde_json::Value` first cost a second allocation per key and value.
struct ExtFieldsIn(ExtFields);

impl<'de> Deserialize<'de> for ExtFieldsIn {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Fields;
        impl<'de> serde::de::Visitor<'de> for Fields {
            type Value = ExtFieldsIn;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a map of extFields")
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<ExtFieldsIn, A::Error> {
                let mut fields = ExtFields::with_capacity(
                    map.size_hint().unwrap_or(EXT_FIELDS_PRESIZE_MAX_COUNT / 2).min(EXT_FIELDS_PRESIZE_MAX_COUNT),
                );
                while let Some((key, ExtValue(value))) = map.next_entry::<FieldStr, ExtValue>()? {
                    // A null value is an absent field, as Java's fastjson reads it.
                    if let Some(value) = value {
                        fields.insert(key, value);
                        if fields.len() > EXT_FIELDS_MAX_COUNT {
                            return Err(serde::de::Error::custom(too_many_ext_fields()));
                        }
                    }
                }
                Ok(ExtFieldsIn(fields))
            }
        }
        deserializer.deserialize_map(Fields)
    }
}

/// One `extFields` value as its string form: strings as they are, scalars as JSON writes them,
/// nested values as their JSON text, null as `None`.
struct ExtValue(Option<FieldStr>);

impl<'de> Deserialize<'de> for ExtValue {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Value;
        impl<'de> serde::de::Visitor<'de> for Value {
            type Value = ExtValue;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("an extFields value")
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<ExtValue, E> {
                Ok(ExtValue(Some(FieldStr::from(v))))
            }
            fn visit_string<E: serde::de::Error>(self, v: String) -> Result<ExtValue, E> {
                Ok(ExtValue(Some(FieldStr::from(v))))
            }
            fn visit_bool<E: serde::de::Error>(self, v: bool) -> Result<ExtValue, E> {
                Ok(ExtValue(Some(v.to_compact_string())))
            }
            fn visit_i64<E: serde::de::Error>(self, v: i64) -> Result<ExtValue, E> {
                Ok(ExtValue(Some(v.to_compact_string())))
            }
            fn visit_u64<E: serde::de::Error>(self, v: u64) -> Result<ExtValue, E> {
                Ok(ExtValue(Some(v.to_compact_string())))
            }
            fn visit_f64<E: serde::de::Error>(self, v: f64) -> Result<ExtValue, E> {
                Ok(ExtValue(Some(serde_json::Value::from(v).to_compact_string())))
            }
            fn visit_unit<E: serde::de::Error>(self) -> Result<ExtValue, E> {
                Ok(ExtValue(None))
            }
            fn visit_none<E: serde::de::Error>(self) -> Result<ExtValue, E> {
                Ok(ExtValue(None))
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(self, map: A) -> Result<ExtValue, A::Error> {
                let v = serde_json::Value::deserialize(serde::de::value::MapAccessDeserializer::new(map))?;
                Ok(ExtValue(Some(v.to_compact_string())))
            }
            fn visit_seq<A: serde::de::SeqAccess<'de>>(self, seq: A) -> Result<ExtValue, A::Error> {
                let v = serde_json::Value::deserialize(serde::de::value::SeqAccessDeserializer::new(seq))?;
                Ok(ExtValue(Some(v.to_compact_string())))
            }
        }
        deserializer.deserialize_any(Value)
    }
}

/// The text of [`DecodeError::TooManyExtFields`], for the JSON decoder's error channel.
fn too_many_ext_fields() -> String {
    DecodeError::TooManyExtFields { max: EXT_FIELDS_MAX_COUNT }.to_string()
}

fn decode_json_header(header: &[u8]) -> Result<RemotingCommand, DecodeError> {
    let parsed: JsonHeaderIn = serde_json::from_slice(header).map_err(|e| DecodeError::Json(e.to_string()))?;
    let language = match parsed.language {
        Some(serde_json::Value::String(name)) => LanguageCode::from_name(&name).unwrap_or(LanguageCode::Other),
        Some(serde_json::Value::Number(n)) => {
            LanguageCode::from_i32(n.as_i64().and_then(|n| i32::try_from(n).ok()).unwrap_or(7))
        }
        _ => LanguageCode::Other,
    };
    let ext_fields = parsed.ext_fields.map(|f| f.0).unwrap_or_default();
    Ok(RemotingCommand {
        code: parsed.code,
        language,
        version: parsed.version.unwrap_or(0),
        opaque: parsed.opaque.unwrap_or(0),
        flag: parsed.flag.unwrap_or(0),
        remark: parsed.remark,
        ext_fields,
        serialize_type: SerializeType::Json,
        body: Bytes::new(),
    })
}

fn decode_rocketmq_header(mut header: &[u8]) -> Result<RemotingCommand, DecodeError> {
    need(header, 13, "ROCKETMQ header")?;
    let code = header.get_i16() as i32;
    let language = LanguageCode::from_i32(header.get_u8() as i32);
    let version = header.get_i16() as i32;
    let opaque = header.get_i32();
    let flag = header.get_i32();
    need(header, 4, "remark length")?;
    let remark_len = header.get_i32();
    let remark_len = non_negative(remark_len as i64, "remark")?;
    need(header, remark_len, "remark")?;
    let remark = if remark_len == 0 { None } else { Some(utf8(&header[..remark_len], "remark")?.to_owned()) };
    header.advance(remark_len);
    need(header, 4, "extFields length")?;
    let ext_len = non_negative(header.get_i32() as i64, "extFields")?;
    need(header, ext_len, "extFields")?;
    let mut ext = &header[..ext_len];
    // A field takes at least 6 bytes (two length words): sized once, the vector never regrows for
    // a send header, and a hostile length cannot make it reserve more than the header's size allows.
    let mut ext_fields = ExtFields::with_capacity((ext_len / 6).min(EXT_FIELDS_PRESIZE_MAX_COUNT));
    while ext.has_remaining() {
        need(ext, 2, "ext key length")?;
        let key_len = non_negative(ext.get_i16() as i64, "ext key")?;
        need(ext, key_len, "ext key")?;
        let key = utf8(&ext[..key_len], "ext key")?;
        ext.advance(key_len);
        need(ext, 4, "ext value length")?;
        let value_len = non_negative(ext.get_i32() as i64, "ext value")?;
        need(ext, value_len, "ext value")?;
        let value = utf8(&ext[..value_len], "ext value")?;
        ext.advance(value_len);
        ext_fields.insert(FieldStr::from(key), FieldStr::from(value));
        if ext_fields.len() > EXT_FIELDS_MAX_COUNT {
            return Err(DecodeError::TooManyExtFields { max: EXT_FIELDS_MAX_COUNT });
        }
    }
    Ok(RemotingCommand {
        code,
        language,
        version,
        opaque,
        flag,
        remark,
        ext_fields,
        serialize_type: SerializeType::RocketMq,
        body: Bytes::new(),
    })
}

fn need(buf: &[u8], needed: usize, what: &'static str) -> Result<(), DecodeError> {
    if buf.len() < needed {
        return Err(DecodeError::Truncated { what, needed, available: buf.len() });
    }
    Ok(())
}

fn non_negative(len: i64, what: &'static str) -> Result<usize, DecodeError> {
    usize::try_from(len).map_err(|_| DecodeError::NegativeLength { what, len })
}

fn utf8<'a>(bytes: &'a [u8], what: &'static str) -> Result<&'a str, DecodeError> {
    std::str::from_utf8(bytes).map_err(|_| DecodeError::Utf8(what))
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    fn sample(serialize_type: SerializeType) -> RemotingCommand {
        let mut cmd = RemotingCommand::request(RequestCode::PullMessage);
        cmd.opaque = 42;
        cmd.serialize_type = serialize_type;
        cmd.ext_fields.insert("topic".into(), "TopicTest".into());
        cmd.ext_fields.insert("queueId".into(), "3".into());
        cmd.remark = Some("héllo".into());
        cmd.body = Bytes::from_static(b"body bytes");
        cmd
    }

    #[test]
    fn json_round_trip() {
        let cmd = sample(SerializeType::Json);
        let bytes = cmd.encode().unwrap();
        assert_eq!(RemotingCommand::decode(&bytes).unwrap(), cmd);
    }

    #[test]
    fn rocketmq_round_trip() {
        let cmd = sample(SerializeType::RocketMq);
        let bytes = cmd.encode().unwrap();
        assert_eq!(bytes[4], 1, "serialize type byte");
        assert_eq!(RemotingCommand::decode(&bytes).unwrap(), cmd);
    }

    #[test]
    fn json_header_keys_are_alphabetical_like_fastjson() {
        let mut cmd = RemotingCommand::success();
        cmd.opaque = 7;
        let header = String::from_utf8(cmd.encode_header().unwrap()).unwrap();
        assert_eq!(
            header,
            r#"{"code":0,"flag":1,"language":"RUST","opaque":7,"serializeTypeCurrentRPC":"JSON","version":409}"#
        );
    }

    #[test]
    fn json_decoder_is_lenient_about_shapes_java_may_send() {
        let header = br#"{"opaque":5,"language":9,"code":11,"extFields":{"queueId":3,"commit":true,"x":null}}"#;
        let mut frame = BytesMut::new();
        frame.put_u32(header.len() as u32);
        frame.put_slice(header);
        let cmd = RemotingCommand::decode_frame(frame.freeze()).unwrap();
        assert_eq!(cmd.request_code(), RequestCode::PullMessage);
        assert_eq!(cmd.language, LanguageCode::Go);
        assert_eq!(cmd.ext_fields.get("queueId").map(FieldStr::as_str), Some("3"));
        assert_eq!(cmd.ext_fields.get("commit").map(FieldStr::as_str), Some("true"));
        assert!(!cmd.ext_fields.contains_key("x"));

        let header = br#"{"code":10,"extFields":{"a":"q\"\u00e9","f":1.5,"n":-7,"m":{"k":[1,"v"]},"s":[]}}"#;
        let mut frame = BytesMut::new();
        frame.put_u32(header.len() as u32);
        frame.put_slice(header);
        let cmd = RemotingCommand::decode_frame(frame.freeze()).unwrap();
        let field = |k: &str| cmd.ext_fields.get(k).map(FieldStr::as_str);
        assert_eq!(field("a"), Some("q\"\u{e9}"));
        assert_eq!(field("f"), Some("1.5"));
        assert_eq!(field("n"), Some("-7"));
        assert_eq!(field("m"), Some(r#"{"k":[1,"v"]}"#));
        assert_eq!(field("s"), Some("[]"));
        assert_eq!(cmd.ext_fields.keys().collect::<Vec<_>>(), ["a", "f", "n", "m", "s"], "order kept");
    }

    #[test]
    fn response_answers_in_the_request_serialize_type() {
        let req = sample(SerializeType::RocketMq);
        let resp = RemotingCommand::success().answering(&req);
        assert_eq!(resp.opaque, 42);
        assert!(resp.is_response());
        assert_eq!(resp.serialize_type, SerializeType::RocketMq);
    }

    #[test]
    fn oversized_frames_are_refused_both_ways() {
        let cmd = RemotingCommand::request(RequestCode::SendMessage).with_body(vec![0u8; FRAME_SIZE_MAX_BYTES]);
        assert!(matches!(cmd.encode(), Err(EncodeError::FrameTooLarge { .. })));
        assert!(matches!(check_frame_len(i32::MAX), Err(DecodeError::FrameTooLarge { .. })));
        assert!(matches!(check_frame_len(-1), Err(DecodeError::BadLength(-1))));
    }

    #[test]
    fn headers_with_more_fields_than_any_rocketmq_header_are_refused() {
        for serialize_type in [SerializeType::RocketMq, SerializeType::Json] {
            let with = |count: usize| {
                let mut cmd = RemotingCommand::request(RequestCode::SendMessage);
                cmd.serialize_type = serialize_type;
                for i in 0..count {
                    cmd.ext_fields.insert(format!("k{i}").into(), "v".into());
                }
                cmd.encode().unwrap()
            };
            let at_max = RemotingCommand::decode(&with(EXT_FIELDS_MAX_COUNT)).unwrap();
            assert_eq!(at_max.ext_fields.len(), EXT_FIELDS_MAX_COUNT);
            let over = RemotingCommand::decode(&with(EXT_FIELDS_MAX_COUNT + 1)).unwrap_err();
            assert!(over.to_string().contains("more than 256 extFields"), "{serialize_type:?}: {over}");
        }
    }

    #[test]
    fn wide_codes_do_not_fit_the_binary_header() {
        let mut cmd = RemotingCommand::request(RequestCode::RaftAppendEntries);
        cmd.serialize_type = SerializeType::RocketMq;
        cmd.code = 200_050;
        assert!(matches!(cmd.encode(), Err(EncodeError::CodeOutOfRange { .. })));
    }

    fn arb_command() -> impl Strategy<Value = RemotingCommand> {
        (
            any::<i16>(),
            0u8..13,
            any::<i16>(),
            any::<i32>(),
            any::<i32>(),
            proptest::option::of(".{1,40}"),
            // Past `ORDER_ON_STACK_MAX_COUNT` (32) fields the encoder orders them on the heap.
            proptest::collection::vec(("[a-zA-Z]{1,12}", ".{0,40}"), 0..48),
            any::<bool>(),
            proptest::collection::vec(any::<u8>(), 0..256),
        )
            .prop_map(|(code, lang, version, opaque, flag, remark, ext, binary, body)| RemotingCommand {
                code: code as i32,
                language: LanguageCode::from_i32(lang as i32),
                version: version as i32,
                opaque,
                flag,
                remark,
                ext_fields: ext.into_iter().map(|(k, v)| (k.into(), v.into())).collect(),
                serialize_type: if binary { SerializeType::RocketMq } else { SerializeType::Json },
                body: Bytes::from(body),
            })
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(10_000))]

        #[test]
        fn every_command_round_trips(cmd in arb_command()) {
            let bytes = cmd.encode().unwrap();
            prop_assert_eq!(RemotingCommand::decode(&bytes).unwrap(), cmd);
        }

        #[test]
        fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..512)) {
            let _ = RemotingCommand::decode(&bytes);
            let _ = RemotingCommand::decode_frame(Bytes::from(bytes));
        }

        #[test]
        fn truncated_frames_are_errors(cmd in arb_command(), cut in any::<prop::sample::Index>()) {
            let bytes = cmd.encode().unwrap();
            let cut = cut.index(bytes.len());
            prop_assert!(RemotingCommand::decode(&bytes[..cut]).is_err());
        }

        #[test]
        fn corrupted_headers_never_panic(cmd in arb_command(), pos in any::<prop::sample::Index>(), byte in any::<u8>()) {
            let mut bytes = cmd.encode().unwrap().to_vec();
            let pos = pos.index(bytes.len());
            bytes[pos] = byte;
            let _ = RemotingCommand::decode(&bytes);
        }
    }
}
