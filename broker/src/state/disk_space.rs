//! [`DiskReservation`]: disk blocks of a mapped file allocated before anything is written to them
//! through the mapping.
//!
//! ConsumeQueue and IndexFile files are created at their full size but sparse, and written through
//! a shared mapping. The first store into a page over a hole makes the kernel allocate a block; on
//! a full file system that fails, and the kernel's only way to report it is SIGBUS, which kills the
//! broker (a `raftmq dev` group died so when the disk filled during a benchmark). A `posix_fallocate`
//! ahead of the written end turns the same condition into an `ENOSPC` error the caller handles.
//!
//! Invariants:
//! - Every byte below `reserved_end` has a block on disk (or `posix_fallocate` failed and said so);
//!   callers write through the mapping only below it.
//! - `reserved_end` never passes the file's length, and only grows: a step allocates at least
//!   `step_bytes` more, so the system call is rare.
//! - Allocating blocks that already exist is a no-op, so a file reopened after a restart starts at 0
//!   and reserves over what it already holds without writing anything. Overwriting bytes that were
//!   written before (recovery zeroing a torn tail) needs no reservation: they have their blocks.
//! - No file descriptor is held between steps: a broker maps a file per ConsumeQueue file and the
//!   file is opened only for the rare `posix_fallocate`.

use std::fs::OpenOptions;
use std::io;
use std::os::fd::AsRawFd;
use std::path::PathBuf;

/// The allocated prefix of one file.
#[derive(Debug)]
pub struct DiskReservation {
    path: PathBuf,
    file_len_bytes: u64,
    step_bytes: u64,
    reserved_end: u64,
}

impl DiskReservation {
    /// Nothing reserved yet of the file at `path`, which is `file_len_bytes` long; reservations grow
    /// by at least `step_bytes` at a time.
    pub fn new(path: impl Into<PathBuf>, file_len_bytes: u64, step_bytes: u64) -> Self {
        Self { path: path.into(), file_len_bytes, step_bytes: step_bytes.max(1), reserved_end: 0 }
    }

    /// Makes sure `[0, end)` has blocks on disk. `ENOSPC` (and any other failure) is returned, never
    /// left for a store through the mapping to find.
    pub fn reserve_through(&mut self, end: u64) -> io::Result<()> {
        if end <= self.reserved_end {
            return Ok(());
        }
        if end > self.file_len_bytes {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("reserving through byte {end} of a {}-byte file", self.file_len_bytes),
            ));
        }
        let target = end.max(self.reserved_end.saturating_add(self.step_bytes)).min(self.file_len_bytes);
        let offset = off_t(self.reserved_end)?;
        let len = off_t(target - self.reserved_end)?;
        let file = OpenOptions::new().write(true).open(&self.path)?;
        nix::fcntl::posix_fallocate(file.as_raw_fd(), offset, len).map_err(io::Error::from)?;
        self.reserved_end = target;
        Ok(())
    }

    /// Bytes from the start known to have blocks.
    pub fn reserved_end(&self) -> u64 {
        self.reserved_end
    }
}

fn off_t(v: u64) -> io::Result<nix::libc::off_t> {
    nix::libc::off_t::try_from(v).map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "offset beyond off_t"))
}

#[cfg(test)]
mod tests {
    use std::fs::File;
    use std::os::unix::fs::MetadataExt;

    use super::*;

    fn allocated_bytes(file: &File) -> u64 {
        file.metadata().unwrap().blocks() * 512
    }

    #[test]
    fn reservations_allocate_in_steps_and_stop_at_the_file_end() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        let probe = File::options().read(true).write(true).create_new(true).open(&path).unwrap();
        probe.set_len(1 << 20).unwrap();
        assert_eq!(allocated_bytes(&probe), 0, "set_len leaves the file sparse");
        let mut space = DiskReservation::new(&path, 1 << 20, 256 << 10);
        space.reserve_through(20).unwrap();
        assert_eq!(space.reserved_end(), 256 << 10, "a whole step, not just the 20 bytes asked for");
        assert!(allocated_bytes(&probe) >= 256 << 10);
        space.reserve_through(256 << 10).unwrap();
        assert_eq!(space.reserved_end(), 256 << 10, "already reserved: no call");
        space.reserve_through(900 << 10).unwrap();
        assert_eq!(space.reserved_end(), 900 << 10, "more than a step: as far as asked");
        space.reserve_through((900 << 10) + 1).unwrap();
        assert_eq!(space.reserved_end(), 1 << 20, "a step, capped at the file's length");
        assert!(allocated_bytes(&probe) >= 1 << 20);
        assert_eq!(space.reserve_through((1 << 20) + 1).unwrap_err().kind(), io::ErrorKind::InvalidInput);
    }
}
