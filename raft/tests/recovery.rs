//! Crash recovery, roll determinism, truncation/purge durability and corruption detection of
//! the segment store. Randomized tests are seeded; the seed is printed and can be forced with
//! `RAFTMQ_SEED=<n>`.

use std::io;
use std::path::Path;

use openraft::storage::{IOFlushed, RaftLogReader, RaftLogStorage};
use openraft::type_config::TypeConfigExt;
use raftmq_raft::type_config::{Entry, EntryPayload, log_id};
use raftmq_raft::{AppPayload, LogStore, PayloadPatcher, RaftConfig, TypeConfig};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

const SEG: u64 = 4096;

fn cfg() -> RaftConfig {
    RaftConfig { segment_size_bytes: SEG, index_file_entries: 16, ..RaftConfig::default() }
}

fn seed() -> u64 {
    let s = std::env::var("RAFTMQ_SEED").ok().and_then(|v| v.parse().ok()).unwrap_or_else(rand::random);
    println!("RAFTMQ_SEED={s}");
    s
}

fn entry(term: u64, index: u64, body: Vec<u8>) -> Entry {
    Entry { log_id: log_id(term, index), payload: EntryPayload::Normal(AppPayload::new(1, body)) }
}

fn body(rng: &mut StdRng, index: u64) -> Vec<u8> {
    let len = rng.random_range(0..600usize);
    (0..len).map(|i| (index as usize + i) as u8).collect()
}

/// Append and wait for the flush callback.
async fn append_durable(store: &mut LogStore, entries: Vec<Entry>) -> anyhow::Result<()> {
    let (tx, rx) = TypeConfig::oneshot();
    store.append(entries, IOFlushed::signal(tx)).await?;
    rx.await??;
    Ok(())
}

/// Append without waiting for durability.
async fn append_lazy(store: &mut LogStore, entries: Vec<Entry>) -> anyhow::Result<()> {
    store.append(entries, IOFlushed::noop()).await?;
    Ok(())
}

fn copy_dir(from: &Path, to: &Path) -> io::Result<()> {
    std::fs::create_dir_all(to)?;
    // Meta first: its watermark then never claims more than the copied data holds.
    let meta = from.join("raft-meta");
    if meta.exists() {
        std::fs::copy(&meta, to.join("raft-meta"))?;
    }
    for sub in ["commitlog", "raftindex"] {
        let (src, dst) = (from.join(sub), to.join(sub));
        std::fs::create_dir_all(&dst)?;
        for e in std::fs::read_dir(&src)? {
            let e = e?;
            std::fs::copy(e.path(), dst.join(e.file_name()))?;
        }
    }
    Ok(())
}

/// Lose everything at and after `cut` in the data segments, optionally leaving torn garbage.
fn cut_at(dir: &Path, cut: u64, garbage: &[u8]) -> io::Result<()> {
    let seg_dir = dir.join("commitlog");
    for e in std::fs::read_dir(&seg_dir)? {
        let e = e?;
        let base: u64 = e.file_name().to_string_lossy().parse().map_err(io::Error::other)?;
        if base + SEG <= cut {
            continue;
        }
        if base > cut || (base == cut && garbage.is_empty()) {
            std::fs::remove_file(e.path())?;
            continue;
        }
        let f = std::fs::OpenOptions::new().write(true).open(e.path())?;
        f.set_len(cut - base)?;
        let room = (base + SEG - cut) as usize;
        let g = &garbage[..garbage.len().min(room)];
        std::os::unix::fs::FileExt::write_all_at(&f, g, cut - base)?;
    }
    Ok(())
}

async fn read_all(store: &mut LogStore) -> anyhow::Result<Vec<Entry>> {
    Ok(store.try_get_log_entries(0..u64::MAX).await?)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn crash_cut_past_last_fsync_keeps_every_acknowledged_entry() -> anyhow::Result<()> {
    let seed = seed();
    let mut rng = StdRng::seed_from_u64(seed);
    let mut lost_unacked = 0;
    for round in 0..25 {
        let dir = tempfile::tempdir()?;
        let mut store = LogStore::open(dir.path(), &cfg())?;
        let mut all = Vec::new();
        let mut next = 1u64;
        let acked_batches = rng.random_range(1..8);
        for _ in 0..acked_batches {
            let n = rng.random_range(1..6);
            let batch: Vec<Entry> = (0..n).map(|k| entry(1, next + k, body(&mut rng, next + k))).collect();
            next += n;
            all.extend(batch.clone());
            append_durable(&mut store, batch).await?;
        }
        let acked_last = next - 1;
        let acked_end = store.end_pos();
        for _ in 0..rng.random_range(0..6) {
            let n = rng.random_range(1..6);
            let batch: Vec<Entry> = (0..n).map(|k| entry(2, next + k, body(&mut rng, next + k))).collect();
            next += n;
            all.extend(batch.clone());
            append_lazy(&mut store, batch).await?;
        }
        let end = store.end_pos();
        let image = tempfile::tempdir()?;
        copy_dir(dir.path(), image.path())?;
        let durable = raftmq_raft::meta::read_durable_pos(image.path())?;
        assert!(durable >= acked_end, "seed {seed} round {round}: watermark below acked data");
        let lo = durable.max(acked_end);
        let cut = if end > lo { rng.random_range(lo..=end) } else { end };
        let garbage: Vec<u8> = if rng.random_bool(0.5) {
            (0..rng.random_range(1..300)).map(|_| rng.random()).collect()
        } else {
            Vec::new()
        };
        cut_at(image.path(), cut, &garbage)?;

        let mut re = LogStore::open(image.path(), &cfg())?;
        assert!(!re.is_damaged(), "seed {seed} round {round}: {:?}", re.damage_reason());
        let got = read_all(&mut re).await?;
        assert!(got.len() as u64 >= acked_last, "seed {seed} round {round}: lost acked entries");
        assert_eq!(got[..], all[..got.len()], "seed {seed} round {round}: not a prefix");
        lost_unacked += usize::from(got.len() < all.len());
        // The recovered store keeps working and survives another reopen.
        let n = got.len() as u64 + 1;
        append_durable(&mut re, vec![entry(3, n, vec![7; 10])]).await?;
        drop(re);
        let mut re2 = LogStore::open(image.path(), &cfg())?;
        assert!(!re2.is_damaged());
        assert_eq!(read_all(&mut re2).await?.len() as u64, n);
    }
    println!("rounds that lost unacknowledged entries: {lost_unacked}/25");
    assert!(lost_unacked > 0, "seed {seed}: no round exercised tail truncation");
    Ok(())
}

#[tokio::test]
async fn flipped_byte_before_the_tail_marks_the_store_damaged() -> anyhow::Result<()> {
    let seed = seed();
    let mut rng = StdRng::seed_from_u64(seed);
    for target in ["payload", "header"] {
        let dir = tempfile::tempdir()?;
        let mut store = LogStore::open(dir.path(), &cfg())?;
        let entries: Vec<Entry> = (1..=30).map(|i| entry(1, i, vec![i as u8; 300])).collect();
        append_durable(&mut store, entries.clone()).await?;
        let victim = rng.random_range(2..25u64);
        let p = store.entry_position(victim).ok_or_else(|| anyhow::anyhow!("no position"))?;
        drop(store);
        let off = match target {
            "payload" => p.payload_pos + rng.random_range(0..300),
            _ => p.pos + rng.random_range(8..44),
        };
        let base = off - off % SEG;
        let path = dir.path().join("commitlog").join(format!("{base:020}"));
        let mut bytes = std::fs::read(&path)?;
        bytes[(off - base) as usize] ^= 0x40;
        std::fs::write(&path, bytes)?;

        let mut re = LogStore::open(dir.path(), &cfg())?;
        assert!(re.is_damaged(), "seed {seed}: flip in {target} of entry {victim} not detected");
        // The valid prefix stays readable, nothing corrupt is served, writes are refused.
        let got = read_all(&mut re).await?;
        assert_eq!(got[..], entries[..(victim - 1) as usize]);
        let err = re.append(vec![entry(1, victim, vec![])], IOFlushed::noop()).await;
        assert!(err.is_err());
        assert!(re.save_vote(&raftmq_raft::type_config::Vote::new(5, 1)).await.is_err());
    }
    Ok(())
}

/// Writes the payload position into bytes 28..36, like RocketMQ PHYSICALOFFSET.
struct PhyOffsetPatcher;

impl PayloadPatcher for PhyOffsetPatcher {
    fn patch(&self, _tag: u8, payload_pos: u64, payload: &mut [u8]) {
        if payload.len() >= 36 {
            payload[28..36].copy_from_slice(&payload_pos.to_be_bytes());
        }
    }
}

#[tokio::test]
async fn replicas_lay_out_identical_bytes_and_patch_offsets() -> anyhow::Result<()> {
    let seed = seed();
    let mut rng = StdRng::seed_from_u64(seed);
    let entries: Vec<Entry> = (1..=200u64)
        .map(|i| {
            let len = rng.random_range(36..900usize);
            entry(1 + i / 50, i, vec![i as u8; len])
        })
        .collect();
    let (a, b) = (tempfile::tempdir()?, tempfile::tempdir()?);
    let mut leader = LogStore::open_with_patcher(a.path(), &cfg(), Box::new(PhyOffsetPatcher))?;
    let mut follower = LogStore::open_with_patcher(b.path(), &cfg(), Box::new(PhyOffsetPatcher))?;
    append_durable(&mut leader, entries.clone()).await?;
    // The follower receives what the leader serves (already patched), in other batch sizes.
    let served = read_all(&mut leader).await?;
    for chunk in served.chunks(7) {
        append_durable(&mut follower, chunk.to_vec()).await?;
    }
    for i in 1..=200u64 {
        let p = leader.entry_position(i).ok_or_else(|| anyhow::anyhow!("pos"))?;
        assert_eq!(Some(p), follower.entry_position(i));
        assert_eq!(p.payload_pos, p.pos + LogStore::HEADER_SIZE);
        let EntryPayload::Normal(d) = &served[(i - 1) as usize].payload else { anyhow::bail!("kind") };
        assert_eq!(d.body[28..36], p.payload_pos.to_be_bytes());
    }
    let list = |d: &Path| -> io::Result<Vec<(String, Vec<u8>)>> {
        let mut v: Vec<_> = std::fs::read_dir(d.join("commitlog"))?
            .map(|e| e.and_then(|e| Ok((e.file_name().to_string_lossy().into_owned(), std::fs::read(e.path())?))))
            .collect::<io::Result<_>>()?;
        v.sort();
        Ok(v)
    };
    let (fa, fb) = (list(a.path())?, list(b.path())?);
    assert!(fa.len() > 10, "test must cross many segment rolls");
    assert!(fa == fb, "seed {seed}: segment bytes differ between replicas");
    Ok(())
}

#[tokio::test]
async fn truncated_tail_never_resurrects_after_reopen() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let mut store = LogStore::open(dir.path(), &cfg())?;
    // 1..=5 from term 1, then a deposed term-3 leader's uncommitted 6..=40.
    let old: Vec<Entry> = (1..=40).map(|i| entry(if i <= 5 { 1 } else { 3 }, i, vec![1; 200])).collect();
    append_durable(&mut store, old.clone()).await?;
    store.truncate_after(Some(log_id(1, 5))).await?;
    // The new leader's 6..=8 come from term 2 and have the same sizes: the stale term-3 record
    // 9 sits exactly where a record 9 would start and must not be picked up after a restart.
    let new: Vec<Entry> = (6..=8).map(|i| entry(2, i, vec![2; 200])).collect();
    append_durable(&mut store, new.clone()).await?;
    drop(store);
    let mut re = LogStore::open(dir.path(), &cfg())?;
    assert!(!re.is_damaged(), "{:?}", re.damage_reason());
    let got = read_all(&mut re).await?;
    let mut expected = old[..5].to_vec();
    expected.extend(new);
    assert_eq!(got, expected);
    Ok(())
}

#[tokio::test]
async fn purge_survives_reopen_and_deletes_whole_segments() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let mut store = LogStore::open(dir.path(), &cfg())?;
    let all: Vec<Entry> = (1..=60).map(|i| entry(1, i, vec![3; 500])).collect();
    append_durable(&mut store, all.clone()).await?;
    let count = |d: &Path| std::fs::read_dir(d.join("commitlog")).map(|r| r.count());
    let before = count(dir.path())?;
    store.purge(log_id(1, 40)).await?;
    assert!(count(dir.path())? < before);
    drop(store);
    let mut re = LogStore::open(dir.path(), &cfg())?;
    assert!(!re.is_damaged(), "{:?}", re.damage_reason());
    assert_eq!(read_all(&mut re).await?, all[40..].to_vec());
    let st = re.get_log_state().await?;
    assert_eq!(st.last_purged_log_id, Some(log_id(1, 40)));
    assert_eq!(st.last_log_id, Some(log_id(1, 60)));
    Ok(())
}

#[tokio::test]
async fn vote_is_durable_and_limited_reads_respect_the_byte_budget() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let cfg = RaftConfig { segment_size_bytes: 1 << 20, append_entries_max_bytes: 64 << 10, ..cfg() };
    let mut store = LogStore::open(dir.path(), &cfg)?;
    let vote = raftmq_raft::type_config::Vote::new_committed(7, 3);
    store.save_vote(&vote).await?;
    let all: Vec<Entry> = (1..=50).map(|i| entry(1, i, vec![0; 10_000])).collect();
    append_durable(&mut store, all).await?;
    let got = store.limited_get_log_entries(1, 51).await?;
    // 10,000-byte payloads plus their headers: six fit 64 KiB, a seventh would not.
    assert_eq!(got.len(), 6, "{} entries for a 64 KiB budget", got.len());
    let one = store.limited_get_log_entries(50, 51).await?;
    assert_eq!(one.len(), 1);
    drop(store);
    let mut re = LogStore::open(dir.path(), &cfg)?;
    assert_eq!(re.read_vote().await?, Some(vote));
    Ok(())
}

#[tokio::test]
async fn purge_below_the_first_entry_keeps_the_log() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let mut store = LogStore::open(dir.path(), &cfg())?;
    let all: Vec<Entry> = (5..=10).map(|i| entry(1, i, vec![4; 100])).collect();
    append_durable(&mut store, all.clone()).await?;
    store.purge(log_id(1, 2)).await?;
    drop(store);
    let mut re = LogStore::open(dir.path(), &cfg())?;
    assert!(!re.is_damaged(), "{:?}", re.damage_reason());
    assert_eq!(read_all(&mut re).await?, all);
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn frozen_then_killed_store_acknowledges_nothing_after_the_freeze() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let mut store = LogStore::open(dir.path(), &cfg())?;
    let durable: Vec<Entry> = (1..=10).map(|i| entry(1, i, vec![i as u8; 300])).collect();
    append_durable(&mut store, durable.clone()).await?;
    let watermark = store.durable_pos();

    // The disk hangs: appends still land, but their flush and a vote save never complete.
    store.freeze_for_crash_test();
    let (tx, rx) = TypeConfig::oneshot();
    store.append((11..=20).map(|i| entry(1, i, vec![i as u8; 300])), IOFlushed::signal(tx)).await?;
    assert_eq!(store.last_log_id(), Some(log_id(1, 20)));
    let mut voter = store.clone();
    let vote = tokio::spawn(async move { voter.save_vote(&raftmq_raft::type_config::Vote::new(2, 1)).await });

    // The process dies: everything held fails; the watermark did not move.
    assert_eq!(store.kill_for_crash_test(), watermark);
    assert!(rx.await?.is_err(), "a flush completed after the freeze");
    assert!(vote.await?.is_err(), "a vote was saved after the freeze");
    assert!(store.append(vec![entry(1, 21, vec![])], IOFlushed::noop()).await.is_err());
    let end = store.end_pos();
    drop(store);

    // Losing the never-acknowledged bytes leaves exactly the acknowledged prefix.
    assert!(end > watermark);
    cut_at(dir.path(), watermark, &[0xA5; 64])?;
    let mut re = LogStore::open(dir.path(), &cfg())?;
    assert!(!re.is_damaged(), "{:?}", re.damage_reason());
    assert_eq!(read_all(&mut re).await?, durable);
    assert_eq!(re.read_vote().await?, None);
    Ok(())
}

/// The zero-ahead helper writes zeros after the log end while appends run: with a segment
/// larger than its window it refills many times, and no appended byte may ever be zeroed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn zeros_written_ahead_of_the_log_never_overwrite_appended_entries() -> anyhow::Result<()> {
    let seed = seed();
    let mut rng = StdRng::seed_from_u64(seed);
    let dir = tempfile::tempdir()?;
    let cfg = RaftConfig { segment_size_bytes: 64 << 20, ..RaftConfig::default() };
    assert!(cfg.segment_zero_ahead, "on by default");
    let mut store = LogStore::open(dir.path(), &cfg)?;
    let mut expected = Vec::new();
    let mut index = 1;
    // About 24 MiB: three zero-ahead windows, in batches of random size, each made durable so
    // that the helper is poked between them.
    while log_bytes(&expected) < 24 << 20 {
        let batch = random_batch(&mut rng, &mut index);
        expected.extend(batch.iter().cloned());
        append_durable(&mut store, batch).await?;
    }
    assert_eq!(read_all(&mut store).await?, expected);
    drop(store);
    let mut re = LogStore::open(dir.path(), &cfg)?;
    assert!(!re.is_damaged(), "{:?}", re.damage_reason());
    assert_eq!(read_all(&mut re).await?, expected);
    Ok(())
}

/// The next 1..64 entries from `*index` on, with payloads of random size up to 8 KiB.
fn random_batch(rng: &mut StdRng, index: &mut u64) -> Vec<Entry> {
    let batch: Vec<Entry> = (0..rng.random_range(1..64u64))
        .map(|k| entry(1, *index + k, vec![(*index + k) as u8 | 1; rng.random_range(1..8192usize)]))
        .collect();
    *index += batch.len() as u64;
    batch
}

/// About what `entries` take in the log (a 64-byte header each).
fn log_bytes(entries: &[Entry]) -> usize {
    entries.iter().map(|e| 64 + payload_len(e)).sum()
}

fn payload_len(e: &Entry) -> usize {
    match &e.payload {
        EntryPayload::Normal(d) => d.body.len(),
        _ => 0,
    }
}

/// The page-cache helper hands synced bytes behind a follower's window back to the kernel while
/// appends and reads run; whatever it dropped must read back the same, before and after reopen.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bytes_dropped_from_the_page_cache_read_back_unchanged() -> anyhow::Result<()> {
    let seed = seed();
    let mut rng = StdRng::seed_from_u64(seed);
    let dir = tempfile::tempdir()?;
    let cfg =
        RaftConfig { segment_size_bytes: 8 << 20, page_cache_follower_window_bytes: 4 << 20, ..RaftConfig::default() };
    let mut store = LogStore::open(dir.path(), &cfg)?;
    assert_eq!(store.page_cache_window_bytes(), 4 << 20, "a store starts with the follower's window");
    let mut expected = Vec::new();
    let mut index = 1;
    // About 24 MiB over three segments, each batch durable so the helper looks between them.
    while log_bytes(&expected) < 24 << 20 {
        let batch = random_batch(&mut rng, &mut index);
        expected.extend(batch.iter().cloned());
        append_durable(&mut store, batch).await?;
        // Read the oldest entries too: they are the ones being dropped.
        let head = store.try_get_log_entries(1..4).await?;
        assert_eq!(head.as_slice(), &expected[..head.len()]);
    }
    store.drop_page_cache_now();
    assert!(
        store.page_cache_dropped_bytes() >= 16 << 20,
        "only {} B dropped of ~24 MiB with a 4 MiB window",
        store.page_cache_dropped_bytes()
    );
    assert_eq!(read_all(&mut store).await?, expected);
    store.set_role(true);
    assert_eq!(store.page_cache_window_bytes(), RaftConfig::default().page_cache_leader_window_bytes);
    drop(store);
    let mut re = LogStore::open(dir.path(), &cfg)?;
    assert!(!re.is_damaged(), "{:?}", re.damage_reason());
    assert_eq!(read_all(&mut re).await?, expected);
    Ok(())
}
