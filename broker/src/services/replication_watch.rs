//! Replication watch: a leader says when a follower's replication stops making progress, and when
//! it resumes.
//!
//! ```text
//! every REPLICATION_WATCH_INTERVAL_MS: node status ─▶ ReplicationWatch::observe (pure)
//!   ─▶ WARN once per episode: a follower behind the leader's log whose matched index has not
//!      moved for REPLICATION_STALL_WARN_MS (with how long ago it last acknowledged anything)
//!   ─▶ INFO when it moves again, with how long it was stuck
//! ```
//!
//! Why: a follower that stops receiving entries is invisible to clients while the rest of the
//! group holds a quorum, and it is the replica a later failure needs. The last acknowledgement
//! tells the two cases apart: old, the follower is unreachable or down; recent, it answers
//! heartbeats but its log does not grow, which is a replication stream that is stuck.
//!
//! Invariants: the decision is pure ([`ReplicationWatch::observe`]); one warning per episode per
//! follower; a replica that does not lead forgets every episode (a new leader starts afresh).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use raftmq_common::limits::REPLICATION_STALL_WARN_MS;
use raftmq_common::limits::REPLICATION_WATCH_INTERVAL_MS;
use raftmq_raft::NodeStatus;
use raftmq_raft::Role;
use raftmq_raft::type_config::NodeId;
use tokio::task::JoinHandle;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tracing::info;
use tracing::warn;

use crate::services::replica::Replica;

/// How each event's log line starts (the jepsen harness reads node logs for them).
pub const REPLICATION_STALL_MARKER: &str = "replication to a follower makes no progress";
/// See [`REPLICATION_STALL_MARKER`].
pub const REPLICATION_RESUMED_MARKER: &str = "replication to a follower moves again";
/// See [`REPLICATION_STALL_MARKER`].
pub const REPLICATION_UNWATCHED_MARKER: &str = "replication to a follower no longer watched";

/// What a round found about one follower.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Event {
    /// Behind the leader, and its matched index has not moved for `stuck_ms`.
    Stalled {
        /// The follower.
        follower: NodeId,
        /// Its matched index (`None`: nothing matched yet).
        matched: Option<u64>,
        /// The leader's last log index.
        leader_last: u64,
        /// How long its matched index has not moved.
        stuck_ms: u64,
        /// How long ago it last acknowledged a heartbeat or an append (`None`: never).
        ack_age_ms: Option<u64>,
    },
    /// Moving again (or caught up) after a [`Event::Stalled`].
    Resumed {
        /// The follower.
        follower: NodeId,
        /// How long it was stuck.
        stuck_ms: u64,
    },
    /// No longer watched after a [`Event::Stalled`]: this replica stopped leading, or the follower
    /// left the group.
    Unwatched {
        /// The follower.
        follower: NodeId,
    },
}

#[derive(Debug, Clone, Copy)]
struct Progress {
    matched: Option<u64>,
    /// When `matched` last moved, or the follower was last caught up.
    since_ms: u64,
    warned: bool,
}

/// The watch's memory between rounds.
#[derive(Debug, Default)]
pub struct ReplicationWatch {
    followers: BTreeMap<NodeId, Progress>,
}

impl ReplicationWatch {
    /// One round at `now_ms` (any monotonic clock in ms): what changed since the last round.
    pub fn observe(&mut self, now_ms: u64, status: &NodeStatus) -> Vec<Event> {
        let leading = status.leadership.role == Role::Leader;
        let mut events = Vec::new();
        self.followers.retain(|&follower, p| {
            let keep = leading && status.followers.contains_key(&follower);
            if !keep && p.warned {
                events.push(Event::Unwatched { follower });
            }
            keep
        });
        if !leading {
            return events;
        }
        let leader_last = status.last_log_index;
        for (&follower, &matched) in &status.followers {
            let p = self.followers.entry(follower).or_insert(Progress { matched, since_ms: now_ms, warned: false });
            let caught_up = matched >= leader_last;
            if caught_up || matched != p.matched {
                if p.warned {
                    events.push(Event::Resumed { follower, stuck_ms: now_ms.saturating_sub(p.since_ms) });
                }
                *p = Progress { matched, since_ms: now_ms, warned: false };
                continue;
            }
            let stuck_ms = now_ms.saturating_sub(p.since_ms);
            if !p.warned && stuck_ms >= REPLICATION_STALL_WARN_MS {
                p.warned = true;
                events.push(Event::Stalled {
                    follower,
                    matched,
                    leader_last: leader_last.unwrap_or(0),
                    stuck_ms,
                    ack_age_ms: status.follower_ack_age_ms.get(&follower).copied(),
                });
            }
        }
        events
    }
}

/// Starts the watch of one replica.
pub fn spawn(replica: Arc<Replica>, cancel: CancellationToken) -> JoinHandle<()> {
    tokio::spawn(async move {
        let start = Instant::now();
        let mut watch = ReplicationWatch::default();
        loop {
            tokio::select! {
                biased;
                _ = cancel.cancelled() => break,
                _ = tokio::time::sleep(Duration::from_millis(REPLICATION_WATCH_INTERVAL_MS)) => {}
            }
            let status = replica.node().status();
            let now_ms = u64::try_from(start.elapsed().as_millis()).unwrap_or(u64::MAX);
            for event in watch.observe(now_ms, &status) {
                match event {
                    Event::Stalled { follower, matched, leader_last, stuck_ms, ack_age_ms } => warn!(
                        follower,
                        matched,
                        leader_last,
                        stuck_ms,
                        ack_age_ms,
                        "{REPLICATION_STALL_MARKER} (an old acknowledgement: unreachable; a recent one: its stream is stuck)"
                    ),
                    Event::Resumed { follower, stuck_ms } => {
                        info!(follower, stuck_ms, "{REPLICATION_RESUMED_MARKER}")
                    }
                    Event::Unwatched { follower } => {
                        info!(
                            follower,
                            "{REPLICATION_UNWATCHED_MARKER} (this replica stopped leading, or it left the group)"
                        )
                    }
                }
            }
        }
    })
}

#[cfg(test)]
mod tests {
    use raftmq_raft::Leadership;

    use super::*;

    fn status(role: Role, last: u64, followers: &[(NodeId, Option<u64>, u64)]) -> NodeStatus {
        NodeStatus {
            last_log_index: Some(last),
            followers: followers.iter().map(|&(id, m, _)| (id, m)).collect(),
            follower_ack_age_ms: followers.iter().map(|&(id, _, age)| (id, age)).collect(),
            ..NodeStatus::new(1, Leadership { term: 2, leader_id: Some(1), role })
        }
    }

    const WARN: u64 = REPLICATION_STALL_WARN_MS;

    #[test]
    fn a_stuck_follower_is_reported_once_and_its_recovery_once() {
        let mut w = ReplicationWatch::default();
        assert!(w.observe(0, &status(Role::Leader, 100, &[(2, Some(100), 10), (3, Some(40), 10)])).is_empty());
        // The leader moves on; follower 3 stays at 40 while it still acknowledges heartbeats.
        assert!(w.observe(WARN - 1, &status(Role::Leader, 150, &[(2, Some(150), 10), (3, Some(40), 10)])).is_empty());
        let events = w.observe(WARN, &status(Role::Leader, 160, &[(2, Some(160), 10), (3, Some(40), 20)]));
        assert_eq!(
            events,
            vec![Event::Stalled {
                follower: 3,
                matched: Some(40),
                leader_last: 160,
                stuck_ms: WARN,
                ack_age_ms: Some(20)
            }]
        );
        assert!(w.observe(3 * WARN, &status(Role::Leader, 170, &[(2, Some(170), 10), (3, Some(40), 20)])).is_empty());
        let events = w.observe(3 * WARN + 7, &status(Role::Leader, 170, &[(2, Some(170), 10), (3, Some(41), 20)]));
        assert_eq!(events, vec![Event::Resumed { follower: 3, stuck_ms: 3 * WARN + 7 }]);
        assert!(w.observe(4 * WARN, &status(Role::Leader, 170, &[(2, Some(170), 10), (3, Some(170), 20)])).is_empty());
    }

    #[test]
    fn progress_or_being_caught_up_is_never_a_stall() {
        let mut w = ReplicationWatch::default();
        for round in 0..10u64 {
            // Always behind, but moving every round.
            let s = status(Role::Leader, 1000 + round * 10, &[(2, Some(round * 10), 10)]);
            assert!(w.observe(round * WARN, &s).is_empty(), "round {round}");
        }
        let mut w = ReplicationWatch::default();
        for round in 0..10u64 {
            // Idle and caught up: nothing moves, nothing to say.
            assert!(w.observe(round * WARN, &status(Role::Leader, 5, &[(2, Some(5), 10)])).is_empty());
        }
    }

    #[test]
    fn a_follower_that_matched_nothing_yet_counts_and_a_non_leader_forgets() {
        let mut w = ReplicationWatch::default();
        assert!(w.observe(0, &status(Role::Leader, 10, &[(2, None, 5_000)])).is_empty());
        let events = w.observe(WARN, &status(Role::Leader, 10, &[(2, None, 5_000)]));
        assert!(matches!(events[..], [Event::Stalled { follower: 2, matched: None, .. }]), "{events:?}");
        // Leadership lost: the episode ends unresolved, and a new term starts afresh.
        assert_eq!(w.observe(WARN + 1, &status(Role::Follower, 10, &[])), vec![Event::Unwatched { follower: 2 }]);
        assert!(w.observe(WARN + 2, &status(Role::Follower, 10, &[])).is_empty(), "said once");
        assert!(w.observe(WARN + 3, &status(Role::Leader, 10, &[(2, None, 5_000)])).is_empty());
        // A follower removed from the group is forgotten; one never warned about goes silently.
        assert!(w.observe(2 * WARN + 3, &status(Role::Leader, 10, &[(2, None, 5_000), (3, Some(10), 1)])).len() == 1);
        assert_eq!(w.observe(2 * WARN + 4, &status(Role::Leader, 11, &[])), vec![Event::Unwatched { follower: 2 }]);
        assert!(w.followers.is_empty());
    }
}
