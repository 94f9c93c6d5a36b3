//! End-to-end failover: the leader of a 3-replica group is shut down gracefully (what SIGTERM does)
//! while 8 producers keep sending. The stopping leader hands leadership over before it goes, so a
//! ready leader exists the moment its shutdown returns (no election timeout). Every message
//! acknowledged with SEND_OK (before or after the failover) is consumed from the new leader, and
//! consumer offsets committed through the old leader are served by the new one. (SIGKILL of a
//! leader process: `t20_broker_kill9.rs`.)

use crate::harness;

use std::collections::HashSet;
use std::sync::Arc;
use std::sync::Mutex;
use std::sync::atomic::AtomicBool;
use std::sync::atomic::AtomicUsize;
use std::sync::atomic::Ordering;
use std::time::Duration;
use std::time::Instant;

use anyhow::Context;
use anyhow::Result;
use harness::group::Group;
use harness::group::drain_queue;
use harness::group::query_offset;
use harness::group::update_offset;
use raftmq_client::Admin;
use raftmq_client::Producer;
use raftmq_common::message::Message;
use raftmq_common::protocol::ResponseCode;
use raftmq_common::protocol::body::topic::TopicConfig;
use raftmq_common::protocol::leader_hint::parse_leader_hint;
use raftmq_common::remoting::RemotingClient;

const WAIT: Duration = Duration::from_secs(20);
const TOPIC: &str = "T23_FAILOVER";
const QUEUES: i32 = 4;
const SENDERS: usize = 8;
/// A gracefully stopped leader's successor is ready this soon after the shutdown returns.
const HANDOVER_MAX: Duration = Duration::from_millis(200);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn leader_killed_mid_stream_loses_no_acknowledged_message() -> Result<()> {
    let mut group = Group::start(3).await?;
    let old = group.wait_leader(WAIT).await?;
    let admin = Admin::new(&group.namesrv_addr)?;
    let config = TopicConfig { read_queue_nums: QUEUES, write_queue_nums: QUEUES, ..TopicConfig::new(TOPIC) };
    admin.create_topic(&group.addr(old), &config).await?;
    admin.shutdown().await;

    // Offsets committed through the old leader (two-way: replicated when answered).
    let client = RemotingClient::new();
    for q in 0..QUEUES {
        let r = update_offset(&client, &group.addr(old), "t23_group", TOPIC, q, 100 + i64::from(q)).await?;
        assert_eq!(r.response_code(), ResponseCode::Success, "{:?}", r.remark);
    }
    // A follower refuses an update, naming the leader, and never relays it: a relayed update can wait
    // in the follower's connection through a partition and land after newer commits (jepsen 7000).
    for id in group.brokers.keys().copied().filter(|id| *id != old).collect::<Vec<_>>() {
        let r = update_offset(&client, &group.addr(id), "t23_group", TOPIC, 0, 1).await?;
        assert_eq!(r.response_code(), ResponseCode::ServiceNotAvailable, "follower {id}: {:?}", r.remark);
        let hint = r.remark.as_deref().and_then(parse_leader_hint);
        assert!(hint.is_none_or(|h| h == group.addr(old)), "follower {id} names {hint:?}");
    }
    assert_eq!(query_offset(&client, &group.addr(old), "t23_group", TOPIC, 0).await?, Some(100));

    let producer = Arc::new(
        Producer::builder("t23_producer")
            .namesrv_addr(&group.namesrv_addr)
            .send_timeout(Duration::from_secs(2))
            .build()?,
    );
    producer.start().await?;
    let stop = Arc::new(AtomicBool::new(false));
    let acked_total = Arc::new(AtomicUsize::new(0));
    // When the last SEND_OK came, and the longest time without one (the failover as producers see it).
    let gap: Arc<Mutex<(Option<Instant>, Duration)>> = Arc::default();
    let mut senders = Vec::new();
    for s in 0..SENDERS {
        let (producer, stop, acked_total) = (Arc::clone(&producer), Arc::clone(&stop), Arc::clone(&acked_total));
        let gap = Arc::clone(&gap);
        senders.push(tokio::spawn(async move {
            let mut acked = Vec::new();
            let mut i = 0usize;
            while !stop.load(Ordering::Acquire) {
                let m = Message::new(TOPIC, format!("{s}-{i}")).with_tags("TagA");
                // Failures during the election are expected: only SEND_OK counts.
                if let Ok(r) = producer.send(m).await {
                    acked.push(r.msg_id);
                    acked_total.fetch_add(1, Ordering::AcqRel);
                    let now = Instant::now();
                    let mut g = gap.lock().unwrap_or_else(|p| p.into_inner());
                    if let Some(last) = g.0 {
                        g.1 = g.1.max(now.saturating_duration_since(last));
                    }
                    g.0 = Some(g.0.map_or(now, |last| last.max(now)));
                }
                i += 1;
            }
            acked
        }));
    }
    let deadline = Instant::now() + WAIT;
    while acked_total.load(Ordering::Acquire) < 300 {
        anyhow::ensure!(Instant::now() < deadline, "sends did not start");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let killed_at = Instant::now();
    group.stop(old).await;
    // Handed over during the shutdown: no election timeout (≥ 1.2 s) to wait out.
    let new = group.wait_leader(HANDOVER_MAX).await?;
    assert_ne!(new, old);
    eprintln!("new leader {new} ready {:?} after the shutdown began", killed_at.elapsed());
    let before = acked_total.load(Ordering::Acquire);
    while acked_total.load(Ordering::Acquire) < before + 300 {
        anyhow::ensure!(Instant::now() < deadline + WAIT, "sends did not resume at the new leader");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    stop.store(true, Ordering::Release);
    let mut acked = HashSet::new();
    for task in senders {
        acked.extend(task.await?);
    }
    let longest_gap = gap.lock().unwrap_or_else(|p| p.into_inner()).1;
    eprintln!("longest time without a SEND_OK across the graceful stop: {longest_gap:?}");
    producer.shutdown().await;

    let addr = group.addr(new);
    let mut consumed = HashSet::new();
    for q in 0..QUEUES {
        let messages = drain_queue(&client, &addr, TOPIC, q).await?;
        for (index, m) in messages.iter().enumerate() {
            assert_eq!(m.queue_offset, index as i64, "queue {q} stays dense across the failover");
            consumed.insert(m.message.uniq_key().context("UNIQ_KEY")?.to_owned());
        }
    }
    let lost: Vec<_> = acked.difference(&consumed).collect();
    assert!(lost.is_empty(), "{} acknowledged messages lost, e.g. {:?}", lost.len(), lost.first());
    eprintln!("{} acknowledged, {} stored", acked.len(), consumed.len());
    for q in 0..QUEUES {
        assert_eq!(query_offset(&client, &addr, "t23_group", TOPIC, q).await?, Some(100 + i64::from(q)));
    }
    group.shutdown().await;
    Ok(())
}
