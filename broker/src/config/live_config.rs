//! `LiveConfig`: the broker config as it stands now, which UPDATE_BROKER_CONFIG (`mqadmin
//! updateBrokerConfig`) and `PATCH /api/v1/config` (`http/config.rs`) change while the broker runs.
//!
//! Only [`RUNTIME_UPDATABLE_KEYS`] change, and every reader of one of them reads it here on each
//! use; `BrokerContext::config` stays the config the broker booted with, which is right for every
//! other key. An update is one replica's, as in RocketMQ, where each broker of a master/slave pair
//! is updated on its own: `mqadmin updateBrokerConfig -c <cluster>` reaches every replica of every
//! group, `-b <addr>` one replica.
//!
//! Updates survive a restart, as Java's rewrite of its config file does: every key updated so far
//! is kept in `<storePathRootDir>/config/broker-updates.properties`, applied at boot over the config
//! file and `-D` overrides. Delete that file to return to the config file's values.
//!
//! Invariants:
//! - the current config has always passed `BrokerConfig::validate`;
//! - an update is in effect only once its file has replaced the old one (temporary file, fsync,
//!   rename), so a restart applies what was acknowledged; the directory is fsynced after the
//!   rename, and a failure there is logged (the file in place is the new one unless power is lost
//!   before the directory reaches the disk);
//! - the file holds each value as the config reads it back (`to_properties`), one line per key:
//!   no text a client sent is written out as it came;
//! - updates are serialised, and a reader sees the config and its versions from one update, never
//!   a mix (they are one value in the watch);
//! - the version counter grows by one per update (GET_BROKER_CONFIG's `DataVersion`), the
//!   permission version only with updates naming `brokerPermission` (see [`Snapshot`]).

use std::collections::BTreeMap;
use std::io::Write;
use std::path::Path;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::Mutex;

use raftmq_common::protocol::body::properties_text;
use raftmq_common::protocol::body::topic::DataVersion;
use thiserror::Error;
use tokio::sync::watch;

use crate::config::broker_config::BrokerConfig;
use crate::config::broker_config::ConfigError;

/// Directory under `storePathRootDir` of the updates file (RocketMQ's `store/config`).
pub const CONFIG_DIR: &str = "config";
/// The file of every key updated at runtime.
pub const UPDATES_FILE: &str = "broker-updates.properties";

/// Why an update was not applied.
#[derive(Debug, Error)]
pub enum UpdateError {
    /// A key, or a value, or the result as a whole, is not acceptable.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// The update could not be made durable; nothing changed.
    #[error("cannot persist the update to {path}: {source}")]
    Persist {
        /// The updates file.
        path: PathBuf,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
}

/// The config and its versions, as one value.
#[derive(Debug, Clone)]
pub struct Snapshot {
    /// The config now.
    pub config: Arc<BrokerConfig>,
    /// Updates since boot (`counter`), and the boot or the last update (`timestamp`, ms).
    pub version: DataVersion,
    /// Updates naming `brokerPermission` since boot, and the boot or the last of them. The topic
    /// table's registered version moves with this one only: Java bumps its topic `DataVersion` only
    /// for `brokerPermission`, so other updates do not make a NameServer re-read the table (which
    /// would undo its `wipeWritePerm`).
    pub perm_version: DataVersion,
}

/// The current config of this replica; see the module docs.
#[derive(Debug)]
pub struct LiveConfig {
    current: watch::Sender<Snapshot>,
    /// Every key updated so far, with its value as read back: what the file holds. The lock
    /// serialises updates; readers never take it.
    applied: Mutex<BTreeMap<String, String>>,
    path: PathBuf,
}

impl LiveConfig {
    /// `boot` with the updates persisted under its store root applied. `boot_ms` stamps the
    /// initial versions. A file that no longer applies (an invalid value, or a key this version
    /// cannot change at runtime) fails the boot rather than being ignored: a replica drained with
    /// `brokerPermission` must not come back writable by surprise.
    pub fn open(boot: BrokerConfig, boot_ms: u64) -> Result<Self, UpdateError> {
        let path = updates_path(&boot.store_path_root_dir);
        let applied = match std::fs::read_to_string(&path) {
            Ok(text) => properties_text::decode(&text),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => BTreeMap::new(),
            Err(source) => return Err(UpdateError::Persist { path, source }),
        };
        let config = if applied.is_empty() {
            boot
        } else {
            let config = boot.with_updates(&applied).map_err(|e| {
                ConfigError::Invalid(format!(
                    "the runtime updates in {} no longer apply ({e}); fix or delete that file",
                    path.display()
                ))
            })?;
            tracing::info!(file = %path.display(), updates = ?applied,
                "applying the config keys updated at runtime (updateBrokerConfig) over the config file");
            config
        };
        let boot_version = DataVersion { counter: 0, timestamp: i64::try_from(boot_ms).unwrap_or(i64::MAX) };
        Ok(LiveConfig {
            current: watch::Sender::new(Snapshot {
                config: Arc::new(config),
                version: boot_version,
                perm_version: boot_version,
            }),
            applied: Mutex::new(applied),
            path,
        })
    }

    /// The config now.
    pub fn current(&self) -> Arc<BrokerConfig> {
        Arc::clone(&self.current.borrow().config)
    }

    /// The config and its versions now, from one update.
    pub fn snapshot(&self) -> Snapshot {
        self.current.borrow().clone()
    }

    /// Reads the config now without taking a reference to it (the cheaper read of hot paths).
    pub fn read<R>(&self, f: impl FnOnce(&BrokerConfig) -> R) -> R {
        f(&self.current.borrow().config)
    }

    /// Wakes on every update.
    pub fn subscribe(&self) -> watch::Receiver<Snapshot> {
        self.current.subscribe()
    }

    /// Applies `updates` (all or none), persists them, then makes them current. Returns the
    /// snapshots before and after; an empty `updates` changes nothing (Java answers it SUCCESS).
    /// The fsyncs run on the calling thread: a rare admin call of a few milliseconds.
    pub fn update(&self, updates: &BTreeMap<String, String>, now_ms: u64) -> Result<(Snapshot, Snapshot), UpdateError> {
        let mut applied = self.applied.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let before = self.snapshot();
        if updates.is_empty() {
            return Ok((before.clone(), before));
        }
        let config = before.config.with_updates(updates)?;
        let read_back = config.to_properties().map_err(|e| ConfigError::Invalid(format!("cannot write out: {e}")))?;
        let mut next = applied.clone();
        for key in updates.keys() {
            // Every runtime key reads back (a config unit test checks); one that did not would be
            // written as `key=` and fail the next boot.
            let value = read_back
                .get(key)
                .cloned()
                .ok_or_else(|| ConfigError::Invalid(format!("{key} does not read back from the config")))?;
            next.insert(key.clone(), value);
        }
        persist(&self.path, &next).map_err(|source| UpdateError::Persist { path: self.path.clone(), source })?;
        *applied = next;
        let stamp = i64::try_from(now_ms).unwrap_or(i64::MAX);
        let bump = |v: DataVersion| DataVersion { counter: v.counter + 1, timestamp: stamp };
        let after = Snapshot {
            config: Arc::new(config),
            version: bump(before.version),
            perm_version: if updates.contains_key("brokerPermission") {
                bump(before.perm_version)
            } else {
                before.perm_version
            },
        };
        self.current.send_replace(after.clone());
        Ok((before, after))
    }
}

/// Where the updates of a store live.
pub fn updates_path(store_root: &Path) -> PathBuf {
    store_root.join(CONFIG_DIR).join(UPDATES_FILE)
}

/// Replaces the file. Once the rename is done the update counts as made: a failed fsync of the
/// directory after it is logged, since the file in place is the new one unless the machine loses
/// power before the directory reaches the disk.
fn persist(path: &Path, applied: &BTreeMap<String, String>) -> std::io::Result<()> {
    let dir = path.parent().unwrap_or(Path::new("."));
    if !dir.exists() {
        std::fs::create_dir_all(dir)?;
    }
    // The store root holds the new directory's entry: synced on every update (a rare call), so an
    // update after a failed first sync still makes it durable.
    if let Some(root) = dir.parent() {
        std::fs::File::open(root)?.sync_all()?;
    }
    let tmp = path.with_extension("properties.tmp");
    {
        let mut file = std::fs::File::create(&tmp)?;
        file.write_all(b"# Broker config keys changed at runtime (updateBrokerConfig); applied at boot.\n")?;
        file.write_all(properties_text::encode(applied).as_bytes())?;
        file.sync_all()?;
    }
    std::fs::rename(&tmp, path)?;
    if let Err(e) = std::fs::File::open(dir).and_then(|d| d.sync_all()) {
        tracing::warn!(dir = %dir.display(), error = %e, "cannot fsync the config directory after an update");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn boot(root: &Path) -> BrokerConfig {
        BrokerConfig { store_path_root_dir: root.to_owned(), ..BrokerConfig::default() }
    }

    fn kv(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect()
    }

    #[test]
    fn updates_take_effect_at_once_and_survive_a_restart() {
        let dir = tempfile::tempdir().unwrap();
        let live = LiveConfig::open(boot(dir.path()), 1_000).unwrap();
        assert_eq!(live.snapshot().version, DataVersion { counter: 0, timestamp: 1_000 });
        let mut rx = live.subscribe();

        let (before, after) = live.update(&kv(&[("brokerPermission", "4")]), 2_000).unwrap();
        assert_eq!((before.config.broker_permission, after.config.broker_permission), (6, 4));
        assert_eq!(live.read(|c| c.broker_permission), 4);
        assert!(rx.has_changed().unwrap());
        assert_eq!(rx.borrow_and_update().config.broker_permission, 4);
        live.update(&kv(&[("maxMessageSize", "1024"), ("shortPollingTimeMills", "2s")]), 3_000).unwrap();
        let now = live.snapshot();
        assert_eq!(now.version, DataVersion { counter: 2, timestamp: 3_000 });
        // Only brokerPermission moves the version the topic table registers with.
        assert_eq!(now.perm_version, DataVersion { counter: 1, timestamp: 2_000 });
        assert!(live.update(&BTreeMap::new(), 3_500).is_ok());
        assert_eq!(live.snapshot().version.counter, 2, "an empty update changes nothing");
        // The file holds values as read back, not as sent.
        let text = std::fs::read_to_string(updates_path(dir.path())).unwrap();
        assert!(text.contains("shortPollingTimeMills=2000\n") && text.contains("brokerPermission=4\n"), "{text}");

        // A refused update changes nothing: not memory, not the file, not the version.
        assert!(matches!(
            live.update(&kv(&[("maxMessageSize", "2048"), ("listenPort", "1")]), 4_000),
            Err(UpdateError::Config(ConfigError::NotRuntimeUpdatable(_)))
        ));
        assert_eq!(live.read(|c| c.max_message_size), 1024);
        assert_eq!(live.snapshot().version.counter, 2);

        let restarted = LiveConfig::open(boot(dir.path()), 5_000).unwrap();
        let c = restarted.current();
        assert_eq!((c.broker_permission, c.max_message_size), (4, 1024));
        assert_eq!(restarted.snapshot().version, DataVersion { counter: 0, timestamp: 5_000 });
        assert_eq!(restarted.snapshot().perm_version, DataVersion { counter: 0, timestamp: 5_000 });
    }

    #[test]
    fn a_value_cannot_smuggle_in_another_key() {
        let dir = tempfile::tempdir().unwrap();
        let live = LiveConfig::open(boot(dir.path()), 0).unwrap();
        for value in ["4\nlistenPort=1", "6\nbrokerPermission=2", "4\r", "\u{7f}"] {
            let err = live.update(&kv(&[("brokerPermission", value)]), 1).unwrap_err().to_string();
            assert!(err.contains("control character"), "{value:?}: {err}");
        }
        assert_eq!(live.snapshot().version.counter, 0);
        assert!(!updates_path(dir.path()).exists());
    }

    #[test]
    fn an_updates_file_that_no_longer_applies_fails_the_boot() {
        let dir = tempfile::tempdir().unwrap();
        let path = updates_path(dir.path());
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, "brokerPermission=99\n").unwrap();
        let err = LiveConfig::open(boot(dir.path()), 0).unwrap_err().to_string();
        assert!(err.contains("no longer apply") && err.contains("brokerPermission"), "{err}");
        std::fs::write(&path, "# nothing\n").unwrap();
        assert_eq!(LiveConfig::open(boot(dir.path()), 0).unwrap().current().broker_permission, 6);
    }
}
