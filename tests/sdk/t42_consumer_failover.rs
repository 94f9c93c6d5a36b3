//! Issue 29, the consumer's side of a failover: the leader of a 3-replica group **crashes** (its
//! runtime is dropped: no Raft handover, no NameServer unregistration) while a producer sends and a
//! push consumer consumes, both with default settings (the 30 s route poll included).
//!
//! - The consumer receives messages sent after the crash within a few seconds of it: its pulls,
//!   long polls and heartbeats find the new leader (route refreshed at once, replicas asked) instead
//!   of waiting for the route poll.
//! - Once sends succeed again, their messages reach the listener within [`DELIVERY_CATCH_UP_MAX`].
//! - Every message acknowledged with SEND_OK is consumed.

use crate::harness;

use std::collections::BTreeMap;
use std::collections::BTreeSet;
use std::sync::Arc;
use std::sync::Mutex;
use std::sync::atomic::AtomicBool;
use std::sync::atomic::Ordering;
use std::time::Duration;
use std::time::Instant;

use anyhow::Result;
use anyhow::bail;
use harness::cluster::Cluster;
use harness::cluster::WAIT;
use raftmq_client::Producer;
use raftmq_client::PushConsumer;
use raftmq_client::consumer::ConsumeConcurrentlyContext;
use raftmq_client::consumer::ConsumeConcurrentlyStatus;
use raftmq_client::consumer::ConsumeFrom;
use raftmq_common::message::Message;
use raftmq_common::message::MessageExt;
use tokio::sync::watch;

const TOPIC: &str = "T42_CONSUMER_FAILOVER";
/// Kill to the first delivery of a message sent after it: the election (about 1.5 s) plus the
/// clients' share, with room for two shared cores.
const RECOVERY_MAX: Duration = Duration::from_secs(5);
/// First SEND_OK after the crash to the delivery of a message sent after the crash.
const DELIVERY_CATCH_UP_MAX: Duration = Duration::from_secs(1);
/// Pacing of the sender: enough messages to see a gap, little load on two shared cores.
const SEND_EVERY: Duration = Duration::from_millis(5);

/// Sequence number → when it was delivered (first time), plus a count to wait on.
#[derive(Clone)]
struct Deliveries {
    at: Arc<Mutex<BTreeMap<u64, Instant>>>,
    count: Arc<watch::Sender<usize>>,
}

impl Deliveries {
    fn record(&self, msgs: &[MessageExt]) {
        let now = Instant::now();
        let n = {
            let mut at = self.at.lock().unwrap_or_else(|p| p.into_inner());
            for m in msgs {
                if let Ok(seq) = String::from_utf8_lossy(&m.message.body).parse::<u64>() {
                    at.entry(seq).or_insert(now);
                }
            }
            at.len()
        };
        self.count.send_replace(n);
    }

    fn snapshot(&self) -> BTreeMap<u64, Instant> {
        self.at.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    async fn wait_until(&self, what: &str, done: impl Fn(&BTreeMap<u64, Instant>) -> bool) -> Result<()> {
        let mut rx = self.count.subscribe();
        let deadline = tokio::time::Instant::now() + WAIT;
        loop {
            rx.borrow_and_update();
            if done(&self.snapshot()) {
                return Ok(());
            }
            match tokio::time::timeout_at(deadline, rx.changed()).await {
                Ok(Ok(())) => {}
                _ => bail!("timed out waiting for {what}; {} delivered", self.snapshot().len()),
            }
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn push_consumer_keeps_receiving_after_the_leader_crashes() -> Result<()> {
    let mut cluster = Cluster::start(3).await?;
    cluster.create_topic(TOPIC, 4).await?;
    let old = cluster.wait_leader(WAIT).await?;

    let deliveries = Deliveries { at: Arc::default(), count: Arc::new(watch::channel(0).0) };
    let sink = deliveries.clone();
    let consumer = PushConsumer::builder("t42_consumer")
        .namesrv_addr(&cluster.namesrv_addr)
        .subscribe(TOPIC, "*")
        .consume_from(ConsumeFrom::FirstOffset)
        .listener_concurrently(move |msgs: &[MessageExt], _ctx: &mut ConsumeConcurrentlyContext| {
            sink.record(msgs);
            ConsumeConcurrentlyStatus::ConsumeSuccess
        })
        .build()?;
    consumer.start().await?;
    let producer = Producer::builder("t42_producer").namesrv_addr(&cluster.namesrv_addr).build()?;
    producer.start().await?;

    // seq → (send started, SEND_OK at); failed sends are left out.
    let acked: Arc<Mutex<BTreeMap<u64, (Instant, Instant)>>> = Arc::default();
    let stop = Arc::new(AtomicBool::new(false));
    let sender = {
        let (producer, acked, stop) = (producer.clone(), acked.clone(), stop.clone());
        tokio::spawn(async move {
            let mut seq = 0u64;
            let mut failed = 0usize;
            while !stop.load(Ordering::Acquire) {
                let started = Instant::now();
                match producer.send(Message::new(TOPIC, seq.to_string())).await {
                    Ok(_) => {
                        acked.lock().unwrap_or_else(|p| p.into_inner()).insert(seq, (started, Instant::now()));
                    }
                    Err(_) => failed += 1,
                }
                seq += 1;
                tokio::time::sleep(SEND_EVERY).await;
            }
            failed
        })
    };
    deliveries.wait_until("100 deliveries before the crash", |d| d.len() >= 100).await?;

    let killed_at = Instant::now();
    cluster.kill(old);
    let new = cluster.wait_leader(WAIT).await?;
    let leader_ready = killed_at.elapsed();
    let sent_after = |acked: &BTreeMap<u64, (Instant, Instant)>| -> BTreeSet<u64> {
        acked.iter().filter(|(_, (started, _))| *started >= killed_at).map(|(seq, _)| *seq).collect()
    };
    let acked_after = || sent_after(&acked.lock().unwrap_or_else(|p| p.into_inner()));
    deliveries
        .wait_until("100 deliveries of messages sent after the crash", |d| {
            acked_after().iter().filter(|seq| d.contains_key(seq)).count() >= 100
        })
        .await?;
    stop.store(true, Ordering::Release);
    let failed = sender.await?;
    producer.shutdown().await;

    let acked = acked.lock().unwrap_or_else(|p| p.into_inner()).clone();
    let after = sent_after(&acked);
    let first_ok = after.iter().filter_map(|seq| acked.get(seq)).map(|(_, ok)| *ok).min();
    let first_ok = first_ok.ok_or_else(|| anyhow::anyhow!("no SEND_OK after the crash"))?;
    let delivered = deliveries.snapshot();
    let first_delivery = after.iter().filter_map(|seq| delivered.get(seq)).min().copied();
    let first_delivery = first_delivery.ok_or_else(|| anyhow::anyhow!("nothing sent after the crash delivered"))?;
    // The longest wait of the listener across the crash: between consecutive deliveries.
    let mut times: Vec<Instant> = delivered.values().copied().collect();
    times.sort();
    let longest_gap = times.windows(2).map(|w| w[1].duration_since(w[0])).max().unwrap_or_default();
    let recovery = first_delivery.duration_since(killed_at);
    let catch_up = first_delivery.saturating_duration_since(first_ok);
    eprintln!(
        "t42: leader {old} -> {new} ready {leader_ready:?} after the crash; first SEND_OK after {:?}, first \
         delivery of a message sent after the crash after {recovery:?} ({catch_up:?} after that SEND_OK); \
         longest gap between deliveries {longest_gap:?}; {} acked, {failed} failed sends",
        first_ok.duration_since(killed_at),
        acked.len()
    );
    assert_ne!(new, old, "a new leader was elected");
    assert!(catch_up < DELIVERY_CATCH_UP_MAX, "deliveries resumed {catch_up:?} after sends did");
    assert!(
        recovery < RECOVERY_MAX,
        "deliveries resumed {recovery:?} after the crash (new leader ready {leader_ready:?})"
    );

    // Every acknowledged message is consumed.
    let want: BTreeSet<u64> = acked.keys().copied().collect();
    deliveries.wait_until("every acknowledged message", |d| want.iter().all(|seq| d.contains_key(seq))).await?;
    consumer.shutdown().await;
    cluster.crash_all().await?;
    Ok(())
}
