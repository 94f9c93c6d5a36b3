//! [`DefaultPullConsumer`]: RocketMQ's `DefaultMQPullConsumer` — the caller chooses the queue and
//! the offset of every pull and keeps its own progress; the consumer only routes, pulls, decodes and
//! stores or reads offsets on request.
//!
//! ```text
//! fetch_subscribe_message_queues(topic) ─▶ the topic's readable queues (route)
//! pull(mq, expr, offset, max)                 ─▶ one PULL_MESSAGE, no broker wait
//! pull_block_if_not_found(mq, expr, offset, max) ─▶ one PULL_MESSAGE the broker holds until a
//!                                                  message arrives or `broker_suspend_max` passes
//! update_consume_offset(mq, offset)           ─▶ UPDATE_CONSUMER_OFFSET at the group's leader
//! fetch_consume_offset(mq)                    ─▶ QUERY_CONSUMER_OFFSET (-1: none stored)
//! ```
//!
//! Each pull carries its subscription in the header (`FLAG_SUBSCRIPTION`), so the broker needs no
//! heartbeat of the group, and never commits an offset (`FLAG_COMMIT_OFFSET` off): offsets move
//! only through [`DefaultPullConsumer::update_consume_offset`]. Java keeps an updated offset in
//! memory and persists it every 5 s; here it is stored when asked, so what the call answered is
//! what the broker holds. A pull that fails because the group's leader moved refreshes the route,
//! as every other consumer does; the caller retries.

use std::collections::BTreeSet;
use std::sync::Arc;

use raftmq_common::message::MessageQueue;
use raftmq_common::protocol::header::pull::pull_sys_flag;

use crate::client_config::ClientConfig;
use crate::client_config::client_config_setters;
use crate::client_config::consumer_instance_name;
use crate::consumer::client_instance::ClientInstance;
use crate::consumer::consumer_config::ConsumerConfig;
use crate::consumer::consumer_config::consumer_config_setters;
use crate::consumer::pull_api::PullResult;
use crate::consumer::pull_api::process_pull_response;
use crate::consumer::subscription::build_subscription_data;
use crate::error::ClientError;
use crate::error::Result;
use raftmq_common::limits as L;
use raftmq_common::protocol::body::route::MASTER_ID;

/// Builds a [`DefaultPullConsumer`] (`DefaultMQPullConsumer`'s options).
#[derive(Debug, Clone)]
pub struct DefaultPullConsumerBuilder {
    consumer: ConsumerConfig,
    client: ClientConfig,
}

impl DefaultPullConsumerBuilder {
    /// A builder for `consumer_group` with RocketMQ's defaults.
    pub fn new(consumer_group: impl Into<String>) -> Self {
        DefaultPullConsumerBuilder {
            consumer: ConsumerConfig::new(
                consumer_group.into(),
                L::CONSUMER_PULL_BATCH_SIZE_DEFAULT_COUNT,
                std::time::Duration::from_millis(L::CONSUMER_BROKER_SUSPEND_MAX_MS),
            ),
            client: ClientConfig::default(),
        }
    }

    // namesrv_addr(s), credentials, instance_name, client_ip, route_poll_interval, ...
    client_config_setters!(client);

    // rpc_timeout, broker_suspend_max, pull_timeout_when_suspend, ...: shared with the other consumers
    // (the subscription and rebalance options do not apply: the caller names every queue).
    consumer_config_setters!(consumer, client);

    /// Checks the options and builds the consumer.
    pub fn build(self) -> Result<DefaultPullConsumer> {
        const OP: &str = "buildDefaultPullConsumer";
        self.consumer.check_group(OP)?;
        let instance = self.client.instance_name_or(consumer_instance_name);
        let client = self.consumer.client_instance(&self.client, self.client.ip(), &instance)?;
        Ok(DefaultPullConsumer { client, config: Arc::new(self) })
    }
}

/// A pull consumer driven by queue and offset; clones share it.
#[derive(Clone)]
pub struct DefaultPullConsumer {
    client: Arc<ClientInstance>,
    config: Arc<DefaultPullConsumerBuilder>,
}

impl std::fmt::Debug for DefaultPullConsumer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DefaultPullConsumer")
            .field("consumer_group", &self.config.consumer.consumer_group)
            .field("client_id", &self.client.client_id)
            .finish()
    }
}

impl DefaultPullConsumer {
    /// A [`DefaultPullConsumerBuilder`] for `consumer_group`.
    pub fn builder(consumer_group: impl Into<String>) -> DefaultPullConsumerBuilder {
        DefaultPullConsumerBuilder::new(consumer_group)
    }

    /// `ip@instanceName`.
    pub fn client_id(&self) -> &str {
        &self.client.client_id
    }

    /// `fetchSubscribeMessageQueues`: the readable queues of `topic`.
    pub async fn fetch_subscribe_message_queues(&self, topic: &str) -> Result<BTreeSet<MessageQueue>> {
        self.client.subscribe_queues(topic).await
    }

    /// `pull(mq, subExpression, offset, maxNums)`: at most `max_nums` messages of `mq` from
    /// `offset` that match `sub_expression` (`*`, or tags `a || b`); answers at once.
    pub async fn pull(
        &self,
        mq: &MessageQueue,
        sub_expression: &str,
        offset: i64,
        max_nums: i32,
    ) -> Result<PullResult> {
        self.pull_once(mq, sub_expression, offset, max_nums, false).await
    }

    /// `pullBlockIfNotFound`: as [`Self::pull`], but the broker holds the pull until a message
    /// arrives or `broker_suspend_max` passes (then NO_NEW_MSG).
    pub async fn pull_block_if_not_found(
        &self,
        mq: &MessageQueue,
        sub_expression: &str,
        offset: i64,
        max_nums: i32,
    ) -> Result<PullResult> {
        self.pull_once(mq, sub_expression, offset, max_nums, true).await
    }

    async fn pull_once(
        &self,
        mq: &MessageQueue,
        sub_expression: &str,
        offset: i64,
        max_nums: i32,
        block: bool,
    ) -> Result<PullResult> {
        const OP: &str = "pullMessage";
        if offset < 0 || max_nums <= 0 {
            return Err(ClientError::invalid_argument(
                OP,
                format!("offset {offset} and maxNums {max_nums} must be ≥ 0 and > 0"),
            ));
        }
        let sub = build_subscription_data(&mq.topic, sub_expression, 0);
        let found = self.client.broker_addr(OP, mq, MASTER_ID, false).await?;
        let sys_flag = pull_sys_flag::build(false, block, true, false, false);
        let mut header = self.config.consumer.pull_header(mq, offset, &sub, sys_flag, 0, Some(sub.sub_string.clone()));
        header.max_msg_nums = max_nums.min(L::CONSUMER_PULL_BATCH_SIZE_MAX_COUNT as i32);
        if !block {
            header.suspend_timeout_millis = 0;
        }
        let timeout =
            if block { self.config.consumer.pull_timeout_when_suspend } else { self.config.consumer.rpc_timeout };
        let response = self.client.pull(mq, &found.addr, &header, timeout).await?;
        match process_pull_response(&response, &sub) {
            Ok(result) => Ok(result),
            Err(e) => {
                let e = e.with_context("addr", &found.addr);
                self.client.failover_after(mq, &found.addr, &e).await;
                Err(e)
            }
        }
    }

    /// `updateConsumeOffset`: stores `offset` (the next one to consume) as the group's offset of `mq`.
    pub async fn update_consume_offset(&self, mq: &MessageQueue, offset: i64) -> Result<()> {
        if offset < 0 {
            return Err(ClientError::invalid_argument("updateConsumeOffset", format!("offset {offset} < 0")));
        }
        self.client.update_consumer_offset(mq, offset).await
    }

    /// `fetchConsumeOffset(mq, fromStore=true)`: the group's stored offset of `mq`, -1 when none is.
    pub async fn fetch_consume_offset(&self, mq: &MessageQueue) -> Result<i64> {
        Ok(self.client.query_consumer_offset(mq).await?.unwrap_or(-1))
    }

    /// Closes the connections (nothing is kept to persist: offsets were stored when updated).
    pub async fn shutdown(&self) {
        self.client.routes.stop_polling();
        self.client.remoting.close().await;
    }
}
