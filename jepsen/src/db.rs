//! The running cluster (Jepsen's "db"): the NameServer and every broker replica as [`NodeProcess`]es
//! inside the run's namespace, their configs on disk, and the admin client that finds leaders.
//!
//! Contract with the `raftmq` binary: `raftmq namesrv --listenPort 9876` prints
//! `The Name Server boot success`; `raftmq broker -c <node>/broker.toml` prints
//! `The broker[<name>, <addr>] boot success`. Both exit on SIGTERM after a graceful shutdown.
//!
//! Members: each group's current members start as its initial replicas; the `membership` nemesis
//! replaces them ([`Db::set_members`]) and starts spares ([`Db::start_spare`]). Restores restart
//! members only (a removed node must never come back), every running process is stopped at the end,
//! and the final dumps read the members only.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use raftmq_client::Admin;

use crate::cluster::Layout;
use crate::cluster::NAMESRV_PORT;
use crate::cluster::NodeSpec;
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
    /// Every spare of the group was used.
    #[error("{0}: no spare node left")]
    NoSpare(String),
    /// A replica ran on a corrupted disk without saying so (or could not be asked).
    #[error("{node}: {message}")]
    Undetected {
        /// The node.
        node: String,
        /// What it said.
        message: String,
    },
    /// A process exited while a fault that must not kill it was held.
    #[error("{node}: {message}")]
    Exited {
        /// The node.
        node: String,
        /// What it was going through.
        message: String,
    },
    /// A membership change did not complete.
    #[error("membership of {group}: {message}")]
    Membership {
        /// The group.
        group: String,
        /// What went wrong.
        message: String,
    },
}

/// The running cluster.
#[derive(Debug)]
pub struct Db {
    /// Where everything lives.
    pub layout: Layout,
    ns: NetNs,
    procs: BTreeMap<String, NodeProcess>,
    admin: Admin,
    raftmq: std::path::PathBuf,
    /// Group → its current members' names.
    members: BTreeMap<String, Vec<String>>,
    /// Group → spares started so far (the next one is `layout.spares(group)[n]`).
    spares_used: BTreeMap<String, usize>,
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
        let mut procs = BTreeMap::new();
        for namesrv in &layout.namesrvs {
            fw.source_by_gid(namesrv.gid, namesrv.ip)?;
            std::fs::create_dir_all(&namesrv.dir)
                .map_err(|source| DbError::Io { path: namesrv.dir.display().to_string(), source })?;
            procs.insert(
                namesrv.name.clone(),
                NodeProcess::new(ProcessSpec {
                    name: namesrv.name.clone(),
                    program: raftmq.to_owned(),
                    // Its own loopback address (the NameServer binds 127.0.0.1 unless told).
                    args: vec![
                        "namesrv".into(),
                        "--listenPort".into(),
                        NAMESRV_PORT.to_string(),
                        "-D".into(),
                        format!("bindAddress={}", namesrv.ip),
                    ],
                    gid: namesrv.gid,
                    log: namesrv.dir.join(format!("{}.log", namesrv.name)),
                    boot_marker: NAMESRV_BOOT_MARKER.to_owned(),
                }),
            );
        }
        if let Some(bytes) = layout.node_disk_bytes {
            for node in layout.all_nodes() {
                crate::disk::mount_tmpfs(&node.disk_dir(), bytes)?;
            }
        }
        let mut members: BTreeMap<String, Vec<String>> = BTreeMap::new();
        for node in &layout.nodes {
            fw.source_by_gid(node.gid, node.ip)?;
            write(&node.config_path(), &layout.broker_toml(node))?;
            procs.insert(node.name.clone(), broker_process(node, raftmq));
            members.entry(node.group.clone()).or_default().push(node.name.clone());
        }
        let admin = Admin::new(&layout.namesrv_addr()).map_err(|e| DbError::Admin(e.to_string()))?;
        Ok(Db { layout, ns, procs, admin, raftmq: raftmq.to_owned(), members, spares_used: BTreeMap::new() })
    }

    /// The current members of `group`.
    pub fn members(&self, group: &str) -> Vec<&NodeSpec> {
        self.member_names(group).iter().filter_map(|n| self.layout.node(n)).collect()
    }

    /// The current members' names of `group`.
    pub fn member_names(&self, group: &str) -> &[String] {
        self.members.get(group).map_or(&[], Vec::as_slice)
    }

    /// Records `names` as `group`'s members (after a membership change took effect).
    pub fn set_members(&mut self, group: &str, names: Vec<String>) {
        self.members.insert(group.to_owned(), names);
    }

    /// Spares of `group` not started yet.
    pub fn spares_left(&self, group: &str) -> usize {
        self.layout.spares(group).len().saturating_sub(self.spares_used.get(group).copied().unwrap_or(0))
    }

    /// Starts `group`'s next unused spare as a node joining the current members (its `raftPeers` =
    /// the members plus itself, an empty store) and waits for its boot line. The caller adds it to
    /// the group; until then it waits, unregistered.
    pub async fn start_spare(&mut self, group: &str, timeout: Duration) -> Result<NodeSpec, DbError> {
        let used = self.spares_used.get(group).copied().unwrap_or(0);
        let Some(spec) = self.layout.spares(group).get(used).map(|n| (*n).clone()) else {
            return Err(DbError::NoSpare(group.to_owned()));
        };
        // Counted before anything can fail: a spare is tried once, so its id stays fresh for the next.
        self.spares_used.insert(group.to_owned(), used + 1);
        let members = self.members(group);
        let text = self.layout.joining_broker_toml(&spec, &members).ok_or_else(|| DbError::Membership {
            group: group.to_owned(),
            message: format!("{} (id {}) would be the smallest id of its raftPeers", spec.name, spec.raft_id),
        })?;
        self.firewall().source_by_gid(spec.gid, spec.ip)?;
        write(&spec.config_path(), &text)?;
        self.procs.insert(spec.name.clone(), broker_process(&spec, &self.raftmq));
        self.start(&spec.name, timeout).await?;
        Ok(spec)
    }

    /// Whether `name` has a live process.
    pub fn is_running(&mut self, name: &str) -> bool {
        self.procs.get_mut(name).is_some_and(NodeProcess::is_running)
    }

    /// Brokers (initial or spare) with a live process.
    pub fn running_brokers(&mut self) -> Vec<String> {
        let mut out = Vec::new();
        for (name, p) in self.procs.iter_mut() {
            if !self.layout.is_namesrv(name) && p.is_running() {
                out.push(name.clone());
            }
        }
        out
    }

    /// SIGTERM `name`, SIGKILL after `grace`.
    pub async fn terminate(&mut self, name: &str, grace: Duration) -> Result<(), DbError> {
        Ok(self.proc(name)?.terminate(grace).await?)
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

    /// Starts the NameServers, then every broker, and waits for every boot line.
    pub async fn start_all(&mut self, timeout: Duration) -> Result<(), DbError> {
        for name in self.layout.namesrv_names() {
            self.start(&name, timeout).await?;
        }
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

    /// Starts (or restarts) `name` with at most `limit` open files (`None`: the harness's own limit)
    /// for this and every later incarnation, and waits for its boot line.
    pub async fn start_with_nofile(
        &mut self,
        name: &str,
        limit: Option<u64>,
        timeout: Duration,
    ) -> Result<(), DbError> {
        self.proc(name)?.set_nofile_limit(limit);
        self.start(name, timeout).await
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

    /// Resumes every paused process, starts every stopped member and NameServer, and removes
    /// every clock skew (the final heal). Removed nodes stay stopped.
    pub async fn restore_all(&mut self, timeout: Duration) -> Result<(), DbError> {
        for node in self.layout.all_nodes() {
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
        }
        let wanted =
            self.layout.namesrv_names().into_iter().chain(self.members.values().flatten().cloned()).collect::<Vec<_>>();
        for name in &wanted {
            if !self.proc(name)?.is_running() {
                self.start(name, timeout).await?;
            }
        }
        Ok(())
    }

    /// Freezes every broker at once (SIGSTOP), then SIGTERMs them one by one (each resumed alone, so
    /// no group can commit anything new while the others shut down and the dumps see one instant),
    /// then the NameServers; SIGKILL after `grace`.
    pub async fn stop_all(&mut self, grace: Duration) -> Result<(), DbError> {
        let names: Vec<String> = self.procs.keys().filter(|n| !self.layout.is_namesrv(n)).cloned().collect();
        for name in &names {
            self.pause(name)?;
        }
        for name in names.into_iter().chain(self.layout.namesrv_names()) {
            self.proc(&name)?.terminate(grace).await?;
        }
        Ok(())
    }

    /// The node name of `group`'s leader, as the NameServer's route says (brokerId 0; spares
    /// included).
    pub async fn leader_of(&self, group: &str) -> Option<String> {
        let addr = self.admin.master_addr_of_group(group).await.ok()?;
        self.layout.node_by_addr(&addr).map(|n| n.name.clone())
    }
}

fn broker_process(node: &NodeSpec, raftmq: &Path) -> NodeProcess {
    NodeProcess::new(ProcessSpec {
        name: node.name.clone(),
        program: raftmq.to_owned(),
        args: vec!["broker".into(), "-c".into(), node.config_path().display().to_string()],
        gid: node.gid,
        log: node.log_path(),
        boot_marker: BROKER_BOOT_MARKER.to_owned(),
    })
}
