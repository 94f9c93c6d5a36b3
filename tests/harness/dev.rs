//! [`DevCluster`]: the real `raftmq dev` binary as a child process — one NameServer (port 0, read
//! from the banner), one 3-replica group on ports chosen free at runtime, and its web console
//! (port 0, read from the banner) — for tests that need the whole product running, as a user
//! starts it. Killed when dropped; [`DevCluster::stop`] stops it with SIGTERM.

use std::path::Path;
use std::path::PathBuf;
use std::process::Stdio;
use std::sync::Arc;
use std::sync::Mutex;
use std::time::Duration;

use anyhow::Context;
use anyhow::Result;
use anyhow::bail;
use tokio::io::AsyncBufReadExt;
use tokio::io::BufReader;
use tokio::process::Child;
use tokio::sync::watch;
use tokio::time::Instant;

use super::ports::free_ports_spaced;

/// Bound of a start and of a stop.
pub const DEV_WAIT: Duration = Duration::from_secs(60);

/// A running `raftmq dev`.
pub struct DevCluster {
    child: Child,
    lines: Arc<Mutex<Vec<String>>>,
    changed: watch::Receiver<usize>,
    log: PathBuf,
    /// NameServer address (`-n`).
    pub namesrv: String,
    /// Web console base URL, `http://127.0.0.1:PORT` (no trailing slash).
    pub console_url: String,
}

impl DevCluster {
    /// Starts `raftmq dev` with its data in `data` and its stderr in `log`, and waits for its banner.
    pub async fn start(data: &Path, log: &Path) -> Result<DevCluster> {
        // Three replicas: `raftmq dev` numbers the broker ports 10 apart, the others 1 apart.
        let (broker, raft, admin) = (free_ports_spaced(10, 3), free_ports_spaced(1, 3), free_ports_spaced(1, 3));
        let mut child = tokio::process::Command::new(env!("CARGO_BIN_EXE_raftmq"))
            .arg("dev")
            .arg("--data")
            .arg(data)
            .args(["--namesrv-port", "0", "--console-port", "0"])
            .args(["--broker-port", &broker.to_string()])
            .args(["--raft-port", &raft.to_string()])
            .args(["--admin-port", &admin.to_string()])
            // Ephemeral gRPC ports: parallel tests never collide on the default 8085.
            .args(["--grpc-port", "0"])
            .env("RUST_LOG", "info")
            .env_remove("NAMESRV_ADDR")
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
        let mut dev = DevCluster {
            child,
            lines,
            changed,
            log: log.to_owned(),
            namesrv: String::new(),
            console_url: String::new(),
        };
        let ns = dev.wait_line("the NameServer line", |l| l.trim_start().starts_with("NameServer")).await?;
        dev.namesrv = ns.split_whitespace().nth(1).context("NameServer address")?.to_owned();
        let console = dev.wait_line("the web console line", |l| l.trim_start().starts_with("web console")).await?;
        let url = console.split_whitespace().nth(2).context("console URL")?;
        dev.console_url = url.trim_end_matches('/').to_owned();
        Ok(dev)
    }

    /// The first stdout line matching `want` (bounded; fails if the process exits).
    pub async fn wait_line(&mut self, what: &str, want: impl Fn(&str) -> bool) -> Result<String> {
        let deadline = Instant::now() + DEV_WAIT;
        loop {
            self.changed.borrow_and_update();
            let found = self.lines.lock().unwrap_or_else(|p| p.into_inner()).iter().find(|l| want(l)).cloned();
            if let Some(line) = found {
                return Ok(line);
            }
            match tokio::time::timeout_at(deadline, self.changed.changed()).await {
                Ok(Ok(())) => {}
                Ok(Err(_)) => bail!("raftmq dev exited before {what}\n{}", self.diagnostics()),
                Err(_) => bail!("no {what} from raftmq dev within {DEV_WAIT:?}\n{}", self.diagnostics()),
            }
        }
    }

    /// Its stdout and the tail of its log.
    pub fn diagnostics(&self) -> String {
        let stdout = self.lines.lock().unwrap_or_else(|p| p.into_inner()).join("\n");
        let log = std::fs::read_to_string(&self.log).unwrap_or_default();
        let lines: Vec<&str> = log.lines().collect();
        let tail = lines.get(lines.len().saturating_sub(30)..).unwrap_or_default();
        format!("--- stdout\n{stdout}\n--- stderr (tail)\n{}", tail.join("\n"))
    }

    /// SIGTERM, then waits for the exit (bounded).
    pub async fn stop(mut self) -> Result<()> {
        let pid = self.child.id().context("dev already exited")?;
        let pid = nix::unistd::Pid::from_raw(i32::try_from(pid)?);
        nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM)?;
        match tokio::time::timeout(DEV_WAIT, self.child.wait()).await {
            Ok(status) => {
                status?;
                Ok(())
            }
            Err(_) => bail!("raftmq dev ignored SIGTERM for {DEV_WAIT:?}\n{}", self.diagnostics()),
        }
    }
}
