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
//! Both modes run the same [`Flusher::batch`] with the same syscalls; only who waits for the
//! channel differs. The committed log id is persisted at most every `committed_every` of tokio
//! time (real time on the thread, virtual time in a simulation).
//!
//! Invariants: a callback completes Ok only after every byte appended before its request was
//! synced; the watermark is written only after the sync it describes; on any sync error every
//! waiter fails, the store is poisoned and stays poisoned (fsyncgate: a failed fsync may have
//! dropped dirty pages, so later successes prove nothing); once a batch with `Shutdown` ran,
//! the flusher does nothing more.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{Receiver, TryRecvError};
use std::sync::{Arc, Mutex, MutexGuard};
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

/// The flusher's loop state: whatever the thread body kept in locals, so that a task can run
/// the same batches one wake-up at a time.
pub struct Flusher {
    state: Arc<Mutex<State>>,
    meta_file: MetaFile,
    rx: Receiver<Request>,
    committed_every: Duration,
    counters: Arc<Counters>,
    /// tokio time: the committed-id throttle must follow a simulation's virtual clock.
    last_meta_write: tokio::time::Instant,
    /// Requests held while a crash test froze the store (see `LogStore::freeze_for_crash_test`).
    held: Vec<Request>,
    /// Thread mode only: zeros ahead of the log end, synced bytes dropped behind it.
    page_cache: Option<PageCache>,
    /// What `run_thread` starts `page_cache` for (nothing: no thread).
    page_cache_tasks: Option<Tasks>,
    stopped: bool,
}

impl Flusher {
    /// A flusher over `rx`; nothing runs until [`Self::run_thread`] or [`run_task`].
    pub fn new(
        state: Arc<Mutex<State>>,
        meta_file: MetaFile,
        rx: Receiver<Request>,
        committed_every: Duration,
        counters: Arc<Counters>,
        page_cache_tasks: Option<Tasks>,
    ) -> Self {
        Self {
            state,
            meta_file,
            rx,
            committed_every,
            counters,
            last_meta_write: tokio::time::Instant::now(),
            held: Vec::new(),
            page_cache: None,
            page_cache_tasks,
            stopped: false,
        }
    }

    /// The flusher thread body ([`FlushMode::Thread`](crate::config::FlushMode::Thread)): block on the channel until `Shutdown`
    /// or until every sender is gone.
    pub fn run_thread(mut self) {
        // On this thread's clock (the real one), as the throttle always was.
        self.last_meta_write = tokio::time::Instant::now();
        if let Some(tasks) = self.page_cache_tasks.take() {
            self.page_cache = PageCache::start(&self.state, tasks);
        }
        while let Ok(first) = self.rx.recv() {
            if !self.batch(first) {
                break;
            }
        }
        if let Some(p) = self.page_cache.take() {
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
        let mut batch = std::mem::take(&mut self.held);
        batch.push(first);
        batch.extend(self.rx.try_iter());
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
