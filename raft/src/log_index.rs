//! The Raft index: `raftindex/<20-digit first index>` files of `entries_per_file` fixed 32-byte
//! slots; the slot of Raft index `i` is at `(i % entries_per_file) × 32` in the file whose first
//! index is `i - i % entries_per_file`.
//!
//! Slot layout (big-endian): `pos u64 | size u32 | magic u32 | index u64 | term u64`; an
//! all-zero slot is empty. The index is *derived* data: recovery re-validates every slot
//! against the data records and rewrites it, so the index is never fsynced on the hot path
//! (one fsync per group commit, not two), and slots past the live log may hold stale bytes.
//!
//! The files are sparse and written through the mapping: a slot's chunk of the file is
//! allocated with `posix_fallocate` first, so a full disk is an error, never a SIGBUS.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use crate::error::{Result, StoreError};
use crate::mapped_file::MappedFile;
use crate::segment::{file_name, list_numbered};

/// Bytes per slot.
pub const SLOT_BYTES: u64 = 32;
/// Magic of a used slot ("RMI1").
pub const SLOT_MAGIC: u32 = 0x524D_4931;

/// One index slot.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Slot {
    /// Physical position of the entry record.
    pub pos: u64,
    /// Record size (header + payload).
    pub size: u32,
    /// Raft index.
    pub index: u64,
    /// Raft term.
    pub term: u64,
}

impl Slot {
    /// Encode into 32 bytes.
    pub fn encode(&self) -> [u8; 32] {
        let mut b = [0u8; 32];
        b[0..8].copy_from_slice(&self.pos.to_be_bytes());
        b[8..12].copy_from_slice(&self.size.to_be_bytes());
        b[12..16].copy_from_slice(&SLOT_MAGIC.to_be_bytes());
        b[16..24].copy_from_slice(&self.index.to_be_bytes());
        b[24..32].copy_from_slice(&self.term.to_be_bytes());
        b
    }

    /// Decode; `None` for an empty or foreign slot.
    pub fn decode(b: &[u8]) -> Option<Self> {
        if b.len() < 32 {
            return None;
        }
        let u64_at = |o: usize| {
            let mut a = [0u8; 8];
            a.copy_from_slice(&b[o..o + 8]);
            u64::from_be_bytes(a)
        };
        let u32_at = |o: usize| u32::from_be_bytes([b[o], b[o + 1], b[o + 2], b[o + 3]]);
        if u32_at(12) != SLOT_MAGIC {
            return None;
        }
        Some(Self { pos: u64_at(0), size: u32_at(8), index: u64_at(16), term: u64_at(24) })
    }
}

/// Bytes of an index file reserved on disk at a time (32 Ki slots): the chunk holding a slot
/// gets its blocks before the slot is stored through the mapping. Chunks are aligned, so a
/// restart reserves the very chunks the previous run did and allocates nothing new.
pub const RESERVE_CHUNK_BYTES: u64 = 1 << 20;

/// One mapped index file and what this process knows of it.
struct IndexFile {
    map: MappedFile,
    /// Bytes `[lo, hi)` with blocks reserved by this process.
    reserved: (u64, u64),
    /// End of the slots this process stored (bytes); nothing from an earlier run is known.
    written_end: u64,
}

impl IndexFile {
    fn open(path: &Path, len: u64) -> Result<Self> {
        let (map, _) = MappedFile::open(path, len)?;
        Ok(Self { map, reserved: (0, 0), written_end: 0 })
    }

    /// Make sure `[off, off + SLOT_BYTES)` has blocks on disk.
    fn reserve_slot(&mut self, off: u64) -> Result<()> {
        let (lo, hi) = self.reserved;
        if lo <= off && off + SLOT_BYTES <= hi {
            return Ok(());
        }
        let from = off - off % RESERVE_CHUNK_BYTES;
        let to = (from + RESERVE_CHUNK_BYTES).min(self.map.len());
        self.map.reserve(from, to - from)?;
        // Appends move forward: keep one growing range, start over elsewhere.
        self.reserved = if from <= hi && to >= lo && hi > lo { (lo.min(from), hi.max(to)) } else { (from, to) };
        Ok(())
    }
}

/// The set of index files.
///
/// Invariant: `get` answers only for indexes in `live`, the range this process stored slots
/// for and has not cleared since; slots outside it may be stale (a cut never rewrites what an
/// earlier run wrote past it), which keeps a restart or a truncation from touching the rest of
/// a 160 MiB file. Every slot is stored below a reserved chunk (no SIGBUS on a full disk).
pub struct IndexSet {
    dir: PathBuf,
    entries_per_file: u64,
    files: BTreeMap<u64, IndexFile>,
    /// Indexes `[lo, hi)` whose slots are current.
    live: Option<(u64, u64)>,
}

impl IndexSet {
    /// Open the index files in `dir` (created if absent). No slot is live until stored again
    /// (recovery rewrites every recovered entry's slot).
    pub fn open(dir: &Path, entries_per_file: u64) -> Result<Self> {
        assert!(entries_per_file > 0, "index files need at least one slot");
        std::fs::create_dir_all(dir).map_err(|e| StoreError::io("mkdir", dir, e))?;
        let mut files = BTreeMap::new();
        for first in list_numbered(dir)? {
            if first % entries_per_file != 0 {
                // Written with another entries_per_file: derived data, rebuild it.
                let p = dir.join(file_name(first));
                std::fs::remove_file(&p).map_err(|e| StoreError::io("remove", &p, e))?;
                continue;
            }
            files.insert(first, IndexFile::open(&dir.join(file_name(first)), entries_per_file * SLOT_BYTES)?);
        }
        Ok(Self { dir: dir.to_path_buf(), entries_per_file, files, live: None })
    }

    fn locate(&self, index: u64) -> (u64, u64) {
        let first = index - index % self.entries_per_file;
        (first, (index - first) * SLOT_BYTES)
    }

    /// The slot of `index` if present and consistent.
    pub fn get(&self, index: u64) -> Option<Slot> {
        let (lo, hi) = self.live?;
        if index < lo || index >= hi {
            return None;
        }
        let (first, off) = self.locate(index);
        let s = Slot::decode(self.files.get(&first)?.map.read(off, SLOT_BYTES as usize)?)?;
        (s.index == index).then_some(s)
    }

    /// Write the slot of `s.index`, creating its file if needed. Fails (instead of faulting)
    /// when the disk has no room for the slot's page.
    pub fn put(&mut self, s: &Slot) -> Result<()> {
        let (first, off) = self.locate(s.index);
        if !self.files.contains_key(&first) {
            let path = self.dir.join(file_name(first));
            self.files.insert(first, IndexFile::open(&path, self.entries_per_file * SLOT_BYTES)?);
        }
        let enc = s.encode();
        let file = self.files.get_mut(&first).ok_or(StoreError::Contract("index file vanished".into()))?;
        file.reserve_slot(off)?;
        let dst = file
            .map
            .slice_mut(off, enc.len())
            .ok_or_else(|| StoreError::Contract(format!("index slot {} out of range", s.index)))?;
        if dst != enc {
            dst.copy_from_slice(&enc);
        }
        file.written_end = file.written_end.max(off + SLOT_BYTES);
        let i = s.index;
        self.live = Some(match self.live {
            Some((lo, hi)) if lo <= i && i <= hi => (lo, hi.max(i + 1)),
            _ => (i, i + 1),
        });
        Ok(())
    }

    /// Allocate the blocks of the slots of `[from, to]` (creating their files), so that storing them
    /// cannot find the disk full.
    pub fn reserve(&mut self, from: u64, to: u64) -> Result<()> {
        let mut i = from;
        while i <= to {
            let (first, off) = self.locate(i);
            if !self.files.contains_key(&first) {
                let path = self.dir.join(file_name(first));
                self.files.insert(first, IndexFile::open(&path, self.entries_per_file * SLOT_BYTES)?);
            }
            let file = self.files.get_mut(&first).ok_or(StoreError::Contract("index file vanished".into()))?;
            file.reserve_slot(off)?;
            // The first slot of the next chunk of this file, or of the next file.
            let next_chunk = first + (off - off % RESERVE_CHUNK_BYTES + RESERVE_CHUNK_BYTES) / SLOT_BYTES;
            let next = next_chunk.min(first + self.entries_per_file);
            if next > to && i < to {
                i = to;
            } else {
                i = next;
            }
        }
        Ok(())
    }

    /// Clear every slot at or above `from`: files entirely above are deleted; in the file
    /// holding `from`, the slots this process stored after it are zeroed (blocks it reserved,
    /// so the cost is what was written, not the file's size) and everything after it stops
    /// being live.
    pub fn clear_from(&mut self, from: u64) -> Result<()> {
        let (first, off) = self.locate(from);
        self.remove_where(|f| f >= from)?;
        if let Some(f) = self.files.get_mut(&first)
            && f.written_end > off
        {
            let len = usize::try_from(f.written_end - off)
                .map_err(|_| StoreError::Contract("index file too large".into()))?;
            if let Some(s) = f.map.slice_mut(off, len) {
                s.fill(0);
            }
            f.written_end = off;
        }
        self.live = match self.live {
            Some((lo, hi)) if lo < from => Some((lo, hi.min(from))),
            _ => None,
        };
        Ok(())
    }

    /// Delete files whose every slot is below `index`.
    pub fn remove_below(&mut self, index: u64) -> Result<()> {
        let n = self.entries_per_file;
        self.remove_where(|first| first + n <= index)
    }

    fn remove_where(&mut self, pred: impl Fn(u64) -> bool) -> Result<()> {
        let doomed: Vec<u64> = self.files.keys().copied().filter(|f| pred(*f)).collect();
        for first in doomed {
            if let Some(f) = self.files.remove(&first) {
                let path = f.map.path().to_path_buf();
                drop(f);
                std::fs::remove_file(&path).map_err(|e| StoreError::io("remove", &path, e))?;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slot_round_trip_and_golden() {
        let s = Slot { pos: 1, size: 2, index: 3, term: 4 };
        let b = s.encode();
        assert_eq!(&b[12..16], &[0x52, 0x4D, 0x49, 0x31]);
        assert_eq!(Slot::decode(&b), Some(s));
        assert_eq!(Slot::decode(&[0u8; 32]), None);
    }

    #[test]
    fn put_get_clear_remove() -> anyhow::Result<()> {
        let dir = tempfile::tempdir()?;
        let mut ix = IndexSet::open(dir.path(), 16)?;
        for i in 0..40 {
            ix.put(&Slot { pos: i * 100, size: 100, index: i, term: 1 })?;
        }
        assert_eq!(ix.get(17).map(|s| s.pos), Some(1700));
        ix.clear_from(20)?;
        assert!(ix.get(20).is_none() && ix.get(39).is_none());
        assert!(ix.get(19).is_some());
        ix.remove_below(16)?;
        assert!(ix.get(3).is_none());
        assert!(ix.get(16).is_some());
        Ok(())
    }

    #[test]
    fn slots_of_an_earlier_run_are_live_only_once_stored_again() -> anyhow::Result<()> {
        let dir = tempfile::tempdir()?;
        let mut ix = IndexSet::open(dir.path(), 16)?;
        for i in 1..30 {
            ix.put(&Slot { pos: i * 100, size: 100, index: i, term: 1 })?;
        }
        drop(ix);
        let mut ix = IndexSet::open(dir.path(), 16)?;
        assert!(ix.get(5).is_none(), "nothing is live before recovery stores it");
        for i in 1..10 {
            ix.put(&Slot { pos: i * 100, size: 100, index: i, term: 2 })?;
        }
        ix.clear_from(10)?;
        assert_eq!(ix.get(9).map(|s| s.term), Some(2));
        assert!(ix.get(10).is_none() && ix.get(12).is_none(), "stale slots past the cut stay dead");
        ix.put(&Slot { pos: 1000, size: 100, index: 10, term: 3 })?;
        assert_eq!(ix.get(10).map(|s| s.term), Some(3));
        assert!(ix.get(11).is_none());
        Ok(())
    }
}
