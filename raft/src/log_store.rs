//! [`LogStore`]: openraft's `RaftLogStorage` over the segmented, mmap'd CommitLog, and
//! [`LogReader`], its read-only handle for replication tasks.
//!
//! ```text
//! <dir>/raft-meta           vote, committed, last purged, start pos, segment size, watermark
//! <dir>/commitlog/<20-digit base pos>   data segments (records: entry::HEADER_SIZE + payload)
//! <dir>/raftindex/<20-digit first index> 32-byte slots
//! ```
//!
//! Contract with openraft (docs/protocol/io_ordering.md): entries are readable when `append`
//! returns and durable when their `IOFlushed` fires (group commit in `flusher`); `save_vote`
//! is durable on return; `truncate_after` and `purge` are durable on return (purge persists the
//! purge point before deleting files). A damaged store (see `recovery`) serves its valid prefix
//! and refuses every write; a poisoned store (failed fsync) refuses writes and acks nothing.
//! The flusher runs on its own thread or, in simulations, as a task (`RaftConfig::flush_mode`);
//! either way it has finished its last batch once the last handle is dropped.

use std::fmt::Debug;
use std::io;
use std::ops::{Bound, RangeBounds};
use std::path::{Path, PathBuf};
use std::sync::mpsc::{self, Sender};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use bytes::Bytes;
use openraft::storage::{IOFlushed, LogState, RaftLogReader, RaftLogStorage};
use tokio::sync::{Notify, oneshot};

use crate::config::{APPEND_SPACE_RETRY_MAX_MS, APPEND_SPACE_RETRY_MIN_MS, FlushMode, RaftConfig};
use crate::entry::HEADER_SIZE;
use crate::error::{Result, StoreError};
use crate::flusher::{self, Flusher, InlineFlush, Request};
use crate::log_index::IndexSet;
use crate::meta::{META_FILE, MetaFile, MetaState};
use crate::page_cache::{Control, Dropper, Tasks};
use crate::patcher::{NoPatch, PayloadPatcher};
use crate::recovery;
use crate::segment::{SegmentSet, list_numbered};
use crate::store_state::{Limits, State, lock};
use crate::type_config::{Entry, LogId, TypeConfig, Vote, log_id};

/// Directory of the data segments inside the store directory.
pub const COMMITLOG_DIR: &str = "commitlog";
/// Directory of the index files inside the store directory.
pub const RAFTINDEX_DIR: &str = "raftindex";

/// Who runs the flusher.
enum Driver {
    /// [`FlushMode::Thread`]: joined on drop.
    Thread(Mutex<Option<JoinHandle<()>>>),
    /// [`FlushMode::Task`]: the task drains `slot` when `wake` fires; on drop the store takes
    /// the flusher out of the slot and finishes it inline, so the files are released (and the
    /// last meta written) before a restart may reopen them, as a joined thread guarantees.
    Task { slot: Arc<Mutex<Option<Flusher>>>, wake: Arc<Notify> },
}

/// `unsafe_ack_before_fsync` (test only): appends are flushed at most this often, so up to this
/// much acknowledged data is only in the page cache at any time.
const UNSAFE_FLUSH_PERIOD_MS: u64 = 1000;

struct Shared {
    state: Arc<Mutex<State>>,
    counters: Arc<flusher::Counters>,
    tx: Sender<Request>,
    driver: Driver,
    dir: PathBuf,
    /// `RaftConfig::unsafe_ack_before_fsync` (test only).
    unsafe_ack_before_fsync: bool,
    /// When the unsafe mode last asked for a flush.
    unsafe_last_flush: Mutex<std::time::Instant>,
    /// How much the page-cache helper keeps cached behind the durable end (`page_cache`).
    cache: Arc<Control>,
    /// Flushes on the appending thread (`flusher::InlineFlush`), when the mode allows them.
    inline: Arc<InlineFlush>,
    /// Thread mode with `flush_inline_idle_min_us` > 0 and not the unsafe test mode.
    inline_allowed: bool,
}

impl Shared {
    /// Queue `r` for the flusher; false if it is gone.
    fn send(&self, r: Request) -> bool {
        self.inline.count_sent();
        let sent = self.tx.send(r).is_ok();
        if !sent {
            self.inline.count_unsent();
        }
        if let Driver::Task { wake, .. } = &self.driver {
            wake.notify_one();
        }
        sent
    }
}

impl Drop for Shared {
    fn drop(&mut self) {
        // The flusher finishes what is queued, then exits; a send failure means it is gone.
        self.send(Request::Shutdown);
        match &self.driver {
            Driver::Thread(handle) => {
                let handle = handle.lock().unwrap_or_else(|p| p.into_inner()).take();
                if let Some(h) = handle
                    && h.join().is_err()
                {
                    tracing::error!(dir = %self.dir.display(), "raft log flusher panicked");
                }
            }
            Driver::Task { slot, .. } => {
                let flusher = flusher::lock_slot(slot).take();
                if let Some(mut f) = flusher {
                    f.drain();
                }
            }
        }
    }
}

/// Where an entry lives in the CommitLog.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EntryPosition {
    /// Physical offset of the entry record (its header).
    pub pos: u64,
    /// Record size: header + payload.
    pub size: u32,
    /// Physical offset of payload byte 0: `pos + HEADER_SIZE`.
    pub payload_pos: u64,
}

/// The Raft log store that is the CommitLog. Cheap to clone; all clones share one store.
#[derive(Clone)]
pub struct LogStore {
    shared: Arc<Shared>,
}

/// A [`LogStore`] handle that does not keep the store open.
#[derive(Clone)]
pub struct WeakLogStore(std::sync::Weak<Shared>);

impl std::fmt::Debug for WeakLogStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WeakLogStore").field("open", &(self.0.strong_count() > 0)).finish()
    }
}

impl WeakLogStore {
    /// The store, if it is still open.
    pub fn upgrade(&self) -> Option<LogStore> {
        self.0.upgrade().map(|shared| LogStore { shared })
    }
}

/// Read-only handle used by openraft's replication tasks.
#[derive(Clone)]
pub struct LogReader {
    shared: Arc<Shared>,
}

impl LogStore {
    /// Open (or create) the store in `dir` with the default no-op payload patcher.
    pub fn open(dir: &Path, cfg: &RaftConfig) -> Result<Self> {
        Self::open_with_patcher(dir, cfg, Box::new(NoPatch))
    }

    /// Open (or create) the store in `dir`; `patcher` runs on every normal entry at append time.
    pub fn open_with_patcher(dir: &Path, cfg: &RaftConfig, patcher: Box<dyn PayloadPatcher>) -> Result<Self> {
        cfg.validate()?;
        std::fs::create_dir_all(dir).map_err(|e| StoreError::io("mkdir", dir, e))?;
        let seg_dir = dir.join(COMMITLOG_DIR);
        let had_meta = dir.join(META_FILE).exists();
        if !had_meta && seg_dir.exists() && !list_numbered(&seg_dir)?.is_empty() {
            return Err(StoreError::Damaged(format!(
                "{}: data segments exist but {META_FILE} is missing (vote lost)",
                dir.display()
            )));
        }
        let (mut meta_file, meta) = MetaFile::open(dir, &MetaState::new(cfg.segment_size_bytes))?;
        if meta.segment_size != cfg.segment_size_bytes {
            return Err(StoreError::Config(format!(
                "store was created with segment size {} but config says {}",
                meta.segment_size, cfg.segment_size_bytes
            )));
        }
        let mut st = State {
            limits: Limits {
                segment_size: cfg.segment_size_bytes,
                entry_max_bytes: cfg.entry_max_bytes(),
                append_entries_max_bytes: cfg.append_entries_max_bytes,
            },
            segs: SegmentSet::open(&seg_dir, cfg.segment_size_bytes)?,
            index: IndexSet::open(&dir.join(RAFTINDEX_DIR), cfg.index_file_entries)?,
            end_pos: meta.start_pos,
            meta,
            first: None,
            last: None,
            dir_dirty: false,
            committed_dirty: false,
            poisoned: None,
            space_wait: None,
            frozen: false,
            damaged: None,
            patcher,
            staged: Vec::new(),
            staged_pos: 0,
            truncation_pending: false,
            rebase_pending: false,
            log_generation: 0,
            #[cfg(test)]
            after_sync_hook: None,
        };
        recovery::recover(&mut st)?;
        if st.damaged.is_none() {
            meta_file.write(&st.meta)?;
        }
        let state = Arc::new(Mutex::new(st));
        let (tx, rx) = mpsc::channel();
        let every = Duration::from_millis(cfg.committed_persist_interval_ms);
        let counters = Arc::new(flusher::Counters::default());
        // Every replica starts as a follower; the node widens the window if it is elected.
        let cache = Arc::new(Control::new(cfg.page_cache_leader_window_bytes, cfg.page_cache_follower_window_bytes));
        let helps = cfg.segment_zero_ahead || cache.drops();
        let tasks = helps.then(|| Tasks { zero_ahead: cfg.segment_zero_ahead, control: Arc::clone(&cache) });
        let inline_idle_min = Duration::from_micros(cfg.flush_inline_idle_min_us);
        let (flusher, inline) =
            Flusher::new(Arc::clone(&state), meta_file, rx, every, Arc::clone(&counters), tasks, inline_idle_min);
        let inline_allowed =
            cfg.flush_mode == FlushMode::Thread && cfg.flush_inline_idle_min_us > 0 && !cfg.unsafe_ack_before_fsync;
        let driver = match cfg.flush_mode {
            FlushMode::Thread => {
                let handle = std::thread::Builder::new()
                    .name("raft-log-flusher".into())
                    .spawn(move || flusher.run_thread())
                    .map_err(|e| StoreError::io("spawn flusher", dir, e))?;
                Driver::Thread(Mutex::new(Some(handle)))
            }
            FlushMode::Task => {
                let runtime = tokio::runtime::Handle::try_current()
                    .map_err(|e| StoreError::Config(format!("flush mode Task needs a tokio runtime: {e}")))?;
                let slot = Arc::new(Mutex::new(Some(flusher)));
                let wake = Arc::new(Notify::new());
                runtime.spawn(flusher::run_task(Arc::clone(&slot), Arc::clone(&wake)));
                Driver::Task { slot, wake }
            }
        };
        let unsafe_ack_before_fsync = cfg.unsafe_ack_before_fsync;
        if unsafe_ack_before_fsync {
            tracing::warn!(dir = %dir.display(), "TEST ONLY, LOSES DATA: appends are acknowledged before fsync (testOnlyUnsafeAckBeforeFsyncLosesData)");
        }
        let shared = Shared {
            state,
            counters,
            tx,
            driver,
            dir: dir.to_path_buf(),
            unsafe_ack_before_fsync,
            unsafe_last_flush: Mutex::new(std::time::Instant::now()),
            cache,
            inline,
            inline_allowed,
        };
        // Every replica starts as a follower.
        shared.inline.set_enabled(inline_allowed);
        Ok(Self { shared: Arc::new(shared) })
    }

    /// Header size H: a payload byte at `offset_in_payload` of the entry at `pos` has physical
    /// offset `pos + H + offset_in_payload`.
    pub const HEADER_SIZE: u64 = HEADER_SIZE;

    /// Follow the replica's role: keep the leader's page-cache window (consumers read its tail)
    /// or a follower's (only its own apply reads, right after commit), from the next group
    /// commit; and flush inline only off the leader (`flusher::InlineFlush`).
    pub fn set_role(&self, leader: bool) {
        self.shared.cache.set_role(leader);
        self.shared.inline.set_enabled(self.shared.inline_allowed && !leader);
    }

    /// The page-cache window in effect, in bytes (0 = the kernel decides).
    pub fn page_cache_window_bytes(&self) -> u64 {
        self.shared.cache.window()
    }

    /// CommitLog bytes handed back to the kernel's page cache since the store opened.
    pub fn page_cache_dropped_bytes(&self) -> u64 {
        self.shared.cache.dropped_bytes()
    }

    /// Drop what lies outside the window now, on this thread, as the helper thread does after a
    /// group commit (tests: the result must read the same).
    #[doc(hidden)]
    pub fn drop_page_cache_now(&self) {
        Dropper::default().drop_behind(&self.shared.state, &self.shared.cache);
    }

    /// Whether recovery found corruption before the tail (the store refuses writes).
    pub fn is_damaged(&self) -> bool {
        lock(&self.shared.state).damaged.is_some()
    }

    /// Why the store is damaged, if it is.
    pub fn damage_reason(&self) -> Option<String> {
        lock(&self.shared.state).damaged.clone()
    }

    /// Why the store is poisoned (an fsync failed), if it is.
    pub fn poison_reason(&self) -> Option<String> {
        lock(&self.shared.state).poisoned.clone()
    }

    /// Why an append is waiting for disk space, while one is (see [`Self::append`]).
    pub fn space_wait_reason(&self) -> Option<String> {
        lock(&self.shared.state).space_wait.clone()
    }

    /// Free bytes of the file system holding the CommitLog (`statvfs`, for unprivileged users).
    pub fn free_bytes(&self) -> Result<u64> {
        let dir = self.shared.dir.join(COMMITLOG_DIR);
        nix::sys::statvfs::statvfs(&dir)
            .map(|v| v.blocks_available() * v.fragment_size())
            .map_err(|e| StoreError::io("statvfs", dir, e.into()))
    }

    /// Crash-test hook, first half: the disk "hangs". From now on the flusher syncs nothing and
    /// completes nothing (flushes, votes and purges wait), while appends still land in the
    /// mapping (the page cache). Other replicas may commit those entries meanwhile; this one
    /// never acknowledges them. Follow with [`Self::kill_for_crash_test`].
    pub fn freeze_for_crash_test(&self) {
        lock(&self.shared.state).frozen = true;
    }

    /// Crash-test hook, second half: the process "dies". Everything waiting on the flusher
    /// fails, the store refuses all further work, and the returned durable watermark is final:
    /// bytes at or after it were never acknowledged, so a test may cut them from the files once
    /// the node is stopped, then restart on the same directory.
    pub fn kill_for_crash_test(&self) -> u64 {
        let durable = {
            let mut st = lock(&self.shared.state);
            st.frozen = true;
            st.poisoned.get_or_insert_with(|| "simulated crash (test hook)".to_string());
            st.meta.durable_pos
        };
        // Wake the flusher so it fails what it holds; the reply is of no interest.
        let (tx, _rx) = oneshot::channel();
        self.shared.send(Request::Meta(tx));
        durable
    }

    /// Position of a live entry.
    pub fn entry_position(&self, index: u64) -> Option<EntryPosition> {
        let st = lock(&self.shared.state);
        st.slot(index).map(|s| EntryPosition { pos: s.pos, size: s.size, payload_pos: s.pos + HEADER_SIZE })
    }

    /// A copy of bytes `[pos, pos + len)` of the CommitLog straight from the mapped segment (no
    /// system call: the pull path's read), if they lie inside the entries up to the last
    /// committed one this store was told of, from the first live entry on; `None` otherwise
    /// (beyond it, before the first live entry, in a deleted segment, or straddling two), and the
    /// caller reads the file instead. Live committed entries are never rewritten (a truncation or
    /// rebase never reaches below them), which is what lets the copy run after the store's lock
    /// is released.
    pub fn read_committed_bytes(&self, pos: u64, len: usize) -> Option<Bytes> {
        let (handle, off) = {
            let st = lock(&self.shared.state);
            let committed = st.slot(st.meta.committed?.index)?;
            let end = pos.checked_add(u64::try_from(len).ok()?)?;
            if pos < st.meta.start_pos || end > committed.pos + u64::from(committed.size) {
                return None;
            }
            st.segs.stable_handle(pos)?
        };
        handle.copy(off, len)
    }

    /// Log id of a live entry.
    pub fn log_id_at(&self, index: u64) -> Option<LogId> {
        lock(&self.shared.state).slot(index).map(|s| log_id(s.term, index))
    }

    /// Whether a snapshot ending at `last` with the next entry at `next_pos` is consistent with
    /// this log (see `State::check_snapshot_point`); `committed` is the caller's committed log id.
    pub fn check_snapshot_point(&self, last: LogId, next_pos: u64, committed: Option<LogId>) -> Result<()> {
        lock(&self.shared.state).check_snapshot_point(last, next_pos, committed)
    }

    /// A handle that does not keep the store open (for the RPC service, which may outlive the
    /// node in a network's registry).
    pub fn weak(&self) -> WeakLogStore {
        WeakLogStore(Arc::downgrade(&self.shared))
    }

    /// End of the last entry: where the next one goes (before any roll).
    pub fn end_pos(&self) -> u64 {
        lock(&self.shared.state).end_pos
    }

    /// Everything below this position has been fsynced.
    pub fn durable_pos(&self) -> u64 {
        lock(&self.shared.state).meta.durable_pos
    }

    /// The last log id whose whole record is below the durable watermark (what a crash now would
    /// leave), or the purge point when no entry is.
    pub fn durable_last_log_id(&self) -> Option<LogId> {
        let st = lock(&self.shared.state);
        let durable = st.meta.durable_pos;
        let on_disk = |i: u64| st.slot(i).is_some_and(|s| s.pos + u64::from(s.size) <= durable);
        let (Some(first), Some(last)) = (st.first, st.last) else { return st.meta.last_purged };
        if !on_disk(first) {
            return st.meta.last_purged;
        }
        // Positions grow with the index: the durable entries are a prefix.
        let (mut lo, mut hi) = (first, last.index);
        while lo < hi {
            let mid = lo + (hi - lo).div_ceil(2);
            if on_disk(mid) { lo = mid } else { hi = mid - 1 }
        }
        st.slot(lo).map(|s| log_id(s.term, lo))
    }

    /// The vote last made durable, if any.
    pub fn saved_vote(&self) -> Option<crate::type_config::Vote> {
        lock(&self.shared.state).meta.vote
    }

    /// Last appended log id (or the purge point if the log is empty after a purge).
    pub fn last_log_id(&self) -> Option<LogId> {
        lock(&self.shared.state).last_log_id()
    }

    /// Sync system calls the flusher made since the store opened (data, directory, meta).
    pub fn fsync_count(&self) -> u64 {
        self.shared.counters.fsyncs()
    }

    /// Group commits (flusher cycles that synced something) since the store opened.
    pub fn flush_count(&self) -> u64 {
        self.shared.counters.cycles()
    }

    /// How long the flusher's group commits took to sync (`raftmq_fsync_latency_seconds`).
    pub fn flush_latency(&self) -> flusher::FlushLatency {
        self.shared.counters.flush_latency()
    }

    /// Store directory.
    pub fn dir(&self) -> &Path {
        &self.shared.dir
    }

    /// How many handles (store clones and readers) share this store; the files are closed
    /// when the last one is dropped.
    pub fn handle_count(&self) -> usize {
        Arc::strong_count(&self.shared)
    }

    /// A read handle.
    pub fn reader(&self) -> LogReader {
        LogReader { shared: Arc::clone(&self.shared) }
    }

    /// Make everything appended so far durable (a graceful stop, before its checkpoint: a
    /// follower may have applied entries its own flush had not reached yet).
    pub async fn sync(&self) -> Result<()> {
        self.request(Request::Meta).await
    }

    async fn request(&self, make: impl FnOnce(flusher::Done) -> Request) -> Result<()> {
        let (tx, rx) = oneshot::channel();
        if !self.shared.send(make(tx)) {
            return Err(StoreError::FlusherStopped);
        }
        rx.await.map_err(|_| StoreError::FlusherStopped)?
    }

    /// Waits until the blocks `entries` need are allocated ([`State::reserve_for_append`]): a full
    /// disk makes the append wait, untouched and retried with a growing pause, instead of failing
    /// (openraft stops a replica whose append fails, and only a restart would bring it back). The
    /// wait shows in [`Self::space_wait_reason`]. Other errors are returned.
    async fn wait_for_space(&self, entries: &[Entry]) -> Result<()> {
        let mut pause_ms = APPEND_SPACE_RETRY_MIN_MS;
        loop {
            let reserved = lock(&self.shared.state).reserve_for_append(entries);
            match reserved {
                Ok(()) => {
                    if let Some(why) = lock(&self.shared.state).space_wait.take() {
                        tracing::info!(%why, "disk space again: the waiting append goes through");
                    }
                    return Ok(());
                }
                Err(e) if e.is_disk_full() => {
                    let first = lock(&self.shared.state).space_wait.replace(e.to_string()).is_none();
                    if first {
                        tracing::warn!(error = %e, "disk full: the append waits for space (nothing written)");
                    }
                    tokio::time::sleep(Duration::from_millis(pause_ms)).await;
                    pause_ms = (pause_ms * 2).min(APPEND_SPACE_RETRY_MAX_MS);
                }
                Err(e) => return Err(e),
            }
        }
    }

    async fn do_append(&self, entries: Vec<Entry>, cb: IOFlushed<TypeConfig>) -> Result<()> {
        if let Err(e) = self.wait_for_space(&entries).await {
            cb.io_completed(Err(io::Error::other(e.to_string())));
            return Err(e);
        }
        let appended = {
            let mut st = lock(&self.shared.state);
            st.append_batch(&entries)
        };
        if let Err(e) = appended {
            cb.io_completed(Err(io::Error::other(e.to_string())));
            return Err(e);
        }
        if self.shared.unsafe_ack_before_fsync {
            // The deliberately broken mode of the jepsen self-test: durable as far as openraft
            // knows, while the bytes stay in the page cache only, for a window wide enough that a
            // power loss reliably erases acknowledged entries.
            cb.io_completed(Ok(()));
            let due = {
                let mut last = self.shared.unsafe_last_flush.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
                let due = last.elapsed() >= Duration::from_millis(UNSAFE_FLUSH_PERIOD_MS);
                if due {
                    *last = std::time::Instant::now();
                }
                due
            };
            if due && !self.shared.send(Request::Flush(IOFlushed::noop())) {
                return Err(StoreError::FlusherStopped);
            }
            return Ok(());
        }
        let Some(cb) = self.shared.inline.try_flush(cb) else {
            return Ok(());
        };
        if self.shared.send(Request::Flush(cb)) { Ok(()) } else { Err(StoreError::FlusherStopped) }
    }

    async fn do_truncate_after(&self, last: Option<LogId>) -> Result<()> {
        lock(&self.shared.state).check_writable()?;
        // Barrier: pending flushes must finish before the watermark may move back.
        self.request(Request::Meta).await?;
        let truncation = {
            let mut st = lock(&self.shared.state);
            st.check_writable()?;
            st.truncate_logically(last)?
        };
        let Some(t) = truncation else { return Ok(()) };
        // The lowered watermark is durable before any byte is zeroed or file deleted.
        self.request(Request::Meta).await?;
        let sync = {
            let mut st = lock(&self.shared.state);
            st.check_writable()?;
            st.truncate_files(&t)?
        };
        self.request(|done| Request::Sync(sync.ranges, done)).await
    }

    async fn do_purge(&self, upto: LogId) -> Result<()> {
        {
            let mut st = lock(&self.shared.state);
            st.check_writable()?;
            st.purge_logically(upto)?;
        }
        // The purge point is durable before any file is deleted.
        self.request(Request::Meta).await?;
        lock(&self.shared.state).delete_purged_files()
    }

    /// Continue the log after a snapshot's `last` log id at `next_pos`, the leader's position of
    /// entry `last + 1`, dropping every local entry (called when installing a snapshot past the
    /// local log end, so positions keep agreeing with the leader's). Durable on return. A no-op
    /// when the log already holds `last`.
    pub async fn rebase(&self, last: LogId, next_pos: u64) -> Result<()> {
        {
            let mut st = lock(&self.shared.state);
            st.check_writable()?;
            if !st.rebase_logically(last, next_pos)? {
                return Ok(());
            }
        }
        // The new start is durable before any file goes, so a crash in between recovers an
        // empty log at `next_pos` (stale segments below it are removed by recovery).
        self.request(Request::Meta).await?;
        lock(&self.shared.state).delete_rebased_files()?;
        self.request(Request::Meta).await
    }

    async fn do_save_vote(&self, vote: &Vote) -> Result<()> {
        {
            let mut st = lock(&self.shared.state);
            st.check_writable()?;
            st.meta.vote = Some(*vote);
        }
        self.request(Request::Meta).await
    }
}

fn range_to_bounds<RB: RangeBounds<u64>>(range: &RB) -> (u64, u64) {
    let lo = match range.start_bound() {
        Bound::Included(x) => *x,
        Bound::Excluded(x) => x.saturating_add(1),
        Bound::Unbounded => 0,
    };
    let hi = match range.end_bound() {
        Bound::Included(x) => x.saturating_add(1),
        Bound::Excluded(x) => *x,
        Bound::Unbounded => u64::MAX,
    };
    (lo, hi)
}

impl LogReader {
    fn read(&self, lo: u64, hi: u64, budget: Option<u64>) -> Result<Vec<Entry>> {
        let st = lock(&self.shared.state);
        let budget = budget.map(|_| st.limits.append_entries_max_bytes);
        st.read_range(lo, hi, budget)
    }
}

impl RaftLogReader<TypeConfig> for LogReader {
    async fn try_get_log_entries<RB: RangeBounds<u64> + Clone + Debug + Send>(
        &mut self,
        range: RB,
    ) -> std::result::Result<Vec<Entry>, io::Error> {
        let (lo, hi) = range_to_bounds(&range);
        Ok(self.read(lo, hi, None)?)
    }

    async fn read_vote(&mut self) -> std::result::Result<Option<Vote>, io::Error> {
        Ok(lock(&self.shared.state).meta.vote)
    }

    async fn limited_get_log_entries(&mut self, start: u64, end: u64) -> std::result::Result<Vec<Entry>, io::Error> {
        Ok(self.read(start, end, Some(0))?)
    }
}

impl RaftLogReader<TypeConfig> for LogStore {
    async fn try_get_log_entries<RB: RangeBounds<u64> + Clone + Debug + Send>(
        &mut self,
        range: RB,
    ) -> std::result::Result<Vec<Entry>, io::Error> {
        self.reader().try_get_log_entries(range).await
    }

    async fn read_vote(&mut self) -> std::result::Result<Option<Vote>, io::Error> {
        Ok(lock(&self.shared.state).meta.vote)
    }

    async fn limited_get_log_entries(&mut self, start: u64, end: u64) -> std::result::Result<Vec<Entry>, io::Error> {
        self.reader().limited_get_log_entries(start, end).await
    }
}

impl RaftLogStorage<TypeConfig> for LogStore {
    type LogReader = LogReader;

    async fn get_log_state(&mut self) -> std::result::Result<LogState<TypeConfig>, io::Error> {
        let st = lock(&self.shared.state);
        Ok(LogState { last_purged_log_id: st.meta.last_purged, last_log_id: st.last_log_id() })
    }

    async fn get_log_reader(&mut self) -> Self::LogReader {
        self.reader()
    }

    async fn save_vote(&mut self, vote: &Vote) -> std::result::Result<(), io::Error> {
        Ok(self.do_save_vote(vote).await?)
    }

    async fn save_committed(&mut self, committed: Option<LogId>) -> std::result::Result<(), io::Error> {
        let mut st = lock(&self.shared.state);
        if st.meta.committed != committed {
            st.meta.committed = committed;
            st.committed_dirty = true;
        }
        Ok(())
    }

    async fn read_committed(&mut self) -> std::result::Result<Option<LogId>, io::Error> {
        // A persisted committed id may exceed what survived locally (openraft commits what is
        // accepted, not necessarily flushed); entries at or below it are never truncated, so
        // clamping to the recovered last entry is safe.
        let st = lock(&self.shared.state);
        let Some(c) = st.meta.committed else { return Ok(None) };
        let last = st.last_log_id();
        Ok(match last {
            Some(l) if l.index < c.index => Some(l),
            Some(_) => Some(c),
            None => None,
        })
    }

    async fn append<I>(&mut self, entries: I, callback: IOFlushed<TypeConfig>) -> std::result::Result<(), io::Error>
    where
        I: IntoIterator<Item = Entry> + Send,
        I::IntoIter: Send,
    {
        Ok(self.do_append(entries.into_iter().collect(), callback).await?)
    }

    async fn truncate_after(&mut self, last_log_id: Option<LogId>) -> std::result::Result<(), io::Error> {
        Ok(self.do_truncate_after(last_log_id).await?)
    }

    async fn purge(&mut self, log_id: LogId) -> std::result::Result<(), io::Error> {
        Ok(self.do_purge(log_id).await?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::type_config::{AppPayload, EntryPayload};

    fn cfg() -> RaftConfig {
        RaftConfig { segment_size_bytes: 4096, index_file_entries: 16, ..RaftConfig::default() }
    }

    fn entries(term: u64, range: std::ops::RangeInclusive<u64>) -> Vec<Entry> {
        range
            .map(|i| Entry {
                log_id: log_id(term, i),
                payload: EntryPayload::Normal(AppPayload::new(1, vec![i as u8; 300])),
            })
            .collect()
    }

    /// Appends 1..=10, then places a snapshot install's rebase onto (term 2, 12) at `next_pos`
    /// inside the flusher cycle that syncs them, finishes the rebase and reopens the store.
    async fn rebase_inside_a_flush(next_pos: impl FnOnce(&LogStore) -> u64) -> anyhow::Result<()> {
        let dir = tempfile::tempdir()?;
        let mut store = LogStore::open(dir.path(), &cfg())?;
        store.append(entries(1, 1..=3), IOFlushed::noop()).await?;
        store.sync().await?;
        let last = log_id(2, 12);
        let next_pos = next_pos(&store);
        lock(&store.shared.state).after_sync_hook = Some(Box::new(move |st: &mut State| {
            assert!(st.rebase_logically(last, next_pos).expect("rebase"), "the log does not hold the snapshot point");
        }));
        store.append(entries(1, 4..=10), IOFlushed::noop()).await?;
        store.sync().await?;
        assert!(lock(&store.shared.state).after_sync_hook.is_none(), "the hook ran");
        assert!(
            store.durable_pos() <= store.end_pos(),
            "watermark {} past the rebased end {}",
            store.durable_pos(),
            store.end_pos()
        );
        assert_eq!(store.durable_pos(), next_pos);
        assert!(
            crate::zero_ahead::untouchable(&lock(&store.shared.state)),
            "no zeros ahead over the old log before the rebase is durable"
        );
        store.rebase(last, next_pos).await?;
        assert!(!crate::zero_ahead::untouchable(&lock(&store.shared.state)));
        drop(store);
        let mut re = LogStore::open(dir.path(), &cfg())?;
        assert!(!re.is_damaged(), "{:?}", re.damage_reason());
        assert_eq!((re.last_log_id(), re.end_pos()), (Some(last), next_pos));
        re.append(entries(2, 13..=14), IOFlushed::noop()).await?;
        re.sync().await?;
        assert_eq!(re.entry_position(13).map(|p| p.pos), Some(next_pos));
        Ok(())
    }

    /// A flush callback and the receiver of its completion.
    fn signalled() -> (IOFlushed<TypeConfig>, tokio::sync::oneshot::Receiver<io::Result<()>>) {
        use openraft::async_runtime::Oneshot;
        let (tx, rx) = <<crate::runtime::RaftRuntime as openraft::AsyncRuntime>::Oneshot as Oneshot>::channel();
        (IOFlushed::signal(tx), rx)
    }

    /// A store whose flusher runs as a task on this current-thread runtime, so it runs only when
    /// the test yields, with inline flushes allowed and no idle time asked of them: whether a
    /// flush ran inline is then decided by the code alone, never by timing.
    fn task_mode_store(dir: &Path) -> anyhow::Result<LogStore> {
        let cfg = RaftConfig { flush_inline_idle_min_us: 0, flush_mode: FlushMode::Task, ..cfg() };
        let mut store = LogStore::open(dir, &cfg)?;
        assert!(!store.shared.inline_allowed, "task mode never flushes inline by itself");
        Arc::get_mut(&mut store.shared).ok_or_else(|| anyhow::anyhow!("a second handle"))?.inline_allowed = true;
        store.set_role(false);
        Ok(store)
    }

    #[tokio::test]
    async fn a_follower_flushes_inline_and_a_leader_hands_over_to_the_flusher() -> anyhow::Result<()> {
        let dir = tempfile::tempdir()?;
        let mut store = task_mode_store(dir.path())?;

        let (cb, mut done) = signalled();
        store.append(entries(1, 1..=2), cb).await?;
        assert!(matches!(done.try_recv(), Ok(Ok(()))), "a follower's flush completes before append returns");
        assert_eq!(store.durable_pos(), store.end_pos());

        store.set_role(true);
        let (cb, mut done) = signalled();
        store.append(entries(1, 3..=4), cb).await?;
        assert!(done.try_recv().is_err(), "a leader's flush waits for the flusher");
        assert!(store.durable_pos() < store.end_pos());
        store.sync().await?;
        assert!(matches!(done.try_recv(), Ok(Ok(()))));
        assert_eq!(store.durable_pos(), store.end_pos());

        store.set_role(false);
        let (cb, mut done) = signalled();
        store.append(entries(1, 5..=5), cb).await?;
        assert!(matches!(done.try_recv(), Ok(Ok(()))), "inline again as a follower");
        assert_eq!(store.durable_pos(), store.end_pos());
        Ok(())
    }

    #[test]
    fn inline_flushes_follow_the_flush_mode_and_the_idle_setting() -> anyhow::Result<()> {
        let dir = tempfile::tempdir()?;
        let thread = LogStore::open(dir.path(), &cfg())?;
        assert!(thread.shared.inline_allowed, "thread mode, default idle time");
        drop(thread);
        let never = LogStore::open(dir.path(), &RaftConfig { flush_inline_idle_min_us: 0, ..cfg() })?;
        assert!(!never.shared.inline_allowed, "0 = never inline");
        drop(never);
        let unsafe_mode = LogStore::open(dir.path(), &RaftConfig { unsafe_ack_before_fsync: true, ..cfg() })?;
        assert!(!unsafe_mode.shared.inline_allowed);
        Ok(())
    }

    #[tokio::test]
    async fn no_inline_flush_while_a_request_waits_for_the_flusher() -> anyhow::Result<()> {
        // A queued request stays queued for exactly as long as the test says (`task_mode_store`).
        let dir = tempfile::tempdir()?;
        let mut store = task_mode_store(dir.path())?;

        let (cb, mut done) = signalled();
        store.append(entries(1, 1..=1), cb).await?;
        assert!(matches!(done.try_recv(), Ok(Ok(()))), "idle flusher: inline");

        let (queued, mut queued_done) = signalled();
        assert!(store.shared.send(Request::Flush(queued)));
        let (cb, mut done) = signalled();
        store.append(entries(1, 2..=2), cb).await?;
        assert!(done.try_recv().is_err(), "an earlier request waits: the flush must wait behind it");
        assert!(queued_done.try_recv().is_err());
        store.sync().await?;
        assert!(matches!(queued_done.try_recv(), Ok(Ok(()))));
        assert!(matches!(done.try_recv(), Ok(Ok(()))));
        assert_eq!(store.durable_pos(), store.end_pos());

        let (cb, mut done) = signalled();
        store.append(entries(1, 3..=3), cb).await?;
        assert!(matches!(done.try_recv(), Ok(Ok(()))), "nothing queued again: inline");
        Ok(())
    }

    #[tokio::test]
    async fn committed_bytes_are_read_from_the_mapping_and_nothing_past_the_committed_entry() -> anyhow::Result<()> {
        let dir = tempfile::tempdir()?;
        let mut store = LogStore::open(dir.path(), &cfg())?;
        store.append(entries(1, 1..=6), IOFlushed::noop()).await?;
        store.sync().await?;
        let at = |i: u64| store.entry_position(i).ok_or_else(|| anyhow::anyhow!("entry {i} missing"));
        let (two, three, four) = (at(2)?, at(3)?, at(4)?);
        assert_eq!(store.read_committed_bytes(two.pos, 8), None, "nothing committed yet");

        store.save_committed(Some(log_id(1, 3))).await?;
        let on_disk = std::fs::read(dir.path().join(COMMITLOG_DIR).join(crate::segment::file_name(0)))?;
        let whole = |p: EntryPosition| (p.pos, p.size as usize);
        for (pos, len) in [whole(two), whole(three), (two.payload_pos + 5, 17)] {
            let got = store.read_committed_bytes(pos, len).ok_or_else(|| anyhow::anyhow!("{pos}+{len} unread"))?;
            assert_eq!(&got[..], &on_disk[pos as usize..pos as usize + len]);
        }
        assert_eq!(store.read_committed_bytes(three.pos, three.size as usize + 1), None, "one byte past entry 3");
        assert_eq!(store.read_committed_bytes(four.pos, 1), None, "entry 4 is not committed");
        assert_eq!(store.read_committed_bytes(4090, 10), None, "past the committed end, across two segments");
        assert_eq!(store.read_committed_bytes(u64::MAX - 1, 4), None);
        Ok(())
    }

    #[tokio::test]
    async fn hole2_rebase_during_inflight_flush_past_the_end_keeps_the_flusher_alive() -> anyhow::Result<()> {
        // The snapshot's next entry lies beyond the local end: the cycle's end is below the
        // rebased watermark (the flusher thread used to die on its assertion).
        rebase_inside_a_flush(|s| s.end_pos() - s.end_pos() % 4096 + 3 * 4096 + 64).await
    }

    #[tokio::test]
    async fn hole2_rebase_during_inflight_flush_below_the_end_persists_no_watermark_past_it() -> anyhow::Result<()> {
        // The snapshot's next entry lies inside the local log: the cycle's end is past the
        // rebased end (the watermark used to be raised past the log end, and the reopened store
        // was damaged).
        rebase_inside_a_flush(|s| s.entry_position(2).map_or(0, |p| p.pos)).await
    }
}
