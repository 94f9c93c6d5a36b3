//! Life cycle of a 3-replica TCP group: a full restart keeps every committed entry with
//! identical bytes at identical positions on every replica; a replica whose store is damaged
//! in the middle refuses to take part; a new replica that joins, or a follower that lagged,
//! after the leader purged its log up to the retention boundary P installs the manifest taken
//! at P and receives every entry after P by replication, byte-identical at the leader's
//! positions (nothing between P and the leader's applied index goes missing); a snapshot from a
//! peer that contradicts the local state is refused without disturbing the node.

use crate::cluster;

use std::collections::BTreeSet;
use std::path::Path;
use std::time::Duration;

use anyhow::Context;
use bytes::Bytes;
use cluster::{Cluster, assert_logs_agree, assert_logs_agree_from, log_of};
use openraft::async_runtime::WatchReceiver;
use raftmq_raft::network::RpcKind;
use raftmq_raft::network::wire::{self, RaftReply, RaftRequest};
use raftmq_raft::snapshot_file::SnapshotData;
use raftmq_raft::state_machine::SnapshotMeta;
use raftmq_raft::type_config::{LogId, NodeId, StoredMembership, Vote, log_id};
use raftmq_raft::{LogStore, ProposeError, Role};

const WAIT: Duration = Duration::from_secs(10);

/// Bytes `[from, end)` of the CommitLog of the replica in `dir`, segment files concatenated.
fn commitlog_range(dir: &Path, seg: u64, from: u64, end: u64) -> anyhow::Result<Vec<u8>> {
    let mut out = Vec::new();
    let mut at = from;
    while at < end {
        let base = at - at % seg;
        let path = dir.join("commitlog").join(format!("{base:020}"));
        let bytes = std::fs::read(&path).with_context(|| format!("{}", path.display()))?;
        let (lo, hi) = (usize::try_from(at - base)?, usize::try_from(end.min(base + seg) - base)?);
        out.extend_from_slice(bytes.get(lo..hi).context("short segment")?);
        at = base + seg;
    }
    Ok(out)
}

fn commitlog_prefix(dir: &Path, seg: u64, end: u64) -> anyhow::Result<Vec<u8>> {
    commitlog_range(dir, seg, 0, end)
}

/// Set the retention boundary at `p` on `leader`, build the snapshot there and wait until the
/// leader purged its log up to it; returns the position of entry `p + 1`.
async fn snapshot_at(c: &Cluster, leader: NodeId, p: u64) -> anyhow::Result<(LogId, u64)> {
    let node = c.node(leader)?;
    let boundary = node.store().log_id_at(p).context("boundary entry")?;
    let end = node.store().entry_position(p).map(|e| e.pos + u64::from(e.size)).context("boundary position")?;
    c.replicas[&leader].handler.set_boundary(boundary);
    node.trigger_snapshot().await?;
    let raft = node.raft_handle().context("raft")?.clone();
    raft.wait(Some(WAIT)).metrics(|m| m.snapshot == Some(boundary), "snapshot at P").await?;
    // max_in_snapshot_log_to_keep = 0: openraft purges exactly to P by itself.
    raft.wait(Some(WAIT)).metrics(|m| m.purged == Some(boundary), "purged to P").await?;
    Ok((boundary, end))
}

/// `id` holds exactly the leader's entries after `p` (same bytes, same positions, same applied
/// payloads), and none up to `p`.
async fn assert_continues_after(c: &Cluster, leader: NodeId, id: NodeId, p: u64, last: u64) -> anyhow::Result<()> {
    let (l, r) = (c.node(leader)?.store(), c.node(id)?.store());
    assert!(r.entry_position(p).is_none(), "replica {id} kept entry {p}");
    for i in p + 1..=last {
        assert_eq!(r.entry_position(i), l.entry_position(i), "entry {i} position differs on {id}");
    }
    let from = l.entry_position(p + 1).context("entry after P")?.pos;
    let end = l.entry_position(last).map(|e| e.pos + u64::from(e.size)).context("last entry")?;
    let seg = c.cfg.segment_size_bytes;
    let (lb, rb) = (commitlog_range(l.dir(), seg, from, end)?, commitlog_range(r.dir(), seg, from, end)?);
    assert!(lb == rb, "replica {id} CommitLog bytes [{from}, {end}) differ from the leader's");
    let after = |n: NodeId| -> Vec<_> {
        c.replicas[&n].handler.recorded().entries.iter().filter(|e| e.log_id.index > p).cloned().collect()
    };
    let (la, ra) = (after(leader), after(id));
    assert!(!la.is_empty());
    assert_eq!(ra, la, "replica {id} applied different entries after P");
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn t20_restart_all_keeps_committed_entries_byte_identical() -> anyhow::Result<()> {
    let mut c = Cluster::tcp(3).await?;
    c.start_all().await?;
    let (leader, term) = c.wait_leader(&c.ids(), 1, WAIT).await?;
    let last = c.write(leader, 700).await?;
    c.wait_applied(last, WAIT).await?;
    let before = log_of(c.node(leader)?).await?;
    c.stop_all().await?;

    c.start_all().await?;
    // Leader restore is off (see config): the group elects a leader in a later term.
    let (leader2, _) = c.wait_leader(&c.ids(), term + 1, WAIT).await?;
    let more = c.write(leader2, 5).await?;
    c.wait_applied(more, WAIT).await?;
    assert_logs_agree(&c, more).await?;
    for id in c.ids() {
        let after = log_of(c.node(id)?).await?;
        for e in &before {
            assert!(after.contains(e), "replica {id} lost or moved committed entry {} at {}", e.0.log_id, e.1);
        }
        // Re-applied after the restart at the same positions.
        let rec = c.replicas[&id].handler.recorded();
        assert!(rec.entries.len() >= 705, "replica {id} applied {}", rec.entries.len());
    }
    let end = before.last().map(|(_, pos, size)| pos + u64::from(*size)).context("empty log")?;
    let seg = c.cfg.segment_size_bytes;
    let reference = commitlog_prefix(&c.replicas[&1].dir, seg, end)?;
    assert!(end > 3 * seg, "test should span several segments, ends at {end}");
    for id in [2, 3] {
        assert!(commitlog_prefix(&c.replicas[&id].dir, seg, end)? == reference, "replica {id} bytes differ");
    }
    c.stop_all().await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn t21_damaged_store_refuses_to_vote_or_lead() -> anyhow::Result<()> {
    let mut c = Cluster::tcp(3).await?;
    c.start_all().await?;
    let (leader, _) = c.wait_leader(&c.ids(), 1, WAIT).await?;
    let last = c.write(leader, 40).await?;
    c.wait_applied(last, WAIT).await?;
    let victim = c.ids().into_iter().find(|id| *id != leader).context("a follower")?;
    let pos = c.node(victim)?.store().entry_position(10).context("entry 10")?;
    c.stop(victim).await?;

    // Flip a payload byte of an fsynced entry in the middle of the log.
    let seg = c.cfg.segment_size_bytes;
    let path = c.replicas[&victim].dir.join("commitlog").join(format!("{:020}", pos.pos - pos.pos % seg));
    let mut bytes = std::fs::read(&path)?;
    let off = usize::try_from(pos.payload_pos % seg + 1)?;
    bytes[off] ^= 0xFF;
    std::fs::write(&path, bytes)?;

    c.start(victim).await?;
    let node = c.node(victim)?;
    let st = node.status();
    assert!(st.damaged.is_some(), "{st:?}");
    assert_eq!(st.leadership.role, Role::Stopped);
    assert!(node.raft_handle().is_none());
    let p = c.payload();
    assert!(matches!(c.node(victim)?.propose(p).await, Err(ProposeError::Fatal(_))));

    // The two healthy replicas still commit; the damaged one never gets entries.
    let more = c.write(leader, 10).await?;
    assert!(more > last);
    let st = c.node(leader)?.status();
    assert!(st.followers.get(&victim).copied().flatten() < Some(more), "{st:?}");
    assert_eq!(c.node(victim)?.store().last_log_id().map(|l| l.index), Some(9));
    c.stop_all().await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn t22_new_learner_installs_snapshot_at_p_and_gets_entries_after_it() -> anyhow::Result<()> {
    let mut c = Cluster::tcp_with(3, 4).await?;
    c.start_all().await?;
    let (leader, _) = c.wait_leader(&c.ids()[..3], 1, WAIT).await?;
    let applied = c.write(leader, 120).await?;
    c.wait_applied(applied, WAIT).await?;

    // Retention: the boundary P is well below the applied index; the leader keeps (P, applied].
    let p = applied / 2;
    let (boundary, next_pos) = snapshot_at(&c, leader, p).await?;
    assert!(c.node(leader)?.store().entry_position(p + 1).is_some());

    // A brand-new replica joins: it installs the manifest at P, continues at the leader's
    // position of P + 1, and receives every entry of (P, applied] by replication.
    c.start(4).await?;
    c.node(leader)?.add_learner(4, c.members[&4].clone()).await?;
    let more = c.write(leader, 30).await?;
    c.wait_applied(more, WAIT).await?;
    let rec = c.replicas[&4].handler.recorded().clone();
    assert_eq!((rec.installs, rec.installed_at), (1, Some(boundary)));
    assert_eq!(rec.entries.first().map(|e| e.log_id.index), Some(p + 1), "entries after P missing on the learner");
    assert_eq!(c.node(4)?.store().entry_position(p + 1).map(|e| e.pos), Some(next_pos));
    assert_eq!(c.node(4)?.store().last_log_id().map(|l| l.index), Some(more));
    assert_continues_after(&c, leader, 4, p, more).await?;

    // It can be promoted to a voter, and a restart keeps it consistent.
    c.node(leader)?.change_membership(BTreeSet::from([1, 2, 3, 4])).await?;
    c.stop(4).await?;
    let reopened = LogStore::open(&c.replicas[&4].dir, &c.cfg)?;
    assert_eq!(reopened.entry_position(more), c.node(leader)?.store().entry_position(more));
    drop(reopened);
    c.start(4).await?;
    let again = c.write(leader, 3).await?;
    c.wait_applied(again, WAIT).await?;
    assert_logs_agree_from(&c, p + 1, again).await?;
    // After the restart the learner re-applied everything after its snapshot.
    assert_eq!(c.replicas[&4].handler.recorded().entries.first().map(|e| e.log_id.index), Some(p + 1));
    c.stop_all().await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn t23_lagging_follower_rebases_onto_snapshot_at_p() -> anyhow::Result<()> {
    let mut c = Cluster::tcp(3).await?;
    c.start_all().await?;
    let (leader, _) = c.wait_leader(&c.ids(), 1, WAIT).await?;
    let follower = c.ids().into_iter().find(|id| *id != leader).context("a follower")?;
    let early = c.write(leader, 10).await?;
    c.wait_applied(early, WAIT).await?;
    c.stop(follower).await?;
    let applied = c.write(leader, 150).await?;
    let p = applied - 40;
    snapshot_at(&c, leader, p).await?;

    // The follower's log ends far below P: it drops it, installs the manifest at P, and gets
    // (P, applied] and everything after by replication.
    c.start(follower).await?;
    let more = c.write(leader, 5).await?;
    c.wait_applied(more, WAIT).await?;
    let rec = c.replicas[&follower].handler.recorded().clone();
    assert_eq!(rec.installs, 1);
    assert_continues_after(&c, leader, follower, p, more).await?;
    assert_logs_agree_from(&c, p + 1, more).await?;
    c.stop_all().await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn t24_inconsistent_snapshot_from_a_peer_is_refused_and_the_node_keeps_running() -> anyhow::Result<()> {
    let mut c = Cluster::tcp(3).await?;
    c.start_all().await?;
    let (leader, term) = c.wait_leader(&c.ids(), 1, WAIT).await?;
    let last = c.write(leader, 20).await?;
    c.wait_applied(last, WAIT).await?;
    let victim = c.ids().into_iter().find(|id| *id != leader).context("a follower")?;
    let committed = c.node(victim)?.status().committed.context("committed")?;
    let membership =
        c.node(victim)?.raft_handle().context("raft")?.metrics().borrow_watched().membership_config.clone();
    let stored = StoredMembership::new(*membership.log_id(), membership.membership().clone());
    let good_data = SnapshotData { next_pos: 1 << 20, manifest: Bytes::from_static(b"0123456789abcdef") }.encode()?;

    // Each would make openraft assert (a log id beyond the sender's vote, or one that contradicts
    // the committed log) or make the state machine's install fail fatally (undecodable data,
    // a next position inside committed entries).
    let cases = [
        ("beyond the vote", Vote::new_committed(term, leader), log_id(term + 1, last + 100), good_data.clone()),
        ("contradicts committed", Vote::new_committed(term + 5, leader), log_id(term + 1, committed.index), good_data),
        ("garbage data", Vote::new_committed(term, leader), log_id(term, last + 100), Bytes::from_static(b"junk")),
        (
            "next position inside the committed log",
            Vote::new_committed(term, leader),
            log_id(term, last + 100),
            SnapshotData { next_pos: 0, manifest: Bytes::new() }.encode()?,
        ),
    ];
    for (what, vote, last_log_id, data) in cases {
        let meta = SnapshotMeta { last_log_id: Some(last_log_id), last_membership: stored.clone() };
        let req = wire::encode(&RaftRequest::InstallSnapshot { vote, meta, data: data.to_vec() })?;
        let reply = c.node(victim)?.service().handle(RpcKind::InstallSnapshot, &req).await;
        match wire::decode::<RaftReply>(&reply)? {
            // Refused either by the request check (a log id newer than the sender's vote) or by
            // the store ("snapshot rejected"); either way nothing is installed.
            RaftReply::Refused(why) => assert!(!why.is_empty(), "{what}: refused without a reason"),
            other => panic!("{what}: snapshot accepted: {other:?}"),
        }
    }

    // Nothing changed: the victim still follows the same leader in the same term and applies.
    let st = c.node(victim)?.status();
    assert_eq!((st.leadership.role, st.leadership.term), (Role::Follower, term), "{st:?}");
    assert_eq!(c.replicas[&victim].handler.recorded().installs, 0);
    let more = c.write(leader, 5).await?;
    c.wait_applied(more, WAIT).await?;
    assert_logs_agree(&c, more).await?;
    c.stop_all().await
}
