//! Configuration of a broker group's Raft replica: election/heartbeat timing handed to openraft
//! and the log store's layout limits. One struct, documented defaults, one `validate()`.
//! Units are in the names. `segment_size_bytes` is part of the on-disk format: it must be equal
//! on every replica of a group and never change for an existing store (positions, and so
//! msgIds, depend on it); the store records it in its meta file and refuses a different value.

use crate::entry::{BLANK_MIN_BYTES, HEADER_SIZE};
use crate::error::StoreError;
use crate::network::stream_window::StreamWindow;
use raftmq_common::limits::{RAFT_APPEND_ENTRIES_MAX_COUNT, RAFT_ENTRY_MAX_BYTES};

/// 1 GiB, RocketMQ `mappedFileSizeCommitLog`.
pub const SEGMENT_SIZE_DEFAULT_BYTES: u64 = 1 << 30;
/// Smallest segment the store accepts. Production configs use a few MiB at least; tests go down
/// to this to exercise rolls cheaply.
pub const SEGMENT_SIZE_MIN_BYTES: u64 = 4096;
/// Largest segment: `total_size` and in-segment offsets must fit in `u32`.
pub const SEGMENT_SIZE_MAX_BYTES: u64 = 1 << 31;
/// How long a follower's flusher must have been idle before an append flushes inline
/// (`RaftConfig::flush_inline_idle_min_us`): longer than the gap between two appends under load,
/// shorter than the gap between sends one at a time (0.3–0.6 ms here).
pub const FLUSH_INLINE_IDLE_MIN_DEFAULT_US: u64 = 200;
/// Index slots per `raftindex/` file (DLedger: 5 Mi × 32 B = 160 MiB).
pub const INDEX_FILE_ENTRIES_DEFAULT: u64 = 5 * 1024 * 1024;
/// First pause of an append that found the disk full before it tries again; doubled up to
/// [`APPEND_SPACE_RETRY_MAX_MS`] while the disk stays full.
pub const APPEND_SPACE_RETRY_MIN_MS: u64 = 20;
/// Longest pause between two tries of an append waiting for disk space: how soon after space is
/// freed the replica serves again, at worst.
pub const APPEND_SPACE_RETRY_MAX_MS: u64 = 500;
/// Free bytes the file system of the log must keep beyond a proposal for the leader to take it
/// ([`crate::node::RaftNode::propose`]): below it the proposal is refused as disk full instead of
/// being appended and then waiting for space inside openraft (which would stop the leader's
/// heartbeats). The zero-filled window ahead of the log end is already allocated, so this is margin
/// for index chunks and the state machine's files.
pub const PROPOSE_DISK_FREE_MIN_BYTES: u64 = 4 << 20;
/// How far past the log end `zero_ahead` keeps the current segment zero-written and synced.
pub const SEGMENT_ZERO_AHEAD_BYTES: u64 = 8 << 20;
/// Bytes `zero_ahead` writes per hold of the store mutex.
pub const SEGMENT_ZERO_CHUNK_BYTES: u64 = 256 << 10;
/// `zero_ahead` refills once this much of its window is used: one sync per step.
pub const SEGMENT_ZERO_STEP_BYTES: u64 = 1 << 20;
/// Blocks an append reserves (`posix_fallocate`) past its own records at a time: one call per this
/// many appended bytes instead of one per group commit.
pub const SEGMENT_RESERVE_AHEAD_BYTES: u64 = 1 << 20;
/// A leader's default `page_cache_leader_window_bytes`: one default segment of the newest log,
/// for consumers reading the tail.
pub const PAGE_CACHE_LEADER_WINDOW_DEFAULT_BYTES: u64 = 1 << 30;
/// A follower's default `page_cache_follower_window_bytes`: far more than its apply lags.
pub const PAGE_CACHE_FOLLOWER_WINDOW_DEFAULT_BYTES: u64 = 64 << 20;
/// `page_cache` drops bytes behind the window once this much is due.
pub const PAGE_CACHE_DROP_STEP_BYTES: u64 = 4 << 20;
/// Byte budget of one AppendEntries batch read by `limited_get_log_entries` (databend: 2 MiB).
pub const APPEND_ENTRIES_DEFAULT_BYTES: u64 = 2 << 20;
/// Default largest snapshot sent in one InstallSnapshot; a larger one goes in chunks of this size.
/// About what one frame carries: snapshots up to 15 MiB go whole, as earlier builds sent them, so a
/// group upgraded one replica at a time keeps catching followers up. Earlier builds also sent whole
/// the few between 15 MiB and the 16 MiB frame; those now go in chunks, which only this build reads
/// (upgrade the follower first).
pub const SNAPSHOT_CHUNK_DEFAULT_BYTES: u64 = RAFT_ENTRY_MAX_BYTES as u64;
/// Default count of pipelined AppendEntries awaiting replies on one replication stream.
pub const APPEND_STREAM_INFLIGHT_DEFAULT_COUNT: u64 = 16;
/// Default encoded bytes of pipelined AppendEntries awaiting replies on one stream.
pub const APPEND_STREAM_INFLIGHT_DEFAULT_BYTES: u64 = 16 << 20;
/// Most requests a stream may have in flight: the receiver buffers at most this many out of
/// order before it ends the stream (a sender beyond it is broken or hostile).
pub const APPEND_STREAM_INFLIGHT_MAX_COUNT: u64 = 64;

// Relationships the format depends on.
const _: () = assert!(SEGMENT_SIZE_MIN_BYTES > HEADER_SIZE + BLANK_MIN_BYTES);
const _: () = assert!(SEGMENT_SIZE_DEFAULT_BYTES <= SEGMENT_SIZE_MAX_BYTES);
const _: () = assert!(SEGMENT_SIZE_MAX_BYTES <= u32::MAX as u64);
const _: () = assert!(SEGMENT_ZERO_CHUNK_BYTES <= SEGMENT_ZERO_AHEAD_BYTES);
const _: () = assert!(APPEND_STREAM_INFLIGHT_DEFAULT_COUNT <= APPEND_STREAM_INFLIGHT_MAX_COUNT);

/// Where the log store's group-commit flusher runs (see `flusher`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum FlushMode {
    /// A dedicated std thread per store (and a `page_cache` helper thread): syncs never block
    /// a tokio worker. Production.
    #[default]
    Thread,
    /// A task on the tokio runtime that opens the store, with no thread at all, so that a
    /// seeded current-thread runtime with paused time runs a whole group deterministically
    /// (the syncs are the same, but block that runtime while they run). Simulation only.
    Task,
}

/// Configuration of one Raft replica (one broker of a group).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RaftConfig {
    /// Heartbeat period; also openraft's AppendEntries deadline (soft = ¾). Default 150 ms.
    pub heartbeat_interval_ms: u64,
    /// Lower bound of openraft's randomized election timeout. Default 200 ms.
    ///
    /// openraft 0.10 starts this timer only once the leader lease has run out, and the lease is
    /// `election_timeout_max_ms`: a follower campaigns `max + rand[min, max]` after the last
    /// heartbeat it saw, 1.2–2.0 s with the defaults (≥ 8 heartbeats, ≥ 10 × p99 append). A
    /// 1.2–2.4 s openraft timeout would have meant 3.6–4.8 s, and a crashed leader must be
    /// replaced, end to end, within 3 s.
    pub election_timeout_min_ms: u64,
    /// Upper bound of openraft's randomized election timeout, and so the leader lease.
    /// Default 1000 ms (see `election_timeout_min_ms`).
    pub election_timeout_max_ms: u64,
    /// Pre-Vote on (the network must implement `pre_vote`; its default grants). Default true.
    pub enable_pre_vote: bool,
    /// Count cap of entries per AppendEntries; the byte cap is `append_entries_max_bytes`.
    /// Default 1024.
    pub max_payload_entries: u64,
    /// Byte budget of one AppendEntries read (at least one entry is always returned).
    /// Recommended 1–4 MiB. Default 2 MiB.
    pub append_entries_max_bytes: u64,
    /// Largest snapshot sent whole; a larger one goes in chunks of this many bytes
    /// (`network::snapshot_chunks`). Default and most `RAFT_ENTRY_MAX_BYTES` (15 MiB). openraft's own
    /// `snapshot_max_chunk_size` is not used: its full-snapshot transport leaves chunking to us.
    pub snapshot_chunk_max_bytes: u64,
    /// Data segment size (`commitlog/` files). Default 1 GiB; a multiple of 4096.
    pub segment_size_bytes: u64,
    /// Slots per `raftindex/` file (32 B each). Default 5 Mi (160 MiB files).
    pub index_file_entries: u64,
    /// How often the flusher persists the committed log id (it is allowed to lag: openraft
    /// tolerates a reverted `committed`). Default 200 ms.
    pub committed_persist_interval_ms: u64,
    /// Timeout of installing a (small, manifest) snapshot. Default 10 000 ms.
    pub install_snapshot_timeout_ms: u64,
    /// How often the state machine writes a checkpoint of its applied state, so a restart
    /// re-applies only the entries after it (`checkpoint_file`); 0 = never (a restart re-applies
    /// every entry after the snapshot). Default 10 000 ms.
    pub checkpoint_interval_ms: u64,
    /// Pipelined AppendEntries awaiting replies per follower, when the transport pipelines
    /// (1 = one at a time, as without pipelining). Default 16, at most
    /// `APPEND_STREAM_INFLIGHT_MAX_COUNT`.
    pub append_stream_inflight_max_count: u64,
    /// Encoded bytes of pipelined AppendEntries awaiting replies per follower (at least one
    /// request is always in flight). Default 16 MiB.
    pub append_stream_inflight_max_bytes: u64,
    /// Where the store's flusher runs. Default [`FlushMode::Thread`]; `Task` is for
    /// deterministic simulation.
    pub flush_mode: FlushMode,
    /// With [`FlushMode::Thread`], a replica that is not the leader runs a flush on its Raft
    /// thread instead of handing it to the flusher when the flusher has been idle this long
    /// (`flusher::InlineFlush`): at low load that saves two thread wake-ups per entry; under
    /// load appends come closer together and all go to the flusher. 0 = never inline.
    /// Default [`FLUSH_INLINE_IDLE_MIN_DEFAULT_US`].
    pub flush_inline_idle_min_us: u64,
    /// With [`FlushMode::Thread`], keep the blocks after the log end written ahead of the
    /// appends (`zero_ahead`): every byte is written twice, off the commit path, and each group
    /// commit's sync skips the filesystem's allocation I/O. Default true (false only to measure
    /// the difference).
    pub segment_zero_ahead: bool,
    /// With [`FlushMode::Thread`], how many bytes behind the durable end a leader keeps in the
    /// page cache; older bytes are handed back to the kernel (`page_cache`) and read from disk if
    /// a consumer asks for them. 0 = never drop. Default 1 GiB.
    pub page_cache_leader_window_bytes: u64,
    /// The same for a follower (and a replica that is neither), whose log is read by its own
    /// apply right after commit. 0 = never drop. Default 64 MiB.
    pub page_cache_follower_window_bytes: u64,
    /// TEST ONLY, UNSAFE: report appended entries durable before they are fsynced (the flush still
    /// follows). A group can then commit, and a broker acknowledge, entries a power loss erases:
    /// the jepsen self-test uses it to prove that its checkers see such a loss. Default false.
    pub unsafe_ack_before_fsync: bool,
}

impl Default for RaftConfig {
    fn default() -> Self {
        Self {
            heartbeat_interval_ms: 150,
            election_timeout_min_ms: 200,
            election_timeout_max_ms: 1000,
            enable_pre_vote: true,
            max_payload_entries: 1024,
            append_entries_max_bytes: APPEND_ENTRIES_DEFAULT_BYTES,
            snapshot_chunk_max_bytes: SNAPSHOT_CHUNK_DEFAULT_BYTES,
            segment_size_bytes: SEGMENT_SIZE_DEFAULT_BYTES,
            index_file_entries: INDEX_FILE_ENTRIES_DEFAULT,
            committed_persist_interval_ms: 200,
            install_snapshot_timeout_ms: 10_000,
            checkpoint_interval_ms: 10_000,
            append_stream_inflight_max_count: APPEND_STREAM_INFLIGHT_DEFAULT_COUNT,
            append_stream_inflight_max_bytes: APPEND_STREAM_INFLIGHT_DEFAULT_BYTES,
            flush_mode: FlushMode::Thread,
            flush_inline_idle_min_us: FLUSH_INLINE_IDLE_MIN_DEFAULT_US,
            segment_zero_ahead: true,
            page_cache_leader_window_bytes: PAGE_CACHE_LEADER_WINDOW_DEFAULT_BYTES,
            page_cache_follower_window_bytes: PAGE_CACHE_FOLLOWER_WINDOW_DEFAULT_BYTES,
            unsafe_ack_before_fsync: false,
        }
    }
}

impl RaftConfig {
    /// Largest encoded entry (header + payload): what a segment can hold, and at most what one
    /// AppendEntries can carry alone ([`RAFT_ENTRY_MAX_BYTES`]).
    pub fn entry_max_bytes(&self) -> u64 {
        (self.segment_size_bytes - BLANK_MIN_BYTES).min(RAFT_ENTRY_MAX_BYTES as u64)
    }

    /// Check every value and relationship.
    pub fn validate(&self) -> Result<(), StoreError> {
        let err = |m: String| Err(StoreError::Config(m));
        let seg = self.segment_size_bytes;
        if !(SEGMENT_SIZE_MIN_BYTES..=SEGMENT_SIZE_MAX_BYTES).contains(&seg) || !seg.is_multiple_of(4096) {
            return err(format!(
                "segment_size_bytes {seg} must be a multiple of 4096 in \
                 [{SEGMENT_SIZE_MIN_BYTES}, {SEGMENT_SIZE_MAX_BYTES}]"
            ));
        }
        if !(16..=(1 << 26)).contains(&self.index_file_entries) {
            return err(format!("index_file_entries {} out of [16, 2^26]", self.index_file_entries));
        }
        // An AppendEntries carries at most the larger of its byte budget and one entry, and at most
        // max_payload_entries entries: both bounds keep it within one remoting frame.
        if !(1..=RAFT_ENTRY_MAX_BYTES as u64).contains(&self.append_entries_max_bytes)
            || !(1..=RAFT_APPEND_ENTRIES_MAX_COUNT).contains(&self.max_payload_entries)
        {
            return err(format!(
                "append_entries_max_bytes must be in [1, {RAFT_ENTRY_MAX_BYTES}] and max_payload_entries in \
                 [1, {RAFT_APPEND_ENTRIES_MAX_COUNT}]"
            ));
        }
        if !(1..=RAFT_ENTRY_MAX_BYTES as u64).contains(&self.snapshot_chunk_max_bytes) {
            return err(format!("snapshot_chunk_max_bytes must be in [1, {RAFT_ENTRY_MAX_BYTES}]"));
        }
        if !(1..=APPEND_STREAM_INFLIGHT_MAX_COUNT).contains(&self.append_stream_inflight_max_count)
            || self.append_stream_inflight_max_bytes == 0
        {
            return err(format!(
                "append_stream_inflight_max_count must be in [1, {APPEND_STREAM_INFLIGHT_MAX_COUNT}] and \
                 append_stream_inflight_max_bytes > 0"
            ));
        }
        if self.heartbeat_interval_ms == 0 || self.heartbeat_interval_ms >= self.election_timeout_min_ms {
            return err("need 0 < heartbeat_interval_ms < election_timeout_min_ms".into());
        }
        if self.election_timeout_min_ms >= self.election_timeout_max_ms {
            return err("need election_timeout_min_ms < election_timeout_max_ms".into());
        }
        Ok(())
    }

    /// [`Self::checkpoint_interval_ms`] as a duration, `None` when checkpoints are off.
    pub fn checkpoint_interval(&self) -> Option<std::time::Duration> {
        (self.checkpoint_interval_ms > 0).then(|| std::time::Duration::from_millis(self.checkpoint_interval_ms))
    }

    /// [`Self::snapshot_chunk_max_bytes`] as a length.
    pub fn snapshot_chunk_bytes(&self) -> usize {
        usize::try_from(self.snapshot_chunk_max_bytes).unwrap_or(usize::MAX)
    }

    /// How much a replication stream keeps in flight per follower.
    pub fn stream_window(&self) -> StreamWindow {
        StreamWindow {
            count: usize::try_from(self.append_stream_inflight_max_count).unwrap_or(usize::MAX),
            bytes: self.append_stream_inflight_max_bytes,
        }
    }

    /// The openraft config for this replica. Snapshots are driven by retention (manifest at the
    /// retention boundary), so openraft never builds them on its own and purges exactly to them.
    pub fn to_openraft(&self, cluster_name: &str) -> Result<openraft::Config, StoreError> {
        self.validate()?;
        let c = openraft::Config {
            cluster_name: cluster_name.to_string(),
            heartbeat_interval: self.heartbeat_interval_ms,
            election_timeout_min: self.election_timeout_min_ms,
            election_timeout_max: self.election_timeout_max_ms,
            enable_pre_vote: Some(self.enable_pre_vote),
            max_payload_entries: self.max_payload_entries,
            install_snapshot_timeout: self.install_snapshot_timeout_ms,
            snapshot_policy: openraft::SnapshotPolicy::Never,
            max_in_snapshot_log_to_keep: 0,
            replication_lag_threshold: 100_000,
            // A restarted leader must win a new election. openraft's default lets it resume in
            // its old term, but a crash may have cut its unsynced tail: it would then re-propose
            // different entries under log ids its followers already hold, and they would keep
            // their copies as "the same" entries (found by t50_sim's crashes without flush).
            enable_leader_restore: Some(false),
            // Replicate as soon as the leader's append returns, not after the core's next
            // message batch: commit latency is what bounds a group's throughput.
            broadcast_submitted_on_append: Some(true),
            ..Default::default()
        };
        c.validate().map_err(|e| StoreError::Config(e.to_string()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_valid() {
        let c = RaftConfig::default();
        c.validate().expect("defaults valid");
        let oc = c.to_openraft("broker-a").expect("openraft config");
        assert_eq!(oc.heartbeat_interval, 150);
        assert_eq!(oc.max_in_snapshot_log_to_keep, 0);
        assert_eq!(oc.enable_leader_restore, Some(false));
    }

    #[test]
    fn rejects_bad_segment_sizes() {
        for seg in [0, 4095, 4097, SEGMENT_SIZE_MAX_BYTES * 2] {
            let c = RaftConfig { segment_size_bytes: seg, ..RaftConfig::default() };
            assert!(c.validate().is_err(), "{seg}");
        }
        let c = RaftConfig { segment_size_bytes: 4 << 20, ..RaftConfig::default() };
        assert!(c.validate().is_ok());
    }

    #[test]
    fn rejects_bad_timing() {
        let c = RaftConfig { heartbeat_interval_ms: 1500, ..RaftConfig::default() };
        assert!(c.validate().is_err());
        let c = RaftConfig { election_timeout_max_ms: 200, ..RaftConfig::default() };
        assert!(c.validate().is_err());
    }
}
