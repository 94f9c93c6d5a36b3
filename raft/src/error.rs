//! Errors of the Raft layer. Conditions a caller can act on are separate variants:
//! `Io`/`Poisoned`/`Damaged` are fatal for the replica (shut it down, re-fetch), `Config` is
//! a startup mistake, `EntryTooLarge` is the caller's bug. openraft's storage traits speak
//! `std::io::Error`, so [`StoreError`] converts into one (kind `Other`, source kept).

use std::io;
use std::path::PathBuf;

/// Why a record on disk was rejected.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum CorruptReason {
    /// Fewer bytes than a header.
    #[error("short header")]
    ShortHeader,
    /// Magic is neither an entry nor a blank record.
    #[error("bad magic")]
    BadMagic,
    /// Header CRC mismatch.
    #[error("header crc mismatch")]
    HeaderCrc,
    /// Payload CRC mismatch.
    #[error("payload crc mismatch")]
    PayloadCrc,
    /// Unknown kind, version or non-zero reserved bytes.
    #[error("unknown format")]
    UnknownFormat,
    /// Size out of range or record crossing a segment end.
    #[error("bad size")]
    BadSize,
    /// Header fields disagree with the record's place in the log (index, term or pos).
    #[error("out of sequence")]
    OutOfSequence,
    /// Payload layout invalid (e.g. membership encoding).
    #[error("bad payload layout")]
    BadPayload,
    /// Index slot disagrees with the data record.
    #[error("index mismatch")]
    IndexMismatch,
}

/// Errors of the log store.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// An operating-system IO error.
    #[error("{op} {path}: {source}")]
    Io {
        /// What was being done.
        op: &'static str,
        /// Which file.
        path: PathBuf,
        /// The OS error.
        #[source]
        source: io::Error,
    },
    /// A record on disk failed validation while reading.
    #[error("corrupt record at pos {pos}: {reason}")]
    Corrupt {
        /// Physical position of the record.
        pos: u64,
        /// What was wrong.
        reason: CorruptReason,
    },
    /// Recovery found corruption before the tail; the store refuses writes.
    #[error("store damaged: {0}")]
    Damaged(String),
    /// An fsync failed earlier; nothing written since can be trusted (fsyncgate).
    #[error("store poisoned: {0}")]
    Poisoned(String),
    /// An entry exceeds what a segment can hold.
    #[error("entry of {size_bytes} bytes exceeds the maximum of {max_bytes} bytes")]
    EntryTooLarge {
        /// Encoded entry size.
        size_bytes: u64,
        /// Largest encodable entry for the configured segment size.
        max_bytes: u64,
    },
    /// Invalid configuration or config mismatch with the files on disk.
    #[error("config: {0}")]
    Config(String),
    /// The caller violated the log contract (holes, wrong order).
    #[error("log contract violated: {0}")]
    Contract(String),
    /// The flusher thread is gone (store shut down).
    #[error("flusher stopped")]
    FlusherStopped,
}

impl StoreError {
    /// Whether this is the file system out of space (`ENOSPC`, `EDQUOT`): a condition that passes
    /// when space is freed, unlike a failed fsync or a damaged file.
    pub fn is_disk_full(&self) -> bool {
        matches!(self, Self::Io { source, .. }
            if matches!(source.raw_os_error(), Some(nix::libc::ENOSPC) | Some(nix::libc::EDQUOT)))
    }

    /// Build an `Io` error.
    pub fn io(op: &'static str, path: impl Into<PathBuf>, source: io::Error) -> Self {
        Self::Io { op, path: path.into(), source }
    }
}

impl From<StoreError> for io::Error {
    fn from(e: StoreError) -> Self {
        let kind = match &e {
            StoreError::Io { source, .. } => source.kind(),
            _ => io::ErrorKind::Other,
        };
        io::Error::new(kind, e)
    }
}

/// Result alias of this crate.
pub type Result<T, E = StoreError> = std::result::Result<T, E>;
