//! `nats-bench`: publishes to a JetStream stream the way `raftmq bench produce --mode sync` sends
//! to a raftmq group, so deploy/bench-vs-nats.sh compares the two in one run with one load shape:
//! `--concurrency` senders share one connection, each with one publish in flight (publish, wait
//! for the stream's ack, publish again), bodies of `--size` bytes, for `--duration` seconds.
//!
//! The stream is created fresh (file storage, `--replicas` copies) before the run. With `--json`
//! the run ends with one JSON object in `raftmq bench produce --json`'s field names (`tps`,
//! `p50_ms`, `p99_ms`, `sent`, `failed`), which deploy/dev-up.sh's `produce_report` reads.
//!
//! Latency is from the publish call to its ack, in microseconds (hdrhistogram), as in raftmq's
//! bench; a publish that fails or is not acknowledged counts as failed and not in the histogram.

use std::sync::Arc;
use std::sync::Mutex;
use std::sync::atomic::AtomicBool;
use std::sync::atomic::AtomicU64;
use std::sync::atomic::Ordering;
use std::time::Duration;
use std::time::Instant;

use anyhow::Context;
use anyhow::Result;
use async_nats::jetstream;
use async_nats::jetstream::stream::StorageType;
use bytes::Bytes;
use clap::Parser;
use hdrhistogram::Histogram;

/// The highest latency the histogram holds, in microseconds (60 s); longer ones are clamped.
const LATENCY_MAX_US: u64 = 60_000_000;
/// How long a freshly started cluster gets to accept the stream.
const STREAM_CREATE_WAIT: Duration = Duration::from_secs(30);

#[derive(Debug, Parser)]
struct Args {
    /// The NATS server to connect to.
    #[arg(long, default_value = "nats://127.0.0.1:4222")]
    url: String,
    /// The stream, created fresh for the run.
    #[arg(long, default_value = "BENCH")]
    stream: String,
    /// The subject published to (the stream's only subject).
    #[arg(long, default_value = "bench")]
    subject: String,
    /// Copies of the stream (JetStream's `num_replicas`).
    #[arg(long, default_value_t = 3)]
    replicas: usize,
    /// Body size in bytes.
    #[arg(long, default_value_t = 1024)]
    size: usize,
    /// Senders, each with one publish in flight.
    #[arg(long, default_value_t = 256)]
    concurrency: usize,
    /// Seconds to publish for.
    #[arg(long, default_value_t = 15)]
    duration: u64,
    /// One JSON object at the end instead of a text line.
    #[arg(long)]
    json: bool,
    /// Only (re)create the stream, then exit: a benchmark script then measures the publishes alone.
    #[arg(long, conflicts_with = "existing_stream")]
    create_only: bool,
    /// Publish to the stream as it is, without recreating it.
    #[arg(long)]
    existing_stream: bool,
}

#[tokio::main]
async fn main() -> Result<()> {
    let args = Args::parse();
    let client = async_nats::connect(&args.url).await.with_context(|| format!("connecting to {}", args.url))?;
    let js = jetstream::new(client);
    if !args.existing_stream {
        create_stream(&js, &args).await?;
    }
    if args.create_only {
        return Ok(());
    }

    let body = Bytes::from(vec![b'x'; args.size]);
    let sent = Arc::new(AtomicU64::new(0));
    let failed = Arc::new(AtomicU64::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    let histogram = Arc::new(Mutex::new(Histogram::<u64>::new_with_bounds(1, LATENCY_MAX_US, 3)?));
    let start = Instant::now();
    let mut senders = Vec::with_capacity(args.concurrency);
    for _ in 0..args.concurrency {
        let (js, subject, body) = (js.clone(), args.subject.clone(), body.clone());
        let (sent, failed, stop, histogram) = (sent.clone(), failed.clone(), stop.clone(), histogram.clone());
        senders.push(tokio::spawn(async move {
            // Each sender keeps its own histogram and merges it once, so the senders share no lock
            // per publish.
            let mut mine = Histogram::<u64>::new_with_bounds(1, LATENCY_MAX_US, 3).expect("valid bounds");
            while !stop.load(Ordering::Relaxed) {
                let t0 = Instant::now();
                let acked = match js.publish(subject.clone(), body.clone()).await {
                    Ok(ack) => ack.await.is_ok(),
                    Err(_) => false,
                };
                if acked {
                    let us = (t0.elapsed().as_micros() as u64).clamp(1, LATENCY_MAX_US);
                    mine.record(us).expect("clamped into the bounds");
                    sent.fetch_add(1, Ordering::Relaxed);
                } else {
                    failed.fetch_add(1, Ordering::Relaxed);
                }
            }
            histogram.lock().expect("no sender panics holding it").add(&mine).expect("same bounds");
        }));
    }
    tokio::time::sleep(Duration::from_secs(args.duration)).await;
    stop.store(true, Ordering::Relaxed);
    for s in senders {
        s.await.context("a sender task failed")?;
    }
    let wall = start.elapsed().as_secs_f64();
    let h = histogram.lock().expect("no sender panics holding it");
    let (sent, failed) = (sent.load(Ordering::Relaxed), failed.load(Ordering::Relaxed));
    let ms = |q: f64| h.value_at_quantile(q) as f64 / 1000.0;
    let tps = sent as f64 / wall;
    if args.json {
        println!(
            "{}",
            serde_json::json!({
                "tps": tps, "sent": sent, "failed": failed, "p50_ms": ms(0.5), "p99_ms": ms(0.99),
                "p999_ms": ms(0.999), "wall_s": wall,
            })
        );
    } else {
        println!(
            "sent={sent} failed={failed} msg/s={tps:.0} p50={:.2}ms p99={:.2}ms p999={:.2}ms",
            ms(0.5),
            ms(0.99),
            ms(0.999)
        );
    }
    Ok(())
}

/// Deletes the stream if an earlier run left it, and creates it empty.
async fn create_stream(js: &jetstream::Context, args: &Args) -> Result<()> {
    // A stream left by an earlier run would hold its messages; the run starts from an empty one.
    let _ = js.delete_stream(&args.stream).await;
    let config = jetstream::stream::Config {
        name: args.stream.clone(),
        subjects: vec![args.subject.clone()],
        storage: StorageType::File,
        num_replicas: args.replicas,
        ..Default::default()
    };
    // A cluster that just started may have no JetStream meta leader yet, and refuses until it has.
    let deadline = Instant::now() + STREAM_CREATE_WAIT;
    loop {
        match js.create_stream(config.clone()).await {
            Ok(_) => break,
            Err(e) if Instant::now() < deadline => {
                eprintln!("stream not created yet ({e}); retrying");
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
            Err(e) => {
                return Err(e)
                    .with_context(|| format!("creating stream {} with {} replicas", args.stream, args.replicas));
            }
        }
    }
    Ok(())
}
