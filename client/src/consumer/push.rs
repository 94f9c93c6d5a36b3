//! [`PushConsumer`]: RocketMQ 4.x's `DefaultMQPushConsumer`: long-polls every assigned queue and
//! hands the messages to a listener, concurrently or in queue order.
//!
//! ```text
//!  start ─► routes ─► HEART_BEAT (every broker, every 30 s)
//!  rebalance (start, every 20 s, NOTIFY_CONSUMER_IDS_CHANGED) ─► GET_CONSUMER_LIST_BY_GROUP ─► allocate
//!     new queue: [orderly: LOCK_BATCH_MQ] ─► offset (store / consumeFrom) ─► ProcessQueue + pull task
//!     lost queue: drop ─► store offset (two-way) ─► [orderly: UNLOCK_BATCH_MQ]
//!  pull task per queue: flow control (count, bytes, span) ─► PULL_MESSAGE (suspend 15 s, commit bit)
//!     FOUND ─► ProcessQueue ─► listener thread (ConsumePool) ─► offset = smallest in flight
//!     NO_NEW / NO_MATCHED ─► next offset;  OFFSET_MOVED ─► jump to nextBeginOffset (offset reset)
//!  concurrent ReconsumeLater ─► CONSUMER_SEND_MSG_BACK ─failed─► SEND to %RETRY%<group> (inner producer)
//!     ─failed─► consumed again locally; clustering subscribes %RETRY%<group>, whose messages reach
//!     the listener with their original topic (RETRY_TOPIC)
//!  shutdown ─► stop pulls ─► wait for running listeners ─► store offsets (two-way) ─► unlock ─► UNREGISTER_CLIENT
//! ```
//!
//! Invariants:
//! - A queue's committed offset is the smallest offset still in flight (`ProcessQueue`), and only
//!   moves forward through consumption; a crash redelivers, it never skips.
//! - Orderly: one task per queue at a time, enforced twice: the process queue's consuming flag and a
//!   per-queue mutex held across listener calls (so a queue dropped and re-added by a rebalance cannot
//!   run on two tasks); in clustering a queue is consumed only while its broker lock is held and fresh.
//! - Rebalances run on one task, so two never interleave.
//! - Every wait is on a notification, the shutdown token, or a configured interval; no lock is held
//!   across an `.await`.
//! - With `enable_msg_trace`, a batch's SubBefore is queued just before the listener call and its
//!   SubAfter just after (a refusal or a panic as failed), never waiting on the trace dispatcher; the
//!   dispatcher is flushed last at shutdown, after the running listener calls finished.

use std::collections::BTreeMap;
use std::collections::BTreeSet;
use std::collections::HashMap;
use std::net::IpAddr;
use std::panic::AssertUnwindSafe;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::Mutex;
use std::sync::MutexGuard;
use std::sync::atomic::AtomicU8;
use std::sync::atomic::AtomicU64;
use std::sync::atomic::Ordering;
use std::time::Duration;
use std::time::SystemTime;
use std::time::UNIX_EPOCH;

use compact_str::CompactString;
use raftmq_common::limits as L;
use raftmq_common::message::MessageExt;
use raftmq_common::message::MessageQueue;
use raftmq_common::message::properties;
use raftmq_common::message::trace::ConsumeReturnType;
use raftmq_common::message::trace::TraceContext;
use raftmq_common::message::validate::retry_topic;
use raftmq_common::message::validate::validate_consumer_group;
use raftmq_common::protocol::acl::SessionCredentials;
use raftmq_common::protocol::body::consume_directly::CmResult;
use raftmq_common::protocol::body::consume_directly::ConsumeMessageDirectlyResult;
use raftmq_common::protocol::body::consumer_running_info::ConsumerRunningInfo;
use raftmq_common::protocol::body::consumer_running_info::PROP_CONSUME_ORDERLY;
use raftmq_common::protocol::body::consumer_running_info::PROP_CONSUMER_START_TIMESTAMP;
use raftmq_common::protocol::body::consumer_running_info::PROP_THREADPOOL_CORE_SIZE;
use raftmq_common::protocol::body::heartbeat::ConsumeType;
use raftmq_common::protocol::body::heartbeat::ConsumerData;
use raftmq_common::protocol::body::heartbeat::HeartbeatData;
use raftmq_common::protocol::body::heartbeat::MessageModel;
use raftmq_common::protocol::body::heartbeat::SubscriptionData;
use raftmq_common::protocol::body::route::MASTER_ID;
use raftmq_common::protocol::header::pull::PullMessageRequestHeader;
use raftmq_common::protocol::header::pull::pull_sys_flag;
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
use crate::consumer::listener::MessageListenerConcurrently;
use crate::consumer::listener::MessageListenerOrderly;
use crate::consumer::offset_store::ConsumeFrom;
use crate::consumer::offset_store::LocalFileOffsetStore;
use crate::consumer::offset_store::OffsetStore;
use crate::consumer::offset_store::ReadOffsetType;
use crate::consumer::offset_store::RemoteBrokerOffsetStore;
use crate::consumer::offset_store::compute_pull_from_where;
use crate::consumer::process_queue::ProcessQueue;
use crate::consumer::pull_api::PullStatus;
use crate::consumer::pull_api::process_pull_response;
use crate::consumer::rebalance::AllocateStrategy;
use crate::consumer::rebalance::allocate;
use crate::consumer::send_back::CLIENT_INNER_PRODUCER_GROUP;
use crate::consumer::send_back::retry_message;
use crate::consumer::subscription::MessageSelector;
use crate::consumer::subscription::build_subscription_data;
use crate::consumer::topic_rates::TopicRates;
use crate::error::ClientError;
use crate::error::ErrorKind;
use crate::error::Result;
use crate::producer::Producer;
use crate::producer::trace_dispatcher;
use crate::route::RouteConfig;
use crate::trace::TraceDispatcher;
use crate::trace::TraceRole;
use crate::trace::TraceSettings;

const STATE_CREATED: u8 = 0;
const STATE_RUNNING: u8 = 1;
const STATE_SHUTDOWN: u8 = 2;

/// How long a rebalance waits for an orderly listener call to end before unlocking a lost queue
/// (Java tries the consume lock for 1 s).
const ORDERLY_RELEASE_WAIT: Duration = Duration::from_secs(1);

#[derive(Clone)]
enum Listener {
    Concurrently(Arc<dyn MessageListenerConcurrently>),
    Orderly(Arc<dyn MessageListenerOrderly>),
}

/// Builds a [`PushConsumer`]; options and defaults mirror `DefaultMQPushConsumer`.
#[derive(Clone)]
pub struct PushConsumerBuilder {
    consumer_group: String,
    namesrv_addrs: Vec<String>,
    subscriptions: Vec<(String, MessageSelector)>,
    message_model: MessageModel,
    consume_from: ConsumeFrom,
    allocate_strategy: AllocateStrategy,
    pull_batch_size: u32,
    pull_threshold_for_queue: u64,
    pull_threshold_for_queue_bytes: u64,
    consume_concurrently_max_span: i64,
    consume_threads: usize,
    consume_message_batch_max_size: usize,
    max_reconsume_times: i32,
    suspend_current_queue_time: Duration,
    instance_name: Option<String>,
    client_ip: Option<IpAddr>,
    route_config: RouteConfig,
    rpc_timeout: Duration,
    heartbeat_interval: Duration,
    rebalance_interval: Duration,
    persist_interval: Duration,
    lock_renew_interval: Duration,
    broker_suspend_max: Duration,
    pull_timeout_when_suspend: Duration,
    pull_delay_when_exception: Duration,
    reconsume_local_delay: Duration,
    await_termination_when_shutdown: Duration,
    offset_store_dir: PathBuf,
    credentials: Option<Arc<SessionCredentials>>,
    listener: Option<Listener>,
    trace: TraceSettings,
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
            namesrv_addrs: Vec::new(),
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
            instance_name: None,
            client_ip: None,
            route_config: RouteConfig::default(),
            credentials: None,
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
            trace: TraceSettings::default(),
        }
    }

    /// Traces every listener call to the trace topic (`enableMsgTrace`, off by default): a
    /// SubBefore record per message as it is handed over and a SubAfter with the outcome and the
    /// time per message, found later by `queryMsgTraceById`.
    pub fn enable_msg_trace(mut self, enable: bool) -> Self {
        self.trace.enabled = enable;
        self
    }

    /// The topic trace records go to (`customizedTraceTopic`; default `RMQ_SYS_TRACE_TOPIC`).
    pub fn customized_trace_topic(mut self, topic: impl Into<String>) -> Self {
        self.trace.topic = Some(topic.into());
        self
    }

    /// NameServers as RocketMQ writes them: `"ip:port;ip:port"`.
    pub fn namesrv_addr(mut self, addrs: &str) -> Self {
        self.namesrv_addrs = crate::namesrv::parse_namesrv_addrs(addrs);
        self
    }

    /// Signs every request with these credentials (RocketMQ's plain ACL, `AclClientRPCHook`): a
    /// broker with `aclEnable` checks them; NameServers ignore them.
    /// `None` signs nothing (the default).
    pub fn credentials(mut self, credentials: impl Into<Option<SessionCredentials>>) -> Self {
        self.credentials = credentials.into().map(Arc::new);
        self
    }

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

    /// The instance name in the client id `ip@instanceName` (default `pid#nanos`, unique per consumer).
    pub fn instance_name(mut self, name: impl Into<String>) -> Self {
        self.instance_name = Some(name.into());
        self
    }

    /// The client IP in the client id (default: the address of the default route).
    pub fn client_ip(mut self, ip: IpAddr) -> Self {
        self.client_ip = Some(ip);
        self
    }

    /// Deadline of non-pull broker calls and NameServer calls (3 s).
    pub fn rpc_timeout(mut self, d: Duration) -> Self {
        self.rpc_timeout = d;
        self.route_config.rpc_timeout = d;
        self
    }

    /// Route refresh period (`pollNameServerInterval`, 30 s).
    pub fn route_poll_interval(mut self, d: Duration) -> Self {
        self.route_config.poll_interval = d;
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

    /// Checks the options and builds the consumer (not started).
    pub fn build(self) -> Result<PushConsumer> {
        let invalid = |m: &str| ClientError::invalid_argument("buildPushConsumer", m.to_owned());
        // A group its broker could not keep a %RETRY% topic for fails here, not at every pull.
        validate_consumer_group(&self.consumer_group).map_err(|e| invalid(&e.to_string()))?;
        let listener = self.listener.clone().ok_or_else(|| invalid("messageListener is null"))?;
        if self.subscriptions.is_empty() {
            return Err(invalid("subscription is empty"));
        }
        for (topic, selector) in &self.subscriptions {
            selector.validate().map_err(|e| invalid(&format!("the SQL92 subscription of {topic} is invalid: {e}")))?;
        }
        if !(1..=L::CONSUMER_PULL_BATCH_SIZE_MAX_COUNT).contains(&self.pull_batch_size) {
            return Err(invalid("pullBatchSize out of range [1, 1024]"));
        }
        if !(1..=L::CONSUMER_CONSUME_THREADS_MAX_COUNT).contains(&self.consume_threads) {
            return Err(invalid("consumeThreadMax out of range [1, 1000]"));
        }
        if !(1..=1024).contains(&self.consume_message_batch_max_size) {
            return Err(invalid("consumeMessageBatchMaxSize out of range [1, 1024]"));
        }
        if self.pull_threshold_for_queue == 0 || self.pull_threshold_for_queue_bytes == 0 {
            return Err(invalid("pull thresholds must be positive"));
        }
        let ip = self.client_ip.unwrap_or_else(crate::producer::local_ip);
        let instance = self.instance_name.clone().unwrap_or_else(default_instance_name);
        let client_id = format!("{ip}@{instance}");
        let client = Arc::new(ClientInstance::new(
            &self.consumer_group,
            client_id.clone(),
            self.namesrv_addrs.clone(),
            self.route_config.clone(),
            self.rpc_timeout,
            self.credentials.clone(),
        )?);
        let mut subscriptions = BTreeMap::new();
        let version = now_ms();
        for (topic, selector) in &self.subscriptions {
            subscriptions.insert(topic.clone(), selector.subscription_data(topic, version));
        }
        let group_retry_topic = retry_topic(&self.consumer_group);
        if self.message_model == MessageModel::Clustering {
            // Redelivered messages of the group come back on its retry topic (`copySubscription`).
            subscriptions.insert(group_retry_topic.clone(), build_subscription_data(&group_retry_topic, "*", version));
        }
        // Java shares one client instance between the consumer and its inner producer; ours is a
        // producer of its own, started with the consumer and used only when a send-back fails.
        let retry_producer = Producer::builder(CLIENT_INNER_PRODUCER_GROUP)
            .namesrv_addrs(self.namesrv_addrs.clone())
            .instance_name(instance.clone())
            .client_ip(ip)
            .route_poll_interval(self.route_config.poll_interval)
            .credentials(self.credentials.as_deref().cloned())
            .build()?;
        let trace = trace_dispatcher(
            &self.trace,
            "buildPushConsumer",
            &self.consumer_group,
            TraceRole::Consume,
            self.namesrv_addrs.clone(),
            self.credentials.as_deref().cloned(),
            ip,
        )?;
        let offset_store = match self.message_model {
            MessageModel::Clustering => OffsetStore::Remote(RemoteBrokerOffsetStore::new(client.clone())),
            MessageModel::Broadcasting => {
                OffsetStore::Local(LocalFileOffsetStore::new(&self.offset_store_dir, &client_id, &self.consumer_group))
            }
        };
        let inner = PushInner {
            consume_pool: ConsumePool::new(
                &format!("ConsumeMessageThread_{}", self.consumer_group),
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

/// `pid#nanos`: distinct for every consumer of a process, as 4.9.x's `changeInstanceNameToPID`.
pub(crate) fn default_instance_name() -> String {
    let nanos = SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_nanos()).unwrap_or(0);
    format!("{}#{nanos}", std::process::id())
}

/// Counters a [`PushConsumer`] keeps, for monitoring and tests.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ConsumerStats {
    /// PULL_MESSAGE responses handled.
    pub pulls: u64,
    /// Times a pull was held back because a queue's cache was full (`queueFlowControlTimes`).
    pub flow_control_times: u64,
    /// Messages whose listener call succeeded.
    pub consume_ok: u64,
    /// Messages whose listener call failed.
    pub consume_failed: u64,
    /// Completed rebalances.
    pub rebalances: u64,
}

#[derive(Debug, Default)]
struct Stats {
    pulls: AtomicU64,
    flow_control_times: AtomicU64,
    consume_ok: AtomicU64,
    consume_failed: AtomicU64,
    rebalances: AtomicU64,
}

struct PushInner {
    config: PushConsumerBuilder,
    client: Arc<ClientInstance>,
    /// Sends failed messages to the retry topic when CONSUMER_SEND_MSG_BACK fails.
    retry_producer: Producer,
    offset_store: OffsetStore,
    subscriptions: BTreeMap<String, SubscriptionData>,
    listener: Listener,
    process_queues: Mutex<BTreeMap<MessageQueue, Arc<ProcessQueue>>>,
    /// Held by an orderly task across listener calls (`MessageQueueLock`).
    mq_locks: Mutex<HashMap<MessageQueue, Arc<tokio::sync::Mutex<()>>>>,
    /// Listener threads (`consumeThreadMax`).
    consume_pool: ConsumePool,
    /// `%RETRY%<group>`, looked for in every consumed batch.
    retry_topic: String,
    shutdown: CancellationToken,
    /// Pull loops and timers.
    tasks: TaskTracker,
    /// Listener calls.
    consume_tasks: TaskTracker,
    state: AtomicU8,
    assignment: watch::Sender<BTreeSet<MessageQueue>>,
    /// Broker addresses that have had a heartbeat from this consumer.
    heartbeated: Mutex<BTreeSet<String>>,
    stats: Stats,
    epoch: Instant,
    /// Wall-clock ms of `start` (0 before).
    started_at_ms: std::sync::atomic::AtomicI64,
    /// Per-topic rates for GET_CONSUMER_RUNNING_INFO's `statusTable`.
    topic_stats: TopicRates,
    /// The trace dispatcher, with `enable_msg_trace`.
    trace: Option<Arc<TraceDispatcher>>,
}

/// A push consumer; clones share it.
#[derive(Clone)]
pub struct PushConsumer {
    inner: Arc<PushInner>,
}

impl std::fmt::Debug for PushConsumer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PushConsumer")
            .field("consumer_group", &self.inner.config.consumer_group)
            .field("client_id", &self.inner.client.client_id)
            .finish()
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // Critical sections are single map operations; a poisoned map is still consistent.
    m.lock().unwrap_or_else(|p| p.into_inner())
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
        &self.inner.config.consumer_group
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
                    _ = tokio::time::sleep(me.config.rebalance_interval) => {}
                }
            }
        });
        let me = inner.clone();
        every(inner, inner.config.heartbeat_interval, move || {
            let me = me.clone();
            async move { me.send_heartbeat().await }
        });
        let me = inner.clone();
        every(inner, inner.config.persist_interval, move || {
            let me = me.clone();
            async move { me.persist_all().await }
        });
        if inner.is_orderly() && inner.config.message_model == MessageModel::Clustering {
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
        if inner.is_orderly() && inner.config.message_model == MessageModel::Clustering {
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

impl PushInner {
    fn is_orderly(&self) -> bool {
        matches!(self.listener, Listener::Orderly(_))
    }

    fn clustering(&self) -> bool {
        self.config.message_model == MessageModel::Clustering
    }

    fn topics(&self) -> Vec<String> {
        self.subscriptions.keys().cloned().collect()
    }

    fn heartbeat_addrs(&self) -> BTreeSet<String> {
        self.client.broker_addrs_of(&self.topics())
    }

    fn heartbeat_data(&self) -> HeartbeatData {
        HeartbeatData {
            client_id: self.client.client_id.clone(),
            consumer_data_set: vec![ConsumerData {
                consume_from_where: self.config.consume_from.as_consume_from_where(),
                consume_type: ConsumeType::ConsumePassively,
                group_name: self.config.consumer_group.clone(),
                message_model: self.config.message_model,
                subscription_data_set: self.subscriptions.values().cloned().collect(),
                unit_mode: false,
            }],
            producer_data_set: Vec::new(),
        }
    }

    async fn send_heartbeat(&self) {
        let addrs = self.heartbeat_addrs();
        self.client.send_heartbeat(&addrs, &self.heartbeat_data()).await;
        lock(&self.heartbeated).extend(addrs);
    }

    /// Heartbeats the brokers that routes named since the last heartbeat (a topic created after the
    /// consumer started, a new leader): until a broker knows the consumer, the group's consumer list
    /// lacks it and rebalancing would give it nothing for a whole heartbeat period.
    async fn heartbeat_new_brokers(&self) {
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
    fn running_info(&self) -> ConsumerRunningInfo {
        let c = &self.config;
        let mut properties =
            self.client.running_properties(c.message_model, &c.namesrv_addrs, ConsumeType::ConsumePassively);
        let mut put = |k: &str, v: String| {
            properties.insert(k.to_owned(), v);
        };
        put("consumeFromWhere", json_text(&c.consume_from.as_consume_from_where()));
        put("allocateMessageQueueStrategy", format!("{:?}", c.allocate_strategy));
        put("pullBatchSize", c.pull_batch_size.to_string());
        put("pullThresholdForQueue", c.pull_threshold_for_queue.to_string());
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
    async fn consume_directly(&self, msg: MessageExt, broker_name: String) -> ConsumeMessageDirectlyResult {
        let mq = MessageQueue::new(msg.message.topic.as_str(), &broker_name, msg.queue_id);
        let mut msgs = vec![msg];
        self.reset_retry_topic(&mut msgs);
        let started = std::time::Instant::now();
        let (order, outcome) = match self.listener.clone() {
            Listener::Concurrently(listener) => {
                let mut ctx = ConsumeConcurrentlyContext {
                    message_queue: mq,
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
    fn record_consume(
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
    fn trace_before(&self, msgs: &[MessageExt]) -> Option<TraceContext> {
        self.trace.as_ref()?.sub_before(&self.config.consumer_group, msgs)
    }

    /// The SubAfter of the listener's outcome ([`TraceDispatcher::sub_after`]).
    fn trace_after(
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

    fn assigned(&self) -> BTreeSet<MessageQueue> {
        lock(&self.process_queues).keys().cloned().collect()
    }

    async fn persist_all(&self) {
        let mqs = self.assigned();
        self.offset_store.persist_all(&mqs).await;
    }

    fn mq_lock(&self, mq: &MessageQueue) -> Arc<tokio::sync::Mutex<()>> {
        lock(&self.mq_locks).entry(mq.clone()).or_default().clone()
    }

    fn max_reconsume_times(&self) -> i32 {
        match self.config.max_reconsume_times {
            -1 if self.is_orderly() => i32::MAX,
            -1 => L::CONSUMER_MAX_RECONSUME_TIMES_DEFAULT_COUNT,
            n => n,
        }
    }

    // ---- rebalance ----

    async fn do_rebalance(self: &Arc<Self>) {
        self.heartbeat_new_brokers().await;
        for topic in self.topics() {
            let mqs = match self.client.subscribe_queues(&topic).await {
                Ok(mqs) => mqs,
                Err(e) => {
                    tracing::debug!(topic, error = %e, "rebalance: no route for topic");
                    continue;
                }
            };
            let allocated: BTreeSet<MessageQueue> = if self.clustering() {
                let cids = match self.client.find_consumer_ids(&topic).await {
                    Ok(cids) if !cids.is_empty() => cids,
                    Ok(_) => continue,
                    Err(e) => {
                        tracing::warn!(topic, error = %e, "rebalance: consumer list unavailable");
                        continue;
                    }
                };
                let all: Vec<MessageQueue> = mqs.into_iter().collect();
                allocate(self.config.allocate_strategy, &self.client.client_id, &all, &cids).into_iter().collect()
            } else {
                mqs
            };
            self.update_process_queue_table(&topic, allocated).await;
        }
        self.assignment.send_replace(self.assigned());
        self.stats.rebalances.fetch_add(1, Ordering::Relaxed);
    }

    async fn update_process_queue_table(self: &Arc<Self>, topic: &str, allocated: BTreeSet<MessageQueue>) {
        let current: Vec<(MessageQueue, Arc<ProcessQueue>)> = lock(&self.process_queues)
            .iter()
            .filter(|(mq, _)| mq.topic == topic)
            .map(|(mq, pq)| (mq.clone(), pq.clone()))
            .collect();
        for (mq, pq) in &current {
            if !allocated.contains(mq) {
                self.release_queue(mq, pq, None).await;
            }
        }
        let have: BTreeSet<MessageQueue> = current.into_iter().map(|(mq, _)| mq).collect();
        for mq in allocated.difference(&have) {
            if let Err(e) = self.add_queue(mq).await {
                tracing::warn!(mq = ?mq, error = %e, "rebalance: queue not taken this round");
            }
        }
    }

    /// Applies the offset resets the brokers pushed (`MQClientInstance.resetOffset`): each held
    /// queue in a table is released as by a rebalance, its cached messages dropped and the new
    /// offset stored in their place; the rebalance that follows takes it again from that offset.
    /// Runs on the rebalance task, so it never interleaves with a rebalance.
    async fn apply_offset_resets(self: &Arc<Self>) {
        for (topic, table) in self.client.take_offset_resets() {
            if !self.subscriptions.contains_key(&topic) {
                tracing::info!(topic, "offset reset for a topic this consumer does not subscribe; ignored");
                continue;
            }
            let held: Vec<(MessageQueue, Arc<ProcessQueue>, i64)> = lock(&self.process_queues)
                .iter()
                .filter_map(|(mq, pq)| table.get(mq).map(|offset| (mq.clone(), pq.clone(), *offset)))
                .collect();
            for (mq, pq, offset) in held {
                tracing::info!(mq = ?mq, offset, "resetting the queue's offset");
                self.release_queue(&mq, &pq, Some(offset)).await;
            }
        }
    }

    /// Drops a queue: no pull or listener task commits for it any more; its offset (`reset` if
    /// given, else where consumption got to) is stored two-way before an orderly lock is released.
    async fn release_queue(&self, mq: &MessageQueue, pq: &Arc<ProcessQueue>, reset: Option<i64>) {
        pq.set_dropped();
        if let Some(offset) = reset {
            self.offset_store.update_offset(mq, offset, false);
        }
        lock(&self.process_queues).remove(mq);
        if self.is_orderly() && self.clustering() {
            // Unlock only once no listener call runs on the queue, so the next owner cannot overlap it.
            let mq_lock = self.mq_lock(mq);
            let guard = tokio::time::timeout(ORDERLY_RELEASE_WAIT, mq_lock.lock_owned()).await;
            self.persist_released(mq).await;
            if guard.is_ok()
                && let Err(e) = self.client.unlock_batch(&mq.broker_name, vec![mq.clone()]).await
            {
                tracing::debug!(mq = ?mq, error = %e, "unlock failed; the broker lock will expire");
            }
        } else {
            self.persist_released(mq).await;
        }
        tracing::info!(mq = ?mq, "queue released");
    }

    /// Stores a released queue's offset two-way, so its next owner (which reads it from the broker
    /// when it takes the queue) resumes where this consumer stopped, then forgets it.
    async fn persist_released(&self, mq: &MessageQueue) {
        if let Err(e) = self.offset_store.persist_confirmed(mq).await {
            tracing::warn!(mq = ?mq, error = %e, "released queue's offset not stored; its next owner may redeliver");
        }
        self.offset_store.remove_offset(mq);
    }

    async fn add_queue(self: &Arc<Self>, mq: &MessageQueue) -> Result<()> {
        let pq = Arc::new(ProcessQueue::new(self.epoch, self.is_orderly()));
        if self.is_orderly() && self.clustering() {
            let locked = self.client.lock_batch(&mq.broker_name, vec![mq.clone()]).await?;
            if !locked.contains(mq) {
                return Err(ClientError::new(ErrorKind::Busy, "rebalance", "queue locked by another consumer")
                    .with_context("queue", format!("{}:{}", mq.broker_name, mq.queue_id)));
            }
            pq.set_locked(true);
        }
        // A value left in memory from an earlier assignment may be stale (`removeDirtyOffset`).
        self.offset_store.remove_offset(mq);
        let offset = compute_pull_from_where(&self.offset_store, &self.client, mq, self.config.consume_from).await?;
        if offset < 0 {
            return Err(ClientError::new(ErrorKind::Protocol, "rebalance", format!("bad start offset {offset}")));
        }
        lock(&self.process_queues).insert(mq.clone(), pq.clone());
        tracing::info!(mq = ?mq, offset, "queue assigned");
        let me = self.clone();
        let mq = mq.clone();
        self.tasks.spawn(async move { me.pull_loop(mq, pq, offset).await });
        Ok(())
    }

    async fn lock_all(&self) {
        let pqs: Vec<(MessageQueue, Arc<ProcessQueue>)> =
            lock(&self.process_queues).iter().map(|(mq, pq)| (mq.clone(), pq.clone())).collect();
        let mut by_broker: BTreeMap<String, Vec<(MessageQueue, Arc<ProcessQueue>)>> = BTreeMap::new();
        for (mq, pq) in pqs {
            by_broker.entry(mq.broker_name.clone()).or_default().push((mq, pq));
        }
        for (broker, entries) in by_broker {
            let mqs = entries.iter().map(|(mq, _)| mq.clone()).collect();
            match self.client.lock_batch(&broker, mqs).await {
                Ok(locked) => {
                    for (mq, pq) in &entries {
                        pq.set_locked(locked.contains(mq));
                    }
                }
                Err(e) => tracing::warn!(broker, error = %e, "lock renewal failed"),
            }
        }
    }

    async fn unlock_all(&self) {
        let mut by_broker: BTreeMap<String, Vec<MessageQueue>> = BTreeMap::new();
        for mq in self.assigned() {
            by_broker.entry(mq.broker_name.clone()).or_default().push(mq);
        }
        for (broker, mqs) in by_broker {
            if let Err(e) = self.client.unlock_batch(&broker, mqs).await {
                tracing::debug!(broker, error = %e, "unlock at shutdown failed; the broker lock will expire");
            }
        }
    }

    // ---- pulling ----

    /// Why the queue must not be pulled now, if it must not.
    fn flow_control(&self, pq: &ProcessQueue) -> Option<&'static str> {
        if pq.msg_count() > self.config.pull_threshold_for_queue {
            return Some("cached message count");
        }
        if pq.msg_size_bytes() > self.config.pull_threshold_for_queue_bytes {
            return Some("cached message size");
        }
        if !self.is_orderly() && pq.max_span() > self.config.consume_concurrently_max_span {
            return Some("offset span");
        }
        if self.is_orderly() && self.clustering() && !pq.is_locked() {
            return Some("queue not locked");
        }
        None
    }

    /// Waits until `pq` has room (or is dropped / the consumer stops). Returns false to stop pulling.
    async fn wait_for_space(&self, pq: &ProcessQueue) -> bool {
        let notified = pq.space.notified();
        tokio::pin!(notified);
        notified.as_mut().enable();
        // Checked again after registering, so a removal in between is not missed.
        if self.flow_control(pq).is_some() && !pq.is_dropped() {
            tokio::select! {
                biased;
                _ = self.shutdown.cancelled() => return false,
                _ = &mut notified => {}
            }
        }
        !pq.is_dropped()
    }

    async fn pause(&self, d: Duration) -> bool {
        tokio::select! {
            biased;
            _ = self.shutdown.cancelled() => false,
            _ = tokio::time::sleep(d) => true,
        }
    }

    async fn pull_loop(self: Arc<Self>, mq: MessageQueue, pq: Arc<ProcessQueue>, mut offset: i64) {
        let Some(sub) = self.subscriptions.get(&mq.topic).cloned() else { return };
        let mut broker_id = MASTER_ID;
        loop {
            if pq.is_dropped() || self.shutdown.is_cancelled() {
                return;
            }
            if let Some(reason) = self.flow_control(&pq) {
                self.stats.flow_control_times.fetch_add(1, Ordering::Relaxed);
                tracing::debug!(mq = ?mq, reason, "flow control: pull paused");
                if !self.wait_for_space(&pq).await {
                    return;
                }
                continue;
            }
            let pull_started = Instant::now();
            match self.pull_once(&mq, &sub, offset, broker_id).await {
                Ok(result) => {
                    self.stats.pulls.fetch_add(1, Ordering::Relaxed);
                    let answered = Instant::now();
                    pq.mark_pulled(answered.into_std());
                    let rt_ms = u64::try_from((answered - pull_started).as_millis()).unwrap_or(u64::MAX);
                    let second = (answered - self.epoch).as_secs();
                    self.topic_stats.pulled(&mq.topic, second, rt_ms, result.msgs.len());
                    broker_id = result.suggest_which_broker_id;
                    let previous = offset;
                    offset = result.next_begin_offset;
                    match result.status {
                        PullStatus::Found if !result.msgs.is_empty() => self.submit(&mq, &pq, result.msgs),
                        PullStatus::Found | PullStatus::NoNewMsg | PullStatus::NoMatchedMsg => {
                            // Nothing cached: the filtered-out range counts as consumed (`correctTagsOffset`).
                            if pq.msg_count() == 0 && self.clustering() {
                                pq.unless_dropped(|| self.offset_store.update_offset(&mq, offset, true));
                            }
                        }
                        PullStatus::OffsetIllegal => {
                            tracing::warn!(mq = ?mq, previous, next = offset, "pull offset illegal; jumping");
                            pq.unless_dropped(|| self.offset_store.update_offset(&mq, offset, false));
                            if !pq.is_dropped() {
                                self.offset_store.persist(&mq).await;
                            }
                        }
                    }
                }
                Err(e) => {
                    if self.shutdown.is_cancelled() {
                        return;
                    }
                    tracing::warn!(mq = ?mq, offset, error = %e, "pull failed");
                    broker_id = MASTER_ID;
                    if !self.pause(self.config.pull_delay_when_exception).await {
                        return;
                    }
                }
            }
        }
    }

    async fn pull_once(
        &self,
        mq: &MessageQueue,
        sub: &SubscriptionData,
        offset: i64,
        broker_id: i64,
    ) -> Result<crate::consumer::pull_api::PullResult> {
        let commit_offset = if self.clustering() {
            self.offset_store.read_offset(mq, ReadOffsetType::ReadFromMemory).await?.filter(|o| *o > 0)
        } else {
            None
        };
        let found = self.client.broker_addr("pullMessage", mq, broker_id, false).await?;
        let sys_flag = pull_sys_flag::build(commit_offset.is_some() && !found.slave, true, false, false, false);
        let header = PullMessageRequestHeader {
            consumer_group: self.config.consumer_group.clone(),
            topic: mq.topic.clone(),
            queue_id: mq.queue_id,
            queue_offset: offset,
            max_msg_nums: i32::try_from(self.config.pull_batch_size).unwrap_or(i32::MAX),
            sys_flag,
            commit_offset: commit_offset.unwrap_or(0),
            suspend_timeout_millis: i64::try_from(self.config.broker_suspend_max.as_millis()).unwrap_or(i64::MAX),
            subscription: None,
            sub_version: sub.sub_version,
            expression_type: Some(sub.expression_type.clone()),
            bname: None,
        };
        let response = tokio::select! {
            biased;
            _ = self.shutdown.cancelled() => {
                return Err(ClientError::new(ErrorKind::Shutdown, "pullMessage", "consumer shutting down"));
            }
            r = self.client.pull(&found.addr, &header, self.config.pull_timeout_when_suspend) => r?,
        };
        process_pull_response(&response, sub).map_err(|e| e.with_context("addr", &found.addr))
    }

    // ---- consuming ----

    fn submit(self: &Arc<Self>, mq: &MessageQueue, pq: &Arc<ProcessQueue>, msgs: Vec<MessageExt>) {
        let dispatch = pq.put_messages(&msgs);
        match &self.listener {
            Listener::Concurrently(_) => {
                // Moved into the jobs, batch by batch: the process queue keeps only their offsets.
                let batch = self.config.consume_message_batch_max_size.max(1);
                // One queue shared by the jobs: with one message per listener call, each job copied
                // the queue's two strings here and again for its listener's context; now only there.
                let mq = Arc::new(mq.clone());
                let mut rest = msgs.into_iter().peekable();
                while rest.peek().is_some() {
                    let chunk: Vec<MessageExt> = rest.by_ref().take(batch).collect();
                    self.spawn_concurrently(mq.clone(), pq.clone(), chunk, None);
                }
            }
            Listener::Orderly(_) => {
                if dispatch {
                    let me = self.clone();
                    let (mq, pq) = (mq.clone(), pq.clone());
                    self.consume_tasks.spawn(async move { me.consume_orderly(mq, pq).await });
                }
            }
        }
    }

    /// `sendMessageBack`: CONSUMER_SEND_MSG_BACK of `msg` (as the listener saw it); when that fails,
    /// an ordinary send of its retry message to `%RETRY%<group>` by the inner producer.
    async fn send_message_back(&self, msg: &MessageExt, mq: &MessageQueue, delay_level: i32) -> Result<()> {
        let max = self.max_reconsume_times();
        let Err(e) = self.client.send_message_back(msg, mq, delay_level, max).await else { return Ok(()) };
        tracing::debug!(mq = ?mq, offset = msg.queue_offset, error = %e, "send-back failed; sending to the retry topic");
        let retry = retry_message(msg, &self.config.consumer_group, max);
        self.retry_producer.send(retry).await.map(|_| ())
    }

    /// `resetRetryAndNamespace`: a redelivered message shows its original topic.
    fn reset_retry_topic(&self, msgs: &mut [MessageExt]) {
        for msg in msgs {
            if msg.message.topic == self.retry_topic
                && let Some(original) = msg.message.property(properties::RETRY_TOPIC).map(CompactString::from)
            {
                msg.message.topic = original;
            }
        }
    }

    fn spawn_concurrently(
        self: &Arc<Self>,
        mq: Arc<MessageQueue>,
        pq: Arc<ProcessQueue>,
        msgs: Vec<MessageExt>,
        delay: Option<Duration>,
    ) {
        let Some(d) = delay else { return self.consume_concurrently(mq, pq, msgs) };
        let me = self.clone();
        self.consume_tasks.spawn(async move {
            if me.pause(d).await {
                me.consume_concurrently(mq, pq, msgs);
            }
        });
    }

    /// Hands one batch to a listener thread. The common outcome, every message consumed, is settled
    /// on that thread (it only touches the process queue and the offset table); anything else
    /// (send-back, reconsume, a panic) goes back to the runtime. So a consumed message costs one
    /// hand-off, not a task, a hand-off and a wake-up back.
    fn consume_concurrently(self: &Arc<Self>, mq: Arc<MessageQueue>, pq: Arc<ProcessQueue>, msgs: Vec<MessageExt>) {
        if pq.is_dropped() || self.shutdown.is_cancelled() {
            return;
        }
        let Listener::Concurrently(listener) = self.listener.clone() else { return };
        let me = self.clone();
        // Shutdown waits for a queued or running job as for a task.
        let token = self.consume_tasks.token();
        let runtime = tokio::runtime::Handle::current();
        // The pool can refuse a job only while it has no thread and cannot start one; keep what
        // reconsuming the batch needs then (a copy only until the first thread exists).
        let fallback = (!self.consume_pool.has_threads()).then(|| (mq.clone(), pq.clone(), msgs.clone()));
        let job = move || {
            // Re-checked here: the job may have waited in the pool's queue while the queue was dropped
            // or the consumer shut down; its messages are then not consumed and their offset is not
            // committed (delivered again, never lost).
            if pq.is_dropped() || me.shutdown.is_cancelled() {
                return;
            }
            let view = me.retry_view(&msgs);
            let mut ctx = ConsumeConcurrentlyContext {
                message_queue: (*mq).clone(),
                delay_level_when_next_consume: 0,
                ack_index: i32::MAX,
            };
            let seen = view.as_deref().unwrap_or(&msgs);
            let traced = me.trace_before(seen);
            let call_started = std::time::Instant::now();
            let (status, outcome) =
                match std::panic::catch_unwind(AssertUnwindSafe(|| listener.consume_message(seen, &mut ctx))) {
                    Ok(ConsumeConcurrentlyStatus::ConsumeSuccess) => {
                        (ConsumeConcurrentlyStatus::ConsumeSuccess, ConsumeReturnType::Success)
                    }
                    Ok(ConsumeConcurrentlyStatus::ReconsumeLater) => {
                        (ConsumeConcurrentlyStatus::ReconsumeLater, ConsumeReturnType::Failed)
                    }
                    Err(_) => {
                        tracing::warn!(mq = ?mq, "listener panicked; reconsuming later");
                        ctx.ack_index = -1;
                        (ConsumeConcurrentlyStatus::ReconsumeLater, ConsumeReturnType::Exception)
                    }
                };
            me.trace_after(traced, outcome, call_started, seen.len());
            let ok = consumed_count(status, &ctx, msgs.len());
            me.record_consume(&mq, &pq, call_started, ok, msgs.len() - ok);
            if me.settle_if_all_consumed(status, &ctx, &mq, &pq, &msgs) {
                return;
            }
            let view = view.unwrap_or_else(|| msgs.clone());
            let inner = me.clone();
            me.consume_tasks.spawn_on(
                async move { inner.process_consume_result(status, ctx, &mq, &pq, msgs, view).await },
                &runtime,
            );
            drop(token);
        };
        if let Err(e) = self.consume_pool.execute(job) {
            let Some((mq, pq, msgs)) = fallback else {
                // Unreachable (a pool with a thread accepts every job); the batch stays cached.
                tracing::error!(error = %e, "cannot run the listener");
                return;
            };
            // As a listener that failed: sent back (or retried locally), so the queue moves on.
            tracing::error!(mq = ?mq, error = %e, "cannot run the listener; reconsuming the batch later");
            let ctx = ConsumeConcurrentlyContext {
                message_queue: (*mq).clone(),
                delay_level_when_next_consume: 0,
                ack_index: -1,
            };
            let me = self.clone();
            self.consume_tasks.spawn(async move {
                let view = me.retry_view(&msgs).unwrap_or_else(|| msgs.clone());
                me.process_consume_result(ConsumeConcurrentlyStatus::ReconsumeLater, ctx, &mq, &pq, msgs, view).await;
            });
        }
    }

    /// What the listener sees: the cached messages, or copies with their original topics restored
    /// when some come from the group's retry topic (`resetRetryAndNamespace`).
    fn retry_view(&self, msgs: &[MessageExt]) -> Option<Vec<MessageExt>> {
        if !msgs.iter().any(|m| m.message.topic == self.retry_topic) {
            return None;
        }
        let mut view = msgs.to_vec();
        self.reset_retry_topic(&mut view);
        Some(view)
    }

    /// [`Self::process_consume_result`] for the case where the listener consumed the whole batch,
    /// which needs no I/O; returns false (and does nothing) otherwise.
    fn settle_if_all_consumed(
        &self,
        status: ConsumeConcurrentlyStatus,
        ctx: &ConsumeConcurrentlyContext,
        mq: &MessageQueue,
        pq: &ProcessQueue,
        msgs: &[MessageExt],
    ) -> bool {
        if consumed_count(status, ctx, msgs.len()) < msgs.len() {
            return false;
        }
        self.stats.consume_ok.fetch_add(msgs.len() as u64, Ordering::Relaxed);
        if let Some(offset) = pq.remove_messages(msgs) {
            pq.unless_dropped(|| self.offset_store.update_offset(mq, offset, true));
        }
        true
    }

    /// `ConsumeMessageConcurrentlyService.processConsumeResult`. `msgs` are the cached messages,
    /// `view` what the listener saw (original topics restored).
    async fn process_consume_result(
        self: &Arc<Self>,
        status: ConsumeConcurrentlyStatus,
        ctx: ConsumeConcurrentlyContext,
        mq: &MessageQueue,
        pq: &Arc<ProcessQueue>,
        msgs: Vec<MessageExt>,
        view: Vec<MessageExt>,
    ) {
        let n = msgs.len();
        let ok = consumed_count(status, &ctx, n);
        self.stats.consume_ok.fetch_add(ok as u64, Ordering::Relaxed);
        self.stats.consume_failed.fetch_add((n - ok) as u64, Ordering::Relaxed);
        let mut back_failed: Vec<MessageExt> = Vec::new();
        if self.clustering() {
            for (cached, seen) in msgs.iter().zip(view.iter()).skip(ok) {
                let delay = ctx.delay_level_when_next_consume;
                if let Err(e) = self.send_message_back(seen, mq, delay).await {
                    tracing::warn!(mq = ?mq, offset = cached.queue_offset, error = %e, "send-back failed; reconsuming locally");
                    let mut again = cached.clone();
                    again.reconsume_times = again.reconsume_times.saturating_add(1);
                    back_failed.push(again);
                }
            }
        } else if ok < n {
            tracing::warn!(mq = ?mq, failed = n - ok, "broadcasting: failed messages are dropped");
        }
        let done: Vec<MessageExt> =
            msgs.into_iter().filter(|m| !back_failed.iter().any(|f| f.queue_offset == m.queue_offset)).collect();
        if !back_failed.is_empty() {
            self.spawn_concurrently(
                Arc::new(mq.clone()),
                pq.clone(),
                back_failed,
                Some(self.config.reconsume_local_delay),
            );
        }
        if let Some(offset) = pq.remove_messages(&done) {
            pq.unless_dropped(|| self.offset_store.update_offset(mq, offset, true));
        }
    }

    async fn consume_orderly(self: Arc<Self>, mq: MessageQueue, pq: Arc<ProcessQueue>) {
        let mq_lock = self.mq_lock(&mq);
        let _queue_guard = tokio::select! {
            biased;
            _ = self.shutdown.cancelled() => return,
            g = mq_lock.lock_owned() => g,
        };
        let Listener::Orderly(listener) = self.listener.clone() else { return };
        let suspend_ms = i64::try_from(self.config.suspend_current_queue_time.as_millis()).unwrap_or(i64::MAX);
        loop {
            if pq.is_dropped() || self.shutdown.is_cancelled() {
                return;
            }
            if self.clustering() && (!pq.is_locked() || pq.is_lock_expired(L::CONSUMER_LOCK_MAX_LIVE_MS)) {
                match self.client.lock_batch(&mq.broker_name, vec![mq.clone()]).await {
                    Ok(set) if set.contains(&mq) => pq.set_locked(true),
                    _ => {
                        pq.set_locked(false);
                        if !self.pause(self.config.suspend_current_queue_time).await {
                            return;
                        }
                        continue;
                    }
                }
            }
            let mut msgs = pq.take_messages(self.config.consume_message_batch_max_size);
            if msgs.is_empty() {
                return;
            }
            self.reset_retry_topic(&mut msgs);
            if self.shutdown.is_cancelled() {
                return;
            }
            let listener = listener.clone();
            let mut ctx =
                ConsumeOrderlyContext { message_queue: mq.clone(), suspend_current_queue_time_millis: suspend_ms };
            let batch = msgs.clone();
            let traced = self.trace_before(&msgs);
            let call_started = std::time::Instant::now();
            let call = self.consume_pool.run(move || {
                let status = listener.consume_message(&batch, &mut ctx);
                (status, ctx)
            });
            let (status, suspend, outcome) = match call.await {
                Ok((status, ctx)) => {
                    let outcome = match status {
                        ConsumeOrderlyStatus::Success => ConsumeReturnType::Success,
                        ConsumeOrderlyStatus::SuspendCurrentQueueAMoment => ConsumeReturnType::Failed,
                    };
                    (status, ctx.suspend_current_queue_time_millis, outcome)
                }
                Err(e) => {
                    tracing::warn!(mq = ?mq, error = %e, "orderly listener panicked; suspending the queue");
                    (ConsumeOrderlyStatus::SuspendCurrentQueueAMoment, suspend_ms, ConsumeReturnType::Exception)
                }
            };
            self.trace_after(traced, outcome, call_started, msgs.len());
            let ok = if status == ConsumeOrderlyStatus::Success { msgs.len() } else { 0 };
            self.record_consume(&mq, &pq, call_started, ok, msgs.len() - ok);
            match status {
                ConsumeOrderlyStatus::Success => {
                    self.stats.consume_ok.fetch_add(msgs.len() as u64, Ordering::Relaxed);
                    if let Some(offset) = pq.commit() {
                        pq.unless_dropped(|| self.offset_store.update_offset(&mq, offset, false));
                    }
                }
                ConsumeOrderlyStatus::SuspendCurrentQueueAMoment => {
                    self.stats.consume_failed.fetch_add(msgs.len() as u64, Ordering::Relaxed);
                    if self.give_up_orderly(&mq, &msgs).await {
                        if let Some(offset) = pq.commit() {
                            pq.unless_dropped(|| self.offset_store.update_offset(&mq, offset, false));
                        }
                        continue;
                    }
                    pq.make_messages_to_consume_again(&msgs);
                    let pause = Duration::from_millis(u64::try_from(suspend.max(10)).unwrap_or(10));
                    if !self.pause(pause).await {
                        return;
                    }
                }
            }
        }
    }

    /// Orderly `checkReconsumeTimes`: once a batch has been retried `maxReconsumeTimes`, its messages
    /// go to the broker (DLQ) so the queue can move on. Returns whether the batch is done with.
    async fn give_up_orderly(&self, mq: &MessageQueue, msgs: &[MessageExt]) -> bool {
        let max = self.max_reconsume_times();
        if !msgs.iter().any(|m| m.reconsume_times >= max) {
            return false;
        }
        for msg in msgs {
            if let Err(e) = self.send_message_back(msg, mq, -1).await {
                tracing::warn!(mq = ?mq, error = %e, "orderly send-back failed; suspending the queue");
                return false;
            }
        }
        true
    }
}

/// How many of a batch of `n` the listener consumed (`ackIndex + 1` on success, none otherwise).
fn consumed_count(status: ConsumeConcurrentlyStatus, ctx: &ConsumeConcurrentlyContext, n: usize) -> usize {
    match status {
        ConsumeConcurrentlyStatus::ConsumeSuccess => {
            usize::try_from(ctx.ack_index.saturating_add(1)).unwrap_or(0).min(n)
        }
        ConsumeConcurrentlyStatus::ReconsumeLater => 0,
    }
}
