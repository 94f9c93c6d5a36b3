//! The state-machine seam: [`ApplyHandler`] is what the broker implements (ConsumeQueue,
//! IndexFile, replicated metadata); [`StateMachine`] is openraft's `RaftStateMachine`,
//! implemented once here over that trait.
//!
//! ```text
//! openraft apply stream ──▶ StateMachine::apply ──normal──▶ ApplyHandler::apply(CommittedEntry) ─▶ AppReply ─▶ responder
//!                                          └─blank/membership─▶ ApplyHandler::apply_other(log_id)
//! trigger().snapshot() ──▶ try_create_snapshot_builder ──▶ ApplyHandler::build_manifest(applied) ─▶ (P, manifest at P)
//!                          snapshot = (P, membership as of P, end of P in the log, manifest) ─▶ openraft purges ≤ P
//! install_full_snapshot ──▶ install_snapshot ──▶ ApplyHandler::install_manifest ─▶ snapshot file ─▶ LogStore::rebase
//!                          then entries P+1.. arrive by normal replication and are applied as usual
//! every checkpoint interval, after an apply batch ──▶ ApplyHandler::checkpoint(applied) (in memory)
//!   ──▶ blocking thread: ApplyHandler::sync ─▶ applied within the fsynced log? ─▶ <store>/checkpoint
//! start ──▶ checkpoint newer than the snapshot and in the log ──▶ ApplyHandler::restore_checkpoint
//!   ──▶ applied starts there: openraft re-applies only the entries after it
//! ```
//!
//! Snapshots (docs/raft-log.md#snapshots): a snapshot is taken at the retention boundary P, not at
//! the applied state, so a replica that installs it still receives every retained entry after P.
//!
//! Invariants:
//! - entries reach the handler in log order, each committed, with `payload_pos` = the physical
//!   CommitLog offset of payload byte 0 (identical on every replica);
//! - every `ApplyResponder` is answered, whatever the handler does (a dropped responder would hang
//!   `client_write`), except those of the entries after a failed apply (below): openraft stops and
//!   their writers get its fatal error;
//! - a failed apply ([`ApplyHandler::failure`] set by an entry) stops the state machine at once:
//!   `applied` stays before that entry, no checkpoint or snapshot is taken from then on, and
//!   openraft stops this replica (it neither leads nor votes; the others elect a leader). A restart
//!   re-applies from the last checkpoint or snapshot, which are both before the failed entry, so
//!   the failure is never persisted as if the entry had been applied;
//! - `applied` (what openraft is told) only moves forward, except through a snapshot install;
//! - a snapshot at P carries the membership in effect at P (the last membership entry ≤ P), not
//!   the applied one: the state machine keeps every applied membership after the current snapshot;
//! - snapshot building never fails openraft: a handler error or "no new boundary" refuses the
//!   build (openraft treats a failed build as fatal).
//! - a checkpoint is written only once the handler's derived files are durable and its applied
//!   log id is within the fsynced log; it is used at start only when newer than the snapshot and
//!   its log id is in the log, and is removed when a snapshot install replaces the state. At most
//!   one is being written at a time. Any doubt means a longer re-apply, never a wrong state.
//!
//! After a restart openraft re-applies committed entries after the checkpoint, or after the
//! snapshot when there is none (the handler must be idempotent for them, e.g. positional
//! ConsumeQueue units: a crash can leave its files ahead of the checkpoint).

use std::future::Future;
use std::io;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use bytes::Bytes;
use futures::{Stream, TryStreamExt};
use openraft::storage::{EntryResponder, RaftSnapshotBuilder, RaftStateMachine};

use crate::checkpoint_file::StoredCheckpoint;
use crate::config::{APPEND_SPACE_RETRY_MAX_MS, APPEND_SPACE_RETRY_MIN_MS};
use crate::log_store::LogStore;
use crate::snapshot_file::{SnapshotData, StoredSnapshot};
use crate::type_config::{AppReply, EntryPayload, LogId, StoredMembership, TypeConfig};

/// openraft snapshot meta of this type config.
pub type SnapshotMeta = openraft::alias::SnapshotMetaOf<TypeConfig>;
/// openraft snapshot whose data is the encoded [`SnapshotData`].
pub type Snapshot = openraft::alias::SnapshotOf<TypeConfig, Bytes>;

/// A committed normal entry handed to the broker.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommittedEntry {
    /// Raft log id (term, index).
    pub log_id: LogId,
    /// Physical CommitLog offset of `body[0]` (= entry position + `LogStore::HEADER_SIZE`).
    pub payload_pos: u64,
    /// The broker's tag of the payload.
    pub tag: u8,
    /// The payload as stored (after patching).
    pub body: Bytes,
}

/// What the broker implements to consume the committed log. Called on openraft's state-machine
/// task: keep every call fast and bounded (no network, no unbounded disk work).
pub trait ApplyHandler: Send + Sync + 'static {
    /// Apply one committed normal entry; the reply goes to its writer, if it is waiting.
    fn apply(&self, entry: CommittedEntry) -> AppReply;

    /// Why applying to local storage failed, if it did (`None`: healthy). Once set, the applied
    /// state no longer follows the log: the state machine stops at the entry that set it (see the
    /// module invariants) and never checkpoints or snapshots that state.
    fn failure(&self) -> Option<String> {
        None
    }

    /// Why the last [`Self::apply`] must be tried again once disk space is freed (`None`: it is
    /// done). Asked once after every apply; `Some` means the apply stored nothing it would not
    /// store again (a full disk), so the state machine waits and calls `apply` with the same entry.
    fn take_space_retry(&self) -> Option<String> {
        None
    }

    /// A committed blank or membership entry was applied (nothing to do for most handlers).
    fn apply_other(&self, log_id: LogId) {
        let _ = log_id;
    }

    /// The retention boundary P (≤ `applied`, the last applied log id) and the manifest of the
    /// applied state as of P: everything a replica needs to continue with entries P+1.. (next
    /// queue offsets, replicated metadata). `None` when no boundary is set; a boundary at or
    /// below the current snapshot is ignored. Called on the state-machine task.
    fn build_manifest(&self, applied: LogId) -> io::Result<Option<(LogId, Bytes)>>;

    /// Replace the whole applied state by a leader's manifest taken at `last` (= P); durable on
    /// return. Entries after `last` are applied next, as they arrive.
    fn install_manifest(&self, manifest: Bytes, last: LogId) -> io::Result<()>;

    /// The applied state as of `applied` (the last applied log id) for a checkpoint, `None` when
    /// this handler keeps none (then nothing is written). Called on the state-machine task between
    /// applies: an in-memory copy, no disk work.
    fn checkpoint(&self, applied: LogId) -> io::Result<Option<Bytes>> {
        let _ = applied;
        Ok(None)
    }

    /// Make durable every derived file written by the applies so far (called on a blocking thread
    /// after [`Self::checkpoint`], concurrently with later applies, before the checkpoint is saved).
    fn sync(&self) -> io::Result<()> {
        Ok(())
    }

    /// Replace the applied state by a checkpoint's, taken at `applied` (called once, before raft
    /// starts; the entries after `applied` are re-applied next). On an error the state must be as
    /// before the call: the replica then re-applies from its snapshot instead.
    fn restore_checkpoint(&self, data: Bytes, applied: LogId) -> io::Result<()> {
        let _ = (data, applied);
        Err(io::Error::other("this handler keeps no checkpoint"))
    }
}

/// How long a final checkpoint waits for one being written.
const CHECKPOINT_WAIT_MAX: Duration = Duration::from_secs(5);

/// The checkpoint side of the state machine.
#[derive(Debug)]
struct Checkpointing {
    /// `None`: checkpoints are off.
    interval: Option<Duration>,
    /// When the last one was started (or, before any, when the state machine was created).
    last_started: tokio::time::Instant,
    /// One is being made durable.
    in_flight: bool,
    /// The newest durable checkpoint (loaded at start or written since).
    durable: Option<LogId>,
    /// Where the applied state started at this start: a checkpoint or the snapshot.
    started_from: Option<LogId>,
}

struct Inner {
    applied: Option<LogId>,
    /// The membership of the current snapshot, then every membership applied after it, in log
    /// order (never empty); the last one is the applied membership.
    memberships: Vec<StoredMembership>,
    current: Option<StoredSnapshot>,
}

impl Inner {
    fn applied_membership(&self) -> StoredMembership {
        self.memberships.last().cloned().unwrap_or_default()
    }

    /// The membership in effect at `index`: the last one introduced at or before it.
    fn membership_at(&self, index: u64) -> StoredMembership {
        self.memberships.iter().rev().find(|m| m.log_id().is_none_or(|l| l.index <= index)).cloned().unwrap_or_default()
    }

    /// Forget memberships superseded before `index` (a snapshot there keeps the one in effect).
    fn prune_memberships(&mut self, index: u64) {
        let keep_from = self.memberships.iter().rposition(|m| m.log_id().is_none_or(|l| l.index <= index));
        if let Some(k) = keep_from {
            self.memberships.drain(..k);
        }
    }
}

/// The openraft node type of a broker group: openraft over this state machine.
pub type Raft = openraft::Raft<TypeConfig, StateMachine>;

/// openraft's state machine over an [`ApplyHandler`]. Cheap to clone.
#[derive(Clone)]
pub struct StateMachine {
    handler: Arc<dyn ApplyHandler>,
    store: LogStore,
    inner: Arc<Mutex<Inner>>,
    checkpointing: Arc<Mutex<Checkpointing>>,
}

impl StateMachine {
    /// A state machine whose applied state starts at the stored checkpoint when it is usable (see
    /// [`Self::usable_checkpoint`]) and the handler restores it, else at the stored snapshot (if
    /// any); openraft re-applies the committed entries after it. `checkpoint_interval`: how often
    /// to write a checkpoint (`None`: never).
    pub fn new(
        handler: Arc<dyn ApplyHandler>,
        store: LogStore,
        snapshot: Option<StoredSnapshot>,
        checkpoint_interval: Option<Duration>,
    ) -> Self {
        let mut inner = Inner {
            applied: snapshot.as_ref().and_then(|s| s.last_log_id),
            memberships: vec![snapshot.as_ref().map(|s| s.membership.clone()).unwrap_or_default()],
            current: snapshot,
        };
        let mut durable = None;
        if let Some(c) = Self::usable_checkpoint(&store, inner.applied) {
            let applied = c.applied;
            match handler.restore_checkpoint(c.data, applied) {
                Ok(()) => {
                    tracing::info!(%applied, "applied state restored from the checkpoint; re-applying the entries after it");
                    inner.applied = Some(applied);
                    inner.memberships = c.memberships;
                    if let Some(p) = inner.current.as_ref().and_then(|s| s.last_log_id) {
                        inner.prune_memberships(p.index);
                    }
                    durable = Some(applied);
                }
                Err(e) => {
                    tracing::warn!(%applied, %e, "the handler cannot restore the checkpoint; re-applying from the snapshot")
                }
            }
        }
        let checkpointing = Checkpointing {
            interval: checkpoint_interval.filter(|i| !i.is_zero()),
            last_started: tokio::time::Instant::now(),
            in_flight: false,
            durable,
            started_from: inner.applied,
        };
        Self { handler, store, inner: Arc::new(Mutex::new(inner)), checkpointing: Arc::new(Mutex::new(checkpointing)) }
    }

    /// The stored checkpoint, if it is newer than the snapshot's `snapshot_last` and its applied
    /// log id is in the log (a rebased, wiped or purged log, or an unreadable file, makes it
    /// unusable: logged, and the replica re-applies from the snapshot instead).
    fn usable_checkpoint(store: &LogStore, snapshot_last: Option<LogId>) -> Option<StoredCheckpoint> {
        let c = match StoredCheckpoint::load(store.dir()) {
            Ok(c) => c?,
            Err(e) => {
                tracing::warn!(%e, "cannot read the checkpoint; re-applying from the snapshot");
                return None;
            }
        };
        let why_not = if snapshot_last.is_some_and(|p| p.index >= c.applied.index) {
            Some("not newer than the snapshot")
        } else if store.log_id_at(c.applied.index) != Some(c.applied) {
            Some("its applied log id is not in the log")
        } else if store.durable_last_log_id().is_none_or(|d| d.index < c.applied.index) {
            Some("beyond the fsynced log")
        } else if snapshot_last
            .is_some_and(|p| c.memberships.first().and_then(|m| m.log_id().as_ref()).is_some_and(|l| l.index > p.index))
        {
            Some("its memberships start after the snapshot")
        } else {
            None
        };
        match why_not {
            Some(why) => {
                tracing::info!(applied = %c.applied, why, "checkpoint not used");
                None
            }
            None => Some(c),
        }
    }

    fn inner(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn checkpointing(&self) -> MutexGuard<'_, Checkpointing> {
        self.checkpointing.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The newest durable checkpoint, and where the applied state started at this start (a
    /// checkpoint or the snapshot; `None`: from the log's beginning).
    pub fn checkpoint_status(&self) -> (Option<LogId>, Option<LogId>) {
        let c = self.checkpointing();
        (c.durable, c.started_from)
    }

    /// Starts a checkpoint of the applied state when the interval has passed and none is being
    /// written; the disk work runs on a blocking thread. Call between applies only (after an apply
    /// batch, or on openraft's state-machine worker): the capture must not see a half-applied
    /// batch.
    pub(crate) fn maybe_checkpoint(&self) {
        let now = tokio::time::Instant::now();
        {
            let mut c = self.checkpointing();
            let due = c.interval.is_some_and(|i| now >= c.last_started + i);
            if !due || c.in_flight {
                return;
            }
            c.last_started = now;
        }
        if let Some(write) = self.capture() {
            tokio::spawn(write);
        }
    }

    /// Writes a checkpoint of the applied state once openraft has stopped applying (a graceful
    /// shutdown, so the next start re-applies nothing), unless checkpoints are off; the applied
    /// log id written, if any. Call
    /// after `Raft::shutdown`: it waits for openraft's state-machine worker to let go of its
    /// handle (the handler's state must not move under the capture) and for a write in flight.
    pub async fn checkpoint_now(&self) -> Option<LogId> {
        // Checkpoints off: none at shutdown either.
        self.checkpointing().interval?;
        let deadline = tokio::time::Instant::now() + CHECKPOINT_WAIT_MAX;
        while Arc::strong_count(&self.inner) > 1 || self.checkpointing().in_flight {
            if tokio::time::Instant::now() >= deadline {
                tracing::warn!("the state machine is still applying or checkpointing; no checkpoint at shutdown");
                return None;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        // Applied entries beyond the fsynced log would make the checkpoint skip itself.
        if let Err(e) = self.store.sync().await {
            tracing::warn!(%e, "cannot sync the log before the shutdown checkpoint");
        }
        self.capture()?.await
    }

    /// Waits until no checkpoint is being written (a snapshot install is about to replace the
    /// state it describes).
    async fn wait_checkpoint_written(&self) -> io::Result<()> {
        let deadline = tokio::time::Instant::now() + CHECKPOINT_WAIT_MAX;
        while self.checkpointing().in_flight {
            if tokio::time::Instant::now() >= deadline {
                return Err(io::Error::other("a checkpoint is still being written"));
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        Ok(())
    }

    /// Captures the applied state and marks a checkpoint in flight; the returned future makes
    /// it durable. `None`: nothing new to write, no checkpoint kept, or one already in flight.
    /// Called between applies (on the state-machine task, or once it has stopped).
    fn capture(&self) -> Option<impl Future<Output = Option<LogId>> + Send + 'static> {
        if let Some(why) = self.handler.failure() {
            tracing::warn!(%why, "no checkpoint: applying to local storage failed");
            return None;
        }
        let (applied, memberships) = {
            let g = self.inner();
            (g.applied?, g.memberships.clone())
        };
        {
            let mut c = self.checkpointing();
            if c.in_flight || c.durable >= Some(applied) {
                return None;
            }
            c.in_flight = true;
        }
        let data = match self.handler.checkpoint(applied) {
            Ok(Some(data)) => data,
            Ok(None) => {
                self.checkpointing().in_flight = false;
                return None;
            }
            Err(e) => {
                self.checkpointing().in_flight = false;
                tracing::warn!(%applied, %e, "cannot capture a checkpoint; trying again next interval");
                return None;
            }
        };
        let checkpoint = StoredCheckpoint { applied, memberships, data };
        let (handler, store, state) = (Arc::clone(&self.handler), self.store.clone(), Arc::clone(&self.checkpointing));
        Some(async move {
            let write = move || -> io::Result<bool> {
                handler.sync()?;
                // A follower may apply entries its own flush has not reached yet.
                if store.durable_last_log_id().is_none_or(|d| d.index < applied.index) {
                    return Ok(false);
                }
                checkpoint.save(store.dir()).map_err(io::Error::other)?;
                Ok(true)
            };
            let written = tokio::task::spawn_blocking(write).await.map_err(io::Error::other).and_then(|r| r);
            let mut c = state.lock().unwrap_or_else(|p| p.into_inner());
            c.in_flight = false;
            match written {
                Ok(true) => {
                    tracing::debug!(%applied, "checkpoint written");
                    c.durable = c.durable.max(Some(applied));
                    Some(applied)
                }
                Ok(false) => {
                    tracing::debug!(%applied, "checkpoint skipped: beyond the fsynced log");
                    None
                }
                Err(e) => {
                    tracing::warn!(%applied, %e, "cannot write a checkpoint; trying again next interval");
                    None
                }
            }
        })
    }

    /// Last applied log id.
    pub fn applied(&self) -> Option<LogId> {
        self.inner().applied
    }

    fn payload_pos(&self, log_id: &LogId) -> io::Result<u64> {
        self.store.entry_position(log_id.index).map(|p| p.payload_pos).ok_or_else(|| {
            io::Error::other(format!("committed entry {log_id} is not in the log store while applying it"))
        })
    }

    /// Prepare a snapshot at the handler's retention boundary, if it set a new one.
    fn prepare(&self) -> io::Result<Option<StoredSnapshot>> {
        if let Some(why) = self.handler.failure() {
            return Err(io::Error::other(format!("applying to local storage failed: {why}")));
        }
        let (applied, current) = {
            let g = self.inner();
            (g.applied, g.current.as_ref().and_then(|c| c.last_log_id))
        };
        let Some(applied) = applied else { return Ok(None) };
        let Some((p, manifest)) = self.handler.build_manifest(applied)? else { return Ok(None) };
        if p.index > applied.index {
            return Err(io::Error::other(format!("retention boundary {p} is beyond the applied {applied}")));
        }
        if current.is_some_and(|c| c.index >= p.index) {
            return Ok(None);
        }
        if self.store.log_id_at(p.index) != Some(p) {
            return Err(io::Error::other(format!("retention boundary {p} is not in the log store")));
        }
        let pos = self
            .store
            .entry_position(p.index)
            .ok_or_else(|| io::Error::other(format!("retention boundary {p} has no position")))?;
        let next_pos = pos.pos + u64::from(pos.size);
        let membership = self.inner().membership_at(p.index);
        let data = SnapshotData { next_pos, manifest }.encode()?;
        Ok(Some(StoredSnapshot { last_log_id: Some(p), membership, data }))
    }

    /// A builder for a new snapshot, or `None` (logged) when there is nothing new to build.
    fn builder(&self) -> Option<ManifestBuilder> {
        match self.prepare() {
            Ok(Some(s)) => Some(ManifestBuilder { prepared: Some(s), sm: self.clone() }),
            Ok(None) => {
                tracing::info!("no new retention boundary: snapshot not built");
                None
            }
            Err(e) => {
                tracing::error!(%e, "cannot prepare a snapshot at the retention boundary");
                None
            }
        }
    }
}

fn to_snapshot(s: &StoredSnapshot) -> Snapshot {
    Snapshot {
        meta: SnapshotMeta { last_log_id: s.last_log_id, last_membership: s.membership.clone() },
        snapshot: s.data.clone(),
    }
}

/// Builds a snapshot prepared on the state-machine task; `build_snapshot` only persists it.
/// Without a prepared one (openraft insisted on a builder) it returns the current snapshot.
pub struct ManifestBuilder {
    prepared: Option<StoredSnapshot>,
    sm: StateMachine,
}

impl RaftSnapshotBuilder<TypeConfig> for ManifestBuilder {
    type SnapshotData = Bytes;

    async fn build_snapshot(&mut self) -> Result<Snapshot, io::Error> {
        let Some(s) = self.prepared.take() else {
            let current = self.sm.inner().current.as_ref().map(to_snapshot);
            return current.ok_or_else(|| io::Error::other("no retention boundary set: no snapshot to build"));
        };
        let dir = self.sm.store.dir().to_path_buf();
        let to_save = s.clone();
        tokio::task::spawn_blocking(move || to_save.save(&dir))
            .await
            .map_err(|e| io::Error::other(format!("snapshot save task: {e}")))??;
        let snap = to_snapshot(&s);
        let mut g = self.sm.inner();
        let newer = match (&g.current, s.last_log_id) {
            (Some(c), Some(l)) => c.last_log_id.is_none_or(|cl| cl < l),
            _ => true,
        };
        if newer {
            if let Some(l) = s.last_log_id {
                g.prune_memberships(l.index);
            }
            g.current = Some(s);
        }
        Ok(snap)
    }
}

impl RaftStateMachine<TypeConfig> for StateMachine {
    type SnapshotData = Bytes;
    type SnapshotBuilder = ManifestBuilder;

    async fn applied_state(&mut self) -> Result<(Option<LogId>, StoredMembership), io::Error> {
        let g = self.inner();
        Ok((g.applied, g.applied_membership()))
    }

    async fn apply<S>(&mut self, mut entries: S) -> Result<(), io::Error>
    where
        S: Stream<Item = Result<EntryResponder<TypeConfig>, io::Error>> + Unpin + Send,
    {
        while let Some((entry, responder)) = entries.try_next().await? {
            let log_id = entry.log_id;
            let reply = match entry.payload {
                EntryPayload::Normal(p) => {
                    let payload_pos = self.payload_pos(&log_id)?;
                    let mut pause_ms = APPEND_SPACE_RETRY_MIN_MS;
                    loop {
                        let entry = CommittedEntry { log_id, payload_pos, tag: p.tag, body: p.body.clone() };
                        let reply = self.handler.apply(entry);
                        let Some(why) = self.handler.take_space_retry() else { break reply };
                        if pause_ms == APPEND_SPACE_RETRY_MIN_MS {
                            tracing::warn!(%log_id, %why, "disk full: the apply waits for space and is tried again");
                        }
                        tokio::time::sleep(std::time::Duration::from_millis(pause_ms)).await;
                        pause_ms = (pause_ms * 2).min(APPEND_SPACE_RETRY_MAX_MS);
                    }
                }
                EntryPayload::Membership(m) => {
                    self.inner().memberships.push(StoredMembership::new(Some(log_id), m));
                    self.handler.apply_other(log_id);
                    AppReply::default()
                }
                EntryPayload::Blank => {
                    self.handler.apply_other(log_id);
                    AppReply::default()
                }
            };
            if let Some(why) = self.handler.failure() {
                // The handler's state is short of this entry: it must not count as applied (a
                // checkpoint or snapshot would persist the gap), and this replica must stop.
                if let Some(r) = responder {
                    r.send(reply);
                }
                tracing::error!(%log_id, %why, "apply failed on local storage: this replica stops; a restart re-applies from before this entry");
                return Err(io::Error::other(format!("applying {log_id} failed on local storage: {why}")));
            }
            self.inner().applied = Some(log_id);
            if let Some(r) = responder {
                r.send(reply);
            }
        }
        self.maybe_checkpoint();
        Ok(())
    }

    async fn try_create_snapshot_builder(&mut self, force: bool) -> Option<Self::SnapshotBuilder> {
        match self.builder() {
            Some(b) => Some(b),
            None if force => Some(ManifestBuilder { prepared: None, sm: self.clone() }),
            None => None,
        }
    }

    async fn get_snapshot_builder(&mut self) -> Self::SnapshotBuilder {
        self.builder().unwrap_or_else(|| ManifestBuilder { prepared: None, sm: self.clone() })
    }

    async fn install_snapshot(&mut self, meta: &SnapshotMeta, snapshot: Bytes) -> Result<(), io::Error> {
        let Some(last) = meta.last_log_id else {
            return Err(io::Error::other("snapshot without a last log id"));
        };
        let data = SnapshotData::decode(&snapshot)
            .map_err(|r| io::Error::new(io::ErrorKind::InvalidData, format!("snapshot data: {r}")))?;
        // Order: handler state, then the snapshot file, then the log. A crash in between leaves
        // a handler ahead of the file (re-applied entries are idempotent) or a file ahead of the
        // log (the node rebases at start); never a log that claims more than the state machine.
        // The checkpoint describes the state being replaced: gone before the state is (after any
        // write in flight, which would put it back).
        self.wait_checkpoint_written().await?;
        let dir = self.store.dir().to_path_buf();
        tokio::task::spawn_blocking(move || StoredCheckpoint::remove(&dir))
            .await
            .map_err(|e| io::Error::other(format!("checkpoint removal task: {e}")))?
            .map_err(io::Error::other)?;
        self.checkpointing().durable = None;
        self.handler.install_manifest(data.manifest.clone(), last)?;
        let stored =
            StoredSnapshot { last_log_id: Some(last), membership: meta.last_membership.clone(), data: snapshot };
        let dir = self.store.dir().to_path_buf();
        let to_save = stored.clone();
        tokio::task::spawn_blocking(move || to_save.save(&dir))
            .await
            .map_err(|e| io::Error::other(format!("snapshot save task: {e}")))??;
        self.store.rebase(last, data.next_pos).await?;
        let mut g = self.inner();
        g.applied = Some(last);
        g.memberships = vec![meta.last_membership.clone()];
        g.current = Some(stored);
        Ok(())
    }

    async fn get_current_snapshot(&mut self) -> Result<Option<Snapshot>, io::Error> {
        Ok(self.inner().current.as_ref().map(to_snapshot))
    }
}
