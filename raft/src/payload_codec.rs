//! Payload codec: openraft's `EntryPayload` ⇄ (`EntryKind`, `app_tag`, payload bytes) as stored
//! after the entry header. Pure; never panics on disk input.
//!
//! - Blank: empty payload.
//! - Normal: the application bytes verbatim (RocketMQ records are stored exactly as the broker
//!   built and the patcher patched them, so CQ units can point into them).
//! - Membership: an explicit layout, not serde output of an alpha dependency (big-endian):
//!
//! ```text
//! version u8 (=1)
//! config_count u16, then per config: voter_count u16, voter ids u64 × voter_count
//! node_count u16, then per node: node_id u64,
//!                                raft_addr_len u16, raft_addr (UTF-8),
//!                                data_len u16, data (UTF-8)
//! ```
//! Trailing bytes are an error. Decoding goes through `Membership::new`, which checks that every
//! voter has a node.

use std::borrow::Cow;
use std::collections::{BTreeMap, BTreeSet};

use bytes::Bytes;

use crate::entry::EntryKind;
use crate::error::{CorruptReason, StoreError};
use crate::type_config::{AppPayload, EntryPayload, Membership, Node, NodeId};

const MEMBERSHIP_LAYOUT_VERSION: u8 = 1;

/// Encode a payload. Normal payloads are borrowed, membership is encoded into a new buffer.
pub fn encode(payload: &EntryPayload) -> Result<(EntryKind, u8, Cow<'_, [u8]>), StoreError> {
    match payload {
        EntryPayload::Blank => Ok((EntryKind::Blank, 0, Cow::Borrowed(&[][..]))),
        EntryPayload::Normal(d) => Ok((EntryKind::Normal, d.tag, Cow::Borrowed(&d.body[..]))),
        EntryPayload::Membership(m) => Ok((EntryKind::Membership, 0, Cow::Owned(encode_membership(m)?))),
    }
}

/// Decode a payload of `kind` from its stored bytes.
pub fn decode(kind: EntryKind, app_tag: u8, bytes: Bytes) -> Result<EntryPayload, CorruptReason> {
    match kind {
        EntryKind::Blank if bytes.is_empty() => Ok(EntryPayload::Blank),
        EntryKind::Blank => Err(CorruptReason::BadPayload),
        EntryKind::Normal => Ok(EntryPayload::Normal(AppPayload { tag: app_tag, body: bytes })),
        EntryKind::Membership => decode_membership(&bytes).map(EntryPayload::Membership),
    }
}

fn too_big(what: &str) -> StoreError {
    StoreError::Contract(format!("membership {what} does not fit its u16 length field"))
}

fn put_len(out: &mut Vec<u8>, n: usize, what: &str) -> Result<(), StoreError> {
    let n = u16::try_from(n).map_err(|_| too_big(what))?;
    out.extend_from_slice(&n.to_be_bytes());
    Ok(())
}

/// Encode a membership config in the layout above.
pub fn encode_membership(m: &Membership) -> Result<Vec<u8>, StoreError> {
    let mut out = Vec::with_capacity(64);
    out.push(MEMBERSHIP_LAYOUT_VERSION);
    let configs = m.get_joint_config();
    put_len(&mut out, configs.len(), "config count")?;
    for c in configs {
        put_len(&mut out, c.len(), "voter count")?;
        for id in c {
            out.extend_from_slice(&id.to_be_bytes());
        }
    }
    let nodes: Vec<(&NodeId, &Node)> = m.nodes().collect();
    put_len(&mut out, nodes.len(), "node count")?;
    for (id, node) in nodes {
        out.extend_from_slice(&id.to_be_bytes());
        put_len(&mut out, node.raft_addr.len(), "raft_addr")?;
        out.extend_from_slice(node.raft_addr.as_bytes());
        put_len(&mut out, node.data.len(), "node data")?;
        out.extend_from_slice(node.data.as_bytes());
    }
    Ok(out)
}

/// Cursor over untrusted bytes; every read is bounds-checked.
struct Reader<'a> {
    buf: &'a [u8],
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], CorruptReason> {
        if self.buf.len() < n {
            return Err(CorruptReason::BadPayload);
        }
        let (head, tail) = self.buf.split_at(n);
        self.buf = tail;
        Ok(head)
    }
    fn u8(&mut self) -> Result<u8, CorruptReason> {
        Ok(self.take(1)?[0])
    }
    fn u16(&mut self) -> Result<u16, CorruptReason> {
        let b = self.take(2)?;
        Ok(u16::from_be_bytes([b[0], b[1]]))
    }
    fn u64(&mut self) -> Result<u64, CorruptReason> {
        let mut a = [0u8; 8];
        a.copy_from_slice(self.take(8)?);
        Ok(u64::from_be_bytes(a))
    }
    fn string(&mut self) -> Result<String, CorruptReason> {
        let n = usize::from(self.u16()?);
        let b = self.take(n)?;
        String::from_utf8(b.to_vec()).map_err(|_| CorruptReason::BadPayload)
    }
}

/// Decode a membership config; rejects anything not produced by [`encode_membership`].
pub fn decode_membership(bytes: &[u8]) -> Result<Membership, CorruptReason> {
    let mut r = Reader { buf: bytes };
    if r.u8()? != MEMBERSHIP_LAYOUT_VERSION {
        return Err(CorruptReason::BadPayload);
    }
    let config_count = r.u16()?;
    let mut configs = Vec::with_capacity(usize::from(config_count).min(16));
    for _ in 0..config_count {
        let n = r.u16()?;
        let mut set = BTreeSet::new();
        for _ in 0..n {
            set.insert(r.u64()?);
        }
        configs.push(set);
    }
    let node_count = r.u16()?;
    let mut nodes = BTreeMap::new();
    for _ in 0..node_count {
        let id = r.u64()?;
        let raft_addr = r.string()?;
        let data = r.string()?;
        nodes.insert(id, Node { raft_addr, data });
    }
    if !r.buf.is_empty() {
        return Err(CorruptReason::BadPayload);
    }
    Membership::new(configs, nodes).map_err(|_| CorruptReason::BadPayload)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn membership(voters: &[u64], learners: &[u64]) -> Membership {
        let nodes: BTreeMap<u64, Node> = voters
            .iter()
            .chain(learners)
            .map(|id| (*id, Node::new(format!("10.0.0.{id}:40911"), format!("10.0.0.{id}:10911"))))
            .collect();
        Membership::new(vec![voters.iter().copied().collect()], nodes).expect("valid membership")
    }

    #[test]
    fn membership_golden() {
        let m = membership(&[1], &[]);
        let bytes = encode_membership(&m).expect("encode");
        let mut expected = vec![1u8, 0, 1, 0, 1];
        expected.extend_from_slice(&1u64.to_be_bytes());
        expected.extend_from_slice(&[0, 1]);
        expected.extend_from_slice(&1u64.to_be_bytes());
        expected.extend_from_slice(&[0, 14]);
        expected.extend_from_slice(b"10.0.0.1:40911");
        expected.extend_from_slice(&[0, 14]);
        expected.extend_from_slice(b"10.0.0.1:10911");
        assert_eq!(bytes, expected);
        assert_eq!(decode_membership(&bytes), Ok(m));
    }

    #[test]
    fn membership_round_trip_joint() {
        let nodes: BTreeMap<u64, Node> = (1..=5).map(|i| (i, Node::new(format!("n{i}"), ""))).collect();
        let m = Membership::new(vec![[1, 2, 3].into(), [3, 4].into()], nodes).expect("valid");
        let bytes = encode_membership(&m).expect("encode");
        assert_eq!(decode_membership(&bytes), Ok(m));
    }

    #[test]
    fn payload_kinds_round_trip() {
        for p in [
            EntryPayload::Blank,
            EntryPayload::Normal(AppPayload::new(9, &b"records"[..])),
            EntryPayload::Membership(membership(&[1, 2, 3], &[4])),
        ] {
            let (kind, tag, bytes) = encode(&p).expect("encode");
            let back = decode(kind, tag, Bytes::copy_from_slice(&bytes)).expect("decode");
            assert_eq!(back, p);
        }
    }

    proptest! {
        #[test]
        fn membership_decoder_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..256)) {
            let _ = decode_membership(&bytes);
        }

        #[test]
        fn membership_round_trips(voters in proptest::collection::btree_set(0u64..50, 1..6),
                                  learners in proptest::collection::btree_set(50u64..100, 0..3)) {
            let v: Vec<u64> = voters.into_iter().collect();
            let l: Vec<u64> = learners.into_iter().collect();
            let m = membership(&v, &l);
            let bytes = encode_membership(&m).expect("encode");
            prop_assert_eq!(decode_membership(&bytes), Ok(m));
        }
    }
}
