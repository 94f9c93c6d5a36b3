//! The log store's in-memory state and every synchronous operation on the segment files (records
//! are written with `pwrite`, read through the mapping).
//! Lives behind one `std::sync::Mutex` (never held across `.await`); the async shell in
//! `log_store` and the flusher thread call in, do their IO-free or mmap-only work, and leave.
//!
//! Invariants (asserted where they are established):
//! - the live log is the consecutive indexes `first..=last` (none when empty); entry `i` has an
//!   index slot and a valid record at `slot.pos`;
//! - `end_pos` is the end of the last entry (or `meta.start_pos` when empty), never a segment
//!   boundary unless the log is empty; every byte in `[end_pos, end of its segment)` is zero and
//!   no segment exists above it, so stale records can never be mistaken for new ones;
//! - `meta.durable_pos <= end_pos`: everything below it has been fsynced;
//! - `log_generation` changes whenever `end_pos` moves other than by an append, so the flusher
//!   raises the watermark only to an end read under the current generation.

use std::sync::{Mutex, MutexGuard};

use bytes::Bytes;

use crate::entry::{
    self, EntryHeader, EntryKind, HEADER_SIZE, HEADER_SIZE_USIZE, decode_header, encode_blank, encode_header,
    place_entry, segment_base, verify_payload,
};
use crate::error::{CorruptReason, Result, StoreError};
use crate::log_index::{IndexSet, Slot};
use crate::mapped_file::SyncHandle;
use crate::meta::MetaState;
use crate::patcher::PayloadPatcher;
use crate::payload_codec;
use crate::segment::SegmentSet;
use crate::type_config::{Entry, LogId, log_id};

/// Lock the state, recovering the guard if a panicking thread poisoned the mutex: the state's
/// own invariants are re-established by the store's `poisoned` flag, not by the mutex.
pub fn lock(state: &Mutex<State>) -> MutexGuard<'_, State> {
    state.lock().unwrap_or_else(|p| p.into_inner())
}

/// Limits the state needs at run time.
#[derive(Debug, Clone)]
pub struct Limits {
    pub segment_size: u64,
    pub entry_max_bytes: u64,
    pub append_entries_max_bytes: u64,
}

/// A test's code run on the state (see `State::after_sync_hook`).
#[cfg(test)]
pub type StateHook = Box<dyn FnOnce(&mut State) + Send>;

/// The state behind the store mutex.
pub struct State {
    pub limits: Limits,
    pub segs: SegmentSet,
    pub index: IndexSet,
    /// Current meta (the flusher persists snapshots of it).
    pub meta: MetaState,
    /// First live entry index, if any.
    pub first: Option<u64>,
    /// Last appended entry, if any.
    pub last: Option<LogId>,
    /// End of the last entry.
    pub end_pos: u64,
    /// A segment was created since the last directory fsync.
    pub dir_dirty: bool,
    /// `meta.committed` changed since it was last persisted.
    pub committed_dirty: bool,
    /// Set when an fsync failed: nothing more is acknowledged.
    pub poisoned: Option<String>,
    /// Set while an append waits for disk space ([`Self::reserve_for_append`] found the disk full);
    /// cleared when it went through. Nothing was written, so nothing is lost or poisoned.
    pub space_wait: Option<String>,
    /// Crash-test hook: the flusher holds every request without syncing (see
    /// `LogStore::freeze_for_crash_test`).
    pub frozen: bool,
    /// Set when recovery found corruption before the tail.
    pub damaged: Option<String>,
    pub patcher: Box<dyn PayloadPatcher>,
    /// Records staged by [`Self::append_batch`] for one `pwrite`: the bytes of
    /// `[staged_pos, staged_pos + staged.len())`, within one segment. Empty outside a batch.
    pub staged: Vec<u8>,
    pub staged_pos: u64,
    /// Between [`Self::truncate_logically`] and [`Self::truncate_files`]: the bytes after the
    /// end are stale records that must not change before the lowered watermark is durable.
    pub truncation_pending: bool,
    /// The same between [`Self::rebase_logically`] and [`Self::delete_rebased_files`].
    pub rebase_pending: bool,
    /// Bumped whenever the log is cut back or rebased (`end_pos` moves down or jumps): a flusher
    /// cycle that read the end under an older generation synced bytes of a log that is gone and
    /// must not move the watermark.
    pub log_generation: u64,
    /// Test seam: run by the flusher between its syncs and taking the lock again, to place a
    /// truncation or rebase inside a cycle in flight.
    #[cfg(test)]
    pub after_sync_hook: Option<StateHook>,
}

/// A truncation done in memory whose file work is pending.
pub struct Truncation {
    new_end: u64,
    old_end: u64,
}

/// What a truncation left for the flusher to make durable.
pub struct TruncateSync {
    pub ranges: Vec<(SyncHandle, u64, u64)>,
}

impl State {
    /// Refuse writes on a poisoned or damaged store.
    pub fn check_writable(&self) -> Result<()> {
        if let Some(r) = &self.poisoned {
            return Err(StoreError::Poisoned(r.clone()));
        }
        if let Some(r) = &self.damaged {
            return Err(StoreError::Damaged(r.clone()));
        }
        Ok(())
    }

    /// Last log id including a purge beyond the last entry.
    pub fn last_log_id(&self) -> Option<LogId> {
        match (self.last, self.meta.last_purged) {
            (Some(l), Some(p)) => Some(if p.index > l.index { p } else { l }),
            (l, p) => l.or(p),
        }
    }

    /// Slot of a live index.
    pub fn slot(&self, index: u64) -> Option<Slot> {
        let (first, last) = (self.first?, self.last?.index);
        if index < first || index > last {
            return None;
        }
        self.index.get(index)
    }

    /// Read and fully validate entry `index`; a live index without a valid record is corruption.
    pub fn read_entry(&self, index: u64) -> Result<Entry> {
        let slot = self.slot(index).ok_or_else(|| StoreError::Contract(format!("entry {index} is not in the log")))?;
        let (h, payload) = read_record(&self.segs, slot.pos, self.limits.segment_size)?;
        if h.index != index || h.term != slot.term || u64::from(h.total_size) != u64::from(slot.size) {
            return Err(StoreError::Corrupt { pos: slot.pos, reason: CorruptReason::IndexMismatch });
        }
        let payload = payload_codec::decode(h.kind, h.app_tag, Bytes::copy_from_slice(payload))
            .map_err(|reason| StoreError::Corrupt { pos: slot.pos, reason })?;
        Ok(Entry { log_id: log_id(h.term, h.index), payload })
    }

    /// Allocates, before anything of `entries` is staged, the blocks their records and index slots
    /// will take, so that a full disk is found while the store is untouched: the append can wait for
    /// space and try again instead of poisoning the store. Part of a segment not created yet is
    /// checked against the file system's free space instead (creating it here would leave a
    /// segment above the log end if the append then waited).
    pub fn reserve_for_append(&mut self, entries: &[Entry]) -> Result<()> {
        self.check_writable()?;
        let (Some(first), Some(last)) = (entries.first(), entries.last()) else { return Ok(()) };
        let seg = self.limits.segment_size;
        let mut end = self.end_pos;
        for e in entries {
            let total = HEADER_SIZE + payload_codec::encode(&e.payload)?.2.len() as u64;
            // Too large an entry: the append itself refuses it.
            let Some(p) = place_entry(end, total, seg) else { return Ok(()) };
            end = p.pos + total;
        }
        let mut pos = self.end_pos;
        let mut missing_bytes = 0u64;
        while pos < end {
            let upto = (segment_base(pos, seg) + seg).min(end);
            if !self.segs.reserve(pos, upto)? {
                missing_bytes += upto - pos;
            }
            pos = upto;
        }
        if missing_bytes > 0 {
            let dir = self.segs.dir();
            let free = nix::sys::statvfs::statvfs(dir)
                .map(|v| v.blocks_available() * v.fragment_size())
                .map_err(|e| StoreError::io("statvfs", dir, e.into()))?;
            if free < missing_bytes {
                return Err(StoreError::io("reserve", dir, std::io::Error::from_raw_os_error(nix::libc::ENOSPC)));
            }
        }
        self.index.reserve(first.log_id.index, last.log_id.index)
    }

    /// Append `entries` in order; every appended entry is readable on return, also when a later
    /// one fails. The records are staged in one buffer and written with one `pwrite` per segment
    /// touched: a syscall per entry would cost more than the copy.
    pub fn append_batch(&mut self, entries: &[Entry]) -> Result<()> {
        self.check_writable()?;
        let appended = entries.iter().try_for_each(|e| self.append_one(e));
        let written = self.write_staged();
        appended.and(written)
    }

    /// Reserve `len` zero bytes at `pos` in the staging buffer, writing out what is staged first
    /// if `pos` does not continue it in the same segment. Returns where they start in `staged`.
    fn stage(&mut self, pos: u64, len: usize) -> Result<usize> {
        let seg = self.limits.segment_size;
        let staged_end = self.staged_pos + self.staged.len() as u64;
        if !self.staged.is_empty()
            && (staged_end != pos || segment_base(pos, seg) != segment_base(self.staged_pos, seg))
        {
            self.write_staged()?;
        }
        if self.staged.is_empty() {
            self.staged_pos = pos;
        }
        let from = self.staged.len();
        self.staged.resize(from + len, 0);
        Ok(from)
    }

    /// Write the staged bytes into their segment. A failed write poisons the store: the
    /// in-memory log already lists entries whose bytes are not in the file.
    fn write_staged(&mut self) -> Result<()> {
        if self.staged.is_empty() {
            return Ok(());
        }
        let written = self.segs.write_at(self.staged_pos, &self.staged);
        self.staged.clear();
        if let Err(e) = &written {
            self.poisoned.get_or_insert_with(|| e.to_string());
        }
        written
    }

    /// Append one entry into the staging buffer: copy, patch, checksum, index. Readable only
    /// after [`Self::write_staged`].
    fn append_one(&mut self, e: &Entry) -> Result<()> {
        let (index, term) = (e.log_id.index, e.log_id.leader_id.term);
        let expected = match (self.last, self.meta.last_purged) {
            (Some(l), _) => Some(l.index + 1),
            (None, Some(p)) => Some(p.index + 1),
            (None, None) => None,
        };
        if expected.is_some_and(|x| x != index) || self.last.is_some_and(|l| l.leader_id.term > term) {
            return Err(StoreError::Contract(format!(
                "append of {index} (term {term}) after {:?}",
                self.last_log_id()
            )));
        }
        let (kind, app_tag, bytes) = payload_codec::encode(&e.payload)?;
        let total = HEADER_SIZE + bytes.len() as u64;
        if total > self.limits.entry_max_bytes {
            return Err(StoreError::EntryTooLarge { size_bytes: total, max_bytes: self.limits.entry_max_bytes });
        }
        let seg = self.limits.segment_size;
        let p = place_entry(self.end_pos, total, seg)
            .ok_or(StoreError::EntryTooLarge { size_bytes: total, max_bytes: self.limits.entry_max_bytes })?;
        let total_usize = usize::try_from(total).map_err(|_| StoreError::Contract("entry too large".into()))?;
        let total32 = u32::try_from(total).map_err(|_| StoreError::Contract("entry too large".into()))?;
        // The slot first: it is the step that can find the disk full, and then nothing of this
        // entry may be staged (bytes after the end must stay zero). A slot past the end is not
        // live, so it needs no undoing if a later step fails.
        self.index.put(&Slot { pos: p.pos, size: total32, index, term })?;
        if let Some((bpos, blen)) = p.blank {
            self.dir_dirty |= self.segs.ensure(bpos)?;
            let blen32 = u32::try_from(blen).map_err(|_| StoreError::Contract("blank too large".into()))?;
            let at = self.stage(bpos, entry::BLANK_MIN_BYTES as usize)?;
            encode_blank(&mut self.staged[at..], blen32);
        }
        self.dir_dirty |= self.segs.ensure(p.pos)?;
        let at = self.stage(p.pos, total_usize)?;
        let (hdr, body) = self.staged[at..].split_at_mut(HEADER_SIZE_USIZE);
        body.copy_from_slice(&bytes);
        if kind == EntryKind::Normal {
            self.patcher.patch(app_tag, p.pos + HEADER_SIZE, body);
        }
        let h = EntryHeader {
            total_size: total32,
            index,
            term,
            pos: p.pos,
            kind,
            app_tag,
            payload_crc: crc32fast::hash(body),
        };
        encode_header(hdr, &h);
        self.end_pos = p.pos + total;
        self.last = Some(e.log_id);
        self.first.get_or_insert(index);
        debug_assert!(self.meta.durable_pos <= self.end_pos);
        Ok(())
    }

    /// Where the log would end after [`Self::truncate_after`]`(last)`; `None` if nothing goes.
    pub fn truncation_end(&self, last: Option<LogId>) -> Result<Option<u64>> {
        let keep_upto = last.map(|l| l.index);
        let Some(cur_last) = self.last else { return Ok(None) };
        if keep_upto.is_some_and(|k| k >= cur_last.index) {
            return Ok(None);
        }
        let first = self.first.ok_or(StoreError::Contract("non-empty log without first".into()))?;
        Ok(Some(match keep_upto {
            Some(k) if k >= first => {
                let s = self.index.get(k).ok_or(StoreError::Contract(format!("no slot for {k}")))?;
                s.pos + u64::from(s.size)
            }
            _ => self.index.get(first).ok_or(StoreError::Contract("no slot for first".into()))?.pos,
        }))
    }

    /// Remove every entry after `last` (exclusive) from the in-memory state and lower the
    /// watermark to the new end; the files are not touched. The caller persists meta, then
    /// calls [`Self::truncate_files`]: bytes zeroed in the page cache may reach the disk before
    /// any later meta write, and a persisted watermark above them would make recovery call the
    /// store damaged. Until then the stale records after the new end are invisible (outside
    /// `first..=last`) and no append runs (openraft awaits the truncation).
    pub fn truncate_logically(&mut self, last: Option<LogId>) -> Result<Option<Truncation>> {
        let keep_upto = last.map(|l| l.index);
        let Some(new_end) = self.truncation_end(last)? else { return Ok(None) };
        let first = self.first.ok_or(StoreError::Contract("non-empty log without first".into()))?;
        assert!(new_end <= self.end_pos, "truncation must not grow the log");
        let old_end = self.end_pos;
        let from_index = keep_upto.map_or(first, |k| (k + 1).max(first));
        self.index.clear_from(from_index)?;
        self.end_pos = new_end;
        self.last = match keep_upto {
            Some(k) if k >= first => {
                Some(log_id(self.index.get(k).ok_or(StoreError::Contract("slot".into()))?.term, k))
            }
            _ => None,
        };
        if self.last.is_none() {
            self.first = None;
            self.meta.start_pos = new_end;
        }
        self.meta.durable_pos = self.meta.durable_pos.min(new_end);
        self.log_generation += 1;
        self.truncation_pending = true;
        Ok(Some(Truncation { new_end, old_end }))
    }

    /// The file part of a truncation: zero what was written of `[new_end, old_end)` within the
    /// new end's segment (the records cut and a blank's header; the rest of a blank's pad and
    /// everything beyond `old_end` is zero already, and writing it would allocate the sparse
    /// rest of a segment) and delete later segments. Returns the ranges that must be synced
    /// before the truncation is durable.
    pub fn truncate_files(&mut self, t: &Truncation) -> Result<TruncateSync> {
        let seg = self.limits.segment_size;
        let base = segment_base(t.new_end, seg);
        let zero_to = self.written_end(t.new_end, t.old_end.min(base + seg));
        let ranges = if zero_to > t.new_end {
            zero_range(&mut self.segs, t.new_end, zero_to)?;
            self.segs.sync_ranges(t.new_end, zero_to)
        } else {
            Vec::new()
        };
        let removed = self.segs.remove_where(|b| b > base)?;
        self.dir_dirty |= removed > 0;
        self.truncation_pending = false;
        Ok(TruncateSync { ranges })
    }

    /// Where the bytes written in `[from, to)` end, `from` being a record start in one
    /// segment: walks the records (entries, then possibly the blank that ends the segment, of
    /// which only the header was written). Anything unexpected counts as written through `to`.
    fn written_end(&self, from: u64, to: u64) -> u64 {
        let mut p = from;
        while p < to {
            match self.segs.read(p, entry::BLANK_MIN_BYTES as usize).map(entry::peek_prefix) {
                Some(entry::RecordPrefix::Entry(size)) => p += u64::from(size),
                Some(entry::RecordPrefix::Blank(_)) => return (p + entry::BLANK_MIN_BYTES).min(to),
                Some(entry::RecordPrefix::Empty) => return p,
                Some(entry::RecordPrefix::Garbage) | None => return to,
            }
        }
        p.min(to)
    }

    /// Logically purge up to `upto` (inclusive): update first/last and `meta`; the caller
    /// persists meta before calling [`Self::delete_purged_files`].
    pub fn purge_logically(&mut self, upto: LogId) -> Result<()> {
        if self.meta.last_purged.is_some_and(|p| p.index >= upto.index) {
            return Ok(());
        }
        self.meta.last_purged = Some(upto);
        match (self.first, self.last) {
            (Some(first), Some(l)) if upto.index < l.index => {
                let f = (upto.index + 1).max(first);
                let slot = self.index.get(f).ok_or_else(|| StoreError::Contract(format!("no slot for {f}")))?;
                self.first = Some(f);
                self.meta.start_pos = slot.pos;
            }
            _ => {
                // Everything is purged (possibly beyond the last entry, after a snapshot): the
                // next entry goes where the log ends.
                self.first = None;
                self.last = None;
                self.meta.start_pos = self.end_pos;
            }
        }
        Ok(())
    }

    /// Whether a snapshot ending at `last` whose next entry goes to `next_pos` can be consistent
    /// with this log: `next_pos` is a position an entry can start at (a Java long, leaving at
    /// least a blank in its segment), equals the end of `last` if the log holds that very entry,
    /// and is not below the end of a local committed entry before `last` (committed entries are
    /// identical on every replica, so the leader's position of `last + 1` lies after them).
    /// Uncommitted local entries prove nothing and may extend past `next_pos`.
    pub fn check_snapshot_point(&self, last: LogId, next_pos: u64, committed: Option<LogId>) -> Result<()> {
        let bad = |m: String| Err(StoreError::Contract(m));
        if i64::try_from(next_pos).is_err() {
            return bad(format!("snapshot next position {next_pos} is not a CommitLog offset"));
        }
        let seg = self.limits.segment_size;
        if seg - next_pos % seg < entry::BLANK_MIN_BYTES {
            return bad(format!("snapshot next position {next_pos} leaves less than a blank in its segment"));
        }
        if let Some(s) = self.slot(last.index)
            && s.term == last.leader_id.term
        {
            let end = s.pos + u64::from(s.size);
            if end != next_pos {
                return bad(format!("snapshot says entry {} ends at {next_pos} but it ends at {end} here", last.index));
            }
            return Ok(());
        }
        let committed = committed.into_iter().chain(self.meta.committed).max();
        if let Some(c) = committed
            && c.index < last.index
            && let Some(s) = self.slot(c.index)
            && s.term == c.leader_id.term
            && s.pos + u64::from(s.size) > next_pos
        {
            return bad(format!(
                "snapshot next position {next_pos} is below the end of committed entry {c} ({})",
                s.pos + u64::from(s.size)
            ));
        }
        Ok(())
    }

    /// Prepare a rebase onto a snapshot's `last` log id: the whole log is dropped and the entry
    /// after `last` goes to `next_pos` (its position on the leader). Logical part only; the
    /// caller persists meta, then calls [`Self::delete_rebased_files`]. Returns false when the
    /// log already holds `last` (positions already agree; openraft's purge does the rest).
    pub fn rebase_logically(&mut self, last: LogId, next_pos: u64) -> Result<bool> {
        self.check_snapshot_point(last, next_pos, None)?;
        if self.slot(last.index).is_some_and(|s| s.term == last.leader_id.term) {
            return Ok(false);
        }
        // Every local entry goes (all segments are deleted), so local entries that end past
        // `next_pos` (uncommitted ones of an old term) leave no stale bytes behind.
        self.first = None;
        self.last = None;
        self.meta.last_purged = Some(last);
        self.meta.start_pos = next_pos;
        self.meta.durable_pos = next_pos;
        self.end_pos = next_pos;
        self.log_generation += 1;
        // The old log's bytes after `next_pos` are still covered by the persisted watermark:
        // nothing (the zero-ahead helper) may touch them before the new meta is durable.
        self.rebase_pending = true;
        Ok(true)
    }

    /// Delete every data segment and index slot after a rebase (meta already persisted).
    pub fn delete_rebased_files(&mut self) -> Result<()> {
        let removed = self.segs.remove_where(|_| true)?;
        self.dir_dirty |= removed > 0;
        self.rebase_pending = false;
        self.index.clear_from(0)
    }

    /// Delete whole segments and index files entirely below the live log.
    pub fn delete_purged_files(&mut self) -> Result<()> {
        let keep_base = segment_base(self.meta.start_pos, self.limits.segment_size);
        self.segs.remove_where(|b| b < keep_base)?;
        if let Some(p) = self.meta.last_purged {
            self.index.remove_below(p.index + 1)?;
        }
        Ok(())
    }

    /// Entries `[lo, hi)` clamped to the live log, stopping before `byte_budget` would be exceeded
    /// (at least one entry is returned if any is live, however large).
    pub fn read_range(&self, lo: u64, hi: u64, byte_budget: Option<u64>) -> Result<Vec<Entry>> {
        let (Some(first), Some(last)) = (self.first, self.last) else { return Ok(Vec::new()) };
        let lo = lo.max(first);
        let hi = hi.min(last.index + 1);
        let mut out = Vec::with_capacity(usize::try_from(hi.saturating_sub(lo)).unwrap_or(0).min(1024));
        let mut bytes = 0u64;
        for i in lo..hi {
            let size = self.slot(i).map_or(0, |s| u64::from(s.size));
            // Never past the budget, except by a first entry alone: one AppendEntries then carries
            // at most the larger of the budget and one entry, both within a frame (config.rs).
            if let Some(budget) = byte_budget
                && !out.is_empty()
                && bytes + size > budget
            {
                break;
            }
            bytes += size;
            out.push(self.read_entry(i)?);
        }
        Ok(out)
    }
}

/// Write zeros over `[from, to)` (one segment) with `pwrite`: on a full disk that is an error,
/// where a store through the mapping into a page without a block would be a SIGBUS.
pub fn zero_range(segs: &mut SegmentSet, from: u64, to: u64) -> Result<()> {
    const CHUNK: u64 = 256 << 10;
    let zeros = vec![0u8; usize::try_from(CHUNK.min(to.saturating_sub(from))).unwrap_or(0)];
    let mut p = from;
    while p < to {
        let n = (to - p).min(CHUNK);
        segs.write_at(p, &zeros[..n as usize])?;
        p += n;
    }
    Ok(())
}

/// Read and validate the entry record at `pos` (header, bounds, position, payload CRC).
pub fn read_record(segs: &SegmentSet, pos: u64, segment_size: u64) -> Result<(EntryHeader, &[u8])> {
    let corrupt = |reason| StoreError::Corrupt { pos, reason };
    let hbytes = segs.read(pos, HEADER_SIZE_USIZE).ok_or(corrupt(CorruptReason::ShortHeader))?;
    let h = decode_header(hbytes).map_err(corrupt)?;
    if h.pos != pos {
        return Err(corrupt(CorruptReason::OutOfSequence));
    }
    let in_seg = pos % segment_size;
    if in_seg + u64::from(h.total_size) > segment_size {
        return Err(corrupt(CorruptReason::BadSize));
    }
    let plen = usize::try_from(h.payload_len()).map_err(|_| corrupt(CorruptReason::BadSize))?;
    let payload = segs.read(pos + HEADER_SIZE, plen).ok_or(corrupt(CorruptReason::BadSize))?;
    verify_payload(&h, payload).map_err(corrupt)?;
    Ok((h, payload))
}
