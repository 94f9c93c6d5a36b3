//! [`PushInner`]: the state one push consumer's tasks share (`DefaultMQPushConsumerImpl`), its
//! heartbeat, its answers to GET_CONSUMER_RUNNING_INFO and CONSUME_MESSAGE_DIRECTLY, the trace
//! hooks around listener calls, and the helpers the rebalance, pull and consume files use.
//!
//! Invariant: no lock here is held across an `.await`.

use std::collections::BTreeMap;
use std::collections::BTreeSet;
use std::collections::HashMap;
use std::sync::Arc;
use std::sync::Mutex;
use std::sync::atomic::AtomicU8;
use std::sync::atomic::Ordering;
use std::time::Duration;

use raftmq_common::message::MessageExt;
use raftmq_common::message::MessageQueue;
use raftmq_common::message::trace::ConsumeReturnType;
use raftmq_common::message::trace::TraceContext;
use raftmq_common::protocol::body::consume_directly::CmResult;
use raftmq_common::protocol::body::consume_directly::ConsumeMessageDirectlyResult;
use raftmq_common::protocol::body::consumer_running_info::ConsumerRunningInfo;
use raftmq_common::protocol::body::consumer_running_info::PROP_CONSUME_ORDERLY;
use raftmq_common::protocol::body::consumer_running_info::PROP_CONSUMER_START_TIMESTAMP;
use raftmq_common::protocol::body::consumer_running_info::PROP_THREADPOOL_CORE_SIZE;
use raftmq_common::protocol::body::heartbeat::ConsumeType;
use raftmq_common::protocol::body::heartbeat::HeartbeatData;
use raftmq_common::protocol::body::heartbeat::MessageModel;
use raftmq_common::protocol::body::heartbeat::SubscriptionData;
pub(super) use raftmq_common::sync::lock;
use tokio::sync::watch;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::clock::now_ms;
use crate::consumer::client_instance;
use crate::consumer::client_instance::ClientInstance;
use crate::consumer::client_instance::json_text;
use crate::consumer::consume_pool::ConsumePool;
use crate::consumer::listener::ConsumeConcurrentlyContext;
use crate::consumer::listener::ConsumeConcurrentlyStatus;
use crate::consumer::listener::ConsumeOrderlyContext;
use crate::consumer::listener::ConsumeOrderlyStatus;
use crate::consumer::offset_store::OffsetStore;
use crate::consumer::process_queue::ProcessQueue;
use crate::consumer::push::builder::Listener;
use crate::consumer::push::builder::PushConsumerBuilder;
use crate::consumer::push::stats::Stats;
use crate::consumer::topic_rates::TopicRates;
use crate::producer::Producer;
use crate::trace::TraceDispatcher;

pub(super) struct PushInner {
    pub(super) config: PushConsumerBuilder,
    pub(super) client: Arc<ClientInstance>,
    /// Sends failed messages to the retry topic when CONSUMER_SEND_MSG_BACK fails.
    pub(super) retry_producer: Producer,
    pub(super) offset_store: OffsetStore,
    pub(super) subscriptions: BTreeMap<String, SubscriptionData>,
    pub(super) listener: Listener,
    pub(super) process_queues: Mutex<BTreeMap<MessageQueue, Arc<ProcessQueue>>>,
    /// Held by an orderly task across listener calls (`MessageQueueLock`).
    pub(super) mq_locks: Mutex<HashMap<MessageQueue, Arc<tokio::sync::Mutex<()>>>>,
    /// Listener threads (`consumeThreadMax`).
    pub(super) consume_pool: ConsumePool,
    /// `%RETRY%<group>`, looked for in every consumed batch.
    pub(super) retry_topic: String,
    pub(super) shutdown: CancellationToken,
    /// Pull loops and timers.
    pub(super) tasks: TaskTracker,
    /// Listener calls.
    pub(super) consume_tasks: TaskTracker,
    pub(super) state: AtomicU8,
    pub(super) assignment: watch::Sender<BTreeSet<MessageQueue>>,
    /// Broker addresses that have had a heartbeat from this consumer.
    pub(super) heartbeated: Mutex<BTreeSet<String>>,
    pub(super) stats: Stats,
    pub(super) epoch: Instant,
    /// Wall-clock ms of `start` (0 before).
    pub(super) started_at_ms: std::sync::atomic::AtomicI64,
    /// Per-topic rates for GET_CONSUMER_RUNNING_INFO's `statusTable`.
    pub(super) topic_stats: TopicRates,
    /// The trace dispatcher, with `enable_msg_trace`.
    pub(super) trace: Option<Arc<TraceDispatcher>>,
}

impl PushInner {
    pub(super) fn is_orderly(&self) -> bool {
        matches!(self.listener, Listener::Orderly(_))
    }

    pub(super) fn clustering(&self) -> bool {
        self.config.consumer.message_model == MessageModel::Clustering
    }

    pub(super) fn topics(&self) -> Vec<String> {
        self.subscriptions.keys().cloned().collect()
    }

    pub(super) fn heartbeat_addrs(&self) -> BTreeSet<String> {
        self.client.broker_addrs_of(&self.topics())
    }

    pub(super) fn heartbeat_data(&self) -> HeartbeatData {
        self.config.consumer.heartbeat_data(
            &self.client.client_id,
            ConsumeType::ConsumePassively,
            self.subscriptions.values(),
        )
    }

    pub(super) async fn send_heartbeat(&self) {
        let addrs = self.heartbeat_addrs();
        self.client.send_heartbeat(&addrs, &self.heartbeat_data()).await;
        lock(&self.heartbeated).extend(addrs);
    }

    /// Heartbeats the brokers that routes named since the last heartbeat (a topic created after the
    /// consumer started, a new leader): until a broker knows the consumer, the group's consumer list
    /// lacks it and rebalancing would give it nothing for a whole heartbeat period.
    pub(super) async fn heartbeat_new_brokers(&self) {
        let fresh: BTreeSet<String> = {
            let known = lock(&self.heartbeated);
            self.heartbeat_addrs().into_iter().filter(|a| !known.contains(a)).collect()
        };
        if fresh.is_empty() {
            return;
        }
        tracing::debug!(brokers = ?fresh, "heartbeat to brokers new in the routes");
        self.client.send_heartbeat(&fresh, &self.heartbeat_data()).await;
        lock(&self.heartbeated).extend(fresh);
    }

    /// GET_CONSUMER_RUNNING_INFO's answer (`DefaultMQPushConsumerImpl.consumerRunningInfo`): the
    /// settings, subscriptions, each held queue and each topic's rates (`statusTable`).
    pub(super) fn running_info(&self) -> ConsumerRunningInfo {
        let c = &self.config;
        let mut properties = self.client.running_properties(
            c.consumer.message_model,
            &c.client.namesrv_addrs,
            ConsumeType::ConsumePassively,
        );
        let mut put = |k: &str, v: String| {
            properties.insert(k.to_owned(), v);
        };
        put("consumeFromWhere", json_text(&c.consumer.consume_from.as_consume_from_where()));
        put("allocateMessageQueueStrategy", format!("{:?}", c.consumer.allocate_strategy));
        put("pullBatchSize", c.consumer.pull_batch_size.to_string());
        put("pullThresholdForQueue", c.consumer.pull_threshold_for_queue.to_string());
        put("pullThresholdSizeForQueue", (c.pull_threshold_for_queue_bytes / (1024 * 1024)).to_string());
        put("consumeConcurrentlyMaxSpan", c.consume_concurrently_max_span.to_string());
        put("consumeMessageBatchMaxSize", c.consume_message_batch_max_size.to_string());
        put("consumeThreadMax", c.consume_threads.to_string());
        put("consumeThreadMin", c.consume_threads.to_string());
        put("maxReconsumeTimes", c.max_reconsume_times.to_string());
        put("suspendCurrentQueueTimeMillis", c.suspend_current_queue_time.as_millis().to_string());
        put("instanceName", self.client.client_id.split_once('@').map_or("", |(_, i)| i).to_owned());
        put(PROP_CONSUME_ORDERLY, self.is_orderly().to_string());
        put(PROP_THREADPOOL_CORE_SIZE, c.consume_threads.to_string());
        put(PROP_CONSUMER_START_TIMESTAMP, self.started_at_ms.load(Ordering::Acquire).to_string());
        let now = now_ms();
        let offsets = self.offset_store.offsets();
        let mq_table = lock(&self.process_queues)
            .iter()
            .map(|(mq, pq)| {
                let mut info = pq.info(now);
                info.commit_offset = offsets.get(mq).copied().unwrap_or(-1);
                (mq.clone(), info)
            })
            .collect();
        client_instance::running_info(properties, mq_table, &self.topic_stats, self.epoch, &self.subscriptions)
    }

    /// CONSUME_MESSAGE_DIRECTLY (`ConsumeMessage*Service.consumeMessageDirectly`): the message goes
    /// to the listener once, on a listener thread, outside any queue's flow: no offset moves and a
    /// failure is only reported, never sent back.
    pub(super) async fn consume_directly(&self, msg: MessageExt, broker_name: String) -> ConsumeMessageDirectlyResult {
        let mq = MessageQueue::new(msg.message.topic.as_str(), &broker_name, msg.queue_id);
        let mut msgs = vec![msg];
        self.reset_retry_topic(&mut msgs);
        let started = std::time::Instant::now();
        let (order, outcome) = match self.listener.clone() {
            Listener::Concurrently(listener) => {
                let mut ctx = ConsumeConcurrentlyContext {
                    message_queue: Arc::new(mq),
                    delay_level_when_next_consume: 0,
                    ack_index: i32::MAX,
                };
                let status = self.consume_pool.run(move || listener.consume_message(&msgs, &mut ctx)).await;
                let result = status.map(|s| match s {
                    ConsumeConcurrentlyStatus::ConsumeSuccess => CmResult::CrSuccess,
                    ConsumeConcurrentlyStatus::ReconsumeLater => CmResult::CrLater,
                });
                (false, result)
            }
            Listener::Orderly(listener) => {
                let suspend_ms = i64::try_from(self.config.suspend_current_queue_time.as_millis()).unwrap_or(i64::MAX);
                let mut ctx =
                    ConsumeOrderlyContext { message_queue: mq, suspend_current_queue_time_millis: suspend_ms };
                let status = self.consume_pool.run(move || listener.consume_message(&msgs, &mut ctx)).await;
                let result = status.map(|s| match s {
                    ConsumeOrderlyStatus::Success => CmResult::CrSuccess,
                    ConsumeOrderlyStatus::SuspendCurrentQueueAMoment => CmResult::CrLater,
                });
                (true, result)
            }
        };
        let (consume_result, remark) = match outcome {
            Ok(r) => (r, None),
            Err(e) => (CmResult::CrThrowException, Some(e.to_string())),
        };
        ConsumeMessageDirectlyResult {
            auto_commit: true,
            consume_result: Some(consume_result),
            order,
            remark,
            spent_time_mills: i64::try_from(started.elapsed().as_millis()).unwrap_or(i64::MAX),
        }
    }

    /// A listener call on `mq` that started at `started` ended now: the queue's last consume
    /// time and the topic's rates (one clock read).
    pub(super) fn record_consume(
        &self,
        mq: &MessageQueue,
        pq: &ProcessQueue,
        started: std::time::Instant,
        ok: usize,
        failed: usize,
    ) {
        pq.mark_consumed(started);
        let rt_ms = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);
        let second = started.saturating_duration_since(self.epoch.into_std()).as_secs();
        self.topic_stats.consumed(&mq.topic, second, rt_ms, ok, failed);
    }

    /// The SubBefore of a batch handed to the listener ([`TraceDispatcher::sub_before`]).
    pub(super) fn trace_before(&self, msgs: &[MessageExt]) -> Option<TraceContext> {
        self.trace.as_ref()?.sub_before(&self.config.consumer.consumer_group, msgs)
    }

    /// The SubAfter of the listener's outcome ([`TraceDispatcher::sub_after`]).
    pub(super) fn trace_after(
        &self,
        before: Option<TraceContext>,
        outcome: ConsumeReturnType,
        started: std::time::Instant,
        count: usize,
    ) {
        if let (Some(trace), Some(before)) = (self.trace.as_ref(), before) {
            trace.sub_after(before, outcome, started, count);
        }
    }

    pub(super) fn assigned(&self) -> BTreeSet<MessageQueue> {
        lock(&self.process_queues).keys().cloned().collect()
    }

    pub(super) async fn persist_all(&self) {
        let mqs = self.assigned();
        self.offset_store.persist_all(&mqs).await;
    }

    pub(super) fn mq_lock(&self, mq: &MessageQueue) -> Arc<tokio::sync::Mutex<()>> {
        lock(&self.mq_locks).entry(mq.clone()).or_default().clone()
    }

    pub(super) async fn pause(&self, d: Duration) -> bool {
        tokio::select! {
            biased;
            _ = self.shutdown.cancelled() => false,
            _ = tokio::time::sleep(d) => true,
        }
    }
}
