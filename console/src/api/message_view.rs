//! A message as the console shows it, from the SDK's `MessageExt` (what pulls and VIEW_MESSAGE_BY_ID
//! return), in the shape of the admin API's `MessageView`: the page renders both alike. The body is
//! text when it is UTF-8, else hex, cut at [`ADMIN_MESSAGE_BODY_SHOWN_MAX_BYTES`].

use raftmq_common::limits::ADMIN_MESSAGE_BODY_SHOWN_MAX_BYTES;
use raftmq_common::message::MessageExt;
use raftmq_common::message::msg_id::OffsetMsgId;
use raftmq_common::message::properties;
use serde_json::Value;
use serde_json::json;

/// `m` as JSON.
pub fn message_json(m: &MessageExt) -> Value {
    let props = &m.message.properties;
    let body = &m.message.body;
    let shown = body.get(..ADMIN_MESSAGE_BODY_SHOWN_MAX_BYTES).unwrap_or(body);
    let text = std::str::from_utf8(shown).ok();
    let hex: Option<String> = text.is_none().then(|| shown.iter().map(|b| format!("{b:02X}")).collect());
    let all: serde_json::Map<String, Value> = props.iter().map(|(k, v)| (k.to_owned(), json!(v))).collect();
    json!({
        "msg_id": OffsetMsgId::new(m.store_host, m.commit_log_offset).to_string(),
        "topic": m.topic(),
        "queue_id": m.queue_id,
        "queue_offset": m.queue_offset,
        "commit_log_offset": m.commit_log_offset,
        "store_size": m.store_size,
        "sys_flag": m.sys_flag,
        "born_timestamp": m.born_timestamp,
        "store_timestamp": m.store_timestamp,
        "born_host": m.born_host.to_string(),
        "store_host": m.store_host.to_string(),
        "reconsume_times": m.reconsume_times,
        "tags": props.get(properties::TAGS),
        "keys": props.get(properties::KEYS),
        "uniq_key": props.get(properties::UNIQ_KEY),
        "properties": all,
        "body_size": body.len(),
        "body": text,
        "body_hex": hex,
        "body_truncated": shown.len() < body.len(),
    })
}

#[cfg(test)]
mod tests {
    use raftmq_common::message::Message;

    use super::*;

    #[test]
    fn text_is_text_and_binary_is_hex() {
        let mut message = Message::new("T", b"hi".to_vec());
        message.set_keys("k1");
        let m = MessageExt { message, ..MessageExt::default() };
        let v = message_json(&m);
        assert_eq!((v["body"].as_str(), v["keys"].as_str(), v["body_hex"].is_null()), (Some("hi"), Some("k1"), true));
        let m = MessageExt { message: Message::new("T", vec![0xff, 0x01]), ..MessageExt::default() };
        assert_eq!(message_json(&m)["body_hex"].as_str(), Some("FF01"));
    }
}
