//! `raftmq bench pop`: consumption with RocketMQ 5's POP over remoting, as a 5.x remoting consumer
//! (or the gRPC proxy) does it: N poppers, each a loop of POP_MESSAGE (any queue, up to `--batch`
//! messages, long polling up to `--poll`) then one ACK_MESSAGE per message popped, sent together,
//! with the receipt (`extraInfo`) a client builds from the pop's answer.
//!
//! ```text
//!  popper ×N: claim ≤ batch of --count ─► POP_MESSAGE (leader of a group, in turn) ─► ACK_MESSAGE ×n ─► Counters
//!  reporter: every interval, the counters' deltas ──► one line
//! ```
//!
//! Pops go to each group's leader (brokerId 0 of the topic's route; a follower refuses POP); an
//! error answer or a failed call re-reads the route. A new group starts at each queue's first
//! message (`initMode` 0), so a run drains a pre-filled topic; `--drain` stops at the first pop that
//! finds nothing (the topic is empty; with long polling that pop waited `--poll`); run beside a
//! producer with `--duration`. With `--count N` exactly N messages are popped: each pop asks for at
//! most what is left, and gives back what it did not get.
//!
//! Figures: received and acked per second over the time to the last ack; pop RT (hdrhistogram) is
//! the time of the pops that returned messages (an empty long poll lasts its poll time by design).
//! Invisible time defaults to 60 s, so messages acked late in a run are not handed out twice.

use std::sync::Arc;
use std::sync::Mutex;
use std::sync::atomic::AtomicU64;
use std::sync::atomic::Ordering;
use std::time::Duration;

use anyhow::Context;
use anyhow::Result;
use anyhow::bail;
use clap::Args;
use hdrhistogram::Histogram;
use raftmq_client::Admin;
use raftmq_common::limits::BENCH_CONCURRENCY_MAX_COUNT;
use raftmq_common::limits::POP_BATCH_MAX_COUNT;
use raftmq_common::limits::POP_INVISIBLE_MAX_MS;
use raftmq_common::limits::POP_INVISIBLE_MIN_MS;
use raftmq_common::limits::POP_POLL_TIME_MAX_MS;
use raftmq_common::message::MessageExt;
use raftmq_common::message::record::DecodeOptions;
use raftmq_common::message::record::decode_all;
use raftmq_common::protocol::RemotingCommand;
use raftmq_common::protocol::RequestCode;
use raftmq_common::protocol::ResponseCode;
use raftmq_common::protocol::header::pop::AckMessageRequestHeader;
use raftmq_common::protocol::header::pop::ExtraInfo;
use raftmq_common::protocol::header::pop::PopMessageRequestHeader;
use raftmq_common::protocol::header::pop::PopMessageResponseHeader;
use raftmq_common::protocol::header::pop::PopTopicType;
use raftmq_common::protocol::header::pop::start_offset_of;
use raftmq_common::remoting::RemotingClient;
use serde_json::json;
use tokio::sync::RwLock;
use tokio::time::Instant;

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

/// Pause after a failed pop before the next (the route is re-read in between): an election takes
/// about a second, so a popper does not spin against a group without a leader.
const POP_RETRY_PAUSE: Duration = Duration::from_millis(100);

/// `raftmq bench pop` flags.
#[derive(Debug, Args)]
pub struct PopArgs {
    #[command(flatten)]
    namesrv: NamesrvAddrArgs,
    /// Topic.
    #[arg(short = 't', long = "topic")]
    topic: String,
    /// Consumer group (a new one starts at each queue's first message).
    #[arg(short = 'g', long = "group", default_value = "benchmark_pop")]
    group: String,
    /// Tag expression.
    #[arg(long = "expr", default_value = "*")]
    expr: String,
    /// Stop after this many messages popped (and acked).
    #[arg(long = "count", value_parser = clap::value_parser!(u64).range(1..))]
    count: Option<u64>,
    /// Stop after this long, e.g. `30s`.
    #[arg(long = "duration", value_parser = humantime::parse_duration)]
    duration: Option<Duration>,
    /// Stop at the first pop that finds nothing: the topic is drained.
    #[arg(long = "drain")]
    drain: bool,
    /// Poppers, each with one pop (or its acks) in flight.
    #[arg(short = 'w', long = "concurrency", default_value_t = 8,
          value_parser = clap::value_parser!(u64).range(1..=BENCH_CONCURRENCY_MAX_COUNT as u64))]
    concurrency: u64,
    /// Messages per POP_MESSAGE at most.
    #[arg(long = "batch", default_value_t = POP_BATCH_MAX_COUNT as u64,
          value_parser = clap::value_parser!(u64).range(1..=POP_BATCH_MAX_COUNT as u64))]
    batch: u64,
    /// Long polling: how long the broker may hold a pop that finds nothing.
    #[arg(long = "poll", default_value = "1s", value_parser = humantime::parse_duration)]
    poll: Duration,
    /// How long a popped message stays invisible before it comes back unacked.
    #[arg(long = "invisible", default_value = "60s", value_parser = humantime::parse_duration)]
    invisible: Duration,
    /// Reporting interval.
    #[arg(long = "interval", default_value = "1s", value_parser = humantime::parse_duration)]
    interval: Duration,
    /// Print one JSON summary object on stdout (interval lines go to stderr).
    #[arg(long)]
    json: bool,
}

#[derive(Default)]
struct PopCounters {
    received: AtomicU64,
    acked: AtomicU64,
    ack_failed: AtomicU64,
    /// Pops that failed (no answer, or an error answer).
    pop_failed: AtomicU64,
    /// Pops answered with nothing (POLLING_TIMEOUT, NO_MESSAGE).
    empty_pops: AtomicU64,
    /// Messages claimed by pops in flight or done (`--count`).
    claimed: AtomicU64,
    pop_rt_total_us: AtomicU64,
    pop_rt_max_us: AtomicU64,
    /// Pops that returned messages (the pop RT's denominator).
    full_pops: AtomicU64,
    /// µs from the start to the last ack.
    last_ack_us: AtomicU64,
}

/// A group's name and its leader's address.
type Target = (String, String);

struct PopCtx {
    client: RemotingClient,
    admin: Admin,
    topic: String,
    group: String,
    expr: String,
    batch: u64,
    count: Option<u64>,
    drain: bool,
    poll_ms: i64,
    invisible_ms: i64,
    timeout: Duration,
    targets: RwLock<Vec<Target>>,
    counters: PopCounters,
    rt: Mutex<Histogram<u64>>,
    stop: Arc<StopWhen>,
    started: Instant,
}

/// A popped message and the receipt a client builds for it.
struct Popped {
    message: MessageExt,
    extra: ExtraInfo,
}

impl PopCtx {
    /// How many messages the next pop may ask for; 0 once the run is over.
    fn claim(&self) -> u64 {
        if self.stop.is_stopped() {
            return 0;
        }
        let Some(count) = self.count else { return self.batch };
        let c = &self.counters.claimed;
        let mut seen = c.load(Ordering::Acquire);
        loop {
            let want = self.batch.min(count.saturating_sub(seen));
            if want == 0 {
                return 0;
            }
            match c.compare_exchange_weak(seen, seen + want, Ordering::AcqRel, Ordering::Acquire) {
                Ok(_) => return want,
                Err(now) => seen = now,
            }
        }
    }

    /// Gives back what a pop claimed and did not get.
    fn unclaim(&self, n: u64) {
        if self.count.is_some() && n > 0 {
            self.counters.claimed.fetch_sub(n, Ordering::AcqRel);
        }
    }

    /// The leaders of the topic's groups, from the NameServer.
    async fn refresh_route(&self) -> Result<()> {
        let route = self.admin.topic_route(&self.topic).await?;
        let leaders: Vec<Target> = Admin::leaders_of_route(&route)
            .into_iter()
            .filter_map(|(name, addr)| addr.map(|addr| (name, addr)))
            .collect();
        if leaders.is_empty() {
            bail!("no group serving topic {} has a leader", self.topic);
        }
        *self.targets.write().await = leaders;
        Ok(())
    }

    async fn target(&self, turn: usize) -> Option<Target> {
        let targets = self.targets.read().await;
        (!targets.is_empty()).then(|| targets[turn % targets.len()].clone())
    }

    /// One POP_MESSAGE of at most `max` messages: `Ok(None)` when it found nothing.
    async fn pop(&self, (broker_name, addr): &Target, max: u64) -> Result<Option<Vec<Popped>>> {
        let header = PopMessageRequestHeader {
            consumer_group: self.group.clone(),
            topic: self.topic.clone(),
            queue_id: -1,
            max_msg_nums: i32::try_from(max).unwrap_or(i32::MAX),
            invisible_time: self.invisible_ms,
            poll_time: self.poll_ms,
            born_time: now_ms(),
            init_mode: 0,
            exp_type: Some("TAG".into()),
            exp: Some(self.expr.clone()),
            order: Some(false),
            attempt_id: None,
        };
        let request = RemotingCommand::request_with_header(RequestCode::PopMessage, &header);
        let wait = self.timeout + Duration::from_millis(self.poll_ms.unsigned_abs());
        let response = self.client.invoke(addr, request, wait).await?;
        match response.response_code() {
            ResponseCode::Success => {}
            ResponseCode::PollingTimeout | ResponseCode::NoMessage => return Ok(None),
            other => bail!("POP_MESSAGE answered {other:?}: {}", response.remark.as_deref().unwrap_or_default()),
        }
        let h: PopMessageResponseHeader = response.decode_header()?;
        let start_info = h.start_offset_info.unwrap_or_default();
        let messages = decode_all(&response.body, DecodeOptions::default())?;
        let mut out = Vec::with_capacity(messages.len());
        for message in messages {
            // The broker pops the group's retry topic too; its messages carry that topic.
            let topic_type =
                if message.message.topic.as_str() == self.topic { PopTopicType::Normal } else { PopTopicType::Retry };
            let ck_offset = start_offset_of(&start_info, topic_type, message.queue_id)
                .with_context(|| format!("no start offset for {topic_type:?} queue {}", message.queue_id))?;
            let extra = ExtraInfo {
                ck_offset,
                pop_time: h.pop_time,
                invisible_time: h.invisible_time,
                revive_qid: h.revive_qid,
                topic_type,
                broker_name: broker_name.clone(),
                queue_id: message.queue_id,
                queue_offset: Some(message.queue_offset),
            };
            out.push(Popped { message, extra });
        }
        Ok(Some(out))
    }

    /// One ACK_MESSAGE; whether the broker took it.
    async fn ack(&self, addr: &str, p: &Popped) -> bool {
        let header = AckMessageRequestHeader {
            consumer_group: self.group.clone(),
            topic: self.topic.clone(),
            queue_id: p.extra.queue_id,
            extra_info: p.extra.to_string(),
            offset: p.message.queue_offset,
        };
        let request = RemotingCommand::request_with_header(RequestCode::AckMessage, &header);
        match self.client.invoke(addr, request, self.timeout).await {
            Ok(r) => r.response_code() == ResponseCode::Success,
            Err(_) => false,
        }
    }
}

async fn popper(ctx: Arc<PopCtx>, first_turn: usize) {
    let c = &ctx.counters;
    let mut turn = first_turn;
    loop {
        let want = ctx.claim();
        if want == 0 {
            return;
        }
        let Some(target) = ctx.target(turn).await else {
            ctx.unclaim(want);
            if let Err(e) = ctx.refresh_route().await {
                tracing::warn!("route of {}: {e:#}", ctx.topic);
                tokio::time::sleep(POP_RETRY_PAUSE).await;
            }
            continue;
        };
        turn = turn.wrapping_add(1);
        let began = Instant::now();
        match ctx.pop(&target, want).await {
            Ok(Some(batch)) => {
                let rt = us_of(began.elapsed());
                c.pop_rt_total_us.fetch_add(rt, Ordering::Relaxed);
                c.pop_rt_max_us.fetch_max(rt, Ordering::Relaxed);
                c.full_pops.fetch_add(1, Ordering::Relaxed);
                // Clamped to the histogram's range by `us_of`, so recording cannot fail.
                let _ = lock(&ctx.rt).record(rt);
                ctx.unclaim(want.saturating_sub(batch.len() as u64));
                c.received.fetch_add(batch.len() as u64, Ordering::Relaxed);
                let acks = futures::future::join_all(batch.iter().map(|p| ctx.ack(&target.1, p))).await;
                let ok = acks.iter().filter(|ok| **ok).count() as u64;
                c.acked.fetch_add(ok, Ordering::Relaxed);
                c.ack_failed.fetch_add(acks.len() as u64 - ok, Ordering::Relaxed);
                c.last_ack_us.fetch_max(us_of(ctx.started.elapsed()), Ordering::Relaxed);
            }
            Ok(None) => {
                ctx.unclaim(want);
                c.empty_pops.fetch_add(1, Ordering::Relaxed);
                if ctx.drain {
                    ctx.stop.stop();
                }
            }
            Err(e) => {
                ctx.unclaim(want);
                c.pop_failed.fetch_add(1, Ordering::Relaxed);
                tracing::debug!("pop from {}: {e:#}", target.1);
                // A leader change or a broker going away: ask the NameServer again.
                if let Err(e) = ctx.refresh_route().await {
                    tracing::warn!("route of {}: {e:#}", ctx.topic);
                }
                tokio::time::sleep(POP_RETRY_PAUSE).await;
            }
        }
    }
}

/// Runs `raftmq bench pop`.
pub async fn run(a: PopArgs) -> Result<()> {
    if a.namesrv.credentials()?.is_some() || a.namesrv.tls {
        bail!("bench pop speaks plain remoting to the brokers: no --accessKey or --tls");
    }
    let ms = |d: Duration| i64::try_from(d.as_millis()).unwrap_or(i64::MAX);
    let (poll_ms, invisible_ms) = (ms(a.poll), ms(a.invisible));
    if poll_ms > POP_POLL_TIME_MAX_MS {
        bail!("--poll is at most {POP_POLL_TIME_MAX_MS} ms");
    }
    if !(POP_INVISIBLE_MIN_MS..=POP_INVISIBLE_MAX_MS).contains(&invisible_ms) {
        bail!("--invisible is {POP_INVISIBLE_MIN_MS}..={POP_INVISIBLE_MAX_MS} ms");
    }
    let stop = StopWhen::new();
    let ctx = Arc::new(PopCtx {
        client: RemotingClient::new(),
        admin: a.namesrv.admin()?,
        topic: a.topic.clone(),
        group: a.group.clone(),
        expr: a.expr.clone(),
        batch: a.batch,
        count: a.count,
        drain: a.drain,
        poll_ms,
        invisible_ms,
        timeout: a.namesrv.timeout,
        targets: RwLock::new(Vec::new()),
        counters: PopCounters::default(),
        rt: Mutex::new(histogram()),
        stop: Arc::clone(&stop),
        started: Instant::now(),
    });
    ctx.refresh_route().await?;
    stop.arm(a.duration);
    let reporter = Reporter::new(a.json, a.count);
    let poppers: Vec<_> = (0..a.concurrency).map(|i| tokio::spawn(popper(Arc::clone(&ctx), i as usize))).collect();
    let report = report_pop(&ctx, &reporter, a.interval);
    tokio::pin!(report);
    let all_done = futures_join(poppers);
    tokio::pin!(all_done);
    let poppers_done = tokio::select! {
        _ = &mut all_done => true,
        _ = &mut report => false,
    };
    stop.stop();
    // Pops in flight end within their poll time and deadline, and their acks are sent.
    if !poppers_done
        && tokio::time::timeout(a.poll + 2 * a.namesrv.timeout + Duration::from_secs(1), &mut all_done).await.is_err()
    {
        tracing::warn!("pops still in flight after their deadline");
    }
    let elapsed = ctx.started.elapsed();
    reporter.finish();
    ctx.admin.shutdown().await;
    summarize_pop(&ctx, &a, elapsed)
}

/// Prints a line every interval until stopped.
async fn report_pop(ctx: &PopCtx, reporter: &Reporter, interval: Duration) {
    let c = &ctx.counters;
    let mut ticker = tokio::time::interval_at(Instant::now() + interval, interval);
    let (mut last_n, mut last_acked, mut last_rt, mut last_pops) = (0u64, 0u64, 0u64, 0u64);
    // `stop` may fire between the check and the wait: re-checked after every tick.
    while !ctx.stop.is_stopped() {
        tokio::select! {
            _ = ticker.tick() => {}
            _ = ctx.stop.stopped.notified() => return,
        }
        let n = c.received.load(Ordering::Relaxed);
        let acked = c.acked.load(Ordering::Relaxed);
        let rt = c.pop_rt_total_us.load(Ordering::Relaxed);
        let pops = c.full_pops.load(Ordering::Relaxed);
        let per_s = |d: u64| (d as f64 / interval.as_secs_f64()).round() as u64;
        let avg = if pops == last_pops { 0.0 } else { ms_of_us(rt - last_rt) / (pops - last_pops) as f64 };
        reporter.line(&format!(
            "Current Time: {} | Pop TPS: {} | Ack TPS: {} | Average Pop RT(ms): {avg:7.3} | Max Pop RT(ms): {} | Pop Failed: {} | Ack Failed: {}",
            human_time_ms(now_ms()),
            per_s(n - last_n),
            per_s(acked - last_acked),
            c.pop_rt_max_us.load(Ordering::Relaxed) / 1000,
            c.pop_failed.load(Ordering::Relaxed),
            c.ack_failed.load(Ordering::Relaxed),
        ));
        (last_n, last_acked, last_rt, last_pops) = (n, acked, rt, pops);
        reporter.position(acked);
    }
}

fn summarize_pop(ctx: &PopCtx, a: &PopArgs, elapsed: Duration) -> Result<()> {
    let c = &ctx.counters;
    let load = |x: &AtomicU64| x.load(Ordering::Relaxed);
    let (n, acked, ack_failed) = (load(&c.received), load(&c.acked), load(&c.ack_failed));
    let (pop_failed, empty_pops, pops) = (load(&c.pop_failed), load(&c.empty_pops), load(&c.full_pops));
    // Rates over the time to the last ack: a drained run's final empty pop waited out its poll.
    let active_us = match load(&c.last_ack_us) {
        0 => us_of(elapsed),
        last => last,
    };
    let secs = (active_us as f64 / 1e6).max(1e-9);
    let (tps, ack_tps) = (n as f64 / secs, acked as f64 / secs);
    let hist = lock(&ctx.rt);
    let pct = |q: f64| if hist.is_empty() { 0.0 } else { ms_of_us(hist.value_at_quantile(q)) };
    let (p50, p99, p999) = (pct(0.50), pct(0.99), pct(0.999));
    let avg = if pops == 0 { 0.0 } else { ms_of_us(load(&c.pop_rt_total_us)) / pops as f64 };
    let max_ms = ms_of_us(load(&c.pop_rt_max_us));
    if a.json {
        let summary = json!({
            "kind": "pop", "topic": a.topic, "group": a.group, "concurrency": a.concurrency, "batch": a.batch,
            "poll_ms": ctx.poll_ms, "invisible_ms": ctx.invisible_ms, "elapsed_s": elapsed.as_secs_f64(), "active_s": secs,
            "received": n, "acked": acked, "ack_failed": ack_failed, "pop_failed": pop_failed, "empty_pops": empty_pops,
            "pops": pops, "tps": tps, "ack_tps": ack_tps, "avg_ms": avg, "p50_ms": p50, "p99_ms": p99, "p999_ms": p999,
            "max_ms": max_ms,
        });
        println!("{summary}");
    } else {
        println!(
            "[Complete] Pop Total: {n} | Pop TPS: {} | Ack Total: {acked} | Ack TPS: {} | Average Pop RT(ms): {avg:7.3} | Max Pop RT(ms): {} | Pop Failed: {pop_failed} | Ack Failed: {ack_failed} | Empty Pops: {empty_pops} | P50 Pop RT(ms): {p50:.3} | P99 Pop RT(ms): {p99:.3} | P999 Pop RT(ms): {p999:.3}",
            tps.round() as u64,
            ack_tps.round() as u64,
            max_ms.round() as u64,
        );
    }
    if let Some(count) = a.count
        && n < count
    {
        bail!("popped {n} of {count} messages before stopping");
    }
    if ack_failed > 0 {
        bail!("{ack_failed} of {n} acks failed");
    }
    Ok(())
}
