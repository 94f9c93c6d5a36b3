//! `raftmq bench produce|consume`: RocketMQ's `benchmark/Producer.java` and `Consumer.java`
//! (`bench e2e`, send-to-delivery latency at a fixed rate: `bench_e2e.rs`; `bench grpc-send`, the
//! produce run over gRPC SendMessage, its sender in `bench_grpc.rs`; `bench pop`, POP consumption:
//! `bench_pop.rs`).
//!
//! Every interval (1 s by default) one line in RocketMQ's format; at the end a `[Complete]` line
//! with P50/P99/P999 (hdrhistogram, microsecond resolution) appended; `--json` replaces the final
//! line with one JSON object and sends the interval lines to stderr, so stdout stays parseable.
//! A progress bar (indicatif) is drawn only when stdout is a terminal and `--json` is off.
//!
//! ```text
//!  produce: N workers ──claim a message index──► send / send_batch / oneway ──► Counters + Histogram
//!           (grpc-send: the same workers, each send one SendMessage call)
//!           (async: one driver, a window of N in-flight send_async futures)
//!  consume: PushConsumer listener ──B2C = now - born, S2C = now - store──► Counters + Histogram
//!  reporter: every interval, the counters' deltas ──► one line
//! ```
//!
//! Failover shows in the produce figures: the longest gap without a successful send (between two
//! successes, or from the last one to the end of the run) and the failed sends; and in the consume
//! figures: the longest gap between two deliveries (a run outlives its producer, so the time after
//! the last delivery is not counted).
//!
//! Invariants: with `--count N` exactly N messages are attempted (claims are atomic); the run stops
//! at the count, the duration or the first SIGINT/SIGTERM, whichever comes first.

use std::sync::Arc;
use std::sync::Mutex;
use std::sync::atomic::AtomicU64;
use std::sync::atomic::Ordering;
use std::time::Duration;

use anyhow::Result;
use anyhow::bail;
use bytes::Bytes;
use clap::Args;
use clap::Subcommand;
use clap::ValueEnum;
use hdrhistogram::Histogram;
use raftmq_client::Producer;
use raftmq_client::PushConsumer;
use raftmq_client::consumer::ConsumeConcurrentlyContext;
use raftmq_client::consumer::ConsumeConcurrentlyStatus;
use raftmq_client::consumer::ConsumeFrom;
use raftmq_common::limits::BENCH_BATCH_MAX_COUNT;
use raftmq_common::limits::BENCH_CONCURRENCY_MAX_COUNT;
use raftmq_common::limits::MESSAGE_BODY_SIZE_MAX_BYTES;
use raftmq_common::message::Message;
use raftmq_common::message::MessageExt;
use raftmq_common::protocol::SerializeType;
use serde_json::json;
use tokio::sync::Semaphore;
use tokio::time::Instant;

use crate::bench_grpc::GrpcSender;
use crate::bench_run::Outcome;
use crate::bench_run::Pacer;
use crate::bench_run::RT_MAX_US;
use crate::bench_run::Reporter;
use crate::bench_run::StopWhen;
use crate::bench_run::futures_join;
use crate::bench_run::histogram;
use crate::bench_run::lock;
use crate::bench_run::ms_of_us;
use crate::bench_run::us_of;
use crate::namesrv_addr::NamesrvAddrArgs;
use crate::namesrv_addr::human_time_ms;
use crate::namesrv_addr::now_ms;

/// `raftmq bench` flags.
#[derive(Debug, Args)]
pub struct BenchArgs {
    #[command(subcommand)]
    kind: BenchKind,
}

#[derive(Debug, Subcommand)]
enum BenchKind {
    /// Send as fast as possible and report TPS and RT (`benchmark/Producer.java`).
    Produce(ProduceArgs),
    /// Consume and report TPS and born/store-to-consume latency (`benchmark/Consumer.java`).
    Consume(ConsumeBenchArgs),
    /// Send at a fixed rate while a push consumer reads the same topic; report send-to-delivery latency.
    E2e(crate::bench_e2e::E2eArgs),
    /// `produce` over RocketMQ 5's gRPC SendMessage, against gRPC endpoints.
    GrpcSend(GrpcSendArgs),
    /// Consume with POP_MESSAGE and ACK_MESSAGE (RocketMQ 5's POP over remoting); report TPS and pop RT.
    Pop(crate::bench_pop::PopArgs),
}

/// Flags both benchmarks share.
#[derive(Debug, Args)]
struct RunArgs {
    #[command(flatten)]
    namesrv: NamesrvAddrArgs,
    /// Topic.
    #[arg(short = 't', long = "topic")]
    topic: String,
    /// Stop after this many messages.
    #[arg(long = "count", value_parser = clap::value_parser!(u64).range(1..))]
    count: Option<u64>,
    /// Stop after this long, e.g. `30s`.
    #[arg(long = "duration", value_parser = humantime::parse_duration)]
    duration: Option<Duration>,
    /// Reporting interval (RocketMQ's `-ri`).
    #[arg(long = "interval", default_value = "1s", value_parser = humantime::parse_duration)]
    interval: Duration,
    /// Print one JSON summary object on stdout (interval lines go to stderr).
    #[arg(long)]
    json: bool,
}

/// How the producer benchmark sends.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum SendMode {
    /// `send`, N workers each waiting for its answer.
    Sync,
    /// `send_async`, up to N sends in flight.
    Async,
    /// `send_oneway`: no answer, RT is the time to hand the request to the connection.
    Oneway,
}

impl SendMode {
    fn name(self) -> &'static str {
        match self {
            SendMode::Sync => "sync",
            SendMode::Async => "async",
            SendMode::Oneway => "oneway",
        }
    }
}

#[derive(Debug, Args)]
struct ProduceArgs {
    #[command(flatten)]
    run: RunArgs,
    /// Body size in bytes (`-s`).
    #[arg(short = 's', long = "size", default_value_t = 128,
          value_parser = clap::value_parser!(u64).range(1..=MESSAGE_BODY_SIZE_MAX_BYTES as u64))]
    size: u64,
    /// Concurrent senders (`-w`), or sends in flight in async mode.
    #[arg(short = 'w', long = "concurrency", default_value_t = 64,
          value_parser = clap::value_parser!(u64).range(1..=BENCH_CONCURRENCY_MAX_COUNT as u64))]
    concurrency: u64,
    /// How to send.
    #[arg(long = "mode", value_enum, default_value_t = SendMode::Sync)]
    mode: SendMode,
    /// Messages per SEND_BATCH_MESSAGE (sync mode); 1 sends them one by one.
    #[arg(long = "batch", default_value_t = 1,
          value_parser = clap::value_parser!(u64).range(1..=BENCH_BATCH_MAX_COUNT as u64))]
    batch: u64,
    /// Tag of every message.
    #[arg(long = "tag")]
    tag: Option<String>,
    /// Give every message a key (its index), as `-k` does; the broker then indexes it.
    #[arg(short = 'k', long = "keys")]
    keys: bool,
    /// Producer group.
    #[arg(short = 'p', long = "producerGroup", default_value = "benchmark_producer")]
    producer_group: String,
    /// Header encoding of the sends: the SDK's binary default, or JSON as Java clients send it.
    #[arg(long = "serialize", value_enum, default_value_t = HeaderEncoding::Rocketmq)]
    serialize: HeaderEncoding,
    /// Send at most this many messages per second in all (default: as fast as the senders go).
    #[arg(long = "rate", value_parser = clap::value_parser!(u64).range(1..))]
    rate: Option<u64>,
}

/// `rocketmq.serialize.type`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum HeaderEncoding {
    /// `RocketMQSerializable`: binary.
    Rocketmq,
    /// fastjson, Java clients' default.
    Json,
}

impl HeaderEncoding {
    fn serialize_type(self) -> SerializeType {
        match self {
            HeaderEncoding::Rocketmq => SerializeType::RocketMq,
            HeaderEncoding::Json => SerializeType::Json,
        }
    }

    fn name(self) -> &'static str {
        match self {
            HeaderEncoding::Rocketmq => "ROCKETMQ",
            HeaderEncoding::Json => "JSON",
        }
    }
}

#[derive(Debug, Args)]
struct ConsumeBenchArgs {
    #[command(flatten)]
    run: RunArgs,
    /// Consumer group.
    #[arg(short = 'g', long = "group", default_value = "benchmark_consumer")]
    group: String,
    /// Tag expression.
    #[arg(long = "expr", default_value = "*")]
    expr: String,
    /// A group without committed offsets starts at each queue's first message (default: its end).
    #[arg(long = "from-first")]
    from_first: bool,
    /// Messages per listener call (the consumer's `consumeMessageBatchMaxSize`, 1..=1024).
    #[arg(long = "consume-batch", default_value_t = 1)]
    consume_batch: usize,
}

/// `raftmq bench grpc-send` flags: `bench produce`'s, with gRPC endpoints instead of NameServers.
#[derive(Debug, Args)]
struct GrpcSendArgs {
    /// gRPC endpoints, `host:port;host:port` (RocketMQ 5's `endpoints`); `,` separates too.
    #[arg(long = "endpoints", value_name = "ADDRS")]
    endpoints: String,
    /// Topic.
    #[arg(short = 't', long = "topic")]
    topic: String,
    /// Stop after this many messages.
    #[arg(long = "count", value_parser = clap::value_parser!(u64).range(1..))]
    count: Option<u64>,
    /// Stop after this long, e.g. `30s`.
    #[arg(long = "duration", value_parser = humantime::parse_duration)]
    duration: Option<Duration>,
    /// Reporting interval.
    #[arg(long = "interval", default_value = "1s", value_parser = humantime::parse_duration)]
    interval: Duration,
    /// Print one JSON summary object on stdout (interval lines go to stderr).
    #[arg(long)]
    json: bool,
    /// Deadline of each call (and of connecting), e.g. `3s`.
    #[arg(long = "timeout", default_value = "3s", value_parser = humantime::parse_duration)]
    timeout: Duration,
    /// Body size in bytes.
    #[arg(short = 's', long = "size", default_value_t = 1024,
          value_parser = clap::value_parser!(u64).range(1..=MESSAGE_BODY_SIZE_MAX_BYTES as u64))]
    size: u64,
    /// Calls in flight (workers, each waiting for its answer).
    #[arg(short = 'w', long = "concurrency", default_value_t = 64,
          value_parser = clap::value_parser!(u64).range(1..=BENCH_CONCURRENCY_MAX_COUNT as u64))]
    concurrency: u64,
    /// Tag of every message.
    #[arg(long = "tag")]
    tag: Option<String>,
    /// Give every message a key (its index).
    #[arg(short = 'k', long = "keys")]
    keys: bool,
    /// Send at most this many messages per second in all (default: as fast as the workers go).
    #[arg(long = "rate", value_parser = clap::value_parser!(u64).range(1..))]
    rate: Option<u64>,
}

/// Runs the chosen benchmark.
pub async fn run(args: BenchArgs) -> Result<()> {
    match args.kind {
        BenchKind::Produce(a) => produce(a).await,
        BenchKind::Consume(a) => consume(a).await,
        BenchKind::E2e(a) => crate::bench_e2e::run(a).await,
        BenchKind::GrpcSend(a) => grpc_send(a).await,
        BenchKind::Pop(a) => crate::bench_pop::run(a).await,
    }
}

// ---- produce ----

#[derive(Default)]
struct SendCounters {
    ok: AtomicU64,
    send_failed: AtomicU64,
    response_failed: AtomicU64,
    rt_total_us: AtomicU64,
    rt_max_us: AtomicU64,
    claimed: AtomicU64,
}

/// The longest time without a success (a send, a delivery), fed with each success's time (µs since
/// the run began): between two successes, or from the last one to the end (an outage the run ends in).
/// Stored +1, so 0 means "no success yet"; concurrent successes keep the latest (`fetch_max`).
#[derive(Default)]
struct SuccessGaps {
    last_ok_us: AtomicU64,
    max_gap_us: AtomicU64,
}

impl SuccessGaps {
    fn success_at(&self, at_us: u64) {
        let at = at_us.saturating_add(1);
        let previous = self.last_ok_us.fetch_max(at, Ordering::AcqRel);
        if previous != 0 && at > previous {
            self.max_gap_us.fetch_max(at - previous, Ordering::AcqRel);
        }
    }

    /// The longest gap of a run that ended at `end_us`; 0 without any success.
    fn max_gap_us(&self, end_us: u64) -> u64 {
        let last = self.last_ok_us.load(Ordering::Acquire);
        let trailing = if last == 0 { 0 } else { end_us.saturating_add(1).saturating_sub(last) };
        self.max_gap_us.load(Ordering::Acquire).max(trailing)
    }

    /// The longest gap between two successes; 0 with fewer than two.
    fn max_gap_between_us(&self) -> u64 {
        self.max_gap_us.load(Ordering::Acquire)
    }
}

/// What a produce run sends through.
enum Sender {
    /// The SDK's producer over remoting.
    Remoting(Producer),
    /// SendMessage calls over gRPC.
    Grpc(GrpcSender),
}

/// What a produce run reports about itself (the JSON summary's settings).
struct ProduceShape {
    /// `produce` or `grpc-send`.
    kind: &'static str,
    mode: &'static str,
    serialize: &'static str,
    topic: String,
    size: u64,
    concurrency: u64,
    batch: u64,
    rate: Option<u64>,
    count: Option<u64>,
    duration: Option<Duration>,
    interval: Duration,
    json: bool,
    /// Each call's deadline: sends in flight at the stop get this long (and a second) to end.
    timeout: Duration,
}

struct ProduceCtx {
    sender: Sender,
    /// When the run began: success times are measured from it.
    started: Instant,
    gaps: SuccessGaps,
    topic: String,
    body: Bytes,
    tag: Option<String>,
    keys: bool,
    count: Option<u64>,
    counters: SendCounters,
    rt: Mutex<Histogram<u64>>,
    stop: Arc<StopWhen>,
    /// `--rate`.
    pacer: Option<Pacer>,
}

impl ProduceCtx {
    /// The next `want` message indexes to send, fewer at the end of `--count`, none once stopped.
    fn claim(&self, want: u64) -> Option<std::ops::Range<u64>> {
        if self.stop.is_stopped() {
            return None;
        }
        let start = self.counters.claimed.fetch_add(want, Ordering::AcqRel);
        let end = match self.count {
            Some(count) if start >= count => return None,
            Some(count) => (start + want).min(count),
            None => start + want,
        };
        Some(start..end)
    }

    fn message(&self, index: u64) -> Message {
        let mut msg = Message::new(self.topic.as_str(), self.body.clone());
        if let Some(tag) = &self.tag {
            msg.set_tags(tag.as_str());
        }
        if self.keys {
            msg.set_keys(index.to_string());
        }
        msg
    }

    /// Records one call covering `n` messages.
    fn record(&self, n: u64, rt: Duration, outcome: Outcome) {
        let c = &self.counters;
        match outcome {
            Outcome::Ok => {
                let us = us_of(rt);
                c.ok.fetch_add(n, Ordering::Relaxed);
                c.rt_total_us.fetch_add(us * n, Ordering::Relaxed);
                c.rt_max_us.fetch_max(us, Ordering::Relaxed);
                self.gaps.success_at(us_of(self.started.elapsed()));
                // Clamped to the histogram's range above, so recording cannot fail.
                let _ = lock(&self.rt).record_n(us, n);
            }
            Outcome::ResponseFailed => {
                c.response_failed.fetch_add(n, Ordering::Relaxed);
            }
            Outcome::SendFailed => {
                c.send_failed.fetch_add(n, Ordering::Relaxed);
            }
        }
    }
}

async fn produce(a: ProduceArgs) -> Result<()> {
    if a.batch > 1 && a.mode != SendMode::Sync {
        bail!("--batch needs --mode sync");
    }
    let producer = Producer::builder(a.producer_group.as_str())
        .namesrv_addr(&a.run.namesrv.namesrv_addr)
        .send_timeout(a.run.namesrv.timeout)
        .serialize_type(a.serialize.serialize_type())
        .credentials(a.run.namesrv.credentials()?)
        .tls(a.run.namesrv.tls())
        .build()?;
    producer.start().await?;
    let shape = ProduceShape {
        kind: "produce",
        mode: a.mode.name(),
        serialize: a.serialize.name(),
        topic: a.run.topic.clone(),
        size: a.size,
        concurrency: a.concurrency,
        batch: a.batch,
        rate: a.rate,
        count: a.run.count,
        duration: a.run.duration,
        interval: a.run.interval,
        json: a.run.json,
        timeout: a.run.namesrv.timeout,
    };
    run_produce(Sender::Remoting(producer), &shape, a.tag.clone(), a.keys, a.mode).await
}

/// Runs `raftmq bench grpc-send`.
async fn grpc_send(a: GrpcSendArgs) -> Result<()> {
    let sender = GrpcSender::connect(&a.endpoints, a.timeout).await?;
    let shape = ProduceShape {
        kind: "grpc-send",
        mode: SendMode::Sync.name(),
        serialize: "PROTOBUF",
        topic: a.topic.clone(),
        size: a.size,
        concurrency: a.concurrency,
        batch: 1,
        rate: a.rate,
        count: a.count,
        duration: a.duration,
        interval: a.interval,
        json: a.json,
        timeout: a.timeout,
    };
    run_produce(Sender::Grpc(sender), &shape, a.tag, a.keys, SendMode::Sync).await
}

/// Runs a produce benchmark through `sender`, then shuts it down and prints the summary.
async fn run_produce(
    sender: Sender,
    shape: &ProduceShape,
    tag: Option<String>,
    keys: bool,
    mode: SendMode,
) -> Result<()> {
    // Java's benchmark sends the same body every time; its content does not matter to the broker.
    let body: Bytes = (0..shape.size).map(|i| b'a' + (i % 26) as u8).collect::<Vec<u8>>().into();
    let stop = StopWhen::new();
    let started = Instant::now();
    let ctx = Arc::new(ProduceCtx {
        sender,
        started,
        gaps: SuccessGaps::default(),
        topic: shape.topic.clone(),
        body,
        tag,
        keys,
        count: shape.count,
        counters: SendCounters::default(),
        rt: Mutex::new(histogram()),
        stop: Arc::clone(&stop),
        pacer: shape.rate.map(Pacer::new),
    });
    stop.arm(shape.duration);
    let reporter = Reporter::new(shape.json, shape.count);
    let workers = spawn_senders(&ctx, mode, shape.concurrency, shape.batch);
    let report = report_produce(&ctx, &reporter, shape.interval);
    tokio::pin!(report);
    let all_done = futures_join(workers);
    tokio::pin!(all_done);
    let workers_done = tokio::select! {
        _ = &mut all_done => true,
        _ = &mut report => false,
    };
    stop.stop();
    // Sends in flight at the stop end on their own (each within the send timeout): closing the
    // producer under them would count them as failures of the run.
    if !workers_done && tokio::time::timeout(shape.timeout + Duration::from_secs(1), &mut all_done).await.is_err() {
        tracing::warn!("sends still in flight after the send timeout; closing the producer under them");
    }
    let elapsed = started.elapsed();
    reporter.finish();
    if let Sender::Remoting(producer) = &ctx.sender {
        producer.shutdown().await;
    }
    summarize_produce(&ctx, shape, elapsed)
}

fn spawn_senders(
    ctx: &Arc<ProduceCtx>,
    mode: SendMode,
    concurrency: u64,
    batch: u64,
) -> Vec<tokio::task::JoinHandle<()>> {
    match mode {
        SendMode::Async => vec![tokio::spawn(drive_async(Arc::clone(ctx), concurrency as usize))],
        mode => (0..concurrency).map(|_| tokio::spawn(send_loop(Arc::clone(ctx), mode, batch))).collect(),
    }
}

async fn send_loop(ctx: Arc<ProduceCtx>, mode: SendMode, batch: u64) {
    while let Some(range) = ctx.claim(batch) {
        let n = range.end - range.start;
        if let Some(pacer) = &ctx.pacer {
            pacer.wait(n).await;
        }
        let began = Instant::now();
        let outcome = match (&ctx.sender, mode, n) {
            (Sender::Grpc(grpc), _, _) => {
                grpc.send(&ctx.topic, &ctx.body, ctx.tag.as_deref(), ctx.keys, range.start).await
            }
            (Sender::Remoting(p), SendMode::Oneway, _) => {
                Outcome::of_client(&p.send_oneway(ctx.message(range.start)).await)
            }
            (Sender::Remoting(p), _, 1) => Outcome::of_client(&p.send(ctx.message(range.start)).await),
            (Sender::Remoting(p), _, _) => {
                Outcome::of_client(&p.send_batch(range.map(|i| ctx.message(i)).collect()).await)
            }
        };
        ctx.record(n, began.elapsed(), outcome);
    }
}

async fn drive_async(ctx: Arc<ProduceCtx>, window: usize) {
    let in_flight = Arc::new(Semaphore::new(window));
    // `--mode async` exists for the SDK's producer only (`bench grpc-send` runs sync workers).
    let Sender::Remoting(producer) = &ctx.sender else { return };
    while let Some(range) = ctx.claim(1) {
        let Ok(permit) = Arc::clone(&in_flight).acquire_owned().await else { break };
        if let Some(pacer) = &ctx.pacer {
            pacer.wait(1).await;
        }
        let began = Instant::now();
        let send = producer.send_async(ctx.message(range.start));
        let ctx = Arc::clone(&ctx);
        tokio::spawn(async move {
            let outcome = send.await;
            ctx.record(1, began.elapsed(), Outcome::of_client(&outcome));
            drop(permit);
        });
    }
    // Every permit back means every send answered.
    let _ = in_flight.acquire_many(u32::try_from(window).unwrap_or(u32::MAX)).await;
}

/// Prints a line every interval until stopped.
async fn report_produce(ctx: &ProduceCtx, reporter: &Reporter, interval: Duration) {
    let c = &ctx.counters;
    let mut ticker = tokio::time::interval_at(Instant::now() + interval, interval);
    let (mut last_ok, mut last_rt) = (0u64, 0u64);
    // `stop` may fire between the check and the wait: re-checked after every tick.
    while !ctx.stop.is_stopped() {
        tokio::select! {
            _ = ticker.tick() => {}
            _ = ctx.stop.stopped.notified() => return,
        }
        let ok = c.ok.load(Ordering::Relaxed);
        let rt = c.rt_total_us.load(Ordering::Relaxed);
        let (d_ok, d_rt) = (ok - last_ok, rt - last_rt);
        (last_ok, last_rt) = (ok, rt);
        let tps = d_ok as f64 / interval.as_secs_f64();
        let avg = if d_ok == 0 { 0.0 } else { ms_of_us(d_rt) / d_ok as f64 };
        reporter.line(&format!(
            "Current Time: {} | Send TPS: {} | Max RT(ms): {} | Average RT(ms): {avg:7.3} | Send Failed: {} | Response Failed: {}",
            human_time_ms(now_ms()),
            tps.round() as u64,
            c.rt_max_us.load(Ordering::Relaxed) / 1000,
            c.send_failed.load(Ordering::Relaxed),
            c.response_failed.load(Ordering::Relaxed),
        ));
        reporter.position(ok + c.send_failed.load(Ordering::Relaxed) + c.response_failed.load(Ordering::Relaxed));
    }
}

fn summarize_produce(ctx: &ProduceCtx, a: &ProduceShape, elapsed: Duration) -> Result<()> {
    let c = &ctx.counters;
    let ok = c.ok.load(Ordering::Relaxed);
    let (send_failed, response_failed) =
        (c.send_failed.load(Ordering::Relaxed), c.response_failed.load(Ordering::Relaxed));
    let failed = send_failed + response_failed;
    let secs = elapsed.as_secs_f64().max(1e-9);
    let tps = ok as f64 / secs;
    let hist = lock(&ctx.rt);
    let avg = if ok == 0 { 0.0 } else { ms_of_us(c.rt_total_us.load(Ordering::Relaxed)) / ok as f64 };
    let pct = |q: f64| if hist.is_empty() { 0.0 } else { ms_of_us(hist.value_at_quantile(q)) };
    let (p50, p99, p999) = (pct(0.50), pct(0.99), pct(0.999));
    let max_ms = ms_of_us(c.rt_max_us.load(Ordering::Relaxed));
    let max_gap_ms = ms_of_us(ctx.gaps.max_gap_us(us_of(elapsed)));
    if a.json {
        let summary = json!({
            "max_send_gap_ms": max_gap_ms, "failed_sends": failed,
            "kind": a.kind, "mode": a.mode, "serialize": a.serialize, "topic": a.topic, "size": a.size,
            "concurrency": a.concurrency, "batch": a.batch, "rate": a.rate, "elapsed_s": secs, "sent": ok, "failed": failed,
            "send_failed": send_failed, "response_failed": response_failed, "tps": tps, "avg_ms": avg,
            "p50_ms": p50, "p99_ms": p99, "p999_ms": p999, "max_ms": max_ms,
        });
        println!("{summary}");
    } else {
        println!(
            "[Complete] Send Total: {} | Send TPS: {} | Max RT(ms): {} | Average RT(ms): {avg:7.3} | Send Failed: {send_failed} | Response Failed: {response_failed} | P50 RT(ms): {p50:.3} | P99 RT(ms): {p99:.3} | P999 RT(ms): {p999:.3} | Max Send Gap(ms): {max_gap_ms:.3} | Failed Sends: {failed}",
            ok + failed,
            tps.round() as u64,
            max_ms.round() as u64,
        );
    }
    if ok == 0 && failed > 0 {
        bail!("no message was sent successfully ({failed} failed)");
    }
    Ok(())
}

// ---- consume ----

#[derive(Default)]
struct ConsumeCounters {
    received: AtomicU64,
    b2c_total_ms: AtomicU64,
    s2c_total_ms: AtomicU64,
    b2c_max_ms: AtomicU64,
    s2c_max_ms: AtomicU64,
}

async fn consume(a: ConsumeBenchArgs) -> Result<()> {
    let counters = Arc::new(ConsumeCounters::default());
    let b2c = Arc::new(Mutex::new(histogram()));
    let stop = StopWhen::new();
    let gaps = Arc::new(SuccessGaps::default());
    let started = Instant::now();
    let listener = {
        let (counters, b2c, stop, count) = (Arc::clone(&counters), Arc::clone(&b2c), Arc::clone(&stop), a.run.count);
        let gaps = Arc::clone(&gaps);
        move |msgs: &[MessageExt], _: &mut ConsumeConcurrentlyContext| {
            gaps.success_at(us_of(started.elapsed()));
            let now = now_ms();
            for m in msgs {
                // Clocks of producer, broker and consumer may disagree by a little: never negative.
                let born = u64::try_from(now.saturating_sub(m.born_timestamp)).unwrap_or(0);
                let stored = u64::try_from(now.saturating_sub(m.store_timestamp)).unwrap_or(0);
                counters.b2c_total_ms.fetch_add(born, Ordering::Relaxed);
                counters.s2c_total_ms.fetch_add(stored, Ordering::Relaxed);
                counters.b2c_max_ms.fetch_max(born, Ordering::Relaxed);
                counters.s2c_max_ms.fetch_max(stored, Ordering::Relaxed);
                let _ = lock(&b2c).record((born * 1000).clamp(1, RT_MAX_US));
            }
            let total = counters.received.fetch_add(msgs.len() as u64, Ordering::AcqRel) + msgs.len() as u64;
            if count.is_some_and(|c| total >= c) {
                stop.stop();
            }
            ConsumeConcurrentlyStatus::ConsumeSuccess
        }
    };
    let from = if a.from_first { ConsumeFrom::FirstOffset } else { ConsumeFrom::LastOffset };
    let consumer = PushConsumer::builder(a.group.as_str())
        .namesrv_addr(&a.run.namesrv.namesrv_addr)
        .subscribe(a.run.topic.as_str(), a.expr.as_str())
        .consume_from(from)
        .consume_message_batch_max_size(a.consume_batch)
        .rpc_timeout(a.run.namesrv.timeout)
        .credentials(a.run.namesrv.credentials()?)
        .tls(a.run.namesrv.tls())
        .listener_concurrently(listener)
        .build()?;
    stop.arm(a.run.duration);
    let reporter = Reporter::new(a.run.json, a.run.count);
    consumer.start().await?;
    report_consume(&counters, &consumer, &stop, &reporter, a.run.interval).await;
    let elapsed = started.elapsed();
    reporter.finish();
    consumer.shutdown().await;
    let failed = consumer.stats().consume_failed;
    let max_gap_ms = ms_of_us(gaps.max_gap_between_us());
    summarize_consume(&counters, &lock(&b2c), failed, max_gap_ms, &a, elapsed)
}

async fn report_consume(
    c: &ConsumeCounters,
    consumer: &PushConsumer,
    stop: &StopWhen,
    reporter: &Reporter,
    interval: Duration,
) {
    let mut ticker = tokio::time::interval_at(Instant::now() + interval, interval);
    let (mut last_n, mut last_b2c, mut last_s2c) = (0u64, 0u64, 0u64);
    // `stop` may fire between the check and the wait: re-checked after every tick.
    while !stop.is_stopped() {
        tokio::select! {
            _ = ticker.tick() => {}
            _ = stop.stopped.notified() => break,
        }
        let n = c.received.load(Ordering::Relaxed);
        let (b2c, s2c) = (c.b2c_total_ms.load(Ordering::Relaxed), c.s2c_total_ms.load(Ordering::Relaxed));
        let d_n = n - last_n;
        let avg = |total: u64, last: u64| if d_n == 0 { 0.0 } else { (total - last) as f64 / d_n as f64 };
        reporter.line(&format!(
            "Current Time: {} | Consume TPS: {} | AVG(B2C) RT(ms): {:7.3} | AVG(S2C) RT(ms): {:7.3} | MAX(B2C) RT(ms): {} | MAX(S2C) RT(ms): {} | Consume Fail: {}",
            human_time_ms(now_ms()),
            (d_n as f64 / interval.as_secs_f64()).round() as u64,
            avg(b2c, last_b2c),
            avg(s2c, last_s2c),
            c.b2c_max_ms.load(Ordering::Relaxed),
            c.s2c_max_ms.load(Ordering::Relaxed),
            consumer.stats().consume_failed,
        ));
        (last_n, last_b2c, last_s2c) = (n, b2c, s2c);
        reporter.position(n);
    }
}

fn summarize_consume(
    c: &ConsumeCounters,
    b2c: &Histogram<u64>,
    failed: u64,
    max_gap_ms: f64,
    a: &ConsumeBenchArgs,
    elapsed: Duration,
) -> Result<()> {
    let n = c.received.load(Ordering::Relaxed);
    let secs = elapsed.as_secs_f64().max(1e-9);
    let tps = n as f64 / secs;
    let avg = |total: &AtomicU64| if n == 0 { 0.0 } else { total.load(Ordering::Relaxed) as f64 / n as f64 };
    let (avg_b2c, avg_s2c) = (avg(&c.b2c_total_ms), avg(&c.s2c_total_ms));
    let (max_b2c, max_s2c) = (c.b2c_max_ms.load(Ordering::Relaxed), c.s2c_max_ms.load(Ordering::Relaxed));
    let pct = |q: f64| if b2c.is_empty() { 0.0 } else { ms_of_us(b2c.value_at_quantile(q)) };
    let (p50, p99, p999) = (pct(0.50), pct(0.99), pct(0.999));
    if a.run.json {
        let summary = json!({
            "kind": "consume", "topic": a.run.topic, "group": a.group, "consume_batch": a.consume_batch, "elapsed_s": secs, "received": n,
            "failed": failed, "tps": tps, "avg_b2c_ms": avg_b2c, "avg_s2c_ms": avg_s2c, "max_b2c_ms": max_b2c,
            "max_s2c_ms": max_s2c, "p50_ms": p50, "p99_ms": p99, "p999_ms": p999, "max_ms": max_b2c,
            "max_delivery_gap_ms": max_gap_ms,
        });
        println!("{summary}");
    } else {
        println!(
            "[Complete] Consume Total: {n} | Consume TPS: {} | AVG(B2C) RT(ms): {avg_b2c:7.3} | AVG(S2C) RT(ms): {avg_s2c:7.3} | MAX(B2C) RT(ms): {max_b2c} | MAX(S2C) RT(ms): {max_s2c} | Consume Fail: {failed} | P50 RT(ms): {p50:.3} | P99 RT(ms): {p99:.3} | P999 RT(ms): {p999:.3} | Max Delivery Gap(ms): {max_gap_ms:.3}",
            tps.round() as u64,
        );
    }
    if let Some(count) = a.run.count
        && n < count
    {
        bail!("received {n} of {count} messages before stopping");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn send_gaps_are_the_longest_time_without_a_success() {
        let gaps = SuccessGaps::default();
        assert_eq!(gaps.max_gap_us(5_000), 0, "no success, no gap");
        gaps.success_at(1_000);
        gaps.success_at(1_500);
        gaps.success_at(4_000);
        // Out of order (a concurrent sender): never shortens what was seen.
        gaps.success_at(3_900);
        gaps.success_at(4_100);
        assert_eq!(gaps.max_gap_us(4_200), 2_500);
        // An outage the run ends in counts.
        assert_eq!(gaps.max_gap_us(10_100), 6_000);
        // Deliveries: only between two of them.
        assert_eq!(gaps.max_gap_between_us(), 2_500);
    }
}
