//! The current snapshot of a replica: the broker's metadata manifest at the retention boundary
//! plus what raft/ needs to continue the log after it. Two layouts, both hand-written:
//!
//! ```text
//! snapshot data (what openraft ships to a follower; big-endian):
//!   0 magic u32 "RMSD" | 4 version u16 | 6 zero u16 | 8 next_pos u64 | 16 manifest_len u32
//!  20 manifest bytes   | crc32 u32 of everything before it
//!
//! <store>/snapshot (the installed or built snapshot, so a restart can serve it again):
//!   0 magic u32 "RMSF" | 4 version u16 | 6 flags u16 (1 last log id, 2 membership log id)
//!   8 last_term u64 | 16 last_index u64 | 24 mem_term u64 | 32 mem_index u64
//!  40 membership_len u32 | 44 membership (payload_codec layout) | data (layout above)
//!   | crc32 u32 of everything before it
//! ```
//!
//! `next_pos` is the physical position of entry `last_index + 1` on the replica that built the
//! snapshot; an installer rebases its log there so positions stay identical on every replica.
//! The file is replaced with tmp + fsync + rename + fsync(dir), so it is either the old or the
//! new snapshot after a crash. Decoding never panics on bad input.

use std::path::Path;

use bytes::{BufMut, Bytes, BytesMut};

use crate::error::{CorruptReason, Result, StoreError};
use crate::mapped_file::{read_if_present, replace_file};
use crate::payload_codec::{decode_membership, encode_membership};
use crate::type_config::{LogId, StoredMembership, log_id};

/// File name of the current snapshot inside the store directory.
pub const SNAPSHOT_FILE: &str = "snapshot";
const DATA_MAGIC: u32 = 0x524D_5344;
const FILE_MAGIC: u32 = 0x524D_5346;
const VERSION: u16 = 1;
const DATA_HEADER_BYTES: usize = 20;
const FILE_HEADER_BYTES: usize = 44;

/// Snapshot data: where the log continues, and the broker's manifest.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SnapshotData {
    /// Physical position of the entry after the snapshot's last log id.
    pub next_pos: u64,
    /// The broker's manifest (opaque to raft/).
    pub manifest: Bytes,
}

impl SnapshotData {
    /// Encode to the shipped layout.
    pub fn encode(&self) -> Result<Bytes> {
        let len = u32::try_from(self.manifest.len())
            .map_err(|_| StoreError::Contract(format!("manifest of {} bytes is too large", self.manifest.len())))?;
        let mut b = BytesMut::with_capacity(DATA_HEADER_BYTES + self.manifest.len() + 4);
        b.put_u32(DATA_MAGIC);
        b.put_u16(VERSION);
        b.put_u16(0);
        b.put_u64(self.next_pos);
        b.put_u32(len);
        b.put_slice(&self.manifest);
        let crc = crc32fast::hash(&b);
        b.put_u32(crc);
        Ok(b.freeze())
    }

    /// Decode the shipped layout.
    pub fn decode(b: &Bytes) -> Result<Self, CorruptReason> {
        let body = check_crc(b)?;
        if body.len() < DATA_HEADER_BYTES || be32(body, 0) != DATA_MAGIC {
            return Err(CorruptReason::BadMagic);
        }
        if u16::from_be_bytes([body[4], body[5]]) != VERSION || body[6] != 0 || body[7] != 0 {
            return Err(CorruptReason::UnknownFormat);
        }
        let len = usize::try_from(be32(body, 16)).map_err(|_| CorruptReason::BadSize)?;
        if body.len() != DATA_HEADER_BYTES + len {
            return Err(CorruptReason::BadSize);
        }
        Ok(Self { next_pos: be64(body, 8), manifest: b.slice(DATA_HEADER_BYTES..DATA_HEADER_BYTES + len) })
    }
}

/// A snapshot as kept on disk: openraft's meta plus the encoded data.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredSnapshot {
    /// Last log id covered.
    pub last_log_id: Option<LogId>,
    /// Membership as of `last_log_id`.
    pub membership: StoredMembership,
    /// Encoded [`SnapshotData`].
    pub data: Bytes,
}

impl StoredSnapshot {
    fn encode(&self) -> Result<Vec<u8>> {
        let mem = encode_membership(self.membership.membership())?;
        let mem_len = u32::try_from(mem.len()).map_err(|_| StoreError::Contract("membership too large".into()))?;
        let mut flags = 0u16;
        let mut b = Vec::with_capacity(FILE_HEADER_BYTES + mem.len() + self.data.len() + 4);
        b.put_u32(FILE_MAGIC);
        b.put_u16(VERSION);
        let (lt, li) = self.last_log_id.map_or((0, 0), |l| {
            flags |= 1;
            (l.leader_id.term, l.index)
        });
        let (mt, mi) = self.membership.log_id().map_or((0, 0), |l| {
            flags |= 2;
            (l.leader_id.term, l.index)
        });
        b.put_u16(flags);
        for v in [lt, li, mt, mi] {
            b.put_u64(v);
        }
        b.put_u32(mem_len);
        b.put_slice(&mem);
        b.put_slice(&self.data);
        let crc = crc32fast::hash(&b);
        b.put_u32(crc);
        Ok(b)
    }

    fn decode(b: &Bytes) -> Result<Self, CorruptReason> {
        let body = check_crc(b)?;
        if body.len() < FILE_HEADER_BYTES || be32(body, 0) != FILE_MAGIC {
            return Err(CorruptReason::BadMagic);
        }
        let flags = u16::from_be_bytes([body[6], body[7]]);
        if u16::from_be_bytes([body[4], body[5]]) != VERSION || flags & !3 != 0 {
            return Err(CorruptReason::UnknownFormat);
        }
        let id = |set: bool, o: usize| set.then(|| log_id(be64(body, o), be64(body, o + 8)));
        let mem_len = usize::try_from(be32(body, 40)).map_err(|_| CorruptReason::BadSize)?;
        let mem_end = FILE_HEADER_BYTES.checked_add(mem_len).ok_or(CorruptReason::BadSize)?;
        let mem_bytes = body.get(FILE_HEADER_BYTES..mem_end).ok_or(CorruptReason::BadSize)?;
        let membership = decode_membership(mem_bytes)?;
        let data = b.slice(mem_end..body.len());
        SnapshotData::decode(&data)?;
        Ok(Self {
            last_log_id: id(flags & 1 != 0, 8),
            membership: StoredMembership::new(id(flags & 2 != 0, 24), membership),
            data,
        })
    }

    /// Read `<dir>/snapshot`, if present.
    pub fn load(dir: &Path) -> Result<Option<Self>> {
        let Some(bytes) = read_if_present(dir, SNAPSHOT_FILE)? else { return Ok(None) };
        Self::decode(&bytes).map(Some).map_err(|reason| StoreError::Corrupt { pos: 0, reason })
    }

    /// Replace `<dir>/snapshot` atomically and durably.
    pub fn save(&self, dir: &Path) -> Result<()> {
        replace_file(dir, SNAPSHOT_FILE, &self.encode()?)
    }
}

/// The bytes before a trailing big-endian crc32 of them, if it matches.
pub(crate) fn check_crc(b: &[u8]) -> Result<&[u8], CorruptReason> {
    let split = b.len().checked_sub(4).ok_or(CorruptReason::ShortHeader)?;
    let (body, crc) = b.split_at(split);
    if crc32fast::hash(body) != be32(crc, 0) {
        return Err(CorruptReason::PayloadCrc);
    }
    Ok(body)
}

/// Big-endian u64 at `o` (0 past the end: callers check lengths first).
pub(crate) fn be64(b: &[u8], o: usize) -> u64 {
    let mut a = [0u8; 8];
    if let Some(s) = b.get(o..o + 8) {
        a.copy_from_slice(s);
    }
    u64::from_be_bytes(a)
}

/// Big-endian u32 at `o` (0 past the end: callers check lengths first).
pub(crate) fn be32(b: &[u8], o: usize) -> u32 {
    let mut a = [0u8; 4];
    if let Some(s) = b.get(o..o + 4) {
        a.copy_from_slice(s);
    }
    u32::from_be_bytes(a)
}

#[cfg(test)]
mod tests {
    use std::collections::{BTreeMap, BTreeSet};

    use super::*;
    use crate::type_config::{Membership, Node};

    fn membership() -> StoredMembership {
        let nodes: BTreeMap<u64, Node> =
            (1..=3).map(|i| (i, Node { raft_addr: format!("127.0.0.1:{i}"), data: String::new() })).collect();
        let m = Membership::new(vec![BTreeSet::from([1, 2, 3])], nodes).expect("valid membership");
        StoredMembership::new(Some(log_id(1, 1)), m)
    }

    #[test]
    fn data_round_trip_and_golden() {
        let d = SnapshotData { next_pos: 0x0102, manifest: Bytes::from_static(b"mf") };
        let b = d.encode().expect("encode");
        assert_eq!(&b[..4], b"RMSD");
        assert_eq!(&b[8..16], &[0, 0, 0, 0, 0, 0, 1, 2]);
        assert_eq!(b.len(), 20 + 2 + 4);
        assert_eq!(SnapshotData::decode(&b), Ok(d));
        for cut in 0..b.len() {
            assert!(SnapshotData::decode(&b.slice(..cut)).is_err(), "{cut}");
        }
    }

    #[test]
    fn file_round_trip() -> anyhow::Result<()> {
        let dir = tempfile::tempdir()?;
        assert_eq!(StoredSnapshot::load(dir.path())?, None);
        let data = SnapshotData { next_pos: 4096, manifest: Bytes::from_static(b"manifest") }.encode()?;
        let s = StoredSnapshot { last_log_id: Some(log_id(2, 9)), membership: membership(), data };
        s.save(dir.path())?;
        assert_eq!(StoredSnapshot::load(dir.path())?, Some(s.clone()));
        let mut raw = std::fs::read(dir.path().join(SNAPSHOT_FILE))?;
        raw[10] ^= 1;
        assert!(StoredSnapshot::decode(&Bytes::from(raw)).is_err());
        Ok(())
    }
}
