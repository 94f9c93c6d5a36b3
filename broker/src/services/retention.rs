//! Retention: which old CommitLog segments go (RocketMQ's `CleanCommitLogService`: `fileReservedTime`,
//! `deleteWhen`, disk watermarks), whether sends are refused because the disk is full, the manifest
//! a replica needs to continue after the purge point, and the task that drives it on every broker.
//!
//! ```text
//! every cleanResourceInterval, every replica:
//!   disk used ratio (statvfs of storePathRootDir) ─▶ writes_refused? ─▶ MessageStore::set_disk_full
//! ready leader only:
//!   sealed segments (base, end, mtime) ─▶ decide_purge ─▶ upto_pos B ─▶ P = last entry below B
//!   ─▶ propose RETENTION_PURGE { P, term, next_pos } (entry tag 10)
//! apply of tag 10, every replica ─▶ boundary recorded ─▶ this task: RaftNode::trigger_snapshot
//!   ─▶ ApplyHandler::build_manifest = (P, Manifest) ─▶ openraft purges the log to P (whole segments)
//!   ─▶ this task: ConsumeQueue files and IndexFiles below next_pos deleted, queue minimums raised
//! a follower behind P: install_snapshot ─▶ MessageStore::install_manifest ─▶ entries P+1.. replicated
//! ```
//!
//! Decisions are pure ([`decide_purge`], [`writes_refused`], [`last_entry_below`]); the task only
//! gathers their inputs and executes the outcome. Invariants:
//! - only sealed segments are purged (never the one being appended to), oldest first, at most
//!   `RETENTION_SEGMENTS_PER_ROUND_MAX_COUNT` a round, stopping at the first one that must stay;
//! - every replica purges at the same entry P, chosen once by the leader and replicated, so their
//!   CommitLogs keep identical positions; a follower that was down past P installs the manifest;
//! - one boundary at a time: a new one is proposed only once the previous one has been purged;
//! - refused writes are decided from the last measurement and lifted by the next one below the
//!   watermark: nothing else has to happen for sends to resume.
//!
//! Manifest layout (inside raft's snapshot data, whose CRC covers it; big-endian):
//!
//! ```text
//! magic u32 "RMQM" | version u8 (1, or 2 with the ACL section) | boundary_index u64 | boundary_term u64 | next_pos u64 | meta_index u64
//! | queue_count u32 | queue_count × (topic_len u16 | topic UTF-8 | queue_id i32 | next_offset u64)
//! | topics_len u32 | TopicConfigSerializeWrapper JSON | groups_len u32 | SubscriptionGroupWrapper JSON
//! | offsets_len u32 | ConsumerOffsetSerializeWrapper JSON
//! | delay_count u32 | delay_count × (queue_id i32 | offset i64) | node_id_count u32 | node_id_count × u64
//! | version 2 only: acl_counter i64 | acl_timestamp i64 | acl_len u32 | plain_acl.yml text UTF-8
//! ```
//!
//! A manifest without a replicated ACL edit is written as version 1, so brokers from before the
//! ACL section still read it.
//!
//! Queues are given as of P (everything at or below P is purged, so a queue's minimum equals its
//! next offset there); the metadata as of `meta_index` ≥ P, see [`Manifest`].

use std::path::Path;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;
use std::time::UNIX_EPOCH;

use bytes::BufMut;
use bytes::Bytes;
use bytes::BytesMut;
use raftmq_common::limits::ACL_FILE_SIZE_MAX_BYTES;
use raftmq_common::limits::DELAY_PROGRESS_BATCH_MAX_COUNT;
use raftmq_common::limits::RAFT_NODE_IDS_MAX_COUNT;
use raftmq_common::limits::RETENTION_MANIFEST_QUEUES_MAX_COUNT;
#[cfg(doc)]
use raftmq_common::limits::RETENTION_MANUAL_DELETE_ROUNDS_COUNT;
use raftmq_common::limits::RETENTION_SEGMENTS_PER_ROUND_MAX_COUNT;
use raftmq_common::limits::RETENTION_SNAPSHOT_POLL_MS;
use raftmq_common::limits::RETENTION_SNAPSHOT_RETRIGGER_MS;
use raftmq_common::protocol::body::BodyError;
use raftmq_common::protocol::body::JsonBody;
use raftmq_common::protocol::body::consumer_offset::ConsumerOffsetSerializeWrapper;
use raftmq_common::protocol::body::register::TopicConfigSerializeWrapper;
use raftmq_common::protocol::body::subscription_group::SubscriptionGroupWrapper;
use raftmq_raft::log_store::COMMITLOG_DIR;
use thiserror::Error;
use tokio::task::JoinHandle;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tracing::info;
use tracing::warn;

use crate::acl::AclDocument;
use crate::acl::AclVersion;
use crate::config::broker_config::BrokerConfig;
use crate::processors::router::BrokerContext;
use crate::state::entry::BrokerCommand;
use crate::state::entry::DelayProgress;

/// Disk usage thresholds, in percent of the file system holding the store.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Watermarks {
    /// `diskMaxUsedSpaceRatio`: at or above it, expired segments are deleted at any hour.
    pub clean_pct: u32,
    /// `diskSpaceCleanForciblyRatio`: at or above it, the oldest sealed segments go even unexpired.
    pub force_pct: u32,
    /// `diskSpaceWarningLevelRatio`: at or above it, sends are refused.
    pub refuse_pct: u32,
}

/// What decides a purge.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RetentionPolicy {
    /// `fileReservedTime`: a sealed segment older than this (by last modification) has expired.
    pub reserved_ms: u64,
    /// `deleteWhen`: hours of day (local time) when expired segments are deleted.
    pub delete_hours: Vec<u8>,
    /// Disk thresholds.
    pub watermarks: Watermarks,
}

/// A sealed CommitLog segment (no entry will be appended to it again).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SealedSegment {
    /// Physical offset of its first byte (its file name).
    pub base_pos: u64,
    /// Physical offset after its last byte (`base_pos` + segment size).
    pub end_pos: u64,
    /// Last modification, ms since the epoch (RocketMQ: the file's `lastModified`).
    pub modified_ms: u64,
}

/// What [`decide_purge`] chose.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PurgeDecision {
    /// Everything below this physical offset goes: the end of the newest segment chosen.
    pub upto_pos: u64,
    /// Segments chosen.
    pub segments: usize,
    /// Chosen because the disk is at or above `diskSpaceCleanForciblyRatio`, expired or not.
    pub forced: bool,
}

fn reaches(ratio: Option<f64>, pct: u32) -> bool {
    ratio.is_some_and(|r| r * 100.0 >= f64::from(pct))
}

/// RocketMQ's `CleanCommitLogService.deleteExpiredFiles`: when it is a `deleteWhen` hour, the disk
/// is at or above `diskMaxUsedSpaceRatio`, or an operator asked (`manual`, DELETE_EXPIRED_COMMITLOG
/// within its last [`RETENTION_MANUAL_DELETE_ROUNDS_COUNT`] rounds), delete sealed segments oldest first while they are
/// expired — or regardless of age at or above `diskSpaceCleanForciblyRatio` — at most
/// `RETENTION_SEGMENTS_PER_ROUND_MAX_COUNT`, stopping at the first one that stays (never a hole).
/// `segments` are the sealed segments in position order; `disk_used_ratio` is a fraction (`None`:
/// unknown, treated as no pressure).
pub fn decide_purge(
    policy: &RetentionPolicy,
    segments: &[SealedSegment],
    now_ms: u64,
    hour_of_day: u8,
    disk_used_ratio: Option<f64>,
    manual: bool,
) -> Option<PurgeDecision> {
    debug_assert!(segments.windows(2).all(|w| w[0].end_pos <= w[1].base_pos), "segments in position order");
    let time_up = policy.delete_hours.contains(&hour_of_day) || manual;
    let space_full = reaches(disk_used_ratio, policy.watermarks.clean_pct);
    if !time_up && !space_full {
        return None;
    }
    let forced = reaches(disk_used_ratio, policy.watermarks.force_pct);
    let chosen = segments
        .iter()
        .take(RETENTION_SEGMENTS_PER_ROUND_MAX_COUNT)
        .take_while(|s| forced || s.modified_ms.saturating_add(policy.reserved_ms) <= now_ms)
        .count();
    let last = segments.get(chosen.checked_sub(1)?)?;
    Some(PurgeDecision { upto_pos: last.end_pos, segments: chosen, forced })
}

/// Whether sends are refused: the disk is at or above `diskSpaceWarningLevelRatio`
/// (RocketMQ's `runningFlags.getAndMakeDiskFull`). An unknown ratio refuses nothing.
pub fn writes_refused(watermarks: &Watermarks, disk_used_ratio: Option<f64>) -> bool {
    reaches(disk_used_ratio, watermarks.refuse_pct)
}

/// The remark of a send refused for a full disk: RocketMQ's `SendMessageProcessor` text for
/// SERVICE_NOT_AVAILABLE, with its `diskUtil()` figures (one file system holds CommitLog,
/// ConsumeQueue and index here, so the three ratios are the same).
pub fn disk_full_remark(ratio: f64) -> String {
    format!(
        "service not available now. It may be caused by one of the following reasons: the broker's disk is full \
         [CL: {ratio:5.2} CQ: {ratio:5.2} INDEX: {ratio:5.2}], messages are put to the slave, message store has been \
         shut down, etc."
    )
}

/// The retention boundary P: the last Raft entry to purge, with the position right after it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct RetentionBoundary {
    /// Raft index of P.
    pub index: u64,
    /// Term of P.
    pub term: u64,
    /// Physical position right after entry P: the CommitLog's new minimum.
    pub next_pos: u64,
}

/// The largest index in `[lo, hi]` whose entry starts below `upto_pos` (`pos_of` gives an entry's
/// position; positions grow with the index). Entries never straddle a segment boundary, so with
/// `upto_pos` a segment end that entry is the last one wholly below it.
pub fn last_entry_below(lo: u64, hi: u64, upto_pos: u64, pos_of: impl Fn(u64) -> Option<u64>) -> Option<u64> {
    if lo > hi || pos_of(lo).is_none_or(|p| p >= upto_pos) {
        return None;
    }
    // Invariant: pos_of(lo) < upto_pos; the answer is in [lo, hi].
    let (mut lo, mut hi) = (lo, hi);
    while lo < hi {
        let mid = lo + (hi - lo).div_ceil(2);
        if pos_of(mid).is_some_and(|p| p < upto_pos) {
            lo = mid;
        } else {
            hi = mid - 1;
        }
    }
    Some(lo)
}

/// Where a topic-queue continues after the boundary.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QueueStart {
    /// Topic.
    pub topic: String,
    /// Queue id.
    pub queue_id: i32,
    /// Its next (and minimum) offset as of P: the first unit at or after `next_pos`.
    pub next_offset: u64,
}

/// Everything a replica needs to continue with entries P+1.. after the log up to P is gone.
///
/// Queues are as of P. The metadata tables are as of `meta_index` (the applied index when the
/// manifest was built, ≥ P): they cannot be rolled back to P. A replica that loads the manifest
/// records `meta_index` and, while the entries (P, meta_index] are applied after it, leaves the
/// tables alone (their effect is already in them) and only applies the ConsumeQueue side of those
/// entries (units, a deleted topic's queues). Skipping is exact. Plainly re-applying would converge
/// too for the maps themselves — topics, groups, offsets and used node ids are last-writer-wins per
/// key (the state at `meta_index` holds, for each key, the last write ≤ meta_index, which a replay
/// of (P, meta_index] writes last again) and delay progress only moves forward (max is idempotent) —
/// but not for the `DataVersion` counters, which count changes, so skipping is what keeps every
/// replica's topic and group versions equal.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Manifest {
    /// P.
    pub boundary: RetentionBoundary,
    /// The applied index the metadata below is as of.
    pub meta_index: u64,
    /// Every topic-queue known at build time, sorted by (topic, queue id).
    pub queues: Vec<QueueStart>,
    /// Topics (`topics.json`).
    pub topics: TopicConfigSerializeWrapper,
    /// Consumer groups (`subscriptionGroup.json`).
    pub groups: SubscriptionGroupWrapper,
    /// Committed consumer offsets (`consumerOffset.json`).
    pub offsets: ConsumerOffsetSerializeWrapper,
    /// Delay-queue progress (`delayOffset.json`).
    pub delay_offsets: Vec<DelayProgress>,
    /// Raft node ids used by the group.
    pub used_node_ids: Vec<u64>,
    /// The last replicated plain ACL edit.
    pub acl: Option<AclDocument>,
}

/// Why a manifest could not be encoded or decoded.
#[derive(Debug, Error)]
pub enum ManifestError {
    /// Not a manifest (magic) or a version this broker does not know.
    #[error("not a retention manifest of a known version")]
    Format,
    /// The bytes end inside a field.
    #[error("manifest truncated reading {0}")]
    Truncated(&'static str),
    /// A count or length beyond the limits or the bytes.
    #[error("manifest {0} out of range")]
    OutOfRange(&'static str),
    /// Bytes after the last field.
    #[error("manifest has {0} trailing bytes")]
    TrailingBytes(usize),
    /// A topic name is not UTF-8.
    #[error("manifest topic name is not UTF-8")]
    BadName,
    /// The ACL file text is not UTF-8.
    #[error("manifest ACL file is not UTF-8")]
    BadAclText,
    /// A JSON section.
    #[error("manifest JSON: {0}")]
    Json(#[from] BodyError),
}

const MANIFEST_MAGIC: u32 = 0x524D_514D;
/// Without the ACL section.
const MANIFEST_VERSION_1: u8 = 1;
/// With the ACL section.
const MANIFEST_VERSION_2: u8 = 2;

fn put_section(out: &mut BytesMut, json: &[u8], what: &'static str) -> Result<(), ManifestError> {
    out.put_u32(u32::try_from(json.len()).map_err(|_| ManifestError::OutOfRange(what))?);
    out.put_slice(json);
    Ok(())
}

impl Manifest {
    /// The manifest bytes (layout in the module doc).
    pub fn encode(&self) -> Result<Bytes, ManifestError> {
        if self.queues.len() > RETENTION_MANIFEST_QUEUES_MAX_COUNT {
            return Err(ManifestError::OutOfRange("queue count"));
        }
        if self.delay_offsets.len() > DELAY_PROGRESS_BATCH_MAX_COUNT {
            return Err(ManifestError::OutOfRange("delay level count"));
        }
        if self.used_node_ids.len() > RAFT_NODE_IDS_MAX_COUNT {
            return Err(ManifestError::OutOfRange("node id count"));
        }
        let mut out = BytesMut::new();
        out.put_u32(MANIFEST_MAGIC);
        out.put_u8(if self.acl.is_some() { MANIFEST_VERSION_2 } else { MANIFEST_VERSION_1 });
        out.put_u64(self.boundary.index);
        out.put_u64(self.boundary.term);
        out.put_u64(self.boundary.next_pos);
        out.put_u64(self.meta_index);
        // Counts are bounded by the checks above.
        out.put_u32(self.queues.len() as u32);
        for q in &self.queues {
            out.put_u16(u16::try_from(q.topic.len()).map_err(|_| ManifestError::OutOfRange("topic length"))?);
            out.put_slice(q.topic.as_bytes());
            out.put_i32(q.queue_id);
            out.put_u64(q.next_offset);
        }
        put_section(&mut out, &self.topics.encode()?, "topics")?;
        put_section(&mut out, &self.groups.encode()?, "groups")?;
        put_section(&mut out, &self.offsets.encode()?, "offsets")?;
        out.put_u32(self.delay_offsets.len() as u32);
        for d in &self.delay_offsets {
            out.put_i32(d.queue_id);
            out.put_i64(d.offset);
        }
        out.put_u32(self.used_node_ids.len() as u32);
        for id in &self.used_node_ids {
            out.put_u64(*id);
        }
        if let Some(acl) = &self.acl {
            if acl.yaml.len() as u64 > ACL_FILE_SIZE_MAX_BYTES {
                return Err(ManifestError::OutOfRange("ACL file length"));
            }
            out.put_i64(acl.version.counter);
            out.put_i64(acl.version.timestamp);
            put_section(&mut out, acl.yaml.as_bytes(), "ACL file length")?;
        }
        Ok(out.freeze())
    }

    /// Reads manifest bytes; never panics, never allocates beyond what the bytes can hold.
    pub fn decode(bytes: &[u8]) -> Result<Manifest, ManifestError> {
        let mut r = Reader(bytes);
        if u32::from_be_bytes(r.array("magic")?) != MANIFEST_MAGIC {
            return Err(ManifestError::Format);
        }
        let [version] = r.array::<1>("version")?;
        if version != MANIFEST_VERSION_1 && version != MANIFEST_VERSION_2 {
            return Err(ManifestError::Format);
        }
        let boundary = RetentionBoundary {
            index: r.u64("boundary index")?,
            term: r.u64("boundary term")?,
            next_pos: r.u64("next position")?,
        };
        let meta_index = r.u64("meta index")?;
        // Smallest queue record: empty name, queue id, offset.
        let queue_count = r.count("queue count", RETENTION_MANIFEST_QUEUES_MAX_COUNT, 2 + 4 + 8)?;
        let mut queues = Vec::with_capacity(queue_count);
        for _ in 0..queue_count {
            let len = usize::from(u16::from_be_bytes(r.array("topic length")?));
            let topic = std::str::from_utf8(r.take(len, "topic")?).map_err(|_| ManifestError::BadName)?.to_owned();
            let queue_id = i32::from_be_bytes(r.array("queue id")?);
            let next_offset = r.u64("next offset")?;
            queues.push(QueueStart { topic, queue_id, next_offset });
        }
        let topics = TopicConfigSerializeWrapper::decode(r.section("topics")?)?;
        let groups = SubscriptionGroupWrapper::decode(r.section("groups")?)?;
        let offsets = ConsumerOffsetSerializeWrapper::decode(r.section("offsets")?)?;
        let delay_count = r.count("delay level count", DELAY_PROGRESS_BATCH_MAX_COUNT, 4 + 8)?;
        let mut delay_offsets = Vec::with_capacity(delay_count);
        for _ in 0..delay_count {
            let queue_id = i32::from_be_bytes(r.array("delay queue id")?);
            let offset = i64::from_be_bytes(r.array("delay offset")?);
            delay_offsets.push(DelayProgress { queue_id, offset });
        }
        let id_count = r.count("node id count", RAFT_NODE_IDS_MAX_COUNT, 8)?;
        let mut used_node_ids = Vec::with_capacity(id_count);
        for _ in 0..id_count {
            used_node_ids.push(r.u64("node id")?);
        }
        let acl = if version == MANIFEST_VERSION_2 {
            let counter = i64::from_be_bytes(r.array("ACL counter")?);
            let timestamp = i64::from_be_bytes(r.array("ACL timestamp")?);
            let text = r.section("ACL file")?;
            if text.len() as u64 > ACL_FILE_SIZE_MAX_BYTES {
                return Err(ManifestError::OutOfRange("ACL file length"));
            }
            let yaml = std::str::from_utf8(text).map_err(|_| ManifestError::BadAclText)?.to_owned();
            Some(AclDocument { version: AclVersion { counter, timestamp }, yaml })
        } else {
            None
        };
        if !r.0.is_empty() {
            return Err(ManifestError::TrailingBytes(r.0.len()));
        }
        Ok(Manifest { boundary, meta_index, queues, topics, groups, offsets, delay_offsets, used_node_ids, acl })
    }
}

struct Reader<'a>(&'a [u8]);

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize, field: &'static str) -> Result<&'a [u8], ManifestError> {
        if self.0.len() < n {
            return Err(ManifestError::Truncated(field));
        }
        let (head, rest) = self.0.split_at(n);
        self.0 = rest;
        Ok(head)
    }

    fn array<const N: usize>(&mut self, field: &'static str) -> Result<[u8; N], ManifestError> {
        self.take(N, field)?.try_into().map_err(|_| ManifestError::Truncated(field))
    }

    fn u64(&mut self, field: &'static str) -> Result<u64, ManifestError> {
        self.array(field).map(u64::from_be_bytes)
    }

    /// A u32 count of records of at least `min_bytes` each, checked against `max` and the bytes left.
    fn count(&mut self, field: &'static str, max: usize, min_bytes: usize) -> Result<usize, ManifestError> {
        let n =
            usize::try_from(u32::from_be_bytes(self.array(field)?)).map_err(|_| ManifestError::OutOfRange(field))?;
        if n > max || n.saturating_mul(min_bytes) > self.0.len() {
            return Err(ManifestError::OutOfRange(field));
        }
        Ok(n)
    }

    fn section(&mut self, field: &'static str) -> Result<&'a [u8], ManifestError> {
        let len =
            usize::try_from(u32::from_be_bytes(self.array(field)?)).map_err(|_| ManifestError::OutOfRange(field))?;
        self.take(len, field)
    }
}

/// The retention task's settings, from the broker config.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RetentionSettings {
    /// The purge policy.
    pub policy: RetentionPolicy,
    /// `cleanResourceInterval`.
    pub interval: Duration,
    /// `mappedFileSizeCommitLog`.
    pub segment_size: u64,
    /// `storePathRootDir` (its `commitlog/` and its file system).
    pub store_root: PathBuf,
    /// `diskUsedRatioFile` (tests): read instead of measuring the file system.
    pub disk_used_ratio_file: Option<PathBuf>,
}

impl RetentionSettings {
    /// Settings from a validated config (an invalid `deleteWhen` deletes at no hour, with a warning).
    pub fn from_config(config: &BrokerConfig) -> RetentionSettings {
        let delete_hours = config.delete_when_hours().unwrap_or_else(|e| {
            warn!(error = %e, "deleteWhen unusable: expired files are deleted only when the disk fills");
            Vec::new()
        });
        RetentionSettings {
            policy: RetentionPolicy {
                reserved_ms: u64::try_from(config.file_reserved().as_millis()).unwrap_or(u64::MAX),
                delete_hours,
                watermarks: Watermarks {
                    clean_pct: config.disk_max_used_space_ratio,
                    force_pct: config.disk_space_clean_forcibly_ratio,
                    refuse_pct: config.disk_space_warning_level_ratio,
                },
            },
            interval: config.clean_resource_interval,
            segment_size: config.mapped_file_size_commit_log,
            store_root: config.store_path_root_dir.clone(),
            disk_used_ratio_file: config.disk_used_ratio_file.clone(),
        }
    }
}

/// Used fraction of the store's file system, or of the test's ratio file when configured.
pub fn disk_used_ratio(settings: &RetentionSettings) -> Option<f64> {
    match &settings.disk_used_ratio_file {
        None => crate::observability::metrics::disk_used_ratio(&settings.store_root),
        Some(path) => {
            let text = std::fs::read_to_string(path).ok()?;
            text.trim().parse::<f64>().ok().filter(|r| (0.0..=1.0).contains(r))
        }
    }
}

/// The hour of day (0–23) at `now_ms` in local time (`deleteWhen` is local, as in RocketMQ); UTC
/// when the local time cannot be determined.
pub fn local_hour_of_day(now_ms: u64) -> u8 {
    let secs = now_ms / 1000;
    let utc_hour = ((secs / 3600) % 24) as u8;
    let Ok(t) = nix::libc::time_t::try_from(secs) else { return utc_hour };
    let mut tm = std::mem::MaybeUninit::<nix::libc::tm>::zeroed();
    // SAFETY: `localtime_r` reads `t` and writes only into `tm`, both valid for the call; the
    // reentrant variant shares no static buffer. A null return leaves `tm` unused.
    let converted = unsafe { !nix::libc::localtime_r(&t, tm.as_mut_ptr()).is_null() };
    if !converted {
        return utc_hour;
    }
    // SAFETY: `localtime_r` succeeded, so it initialised `tm` (zeroed before, so valid anyway).
    let tm = unsafe { tm.assume_init() };
    u8::try_from(tm.tm_hour).ok().filter(|h| *h < 24).unwrap_or(utc_hour)
}

/// Sealed segments in `<store_root>/commitlog`: every segment that ends at or before the base of
/// the segment holding `log_end` (the one being appended to), oldest first.
pub fn sealed_segments(store_root: &Path, segment_size: u64, log_end: u64) -> std::io::Result<Vec<SealedSegment>> {
    let active_base = log_end - log_end % segment_size.max(1);
    let mut out = Vec::new();
    for entry in std::fs::read_dir(store_root.join(COMMITLOG_DIR))? {
        let entry = entry?;
        let name = entry.file_name();
        let Some(base) = name.to_str().filter(|n| n.len() == 20).and_then(|n| n.parse::<u64>().ok()) else {
            continue;
        };
        let end_pos = base.saturating_add(segment_size);
        if end_pos > active_base {
            continue;
        }
        let modified_ms = entry
            .metadata()?
            .modified()?
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX));
        out.push(SealedSegment { base_pos: base, end_pos, modified_ms });
    }
    out.sort_by_key(|s| s.base_pos);
    Ok(out)
}

/// Starts the retention task of one replica.
pub fn spawn(ctx: Arc<BrokerContext>, settings: RetentionSettings, cancel: CancellationToken) -> JoinHandle<()> {
    tokio::spawn(run(ctx, settings, cancel))
}

/// Progress of the current boundary on this replica.
#[derive(Debug, Default)]
struct Follow {
    /// Boundary index and when its snapshot was last requested.
    requested: Option<(u64, Instant)>,
    /// ConsumeQueue and index files are deleted below this position.
    cleaned_below: u64,
}

async fn run(ctx: Arc<BrokerContext>, mut settings: RetentionSettings, cancel: CancellationToken) {
    let mut boundary_rx = ctx.store.retention_boundary_watch();
    let mut config_rx = ctx.live.subscribe();
    let mut next_check = Instant::now();
    let mut follow = Follow::default();
    let mut pending = false;
    loop {
        let poll = Instant::now() + Duration::from_millis(RETENTION_SNAPSHOT_POLL_MS);
        let wake = if pending { next_check.min(poll) } else { next_check };
        tokio::select! {
            biased;
            _ = cancel.cancelled() => break,
            changed = boundary_rx.changed() => {
                if changed.is_err() {
                    break;
                }
            }
            // UPDATE_BROKER_CONFIG changed the reserved time, the hours or a watermark: a check now.
            changed = config_rx.changed() => {
                if changed.is_err() {
                    break;
                }
                let updated = RetentionSettings::from_config(&config_rx.borrow_and_update().config);
                settings.policy = updated.policy;
                next_check = Instant::now();
            }
            _ = tokio::time::sleep_until(wake) => {}
        }
        if Instant::now() >= next_check {
            next_check = Instant::now() + settings.interval;
            check_disk(&ctx, &settings);
            // Each round uses up one of the rounds an operator asked for, as Java counts them.
            let manual =
                ctx.manual_purge_rounds.fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| n.checked_sub(1)).is_ok();
            propose_purge(&ctx, &settings, manual).await;
        }
        pending = follow_boundary(&ctx, &mut follow).await;
    }
}

/// Measures the disk and refuses or resumes sends.
fn check_disk(ctx: &BrokerContext, settings: &RetentionSettings) {
    let ratio = disk_used_ratio(settings);
    let refuse = writes_refused(&settings.policy.watermarks, ratio);
    let full = ratio.filter(|_| refuse);
    let before = ctx.store.set_disk_full(full);
    match (before, full) {
        (None, Some(r)) => warn!(
            ratio = r,
            watermark_pct = settings.policy.watermarks.refuse_pct,
            "disk is full: sends are refused until usage drops"
        ),
        (Some(_), None) => info!(?ratio, "disk usage back below the watermark: sends accepted again"),
        _ => {}
    }
}

/// On a ready leader: decide a purge and propose its boundary.
async fn propose_purge(ctx: &BrokerContext, settings: &RetentionSettings, manual: bool) {
    if ctx.replica.ready_term().is_none() {
        return;
    }
    let node = ctx.replica.node();
    let status = node.status();
    let current = ctx.store.retention_boundary();
    if current.is_some_and(|b| status.purged.is_none_or(|p| p.index < b.index)) {
        // One boundary at a time: the previous one has not been purged yet.
        return;
    }
    let log = node.store();
    let segments = match sealed_segments(&settings.store_root, settings.segment_size, log.end_pos()) {
        Ok(s) => s,
        Err(e) => {
            warn!(error = %e, "cannot list CommitLog segments; no purge this round");
            return;
        }
    };
    let now_ms = crate::state::store::now_ms();
    let ratio = disk_used_ratio(settings);
    let hour = local_hour_of_day(now_ms);
    let Some(decision) = decide_purge(&settings.policy, &segments, now_ms, hour, ratio, manual) else { return };
    let (Some(applied), lo) = (status.applied, status.purged.map_or(0, |p| p.index + 1)) else { return };
    let Some(p) = last_entry_below(lo, applied.index, decision.upto_pos, |i| log.entry_position(i).map(|e| e.pos))
    else {
        return;
    };
    let (Some(at), Some(id)) = (log.entry_position(p), log.log_id_at(p)) else { return };
    if current.is_some_and(|b| b.index >= p) {
        return;
    }
    let command =
        BrokerCommand::RetentionPurge { index: p, term: id.leader_id.term, next_pos: at.pos + u64::from(at.size) };
    info!(
        index = p,
        upto_pos = decision.upto_pos,
        segments = decision.segments,
        forced = decision.forced,
        ?ratio,
        "retention: purging the CommitLog up to the boundary"
    );
    if let Err(e) = ctx.replica.propose(&command).await {
        warn!(error = ?e, index = p, "retention boundary not proposed; retried next round");
    }
}

/// On every replica: snapshot at the applied boundary (openraft then purges the log to it), then
/// delete ConsumeQueue and index files below it. Returns whether the boundary is still in progress.
async fn follow_boundary(ctx: &BrokerContext, follow: &mut Follow) -> bool {
    let Some(b) = ctx.store.retention_boundary() else { return false };
    let node = ctx.replica.node();
    if node.status().purged.is_none_or(|p| p.index < b.index) {
        let due = follow.requested.is_none_or(|(index, at)| {
            index != b.index || at.elapsed() >= Duration::from_millis(RETENTION_SNAPSHOT_RETRIGGER_MS)
        });
        if due {
            follow.requested = Some((b.index, Instant::now()));
            if let Err(e) = node.trigger_snapshot().await {
                warn!(error = %e, index = b.index, "cannot request the retention snapshot");
            }
        }
        return true;
    }
    if follow.cleaned_below < b.next_pos {
        let store = Arc::clone(&ctx.store);
        let min_pos = b.next_pos;
        match tokio::task::spawn_blocking(move || store.delete_files_below(min_pos)).await {
            Ok((cq_files, index_files)) => {
                info!(
                    min_pos,
                    cq_files, index_files, "retention: ConsumeQueue and index files below the boundary deleted"
                );
                follow.cleaned_below = min_pos;
            }
            Err(e) => warn!(error = %e, "retention file deletion task failed"),
        }
    }
    false
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use raftmq_common::protocol::body::topic::DataVersion;
    use raftmq_common::protocol::body::topic::TopicConfig;

    use super::*;

    const HOUR_MS: u64 = 3_600_000;

    fn policy() -> RetentionPolicy {
        RetentionPolicy {
            reserved_ms: 72 * HOUR_MS,
            delete_hours: vec![4],
            watermarks: Watermarks { clean_pct: 75, force_pct: 85, refuse_pct: 90 },
        }
    }

    /// Segments of 1000 bytes modified at the given hours.
    fn segments(modified_hours: &[u64]) -> Vec<SealedSegment> {
        modified_hours
            .iter()
            .enumerate()
            .map(|(i, h)| SealedSegment {
                base_pos: i as u64 * 1000,
                end_pos: (i as u64 + 1) * 1000,
                modified_ms: h * HOUR_MS,
            })
            .collect()
    }

    #[test]
    fn purge_decisions() {
        let now = 100 * HOUR_MS;
        let segs = segments(&[1, 20, 27, 29, 99]); // the first three expired (older than 72 h)
        let expired = Some(PurgeDecision { upto_pos: 3000, segments: 3, forced: false });
        struct Case {
            name: &'static str,
            hour: u8,
            ratio: Option<f64>,
            want: Option<PurgeDecision>,
        }
        let cases = [
            Case { name: "not the hour, disk fine", hour: 3, ratio: Some(0.5), want: None },
            Case { name: "deleteWhen hour", hour: 4, ratio: Some(0.5), want: expired },
            Case { name: "unknown ratio at the hour", hour: 4, ratio: None, want: expired },
            Case { name: "any hour at the clean watermark", hour: 13, ratio: Some(0.75), want: expired },
            Case { name: "just below the clean watermark", hour: 13, ratio: Some(0.7499), want: None },
            Case {
                name: "forced: unexpired go too, oldest first",
                hour: 13,
                ratio: Some(0.85),
                want: Some(PurgeDecision { upto_pos: 5000, segments: 5, forced: true }),
            },
        ];
        for c in cases {
            assert_eq!(decide_purge(&policy(), &segs, now, c.hour, c.ratio, false), c.want, "{}", c.name);
        }
        // An operator's DELETE_EXPIRED_COMMITLOG makes any hour a deleteWhen hour: expired ones go,
        // the others stay.
        assert_eq!(decide_purge(&policy(), &segs, now, 3, Some(0.5), true), expired);
        assert_eq!(decide_purge(&policy(), &segments(&[99]), now, 3, None, true), None);
        // Stops at the first segment that stays, even if a later one expired (no holes).
        let holes = segments(&[1, 99, 2]);
        assert_eq!(
            decide_purge(&policy(), &holes, now, 4, None, false),
            Some(PurgeDecision { upto_pos: 1000, segments: 1, forced: false })
        );
        assert_eq!(decide_purge(&policy(), &segments(&[99]), now, 4, None, false), None);
        assert_eq!(decide_purge(&policy(), &[], now, 4, Some(0.99), false), None);
        // At most RETENTION_SEGMENTS_PER_ROUND_MAX_COUNT a round.
        let many = segments(&[0; 25]);
        let d = decide_purge(&policy(), &many, now, 4, None, false).unwrap();
        assert_eq!(d.segments, RETENTION_SEGMENTS_PER_ROUND_MAX_COUNT);
        assert_eq!(d.upto_pos, RETENTION_SEGMENTS_PER_ROUND_MAX_COUNT as u64 * 1000);
        // Exactly at the reserved time counts as expired.
        let edge = segments(&[28]);
        assert_eq!(decide_purge(&policy(), &edge, 100 * HOUR_MS, 4, None, false).map(|d| d.segments), Some(1));
    }

    #[test]
    fn write_refusal_follows_the_warning_watermark_both_ways() {
        let w = policy().watermarks;
        assert!(!writes_refused(&w, Some(0.89)));
        assert!(writes_refused(&w, Some(0.90)));
        assert!(writes_refused(&w, Some(1.0)));
        assert!(!writes_refused(&w, None), "an unknown ratio refuses nothing");
        let remark = disk_full_remark(0.9);
        assert!(remark.starts_with("service not available now. It may be caused by one of the following reasons: "));
        assert!(remark.contains("the broker's disk is full [CL:  0.90 CQ:  0.90 INDEX:  0.90]"), "{remark}");
    }

    #[test]
    fn last_entry_below_a_position() {
        // Entry i starts at 100 × i, indexes 3..=12.
        let pos = |i: u64| (3..=12).contains(&i).then_some(i * 100);
        assert_eq!(last_entry_below(3, 12, 1000, pos), Some(9));
        assert_eq!(last_entry_below(3, 12, 901, pos), Some(9));
        assert_eq!(last_entry_below(3, 12, 900, pos), Some(8));
        assert_eq!(last_entry_below(3, 12, u64::MAX, pos), Some(12));
        assert_eq!(last_entry_below(3, 12, 300, pos), None);
        assert_eq!(last_entry_below(3, 12, 301, pos), Some(3));
        assert_eq!(last_entry_below(5, 4, 1000, pos), None);
        assert_eq!(last_entry_below(3, 20, 5000, pos), Some(12), "entries missing at the end are not chosen");
    }

    fn manifest() -> Manifest {
        let mut topics = BTreeMap::new();
        topics.insert("T".to_owned(), TopicConfig::new("T"));
        Manifest {
            boundary: RetentionBoundary { index: 41, term: 3, next_pos: 2 << 20 },
            meta_index: 57,
            queues: vec![
                QueueStart { topic: "T".into(), queue_id: 0, next_offset: 12 },
                QueueStart { topic: "T".into(), queue_id: 1, next_offset: 0 },
            ],
            topics: TopicConfigSerializeWrapper {
                data_version: DataVersion { counter: 4, timestamp: 99 },
                topic_config_table: topics,
            },
            groups: SubscriptionGroupWrapper::default(),
            offsets: ConsumerOffsetSerializeWrapper {
                offset_table: BTreeMap::from([("T@g".to_owned(), BTreeMap::from([(0, 7)]))]),
            },
            delay_offsets: vec![DelayProgress { queue_id: 2, offset: 5 }],
            used_node_ids: vec![1, 2, 3],
            acl: None,
        }
    }

    #[test]
    fn a_manifest_with_an_acl_edit_is_version_2_and_without_one_stays_version_1() {
        let v1 = manifest().encode().unwrap();
        assert_eq!(v1[4], 1);
        let m = Manifest {
            acl: Some(AclDocument { version: AclVersion { counter: 3, timestamp: 9 }, yaml: "accounts: []\n".into() }),
            ..manifest()
        };
        let v2 = m.encode().unwrap();
        assert_eq!(v2[4], 2);
        assert_eq!(&v2[..4], &v1[..4]);
        assert_eq!(&v2[5..v1.len()], &v1[5..], "the ACL section follows the version 1 layout");
        assert_eq!(&v2[v1.len()..v1.len() + 20], &[0, 0, 0, 0, 0, 0, 0, 3, 0, 0, 0, 0, 0, 0, 0, 9, 0, 0, 0, 13][..]);
        assert_eq!(Manifest::decode(&v2).unwrap(), m);
        for cut in v1.len()..v2.len() {
            assert!(Manifest::decode(&v2[..cut]).is_err(), "cut at {cut}");
        }
        let mut v3 = v2.to_vec();
        v3[4] = 3;
        assert!(matches!(Manifest::decode(&v3), Err(ManifestError::Format)));
    }

    #[test]
    fn manifest_round_trips_with_a_golden_header() {
        let m = manifest();
        let bytes = m.encode().unwrap();
        assert_eq!(
            &bytes[..37],
            &[
                0x52, 0x4D, 0x51, 0x4D, 1, // magic "RMQM", version
                0, 0, 0, 0, 0, 0, 0, 41, // boundary index
                0, 0, 0, 0, 0, 0, 0, 3, // boundary term
                0, 0, 0, 0, 0, 0x20, 0, 0, // next_pos
                0, 0, 0, 0, 0, 0, 0, 57, // meta index
            ][..]
        );
        assert_eq!(&bytes[37..41], &[0, 0, 0, 2], "queue count");
        assert_eq!(&bytes[41..56], &[0, 1, b'T', 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 12][..]);
        assert_eq!(Manifest::decode(&bytes).unwrap(), m);
    }

    #[test]
    fn manifest_decoding_never_panics_on_damage() {
        let bytes = manifest().encode().unwrap();
        for cut in 0..bytes.len() {
            assert!(Manifest::decode(&bytes[..cut]).is_err(), "cut at {cut}");
        }
        let mut longer = bytes.to_vec();
        longer.push(0);
        assert!(matches!(Manifest::decode(&longer), Err(ManifestError::TrailingBytes(1))));
        let mut bad_magic = bytes.to_vec();
        bad_magic[0] = 0;
        assert!(matches!(Manifest::decode(&bad_magic), Err(ManifestError::Format)));
        let mut huge_count = bytes.to_vec();
        huge_count[37..41].copy_from_slice(&u32::MAX.to_be_bytes());
        assert!(matches!(Manifest::decode(&huge_count), Err(ManifestError::OutOfRange(_))));
        // Seeded flips: decode may fail but never panics.
        let seed = 0x5EED_u64;
        println!("seed {seed:#x}");
        let mut x = seed;
        for _ in 0..2_000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let mut b = bytes.to_vec();
            let at = (x % b.len() as u64) as usize;
            b[at] ^= (x >> 32) as u8 | 1;
            let _ = Manifest::decode(&b);
        }
    }

    #[test]
    fn sealed_segments_exclude_the_active_one() {
        let dir = tempfile::tempdir().unwrap();
        let seg_dir = dir.path().join(COMMITLOG_DIR);
        std::fs::create_dir_all(&seg_dir).unwrap();
        for base in [0u64, 4096, 8192] {
            std::fs::write(seg_dir.join(format!("{base:020}")), b"x").unwrap();
        }
        std::fs::write(seg_dir.join("junk"), b"x").unwrap();
        let sealed = sealed_segments(dir.path(), 4096, 8192 + 100).unwrap();
        assert_eq!(sealed.iter().map(|s| (s.base_pos, s.end_pos)).collect::<Vec<_>>(), [(0, 4096), (4096, 8192)]);
        assert!(sealed.iter().all(|s| s.modified_ms > 0));
        assert_eq!(sealed_segments(dir.path(), 4096, 4096).unwrap().len(), 1, "a log ending at a boundary");
    }

    #[test]
    fn local_hour_is_an_hour() {
        assert!(local_hour_of_day(crate::state::store::now_ms()) < 24);
        assert!(local_hour_of_day(0) < 24);
    }

    #[test]
    fn ratio_file_overrides_the_file_system() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("ratio");
        let mut settings = RetentionSettings::from_config(&BrokerConfig {
            store_path_root_dir: dir.path().to_path_buf(),
            ..BrokerConfig::default()
        });
        assert!(disk_used_ratio(&settings).is_some_and(|r| (0.0..=1.0).contains(&r)));
        settings.disk_used_ratio_file = Some(file.clone());
        assert_eq!(disk_used_ratio(&settings), None, "missing file");
        std::fs::write(&file, "0.93\n").unwrap();
        assert_eq!(disk_used_ratio(&settings), Some(0.93));
        std::fs::write(&file, "93").unwrap();
        assert_eq!(disk_used_ratio(&settings), None, "a fraction, not a percent");
    }
}
