//! IndexFile: message lookup by key (`KEYS`, `UNIQ_KEY`) in RocketMQ's file layout, and
//! [`IndexService`], the directory of them.
//!
//! ```text
//! header 40 B : beginTimestamp i64 | endTimestamp i64 | beginPhyOffset i64 | endPhyOffset i64
//!               | hashSlotCount i32 | indexCount i32            (indexCount starts at 1)
//! slots       : slot_count × i32   head entry number of the slot's chain (0 = empty)
//! entries     : entry_count × 20 B keyHash i32 | phyOffset i64 | timeDiff i32 (s since
//!               beginTimestamp) | prevIndex i32               (entry 0 is the null link)
//! ```
//!
//! Built by `MessageStore::apply` (store.rs) for every accepted record ([`record_index_keys`]) under
//! `<storePathRootDir>/index`; read by QUERY_MESSAGE (processors/query.rs).
//!
//! Keys are `topic#key` for each space-separated business key and `topic#UNIQ_KEY`, hashed with
//! `abs(String.hashCode)` (`tag::index_key_hash`); a lookup walks one slot's chain newest first and
//! re-checks the hash and the time range, as RocketMQ's `IndexFile.selectPhyOffset` does. Hashes
//! collide, so callers re-check the key on the record itself.
//!
//! Invariants:
//! - built only by apply, in CommitLog order: `endPhyOffset` only grows, and a record at or below
//!   it is already indexed (re-apply after a restart is skipped, not indexed twice);
//! - an entry's `prevIndex` points to an older entry of the same file (`< indexCount`), so a chain
//!   walk ends; corrupt links end the walk instead of looping or reading out of bounds;
//! - the index is derived data: a file whose header does not fit its size is refused on open and can
//!   be rebuilt from the log.
//!
//! File names are the creation time `yyyyMMddHHmmssSSS` like RocketMQ's, but in UTC (RocketMQ uses
//! local time); the name only orders files.

use std::fs::File;
use std::fs::OpenOptions;
use std::io;
use std::path::Path;
use std::path::PathBuf;

use memmap2::MmapMut;
use memmap2::MmapOptions;
use raftmq_common::limits::INDEX_FILE_RESERVE_STEP_BYTES;
use raftmq_common::message::properties;
use raftmq_common::message::tag::index_key_hash;
use raftmq_common::message::tag::topic_key_hash;
use thiserror::Error;

use crate::state::disk_space::DiskReservation;

/// Header bytes (`IndexHeader.INDEX_HEADER_SIZE`).
pub const INDEX_HEADER_SIZE_BYTES: usize = 40;
/// Bytes per hash slot.
pub const INDEX_SLOT_SIZE_BYTES: usize = 4;
/// Bytes per entry.
pub const INDEX_ENTRY_SIZE_BYTES: usize = 20;
/// RocketMQ's default slots per file (`maxHashSlotNum`).
pub const INDEX_SLOT_DEFAULT_COUNT: u32 = 5_000_000;
/// RocketMQ's default entries per file (`maxIndexNum`).
pub const INDEX_ENTRY_DEFAULT_COUNT: u32 = 20_000_000;
/// Entries a single query may return (`QUERY_MESSAGE`'s `maxNum` is clamped to this).
pub const INDEX_QUERY_RESULTS_MAX_COUNT: usize = 64 * 1024;

/// Sizes of the files an [`IndexService`] creates.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IndexFileSizes {
    /// Hash slots per file.
    pub slot_count: u32,
    /// Entries per file (entry 0 is unused, so `entry_count - 1` keys fit).
    pub entry_count: u32,
}

impl Default for IndexFileSizes {
    fn default() -> Self {
        Self { slot_count: INDEX_SLOT_DEFAULT_COUNT, entry_count: INDEX_ENTRY_DEFAULT_COUNT }
    }
}

impl IndexFileSizes {
    /// Checks that the sizes can form a file: ≥ 1 slot, 2..=i32::MAX entries (entry numbers are
    /// i32 on disk), and a length that can be mapped.
    pub fn validate(&self) -> Result<(), IndexError> {
        if self.slot_count == 0 || self.slot_count > i32::MAX as u32 {
            return Err(IndexError::InvalidSizes(format!("maxHashSlotNum {} is not in 1..=2^31-1", self.slot_count)));
        }
        if self.entry_count < 2 || self.entry_count > i32::MAX as u32 {
            return Err(IndexError::InvalidSizes(format!("maxIndexNum {} is not in 2..=2^31-1", self.entry_count)));
        }
        if usize::try_from(self.file_len_bytes()).is_err() {
            return Err(IndexError::InvalidSizes(format!("{self:?} does not fit in memory")));
        }
        Ok(())
    }

    /// Bytes of one file.
    pub fn file_len_bytes(&self) -> u64 {
        INDEX_HEADER_SIZE_BYTES as u64
            + self.slot_count as u64 * INDEX_SLOT_SIZE_BYTES as u64
            + self.entry_count as u64 * INDEX_ENTRY_SIZE_BYTES as u64
    }
}

/// Why the index could not be read or written.
#[derive(Debug, Error)]
pub enum IndexError {
    /// A file operation failed.
    #[error("index file {path}: {op}: {source}")]
    Io {
        /// What was being done.
        op: &'static str,
        /// The file.
        path: PathBuf,
        /// The OS error.
        #[source]
        source: io::Error,
    },
    /// A file's size or header is not what an index file of its sizes must be.
    #[error("index file {path} is corrupt: {reason}")]
    Corrupt {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        reason: String,
    },
    /// Sizes that cannot form a file.
    #[error("invalid index sizes: {0}")]
    InvalidSizes(String),
}

fn io_err(op: &'static str, path: &Path, source: io::Error) -> IndexError {
    IndexError::Io { op, path: path.to_owned(), source }
}

/// The header fields.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct IndexHeader {
    /// Store time of the first indexed record (ms).
    pub begin_timestamp: i64,
    /// Store time of the last indexed record (ms).
    pub end_timestamp: i64,
    /// Physical offset of the first indexed record.
    pub begin_phy_offset: i64,
    /// Physical offset of the last indexed record.
    pub end_phy_offset: i64,
    /// Slots in use.
    pub hash_slot_count: i32,
    /// Next entry number (starts at 1).
    pub index_count: i32,
}

/// One mapped IndexFile.
pub struct IndexFile {
    path: PathBuf,
    sizes: IndexFileSizes,
    map: MmapMut,
    header: IndexHeader,
    /// Stores through `map` go only where this has allocated blocks: the header when the file is
    /// created, then everything up to each new entry (slots included) before a key is put.
    space: DiskReservation,
}

impl std::fmt::Debug for IndexFile {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("IndexFile").field("path", &self.path).field("header", &self.header).finish()
    }
}

impl IndexFile {
    /// Creates a new empty file (it must not exist).
    pub fn create(path: &Path, sizes: IndexFileSizes) -> Result<Self, IndexError> {
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create_new(true)
            .open(path)
            .map_err(|e| io_err("create", path, e))?;
        let sized_and_mapped = || -> Result<Self, IndexError> {
            file.set_len(sizes.file_len_bytes()).map_err(|e| io_err("set_len", path, e))?;
            let mut index = Self::map(path, &file, sizes)?;
            index.space.reserve_through(INDEX_HEADER_SIZE_BYTES as u64).map_err(|e| io_err("fallocate", path, e))?;
            Ok(index)
        };
        let mut index = match sized_and_mapped() {
            Ok(index) => index,
            Err(e) => {
                // No room (or no mapping): leave no header-less file behind for the next start to
                // reject, nor blocks for the next try to find taken.
                let _ = std::fs::remove_file(path);
                return Err(e);
            }
        };
        index.header = IndexHeader { index_count: 1, ..IndexHeader::default() };
        index.write_header();
        Ok(index)
    }

    /// Opens an existing file, checking its size and header.
    pub fn open(path: &Path, sizes: IndexFileSizes) -> Result<Self, IndexError> {
        let file = OpenOptions::new().read(true).write(true).open(path).map_err(|e| io_err("open", path, e))?;
        let len = file.metadata().map_err(|e| io_err("stat", path, e))?.len();
        if len != sizes.file_len_bytes() {
            return Err(IndexError::Corrupt {
                path: path.to_owned(),
                reason: format!("{len} bytes, expected {}", sizes.file_len_bytes()),
            });
        }
        let mut index = Self::map(path, &file, sizes)?;
        index.header = index.read_header();
        let h = index.header;
        if h.index_count < 1 || h.index_count as u32 > sizes.entry_count || h.hash_slot_count < 0 {
            return Err(IndexError::Corrupt { path: path.to_owned(), reason: format!("bad header {h:?}") });
        }
        Ok(index)
    }

    fn map(path: &Path, file: &File, sizes: IndexFileSizes) -> Result<Self, IndexError> {
        let len = usize::try_from(sizes.file_len_bytes())
            .map_err(|_| IndexError::InvalidSizes(format!("{sizes:?} does not fit in memory")))?;
        // SAFETY: the file is ours (the broker's store directory) and stays open for the mapping's
        // life through memmap2; no other process resizes it while mapped.
        let map = unsafe { MmapOptions::new().len(len).map_mut(file) }.map_err(|e| io_err("mmap", path, e))?;
        // Nothing reserved for a file only read (an older one, or one reopened at start): a full disk
        // must not stop a restart. The first key put reserves the slots too (they precede entries).
        let space = DiskReservation::new(path, sizes.file_len_bytes(), INDEX_FILE_RESERVE_STEP_BYTES);
        Ok(Self { path: path.to_owned(), sizes, map, header: IndexHeader::default(), space })
    }

    /// The file's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The header as last written.
    pub fn header(&self) -> IndexHeader {
        self.header
    }

    /// Whether every entry is used.
    pub fn is_full(&self) -> bool {
        self.header.index_count as u32 >= self.sizes.entry_count
    }

    /// Whether the file holds records stored in `[begin_ms, end_ms]` (`IndexFile.isTimeMatched`).
    pub fn is_time_matched(&self, begin_ms: i64, end_ms: i64) -> bool {
        let h = self.header;
        h.index_count > 1 && h.begin_timestamp <= end_ms && h.end_timestamp >= begin_ms
    }

    /// Indexes `key` for the record at `phy_offset` stored at `store_timestamp_ms`. Returns false
    /// when the file is full (the caller rolls a new one); an error when the disk has no room for
    /// the entry (nothing is written then).
    pub fn put_key(&mut self, key: &str, phy_offset: i64, store_timestamp_ms: i64) -> Result<bool, IndexError> {
        self.put_hash(index_key_hash(key), phy_offset, store_timestamp_ms)
    }

    /// [`Self::put_key`] of a key given by its [`index_key_hash`] (all the file keeps of it).
    pub fn put_hash(&mut self, key_hash: i32, phy_offset: i64, store_timestamp_ms: i64) -> Result<bool, IndexError> {
        if self.is_full() {
            return Ok(false);
        }
        let entry_end = self.entry_pos(self.header.index_count) + INDEX_ENTRY_SIZE_BYTES;
        self.space.reserve_through(entry_end as u64).map_err(|e| io_err("fallocate", &self.path, e))?;
        let slot = key_hash as u32 % self.sizes.slot_count;
        let slot_pos = INDEX_HEADER_SIZE_BYTES + slot as usize * INDEX_SLOT_SIZE_BYTES;
        let mut head = self.read_i32(slot_pos);
        if head <= 0 || head >= self.header.index_count {
            head = 0;
        }
        if self.header.index_count <= 1 {
            self.header.begin_phy_offset = phy_offset;
            self.header.begin_timestamp = store_timestamp_ms;
        }
        let time_diff_s = ((store_timestamp_ms - self.header.begin_timestamp) / 1000).clamp(0, i32::MAX as i64) as i32;
        let entry = self.header.index_count;
        let entry_pos = self.entry_pos(entry);
        self.write_i32(entry_pos, key_hash);
        self.write_i64(entry_pos + 4, phy_offset);
        self.write_i32(entry_pos + 12, time_diff_s);
        self.write_i32(entry_pos + 16, head);
        self.write_i32(slot_pos, entry);
        if head == 0 {
            self.header.hash_slot_count += 1;
        }
        self.header.index_count += 1;
        self.header.end_phy_offset = phy_offset;
        self.header.end_timestamp = store_timestamp_ms;
        self.write_header();
        Ok(true)
    }

    /// Physical offsets of records indexed under `key` and stored in `[begin_ms, end_ms]`, newest
    /// first, at most `max` (`IndexFile.selectPhyOffset`). Appends to `out`.
    pub fn select_phy_offsets(&self, key: &str, max: usize, begin_ms: i64, end_ms: i64, out: &mut Vec<i64>) {
        let key_hash = index_key_hash(key);
        let slot = key_hash as u32 % self.sizes.slot_count;
        let mut next = self.read_i32(INDEX_HEADER_SIZE_BYTES + slot as usize * INDEX_SLOT_SIZE_BYTES);
        // Each step moves to a strictly smaller entry number, so the walk is bounded by indexCount.
        while next > 0 && next < self.header.index_count && out.len() < max {
            let pos = self.entry_pos(next);
            let hash_read = self.read_i32(pos);
            let phy_read = self.read_i64(pos + 4);
            let time_diff_s = self.read_i32(pos + 12) as i64;
            let prev = self.read_i32(pos + 16);
            let time_read = self.header.begin_timestamp + time_diff_s * 1000;
            if hash_read == key_hash && begin_ms <= time_read && time_read <= end_ms {
                out.push(phy_read);
            }
            if prev <= 0 || prev >= next || time_read < begin_ms {
                break;
            }
            next = prev;
        }
    }

    /// Writes dirty pages to disk.
    pub fn flush(&self) -> Result<(), IndexError> {
        self.map.flush().map_err(|e| io_err("msync", &self.path, e))
    }

    fn entry_pos(&self, entry: i32) -> usize {
        INDEX_HEADER_SIZE_BYTES
            + self.sizes.slot_count as usize * INDEX_SLOT_SIZE_BYTES
            + entry as usize * INDEX_ENTRY_SIZE_BYTES
    }

    fn read_header(&self) -> IndexHeader {
        IndexHeader {
            begin_timestamp: self.read_i64(0),
            end_timestamp: self.read_i64(8),
            begin_phy_offset: self.read_i64(16),
            end_phy_offset: self.read_i64(24),
            hash_slot_count: self.read_i32(32),
            index_count: self.read_i32(36),
        }
    }

    fn write_header(&mut self) {
        let h = self.header;
        self.write_i64(0, h.begin_timestamp);
        self.write_i64(8, h.end_timestamp);
        self.write_i64(16, h.begin_phy_offset);
        self.write_i64(24, h.end_phy_offset);
        self.write_i32(32, h.hash_slot_count);
        self.write_i32(36, h.index_count);
    }

    // Positions passed below are computed from the validated sizes and entry numbers checked
    // against indexCount (itself checked against the file's size on open), so they are in bounds.
    fn read_i32(&self, pos: usize) -> i32 {
        let mut b = [0u8; 4];
        b.copy_from_slice(&self.map[pos..pos + 4]);
        i32::from_be_bytes(b)
    }

    fn read_i64(&self, pos: usize) -> i64 {
        let mut b = [0u8; 8];
        b.copy_from_slice(&self.map[pos..pos + 8]);
        i64::from_be_bytes(b)
    }

    fn write_i32(&mut self, pos: usize, v: i32) {
        self.map[pos..pos + 4].copy_from_slice(&v.to_be_bytes());
    }

    fn write_i64(&mut self, pos: usize, v: i64) {
        self.map[pos..pos + 8].copy_from_slice(&v.to_be_bytes());
    }
}

/// The keys RocketMQ indexes for a record: `topic#key` per business key and `topic#UNIQ_KEY`.
pub fn index_keys<'a>(
    topic: &'a str,
    keys: impl Iterator<Item = &'a str> + 'a,
    uniq_key: Option<&'a str>,
) -> impl Iterator<Item = String> + 'a {
    keys.filter(|k| !k.is_empty()).chain(uniq_key).map(move |k| format!("{topic}#{k}"))
}

/// The keys of a stored record, from its topic and wire-form properties (`KEYS`, `UNIQ_KEY`), as
/// RocketMQ's `IndexService.buildIndex` builds them.
pub fn record_index_keys(topic: &str, properties: &str) -> Vec<String> {
    let (mut keys, mut uniq) = (None, None);
    for (name, value) in
        properties.split(properties::PROPERTY_SEPARATOR).filter_map(|p| p.split_once(properties::NAME_VALUE_SEPARATOR))
    {
        match name {
            properties::KEYS => keys = Some(value),
            properties::UNIQ_KEY => uniq = Some(value).filter(|u| !u.is_empty()),
            _ => {}
        }
    }
    index_keys(topic, keys.unwrap_or("").split(properties::KEY_SEPARATOR), uniq).collect()
}

/// The [`index_key_hash`]es of [`record_index_keys`], in the same order, into `out` (cleared
/// first): what the apply path indexes, with no key string built.
pub fn record_index_key_hashes(topic: &str, properties: &str, out: &mut Vec<i32>) {
    out.clear();
    let (mut keys, mut uniq) = (None, None);
    for (name, value) in
        properties.split(properties::PROPERTY_SEPARATOR).filter_map(|p| p.split_once(properties::NAME_VALUE_SEPARATOR))
    {
        match name {
            properties::KEYS => keys = Some(value),
            properties::UNIQ_KEY => uniq = Some(value).filter(|u| !u.is_empty()),
            _ => {}
        }
    }
    let keys = keys.unwrap_or("").split(properties::KEY_SEPARATOR).filter(|k| !k.is_empty());
    out.extend(keys.chain(uniq).map(|k| topic_key_hash(topic, k)));
}

/// The index directory: files oldest to newest, the newest one written.
#[derive(Debug)]
pub struct IndexService {
    dir: PathBuf,
    sizes: IndexFileSizes,
    files: Vec<IndexFile>,
}

impl IndexService {
    /// Opens `dir` (created if missing) and every index file in it, oldest first.
    pub fn open(dir: &Path, sizes: IndexFileSizes) -> Result<Self, IndexError> {
        sizes.validate()?;
        std::fs::create_dir_all(dir).map_err(|e| io_err("create_dir_all", dir, e))?;
        let mut names: Vec<String> = std::fs::read_dir(dir)
            .map_err(|e| io_err("read_dir", dir, e))?
            .filter_map(|e| e.ok())
            .filter_map(|e| e.file_name().into_string().ok())
            .filter(|n| n.len() == 17 && n.bytes().all(|b| b.is_ascii_digit()))
            .collect();
        names.sort();
        let mut files = Vec::with_capacity(names.len());
        for name in names {
            files.push(IndexFile::open(&dir.join(name), sizes)?);
        }
        Ok(Self { dir: dir.to_owned(), sizes, files })
    }

    /// The largest physical offset indexed so far (-1 when empty): apply skips records at or
    /// below it, so re-applying the log after a restart never indexes a record twice.
    pub fn end_phy_offset(&self) -> i64 {
        self.files.iter().rev().find(|f| f.header().index_count > 1).map_or(-1, |f| f.header().end_phy_offset)
    }

    /// Indexes one record under each of `keys`. Records must arrive in physical-offset order;
    /// ones already indexed are skipped.
    pub fn put(
        &mut self,
        keys: impl IntoIterator<Item = String>,
        phy_offset: i64,
        store_timestamp_ms: i64,
        now_ms: i64,
    ) -> Result<(), IndexError> {
        let hashes: Vec<i32> = keys.into_iter().map(|k| index_key_hash(&k)).collect();
        self.put_hashes(&hashes, phy_offset, store_timestamp_ms, now_ms)
    }

    /// [`Self::put`] of keys given by their [`index_key_hash`]es.
    pub fn put_hashes(
        &mut self,
        hashes: &[i32],
        phy_offset: i64,
        store_timestamp_ms: i64,
        now_ms: i64,
    ) -> Result<(), IndexError> {
        if phy_offset <= self.end_phy_offset() {
            return Ok(());
        }
        for &key_hash in hashes {
            let fits = match self.files.last_mut() {
                Some(f) => f.put_hash(key_hash, phy_offset, store_timestamp_ms)?,
                None => false,
            };
            if !fits {
                self.roll(now_ms)?;
                let file =
                    self.files.last_mut().ok_or_else(|| IndexError::InvalidSizes("no file after roll".into()))?;
                if !file.put_hash(key_hash, phy_offset, store_timestamp_ms)? {
                    return Err(IndexError::InvalidSizes(format!("{:?} cannot hold one key", self.sizes)));
                }
            }
        }
        Ok(())
    }

    fn roll(&mut self, now_ms: i64) -> Result<(), IndexError> {
        if let Some(last) = self.files.last() {
            last.flush()?;
        }
        // Names must be unique and increasing even when two files start in the same millisecond.
        let mut ms = now_ms;
        let mut path = self.dir.join(file_name_utc(ms));
        while path.exists() || self.files.last().is_some_and(|f| f.path() >= path.as_path()) {
            ms += 1;
            path = self.dir.join(file_name_utc(ms));
        }
        self.files.push(IndexFile::create(&path, self.sizes)?);
        Ok(())
    }

    /// Physical offsets of records indexed under `key` stored in `[begin_ms, end_ms]`, newest
    /// first, at most `max` (`IndexService.queryOffset`).
    pub fn query(&self, key: &str, max: usize, begin_ms: i64, end_ms: i64) -> Vec<i64> {
        let max = max.min(INDEX_QUERY_RESULTS_MAX_COUNT);
        let mut out = Vec::new();
        for file in self.files.iter().rev() {
            if out.len() >= max {
                break;
            }
            if file.is_time_matched(begin_ms, end_ms) {
                file.select_phy_offsets(key, max, begin_ms, end_ms, &mut out);
            }
        }
        out
    }

    /// Store time and physical offset of the newest indexed record (`indexLastUpdateTimestamp`,
    /// `indexLastUpdatePhyoffset` of QUERY_MESSAGE's response).
    pub fn last_update(&self) -> (i64, i64) {
        self.files
            .iter()
            .rev()
            .find(|f| f.header().index_count > 1)
            .map_or((0, 0), |f| (f.header().end_timestamp, f.header().end_phy_offset))
    }

    /// Deletes files whose every record lies below `min_phy_offset` (retention), keeping the
    /// newest file. Returns the paths deleted.
    pub fn delete_below(&mut self, min_phy_offset: i64) -> Result<Vec<PathBuf>, IndexError> {
        let mut deleted = Vec::new();
        while self.files.len() > 1 && self.files[0].header().end_phy_offset < min_phy_offset {
            let file = self.files.remove(0);
            let path = file.path().to_owned();
            drop(file);
            std::fs::remove_file(&path).map_err(|e| io_err("remove", &path, e))?;
            deleted.push(path);
        }
        Ok(deleted)
    }

    /// Deletes every file (a snapshot install replaces the whole state; the index is rebuilt from
    /// the entries that follow). Returns the paths deleted.
    pub fn clear(&mut self) -> Result<Vec<PathBuf>, IndexError> {
        let mut deleted = Vec::with_capacity(self.files.len());
        for file in self.files.drain(..) {
            let path = file.path().to_owned();
            drop(file);
            std::fs::remove_file(&path).map_err(|e| io_err("remove", &path, e))?;
            deleted.push(path);
        }
        Ok(deleted)
    }

    /// Flushes every file.
    pub fn flush(&self) -> Result<(), IndexError> {
        self.files.iter().try_for_each(IndexFile::flush)
    }

    /// The file keys are being put into: the only one that may hold unsynced writes (a roll
    /// flushes the file before it), synced by a checkpoint without holding the service's lock.
    pub fn current_path(&self) -> Option<PathBuf> {
        self.files.last().map(|f| f.path().to_owned())
    }

    /// Number of files.
    pub fn file_count(&self) -> usize {
        self.files.len()
    }
}

/// `yyyyMMddHHmmssSSS` of `ms` since the epoch, in UTC.
pub fn file_name_utc(ms: i64) -> String {
    let ms = ms.max(0);
    let (days, ms_of_day) = (ms.div_euclid(86_400_000), ms.rem_euclid(86_400_000));
    let (y, m, d) = civil_from_days(days);
    let (h, min, s, milli) = (ms_of_day / 3_600_000, ms_of_day / 60_000 % 60, ms_of_day / 1000 % 60, ms_of_day % 1000);
    format!("{y:04}{m:02}{d:02}{h:02}{min:02}{s:02}{milli:03}")
}

/// Days since 1970-01-01 to (year, month, day) in the proleptic Gregorian calendar
/// (H. Hinnant's `civil_from_days`).
fn civil_from_days(days: i64) -> (i64, i64, i64) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    (y, m, d)
}

#[cfg(test)]
mod tests {
    use super::*;

    const SMALL: IndexFileSizes = IndexFileSizes { slot_count: 7, entry_count: 6 };

    #[test]
    fn file_names_are_utc_timestamps() {
        assert_eq!(file_name_utc(0), "19700101000000000");
        // 2023-11-14T22:13:20.123Z
        assert_eq!(file_name_utc(1_700_000_000_123), "20231114221320123");
        // A leap day.
        assert_eq!(file_name_utc(951_782_400_000), "20000229000000000");
    }

    #[test]
    fn layout_matches_rocketmq() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("20240101000000000");
        let mut f = IndexFile::create(&path, SMALL).unwrap();
        assert!(f.put_key("T#k1", 1000, 5_000).unwrap());
        let bytes = std::fs::read(&path).unwrap();
        assert_eq!(bytes.len() as u64, 40 + 7 * 4 + 6 * 20);
        let hash = index_key_hash("T#k1");
        let slot = hash as usize % 7;
        // Slot → entry 1; entry 1 = hash, phy 1000, timeDiff 0, prev 0; indexCount 2, slots 1.
        assert_eq!(&bytes[40 + slot * 4..44 + slot * 4], &1i32.to_be_bytes());
        let e1 = 40 + 7 * 4 + 20;
        assert_eq!(&bytes[e1..e1 + 4], &hash.to_be_bytes());
        assert_eq!(&bytes[e1 + 4..e1 + 12], &1000i64.to_be_bytes());
        assert_eq!(&bytes[e1 + 12..e1 + 20], &[0u8; 8]);
        assert_eq!(&bytes[32..36], &1i32.to_be_bytes());
        assert_eq!(&bytes[36..40], &2i32.to_be_bytes());
        assert_eq!(&bytes[16..24], &1000i64.to_be_bytes());
    }

    #[test]
    fn query_walks_chains_newest_first_within_time_range() {
        let dir = tempfile::tempdir().unwrap();
        let mut svc = IndexService::open(dir.path(), IndexFileSizes { slot_count: 1, entry_count: 64 }).unwrap();
        // One slot: every key shares a chain, so the hash re-check is exercised.
        for (i, key) in ["T#a", "T#b", "T#a", "T#c", "T#a"].iter().enumerate() {
            svc.put([key.to_string()], 100 * (i as i64 + 1), 10_000 * (i as i64 + 1), 0).unwrap();
        }
        assert_eq!(svc.query("T#a", 10, 0, i64::MAX), vec![500, 300, 100]);
        assert_eq!(svc.query("T#a", 2, 0, i64::MAX), vec![500, 300]);
        assert_eq!(svc.query("T#a", 10, 25_000, 35_000), vec![300]);
        assert_eq!(svc.query("T#zzz", 10, 0, i64::MAX), Vec::<i64>::new());
        assert_eq!(svc.last_update(), (50_000, 500));
    }

    #[test]
    fn files_roll_reopen_skip_reapplied_records_and_retire() {
        let dir = tempfile::tempdir().unwrap();
        let mut svc = IndexService::open(dir.path(), SMALL).unwrap();
        // 5 usable entries per file; 12 records × 1 key → 3 files.
        for i in 0..12i64 {
            svc.put(index_keys("T", ["k"].into_iter(), None), i * 10, 1_000 * i, 1_000 + i).unwrap();
        }
        assert_eq!(svc.file_count(), 3);
        assert_eq!(svc.query("T#k", 100, 0, i64::MAX).len(), 12);
        drop(svc);

        let mut svc = IndexService::open(dir.path(), SMALL).unwrap();
        assert_eq!(svc.end_phy_offset(), 110);
        // A re-applied record is not indexed twice.
        svc.put(index_keys("T", ["k"].into_iter(), None), 110, 11_000, 5_000).unwrap();
        assert_eq!(svc.query("T#k", 100, 0, i64::MAX).len(), 12);
        svc.put(index_keys("T", ["k", "other"].into_iter(), Some("UNIQ")), 120, 12_000, 5_000).unwrap();
        assert_eq!(svc.query("T#UNIQ", 10, 0, i64::MAX), vec![120]);
        assert_eq!(svc.query("T#other", 10, 0, i64::MAX), vec![120]);

        // Records below 55 lived in the first file (phy 0..40) → it goes; the newest always stays.
        let deleted = svc.delete_below(55).unwrap();
        assert_eq!(deleted.len(), 1);
        assert_eq!(svc.query("T#k", 100, 0, i64::MAX).len(), 8);

        // A snapshot install starts the index over.
        assert_eq!(svc.clear().unwrap().len(), 2);
        assert_eq!((svc.file_count(), svc.end_phy_offset()), (0, -1));
        assert!(std::fs::read_dir(dir.path()).unwrap().next().is_none());
        svc.put(index_keys("T", ["k"].into_iter(), None), 500, 13_000, 6_000).unwrap();
        assert_eq!(svc.query("T#k", 100, 0, i64::MAX), vec![500]);
    }

    #[test]
    fn record_keys_are_topic_prefixed_business_keys_then_uniq_key() {
        let props = "KEYS\u{1}k1  k2\u{2}TAGS\u{1}a\u{2}UNIQ_KEY\u{1}ABCD";
        assert_eq!(record_index_keys("T", props), ["T#k1", "T#k2", "T#ABCD"]);
        assert_eq!(record_index_keys("T", "TAGS\u{1}a"), Vec::<String>::new());
        assert_eq!(record_index_keys("T", "garbage\u{2}\u{1}"), Vec::<String>::new());
        let mut hashes = vec![7];
        for props in [props, "TAGS\u{1}a", "garbage\u{2}\u{1}", "UNIQ_KEY\u{1}\u{2}KEYS\u{1} é x "] {
            record_index_key_hashes("主题", props, &mut hashes);
            let keys = record_index_keys("主题", props);
            assert_eq!(hashes, keys.iter().map(|k| index_key_hash(k)).collect::<Vec<_>>(), "{props:?}");
        }
    }

    #[test]
    fn sizes_are_validated() {
        assert!(SMALL.validate().is_ok());
        assert!(IndexFileSizes { slot_count: 0, entry_count: 6 }.validate().is_err());
        assert!(IndexFileSizes { slot_count: 1, entry_count: 1 }.validate().is_err());
        assert!(IndexFileSizes { slot_count: 1, entry_count: u32::MAX }.validate().is_err());
    }

    #[test]
    fn corrupt_files_are_refused_not_served() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("20240101000000000");
        drop(IndexFile::create(&path, SMALL).unwrap());
        let mut bytes = std::fs::read(&path).unwrap();
        bytes[36..40].copy_from_slice(&(-5i32).to_be_bytes());
        std::fs::write(&path, &bytes).unwrap();
        assert!(matches!(IndexFile::open(&path, SMALL), Err(IndexError::Corrupt { .. })));
        std::fs::write(&path, &bytes[..100]).unwrap();
        assert!(matches!(IndexFile::open(&path, SMALL), Err(IndexError::Corrupt { .. })));
    }

    #[test]
    fn corrupt_links_end_the_walk() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("20240101000000000");
        let mut f = IndexFile::create(&path, IndexFileSizes { slot_count: 1, entry_count: 8 }).unwrap();
        for i in 0..3 {
            f.put_key("T#a", i, 0).unwrap();
        }
        // Point entry 3's prev at itself and at a future entry: both must end the walk.
        let e3 = 40 + 4 + 3 * 20;
        f.write_i32(e3 + 16, 3);
        let mut out = Vec::new();
        f.select_phy_offsets("T#a", 10, 0, i64::MAX, &mut out);
        assert_eq!(out, vec![2]);
        f.write_i32(e3 + 16, 7);
        out.clear();
        f.select_phy_offsets("T#a", 10, 0, i64::MAX, &mut out);
        assert_eq!(out, vec![2]);
    }
}
