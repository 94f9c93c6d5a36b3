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
//!                  CONSUMER_OFFSETS / TOPIC_* / SUBSCRIPTION_GROUP_*: metadata tables
//!                  blank / membership: applied position only
//! ```
//!
//! Invariants:
//! - ConsumeQueues and metadata change only here, from committed entries in log order, so every
//!   replica holds the same state and consumers never see uncommitted data (raft-log-design.md §6).
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

use std::collections::BTreeMap;
use std::io;
use std::path::Path;
use std::path::PathBuf;
use std::sync::Mutex;
use std::sync::MutexGuard;
use std::sync::RwLock;
use std::sync::RwLockReadGuard;
use std::sync::atomic::AtomicU64;
use std::sync::atomic::Ordering;

use bytes::BufMut;
use bytes::Bytes;
use bytes::BytesMut;
use raftmq_common::message::sys_flag::TransactionType;
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

use crate::commit_log::CommitLogFiles;
use crate::consume_queue::ConsumeQueueStore;
use crate::consume_queue::CqError;
use crate::dispatch::CqAction;
use crate::dispatch::DispatchRequest;
use crate::dispatch::plan;
use crate::dispatch::write_units;
use crate::entry::BrokerCommand;
use crate::entry::patch_physical_offsets;
use crate::entry::tag;
use crate::index_file::IndexError;
use crate::index_file::IndexFileSizes;
use crate::index_file::IndexService;
use crate::index_file::record_index_keys;
use crate::long_poll::Full;
use crate::long_poll::LongPollRegistry;
use crate::long_poll::WaiterId;
use crate::offsets::ConsumerOffsetTable;
use crate::pull::TagFilter;
use crate::subscription_group::SubscriptionGroupTable;
use crate::topic_config::SystemTopicOptions;
use crate::topic_config::TopicConfigTable;

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
    /// The entry was not applied (deterministically, on every replica); the reason.
    Rejected(String),
}

const REPLY_STORED: u8 = 0;
const REPLY_DONE: u8 = 1;
const REPLY_REJECTED: u8 = 2;

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
            ApplyOutcome::Rejected(reason) => {
                out.put_u8(REPLY_REJECTED);
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
            Some((&REPLY_REJECTED, rest)) => ApplyOutcome::Rejected(String::from_utf8_lossy(rest).into_owned()),
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
        })
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
        unpoison(self.failed.lock()).clone()
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
        filter: TagFilter,
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

    fn mark_failed(&self, why: String) {
        error!(%why, "applying to local storage failed; this replica must stop serving");
        unpoison(self.failed.lock()).get_or_insert(why);
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
        let mut arrived: BTreeMap<(String, i32), (u64, Vec<i64>)> = BTreeMap::new();
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
                let why = format!("ConsumeQueue write failed at payload {payload_pos}: {e}");
                self.mark_failed(why.clone());
                return ApplyOutcome::Rejected(why);
            }
            for req in planned.iter().filter(|r| r.action == CqAction::Append) {
                let key = (req.topic().to_owned(), req.queue_id());
                arrived.entry(key).or_default().1.push(req.unit.tags_code);
            }
            for ((topic, queue_id), (max, _)) in arrived.iter_mut() {
                *max = cq.offsets(topic, *queue_id).1;
            }
            planned
        };
        self.build_index(&planned);
        if !arrived.is_empty() {
            let now = now_ms();
            let mut registry = self.long_poll();
            for ((topic, queue_id), (max, codes)) in &arrived {
                let max = i64::try_from(*max).unwrap_or(i64::MAX);
                for woken in registry.notify(topic, *queue_id, max, Some(codes), now) {
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
        for req in planned {
            if TransactionType::of(req.record.sys_flag) == TransactionType::Rollback {
                continue;
            }
            let keys = record_index_keys(req.topic(), req.record.properties);
            if keys.is_empty() {
                continue;
            }
            if let Err(e) = index.put(keys, req.phy_offset(), req.record.store_timestamp, now) {
                error!(phy_offset = req.phy_offset(), error = %e, "IndexFile write failed; the record is not indexed");
            }
        }
    }

    fn apply_metadata(&self, command: BrokerCommand) -> ApplyOutcome {
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
            }
        }
        ApplyOutcome::Done
    }
}

impl ApplyHandler for MessageStore {
    fn apply(&self, entry: CommittedEntry) -> AppReply {
        let end = entry.payload_pos.saturating_add(entry.body.len() as u64);
        self.commit_log.advance_committed_end(i64::try_from(end).unwrap_or(i64::MAX));
        let outcome = if entry.tag == tag::MESSAGES {
            self.apply_messages(&entry.body, entry.payload_pos)
        } else {
            match BrokerCommand::decode(entry.tag, entry.body) {
                Ok(command) => self.apply_metadata(command),
                Err(e) => {
                    // Deterministic on every replica: the entry is skipped everywhere.
                    warn!(log_id = %entry.log_id, error = %e, "skipping an undecodable broker entry");
                    ApplyOutcome::Rejected(e.to_string())
                }
            }
        };
        self.set_applied(&entry.log_id);
        outcome.encode()
    }

    fn apply_other(&self, log_id: LogId) {
        self.set_applied(&log_id);
    }

    fn build_manifest(&self, _applied: LogId) -> io::Result<Option<(LogId, Bytes)>> {
        // Retention (which sets the boundary) is not implemented yet: never a snapshot.
        Ok(None)
    }

    fn install_manifest(&self, _manifest: Bytes, last: LogId) -> io::Result<()> {
        // No replica builds manifests (see build_manifest), so none can be offered to install.
        Err(io::Error::other(format!("manifest snapshots are not supported yet (offered at {last})")))
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

/// Wall clock in ms since the epoch ([`crate::clock`]: a test harness may skew it).
pub fn now_ms() -> u64 {
    crate::clock::now_ms()
}

#[cfg(test)]
mod tests {
    use std::net::SocketAddr;

    use raftmq_common::message::Message;
    use raftmq_common::message::MessageExt;
    use raftmq_raft::type_config::log_id;

    use super::*;
    use crate::config::BrokerConfig;
    use crate::entry::OffsetCommit;
    use crate::entry::encode_messages;

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
    fn apply_builds_queues_wakes_pulls_and_replays_idempotently() {
        let dir = tempfile::tempdir().unwrap();
        let store = MessageStore::open(settings(dir.path()), 0).unwrap();
        let waiter = store.suspend_pull("T", 0, 0, TagFilter::all(), u64::MAX).unwrap();
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
        assert!(store.suspend_pull("T", 0, 1, TagFilter::all(), u64::MAX).unwrap().is_none());
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

    #[test]
    fn replies_round_trip() {
        for o in [ApplyOutcome::Stored { payload_pos: 7 }, ApplyOutcome::Done, ApplyOutcome::Rejected("x".into())] {
            assert_eq!(ApplyOutcome::decode(&o.encode()), o);
        }
        assert!(matches!(ApplyOutcome::decode(&AppReply::default()), ApplyOutcome::Rejected(_)));
    }
}
