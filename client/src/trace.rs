//! Message trace (RocketMQ's `enableMsgTrace`): [`TraceDispatcher`] sends the trace records a
//! producer, push consumer or lite pull consumer makes to the trace topic, where `raftmq admin
//! queryMsgTraceById`, the broker's `/api/v1/messages/{msgId}/trace` (or Java's tools and
//! dashboard) find them by message id. The inner producer is reached through [`TraceSender`] and
//! built by `producer::trace_dispatcher`, so this file never names the producer that owns it.
//!
//! ```text
//! send / listener ──append(TraceContext)──▶ bounded queue ──▶ dispatcher task ──pack──▶ trace messages
//!   (never waits: a full queue drops)          (2048)         up to 100 at once     KEYS = ids + user keys
//!                                                                                   ──▶ inner Producer ──▶ trace topic
//! ```
//!
//! Invariants:
//! - Tracing never delays or fails what it records: [`TraceDispatcher::append`] only tries to queue,
//!   and a trace message that cannot be sent is logged and dropped (as Java's `AsyncTraceDispatcher`).
//! - Nothing sent to the trace topic is traced (no trace of a trace), and the dispatcher's own
//!   producer has tracing off.
//! - A trace message's body stays under [`TRACE_MESSAGE_BODY_MAX_BYTES`] (or holds one record that
//!   alone is larger) and its KEYS under [`TRACE_MESSAGE_KEYS_MAX_BYTES`] ([`pack`], pure), so a
//!   big listener batch or long user keys never make a whole trace message unsendable.
//! - Shutdown sends what was queued before it, bounded by [`TRACE_FLUSH_MAX_MS`].

use std::collections::HashSet;
use std::future::Future;
use std::net::IpAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::Mutex;
use std::sync::atomic::AtomicU64;
use std::sync::atomic::Ordering;
use std::time::Duration;
use std::time::Instant;

use raftmq_common::limits::GROUP_NAME_LENGTH_MAX_CHARS;
use raftmq_common::limits::TRACE_BATCH_MAX_COUNT;
use raftmq_common::limits::TRACE_FLUSH_MAX_MS;
use raftmq_common::limits::TRACE_MESSAGE_BODY_MAX_BYTES;
use raftmq_common::limits::TRACE_MESSAGE_KEYS_MAX_BYTES;
use raftmq_common::limits::TRACE_QUEUE_MAX_COUNT;
use raftmq_common::message::Message;
use raftmq_common::message::MessageExt;
use raftmq_common::message::msg_id::UniqIdGenerator;
use raftmq_common::message::msg_id::UniqIdSeed;
use raftmq_common::message::properties;
use raftmq_common::message::trace::ConsumeReturnType;
use raftmq_common::message::trace::TRACE_PRODUCER_GROUP_PREFIX;
use raftmq_common::message::trace::TRACE_TOPIC_DEFAULT;
use raftmq_common::message::trace::TraceBean;
use raftmq_common::message::trace::TraceContext;
use raftmq_common::message::trace::TraceType;
use raftmq_common::message::trace::encode_into;
use raftmq_common::message::validate::validate_topic;
use raftmq_common::sync::lock;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::clock::now_ms;
use crate::error::ClientError;
use crate::error::Result;

/// Who traces: the role written into the dispatcher's producer group.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum TraceRole {
    /// A producer's sends (Pub, EndTransaction).
    Produce,
    /// A consumer's listener calls (SubBefore, SubAfter).
    Consume,
}

/// A client builder's trace options (`enableMsgTrace`, `customizedTraceTopic`).
#[derive(Debug, Clone, Default)]
pub(crate) struct TraceSettings {
    /// Whether the client traces.
    pub(crate) enabled: bool,
    /// The trace topic; `None` or empty: `RMQ_SYS_TRACE_TOPIC`.
    pub(crate) topic: Option<String>,
}

/// What a dispatcher sends its trace messages through: the client's own trace producer. A trait,
/// because a [`crate::producer::Producer`] itself owns a dispatcher; the producer implements it.
pub(crate) trait TraceSender: Send + Sync + 'static {
    /// Starts the sender (routes, connections).
    fn start(&self) -> BoxFuture<'_, Result<()>>;
    /// Sends one trace message and waits for the broker.
    fn send(&self, msg: Message) -> BoxFuture<'_, Result<()>>;
    /// Stops the sender and closes its connections.
    fn shutdown(&self) -> BoxFuture<'_, ()>;
    /// Stops the sender's background work at once, leaving connections to close when dropped.
    fn close_now(&self);
}

/// A boxed future borrowing its sender.
pub(crate) type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// The producer group of the trace producer of `group` in `role`: Java's
/// `_INNER_TRACE_PRODUCER-<group>-<type>`, the group cut so it stays a valid name.
pub(crate) fn trace_producer_group(group: &str, role: TraceRole) -> String {
    let role = match role {
        TraceRole::Produce => "PRODUCE",
        TraceRole::Consume => "CONSUME",
    };
    let room = GROUP_NAME_LENGTH_MAX_CHARS - TRACE_PRODUCER_GROUP_PREFIX.len() - "--PRODUCE".len();
    let owner: String = group.chars().take(room).collect();
    format!("{TRACE_PRODUCER_GROUP_PREFIX}-{owner}-{role}")
}

/// Where a client's trace records go: `Some(topic)` when tracing is on.
pub(crate) fn trace_topic(enabled: bool, custom: Option<&str>, op: &'static str) -> Result<Option<String>> {
    if !enabled {
        return Ok(None);
    }
    let topic = custom.filter(|t| !t.is_empty()).unwrap_or(TRACE_TOPIC_DEFAULT);
    validate_topic(topic).map_err(|e| ClientError::invalid_argument(op, format!("customizedTraceTopic: {e}")))?;
    Ok(Some(topic.to_owned()))
}

/// The trace dispatcher of one producer or consumer. See the module header.
pub(crate) struct TraceDispatcher {
    topic: String,
    tx: mpsc::Sender<TraceContext>,
    rx: Mutex<Option<mpsc::Receiver<TraceContext>>>,
    producer: Arc<dyn TraceSender>,
    stop: CancellationToken,
    task: Mutex<Option<JoinHandle<()>>>,
    dropped: Arc<AtomicU64>,
    /// requestIds pairing a SubBefore with its SubAfter.
    request_ids: Mutex<UniqIdGenerator>,
}

impl std::fmt::Debug for TraceDispatcher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TraceDispatcher").field("topic", &self.topic).finish_non_exhaustive()
    }
}

impl TraceDispatcher {
    /// A dispatcher to `topic` sending through `producer` (an ACL must let it PUB the trace topic).
    pub(crate) fn new(topic: String, producer: Arc<dyn TraceSender>, client_ip: IpAddr) -> Self {
        let (tx, rx) = mpsc::channel(TRACE_QUEUE_MAX_COUNT);
        TraceDispatcher {
            topic,
            tx,
            rx: Mutex::new(Some(rx)),
            producer,
            stop: CancellationToken::new(),
            task: Mutex::new(None),
            dropped: Arc::new(AtomicU64::new(0)),
            request_ids: Mutex::new(UniqIdGenerator::new(UniqIdSeed::for_this_process(client_ip))),
        }
    }

    /// The trace topic.
    pub(crate) fn topic(&self) -> &str {
        &self.topic
    }

    /// Starts the dispatcher task, which starts the producer; a second call does nothing. Not
    /// async on purpose: `Producer::start` calls it, and the producer's own start future must not
    /// contain itself.
    pub(crate) fn start(&self) {
        let Some(rx) = lock(&self.rx).take() else { return };
        let (producer, topic, stop, dropped) =
            (self.producer.clone(), self.topic.clone(), self.stop.clone(), self.dropped.clone());
        *lock(&self.task) = Some(tokio::spawn(run(rx, producer, topic, stop, dropped)));
    }

    /// Queues `ctx` if there is room; otherwise drops it (counted, logged by the task).
    pub(crate) fn append(&self, ctx: TraceContext) {
        if ctx.beans.is_empty() {
            return;
        }
        if self.tx.try_send(ctx).is_err() {
            self.dropped.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Queues the SubBefore of a batch handed to the application
    /// (`ConsumeMessageTraceHookImpl.consumeMessageBefore`): one bean per message, except trace
    /// records and messages the broker marked `TRACE_ON=false`. Returns the context its SubAfter
    /// continues, `None` when nothing was traced.
    pub(crate) fn sub_before(&self, group: &str, msgs: &[MessageExt]) -> Option<TraceContext> {
        let mut ctx = TraceContext::new(TraceType::SubBefore, now_ms(), group);
        for m in msgs {
            let props = &m.message.properties;
            if m.message.topic == self.topic || props.get(properties::TRACE_ON) == Some("false") {
                continue;
            }
            if let Some(region) = props.get(properties::MSG_REGION) {
                ctx.region_id = region.to_owned();
            }
            ctx.beans.push(TraceBean {
                topic: m.message.topic.to_string(),
                msg_id: m.msg_id(),
                tags: m.message.tags().unwrap_or_default().to_owned(),
                keys: m.message.keys().unwrap_or_default().to_owned(),
                body_length: i64::from(m.store_size),
                retry_times: m.reconsume_times,
                ..TraceBean::default()
            });
        }
        if ctx.beans.is_empty() {
            return None;
        }
        ctx.request_id = lock(&self.request_ids).next_id_now();
        self.append(ctx.clone());
        Some(ctx)
    }

    /// Queues the SubAfter of `before` (`consumeMessageAfter`): the outcome, and the time since
    /// `started` divided among the `count` messages of the batch.
    pub(crate) fn sub_after(&self, before: TraceContext, outcome: ConsumeReturnType, started: Instant, count: usize) {
        let mut ctx = before;
        let per_message = started.elapsed().as_millis() / u128::try_from(count.max(1)).unwrap_or(1);
        ctx.trace_type = TraceType::SubAfter;
        ctx.timestamp_ms = now_ms();
        ctx.cost_time_ms = i64::try_from(per_message).unwrap_or(i64::MAX);
        ctx.success = outcome == ConsumeReturnType::Success;
        ctx.context_code = outcome.ordinal();
        self.append(ctx);
    }

    /// Sends what is queued (bounded by [`TRACE_FLUSH_MAX_MS`]); the task then stops the producer.
    pub(crate) async fn shutdown(&self) {
        self.stop.cancel();
        let task = lock(&self.task).take();
        if let Some(mut task) = task
            && tokio::time::timeout(Duration::from_millis(TRACE_FLUSH_MAX_MS), &mut task).await.is_err()
        {
            tracing::warn!(topic = %self.topic, "trace records still unsent at shutdown are dropped");
            task.abort();
            self.producer.close_now();
        }
    }
}

async fn run(
    mut rx: mpsc::Receiver<TraceContext>,
    producer: Arc<dyn TraceSender>,
    topic: String,
    stop: CancellationToken,
    dropped: Arc<AtomicU64>,
) {
    if let Err(e) = producer.start().await {
        tracing::warn!(topic = %topic, error = %e, "the trace producer did not start; tracing is off");
        return;
    }
    let mut batch = Vec::with_capacity(TRACE_BATCH_MAX_COUNT);
    let mut failing = false;
    let mut dropped_seen = 0;
    loop {
        let stopping = tokio::select! {
            biased;
            n = rx.recv_many(&mut batch, TRACE_BATCH_MAX_COUNT) => n == 0,
            _ = stop.cancelled() => true,
        };
        if stopping {
            // What was queued before the stop still goes out.
            rx.close();
            while let Ok(ctx) = rx.try_recv() {
                batch.push(ctx);
            }
        }
        for msg in pack(&topic, batch.drain(..)) {
            match producer.send(msg).await {
                Ok(_) => failing = false,
                Err(e) if !failing => {
                    failing = true;
                    tracing::warn!(topic = %topic, error = %e, "a trace message could not be sent; dropped");
                }
                Err(e) => tracing::debug!(topic = %topic, error = %e, "a trace message could not be sent; dropped"),
            }
        }
        let now_dropped = dropped.load(Ordering::Relaxed);
        if now_dropped != dropped_seen {
            tracing::warn!(topic = %topic, total = now_dropped, "trace queue full: trace records dropped");
            dropped_seen = now_dropped;
        }
        if stopping {
            producer.shutdown().await;
            return;
        }
    }
}

/// The trace messages carrying `contexts`, in order (`AsyncTraceDispatcher.sendTraceData`): bodies
/// are the contexts' records back to back, KEYS every traced id and user key once. A message is
/// sent before a record would take it past either limit; SubBefore and SubAfter records (one per
/// message of a listener call, up to 1024) are placed one at a time, and the keys of a record that
/// alone exceed the limit are cut to its message id.
pub(crate) fn pack(topic: &str, contexts: impl IntoIterator<Item = TraceContext>) -> Vec<Message> {
    let mut packer =
        Packer { topic, out: Vec::new(), data: String::new(), keys: Vec::new(), seen: HashSet::new(), keys_bytes: 0 };
    for ctx in contexts {
        match ctx.trace_type {
            TraceType::SubBefore | TraceType::SubAfter if ctx.beans.len() > 1 => {
                let mut one = ctx;
                for bean in std::mem::take(&mut one.beans) {
                    one.beans = vec![bean];
                    packer.add(&one);
                }
            }
            _ => packer.add(&ctx),
        }
    }
    packer.finish();
    packer.out
}

struct Packer<'a> {
    topic: &'a str,
    out: Vec<Message>,
    data: String,
    keys: Vec<String>,
    seen: HashSet<String>,
    keys_bytes: usize,
}

impl Packer<'_> {
    fn add(&mut self, ctx: &TraceContext) {
        let mut record = String::new();
        let mut keys = encode_into(ctx, &mut record);
        if record.is_empty() {
            return;
        }
        let new_keys_bytes = |keys: &[String], seen: &HashSet<String>| -> usize {
            keys.iter().filter(|k| !seen.contains(*k)).map(|k| k.len() + 1).sum()
        };
        if new_keys_bytes(&keys, &HashSet::new()) > TRACE_MESSAGE_KEYS_MAX_BYTES {
            keys.truncate(1);
        }
        if !self.data.is_empty()
            && (self.data.len() + record.len() > TRACE_MESSAGE_BODY_MAX_BYTES
                || self.keys_bytes + new_keys_bytes(&keys, &self.seen) > TRACE_MESSAGE_KEYS_MAX_BYTES)
        {
            self.finish();
        }
        self.data.push_str(&record);
        for key in keys {
            if self.seen.insert(key.clone()) {
                self.keys_bytes += key.len() + 1;
                self.keys.push(key);
            }
        }
    }

    fn finish(&mut self) {
        if self.data.is_empty() {
            return;
        }
        let msg = Message::new(self.topic, std::mem::take(&mut self.data)).with_keys(self.keys.join(" "));
        self.keys.clear();
        self.seen.clear();
        self.keys_bytes = 0;
        self.out.push(msg);
    }
}

#[cfg(test)]
mod tests {
    use raftmq_common::message::trace::TraceBean;
    use raftmq_common::message::trace::TraceType;
    use raftmq_common::message::trace::decode;

    use super::*;

    fn ctx(id: &str, keys: &str) -> TraceContext {
        let mut c = TraceContext::new(TraceType::Pub, 1, "g");
        c.beans.push(TraceBean { topic: "T".into(), msg_id: id.into(), keys: keys.into(), ..TraceBean::default() });
        c
    }

    #[test]
    fn contexts_share_a_message_keyed_by_each_id_and_key_once() {
        let msgs = pack("TRACE", [ctx("A", "k1 k2"), ctx("B", "k2"), ctx("A", "")]);
        assert_eq!(msgs.len(), 1);
        assert_eq!(msgs[0].topic, "TRACE");
        assert_eq!(msgs[0].keys(), Some("A k1 k2 B"));
        let body = std::str::from_utf8(&msgs[0].body).expect("utf-8");
        assert_eq!(decode(body).len(), 3);
        assert!(pack("TRACE", Vec::new()).is_empty());
    }

    #[test]
    fn bodies_and_keys_are_split_near_their_limits_and_nothing_is_lost() {
        let big = "x".repeat(2_000);
        let contexts: Vec<_> = (0..40).map(|i| ctx(&format!("ID{i}"), &format!("k{i}-{big}"))).collect();
        let msgs = pack("TRACE", contexts.clone());
        assert!(msgs.len() > 1, "the keys limit splits them");
        let mut decoded = Vec::new();
        for m in &msgs {
            assert!(m.body.len() < TRACE_MESSAGE_BODY_MAX_BYTES + 4 * 1024);
            assert!(m.keys().unwrap_or_default().len() < TRACE_MESSAGE_KEYS_MAX_BYTES + 4 * 1024);
            decoded.extend(decode(std::str::from_utf8(&m.body).expect("utf-8")));
        }
        assert_eq!(decoded, contexts);
    }

    #[test]
    fn a_listener_batch_of_1024_is_split_and_oversized_keys_are_cut() {
        let mut batch = TraceContext::new(TraceType::SubBefore, 1, "cg");
        batch.request_id = "REQ".into();
        batch.beans = (0..1024)
            .map(|i| TraceBean { msg_id: format!("{i:032X}"), keys: format!("k{i}"), ..TraceBean::default() })
            .collect();
        let msgs = pack("TRACE", [batch]);
        assert!(msgs.len() > 1);
        let mut records = 0;
        for m in &msgs {
            assert!(m.keys().unwrap_or_default().len() <= TRACE_MESSAGE_KEYS_MAX_BYTES, "KEYS within the limit");
            records += decode(std::str::from_utf8(&m.body).expect("utf-8")).len();
        }
        assert_eq!(records, 1024, "every message's record");
        let huge = ctx("ID", &(0..3000).map(|i| format!("key{i}")).collect::<Vec<_>>().join(" "));
        let msgs = pack("TRACE", [ctx("A", ""), huge]);
        assert_eq!(msgs.len(), 1, "the cut keys fit beside the first record's");
        assert_eq!(msgs[0].keys(), Some("A ID"), "the huge record's keys cut to its id");
        let records = decode(std::str::from_utf8(&msgs[0].body).expect("utf-8"));
        assert_eq!(records[1].beans[0].keys.split(' ').count(), 3000, "its record keeps every key");
    }

    #[test]
    fn the_trace_topic_is_the_default_or_a_valid_custom_one() {
        assert_eq!(trace_topic(false, Some("X"), "t").expect("off"), None);
        assert_eq!(trace_topic(true, None, "t").expect("default").as_deref(), Some(TRACE_TOPIC_DEFAULT));
        assert_eq!(trace_topic(true, Some("MyTrace"), "t").expect("custom").as_deref(), Some("MyTrace"));
        assert!(trace_topic(true, Some("bad topic"), "t").is_err());
    }
}
