//! A cluster secret file made once: 32 random bytes from the OS as hex, owner-only (0600), kept
//! when it exists. `raftmq dev` makes `<data>/cluster.secret`; `raftmq cluster-secret FILE` is the
//! compose file's `secret-init` (the host-built image has no shell to make one).
//!
//! Invariant: an existing file is never rewritten (every member of a running cluster holds it),
//! and a new one appears whole or not at all to a reader racing the writer (created under a
//! temporary name, then linked into place, which fails if another writer got there first).

use std::io::Read;
use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;
use std::path::PathBuf;

use anyhow::Context;
use anyhow::Result;
use clap::Args;

/// `raftmq cluster-secret` flags.
#[derive(Debug, Args)]
pub struct ClusterSecretArgs {
    /// The file to make (left as it is when it exists), e.g. `/secrets/cluster.secret`.
    pub file: PathBuf,
}

/// Makes the file unless it exists; says which.
pub fn run(args: &ClusterSecretArgs) -> Result<()> {
    if ensure(&args.file)? {
        println!("made a new cluster secret in {}", args.file.display());
    } else {
        println!("{} already holds the cluster secret; kept", args.file.display());
    }
    Ok(())
}

/// Makes `path` hold a fresh random cluster secret unless it exists; whether it made one.
pub fn ensure(path: &Path) -> Result<bool> {
    if path.exists() {
        return Ok(false);
    }
    let mut bytes = [0u8; 32];
    std::fs::File::open("/dev/urandom")
        .and_then(|mut f| f.read_exact(&mut bytes))
        .context("reading random bytes for the cluster secret")?;
    let hex: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
    let tmp = path.with_extension(format!("tmp.{}", std::process::id()));
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(&tmp)
        .with_context(|| format!("creating {}", tmp.display()))?;
    file.write_all(format!("{hex}\n").as_bytes()).with_context(|| format!("writing {}", tmp.display()))?;
    file.sync_all().with_context(|| format!("syncing {}", tmp.display()))?;
    let linked = std::fs::hard_link(&tmp, path);
    let _ = std::fs::remove_file(&tmp);
    match linked {
        Ok(()) => Ok(true),
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Ok(false),
        Err(e) => Err(e).with_context(|| format!("creating {}", path.display())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_secret_is_made_once_owner_only_and_loadable() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("cluster.secret");
        assert!(ensure(&path).unwrap(), "made");
        let first = std::fs::read_to_string(&path).unwrap();
        assert_eq!(first.trim().len(), 64);
        assert_eq!(std::fs::metadata(&path).unwrap().permissions().mode() & 0o777, 0o600);
        assert!(!ensure(&path).unwrap(), "kept");
        assert_eq!(std::fs::read_to_string(&path).unwrap(), first, "kept across restarts");
        let loaded = raftmq_common::cluster_secret::ClusterSecret::from_config("", path.to_str().unwrap()).unwrap();
        assert!(loaded.is_some());
        let left: Vec<_> = std::fs::read_dir(dir.path()).unwrap().collect();
        assert_eq!(left.len(), 1, "no temporary file left behind");
    }
}
