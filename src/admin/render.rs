//! Renderings several command families share: a message as JSON (`queryMsgById`, `printMsg`, ...)
//! and `key: value` listings of per-server tables (`brokerStatus`, `getNamesrvConfig`, ...).

use std::collections::BTreeMap;

use raftmq_common::message::MessageExt;
use serde_json::json;

use super::out::Out;

/// A message as `--json` shows it: every field, properties sorted, the body as UTF-8 text.
pub(super) fn message_json(m: &MessageExt) -> serde_json::Value {
    json!({
        "msgId": m.msg_id(), "offsetMsgId": m.offset_msg_id().to_string(), "topic": m.topic(),
        "tags": m.message.tags(), "keys": m.message.keys(), "queueId": m.queue_id, "queueOffset": m.queue_offset,
        "commitLogOffset": m.commit_log_offset, "reconsumeTimes": m.reconsume_times,
        "bornTimestamp": m.born_timestamp, "storeTimestamp": m.store_timestamp,
        "bornHost": m.born_host.to_string(), "storeHost": m.store_host.to_string(), "sysFlag": m.sys_flag,
        "properties": m.message.properties.iter().collect::<BTreeMap<_, _>>(),
        "body": String::from_utf8_lossy(&m.message.body),
    })
}

/// `key: value` per line (prefixed by the broker when there are several), or one JSON object of
/// broker → table.
pub(super) fn print_key_values(out: Out, addrs: &[String], all: &BTreeMap<String, BTreeMap<String, String>>) {
    if out.json {
        out.json(&json!(all));
        return;
    }
    for (addr, table) in all {
        for (k, v) in table {
            if addrs.len() == 1 {
                println!("{k:<32}: {v}");
            } else {
                println!("{addr:<24} {k:<32}: {v}");
            }
        }
    }
}
