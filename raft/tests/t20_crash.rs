//! Life cycle of a 3-replica TCP group: a full restart keeps every committed entry with
//! identical bytes at identical positions on every replica; a replica whose store is damaged
//! in the middle refuses to take part; a new replica that joins after the leader purged its log
//! installs the manifest snapshot and continues at the leader's physical positions.

mod cluster;

use std::collections::BTreeSet;
use std::path::Path;
use std::time::Duration;

use anyhow::Context;
use cluster::{Cluster, assert_logs_agree, assert_logs_agree_from, log_of};
use raftmq_raft::{LogStore, ProposeError, Role};

const WAIT: Duration = Duration::from_secs(10);

/// Bytes `[0, end)` of the CommitLog of the replica in `dir`, segment files concatenated.
fn commitlog_prefix(dir: &Path, seg: u64, end: u64) -> anyhow::Result<Vec<u8>> {
    let mut out = Vec::new();
    let mut base = 0;
    while base < end {
        let path = dir.join("commitlog").join(format!("{base:020}"));
        let bytes = std::fs::read(&path).with_context(|| format!("{}", path.display()))?;
        let take = usize::try_from((end - base).min(seg))?;
        out.extend_from_slice(bytes.get(..take).context("short segment")?);
        base += seg;
    }
    Ok(out)
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
    // openraft may restore the old leader in its term (its vote is persisted and committed).
    let (leader2, _) = c.wait_leader(&c.ids(), term, WAIT).await?;
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
async fn t22_new_learner_installs_snapshot_and_keeps_positions() -> anyhow::Result<()> {
    let mut c = Cluster::tcp_with(3, 4).await?;
    c.start_all().await?;
    let (leader, _) = c.wait_leader(&c.ids()[..3], 1, WAIT).await?;
    let last = c.write(leader, 120).await?;
    c.wait_applied(last, WAIT).await?;

    // Retention: snapshot at the applied state, purge the leader's log up to it.
    let node = c.node(leader)?;
    node.trigger_snapshot().await?;
    let raft = node.raft_handle().context("raft")?.clone();
    let m = raft.wait(Some(WAIT)).metrics(|m| m.snapshot.is_some_and(|s| s.index >= last), "snapshot").await?;
    let snap = m.snapshot.context("snapshot")?;
    node.purge_log(snap.index).await?;
    raft.wait(Some(WAIT)).metrics(|m| m.purged == Some(snap), "purged").await?;

    // A brand-new replica joins: the leader no longer has the early entries, so it ships the
    // manifest and the learner continues at the leader's position of entry snap + 1.
    c.start(4).await?;
    c.node(leader)?.add_learner(4, c.members[&4].clone()).await?;
    let more = c.write(leader, 30).await?;
    c.wait_applied(more, WAIT).await?;
    let learner = c.node(4)?;
    assert_eq!(c.replicas[&4].handler.recorded().installs, 1);
    assert_eq!(learner.store().last_log_id().map(|l| l.index), Some(more));
    for i in snap.index + 1..=more {
        assert_eq!(
            learner.store().entry_position(i),
            c.node(leader)?.store().entry_position(i),
            "entry {i} position differs"
        );
    }
    assert!(learner.store().entry_position(snap.index).is_none());

    // It can be promoted to a voter, and a restart keeps it consistent.
    c.node(leader)?.change_membership(BTreeSet::from([1, 2, 3, 4])).await?;
    c.stop(4).await?;
    let reopened = LogStore::open(&c.replicas[&4].dir, &c.cfg)?;
    assert_eq!(reopened.entry_position(more), c.node(leader)?.store().entry_position(more));
    drop(reopened);
    c.start(4).await?;
    let again = c.write(leader, 3).await?;
    c.wait_applied(again, WAIT).await?;
    assert_logs_agree_from(&c, snap.index + 1, again).await?;
    c.stop_all().await
}
