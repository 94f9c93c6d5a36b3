//! [`PushConsumerBuilder`]: the push consumer's options and their defaults, which mirror
//! `DefaultMQPushConsumer`; `build` (in `consumer.rs`) checks them and wires the consumer.

use std::sync::Arc;
use std::time::Duration;

use raftmq_common::limits as L;

use crate::client_config::ClientConfig;
use crate::client_config::client_config_setters;
use crate::consumer::consumer_config::ConsumerConfig;
use crate::consumer::consumer_config::consumer_config_setters;
use crate::consumer::listener::MessageListenerConcurrently;
use crate::consumer::listener::MessageListenerOrderly;

#[derive(Clone)]
pub(super) enum Listener {
    Concurrently(Arc<dyn MessageListenerConcurrently>),
    Orderly(Arc<dyn MessageListenerOrderly>),
}

/// Builds a [`PushConsumer`](crate::consumer::PushConsumer); options and defaults mirror `DefaultMQPushConsumer`.
#[derive(Clone)]
pub struct PushConsumerBuilder {
    pub(super) consumer: ConsumerConfig,
    pub(super) client: ClientConfig,
    pub(super) pull_threshold_for_queue_bytes: u64,
    pub(super) consume_concurrently_max_span: i64,
    pub(super) consume_threads: usize,
    pub(super) consume_message_batch_max_size: usize,
    pub(super) max_reconsume_times: i32,
    pub(super) suspend_current_queue_time: Duration,
    pub(super) persist_interval: Duration,
    pub(super) lock_renew_interval: Duration,
    pub(super) reconsume_local_delay: Duration,
    pub(super) await_termination_when_shutdown: Duration,
    pub(super) listener: Option<Listener>,
}

impl std::fmt::Debug for PushConsumerBuilder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PushConsumerBuilder")
            .field("consumer_group", &self.consumer.consumer_group)
            .field("subscriptions", &self.consumer.subscriptions)
            .field("message_model", &self.consumer.message_model)
            .finish_non_exhaustive()
    }
}

fn ms(v: u64) -> Duration {
    Duration::from_millis(v)
}

impl PushConsumerBuilder {
    /// A builder for `consumer_group` with RocketMQ's defaults.
    pub fn new(consumer_group: impl Into<String>) -> Self {
        PushConsumerBuilder {
            consumer: ConsumerConfig::new(
                consumer_group.into(),
                L::CONSUMER_PULL_BATCH_SIZE_DEFAULT_COUNT,
                ms(L::CONSUMER_BROKER_SUSPEND_MAX_MS),
            ),
            client: ClientConfig::default(),
            pull_threshold_for_queue_bytes: L::CONSUMER_PULL_THRESHOLD_FOR_QUEUE_DEFAULT_BYTES,
            consume_concurrently_max_span: L::CONSUMER_CONSUME_CONCURRENTLY_MAX_SPAN_DEFAULT_COUNT,
            consume_threads: L::CONSUMER_CONSUME_THREADS_DEFAULT_COUNT,
            consume_message_batch_max_size: 1,
            max_reconsume_times: -1,
            suspend_current_queue_time: Duration::from_secs(1),
            persist_interval: ms(L::CONSUMER_OFFSET_PERSIST_INTERVAL_DEFAULT_MS),
            lock_renew_interval: ms(L::CONSUMER_LOCK_RENEW_INTERVAL_DEFAULT_MS),
            reconsume_local_delay: ms(L::CONSUMER_RECONSUME_LOCAL_DELAY_DEFAULT_MS),
            await_termination_when_shutdown: ms(L::SHUTDOWN_DRAIN_MAX_MS),
            listener: None,
        }
    }

    // namesrv_addr(s), credentials, instance_name, client_ip, route_poll_interval, enable_msg_trace,
    // customized_trace_topic: the options every client shares.
    client_config_setters!(client);

    // subscribe, subscribe_selector, message_model, consume_from, allocate_strategy, pull_batch_size,
    // pull_threshold_for_queue, rpc_timeout, heartbeat_interval, rebalance_interval, broker_suspend_max,
    // pull_timeout_when_suspend, pull_delay_when_exception, offset_store_dir: shared with the other consumer.
    consumer_config_setters!(consumer, client);

    /// Cached body bytes per queue before pulls pause (`pullThresholdSizeForQueue`, 100 MiB).
    pub fn pull_threshold_for_queue_bytes(mut self, n: u64) -> Self {
        self.pull_threshold_for_queue_bytes = n;
        self
    }

    /// Largest offset span cached per queue in concurrent mode (`consumeConcurrentlyMaxSpan`, 2000).
    pub fn consume_concurrently_max_span(mut self, n: i64) -> Self {
        self.consume_concurrently_max_span = n;
        self
    }

    /// Listener calls at once (`consumeThreadMax`, 20).
    pub fn consume_threads(mut self, n: usize) -> Self {
        self.consume_threads = n;
        self
    }

    /// Messages per listener call (`consumeMessageBatchMaxSize`, 1).
    pub fn consume_message_batch_max_size(mut self, n: usize) -> Self {
        self.consume_message_batch_max_size = n;
        self
    }

    /// Redeliveries before the DLQ (`maxReconsumeTimes`; -1 = 16 concurrent, unbounded orderly).
    pub fn max_reconsume_times(mut self, n: i32) -> Self {
        self.max_reconsume_times = n;
        self
    }

    /// Pause of an orderly queue after `SuspendCurrentQueueAMoment` (1 s).
    pub fn suspend_current_queue_time(mut self, d: Duration) -> Self {
        self.suspend_current_queue_time = d;
        self
    }

    /// Offset persist period (`persistConsumerOffsetInterval`, 5 s).
    pub fn persist_interval(mut self, d: Duration) -> Self {
        self.persist_interval = d;
        self
    }

    /// Orderly lock renewal period (20 s).
    pub fn lock_renew_interval(mut self, d: Duration) -> Self {
        self.lock_renew_interval = d;
        self
    }

    /// Pause before messages whose send-back failed are consumed again locally (5 s).
    pub fn reconsume_local_delay(mut self, d: Duration) -> Self {
        self.reconsume_local_delay = d;
        self
    }

    /// How long shutdown waits for running listener calls before persisting offsets (5 s; Java 0).
    pub fn await_termination_when_shutdown(mut self, d: Duration) -> Self {
        self.await_termination_when_shutdown = d;
        self
    }

    /// Consume concurrently with `listener`.
    pub fn listener_concurrently(mut self, listener: impl MessageListenerConcurrently) -> Self {
        self.listener = Some(Listener::Concurrently(Arc::new(listener)));
        self
    }

    /// Consume each queue in order with `listener`.
    pub fn listener_orderly(mut self, listener: impl MessageListenerOrderly) -> Self {
        self.listener = Some(Listener::Orderly(Arc::new(listener)));
        self
    }
}
