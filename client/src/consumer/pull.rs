//! [`PullConsumer`]: RocketMQ 4.x's `DefaultLitePullConsumer`: background tasks fetch the assigned
//! queues into a bounded cache and the application takes batches with [`PullConsumer::poll`].
//!
//! ```text
//!  subscribe(topic, expr) ─► rebalance (as the push consumer) ─┐
//!  assign(queues) ─────────────────────────────────────────────┴► one fetch task per queue:
//!     PULL_MESSAGE (suspend, subscription + lite bits) ─► ConsumeRequest ─► bounded channel ─► poll()
//!  poll: consumed offset of the queue = last polled + 1; auto-commit every interval (inside poll)
//!  seek(mq, offset): new generation ─► in-flight fetch aborted, cached batches of the old one discarded
//!  commit(): consumed offsets ─► offset store ─► stored two-way (auto-commit: oneway; shutdown: two-way)
//! ```
//!
//! Invariants:
//! - A batch reaches `poll` only if it was fetched in the queue's current generation (after the last
//!   seek) and the queue is still assigned; so after `seek(mq, o)` the next batch of `mq` starts at `o`.
//! - Fetching pauses while a queue has `pull_threshold_for_queue` messages fetched but not polled.
//! - A committed offset is one returned by `poll` (+1), never ahead of it.
//! - With `enable_msg_trace`, each batch `poll` returns is traced as handed over and consumed (a
//!   SubBefore and a successful SubAfter, both at once as Java's lite consumer records them), without
//!   waiting on the trace dispatcher; the dispatcher is flushed last at shutdown. Java records them
//!   when a batch is fetched, so it also traces batches a `seek` or a rebalance then discards; here
//!   only what the application received is traced.

use raftmq_common::protocol::body::consumer_running_info::ConsumerRunningInfo;
use raftmq_common::protocol::body::consumer_running_info::ProcessQueueInfo;
use std::collections::BTreeMap;
use std::collections::BTreeSet;
use std::sync::Arc;
use std::sync::Mutex;
use std::sync::MutexGuard;
use std::sync::atomic::AtomicBool;
use std::sync::atomic::AtomicU8;
use std::sync::atomic::AtomicU64;
use std::sync::atomic::Ordering;
use std::time::Duration;

use raftmq_common::limits as L;
use raftmq_common::message::MessageExt;
use raftmq_common::message::MessageQueue;
use raftmq_common::message::trace::ConsumeReturnType;
use raftmq_common::protocol::body::heartbeat::ConsumeType;
use raftmq_common::protocol::body::heartbeat::MessageModel;
use raftmq_common::protocol::body::heartbeat::SubscriptionData;
use raftmq_common::protocol::body::route::MASTER_ID;
use raftmq_common::protocol::header::pull::pull_sys_flag;
use tokio::sync::Notify;
use tokio::sync::mpsc;
use tokio::sync::watch;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::client_config::ClientConfig;
use crate::client_config::client_config_setters;
use crate::client_config::consumer_instance_name;
use crate::clock::now_ms;
use crate::consumer::client_instance;
use crate::consumer::client_instance::ClientInstance;
use crate::consumer::consumer_config::ConsumerConfig;
use crate::consumer::consumer_config::consumer_config_setters;
use crate::consumer::offset_store::OffsetStore;
use crate::consumer::offset_store::ReadOffsetType;
use crate::consumer::offset_store::compute_pull_from_where;
use crate::consumer::pull_api::PullStatus;
use crate::consumer::pull_api::process_pull_response;
use crate::consumer::rebalance::allocate;
use crate::consumer::subscription::build_subscription_data;
use crate::consumer::topic_rates::TopicRates;
use crate::error::ClientError;
use crate::error::ErrorKind;
use crate::error::Result;
use crate::producer::trace_dispatcher;
use crate::trace::TraceDispatcher;
use crate::trace::TraceRole;

const STATE_CREATED: u8 = 0;
const STATE_RUNNING: u8 = 1;
const STATE_SHUTDOWN: u8 = 2;

/// `DefaultLitePullConsumer.pullBatchSize` (10).
pub const LITE_PULL_BATCH_SIZE_DEFAULT_COUNT: u32 = 10;
/// `DefaultLitePullConsumer.brokerSuspendMaxTimeMillis` (20 s).
pub const LITE_PULL_BROKER_SUSPEND_MAX_MS: u64 = 20_000;

/// Builds a [`PullConsumer`]; options mirror `DefaultLitePullConsumer`.
#[derive(Debug, Clone)]
pub struct PullConsumerBuilder {
    consumer: ConsumerConfig,
    client: ClientConfig,
    assigned: Vec<MessageQueue>,
    auto_commit: bool,
    auto_commit_interval: Duration,
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

    /// Checks the options and builds the consumer (not started).
    pub fn build(self) -> Result<PullConsumer> {
        const OP: &str = "buildPullConsumer";
        let invalid = |m: &str| ClientError::invalid_argument(OP, m.to_owned());
        self.consumer.check_group(OP)?;
        if self.consumer.subscriptions.is_empty() == self.assigned.is_empty() {
            return Err(invalid("either subscribe topics or assign queues, not both or neither"));
        }
        self.consumer.check_selectors_and_batch(OP)?;
        let ip = self.client.ip();
        let instance = self.client.instance_name_or(consumer_instance_name);
        let client = self.consumer.client_instance(&self.client, ip, &instance)?;
        let version = now_ms();
        let mut subscriptions = self.consumer.subscription_table(version);
        for mq in &self.assigned {
            subscriptions.entry(mq.topic.clone()).or_insert_with(|| build_subscription_data(&mq.topic, "*", version));
        }
        let offset_store = self.consumer.offset_store(&client);
        let trace =
            trace_dispatcher(&self.client, "buildPullConsumer", &self.consumer.consumer_group, TraceRole::Consume, ip)?;
        let capacity = (L::LITE_PULL_THRESHOLD_FOR_ALL_DEFAULT_COUNT / self.consumer.pull_batch_size as usize).max(1);
        let (tx, rx) = mpsc::channel(capacity);
        let inner = LiteInner {
            client,
            offset_store,
            subscriptions,
            queues: Mutex::default(),
            tx,
            rx: tokio::sync::Mutex::new(rx),
            shutdown: CancellationToken::new(),
            tasks: TaskTracker::new(),
            state: AtomicU8::new(STATE_CREATED),
            next_auto_commit: Mutex::new(Instant::now() + self.auto_commit_interval),
            assignment_epoch: AtomicU64::new(0),
            assignment: watch::channel(BTreeSet::new()).0,
            topic_stats: TopicRates::default(),
            epoch: Instant::now(),
            trace,
            config: self,
        };
        let inner = Arc::new(inner);
        let weak = Arc::downgrade(&inner);
        inner.client.set_running_info(move || weak.upgrade().map(|i| i.running_info()).unwrap_or_default());
        Ok(PullConsumer { inner })
    }
}

/// An assigned queue whose start offset could not be read yet (`nextPullOffset` -1 in Java's lite
/// consumer): its fetch loop reads it before the first pull, retrying as a failed pull does.
const OFFSET_UNKNOWN: i64 = -1;

/// Fetch state of one assigned queue (`AssignedMessageQueue` entry).
#[derive(Debug)]
struct LiteQueue {
    /// Next offset to fetch (`OFFSET_UNKNOWN` until the start offset is read), and the generation
    /// it belongs to.
    pull: Mutex<(i64, u64)>,
    /// Offset after the last polled message (`consumeOffset`).
    consumed: Mutex<Option<i64>>,
    dropped: AtomicBool,
    /// Fetched, not yet polled.
    cached: AtomicU64,
    /// Cached count fell.
    wake: Notify,
    /// A seek happened or the queue was dropped: an in-flight fetch is pointless.
    reset: Notify,
}

#[derive(Debug)]
struct ConsumeRequest {
    mq: MessageQueue,
    /// The fetch state the batch was fetched for: a queue released and taken again has a new one
    /// (whose generations start at 0 again), so the generation alone cannot tell a stale batch.
    queue: Arc<LiteQueue>,
    generation: u64,
    msgs: Vec<MessageExt>,
}

struct LiteInner {
    config: PullConsumerBuilder,
    client: Arc<ClientInstance>,
    offset_store: OffsetStore,
    subscriptions: BTreeMap<String, SubscriptionData>,
    queues: Mutex<BTreeMap<MessageQueue, Arc<LiteQueue>>>,
    tx: mpsc::Sender<ConsumeRequest>,
    rx: tokio::sync::Mutex<mpsc::Receiver<ConsumeRequest>>,
    shutdown: CancellationToken,
    tasks: TaskTracker,
    state: AtomicU8,
    next_auto_commit: Mutex<Instant>,
    /// Counts queues taken and released (see [`PullConsumer::assignment_epoch`]).
    assignment_epoch: AtomicU64,
    /// The assignment after every take and release (see [`PullConsumer::assignment_watch`]).
    assignment: watch::Sender<BTreeSet<MessageQueue>>,
    /// Pull TPS and RT by topic, for the running info's `statusTable`.
    topic_stats: TopicRates,
    /// Zero of the seconds `topic_stats` is stamped with.
    epoch: Instant,
    /// The trace dispatcher, with `enable_msg_trace`.
    trace: Option<Arc<TraceDispatcher>>,
}

/// A lite pull consumer; clones share it.
#[derive(Clone)]
pub struct PullConsumer {
    inner: Arc<LiteInner>,
}

impl std::fmt::Debug for PullConsumer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PullConsumer")
            .field("consumer_group", &self.inner.config.consumer.consumer_group)
            .field("client_id", &self.inner.client.client_id)
            .finish()
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // Critical sections are single assignments; a poisoned value is still consistent.
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl PullConsumer {
    /// A [`PullConsumerBuilder`] for `consumer_group`.
    pub fn builder(consumer_group: impl Into<String>) -> PullConsumerBuilder {
        PullConsumerBuilder::new(consumer_group)
    }

    /// `ip@instanceName`.
    pub fn client_id(&self) -> &str {
        &self.inner.client.client_id
    }

    /// The queues read now.
    pub fn assignment(&self) -> BTreeSet<MessageQueue> {
        lock(&self.inner.queues).keys().cloned().collect()
    }

    /// Grows every time a queue is taken or released. A queue released and taken again between two
    /// looks at [`Self::assignment`] leaves the set unchanged but restarts the queue from its
    /// committed offset (redelivering what was read after it): this tells such a rebalance apart.
    pub fn assignment_epoch(&self) -> u64 {
        self.inner.assignment_epoch.load(Ordering::Acquire)
    }

    /// A receiver of the assignment, updated after every queue taken or released (to wait for a
    /// rebalance instead of polling [`Self::assignment`]).
    pub fn assignment_watch(&self) -> watch::Receiver<BTreeSet<MessageQueue>> {
        self.inner.assignment.subscribe()
    }

    /// Starts fetching (assign mode) or rebalancing (subscribe mode).
    pub async fn start(&self) -> Result<()> {
        let inner = &self.inner;
        match inner.state.compare_exchange(STATE_CREATED, STATE_RUNNING, Ordering::AcqRel, Ordering::Acquire) {
            Ok(_) => {}
            Err(STATE_RUNNING) => return Ok(()),
            Err(_) => return Err(ClientError::new(ErrorKind::Shutdown, "start", "the consumer was shut down")),
        }
        if let OffsetStore::Local(store) = &inner.offset_store
            && let Err(e) = store.load()
        {
            inner.state.store(STATE_SHUTDOWN, Ordering::Release);
            return Err(e);
        }
        inner.client.routes.start_polling();
        for topic in inner.subscriptions.keys() {
            if let Err(e) = inner.client.routes.update_route(topic).await {
                tracing::warn!(topic, error = %e, "no route for a topic yet");
            }
        }
        if let Err(e) = inner.client.check_client_in_broker(&inner.subscriptions).await {
            inner.client.routes.stop_polling();
            inner.state.store(STATE_SHUTDOWN, Ordering::Release);
            return Err(e);
        }
        if let Some(trace) = &inner.trace {
            trace.start();
        }
        inner.send_heartbeat().await;
        if inner.config.assigned.is_empty() {
            let me = inner.clone();
            inner.tasks.spawn(async move {
                loop {
                    me.rebalance().await;
                    tokio::select! {
                        biased;
                        _ = me.shutdown.cancelled() => return,
                        _ = me.client.rebalance_signal.notified() => {}
                        _ = tokio::time::sleep(me.config.consumer.rebalance_interval) => {}
                    }
                }
            });
        } else {
            for mq in inner.config.assigned.clone() {
                inner.add_queue(&mq, true).await?;
            }
        }
        let me = inner.clone();
        inner.tasks.spawn(async move {
            loop {
                tokio::select! {
                    biased;
                    _ = me.shutdown.cancelled() => return,
                    _ = tokio::time::sleep(me.config.consumer.heartbeat_interval) => me.send_heartbeat().await,
                }
            }
        });
        Ok(())
    }

    /// The next fetched batch of one queue, or an empty batch when none arrives within `timeout`.
    /// Auto-commits when due.
    pub async fn poll(&self, timeout: Duration) -> Result<Vec<MessageExt>> {
        let inner = &self.inner;
        if inner.state.load(Ordering::Acquire) != STATE_RUNNING {
            return Err(ClientError::new(ErrorKind::Shutdown, "poll", "the consumer is not running"));
        }
        if inner.config.auto_commit {
            let due = {
                let mut next = lock(&inner.next_auto_commit);
                let due = Instant::now() >= *next;
                if due {
                    *next = Instant::now() + inner.config.auto_commit_interval;
                }
                due
            };
            if due {
                // Oneway, as the periodic persist of the push consumer: poll must not wait on it.
                let mqs = self.stage_consumed_offsets();
                inner.offset_store.persist_all(&mqs).await;
            }
        }
        let deadline = Instant::now() + timeout;
        let mut rx = inner.rx.lock().await;
        loop {
            let request = tokio::select! {
                biased;
                _ = inner.shutdown.cancelled() => return Ok(Vec::new()),
                r = tokio::time::timeout_at(deadline, rx.recv()) => match r {
                    Ok(Some(request)) => request,
                    Ok(None) | Err(_) => return Ok(Vec::new()),
                },
            };
            let queue = &request.queue;
            queue.cached.fetch_sub(request.msgs.len() as u64, Ordering::AcqRel);
            queue.wake.notify_waiters();
            // A batch of a released queue must not reach the caller, nor move the consumed offset
            // of the queue's next incarnation (found by jepsen: a batch fetched before a release
            // and re-take was delivered after it, then redelivered from the committed offset).
            let assigned = lock(&inner.queues).get(&request.mq).is_some_and(|q| Arc::ptr_eq(q, queue));
            let current = lock(&queue.pull).1;
            if !assigned || queue.dropped.load(Ordering::Acquire) || request.generation != current {
                continue;
            }
            if let Some(last) = request.msgs.last() {
                *lock(&queue.consumed) = Some(last.queue_offset + 1);
            }
            if let Some(trace) = &inner.trace {
                let handed = std::time::Instant::now();
                if let Some(before) = trace.sub_before(&inner.config.consumer.consumer_group, &request.msgs) {
                    trace.sub_after(before, ConsumeReturnType::Success, handed, request.msgs.len());
                }
            }
            return Ok(request.msgs);
        }
    }

    /// Moves `mq`'s next fetch (and its consumed offset) to `offset`; batches already fetched are
    /// discarded. `mq` must be assigned.
    pub fn seek(&self, mq: &MessageQueue, offset: i64) -> Result<()> {
        let queue = lock(&self.inner.queues).get(mq).cloned().ok_or_else(|| {
            ClientError::invalid_argument("seek", "the message queue is not assigned")
                .with_context("queue", format!("{}:{}", mq.broker_name, mq.queue_id))
        })?;
        if offset < 0 {
            return Err(ClientError::invalid_argument("seek", "offset must not be negative"));
        }
        {
            let mut pull = lock(&queue.pull);
            *pull = (offset, pull.1 + 1);
        }
        *lock(&queue.consumed) = Some(offset);
        queue.reset.notify_waiters();
        queue.wake.notify_waiters();
        Ok(())
    }

    /// Stores every queue's consumed offset and persists it (`commitAll`), waiting until the broker
    /// (or the broadcasting file) has it; a failure is logged (see [`Self::try_commit`]).
    pub async fn commit(&self) {
        if let Err(e) = self.try_commit().await {
            tracing::warn!(error = %e, "commit failed; uncommitted messages will be consumed again");
        }
    }

    /// [`Self::commit`], reporting whether every queue's offset was stored.
    pub async fn try_commit(&self) -> Result<()> {
        let mqs = self.stage_consumed_offsets();
        self.inner.offset_store.persist_all_confirmed(&mqs).await
    }

    /// Moves every assigned queue's consumed offset into the offset store (memory); the queues.
    fn stage_consumed_offsets(&self) -> BTreeSet<MessageQueue> {
        let queues: Vec<(MessageQueue, Arc<LiteQueue>)> =
            lock(&self.inner.queues).iter().map(|(mq, q)| (mq.clone(), q.clone())).collect();
        let mut mqs = BTreeSet::new();
        for (mq, queue) in queues {
            if let Some(offset) = *lock(&queue.consumed) {
                self.inner.offset_store.update_offset(&mq, offset, false);
            }
            mqs.insert(mq);
        }
        mqs
    }

    /// The committed offset of `mq` (memory first, then the store); `None` when there is none.
    pub async fn committed(&self, mq: &MessageQueue) -> Result<Option<i64>> {
        self.inner.offset_store.read_offset(mq, ReadOffsetType::MemoryFirstThenStore).await
    }

    /// Stops fetching, commits (with auto-commit on), unregisters and closes connections.
    pub async fn shutdown(&self) {
        let inner = &self.inner;
        if inner.state.swap(STATE_SHUTDOWN, Ordering::AcqRel) != STATE_RUNNING {
            return;
        }
        inner.shutdown.cancel();
        inner.tasks.close();
        if tokio::time::timeout(Duration::from_millis(L::SHUTDOWN_DRAIN_MAX_MS), inner.tasks.wait()).await.is_err() {
            tracing::warn!("pull consumer tasks still running at shutdown");
        }
        if inner.config.auto_commit {
            self.commit().await;
        }
        let addrs = inner.client.broker_addrs_of(&inner.subscriptions.keys().cloned().collect::<Vec<_>>());
        inner.client.unregister(&addrs).await;
        inner.client.routes.stop_polling();
        inner.client.remoting.close().await;
        if let Some(trace) = &inner.trace {
            trace.shutdown().await;
        }
    }
}

impl LiteInner {
    /// GET_CONSUMER_RUNNING_INFO's answer (`DefaultLitePullConsumerImpl.consumerRunningInfo`):
    /// settings, subscriptions and each queue read: what is fetched and not yet polled, and the
    /// offset after the last polled message as the commit offset. Java's lite consumer answers the
    /// settings and subscriptions alone; the queues and the pull rates are ours.
    fn running_info(&self) -> ConsumerRunningInfo {
        let c = &self.config;
        let mut properties = self.client.running_properties(
            c.consumer.message_model,
            &c.client.namesrv_addrs,
            ConsumeType::ConsumeActively,
        );
        let mut put = |k: &str, v: String| {
            properties.insert(k.to_owned(), v);
        };
        put("autoCommit", c.auto_commit.to_string());
        put("pullBatchSize", c.consumer.pull_batch_size.to_string());
        put("pullThresholdForQueue", c.consumer.pull_threshold_for_queue.to_string());
        let offsets = self.offset_store.offsets();
        let mq_table = lock(&self.queues)
            .iter()
            .map(|(mq, q)| {
                let cached = q.cached.load(Ordering::Acquire);
                let next_fetch = lock(&q.pull).0;
                let consumed = *lock(&q.consumed);
                // Fetched and not yet polled: [consumed, next fetch).
                let (min, max) = match consumed {
                    Some(c) if cached > 0 => (c, next_fetch - 1),
                    _ => (0, 0),
                };
                let info = ProcessQueueInfo {
                    cached_msg_count: i32::try_from(cached).unwrap_or(i32::MAX),
                    cached_msg_min_offset: min,
                    cached_msg_max_offset: max,
                    commit_offset: consumed.or_else(|| offsets.get(mq).copied()).unwrap_or(-1),
                    droped: q.dropped.load(Ordering::Acquire),
                    ..ProcessQueueInfo::default()
                };
                (mq.clone(), info)
            })
            .collect();
        // Pull rates only: the application consumes what `poll` returns, out of our sight.
        client_instance::running_info(properties, mq_table, &self.topic_stats, self.epoch, &self.subscriptions)
    }

    async fn send_heartbeat(&self) {
        let data = self.config.consumer.heartbeat_data(
            &self.client.client_id,
            ConsumeType::ConsumeActively,
            self.subscriptions.values(),
        );
        let addrs = self.client.broker_addrs_of(&self.subscriptions.keys().cloned().collect::<Vec<_>>());
        self.client.send_heartbeat(&addrs, &data).await;
    }

    async fn rebalance(self: &Arc<Self>) {
        for topic in self.subscriptions.keys() {
            let Ok(mqs) = self.client.subscribe_queues(topic).await else { continue };
            let allocated: BTreeSet<MessageQueue> = if self.config.consumer.message_model == MessageModel::Clustering {
                let cids = match self.client.find_consumer_ids(topic).await {
                    Ok(cids) if !cids.is_empty() => cids,
                    _ => continue,
                };
                let all: Vec<MessageQueue> = mqs.into_iter().collect();
                allocate(self.config.consumer.allocate_strategy, &self.client.client_id, &all, &cids)
                    .into_iter()
                    .collect()
            } else {
                mqs
            };
            let current: Vec<(MessageQueue, Arc<LiteQueue>)> = lock(&self.queues)
                .iter()
                .filter(|(mq, _)| &mq.topic == topic)
                .map(|(mq, q)| (mq.clone(), q.clone()))
                .collect();
            for (mq, queue) in &current {
                if !allocated.contains(mq) {
                    queue.dropped.store(true, Ordering::Release);
                    queue.reset.notify_waiters();
                    queue.wake.notify_waiters();
                    lock(&self.queues).remove(mq);
                    self.assignment_changed();
                    // Two-way, so the queue's next owner reads the offset this consumer reached.
                    if let Err(e) = self.offset_store.persist_confirmed(mq).await {
                        tracing::warn!(mq = ?mq, error = %e, "released queue's offset not stored");
                    }
                    self.offset_store.remove_offset(mq);
                }
            }
            for mq in &allocated {
                if current.iter().any(|(m, _)| m == mq) {
                    continue;
                }
                if let Err(e) = self.add_queue(mq, false).await {
                    tracing::warn!(mq = ?mq, error = %e, "queue not taken this round");
                }
            }
        }
    }

    fn assignment_changed(&self) {
        self.assignment_epoch.fetch_add(1, Ordering::AcqRel);
        self.assignment.send_replace(lock(&self.queues).keys().cloned().collect());
    }

    /// Takes `mq` from its start offset. With `lazy` (assign mode) a start offset that cannot be
    /// read now (a stale route after a failover, a broker restarting) is read by the queue's fetch
    /// loop, retried as Java's pull task retries, instead of failing `start`; rebalance mode
    /// leaves the queue to its next round.
    async fn add_queue(self: &Arc<Self>, mq: &MessageQueue, lazy: bool) -> Result<()> {
        self.offset_store.remove_offset(mq);
        let offset = match compute_pull_from_where(
            &self.offset_store,
            &self.client,
            mq,
            self.config.consumer.consume_from,
        )
        .await
        {
            Ok(offset) => offset,
            Err(e) if lazy && !matches!(e.kind, ErrorKind::Shutdown) => {
                tracing::warn!(mq = ?mq, error = %e, "start offset not read yet; the fetch loop retries");
                OFFSET_UNKNOWN
            }
            Err(e) => return Err(e),
        };
        let queue = Arc::new(LiteQueue {
            pull: Mutex::new((offset, 0)),
            consumed: Mutex::new(None),
            dropped: AtomicBool::new(false),
            cached: AtomicU64::new(0),
            wake: Notify::new(),
            reset: Notify::new(),
        });
        lock(&self.queues).insert(mq.clone(), queue.clone());
        self.assignment_changed();
        let me = self.clone();
        let mq = mq.clone();
        self.tasks.spawn(async move { me.fetch_loop(mq, queue).await });
        Ok(())
    }

    async fn fetch_loop(self: Arc<Self>, mq: MessageQueue, queue: Arc<LiteQueue>) {
        let Some(sub) = self.subscriptions.get(&mq.topic).cloned() else { return };
        let mut broker_id = MASTER_ID;
        loop {
            if queue.dropped.load(Ordering::Acquire) || self.shutdown.is_cancelled() {
                return;
            }
            let wake = queue.wake.notified();
            let reset = queue.reset.notified();
            tokio::pin!(wake);
            tokio::pin!(reset);
            wake.as_mut().enable();
            reset.as_mut().enable();
            if queue.cached.load(Ordering::Acquire) >= self.config.consumer.pull_threshold_for_queue {
                tokio::select! {
                    biased;
                    _ = self.shutdown.cancelled() => return,
                    _ = &mut reset => continue,
                    _ = &mut wake => continue,
                }
            }
            let (offset, generation) = *lock(&queue.pull);
            if offset == OFFSET_UNKNOWN {
                let read = tokio::select! {
                    biased;
                    _ = self.shutdown.cancelled() => return,
                    _ = &mut reset => continue,
                    r = compute_pull_from_where(&self.offset_store, &self.client, &mq, self.config.consumer.consume_from) => r,
                };
                match read {
                    Ok(start) => {
                        let mut pull = lock(&queue.pull);
                        if pull.1 == generation {
                            pull.0 = start;
                        }
                    }
                    Err(e) => {
                        tracing::warn!(mq = ?mq, error = %e, "start offset not read");
                        tokio::select! {
                            biased;
                            _ = self.shutdown.cancelled() => return,
                            _ = &mut reset => {}
                            _ = tokio::time::sleep(self.config.consumer.pull_delay_when_exception) => {}
                        }
                    }
                }
                continue;
            }
            let outcome = tokio::select! {
                biased;
                _ = self.shutdown.cancelled() => return,
                // A seek (or drop) makes the in-flight fetch pointless.
                _ = &mut reset => continue,
                r = self.fetch(&mq, &sub, offset, broker_id) => r,
            };
            match outcome {
                Ok(result) => {
                    broker_id = result.suggest_which_broker_id;
                    {
                        let mut pull = lock(&queue.pull);
                        if pull.1 != generation {
                            continue;
                        }
                        pull.0 = result.next_begin_offset;
                    }
                    if result.status == PullStatus::OffsetIllegal {
                        tracing::warn!(mq = ?mq, offset, next = result.next_begin_offset, "fetch offset illegal; jumping");
                    }
                    if result.msgs.is_empty() {
                        continue;
                    }
                    queue.cached.fetch_add(result.msgs.len() as u64, Ordering::AcqRel);
                    let request =
                        ConsumeRequest { mq: mq.clone(), queue: Arc::clone(&queue), generation, msgs: result.msgs };
                    tokio::select! {
                        biased;
                        _ = self.shutdown.cancelled() => return,
                        sent = self.tx.send(request) => if sent.is_err() { return },
                    }
                }
                Err(e) => {
                    tracing::warn!(mq = ?mq, offset, error = %e, "fetch failed");
                    broker_id = MASTER_ID;
                    tokio::select! {
                        biased;
                        _ = self.shutdown.cancelled() => return,
                        _ = &mut reset => {}
                        _ = tokio::time::sleep(self.config.consumer.pull_delay_when_exception) => {}
                    }
                }
            }
        }
    }

    async fn fetch(
        &self,
        mq: &MessageQueue,
        sub: &SubscriptionData,
        offset: i64,
        broker_id: i64,
    ) -> Result<crate::consumer::pull_api::PullResult> {
        let found = self.client.broker_addr("pullMessage", mq, broker_id, false).await?;
        // `pullSyncImpl(block=true)`: suspend, subscription in the header, lite-pull bit; no commit.
        let sys_flag = pull_sys_flag::build(false, true, true, false, true);
        let header = self.config.consumer.pull_header(mq, offset, sub, sys_flag, 0, Some(sub.sub_string.clone()));
        let started = Instant::now();
        let response = self.client.pull(&found.addr, &header, self.config.consumer.pull_timeout_when_suspend).await?;
        let result = process_pull_response(&response, sub)?;
        let answered = Instant::now();
        let rt_ms = u64::try_from((answered - started).as_millis()).unwrap_or(u64::MAX);
        self.topic_stats.pulled(&mq.topic, (answered - self.epoch).as_secs(), rt_ms, result.msgs.len());
        Ok(result)
    }
}
