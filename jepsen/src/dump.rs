//! The per-replica dump: each stopped node's committed Raft log as `index → digest`, the input of
//! the `replica_divergence` checker.
//!
//! How: after the final drain every node is frozen at once (SIGSTOP) and then stopped one by one
//! (SIGTERM; alone, none can commit anything new), then its store is opened with the raft
//! crate's own [`LogStore`] on the node's directory, and entries from the first held index to the
//! last are read through openraft's `RaftLogReader`. The Raft log is the CommitLog (one copy of every
//! record, DLedger style), so equal entries at equal indexes mean equal records at equal physical
//! offsets, and the ConsumeQueues derived from them are equal too. This is simpler and stricter than
//! an admin call per queue and needs no broker feature.
//!
//! Caveats: opening runs the store's recovery, which may zero a torn tail of un-fsynced bytes — what
//! the node itself would do on its next start, never acknowledged data. The committed index is the
//! one the store last persisted ("may lag"); after a graceful stop it is current.

use std::path::Path;

use openraft::storage::RaftLogReader;
use openraft::storage::RaftLogStorage;
use raftmq_raft::LogStore;
use raftmq_raft::RaftConfig;
use raftmq_raft::payload_codec;

use crate::checker::ReplicaDump;

/// Entries read per call.
const DUMP_BATCH_COUNT: u64 = 1024;

/// Why a dump failed.
#[derive(Debug, thiserror::Error)]
pub enum DumpError {
    /// The store could not be opened.
    #[error("opening the store at {dir}: {source}")]
    Open {
        /// The directory.
        dir: String,
        /// The cause.
        source: raftmq_raft::StoreError,
    },
    /// Reading it failed.
    #[error("reading the store at {dir}: {message}")]
    Read {
        /// The directory.
        dir: String,
        /// The cause.
        message: String,
    },
}

fn fnv1a(hash: &mut u64, bytes: &[u8]) {
    for b in bytes {
        *hash ^= u64::from(*b);
        *hash = hash.wrapping_mul(0x0000_0100_0000_01B3);
    }
}

/// Dumps the store at `store_dir` (the node must be stopped).
pub async fn dump_replica(
    group: &str,
    node: &str,
    store_dir: &Path,
    segment_bytes: u64,
) -> Result<ReplicaDump, DumpError> {
    let dir = store_dir.display().to_string();
    let read_err = |e: &dyn std::fmt::Display| DumpError::Read { dir: dir.clone(), message: e.to_string() };
    let cfg = RaftConfig { segment_size_bytes: segment_bytes, ..RaftConfig::default() };
    let mut store = LogStore::open(store_dir, &cfg).map_err(|source| DumpError::Open { dir: dir.clone(), source })?;
    let state = store.get_log_state().await.map_err(|e| read_err(&e))?;
    let committed = store.read_committed().await.map_err(|e| read_err(&e))?;
    let first = state.last_purged_log_id.map_or(0, |p| p.index + 1);
    let last = state.last_log_id.map(|l| l.index);
    let mut records = Vec::new();
    if let Some(last) = last {
        let mut lo = first;
        while lo <= last {
            let hi = (lo + DUMP_BATCH_COUNT).min(last + 1);
            let entries = store.try_get_log_entries(lo..hi).await.map_err(|e| read_err(&e))?;
            if entries.is_empty() {
                break;
            }
            for e in &entries {
                let (kind, tag, bytes) = payload_codec::encode(&e.payload).map_err(|err| read_err(&err))?;
                let mut h = 0xcbf2_9ce4_8422_2325u64;
                fnv1a(&mut h, &e.log_id.leader_id.term.to_be_bytes());
                fnv1a(&mut h, format!("{kind:?}").as_bytes());
                fnv1a(&mut h, &[tag]);
                fnv1a(&mut h, &bytes);
                records.push((e.log_id.index, format!("t{}:{h:016x}", e.log_id.leader_id.term)));
            }
            lo = hi;
        }
    }
    Ok(ReplicaDump::new(group, node, first, committed.map_or(0, |c| c.index), records))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn an_empty_store_dumps_nothing() -> anyhow::Result<()> {
        let dir = tempfile::tempdir()?;
        let d = dump_replica("g", "n1", dir.path(), RaftConfig::default().segment_size_bytes).await?;
        assert_eq!((d.first, d.committed, d.records.len()), (0, 0, 0));
        Ok(())
    }
}
