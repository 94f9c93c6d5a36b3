//! The `membership` nemesis: replace one member of a group through the broker's membership admin
//! calls (docs/broker.md#group-membership), and bring the group back to its replica count.
//!
//! ```text
//! replace (remove first)  leader view ─▶ removeNode(victim) ─▶ stop victim ─▶ reconcile
//! replace (add first)     leader view ─▶ start spare ─▶ addNode(spare) ─▶ removeNode(victim) ─▶ stop ─▶ reconcile
//! reconcile (heal, final) until the ready leader reports `replicas` voters, no learner, no change:
//!     a learner          ─▶ addNode again with its id and addresses (the broker resumes it)
//!     too few voters     ─▶ addNode(a started spare not yet a member, or the next spare)
//!     too many voters    ─▶ removeNode(the newest follower)
//!   then: members = the voters; stop every other process of the group; record `members …`
//! ```
//!
//! A spare joins with a fresh id counting up from `replicas + 1` and `raftPeers` = the members plus
//! itself ([`crate::cluster::Layout::joining_broker_toml`]); a spare whose id the group refuses as
//! used (an earlier attempt recorded it, then failed) is stopped and the next spare is tried. Every
//! change is recorded as its own nemesis op (`member remove broker-a n12 id 2`: `ok` when the call
//! succeeded, `info` when its outcome is unknown), and the membership after it as a `members` record
//! ([`crate::history::members_value`]), which the divergence checker and the dumps follow.
//!
//! Invariants: one change at a time (the broker refuses a second one anyway); the voter count only
//! goes below the replica count between a removal and the following addition (3 → 2 → 3), or above
//! it between an addition and the following removal (3 → 4 → 3); a removed node's process is stopped
//! and never restarted; reconcile leaves the group with exactly its replica count of voters, all of
//! them running nodes of the layout, or fails the run.

use std::time::Duration;

use raftmq_common::protocol::body::membership::GroupStatus;
use tokio::time::Instant;

use crate::cluster::NodeSpec;
use crate::db::Db;
use crate::db::DbError;
use crate::history::NEMESIS_PROCESS;
use crate::history::Op;
use crate::history::OpF;
use crate::history::OpType;
use crate::history::Recorder;
use crate::history::members_value;

/// Longest wait for a ready leader with no membership change under way, per step.
pub const MEMBERSHIP_LEADER_WAIT_MS: u64 = 30_000;
/// Longest time a reconcile (the heal) gets to bring a group back to its replica count.
pub const MEMBERSHIP_RECONCILE_MS: u64 = 180_000;
/// Grace between SIGTERM and SIGKILL of a removed node.
pub const REMOVED_STOP_GRACE_MS: u64 = 10_000;
/// Boot deadline of a spare.
pub const SPARE_READY_TIMEOUT_MS: u64 = 60_000;
/// Pause between two reconcile rounds (a leader election, a change finishing).
const RECONCILE_RETRY_MS: u64 = 500;

/// Which member a replacement removes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Victim {
    /// The group's leader (removing it hands leadership over first).
    Leader,
    /// The i-th follower voter (by id, modulo their number) when the fault starts.
    Follower(usize),
}

/// The voter to remove: `victim` among `voters` of which `leader` leads.
pub fn pick_victim(voters: &[u64], leader: u64, victim: Victim) -> Option<u64> {
    match victim {
        Victim::Leader => voters.contains(&leader).then_some(leader),
        Victim::Follower(i) => {
            let mut followers: Vec<u64> = voters.iter().copied().filter(|v| *v != leader).collect();
            followers.sort_unstable();
            followers.get(i % followers.len().max(1)).copied()
        }
    }
}

/// The next step of a reconcile, from the leader's view.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReconcileStep {
    /// The group has its replica count of voters and no learner.
    Done,
    /// A learner is left from an unfinished addition: add it again (the broker resumes it).
    Resume(u64),
    /// Too few voters: add a node.
    Add,
    /// Too many voters: remove this follower.
    Remove(u64),
}

/// What reconcile does next for a group of `replicas` whose leader `leader` reports `voters` and
/// `learners`. A learner is finished before the voter count is looked at, so a half-done addition
/// is completed rather than abandoned; an extra voter removed is the newest follower.
pub fn reconcile_step(voters: &[u64], learners: &[u64], leader: u64, replicas: usize) -> ReconcileStep {
    if let Some(l) = learners.iter().min() {
        return ReconcileStep::Resume(*l);
    }
    if voters.len() < replicas {
        return ReconcileStep::Add;
    }
    if voters.len() > replicas
        && let Some(v) = voters.iter().copied().filter(|v| *v != leader).max()
    {
        return ReconcileStep::Remove(v);
    }
    ReconcileStep::Done
}

fn membership_error(group: &str, message: impl Into<String>) -> DbError {
    DbError::Membership { group: group.to_owned(), message: message.into() }
}

fn ids(members: &[raftmq_common::protocol::body::membership::GroupMember]) -> Vec<u64> {
    members.iter().map(|m| m.id).collect()
}

/// The view of `group`'s ready leader with no membership change under way, asking the NameServer's
/// leader first, then every member and every leader hint, until `deadline`.
pub async fn leader_view(db: &Db, group: &str, deadline: Instant) -> Result<GroupStatus, DbError> {
    let admin = db.admin().clone();
    let mut last = String::from("no member answered");
    loop {
        let mut candidates: Vec<String> = Vec::new();
        if let Ok(addr) = admin.master_addr_of_group(group).await {
            candidates.push(addr);
        }
        candidates.extend(db.members(group).iter().map(|n| n.remoting_addr()));
        let mut tried: Vec<String> = Vec::new();
        while let Some(addr) = candidates.pop() {
            if tried.contains(&addr) {
                continue;
            }
            tried.push(addr.clone());
            match admin.group_status(&addr).await {
                Ok(s) if s.role == "LEADER" && s.ready && !s.joint && s.membership_change.is_none() => return Ok(s),
                Ok(s) => {
                    last = format!("{addr}: {} ready={} change={:?}", s.role, s.ready, s.membership_change);
                    if let Some(hint) = s.leader_addr.filter(|h| !tried.contains(h)) {
                        candidates.push(hint);
                    }
                }
                Err(e) => last = e.to_string(),
            }
        }
        if Instant::now() >= deadline {
            return Err(membership_error(group, format!("no ready leader without a change under way ({last})")));
        }
        tokio::time::sleep(Duration::from_millis(RECONCILE_RETRY_MS)).await;
    }
}

fn record(rec: &Recorder, kind: OpType, label: &str, node: &str, error: Option<String>) {
    let mut op = Op::new(kind, OpF::Nemesis, NEMESIS_PROCESS).value(label).node(node);
    if let Some(e) = error {
        op = op.error(e);
    }
    rec.record(op);
}

/// The `members …` record of `group` as the harness now knows them.
pub fn record_members(db: &Db, rec: &Recorder, group: &str) {
    let value = members_value(group, db.member_names(group));
    rec.record(Op::new(OpType::Invoke, OpF::Nemesis, NEMESIS_PROCESS).value(&value));
    rec.record(Op::new(OpType::Ok, OpF::Nemesis, NEMESIS_PROCESS).value(&value));
}

/// removeNode(`id`); on success the node leaves the members and its process is stopped.
async fn remove(db: &mut Db, rec: &Recorder, group: &str, id: u64) -> Result<String, DbError> {
    let name = db.layout.node_by_id(group, id).map(|n| n.name.clone()).unwrap_or_else(|| format!("id{id}"));
    let label = format!("member remove {group} {name} id {id}");
    record(rec, OpType::Invoke, &label, &name, None);
    let admin = db.admin().clone();
    match admin.remove_node(group, id).await {
        Ok(report) => {
            record(rec, OpType::Ok, &label, &name, None);
            tracing::info!(%group, node = %name, id, voters = ?report.voters, leader = ?report.leader, "member removed");
            let left: Vec<String> = db.member_names(group).iter().filter(|n| **n != name).cloned().collect();
            db.set_members(group, left);
            if db.layout.node(&name).is_some() {
                db.terminate(&name, Duration::from_millis(REMOVED_STOP_GRACE_MS)).await?;
            }
            Ok(format!("removed {name} (id {id})"))
        }
        Err(e) => {
            // A timeout may still have removed it: the reconcile reads what happened.
            record(rec, OpType::Info, &label, &name, Some(e.to_string()));
            Err(membership_error(group, format!("removeNode {id}: {e}")))
        }
    }
}

/// Why an addNode failed, as far as the harness acts on it.
enum AddFailure {
    /// The group recorded this id before: this spare can never join; use the next one.
    IdReused,
    /// Anything else (no leader, a change under way, a timeout): try again later.
    Retry(DbError),
}

/// addNode(`spec`); on success it becomes a member.
async fn add(db: &mut Db, rec: &Recorder, group: &str, spec: &NodeSpec) -> Result<String, AddFailure> {
    let label = format!("member add {group} {} id {}", spec.name, spec.raft_id);
    record(rec, OpType::Invoke, &label, &spec.name, None);
    let admin = db.admin().clone();
    match admin.add_node(group, spec.raft_id, &spec.remoting_addr(), &spec.raft_addr()).await {
        Ok(report) => {
            record(rec, OpType::Ok, &label, &spec.name, None);
            tracing::info!(%group, node = %spec.name, voters = ?report.voters, "member added");
            let mut names = db.member_names(group).to_vec();
            if !names.contains(&spec.name) {
                names.push(spec.name.clone());
            }
            db.set_members(group, names);
            Ok(format!("added {} (id {})", spec.name, spec.raft_id))
        }
        Err(e) => {
            let text = e.to_string();
            record(rec, OpType::Info, &label, &spec.name, Some(text.clone()));
            if text.contains("used before") {
                return Err(AddFailure::IdReused);
            }
            Err(AddFailure::Retry(membership_error(group, format!("addNode {}: {text}", spec.raft_id))))
        }
    }
}

/// A started spare of `group` that is neither a member nor abandoned, newest first: the node a
/// failed addition left waiting.
fn waiting_spare(db: &mut Db, group: &str, voters_and_learners: &[u64]) -> Option<NodeSpec> {
    let running = db.running_brokers();
    db.layout
        .spares(group)
        .into_iter()
        .rev()
        .find(|s| running.contains(&s.name) && !voters_and_learners.contains(&s.raft_id))
        .cloned()
}

/// Starts the next spare of `group` and adds it (one attempt; reconcile finishes what fails).
async fn add_fresh(db: &mut Db, rec: &Recorder, group: &str) -> Result<String, DbError> {
    let spec = db.start_spare(group, Duration::from_millis(SPARE_READY_TIMEOUT_MS)).await?;
    match add(db, rec, group, &spec).await {
        Ok(desc) => Ok(desc),
        Err(AddFailure::IdReused) => Err(membership_error(group, format!("id {} refused as used", spec.raft_id))),
        Err(AddFailure::Retry(e)) => Err(e),
    }
}

/// The fault: replaces `victim` of `group` (removing first, or adding first when `add_first`), then
/// reconciles. Returns a description of what was done.
pub async fn replace(
    db: &mut Db,
    rec: &Recorder,
    group: &str,
    victim: Victim,
    add_first: bool,
) -> Result<String, DbError> {
    let view = leader_view(db, group, Instant::now() + Duration::from_millis(MEMBERSHIP_LEADER_WAIT_MS)).await?;
    let voters = ids(&view.voters);
    let Some(id) = pick_victim(&voters, view.node_id, victim) else {
        return Err(membership_error(group, format!("no {victim:?} among voters {voters:?}")));
    };
    let mut done = Vec::new();
    if add_first {
        done.push(add_fresh(db, rec, group).await?);
        // The change just made must be committed before the next one is accepted.
        leader_view(db, group, Instant::now() + Duration::from_millis(MEMBERSHIP_LEADER_WAIT_MS)).await?;
        done.push(remove(db, rec, group, id).await?);
    } else {
        done.push(remove(db, rec, group, id).await?);
    }
    done.push(reconcile(db, rec, group, Instant::now() + Duration::from_millis(MEMBERSHIP_RECONCILE_MS)).await?);
    Ok(done.join("; "))
}

/// Brings `group` back to its replica count of voters with no learner (the heal, and the final
/// heal): resumes a half-done addition, adds a spare, or removes an extra voter until the leader
/// reports the right membership; then records it, and stops every process of the group outside it.
pub async fn reconcile(db: &mut Db, rec: &Recorder, group: &str, deadline: Instant) -> Result<String, DbError> {
    let replicas = db.layout.members(group).len();
    let mut actions: Vec<String> = Vec::new();
    let voters = loop {
        let step_deadline = deadline.min(Instant::now() + Duration::from_millis(MEMBERSHIP_LEADER_WAIT_MS));
        let view = leader_view(db, group, step_deadline).await;
        let view = match view {
            Ok(v) => v,
            Err(e) if Instant::now() >= deadline => return Err(e),
            Err(_) => continue,
        };
        let (voters, learners) = (ids(&view.voters), ids(&view.learners));
        let step = reconcile_step(&voters, &learners, view.node_id, replicas);
        let failed = match step {
            ReconcileStep::Done => break voters,
            ReconcileStep::Resume(id) => match db.layout.node_by_id(group, id).cloned() {
                Some(spec) => {
                    if !db.is_running(&spec.name) {
                        db.start(&spec.name, Duration::from_millis(SPARE_READY_TIMEOUT_MS)).await?;
                    }
                    add(db, rec, group, &spec).await.map(|d| actions.push(d)).is_err()
                }
                None => return Err(membership_error(group, format!("learner {id} is no node of the layout"))),
            },
            ReconcileStep::Add => {
                let all: Vec<u64> = voters.iter().chain(&learners).copied().collect();
                match waiting_spare(db, group, &all) {
                    Some(spec) => match add(db, rec, group, &spec).await {
                        Ok(d) => {
                            actions.push(d);
                            false
                        }
                        Err(AddFailure::IdReused) => {
                            db.terminate(&spec.name, Duration::from_millis(REMOVED_STOP_GRACE_MS)).await?;
                            false
                        }
                        Err(AddFailure::Retry(_)) => true,
                    },
                    None => add_fresh(db, rec, group).await.map(|d| actions.push(d)).is_err(),
                }
            }
            ReconcileStep::Remove(id) => remove(db, rec, group, id).await.map(|d| actions.push(d)).is_err(),
        };
        if Instant::now() >= deadline {
            return Err(membership_error(group, format!("not back to {replicas} voters in time (last step {step:?})")));
        }
        if failed {
            tokio::time::sleep(Duration::from_millis(RECONCILE_RETRY_MS)).await;
        }
    };
    let mut names = Vec::new();
    for id in &voters {
        match db.layout.node_by_id(group, *id) {
            Some(n) => names.push(n.name.clone()),
            None => return Err(membership_error(group, format!("voter {id} is no node of the layout"))),
        }
    }
    // Keep the harness's slot order for the members that stayed: targets by index stay stable.
    let mut ordered: Vec<String> = db.member_names(group).iter().filter(|n| names.contains(n)).cloned().collect();
    ordered.extend(names.iter().filter(|n| !ordered.contains(n)).cloned().collect::<Vec<_>>());
    db.set_members(group, ordered);
    let mut stopped = Vec::new();
    for name in db.running_brokers() {
        let in_group = db.layout.node(&name).is_some_and(|n| n.group == group);
        if in_group && !names.contains(&name) {
            db.terminate(&name, Duration::from_millis(REMOVED_STOP_GRACE_MS)).await?;
            stopped.push(name);
        }
    }
    if !stopped.is_empty() {
        actions.push(format!("stopped non-members {}", stopped.join(" ")));
    }
    record_members(db, rec, group);
    actions.push(format!("members {}", db.member_names(group).join(" ")));
    Ok(actions.join("; "))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn victims_are_the_leader_or_a_follower_by_index() {
        let voters = [3, 1, 5];
        assert_eq!(pick_victim(&voters, 5, Victim::Leader), Some(5));
        assert_eq!(pick_victim(&voters, 5, Victim::Follower(0)), Some(1));
        assert_eq!(pick_victim(&voters, 5, Victim::Follower(1)), Some(3));
        assert_eq!(pick_victim(&voters, 5, Victim::Follower(2)), Some(1), "modulo the followers");
        assert_eq!(pick_victim(&voters, 9, Victim::Leader), None, "a leader outside the voters is no target");
        assert_eq!(pick_victim(&[5], 5, Victim::Follower(0)), None);
    }

    #[test]
    fn reconcile_finishes_learners_first_then_fixes_the_voter_count() {
        use ReconcileStep::*;
        /// (case, voters, learners, leader, replicas, expected step)
        type Case = (&'static str, &'static [u64], &'static [u64], u64, usize, ReconcileStep);
        let cases: Vec<Case> = vec![
            ("healthy", &[1, 2, 3], &[], 1, 3, Done),
            ("after a removal", &[1, 3], &[], 1, 3, Add),
            ("a timed-out addition left a learner", &[1, 3], &[4], 3, 3, Resume(4)),
            ("a learner beside a full group is finished too", &[1, 2, 3], &[4], 1, 3, Resume(4)),
            ("grown, not shrunk yet: the newest follower goes", &[1, 2, 3, 4], &[], 4, 3, Remove(3)),
            ("grown, the leader is not the one removed", &[1, 2, 3, 4], &[], 2, 3, Remove(4)),
            ("five replicas", &[1, 2, 4, 5, 6], &[], 1, 5, Done),
        ];
        for (name, voters, learners, leader, replicas, want) in cases {
            assert_eq!(reconcile_step(voters, learners, leader, replicas), want, "{name}");
        }
    }
}
