//! `CommitLogFiles`: the pull path's read view of the replicated CommitLog (the raft log store's data
//! segments), implementing [`CommitLogReader`].
//!
//! The raft store writes `<store>/commitlog/<20-digit base>` segments of `segment_size` bytes
//! (docs/broker.md#the-replicated-commitlog-on-disk). Once the replica's log store is attached
//! ([`CommitLogFiles::attach`]), a read of committed bytes is a copy out of the store's own
//! mapping (`LogStore::read_committed_bytes`: no system call, where a `pread` per record was 44 % of a
//! catch-up's broker CPU); otherwise (before the node starts, or bytes the store cannot vouch
//! for) this reader opens the same files read-only and reads them with `pread`, which sees the
//! same page cache.
//!
//! Invariants: reads never pass [`CommitLogFiles::max_offset`], the end of the last *applied* entry
//! (RocketMQ's `DLedgerCommitLog.getMaxOffset()` = committed position), so a consumer never sees an
//! uncommitted byte; a read inside a deleted segment is `None` (MESSAGE_WAS_REMOVING), never an error.
//! A read the OS refused (EIO, EMFILE, ...) is an error instead ([`CommitLogReader::try_read`],
//! [`RecordAtError::Unreadable`]), counted and logged: the record is there, so whoever needs it
//! (delayed delivery, the transaction check) retries later instead of skipping it for good.

use std::collections::HashMap;
use std::fs::File;
use std::io;
use std::os::unix::fs::FileExt;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::Mutex;
use std::sync::OnceLock;
use std::sync::atomic::AtomicI64;
use std::sync::atomic::AtomicU64;
use std::sync::atomic::Ordering;

use bytes::Bytes;
use raftmq_raft::log_store::COMMITLOG_DIR;
use raftmq_raft::log_store::WeakLogStore;
use tracing::warn;

use crate::state::pull::CommitLogReader;
use raftmq_common::limits::FRAME_SIZE_MAX_BYTES;
use raftmq_common::message::record::DecodeOptions;
use raftmq_common::message::record::parse_record;
use thiserror::Error;

/// Segment files opened at once; older handles are dropped when the cache is full.
const OPEN_SEGMENTS_MAX_COUNT: usize = 64;

/// Read access to the committed CommitLog.
#[derive(Debug)]
pub struct CommitLogFiles {
    dir: PathBuf,
    segment_size: u64,
    committed_end: AtomicI64,
    files: Mutex<HashMap<u64, Arc<File>>>,
    /// Reads failed with an I/O error so far (`/metrics`).
    read_errors: AtomicU64,
    /// Failure injection (tests, fault harnesses): while set, every read fails with this kind.
    injected_read_error: Mutex<Option<io::ErrorKind>>,
    /// The replica's log store, once it runs: committed bytes are copied from its mapping.
    raft: OnceLock<WeakLogStore>,
}

impl CommitLogFiles {
    /// A reader over `<store_root>/commitlog` with segments of `segment_size` bytes (> 0).
    pub fn new(store_root: &std::path::Path, segment_size: u64) -> Self {
        assert!(segment_size > 0, "segment size must be positive");
        CommitLogFiles {
            dir: store_root.join(COMMITLOG_DIR),
            segment_size,
            committed_end: AtomicI64::new(0),
            files: Mutex::new(HashMap::new()),
            read_errors: AtomicU64::new(0),
            injected_read_error: Mutex::new(None),
            raft: OnceLock::new(),
        }
    }

    /// Reads committed bytes through `store` from now on (see the module docs); the first call
    /// wins.
    pub fn attach(&self, store: WeakLogStore) {
        let _ = self.raft.set(store);
    }

    /// Makes every read fail with `kind` (an EIO or EMFILE stand-in) until called with `None`:
    /// the seam through which tests inject a transient read failure.
    pub fn inject_read_errors(&self, kind: Option<io::ErrorKind>) {
        *self.injected_read_error.lock().unwrap_or_else(|p| p.into_inner()) = kind;
    }

    /// Reads failed with an I/O error so far.
    pub fn read_errors(&self) -> u64 {
        self.read_errors.load(Ordering::Relaxed)
    }

    /// Raises the committed end to `end` (apply calls it with the end of each applied entry).
    pub fn advance_committed_end(&self, end: i64) {
        self.committed_end.fetch_max(end, Ordering::AcqRel);
    }

    /// Forgets cached handles (a segment was deleted or the log rebased).
    pub fn forget_files(&self) {
        self.files.lock().unwrap_or_else(|p| p.into_inner()).clear();
    }

    /// The segment at `base`: `Ok(None)` when it does not exist (deleted), `Err` when it could
    /// not be opened (EMFILE, EIO, ...).
    fn segment(&self, base: u64) -> io::Result<Option<Arc<File>>> {
        let mut files = self.files.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(f) = files.get(&base) {
            return Ok(Some(Arc::clone(f)));
        }
        let path = self.dir.join(format!("{base:020}"));
        match File::open(&path) {
            Ok(f) => {
                if files.len() >= OPEN_SEGMENTS_MAX_COUNT {
                    files.clear();
                }
                let f = Arc::new(f);
                files.insert(base, Arc::clone(&f));
                Ok(Some(f))
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(io::Error::new(e.kind(), format!("open {}: {e}", path.display()))),
        }
    }

    fn read_at(&self, base: u64, start: u64, len: u64) -> io::Result<Option<Bytes>> {
        if let Some(kind) = *self.injected_read_error.lock().unwrap_or_else(|p| p.into_inner()) {
            return Err(io::Error::new(kind, "injected CommitLog read failure"));
        }
        let len = usize::try_from(len).map_err(io::Error::other)?;
        if let Some(store) = self.raft.get().and_then(WeakLogStore::upgrade)
            && let Some(bytes) = store.read_committed_bytes(start, len)
        {
            return Ok(Some(bytes));
        }
        let Some(file) = self.segment(base)? else { return Ok(None) };
        let mut buf = vec![0u8; len];
        file.read_exact_at(&mut buf, start - base)?;
        Ok(Some(Bytes::from(buf)))
    }
}

impl CommitLogReader for CommitLogFiles {
    fn max_offset(&self) -> i64 {
        self.committed_end.load(Ordering::Acquire)
    }

    fn read(&self, phy_offset: i64, size: i32) -> Option<Bytes> {
        self.try_read(phy_offset, size).ok().flatten()
    }

    fn try_read(&self, phy_offset: i64, size: i32) -> io::Result<Option<Bytes>> {
        let Some((start, len)) = u64::try_from(phy_offset).ok().zip(u64::try_from(size).ok().filter(|l| *l > 0)) else {
            return Ok(None);
        };
        let Some(end) = start.checked_add(len).filter(|e| i64::try_from(*e).is_ok_and(|e| e <= self.max_offset()))
        else {
            return Ok(None);
        };
        let base = start - start % self.segment_size;
        // A record never straddles two segments (the store's roll rule).
        if end > base + self.segment_size {
            return Ok(None);
        }
        self.read_at(base, start, len).inspect_err(|e| {
            self.read_errors.fetch_add(1, Ordering::Relaxed);
            warn!(phy_offset, size, error = %e, "CommitLog read failed; the record is there, retry later");
        })
    }

    fn roll_next_file(&self, phy_offset: i64) -> i64 {
        let seg = i64::try_from(self.segment_size).unwrap_or(i64::MAX);
        phy_offset.saturating_add(seg - phy_offset.rem_euclid(seg))
    }
}

/// Why no record could be read at a physical offset.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum RecordAtError {
    /// Negative, beyond the committed end, or in a segment that no longer exists.
    #[error("no committed data at offset {0}")]
    NoData(i64),
    /// The record may be there but could not be read now (EIO, EMFILE, ...): try again later.
    #[error("cannot read offset {offset} now: {reason}")]
    Unreadable {
        /// The offset asked for.
        offset: i64,
        /// The I/O error.
        reason: String,
    },
    /// Bytes are there but they are not a whole message record starting at this offset.
    #[error("offset {offset} is not the start of a message: {reason}")]
    NotARecord {
        /// The offset asked for.
        offset: i64,
        /// What did not check out.
        reason: String,
    },
}

/// The record starting at `offset` in the committed CommitLog, checked: TOTALSIZE within the frame
/// limit, magic code, body CRC, and PHYSICALOFFSET equal to `offset`.
pub fn record_at(log: &impl CommitLogReader, offset: i64) -> Result<Bytes, RecordAtError> {
    let unreadable = |e: io::Error| RecordAtError::Unreadable { offset, reason: e.to_string() };
    let head = log.try_read(offset, 4).map_err(unreadable)?.ok_or(RecordAtError::NoData(offset))?;
    let not_a_record = |reason: String| RecordAtError::NotARecord { offset, reason };
    let size_word: [u8; 4] = head.as_ref().try_into().map_err(|_| not_a_record("short read".into()))?;
    let size = i32::from_be_bytes(size_word);
    if size <= 4 || size as usize > FRAME_SIZE_MAX_BYTES {
        return Err(not_a_record(format!("TOTALSIZE {size}")));
    }
    let bytes = log
        .try_read(offset, size)
        .map_err(unreadable)?
        .ok_or_else(|| not_a_record(format!("TOTALSIZE {size} runs past the data")))?;
    let record = parse_record(&bytes, DecodeOptions::verify_crc()).map_err(|e| not_a_record(e.to_string()))?;
    if record.commit_log_offset != offset || record.total_size != bytes.len() {
        return Err(not_a_record(format!("the record there says PHYSICALOFFSET {}", record.commit_log_offset)));
    }
    Ok(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_only_committed_bytes_of_existing_segments() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join(COMMITLOG_DIR)).unwrap();
        let mut seg = vec![0u8; 4096];
        seg[100..104].copy_from_slice(b"abcd");
        std::fs::write(dir.path().join(COMMITLOG_DIR).join(format!("{:020}", 4096)), &seg).unwrap();
        let log = CommitLogFiles::new(dir.path(), 4096);
        assert_eq!(log.read(4196, 4), None, "beyond the committed end");
        log.advance_committed_end(8192);
        log.advance_committed_end(10);
        assert_eq!(log.max_offset(), 8192);
        assert_eq!(log.read(4196, 4).as_deref(), Some(&b"abcd"[..]));
        assert_eq!(log.read(100, 4), None, "segment 0 does not exist");
        assert_eq!(log.read(8190, 4), None, "straddles a segment end");
        assert_eq!(log.read(4196, 0), None);
        assert_eq!(log.roll_next_file(4196), 8192);
        assert_eq!(log.roll_next_file(0), 4096);
    }

    /// Hole 5 of issue 31: an I/O error (EMFILE, EIO) read as `None`, "not there", so what needed
    /// the record skipped it for good. It is an error, counted, and the record reads once it clears.
    #[test]
    fn hole5_a_read_error_is_not_a_missing_record() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join(COMMITLOG_DIR)).unwrap();
        std::fs::write(dir.path().join(COMMITLOG_DIR).join(format!("{:020}", 0)), vec![7u8; 4096]).unwrap();
        let log = CommitLogFiles::new(dir.path(), 4096);
        log.advance_committed_end(4096);
        log.inject_read_errors(Some(io::ErrorKind::Other));
        assert!(log.try_read(0, 4).is_err(), "a failed read is an error");
        assert_eq!(log.try_read(4095, 4).unwrap(), None, "past the end is still not there, not an error");
        assert!(matches!(record_at(&log, 0), Err(RecordAtError::Unreadable { offset: 0, .. })));
        assert_eq!(log.read_errors(), 2);
        log.inject_read_errors(None);
        assert_eq!(log.try_read(0, 4).unwrap().as_deref(), Some(&[7u8; 4][..]));
        assert!(matches!(record_at(&log, 0), Err(RecordAtError::NotARecord { .. })));
        assert_eq!(log.read_errors(), 2);
    }
}
