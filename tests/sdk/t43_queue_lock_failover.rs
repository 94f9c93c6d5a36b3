//! Issue 35, orderly consumption across failover: queue locks (LOCK_BATCH_MQ / UNLOCK_BATCH_MQ) go
//! through Raft, so a new leader answers from the locks its predecessor granted.
//!
//! - At the leader: a lock belongs to one client; a renewal by the owner succeeds; a follower
//!   refuses with SERVICE_NOT_AVAILABLE and the leader hint.
//! - The leader crashes: the new leader refuses the old owner's queues to another client and
//!   renews them for the owner (before issue 35 it started with an empty table and granted them).
//! - The crashed replica restarts and is made leader: it still knows the locks.
//! - Only the owner unlocks; names LOCK_BATCH_MQ would refuse are refused; queues of another
//!   broker are never locked here.

use crate::harness;

use std::time::Duration;

use anyhow::Context;
use anyhow::Result;
use anyhow::ensure;
use harness::cluster::BROKER_NAME;
use harness::cluster::Cluster;
use harness::cluster::WAIT;
use raftmq_client::Admin;
use raftmq_common::message::MessageQueue;
use raftmq_common::protocol::RemotingCommand;
use raftmq_common::protocol::RequestCode;
use raftmq_common::protocol::ResponseCode;
use raftmq_common::protocol::body::JsonBody;
use raftmq_common::protocol::body::lock_batch::LockBatchRequestBody;
use raftmq_common::protocol::body::lock_batch::LockBatchResponseBody;
use raftmq_common::protocol::body::lock_batch::UnlockBatchRequestBody;
use raftmq_common::protocol::leader_hint::parse_leader_hint;
use raftmq_common::remoting::RemotingClient;

const TOPIC: &str = "T43_QUEUE_LOCKS";
const GROUP: &str = "t43_orderly";
const CALL: Duration = Duration::from_secs(5);

fn q(id: i32) -> MessageQueue {
    MessageQueue::new(TOPIC, BROKER_NAME, id)
}

/// LOCK_BATCH_MQ at `addr`: the answer's code and the queues it says `client` holds.
async fn lock(
    client: &RemotingClient,
    addr: &str,
    group: &str,
    client_id: &str,
    mqs: &[MessageQueue],
) -> Result<(ResponseCode, Option<String>, Vec<MessageQueue>)> {
    let body = LockBatchRequestBody { client_id: client_id.into(), consumer_group: group.into(), mq_set: mqs.to_vec() };
    let request = RemotingCommand::request(RequestCode::LockBatchMq).with_body(body.encode()?);
    let answer = client.invoke(addr, request, CALL).await?;
    let code = answer.response_code();
    let locked = if code == ResponseCode::Success {
        LockBatchResponseBody::decode(&answer.body)?.lock_ok_mq_set
    } else {
        Vec::new()
    };
    Ok((code, answer.remark.clone(), locked))
}

async fn unlock(client: &RemotingClient, addr: &str, client_id: &str, mqs: &[MessageQueue]) -> Result<ResponseCode> {
    let body =
        UnlockBatchRequestBody { client_id: client_id.into(), consumer_group: GROUP.into(), mq_set: mqs.to_vec() };
    let request = RemotingCommand::request(RequestCode::UnlockBatchMq).with_body(body.encode()?);
    Ok(client.invoke(addr, request, CALL).await?.response_code())
}

/// The queues `client_id` holds once locked at the leader `addr` (SUCCESS expected).
async fn granted(client: &RemotingClient, addr: &str, client_id: &str, mqs: &[MessageQueue]) -> Result<Vec<i32>> {
    let (code, remark, locked) = lock(client, addr, GROUP, client_id, mqs).await?;
    ensure!(code == ResponseCode::Success, "LOCK_BATCH_MQ at {addr} answered {code:?}: {remark:?}");
    Ok(locked.iter().map(|m| m.queue_id).collect())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_leader_refuses_queues_the_old_one_locked() -> Result<()> {
    let mut cluster = Cluster::start(3).await?;
    cluster.create_topic(TOPIC, 4).await?;
    let client = RemotingClient::new();
    let first = cluster.wait_leader(WAIT).await?;
    let leader = cluster.addr(first);

    assert_eq!(granted(&client, &leader, "c1", &[q(0), q(1)]).await?, vec![0, 1]);
    assert_eq!(granted(&client, &leader, "c2", &[q(1), q(2)]).await?, vec![2], "q1 belongs to c1");
    assert_eq!(granted(&client, &leader, "c1", &[q(1)]).await?, vec![1], "renewal by the owner");

    let follower = cluster.running().into_iter().find(|id| *id != first).context("a follower")?;
    let (code, remark, _) = lock(&client, &cluster.addr(follower), GROUP, "c2", &[q(3)]).await?;
    assert_eq!(code, ResponseCode::ServiceNotAvailable);
    assert_eq!(remark.as_deref().and_then(parse_leader_hint), Some(leader.as_str()), "{remark:?}");

    // Names LOCK_BATCH_MQ refuses, and a queue of another broker, which is never locked here.
    let (code, _, _) = lock(&client, &leader, "bad/group", "c3", &[q(3)]).await?;
    assert_eq!(code, ResponseCode::SystemError);
    let (code, _, _) = lock(&client, &leader, GROUP, "", &[q(3)]).await?;
    assert_eq!(code, ResponseCode::SystemError);
    let elsewhere = MessageQueue::new(TOPIC, "broker-z", 3);
    assert!(granted(&client, &leader, "c3", &[elsewhere]).await?.is_empty());

    // The leader crashes; the new one knows who holds what.
    cluster.kill(first);
    let second = cluster.wait_leader(WAIT).await?;
    let new_leader = cluster.addr(second);
    assert!(granted(&client, &new_leader, "c2", &[q(0), q(1)]).await?.is_empty(), "c1's queues stay c1's");
    assert_eq!(granted(&client, &new_leader, "c1", &[q(0), q(1)]).await?, vec![0, 1], "and c1 renews them");
    assert_eq!(granted(&client, &new_leader, "c2", &[q(2), q(3)]).await?, vec![2, 3], "c2 kept q2");

    // Only the owner unlocks.
    assert_eq!(unlock(&client, &new_leader, "c2", &[q(0)]).await?, ResponseCode::Success);
    assert!(granted(&client, &new_leader, "c2", &[q(0)]).await?.is_empty());
    assert_eq!(unlock(&client, &new_leader, "c1", &[q(0)]).await?, ResponseCode::Success);
    assert_eq!(granted(&client, &new_leader, "c2", &[q(0)]).await?, vec![0]);

    // The crashed replica comes back (from its checkpoint and log) and takes the lead: same table.
    cluster.start_replica(first).await?;
    cluster.wait_formed(WAIT).await?;
    let admin = Admin::new(&cluster.namesrv_addr)?;
    let deadline = std::time::Instant::now() + WAIT;
    loop {
        // The restarted replica may still be catching up: a transfer to it is refused until then.
        match admin.transfer_leader(BROKER_NAME, Some(first)).await {
            Ok(_) => break,
            Err(e) if std::time::Instant::now() < deadline => {
                eprintln!("transfer to {first} not yet: {e}");
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
            Err(e) => return Err(e.into()),
        }
    }
    let back = cluster.wait_leader(WAIT).await?;
    ensure!(back == first, "leadership went to {back}, not the restarted {first}");
    let restarted = cluster.addr(first);
    assert!(granted(&client, &restarted, "c3", &[q(0), q(1), q(2), q(3)]).await?.is_empty(), "every queue is held");
    assert_eq!(granted(&client, &restarted, "c1", &[q(1)]).await?, vec![1]);
    admin.shutdown().await;
    cluster.crash_all().await
}
