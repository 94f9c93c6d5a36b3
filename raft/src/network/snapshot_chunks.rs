//! [`SnapshotAssembly`]: the receiving side of a snapshot sent in chunks. A snapshot (the
//! retention manifest: every queue's offsets, the topic, group and offset tables) grows with the
//! broker's metadata and can outgrow one remoting frame; sent whole, a lagging follower or a new
//! learner could then never be caught up. A snapshot larger than `snapshot_chunk_max_bytes` goes as
//! `InstallSnapshotChunk`s instead, each acknowledged, the last one installing the whole.
//!
//! Invariants (pure; the service holds one per replica):
//! - Bytes are only ever appended in order: a chunk is taken only at `offset == received so far`,
//!   for the same sender vote, snapshot id and total; anything else drops what was received, and
//!   the sender (openraft retrying the snapshot) starts again from offset 0.
//! - A chunk at offset 0 always starts a new snapshot, whatever was pending (a new leader, or a
//!   retry after an error).
//! - The total is bounded ([`RAFT_SNAPSHOT_MAX_BYTES`]) before anything is buffered, the buffer
//!   grows only with the bytes that arrived, and a snapshot is handed out only once exactly `total`
//!   bytes arrived.
//! - What was received is dropped once no chunk came for [`RAFT_SNAPSHOT_CHUNK_IDLE_MAX_MS`]
//!   ([`SnapshotAssembly::expire`]), so a transfer its sender gave up on holds no memory.
//! - A chunk from a sender whose vote is below the replica's is answered before it gets here (the
//!   service), so a deposed leader's late chunk never drops the current leader's transfer.

use std::time::Duration;
use std::time::Instant;

use raftmq_common::limits::RAFT_SNAPSHOT_CHUNK_IDLE_MAX_MS;
use raftmq_common::limits::RAFT_SNAPSHOT_MAX_BYTES;

use crate::type_config::{LogId, Vote};

/// One chunk as the wire carries it.
#[derive(Debug, Clone, Copy)]
pub struct Chunk<'a> {
    /// The sender's vote.
    pub vote: &'a Vote,
    /// Which snapshot: its last log id (`SnapshotMeta::last_log_id`).
    pub snapshot: Option<LogId>,
    /// Where `data` starts in the snapshot.
    pub offset: u64,
    /// The snapshot's whole size.
    pub total: u64,
    /// The bytes.
    pub data: &'a [u8],
}

/// What a chunk completed.
#[derive(Debug, PartialEq, Eq)]
pub enum Accepted {
    /// Taken; this many bytes of the snapshot have arrived.
    More(u64),
    /// The last chunk: the whole snapshot.
    Complete(Vec<u8>),
}

struct Pending {
    vote: Vote,
    snapshot: Option<LogId>,
    total: u64,
    buf: Vec<u8>,
    last_chunk_at: Instant,
}

/// The snapshot being received, if any.
#[derive(Default)]
pub struct SnapshotAssembly {
    pending: Option<Pending>,
}

impl SnapshotAssembly {
    /// Takes `chunk` (arrived at `now`), or refuses it (saying why) and forgets what was pending.
    pub fn accept(&mut self, chunk: Chunk<'_>, now: Instant) -> Result<Accepted, String> {
        let taken = self.take(chunk, now);
        if taken.is_err() {
            self.pending = None;
        }
        taken
    }

    /// Whether part of a snapshot is held.
    pub fn is_pending(&self) -> bool {
        self.pending.is_some()
    }

    /// Forgets what was received when no chunk came since `RAFT_SNAPSHOT_CHUNK_IDLE_MAX_MS` before
    /// `now`, and forgets it at once on `whole` (a snapshot arrived in one piece).
    pub fn expire(&mut self, now: Instant, whole: bool) {
        let idle = Duration::from_millis(RAFT_SNAPSHOT_CHUNK_IDLE_MAX_MS);
        if whole || self.pending.as_ref().is_some_and(|p| now.saturating_duration_since(p.last_chunk_at) > idle) {
            self.pending = None;
        }
    }

    fn take(&mut self, chunk: Chunk<'_>, now: Instant) -> Result<Accepted, String> {
        let Chunk { vote, snapshot, offset, total, data } = chunk;
        if total == 0 || total > RAFT_SNAPSHOT_MAX_BYTES {
            return Err(format!("a snapshot of {total} bytes (at most {RAFT_SNAPSHOT_MAX_BYTES} are taken)"));
        }
        let end = offset.checked_add(data.len() as u64).filter(|end| *end <= total && !data.is_empty());
        let Some(end) = end else {
            return Err(format!("a chunk of {} bytes at {offset} does not fit a snapshot of {total}", data.len()));
        };
        if offset == 0 {
            // The first chunk fixes the snapshot; the buffer grows with what arrives.
            self.pending = Some(Pending { vote: *vote, snapshot, total, buf: Vec::new(), last_chunk_at: now });
        }
        let p = match self.pending.as_mut() {
            Some(p)
                if p.vote == *vote && p.snapshot == snapshot && p.total == total && p.buf.len() as u64 == offset =>
            {
                p
            }
            Some(p) => {
                return Err(format!(
                    "a chunk at {offset} of the snapshot at {snapshot:?} does not continue the one at {:?} (at {})",
                    p.snapshot,
                    p.buf.len()
                ));
            }
            None => return Err(format!("a chunk at {offset} of the snapshot at {snapshot:?} without its start")),
        };
        p.buf.extend_from_slice(data);
        p.last_chunk_at = now;
        if end < total {
            return Ok(Accepted::More(end));
        }
        let done = self.pending.take().map(|p| p.buf).unwrap_or_default();
        Ok(Accepted::Complete(done))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn now() -> Instant {
        Instant::now()
    }

    fn vote(term: u64) -> Vote {
        Vote::new_committed(term, 1)
    }

    fn chunk<'a>(v: &'a Vote, id: &str, offset: u64, total: u64, data: &'a [u8]) -> Chunk<'a> {
        // Snapshots told apart by their last log id: "s1" ends at index 1, "s9" at 9.
        let index = id.trim_start_matches('s').parse().unwrap_or(0);
        Chunk { vote: v, snapshot: Some(crate::type_config::log_id(2, index)), offset, total, data }
    }

    #[test]
    fn chunks_in_order_make_the_snapshot() {
        let (v, mut a) = (vote(3), SnapshotAssembly::default());
        assert_eq!(a.accept(chunk(&v, "s1", 0, 10, b"0123"), now()), Ok(Accepted::More(4)));
        assert_eq!(a.accept(chunk(&v, "s1", 4, 10, b"4567"), now()), Ok(Accepted::More(8)));
        assert_eq!(a.accept(chunk(&v, "s1", 8, 10, b"89"), now()), Ok(Accepted::Complete(b"0123456789".to_vec())));
        // Nothing is left pending: a continuation now has no start.
        assert!(a.accept(chunk(&v, "s1", 8, 10, b"89"), now()).is_err());
        // A one-chunk snapshot.
        assert_eq!(a.accept(chunk(&v, "s2", 0, 2, b"ab"), now()), Ok(Accepted::Complete(b"ab".to_vec())));
    }

    #[test]
    fn a_chunk_that_does_not_continue_drops_what_was_received() {
        let (v, mut a) = (vote(3), SnapshotAssembly::default());
        a.accept(chunk(&v, "s1", 0, 10, b"0123"), now()).unwrap();
        // A gap, a repeat, another snapshot, another leader, another total: each refused.
        assert!(a.accept(chunk(&v, "s1", 5, 10, b"5"), now()).is_err());
        a.accept(chunk(&v, "s1", 0, 10, b"0123"), now()).unwrap();
        assert!(a.accept(chunk(&v, "s1", 2, 10, b"23"), now()).is_err());
        a.accept(chunk(&v, "s1", 0, 10, b"0123"), now()).unwrap();
        assert!(a.accept(chunk(&v, "s2", 4, 10, b"4567"), now()).is_err());
        a.accept(chunk(&v, "s1", 0, 10, b"0123"), now()).unwrap();
        assert!(a.accept(chunk(&vote(4), "s1", 4, 10, b"4567"), now()).is_err());
        a.accept(chunk(&v, "s1", 0, 10, b"0123"), now()).unwrap();
        assert!(a.accept(chunk(&v, "s1", 4, 11, b"4567"), now()).is_err());
        // After a refusal the next continuation has no start either.
        assert!(a.accept(chunk(&v, "s1", 4, 10, b"4567"), now()).is_err());
        // A new start after all that works, and replaces a pending one.
        a.accept(chunk(&v, "s1", 0, 4, b"01"), now()).unwrap();
        assert_eq!(a.accept(chunk(&vote(5), "s9", 0, 3, b"xyz"), now()), Ok(Accepted::Complete(b"xyz".to_vec())));
    }

    #[test]
    fn a_transfer_left_idle_is_forgotten() {
        let (v, mut a) = (vote(3), SnapshotAssembly::default());
        let start = now();
        a.accept(chunk(&v, "s1", 0, 10, b"0123"), start).unwrap();
        a.expire(start + Duration::from_millis(RAFT_SNAPSHOT_CHUNK_IDLE_MAX_MS), false);
        assert!(a.is_pending(), "not idle long enough yet");
        a.accept(chunk(&v, "s1", 4, 10, b"4567"), start + Duration::from_millis(RAFT_SNAPSHOT_CHUNK_IDLE_MAX_MS))
            .unwrap();
        a.expire(start + Duration::from_millis(2 * RAFT_SNAPSHOT_CHUNK_IDLE_MAX_MS), false);
        assert!(a.is_pending(), "the second chunk restarted the clock");
        a.expire(start + Duration::from_millis(2 * RAFT_SNAPSHOT_CHUNK_IDLE_MAX_MS + 1), false);
        assert!(!a.is_pending());
        assert!(a.accept(chunk(&v, "s1", 8, 10, b"89"), start).is_err(), "its continuation has no start");
        a.accept(chunk(&v, "s2", 0, 10, b"0123"), start).unwrap();
        a.expire(start, true);
        assert!(!a.is_pending(), "a whole snapshot replaces a transfer in progress");
    }

    #[test]
    fn sizes_are_bounded_before_anything_is_buffered() {
        let (v, mut a) = (vote(3), SnapshotAssembly::default());
        assert!(a.accept(chunk(&v, "s", 0, RAFT_SNAPSHOT_MAX_BYTES + 1, b"x"), now()).is_err());
        assert!(a.accept(chunk(&v, "s", 0, 0, b""), now()).is_err());
        assert!(a.accept(chunk(&v, "s", 0, 3, b""), now()).is_err(), "an empty chunk");
        assert!(a.accept(chunk(&v, "s", 0, 3, b"abcd"), now()).is_err(), "past the total");
        assert!(a.accept(chunk(&v, "s", u64::MAX, 3, b"a"), now()).is_err(), "offset overflow");
    }
}
