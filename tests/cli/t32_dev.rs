//! Issue 7 acceptance, as a new user meets raftmq: the real binary. `raftmq dev` starts a NameServer
//! and a 3-replica group; `admin updateTopic`, `send`, `consume` and `bench produce` run against it;
//! SIGTERM stops it with exit 0; a restart on the same `--data` still serves every message, and the
//! first group's committed offsets.
//!
//! Ports: the NameServer takes port 0 (its address is read from the banner); the brokers' remoting,
//! Raft and admin ports are fixed per run (Raft peers name each other), chosen free at runtime as
//! three ports `base, base+step, base+2·step` outside the ephemeral range (`tests/ports`), and
//! reused by the restart.

use crate::harness;

use std::path::Path;
use std::process::ExitStatus;
use std::process::Stdio;
use std::sync::Arc;
use std::sync::Mutex;
use std::time::Duration;

use anyhow::Context;
use anyhow::Result;
use anyhow::bail;
use anyhow::ensure;
use tokio::io::AsyncBufReadExt;
use tokio::io::BufReader;
use tokio::process::Child;
use tokio::sync::watch;
use tokio::time::Instant;

use harness::ports::free_ports_spaced;

/// Safety bound of a cluster start, a stop and of each client command.
const WAIT: Duration = Duration::from_secs(60);
const TOPIC: &str = "T40_DEV";
const BENCH_COUNT: usize = 10_000;

/// Base ports of one dev cluster.
#[derive(Debug, Clone, Copy)]
struct Ports {
    broker: u16,
    raft: u16,
    admin: u16,
}

impl Ports {
    fn choose() -> Result<Ports> {
        // Three replicas each: `raftmq dev` numbers the broker ports 10 apart, the others 1 apart.
        Ok(Ports { broker: free_ports_spaced(10, 3), raft: free_ports_spaced(1, 3), admin: free_ports_spaced(1, 3) })
    }
}

/// A running `raftmq dev`: its stdout lines so far (read continuously, so the pipe never fills)
/// and the NameServer address from its banner. Killed if dropped while running.
struct Dev {
    child: Child,
    lines: Arc<Mutex<Vec<String>>>,
    changed: watch::Receiver<usize>,
    namesrv: String,
    log: std::path::PathBuf,
}

impl Dev {
    async fn start(data: &Path, ports: Ports, log: &Path) -> Result<Dev> {
        let mut child = tokio::process::Command::new(env!("CARGO_BIN_EXE_raftmq"))
            .arg("dev")
            .arg("--data")
            .arg(data)
            .args(["--namesrv-port", "0"])
            .args(["--broker-port", &ports.broker.to_string()])
            .args(["--raft-port", &ports.raft.to_string()])
            .args(["--admin-port", &ports.admin.to_string()])
            // Ephemeral gRPC ports (the banner prints them): parallel tests never collide.
            .args(["--grpc-port", "0"])
            .env("RUST_LOG", "info")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(std::fs::File::create(log)?)
            .kill_on_drop(true)
            .spawn()?;
        let stdout = child.stdout.take().context("stdout")?;
        let lines: Arc<Mutex<Vec<String>>> = Arc::default();
        let (tx, changed) = watch::channel(0);
        let sink = lines.clone();
        tokio::spawn(async move {
            let mut reader = BufReader::new(stdout).lines();
            while let Ok(Some(line)) = reader.next_line().await {
                let n = {
                    let mut lines = sink.lock().unwrap_or_else(|p| p.into_inner());
                    lines.push(line);
                    lines.len()
                };
                tx.send_replace(n);
            }
        });
        let mut dev = Dev { child, lines, changed, namesrv: String::new(), log: log.to_owned() };
        dev.wait_line("the banner", |l| l.starts_with("raftmq dev cluster is up")).await?;
        let line = dev.wait_line("the NameServer line", |l| l.trim_start().starts_with("NameServer")).await?;
        dev.namesrv = line.split_whitespace().nth(1).context("NameServer address")?.to_owned();
        // Every replica's line names its gRPC MessagingService (RocketMQ 5 clients).
        dev.wait_line("a replica line with its gRPC port", |l| l.contains("  grpc 127.0.0.1:")).await?;
        Ok(dev)
    }

    /// The first stdout line matching `want`, waiting for it (bounded; fails if the process exits).
    async fn wait_line(&mut self, what: &str, want: impl Fn(&str) -> bool) -> Result<String> {
        let deadline = Instant::now() + WAIT;
        loop {
            self.changed.borrow_and_update();
            let found = self.lines.lock().unwrap_or_else(|p| p.into_inner()).iter().find(|l| want(l)).cloned();
            if let Some(line) = found {
                return Ok(line);
            }
            match tokio::time::timeout_at(deadline, self.changed.changed()).await {
                Ok(Ok(())) => {}
                // The reader ended: stdout closed, so the process is gone.
                Ok(Err(_)) => bail!("raftmq dev exited before {what}\n{}", self.diagnostics()),
                Err(_) => bail!("no {what} from raftmq dev within {WAIT:?}\n{}", self.diagnostics()),
            }
        }
    }

    fn diagnostics(&self) -> String {
        let stdout = self.lines.lock().unwrap_or_else(|p| p.into_inner()).join("\n");
        let log = std::fs::read_to_string(&self.log).unwrap_or_default();
        // Backtrace frames would push the error itself out of the tail.
        let lines: Vec<&str> = log
            .lines()
            .filter(|l| {
                !l.trim_start().starts_with("at ")
                    && l.trim_start().split(':').next().is_none_or(|n| n.trim().parse::<u32>().is_err())
            })
            .collect();
        let tail = lines.get(lines.len().saturating_sub(40)..).unwrap_or_default();
        format!("--- stdout\n{stdout}\n--- stderr (tail, backtraces left out)\n{}", tail.join("\n"))
    }

    /// SIGTERM, then its exit status (bounded).
    async fn terminate(mut self) -> Result<ExitStatus> {
        let pid = self.child.id().context("dev already exited")?;
        let pid = nix::unistd::Pid::from_raw(i32::try_from(pid)?);
        nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM)?;
        match tokio::time::timeout(WAIT, self.child.wait()).await {
            Ok(status) => Ok(status?),
            Err(_) => bail!("raftmq dev ignored SIGTERM for {WAIT:?}\n{}", self.diagnostics()),
        }
    }
}

/// A finished client command.
struct Run {
    success: bool,
    stdout: String,
    stderr: String,
}

impl Run {
    fn ok(self, what: &str) -> Result<Run> {
        ensure!(self.success, "{what} failed\n--- stdout\n{}\n--- stderr\n{}", self.stdout, self.stderr);
        Ok(self)
    }
}

/// Runs `raftmq <args>` to completion (bounded), logs at warn.
async fn raftmq(args: &[&str]) -> Result<Run> {
    let child = tokio::process::Command::new(env!("CARGO_BIN_EXE_raftmq"))
        .args(args)
        .env("RUST_LOG", "warn")
        .env_remove("NAMESRV_ADDR")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()?;
    let out = tokio::time::timeout(WAIT, child.wait_with_output())
        .await
        .with_context(|| format!("raftmq {args:?} ran longer than {WAIT:?}"))??;
    Ok(Run {
        success: out.status.success(),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    })
}

/// `admin updateTopic`, repeated until the group has elected a leader and registered it (the
/// banner is printed once the replicas run, not once they have a leader).
async fn update_topic(ns: &str) -> Result<()> {
    let deadline = Instant::now() + WAIT;
    loop {
        let run =
            raftmq(&["admin", "updateTopic", "-n", ns, "-c", "DefaultCluster", "-t", TOPIC, "-r", "4", "-w", "4"])
                .await?;
        if run.success {
            ensure!(run.stdout.contains("success"), "updateTopic printed {}", run.stdout);
            return Ok(());
        }
        ensure!(Instant::now() < deadline, "updateTopic kept failing\n{}\n{}", run.stdout, run.stderr);
        // No leader yet: the election is under way; ask again shortly.
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// `consume` lines: `(tag, body)` of each.
fn consumed(run: &Run) -> Vec<(String, String)> {
    let field = |line: &str, key: &str| {
        line.split(' ').find_map(|f| f.strip_prefix(key)).map(str::to_owned).unwrap_or_default()
    };
    run.stdout
        .lines()
        .filter(|l| l.starts_with("queue="))
        .map(|l| (field(l, "tag="), l.split_once(" body=").map(|(_, b)| b.to_owned()).unwrap_or_default()))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dev_cluster_serves_the_cli_and_keeps_data_across_a_restart() -> Result<()> {
    let dir = tempfile::tempdir()?;
    let data = dir.path().join("data");
    let ports = Ports::choose()?;
    let started = std::time::Instant::now();
    let dev = Dev::start(&data, ports, &dir.path().join("dev-1.log")).await?;
    let ns = dev.namesrv.clone();
    eprintln!("t45: dev up at {ns} in {:?} ({ports:?})", started.elapsed());

    update_topic(&ns).await?;
    let send = raftmq(&["send", "-n", &ns, "-t", TOPIC, "--tag", "TagA", "--count", "5", "hello"]).await?.ok("send")?;
    let statuses: Vec<&str> = send.stdout.lines().map(|l| l.split(' ').next().unwrap_or_default()).collect();
    assert_eq!(statuses, ["SEND_OK"; 5], "{}", send.stdout);

    let consume = raftmq(&["consume", "-n", &ns, "-t", TOPIC, "-g", "t45_group", "--from-first", "--count", "5"])
        .await?
        .ok("consume")?;
    assert_eq!(consumed(&consume), vec![("TagA".to_owned(), "hello".to_owned()); 5], "{}", consume.stdout);

    let bench = raftmq(&["bench", "produce", "-n", &ns, "-t", TOPIC, "--count", &BENCH_COUNT.to_string(), "--json"])
        .await?
        .ok("bench produce")?;
    let summary: serde_json::Value = serde_json::from_str(bench.stdout.lines().last().unwrap_or_default())
        .with_context(|| format!("bench --json printed {}", bench.stdout))?;
    assert_eq!(summary["sent"].as_u64(), Some(BENCH_COUNT as u64), "{summary}");
    assert_eq!(summary["failed"].as_u64(), Some(0), "{summary}");
    eprintln!("t45: bench {summary}");

    let status = dev.terminate().await?;
    assert!(status.success(), "raftmq dev exited with {status} on SIGTERM");
    eprintln!("t45: first run done in {:?}", started.elapsed());

    // Restart on the same data: a new group reads everything from the first message; the first
    // group resumes after the 5 messages it committed.
    let dev = Dev::start(&data, ports, &dir.path().join("dev-2.log")).await?;
    let ns = dev.namesrv.clone();
    eprintln!("t45: restarted at {:?}", started.elapsed());
    let total = (5 + BENCH_COUNT).to_string();
    let consume =
        raftmq(&["consume", "-n", &ns, "-t", TOPIC, "-g", "t45_new_group", "--from-first", "--count", &total])
            .await?
            .ok("consume after restart")?;
    let messages = consumed(&consume);
    eprintln!("t45: consumed {} at {:?}", messages.len(), started.elapsed());
    assert_eq!(messages.len(), 5 + BENCH_COUNT);
    assert_eq!(messages.iter().filter(|(tag, body)| tag == "TagA" && body == "hello").count(), 5);
    let resumed = raftmq(&["consume", "-n", &ns, "-t", TOPIC, "-g", "t45_group", "--from-first", "--count", "1"])
        .await?
        .ok("consume by the first group after restart")?;
    let resumed = consumed(&resumed);
    assert_eq!(resumed.len(), 1);
    assert_ne!(resumed[0].1, "hello", "the first group's committed offsets survived the restart");

    eprintln!("t45: resumed at {:?}", started.elapsed());
    let status = dev.terminate().await?;
    assert!(status.success(), "raftmq dev exited with {status} on the second SIGTERM");
    eprintln!("t45: done in {:?}", started.elapsed());
    Ok(())
}

/// The images set `RAFTMQ_LOG_JSON=1` (deploy/Dockerfile*): the binary takes it, and the usual
/// spellings of a boolean, instead of refusing to start.
#[test]
fn raftmq_log_json_takes_1_as_containers_set_it() -> Result<()> {
    let closed = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0")?;
        listener.local_addr()?
    };
    for value in ["1", "0", "true", "false", "yes", "off"] {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_raftmq"))
            .args(["healthcheck", &format!("http://{closed}/readyz")])
            .env("RAFTMQ_LOG_JSON", value)
            .output()?;
        let stderr = String::from_utf8_lossy(&out.stderr);
        ensure!(!stderr.contains("invalid value"), "RAFTMQ_LOG_JSON={value}: {stderr}");
        ensure!(!out.status.success(), "a closed port is not healthy");
        ensure!(stderr.contains("connecting to"), "RAFTMQ_LOG_JSON={value}: {stderr}");
    }
    Ok(())
}
