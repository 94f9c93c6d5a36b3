//! The consumer's fallback when CONSUMER_SEND_MSG_BACK fails (RocketMQ 4.x
//! `DefaultMQPushConsumerImpl.sendMessageBack`): the failed message is sent as an ordinary message
//! to `%RETRY%<group>` by the consumer's inner producer.
//!
//! ```text
//! listener ReconsumeLater ─▶ CONSUMER_SEND_MSG_BACK ─ok─▶ done (the broker built the retry message)
//!                                    └─failed─▶ retry_message(msg) ─▶ producer SEND to %RETRY%<group>
//!                                                  (RECONSUME_TIME / MAX_RECONSUME_TIMES become the
//!                                                   header's reconsumeTimes / maxReconsumeTimes)
//!                                                        └─failed─▶ consumed again locally
//! ```
//!
//! The broker applies the same retry/DLQ rule to such a send as to a send-back: once reconsumeTimes
//! reaches maxReconsumeTimes the message goes to `%DLQ%<group>`. Pure: no I/O here.

use raftmq_common::message::Message;
use raftmq_common::message::MessageExt;
use raftmq_common::message::properties;
use raftmq_common::message::validate::retry_topic;

/// Producer group of the consumer's inner producer (`MixAll.CLIENT_INNER_PRODUCER_GROUP`).
pub const CLIENT_INNER_PRODUCER_GROUP: &str = "CLIENT_INNER_PRODUCER";
/// Delay level of a fallback retry: `3 + reconsumeTimes`, as the broker picks for a send-back.
const RETRY_DELAY_LEVEL_BASE: i32 = 3;

/// The `%RETRY%<group>` message that replaces a failed send-back of `msg` (as the listener saw it,
/// original topic restored): its body, flag and properties, plus `RETRY_TOPIC` (its topic),
/// `ORIGIN_MESSAGE_ID` (kept, else its msgId), `RECONSUME_TIME` (+1), `MAX_RECONSUME_TIMES` and
/// `DELAY` = 3 + reconsumeTimes; the pull-only `MIN_OFFSET`/`MAX_OFFSET` and `TRAN_MSG` are dropped.
pub fn retry_message(msg: &MessageExt, group: &str, max_reconsume_times: i32) -> Message {
    let mut out = Message { topic: retry_topic(group).into(), ..msg.message.clone() };
    let props = &mut out.properties;
    if props.get(properties::ORIGIN_MESSAGE_ID).is_none_or(|id| id.trim().is_empty()) {
        props.insert(properties::ORIGIN_MESSAGE_ID, msg.msg_id());
    }
    props.insert(properties::RETRY_TOPIC, msg.message.topic.as_str());
    props.insert(properties::RECONSUME_TIME, msg.reconsume_times.saturating_add(1).to_string());
    props.insert(properties::MAX_RECONSUME_TIMES, max_reconsume_times.to_string());
    for pull_only in [properties::MIN_OFFSET, properties::MAX_OFFSET, properties::TRAN_MSG] {
        props.remove(pull_only);
    }
    out.set_delay_time_level(RETRY_DELAY_LEVEL_BASE.saturating_add(msg.reconsume_times));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fallback_retry_message_carries_the_retry_bookkeeping() {
        let mut msg = MessageExt {
            message: Message::new("TopicA", &b"payload"[..]).with_tags("TagA"),
            reconsume_times: 2,
            ..MessageExt::default()
        };
        msg.message.set_uniq_key("UNIQ1");
        msg.message.properties.insert(properties::MIN_OFFSET, "0");
        msg.message.properties.insert(properties::MAX_OFFSET, "9");
        let out = retry_message(&msg, "g", 16);
        assert_eq!(out.topic, "%RETRY%g");
        assert_eq!(&out.body[..], b"payload");
        assert_eq!(out.tags(), Some("TagA"));
        assert_eq!(out.uniq_key(), Some("UNIQ1"));
        assert_eq!(out.property(properties::ORIGIN_MESSAGE_ID), Some("UNIQ1"));
        assert_eq!(out.property(properties::RETRY_TOPIC), Some("TopicA"));
        assert_eq!(out.property(properties::RECONSUME_TIME), Some("3"));
        assert_eq!(out.property(properties::MAX_RECONSUME_TIMES), Some("16"));
        assert_eq!(out.delay_time_level(), 5);
        assert!(out.property(properties::MIN_OFFSET).is_none() && out.property(properties::MAX_OFFSET).is_none());
        // A message already retried keeps its first origin.
        let mut again = msg.clone();
        again.message.properties.insert(properties::ORIGIN_MESSAGE_ID, "FIRST");
        assert_eq!(retry_message(&again, "g", 16).property(properties::ORIGIN_MESSAGE_ID), Some("FIRST"));
    }
}
