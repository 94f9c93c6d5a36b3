//! Zero-filling ahead of the log end: the page-cache helper thread (`page_cache`) writes zeros into
//! the current segment after the log end and syncs them, so that the blocks the next appends
//! land on are allocated and on disk before any data reaches them.
//!
//! Why: segments are sparse files. The first sync of a fresh block also writes the filesystem's
//! allocation metadata (bitmaps, extent tree; with a journal, a journal commit), a second
//! dependent I/O in every group commit. Overwriting blocks that are already written needs the data
//! I/O only: measured here, 0.57 → 0.37 ms per group commit. RocketMQ warms its mapped files
//! for a similar reason. The cost is writing every byte twice, off the commit path.
//!
//! Invariants:
//! - zeros are written only at or after `end_pos` (every byte there is zero already by the
//!   store's invariant), under the store mutex, so no append interleaves and no data is ever
//!   overwritten: an append after the write lands on top of the zeros;
//! - only inside the segment holding `end_pos` (creating segments ahead would break "no segment
//!   above the end");
//! - a failed sync poisons the store like the flusher's own: the error may have been about data
//!   pages of the same file, and the next sync would not report it again (fsyncgate);
//! - a frozen, poisoned or damaged store is left alone, and so is one in the middle of a
//!   truncation: the stale records after the lowered end must stay as they are until the lowered
//!   watermark is durable (recovery would call zeros below a persisted watermark damage).
//!
//! Best effort otherwise: what it tracks only decides how much work it does, never what data
//! is.

use std::sync::Mutex;

use crate::config::{SEGMENT_ZERO_AHEAD_BYTES, SEGMENT_ZERO_CHUNK_BYTES, SEGMENT_ZERO_STEP_BYTES};
use crate::entry::segment_base;
use crate::store_state::{State, lock};

/// What to zero next: `[from, to)` within the end's segment, or `None` if enough is zeroed.
/// Pure, so the rule is tested apart from the I/O.
pub fn plan(end_pos: u64, zeroed_to: u64, segment_size: u64) -> Option<(u64, u64)> {
    let seg_end = segment_base(end_pos, segment_size) + segment_size;
    let to = end_pos.saturating_add(SEGMENT_ZERO_AHEAD_BYTES).min(seg_end);
    // A zeroed_to outside [end, seg_end] belongs to another segment (a roll, a truncation).
    let from = if zeroed_to < end_pos || zeroed_to > seg_end { end_pos } else { zeroed_to };
    // Refill in steps: each one costs a sync (smaller steps: smaller syncs, more of them).
    if to.saturating_sub(from) < SEGMENT_ZERO_STEP_BYTES && to < seg_end {
        return None;
    }
    (to > from).then_some((from, to))
}

pub fn untouchable(st: &State) -> bool {
    st.frozen || st.poisoned.is_some() || st.damaged.is_some() || st.truncation_pending
}

/// Zero the next step after the log end, if it is due (on the page-cache helper thread).
pub fn zero_ahead(state: &Mutex<State>, zeroed_to: &mut u64) {
    let (start, to, seg, handle) = {
        let st = lock(state);
        if untouchable(&st) {
            return;
        }
        let seg = st.limits.segment_size;
        let Some((from, to)) = plan(st.end_pos, *zeroed_to, seg) else { return };
        let Some((handle, _, _)) = st.segs.sync_ranges(from, to).into_iter().next() else { return };
        (from, to, seg, handle)
    };
    let base = segment_base(start, seg);
    let zeros = vec![0u8; SEGMENT_ZERO_CHUNK_BYTES as usize];
    let mut from = start;
    // One chunk per lock hold, so appends wait at most one chunk's copy.
    while from < to {
        let mut st = lock(state);
        if untouchable(&st) || segment_base(st.end_pos, seg) != base {
            return;
        }
        from = from.max(st.end_pos);
        if from >= to {
            break;
        }
        let upto = to.min(from + SEGMENT_ZERO_CHUNK_BYTES);
        if let Err(e) = st.segs.write_at(from, &zeros[..(upto - from) as usize]) {
            tracing::debug!(%e, "cannot zero the CommitLog ahead of its end");
            return;
        }
        drop(st);
        from = upto;
        *zeroed_to = upto;
    }
    if let Err(e) = handle.sync_range(start - base, to - start) {
        let reason = format!("sync of zeros ahead of the log end failed: {e}");
        tracing::error!(%reason, "poisoning the store");
        lock(state).poisoned.get_or_insert(reason);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SEG: u64 = 1 << 30;
    const AHEAD: u64 = SEGMENT_ZERO_AHEAD_BYTES;
    const STEP: u64 = SEGMENT_ZERO_STEP_BYTES;

    #[test]
    fn zeroes_a_window_after_the_end_in_steps() {
        assert_eq!(plan(1000, 0, SEG), Some((1000, 1000 + AHEAD)), "nothing zeroed yet");
        assert_eq!(plan(1000, 1000 + AHEAD, SEG), None, "window full");
        assert_eq!(plan(1000 + STEP - 1, 1000 + AHEAD, SEG), None, "less than a step used");
        let end = 1000 + STEP;
        assert_eq!(plan(end, 1000 + AHEAD, SEG), Some((1000 + AHEAD, end + AHEAD)), "refill from where it stopped");
    }

    #[test]
    fn never_below_the_end_nor_past_its_segment() {
        assert_eq!(plan(5000, 100, SEG), Some((5000, 5000 + AHEAD)), "a stale mark below the end is ignored");
        let near_end = SEG - 100;
        assert_eq!(plan(near_end, near_end, SEG), Some((near_end, SEG)), "the tail of the segment, even if short");
        assert_eq!(plan(near_end, SEG, SEG), None, "segment done: the next one starts after the roll");
        assert_eq!(plan(SEG + 10, SEG, SEG), Some((SEG + 10, SEG + 10 + AHEAD)), "after a roll");
        assert_eq!(plan(10, SEG + 4096, SEG), Some((10, 10 + AHEAD)), "a mark in a truncated segment is ignored");
    }
}
