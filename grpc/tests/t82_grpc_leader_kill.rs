//! t82 (acceptance): a leader killed while a SimpleConsumer is receiving. Nothing acknowledged to
//! the producer is lost, nothing acked is delivered again, unacked messages come back.
//!
//! A 3-replica group with default settings, each replica on its own runtime with its gRPC
//! MessagingService (`harness/cluster.rs`: a kill drops the runtime, every task and socket at
//! once, no handover). The official `rocketmq` 5.0.0 `Producer` and `SimpleConsumer`, with default
//! options, are given every replica's gRPC address as their access point (the client balances
//! over them). The producer sends before the consumer starts and goes on sending, paced, across
//! the kill; the consumer receives and acks each message, except every eighth, left for its
//! invisible time. Once it has received a good part of the first messages, the Raft leader is
//! killed, whatever calls are in flight. The consumer keeps receiving (errors while the group
//! elects are retried) until every message the producer had acknowledged was delivered and every
//! message left unacked came back with a higher delivery attempt and was acked, then for one more
//! invisible time after its last acked delivery, in which an acked message would come back if its
//! ack had been lost.
//!
//! Checked: every acknowledged send is delivered; nothing acked (OK) is delivered after its ack;
//! each message left unacked is delivered again with a higher attempt; every delivery is of a
//! message the producer sent. Waits are bounded by deadlines, which only ever fail the test.
//!
//! rocketmq 5.0.0 balances calls over the list (tonic's `balance_list`) and never drops the
//! killed address: about a third of its later calls fail at its own connect. Such a send counts
//! as not acknowledged; such an ack leaves the message to come back, and it is acked again.

use crate::cluster;

use std::collections::BTreeMap;
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
use cluster::Cluster;
use raftmq_grpc::GrpcServer;
use rocketmq::Producer;
use rocketmq::SimpleConsumer;
use rocketmq::conf::ClientOption;
use rocketmq::conf::ProducerOption;
use rocketmq::conf::SimpleConsumerOption;
use rocketmq::model::common::FilterExpression;
use rocketmq::model::common::FilterType;
use rocketmq::model::message::MessageBuilder;
use tokio_util::sync::CancellationToken;

const TOPIC: &str = "GrpcKillTopic";
const GROUP: &str = "GrpcKillGroup";
const QUEUES: i32 = 4;
/// Messages sent before the consumer starts.
const SENT_FIRST: usize = 48;
/// Deliveries before the leader is killed.
const DELIVERED_BEFORE_KILL: usize = 24;
/// Sends acknowledged after the kill before the producer stops.
const SENT_AFTER_KILL: usize = 16;
/// At most this many sends in all.
const SENDS_MAX: usize = 2_000;
/// Pace of the producer's sends after the first ones (load shaping, not synchronisation).
const SEND_PACE: Duration = Duration::from_millis(20);
/// Pause after a failed receive or ack (the client has no backoff of its own).
const RETRY_PAUSE: Duration = Duration::from_millis(100);
/// `SimpleConsumer::receive`'s invisible duration (rocketmq 5.0.0's default).
const INVISIBLE: Duration = Duration::from_secs(15);
/// After an acked delivery's invisible time: the leader's revive pass (every second) and the
/// next receive's long polling, before a lost ack would show.
const REVIVE_MARGIN: Duration = Duration::from_secs(5);
/// Bound of the whole exchange on a loaded 2-core machine.
const WAIT: Duration = Duration::from_secs(300);

/// Whether the message with body index `i` is left unacked on its first delivery.
fn left_unacked(i: usize) -> bool {
    i % 8 == 3
}

fn index_of(body: &[u8]) -> Option<usize> {
    std::str::from_utf8(body).ok()?.strip_prefix("kill-")?.parse().ok()
}

/// One delivery the consumer saw.
#[derive(Debug, Clone)]
struct Delivery {
    id: String,
    index: usize,
    attempt: i32,
    at: Instant,
    /// Whether the leader had been killed before the receive returned.
    after_kill: bool,
}

/// What the producer and the consumer saw.
#[derive(Debug, Default)]
struct Log {
    /// Sends acknowledged: id by body index.
    sent_ok: BTreeMap<usize, String>,
    /// Sends that failed (maybe stored, maybe not): body indexes.
    sent_failed: BTreeSet<usize>,
    deliveries: Vec<Delivery>,
    /// Acks answered OK: id → when.
    acked: BTreeMap<String, Instant>,
    /// Acks that failed (maybe applied, maybe not).
    acks_failed: usize,
    /// Receives that failed.
    receives_failed: usize,
    producer_done: bool,
}

fn client_option(access_url: &str) -> ClientOption {
    let mut option = ClientOption::default();
    option.set_access_url(access_url);
    option
}

fn message(i: usize) -> Result<impl rocketmq::model::message::Message> {
    MessageBuilder::builder()
        .set_topic(TOPIC)
        .set_tag("TagK")
        .set_body(format!("kill-{i}").into_bytes())
        .build()
        .map_err(|e| anyhow::anyhow!("{e:?}"))
}

async fn send_one(producer: &Producer, log: &Mutex<Log>, i: usize) -> Result<bool> {
    let sent = producer.send(message(i)?).await;
    let mut log = log.lock().map_err(|_| anyhow::anyhow!("poisoned"))?;
    match sent {
        Ok(receipt) => {
            log.sent_ok.insert(i, receipt.message_id().to_owned());
            Ok(true)
        }
        Err(e) => {
            eprintln!("t82: send {i} failed: {e:?}");
            log.sent_failed.insert(i);
            Ok(false)
        }
    }
}

/// Sends, paced, until [`SENT_AFTER_KILL`] sends were acknowledged after the kill.
async fn keep_sending(producer: Producer, log: Arc<Mutex<Log>>, killed: Arc<AtomicBool>) -> Result<()> {
    let mut pace = tokio::time::interval(SEND_PACE);
    let mut ok_after_kill = 0;
    for i in SENT_FIRST..SENDS_MAX {
        pace.tick().await;
        let was_killed = killed.load(Ordering::SeqCst);
        if send_one(&producer, &log, i).await? && was_killed {
            ok_after_kill += 1;
            if ok_after_kill == SENT_AFTER_KILL {
                break;
            }
        }
    }
    log.lock().map_err(|_| anyhow::anyhow!("poisoned"))?.producer_done = true;
    // Shutting down notifies one endpoint of the balanced list, maybe the killed one.
    if let Err(e) = producer.shutdown().await {
        eprintln!("t82: producer shutdown: {e:?}");
    }
    Ok(())
}

/// Receives and acks (all but the messages left for their invisible time) until `done`.
async fn consume(
    consumer: SimpleConsumer,
    log: Arc<Mutex<Log>>,
    killed: Arc<AtomicBool>,
    done: CancellationToken,
) -> Result<()> {
    let any = FilterExpression::new(FilterType::Tag, "*");
    // Body indexes already left unacked once.
    let mut left: BTreeSet<usize> = BTreeSet::new();
    loop {
        let received = tokio::select! {
            biased;
            _ = done.cancelled() => break,
            r = consumer.receive(TOPIC, &any) => r,
        };
        let after_kill = killed.load(Ordering::SeqCst);
        let batch = match received {
            Ok(batch) => batch,
            Err(e) => {
                eprintln!("t82: receive failed (after kill: {after_kill}): {e:?}");
                log.lock().map_err(|_| anyhow::anyhow!("poisoned"))?.receives_failed += 1;
                tokio::time::sleep(RETRY_PAUSE).await;
                continue;
            }
        };
        for m in batch {
            let index = index_of(m.body()).with_context(|| format!("a foreign body {:?}", m.body()))?;
            let delivery = Delivery {
                id: m.message_id().to_owned(),
                index,
                attempt: m.delivery_attempt(),
                at: Instant::now(),
                after_kill,
            };
            log.lock().map_err(|_| anyhow::anyhow!("poisoned"))?.deliveries.push(delivery);
            if left_unacked(index) && left.insert(index) {
                continue;
            }
            let acked = consumer.ack(&m).await;
            let mut log = log.lock().map_err(|_| anyhow::anyhow!("poisoned"))?;
            match acked {
                Ok(()) => {
                    log.acked.insert(m.message_id().to_owned(), Instant::now());
                }
                Err(e) => {
                    eprintln!("t82: ack of {index} failed: {e:?}");
                    log.acks_failed += 1;
                }
            }
        }
    }
    // Shutting down notifies one endpoint of the balanced list, maybe the killed one.
    if let Err(e) = consumer.shutdown().await {
        eprintln!("t82: consumer shutdown: {e:?}");
    }
    Ok(())
}

/// Whether the exchange is over: the producer stopped, every acknowledged send was delivered,
/// every message left unacked came back and was acked, and one invisible time (plus the revive
/// margin) passed since the last acked delivery.
fn finished(log: &Log) -> bool {
    if !log.producer_done {
        return false;
    }
    let delivered: BTreeSet<&str> = log.deliveries.iter().map(|d| d.id.as_str()).collect();
    if log.sent_ok.values().any(|id| !delivered.contains(id.as_str())) {
        return false;
    }
    let left_back = log.sent_ok.iter().filter(|(i, _)| left_unacked(**i)).all(|(_, id)| log.acked.contains_key(id));
    let last_acked_delivery = log.deliveries.iter().filter(|d| log.acked.contains_key(&d.id)).map(|d| d.at).max();
    left_back && last_acked_delivery.is_none_or(|at| at.elapsed() >= INVISIBLE + REVIVE_MARGIN)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn t82_leader_killed_while_a_simple_consumer_receives() -> Result<()> {
    let mut cluster = Cluster::start(3).await?;
    cluster.create_topic(TOPIC, QUEUES).await?;
    let deadline = Instant::now() + WAIT;
    while cluster.running().iter().any(|id| cluster.broker(*id).is_none_or(|b| b.bridge().topic(TOPIC).is_none())) {
        if Instant::now() > deadline {
            bail!("the topic never reached every replica");
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // Each replica's gRPC server on the replica's own runtime: a kill takes it down too.
    let mut ports = BTreeMap::new();
    for id in cluster.running() {
        let bridge = cluster.broker(id).context("running")?.bridge();
        let bound =
            cluster.spawn_on(id, GrpcServer::bind(bridge, "127.0.0.1:0".parse()?)).context("running")?.await??;
        ports.insert(id, bound);
    }
    let access_url =
        ports.values().map(|s| format!("127.0.0.1:{}", s.local_addr().port())).collect::<Vec<_>>().join(",");
    println!("t82: access point {access_url}");

    let log: Arc<Mutex<Log>> = Arc::default();
    let killed = Arc::new(AtomicBool::new(false));
    let mut producer_option = ProducerOption::default();
    producer_option.set_topics(vec![TOPIC]);
    let mut producer =
        Producer::new(producer_option, client_option(&access_url)).map_err(|e| anyhow::anyhow!("{e:?}"))?;
    producer.start().await.map_err(|e| anyhow::anyhow!("producer start: {e:?}"))?;
    for i in 0..SENT_FIRST {
        send_one(&producer, &log, i).await?;
    }
    let producing = tokio::spawn(keep_sending(producer, Arc::clone(&log), Arc::clone(&killed)));

    let mut consumer_option = SimpleConsumerOption::default();
    consumer_option.set_consumer_group(GROUP);
    consumer_option.set_topics(vec![TOPIC]);
    let mut consumer =
        SimpleConsumer::new(consumer_option, client_option(&access_url)).map_err(|e| anyhow::anyhow!("{e:?}"))?;
    consumer.start().await.map_err(|e| anyhow::anyhow!("consumer start: {e:?}"))?;
    let done = CancellationToken::new();
    let consuming = tokio::spawn(consume(consumer, Arc::clone(&log), Arc::clone(&killed), done.clone()));

    // Kill the leader once the consumer is well under way, whatever it has in flight.
    loop {
        let delivered = log.lock().map_err(|_| anyhow::anyhow!("poisoned"))?.deliveries.len();
        if delivered >= DELIVERED_BEFORE_KILL {
            break;
        }
        if consuming.is_finished() {
            consuming.await?.context("the consumer stopped early")?;
            bail!("the consumer stopped early");
        }
        if Instant::now() > deadline {
            bail!("only {delivered} deliveries before the kill");
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let leader = cluster.wait_leader(WAIT).await?;
    killed.store(true, Ordering::SeqCst);
    cluster.kill(leader);
    let killed_at = Instant::now();
    println!("t82: killed leader {leader}");

    loop {
        let over = finished(&*log.lock().map_err(|_| anyhow::anyhow!("poisoned"))?);
        if over {
            break;
        }
        if consuming.is_finished() {
            consuming.await?.context("the consumer stopped early")?;
            bail!("the consumer stopped early");
        }
        if producing.is_finished() && !log_done(&log)? {
            producing.await?.context("the producer stopped early")?;
            bail!("the producer stopped early");
        }
        if Instant::now() > deadline {
            let log = log.lock().map_err(|_| anyhow::anyhow!("poisoned"))?;
            let delivered: BTreeSet<&str> = log.deliveries.iter().map(|d| d.id.as_str()).collect();
            let missing: Vec<usize> =
                log.sent_ok.iter().filter(|(_, id)| !delivered.contains(id.as_str())).map(|(i, _)| *i).collect();
            let left_not_back: Vec<usize> = log
                .sent_ok
                .iter()
                .filter(|(i, id)| left_unacked(**i) && !log.acked.contains_key(*id))
                .map(|(i, _)| *i)
                .collect();
            bail!(
                "not finished within {WAIT:?} (producer done: {}): acknowledged sends never delivered {missing:?}, \
                 left unacked and not back {left_not_back:?}",
                log.producer_done
            );
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    done.cancel();
    consuming.await??;
    producing.await??;
    let recovered_in = killed_at.elapsed();

    {
        let log = log.lock().map_err(|_| anyhow::anyhow!("poisoned"))?;
        let sent_ids: BTreeMap<&str, usize> = log.sent_ok.iter().map(|(i, id)| (id.as_str(), *i)).collect();
        let mut first_attempt: BTreeMap<&str, i32> = BTreeMap::new();
        let mut came_back = 0;
        for d in &log.deliveries {
            assert!(
                sent_ids.contains_key(d.id.as_str()) || log.sent_failed.contains(&d.index),
                "delivered {} (body {}), which was never sent",
                d.id,
                d.index
            );
            if let Some(acked_at) = log.acked.get(&d.id) {
                assert!(
                    d.at <= *acked_at,
                    "{} (body {}) was acked and then delivered again (attempt {}, after the kill: {})",
                    d.id,
                    d.index,
                    d.attempt,
                    d.after_kill
                );
            }
            match first_attempt.get(d.id.as_str()) {
                None => {
                    first_attempt.insert(&d.id, d.attempt);
                }
                Some(first) => {
                    assert!(d.attempt > *first, "{} delivered again with attempt {} after {first}", d.index, d.attempt);
                    came_back += 1;
                }
            }
        }
        for (i, id) in &log.sent_ok {
            assert!(first_attempt.contains_key(id.as_str()), "acknowledged send {i} ({id}) was never delivered");
            if left_unacked(*i) {
                let attempts: Vec<i32> = log.deliveries.iter().filter(|d| d.id == *id).map(|d| d.attempt).collect();
                assert!(attempts.len() >= 2, "message {i} left unacked never came back: attempts {attempts:?}");
            }
        }
        let acked_before_kill =
            log.deliveries.iter().filter(|d| !d.after_kill && log.acked.contains_key(&d.id)).count();
        println!(
            "t82: {} sends acknowledged ({} failed), {} deliveries ({came_back} again, {} after the kill), {} acked \
             ({acked_before_kill} delivered before the kill), {} acks and {} receives failed; finished {recovered_in:?} \
             after the kill",
            log.sent_ok.len(),
            log.sent_failed.len(),
            log.deliveries.len(),
            log.deliveries.iter().filter(|d| d.after_kill).count(),
            log.acked.len(),
            log.acks_failed,
            log.receives_failed,
        );
    }
    drop(ports);
    cluster.crash_all().await?;
    Ok(())
}

/// Whether the producer recorded its end (a producer task that ended without it failed).
fn log_done(log: &Mutex<Log>) -> Result<bool> {
    Ok(log.lock().map_err(|_| anyhow::anyhow!("poisoned"))?.producer_done)
}
