//! `raftmq bench e2e`: send-to-delivery latency at a fixed rate. One process runs a paced producer
//! and a push consumer of the same topic; every body starts with a magic number, this run's id and
//! the time it was handed to `send` (µs since the epoch, one clock for both ends), so the latency is
//! measured at microsecond resolution, not the millisecond `bornTimestamp`. A new group may start
//! at a queue's first message (RocketMQ's broker answers offset 0 while that message is still in
//! memory), so messages of earlier runs are read too: the run id keeps them out of the figures.
//!
//! ```text
//!  consumer start ─▶ probes until one is delivered (the consumer owns its queues, offsets known)
//!  ─▶ paced senders (--rate, --concurrency in flight) for --duration ──▶ SEND_OK
//!  listener: now − stamped send time ─▶ histogram          ◀── delivered through the broker
//!  ─▶ wait for every acknowledged message (at most DRAIN_WAIT) ─▶ one summary
//! ```
//!
//! Invariants: only messages stamped by this run count (probes and other traffic are ignored); a
//! message acknowledged but not delivered within the drain wait is reported as `undelivered`, never
//! dropped from the figures silently.

use std::sync::Arc;
use std::sync::Mutex;
use std::sync::atomic::AtomicU64;
use std::sync::atomic::Ordering;
use std::time::Duration;
use std::time::SystemTime;
use std::time::UNIX_EPOCH;

use anyhow::Result;
use anyhow::bail;
use bytes::BufMut;
use bytes::Bytes;
use bytes::BytesMut;
use clap::Args;
use hdrhistogram::Histogram;
use raftmq_client::Producer;
use raftmq_client::PushConsumer;
use raftmq_client::consumer::ConsumeConcurrentlyContext;
use raftmq_client::consumer::ConsumeConcurrentlyStatus;
use raftmq_client::consumer::ConsumeFrom;
use raftmq_common::limits::BENCH_CONCURRENCY_MAX_COUNT;
use raftmq_common::limits::MESSAGE_BODY_SIZE_MAX_BYTES;
use raftmq_common::message::Message;
use raftmq_common::message::MessageExt;
use serde_json::json;
use tokio::time::Instant;

use crate::bench_run::Pacer;
use crate::bench_run::RT_MAX_US;
use crate::bench_run::StopWhen;
use crate::bench_run::histogram;
use crate::bench_run::lock;
use crate::bench_run::ms_of_us;
use crate::bench_run::us_of;
use crate::namesrv_addr::NamesrvAddrArgs;

/// First 8 bytes of a measured body ("raftmqE2"); then the run's id and the send time.
const STAMP_MAGIC: u64 = u64::from_be_bytes(*b"raftmqE2");
/// First 8 bytes of a probe: delivered only to learn that the consumer reads.
const PROBE_MAGIC: u64 = u64::from_be_bytes(*b"raftmqPr");
/// Magic, run id and send time.
const STAMP_BYTES: u64 = 24;
/// How long the consumer may take to read its first probe.
const PROBE_WAIT: Duration = Duration::from_secs(60);
/// Between two probes.
const PROBE_INTERVAL: Duration = Duration::from_millis(200);
/// How long acknowledged messages may take to arrive after the last send.
const DRAIN_WAIT: Duration = Duration::from_secs(15);

/// `raftmq bench e2e` flags.
#[derive(Debug, Args)]
pub struct E2eArgs {
    #[command(flatten)]
    namesrv: NamesrvAddrArgs,
    /// Topic (sent to and consumed).
    #[arg(short = 't', long = "topic")]
    topic: String,
    /// Messages per second sent in all.
    #[arg(long = "rate", value_parser = clap::value_parser!(u64).range(1..))]
    rate: u64,
    /// How long to send, e.g. `20s`.
    #[arg(long = "duration", default_value = "20s", value_parser = humantime::parse_duration)]
    duration: Duration,
    /// Body size in bytes (at least the 24-byte stamp).
    #[arg(short = 's', long = "size", default_value_t = 1024,
          value_parser = clap::value_parser!(u64).range(STAMP_BYTES..=MESSAGE_BODY_SIZE_MAX_BYTES as u64))]
    size: u64,
    /// Synchronous senders: enough to carry the rate at the send latency (rate × latency).
    #[arg(short = 'w', long = "concurrency", default_value_t = 256,
          value_parser = clap::value_parser!(u64).range(1..=BENCH_CONCURRENCY_MAX_COUNT as u64))]
    concurrency: u64,
    /// Consumer group (a new one starts at the queues' ends).
    #[arg(short = 'g', long = "group", default_value = "benchmark_e2e")]
    group: String,
    /// Print one JSON summary object on stdout.
    #[arg(long)]
    json: bool,
}

fn now_us() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| u64::try_from(d.as_micros()).unwrap_or(u64::MAX))
}

fn body(magic: u64, run: u64, size: u64) -> Bytes {
    let mut b = BytesMut::with_capacity(usize::try_from(size).unwrap_or(0));
    b.put_u64(magic);
    b.put_u64(run);
    b.put_u64(now_us());
    b.resize(usize::try_from(size).unwrap_or(0), b'e');
    b.freeze()
}

/// `(magic, run, stamp)` of a body written by [`body`].
fn read_stamp(body: &[u8]) -> Option<(u64, u64, u64)> {
    let word = |at: usize| body.get(at..at + 8).and_then(|w| w.try_into().ok()).map(u64::from_be_bytes);
    Some((word(0)?, word(8)?, word(16)?))
}

#[derive(Default)]
struct Delivered {
    probes: AtomicU64,
    measured: AtomicU64,
}

struct SendSide {
    ok: AtomicU64,
    failed: AtomicU64,
    rt: Mutex<Histogram<u64>>,
}

pub async fn run(a: E2eArgs) -> Result<()> {
    // Unique enough per run: the process id and the start time.
    let run = (u64::from(std::process::id()) << 40) ^ now_us();
    let delivered = Arc::new(Delivered::default());
    let e2e = Arc::new(Mutex::new(histogram()));
    let listener = {
        let (delivered, e2e) = (Arc::clone(&delivered), Arc::clone(&e2e));
        move |msgs: &[MessageExt], _: &mut ConsumeConcurrentlyContext| {
            let now = now_us();
            for m in msgs {
                match read_stamp(&m.message.body) {
                    Some((STAMP_MAGIC, r, sent)) if r == run => {
                        let _ = lock(&e2e).record(now.saturating_sub(sent).clamp(1, RT_MAX_US));
                        delivered.measured.fetch_add(1, Ordering::AcqRel);
                    }
                    Some((PROBE_MAGIC, r, _)) if r == run => {
                        delivered.probes.fetch_add(1, Ordering::AcqRel);
                    }
                    _ => {}
                }
            }
            ConsumeConcurrentlyStatus::ConsumeSuccess
        }
    };
    let consumer = PushConsumer::builder(a.group.as_str())
        .namesrv_addr(&a.namesrv.namesrv_addr)
        .subscribe(a.topic.as_str(), "*")
        .consume_from(ConsumeFrom::LastOffset)
        .rpc_timeout(a.namesrv.timeout)
        .credentials(a.namesrv.credentials()?)
        .tls(a.namesrv.tls())
        .listener_concurrently(listener)
        .build()?;
    let producer = Producer::builder("benchmark_e2e_producer")
        .namesrv_addr(&a.namesrv.namesrv_addr)
        .send_timeout(a.namesrv.timeout)
        .credentials(a.namesrv.credentials()?)
        .tls(a.namesrv.tls())
        .build()?;
    consumer.start().await?;
    producer.start().await?;
    let outcome = measure(&a, run, &producer, &delivered, &e2e).await;
    producer.shutdown().await;
    consumer.shutdown().await;
    outcome
}

async fn measure(
    a: &E2eArgs,
    run: u64,
    producer: &Producer,
    delivered: &Arc<Delivered>,
    e2e: &Arc<Mutex<Histogram<u64>>>,
) -> Result<()> {
    // A new group starts at the queues' ends once it owns them: until a probe comes back, measured
    // messages could land before the consumer's starting offsets and never be read.
    let probing = Instant::now();
    while delivered.probes.load(Ordering::Acquire) == 0 {
        if probing.elapsed() > PROBE_WAIT {
            bail!("the consumer read no probe within {PROBE_WAIT:?}: is the topic readable?");
        }
        if let Err(e) = producer.send(Message::new(a.topic.as_str(), body(PROBE_MAGIC, run, STAMP_BYTES))).await {
            tracing::debug!(error = %e, "probe send failed");
        }
        tokio::time::sleep(PROBE_INTERVAL).await;
    }
    let side = Arc::new(SendSide { ok: AtomicU64::new(0), failed: AtomicU64::new(0), rt: Mutex::new(histogram()) });
    let pacer = Arc::new(Pacer::new(a.rate));
    let stop = StopWhen::new();
    stop.arm(Some(a.duration));
    let started = Instant::now();
    let workers: Vec<_> = (0..a.concurrency)
        .map(|_| {
            let (producer, side, pacer, stop) =
                (producer.clone(), Arc::clone(&side), Arc::clone(&pacer), Arc::clone(&stop));
            let (topic, size) = (a.topic.clone(), a.size);
            tokio::spawn(async move {
                while !stop.is_stopped() {
                    pacer.wait(1).await;
                    if stop.is_stopped() {
                        break;
                    }
                    let began = Instant::now();
                    match producer.send(Message::new(topic.as_str(), body(STAMP_MAGIC, run, size))).await {
                        Ok(_) => {
                            side.ok.fetch_add(1, Ordering::AcqRel);
                            let _ = lock(&side.rt).record(us_of(began.elapsed()).clamp(1, RT_MAX_US));
                        }
                        Err(_) => {
                            side.failed.fetch_add(1, Ordering::AcqRel);
                        }
                    }
                }
            })
        })
        .collect();
    for w in workers {
        if let Err(e) = w.await {
            tracing::warn!("a sender failed: {e}");
        }
    }
    let sending = started.elapsed();
    let sent = side.ok.load(Ordering::Acquire);
    // Deliveries of acknowledged messages may trail the last answer; wait for them, bounded.
    let drain = Instant::now();
    while delivered.measured.load(Ordering::Acquire) < sent && drain.elapsed() < DRAIN_WAIT {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let got = delivered.measured.load(Ordering::Acquire);
    let failed = side.failed.load(Ordering::Acquire);
    let tps = sent as f64 / sending.as_secs_f64().max(1e-9);
    let (rt, e2e) = (lock(&side.rt), lock(e2e));
    let q = |h: &Histogram<u64>, q: f64| if h.is_empty() { 0.0 } else { ms_of_us(h.value_at_quantile(q)) };
    let undelivered = sent.saturating_sub(got);
    if a.json {
        println!(
            "{}",
            json!({
                "kind": "e2e", "topic": a.topic, "rate": a.rate, "size": a.size, "concurrency": a.concurrency,
                "elapsed_s": sending.as_secs_f64(), "sent": sent, "failed": failed, "tps": tps,
                "send_p50_ms": q(&rt, 0.50), "send_p99_ms": q(&rt, 0.99),
                "delivered": got, "undelivered": undelivered,
                "e2e_p50_ms": q(&e2e, 0.50), "e2e_p99_ms": q(&e2e, 0.99), "e2e_p999_ms": q(&e2e, 0.999),
                "e2e_max_ms": if e2e.is_empty() { 0.0 } else { ms_of_us(e2e.max()) },
            })
        );
    } else {
        println!(
            "[Complete] Rate: {} | Send TPS: {} | Send Failed: {failed} | Send P50/P99 RT(ms): {:.3} / {:.3} | Delivered: {got} | Undelivered: {undelivered} | E2E P50/P99/P999 (ms): {:.3} / {:.3} / {:.3} | E2E Max(ms): {:.3}",
            a.rate,
            tps.round() as u64,
            q(&rt, 0.50),
            q(&rt, 0.99),
            q(&e2e, 0.50),
            q(&e2e, 0.99),
            q(&e2e, 0.999),
            if e2e.is_empty() { 0.0 } else { ms_of_us(e2e.max()) },
        );
    }
    if undelivered > 0 {
        bail!("{undelivered} acknowledged messages were not delivered within {DRAIN_WAIT:?} of the last send");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stamped_body_reads_back_its_magic_and_time() {
        let before = now_us();
        let b = body(STAMP_MAGIC, 42, 64);
        assert_eq!(b.len(), 64);
        let (magic, run, stamp) = read_stamp(&b).unwrap();
        assert_eq!((magic, run), (STAMP_MAGIC, 42));
        assert!(stamp >= before && stamp <= now_us());
        assert_eq!(read_stamp(&b[..23]), None, "a body shorter than the stamp is not measured");
    }
}
