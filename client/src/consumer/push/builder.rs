//! [`PushConsumerBuilder`]: the push consumer's options and their defaults, which mirror
//! `DefaultMQPushConsumer`; `build` (in `consumer.rs`) checks them and wires the consumer.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use raftmq_common::limits as L;
use raftmq_common::protocol::body::heartbeat::MessageModel;

use crate::client_config::ClientConfig;
use crate::client_config::client_config_setters;
use crate::consumer::listener::MessageListenerConcurrently;
use crate::consumer::listener::MessageListenerOrderly;
use crate::consumer::offset_store::ConsumeFrom;
use crate::consumer::rebalance::AllocateStrategy;
use crate::consumer::subscription::MessageSelector;

#[derive(Clone)]
pub(super) enum Listener {
    Concurrently(Arc<dyn MessageListenerConcurrently>),
    Orderly(Arc<dyn MessageListenerOrderly>),
}

/// Builds a [`PushConsumer`](crate::consumer::PushConsumer); options and defaults mirror `DefaultMQPushConsumer`.
#[derive(Clone)]
pub struct PushConsumerBuilder {
    pub(super) consumer_group: String,
    pub(super) client: ClientConfig,
    pub(super) subscriptions: Vec<(String, MessageSelector)>,
    pub(super) message_model: MessageModel,
    pub(super) consume_from: ConsumeFrom,
    pub(super) allocate_strategy: AllocateStrategy,
    pub(super) pull_batch_size: u32,
    pub(super) pull_threshold_for_queue: u64,
    pub(super) pull_threshold_for_queue_bytes: u64,
    pub(super) consume_concurrently_max_span: i64,
    pub(super) consume_threads: usize,
    pub(super) consume_message_batch_max_size: usize,
    pub(super) max_reconsume_times: i32,
    pub(super) suspend_current_queue_time: Duration,
    pub(super) rpc_timeout: Duration,
    pub(super) heartbeat_interval: Duration,
    pub(super) rebalance_interval: Duration,
    pub(super) persist_interval: Duration,
    pub(super) lock_renew_interval: Duration,
    pub(super) broker_suspend_max: Duration,
    pub(super) pull_timeout_when_suspend: Duration,
    pub(super) pull_delay_when_exception: Duration,
    pub(super) reconsume_local_delay: Duration,
    pub(super) await_termination_when_shutdown: Duration,
    pub(super) offset_store_dir: PathBuf,
    pub(super) listener: Option<Listener>,
}

impl std::fmt::Debug for PushConsumerBuilder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PushConsumerBuilder")
            .field("consumer_group", &self.consumer_group)
            .field("subscriptions", &self.subscriptions)
            .field("message_model", &self.message_model)
            .finish_non_exhaustive()
    }
}

fn ms(v: u64) -> Duration {
    Duration::from_millis(v)
}

impl PushConsumerBuilder {
    /// A builder for `consumer_group` with RocketMQ's defaults.
    pub fn new(consumer_group: impl Into<String>) -> Self {
        let home = std::env::var_os("HOME").map(PathBuf::from).unwrap_or_else(std::env::temp_dir);
        PushConsumerBuilder {
            consumer_group: consumer_group.into(),
            client: ClientConfig::default(),
            subscriptions: Vec::new(),
            message_model: MessageModel::Clustering,
            consume_from: ConsumeFrom::LastOffset,
            allocate_strategy: AllocateStrategy::Averagely,
            pull_batch_size: L::CONSUMER_PULL_BATCH_SIZE_DEFAULT_COUNT,
            pull_threshold_for_queue: L::CONSUMER_PULL_THRESHOLD_FOR_QUEUE_DEFAULT_COUNT,
            pull_threshold_for_queue_bytes: L::CONSUMER_PULL_THRESHOLD_FOR_QUEUE_DEFAULT_BYTES,
            consume_concurrently_max_span: L::CONSUMER_CONSUME_CONCURRENTLY_MAX_SPAN_DEFAULT_COUNT,
            consume_threads: L::CONSUMER_CONSUME_THREADS_DEFAULT_COUNT,
            consume_message_batch_max_size: 1,
            max_reconsume_times: -1,
            suspend_current_queue_time: Duration::from_secs(1),
            rpc_timeout: ms(L::RPC_TIMEOUT_DEFAULT_MS),
            heartbeat_interval: ms(L::CLIENT_HEARTBEAT_INTERVAL_DEFAULT_MS),
            rebalance_interval: ms(L::CONSUMER_REBALANCE_INTERVAL_DEFAULT_MS),
            persist_interval: ms(L::CONSUMER_OFFSET_PERSIST_INTERVAL_DEFAULT_MS),
            lock_renew_interval: ms(L::CONSUMER_LOCK_RENEW_INTERVAL_DEFAULT_MS),
            broker_suspend_max: ms(L::CONSUMER_BROKER_SUSPEND_MAX_MS),
            pull_timeout_when_suspend: ms(L::CONSUMER_PULL_TIMEOUT_WHEN_SUSPEND_MS),
            pull_delay_when_exception: ms(L::CONSUMER_PULL_DELAY_WHEN_EXCEPTION_MS),
            reconsume_local_delay: ms(L::CONSUMER_RECONSUME_LOCAL_DELAY_DEFAULT_MS),
            await_termination_when_shutdown: ms(L::SHUTDOWN_DRAIN_MAX_MS),
            offset_store_dir: home.join(".rocketmq_offsets"),
            listener: None,
        }
    }

    // namesrv_addr(s), credentials, instance_name, client_ip, route_poll_interval, enable_msg_trace,
    // customized_trace_topic: the options every client shares.
    client_config_setters!(client);

    /// Subscribes `topic` with a tag expression: `"TagA || TagB"` or `"*"`.
    pub fn subscribe(mut self, topic: impl Into<String>, expression: impl Into<String>) -> Self {
        self.subscriptions.push((topic.into(), MessageSelector::Tag(expression.into())));
        self
    }

    /// Subscribes `topic` with a selector: a tag expression or SQL92 over message properties
    /// (`subscribe(topic, MessageSelector)`); the broker must have `enablePropertyFilter = true`.
    pub fn subscribe_selector(mut self, topic: impl Into<String>, selector: MessageSelector) -> Self {
        self.subscriptions.push((topic.into(), selector));
        self
    }

    /// CLUSTERING (default; the group shares the queues) or BROADCASTING (every member reads all).
    pub fn message_model(mut self, model: MessageModel) -> Self {
        self.message_model = model;
        self
    }

    /// Where queues without a stored offset start (default LAST).
    pub fn consume_from(mut self, from: ConsumeFrom) -> Self {
        self.consume_from = from;
        self
    }

    /// Queue allocation among the group's members (default averagely).
    pub fn allocate_strategy(mut self, strategy: AllocateStrategy) -> Self {
        self.allocate_strategy = strategy;
        self
    }

    /// Messages per pull (`pullBatchSize`, 32; 1..=1024).
    pub fn pull_batch_size(mut self, n: u32) -> Self {
        self.pull_batch_size = n;
        self
    }

    /// Cached messages per queue before pulls pause (`pullThresholdForQueue`, 1000).
    pub fn pull_threshold_for_queue(mut self, n: u64) -> Self {
        self.pull_threshold_for_queue = n;
        self
    }

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

    /// Deadline of non-pull broker calls and NameServer calls (3 s).
    pub fn rpc_timeout(mut self, d: Duration) -> Self {
        self.rpc_timeout = d;
        self.client.route_config.rpc_timeout = d;
        self
    }

    /// Heartbeat period (`heartbeatBrokerInterval`, 30 s).
    pub fn heartbeat_interval(mut self, d: Duration) -> Self {
        self.heartbeat_interval = d;
        self
    }

    /// Period of rebalances without a notification (20 s).
    pub fn rebalance_interval(mut self, d: Duration) -> Self {
        self.rebalance_interval = d;
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

    /// Long-poll time asked of the broker (15 s); the pull deadline is `pull_timeout_when_suspend`.
    pub fn broker_suspend_max(mut self, d: Duration) -> Self {
        self.broker_suspend_max = d;
        self
    }

    /// Deadline of a suspended pull (30 s).
    pub fn pull_timeout_when_suspend(mut self, d: Duration) -> Self {
        self.pull_timeout_when_suspend = d;
        self
    }

    /// Pause after a failed pull (3 s).
    pub fn pull_delay_when_exception(mut self, d: Duration) -> Self {
        self.pull_delay_when_exception = d;
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

    /// Directory of broadcasting offset files (`~/.rocketmq_offsets`).
    pub fn offset_store_dir(mut self, dir: impl Into<PathBuf>) -> Self {
        self.offset_store_dir = dir.into();
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
