//! [`LiteInner`]: the state one lite pull consumer's tasks share (`DefaultLitePullConsumerImpl`):
//! the assigned queues' fetch state ([`LiteQueue`]), the bounded channel of fetched batches
//! ([`ConsumeRequest`]) `poll` reads, its heartbeat and its GET_CONSUMER_RUNNING_INFO answer.
//!
//! Invariant: a batch is polled only if its [`LiteQueue`] is still the assigned one and its
//! generation is the queue's current one (see `consumer.rs`).

use std::collections::BTreeMap;
use std::collections::BTreeSet;
use std::sync::Arc;
use std::sync::Mutex;
use std::sync::atomic::AtomicBool;
use std::sync::atomic::AtomicU8;
use std::sync::atomic::AtomicU64;
use std::sync::atomic::Ordering;

use raftmq_common::message::MessageExt;
use raftmq_common::message::MessageQueue;
use raftmq_common::protocol::body::consumer_running_info::ConsumerRunningInfo;
use raftmq_common::protocol::body::consumer_running_info::ProcessQueueInfo;
use raftmq_common::protocol::body::heartbeat::ConsumeType;
use raftmq_common::protocol::body::heartbeat::SubscriptionData;
pub(super) use raftmq_common::sync::lock;
use tokio::sync::Notify;
use tokio::sync::mpsc;
use tokio::sync::watch;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::consumer::client_instance;
use crate::consumer::client_instance::ClientInstance;
use crate::consumer::offset_store::OffsetStore;
use crate::consumer::pull::builder::PullConsumerBuilder;
use crate::consumer::topic_rates::TopicRates;
use crate::trace::TraceDispatcher;

/// An assigned queue whose start offset could not be read yet (`nextPullOffset` -1 in Java's lite
/// consumer): its fetch loop reads it before the first pull, retrying as a failed pull does.
pub(super) const OFFSET_UNKNOWN: i64 = -1;

/// Fetch state of one assigned queue (`AssignedMessageQueue` entry).
#[derive(Debug)]
pub(super) struct LiteQueue {
    /// Next offset to fetch (`OFFSET_UNKNOWN` until the start offset is read), and the generation
    /// it belongs to.
    pub(super) pull: Mutex<(i64, u64)>,
    /// Offset after the last polled message (`consumeOffset`).
    pub(super) consumed: Mutex<Option<i64>>,
    pub(super) dropped: AtomicBool,
    /// Fetched, not yet polled.
    pub(super) cached: AtomicU64,
    /// Cached count fell.
    pub(super) wake: Notify,
    /// A seek happened or the queue was dropped: an in-flight fetch is pointless.
    pub(super) reset: Notify,
}

#[derive(Debug)]
pub(super) struct ConsumeRequest {
    pub(super) mq: MessageQueue,
    /// The fetch state the batch was fetched for: a queue released and taken again has a new one
    /// (whose generations start at 0 again), so the generation alone cannot tell a stale batch.
    pub(super) queue: Arc<LiteQueue>,
    pub(super) generation: u64,
    pub(super) msgs: Vec<MessageExt>,
}

pub(super) struct LiteInner {
    pub(super) config: PullConsumerBuilder,
    pub(super) client: Arc<ClientInstance>,
    pub(super) offset_store: OffsetStore,
    pub(super) subscriptions: BTreeMap<String, SubscriptionData>,
    pub(super) queues: Mutex<BTreeMap<MessageQueue, Arc<LiteQueue>>>,
    pub(super) tx: mpsc::Sender<ConsumeRequest>,
    pub(super) rx: tokio::sync::Mutex<mpsc::Receiver<ConsumeRequest>>,
    pub(super) shutdown: CancellationToken,
    pub(super) tasks: TaskTracker,
    pub(super) state: AtomicU8,
    pub(super) next_auto_commit: Mutex<Instant>,
    /// Counts queues taken and released (see [`PullConsumer::assignment_epoch`](crate::consumer::PullConsumer::assignment_epoch)).
    pub(super) assignment_epoch: AtomicU64,
    /// The assignment after every take and release (see [`PullConsumer::assignment_watch`](crate::consumer::PullConsumer::assignment_watch)).
    pub(super) assignment: watch::Sender<BTreeSet<MessageQueue>>,
    /// Pull TPS and RT by topic, for the running info's `statusTable`.
    pub(super) topic_stats: TopicRates,
    /// Zero of the seconds `topic_stats` is stamped with.
    pub(super) epoch: Instant,
    /// The trace dispatcher, with `enable_msg_trace`.
    pub(super) trace: Option<Arc<TraceDispatcher>>,
}

impl LiteInner {
    /// GET_CONSUMER_RUNNING_INFO's answer (`DefaultLitePullConsumerImpl.consumerRunningInfo`):
    /// settings, subscriptions and each queue read: what is fetched and not yet polled, and the
    /// offset after the last polled message as the commit offset. Java's lite consumer answers the
    /// settings and subscriptions alone; the queues and the pull rates are ours.
    pub(super) fn running_info(&self) -> ConsumerRunningInfo {
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

    pub(super) async fn send_heartbeat(&self) {
        let data = self.config.consumer.heartbeat_data(
            &self.client.client_id,
            ConsumeType::ConsumeActively,
            self.subscriptions.values(),
        );
        let addrs = self.client.broker_addrs_of(&self.subscriptions.keys().cloned().collect::<Vec<_>>());
        self.client.send_heartbeat(&addrs, &data).await;
    }

    pub(super) fn assignment_changed(&self) {
        self.assignment_epoch.fetch_add(1, Ordering::AcqRel);
        self.assignment.send_replace(lock(&self.queues).keys().cloned().collect());
    }
}
