//! Issue 7 acceptance, failover through the SDK: the leader of a 3-replica group **crashes** (its
//! runtime is dropped: no Raft handover, no NameServer unregistration) while producers run sync-send
//! loops.
//!
//! - Every send ends, within its deadline, as SEND_OK or as an error (failed or outcome unknown).
//! - Every SEND_OK message is consumed afterwards from the new leader by a push consumer.
//! - Sends succeed again within 3 s: from the kill to the first SEND_OK of a send that began after it
//!   (and within 500 ms of the new leader being ready: the producer's part).

use crate::harness;

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
use harness::cluster::Collector;
use harness::cluster::WAIT;
use raftmq_client::Producer;
use raftmq_client::PushConsumer;
use raftmq_client::SendStatus;
use raftmq_client::consumer::ConsumeConcurrentlyContext;
use raftmq_client::consumer::ConsumeConcurrentlyStatus;
use raftmq_client::consumer::ConsumeFrom;
use raftmq_common::message::Message;
use raftmq_common::message::MessageExt;
use tokio::sync::watch;

const TOPIC: &str = "T44_FAILOVER";
const SENDERS: usize = 4;
const SEND_TIMEOUT: Duration = Duration::from_secs(1);
/// The acceptance bound: kill to the first SEND_OK of a send started after it.
const RECOVERY_MAX: Duration = Duration::from_secs(3);
/// New leader ready to the first SEND_OK: the producer's failover (route refresh at once, replicas asked) bounds it.
const CATCH_UP_MAX: Duration = Duration::from_millis(500);

/// One finished send.
#[derive(Debug, Clone)]
struct Outcome {
    body: String,
    started: Instant,
    finished: Instant,
    /// `Ok(status)`, or `Err(outcome unknown?)`.
    result: Result<SendStatus, bool>,
}

/// The sends so far, and a count of SEND_OKs to wait on.
#[derive(Clone)]
struct Log {
    outcomes: Arc<Mutex<Vec<Outcome>>>,
    ok: Arc<watch::Sender<usize>>,
}

impl Log {
    fn push(&self, outcome: Outcome) {
        let ok = outcome.result.is_ok();
        self.outcomes.lock().unwrap_or_else(|p| p.into_inner()).push(outcome);
        if ok {
            self.ok.send_modify(|n| *n += 1);
        }
    }

    fn all(&self) -> Vec<Outcome> {
        self.outcomes.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// Waits until `done(outcomes)` holds, re-checking on each SEND_OK.
    async fn wait_until(&self, what: &str, done: impl Fn(&[Outcome]) -> bool) -> Result<()> {
        let mut rx = self.ok.subscribe();
        let deadline = tokio::time::Instant::now() + WAIT;
        loop {
            rx.borrow_and_update();
            if done(&self.outcomes.lock().unwrap_or_else(|p| p.into_inner())) {
                return Ok(());
            }
            match tokio::time::timeout_at(deadline, rx.changed()).await {
                Ok(Ok(())) => {}
                _ => bail!("timed out waiting for {what}"),
            }
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn leader_crash_during_sync_sends_loses_no_ack_and_sends_resume_within_3s() -> Result<()> {
    let mut cluster = Cluster::start(3).await?;
    cluster.create_topic(TOPIC, 4).await?;
    let old = cluster.wait_leader(WAIT).await?;
    let producer =
        Producer::builder("t44_producer").namesrv_addr(&cluster.namesrv_addr).send_timeout(SEND_TIMEOUT).build()?;
    producer.start().await?;

    let log = Log { outcomes: Arc::default(), ok: Arc::new(watch::channel(0).0) };
    let stop = Arc::new(AtomicBool::new(false));
    let mut senders = Vec::new();
    for s in 0..SENDERS {
        let (producer, log, stop) = (producer.clone(), log.clone(), stop.clone());
        senders.push(tokio::spawn(async move {
            let mut i = 0usize;
            while !stop.load(Ordering::Acquire) {
                let body = format!("s{s}-{i}");
                let started = Instant::now();
                let result = match producer.send(Message::new(TOPIC, body.clone()).with_tags("TagA")).await {
                    Ok(r) => Ok(r.status),
                    Err(e) => Err(e.is_outcome_unknown()),
                };
                log.push(Outcome { body, started, finished: Instant::now(), result });
                i += 1;
            }
        }));
    }
    log.wait_until("200 SEND_OK before the crash", |o| o.iter().filter(|o| o.result.is_ok()).count() >= 200).await?;

    let killed_at = Instant::now();
    cluster.kill(old);
    let after_kill = |o: &Outcome| o.started >= killed_at && o.result.is_ok();
    let new = cluster.wait_leader(WAIT).await?;
    let leader_ready = killed_at.elapsed();
    log.wait_until("200 SEND_OK of sends begun after the crash", |o| o.iter().filter(|o| after_kill(o)).count() >= 200)
        .await?;
    stop.store(true, Ordering::Release);
    for sender in senders {
        sender.await?;
    }
    producer.shutdown().await;
    assert_ne!(new, old, "a new leader was elected");

    let outcomes = log.all();
    let recovered = outcomes.iter().filter(|o| after_kill(o)).map(|o| o.finished).min();
    let recovery = recovered.map(|t| t.duration_since(killed_at));
    let failed = outcomes.iter().filter(|o| o.result == Err(false)).count();
    let unknown = outcomes.iter().filter(|o| o.result == Err(true)).count();
    let slowest = outcomes.iter().map(|o| o.finished.duration_since(o.started)).max().unwrap_or_default();
    let acked: BTreeSet<String> = outcomes.iter().filter(|o| o.result.is_ok()).map(|o| o.body.clone()).collect();
    eprintln!(
        "t44: {} sends, {} SEND_OK, {failed} failed, {unknown} unknown; slowest send {slowest:?}; \
         new leader ready {leader_ready:?} and first SEND_OK {recovery:?} after the crash (leader {old} -> {new})",
        outcomes.len(),
        acked.len()
    );
    assert!(outcomes.iter().all(|o| o.result.is_err() || o.result == Ok(SendStatus::SendOk)), "only SEND_OK or errors");
    // Three attempts share one deadline; allow scheduling slack on top.
    assert!(slowest < SEND_TIMEOUT + Duration::from_secs(2), "a send outlived its deadline: {slowest:?}");
    let recovery = recovery.ok_or_else(|| anyhow::anyhow!("no SEND_OK after the crash"))?;
    // The SDK's share: it finds the new leader (NameServer poll or leader hint) almost at once.
    let catch_up = recovery.saturating_sub(leader_ready);
    assert!(catch_up < CATCH_UP_MAX, "first SEND_OK {catch_up:?} after the new leader was ready");

    // Every acknowledged message is consumed from the new leader.
    let collector = Collector::default();
    let sink = collector.clone();
    let consumer = PushConsumer::builder("t44_consumer")
        .namesrv_addr(&cluster.namesrv_addr)
        .subscribe(TOPIC, "*")
        .consume_from(ConsumeFrom::FirstOffset)
        .pull_batch_size(64)
        .listener_concurrently(move |msgs: &[MessageExt], _ctx: &mut ConsumeConcurrentlyContext| {
            sink.record("c", msgs);
            ConsumeConcurrentlyStatus::ConsumeSuccess
        })
        .build()?;
    consumer.start().await?;
    collector.wait_for_bodies(&acked).await?;
    consumer.shutdown().await;
    cluster.crash_all().await?;

    // Last, so that a slow election does not hide the checks above.
    assert!(
        recovery < RECOVERY_MAX,
        "sends resumed {recovery:?} after the leader crashed (bound {RECOVERY_MAX:?}); the new leader was ready \
         after {leader_ready:?}: openraft starts an election only after leader_lease (= election_timeout_max) \
         + a random election timeout since the last heartbeat"
    );
    Ok(())
}
