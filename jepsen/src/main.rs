//! `raftmq-jepsen`: runs real `raftmq` binaries in a network namespace under a fault schedule, records
//! a history, checks it, and writes a results folder. Exit 0 only when every checker is valid;
//! 1 = a checker failed; 2 = this environment cannot run the harness (not root, no `ip netns`, no
//! iptables); 3 = the run itself failed (see the results folder).
//!
//! `--recheck DIR` re-runs the checkers and the timeline on a finished run's folder, without root.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::Parser;
use raftmq_jepsen::checker::ReplicaDump;
use raftmq_jepsen::checker::check_all;
use raftmq_jepsen::history::read_history;
use raftmq_jepsen::nemesis::NemesisKind;
use raftmq_jepsen::run::RunError;
use raftmq_jepsen::run::RunOptions;
use raftmq_jepsen::run::run_blocking;
use raftmq_jepsen::workload::WorkloadConfig;

/// Fault-injection tests of raftmq with real processes (Jepsen-style).
#[derive(Debug, Parser)]
#[command(name = "raftmq-jepsen", version, about)]
struct Args {
    /// Faults, comma separated: partition, kill, pause, lose-unfsynced, power-loss, namesrv, clock,
    /// membership, wipe, corrupt, disk-full, fd-exhaustion.
    #[arg(long, default_value = "partition,kill,pause,lose-unfsynced")]
    nemesis: String,
    /// Seconds of workload under faults.
    #[arg(long = "time-limit", default_value_t = 60)]
    time_limit: u64,
    /// Schedule seed (random and printed when absent).
    #[arg(long)]
    seed: Option<u64>,
    /// Results folder (default `jepsen-results/<seed>`).
    #[arg(long)]
    out: Option<PathBuf>,
    /// The `raftmq` binary (default: next to this binary).
    #[arg(long, env = "RAFTMQ_BIN")]
    raftmq: Option<PathBuf>,
    /// Broker groups.
    #[arg(long, default_value_t = 1)]
    groups: usize,
    /// Replicas per group.
    #[arg(long, default_value_t = 3)]
    replicas: usize,
    /// NameServers (every broker registers with each; clients get all of them).
    #[arg(long, default_value_t = 1)]
    namesrvs: usize,
    /// Seconds of quiet after the final heal, before the drain.
    #[arg(long, default_value_t = 20)]
    quiet: u64,
    /// Queues per group.
    #[arg(long, default_value_t = 4)]
    queues: i32,
    /// Producers sending one message at a time.
    #[arg(long = "sync-producers", default_value_t = 2)]
    sync_producers: usize,
    /// Producers with a window of async sends.
    #[arg(long = "async-producers", default_value_t = 1)]
    async_producers: usize,
    /// Transaction producers (commit, rollback and check-resolved transactions; 0 = none).
    #[arg(long = "tx-producers", default_value_t = 0)]
    tx_producers: usize,
    /// Delay producers (delay levels 1 and 2, timers of 1.5 s and 12.3 s; 0 = none).
    #[arg(long = "delay-producers", default_value_t = 0)]
    delay_producers: usize,
    /// Consumers in the consumer group.
    #[arg(long, default_value_t = 2)]
    consumers: usize,
    /// Orderly push consumers, restarted every 6–15 s (the `order` checker; 0 = none).
    #[arg(long = "orderly-consumers", default_value_t = 0)]
    orderly_consumers: usize,
    /// POP consumers: pop, ack most, let some invisible times expire (the `pop` checker; 0 = none).
    #[arg(long = "pop-consumers", default_value_t = 0)]
    pop_consumers: usize,
    /// Runs, each with the next seed, each in `<out>/<i>`.
    #[arg(long = "test-count", default_value_t = 1)]
    test_count: u32,
    /// TEST ONLY: brokers acknowledge before fsync (the self-test's deliberately unsafe mode).
    #[arg(long = "unsafe-ack-before-fsync")]
    unsafe_ack_before_fsync: bool,
    /// TEST ONLY: brokers keep queue locks in the leader's memory, unreplicated (the `order`
    /// self-test: RocketMQ's master behaviour, which breaks orderly consumption across failover).
    #[arg(long = "unsafe-local-queue-locks")]
    unsafe_local_queue_locks: bool,
    /// Re-check a finished run's folder (history.jsonl, dumps.json) and exit.
    #[arg(long)]
    recheck: Option<PathBuf>,
}

fn recheck(dir: &std::path::Path) -> ExitCode {
    let ops = match read_history(&dir.join("history.jsonl")) {
        Ok(ops) => ops,
        Err(e) => {
            eprintln!("raftmq-jepsen: {e}");
            return ExitCode::from(3);
        }
    };
    let dumps: Vec<ReplicaDump> = std::fs::read_to_string(dir.join("dumps.json"))
        .ok()
        .and_then(|t| serde_json::from_str(&t).ok())
        .unwrap_or_default();
    let report = check_all(&ops, &dumps);
    print!("{}", report.summary());
    if report.valid { ExitCode::SUCCESS } else { ExitCode::from(1) }
}

fn default_raftmq() -> PathBuf {
    std::env::current_exe().ok().and_then(|p| p.parent().map(|d| d.join("raftmq"))).unwrap_or_else(|| "raftmq".into())
}

fn main() -> ExitCode {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "info,raftmq_client=warn".into()),
        )
        .with_writer(std::io::stderr)
        .init();
    let args = Args::parse();
    if let Some(dir) = &args.recheck {
        return recheck(dir);
    }
    let nemeses = match NemesisKind::parse_list(&args.nemesis) {
        Ok(n) => n,
        Err(e) => {
            eprintln!("raftmq-jepsen: --nemesis: {e}");
            return ExitCode::from(3);
        }
    };
    let seed = args.seed.unwrap_or_else(|| {
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos() as u64)
    });
    let raftmq = args.raftmq.clone().unwrap_or_else(default_raftmq);
    let base = args.out.clone().unwrap_or_else(|| PathBuf::from("jepsen-results").join(seed.to_string()));
    let mut all_valid = true;
    for i in 0..args.test_count.max(1) {
        let seed_i = seed.wrapping_add(u64::from(i));
        let out = if args.test_count > 1 { base.join(i.to_string()) } else { base.clone() };
        eprintln!("raftmq-jepsen: seed {seed_i} nemesis {} out {}", args.nemesis, out.display());
        let opts = RunOptions {
            nemeses: nemeses.clone(),
            time_limit: Duration::from_secs(args.time_limit),
            seed: seed_i,
            out,
            raftmq: raftmq.clone(),
            groups: args.groups,
            replicas: args.replicas,
            namesrvs: args.namesrvs,
            quiet: Duration::from_secs(args.quiet),
            workload: WorkloadConfig {
                topic: "jepsen".into(),
                queues: args.queues,
                sync_producers: args.sync_producers,
                async_producers: args.async_producers,
                async_window: 4,
                tx_producers: args.tx_producers,
                delay_producers: args.delay_producers,
                consumers: args.consumers,
                orderly_consumers: args.orderly_consumers,
                pop_consumers: args.pop_consumers,
                group: "jepsen_consumers".into(),
            },
            unsafe_ack_before_fsync: args.unsafe_ack_before_fsync,
            unsafe_local_queue_locks: args.unsafe_local_queue_locks,
        };
        match run_blocking(&opts) {
            Ok(outcome) => {
                print!("{}", outcome.report.summary());
                println!("seed {seed_i}; results in {}", outcome.out.display());
                all_valid &= outcome.report.valid;
            }
            Err(RunError::Env(e)) => {
                eprintln!("raftmq-jepsen: cannot run here: {e}");
                return ExitCode::from(2);
            }
            Err(e) => {
                eprintln!("raftmq-jepsen: seed {seed_i}: run failed: {e}");
                return ExitCode::from(3);
            }
        }
    }
    if all_valid { ExitCode::SUCCESS } else { ExitCode::from(1) }
}
