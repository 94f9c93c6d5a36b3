//! [`ConsumerConfig`]: the options the push and the lite pull consumer share (group, subscriptions,
//! message model, where to start, allocation, pull sizes and timings, offset directory), the checks
//! and wiring both builders do with them, the HEART_BEAT and PULL_MESSAGE fields they fill from
//! them, and [`consumer_config_setters`], their builder setters.
//!
//! Invariant: plain data, read when a consumer is built; the two consumers differ only in their
//! defaults (`pullBatchSize` 32 / 10, `brokerSuspendMaxTimeMillis` 15 s / 20 s), given to [`ConsumerConfig::new`].

use std::collections::BTreeMap;
use std::net::IpAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use raftmq_common::limits as L;
use raftmq_common::message::MessageQueue;
use raftmq_common::message::validate::validate_consumer_group;
use raftmq_common::protocol::body::heartbeat::ConsumeType;
use raftmq_common::protocol::body::heartbeat::ConsumerData;
use raftmq_common::protocol::body::heartbeat::HeartbeatData;
use raftmq_common::protocol::body::heartbeat::MessageModel;
use raftmq_common::protocol::body::heartbeat::SubscriptionData;
use raftmq_common::protocol::header::pull::PullMessageRequestHeader;

use crate::client_config::ClientConfig;
use crate::consumer::client_instance::ClientInstance;
use crate::consumer::offset_store::ConsumeFrom;
use crate::consumer::offset_store::LocalFileOffsetStore;
use crate::consumer::offset_store::OffsetStore;
use crate::consumer::offset_store::RemoteBrokerOffsetStore;
use crate::consumer::rebalance::AllocateStrategy;
use crate::consumer::subscription::MessageSelector;
use crate::error::ClientError;
use crate::error::Result;

/// The options both consumers share; see the module header.
#[derive(Debug, Clone)]
pub(crate) struct ConsumerConfig {
    pub(crate) consumer_group: String,
    pub(crate) subscriptions: Vec<(String, MessageSelector)>,
    pub(crate) message_model: MessageModel,
    pub(crate) consume_from: ConsumeFrom,
    pub(crate) allocate_strategy: AllocateStrategy,
    pub(crate) pull_batch_size: u32,
    pub(crate) pull_threshold_for_queue: u64,
    pub(crate) rpc_timeout: Duration,
    pub(crate) heartbeat_interval: Duration,
    pub(crate) rebalance_interval: Duration,
    pub(crate) broker_suspend_max: Duration,
    pub(crate) pull_timeout_when_suspend: Duration,
    pub(crate) pull_delay_when_exception: Duration,
    pub(crate) offset_store_dir: PathBuf,
}

impl ConsumerConfig {
    /// RocketMQ's defaults for `consumer_group`, with the consumer kind's batch size and long-poll time.
    pub(crate) fn new(consumer_group: String, pull_batch_size: u32, broker_suspend_max: Duration) -> Self {
        let home = std::env::var_os("HOME").map(PathBuf::from).unwrap_or_else(std::env::temp_dir);
        let ms = Duration::from_millis;
        ConsumerConfig {
            consumer_group,
            subscriptions: Vec::new(),
            message_model: MessageModel::Clustering,
            consume_from: ConsumeFrom::LastOffset,
            allocate_strategy: AllocateStrategy::Averagely,
            pull_batch_size,
            pull_threshold_for_queue: L::CONSUMER_PULL_THRESHOLD_FOR_QUEUE_DEFAULT_COUNT,
            rpc_timeout: ms(L::RPC_TIMEOUT_DEFAULT_MS),
            heartbeat_interval: ms(L::CLIENT_HEARTBEAT_INTERVAL_DEFAULT_MS),
            rebalance_interval: ms(L::CONSUMER_REBALANCE_INTERVAL_DEFAULT_MS),
            broker_suspend_max,
            pull_timeout_when_suspend: ms(L::CONSUMER_PULL_TIMEOUT_WHEN_SUSPEND_MS),
            pull_delay_when_exception: ms(L::CONSUMER_PULL_DELAY_WHEN_EXCEPTION_MS),
            offset_store_dir: home.join(".rocketmq_offsets"),
        }
    }

    /// The group check both builders make first: a group its broker could not keep a `%RETRY%`
    /// topic for fails here, not at every pull.
    pub(crate) fn check_group(&self, op: &'static str) -> Result<()> {
        validate_consumer_group(&self.consumer_group).map_err(|e| ClientError::invalid_argument(op, e.to_string()))
    }

    /// The SQL92 subscriptions parse, and `pullBatchSize` is in 1..=1024.
    pub(crate) fn check_selectors_and_batch(&self, op: &'static str) -> Result<()> {
        for (topic, selector) in &self.subscriptions {
            selector.validate().map_err(|e| {
                ClientError::invalid_argument(op, format!("the SQL92 subscription of {topic} is invalid: {e}"))
            })?;
        }
        if !(1..=L::CONSUMER_PULL_BATCH_SIZE_MAX_COUNT).contains(&self.pull_batch_size) {
            return Err(ClientError::invalid_argument(op, "pullBatchSize out of range [1, 1024]".to_owned()));
        }
        Ok(())
    }

    /// The consumer's [`ClientInstance`], id `ip@instance`, asking the NameServers of `client`.
    pub(crate) fn client_instance(
        &self,
        client: &ClientConfig,
        ip: IpAddr,
        instance: &str,
    ) -> Result<Arc<ClientInstance>> {
        Ok(Arc::new(ClientInstance::new(
            &self.consumer_group,
            format!("{ip}@{instance}"),
            client.namesrv_addrs.clone(),
            client.route_config.clone(),
            self.rpc_timeout,
            client.credentials.clone(),
            client.client_tls("buildConsumer")?,
        )?))
    }

    /// The subscribed topics' `SubscriptionData`, all of `version`.
    pub(crate) fn subscription_table(&self, version: i64) -> BTreeMap<String, SubscriptionData> {
        let mut table = BTreeMap::new();
        for (topic, selector) in &self.subscriptions {
            table.insert(topic.clone(), selector.subscription_data(topic, version));
        }
        table
    }

    /// The HEART_BEAT body of a consumer with id `client_id` consuming `consume_type` with
    /// `subscriptions`.
    pub(crate) fn heartbeat_data<'a>(
        &self,
        client_id: &str,
        consume_type: ConsumeType,
        subscriptions: impl Iterator<Item = &'a SubscriptionData>,
    ) -> HeartbeatData {
        HeartbeatData {
            client_id: client_id.to_owned(),
            consumer_data_set: vec![ConsumerData {
                consume_from_where: self.consume_from.as_consume_from_where(),
                consume_type,
                group_name: self.consumer_group.clone(),
                message_model: self.message_model,
                subscription_data_set: subscriptions.cloned().collect(),
                unit_mode: false,
            }],
            producer_data_set: Vec::new(),
        }
    }

    /// A PULL_MESSAGE header for `mq` from `offset` under `sub`, with this consumer's group, batch
    /// size and long-poll time; the flags, commit offset and subscription text are the caller's.
    pub(crate) fn pull_header(
        &self,
        mq: &MessageQueue,
        offset: i64,
        sub: &SubscriptionData,
        sys_flag: i32,
        commit_offset: i64,
        subscription: Option<String>,
    ) -> PullMessageRequestHeader {
        PullMessageRequestHeader {
            consumer_group: self.consumer_group.clone(),
            topic: mq.topic.clone(),
            queue_id: mq.queue_id,
            queue_offset: offset,
            max_msg_nums: i32::try_from(self.pull_batch_size).unwrap_or(i32::MAX),
            sys_flag,
            commit_offset,
            suspend_timeout_millis: i64::try_from(self.broker_suspend_max.as_millis()).unwrap_or(i64::MAX),
            subscription,
            sub_version: sub.sub_version,
            expression_type: Some(sub.expression_type.clone()),
            bname: None,
        }
    }

    /// Where offsets are kept: the brokers in clustering, a local file in broadcasting.
    pub(crate) fn offset_store(&self, client: &Arc<ClientInstance>) -> OffsetStore {
        match self.message_model {
            MessageModel::Clustering => OffsetStore::Remote(RemoteBrokerOffsetStore::new(client.clone())),
            MessageModel::Broadcasting => OffsetStore::Local(LocalFileOffsetStore::new(
                &self.offset_store_dir,
                &client.client_id,
                &self.consumer_group,
            )),
        }
    }
}

/// The builder setters of the [`ConsumerConfig`] in field `$consumer` (and of the NameServer
/// deadline in the [`ClientConfig`] in `$client`): expanded inside both consumer builders' `impl`.
macro_rules! consumer_config_setters {
    ($consumer:ident, $client:ident) => {
        /// Subscribes `topic` with a tag expression: `"TagA || TagB"` or `"*"`; the group
        /// rebalances its queues.
        pub fn subscribe(mut self, topic: impl Into<String>, expression: impl Into<String>) -> Self {
            let selector = $crate::consumer::subscription::MessageSelector::Tag(expression.into());
            self.$consumer.subscriptions.push((topic.into(), selector));
            self
        }

        /// Subscribes `topic` with a selector: a tag expression or SQL92 over message properties
        /// (`subscribe(topic, MessageSelector)`); the broker must have `enablePropertyFilter = true`.
        pub fn subscribe_selector(
            mut self,
            topic: impl Into<String>,
            selector: $crate::consumer::subscription::MessageSelector,
        ) -> Self {
            self.$consumer.subscriptions.push((topic.into(), selector));
            self
        }

        /// CLUSTERING (default; the group shares the queues) or BROADCASTING (every member reads all).
        pub fn message_model(mut self, model: ::raftmq_common::protocol::body::heartbeat::MessageModel) -> Self {
            self.$consumer.message_model = model;
            self
        }

        /// Where queues without a stored offset start (default LAST).
        pub fn consume_from(mut self, from: $crate::consumer::offset_store::ConsumeFrom) -> Self {
            self.$consumer.consume_from = from;
            self
        }

        /// Queue allocation among the group's members, in subscribe mode (default averagely).
        pub fn allocate_strategy(mut self, strategy: $crate::consumer::rebalance::AllocateStrategy) -> Self {
            self.$consumer.allocate_strategy = strategy;
            self
        }

        /// Messages per pull (`pullBatchSize`: 32 push, 10 lite pull; 1..=1024).
        pub fn pull_batch_size(mut self, n: u32) -> Self {
            self.$consumer.pull_batch_size = n;
            self
        }

        /// Messages cached per queue (push: not yet consumed; lite pull: fetched, not yet polled)
        /// before pulls pause (`pullThresholdForQueue`, 1000).
        pub fn pull_threshold_for_queue(mut self, n: u64) -> Self {
            self.$consumer.pull_threshold_for_queue = n;
            self
        }

        /// Deadline of non-pull broker calls and NameServer calls (3 s).
        pub fn rpc_timeout(mut self, d: ::std::time::Duration) -> Self {
            self.$consumer.rpc_timeout = d;
            self.$client.route_config.rpc_timeout = d;
            self
        }

        /// Heartbeat period (`heartbeatBrokerInterval`, 30 s).
        pub fn heartbeat_interval(mut self, d: ::std::time::Duration) -> Self {
            self.$consumer.heartbeat_interval = d;
            self
        }

        /// Period of rebalances without a notification (20 s).
        pub fn rebalance_interval(mut self, d: ::std::time::Duration) -> Self {
            self.$consumer.rebalance_interval = d;
            self
        }

        /// Long-poll time asked of the broker (push 15 s, lite pull 20 s); the pull deadline is
        /// `pull_timeout_when_suspend`.
        pub fn broker_suspend_max(mut self, d: ::std::time::Duration) -> Self {
            self.$consumer.broker_suspend_max = d;
            self
        }

        /// Deadline of a suspended pull (30 s).
        pub fn pull_timeout_when_suspend(mut self, d: ::std::time::Duration) -> Self {
            self.$consumer.pull_timeout_when_suspend = d;
            self
        }

        /// Pause after a failed pull (3 s).
        pub fn pull_delay_when_exception(mut self, d: ::std::time::Duration) -> Self {
            self.$consumer.pull_delay_when_exception = d;
            self
        }

        /// Directory of broadcasting offset files (`~/.rocketmq_offsets`).
        pub fn offset_store_dir(mut self, dir: impl Into<::std::path::PathBuf>) -> Self {
            self.$consumer.offset_store_dir = dir.into();
            self
        }
    };
}

pub(crate) use consumer_config_setters;
