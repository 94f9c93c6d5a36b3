//! Dispatch of a committed MESSAGES entry (RocketMQ's `CommitLog.checkMessageAndReturnSize` →
//! `DispatchRequest` → `CommitLogDispatcherBuildConsumeQueue`): the pure decision of which ConsumeQueue
//! units an entry adds, then their application to the [`ConsumeQueueStore`].
//!
//! ```text
//! apply(entry) ─▶ plan(payload, payload_pos, &queues, delay levels) ─▶ Ok(Vec<DispatchRequest>) ─▶ write_units(&plan, &mut store)
//!                                                                  └▶ Err(Rejection): no unit written; answer the writer with an error
//! ```
//!
//! Acceptance rule (deterministic on every replica, so all replicas build identical ConsumeQueues): every
//! record parses; its PHYSICALOFFSET is `payload_pos + offset_in_payload` (the patcher wrote it); and, for
//! records that get a unit, QUEUEOFFSET is the queue's next offset — or, when apply runs again after a
//! restart, the queue already holds a unit for this very record (same phyOffset and size) or the offset
//! is below the queue's minimum (deleted by retention); and its topic can name a directory
//! (`is_storable_topic_dir`). Any other record rejects the whole entry: its bytes stay in the CommitLog
//! but no consumer sees them.

use raftmq_common::limits::TOPIC_STORE_NAME_MAX_BYTES;
use raftmq_common::message::properties;
use raftmq_common::message::record::RecordError;
use raftmq_common::message::record::RecordView;
use raftmq_common::message::tag::tags_code;
use raftmq_common::message::validate::RMQ_SYS_SCHEDULE_TOPIC;
use raftmq_common::message::validate::is_storable_topic_dir;
use thiserror::Error;

use crate::state::consume_queue::Appended;
use crate::state::consume_queue::ConsumeQueueStore;
use crate::state::consume_queue::CqError;
use crate::state::consume_queue::CqUnit;
use crate::state::entry::records;
use crate::state::queue_offset::has_queue_offset;

/// Read access to ConsumeQueue state that [`plan`] needs.
pub trait QueueState {
    /// (min, max) offsets of a queue; (0, 0) when it has never been written.
    fn offsets(&self, topic: &str, queue_id: i32) -> (u64, u64);
    /// The unit at `offset`, if stored.
    fn unit_at(&self, topic: &str, queue_id: i32, offset: u64) -> Option<CqUnit>;
}

impl QueueState for ConsumeQueueStore {
    fn offsets(&self, topic: &str, queue_id: i32) -> (u64, u64) {
        ConsumeQueueStore::offsets(self, topic, queue_id)
    }

    fn unit_at(&self, topic: &str, queue_id: i32, offset: u64) -> Option<CqUnit> {
        self.get(topic, queue_id)?.unit_at(offset)
    }
}

/// What happens to a record's ConsumeQueue unit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CqAction {
    /// Append the unit at `queue_offset`.
    Append,
    /// Already stored (apply runs again after a restart).
    AlreadyPresent,
    /// Below the queue's minimum: retention removed it; nothing to write.
    BelowMin,
    /// PREPARED or ROLLBACK transaction record: no unit.
    NoUnit,
}

/// One record of an accepted entry.
#[derive(Debug, Clone, Copy)]
pub struct DispatchRequest<'a> {
    /// The record (borrowed from the payload): topic, queueId, properties for the IndexFile, ...
    pub record: RecordView<'a>,
    /// Where the record starts in the payload.
    pub offset_in_payload: usize,
    /// Its ConsumeQueue unit.
    pub unit: CqUnit,
    /// What to do with the unit.
    pub action: CqAction,
}

impl DispatchRequest<'_> {
    /// Topic.
    pub fn topic(&self) -> &str {
        self.record.topic
    }

    /// Queue.
    pub fn queue_id(&self) -> i32 {
        self.record.queue_id
    }

    /// QUEUEOFFSET as stored.
    pub fn queue_offset(&self) -> i64 {
        self.record.queue_offset
    }

    /// PHYSICALOFFSET as stored (= `unit.phy_offset`).
    pub fn phy_offset(&self) -> i64 {
        self.unit.phy_offset
    }
}

/// Why an entry is not dispatched (its writer gets an error; the leader resets its offset table).
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum Rejection {
    /// The payload holds no record.
    #[error("the entry holds no record")]
    Empty,
    /// A record does not parse.
    #[error("malformed record: {0}")]
    Malformed(RecordError),
    /// The patcher did not write the record's position.
    #[error("record at payload byte {offset_in_payload} has PHYSICALOFFSET {stored}, expected {expected}")]
    PhysicalOffset {
        /// Record start in the payload.
        offset_in_payload: usize,
        /// PHYSICALOFFSET as stored.
        stored: i64,
        /// What it must be.
        expected: i64,
    },
    /// No ConsumeQueue directory can be made for the record's topic ([`is_storable_topic_dir`]):
    /// refused alike on every replica instead of failing the store (the edges refuse such names
    /// first; earlier builds stopped applying at them).
    #[error("the record's topic {0:?} cannot name a ConsumeQueue directory")]
    UnsafeTopic(String),
    /// QUEUEOFFSET is not the queue's next offset.
    #[error("{topic}:{queue_id} record has queue offset {got}, the queue expects {expected}")]
    QueueOffset {
        /// Topic.
        topic: String,
        /// Queue.
        queue_id: i32,
        /// QUEUEOFFSET as stored.
        got: i64,
        /// The queue's next offset.
        expected: u64,
    },
}

/// Tags code of a record's ConsumeQueue unit: the tag hash, or for `SCHEDULE_TOPIC_XXXX` the delivery
/// time (`storeTimestamp + delay of level DELAY`, level capped at the table's size; RocketMQ's
/// `checkMessageAndReturnSize` + `computeDeliverTimestamp`).
pub fn cq_tags_code(record: &RecordView<'_>, delay_levels_ms: &[u64]) -> i64 {
    if record.topic == RMQ_SYS_SCHEDULE_TOPIC
        && let Some(level) = property(record.properties, properties::DELAY).and_then(|v| v.parse::<i64>().ok())
    {
        let level = level.min(delay_levels_ms.len() as i64);
        if level > 0 {
            let delay = usize::try_from(level - 1).ok().and_then(|i| delay_levels_ms.get(i)).copied().unwrap_or(1000);
            return record.store_timestamp.saturating_add(i64::try_from(delay).unwrap_or(i64::MAX));
        }
    }
    tags_code(property(record.properties, properties::TAGS))
}

/// One property's value without building the whole map (the apply path runs per message).
fn property<'a>(props: &'a str, key: &str) -> Option<&'a str> {
    props
        .split(properties::PROPERTY_SEPARATOR)
        .filter_map(|pair| pair.split_once(properties::NAME_VALUE_SEPARATOR))
        .find(|(k, _)| *k == key)
        .map(|(_, v)| v)
}

/// Decides what a MESSAGES entry whose payload starts at `payload_pos` adds to the ConsumeQueues.
pub fn plan<'a>(
    payload: &'a [u8],
    payload_pos: u64,
    queues: &impl QueueState,
    delay_levels_ms: &[u64],
) -> Result<Vec<DispatchRequest<'a>>, Rejection> {
    let mut out: Vec<DispatchRequest<'a>> = Vec::new();
    // Next offset per queue touched by this entry (entries rarely hold more than one queue).
    let mut next: Vec<(&'a str, i32, u64)> = Vec::new();
    for item in records(payload) {
        let (offset_in_payload, record) = item.map_err(Rejection::Malformed)?;
        let expected_phy = i64::try_from(payload_pos.saturating_add(offset_in_payload as u64)).unwrap_or(i64::MAX);
        if record.commit_log_offset != expected_phy {
            return Err(Rejection::PhysicalOffset {
                offset_in_payload,
                stored: record.commit_log_offset,
                expected: expected_phy,
            });
        }
        // total_size fits i32: it was read from TOTALSIZE.
        let unit = CqUnit {
            phy_offset: expected_phy,
            size: record.total_size as i32,
            tags_code: cq_tags_code(&record, delay_levels_ms),
        };
        let action = if has_queue_offset(record.sys_flag) {
            decide(&mut next, queues, &record, &unit)?
        } else {
            CqAction::NoUnit
        };
        out.push(DispatchRequest { record, offset_in_payload, unit, action });
    }
    if out.is_empty() {
        return Err(Rejection::Empty);
    }
    Ok(out)
}

fn decide<'a>(
    next: &mut Vec<(&'a str, i32, u64)>,
    queues: &impl QueueState,
    record: &RecordView<'a>,
    unit: &CqUnit,
) -> Result<CqAction, Rejection> {
    let (topic, queue_id) = (record.topic, record.queue_id);
    let index = match next.iter().position(|(t, q, _)| *t == topic && *q == queue_id) {
        Some(i) => i,
        None => {
            // Once per queue of the entry, not per record: the name decides the unit's directory.
            if !is_storable_topic_dir(topic) {
                return Err(Rejection::UnsafeTopic(topic.chars().take(TOPIC_STORE_NAME_MAX_BYTES).collect()));
            }
            next.push((topic, queue_id, queues.offsets(topic, queue_id).1));
            next.len() - 1
        }
    };
    let expected = next[index].2;
    let reject = || Rejection::QueueOffset { topic: topic.to_owned(), queue_id, got: record.queue_offset, expected };
    let offset = u64::try_from(record.queue_offset).map_err(|_| reject())?;
    if offset == expected {
        next[index].2 = expected + 1;
        return Ok(CqAction::Append);
    }
    if offset > expected {
        return Err(reject());
    }
    let (min, _) = queues.offsets(topic, queue_id);
    if offset < min {
        return Ok(CqAction::BelowMin);
    }
    // Identity is (phyOffset, size); the tags code depends on config (delay levels) and may differ.
    match queues.unit_at(topic, queue_id, offset) {
        Some(stored) if stored.phy_offset == unit.phy_offset && stored.size == unit.size => {
            Ok(CqAction::AlreadyPresent)
        }
        _ => Err(reject()),
    }
}

/// Writes the planned units. An error here is a storage failure: stop applying (fatal).
pub fn write_units(plan: &[DispatchRequest<'_>], store: &mut ConsumeQueueStore) -> Result<usize, CqError> {
    let mut written = 0;
    for req in plan.iter().filter(|r| r.action == CqAction::Append) {
        let queue = store.get_or_open(req.topic(), req.queue_id())?;
        // plan() checked the offset is non-negative.
        let offset = req.queue_offset() as u64;
        if queue.append(offset, req.unit)? == Appended::New {
            written += 1;
        }
    }
    Ok(written)
}

#[cfg(test)]
mod tests {
    use std::net::SocketAddr;

    use raftmq_common::message::Message;
    use raftmq_common::message::MessageExt;
    use raftmq_common::message::sys_flag;

    use super::*;
    use crate::state::entry::encode_messages;
    use crate::state::entry::patch_physical_offsets;
    use crate::state::queue_offset::QueueOffsetTable;

    const DELAYS: &[u64] = &[1_000, 5_000, 10_000];

    fn msg(topic: &str, queue_id: i32, tags: &str) -> MessageExt {
        let host: SocketAddr = "10.0.0.1:10911".parse().unwrap();
        MessageExt {
            message: Message::new(topic, &b"body"[..]).with_tags(tags),
            queue_id,
            born_host: host,
            store_host: host,
            store_timestamp: 1_000_000,
            ..MessageExt::default()
        }
    }

    /// Leader side: assign offsets from the store, encode, patch at `pos` (what the log store does).
    fn propose(table: &mut QueueOffsetTable, store: &ConsumeQueueStore, msgs: &mut [MessageExt], pos: u64) -> Vec<u8> {
        table.assign(msgs, |t, q| store.offsets(t, q).1);
        let mut payload = encode_messages(msgs).unwrap().to_vec();
        patch_physical_offsets(&mut payload, pos);
        payload
    }

    #[test]
    fn accepted_entries_build_queues_and_reapply_is_idempotent() {
        let dir = tempfile::tempdir().unwrap();
        let mut store = ConsumeQueueStore::new(dir.path(), 4);
        let mut table = QueueOffsetTable::new();
        let mut batch = vec![msg("T", 0, "TagA"), msg("T", 0, "TagB"), msg("U", 2, "")];
        let p1 = propose(&mut table, &store, &mut batch, 48);
        let plan1 = plan(&p1, 48, &store, DELAYS).unwrap();
        assert_eq!(plan1.iter().map(|r| r.action).collect::<Vec<_>>(), vec![CqAction::Append; 3]);
        assert_eq!(plan1[1].unit.tags_code, tags_code(Some("TagB")));
        assert_eq!(plan1[2].unit.tags_code, 0);
        assert_eq!(write_units(&plan1, &mut store).unwrap(), 3);
        assert_eq!(store.offsets("T", 0), (0, 2));
        assert_eq!(store.offsets("U", 2), (0, 1));
        let pos2 = 48 + p1.len() as u64 + 48;
        let p2 = propose(&mut table, &store, &mut [msg("T", 0, "TagA")], pos2);
        let plan2 = plan(&p2, pos2, &store, DELAYS).unwrap();
        write_units(&plan2, &mut store).unwrap();
        assert_eq!(store.unit_at("T", 0, 2).unwrap().phy_offset, pos2 as i64);
        // Re-applying both entries (restart) changes nothing and is accepted.
        for (p, pos) in [(&p1, 48), (&p2, pos2)] {
            let again = plan(p, pos, &store, DELAYS).unwrap();
            assert!(again.iter().all(|r| r.action == CqAction::AlreadyPresent));
            assert_eq!(write_units(&again, &mut store).unwrap(), 0);
        }
        // The same after a real restart: the reopened store knows every queue's end.
        store.flush_all().unwrap();
        drop(store);
        let store = ConsumeQueueStore::open(dir.path(), 4).unwrap();
        assert!(plan(&p2, pos2, &store, DELAYS).unwrap().iter().all(|r| r.action == CqAction::AlreadyPresent));
    }

    #[test]
    fn wrong_offsets_reject_the_whole_entry() {
        let dir = tempfile::tempdir().unwrap();
        let mut store = ConsumeQueueStore::new(dir.path(), 4);
        let mut table = QueueOffsetTable::new();
        let p1 = propose(&mut table, &store, &mut [msg("T", 0, "a")], 48);
        // A second proposal whose predecessor (offset 0) is never applied: a hole.
        let p2 = propose(&mut table, &store, &mut [msg("T", 0, "a"), msg("V", 0, "a")], 1000);
        let err = plan(&p2, 1000, &store, DELAYS).unwrap_err();
        assert_eq!(err, Rejection::QueueOffset { topic: "T".into(), queue_id: 0, got: 1, expected: 0 });
        write_units(&plan(&p1, 48, &store, DELAYS).unwrap(), &mut store).unwrap();
        // A stale leader re-using offset 0 for a different record: rejected, even after a restart.
        table.reset();
        let mut stale = [msg("T", 0, "a")];
        stale[0].queue_offset = 0;
        let mut p3 = encode_messages(&stale).unwrap().to_vec();
        patch_physical_offsets(&mut p3, 5000);
        assert!(matches!(plan(&p3, 5000, &store, DELAYS), Err(Rejection::QueueOffset { expected: 1, got: 0, .. })));
        // Unpatched physical offsets and garbage are rejected too.
        assert!(matches!(plan(&p1, 49, &store, DELAYS), Err(Rejection::PhysicalOffset { .. })));
        assert!(matches!(plan(&p1[..50], 48, &store, DELAYS), Err(Rejection::Malformed(_))));
        assert_eq!(plan(&[], 48, &store, DELAYS).unwrap_err(), Rejection::Empty);
        assert_eq!(store.offsets("T", 0), (0, 1));
    }

    #[test]
    fn a_topic_that_cannot_name_a_directory_rejects_the_entry_and_writes_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let store = ConsumeQueueStore::new(dir.path(), 4);
        let long_retry = format!("%RETRY%{}", "g".repeat(249));
        for topic in [long_retry.as_str(), "%RETRY%a/bb\0"] {
            let mut table = QueueOffsetTable::new();
            let p = propose(&mut table, &store, &mut [msg("T", 0, "a"), msg(topic, 0, "a")], 48);
            let err = plan(&p, 48, &store, DELAYS).unwrap_err();
            assert!(matches!(&err, Rejection::UnsafeTopic(t) if topic.starts_with(t.as_str())), "{err}");
        }
        assert_eq!(store.offsets("T", 0), (0, 0));
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0, "no directory was made");
    }

    #[test]
    fn transaction_half_and_rollback_get_no_unit() {
        let dir = tempfile::tempdir().unwrap();
        let mut store = ConsumeQueueStore::new(dir.path(), 4);
        let mut table = QueueOffsetTable::new();
        let mut half = msg("T", 0, "a");
        half.sys_flag = sys_flag::TRANSACTION_PREPARED_TYPE;
        let p = propose(&mut table, &store, &mut [half, msg("T", 0, "a")], 48);
        let plan = plan(&p, 48, &store, DELAYS).unwrap();
        assert_eq!(plan.iter().map(|r| r.action).collect::<Vec<_>>(), vec![CqAction::NoUnit, CqAction::Append]);
        write_units(&plan, &mut store).unwrap();
        assert_eq!(store.offsets("T", 0), (0, 1));
    }

    #[test]
    fn schedule_topic_tags_code_is_the_delivery_time() {
        let mut delayed = msg(RMQ_SYS_SCHEDULE_TOPIC, 1, "a");
        delayed.message.properties.insert(properties::DELAY, "2");
        let mut capped = delayed.clone();
        capped.message.properties.insert(properties::DELAY, "99");
        let mut zero = delayed.clone();
        zero.message.properties.insert(properties::DELAY, "0");
        let payload = encode_messages(&[delayed, capped, zero]).unwrap();
        let codes: Vec<i64> = records(&payload).map(|r| cq_tags_code(&r.unwrap().1, DELAYS)).collect();
        assert_eq!(codes, vec![1_005_000, 1_010_000, tags_code(Some("a"))]);
    }
}
