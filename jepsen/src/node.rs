//! Process control of one `raftmq` child (NameServer or broker replica): spawn inside the namespace
//! with its own gid, wait for its boot line, kill -9, SIGSTOP/SIGCONT, SIGTERM, restart.
//!
//! Every incarnation appends its stdout and stderr to the node's log file; the boot line
//! (`The Name Server boot success` / `The broker[…] boot success`) is what readiness means, as for
//! RocketMQ's start scripts.
//!
//! Invariants: at most one live child per [`NodeProcess`]; a paused child is resumed before it is
//! terminated (a stopped process cannot handle SIGTERM); children are killed when dropped, so a
//! panicking harness leaves no broker behind.

use std::path::PathBuf;
use std::process::Stdio;
use std::time::Duration;

use nix::sys::signal::Signal;
use nix::sys::signal::kill;
use nix::unistd::Pid;
use thiserror::Error;
use tokio::io::AsyncBufReadExt;
use tokio::io::AsyncRead;
use tokio::io::AsyncWriteExt;
use tokio::io::BufReader;
use tokio::process::Child;
use tokio::sync::watch;

use crate::net::NetNs;

/// Why a node could not be controlled.
#[derive(Debug, Error)]
pub enum NodeError {
    /// The process could not be started.
    #[error("{node}: cannot start: {source}")]
    Spawn {
        /// The node.
        node: String,
        /// The cause.
        source: std::io::Error,
    },
    /// No boot line within the deadline (or the process exited first).
    #[error("{node}: no boot line within {timeout:?}; see {log}")]
    NotReady {
        /// The node.
        node: String,
        /// The deadline.
        timeout: Duration,
        /// Its log file.
        log: String,
    },
    /// A signal could not be delivered.
    #[error("{node}: {signal} failed: {source}")]
    Signal {
        /// The node.
        node: String,
        /// The signal.
        signal: Signal,
        /// The cause.
        source: nix::Error,
    },
}

/// How to start one process.
#[derive(Debug, Clone)]
pub struct ProcessSpec {
    /// Name in logs (`namesrv`, `n11`).
    pub name: String,
    /// The `raftmq` binary.
    pub program: PathBuf,
    /// Its arguments.
    pub args: Vec<String>,
    /// Group id to run with.
    pub gid: u32,
    /// Log file (appended).
    pub log: PathBuf,
    /// Text of the boot line.
    pub boot_marker: String,
}

/// One controlled process.
#[derive(Debug)]
pub struct NodeProcess {
    spec: ProcessSpec,
    child: Option<Child>,
    paused: bool,
    booted: Option<watch::Receiver<bool>>,
    nofile_limit: Option<u64>,
}

async fn pump(src: impl AsyncRead + Unpin, log: PathBuf, marker: String, booted: watch::Sender<bool>) {
    let mut lines = BufReader::new(src).lines();
    let mut out = match tokio::fs::OpenOptions::new().create(true).append(true).open(&log).await {
        Ok(f) => Some(f),
        Err(e) => {
            tracing::warn!(log = %log.display(), error = %e, "cannot open the node log");
            None
        }
    };
    while let Ok(Some(line)) = lines.next_line().await {
        if line.contains(&marker) {
            booted.send_replace(true);
        }
        if let Some(f) = out.as_mut()
            && f.write_all(format!("{line}\n").as_bytes()).await.is_err()
        {
            out = None;
        }
    }
}

impl NodeProcess {
    /// A process that is not running yet.
    pub fn new(spec: ProcessSpec) -> Self {
        NodeProcess { spec, child: None, paused: false, booted: None, nofile_limit: None }
    }

    /// Its name.
    pub fn name(&self) -> &str {
        &self.spec.name
    }

    /// Whether a child is running (or paused).
    pub fn is_running(&mut self) -> bool {
        match self.child.as_mut().map(Child::try_wait) {
            Some(Ok(None)) => true,
            Some(_) => {
                self.child = None;
                false
            }
            None => false,
        }
    }

    /// Its pid while running.
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().and_then(Child::id)
    }

    /// The open-files limit (soft and hard) of the next incarnations (`None`: inherited).
    pub fn set_nofile_limit(&mut self, limit: Option<u64>) {
        self.nofile_limit = limit;
    }

    /// Starts it inside `ns` (no-op when running), under its open-files limit if one is set.
    pub fn start(&mut self, ns: &NetNs) -> Result<(), NodeError> {
        if self.is_running() {
            return Ok(());
        }
        let program = self.spec.program.to_string_lossy();
        let mut cmd = match self.nofile_limit {
            // prlimit sets the limit and execs the broker: same pid, so signals still reach it.
            Some(limit) => {
                let mut c = ns.command("prlimit");
                c.arg(format!("--nofile={limit}:{limit}")).arg("--").arg(program.as_ref());
                c
            }
            None => ns.command(&program),
        };
        cmd.args(&self.spec.args)
            .gid(self.spec.gid)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        let mut child = cmd.spawn().map_err(|source| NodeError::Spawn { node: self.spec.name.clone(), source })?;
        let (tx, rx) = watch::channel(false);
        if let Some(out) = child.stdout.take() {
            tokio::spawn(pump(out, self.spec.log.clone(), self.spec.boot_marker.clone(), tx.clone()));
        }
        if let Some(err) = child.stderr.take() {
            tokio::spawn(pump(err, self.spec.log.clone(), self.spec.boot_marker.clone(), tx));
        }
        self.child = Some(child);
        self.paused = false;
        self.booted = Some(rx);
        tracing::info!(node = %self.spec.name, pid = ?self.pid(), "started");
        Ok(())
    }

    /// Waits for the current incarnation's boot line.
    pub async fn wait_ready(&mut self, timeout: Duration) -> Result<(), NodeError> {
        let not_ready =
            || NodeError::NotReady { node: self.spec.name.clone(), timeout, log: self.spec.log.display().to_string() };
        let Some(mut rx) = self.booted.clone() else { return Err(not_ready()) };
        // `wait_for` ends with an error when both pumps are gone: the process exited before booting.
        match tokio::time::timeout(timeout, rx.wait_for(|b| *b)).await {
            Ok(Ok(_)) => Ok(()),
            _ => Err(not_ready()),
        }
    }

    fn signal(&self, signal: Signal) -> Result<(), NodeError> {
        let Some(pid) = self.pid() else { return Ok(()) };
        let pid = Pid::from_raw(i32::try_from(pid).unwrap_or(i32::MAX));
        kill(pid, signal).map_err(|source| NodeError::Signal { node: self.spec.name.clone(), signal, source })
    }

    /// kill -9 and reap.
    pub async fn kill9(&mut self) -> Result<(), NodeError> {
        self.signal(Signal::SIGKILL)?;
        if let Some(mut child) = self.child.take() {
            // Reaping after SIGKILL cannot block for long; an error means it is already gone.
            let _ = child.wait().await;
        }
        self.paused = false;
        tracing::info!(node = %self.spec.name, "killed (SIGKILL)");
        Ok(())
    }

    /// SIGSTOP.
    pub fn pause(&mut self) -> Result<(), NodeError> {
        self.signal(Signal::SIGSTOP)?;
        self.paused = self.child.is_some();
        Ok(())
    }

    /// SIGCONT.
    pub fn resume(&mut self) -> Result<(), NodeError> {
        if self.paused {
            self.signal(Signal::SIGCONT)?;
            self.paused = false;
        }
        Ok(())
    }

    /// SIGTERM (after SIGCONT if paused), then SIGKILL if it has not exited within `grace`.
    pub async fn terminate(&mut self, grace: Duration) -> Result<(), NodeError> {
        self.resume()?;
        if self.child.is_none() {
            return Ok(());
        }
        self.signal(Signal::SIGTERM)?;
        let exited = match self.child.as_mut() {
            Some(child) => tokio::time::timeout(grace, child.wait()).await.is_ok(),
            None => true,
        };
        if !exited {
            tracing::warn!(node = %self.spec.name, ?grace, "no exit after SIGTERM; killing");
            return self.kill9().await;
        }
        self.child = None;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn signals_to_a_process_that_is_not_running_are_no_ops() -> anyhow::Result<()> {
        let dir = tempfile::tempdir()?;
        let mut p = NodeProcess::new(ProcessSpec {
            name: "n0".into(),
            program: "/bin/true".into(),
            args: vec![],
            gid: 0,
            log: dir.path().join("n0.log"),
            boot_marker: "boot success".into(),
        });
        assert!(!p.is_running());
        p.pause()?;
        p.resume()?;
        p.kill9().await?;
        p.terminate(Duration::from_millis(10)).await?;
        assert!(p.wait_ready(Duration::from_millis(10)).await.is_err());
        Ok(())
    }
}
