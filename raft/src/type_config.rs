//! The openraft type configuration of a raftmq broker group, and the application payload and
//! reply types it carries. This is the only place that names openraft's generic parameters;
//! everything else uses the aliases below.
//!
//! - `NodeId = u64`; an id belongs to one replica. The same replica may come back with an empty
//!   store (a wiped disk), its peers configured: `vote_guard` keeps it out of elections until it
//!   caught up.
//! - `Node = NodeInfo { raft_addr, data }`, `data` = the broker's remoting address.
//! - `LeaderId = leader_id_std`: standard Raft, one leader per term, a log id is (term, index)
//!   exactly as DLedger (and the on-disk header) records it.
//! - `D = AppPayload`: opaque bytes plus a one-byte tag the broker chooses (RocketMQ records vs
//!   replicated commands). raft/ never looks inside except through `PayloadPatcher`.
//! - `R = AppReply`: opaque bytes the broker's state machine returns to `client_write`.
//! - `AsyncRuntime = RaftRuntime`: openraft's tokio runtime whose RNG a simulation can seed
//!   (`runtime`); production behaviour is `TokioRuntime`'s.
//!
//! serde derives exist only because openraft's `serde` feature requires them (internal RPC via
//! bincode); nothing serde-encoded is ever written to disk.

use std::fmt;

use bytes::Bytes;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// Raft node id of a replica.
pub type NodeId = u64;
/// Node descriptor stored in membership: `raft_addr` + broker remoting address in `data`.
pub type Node = openraft::impls::NodeInfo;

/// Application data of a normal entry.
#[derive(Clone, PartialEq, Eq)]
pub struct AppPayload {
    /// Broker-defined tag, stored in the entry header (`app_tag`), e.g. "RocketMQ records" vs
    /// "metadata command". raft/ treats it as opaque.
    pub tag: u8,
    /// The payload bytes, stored unmodified (after patching) right after the entry header.
    pub body: Bytes,
}

impl AppPayload {
    /// Build a payload.
    pub fn new(tag: u8, body: impl Into<Bytes>) -> Self {
        Self { tag, body: body.into() }
    }
}

impl fmt::Debug for AppPayload {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "AppPayload(tag={}, {} B)", self.tag, self.body.len())
    }
}

impl fmt::Display for AppPayload {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self, f)
    }
}

/// Reply of the state machine to the writer of an entry; opaque to raft/.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct AppReply(pub Bytes);

impl fmt::Debug for AppReply {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "AppReply({} B)", self.0.len())
    }
}

openraft::declare_raft_types!(
    /// openraft type configuration of a raftmq broker group.
    pub TypeConfig:
        D = AppPayload,
        R = AppReply,
        NodeId = NodeId,
        Node = Node,
        Term = u64,
        LeaderId = openraft::impls::leader_id_std::LeaderId<u64, NodeId>,
        AsyncRuntime = crate::runtime::RaftRuntime,
);

/// Log id (term, index).
pub type LogId = openraft::alias::LogIdOf<TypeConfig>;
/// Vote (term, voted-for, committed).
pub type Vote = openraft::alias::VoteOf<TypeConfig>;
/// A Raft log entry.
pub type Entry = openraft::alias::EntryOf<TypeConfig>;
/// Entry payload enum (blank / normal / membership).
pub type EntryPayload = openraft::alias::EntryPayloadOf<TypeConfig>;
/// Membership config.
pub type Membership = openraft::Membership<NodeId, Node>;
/// Membership with the log id that introduced it.
pub type StoredMembership = openraft::alias::StoredMembershipOf<TypeConfig>;
/// Committed leader id in std mode: the term.
pub type CommittedLeaderId = openraft::alias::CommittedLeaderIdOf<TypeConfig>;

/// An AppendEntries RPC (what a leader sends; tests forge them).
pub type AppendEntriesRequest = openraft::raft::AppendEntriesRequest<TypeConfig>;
/// A RequestVote or pre-vote RPC.
pub type VoteRequest = openraft::raft::VoteRequest<TypeConfig>;

/// Build a log id from (term, index).
pub fn log_id(term: u64, index: u64) -> LogId {
    LogId::new(CommittedLeaderId::new(term), index)
}

// --- serde for the internal RPC only -------------------------------------------------------

#[derive(Serialize, Deserialize)]
struct AppPayloadWire {
    tag: u8,
    #[serde(serialize_with = "ser_bytes", deserialize_with = "de_bytes")]
    body: Bytes,
}

impl Serialize for AppPayload {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        AppPayloadWire { tag: self.tag, body: self.body.clone() }.serialize(s)
    }
}

impl<'de> Deserialize<'de> for AppPayload {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let w = AppPayloadWire::deserialize(d)?;
        Ok(Self { tag: w.tag, body: w.body })
    }
}

impl Serialize for AppReply {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        ser_bytes(&self.0, s)
    }
}

impl<'de> Deserialize<'de> for AppReply {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        de_bytes(d).map(AppReply)
    }
}

fn ser_bytes<S: Serializer>(b: &Bytes, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_bytes(b)
}

fn de_bytes<'de, D: Deserializer<'de>>(d: D) -> Result<Bytes, D::Error> {
    struct V;
    impl<'de> serde::de::Visitor<'de> for V {
        type Value = Bytes;
        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("bytes")
        }
        fn visit_bytes<E: serde::de::Error>(self, v: &[u8]) -> Result<Bytes, E> {
            Ok(Bytes::copy_from_slice(v))
        }
        fn visit_byte_buf<E: serde::de::Error>(self, v: Vec<u8>) -> Result<Bytes, E> {
            Ok(Bytes::from(v))
        }
        fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<Bytes, A::Error> {
            let mut out = Vec::with_capacity(seq.size_hint().unwrap_or(0).min(1 << 20));
            while let Some(b) = seq.next_element::<u8>()? {
                out.push(b);
            }
            Ok(Bytes::from(out))
        }
    }
    // `deserialize_bytes`: a borrowing decoder hands the bytes over in place (`visit_bytes`,
    // one copy); an owning one still decodes a vector (`visit_byte_buf`).
    d.deserialize_bytes(V)
}
