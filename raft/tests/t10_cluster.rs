//! A 3-replica group over loopback TCP (the remoting transport): election, replication,
//! leader failover, catch-up of a stopped follower, truncation of a deposed leader's
//! uncommitted tail, leadership transfer, a proposal too large for one entry, a joint membership
//! left by a stopped leader. Every replica must hold the same entries at the same physical
//! positions.

use crate::cluster;

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
    // A payload one entry cannot hold is refused before openraft sees it; the largest one that
    // fits commits on every replica (a segment roll of its own), and the group goes on.
    let max = c.node(leader)?.payload_max_bytes();
    let too_large = raftmq_raft::AppPayload::new(1, vec![7u8; max + 1]);
    match c.node(leader)?.propose(too_large).await {
        Err(ProposeError::TooLarge { size_bytes, max_bytes }) => assert_eq!((size_bytes, max_bytes), (max + 1, max)),
        other => panic!("expected TooLarge, got {other:?}"),
    }
    let largest = c.node(leader)?.propose(raftmq_raft::AppPayload::new(1, vec![7u8; max])).await?;
    let last = c.write(leader, 5).await?;
    assert!(last > largest.log_id.index);
    c.wait_applied(last, WAIT).await?;
    assert_logs_agree(&c, last).await?;
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
    drop(seen);
    // The page-cache windows follow the roles (set before the watch shows them).
    c.node(to)?.leadership().wait_for(|l| l.role == Role::Leader).await?;
    assert_eq!(c.node(to)?.store().page_cache_window_bytes(), c.cfg.page_cache_leader_window_bytes);
    assert_eq!(c.node(old)?.store().page_cache_window_bytes(), c.cfg.page_cache_follower_window_bytes);
    assert_ne!(c.cfg.page_cache_leader_window_bytes, c.cfg.page_cache_follower_window_bytes);

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

/// Removes a stopped replica's store: a wiped or replaced disk under the same node id.
fn wipe(c: &Cluster, id: u64) -> anyhow::Result<()> {
    std::fs::remove_dir_all(&c.replicas[&id].dir)?;
    Ok(())
}

/// Whether a replica's store carries the vote guard's marker (started empty, not caught up yet).
fn marker(c: &Cluster, id: u64) -> bool {
    c.replicas[&id].dir.join("vote-guard").exists()
}

/// Polls `done` until it holds, at most `within` (replica state without a watch of its own).
async fn until(what: &str, within: Duration, done: impl Fn() -> bool) -> anyhow::Result<()> {
    let deadline = Instant::now() + within;
    while !done() {
        anyhow::ensure!(Instant::now() < deadline, "{what} not within {within:?}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    Ok(())
}

/// The applied-state checkpoint: a replica that crashes after one re-applies only the entries
/// after it (never beyond its fsynced log: the crash cuts everything that was not), one stopped
/// gracefully writes one at its applied log id and re-applies nothing, and an unreadable one is
/// ignored (everything is re-applied); every replica still holds the same entries at the same
/// positions.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn t15_a_restart_reapplies_only_the_entries_after_its_checkpoint() -> anyhow::Result<()> {
    let mut c = Cluster::tcp(3).await?;
    c.cfg.checkpoint_interval_ms = 50;
    c.checkpoints = true;
    c.start_all().await?;
    let (leader, _) = c.wait_leader(&c.ids(), 1, WAIT).await?;
    let follower = c.ids().into_iter().find(|id| *id != leader).expect("a follower");
    let first = c.write(leader, 100).await?;
    c.wait_applied(first, WAIT).await?;
    // A checkpoint is taken after an apply once the interval has passed: keep writing until the
    // follower holds one at or past `first`.
    let deadline = Instant::now() + WAIT;
    loop {
        let last = c.write(leader, 1).await?;
        c.wait_applied(last, WAIT).await?;
        if c.node(follower)?.status().checkpoint.is_some_and(|l| l.index >= first) {
            break;
        }
        anyhow::ensure!(Instant::now() < deadline, "no checkpoint at or past {first} within {WAIT:?}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let written = c.node(follower)?.status().checkpoint.expect("checked above");

    c.crash(follower, 0.0, &[]).await?;
    let more = c.write(leader, 20).await?;
    c.start(follower).await?;
    let st = c.node(follower)?.status();
    let from = st.applied_at_start.expect("the follower started from its checkpoint");
    assert!(from >= written, "started at {from}, before the checkpoint {written} it had written");
    assert_eq!(st.checkpoint, Some(from));
    c.wait_applied(more, WAIT).await?;
    {
        let rec = c.replicas[&follower].handler.recorded();
        assert_eq!(rec.restored_at, Some(from));
        assert!(rec.entries.iter().all(|e| e.log_id.index > from.index), "re-applied an entry the checkpoint covers");
        assert_eq!(rec.entries.last().map(|e| e.log_id.index), Some(more));
    }
    assert_logs_agree(&c, more).await?;

    // A graceful stop checkpoints everything applied: nothing is re-applied at the next start.
    c.stop(follower).await?;
    c.start(follower).await?;
    let st = c.node(follower)?.status();
    assert!(st.applied_at_start.is_some_and(|l| l.index >= more), "{st:?}");
    assert!(c.replicas[&follower].handler.recorded().entries.is_empty(), "re-applied after a graceful stop");

    // An unreadable checkpoint costs a full re-apply, nothing else.
    c.stop(follower).await?;
    let path = c.replicas[&follower].dir.join("checkpoint");
    let mut raw = std::fs::read(&path)?;
    raw[12] ^= 1;
    std::fs::write(&path, raw)?;
    c.start(follower).await?;
    assert_eq!(c.node(follower)?.status().applied_at_start, None);
    let last = c.write(leader, 5).await?;
    c.wait_applied(last, WAIT).await?;
    let reference = c.replicas[&leader].handler.recorded().entries.clone();
    assert_eq!(c.replicas[&follower].handler.recorded().entries, reference);
    assert_logs_agree(&c, last).await?;
    c.stop_all().await
}

/// A log that goes quiet is still checkpointed at its last entry: with no write after a burst,
/// every replica's checkpoint reaches the last applied entry within a few intervals, so a crash
/// then re-applies nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn t15_an_idle_log_is_checkpointed_at_its_last_entry() -> anyhow::Result<()> {
    let mut c = Cluster::tcp(3).await?;
    c.cfg.checkpoint_interval_ms = 50;
    c.checkpoints = true;
    c.start_all().await?;
    let (leader, _) = c.wait_leader(&c.ids(), 1, WAIT).await?;
    let last = c.write(leader, 100).await?;
    c.wait_applied(last, WAIT).await?;
    for id in c.ids() {
        let node = c.node(id)?;
        until(&format!("replica {id} checkpoints entry {last} without another write"), WAIT, || {
            node.status().checkpoint.is_some_and(|l| l.index == last)
        })
        .await?;
    }
    let follower = c.ids().into_iter().find(|id| *id != leader).expect("a follower");
    c.crash(follower, 0.0, &[]).await?;
    c.start(follower).await?;
    assert_eq!(c.node(follower)?.status().applied_at_start.map(|l| l.index), Some(last));
    assert!(c.replicas[&follower].handler.recorded().entries.is_empty(), "re-applied after an idle checkpoint");
    c.stop_all().await
}

/// A follower whose disk was wiped comes back under its old id: it takes no part in elections
/// until it holds the group's entries, the leader starts its replication over (no assertion
/// that a follower's log never goes back), and it ends with the same entries at the same
/// positions as the others.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn t16_wiped_follower_catches_up_before_it_votes() -> anyhow::Result<()> {
    let mut c = Cluster::tcp(3).await?;
    c.start_all().await?;
    let (leader, _) = c.wait_leader(&c.ids(), 1, WAIT).await?;
    let wiped = c.ids().into_iter().find(|id| *id != leader).expect("a follower");
    c.write(leader, 50).await?;
    c.stop(wiped).await?;
    wipe(&c, wiped)?;
    let last = c.write(leader, 100).await?;
    c.start(wiped).await?;
    assert!(c.node(wiped)?.vote_guard().is_some(), "an empty store starts guarded");
    assert!(marker(&c, wiped), "kept across restarts until it caught up");
    c.wait_applied(last, WAIT).await?;
    assert_logs_agree(&c, last).await?;
    let node = c.node(wiped)?;
    until("the wiped replica votes again", WAIT, || node.vote_guard().is_none()).await?;
    // The leader kept working through the reversion and replicates to it as to any follower.
    let more = c.write(leader, 10).await?;
    c.wait_applied(more, WAIT).await?;
    assert_logs_agree(&c, more).await?;
    for id in c.ids() {
        assert!(c.node(id)?.vote_guard().is_none(), "replica {id}");
        assert!(!marker(&c, id), "replica {id}: marker left after catching up (or after the first boot)");
    }
    c.stop_all().await
}

/// Kafka's "last replica standing" (KIP-966) in Raft: entries committed by the leader and one
/// follower only; that follower's disk is wiped and the leader stops. The third replica, which
/// never had the entries, must not win an election with the wiped one's vote: the group waits
/// for the old leader, then every committed entry is still there. The old first member (id 1)
/// being the wiped one, it must not initialise a group of its own either.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn t17_a_wiped_replica_never_elects_a_leader_missing_committed_entries() -> anyhow::Result<()> {
    let mut c = Cluster::tcp(3).await?;
    c.start_all().await?;
    let ids = c.ids();
    // Make 1 the replica to wipe and 2 the leader, so the wiped one is the group's first member.
    let (mut leader, _) = c.wait_leader(&ids, 1, WAIT).await?;
    if leader != 2 {
        // The target must hold the leader's log first (as in t14): a follower that has not got the
        // leader's first entry yet loses the transfer's election, and the old leader wins again.
        let caught_up = c.write(leader, 1).await?;
        c.wait_applied(caught_up, WAIT).await?;
        c.node(leader)?.transfer_leader(2).await?;
        leader = c.wait_leader(&[2], 1, WAIT).await?.0;
    }
    let (wiped, behind) = (1, 3);
    c.write(leader, 10).await?;
    c.stop(behind).await?;
    let last = c.write(leader, 40).await?;
    c.wait_applied(last, WAIT).await?;
    c.stop(wiped).await?;
    c.stop(leader).await?;
    wipe(&c, wiped)?;

    c.start(behind).await?;
    c.start(wiped).await?;
    // Without the guard the wiped replica's vote would elect `behind` now. The elections
    // `behind` starts in this time must all fail.
    let no_leader = c.wait_leader(&[behind, wiped], 1, Duration::from_secs(3)).await;
    assert!(no_leader.is_err(), "a leader without the committed entries: {no_leader:?}");
    assert!(c.node(wiped)?.vote_guard().is_some());
    // A restart before it caught up keeps it out of elections (whatever part of the log it holds).
    c.stop(wiped).await?;
    assert!(marker(&c, wiped));
    c.start(wiped).await?;
    assert!(c.node(wiped)?.vote_guard().is_some());

    c.start(leader).await?;
    let (new_leader, _) = c.wait_leader(&ids, 1, WAIT).await?;
    assert_ne!(new_leader, wiped, "the empty replica cannot lead");
    let after = c.write(new_leader, 5).await?;
    c.wait_applied(after, WAIT).await?;
    // Every entry committed before the wipe is still there, the same on every replica.
    assert_logs_agree(&c, after).await?;
    let log = log_of(c.node(wiped)?).await?;
    assert!(
        log.last().is_some_and(|(e, _, _)| e.log_id.index >= last),
        "the wiped replica holds the old entries again"
    );
    c.stop_all().await
}

/// A deposed leader cut off since an older term meets the wiped replica: the wiped one forgot
/// that the group moved on, and the newer leader that knows is down. It must not take the old
/// leader's entries (which would let it commit over entries the newer term committed) until a
/// majority of the others has told it the group's newest term.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn t18_a_wiped_replica_never_lets_a_deposed_leader_commit() -> anyhow::Result<()> {
    let mut c = Cluster::tcp(3).await?;
    c.start_all().await?;
    let ids = c.ids();
    let (old, old_term) = c.wait_leader(&ids, 1, WAIT).await?;
    c.write(old, 10).await?;
    // The old leader is cut off; the other two elect a newer leader and commit without it.
    c.cuts.isolate(old, &ids);
    let others: Vec<u64> = ids.iter().copied().filter(|id| *id != old).collect();
    let (new, new_term) = c.wait_leader(&others, old_term + 1, WAIT).await?;
    let wiped = others.iter().copied().find(|id| *id != new).expect("a third replica");
    let committed = c.write(new, 20).await?;
    for id in &others {
        let raft = c.node(*id)?.raft_handle().expect("raft").clone();
        raft.wait(Some(WAIT)).applied_index_at_least(Some(committed), "applied").await?;
    }
    let expected = c.node(new)?.store().log_id_at(committed).expect("the last committed entry");
    c.stop(wiped).await?;
    wipe(&c, wiped)?;
    c.stop(new).await?;
    c.cuts.heal();
    c.start(wiped).await?;
    // Only the old leader answers the wiped replica: it must not follow it, so nothing commits.
    // The old leader refuses writes until a quorum acknowledges it again; keep trying a while.
    let until_at = Instant::now() + Duration::from_secs(3);
    while Instant::now() < until_at {
        let p = c.payload();
        let tried = tokio::time::timeout(Duration::from_millis(500), c.node(old)?.propose(p)).await;
        assert!(!matches!(tried, Ok(Ok(_))), "the deposed leader committed through the wiped replica: {tried:?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(c.node(wiped)?.vote_guard().is_some());

    c.start(new).await?;
    let (leader, term) = c.wait_leader(&ids, new_term, WAIT).await?;
    assert!(term >= new_term);
    let after = c.write(leader, 5).await?;
    c.wait_applied(after, WAIT).await?;
    assert_logs_agree(&c, after).await?;
    for id in c.ids() {
        assert_eq!(c.node(id)?.store().log_id_at(committed), Some(expected), "replica {id} lost a committed entry");
    }
    c.stop_all().await
}

/// A group that began as one voter and grew to three: its first member's disk is replaced, and
/// while it catches up its partial log shows a membership in which it is the only voter. openraft
/// elects such a node without asking anyone (no network call the guard could stop), so the guard
/// keeps openraft's own election off until the replica holds the group's entries.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn t19_a_wiped_first_voter_never_elects_itself_from_a_partial_log() -> anyhow::Result<()> {
    let mut c = Cluster::tcp_with(1, 3).await?;
    // Small batches one at a time, so that the wiped replica's log grows in many steps (each
    // waits for its fsync) and the cut below finds it partial.
    c.cfg.max_payload_entries = 4;
    c.cfg.append_stream_inflight_max_count = 1;
    c.start_all().await?;
    let (first, _) = c.wait_leader(&[1], 1, WAIT).await?;
    c.write(first, 600).await?;
    for id in [2, 3] {
        c.start(id).await?;
        c.node(first)?.add_learner(id, c.members[&id].clone()).await?;
    }
    c.node(first)?.change_membership(std::collections::BTreeSet::from([1, 2, 3])).await?;
    let grown = c.write(first, 10).await?;
    c.wait_applied(grown, WAIT).await?;
    // Hand leadership to one of the new voters (it may refuse until its own guard opened: retry).
    let deadline = Instant::now() + WAIT;
    let (leader, term) = loop {
        let _ = c.node(first)?.transfer_leader(2).await;
        if let Ok(found) = c.wait_leader(&[2, 3], 2, Duration::from_secs(2)).await {
            break found;
        }
        anyhow::ensure!(Instant::now() < deadline, "no new voter took over within {WAIT:?}");
    };

    c.stop(first).await?;
    wipe(&c, first)?;
    // It comes back knowing the whole group (the precondition for an emptied replica).
    c.initial = c.ids().into_iter().collect();
    c.start(first).await?;
    // Cut it off once it holds part of the log from the one-voter days.
    let node = c.node(first)?;
    until("part of the log", WAIT, || node.store().last_log_id().is_some_and(|l| l.index >= 16)).await?;
    c.cuts.isolate(first, &c.ids());
    let partial = c.node(first)?.store().last_log_id().map(|l| l.index);
    assert!(partial < Some(600), "it caught up before the cut ({partial:?}); the test needs a partial log");
    // Several election timeouts: alone in its partial membership, it must still not lead.
    let mut watch = c.node(first)?.leadership();
    let led = tokio::time::timeout(
        Duration::from_millis(c.cfg.election_timeout_max_ms * 4),
        watch.wait_for(|l| l.role == Role::Leader),
    )
    .await;
    assert!(led.is_err(), "the wiped replica elected itself from a partial log: {led:?}");

    c.cuts.heal();
    let after = c.write(leader, 5).await?;
    c.wait_applied(after, WAIT).await?;
    assert_logs_agree(&c, after).await?;
    let (still, _) = c.wait_leader(&c.ids(), term, WAIT).await?;
    assert_ne!(still, first);
    c.stop_all().await
}

/// A replica's disk is replaced after the group replaced both other members it was configured
/// with: none of its `raftPeers` is a member any more, and they are gone. The leader it refuses
/// (empty store, still asking its peers) introduces itself; the replica probes it, learns the
/// current members from its answer, catches up and votes again. Before introductions it asked its
/// departed peers for ever and the leader could never replicate to it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn t20_a_wiped_replica_whose_configured_peers_all_left_learns_the_members_from_the_leader() -> anyhow::Result<()>
{
    let mut c = Cluster::tcp_with(3, 5).await?;
    c.start_all().await?;
    let (leader, _) = c.wait_leader(&[1, 2, 3], 1, WAIT).await?;
    let kept = [1, 2, 3].into_iter().find(|id| *id != leader).expect("a follower");
    let departed: Vec<u64> = [1, 2, 3].into_iter().filter(|id| *id != kept).collect();
    c.write(leader, 50).await?;
    for id in [4, 5] {
        c.start(id).await?;
        c.node(leader)?.add_learner(id, c.members[&id].clone()).await?;
    }
    let caught_up = c.write(leader, 10).await?;
    c.wait_applied(caught_up, WAIT).await?;
    c.node(leader)?.change_membership(std::collections::BTreeSet::from([kept, 4, 5])).await?;
    let (new_leader, _) = c.wait_leader(&[kept, 4, 5], 1, WAIT).await?;
    for id in &departed {
        c.stop(*id).await?;
    }
    let members = c.node(new_leader)?.members();
    assert!(departed.iter().all(|id| !members.contains_key(id)), "the premise: {departed:?} left ({members:?})");

    c.stop(kept).await?;
    wipe(&c, kept)?;
    let last = c.write(new_leader, 100).await?;
    // Restarted with its old configuration: its peers are the departed replicas only.
    c.start(kept).await?;
    assert!(c.node(kept)?.vote_guard().is_some(), "an empty store starts guarded");
    c.wait_applied(last, WAIT).await?;
    assert_logs_agree(&c, last).await?;
    let node = c.node(kept)?;
    until("the wiped replica votes again", WAIT, || node.vote_guard().is_none()).await?;
    let more = c.write(new_leader, 10).await?;
    c.wait_applied(more, WAIT).await?;
    assert_logs_agree(&c, more).await?;
    c.stop_all().await
}

/// A leader that stops between the two steps of a voter change leaves the group joint, and
/// openraft leaves the second step to the application: the next leader finds the joint membership
/// committed ([`raftmq_raft::RaftNode::committed_joint`]) and finishes it toward the new voters.
/// Until then the group could change no more (every change is refused while joint).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn t21_a_joint_membership_left_by_a_stopped_leader_is_finished_by_the_next() -> anyhow::Result<()> {
    let mut c = Cluster::tcp(3).await?;
    c.start_all().await?;
    let (old, term) = c.wait_leader(&c.ids(), 1, WAIT).await?;
    c.write(old, 20).await?;
    let kept: std::collections::BTreeSet<u64> = c.ids().into_iter().filter(|id| *id != old).collect();
    // The first step of removing the leader, alone: what a leader stopped half-way leaves.
    c.node(old)?.enter_joint(kept.clone()).await?;
    let joint = c.node(old)?.committed_joint().ok_or_else(|| anyhow::anyhow!("no committed joint"))?;
    assert_eq!(joint.new_voters, kept);
    assert!(joint.old_voters.contains(&old));
    assert!(c.node(old)?.enter_joint(kept.clone()).await.is_err(), "no second joint on a joint");
    c.stop(old).await?;

    // Elected under the joint rules: a majority of both voter sets.
    let kept_ids: Vec<u64> = kept.iter().copied().collect();
    let (new, _) = c.wait_leader(&kept_ids, term + 1, WAIT).await?;
    let found = c.node(new)?.committed_joint().ok_or_else(|| anyhow::anyhow!("the new leader sees no joint"))?;
    assert_eq!(found.log_id, joint.log_id, "the same half-done change");
    c.node(new)?.finish_joint(&found).await?;
    assert_eq!(c.node(new)?.committed_joint(), None);
    assert_eq!(c.node(new)?.status().voters, kept);
    assert!(!c.node(new)?.members().contains_key(&old), "the removed voter is dropped, not kept as learner");
    assert!(c.node(new)?.finish_joint(&found).await.is_err(), "finishing again is refused: the joint is gone");

    let more = c.write(new, 10).await?;
    c.wait_applied(more, WAIT).await?;
    assert_logs_agree(&c, more).await?;
    for id in &kept_ids {
        until("the follower sees the uniform membership", WAIT, || {
            c.node(*id).is_ok_and(|n| n.status().voters == kept)
        })
        .await?;
    }
    c.stop_all().await
}
