//! ConsumeQueue: per (topic, queueId) the index from queue offset to CommitLog record, in RocketMQ's
//! file format (docs/store-format.md#consumequeue-unit), and [`ConsumeQueueStore`], the lazily
//! built map of them.
//!
//! ```text
//! consumequeue/<topic>/<queueId>/00000000000000000000   units 0 .. U-1      (U = units per file)
//!                                00000000000006000000   units U .. 2U-1     (name = byte offset, 20 digits)
//! unit k at byte 20k of the queue:  phyOffset i64 | size i32 | tagsCode i64   (big-endian)
//! ```
//!
//! Built only by apply from committed entries (docs/raft-log.md#apply), so it never runs ahead of the
//! commit point. Invariants:
//! - units `[min_offset, max_offset)` are readable; unit `max_offset` and every later byte is zero;
//! - phyOffsets strictly increase with the queue offset (asserted on append, verified on recovery);
//! - files are contiguous, each exactly `units_per_file × 20` bytes; a new file is created only when
//!   the previous one is full;
//! - a queue that starts above 0 (after a snapshot install) has filler units (`phy 0, size i32::MAX`,
//!   RocketMQ's `fillPreBlank`) before its first unit in its first file, never all-zero units, because
//!   an all-zero unit ends the queue on recovery.
//!
//! Re-applying a committed entry after a restart re-appends units that may already be there:
//! [`ConsumeQueue::append`] accepts an identical unit at an existing offset and refuses a different one.

use std::collections::HashMap;
use std::fs::File;
use std::fs::OpenOptions;
use std::io;
use std::path::Path;
use std::path::PathBuf;

use memmap2::MmapMut;
use memmap2::MmapOptions;
use raftmq_common::limits::CONSUME_QUEUE_RESERVE_STEP_BYTES;
use raftmq_common::limits::PATH_COMPONENT_MAX_BYTES;
use raftmq_common::message::validate::is_storable_topic_dir;
use thiserror::Error;
use tracing::warn;

use crate::state::disk_space::DiskReservation;

/// Bytes of one unit (`ConsumeQueue.CQ_STORE_UNIT_SIZE`).
pub const CQ_STORE_UNIT_SIZE_BYTES: usize = 20;
/// RocketMQ's default units per file (`mappedFileSizeConsumeQueue` / 20).
pub const UNITS_PER_FILE_DEFAULT_COUNT: u64 = 300_000;
/// Files scanned from the end on recovery, as RocketMQ's `ConsumeQueue.recover` (earlier ones are full).
const RECOVER_TAIL_FILES_COUNT: usize = 3;
/// Length of a file name: the zero-padded byte offset of its first unit.
const FILE_NAME_LEN: usize = 20;

/// One ConsumeQueue unit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct CqUnit {
    /// Physical CommitLog offset of the record.
    pub phy_offset: i64,
    /// TOTALSIZE of the record.
    pub size: i32,
    /// Tag hash code (`tags_code`), or the delivery time for `SCHEDULE_TOPIC_XXXX`.
    pub tags_code: i64,
}

impl CqUnit {
    /// RocketMQ's filler before the first unit of a queue that starts above offset 0.
    pub const FILLER: CqUnit = CqUnit { phy_offset: 0, size: i32::MAX, tags_code: 0 };

    /// The unit's 20 bytes.
    pub fn encode(&self) -> [u8; CQ_STORE_UNIT_SIZE_BYTES] {
        let mut out = [0u8; CQ_STORE_UNIT_SIZE_BYTES];
        out[0..8].copy_from_slice(&self.phy_offset.to_be_bytes());
        out[8..12].copy_from_slice(&self.size.to_be_bytes());
        out[12..20].copy_from_slice(&self.tags_code.to_be_bytes());
        out
    }

    /// Reads a unit from exactly 20 bytes.
    pub fn decode(bytes: &[u8; CQ_STORE_UNIT_SIZE_BYTES]) -> CqUnit {
        let (phy, rest) = bytes.split_at(8);
        let (size, tags) = rest.split_at(4);
        // The splits are of a fixed-size array: the conversions cannot fail.
        CqUnit {
            phy_offset: i64::from_be_bytes(phy.try_into().unwrap_or_default()),
            size: i32::from_be_bytes(size.try_into().unwrap_or_default()),
            tags_code: i64::from_be_bytes(tags.try_into().unwrap_or_default()),
        }
    }

    /// Whether this is the all-zero unit that ends a queue.
    pub fn is_end(&self) -> bool {
        self.phy_offset == 0 && self.size == 0 && self.tags_code == 0
    }

    /// Whether this is a [`CqUnit::FILLER`].
    pub fn is_filler(&self) -> bool {
        *self == CqUnit::FILLER
    }

    /// Whether this can be a message's unit.
    pub fn is_message(&self) -> bool {
        self.phy_offset >= 0 && self.size > 0 && !self.is_filler()
    }
}

/// A run of units inside one file, borrowed from the mapping (the pull path iterates it without copying).
#[derive(Debug, Clone, Copy)]
pub struct CqUnits<'a> {
    first_offset: u64,
    bytes: &'a [u8],
}

impl<'a> CqUnits<'a> {
    /// Units encoded back to back, the first at queue offset `first_offset`; a partial trailing unit is
    /// ignored.
    pub fn from_bytes(first_offset: u64, bytes: &'a [u8]) -> Self {
        let whole = bytes.len() - bytes.len() % CQ_STORE_UNIT_SIZE_BYTES;
        CqUnits { first_offset, bytes: &bytes[..whole] }
    }

    /// Queue offset of the first unit.
    pub fn first_offset(&self) -> u64 {
        self.first_offset
    }

    /// Number of units.
    pub fn len(&self) -> usize {
        self.bytes.len() / CQ_STORE_UNIT_SIZE_BYTES
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.bytes.is_empty()
    }

    /// The `i`-th unit.
    pub fn get(&self, i: usize) -> Option<CqUnit> {
        let start = i.checked_mul(CQ_STORE_UNIT_SIZE_BYTES)?;
        let chunk = self.bytes.get(start..start + CQ_STORE_UNIT_SIZE_BYTES)?;
        chunk.try_into().ok().map(CqUnit::decode)
    }

    /// (queue offset, unit) pairs.
    pub fn iter(&self) -> impl Iterator<Item = (u64, CqUnit)> + 'a {
        let first = self.first_offset;
        self.bytes
            .chunks_exact(CQ_STORE_UNIT_SIZE_BYTES)
            .enumerate()
            .filter_map(move |(i, c)| c.try_into().ok().map(|c| (first + i as u64, CqUnit::decode(c))))
    }
}

/// Why a ConsumeQueue operation failed.
#[derive(Debug, Error)]
pub enum CqError {
    /// A file operation failed.
    #[error("{op} {path}: {source}")]
    Io {
        /// What was attempted.
        op: &'static str,
        /// The file or directory.
        path: PathBuf,
        /// The OS error.
        #[source]
        source: io::Error,
    },
    /// The topic cannot name a directory of its own (`is_storable_topic_dir`): joined to the
    /// root it could name a file outside the store.
    #[error("topic {0:?} is not one safe path component; no ConsumeQueue is made for it")]
    UnsafeTopic(String),
    /// Files on disk break an invariant that a crash cannot explain.
    #[error("ConsumeQueue {path} is corrupt: {detail}")]
    Corrupt {
        /// The queue directory or file.
        path: PathBuf,
        /// What is wrong.
        detail: String,
    },
    /// An append would leave a hole.
    #[error("ConsumeQueue append at offset {offset}, but the next offset is {expected}")]
    Gap {
        /// Offset given.
        offset: u64,
        /// The queue's max offset.
        expected: u64,
    },
    /// A re-append found a different unit at that offset.
    #[error("ConsumeQueue offset {offset} holds {stored:?}, not {new:?}")]
    Conflict {
        /// The offset.
        offset: u64,
        /// The unit already stored.
        stored: CqUnit,
        /// The unit offered.
        new: CqUnit,
    },
    /// The unit's physical offset does not follow the previous unit's.
    #[error("ConsumeQueue phyOffset {phy_offset} at offset {offset} is not above the previous {previous}")]
    NotMonotonic {
        /// The offset.
        offset: u64,
        /// Its phyOffset.
        phy_offset: i64,
        /// The previous unit's phyOffset.
        previous: i64,
    },
    /// Not a message unit (negative offset, non-positive size, or the filler pattern).
    #[error("invalid ConsumeQueue unit {0:?}")]
    InvalidUnit(CqUnit),
}

impl CqError {
    /// Whether the file system is out of space (`ENOSPC`, `EDQUOT`): nothing was written that a
    /// retry would not write again, and the retry succeeds once space is freed.
    pub fn is_disk_full(&self) -> bool {
        matches!(self, CqError::Io { source, .. }
            if matches!(source.raw_os_error(), Some(nix::libc::ENOSPC) | Some(nix::libc::EDQUOT)))
    }
}

fn io_err(op: &'static str, path: &Path, source: io::Error) -> CqError {
    CqError::Io { op, path: path.to_path_buf(), source }
}

/// What [`ConsumeQueue::append`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Appended {
    /// The unit was written at the end.
    New,
    /// The identical unit was already there (re-apply after restart).
    AlreadyPresent,
    /// The offset lies below the queue's minimum (its file was deleted by retention); nothing to do.
    BelowMin,
}

struct CqFile {
    /// Queue offset of the file's first unit.
    base: u64,
    path: PathBuf,
    map: MmapMut,
    /// Units are stored through `map` only where this has allocated blocks.
    space: DiskReservation,
}

impl CqFile {
    fn unit(&self, index_in_file: u64) -> Option<CqUnit> {
        let start = usize::try_from(index_in_file).ok()?.checked_mul(CQ_STORE_UNIT_SIZE_BYTES)?;
        let bytes = self.map.get(start..start.checked_add(CQ_STORE_UNIT_SIZE_BYTES)?)?;
        bytes.try_into().ok().map(CqUnit::decode)
    }

    /// Stores `unit` at a position never written before (an append or a filler), reserving its
    /// blocks first; `Ok(false)` when the index lies outside the file.
    fn write(&mut self, index_in_file: u64, unit: &CqUnit) -> Result<bool, CqError> {
        let Some(range) = self.unit_range(index_in_file) else { return Ok(false) };
        self.space.reserve_through(range.end as u64).map_err(|e| io_err("fallocate", &self.path, e))?;
        self.map[range].copy_from_slice(&unit.encode());
        Ok(true)
    }

    /// Overwrites a unit that was written before, so its page has its block (recovery zeroing a torn
    /// or dropped tail); needs no reservation, and so works on a full disk.
    fn overwrite(&mut self, index_in_file: u64, unit: &CqUnit) {
        if let Some(range) = self.unit_range(index_in_file) {
            self.map[range].copy_from_slice(&unit.encode());
        }
    }

    fn unit_range(&self, index_in_file: u64) -> Option<std::ops::Range<usize>> {
        let start = usize::try_from(index_in_file).ok()?.checked_mul(CQ_STORE_UNIT_SIZE_BYTES)?;
        let end = start.checked_add(CQ_STORE_UNIT_SIZE_BYTES)?;
        (end <= self.map.len()).then_some(start..end)
    }
}

/// One topic-queue's ConsumeQueue. Appends need `&mut self`; readers share `&self`.
pub struct ConsumeQueue {
    dir: PathBuf,
    units_per_file: u64,
    files: Vec<CqFile>,
    min_offset: u64,
    max_offset: u64,
    /// phyOffset of unit `max_offset - 1`, when it exists.
    last_phy_offset: Option<i64>,
    /// Units below this are known to be on disk.
    flushed_offset: u64,
    /// Unique per opened queue in this process: a queue deleted and created again while a
    /// checkpoint synced the old one's files is not marked synced by it.
    incarnation: u64,
}

/// A queue's files to sync for a checkpoint ([`ConsumeQueueStore::unsynced`]).
#[derive(Debug, Clone)]
pub struct UnsyncedQueue {
    /// Topic.
    pub topic: String,
    /// Queue id.
    pub queue_id: i32,
    /// The queue's [`ConsumeQueue::incarnation`].
    pub incarnation: u64,
    /// Files holding units not known to be on disk.
    pub paths: Vec<PathBuf>,
    /// The queue is on disk below this once they are synced.
    pub upto: u64,
}

/// Source of [`ConsumeQueue::incarnation`].
static NEXT_INCARNATION: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);

impl std::fmt::Debug for ConsumeQueue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ConsumeQueue")
            .field("dir", &self.dir)
            .field("files", &self.files.len())
            .field("min_offset", &self.min_offset)
            .field("max_offset", &self.max_offset)
            .finish()
    }
}

impl ConsumeQueue {
    /// Opens (or starts empty) the queue in `dir` (`consumequeue/<topic>/<queueId>`) and recovers its end:
    /// the first all-zero unit ends it; a torn last unit is zeroed; anything else inconsistent is an error.
    pub fn open(dir: impl Into<PathBuf>, units_per_file: u64) -> Result<Self, CqError> {
        let dir = dir.into();
        assert!(units_per_file > 0, "a ConsumeQueue file holds at least one unit");
        let mut queue = ConsumeQueue {
            dir,
            units_per_file,
            files: Vec::new(),
            min_offset: 0,
            max_offset: 0,
            last_phy_offset: None,
            flushed_offset: 0,
            incarnation: NEXT_INCARNATION.fetch_add(1, std::sync::atomic::Ordering::Relaxed),
        };
        queue.load_files()?;
        queue.recover()?;
        // What a crashed process left may still be only in the page cache: the first flush or
        // checkpoint syncs the files once rather than count those units as on disk.
        queue.flushed_offset = queue.min_offset;
        Ok(queue)
    }

    fn file_len_bytes(&self) -> u64 {
        self.units_per_file * CQ_STORE_UNIT_SIZE_BYTES as u64
    }

    fn corrupt(&self, detail: impl Into<String>) -> CqError {
        CqError::Corrupt { path: self.dir.clone(), detail: detail.into() }
    }

    fn load_files(&mut self) -> Result<(), CqError> {
        let entries = match std::fs::read_dir(&self.dir) {
            Ok(entries) => entries,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
            Err(e) => return Err(io_err("read dir", &self.dir, e)),
        };
        let file_len = self.file_len_bytes();
        let mut found: Vec<(u64, PathBuf)> = Vec::new();
        for entry in entries {
            let entry = entry.map_err(|e| io_err("read dir", &self.dir, e))?;
            let name = entry.file_name();
            let Some(name) = name.to_str() else { continue };
            if name.len() != FILE_NAME_LEN || !name.bytes().all(|b| b.is_ascii_digit()) {
                continue;
            }
            let Ok(byte_offset) = name.parse::<u64>() else { continue };
            if byte_offset % file_len != 0 {
                return Err(self.corrupt(format!("file {name} does not start on a {file_len}-byte file boundary")));
            }
            found.push((byte_offset / CQ_STORE_UNIT_SIZE_BYTES as u64, entry.path()));
        }
        found.sort();
        let count = found.len();
        for (i, (base, path)) in found.into_iter().enumerate() {
            let len = std::fs::metadata(&path).map_err(|e| io_err("stat", &path, e))?.len();
            if len == 0 && i + 1 == count {
                // A crash between creating and sizing the newest file: it never held a unit.
                warn!(path = %path.display(), "removing empty ConsumeQueue file left by a crash");
                std::fs::remove_file(&path).map_err(|e| io_err("remove", &path, e))?;
                continue;
            }
            if len != file_len {
                return Err(self.corrupt(format!("{} is {len} bytes, expected {file_len}", path.display())));
            }
            if let Some(prev) = self.files.last()
                && prev.base + self.units_per_file != base
            {
                return Err(self.corrupt(format!("files are not contiguous before {}", path.display())));
            }
            let map = map_file(&path, file_len, false)?;
            let space = DiskReservation::new(&path, file_len, CONSUME_QUEUE_RESERVE_STEP_BYTES);
            self.files.push(CqFile { base, path, map, space });
        }
        Ok(())
    }

    fn recover(&mut self) -> Result<(), CqError> {
        let Some(first) = self.files.first() else { return Ok(()) };
        // Skip the fillers a queue that started above 0 has at its head.
        let mut min = first.base;
        while let Some(unit) = first.unit(min - first.base)
            && unit.is_filler()
        {
            min += 1;
        }
        self.min_offset = min;
        let start_file = self.files.len().saturating_sub(RECOVER_TAIL_FILES_COUNT);
        let mut offset = self.files[start_file].base.max(min);
        let end = self.files.last().map_or(0, |f| f.base + self.units_per_file);
        let mut last_phy: Option<i64> = None;
        while offset < end {
            let unit = self.unit_at_raw(offset).unwrap_or(CqUnit { phy_offset: 0, size: 0, tags_code: 0 });
            if unit.is_end() {
                break;
            }
            let monotonic = last_phy.is_none_or(|prev| unit.phy_offset > prev);
            if !unit.is_message() || !monotonic {
                if self.all_zero_from(offset + 1, end) {
                    warn!(dir = %self.dir.display(), offset, ?unit, "zeroing a torn ConsumeQueue tail unit");
                    self.zero_range(offset, offset + 1)?;
                    break;
                }
                return Err(self.corrupt(format!("invalid unit {unit:?} at offset {offset} before the end")));
            }
            last_phy = Some(unit.phy_offset);
            offset += 1;
        }
        self.max_offset = offset.max(min);
        self.last_phy_offset = if self.max_offset > self.min_offset { last_phy } else { None };
        // Files wholly above the end are left over from a crash mid-roll; they hold nothing.
        while self.files.len() > 1 && self.files.last().is_some_and(|f| f.base > self.max_offset) {
            self.remove_last_file()?;
        }
        Ok(())
    }

    fn all_zero_from(&self, from: u64, end: u64) -> bool {
        (from..end).all(|o| self.unit_at_raw(o).is_none_or(|u| u.is_end()))
    }

    fn file_index(&self, offset: u64) -> Option<usize> {
        let first = self.files.first()?.base;
        if offset < first {
            return None;
        }
        let index = usize::try_from((offset - first) / self.units_per_file).ok()?;
        (index < self.files.len()).then_some(index)
    }

    fn unit_at_raw(&self, offset: u64) -> Option<CqUnit> {
        let file = &self.files[self.file_index(offset)?];
        file.unit(offset - file.base)
    }

    /// Directory of this queue.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Units per file.
    pub fn units_per_file(&self) -> u64 {
        self.units_per_file
    }

    /// First readable offset (`getMinOffsetInQueue`).
    pub fn min_offset(&self) -> u64 {
        self.min_offset
    }

    /// Offset the next unit gets (`getMaxOffsetInQueue`).
    pub fn max_offset(&self) -> u64 {
        self.max_offset
    }

    /// phyOffset of the last unit, if the queue holds any.
    pub fn last_phy_offset(&self) -> Option<i64> {
        self.last_phy_offset
    }

    /// The unit at `offset` when it is in `[min, max)`.
    pub fn unit_at(&self, offset: u64) -> Option<CqUnit> {
        if offset < self.min_offset || offset >= self.max_offset {
            return None;
        }
        self.unit_at_raw(offset)
    }

    /// Up to `max_count` units from `from`, stopping at the end of `from`'s file and at `max_offset`
    /// (RocketMQ's `getIndexBuffer` returns the rest of one file too). `None` when `from` is outside
    /// `[min, max)` or its file is gone (the pull outcome OFFSET_FOUND_NULL).
    pub fn read(&self, from: u64, max_count: usize) -> Option<CqUnits<'_>> {
        if from < self.min_offset || from >= self.max_offset {
            return None;
        }
        let file = &self.files[self.file_index(from)?];
        let file_end = file.base + self.units_per_file;
        let end = file_end.min(self.max_offset).min(from.saturating_add(max_count as u64));
        let start_byte = usize::try_from(from - file.base).ok()? * CQ_STORE_UNIT_SIZE_BYTES;
        let end_byte = usize::try_from(end - file.base).ok()? * CQ_STORE_UNIT_SIZE_BYTES;
        file.map.get(start_byte..end_byte).map(|bytes| CqUnits { first_offset: from, bytes })
    }

    /// First offset of the file after the one holding `offset` (`ConsumeQueue.rollNextFile`).
    pub fn roll_next_file(&self, offset: u64) -> u64 {
        offset + self.units_per_file - offset % self.units_per_file
    }

    /// Writes `unit` at `offset`. `offset == max_offset` appends; a smaller offset must hold the
    /// identical unit (re-apply) or the call fails; a larger one is a [`CqError::Gap`].
    pub fn append(&mut self, offset: u64, unit: CqUnit) -> Result<Appended, CqError> {
        if !unit.is_message() {
            return Err(CqError::InvalidUnit(unit));
        }
        if offset < self.max_offset {
            if offset < self.min_offset {
                return Ok(Appended::BelowMin);
            }
            return match self.unit_at_raw(offset) {
                Some(stored) if stored == unit => Ok(Appended::AlreadyPresent),
                Some(stored) => Err(CqError::Conflict { offset, stored, new: unit }),
                None => Err(self.corrupt(format!("offset {offset} below max {} has no file", self.max_offset))),
            };
        }
        if offset > self.max_offset {
            return Err(CqError::Gap { offset, expected: self.max_offset });
        }
        if let Some(previous) = self.last_phy_offset
            && unit.phy_offset <= previous
        {
            return Err(CqError::NotMonotonic { offset, phy_offset: unit.phy_offset, previous });
        }
        let index = self.ensure_file_for(offset)?;
        let file = &mut self.files[index];
        let written = file.write(offset - file.base, &unit)?;
        assert!(written, "offset {offset} lies in file {} of {} units", file.base, self.units_per_file);
        self.max_offset = offset + 1;
        self.last_phy_offset = Some(unit.phy_offset);
        Ok(Appended::New)
    }

    /// Index of the file holding `offset == max_offset`, creating it (and fillers) if needed.
    fn ensure_file_for(&mut self, offset: u64) -> Result<usize, CqError> {
        if let Some(index) = self.file_index(offset) {
            return Ok(index);
        }
        let base = offset - offset % self.units_per_file;
        if let Some(last) = self.files.last() {
            // Files are created one after another; the caller appends at max_offset only.
            assert_eq!(last.base + self.units_per_file, base, "ConsumeQueue file roll skipped a file");
        }
        let new_dir = !self.dir.exists();
        std::fs::create_dir_all(&self.dir).map_err(|e| io_err("create dir", &self.dir, e))?;
        let path = self.dir.join(format!("{:020}", base * CQ_STORE_UNIT_SIZE_BYTES as u64));
        let map = map_file(&path, self.file_len_bytes(), true)?;
        sync_dir(&self.dir)?;
        if new_dir {
            // `<root>/<topic>/<queueId>`: the new names up the tree must survive a power loss too,
            // or a checkpoint could count units whose directory is gone.
            for dir in self.dir.ancestors().skip(1).take(2) {
                sync_dir(dir)?;
            }
        }
        let space = DiskReservation::new(&path, self.file_len_bytes(), CONSUME_QUEUE_RESERVE_STEP_BYTES);
        let mut file = CqFile { base, path, map, space };
        if self.files.is_empty() {
            for o in base..offset {
                file.write(o - base, &CqUnit::FILLER)?;
            }
        }
        self.files.push(file);
        Ok(self.files.len() - 1)
    }

    /// Empties the queue and makes `offset` its next (and minimum) offset: a snapshot install sets
    /// every queue's start this way (docs/raft-log.md#snapshots).
    pub fn reset_to(&mut self, offset: u64) -> Result<(), CqError> {
        while !self.files.is_empty() {
            self.remove_last_file()?;
        }
        self.min_offset = offset;
        self.max_offset = offset;
        self.last_phy_offset = None;
        self.flushed_offset = offset;
        Ok(())
    }

    /// Drops units at and above `offset` (recovery back to what the CommitLog still holds).
    pub fn truncate_above(&mut self, offset: u64) -> Result<(), CqError> {
        if offset >= self.max_offset {
            return Ok(());
        }
        if offset <= self.min_offset {
            // Nothing readable is left; the queue continues from its minimum (lower offsets are gone).
            return self.reset_to(self.min_offset);
        }
        let old_max = self.max_offset;
        while self.files.last().is_some_and(|f| f.base >= offset && f.base > self.min_offset) {
            self.remove_last_file()?;
        }
        self.zero_range(offset, old_max)?;
        self.max_offset = offset;
        self.flushed_offset = self.flushed_offset.min(offset);
        self.last_phy_offset = self.unit_at_raw(offset - 1).map(|u| u.phy_offset);
        Ok(())
    }

    /// Drops the units whose record does not end at or before `phy_end` (the recovered CommitLog end,
    /// RocketMQ's `truncateDirtyLogicFiles`). Returns the new max offset.
    pub fn truncate_above_phy(&mut self, phy_end: i64) -> Result<u64, CqError> {
        let mut keep = self.max_offset;
        while keep > self.min_offset {
            match self.unit_at_raw(keep - 1) {
                Some(u) if u.phy_offset.saturating_add(i64::from(u.size)) > phy_end => keep -= 1,
                _ => break,
            }
        }
        self.truncate_above(keep)?;
        Ok(self.max_offset)
    }

    fn zero_range(&mut self, from: u64, to: u64) -> Result<(), CqError> {
        let zero = CqUnit { phy_offset: 0, size: 0, tags_code: 0 };
        for offset in from..to {
            if let Some(index) = self.file_index(offset) {
                let file = &mut self.files[index];
                file.overwrite(offset - file.base, &zero);
            }
        }
        for file in &self.files {
            file.map.flush().map_err(|e| io_err("msync", &file.path, e))?;
        }
        Ok(())
    }

    fn remove_last_file(&mut self) -> Result<(), CqError> {
        if let Some(file) = self.files.pop() {
            let path = file.path.clone();
            drop(file);
            std::fs::remove_file(&path).map_err(|e| io_err("remove", &path, e))?;
            sync_dir(&self.dir)?;
        }
        Ok(())
    }

    /// Deletes files whose every unit points below `min_phy_offset` (retention), never the newest file,
    /// then moves `min_offset` to the first unit at or above it (`deleteExpiredFile` + `correctMinOffset`).
    /// Returns the number of files deleted.
    pub fn delete_below_phy(&mut self, min_phy_offset: i64) -> Result<usize, CqError> {
        let mut deleted = 0;
        while self.files.len() > 1 {
            let first = &self.files[0];
            let last_in_file = first.unit(self.units_per_file - 1);
            if !last_in_file.is_some_and(|u| u.is_message() && u.phy_offset < min_phy_offset) {
                break;
            }
            let file = self.files.remove(0);
            let path = file.path.clone();
            drop(file);
            std::fs::remove_file(&path).map_err(|e| io_err("remove", &path, e))?;
            deleted += 1;
        }
        if deleted > 0 {
            sync_dir(&self.dir)?;
        }
        let mut min = self.min_offset.max(self.files.first().map_or(self.max_offset, |f| f.base));
        while min < self.max_offset
            && self.unit_at_raw(min).is_none_or(|u| !u.is_message() || u.phy_offset < min_phy_offset)
        {
            min += 1;
        }
        self.min_offset = min;
        Ok(deleted)
    }

    /// The first offset in `[min, max)` whose unit points at or above `phy_offset`, or `max_offset` when
    /// none does: the queue's next offset as of a CommitLog that ends at `phy_offset` (a snapshot at
    /// the retention boundary). Binary search: phyOffsets strictly increase with the offset.
    pub fn offset_at_or_above_phy(&self, phy_offset: i64) -> u64 {
        let (mut lo, mut hi) = (self.min_offset, self.max_offset);
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            // A missing unit inside [min, max) cannot happen (files are contiguous); treating it as
            // "above" keeps the search total.
            if self.unit_at_raw(mid).is_some_and(|u| u.phy_offset < phy_offset) {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        lo
    }

    /// Raises `min_offset` to the first unit at or above `min_phy_offset` without touching files: the
    /// CommitLog below it is about to be purged, and a pull there must get OFFSET_MOVED rather than
    /// a unit whose record is gone ([`Self::delete_below_phy`] deletes the files afterwards).
    pub fn raise_min_to_phy(&mut self, min_phy_offset: i64) {
        self.min_offset = self.offset_at_or_above_phy(min_phy_offset);
    }

    /// Makes every unit below `max_offset` durable (`msync`). Returns the flushed offset.
    pub fn flush(&mut self) -> Result<u64, CqError> {
        if self.flushed_offset >= self.max_offset {
            return Ok(self.flushed_offset);
        }
        let from = self.flushed_offset.max(self.files.first().map_or(0, |f| f.base));
        for file in &self.files {
            let file_end = file.base + self.units_per_file;
            if file_end <= from || file.base >= self.max_offset {
                continue;
            }
            let start = from.max(file.base) - file.base;
            let end = self.max_offset.min(file_end) - file.base;
            let unit = CQ_STORE_UNIT_SIZE_BYTES as u64;
            let (off, len) = (usize::try_from(start * unit), usize::try_from((end - start) * unit));
            match (off, len) {
                (Ok(off), Ok(len)) => file.map.flush_range(off, len).map_err(|e| io_err("msync", &file.path, e))?,
                _ => file.map.flush().map_err(|e| io_err("msync", &file.path, e))?,
            }
        }
        self.flushed_offset = self.max_offset;
        Ok(self.flushed_offset)
    }

    /// This queue's identity in this process (see [`Self::mark_synced`]).
    pub fn incarnation(&self) -> u64 {
        self.incarnation
    }

    /// The files holding units not known to be on disk yet, and the offset the queue is durable
    /// to once they are synced (a checkpoint syncs them without holding the store's lock).
    pub fn unsynced(&self) -> (Vec<PathBuf>, u64) {
        if self.flushed_offset >= self.max_offset {
            return (Vec::new(), self.flushed_offset);
        }
        let from = self.flushed_offset;
        let paths = self
            .files
            .iter()
            .filter(|f| f.base + self.units_per_file > from && f.base < self.max_offset)
            .map(|f| f.path.clone())
            .collect();
        (paths, self.max_offset)
    }

    /// Records that every unit below `upto` is on disk (after [`Self::unsynced`]'s files were synced).
    pub fn mark_synced(&mut self, upto: u64) {
        self.flushed_offset = self.flushed_offset.max(upto.min(self.max_offset));
    }

    /// Files on disk (for diagnostics and tests).
    pub fn file_count(&self) -> usize {
        self.files.len()
    }
}

fn map_file(path: &Path, len: u64, create: bool) -> Result<MmapMut, CqError> {
    let file: File = OpenOptions::new()
        .read(true)
        .write(true)
        .create(create)
        .truncate(false)
        .open(path)
        .map_err(|e| io_err("open", path, e))?;
    if create {
        file.set_len(len).map_err(|e| io_err("set_len", path, e))?;
    }
    let len_usize = usize::try_from(len)
        .map_err(|_| io_err("mmap", path, io::Error::other("file larger than the address space")))?;
    // SAFETY: the file is ours (the store directory is not shared with other writers) and exactly
    // `len` bytes long (created so or checked by the caller); the mapping is only accessed through
    // the returned `MmapMut`, whose borrows the `ConsumeQueue` API ties to `&self` / `&mut self`.
    unsafe { MmapOptions::new().len(len_usize).map_mut(&file) }.map_err(|e| io_err("mmap", path, e))
}

fn sync_dir(dir: &Path) -> Result<(), CqError> {
    File::open(dir).and_then(|d| d.sync_all()).map_err(|e| io_err("fsync dir", dir, e))
}

/// Every topic-queue's ConsumeQueue under `<root>/consumequeue`, opened on first use.
#[derive(Debug)]
pub struct ConsumeQueueStore {
    root: PathBuf,
    units_per_file: u64,
    queues: HashMap<String, HashMap<i32, ConsumeQueue>>,
}

impl ConsumeQueueStore {
    /// Opens the store under `<store_root>/consumequeue` with every queue already on disk recovered, so
    /// [`crate::state::dispatch::plan`] sees their true max offsets. The normal constructor at startup.
    pub fn open(store_root: &Path, units_per_file: u64) -> Result<Self, CqError> {
        let mut store = ConsumeQueueStore::new(store_root, units_per_file);
        store.open_all()?;
        Ok(store)
    }

    /// A store over `<store_root>/consumequeue` that opens queues only on first use: queues already on
    /// disk read as empty until [`Self::open_all`] or [`Self::get_or_open`] is called for them.
    pub fn new(store_root: &Path, units_per_file: u64) -> Self {
        assert!(units_per_file > 0, "a ConsumeQueue file holds at least one unit");
        ConsumeQueueStore { root: store_root.join("consumequeue"), units_per_file, queues: HashMap::new() }
    }

    /// Directory of one queue.
    pub fn queue_dir(&self, topic: &str, queue_id: i32) -> PathBuf {
        self.root.join(topic).join(queue_id.to_string())
    }

    /// Opens every queue found on disk (startup recovery, so truncation can be applied to all).
    pub fn open_all(&mut self) -> Result<(), CqError> {
        let topics = match std::fs::read_dir(&self.root) {
            Ok(t) => t,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
            Err(e) => return Err(io_err("read dir", &self.root, e)),
        };
        for topic in topics {
            let topic = topic.map_err(|e| io_err("read dir", &self.root, e))?;
            let Some(topic_name) = topic.file_name().to_str().map(str::to_owned) else { continue };
            let queues = std::fs::read_dir(topic.path()).map_err(|e| io_err("read dir", &topic.path(), e))?;
            for queue in queues {
                let queue = queue.map_err(|e| io_err("read dir", &topic.path(), e))?;
                if let Some(queue_id) = queue.file_name().to_str().and_then(|s| s.parse::<i32>().ok()) {
                    self.get_or_open(&topic_name, queue_id)?;
                }
            }
        }
        Ok(())
    }

    /// The queue, opened (or created empty) on first use.
    pub fn get_or_open(&mut self, topic: &str, queue_id: i32) -> Result<&mut ConsumeQueue, CqError> {
        // Every applied message comes here: an open queue costs two lookups, no path and no
        // owned topic (building them was 2.6 % of a 3-node broker's CPU).
        if self.queues.get(topic).is_some_and(|by_id| by_id.contains_key(&queue_id)) {
            let by_id = self.queues.get_mut(topic).expect("checked above");
            return Ok(by_id.get_mut(&queue_id).expect("checked above"));
        }
        // Checked where the name becomes a path, whoever checked it before (a network edge, the
        // apply of a log entry, a snapshot manifest).
        if !is_storable_topic_dir(topic) {
            return Err(CqError::UnsafeTopic(topic.chars().take(PATH_COMPONENT_MAX_BYTES).collect()));
        }
        let dir = self.queue_dir(topic, queue_id);
        let units = self.units_per_file;
        let queue = ConsumeQueue::open(dir, units)?;
        Ok(self.queues.entry(topic.to_owned()).or_default().entry(queue_id).or_insert(queue))
    }

    /// The queue if it has been opened.
    pub fn get(&self, topic: &str, queue_id: i32) -> Option<&ConsumeQueue> {
        self.queues.get(topic)?.get(&queue_id)
    }

    /// (min, max) offsets of a queue; (0, 0) for a queue never written.
    pub fn offsets(&self, topic: &str, queue_id: i32) -> (u64, u64) {
        self.get(topic, queue_id).map_or((0, 0), |q| (q.min_offset(), q.max_offset()))
    }

    /// Every open queue.
    pub fn iter_mut(&mut self) -> impl Iterator<Item = (&str, i32, &mut ConsumeQueue)> {
        self.queues.iter_mut().flat_map(|(t, qs)| qs.iter_mut().map(move |(id, q)| (t.as_str(), *id, q)))
    }

    /// Every open queue, read-only.
    pub fn iter(&self) -> impl Iterator<Item = (&str, i32, &ConsumeQueue)> {
        self.queues.iter().flat_map(|(t, qs)| qs.iter().map(move |(id, q)| (t.as_str(), *id, q)))
    }

    /// Removes a topic's queues and files (topic deletion).
    pub fn delete_topic(&mut self, topic: &str) -> Result<(), CqError> {
        self.queues.remove(topic);
        // Nothing was ever stored under such a name (apply refuses it), and joined to the root it
        // could name the root itself, its parent or an absolute path.
        if !is_storable_topic_dir(topic) {
            return Ok(());
        }
        let dir = self.root.join(topic);
        match std::fs::remove_dir_all(&dir) {
            // Durable, so a checkpoint after the deletion never meets the queues again.
            Ok(()) => sync_dir(&self.root),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(io_err("remove dir", &dir, e)),
        }
    }

    /// [`ConsumeQueue::unsynced`] of every queue that has any.
    pub fn unsynced(&self) -> Vec<UnsyncedQueue> {
        self.iter()
            .filter_map(|(topic, queue_id, q)| {
                let (paths, upto) = q.unsynced();
                (!paths.is_empty()).then(|| UnsyncedQueue {
                    topic: topic.to_owned(),
                    queue_id,
                    incarnation: q.incarnation(),
                    paths,
                    upto,
                })
            })
            .collect()
    }

    /// [`ConsumeQueue::mark_synced`] on the queue `u` was taken from, if it is still the same one.
    pub fn mark_synced(&mut self, u: &UnsyncedQueue) {
        if let Some(q) = self.queues.get_mut(&u.topic).and_then(|qs| qs.get_mut(&u.queue_id))
            && q.incarnation() == u.incarnation
        {
            q.mark_synced(u.upto);
        }
    }

    /// Flushes every queue.
    pub fn flush_all(&mut self) -> Result<(), CqError> {
        for (_, _, q) in self.iter_mut() {
            q.flush()?;
        }
        Ok(())
    }

    /// Truncates every queue to records ending at or before `phy_end` (startup recovery).
    pub fn truncate_above_phy(&mut self, phy_end: i64) -> Result<(), CqError> {
        for (_, _, q) in self.iter_mut() {
            q.truncate_above_phy(phy_end)?;
        }
        Ok(())
    }

    /// Removes every queue and file (a snapshot install replaces the whole state).
    pub fn clear_all(&mut self) -> Result<(), CqError> {
        self.queues.clear();
        match std::fs::remove_dir_all(&self.root) {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(io_err("remove dir", &self.root, e)),
        }
    }

    /// [`ConsumeQueue::raise_min_to_phy`] on every queue.
    pub fn raise_min_to_phy(&mut self, min_phy_offset: i64) {
        for (_, _, q) in self.iter_mut() {
            q.raise_min_to_phy(min_phy_offset);
        }
    }

    /// Retention on every queue.
    pub fn delete_below_phy(&mut self, min_phy_offset: i64) -> Result<usize, CqError> {
        let mut deleted = 0;
        for (_, _, q) in self.iter_mut() {
            deleted += q.delete_below_phy(min_phy_offset)?;
        }
        Ok(deleted)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn unit(phy: i64) -> CqUnit {
        CqUnit { phy_offset: phy, size: 100, tags_code: phy * 7 }
    }

    fn fill(q: &mut ConsumeQueue, from: u64, to: u64) {
        for o in from..to {
            assert_eq!(q.append(o, unit(1000 + o as i64 * 100)).unwrap(), Appended::New);
        }
    }

    #[test]
    fn unit_codec_round_trips() {
        let u = CqUnit { phy_offset: -2, size: 0x0102_0304, tags_code: i64::MIN };
        assert_eq!(CqUnit::decode(&u.encode()), u);
        assert_eq!(&unit(1).encode()[..8], &1i64.to_be_bytes());
        assert!(CqUnit::FILLER.is_filler() && !CqUnit::FILLER.is_message());
    }

    #[test]
    fn append_rolls_files_and_reopen_recovers() {
        let dir = tempfile::tempdir().unwrap();
        let qdir = dir.path().join("T").join("0");
        let mut q = ConsumeQueue::open(&qdir, 4).unwrap();
        assert_eq!((q.min_offset(), q.max_offset()), (0, 0));
        fill(&mut q, 0, 10);
        assert_eq!(q.file_count(), 3);
        assert_eq!(q.max_offset(), 10);
        assert!(qdir.join("00000000000000000000").exists());
        assert!(qdir.join("00000000000000000080").exists());
        assert!(qdir.join("00000000000000000160").exists());
        q.flush().unwrap();
        drop(q);
        let q = ConsumeQueue::open(&qdir, 4).unwrap();
        assert_eq!((q.min_offset(), q.max_offset(), q.file_count()), (0, 10, 3));
        assert_eq!(q.unit_at(9), Some(unit(1900)));
        assert_eq!(q.unit_at(10), None);
        assert_eq!(q.last_phy_offset(), Some(1900));
    }

    #[test]
    fn read_stops_at_file_end_and_max() {
        let dir = tempfile::tempdir().unwrap();
        let mut q = ConsumeQueue::open(dir.path(), 4).unwrap();
        fill(&mut q, 0, 6);
        let units = q.read(1, 32).unwrap();
        assert_eq!(units.first_offset(), 1);
        assert_eq!(units.iter().map(|(o, _)| o).collect::<Vec<_>>(), vec![1, 2, 3]);
        assert_eq!(q.read(4, 32).unwrap().len(), 2);
        assert_eq!(q.read(4, 1).unwrap().get(0), Some(unit(1400)));
        assert!(q.read(6, 1).is_none());
        assert_eq!(q.roll_next_file(5), 8);
    }

    #[test]
    fn append_rules() {
        let dir = tempfile::tempdir().unwrap();
        let mut q = ConsumeQueue::open(dir.path(), 4).unwrap();
        fill(&mut q, 0, 3);
        assert_eq!(q.append(1, unit(1100)).unwrap(), Appended::AlreadyPresent);
        assert!(matches!(q.append(1, unit(1101)), Err(CqError::Conflict { offset: 1, .. })));
        assert!(matches!(q.append(5, unit(9000)), Err(CqError::Gap { offset: 5, expected: 3 })));
        assert!(matches!(q.append(3, unit(1200)), Err(CqError::NotMonotonic { .. })));
        assert!(matches!(q.append(3, CqUnit::FILLER), Err(CqError::InvalidUnit(_))));
        assert!(matches!(
            q.append(3, CqUnit { phy_offset: 5000, size: 0, tags_code: 0 }),
            Err(CqError::InvalidUnit(_))
        ));
    }

    #[test]
    fn reset_to_starts_above_zero_with_fillers_and_survives_reopen() {
        let dir = tempfile::tempdir().unwrap();
        let mut q = ConsumeQueue::open(dir.path(), 4).unwrap();
        q.reset_to(6).unwrap();
        assert_eq!((q.min_offset(), q.max_offset()), (6, 6));
        q.append(6, unit(5000)).unwrap();
        q.append(7, unit(5100)).unwrap();
        q.append(8, unit(5200)).unwrap();
        assert_eq!(q.file_count(), 2);
        assert_eq!(q.unit_at(5), None);
        drop(q);
        let q = ConsumeQueue::open(dir.path(), 4).unwrap();
        assert_eq!((q.min_offset(), q.max_offset()), (6, 9));
        assert_eq!(q.read(6, 10).unwrap().len(), 2);
    }

    #[test]
    fn truncate_above_and_by_phy() {
        let dir = tempfile::tempdir().unwrap();
        let mut q = ConsumeQueue::open(dir.path(), 4).unwrap();
        fill(&mut q, 0, 10); // phy 1000, 1100, ..., 1900; each 100 bytes
        q.truncate_above(5).unwrap();
        assert_eq!((q.max_offset(), q.file_count()), (5, 2));
        assert_eq!(q.last_phy_offset(), Some(1400));
        fill(&mut q, 5, 7);
        // Records ending after 1550 go: 1500 (ends 1600), 1600.
        assert_eq!(q.truncate_above_phy(1550).unwrap(), 5);
        drop(q);
        let q = ConsumeQueue::open(dir.path(), 4).unwrap();
        assert_eq!(q.max_offset(), 5);
    }

    #[test]
    fn retention_deletes_whole_files_and_corrects_min() {
        let dir = tempfile::tempdir().unwrap();
        let mut q = ConsumeQueue::open(dir.path(), 4).unwrap();
        fill(&mut q, 0, 10);
        // Units 0..=5 point below 1600: file 0 (0..4) goes, min moves to 6 inside file 1.
        assert_eq!(q.delete_below_phy(1600).unwrap(), 1);
        assert_eq!((q.min_offset(), q.max_offset(), q.file_count()), (6, 10, 2));
        assert!(q.read(5, 1).is_none());
        // The newest file is never deleted.
        assert_eq!(q.delete_below_phy(i64::MAX).unwrap(), 1);
        assert_eq!((q.min_offset(), q.max_offset(), q.file_count()), (10, 10, 1));
        fill(&mut q, 10, 11);
        assert_eq!(q.read(10, 5).unwrap().len(), 1);
        drop(q);
        let q = ConsumeQueue::open(dir.path(), 4).unwrap();
        assert_eq!((q.min_offset(), q.max_offset()), (8, 11));
    }

    #[test]
    fn offset_at_or_above_phy_is_the_next_offset_of_a_shorter_log() {
        let dir = tempfile::tempdir().unwrap();
        let mut q = ConsumeQueue::open(dir.path(), 4).unwrap();
        assert_eq!(q.offset_at_or_above_phy(0), 0);
        fill(&mut q, 0, 10); // phy 1000, 1100, ..., 1900
        assert_eq!(q.offset_at_or_above_phy(0), 0);
        assert_eq!(q.offset_at_or_above_phy(1000), 0);
        assert_eq!(q.offset_at_or_above_phy(1001), 1);
        assert_eq!(q.offset_at_or_above_phy(1550), 6);
        assert_eq!(q.offset_at_or_above_phy(1900), 9);
        assert_eq!(q.offset_at_or_above_phy(i64::MAX), 10);
        q.raise_min_to_phy(1350);
        assert_eq!((q.min_offset(), q.file_count()), (4, 3), "minimum raised, files kept");
        assert!(q.read(3, 1).is_none());
        q.raise_min_to_phy(0);
        assert_eq!(q.min_offset(), 4, "never lowered");
        q.delete_below_phy(1600).unwrap();
        assert_eq!(q.offset_at_or_above_phy(0), 6, "never below the minimum");
    }

    #[test]
    fn recovery_zeroes_a_torn_tail_and_rejects_corruption_in_the_middle() {
        let dir = tempfile::tempdir().unwrap();
        let mut q = ConsumeQueue::open(dir.path(), 8).unwrap();
        fill(&mut q, 0, 3);
        q.flush().unwrap();
        drop(q);
        let path = dir.path().join("00000000000000000000");
        let mut bytes = std::fs::read(&path).unwrap();
        // A half-written fourth unit: phyOffset bytes only.
        bytes[60..68].copy_from_slice(&7i64.to_be_bytes());
        std::fs::write(&path, &bytes).unwrap();
        let q = ConsumeQueue::open(dir.path(), 8).unwrap();
        assert_eq!(q.max_offset(), 3);
        drop(q);
        let bytes_after = std::fs::read(&path).unwrap();
        assert!(bytes_after[60..80].iter().all(|b| *b == 0), "torn unit zeroed");
        // A non-monotonic unit followed by a valid one is corruption.
        let mut bad = bytes_after.clone();
        bad[20..28].copy_from_slice(&1i64.to_be_bytes());
        std::fs::write(&path, &bad).unwrap();
        assert!(matches!(ConsumeQueue::open(dir.path(), 8), Err(CqError::Corrupt { .. })));
        // A file of the wrong size is corruption too.
        std::fs::write(&path, [0u8; 7]).unwrap();
        assert!(matches!(ConsumeQueue::open(dir.path(), 8), Err(CqError::Corrupt { .. })));
    }

    #[test]
    fn deleting_a_name_no_queue_could_have_leaves_every_directory_alone() {
        let dir = tempfile::tempdir().unwrap();
        let mut store = ConsumeQueueStore::new(dir.path(), 4);
        store.get_or_open("T", 0).unwrap().append(0, unit(500)).unwrap();
        store.flush_all().unwrap();
        for name in ["", ".", "..", "/tmp", "T/..", "x/../T", "../consumequeue/T"] {
            store.delete_topic(name).unwrap();
        }
        for name in ["", ".", "..", "/tmp", "T/../U", "../x", "a\\b"] {
            assert!(matches!(store.get_or_open(name, 0), Err(CqError::UnsafeTopic(_))), "{name:?}");
        }
        assert!(!dir.path().join("x").exists() && !dir.path().join("consumequeue").join("U").exists());
        assert!(dir.path().join("consumequeue").join("T").exists());
        assert_eq!(store.offsets("T", 0), (0, 1));
    }

    #[test]
    fn store_opens_lazily_and_recovers_all() {
        let dir = tempfile::tempdir().unwrap();
        let mut store = ConsumeQueueStore::new(dir.path(), 4);
        assert_eq!(store.offsets("T", 1), (0, 0));
        store.get_or_open("T", 1).unwrap().append(0, unit(500)).unwrap();
        store.get_or_open("U", 0).unwrap().append(0, unit(600)).unwrap();
        store.flush_all().unwrap();
        drop(store);
        let mut store = ConsumeQueueStore::open(dir.path(), 4).unwrap();
        assert_eq!(store.offsets("T", 1), (0, 1));
        assert_eq!(store.offsets("U", 0), (0, 1));
        store.truncate_above_phy(600).unwrap();
        assert_eq!(store.offsets("U", 0), (0, 0));
        assert_eq!(store.iter().count(), 2);
        store.delete_topic("T").unwrap();
        assert!(store.get("T", 1).is_none());
        assert!(!dir.path().join("consumequeue").join("T").exists());
        store.clear_all().unwrap();
        assert_eq!(store.iter().count(), 0);
        assert!(!dir.path().join("consumequeue").exists());
        store.clear_all().unwrap();
    }
}
