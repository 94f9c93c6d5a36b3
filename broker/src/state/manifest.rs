//! The snapshot manifest: everything a replica needs to continue after the log up to the
//! retention boundary P is purged ([`RetentionBoundary`], [`Manifest`]), and its byte layout.
//! The retention service chooses P and triggers the snapshot; the store builds and installs the
//! manifest.
//!
//! Manifest layout (inside raft's snapshot data, whose CRC covers it; big-endian):
//!
//! ```text
//! magic u32 "RMQM" | version u8 (1; 2 with the ACL section; 3 with the lock section; 4 with the POP section) | boundary_index u64 | boundary_term u64 | next_pos u64 | meta_index u64
//! | queue_count u32 | queue_count × (topic_len u16 | topic UTF-8 | queue_id i32 | next_offset u64)
//! | topics_len u32 | TopicConfigSerializeWrapper JSON | groups_len u32 | SubscriptionGroupWrapper JSON
//! | offsets_len u32 | ConsumerOffsetSerializeWrapper JSON
//! | delay_count u32 | delay_count × (queue_id i32 | offset i64) | node_id_count u32 | node_id_count × u64
//! | version 2 only: acl_counter i64 | acl_timestamp i64 | acl_len u32 | plain_acl.yml text UTF-8
//! | version 3 only: has_acl u8 (0/1) | the ACL fields of version 2 if has_acl
//! |                 lock_clock_ms u64 | lock_count u32 | lock_count × (group_len u16 | group |
//! |                 topic_len u16 | topic | broker_len u16 | broker_name | queue_id i32 |
//! |                 client_len u16 | client_id | last_update_ms u64)
//! | version 4: the sections of version 3, then pop_clock_ms u64 | pop_queue_count u32 |
//! |                 pop_queue_count × (group_len u16 | group | topic_len u16 | topic | queue_id i32 |
//! |                 cursor i64 | in_flight_count u32 | in_flight_count × (offset i64 | epoch_ms u64 |
//! |                 invisible_until_ms u64 | attempt u32 | fifo u8))
//! ```
//!
//! A manifest without a replicated ACL edit is written as version 1, and one without a queue lock
//! as version 1 or 2, and one without POP state as version 3 at most, so brokers from before those
//! sections still read it. Invariants: decoding never panics and never allocates beyond what the
//! bytes can hold; every count is bounded by `raftmq_common::limits`.
//!
//! Queues are given as of P (everything at or below P is purged, so a queue's minimum equals its
//! next offset there); the metadata as of `meta_index` ≥ P, see [`Manifest`].

use bytes::BufMut;
use bytes::Bytes;
use bytes::BytesMut;
use raftmq_common::limits::ACL_FILE_SIZE_MAX_BYTES;
use raftmq_common::limits::BROKER_REBALANCE_LOCK_TABLE_MAX_COUNT;
use raftmq_common::limits::DELAY_PROGRESS_BATCH_MAX_COUNT;
use raftmq_common::limits::POP_IN_FLIGHT_MAX_COUNT;
use raftmq_common::limits::POP_QUEUES_MAX_COUNT;
use raftmq_common::limits::RAFT_NODE_IDS_MAX_COUNT;
use raftmq_common::limits::RETENTION_MANIFEST_QUEUES_MAX_COUNT;
use raftmq_common::protocol::body::BodyError;
use raftmq_common::protocol::body::JsonBody;
use raftmq_common::protocol::body::consumer_offset::ConsumerOffsetSerializeWrapper;
use raftmq_common::protocol::body::register::TopicConfigSerializeWrapper;
use raftmq_common::protocol::body::subscription_group::SubscriptionGroupWrapper;
use thiserror::Error;

use crate::acl::AclDocument;
use crate::acl::AclVersion;
use crate::state::entry::DelayProgress;
use crate::state::pop::InFlight;
use crate::state::pop::PopQueue;
use crate::state::pop::QueueState;
use crate::state::rebalance_lock::LockEntry;
use crate::state::rebalance_lock::LockRecord;
use crate::state::rebalance_lock::LockedQueue;

/// The retention boundary P: the last Raft entry to purge, with the position right after it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct RetentionBoundary {
    /// Raft index of P.
    pub index: u64,
    /// Term of P.
    pub term: u64,
    /// Physical position right after entry P: the CommitLog's new minimum.
    pub next_pos: u64,
}

/// Where a topic-queue continues after the boundary.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QueueStart {
    /// Topic.
    pub topic: String,
    /// Queue id.
    pub queue_id: i32,
    /// Its next (and minimum) offset as of P: the first unit at or after `next_pos`.
    pub next_offset: u64,
}

/// Everything a replica needs to continue with entries P+1.. after the log up to P is gone.
///
/// Queues are as of P. The metadata tables are as of `meta_index` (the applied index when the
/// manifest was built, ≥ P): they cannot be rolled back to P. A replica that loads the manifest
/// records `meta_index` and, while the entries (P, meta_index] are applied after it, leaves the
/// tables alone (their effect is already in them) and only applies the ConsumeQueue side of those
/// entries (units, a deleted topic's queues). Skipping is exact. Plainly re-applying would converge
/// too for the maps themselves — topics, groups, offsets and used node ids are last-writer-wins per
/// key (the state at `meta_index` holds, for each key, the last write ≤ meta_index, which a replay
/// of (P, meta_index] writes last again) and delay progress only moves forward (max is idempotent) —
/// but not for the `DataVersion` counters, which count changes, so skipping is what keeps every
/// replica's topic and group versions equal.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Manifest {
    /// P.
    pub boundary: RetentionBoundary,
    /// The applied index the metadata below is as of.
    pub meta_index: u64,
    /// Every topic-queue known at build time, sorted by (topic, queue id).
    pub queues: Vec<QueueStart>,
    /// Topics (`topics.json`).
    pub topics: TopicConfigSerializeWrapper,
    /// Consumer groups (`subscriptionGroup.json`).
    pub groups: SubscriptionGroupWrapper,
    /// Committed consumer offsets (`consumerOffset.json`).
    pub offsets: ConsumerOffsetSerializeWrapper,
    /// Delay-queue progress (`delayOffset.json`).
    pub delay_offsets: Vec<DelayProgress>,
    /// Raft node ids used by the group.
    pub used_node_ids: Vec<u64>,
    /// The last replicated plain ACL edit.
    pub acl: Option<AclDocument>,
    /// The queue-lock table's clock (largest stamp applied).
    pub lock_clock_ms: u64,
    /// The queue locks of orderly consumers, sorted by (group, queue).
    pub locks: Vec<LockRecord>,
    /// The POP table's clock.
    pub pop_clock_ms: u64,
    /// The POP table's queues, sorted by key.
    pub pop_queues: Vec<(PopQueue, QueueState)>,
}

/// Why a manifest could not be encoded or decoded.
#[derive(Debug, Error)]
pub enum ManifestError {
    /// Not a manifest (magic) or a version this broker does not know.
    #[error("not a retention manifest of a known version")]
    Format,
    /// The bytes end inside a field.
    #[error("manifest truncated reading {0}")]
    Truncated(&'static str),
    /// A count or length beyond the limits or the bytes.
    #[error("manifest {0} out of range")]
    OutOfRange(&'static str),
    /// Bytes after the last field.
    #[error("manifest has {0} trailing bytes")]
    TrailingBytes(usize),
    /// A topic name is not UTF-8.
    #[error("manifest topic name is not UTF-8")]
    BadName,
    /// The ACL file text is not UTF-8.
    #[error("manifest ACL file is not UTF-8")]
    BadAclText,
    /// A JSON section.
    #[error("manifest JSON: {0}")]
    Json(#[from] BodyError),
}

const MANIFEST_MAGIC: u32 = 0x524D_514D;
/// Without the ACL section.
const MANIFEST_VERSION_1: u8 = 1;
/// With the ACL section.
const MANIFEST_VERSION_2: u8 = 2;
/// With an optional ACL section and the lock section.
const MANIFEST_VERSION_3: u8 = 3;
/// With the sections of version 3 and the POP section.
const MANIFEST_VERSION_4: u8 = 4;
/// Smallest POP queue record: two empty names, queue id, cursor, in-flight count.
const POP_QUEUE_MIN_BYTES: usize = 2 * 2 + 4 + 8 + 4;
/// One in-flight record: offset, epoch, invisible until, attempt, fifo.
const POP_IN_FLIGHT_BYTES: usize = 8 + 8 + 8 + 4 + 1;
/// Smallest lock record: four empty names, queue id, last update.
const LOCK_RECORD_MIN_BYTES: usize = 4 * 2 + 4 + 8;

fn put_name(out: &mut BytesMut, value: &str, what: &'static str) -> Result<(), ManifestError> {
    out.put_u16(u16::try_from(value.len()).map_err(|_| ManifestError::OutOfRange(what))?);
    out.put_slice(value.as_bytes());
    Ok(())
}

fn put_acl(out: &mut BytesMut, acl: &AclDocument) -> Result<(), ManifestError> {
    if acl.yaml.len() as u64 > ACL_FILE_SIZE_MAX_BYTES {
        return Err(ManifestError::OutOfRange("ACL file length"));
    }
    out.put_i64(acl.version.counter);
    out.put_i64(acl.version.timestamp);
    put_section(out, acl.yaml.as_bytes(), "ACL file length")
}

fn put_section(out: &mut BytesMut, json: &[u8], what: &'static str) -> Result<(), ManifestError> {
    out.put_u32(u32::try_from(json.len()).map_err(|_| ManifestError::OutOfRange(what))?);
    out.put_slice(json);
    Ok(())
}

impl Manifest {
    /// The manifest bytes (layout in the module doc).
    pub fn encode(&self) -> Result<Bytes, ManifestError> {
        if self.queues.len() > RETENTION_MANIFEST_QUEUES_MAX_COUNT {
            return Err(ManifestError::OutOfRange("queue count"));
        }
        if self.delay_offsets.len() > DELAY_PROGRESS_BATCH_MAX_COUNT {
            return Err(ManifestError::OutOfRange("delay level count"));
        }
        if self.used_node_ids.len() > RAFT_NODE_IDS_MAX_COUNT {
            return Err(ManifestError::OutOfRange("node id count"));
        }
        if self.locks.len() > BROKER_REBALANCE_LOCK_TABLE_MAX_COUNT {
            return Err(ManifestError::OutOfRange("lock count"));
        }
        if self.pop_queues.len() > POP_QUEUES_MAX_COUNT {
            return Err(ManifestError::OutOfRange("POP queue count"));
        }
        let version = match (self.pop_queues.is_empty(), self.locks.is_empty(), self.acl.is_some()) {
            (false, _, _) => MANIFEST_VERSION_4,
            (true, false, _) => MANIFEST_VERSION_3,
            (true, true, true) => MANIFEST_VERSION_2,
            (true, true, false) => MANIFEST_VERSION_1,
        };
        let sections_of_3 = version >= MANIFEST_VERSION_3;
        let mut out = BytesMut::new();
        out.put_u32(MANIFEST_MAGIC);
        out.put_u8(version);
        out.put_u64(self.boundary.index);
        out.put_u64(self.boundary.term);
        out.put_u64(self.boundary.next_pos);
        out.put_u64(self.meta_index);
        // Counts are bounded by the checks above.
        out.put_u32(self.queues.len() as u32);
        for q in &self.queues {
            out.put_u16(u16::try_from(q.topic.len()).map_err(|_| ManifestError::OutOfRange("topic length"))?);
            out.put_slice(q.topic.as_bytes());
            out.put_i32(q.queue_id);
            out.put_u64(q.next_offset);
        }
        put_section(&mut out, &self.topics.encode()?, "topics")?;
        put_section(&mut out, &self.groups.encode()?, "groups")?;
        put_section(&mut out, &self.offsets.encode()?, "offsets")?;
        out.put_u32(self.delay_offsets.len() as u32);
        for d in &self.delay_offsets {
            out.put_i32(d.queue_id);
            out.put_i64(d.offset);
        }
        out.put_u32(self.used_node_ids.len() as u32);
        for id in &self.used_node_ids {
            out.put_u64(*id);
        }
        if sections_of_3 {
            out.put_u8(u8::from(self.acl.is_some()));
        }
        if let Some(acl) = &self.acl {
            put_acl(&mut out, acl)?;
        }
        if sections_of_3 {
            out.put_u64(self.lock_clock_ms);
            // Bounded by the check above.
            out.put_u32(self.locks.len() as u32);
            for l in &self.locks {
                put_name(&mut out, &l.group, "lock group length")?;
                put_name(&mut out, &l.queue.topic, "lock topic length")?;
                put_name(&mut out, &l.queue.broker_name, "lock broker name length")?;
                out.put_i32(l.queue.queue_id);
                put_name(&mut out, &l.entry.client_id, "lock client id length")?;
                out.put_u64(l.entry.last_update_ms);
            }
        }
        if version == MANIFEST_VERSION_4 {
            out.put_u64(self.pop_clock_ms);
            // Bounded by the check above.
            out.put_u32(self.pop_queues.len() as u32);
            for (q, state) in &self.pop_queues {
                put_name(&mut out, &q.group, "POP group length")?;
                put_name(&mut out, &q.topic, "POP topic length")?;
                out.put_i32(q.queue_id);
                out.put_i64(state.cursor);
                let count =
                    u32::try_from(state.in_flight.len()).map_err(|_| ManifestError::OutOfRange("POP in flight"))?;
                out.put_u32(count);
                for (offset, f) in &state.in_flight {
                    out.put_i64(*offset);
                    out.put_u64(f.epoch_ms);
                    out.put_u64(f.invisible_until_ms);
                    out.put_u32(f.attempt);
                    out.put_u8(u8::from(f.fifo));
                }
            }
        }
        Ok(out.freeze())
    }

    /// Reads manifest bytes; never panics, never allocates beyond what the bytes can hold.
    pub fn decode(bytes: &[u8]) -> Result<Manifest, ManifestError> {
        let mut r = Reader(bytes);
        if u32::from_be_bytes(r.array("magic")?) != MANIFEST_MAGIC {
            return Err(ManifestError::Format);
        }
        let [version] = r.array::<1>("version")?;
        if !matches!(version, MANIFEST_VERSION_1 | MANIFEST_VERSION_2 | MANIFEST_VERSION_3 | MANIFEST_VERSION_4) {
            return Err(ManifestError::Format);
        }
        let boundary = RetentionBoundary {
            index: r.u64("boundary index")?,
            term: r.u64("boundary term")?,
            next_pos: r.u64("next position")?,
        };
        let meta_index = r.u64("meta index")?;
        // Smallest queue record: empty name, queue id, offset.
        let queue_count = r.count("queue count", RETENTION_MANIFEST_QUEUES_MAX_COUNT, 2 + 4 + 8)?;
        let mut queues = Vec::with_capacity(queue_count);
        for _ in 0..queue_count {
            let len = usize::from(u16::from_be_bytes(r.array("topic length")?));
            let topic = std::str::from_utf8(r.take(len, "topic")?).map_err(|_| ManifestError::BadName)?.to_owned();
            let queue_id = i32::from_be_bytes(r.array("queue id")?);
            let next_offset = r.u64("next offset")?;
            queues.push(QueueStart { topic, queue_id, next_offset });
        }
        let topics = TopicConfigSerializeWrapper::decode(r.section("topics")?)?;
        let groups = SubscriptionGroupWrapper::decode(r.section("groups")?)?;
        let offsets = ConsumerOffsetSerializeWrapper::decode(r.section("offsets")?)?;
        let delay_count = r.count("delay level count", DELAY_PROGRESS_BATCH_MAX_COUNT, 4 + 8)?;
        let mut delay_offsets = Vec::with_capacity(delay_count);
        for _ in 0..delay_count {
            let queue_id = i32::from_be_bytes(r.array("delay queue id")?);
            let offset = i64::from_be_bytes(r.array("delay offset")?);
            delay_offsets.push(DelayProgress { queue_id, offset });
        }
        let id_count = r.count("node id count", RAFT_NODE_IDS_MAX_COUNT, 8)?;
        let mut used_node_ids = Vec::with_capacity(id_count);
        for _ in 0..id_count {
            used_node_ids.push(r.u64("node id")?);
        }
        let has_acl = match version {
            MANIFEST_VERSION_2 => true,
            MANIFEST_VERSION_3 | MANIFEST_VERSION_4 => match r.array::<1>("has ACL")? {
                [0] => false,
                [1] => true,
                _ => return Err(ManifestError::OutOfRange("has ACL")),
            },
            _ => false,
        };
        let acl = if has_acl {
            let counter = i64::from_be_bytes(r.array("ACL counter")?);
            let timestamp = i64::from_be_bytes(r.array("ACL timestamp")?);
            let text = r.section("ACL file")?;
            if text.len() as u64 > ACL_FILE_SIZE_MAX_BYTES {
                return Err(ManifestError::OutOfRange("ACL file length"));
            }
            let yaml = std::str::from_utf8(text).map_err(|_| ManifestError::BadAclText)?.to_owned();
            Some(AclDocument { version: AclVersion { counter, timestamp }, yaml })
        } else {
            None
        };
        let (mut lock_clock_ms, mut locks) = (0, Vec::new());
        if version >= MANIFEST_VERSION_3 {
            lock_clock_ms = r.u64("lock clock")?;
            let count = r.count("lock count", BROKER_REBALANCE_LOCK_TABLE_MAX_COUNT, LOCK_RECORD_MIN_BYTES)?;
            locks.reserve_exact(count);
            for _ in 0..count {
                let group = r.name("lock group")?;
                let topic = r.name("lock topic")?;
                let broker_name = r.name("lock broker name")?;
                let queue_id = i32::from_be_bytes(r.array("lock queue id")?);
                let client_id = r.name("lock client id")?;
                let last_update_ms = r.u64("lock last update")?;
                locks.push(LockRecord {
                    group,
                    queue: LockedQueue { topic, broker_name, queue_id },
                    entry: LockEntry { client_id, last_update_ms },
                });
            }
        }
        let (mut pop_clock_ms, mut pop_queues) = (0, Vec::new());
        if version == MANIFEST_VERSION_4 {
            pop_clock_ms = r.u64("POP clock")?;
            let count = r.count("POP queue count", POP_QUEUES_MAX_COUNT, POP_QUEUE_MIN_BYTES)?;
            pop_queues.reserve_exact(count);
            let mut in_flight_total = 0usize;
            for _ in 0..count {
                let group = r.name("POP group")?;
                let topic = r.name("POP topic")?;
                let queue_id = i32::from_be_bytes(r.array("POP queue id")?);
                let cursor = i64::from_be_bytes(r.array("POP cursor")?);
                let n = r.count("POP in flight", POP_IN_FLIGHT_MAX_COUNT - in_flight_total, POP_IN_FLIGHT_BYTES)?;
                in_flight_total += n;
                let mut in_flight = std::collections::BTreeMap::new();
                for _ in 0..n {
                    let offset = i64::from_be_bytes(r.array("POP offset")?);
                    let epoch_ms = r.u64("POP epoch")?;
                    let invisible_until_ms = r.u64("POP invisible until")?;
                    let attempt = u32::from_be_bytes(r.array("POP attempt")?);
                    let fifo = match r.array::<1>("POP fifo")? {
                        [0] => false,
                        [1] => true,
                        _ => return Err(ManifestError::OutOfRange("POP fifo")),
                    };
                    in_flight.insert(offset, InFlight { epoch_ms, invisible_until_ms, attempt, fifo });
                }
                pop_queues.push((PopQueue { group, topic, queue_id }, QueueState { cursor, in_flight }));
            }
        }
        if !r.0.is_empty() {
            return Err(ManifestError::TrailingBytes(r.0.len()));
        }
        Ok(Manifest {
            boundary,
            meta_index,
            queues,
            topics,
            groups,
            offsets,
            delay_offsets,
            used_node_ids,
            acl,
            lock_clock_ms,
            locks,
            pop_clock_ms,
            pop_queues,
        })
    }
}

struct Reader<'a>(&'a [u8]);

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize, field: &'static str) -> Result<&'a [u8], ManifestError> {
        if self.0.len() < n {
            return Err(ManifestError::Truncated(field));
        }
        let (head, rest) = self.0.split_at(n);
        self.0 = rest;
        Ok(head)
    }

    fn array<const N: usize>(&mut self, field: &'static str) -> Result<[u8; N], ManifestError> {
        self.take(N, field)?.try_into().map_err(|_| ManifestError::Truncated(field))
    }

    fn u64(&mut self, field: &'static str) -> Result<u64, ManifestError> {
        self.array(field).map(u64::from_be_bytes)
    }

    fn name(&mut self, field: &'static str) -> Result<String, ManifestError> {
        let len = usize::from(u16::from_be_bytes(self.array(field)?));
        std::str::from_utf8(self.take(len, field)?).map(str::to_owned).map_err(|_| ManifestError::BadName)
    }

    /// A u32 count of records of at least `min_bytes` each, checked against `max` and the bytes left.
    fn count(&mut self, field: &'static str, max: usize, min_bytes: usize) -> Result<usize, ManifestError> {
        let n =
            usize::try_from(u32::from_be_bytes(self.array(field)?)).map_err(|_| ManifestError::OutOfRange(field))?;
        if n > max || n.saturating_mul(min_bytes) > self.0.len() {
            return Err(ManifestError::OutOfRange(field));
        }
        Ok(n)
    }

    fn section(&mut self, field: &'static str) -> Result<&'a [u8], ManifestError> {
        let len =
            usize::try_from(u32::from_be_bytes(self.array(field)?)).map_err(|_| ManifestError::OutOfRange(field))?;
        self.take(len, field)
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use raftmq_common::protocol::body::topic::DataVersion;
    use raftmq_common::protocol::body::topic::TopicConfig;

    use super::*;

    fn manifest() -> Manifest {
        let mut topics = BTreeMap::new();
        topics.insert("T".to_owned(), TopicConfig::new("T"));
        Manifest {
            boundary: RetentionBoundary { index: 41, term: 3, next_pos: 2 << 20 },
            meta_index: 57,
            queues: vec![
                QueueStart { topic: "T".into(), queue_id: 0, next_offset: 12 },
                QueueStart { topic: "T".into(), queue_id: 1, next_offset: 0 },
            ],
            topics: TopicConfigSerializeWrapper {
                data_version: DataVersion { counter: 4, timestamp: 99 },
                topic_config_table: topics,
            },
            groups: SubscriptionGroupWrapper::default(),
            offsets: ConsumerOffsetSerializeWrapper {
                offset_table: BTreeMap::from([("T@g".to_owned(), BTreeMap::from([(0, 7)]))]),
            },
            delay_offsets: vec![DelayProgress { queue_id: 2, offset: 5 }],
            used_node_ids: vec![1, 2, 3],
            acl: None,
            lock_clock_ms: 0,
            locks: Vec::new(),
            pop_clock_ms: 0,
            pop_queues: Vec::new(),
        }
    }

    #[test]
    fn a_manifest_with_pop_state_is_version_4_and_round_trips() {
        let v1 = manifest().encode().unwrap();
        let mut in_flight = std::collections::BTreeMap::new();
        in_flight.insert(7, InFlight { epoch_ms: 11, invisible_until_ms: 40, attempt: 2, fifo: true });
        let queue = PopQueue { group: "g".into(), topic: "T".into(), queue_id: 1 };
        let m =
            Manifest { pop_clock_ms: 12, pop_queues: vec![(queue, QueueState { cursor: 9, in_flight })], ..manifest() };
        let v4 = m.encode().unwrap();
        assert_eq!(v4[4], 4);
        assert_eq!(&v4[5..v1.len()], &v1[5..], "the POP section follows the version 1 layout");
        assert_eq!(Manifest::decode(&v4).unwrap(), m);
        for cut in v1.len()..v4.len() {
            assert!(Manifest::decode(&v4[..cut]).is_err(), "cut at {cut}");
        }
    }

    #[test]
    fn a_manifest_with_queue_locks_is_version_3_with_or_without_an_acl_edit() {
        let v1 = manifest().encode().unwrap();
        let lock = LockRecord {
            group: "g".into(),
            queue: LockedQueue { topic: "T".into(), broker_name: "b".into(), queue_id: 2 },
            entry: LockEntry { client_id: "c".into(), last_update_ms: 5 },
        };
        let m = Manifest { lock_clock_ms: 9, locks: vec![lock.clone()], ..manifest() };
        let v3 = m.encode().unwrap();
        assert_eq!(v3[4], 3);
        assert_eq!(&v3[5..v1.len()], &v1[5..], "the lock section follows the version 1 layout");
        assert_eq!(
            &v3[v1.len()..],
            &[
                0, // no ACL
                0, 0, 0, 0, 0, 0, 0, 9, 0, 0, 0, 1, // clock, count
                0, 1, b'g', 0, 1, b'T', 0, 1, b'b', 0, 0, 0, 2, 0, 1, b'c', 0, 0, 0, 0, 0, 0, 0, 5,
            ][..]
        );
        assert_eq!(Manifest::decode(&v3).unwrap(), m);
        for cut in v1.len()..v3.len() {
            assert!(Manifest::decode(&v3[..cut]).is_err(), "cut at {cut}");
        }
        let with_acl = Manifest {
            acl: Some(AclDocument { version: AclVersion { counter: 3, timestamp: 9 }, yaml: "a: 1\n".into() }),
            ..m
        };
        let both = with_acl.encode().unwrap();
        assert_eq!((both[4], both[v1.len()]), (3, 1));
        assert_eq!(Manifest::decode(&both).unwrap(), with_acl);
        let mut bad = both.to_vec();
        bad[v1.len()] = 2;
        assert!(Manifest::decode(&bad).is_err());
    }

    #[test]
    fn a_manifest_with_an_acl_edit_is_version_2_and_without_one_stays_version_1() {
        let v1 = manifest().encode().unwrap();
        assert_eq!(v1[4], 1);
        let m = Manifest {
            acl: Some(AclDocument { version: AclVersion { counter: 3, timestamp: 9 }, yaml: "accounts: []\n".into() }),
            ..manifest()
        };
        let v2 = m.encode().unwrap();
        assert_eq!(v2[4], 2);
        assert_eq!(&v2[..4], &v1[..4]);
        assert_eq!(&v2[5..v1.len()], &v1[5..], "the ACL section follows the version 1 layout");
        assert_eq!(&v2[v1.len()..v1.len() + 20], &[0, 0, 0, 0, 0, 0, 0, 3, 0, 0, 0, 0, 0, 0, 0, 9, 0, 0, 0, 13][..]);
        assert_eq!(Manifest::decode(&v2).unwrap(), m);
        for cut in v1.len()..v2.len() {
            assert!(Manifest::decode(&v2[..cut]).is_err(), "cut at {cut}");
        }
        let mut v5 = v2.to_vec();
        v5[4] = 5;
        assert!(matches!(Manifest::decode(&v5), Err(ManifestError::Format)));
    }

    #[test]
    fn manifest_round_trips_with_a_golden_header() {
        let m = manifest();
        let bytes = m.encode().unwrap();
        assert_eq!(
            &bytes[..37],
            &[
                0x52, 0x4D, 0x51, 0x4D, 1, // magic "RMQM", version
                0, 0, 0, 0, 0, 0, 0, 41, // boundary index
                0, 0, 0, 0, 0, 0, 0, 3, // boundary term
                0, 0, 0, 0, 0, 0x20, 0, 0, // next_pos
                0, 0, 0, 0, 0, 0, 0, 57, // meta index
            ][..]
        );
        assert_eq!(&bytes[37..41], &[0, 0, 0, 2], "queue count");
        assert_eq!(&bytes[41..56], &[0, 1, b'T', 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 12][..]);
        assert_eq!(Manifest::decode(&bytes).unwrap(), m);
    }

    #[test]
    fn manifest_decoding_never_panics_on_damage() {
        let bytes = manifest().encode().unwrap();
        for cut in 0..bytes.len() {
            assert!(Manifest::decode(&bytes[..cut]).is_err(), "cut at {cut}");
        }
        let mut longer = bytes.to_vec();
        longer.push(0);
        assert!(matches!(Manifest::decode(&longer), Err(ManifestError::TrailingBytes(1))));
        let mut bad_magic = bytes.to_vec();
        bad_magic[0] = 0;
        assert!(matches!(Manifest::decode(&bad_magic), Err(ManifestError::Format)));
        let mut huge_count = bytes.to_vec();
        huge_count[37..41].copy_from_slice(&u32::MAX.to_be_bytes());
        assert!(matches!(Manifest::decode(&huge_count), Err(ManifestError::OutOfRange(_))));
        // Seeded flips: decode may fail but never panics.
        let seed = 0x5EED_u64;
        println!("seed {seed:#x}");
        let mut x = seed;
        for _ in 0..2_000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let mut b = bytes.to_vec();
            let at = (x % b.len() as u64) as usize;
            b[at] ^= (x >> 32) as u8 | 1;
            let _ = Manifest::decode(&b);
        }
    }
}
