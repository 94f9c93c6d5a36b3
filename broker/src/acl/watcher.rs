//! The ACL in force on this broker ([`Acl`]): `plain_acl.yml` loaded at boot, polled every
//! [`ACL_FILE_POLL_INTERVAL_MS`] (length and modification time) and re-read when it changes, and
//! replicated edits installed over it.
//!
//! Invariants: a config is all valid or not used: a file that does not parse is refused at boot, and
//! a later edit that does not parse, an emptied file or a removed one leaves the previous config in
//! force (logged once), never an open broker. An install never undoes a later one.

use std::net::IpAddr;
use std::path::Path;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::RwLock;
use std::time::Duration;

use raftmq_common::limits::ACL_FILE_POLL_INTERVAL_MS;
use raftmq_common::protocol::RemotingCommand;
use tokio_util::sync::CancellationToken;

use super::document::AclConfig;
use super::document::AclDocument;
use super::document::AclVersion;
use super::error::AclConfigError;
use super::error::AclDenied;
use super::file::file_stamp;
use super::file::read_file;
use super::file::remove_stale_temporaries;
use super::file::write_atomically;

/// The ACL in force on this broker: `plain_acl.yml`, re-read when it changes.
#[derive(Debug)]
pub struct Acl {
    path: PathBuf,
    config: RwLock<Arc<AclConfig>>,
    /// (length, modification time) of the file the config was read from.
    seen: RwLock<Option<(u64, std::time::SystemTime)>>,
    /// Held across one edit over the wire (read, replicate, install), so two edits on a leader do
    /// not both start from the same file and lose one.
    edit: tokio::sync::Mutex<()>,
    /// Held while a document is installed or the file re-read (the admin call, the replica's
    /// follower task and the poller race); holds the last replicated version installed by this
    /// process.
    install: std::sync::Mutex<Option<AclVersion>>,
}

impl Acl {
    /// Loads `path`; an unreadable or invalid file is an error (the broker does not start open).
    pub fn load(path: &Path) -> Result<Self, AclConfigError> {
        remove_stale_temporaries(path);
        let (config, seen, _) = read_file(path)?;
        Ok(Acl {
            path: path.to_owned(),
            config: RwLock::new(Arc::new(config)),
            seen: RwLock::new(seen),
            edit: tokio::sync::Mutex::new(()),
            install: std::sync::Mutex::new(None),
        })
    }

    /// The file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Serialises edits over the wire on this broker (see the field).
    pub async fn lock_edits(&self) -> tokio::sync::MutexGuard<'_, ()> {
        self.edit.lock().await
    }

    /// Puts a replicated document in force and writes it to the file. Returns whether it took
    /// effect. Skipped when this process installed that version or a later one already (the admin
    /// call and the follower task both try), and when the file in force carries exactly its
    /// `dataVersion` (the file holds that edit, perhaps edited by hand since: a restart leaves it).
    /// The replica's follower task starts only once the log it booted with is applied, so a restart
    /// installs the group's last edit, never the older ones it replays. The config changes even
    /// when the file cannot be written (the error says so), so every replica enforces the same
    /// edit; the write is retried after a restart.
    pub fn install(&self, doc: &AclDocument) -> Result<bool, AclConfigError> {
        let mut installed = self.install.lock().unwrap_or_else(|p| p.into_inner());
        if installed.is_some_and(|v| v >= doc.version) {
            return Ok(false);
        }
        if self.current().source.version == Some(doc.version) {
            *installed = Some(doc.version);
            return Ok(false);
        }
        let config = AclConfig::parse_yaml(&doc.yaml)?;
        // The file first: once the version shows (GET_BROKER_CLUSTER_ACL_INFO), the file holds it.
        let written = write_atomically(&self.path, doc.yaml.as_bytes());
        *self.config.write().unwrap_or_else(|p| p.into_inner()) = Arc::new(config);
        *installed = Some(doc.version);
        written.map_err(|e| AclConfigError(format!("writing {}: {e}", self.path.display())))?;
        *self.seen.write().unwrap_or_else(|p| p.into_inner()) = file_stamp(&self.path);
        tracing::info!(path = %self.path.display(), counter = doc.version.counter, "replicated plain ACL edit installed");
        Ok(true)
    }

    /// The config in force.
    pub fn current(&self) -> Arc<AclConfig> {
        Arc::clone(&self.config.read().unwrap_or_else(|p| p.into_inner()))
    }

    /// Checks `request` from `peer` against the config in force.
    pub fn check(&self, request: &RemotingCommand, peer: IpAddr) -> Result<(), AclDenied> {
        self.current().check(request, peer)
    }

    /// Re-reads the file when its length or modification time changed. Returns whether a new
    /// config took effect. A file that is gone, empty (caught in the middle of a rewrite) or no
    /// longer parses keeps the old config, logged once per change of the file.
    pub fn reload_if_changed(&self) -> bool {
        // Under the install lock: a reload that read the file just before an install replaced it
        // must not put the older text back in force.
        let _installing = self.install.lock().unwrap_or_else(|p| p.into_inner());
        let now = file_stamp(&self.path);
        if now == *self.seen.read().unwrap_or_else(|p| p.into_inner()) {
            return false;
        }
        let read = read_file(&self.path).and_then(|(config, seen, blank)| match blank {
            // A blank file (emptied, or caught mid-write) would lock every client out.
            true => Err(AclConfigError(format!(
                "{} is blank (write it whole, by a rename, to change it)",
                self.path.display()
            ))),
            false => Ok((config, seen)),
        });
        match read {
            Ok((config, seen)) => {
                *self.seen.write().unwrap_or_else(|p| p.into_inner()) = seen;
                let changed = {
                    let mut current = self.config.write().unwrap_or_else(|p| p.into_inner());
                    let changed = **current != config;
                    *current = Arc::new(config);
                    changed
                };
                if changed {
                    tracing::info!(path = %self.path.display(), "plain ACL config reloaded");
                }
                changed
            }
            Err(e) => {
                // Remember the stamp so one bad edit is logged once, not every poll.
                *self.seen.write().unwrap_or_else(|p| p.into_inner()) = now;
                tracing::error!(path = %self.path.display(), error = %e, "plain ACL config not reloaded; the previous one stays in force");
                false
            }
        }
    }

    /// Polls the file every [`ACL_FILE_POLL_INTERVAL_MS`] until `cancel` (Java watches it too).
    pub async fn watch(self: Arc<Self>, cancel: CancellationToken) {
        let period = Duration::from_millis(ACL_FILE_POLL_INTERVAL_MS);
        loop {
            tokio::select! {
                _ = cancel.cancelled() => return,
                _ = tokio::time::sleep(period) => {}
            }
            let acl = Arc::clone(&self);
            if tokio::task::spawn_blocking(move || acl.reload_if_changed()).await.is_err() {
                tracing::error!("plain ACL reload task failed");
            }
        }
    }
}
