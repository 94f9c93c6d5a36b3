//! What happens to messages a listener did not consume: `maxReconsumeTimes`, CONSUMER_SEND_MSG_BACK
//! with the inner producer's send to `%RETRY%<group>` as fallback, and the original topic shown
//! for messages redelivered through the group's retry topic (`resetRetryAndNamespace`).

use compact_str::CompactString;
use raftmq_common::limits as L;
use raftmq_common::message::MessageExt;
use raftmq_common::message::MessageQueue;
use raftmq_common::message::properties;

use crate::consumer::push::inner::PushInner;
use crate::consumer::send_back::retry_message;
use crate::error::Result;

impl PushInner {
    /// `maxReconsumeTimes` in effect: -1 means 16 for concurrent listeners, unbounded for orderly ones.
    pub(super) fn max_reconsume_times(&self) -> i32 {
        match self.config.max_reconsume_times {
            -1 if self.is_orderly() => i32::MAX,
            -1 => L::CONSUMER_MAX_RECONSUME_TIMES_DEFAULT_COUNT,
            n => n,
        }
    }

    /// `sendMessageBack`: CONSUMER_SEND_MSG_BACK of `msg` (as the listener saw it); when that fails,
    /// an ordinary send of its retry message to `%RETRY%<group>` by the inner producer.
    pub(super) async fn send_message_back(&self, msg: &MessageExt, mq: &MessageQueue, delay_level: i32) -> Result<()> {
        let max = self.max_reconsume_times();
        let Err(e) = self.client.send_message_back(msg, mq, delay_level, max).await else { return Ok(()) };
        tracing::debug!(mq = ?mq, offset = msg.queue_offset, error = %e, "send-back failed; sending to the retry topic");
        let retry = retry_message(msg, &self.config.consumer.consumer_group, max);
        self.retry_producer.send(retry).await.map(|_| ())
    }

    /// `resetRetryAndNamespace`: a redelivered message shows its original topic.
    pub(super) fn reset_retry_topic(&self, msgs: &mut [MessageExt]) {
        for msg in msgs {
            if msg.message.topic == self.retry_topic
                && let Some(original) = msg.message.property(properties::RETRY_TOPIC).map(CompactString::from)
            {
                msg.message.topic = original;
            }
        }
    }

    /// What the listener sees: the cached messages, or copies with their original topics restored
    /// when some come from the group's retry topic (`resetRetryAndNamespace`).
    pub(super) fn retry_view(&self, msgs: &[MessageExt]) -> Option<Vec<MessageExt>> {
        if !msgs.iter().any(|m| m.message.topic == self.retry_topic) {
            return None;
        }
        let mut view = msgs.to_vec();
        self.reset_retry_topic(&mut view);
        Some(view)
    }
}
