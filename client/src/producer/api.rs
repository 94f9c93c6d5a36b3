//! The producer's public API (start, shutdown, every kind of send, request/reply) and how a
//! [`ProducerBuilder`] becomes a [`Producer`]; the attempt loop behind them is `send_loop.rs`.

use std::future::Future;
use std::net::IpAddr;
use std::sync::Arc;
use std::sync::Mutex;
use std::sync::atomic::AtomicU8;
use std::sync::atomic::Ordering;
use std::time::Duration;

use raftmq_common::limits::TRACE_SEND_TIMEOUT_MS;
use raftmq_common::message::Message;
use raftmq_common::message::MessageExt;
use raftmq_common::message::MessageQueue;
use raftmq_common::message::msg_id::UniqIdGenerator;
use raftmq_common::message::properties;
use raftmq_common::protocol::SerializeType;
use raftmq_common::remoting::RemotingClient;
use raftmq_common::sync::lock;
use tokio::time::Instant;

use crate::client_config::ClientConfig;
use crate::error::ClientError;
use crate::error::ErrorKind;
use crate::error::Result;
use crate::fault_strategy::MqFaultStrategy;
use crate::route::TopicRouteManager;
use crate::selector::MessageQueueSelector;
use crate::selector::SelectMessageQueueByHash;
use crate::send_result::SendResult;
use crate::trace;
use crate::trace::BoxFuture;
use crate::trace::TraceDispatcher;
use crate::trace::TraceRole;
use crate::trace::TraceSender;

use super::builder::ProducerBuilder;
use super::inner::HeartbeatState;
use super::inner::Producer;
use super::inner::ProducerInner;
use super::inner::STATE_CREATED;
use super::inner::STATE_RUNNING;
use super::inner::STATE_SHUTDOWN;
use super::send_loop::context;
use super::send_loop::mq_label;
use super::send_loop::no_queue;
use super::send_loop::remaining;
use crate::namesrv::NamesrvClient;
use raftmq_common::limits::MESSAGE_BODY_SIZE_MAX_BYTES;
use raftmq_common::limits::PRODUCER_SEND_ATTEMPTS_MAX_COUNT;
use raftmq_common::message::msg_id::UniqIdSeed;
use raftmq_common::message::validate::validate_group;
use raftmq_common::protocol::RequestCode;
use raftmq_common::remoting::ProcessorTable;
use raftmq_common::remoting::processor_fn;

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

pub(super) fn request_timeout(timeout: Duration, correlation_id: &str, what: &str) -> ClientError {
    ClientError::new(ErrorKind::Timeout, "request", format!("{what} (timeout {timeout:?})"))
        .with_context("correlationId", correlation_id)
}

impl ProducerBuilder {
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

    pub(super) fn check_running(&self, operation: &'static str) -> Result<()> {
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

    /// Sends `msg` without waiting for the broker (`sendOneway`): one attempt, no result.
    pub async fn send_oneway(&self, mut msg: Message) -> Result<()> {
        self.check_running("sendOneway")?;
        let out = self.prepare(&mut msg, "sendOneway")?;
        let deadline = Instant::now() + self.inner.config.send_timeout;
        let info = self.publish_info_within(&out.topic, "sendOneway", deadline).await?;
        let mq = self.select_queue(&info, None, Instant::now()).ok_or_else(|| no_queue("sendOneway", &out.topic))?;
        let addr = self.resolve_addr(&mq, "sendOneway").await?;
        let request = self.send_command(&out, &mq).into_oneway();
        let began = Instant::now();
        let result = self.inner.remoting.invoke_oneway(&addr, request, remaining(deadline)).await;
        self.update_fault(&mq.broker_name, began, Instant::now(), result.is_err());
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
}
