//! Deterministic simulation of a 3-replica group over the in-memory router: random message
//! delays, partitions (isolated node, one-way cuts), crashes and restarts from the same
//! directory, with client writes throughout. Half the crashes are clean stops; the other half
//! lose what was never fsynced: the victim's disk first hangs while writes go on (it appends
//! entries it never acknowledges, which the other two commit; a frozen leader's followers commit
//! without it), then it dies and the unsynced tail of its CommitLog is cut at a random point,
//! sometimes with torn garbage after it. Invariants, checked after every step and at the end:
//! - election safety: at most one leader per term (every leadership change is recorded);
//! - acknowledged entries are never lost or changed (same log id, bytes and position);
//! - the logs of all replicas agree (entries and positions) up to their common commit index.
//!
//! Determinism: a seed fixes the whole run, bit for bit. Each seed runs on its own
//! current-thread tokio runtime with paused (virtual) time, so every task of every replica is
//! polled on one thread in an order fixed by the program, and timers fire when the runtime idles
//! instead of when the wall clock says. The seed fixes the fault schedule and payloads (`StdRng`
//! here), the router's delays (`MemRouter`'s own `StdRng`), and openraft's election timeouts and
//! tick jitter (`raftmq_raft::runtime::install_sim_seed`, a per-thread seeded stream behind the
//! runtime's `thread_rng()`; the same switch makes openraft's watch channels wake their waiters
//! in FIFO order, where tokio's pick from 8 shards with an RNG stable tokio cannot seed). Nothing
//! else draws: no unbiased `select!` and no hash-ordered iteration on this path, no std clock in
//! any decision. The stores flush with `FlushMode::Task`: the group commit is a task
//! on that runtime, not a thread, so virtual time never advances while an fsync is in progress
//! (which, with a flusher thread, turned every flush into a spurious election). The syncs are
//! real; durability is what the store's durable watermark says, and a crash cuts the files back
//! to it. `t50_same_seed_same_trace` proves it: it runs seeds twice, on different threads, and
//! compares their traces (virtual time and event: leadership changes, faults, acknowledged and
//! refused proposals, and a digest of every replica's final log). Not covered: snapshots
//! (retention drives them in the broker; none are taken here, and their save runs on
//! `spawn_blocking`).
//!
//! `RAFTMQ_SIM_SEED=<n>` runs one seed (`RAFTMQ_SIM_TRACE=1` prints its trace, `=live` as it
//! happens); `RAFTMQ_SIM_SEEDS=<count>` (default 200) and `RAFTMQ_SIM_JOBS=<threads>` (default:
//! twice the CPU count) size the sweep; `RAFTMQ_SIM_SAME_SEEDS=<count>` makes the determinism check run
//! seeds `0..count` instead of three.

use crate::cluster;

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::{Context, bail};
use cluster::{Cluster, log_of};
use raftmq_raft::config::FlushMode;
use raftmq_raft::network::MemRouter;
use raftmq_raft::runtime::install_sim_seed;
use raftmq_raft::type_config::{Entry, EntryPayload, NodeId};
use raftmq_raft::{ProposeError, RaftConfig, Role};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

const STEPS: usize = 6;
const WAIT: Duration = Duration::from_secs(10);
/// Virtual time one seed may take (a livelock that keeps time moving fails here, reproducibly).
const RUN_VIRTUAL_MAX: Duration = Duration::from_secs(600);
/// Wall time one seed may take before the sweep gives up on the process (a task that spins
/// without ever idling stops virtual time, so only a wall clock can see it). Override with
/// `RAFTMQ_SIM_WALL_MAX_S`.
const RUN_WALL_MAX: Duration = Duration::from_secs(300);
/// Per-purpose salts keep the three seeded streams independent.
const ROUTER_SALT: u64 = 0x5EED;
const OPENRAFT_SALT: u64 = 0x0BE2_AF75;

fn sim_config() -> RaftConfig {
    RaftConfig {
        heartbeat_interval_ms: 30,
        election_timeout_min_ms: 150,
        election_timeout_max_ms: 300,
        segment_size_bytes: 16 * 1024,
        index_file_entries: 256,
        committed_persist_interval_ms: 20,
        flush_mode: FlushMode::Task,
        ..RaftConfig::default()
    }
}

/// What happened, stamped with virtual time since the run began. Two runs of one seed must
/// produce equal traces.
#[derive(Clone)]
struct Trace {
    start: tokio::time::Instant,
    /// Print events as they happen (`RAFTMQ_SIM_TRACE=live`), for a run that hangs.
    live: bool,
    events: Arc<Mutex<Vec<String>>>,
}

impl Trace {
    fn new() -> Self {
        let live = std::env::var("RAFTMQ_SIM_TRACE").is_ok_and(|v| v == "live");
        Self { start: tokio::time::Instant::now(), live, events: Arc::default() }
    }

    fn log(&self, event: impl std::fmt::Display) {
        let at = self.start.elapsed().as_micros();
        let line = format!("{:>7}.{:03}ms {event}", at / 1000, at % 1000);
        if self.live {
            eprintln!("{line}");
        }
        self.events.lock().unwrap_or_else(|p| p.into_inner()).push(line);
    }

    fn lines(&self) -> Vec<String> {
        self.events.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }
}

/// term -> leaders seen in it.
type LeaderLog = Arc<Mutex<BTreeMap<u64, Vec<NodeId>>>>;

fn watch_leaders(c: &Cluster, id: NodeId, seen: &LeaderLog, trace: &Trace) {
    let Ok(node) = c.node(id) else { return };
    let mut rx = node.leadership();
    let seen = Arc::clone(seen);
    let trace = trace.clone();
    tokio::spawn(async move {
        loop {
            let l = *rx.borrow_and_update();
            trace.log(format_args!("n{id} term {} {:?} leader {:?}", l.term, l.role, l.leader_id));
            if l.role == Role::Leader {
                let mut s = seen.lock().unwrap_or_else(|p| p.into_inner());
                let v = s.entry(l.term).or_default();
                if !v.contains(&id) {
                    v.push(id);
                }
            }
            if l.role == Role::Stopped || rx.changed().await.is_err() {
                break;
            }
        }
    });
}

fn check_election_safety(seen: &LeaderLog) -> anyhow::Result<()> {
    let s = seen.lock().unwrap_or_else(|p| p.into_inner());
    for (term, leaders) in s.iter() {
        if leaders.len() > 1 {
            bail!("election safety: term {term} had leaders {leaders:?}");
        }
    }
    Ok(())
}

/// Acknowledged writes: index -> entry.
type Acked = BTreeMap<u64, Entry>;

async fn check_logs(c: &Cluster, acked: &Acked) -> anyhow::Result<()> {
    let mut logs = Vec::new();
    for id in c.running() {
        let node = c.node(id)?;
        let Some(committed) = node.status().committed.map(|l| l.index) else { continue };
        let log: BTreeMap<u64, (Entry, u64)> =
            log_of(node).await?.into_iter().map(|(e, pos, _)| (e.log_id.index, (e, pos))).collect();
        for (index, e) in acked.range(..=committed) {
            match log.get(index) {
                Some((have, _)) if have == e => {}
                // Purged (not in this test) or not yet replicated below the commit index is a bug.
                other => bail!("replica {id}: acknowledged {} changed or lost: {:?}", e.log_id, other.map(|x| &x.0)),
            }
        }
        logs.push((id, committed, log));
    }
    for (i, (a, ca, la)) in logs.iter().enumerate() {
        for (b, cb, lb) in &logs[i + 1..] {
            let upto = (*ca).min(*cb);
            for (index, ea) in la.range(..=upto) {
                if lb.get(index) != Some(ea) {
                    bail!("log matching: replicas {a} and {b} differ at {index} (common commit {upto})");
                }
            }
        }
    }
    Ok(())
}

/// Try to write `n` entries through whichever replica leads; remember what was acknowledged.
async fn write_some(
    c: &mut Cluster,
    rng: &mut StdRng,
    acked: &mut Acked,
    n: usize,
    trace: &Trace,
) -> anyhow::Result<()> {
    for _ in 0..n {
        let running = c.running();
        let Some(target) = running.get(rng.random_range(0..running.len().max(1))).copied() else { return Ok(()) };
        let p = c.payload();
        let node = c.node(target)?;
        let to = match node.leadership().borrow().leader_id {
            Some(l) if c.running().contains(&l) => l,
            _ => target,
        };
        match c.node(to)?.propose(p.clone()).await {
            Ok(a) => {
                trace.log(format_args!("propose at n{to}: acknowledged {}", a.log_id));
                let e = Entry { log_id: a.log_id, payload: EntryPayload::Normal(p) };
                if let Some(prev) = acked.insert(a.log_id.index, e.clone())
                    && prev != e
                {
                    bail!("index {} acknowledged twice with different entries", a.log_id.index);
                }
            }
            Err(e @ (ProposeError::ForwardToLeader { .. } | ProposeError::OutcomeUnknown(_))) => {
                trace.log(format_args!("propose at n{to}: {e}"));
            }
            Err(e) => bail!("propose at {to}: {e}"),
        }
    }
    Ok(())
}

/// One line per running replica: its view and a CRC of its whole log (ids, positions, bytes).
async fn log_digests(c: &Cluster) -> anyhow::Result<Vec<String>> {
    let mut out = Vec::new();
    for id in c.running() {
        let node = c.node(id)?;
        let log = log_of(node).await?;
        let mut crc = crc32fast::Hasher::new();
        for (e, pos, size) in &log {
            crc.update(e.log_id.to_string().as_bytes());
            crc.update(&pos.to_le_bytes());
            crc.update(&size.to_le_bytes());
            match &e.payload {
                EntryPayload::Normal(p) => {
                    crc.update(&[p.tag]);
                    crc.update(&p.body);
                }
                other => crc.update(format!("{other:?}").as_bytes()),
            }
        }
        let s = node.status();
        out.push(format!(
            "n{id} final: term {} committed {:?} applied {:?} {} entries, end {} durable {}, crc {:08x}",
            s.leadership.term,
            s.committed,
            s.applied,
            log.len(),
            node.store().end_pos(),
            node.store().durable_pos(),
            crc.finalize()
        ));
    }
    Ok(out)
}

async fn run_seed(seed: u64, trace: &Trace) -> anyhow::Result<CrashStats> {
    let mut rng = StdRng::seed_from_u64(seed);
    let router = MemRouter::new(seed ^ ROUTER_SALT);
    let delay_max = Duration::from_micros(rng.random_range(0..3000));
    router.set_delay_max(delay_max);
    trace.log(format_args!("seed {seed}: router delays up to {delay_max:?}"));
    let mut c = Cluster::mem(3, router.clone(), sim_config())?;
    let seen: LeaderLog = Arc::default();
    c.start_all().await?;
    for id in c.ids() {
        watch_leaders(&c, id, &seen, trace);
    }
    c.wait_leader(&c.ids(), 1, WAIT).await?;
    let mut acked = Acked::new();
    let mut crashes = CrashStats::default();
    let ids = c.ids();
    for step in 0..STEPS {
        let victim = ids[rng.random_range(0..ids.len())];
        match rng.random_range(0..5) {
            0 => {
                trace.log(format_args!("step {step}: isolate n{victim}"));
                c.cuts.isolate(victim, &ids);
            }
            1 => {
                let other = ids[rng.random_range(0..ids.len())];
                if other != victim {
                    trace.log(format_args!("step {step}: cut n{victim} -> n{other}"));
                    router.cut_one_way(victim, other);
                }
            }
            2 if c.running().len() == ids.len() => {
                if rng.random_bool(0.5) {
                    trace.log(format_args!("step {step}: stop n{victim}"));
                    c.stop(victim).await?;
                } else {
                    // The victim's disk hangs while the group keeps writing: it appends entries
                    // it never acknowledges (the others commit them), then it dies.
                    trace.log(format_args!("step {step}: freeze n{victim}"));
                    c.node(victim)?.store().freeze_for_crash_test();
                    let n = rng.random_range(1..6);
                    write_some(&mut c, &mut rng, &mut acked, n, trace).await.context(format!("step {step}, frozen"))?;
                    let keep = rng.random_range(0.0..1.0);
                    let garbage: Vec<u8> = if rng.random_bool(0.5) {
                        (0..rng.random_range(1..200)).map(|_| rng.random()).collect()
                    } else {
                        Vec::new()
                    };
                    let leader = c.node(victim)?.leadership().borrow().leader_id;
                    let cut = c.crash(victim, keep, &garbage).await?;
                    trace.log(format_args!("step {step}: crashed n{victim} (leader {leader:?}) {cut:?}"));
                    crashes.lost_bytes += cut.end - cut.cut;
                    crashes.count += 1;
                }
                write_some(&mut c, &mut rng, &mut acked, 3, trace).await?;
                trace.log(format_args!("step {step}: restart n{victim}"));
                c.start(victim).await?;
                watch_leaders(&c, victim, &seen, trace);
            }
            _ => {
                trace.log(format_args!("step {step}: heal"));
                c.cuts.heal();
                router.heal();
            }
        }
        let n = rng.random_range(1..6);
        write_some(&mut c, &mut rng, &mut acked, n, trace).await.context(format!("step {step}"))?;
        check_election_safety(&seen)?;
        check_logs(&c, &acked).await.context(format!("step {step}"))?;
    }
    // Liveness: with every fault healed the group elects a leader, commits, and converges.
    trace.log("heal all");
    c.cuts.heal();
    router.heal();
    let last = c.write_retrying(2, WAIT).await?;
    c.wait_applied(last, WAIT).await?;
    check_election_safety(&seen)?;
    check_logs(&c, &acked).await?;
    cluster::assert_logs_agree(&c, last).await?;
    for line in log_digests(&c).await? {
        trace.log(line);
    }
    c.stop_all().await?;
    trace.log("stopped");
    Ok(crashes)
}

/// Run one seed on a fresh current-thread runtime with paused time and openraft's randomness
/// seeded on this thread; returns its result and trace.
fn simulate(seed: u64) -> (anyhow::Result<CrashStats>, Vec<String>) {
    let _openraft_seed = install_sim_seed(seed ^ OPENRAFT_SALT);
    let rt = match tokio::runtime::Builder::new_current_thread().enable_all().start_paused(true).build() {
        Ok(rt) => rt,
        Err(e) => return (Err(e.into()), Vec::new()),
    };
    let (result, trace) = rt.block_on(async {
        let trace = Trace::new();
        let result = match tokio::time::timeout(RUN_VIRTUAL_MAX, run_seed(seed, &trace)).await {
            Ok(r) => r,
            Err(_) => Err(anyhow::anyhow!("did not finish within {RUN_VIRTUAL_MAX:?} of virtual time")),
        };
        (result, trace)
    });
    // Leftover tasks (a failed run's replicas) go with the runtime, while the seed is installed.
    drop(rt);
    (result, trace.lines())
}

/// Crashes without flush in one seed.
#[derive(Debug, Default, Clone, Copy)]
struct CrashStats {
    count: u64,
    /// Unsynced CommitLog bytes cut away.
    lost_bytes: u64,
}

fn env_u64(name: &str) -> Option<u64> {
    std::env::var(name).ok().and_then(|v| v.parse().ok())
}

/// Sweep threads: twice the CPUs by default, as a seed's thread also waits on real fsyncs.
fn jobs() -> usize {
    let cpus = std::thread::available_parallelism().map_or(2, |n| n.get());
    env_u64("RAFTMQ_SIM_JOBS").and_then(|j| usize::try_from(j).ok()).unwrap_or(2 * cpus).max(1)
}

/// Run `seeds` on `jobs` threads; results in seed order. A seed that runs longer than
/// [`RUN_WALL_MAX`] ends the process with its reproduce command.
fn sweep(seeds: &[u64], jobs: usize) -> Vec<(u64, anyhow::Result<CrashStats>, Vec<String>)> {
    let next = AtomicU64::new(0);
    let results = Mutex::new(Vec::new());
    let running: Mutex<BTreeMap<u64, std::time::Instant>> = Mutex::default();
    let workers = jobs.min(seeds.len());
    let finished = AtomicU64::new(0);
    let wall_max = env_u64("RAFTMQ_SIM_WALL_MAX_S").map_or(RUN_WALL_MAX, Duration::from_secs);
    std::thread::scope(|s| {
        for _ in 0..workers {
            s.spawn(|| {
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    let Some(&seed) = usize::try_from(i).ok().and_then(|i| seeds.get(i)) else { break };
                    running.lock().unwrap_or_else(|p| p.into_inner()).insert(seed, std::time::Instant::now());
                    let (r, trace) = simulate(seed);
                    running.lock().unwrap_or_else(|p| p.into_inner()).remove(&seed);
                    results.lock().unwrap_or_else(|p| p.into_inner()).push((seed, r, trace));
                }
                finished.fetch_add(1, Ordering::Relaxed);
            });
        }
        // Watchdog: polling, not synchronisation; it only decides when to give up.
        s.spawn(|| {
            while usize::try_from(finished.load(Ordering::Relaxed)).is_ok_and(|f| f < workers) {
                std::thread::sleep(Duration::from_millis(200));
                let stuck = running.lock().unwrap_or_else(|p| p.into_inner()).iter().find_map(|(seed, at)| {
                    (at.elapsed() > wall_max).then_some(*seed)
                });
                if let Some(seed) = stuck {
                    println!("seed {seed} HUNG: still running after {wall_max:?} of wall time (a task spinning?)");
                    println!("reproduce: RAFTMQ_SIM_SEED={seed} RAFTMQ_SIM_TRACE=live cargo test -p raftmq-raft --test raft t50_sim::");
                    std::process::exit(101);
                }
            }
        });
    });
    let mut results = results.into_inner().unwrap_or_else(|p| p.into_inner());
    results.sort_by_key(|(seed, _, _)| *seed);
    results
}

#[test]
fn t50_simulated_faults_keep_raft_invariants() -> anyhow::Result<()> {
    let seeds: Vec<u64> = match env_u64("RAFTMQ_SIM_SEED") {
        Some(s) => vec![s],
        None => (0..env_u64("RAFTMQ_SIM_SEEDS").unwrap_or(200)).collect(),
    };
    let jobs = jobs();
    println!("simulating {} seeds on {jobs} threads", seeds.len());
    let started = std::time::Instant::now();
    let mut failures = Vec::new();
    let mut total = CrashStats::default();
    let print_trace = seeds.len() == 1 && env_u64("RAFTMQ_SIM_TRACE").is_some_and(|v| v != 0);
    for (seed, result, trace) in sweep(&seeds, jobs) {
        if print_trace {
            trace.iter().for_each(|l| println!("{l}"));
        }
        match result {
            Ok(s) => {
                total.count += s.count;
                total.lost_bytes += s.lost_bytes;
            }
            Err(e) => {
                println!("seed {seed} FAILED: {e:#}");
                for l in trace.iter().skip(trace.len().saturating_sub(20)) {
                    println!("  {l}");
                }
                println!("reproduce: RAFTMQ_SIM_SEED={seed} cargo test -p raftmq-raft --test raft t50_sim::");
                failures.push(seed);
            }
        }
    }
    println!(
        "crashes without flush: {} ({} unsynced bytes cut); {} seeds in {:?}",
        total.count,
        total.lost_bytes,
        seeds.len(),
        started.elapsed()
    );
    if !failures.is_empty() {
        bail!("{} seeds failed: {failures:?}", failures.len());
    }
    Ok(())
}

/// The same seed gives the same run: identical traces, including virtual timestamps and every
/// replica's final log digest, whether the seed runs alone or beside others on another thread.
#[test]
fn t50_same_seed_same_trace() -> anyhow::Result<()> {
    let seeds: Vec<u64> = match env_u64("RAFTMQ_SIM_SAME_SEEDS") {
        Some(n) => (0..n).collect(),
        None => vec![3, 17, 41],
    };
    let first = sweep(&seeds, 1);
    let second = sweep(&seeds, jobs().max(2));
    let mut diverged = Vec::new();
    let (mut acks, mut leaders) = (0, 0);
    for ((seed, r1, t1), (_, r2, t2)) in first.iter().zip(&second) {
        println!("seed {seed}: {} trace lines, result {:?}", t1.len(), r1.as_ref().map_err(|e| e.to_string()));
        if let Some(i) = (0..t1.len().max(t2.len())).find(|i| t1.get(*i) != t2.get(*i)) {
            println!("seed {seed} diverged at trace line {i}:\n  first:  {:?}\n  second: {:?}", t1.get(i), t2.get(i));
            println!(
                "reproduce (run twice, diff the traces): \
                 RAFTMQ_SIM_SEED={seed} RAFTMQ_SIM_TRACE=1 cargo test -p raftmq-raft --test raft t50_sim::t50_simulated"
            );
            diverged.push(*seed);
            continue;
        }
        if r1.is_ok() != r2.is_ok() {
            bail!("seed {seed}: one run passed and the other failed");
        }
        if r1.is_ok() && t1.iter().filter(|l| l.contains(" final: ")).count() != 3 {
            bail!("seed {seed}: no final digest of every replica in its trace");
        }
        acks += t1.iter().filter(|l| l.contains("acknowledged")).count();
        leaders += t1.iter().filter(|l| l.contains("Leader leader")).count();
    }
    if acks == 0 || leaders == 0 {
        bail!("traces too thin to prove anything ({acks} acknowledged proposals, {leaders} leaderships)");
    }
    if !diverged.is_empty() {
        bail!("{} seeds ran differently twice: {diverged:?}", diverged.len());
    }
    Ok(())
}
