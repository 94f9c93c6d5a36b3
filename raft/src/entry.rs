//! Entry record codec: the fixed-size header every Raft entry carries inside a CommitLog
//! segment, the RocketMQ blank record that pads a segment's tail, and the deterministic roll
//! rule. Pure functions over byte slices; no IO.
//!
//! Record layout (all integers big-endian, like RocketMQ's CommitLog):
//!
//! ```text
//! off size field
//!   0    4 total_size   header + payload, bytes (RocketMQ TOTALSIZE position)
//!   4    4 magic        ENTRY_MAGIC (RocketMQ MAGICCODE position)
//!   8    8 index        Raft log index
//!  16    8 term         Raft term of the proposing leader
//!  24    8 pos          physical CommitLog offset of byte 0 of this record
//!  32    1 kind         EntryKind
//!  33    1 app_tag      opaque to raft/, chosen by the broker (0 for blank/membership)
//!  34    1 version      FORMAT_VERSION
//!  35    5 reserved     zero
//!  40    4 payload_crc  CRC32 (IEEE) of the payload bytes as stored (after patching)
//!  44    4 header_crc   CRC32 (IEEE) of bytes 0..44
//!  48      payload      HEADER_SIZE = 48 = H
//! ```
//!
//! Blank record (RocketMQ file-end padding): `total_size u32 | BLANK_MAGIC u32`, 8 B minimum,
//! `total_size` = bytes left in the segment. Invariant kept by [`place_entry`]: every entry leaves
//! at least [`BLANK_MIN_BYTES`] in its segment, so a blank always fits and a segment never ends
//! exactly at an entry's end.
//!
//! Invariants: a record never straddles a segment; `pos` in the header equals the record's
//! actual offset; whether an entry fits is a pure function of `(pos, size, segment_size)` so
//! every replica lays out identical bytes at identical offsets.

use crate::error::CorruptReason;

/// Size of the entry header in bytes: `H` in `PHYSICALOFFSET = pos + H + offset_in_payload`.
pub const HEADER_SIZE: u64 = 48;
/// `HEADER_SIZE` as usize for slicing.
pub const HEADER_SIZE_USIZE: usize = 48;
/// Magic of a Raft entry record ("RMQ1"); distinct from RocketMQ message magics
/// (0xAABBCCDD, 0xDAA320A7) and the blank magic.
pub const ENTRY_MAGIC: u32 = 0x524D_5131;
/// RocketMQ `BLANK_MAGIC_CODE` (-875286124): file-end padding.
pub const BLANK_MAGIC: u32 = 0xCBD4_3194;
/// RocketMQ `END_FILE_MIN_BLANK_LENGTH`.
pub const BLANK_MIN_BYTES: u64 = 8;
/// On-disk format version written into every header.
pub const FORMAT_VERSION: u8 = 1;

const OFF_TOTAL_SIZE: usize = 0;
const OFF_MAGIC: usize = 4;
const OFF_INDEX: usize = 8;
const OFF_TERM: usize = 16;
const OFF_POS: usize = 24;
const OFF_KIND: usize = 32;
const OFF_APP_TAG: usize = 33;
const OFF_VERSION: usize = 34;
const OFF_RESERVED: usize = 35;
const OFF_PAYLOAD_CRC: usize = 40;
const OFF_HEADER_CRC: usize = 44;

/// What an entry's payload holds. The numbers are on-disk values: never renumber, never reuse.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum EntryKind {
    /// openraft blank entry (a new leader's first entry); empty payload.
    Blank = 1,
    /// Application payload, opaque to raft/ (RocketMQ records or broker commands).
    Normal = 2,
    /// Membership config in the layout of `payload_codec`.
    Membership = 3,
}

impl EntryKind {
    /// Decode the on-disk byte.
    pub fn from_u8(v: u8) -> Option<Self> {
        match v {
            1 => Some(Self::Blank),
            2 => Some(Self::Normal),
            3 => Some(Self::Membership),
            _ => None,
        }
    }
}

/// Decoded entry header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EntryHeader {
    /// Header + payload bytes.
    pub total_size: u32,
    /// Raft log index.
    pub index: u64,
    /// Raft term.
    pub term: u64,
    /// Physical offset of the record.
    pub pos: u64,
    /// Payload kind.
    pub kind: EntryKind,
    /// Broker-defined tag of a normal payload.
    pub app_tag: u8,
    /// CRC32 of the payload.
    pub payload_crc: u32,
}

impl EntryHeader {
    /// Payload length in bytes.
    pub fn payload_len(&self) -> u64 {
        u64::from(self.total_size) - HEADER_SIZE
    }
}

/// What the first 8 bytes at a position say.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RecordPrefix {
    /// `total_size` and magic both zero: never written (end of log).
    Empty,
    /// A blank padding record of this many bytes.
    Blank(u32),
    /// An entry record of this many bytes (header still to be validated).
    Entry(u32),
    /// Anything else: garbage.
    Garbage,
}

/// Classify the record prefix at the start of `buf` (needs 8 bytes; shorter is `Garbage`).
pub fn peek_prefix(buf: &[u8]) -> RecordPrefix {
    if buf.len() < BLANK_MIN_BYTES as usize {
        return RecordPrefix::Garbage;
    }
    let size = read_u32(buf, OFF_TOTAL_SIZE);
    let magic = read_u32(buf, OFF_MAGIC);
    match magic {
        0 if size == 0 => RecordPrefix::Empty,
        BLANK_MAGIC if u64::from(size) >= BLANK_MIN_BYTES => RecordPrefix::Blank(size),
        ENTRY_MAGIC if u64::from(size) >= HEADER_SIZE => RecordPrefix::Entry(size),
        _ => RecordPrefix::Garbage,
    }
}

/// Encode a header into `out[..HEADER_SIZE]`. `payload_crc` must be computed over the final
/// (patched) payload bytes.
pub fn encode_header(out: &mut [u8], h: &EntryHeader) {
    assert!(out.len() >= HEADER_SIZE_USIZE, "header buffer too short");
    assert!(u64::from(h.total_size) >= HEADER_SIZE, "total_size below header size");
    out[OFF_TOTAL_SIZE..OFF_TOTAL_SIZE + 4].copy_from_slice(&h.total_size.to_be_bytes());
    out[OFF_MAGIC..OFF_MAGIC + 4].copy_from_slice(&ENTRY_MAGIC.to_be_bytes());
    out[OFF_INDEX..OFF_INDEX + 8].copy_from_slice(&h.index.to_be_bytes());
    out[OFF_TERM..OFF_TERM + 8].copy_from_slice(&h.term.to_be_bytes());
    out[OFF_POS..OFF_POS + 8].copy_from_slice(&h.pos.to_be_bytes());
    out[OFF_KIND] = h.kind as u8;
    out[OFF_APP_TAG] = h.app_tag;
    out[OFF_VERSION] = FORMAT_VERSION;
    out[OFF_RESERVED..OFF_PAYLOAD_CRC].fill(0);
    out[OFF_PAYLOAD_CRC..OFF_PAYLOAD_CRC + 4].copy_from_slice(&h.payload_crc.to_be_bytes());
    let crc = crc32fast::hash(&out[..OFF_HEADER_CRC]);
    out[OFF_HEADER_CRC..OFF_HEADER_CRC + 4].copy_from_slice(&crc.to_be_bytes());
}

/// Decode and validate a header (magic, version, reserved bytes, kind, header CRC). Never
/// panics on arbitrary input.
pub fn decode_header(buf: &[u8]) -> Result<EntryHeader, CorruptReason> {
    if buf.len() < HEADER_SIZE_USIZE {
        return Err(CorruptReason::ShortHeader);
    }
    if read_u32(buf, OFF_MAGIC) != ENTRY_MAGIC {
        return Err(CorruptReason::BadMagic);
    }
    let stored_crc = read_u32(buf, OFF_HEADER_CRC);
    if crc32fast::hash(&buf[..OFF_HEADER_CRC]) != stored_crc {
        return Err(CorruptReason::HeaderCrc);
    }
    if buf[OFF_VERSION] != FORMAT_VERSION || buf[OFF_RESERVED..OFF_PAYLOAD_CRC].iter().any(|b| *b != 0) {
        return Err(CorruptReason::UnknownFormat);
    }
    let kind = EntryKind::from_u8(buf[OFF_KIND]).ok_or(CorruptReason::UnknownFormat)?;
    let total_size = read_u32(buf, OFF_TOTAL_SIZE);
    if u64::from(total_size) < HEADER_SIZE {
        return Err(CorruptReason::BadSize);
    }
    Ok(EntryHeader {
        total_size,
        index: read_u64(buf, OFF_INDEX),
        term: read_u64(buf, OFF_TERM),
        pos: read_u64(buf, OFF_POS),
        kind,
        app_tag: buf[OFF_APP_TAG],
        payload_crc: read_u32(buf, OFF_PAYLOAD_CRC),
    })
}

/// Check a payload against its header's CRC.
pub fn verify_payload(h: &EntryHeader, payload: &[u8]) -> Result<(), CorruptReason> {
    if payload.len() as u64 != h.payload_len() {
        return Err(CorruptReason::BadSize);
    }
    if crc32fast::hash(payload) != h.payload_crc {
        return Err(CorruptReason::PayloadCrc);
    }
    Ok(())
}

/// Encode a blank padding record of `size` bytes into `out[..8]`; the remaining bytes of the
/// padded region are left as they are (readers skip `size` bytes).
pub fn encode_blank(out: &mut [u8], size: u32) {
    assert!(u64::from(size) >= BLANK_MIN_BYTES, "blank record below 8 bytes");
    assert!(out.len() >= BLANK_MIN_BYTES as usize, "blank buffer too short");
    out[OFF_TOTAL_SIZE..OFF_TOTAL_SIZE + 4].copy_from_slice(&size.to_be_bytes());
    out[OFF_MAGIC..OFF_MAGIC + 4].copy_from_slice(&BLANK_MAGIC.to_be_bytes());
}

/// Where an entry of `total_size` bytes goes when the log ends at `end_pos`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Placement {
    /// `Some((pos, len))`: a blank record of `len` bytes at `pos` pads the current segment.
    pub blank: Option<(u64, u64)>,
    /// Position of the entry record.
    pub pos: u64,
}

/// Deterministic roll: the entry stays in the current segment iff it leaves at least
/// `BLANK_MIN_BYTES` behind it; otherwise the rest of the segment becomes a blank record and
/// the entry starts the next segment. Returns `None` if the entry can never fit.
pub fn place_entry(end_pos: u64, total_size: u64, segment_size: u64) -> Option<Placement> {
    if total_size < HEADER_SIZE || total_size + BLANK_MIN_BYTES > segment_size {
        return None;
    }
    let in_seg = end_pos % segment_size;
    let left = segment_size - in_seg;
    // Invariant from the previous placement: a segment tail is never shorter than a blank.
    debug_assert!(left >= BLANK_MIN_BYTES, "segment tail shorter than a blank record");
    if total_size + BLANK_MIN_BYTES <= left {
        return Some(Placement { blank: None, pos: end_pos });
    }
    Some(Placement { blank: Some((end_pos, left)), pos: end_pos + left })
}

/// Base position (file name) of the segment holding `pos`.
pub fn segment_base(pos: u64, segment_size: u64) -> u64 {
    pos - pos % segment_size
}

fn read_u32(buf: &[u8], off: usize) -> u32 {
    let mut b = [0u8; 4];
    b.copy_from_slice(&buf[off..off + 4]);
    u32::from_be_bytes(b)
}

fn read_u64(buf: &[u8], off: usize) -> u64 {
    let mut b = [0u8; 8];
    b.copy_from_slice(&buf[off..off + 8]);
    u64::from_be_bytes(b)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn kind_strategy() -> impl Strategy<Value = EntryKind> {
        prop_oneof![Just(EntryKind::Blank), Just(EntryKind::Normal), Just(EntryKind::Membership)]
    }

    proptest! {
        #[test]
        fn header_round_trips(
            size in 48u32..u32::MAX, index: u64, term: u64, pos: u64,
            kind in kind_strategy(), app_tag: u8, payload_crc: u32,
        ) {
            let h = EntryHeader { total_size: size, index, term, pos, kind, app_tag, payload_crc };
            let mut buf = [0u8; HEADER_SIZE_USIZE];
            encode_header(&mut buf, &h);
            prop_assert_eq!(decode_header(&buf), Ok(h));
            prop_assert_eq!(peek_prefix(&buf), RecordPrefix::Entry(size));
        }

        #[test]
        fn decoder_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..128)) {
            let _ = decode_header(&bytes);
            let _ = peek_prefix(&bytes);
        }

        #[test]
        fn any_single_bit_flip_is_detected(bit in 0usize..(44 * 8), index: u64, term: u64) {
            let h = EntryHeader {
                total_size: 100, index, term, pos: 4096, kind: EntryKind::Normal,
                app_tag: 7, payload_crc: 0xDEAD_BEEF,
            };
            let mut buf = [0u8; HEADER_SIZE_USIZE];
            encode_header(&mut buf, &h);
            buf[bit / 8] ^= 1 << (bit % 8);
            prop_assert!(decode_header(&buf).is_err());
        }

        #[test]
        fn placement_is_deterministic_and_never_straddles(
            seg_pages in 1u64..64, sizes in proptest::collection::vec(48u64..20_000, 1..200),
        ) {
            let seg = seg_pages * 4096;
            let mut end = 0u64;
            for s in sizes {
                let Some(p) = place_entry(end, s, seg) else {
                    prop_assert!(s + BLANK_MIN_BYTES > seg);
                    continue;
                };
                prop_assert_eq!(Some(p), place_entry(end, s, seg));
                prop_assert_eq!(segment_base(p.pos, seg), segment_base(p.pos + s - 1, seg));
                prop_assert!(seg - (p.pos + s) % seg >= BLANK_MIN_BYTES);
                if let Some((bpos, blen)) = p.blank {
                    prop_assert_eq!(bpos, end);
                    prop_assert!(blen >= BLANK_MIN_BYTES);
                    prop_assert_eq!((bpos + blen) % seg, 0);
                }
                end = p.pos + s;
            }
        }
    }

    #[test]
    fn golden_header_bytes() {
        let h = EntryHeader {
            total_size: 0x30,
            index: 1,
            term: 2,
            pos: 3,
            kind: EntryKind::Blank,
            app_tag: 0,
            payload_crc: 0,
        };
        let mut buf = [0u8; HEADER_SIZE_USIZE];
        encode_header(&mut buf, &h);
        assert_eq!(&buf[..8], &[0, 0, 0, 0x30, 0x52, 0x4D, 0x51, 0x31]);
        assert_eq!(&buf[8..16], &1u64.to_be_bytes());
        assert_eq!(&buf[16..24], &2u64.to_be_bytes());
        assert_eq!(&buf[24..32], &3u64.to_be_bytes());
        assert_eq!(&buf[32..36], &[1, 0, 1, 0]);
    }

    #[test]
    fn blank_is_rocketmq_layout() {
        let mut buf = [0u8; 8];
        encode_blank(&mut buf, 100);
        assert_eq!(buf, [0, 0, 0, 100, 0xCB, 0xD4, 0x31, 0x94]);
        assert_eq!(peek_prefix(&buf), RecordPrefix::Blank(100));
        assert_eq!(peek_prefix(&[0u8; 8]), RecordPrefix::Empty);
    }

    #[test]
    fn roll_table() {
        let seg = 4096;
        // fits with exactly 8 bytes to spare
        assert_eq!(place_entry(0, 4088, seg), Some(Placement { blank: None, pos: 0 }));
        // one byte more must roll
        assert_eq!(place_entry(0, 4089, seg), None);
        assert_eq!(place_entry(4000, 100, seg), Some(Placement { blank: Some((4000, 96)), pos: 4096 }));
        assert_eq!(place_entry(3988, 100, seg), Some(Placement { blank: None, pos: 3988 }));
        assert_eq!(place_entry(8192, 48, seg), Some(Placement { blank: None, pos: 8192 }));
    }
}
