//! Group membership and leadership transfer, run by the group's Raft leader: add a node (learner,
//! catch-up, voter), remove a node (voter or learner, the leader itself included), hand leadership
//! to another voter, and every member's view of its group ([`group_status`]). The remoting admin
//! requests (`processors::admin`) and the HTTP admin API call these functions.
//!
//! ```text
//! add_node(id, remotingAddr, raftAddr)
//!   leader? ─ one change at a time (this node) ─ no joint / uncommitted membership (the group)
//!   NODE_IDS_USED{members, new_id} ─apply rejects─▶ IdReused        (ids are never given out twice)
//!   add_learner ─▶ wait: match index ≥ last index − LEARNER_CATCH_UP_LAG_MAX_ENTRIES (bounded)
//!   change_membership(voters ∪ {id})                                  (joint, then uniform)
//! remove_node(id)
//!   NODE_IDS_USED{members} ─▶ remove learner | change_membership(voters ∖ {id})
//!   tell the removed node (RAFT_NODE_REMOVED) ─▶ unregister it from every NameServer
//!   removed the leader (this node)? hand leadership to the most up-to-date voter, wait until it is
//!   ready, then revert to a learner (openraft alpha.37 never runs its own removed-leader step-down)
//! transfer_leader(to | any caught-up voter) ─▶ wait: `to` leads and passed its readiness gate
//! finish_joint (every JOINT_MEMBERSHIP_CHECK_INTERVAL_MS, on the ready leader, none running here)
//!   committed joint [old, new] ─▶ uniform(new) ─▶ each dropped voter: as remove_node's tail
//! ```
//!
//! Invariants:
//! - One change at a time: a second request on this node is refused while one runs, and any node
//!   refuses while the group's membership is joint or not committed (parallel changes could leave a
//!   joint config, openraft FAQ).
//! - A joint membership does not outlive its leader's change: a leader that stops between the two
//!   steps leaves it, and the next ready leader finishes it toward the new voters (never back).
//! - A node id is never reused (openraft FAQ: a reused id can split the group): every change first
//!   records the current members (the initial members are recorded nowhere else) and a new node's id
//!   in replicated state (entry tag 9); apply refuses an id already recorded, on every replica alike.
//! - A voter is added only once caught up, so the new quorum never waits for a replica copying the
//!   log; a leadership target must be a caught-up voter too, since openraft's leader stops
//!   proposing and heartbeating until the target wins.

use raftmq_common::remoting::RemotingClient;
use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;
use std::time::Instant;
use tokio::sync::Notify;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use raftmq_common::limits::JOINT_MEMBERSHIP_CHECK_INTERVAL_MS;
use raftmq_common::limits::LEADER_TRANSFER_MAX_MS;
use raftmq_common::limits::LEADER_TRANSFER_TARGET_ACK_AGE_MIN_MS;
use raftmq_common::limits::LEARNER_CATCH_UP_LAG_MAX_ENTRIES;
use raftmq_common::limits::LEARNER_CATCH_UP_MAX_MS;
use raftmq_common::limits::RAFT_NODE_IDS_MAX_COUNT;
use raftmq_common::limits::RPC_TIMEOUT_DEFAULT_MS;
use raftmq_common::protocol::RemotingCommand;
use raftmq_common::protocol::RequestCode;
use raftmq_common::protocol::ResponseCode;
use raftmq_common::protocol::body::JsonBody;
pub use raftmq_common::protocol::body::membership::FollowerProgress;
pub use raftmq_common::protocol::body::membership::GroupMember;
pub use raftmq_common::protocol::body::membership::GroupStatus;
pub use raftmq_common::protocol::body::membership::MembershipReport;
use raftmq_common::protocol::body::membership::RemoveNodeRequest;
use raftmq_raft::NodeStatus;
use raftmq_raft::Role;
use raftmq_raft::type_config::Node;
use thiserror::Error;
use tracing::info;
use tracing::warn;

use crate::config::broker_config::BrokerConfig;
use crate::services::namesrv_registration;
use crate::services::replica::Membership;
use crate::services::replica::Replica;
use crate::services::replica::WriteError;
use crate::state::entry::BrokerCommand;
use crate::state::store::MessageStore;

/// How often a wait re-reads the replica's status (catch-up, readiness of a new leader).
const STATUS_POLL_INTERVAL_MS: u64 = 20;

/// Why a membership operation was refused or did not complete.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum MembershipError {
    /// This node does not lead its group; retry at the leader.
    #[error("not the Raft leader of the group")]
    NotLeader {
        /// The leader's remoting address, when known.
        leader_addr: Option<String>,
    },
    /// Another change is running (on this node, or half done in the group).
    #[error("a membership change is in progress: {0}; retry when it is done")]
    InProgress(String),
    /// The id was used by this group before: give the new node a fresh id.
    #[error("raft node id {0} was used before in this group; give the new node an id never used before")]
    IdReused(u64),
    /// The node is already a voter.
    #[error("node {0} is already a voter of the group")]
    AlreadyVoter(u64),
    /// The node is not a member.
    #[error("node {0} is not a member of the group")]
    NotMember(u64),
    /// The request cannot be done as asked.
    #[error("{0}")]
    Invalid(String),
    /// The learner did not catch up in time; it stays a learner.
    #[error(
        "node {id} did not catch up within {waited_ms} ms (matched {match_index:?} of {last_index:?}); it stays a \
         learner: run addNode again with the same id and addresses to resume, or removeNode it"
    )]
    CatchUpTimeout {
        /// The learner.
        id: u64,
        /// How long we waited.
        waited_ms: u64,
        /// Its matched index when we gave up.
        match_index: Option<u64>,
        /// The leader's last index then.
        last_index: Option<u64>,
    },
    /// The new leader was not ready in time.
    #[error("leadership did not move to node {to} within {waited_ms} ms (leader now {leader:?})")]
    TransferTimeout {
        /// The target.
        to: u64,
        /// How long we waited.
        waited_ms: u64,
        /// The leader when we gave up.
        leader: Option<u64>,
    },
    /// Raft refused or failed the change.
    #[error("raft: {0}")]
    Raft(String),
    /// Recording the node ids failed.
    #[error(transparent)]
    Write(#[from] WriteError),
}

impl MembershipError {
    /// The remoting response for this refusal: SERVICE_NOT_AVAILABLE with the leader hint when this
    /// node does not lead, SYSTEM_BUSY while another change runs, else SYSTEM_ERROR with the reason.
    pub fn to_response(&self, broker_name: &str) -> RemotingCommand {
        match self {
            MembershipError::NotLeader { leader_addr } => {
                WriteError::NotLeader { leader_addr: leader_addr.clone() }.to_response(broker_name)
            }
            MembershipError::Write(e) => e.to_response(broker_name),
            MembershipError::InProgress(_) => {
                RemotingCommand::response(ResponseCode::SystemBusy, Some(format!("broker[{broker_name}] {self}")))
            }
            _ => RemotingCommand::response(ResponseCode::SystemError, Some(format!("broker[{broker_name}] {self}"))),
        }
    }
}

/// What membership changes use: the Raft group they change, the store that records used node ids,
/// the clients that reach the other replicas and the NameServers, and the config naming them.
/// Built once by the broker; the admin processor and the HTTP API call through it.
#[derive(Debug)]
pub struct GroupMembership {
    /// The config the broker booted with (addresses, Raft timings, NameServers).
    pub config: BrokerConfig,
    /// The Raft group.
    pub replica: Arc<Replica>,
    /// The applied state (used node ids).
    pub store: Arc<MessageStore>,
    /// Wakes NameServer registration.
    pub register_now: Arc<Notify>,
    /// Unsigned client (NameServer unregistration of a removed node).
    pub forwarder: RemotingClient,
    /// Signed client for this replica's calls to the group's other replicas.
    pub peer_client: RemotingClient,
    /// Signs NameServer calls with the cluster secret (none configured: unsigned).
    pub cluster_signer: Option<Arc<raftmq_common::protocol::cluster_signature::ClusterSigner>>,
}

fn not_leader(ctx: &GroupMembership) -> MembershipError {
    MembershipError::NotLeader { leader_addr: ctx.replica.leader_addr() }
}

fn elapsed_ms(started: Instant) -> u64 {
    u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX)
}

/// Checks that this node leads and takes writes, and that the group has no change under way.
fn check_leader_idle(ctx: &GroupMembership) -> Result<(), MembershipError> {
    match ctx.replica.check_writable() {
        Ok(_) => {}
        Err(WriteError::NotLeader { leader_addr }) => return Err(MembershipError::NotLeader { leader_addr }),
        Err(e) => return Err(MembershipError::Write(e)),
    }
    if let Some(why) = ctx.replica.node().membership_change_pending() {
        return Err(MembershipError::InProgress(why));
    }
    Ok(())
}

/// Maps a failed raft call: a lost leadership becomes the leader hint.
fn raft_error(ctx: &GroupMembership, e: raftmq_raft::NodeError) -> MembershipError {
    if ctx.replica.leadership().role != Role::Leader {
        return not_leader(ctx);
    }
    MembershipError::Raft(e.to_string())
}

fn is_host_port(addr: &str) -> bool {
    addr.rsplit_once(':').is_some_and(|(host, port)| !host.is_empty() && port.parse::<u16>().is_ok_and(|p| p != 0))
}

/// Records `members` (and `new_id`) as used; `IdReused` when apply refuses `new_id`.
async fn record_ids(ctx: &GroupMembership, status: &NodeStatus, new_id: Option<u64>) -> Result<(), MembershipError> {
    let members: Vec<u64> = status.voters.union(&status.learners).copied().collect();
    if members.len() >= RAFT_NODE_IDS_MAX_COUNT {
        return Err(MembershipError::Invalid(format!("the group has {} members already", members.len())));
    }
    match ctx.replica.propose(&BrokerCommand::NodeIdsUsed { members, new_id }).await {
        Ok(()) => Ok(()),
        Err(WriteError::Rejected(why)) => match new_id {
            Some(id) if ctx.store.metadata().used_node_ids.contains(&id) => Err(MembershipError::IdReused(id)),
            _ => Err(MembershipError::Write(WriteError::Rejected(why))),
        },
        Err(WriteError::NotLeader { leader_addr }) => Err(MembershipError::NotLeader { leader_addr }),
        Err(e) => Err(MembershipError::Write(e)),
    }
}

/// Adds node `id` to the group: recorded as used, added as a learner, promoted to voter once its
/// log is within [`LEARNER_CATCH_UP_LAG_MAX_ENTRIES`] of the leader's (waiting at most
/// [`LEARNER_CATCH_UP_MAX_MS`]). Run again with the same arguments, it resumes a learner left by
/// a timed-out call.
pub async fn add_node(
    ctx: &GroupMembership,
    id: u64,
    remoting_addr: String,
    raft_addr: String,
) -> Result<MembershipReport, MembershipError> {
    let started = Instant::now();
    if !is_host_port(&remoting_addr) || !is_host_port(&raft_addr) {
        return Err(MembershipError::Invalid(format!(
            "remotingAddr {remoting_addr:?} and raftAddr {raft_addr:?} must both be host:port"
        )));
    }
    check_leader_idle(ctx)?;
    let _guard = ctx.replica.begin_membership_change(&format!("addNode {id}")).map_err(MembershipError::InProgress)?;
    let node = ctx.replica.node();
    let status = node.status();
    let members = node.members();
    if status.voters.contains(&id) {
        // A retry of an addition that was done answers the group as it is; other addresses are
        // another node, refused.
        if members.get(&id).is_some_and(|n| n.data == remoting_addr && n.raft_addr == raft_addr) {
            info!(id, "addNode of a node already a voter at these addresses");
            return Ok(report(ctx, "addNode", Some(id), started));
        }
        return Err(MembershipError::AlreadyVoter(id));
    }
    if let Some(existing) = members.get(&id) {
        if existing.data != remoting_addr || existing.raft_addr != raft_addr {
            return Err(MembershipError::Invalid(format!(
                "node {id} is already a learner at remotingAddr {} raftAddr {}",
                existing.data, existing.raft_addr
            )));
        }
        info!(id, "resuming the addition of a learner");
    } else {
        if let Some((other, _)) = members.iter().find(|(_, n)| n.data == remoting_addr || n.raft_addr == raft_addr) {
            return Err(MembershipError::Invalid(format!("node {other} already uses one of these addresses")));
        }
        let (used, reused) = {
            let meta = ctx.store.metadata();
            (meta.used_node_ids.len(), meta.used_node_ids.contains(&id))
        };
        if reused {
            return Err(MembershipError::IdReused(id));
        }
        // Ids are recorded for good (a reused id can split the group) and the snapshot holds at
        // most this many; apply refuses past it as well.
        if used >= RAFT_NODE_IDS_MAX_COUNT {
            return Err(MembershipError::Invalid(format!(
                "the group has used {used} raft node ids, the most it records ({RAFT_NODE_IDS_MAX_COUNT})"
            )));
        }
        record_ids(ctx, &status, Some(id)).await?;
        info!(id, %remoting_addr, %raft_addr, "adding a learner");
        node.add_learner(id, Node { raft_addr, data: remoting_addr }).await.map_err(|e| raft_error(ctx, e))?;
    }
    wait_caught_up(ctx, id).await?;
    let mut voters = node.status().voters;
    voters.insert(id);
    info!(id, ?voters, "promoting the learner to voter");
    node.change_membership(voters).await.map_err(|e| raft_error(ctx, e))?;
    Ok(report(ctx, "addNode", Some(id), started))
}

/// Waits until learner `id` matches the leader's log within the allowed lag.
async fn wait_caught_up(ctx: &GroupMembership, id: u64) -> Result<(), MembershipError> {
    let started = Instant::now();
    let deadline = started + Duration::from_millis(LEARNER_CATCH_UP_MAX_MS);
    loop {
        let status = ctx.replica.node().status();
        if status.leadership.role != Role::Leader {
            return Err(not_leader(ctx));
        }
        let matched = status.followers.get(&id).copied().flatten();
        if let (Some(m), Some(last)) = (matched, status.last_log_index)
            && last.saturating_sub(m) <= LEARNER_CATCH_UP_LAG_MAX_ENTRIES
        {
            info!(id, matched = m, last, waited_ms = elapsed_ms(started), "learner caught up");
            return Ok(());
        }
        if Instant::now() >= deadline {
            return Err(MembershipError::CatchUpTimeout {
                id,
                waited_ms: elapsed_ms(started),
                match_index: matched,
                last_index: status.last_log_index,
            });
        }
        tokio::time::sleep(Duration::from_millis(STATUS_POLL_INTERVAL_MS)).await;
    }
}

/// Removes node `id` (voter or learner) from the group. Removing this node (the leader) works:
/// openraft does not step a removed leader down, so once the change commits this node hands
/// leadership to the most up-to-date remaining voter, waits (at most [`LEADER_TRANSFER_MAX_MS`])
/// until it is a ready leader, and only then stops registering. The removed node is told, and
/// unregistered from every NameServer; it should then be shut down and its store wiped.
///
/// Callers that may be cancelled (a request whose client goes away) run this detached
/// ([`run_detached`]): stopping between the membership change and the hand-over would leave a
/// removed leader leading.
pub async fn remove_node(ctx: &GroupMembership, id: u64) -> Result<MembershipReport, MembershipError> {
    let started = Instant::now();
    check_leader_idle(ctx)?;
    let _guard =
        ctx.replica.begin_membership_change(&format!("removeNode {id}")).map_err(MembershipError::InProgress)?;
    let node = ctx.replica.node();
    let status = node.status();
    let is_voter = status.voters.contains(&id);
    if !is_voter && !status.learners.contains(&id) {
        // A retry of a removal that was done (by this call's first attempt, or by the group
        // finishing a change its leader left joint) answers the group as it is.
        if ctx.store.metadata().used_node_ids.contains(&id) {
            info!(id, "removeNode of a node already removed");
            return Ok(report(ctx, "removeNode", Some(id), started));
        }
        return Err(MembershipError::NotMember(id));
    }
    if is_voter && status.voters.len() == 1 {
        return Err(MembershipError::Invalid(format!("node {id} is the only voter; a group needs one")));
    }
    let removed_addr = ctx.replica.member_addr(id);
    record_ids(ctx, &status, None).await?;
    info!(id, is_voter, "removing a node");
    if is_voter {
        let voters: BTreeSet<u64> = status.voters.iter().copied().filter(|v| *v != id).collect();
        node.change_membership(voters).await.map_err(|e| raft_error(ctx, e))?;
    } else {
        node.remove_learners(BTreeSet::from([id])).await.map_err(|e| raft_error(ctx, e))?;
    }
    let report = report(ctx, "removeNode", Some(id), started);
    Ok(conclude_removal(ctx, id, removed_addr, report, started).await)
}

/// What follows a committed removal of node `id` (at `removed_addr`): the removed node is told;
/// if it is this leader, leadership is handed over first (writes keep working here until the
/// successor is ready; only then does this node stop registering, as brokerId 0, which would
/// otherwise leave the group without a route); then it is unregistered from every NameServer.
async fn conclude_removal(
    ctx: &GroupMembership,
    id: u64,
    removed_addr: Option<String>,
    mut report: MembershipReport,
    started: Instant,
) -> MembershipReport {
    let me = ctx.replica.node_id();
    if id != me
        && let Some(addr) = &removed_addr
    {
        tell_removed(ctx, addr, id).await;
    }
    if id == me {
        let handed_over = hand_over_removed_leadership(ctx).await;
        ctx.replica.mark_removed();
        ctx.register_now.notify_one();
        // The new leader never talks to this node again, so only its own answer says it won.
        match handed_over {
            Some(view) => {
                report.leader = Some(view.node_id);
                report.leader_addr = Some(view.addr);
                report.term = view.term;
            }
            None => {
                warn!(id, "removed this leader; no other node is a ready leader yet (they will elect one)");
                report.leader = None;
                report.leader_addr = None;
            }
        }
    }
    if let Some(addr) = &removed_addr {
        let broker_id = i64::try_from(id).unwrap_or(i64::MAX - 1).saturating_add(1);
        let signer = ctx.cluster_signer.as_deref();
        namesrv_registration::unregister_member(&ctx.config, &ctx.forwarder, signer, addr, broker_id).await;
    }
    report.elapsed_ms = elapsed_ms(started);
    report
}

/// Finishes a voter change left joint: its leader lost leadership or stopped between openraft's
/// two steps, or the second step failed, and openraft leaves it to the application. While a membership is joint every
/// change is refused, so without this the group could never change again. A ready leader with no
/// change of its own running appends the uniform membership of the joint's new voters, then does
/// what the change's caller would have done for each voter it drops ([`conclude_removal`]).
/// `Ok(None)`: nothing to finish here.
pub async fn finish_joint(ctx: &GroupMembership) -> Result<Option<MembershipReport>, MembershipError> {
    let started = Instant::now();
    let node = ctx.replica.node();
    if ctx.replica.ready_term().is_none() || node.committed_joint().is_none() {
        return Ok(None);
    }
    // A change running here is still on its way to its own second step.
    let Ok(_guard) = ctx.replica.begin_membership_change("finish a joint membership") else {
        return Ok(None);
    };
    // Read again under the slot: a change that held it may have finished this joint meanwhile.
    let Some(joint) = node.committed_joint() else {
        return Ok(None);
    };
    let dropped: Vec<(u64, Option<String>)> =
        joint.old_voters.difference(&joint.new_voters).map(|id| (*id, ctx.replica.member_addr(*id))).collect();
    warn!(
        log_id = %joint.log_id,
        from = ?joint.old_voters,
        to = ?joint.new_voters,
        "a voter change was left joint (its leader stopped or lost leadership half-way): finishing it"
    );
    node.finish_joint(&joint).await.map_err(|e| raft_error(ctx, e))?;
    let mut report = report(ctx, "finishJoint", None, started);
    // This node last: handing leadership over ends what it may do as leader.
    let me = ctx.replica.node_id();
    let (others, this): (Vec<_>, Vec<_>) = dropped.into_iter().partition(|(id, _)| *id != me);
    for (id, addr) in others.into_iter().chain(this) {
        report = conclude_removal(ctx, id, addr, report, started).await;
    }
    info!(voters = ?report.voters, leader = ?report.leader, "the joint membership is finished");
    Ok(Some(report))
}

/// Runs [`finish_joint`] every [`JOINT_MEMBERSHIP_CHECK_INTERVAL_MS`] until `cancel`. Detached per
/// attempt, like an admin call: a shutdown must not stop a removal between its change and the
/// hand-over, and does not wait for one either (none starts once `cancel` fired).
pub fn spawn_joint_finisher(ctx: Arc<GroupMembership>, cancel: CancellationToken) -> JoinHandle<()> {
    tokio::spawn(async move {
        let mut interval = tokio::time::interval(Duration::from_millis(JOINT_MEMBERSHIP_CHECK_INTERVAL_MS));
        interval.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut last_error = None;
        loop {
            tokio::select! {
                biased;
                _ = cancel.cancelled() => break,
                _ = interval.tick() => {}
            }
            if ctx.replica.node().committed_joint().is_none() {
                continue;
            }
            let finishing =
                run_detached(&ctx, |ctx| async move { finish_joint(&ctx).await.map(Option::unwrap_or_default) });
            let finished = tokio::select! {
                biased;
                _ = cancel.cancelled() => break,
                r = finishing => r,
            };
            match finished {
                Ok(_) => last_error = None,
                // Once per distinct failure: a leader that keeps failing would log every tick.
                Err(e) if last_error.as_ref() != Some(&e) => {
                    warn!(error = %e, "cannot finish the joint membership yet");
                    last_error = Some(e);
                }
                Err(_) => {}
            }
        }
    })
}

/// Runs a membership operation on its own task, so that cancelling the caller (an HTTP or remoting
/// request whose client went away, or hit its deadline) cannot stop it half-way; the caller still
/// gets the result when it waits.
pub async fn run_detached<F, Fut>(
    ctx: &std::sync::Arc<GroupMembership>,
    op: F,
) -> Result<MembershipReport, MembershipError>
where
    F: FnOnce(std::sync::Arc<GroupMembership>) -> Fut + Send + 'static,
    Fut: std::future::Future<Output = Result<MembershipReport, MembershipError>> + Send + 'static,
{
    let ctx = std::sync::Arc::clone(ctx);
    tokio::spawn(async move { op(ctx).await })
        .await
        .unwrap_or_else(|e| Err(MembershipError::Raft(format!("membership task failed: {e}"))))
}

/// After this leader removed itself: hands leadership to the most up-to-date remaining voter,
/// waits (bounded) until it is a ready leader, then reverts this node to a learner. Without a
/// caught-up voter, or if the transfer stalls, the revert alone lets the others elect a leader once
/// their election timeout passes. The new leader's view, if it took over in time.
async fn hand_over_removed_leadership(ctx: &GroupMembership) -> Option<GroupStatus> {
    let node = ctx.replica.node();
    let me = ctx.replica.node_id();
    let deadline = Instant::now() + Duration::from_millis(LEADER_TRANSFER_MAX_MS);
    let target = choose_target(&node.status(), me, None, live_ack_age_max_ms(ctx)).ok();
    let mut view = None;
    if let Some(target) = target {
        info!(from = me, to = target, "the removed leader hands over leadership");
        match node.transfer_leader(target).await {
            // Polled at the target: a removed node may never hear from the new leader itself.
            Ok(()) => view = wait_ready_leader(ctx, target, deadline).await,
            Err(e) => warn!(to = target, error = %e, "leadership transfer failed"),
        }
    }
    if let Err(e) = node.step_down_if_removed().await {
        warn!(error = %e, "the removed leader could not step down");
    }
    view
}

/// RAFT_NODE_REMOVED to the removed node (best effort: a node that is down learns nothing, and
/// the NameServers are told anyway).
async fn tell_removed(ctx: &GroupMembership, addr: &str, id: u64) {
    let term = ctx.replica.leadership().term;
    let body = match (RemoveNodeRequest { id, term }).encode() {
        Ok(b) => b,
        Err(e) => {
            warn!(id, error = %e, "cannot encode RAFT_NODE_REMOVED");
            return;
        }
    };
    let request = RemotingCommand::request(RequestCode::RaftNodeRemoved).with_body(body);
    let timeout = Duration::from_millis(RPC_TIMEOUT_DEFAULT_MS);
    match ctx.peer_client.invoke(addr, request, timeout).await {
        Ok(r) if r.response_code() == ResponseCode::Success => info!(id, addr, "told the removed node"),
        Ok(r) => warn!(id, addr, code = r.code, remark = ?r.remark, "the removed node refused RAFT_NODE_REMOVED"),
        Err(e) => warn!(id, addr, error = %e, "cannot tell the removed node"),
    }
}

/// Hands leadership to `to`, or (None) to the most up-to-date caught-up voter, and waits (at most
/// [`LEADER_TRANSFER_MAX_MS`]) until it leads and has passed its readiness gate.
pub async fn transfer_leader(ctx: &GroupMembership, to: Option<u64>) -> Result<MembershipReport, MembershipError> {
    let started = Instant::now();
    check_leader_idle(ctx)?;
    let me = ctx.replica.node_id();
    if to == Some(me) {
        return Ok(report(ctx, "transferLeader", Some(me), started));
    }
    let _guard = ctx
        .replica
        .begin_membership_change(&format!("transferLeader {}", to.map_or_else(|| "any".to_owned(), |t| t.to_string())))
        .map_err(MembershipError::InProgress)?;
    let status = ctx.replica.node().status();
    let target = choose_target(&status, me, to, live_ack_age_max_ms(ctx))?;
    info!(from = me, to = target, "transferring leadership");
    ctx.replica.node().transfer_leader(target).await.map_err(|e| raft_error(ctx, e))?;
    let deadline = started + Duration::from_millis(LEADER_TRANSFER_MAX_MS);
    if !wait_moved(ctx, target, deadline).await || wait_ready_leader(ctx, target, deadline).await.is_none() {
        return Err(MembershipError::TransferTimeout {
            to: target,
            waited_ms: elapsed_ms(started),
            leader: ctx.replica.leadership().leader_id,
        });
    }
    Ok(report(ctx, "transferLeader", Some(target), started))
}

/// How recently a transfer target must have acknowledged the leader: a few heartbeats. A dead
/// voter of an idle group still shows a matched index equal to the log's end; handing leadership to
/// it would leave the group without a leader until an election timeout.
fn live_ack_age_max_ms(ctx: &GroupMembership) -> u64 {
    target_ack_age_max_ms(ctx.config.raft_heartbeat_interval_ms)
}

/// [`live_ack_age_max_ms`] for a heartbeat interval.
pub fn target_ack_age_max_ms(heartbeat_interval_ms: u64) -> u64 {
    heartbeat_interval_ms.saturating_mul(4).max(LEADER_TRANSFER_TARGET_ACK_AGE_MIN_MS)
}

/// Waits until this node sees `target` lead. The target campaigns as soon as it hears of the
/// transfer; if it did not (it stopped a moment ago, is cut off, or is still catching up), the
/// group's ordinary election, 1–2 election timeouts after the last heartbeat, settles it instead:
/// three election timeouts after the transfer the outcome is known, and a miss is reported then
/// rather than at the deadline.
async fn wait_moved(ctx: &GroupMembership, target: u64, deadline: Instant) -> bool {
    let election_wait = Duration::from_millis(ctx.config.raft_election_timeout_max_ms.saturating_mul(3));
    let moved_by = deadline.min(Instant::now() + election_wait);
    let mut leadership = ctx.replica.leadership_watch();
    let moved = leadership.wait_for(|l| l.leader_id == Some(target) && l.role != Role::Leader);
    // A bool, not the watch's borrow: that must not live across an await.
    tokio::time::timeout_at(moved_by.into(), moved).await.is_ok_and(|r| r.is_ok())
}

/// The voter to hand leadership to: `to` if it is a caught-up, live voter, else the caught-up live
/// voter with the highest matched index. Live: acknowledged within `ack_age_max_ms`.
pub fn choose_target(
    status: &NodeStatus,
    me: u64,
    to: Option<u64>,
    ack_age_max_ms: u64,
) -> Result<u64, MembershipError> {
    let last = status.last_log_index.unwrap_or(0);
    let live = |id: &u64| status.follower_ack_age_ms.get(id).is_some_and(|age| *age <= ack_age_max_ms);
    let caught_up = |id: &u64| {
        status
            .followers
            .get(id)
            .copied()
            .flatten()
            .filter(|m| last.saturating_sub(*m) <= LEARNER_CATCH_UP_LAG_MAX_ENTRIES)
            .filter(|_| live(id))
    };
    match to {
        Some(id) if !status.voters.contains(&id) => {
            Err(MembershipError::Invalid(format!("node {id} is not a voter; only a voter can lead")))
        }
        Some(id) => caught_up(&id).map(|_| id).ok_or_else(|| {
            MembershipError::Invalid(format!(
                "node {id} is not caught up or not answering (matched {:?} of {last}, last ack {:?} ms ago); \
                 try again later",
                status.followers.get(&id).copied().flatten(),
                status.follower_ack_age_ms.get(&id)
            ))
        }),
        None => status
            .voters
            .iter()
            .filter(|v| **v != me)
            .filter_map(|v| caught_up(v).map(|m| (m, *v)))
            .max()
            .map(|(_, id)| id)
            .ok_or_else(|| MembershipError::Invalid("no other voter is caught up and answering".into())),
    }
}

/// Polls node `id`'s RAFT_GROUP_STATUS until it says it leads and is ready (its view), or the deadline.
async fn wait_ready_leader(ctx: &GroupMembership, id: u64, deadline: Instant) -> Option<GroupStatus> {
    let addr = ctx.replica.member_addr(id)?;
    loop {
        let request = RemotingCommand::request(RequestCode::RaftGroupStatus);
        let timeout =
            Duration::from_millis(RPC_TIMEOUT_DEFAULT_MS).min(deadline.saturating_duration_since(Instant::now()));
        if let Ok(r) = ctx.peer_client.invoke(&addr, request, timeout).await
            && r.response_code() == ResponseCode::Success
            && let Ok(s) = GroupStatus::decode(&r.body)
            && s.node_id == id
            && s.ready
        {
            return Some(s);
        }
        if Instant::now() >= deadline {
            return None;
        }
        tokio::time::sleep(Duration::from_millis(STATUS_POLL_INTERVAL_MS)).await;
    }
}

fn report(ctx: &GroupMembership, operation: &str, node_id: Option<u64>, started: Instant) -> MembershipReport {
    let status = ctx.replica.node().status();
    MembershipReport {
        elapsed_ms: elapsed_ms(started),
        learners: status.learners.iter().copied().collect(),
        leader: status.leadership.leader_id,
        leader_addr: ctx.replica.leader_addr(),
        node_id,
        operation: operation.to_owned(),
        term: status.leadership.term,
        voters: status.voters.iter().copied().collect(),
    }
}

/// mqadmin-style name of a role.
pub fn role_name(role: Role) -> &'static str {
    match role {
        Role::Leader => "LEADER",
        Role::Follower => "FOLLOWER",
        Role::Candidate => "CANDIDATE",
        Role::Learner => "LEARNER",
        Role::Stopped => "STOPPED",
    }
}

/// This node's view of its group.
pub fn group_status(ctx: &GroupMembership) -> GroupStatus {
    let node = ctx.replica.node();
    let status = node.status();
    let members = node.members();
    let member = |id: &u64| GroupMember {
        id: *id,
        raft_addr: members.get(id).map(|n| n.raft_addr.clone()).unwrap_or_default(),
        remoting_addr: members.get(id).map(|n| n.data.clone()).unwrap_or_default(),
    };
    let last = status.last_log_index;
    let followers = status
        .followers
        .iter()
        .map(|(id, matched)| FollowerProgress {
            id: *id,
            lag: matched.and_then(|m| last.map(|l| l.saturating_sub(m))),
            match_index: *matched,
        })
        .collect();
    let pending = node.membership_change_pending();
    GroupStatus {
        addr: ctx.config.broker_addr(),
        applied_index: status.applied.map(|l| l.index),
        broker_name: ctx.config.broker_name.clone(),
        committed_index: status.committed.map(|l| l.index),
        damaged: status.damaged.clone(),
        followers,
        joint: pending.as_deref().is_some_and(|p| p.contains("joint")),
        last_log_index: last,
        leader: status.leadership.leader_id,
        leader_addr: ctx.replica.leader_addr(),
        learners: status.learners.iter().map(member).collect(),
        membership_change: ctx.replica.membership_change().or(pending),
        node_id: status.id,
        poisoned: status.poisoned.clone(),
        ready: ctx.replica.ready_term().is_some(),
        removed: ctx.replica.membership() == Membership::Removed,
        role: role_name(status.leadership.role).to_owned(),
        term: status.leadership.term,
        used_node_ids: ctx.store.metadata().used_node_ids.iter().copied().collect(),
        voters: status.voters.iter().map(member).collect(),
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use raftmq_raft::Leadership;

    use super::*;

    fn status(voters: &[u64], followers: &[(u64, Option<u64>)], last: u64) -> NodeStatus {
        NodeStatus {
            last_log_index: Some(last),
            voters: voters.iter().copied().collect(),
            followers: followers.iter().copied().collect::<BTreeMap<_, _>>(),
            follower_ack_age_ms: followers.iter().map(|(id, _)| (*id, 10)).collect(),
            ..NodeStatus::new(1, Leadership { term: 3, leader_id: Some(1), role: Role::Leader })
        }
    }

    #[test]
    fn transfer_targets_are_caught_up_voters() {
        const AGE: u64 = 1_000;
        let s = status(&[1, 2, 3], &[(2, Some(1_000)), (3, Some(990)), (4, Some(1_000))], 1_000);
        assert_eq!(choose_target(&s, 1, None, AGE).unwrap(), 2, "the most up-to-date voter");
        assert_eq!(choose_target(&s, 1, Some(3), AGE).unwrap(), 3);
        assert!(matches!(choose_target(&s, 1, Some(4), AGE), Err(MembershipError::Invalid(_))), "4 is a learner");
        let lagging = status(&[1, 2], &[(2, Some(10))], 10 + LEARNER_CATCH_UP_LAG_MAX_ENTRIES + 1);
        assert!(choose_target(&lagging, 1, Some(2), AGE).is_err());
        assert!(choose_target(&lagging, 1, None, AGE).is_err());
        let unmatched = status(&[1, 2], &[(2, None)], 0);
        assert!(choose_target(&unmatched, 1, None, AGE).is_err());
        // Node 3 is as far as node 2 but stopped answering (an idle group's dead voter).
        let mut dead = status(&[1, 2, 3], &[(2, Some(1_000)), (3, Some(1_000))], 1_000);
        dead.follower_ack_age_ms.insert(3, 5_000);
        assert_eq!(choose_target(&dead, 1, None, AGE).unwrap(), 2, "3 wins ties by id, but is gone");
        assert!(choose_target(&dead, 1, Some(3), AGE).is_err());
        dead.follower_ack_age_ms.remove(&2);
        assert!(choose_target(&dead, 1, None, AGE).is_err(), "never acknowledged: not live");
    }

    #[test]
    fn refusals_carry_codes_and_the_leader_hint() {
        let r = MembershipError::NotLeader { leader_addr: Some("10.0.0.2:10911".into()) }.to_response("broker-a");
        assert_eq!(r.response_code(), ResponseCode::ServiceNotAvailable);
        let hint = raftmq_common::protocol::leader_hint::parse_leader_hint(r.remark.as_deref().unwrap_or_default());
        assert_eq!(hint, Some("10.0.0.2:10911"));
        let r = MembershipError::InProgress("addNode 4".into()).to_response("broker-a");
        assert_eq!(r.response_code(), ResponseCode::SystemBusy);
        let r = MembershipError::IdReused(2).to_response("broker-a");
        assert_eq!(r.response_code(), ResponseCode::SystemError);
        assert!(r.remark.unwrap().contains("id 2 was used before"));
        assert!(is_host_port("10.0.0.1:10911") && !is_host_port("10.0.0.1") && !is_host_port(":1"));
    }
}
