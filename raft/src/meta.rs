//! `raft-meta`: the small file holding what must survive a crash besides the log itself:
//! vote, committed log id, last purged log id, the position of the first live entry, the
//! segment size the store was created with, and the durable watermark.
//!
//! Layout (big-endian), 512 bytes:
//!
//! ```text
//! slot 0 @0, slot 1 @128 (written alternately, each write fdatasync'ed; highest valid seq wins)
//!   0 magic u32 "RMMS" | 4 version u16 | 6 flags u16 (1 vote, 2 vote committed, 4 committed, 8 purged)
//!   8 seq u64 | 16 vote_term | 24 vote_node | 32 committed_term | 40 committed_index
//!  48 purged_term | 56 purged_index | 64 start_pos | 72 segment_size | 80 durable_pos
//!  88..124 zero | 124 crc32 of 0..124
//! watermark @256 (rewritten after every group commit, NOT fsynced)
//!   0 magic u32 "RMWM" | 4 zero u32 | 8 durable_pos u64 | 16 generation u64 (= seq of the slot
//!   current when written) | 24 crc32 of 0..24 | 28 zero u32
//! ```
//!
//! Invariants: a slot is overwritten only when the other slot holds the newest durable state,
//! so a torn write loses at most the write in progress. The watermark is a lower bound of the
//! fsynced data end: it is written only after the data sync, and ignored unless its generation
//! equals the newest slot's seq (a truncation lowers `durable_pos` through a synced slot write,
//! which makes any older, higher watermark stale). Creation is tmp + fsync + rename + fsync(dir),
//! so an existing `raft-meta` always had a valid slot.

use std::fs::{File, OpenOptions};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use crate::error::{Result, StoreError};
use crate::mapped_file::sync_dir;
use crate::type_config::{LogId, Vote, log_id};

/// Name of the meta file in the store directory.
pub const META_FILE: &str = "raft-meta";
const SLOT_MAGIC: u32 = 0x524D_4D53;
const WM_MAGIC: u32 = 0x524D_574D;
const VERSION: u16 = 1;
const SLOT_BYTES: usize = 128;
const WM_OFFSET: u64 = 256;
const FILE_BYTES: u64 = 512;

/// Persistent state kept in the meta file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MetaState {
    /// Last saved vote.
    pub vote: Option<Vote>,
    /// Last saved committed log id (may lag).
    pub committed: Option<LogId>,
    /// Last purged log id.
    pub last_purged: Option<LogId>,
    /// Position of the first entry after `last_purged` (or where it will go).
    pub start_pos: u64,
    /// Segment size the store was created with.
    pub segment_size: u64,
    /// Lower bound of the fsynced data end.
    pub durable_pos: u64,
}

impl MetaState {
    /// State of a new store.
    pub fn new(segment_size: u64) -> Self {
        Self { vote: None, committed: None, last_purged: None, start_pos: 0, segment_size, durable_pos: 0 }
    }
}

fn be64(b: &[u8], o: usize) -> u64 {
    let mut a = [0u8; 8];
    a.copy_from_slice(&b[o..o + 8]);
    u64::from_be_bytes(a)
}

fn be32(b: &[u8], o: usize) -> u32 {
    u32::from_be_bytes([b[o], b[o + 1], b[o + 2], b[o + 3]])
}

fn encode_slot(m: &MetaState, seq: u64) -> [u8; SLOT_BYTES] {
    let mut b = [0u8; SLOT_BYTES];
    let mut flags = 0u16;
    b[0..4].copy_from_slice(&SLOT_MAGIC.to_be_bytes());
    b[4..6].copy_from_slice(&VERSION.to_be_bytes());
    b[8..16].copy_from_slice(&seq.to_be_bytes());
    if let Some(v) = &m.vote {
        flags |= 1;
        if v.committed {
            flags |= 2;
        }
        b[16..24].copy_from_slice(&v.leader_id.term.to_be_bytes());
        b[24..32].copy_from_slice(&v.leader_id.voted_for.to_be_bytes());
    }
    if let Some(c) = &m.committed {
        flags |= 4;
        b[32..40].copy_from_slice(&c.leader_id.term.to_be_bytes());
        b[40..48].copy_from_slice(&c.index.to_be_bytes());
    }
    if let Some(p) = &m.last_purged {
        flags |= 8;
        b[48..56].copy_from_slice(&p.leader_id.term.to_be_bytes());
        b[56..64].copy_from_slice(&p.index.to_be_bytes());
    }
    b[6..8].copy_from_slice(&flags.to_be_bytes());
    b[64..72].copy_from_slice(&m.start_pos.to_be_bytes());
    b[72..80].copy_from_slice(&m.segment_size.to_be_bytes());
    b[80..88].copy_from_slice(&m.durable_pos.to_be_bytes());
    let crc = crc32fast::hash(&b[..124]);
    b[124..128].copy_from_slice(&crc.to_be_bytes());
    b
}

fn decode_slot(b: &[u8]) -> Option<(u64, MetaState)> {
    if b.len() < SLOT_BYTES || be32(b, 0) != SLOT_MAGIC || be32(b, 124) != crc32fast::hash(&b[..124]) {
        return None;
    }
    if u16::from_be_bytes([b[4], b[5]]) != VERSION {
        return None;
    }
    let flags = u16::from_be_bytes([b[6], b[7]]);
    let vote = (flags & 1 != 0).then(|| {
        let mut v = Vote::new(be64(b, 16), be64(b, 24));
        v.committed = flags & 2 != 0;
        v
    });
    let committed = (flags & 4 != 0).then(|| log_id(be64(b, 32), be64(b, 40)));
    let last_purged = (flags & 8 != 0).then(|| log_id(be64(b, 48), be64(b, 56)));
    let m = MetaState {
        vote,
        committed,
        last_purged,
        start_pos: be64(b, 64),
        segment_size: be64(b, 72),
        durable_pos: be64(b, 80),
    };
    Some((be64(b, 8), m))
}

fn encode_watermark(durable_pos: u64, generation: u64) -> [u8; 32] {
    let mut b = [0u8; 32];
    b[0..4].copy_from_slice(&WM_MAGIC.to_be_bytes());
    b[8..16].copy_from_slice(&durable_pos.to_be_bytes());
    b[16..24].copy_from_slice(&generation.to_be_bytes());
    let crc = crc32fast::hash(&b[..24]);
    b[24..28].copy_from_slice(&crc.to_be_bytes());
    b
}

fn decode_watermark(b: &[u8]) -> Option<(u64, u64)> {
    if b.len() < 32 || be32(b, 0) != WM_MAGIC || be32(b, 24) != crc32fast::hash(&b[..24]) {
        return None;
    }
    Some((be64(b, 8), be64(b, 16)))
}

/// The open meta file. Owned by the flusher thread after the store is open.
pub struct MetaFile {
    file: File,
    path: PathBuf,
    seq: u64,
}

impl MetaFile {
    /// Open the meta file in `dir`, creating it with `fresh` if absent. Returns the newest
    /// state, with `durable_pos` raised to a valid watermark.
    pub fn open(dir: &Path, fresh: &MetaState) -> Result<(Self, MetaState)> {
        let path = dir.join(META_FILE);
        if !path.exists() {
            create(dir, &path, fresh)?;
        }
        let file =
            OpenOptions::new().read(true).write(true).open(&path).map_err(|e| StoreError::io("open", &path, e))?;
        let mut buf = vec![0u8; FILE_BYTES as usize];
        let len = file.metadata().map_err(|e| StoreError::io("stat", &path, e))?.len();
        let n = usize::try_from(len.min(FILE_BYTES)).unwrap_or(0);
        file.read_exact_at(&mut buf[..n], 0).map_err(|e| StoreError::io("read", &path, e))?;
        let a = decode_slot(&buf[0..SLOT_BYTES]);
        let b = decode_slot(&buf[SLOT_BYTES..2 * SLOT_BYTES]);
        let (seq, mut state) = match (a, b) {
            (Some(a), Some(b)) => {
                if a.0 >= b.0 {
                    a
                } else {
                    b
                }
            }
            (Some(x), None) | (None, Some(x)) => x,
            (None, None) => {
                return Err(StoreError::Damaged(format!("{}: no valid meta slot", path.display())));
            }
        };
        let wm_at = WM_OFFSET as usize;
        if let Some((pos, generation)) = decode_watermark(&buf[wm_at..wm_at + 32])
            && generation == seq
        {
            state.durable_pos = state.durable_pos.max(pos);
        }
        Ok((Self { file, path, seq }, state))
    }

    /// Durably write `state` to the older slot.
    pub fn write(&mut self, state: &MetaState) -> Result<()> {
        let seq = self.seq + 1;
        let off = if seq.is_multiple_of(2) { 0 } else { SLOT_BYTES as u64 };
        let b = encode_slot(state, seq);
        self.file.write_all_at(&b, off).map_err(|e| StoreError::io("write meta", &self.path, e))?;
        self.file.sync_data().map_err(|e| StoreError::io("fdatasync meta", &self.path, e))?;
        self.seq = seq;
        Ok(())
    }

    /// Record the durable watermark without syncing (a lower bound, see module docs).
    pub fn write_watermark(&mut self, durable_pos: u64) -> Result<()> {
        let b = encode_watermark(durable_pos, self.seq);
        self.file.write_all_at(&b, WM_OFFSET).map_err(|e| StoreError::io("write watermark", &self.path, e))
    }
}

fn create(dir: &Path, path: &Path, fresh: &MetaState) -> Result<()> {
    let tmp = dir.join(format!("{META_FILE}.tmp"));
    let f = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(true)
        .open(&tmp)
        .map_err(|e| StoreError::io("create", &tmp, e))?;
    f.set_len(FILE_BYTES).map_err(|e| StoreError::io("set_len", &tmp, e))?;
    // seq 1 lives in slot 1 (odd), matching `write`'s alternation.
    f.write_all_at(&encode_slot(fresh, 1), SLOT_BYTES as u64).map_err(|e| StoreError::io("write", &tmp, e))?;
    f.sync_all().map_err(|e| StoreError::io("fsync", &tmp, e))?;
    std::fs::rename(&tmp, path).map_err(|e| StoreError::io("rename", path, e))?;
    sync_dir(dir)
}

/// Read just the effective durable watermark of a store directory (for crash tests/tools).
pub fn read_durable_pos(dir: &Path) -> Result<u64> {
    let (_, s) = MetaFile::open(dir, &MetaState::new(0))?;
    Ok(s.durable_pos)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn alternating_slots_survive_a_torn_write() -> anyhow::Result<()> {
        let dir = tempfile::tempdir()?;
        let (mut mf, s0) = MetaFile::open(dir.path(), &MetaState::new(4096))?;
        assert_eq!(s0, MetaState::new(4096));
        let mut s = s0.clone();
        s.vote = Some(Vote::new(3, 7));
        s.committed = Some(log_id(3, 10));
        mf.write(&s)?;
        let mut s2 = s.clone();
        s2.vote = Some(Vote::new_committed(4, 7));
        s2.last_purged = Some(log_id(2, 5));
        mf.write(&s2)?;
        drop(mf);
        let (_, got) = MetaFile::open(dir.path(), &MetaState::new(4096))?;
        assert_eq!(got, s2);
        // Tear the newest slot (seq 3 lives in slot 1 at offset 128).
        let p = dir.path().join(META_FILE);
        let f = OpenOptions::new().write(true).open(&p)?;
        f.write_all_at(&[0xFF; 10], 128 + 20)?;
        let (_, got) = MetaFile::open(dir.path(), &MetaState::new(4096))?;
        assert_eq!(got, s);
        Ok(())
    }

    #[test]
    fn watermark_counts_only_for_the_current_generation() -> anyhow::Result<()> {
        let dir = tempfile::tempdir()?;
        let (mut mf, s) = MetaFile::open(dir.path(), &MetaState::new(4096))?;
        mf.write_watermark(5000)?;
        assert_eq!(read_durable_pos(dir.path())?, 5000);
        mf.write(&s)?; // a slot write (e.g. truncation with durable_pos 0) supersedes it
        assert_eq!(read_durable_pos(dir.path())?, 0);
        Ok(())
    }
}
