//! Issue 31's scenario with real processes: three `raftmq broker` children, each storing on a small
//! tmpfs of its own (mounted in this test's private mount namespace; root only), filled by sends
//! with the settings users have (1 GiB CommitLog segments, default watermarks and intervals).
//!
//! - no signal kills a process: every broker is alive at every step (exit statuses checked);
//! - clients get SERVICE_NOT_AVAILABLE saying the disk is full ("maybe disk full");
//! - the full leader hands leadership to a replica with room, and the group keeps taking sends;
//! - `/readyz` (503) and `/api/v1/status` name the fault (`disk_full`);
//! - once space is freed (at most what the sends wrote: not a segment more) the group serves again
//!   without a restart, and every replica becomes ready;
//! - every acknowledged message is on every replica, identical on all three;
//! - a restart on disks with only a few MiB free comes up and still holds everything; it allocates
//!   nothing but the top-up of the zero-filled window ahead of the log end (at most one 1 MiB step;
//!   the store's allocated blocks, as `du` counts them, before and after).
//!
//! Every child is spawned from the test's one thread (a current-thread runtime), the thread that
//! entered the mount namespace, so the brokers see the tmpfs mounts and the host never does.

use crate::harness;

use std::collections::BTreeMap;
use std::collections::BTreeSet;
use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::Mutex;
use std::sync::atomic::AtomicBool;
use std::sync::atomic::Ordering;
use std::time::Duration;
use std::time::Instant;

use anyhow::Context;
use anyhow::Result;
use anyhow::ensure;
use harness::group::BROKER_NAME;
use harness::group::drain_queue;
use harness::group::free_port;
use harness::group::replica_configs;
use harness::processes::BrokerProcesses;
use raftmq_broker::BrokerConfig;
use raftmq_client::Admin;
use raftmq_client::Producer;
use raftmq_common::message::Message;
use raftmq_common::message::MessageExt;
use raftmq_common::protocol::body::topic::TopicConfig;
use raftmq_common::remoting::RemotingClient;
use raftmq_namesrv::NameServer;
use raftmq_namesrv::NamesrvConfig;
use raftmq_raft::config::SEGMENT_ZERO_STEP_BYTES;
use rand::RngCore;
use rand::SeedableRng;
use rand::rngs::StdRng;

const WAIT: Duration = Duration::from_secs(60);
const TOPIC: &str = "T24_DISK_FULL";
const QUEUES: i32 = 4;
const SENDERS: usize = 4;
/// Size of each replica's file system.
const DISK_BYTES: u64 = 96 << 20;
/// Free on the leader's disk when the sends start (so it fills first); the others have
/// [`FOLLOWER_EXTRA_ROOM_BYTES`] more.
const LEADER_ROOM_BYTES: u64 = 20 << 20;
const FOLLOWER_EXTRA_ROOM_BYTES: u64 = 8 << 20;
/// A file on each disk from before the sends; to resume, as many bytes as the sends wrote (at
/// most) are cut from it.
const FREEABLE_BYTES: u64 = 28 << 20;
/// Free space left on each disk for the restart.
const RESTART_FREE_BYTES: u64 = 3 << 20;
const BODY_BYTES: usize = 16 << 10;
/// Seed of the senders' random bodies (sender `s` uses `BODY_SEED + s`).
const BODY_SEED: u64 = 24;

fn mount_namespace() -> std::result::Result<(), String> {
    nix::sched::unshare(nix::sched::CloneFlags::CLONE_NEWNS).map_err(|e| format!("unshare(CLONE_NEWNS): {e}"))?;
    nix::mount::mount(
        None::<&str>,
        "/",
        None::<&str>,
        nix::mount::MsFlags::MS_REC | nix::mount::MsFlags::MS_PRIVATE,
        None::<&str>,
    )
    .map_err(|e| format!("making / private: {e}"))
}

fn mount_tmpfs(dir: &Path, bytes: u64) -> std::result::Result<(), String> {
    std::fs::create_dir_all(dir).map_err(|e| e.to_string())?;
    let options = format!("size={bytes}");
    nix::mount::mount(Some("tmpfs"), dir, Some("tmpfs"), nix::mount::MsFlags::empty(), Some(options.as_str()))
        .map_err(|e| format!("mount tmpfs on {}: {e}", dir.display()))
}

fn free_bytes(dir: &Path) -> Result<u64> {
    let v = nix::sys::statvfs::statvfs(dir)?;
    Ok(v.blocks_available() * v.fragment_size())
}

/// Bytes allocated on disk by every file under `dir` (what `du` counts: st_blocks).
fn allocated_bytes(dir: &Path) -> u64 {
    let mut total = 0;
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).into_iter().flatten().flatten() {
            let Ok(m) = e.metadata() else { continue };
            if m.is_dir() {
                stack.push(e.path());
            } else {
                total += m.blocks() * 512;
            }
        }
    }
    total
}

/// A file of `bytes` zeros (allocated: written, not sparse).
fn write_file(path: &Path, bytes: u64) -> Result<()> {
    std::fs::write(path, vec![0u8; usize::try_from(bytes)?]).with_context(|| format!("writing {}", path.display()))
}

/// The mount point of replica `id`'s file system.
fn disk(dir: &Path, id: u64) -> PathBuf {
    dir.join(format!("disk-{id}"))
}

/// Three replicas with the settings users have, except addresses, each storing on its own tmpfs.
fn replicas(dir: &Path, namesrv_addr: &str) -> Result<BrokerProcesses> {
    let mut configs = replica_configs(dir, namesrv_addr, 3)?;
    let defaults = BrokerConfig::default();
    for (id, c) in configs.iter_mut() {
        // The harness shrinks segments and index files and checkpoints often, which this scenario
        // must not depend on.
        c.mapped_file_size_commit_log = defaults.mapped_file_size_commit_log;
        c.max_hash_slot_num = defaults.max_hash_slot_num;
        c.max_index_num = defaults.max_index_num;
        c.raft_checkpoint_interval_ms = defaults.raft_checkpoint_interval_ms;
        c.admin_port = free_port();
        c.store_path_root_dir = disk(dir, *id).join("store");
    }
    Ok(BrokerProcesses::new(dir, configs))
}

/// The whole answer (status line, headers, body) to `GET path` on an admin HTTP address.
async fn http_get(addr: &str, path: &str) -> Result<String> {
    use tokio::io::AsyncReadExt;
    use tokio::io::AsyncWriteExt;
    let mut stream = tokio::net::TcpStream::connect(addr).await?;
    stream.write_all(format!("GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n").as_bytes()).await?;
    let mut answer = String::new();
    tokio::time::timeout(WAIT, stream.read_to_string(&mut answer)).await??;
    Ok(answer)
}

/// A deadline of [`WAIT`] for a condition polled every 50 ms.
struct Deadline {
    at: Instant,
    what: String,
}

impl Deadline {
    fn new(what: impl Into<String>) -> Self {
        Deadline { at: Instant::now() + WAIT, what: what.into() }
    }

    /// Fails once the deadline passed, else waits before the next poll.
    async fn tick(&self) -> Result<()> {
        ensure!(Instant::now() < self.at, "{}: not within {WAIT:?}", self.what);
        tokio::time::sleep(Duration::from_millis(50)).await;
        Ok(())
    }
}

/// The routed leader, polled until there is one other than `not`.
async fn wait_leader(admin: &Admin, procs: &mut BrokerProcesses, not: Option<u64>) -> Result<u64> {
    let d = Deadline::new(format!("a routed leader other than {not:?}"));
    loop {
        procs.all_alive()?;
        if let Some(l) = routed_leader(admin, procs).await.filter(|l| Some(*l) != not) {
            return Ok(l);
        }
        d.tick().await?;
    }
}

/// Polls the senders' outcomes until `done` holds, every broker alive meanwhile.
async fn wait_seen(
    procs: &mut BrokerProcesses,
    seen: &Mutex<Outcomes>,
    what: &str,
    done: impl Fn(&Outcomes) -> bool,
) -> Result<()> {
    let d = Deadline::new(what);
    loop {
        procs.all_alive()?;
        if snapshot(seen, &done) {
            return Ok(());
        }
        d.tick().await.with_context(|| {
            snapshot(seen, |s| format!("{} acked, other errors {:?}", s.acked.len(), s.other_errors))
        })?;
    }
}

/// Polls until replica `addr` holds exactly `want`.
async fn wait_identical(
    procs: &mut BrokerProcesses,
    client: &RemotingClient,
    id: u64,
    want: &[Vec<(i64, String)>],
) -> Result<()> {
    let d = Deadline::new(format!("replica {id} identical to the leader"));
    let addr = procs.addr(id);
    loop {
        procs.all_alive()?;
        if identities(client, &addr).await.is_ok_and(|have| have == want) {
            return Ok(());
        }
        d.tick().await?;
    }
}

/// The group's leader as the NameServer routes it (brokerId 0).
async fn routed_leader(admin: &Admin, procs: &BrokerProcesses) -> Option<u64> {
    let addr = admin.master_addr_of_group(BROKER_NAME).await.ok()?;
    procs.id_of(&addr)
}

/// Every queue of `TOPIC` on replica `addr`: (queue offset, UNIQ_KEY) of every stored message.
async fn identities(client: &RemotingClient, addr: &str) -> Result<Vec<Vec<(i64, String)>>> {
    let mut queues = Vec::new();
    for q in 0..QUEUES {
        let messages: Vec<MessageExt> = drain_queue(client, addr, TOPIC, q).await?;
        queues.push(
            messages.iter().map(|m| (m.queue_offset, m.message.uniq_key().unwrap_or_default().to_owned())).collect(),
        );
    }
    Ok(queues)
}

/// What the senders saw.
#[derive(Debug, Default)]
struct Outcomes {
    /// UNIQ_KEYs of the acknowledged sends.
    acked: Vec<String>,
    /// When the last SEND_OK came.
    last_ack: Option<Instant>,
    /// Refusals that said the disk is full, and the last of them.
    disk_full_refusals: usize,
    disk_full_remark: Option<String>,
    /// Every other error, by text (for the failure message).
    other_errors: BTreeMap<String, usize>,
}

fn spawn_senders(producer: &Arc<Producer>, stop: &Arc<AtomicBool>, seen: &Arc<Mutex<Outcomes>>) {
    for s in 0..SENDERS {
        let (producer, stop, seen) = (Arc::clone(producer), Arc::clone(stop), Arc::clone(seen));
        tokio::spawn(async move {
            let mut rng = StdRng::seed_from_u64(BODY_SEED + s as u64);
            let mut i = 0usize;
            while !stop.load(Ordering::Acquire) {
                // Random bytes: the SDK compresses bodies over 4 KiB, and padding would shrink to nothing.
                let mut body = format!("{s}-{i}-").into_bytes();
                let prefix = body.len();
                body.resize(BODY_BYTES, 0);
                rng.fill_bytes(&mut body[prefix..]);
                let result = producer.send(Message::new(TOPIC, body)).await;
                let mut seen = seen.lock().unwrap_or_else(|p| p.into_inner());
                match result {
                    Ok(r) => {
                        seen.acked.push(r.msg_id);
                        seen.last_ack = Some(Instant::now());
                    }
                    Err(e) => {
                        let text = e.to_string();
                        if text.contains("SERVICE_NOT_AVAILABLE") && text.contains("disk is full") {
                            seen.disk_full_refusals += 1;
                            seen.disk_full_remark = Some(text);
                        } else {
                            *seen.other_errors.entry(text).or_default() += 1;
                        }
                    }
                }
                drop(seen);
                i += 1;
            }
        });
    }
}

fn snapshot<T>(seen: &Mutex<Outcomes>, f: impl FnOnce(&Outcomes) -> T) -> T {
    f(&seen.lock().unwrap_or_else(|p| p.into_inner()))
}

#[tokio::test]
async fn a_group_on_full_disks_refuses_hands_over_serves_again_once_freed_and_loses_nothing() -> Result<()> {
    if let Err(why) = mount_namespace() {
        let why = format!("it needs root to mount small file systems in a private mount namespace: {why}");
        raftmq_common::test_skip::announce_skip("t24_disk_full", &why);
        return Ok(());
    }
    let dir = tempfile::tempdir()?;
    for id in 1..=3 {
        if let Err(why) = mount_tmpfs(&disk(dir.path(), id), DISK_BYTES) {
            let why = format!("cannot mount a {DISK_BYTES}-byte tmpfs: {why}");
            raftmq_common::test_skip::announce_skip("t24_disk_full", &why);
            return Ok(());
        }
    }
    let namesrv = NameServer::start(NamesrvConfig {
        listen_port: 0,
        bind_address: "127.0.0.1".into(),
        kv_config_path: String::new(),
        ..NamesrvConfig::default()
    })
    .await?;
    let namesrv_addr = namesrv.local_addr().to_string();
    let mut procs = replicas(dir.path(), &namesrv_addr)?;
    let result = scenario(&mut procs, &namesrv_addr).await;
    if result.is_err() {
        procs.dump_logs();
    }
    procs.kill_all().await?;
    namesrv.shutdown().await;
    result
}

async fn scenario(procs: &mut BrokerProcesses, namesrv_addr: &str) -> Result<()> {
    for id in 1..=3 {
        procs.start(id)?;
    }
    let admin = Admin::new(namesrv_addr)?;
    let first = wait_leader(&admin, procs, None).await?;
    let config = TopicConfig { read_queue_nums: QUEUES, write_queue_nums: QUEUES, ..TopicConfig::new(TOPIC) };
    admin.create_topic(&procs.addr(first), &config).await?;
    let producer = Arc::new(
        Producer::builder("t24_producer")
            .namesrv_addr(namesrv_addr)
            .send_timeout(Duration::from_secs(3))
            .retry_times_when_send_failed(0)
            .build()?,
    );
    producer.start().await?;
    let warmup = producer.send(Message::new(TOPIC, "warm-up")).await?;
    let client = RemotingClient::new();
    // Every replica holds the warm-up message: each has opened its files.
    for id in 1..=3 {
        let d = Deadline::new(format!("replica {id} holds the warm-up message"));
        let addr = procs.addr(id);
        while !identities(&client, &addr).await.is_ok_and(|q| q.iter().flatten().any(|(_, k)| *k == warmup.msg_id)) {
            d.tick().await?;
        }
    }

    // The leader's disk gets LEADER_ROOM free, the others more; each holds FREEABLE_BYTES to free from.
    let leader = wait_leader(&admin, procs, None).await?;
    for id in 1..=3 {
        let disk = disk(procs.dir(), id);
        let room = if id == leader { LEADER_ROOM_BYTES } else { LEADER_ROOM_BYTES + FOLLOWER_EXTRA_ROOM_BYTES };
        let free = free_bytes(&disk)?;
        ensure!(free > room + FREEABLE_BYTES, "replica {id}: only {free} bytes free at the start");
        write_file(&disk.join("freed-later"), FREEABLE_BYTES)?;
        write_file(&disk.join("other-data"), free - FREEABLE_BYTES - room)?;
    }
    let pids = procs.pids();
    eprintln!("bodies: {BODY_BYTES} random bytes, seed {BODY_SEED}");
    let stop = Arc::new(AtomicBool::new(false));
    let seen = Arc::new(Mutex::new(Outcomes::default()));
    spawn_senders(&producer, &stop, &seen);

    // The leader fills first and hands leadership over; the group keeps taking sends.
    let next = wait_leader(&admin, procs, Some(leader)).await?;
    let acked_at_handover = snapshot(&seen, |s| s.acked.len());
    eprintln!("leader {leader} (full) handed over to {next} after {acked_at_handover} acks");
    wait_seen(procs, &seen, "sends acknowledged by the new leader", |s| s.acked.len() >= acked_at_handover + 20)
        .await?;
    let readyz = http_get(&procs.admin_http(leader), "/readyz").await?;
    ensure!(readyz.starts_with("HTTP/1.1 503") && readyz.contains("disk_full"), "/readyz of {leader}: {readyz}");

    // Then every disk is full: sends are refused, and say why.
    let refused_from = snapshot(&seen, |s| s.disk_full_refusals);
    wait_seen(procs, &seen, "every send refused as disk full", |s| {
        s.disk_full_refusals >= refused_from + 20 && s.last_ack.is_some_and(|t| t.elapsed() > Duration::from_secs(3))
    })
    .await?;
    let remark = snapshot(&seen, |s| s.disk_full_remark.clone()).unwrap_or_default();
    eprintln!("refused: {remark}");
    ensure!(remark.contains("maybe disk full") || remark.contains("the broker's disk is full"), "{remark}");
    let current = wait_leader(&admin, procs, None).await?;
    for id in BTreeSet::from([leader, current]) {
        let readyz = http_get(&procs.admin_http(id), "/readyz").await?;
        ensure!(readyz.starts_with("HTTP/1.1 503") && readyz.contains("disk_full"), "/readyz of {id}: {readyz}");
        let status = http_get(&procs.admin_http(id), "/api/v1/status").await?;
        ensure!(status.contains("\"storage_faults\"") && status.contains("disk_full"), "status of {id}: {status}");
    }

    // Free at most what the sends wrote, from a file that was there before them: the group
    // serves again, same processes, every replica ready.
    let acked_full = snapshot(&seen, |s| s.acked.len());
    let written = acked_full as u64 * BODY_BYTES as u64;
    let freed = written.min(FREEABLE_BYTES);
    eprintln!("the sends wrote {written} bytes; freeing {freed} bytes on each disk");
    for id in 1..=3 {
        let file = std::fs::OpenOptions::new().write(true).open(disk(procs.dir(), id).join("freed-later"))?;
        file.set_len(FREEABLE_BYTES - freed)?;
    }
    let freed_at = Instant::now();
    wait_seen(procs, &seen, "sends acknowledged again after freeing space", |s| s.acked.len() >= acked_full + 20)
        .await?;
    eprintln!("serving again {:?} after space was freed", freed_at.elapsed());
    stop.store(true, Ordering::Release);
    for id in 1..=3 {
        let d = Deadline::new(format!("replica {id} ready again"));
        let addr = procs.admin_http(id);
        while !http_get(&addr, "/readyz").await.is_ok_and(|r| r.starts_with("HTTP/1.1 200")) {
            procs.all_alive()?;
            d.tick().await?;
        }
    }
    procs.all_alive()?;
    ensure!(procs.pids() == pids, "no replica was restarted: {pids:?} -> {:?}", procs.pids());
    producer.shutdown().await;
    let acked: BTreeSet<String> = snapshot(&seen, |s| s.acked.iter().cloned().collect());

    // Everything acknowledged is on every replica, and the replicas are identical.
    let leader_now = wait_leader(&admin, procs, None).await?;
    let want = identities(&client, &procs.addr(leader_now)).await?;
    let stored: BTreeSet<String> = want.iter().flatten().map(|(_, k)| k.clone()).collect();
    let lost: Vec<&String> = acked.difference(&stored).collect();
    ensure!(lost.is_empty(), "{} of {} acknowledged messages lost, e.g. {:?}", lost.len(), acked.len(), lost.first());
    for id in 1..=3 {
        wait_identical(procs, &client, id, &want).await?;
    }
    eprintln!("{} acknowledged, {} stored, identical on all 3 replicas", acked.len(), stored.len());

    // A restart (kill -9) on disks with RESTART_FREE_BYTES free allocates nothing new and loses nothing.
    let mut before = BTreeMap::new();
    for id in 1..=3 {
        procs.kill9(id).await?;
        let disk = disk(procs.dir(), id);
        let free = free_bytes(&disk)?;
        write_file(&disk.join("more-data"), free.saturating_sub(RESTART_FREE_BYTES))?;
        before.insert(id, allocated_bytes(&procs.config(id).store_path_root_dir));
    }
    for id in 1..=3 {
        procs.start(id)?;
    }
    for id in 1..=3 {
        wait_identical(procs, &client, id, &want).await?;
    }
    for id in 1..=3 {
        let after = allocated_bytes(&procs.config(id).store_path_root_dir);
        let was = before[&id];
        eprintln!("replica {id}: store allocated {was} bytes before the restart, {after} after");
        // Recovery allocates nothing; the zero-filled window ahead of the log end, refilled in
        // steps while running, is topped up to its full length once after a start.
        ensure!(
            after <= was + SEGMENT_ZERO_STEP_BYTES,
            "the restart of replica {id} allocated {} KiB",
            (after - was) >> 10
        );
    }
    procs.all_alive()?;
    client.close().await;
    admin.shutdown().await;
    Ok(())
}
