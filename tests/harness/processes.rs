//! Broker replicas as real `raftmq broker -c FILE` child processes, restartable on the same files:
//! what a kill -9 or a full disk does to a process, not to a task in the test's runtime.
//!
//! Invariants: a replica's config (ports included) never changes across restarts, so its
//! identity does not either; every incarnation logs to its own `broker-<id>-<n>.log` in the test's
//! folder; children die with the harness (`kill_on_drop`).

use std::collections::BTreeMap;
use std::path::Path;
use std::path::PathBuf;
use std::process::Stdio;

use anyhow::Context;
use anyhow::Result;
use anyhow::bail;
use raftmq_broker::BrokerConfig;
use tokio::process::Child;
use tokio::process::Command;

/// One `raftmq broker -c FILE` child per replica, by Raft id.
pub struct BrokerProcesses {
    dir: PathBuf,
    configs: BTreeMap<u64, BrokerConfig>,
    children: BTreeMap<u64, Child>,
    starts: usize,
}

impl BrokerProcesses {
    /// Replicas with `configs` (by Raft id), their files and logs under `dir`; none started.
    pub fn new(dir: &Path, configs: BTreeMap<u64, BrokerConfig>) -> Self {
        BrokerProcesses { dir: dir.to_owned(), configs, children: BTreeMap::new(), starts: 0 }
    }

    /// The folder of configs and logs.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Replica `id`'s config.
    pub fn config(&self, id: u64) -> &BrokerConfig {
        &self.configs[&id]
    }

    /// Every replica's Raft id.
    pub fn ids(&self) -> Vec<u64> {
        self.configs.keys().copied().collect()
    }

    /// The replicas with a child process (alive or not yet reaped).
    pub fn running(&self) -> Vec<u64> {
        self.children.keys().copied().collect()
    }

    /// Writes replica `id`'s config and starts it.
    pub fn start(&mut self, id: u64) -> Result<()> {
        let config = self.configs.get(&id).with_context(|| format!("no replica {id}"))?;
        let file = self.dir.join(format!("broker-{id}.toml"));
        std::fs::write(&file, config.to_toml_string())?;
        self.starts += 1;
        let log = std::fs::File::create(self.dir.join(format!("broker-{id}-{}.log", self.starts)))?;
        let child = Command::new(env!("CARGO_BIN_EXE_raftmq"))
            .arg("broker")
            .arg("-c")
            .arg(&file)
            .env("RUST_LOG", "info")
            .stdout(Stdio::from(log.try_clone()?))
            .stderr(Stdio::from(log))
            .kill_on_drop(true)
            .spawn()
            .with_context(|| format!("spawning broker {id}"))?;
        self.children.insert(id, child);
        Ok(())
    }

    /// SIGKILL replica `id` and reap it.
    pub async fn kill9(&mut self, id: u64) -> Result<()> {
        let mut child = self.children.remove(&id).context("not running")?;
        child.start_kill()?;
        child.wait().await?;
        Ok(())
    }

    /// SIGKILL every running replica.
    pub async fn kill_all(&mut self) -> Result<()> {
        for id in self.running() {
            self.kill9(id).await?;
        }
        Ok(())
    }

    /// Fails naming the replica that exited (and how: a signal shows in the status).
    pub fn all_alive(&mut self) -> Result<()> {
        for (id, child) in self.children.iter_mut() {
            if let Some(status) = child.try_wait()? {
                bail!("broker {id} exited: {status}");
            }
        }
        Ok(())
    }

    /// The pid of every running replica.
    pub fn pids(&self) -> BTreeMap<u64, Option<u32>> {
        self.children.iter().map(|(id, c)| (*id, c.id())).collect()
    }

    /// The replica registered as `addr` (`ip:port`).
    pub fn id_of(&self, addr: &str) -> Option<u64> {
        self.configs.iter().find(|(_, c)| c.broker_addr() == addr).map(|(id, _)| *id)
    }

    /// Replica `id`'s remoting address.
    pub fn addr(&self, id: u64) -> String {
        self.configs[&id].broker_addr()
    }

    /// Replica `id`'s admin HTTP address.
    pub fn admin_http(&self, id: u64) -> String {
        format!("127.0.0.1:{}", self.configs[&id].admin_port)
    }

    /// The last lines of every incarnation's log, for a failing run.
    pub fn dump_logs(&self) {
        let Ok(entries) = std::fs::read_dir(&self.dir) else { return };
        for entry in entries.flatten() {
            let path = entry.path();
            if path.extension().is_some_and(|e| e == "log") {
                let text = std::fs::read_to_string(&path).unwrap_or_default();
                let tail: Vec<&str> = text.lines().rev().take(40).collect();
                eprintln!("==== {} (last lines)", path.display());
                for line in tail.iter().rev() {
                    eprintln!("{line}");
                }
            }
        }
    }
}
