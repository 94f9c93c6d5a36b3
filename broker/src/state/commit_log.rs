//! `CommitLogFiles`: the pull path's read view of the replicated CommitLog (the raft log store's data
//! segments), implementing [`CommitLogReader`].
//!
//! The raft store writes `<store>/commitlog/<20-digit base>` segments of `segment_size` bytes through
//! a shared mapping (docs/broker.md#the-replicated-commitlog-on-disk); this reader opens the same
//! files read-only and reads records with `pread`, which sees the page cache the mapping writes to.
//! raft/ exposes no byte read at a physical position yet, so the file layout is the contract here.
//!
//! Invariants: reads never pass [`CommitLogFiles::max_offset`], the end of the last *applied* entry
//! (RocketMQ's `DLedgerCommitLog.getMaxOffset()` = committed position), so a consumer never sees an
//! uncommitted byte; a read inside a deleted segment is `None` (MESSAGE_WAS_REMOVING), never an error.

use std::collections::HashMap;
use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::Mutex;
use std::sync::atomic::AtomicI64;
use std::sync::atomic::Ordering;

use bytes::Bytes;
use raftmq_raft::log_store::COMMITLOG_DIR;
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
        }
    }

    /// Raises the committed end to `end` (apply calls it with the end of each applied entry).
    pub fn advance_committed_end(&self, end: i64) {
        self.committed_end.fetch_max(end, Ordering::AcqRel);
    }

    /// Forgets cached handles (a segment was deleted or the log rebased).
    pub fn forget_files(&self) {
        self.files.lock().unwrap_or_else(|p| p.into_inner()).clear();
    }

    fn segment(&self, base: u64) -> Option<Arc<File>> {
        let mut files = self.files.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(f) = files.get(&base) {
            return Some(Arc::clone(f));
        }
        let path = self.dir.join(format!("{base:020}"));
        match File::open(&path) {
            Ok(f) => {
                if files.len() >= OPEN_SEGMENTS_MAX_COUNT {
                    files.clear();
                }
                let f = Arc::new(f);
                files.insert(base, Arc::clone(&f));
                Some(f)
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
            Err(e) => {
                warn!(path = %path.display(), error = %e, "cannot open CommitLog segment");
                None
            }
        }
    }
}

impl CommitLogReader for CommitLogFiles {
    fn max_offset(&self) -> i64 {
        self.committed_end.load(Ordering::Acquire)
    }

    fn read(&self, phy_offset: i64, size: i32) -> Option<Bytes> {
        let start = u64::try_from(phy_offset).ok()?;
        let len = u64::try_from(size).ok().filter(|l| *l > 0)?;
        let end = start.checked_add(len)?;
        if i64::try_from(end).ok()? > self.max_offset() {
            return None;
        }
        let base = start - start % self.segment_size;
        // A record never straddles two segments (the store's roll rule).
        if end > base + self.segment_size {
            return None;
        }
        let file = self.segment(base)?;
        let mut buf = vec![0u8; usize::try_from(len).ok()?];
        match file.read_exact_at(&mut buf, start - base) {
            Ok(()) => Some(Bytes::from(buf)),
            Err(e) => {
                warn!(phy_offset, size, error = %e, "CommitLog read failed");
                None
            }
        }
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
    let head = log.read(offset, 4).ok_or(RecordAtError::NoData(offset))?;
    let not_a_record = |reason: String| RecordAtError::NotARecord { offset, reason };
    let size_word: [u8; 4] = head.as_ref().try_into().map_err(|_| not_a_record("short read".into()))?;
    let size = i32::from_be_bytes(size_word);
    if size <= 4 || size as usize > FRAME_SIZE_MAX_BYTES {
        return Err(not_a_record(format!("TOTALSIZE {size}")));
    }
    let bytes = log.read(offset, size).ok_or_else(|| not_a_record(format!("TOTALSIZE {size} runs past the data")))?;
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
}
