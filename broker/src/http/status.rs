//! `GET /api/v1/status`: this replica as Raft and the broker see it — node id, group (brokerName),
//! cluster, term, leader, role, commit/applied/last log index, each follower's match index and lag
//! (on the leader only: openraft tracks replication there), storage faults (damage, poison, a
//! failed apply) with their reasons, membership, readiness.

use std::sync::atomic::Ordering;

use axum::Json;
use axum::extract::State;
use axum::routing::get;
use raftmq_raft::Role;
use serde::Serialize;

use crate::http::Routes;
use crate::http::Shared;
use crate::http::probes::Readiness;
use crate::http::probes::StorageFault;
use crate::http::probes::storage_faults;

/// Routes of this module.
pub fn routes() -> Routes {
    Routes::new().route("/api/v1/status", get(status))
}

/// One follower's replication, as the leader tracks it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct FollowerView {
    /// Raft id.
    pub id: u64,
    /// Highest log index known replicated there (`null`: nothing matched yet).
    pub match_index: Option<u64>,
    /// Entries the leader has that it has not matched.
    pub lag: u64,
}

/// Voters and learners.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct MembershipView {
    /// Voting members.
    pub voters: Vec<u64>,
    /// Non-voting members.
    pub learners: Vec<u64>,
}

/// The status document.
#[derive(Debug, Clone, Serialize)]
pub struct StatusView {
    /// Raft id of this replica.
    pub node_id: u64,
    /// `brokerName` (the Raft group).
    pub group: String,
    /// `brokerClusterName`.
    pub cluster: String,
    /// Remoting address (`brokerIP1:listenPort`).
    pub broker_addr: String,
    /// Current term.
    pub term: u64,
    /// Known leader.
    pub leader_id: Option<u64>,
    /// Leader's remoting address.
    pub leader_addr: Option<String>,
    /// `leader`, `follower`, `candidate`, `learner` or `stopped`.
    pub role: &'static str,
    /// Committed index as known here.
    pub commit_index: Option<u64>,
    /// Last applied index.
    pub applied_index: Option<u64>,
    /// Last log index.
    pub last_log_index: Option<u64>,
    /// Last purged index.
    pub purged_index: Option<u64>,
    /// On the leader: each follower's replication.
    pub followers: Vec<FollowerView>,
    /// Whether the store is damaged (refuses to vote or lead).
    pub damaged: bool,
    /// Why, when it is.
    pub damage_reason: Option<String>,
    /// Why the store is poisoned (a failed append or fsync, e.g. a full disk), when it is.
    pub poison_reason: Option<String>,
    /// Why applying a committed entry to local storage failed, when it did (Raft stopped here).
    pub apply_failure: Option<String>,
    /// Every storage fault now, with its reason (empty when healthy).
    pub storage_faults: Vec<StorageFault>,
    /// What a replica that started from an empty store (new, or a wiped disk) still may not do
    /// in elections until it holds the group's entries, when anything.
    pub vote_guard: Option<String>,
    /// Index of the newest durable checkpoint of the applied state.
    pub checkpoint_index: Option<u64>,
    /// Index the applied state started from at this start (a checkpoint or the snapshot); absent
    /// when every retained entry was applied again.
    pub applied_at_start_index: Option<u64>,
    /// Voters and learners.
    pub membership: MembershipView,
    /// Whether this leader has passed the readiness gate and takes writes.
    pub writable: bool,
    /// Shutdown has begun.
    pub draining: bool,
    /// `/readyz`'s checks.
    pub readiness: Readiness,
}

/// The role's name in the status document.
pub fn role_name(role: Role) -> &'static str {
    match role {
        Role::Leader => "leader",
        Role::Follower => "follower",
        Role::Candidate => "candidate",
        Role::Learner => "learner",
        Role::Stopped => "stopped",
    }
}

async fn status(State(ctx): State<Shared>) -> Json<StatusView> {
    let s = ctx.replica.node().status();
    let last = s.last_log_index.unwrap_or(0);
    let followers = s
        .followers
        .iter()
        .map(|(id, matched)| FollowerView {
            id: *id,
            match_index: *matched,
            lag: last.saturating_sub(matched.unwrap_or(0)),
        })
        .collect();
    Json(StatusView {
        node_id: s.id,
        group: ctx.config.broker_name.clone(),
        cluster: ctx.config.broker_cluster_name.clone(),
        broker_addr: ctx.config.broker_addr(),
        term: s.leadership.term,
        leader_id: s.leadership.leader_id,
        leader_addr: ctx.replica.leader_addr(),
        role: role_name(s.leadership.role),
        commit_index: s.committed.map(|c| c.index),
        applied_index: s.applied.map(|a| a.index),
        last_log_index: s.last_log_index,
        purged_index: s.purged.map(|p| p.index),
        followers,
        damaged: s.damaged.is_some(),
        damage_reason: s.damaged.clone(),
        poison_reason: s.poisoned.clone(),
        apply_failure: ctx.store.failure(),
        storage_faults: storage_faults(&s, &ctx.store),
        vote_guard: s.vote_guard.clone(),
        checkpoint_index: s.checkpoint.map(|c| c.index),
        applied_at_start_index: s.applied_at_start.map(|c| c.index),
        membership: MembershipView {
            voters: s.voters.iter().copied().collect(),
            learners: s.learners.iter().copied().collect(),
        },
        writable: ctx.replica.ready_term().is_some(),
        draining: ctx.draining.load(Ordering::Acquire),
        readiness: Readiness::of(&ctx.replica, &ctx.store, &ctx.draining),
    })
}
