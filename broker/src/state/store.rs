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

mod retention;

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
    /// The term of the last applied entry: changes once per term, not once per entry.
    applied_term: watch::Sender<u64>,
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
        let (applied_term, _) = watch::channel(0);
        Ok(MessageStore {
            settings,
            cq: RwLock::new(cq),
            meta: RwLock::new(meta),
            index: RwLock::new(index),
            commit_log,
            applied,
            applied_term,
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

    /// Watch of the last applied entry's term: for who waits for a new leader's first entry to
    /// apply (the readiness gate) and must not wake for every entry.
    pub fn applied_term(&self) -> watch::Receiver<u64> {
        self.applied_term.subscribe()
    }

    /// The last applied position, without a receiver.
    pub fn applied_now(&self) -> AppliedPosition {
        *self.applied.borrow()
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
        self.applied_term.send_if_modified(|term| {
            let newer = pos.term > *term;
            if newer {
                *term = pos.term;
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
        self.install_retention_manifest(&manifest, last)?;
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
mod tests;
