//! The CommitLog's data segments: `commitlog/<20-digit base pos>` files of `segment_size` bytes,
//! base = k × segment_size (RocketMQ naming). Addressed by physical position; a record never
//! straddles two segments (see `entry::place_entry`).
//!
//! Owns file naming, creation, lookup by position and whole-file deletion. Durability is the
//! flusher's job (through `SyncHandle`s); creating a segment reports that the directory must be
//! fsynced before anything in it is acknowledged.

use std::collections::BTreeMap;
use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::config::SEGMENT_RESERVE_AHEAD_BYTES;
use crate::error::{Result, StoreError};
use crate::mapped_file::{MappedFile, StableHandle, SyncHandle};

/// File name of the segment (or index file) starting at `base`.
pub fn file_name(base: u64) -> String {
    format!("{base:020}")
}

/// Parse a 20-digit file name.
pub fn parse_file_name(name: &str) -> Option<u64> {
    if name.len() == 20 && name.bytes().all(|b| b.is_ascii_digit()) { name.parse().ok() } else { None }
}

/// List `<20-digit>` files in `dir`, sorted; other names are ignored with a warning.
pub fn list_numbered(dir: &Path) -> Result<Vec<u64>> {
    let mut out = Vec::new();
    let rd = std::fs::read_dir(dir).map_err(|e| StoreError::io("read_dir", dir, e))?;
    for ent in rd {
        let ent = ent.map_err(|e| StoreError::io("read_dir", dir, e))?;
        let name = ent.file_name();
        match name.to_str().and_then(parse_file_name) {
            Some(n) => out.push(n),
            None => tracing::warn!(dir = %dir.display(), file = ?name, "ignoring unexpected file"),
        }
    }
    out.sort_unstable();
    Ok(out)
}

/// The set of data segments.
pub struct SegmentSet {
    dir: PathBuf,
    /// The directory, open for the life of the store: its fsync after a segment is created must
    /// not need a new file descriptor (with the process at its open-files limit, opening it failed
    /// and poisoned the store).
    dir_file: Arc<File>,
    segment_size: u64,
    segs: BTreeMap<u64, MappedFile>,
}

impl SegmentSet {
    /// Open every existing segment in `dir` (created if absent).
    pub fn open(dir: &Path, segment_size: u64) -> Result<Self> {
        std::fs::create_dir_all(dir).map_err(|e| StoreError::io("mkdir", dir, e))?;
        let mut segs = BTreeMap::new();
        for base in list_numbered(dir)? {
            if base % segment_size != 0 {
                return Err(StoreError::Config(format!(
                    "segment {base} is not a multiple of segment size {segment_size}"
                )));
            }
            let (f, _) = MappedFile::open(&dir.join(file_name(base)), segment_size)?;
            segs.insert(base, f);
        }
        let dir_file = Arc::new(File::open(dir).map_err(|e| StoreError::io("open dir", dir, e))?);
        Ok(Self { dir: dir.to_path_buf(), dir_file, segment_size, segs })
    }

    /// Directory of the segments.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The segments' directory, open (fsync it with [`crate::mapped_file::sync_open_dir`]).
    pub fn dir_file(&self) -> Arc<File> {
        Arc::clone(&self.dir_file)
    }

    fn locate(&self, pos: u64) -> (u64, u64) {
        let base = pos - pos % self.segment_size;
        (base, pos - base)
    }

    /// Bytes `[pos, pos + len)` if they lie in one existing segment.
    pub fn read(&self, pos: u64, len: usize) -> Option<&[u8]> {
        let (base, off) = self.locate(pos);
        self.segs.get(&base)?.read(off, len)
    }

    /// The existing segment holding `pos` and the offset of `pos` in it (see [`StableHandle`] for
    /// who may read through it; its copy refuses a range past the segment's end).
    pub(crate) fn stable_handle(&self, pos: u64) -> Option<(StableHandle, u64)> {
        let (base, off) = self.locate(pos);
        self.segs.get(&base).map(|f| (f.stable_handle(), off))
    }

    /// Make sure the segment holding `pos` exists; returns true if it was created (the caller
    /// must get the directory fsynced before acknowledging anything written into it).
    pub fn ensure(&mut self, pos: u64) -> Result<bool> {
        let (base, _) = self.locate(pos);
        if self.segs.contains_key(&base) {
            return Ok(false);
        }
        let (f, created) = MappedFile::open(&self.dir.join(file_name(base)), self.segment_size)?;
        self.segs.insert(base, f);
        Ok(created)
    }

    /// The parts of `[pos, to)` (one segment) that may hold data, skipping the file's holes;
    /// nothing if the segment does not exist.
    pub fn data_ranges(&self, pos: u64, to: u64) -> Result<Vec<(u64, u64)>> {
        let (base, off) = self.locate(pos);
        let Some(s) = self.segs.get(&base) else { return Ok(Vec::new()) };
        let ranges = s.data_ranges(off, to.saturating_sub(base))?;
        Ok(ranges.into_iter().map(|(a, b)| (base + a, base + b)).collect())
    }

    /// Allocate the blocks of `[pos, to)` (one segment) if that segment exists; `false` when it
    /// does not (nothing is created: no segment may exist above the log end).
    pub fn reserve(&mut self, pos: u64, to: u64) -> Result<bool> {
        let (base, off) = self.locate(pos);
        let segment_size = self.segment_size;
        let Some(s) = self.segs.get_mut(&base) else { return Ok(false) };
        let len = to.saturating_sub(pos);
        if s.is_reserved(off, len) {
            return Ok(true);
        }
        // Ahead of the need, so that one `posix_fallocate` serves the appends of the next MiB; near
        // a full disk the ahead part may not fit, and the exact need decides.
        let ahead = len.max(SEGMENT_RESERVE_AHEAD_BYTES).min(segment_size - off);
        if ahead > len && s.reserve(off, ahead).is_ok() {
            return Ok(true);
        }
        s.reserve(off, len).map(|()| true)
    }

    /// Write `data` at `pos`; it must lie in one existing segment (see [`Self::ensure`]).
    pub fn write_at(&mut self, pos: u64, data: &[u8]) -> Result<()> {
        let (base, off) = self.locate(pos);
        match self.segs.get_mut(&base) {
            Some(s) => s.write_at(off, data),
            None => Err(StoreError::Contract(format!("write of {} B at {pos} outside a segment", data.len()))),
        }
    }

    /// Sync handles covering `[from, to)`: `(handle, offset in file, length)`.
    pub fn sync_ranges(&self, from: u64, to: u64) -> Vec<(SyncHandle, u64, u64)> {
        let mut out = Vec::new();
        let mut p = from;
        while p < to {
            let (base, off) = self.locate(p);
            let end = (base + self.segment_size).min(to);
            if let Some(s) = self.segs.get(&base) {
                out.push((s.sync_handle(), off, end - p));
            }
            p = end;
        }
        out
    }

    /// Delete the segments for which `pred(base)` holds.
    pub fn remove_where(&mut self, pred: impl Fn(u64) -> bool) -> Result<usize> {
        let doomed: Vec<u64> = self.segs.keys().copied().filter(|b| pred(*b)).collect();
        for base in &doomed {
            if let Some(f) = self.segs.remove(base) {
                let path = f.path().to_path_buf();
                drop(f);
                std::fs::remove_file(&path).map_err(|e| StoreError::io("remove", &path, e))?;
            }
        }
        Ok(doomed.len())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SEG: u64 = 4 << 20;
    const AHEAD: u64 = SEGMENT_RESERVE_AHEAD_BYTES;

    fn reserved(set: &SegmentSet, base: u64) -> (u64, u64) {
        set.segs.get(&base).expect("segment").reserved()
    }

    #[test]
    fn a_reserve_goes_a_step_ahead_and_is_remembered() {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut set = SegmentSet::open(dir.path(), SEG).expect("open");
        assert!(!set.reserve(0, 100).expect("no segment yet"), "nothing is created for a reserve");
        set.ensure(0).expect("segment");
        assert!(set.reserve(0, 100).expect("reserve"));
        assert_eq!(reserved(&set, 0), (0, AHEAD), "a step ahead of the need");
        assert!(set.reserve(100, AHEAD).expect("inside"));
        assert_eq!(reserved(&set, 0), (0, AHEAD), "inside the reserved range: nothing to do");
        assert!(set.reserve(AHEAD - 10, AHEAD + 10).expect("across"));
        assert_eq!(reserved(&set, 0), (0, 2 * AHEAD - 10), "extended from where the need starts");
        assert!(set.reserve(SEG - 10, SEG).expect("tail"));
        assert_eq!(reserved(&set, 0), (SEG - 10, SEG), "never past the segment; a gap starts a new range");
        let big = 3 * AHEAD;
        set.ensure(SEG).expect("second segment");
        assert!(set.reserve(SEG, SEG + big).expect("large need"));
        assert_eq!(reserved(&set, SEG), (0, big), "a need larger than the step is reserved whole");
    }
}
