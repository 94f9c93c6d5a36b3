//! [`Producer`]: sends messages the way RocketMQ 4.x's `DefaultMQProducer` does, so a broker cannot
//! tell it from a Java client (SEND_MESSAGE_V2 / SEND_BATCH_MESSAGE, header fields `a`..`n`).
//!
//! ```text
//! send(msg) ─► validate (= broker's rules) ─► UNIQ_KEY, WAIT, compress ≥ 4 KiB ─► publish info
//!   (cache │ NameServer │ TBW102 default route) ─► attempt loop, at most 1 + retries, one deadline:
//!     MqFaultStrategy picks a queue (round-robin, avoids the last failed group and backed-off ones)
//!     ─► brokerId 0 address ─► SEND_MESSAGE_V2 ─► SUCCESS / FLUSH_* / SLAVE_NOT_AVAILABLE → SendResult
//!        retryable code → next attempt on another group; SERVICE_NOT_AVAILABLE "leader=ip:port" →
//!        the route moves to that leader and the same queue is tried there
//!        connection refused, or SERVICE_NOT_AVAILABLE without a usable hint, and no other group →
//!        failover step: the group's route is refreshed (rate-limited, shared) and the same queue
//!        tried at the new leader, or at another replica, which names the leader or takes the write
//!        timeout / connection lost after sending / no answer while the group's route moved to
//!        another leader (probed every PRODUCER_SEND_STALL_PROBE_MS) → outcome unknown: returned,
//!        never retried (the group's route is refreshed, a dropped address made suspect)
//! ```
//!
//! Invariants:
//! - Nothing touches the network before the message passed client-side validation.
//! - A send whose outcome is unknown is never retried by the producer (that could store it twice);
//!   the caller gets [`ErrorKind::Timeout`]/[`ErrorKind::OutcomeUnknown`] and may resend the same
//!   `Message`, whose `UNIQ_KEY` is kept so consumers can deduplicate.
//! - Every attempt shares the send's one deadline (`sendMsgTimeout`); attempts are bounded by
//!   [`PRODUCER_SEND_ATTEMPTS_MAX_COUNT`]. Failover steps within one group (a hint, a dead leader,
//!   a group electing) do not count as `retryTimesWhenSendFailed` tries: a leader change costs a
//!   send time, not its retries; [`FAILOVER_STEPS_MAX`] and the deadline bound them.
//! - Ordered sends (selector, sharding key, explicit queue) never move to another queue; only a
//!   failover step (hint, dead leader, group electing) retries them, on the same queue.
//! - Heartbeats (HEART_BEAT with `producerDataSet`, brokerId 0 of every cached route, at start, every
//!   [`CLIENT_HEARTBEAT_INTERVAL_DEFAULT_MS`], as soon as a topic's route is first used, and within
//!   [`PRODUCER_HEARTBEAT_ROUTE_CHECK_MS`] of a change of a group's leader address), as Java's
//!   `MQClientInstance` sends them: brokers list the group's connections for `producerConnection`,
//!   and send CHECK_TRANSACTION_STATE only to producers they know
//!   ([`crate::transaction::TransactionProducer`]). `ProducerBuilder::heartbeat(false)` turns them off.
//! - With `enable_msg_trace`, every attempt that got an answer is traced (a Pub record per message,
//!   as Java's `SendMessageTraceHookImpl`) after the answer, never before it and never delaying it;
//!   sends to the trace topic itself are not traced.

use std::collections::BTreeSet;
use std::collections::HashSet;
use std::future::Future;
use std::net::IpAddr;
use std::sync::Arc;
use std::sync::Mutex;
use std::sync::atomic::AtomicU8;
use std::sync::atomic::Ordering;
use std::time::Duration;

use bytes::Bytes;
use raftmq_common::limits::CLIENT_HEARTBEAT_INTERVAL_DEFAULT_MS;
use raftmq_common::limits::MESSAGE_BODY_SIZE_MAX_BYTES;
use raftmq_common::limits::PRODUCER_HEARTBEAT_ROUTE_CHECK_MS;
use raftmq_common::limits::PRODUCER_SEND_ATTEMPTS_MAX_COUNT;
use raftmq_common::limits::PRODUCER_SEND_STALL_PROBE_MS;
use raftmq_common::limits::RPC_TIMEOUT_DEFAULT_MS;
use raftmq_common::limits::TRACE_SEND_TIMEOUT_MS;
use raftmq_common::message::Message;
use raftmq_common::message::MessageExt;
use raftmq_common::message::MessageQueue;
use raftmq_common::message::batch::encode_batch;
use raftmq_common::message::batch::validate_batch;
use raftmq_common::message::msg_id::UniqIdGenerator;
use raftmq_common::message::msg_id::UniqIdSeed;
use raftmq_common::message::properties;
use raftmq_common::message::properties::Properties;
use raftmq_common::message::sys_flag;
use raftmq_common::message::trace::TraceBean;
use raftmq_common::message::trace::TraceContext;
use raftmq_common::message::trace::TraceMessageType;
use raftmq_common::message::trace::TraceType;
use raftmq_common::message::validate::AUTO_CREATE_TOPIC_KEY_TOPIC;
use raftmq_common::message::validate::is_retry_topic;
use raftmq_common::message::validate::validate_group;
use raftmq_common::message::validate::validate_message;
use raftmq_common::protocol::RemotingCommand;
use raftmq_common::protocol::RequestCode;
use raftmq_common::protocol::ResponseCode;
use raftmq_common::protocol::SerializeType;
use raftmq_common::protocol::body::JsonBody;
use raftmq_common::protocol::body::heartbeat::HeartbeatData;
use raftmq_common::protocol::body::heartbeat::ProducerData;
use raftmq_common::protocol::header::send::SendMessageRequestHeaderV2;
use raftmq_common::remoting::ProcessorTable;
use raftmq_common::remoting::RemotingClient;
use raftmq_common::remoting::processor_fn;
use raftmq_common::sync::lock;
use tokio::sync::Notify;
use tokio::task::JoinHandle;
use tokio::time::Instant;

use crate::body_compression::BodyCompression;
use crate::client_config::ClientConfig;
use crate::client_config::client_config_setters;
use crate::clock::now_ms;
use crate::error::ClientError;
use crate::error::ErrorKind;
use crate::error::Result;
use crate::failover::FAILOVER_STEPS_MAX;
use crate::fault_strategy::MqFaultStrategy;
use crate::namesrv::NamesrvClient;
use crate::route::TopicPublishInfo;
use crate::route::TopicRouteManager;
use crate::route::WriteTarget;
use crate::route::parse_leader_hint;
use crate::selector::MessageQueueSelector;
use crate::selector::SelectMessageQueueByHash;
use crate::send_result::SendResult;
use crate::send_result::SendStatus;
use crate::send_result::process_send_response;
use crate::trace;
use crate::trace::BoxFuture;
use crate::trace::TraceDispatcher;
use crate::trace::TraceRole;
use crate::trace::TraceSender;

/// `DefaultMQProducer.retryTimesWhenSendFailed` (and `…AsyncFailed`): 2 retries, 3 attempts.
pub const RETRY_TIMES_WHEN_SEND_FAILED_DEFAULT: u32 = 2;
/// `DefaultMQProducer.defaultTopicQueueNums`: queues a topic auto-created by a send gets per group.
pub const DEFAULT_TOPIC_QUEUE_NUMS_DEFAULT: i32 = 4;

const STATE_CREATED: u8 = 0;
const STATE_RUNNING: u8 = 1;
const STATE_SHUTDOWN: u8 = 2;

/// Builds a [`Producer`]; options mirror `DefaultMQProducer`'s fields and defaults.
#[derive(Debug, Clone)]
pub struct ProducerBuilder {
    producer_group: String,
    client: ClientConfig,
    send_timeout: Duration,
    retry_times_when_send_failed: u32,
    retry_times_when_send_async_failed: u32,
    pub(crate) compression: BodyCompression,
    max_message_size_bytes: usize,
    create_topic_key: String,
    default_topic_queue_nums: i32,
    send_latency_fault_enable: bool,
    retry_another_broker_when_not_store_ok: bool,
    serialize_type: SerializeType,
    /// Send HEART_BEAT to the groups' brokerId 0 (only the transaction producer turns it on).
    heartbeat: bool,
}

impl ProducerBuilder {
    /// The TLS settings of `config`: a producer a client builds for itself (trace, send-back)
    /// reaches the same servers the same way.
    pub(crate) fn tls_of(mut self, config: &ClientConfig) -> Self {
        self.client.use_tls = config.use_tls;
        self.client.tls = config.tls.clone();
        self
    }

    /// A builder for `producer_group` with RocketMQ's defaults (3 s timeout, 2 retries, compress
    /// ≥ 4 KiB, 4 MiB max, TBW102 with 4 queues) and latency fault avoidance on.
    pub fn new(producer_group: impl Into<String>) -> Self {
        ProducerBuilder {
            producer_group: producer_group.into(),
            client: ClientConfig::default(),
            send_timeout: Duration::from_millis(RPC_TIMEOUT_DEFAULT_MS),
            retry_times_when_send_failed: RETRY_TIMES_WHEN_SEND_FAILED_DEFAULT,
            retry_times_when_send_async_failed: RETRY_TIMES_WHEN_SEND_FAILED_DEFAULT,
            compression: BodyCompression::default(),
            max_message_size_bytes: MESSAGE_BODY_SIZE_MAX_BYTES,
            create_topic_key: AUTO_CREATE_TOPIC_KEY_TOPIC.to_owned(),
            default_topic_queue_nums: DEFAULT_TOPIC_QUEUE_NUMS_DEFAULT,
            send_latency_fault_enable: true,
            retry_another_broker_when_not_store_ok: false,
            serialize_type: SerializeType::RocketMq,
            heartbeat: true,
        }
    }

    // namesrv_addr(s), credentials, instance_name, client_ip, route_poll_interval, enable_msg_trace,
    // customized_trace_topic: the options every client shares.
    client_config_setters!(client);

    /// Deadline of one send, retries included (`sendMsgTimeout`, 3 s).
    pub fn send_timeout(mut self, timeout: Duration) -> Self {
        self.send_timeout = timeout;
        self
    }

    /// Extra attempts of a failed synchronous send (`retryTimesWhenSendFailed`, 2).
    pub fn retry_times_when_send_failed(mut self, retries: u32) -> Self {
        self.retry_times_when_send_failed = retries;
        self
    }

    /// Extra attempts of a failed asynchronous send (`retryTimesWhenSendAsyncFailed`, 2).
    pub fn retry_times_when_send_async_failed(mut self, retries: u32) -> Self {
        self.retry_times_when_send_async_failed = retries;
        self
    }

    /// Bodies of at least this many bytes are compressed (`compressMsgBodyOverHowmuch`, 4 KiB;
    /// the algorithm: [`ProducerBuilder::compress_type`]).
    pub fn compress_over_bytes(mut self, bytes: usize) -> Self {
        self.compression.over_bytes = bytes;
        self
    }

    /// The compression of large bodies (`compressType`: ZLIB by default, LZ4 or ZSTD as RocketMQ 5).
    pub fn compress_type(mut self, kind: sys_flag::CompressionType) -> Self {
        self.compression.kind = kind;
        self
    }

    /// The ZSTD level (`compressLevel`, 5).
    pub fn compress_level(mut self, level: i32) -> Self {
        self.compression.level = level;
        self
    }

    /// Largest body (or encoded batch) accepted (`maxMessageSize`, 4 MiB).
    pub fn max_message_size_bytes(mut self, bytes: usize) -> Self {
        self.max_message_size_bytes = bytes;
        self
    }

    /// The template topic for auto-creation (`createTopicKey`, `TBW102`).
    pub fn create_topic_key(mut self, topic: impl Into<String>) -> Self {
        self.create_topic_key = topic.into();
        self
    }

    /// Queues per group of a topic auto-created by a send (`defaultTopicQueueNums`, 4).
    pub fn default_topic_queue_nums(mut self, nums: i32) -> Self {
        self.default_topic_queue_nums = nums;
        self
    }

    /// Deadline of a NameServer call (`mqClientApiTimeout`, 3 s).
    pub fn namesrv_timeout(mut self, timeout: Duration) -> Self {
        self.client.route_config.rpc_timeout = timeout;
        self
    }

    /// Latency-based avoidance of slow or failed groups (`sendLatencyFaultEnable`; on here, off in Java).
    pub fn send_latency_fault_enable(mut self, enable: bool) -> Self {
        self.send_latency_fault_enable = enable;
        self
    }

    /// Retry on another group when a send is stored with a non-OK status (`retryAnotherBrokerWhenNotStoreOK`).
    pub fn retry_another_broker_when_not_store_ok(mut self, enable: bool) -> Self {
        self.retry_another_broker_when_not_store_ok = enable;
        self
    }

    /// How send requests' headers are encoded (Java's `rocketmq.serialize.type`): `ROCKETMQ`, the
    /// binary form, by default here; Java clients default to `JSON`. Every 4.x broker reads both,
    /// and answers in the request's form (a few early refusals of Apache brokers come back as JSON,
    /// which the client reads as well). A send header is a dozen fields, and JSON cost about
    /// 14 % of a broker's CPU and as much of a producer's at full rate (escaped properties,
    /// quoted numbers, one more pass over each value).
    pub fn serialize_type(mut self, serialize_type: SerializeType) -> Self {
        self.serialize_type = serialize_type;
        self
    }

    /// Whether the producer heartbeats its brokers with its group, as a Java producer does (on by
    /// default; see the module docs). Brokers list heartbeating producers in
    /// GET_PRODUCER_CONNECTION_LIST (`admin producerConnection`), and a transaction producer
    /// needs it to be asked about its halves.
    pub fn heartbeat(mut self, enable: bool) -> Self {
        self.heartbeat = enable;
        self
    }

    /// The producer group this builder is for.
    pub(crate) fn group(&self) -> &str {
        &self.producer_group
    }

    /// Checks the options and builds the producer (not started).
    pub fn build(self) -> Result<Producer> {
        self.build_with_processors(ProcessorTable::new())
    }

    /// [`Self::build`], with `processors` handling the requests brokers send on the producer's
    /// connections (CHECK_TRANSACTION_STATE for a transaction producer); PUSH_REPLY_MESSAGE_TO_CLIENT
    /// is always handled, for [`Producer::request`].
    pub(crate) fn build_with_processors(self, mut processors: ProcessorTable) -> Result<Producer> {
        let invalid = |m: String| ClientError::invalid_argument("buildProducer", m);
        validate_group(&self.producer_group).map_err(|e| invalid(e.to_string()))?;
        if self.send_timeout.is_zero() {
            return Err(invalid("send timeout must be positive".into()));
        }
        if self.retry_times_when_send_failed >= PRODUCER_SEND_ATTEMPTS_MAX_COUNT
            || self.retry_times_when_send_async_failed >= PRODUCER_SEND_ATTEMPTS_MAX_COUNT
        {
            return Err(invalid(format!("at most {} retries", PRODUCER_SEND_ATTEMPTS_MAX_COUNT - 1)));
        }
        if self.default_topic_queue_nums <= 0 {
            return Err(invalid("defaultTopicQueueNums must be positive".into()));
        }
        if self.max_message_size_bytes == 0 || self.max_message_size_bytes > MESSAGE_BODY_SIZE_MAX_BYTES {
            return Err(invalid(format!("maxMessageSize must be 1..={MESSAGE_BODY_SIZE_MAX_BYTES} bytes")));
        }
        processors.register(
            RequestCode::PushReplyMessageToClient,
            Arc::new(processor_fn(move |_ctx, request| {
                let answer = crate::reply::accept_push(crate::reply::process_waiters(), &request);
                async move { Some(answer) }
            })),
        );
        // One probe of the outward address (a UDP socket) serves the dispatcher and the client id.
        let ip = self.client.ip();
        let trace = trace_dispatcher(&self.client, "buildProducer", &self.producer_group, TraceRole::Produce, ip)?;
        // Many senders share one connection per broker: requests made together leave in one write.
        let tls = self.client.client_tls("buildProducer")?;
        let remoting = RemotingClient::with_tls(processors, true, self.client.credentials.clone(), tls);
        let namesrv = NamesrvClient::new(remoting.clone(), self.client.namesrv_addrs.clone())?;
        let routes = TopicRouteManager::new(namesrv, self.client.route_config.clone());
        let instance = self.client.instance_name_or(|| std::process::id().to_string());
        let inner = ProducerInner {
            client_id: format!("{ip}@{instance}"),
            uniq: Mutex::new(UniqIdGenerator::new(UniqIdSeed::for_this_process(ip))),
            fault: Mutex::new(MqFaultStrategy::new(self.send_latency_fault_enable)),
            state: AtomicU8::new(STATE_CREATED),
            epoch: Instant::now(),
            heartbeat: HeartbeatState::default(),
            remoting,
            routes,
            trace,
            config: self,
        };
        Ok(Producer { inner: Arc::new(inner) })
    }
}

/// The trace dispatcher of a client built with `config` (`None` when it does not trace), sending
/// through a producer of its own to the same NameServers with the same credentials.
pub(crate) fn trace_dispatcher(
    config: &ClientConfig,
    op: &'static str,
    group: &str,
    role: TraceRole,
    client_ip: IpAddr,
) -> Result<Option<Arc<TraceDispatcher>>> {
    let settings = &config.trace;
    let Some(topic) = trace::trace_topic(settings.enabled, settings.topic.as_deref(), op)? else { return Ok(None) };
    let producer = Producer::builder(trace::trace_producer_group(group, role))
        .namesrv_addrs(config.namesrv_addrs.clone())
        .credentials(config.owned_credentials())
        .tls_of(config)
        .send_timeout(Duration::from_millis(TRACE_SEND_TIMEOUT_MS))
        .build()?;
    Ok(Some(Arc::new(TraceDispatcher::new(topic, Arc::new(producer), client_ip))))
}

/// A trace dispatcher sends through a producer with tracing off.
impl TraceSender for Producer {
    fn start(&self) -> BoxFuture<'_, Result<()>> {
        Box::pin(Producer::start(self))
    }

    fn send(&self, msg: Message) -> BoxFuture<'_, Result<()>> {
        Box::pin(async move { Producer::send(self, msg).await.map(|_| ()) })
    }

    fn shutdown(&self) -> BoxFuture<'_, ()> {
        Box::pin(Producer::shutdown(self))
    }

    fn close_now(&self) {
        Producer::close_now(self);
    }
}

fn request_timeout(timeout: Duration, correlation_id: &str, what: &str) -> ClientError {
    ClientError::new(ErrorKind::Timeout, "request", format!("{what} (timeout {timeout:?})"))
        .with_context("correlationId", correlation_id)
}

struct ProducerInner {
    config: ProducerBuilder,
    client_id: String,
    remoting: RemotingClient,
    routes: TopicRouteManager,
    fault: Mutex<MqFaultStrategy>,
    uniq: Mutex<UniqIdGenerator>,
    state: AtomicU8,
    /// Zero of the fault strategy's monotonic clock.
    epoch: Instant,
    heartbeat: HeartbeatState,
    /// The trace dispatcher, with `enable_msg_trace`.
    trace: Option<Arc<TraceDispatcher>>,
}

/// The heartbeat task and what wakes it early.
#[derive(Default)]
struct HeartbeatState {
    /// Topics whose route has already triggered a heartbeat.
    topics: Mutex<HashSet<String>>,
    /// Woken when a topic's route is first used, so its brokers learn the group before any check.
    wake: Arc<Notify>,
    /// Brokers a request has heartbeated before sending: they can push replies to this client.
    request_ready: Mutex<BTreeSet<String>>,
    task: Mutex<Option<JoinHandle<()>>>,
}

/// A message ready for the wire: what every attempt of one send reuses.
#[derive(Debug, Clone)]
struct Outgoing {
    topic: String,
    body: Bytes,
    sys_flag: i32,
    flag: i32,
    properties: String,
    batch: bool,
    /// UNIQ_KEY, or the batch's comma-joined UNIQ_KEYs.
    msg_id: String,
    reconsume_times: i32,
    max_reconsume_times: Option<i32>,
    /// A request/reply reply (`MSG_TYPE=reply`): sent as SEND_REPLY_MESSAGE_V2.
    reply: bool,
    /// One Pub bean per message when the send is traced (filled in by the answer), else empty.
    trace_beans: Vec<TraceBean>,
}

/// A RocketMQ producer; clones share connections, routes and fault state.
#[derive(Clone)]
pub struct Producer {
    inner: Arc<ProducerInner>,
}

impl std::fmt::Debug for Producer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Producer")
            .field("producer_group", &self.inner.config.producer_group)
            .field("client_id", &self.inner.client_id)
            .finish()
    }
}

impl Producer {
    /// A [`ProducerBuilder`] for `producer_group`.
    pub fn builder(producer_group: impl Into<String>) -> ProducerBuilder {
        ProducerBuilder::new(producer_group)
    }

    /// `ip@instanceName`.
    pub fn client_id(&self) -> &str {
        &self.inner.client_id
    }

    /// The producer group.
    pub fn producer_group(&self) -> &str {
        &self.inner.config.producer_group
    }

    /// The route cache (shared with admin-style lookups and tests).
    pub fn routes(&self) -> &TopicRouteManager {
        &self.inner.routes
    }

    /// Starts the route refresh. Starting twice is harmless; after [`Self::shutdown`] it fails.
    pub async fn start(&self) -> Result<()> {
        match self.inner.state.compare_exchange(STATE_CREATED, STATE_RUNNING, Ordering::AcqRel, Ordering::Acquire) {
            Ok(_) => {
                if let Some(trace) = &self.inner.trace {
                    trace.start();
                }
                self.inner.routes.start_polling();
                if self.inner.config.heartbeat {
                    self.start_heartbeat();
                }
                tracing::info!(producer_group = %self.producer_group(), client_id = %self.client_id(), "producer started");
                Ok(())
            }
            Err(STATE_RUNNING) => Ok(()),
            Err(_) => Err(ClientError::new(ErrorKind::Shutdown, "start", "the producer was shut down")),
        }
    }

    /// Stops the route refresh and closes every connection; later sends fail with `Shutdown`.
    pub async fn shutdown(&self) {
        if self.inner.state.swap(STATE_SHUTDOWN, Ordering::AcqRel) == STATE_SHUTDOWN {
            return;
        }
        self.inner.routes.stop_polling();
        if let Some(task) = lock(&self.inner.heartbeat.task).take() {
            task.abort();
        }
        if let Some(trace) = &self.inner.trace {
            trace.shutdown().await;
        }
        self.inner.remoting.close().await;
        tracing::info!(producer_group = %self.producer_group(), "producer shut down");
    }

    /// Stops the route refresh and the heartbeat at once, without closing connections (they close
    /// when the last clone is dropped): for a trace producer whose flush ran out of time.
    pub(crate) fn close_now(&self) {
        self.inner.state.store(STATE_SHUTDOWN, Ordering::Release);
        self.inner.routes.stop_polling();
        if let Some(task) = lock(&self.inner.heartbeat.task).take() {
            task.abort();
        }
    }

    fn check_running(&self, operation: &'static str) -> Result<()> {
        match self.inner.state.load(Ordering::Acquire) {
            STATE_RUNNING => Ok(()),
            STATE_CREATED => Err(ClientError::new(ErrorKind::Shutdown, operation, "the producer is not started")),
            _ => Err(ClientError::new(ErrorKind::Shutdown, operation, "the producer was shut down")),
        }
    }

    /// Sends `msg` and waits for the broker (`send(Message)`), retrying failed attempts on other
    /// groups. A timeout is outcome-unknown, not a failure.
    pub async fn send(&self, msg: Message) -> Result<SendResult> {
        self.send_with_retries(msg, self.inner.config.retry_times_when_send_failed).await
    }

    /// Starts sending `msg` at once and returns the result as a future (`send(msg, SendCallback)`).
    /// Must be called inside a tokio runtime.
    pub fn send_async(&self, msg: Message) -> impl Future<Output = Result<SendResult>> + Send + 'static {
        let producer = self.clone();
        let retries = self.inner.config.retry_times_when_send_async_failed;
        let task = tokio::spawn(async move { producer.send_with_retries(msg, retries).await });
        async move {
            task.await.unwrap_or_else(|e| {
                Err(ClientError::new(ErrorKind::Shutdown, "send", format!("the send task ended early: {e}")))
            })
        }
    }

    /// Sends `msg` in the background and calls `callback` with the outcome.
    pub fn send_with_callback<F>(&self, msg: Message, callback: F)
    where
        F: FnOnce(Result<SendResult>) + Send + 'static,
    {
        let send = self.send_async(msg);
        tokio::spawn(async move { callback(send.await) });
    }

    /// Request/reply (`request(Message, long timeout)`, RocketMQ 4.6+): sends `msg` as a request
    /// (CORRELATION_ID, REPLY_TO_CLIENT = this client, TTL = `timeout`) and waits up to `timeout`,
    /// the send included, for the reply a consumer sends with [`crate::reply::create_reply_message`].
    /// The broker pushes the reply to this producer's heartbeat connection, so heartbeats must be
    /// on (the default); the brokers of the topic's route are heartbeated before the first request.
    /// No reply in time is [`ErrorKind::Timeout`]: the request may still be consumed and answered.
    pub async fn request(&self, mut msg: Message, timeout: Duration) -> Result<MessageExt> {
        let op = "request";
        self.check_running(op)?;
        if !self.inner.config.heartbeat {
            return Err(ClientError::invalid_argument(
                op,
                "request/reply needs producer heartbeats: brokers push replies to the heartbeat connection",
            ));
        }
        if timeout.is_zero() {
            return Err(ClientError::invalid_argument(op, "the request timeout must be positive"));
        }
        let deadline = Instant::now() + timeout;
        let correlation_id = crate::reply::correlation_id();
        msg.properties.insert(properties::CORRELATION_ID, correlation_id.as_str());
        msg.properties.insert(properties::REPLY_TO_CLIENT, self.client_id());
        msg.properties.insert(properties::TTL, timeout.as_millis().to_string());
        let prepared = tokio::time::timeout_at(deadline, async {
            self.publish_info(&msg.topic, op).await?;
            self.heartbeat_before_request().await;
            Ok::<(), ClientError>(())
        })
        .await;
        match prepared {
            Ok(Ok(())) => {}
            Ok(Err(e)) => return Err(e),
            Err(_) => return Err(request_timeout(timeout, &correlation_id, "no route or heartbeat in time")),
        }
        let (reply, _waiting) = crate::reply::process_waiters().wait(&correlation_id);
        let sent = tokio::time::timeout_at(deadline, self.send(msg)).await;
        match sent {
            Ok(Ok(_)) => {}
            Ok(Err(e)) => return Err(e),
            Err(_) => return Err(request_timeout(timeout, &correlation_id, "the request was not sent in time")),
        }
        match tokio::time::timeout_at(deadline, reply).await {
            Ok(Ok(reply)) => Ok(reply),
            Ok(Err(_)) => Err(ClientError::new(ErrorKind::Shutdown, op, "the producer was shut down")),
            Err(_) => Err(request_timeout(timeout, &correlation_id, "no reply in time")),
        }
    }

    /// Heartbeats the brokers of the cached routes that no request has heartbeated yet, and waits
    /// for them (Java's `sendHeartbeatToAllBrokerWithLock` before a request to a new topic), so a
    /// reply pushed right after the request finds this client registered.
    /// The brokers are asked together, and each that answers is marked on its own, so one
    /// unreachable address costs one heartbeat timeout at most, and only until it answers.
    async fn heartbeat_before_request(&self) {
        let fresh: Vec<String> = {
            let ready = lock(&self.inner.heartbeat.request_ready);
            self.heartbeat_addrs().into_iter().filter(|a| !ready.contains(a)).collect()
        };
        // Dropped (the request's deadline passed), the set aborts the heartbeats still out.
        let mut asked = tokio::task::JoinSet::new();
        for addr in fresh {
            let producer = self.clone();
            asked.spawn(async move {
                let answered = producer.send_heartbeat(&BTreeSet::from([addr.clone()])).await == 1;
                (addr, answered)
            });
        }
        while let Some(joined) = asked.join_next().await {
            if let Ok((addr, true)) = joined {
                lock(&self.inner.heartbeat.request_ready).insert(addr);
            }
        }
    }

    /// Sends `msg` without waiting for the broker (`sendOneway`): one attempt, no result.
    pub async fn send_oneway(&self, mut msg: Message) -> Result<()> {
        self.check_running("sendOneway")?;
        let out = self.prepare(&mut msg, "sendOneway")?;
        let deadline = Instant::now() + self.inner.config.send_timeout;
        let info = self.publish_info_within(&out.topic, "sendOneway", deadline).await?;
        let mq = self.select_queue(&info, None).ok_or_else(|| no_queue("sendOneway", &out.topic))?;
        let addr = self.resolve_addr(&mq, "sendOneway").await?;
        let request = self.send_command(&out, &mq).into_oneway();
        let began = Instant::now();
        let result = self.inner.remoting.invoke_oneway(&addr, request, remaining(deadline)).await;
        self.update_fault(&mq.broker_name, began, result.is_err());
        result.map_err(|e| context(ClientError::remoting("sendOneway", e), &mq, &addr))
    }

    /// Sends `messages` as one SEND_BATCH_MESSAGE (`send(Collection<Message>)`): one topic, one
    /// waitStoreMsgOK, no delay, at most `maxMessageSize` encoded. `msg_id` is the comma-joined
    /// UNIQ_KEYs; `queue_offset` the first message's.
    pub async fn send_batch(&self, messages: Vec<Message>) -> Result<SendResult> {
        self.check_running("sendBatch")?;
        let out = self.prepare_batch(messages)?;
        let attempts = 1 + self.inner.config.retry_times_when_send_failed;
        self.send_default(out, attempts, "sendBatch").await
    }

    /// Sends `msg` to `mq` only (`send(Message, MessageQueue)`); no failover to other queues.
    pub async fn send_to_queue(&self, mut msg: Message, mq: &MessageQueue) -> Result<SendResult> {
        self.check_running("sendToQueue")?;
        if msg.topic != mq.topic {
            return Err(ClientError::invalid_argument("sendToQueue", "message's topic not equal mq's topic")
                .with_context("topic", &msg.topic)
                .with_context("queue", mq_label(mq)));
        }
        let out = self.prepare(&mut msg, "sendToQueue")?;
        self.send_to_fixed_queue(&out, mq.clone(), "sendToQueue").await
    }

    /// Sends `msg` to the queue `selector` picks from the topic's publish queues
    /// (`send(Message, MessageQueueSelector, Object)`); no failover to other queues.
    pub async fn send_with_selector<A, S>(&self, mut msg: Message, selector: &S, arg: &A) -> Result<SendResult>
    where
        A: ?Sized,
        S: MessageQueueSelector<A> + ?Sized,
    {
        let op = "sendWithSelector";
        self.check_running(op)?;
        let out = self.prepare(&mut msg, op)?;
        let info = self.publish_info(&out.topic, op).await?;
        let queues = info.message_queues();
        let mq = selector.select(queues, &msg, arg).and_then(|i| queues.get(i)).cloned().ok_or_else(|| {
            ClientError::invalid_argument(op, "select message queue return null").with_context("topic", &out.topic)
        })?;
        self.send_to_fixed_queue(&out, mq, op).await
    }

    /// Partition-ordered send: every message with the same `sharding_key` goes to the same queue
    /// while the route is unchanged (`SelectMessageQueueByHash`, Java-compatible hashing).
    pub async fn send_orderly(&self, msg: Message, sharding_key: &str) -> Result<SendResult> {
        self.send_with_selector(msg, &SelectMessageQueueByHash, sharding_key).await
    }

    /// A synchronous send (`send(Message)`) that leaves `msg` completed as sent (UNIQ_KEY, WAIT),
    /// so the caller can hand the very message to a transaction listener.
    pub(crate) async fn send_in_place(&self, msg: &mut Message, op: &'static str) -> Result<SendResult> {
        self.check_running(op)?;
        let out = self.prepare(msg, op)?;
        self.send_default(out, 1 + self.inner.config.retry_times_when_send_failed, op).await
    }

    /// The remoting client (sends, heartbeats and END_TRANSACTION share its connections).
    pub(crate) fn remoting(&self) -> &RemotingClient {
        &self.inner.remoting
    }

    /// `sendMsgTimeout`.
    pub(crate) fn send_timeout(&self) -> Duration {
        self.inner.config.send_timeout
    }

    /// How request headers are encoded.
    pub(crate) fn serialize_type(&self) -> SerializeType {
        self.inner.config.serialize_type
    }

    /// The heartbeat task (`startScheduledTask`'s heartbeat): one HEART_BEAT round at once, then every
    /// interval, when a topic's route is first used, and within [`PRODUCER_HEARTBEAT_ROUTE_CHECK_MS`]
    /// of a change of the groups' leader addresses (a failover, learned from a route poll or a
    /// leader hint), so a new leader knows the producer long before its first check round. Holds the
    /// producer weakly so a dropped one stops it.
    fn start_heartbeat(&self) {
        let mut task = lock(&self.inner.heartbeat.task);
        if task.is_some() {
            return;
        }
        let weak = Arc::downgrade(&self.inner);
        let wake = self.inner.heartbeat.wake.clone();
        let period = Duration::from_millis(CLIENT_HEARTBEAT_INTERVAL_DEFAULT_MS);
        *task = Some(tokio::spawn(async move {
            let mut ticker = tokio::time::interval(Duration::from_millis(PRODUCER_HEARTBEAT_ROUTE_CHECK_MS));
            ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            let mut sent_to: BTreeSet<String> = BTreeSet::new();
            let mut sent_at: Option<Instant> = None;
            loop {
                let woken = tokio::select! {
                    _ = ticker.tick() => false,
                    _ = wake.notified() => true,
                };
                let Some(inner) = weak.upgrade() else { return };
                let producer = Producer { inner };
                let addrs = producer.heartbeat_addrs();
                let due = woken || addrs != sent_to || sent_at.is_none_or(|at| at.elapsed() >= period);
                if due && !addrs.is_empty() {
                    producer.send_heartbeat(&addrs).await;
                    sent_to = addrs;
                    sent_at = Some(Instant::now());
                }
            }
        }));
    }

    /// The brokerId 0 address of every group in the cached routes (producers skip followers, as
    /// `sendHeartbeatToAllBroker` does).
    fn heartbeat_addrs(&self) -> BTreeSet<String> {
        let routes = &self.inner.routes;
        routes
            .cached_topics()
            .iter()
            .filter_map(|topic| routes.cached_route(topic))
            .flat_map(|route| route.broker_datas.into_iter())
            .filter_map(|bd| routes.broker_addr_in_publish(&bd.broker_name))
            .collect()
    }

    /// HEART_BEAT {clientID, producerDataSet: \[group\]} to `addrs`. Returns how many answered
    /// SUCCESS; failures are logged.
    async fn send_heartbeat(&self, addrs: &BTreeSet<String>) -> usize {
        if addrs.is_empty() {
            return 0;
        }
        let data = HeartbeatData {
            client_id: self.inner.client_id.clone(),
            consumer_data_set: Vec::new(),
            producer_data_set: vec![ProducerData { group_name: self.inner.config.producer_group.clone() }],
        };
        let body = match data.encode() {
            Ok(body) => Bytes::from(body),
            Err(e) => {
                tracing::error!(error = %e, "heartbeat body does not encode");
                return 0;
            }
        };
        let mut ok = 0;
        for addr in addrs {
            let mut request = RemotingCommand::request(RequestCode::HeartBeat).with_body(body.clone());
            request.serialize_type = self.inner.config.serialize_type;
            match self.inner.remoting.invoke(addr, request, self.inner.config.client.route_config.rpc_timeout).await {
                Ok(r) if r.response_code() == ResponseCode::Success => ok += 1,
                Ok(r) => {
                    tracing::warn!(addr = %addr, code = %r.response_code(), remark = ?r.remark, "heartbeat refused")
                }
                Err(e) => tracing::warn!(addr = %addr, error = %e, "heartbeat failed"),
            }
        }
        ok
    }

    /// Wakes the heartbeat task the first time `topic`'s route is used.
    fn note_route_for_heartbeat(&self, topic: &str) {
        if !self.inner.config.heartbeat {
            return;
        }
        let first = {
            let mut topics = lock(&self.inner.heartbeat.topics);
            !topics.contains(topic) && topics.insert(topic.to_owned())
        };
        if first {
            self.inner.heartbeat.wake.notify_one();
        }
    }

    async fn send_with_retries(&self, mut msg: Message, retries: u32) -> Result<SendResult> {
        self.check_running("send")?;
        let out = self.prepare(&mut msg, "send")?;
        self.send_default(out, 1 + retries, "send").await
    }

    /// Validates and completes a single message (`Validators.checkMessage`, `setUniqID`,
    /// `tryToCompressMessage`), leaving `msg` with its UNIQ_KEY and WAIT set.
    fn prepare(&self, msg: &mut Message, op: &'static str) -> Result<Outgoing> {
        validate_message(msg, self.inner.config.max_message_size_bytes)
            .map_err(|e| ClientError::invalid_argument(op, e.to_string()).with_context("topic", &msg.topic))?;
        self.complete_properties(msg);
        let mut sys_flag = 0;
        let mut body = msg.body.clone();
        if let Some((packed, flags)) = self.inner.config.compression.apply(&body) {
            (body, sys_flag) = (packed, sys_flag | flags);
        }
        if msg.is_transaction_prepared() {
            sys_flag |= sys_flag::TRANSACTION_PREPARED_TYPE;
        }
        // Messages sent back to a retry topic carry their counters in the header, not the properties.
        let mut props = msg.properties.clone();
        let (mut reconsume_times, mut max_reconsume_times) = (0, None);
        if is_retry_topic(&msg.topic) {
            if let Some(v) = props.remove(properties::RECONSUME_TIME) {
                reconsume_times = v.parse().unwrap_or(0);
            }
            max_reconsume_times = props.remove(properties::MAX_RECONSUME_TIMES).and_then(|v| v.parse().ok());
        }
        Ok(Outgoing {
            topic: msg.topic.to_string(),
            body,
            sys_flag,
            flag: msg.flag,
            properties: props.to_wire_string(),
            batch: false,
            msg_id: msg.uniq_key().unwrap_or_default().to_owned(),
            reconsume_times,
            max_reconsume_times,
            reply: crate::reply::is_reply(msg),
            trace_beans: self.trace_beans(std::slice::from_ref(msg)),
        })
    }

    /// `DefaultMQProducer.batch`: the batch rules, each message validated and given a UNIQ_KEY,
    /// batch-level properties = WAIT only; batch bodies are never compressed (as in Java).
    fn prepare_batch(&self, mut messages: Vec<Message>) -> Result<Outgoing> {
        let op = "sendBatch";
        for msg in &mut messages {
            validate_message(msg, self.inner.config.max_message_size_bytes)
                .map_err(|e| ClientError::invalid_argument(op, e.to_string()).with_context("topic", &msg.topic))?;
            self.complete_properties(msg);
        }
        validate_batch(&messages).map_err(|e| ClientError::invalid_argument(op, e.to_string()))?;
        let body = encode_batch(&messages).map_err(|e| ClientError::invalid_argument(op, e.to_string()))?;
        if body.len() > self.inner.config.max_message_size_bytes {
            return Err(ClientError::invalid_argument(
                op,
                format!("the message body size over max value, MAX: {}", self.inner.config.max_message_size_bytes),
            ));
        }
        let first = messages.first().ok_or_else(|| ClientError::invalid_argument(op, "the batch is empty"))?;
        let mut batch_props = Properties::new();
        batch_props.insert(properties::WAIT, if first.wait_store_msg_ok() { "true" } else { "false" });
        let ids: Vec<&str> = messages.iter().map(|m| m.uniq_key().unwrap_or_default()).collect();
        Ok(Outgoing {
            topic: first.topic.to_string(),
            body,
            sys_flag: 0,
            flag: 0,
            properties: batch_props.to_wire_string(),
            batch: true,
            msg_id: ids.join(","),
            reconsume_times: 0,
            max_reconsume_times: None,
            reply: false,
            trace_beans: self.trace_beans(&messages),
        })
    }

    /// The Pub beans of `messages` (completed, so with their UNIQ_KEYs) when the producer traces
    /// and they are not trace records themselves.
    fn trace_beans(&self, messages: &[Message]) -> Vec<TraceBean> {
        let Some(trace) = &self.inner.trace else { return Vec::new() };
        messages
            .iter()
            .filter(|m| m.topic != trace.topic())
            .map(|m| TraceBean {
                topic: m.topic.to_string(),
                msg_id: m.uniq_key().unwrap_or_default().to_owned(),
                tags: m.tags().unwrap_or_default().to_owned(),
                keys: m.keys().unwrap_or_default().to_owned(),
                body_length: i64::try_from(m.body.len()).unwrap_or(i64::MAX),
                msg_type: if m.is_transaction_prepared() {
                    TraceMessageType::TransHalf
                } else if m.delay_time_level() > 0 {
                    TraceMessageType::Delay
                } else {
                    TraceMessageType::Normal
                },
                ..TraceBean::default()
            })
            .collect()
    }

    /// Records one answered attempt (`SendMessageTraceHookImpl.sendMessageAfter`): a Pub per
    /// message, unless the broker turned tracing off (`TRACE_ON=false`).
    fn trace_attempt(&self, out: &Outgoing, result: &SendResult, addr: &str, began_ms: i64, cost: Duration) {
        let Some(trace) = &self.inner.trace else { return };
        if out.trace_beans.is_empty() || !result.trace_on {
            return;
        }
        let cost_time_ms = i64::try_from(cost.as_millis()).unwrap_or(i64::MAX);
        let mut offset_ids = result.offset_msg_id.split(',');
        for bean in &out.trace_beans {
            let mut ctx = TraceContext::new(TraceType::Pub, began_ms, &self.inner.config.producer_group);
            ctx.region_id = result.region_id.clone();
            ctx.cost_time_ms = cost_time_ms;
            ctx.success = result.status == SendStatus::SendOk;
            let mut bean = bean.clone();
            bean.store_host = addr.to_owned();
            bean.offset_msg_id = offset_ids.next().unwrap_or_default().to_owned();
            ctx.beans.push(bean);
            trace.append(ctx);
        }
    }

    /// Records a transaction's end (`EndTransactionTraceHookImpl`), as it is sent: answering a
    /// broker's check when `from_check`.
    pub(crate) fn trace_end_transaction(
        &self,
        msg: &Message,
        msg_id: &str,
        transaction_id: &str,
        broker_addr: &str,
        state: &str,
        from_check: bool,
    ) {
        let Some(trace) = &self.inner.trace else { return };
        if msg.topic == trace.topic() {
            return;
        }
        let mut ctx = TraceContext::new(TraceType::EndTransaction, now_ms(), &self.inner.config.producer_group);
        ctx.beans.push(TraceBean {
            topic: msg.topic.to_string(),
            msg_id: msg_id.to_owned(),
            tags: msg.tags().unwrap_or_default().to_owned(),
            keys: msg.keys().unwrap_or_default().to_owned(),
            store_host: broker_addr.to_owned(),
            msg_type: TraceMessageType::TransCommit,
            transaction_id: transaction_id.to_owned(),
            transaction_state: state.to_owned(),
            from_transaction_check: from_check,
            ..TraceBean::default()
        });
        trace.append(ctx);
    }

    /// UNIQ_KEY (kept when already set, so a resend keeps its id) and WAIT=true unless set, as the
    /// Java `Message` constructor sets it.
    fn complete_properties(&self, msg: &mut Message) {
        if msg.uniq_key().is_none() {
            let id = lock(&self.inner.uniq).next_id_now();
            msg.set_uniq_key(id);
        }
        if !msg.properties.contains_key(properties::WAIT) {
            msg.set_wait_store_msg_ok(true);
        }
    }

    /// The SEND_MESSAGE_V2 / SEND_BATCH_MESSAGE request for one attempt, fields as the 4.9.8 client
    /// fills them (`sendKernelImpl`).
    fn send_command(&self, out: &Outgoing, mq: &MessageQueue) -> RemotingCommand {
        let config = &self.inner.config;
        let header = SendMessageRequestHeaderV2 {
            a: config.producer_group.clone(),
            b: out.topic.clone(),
            c: config.create_topic_key.clone(),
            d: config.default_topic_queue_nums,
            e: mq.queue_id,
            f: out.sys_flag,
            g: now_ms(),
            h: out.flag,
            i: Some(out.properties.clone()),
            j: Some(out.reconsume_times),
            k: Some(false),
            l: out.max_reconsume_times,
            m: Some(out.batch),
            n: Some(mq.broker_name.clone()),
        };
        let code = match (out.batch, out.reply) {
            (true, _) => RequestCode::SendBatchMessage,
            (false, true) => RequestCode::SendReplyMessageV2,
            (false, false) => RequestCode::SendMessageV2,
        };
        let mut request = RemotingCommand::request_with_header(code, &header).with_body(out.body.clone());
        request.serialize_type = config.serialize_type;
        request
    }

    async fn publish_info(&self, topic: &str, op: &'static str) -> Result<Arc<TopicPublishInfo>> {
        let config = &self.inner.config;
        let default = Some((config.create_topic_key.as_str(), config.default_topic_queue_nums));
        let info = self.inner.routes.publish_info(topic, default).await.map_err(|mut e| {
            e.operation = op;
            e
        })?;
        self.note_route_for_heartbeat(topic);
        Ok(info)
    }

    fn select_queue(&self, info: &TopicPublishInfo, last_broker: Option<&str>) -> Option<MessageQueue> {
        let now = self.clock_ms();
        lock(&self.inner.fault).select_one_message_queue(info, last_broker, now)
    }

    fn update_fault(&self, broker_name: &str, began: Instant, isolation: bool) {
        let latency_ms = u64::try_from(began.elapsed().as_millis()).unwrap_or(u64::MAX);
        let now = self.clock_ms();
        lock(&self.inner.fault).update_fault_item(broker_name, latency_ms, isolation, now);
    }

    fn clock_ms(&self) -> u64 {
        u64::try_from(self.inner.epoch.elapsed().as_millis()).unwrap_or(u64::MAX)
    }

    /// Where a write to `mq` goes: its group's write address, or a replica to ask when that one is
    /// suspect or `probe`; refreshing the group's route (rate-limited) when nothing is known.
    async fn resolve_target(&self, mq: &MessageQueue, op: &'static str, probe: bool) -> Result<WriteTarget> {
        let routes = &self.inner.routes;
        if let Some(target) = routes.write_target(&mq.broker_name, probe) {
            return Ok(target);
        }
        routes.refresh_group(&mq.broker_name, Some(&mq.topic), Instant::now()).await;
        if routes.write_target(&mq.broker_name, probe).is_none()
            && let Err(e) = routes.update_route(&mq.topic).await
        {
            tracing::debug!(topic = %mq.topic, error = %e, "route refresh for a missing broker address failed");
        }
        routes.write_target(&mq.broker_name, probe).ok_or_else(|| {
            ClientError::new(ErrorKind::NoRoute, op, format!("The broker[{}] not exist", mq.broker_name))
                .with_context("topic", &mq.topic)
                .with_context("broker", &mq.broker_name)
        })
    }

    /// The write address of `mq`'s group (a replica to ask when it is suspect).
    async fn resolve_addr(&self, mq: &MessageQueue, op: &'static str) -> Result<String> {
        self.resolve_target(mq, op, false).await.map(|t| t.addr)
    }

    /// Resolves once `mq`'s group has a write address other than `addr`: while a send to `addr`
    /// waits, every [`PRODUCER_SEND_STALL_PROBE_MS`] the group's route is refreshed (rate-limited
    /// and shared with every other caller). A send answered in time never gets past the first sleep.
    async fn leader_moved_away(&self, mq: &MessageQueue, addr: &str) -> String {
        let routes = &self.inner.routes;
        loop {
            tokio::time::sleep(Duration::from_millis(PRODUCER_SEND_STALL_PROBE_MS)).await;
            routes.refresh_group(&mq.broker_name, Some(&mq.topic), Instant::now()).await;
            if let Some(target) = routes.write_target(&mq.broker_name, false)
                && !target.probing
                && target.addr != addr
            {
                return target.addr;
            }
        }
    }

    /// The publish info of `topic`, waiting (within `deadline`, at the groups' refresh rate) while
    /// a known topic has no writable queue because its groups are electing a leader.
    async fn publish_info_within(
        &self,
        topic: &str,
        op: &'static str,
        deadline: Instant,
    ) -> Result<Arc<TopicPublishInfo>> {
        loop {
            let result = tokio::time::timeout_at(deadline, self.publish_info(topic, op)).await;
            match result {
                Ok(Err(e))
                    if e.kind == ErrorKind::NoRoute
                        && self.inner.routes.cached_route(topic).is_some()
                        && !remaining(deadline).is_zero() => {}
                Ok(result) => return result,
                Err(_) => {
                    return Err(ClientError::new(ErrorKind::NoRoute, op, "no writable queue before the send timeout")
                        .with_context("topic", topic));
                }
            }
        }
    }

    /// One synchronous attempt on `mq` at `addr`.
    async fn attempt(&self, out: &Outgoing, mq: &MessageQueue, addr: &str, timeout: Duration) -> Result<SendResult> {
        // Clock reads only when tracing: this is every send's path.
        let began = self.inner.trace.is_some().then(|| (now_ms(), Instant::now()));
        let call = self.inner.remoting.invoke(addr, self.send_command(out, mq), timeout);
        let response = tokio::select! {
            biased;
            response = call => response.map_err(|e| ClientError::remoting("send", e))?,
            leader = self.leader_moved_away(mq, addr) => {
                // The old leader may have committed the message before it stopped answering (a new
                // leader then holds it), so this is not a refusal: the caller learns the outcome is
                // unknown at once instead of after the send timeout, and the refreshed route sends
                // its next message to `leader`. Resending here would store it twice.
                return Err(ClientError::new(
                    ErrorKind::OutcomeUnknown,
                    "send",
                    format!("no answer from {addr} while the group elected a new leader ({leader}); the message may or may not be stored"),
                )
                .with_context("addr", addr));
            }
        };
        let result = process_send_response(&response, &out.topic, &mq.broker_name, &out.msg_id);
        if let (Ok(r), Some((began_ms, began))) = (&result, began) {
            self.trace_attempt(out, r, addr, began_ms, began.elapsed());
        }
        result
    }

    /// `sendDefaultImpl` for synchronous sends: up to `attempts` tries within one deadline, plus the
    /// failover steps within one group ([`FailoverStep`]), which do not count as tries.
    async fn send_default(&self, out: Outgoing, attempts: u32, op: &'static str) -> Result<SendResult> {
        let deadline = Instant::now() + self.inner.config.send_timeout;
        let info = self.publish_info_within(&out.topic, op, deadline).await?;
        let attempts = attempts.clamp(1, PRODUCER_SEND_ATTEMPTS_MAX_COUNT);
        let mut attempt = 0;
        let mut steps = 0;
        let mut probe = false;
        let mut last_broker: Option<String> = None;
        let mut pinned: Option<MessageQueue> = None;
        let mut stored_not_ok: Option<SendResult> = None;
        let mut last_err: Option<ClientError> = None;
        let mut tried: Vec<String> = Vec::new();
        while attempt < attempts {
            let mq = match pinned.take() {
                Some(mq) => mq,
                None => match self.select_queue(&info, last_broker.as_deref()) {
                    Some(mq) => mq,
                    None => break,
                },
            };
            if remaining(deadline).is_zero() {
                break;
            }
            let target = match self.resolve_target(&mq, op, std::mem::take(&mut probe)).await {
                Ok(target) => target,
                Err(e) => {
                    attempt += 1;
                    last_broker = Some(mq.broker_name.clone());
                    last_err = Some(e);
                    continue;
                }
            };
            tried.push(mq.broker_name.clone());
            let began = Instant::now();
            match self.attempt(&out, &mq, &target.addr, remaining(deadline)).await {
                Ok(result) => {
                    self.answered(&mq, &target, began);
                    attempt += 1;
                    let retry = result.status != SendStatus::SendOk
                        && self.inner.config.retry_another_broker_when_not_store_ok
                        && attempt < attempts;
                    if !retry {
                        return Ok(result);
                    }
                    last_broker = Some(mq.broker_name.clone());
                    stored_not_ok = Some(result);
                }
                Err(e) => {
                    let mut e = context(e, &mq, &target.addr);
                    e.operation = op;
                    let step = self.failover_step(&e, &mq, &target);
                    if e.is_outcome_unknown() {
                        self.update_fault(&mq.broker_name, began, true);
                        return Err(e);
                    }
                    // Within the group when the address moved (a hint), or when no other group can
                    // take the message; otherwise Java's way: the next try goes to another group.
                    let stay = step.is_some_and(|s| s == FailoverStep::Hint || !has_other_group(&info, &mq));
                    if let Some(step) = step.filter(|_| stay && steps < FAILOVER_STEPS_MAX) {
                        steps += 1;
                        tracing::debug!(topic = %out.topic, ?step, error = %e, "send failed over within the group");
                        probe = self.pace_failover(step, &mq, deadline).await;
                        pinned = Some(mq);
                        last_err = Some(e);
                        continue;
                    }
                    attempt += 1;
                    // A non-retryable answer (MESSAGE_ILLEGAL, …) is about the message, not the
                    // group: its latency counts, but the group is not backed off (Java isolates it).
                    // Nor is it for a reply the broker could not push (its requester went away):
                    // the group is healthy, and backing it off would move ordinary sends.
                    let isolate = e.is_retryable() && !out.reply;
                    self.update_fault(&mq.broker_name, began, isolate);
                    if !(e.is_retryable() || e.kind == ErrorKind::NoRoute) {
                        return Err(e);
                    }
                    tracing::debug!(topic = %out.topic, attempt, error = %e, "send attempt failed; retrying");
                    last_broker = Some(mq.broker_name.clone());
                    last_err = Some(e);
                }
            }
        }
        if let Some(result) = stored_not_ok {
            return Ok(result);
        }
        Err(give_up(op, &out.topic, tried, last_err))
    }

    /// `sendSelectImpl` / `send(msg, mq)`: attempts on `mq` only; a leader hint or a failover step
    /// ([`FailoverStep`]) retries it at the group's (new) leader within the deadline, anything else
    /// ends the send.
    async fn send_to_fixed_queue(&self, out: &Outgoing, mq: MessageQueue, op: &'static str) -> Result<SendResult> {
        let deadline = Instant::now() + self.inner.config.send_timeout;
        let mut last_err = None;
        let mut probe = false;
        for _ in 0..=FAILOVER_STEPS_MAX {
            if remaining(deadline).is_zero() {
                break;
            }
            let target = self.resolve_target(&mq, op, std::mem::take(&mut probe)).await?;
            let began = Instant::now();
            match self.attempt(out, &mq, &target.addr, remaining(deadline)).await {
                Ok(result) => {
                    self.answered(&mq, &target, began);
                    return Ok(result);
                }
                Err(e) => {
                    let mut e = context(e, &mq, &target.addr);
                    e.operation = op;
                    let step = self.failover_step(&e, &mq, &target).filter(|_| !e.is_outcome_unknown());
                    let Some(step) = step else {
                        self.update_fault(&mq.broker_name, began, e.is_retryable());
                        return Err(e);
                    };
                    probe = self.pace_failover(step, &mq, deadline).await;
                    last_err = Some(e);
                }
            }
        }
        Err(give_up(op, &out.topic, vec![mq.broker_name.clone()], last_err))
    }

    /// An attempt at `target` was answered: latency recorded; a replica asked in a failover that
    /// took the write leads the group now.
    fn answered(&self, mq: &MessageQueue, target: &WriteTarget, began: Instant) {
        self.update_fault(&mq.broker_name, began, false);
        if target.probing {
            self.inner.routes.report_leader_answered(&mq.broker_name, &target.addr);
        }
    }

    /// What a failed attempt at `target` says about its group's leader (see [`FailoverStep`]), with
    /// the route updated accordingly: a usable hint moves the write address, a refused or dropped
    /// connection makes the address suspect, a timeout or a dropped connection refreshes the
    /// group's route in the background (the send itself ends outcome-unknown).
    fn failover_step(&self, e: &ClientError, mq: &MessageQueue, target: &WriteTarget) -> Option<FailoverStep> {
        let routes = &self.inner.routes;
        match &e.kind {
            ErrorKind::Broker { code: ResponseCode::ServiceNotAvailable, remark } => {
                match remark.as_deref().and_then(parse_leader_hint) {
                    // Followed even when suspect: a replica that still names it may be right (a
                    // dropped connection, not a dead node); if not, the address refuses again and
                    // that step is paced by the group's refresh.
                    Some(leader) if leader != target.addr => {
                        routes.clear_suspect(leader);
                        routes.apply_leader_hint(&mq.broker_name, leader);
                        Some(FailoverStep::Hint)
                    }
                    _ => Some(FailoverStep::Unavailable),
                }
            }
            ErrorKind::Connection => {
                routes.report_unreachable(&target.addr);
                Some(FailoverStep::Dead)
            }
            ErrorKind::OutcomeUnknown => {
                routes.report_unreachable(&target.addr);
                routes.refresh_group_soon(&mq.broker_name);
                None
            }
            ErrorKind::Timeout => {
                routes.refresh_group_soon(&mq.broker_name);
                None
            }
            _ => None,
        }
    }

    /// Before the next attempt of a failover step: a hint is followed at once; otherwise the
    /// group's route is refreshed first (rate-limited and shared, so this also paces the retries).
    /// Returns whether the next attempt should ask another replica.
    async fn pace_failover(&self, step: FailoverStep, mq: &MessageQueue, deadline: Instant) -> bool {
        if step == FailoverStep::Hint {
            return false;
        }
        let refresh = self.inner.routes.refresh_group(&mq.broker_name, Some(&mq.topic), Instant::now());
        let _in_time = tokio::time::timeout_at(deadline, refresh).await;
        step == FailoverStep::Unavailable
    }
}

/// How a failed attempt moves a send within its group (none of these counts as one of the send's
/// `retryTimesWhenSendFailed` tries; [`FAILOVER_STEPS_MAX`] and the send timeout bound them).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum FailoverStep {
    /// SERVICE_NOT_AVAILABLE naming another leader: the same queue at that address, at once.
    Hint,
    /// The address refused the connection (nothing was sent): the group's route is refreshed and
    /// the same queue tried at the new leader, or at a replica that names it.
    Dead,
    /// SERVICE_NOT_AVAILABLE without a usable hint (no leader yet, a leader still applying, a
    /// replica naming a dead one): the route is refreshed and another replica asked.
    Unavailable,
}

/// Whether `info` has a queue outside `mq`'s group (a failed send may go there instead).
fn has_other_group(info: &TopicPublishInfo, mq: &MessageQueue) -> bool {
    info.message_queues().iter().any(|q| q.broker_name != mq.broker_name)
}

fn give_up(op: &'static str, topic: &str, tried: Vec<String>, last_err: Option<ClientError>) -> ClientError {
    let attempts = tried.len();
    let tried = format!("[{}]", tried.join(", "));
    match last_err {
        Some(last) => {
            ClientError::new(last.kind.clone(), op, format!("Send [{attempts}] times, still failed: {}", last.message))
                .with_context("topic", topic)
                .with_context("brokersSent", tried)
                .with_source(last)
        }
        None => ClientError::new(
            ErrorKind::DeadlineExceeded,
            op,
            format!("Send [{attempts}] times, the send timeout passed before another attempt"),
        )
        .with_context("topic", topic)
        .with_context("brokersSent", tried),
    }
}

fn no_queue(op: &'static str, topic: &str) -> ClientError {
    ClientError::new(ErrorKind::NoRoute, op, "no writable queue").with_context("topic", topic)
}

fn context(e: ClientError, mq: &MessageQueue, addr: &str) -> ClientError {
    e.with_context("topic", &mq.topic).with_context("queue", mq_label(mq)).with_context("addr", addr)
}

fn mq_label(mq: &MessageQueue) -> String {
    format!("{}:{}", mq.broker_name, mq.queue_id)
}

fn remaining(deadline: Instant) -> Duration {
    deadline.saturating_duration_since(Instant::now())
}

#[cfg(test)]
mod tests {
    use std::net::Ipv4Addr;

    use super::*;
    use raftmq_common::limits::COMPRESS_BODY_OVER_BYTES;

    fn producer() -> Producer {
        Producer::builder("PG")
            .namesrv_addr("127.0.0.1:1")
            .client_ip(IpAddr::V4(Ipv4Addr::new(10, 0, 0, 7)))
            .instance_name("i1")
            .build()
            .unwrap()
    }

    #[test]
    fn compression_is_chosen_on_the_builder() {
        let b = ProducerBuilder::new("g").compress_type(sys_flag::CompressionType::Lz4).compress_level(3);
        assert_eq!((b.compression.kind, b.compression.level), (sys_flag::CompressionType::Lz4, 3));
    }

    #[test]
    fn builder_refuses_bad_options() {
        assert!(Producer::builder("bad group!").namesrv_addr("a:1").build().is_err());
        assert!(Producer::builder("PG").build().is_err(), "no NameServer");
        assert!(Producer::builder("PG").namesrv_addr("a:1").send_timeout(Duration::ZERO).build().is_err());
        assert!(Producer::builder("PG").namesrv_addr("a:1").retry_times_when_send_failed(99).build().is_err());
        assert!(Producer::builder("PG").namesrv_addr("a:1").max_message_size_bytes(5 << 20).build().is_err());
        assert_eq!(producer().client_id(), "10.0.0.7@i1");
    }

    #[test]
    fn prepare_sets_uniq_key_wait_and_compresses_at_the_threshold() {
        let p = producer();
        let mut small = Message::new("T", vec![7u8; COMPRESS_BODY_OVER_BYTES - 1]);
        let out = p.prepare(&mut small, "send").unwrap();
        assert_eq!(out.sys_flag, 0);
        assert_eq!(out.body.len(), COMPRESS_BODY_OVER_BYTES - 1);
        assert_eq!(small.property(properties::WAIT), Some("true"));
        assert_eq!(out.msg_id.len(), 32);
        assert_eq!(small.uniq_key(), Some(out.msg_id.as_str()));
        // A resend keeps the id.
        assert_eq!(p.prepare(&mut small, "send").unwrap().msg_id, out.msg_id);

        let mut big = Message::new("T", vec![7u8; COMPRESS_BODY_OVER_BYTES]);
        let out = p.prepare(&mut big, "send").unwrap();
        assert_eq!(out.sys_flag, sys_flag::COMPRESSED | sys_flag::COMPRESSION_ZLIB_TYPE);
        assert!(out.body.len() < COMPRESS_BODY_OVER_BYTES);
    }

    #[test]
    fn retry_topic_counters_move_to_the_header() {
        let p = producer();
        let mut m = Message::new("%RETRY%G", &b"x"[..]);
        m.properties.insert(properties::RECONSUME_TIME, "3");
        m.properties.insert(properties::MAX_RECONSUME_TIMES, "16");
        let out = p.prepare(&mut m, "send").unwrap();
        assert_eq!((out.reconsume_times, out.max_reconsume_times), (3, Some(16)));
        assert!(!out.properties.contains(properties::RECONSUME_TIME));
        let req = p.send_command(&out, &MessageQueue::new("%RETRY%G", "b", 0));
        let h: SendMessageRequestHeaderV2 = req.decode_header().unwrap();
        assert_eq!((h.j, h.l, h.m, h.k), (Some(3), Some(16), Some(false), Some(false)));
    }

    #[tokio::test]
    async fn sends_before_start_and_after_shutdown_fail_without_network() {
        let p = producer();
        let err = p.send(Message::new("T", &b"x"[..])).await.unwrap_err();
        assert_eq!(err.kind, ErrorKind::Shutdown);
        p.start().await.unwrap();
        p.shutdown().await;
        assert_eq!(p.send(Message::new("T", &b"x"[..])).await.unwrap_err().kind, ErrorKind::Shutdown);
        assert_eq!(p.start().await.unwrap_err().kind, ErrorKind::Shutdown);
    }
}
