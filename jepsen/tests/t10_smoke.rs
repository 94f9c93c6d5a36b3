//! CI smoke test: four short schedules and the self-test against real `raftmq` processes; the
//! `kill` schedule also runs two transaction producers (commit, rollback, check-resolved halves)
//! and two POP consumers (judged by the `pop` checker).
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
    println!("SKIPPED raftmq-jepsen smoke: {why}");
    eprintln!("SKIPPED raftmq-jepsen smoke: {why}");
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
    for (name, nemesis, tx_producers, delay_producers, orderly_consumers, pop_consumers, namesrvs) in [
        ("partition", "partition", 0, 0, 2, 0, 1),
        ("kill", "kill", 2, 0, 0, 2, 1),
        ("pause", "pause,namesrv", 0, 0, 0, 0, 2),
        ("lose-unfsynced", "lose-unfsynced,kill", 0, 1, 0, 0, 1),
    ] {
        let mut opts = options(name, nemesis, seed, &out, &bin);
        opts.namesrvs = namesrvs;
        opts.workload.tx_producers = tx_producers;
        opts.workload.delay_producers = delay_producers;
        opts.workload.orderly_consumers = orderly_consumers;
        opts.workload.pop_consumers = pop_consumers;
        let outcome = run_blocking(&opts)
            .unwrap_or_else(|e| panic!("{name} (seed {seed}): run failed: {e}; see {}", out.join(name).display()));
        assert!(outcome.report.valid, "{name} (seed {seed}):\n{}", outcome.report.summary());
        if delay_producers > 0 {
            // Valid alone could mean no delayed value was ever acknowledged.
            let acked = outcome.report.result("lost").map_or(0, |r| r.get("delay_acked"));
            assert!(acked > 0, "{name} (seed {seed}): no delayed send was acknowledged:\n{}", outcome.report.summary());
        }
        if orderly_consumers > 0 {
            // Valid alone could mean no orderly consumer ever processed a message.
            let processed = outcome.report.result("order").map_or(0, |r| r.get("processed"));
            assert!(
                processed > 0,
                "{name} (seed {seed}): no message processed in order:\n{}",
                outcome.report.summary()
            );
        }
        if pop_consumers > 0 {
            // Valid alone could mean no POP consumer ever acked a message.
            let acks = outcome.report.result("pop").map_or(0, |r| r.get("acks"));
            assert!(acks > 0, "{name} (seed {seed}): no message popped and acked:\n{}", outcome.report.summary());
        }
    }
    if let Err(e) = broker_accepts(&bin, true) {
        remove_default_folder(&out);
        return skip(&format!("self-test: the broker has no test-only {UNSAFE_ACK_KEY} yet: {e}"));
    }
    let mut unsafe_opts = options("self-test", "power-loss", seed, &out, &bin);
    unsafe_opts.unsafe_ack_before_fsync = true;
    let outcome = run_blocking(&unsafe_opts).unwrap_or_else(|e| panic!("self-test (seed {seed}): run failed: {e}"));
    let lost = outcome.report.result("lost").map_or(0, |r| r.get("lost"));
    assert!(
        lost > 0,
        "self-test (seed {seed}): unsafe acks + power loss must lose messages:\n{}",
        outcome.report.summary()
    );
    remove_default_folder(&out);
}

/// Removes the results of a passed run unless the user named the folder (`RAFTMQ_JEPSEN_OUT`).
fn remove_default_folder(out: &Path) {
    if std::env::var_os("RAFTMQ_JEPSEN_OUT").is_none()
        && let Err(e) = std::fs::remove_dir_all(out)
    {
        println!("could not remove the smoke folder {}: {e}", out.display());
    }
}
