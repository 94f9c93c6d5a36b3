//! Message listeners (`MessageListenerConcurrently`, `MessageListenerOrderly`) and their statuses.
//!
//! Listeners are plain synchronous callbacks, as in Java, run on tokio's blocking pool so a listener
//! that blocks does not stall the consumer's pulls. A listener that panics counts as
//! `ReconsumeLater` / `SuspendCurrentQueueAMoment` (Java treats a thrown exception the same way).

use std::sync::Arc;

use raftmq_common::message::MessageExt;
use raftmq_common::message::MessageQueue;

/// Result of a concurrent listener call (`ConsumeConcurrentlyStatus`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ConsumeConcurrentlyStatus {
    /// Consumed; messages after `ack_index` in the context are still treated as failed.
    ConsumeSuccess,
    /// Failed: the messages go back to the broker (CONSUMER_SEND_MSG_BACK) to be redelivered.
    ReconsumeLater,
}

/// Per-call context of a concurrent listener (`ConsumeConcurrentlyContext`).
#[derive(Debug, Clone)]
pub struct ConsumeConcurrentlyContext {
    /// The queue the messages came from (shared with the queue's pull loop, not copied per call).
    pub message_queue: Arc<MessageQueue>,
    /// Delay level of the send-back: 0 lets the broker choose (3 + reconsumeTimes), -1 sends to the DLQ.
    pub delay_level_when_next_consume: i32,
    /// On success, the index of the last consumed message; later ones count as failed.
    pub ack_index: i32,
}

/// Result of an orderly listener call (`ConsumeOrderlyStatus`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ConsumeOrderlyStatus {
    /// Consumed; the queue's offset moves past the batch.
    Success,
    /// Failed: pause the queue for `suspend_current_queue_time_millis` and consume the batch again.
    SuspendCurrentQueueAMoment,
}

/// Per-call context of an orderly listener (`ConsumeOrderlyContext`).
#[derive(Debug, Clone)]
pub struct ConsumeOrderlyContext {
    /// The queue the messages came from.
    pub message_queue: MessageQueue,
    /// Pause before a suspended batch is consumed again (ms); starts at the consumer's setting.
    pub suspend_current_queue_time_millis: i64,
}

/// A listener for concurrent consumption.
pub trait MessageListenerConcurrently: Send + Sync + 'static {
    /// Consumes a batch (at most `consume_message_batch_max_size` messages of one queue).
    fn consume_message(&self, msgs: &[MessageExt], ctx: &mut ConsumeConcurrentlyContext) -> ConsumeConcurrentlyStatus;
}

impl<F> MessageListenerConcurrently for F
where
    F: Fn(&[MessageExt], &mut ConsumeConcurrentlyContext) -> ConsumeConcurrentlyStatus + Send + Sync + 'static,
{
    fn consume_message(&self, msgs: &[MessageExt], ctx: &mut ConsumeConcurrentlyContext) -> ConsumeConcurrentlyStatus {
        self(msgs, ctx)
    }
}

/// A listener for orderly consumption: never called for one queue from two tasks at once.
pub trait MessageListenerOrderly: Send + Sync + 'static {
    /// Consumes a batch of one queue, in queue order.
    fn consume_message(&self, msgs: &[MessageExt], ctx: &mut ConsumeOrderlyContext) -> ConsumeOrderlyStatus;
}

impl<F> MessageListenerOrderly for F
where
    F: Fn(&[MessageExt], &mut ConsumeOrderlyContext) -> ConsumeOrderlyStatus + Send + Sync + 'static,
{
    fn consume_message(&self, msgs: &[MessageExt], ctx: &mut ConsumeOrderlyContext) -> ConsumeOrderlyStatus {
        self(msgs, ctx)
    }
}
