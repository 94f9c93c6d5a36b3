//! The network the nodes live on: one dedicated network namespace (`ip netns`), every process on its
//! own `127.0.0.N`, and iptables DROP rules per node pair for partitions (docs/reliability.md#the-sandbox:
//! DROP, not REJECT; per-pair rules on `lo` work inside a namespace).
//!
//! ```text
//! host ── ip netns add rmqj-<pid>-<n> ──▶ lo up ─▶ nat POSTROUTING: --gid-owner G_n ─▶ SNAT 127.0.0.n
//!   harness thread setns()s into it; children start as `ip netns exec <ns> raftmq …` with gid G_n
//!   partition: filter INPUT -s A -d B -j DROP (both directions); heal: flush INPUT
//! ```
//!
//! Why SNAT by gid: a process that does not bind its outgoing sockets connects from 127.0.0.1, and
//! per-pair rules could not tell nodes apart. Each node runs with its own gid and the namespace
//! rewrites its source address, so partitions work whether or not the broker binds its sockets.
//!
//! Invariants: nothing here touches the host's network (every rule is inside the namespace, which
//! [`NetNs`]'s drop deletes); [`check_environment`] runs before anything else and turns a missing
//! privilege or tool into [`EnvError::Unsupported`], which callers report as a visible skip; every
//! namespace name is new in this process ([`unique_name`]), so runs on several threads of one
//! process (the CI smoke) each get their own network.

use std::net::Ipv4Addr;
use std::os::fd::AsFd;
use std::process::Command;
use std::sync::atomic::AtomicU64;
use std::sync::atomic::Ordering;

use thiserror::Error;

/// Why the harness cannot run here, or a network command failed.
#[derive(Debug, Error)]
pub enum EnvError {
    /// This environment cannot run the harness (not root, no `ip netns`, no iptables).
    #[error("unsupported environment: {0}")]
    Unsupported(String),
    /// A command failed.
    #[error("`{cmd}` failed: {stderr}")]
    Command {
        /// The command line.
        cmd: String,
        /// Its standard error (or exit status).
        stderr: String,
    },
    /// A namespace file could not be opened or entered.
    #[error("{what}: {source}")]
    Io {
        /// What was attempted.
        what: String,
        /// The cause.
        source: std::io::Error,
    },
}

fn effective_uid() -> Option<u32> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("Uid:"))?;
    line.split_whitespace().nth(2)?.parse().ok()
}

/// Runs `program args`, returning stdout; a non-zero exit is an [`EnvError::Command`].
pub fn run(program: &str, args: &[&str]) -> Result<String, EnvError> {
    let cmd = format!("{program} {}", args.join(" "));
    let out = Command::new(program)
        .args(args)
        .output()
        .map_err(|e| EnvError::Command { cmd: cmd.clone(), stderr: e.to_string() })?;
    if !out.status.success() {
        let stderr = String::from_utf8_lossy(&out.stderr).trim().to_owned();
        return Err(EnvError::Command { cmd, stderr: if stderr.is_empty() { out.status.to_string() } else { stderr } });
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// `<prefix>-<pid>-<n>`: a namespace name no other run of this process has used, and no other
/// process either (the pid), so a stale namespace of that name can only be a dead process's.
pub fn unique_name(prefix: &str) -> String {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    format!("{prefix}-{}-{}", std::process::id(), NEXT.fetch_add(1, Ordering::Relaxed))
}

/// Checks root, `ip netns` and iptables (by creating and deleting a probe namespace with one rule).
pub fn check_environment() -> Result<(), EnvError> {
    match effective_uid() {
        Some(0) => {}
        Some(uid) => return Err(EnvError::Unsupported(format!("needs root for ip netns and iptables (euid {uid})"))),
        None => return Err(EnvError::Unsupported("cannot read the effective uid from /proc/self/status".into())),
    }
    let probe = unique_name("rmqj-probe");
    run("ip", &["netns", "add", &probe])
        .map_err(|e| EnvError::Unsupported(format!("`ip netns` does not work here: {e}")))?;
    let rule = run("ip", &["netns", "exec", &probe, "iptables", "-w", "-A", "INPUT", "-s", "127.0.0.2", "-j", "DROP"]);
    // Best effort: the probe is empty and removing it cannot affect the result.
    let _ = run("ip", &["netns", "del", &probe]);
    rule.map_err(|e| {
        EnvError::Unsupported(format!("iptables does not work in a namespace (apt-get install iptables): {e}"))
    })?;
    Ok(())
}

/// A network namespace owned by this run; dropped = deleted.
#[derive(Debug)]
pub struct NetNs {
    name: String,
}

impl NetNs {
    /// Creates namespace `name` (deleting a stale one of that name) with `lo` up.
    pub fn create(name: &str) -> Result<Self, EnvError> {
        if run("ip", &["netns", "list"])?.lines().any(|l| l.split_whitespace().next() == Some(name)) {
            run("ip", &["netns", "del", name])?;
        }
        run("ip", &["netns", "add", name])?;
        let ns = NetNs { name: name.to_owned() };
        ns.exec_checked("ip", &["link", "set", "lo", "up"])?;
        Ok(ns)
    }

    /// The namespace's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// A command that runs `program` inside the namespace (`ip netns exec` execs it, so the child's pid
    /// is the program's).
    pub fn command(&self, program: &str) -> tokio::process::Command {
        let mut c = tokio::process::Command::new("ip");
        c.args(["netns", "exec", &self.name, program]);
        c
    }

    /// Runs `program args` inside the namespace.
    pub fn exec_checked(&self, program: &str, args: &[&str]) -> Result<String, EnvError> {
        let mut full = vec!["netns", "exec", &self.name, program];
        full.extend_from_slice(args);
        run("ip", &full)
    }

    /// Moves the calling thread into the namespace; threads it spawns later inherit it. Returns a guard
    /// that moves the thread back when dropped.
    pub fn enter_current_thread(&self) -> Result<NsGuard, EnvError> {
        let io = |what: &str| {
            let what = what.to_owned();
            move |source| EnvError::Io { what, source }
        };
        let original = std::fs::File::open("/proc/thread-self/ns/net").map_err(io("open /proc/thread-self/ns/net"))?;
        let path = format!("/run/netns/{}", self.name);
        let target = std::fs::File::open(&path).map_err(io(&path))?;
        nix::sched::setns(target.as_fd(), nix::sched::CloneFlags::CLONE_NEWNET)
            .map_err(|e| EnvError::Io { what: format!("setns {path}"), source: e.into() })?;
        Ok(NsGuard { original })
    }
}

impl Drop for NetNs {
    fn drop(&mut self) {
        if let Err(e) = run("ip", &["netns", "del", &self.name]) {
            tracing::warn!(netns = %self.name, error = %e, "could not delete the network namespace");
        }
    }
}

/// Returns the thread to the namespace it came from.
#[derive(Debug)]
pub struct NsGuard {
    original: std::fs::File,
}

impl Drop for NsGuard {
    fn drop(&mut self) {
        if let Err(e) = nix::sched::setns(self.original.as_fd(), nix::sched::CloneFlags::CLONE_NEWNET) {
            tracing::warn!(error = %e, "could not return to the original network namespace");
        }
    }
}

/// A pair of addresses that cannot reach each other (in both directions).
pub type Cut = (Ipv4Addr, Ipv4Addr);

/// iptables inside one namespace.
#[derive(Debug)]
pub struct Firewall<'a> {
    ns: &'a NetNs,
}

impl<'a> Firewall<'a> {
    /// The firewall of `ns`.
    pub fn new(ns: &'a NetNs) -> Self {
        Firewall { ns }
    }

    /// Makes every connection opened by processes with group `gid` come from `ip`.
    pub fn source_by_gid(&self, gid: u32, ip: Ipv4Addr) -> Result<(), EnvError> {
        let (gid, ip) = (gid.to_string(), ip.to_string());
        self.ns
            .exec_checked(
                "iptables",
                &[
                    "-w",
                    "-t",
                    "nat",
                    "-A",
                    "POSTROUTING",
                    "-m",
                    "owner",
                    "--gid-owner",
                    &gid,
                    "-j",
                    "SNAT",
                    "--to-source",
                    &ip,
                ],
            )
            .map(drop)
    }

    /// Drops every packet between the two ends of each cut.
    pub fn partition(&self, cuts: &[Cut]) -> Result<(), EnvError> {
        for (a, b) in cuts {
            for (src, dst) in [(a, b), (b, a)] {
                let (src, dst) = (src.to_string(), dst.to_string());
                self.ns.exec_checked("iptables", &["-w", "-A", "INPUT", "-s", &src, "-d", &dst, "-j", "DROP"])?;
            }
        }
        Ok(())
    }

    /// Removes every partition rule (the SNAT rules stay).
    pub fn heal(&self) -> Result<(), EnvError> {
        self.ns.exec_checked("iptables", &["-w", "-F", "INPUT"]).map(drop)
    }

    /// The current filter rules (`iptables -S INPUT`), for logs and tests.
    pub fn rules(&self) -> Result<String, EnvError> {
        self.ns.exec_checked("iptables", &["-w", "-S", "INPUT"])
    }
}
