//! `KVConfigManager`: namespace → key → value, served by PUT/GET/DELETE_KV_CONFIG and
//! GET_KVLIST_BY_NAMESPACE. The `ORDER_TOPIC_CONFIG` namespace feeds `orderTopicConf` in routes and
//! the REGISTER_BROKER response.
//!
//! Persisted as RocketMQ does, to `kvConfig.json` in `KVConfigSerializeWrapper` form
//! (`{"configTable":{"ns":{"k":"v"}}}`), so a Java NameServer's file can be read. A change is
//! written (temp file, fsync, rename) before it is applied in memory: a failed write leaves the table
//! as it was and the caller gets the error. No path means memory only.
//!
//! Bounded ([`raftmq_common::limits`]): a namespace or key of at most `KV_CONFIG_NAME_MAX_BYTES`,
//! a value of at most `KV_CONFIG_VALUE_MAX_BYTES`, at most `KV_CONFIG_ENTRIES_MAX_COUNT` keys and
//! `KV_CONFIG_TOTAL_MAX_BYTES` in all, so each change rewrites and fsyncs a bounded file; a PUT of
//! the value already held writes nothing.
//!
//! Invariants: no namespace maps to an empty table; the file, when present, holds the table; the
//! table stays within the limits above.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::Path;
use std::path::PathBuf;

use raftmq_common::limits::KV_CONFIG_ENTRIES_MAX_COUNT;
use raftmq_common::limits::KV_CONFIG_NAME_MAX_BYTES;
use raftmq_common::limits::KV_CONFIG_TOTAL_MAX_BYTES;
use raftmq_common::limits::KV_CONFIG_VALUE_MAX_BYTES;
use raftmq_common::protocol::body::register::KvTable;
use serde::Deserialize;
use serde::Serialize;
use thiserror::Error;

/// RocketMQ's namespace for ordered-topic configs (`NamesrvUtil.NAMESPACE_ORDER_TOPIC_CONFIG`).
pub const NAMESPACE_ORDER_TOPIC_CONFIG: &str = "ORDER_TOPIC_CONFIG";

/// Why the KV config could not be loaded or saved.
#[derive(Debug, Error)]
pub enum KvConfigError {
    /// Reading or writing the file failed.
    #[error("kvConfig file {path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// The change would pass a limit.
    #[error("KV config refused: {0}")]
    TooLarge(String),
    /// The file is not `KVConfigSerializeWrapper` JSON.
    #[error("kvConfig file {path} is not valid: {source}")]
    Corrupt {
        /// The file.
        path: PathBuf,
        /// What serde_json reported.
        #[source]
        source: serde_json::Error,
    },
}

type Table = BTreeMap<String, BTreeMap<String, String>>;

/// `KVConfigSerializeWrapper`.
#[derive(Debug, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
struct KvConfigSerializeWrapper {
    config_table: Table,
}

/// The KV tables, optionally backed by a file.
#[derive(Debug, Default)]
pub struct KvConfigManager {
    path: Option<PathBuf>,
    table: Table,
}

impl KvConfigManager {
    /// Loads `path` (a missing file is an empty table); `None` keeps the table in memory only.
    pub fn load(path: Option<PathBuf>) -> Result<Self, KvConfigError> {
        let Some(path) = path else {
            return Ok(KvConfigManager::default());
        };
        let table = match std::fs::read(&path) {
            Ok(bytes) if bytes.iter().all(u8::is_ascii_whitespace) => Table::new(),
            Ok(bytes) => {
                let wrapper: KvConfigSerializeWrapper = serde_json::from_slice(&bytes)
                    .map_err(|source| KvConfigError::Corrupt { path: path.clone(), source })?;
                wrapper.config_table.into_iter().filter(|(_, kv)| !kv.is_empty()).collect()
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Table::new(),
            Err(source) => return Err(KvConfigError::Io { path, source }),
        };
        Ok(KvConfigManager { path: Some(path), table })
    }

    /// PUT_KV_CONFIG.
    pub fn put(&mut self, namespace: &str, key: &str, value: &str) -> Result<(), KvConfigError> {
        let too_large = |what: String| Err(KvConfigError::TooLarge(what));
        for (what, name) in [("namespace", namespace), ("key", key)] {
            if name.len() > KV_CONFIG_NAME_MAX_BYTES {
                return too_large(format!("{what} of {} bytes (at most {KV_CONFIG_NAME_MAX_BYTES})", name.len()));
            }
        }
        if value.len() > KV_CONFIG_VALUE_MAX_BYTES {
            return too_large(format!("value of {} bytes (at most {KV_CONFIG_VALUE_MAX_BYTES})", value.len()));
        }
        let held = self.get(namespace, key);
        if held == Some(value) {
            return Ok(());
        }
        let entries = self.table.values().map(BTreeMap::len).sum::<usize>() + usize::from(held.is_none());
        if entries > KV_CONFIG_ENTRIES_MAX_COUNT {
            return too_large(format!("more than {KV_CONFIG_ENTRIES_MAX_COUNT} keys"));
        }
        let total = self.total_bytes() - held.map_or(0, |v| namespace.len() + key.len() + v.len())
            + namespace.len()
            + key.len()
            + value.len();
        if total > KV_CONFIG_TOTAL_MAX_BYTES {
            return too_large(format!("{total} bytes in all (at most {KV_CONFIG_TOTAL_MAX_BYTES})"));
        }
        let mut next = self.table.clone();
        next.entry(namespace.to_owned()).or_default().insert(key.to_owned(), value.to_owned());
        self.commit(next)
    }

    /// DELETE_KV_CONFIG. Returns whether the key existed.
    pub fn delete(&mut self, namespace: &str, key: &str) -> Result<bool, KvConfigError> {
        if self.get(namespace, key).is_none() {
            return Ok(false);
        }
        let mut next = self.table.clone();
        if let Some(kv) = next.get_mut(namespace) {
            kv.remove(key);
            if kv.is_empty() {
                next.remove(namespace);
            }
        }
        self.commit(next)?;
        Ok(true)
    }

    /// GET_KV_CONFIG.
    pub fn get(&self, namespace: &str, key: &str) -> Option<&str> {
        self.table.get(namespace).and_then(|kv| kv.get(key)).map(String::as_str)
    }

    /// GET_KVLIST_BY_NAMESPACE: the namespace's table, `None` when it has no keys.
    pub fn namespace(&self, namespace: &str) -> Option<KvTable> {
        self.table.get(namespace).map(|kv| KvTable { table: kv.clone() })
    }

    /// Namespaces, keys and values added up, as the limits count them.
    fn total_bytes(&self) -> usize {
        self.table.iter().flat_map(|(ns, kv)| kv.iter().map(move |(k, v)| ns.len() + k.len() + v.len())).sum()
    }

    fn commit(&mut self, next: Table) -> Result<(), KvConfigError> {
        if let Some(path) = &self.path {
            persist(path, &next)?;
        }
        self.table = next;
        Ok(())
    }
}

fn persist(path: &Path, table: &Table) -> Result<(), KvConfigError> {
    let io = |source| KvConfigError::Io { path: path.to_owned(), source };
    let wrapper = KvConfigSerializeWrapper { config_table: table.clone() };
    // Serializing string maps cannot fail; an error here would be a serde_json bug.
    let json = serde_json::to_vec_pretty(&wrapper)
        .map_err(|source| KvConfigError::Corrupt { path: path.to_owned(), source })?;
    if let Some(dir) = path.parent()
        && !dir.as_os_str().is_empty()
    {
        std::fs::create_dir_all(dir).map_err(io)?;
    }
    let mut tmp_name = path.as_os_str().to_owned();
    tmp_name.push(".tmp");
    let tmp = PathBuf::from(tmp_name);
    let mut file = std::fs::File::create(&tmp).map_err(io)?;
    file.write_all(&json).map_err(io)?;
    file.sync_all().map_err(io)?;
    std::fs::rename(&tmp, path).map_err(io)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn put_get_delete_in_memory() {
        let mut kv = KvConfigManager::load(None).expect("memory");
        assert_eq!(kv.get("ns", "k"), None);
        kv.put("ns", "k", "v").expect("put");
        kv.put("ns", "k2", "v2").expect("put");
        assert_eq!(kv.get("ns", "k"), Some("v"));
        assert_eq!(kv.namespace("ns").expect("ns").table.len(), 2);
        assert!(kv.delete("ns", "k").expect("delete"));
        assert!(!kv.delete("ns", "k").expect("delete"));
        assert!(kv.delete("ns", "k2").expect("delete"));
        assert!(kv.namespace("ns").is_none());
    }

    #[test]
    fn persists_in_rocketmq_format_and_reloads() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("namesrv").join("kvConfig.json");
        let mut kv = KvConfigManager::load(Some(path.clone())).expect("empty");
        kv.put(NAMESPACE_ORDER_TOPIC_CONFIG, "T", "broker-a:8").expect("put");
        let on_disk: serde_json::Value = serde_json::from_slice(&std::fs::read(&path).expect("file")).expect("json");
        assert_eq!(on_disk, serde_json::json!({"configTable": {"ORDER_TOPIC_CONFIG": {"T": "broker-a:8"}}}));
        let reloaded = KvConfigManager::load(Some(path)).expect("reload");
        assert_eq!(reloaded.get(NAMESPACE_ORDER_TOPIC_CONFIG, "T"), Some("broker-a:8"));
    }

    #[test]
    fn corrupt_file_is_an_error_and_failed_writes_change_nothing() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("kvConfig.json");
        std::fs::write(&path, b"{not json").expect("write");
        assert!(matches!(KvConfigManager::load(Some(path)), Err(KvConfigError::Corrupt { .. })));

        // A directory where the file should be: every write fails.
        let blocked = dir.path().join("blocked");
        std::fs::create_dir_all(blocked.join("kvConfig.json.tmp")).expect("mkdir");
        let mut kv = KvConfigManager::load(Some(blocked.join("kvConfig.json"))).expect("missing file is empty");
        assert!(kv.put("ns", "k", "v").is_err());
        assert_eq!(kv.get("ns", "k"), None);
    }

    #[test]
    fn puts_are_bounded_and_unchanged_values_write_nothing() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("kvConfig.json");
        let mut kv = KvConfigManager::load(Some(path.clone())).expect("empty");
        let long_name = "n".repeat(KV_CONFIG_NAME_MAX_BYTES + 1);
        assert!(matches!(kv.put(&long_name, "k", "v"), Err(KvConfigError::TooLarge(_))));
        assert!(matches!(kv.put("ns", &long_name, "v"), Err(KvConfigError::TooLarge(_))));
        let long_value = "v".repeat(KV_CONFIG_VALUE_MAX_BYTES + 1);
        assert!(matches!(kv.put("ns", "k", &long_value), Err(KvConfigError::TooLarge(_))));
        let big = "v".repeat(KV_CONFIG_VALUE_MAX_BYTES);
        let fit = KV_CONFIG_TOTAL_MAX_BYTES / (KV_CONFIG_VALUE_MAX_BYTES + 8);
        for i in 0..fit {
            kv.put("ns", &format!("k{i:05}"), &big).expect("within the total");
        }
        let refused =
            (fit..fit + 16).any(|i| matches!(kv.put("ns", &format!("k{i:05}"), &big), Err(KvConfigError::TooLarge(_))));
        assert!(refused, "the total is bounded");
        assert!(kv.total_bytes() <= KV_CONFIG_TOTAL_MAX_BYTES);

        // The same value again: the file is not rewritten (a directory in the temp file's place
        // would make any write fail).
        std::fs::create_dir_all(dir.path().join("kvConfig.json.tmp")).expect("mkdir");
        kv.put("ns", "k00000", &big).expect("unchanged: no write");
        assert!(kv.put("ns", "k00000", "other").is_err(), "a change writes");

        let mut small = KvConfigManager::load(None).expect("memory");
        for i in 0..KV_CONFIG_ENTRIES_MAX_COUNT {
            small.put("ns", &i.to_string(), "v").expect("within the count");
        }
        assert!(matches!(small.put("ns", "one more", "v"), Err(KvConfigError::TooLarge(_))));
        small.put("ns", "0", "changed").expect("changing a held key adds none");
    }
}
