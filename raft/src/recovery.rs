//! Recovery at open: rebuild the in-memory state from the data segments, which are the source
//! of truth (the index is derived and rewritten here).
//!
//! The scan starts at `meta.start_pos` and walks record by record: blank records jump to the
//! next segment; an entry must have a valid header and payload CRC, `pos` equal to its offset,
//! the next index and a non-decreasing term. The scan stops at the first zero, invalid or
//! missing record. Then:
//! - recovered end `<` the durable watermark ⇒ something that was fsynced (and possibly
//!   acknowledged) is unreadable: the store is **damaged** — nothing is truncated or rewritten,
//!   the valid prefix stays readable, writes are refused, `tracing::error!` says why;
//! - otherwise the bytes after the end are a torn tail of unsynced writes: zero them in the
//!   end's segment, delete later segments, fsync, and raise the watermark to the end.
//!
//! The cost is what was written: only the segment file's data ranges after the end are read,
//! and the index is only cleared of what this process stored (stale slots past the end are
//! never live, see `log_index`), so a restart writes nothing into sparse space.

use crate::entry::{BLANK_MIN_BYTES, RecordPrefix, peek_prefix, segment_base};
use crate::error::{Result, StoreError};
use crate::log_index::Slot;
use crate::mapped_file::sync_dir;
use crate::payload_codec;
use crate::store_state::{State, read_record, zero_range};
use crate::type_config::log_id;

/// The smallest page size: a hole is at least a page, aligned.
const HOLE_PROBE_BYTES: u64 = 4096;

/// Outcome of the scan, before any repair.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScanResult {
    /// First and last recovered (index, term).
    pub first: Option<u64>,
    /// Last recovered entry.
    pub last: Option<(u64, u64)>,
    /// End of the last valid entry.
    pub end_pos: u64,
    /// Why the scan stopped, if not at a clean end.
    pub stop_reason: Option<String>,
}

/// Scan the segments of `st` from `meta.start_pos`, writing index slots for valid entries.
pub fn scan(st: &mut State) -> Result<ScanResult> {
    let seg = st.limits.segment_size;
    let mut pos = st.meta.start_pos;
    let mut end_pos = pos;
    let mut expected = st.meta.last_purged.map(|p| p.index + 1);
    let mut min_term = st.meta.last_purged.map_or(0, |p| p.leader_id.term);
    let (mut first, mut last) = (None, None);
    let stop_reason = loop {
        // A record start at a page boundary may be in a hole: it reads as zeros, but on a tmpfs
        // even reading a hole through the mapping allocates a page (SIGBUS on a full one). One
        // `lseek` per page-aligned start looks first.
        if pos.is_multiple_of(HOLE_PROBE_BYTES) && st.segs.data_ranges(pos, pos + 1)?.is_empty() {
            break None;
        }
        let Some(prefix) = st.segs.read(pos, BLANK_MIN_BYTES as usize).map(peek_prefix) else {
            break None; // segment missing: clean end (or damage, judged by the watermark)
        };
        match prefix {
            RecordPrefix::Empty => break None,
            RecordPrefix::Blank(size) => {
                if (pos % seg) + u64::from(size) != seg {
                    break Some(format!("blank record at {pos} does not end its segment"));
                }
                pos += u64::from(size);
            }
            RecordPrefix::Garbage => break Some(format!("garbage at {pos}")),
            RecordPrefix::Entry(_) => {
                let (h, payload) = match read_record(&st.segs, pos, seg) {
                    Ok(x) => x,
                    Err(e) => break Some(e.to_string()),
                };
                // The first live entry may lie above `last_purged + 1` when a purge point was
                // below the first entry ever appended; after it, indexes are consecutive.
                let index_ok = match (expected, first) {
                    (Some(x), None) => h.index >= x,
                    (Some(x), Some(_)) => h.index == x,
                    (None, _) => true,
                };
                if !index_ok || h.term < min_term {
                    break Some(format!(
                        "entry at {pos} has index {} term {}, expected index {expected:?} term >= {min_term}",
                        h.index, h.term
                    ));
                }
                if h.kind == crate::entry::EntryKind::Membership
                    && let Err(r) = payload_codec::decode_membership(payload)
                {
                    break Some(format!("entry {} at {pos}: {r}", h.index));
                }
                st.index.put(&Slot { pos, size: h.total_size, index: h.index, term: h.term })?;
                first.get_or_insert(h.index);
                last = Some((h.index, h.term));
                expected = Some(h.index + 1);
                min_term = h.term;
                pos += u64::from(h.total_size);
                end_pos = pos;
            }
        }
        debug_assert!(pos >= end_pos);
    };
    Ok(ScanResult { first, last, end_pos, stop_reason })
}

/// Recover `st` (freshly opened files and meta): scan, then either mark damaged or cut the torn
/// tail. Syncs synchronously: the store is not running yet. The caller persists `st.meta`.
pub fn recover(st: &mut State) -> Result<()> {
    let seg = st.limits.segment_size;
    // Leftovers of a purge interrupted between the meta write and the deletes.
    let keep_base = segment_base(st.meta.start_pos, seg);
    st.segs.remove_where(|b| b < keep_base)?;

    let r = scan(st)?;
    st.first = r.first;
    st.last = r.last.map(|(i, t)| log_id(t, i));
    st.end_pos = r.end_pos;
    if r.end_pos < st.meta.durable_pos {
        let reason = format!(
            "recovered log ends at {} but data up to {} was fsynced: {}",
            r.end_pos,
            st.meta.durable_pos,
            r.stop_reason.as_deref().unwrap_or("missing data")
        );
        tracing::error!(dir = %st.segs.dir().display(), %reason, "raft log damaged; refusing writes");
        st.damaged = Some(reason);
        return Ok(());
    }
    if let Some(why) = &r.stop_reason {
        tracing::warn!(end_pos = r.end_pos, %why, "truncating torn tail of the raft log");
    }
    // Zero whatever follows the end in its segment (torn or stale bytes), delete later ones.
    // Only the file's data is looked at: a hole reads as zeros, and faulting in the sparse rest
    // of a 1 GiB segment page by page costs seconds (and allocates it all on a tmpfs).
    let end = r.end_pos;
    let base = segment_base(end, seg);
    for (from, to) in st.segs.data_ranges(end, base + seg)? {
        let mut p = from.max(end);
        while p < to {
            let chunk_end = (((p / 4096) + 1) * 4096).min(to);
            let len = usize::try_from(chunk_end - p).map_err(|_| StoreError::Contract("chunk".into()))?;
            if st.segs.read(p, len).is_some_and(|b| b.iter().any(|x| *x != 0)) {
                zero_range(&mut st.segs, p, chunk_end)?;
            }
            p = chunk_end;
        }
    }
    let removed = st.segs.remove_where(|b| b > base)?;
    st.index.clear_from(r.last.map_or(0, |(i, _)| i + 1))?;
    if let Some(f) = r.first {
        st.index.remove_below(f)?;
    }
    // Make the verified prefix and the zeroing durable before raising the watermark; msync of
    // clean pages costs nothing.
    for (h, off, len) in st.segs.sync_ranges(st.meta.durable_pos.min(end), base + seg) {
        h.sync_range(off, len)?;
    }
    if removed > 0 {
        sync_dir(st.segs.dir())?;
    }
    st.meta.durable_pos = end;
    Ok(())
}
