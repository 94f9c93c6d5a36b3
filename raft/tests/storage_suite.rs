//! openraft's storage conformance suite against the real segment store (small segments so the
//! suite also crosses segment rolls), with a minimal in-memory state machine.

use std::io;
use std::sync::{Arc, Mutex};

use futures::{Stream, TryStreamExt};
use openraft::storage::{EntryResponder, RaftSnapshotBuilder, RaftStateMachine};
use openraft::testing::log::{StoreBuilder, Suite};
use openraft::type_config::TypeConfigExt;
use openraft::{RaftTypeConfig, StorageError};
use raftmq_raft::type_config::{LogId, StoredMembership};
use raftmq_raft::{AppReply, LogStore, RaftConfig, TypeConfig};
use tempfile::TempDir;

type SnapshotMeta = openraft::alias::SnapshotMetaOf<TypeConfig>;
type Snapshot = openraft::alias::SnapshotOf<TypeConfig, Vec<u8>>;

#[derive(Default)]
struct SmInner {
    applied: Option<LogId>,
    membership: StoredMembership,
    snapshot: Option<Snapshot>,
}

#[derive(Clone, Default)]
struct MemSm(Arc<Mutex<SmInner>>);

impl MemSm {
    fn inner(&self) -> std::sync::MutexGuard<'_, SmInner> {
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }
}

impl RaftSnapshotBuilder<TypeConfig> for MemSm {
    type SnapshotData = Vec<u8>;
    async fn build_snapshot(&mut self) -> Result<Snapshot, io::Error> {
        let mut g = self.inner();
        let meta = SnapshotMeta { last_log_id: g.applied, last_membership: g.membership.clone() };
        let snap = Snapshot { meta, snapshot: Vec::new() };
        g.snapshot = Some(snap.clone());
        Ok(snap)
    }
}

impl RaftStateMachine<TypeConfig> for MemSm {
    type SnapshotData = Vec<u8>;
    type SnapshotBuilder = Self;

    async fn applied_state(&mut self) -> Result<(Option<LogId>, StoredMembership), io::Error> {
        let g = self.inner();
        Ok((g.applied, g.membership.clone()))
    }

    async fn apply<S>(&mut self, mut entries: S) -> Result<(), io::Error>
    where
        S: Stream<Item = Result<EntryResponder<TypeConfig>, io::Error>> + Unpin + Send,
    {
        while let Some((entry, responder)) = entries.try_next().await? {
            {
                let mut g = self.inner();
                g.applied = Some(entry.log_id);
                if let openraft::EntryPayload::Membership(m) = &entry.payload {
                    g.membership = StoredMembership::new(Some(entry.log_id), m.clone());
                }
            }
            if let Some(r) = responder {
                r.send(AppReply::default());
            }
        }
        Ok(())
    }

    async fn get_snapshot_builder(&mut self) -> Self::SnapshotBuilder {
        self.clone()
    }

    async fn install_snapshot(&mut self, meta: &SnapshotMeta, snapshot: Vec<u8>) -> Result<(), io::Error> {
        let mut g = self.inner();
        g.applied = meta.last_log_id;
        g.membership = meta.last_membership.clone();
        g.snapshot = Some(Snapshot { meta: meta.clone(), snapshot });
        Ok(())
    }

    async fn get_current_snapshot(&mut self) -> Result<Option<Snapshot>, io::Error> {
        Ok(self.inner().snapshot.clone())
    }
}

struct Builder;

impl StoreBuilder<TypeConfig, LogStore, MemSm, TempDir> for Builder {
    async fn build(&self) -> Result<(TempDir, LogStore, MemSm), StorageError<TypeConfig>> {
        let dir = tempfile::tempdir().map_err(|e| StorageError::read(TypeConfig::err_from_error(&e)))?;
        let cfg = RaftConfig { segment_size_bytes: 4096, index_file_entries: 16, ..RaftConfig::default() };
        let store = LogStore::open(dir.path(), &cfg)
            .map_err(|e| StorageError::read(TypeConfig::err_from_error(&io::Error::from(e))))?;
        Ok((dir, store, MemSm::default()))
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn openraft_log_storage_suite() -> Result<(), StorageError<TypeConfig>> {
    Suite::test_all(Builder).await
}

#[allow(dead_code)]
fn _assert_type_config_is_used(_: <TypeConfig as RaftTypeConfig>::NodeId) {}
