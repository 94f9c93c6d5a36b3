//! A 3-replica group over loopback TCP (the remoting transport): election, replication,
//! leader failover, catch-up of a stopped follower, truncation of a deposed leader's
//! uncommitted tail, leadership transfer. Every replica must hold the same entries at the same
//! physical positions.

mod cluster;

use std::time::{Duration, Instant};

use cluster::{Cluster, assert_logs_agree, log_of};
use raftmq_raft::{ProposeError, Role};

const WAIT: Duration = Duration::from_secs(10);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn t10_election_and_replication() -> anyhow::Result<()> {
    let mut c = Cluster::tcp(3).await?;
    c.start_all().await?;
    let (leader, _) = c.wait_leader(&c.ids(), 1, WAIT).await?;
    let last = c.write(leader, 60).await?;
    c.wait_applied(last, WAIT).await?;
    assert_logs_agree(&c, last).await?;
    // Every replica applied the same payloads at the same positions.
    let reference = c.replicas[&leader].handler.recorded().entries.clone();
    assert!(reference.len() >= 60);
    for id in c.ids() {
        assert_eq!(c.replicas[&id].handler.recorded().entries, reference, "replica {id}");
    }
    // The leadership watch and the status agree with openraft.
    let l = *c.node(leader)?.leadership().borrow();
    assert_eq!((l.role, l.leader_id), (Role::Leader, Some(leader)));
    let st = c.node(leader)?.status();
    assert_eq!(st.voters.len(), 3);
    assert!(st.followers.values().all(|m| m.is_some()), "{st:?}");
    // A follower refuses proposals and names the leader.
    let follower = c.ids().into_iter().find(|id| *id != leader).expect("a follower");
    let p = c.payload();
    match c.node(follower)?.propose(p).await {
        Err(ProposeError::ForwardToLeader { leader_id, leader_addr, leader_data }) => {
            assert_eq!(leader_id, Some(leader));
            assert_eq!(leader_addr.as_deref(), Some(c.members[&leader].raft_addr.as_str()));
            assert_eq!(leader_data, Some(format!("broker-{leader}")));
        }
        other => panic!("expected ForwardToLeader, got {other:?}"),
    }
    c.stop_all().await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn t11_leader_shutdown_new_leader_commits_within_3s() -> anyhow::Result<()> {
    let mut c = Cluster::tcp(3).await?;
    c.start_all().await?;
    let (old, term) = c.wait_leader(&c.ids(), 1, WAIT).await?;
    let last = c.write(old, 20).await?;
    c.wait_applied(last, WAIT).await?;
    let killed_at = Instant::now();
    c.stop(old).await?;
    let rest = c.running();
    let (new, new_term) = c.wait_leader(&rest, term + 1, Duration::from_secs(3)).await?;
    let committed = c.write(new, 1).await?;
    let took = killed_at.elapsed();
    assert!(took < Duration::from_secs(3), "new leader committed after {took:?}");
    assert!(new_term > term && committed > last);
    c.wait_applied(committed, WAIT).await?;
    assert_logs_agree(&c, committed).await?;
    // The old leader comes back as a follower and catches up.
    c.start(old).await?;
    let more = c.write(new, 5).await?;
    c.wait_applied(more, WAIT).await?;
    assert_logs_agree(&c, more).await?;
    c.stop_all().await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn t12_stopped_follower_catches_up() -> anyhow::Result<()> {
    let mut c = Cluster::tcp(3).await?;
    c.start_all().await?;
    let (leader, _) = c.wait_leader(&c.ids(), 1, WAIT).await?;
    let follower = c.ids().into_iter().find(|id| *id != leader).expect("a follower");
    c.write(leader, 10).await?;
    c.stop(follower).await?;
    // Enough to roll several 64 KiB segments while the follower is away.
    let last = c.write(leader, 300).await?;
    c.start(follower).await?;
    c.wait_applied(last, WAIT).await?;
    assert_logs_agree(&c, last).await?;
    // The leader's view of the follower's progress catches up too (metrics lag the RPCs).
    let raft = c.node(leader)?.raft_handle().expect("raft").clone();
    raft.wait(Some(WAIT))
        .metrics(
            |m| m.replication.as_ref().and_then(|r| r.get(&follower).copied().flatten()).map(|l| l.index) == Some(last),
            "follower matched",
        )
        .await?;
    let st = c.node(leader)?.status();
    assert_eq!(st.followers.get(&follower).copied().flatten(), Some(last), "{st:?}");
    c.stop_all().await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn t13_deposed_leader_tail_is_truncated() -> anyhow::Result<()> {
    let mut c = Cluster::tcp(3).await?;
    c.start_all().await?;
    let (old, term) = c.wait_leader(&c.ids(), 1, WAIT).await?;
    let base = c.write(old, 10).await?;
    c.wait_applied(base, WAIT).await?;

    // Isolate the leader and write to it: appended locally, never committed.
    c.cuts.isolate(old, &c.ids());
    let old_raft = c.node(old)?.raft_handle().expect("raft").clone();
    let mut pending = Vec::new();
    for _ in 0..5 {
        let p = c.payload();
        let raft = old_raft.clone();
        pending.push(tokio::spawn(async move { raft.client_write(p).await }));
    }
    old_raft.wait(Some(WAIT)).log_index_at_least(Some(base + 5), "uncommitted tail").await?;
    let uncommitted: Vec<_> =
        log_of(c.node(old)?).await?.into_iter().filter(|(e, _, _)| e.log_id.index > base).collect();
    assert_eq!(uncommitted.len(), 5);

    // The majority elects a new leader and commits different entries at those indexes.
    let rest: Vec<_> = c.ids().into_iter().filter(|id| *id != old).collect();
    let (new, _) = c.wait_leader(&rest, term + 1, WAIT).await?;
    let last = c.write(new, 8).await?;
    assert!(last > base + 5);

    c.cuts.heal();
    c.wait_applied(last, WAIT).await?;
    assert_logs_agree(&c, last).await?;
    let now: Vec<_> = log_of(c.node(old)?).await?.into_iter().filter(|(e, _, _)| e.log_id.index > base).collect();
    for (was, is) in uncommitted.iter().zip(now.iter()) {
        assert_eq!(was.0.log_id.index, is.0.log_id.index);
        assert_ne!(was.0, is.0, "uncommitted entry {} survived", was.0.log_id);
    }
    // The writers of the discarded entries learn that the outcome is unknown, not success.
    for h in pending {
        assert!(h.await?.is_err(), "a discarded entry was acknowledged");
    }
    // None of the discarded payloads was applied anywhere.
    for id in c.ids() {
        let rec = c.replicas[&id].handler.recorded();
        for (e, _, _) in &uncommitted {
            assert!(!rec.entries.iter().any(|a| a.log_id == e.log_id), "replica {id} applied {}", e.log_id);
        }
    }
    c.stop_all().await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn t14_leadership_transfer_to_a_caught_up_follower() -> anyhow::Result<()> {
    let mut c = Cluster::tcp(3).await?;
    c.start_all().await?;
    let (old, term) = c.wait_leader(&c.ids(), 1, WAIT).await?;
    let last = c.write(old, 20).await?;
    c.wait_applied(last, WAIT).await?;
    let to = c.ids().into_iter().find(|id| *id != old).expect("a follower");

    let started = Instant::now();
    c.node(old)?.transfer_leader(to).await?;
    // The chosen follower, and no one else, leads the next term; no election timeout is waited.
    let (new, new_term) = c.wait_leader(&[to], term + 1, WAIT).await?;
    let took = started.elapsed();
    assert_eq!(new, to);
    assert!(took < Duration::from_millis(c.cfg.election_timeout_min_ms * 3), "transfer took {took:?}");
    let mut watch = c.node(old)?.leadership();
    let seen = watch.wait_for(|l| l.leader_id == Some(to) && l.term == new_term).await?;
    assert_ne!(seen.role, Role::Leader);

    // The old leader now forwards; the new one commits, and every replica agrees.
    let p = c.payload();
    match c.node(old)?.propose(p).await {
        Err(ProposeError::ForwardToLeader { leader_id, .. }) => assert_eq!(leader_id, Some(to)),
        other => panic!("expected ForwardToLeader from the old leader, got {other:?}"),
    }
    let more = c.write(to, 10).await?;
    c.wait_applied(more, WAIT).await?;
    assert_logs_agree(&c, more).await?;
    let reference = c.replicas[&to].handler.recorded().entries.clone();
    for id in c.ids() {
        assert_eq!(c.replicas[&id].handler.recorded().entries, reference, "replica {id}");
    }
    c.stop_all().await
}
