//! Issues 6 and 7 acceptance, Raft group membership end to end: a NameServer and a real broker group
//! in process over loopback sockets (harness `t40_cluster`), changed through the SDK's `Admin` while
//! a producer keeps sending.
//!
//! - t60: grow 3 → 4 (the new node is a learner until caught up, then votes), remove the old leader
//!   (a new leader is elected; the removed node leaves the NameServer's route and knows it was
//!   removed), hand leadership to the new node; a second change while one runs is refused, and so
//!   is a node id used before. Every message acknowledged as SEND_OK is readable at the end from
//!   the final leader, which is the node that joined (no acked loss).
//! - A change left joint (its leader stopped between the two steps) is finished by the group: by the
//!   next leader when the old one died, by the leader itself when it is still up, handing
//!   leadership over if the change removes it, telling a dropped follower; a retry of the removal
//!   answers success, and the group takes changes again.

use crate::harness;

use std::collections::BTreeSet;
use std::sync::Arc;
use std::sync::Mutex;
use std::sync::atomic::AtomicBool;
use std::sync::atomic::Ordering;
use std::time::Duration;
use std::time::Instant;

use anyhow::Context;
use anyhow::Result;
use anyhow::bail;
use anyhow::ensure;
use harness::cluster::BROKER_NAME;
use harness::cluster::Cluster;
use harness::cluster::WAIT;
use raftmq_client::Admin;
use raftmq_client::Producer;
use raftmq_client::SendStatus;
use raftmq_common::message::Message;
use raftmq_common::protocol::ResponseCode;
use raftmq_common::protocol::body::membership::GroupStatus;
use raftmq_common::remoting::RemotingClient;
use tokio::sync::watch;

const TOPIC: &str = "T60_MEMBERSHIP";
const QUEUES: i32 = 4;

/// Bodies acknowledged SEND_OK so far, with a count to wait on.
#[derive(Clone)]
struct Acked {
    bodies: Arc<Mutex<Vec<String>>>,
    count: Arc<watch::Sender<usize>>,
}

impl Acked {
    fn push(&self, body: String) {
        let n = {
            let mut bodies = self.bodies.lock().unwrap_or_else(|p| p.into_inner());
            bodies.push(body);
            bodies.len()
        };
        self.count.send_replace(n);
    }

    fn len(&self) -> usize {
        *self.count.borrow()
    }

    fn all(&self) -> BTreeSet<String> {
        self.bodies.lock().unwrap_or_else(|p| p.into_inner()).iter().cloned().collect()
    }

    /// Waits until at least `n` sends were acknowledged.
    async fn wait_for(&self, n: usize) -> Result<()> {
        let mut rx = self.count.subscribe();
        let deadline = tokio::time::Instant::now() + WAIT;
        match tokio::time::timeout_at(deadline, rx.wait_for(|c| *c >= n)).await {
            Ok(Ok(_)) => Ok(()),
            _ => bail!("only {} of {n} sends acknowledged", self.len()),
        }
    }
}

/// Polls `check` until it returns `Some`, within [`WAIT`]. For state with no subscription API
/// (another process's view, the NameServer's table): the deadline is a bound, not the synchronisation.
async fn eventually<T, F, Fut>(what: &str, mut check: F) -> Result<T>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    let deadline = Instant::now() + WAIT;
    loop {
        if let Some(v) = check().await {
            return Ok(v);
        }
        if Instant::now() > deadline {
            bail!("timed out waiting for {what}");
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

fn voter_ids(s: &GroupStatus) -> BTreeSet<u64> {
    s.voters.iter().map(|m| m.id).collect()
}

/// Reads every queue of [`TOPIC`] at `addr`; the bodies found.
async fn read_all(addr: &str) -> Result<BTreeSet<String>> {
    let client = RemotingClient::new();
    let mut bodies = BTreeSet::new();
    for queue_id in 0..QUEUES {
        for m in harness::group::drain_queue(&client, addr, TOPIC, queue_id).await? {
            bodies.insert(String::from_utf8_lossy(&m.message.body).into_owned());
        }
    }
    client.close().await;
    Ok(bodies)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn grow_remove_leader_and_transfer_under_load_lose_no_ack() -> Result<()> {
    let mut cluster = Cluster::start(3).await?;
    cluster.create_topic(TOPIC, QUEUES).await?;
    let admin = Admin::new(&cluster.namesrv_addr)?;

    // A producer sends throughout; the SDK retries a refused send (leader changes), failures are fine.
    let producer = Producer::builder("t60_producer")
        .namesrv_addr(&cluster.namesrv_addr)
        .send_timeout(Duration::from_secs(3))
        .build()?;
    producer.start().await?;
    let acked = Acked { bodies: Arc::default(), count: Arc::new(watch::channel(0).0) };
    let stop = Arc::new(AtomicBool::new(false));
    let sender = {
        let (producer, acked, stop) = (producer.clone(), acked.clone(), Arc::clone(&stop));
        tokio::spawn(async move {
            let mut i = 0usize;
            while !stop.load(Ordering::Acquire) {
                let body = format!("m-{i}");
                if let Ok(r) = producer.send(Message::new(TOPIC, body.clone())).await
                    && r.status == SendStatus::SendOk
                {
                    acked.push(body);
                }
                i += 1;
                // Pacing, not synchronisation: keeps two shared cores free for the replicas.
                tokio::time::sleep(Duration::from_millis(2)).await;
            }
        })
    };
    acked.wait_for(50).await?;

    // Grow 3 → 4. The leader waits for node 4 to catch up, and node 4 is not running yet: meanwhile
    // any other change is refused.
    let peer4 = cluster.plan_replica(4)?;
    let first_leader = cluster.wait_leader(WAIT).await?;
    let first_leader_addr = cluster.addr(first_leader);
    let add = {
        let (admin, peer4) = (admin.clone(), peer4.clone());
        tokio::spawn(async move { admin.add_node(BROKER_NAME, 4, &peer4.remoting_addr, &peer4.raft_addr).await })
    };
    eventually("the leader to wait for learner 4", || async {
        let s = admin.group_status(&first_leader_addr).await.ok()?;
        let learners: Vec<u64> = s.learners.iter().map(|m| m.id).collect();
        (s.membership_change.as_deref() == Some("addNode 4") && learners == [4]).then_some(())
    })
    .await?;
    let busy = admin.remove_node(BROKER_NAME, 2).await.err().context("a second change must be refused")?;
    ensure!(busy.response_code() == Some(ResponseCode::SystemBusy), "{busy}");
    ensure!(busy.to_string().contains("in progress"), "{busy}");
    let busy = admin.transfer_leader(BROKER_NAME, None).await.err().context("a transfer must be refused too")?;
    ensure!(busy.response_code() == Some(ResponseCode::SystemBusy), "{busy}");
    cluster.start_replica(4).await?;
    let report = add.await??;
    ensure!(report.voters == vec![1, 2, 3, 4] && report.learners.is_empty(), "{report:?}");
    let addr4 = cluster.addr(4);
    eventually("node 4 to see itself a voter", || async {
        let s = admin.group_status(&addr4).await.ok()?;
        (voter_ids(&s) == BTreeSet::from([1, 2, 3, 4]) && s.role == "FOLLOWER").then_some(())
    })
    .await?;
    // A retry of a finished addition answers the group as it is; other addresses are refused.
    let again = admin.add_node(BROKER_NAME, 4, &peer4.remoting_addr, &peer4.raft_addr).await?;
    ensure!(again.voters == vec![1, 2, 3, 4], "{again:?}");
    let other = admin.add_node(BROKER_NAME, 4, "127.0.0.1:1", "127.0.0.1:2").await;
    ensure!(other.as_ref().is_err_and(|e| e.to_string().contains("already a voter")), "{other:?}");
    let before_removal = acked.len();
    acked.wait_for(before_removal + 50).await?;

    // Remove the leader itself: another voter takes over and the removed node leaves the route.
    let old = cluster.wait_leader(WAIT).await?;
    let old_addr = cluster.addr(old);
    let report = admin.remove_node(BROKER_NAME, old).await?;
    ensure!(!report.voters.contains(&old) && report.voters.len() == 3, "{report:?}");
    ensure!(report.leader.is_some_and(|l| l != old), "a new leader: {report:?}");
    let new_leader = eventually("a ready leader other than the removed one", || async {
        cluster.running().into_iter().find(|id| *id != old && cluster.broker(*id).is_some_and(|b| b.is_ready_leader()))
    })
    .await?;
    eventually("the removed node to leave the NameServer's route", || async {
        let info = admin.cluster_info().await.ok()?;
        let addrs = info.broker_addr_table.get(BROKER_NAME)?.broker_addrs.clone();
        (!addrs.values().any(|a| *a == old_addr) && addrs.contains_key(&0)).then_some(())
    })
    .await?;
    let removed_view = admin.group_status(&old_addr).await?;
    ensure!(removed_view.removed, "the removed node knows: {removed_view:?}");
    let readiness = cluster.broker(old).context("the removed node still runs")?.readiness();
    ensure!(!readiness.member && !readiness.ready(), "a removed node is not ready for traffic: {readiness:?}");
    let reused = admin.add_node(BROKER_NAME, old, "127.0.0.1:1", "127.0.0.1:2").await;
    ensure!(reused.as_ref().is_err_and(|e| e.to_string().contains("was used before")), "{reused:?}");
    cluster.stop(old).await?;
    let before_transfer = acked.len();
    acked.wait_for(before_transfer + 50).await?;

    // Hand leadership to the node that joined.
    let target = if new_leader == 4 { *report.voters.iter().find(|v| **v != 4).context("a voter")? } else { 4 };
    let report = admin.transfer_leader(BROKER_NAME, Some(target)).await?;
    ensure!(report.leader == Some(target), "{report:?}");
    ensure!(cluster.wait_leader(WAIT).await? == target, "the target leads");
    if target != 4 {
        let report = admin.transfer_leader(BROKER_NAME, Some(4)).await?;
        ensure!(report.leader == Some(4), "{report:?}");
    }
    let after_transfer = acked.len();
    acked.wait_for(after_transfer + 50).await?;

    stop.store(true, Ordering::Release);
    sender.await?;
    producer.shutdown().await;

    // No acked loss: every SEND_OK body is readable at the final leader, the node that joined.
    let leader = cluster.wait_leader(WAIT).await?;
    ensure!(leader == 4, "node 4 leads at the end, not {leader}");
    let stored = read_all(&cluster.addr(leader)).await?;
    let acked = acked.all();
    let lost: Vec<&String> = acked.difference(&stored).collect();
    eprintln!("t60: {} acked, {} stored, {} lost", acked.len(), stored.len(), lost.len());
    ensure!(lost.is_empty(), "acked but not stored at the leader: {lost:?}");
    let status = admin.group_status(&cluster.addr(leader)).await?;
    ensure!(status.used_node_ids == vec![1, 2, 3, 4], "every id ever used is recorded: {status:?}");
    admin.shutdown().await;
    cluster.crash_all().await
}

/// Replica `id` (the leader) writes the first step of a change to `voters` alone: what a leader
/// stopped between the two steps leaves behind.
async fn enter_joint(cluster: &Cluster, id: u64, voters: &BTreeSet<u64>) -> Result<()> {
    let raft = Arc::clone(cluster.broker(id).context("the leader runs")?.raft());
    raft.enter_joint(voters.clone()).await?;
    Ok(())
}

/// The ready leader among `ids` whose view shows `voters`, no joint membership and no change
/// running.
async fn settled_leader(admin: &Admin, cluster: &Cluster, ids: &BTreeSet<u64>, voters: &BTreeSet<u64>) -> Option<u64> {
    for id in ids {
        let s = admin.group_status(&cluster.addr(*id)).await.ok()?;
        if s.role == "LEADER" && s.ready && !s.joint && s.membership_change.is_none() && voter_ids(&s) == *voters {
            return Some(*id);
        }
    }
    None
}

/// A voter change whose leader stopped between openraft's two steps leaves the membership joint,
/// and while it is joint every change is refused. The group finishes it on its own: a leader that
/// dies half-way through removing itself is replaced by one that completes the removal (jepsen
/// seed 7600), a leader that is itself removed by a joint it finishes hands leadership over as
/// `removeNode` does, and a live follower dropped by one is told. Later changes are accepted and no
/// acknowledged message is lost.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_change_left_joint_is_finished_by_the_group() -> Result<()> {
    let mut cluster = Cluster::start(3).await?;
    cluster.create_topic(TOPIC, QUEUES).await?;
    let admin = Admin::new(&cluster.namesrv_addr)?;
    let producer = Producer::builder("t65_joint_producer").namesrv_addr(&cluster.namesrv_addr).build()?;
    producer.start().await?;
    let mut acked = BTreeSet::new();
    let mut send = async |producer: &Producer, from: usize| -> Result<()> {
        for i in from..from + 20 {
            let body = format!("joint-{i}");
            let r = producer.send(Message::new(TOPIC, body.clone())).await?;
            ensure!(r.status == SendStatus::SendOk, "{r:?}");
            acked.insert(body);
        }
        Ok(())
    };
    send(&producer, 0).await?;

    // 1. The leader enters the joint membership that removes it, and dies at once.
    let old = cluster.wait_leader(WAIT).await?;
    let old_addr = cluster.addr(old);
    let kept: BTreeSet<u64> = cluster.running().into_iter().filter(|id| *id != old).collect();
    enter_joint(&cluster, old, &kept).await?;
    cluster.kill(old);
    let leader = eventually("a leader of the others that finished the removal", || {
        settled_leader(&admin, &cluster, &kept, &kept)
    })
    .await?;
    eventually("the dead leader to leave the NameServer's route", || async {
        let info = admin.cluster_info().await.ok()?;
        let addrs = info.broker_addr_table.get(BROKER_NAME)?.broker_addrs.clone();
        (!addrs.values().any(|a| *a == old_addr) && addrs.get(&0) == Some(&cluster.addr(leader))).then_some(())
    })
    .await?;
    send(&producer, 20).await?;

    // The group changes again: a fresh node joins.
    let peer4 = cluster.plan_replica(4)?;
    cluster.start_replica(4).await?;
    let report = admin.add_node(BROKER_NAME, 4, &peer4.remoting_addr, &peer4.raft_addr).await?;
    let mut three = kept.clone();
    three.insert(4);
    ensure!(report.voters.iter().copied().collect::<BTreeSet<u64>>() == three, "{report:?}");

    // 2. The leader enters the joint membership that removes it and stays up: it finishes the
    //    change itself and hands leadership to another voter, as removeNode does.
    let second = cluster.wait_leader(WAIT).await?;
    let second_addr = cluster.addr(second);
    let rest: BTreeSet<u64> = three.iter().copied().filter(|id| *id != second).collect();
    enter_joint(&cluster, second, &rest).await?;
    let last =
        eventually("another leader once the change is finished", || settled_leader(&admin, &cluster, &rest, &rest))
            .await?;
    // Removed once the uniform membership applies; it leads until its successor is ready.
    eventually("the finishing leader to know it is removed and to have stepped down", || async {
        admin.group_status(&second_addr).await.ok().filter(|s| s.removed && s.role != "LEADER").map(|_| ())
    })
    .await?;
    send(&producer, 40).await?;
    // A caller of the interrupted removal retries: done, so it answers the group as it is (the id
    // is recorded as used: unlike the test's bare joint, a removeNode records the members first,
    // and the addition above did).
    let retried = admin.remove_node(BROKER_NAME, second).await?;
    ensure!(retried.voters.iter().copied().collect::<BTreeSet<u64>>() == rest, "{retried:?}");
    let never = admin.remove_node(BROKER_NAME, 9).await;
    ensure!(never.as_ref().is_err_and(|e| e.to_string().contains("not a member")), "{never:?}");

    // 3. The leader enters the joint membership that removes a live follower: the follower is told.
    let follower = *rest.iter().find(|id| **id != last).context("a follower")?;
    let follower_addr = cluster.addr(follower);
    let alone = BTreeSet::from([last]);
    enter_joint(&cluster, last, &alone).await?;
    eventually("the leader alone once the change is finished", || settled_leader(&admin, &cluster, &alone, &alone))
        .await?;
    eventually("the dropped follower to know it is removed", || async {
        admin.group_status(&follower_addr).await.ok().filter(|s| s.removed).map(|_| ())
    })
    .await?;
    eventually("the dropped follower to leave the NameServer's route", || async {
        let info = admin.cluster_info().await.ok()?;
        let addrs = info.broker_addr_table.get(BROKER_NAME)?.broker_addrs.clone();
        (!addrs.values().any(|a| *a == follower_addr)).then_some(())
    })
    .await?;
    send(&producer, 60).await?;
    producer.shutdown().await;

    let stored = read_all(&cluster.addr(last)).await?;
    let lost: Vec<&String> = acked.difference(&stored).collect();
    ensure!(lost.is_empty(), "acked but not stored at the leader: {lost:?}");
    admin.shutdown().await;
    cluster.crash_all().await
}
