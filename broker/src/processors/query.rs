//! Message queries (RocketMQ's `QueryMessageProcessor` and the query half of `AdminBrokerProcessor`):
//! by key through the IndexFiles, by physical offset (offsetMsgId), and ConsumeQueue offsets by store
//! time. Every answer is read from the committed CommitLog, so any replica of the group serves it.
//!
//! | code | what |
//! |---|---|
//! | QUERY_MESSAGE (12) | records whose `KEYS` (or, with `_UNIQUE_KEY_QUERY`, `UNIQ_KEY`) hold `key` |
//! | VIEW_MESSAGE_BY_ID (33) | the record starting at physical `offset` |
//! | SEARCH_OFFSET_BY_TIMESTAMP (29) | first queue offset whose store time is ≥ `timestamp` |
//! | GET_EARLIEST_MSG_STORETIME (32) | store time of a queue's oldest record (-1 when empty) |
//!
//! Invariants:
//! - only whole, CRC-checked records whose PHYSICALOFFSET equals the position they were read from are
//!   answered: an offset inside a record, past the committed end, or in a deleted segment is an error
//!   (VIEW) or skipped (QUERY), never garbage bytes;
//! - IndexFile hashes collide and the index stores only hashes, so each record's topic and key are
//!   re-checked before it is answered;
//! - physical offsets are the same on every replica (raft positions are deterministic), so the same
//!   offset answers the same bytes on whichever replica is asked, before and after a failover.
//!
//! ```text
//! QUERY_MESSAGE ─▶ IndexService::query(topic#key) ─▶ phy offsets ─▶ record_at ─▶ re-check ─▶ body
//! VIEW_MESSAGE_BY_ID ─▶ record_at(offset) ─▶ body | SYSTEM_ERROR
//! SEARCH_OFFSET_BY_TIMESTAMP ─▶ ConsumeQueue units ─▶ record store times ─▶ lower bound
//! ```

use bytes::Bytes;
use bytes::BytesMut;
use raftmq_common::limits::QUERY_MESSAGE_BODY_MAX_BYTES;
use raftmq_common::limits::QUERY_MESSAGE_MAX_COUNT;
use raftmq_common::message::properties;
use raftmq_common::message::record::DecodeOptions;
use raftmq_common::message::record::RecordView;
use raftmq_common::message::record::parse_record;
use raftmq_common::protocol::RemotingCommand;
use raftmq_common::protocol::ResponseCode;
use raftmq_common::protocol::header::CommandHeader;
use raftmq_common::protocol::header::offset::GetEarliestMsgStoretimeRequestHeader;
use raftmq_common::protocol::header::offset::GetEarliestMsgStoretimeResponseHeader;
use raftmq_common::protocol::header::offset::SearchOffsetRequestHeader;
use raftmq_common::protocol::header::offset::SearchOffsetResponseHeader;
use raftmq_common::protocol::header::query::QueryMessageRequestHeader;
use raftmq_common::protocol::header::query::QueryMessageResponseHeader;
use raftmq_common::protocol::header::query::ViewMessageRequestHeader;

use crate::state::commit_log::record_at;
use crate::state::pull::CommitLogReader;
use crate::state::store::MessageStore;

/// Matches a unique-key query reads from the index before keeping the earliest stored one
/// (RocketMQ's `defaultQueryMaxNum`).
pub const UNIQUE_KEY_QUERY_CANDIDATES_MAX_COUNT: usize = 32;

/// QUERY_NOT_FOUND's remark, as RocketMQ words it.
const NOT_FOUND_REMARK: &str = "can not find message, maybe time range not correct";

/// Whether `record` is one of `topic`'s and carries `key` (a `KEYS` entry, or its `UNIQ_KEY`).
pub fn record_matches(record: &RecordView<'_>, topic: &str, key: &str, unique_key: bool) -> bool {
    if record.topic != topic {
        return false;
    }
    let props = record.parse_properties();
    if unique_key {
        props.get(properties::UNIQ_KEY) == Some(key)
    } else {
        props.get(properties::KEYS).is_some_and(|keys| keys.split(properties::KEY_SEPARATOR).any(|k| k == key))
    }
}

/// What a key query found.
#[derive(Debug, Clone, Default)]
pub struct QueryResult {
    /// Matching records, newest first (a unique-key query: the earliest stored match only).
    pub records: Vec<Bytes>,
    /// `indexLastUpdateTimestamp`.
    pub index_last_update_timestamp: i64,
    /// `indexLastUpdatePhyoffset`.
    pub index_last_update_phyoffset: i64,
}

/// Records of `topic` indexed under `key` and stored in `[begin_ms, end_ms]`: at most `max_num`
/// (clamped to 1..=[`QUERY_MESSAGE_MAX_COUNT`]) and [`QUERY_MESSAGE_BODY_MAX_BYTES`] (the first match
/// always fits). A unique-key query answers one record, the earliest stored, as a client keeps.
pub fn query_by_key(
    store: &MessageStore,
    topic: &str,
    key: &str,
    max_num: i32,
    (begin_ms, end_ms): (i64, i64),
    unique_key: bool,
) -> QueryResult {
    let max = if unique_key {
        UNIQUE_KEY_QUERY_CANDIDATES_MAX_COUNT
    } else {
        usize::try_from(max_num.clamp(1, QUERY_MESSAGE_MAX_COUNT)).unwrap_or(1)
    };
    let (offsets, (index_last_update_timestamp, index_last_update_phyoffset)) = {
        let index = store.index();
        (index.query(&format!("{topic}#{key}"), max, begin_ms, end_ms), index.last_update())
    };
    let log = store.commit_log();
    let mut records = Vec::new();
    let mut bytes_total = 0usize;
    let mut earliest: Option<(i64, Bytes)> = None;
    for phy in offsets {
        // A record the index points at may be gone (retention) or be another key's (hash collision).
        let Ok(bytes) = record_at(log, phy) else { continue };
        let Ok(record) = parse_record(&bytes, DecodeOptions::default()) else { continue };
        if !record_matches(&record, topic, key, unique_key) {
            continue;
        }
        if unique_key {
            if earliest.as_ref().is_none_or(|(t, _)| record.store_timestamp < *t) {
                earliest = Some((record.store_timestamp, bytes.clone()));
            }
            continue;
        }
        if !records.is_empty() && bytes_total + bytes.len() > QUERY_MESSAGE_BODY_MAX_BYTES {
            break;
        }
        bytes_total += bytes.len();
        records.push(bytes);
    }
    if let Some((_, bytes)) = earliest {
        records.push(bytes);
    }
    QueryResult { records, index_last_update_timestamp, index_last_update_phyoffset }
}

/// The first offset in `[lo, hi)` whose store time is ≥ `timestamp_ms`, `hi` when none is, by binary
/// search (store times grow with the offset). An unreadable offset (its record was removed) counts as
/// earlier than any time. RocketMQ 4.9.8 answers the *closest* offset instead and 5.x (`BoundaryType.LOWER`)
/// the last offset when none is later; the lower bound is what a reset-by-time needs: nothing stored
/// before the time, nothing after it skipped.
pub fn lower_bound_by_time(lo: u64, hi: u64, timestamp_ms: i64, store_time: impl Fn(u64) -> Option<i64>) -> u64 {
    let (mut lo, mut hi) = (lo, hi.max(lo));
    while lo < hi {
        let mid = lo + (hi - lo) / 2;
        match store_time(mid) {
            Some(t) if t >= timestamp_ms => hi = mid,
            _ => lo = mid + 1,
        }
    }
    lo
}

/// Store time of the record a queue unit points at (`getMessageStoreTimeStamp`), `None` when the
/// unit or its record is gone.
pub fn unit_store_time(store: &MessageStore, topic: &str, queue_id: i32, offset: u64) -> Option<i64> {
    let unit = store.consume_queues().get(topic, queue_id)?.unit_at(offset)?;
    let bytes = store.commit_log().read(unit.phy_offset, unit.size)?;
    parse_record(&bytes, DecodeOptions::default()).ok().map(|r| r.store_timestamp)
}

/// The first offset of a queue whose record was stored at or after `timestamp_ms` (the max offset when
/// none was; the min offset of an empty queue).
pub fn offset_by_time(store: &MessageStore, topic: &str, queue_id: i32, timestamp_ms: i64) -> u64 {
    let (min, max) = store.queue_offsets(topic, queue_id);
    lower_bound_by_time(min, max, timestamp_ms, |o| unit_store_time(store, topic, queue_id, o))
}

/// Store time of a queue's oldest readable record, -1 when there is none (RocketMQ's
/// `getEarliestMessageTime`).
pub fn earliest_store_time(store: &MessageStore, topic: &str, queue_id: i32) -> i64 {
    let (min, max) = store.queue_offsets(topic, queue_id);
    if min >= max {
        return -1;
    }
    unit_store_time(store, topic, queue_id, min).unwrap_or(-1)
}

fn header<H: CommandHeader>(request: &RemotingCommand) -> Result<H, RemotingCommand> {
    request.decode_header().map_err(|e| {
        RemotingCommand::response(ResponseCode::SystemError, Some(format!("the request header is invalid: {e}")))
    })
}

/// QUERY_MESSAGE.
pub fn query_message(store: &MessageStore, request: &RemotingCommand) -> Result<RemotingCommand, RemotingCommand> {
    let h: QueryMessageRequestHeader = header(request)?;
    let unique_key = h.unique_key_query == Some(true);
    let found = query_by_key(store, &h.topic, &h.key, h.max_num, (h.begin_timestamp, h.end_timestamp), unique_key);
    let response_header = QueryMessageResponseHeader {
        index_last_update_timestamp: found.index_last_update_timestamp,
        index_last_update_phyoffset: found.index_last_update_phyoffset,
    };
    if found.records.is_empty() {
        return Ok(RemotingCommand::response(ResponseCode::QueryNotFound, Some(NOT_FOUND_REMARK.to_owned()))
            .with_header(&response_header));
    }
    let mut body = BytesMut::with_capacity(found.records.iter().map(Bytes::len).sum());
    for r in &found.records {
        body.extend_from_slice(r);
    }
    Ok(RemotingCommand::success().with_header(&response_header).with_body(body.freeze()))
}

/// VIEW_MESSAGE_BY_ID.
pub fn view_message_by_id(store: &MessageStore, request: &RemotingCommand) -> Result<RemotingCommand, RemotingCommand> {
    let h: ViewMessageRequestHeader = header(request)?;
    match record_at(store.commit_log(), h.offset) {
        Ok(bytes) => Ok(RemotingCommand::success().with_body(bytes)),
        Err(e) => Err(RemotingCommand::response(
            ResponseCode::SystemError,
            Some(format!("can not find message by the offset, {}: {e}", h.offset)),
        )),
    }
}

/// SEARCH_OFFSET_BY_TIMESTAMP.
pub fn search_offset_by_timestamp(
    store: &MessageStore,
    request: &RemotingCommand,
) -> Result<RemotingCommand, RemotingCommand> {
    let h: SearchOffsetRequestHeader = header(request)?;
    let offset = offset_by_time(store, &h.topic, h.queue_id, h.timestamp);
    let offset = i64::try_from(offset).unwrap_or(i64::MAX);
    Ok(RemotingCommand::success().with_header(&SearchOffsetResponseHeader { offset }))
}

/// GET_EARLIEST_MSG_STORETIME.
pub fn earliest_msg_storetime(
    store: &MessageStore,
    request: &RemotingCommand,
) -> Result<RemotingCommand, RemotingCommand> {
    let h: GetEarliestMsgStoretimeRequestHeader = header(request)?;
    let timestamp = earliest_store_time(store, &h.topic, h.queue_id);
    Ok(RemotingCommand::success().with_header(&GetEarliestMsgStoretimeResponseHeader { timestamp }))
}

#[cfg(test)]
mod tests {
    use std::net::SocketAddr;
    use std::path::Path;

    use raftmq_common::message::Message;
    use raftmq_common::message::MessageExt;
    use raftmq_raft::ApplyHandler;
    use raftmq_raft::CommittedEntry;
    use raftmq_raft::PayloadPatcher;
    use raftmq_raft::log_store::COMMITLOG_DIR;
    use raftmq_raft::type_config::log_id;

    use super::*;
    use crate::config::broker_config::BrokerConfig;
    use crate::state::commit_log::RecordAtError;
    use crate::state::entry::encode_messages;
    use crate::state::entry::tag;
    use crate::state::index_file::IndexFileSizes;
    use crate::state::store::BrokerPatcher;
    use crate::state::store::StoreSettings;
    use crate::state::topic_config::SystemTopicOptions;

    const SEGMENT: u64 = 1 << 16;

    fn settings(root: &Path) -> StoreSettings {
        StoreSettings {
            store_root: root.to_path_buf(),
            cq_units_per_file: 8,
            segment_size: SEGMENT,
            delay_levels_ms: vec![1000],
            // One slot: every key shares a chain, so the re-checks are exercised.
            index_sizes: IndexFileSizes { slot_count: 1, entry_count: 64 },
            system_topics: SystemTopicOptions::from(&BrokerConfig::default()),
        }
    }

    fn record(topic: &str, queue_offset: i64, keys: &str, uniq: &str, store_ms: i64) -> MessageExt {
        let host: SocketAddr = "127.0.0.1:10911".parse().unwrap();
        let mut message = Message::new(topic, format!("body-{queue_offset}")).with_tags("a");
        message.set_keys(keys);
        message.set_uniq_key(uniq);
        MessageExt {
            message,
            queue_offset,
            born_host: host,
            store_host: host,
            store_timestamp: store_ms,
            ..MessageExt::default()
        }
    }

    /// Applies the records as one entry at `payload_pos`, writing the patched payload where the raft
    /// log store would (segment 0), so reads see it.
    fn apply(store: &MessageStore, index: u64, payload_pos: u64, records: &[MessageExt]) -> Vec<i64> {
        let mut body = encode_messages(records).unwrap().to_vec();
        BrokerPatcher.patch(tag::MESSAGES, payload_pos, &mut body);
        let seg = store.store_root().join(COMMITLOG_DIR).join(format!("{:020}", 0));
        let mut bytes = std::fs::read(&seg).unwrap_or_else(|_| vec![0u8; SEGMENT as usize]);
        let at = payload_pos as usize;
        bytes[at..at + body.len()].copy_from_slice(&body);
        std::fs::create_dir_all(seg.parent().unwrap()).unwrap();
        std::fs::write(&seg, &bytes).unwrap();
        let mut starts = Vec::new();
        let mut pos = 0usize;
        while pos < body.len() {
            starts.push((payload_pos as usize + pos) as i64);
            pos += i32::from_be_bytes(body[pos..pos + 4].try_into().unwrap()) as usize;
        }
        let entry = CommittedEntry { log_id: log_id(1, index), payload_pos, tag: tag::MESSAGES, body: body.into() };
        store.apply(entry);
        starts
    }

    fn decoded(r: &QueryResult) -> Vec<(String, i64)> {
        r.records
            .iter()
            .map(|b| {
                let v = parse_record(b, DecodeOptions::verify_crc()).unwrap();
                (String::from_utf8_lossy(v.body).into_owned(), v.commit_log_offset)
            })
            .collect()
    }

    #[test]
    fn key_queries_recheck_topic_and_key_and_unique_queries_answer_the_earliest() {
        let dir = tempfile::tempdir().unwrap();
        let store = MessageStore::open(settings(dir.path()), 0).unwrap();
        let a = apply(
            &store,
            1,
            100,
            &[
                record("T", 0, "k1 k2", "U0", 1_000),
                record("T", 1, "k2", "U1", 2_000),
                record("X", 0, "k1", "U2", 3_000),
            ],
        );
        // UNIQ_KEY U1 stored again later (a producer retry); "BB" collides with "Aa" (equal Java
        // hashCodes), so the index hands it to a query for "Aa" and only the re-check drops it.
        let b = apply(&store, 2, 4_000, &[record("T", 2, "k1 BB", "U1", 9_000)]);

        let all = (0, i64::MAX);
        let r = query_by_key(&store, "T", "k1", 64, all, false);
        assert_eq!(decoded(&r), [("body-2".to_owned(), b[0]), ("body-0".to_owned(), a[0])], "X's k1 is not T's");
        assert_eq!((r.index_last_update_timestamp, r.index_last_update_phyoffset), (9_000, b[0]));
        assert_eq!(decoded(&query_by_key(&store, "T", "k2", 64, all, false)).len(), 2);
        assert_eq!(decoded(&query_by_key(&store, "T", "k2", 1, all, false)).len(), 1);
        assert!(query_by_key(&store, "T", "k", 64, all, false).records.is_empty(), "prefixes are not keys");
        assert_eq!(store.index().query("T#Aa", 64, 0, i64::MAX), [b[0]], "the hashes collide");
        assert!(query_by_key(&store, "T", "Aa", 64, all, false).records.is_empty());
        assert_eq!(decoded(&query_by_key(&store, "T", "BB", 64, all, false)).len(), 1);
        assert_eq!(decoded(&query_by_key(&store, "T", "k1", 64, (8_000, 10_000), false)), [("body-2".into(), b[0])]);

        let u = query_by_key(&store, "T", "U1", 0, all, true);
        assert_eq!(decoded(&u), [("body-1".to_owned(), a[1])], "the earliest stored copy");
        assert!(query_by_key(&store, "X", "U1", 0, all, true).records.is_empty());
    }

    #[test]
    fn view_answers_only_record_starts_within_committed_data() {
        let dir = tempfile::tempdir().unwrap();
        let store = MessageStore::open(settings(dir.path()), 0).unwrap();
        let starts = apply(&store, 1, 100, &[record("T", 0, "k", "U0", 1), record("T", 1, "k", "U1", 2)]);
        let log = store.commit_log();
        for &s in &starts {
            let bytes = record_at(log, s).unwrap();
            assert_eq!(parse_record(&bytes, DecodeOptions::verify_crc()).unwrap().commit_log_offset, s);
        }
        let end = log.max_offset();
        assert_eq!(record_at(log, -1), Err(RecordAtError::NoData(-1)));
        assert_eq!(record_at(log, end), Err(RecordAtError::NoData(end)));
        for inside in [starts[0] + 1, starts[0] + 4, starts[1] - 1, 0, 50] {
            assert!(matches!(record_at(log, inside), Err(RecordAtError::NotARecord { .. })), "offset {inside}");
        }
    }

    #[test]
    fn offsets_by_time_are_lower_bounds() {
        let times = [10, 20, 20, 20, 30, 40];
        let at = |o: u64| times.get(o as usize).copied();
        for (ts, want) in [(0, 0), (10, 0), (11, 1), (20, 1), (21, 4), (40, 5), (41, 6)] {
            assert_eq!(lower_bound_by_time(0, 6, ts, at), want, "ts {ts}");
        }
        assert_eq!(lower_bound_by_time(3, 3, 0, at), 3, "empty range");
        // Unreadable (removed) offsets count as earlier.
        let gone = |o: u64| if o < 2 { None } else { at(o) };
        assert_eq!(lower_bound_by_time(0, 6, 0, gone), 2);

        let dir = tempfile::tempdir().unwrap();
        let store = MessageStore::open(settings(dir.path()), 0).unwrap();
        assert_eq!(earliest_store_time(&store, "T", 0), -1);
        assert_eq!(offset_by_time(&store, "T", 0, 5), 0);
        apply(&store, 1, 100, &[record("T", 0, "", "U0", 1_000), record("T", 1, "", "U1", 1_001)]);
        apply(&store, 2, 2_000, &[record("T", 2, "", "U2", 1_001), record("T", 3, "", "U3", 1_500)]);
        assert_eq!(earliest_store_time(&store, "T", 0), 1_000);
        let cases = [(0, 0), (1_000, 0), (1_001, 1), (1_002, 3), (1_500, 3), (1_501, 4)];
        for (ts, want) in cases {
            assert_eq!(offset_by_time(&store, "T", 0, ts), want, "ts {ts}");
        }
    }

    #[test]
    fn restart_keeps_the_index_and_does_not_index_twice() {
        let dir = tempfile::tempdir().unwrap();
        let recs = [record("T", 0, "k", "U0", 1_000), record("T", 1, "k", "U1", 2_000)];
        let starts = {
            let store = MessageStore::open(settings(dir.path()), 0).unwrap();
            let s = apply(&store, 1, 100, &recs);
            store.flush();
            s
        };
        let store = MessageStore::open(settings(dir.path()), 4_096).unwrap();
        // openraft re-applies the committed log after a restart.
        apply(&store, 1, 100, &recs);
        let r = query_by_key(&store, "T", "k", 64, (0, i64::MAX), false);
        assert_eq!(decoded(&r), [("body-1".to_owned(), starts[1]), ("body-0".to_owned(), starts[0])]);
    }
}
