//! Test harness: a group of `RaftNode`s in one process over any transport (loopback TCP or the
//! in-memory router), a [`Gate`] wrapper that cuts links for partitions, crashes that lose
//! what was never fsynced ([`Cluster::crash`]), and checks that compare the replicas' logs entry
//! by entry and position by position. Waits are on openraft metrics with deadlines, never sleeps
//! (a refused write backs off, as a client would). Only tokio time and ordered collections, so it
//! runs unchanged on a simulation's paused current-thread runtime (`t50_sim`).
#![allow(dead_code)]

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::{Context, anyhow, bail};
use bytes::Bytes;
use openraft::ServerState;
use openraft::storage::RaftLogReader;
use raftmq_raft::network::{MemRouter, RaftServer, RaftService, RpcKind, TcpTransport, Transport, TransportError};
use raftmq_raft::testing::RecordingHandler;
use raftmq_raft::type_config::{Entry, Node, NodeId};
use raftmq_raft::{AppPayload, NodeConfig, RaftConfig, RaftNode};

/// Fast timing for tests; small segments so logs cross segment rolls.
pub fn test_raft_config() -> RaftConfig {
    RaftConfig {
        heartbeat_interval_ms: 50,
        election_timeout_min_ms: 300,
        election_timeout_max_ms: 600,
        segment_size_bytes: 64 * 1024,
        // Snapshots over TCP go in several chunks (network::snapshot_chunks).
        snapshot_chunk_max_bytes: 16,
        index_file_entries: 1024,
        committed_persist_interval_ms: 50,
        ..RaftConfig::default()
    }
}

/// Pause between refused proposals in [`Cluster::write_retrying`].
const WRITE_RETRY_BACKOFF: Duration = Duration::from_millis(10);

/// Shared set of cut links `(from, to)` (ordered, like everything a simulation may iterate).
#[derive(Clone, Default)]
pub struct Cuts(Arc<Mutex<BTreeSet<(NodeId, NodeId)>>>);

impl Cuts {
    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeSet<(NodeId, NodeId)>> {
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }
    pub fn isolate(&self, id: NodeId, all: &[NodeId]) {
        let mut c = self.lock();
        for o in all.iter().copied().filter(|o| *o != id) {
            c.insert((id, o));
            c.insert((o, id));
        }
    }
    pub fn heal(&self) {
        self.lock().clear();
    }
    fn is_cut(&self, from: NodeId, to: NodeId) -> bool {
        self.lock().contains(&(from, to))
    }
}

/// A transport whose links can be cut (requests over a cut link are unreachable; replies over
/// a link cut meanwhile are lost).
pub struct Gate<T> {
    inner: T,
    cuts: Cuts,
}

impl<T: Transport> Transport for Gate<T> {
    async fn call(
        &self,
        from: NodeId,
        target: NodeId,
        addr: &str,
        kind: RpcKind,
        body: Bytes,
        timeout: Duration,
    ) -> Result<Bytes, TransportError> {
        if self.cuts.is_cut(from, target) {
            return Err(TransportError::Unreachable(format!("test cut {from} -> {target}")));
        }
        let r = self.inner.call(from, target, addr, kind, body, timeout).await;
        if self.cuts.is_cut(target, from) {
            return Err(TransportError::Timeout(timeout));
        }
        r
    }

    fn pipelined(&self) -> bool {
        self.inner.pipelined()
    }
}

/// How the harness attaches a node to the network.
pub enum Net {
    /// Loopback TCP: one server (Raft port) per node.
    Tcp(BTreeMap<NodeId, RaftServer>),
    /// In-memory router.
    Mem(MemRouter),
}

impl Net {
    fn attach(&self, id: NodeId, service: RaftService) {
        match self {
            Net::Tcp(servers) => {
                if let Some(s) = servers.get(&id) {
                    s.attach(service);
                }
            }
            Net::Mem(r) => r.register(service),
        }
    }
    fn detach(&self, id: NodeId) {
        match self {
            Net::Tcp(servers) => {
                if let Some(s) = servers.get(&id) {
                    s.detach();
                }
            }
            Net::Mem(r) => r.unregister(id),
        }
    }
}

/// One replica slot: its directory, handler, and the running node (if up).
pub struct Replica {
    pub dir: PathBuf,
    pub handler: Arc<RecordingHandler>,
    pub node: Option<RaftNode>,
}

/// A group of replicas in this process.
pub struct Cluster {
    pub tmp: tempfile::TempDir,
    pub members: BTreeMap<NodeId, Node>,
    pub replicas: BTreeMap<NodeId, Replica>,
    pub net: Net,
    pub cuts: Cuts,
    pub cfg: RaftConfig,
    /// Ids in the initial membership (the others join later as learners).
    pub initial: BTreeSet<NodeId>,
    /// Handlers keep checkpoints ([`RecordingHandler::with_checkpoints`]).
    pub checkpoints: bool,
    next_payload: u64,
}

impl Cluster {
    /// `n` replicas over loopback TCP (ports picked by the OS).
    pub async fn tcp(n: u64) -> anyhow::Result<Self> {
        Self::tcp_with(n, n).await
    }

    /// `total` replica slots over loopback TCP, the first `voters` of them forming the group.
    pub async fn tcp_with(voters: u64, total: u64) -> anyhow::Result<Self> {
        let mut servers = BTreeMap::new();
        let mut members = BTreeMap::new();
        for id in 1..=total {
            let s = RaftServer::bind("127.0.0.1:0".parse()?).await?;
            members.insert(id, Node { raft_addr: s.local_addr().to_string(), data: format!("broker-{id}") });
            servers.insert(id, s);
        }
        let mut c = Self::build(members, Net::Tcp(servers), test_raft_config())?;
        c.initial = (1..=voters).collect();
        Ok(c)
    }

    /// `n` replicas over the in-memory router.
    pub fn mem(n: u64, router: MemRouter, cfg: RaftConfig) -> anyhow::Result<Self> {
        let members = (1..=n).map(|id| (id, Node { raft_addr: format!("mem-{id}"), data: String::new() })).collect();
        Self::build(members, Net::Mem(router), cfg)
    }

    fn build(members: BTreeMap<NodeId, Node>, net: Net, cfg: RaftConfig) -> anyhow::Result<Self> {
        let tmp = tempfile::tempdir()?;
        let replicas = members
            .keys()
            .map(|id| {
                let dir = tmp.path().join(format!("n{id}"));
                (*id, Replica { dir, handler: Arc::new(RecordingHandler::new()), node: None })
            })
            .collect();
        let initial = members.keys().copied().collect();
        Ok(Self {
            tmp,
            members,
            replicas,
            net,
            cuts: Cuts::default(),
            cfg,
            initial,
            checkpoints: false,
            next_payload: 0,
        })
    }

    pub fn ids(&self) -> Vec<NodeId> {
        self.members.keys().copied().collect()
    }

    /// Start (or restart) replica `id` from its directory. A restarted replica gets a fresh
    /// handler: its state is rebuilt by re-applying the log.
    pub async fn start(&mut self, id: NodeId) -> anyhow::Result<()> {
        // The initial members, and the replica itself as a broker's `raftPeers` always names it.
        let members: BTreeMap<NodeId, Node> = self
            .members
            .iter()
            .filter(|(m, _)| self.initial.contains(m) || **m == id)
            .map(|(k, v)| (*k, v.clone()))
            .collect();
        let cfg_raft = self.cfg.clone();
        let cuts = self.cuts.clone();
        let checkpoints = self.checkpoints;
        let r = self.replicas.get_mut(&id).ok_or_else(|| anyhow!("no replica {id}"))?;
        if r.node.is_some() {
            bail!("replica {id} is already running");
        }
        r.handler = Arc::new(if checkpoints { RecordingHandler::with_checkpoints() } else { RecordingHandler::new() });
        let mut cfg = NodeConfig::new("test-group", id, r.dir.clone(), members);
        cfg.raft = cfg_raft;
        cfg.propose_timeout = Duration::from_secs(5);
        let node = match &self.net {
            Net::Tcp(_) => {
                let t = Arc::new(Gate { inner: TcpTransport::new(), cuts });
                RaftNode::start(cfg, r.handler.clone(), t).await?
            }
            Net::Mem(router) => {
                let t = Arc::new(Gate { inner: router.clone(), cuts });
                RaftNode::start(cfg, r.handler.clone(), t).await?
            }
        };
        self.net.attach(id, node.service());
        r.node = Some(node);
        Ok(())
    }

    pub async fn start_all(&mut self) -> anyhow::Result<()> {
        for id in self.initial.clone() {
            self.start(id).await?;
        }
        Ok(())
    }

    /// Stop replica `id` (detached from the network first).
    pub async fn stop(&mut self, id: NodeId) -> anyhow::Result<()> {
        self.net.detach(id);
        let r = self.replicas.get_mut(&id).ok_or_else(|| anyhow!("no replica {id}"))?;
        if let Some(n) = r.node.take() {
            n.shutdown().await?;
        }
        Ok(())
    }

    pub async fn stop_all(&mut self) -> anyhow::Result<()> {
        for id in self.ids() {
            self.stop(id).await?;
        }
        Ok(())
    }

    /// Kill replica `id` without a clean flush. Its store stops acknowledging at once (as if
    /// the process died; [`RaftNode::store`]`.freeze_for_crash_test()` before this lets it keep
    /// appending unacknowledged entries for a while, like a hung disk), the node is stopped, and
    /// its data segments lose the unsynced tail: bytes from a point `keep_fraction` of the way
    /// between the durable watermark and the log end are cut (what the kernel happened to write
    /// back survives), and `garbage` is left there (a torn write).
    pub async fn crash(&mut self, id: NodeId, keep_fraction: f64, garbage: &[u8]) -> anyhow::Result<CrashCut> {
        self.net.detach(id);
        let seg = self.cfg.segment_size_bytes;
        let r = self.replicas.get_mut(&id).ok_or_else(|| anyhow!("no replica {id}"))?;
        let node = r.node.take().ok_or_else(|| anyhow!("replica {id} is not running"))?;
        let durable = node.store().kill_for_crash_test();
        let end = node.store().end_pos().max(durable);
        // openraft may already have stopped on the store's refusals; either way it is down.
        if let Err(e) = node.shutdown().await {
            println!("crashed replica {id} stopped with {e}");
        }
        let cut = durable + ((end - durable) as f64 * keep_fraction.clamp(0.0, 1.0)) as u64;
        cut_segments(&r.dir, seg, cut, garbage)?;
        Ok(CrashCut { durable, end, cut })
    }

    pub fn node(&self, id: NodeId) -> anyhow::Result<&RaftNode> {
        self.replicas.get(&id).and_then(|r| r.node.as_ref()).ok_or_else(|| anyhow!("replica {id} is not running"))
    }

    pub fn running(&self) -> Vec<NodeId> {
        self.replicas.iter().filter(|(_, r)| r.node.is_some()).map(|(id, _)| *id).collect()
    }

    /// Wait until one of `candidates` is leader in a term ≥ `min_term`; returns (leader, term).
    pub async fn wait_leader(
        &self,
        candidates: &[NodeId],
        min_term: u64,
        timeout: Duration,
    ) -> anyhow::Result<(NodeId, u64)> {
        let mut waits = Vec::new();
        for id in candidates {
            let raft = self.node(*id)?.raft_handle().ok_or_else(|| anyhow!("replica {id} has no raft"))?.clone();
            waits.push(Box::pin(async move {
                raft.wait(Some(timeout))
                    .metrics(
                        // Ready for traffic: its term's first entry is applied and a quorum has
                        // acked it recently (openraft refuses writes without a leader lease).
                        |m| {
                            m.state == ServerState::Leader
                                && m.current_term >= min_term
                                && m.last_quorum_acked.is_some()
                                && m.last_applied.is_some_and(|l| l.leader_id.term == m.current_term)
                        },
                        "leader",
                    )
                    .await
                    .map(|m| (m.id, m.current_term))
            }));
        }
        let ((id, term), _) = match futures::future::select_ok(waits).await {
            Ok(x) => x,
            Err(e) => {
                let views: Vec<String> = candidates
                    .iter()
                    .filter_map(|id| self.node(*id).ok())
                    .map(|n| format!("{:?}", n.status()))
                    .collect();
                bail!("no leader elected within {timeout:?} ({e}); replicas: {views:#?}");
            }
        };
        Ok((id, term))
    }

    /// A unique payload.
    pub fn payload(&mut self) -> AppPayload {
        self.next_payload += 1;
        let n = self.next_payload;
        let len = 16 + (n * 37 % 700) as usize;
        let body: Vec<u8> = (0..len).map(|i| (n as usize).wrapping_mul(31).wrapping_add(i) as u8).collect();
        AppPayload::new((n % 7) as u8, body)
    }

    /// Propose `count` payloads at `leader`, sequentially; returns the last index.
    pub async fn write(&mut self, leader: NodeId, count: usize) -> anyhow::Result<u64> {
        let mut last = 0;
        for _ in 0..count {
            let p = self.payload();
            let a = self.node(leader)?.propose(p).await?;
            last = a.log_id.index;
        }
        Ok(last)
    }

    /// Propose `count` payloads at whichever running replica leads, retrying proposals that
    /// were not appended (leader changed, lease lapsed) until `timeout`; returns the last index.
    pub async fn write_retrying(&mut self, count: usize, timeout: Duration) -> anyhow::Result<u64> {
        let deadline = tokio::time::Instant::now() + timeout;
        let mut last = 0;
        let mut done = 0;
        while done < count {
            let left = deadline.saturating_duration_since(tokio::time::Instant::now());
            let (leader, _) = self.wait_leader(&self.running(), 1, left).await?;
            let p = self.payload();
            match self.node(leader)?.propose(p).await {
                Ok(a) => {
                    last = a.log_id.index;
                    done += 1;
                }
                // A leader whose lease lapsed (e.g. just healed) refuses until its next heartbeat
                // round: back off like a client instead of spinning, which under a simulation's
                // paused clock would never let that heartbeat's timer fire.
                Err(raftmq_raft::ProposeError::ForwardToLeader { .. }) if !left.is_zero() => {
                    tokio::time::sleep(WRITE_RETRY_BACKOFF).await;
                }
                Err(e) => return Err(e.into()),
            }
        }
        Ok(last)
    }

    /// Wait until every running replica applied at least `index`.
    pub async fn wait_applied(&self, index: u64, timeout: Duration) -> anyhow::Result<()> {
        for id in self.running() {
            if let Some(raft) = self.node(id)?.raft_handle() {
                raft.wait(Some(timeout))
                    .applied_index_at_least(Some(index), "applied")
                    .await
                    .with_context(|| format!("replica {id} did not apply {index}"))?;
            }
        }
        Ok(())
    }
}

/// Where a crash cut a replica's CommitLog.
#[derive(Debug, Clone, Copy)]
pub struct CrashCut {
    /// Durable watermark when the replica died: everything below was fsynced.
    pub durable: u64,
    /// Log end when it died.
    pub end: u64,
    /// First byte lost.
    pub cut: u64,
}

/// Lose every CommitLog byte at and after `cut` (files shortened or deleted, as the page cache
/// never reached the disk), leaving `garbage` at `cut` if given.
pub fn cut_segments(dir: &std::path::Path, seg: u64, cut: u64, garbage: &[u8]) -> anyhow::Result<()> {
    let seg_dir = dir.join("commitlog");
    if !seg_dir.exists() {
        return Ok(());
    }
    for e in std::fs::read_dir(&seg_dir)? {
        let e = e?;
        let base: u64 = e.file_name().to_string_lossy().parse()?;
        if base + seg <= cut {
            continue;
        }
        if base > cut || (base == cut && garbage.is_empty()) {
            std::fs::remove_file(e.path())?;
            continue;
        }
        let f = std::fs::OpenOptions::new().write(true).open(e.path())?;
        f.set_len(cut - base)?;
        let room = usize::try_from(base + seg - cut)?;
        std::os::unix::fs::FileExt::write_all_at(&f, &garbage[..garbage.len().min(room)], cut - base)?;
    }
    Ok(())
}

/// Entries with their position and record size.
pub type PlacedLog = Vec<(Entry, u64, u32)>;

/// All live entries of a replica's store with their positions.
pub async fn log_of(node: &RaftNode) -> anyhow::Result<PlacedLog> {
    let store = node.store();
    let mut reader = store.reader();
    let entries = reader.try_get_log_entries(0..u64::MAX).await?;
    entries
        .into_iter()
        .map(|e| {
            let p = store.entry_position(e.log_id.index).ok_or_else(|| anyhow!("no position for {}", e.log_id))?;
            Ok((e, p.pos, p.size))
        })
        .collect()
}

/// Check that the logs of all running replicas agree (same entries, same positions) up to
/// `upto` and that each has every index up to it.
pub async fn assert_logs_agree(c: &Cluster, upto: u64) -> anyhow::Result<()> {
    assert_logs_agree_from(c, 0, upto).await
}

/// [`assert_logs_agree`] for indexes `from..=upto` (replicas that installed a snapshot lack the
/// entries before it).
pub async fn assert_logs_agree_from(c: &Cluster, from: u64, upto: u64) -> anyhow::Result<()> {
    let mut reference: Option<(NodeId, PlacedLog)> = None;
    for id in c.running() {
        let log: Vec<_> = log_of(c.node(id)?)
            .await?
            .into_iter()
            .filter(|(e, _, _)| (from..=upto).contains(&e.log_id.index))
            .collect();
        let last = log.last().map(|(e, _, _)| e.log_id.index);
        if last != Some(upto) {
            bail!("replica {id} log ends at {last:?}, expected at least {upto}");
        }
        match &reference {
            None => reference = Some((id, log)),
            Some((rid, rlog)) => {
                if rlog.len() != log.len() {
                    bail!("replica {id} has {} entries up to {upto}, replica {rid} has {}", log.len(), rlog.len());
                }
                for (a, b) in rlog.iter().zip(log.iter()) {
                    if a != b {
                        bail!("replica {rid} and {id} differ: {:?}@{} vs {:?}@{}", a.0.log_id, a.1, b.0.log_id, b.1);
                    }
                }
            }
        }
    }
    Ok(())
}
