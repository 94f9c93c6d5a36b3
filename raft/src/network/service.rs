//! [`RaftService`]: the server side of Raft RPC. Decodes a request, hands it to the local
//! openraft node, encodes the reply. Any failure (bad bytes, kind/body mismatch, node stopped)
//! becomes `RaftReply::Refused`, which the caller treats as "unreachable" and backs off.
//!
//! Requests of a pipelined stream go through [`AppendStreams`], which hands them to openraft in
//! stream order whatever order they arrive in.
//!
//! A replica whose store is damaged has no openraft node at all: it refuses every RPC, so it
//! neither votes nor accepts a leader's entries, and it never campaigns (see `node`).
//!
//! A replica that started from an empty store passes votes, pre-votes and leadership transfers
//! through its [`VoteGuard`] first, and answers other replicas' Probe from its metrics; an
//! Introduce (a replica it refused says where it is) goes to its guard, for its probes to ask.
//!
//! Every term a request carries is checked before openraft sees it ([`check_term`]): at most
//! [`RAFT_TERM_AHEAD_MAX_COUNT`] beyond ours and never near `u64::MAX` (openraft's `term + 1`
//! would wrap), and no log id in it newer than its sender's vote. A Probe relaxes the leader's
//! check on a follower's log (`allow_next_revert`) only for a member of the group.
//!
//! A snapshot is checked before openraft sees it ([`check_snapshot`]): openraft asserts on a
//! snapshot that contradicts its vote or committed log, and a snapshot our state machine cannot
//! install is a fatal storage error, so a corrupt or malicious peer could otherwise stop the node.
//! The check reads the committed log id a moment before openraft does; committed only grows,
//! and a snapshot of a protocol-following leader passes at any moment. A snapshot sent in chunks
//! ([`SnapshotAssembly`]) is checked the same way once its last chunk arrived.

use std::sync::Arc;
use std::sync::Mutex;
use std::sync::MutexGuard;
use std::sync::PoisonError;

use bytes::Bytes;

use openraft::async_runtime::WatchReceiver;
use openraft::raft::SnapshotResponse;
use raftmq_common::limits::{RAFT_TERM_AHEAD_MAX_COUNT, RAFT_TERM_MAX};

use super::append_stream::{AppendStreams, StreamStats};
use super::snapshot_chunks::{Accepted, Chunk, SnapshotAssembly};
use super::transport::RpcKind;
use super::wire::{self, RaftReply, RaftRequest};
use crate::log_store::{LogStore, WeakLogStore};
use crate::snapshot_file::SnapshotData;
use crate::state_machine::Raft;
use crate::state_machine::{Snapshot, SnapshotMeta};
use crate::type_config::{LogId, Membership, NodeId, Vote};
use crate::vote_guard::{ProbeReply, VoteGuard};

/// Handles Raft RPCs addressed to one local node. Cheap to clone.
#[derive(Clone)]
pub struct RaftService {
    inner: Arc<Inner>,
}

struct Inner {
    id: NodeId,
    raft: Result<Raft, String>,
    /// The node's log store, for snapshot checks; weak so a registered service never keeps a
    /// stopped node's files open.
    store: Option<WeakLogStore>,
    /// Pipelined AppendEntries streams from leaders.
    streams: AppendStreams,
    /// Refuses votes while this replica's empty store may have forgotten what it promised.
    guard: Arc<VoteGuard>,
    /// The snapshot being received in chunks.
    chunks: Mutex<SnapshotAssembly>,
}

/// The service's clock: tokio's, so a simulation with paused time decides alike every run.
fn now() -> std::time::Instant {
    tokio::time::Instant::now().into_std()
}

impl RaftService {
    /// Serve RPCs with `raft`, whose log store is `store`.
    pub fn new(id: NodeId, raft: Raft, store: &LogStore, guard: Arc<VoteGuard>) -> Self {
        let inner = Inner {
            id,
            raft: Ok(raft),
            store: Some(store.weak()),
            streams: AppendStreams::default(),
            guard,
            chunks: Mutex::default(),
        };
        Self { inner: Arc::new(inner) }
    }

    /// Refuse every RPC, saying why (damaged store).
    pub fn refusing(id: NodeId, why: String) -> Self {
        let guard = Arc::new(VoteGuard::open(id));
        let streams = AppendStreams::default();
        let chunks = Mutex::default();
        let inner = Inner { id, raft: Err(why), store: None, streams, guard, chunks };
        Self { inner: Arc::new(inner) }
    }

    /// The node this service answers for.
    pub fn id(&self) -> NodeId {
        self.inner.id
    }

    /// What the pipelined AppendEntries streams to this node have seen.
    pub fn stream_stats(&self) -> StreamStats {
        self.inner.streams.stats()
    }

    /// Process one encoded request of `kind`; always returns an encoded reply.
    pub async fn handle(&self, kind: RpcKind, body: &[u8]) -> Bytes {
        let reply = self.dispatch(kind, body).await.unwrap_or_else(RaftReply::Refused);
        wire::encode(&reply).unwrap_or_else(|e| {
            // A reply that cannot be encoded is a bug; the caller sees garbage and retries.
            tracing::error!(id = self.inner.id, %e, "cannot encode raft reply");
            Bytes::new()
        })
    }

    async fn dispatch(&self, kind: RpcKind, body: &[u8]) -> Result<RaftReply, String> {
        let raft = self.inner.raft.as_ref().map_err(|why| format!("node {} refuses: {why}", self.inner.id))?;
        // Any RPC (heartbeats come several times a second) frees a transfer its sender gave up on:
        // an uncontended lock per RPC, not per message.
        self.chunks().expire(now(), false);
        let req: RaftRequest = wire::decode(body).map_err(|e| e.to_string())?;
        if req.kind() != kind {
            return Err(format!("request {:?} sent as {kind:?}", req.kind()));
        }
        let fail = |e: &dyn std::fmt::Display| format!("node {}: {e}", self.inner.id);
        let ours = raft.metrics().borrow_watched().current_term;
        check_request_terms(&req, ours).map_err(|e| {
            tracing::warn!(id = self.inner.id, %e, "refusing a raft rpc with an implausible term");
            format!("node {}: {e}", self.inner.id)
        })?;
        Ok(match req {
            RaftRequest::AppendEntries(r) => {
                self.inner.guard.accepts_leader(r.vote.leader_id.term, r.vote.leader_id.voted_for)?;
                RaftReply::AppendEntries(raft.append_entries(r).await.map_err(|e| fail(&e))?)
            }
            RaftRequest::Vote(r) => {
                self.election_permitted(raft, r.vote.leader_id.term, r.last_log_id)?;
                RaftReply::Vote(raft.vote(r).await.map_err(|e| fail(&e))?)
            }
            RaftRequest::PreVote(r) => {
                self.election_permitted(raft, r.vote.leader_id.term, r.last_log_id)?;
                RaftReply::Vote(raft.pre_vote(r).await.map_err(|e| fail(&e))?)
            }
            RaftRequest::Probe { from } => {
                let store = self.inner.store.as_ref().and_then(WeakLogStore::upgrade);
                let store = store.ok_or_else(|| format!("node {}: log store closed", self.inner.id))?;
                // Only a replica that started empty asks: if we lead and replicated to it before,
                // its log has gone back, which openraft otherwise asserts never happens.
                let mut reverts_allowed = false;
                let metrics = raft.metrics().borrow_watched().clone();
                let member = metrics.membership_config.membership().nodes().any(|(id, _)| *id == from);
                if metrics.state == openraft::ServerState::Leader && member {
                    let allowed = raft.trigger().allow_next_revert(&from, true).await;
                    reverts_allowed = matches!(allowed, Ok(Ok(())));
                    tracing::debug!(id = self.inner.id, from, ?allowed, "a replica with an empty store asked");
                }
                let m = raft.metrics().borrow_watched().clone();
                let membership = m.membership_config.membership();
                RaftReply::Probe(ProbeReply {
                    term: m.current_term,
                    last_log_id: store.last_log_id(),
                    committed: m.local_committed.max(m.cluster_committed),
                    voters: membership.get_joint_config().clone(),
                    nodes: membership.nodes().map(|(id, n)| (*id, n.raft_addr.clone())).collect(),
                    reverts_allowed,
                })
            }
            RaftRequest::Introduce { from, raft_addr } => {
                let taken = self.inner.guard.introduce(from, &raft_addr);
                if taken {
                    tracing::info!(id = self.inner.id, from, %raft_addr, "a replica introduced itself; asking it too");
                }
                RaftReply::Introduced { taken }
            }
            RaftRequest::InstallSnapshot { vote, meta, data } => {
                self.inner.guard.accepts_leader(vote.leader_id.term, vote.leader_id.voted_for)?;
                self.chunks().expire(now(), true);
                self.install_snapshot(raft, vote, meta, Bytes::from(data)).await?
            }
            RaftRequest::InstallSnapshotChunk { vote, meta, offset, total, data } => {
                self.inner.guard.accepts_leader(vote.leader_id.term, vote.leader_id.voted_for)?;
                // A deposed leader's chunk learns the newer vote at once (openraft then steps it
                // down) and leaves the current leader's transfer alone.
                let current = raft.metrics().borrow_watched().vote;
                if vote.partial_cmp(&current) == Some(std::cmp::Ordering::Less) {
                    return Ok(RaftReply::InstallSnapshot(SnapshotResponse::new(current)));
                }
                let chunk = Chunk { vote: &vote, snapshot: meta.last_log_id, offset, total, data: &data };
                let accepted = self.chunks().accept(chunk, now());
                match accepted.map_err(|e| format!("node {}: snapshot chunk refused: {e}", self.inner.id))? {
                    Accepted::More(received) => RaftReply::SnapshotChunk { received },
                    Accepted::Complete(all) => self.install_snapshot(raft, vote, meta, Bytes::from(all)).await?,
                }
            }
            RaftRequest::TransferLeader(r) => {
                // Its campaign's term is checked against the floor when it asks for votes.
                self.inner.guard.accepts_transfer(self.durable_last())?;
                RaftReply::TransferLeader(raft.handle_transfer_leader(r).await.map_err(|e| fail(&e))?)
            }
            RaftRequest::StreamAppend { stream_id, seq, rpc } => {
                self.inner.guard.accepts_leader(rpc.vote.leader_id.term, rpc.vote.leader_id.voted_for)?;
                self.inner.streams.handle(self.inner.id, raft, stream_id, seq, rpc).await
            }
        })
    }
}

impl RaftService {
    /// The snapshot being received in chunks.
    fn chunks(&self) -> MutexGuard<'_, SnapshotAssembly> {
        self.inner.chunks.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Checks a whole received snapshot ([`check_snapshot`]) and hands it to openraft.
    async fn install_snapshot(
        &self,
        raft: &Raft,
        vote: Vote,
        meta: SnapshotMeta,
        data: Bytes,
    ) -> Result<RaftReply, String> {
        let store = self.inner.store.as_ref().and_then(WeakLogStore::upgrade);
        let store = store.ok_or_else(|| format!("node {}: log store closed", self.inner.id))?;
        let committed = raft.metrics().borrow_watched().local_committed;
        check_snapshot(&vote, &meta, &data, committed, &store).map_err(|e| {
            tracing::warn!(id = self.inner.id, %e, ?meta, "rejecting an inconsistent snapshot");
            format!("node {}: snapshot rejected: {e}", self.inner.id)
        })?;
        let snap = Snapshot { meta, snapshot: data };
        let response = raft.install_full_snapshot(vote, snap).await;
        Ok(RaftReply::InstallSnapshot(response.map_err(|e| format!("node {}: {e}", self.inner.id))?))
    }

    /// The local last fsynced log id (`None` once the store is closed).
    fn durable_last(&self) -> Option<LogId> {
        self.inner.store.as_ref().and_then(WeakLogStore::upgrade).and_then(|s| s.durable_last_log_id())
    }

    /// Whether the vote guard lets this replica take part in an election now.
    fn election_permitted(&self, raft: &Raft, term: u64, candidate_last: Option<LogId>) -> Result<(), String> {
        let told = raft.metrics().borrow_watched().cluster_committed;
        self.inner.guard.permits(term, candidate_last, self.durable_last(), told, tokio::time::Instant::now())
    }
}

/// Whether `term` is one a protocol-following peer could send to a replica at term `ours`.
pub fn check_term(term: u64, ours: u64) -> Result<(), String> {
    if term > RAFT_TERM_MAX || term > ours.saturating_add(RAFT_TERM_AHEAD_MAX_COUNT) {
        return Err(format!(
            "term {term} is implausible: this replica is at term {ours} (at most {RAFT_TERM_AHEAD_MAX_COUNT} ahead \
             accepted)"
        ));
    }
    Ok(())
}

/// [`check_term`] on every term `req` carries, and no log id in it newer than the sender's vote.
pub fn check_request_terms(req: &RaftRequest, ours: u64) -> Result<(), String> {
    let beyond = |what: &str, id: &Option<LogId>, vote: u64| match id {
        Some(l) if l.leader_id.term > vote => Err(format!("{what} {l} is newer than the sender's term {vote}")),
        _ => Ok(()),
    };
    match req {
        RaftRequest::AppendEntries(r) | RaftRequest::StreamAppend { rpc: r, .. } => {
            let vote = r.vote.leader_id.term;
            check_term(vote, ours)?;
            beyond("prev_log_id", &r.prev_log_id, vote)?;
            beyond("leader_commit", &r.leader_commit, vote)?;
            r.entries.iter().try_for_each(|e| beyond("entry", &Some(e.log_id), vote))
        }
        RaftRequest::Vote(r) | RaftRequest::PreVote(r) => {
            check_term(r.vote.leader_id.term, ours)?;
            beyond("last_log_id", &r.last_log_id, r.vote.leader_id.term)
        }
        RaftRequest::InstallSnapshot { vote, meta, .. } | RaftRequest::InstallSnapshotChunk { vote, meta, .. } => {
            check_term(vote.leader_id.term, ours)?;
            beyond("snapshot last_log_id", &meta.last_log_id, vote.leader_id.term)
        }
        RaftRequest::TransferLeader(r) => check_term(r.from_leader().leader_id.term, ours),
        RaftRequest::Probe { .. } | RaftRequest::Introduce { .. } => Ok(()),
    }
}

/// Check a received snapshot against the sender's vote, its own encoding, and the local log
/// (`committed` = the local committed log id). Every condition openraft asserts on, and every
/// one our `install_snapshot` would fail on, is refused here.
pub fn check_snapshot(
    vote: &Vote,
    meta: &SnapshotMeta,
    data: &Bytes,
    committed: Option<LogId>,
    store: &LogStore,
) -> Result<(), String> {
    let last = meta.last_log_id.ok_or("snapshot without a last log id")?;
    if last.leader_id.term > vote.leader_id.term {
        return Err(format!("snapshot last log id {last} is beyond the sender's vote {vote}"));
    }
    let m = &meta.last_membership;
    if m.log_id().is_some_and(|l| l > last) {
        return Err(format!("snapshot membership {:?} is after its last log id {last}", m.log_id()));
    }
    // A snapshot of a group always carries a quorum (openraft's default membership has none).
    let configs = m.membership().get_joint_config();
    if configs.is_empty() {
        return Err("snapshot membership has no voters".into());
    }
    let nodes: std::collections::BTreeMap<_, _> = m.membership().nodes().map(|(k, v)| (*k, v.clone())).collect();
    Membership::new(configs.clone(), nodes).map_err(|e| format!("snapshot membership is invalid: {e}"))?;
    if let Some(c) = committed
        && last > c
        && last.index <= c.index
    {
        return Err(format!("snapshot last log id {last} contradicts the committed log id {c}"));
    }
    let d = SnapshotData::decode(data).map_err(|r| format!("snapshot data: {r}"))?;
    store.check_snapshot_point(last, d.next_pos, committed).map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use std::collections::{BTreeMap, BTreeSet};

    use super::*;
    use crate::config::RaftConfig;
    use crate::type_config::{Node, StoredMembership, log_id};

    fn membership(at: Option<LogId>) -> StoredMembership {
        let nodes: BTreeMap<u64, Node> = (1..=3).map(|i| (i, Node::new(format!("127.0.0.1:{i}"), ""))).collect();
        let m = Membership::new(vec![BTreeSet::from([1, 2, 3])], nodes).expect("valid membership");
        StoredMembership::new(at, m)
    }

    fn data(next_pos: u64) -> Bytes {
        SnapshotData { next_pos, manifest: Bytes::from_static(b"m") }.encode().expect("encode")
    }

    #[test]
    fn rejects_inconsistent_snapshots() -> anyhow::Result<()> {
        let dir = tempfile::tempdir()?;
        let cfg = RaftConfig { segment_size_bytes: 4096, index_file_entries: 16, ..RaftConfig::default() };
        let store = LogStore::open(dir.path(), &cfg)?;
        let vote = Vote::new_committed(5, 1);
        let meta = |last: Option<LogId>, m: StoredMembership| SnapshotMeta { last_log_id: last, last_membership: m };
        let good = meta(Some(log_id(4, 100)), membership(Some(log_id(1, 1))));
        assert_eq!(check_snapshot(&vote, &good, &data(8192), None, &store), Ok(()));

        let cases = [
            ("no last log id", meta(None, membership(None)), data(8192), None),
            ("term beyond vote", meta(Some(log_id(6, 100)), membership(None)), data(8192), None),
            ("membership after last", meta(Some(log_id(4, 100)), membership(Some(log_id(4, 101)))), data(8192), None),
            ("empty membership", meta(Some(log_id(4, 100)), StoredMembership::default()), data(8192), None),
            ("contradicts committed", good.clone(), data(8192), Some(log_id(3, 100))),
            ("garbage data", good.clone(), Bytes::from_static(b"junk"), None),
            ("tail shorter than a blank", good.clone(), data(4096 - 4), None),
            ("not a java long", good.clone(), data(u64::MAX - 4095), None),
        ];
        for (what, m, d, committed) in cases {
            assert!(check_snapshot(&vote, &m, &d, committed, &store).is_err(), "{what} accepted");
        }
        Ok(())
    }

    #[test]
    fn implausible_terms_are_refused() {
        use openraft::raft::{AppendEntriesRequest, VoteRequest};
        assert_eq!(check_term(5, 3), Ok(()));
        assert_eq!(check_term(RAFT_TERM_AHEAD_MAX_COUNT + 3, 3), Ok(()));
        assert!(check_term(RAFT_TERM_AHEAD_MAX_COUNT + 4, 3).is_err());
        assert!(check_term(u64::MAX, 3).is_err());
        assert!(check_term(u64::MAX, u64::MAX - 1).is_err(), "never near the wrap, whatever our term");

        let vote = |term| RaftRequest::Vote(VoteRequest::new(Vote::new(term, 2), Some(log_id(1, 9))));
        assert!(check_request_terms(&vote(u64::MAX), 1).is_err());
        assert!(check_request_terms(&vote(2), 1).is_ok());
        let stale_log = RaftRequest::Vote(VoteRequest::new(Vote::new(2, 2), Some(log_id(7, 9))));
        assert!(check_request_terms(&stale_log, 1).is_err(), "a last log id newer than the vote");
        let append = |entry_term| {
            RaftRequest::AppendEntries(AppendEntriesRequest::<crate::type_config::TypeConfig> {
                vote: Vote::new_committed(3, 1),
                prev_log_id: Some(log_id(2, 6)),
                entries: vec![crate::type_config::Entry {
                    log_id: log_id(entry_term, 7),
                    payload: crate::type_config::EntryPayload::Blank,
                }],
                leader_commit: Some(log_id(2, 6)),
            })
        };
        assert!(check_request_terms(&append(3), 3).is_ok());
        assert!(check_request_terms(&append(4), 3).is_err(), "an entry newer than its leader's term");
    }
}
