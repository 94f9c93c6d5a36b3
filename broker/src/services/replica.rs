//! `Replica`: this broker's seat in its Raft group as the processors see it — who leads, whether this
//! node may take writes now (the leader-readiness gate), proposing replicated commands, and how a
//! refused write is answered on the RocketMQ wire.
//!
//! Readiness (docs/raft-log.md#leader-readiness, DLedger's `DLedgerRoleChangeHandler`): a
//! leader serves writes only once it has applied an entry of its own term. Entries apply in log order
//! and a new leader's first entry is its blank entry, so at that point every entry committed before
//! its term has been dispatched into the ConsumeQueues and the leader's queue offsets can be read from
//! applied state.
//!
//! Refusals: a follower (or a leader that is not ready) answers SERVICE_NOT_AVAILABLE (14), which
//! 4.x producers retry on another group, with `leader=<ip:port>` in the remark when the leader is
//! known (`raftmq_common::protocol::leader_hint`); our SDK retries straight at that address. The
//! leader's address comes from the Raft membership (each member's `Node::data`), so it follows
//! membership changes; the static `raftPeers` map is only the fallback.
//!
//! Membership (see [`crate::services::membership`]): this node runs at most one membership change at a time
//! ([`Replica::begin_membership_change`]); it knows whether it is a member of its group now, and
//! whether it was removed (then it never registers with NameServers again while it runs).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::Mutex;
use std::sync::atomic::AtomicBool;
use std::sync::atomic::Ordering;

use raftmq_common::protocol::RemotingCommand;
use raftmq_common::protocol::ResponseCode;
use raftmq_common::protocol::leader_hint::format_leader_hint;
use raftmq_raft::AppPayload;
use raftmq_raft::Applied;
use raftmq_raft::Leadership;
use raftmq_raft::ProposeError;
use raftmq_raft::RaftNode;
use raftmq_raft::Role;
use thiserror::Error;
use tokio::sync::watch;

use crate::state::entry::BrokerCommand;
use crate::state::store::ApplyOutcome;
use crate::state::store::MessageStore;

/// Why a replicated write was not done (or may not have been).
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum WriteError {
    /// This node does not lead; the leader's remoting address when known.
    #[error("not the leader")]
    NotLeader {
        /// `ip:port` of the leader's remoting server.
        leader_addr: Option<String>,
    },
    /// This node leads but has not applied everything committed before its term yet.
    #[error("the new leader is still applying the log")]
    NotReady,
    /// Too many writes queued (flow control).
    #[error("{0}")]
    Busy(String),
    /// The write may or may not have been committed.
    #[error("outcome unknown: {0}")]
    OutcomeUnknown(String),
    /// The write was refused (by Raft or by apply); nothing was stored.
    #[error("rejected: {0}")]
    Rejected(String),
    /// The write is larger than one Raft entry holds; nothing was stored, and a retry cannot succeed.
    #[error("{0}")]
    TooLarge(String),
    /// This node cannot write at all (shut down, storage failure).
    #[error("{0}")]
    Fatal(String),
    /// The disk of this node is too full to take the write; nothing was stored. Passes once space
    /// is freed.
    #[error("disk full: {0}")]
    DiskFull(String),
}

impl WriteError {
    /// The RocketMQ response for this refusal.
    pub fn to_response(&self, broker_name: &str) -> RemotingCommand {
        let (code, remark) = match self {
            WriteError::NotLeader { leader_addr } => {
                let hint = leader_addr.as_deref().map(format_leader_hint).unwrap_or_else(|| "leader unknown".into());
                (ResponseCode::ServiceNotAvailable, format!("broker[{broker_name}] is not the Raft leader; {hint}"))
            }
            WriteError::NotReady => (
                ResponseCode::ServiceNotAvailable,
                format!("broker[{broker_name}] was just elected and is still applying the log"),
            ),
            WriteError::Busy(why) => (ResponseCode::SystemBusy, why.clone()),
            WriteError::OutcomeUnknown(why) => (ResponseCode::SystemError, format!("write outcome unknown: {why}")),
            WriteError::Rejected(why) => (ResponseCode::SystemError, format!("write rejected: {why}")),
            WriteError::TooLarge(why) => (ResponseCode::MessageIllegal, why.clone()),
            WriteError::Fatal(why) => (ResponseCode::ServiceNotAvailable, format!("broker[{broker_name}] {why}")),
            WriteError::DiskFull(why) => (ResponseCode::ServiceNotAvailable, disk_full_refusal(broker_name, why)),
        };
        RemotingCommand::response(code, Some(remark))
    }
}

/// The remark of a write refused because this replica's disk is full: RocketMQ's
/// SERVICE_NOT_AVAILABLE wording ("maybe disk full") with what this replica measured.
pub fn disk_full_refusal(broker_name: &str, why: &str) -> String {
    format!(
        "service not available now, maybe disk full: broker[{broker_name}]'s disk is full ({why}); \
         it takes writes again once space is freed"
    )
}

/// Whether this node belongs to its group's membership.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Membership {
    /// A voter or learner of the effective membership.
    Member,
    /// Not (yet) in the membership: a new node before the leader adds it, or replaying
    /// historical configs while it catches up.
    NotYet,
    /// It was a member and a later membership dropped it, or the leader said so.
    Removed,
}

/// Releases the membership-change slot when the change ends (success, failure or cancellation).
#[derive(Debug)]
pub struct MembershipChangeGuard<'a> {
    slot: &'a Mutex<Option<String>>,
}

impl Drop for MembershipChangeGuard<'_> {
    fn drop(&mut self) {
        *self.slot.lock().unwrap_or_else(std::sync::PoisonError::into_inner) = None;
    }
}

/// The Raft group as the broker's processors use it. Cheap to share (`Arc`).
pub struct Replica {
    node: Arc<RaftNode>,
    store: Arc<MessageStore>,
    leadership: watch::Receiver<Leadership>,
    peers: BTreeMap<u64, String>,
    broker_name: String,
    membership_change: Mutex<Option<String>>,
    was_member: AtomicBool,
    removed: AtomicBool,
}

impl std::fmt::Debug for Replica {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Replica").field("id", &self.node.id()).field("leadership", &self.leadership()).finish()
    }
}

impl Replica {
    /// `peers` maps every Raft node id of the group to its remoting address.
    pub fn new(node: Arc<RaftNode>, store: Arc<MessageStore>, peers: BTreeMap<u64, String>, broker_name: &str) -> Self {
        let leadership = node.leadership();
        Replica {
            node,
            store,
            leadership,
            peers,
            broker_name: broker_name.to_owned(),
            membership_change: Mutex::new(None),
            was_member: AtomicBool::new(false),
            removed: AtomicBool::new(false),
        }
    }

    /// The Raft node.
    pub fn node(&self) -> &Arc<RaftNode> {
        &self.node
    }

    /// The applied state.
    pub fn store(&self) -> &Arc<MessageStore> {
        &self.store
    }

    /// `brokerName`.
    pub fn broker_name(&self) -> &str {
        &self.broker_name
    }

    /// Term, leader and role now.
    pub fn leadership(&self) -> Leadership {
        *self.leadership.borrow()
    }

    /// A watch of leadership changes.
    pub fn leadership_watch(&self) -> watch::Receiver<Leadership> {
        self.leadership.clone()
    }

    /// This node's Raft id.
    pub fn node_id(&self) -> u64 {
        self.node.id()
    }

    /// The leader's remoting address, as far as this node knows.
    pub fn leader_addr(&self) -> Option<String> {
        self.leadership().leader_id.and_then(|id| self.member_addr(id))
    }

    /// Remoting address of node `id`: from the Raft membership, else from the static `raftPeers`.
    pub fn member_addr(&self, id: u64) -> Option<String> {
        self.node
            .members()
            .get(&id)
            .map(|n| n.data.clone())
            .filter(|addr| !addr.is_empty())
            .or_else(|| self.peers.get(&id).cloned())
    }

    /// Whether this node belongs to its group now (see [`Membership`]).
    pub fn membership(&self) -> Membership {
        if self.removed.load(Ordering::Acquire) {
            return Membership::Removed;
        }
        if self.node.members().contains_key(&self.node.id()) {
            self.was_member.store(true, Ordering::Release);
            return Membership::Member;
        }
        if self.was_member.load(Ordering::Acquire) {
            self.removed.store(true, Ordering::Release);
            return Membership::Removed;
        }
        Membership::NotYet
    }

    /// Records that the group removed this node (the leader said so). Node ids are never reused,
    /// so a removed node never becomes a member again.
    pub fn mark_removed(&self) {
        self.removed.store(true, Ordering::Release);
    }

    /// Claims this node's membership-change slot: `Err(what is running)` when a change already is.
    pub fn begin_membership_change(&self, what: &str) -> Result<MembershipChangeGuard<'_>, String> {
        let mut slot = self.membership_change.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(running) = slot.as_ref() {
            return Err(running.clone());
        }
        *slot = Some(what.to_owned());
        Ok(MembershipChangeGuard { slot: &self.membership_change })
    }

    /// The membership change this node is running, if any.
    pub fn membership_change(&self) -> Option<String> {
        self.membership_change.lock().unwrap_or_else(std::sync::PoisonError::into_inner).clone()
    }

    /// Whether this node leads and has passed the readiness gate; the term if so.
    pub fn ready_term(&self) -> Option<u64> {
        let l = self.leadership();
        let applied = self.store.applied_now();
        (l.role == Role::Leader && applied.term == l.term && self.store.failure().is_none()).then_some(l.term)
    }

    /// Whether this node may take a write now: `Ok(term)` or the refusal.
    pub fn check_writable(&self) -> Result<u64, WriteError> {
        if let Some(why) = self.store.failure() {
            return Err(WriteError::Fatal(format!("cannot store: {why}")));
        }
        let l = self.leadership();
        match l.role {
            Role::Leader => self.ready_term().ok_or(WriteError::NotReady),
            Role::Stopped => Err(WriteError::Fatal("is shutting down".into())),
            _ => Err(WriteError::NotLeader { leader_addr: self.leader_addr() }),
        }
    }

    /// Maps raft's proposal error.
    pub fn propose_error(&self, e: ProposeError) -> WriteError {
        match e {
            ProposeError::ForwardToLeader { leader_id, leader_data, .. } => WriteError::NotLeader {
                leader_addr: leader_data
                    .filter(|d| !d.is_empty())
                    .or_else(|| leader_id.and_then(|id| self.member_addr(id))),
            },
            ProposeError::OutcomeUnknown(why) => WriteError::OutcomeUnknown(why),
            ProposeError::Rejected(why) => WriteError::Rejected(why),
            e @ ProposeError::TooLarge { .. } => WriteError::TooLarge(e.to_string()),
            ProposeError::Fatal(why) => WriteError::Fatal(why),
            ProposeError::DiskFull(why) => WriteError::DiskFull(why),
        }
    }

    /// Proposes a metadata command (offsets, topic, group) and waits until it is applied here.
    pub async fn propose(&self, command: &BrokerCommand) -> Result<(), WriteError> {
        self.propose_for_outcome(command).await.map(|_| ())
    }

    /// [`Replica::propose`], answering what apply said when it was applied (QUEUE_LOCKS: which
    /// queues were granted).
    pub async fn propose_for_outcome(&self, command: &BrokerCommand) -> Result<ApplyOutcome, WriteError> {
        self.check_writable()?;
        let (tag, body) = command.encode().map_err(|e| WriteError::Rejected(e.to_string()))?;
        let applied = self.node.propose(AppPayload::new(tag, body)).await.map_err(|e| self.propose_error(e))?;
        applied_outcome(&applied)
    }

    /// [`Replica::propose_for_outcome`] in two steps: returns once the command is queued for the
    /// log (commands queued by successive calls are applied in call order), with a future of what
    /// apply said; see [`RaftNode::submit`].
    pub async fn submit_for_outcome(
        &self,
        command: &BrokerCommand,
    ) -> Result<impl Future<Output = Result<ApplyOutcome, WriteError>> + Send + '_, WriteError> {
        self.check_writable()?;
        let (tag, body) = command.encode().map_err(|e| WriteError::Rejected(e.to_string()))?;
        let submitted = self.node.submit(AppPayload::new(tag, body)).await.map_err(|e| self.propose_error(e))?;
        Ok(async move { applied_outcome(&submitted.await.map_err(|e| self.propose_error(e))?) })
    }
}

/// What apply answered, as a write's result.
fn applied_outcome(applied: &Applied) -> Result<ApplyOutcome, WriteError> {
    match ApplyOutcome::decode(&applied.reply) {
        ApplyOutcome::Rejected(why) => Err(WriteError::Rejected(why)),
        ApplyOutcome::LocalFailure(why) => Err(WriteError::OutcomeUnknown(why)),
        outcome @ (ApplyOutcome::Done
        | ApplyOutcome::Stored { .. }
        | ApplyOutcome::Granted(_)
        | ApplyOutcome::Issued(_)) => Ok(outcome),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refusals_carry_rocketmq_codes_and_the_leader_hint() {
        let r = WriteError::NotLeader { leader_addr: Some("10.0.0.2:10911".into()) }.to_response("broker-a");
        assert_eq!(r.response_code(), ResponseCode::ServiceNotAvailable);
        let remark = r.remark.unwrap();
        assert_eq!(raftmq_common::protocol::leader_hint::parse_leader_hint(&remark), Some("10.0.0.2:10911"));
        let r = WriteError::NotLeader { leader_addr: None }.to_response("broker-a");
        assert_eq!(raftmq_common::protocol::leader_hint::parse_leader_hint(&r.remark.unwrap()), None);
        assert_eq!(WriteError::Busy("b".into()).to_response("x").response_code(), ResponseCode::SystemBusy);
        assert_eq!(WriteError::NotReady.to_response("x").response_code(), ResponseCode::ServiceNotAvailable);
    }
}
