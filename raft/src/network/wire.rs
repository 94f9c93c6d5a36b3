//! The Raft RPC messages on the wire: one request enum, one reply enum, bincode 2.0.1 in serde
//! mode with the standard config. Internal to a group of the same build (bincode is positional:
//! every replica must run the same openraft alpha and these same enums; new variants go last,
//! as `StreamAppend` did, so older variants keep their numbers).
//!
//! Decoding is bounded: the bincode limit is the remoting frame limit, so a lying length prefix
//! cannot make the decoder allocate more than a frame could carry; trailing bytes are an error.

use bytes::Bytes;
use openraft::raft::{
    AppendEntriesRequest, AppendEntriesResponse, SnapshotResponse, StreamAppendResult, TransferLeaderRequest,
    TransferLeaderResponse, VoteRequest, VoteResponse,
};
use raftmq_common::limits::FRAME_SIZE_MAX_BYTES;
use serde::{Deserialize, Serialize};

use super::transport::RpcKind;
use crate::state_machine::SnapshotMeta;
use crate::type_config::{EntryPayload, NodeId, TypeConfig, Vote};
use crate::vote_guard::ProbeReply;

/// A request from a leader or candidate.
#[derive(Debug, Serialize, Deserialize)]
pub enum RaftRequest {
    /// AppendEntries or heartbeat.
    AppendEntries(AppendEntriesRequest<TypeConfig>),
    /// RequestVote.
    Vote(VoteRequest<TypeConfig>),
    /// Pre-Vote: would you vote for me (no state change)?
    PreVote(VoteRequest<TypeConfig>),
    /// A full snapshot: the leader's vote, the snapshot meta and the encoded snapshot data.
    InstallSnapshot {
        /// The sender's vote.
        vote: Vote,
        /// Snapshot meta.
        meta: SnapshotMeta,
        /// Encoded `snapshot_file::SnapshotData`.
        data: Vec<u8>,
    },
    /// Leadership transfer to the receiver.
    TransferLeader(TransferLeaderRequest<TypeConfig>),
    /// One AppendEntries of a pipelined stream: the receiver hands the requests of `stream_id`
    /// to openraft in `seq` order (0, 1, 2, …), whatever order they arrive in.
    StreamAppend {
        /// Chosen by the sender, unique per stream.
        stream_id: u64,
        /// Position in the stream, from 0 without gaps.
        seq: u64,
        /// The request.
        rpc: AppendEntriesRequest<TypeConfig>,
    },
    /// What are your term, last log id, committed log id and membership? Asked by a replica that
    /// started from an empty store before it takes part ([`crate::vote_guard`]); a leader asked
    /// lets that follower's log go back once. Travels as a vote RPC.
    Probe {
        /// The asking replica.
        from: NodeId,
    },
    /// One chunk of a snapshot too large to send whole (`super::snapshot_chunks`); the last one
    /// installs it and is answered as InstallSnapshot. Last in the enum: the variants before it
    /// keep their wire numbers.
    InstallSnapshotChunk {
        /// The sender's vote.
        vote: Vote,
        /// Snapshot meta (the same on every chunk).
        meta: SnapshotMeta,
        /// Where `data` starts in the snapshot.
        offset: u64,
        /// The snapshot's whole size.
        total: u64,
        /// The bytes.
        data: Vec<u8>,
    },
    /// "I am `from`, at `raft_addr`": sent to a replica that refused us because its store is empty
    /// and it is still asking its peers ([`crate::vote_guard::GUARDED_REFUSAL_MARKER`]); its
    /// configured peers may all have left the group, and then it learns the members from us.
    /// Travels as a vote RPC. Last in the enum: the variants before it keep their wire numbers.
    Introduce {
        /// The sender.
        from: NodeId,
        /// The sender's Raft address.
        raft_addr: String,
    },
}

impl RaftRequest {
    /// About how many bytes the encoded request takes (exact enough to size its buffer).
    pub fn size_hint(&self) -> usize {
        const PER_ENTRY_BYTES: usize = 32;
        match self {
            Self::AppendEntries(r) | Self::StreamAppend { rpc: r, .. } => {
                let payloads: usize = r
                    .entries
                    .iter()
                    .map(|e| match &e.payload {
                        EntryPayload::Normal(p) => p.body.len(),
                        _ => 256,
                    })
                    .sum();
                128 + payloads + r.entries.len() * PER_ENTRY_BYTES
            }
            Self::InstallSnapshot { data, .. } | Self::InstallSnapshotChunk { data, .. } => 1024 + data.len(),
            _ => 256,
        }
    }

    /// The RPC kind (selects the transport's request code).
    pub fn kind(&self) -> RpcKind {
        match self {
            Self::AppendEntries(_) | Self::StreamAppend { .. } => RpcKind::AppendEntries,
            Self::Vote(_) | Self::PreVote(_) | Self::Probe { .. } | Self::Introduce { .. } => RpcKind::Vote,
            Self::InstallSnapshot { .. } | Self::InstallSnapshotChunk { .. } => RpcKind::InstallSnapshot,
            Self::TransferLeader(_) => RpcKind::TransferLeader,
        }
    }
}

/// The receiver's answer.
#[derive(Debug, Serialize, Deserialize)]
pub enum RaftReply {
    /// Reply to AppendEntries.
    AppendEntries(AppendEntriesResponse<TypeConfig>),
    /// Reply to Vote or PreVote.
    Vote(VoteResponse<TypeConfig>),
    /// Reply to InstallSnapshot.
    InstallSnapshot(SnapshotResponse<TypeConfig>),
    /// Reply to TransferLeader.
    TransferLeader(TransferLeaderResponse<TypeConfig>),
    /// The receiver did not process the request (stopped, damaged store, not started, wrong kind).
    Refused(String),
    /// Reply to one request of a stream, in the stream's order: the last log id now durable
    /// on the receiver, or why the stream ends.
    StreamAppend(StreamAppendResult<TypeConfig>),
    /// Reply to Probe.
    Probe(ProbeReply),
    /// Reply to an InstallSnapshotChunk that was not the last: this many bytes have arrived.
    SnapshotChunk {
        /// Bytes of the snapshot received so far.
        received: u64,
    },
    /// Reply to Introduce: whether the receiver will ask the sender (false once it no longer
    /// asks anyone, or when it holds too many introductions already).
    Introduced {
        /// The introduction was taken.
        taken: bool,
    },
}

/// Wire encoding or decoding failure.
#[derive(Debug, thiserror::Error)]
#[error("raft rpc codec: {0}")]
pub struct WireError(String);

fn config() -> impl bincode::config::Config {
    bincode::config::standard().with_limit::<FRAME_SIZE_MAX_BYTES>()
}

/// Encode a message.
pub fn encode<T: Serialize>(msg: &T) -> Result<Bytes, WireError> {
    encode_sized(msg, 0)
}

/// Encode a message into a buffer of `capacity` bytes to start with (a batch of entries then
/// costs one copy of each payload, not a chain of reallocations).
pub fn encode_sized<T: Serialize>(msg: &T, capacity: usize) -> Result<Bytes, WireError> {
    let mut buf = Vec::with_capacity(capacity);
    bincode::serde::encode_into_std_write(msg, &mut buf, config()).map_err(|e| WireError(e.to_string()))?;
    Ok(Bytes::from(buf))
}

/// Decode a message; the whole input must be consumed. Borrowing decode: a payload is copied once
/// out of `bytes`, where the owning decode first zero-filled a fresh vector for it (bincode's
/// `Vec<u8>`), a `memset` of every replicated byte on each follower.
pub fn decode<'de, T: Deserialize<'de>>(bytes: &'de [u8]) -> Result<T, WireError> {
    let (msg, used) =
        bincode::serde::borrow_decode_from_slice(bytes, config()).map_err(|e| WireError(e.to_string()))?;
    if used != bytes.len() {
        return Err(WireError(format!("{} trailing bytes", bytes.len() - used)));
    }
    Ok(msg)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::type_config::{AppPayload, Entry, log_id};

    #[test]
    fn append_entries_round_trip() {
        let entries = vec![
            Entry { log_id: log_id(3, 7), payload: EntryPayload::Normal(AppPayload::new(9, &b"hello"[..])) },
            Entry { log_id: log_id(3, 8), payload: EntryPayload::Blank },
        ];
        let req = AppendEntriesRequest::<TypeConfig> {
            vote: Vote::new_committed(3, 1),
            prev_log_id: Some(log_id(2, 6)),
            entries,
            leader_commit: Some(log_id(2, 6)),
        };
        let b = encode(&RaftRequest::AppendEntries(req.clone())).expect("encode");
        match decode::<RaftRequest>(&b).expect("decode") {
            RaftRequest::AppendEntries(r) => {
                assert_eq!((r.vote, r.prev_log_id, r.leader_commit), (req.vote, req.prev_log_id, req.leader_commit));
                assert_eq!(r.entries, req.entries);
            }
            other => panic!("wrong variant {other:?}"),
        }
    }

    #[test]
    fn garbage_never_panics() {
        let b = encode(&RaftReply::Refused("x".into())).expect("encode");
        for cut in 0..b.len() {
            assert!(decode::<RaftReply>(&b[..cut]).is_err());
        }
        let mut seed = 0x9E37_79B9_7F4A_7C15u64;
        for _ in 0..2000 {
            seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            let len = (seed >> 58) as usize;
            let junk: Vec<u8> = (0..len).map(|i| (seed >> (i % 56)) as u8).collect();
            let _ = decode::<RaftRequest>(&junk);
            let _ = decode::<RaftReply>(&junk);
        }
        let mut long = b.to_vec();
        long.push(0);
        assert!(decode::<RaftReply>(&long).is_err());
    }
}
