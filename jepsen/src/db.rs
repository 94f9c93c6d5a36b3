//! The running cluster (Jepsen's "db"): the NameServer and every broker replica as [`NodeProcess`]es
//! inside the run's namespace, their configs on disk, and the admin client that finds leaders.
//!
//! Contract with the `raftmq` binary: `raftmq namesrv --listenPort 9876` prints
//! `The Name Server boot success`; `raftmq broker -c <node>/broker.toml` prints
//! `The broker[<name>, <addr>] boot success`. Both exit on SIGTERM after a graceful shutdown.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use raftmq_client::Admin;

use crate::cluster::Layout;
use crate::cluster::NAMESRV_PORT;
use crate::net::EnvError;
use crate::net::Firewall;
use crate::net::NetNs;
use crate::node::NodeError;
use crate::node::NodeProcess;
use crate::node::ProcessSpec;

/// The NameServer's boot line.
pub const NAMESRV_BOOT_MARKER: &str = "The Name Server boot success";
/// The broker's boot line (after `The broker[name, addr]`).
pub const BROKER_BOOT_MARKER: &str = "boot success";
/// Name of the NameServer process.
pub const NAMESRV: &str = "namesrv";

/// Why the cluster could not be set up or controlled.
#[derive(Debug, thiserror::Error)]
pub enum DbError {
    /// A node failed.
    #[error(transparent)]
    Node(#[from] NodeError),
    /// The network failed.
    #[error(transparent)]
    Net(#[from] EnvError),
    /// A config or directory could not be written.
    #[error("{path}: {source}")]
    Io {
        /// The path.
        path: String,
        /// The cause.
        source: std::io::Error,
    },
    /// No such node.
    #[error("no node named {0}")]
    UnknownNode(String),
    /// The admin client could not be built.
    #[error("admin client: {0}")]
    Admin(String),
}

/// The running cluster.
#[derive(Debug)]
pub struct Db {
    /// Where everything lives.
    pub layout: Layout,
    ns: NetNs,
    procs: BTreeMap<String, NodeProcess>,
    admin: Admin,
}

fn write(path: &Path, text: &str) -> Result<(), DbError> {
    let io = |source| DbError::Io { path: path.display().to_string(), source };
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent).map_err(io)?;
    }
    std::fs::write(path, text).map_err(io)
}

impl Db {
    /// Writes every config, sets up source addresses in `ns`, and prepares (does not start) processes.
    pub fn new(layout: Layout, ns: NetNs, raftmq: &Path) -> Result<Self, DbError> {
        let fw = Firewall::new(&ns);
        fw.source_by_gid(layout.namesrv_gid, layout.namesrv_ip)?;
        let mut procs = BTreeMap::new();
        std::fs::create_dir_all(&layout.namesrv_dir)
            .map_err(|source| DbError::Io { path: layout.namesrv_dir.display().to_string(), source })?;
        procs.insert(
            NAMESRV.to_owned(),
            NodeProcess::new(ProcessSpec {
                name: NAMESRV.to_owned(),
                program: raftmq.to_owned(),
                args: vec!["namesrv".into(), "--listenPort".into(), NAMESRV_PORT.to_string()],
                gid: layout.namesrv_gid,
                log: layout.namesrv_dir.join("namesrv.log"),
                boot_marker: NAMESRV_BOOT_MARKER.to_owned(),
            }),
        );
        for node in &layout.nodes {
            fw.source_by_gid(node.gid, node.ip)?;
            write(&node.config_path(), &layout.broker_toml(node))?;
            procs.insert(
                node.name.clone(),
                NodeProcess::new(ProcessSpec {
                    name: node.name.clone(),
                    program: raftmq.to_owned(),
                    args: vec!["broker".into(), "-c".into(), node.config_path().display().to_string()],
                    gid: node.gid,
                    log: node.log_path(),
                    boot_marker: BROKER_BOOT_MARKER.to_owned(),
                }),
            );
        }
        let admin = Admin::new(&layout.namesrv_addr()).map_err(|e| DbError::Admin(e.to_string()))?;
        Ok(Db { layout, ns, procs, admin })
    }

    /// The namespace.
    pub fn ns(&self) -> &NetNs {
        &self.ns
    }

    /// The namespace's firewall.
    pub fn firewall(&self) -> Firewall<'_> {
        Firewall::new(&self.ns)
    }

    /// The admin client (NameServer lookups, broker offsets).
    pub fn admin(&self) -> &Admin {
        &self.admin
    }

    fn proc(&mut self, name: &str) -> Result<&mut NodeProcess, DbError> {
        self.procs.get_mut(name).ok_or_else(|| DbError::UnknownNode(name.to_owned()))
    }

    /// Starts the NameServer, then every broker, and waits for every boot line.
    pub async fn start_all(&mut self, timeout: Duration) -> Result<(), DbError> {
        self.start(NAMESRV, timeout).await?;
        let names: Vec<String> = self.layout.nodes.iter().map(|n| n.name.clone()).collect();
        for name in &names {
            let ns = &self.ns;
            self.procs.get_mut(name).ok_or_else(|| DbError::UnknownNode(name.clone()))?.start(ns)?;
        }
        for name in &names {
            self.proc(name)?.wait_ready(timeout).await?;
        }
        Ok(())
    }

    /// Starts (or restarts) `name` and waits for its boot line.
    pub async fn start(&mut self, name: &str, timeout: Duration) -> Result<(), DbError> {
        let ns = &self.ns;
        let p = self.procs.get_mut(name).ok_or_else(|| DbError::UnknownNode(name.to_owned()))?;
        p.start(ns)?;
        p.wait_ready(timeout).await?;
        Ok(())
    }

    /// kill -9 `name`.
    pub async fn kill9(&mut self, name: &str) -> Result<(), DbError> {
        Ok(self.proc(name)?.kill9().await?)
    }

    /// SIGSTOP `name`.
    pub fn pause(&mut self, name: &str) -> Result<(), DbError> {
        Ok(self.proc(name)?.pause()?)
    }

    /// SIGCONT `name`.
    pub fn resume(&mut self, name: &str) -> Result<(), DbError> {
        Ok(self.proc(name)?.resume()?)
    }

    /// Resumes every paused process, starts every stopped one and removes every clock skew (the
    /// final heal).
    pub async fn restore_all(&mut self, timeout: Duration) -> Result<(), DbError> {
        for node in &self.layout.nodes {
            let path = node.clock_skew_path();
            if let Err(source) = std::fs::remove_file(&path)
                && source.kind() != std::io::ErrorKind::NotFound
            {
                return Err(DbError::Io { path: path.display().to_string(), source });
            }
        }
        let names: Vec<String> = self.procs.keys().cloned().collect();
        for name in &names {
            self.resume(name)?;
            let running = self.proc(name)?.is_running();
            if !running {
                self.start(name, timeout).await?;
            }
        }
        Ok(())
    }

    /// Freezes every broker at once (SIGSTOP), then SIGTERMs them one by one (each resumed alone, so
    /// no group can commit anything new while the others shut down and the dumps see one instant),
    /// then the NameServer; SIGKILL after `grace`.
    pub async fn stop_all(&mut self, grace: Duration) -> Result<(), DbError> {
        let names: Vec<String> = self.layout.nodes.iter().map(|n| n.name.clone()).collect();
        for name in &names {
            self.pause(name)?;
        }
        for name in names.iter().map(String::as_str).chain([NAMESRV]) {
            self.proc(name)?.terminate(grace).await?;
        }
        Ok(())
    }

    /// The node name of `group`'s leader, as the NameServer's route says (brokerId 0).
    pub async fn leader_of(&self, group: &str) -> Option<String> {
        let addr = self.admin.master_addr_of_group(group).await.ok()?;
        self.layout.node_by_addr(&addr).map(|n| n.name.clone())
    }
}
