//! `lose-unfsynced`: what a power loss does to a node whose process was just killed -9 — every byte
//! of its CommitLog past the last fsync is gone (docs/reliability.md#losing-unsynced-data).
//!
//! The raft store records a durable watermark in `<store>/raft-meta` after every group-commit sync
//! (`raftmq_raft::meta::read_durable_pos`, a lower bound of the fsynced end; the page cache survives
//! SIGKILL, so it is current). The data segments `<store>/commitlog/<20-digit base>` are preallocated
//! mapped files, so "cut back" means: zero every byte at or past the watermark (files keep their size,
//! as a preallocated file whose dirty pages were never written back). Segments wholly past it become
//! all zeros, which recovery reads as the end of the log.
//!
//! Not cut: `raftindex/` (recovery rebuilds it from the segments), ConsumeQueues and offsets (derived
//! from the log on restart; docs/raft-log.md#crash-rule), and `raft-meta` itself (its slots are fsynced on
//! every write).
//!
//! Invariant: call only on a killed node (a live one would rewrite what was cut).

use std::fs::OpenOptions;
use std::io::Seek;
use std::io::SeekFrom;
use std::io::Write;
use std::path::Path;

use raftmq_raft::log_store::COMMITLOG_DIR;
use raftmq_raft::meta::META_FILE;

/// Bytes zeroed per write.
const ZERO_CHUNK_BYTES: usize = 1 << 20;

/// What a cut did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct CutReport {
    /// The durable watermark the files were cut back to.
    pub durable_pos: u64,
    /// Segments touched.
    pub segments: usize,
    /// Bytes zeroed (including bytes that were zero already).
    pub bytes_zeroed: u64,
}

/// Why a cut failed.
#[derive(Debug, thiserror::Error)]
pub enum CutError {
    /// The raft store's meta file could not be read.
    #[error("reading the durable watermark in {dir}: {source}")]
    Meta {
        /// The store directory.
        dir: String,
        /// The cause.
        source: raftmq_raft::StoreError,
    },
    /// A segment could not be listed or written.
    #[error("{path}: {source}")]
    Io {
        /// The file or directory.
        path: String,
        /// The cause.
        source: std::io::Error,
    },
}

fn zero_from(path: &Path, from: u64) -> Result<u64, CutError> {
    let io = |source| CutError::Io { path: path.display().to_string(), source };
    let mut f = OpenOptions::new().write(true).open(path).map_err(io)?;
    let len = f.metadata().map_err(io)?.len();
    if from >= len {
        return Ok(0);
    }
    f.seek(SeekFrom::Start(from)).map_err(io)?;
    let zeros = vec![0u8; ZERO_CHUNK_BYTES];
    let mut left = len - from;
    while left > 0 {
        let n = usize::try_from(left).unwrap_or(usize::MAX).min(ZERO_CHUNK_BYTES);
        f.write_all(&zeros[..n]).map_err(io)?;
        left -= n as u64;
    }
    // The cut itself must survive: later faults assume it happened.
    f.sync_all().map_err(io)?;
    Ok(len - from)
}

/// The data segments of a `commitlog/` listing, `(base position, path)` in position order: files
/// named by 20 digits, anything else skipped.
pub(crate) fn segments_of(listing: std::fs::ReadDir) -> std::io::Result<Vec<(u64, std::path::PathBuf)>> {
    let mut segments = Vec::new();
    for entry in listing {
        let entry = entry?;
        let name = entry.file_name();
        let Some(base) = name.to_str().filter(|n| n.len() == 20).and_then(|n| n.parse::<u64>().ok()) else { continue };
        segments.push((base, entry.path()));
    }
    segments.sort();
    Ok(segments)
}

/// Zeroes every CommitLog byte of the store at `store_dir` at or past its durable watermark.
/// A store that was never opened (no meta file) is left alone.
pub fn cut_to_durable(store_dir: &Path) -> Result<CutReport, CutError> {
    if !store_dir.join(META_FILE).exists() {
        return Ok(CutReport::default());
    }
    let durable_pos = raftmq_raft::meta::read_durable_pos(store_dir)
        .map_err(|source| CutError::Meta { dir: store_dir.display().to_string(), source })?;
    let seg_dir = store_dir.join(COMMITLOG_DIR);
    let mut report = CutReport { durable_pos, ..CutReport::default() };
    let entries = match std::fs::read_dir(&seg_dir) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(report),
        Err(source) => return Err(CutError::Io { path: seg_dir.display().to_string(), source }),
    };
    let segments =
        segments_of(entries).map_err(|source| CutError::Io { path: seg_dir.display().to_string(), source })?;
    for (base, path) in segments {
        let len =
            std::fs::metadata(&path).map_err(|source| CutError::Io { path: path.display().to_string(), source })?.len();
        if base.saturating_add(len) <= durable_pos {
            continue;
        }
        report.bytes_zeroed += zero_from(&path, durable_pos.saturating_sub(base))?;
        report.segments += 1;
    }
    Ok(report)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bytes_past_the_watermark_are_zeroed_and_earlier_ones_kept() -> anyhow::Result<()> {
        let dir = tempfile::tempdir()?;
        let store = dir.path();
        // A real meta file with a watermark of 1500, written through the raft crate.
        let (mut meta, _) = raftmq_raft::meta::MetaFile::open(store, &raftmq_raft::meta::MetaState::new(1024))?;
        meta.write_watermark(1500)?;
        drop(meta);
        let seg = store.join(COMMITLOG_DIR);
        std::fs::create_dir_all(&seg)?;
        for base in [0u64, 1024, 2048] {
            std::fs::write(seg.join(format!("{base:020}")), vec![0xAB; 1024])?;
        }
        let report = cut_to_durable(store)?;
        assert_eq!(report, CutReport { durable_pos: 1500, segments: 2, bytes_zeroed: (2048 - 1500) + 1024 });
        let first = std::fs::read(seg.join(format!("{:020}", 0)))?;
        let second = std::fs::read(seg.join(format!("{:020}", 1024)))?;
        let third = std::fs::read(seg.join(format!("{:020}", 2048)))?;
        assert!(first.iter().all(|&b| b == 0xAB));
        assert!(second[..1500 - 1024].iter().all(|&b| b == 0xAB));
        assert!(second[1500 - 1024..].iter().all(|&b| b == 0));
        assert!(third.iter().all(|&b| b == 0));
        assert_eq!(second.len(), 1024, "files keep their preallocated size");
        Ok(())
    }

    #[test]
    fn a_store_that_never_started_is_left_alone() -> anyhow::Result<()> {
        let dir = tempfile::tempdir()?;
        assert_eq!(cut_to_durable(dir.path())?, CutReport::default());
        assert!(!dir.path().join(META_FILE).exists());
        Ok(())
    }
}
