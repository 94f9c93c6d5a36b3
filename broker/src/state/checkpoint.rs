//! The broker's part of a replica checkpoint (raft/ `checkpoint_file` holds it with the applied
//! log id and the memberships): the replicated metadata tables as of the applied log id, each
//! ConsumeQueue's end then, the committed CommitLog end, and the retention boundary if one is set.
//! The queues' units are not in it: the checkpoint is written only after their files were synced,
//! so a restart finds them on disk at least up to each recorded end (and re-applying the entries
//! after it finds any units written past it in place); a queue that ends short of its recorded
//! end (its topic deleted after the checkpoint, units lost) makes the checkpoint unusable.
//!
//! ```text
//! 0 version u8 | 1 flags u8 (1 = retention boundary set) | 2 committed_end u64
//! 10 boundary index u64 | 18 boundary term u64 | 26 boundary next_pos u64 | 34 tables (Manifest layout:
//!    its queue list each queue's end, its boundary the one above or zeros)
//! ```
//!
//! Decoding never panics on bad input.

use bytes::BufMut;
use bytes::Bytes;
use bytes::BytesMut;
use thiserror::Error;

use crate::state::manifest::Manifest;
use crate::state::manifest::ManifestError;
use crate::state::manifest::RetentionBoundary;

const VERSION: u8 = 1;
const FLAG_BOUNDARY: u8 = 1;
const HEADER_BYTES: usize = 34;

/// The broker's state as of a checkpoint's applied log id.
#[derive(Debug, Clone, PartialEq)]
pub struct StoreCheckpoint {
    /// End of the last applied entry's payload: the committed CommitLog end.
    pub committed_end: u64,
    /// The retention boundary last applied, if any.
    pub boundary: Option<RetentionBoundary>,
    /// The metadata tables (`meta_index`: the applied index they are as of) and each queue's end
    /// (`QueueStart::next_offset`: its max offset as of the applied index).
    pub tables: Manifest,
}

/// Why checkpoint bytes could not be read.
#[derive(Debug, Error)]
pub enum CheckpointError {
    /// Shorter than its header, or a version or flag this broker does not know.
    #[error("not a broker checkpoint of a known version")]
    Format,
    /// The tables.
    #[error("checkpoint tables: {0}")]
    Tables(#[from] ManifestError),
}

impl StoreCheckpoint {
    /// The checkpoint bytes.
    pub fn encode(&self) -> Result<Bytes, CheckpointError> {
        let tables = self.tables.encode()?;
        let mut b = BytesMut::with_capacity(HEADER_BYTES + tables.len());
        b.put_u8(VERSION);
        b.put_u8(if self.boundary.is_some() { FLAG_BOUNDARY } else { 0 });
        b.put_u64(self.committed_end);
        let boundary = self.boundary.unwrap_or(RetentionBoundary { index: 0, term: 0, next_pos: 0 });
        b.put_u64(boundary.index);
        b.put_u64(boundary.term);
        b.put_u64(boundary.next_pos);
        b.put_slice(&tables);
        Ok(b.freeze())
    }

    /// Reads checkpoint bytes.
    pub fn decode(bytes: &[u8]) -> Result<StoreCheckpoint, CheckpointError> {
        let header = bytes.get(..HEADER_BYTES).ok_or(CheckpointError::Format)?;
        let (version, flags) = (header[0], header[1]);
        if version != VERSION || flags & !FLAG_BOUNDARY != 0 {
            return Err(CheckpointError::Format);
        }
        let u64_at = |o: usize| {
            let mut a = [0u8; 8];
            a.copy_from_slice(&header[o..o + 8]);
            u64::from_be_bytes(a)
        };
        let boundary = (flags & FLAG_BOUNDARY != 0).then(|| RetentionBoundary {
            index: u64_at(10),
            term: u64_at(18),
            next_pos: u64_at(26),
        });
        let tables = Manifest::decode(&bytes[HEADER_BYTES..])?;
        Ok(StoreCheckpoint { committed_end: u64_at(2), boundary, tables })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::state::manifest::QueueStart;

    fn tables() -> Manifest {
        let empty = Manifest::decode(&sample_manifest_bytes()).expect("a manifest");
        Manifest { meta_index: 77, queues: Vec::new(), ..empty }
    }

    fn sample_manifest_bytes() -> Bytes {
        Manifest {
            boundary: RetentionBoundary { index: 0, term: 0, next_pos: 0 },
            meta_index: 1,
            queues: vec![QueueStart { topic: "T".into(), queue_id: 0, next_offset: 3 }],
            topics: Default::default(),
            groups: Default::default(),
            offsets: Default::default(),
            delay_offsets: vec![],
            used_node_ids: vec![1, 2, 3],
            acl: None,
            lock_clock_ms: 0,
            locks: Vec::new(),
            pop_clock_ms: 0,
            pop_queues: Vec::new(),
        }
        .encode()
        .expect("encode")
    }

    #[test]
    fn round_trip_with_and_without_a_boundary_and_bad_bytes_refused() -> anyhow::Result<()> {
        for boundary in [None, Some(RetentionBoundary { index: 40, term: 2, next_pos: 8192 })] {
            let c = StoreCheckpoint { committed_end: 123_456, boundary, tables: tables() };
            let b = c.encode()?;
            let back = StoreCheckpoint::decode(&b)?;
            assert_eq!(back.committed_end, 123_456);
            assert_eq!(back.boundary, boundary);
            assert_eq!(back.tables.meta_index, 77);
            assert_eq!(back.tables.used_node_ids, vec![1, 2, 3]);
            for cut in 0..b.len() {
                assert!(StoreCheckpoint::decode(&b[..cut]).is_err(), "cut at {cut}");
            }
            let mut bad = b.to_vec();
            bad[1] = 0x80;
            assert!(StoreCheckpoint::decode(&bad).is_err());
        }
        Ok(())
    }
}
