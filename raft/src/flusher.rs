//! The group-commit flusher: one std thread per store (never a tokio worker) that makes
//! appended data durable and then completes every waiting `IOFlushed` callback.
//!
//! ```text
//! append() ──memcpy into mmap──▶ State ──┐          ┌─ msync [durable, end) of data segments
//!          └─ Request::Flush(cb) ──▶ channel ──▶ loop: take all queued requests ─┤─ fsync dir if a segment was created
//! save_vote/purge ─ Request::Meta ──▶   │           ├─ write meta slot (+fdatasync) if asked
//! truncate ──────── Request::Sync ──▶   │           └─ complete callbacks in FIFO order
//! ```
//!
//! After completing a batch the flusher has a helper thread pre-fault the next
//! `SEGMENT_WARM_AHEAD_BYTES` after the log end (RocketMQ's "warm mapped file"): first writes to
//! a sparse mapping otherwise fault on the openraft task that appends, and on a busy group those
//! faults were a third of the CPU; on the flusher itself they delayed the next group commit.
//!
//! Invariants: a callback completes Ok only after every byte appended before its request was
//! synced; the watermark is written only after the sync it describes; on any sync error every
//! waiter fails, the store is poisoned and stays poisoned (fsyncgate: a failed fsync may have
//! dropped dirty pages, so later successes prove nothing).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::Receiver;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use openraft::storage::IOFlushed;
use tokio::sync::oneshot;

use crate::config::SEGMENT_WARM_AHEAD_BYTES;
use crate::error::{Result, StoreError};
use crate::mapped_file::{SyncHandle, sync_dir};
use crate::meta::MetaFile;
use crate::store_state::State;
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

/// What the flusher has done since the store opened (for benchmarks and monitoring).
#[derive(Debug, Default)]
pub struct Counters {
    /// Sync system calls: data ranges (`msync`), directory and meta-file fsyncs.
    fsyncs: AtomicU64,
    /// Cycles that synced anything (one group commit each).
    cycles: AtomicU64,
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

    fn add(&self, syncs: u64) {
        if syncs > 0 {
            self.fsyncs.fetch_add(syncs, Ordering::Relaxed);
            self.cycles.fetch_add(1, Ordering::Relaxed);
        }
    }
}

/// Lock the state, recovering the guard if a panicking thread poisoned the mutex: the state's
/// own invariants are re-established by the store's `poisoned` flag, not by the mutex.
pub fn lock(state: &Mutex<State>) -> MutexGuard<'_, State> {
    state.lock().unwrap_or_else(|p| p.into_inner())
}

/// The flusher thread body.
pub fn run(
    state: Arc<Mutex<State>>,
    mut meta_file: MetaFile,
    rx: Receiver<Request>,
    committed_every: Duration,
    counters: Arc<Counters>,
) {
    let mut last_meta_write = Instant::now();
    let mut warmer = Warmer::start(&state);
    // Requests held while a crash test froze the store (see `LogStore::freeze_for_crash_test`).
    let mut held = Vec::new();
    while let Ok(first) = rx.recv() {
        let mut batch = std::mem::take(&mut held);
        batch.push(first);
        batch.extend(rx.try_iter());
        let shutdown = batch.iter().any(|r| matches!(r, Request::Shutdown));
        let hold = {
            let st = lock(&state);
            st.frozen && st.poisoned.is_none()
        };
        if hold && !shutdown {
            held = batch;
            continue;
        }
        let write_meta = batch.iter().any(|r| matches!(r, Request::Meta(_) | Request::Sync(..)));
        let mut syncs = 0;
        let result =
            cycle(&state, &mut meta_file, &batch, write_meta, &mut last_meta_write, committed_every, &mut syncs);
        counters.add(syncs);
        if let Err(e) = &result
            && !matches!(e, StoreError::Damaged(_))
        {
            let reason = e.to_string();
            tracing::error!(%reason, "raft log flush failed; poisoning the store");
            let mut st = lock(&state);
            st.poisoned.get_or_insert(reason);
        }
        complete(batch, &result);
        if shutdown {
            break;
        }
        if result.is_ok() {
            warmer.poke(&state);
        }
    }
    warmer.stop();
}

/// Runs [`warm_ahead`] off the flusher thread: page faults of fresh pages cost milliseconds on
/// a virtualised host, and on the flusher they delayed the next group commit. Pokes coalesce
/// (one pending at most); without the thread (spawn failed) the flusher warms inline.
struct Warmer {
    poke: Option<std::sync::mpsc::SyncSender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
    inline_warmed_to: u64,
}

impl Warmer {
    fn start(state: &Arc<Mutex<State>>) -> Self {
        let (tx, rx) = std::sync::mpsc::sync_channel::<()>(1);
        let state = Arc::clone(state);
        let spawned = std::thread::Builder::new().name("raft-log-warmer".into()).spawn(move || {
            let mut warmed_to = 0u64;
            while rx.recv().is_ok() {
                warm_ahead(&state, &mut warmed_to);
            }
        });
        match spawned {
            Ok(t) => Self { poke: Some(tx), thread: Some(t), inline_warmed_to: 0 },
            Err(e) => {
                tracing::warn!(%e, "cannot start the CommitLog warmer thread; warming on the flusher");
                Self { poke: None, thread: None, inline_warmed_to: 0 }
            }
        }
    }

    fn poke(&mut self, state: &Mutex<State>) {
        match &self.poke {
            // Full: a warm is already pending and will see the new end.
            Some(tx) => drop(tx.try_send(())),
            None => warm_ahead(state, &mut self.inline_warmed_to),
        }
    }

    fn stop(mut self) {
        self.poke = None;
        if let Some(t) = self.thread.take()
            && t.join().is_err()
        {
            tracing::error!("raft log warmer panicked");
        }
    }
}

/// Pre-fault the mapping after the log end, up to `SEGMENT_WARM_AHEAD_BYTES` ahead (within
/// existing segments). Best effort: a failure only costs the appender its page faults.
fn warm_ahead(state: &Mutex<State>, warmed_to: &mut u64) {
    let ranges = {
        let st = lock(state);
        let end = st.end_pos;
        let to = end.saturating_add(SEGMENT_WARM_AHEAD_BYTES);
        let from = (*warmed_to).clamp(end, to);
        // Anything still unwarmed waits for the next cycle; a truncation moves the end back.
        if to.saturating_sub(from) < SEGMENT_WARM_AHEAD_BYTES / 4 {
            return;
        }
        *warmed_to = to;
        st.segs.sync_ranges(from, to)
    };
    for (h, off, len) in ranges {
        if let Err(e) = h.prefault(off, len) {
            tracing::debug!(%e, "cannot pre-fault the CommitLog ahead of its end");
            return;
        }
    }
}

fn cycle(
    state: &Mutex<State>,
    meta_file: &mut MetaFile,
    batch: &[Request],
    write_meta: bool,
    last_meta_write: &mut Instant,
    committed_every: Duration,
    syncs: &mut u64,
) -> Result<()> {
    let (ranges, end, dir, dir_dirty) = {
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
        (st.segs.sync_ranges(from, end), end, st.segs.dir().to_path_buf(), dirty)
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
    if dir_dirty && let Err(e) = sync_dir(&dir) {
        lock(state).dir_dirty = true;
        return Err(e);
    }
    for (h, off, len) in &ranges {
        *syncs += 1;
        h.sync_range(*off, *len)?;
    }
    let (snapshot, persist) = {
        let mut st = lock(state);
        // Poisoned or frozen while syncing (a failed fsync elsewhere, or a crash test): the
        // watermark stays where it was and nothing of this batch is acknowledged.
        if let Some(p) = &st.poisoned {
            return Err(StoreError::Poisoned(p.clone()));
        }
        if st.frozen {
            return Err(StoreError::Poisoned("simulated crash (test hook)".into()));
        }
        // Truncation lowers the watermark only after a barrier, so it never races a cycle.
        assert!(end >= st.meta.durable_pos, "durable watermark must not move back");
        st.meta.durable_pos = end;
        let committed_due = st.committed_dirty && last_meta_write.elapsed() >= committed_every;
        let persist = write_meta || committed_due;
        if persist {
            st.committed_dirty = false;
        }
        (st.meta.clone(), persist)
    };
    if persist {
        *syncs += 1;
        meta_file.write(&snapshot)?;
        *last_meta_write = Instant::now();
    } else if !ranges.is_empty() {
        meta_file.write_watermark(end)?;
    }
    Ok(())
}

fn complete(batch: Vec<Request>, result: &Result<()>) {
    let err = |r: &Result<()>| match r {
        Ok(()) => None,
        Err(e) => Some(e.to_string()),
    };
    let e = err(result);
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
