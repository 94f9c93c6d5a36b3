//! The applied-state checkpoint of a replica: the state machine's applied log id, the memberships
//! it has applied since its snapshot, and the handler's opaque state as of that log id, so a
//! restart re-applies only the entries after it instead of every retained entry (RocketMQ's
//! `StoreCheckpoint`, which bounds how much of the CommitLog a restart dispatches again).
//!
//! ```text
//! <store>/checkpoint (big-endian):
//!   0 magic u32 "RMCK" | 4 version u16 | 6 zero u16 | 8 applied_term u64 | 16 applied_index u64
//!  24 membership_count u32 | per membership: flags u8 (1 = has a log id) | term u64 | index u64
//!     | len u32 | membership (payload_codec layout)
//!   data_len u32 | data | crc32 u32 of everything before it
//! ```
//!
//! Invariants:
//! - Written only after the handler made its derived files durable up to `applied`, and only
//!   while `applied` is within the fsynced log, so a checkpoint never claims state the replica
//!   could have lost.
//! - Replaced with tmp + fsync + rename + fsync(dir): after a crash it is the old or the new one.
//! - Derived data: a missing, unreadable or stale checkpoint costs a longer re-apply, never
//!   correctness, so the loader reports why it ignores one instead of failing the start.
//!   Decoding never panics on bad input.

use std::path::Path;

use bytes::{BufMut, Bytes};

use crate::error::{CorruptReason, Result, StoreError};
use crate::mapped_file::{read_if_present, replace_file, sync_dir};
use crate::payload_codec::{decode_membership, encode_membership};
use crate::snapshot_file::{be32, be64, check_crc};
use crate::type_config::{LogId, StoredMembership, log_id};

/// File name of the checkpoint inside the store directory.
pub const CHECKPOINT_FILE: &str = "checkpoint";
const MAGIC: u32 = 0x524D_434B;
const VERSION: u16 = 1;
const HEADER_BYTES: usize = 28;
const MEMBERSHIP_HEADER_BYTES: usize = 21;
/// Memberships a checkpoint may list: those applied since the snapshot (a joint change adds two).
const MEMBERSHIPS_MAX_COUNT: usize = 1 << 16;

/// The applied state of a replica as of `applied`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredCheckpoint {
    /// The last applied log id the state covers.
    pub applied: LogId,
    /// The membership in effect at the current snapshot, then every membership applied after
    /// it up to `applied`, in log order (never empty).
    pub memberships: Vec<StoredMembership>,
    /// The handler's state as of `applied` (opaque to raft/).
    pub data: Bytes,
}

impl StoredCheckpoint {
    fn encode(&self) -> Result<Vec<u8>> {
        let too_large = |what: &str| StoreError::Contract(format!("checkpoint {what} too large"));
        let mut b = Vec::with_capacity(HEADER_BYTES + self.data.len() + 256);
        b.put_u32(MAGIC);
        b.put_u16(VERSION);
        b.put_u16(0);
        b.put_u64(self.applied.leader_id.term);
        b.put_u64(self.applied.index);
        if self.memberships.len() > MEMBERSHIPS_MAX_COUNT {
            return Err(too_large("membership list"));
        }
        b.put_u32(u32::try_from(self.memberships.len()).map_err(|_| too_large("membership list"))?);
        for m in &self.memberships {
            let (flags, term, index) = m.log_id().map_or((0u8, 0, 0), |l| (1, l.leader_id.term, l.index));
            let mem = encode_membership(m.membership())?;
            b.put_u8(flags);
            b.put_u64(term);
            b.put_u64(index);
            b.put_u32(u32::try_from(mem.len()).map_err(|_| too_large("membership"))?);
            b.put_slice(&mem);
        }
        b.put_u32(u32::try_from(self.data.len()).map_err(|_| too_large("data"))?);
        b.put_slice(&self.data);
        let crc = crc32fast::hash(&b);
        b.put_u32(crc);
        Ok(b)
    }

    fn decode(b: &Bytes) -> Result<Self, CorruptReason> {
        let body = check_crc(b)?;
        if body.len() < HEADER_BYTES || be32(body, 0) != MAGIC {
            return Err(CorruptReason::BadMagic);
        }
        if u16::from_be_bytes([body[4], body[5]]) != VERSION || body[6] != 0 || body[7] != 0 {
            return Err(CorruptReason::UnknownFormat);
        }
        let applied = log_id(be64(body, 8), be64(body, 16));
        let count = usize::try_from(be32(body, 24)).map_err(|_| CorruptReason::BadSize)?;
        if count == 0 || count > MEMBERSHIPS_MAX_COUNT {
            return Err(CorruptReason::BadSize);
        }
        let mut at = HEADER_BYTES;
        let mut memberships = Vec::with_capacity(count);
        for _ in 0..count {
            let head = body.get(at..at + MEMBERSHIP_HEADER_BYTES).ok_or(CorruptReason::BadSize)?;
            let id = match head[0] {
                0 => None,
                1 => Some(log_id(be64(head, 1), be64(head, 9))),
                _ => return Err(CorruptReason::UnknownFormat),
            };
            let len = usize::try_from(be32(head, 17)).map_err(|_| CorruptReason::BadSize)?;
            let start = at + MEMBERSHIP_HEADER_BYTES;
            let end = start.checked_add(len).ok_or(CorruptReason::BadSize)?;
            let mem = decode_membership(body.get(start..end).ok_or(CorruptReason::BadSize)?)?;
            memberships.push(StoredMembership::new(id, mem));
            at = end;
        }
        let len = usize::try_from(be32(body, at)).map_err(|_| CorruptReason::BadSize)?;
        let start = at.checked_add(4).ok_or(CorruptReason::BadSize)?;
        if body.len() < start || body.len() - start != len {
            return Err(CorruptReason::BadSize);
        }
        Ok(Self { applied, memberships, data: b.slice(start..start + len) })
    }

    /// Read `<dir>/checkpoint`, if present.
    pub fn load(dir: &Path) -> Result<Option<Self>> {
        let Some(bytes) = read_if_present(dir, CHECKPOINT_FILE)? else { return Ok(None) };
        Self::decode(&bytes).map(Some).map_err(|reason| StoreError::Corrupt { pos: 0, reason })
    }

    /// Replace `<dir>/checkpoint` atomically and durably.
    pub fn save(&self, dir: &Path) -> Result<()> {
        replace_file(dir, CHECKPOINT_FILE, &self.encode()?)
    }

    /// Remove `<dir>/checkpoint` durably (a snapshot install replaced the whole state).
    pub fn remove(dir: &Path) -> Result<()> {
        let path = dir.join(CHECKPOINT_FILE);
        match std::fs::remove_file(&path) {
            Ok(()) => sync_dir(dir),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(StoreError::io("remove", &path, e)),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::{BTreeMap, BTreeSet};

    use super::*;
    use crate::type_config::{Membership, Node};

    fn membership(voters: &[u64], at: Option<LogId>) -> StoredMembership {
        let nodes: BTreeMap<u64, Node> =
            voters.iter().map(|i| (*i, Node { raft_addr: format!("127.0.0.1:{i}"), data: String::new() })).collect();
        let m = Membership::new(vec![voters.iter().copied().collect::<BTreeSet<_>>()], nodes).expect("valid");
        StoredMembership::new(at, m)
    }

    fn sample() -> StoredCheckpoint {
        StoredCheckpoint {
            applied: log_id(3, 42),
            memberships: vec![
                membership(&[1, 2, 3], Some(log_id(1, 0))),
                membership(&[1, 2, 3, 4], Some(log_id(2, 17))),
            ],
            data: Bytes::from_static(b"handler state"),
        }
    }

    #[test]
    fn round_trip_golden_header_and_every_cut_or_flip_refused() -> anyhow::Result<()> {
        let c = sample();
        let b = Bytes::from(c.encode()?);
        assert_eq!(&b[..4], b"RMCK");
        assert_eq!(&b[16..24], &42u64.to_be_bytes());
        assert_eq!(StoredCheckpoint::decode(&b), Ok(c));
        for cut in 0..b.len() {
            assert!(StoredCheckpoint::decode(&b.slice(..cut)).is_err(), "cut at {cut}");
        }
        for i in 0..b.len() {
            let mut flipped = b.to_vec();
            flipped[i] ^= 0x40;
            assert!(StoredCheckpoint::decode(&Bytes::from(flipped)).is_err(), "flip at {i}");
        }
        Ok(())
    }

    #[test]
    fn an_empty_membership_list_is_refused() -> anyhow::Result<()> {
        let c = StoredCheckpoint { memberships: vec![], ..sample() };
        let b = Bytes::from(c.encode()?);
        assert_eq!(StoredCheckpoint::decode(&b), Err(CorruptReason::BadSize));
        Ok(())
    }

    #[test]
    fn file_save_load_replace_remove() -> anyhow::Result<()> {
        let dir = tempfile::tempdir()?;
        assert_eq!(StoredCheckpoint::load(dir.path())?, None);
        let first = sample();
        first.save(dir.path())?;
        assert_eq!(StoredCheckpoint::load(dir.path())?, Some(first.clone()));
        let second = StoredCheckpoint { applied: log_id(3, 99), ..first };
        second.save(dir.path())?;
        assert_eq!(StoredCheckpoint::load(dir.path())?, Some(second));
        assert!(!dir.path().join(format!("{CHECKPOINT_FILE}.tmp")).exists());
        StoredCheckpoint::remove(dir.path())?;
        StoredCheckpoint::remove(dir.path())?;
        assert_eq!(StoredCheckpoint::load(dir.path())?, None);
        Ok(())
    }
}
