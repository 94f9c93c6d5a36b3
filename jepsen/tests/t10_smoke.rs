//! CI smoke test: four short schedules and the self-test against real `raftmq` processes, two at a
//! time (each its own cluster in its own network namespace); the `kill` schedule also runs two
//! transaction producers (commit, rollback, check-resolved halves) and two POP consumers (judged by
//! the `pop` checker).
//!
//! Skips, printing why, when the machine cannot run the harness (not root, no `ip netns`, no
//! iptables), when the `raftmq` binary is missing (build it first: `cargo build -p raftmq`), when the
//! broker does not accept the generated config, or when `RAFTMQ_JEPSEN_SMOKE=0`. The self-test also
//! needs the broker's test-only unsafe key; without it that part is skipped with a message.
//!
//! Each run gets a fresh results folder: node data lives there, and a reused folder once started the
//! cluster on an earlier run's log (same seed, same value names), which the checkers rightly reported
//! as duplicates and unexpected reads. The default folder (under the temp dir) is removed when every
//! schedule passed and kept, with its path in the failure message, when one did not: about 3 GB of
//! node data per run once piled up there and filled a CI machine's disk.

use std::path::Path;
use std::path::PathBuf;
use std::process::Command;
use std::sync::Mutex;
use std::time::Duration;

use raftmq_jepsen::cluster::Layout;
use raftmq_jepsen::cluster::UNSAFE_ACK_KEY;
use raftmq_jepsen::nemesis::NemesisKind;
use raftmq_jepsen::net;
use raftmq_jepsen::run::RunOptions;
use raftmq_jepsen::run::run_blocking;
use raftmq_jepsen::workload::WorkloadConfig;

fn raftmq_bin() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("RAFTMQ_BIN") {
        return Some(PathBuf::from(p));
    }
    // target/<profile>/deps/<this test> → target/<profile>/raftmq
    let exe = std::env::current_exe().ok()?;
    let bin = exe.parent()?.parent()?.join("raftmq");
    bin.exists().then_some(bin)
}

/// Whether `raftmq broker -c <generated> -p` accepts the harness's config.
fn broker_accepts(bin: &Path, unsafe_ack: bool) -> Result<(), String> {
    let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
    let layout = Layout::new(dir.path(), 1, 3, unsafe_ack);
    let node = &layout.nodes[0];
    std::fs::create_dir_all(&node.dir).map_err(|e| e.to_string())?;
    std::fs::write(node.config_path(), layout.broker_toml(node)).map_err(|e| e.to_string())?;
    let out = Command::new(bin)
        .args(["broker", "-c", &node.config_path().to_string_lossy(), "-p"])
        .output()
        .map_err(|e| e.to_string())?;
    if out.status.success() { Ok(()) } else { Err(String::from_utf8_lossy(&out.stderr).trim().to_owned()) }
}

fn skip(why: &str) {
    raftmq_common::test_skip::announce_skip("raftmq-jepsen smoke", why);
}

#[test]
fn generated_broker_config_is_accepted_by_the_broker_binary() {
    let Some(bin) = raftmq_bin() else { return skip("no raftmq binary (cargo build -p raftmq, or set RAFTMQ_BIN)") };
    if let Err(e) = broker_accepts(&bin, false) {
        panic!("raftmq broker -p rejects the harness's broker.toml: {e}");
    }
    match broker_accepts(&bin, true) {
        Ok(()) => println!("the broker accepts the test-only key {UNSAFE_ACK_KEY}"),
        Err(e) => println!("the broker does not accept {UNSAFE_ACK_KEY} yet (self-test will skip): {e}"),
    }
}

fn options(name: &str, nemesis: &str, seed: u64, out: &Path, bin: &Path) -> RunOptions {
    RunOptions {
        nemeses: NemesisKind::parse_list(nemesis).expect("known nemeses"),
        time_limit: Duration::from_secs(30),
        seed,
        out: out.join(name),
        raftmq: bin.to_owned(),
        groups: 1,
        replicas: 3,
        namesrvs: 1,
        quiet: Duration::from_secs(10),
        workload: WorkloadConfig {
            topic: "jepsen".into(),
            queues: 2,
            sync_producers: 2,
            async_producers: 1,
            async_window: 4,
            tx_producers: 0,
            delay_producers: 0,
            consumers: 2,
            orderly_consumers: 0,
            pop_consumers: 0,
            group: "jepsen_consumers".into(),
        },
        unsafe_ack_before_fsync: false,
        unsafe_local_queue_locks: false,
    }
}

/// One run of the smoke: its nemeses and the clients the workload adds to the base of `options`.
struct Schedule {
    name: &'static str,
    nemesis: &'static str,
    tx_producers: usize,
    delay_producers: usize,
    orderly_consumers: usize,
    pop_consumers: usize,
    namesrvs: usize,
    /// Unsafe acks (before fsync) and power loss: the checkers must find loss.
    self_test: bool,
}

/// Runs at once. Each run is a cluster of its own in a network namespace of its own, and most of a
/// run is waiting (its 30 s schedule, 10 s quiet), so three overlap well on CI's 2 cores (the five
/// runs took 107 s against 145 s two at a time; the soak runs four at once).
const SMOKE_PARALLEL_RUNS: usize = 3;

#[test]
fn smoke_schedules_pass_and_the_self_test_finds_loss() {
    if std::env::var("RAFTMQ_JEPSEN_SMOKE").is_ok_and(|v| v == "0") {
        return skip("RAFTMQ_JEPSEN_SMOKE=0");
    }
    if let Err(e) = net::check_environment() {
        return skip(&e.to_string());
    }
    let Some(bin) = raftmq_bin() else { return skip("no raftmq binary (cargo build -p raftmq, or set RAFTMQ_BIN)") };
    if let Err(e) = broker_accepts(&bin, false) {
        return skip(&format!("the broker binary does not accept the harness config yet: {e}"));
    }
    let seed = std::env::var("RAFTMQ_JEPSEN_SEED").ok().and_then(|s| s.parse().ok()).unwrap_or(20_240_601u64);
    println!("raftmq-jepsen smoke: seed {seed}");
    let out = std::env::var_os("RAFTMQ_JEPSEN_OUT")
        .map_or_else(|| std::env::temp_dir().join(format!("rmqj-smoke-{seed}-{}", std::process::id())), PathBuf::from);
    if out.exists() {
        // Only our own per-process default folder can be here; a user-given one is kept and refused.
        if std::env::var_os("RAFTMQ_JEPSEN_OUT").is_none() {
            std::fs::remove_dir_all(&out).expect("remove a stale smoke folder");
        }
    }
    // Transactions ride the kill schedule: leaders die with halves unknown, and the new leader's
    // checks must commit and roll them back as the producers answer. Delayed and timer messages
    // ride lose-unfsynced: leaders die with messages waiting in the levels and between hops.
    // Orderly consumers ride partition: isolated leaders, and queues moving between consumers.
    // Pauses run with two NameServers, one or both cut at times: clients go on with the one left.
    // POP consumers ride kill too: leaders die with messages in flight and acks on the way.
    let base = Schedule {
        name: "",
        nemesis: "",
        tx_producers: 0,
        delay_producers: 0,
        orderly_consumers: 0,
        pop_consumers: 0,
        namesrvs: 1,
        self_test: false,
    };
    let mut schedules = vec![
        Schedule { name: "partition", nemesis: "partition", orderly_consumers: 2, ..base },
        Schedule { name: "kill", nemesis: "kill", tx_producers: 2, pop_consumers: 2, ..base },
        Schedule { name: "pause", nemesis: "pause,namesrv", namesrvs: 2, ..base },
        Schedule { name: "lose-unfsynced", nemesis: "lose-unfsynced,kill", delay_producers: 1, ..base },
    ];
    match broker_accepts(&bin, true) {
        Ok(()) => schedules.push(Schedule { name: "self-test", nemesis: "power-loss", self_test: true, ..base }),
        Err(e) => skip(&format!("self-test: the broker has no test-only {UNSAFE_ACK_KEY} yet: {e}")),
    }
    let next = Mutex::new(schedules.iter());
    let failures = Mutex::new(Vec::new());
    std::thread::scope(|scope| {
        for _ in 0..SMOKE_PARALLEL_RUNS {
            scope.spawn(|| {
                loop {
                    let Some(schedule) = next.lock().unwrap_or_else(|p| p.into_inner()).next() else { break };
                    let started = std::time::Instant::now();
                    let verdict = run_schedule(schedule, seed, &out, &bin);
                    let took_s = started.elapsed().as_secs();
                    let verdict_word = if verdict.is_ok() { "passed" } else { "FAILED" };
                    println!("{} (seed {seed}): {verdict_word} in {took_s} s", schedule.name);
                    if let Err(e) = verdict {
                        failures.lock().unwrap_or_else(|p| p.into_inner()).push(e);
                    }
                }
            });
        }
    });
    let failures = failures.into_inner().unwrap_or_else(|p| p.into_inner());
    assert!(
        failures.is_empty(),
        "{} of {} smoke runs failed:\n{}",
        failures.len(),
        schedules.len(),
        failures.join("\n")
    );
    remove_default_folder(&out);
}

/// One schedule, judged: `Err` holds what failed and where its results are.
fn run_schedule(s: &Schedule, seed: u64, out: &Path, bin: &Path) -> Result<(), String> {
    let name = s.name;
    let mut opts = options(name, s.nemesis, seed, out, bin);
    opts.namesrvs = s.namesrvs;
    opts.unsafe_ack_before_fsync = s.self_test;
    opts.workload.tx_producers = s.tx_producers;
    opts.workload.delay_producers = s.delay_producers;
    opts.workload.orderly_consumers = s.orderly_consumers;
    opts.workload.pop_consumers = s.pop_consumers;
    let outcome = run_blocking(&opts)
        .map_err(|e| format!("{name} (seed {seed}): run failed: {e}; see {}", out.join(name).display()))?;
    let report = &outcome.report;
    let fail = |why: &str| Err(format!("{name} (seed {seed}): {why}:\n{}", report.summary()));
    if s.self_test {
        // Valid would mean the checkers cannot see loss: unsafe acks and power loss must lose messages.
        let lost = report.result("lost").map_or(0, |r| r.get("lost"));
        return if lost > 0 { Ok(()) } else { fail("unsafe acks + power loss must lose messages") };
    }
    if !report.valid {
        return fail("not valid");
    }
    // Valid alone could mean the clients a schedule adds never did anything.
    if s.delay_producers > 0 && report.result("lost").map_or(0, |r| r.get("delay_acked")) == 0 {
        return fail("no delayed send was acknowledged");
    }
    if s.orderly_consumers > 0 && report.result("order").map_or(0, |r| r.get("processed")) == 0 {
        return fail("no message processed in order");
    }
    if s.pop_consumers > 0 && report.result("pop").map_or(0, |r| r.get("acks")) == 0 {
        return fail("no message popped and acked");
    }
    Ok(())
}

/// Removes the results of a passed run unless the user named the folder (`RAFTMQ_JEPSEN_OUT`).
fn remove_default_folder(out: &Path) {
    if std::env::var_os("RAFTMQ_JEPSEN_OUT").is_none()
        && let Err(e) = std::fs::remove_dir_all(out)
    {
        println!("could not remove the smoke folder {}: {e}", out.display());
    }
}
