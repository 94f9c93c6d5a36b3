//! One run, end to end, and its results folder.
//!
//! ```text
//! check_environment ─▶ netns rmqj-<pid>-<n> (thread enters it) ─▶ runtime
//!   Db::new (configs, SNAT) ─▶ start namesrv + brokers (boot lines) ─▶ create topic
//!   workload ∥ nemesis schedule for --time-limit ─▶ stop workload ─▶ heal everything (rules, SIGCONT, restarts,
//!   membership back to the replica count) ─▶ `members …` of every group
//!   quiet ─▶ [tx producers: wait until every leader's transaction checks settled, then stop them]
//!   ─▶ [delay producers: wait until every leader's delay levels drained]
//!   ─▶ final drain (every queue from 0) ─▶ SIGTERM all ─▶ dumps of each group's final members ─▶ checkers
//! <out>/history.jsonl report.json summary.txt timeline.svg schedule.txt dumps.json nodes/<name>/<name>.log
//! ```
//!
//! Invariants: every fault is healed before the quiet period whatever failed; the results folder is
//! written even when a phase fails (the error goes into summary.txt); the exit verdict is valid only
//! when every checker is.

use std::fmt::Write as _;
use std::path::Path;
use std::path::PathBuf;
use std::time::Duration;

use rand::SeedableRng;
use rand::rngs::StdRng;
use tokio::sync::watch;
use tokio::time::Instant;

use crate::checker::ReplicaDump;
use crate::checker::Report;
use crate::checker::check_all;
use crate::cluster::COMMIT_LOG_SEGMENT_BYTES;
use crate::cluster::Layout;
use crate::db::Db;
use crate::delay;
use crate::dump::dump_replica;
use crate::history::NEMESIS_PROCESS;
use crate::history::Op;
use crate::history::OpF;
use crate::history::OpType;
use crate::history::Recorder;
use crate::nemesis;
use crate::nemesis::NemesisKind;
use crate::nemesis::schedule;
use crate::net;
use crate::net::EnvError;
use crate::net::NetNs;
use crate::orderly;
use crate::transaction;
use crate::workload;
use crate::workload::WorkloadConfig;

/// Boot deadline of the cluster.
pub const CLUSTER_READY_TIMEOUT_MS: u64 = 60_000;
/// Grace between SIGTERM and SIGKILL at the end.
pub const STOP_GRACE_MS: u64 = 15_000;
/// Deadline of the final drain.
pub const DRAIN_TIMEOUT_MS: u64 = 60_000;
/// Time the workload tasks get to finish after being told to stop.
pub const WORKLOAD_STOP_MS: u64 = 10_000;

/// Everything a run is parameterised by.
#[derive(Debug, Clone)]
pub struct RunOptions {
    /// Fault families.
    pub nemeses: Vec<NemesisKind>,
    /// Workload + faults duration.
    pub time_limit: Duration,
    /// Schedule seed.
    pub seed: u64,
    /// Results folder (created).
    pub out: PathBuf,
    /// The `raftmq` binary.
    pub raftmq: PathBuf,
    /// Broker groups (1 or 2).
    pub groups: usize,
    /// NameServers (1 or 2; each isolated alone or all together by the `namesrv` nemesis).
    pub namesrvs: usize,
    /// Replicas per group (3 or 5).
    pub replicas: usize,
    /// Quiet period after healing.
    pub quiet: Duration,
    /// The workload.
    pub workload: WorkloadConfig,
    /// Test-only: brokers acknowledge before fsync (the self-test's unsafe mode).
    pub unsafe_ack_before_fsync: bool,
    /// Test-only: brokers keep queue locks in the leader's memory (the `order` self-test).
    pub unsafe_local_queue_locks: bool,
}

/// Why a run could not produce a verdict.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    /// The environment cannot run the harness (callers skip with this message).
    #[error(transparent)]
    Env(#[from] EnvError),
    /// Something else failed; the results folder holds what was gathered.
    #[error("{0}")]
    Failed(String),
}

/// A finished run.
#[derive(Debug, Clone)]
pub struct RunOutcome {
    /// The checkers' verdict.
    pub report: Report,
    /// The results folder.
    pub out: PathBuf,
}

fn write(path: &Path, text: &str) {
    if let Err(e) = std::fs::write(path, text) {
        tracing::error!(path = %path.display(), error = %e, "cannot write a result file");
    }
}

/// Runs one test: checks the environment, creates and enters the namespace on this thread, runs on a
/// fresh runtime, and deletes the namespace. Blocking; call it outside any runtime.
pub fn run_blocking(opts: &RunOptions) -> Result<RunOutcome, RunError> {
    net::check_environment()?;
    // Node data lives under the results folder: a reused folder would start the cluster on an
    // earlier run's log, and the checkers would see that run's values as duplicates and strangers.
    let reused = std::fs::read_dir(&opts.out).map(|mut entries| entries.next().is_some()).unwrap_or(false);
    if reused {
        return Err(RunError::Failed(format!(
            "the results folder {} is not empty: give each run a new --out",
            opts.out.display()
        )));
    }
    std::fs::create_dir_all(&opts.out).map_err(|e| RunError::Failed(format!("{}: {e}", opts.out.display())))?;
    let ns = NetNs::create(&net::unique_name("rmqj"))?;
    let guard = ns.enter_current_thread()?;
    if opts.nemeses.contains(&NemesisKind::DiskFull) {
        // Before the runtime's threads exist, so they and every node share the namespace.
        crate::disk::enter_private_mount_namespace()?;
    }
    // Worker threads are spawned now, from this thread, so they live in the namespace too.
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|e| RunError::Failed(format!("tokio runtime: {e}")))?;
    let result = runtime.block_on(run_inside(opts, ns));
    runtime.shutdown_timeout(Duration::from_secs(5));
    drop(guard);
    result
}

async fn run_inside(opts: &RunOptions, ns: NetNs) -> Result<RunOutcome, RunError> {
    let out = opts.out.clone();
    let mut layout =
        Layout::new(&out, opts.groups, opts.replicas, opts.unsafe_ack_before_fsync).with_namesrvs(&out, opts.namesrvs);
    layout.unsafe_local_queue_locks = opts.unsafe_local_queue_locks;
    if opts.nemeses.contains(&NemesisKind::DiskFull) {
        layout.node_disk_bytes = Some(crate::disk::NODE_DISK_BYTES);
    }
    let groups: Vec<(String, Vec<String>)> = layout
        .groups()
        .into_iter()
        .map(|g| {
            let names = layout.members(&g).into_iter().map(|n| n.name.clone()).collect();
            (g, names)
        })
        .collect();
    let steps = schedule::generate(&opts.nemeses, &groups, opts.time_limit, opts.seed);
    let mut plan = format!("seed {}\nnemeses {:?}\ntime limit {:?}\n", opts.seed, opts.nemeses, opts.time_limit);
    for s in &steps {
        let _ = writeln!(plan, "{:>8.1}s +{:>4.1}s  {}", s.at.as_secs_f64(), s.hold.as_secs_f64(), s.fault.label());
    }
    write(&out.join("schedule.txt"), &plan);

    let mut db = Db::new(layout, ns, &opts.raftmq).map_err(|e| RunError::Failed(e.to_string()))?;
    let rec = Recorder::create(&out.join("history.jsonl")).map_err(|e| RunError::Failed(e.to_string()))?;
    let phase = phases(opts, &mut db, &rec, &steps).await;
    // Whatever happened, nothing keeps running past here.
    let stopped = db.stop_all(Duration::from_millis(STOP_GRACE_MS)).await;
    let mut dumps: Vec<ReplicaDump> = Vec::new();
    let mut notes: Vec<String> = Vec::new();
    if let Err(e) = &phase {
        notes.push(format!("run error: {e}"));
    }
    if let Err(e) = stopped {
        notes.push(format!("stop error: {e}"));
    }
    let members: Vec<crate::cluster::NodeSpec> =
        db.layout.groups().iter().flat_map(|g| db.members(g).into_iter().cloned().collect::<Vec<_>>()).collect();
    for node in members {
        match dump_replica(&node.group, &node.name, &node.store_dir(), COMMIT_LOG_SEGMENT_BYTES).await {
            Ok(d) => dumps.push(d),
            Err(e) => notes.push(format!("dump of {}: {e}", node.name)),
        }
        notes.extend(crate::stall::notes(&node.name, &node.log_path()));
    }
    if let Err(e) = rec.flush() {
        notes.push(format!("history: {e}"));
    }
    let ops = rec.ops();
    let report = check_all(&ops, &dumps);
    write(&out.join("report.json"), &serde_json::to_string_pretty(&report).unwrap_or_default());
    write(&out.join("dumps.json"), &serde_json::to_string(&dumps).unwrap_or_default());
    let mut summary = report.summary();
    for n in &notes {
        let _ = writeln!(summary, "note: {n}");
    }
    let _ = writeln!(summary, "seed {} ops {} results {}", opts.seed, ops.len(), out.display());
    write(&out.join("summary.txt"), &summary);
    write(&out.join("timeline.svg"), &crate::timeline::render(&ops));
    phase.map_err(RunError::Failed)?;
    Ok(RunOutcome { report, out })
}

/// When a final wait of at most `timeout_ms` gives up: later by the largest skew when the `clock`
/// nemesis ran, since what a skewed clock stored may wait until real time catches up.
fn settle_deadline(opts: &RunOptions, timeout_ms: u64) -> Instant {
    let mut wait = Duration::from_millis(timeout_ms);
    if opts.nemeses.contains(&NemesisKind::Clock) {
        wait += Duration::from_millis(nemesis::CLOCK_SKEW_MAX_MS.unsigned_abs());
    }
    Instant::now() + wait
}

async fn phases(opts: &RunOptions, db: &mut Db, rec: &Recorder, steps: &[schedule::Step]) -> Result<(), String> {
    db.start_all(Duration::from_millis(CLUSTER_READY_TIMEOUT_MS)).await.map_err(|e| e.to_string())?;
    let ready = Instant::now() + Duration::from_millis(CLUSTER_READY_TIMEOUT_MS);
    workload::setup_topic(db, &opts.workload, ready).await?;

    let (stop_tx, stop_rx) = watch::channel(false);
    let mut tasks = workload::spawn(db, &opts.workload, rec, &stop_rx)?;
    delay::spawn_into(&mut tasks, &db.layout.namesrv_addr(), &opts.workload, rec, &stop_rx);
    orderly::spawn_into(&mut tasks, &db.layout.namesrv_addr(), &opts.workload, rec, &stop_rx, opts.seed);
    crate::pop::spawn_into(&mut tasks, &db.layout, &opts.workload, rec, &stop_rx, opts.seed);
    // Transaction producers outlive the workload: they answer checks until the final wait is over.
    let (tx_done_tx, tx_done_rx) = watch::channel(false);
    let mut tx_tasks = transaction::spawn(db, &opts.workload, rec, &stop_rx, &tx_done_rx);
    let start = Instant::now();
    let mut rng = StdRng::seed_from_u64(opts.seed ^ 0x006e_656d_6573_6973);
    let mut fault_error = None;
    for step in steps {
        tokio::time::sleep_until(start + step.at).await;
        let label = step.fault.label();
        rec.record(Op::new(OpType::Invoke, OpF::Nemesis, NEMESIS_PROCESS).value(&label));
        let applied = match nemesis::apply(db, &step.fault, &mut rng, rec).await {
            Ok((applied, desc)) => {
                tracing::info!(fault = %label, %desc, "fault applied");
                Some(applied)
            }
            Err(e) => {
                tracing::warn!(fault = %label, error = %e, "fault failed");
                None
            }
        };
        tokio::time::sleep(step.hold).await;
        if let Some(applied) = applied
            && let Err(e) = nemesis::heal(db, &applied, rec).await
        {
            fault_error.get_or_insert_with(|| format!("healing {label}: {e}"));
        }
        rec.record(Op::new(OpType::Ok, OpF::Nemesis, NEMESIS_PROCESS).value(&label));
    }
    tokio::time::sleep_until(start + opts.time_limit).await;
    stop_tx.send_replace(true);
    let joined = tokio::time::timeout(Duration::from_millis(WORKLOAD_STOP_MS), async {
        while tasks.join_next().await.is_some() {}
    })
    .await;
    if joined.is_err() {
        tasks.abort_all();
    }

    // Final heal: flush every rule, resume and restart everything.
    rec.record(Op::new(OpType::Invoke, OpF::Nemesis, NEMESIS_PROCESS).value("final heal + quiet"));
    db.firewall().heal().map_err(|e| e.to_string())?;
    db.restore_all(Duration::from_millis(CLUSTER_READY_TIMEOUT_MS)).await.map_err(|e| e.to_string())?;
    for group in db.layout.groups() {
        if opts.nemeses.contains(&NemesisKind::Membership) {
            // A change the schedule's heal could not finish must not leave the final checks a group
            // of the wrong size, a learner, or a removed node still running.
            let deadline = Instant::now() + Duration::from_millis(nemesis::membership::MEMBERSHIP_RECONCILE_MS);
            let desc = nemesis::membership::reconcile(db, rec, &group, deadline).await.map_err(|e| e.to_string())?;
            tracing::info!(%group, %desc, "final membership");
        } else {
            nemesis::membership::record_members(db, rec, &group);
        }
    }
    tokio::time::sleep(opts.quiet).await;
    rec.record(Op::new(OpType::Ok, OpF::Nemesis, NEMESIS_PROCESS).value("final heal + quiet"));
    if opts.workload.tx_producers > 0 {
        // Unknown halves resolve only through checks; a timeout is recorded and the checkers judge.
        // A check copy stored under a clock skewed ahead looks young until real time catches up, and
        // the round stops at the first young half, so `clock` may hold the checks back by its skew.
        transaction::settle(db, rec, settle_deadline(opts, transaction::TX_SETTLE_TIMEOUT_MS)).await;
    }
    if opts.workload.delay_producers > 0 {
        // A delay stored under a clock skewed ahead is corrected to at most its level's delay
        // (`correctDeliverTimestamp`), but a timer's next hop is timed by the clock that stored
        // it, so `clock` may hold the levels back by its skew.
        delay::settle(db, rec, settle_deadline(opts, delay::DELAY_SETTLE_TIMEOUT_MS)).await;
    }
    tx_done_tx.send_replace(true);
    let joined = tokio::time::timeout(Duration::from_millis(WORKLOAD_STOP_MS), async {
        while tx_tasks.join_next().await.is_some() {}
    })
    .await;
    if joined.is_err() {
        tx_tasks.abort_all();
    }
    if opts.workload.pop_consumers > 0 {
        // Messages left in flight by the stopped consumers come back after their invisible time.
        let deadline = settle_deadline(opts, crate::pop::POP_SETTLE_TIMEOUT_MS);
        crate::pop::settle(&db.layout, &opts.workload.topic, rec, deadline).await;
    }
    workload::final_drain(db, &opts.workload, rec, Instant::now() + Duration::from_millis(DRAIN_TIMEOUT_MS)).await?;
    match fault_error {
        Some(e) => Err(e),
        None => Ok(()),
    }
}
