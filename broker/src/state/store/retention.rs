//! The store's side of retention: the boundary P, the manifest of the tables at P (built for a
//! snapshot, loaded on install or restart), ConsumeQueue and IndexFile deletion below the
//! CommitLog's minimum, and the disk-full flag.
//!
//! Invariant: a manifest's queues name directories only through [`safe_queues`], so a forged or
//! corrupt manifest never reaches a path outside the store.

use std::io;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use raftmq_raft::type_config::LogId;
use tokio::sync::watch;
use tracing::error;
use tracing::info;
use tracing::warn;

use super::MessageStore;
use super::unpoison;
use crate::state::delay_offsets::DelayOffsetTable;
use crate::state::entry::DelayProgress;
use crate::state::manifest::Manifest;
use crate::state::manifest::QueueStart;
use crate::state::manifest::RetentionBoundary;
use crate::state::offsets::ConsumerOffsetTable;
use crate::state::pop::PopTable;
use crate::state::rebalance_lock::RebalanceLockTable;
use crate::state::subscription_group::SubscriptionGroupTable;
use crate::state::topic_config::TopicConfigTable;

impl MessageStore {
    pub(super) fn record_boundary(&self, b: RetentionBoundary) {
        self.boundary.send_if_modified(|cur| {
            let newer = cur.is_none_or(|c| c.index < b.index);
            if newer {
                info!(index = b.index, next_pos = b.next_pos, "retention boundary set");
                *cur = Some(b);
            }
            newer
        });
    }

    /// The retention boundary P last applied or loaded (the log is, or is about to be, purged to it).
    pub fn retention_boundary(&self) -> Option<RetentionBoundary> {
        *self.boundary.borrow()
    }

    /// Watch of [`Self::retention_boundary`].
    pub fn retention_boundary_watch(&self) -> watch::Receiver<Option<RetentionBoundary>> {
        self.boundary.subscribe()
    }

    /// Refuses sends (`Some(disk used ratio)`) or accepts them again (`None`); returns the previous value.
    pub fn set_disk_full(&self, ratio: Option<f64>) -> Option<f64> {
        std::mem::replace(&mut unpoison(self.retention.lock()).disk_full, ratio)
    }

    /// The disk used ratio while sends are refused for a full disk.
    pub fn disk_full(&self) -> Option<f64> {
        unpoison(self.retention.lock()).disk_full
    }

    /// The manifest at boundary `b` of the state applied up to `applied` (called between applies).
    pub(super) fn manifest_at(&self, b: RetentionBoundary, applied: u64) -> Manifest {
        let next_phy = i64::try_from(b.next_pos).unwrap_or(i64::MAX);
        let mut queues: Vec<QueueStart> = self
            .consume_queues()
            .iter()
            .map(|(topic, queue_id, q)| QueueStart {
                topic: topic.to_owned(),
                queue_id,
                next_offset: q.offset_at_or_above_phy(next_phy),
            })
            .collect();
        queues.sort_by(|a, b| (&a.topic, a.queue_id).cmp(&(&b.topic, b.queue_id)));
        Manifest { boundary: b, queues, ..self.tables_now(applied) }
    }

    pub(super) fn load_metadata(&self, m: Manifest) {
        let boundary = m.boundary;
        self.load_tables(m);
        self.commit_log.advance_committed_end(i64::try_from(boundary.next_pos).unwrap_or(i64::MAX));
        self.commit_log.forget_files();
        self.record_boundary(boundary);
    }

    /// The metadata tables of `m`, as of its `meta_index` (entries up to it change no table).
    pub(super) fn load_tables(&self, m: Manifest) {
        {
            let mut meta = unpoison(self.meta.write());
            meta.topics = TopicConfigTable::from_wrapper(m.topics, &self.settings.system_topics);
            meta.groups = SubscriptionGroupTable::from_wrapper(m.groups);
            meta.offsets = ConsumerOffsetTable::from_wrapper(m.offsets);
            let mut delay_offsets = DelayOffsetTable::new();
            delay_offsets.apply(&m.delay_offsets);
            meta.delay_offsets = delay_offsets;
            meta.used_node_ids = m.used_node_ids.into_iter().collect();
            meta.acl = m.acl.map(Arc::new);
            meta.locks = RebalanceLockTable::from_records(m.lock_clock_ms, m.locks);
            meta.pop = PopTable::from_parts(m.pop_clock_ms, m.pop_queues);
            self.publish_acl(meta.acl.clone());
        }
        // Topics may have changed under the leader's queue-offset cache.
        self.topic_generation.fetch_add(1, Ordering::AcqRel);
        unpoison(self.retention.lock()).meta_as_of = Some(m.meta_index);
    }

    /// The metadata tables as they are now (`meta_index`: the index they are as of), no queues.
    pub(super) fn tables_now(&self, applied: u64) -> Manifest {
        // Tables restored from a manifest or checkpoint may be ahead of what was re-applied since.
        let meta_index = unpoison(self.retention.lock()).meta_as_of.map_or(applied, |m| m.max(applied));
        let meta = self.metadata();
        Manifest {
            boundary: RetentionBoundary { index: 0, term: 0, next_pos: 0 },
            meta_index,
            queues: Vec::new(),
            topics: meta.topics.to_wrapper(),
            groups: meta.groups.to_wrapper(),
            offsets: meta.offsets.to_wrapper(),
            delay_offsets: meta
                .delay_offsets
                .iter()
                .map(|(queue_id, offset)| DelayProgress { queue_id, offset })
                .collect(),
            used_node_ids: meta.used_node_ids.iter().copied().collect(),
            acl: meta.acl.as_deref().cloned(),
            lock_clock_ms: meta.locks.clock_ms(),
            locks: meta.locks.records(),
            pop_clock_ms: meta.pop.clock_ms(),
            pop_queues: meta.pop.queues().map(|(q, s)| (q.clone(), s.clone())).collect(),
        }
    }

    pub(super) fn decode_manifest(manifest: &[u8], last: LogId) -> io::Result<Manifest> {
        let m = Manifest::decode(manifest).map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))?;
        if m.boundary.index != last.index || m.boundary.term != last.leader_id.term {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!("manifest boundary {}-{} is not the snapshot's {last}", m.boundary.term, m.boundary.index),
            ));
        }
        Ok(m)
    }

    /// A leader's snapshot installed: ConsumeQueues and IndexFiles emptied, every queue starting at
    /// the manifest's offsets, the tables loaded from it.
    pub(super) fn install_retention_manifest(&self, manifest: &[u8], last: LogId) -> io::Result<()> {
        let m = Self::decode_manifest(manifest, last)?;
        {
            let mut cq = unpoison(self.cq.write());
            cq.clear_all().map_err(io::Error::other)?;
            for q in safe_queues(&m.queues) {
                cq.get_or_open(&q.topic, q.queue_id)
                    .and_then(|queue| queue.reset_to(q.next_offset))
                    .map_err(io::Error::other)?;
            }
        }
        unpoison(self.index.write()).clear().map_err(io::Error::other)?;
        info!(boundary = %last, meta_index = m.meta_index, queues = m.queues.len(), "installed a retention manifest");
        self.load_metadata(m);
        Ok(())
    }

    /// Startup with a snapshot file (the log starts after its boundary P): queues that the files
    /// hold less of than P start at P's offsets, queue minimums and IndexFiles move to the
    /// CommitLog's minimum, and the metadata tables come from the manifest (openraft re-applies
    /// the entries after P next). Call before raft starts.
    pub fn restore_snapshot(&self, manifest: &[u8], last: LogId) -> io::Result<()> {
        let m = Self::decode_manifest(manifest, last)?;
        {
            let mut cq = unpoison(self.cq.write());
            for q in safe_queues(&m.queues) {
                let queue = cq.get_or_open(&q.topic, q.queue_id).map_err(io::Error::other)?;
                if queue.max_offset() < q.next_offset {
                    queue.reset_to(q.next_offset).map_err(io::Error::other)?;
                }
            }
        }
        let (cq_files, index_files) = self.delete_files_below(m.boundary.next_pos);
        info!(
            boundary = m.boundary.index,
            meta_index = m.meta_index,
            queues = m.queues.len(),
            cq_files,
            index_files,
            "restored the retention snapshot"
        );
        self.load_metadata(m);
        Ok(())
    }

    /// Deletes ConsumeQueue files and IndexFiles wholly below `min_pos` (the CommitLog's minimum
    /// after a purge) and raises every queue's minimum offset to its first unit at or above it, so
    /// pulls below it get OFFSET_MOVED. Returns (ConsumeQueue files, IndexFiles) deleted; a failed
    /// deletion is logged and retried by the next purge (the files are only derived data).
    pub fn delete_files_below(&self, min_pos: u64) -> (usize, usize) {
        let min_phy = i64::try_from(min_pos).unwrap_or(i64::MAX);
        let cq_files = unpoison(self.cq.write()).delete_below_phy(min_phy).unwrap_or_else(|e| {
            error!(error = %e, min_pos, "deleting ConsumeQueue files below the CommitLog minimum failed");
            0
        });
        let index_files = match unpoison(self.index.write()).delete_below(min_phy) {
            Ok(deleted) => deleted.len(),
            Err(e) => {
                error!(error = %e, min_pos, "deleting IndexFiles below the CommitLog minimum failed");
                0
            }
        };
        self.commit_log.forget_files();
        (cq_files, index_files)
    }
}

/// The manifest's queues whose topic can name a directory (`is_storable_topic_dir`): a forged or
/// corrupt manifest's `../x` is skipped, the same way on every replica (a pure function of the
/// manifest), and never becomes a path outside the store.
fn safe_queues(queues: &[QueueStart]) -> impl Iterator<Item = &QueueStart> {
    queues.iter().filter(|q| {
        let safe = raftmq_common::message::validate::is_storable_topic_dir(&q.topic);
        if !safe {
            warn!(topic = ?q.topic, queue_id = q.queue_id, "skipping a snapshot manifest queue whose topic is not a safe name");
        }
        safe
    })
}
