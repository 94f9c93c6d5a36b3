//! The page cache around the log end: one helper thread per store (thread flusher only) that,
//! after a group commit that made work due, writes zeros ahead of the end (`zero_ahead`) and drops
//! synced bytes far enough behind it from the page cache.
//!
//! The flusher asks [`look_due`] (pure: the same plans the helper follows, on the marks the helper
//! published) before it wakes the helper, so a group commit that leaves both plans empty (most of
//! them: zeros are refilled per MiB, drops go per 4 MiB) costs no wake-up of a second thread.
//!
//! Why drop: every append lands on page-cache pages the kernel must find. Pages this store
//! freed a moment ago are the cheapest it can get; pages the kernel has not handed out for a
//! while may cost much more (on this project's Firecracker VMs a free page is returned to the
//! host, and touching it again is a host fault: the `pwrite` copy into such pages took 40 % of
//! both cores, and a 3-node group fell from 110k to 45k entries/s once a few GB had been
//! written; BENCHMARKS.md#experiments, E41). A follower's log bytes are read once, by its own apply, right
//! after they commit; keeping gigabytes of them cached only pushes the leader's readers out. So
//! a follower keeps the last `page_cache_follower_window_bytes` behind the durable end, a
//! leader the last `page_cache_leader_window_bytes` (its consumers read the tail), and the
//! rest goes back to the kernel in steps, to be reused by the next appends.
//!
//! Invariants:
//! - only bytes below the durable watermark are dropped: they are clean (synced), so dropping
//!   loses nothing, and a reader of a dropped range faults the same file bytes back in (the
//!   mapping is `MAP_SHARED`; `MADV_DONTNEED` only unmaps them from this process);
//! - what was dropped is tracked only to decide how much work to do next; a range dropped twice
//!   or never is a cost, never an error (a failed `madvise`/`fadvise` is logged once and
//!   ignored);
//! - the window is read at every look, so a role change applies from the next group commit;
//! - only bytes synced by this process are dropped: what was durable when the store opened is left
//!   to the kernel (a restarted leader's tail may still be cached, and re-apply reads it).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{Receiver, SyncSender};
use std::sync::{Arc, Mutex};

use crate::config::PAGE_CACHE_DROP_STEP_BYTES;
use crate::store_state::{State, lock};
use crate::zero_ahead::{plan, untouchable, zero_ahead};

/// The windows a store keeps cached behind its durable end (0 = never drop: the kernel decides),
/// the one in effect (the role's, read by the helper at every look), and what it dropped.
#[derive(Debug)]
pub struct Control {
    leader_window_bytes: u64,
    follower_window_bytes: u64,
    window_bytes: AtomicU64,
    dropped_bytes: AtomicU64,
    /// The helper's marks, published for [`look_due`]: zeros written up to here, dropped up to
    /// here. Only the helper writes them; a stale read costs at most one wake-up too many.
    zeroed_to: AtomicU64,
    dropped_to: AtomicU64,
}

impl Control {
    /// The windows of a leader and of a follower; a store starts as a follower.
    pub fn new(leader_window_bytes: u64, follower_window_bytes: u64) -> Self {
        Self {
            leader_window_bytes,
            follower_window_bytes,
            window_bytes: AtomicU64::new(follower_window_bytes),
            dropped_bytes: AtomicU64::new(0),
            zeroed_to: AtomicU64::new(0),
            dropped_to: AtomicU64::new(0),
        }
    }

    /// Whether the helper has anything to drop in either role.
    pub fn drops(&self) -> bool {
        self.leader_window_bytes > 0 || self.follower_window_bytes > 0
    }

    /// Take the window of the role; applies at the helper's next look.
    pub fn set_role(&self, leader: bool) {
        let bytes = if leader { self.leader_window_bytes } else { self.follower_window_bytes };
        self.window_bytes.store(bytes, Ordering::Relaxed);
    }

    /// The current window.
    pub fn window(&self) -> u64 {
        self.window_bytes.load(Ordering::Relaxed)
    }

    /// Bytes handed back to the kernel since the store opened.
    pub fn dropped_bytes(&self) -> u64 {
        self.dropped_bytes.load(Ordering::Relaxed)
    }
}

/// What the helper does.
pub struct Tasks {
    /// Write zeros ahead of the end (`RaftConfig::segment_zero_ahead`).
    pub zero_ahead: bool,
    /// How much to keep cached behind the durable end.
    pub control: Arc<Control>,
}

/// Whether the helper has work after a group commit left the log end at `end_pos` and the durable
/// watermark at `durable_pos`: a zero step ([`zero_ahead::plan`](crate::zero_ahead::plan)) or a
/// drop step ([`drop_plan`]) is due from the marks in `control`. Pure, so the rule is tested apart
/// from the threads.
pub fn look_due(end_pos: u64, durable_pos: u64, segment_size: u64, zero_ahead: bool, control: &Control) -> bool {
    let zeroed_to = control.zeroed_to.load(Ordering::Relaxed);
    let dropped_to = control.dropped_to.load(Ordering::Relaxed);
    (zero_ahead && plan(end_pos, zeroed_to, segment_size).is_some())
        || drop_plan(durable_pos, dropped_to, control.window()).is_some()
}

/// The helper thread; pokes coalesce (at most one pending).
pub struct PageCache {
    poke: Option<SyncSender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
    zero_ahead: bool,
    control: Arc<Control>,
    segment_size: u64,
}

impl PageCache {
    /// Start the thread; `None` (and a warning) if it cannot be spawned: appends then land on
    /// fresh blocks and the kernel alone decides what stays cached.
    pub fn start(state: &Arc<Mutex<State>>, tasks: Tasks) -> Option<Self> {
        let (tx, rx) = std::sync::mpsc::sync_channel::<()>(1);
        let state = Arc::clone(state);
        let (zero_ahead, control) = (tasks.zero_ahead, Arc::clone(&tasks.control));
        // Fixed for the store's life (recorded in its meta file).
        let segment_size = lock(&state).limits.segment_size;
        match std::thread::Builder::new().name("raft-log-cache".into()).spawn(move || run(&state, &tasks, &rx)) {
            Ok(t) => Some(Self { poke: Some(tx), thread: Some(t), zero_ahead, control, segment_size }),
            Err(e) => {
                tracing::warn!(%e, "cannot start the CommitLog page-cache thread; appends land on fresh blocks");
                None
            }
        }
    }

    /// Ask for a look at the log end after a group commit, if [`look_due`] finds work for it.
    pub fn poke_if_due(&self, end_pos: u64, durable_pos: u64) {
        if !look_due(end_pos, durable_pos, self.segment_size, self.zero_ahead, &self.control) {
            return;
        }
        if let Some(tx) = &self.poke {
            // Full: a look is pending and will see the new end. Disconnected: it stopped.
            let _ = tx.try_send(());
        }
    }

    /// Stop and join the thread.
    pub fn stop(mut self) {
        self.poke = None;
        if let Some(t) = self.thread.take()
            && t.join().is_err()
        {
            tracing::error!("raft log page-cache thread panicked");
        }
    }
}

fn run(state: &Mutex<State>, tasks: &Tasks, rx: &Receiver<()>) {
    let mut zeroed_to = 0u64;
    // What an earlier process left cached stays: a restarted leader's readers want its tail, and
    // the kernel evicts it under pressure as before. Only what this process syncs is dropped.
    let mut dropper = Dropper { dropped_to: lock(state).meta.durable_pos, warned: false };
    tasks.control.dropped_to.store(dropper.dropped_to, Ordering::Relaxed);
    while rx.recv().is_ok() {
        if tasks.zero_ahead {
            zero_ahead(state, &mut zeroed_to);
            tasks.control.zeroed_to.store(zeroed_to, Ordering::Relaxed);
        }
        dropper.drop_behind(state, &tasks.control);
        tasks.control.dropped_to.store(dropper.dropped_to, Ordering::Relaxed);
    }
}

/// What to drop next: `[from, to)`, or `None` while less than a step is due. Pure, so the rule
/// is tested apart from the I/O.
pub fn drop_plan(durable_pos: u64, dropped_to: u64, window: u64) -> Option<(u64, u64)> {
    if window == 0 {
        return None;
    }
    let to = durable_pos.saturating_sub(window);
    // A mark above the watermark (a truncation lowered it) waits until the log passes it again:
    // the bytes in between were rewritten and are cached, a cost, not an error.
    (to >= dropped_to.saturating_add(PAGE_CACHE_DROP_STEP_BYTES)).then_some((dropped_to, to))
}

/// Drops ranges as they fall out of the window; what it tracks decides only how much work the
/// next look does.
#[derive(Default)]
pub struct Dropper {
    dropped_to: u64,
    warned: bool,
}

impl Dropper {
    /// Drop what fell out of `control`'s window since the last look.
    pub fn drop_behind(&mut self, state: &Mutex<State>, control: &Control) {
        let ranges = {
            let st = lock(state);
            if untouchable(&st) {
                return;
            }
            let Some((from, to)) = drop_plan(st.meta.durable_pos, self.dropped_to, control.window()) else {
                return;
            };
            // Never below the log start: those segments are gone (purged or rebased away).
            let from = from.max(st.meta.start_pos);
            self.dropped_to = to;
            st.segs.sync_ranges(from, to)
        };
        for (h, off, len) in ranges {
            match h.drop_cache(off, len) {
                Ok(()) => {
                    control.dropped_bytes.fetch_add(len, Ordering::Relaxed);
                }
                Err(e) => {
                    if !std::mem::replace(&mut self.warned, true) {
                        tracing::warn!(%e, "cannot drop CommitLog bytes from the page cache; they stay cached");
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const STEP: u64 = PAGE_CACHE_DROP_STEP_BYTES;
    const WINDOW: u64 = 64 << 20;

    #[test]
    fn drops_what_falls_out_of_the_window_in_steps() {
        assert_eq!(drop_plan(WINDOW + STEP - 1, 0, WINDOW), None, "less than a step behind the window");
        assert_eq!(drop_plan(WINDOW + STEP, 0, WINDOW), Some((0, STEP)));
        assert_eq!(drop_plan(WINDOW + 3 * STEP, STEP, WINDOW), Some((STEP, 3 * STEP)), "from where it stopped");
        assert_eq!(drop_plan(10 * WINDOW, 0, 0), None, "a window of 0 keeps everything");
    }

    #[test]
    fn a_mark_above_a_lowered_watermark_waits() {
        assert_eq!(drop_plan(WINDOW + STEP, 4 * STEP, WINDOW), None, "truncated below the mark");
        assert_eq!(drop_plan(WINDOW + 5 * STEP, 4 * STEP, WINDOW), Some((4 * STEP, 5 * STEP)));
    }

    #[test]
    fn a_look_is_due_only_when_a_zero_or_drop_step_is() {
        use crate::config::{SEGMENT_ZERO_AHEAD_BYTES as AHEAD, SEGMENT_ZERO_STEP_BYTES as ZSTEP};
        const SEG: u64 = 1 << 30;
        let c = Control::new(WINDOW, WINDOW);
        assert!(look_due(100, 100, SEG, true, &c), "nothing zeroed yet");
        assert!(!look_due(100, 100, SEG, false, &c), "zero-ahead off, nothing to drop");
        c.zeroed_to.store(100 + AHEAD, Ordering::Relaxed);
        assert!(!look_due(100 + ZSTEP - 1, 100, SEG, true, &c), "less than a zero step used");
        assert!(look_due(100 + ZSTEP, 100, SEG, true, &c), "a zero step used");
        assert!(look_due(100, WINDOW + STEP, SEG, true, &c), "a drop step behind the window");
        c.dropped_to.store(STEP, Ordering::Relaxed);
        assert!(!look_due(100, WINDOW + STEP, SEG, true, &c), "that step already dropped");
        assert!(look_due(SEG + 10, 100, SEG, true, &c), "a roll: the new segment has nothing zeroed");
    }

    #[test]
    fn a_smaller_window_drops_more_at_once() {
        let durable = 2 * WINDOW;
        assert_eq!(drop_plan(durable, WINDOW / 2, WINDOW), Some((WINDOW / 2, WINDOW)), "leader window");
        assert_eq!(drop_plan(durable, WINDOW / 2, STEP), Some((WINDOW / 2, durable - STEP)), "follower window");
    }
}
