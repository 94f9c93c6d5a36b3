//! [`RecordingHandler`]: a small [`ApplyHandler`] for tests and examples. It records every
//! applied entry (index, term, payload position, bytes) and replies with the payload position
//! and index, so tests can check that every replica applied the same entries at the same
//! physical positions. Its retention boundary P is set by the test ([`RecordingHandler::set_boundary`]);
//! the manifest at P is the number of recorded entries up to P and P's index (big-endian u64
//! each); installing one forgets the recorded entries (everything after P is applied again).
//! Built [`RecordingHandler::with_checkpoints`], it also keeps checkpoints: the data is the
//! applied log id's index (big-endian u64); restoring one records where it started.

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
    /// The snapshot point of the last manifest installed.
    pub installed_at: Option<LogId>,
    /// Retention boundary offered to the next snapshot build.
    pub boundary: Option<LogId>,
    /// The checkpoint this handler's state was restored from at start.
    pub restored_at: Option<LogId>,
    /// Checkpoints captured so far.
    pub checkpoints: u64,
}

/// Records every applied entry.
#[derive(Debug, Default)]
pub struct RecordingHandler {
    state: Mutex<Recorded>,
    keeps_checkpoints: bool,
}

impl RecordingHandler {
    /// An empty recorder that keeps no checkpoints.
    pub fn new() -> Self {
        Self::default()
    }

    /// An empty recorder that keeps checkpoints.
    pub fn with_checkpoints() -> Self {
        Self { keeps_checkpoints: true, ..Self::default() }
    }

    /// The recorded state.
    pub fn recorded(&self) -> MutexGuard<'_, Recorded> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Offer `p` (an applied log id) as the retention boundary of the next snapshot.
    pub fn set_boundary(&self, p: LogId) {
        self.recorded().boundary = Some(p);
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

    fn build_manifest(&self, applied: LogId) -> io::Result<Option<(LogId, Bytes)>> {
        let st = self.recorded();
        let Some(p) = st.boundary.filter(|p| p.index <= applied.index) else { return Ok(None) };
        let mut b = BytesMut::with_capacity(16);
        b.put_u64(st.entries.iter().filter(|e| e.log_id.index <= p.index).count() as u64);
        b.put_u64(p.index);
        Ok(Some((p, b.freeze())))
    }

    fn install_manifest(&self, manifest: Bytes, last: LogId) -> io::Result<()> {
        if manifest.len() != 16 {
            return Err(io::Error::new(io::ErrorKind::InvalidData, "recording manifest must be 16 bytes"));
        }
        let mut st = self.recorded();
        st.entries.clear();
        st.last = Some(last);
        st.installs += 1;
        st.installed_at = Some(last);
        Ok(())
    }

    fn checkpoint(&self, applied: LogId) -> io::Result<Option<Bytes>> {
        if !self.keeps_checkpoints {
            return Ok(None);
        }
        self.recorded().checkpoints += 1;
        Ok(Some(Bytes::copy_from_slice(&applied.index.to_be_bytes())))
    }

    fn restore_checkpoint(&self, data: Bytes, applied: LogId) -> io::Result<()> {
        if !self.keeps_checkpoints {
            return Err(io::Error::other("this recorder keeps no checkpoints"));
        }
        if data.as_ref() != applied.index.to_be_bytes() {
            return Err(io::Error::new(io::ErrorKind::InvalidData, "recording checkpoint is not of its log id"));
        }
        let mut st = self.recorded();
        st.last = Some(applied);
        st.restored_at = Some(applied);
        Ok(())
    }
}
