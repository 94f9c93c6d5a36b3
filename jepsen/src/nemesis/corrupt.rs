//! `corrupt`: bit rot on one replica's disk. The node is killed -9, one byte of one Raft entry
//! it had fsynced is flipped in its CommitLog, and it restarts on that disk
//! (docs/reliability.md#broker-requirements, requirement 3: corruption is detected, never silently served).
//!
//! The entry is picked among those from the log's start (`start_pos`, past purged or rebased
//! bytes, which recovery never reads) to the store's durable watermark (both from
//! `<store>/raft-meta`), so the flipped byte is covered by an entry CRC, is read at recovery and
//! lies before the tail: recovery must not take it for a torn write and truncate it, it must mark
//! the store damaged. The nemesis checks that (the node's own RAFT_GROUP_STATUS view says
//! `damaged`) at heal time, after the node ran damaged for the hold, then rebuilds it as an
//! operator would: kill -9, store deleted, restart under the same id (the `wipe` path).
//!
//! Invariant: call [`flip_entry_byte`] only on a killed node (a live one would rewrite the byte).

use std::fs::OpenOptions;
use std::io::Read;
use std::io::Seek;
use std::io::SeekFrom;
use std::io::Write;
use std::path::Path;
use std::path::PathBuf;

use raftmq_raft::entry::HEADER_SIZE;
use raftmq_raft::entry::RecordPrefix;
use raftmq_raft::entry::decode_header;
use raftmq_raft::entry::peek_prefix;
use raftmq_raft::log_store::COMMITLOG_DIR;
use raftmq_raft::meta::META_FILE;
use rand::Rng;

/// What a flip did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FlipReport {
    /// Raft index of the entry hit.
    pub index: u64,
    /// Physical position of the flipped byte in the CommitLog.
    pub pos: u64,
    /// The durable watermark the entry lies below.
    pub durable_pos: u64,
    /// Entries it was picked from.
    pub candidates: usize,
}

/// Why no byte was flipped.
#[derive(Debug, thiserror::Error)]
pub enum CorruptError {
    /// The raft store's meta file could not be read.
    #[error("reading the durable watermark in {dir}: {source}")]
    Meta {
        /// The store directory.
        dir: String,
        /// The cause.
        source: raftmq_raft::StoreError,
    },
    /// A segment could not be listed, read or written.
    #[error("{path}: {source}")]
    Io {
        /// The file or directory.
        path: String,
        /// The cause.
        source: std::io::Error,
    },
    /// No entry lies wholly below the durable watermark (a store that never synced one).
    #[error("no fsynced entry to corrupt in {0}")]
    NothingDurable(String),
}

/// One entry found in a segment: where it starts and how long it is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Span {
    index: u64,
    pos: u64,
    total_size: u64,
}

fn io_error(path: &Path) -> impl Fn(std::io::Error) -> CorruptError + '_ {
    move |source| CorruptError::Io { path: path.display().to_string(), source }
}

/// The entries of the segment at `path` (starting at CommitLog position `base`) from `from` (a
/// record start in it) that end at or below `durable_pos`, read by their headers; the walk stops
/// at the first blank, unwritten or unreadable record, which for a sound segment is its end.
fn durable_spans(path: &Path, base: u64, from: u64, durable_pos: u64) -> Result<Vec<Span>, CorruptError> {
    let mut bytes = Vec::new();
    let wanted = durable_pos.saturating_sub(base);
    std::fs::File::open(path).map_err(io_error(path))?.take(wanted).read_to_end(&mut bytes).map_err(io_error(path))?;
    let mut spans = Vec::new();
    let mut at = usize::try_from(from.saturating_sub(base)).unwrap_or(usize::MAX);
    let header = usize::try_from(HEADER_SIZE).unwrap_or(usize::MAX);
    while at.saturating_add(header) <= bytes.len() {
        let RecordPrefix::Entry(_) = peek_prefix(&bytes[at..]) else { break };
        let Ok(h) = decode_header(&bytes[at..]) else { break };
        let size = usize::try_from(h.total_size).unwrap_or(usize::MAX);
        if size < header || at.saturating_add(size) > bytes.len() {
            break;
        }
        spans.push(Span { index: h.index, pos: base + at as u64, total_size: u64::from(h.total_size) });
        at += size;
    }
    Ok(spans)
}

/// Flips one byte (XOR with a random non-zero mask) of one entry, header or payload, picked
/// uniformly among the entries of the store at `store_dir` that end at or below its durable
/// watermark. The flip is synced, so later faults see it.
pub fn flip_entry_byte(store_dir: &Path, rng: &mut impl Rng) -> Result<FlipReport, CorruptError> {
    let dir_text = store_dir.display().to_string();
    if !store_dir.join(META_FILE).exists() {
        return Err(CorruptError::NothingDurable(dir_text));
    }
    let (_, meta) = raftmq_raft::meta::MetaFile::open(store_dir, &raftmq_raft::meta::MetaState::new(0))
        .map_err(|source| CorruptError::Meta { dir: dir_text.clone(), source })?;
    let (start_pos, durable_pos) = (meta.start_pos, meta.durable_pos);
    let first_base = match meta.segment_size {
        0 => 0,
        size => raftmq_raft::entry::segment_base(start_pos, size),
    };
    let seg_dir = store_dir.join(COMMITLOG_DIR);
    let listing = std::fs::read_dir(&seg_dir).map_err(io_error(&seg_dir))?;
    let segments = super::lose_unfsynced::segments_of(listing).map_err(io_error(&seg_dir))?;
    let mut spans: Vec<(Span, PathBuf, u64)> = Vec::new();
    // Segments below the log's start are deleted by recovery unread.
    for (base, path) in segments.into_iter().filter(|(base, _)| *base >= first_base && *base < durable_pos) {
        for span in durable_spans(&path, base, start_pos.max(base), durable_pos)? {
            spans.push((span, path.clone(), base));
        }
    }
    if spans.is_empty() {
        return Err(CorruptError::NothingDurable(dir_text));
    }
    let (span, path, base) = &spans[rng.random_range(0..spans.len())];
    let pos = span.pos + rng.random_range(0..span.total_size);
    let mask: u8 = rng.random_range(1..=u8::MAX);
    let mut f = OpenOptions::new().read(true).write(true).open(path).map_err(io_error(path))?;
    let mut byte = [0u8; 1];
    f.seek(SeekFrom::Start(pos - base)).map_err(io_error(path))?;
    f.read_exact(&mut byte).map_err(io_error(path))?;
    byte[0] ^= mask;
    f.seek(SeekFrom::Start(pos - base)).map_err(io_error(path))?;
    f.write_all(&byte).map_err(io_error(path))?;
    f.sync_all().map_err(io_error(path))?;
    Ok(FlipReport { index: span.index, pos, durable_pos, candidates: spans.len() })
}

#[cfg(test)]
mod tests {
    use raftmq_raft::entry::EntryHeader;
    use raftmq_raft::entry::EntryKind;
    use raftmq_raft::entry::encode_header;
    use rand::SeedableRng;
    use rand::rngs::StdRng;

    use super::*;

    /// A segment of `entries` entries of `payload` bytes each from position 0, then zeros.
    fn write_segment(seg: &Path, entries: u64, payload: usize, segment_bytes: usize) -> Vec<u64> {
        let mut bytes = vec![0u8; segment_bytes];
        let mut at = 0usize;
        let mut starts = Vec::new();
        for index in 1..=entries {
            let body = vec![index as u8; payload];
            let total = HEADER_SIZE as usize + payload;
            let h = EntryHeader {
                total_size: total as u32,
                index,
                term: 1,
                pos: at as u64,
                kind: EntryKind::Normal,
                app_tag: 1,
                payload_crc: crc32fast::hash(&body),
            };
            encode_header(&mut bytes[at..], &h);
            bytes[at + HEADER_SIZE as usize..at + total].copy_from_slice(&body);
            starts.push(at as u64);
            at += total;
        }
        std::fs::write(seg.join(format!("{:020}", 0)), bytes).expect("segment");
        starts
    }

    #[test]
    fn the_flipped_byte_lies_in_a_durable_entry_and_breaks_its_crc() -> anyhow::Result<()> {
        let seed = 0x5EED_C0DE_u64;
        println!("seed {seed}");
        let mut rng = StdRng::seed_from_u64(seed);
        for round in 0..20 {
            let dir = tempfile::tempdir()?;
            let store = dir.path();
            let seg = store.join(COMMITLOG_DIR);
            std::fs::create_dir_all(&seg)?;
            let starts = write_segment(&seg, 10, 100, 8192);
            // Durable up to the middle of entry 7: entries 1..=6 are the candidates.
            let durable = starts[6] + 20;
            let (mut meta, _) = raftmq_raft::meta::MetaFile::open(store, &raftmq_raft::meta::MetaState::new(8192))?;
            meta.write_watermark(durable)?;
            drop(meta);
            let before = std::fs::read(seg.join(format!("{:020}", 0)))?;
            let report = flip_entry_byte(store, &mut rng)?;
            assert_eq!(report.candidates, 6, "round {round}");
            assert!(report.pos < starts[6], "round {round}: {report:?} past the last durable entry");
            let after = std::fs::read(seg.join(format!("{:020}", 0)))?;
            let changed: Vec<usize> = (0..before.len()).filter(|&i| before[i] != after[i]).collect();
            assert_eq!(changed, vec![report.pos as usize], "round {round}: exactly the reported byte");
            let start = starts[report.index as usize - 1] as usize;
            let header = decode_header(&after[start..]);
            let payload = &after[start + HEADER_SIZE as usize..start + HEADER_SIZE as usize + 100];
            let caught = header.and_then(|h| raftmq_raft::entry::verify_payload(&h, payload)).is_err();
            assert!(caught, "round {round}: the entry's CRCs still pass after {report:?}");
        }
        Ok(())
    }

    #[test]
    fn entries_before_the_log_start_are_never_picked() -> anyhow::Result<()> {
        let mut rng = StdRng::seed_from_u64(7);
        for _ in 0..20 {
            // A fresh store each round: a flipped entry ends the walk of the next one.
            let dir = tempfile::tempdir()?;
            let store = dir.path();
            let seg = store.join(COMMITLOG_DIR);
            std::fs::create_dir_all(&seg)?;
            let starts = write_segment(&seg, 10, 100, 8192);
            // Purged up to entry 4: the log starts at entry 5; durable to the end of entry 8.
            let mut state = raftmq_raft::meta::MetaState::new(8192);
            state.start_pos = starts[4];
            let (mut meta, _) = raftmq_raft::meta::MetaFile::open(store, &state)?;
            meta.write(&state)?;
            meta.write_watermark(starts[8])?;
            drop(meta);
            let report = flip_entry_byte(store, &mut rng)?;
            assert_eq!(report.candidates, 4, "entries 5..=8");
            assert!((starts[4]..starts[8]).contains(&report.pos), "{report:?}");
        }
        Ok(())
    }

    #[test]
    fn a_store_with_nothing_durable_is_refused() -> anyhow::Result<()> {
        let dir = tempfile::tempdir()?;
        let mut rng = StdRng::seed_from_u64(1);
        assert!(matches!(flip_entry_byte(dir.path(), &mut rng), Err(CorruptError::NothingDurable(_))));
        let seg = dir.path().join(COMMITLOG_DIR);
        std::fs::create_dir_all(&seg)?;
        write_segment(&seg, 3, 10, 1024);
        let (mut meta, _) = raftmq_raft::meta::MetaFile::open(dir.path(), &raftmq_raft::meta::MetaState::new(1024))?;
        meta.write_watermark(10)?;
        drop(meta);
        assert!(matches!(flip_entry_byte(dir.path(), &mut rng), Err(CorruptError::NothingDurable(_))));
        Ok(())
    }
}
