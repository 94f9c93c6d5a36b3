//! Size-limited disks for the `disk-full` nemesis: a private mount namespace for the run, a tmpfs of
//! [`NODE_DISK_BYTES`] on every node's `disk/` folder (its store lives in `disk/store`), and the
//! filler file that fills one to the last byte and is deleted to free it.
//!
//! ```text
//! run_blocking: unshare(CLONE_NEWNS), / made private ─▶ Db::new: tmpfs size=… on nodes/<n>/disk
//! disk-full:   fill(disk) writes disk/fill until ENOSPC ─hold─▶ free(fill) deletes it
//! ```
//!
//! Invariants: the mounts live in the run's own mount namespace (entered by the harness thread
//! before the runtime's threads exist, so they and every child share it): nothing is mounted on the
//! host, and the mounts vanish with the run's processes even when the harness is killed. The filler
//! lives beside the store, never inside it, so the broker never sees a file it did not write.

use std::fs::File;
use std::io::ErrorKind;
use std::io::Write;
use std::path::Path;
use std::path::PathBuf;

use crate::net::EnvError;

/// Size of each node's file system under `disk-full`: a run's CommitLog (a few 64 MiB segments),
/// its index and queues fit many times over, so only the filler ever fills it.
pub const NODE_DISK_BYTES: u64 = 1024 * 1024 * 1024;
/// Name of the filler file in a node's `disk/` folder.
pub const FILLER_FILE_NAME: &str = "fill";
/// Write size while filling; the last bytes go in [`FILL_TAIL_CHUNK_BYTES`] steps.
const FILL_CHUNK_BYTES: usize = 1024 * 1024;
/// The smallest write while filling: a tmpfs allocates whole pages.
const FILL_TAIL_CHUNK_BYTES: usize = 4096;

/// Moves the calling thread (and every thread and child it creates afterwards) into a mount
/// namespace of its own, with every mount private, so that the run's tmpfs mounts stay out of the
/// host's view.
pub fn enter_private_mount_namespace() -> Result<(), EnvError> {
    nix::sched::unshare(nix::sched::CloneFlags::CLONE_NEWNS).map_err(|e| {
        EnvError::Unsupported(format!("disk-full needs a private mount namespace (unshare CLONE_NEWNS): {e}"))
    })?;
    nix::mount::mount(
        None::<&str>,
        "/",
        None::<&str>,
        nix::mount::MsFlags::MS_REC | nix::mount::MsFlags::MS_PRIVATE,
        None::<&str>,
    )
    .map_err(|e| EnvError::Unsupported(format!("cannot make mounts private in the run's namespace: {e}")))
}

/// Mounts a tmpfs of `size_bytes` on `dir` (created if missing).
pub fn mount_tmpfs(dir: &Path, size_bytes: u64) -> Result<(), EnvError> {
    std::fs::create_dir_all(dir).map_err(|source| EnvError::Io { what: format!("mkdir {}", dir.display()), source })?;
    let options = format!("size={size_bytes},mode=0755");
    nix::mount::mount(Some("tmpfs"), dir, Some("tmpfs"), nix::mount::MsFlags::empty(), Some(options.as_str())).map_err(
        |e| EnvError::Unsupported(format!("cannot mount a tmpfs of {size_bytes} bytes on {}: {e}", dir.display())),
    )
}

/// What [`fill`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Filled {
    /// The filler file.
    pub path: PathBuf,
    /// Bytes it took.
    pub bytes: u64,
}

/// Writes `disk/fill` until the file system says `ENOSPC` (big writes, then page-sized ones), so
/// that not one more byte fits. Blocking.
pub fn fill(disk: &Path) -> std::io::Result<Filled> {
    let path = disk.join(FILLER_FILE_NAME);
    let mut file = File::options().create(true).append(true).open(&path)?;
    let mut bytes = file.metadata()?.len();
    let zeros = vec![0u8; FILL_CHUNK_BYTES];
    for chunk in [FILL_CHUNK_BYTES, FILL_TAIL_CHUNK_BYTES] {
        loop {
            match file.write(&zeros[..chunk]) {
                Ok(0) => break,
                Ok(n) => bytes += n as u64,
                Err(e) if e.raw_os_error() == Some(nix::libc::ENOSPC) => break,
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
    }
    Ok(Filled { path, bytes })
}

/// Deletes a filler (already gone is fine).
pub fn free(filler: &Path) -> std::io::Result<()> {
    match std::fs::remove_file(filler) {
        Err(e) if e.kind() != ErrorKind::NotFound => Err(e),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fill_takes_every_byte_of_a_small_tmpfs_and_free_gives_them_back() -> anyhow::Result<()> {
        // Only this test's thread enters the namespace; the mount dies with it.
        if let Err(e) = enter_private_mount_namespace() {
            let why = format!("it needs root and mount namespaces: {e}");
            raftmq_common::test_skip::announce_skip("fill of a size-limited tmpfs", &why);
            return Ok(());
        }
        let dir = tempfile::tempdir()?;
        let disk = dir.path().join("disk");
        mount_tmpfs(&disk, 4 * 1024 * 1024)?;
        let filled = fill(&disk)?;
        assert!(filled.bytes > 3 * 1024 * 1024 && filled.bytes <= 4 * 1024 * 1024, "{filled:?}");
        let full = std::fs::write(disk.join("more"), [1u8; 4096]).expect_err("nothing more fits");
        assert_eq!(full.raw_os_error(), Some(nix::libc::ENOSPC));
        free(&filled.path)?;
        free(&filled.path)?;
        std::fs::write(disk.join("more"), [1u8; 4096])?;
        nix::mount::umount(&disk)?;
        Ok(())
    }
}
