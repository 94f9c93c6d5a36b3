//! Message queries over HTTP, answered from the committed CommitLog by any replica through
//! `processors::query`'s functions (the same checks as VIEW_MESSAGE_BY_ID, QUERY_MESSAGE and
//! SEARCH_OFFSET_BY_TIMESTAMP):
//!
//! | route | what |
//! |---|---|
//! | `GET /api/v1/messages/{msgId}` | the record an offsetMsgId names (physical offsets agree on every replica, so its host part is not checked) |
//! | `GET /api/v1/messages/by-key?topic&key[&begin_ms&end_ms&max]` | records of `topic` whose `KEYS` hold `key`, newest first |
//! | `GET /api/v1/messages/by-time?topic&queue_id&timestamp_ms` | the first offset of a queue stored at or after the time, and the message there |
//! | `GET /api/v1/messages/{msgId}/trace[?trace_topic]` | the message-trace records of a client msgId held by this group's trace topic (`msgTraceTopicName` by default): Pub, SubBefore, SubAfter, EndTransaction, oldest first |
//!
//! Bodies are shown as UTF-8 text when they are, else as hex, and cut at
//! [`ADMIN_MESSAGE_BODY_SHOWN_MAX_BYTES`] (`body_truncated`); compressed bodies are inflated (bounded).

use std::collections::BTreeMap;
use std::fmt::Write as _;

use axum::Json;
use axum::extract::State;
use axum::routing::get;
use bytes::Bytes;
use raftmq_common::limits::ADMIN_MESSAGE_BODY_SHOWN_MAX_BYTES;
use raftmq_common::limits::ADMIN_QUERY_MESSAGE_DEFAULT_COUNT;
use raftmq_common::limits::ADMIN_TRACE_BODY_MAX_BYTES;
use raftmq_common::limits::ADMIN_TRACE_RECORDS_MAX_COUNT;
use raftmq_common::message::compress::uncompress_body;
use raftmq_common::message::compress::uncompress_body_prefix;
use raftmq_common::message::msg_id::OffsetMsgId;
use raftmq_common::message::properties;
use raftmq_common::message::record::DecodeOptions;
use raftmq_common::message::record::parse_record;
use raftmq_common::message::sys_flag;
use raftmq_common::message::trace::views_of;
use serde::Deserialize;
use serde::Serialize;

use crate::http::Routes;
use crate::http::Shared;
use crate::http::error::ApiError;
use crate::http::error::ApiPath;
use crate::http::error::ApiQuery;
use crate::http::error::ApiResult;
use crate::http::error::code;
use crate::http::topics::check_topic_name;
use crate::http::topics::topic_config;
use crate::processors::query::offset_by_time;
use crate::processors::query::query_by_key;
use crate::state::commit_log::record_at;

/// Routes of this module.
pub fn routes() -> Routes {
    Routes::new()
        .route("/api/v1/messages/by-key", get(by_key))
        .route("/api/v1/messages/by-time", get(by_time))
        .route("/api/v1/messages/{msg_id}", get(by_id))
        .route("/api/v1/messages/{msg_id}/trace", get(trace))
}

/// A stored message.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct MessageView {
    /// offsetMsgId (this replica's STOREHOST and the physical offset).
    pub msg_id: String,
    /// Topic.
    pub topic: String,
    /// Queue.
    pub queue_id: i32,
    /// ConsumeQueue offset.
    pub queue_offset: i64,
    /// Physical CommitLog offset.
    pub commit_log_offset: i64,
    /// Record size.
    pub store_size: usize,
    /// sysFlag.
    pub sys_flag: i32,
    /// Producer clock at send.
    pub born_timestamp: i64,
    /// Broker clock at store.
    pub store_timestamp: i64,
    /// Producer address.
    pub born_host: String,
    /// Storing broker.
    pub store_host: String,
    /// Reconsume count.
    pub reconsume_times: i32,
    /// `TAGS`.
    pub tags: Option<String>,
    /// `KEYS`.
    pub keys: Option<String>,
    /// `UNIQ_KEY` (the client msgId).
    pub uniq_key: Option<String>,
    /// Every property.
    pub properties: BTreeMap<String, String>,
    /// Body bytes (after inflating); for a compressed body longer than what is shown, the stored
    /// (compressed) size, since it is not inflated past that.
    pub body_size: usize,
    /// Body as text, when it is UTF-8.
    pub body: Option<String>,
    /// Body as hex, when it is not UTF-8.
    pub body_hex: Option<String>,
    /// The body shown was cut.
    pub body_truncated: bool,
}

fn hex(bytes: &[u8]) -> String {
    let mut s = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        // Writing into a String cannot fail.
        let _ = write!(s, "{b:02X}");
    }
    s
}

/// The view of a checked record (as [`record_at`] returns); `None` if it does not parse.
pub fn message_view(bytes: &Bytes) -> Option<MessageView> {
    let r = parse_record(bytes, DecodeOptions::default()).ok()?;
    let props = r.parse_properties();
    let raw = bytes.slice_ref(r.body);
    let raw_len = raw.len();
    // One byte past what is shown tells a cut body; inflating more would let one GET of many
    // compressed records cost gigabytes of zlib work.
    let body = if sys_flag::is_compressed(r.sys_flag) {
        uncompress_body_prefix(&raw, ADMIN_MESSAGE_BODY_SHOWN_MAX_BYTES + 1).map(Bytes::from).unwrap_or(raw)
    } else {
        raw
    };
    let shown = body.get(..ADMIN_MESSAGE_BODY_SHOWN_MAX_BYTES).unwrap_or(&body);
    // A cut may split a UTF-8 sequence: show the valid prefix as text then.
    let text = match std::str::from_utf8(shown) {
        Ok(t) => Some(t.to_owned()),
        Err(e) if shown.len() < body.len() && e.error_len().is_none() => {
            shown.get(..e.valid_up_to()).and_then(|s| std::str::from_utf8(s).ok()).map(str::to_owned)
        }
        Err(_) => None,
    };
    Some(MessageView {
        msg_id: OffsetMsgId::new(r.store_host, r.commit_log_offset).to_string(),
        topic: r.topic.to_owned(),
        queue_id: r.queue_id,
        queue_offset: r.queue_offset,
        commit_log_offset: r.commit_log_offset,
        store_size: r.total_size,
        sys_flag: r.sys_flag,
        born_timestamp: r.born_timestamp,
        store_timestamp: r.store_timestamp,
        born_host: r.born_host.to_string(),
        store_host: r.store_host.to_string(),
        reconsume_times: r.reconsume_times,
        tags: props.get(properties::TAGS).map(str::to_owned),
        keys: props.get(properties::KEYS).map(str::to_owned),
        uniq_key: props.get(properties::UNIQ_KEY).map(str::to_owned),
        properties: props.iter().map(|(k, v)| (k.to_owned(), v.to_owned())).collect(),
        body_size: if shown.len() < body.len() && sys_flag::is_compressed(r.sys_flag) { raw_len } else { body.len() },
        body_hex: text.is_none().then(|| hex(shown)),
        body: text,
        body_truncated: shown.len() < body.len(),
    })
}

fn not_found(message: impl Into<String>) -> ApiError {
    ApiError::not_found(code::MESSAGE_NOT_FOUND, message)
}

async fn by_id(State(ctx): State<Shared>, ApiPath(msg_id): ApiPath<String>) -> ApiResult<Json<MessageView>> {
    let id: OffsetMsgId = msg_id.parse().map_err(|e| ApiError::invalid(format!("not an offsetMsgId: {e}")))?;
    let bytes = record_at(ctx.store.commit_log(), id.commit_log_offset).map_err(|e| not_found(e.to_string()))?;
    message_view(&bytes).map(Json).ok_or_else(|| not_found(format!("no message at offset {}", id.commit_log_offset)))
}

/// Query of `by-key`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ByKey {
    /// Topic.
    pub topic: String,
    /// Key (one of the message's `KEYS`).
    pub key: String,
    /// Earliest store time, ms (default 0).
    pub begin_ms: Option<i64>,
    /// Latest store time, ms (default: now and beyond).
    pub end_ms: Option<i64>,
    /// Most messages answered (default 64, at most `QUERY_MESSAGE_MAX_COUNT`).
    pub max: Option<i32>,
}

async fn by_key(State(ctx): State<Shared>, ApiQuery(q): ApiQuery<ByKey>) -> ApiResult<Json<serde_json::Value>> {
    check_topic_name(&q.topic)?;
    if q.key.is_empty() {
        return Err(ApiError::invalid("key is empty"));
    }
    topic_config(&ctx, &q.topic)?;
    let range = (q.begin_ms.unwrap_or(0), q.end_ms.unwrap_or(i64::MAX));
    if range.0 > range.1 {
        return Err(ApiError::invalid("begin_ms is after end_ms"));
    }
    let max = q.max.unwrap_or(ADMIN_QUERY_MESSAGE_DEFAULT_COUNT);
    let found = query_by_key(&ctx.store, &q.topic, &q.key, max, range, false);
    let messages: Vec<MessageView> = found.records.iter().filter_map(message_view).collect();
    Ok(Json(serde_json::json!({ "topic": q.topic, "key": q.key, "messages": messages })))
}

/// Query of `trace`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TraceQuery {
    /// The trace topic (default: this broker's `msgTraceTopicName`).
    pub trace_topic: Option<String>,
}

async fn trace(
    State(ctx): State<Shared>,
    ApiPath(msg_id): ApiPath<String>,
    ApiQuery(q): ApiQuery<TraceQuery>,
) -> ApiResult<Json<serde_json::Value>> {
    let topic = q.trace_topic.unwrap_or_else(|| ctx.config.msg_trace_topic_name.clone());
    check_topic_name(&topic)?;
    if msg_id.is_empty() || msg_id.contains(' ') {
        return Err(ApiError::invalid("msgId is empty or holds a space"));
    }
    topic_config(&ctx, &topic)?;
    let found = query_by_key(&ctx.store, &topic, &msg_id, ADMIN_QUERY_MESSAGE_DEFAULT_COUNT, (0, i64::MAX), false);
    let mut records = Vec::new();
    for bytes in &found.records {
        let Ok(r) = parse_record(bytes, DecodeOptions::default()) else { continue };
        let props = r.parse_properties();
        // The IndexFile matches key hashes: only records keyed by the id are about it.
        if !props.get(properties::KEYS).is_some_and(|k| k.split(properties::KEY_SEPARATOR).any(|k| k == msg_id)) {
            continue;
        }
        let raw = bytes.slice_ref(r.body);
        let body = if sys_flag::is_compressed(r.sys_flag) {
            // A trace message is at most about TRACE_MESSAGE_BODY_MAX_BYTES; anything that inflates
            // past the bound is not one, and a cut body could end inside a record: skipped whole.
            // (A message of zeros compresses a thousandfold: 64 of them must not cost a GiB.)
            match uncompress_body(&raw, ADMIN_TRACE_BODY_MAX_BYTES) {
                Ok(b) => Bytes::from(b),
                Err(_) => continue,
            }
        } else {
            raw
        };
        let text = String::from_utf8_lossy(&body);
        records.extend(views_of(&msg_id, &text, &r.born_host.ip().to_string()));
        if records.len() >= ADMIN_TRACE_RECORDS_MAX_COUNT {
            records.truncate(ADMIN_TRACE_RECORDS_MAX_COUNT);
            break;
        }
    }
    records.sort_by_key(|v| v.timestamp_ms);
    Ok(Json(serde_json::json!({ "msg_id": msg_id, "trace_topic": topic, "records": records })))
}

/// Query of `by-time`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ByTime {
    /// Topic.
    pub topic: String,
    /// Queue.
    pub queue_id: i32,
    /// Store time, ms since the epoch.
    pub timestamp_ms: i64,
}

/// Answer of `by-time`.
#[derive(Debug, Clone, Serialize)]
pub struct AtTime {
    /// First offset stored at or after the time (the max offset when none was).
    pub offset: u64,
    /// The message there.
    pub message: MessageView,
}

async fn by_time(State(ctx): State<Shared>, ApiQuery(q): ApiQuery<ByTime>) -> ApiResult<Json<AtTime>> {
    check_topic_name(&q.topic)?;
    let config = topic_config(&ctx, &q.topic)?;
    if q.queue_id < 0 || q.queue_id >= config.read_queue_nums {
        return Err(ApiError::invalid(format!(
            "queue_id {} is not within 0..{} of {}",
            q.queue_id, config.read_queue_nums, q.topic
        )));
    }
    let offset = offset_by_time(&ctx.store, &q.topic, q.queue_id, q.timestamp_ms);
    let unit = ctx.store.consume_queues().get(&q.topic, q.queue_id).and_then(|cq| cq.unit_at(offset));
    let unit =
        unit.ok_or_else(|| not_found(format!("no message stored at or after {} (offset {offset})", q.timestamp_ms)))?;
    let bytes = record_at(ctx.store.commit_log(), unit.phy_offset).map_err(|e| not_found(e.to_string()))?;
    let message = message_view(&bytes).ok_or_else(|| not_found(format!("no message at offset {offset}")))?;
    Ok(Json(AtTime { offset, message }))
}

#[cfg(test)]
mod tests {
    use std::net::SocketAddr;

    use raftmq_common::message::Message;
    use raftmq_common::message::MessageExt;
    use raftmq_common::message::record::encode_record;

    use super::*;

    fn stored(body: Vec<u8>) -> Bytes {
        let host: SocketAddr = "127.0.0.1:10911".parse().unwrap();
        let mut message = Message::new("T", body).with_tags("a");
        message.set_keys("k1 k2");
        let ext =
            MessageExt { message, born_host: host, store_host: host, commit_log_offset: 100, ..MessageExt::default() };
        encode_record(&ext).unwrap().freeze()
    }

    #[test]
    fn text_bodies_are_text_binary_bodies_hex_and_long_bodies_cut() {
        let v = message_view(&stored(b"hello".to_vec())).unwrap();
        assert_eq!((v.body.as_deref(), v.body_hex.as_deref(), v.body_truncated), (Some("hello"), None, false));
        assert_eq!((v.tags.as_deref(), v.keys.as_deref(), v.commit_log_offset), (Some("a"), Some("k1 k2"), 100));
        assert_eq!(v.msg_id.parse::<OffsetMsgId>().unwrap().commit_log_offset, 100);

        let v = message_view(&stored(vec![0xff, 0x00])).unwrap();
        assert_eq!((v.body, v.body_hex.as_deref()), (None, Some("FF00")));

        let mut long = "é".repeat(ADMIN_MESSAGE_BODY_SHOWN_MAX_BYTES);
        long.push('x');
        let v = message_view(&stored(long.clone().into_bytes())).unwrap();
        assert!(v.body_truncated);
        assert_eq!(v.body_size, long.len());
        assert_eq!(v.body.unwrap().len(), ADMIN_MESSAGE_BODY_SHOWN_MAX_BYTES, "cut on a character boundary");

        assert_eq!(message_view(&Bytes::from_static(b"\x00\x00\x00\x10garbage")), None);
    }
}
