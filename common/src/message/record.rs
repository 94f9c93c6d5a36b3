//! The CommitLog message record in RocketMQ's byte layout (docs/store-format.md#commitlog-record): what the
//! store writes, replicas copy byte for byte, and PULL responses carry concatenated.
//!
//! ```text
//!  0 TOTALSIZE i32 | 4 MAGICCODE i32 | 8 BODYCRC i32 | 12 QUEUEID i32 | 16 FLAG i32
//! 20 QUEUEOFFSET i64 | 28 PHYSICALOFFSET i64 | 36 SYSFLAG i32 | 40 BORNTIMESTAMP i64
//! 48 BORNHOST (4|16 ip + i32 port) | STORETIMESTAMP i64 | STOREHOST (4|16 ip + i32 port)
//!    RECONSUMETIMES i32 | PREPARED_TX_OFFSET i64 | BODYLEN i32 | BODY
//!    TOPICLEN (v1: i8 | v2: i16) | TOPIC | PROPLEN i16 | PROPERTIES
//! ```
//! All integers big-endian. Written as v1 (magic `0xDAA320A7`, 1-byte topic length — the only version
//! a 4.x client decodes) whenever the topic fits 127 bytes, else v2 (`0xDAA320AB`, 2-byte length).
//!
//! Invariants:
//! - The encoder computes TOTALSIZE and BODYCRC (`crc32 IEEE & 0x7FFFFFFF` of the body as stored) and
//!   sets SYSFLAG's host-v6 bits from the address families, so a record is self-consistent.
//! - The decoder trusts no length: TOTALSIZE must lie within the input, every field must lie within
//!   TOTALSIZE, and the fields must add up to exactly TOTALSIZE (`CommitLog.checkMessageAndReturnSize`).
//!   Any violation is a [`RecordError`]; nothing panics and nothing allocates beyond the input's size.
//! - QUEUEOFFSET (byte 20) and PHYSICALOFFSET (byte 28) are outside the CRC and can be patched after
//!   encoding, as the log store does on every replica.

use std::net::IpAddr;
use std::net::Ipv4Addr;
use std::net::Ipv6Addr;
use std::net::SocketAddr;

use bytes::BufMut;
use bytes::Bytes;
use bytes::BytesMut;
use thiserror::Error;

use super::model::Message;
use super::model::MessageExt;
use super::properties::Properties;
use super::sys_flag;
use crate::limits::PROPERTIES_SIZE_MAX_BYTES;

/// MAGICCODE of a v1 record (`MessageDecoder.MESSAGE_MAGIC_CODE`, `0xDAA320A7`).
pub const MESSAGE_MAGIC_CODE_V1: i32 = 0xDAA3_20A7_u32 as i32;
/// MAGICCODE of a v2 record (5.x `MESSAGE_MAGIC_CODE_V2`, `0xDAA320AB`): 2-byte topic length.
pub const MESSAGE_MAGIC_CODE_V2: i32 = 0xDAA3_20AB_u32 as i32;
/// MAGICCODE of the filler at the end of a CommitLog file (`CommitLog.BLANK_MAGIC_CODE`, `0xCBD43194`).
pub const BLANK_MAGIC_CODE: i32 = 0xCBD4_3194_u32 as i32;
/// A file-end filler is at least TOTALSIZE + MAGICCODE (`END_FILE_MIN_BLANK_LENGTH`).
pub const END_FILE_MIN_BLANK_LENGTH: usize = 8;

/// Byte position of TOTALSIZE.
pub const TOTAL_SIZE_POSITION: usize = 0;
/// Byte position of MAGICCODE (`MESSAGE_MAGIC_CODE_POSTION`).
pub const MAGIC_CODE_POSITION: usize = 4;
/// Byte position of BODYCRC.
pub const BODY_CRC_POSITION: usize = 8;
/// Byte position of QUEUEID.
pub const QUEUE_ID_POSITION: usize = 12;
/// Byte position of FLAG (`MESSAGE_FLAG_POSTION`).
pub const FLAG_POSITION: usize = 16;
/// Byte position of QUEUEOFFSET (`QUEUE_OFFSET_POSITION`).
pub const QUEUE_OFFSET_POSITION: usize = 20;
/// Byte position of PHYSICALOFFSET (`PHY_POS_POSITION`).
pub const PHYSICAL_OFFSET_POSITION: usize = 28;
/// Byte position of SYSFLAG (`SYSFLAG_POSITION`).
pub const SYS_FLAG_POSITION: usize = 36;
/// Byte position of BORNTIMESTAMP.
pub const BORN_TIMESTAMP_POSITION: usize = 40;
/// Byte position of BORNHOST; every later field moves with the host address lengths.
pub const BORN_HOST_POSITION: usize = 48;

/// Longest topic (bytes) a v1 record holds: its length byte is a Java `byte`.
pub const V1_TOPIC_LENGTH_MAX_BYTES: usize = i8::MAX as usize;
/// Longest topic (bytes) a v2 record holds: its length is a Java `short`.
pub const V2_TOPIC_LENGTH_MAX_BYTES: usize = i16::MAX as usize;

/// Smallest possible record: IPv4 hosts, v1, empty body, topic and properties.
pub const RECORD_SIZE_MIN_BYTES: usize = 91;

/// Record format version, chosen by topic length.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum MessageVersion {
    /// 1-byte topic length; what 4.x writes and reads.
    V1,
    /// 2-byte topic length (5.x, topics over 127 bytes).
    V2,
}

impl MessageVersion {
    /// The version a topic of `topic_len` bytes is written with.
    pub fn for_topic_len(topic_len: usize) -> Self {
        if topic_len <= V1_TOPIC_LENGTH_MAX_BYTES { MessageVersion::V1 } else { MessageVersion::V2 }
    }

    /// Its MAGICCODE.
    pub fn magic_code(self) -> i32 {
        match self {
            MessageVersion::V1 => MESSAGE_MAGIC_CODE_V1,
            MessageVersion::V2 => MESSAGE_MAGIC_CODE_V2,
        }
    }

    /// Bytes of its TOPICLEN field.
    pub fn topic_len_size(self) -> usize {
        match self {
            MessageVersion::V1 => 1,
            MessageVersion::V2 => 2,
        }
    }

    /// The version of a message MAGICCODE.
    pub fn from_magic_code(magic: i32) -> Option<Self> {
        match magic {
            MESSAGE_MAGIC_CODE_V1 => Some(MessageVersion::V1),
            MESSAGE_MAGIC_CODE_V2 => Some(MessageVersion::V2),
            _ => None,
        }
    }
}

/// Why a record could not be encoded.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum RecordEncodeError {
    /// Topic longer than a v2 record holds.
    #[error("the topic is {len} bytes, more than a record holds ({V2_TOPIC_LENGTH_MAX_BYTES})")]
    TopicTooLong {
        /// Topic length in bytes.
        len: usize,
    },
    /// Properties longer than `PROPLEN` (i16) holds.
    #[error("the message properties are {len} bytes, more than a record holds ({PROPERTIES_SIZE_MAX_BYTES})")]
    PropertiesTooLong {
        /// Properties length in bytes.
        len: usize,
    },
    /// The whole record would not fit TOTALSIZE (i32).
    #[error("the record would be {len} bytes, more than TOTALSIZE holds")]
    RecordTooLong {
        /// Record length in bytes.
        len: usize,
    },
}

/// Why bytes are not a valid record.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum RecordError {
    /// The input ends inside a field or before TOTALSIZE bytes.
    #[error("record truncated: {field} needs {needed} bytes at byte {at}, only {available} available")]
    Truncated {
        /// The field being read.
        field: &'static str,
        /// Its offset in the record.
        at: usize,
        /// Bytes it needs.
        needed: usize,
        /// Bytes left.
        available: usize,
    },
    /// The file-end filler, not a message.
    #[error("blank (end of file) record of {total_size} bytes")]
    Blank {
        /// Its TOTALSIZE.
        total_size: i32,
    },
    /// Neither a message nor a blank magic code.
    #[error("illegal magic code {0:#010x}")]
    BadMagic(u32),
    /// TOTALSIZE below the smallest record.
    #[error("illegal TOTALSIZE {0}")]
    BadTotalSize(i32),
    /// A negative BODYLEN, TOPICLEN or PROPLEN, or a v1 TOPICLEN over 127.
    #[error("illegal {field} {value}")]
    BadLength {
        /// The length field.
        field: &'static str,
        /// Its value.
        value: i32,
    },
    /// The fields do not add up to TOTALSIZE.
    #[error("TOTALSIZE is {total_size} but the fields add up to {computed}")]
    SizeMismatch {
        /// TOTALSIZE as stored.
        total_size: i32,
        /// Length implied by the fields.
        computed: usize,
    },
    /// A host port outside 0..=65535.
    #[error("illegal {field} port {port}")]
    BadPort {
        /// BORNHOST or STOREHOST.
        field: &'static str,
        /// The stored `i32`.
        port: i32,
    },
    /// TOPIC or PROPERTIES is not UTF-8.
    #[error("{field} is not valid UTF-8")]
    NotUtf8 {
        /// The field.
        field: &'static str,
    },
    /// BODYCRC does not match the body.
    #[error("body CRC mismatch: stored {stored:#010x}, computed {computed:#010x}")]
    BodyCrc {
        /// BODYCRC as stored.
        stored: u32,
        /// CRC of the body read.
        computed: u32,
    },
    /// A record inside a concatenation failed.
    #[error("record {index} at byte {offset}: {source}")]
    AtOffset {
        /// Index of the record in the concatenation.
        index: usize,
        /// Its start offset.
        offset: usize,
        /// What was wrong with it.
        source: Box<RecordError>,
    },
}

/// Decoder switches.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct DecodeOptions {
    /// Recompute the body CRC and fail on mismatch (store recovery does; the client does not).
    pub verify_body_crc: bool,
}

impl DecodeOptions {
    /// Options that verify the body CRC.
    pub fn verify_crc() -> Self {
        DecodeOptions { verify_body_crc: true }
    }
}

/// BODYCRC of a stored body: CRC-32 (IEEE, `java.util.zip.CRC32`) masked to 31 bits (`UtilAll.crc32`).
pub fn body_crc(body: &[u8]) -> u32 {
    crc32fast::hash(body) & 0x7FFF_FFFF
}

/// Record length for these field sizes (`CommitLog.calMsgLength`, plus the v2 topic length byte).
pub fn record_len(sys_flag: i32, body_len: usize, topic_len: usize, properties_len: usize) -> usize {
    let born_host = if sys_flag::is_born_host_v6(sys_flag) { 20 } else { 8 };
    let store_host = if sys_flag::is_store_host_v6(sys_flag) { 20 } else { 8 };
    let topic_len_size = MessageVersion::for_topic_len(topic_len).topic_len_size();
    let fixed: usize = 4 + 4 + 4 + 4 + 4 + 8 + 8 + 4 + 8 + 8 + 4 + 8 + 4 + 2 + born_host + store_host;
    fixed
        .saturating_add(body_len)
        .saturating_add(topic_len_size)
        .saturating_add(topic_len)
        .saturating_add(properties_len)
}

/// `sys_flag` with its host-v6 bits matching the two addresses.
pub fn sys_flag_for_hosts(sys_flag: i32, born_host: &SocketAddr, store_host: &SocketAddr) -> i32 {
    let flag = sys_flag::with_born_host_v6(sys_flag, born_host.is_ipv6());
    sys_flag::with_store_host_v6(flag, store_host.is_ipv6())
}

fn put_host(out: &mut BytesMut, host: &SocketAddr) {
    match host.ip() {
        IpAddr::V4(ip) => out.put_slice(&ip.octets()),
        IpAddr::V6(ip) => out.put_slice(&ip.octets()),
    }
    out.put_i32(i32::from(host.port()));
}

/// Encodes `msg` as one record (see the module docs for what is computed rather than copied).
pub fn encode_record(msg: &MessageExt) -> Result<BytesMut, RecordEncodeError> {
    let mut out = BytesMut::new();
    encode_record_into(msg, &mut out)?;
    Ok(out)
}

/// Appends `msg` as one record to `out`; returns the record length. `out` is untouched on error.
pub fn encode_record_into(msg: &MessageExt, out: &mut BytesMut) -> Result<usize, RecordEncodeError> {
    let topic = msg.message.topic.as_bytes();
    if topic.len() > V2_TOPIC_LENGTH_MAX_BYTES {
        return Err(RecordEncodeError::TopicTooLong { len: topic.len() });
    }
    let properties = &msg.message.properties;
    let properties_len = properties.wire_len();
    if properties_len > PROPERTIES_SIZE_MAX_BYTES {
        return Err(RecordEncodeError::PropertiesTooLong { len: properties_len });
    }
    let body = &msg.message.body;
    let sys_flag = sys_flag_for_hosts(msg.sys_flag, &msg.born_host, &msg.store_host);
    let len = record_len(sys_flag, body.len(), topic.len(), properties_len);
    let total_size = i32::try_from(len).map_err(|_| RecordEncodeError::RecordTooLong { len })?;
    // Fits i32, so every part does too.
    let body_len = body.len() as i32;
    let version = MessageVersion::for_topic_len(topic.len());

    out.reserve(len);
    let start = out.len();
    out.put_i32(total_size);
    out.put_i32(version.magic_code());
    out.put_u32(body_crc(body));
    out.put_i32(msg.queue_id);
    out.put_i32(msg.message.flag);
    out.put_i64(msg.queue_offset);
    out.put_i64(msg.commit_log_offset);
    out.put_i32(sys_flag);
    out.put_i64(msg.born_timestamp);
    put_host(out, &msg.born_host);
    out.put_i64(msg.store_timestamp);
    put_host(out, &msg.store_host);
    out.put_i32(msg.reconsume_times);
    out.put_i64(msg.prepared_transaction_offset);
    out.put_i32(body_len);
    out.put_slice(body);
    match version {
        MessageVersion::V1 => out.put_u8(topic.len() as u8),
        MessageVersion::V2 => out.put_u16(topic.len() as u16),
    }
    out.put_slice(topic);
    out.put_i16(properties_len as i16);
    properties.write_wire(out);
    debug_assert_eq!(out.len() - start, len, "record_len and the encoder disagree");
    Ok(len)
}

/// The 8-byte header of a file-end filler covering `remaining` bytes (TOTALSIZE + blank magic).
pub fn blank_record_header(remaining: i32) -> [u8; END_FILE_MIN_BLANK_LENGTH] {
    let mut header = [0u8; END_FILE_MIN_BLANK_LENGTH];
    header[..4].copy_from_slice(&remaining.to_be_bytes());
    header[4..].copy_from_slice(&BLANK_MAGIC_CODE.to_be_bytes());
    header
}

/// What starts at a position of the CommitLog.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RecordKind {
    /// A message record of `total_size` bytes.
    Message {
        /// Its version.
        version: MessageVersion,
        /// TOTALSIZE (≥ [`RECORD_SIZE_MIN_BYTES`]; not yet checked against the input length).
        total_size: usize,
    },
    /// The file-end filler; the next record starts in the next file.
    Blank {
        /// TOTALSIZE as stored.
        total_size: i32,
    },
}

/// Reads TOTALSIZE and MAGICCODE only.
pub fn peek_record(buf: &[u8]) -> Result<RecordKind, RecordError> {
    let mut r = Reader::new(buf);
    let total_size = r.i32("TOTALSIZE")?;
    let magic = r.i32("MAGICCODE")?;
    if magic == BLANK_MAGIC_CODE {
        return Ok(RecordKind::Blank { total_size });
    }
    let version = MessageVersion::from_magic_code(magic).ok_or(RecordError::BadMagic(magic as u32))?;
    match usize::try_from(total_size) {
        Ok(size) if size >= RECORD_SIZE_MIN_BYTES => Ok(RecordKind::Message { version, total_size: size }),
        _ => Err(RecordError::BadTotalSize(total_size)),
    }
}

fn read_i64_at(record: &[u8], at: usize, field: &'static str) -> Result<i64, RecordError> {
    let mut r = Reader { buf: record, pos: at };
    r.i64(field)
}

fn patch_i64_at(record: &mut [u8], at: usize, value: i64, field: &'static str) -> Result<(), RecordError> {
    let available = record.len().saturating_sub(at);
    match record.get_mut(at..at + 8) {
        Some(slot) => {
            slot.copy_from_slice(&value.to_be_bytes());
            Ok(())
        }
        None => Err(RecordError::Truncated { field, at, needed: 8, available }),
    }
}

/// Overwrites PHYSICALOFFSET (byte 28) of the record starting at `record[0]`.
pub fn patch_physical_offset(record: &mut [u8], offset: i64) -> Result<(), RecordError> {
    patch_i64_at(record, PHYSICAL_OFFSET_POSITION, offset, "PHYSICALOFFSET")
}

/// Overwrites RECONSUMETIMES of the record starting at `record[0]` (after SYSFLAG at byte 36, the
/// born timestamp and host and the store timestamp and host, whose widths SYSFLAG gives).
pub fn patch_reconsume_times(record: &mut [u8], times: i32) -> Result<(), RecordError> {
    let sys_flag_bytes: [u8; 4] = record.get(36..40).and_then(|b| b.try_into().ok()).ok_or(RecordError::Truncated {
        field: "SYSFLAG",
        at: 36,
        needed: 4,
        available: record.len().saturating_sub(36),
    })?;
    let sys_flag = i32::from_be_bytes(sys_flag_bytes);
    let host_len = |v6: bool| if v6 { 20 } else { 8 };
    let at = 40
        + 8
        + host_len(super::sys_flag::is_born_host_v6(sys_flag))
        + 8
        + host_len(super::sys_flag::is_store_host_v6(sys_flag));
    let available = record.len().saturating_sub(at);
    match record.get_mut(at..at + 4) {
        Some(slot) => {
            slot.copy_from_slice(&times.to_be_bytes());
            Ok(())
        }
        None => Err(RecordError::Truncated { field: "RECONSUMETIMES", at, needed: 4, available }),
    }
}

/// QUEUEOFFSET (byte 20) of the message record starting at `record[0]`.
pub fn peek_queue_offset(record: &[u8]) -> Result<i64, RecordError> {
    match peek_record(record)? {
        RecordKind::Message { .. } => {}
        RecordKind::Blank { total_size } => return Err(RecordError::Blank { total_size }),
    }
    let at = QUEUE_OFFSET_POSITION;
    record.get(at..at + 8).and_then(|b| <[u8; 8]>::try_from(b).ok()).map(i64::from_be_bytes).ok_or(
        RecordError::Truncated { field: "QUEUEOFFSET", at, needed: 8, available: record.len().saturating_sub(at) },
    )
}

/// Overwrites QUEUEOFFSET (byte 20) of the record starting at `record[0]`.
pub fn patch_queue_offset(record: &mut [u8], offset: i64) -> Result<(), RecordError> {
    patch_i64_at(record, QUEUE_OFFSET_POSITION, offset, "QUEUEOFFSET")
}

/// Reads PHYSICALOFFSET (byte 28).
pub fn read_physical_offset(record: &[u8]) -> Result<i64, RecordError> {
    read_i64_at(record, PHYSICAL_OFFSET_POSITION, "PHYSICALOFFSET")
}

/// Reads QUEUEOFFSET (byte 20).
pub fn read_queue_offset(record: &[u8]) -> Result<i64, RecordError> {
    read_i64_at(record, QUEUE_OFFSET_POSITION, "QUEUEOFFSET")
}

/// A parsed record borrowing from the input: every field, no copies.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RecordView<'a> {
    /// TOTALSIZE, equal to the bytes the record spans.
    pub total_size: usize,
    /// From MAGICCODE.
    pub version: MessageVersion,
    /// BODYCRC as stored.
    pub body_crc: u32,
    /// QUEUEID.
    pub queue_id: i32,
    /// FLAG.
    pub flag: i32,
    /// QUEUEOFFSET.
    pub queue_offset: i64,
    /// PHYSICALOFFSET.
    pub commit_log_offset: i64,
    /// SYSFLAG.
    pub sys_flag: i32,
    /// BORNTIMESTAMP.
    pub born_timestamp: i64,
    /// BORNHOST.
    pub born_host: SocketAddr,
    /// STORETIMESTAMP.
    pub store_timestamp: i64,
    /// STOREHOST.
    pub store_host: SocketAddr,
    /// RECONSUMETIMES.
    pub reconsume_times: i32,
    /// PREPARED_TX_OFFSET.
    pub prepared_transaction_offset: i64,
    /// BODY as stored.
    pub body: &'a [u8],
    /// TOPIC.
    pub topic: &'a str,
    /// PROPERTIES in wire form; parse with [`Properties::from_wire_str`].
    pub properties: &'a str,
}

impl RecordView<'_> {
    /// Parsed properties.
    pub fn parse_properties(&self) -> Properties {
        Properties::from_wire_str(self.properties)
    }

    /// An owned [`MessageExt`] with the body copied into `body`.
    fn to_message_ext_with(self, body: Bytes) -> MessageExt {
        MessageExt {
            message: Message { topic: self.topic.into(), flag: self.flag, properties: self.parse_properties(), body },
            queue_id: self.queue_id,
            // total_size ≤ input length and was read from an i32, so it fits.
            store_size: self.total_size as i32,
            queue_offset: self.queue_offset,
            commit_log_offset: self.commit_log_offset,
            sys_flag: self.sys_flag,
            born_timestamp: self.born_timestamp,
            born_host: self.born_host,
            store_timestamp: self.store_timestamp,
            store_host: self.store_host,
            body_crc: self.body_crc,
            reconsume_times: self.reconsume_times,
            prepared_transaction_offset: self.prepared_transaction_offset,
        }
    }

    /// An owned [`MessageExt`] (body copied).
    pub fn to_message_ext(&self) -> MessageExt {
        self.to_message_ext_with(Bytes::copy_from_slice(self.body))
    }
}

/// Bounds-checked big-endian reads; every failure names the field.
struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    fn new(buf: &'a [u8]) -> Self {
        Reader { buf, pos: 0 }
    }

    fn take(&mut self, n: usize, field: &'static str) -> Result<&'a [u8], RecordError> {
        let available = self.buf.len().saturating_sub(self.pos);
        let end = self.pos.checked_add(n);
        match end.and_then(|end| self.buf.get(self.pos..end)) {
            Some(bytes) => {
                self.pos += n;
                Ok(bytes)
            }
            None => Err(RecordError::Truncated { field, at: self.pos, needed: n, available }),
        }
    }

    fn array<const N: usize>(&mut self, field: &'static str) -> Result<[u8; N], RecordError> {
        let bytes = self.take(N, field)?;
        let mut out = [0u8; N];
        out.copy_from_slice(bytes);
        Ok(out)
    }

    fn u8(&mut self, field: &'static str) -> Result<u8, RecordError> {
        Ok(self.array::<1>(field)?[0])
    }

    fn i16(&mut self, field: &'static str) -> Result<i16, RecordError> {
        Ok(i16::from_be_bytes(self.array(field)?))
    }

    fn i32(&mut self, field: &'static str) -> Result<i32, RecordError> {
        Ok(i32::from_be_bytes(self.array(field)?))
    }

    fn i64(&mut self, field: &'static str) -> Result<i64, RecordError> {
        Ok(i64::from_be_bytes(self.array(field)?))
    }

    fn host(&mut self, v6: bool, field: &'static str) -> Result<SocketAddr, RecordError> {
        let ip = if v6 {
            IpAddr::V6(Ipv6Addr::from(self.array::<16>(field)?))
        } else {
            IpAddr::V4(Ipv4Addr::from(self.array::<4>(field)?))
        };
        let port = self.i32(field)?;
        let port = u16::try_from(port).map_err(|_| RecordError::BadPort { field, port })?;
        Ok(SocketAddr::new(ip, port))
    }

    fn len_field(&mut self, value: i32, field: &'static str) -> Result<usize, RecordError> {
        usize::try_from(value).map_err(|_| RecordError::BadLength { field, value })
    }
}

/// Parses the record at the start of `buf` without copying; returns it and its length.
pub fn parse_record(buf: &[u8], options: DecodeOptions) -> Result<RecordView<'_>, RecordError> {
    let (version, total_size) = match peek_record(buf)? {
        RecordKind::Message { version, total_size } => (version, total_size),
        RecordKind::Blank { total_size } => return Err(RecordError::Blank { total_size }),
    };
    // From here on, reads are confined to the record's own TOTALSIZE bytes.
    let record = buf.get(..total_size).ok_or(RecordError::Truncated {
        field: "record",
        at: 0,
        needed: total_size,
        available: buf.len(),
    })?;
    let mut r = Reader { buf: record, pos: BODY_CRC_POSITION };
    let stored_crc = r.i32("BODYCRC")? as u32;
    let queue_id = r.i32("QUEUEID")?;
    let flag = r.i32("FLAG")?;
    let queue_offset = r.i64("QUEUEOFFSET")?;
    let commit_log_offset = r.i64("PHYSICALOFFSET")?;
    let sys_flag = r.i32("SYSFLAG")?;
    let born_timestamp = r.i64("BORNTIMESTAMP")?;
    let born_host = r.host(sys_flag::is_born_host_v6(sys_flag), "BORNHOST")?;
    let store_timestamp = r.i64("STORETIMESTAMP")?;
    let store_host = r.host(sys_flag::is_store_host_v6(sys_flag), "STOREHOST")?;
    let reconsume_times = r.i32("RECONSUMETIMES")?;
    let prepared_transaction_offset = r.i64("PREPARED_TX_OFFSET")?;
    let body_len = r.i32("BODYLEN")?;
    let body_len = r.len_field(body_len, "BODYLEN")?;
    let body = r.take(body_len, "BODY")?;
    let topic_len = match version {
        // Java reads a signed byte: 128..=255 would be a negative length there.
        MessageVersion::V1 => i32::from(r.u8("TOPICLEN")? as i8),
        MessageVersion::V2 => i32::from(r.i16("TOPICLEN")?),
    };
    let topic_len = r.len_field(topic_len, "TOPICLEN")?;
    let topic = r.take(topic_len, "TOPIC")?;
    let properties_len = r.i16("PROPLEN")?;
    let properties_len = r.len_field(i32::from(properties_len), "PROPLEN")?;
    let properties = r.take(properties_len, "PROPERTIES")?;
    if r.pos != total_size {
        return Err(RecordError::SizeMismatch { total_size: total_size as i32, computed: r.pos });
    }
    let topic = std::str::from_utf8(topic).map_err(|_| RecordError::NotUtf8 { field: "TOPIC" })?;
    let properties = std::str::from_utf8(properties).map_err(|_| RecordError::NotUtf8 { field: "PROPERTIES" })?;
    if options.verify_body_crc {
        let computed = body_crc(body);
        if computed != stored_crc {
            return Err(RecordError::BodyCrc { stored: stored_crc, computed });
        }
    }
    Ok(RecordView {
        total_size,
        version,
        body_crc: stored_crc,
        queue_id,
        flag,
        queue_offset,
        commit_log_offset,
        sys_flag,
        born_timestamp,
        born_host,
        store_timestamp,
        store_host,
        reconsume_times,
        prepared_transaction_offset,
        body,
        topic,
        properties,
    })
}

/// Decodes the record at the start of `buf` (body copied); returns it and its length.
pub fn decode_record(buf: &[u8], options: DecodeOptions) -> Result<(MessageExt, usize), RecordError> {
    let view = parse_record(buf, options)?;
    Ok((view.to_message_ext(), view.total_size))
}

/// Decodes the record at the start of `buf`, the body sharing `buf`'s memory.
pub fn decode_record_bytes(buf: &Bytes, options: DecodeOptions) -> Result<(MessageExt, usize), RecordError> {
    let view = parse_record(buf, options)?;
    let body = buf.slice_ref(view.body);
    Ok((view.to_message_ext_with(body), view.total_size))
}

/// Decodes a concatenation of records, as a client decodes a PULL body (`MessageDecoder.decodes`).
///
/// Stricter than Java, which silently stops at the first bad record: any bad record is an error
/// naming its index and offset, since a broker never sends one.
pub fn decode_all(buf: &Bytes, options: DecodeOptions) -> Result<Vec<MessageExt>, RecordError> {
    // Sized once from the TOTALSIZE chain, so a body of 32 records does not regrow (and move every
    // decoded message) as it fills. `peek_record` refuses sizes below a record's minimum, which
    // bounds the reservation by the body's length for any input; the decode below checks each
    // record in full anyway.
    let mut count = 0usize;
    let mut at = 0usize;
    while let Some(Ok(RecordKind::Message { total_size, .. })) = buf.get(at..).map(peek_record) {
        count += 1;
        at = at.saturating_add(total_size);
    }
    let mut out = Vec::with_capacity(count);
    let mut offset = 0usize;
    while offset < buf.len() {
        let rest = buf.slice(offset..);
        let (msg, len) = decode_record_bytes(&rest, options).map_err(|e| RecordError::AtOffset {
            index: out.len(),
            offset,
            source: Box::new(e),
        })?;
        out.push(msg);
        offset += len;
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;
    use proptest::sample::Index;
    use proptest::test_runner::Config;
    use proptest::test_runner::TestRunner;

    use super::*;
    use crate::message::properties;
    use crate::message::testing::body;
    use crate::message::testing::message_ext;

    /// The record in [`golden_record_bytes`].
    fn golden_message() -> MessageExt {
        let mut message = Message::new("TopicTest", &b"Hello"[..]);
        message.flag = 0;
        message.properties.insert(properties::TAGS, "TagA");
        MessageExt {
            message,
            queue_id: 3,
            store_size: 0,
            queue_offset: 7,
            commit_log_offset: 4096,
            sys_flag: 0,
            born_timestamp: 1_700_000_000_000,
            born_host: "192.168.0.2:54321".parse().unwrap(),
            store_timestamp: 1_700_000_000_123,
            store_host: "10.0.0.1:10911".parse().unwrap(),
            body_crc: 0,
            reconsume_times: 0,
            prepared_transaction_offset: 0,
        }
    }

    /// Written out field by field from the Java layout, **by hand**, from `CommitLog.calMsgLength`
    /// and `MessageDecoder.decode` (4.9.8): TOTALSIZE = 91 + body 5 + topic 9 + properties 10 = 115.
    fn golden_record_bytes() -> Vec<u8> {
        let mut v: Vec<u8> = Vec::new();
        v.extend_from_slice(&[0x00, 0x00, 0x00, 0x73]); //  0 TOTALSIZE = 115
        v.extend_from_slice(&[0xDA, 0xA3, 0x20, 0xA7]); //  4 MAGICCODE v1
        v.extend_from_slice(&[0x77, 0xD1, 0x89, 0x82]); //  8 BODYCRC = crc32("Hello") 0xF7D18982 & 0x7FFFFFFF
        v.extend_from_slice(&[0x00, 0x00, 0x00, 0x03]); // 12 QUEUEID = 3
        v.extend_from_slice(&[0x00, 0x00, 0x00, 0x00]); // 16 FLAG = 0
        v.extend_from_slice(&[0, 0, 0, 0, 0, 0, 0, 0x07]); // 20 QUEUEOFFSET = 7
        v.extend_from_slice(&[0, 0, 0, 0, 0, 0, 0x10, 0x00]); // 28 PHYSICALOFFSET = 4096
        v.extend_from_slice(&[0x00, 0x00, 0x00, 0x00]); // 36 SYSFLAG = 0 (IPv4 hosts)
        v.extend_from_slice(&[0x00, 0x00, 0x01, 0x8B, 0xCF, 0xE5, 0x68, 0x00]); // 40 BORNTIMESTAMP 1700000000000
        v.extend_from_slice(&[192, 168, 0, 2, 0x00, 0x00, 0xD4, 0x31]); // 48 BORNHOST 192.168.0.2, port 54321
        v.extend_from_slice(&[0x00, 0x00, 0x01, 0x8B, 0xCF, 0xE5, 0x68, 0x7B]); // 56 STORETIMESTAMP +123
        v.extend_from_slice(&[10, 0, 0, 1, 0x00, 0x00, 0x2A, 0x9F]); // 64 STOREHOST 10.0.0.1, port 10911
        v.extend_from_slice(&[0x00, 0x00, 0x00, 0x00]); // 72 RECONSUMETIMES = 0
        v.extend_from_slice(&[0, 0, 0, 0, 0, 0, 0, 0]); // 76 PREPARED_TX_OFFSET = 0
        v.extend_from_slice(&[0x00, 0x00, 0x00, 0x05]); // 84 BODYLEN = 5
        v.extend_from_slice(b"Hello"); // 88 BODY
        v.push(9); // 93 TOPICLEN (1 byte in v1)
        v.extend_from_slice(b"TopicTest"); // 94 TOPIC
        v.extend_from_slice(&[0x00, 0x0A]); // 103 PROPLEN = 10
        v.extend_from_slice(b"TAGS\x01TagA\x02"); // 105 PROPERTIES; Java ends every pair with U+0002
        assert_eq!(v.len(), 115);
        v
    }

    #[test]
    fn golden_record_encodes_byte_exactly() {
        let expected = golden_record_bytes();
        assert_eq!(crc32fast::hash(b"Hello"), 0xF7D1_8982);
        let encoded = encode_record(&golden_message()).unwrap();
        assert_eq!(&encoded[..], &expected[..]);
        assert_eq!(record_len(0, 5, 9, 10), 115);

        let (decoded, len) = decode_record(&expected, DecodeOptions::verify_crc()).unwrap();
        assert_eq!(len, 115);
        let mut want = golden_message();
        want.store_size = 115;
        want.body_crc = 0x77D1_8982;
        assert_eq!(decoded, want);
        assert_eq!(decoded.offset_msg_id().to_string(), "0A00000100002A9F0000000000001000");
        assert_eq!(read_physical_offset(&expected), Ok(4096));
        assert_eq!(read_queue_offset(&expected), Ok(7));
    }

    #[test]
    fn constants_match_java() {
        assert_eq!(MESSAGE_MAGIC_CODE_V1, -626_843_481);
        assert_eq!(MESSAGE_MAGIC_CODE_V2, -626_843_477);
        assert_eq!(BLANK_MAGIC_CODE, -875_286_124);
        assert_eq!(record_len(0, 0, 0, 0), RECORD_SIZE_MIN_BYTES);
        assert_eq!(record_len(sys_flag::BORNHOST_V6 | sys_flag::STOREHOST_V6, 0, 0, 0), RECORD_SIZE_MIN_BYTES + 24);
        assert_eq!(record_len(0, 0, 128, 0), RECORD_SIZE_MIN_BYTES + 1 + 128);
    }

    #[test]
    fn ipv6_hosts_set_flags_and_v2_topic_uses_two_length_bytes() {
        let mut m = golden_message();
        m.born_host = "[2001:db8::2]:1234".parse().unwrap();
        m.store_host = "[::1]:10911".parse().unwrap();
        m.message.topic = "T".repeat(200).into();
        let bytes = encode_record(&m).unwrap();
        let (decoded, _) = decode_record(&bytes, DecodeOptions::verify_crc()).unwrap();
        assert_eq!(decoded.sys_flag, sys_flag::BORNHOST_V6 | sys_flag::STOREHOST_V6);
        assert_eq!(decoded.born_host, m.born_host);
        assert_eq!(decoded.store_host, m.store_host);
        assert_eq!(decoded.message.topic, m.message.topic);
        assert_eq!(
            peek_record(&bytes),
            Ok(RecordKind::Message { version: MessageVersion::V2, total_size: bytes.len() })
        );
        // BODYLEN now sits 24 bytes later: 84 + 12 + 12.
        assert_eq!(&bytes[108..112], &[0, 0, 0, 5]);
        // The v2 TOPICLEN is 2 bytes right after the body.
        assert_eq!(&bytes[117..119], &[0, 200]);
    }

    #[test]
    fn encoder_refuses_oversized_fields() {
        let mut m = golden_message();
        m.message.topic = "T".repeat(V2_TOPIC_LENGTH_MAX_BYTES + 1).into();
        assert!(matches!(encode_record(&m), Err(RecordEncodeError::TopicTooLong { .. })));
        let mut m = golden_message();
        m.message.properties.insert("k", "v".repeat(PROPERTIES_SIZE_MAX_BYTES));
        assert!(matches!(encode_record(&m), Err(RecordEncodeError::PropertiesTooLong { .. })));
    }

    #[test]
    fn patching_offsets_keeps_the_crc_valid() {
        let mut bytes = golden_record_bytes();
        patch_physical_offset(&mut bytes, 0x1122_3344_5566_7788).unwrap();
        patch_queue_offset(&mut bytes, 42).unwrap();
        let (decoded, _) = decode_record(&bytes, DecodeOptions::verify_crc()).unwrap();
        assert_eq!(decoded.commit_log_offset, 0x1122_3344_5566_7788);
        assert_eq!(decoded.queue_offset, 42);
        assert!(matches!(patch_physical_offset(&mut [0u8; 35], 1), Err(RecordError::Truncated { .. })));
        assert!(matches!(patch_queue_offset(&mut [0u8; 27], 1), Err(RecordError::Truncated { .. })));
        assert!(patch_queue_offset(&mut [0u8; 28], 1).is_ok());
    }

    #[test]
    fn malformed_records_give_precise_errors() {
        let good = golden_record_bytes();
        let with = |pos: usize, bytes: &[u8]| {
            let mut v = good.clone();
            v[pos..pos + bytes.len()].copy_from_slice(bytes);
            v
        };
        let opts = DecodeOptions::verify_crc();
        assert!(matches!(decode_record(&good[..7], opts), Err(RecordError::Truncated { field: "MAGICCODE", .. })));
        assert!(matches!(decode_record(&good[..113], opts), Err(RecordError::Truncated { field: "record", .. })));
        assert_eq!(decode_record(&with(4, &[0, 0, 0, 0]), opts).unwrap_err(), RecordError::BadMagic(0));
        assert_eq!(decode_record(&with(0, &[0, 0, 0, 90]), opts).unwrap_err(), RecordError::BadTotalSize(90));
        assert_eq!(decode_record(&with(0, &[0xFF; 4]), opts).unwrap_err(), RecordError::BadTotalSize(-1));
        let blank = blank_record_header(4096);
        assert_eq!(decode_record(&blank, opts).unwrap_err(), RecordError::Blank { total_size: 4096 });
        assert_eq!(peek_record(&blank), Ok(RecordKind::Blank { total_size: 4096 }));
        // BODYLEN negative, or so large it leaves the record.
        assert_eq!(
            decode_record(&with(84, &[0xFF, 0xFF, 0xFF, 0xFF]), opts).unwrap_err(),
            RecordError::BadLength { field: "BODYLEN", value: -1 }
        );
        assert!(matches!(
            decode_record(&with(84, &[0x7F, 0xFF, 0xFF, 0xFF]), opts),
            Err(RecordError::Truncated { field: "BODY", .. })
        ));
        // A v1 topic length of 200 is negative to Java.
        assert_eq!(
            decode_record(&with(93, &[200]), opts).unwrap_err(),
            RecordError::BadLength { field: "TOPICLEN", value: -56 }
        );
        // TOTALSIZE larger than the fields, with the input long enough to hold it.
        let mut padded = with(0, &[0, 0, 0, 116]);
        padded.push(0);
        assert_eq!(
            decode_record(&padded, opts).unwrap_err(),
            RecordError::SizeMismatch { total_size: 116, computed: 115 }
        );
        assert_eq!(
            decode_record(&with(52, &[0x00, 0x01, 0x00, 0x00]), opts).unwrap_err(),
            RecordError::BadPort { field: "BORNHOST", port: 65536 }
        );
        assert_eq!(decode_record(&with(94, &[0xFF]), opts).unwrap_err(), RecordError::NotUtf8 { field: "TOPIC" });
        assert_eq!(
            decode_record(&with(88, b"J"), opts).unwrap_err(),
            RecordError::BodyCrc { stored: 0x77D1_8982, computed: body_crc(b"Jello") }
        );
        assert!(decode_record(&with(88, b"J"), DecodeOptions::default()).is_ok());
    }

    #[test]
    fn decode_all_reports_the_failing_record() {
        let mut buf = golden_record_bytes();
        buf.extend_from_slice(&golden_record_bytes());
        let all = decode_all(&Bytes::from(buf.clone()), DecodeOptions::verify_crc()).unwrap();
        assert_eq!(all.len(), 2);
        assert_eq!(decode_all(&Bytes::new(), DecodeOptions::default()).unwrap(), vec![]);
        buf.truncate(115 + 50);
        let err = decode_all(&Bytes::from(buf), DecodeOptions::default()).unwrap_err();
        assert!(matches!(err, RecordError::AtOffset { index: 1, offset: 115, .. }), "{err}");
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(10_000))]

        #[test]
        fn round_trip(msg in message_ext()) {
            let bytes = encode_record(&msg).unwrap();
            let flag = sys_flag_for_hosts(msg.sys_flag, &msg.born_host, &msg.store_host);
            let props_len = msg.message.properties.wire_len();
            prop_assert_eq!(bytes.len(), record_len(flag, msg.message.body.len(), msg.message.topic.len(), props_len));
            let frozen = bytes.freeze();
            let (decoded, len) = decode_record_bytes(&frozen, DecodeOptions::verify_crc()).unwrap();
            prop_assert_eq!(len, frozen.len());
            let mut want = msg.clone();
            want.store_size = len as i32;
            want.body_crc = body_crc(&msg.message.body);
            want.sys_flag = flag;
            prop_assert_eq!(&decoded, &want);
            // Re-encoding a decoded record reproduces the bytes.
            prop_assert_eq!(&encode_record(&decoded).unwrap()[..], &frozen[..]);
            let (copied, _) = decode_record(&frozen, DecodeOptions::default()).unwrap();
            prop_assert_eq!(copied, decoded);
        }

    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(2_000))]

        #[test]
        fn concatenations_round_trip(msgs in proptest::collection::vec(message_ext(), 0..6)) {
            let mut buf = BytesMut::new();
            for m in &msgs {
                encode_record_into(m, &mut buf).unwrap();
            }
            let decoded = decode_all(&buf.freeze(), DecodeOptions::verify_crc()).unwrap();
            prop_assert_eq!(decoded.len(), msgs.len());
            for (d, m) in decoded.iter().zip(&msgs) {
                prop_assert_eq!(&d.message, &m.message);
                prop_assert_eq!(d.commit_log_offset, m.commit_log_offset);
            }
        }
    }

    /// ~20k cases: arbitrary bytes, valid records cut short, and valid records with bytes overwritten
    /// (TOTALSIZE and every length field included) must decode to `Ok` or `Err`, never panic.
    /// proptest picks the seed and prints it with any failure.
    #[test]
    fn decoder_never_panics() {
        let mut runner = TestRunner::new(Config { cases: 20_000, failure_persistence: None, ..Config::default() });
        let edits = proptest::collection::vec((any::<Index>(), any::<u8>()), 1..5);
        let noise = body(200);
        let strategy = (message_ext(), 0usize..3, any::<Index>(), edits, noise);
        runner
            .run(&strategy, |(msg, mode, cut, edits, noise)| {
                let valid = encode_record(&msg).unwrap().to_vec();
                let input = match mode {
                    0 => noise.to_vec(),
                    1 => valid[..cut.index(valid.len() + 1)].to_vec(),
                    _ => {
                        let mut v = valid;
                        for (at, byte) in edits {
                            let i = at.index(v.len());
                            v[i] = byte;
                        }
                        v
                    }
                };
                for opts in [DecodeOptions::default(), DecodeOptions::verify_crc()] {
                    if let Ok((m, len)) = decode_record(&input, opts) {
                        prop_assert!(len <= input.len());
                        prop_assert_eq!(m.store_size as usize, len);
                    }
                    let _ = decode_all(&Bytes::from(input.clone()), opts);
                }
                let _ = peek_record(&input);
                Ok(())
            })
            .unwrap();
    }

    #[test]
    fn reconsume_times_are_patched_in_place_for_either_host_width() {
        for v6 in [false, true] {
            let mut msg = MessageExt::default();
            msg.message.topic = "t".into();
            msg.message.body = bytes::Bytes::from_static(b"b");
            msg.reconsume_times = 1;
            if v6 {
                msg.born_host = "[::1]:1".parse().unwrap();
                msg.store_host = "[::1]:2".parse().unwrap();
                msg.sys_flag = super::super::sys_flag::with_born_host_v6(msg.sys_flag, true);
                msg.sys_flag = super::super::sys_flag::with_store_host_v6(msg.sys_flag, true);
            }
            let mut out = bytes::BytesMut::new();
            encode_record_into(&msg, &mut out).unwrap();
            patch_reconsume_times(&mut out, 7).unwrap();
            assert_eq!(parse_record(&out, DecodeOptions::default()).unwrap().reconsume_times, 7, "v6 {v6}");
        }
        assert!(patch_reconsume_times(&mut [0u8; 30], 1).is_err());
    }
}
