//! One fixed-length file mapped shared into memory: the only `unsafe` in the crate.
//!
//! Soundness rule enforced by the borrow checker: bytes are read through `&self` and written
//! through `&mut self` (into the mapping, or with `pwrite` into the file under it, which shares
//! the page cache), so no reference into the mapping can coexist with a write. The owner
//! (a segment or index file) lives inside the log store's mutex. The flusher and the page-cache
//! helper only get a [`SyncHandle`], which can `msync` a range or drop a synced one from the page
//! cache, but never touches the bytes from Rust. A [`StableHandle`] copies bytes out without the
//! owner's lock, and only bytes its owner promises are never written again (committed entries,
//! `LogStore::read_committed_bytes`); it is crate-private so that only the store can make that promise.

use std::fs::{File, OpenOptions};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use memmap2::{MmapOptions, MmapRaw};

use crate::error::{Result, StoreError};

struct Inner {
    map: MmapRaw,
    len: u64,
    path: PathBuf,
    // Appends go through `pwrite` on it: the kernel copies into the page cache, so fresh pages
    // are not zeroed first and writeback never write-protects mapped pages (TLB shootdowns).
    file: File,
}

/// A mapped file of fixed length.
pub struct MappedFile {
    inner: Arc<Inner>,
    /// Bytes `[lo, hi)` this process reserved with `posix_fallocate`. Blocks, once allocated, stay
    /// for the life of the file (its length is fixed and no hole is ever punched), so reserving
    /// inside this range again has nothing to do: skipping it saves a syscall that also dirties the
    /// inode (its times), which the next sync then has to write.
    reserved: (u64, u64),
}

/// Copies bytes out of a mapped file without its owner's lock. Crate-private: whoever makes one
/// promises that the bytes it copies are not written while it copies them (the log store hands
/// them out for committed entries only, which nothing rewrites).
#[derive(Clone)]
pub(crate) struct StableHandle {
    inner: Arc<Inner>,
}

impl StableHandle {
    /// A copy of bytes `[off, off + len)`, or `None` if out of range.
    pub(crate) fn copy(&self, off: u64, len: usize) -> Option<bytes::Bytes> {
        let end = off.checked_add(len as u64)?;
        if end > self.inner.len {
            return None;
        }
        let o = usize::try_from(off).ok()?;
        // SAFETY: the range is inside the mapping (checked above), which lives as long as
        // `self.inner` (a deleted file stays mapped until then); the maker of the handle promised
        // that nothing writes these bytes (see the type's docs), so this shared view races with
        // no write. Other processes modifying the file are outside the store's contract.
        let bytes = unsafe { std::slice::from_raw_parts(self.inner.map.as_ptr().add(o), len) };
        Some(bytes::Bytes::copy_from_slice(bytes))
    }
}

/// Capability to persist a range of a mapped file; shareable with the flusher thread.
#[derive(Clone)]
pub struct SyncHandle {
    inner: Arc<Inner>,
}

impl SyncHandle {
    /// `msync(MS_SYNC)` bytes `[off, off + len)`.
    pub fn sync_range(&self, off: u64, len: u64) -> Result<()> {
        assert!(off + len <= self.inner.len, "sync range past the end of the mapping");
        if len == 0 {
            return Ok(());
        }
        let (o, l) = (to_usize(off)?, to_usize(len)?);
        self.inner.map.flush_range(o, l).map_err(|e| StoreError::io("msync", &self.inner.path, e))
    }

    /// Drop bytes `[off, off + len)` from this process's page tables and from the page cache.
    pub fn drop_cache(&self, off: u64, len: u64) -> Result<()> {
        use std::os::fd::AsRawFd;
        assert!(off + len <= self.inner.len, "drop range past the end of the mapping");
        if len == 0 {
            return Ok(());
        }
        let (o, l) = (to_usize(off)?, to_usize(len)?);
        // SAFETY: a shared file mapping: MADV_DONTNEED only unmaps the pages; a later access
        // faults the same file bytes back in, so a live borrow reads unchanged bytes.
        unsafe { self.inner.map.unchecked_advise_range(memmap2::UncheckedAdvice::DontNeed, o, l) }
            .map_err(|e| StoreError::io("madvise", &self.inner.path, e))?;
        let (fo, fl) = (i64::try_from(off).unwrap_or(i64::MAX), i64::try_from(len).unwrap_or(i64::MAX));
        nix::fcntl::posix_fadvise(
            self.inner.file.as_raw_fd(),
            fo,
            fl,
            nix::fcntl::PosixFadviseAdvice::POSIX_FADV_DONTNEED,
        )
        .map_err(|e| StoreError::io("fadvise", &self.inner.path, e.into()))
    }
}

fn to_usize(v: u64) -> Result<usize> {
    usize::try_from(v).map_err(|_| StoreError::Config(format!("{v} does not fit usize")))
}

impl MappedFile {
    /// Open (creating if absent) `path` and map exactly `len` bytes. A shorter file (a crash
    /// cut it, or it was just created) is extended with zeros; a longer one is an error.
    pub fn open(path: &Path, len: u64) -> Result<(Self, bool)> {
        assert!(len > 0, "mapping of zero length");
        let created = !path.exists();
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(path)
            .map_err(|e| StoreError::io("open", path, e))?;
        let actual = file.metadata().map_err(|e| StoreError::io("stat", path, e))?.len();
        if actual > len {
            return Err(StoreError::Config(format!(
                "{} is {actual} bytes, expected at most {len} (segment size changed?)",
                path.display()
            )));
        }
        if actual < len {
            file.set_len(len).map_err(|e| StoreError::io("set_len", path, e))?;
        }
        let map = MmapOptions::new().len(to_usize(len)?).map_raw(&file).map_err(|e| StoreError::io("mmap", path, e))?;
        let inner = Inner { map, len, path: path.to_path_buf(), file };
        Ok((Self { inner: Arc::new(inner), reserved: (0, 0) }, created))
    }

    /// Mapped length in bytes.
    pub fn len(&self) -> u64 {
        self.inner.len
    }

    /// Path of the file.
    pub fn path(&self) -> &Path {
        &self.inner.path
    }

    /// A handle that copies bytes out without the owner's lock (see [`StableHandle`]).
    pub(crate) fn stable_handle(&self) -> StableHandle {
        StableHandle { inner: Arc::clone(&self.inner) }
    }

    /// A handle the flusher can `msync` through.
    pub fn sync_handle(&self) -> SyncHandle {
        SyncHandle { inner: Arc::clone(&self.inner) }
    }

    fn check(&self, off: u64, len: usize) -> Option<usize> {
        let end = off.checked_add(len as u64)?;
        if end > self.inner.len {
            return None;
        }
        usize::try_from(off).ok()
    }

    /// Bytes `[off, off + len)`, or `None` if out of range.
    pub fn read(&self, off: u64, len: usize) -> Option<&[u8]> {
        let o = self.check(off, len)?;
        // SAFETY: the range is inside the live mapping (checked above); the mapping lives as
        // long as `self.inner`; writes need `&mut self`, so none can happen while this shared
        // borrow is alive. Other processes modifying the file are outside the store's contract.
        Some(unsafe { std::slice::from_raw_parts(self.inner.map.as_ptr().add(o), len) })
    }

    /// Write `data` at `off` with `pwrite`; readable through [`Self::read`] on return.
    pub fn write_at(&mut self, off: u64, data: &[u8]) -> Result<()> {
        use std::os::unix::fs::FileExt;
        if self.check(off, data.len()).is_none() {
            return Err(StoreError::Contract(format!(
                "write of {} B at {off} outside {}",
                data.len(),
                self.path().display()
            )));
        }
        self.inner.file.write_all_at(data, off).map_err(|e| StoreError::io("pwrite", &self.inner.path, e))
    }

    /// Allocate disk blocks for `[off, off + len)` with `posix_fallocate` (a no-op where they
    /// exist). A store through the mapping into a page without a block must allocate one, and on
    /// a full file system the kernel can only answer that with SIGBUS; reserving first turns the
    /// same condition into an `ENOSPC` error here.
    /// Nothing is done for a range this process reserved before.
    pub fn reserve(&mut self, off: u64, len: u64) -> Result<()> {
        use std::os::fd::AsRawFd;
        if self.check(off, to_usize(len)?).is_none() {
            return Err(StoreError::Contract(format!("reserve of {len} B at {off} outside {}", self.path().display())));
        }
        if self.is_reserved(off, len) {
            return Ok(());
        }
        let end = off + len;
        let (lo, hi) = self.reserved;
        let to_off =
            |v: u64| nix::libc::off_t::try_from(v).map_err(|_| StoreError::Config(format!("{v} beyond off_t")));
        nix::fcntl::posix_fallocate(self.inner.file.as_raw_fd(), to_off(off)?, to_off(len)?)
            .map_err(|e| StoreError::io("fallocate", &self.inner.path, e.into()))?;
        // Kept as one range: appends reserve forward from where the last one ended.
        self.reserved = if off <= hi && end >= lo && hi > lo { (lo.min(off), hi.max(end)) } else { (off, end) };
        Ok(())
    }

    /// Whether [`Self::reserve`] already reserved all of `[off, off + len)`.
    pub fn is_reserved(&self, off: u64, len: u64) -> bool {
        let (lo, hi) = self.reserved;
        off >= lo && off.saturating_add(len) <= hi
    }

    /// Bytes `[lo, hi)` reserved by [`Self::reserve`] so far.
    #[cfg(test)]
    pub(crate) fn reserved(&self) -> (u64, u64) {
        self.reserved
    }

    /// The parts of `[from, to)` that may hold data: everything but the file's holes
    /// (`SEEK_DATA`/`SEEK_HOLE`; a file system without them reports the whole range). Lets
    /// recovery look at what was written instead of faulting in a sparse segment page by page.
    pub fn data_ranges(&self, from: u64, to: u64) -> Result<Vec<(u64, u64)>> {
        use nix::errno::Errno;
        use nix::unistd::{Whence, lseek};
        use std::os::fd::AsRawFd;
        let fd = self.inner.file.as_raw_fd();
        let to = to.min(self.inner.len);
        let seek = |p: u64, whence| -> Result<Option<u64>> {
            let at = nix::libc::off_t::try_from(p).map_err(|_| StoreError::Config(format!("{p} beyond off_t")))?;
            match lseek(fd, at, whence) {
                Ok(x) => Ok(Some(u64::try_from(x).unwrap_or(0))),
                // No data at or after `p`.
                Err(Errno::ENXIO) => Ok(None),
                Err(e) => Err(StoreError::io("lseek", &self.inner.path, e.into())),
            }
        };
        let mut out = Vec::new();
        let mut p = from;
        while p < to {
            let Some(data) = seek(p, Whence::SeekData)? else { break };
            if data >= to {
                break;
            }
            let hole = seek(data, Whence::SeekHole)?.map_or(to, |h| h.min(to));
            if hole <= data {
                // Not a usable answer: assume data up to the end.
                out.push((data, to));
                break;
            }
            out.push((data, hole));
            p = hole;
        }
        Ok(out)
    }

    /// Mutable bytes `[off, off + len)`, or `None` if out of range.
    pub fn slice_mut(&mut self, off: u64, len: usize) -> Option<&mut [u8]> {
        let o = self.check(off, len)?;
        // SAFETY: in range (checked); `&mut self` guarantees no other reference into the
        // mapping obtained through this `MappedFile` is alive; `SyncHandle`s never dereference.
        Some(unsafe { std::slice::from_raw_parts_mut(self.inner.map.as_mut_ptr().add(o), len) })
    }
}

/// fsync a directory so that file creations/deletions in it are durable.
pub fn sync_dir(dir: &Path) -> Result<()> {
    File::open(dir).and_then(|d| d.sync_all()).map_err(|e| StoreError::io("fsync dir", dir, e))
}

/// fsync the directory `dir` already open as `file` (no file descriptor needed).
pub fn sync_open_dir(file: &File, dir: &Path) -> Result<()> {
    file.sync_all().map_err(|e| StoreError::io("fsync dir", dir, e))
}

/// Replace `<dir>/<name>` with `bytes` atomically and durably: write `<name>.tmp`, fsync, rename,
/// fsync the directory, so a crash leaves the old file or the new one.
pub fn replace_file(dir: &Path, name: &str, bytes: &[u8]) -> Result<()> {
    let tmp = dir.join(format!("{name}.tmp"));
    let write = || -> std::io::Result<()> {
        let mut f = File::create(&tmp)?;
        std::io::Write::write_all(&mut f, bytes)?;
        f.sync_all()
    };
    write().map_err(|e| StoreError::io("write", &tmp, e))?;
    let path = dir.join(name);
    std::fs::rename(&tmp, &path).map_err(|e| StoreError::io("rename", &path, e))?;
    sync_dir(dir)
}

/// The bytes of `<dir>/<name>`, `None` when there is no such file.
pub fn read_if_present(dir: &Path, name: &str) -> Result<Option<bytes::Bytes>> {
    let path = dir.join(name);
    match std::fs::read(&path) {
        Ok(b) => Ok(Some(bytes::Bytes::from(b))),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(StoreError::io("read", &path, e)),
    }
}
