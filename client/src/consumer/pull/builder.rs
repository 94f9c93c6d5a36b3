//! [`PullConsumerBuilder`]: the lite pull consumer's options and their defaults, which mirror
//! `DefaultLitePullConsumer`; `build` (in `consumer.rs`) checks them and wires the consumer.

use std::time::Duration;

use raftmq_common::limits as L;
use raftmq_common::message::MessageQueue;

use crate::client_config::ClientConfig;
use crate::client_config::client_config_setters;
use crate::consumer::consumer_config::ConsumerConfig;
use crate::consumer::consumer_config::consumer_config_setters;

/// `DefaultLitePullConsumer.pullBatchSize` (10).
pub const LITE_PULL_BATCH_SIZE_DEFAULT_COUNT: u32 = 10;
/// `DefaultLitePullConsumer.brokerSuspendMaxTimeMillis` (20 s).
pub const LITE_PULL_BROKER_SUSPEND_MAX_MS: u64 = 20_000;

/// Builds a [`PullConsumer`](crate::consumer::PullConsumer); options mirror `DefaultLitePullConsumer`.
#[derive(Debug, Clone)]
pub struct PullConsumerBuilder {
    pub(super) consumer: ConsumerConfig,
    pub(super) client: ClientConfig,
    pub(super) assigned: Vec<MessageQueue>,
    pub(super) auto_commit: bool,
    pub(super) auto_commit_interval: Duration,
}

impl PullConsumerBuilder {
    /// A builder for `consumer_group` with RocketMQ's defaults (auto-commit every 5 s).
    pub fn new(consumer_group: impl Into<String>) -> Self {
        let ms = Duration::from_millis;
        PullConsumerBuilder {
            consumer: ConsumerConfig::new(
                consumer_group.into(),
                LITE_PULL_BATCH_SIZE_DEFAULT_COUNT,
                ms(LITE_PULL_BROKER_SUSPEND_MAX_MS),
            ),
            client: ClientConfig::default(),
            assigned: Vec::new(),
            auto_commit: true,
            auto_commit_interval: ms(L::CONSUMER_OFFSET_PERSIST_INTERVAL_DEFAULT_MS),
        }
    }

    // namesrv_addr(s), credentials, instance_name, client_ip, route_poll_interval, enable_msg_trace,
    // customized_trace_topic: the options every client shares.
    client_config_setters!(client);

    // subscribe, subscribe_selector, message_model, consume_from, allocate_strategy, pull_batch_size,
    // pull_threshold_for_queue, rpc_timeout, heartbeat_interval, rebalance_interval, broker_suspend_max,
    // pull_timeout_when_suspend, pull_delay_when_exception, offset_store_dir: shared with the other consumer.
    consumer_config_setters!(consumer, client);

    /// Reads exactly `queues`, no rebalance (`assign`); exclusive with `subscribe`.
    pub fn assign(mut self, queues: impl IntoIterator<Item = MessageQueue>) -> Self {
        self.assigned.extend(queues);
        self
    }

    /// Commit polled offsets automatically from `poll` (default true).
    pub fn auto_commit(mut self, on: bool) -> Self {
        self.auto_commit = on;
        self
    }

    /// Auto-commit period (5 s).
    pub fn auto_commit_interval(mut self, d: Duration) -> Self {
        self.auto_commit_interval = d;
        self
    }
}
