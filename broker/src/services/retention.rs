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
//! The manifest itself (what a replica needs after P, and its layout) is state:
//! [`crate::state::manifest`].

use std::path::Path;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::AtomicU32;
use std::sync::atomic::Ordering;
use std::time::Duration;
use std::time::UNIX_EPOCH;

#[cfg(doc)]
use raftmq_common::limits::RETENTION_MANUAL_DELETE_ROUNDS_COUNT;
use raftmq_common::limits::RETENTION_SEGMENTS_PER_ROUND_MAX_COUNT;
use raftmq_common::limits::RETENTION_SNAPSHOT_POLL_MS;
use raftmq_common::limits::RETENTION_SNAPSHOT_RETRIGGER_MS;
use raftmq_raft::log_store::COMMITLOG_DIR;
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tracing::info;
use tracing::warn;

use crate::config::broker_config::BrokerConfig;
use crate::config::live_config::Snapshot;
use crate::services::replica::Replica;
use crate::state::entry::BrokerCommand;
use crate::state::store::MessageStore;

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
    /// `cleanFileForciblyEnable`: whether `diskSpaceCleanForciblyRatio` may delete unexpired
    /// segments. Off by default (Java: on): an acknowledged message stays until `fileReservedTime`,
    /// and a disk that fills refuses writes instead of dropping messages nobody may have read.
    pub clean_forcibly: bool,
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
/// expired — or, with `cleanFileForciblyEnable`, regardless of age at or above
/// `diskSpaceCleanForciblyRatio` — at most
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
    let forced = policy.clean_forcibly && reaches(disk_used_ratio, policy.watermarks.force_pct);
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
                clean_forcibly: config.clean_file_forcibly_enable,
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

/// What the retention task uses: the store it measures and cleans, the replica that proposes the
/// boundary and triggers snapshots, config changes, and the manual purge rounds an operator asked for.
#[derive(Debug)]
pub struct RetentionHandles {
    /// The applied state.
    pub store: Arc<MessageStore>,
    /// The Raft group.
    pub replica: Arc<Replica>,
    /// UPDATE_BROKER_CONFIG's changes.
    pub config: watch::Receiver<Snapshot>,
    /// Rounds left that delete expired segments whatever the hour (DELETE_EXPIRED_COMMITLOG).
    pub manual_purge_rounds: Arc<AtomicU32>,
}

/// Starts the retention task of one replica.
pub fn spawn(h: RetentionHandles, settings: RetentionSettings, cancel: CancellationToken) -> JoinHandle<()> {
    tokio::spawn(run(h, settings, cancel))
}

/// Progress of the current boundary on this replica.
#[derive(Debug, Default)]
struct Follow {
    /// Boundary index and when its snapshot was last requested.
    requested: Option<(u64, Instant)>,
    /// ConsumeQueue and index files are deleted below this position.
    cleaned_below: u64,
}

async fn run(h: RetentionHandles, mut settings: RetentionSettings, cancel: CancellationToken) {
    let mut boundary_rx = h.store.retention_boundary_watch();
    let mut config_rx = h.config.clone();
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
            check_disk(&h, &settings);
            // Each round uses up one of the rounds an operator asked for, as Java counts them.
            let manual =
                h.manual_purge_rounds.fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| n.checked_sub(1)).is_ok();
            propose_purge(&h, &settings, manual).await;
        }
        pending = follow_boundary(&h, &mut follow).await;
    }
}

/// Measures the disk and refuses or resumes sends.
fn check_disk(h: &RetentionHandles, settings: &RetentionSettings) {
    let ratio = disk_used_ratio(settings);
    let refuse = writes_refused(&settings.policy.watermarks, ratio);
    let full = ratio.filter(|_| refuse);
    let before = h.store.set_disk_full(full);
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
async fn propose_purge(h: &RetentionHandles, settings: &RetentionSettings, manual: bool) {
    if h.replica.ready_term().is_none() {
        return;
    }
    let node = h.replica.node();
    let status = node.status();
    let current = h.store.retention_boundary();
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
    if let Err(e) = h.replica.propose(&command).await {
        warn!(error = ?e, index = p, "retention boundary not proposed; retried next round");
    }
}

/// On every replica: snapshot at the applied boundary (openraft then purges the log to it), then
/// delete ConsumeQueue and index files below it. Returns whether the boundary is still in progress.
async fn follow_boundary(h: &RetentionHandles, follow: &mut Follow) -> bool {
    let Some(b) = h.store.retention_boundary() else { return false };
    let node = h.replica.node();
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
        let store = Arc::clone(&h.store);
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

    use super::*;

    const HOUR_MS: u64 = 3_600_000;

    fn policy() -> RetentionPolicy {
        RetentionPolicy {
            reserved_ms: 72 * HOUR_MS,
            delete_hours: vec![4],
            watermarks: Watermarks { clean_pct: 75, force_pct: 85, refuse_pct: 90 },
            clean_forcibly: true,
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
        // Without cleanFileForciblyEnable (raftmq's default) a full disk deletes expired segments
        // only: an acknowledged message is never dropped before fileReservedTime.
        let kept = RetentionPolicy { clean_forcibly: false, ..policy() };
        for ratio in [0.85, 0.99, 1.0] {
            assert_eq!(decide_purge(&kept, &segs, now, 13, Some(ratio), false), expired, "ratio {ratio}");
        }
        assert_eq!(decide_purge(&kept, &segments(&[99]), now, 13, Some(1.0), false), None);
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
