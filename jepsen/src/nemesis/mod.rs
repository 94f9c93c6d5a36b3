//! Nemeses: the faults a run injects, and their application and healing against the running [`Db`].
//!
//! ```text
//! schedule::generate(kinds, seed) ─▶ [Step{at, hold, fault}] ─▶ apply(fault) ─▶ Applied ─hold─▶ heal(Applied)
//! ```
//!
//! - `partition`: iptables DROP per node pair inside a group ([`partition`] shapes);
//! - `namesrv`: a NameServer (one or all of them) cut from every node and client;
//! - `kill`: kill -9 a node, the leader, and restart it after the hold;
//! - `pause`: SIGSTOP, SIGCONT after the hold;
//! - `lose-unfsynced`: kill -9, cut the CommitLog back to its durable watermark ([`lose_unfsynced`]),
//!   restart after the hold; the target may be the whole group (power loss);
//! - `power-loss`: `lose-unfsynced` of a whole group only (the self-test's fault);
//! - `clock`: skew the wall clock of some nodes of a group by up to ±[`CLOCK_SKEW_MAX_MS`] (each
//!   broker reads its clock through the test-only `testClockSkewFile`); heal removes the skew. Raft
//!   timers are monotonic, so this probes what depends on wall time: store timestamps, lock and
//!   client expiry, delay delivery, retention.
//!
//! - `wipe`: kill -9, the whole store deleted (a replaced disk), restart empty under the same id;
//! - `corrupt`: kill -9, one byte of one fsynced Raft entry flipped, restart on that disk: the node
//!   must say it is damaged (checked at heal time, else the run fails), then it is rebuilt as by
//!   `wipe` ([`corrupt`]);
//! - `membership`: replace a member of a group (the leader or a follower; remove then add a spare,
//!   or add first and then remove) through the broker's membership admin calls ([`membership`]);
//!   heal brings the group back to its replica count of voters.
//!
//! - `disk-full`: every node's store is on a tmpfs of its own ([`crate::disk`]); the fault fills the
//!   file systems of the leader, a node or a whole group to the last byte, holds, and deletes the
//!   filler. The replicas must stay alive (heal fails the run if one exited) and serve again without
//!   a restart: nothing restarts them, so a replica that does not recover shows in the checkers;
//! - `fd-exhaustion`: kill -9 the leader or a node and restart it with at most
//!   [`FD_LIMIT_RANGE`] open files (RLIMIT_NOFILE, through `prlimit`); at heal it is stopped
//!   (SIGTERM) and restarted with the usual limit.
//!
//! Process faults act on a group's current members ([`Db::members`]): a scheduled node that a
//! membership change removed is stood in for by the member at its position.
//!
//! Invariant: every applied fault is healed by [`heal`], and the final heal of a run restores every
//! member, flushes every rule and reconciles every group's membership whatever happened before.

pub mod corrupt;
pub mod lose_unfsynced;
pub mod membership;
pub mod partition;
pub mod schedule;

use std::net::Ipv4Addr;
use std::time::Duration;

use rand::Rng;
use serde::Deserialize;
use serde::Serialize;

use self::membership::Victim;
use self::partition::PartitionKind;
use crate::cluster::CLIENT_IP;
use crate::db::Db;
use crate::db::DbError;
use crate::history::Recorder;

/// Largest wall-clock skew the `clock` nemesis applies (either way): past the 120 s client expiry.
pub const CLOCK_SKEW_MAX_MS: i64 = 180_000;

/// Boot deadline of a restarted node.
pub const RESTART_READY_TIMEOUT_MS: u64 = 60_000;

/// Open files (soft and hard RLIMIT_NOFILE) of a node under `fd-exhaustion`, drawn in this range:
/// a booted broker of a 3-replica group holds about 35 (runtimes, segments and index files, peer
/// and client sockets; measured), so the low end runs out at boot, the high end when clients
/// connect, files roll or a peer reconnects.
pub const FD_LIMIT_RANGE: (u64, u64) = (20, 44);

/// Grace of the SIGTERM that ends a node's run under a low open-files limit (then SIGKILL).
pub const FD_LIMIT_STOP_GRACE_MS: u64 = 10_000;

/// How long a corrupted node is asked for its status before the check gives up.
pub const DAMAGE_REPORT_TIMEOUT_MS: u64 = 10_000;
/// Pause between two status asks of a corrupted node.
pub const DAMAGE_REPORT_RETRY_MS: u64 = 200;

/// A fault family, as named on the command line.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum NemesisKind {
    /// Network partitions inside a group.
    Partition,
    /// kill -9 and restart.
    Kill,
    /// SIGSTOP / SIGCONT.
    Pause,
    /// kill -9 losing un-fsynced CommitLog bytes, then restart.
    LoseUnfsynced,
    /// `lose-unfsynced` of every replica of a group at once.
    PowerLoss,
    /// The NameServer isolated.
    Namesrv,
    /// Wall clocks skewed.
    Clock,
    /// A member replaced through the membership admin calls.
    Membership,
    /// kill -9, the node's whole store deleted (a replaced disk), restart under the same id.
    Wipe,
    /// kill -9, one byte of an fsynced entry flipped, restart damaged; rebuilt at heal.
    Corrupt,
    /// The file system of one or more nodes filled to the last byte, then freed.
    DiskFull,
    /// A node restarted with a low open-files limit, restarted normally at heal.
    FdExhaustion,
}

impl NemesisKind {
    /// Parses `partition,kill,...`; unknown or unsupported names are an error naming them.
    pub fn parse_list(text: &str) -> Result<Vec<NemesisKind>, String> {
        let mut out = Vec::new();
        for name in text.split(',').map(str::trim).filter(|s| !s.is_empty()) {
            let kind = match name {
                "partition" => NemesisKind::Partition,
                "kill" => NemesisKind::Kill,
                "pause" => NemesisKind::Pause,
                "lose-unfsynced" => NemesisKind::LoseUnfsynced,
                "power-loss" => NemesisKind::PowerLoss,
                "namesrv" => NemesisKind::Namesrv,
                "clock" | "clock-skew" => NemesisKind::Clock,
                "membership" => NemesisKind::Membership,
                "wipe" | "disk-wipe" => NemesisKind::Wipe,
                "corrupt" | "bit-rot" => NemesisKind::Corrupt,
                "disk-full" => NemesisKind::DiskFull,
                "fd-exhaustion" => NemesisKind::FdExhaustion,
                other => {
                    return Err(format!(
                        "unknown nemesis {other:?} (partition, kill, pause, lose-unfsynced, power-loss, namesrv, \
                         clock, membership, wipe, corrupt, disk-full, fd-exhaustion)"
                    ));
                }
            };
            if !out.contains(&kind) {
                out.push(kind);
            }
        }
        Ok(out)
    }
}

/// Which node(s) a process fault hits.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    /// The group's leader when the fault starts.
    Leader(String),
    /// One node by name.
    Node(String),
    /// Every replica of a group at once.
    Group(String),
}

/// One fault.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Fault {
    /// A partition of one group.
    Partition {
        /// The group.
        group: String,
        /// The shape.
        kind: PartitionKind,
    },
    /// The NameServer cut from everyone.
    IsolateNamesrv,
    /// kill -9, restart after the hold.
    Kill(Target),
    /// SIGSTOP, SIGCONT after the hold.
    Pause(Target),
    /// kill -9 + cut to the durable watermark, restart after the hold.
    LoseUnfsynced(Target),
    /// kill -9 + the whole store deleted, restart (empty, same id) after the hold.
    Wipe(Target),
    /// kill -9 + one fsynced entry byte flipped, restart at once; checked and rebuilt at heal.
    Corrupt(Target),
    /// Wall clocks of some nodes of a group moved by the given offsets (ms), each picked in the
    /// group by index at apply time.
    ClockSkew {
        /// The group.
        group: String,
        /// (member index, offset ms).
        offsets: Vec<(usize, i64)>,
    },
    /// The file systems of the targets filled to the last byte; freed after the hold.
    DiskFull(Target),
    /// kill -9, restart with at most `limit` open files; stopped and restarted normally at heal.
    FdExhaustion {
        /// Who.
        target: Target,
        /// RLIMIT_NOFILE of the restarted process.
        limit: u64,
    },
    /// One member of a group replaced by a spare.
    ReplaceMember {
        /// The group.
        group: String,
        /// Which member goes.
        victim: Victim,
        /// Add the spare before removing the victim (3 → 4 → 3) instead of after (3 → 2 → 3).
        add_first: bool,
    },
}

fn target_label(t: &Target) -> String {
    match t {
        Target::Leader(g) => format!("leader of {g}"),
        Target::Node(n) => n.clone(),
        Target::Group(g) => format!("all of {g}"),
    }
}

impl Fault {
    /// A short name for the history and the timeline.
    pub fn label(&self) -> String {
        match self {
            Fault::Partition { group, kind } => format!("partition {group} {}", kind.name()),
            Fault::IsolateNamesrv => "isolate namesrv".to_owned(),
            Fault::Kill(t) => format!("kill {}", target_label(t)),
            Fault::Pause(t) => format!("pause {}", target_label(t)),
            Fault::LoseUnfsynced(t) => format!("lose-unfsynced {}", target_label(t)),
            Fault::Wipe(t) => format!("wipe {}", target_label(t)),
            Fault::Corrupt(t) => format!("corrupt {}", target_label(t)),
            Fault::DiskFull(t) => format!("disk-full {}", target_label(t)),
            Fault::FdExhaustion { target, limit } => format!("fd-exhaustion {} nofile {limit}", target_label(target)),
            Fault::ClockSkew { group, offsets } => {
                let list = offsets.iter().map(|(i, ms)| format!("#{i} {ms:+}ms")).collect::<Vec<_>>();
                format!("clock skew {group} {}", list.join(" "))
            }
            Fault::ReplaceMember { group, victim, add_first } => {
                let who = match victim {
                    Victim::Leader => "leader".to_owned(),
                    Victim::Follower(i) => format!("follower #{i}"),
                };
                let order = if *add_first { "add first" } else { "remove first" };
                format!("replace {who} of {group} ({order})")
            }
        }
    }
}

/// What must be undone.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Applied {
    /// Firewall rules to flush.
    Partitioned,
    /// Nodes to restart.
    Stopped(Vec<String>),
    /// Nodes to resume.
    Paused(Vec<String>),
    /// Clock skew files to remove.
    Skewed(Vec<std::path::PathBuf>),
    /// A group whose membership must be brought back to its replica count.
    Membership(String),
    /// Nodes running on a corrupted disk: each must report itself damaged, then is rebuilt.
    Corrupted(Vec<(String, corrupt::FlipReport)>),
    /// Nodes whose file system is full: the fillers to delete; each node must still be running.
    DiskFilled(Vec<(String, std::path::PathBuf)>),
    /// Nodes running under a low open-files limit: stop, restart with the usual one.
    FdLimited(Vec<String>),
}

/// A scheduled node, or, when a membership change removed it, the current member at its position
/// among the group's `initial` replicas.
pub fn stand_in(initial: &[String], members: &[String], name: &str) -> Option<String> {
    if members.iter().any(|m| m == name) {
        return Some(name.to_owned());
    }
    let index = initial.iter().position(|n| n == name)?;
    members.get(index % members.len().max(1)).cloned()
}

fn resolve_node(db: &Db, name: &str) -> Option<String> {
    let group = &db.layout.node(name)?.group;
    let initial: Vec<String> = db.layout.members(group).iter().map(|n| n.name.clone()).collect();
    stand_in(&initial, db.member_names(group), name)
}

async fn resolve(db: &Db, t: &Target, rng: &mut impl Rng) -> Vec<String> {
    match t {
        Target::Node(n) => resolve_node(db, n).into_iter().collect(),
        Target::Group(g) => db.member_names(g).to_vec(),
        Target::Leader(g) => match db.leader_of(g).await.filter(|n| db.member_names(g).contains(n)) {
            Some(n) => vec![n],
            None => {
                // No known leader (mid-election): any member stands in, the fault still applies.
                let members = db.members(g);
                members.get(rng.random_range(0..members.len().max(1))).map(|n| vec![n.name.clone()]).unwrap_or_default()
            }
        },
    }
}

/// Applies `fault`; returns what [`heal`] must undo and a description of the resolved targets.
/// Membership changes are recorded in `rec` as they happen.
pub async fn apply(
    db: &mut Db,
    fault: &Fault,
    rng: &mut impl Rng,
    rec: &Recorder,
) -> Result<(Applied, String), DbError> {
    match fault {
        Fault::ReplaceMember { group, victim, add_first } => {
            let desc = membership::replace(db, rec, group, *victim, *add_first).await;
            // Healing reconciles whatever part of the change happened.
            let desc = desc.unwrap_or_else(|e| format!("incomplete: {e}"));
            Ok((Applied::Membership(group.clone()), desc))
        }
        Fault::Partition { group, kind } => {
            let members = db.members(group);
            let leader_name = db.leader_of(group).await;
            let leader = leader_name.and_then(|l| members.iter().position(|n| n.name == l));
            let pairs = partition::cuts(*kind, members.len(), leader, rng);
            let cuts: Vec<(Ipv4Addr, Ipv4Addr)> = pairs.iter().map(|&(a, b)| (members[a].ip, members[b].ip)).collect();
            let desc =
                pairs.iter().map(|&(a, b)| format!("{}-{}", members[a].name, members[b].name)).collect::<Vec<_>>();
            db.firewall().partition(&cuts)?;
            Ok((Applied::Partitioned, format!("cut {}", desc.join(" "))))
        }
        Fault::IsolateNamesrv => {
            // With several NameServers, one of them or all at once: clients and brokers must go on
            // with any NameServer left, and find every route again once all come back.
            let all = &db.layout.namesrvs;
            let pick = rng.random_range(0..if all.len() > 1 { all.len() + 1 } else { 1 });
            let cut: Vec<_> = if pick < all.len() && all.len() > 1 { vec![&all[pick]] } else { all.iter().collect() };
            let cuts: Vec<(Ipv4Addr, Ipv4Addr)> = cut
                .iter()
                .flat_map(|ns| db.layout.all_nodes().map(|n| (ns.ip, n.ip)).chain([(ns.ip, CLIENT_IP)]))
                .collect();
            db.firewall().partition(&cuts)?;
            let names = cut.iter().map(|ns| ns.name.as_str()).collect::<Vec<_>>().join(" ");
            Ok((Applied::Partitioned, format!("{names} cut from all")))
        }
        Fault::Kill(t) => {
            let names = resolve(db, t, rng).await;
            for n in &names {
                db.kill9(n).await?;
            }
            Ok((Applied::Stopped(names.clone()), format!("killed {}", names.join(" "))))
        }
        Fault::Pause(t) => {
            let names = resolve(db, t, rng).await;
            for n in &names {
                db.pause(n)?;
            }
            Ok((Applied::Paused(names.clone()), format!("paused {}", names.join(" "))))
        }
        Fault::ClockSkew { group, offsets } => {
            let members = db.members(group);
            let mut files = Vec::new();
            let mut desc = Vec::new();
            for &(index, ms) in offsets {
                let Some(node) = members.get(index % members.len().max(1)) else { continue };
                let path = node.clock_skew_path();
                std::fs::write(&path, ms.to_string())
                    .map_err(|source| DbError::Io { path: path.display().to_string(), source })?;
                desc.push(format!("{} {ms:+}ms", node.name));
                files.push(path);
            }
            Ok((Applied::Skewed(files), format!("skewed {}", desc.join(" "))))
        }
        Fault::LoseUnfsynced(t) => {
            let names = resolve(db, t, rng).await;
            // Kill all first: a power loss hits the targets at the same instant.
            for n in &names {
                db.kill9(n).await?;
            }
            let mut desc = Vec::new();
            for n in &names {
                let Some(spec) = db.layout.node(n) else { continue };
                match lose_unfsynced::cut_to_durable(&spec.store_dir()) {
                    Ok(r) => desc.push(format!("{n} cut at {} ({} bytes zeroed)", r.durable_pos, r.bytes_zeroed)),
                    Err(e) => desc.push(format!("{n} not cut: {e}")),
                }
            }
            Ok((Applied::Stopped(names), desc.join("; ")))
        }
        Fault::Wipe(t) => {
            let names = resolve(db, t, rng).await;
            let mut desc = Vec::new();
            for n in &names {
                db.kill9(n).await?;
                let Some(spec) = db.layout.node(n) else { continue };
                let dir = spec.store_dir();
                match std::fs::remove_dir_all(&dir) {
                    Ok(()) => desc.push(format!("{n} store deleted")),
                    Err(e) if e.kind() == std::io::ErrorKind::NotFound => desc.push(format!("{n} had no store")),
                    Err(source) => return Err(DbError::Io { path: dir.display().to_string(), source }),
                }
            }
            Ok((Applied::Stopped(names), desc.join("; ")))
        }
        Fault::DiskFull(t) => {
            let names = resolve(db, t, rng).await;
            let mut fillers = Vec::new();
            let mut desc = Vec::new();
            for n in &names {
                let Some(disk) = db.layout.node(n).map(|spec| spec.disk_dir()) else { continue };
                let filled = tokio::task::spawn_blocking(move || crate::disk::fill(&disk))
                    .await
                    .map_err(|e| DbError::Io { path: n.clone(), source: std::io::Error::other(e) })?;
                match filled {
                    Ok(f) => {
                        desc.push(format!("{n} filled ({} MiB)", f.bytes >> 20));
                        fillers.push((n.clone(), f.path));
                    }
                    Err(source) => {
                        // What was written so far is still freed at heal.
                        let path = db.layout.node(n).map(|s| s.disk_dir().join(crate::disk::FILLER_FILE_NAME));
                        fillers.extend(path.map(|p| (n.clone(), p)));
                        desc.push(format!("{n} not filled: {source}"));
                    }
                }
            }
            Ok((Applied::DiskFilled(fillers), desc.join("; ")))
        }
        Fault::FdExhaustion { target, limit } => {
            let names = resolve(db, target, rng).await;
            let mut desc = Vec::new();
            for n in &names {
                db.kill9(n).await?;
                // A limit too low to boot is a finding only if the node then misbehaves: the heal
                // restarts it either way.
                match db.start_with_nofile(n, Some(*limit), Duration::from_millis(RESTART_READY_TIMEOUT_MS)).await {
                    Ok(()) => desc.push(format!("{n} restarted with nofile {limit}")),
                    Err(e) => desc.push(format!("{n} did not boot with nofile {limit}: {e}")),
                }
            }
            Ok((Applied::FdLimited(names), desc.join("; ")))
        }
        Fault::Corrupt(t) => {
            let names = resolve(db, t, rng).await;
            let mut flipped = Vec::new();
            let mut desc = Vec::new();
            for n in &names {
                let Some(dir) = db.layout.node(n).map(|spec| spec.store_dir()) else { continue };
                db.kill9(n).await?;
                match corrupt::flip_entry_byte(&dir, rng) {
                    Ok(report) => {
                        desc.push(format!(
                            "{n}: a byte of entry {} flipped at {} (durable to {})",
                            report.index, report.pos, report.durable_pos
                        ));
                        flipped.push((n.clone(), report));
                    }
                    // Nothing to check at heal: counted apart, so a run whose flips all failed
                    // cannot read as "every corrupted replica reported damaged".
                    Err(e) => {
                        tracing::warn!(node = %n, error = %e, "corrupt: no byte flipped");
                        desc.push(format!("{n} not corrupted: {e}"));
                    }
                }
                // Heal checks and rebuilds the node whether or not it came back: a replica that
                // cannot even boot on a corrupted disk fails the run there.
                if let Err(e) = db.start(n, Duration::from_millis(RESTART_READY_TIMEOUT_MS)).await {
                    desc.push(format!("{n} did not boot on the corrupted disk: {e}"));
                }
            }
            Ok((Applied::Corrupted(flipped), desc.join("; ")))
        }
    }
}

/// Asks `name` for its own view until it answers, and fails unless it reports its store damaged.
async fn expect_damaged(db: &Db, name: &str, report: &corrupt::FlipReport) -> Result<String, DbError> {
    let addr = db.layout.node(name).map(|n| n.remoting_addr()).ok_or_else(|| DbError::UnknownNode(name.to_owned()))?;
    let deadline = tokio::time::Instant::now() + Duration::from_millis(DAMAGE_REPORT_TIMEOUT_MS);
    loop {
        match db.admin().group_status(&addr).await {
            Ok(view) => {
                return view.damaged.ok_or_else(|| DbError::Undetected {
                    node: name.to_owned(),
                    message: format!(
                        "runs as {} with a byte of fsynced entry {} flipped at {}: the corruption went undetected",
                        view.role, report.index, report.pos
                    ),
                });
            }
            Err(e) if tokio::time::Instant::now() >= deadline => {
                return Err(DbError::Undetected { node: name.to_owned(), message: format!("no status answer: {e}") });
            }
            Err(_) => tokio::time::sleep(Duration::from_millis(DAMAGE_REPORT_RETRY_MS)).await,
        }
    }
}

/// Rebuilds `name` as an operator replaces a corrupted disk: kill -9, its store deleted (already
/// gone is fine), restart empty under the same id. A store that cannot be deleted leaves the node
/// stopped rather than restarted on the corrupted disk.
async fn rebuild(db: &mut Db, name: &str) -> Result<(), DbError> {
    db.kill9(name).await?;
    if let Some(spec) = db.layout.node(name) {
        let dir = spec.store_dir();
        match std::fs::remove_dir_all(&dir) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(source) => return Err(DbError::Io { path: dir.display().to_string(), source }),
        }
    }
    db.start(name, Duration::from_millis(RESTART_READY_TIMEOUT_MS)).await
}

/// Undoes `applied` (membership reconciles are recorded in `rec`).
pub async fn heal(db: &mut Db, applied: &Applied, rec: &Recorder) -> Result<(), DbError> {
    match applied {
        Applied::Membership(group) => {
            let deadline = tokio::time::Instant::now() + Duration::from_millis(membership::MEMBERSHIP_RECONCILE_MS);
            let desc = membership::reconcile(db, rec, group, deadline).await?;
            tracing::info!(%group, %desc, "membership reconciled");
            Ok(())
        }
        Applied::Skewed(files) => {
            for f in files {
                if let Err(e) = std::fs::remove_file(f)
                    && e.kind() != std::io::ErrorKind::NotFound
                {
                    return Err(DbError::Io { path: f.display().to_string(), source: e });
                }
            }
            Ok(())
        }
        Applied::Partitioned => Ok(db.firewall().heal()?),
        Applied::Stopped(names) => {
            for n in names {
                db.start(n, Duration::from_millis(RESTART_READY_TIMEOUT_MS)).await?;
            }
            Ok(())
        }
        Applied::Paused(names) => {
            for n in names {
                db.resume(n)?;
            }
            Ok(())
        }
        Applied::DiskFilled(fillers) => {
            let mut first_error = None;
            for (n, filler) in fillers {
                if let Err(source) = crate::disk::free(filler) {
                    first_error.get_or_insert(DbError::Io { path: filler.display().to_string(), source });
                }
                // A full disk is an error to report, never a reason to die: no restart here, so a
                // replica that does not recover by itself shows in the checkers.
                if !db.is_running(n) {
                    first_error.get_or_insert(DbError::Exited {
                        node: n.clone(),
                        message: "exited while its disk was full".into(),
                    });
                }
            }
            first_error.map_or(Ok(()), Err)
        }
        Applied::FdLimited(names) => {
            for n in names {
                db.terminate(n, Duration::from_millis(FD_LIMIT_STOP_GRACE_MS)).await?;
                db.start_with_nofile(n, None, Duration::from_millis(RESTART_READY_TIMEOUT_MS)).await?;
            }
            Ok(())
        }
        Applied::Corrupted(flipped) => {
            // Every node is checked and rebuilt whatever happened to another; the first failure
            // (an undetected corruption first of all) is returned at the end.
            let mut first_error = None;
            for (n, report) in flipped {
                match expect_damaged(db, n, report).await {
                    Ok(why) => tracing::info!(node = %n, %why, "the corrupted replica reports its store damaged"),
                    Err(e) => {
                        first_error.get_or_insert(e);
                    }
                }
                if let Err(e) = rebuild(db, n).await {
                    first_error.get_or_insert(e);
                }
            }
            first_error.map_or(Ok(()), Err)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nemesis_lists_parse_and_unsupported_kinds_say_why() {
        assert_eq!(
            NemesisKind::parse_list("partition, kill,pause,lose-unfsynced,kill"),
            Ok(vec![NemesisKind::Partition, NemesisKind::Kill, NemesisKind::Pause, NemesisKind::LoseUnfsynced])
        );
        assert_eq!(NemesisKind::parse_list("clock"), Ok(vec![NemesisKind::Clock]));
        assert_eq!(
            NemesisKind::parse_list("membership,kill,partition"),
            Ok(vec![NemesisKind::Membership, NemesisKind::Kill, NemesisKind::Partition])
        );
        assert!(NemesisKind::parse_list("bogus").is_err_and(|e| e.contains("unknown") && e.contains("membership")));
        assert_eq!(NemesisKind::parse_list("wipe,disk-wipe"), Ok(vec![NemesisKind::Wipe]));
        assert_eq!(Fault::Wipe(Target::Node("n12".into())).label(), "wipe n12");
        assert_eq!(NemesisKind::parse_list("corrupt,bit-rot"), Ok(vec![NemesisKind::Corrupt]));
        assert_eq!(Fault::Corrupt(Target::Leader("broker-a".into())).label(), "corrupt leader of broker-a");
        assert_eq!(
            NemesisKind::parse_list("disk-full,fd-exhaustion"),
            Ok(vec![NemesisKind::DiskFull, NemesisKind::FdExhaustion])
        );
        assert_eq!(Fault::DiskFull(Target::Group("broker-a".into())).label(), "disk-full all of broker-a");
        assert_eq!(
            Fault::FdExhaustion { target: Target::Node("n12".into()), limit: 90 }.label(),
            "fd-exhaustion n12 nofile 90"
        );
    }

    #[test]
    fn a_removed_node_is_stood_in_for_by_the_member_at_its_position() {
        let names = |v: &[&str]| v.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>();
        let initial = names(&["n11", "n12", "n13"]);
        let members = names(&["n11", "n13", "n100"]);
        assert_eq!(stand_in(&initial, &members, "n13").as_deref(), Some("n13"), "still a member");
        assert_eq!(stand_in(&initial, &members, "n12").as_deref(), Some("n13"), "position 1");
        assert_eq!(stand_in(&initial, &names(&["n100", "n101"]), "n13").as_deref(), Some("n100"), "modulo");
        assert_eq!(stand_in(&initial, &members, "n99"), None, "no such node");
        assert_eq!(stand_in(&initial, &[], "n12"), None, "no member left");
    }

    #[test]
    fn labels_name_the_target() {
        assert_eq!(Fault::Kill(Target::Leader("broker-a".into())).label(), "kill leader of broker-a");
        assert_eq!(
            Fault::Partition { group: "broker-a".into(), kind: PartitionKind::Halves }.label(),
            "partition broker-a halves"
        );
        assert_eq!(Fault::LoseUnfsynced(Target::Group("broker-b".into())).label(), "lose-unfsynced all of broker-b");
        let replace = Fault::ReplaceMember { group: "broker-a".into(), victim: Victim::Follower(1), add_first: true };
        assert_eq!(replace.label(), "replace follower #1 of broker-a (add first)");
    }
}
