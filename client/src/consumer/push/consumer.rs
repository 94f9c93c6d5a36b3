//! [`PushConsumer`], the facade: built from a [`PushConsumerBuilder`] (`build` wires the parts),
//! started (routes, heartbeat, first rebalance, timers) and shut down in the order the module
//! header of `push` gives; clones share one [`PushInner`].

use std::collections::BTreeSet;
use std::sync::Arc;
use std::sync::Mutex;
use std::sync::atomic::AtomicU8;
use std::sync::atomic::Ordering;
use std::time::Duration;

use raftmq_common::limits as L;
use raftmq_common::message::MessageQueue;
use raftmq_common::message::validate::retry_topic;
use raftmq_common::protocol::body::consume_directly::CmResult;
use raftmq_common::protocol::body::consume_directly::ConsumeMessageDirectlyResult;
use raftmq_common::protocol::body::heartbeat::MessageModel;
use tokio::sync::watch;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::client_config::consumer_instance_name;
use crate::clock::now_ms;
use crate::consumer::consume_pool::ConsumePool;
use crate::consumer::offset_store::OffsetStore;
use crate::consumer::push::builder::PushConsumerBuilder;
use crate::consumer::push::inner::PushInner;
use crate::consumer::push::stats::ConsumerStats;
use crate::consumer::push::stats::Stats;
use crate::consumer::send_back::CLIENT_INNER_PRODUCER_GROUP;
use crate::consumer::subscription::build_subscription_data;
use crate::consumer::topic_rates::TopicRates;
use crate::error::ClientError;
use crate::error::ErrorKind;
use crate::error::Result;
use crate::producer::Producer;
use crate::producer::trace_dispatcher;
use crate::trace::TraceRole;

const STATE_CREATED: u8 = 0;
const STATE_RUNNING: u8 = 1;
const STATE_SHUTDOWN: u8 = 2;

/// A push consumer; clones share it.
#[derive(Clone)]
pub struct PushConsumer {
    inner: Arc<PushInner>,
}

impl std::fmt::Debug for PushConsumer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PushConsumer")
            .field("consumer_group", &self.inner.config.consumer.consumer_group)
            .field("client_id", &self.inner.client.client_id)
            .finish()
    }
}

impl PushConsumerBuilder {
    /// Checks the options and builds the consumer (not started).
    pub fn build(self) -> Result<PushConsumer> {
        const OP: &str = "buildPushConsumer";
        let invalid = |m: &str| ClientError::invalid_argument(OP, m.to_owned());
        self.consumer.check_group(OP)?;
        let listener = self.listener.clone().ok_or_else(|| invalid("messageListener is null"))?;
        if self.consumer.subscriptions.is_empty() {
            return Err(invalid("subscription is empty"));
        }
        self.consumer.check_selectors_and_batch(OP)?;
        if !(1..=L::CONSUMER_CONSUME_THREADS_MAX_COUNT).contains(&self.consume_threads) {
            return Err(invalid("consumeThreadMax out of range [1, 1000]"));
        }
        if !(1..=1024).contains(&self.consume_message_batch_max_size) {
            return Err(invalid("consumeMessageBatchMaxSize out of range [1, 1024]"));
        }
        if self.consumer.pull_threshold_for_queue == 0 || self.pull_threshold_for_queue_bytes == 0 {
            return Err(invalid("pull thresholds must be positive"));
        }
        let ip = self.client.ip();
        let instance = self.client.instance_name_or(consumer_instance_name);
        let client = self.consumer.client_instance(&self.client, ip, &instance)?;
        let version = now_ms();
        let mut subscriptions = self.consumer.subscription_table(version);
        let group_retry_topic = retry_topic(&self.consumer.consumer_group);
        if self.consumer.message_model == MessageModel::Clustering {
            // Redelivered messages of the group come back on its retry topic (`copySubscription`).
            subscriptions.insert(group_retry_topic.clone(), build_subscription_data(&group_retry_topic, "*", version));
        }
        // Java shares one client instance between the consumer and its inner producer; ours is a
        // producer of its own, started with the consumer and used only when a send-back fails.
        let retry_producer = Producer::builder(CLIENT_INNER_PRODUCER_GROUP)
            .namesrv_addrs(self.client.namesrv_addrs.clone())
            .instance_name(instance.clone())
            .client_ip(ip)
            .route_poll_interval(self.client.route_config.poll_interval)
            .credentials(self.client.owned_credentials())
            .tls_of(&self.client)
            .build()?;
        let trace =
            trace_dispatcher(&self.client, "buildPushConsumer", &self.consumer.consumer_group, TraceRole::Consume, ip)?;
        let offset_store = self.consumer.offset_store(&client);
        let inner = PushInner {
            consume_pool: ConsumePool::new(
                &format!("ConsumeMessageThread_{}", self.consumer.consumer_group),
                self.consume_threads,
            ),
            retry_topic: group_retry_topic,
            client,
            retry_producer,
            offset_store,
            subscriptions,
            listener,
            process_queues: Mutex::default(),
            mq_locks: Mutex::default(),
            shutdown: CancellationToken::new(),
            tasks: TaskTracker::new(),
            consume_tasks: TaskTracker::new(),
            state: AtomicU8::new(STATE_CREATED),
            assignment: watch::channel(BTreeSet::new()).0,
            heartbeated: Mutex::default(),
            stats: Stats::default(),
            epoch: Instant::now(),
            started_at_ms: std::sync::atomic::AtomicI64::new(0),
            topic_stats: TopicRates::default(),
            trace,
            config: self,
        };
        let inner = Arc::new(inner);
        let weak = Arc::downgrade(&inner);
        inner.client.set_running_info(move || weak.upgrade().map(|i| i.running_info()).unwrap_or_default());
        let weak = Arc::downgrade(&inner);
        inner.client.set_direct_consume(move |msg, broker_name| {
            let inner = weak.upgrade();
            Box::pin(async move {
                match inner {
                    Some(i) => i.consume_directly(msg, broker_name).await,
                    None => ConsumeMessageDirectlyResult {
                        consume_result: Some(CmResult::CrThrowException),
                        remark: Some("the consumer is gone".into()),
                        ..ConsumeMessageDirectlyResult::default()
                    },
                }
            })
        });
        Ok(PushConsumer { inner })
    }
}

impl PushConsumer {
    /// A [`PushConsumerBuilder`] for `consumer_group`.
    pub fn builder(consumer_group: impl Into<String>) -> PushConsumerBuilder {
        PushConsumerBuilder::new(consumer_group)
    }

    /// `ip@instanceName`.
    pub fn client_id(&self) -> &str {
        &self.inner.client.client_id
    }

    /// The consumer group.
    pub fn consumer_group(&self) -> &str {
        &self.inner.config.consumer.consumer_group
    }

    /// The queues this consumer reads now.
    pub fn assigned_queues(&self) -> BTreeSet<MessageQueue> {
        self.inner.assignment.borrow().clone()
    }

    /// A receiver of the assignment, updated after every rebalance (to wait for a change).
    pub fn assignment_watch(&self) -> watch::Receiver<BTreeSet<MessageQueue>> {
        self.inner.assignment.subscribe()
    }

    /// The consumer's offset of `mq` in memory (next message to consume).
    pub fn committed_offset(&self, mq: &MessageQueue) -> Option<i64> {
        self.inner.offset_store.offsets().get(mq).copied()
    }

    /// Counters.
    pub fn stats(&self) -> ConsumerStats {
        let s = &self.inner.stats;
        ConsumerStats {
            pulls: s.pulls.load(Ordering::Relaxed),
            flow_control_times: s.flow_control_times.load(Ordering::Relaxed),
            consume_ok: s.consume_ok.load(Ordering::Relaxed),
            consume_failed: s.consume_failed.load(Ordering::Relaxed),
            rebalances: s.rebalances.load(Ordering::Relaxed),
        }
    }

    /// Asks for a rebalance now (`rebalanceImmediately`).
    pub fn rebalance_now(&self) {
        self.inner.client.rebalance_signal.notify_one();
    }

    /// Starts: routes, heartbeat, first rebalance, then the timers. Fails after [`Self::shutdown`].
    pub async fn start(&self) -> Result<()> {
        let inner = &self.inner;
        match inner.state.compare_exchange(STATE_CREATED, STATE_RUNNING, Ordering::AcqRel, Ordering::Acquire) {
            Ok(_) => {}
            Err(STATE_RUNNING) => return Ok(()),
            Err(_) => return Err(ClientError::new(ErrorKind::Shutdown, "start", "the consumer was shut down")),
        }
        inner.started_at_ms.store(now_ms(), Ordering::Release);
        if let OffsetStore::Local(store) = &inner.offset_store
            && let Err(e) = store.load()
        {
            inner.state.store(STATE_SHUTDOWN, Ordering::Release);
            return Err(e);
        }
        if let Err(e) = inner.retry_producer.start().await {
            inner.state.store(STATE_SHUTDOWN, Ordering::Release);
            return Err(e);
        }
        if let Some(trace) = &inner.trace {
            trace.start();
        }
        inner.client.routes.start_polling();
        for topic in inner.subscriptions.keys() {
            if let Err(e) = inner.client.routes.update_route(topic).await {
                tracing::warn!(topic, error = %e, "no route for a subscribed topic yet");
            }
        }
        if let Err(e) = inner.client.check_client_in_broker(&inner.subscriptions).await {
            inner.client.routes.stop_polling();
            inner.retry_producer.shutdown().await;
            if let Some(trace) = &inner.trace {
                trace.shutdown().await;
            }
            inner.state.store(STATE_SHUTDOWN, Ordering::Release);
            return Err(e);
        }
        inner.send_heartbeat().await;
        self.spawn_timers();
        tracing::info!(group = %self.consumer_group(), client_id = %self.client_id(), "push consumer started");
        Ok(())
    }

    fn spawn_timers(&self) {
        let inner = &self.inner;
        let me = inner.clone();
        inner.tasks.spawn(async move {
            loop {
                me.apply_offset_resets().await;
                me.do_rebalance().await;
                tokio::select! {
                    biased;
                    _ = me.shutdown.cancelled() => return,
                    _ = me.client.rebalance_signal.notified() => {}
                    _ = tokio::time::sleep(me.config.consumer.rebalance_interval) => {}
                }
            }
        });
        let me = inner.clone();
        every(inner, inner.config.consumer.heartbeat_interval, move || {
            let me = me.clone();
            async move { me.send_heartbeat().await }
        });
        let me = inner.clone();
        every(inner, inner.config.persist_interval, move || {
            let me = me.clone();
            async move { me.persist_all().await }
        });
        if inner.is_orderly() && inner.config.consumer.message_model == MessageModel::Clustering {
            let me = inner.clone();
            every(inner, inner.config.lock_renew_interval, move || {
                let me = me.clone();
                async move { me.lock_all().await }
            });
        }
    }

    /// Stops pulling, lets running listener calls finish (bounded), persists offsets, releases
    /// orderly locks, unregisters from every broker and closes connections.
    pub async fn shutdown(&self) {
        let inner = &self.inner;
        if inner.state.swap(STATE_SHUTDOWN, Ordering::AcqRel) != STATE_RUNNING {
            return;
        }
        inner.shutdown.cancel();
        inner.tasks.close();
        inner.consume_tasks.close();
        let bound = inner.config.await_termination_when_shutdown;
        if tokio::time::timeout(bound, inner.consume_tasks.wait()).await.is_err() {
            tracing::warn!("listener calls still running at shutdown; their messages will be redelivered");
        }
        // Idle listener threads exit now; one still in a listener exits when it returns.
        inner.consume_pool.close();
        if tokio::time::timeout(bound, inner.tasks.wait()).await.is_err() {
            tracing::warn!("consumer tasks still running at shutdown");
        }
        // Two-way: the connections close next, and a oneway update still queued would be lost.
        let mqs = inner.assigned();
        if let Err(e) = inner.offset_store.persist_all_confirmed(&mqs).await {
            tracing::warn!(error = %e, "offsets not all stored at shutdown; their messages will be redelivered");
        }
        if inner.is_orderly() && inner.config.consumer.message_model == MessageModel::Clustering {
            inner.unlock_all().await;
        }
        let addrs = inner.heartbeat_addrs();
        inner.client.unregister(&addrs).await;
        inner.client.routes.stop_polling();
        inner.client.remoting.close().await;
        inner.retry_producer.shutdown().await;
        // Last: the listener calls that finished above have queued their SubAfter records.
        if let Some(trace) = &inner.trace {
            trace.shutdown().await;
        }
        tracing::info!(group = %self.consumer_group(), "push consumer shut down");
    }
}

/// Runs `f` every `period` until shutdown.
fn every<F, Fut>(inner: &Arc<PushInner>, period: Duration, f: F)
where
    F: Fn() -> Fut + Send + 'static,
    Fut: std::future::Future<Output = ()> + Send,
{
    let token = inner.shutdown.clone();
    inner.tasks.spawn(async move {
        loop {
            tokio::select! {
                biased;
                _ = token.cancelled() => return,
                _ = tokio::time::sleep(period) => f().await,
            }
        }
    });
}
