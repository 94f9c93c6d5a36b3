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
//!
//! Files: this one holds the public API and the producer's state; `builder.rs` the options,
//! `outgoing.rs` a message made ready for the wire, `send_loop.rs` the attempt loop above,
//! `heartbeat.rs` the heartbeats.

mod builder;
mod heartbeat;
mod outgoing;
mod send_loop;

pub use builder::ProducerBuilder;

use heartbeat::HeartbeatState;
use send_loop::context;
use send_loop::mq_label;
use send_loop::no_queue;
use send_loop::remaining;

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

/// `DefaultMQProducer.retryTimesWhenSendFailed` (and `…AsyncFailed`): 2 retries, 3 attempts.
pub const RETRY_TIMES_WHEN_SEND_FAILED_DEFAULT: u32 = 2;
/// `DefaultMQProducer.defaultTopicQueueNums`: queues a topic auto-created by a send gets per group.
pub const DEFAULT_TOPIC_QUEUE_NUMS_DEFAULT: i32 = 4;

const STATE_CREATED: u8 = 0;
const STATE_RUNNING: u8 = 1;
const STATE_SHUTDOWN: u8 = 2;

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
}

#[cfg(test)]
mod tests {
    use std::net::Ipv4Addr;

    use super::*;
    use raftmq_common::limits::COMPRESS_BODY_OVER_BYTES;
    use raftmq_common::message::sys_flag;
    use raftmq_common::protocol::header::send::SendMessageRequestHeaderV2;

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
