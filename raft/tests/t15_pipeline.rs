//! Pipelined replication: many concurrent proposals make the leader keep several AppendEntries
//! in flight per follower. Over the in-memory router every message gets its own seeded delay,
//! so requests of a stream arrive out of order and the receiver must restore the order; over
//! loopback TCP the requests share one connection. Either way every replica must end with the
//! same entries at the same positions.

use crate::cluster;

use std::time::Duration;

use cluster::{Cluster, assert_logs_agree, test_raft_config};
use raftmq_raft::network::MemRouter;
use raftmq_raft::type_config::NodeId;

const WAIT: Duration = Duration::from_secs(20);
const WRITERS: usize = 32;
const PROPOSALS_PER_WRITER: usize = 25;

/// `WRITERS` concurrent writers at `leader`, each proposing back to back (a steady load keeps
/// the leader sending while earlier requests are in flight); returns the highest index.
async fn write_concurrently(c: &mut Cluster, leader: NodeId) -> anyhow::Result<u64> {
    let batches: Vec<Vec<_>> = (0..WRITERS).map(|_| (0..PROPOSALS_PER_WRITER).map(|_| c.payload()).collect()).collect();
    let node = c.node(leader)?;
    let writers = batches.into_iter().map(|batch| async move {
        let mut last = 0;
        for p in batch {
            last = last.max(node.propose(p).await?.log_id.index);
        }
        anyhow::Ok(last)
    });
    let mut last = 0;
    for r in futures::future::join_all(writers).await {
        last = last.max(r?);
    }
    Ok(last)
}

/// Sum of the followers' stream counters: (requests, reordered).
fn follower_stream_stats(c: &Cluster, leader: NodeId) -> anyhow::Result<(u64, u64)> {
    let mut sum = (0, 0);
    for id in c.ids().into_iter().filter(|id| *id != leader) {
        let s = c.node(id)?.service().stream_stats();
        sum = (sum.0 + s.requests, sum.1 + s.reordered);
    }
    Ok(sum)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn t15_pipelined_replication_reorders_over_jittery_links() -> anyhow::Result<()> {
    let seed = 0x15_0001;
    println!("router seed {seed:#x}");
    let router = MemRouter::new(seed);
    router.set_delay_max(Duration::from_millis(2));
    let mut c = Cluster::mem(3, router, test_raft_config())?;
    c.start_all().await?;
    let (leader, _) = c.wait_leader(&c.ids(), 1, WAIT).await?;
    let mut last = 0;
    // Rounds until some request overtook a lower one (each round is a burst of proposals).
    for _ in 0..10 {
        last = write_concurrently(&mut c, leader).await?;
        if follower_stream_stats(&c, leader)?.1 > 0 {
            break;
        }
    }
    c.wait_applied(last, WAIT).await?;
    assert_logs_agree(&c, last).await?;
    let (requests, reordered) = follower_stream_stats(&c, leader)?;
    println!("followers received {requests} stream requests, {reordered} out of order");
    assert!(requests > 0 && reordered > 0, "requests {requests}, reordered {reordered}");
    c.stop_all().await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn t16_pipelined_replication_over_tcp() -> anyhow::Result<()> {
    let mut c = Cluster::tcp(3).await?;
    c.start_all().await?;
    let (leader, _) = c.wait_leader(&c.ids(), 1, WAIT).await?;
    let mut last = 0;
    for _ in 0..10 {
        last = write_concurrently(&mut c, leader).await?;
        if follower_stream_stats(&c, leader)?.0 > 0 {
            break;
        }
    }
    c.wait_applied(last, WAIT).await?;
    assert_logs_agree(&c, last).await?;
    let (requests, reordered) = follower_stream_stats(&c, leader)?;
    println!("followers received {requests} stream requests, {reordered} out of order");
    assert!(requests > 0, "no pipelined AppendEntries reached a follower");
    c.stop_all().await
}
