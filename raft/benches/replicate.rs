//! Replication throughput and commit latency of one broker group: N replicas (default 3) in
//! this process, Raft RPC over loopback TCP (the remoting transport), each with its own log
//! store in a temporary directory doing real fsyncs; W concurrent writers (default 256) each
//! proposing P-byte payloads (default 1 KiB) back to back at the leader for the run time.
//!
//! Reports committed entries/s, commit latency percentiles (propose → committed and applied on
//! the leader, from an HDR histogram), and the flusher's fsyncs/s and entries per group commit.
//! A warm-up (`--warmup`, default 3 s as criterion's, at most the run time) is not measured: the
//! first seconds after an idle host are markedly slower (a cold run measured 60k entries/s where
//! the same binary did 100k+ a minute later), and that ramp is the host's, not the log's. The
//! commits of every second, warm-up included, are printed so the ramp shows.
//!
//! No benchmark framework:
//! `cargo bench -p raftmq-raft --bench replicate -- [--nodes 3] [--writers 256] [--payload 1024] [--duration 10s]
//! [--warmup 3s] [--sequential] [--inflight N] [--no-zero-ahead] [--keep-page-cache] [--leader-window-mib N] [--shared-runtime]` (`--sequential`: one
//! AppendEntries at a time per follower; `--inflight`: pipelined requests in flight per follower,
//! default `RaftConfig`'s; `--no-zero-ahead`: appends land on fresh blocks, see
//! `RaftConfig::segment_zero_ahead`; `--keep-page-cache`: no synced bytes are dropped from the page
//! cache, see `RaftConfig::page_cache_leader_window_bytes`; `--leader-window-mib`: the leader's
//! window instead of the default; `--shared-runtime`: the replicas run on the writers' runtime
//! instead of a `NodeRuntime` each, as a broker runs its replica);
//! `-- --test` (as `cargo test --benches` passes) runs a 1 s smoke check.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, anyhow, bail};
use bytes::Bytes;
use hdrhistogram::Histogram;
use raftmq_raft::network::{RaftServer, TcpTransport};
use raftmq_raft::type_config::{LogId, Node, NodeId};
use raftmq_raft::{
    AppPayload, AppReply, ApplyHandler, CommittedEntry, NODE_RUNTIME_WORKER_THREADS, NodeConfig, NodeRuntime,
    RaftConfig, RaftNode, Role,
};

// The allocator the `raftmq` binary ships with, so the figures are the product's.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// Longest commit latency the histogram records exactly (longer ones saturate).
const LATENCY_MAX_US: u64 = 60_000_000;
const ELECTION_WAIT: Duration = Duration::from_secs(20);
/// Criterion's default warm-up.
const WARMUP_DEFAULT: Duration = Duration::from_secs(3);

struct Args {
    nodes: u64,
    writers: usize,
    payload_bytes: usize,
    duration: Duration,
    /// Proposals run but are not measured for this long first.
    warmup: Duration,
    /// One AppendEntries at a time per follower (the non-pipelined transport).
    sequential: bool,
    /// Pipelined AppendEntries in flight per follower (`RaftConfig` default when absent).
    inflight: Option<u64>,
    /// Appends land on fresh blocks (`RaftConfig::segment_zero_ahead` off).
    no_zero_ahead: bool,
    /// Both page-cache windows 0: the kernel alone decides what stays cached.
    keep_page_cache: bool,
    /// The leader's page-cache window in MiB (`RaftConfig` default when absent).
    leader_window_mib: Option<u64>,
    /// Replicas run on the writers' runtime instead of a `NodeRuntime` each (the broker's way).
    shared_runtime: bool,
}

fn parse_duration(s: &str) -> anyhow::Result<Duration> {
    let (num, unit) = s.find(|c: char| !c.is_ascii_digit() && c != '.').map_or((s, "s"), |i| s.split_at(i));
    let v: f64 = num.parse().with_context(|| format!("bad duration {s:?}"))?;
    let secs = match unit {
        "s" => v,
        "ms" => v / 1e3,
        "m" => v * 60.0,
        _ => bail!("bad duration unit in {s:?} (use s, ms or m)"),
    };
    Ok(Duration::from_secs_f64(secs))
}

fn parse_args() -> anyhow::Result<Args> {
    let mut a = Args {
        nodes: 3,
        writers: 256,
        payload_bytes: 1024,
        duration: Duration::from_secs(10),
        warmup: WARMUP_DEFAULT,
        sequential: false,
        inflight: None,
        no_zero_ahead: false,
        keep_page_cache: false,
        leader_window_mib: None,
        shared_runtime: false,
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let mut value = || it.next().ok_or_else(|| anyhow!("{flag} needs a value"));
        match flag.as_str() {
            "--nodes" => a.nodes = value()?.parse()?,
            "--writers" => a.writers = value()?.parse()?,
            "--payload" => a.payload_bytes = value()?.parse()?,
            "--duration" => a.duration = parse_duration(&value()?)?,
            "--warmup" => a.warmup = parse_duration(&value()?)?,
            "--sequential" => a.sequential = true,
            "--inflight" => a.inflight = Some(value()?.parse()?),
            "--no-zero-ahead" => a.no_zero_ahead = true,
            "--keep-page-cache" => a.keep_page_cache = true,
            "--leader-window-mib" => a.leader_window_mib = Some(value()?.parse()?),
            "--shared-runtime" => a.shared_runtime = true,
            "--test" => {
                a.duration = Duration::from_secs(1);
                a.warmup = Duration::from_millis(100);
            }
            // cargo bench passes --bench to harness-less benches.
            "--bench" => {}
            other => bail!("unknown argument {other:?}; see the file header for usage"),
        }
    }
    if a.nodes == 0 || a.writers == 0 {
        bail!("--nodes and --writers must be at least 1");
    }
    Ok(a)
}

/// A state machine that only counts: the benchmark measures the log, not the broker.
#[derive(Default)]
struct CountingHandler {
    applied: AtomicU64,
}

impl ApplyHandler for CountingHandler {
    fn apply(&self, _entry: CommittedEntry) -> AppReply {
        self.applied.fetch_add(1, Ordering::Relaxed);
        AppReply::default()
    }

    fn build_manifest(&self, _applied: LogId) -> std::io::Result<Option<(LogId, Bytes)>> {
        Ok(None)
    }

    fn install_manifest(&self, _manifest: Bytes, _last: LogId) -> std::io::Result<()> {
        Ok(())
    }
}

fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|_| "unknown".into())
}

struct Group {
    _tmp: tempfile::TempDir,
    servers: Vec<RaftServer>,
    nodes: BTreeMap<NodeId, RaftNode>,
}

/// Start the group; node `i` is started on `rts[i - 1]` when given (every task a replica
/// spawns, Raft core, replication, RPC server, lands on the runtime it was started on).
async fn start_group(a: &Args, rts: &[NodeRuntime]) -> anyhow::Result<Group> {
    let n = a.nodes;
    let tmp = tempfile::tempdir()?;
    let on = |i: u64| rts.get(usize::try_from(i - 1).unwrap_or(usize::MAX));
    let mut servers = Vec::new();
    let mut members = BTreeMap::new();
    for id in 1..=n {
        let s = match on(id) {
            Some(rt) => rt.run(RaftServer::bind("127.0.0.1:0".parse()?)).await??,
            None => RaftServer::bind("127.0.0.1:0".parse()?).await?,
        };
        members.insert(id, Node { raft_addr: s.local_addr().to_string(), data: format!("broker-{id}") });
        servers.push(s);
    }
    let mut nodes = BTreeMap::new();
    for (id, server) in (1..=n).zip(&servers) {
        let mut cfg = NodeConfig::new("bench-group", id, tmp.path().join(format!("n{id}")), members.clone());
        cfg.raft = RaftConfig { segment_size_bytes: 256 << 20, ..RaftConfig::default() };
        cfg.raft.segment_zero_ahead = !a.no_zero_ahead;
        if let Some(mib) = a.leader_window_mib {
            cfg.raft.page_cache_leader_window_bytes = mib << 20;
        }
        if a.keep_page_cache {
            cfg.raft.page_cache_leader_window_bytes = 0;
            cfg.raft.page_cache_follower_window_bytes = 0;
        }
        if let Some(count) = a.inflight {
            cfg.raft.append_stream_inflight_max_count = count;
        }
        let transport = if a.sequential { TcpTransport::sequential() } else { TcpTransport::new() };
        let start = RaftNode::start(cfg, Arc::new(CountingHandler::default()), Arc::new(transport));
        let node = match on(id) {
            Some(rt) => rt.run(start).await??,
            None => start.await?,
        };
        server.attach(node.service());
        nodes.insert(id, node);
    }
    Ok(Group { _tmp: tmp, servers, nodes })
}

async fn wait_leader(g: &Group) -> anyhow::Result<NodeId> {
    let deadline = Instant::now() + ELECTION_WAIT;
    loop {
        for (id, node) in &g.nodes {
            let st = node.status();
            if st.leadership.role == Role::Leader && st.applied.is_some_and(|a| a.leader_id.term == st.leadership.term)
            {
                return Ok(*id);
            }
        }
        if Instant::now() >= deadline {
            bail!("no leader within {ELECTION_WAIT:?}");
        }
        // Polling a status is a measurement wait, not synchronisation between tasks under test.
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// One writer's outcome; latencies are kept raw and merged into one histogram at the end (a
/// histogram per writer would be hundreds of KiB each, cache misses on every record).
struct WriterResult {
    failed: u64,
    latency_us: Vec<u64>,
}

async fn writer(
    node: Arc<RaftNode>,
    commits: Arc<AtomicU64>,
    body: Bytes,
    measure_from: Instant,
    stop_at: Instant,
) -> anyhow::Result<WriterResult> {
    let mut r = WriterResult { failed: 0, latency_us: Vec::with_capacity(4096) };
    loop {
        let start = Instant::now();
        if start >= stop_at {
            return Ok(r);
        }
        let res = node.propose(AppPayload { tag: 1, body: body.clone() }).await;
        if res.is_ok() {
            commits.fetch_add(1, Ordering::Relaxed);
        }
        if start < measure_from {
            continue;
        }
        match res {
            Ok(_) => r.latency_us.push(u64::try_from(start.elapsed().as_micros()).unwrap_or(u64::MAX)),
            Err(_) => r.failed += 1,
        }
    }
}

/// Commits in each whole second from `begin` to `stop_at` (the last, partial second dropped).
async fn commits_per_second(commits: Arc<AtomicU64>, begin: Instant, stop_at: Instant) -> Vec<u64> {
    let mut out = Vec::new();
    let mut last = 0;
    let mut tick = begin + Duration::from_secs(1);
    while tick <= stop_at {
        tokio::time::sleep_until(tick.into()).await;
        let now = commits.load(Ordering::Relaxed);
        out.push(now - last);
        last = now;
        tick += Duration::from_secs(1);
    }
    out
}

async fn run(a: Args, rts: &[NodeRuntime]) -> anyhow::Result<()> {
    println!(
        "replicate: {} nodes, loopback TCP ({}), real fsync, zero-ahead {}, page cache {}, {}; {} writers x {} B payloads for {:?} after {:?} of warm-up; load average before: {}",
        a.nodes,
        if a.sequential { "sequential".to_string() } else { format!("pipelined, window {:?}", a.inflight) },
        if a.no_zero_ahead { "off" } else { "on" },
        if a.keep_page_cache { "kept" } else { "dropped behind the windows" },
        if a.shared_runtime { "replicas on the writers' runtime" } else { "a runtime per replica" },
        a.writers,
        a.payload_bytes,
        a.duration,
        a.warmup.min(a.duration),
        load_average()
    );
    let mut g = start_group(&a, rts).await?;
    let leader_id = wait_leader(&g).await?;
    let leader = Arc::new(g.nodes.remove(&leader_id).context("leader")?);
    let warmup = a.warmup.min(a.duration);
    let begin = Instant::now();
    let measure_from = begin + warmup;
    let stop_at = measure_from + a.duration;
    let body = Bytes::from((0..a.payload_bytes).map(|i| i as u8).collect::<Vec<u8>>());

    let commits = Arc::new(AtomicU64::new(0));
    let mut writers = tokio::task::JoinSet::new();
    for _ in 0..a.writers {
        writers.spawn(writer(Arc::clone(&leader), Arc::clone(&commits), body.clone(), measure_from, stop_at));
    }
    let per_second = tokio::spawn(commits_per_second(Arc::clone(&commits), begin, stop_at));
    // Flusher counters at the start and end of the measured window.
    let fsyncs = |g: &Group, leader: &RaftNode| {
        let counts: Vec<(u64, u64, f64, u64)> = std::iter::once(leader)
            .chain(g.nodes.values())
            .map(|n| {
                let st = n.store();
                (st.fsync_count(), st.flush_count(), st.flush_latency().sum_seconds, st.page_cache_dropped_bytes())
            })
            .collect();
        counts
    };
    tokio::time::sleep_until(measure_from.into()).await;
    let before = fsyncs(&g, &leader);
    tokio::time::sleep_until(stop_at.into()).await;
    let after = fsyncs(&g, &leader);
    let mut committed = 0;
    let mut failed = 0;
    let mut hist = Histogram::<u64>::new_with_max(LATENCY_MAX_US, 3)?;
    while let Some(r) = writers.join_next().await {
        let r = r??;
        committed += r.latency_us.len() as u64;
        failed += r.failed;
        for us in r.latency_us {
            hist.saturating_record(us);
        }
    }
    let per_second = per_second.await?;
    println!(
        "commits per second, the first {:.1} s warm-up: {}",
        warmup.as_secs_f64(),
        per_second.iter().map(|n| format!("{:.0}k", *n as f64 / 1e3)).collect::<Vec<_>>().join(" ")
    );
    let secs = a.duration.as_secs_f64();
    let ms = |q: f64| hist.value_at_quantile(q) as f64 / 1000.0;
    println!(
        "committed entries/s: {:.0} ({committed} entries in {secs:.1} s, {failed} failed)",
        committed as f64 / secs
    );
    println!(
        "commit latency ms: p50 {:.3}  p99 {:.3}  p999 {:.3}  max {:.3}",
        ms(0.50),
        ms(0.99),
        ms(0.999),
        hist.max() as f64 / 1000.0
    );
    for (i, ((f0, c0, s0, d0), (f1, c1, s1, d1))) in before.iter().zip(&after).enumerate() {
        let role = if i == 0 { format!("leader n{leader_id}") } else { "follower".to_string() };
        let (f, c) = (f1 - f0, c1 - c0);
        println!(
            "  {role}: fsyncs/s {:.0}, group commits/s {:.0}, entries per group commit {:.1}, sync ms per group commit {:.3}, page cache dropped MiB/s {:.0}",
            f as f64 / secs,
            c as f64 / secs,
            committed as f64 / c.max(1) as f64,
            (s1 - s0) * 1e3 / c.max(1) as f64,
            (d1 - d0) as f64 / secs / f64::from(1u32 << 20)
        );
    }
    println!("load average after: {}", load_average());

    let leader = Arc::try_unwrap(leader).map_err(|_| anyhow!("leader still shared"))?;
    for s in &g.servers {
        s.detach();
    }
    leader.shutdown().await?;
    for (_, n) in std::mem::take(&mut g.nodes) {
        n.shutdown().await?;
    }
    for s in &g.servers {
        s.shutdown().await;
    }
    Ok(())
}

fn main() -> anyhow::Result<()> {
    let args = parse_args()?;
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build()?;
    let node_rts = if args.shared_runtime {
        Vec::new()
    } else {
        (0..args.nodes)
            .map(|_| NodeRuntime::new("raft-node", NODE_RUNTIME_WORKER_THREADS))
            .collect::<Result<Vec<_>, _>>()?
    };
    let res = rt.block_on(run(args, &node_rts));
    drop(rt);
    drop(node_rts);
    res
}
