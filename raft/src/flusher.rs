//! The group-commit flusher: makes appended data durable and then completes every waiting
//! `IOFlushed` callback. It runs where [`FlushMode`](crate::config::FlushMode) says: on one std thread per store, never a
//! tokio worker (production), or as a task on the store's tokio runtime (deterministic
//! simulation: no thread, so a seeded current-thread runtime with paused time decides every
//! interleaving, and virtual time never advances while a sync is in progress).
//!
//! ```text
//! append() ───pwrite to segment──▶ State ─┐          ┌─ msync [durable, end) of data segments
//!          └─ Request::Flush(cb) ──▶ channel ──▶ loop: take all queued requests ─┤─ fsync dir if a segment was created
//! save_vote/purge ─ Request::Meta ──▶   │           ├─ write meta slot (+fdatasync) if asked
//! truncate ──────── Request::Sync ──▶   │           └─ complete callbacks in FIFO order
//! ```
//!
//! The thread flusher has a helper thread (`page_cache`) keep the blocks after the log end
//! written (`zero_ahead`), so its syncs skip the filesystem's block allocation, and hand synced
//! bytes far behind the end back to the kernel; it wakes the helper only when one of the two has
//! a step due (`page_cache::look_due`).
//!
//! Appends reach the segment files with `pwrite` (see `store_state`), never through the
//! mapping, so there is nothing to pre-fault: RocketMQ's "warm mapped file" made the kernel zero
//! fresh pages that the next append overwrote, and writing through the mapping made every
//! `msync` write-protect the mapped pages again (TLB shootdowns); together about a third of the
//! CPU of a busy group, and replication twice as slow as with `pwrite`.
//!
//! Both modes run the same [`Core::run`] with the same syscalls; only who waits for the
//! channel differs.
//!
//! Inline flushes ([`InlineFlush`], thread mode): a replica that is not the leader may run the
//! cycle on its appending thread instead of handing it over, when the flusher has nothing queued,
//! holds nothing and has been idle for `flush_inline_idle_min_us`. At one entry in flight a
//! hand-off costs two thread wake-ups (to the flusher and back), each one an idle vCPU woken on
//! a VM; under load appends come closer together than that idle time and every one goes to the
//! flusher, whose cycles cover many appends each (group commit). The leader never flushes inline:
//! its Raft thread must go on to replicate while its own sync runs. The committed log id is persisted at most every `committed_every` of tokio
//! time (real time on the thread, virtual time in a simulation).
//!
//! Invariants: a callback completes Ok only after every byte appended before its request was
//! synced; the watermark is written only after the sync it describes; on any sync error every
//! waiter fails, the store is poisoned and stays poisoned (fsyncgate: a failed fsync may have
//! dropped dirty pages, so later successes prove nothing); once a batch with `Shutdown` ran,
//! the flusher does nothing more.

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::mpsc::{Receiver, TryRecvError};
use std::sync::{Arc, Mutex, MutexGuard, TryLockError};
use std::time::{Duration, Instant};

use openraft::storage::IOFlushed;
use tokio::sync::{Notify, oneshot};

use crate::error::{Result, StoreError};
use crate::mapped_file::{SyncHandle, sync_open_dir};
use crate::meta::MetaFile;
use crate::page_cache::{PageCache, Tasks};
use crate::store_state::{State, lock};
use crate::type_config::TypeConfig;

/// Reply channel of a synchronous request.
pub type Done = oneshot::Sender<Result<()>>;

/// Work for the flusher.
pub enum Request {
    /// Make everything appended so far durable, then complete the callback.
    Flush(IOFlushed<TypeConfig>),
    /// Make everything appended so far durable and persist the current meta, then reply.
    Meta(Done),
    /// Sync these extra ranges (e.g. bytes zeroed by a truncation), sync the directory, persist
    /// the meta, then reply.
    Sync(Vec<(SyncHandle, u64, u64)>, Done),
    /// Finish what is queued and exit.
    Shutdown,
}

/// Upper bounds (seconds) of the flush-latency histogram buckets; a last `+Inf` bucket is implied.
pub const FLUSH_LATENCY_BUCKETS_SECONDS: [f64; 12] =
    [0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1.0];

/// What the flusher has done since the store opened (for benchmarks and monitoring).
#[derive(Debug, Default)]
pub struct Counters {
    /// Sync system calls: data ranges (`msync`), directory and meta-file fsyncs.
    fsyncs: AtomicU64,
    /// Cycles that synced anything (one group commit each).
    cycles: AtomicU64,
    /// Cycles per latency bucket (the last one is `+Inf`), not cumulative.
    latency_buckets: [AtomicU64; FLUSH_LATENCY_BUCKETS_SECONDS.len() + 1],
    /// Total time the counted cycles spent syncing.
    latency_nanos: AtomicU64,
}

/// The flusher's sync latency as a histogram: how long each group commit took to make its data
/// durable (every `msync`/`fdatasync` of the cycle), for `raftmq_fsync_latency_seconds`.
#[derive(Debug, Clone, PartialEq)]
pub struct FlushLatency {
    /// Cumulative counts per bound of [`FLUSH_LATENCY_BUCKETS_SECONDS`] (`le` buckets).
    pub cumulative: Vec<(f64, u64)>,
    /// Cycles counted (the `+Inf` bucket).
    pub count: u64,
    /// Sum of their latencies in seconds.
    pub sum_seconds: f64,
}

impl Counters {
    /// Sync system calls so far.
    pub fn fsyncs(&self) -> u64 {
        self.fsyncs.load(Ordering::Relaxed)
    }

    /// Group commits so far.
    pub fn cycles(&self) -> u64 {
        self.cycles.load(Ordering::Relaxed)
    }

    /// The latency histogram so far. Buckets are read one by one, so a scrape racing a cycle may
    /// see it in one bucket and not yet in the count: monitoring tolerates that.
    pub fn flush_latency(&self) -> FlushLatency {
        let mut cumulative = Vec::with_capacity(FLUSH_LATENCY_BUCKETS_SECONDS.len());
        let mut running = 0u64;
        for (bound, bucket) in FLUSH_LATENCY_BUCKETS_SECONDS.iter().zip(&self.latency_buckets) {
            running = running.saturating_add(bucket.load(Ordering::Relaxed));
            cumulative.push((*bound, running));
        }
        let overflow = self.latency_buckets.last().map_or(0, |b| b.load(Ordering::Relaxed));
        let count = running.saturating_add(overflow);
        let sum_seconds = self.latency_nanos.load(Ordering::Relaxed) as f64 / 1e9;
        FlushLatency { cumulative, count, sum_seconds }
    }

    fn add(&self, syncs: u64, took: Duration) {
        if syncs > 0 {
            self.fsyncs.fetch_add(syncs, Ordering::Relaxed);
            self.cycles.fetch_add(1, Ordering::Relaxed);
            let seconds = took.as_secs_f64();
            let bucket = FLUSH_LATENCY_BUCKETS_SECONDS.iter().position(|b| seconds <= *b);
            let bucket = bucket.unwrap_or(FLUSH_LATENCY_BUCKETS_SECONDS.len());
            if let Some(b) = self.latency_buckets.get(bucket) {
                b.fetch_add(1, Ordering::Relaxed);
            }
            let nanos = u64::try_from(took.as_nanos()).unwrap_or(u64::MAX);
            self.latency_nanos.fetch_add(nanos, Ordering::Relaxed);
        }
    }
}

/// The flusher's loop: the channel end and how it waits. The cycles themselves run in [`Core`],
/// which an [`InlineFlush`] may also lock from the appending thread.
pub struct Flusher {
    rx: Receiver<Request>,
    core: Arc<Mutex<Core>>,
    /// Requests sent and not yet taken into a batch under the core's lock (see [`InlineFlush`]).
    queued: Arc<AtomicUsize>,
    /// What `run_thread` starts `page_cache` for (nothing: no thread).
    page_cache_tasks: Option<Tasks>,
    stopped: bool,
}

/// What a cycle needs, behind one lock: whoever holds it runs the only cycle in progress, and
/// callbacks complete under it, so they complete in the order their requests were taken.
pub struct Core {
    state: Arc<Mutex<State>>,
    meta_file: MetaFile,
    committed_every: Duration,
    counters: Arc<Counters>,
    /// tokio time: the committed-id throttle must follow a simulation's virtual clock.
    last_meta_write: tokio::time::Instant,
    /// Requests held while a crash test froze the store (see `LogStore::freeze_for_crash_test`).
    held: Vec<Request>,
    /// Thread mode only: zeros ahead of the log end, synced bytes dropped behind it.
    page_cache: Option<PageCache>,
    /// When the last run ended (real time; inline flushes exist in thread mode only).
    idle_since: Instant,
    /// A batch with `Shutdown` ran: nothing more runs.
    stopped: bool,
}

/// The appender's side of inline flushes (module docs). Every request for the flusher is counted
/// in `queued` before it is sent ([`Self::count_sent`]), so an inline cycle that finds the count
/// at zero under the core's lock knows no earlier request is waiting to complete after it.
pub struct InlineFlush {
    core: Arc<Mutex<Core>>,
    queued: Arc<AtomicUsize>,
    /// Off on a leader ([`Self::set_enabled`]).
    enabled: AtomicBool,
    idle_min: Duration,
}

impl InlineFlush {
    /// Allow or forbid inline flushes from now on (a leader forbids them).
    pub fn set_enabled(&self, on: bool) {
        self.enabled.store(on, Ordering::Relaxed);
    }

    /// Count a request about to be sent to the flusher (undo with [`Self::count_unsent`]).
    pub fn count_sent(&self) {
        self.queued.fetch_add(1, Ordering::SeqCst);
    }

    /// Undo [`Self::count_sent`] for a request the channel refused.
    pub fn count_unsent(&self) {
        self.queued.fetch_sub(1, Ordering::SeqCst);
    }

    /// Run the flush of `cb` on this thread if the flusher is idle (module docs) and return
    /// `None`; otherwise give `cb` back for the channel.
    pub fn try_flush(&self, cb: IOFlushed<TypeConfig>) -> Option<IOFlushed<TypeConfig>> {
        if !self.enabled.load(Ordering::Relaxed) {
            return Some(cb);
        }
        let mut core = match self.core.try_lock() {
            Ok(core) => core,
            Err(TryLockError::Poisoned(p)) => p.into_inner(),
            Err(TryLockError::WouldBlock) => return Some(cb),
        };
        let idle = !core.stopped
            && core.held.is_empty()
            && self.queued.load(Ordering::SeqCst) == 0
            && core.idle_since.elapsed() >= self.idle_min;
        if !idle {
            return Some(cb);
        }
        core.run(vec![Request::Flush(cb)]);
        None
    }
}

impl Flusher {
    /// A flusher over `rx`, and the handle through which appenders may flush inline (enabled
    /// only in thread mode, by `inline_idle_min`); nothing runs until [`Self::run_thread`] or
    /// [`run_task`].
    pub fn new(
        state: Arc<Mutex<State>>,
        meta_file: MetaFile,
        rx: Receiver<Request>,
        committed_every: Duration,
        counters: Arc<Counters>,
        page_cache_tasks: Option<Tasks>,
        inline_idle_min: Duration,
    ) -> (Self, Arc<InlineFlush>) {
        let core = Core {
            state,
            meta_file,
            committed_every,
            counters,
            last_meta_write: tokio::time::Instant::now(),
            held: Vec::new(),
            page_cache: None,
            idle_since: Instant::now(),
            stopped: false,
        };
        let core = Arc::new(Mutex::new(core));
        let queued = Arc::new(AtomicUsize::new(0));
        let inline = InlineFlush {
            core: Arc::clone(&core),
            queued: Arc::clone(&queued),
            enabled: AtomicBool::new(false),
            idle_min: inline_idle_min,
        };
        (Self { rx, core, queued, page_cache_tasks, stopped: false }, Arc::new(inline))
    }

    /// The flusher thread body ([`FlushMode::Thread`](crate::config::FlushMode::Thread)): block on the channel until `Shutdown`
    /// or until every sender is gone.
    pub fn run_thread(mut self) {
        {
            let mut core = lock_core(&self.core);
            // On this thread's clock (the real one), as the throttle always was.
            core.last_meta_write = tokio::time::Instant::now();
            if let Some(tasks) = self.page_cache_tasks.take() {
                core.page_cache = PageCache::start(&core.state, tasks);
            }
        }
        while let Ok(first) = self.rx.recv() {
            if !self.batch(first) {
                break;
            }
        }
        // Stopped outside the lock: stopping joins the helper thread.
        let page_cache = lock_core(&self.core).page_cache.take();
        if let Some(p) = page_cache {
            p.stop();
        }
    }

    /// Run every queued request without blocking ([`FlushMode::Task`](crate::config::FlushMode::Task)). Returns false once the
    /// flusher has stopped (a `Shutdown` ran or every sender is gone).
    pub fn drain(&mut self) -> bool {
        while !self.stopped {
            match self.rx.try_recv() {
                Ok(first) => {
                    if !self.batch(first) {
                        self.stopped = true;
                    }
                }
                Err(TryRecvError::Empty) => return true,
                Err(TryRecvError::Disconnected) => self.stopped = true,
            }
        }
        false
    }

    /// One group commit: `first` and everything queued behind it. Returns false after `Shutdown`.
    fn batch(&mut self, first: Request) -> bool {
        let mut batch = vec![first];
        batch.extend(self.rx.try_iter());
        let mut core = lock_core(&self.core);
        // Only now, under the lock: an inline flush that sees zero knows these are done.
        self.queued.fetch_sub(batch.len(), Ordering::SeqCst);
        core.run(batch)
    }
}

fn lock_core(core: &Mutex<Core>) -> MutexGuard<'_, Core> {
    core.lock().unwrap_or_else(|p| p.into_inner())
}

impl Core {
    /// One group commit: what was held, then `batch`. Returns false after `Shutdown`.
    fn run(&mut self, batch: Vec<Request>) -> bool {
        let batch = if self.held.is_empty() {
            batch
        } else {
            let mut all = std::mem::take(&mut self.held);
            all.extend(batch);
            all
        };
        let shutdown = batch.iter().any(|r| matches!(r, Request::Shutdown));
        let hold = {
            let st = lock(&self.state);
            st.frozen && st.poisoned.is_none()
        };
        if hold && !shutdown {
            self.held = batch;
            return true;
        }
        let write_meta = batch.iter().any(|r| matches!(r, Request::Meta(_) | Request::Sync(..)));
        let mut syncs = 0;
        // Real time on purpose: the histogram reports what the syscalls cost, and nothing
        // decides on it.
        let started = Instant::now();
        let result = cycle(
            &self.state,
            &mut self.meta_file,
            &batch,
            write_meta,
            &mut self.last_meta_write,
            self.committed_every,
            &mut syncs,
        );
        self.counters.add(syncs, started.elapsed());
        if let Err(e) = &result
            && !matches!(e, StoreError::Damaged(_))
        {
            let reason = e.to_string();
            tracing::error!(%reason, "raft log flush failed; poisoning the store");
            let mut st = lock(&self.state);
            st.poisoned.get_or_insert(reason);
        }
        complete(batch, &result);
        if let Ok(synced) = &result
            && let Some(p) = &self.page_cache
        {
            p.poke_if_due(synced.end_pos, synced.durable_pos);
        }
        self.idle_since = Instant::now();
        self.stopped |= shutdown;
        !shutdown
    }
}

/// Lock a task flusher's slot (poison-tolerant like [`lock`](crate::store_state::lock)).
pub fn lock_slot(slot: &Mutex<Option<Flusher>>) -> MutexGuard<'_, Option<Flusher>> {
    slot.lock().unwrap_or_else(|p| p.into_inner())
}

/// The task body of [`FlushMode::Task`](crate::config::FlushMode::Task): drain the channel at every wake-up (senders notify
/// `wake` after each send; a wake-up while draining is kept as a permit, so none is lost).
/// Ends when the flusher stops or the store took it out of `slot` to finish it on drop.
pub async fn run_task(slot: Arc<Mutex<Option<Flusher>>>, wake: Arc<Notify>) {
    loop {
        wake.notified().await;
        let mut guard = lock_slot(&slot);
        let running = match guard.as_mut() {
            Some(f) => f.drain(),
            None => false,
        };
        if !running {
            // Close the files now, not when the runtime drops this task.
            guard.take();
            return;
        }
    }
}

/// One group commit's syscalls; see the module docs.
fn cycle(
    state: &Mutex<State>,
    meta_file: &mut MetaFile,
    batch: &[Request],
    write_meta: bool,
    last_meta_write: &mut tokio::time::Instant,
    committed_every: Duration,
    syncs: &mut u64,
) -> Result<Synced> {
    let (ranges, end, generation, dir, dir_dirty) = {
        let mut st = lock(state);
        if let Some(p) = &st.poisoned {
            return Err(StoreError::Poisoned(p.clone()));
        }
        if st.frozen {
            return Err(StoreError::Poisoned("simulated crash (test hook)".into()));
        }
        if let Some(d) = &st.damaged {
            // Recovery left the files untouched for inspection; nothing may be written.
            return Err(StoreError::Damaged(d.clone()));
        }
        let end = st.end_pos;
        let from = st.meta.durable_pos.min(end);
        let dirty = std::mem::take(&mut st.dir_dirty);
        let dir = (st.segs.dir_file(), st.segs.dir().to_path_buf());
        (st.segs.sync_ranges(from, end), end, st.log_generation, dir, dirty)
    };
    for r in batch {
        if let Request::Sync(extra, _) = r {
            for (h, off, len) in extra {
                *syncs += 1;
                h.sync_range(*off, *len)?;
            }
        }
    }
    *syncs += u64::from(dir_dirty);
    if dir_dirty && let Err(e) = sync_open_dir(&dir.0, &dir.1) {
        lock(state).dir_dirty = true;
        return Err(e);
    }
    for (h, off, len) in &ranges {
        *syncs += 1;
        h.sync_range(*off, *len)?;
    }
    #[cfg(test)]
    {
        let hook = lock(state).after_sync_hook.take();
        if let Some(hook) = hook {
            hook(&mut lock(state));
        }
    }
    let (snapshot, persist, same_log) = {
        let mut st = lock(state);
        // Poisoned or frozen while syncing (a failed fsync elsewhere, or a crash test): the
        // watermark stays where it was and nothing of this batch is acknowledged.
        if let Some(p) = &st.poisoned {
            return Err(StoreError::Poisoned(p.clone()));
        }
        if st.frozen {
            return Err(StoreError::Poisoned("simulated crash (test hook)".into()));
        }
        // A truncation or rebase (a snapshot install runs beside vote saves and flushes) while
        // this cycle synced: the bytes synced belong to a log that is gone, and the watermark
        // the cut set stands. The batch still completes: it is as if it had finished just
        // before the cut, which is what a waiter may assume of any flush.
        let same_log = st.log_generation == generation;
        if same_log {
            assert!(end >= st.meta.durable_pos, "durable watermark must not move back");
            st.meta.durable_pos = end;
        }
        let committed_due = st.committed_dirty && last_meta_write.elapsed() >= committed_every;
        let persist = write_meta || committed_due;
        if persist {
            st.committed_dirty = false;
        }
        (st.meta.clone(), persist, same_log)
    };
    if persist {
        *syncs += 1;
        meta_file.write(&snapshot)?;
        *last_meta_write = tokio::time::Instant::now();
    } else if !ranges.is_empty() && same_log {
        meta_file.write_watermark(end)?;
    }
    Ok(Synced { end_pos: end, durable_pos: snapshot.durable_pos })
}

/// Where a cycle left the log: the end it synced to and the durable watermark after it (the
/// same, unless a truncation or rebase set the watermark meanwhile).
struct Synced {
    end_pos: u64,
    durable_pos: u64,
}

fn complete<T>(batch: Vec<Request>, result: &Result<T>) {
    let e = result.as_ref().err().map(ToString::to_string);
    for r in batch {
        match r {
            Request::Flush(cb) => match &e {
                None => cb.io_completed(Ok(())),
                Some(m) => cb.io_completed(Err(std::io::Error::other(m.clone()))),
            },
            Request::Meta(done) | Request::Sync(_, done) => {
                // The waiter may have been cancelled; nothing to do then.
                let _ = done.send(match &e {
                    None => Ok(()),
                    Some(m) => Err(StoreError::Poisoned(m.clone())),
                });
            }
            Request::Shutdown => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flush_latency_buckets_are_cumulative_and_count_only_cycles_that_synced() {
        let c = Counters::default();
        c.add(0, Duration::from_secs(9));
        c.add(2, Duration::from_micros(50));
        c.add(1, Duration::from_millis(3));
        c.add(1, Duration::from_secs(5));
        let l = c.flush_latency();
        assert_eq!((l.count, c.cycles(), c.fsyncs()), (3, 3, 4));
        assert_eq!(l.cumulative.first(), Some(&(0.0001, 1)));
        assert_eq!(l.cumulative.iter().find(|(b, _)| *b == 0.005).map(|(_, n)| *n), Some(2));
        assert_eq!(l.cumulative.last(), Some(&(1.0, 2)), "5 s is only in +Inf");
        assert!((l.sum_seconds - 5.00305).abs() < 1e-9);
    }
}
