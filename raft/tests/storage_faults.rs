//! Storage faults of the log store: a full disk, restarts that must not need free space, and
//! stalls proportional to the index size. Tests that need a small file system mount a tmpfs
//! (root only) and run their body in a child process, so a SIGBUS fails the test instead of
//! killing the harness; without root they say so and pass as skipped.

use std::io::Write;
use std::os::unix::fs::{FileExt, MetadataExt};
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use openraft::storage::{IOFlushed, RaftLogReader, RaftLogStorage};
use raftmq_common::test_skip::announce_skip;
use raftmq_raft::type_config::{Entry, EntryPayload, log_id};
use raftmq_raft::{AppPayload, LogStore, RaftConfig};

fn entry(term: u64, index: u64, body: Vec<u8>) -> Entry {
    Entry { log_id: log_id(term, index), payload: EntryPayload::Normal(AppPayload::new(1, body)) }
}

/// Bytes allocated on disk by every file under `dir` (what `du` counts).
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

/// A size-limited tmpfs mounted on a fresh directory, unmounted on drop.
struct Tmpfs {
    _dir: tempfile::TempDir,
    path: PathBuf,
}

impl Tmpfs {
    /// `None` (with a message) when this process may not mount.
    fn mount(size_mib: u64) -> Option<Self> {
        let dir = tempfile::tempdir().ok()?;
        let path = dir.path().join("fs");
        std::fs::create_dir(&path).ok()?;
        let out = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size_mib}m"), "tmpfs"])
            .arg(&path)
            .output();
        match out {
            Ok(o) if o.status.success() => Some(Self { _dir: dir, path }),
            Ok(o) => {
                let why = format!("cannot mount a small tmpfs: {}", String::from_utf8_lossy(&o.stderr).trim());
                announce_skip("raft storage fault (tmpfs)", &why);
                None
            }
            Err(e) => {
                announce_skip("raft storage fault (tmpfs)", &format!("cannot run mount: {e}"));
                None
            }
        }
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg("-l").arg(&self.path).status();
    }
}

/// Fill the file system holding `dir` up to `leave_bytes` of free space.
fn fill_disk(dir: &Path, leave_bytes: u64) -> anyhow::Result<()> {
    let path = dir.join("filler");
    let mut f = std::fs::File::create(&path)?;
    let chunk = vec![0xA5u8; 64 << 10];
    loop {
        match f.write(&chunk) {
            Ok(0) => break,
            Ok(_) => {}
            Err(e) if e.raw_os_error() == Some(nix::libc::ENOSPC) => break,
            Err(e) => return Err(e.into()),
        }
    }
    // The last partial chunk, page by page.
    let mut len = f.metadata()?.len();
    while f.write_at(&[1u8; 4096], len).is_ok() {
        len += 4096;
    }
    f.set_len(len.saturating_sub(leave_bytes))?;
    f.sync_all()?;
    Ok(())
}

const CHILD_ENV: &str = "RAFTMQ_STORAGE_FAULT_CHILD";

/// Run the test `name` of this binary again in a child process with `CHILD_ENV` = `arg`, so that
/// a signal kills the child, and fail with its output unless it exits cleanly.
fn run_in_child(name: &str, arg: &Path) -> anyhow::Result<()> {
    // The harness names a test by its path below the crate: `storage_faults::<name>`.
    let name = match module_path!().split_once("::") {
        Some((_crate, module)) => format!("{module}::{name}"),
        None => name.to_owned(),
    };
    let out = Command::new(std::env::current_exe()?)
        .args([name.as_str(), "--exact", "--nocapture", "--test-threads=1"])
        .env(CHILD_ENV, arg)
        .output()?;
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    if let Some(sig) = out.status.signal() {
        anyhow::bail!("the child was killed by signal {sig} (7 = SIGBUS):\n{text}");
    }
    anyhow::ensure!(out.status.success() && text.contains("1 passed"), "the child failed ({}):\n{text}", out.status);
    println!("child:\n{text}");
    Ok(())
}

/// Append `1..=n` in batches without waiting for each flush, then sync.
async fn fill(store: &mut LogStore, n: u64, payload: usize) -> anyhow::Result<()> {
    let mut next = 1;
    while next <= n {
        let upto = (next + 4095).min(n);
        let batch: Vec<Entry> = (next..=upto).map(|i| entry(1, i, vec![i as u8; payload])).collect();
        store.append(batch, IOFlushed::noop()).await?;
        next = upto + 1;
    }
    store.sync().await?;
    Ok(())
}

/// Restart and follower-truncation time with the default 160 MiB index files and 1 GiB
/// segments. Run in release: `RAFTMQ_TIMING_ENTRIES=100000,5000000 cargo test --release -p
/// raftmq-raft --test raft storage_faults::timing -- --ignored --nocapture`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "timing figures, run by hand in release"]
async fn timing_restart_and_follower_truncation_with_full_index() -> anyhow::Result<()> {
    let counts = std::env::var("RAFTMQ_TIMING_ENTRIES").unwrap_or_else(|_| "100000".into());
    let payload: usize = std::env::var("RAFTMQ_TIMING_PAYLOAD").ok().and_then(|v| v.parse().ok()).unwrap_or(200);
    for n in counts.split(',').filter_map(|c| c.trim().parse::<u64>().ok()) {
        let dir = tempfile::tempdir_in(std::env::var("RAFTMQ_TIMING_DIR").unwrap_or_else(|_| "/tmp".into()))?;
        let cfg = RaftConfig::default();
        let mut store = LogStore::open(dir.path(), &cfg)?;
        let t = Instant::now();
        fill(&mut store, n, payload).await?;
        let fill_s = t.elapsed().as_secs_f64();
        let t = Instant::now();
        store.truncate_after(Some(log_id(1, n - 100))).await?;
        let first_trunc = t.elapsed();
        drop(store);
        let before = allocated_bytes(dir.path());
        let t = Instant::now();
        let mut store = LogStore::open(dir.path(), &cfg)?;
        let restart = t.elapsed();
        let after = allocated_bytes(dir.path());
        let t = Instant::now();
        store.truncate_after(Some(log_id(1, n - 200))).await?;
        let trunc = t.elapsed();
        let after_trunc = allocated_bytes(dir.path());
        println!(
            "entries {n} x {payload} B (fill {fill_s:.1} s): truncation of 100 {:.3} s; restart {:.3} s, \
             allocated {} -> {} MiB; truncation of 100 more {:.3} s, allocated {} MiB",
            first_trunc.as_secs_f64(),
            restart.as_secs_f64(),
            before >> 20,
            after >> 20,
            trunc.as_secs_f64(),
            after_trunc >> 20
        );
    }
    Ok(())
}

/// Appends batches of 512 entries of `payload` bytes from index `next` until one waits for disk
/// space (polled, with a deadline); returns that append's task and its batch.
async fn append_until_waiting(
    store: &LogStore,
    mut next: u64,
    payload: usize,
) -> anyhow::Result<(tokio::task::JoinHandle<std::io::Result<()>>, Vec<Entry>)> {
    loop {
        let batch: Vec<Entry> = (next..next + 512).map(|i| entry(1, i, vec![i as u8; payload])).collect();
        let (mut s, b) = (store.clone(), batch.clone());
        let task = tokio::spawn(async move { s.append(b, IOFlushed::noop()).await });
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            if store.space_wait_reason().is_some() {
                return Ok((task, batch));
            }
            if task.is_finished() {
                task.await??;
                next += 512;
                break;
            }
            anyhow::ensure!(Instant::now() < deadline, "the append neither finished nor waited for space");
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        anyhow::ensure!(next < 400_000, "the disk never filled");
    }
}

/// In the child of a full-disk test: append until an append waits for space, check that it wrote
/// nothing and poisoned nothing, free the space (delete the filler beside the store) and check
/// that the same append goes through without a restart, then that a restart reads it all back.
async fn waits_for_space_and_resumes(dir: &Path, cfg: &RaftConfig, payload: usize) -> anyhow::Result<()> {
    let mut store = LogStore::open(dir, cfg)?;
    assert!(!store.is_damaged(), "{:?}", store.damage_reason());
    let (task, batch) = append_until_waiting(&store, 2, payload).await?;
    let why = store.space_wait_reason().unwrap_or_default();
    println!("append of {}.. waits: {why}", batch[0].log_id.index);
    assert!(why.contains("No space left"), "{why}");
    assert_eq!(store.poison_reason(), None, "a full disk does not poison the store");
    let before = batch[0].log_id.index - 1;
    assert_eq!(store.last_log_id(), Some(log_id(1, before)), "the waiting append wrote nothing");
    assert_eq!(store.try_get_log_entries(1..=before).await?.len() as u64, before);
    // Space again, no restart: the waiting append goes through.
    std::fs::remove_file(dir.parent().unwrap_or(dir).join("filler"))?;
    let deadline = Instant::now() + Duration::from_secs(30);
    while !task.is_finished() {
        anyhow::ensure!(Instant::now() < deadline, "the append still waits after space was freed");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    task.await??;
    store.sync().await?;
    assert_eq!(store.space_wait_reason(), None);
    let last = batch[batch.len() - 1].log_id.index;
    assert_eq!(store.last_log_id(), Some(log_id(1, last)));
    assert_eq!(store.try_get_log_entries(batch[0].log_id.index..=last).await?, batch);
    drop(store);
    let mut re = LogStore::open(dir, cfg)?;
    assert!(!re.is_damaged(), "{:?}", re.damage_reason());
    assert_eq!(re.try_get_log_entries(1..=last).await?.len() as u64, last);
    Ok(())
}

/// A full disk while the index needs a fresh page: the store through the mapping used to
/// allocate the page on fault and die with SIGBUS, then the append failed and poisoned the store
/// until a restart; now the slot's chunk is reserved before anything is written, the append
/// waits for space, and goes through once space is freed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hole3_index_store_on_full_disk_waits_for_space_not_sigbus() -> anyhow::Result<()> {
    const NAME: &str = "hole3_index_store_on_full_disk_waits_for_space_not_sigbus";
    let cfg = RaftConfig {
        segment_size_bytes: 8 << 20,
        index_file_entries: 1 << 20,
        segment_zero_ahead: false,
        ..RaftConfig::default()
    };
    if let Some(dir) = std::env::var_os(CHILD_ENV) {
        return waits_for_space_and_resumes(Path::new(&dir), &cfg, 16).await;
    }
    let Some(fs) = Tmpfs::mount(24) else { return Ok(()) };
    let dir = fs.path.join("store");
    let mut store = LogStore::open(&dir, &cfg)?;
    store.append(vec![entry(1, 1, vec![1; 16])], IOFlushed::noop()).await?;
    store.sync().await?;
    let end = store.end_pos();
    drop(store);
    // The segment's first 6 MiB get their blocks (zeros after the end are what recovery
    // expects), so only the index can meet the full disk.
    let seg = std::fs::OpenOptions::new().write(true).open(dir.join("commitlog").join(format!("{:020}", 0)))?;
    seg.write_all_at(&vec![0u8; (6 << 20) - end as usize], end)?;
    seg.sync_all()?;
    fill_disk(&fs.path, 0)?;
    run_in_child(NAME, &dir)
}

/// A full disk under the CommitLog itself (no zero-filled window ahead): the append used to fail
/// its `pwrite` and poison the store, which only a restart cleared; now it waits for space and
/// the replica goes on by itself once space is freed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn disk_full_segment_append_waits_and_resumes_once_space_is_freed() -> anyhow::Result<()> {
    const NAME: &str = "disk_full_segment_append_waits_and_resumes_once_space_is_freed";
    let cfg = RaftConfig {
        segment_size_bytes: 8 << 20,
        index_file_entries: 1 << 16,
        segment_zero_ahead: false,
        ..RaftConfig::default()
    };
    if let Some(dir) = std::env::var_os(CHILD_ENV) {
        return waits_for_space_and_resumes(Path::new(&dir), &cfg, 4 << 10).await;
    }
    let Some(fs) = Tmpfs::mount(24) else { return Ok(()) };
    let dir = fs.path.join("store");
    let mut store = LogStore::open(&dir, &cfg)?;
    store.append(vec![entry(1, 1, vec![1; 16])], IOFlushed::noop()).await?;
    store.sync().await?;
    drop(store);
    fill_disk(&fs.path, 0)?;
    run_in_child(NAME, &dir)
}

/// The acceptance check of issue 31: a restart of a replica with a 1 GiB segment (and the
/// default 160 MiB index) allocates no new space. Recovery used to zero-fill the rest of the
/// index file through the mapping.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hole4_restart_allocates_no_new_space() -> anyhow::Result<()> {
    let cfg = RaftConfig { segment_zero_ahead: false, ..RaftConfig::default() };
    assert_eq!((cfg.segment_size_bytes, cfg.index_file_entries * 32), (1 << 30, 160 << 20));
    let dir = tempfile::tempdir()?;
    let mut store = LogStore::open(dir.path(), &cfg)?;
    fill(&mut store, 20_000, 200).await?;
    drop(store);
    for round in 0..2 {
        let before = allocated_bytes(dir.path());
        let store = LogStore::open(dir.path(), &cfg)?;
        assert!(!store.is_damaged(), "{:?}", store.damage_reason());
        assert_eq!(store.last_log_id(), Some(log_id(1, 20_000)));
        drop(store);
        let after = allocated_bytes(dir.path());
        println!("restart {round}: allocated {before} -> {after} bytes");
        assert!(after <= before, "restart {round} allocated {} KiB", (after - before) >> 10);
    }
    Ok(())
}

/// A restart on a disk with 4 MiB free: recovery used to fault in the sparse rest of the 1 GiB
/// segment and write the rest of the 160 MiB index, which on a small file system dies with
/// SIGBUS (the `raftmq dev` cluster of issue 31 needed 3.6 GB free to start again).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hole4_restart_on_a_nearly_full_disk_needs_only_a_few_mib() -> anyhow::Result<()> {
    const NAME: &str = "hole4_restart_on_a_nearly_full_disk_needs_only_a_few_mib";
    let cfg = RaftConfig { segment_zero_ahead: false, ..RaftConfig::default() };
    if let Some(dir) = std::env::var_os(CHILD_ENV) {
        let dir = Path::new(&dir);
        let before = allocated_bytes(dir);
        let mut store = LogStore::open(dir, &cfg)?;
        assert!(!store.is_damaged(), "{:?}", store.damage_reason());
        assert_eq!(store.last_log_id(), Some(log_id(1, 20_000)));
        let got = store.try_get_log_entries(19_990..=20_000).await?;
        assert_eq!(got.len(), 11);
        drop(store);
        let after = allocated_bytes(dir);
        println!("restart: allocated {before} -> {after} bytes");
        assert!(after <= before + (1 << 20), "restart allocated {} KiB", (after - before) >> 10);
        return Ok(());
    }
    let Some(fs) = Tmpfs::mount(48) else { return Ok(()) };
    let dir = fs.path.join("store");
    let mut store = LogStore::open(&dir, &cfg)?;
    fill(&mut store, 20_000, 200).await?;
    drop(store);
    fill_disk(&fs.path, 4 << 20)?;
    run_in_child(NAME, &dir)
}

/// A follower truncation costs what it cuts: it used to zero the rest of the 160 MiB index file
/// and, across a segment roll, the sparse rest of the segment (a blank's pad), allocating both.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hole4_follower_truncation_allocates_nothing_even_across_a_segment_roll() -> anyhow::Result<()> {
    // The default index, a small log.
    let cfg = RaftConfig { segment_zero_ahead: false, ..RaftConfig::default() };
    let dir = tempfile::tempdir()?;
    let mut store = LogStore::open(dir.path(), &cfg)?;
    fill(&mut store, 20_000, 200).await?;
    let before = allocated_bytes(dir.path());
    store.truncate_after(Some(log_id(1, 19_000))).await?;
    let after = allocated_bytes(dir.path());
    println!("truncation: allocated {before} -> {after} bytes");
    assert!(after <= before, "the truncation allocated {} KiB", (after - before) >> 10);
    assert_eq!(store.last_log_id(), Some(log_id(1, 19_000)));
    drop(store);

    // Entry 2 ends 3 MiB into an 8 MiB segment, entry 3 does not fit in the rest: a blank pads
    // the segment and entry 3 starts the next one. Cutting after entry 1 crosses the roll.
    // A small index, so that only the segment can allocate.
    let cfg = RaftConfig { segment_size_bytes: 8 << 20, index_file_entries: 16, segment_zero_ahead: false, ..cfg };
    let dir = tempfile::tempdir()?;
    let mut store = LogStore::open(dir.path(), &cfg)?;
    let old = vec![entry(1, 1, vec![1; 100]), entry(1, 2, vec![2; 3 << 20]), entry(1, 3, vec![3; 6 << 20])];
    store.append(old.clone(), IOFlushed::noop()).await?;
    store.sync().await?;
    assert_eq!(store.entry_position(3).map(|p| p.pos), Some(8 << 20), "entry 3 starts the second segment");
    // The second segment goes; the first must not get blocks for the blank's pad.
    let first_segment = dir.path().join("commitlog").join(format!("{:020}", 0));
    let before = std::fs::metadata(&first_segment)?.blocks() * 512;
    store.truncate_after(Some(log_id(1, 1))).await?;
    let after = std::fs::metadata(&first_segment)?.blocks() * 512;
    println!("truncation across a roll: first segment allocated {before} -> {after} bytes");
    assert!(after <= before, "the truncation allocated {} KiB", (after - before) >> 10);
    let new = vec![entry(2, 2, vec![4; 3 << 20])];
    store.append(new.clone(), IOFlushed::noop()).await?;
    store.sync().await?;
    drop(store);
    let mut re = LogStore::open(dir.path(), &cfg)?;
    assert!(!re.is_damaged(), "{:?}", re.damage_reason());
    let got = re.try_get_log_entries(0..u64::MAX).await?;
    assert_eq!(got, vec![old[0].clone(), new[0].clone()], "nothing cut comes back");
    Ok(())
}

/// A restart on a full tmpfs whose log ends exactly at a page boundary: recovery used to read
/// the next record's header from a hole through the mapping, which a tmpfs answers by
/// allocating a page, and on a full one with SIGBUS.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hole3_restart_on_full_disk_with_a_page_aligned_end_reads_no_hole() -> anyhow::Result<()> {
    const NAME: &str = "hole3_restart_on_full_disk_with_a_page_aligned_end_reads_no_hole";
    let cfg = RaftConfig {
        segment_size_bytes: 8 << 20,
        index_file_entries: 16,
        segment_zero_ahead: false,
        ..RaftConfig::default()
    };
    if let Some(dir) = std::env::var_os(CHILD_ENV) {
        let store = LogStore::open(Path::new(&dir), &cfg)?;
        assert!(!store.is_damaged(), "{:?}", store.damage_reason());
        assert_eq!((store.last_log_id(), store.end_pos()), (Some(log_id(1, 2)), 4096));
        return Ok(());
    }
    let Some(fs) = Tmpfs::mount(8) else { return Ok(()) };
    let dir = fs.path.join("store");
    let mut store = LogStore::open(&dir, &cfg)?;
    store.append(vec![entry(1, 1, vec![1; 100])], IOFlushed::noop()).await?;
    let first = store.end_pos();
    let overhead = first - 100;
    store.append(vec![entry(1, 2, vec![2; (4096 - first - overhead) as usize])], IOFlushed::noop()).await?;
    store.sync().await?;
    assert_eq!(store.end_pos(), 4096, "the log ends at a page boundary");
    drop(store);
    fill_disk(&fs.path, 0)?;
    run_in_child(NAME, &dir)
}
