//! A restarted broker re-applies only the log after its checkpoint (RocketMQ's `StoreCheckpoint`:
//! a restart dispatches again only what the last flush of its ConsumeQueues had not covered). A
//! NameServer and a one-node group in process (harness `t40_cluster`), the SDK's producer and admin.
//!
//! - t22: messages, a consumer group and committed offsets before a checkpoint, more of each after
//!   it; the replica crashes (its runtime dropped, no graceful stop) and starts from the
//!   checkpoint, not from the beginning; every message is still readable at its offset and found
//!   by its key, the queues end where they did, the group and the latest offsets are there, and
//!   sends continue at the next queue offsets. A graceful stop writes a checkpoint at the applied
//!   log id, so the next start re-applies nothing.
//! - hole 1 of issue 31: an entry whose ConsumeQueue write fails stops the replica (Raft stopped,
//!   the failure reported, the send not answered SEND_OK) and is never covered by a checkpoint, so
//!   a restart (the fault gone) applies it again and the queue holds it.

use crate::harness;

use std::collections::BTreeMap;
use std::time::Duration;

use anyhow::Context;
use anyhow::Result;
use anyhow::ensure;
use harness::cluster::Cluster;
use harness::cluster::WAIT;
use harness::cluster::until;
use raftmq_client::Admin;
use raftmq_client::Producer;
use raftmq_common::message::Message;
use raftmq_common::message::msg_id::OffsetMsgId;
use raftmq_common::protocol::body::message_queue::MessageQueue;
use raftmq_common::protocol::body::subscription_group::SubscriptionGroupConfig;
use raftmq_common::protocol::header::query::QueryMessageRequestHeader;
use raftmq_raft::NodeStatus;
use raftmq_raft::Role;

const TOPIC: &str = "T22Checkpoint";
const GROUP: &str = "t22-consumers";
const QUEUES: i32 = 2;

fn status(cluster: &Cluster, id: u64) -> Result<NodeStatus> {
    Ok(cluster.broker(id).context("replica not running")?.raft().status())
}

/// Sends `n` messages numbered from `from`, keyed `key-<i>`; (queue id, queue offset, offsetMsgId) of each.
async fn send(producer: &Producer, from: usize, n: usize) -> Result<BTreeMap<usize, (i32, i64, String)>> {
    let mut sent = BTreeMap::new();
    for i in from..from + n {
        let mut msg = Message::new(TOPIC, format!("body-{i}").into_bytes());
        msg.set_keys(format!("key-{i}"));
        let r = producer.send(msg).await?;
        sent.insert(i, (r.message_queue.queue_id, r.queue_offset, r.offset_msg_id));
    }
    Ok(sent)
}

async fn by_key(admin: &Admin, addr: &str, i: usize) -> Result<Vec<String>> {
    let query = QueryMessageRequestHeader {
        topic: TOPIC.into(),
        key: format!("key-{i}"),
        max_num: 32,
        begin_timestamp: 0,
        end_timestamp: i64::MAX,
        unique_key_query: None,
    };
    let found = admin.query_message(addr, &query).await?;
    Ok(found.iter().map(|m| String::from_utf8_lossy(&m.message.body).into_owned()).collect())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_crashed_broker_restarts_from_its_checkpoint_and_loses_nothing() -> Result<()> {
    let mut cluster = Cluster::start_with(1, |c| c.raft_checkpoint_interval_ms = 100).await?;
    cluster.create_topic(TOPIC, QUEUES).await?;
    let id = cluster.wait_leader(WAIT).await?;
    let addr = cluster.addr(id);
    let admin = Admin::new(&cluster.namesrv_addr)?;
    admin.create_subscription_group(&addr, &SubscriptionGroupConfig::new(GROUP)).await?;
    let producer = Producer::builder("t22-producers").namesrv_addr(&cluster.namesrv_addr).build()?;
    producer.start().await?;

    let mut sent = send(&producer, 0, 200).await?;
    for q in 0..QUEUES {
        admin.update_consumer_offset(&addr, GROUP, TOPIC, q, 10 + i64::from(q)).await?;
    }
    // A checkpoint is taken after an apply once the interval has passed: send until one covers
    // everything so far.
    let covered = status(&cluster, id)?.applied.context("applied")?.index;
    let mut next = sent.len();
    until(
        "a checkpoint covering the first sends",
        || {
            let (producer, cluster) = (&producer, &cluster);
            let at = next;
            next += 1;
            async move {
                let more = send(producer, at, 1).await?;
                Ok((more, status(cluster, id)?.checkpoint))
            }
        },
        |(_, checkpoint)| checkpoint.is_some_and(|c| c.index >= covered),
    )
    .await?;
    let written = status(&cluster, id)?.checkpoint.context("checkpoint")?;

    // After the checkpoint: more messages, a changed offset, a new group.
    let after = send(&producer, 10_000, 60).await?;
    admin.update_consumer_offset(&addr, GROUP, TOPIC, 0, 42).await?;
    admin.create_subscription_group(&addr, &SubscriptionGroupConfig::new("t22-late")).await?;
    producer.shutdown().await;
    let max_before: Vec<i64> = {
        let mut v = Vec::new();
        for q in 0..QUEUES {
            v.push(admin.max_offset(&addr, TOPIC, q).await?);
        }
        v
    };

    cluster.kill(id);
    cluster.start_replica(id).await?;
    cluster.wait_leader(WAIT).await?;
    let st = status(&cluster, id)?;
    let from = st.applied_at_start.context("the restarted replica did not start from its checkpoint")?;
    ensure!(from.index >= written.index, "started at {from}, before the checkpoint {written} it had written");

    for (q, max) in max_before.iter().enumerate() {
        let q = i32::try_from(q)?;
        ensure!(admin.max_offset(&addr, TOPIC, q).await? == *max, "queue {q} no longer ends at {max}");
    }
    sent.extend(after);
    for (i, (queue_id, queue_offset, offset_msg_id)) in &sent {
        let m = admin.view_message_by_id(&offset_msg_id.parse::<OffsetMsgId>()?).await?;
        ensure!(m.message.body == format!("body-{i}").into_bytes(), "message {i} read back wrong");
        ensure!((m.queue_id, m.queue_offset) == (*queue_id, *queue_offset), "message {i} moved");
    }
    for i in [0, 199, 10_000, 10_059] {
        ensure!(by_key(&admin, &addr, i).await? == vec![format!("body-{i}")], "key-{i} not found once");
    }
    ensure!(admin.query_consumer_offset(&addr, GROUP, TOPIC, 0).await? == Some(42));
    ensure!(admin.query_consumer_offset(&addr, GROUP, TOPIC, 1).await? == Some(11));
    {
        let store = cluster.broker(id).context("replica not running")?.store();
        let meta = store.metadata();
        ensure!(meta.groups.get(GROUP).is_some() && meta.groups.get("t22-late").is_some(), "a group is missing");
    }

    // Sends continue at the queues' next offsets.
    let producer = Producer::builder("t22-producers").namesrv_addr(&cluster.namesrv_addr).build()?;
    producer.start().await?;
    let resumed = send(&producer, 20_000, 4).await?;
    for (queue_id, queue_offset, _) in resumed.values() {
        let max = max_before[usize::try_from(*queue_id)?];
        ensure!(*queue_offset >= max, "a send after the restart took offset {queue_offset} of queue {queue_id}");
    }
    producer.shutdown().await;

    // A graceful stop checkpoints everything applied: the next start re-applies nothing.
    let applied = status(&cluster, id)?.applied.context("applied")?;
    cluster.stop(id).await?;
    cluster.start_replica(id).await?;
    cluster.wait_leader(WAIT).await?;
    let st = status(&cluster, id)?;
    ensure!(st.applied_at_start.is_some_and(|l| l.index >= applied.index), "{st:?} after a graceful stop at {applied}");
    ensure!(by_key(&admin, &addr, 20_003).await? == vec!["body-20003".to_owned()]);
    admin.shutdown().await;
    tokio::time::timeout(Duration::from_secs(30), cluster.crash_all()).await?
}

/// The whole answer (status line, headers, body) to `GET path` on an admin HTTP address.
async fn http_get(addr: std::net::SocketAddr, path: &str) -> Result<String> {
    use tokio::io::AsyncReadExt;
    use tokio::io::AsyncWriteExt;
    let mut stream = tokio::net::TcpStream::connect(addr).await?;
    stream.write_all(format!("GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n").as_bytes()).await?;
    let mut answer = String::new();
    tokio::time::timeout(WAIT, stream.read_to_string(&mut answer)).await??;
    Ok(answer)
}

/// Hole 1 of issue 31: a failed ConsumeQueue write used to set a flag only in memory while
/// `applied` moved on, so the next checkpoint (here the one of a graceful stop) counted the entry
/// as applied; after the restart it was never applied again and the queue stayed short of it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hole1_a_failed_apply_stops_the_replica_and_is_applied_again_after_a_restart() -> Result<()> {
    const FAILING: &str = "T31FailedApply";
    let mut cluster = Cluster::start_with(1, |c| c.raft_checkpoint_interval_ms = 100).await?;
    cluster.create_topic(FAILING, 2).await?;
    let id = cluster.wait_leader(WAIT).await?;
    let addr = cluster.addr(id);
    let config = cluster.configs.get(&id).context("config")?.clone();
    let queue = |q| MessageQueue::new(FAILING, &config.broker_name, q);
    let body = |q: i32, i: usize| format!("q{q}-{i}").into_bytes();
    let producer = Producer::builder("t31-producers")
        .namesrv_addr(&cluster.namesrv_addr)
        .retry_times_when_send_failed(0)
        .build()?;
    producer.start().await?;
    let mut sent0 = 0;
    for _ in 0..10 {
        producer.send_to_queue(Message::new(FAILING, body(0, sent0)), &queue(0)).await?;
        sent0 += 1;
    }
    let covered = status(&cluster, id)?.applied.context("applied")?.index;
    let deadline = tokio::time::Instant::now() + WAIT;
    while status(&cluster, id)?.checkpoint.is_none_or(|c| c.index < covered) {
        ensure!(tokio::time::Instant::now() < deadline, "no checkpoint covering the first sends");
        producer.send_to_queue(Message::new(FAILING, body(0, sent0)), &queue(0)).await?;
        sent0 += 1;
        tokio::time::sleep(Duration::from_millis(20)).await;
    }

    // Queue 1's directory cannot be created: the unit of the next message for it fails to write.
    let blocked = config.store_path_root_dir.join("consumequeue").join(FAILING).join("1");
    std::fs::write(&blocked, b"not a directory")?;
    let failed = producer.send_to_queue(Message::new(FAILING, body(1, 0)), &queue(1)).await;
    ensure!(failed.is_err(), "a send whose apply failed was answered {failed:?}");
    let stopped = until(
        "the replica whose apply failed stops",
        || async { status(&cluster, id) },
        |s| s.leadership.role == Role::Stopped,
    )
    .await?;
    let why = cluster.broker(id).context("replica not running")?.store().failure();
    ensure!(why.as_deref().is_some_and(|w| w.contains("ConsumeQueue")), "failure {why:?}, status {stopped:?}");
    // Unready, and /readyz says why.
    let admin_http = cluster.broker(id).context("replica not running")?.admin_addr().context("admin address")?;
    let readyz = http_get(admin_http, "/readyz").await?;
    ensure!(readyz.starts_with("HTTP/1.1 503") && readyz.contains("apply_failed"), "/readyz answered {readyz}");
    producer.shutdown().await;

    // A graceful stop writes no checkpoint past the failed entry; the restart applies it again.
    cluster.stop(id).await?;
    std::fs::remove_file(&blocked)?;
    cluster.start_replica(id).await?;
    cluster.wait_leader(WAIT).await?;
    ensure!(cluster.broker(id).context("replica not running")?.store().failure().is_none());
    let admin = Admin::new(&cluster.namesrv_addr)?;
    ensure!(admin.max_offset(&addr, FAILING, 0).await? == i64::try_from(sent0)?, "queue 0 changed");
    let held = admin.max_offset(&addr, FAILING, 1).await?;
    ensure!(held == 1, "queue 1 holds {held} units after the restart: the failed entry was never applied again");
    let producer = Producer::builder("t31-producers").namesrv_addr(&cluster.namesrv_addr).build()?;
    producer.start().await?;
    let next = producer.send_to_queue(Message::new(FAILING, body(1, 1)), &queue(1)).await?;
    ensure!(next.queue_offset == 1, "the next send to queue 1 took offset {}", next.queue_offset);
    producer.shutdown().await;
    admin.shutdown().await;
    tokio::time::timeout(Duration::from_secs(30), cluster.crash_all()).await?
}
