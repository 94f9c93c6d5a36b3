//! [`RecordingHandler`]: a small [`ApplyHandler`] for tests and examples. It records every
//! applied entry (index, term, payload position, bytes) and replies with the payload position
//! and index, so tests can check that every replica applied the same entries at the same
//! physical positions. Its manifest is the number of entries it holds and the last one's index
//! (big-endian u64 each); installing one forgets the recorded entries.

use std::io;
use std::sync::{Mutex, MutexGuard};

use bytes::{BufMut, Bytes, BytesMut};

use crate::state_machine::{ApplyHandler, CommittedEntry};
use crate::type_config::{AppReply, LogId};

/// Applied state of a [`RecordingHandler`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Recorded {
    /// Normal entries applied since the last manifest install, in order.
    pub entries: Vec<CommittedEntry>,
    /// Last applied log id of any kind.
    pub last: Option<LogId>,
    /// Manifests installed so far.
    pub installs: u64,
}

/// Records every applied entry.
#[derive(Debug, Default)]
pub struct RecordingHandler {
    state: Mutex<Recorded>,
}

impl RecordingHandler {
    /// An empty recorder.
    pub fn new() -> Self {
        Self::default()
    }

    /// The recorded state.
    pub fn recorded(&self) -> MutexGuard<'_, Recorded> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Decode a reply: (payload position, index).
    pub fn decode_reply(reply: &AppReply) -> Option<(u64, u64)> {
        let b = reply.0.get(..16)?;
        let mut pos = [0u8; 8];
        let mut idx = [0u8; 8];
        pos.copy_from_slice(&b[..8]);
        idx.copy_from_slice(&b[8..16]);
        Some((u64::from_be_bytes(pos), u64::from_be_bytes(idx)))
    }
}

impl ApplyHandler for RecordingHandler {
    fn apply(&self, entry: CommittedEntry) -> AppReply {
        let mut reply = BytesMut::with_capacity(16);
        reply.put_u64(entry.payload_pos);
        reply.put_u64(entry.log_id.index);
        let mut st = self.recorded();
        // Re-application after a restart replays entries already recorded: keep one copy.
        if st.entries.last().is_none_or(|e| e.log_id.index < entry.log_id.index) {
            st.last = Some(entry.log_id);
            st.entries.push(entry);
        }
        AppReply(reply.freeze())
    }

    fn apply_other(&self, log_id: LogId) {
        self.recorded().last = Some(log_id);
    }

    fn build_manifest(&self, last_applied: LogId) -> io::Result<Bytes> {
        let st = self.recorded();
        let mut b = BytesMut::with_capacity(16);
        b.put_u64(st.entries.len() as u64);
        b.put_u64(last_applied.index);
        Ok(b.freeze())
    }

    fn install_manifest(&self, manifest: Bytes, last: LogId) -> io::Result<()> {
        if manifest.len() != 16 {
            return Err(io::Error::new(io::ErrorKind::InvalidData, "recording manifest must be 16 bytes"));
        }
        let mut st = self.recorded();
        st.entries.clear();
        st.last = Some(last);
        st.installs += 1;
        Ok(())
    }
}
