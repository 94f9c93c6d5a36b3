//! Consumer offsets (`OffsetStore`): where a group resumes each queue.
//!
//! - [`RemoteBrokerOffsetStore`] (clustering): offsets live on the broker. Read with
//!   QUERY_CONSUMER_OFFSET; written with a **oneway** UPDATE_CONSUMER_OFFSET every persist interval
//!   (5 s) as the 4.x client does, and with a **two-way** one ([`OffsetStore::persist_all_confirmed`])
//!   when a queue is given away, on an explicit commit and on shutdown: a oneway frame queued just
//!   before the connection closes may never reach the broker, and the next owner of a queue must read
//!   the offset its previous owner reached. Pulls also carry the offset (commit bit).
//! - [`LocalFileOffsetStore`] (broadcasting): each client keeps its own offsets in
//!   `<dir>/<clientId>/<group>/offsets.json`, replaced atomically (write `offsets.json.tmp`, fsync,
//!   rename, fsync the directory), so a crash leaves the old file or the new one, never a torn one.
//!
//! Invariants:
//! - An offset is "the next message to consume". Consumption only moves it forward
//!   (`update_offset(.., increase_only = true)`); only a reset (seek, offset-moved, a read from the
//!   store) may move it back.
//! - A corrupt offsets file is an error at load, not an empty table: restarting from LAST would skip
//!   messages silently.
//! - No lock is held across an `.await`.
//!
//! File format: `{"offsetTable":[{"brokerName":"b","offset":5,"queueId":0,"topic":"T"}]}`. Java's
//! fastjson file uses `MessageQueue` objects as map keys, which is not standard JSON, so the two do not
//! share files.

use std::collections::BTreeMap;
use std::collections::BTreeSet;
use std::io::Write;
use std::path::Path;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::Mutex;
use std::sync::MutexGuard;

use raftmq_common::message::MessageQueue;
use serde::Deserialize;
use serde::Serialize;

use crate::consumer::client_instance::ClientInstance;
use crate::error::ClientError;
use crate::error::ErrorKind;
use crate::error::Result;

/// Where [`OffsetStore::read_offset`] looks (`ReadOffsetType`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReadOffsetType {
    /// The in-memory table only.
    ReadFromMemory,
    /// The broker (remote) or the file (local); the answer replaces the memory value.
    ReadFromStore,
    /// Memory, else the store.
    MemoryFirstThenStore,
}

/// The in-memory offset table both stores share.
#[derive(Debug, Default)]
struct OffsetTable {
    offsets: Mutex<BTreeMap<MessageQueue, i64>>,
}

impl OffsetTable {
    fn lock(&self) -> MutexGuard<'_, BTreeMap<MessageQueue, i64>> {
        // Each critical section is one map operation; a poisoned map is still consistent.
        self.offsets.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn update(&self, mq: &MessageQueue, offset: i64, increase_only: bool) {
        let mut table = self.lock();
        // Looked up before inserting: the key is copied (two strings) only for a queue's first
        // offset, not for each of the listener calls that update it.
        match table.get_mut(mq) {
            Some(entry) => {
                if !increase_only || offset > *entry {
                    *entry = offset;
                }
            }
            None => {
                table.insert(mq.clone(), offset);
            }
        }
    }

    fn get(&self, mq: &MessageQueue) -> Option<i64> {
        self.lock().get(mq).copied()
    }

    fn remove(&self, mq: &MessageQueue) {
        self.lock().remove(mq);
    }

    fn snapshot(&self) -> BTreeMap<MessageQueue, i64> {
        self.lock().clone()
    }
}

/// Clustering offsets, kept on the broker.
pub struct RemoteBrokerOffsetStore {
    client: Arc<ClientInstance>,
    table: OffsetTable,
}

impl std::fmt::Debug for RemoteBrokerOffsetStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RemoteBrokerOffsetStore").field("group", &self.client.group).finish()
    }
}

impl RemoteBrokerOffsetStore {
    pub(crate) fn new(client: Arc<ClientInstance>) -> Self {
        RemoteBrokerOffsetStore { client, table: OffsetTable::default() }
    }
}

/// Broadcasting offsets, kept in a local file.
#[derive(Debug)]
pub struct LocalFileOffsetStore {
    path: PathBuf,
    table: OffsetTable,
}

#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct OffsetEntry {
    broker_name: String,
    offset: i64,
    queue_id: i32,
    topic: String,
}

#[derive(Debug, Serialize, Deserialize, Default)]
#[serde(rename_all = "camelCase")]
struct OffsetFile {
    offset_table: Vec<OffsetEntry>,
}

impl LocalFileOffsetStore {
    /// The store of `group` for `client_id` under `dir` (`<dir>/<clientId>/<group>/offsets.json`).
    pub fn new(dir: &Path, client_id: &str, group: &str) -> Self {
        LocalFileOffsetStore {
            path: dir.join(client_id).join(group).join("offsets.json"),
            table: OffsetTable::default(),
        }
    }

    /// The offsets file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Loads the file into memory; a missing file is an empty table, a corrupt one an error.
    pub fn load(&self) -> Result<()> {
        for (mq, offset) in self.read_file()? {
            self.table.update(&mq, offset, false);
        }
        Ok(())
    }

    fn read_file(&self) -> Result<BTreeMap<MessageQueue, i64>> {
        let bytes = match std::fs::read(&self.path) {
            Ok(bytes) => bytes,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(BTreeMap::new()),
            Err(e) => return Err(io_error("loadOffsets", &self.path, e)),
        };
        let file: OffsetFile = serde_json::from_slice(&bytes).map_err(|e| {
            ClientError::new(ErrorKind::Protocol, "loadOffsets", "corrupt offsets file")
                .with_context("path", self.path.display())
                .with_source(e)
        })?;
        Ok(file
            .offset_table
            .into_iter()
            .map(|e| (MessageQueue::new(e.topic, e.broker_name, e.queue_id), e.offset))
            .collect())
    }

    /// Writes the offsets of `mqs` (all when `None`) atomically. The fsyncs run on a blocking
    /// thread: on the caller's runtime they would stall every pull behind them (a client command
    /// runs on one worker).
    async fn write_file(&self, mqs: Option<&BTreeSet<MessageQueue>>) -> Result<()> {
        let json = self.encode_file(mqs)?;
        let path = self.path.clone();
        let written = tokio::task::spawn_blocking(move || write_atomically(&path, &json))
            .await
            .map_err(|e| ClientError::new(ErrorKind::Shutdown, "persistOffsets", e.to_string()))?;
        written.map_err(|e| io_error("persistOffsets", &self.path, e))
    }

    /// The offsets file's content for `mqs` (all when `None`).
    fn encode_file(&self, mqs: Option<&BTreeSet<MessageQueue>>) -> Result<Vec<u8>> {
        let table = self.table.snapshot();
        let offset_table = table
            .into_iter()
            .filter(|(mq, _)| mqs.is_none_or(|set| set.contains(mq)))
            .map(|(mq, offset)| OffsetEntry {
                broker_name: mq.broker_name,
                offset,
                queue_id: mq.queue_id,
                topic: mq.topic,
            })
            .collect();
        serde_json::to_vec_pretty(&OffsetFile { offset_table }).map_err(|e| {
            ClientError::new(ErrorKind::Protocol, "persistOffsets", "offsets do not encode").with_source(e)
        })
    }
}

/// Replaces `path` with `data`: tmp file, fsync, rename, fsync of the directory.
fn write_atomically(path: &Path, data: &[u8]) -> std::io::Result<()> {
    let dir = path.parent().ok_or_else(|| std::io::Error::other("offsets path has no directory"))?;
    std::fs::create_dir_all(dir)?;
    let mut tmp_name = path.as_os_str().to_owned();
    tmp_name.push(".tmp");
    let tmp = PathBuf::from(tmp_name);
    {
        let mut file = std::fs::File::create(&tmp)?;
        file.write_all(data)?;
        file.sync_all()?;
    }
    std::fs::rename(&tmp, path)?;
    std::fs::File::open(dir)?.sync_all()
}

fn io_error(op: &'static str, path: &Path, e: std::io::Error) -> ClientError {
    ClientError::new(ErrorKind::InvalidArgument, op, e.to_string()).with_context("path", path.display()).with_source(e)
}

/// One consumer's offsets: remote for clustering, a local file for broadcasting.
#[derive(Debug)]
pub enum OffsetStore {
    /// Clustering.
    Remote(RemoteBrokerOffsetStore),
    /// Broadcasting.
    Local(LocalFileOffsetStore),
}

impl OffsetStore {
    fn table(&self) -> &OffsetTable {
        match self {
            OffsetStore::Remote(s) => &s.table,
            OffsetStore::Local(s) => &s.table,
        }
    }

    /// Sets `mq`'s offset in memory; with `increase_only` it never moves back.
    pub fn update_offset(&self, mq: &MessageQueue, offset: i64, increase_only: bool) {
        self.table().update(mq, offset, increase_only);
    }

    /// `mq`'s offset; `Ok(None)` when neither memory nor (as asked) the store has one.
    pub async fn read_offset(&self, mq: &MessageQueue, read_type: ReadOffsetType) -> Result<Option<i64>> {
        if read_type != ReadOffsetType::ReadFromStore {
            if let Some(offset) = self.table().get(mq) {
                return Ok(Some(offset));
            }
            if read_type == ReadOffsetType::ReadFromMemory {
                return Ok(None);
            }
        }
        let stored = match self {
            OffsetStore::Remote(s) => s.client.query_consumer_offset(mq).await?,
            OffsetStore::Local(s) => s.read_file()?.get(mq).copied(),
        };
        if let Some(offset) = stored {
            self.update_offset(mq, offset, false);
        }
        Ok(stored)
    }

    /// Writes the offsets of `mqs` to the store (oneway to the broker: the periodic persist);
    /// per-queue failures are logged, not fatal.
    pub async fn persist_all(&self, mqs: &BTreeSet<MessageQueue>) {
        match self {
            OffsetStore::Remote(s) => {
                for (mq, offset) in s.table.snapshot() {
                    if !mqs.contains(&mq) {
                        continue;
                    }
                    if let Err(e) = s.client.update_consumer_offset_oneway(&mq, offset).await {
                        tracing::warn!(mq = ?mq, offset, error = %e, "persisting a consumer offset failed");
                    }
                }
            }
            OffsetStore::Local(s) => {
                if let Err(e) = s.write_file(Some(mqs)).await {
                    tracing::warn!(error = %e, "persisting the offsets file failed");
                }
            }
        }
    }

    /// Writes the offsets of `mqs` to the store and waits until it has them (two-way to the broker,
    /// queues in parallel; the file is written synchronously anyway). Every queue is tried; the
    /// error names how many failed.
    pub async fn persist_all_confirmed(&self, mqs: &BTreeSet<MessageQueue>) -> Result<()> {
        match self {
            OffsetStore::Remote(s) => {
                let mut calls = tokio::task::JoinSet::new();
                for (mq, offset) in s.table.snapshot() {
                    if !mqs.contains(&mq) {
                        continue;
                    }
                    let client = s.client.clone();
                    calls.spawn(async move {
                        let result = client.update_consumer_offset(&mq, offset).await;
                        (mq, offset, result)
                    });
                }
                let (mut failed, mut first_error) = (0usize, None);
                while let Some(joined) = calls.join_next().await {
                    let error = match joined {
                        Ok((_, _, Ok(()))) => continue,
                        Ok((mq, offset, Err(e))) => {
                            tracing::warn!(mq = ?mq, offset, error = %e, "storing a consumer offset failed");
                            e
                        }
                        Err(e) => ClientError::new(ErrorKind::Shutdown, "persistOffsets", e.to_string()),
                    };
                    failed += 1;
                    first_error.get_or_insert(error);
                }
                match first_error {
                    None => Ok(()),
                    Some(e) => Err(e.with_context("failed_queues", failed)),
                }
            }
            OffsetStore::Local(s) => s.write_file(Some(mqs)).await,
        }
    }

    /// Writes `mq`'s offset to the store and waits until it has it (see [`Self::persist_all_confirmed`]).
    pub async fn persist_confirmed(&self, mq: &MessageQueue) -> Result<()> {
        match self {
            OffsetStore::Remote(s) => match s.table.get(mq) {
                Some(offset) => s.client.update_consumer_offset(mq, offset).await,
                None => Ok(()),
            },
            OffsetStore::Local(s) => s.write_file(None).await,
        }
    }

    /// Writes `mq`'s offset to the store (oneway to the broker).
    pub async fn persist(&self, mq: &MessageQueue) {
        match self {
            OffsetStore::Remote(s) => {
                let Some(offset) = s.table.get(mq) else { return };
                if let Err(e) = s.client.update_consumer_offset_oneway(mq, offset).await {
                    tracing::warn!(mq = ?mq, offset, error = %e, "persisting a consumer offset failed");
                }
            }
            // The file holds every queue; rewriting all keeps queues not currently assigned.
            OffsetStore::Local(s) => {
                if let Err(e) = s.write_file(None).await {
                    tracing::warn!(error = %e, "persisting the offsets file failed");
                }
            }
        }
    }

    /// Forgets `mq` in memory (a queue given away, or a dirty offset before re-reading).
    pub fn remove_offset(&self, mq: &MessageQueue) {
        self.table().remove(mq);
    }

    /// The in-memory offsets.
    pub fn offsets(&self) -> BTreeMap<MessageQueue, i64> {
        self.table().snapshot()
    }
}

/// Where a queue without a stored offset starts (`ConsumeFromWhere` + `consumeTimestamp`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ConsumeFrom {
    /// The queue's end (retry topics: the beginning).
    #[default]
    LastOffset,
    /// The queue's beginning.
    FirstOffset,
    /// The first message stored at or after this time, ms since the epoch.
    Timestamp(i64),
}

impl ConsumeFrom {
    /// The heartbeat's `consumeFromWhere`.
    pub fn as_consume_from_where(&self) -> raftmq_common::protocol::body::heartbeat::ConsumeFromWhere {
        use raftmq_common::protocol::body::heartbeat::ConsumeFromWhere;
        match self {
            ConsumeFrom::LastOffset => ConsumeFromWhere::ConsumeFromLastOffset,
            ConsumeFrom::FirstOffset => ConsumeFromWhere::ConsumeFromFirstOffset,
            ConsumeFrom::Timestamp(_) => ConsumeFromWhere::ConsumeFromTimestamp,
        }
    }
}

/// The first offset to pull of a newly assigned queue (`RebalancePushImpl.computePullFromWhere`):
/// the stored offset, else per `from`. Retry topics start at 0 (LAST) or their end (TIMESTAMP).
pub(crate) async fn compute_pull_from_where(
    store: &OffsetStore,
    client: &ClientInstance,
    mq: &MessageQueue,
    from: ConsumeFrom,
) -> Result<i64> {
    if let Some(offset) = store.read_offset(mq, ReadOffsetType::ReadFromStore).await?
        && offset >= 0
    {
        return Ok(offset);
    }
    let retry = raftmq_common::message::validate::is_retry_topic(&mq.topic);
    match from {
        ConsumeFrom::FirstOffset => Ok(0),
        ConsumeFrom::LastOffset if retry => Ok(0),
        ConsumeFrom::LastOffset => client.max_offset(mq).await,
        ConsumeFrom::Timestamp(_) if retry => client.max_offset(mq).await,
        ConsumeFrom::Timestamp(ts) => client.search_offset(mq, ts).await,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mq(q: i32) -> MessageQueue {
        MessageQueue::new("T", "b", q)
    }

    #[tokio::test]
    async fn local_store_round_trips_and_never_moves_back_unless_reset() {
        let dir = tempfile::tempdir().unwrap();
        let store = OffsetStore::Local(LocalFileOffsetStore::new(dir.path(), "10.0.0.1@c1", "G"));
        store.update_offset(&mq(0), 10, true);
        store.update_offset(&mq(0), 7, true);
        assert_eq!(store.read_offset(&mq(0), ReadOffsetType::ReadFromMemory).await.unwrap(), Some(10));
        store.update_offset(&mq(0), 7, false);
        assert_eq!(store.read_offset(&mq(0), ReadOffsetType::ReadFromMemory).await.unwrap(), Some(7));
        store.update_offset(&mq(1), 3, true);
        store.persist_all(&[mq(0), mq(1)].into_iter().collect()).await;

        let OffsetStore::Local(local) = &store else { unreachable!() };
        assert!(local.path().ends_with("10.0.0.1@c1/G/offsets.json"));
        assert!(!local.path().with_extension("json.tmp").exists());
        let reloaded = LocalFileOffsetStore::new(dir.path(), "10.0.0.1@c1", "G");
        reloaded.load().unwrap();
        let reloaded = OffsetStore::Local(reloaded);
        assert_eq!(reloaded.offsets(), [(mq(0), 7), (mq(1), 3)].into_iter().collect());
        assert_eq!(reloaded.read_offset(&mq(2), ReadOffsetType::MemoryFirstThenStore).await.unwrap(), None);
        assert_eq!(reloaded.read_offset(&mq(1), ReadOffsetType::ReadFromStore).await.unwrap(), Some(3));
    }

    #[test]
    fn corrupt_file_is_an_error_and_missing_file_is_empty() {
        let dir = tempfile::tempdir().unwrap();
        let store = LocalFileOffsetStore::new(dir.path(), "c", "G");
        store.load().unwrap();
        std::fs::create_dir_all(store.path().parent().unwrap()).unwrap();
        std::fs::write(store.path(), b"{\"offsetTable\":[{").unwrap();
        assert_eq!(store.load().unwrap_err().kind, ErrorKind::Protocol);
    }
}
