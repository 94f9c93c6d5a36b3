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
//! Invariants: a callback completes Ok only after every byte appended before its request was
//! synced; the watermark is written only after the sync it describes; on any sync error every
//! waiter fails, the store is poisoned and stays poisoned (fsyncgate: a failed fsync may have
//! dropped dirty pages, so later successes prove nothing).

use std::sync::mpsc::Receiver;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use openraft::storage::IOFlushed;
use tokio::sync::oneshot;

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

/// Lock the state, recovering the guard if a panicking thread poisoned the mutex: the state's
/// own invariants are re-established by the store's `poisoned` flag, not by the mutex.
pub fn lock(state: &Mutex<State>) -> MutexGuard<'_, State> {
    state.lock().unwrap_or_else(|p| p.into_inner())
}

/// The flusher thread body.
pub fn run(state: Arc<Mutex<State>>, mut meta_file: MetaFile, rx: Receiver<Request>, committed_every: Duration) {
    let mut last_meta_write = Instant::now();
    while let Ok(first) = rx.recv() {
        let mut batch = vec![first];
        batch.extend(rx.try_iter());
        let shutdown = batch.iter().any(|r| matches!(r, Request::Shutdown));
        let write_meta = batch.iter().any(|r| matches!(r, Request::Meta(_) | Request::Sync(..)));
        let result = cycle(&state, &mut meta_file, &batch, write_meta, &mut last_meta_write, committed_every);
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
    }
}

fn cycle(
    state: &Mutex<State>,
    meta_file: &mut MetaFile,
    batch: &[Request],
    write_meta: bool,
    last_meta_write: &mut Instant,
    committed_every: Duration,
) -> Result<()> {
    let (ranges, end, dir, dir_dirty) = {
        let mut st = lock(state);
        if let Some(p) = &st.poisoned {
            return Err(StoreError::Poisoned(p.clone()));
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
                h.sync_range(*off, *len)?;
            }
        }
    }
    if dir_dirty && let Err(e) = sync_dir(&dir) {
        lock(state).dir_dirty = true;
        return Err(e);
    }
    for (h, off, len) in &ranges {
        h.sync_range(*off, *len)?;
    }
    let (snapshot, persist) = {
        let mut st = lock(state);
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
