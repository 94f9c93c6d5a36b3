//! `plain_acl.yml` on disk: read whole and bounded, stamped (length, modification time) to tell a
//! change, and replaced atomically.
//!
//! Invariants: never more than [`ACL_FILE_SIZE_MAX_BYTES`] is read; a reader or a crash sees the old
//! file or the new one whole; temporary files hold every secret key, so they are private to their
//! writer and removed on failure (and at load, when a crash left one).

use std::path::Path;

use raftmq_common::limits::ACL_FILE_SIZE_MAX_BYTES;

use super::document::AclConfig;
use super::error::AclConfigError;
use super::yaml::parse_tree;

/// Removes the temporary files a crash in [`write_atomically`] left beside `path` (they hold every
/// secret key); failures are only logged.
pub(crate) fn remove_stale_temporaries(path: &Path) {
    let dir = path.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(Path::new("."));
    let Some(name) = path.file_name().and_then(|n| n.to_str()) else { return };
    let prefix = format!(".{name}.");
    let Ok(entries) = std::fs::read_dir(dir) else { return };
    for entry in entries.flatten() {
        let file = entry.file_name();
        let file = file.to_string_lossy();
        if file.starts_with(&prefix)
            && file.ends_with(".tmp")
            && let Err(e) = std::fs::remove_file(entry.path())
        {
            tracing::warn!(file = %entry.path().display(), error = %e, "cannot remove a stale ACL temporary file");
        }
    }
}

/// Replaces `path` with `bytes` so a reader (or a crash) sees the old file or the new one whole:
/// a temporary file beside it, fsynced, renamed over it, and the directory fsynced.
/// The temporary file is private to this call (a unique name, created new) and gets the old file's
/// permissions, or owner-only ones: it holds every secret key. It is removed if anything fails.
pub(crate) fn write_atomically(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    use std::os::unix::fs::PermissionsExt;
    static SEQUENCE: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let dir = path.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir)?;
    let mode = std::fs::metadata(path).map_or(0o600, |m| m.permissions().mode() & 0o7777);
    let mut name = std::ffi::OsString::from(".");
    name.push(path.file_name().unwrap_or_default());
    let sequence = SEQUENCE.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    name.push(format!(".{}.{sequence}.tmp", std::process::id()));
    let tmp = dir.join(name);
    let written = (|| {
        let mut file = std::fs::OpenOptions::new().write(true).create_new(true).mode(0o600).open(&tmp)?;
        // Not through `mode` above: the umask would narrow it.
        file.set_permissions(std::fs::Permissions::from_mode(mode))?;
        file.write_all(bytes)?;
        file.sync_all()?;
        drop(file);
        std::fs::rename(&tmp, path)
    })();
    if written.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    written?;
    std::fs::File::open(dir)?.sync_all()
}

/// A file's length and modification time: what tells a changed ACL file.
pub(crate) type FileStamp = (u64, std::time::SystemTime);

pub(crate) fn file_stamp(path: &Path) -> Option<FileStamp> {
    let meta = std::fs::metadata(path).ok()?;
    Some((meta.len(), meta.modified().ok()?))
}

/// The config in `path`, the file's stamp, and whether it holds no document (blank or comments).
pub(crate) fn read_file(path: &Path) -> Result<(AclConfig, Option<FileStamp>, bool), AclConfigError> {
    let stamp = file_stamp(path);
    let len = std::fs::metadata(path).map_err(|e| AclConfigError(format!("{}: {e}", path.display())))?.len();
    if len > ACL_FILE_SIZE_MAX_BYTES {
        return Err(AclConfigError(format!("{} is {len} bytes, more than {ACL_FILE_SIZE_MAX_BYTES}", path.display())));
    }
    // The file may grow between the two looks; never read more than the limit.
    let mut text = String::new();
    std::io::Read::read_to_string(
        &mut std::io::Read::take(
            std::fs::File::open(path).map_err(|e| AclConfigError(format!("{}: {e}", path.display())))?,
            ACL_FILE_SIZE_MAX_BYTES + 1,
        ),
        &mut text,
    )
    .map_err(|e| AclConfigError(format!("{}: {e}", path.display())))?;
    if text.len() as u64 > ACL_FILE_SIZE_MAX_BYTES {
        return Err(AclConfigError(format!("{} grew past {ACL_FILE_SIZE_MAX_BYTES} bytes", path.display())));
    }
    let blank = matches!(parse_tree(&text), Ok(None));
    let config = AclConfig::parse_yaml(&text).map_err(|e| AclConfigError(format!("{}: {}", path.display(), e.0)))?;
    Ok((config, stamp, blank))
}
