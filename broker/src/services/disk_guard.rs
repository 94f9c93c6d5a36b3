//! Disk guard: a leader whose disk is full hands leadership to a replica that can lead.
//!
//! ```text
//! every DISK_GUARD_INTERVAL_MS: node status ─▶ disk full? (log: an append waits or too little free;
//!   applies: a ConsumeQueue write waits; usage at or above diskSpaceWarningLevelRatio)
//!   ─▶ decide ─▶ leader: transfer to a caught-up live voter
//! ```
//!
//! A full replica refuses writes (`RaftNode::propose`, SERVICE_NOT_AVAILABLE "maybe disk full"), and
//! its appends and applies wait for space instead of failing, so it recovers by itself once space
//! is freed. As leader it would keep the whole group unwritable meanwhile; another replica whose
//! disk has room can lead instead.
//!
//! Invariants: the decision is pure ([`decide`]); at most one hand-over per full-disk episode of
//! this replica (if every replica is full, leadership moves at most once around the group instead
//! of circling); without a caught-up, live voter nothing is transferred and the next round asks
//! again.

use std::sync::Arc;
use std::time::Duration;

use raftmq_common::limits::DISK_GUARD_INTERVAL_MS;
use raftmq_raft::NodeStatus;
use raftmq_raft::Role;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;
use tracing::info;
use tracing::warn;

use crate::services::membership::choose_target;
use crate::services::membership::target_ack_age_max_ms;
use crate::services::replica::Replica;
use crate::state::store::MessageStore;

/// What one round does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decision {
    /// Disk has room: a later full disk is a new episode.
    Clear,
    /// Full, but not leading, or already handed over in this episode.
    Wait,
    /// Full and leading: hand leadership over.
    HandOver,
}

/// Why this replica cannot take writes for lack of disk space, if so: its log (an append waits, or
/// less than the minimum is free), its applies (a ConsumeQueue write waits) or the disk at or above
/// `diskSpaceWarningLevelRatio` (sends refused, as RocketMQ does).
pub fn disk_full_reason(status: &NodeStatus, store: &MessageStore) -> Option<String> {
    status.disk_full.clone().or_else(|| store.apply_space_wait()).or_else(|| {
        store
            .disk_full()
            .map(|ratio| format!("disk {:.0}% used, at or above diskSpaceWarningLevelRatio", ratio * 100.0))
    })
}

/// The pure rule of a round.
pub fn decide(disk_full: bool, role: Role, handed_over_this_episode: bool) -> Decision {
    match (disk_full, role, handed_over_this_episode) {
        (false, _, _) => Decision::Clear,
        (true, Role::Leader, false) => Decision::HandOver,
        (true, _, _) => Decision::Wait,
    }
}

/// Starts the guard of one replica.
pub fn spawn(
    replica: Arc<Replica>,
    store: Arc<MessageStore>,
    heartbeat_interval_ms: u64,
    cancel: CancellationToken,
) -> JoinHandle<()> {
    tokio::spawn(async move {
        let mut handed_over = false;
        // Said once per episode: a group of one asks every round.
        let mut told_alone = false;
        loop {
            tokio::select! {
                biased;
                _ = cancel.cancelled() => break,
                _ = tokio::time::sleep(Duration::from_millis(DISK_GUARD_INTERVAL_MS)) => {}
            }
            let node = replica.node();
            let status = node.status();
            let full = disk_full_reason(&status, &store);
            match decide(full.is_some(), status.leadership.role, handed_over) {
                Decision::Clear => (handed_over, told_alone) = (false, false),
                Decision::Wait => {}
                Decision::HandOver => {
                    let me = replica.node_id();
                    match choose_target(&status, me, None, target_ack_age_max_ms(heartbeat_interval_ms)) {
                        Ok(target) => {
                            warn!(to = target, why = ?full, "disk full: this leader hands leadership over");
                            match node.transfer_leader(target).await {
                                Ok(()) => handed_over = true,
                                Err(e) => warn!(to = target, error = %e, "leadership transfer failed"),
                            }
                        }
                        Err(e) if !told_alone => {
                            told_alone = true;
                            info!(error = %e, "disk full, and no other replica can lead yet");
                        }
                        Err(_) => {}
                    }
                }
            }
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_full_leader_hands_over_once_per_episode() {
        assert_eq!(decide(true, Role::Leader, false), Decision::HandOver);
        assert_eq!(decide(true, Role::Leader, true), Decision::Wait, "once per episode");
        assert_eq!(decide(true, Role::Follower, false), Decision::Wait, "only a leader hands over");
        assert_eq!(decide(false, Role::Leader, true), Decision::Clear, "space again: a new episode may hand over");
        assert_eq!(decide(false, Role::Follower, false), Decision::Clear);
    }
}
