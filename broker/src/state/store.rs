//! `MessageStore`: the broker's state built from the committed Raft log — ConsumeQueues, the replicated
//! metadata (topics, consumer groups, consumer offsets), the committed CommitLog end — and the two
//! seams raft/ calls on every replica: [`ApplyHandler`] (apply) and [`PayloadPatcher`] (append).
//!
//! ```text
//! raft append ──▶ BrokerPatcher::patch ──▶ PHYSICALOFFSET written (every replica, before the CRC)
//! raft apply ──▶ MessageStore::apply(entry)
//!                  MESSAGES: committed end ▲, dispatch::plan ─ok─▶ write_units ─▶ IndexService::put
//!                                              │                                   ─▶ long-poll notify
//!                                              └rejected─▶ reply Rejected (writer resets offsets)
//!                  CONSUMER_OFFSETS / TOPIC_* / SUBSCRIPTION_GROUP_* / DELAY_PROGRESS / NODE_IDS_USED /
//!                  ACL_DOCUMENT (compare-and-set on the last edit) / GROUP_OFFSETS_DELETE /
//!                  QUEUE_LOCKS (the lock table; the reply says which queues were granted) /
//!                  POP (the POP table; the reply is the epoch, or per ack whether it took): metadata
//!                  MESSAGES records re-put by the POP revive (POP_REVIVE_OF) leave the POP table
//!                  RETENTION_PURGE: the retention boundary P (crate::services::retention snapshots and purges there)
//!                  blank / membership: applied position only
//! raft snapshot ──▶ build_manifest: (P, Manifest) ─── install_snapshot ──▶ install_manifest (wipe, load)
//! restart with a snapshot file ──▶ restore_snapshot (queues start at P, metadata loaded)
//! raft checkpoint ──▶ checkpoint(applied): tables, committed end, boundary ──▶ sync: ConsumeQueue and
//!                     IndexFile writes fdatasync'ed outside the locks ──▶ raft saves it
//! restart with a usable checkpoint ──▶ restore_checkpoint (tables loaded; the files already hold the
//!                     units up to it) ──▶ openraft re-applies only the entries after it
//! ```
//!
//! Invariants:
//! - ConsumeQueues and metadata change only here, from committed entries in log order, so every
//!   replica holds the same state and consumers never see uncommitted data (docs/raft-log.md#apply).
//! - The committed end advances before an entry's units become visible, so a unit never points past it.
//! - Recovery ([`MessageStore::open`]) truncates ConsumeQueue units beyond the recovered CommitLog end
//!   before anything is applied (RocketMQ `truncateDirtyLogicFiles`); openraft then re-applies the
//!   committed log (units already present are recognised positionally, metadata is rebuilt), so the
//!   metadata tables need no files of their own while the log is not purged.
//! - `applied` only moves forward; the leader-readiness gate compares its term with the leader's.
//! - The IndexFiles (`<store>/index`) index every accepted record except transaction rollbacks, in
//!   CommitLog order; a record at or below the index's end offset is already indexed, so the re-apply
//!   after a restart never indexes twice. The index is derived data: a failed index write is logged
//!   and the record stays readable by offset, it is not a reason to stop the replica.
//! - After a manifest is loaded (install or restart), metadata entries at or below its `meta_index`
//!   change no table: the manifest already holds their effect (see `retention::Manifest` for why
//!   skipping, not replaying, keeps every replica's `DataVersion` equal). Their ConsumeQueue effects
//!   (units, a deleted topic's queues) are applied, because queues are restored as of P.

use std::collections::BTreeSet;
use std::io;
use std::path::Path;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::Mutex;
use std::sync::MutexGuard;
use std::sync::RwLock;
use std::sync::RwLockReadGuard;
use std::sync::atomic::AtomicBool;
use std::sync::atomic::AtomicU64;
use std::sync::atomic::Ordering;

use bytes::BufMut;
use bytes::Bytes;
use bytes::BytesMut;
use raftmq_common::limits::BROKER_NAME_MAX_BYTES;
use raftmq_common::limits::BROKER_REBALANCE_LOCK_BATCH_MAX_COUNT;
use raftmq_common::limits::BROKER_REBALANCE_LOCK_CLIENT_ID_MAX_BYTES;
use raftmq_common::limits::RAFT_NODE_IDS_MAX_COUNT;
use raftmq_common::message::properties;
use raftmq_common::message::properties::property_of;
use raftmq_common::message::sys_flag::TransactionType;
use raftmq_common::message::validate::dlq_topic;
use raftmq_common::message::validate::pop_retry_topic;
use raftmq_common::message::validate::validate_consumer_group;
use raftmq_common::message::validate::validate_stored_topic;
use raftmq_raft::AppReply;
use raftmq_raft::ApplyHandler;
use raftmq_raft::CommittedEntry;
use raftmq_raft::PayloadPatcher;
use raftmq_raft::type_config::LogId;
use thiserror::Error;
use tokio::sync::oneshot;
use tokio::sync::watch;
use tracing::error;
use tracing::info;
use tracing::warn;

use crate::acl::AclDocument;
use crate::acl::AclVersion;
use crate::state::checkpoint::StoreCheckpoint;
use crate::state::commit_log::CommitLogFiles;
use crate::state::consume_queue::ConsumeQueue;
use crate::state::consume_queue::ConsumeQueueStore;
use crate::state::consume_queue::CqError;
use crate::state::delay_offsets::DelayOffsetTable;
use crate::state::delay_offsets::LevelBacklog;
use crate::state::dispatch::CqAction;
use crate::state::dispatch::DispatchRequest;
use crate::state::dispatch::plan;
use crate::state::dispatch::write_units;
use crate::state::entry::BrokerCommand;
use crate::state::entry::DelayProgress;
use crate::state::entry::LockOp;
use crate::state::entry::PopOp;
use crate::state::entry::patch_physical_offsets;
use crate::state::entry::tag;
use crate::state::index_file::IndexError;
use crate::state::index_file::IndexFileSizes;
use crate::state::index_file::IndexService;
use crate::state::index_file::record_index_key_hashes;
use crate::state::long_poll::Arrival;
use crate::state::long_poll::Full;
use crate::state::long_poll::LongPollRegistry;
use crate::state::long_poll::WaiterId;
use crate::state::manifest::Manifest;
use crate::state::manifest::QueueStart;
use crate::state::manifest::RetentionBoundary;
use crate::state::offsets::ConsumerOffsetTable;
use crate::state::pop::PopQueue;
use crate::state::pop::PopReviveMark;
use crate::state::pop::PopTable;
use crate::state::pop::Receipt;
use crate::state::pull::MessageFilter;
use crate::state::rebalance_lock::LockedQueue;
use crate::state::rebalance_lock::RebalanceLockTable;
use crate::state::subscription_group::SubscriptionGroupTable;
use crate::state::topic_config::SystemTopicOptions;
use crate::state::topic_config::TopicConfigTable;
use raftmq_common::message::validate::RMQ_SYS_SCHEDULE_TOPIC;

/// What the store needs from the broker config.
#[derive(Debug, Clone)]
pub struct StoreSettings {
    /// `storePathRootDir` (holds `commitlog/`, `raftindex/`, `consumequeue/`).
    pub store_root: PathBuf,
    /// ConsumeQueue units per file.
    pub cq_units_per_file: u64,
    /// CommitLog segment size.
    pub segment_size: u64,
    /// Delay levels (ms) for `SCHEDULE_TOPIC_XXXX` tags codes.
    pub delay_levels_ms: Vec<u64>,
    /// What the system-topic preload depends on.
    pub system_topics: SystemTopicOptions,
    /// IndexFile sizes (`maxHashSlotNum`, `maxIndexNum`).
    pub index_sizes: IndexFileSizes,
}

/// Directory of the IndexFiles under the store root (RocketMQ's `index/`).
pub const INDEX_DIR: &str = "index";

/// Replicated metadata: changed only by applied commands.
#[derive(Debug)]
pub struct Metadata {
    /// Topics.
    pub topics: TopicConfigTable,
    /// Consumer groups.
    pub groups: SubscriptionGroupTable,
    /// Committed consumer offsets.
    pub offsets: ConsumerOffsetTable,
    /// Delay-queue delivery progress per `SCHEDULE_TOPIC_XXXX` queue.
    pub delay_offsets: DelayOffsetTable,
    /// Raft node ids this group has recorded as used (NODE_IDS_USED); a new node never gets one.
    pub used_node_ids: BTreeSet<u64>,
    /// The last plain ACL edit replicated (ACL_DOCUMENT), if any.
    pub acl: Option<Arc<AclDocument>>,
    /// Orderly consumers' queue locks (QUEUE_LOCKS).
    pub locks: RebalanceLockTable,
    /// POP consumers' messages in flight and read cursors (POP).
    pub pop: PopTable,
}

/// The last applied log position.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct AppliedPosition {
    /// Term of the last applied entry.
    pub term: u64,
    /// Index of the last applied entry.
    pub index: u64,
}

/// What apply answers the writer of an entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ApplyOutcome {
    /// A MESSAGES entry was dispatched; its payload starts at this physical offset.
    Stored {
        /// Physical offset of payload byte 0.
        payload_pos: u64,
    },
    /// A metadata command was applied.
    Done,
    /// A QUEUE_LOCKS lock batch or a POP ack batch was applied: for each item, whether it took.
    Granted(Vec<bool>),
    /// A POP pop or invisible-time change was applied: the epoch of the receipts it issued.
    Issued(u64),
    /// The entry was not applied (deterministically, on every replica); the reason.
    Rejected(String),
    /// This replica could not apply the committed entry to its local storage (the others may
    /// have): the writer's outcome is unknown here, never "not stored".
    LocalFailure(String),
}

const REPLY_STORED: u8 = 0;
const REPLY_DONE: u8 = 1;
const REPLY_REJECTED: u8 = 2;
const REPLY_LOCAL_FAILURE: u8 = 3;
const REPLY_GRANTED: u8 = 4;
const REPLY_ISSUED: u8 = 5;

impl ApplyOutcome {
    /// The reply bytes handed back through raft.
    pub fn encode(&self) -> AppReply {
        let mut out = BytesMut::new();
        match self {
            ApplyOutcome::Stored { payload_pos } => {
                out.put_u8(REPLY_STORED);
                out.put_u64(*payload_pos);
            }
            ApplyOutcome::Done => out.put_u8(REPLY_DONE),
            ApplyOutcome::Granted(granted) => {
                out.put_u8(REPLY_GRANTED);
                out.extend(granted.iter().map(|g| u8::from(*g)));
            }
            ApplyOutcome::Issued(epoch_ms) => {
                out.put_u8(REPLY_ISSUED);
                out.put_u64(*epoch_ms);
            }
            ApplyOutcome::Rejected(reason) => {
                out.put_u8(REPLY_REJECTED);
                out.put_slice(reason.as_bytes());
            }
            ApplyOutcome::LocalFailure(reason) => {
                out.put_u8(REPLY_LOCAL_FAILURE);
                out.put_slice(reason.as_bytes());
            }
        }
        AppReply(out.freeze())
    }

    /// Reads reply bytes (anything unreadable is a rejection).
    pub fn decode(reply: &AppReply) -> ApplyOutcome {
        match reply.0.split_first() {
            Some((&REPLY_STORED, rest)) => match <[u8; 8]>::try_from(rest) {
                Ok(b) => ApplyOutcome::Stored { payload_pos: u64::from_be_bytes(b) },
                Err(_) => ApplyOutcome::Rejected("malformed apply reply".to_owned()),
            },
            Some((&REPLY_DONE, _)) => ApplyOutcome::Done,
            Some((&REPLY_GRANTED, rest)) => ApplyOutcome::Granted(rest.iter().map(|b| *b == 1).collect()),
            Some((&REPLY_ISSUED, rest)) => match <[u8; 8]>::try_from(rest) {
                Ok(b) => ApplyOutcome::Issued(u64::from_be_bytes(b)),
                Err(_) => ApplyOutcome::Rejected("malformed apply reply".to_owned()),
            },
            Some((&REPLY_REJECTED, rest)) => ApplyOutcome::Rejected(String::from_utf8_lossy(rest).into_owned()),
            Some((&REPLY_LOCAL_FAILURE, rest)) => {
                ApplyOutcome::LocalFailure(String::from_utf8_lossy(rest).into_owned())
            }
            _ => ApplyOutcome::Rejected("empty apply reply".to_owned()),
        }
    }
}

/// Why the store could not open.
#[derive(Debug, Error)]
pub enum StoreOpenError {
    /// The ConsumeQueues could not be recovered.
    #[error("ConsumeQueue recovery failed: {0}")]
    ConsumeQueue(#[from] CqError),
    /// The IndexFiles could not be opened.
    #[error("IndexFile recovery failed: {0}")]
    Index(#[from] IndexError),
    /// The config is unusable.
    #[error("{0}")]
    Config(String),
}

/// Retention bookkeeping of a replica.
#[derive(Debug, Default)]
struct RetentionState {
    /// Metadata entries at or below this index are already in the tables (a manifest was loaded).
    meta_as_of: Option<u64>,
    /// The disk used ratio that refuses sends, while it is at or above the warning watermark.
    disk_full: Option<f64>,
}

/// The broker's applied state. Shared (`Arc`) between raft's apply task and the processors.
#[derive(Debug)]
pub struct MessageStore {
    settings: StoreSettings,
    cq: RwLock<ConsumeQueueStore>,
    meta: RwLock<Metadata>,
    index: RwLock<IndexService>,
    commit_log: CommitLogFiles,
    applied: watch::Sender<AppliedPosition>,
    long_poll: Mutex<LongPollRegistry<oneshot::Sender<()>>>,
    topic_generation: AtomicU64,
    failed: Mutex<Option<String>>,
    /// `failed` is set: raft asks after every applied entry, so the healthy answer takes no lock.
    has_failed: AtomicBool,
    /// Why applies wait for disk space, while they do (set by a ConsumeQueue write that found the
    /// disk full, cleared by the next entry applied in full).
    space_wait: Mutex<Option<String>>,
    /// The last apply stopped for lack of space and must be tried again (`take_space_retry`).
    space_retry: AtomicBool,
    retention: Mutex<RetentionState>,
    boundary: watch::Sender<Option<RetentionBoundary>>,
    /// The last replicated plain ACL edit, for the task that puts it in force (`crate::acl`).
    acl_document: watch::Sender<Option<Arc<AclDocument>>>,
}

fn unpoison<T>(r: Result<T, std::sync::PoisonError<T>>) -> T {
    r.unwrap_or_else(std::sync::PoisonError::into_inner)
}

impl MessageStore {
    /// Opens the ConsumeQueues under `settings.store_root` and truncates every unit whose record does
    /// not end at or before `log_end`, the recovered CommitLog end.
    pub fn open(settings: StoreSettings, log_end: u64) -> Result<Self, StoreOpenError> {
        let phy_end = i64::try_from(log_end).map_err(|_| StoreOpenError::Config("log end beyond i64".into()))?;
        let mut cq = ConsumeQueueStore::open(&settings.store_root, settings.cq_units_per_file)?;
        cq.truncate_above_phy(phy_end)?;
        let queues = cq.iter().count();
        info!(queues, log_end, "ConsumeQueues recovered");
        let index = IndexService::open(&settings.store_root.join(INDEX_DIR), settings.index_sizes)?;
        info!(files = index.file_count(), end_phy_offset = index.end_phy_offset(), "IndexFiles opened");
        let meta = Metadata {
            topics: TopicConfigTable::with_system_topics(&settings.system_topics),
            groups: SubscriptionGroupTable::new(),
            offsets: ConsumerOffsetTable::new(),
            delay_offsets: DelayOffsetTable::new(),
            used_node_ids: BTreeSet::new(),
            acl: None,
            locks: RebalanceLockTable::new(),
            pop: PopTable::new(),
        };
        let commit_log = CommitLogFiles::new(&settings.store_root, settings.segment_size);
        let (applied, _) = watch::channel(AppliedPosition::default());
        Ok(MessageStore {
            settings,
            cq: RwLock::new(cq),
            meta: RwLock::new(meta),
            index: RwLock::new(index),
            commit_log,
            applied,
            long_poll: Mutex::new(LongPollRegistry::default()),
            topic_generation: AtomicU64::new(0),
            failed: Mutex::new(None),
            has_failed: AtomicBool::new(false),
            space_wait: Mutex::new(None),
            space_retry: AtomicBool::new(false),
            retention: Mutex::new(RetentionState::default()),
            boundary: watch::channel(None).0,
            acl_document: watch::channel(None).0,
        })
    }

    /// The last replicated plain ACL edit applied here, and its changes from now on.
    pub fn acl_documents(&self) -> watch::Receiver<Option<Arc<AclDocument>>> {
        self.acl_document.subscribe()
    }

    fn publish_acl(&self, doc: Option<Arc<AclDocument>>) {
        self.acl_document.send_if_modified(|cur| {
            let newer = doc.as_ref().is_some_and(|d| cur.as_ref().is_none_or(|c| c.version < d.version));
            if newer {
                *cur = doc;
            }
            newer
        });
    }

    /// The store root.
    pub fn store_root(&self) -> &Path {
        &self.settings.store_root
    }

    /// ConsumeQueues, read-only (pull, offsets queries). Never hold across an await.
    pub fn consume_queues(&self) -> RwLockReadGuard<'_, ConsumeQueueStore> {
        unpoison(self.cq.read())
    }

    /// Replicated metadata, read-only. Never hold across an await.
    pub fn metadata(&self) -> RwLockReadGuard<'_, Metadata> {
        unpoison(self.meta.read())
    }

    /// The IndexFiles, read-only (QUERY_MESSAGE). Never hold across an await.
    pub fn index(&self) -> RwLockReadGuard<'_, IndexService> {
        unpoison(self.index.read())
    }

    /// CommitLog segment size (`mappedFileSizeCommitLog`): no Raft entry may be larger.
    pub fn segment_size(&self) -> u64 {
        self.settings.segment_size
    }

    /// Delay levels (ms) of `messageDelayLevel`; level n is index n − 1.
    pub fn delay_levels_ms(&self) -> &[u64] {
        &self.settings.delay_levels_ms
    }

    /// Every configured delay level's backlog, as this replica's applied state has it (brokerStatus
    /// and `/metrics`).
    pub fn level_backlogs(&self) -> Vec<LevelBacklog> {
        let delivered: Vec<i64> = {
            let meta = self.metadata();
            (0..self.delay_levels_ms().len()).map(|q| meta.delay_offsets.get(q as i32)).collect()
        };
        delivered
            .into_iter()
            .enumerate()
            .map(|(queue_id, delivered)| {
                let (_, stored) = self.queue_offsets(RMQ_SYS_SCHEDULE_TOPIC, queue_id as i32);
                LevelBacklog { level: queue_id + 1, delivered, stored }
            })
            .collect()
    }

    /// The committed CommitLog.
    pub fn commit_log(&self) -> &CommitLogFiles {
        &self.commit_log
    }

    /// (min, max) offsets of a queue.
    pub fn queue_offsets(&self, topic: &str, queue_id: i32) -> (u64, u64) {
        self.consume_queues().offsets(topic, queue_id)
    }

    /// Watch of the last applied position.
    pub fn applied(&self) -> watch::Receiver<AppliedPosition> {
        self.applied.subscribe()
    }

    /// Bumped whenever a topic is deleted: the leader's queue-offset cache must be dropped.
    pub fn topic_generation(&self) -> u64 {
        self.topic_generation.load(Ordering::Acquire)
    }

    /// Why apply failed on local storage, if it did (the replica must stop serving).
    pub fn failure(&self) -> Option<String> {
        if !self.has_failed.load(Ordering::Acquire) {
            return None;
        }
        unpoison(self.failed.lock()).clone()
    }

    /// Why applies wait for disk space, while they do (the replica resumes by itself once space is
    /// freed).
    pub fn apply_space_wait(&self) -> Option<String> {
        unpoison(self.space_wait.lock()).clone()
    }

    fn long_poll(&self) -> MutexGuard<'_, LongPollRegistry<oneshot::Sender<()>>> {
        unpoison(self.long_poll.lock())
    }

    /// Suspends a pull on a queue until a unit at or beyond `offset` matching `filter` is applied, or
    /// until the caller gives up ([`Self::cancel_pull`]). The receiver fires on arrival. Already
    /// arrived (checked after registering, so no wake-up is lost): `Ok(None)`.
    pub fn suspend_pull(
        &self,
        topic: &str,
        queue_id: i32,
        offset: i64,
        filter: MessageFilter,
        deadline_ms: u64,
    ) -> Result<Option<(WaiterId, oneshot::Receiver<()>)>, Full<()>> {
        let (tx, rx) = oneshot::channel();
        let id = self.long_poll().suspend(topic, queue_id, offset, filter, deadline_ms, tx).map_err(|_| Full(()))?;
        let (_, max) = self.queue_offsets(topic, queue_id);
        if i64::try_from(max).unwrap_or(i64::MAX) > offset {
            self.cancel_pull(id);
            return Ok(None);
        }
        Ok(Some((id, rx)))
    }

    /// Answers every suspended pull now and suspends no more (shutdown).
    pub fn release_suspended_pulls(&self) {
        for waiter in self.long_poll().close() {
            // The pull re-runs and answers; one that already gave up needs nothing.
            let _ = waiter.send(());
        }
    }

    /// Pulls suspended now (tests and metrics).
    pub fn suspended_pulls(&self) -> usize {
        self.long_poll().len()
    }

    /// Forgets a suspended pull (timed out or its connection closed).
    pub fn cancel_pull(&self, id: WaiterId) {
        self.long_poll().cancel(id);
    }

    /// Flushes every ConsumeQueue and IndexFile (shutdown).
    pub fn flush(&self) {
        if let Err(e) = unpoison(self.cq.write()).flush_all() {
            error!(error = %e, "ConsumeQueue flush failed");
        }
        if let Err(e) = self.index().flush() {
            error!(error = %e, "IndexFile flush failed");
        }
    }

    /// Raft stops this replica when an apply leaves this set (`ApplyHandler::failure`): no
    /// checkpoint or snapshot is taken past the failed entry, and a restart re-applies it.
    fn mark_failed(&self, why: String) {
        error!(%why, "applying to local storage failed; this replica must stop serving");
        unpoison(self.failed.lock()).get_or_insert(why);
        self.has_failed.store(true, Ordering::Release);
    }

    fn set_applied(&self, log_id: &LogId) {
        let pos = AppliedPosition { term: log_id.leader_id.term, index: log_id.index };
        self.applied.send_if_modified(|cur| {
            let newer = pos.index > cur.index || pos.term > cur.term;
            if newer {
                *cur = pos;
            }
            newer
        });
    }

    fn apply_messages(&self, payload: &[u8], payload_pos: u64) -> ApplyOutcome {
        // Per queue of the entry, in first-arrival order: (topic, queue, max offset, arrivals).
        // Borrowed from the payload: no owned topic per message.
        let mut arrived: Vec<(&str, i32, u64, Vec<Arrival<'_>>)> = Vec::new();
        let planned = {
            let mut cq = unpoison(self.cq.write());
            let planned = match plan(payload, payload_pos, &*cq, &self.settings.delay_levels_ms) {
                Ok(p) => p,
                Err(rejection) => {
                    warn!(payload_pos, %rejection, "MESSAGES entry rejected by dispatch");
                    return ApplyOutcome::Rejected(rejection.to_string());
                }
            };
            if let Err(e) = write_units(&planned, &mut cq) {
                if e.is_disk_full() {
                    // Units are written at their offsets, so the retry skips the ones already in.
                    let why = format!("ConsumeQueue write at payload {payload_pos} waits for disk space: {e}");
                    unpoison(self.space_wait.lock()).replace(why.clone());
                    self.space_retry.store(true, Ordering::Release);
                    return ApplyOutcome::LocalFailure(why);
                }
                let why = format!("ConsumeQueue write failed at payload {payload_pos}: {e}");
                self.mark_failed(why.clone());
                return ApplyOutcome::LocalFailure(why);
            }
            self.apply_revives(&planned);
            // The last queue found first: a run of one queue's records costs one compare each.
            let mut last = 0;
            for req in planned.iter().filter(|r| r.action == CqAction::Append) {
                // The record's own field: borrowed from the payload, not from `planned`.
                let (topic, queue_id) = (req.record.topic, req.queue_id());
                let at = match arrived.get(last) {
                    Some(a) if a.0 == topic && a.1 == queue_id => last,
                    _ => match arrived.iter().position(|a| a.0 == topic && a.1 == queue_id) {
                        Some(i) => i,
                        None => {
                            arrived.push((topic, queue_id, 0, Vec::new()));
                            arrived.len() - 1
                        }
                    },
                };
                last = at;
                arrived[at].3.push(Arrival { tags_code: req.unit.tags_code, properties: req.record.properties });
            }
            for (topic, queue_id, max, _) in arrived.iter_mut() {
                *max = cq.offsets(topic, *queue_id).1;
            }
            planned
        };
        self.build_index(&planned);
        if !arrived.is_empty() {
            let now = now_ms();
            let mut registry = self.long_poll();
            for (topic, queue_id, max, arrivals) in &arrived {
                let max = i64::try_from(*max).unwrap_or(i64::MAX);
                for woken in registry.notify(topic, *queue_id, max, Some(arrivals), now) {
                    // The waiter may have given up meanwhile; nothing to do then.
                    let _ = woken.payload.send(());
                }
            }
        }
        ApplyOutcome::Stored { payload_pos }
    }

    /// Indexes the records of an accepted entry (RocketMQ's `IndexService.buildIndex`: rollbacks are
    /// not indexed; records already indexed are skipped by `IndexService::put`).
    fn build_index(&self, planned: &[DispatchRequest<'_>]) {
        let mut index = unpoison(self.index.write());
        let now = i64::try_from(now_ms()).unwrap_or(i64::MAX);
        // One buffer for the whole entry: the keys are hashed in place, no string per key.
        let mut hashes = Vec::new();
        for req in planned {
            if TransactionType::of(req.record.sys_flag) == TransactionType::Rollback {
                continue;
            }
            record_index_key_hashes(req.topic(), req.record.properties, &mut hashes);
            if hashes.is_empty() {
                continue;
            }
            if let Err(e) = index.put_hashes(&hashes, req.phy_offset(), req.record.store_timestamp, now) {
                error!(phy_offset = req.phy_offset(), error = %e, "IndexFile write failed; the record is not indexed");
            }
        }
    }

    /// Records the POP revive re-put (into a POP retry topic or a DLQ) leave the POP table: the
    /// message they carry is no longer in flight. Only the epoch the revive saw is removed, so a
    /// replay after a restart or a manifest load changes nothing.
    fn apply_revives(&self, planned: &[DispatchRequest<'_>]) {
        let mut revived = planned
            .iter()
            .filter(|r| r.topic().starts_with('%'))
            .filter_map(|r| Some((r.topic(), property_of(r.record.properties, properties::POP_REVIVE_OF)?)))
            .peekable();
        if revived.peek().is_none() {
            return;
        }
        let mut meta = unpoison(self.meta.write());
        for (topic, value) in revived {
            match revive_receipt(topic, value) {
                Some(receipt) => {
                    if meta.pop.remove(&receipt).is_ok() {
                        sync_pop_offset(&mut meta, &receipt.queue);
                    }
                }
                None => warn!(topic, value, "ignoring a POP revive mark that names another group or is malformed"),
            }
        }
    }

    fn apply_metadata(&self, command: BrokerCommand, index: u64) -> ApplyOutcome {
        let in_manifest = unpoison(self.retention.lock()).meta_as_of.is_some_and(|m| index <= m);
        match &command {
            BrokerCommand::RetentionPurge { index, term, next_pos } => {
                self.record_boundary(RetentionBoundary { index: *index, term: *term, next_pos: *next_pos });
                return ApplyOutcome::Done;
            }
            // The manifest holds the table change; the queues were restored as of P, so they go.
            BrokerCommand::TopicDelete { topic, .. } if in_manifest => {
                self.topic_generation.fetch_add(1, Ordering::AcqRel);
                if let Err(e) = unpoison(self.cq.write()).delete_topic(topic) {
                    self.mark_failed(format!("deleting ConsumeQueues of {topic}: {e}"));
                }
                return ApplyOutcome::Done;
            }
            _ if in_manifest => return ApplyOutcome::Done,
            _ => {}
        }
        let mut meta = unpoison(self.meta.write());
        match command {
            BrokerCommand::Messages(_) => return ApplyOutcome::Rejected("MESSAGES is not metadata".into()),
            BrokerCommand::ConsumerOffsets(commits) => meta.offsets.apply(&commits),
            BrokerCommand::TopicUpsert { proposed_at_ms, config } => meta.topics.upsert(config, proposed_at_ms),
            BrokerCommand::TopicDelete { proposed_at_ms, topic } => {
                meta.topics.delete(&topic, proposed_at_ms);
                meta.offsets.remove_topic(&topic);
                drop(meta);
                self.topic_generation.fetch_add(1, Ordering::AcqRel);
                if let Err(e) = unpoison(self.cq.write()).delete_topic(&topic) {
                    self.mark_failed(format!("deleting ConsumeQueues of {topic}: {e}"));
                }
            }
            BrokerCommand::SubscriptionGroupUpsert { proposed_at_ms, config } => {
                meta.groups.upsert(config, proposed_at_ms)
            }
            BrokerCommand::SubscriptionGroupDelete { proposed_at_ms, group } => {
                meta.groups.delete(&group, proposed_at_ms);
                meta.pop.remove_group(&group);
            }
            BrokerCommand::GroupOffsetsDelete { group, .. } => meta.offsets.remove_group(&group),
            BrokerCommand::DelayProgress(levels) => meta.delay_offsets.apply(&levels),
            BrokerCommand::NodeIdsUsed { members, new_id } => {
                // Deterministic on every replica: a reused id is refused everywhere, nothing recorded.
                if let Some(id) = new_id
                    && (meta.used_node_ids.contains(&id) || members.contains(&id))
                {
                    return ApplyOutcome::Rejected(format!("raft node id {id} was used before in this group"));
                }
                // The snapshot manifest holds at most RAFT_NODE_IDS_MAX_COUNT ids: a new one past it
                // would stop every replica's snapshots (and so its purges) for good. Recording the
                // current members alone (a removal) is never refused: they are in use already.
                let grown = members.iter().chain(new_id.iter()).filter(|id| !meta.used_node_ids.contains(id)).count();
                if new_id.is_some() && meta.used_node_ids.len() + grown > RAFT_NODE_IDS_MAX_COUNT {
                    return ApplyOutcome::Rejected(format!(
                        "the group has used {} raft node ids; at most {RAFT_NODE_IDS_MAX_COUNT} are recorded",
                        meta.used_node_ids.len()
                    ));
                }
                meta.used_node_ids.extend(members.iter().copied().chain(new_id));
            }
            BrokerCommand::AclDocument { based_on, document } => {
                // Compare-and-set, decided alike on every replica: an edit built on a file that is
                // no longer the group's last would undo the edit in between.
                let last = meta.acl.as_ref().map(|d| d.version);
                if last != based_on {
                    let counter =
                        |v: Option<AclVersion>| v.map_or_else(|| "none".to_owned(), |v| v.counter.to_string());
                    return ApplyOutcome::Rejected(format!(
                        "the ACL changed meanwhile (edit built on version {}, the group is at {}); retry",
                        counter(based_on),
                        counter(last)
                    ));
                }
                let doc = Arc::new(document);
                meta.acl = Some(Arc::clone(&doc));
                drop(meta);
                self.publish_acl(Some(doc));
            }
            BrokerCommand::QueueLocks { op, stamp_ms, group, client_id, queues } => {
                // Deterministic on every replica: a batch with a name no door lets through is refused
                // whole (the table never holds what LOCK_BATCH_MQ would refuse).
                if let Err(why) = check_lock_names(&group, &client_id, &queues) {
                    return ApplyOutcome::Rejected(why);
                }
                return match op {
                    LockOp::Lock => ApplyOutcome::Granted(meta.locks.lock(&group, &queues, &client_id, stamp_ms)),
                    LockOp::Unlock => {
                        meta.locks.unlock(&group, &queues, &client_id, stamp_ms);
                        ApplyOutcome::Done
                    }
                };
            }
            BrokerCommand::Pop { stamp_ms, op } => return apply_pop(&mut meta, stamp_ms, op),
            // Handled above.
            BrokerCommand::RetentionPurge { .. } => {}
        }
        ApplyOutcome::Done
    }
}

/// Applies a POP entry to the table, keeping the group's committed offsets in step.
fn apply_pop(meta: &mut Metadata, stamp_ms: u64, op: PopOp) -> ApplyOutcome {
    match op {
        PopOp::Pop(plans) => {
            if let Err(why) = plans.iter().try_for_each(|p| check_pop_names(&p.queue)) {
                return ApplyOutcome::Rejected(why);
            }
            match meta.pop.pop(&plans, stamp_ms) {
                Ok(epoch_ms) => {
                    for plan in &plans {
                        sync_pop_offset(meta, &plan.queue);
                    }
                    ApplyOutcome::Issued(epoch_ms)
                }
                Err(refusal) => ApplyOutcome::Rejected(refusal.to_string()),
            }
        }
        PopOp::Ack(receipts) => {
            let taken = receipts
                .iter()
                .map(|r| {
                    let ok = meta.pop.ack(r, stamp_ms).is_ok();
                    if ok {
                        sync_pop_offset(meta, &r.queue);
                    }
                    ok
                })
                .collect();
            ApplyOutcome::Granted(taken)
        }
        PopOp::ChangeInvisible { receipt, invisible_ms } => {
            match meta.pop.change_invisible(&receipt, invisible_ms, stamp_ms) {
                Ok(epoch_ms) => ApplyOutcome::Issued(epoch_ms),
                Err(refusal) => ApplyOutcome::Rejected(refusal.to_string()),
            }
        }
    }
}

/// The group's committed offset of a popped queue follows the POP table (lowest in flight, else
/// the cursor), so lag, admin tools and a 4.x consumer of the same group see where it stands.
fn sync_pop_offset(meta: &mut Metadata, queue: &PopQueue) {
    if let Some(offset) = meta.pop.committed_offset(queue) {
        meta.offsets.commit(&queue.topic, &queue.group, queue.queue_id, offset);
    }
}

/// Whether a POP queue's names are ones POP_MESSAGE takes (`Err`: why not).
pub fn check_pop_names(queue: &PopQueue) -> Result<(), String> {
    validate_consumer_group(&queue.group).map_err(|e| format!("consumer group: {e}"))?;
    validate_stored_topic(&queue.topic).map_err(|e| format!("topic: {e}"))?;
    if queue.queue_id < 0 {
        return Err(format!("queue id {} is negative", queue.queue_id));
    }
    Ok(())
}

/// The receipt a revive mark names, when the record that carries it is in that group's POP retry
/// topic or DLQ (a mark anywhere else is ignored: only the revive service writes marks there).
fn revive_receipt(record_topic: &str, value: &str) -> Option<Receipt> {
    let mark = PopReviveMark::parse(value)?;
    let home = pop_retry_topic(&mark.group, &mark.origin_topic);
    (record_topic == home || record_topic == dlq_topic(&mark.group)).then(|| mark.receipt())
}

/// Whether the names of a lock batch are ones LOCK_BATCH_MQ takes (`Err`: why not).
pub fn check_lock_names(group: &str, client_id: &str, queues: &[LockedQueue]) -> Result<(), String> {
    validate_consumer_group(group).map_err(|e| format!("consumer group: {e}"))?;
    if client_id.is_empty() || client_id.len() > BROKER_REBALANCE_LOCK_CLIENT_ID_MAX_BYTES {
        return Err(format!("clientId must be 1 to {BROKER_REBALANCE_LOCK_CLIENT_ID_MAX_BYTES} bytes"));
    }
    if queues.len() > BROKER_REBALANCE_LOCK_BATCH_MAX_COUNT {
        return Err(format!("at most {BROKER_REBALANCE_LOCK_BATCH_MAX_COUNT} queues per batch"));
    }
    for q in queues {
        validate_stored_topic(&q.topic).map_err(|e| format!("topic: {e}"))?;
        if q.broker_name.is_empty() || q.broker_name.len() > BROKER_NAME_MAX_BYTES {
            return Err(format!("brokerName must be 1 to {BROKER_NAME_MAX_BYTES} bytes"));
        }
    }
    Ok(())
}

/// Retention: the boundary, the manifest, file deletion below it, the disk-full flag.
impl MessageStore {
    fn record_boundary(&self, b: RetentionBoundary) {
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
    fn manifest_at(&self, b: RetentionBoundary, applied: u64) -> Manifest {
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

    fn load_metadata(&self, m: Manifest) {
        let boundary = m.boundary;
        self.load_tables(m);
        self.commit_log.advance_committed_end(i64::try_from(boundary.next_pos).unwrap_or(i64::MAX));
        self.commit_log.forget_files();
        self.record_boundary(boundary);
    }

    /// The metadata tables of `m`, as of its `meta_index` (entries up to it change no table).
    fn load_tables(&self, m: Manifest) {
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
    fn tables_now(&self, applied: u64) -> Manifest {
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

    fn decode_manifest(manifest: &[u8], last: LogId) -> io::Result<Manifest> {
        let m = Manifest::decode(manifest).map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))?;
        if m.boundary.index != last.index || m.boundary.term != last.leader_id.term {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!("manifest boundary {}-{} is not the snapshot's {last}", m.boundary.term, m.boundary.index),
            ));
        }
        Ok(m)
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

impl ApplyHandler for MessageStore {
    fn apply(&self, entry: CommittedEntry) -> AppReply {
        let end = entry.payload_pos.saturating_add(entry.body.len() as u64);
        self.commit_log.advance_committed_end(i64::try_from(end).unwrap_or(i64::MAX));
        let outcome = if entry.tag == tag::MESSAGES {
            self.apply_messages(&entry.body, entry.payload_pos)
        } else {
            match BrokerCommand::decode(entry.tag, entry.body) {
                Ok(command) => self.apply_metadata(command, entry.log_id.index),
                Err(e) => {
                    // Deterministic on every replica: the entry is skipped everywhere.
                    warn!(log_id = %entry.log_id, error = %e, "skipping an undecodable broker entry");
                    ApplyOutcome::Rejected(e.to_string())
                }
            }
        };
        if !self.space_retry.load(Ordering::Acquire) {
            self.set_applied(&entry.log_id);
        }
        outcome.encode()
    }

    fn take_space_retry(&self) -> Option<String> {
        let mut wait = unpoison(self.space_wait.lock());
        if self.space_retry.swap(false, Ordering::AcqRel) {
            return wait.clone();
        }
        if let Some(why) = wait.take() {
            info!(%why, "disk space again: applies go on");
        }
        None
    }

    fn apply_other(&self, log_id: LogId) {
        self.set_applied(&log_id);
    }

    fn failure(&self) -> Option<String> {
        MessageStore::failure(self)
    }

    fn build_manifest(&self, applied: LogId) -> io::Result<Option<(LogId, Bytes)>> {
        let Some(b) = self.retention_boundary() else { return Ok(None) };
        if b.index > applied.index {
            // Set by an applied entry, so this cannot happen; refuse rather than build a wrong one.
            return Ok(None);
        }
        let bytes = self.manifest_at(b, applied.index).encode().map_err(io::Error::other)?;
        // openraft purges the log to P right after this build: from now on a pull below the new
        // minimum is told OFFSET_MOVED instead of finding units whose records are going.
        unpoison(self.cq.write()).raise_min_to_phy(i64::try_from(b.next_pos).unwrap_or(i64::MAX));
        info!(boundary = b.index, applied = %applied, bytes = bytes.len(), "retention manifest built");
        Ok(Some((raftmq_raft::type_config::log_id(b.term, b.index), bytes)))
    }

    fn install_manifest(&self, manifest: Bytes, last: LogId) -> io::Result<()> {
        let m = Self::decode_manifest(&manifest, last)?;
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
        self.set_applied(&last);
        Ok(())
    }

    fn checkpoint(&self, applied: LogId) -> io::Result<Option<Bytes>> {
        // Each queue's end as of `applied`: a restart checks its files still reach it.
        let mut queues: Vec<QueueStart> = self
            .consume_queues()
            .iter()
            .map(|(topic, queue_id, q)| QueueStart { topic: topic.to_owned(), queue_id, next_offset: q.max_offset() })
            .collect();
        queues.sort_by(|a, b| (&a.topic, a.queue_id).cmp(&(&b.topic, b.queue_id)));
        let checkpoint = StoreCheckpoint {
            committed_end: u64::try_from(crate::state::pull::CommitLogReader::max_offset(&self.commit_log))
                .unwrap_or(0),
            boundary: self.retention_boundary(),
            tables: Manifest { queues, ..self.tables_now(applied.index) },
        };
        checkpoint.encode().map(Some).map_err(io::Error::other)
    }

    fn sync(&self) -> io::Result<()> {
        // Only the paths are taken under the locks: apply keeps running while the data is synced.
        let queues = self.consume_queues().unsynced();
        let index = self.index().current_path();
        for q in &queues {
            q.paths.iter().try_for_each(|p| sync_data(p))?;
        }
        if let Some(path) = &index {
            sync_data(path)?;
        }
        // IndexFiles are created without a directory sync of their own.
        sync_dir(&self.settings.store_root.join(INDEX_DIR))?;
        let mut cq = unpoison(self.cq.write());
        for q in &queues {
            cq.mark_synced(q);
        }
        Ok(())
    }

    fn restore_checkpoint(&self, data: Bytes, applied: LogId) -> io::Result<()> {
        let c = StoreCheckpoint::decode(&data).map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))?;
        if c.tables.meta_index < applied.index {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!("checkpoint tables as of {} are older than its applied {applied}", c.tables.meta_index),
            ));
        }
        // The re-apply after it appends each queue's next units where the checkpoint left it: a
        // queue the files hold less of (its topic deleted after the checkpoint, units lost with
        // the page cache, a removed consumequeue directory) must be rebuilt from further back.
        {
            let cq = self.consume_queues();
            for q in &c.tables.queues {
                let held = cq.get(&q.topic, q.queue_id).map_or(0, ConsumeQueue::max_offset);
                if held < q.next_offset {
                    return Err(io::Error::new(
                        io::ErrorKind::InvalidData,
                        format!(
                            "ConsumeQueue {}:{} ends at {held}, the checkpoint counted {} units",
                            q.topic, q.queue_id, q.next_offset
                        ),
                    ));
                }
            }
        }
        info!(applied = %applied, meta_index = c.tables.meta_index, committed_end = c.committed_end,
            queues = c.tables.queues.len(), "restoring the checkpoint");
        self.load_tables(c.tables);
        self.commit_log.advance_committed_end(i64::try_from(c.committed_end).unwrap_or(i64::MAX));
        if let Some(b) = c.boundary {
            self.record_boundary(b);
        }
        self.set_applied(&applied);
        Ok(())
    }
}

/// `fdatasync` of a file written through a shared mapping (the kernel writes the mapping's dirty
/// pages back as for `write`); one deleted meanwhile (retention) needs nothing.
fn sync_data(path: &Path) -> io::Result<()> {
    match std::fs::File::open(path) {
        Ok(f) => f.sync_data(),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(e),
    }
}

fn sync_dir(dir: &Path) -> io::Result<()> {
    match std::fs::File::open(dir) {
        Ok(d) => d.sync_all(),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(e),
    }
}

/// The PHYSICALOFFSET patcher raft runs at append time on every replica.
#[derive(Debug, Default, Clone, Copy)]
pub struct BrokerPatcher;

impl PayloadPatcher for BrokerPatcher {
    fn patch(&self, app_tag: u8, payload_pos: u64, payload: &mut [u8]) {
        if app_tag == tag::MESSAGES {
            patch_physical_offsets(payload, payload_pos);
        }
    }
}

/// Wall clock in ms since the epoch ([`crate::state::clock`]: a test harness may skew it).
pub fn now_ms() -> u64 {
    crate::state::clock::now_ms()
}

#[cfg(test)]
mod tests {
    use std::net::SocketAddr;

    use raftmq_common::message::Message;
    use raftmq_common::message::MessageExt;
    use raftmq_raft::type_config::log_id;

    use super::*;
    use crate::config::broker_config::BrokerConfig;
    use crate::state::entry::DelayProgress;
    use crate::state::entry::OffsetCommit;
    use crate::state::entry::encode_messages;

    fn settings(root: &Path) -> StoreSettings {
        StoreSettings {
            store_root: root.to_path_buf(),
            cq_units_per_file: 8,
            segment_size: 1 << 20,
            delay_levels_ms: vec![1000],
            system_topics: SystemTopicOptions::from(&BrokerConfig::default()),
            index_sizes: IndexFileSizes { slot_count: 16, entry_count: 8 },
        }
    }

    fn record(queue_offset: i64) -> MessageExt {
        let host: SocketAddr = "127.0.0.1:10911".parse().unwrap();
        MessageExt {
            message: Message::new("T", &b"body"[..]).with_tags("a"),
            queue_offset,
            born_host: host,
            store_host: host,
            ..MessageExt::default()
        }
    }

    fn entry(index: u64, payload_pos: u64, tag: u8, body: Bytes) -> CommittedEntry {
        let mut body = body.to_vec();
        BrokerPatcher.patch(tag, payload_pos, &mut body);
        CommittedEntry { log_id: log_id(1, index), payload_pos, tag, body: Bytes::from(body) }
    }

    #[test]
    fn acl_edits_apply_only_on_the_edit_they_were_built_on_and_group_offsets_go() {
        use crate::acl::AclDocument;
        use crate::acl::AclVersion;
        let dir = tempfile::tempdir().unwrap();
        let store = MessageStore::open(settings(dir.path()), 0).unwrap();
        let mut documents = store.acl_documents();
        let doc = |counter: i64| AclDocument {
            version: AclVersion { counter, timestamp: counter },
            yaml: "accounts: []".into(),
        };
        let apply = |index: u64, command: BrokerCommand| {
            let (t, b) = command.encode().unwrap();
            ApplyOutcome::decode(&store.apply(entry(index, 0, t, b)))
        };
        assert_eq!(apply(1, BrokerCommand::AclDocument { based_on: None, document: doc(1) }), ApplyOutcome::Done);
        assert_eq!(documents.borrow_and_update().as_ref().map(|d| d.version.counter), Some(1));
        // Built on no edit, or on one that is not the last: rejected, nothing changes.
        let stale = apply(2, BrokerCommand::AclDocument { based_on: None, document: doc(2) });
        assert!(matches!(&stale, ApplyOutcome::Rejected(why) if why.contains("changed meanwhile")), "{stale:?}");
        let based_on = Some(AclVersion { counter: 1, timestamp: 1 });
        assert_eq!(apply(3, BrokerCommand::AclDocument { based_on, document: doc(2) }), ApplyOutcome::Done);
        let again = apply(4, BrokerCommand::AclDocument { based_on, document: doc(3) });
        assert!(matches!(again, ApplyOutcome::Rejected(_)));
        assert_eq!(store.metadata().acl.as_ref().map(|d| d.version.counter), Some(2));
        assert!(documents.has_changed().unwrap());
        // removeOffset: the group's offsets go, the others stay.
        let commits =
            ["g", "h"].map(|group| OffsetCommit { topic: "T".into(), group: group.into(), queue_id: 0, offset: 3 });
        assert_eq!(apply(5, BrokerCommand::ConsumerOffsets(commits.to_vec())), ApplyOutcome::Done);
        assert_eq!(
            apply(6, BrokerCommand::GroupOffsetsDelete { proposed_at_ms: 1, group: "g".into() }),
            ApplyOutcome::Done
        );
        assert_eq!(store.metadata().offsets.query("T", "g", 0), None);
        assert_eq!(store.metadata().offsets.query("T", "h", 0), Some(3));
    }

    /// POP: a pop answers its epoch and moves the group's committed offset to the lowest message
    /// in flight; an ack takes once; a record re-put by the revive with its mark removes exactly
    /// that delivery; a snapshot manifest (and so a checkpoint) carries the table.
    #[test]
    fn pop_entries_and_revive_records_keep_the_table_and_the_group_offset_in_step() {
        use crate::state::pop::PopPlan;
        use crate::state::pop::PopQueue;
        use crate::state::pop::PopReviveMark;
        let dir = tempfile::tempdir().unwrap();
        let store = MessageStore::open(settings(dir.path()), 0).unwrap();
        let apply = |store: &MessageStore, index: u64, command: BrokerCommand| {
            let (t, b) = command.encode().unwrap();
            ApplyOutcome::decode(&store.apply(entry(index, 0, t, b)))
        };
        let queue = PopQueue { group: "g".into(), topic: "T".into(), queue_id: 0 };
        let plan = PopPlan {
            queue: queue.clone(),
            from: 0,
            to: 3,
            offsets: vec![0, 1, 2],
            again: vec![],
            invisible_ms: 1_000,
            fifo: false,
        };
        let epoch = match apply(&store, 1, BrokerCommand::Pop { stamp_ms: 5_000, op: PopOp::Pop(vec![plan]) }) {
            ApplyOutcome::Issued(epoch) => epoch,
            other => panic!("{other:?}"),
        };
        assert_eq!(store.metadata().offsets.query("T", "g", 0), Some(0));
        let receipt = |offset| Receipt { queue: queue.clone(), offset, epoch_ms: epoch };
        let ack = BrokerCommand::Pop { stamp_ms: 5_100, op: PopOp::Ack(vec![receipt(0), receipt(0), receipt(7)]) };
        assert_eq!(apply(&store, 2, ack), ApplyOutcome::Granted(vec![true, false, false]));
        assert_eq!(store.metadata().offsets.query("T", "g", 0), Some(1));
        // Offset 1 expired and was re-put into the group's POP retry topic.
        let mark = PopReviveMark {
            group: "g".into(),
            origin_topic: "T".into(),
            read_topic: "T".into(),
            queue_id: 0,
            offset: 1,
            epoch_ms: epoch,
        };
        let mut revived = record(0);
        revived.message.topic = pop_retry_topic("g", "T").as_str().into();
        revived.message.properties.insert(properties::POP_REVIVE_OF, mark.value());
        let payload = encode_messages(&[revived]).unwrap();
        assert!(
            matches!(store.apply(entry(3, 4096, tag::MESSAGES, payload)), r if matches!(ApplyOutcome::decode(&r), ApplyOutcome::Stored { .. }))
        );
        assert_eq!(store.metadata().offsets.query("T", "g", 0), Some(2));
        assert_eq!(store.metadata().pop.in_flight_count(), 1);
        let bytes = store.tables_now(3).encode().unwrap();
        let other = tempfile::tempdir().unwrap();
        let installed = MessageStore::open(settings(other.path()), 0).unwrap();
        installed.load_tables(Manifest::decode(&bytes).unwrap());
        assert_eq!(installed.metadata().pop, store.metadata().pop);
    }

    /// QUEUE_LOCKS: grants come back per queue, a bad name refuses the batch on every replica,
    /// and a checkpoint and a snapshot manifest carry the table (a restarted or new replica has it).
    #[test]
    fn queue_locks_apply_answer_per_queue_and_survive_checkpoint_and_manifest() {
        use crate::state::rebalance_lock::LockedQueue;
        let dir = tempfile::tempdir().unwrap();
        let store = MessageStore::open(settings(dir.path()), 0).unwrap();
        let q = |queue_id| LockedQueue { topic: "T".into(), broker_name: "b".into(), queue_id };
        let locks = |op, client: &str, stamp_ms, queues: Vec<LockedQueue>| BrokerCommand::QueueLocks {
            op,
            stamp_ms,
            group: "g".into(),
            client_id: client.into(),
            queues,
        };
        let apply = |store: &MessageStore, index: u64, command: BrokerCommand| {
            let (t, b) = command.encode().unwrap();
            ApplyOutcome::decode(&store.apply(entry(index, 0, t, b)))
        };
        assert_eq!(
            apply(&store, 1, locks(LockOp::Lock, "c1", 1_000, vec![q(0), q(1)])),
            ApplyOutcome::Granted(vec![true, true])
        );
        assert_eq!(
            apply(&store, 2, locks(LockOp::Lock, "c2", 2_000, vec![q(1), q(2)])),
            ApplyOutcome::Granted(vec![false, true])
        );
        assert_eq!(apply(&store, 3, locks(LockOp::Unlock, "c2", 2_500, vec![q(2)])), ApplyOutcome::Done);
        let bad = BrokerCommand::QueueLocks {
            op: LockOp::Lock,
            stamp_ms: 3_000,
            group: "g/../x".into(),
            client_id: "c3".into(),
            queues: vec![q(3)],
        };
        assert!(matches!(apply(&store, 4, bad), ApplyOutcome::Rejected(_)));
        let bad_topic = locks(LockOp::Lock, "c3", 3_000, vec![LockedQueue { topic: String::new(), ..q(3) }]);
        assert!(matches!(apply(&store, 5, bad_topic), ApplyOutcome::Rejected(_)));
        let no_client = locks(LockOp::Lock, "", 3_000, vec![q(3)]);
        assert!(matches!(apply(&store, 6, no_client), ApplyOutcome::Rejected(_)));
        assert_eq!(store.metadata().locks.len(), 2);

        let at = log_id(1, 6);
        let data = store.checkpoint(at).unwrap().expect("the store keeps checkpoints");
        let restarted = MessageStore::open(settings(dir.path()), 0).unwrap();
        restarted.restore_checkpoint(data, at).unwrap();
        assert_eq!(restarted.metadata().locks, store.metadata().locks);
        assert_eq!(restarted.metadata().locks.clock_ms(), 2_500);
        // The restarted replica answers from the table: c1 still holds queue 1.
        assert_eq!(
            apply(&restarted, 7, locks(LockOp::Lock, "c2", 3_000, vec![q(1)])),
            ApplyOutcome::Granted(vec![false])
        );

        let manifest = store.tables_now(6);
        assert_eq!(manifest.locks.len(), 2);
        let bytes = manifest.encode().unwrap();
        let other = tempfile::tempdir().unwrap();
        let installed = MessageStore::open(settings(other.path()), 0).unwrap();
        installed.load_tables(Manifest::decode(&bytes).unwrap());
        assert_eq!(installed.metadata().locks, store.metadata().locks);
    }

    /// A checkpoint restores the tables as of its applied index and is refused when a queue's
    /// files end short of what it counted (here: the topic deleted after it), leaving the
    /// state as it was so the replica re-applies from further back instead.
    #[test]
    fn checkpoint_restores_tables_and_is_refused_for_a_queue_that_ends_short() {
        let dir = tempfile::tempdir().unwrap();
        let store = MessageStore::open(settings(dir.path()), 0).unwrap();
        let payload = encode_messages(&[record(0), record(1)]).unwrap();
        store.apply(entry(1, 48, tag::MESSAGES, payload));
        let commit = |offset| {
            BrokerCommand::ConsumerOffsets(vec![OffsetCommit {
                topic: "T".into(),
                group: "g".into(),
                queue_id: 0,
                offset,
            }])
            .encode()
            .unwrap()
        };
        let (t, b) = commit(1);
        store.apply(entry(2, 4096, t, b));
        let at = log_id(1, 2);
        let data = store.checkpoint(at).unwrap().expect("the store keeps checkpoints");
        store.sync().unwrap();
        drop(store);

        let restarted = MessageStore::open(settings(dir.path()), 8192).unwrap();
        restarted.restore_checkpoint(data.clone(), at).unwrap();
        assert_eq!(restarted.metadata().offsets.query("T", "g", 0), Some(1));
        assert_eq!(*restarted.applied().borrow(), AppliedPosition { term: 1, index: 2 });
        // Metadata entries the checkpoint covers change nothing again; later ones apply.
        let (t, b) = commit(2);
        restarted.apply(entry(3, 8192, t, b));
        assert_eq!(restarted.metadata().offsets.query("T", "g", 0), Some(2));
        let (t, b) = BrokerCommand::TopicDelete { proposed_at_ms: 1, topic: "T".into() }.encode().unwrap();
        restarted.apply(entry(4, 8300, t, b));
        drop(restarted);

        let after_delete = MessageStore::open(settings(dir.path()), 8400).unwrap();
        let refused = after_delete.restore_checkpoint(data, at).unwrap_err();
        assert!(refused.to_string().contains("ends at 0"), "{refused}");
        assert_eq!(after_delete.metadata().offsets.query("T", "g", 0), None, "a refused checkpoint changed the tables");
        assert_eq!(*after_delete.applied().borrow(), AppliedPosition::default());
    }

    #[test]
    fn apply_builds_queues_wakes_pulls_and_replays_idempotently() {
        let dir = tempfile::tempdir().unwrap();
        let store = MessageStore::open(settings(dir.path()), 0).unwrap();
        let waiter = store.suspend_pull("T", 0, 0, MessageFilter::all(), u64::MAX).unwrap();
        let (_, mut rx) = waiter.expect("nothing arrived yet");
        let payload = encode_messages(&[record(0), record(1)]).unwrap();
        let e = entry(1, 48, tag::MESSAGES, payload.clone());
        assert_eq!(ApplyOutcome::decode(&store.apply(e.clone())), ApplyOutcome::Stored { payload_pos: 48 });
        assert!(rx.try_recv().is_ok(), "the suspended pull was woken");
        assert_eq!(store.queue_offsets("T", 0), (0, 2));
        assert_eq!(*store.applied().borrow(), AppliedPosition { term: 1, index: 1 });
        // Re-apply (restart) is accepted and changes nothing; a wrong offset is rejected.
        assert_eq!(ApplyOutcome::decode(&store.apply(e)), ApplyOutcome::Stored { payload_pos: 48 });
        let bad = entry(2, 4096, tag::MESSAGES, encode_messages(&[record(5)]).unwrap());
        assert!(matches!(ApplyOutcome::decode(&store.apply(bad)), ApplyOutcome::Rejected(_)));
        assert_eq!(store.queue_offsets("T", 0), (0, 2));
        // Already arrived: no suspension.
        assert!(store.suspend_pull("T", 0, 1, MessageFilter::all(), u64::MAX).unwrap().is_none());
        // Metadata commands.
        let (t, b) = BrokerCommand::ConsumerOffsets(vec![OffsetCommit {
            topic: "T".into(),
            group: "g".into(),
            queue_id: 0,
            offset: 2,
        }])
        .encode()
        .unwrap();
        assert_eq!(ApplyOutcome::decode(&store.apply(entry(3, 8192, t, b))), ApplyOutcome::Done);
        assert_eq!(store.metadata().offsets.query("T", "g", 0), Some(2));
        let progress = |offset| BrokerCommand::DelayProgress(vec![DelayProgress { queue_id: 1, offset }]);
        let (t, b) = progress(4).encode().unwrap();
        assert_eq!(ApplyOutcome::decode(&store.apply(entry(5, 8300, t, b))), ApplyOutcome::Done);
        let (t, b) = progress(3).encode().unwrap();
        store.apply(entry(6, 8400, t, b));
        assert_eq!(store.metadata().delay_offsets.get(1), 4, "a level never moves back");
        let ids = |members: Vec<u64>, new_id| BrokerCommand::NodeIdsUsed { members, new_id }.encode().unwrap();
        let (t, b) = ids(vec![1, 2, 3], Some(4));
        assert_eq!(ApplyOutcome::decode(&store.apply(entry(7, 8500, t, b))), ApplyOutcome::Done);
        let (t, b) = ids(vec![1, 2, 4], Some(3));
        assert!(matches!(ApplyOutcome::decode(&store.apply(entry(8, 8600, t, b))), ApplyOutcome::Rejected(_)));
        let (t, b) = ids(vec![2, 4], Some(1));
        assert!(matches!(ApplyOutcome::decode(&store.apply(entry(9, 8700, t, b))), ApplyOutcome::Rejected(_)));
        assert_eq!(store.metadata().used_node_ids, BTreeSet::from([1, 2, 3, 4]));
        // Ids are recorded up to what a snapshot holds, and refused alike past it.
        let (t, b) = ids((5..=RAFT_NODE_IDS_MAX_COUNT as u64).collect(), None);
        assert_eq!(ApplyOutcome::decode(&store.apply(entry(10, 8800, t, b))), ApplyOutcome::Done);
        let (t, b) = ids(vec![1, 2, 3], Some(RAFT_NODE_IDS_MAX_COUNT as u64 + 1));
        assert!(matches!(ApplyOutcome::decode(&store.apply(entry(11, 8900, t, b))), ApplyOutcome::Rejected(_)));
        assert_eq!(store.metadata().used_node_ids.len(), RAFT_NODE_IDS_MAX_COUNT);
        let (t, b) = BrokerCommand::TopicDelete { proposed_at_ms: 1, topic: "T".into() }.encode().unwrap();
        store.apply(entry(4, 9000, t, b));
        assert_eq!(store.queue_offsets("T", 0), (0, 0));
        assert_eq!(store.topic_generation(), 1);
        assert!(store.failure().is_none());
    }

    #[test]
    fn recovery_truncates_units_beyond_the_log_end() {
        let dir = tempfile::tempdir().unwrap();
        {
            let store = MessageStore::open(settings(dir.path()), 0).unwrap();
            let payload = encode_messages(&[record(0), record(1)]).unwrap();
            store.apply(entry(1, 48, tag::MESSAGES, payload));
            store.flush();
        }
        let second_record_at = {
            let store = MessageStore::open(settings(dir.path()), u64::MAX >> 1).unwrap();
            assert_eq!(store.queue_offsets("T", 0), (0, 2));
            store.consume_queues().get("T", 0).unwrap().unit_at(1).unwrap().phy_offset
        };
        let store = MessageStore::open(settings(dir.path()), second_record_at as u64).unwrap();
        assert_eq!(store.queue_offsets("T", 0), (0, 1));
    }

    /// The entries of [`manifest_install_then_replay_converges_on_the_builders_state`]: index → entry.
    fn retention_log() -> Vec<CommittedEntry> {
        use raftmq_common::protocol::body::subscription_group::SubscriptionGroupConfig;
        use raftmq_common::protocol::body::topic::TopicConfig;
        let cmd = |index: u64, pos: u64, c: BrokerCommand| {
            let (t, b) = c.encode().unwrap();
            entry(index, pos, t, b)
        };
        let msgs = |index: u64, pos: u64, offsets: &[i64]| {
            let records: Vec<MessageExt> = offsets.iter().map(|o| record(*o)).collect();
            entry(index, pos, tag::MESSAGES, encode_messages(&records).unwrap())
        };
        let offset = |o: i64| {
            BrokerCommand::ConsumerOffsets(vec![OffsetCommit {
                topic: "T".into(),
                group: "g".into(),
                queue_id: 0,
                offset: o,
            }])
        };
        vec![
            cmd(1, 48, BrokerCommand::TopicUpsert { proposed_at_ms: 1, config: TopicConfig::new("T") }),
            msgs(2, 1_048, &[0, 1]),
            cmd(3, 2_048, offset(1)),
            msgs(4, 4_096, &[2]),
            msgs(5, 8_192, &[3]), // P: the log up to here is purged; next_pos 12_288
            cmd(6, 12_336, BrokerCommand::TopicUpsert { proposed_at_ms: 6, config: TopicConfig::new("U") }),
            msgs(7, 16_384, &[4]),
            cmd(8, 20_480, offset(3)),
            cmd(9, 20_600, BrokerCommand::DelayProgress(vec![DelayProgress { queue_id: 0, offset: 2 }])),
            cmd(10, 20_700, BrokerCommand::NodeIdsUsed { members: vec![1, 2, 3], new_id: Some(4) }),
            cmd(11, 20_800, BrokerCommand::TopicDelete { proposed_at_ms: 11, topic: "U".into() }),
            cmd(12, 20_900, BrokerCommand::RetentionPurge { index: 5, term: 1, next_pos: 12_288 }),
            cmd(
                13,
                21_000,
                BrokerCommand::SubscriptionGroupUpsert {
                    proposed_at_ms: 13,
                    config: SubscriptionGroupConfig::new("g2"),
                },
            ),
            // Applied after the manifest was built, on both.
            cmd(14, 24_576, BrokerCommand::TopicUpsert { proposed_at_ms: 14, config: TopicConfig::new("V") }),
            msgs(15, 28_672, &[5]),
            cmd(16, 32_768, offset(5)),
        ]
    }

    fn assert_same_state(a: &MessageStore, b: &MessageStore, what: &str) {
        let (ma, mb) = (a.metadata(), b.metadata());
        assert_eq!(ma.topics, mb.topics, "{what}: topics and their DataVersion");
        assert_eq!(ma.groups, mb.groups, "{what}: groups and their DataVersion");
        assert_eq!(ma.offsets, mb.offsets, "{what}: consumer offsets");
        assert_eq!(ma.delay_offsets, mb.delay_offsets, "{what}: delay progress");
        assert_eq!(ma.used_node_ids, mb.used_node_ids, "{what}: used node ids");
        assert_eq!(a.queue_offsets("T", 0), b.queue_offsets("T", 0), "{what}: queue T:0");
        let (qa, qb) = (a.consume_queues(), b.consume_queues());
        let (min, max) = b.queue_offsets("T", 0);
        for o in min..max {
            assert_eq!(qa.get("T", 0).unwrap().unit_at(o), qb.get("T", 0).unwrap().unit_at(o), "{what}: unit {o}");
        }
    }

    #[test]
    fn manifest_install_then_replay_converges_on_the_builders_state() {
        let log = retention_log();
        let p = log_id(1, 5);
        let built_at = 13;
        let dirs = [tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap()];
        let leader = MessageStore::open(settings(dirs[0].path()), 0).unwrap();
        assert_eq!(leader.build_manifest(log_id(1, 0)).unwrap(), None, "no boundary yet");
        for e in &log[..built_at] {
            assert!(!matches!(ApplyOutcome::decode(&leader.apply(e.clone())), ApplyOutcome::Rejected(_)));
        }
        let boundary = RetentionBoundary { index: 5, term: 1, next_pos: 12_288 };
        assert_eq!(leader.retention_boundary(), Some(boundary));
        let (at, manifest) = leader.build_manifest(log_id(1, 13)).unwrap().expect("a boundary is set");
        assert_eq!(at, p);
        let decoded = Manifest::decode(&manifest).unwrap();
        assert_eq!((decoded.meta_index, decoded.queues.len()), (13, 1), "U was deleted before the build");
        assert_eq!(decoded.queues[0].next_offset, 4, "units 0..=3 lie at or below P");

        // A follower behind P installs the manifest, then receives P+1.. (metadata entries up to 13
        // are in the manifest already: re-applying them must not bump a DataVersion again).
        let follower = MessageStore::open(settings(dirs[1].path()), 0).unwrap();
        let stale = encode_messages(&[record(0)]).unwrap();
        follower.apply(entry(1, 48, tag::MESSAGES, stale));
        follower.install_manifest(manifest.clone(), p).unwrap();
        assert_eq!(follower.queue_offsets("T", 0), (4, 4), "stale units wiped, queue starts at P");
        assert_eq!(follower.index().file_count(), 0);
        assert!(follower.install_manifest(manifest.clone(), log_id(2, 5)).is_err(), "wrong boundary term");
        for e in &log[5..] {
            follower.apply(e.clone());
        }
        for e in &log[built_at..] {
            leader.apply(e.clone());
        }
        assert_eq!(follower.retention_boundary(), Some(boundary));
        // Building the manifest raised the leader's minimum; the files go once the log is purged.
        assert_eq!(leader.queue_offsets("T", 0), (4, 6));
        leader.delete_files_below(boundary.next_pos);
        assert_same_state(&leader, &follower, "installed");
        assert!(follower.metadata().topics.get("U").is_none() && follower.metadata().topics.get("V").is_some());

        // A restart on the leader's files with its snapshot converges too.
        leader.flush();
        drop(leader);
        let restarted = MessageStore::open(settings(dirs[0].path()), u64::MAX >> 1).unwrap();
        restarted.restore_snapshot(&manifest, p).unwrap();
        assert_eq!(restarted.queue_offsets("T", 0), (4, 6), "minimum corrected after reopening the files");
        for e in &log[5..] {
            restarted.apply(e.clone());
        }
        assert_same_state(&restarted, &follower, "restarted");
        assert!(restarted.restore_snapshot(b"garbage", p).is_err());
    }

    #[test]
    fn replies_round_trip_and_a_local_failure_stays_apart_from_a_rejection() {
        for outcome in [
            ApplyOutcome::Stored { payload_pos: 48 },
            ApplyOutcome::Done,
            ApplyOutcome::Granted(vec![true, false, true]),
            ApplyOutcome::Granted(Vec::new()),
            ApplyOutcome::Rejected("deterministic".into()),
            ApplyOutcome::LocalFailure("ConsumeQueue write failed".into()),
        ] {
            assert_eq!(ApplyOutcome::decode(&outcome.encode()), outcome);
        }
    }

    #[test]
    fn disk_full_flag() {
        let dir = tempfile::tempdir().unwrap();
        let store = MessageStore::open(settings(dir.path()), 0).unwrap();
        assert_eq!(store.disk_full(), None);
        assert_eq!(store.set_disk_full(Some(0.95)), None);
        assert_eq!(store.disk_full(), Some(0.95));
        assert_eq!(store.set_disk_full(None), Some(0.95));
    }

    #[test]
    fn replies_round_trip() {
        for o in [ApplyOutcome::Stored { payload_pos: 7 }, ApplyOutcome::Done, ApplyOutcome::Rejected("x".into())] {
            assert_eq!(ApplyOutcome::decode(&o.encode()), o);
        }
        assert!(matches!(ApplyOutcome::decode(&AppReply::default()), ApplyOutcome::Rejected(_)));
    }
}
