//! [`RaftNode`]: one replica of a broker group. Owns the openraft [`Raft`], the log store (the
//! CommitLog) and the state machine over the broker's [`ApplyHandler`]; this is the whole API
//! the broker calls: propose, leadership watch, status, membership, retention snapshots, shutdown.
//!
//! ```text
//! start(cfg, handler, transport)
//!   LogStore::open ──damaged?──yes──▶ no openraft node: RaftService refuses every RPC, status says why
//!        │no
//!   snapshot file ahead of the log? ──▶ LogStore::rebase (crash between install steps)
//!   Raft::new(id, config, NetworkFactory(transport), store, StateMachine(handler))
//!   smallest member id ∧ !is_initialized ──▶ initialize(members)      (a restart never re-initialises)
//!   metrics watch ──task──▶ watch::Sender<Leadership>
//! ```
//!
//! Invariants: a damaged store never votes, leads or accepts entries (it has no Raft at all);
//! `propose` tells apart "not appended, go elsewhere" (`ForwardToLeader`), "may or may not commit"
//! (`OutcomeUnknown`) and "this node is finished" (`Fatal`); metrics are cloned at once, never
//! borrowed across an await (openraft issue #1238).

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use openraft::async_runtime::WatchReceiver;
use openraft::error::{ClientWriteError, RaftError};
use openraft::metrics::RaftServerMetrics;
use openraft::{Instant as _, RaftMetrics, ServerState};
use tokio::sync::watch;

use crate::config::RaftConfig;
use crate::error::StoreError;
use crate::log_store::LogStore;
use crate::network::{NetworkFactory, RaftService, Transport};
use crate::patcher::{NoPatch, PayloadPatcher};
use crate::snapshot_file::{SnapshotData, StoredSnapshot};
use crate::state_machine::{ApplyHandler, StateMachine};
use crate::type_config::{AppPayload, AppReply, LogId, Node, NodeId, TypeConfig};

/// The openraft node type of a broker group.
pub type Raft = openraft::Raft<TypeConfig, StateMachine>;

/// Longest wait for openraft's tasks to release the log store at shutdown.
const STORE_RELEASE_MAX_MS: u64 = 5_000;

/// How a replica starts.
pub struct NodeConfig {
    /// Group name (RocketMQ `brokerName`), also openraft's cluster name.
    pub cluster_name: String,
    /// This replica's id; never reused for a node that starts from an empty store.
    pub node_id: NodeId,
    /// Store directory (raft-meta, commitlog/, raftindex/, snapshot).
    pub store_dir: PathBuf,
    /// Timing and store limits.
    pub raft: RaftConfig,
    /// Initial voters, used only on the very first boot of the group.
    pub members: BTreeMap<NodeId, Node>,
    /// PHYSICALOFFSET patcher run at append time (default: none).
    pub patcher: Box<dyn PayloadPatcher>,
    /// Longest wait for a proposal to be applied before the outcome is reported unknown.
    pub propose_timeout: Duration,
}

impl NodeConfig {
    /// A config with default timing, no patcher and a 10 s proposal timeout.
    pub fn new(cluster_name: &str, node_id: NodeId, store_dir: PathBuf, members: BTreeMap<NodeId, Node>) -> Self {
        Self {
            cluster_name: cluster_name.to_string(),
            node_id,
            store_dir,
            raft: RaftConfig::default(),
            members,
            patcher: Box::new(NoPatch),
            propose_timeout: Duration::from_secs(10),
        }
    }
}

/// Role of a replica.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// Accepts proposals.
    Leader,
    /// Voter following a leader (or waiting for one).
    Follower,
    /// Campaigning.
    Candidate,
    /// Non-voter (new replica catching up, or not yet initialised).
    Learner,
    /// Shut down, failed, or refusing to take part (damaged store).
    Stopped,
}

/// Who leads, as this replica sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Leadership {
    /// Current term.
    pub term: u64,
    /// Known leader, if any.
    pub leader_id: Option<NodeId>,
    /// This replica's role.
    pub role: Role,
}

/// A point-in-time view of a replica.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeStatus {
    /// This replica.
    pub id: NodeId,
    /// Term, leader and role.
    pub leadership: Leadership,
    /// Last log index.
    pub last_log_index: Option<u64>,
    /// Committed log id as known locally.
    pub committed: Option<LogId>,
    /// Last applied log id.
    pub applied: Option<LogId>,
    /// Last purged log id.
    pub purged: Option<LogId>,
    /// Current voters.
    pub voters: BTreeSet<NodeId>,
    /// Current learners.
    pub learners: BTreeSet<NodeId>,
    /// On the leader: each follower's matched log index (`None` = nothing matched yet).
    pub followers: BTreeMap<NodeId, Option<u64>>,
    /// On the leader: ms since each follower last acknowledged a heartbeat or an append (absent:
    /// never). A matched index says how far a follower got; this says whether it is still there.
    pub follower_ack_age_ms: BTreeMap<NodeId, u64>,
    /// Why the store is damaged (the replica refuses to vote or lead), if it is.
    pub damaged: Option<String>,
    /// Why the store is poisoned (an fsync failed), if it is.
    pub poisoned: Option<String>,
}

/// A committed and applied proposal.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Applied {
    /// Where it is in the log.
    pub log_id: LogId,
    /// The state machine's reply.
    pub reply: AppReply,
}

/// Why a proposal failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ProposeError {
    /// Not appended: this replica is not the leader. Retry at the leader (if known).
    #[error("not the leader; forward to {leader_id:?} at {leader_addr:?}")]
    ForwardToLeader {
        /// Known leader id.
        leader_id: Option<NodeId>,
        /// Its Raft address.
        leader_addr: Option<String>,
        /// Its application address (`Node::data`, the broker's remoting address).
        leader_data: Option<String>,
    },
    /// The entry may or may not commit (leader changed after the append, or a timeout);
    /// retries must be deduplicated.
    #[error("outcome unknown: {0}")]
    OutcomeUnknown(String),
    /// The proposal was rejected (e.g. a membership change in progress); not appended.
    #[error("rejected: {0}")]
    Rejected(String),
    /// This replica cannot serve (shut down, storage failure, damaged store).
    #[error("fatal: {0}")]
    Fatal(String),
}

/// Errors of starting or managing a replica.
#[derive(Debug, thiserror::Error)]
pub enum NodeError {
    /// The log store failed to open or recover.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// openraft refused to start or stopped.
    #[error("raft: {0}")]
    Raft(String),
    /// A management call failed.
    #[error("{0}")]
    Api(String),
    /// The store is damaged; the replica does not take part in the group.
    #[error("store damaged: {0}")]
    Damaged(String),
}

/// One replica of a broker group.
pub struct RaftNode {
    id: NodeId,
    raft: Option<Raft>,
    store: LogStore,
    service: RaftService,
    leadership: watch::Receiver<Leadership>,
    propose_timeout: Duration,
}

fn role_of(state: ServerState) -> Role {
    match state {
        ServerState::Leader => Role::Leader,
        ServerState::Follower => Role::Follower,
        ServerState::Candidate => Role::Candidate,
        ServerState::Learner => Role::Learner,
        ServerState::Shutdown => Role::Stopped,
    }
}

fn leadership_of(m: &RaftMetrics<TypeConfig>) -> Leadership {
    let role = if m.running_state.is_err() { Role::Stopped } else { role_of(m.state) };
    Leadership { term: m.current_term, leader_id: m.current_leader, role }
}

impl RaftNode {
    /// Open the store and start the replica; on the group's first boot the smallest member id
    /// initialises it with `cfg.members`. A damaged store starts a refusing replica (see
    /// [`Self::status`]) rather than failing, so the operator sees why.
    pub async fn start<T: Transport>(
        cfg: NodeConfig,
        handler: Arc<dyn ApplyHandler>,
        transport: Arc<T>,
    ) -> Result<Self, NodeError> {
        let id = cfg.node_id;
        let openraft_cfg = Arc::new(cfg.raft.to_openraft(&cfg.cluster_name)?);
        let store = LogStore::open_with_patcher(&cfg.store_dir, &cfg.raft, cfg.patcher)?;
        if let Some(why) = store.damage_reason() {
            tracing::error!(id, %why, "raft store damaged: this replica will not vote, lead or replicate");
            let (_tx, leadership) = watch::channel(Leadership { term: 0, leader_id: None, role: Role::Stopped });
            let service = RaftService::refusing(id, format!("store damaged: {why}"));
            return Ok(Self { id, raft: None, store, service, leadership, propose_timeout: cfg.propose_timeout });
        }
        let snapshot = StoredSnapshot::load(&cfg.store_dir)?;
        if let Some(s) = &snapshot
            && let Some(last) = s.last_log_id
            && store.last_log_id().is_none_or(|l| l.index < last.index)
        {
            let data = SnapshotData::decode(&s.data).map_err(|reason| StoreError::Corrupt { pos: 0, reason })?;
            tracing::warn!(id, %last, next_pos = data.next_pos, "snapshot is ahead of the log; rebasing the log");
            store.rebase(last, data.next_pos).await?;
        }
        let sm = StateMachine::new(handler, store.clone(), snapshot);
        let network = NetworkFactory::new(id, transport, cfg.raft.stream_window());
        let raft = Raft::new(id, openraft_cfg, network, store.clone(), sm)
            .await
            .map_err(|e| NodeError::Raft(e.to_string()))?;
        let service = RaftService::new(id, raft.clone(), &store);
        let leadership = spawn_leadership_watch(&raft);
        let node = Self { id, raft: Some(raft), store, service, leadership, propose_timeout: cfg.propose_timeout };
        node.initialize_once(&cfg.members).await?;
        Ok(node)
    }

    async fn initialize_once(&self, members: &BTreeMap<NodeId, Node>) -> Result<(), NodeError> {
        let raft = self.raft()?;
        let first = members.keys().next().copied();
        if first != Some(self.id) {
            return Ok(());
        }
        if raft.is_initialized().await.map_err(|e| NodeError::Raft(e.to_string()))? {
            tracing::info!(id = self.id, "raft group already initialised; not initialising again");
            return Ok(());
        }
        tracing::info!(id = self.id, ?members, "initialising raft group");
        match raft.initialize(members.clone()).await {
            Ok(()) => Ok(()),
            // Another path initialised it meanwhile (e.g. a vote arrived): the goal is reached.
            Err(RaftError::APIError(e)) => {
                tracing::info!(id = self.id, %e, "raft group initialised elsewhere");
                Ok(())
            }
            Err(e) => Err(NodeError::Raft(e.to_string())),
        }
    }

    fn raft(&self) -> Result<&Raft, NodeError> {
        self.raft.as_ref().ok_or_else(|| NodeError::Damaged(self.store.damage_reason().unwrap_or_default()))
    }

    /// This replica's id.
    pub fn id(&self) -> NodeId {
        self.id
    }

    /// The openraft node (absent when the store is damaged); for tests and advanced callers.
    pub fn raft_handle(&self) -> Option<&Raft> {
        self.raft.as_ref()
    }

    /// The log store (the CommitLog): positions, durable watermark, damage.
    pub fn store(&self) -> &LogStore {
        &self.store
    }

    /// The RPC service to register with a [`crate::network::RaftServer`] or `MemRouter`.
    pub fn service(&self) -> RaftService {
        self.service.clone()
    }

    /// Leadership changes, as this replica sees them.
    pub fn leadership(&self) -> watch::Receiver<Leadership> {
        self.leadership.clone()
    }

    /// Propose `payload`; returns once it is committed and applied here.
    pub async fn propose(&self, payload: AppPayload) -> Result<Applied, ProposeError> {
        let raft = self.raft.as_ref().ok_or_else(|| {
            ProposeError::Fatal(format!("store damaged: {}", self.store.damage_reason().unwrap_or_default()))
        })?;
        // Boxed: openraft's write future is ~1.7 KiB, and inline it made every future that can
        // propose (a send that may auto-create its topic, and so the broker's request future) that
        // much bigger, copied on every request.
        let write = tokio::time::timeout(self.propose_timeout, Box::pin(raft.client_write(payload))).await;
        match write {
            Err(_) => {
                Err(ProposeError::OutcomeUnknown(format!("not applied within {} ms", self.propose_timeout.as_millis())))
            }
            Ok(Ok(r)) => Ok(Applied { log_id: r.log_id, reply: r.data }),
            Ok(Err(RaftError::APIError(e))) => Err(match e {
                ClientWriteError::ForwardToLeader(f) => ProposeError::ForwardToLeader {
                    leader_id: f.leader_id,
                    leader_addr: f.leader_node.as_ref().map(|n| n.raft_addr.clone()),
                    leader_data: f.leader_node.as_ref().map(|n| n.data.clone()),
                },
                ClientWriteError::LogEntryDiscarded(f) => ProposeError::OutcomeUnknown(format!(
                    "entry discarded on leader change (new leader {:?})",
                    f.leader_id
                )),
                other => ProposeError::Rejected(other.to_string()),
            }),
            Ok(Err(RaftError::Fatal(f))) => Err(ProposeError::Fatal(f.to_string())),
        }
    }

    /// Whether this node leads and a quorum acknowledged it within the leader lease
    /// (`election_timeout_max`): until the lease runs out no other node can be elected, so this
    /// leader's view is the group's. A leader cut off in a minority still believes it leads; this
    /// tells it apart. A single voter is its own quorum.
    pub fn leader_lease_valid(&self) -> bool {
        let Some(raft) = &self.raft else { return false };
        let lease = Duration::from_millis(raft.config().election_timeout_max);
        let metrics = raft.metrics();
        let m = metrics.borrow_watched();
        if m.state != ServerState::Leader {
            return false;
        }
        if m.membership_config.membership().voter_ids().count() <= 1 {
            return true;
        }
        m.last_quorum_acked.as_ref().is_some_and(|acked| openraft::Instant::elapsed(&**acked) < lease)
    }

    /// Everything in this node's log is applied. On a leader holding its lease
    /// ([`Self::leader_lease_valid`]) the applied state is then at least what any replica may have
    /// applied. A follower may apply an entry before its leader does (the leader's apply runs behind
    /// its commit); until the leader caught up, what a consumer read there is ahead of it.
    ///
    /// Compared with the live log end, not openraft's `cluster_committed` metric: that is published
    /// once per RaftCore loop, after the same loop already sent the new commit index to followers, so
    /// a follower can serve an entry the metric does not show yet (jepsen seeds 6014/7002/7004). A
    /// follower only holds entries its leader appended, and an append is visible at once; the
    /// `last_applied` metric lags the real apply, which only makes the answer more conservative.
    pub fn apply_caught_up(&self) -> bool {
        let Some(raft) = &self.raft else { return false };
        // The log end first: both only grow, so reading it first can only make the answer stricter.
        let appended = self.store.last_log_id().map(|l| l.index);
        let applied = raft.metrics().borrow_watched().last_applied.as_ref().map(|l| l.index);
        applied_covers_log(applied, appended)
    }

    /// A point-in-time view of this replica.
    pub fn status(&self) -> NodeStatus {
        let damaged = self.store.damage_reason();
        let poisoned = self.store.poison_reason();
        let Some(raft) = &self.raft else {
            return NodeStatus {
                id: self.id,
                leadership: *self.leadership.borrow(),
                last_log_index: self.store.last_log_id().map(|l| l.index),
                committed: None,
                applied: None,
                purged: None,
                voters: BTreeSet::new(),
                learners: BTreeSet::new(),
                followers: BTreeMap::new(),
                follower_ack_age_ms: BTreeMap::new(),
                damaged,
                poisoned,
            };
        };
        // Clone at once: the borrow is a lock inside openraft.
        let m = raft.metrics().borrow_watched().clone();
        let membership = m.membership_config.membership();
        let voters: BTreeSet<NodeId> = membership.voter_ids().collect();
        let learners: BTreeSet<NodeId> = membership.learner_ids().collect();
        let followers = m
            .replication
            .as_ref()
            .map(|r| r.iter().filter(|(id, _)| **id != self.id).map(|(id, l)| (*id, l.map(|l| l.index))).collect())
            .unwrap_or_default();
        let follower_ack_age_ms = m
            .heartbeat
            .as_ref()
            .map(|h| {
                h.iter()
                    .filter(|(id, _)| **id != self.id)
                    .filter_map(|(id, at)| {
                        let age = at.as_ref()?.elapsed();
                        Some((*id, u64::try_from(age.as_millis()).unwrap_or(u64::MAX)))
                    })
                    .collect()
            })
            .unwrap_or_default();
        NodeStatus {
            id: self.id,
            leadership: leadership_of(&m),
            last_log_index: m.last_log_index,
            committed: m.local_committed,
            applied: m.last_applied,
            purged: m.purged,
            voters,
            learners,
            followers,
            follower_ack_age_ms,
            damaged,
            poisoned,
        }
    }

    /// Add a non-voting replica (it starts receiving the log); returns without waiting for it
    /// to catch up (watch [`NodeStatus::followers`]).
    pub async fn add_learner(&self, id: NodeId, node: Node) -> Result<LogId, NodeError> {
        let r = self.raft()?.add_learner(id, node, false).await.map_err(|e| NodeError::Api(e.to_string()))?;
        Ok(r.log_id)
    }

    /// Every member (voters and learners) of the effective membership — the latest one appended,
    /// committed or not — with its addresses. Empty before the node joins a group.
    pub fn members(&self) -> BTreeMap<NodeId, Node> {
        let Some(raft) = &self.raft else { return BTreeMap::new() };
        // Clone the Arc at once: the borrow is a lock inside openraft.
        let membership = raft.metrics().borrow_watched().membership_config.clone();
        membership.nodes().map(|(id, node)| (*id, node.clone())).collect()
    }

    /// Why a membership change is under way, if one is: the effective membership is joint, or not
    /// committed yet. A new change must wait (parallel changes can leave a joint config).
    pub fn membership_change_pending(&self) -> Option<String> {
        let raft = self.raft.as_ref()?;
        let (effective, committed) = {
            let m = raft.metrics().borrow_watched().clone();
            (m.membership_config.clone(), m.committed_membership_config.clone())
        };
        if effective.get_joint_config().len() > 1 {
            return Some(format!("the membership at {:?} is joint (a change is half done)", effective.log_id()));
        }
        if effective.log_id() != committed.log_id() {
            return Some(format!("the membership at {:?} is not committed yet", effective.log_id()));
        }
        None
    }

    /// Remove learners (non-voters) from the membership; one entry, no joint config.
    pub async fn remove_learners(&self, ids: BTreeSet<NodeId>) -> Result<LogId, NodeError> {
        let change = openraft::ChangeMembers::RemoveNodes(ids);
        let r = self.raft()?.change_membership(change, false).await.map_err(|e| NodeError::Api(e.to_string()))?;
        Ok(r.log_id)
    }

    /// Make `voters` the voter set (joint consensus; removed voters are dropped, not kept as
    /// learners). Call one change at a time.
    pub async fn change_membership(&self, voters: BTreeSet<NodeId>) -> Result<LogId, NodeError> {
        let r = self.raft()?.change_membership(voters, false).await.map_err(|e| NodeError::Api(e.to_string()))?;
        Ok(r.log_id)
    }

    /// Ask the leader (this node) to hand leadership to `to`. openraft checks nothing: the leader
    /// stops proposing and heartbeating until `to` wins, so `to` must be a caught-up voter.
    pub async fn transfer_leader(&self, to: NodeId) -> Result<(), NodeError> {
        self.raft()?.trigger().transfer_leader(to).await.map_err(|e| NodeError::Raft(e.to_string()))
    }

    /// Revert this node to a learner if the committed membership no longer has it as a voter: a
    /// leader that removed itself keeps leading until told (openraft 0.10.0-alpha.37 documents an
    /// automatic step-down, `removed_leader_step_down`, but never starts it).
    pub async fn step_down_if_removed(&self) -> Result<(), NodeError> {
        self.raft()?.trigger().refresh_server_state(None, None).await.map_err(|e| NodeError::Raft(e.to_string()))
    }

    /// Build a snapshot at the handler's retention boundary P (see
    /// [`ApplyHandler::build_manifest`]); openraft then purges the log up to P. Nothing happens
    /// when the handler offers no new boundary. Returns once the build is requested.
    pub async fn trigger_snapshot(&self) -> Result<(), NodeError> {
        self.raft()?.trigger().snapshot().await.map_err(|e| NodeError::Raft(e.to_string()))
    }

    /// Purge the log up to `upto` (at most the last snapshot).
    pub async fn purge_log(&self, upto: u64) -> Result<(), NodeError> {
        self.raft()?.trigger().purge_log(upto).await.map_err(|e| NodeError::Raft(e.to_string()))
    }

    /// Stop the replica: openraft stops, then the log store's flusher finishes what is queued.
    /// Detach [`Self::service`] from the network first so peers see the node as down.
    pub async fn shutdown(self) -> Result<(), NodeError> {
        let Self { id, raft, store, service, .. } = self;
        drop(service);
        if let Some(raft) = raft {
            raft.shutdown().await.map_err(|e| NodeError::Raft(e.to_string()))?;
            drop(raft);
        }
        // openraft's workers drop their store handles as they wind down; reopening the same
        // directory before that would run two flushers on one log.
        let deadline = tokio::time::Instant::now() + Duration::from_millis(STORE_RELEASE_MAX_MS);
        while store.handle_count() > 1 {
            if tokio::time::Instant::now() >= deadline {
                tracing::warn!(id, handles = store.handle_count(), "raft log store still in use after shutdown");
                break;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        drop(store);
        tracing::info!(id, "raft node stopped");
        Ok(())
    }
}

/// Mirror openraft's metrics into a `Leadership` watch, notifying only on change.
fn spawn_leadership_watch(raft: &Raft) -> watch::Receiver<Leadership> {
    // The server metrics change with the vote, role, leader or membership only; the full metrics
    // change with every append and apply, and cloning them for each woke this task thousands of
    // times a second per replica for nothing. A core that stopped drops the sender: Stopped.
    let mut server = raft.server_metrics();
    let first = leadership_of(&raft.metrics().borrow_watched());
    let (tx, rx) = watch::channel(first);
    tokio::spawn(async move {
        loop {
            let l = leadership_of_server(&server.borrow_and_update());
            tx.send_if_modified(|cur| {
                let changed = *cur != l;
                *cur = l;
                changed
            });
            if server.changed().await.is_err() {
                tx.send_if_modified(|cur| {
                    let changed = cur.role != Role::Stopped;
                    cur.role = Role::Stopped;
                    changed
                });
                break;
            }
        }
    });
    rx
}

fn leadership_of_server(m: &RaftServerMetrics<TypeConfig>) -> Leadership {
    Leadership { term: m.vote.leader_id().term, leader_id: m.current_leader, role: role_of(m.state) }
}

/// Whether an applied index covers a log end (`None`: nothing applied / an empty log).
fn applied_covers_log(applied: Option<u64>, appended: Option<u64>) -> bool {
    applied >= appended
}

#[cfg(test)]
mod tests {
    use super::applied_covers_log;

    #[test]
    fn a_leader_is_authoritative_only_once_its_apply_covers_its_log() {
        // The incident's shape: entry k appended (and possibly applied by a follower), not yet here.
        assert!(!applied_covers_log(Some(41), Some(42)));
        assert!(!applied_covers_log(None, Some(1)));
        assert!(applied_covers_log(Some(42), Some(42)));
        assert!(applied_covers_log(None, None));
    }
}
