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
//!   store empty ∧ peers ──▶ VoteGuard probing; a task asks the peers (vote_guard): a new group ──▶ ↓
//!                                                        committed entries ──▶ catch up, never initialise
//!   smallest member id ∧ !is_initialized ──▶ initialize(members)      (a restart never re-initialises)
//!   metrics watch ──task──▶ watch::Sender<Leadership>
//! ```
//!
//! Invariants: a damaged store never votes, leads or accepts entries (it has no Raft at all);
//! `propose` tells apart "not appended, go elsewhere" (`ForwardToLeader`), "may or may not commit"
//! (`OutcomeUnknown`) and "this node is finished" (`Fatal`); metrics are cloned at once, never
//! borrowed across an await (openraft issue #1238).

use std::collections::{BTreeMap, BTreeSet};
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use openraft::async_runtime::WatchReceiver;
use openraft::error::{ClientWriteError, RaftError};
use openraft::{Instant as _, ServerState};
use tokio::sync::watch;

use crate::config::{PROPOSE_DISK_FREE_MIN_BYTES, RaftConfig};
use crate::entry::HEADER_SIZE;
use crate::error::StoreError;
pub use crate::leadership::{Leadership, Role};
use crate::leadership::{MembershipLogId, leadership_of, spawn_leadership_watch};
use crate::log_store::{LogStore, WeakLogStore};
use crate::network::peer::NetworkFactory;
use crate::network::service::RaftService;
use crate::network::transport::{RpcKind, Transport};
use crate::network::wire::{self, RaftReply, RaftRequest};
use crate::patcher::{NoPatch, PayloadPatcher};
use crate::snapshot_file::{SnapshotData, StoredSnapshot};
use crate::state_machine::{ApplyHandler, StateMachine};
use crate::type_config::{AppPayload, AppReply, LogId, Node, NodeId, TypeConfig};
use crate::vote_guard::{Decision, ProbeReply, VoteGuard, decide};

pub use crate::state_machine::Raft;

/// Longest wait for openraft's tasks to release the log store at shutdown.
const STORE_RELEASE_MAX_MS: u64 = 5_000;

/// How a replica starts.
pub struct NodeConfig {
    /// Group name (RocketMQ `brokerName`), also openraft's cluster name.
    pub cluster_name: String,
    /// This replica's id. Coming back under it with an empty store (a wiped disk) is safe when
    /// `members` names at least one current member besides it: the vote guard keeps the replica
    /// out of elections until it caught up.
    pub node_id: NodeId,
    /// Store directory (raft-meta, commitlog/, raftindex/, snapshot).
    pub store_dir: PathBuf,
    /// Timing and store limits.
    pub raft: RaftConfig,
    /// Initial voters: the first member initialises the group on its very first boot; a replica
    /// that starts from an empty store asks these (and the members their answers name) first.
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

/// A joint membership that is committed: the change from `old_voters` to `new_voters` is half done.
/// openraft's own changes build joints of two voter sets; of a longer one, these are its first and
/// last.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommittedJoint {
    /// Where the joint membership is in the log.
    pub log_id: LogId,
    /// The voters before the change.
    pub old_voters: BTreeSet<NodeId>,
    /// The voters the change was going to.
    pub new_voters: BTreeSet<NodeId>,
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
    /// Why this replica's log cannot take writes for lack of disk space, while so: an append waits
    /// for space, or less than the minimum is free (proposals refused). Passes by itself once
    /// space is freed.
    pub disk_full: Option<String>,
    /// What the vote guard of a replica that started from an empty store still restricts
    /// ([`crate::vote_guard`]), if anything.
    pub vote_guard: Option<String>,
    /// The newest durable checkpoint of the applied state ([`crate::checkpoint_file`]).
    pub checkpoint: Option<LogId>,
    /// Where the applied state started at this start: the checkpoint or the snapshot it was
    /// restored from (`None`: every retained entry was applied again).
    pub applied_at_start: Option<LogId>,
}

impl NodeStatus {
    /// A replica that knows only its id and leadership: no log, no members, no faults. What a
    /// node not started yet reports, filled in; the base of test fixtures.
    pub fn new(id: NodeId, leadership: Leadership) -> Self {
        NodeStatus {
            id,
            leadership,
            last_log_index: None,
            committed: None,
            applied: None,
            purged: None,
            voters: BTreeSet::new(),
            learners: BTreeSet::new(),
            followers: BTreeMap::new(),
            follower_ack_age_ms: BTreeMap::new(),
            damaged: None,
            poisoned: None,
            disk_full: None,
            vote_guard: None,
            checkpoint: None,
            applied_at_start: None,
        }
    }
}

/// A committed and applied proposal.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Applied {
    /// Where it is in the log.
    pub log_id: LogId,
    /// The state machine's reply.
    pub reply: AppReply,
}

/// The outcome of a [`RaftNode::submit`]ted proposal: committed and applied here, or why not.
pub struct Submitted(std::pin::Pin<Box<dyn std::future::Future<Output = Result<Applied, ProposeError>> + Send>>);

impl std::fmt::Debug for Submitted {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Submitted")
    }
}

impl std::future::Future for Submitted {
    type Output = Result<Applied, ProposeError>;

    fn poll(mut self: std::pin::Pin<&mut Self>, cx: &mut std::task::Context<'_>) -> std::task::Poll<Self::Output> {
        self.0.as_mut().poll(cx)
    }
}

/// openraft's refusal of a write, as a [`ProposeError`].
fn client_write_error(e: ClientWriteError<TypeConfig>) -> ProposeError {
    match e {
        ClientWriteError::ForwardToLeader(f) => ProposeError::ForwardToLeader {
            leader_id: f.leader_id,
            leader_addr: f.leader_node.as_ref().map(|n| n.raft_addr.clone()),
            leader_data: f.leader_node.as_ref().map(|n| n.data.clone()),
        },
        ClientWriteError::LogEntryDiscarded(f) => {
            ProposeError::OutcomeUnknown(format!("entry discarded on leader change (new leader {:?})", f.leader_id))
        }
        other => ProposeError::Rejected(other.to_string()),
    }
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
    /// The payload is larger than one entry may be ([`RaftNode::payload_max_bytes`]); not appended.
    /// Retrying the same payload can never succeed.
    #[error("an entry payload of {size_bytes} bytes exceeds the most one Raft entry holds ({max_bytes} bytes)")]
    TooLarge {
        /// The payload's size.
        size_bytes: usize,
        /// The largest payload an entry holds.
        max_bytes: usize,
    },
    /// This replica cannot serve (shut down, storage failure, damaged store).
    #[error("fatal: {0}")]
    Fatal(String),
    /// Not appended: the file system of this replica's log is full (or an append already waits
    /// for space). Passes once space is freed.
    #[error("disk full: {0}")]
    DiskFull(String),
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
    /// The log id (term, index) of the membership config in effect; changes only with it.
    membership: watch::Receiver<MembershipLogId>,
    propose_timeout: Duration,
    /// Largest proposal payload: an entry's most ([`RaftConfig::entry_max_bytes`]) less its header.
    payload_max_bytes: usize,
    guard: Arc<VoteGuard>,
    /// The task asking the peers before an empty store votes (stopped with the node).
    probing: Option<AbortOnDrop>,
    /// The state machine's checkpoint side (none on a damaged store).
    checkpoints: Option<StateMachine>,
    /// The task checkpointing a log that went quiet (none when checkpoints are off).
    idle_checkpoints: Option<AbortOnDrop>,
}

/// Stops a task when dropped: a node dropped without `shutdown` (a test's crash) leaves nothing
/// running that still holds its Raft.
struct AbortOnDrop(tokio::task::AbortHandle);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
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
        let payload_max_bytes = usize::try_from(cfg.raft.entry_max_bytes() - HEADER_SIZE).unwrap_or(usize::MAX);
        let mut openraft_cfg = cfg.raft.to_openraft(&cfg.cluster_name)?;
        let store = LogStore::open_with_patcher(&cfg.store_dir, &cfg.raft, cfg.patcher)?;
        if let Some(why) = store.damage_reason() {
            tracing::error!(id, %why, "raft store damaged: this replica will not vote, lead or replicate");
            let (_tx, leadership) = watch::channel(Leadership { term: 0, leader_id: None, role: Role::Stopped });
            let (_tx, membership) = watch::channel(None);
            let service = RaftService::refusing(id, format!("store damaged: {why}"));
            let guard = Arc::new(VoteGuard::open(id));
            let propose_timeout = cfg.propose_timeout;
            return Ok(Self {
                id,
                raft: None,
                store,
                service,
                leadership,
                membership,
                propose_timeout,
                payload_max_bytes,
                guard,
                probing: None,
                checkpoints: None,
                idle_checkpoints: None,
            });
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
        // Empty before openraft touches it: no vote, no entry, nothing purged. A marker left by an
        // earlier start that was empty and had not caught up yet counts the same: the partial log
        // it holds may still lack entries the group committed.
        let empty = store.last_log_id().is_none() && store.saved_vote().is_none();
        let marked = cfg.store_dir.join(VOTE_GUARD_MARKER).exists();
        let sm = StateMachine::new(handler, store.clone(), snapshot, cfg.raft.checkpoint_interval());
        let checkpoints = sm.clone();
        let peers: Vec<(NodeId, String)> =
            cfg.members.iter().filter(|(peer, _)| **peer != id).map(|(peer, n)| (*peer, n.raft_addr.clone())).collect();
        let guarded = (empty || marked) && !peers.is_empty();
        if guarded && !marked {
            set_guard_marker(&cfg.store_dir)?;
        } else if !guarded && marked {
            clear_guard_marker(&cfg.store_dir);
        }
        let quiet = Duration::from_millis(cfg.raft.election_timeout_max_ms);
        let guard = Arc::new(if guarded { VoteGuard::probing(id, quiet) } else { VoteGuard::open(id) });
        // openraft's own election skips the network (and so the guard) when its membership has one
        // voter, which a partial log may still show: off until the guard opens.
        openraft_cfg.enable_elect = !guarded;
        let openraft_cfg = Arc::new(openraft_cfg);
        let network = NetworkFactory::new(
            id,
            cfg.members.get(&id).map(|n| n.raft_addr.clone()),
            Arc::clone(&transport),
            cfg.raft.stream_window(),
            Arc::clone(&guard),
            cfg.raft.snapshot_chunk_bytes(),
        );
        // openraft re-applies the committed entries after the checkpoint (or snapshot) here.
        let opening = std::time::Instant::now();
        let raft = Raft::new(id, openraft_cfg, network, store.clone(), sm)
            .await
            .map_err(|e| NodeError::Raft(e.to_string()))?;
        let (_, from) = checkpoints.checkpoint_status();
        let applied = checkpoints.applied();
        let reapplied = applied.map_or(0, |a| a.index + 1).saturating_sub(from.map_or(0, |f| f.index + 1));
        tracing::info!(id, from = ?from.map(|f| f.index), applied = ?applied.map(|a| a.index), reapplied,
            took_ms = opening.elapsed().as_millis() as u64, "state machine recovered: entries re-applied");
        let service = RaftService::new(id, raft.clone(), &store, Arc::clone(&guard));
        let (leadership, membership) = spawn_leadership_watch(&raft, store.weak());
        let propose_timeout = cfg.propose_timeout;
        let mut node = Self {
            id,
            raft: Some(raft.clone()),
            store,
            service,
            leadership,
            membership,
            propose_timeout,
            payload_max_bytes,
            guard,
            probing: None,
            idle_checkpoints: cfg.raft.checkpoint_interval().map(|every| spawn_idle_checkpoints(&raft, every)),
            checkpoints: Some(checkpoints),
        };
        if guarded {
            let probe = Probe {
                id,
                known: peers.into_iter().collect(),
                members: cfg.members,
                interval: Duration::from_millis(cfg.raft.heartbeat_interval_ms),
                timeout: Duration::from_millis(cfg.raft.election_timeout_min_ms),
                guard: Arc::clone(&node.guard),
                store: node.store.weak(),
                dir: cfg.store_dir.clone(),
                raft,
            };
            node.probing = Some(AbortOnDrop(tokio::spawn(probe.run(transport)).abort_handle()));
        } else {
            initialize_once(id, &raft, &cfg.members).await?;
        }
        Ok(node)
    }

    /// What the vote guard of an empty store restricts, `None` when nothing ([`crate::vote_guard`]).
    pub fn vote_guard(&self) -> Option<String> {
        self.guard.describe()
    }
}

/// The probing of an empty store's replica: ask every peer until [`decide`] decides, then let the
/// guard know, and initialise a new group if this replica is its first member; when catching up,
/// open the guard once the log holds the group's committed entries.
struct Probe {
    id: NodeId,
    /// Raft addresses to ask: the configured members, then every member an answer names or that
    /// introduced itself.
    known: BTreeMap<NodeId, String>,
    members: BTreeMap<NodeId, Node>,
    interval: Duration,
    timeout: Duration,
    guard: Arc<VoteGuard>,
    store: WeakLogStore,
    /// The store directory, where the guard's marker lives.
    dir: PathBuf,
    raft: Raft,
}

impl Probe {
    async fn run<T: Transport>(mut self, transport: Arc<T>) {
        let Ok(body) = wire::encode(&RaftRequest::Probe { from: self.id }) else {
            tracing::error!(id = self.id, "cannot encode a probe; this replica will not vote");
            return;
        };
        let configured: BTreeSet<NodeId> = self.members.keys().copied().collect();
        let mut decided = false;
        loop {
            // Replicas that introduced themselves (their RPCs were refused): a leader among them
            // may be the only current member we can find, when the configured peers all left.
            for (peer, addr) in self.guard.take_introduced() {
                self.known.insert(peer, addr);
            }
            let answers = self.ask(&*transport, &body).await;
            if !decided {
                let decision = decide(self.id, &answers, &configured);
                self.guard.decided(decision, tokio::time::Instant::now());
                match decision {
                    Decision::Wait => {}
                    Decision::Open { .. } => {
                        self.opened();
                        if let Err(e) = initialize_once(self.id, &self.raft, &self.members).await {
                            tracing::warn!(id = self.id, %e, "cannot initialise the group");
                        }
                        return;
                    }
                    Decision::CatchUp { .. } => decided = true,
                }
            }
            if decided {
                // Catching up: keep asking, so that every leader lets our log go back once before
                // its entries are taken, and open once the fsynced log holds the group's entries.
                let Some(store) = self.store.upgrade() else { return };
                if self.guard.catch_up(store.durable_last_log_id()) {
                    self.opened();
                    return;
                }
            }
            tokio::time::sleep(self.interval).await;
        }
    }

    /// One round of probes: every known member's answer (learning the members each names, and
    /// which leader let our log go back).
    async fn ask<T: Transport>(&mut self, transport: &T, body: &Bytes) -> Vec<(NodeId, ProbeReply)> {
        let mut answers = Vec::new();
        for (peer, addr) in &self.known {
            let reply = transport.call(self.id, *peer, addr, RpcKind::Vote, body.clone(), self.timeout).await;
            // An unreachable peer, an older build or a damaged store: no answer.
            if let Ok(Ok(RaftReply::Probe(p))) = reply.map(|b| wire::decode::<RaftReply>(&b)) {
                if p.reverts_allowed {
                    self.guard.leader_answered(*peer);
                }
                answers.push((*peer, p));
            }
        }
        for (_, p) in &answers {
            for (id, addr) in &p.nodes {
                if *id != self.id {
                    self.known.entry(*id).or_insert_with(|| addr.clone());
                }
            }
        }
        answers
    }

    /// The guard is open: the replica may campaign again, and a restart need not guard it.
    fn opened(&self) {
        self.raft.runtime_config().elect(true);
        clear_guard_marker(&self.dir);
    }
}

/// A file in the store directory while its replica, started empty, has not caught up: a restart
/// before then must not let it vote with the partial log it holds by then.
const VOTE_GUARD_MARKER: &str = "vote-guard";

fn set_guard_marker(dir: &Path) -> Result<(), StoreError> {
    let path = dir.join(VOTE_GUARD_MARKER);
    let write = || -> std::io::Result<()> {
        let mut f = std::fs::File::create(&path)?;
        f.write_all(b"started from an empty store: no vote until it holds the group's entries\n")?;
        f.sync_all()
    };
    write().map_err(|e| StoreError::io("write the vote guard marker", &path, e))?;
    crate::mapped_file::sync_dir(dir)
}

fn clear_guard_marker(dir: &Path) {
    let path = dir.join(VOTE_GUARD_MARKER);
    // A marker that stays only costs the next start a round of probes.
    let removed = std::fs::remove_file(&path)
        .map_err(|e| StoreError::io("remove the vote guard marker", &path, e))
        .and_then(|()| crate::mapped_file::sync_dir(dir));
    if let Err(e) = removed {
        tracing::warn!(path = %path.display(), %e, "cannot remove the vote guard marker");
    }
}

/// On the group's first boot, its smallest member id initialises it with `members`.
async fn initialize_once(id: NodeId, raft: &Raft, members: &BTreeMap<NodeId, Node>) -> Result<(), NodeError> {
    if members.keys().next().copied() != Some(id) {
        return Ok(());
    }
    if raft.is_initialized().await.map_err(|e| NodeError::Raft(e.to_string()))? {
        tracing::info!(id, "raft group already initialised; not initialising again");
        return Ok(());
    }
    tracing::info!(id, ?members, "initialising raft group");
    match raft.initialize(members.clone()).await {
        Ok(()) => Ok(()),
        // Another path initialised it meanwhile (e.g. a vote arrived): the goal is reached.
        Err(RaftError::APIError(e)) => {
            tracing::info!(id, %e, "raft group initialised elsewhere");
            Ok(())
        }
        Err(e) => Err(NodeError::Raft(e.to_string())),
    }
}

impl RaftNode {
    fn raft(&self) -> Result<&Raft, NodeError> {
        self.raft.as_ref().ok_or_else(|| NodeError::Damaged(self.store.damage_reason().unwrap_or_default()))
    }

    /// This replica's id.
    pub fn id(&self) -> NodeId {
        self.id
    }

    /// The largest payload [`Self::propose`] accepts: one Raft entry's most less its header.
    pub fn payload_max_bytes(&self) -> usize {
        self.payload_max_bytes
    }

    /// The openraft node (absent when the store is damaged); for tests and advanced callers.
    pub fn raft_handle(&self) -> Option<&Raft> {
        self.raft.as_ref()
    }

    /// The log store (the CommitLog): positions, durable watermark, damage.
    pub fn store(&self) -> &LogStore {
        &self.store
    }

    /// The RPC service to register with a [`RaftServer`](crate::network::tcp::RaftServer) or `MemRouter`.
    pub fn service(&self) -> RaftService {
        self.service.clone()
    }

    /// Leadership changes, as this replica sees them.
    pub fn leadership(&self) -> watch::Receiver<Leadership> {
        self.leadership.clone()
    }

    /// Changes of the membership config in effect (its log id), for who must react to this node
    /// joining or leaving the group without waking for every entry.
    pub fn membership_watch(&self) -> watch::Receiver<MembershipLogId> {
        self.membership.clone()
    }

    /// Propose `payload`; returns once it is committed and applied here.
    pub async fn propose(&self, payload: AppPayload) -> Result<Applied, ProposeError> {
        let raft = self.writable(&payload)?;
        // Boxed: openraft's write future is ~1.7 KiB, and inline it made every future that can
        // propose (a send that may auto-create its topic, and so the broker's request future) that
        // much bigger, copied on every request.
        let write = tokio::time::timeout(self.propose_timeout, Box::pin(raft.client_write(payload))).await;
        match write {
            Err(_) => Err(self.not_applied_in_time()),
            Ok(Ok(r)) => Ok(Applied { log_id: r.log_id, reply: r.data }),
            Ok(Err(RaftError::APIError(e))) => Err(client_write_error(e)),
            // Raft stopped while the write was in flight (its store failed): the entry may have
            // been appended and replicated, and the others may commit it. A definite refusal here
            // would let a client send it again.
            Ok(Err(RaftError::Fatal(f))) => {
                Err(ProposeError::OutcomeUnknown(format!("the replica stopped while the write was in flight: {f}")))
            }
        }
    }

    /// Queues `payload` for the leader's log like [`Self::propose`] and returns once it is queued,
    /// with its outcome to await. Entries queued by successive calls are appended in call order,
    /// so a caller may plan its next entry on the effect of one still in flight (a POP cursor)
    /// and hold its own lock only while it plans and queues, not for a round trip.
    pub async fn submit(&self, payload: AppPayload) -> Result<Submitted, ProposeError> {
        let raft = self.writable(&payload)?;
        let (responder, outcome) = openraft::impls::ProgressResponder::complete_only();
        raft.write(payload)
            .responder(responder)
            .await
            .map_err(|f| ProposeError::Fatal(format!("the replica stopped before the write was queued: {f}")))?;
        let (timeout, late) = (self.propose_timeout, self.not_applied_in_time());
        Ok(Submitted(Box::pin(async move {
            match tokio::time::timeout(timeout, outcome).await {
                Err(_) => Err(late),
                Ok(Ok(Ok(r))) => Ok(Applied { log_id: r.log_id, reply: r.data }),
                Ok(Ok(Err(e))) => Err(client_write_error(e)),
                Ok(Err(_)) => {
                    Err(ProposeError::OutcomeUnknown("the replica stopped while the write was in flight".to_owned()))
                }
            }
        })))
    }

    /// The checks every proposal passes before it is queued: a store to write to, a payload one
    /// entry holds, room on the disk.
    fn writable(&self, payload: &AppPayload) -> Result<&Raft, ProposeError> {
        let raft = self.raft.as_ref().ok_or_else(|| {
            ProposeError::Fatal(format!("store damaged: {}", self.store.damage_reason().unwrap_or_default()))
        })?;
        // Refused here, not by the store: an append the store refuses stops this replica, and one it
        // took but no AppendEntries could carry would stop the group's commits.
        if payload.body.len() > self.payload_max_bytes {
            return Err(ProposeError::TooLarge { size_bytes: payload.body.len(), max_bytes: self.payload_max_bytes });
        }
        // Only a leader appends what it is given; a follower's answer names the leader instead.
        if self.leadership.borrow().role == Role::Leader {
            self.check_disk_room(payload.body.len())?;
        }
        Ok(raft)
    }

    fn not_applied_in_time(&self) -> ProposeError {
        ProposeError::OutcomeUnknown(format!("not applied within {} ms", self.propose_timeout.as_millis()))
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

    /// The index of the last entry in this replica's log, read from the log store itself (openraft's
    /// metrics start empty and lag it).
    pub fn log_end(&self) -> Option<u64> {
        self.store.last_log_id().map(|l| l.index)
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

    /// Refuses a proposal of `payload_bytes` when the log's file system is too full to take it
    /// with [`PROPOSE_DISK_FREE_MIN_BYTES`] to spare, or an append already waits for space: the
    /// leader refuses instead of stalling inside openraft.
    pub fn check_disk_room(&self, payload_bytes: usize) -> Result<(), ProposeError> {
        if let Some(why) = self.store.space_wait_reason() {
            return Err(ProposeError::DiskFull(why));
        }
        // Unknown free space refuses nothing: the append itself still waits rather than fails.
        let Ok(free) = self.store.free_bytes() else { return Ok(()) };
        let needed = (payload_bytes as u64).saturating_add(PROPOSE_DISK_FREE_MIN_BYTES);
        if free < needed {
            return Err(ProposeError::DiskFull(format!("{free} bytes free, {needed} needed")));
        }
        Ok(())
    }

    /// A point-in-time view of this replica.
    pub fn status(&self) -> NodeStatus {
        let damaged = self.store.damage_reason();
        let poisoned = self.store.poison_reason();
        let disk_full = self.check_disk_room(0).err().map(|e| e.to_string());
        let Some(raft) = &self.raft else {
            return NodeStatus {
                last_log_index: self.store.last_log_id().map(|l| l.index),
                damaged,
                poisoned,
                disk_full,
                vote_guard: self.guard.describe(),
                ..NodeStatus::new(self.id, *self.leadership.borrow())
            };
        };
        let (checkpoint, applied_at_start) =
            self.checkpoints.as_ref().map(StateMachine::checkpoint_status).unwrap_or_default();
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
            disk_full,
            vote_guard: self.guard.describe(),
            checkpoint,
            applied_at_start,
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
        // From the server metrics, as `membership_watch` is: openraft publishes them before the full
        // metrics, so whoever wakes on that watch must read the same source or see the old config.
        // Clone the Arc at once: the borrow is a lock inside openraft.
        let membership = raft.server_metrics().borrow_watched().membership_config.clone();
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

    /// The joint membership this node has committed, if the effective membership is one: a change
    /// whose second (uniform) step was never appended, because the leader that began it lost
    /// leadership or stopped first. openraft leaves finishing it to the application
    /// ([`Self::finish_joint`]).
    pub fn committed_joint(&self) -> Option<CommittedJoint> {
        let raft = self.raft.as_ref()?;
        let m = raft.metrics().borrow_watched().clone();
        let (effective, committed) = (&m.membership_config, &m.committed_membership_config);
        let configs = effective.get_joint_config();
        if configs.len() < 2 || effective.log_id() != committed.log_id() {
            return None;
        }
        Some(CommittedJoint {
            log_id: (*effective.log_id())?,
            old_voters: configs.first().cloned().unwrap_or_default(),
            new_voters: configs.last().cloned().unwrap_or_default(),
        })
    }

    /// Enters joint consensus from the current voters to `voters` and stops there: the first of a
    /// change's two steps alone, which is what a leader leaves behind when it loses leadership or
    /// stops between them. For fault tests of [`Self::finish_joint`]; a change is
    /// [`Self::change_membership`]. Returns once the joint membership is committed.
    #[doc(hidden)]
    pub async fn enter_joint(&self, voters: BTreeSet<NodeId>) -> Result<LogId, NodeError> {
        let raft = self.raft()?;
        let observed = raft.metrics().borrow_watched().membership_config.clone();
        let [current] = observed.membership().get_joint_config().as_slice() else {
            return Err(NodeError::Api(format!("the membership at {:?} is joint already", observed.log_id())));
        };
        if *current == voters {
            return Err(NodeError::Api(format!("{voters:?} are the voters already")));
        }
        let nodes: BTreeMap<NodeId, Node> = observed.membership().nodes().map(|(id, n)| (*id, n.clone())).collect();
        let joint = openraft::Membership::new(vec![current.clone(), voters], nodes)
            .map_err(|e| NodeError::Api(e.to_string()))?;
        let only_if = [openraft::Precondition::LastMembershipLogId { last_membership_log_id: *observed.log_id() }];
        let r = raft
            .append_membership(joint, openraft::EntryPayload::Blank, only_if)
            .await
            .map_err(|e| NodeError::Api(e.to_string()))?;
        Ok(r.log_id)
    }

    /// Appends the uniform membership that ends `joint` (its new voters), as openraft's own second
    /// step does: a change that adds no voter, proposed only while `joint` is still the effective
    /// membership, so it cannot undo a change made since.
    pub async fn finish_joint(&self, joint: &CommittedJoint) -> Result<LogId, NodeError> {
        let change = openraft::ChangeMembers::AddVoterIds(BTreeSet::new());
        let only_if = [openraft::Precondition::LastMembershipLogId { last_membership_log_id: Some(joint.log_id) }];
        let r = self
            .raft()?
            .change_membership_if(change, false, only_if)
            .await
            .map_err(|e| NodeError::Api(e.to_string()))?;
        Ok(r.log_id)
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
        let Self { id, raft, store, service, probing, checkpoints, idle_checkpoints, .. } = self;
        drop(idle_checkpoints);
        drop(probing);
        drop(service);
        if let Some(raft) = raft {
            raft.shutdown().await.map_err(|e| NodeError::Raft(e.to_string()))?;
            drop(raft);
        }
        // Applies have stopped: a checkpoint of everything applied spares the next start any re-apply.
        if let Some(sm) = checkpoints {
            if let Some(applied) = sm.checkpoint_now().await {
                tracing::info!(id, %applied, "checkpoint written at shutdown");
            }
            drop(sm);
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

/// Checkpoints a log that went quiet. The state machine checkpoints after apply batches, so once
/// writes stop, what was applied since its last checkpoint would wait for the next write, and a
/// crash before it would re-apply that. The check runs on openraft's state-machine worker, as
/// after an apply, so the capture still sees the handler between two applies.
fn spawn_idle_checkpoints(raft: &Raft, every: Duration) -> AbortOnDrop {
    let raft = raft.clone();
    let task = tokio::spawn(async move {
        loop {
            tokio::time::sleep(every).await;
            let asked = raft
                .with_state_machine(|sm: &mut StateMachine| {
                    sm.maybe_checkpoint();
                    Box::pin(async {})
                })
                .await;
            // Fatal: the core stopped (shutdown or a fatal error); nothing left to checkpoint.
            if asked.is_err() {
                return;
            }
        }
    });
    AbortOnDrop(task.abort_handle())
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
