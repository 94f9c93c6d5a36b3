//! [`PullConsumer`], the facade: built from a [`PullConsumerBuilder`] (`build` wires the parts),
//! started (routes, heartbeat, first rebalance or the assigned queues), polled, sought, committed
//! and shut down; clones share one [`LiteInner`].

use std::collections::BTreeSet;
use std::sync::Arc;
use std::sync::Mutex;
use std::sync::atomic::AtomicU8;
use std::sync::atomic::AtomicU64;
use std::sync::atomic::Ordering;
use std::time::Duration;

use raftmq_common::limits as L;
use raftmq_common::message::MessageExt;
use raftmq_common::message::MessageQueue;
use raftmq_common::message::trace::ConsumeReturnType;
use tokio::sync::mpsc;
use tokio::sync::watch;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::client_config::consumer_instance_name;
use crate::clock::now_ms;
use crate::consumer::offset_store::OffsetStore;
use crate::consumer::offset_store::ReadOffsetType;
use crate::consumer::pull::builder::PullConsumerBuilder;
use crate::consumer::pull::inner::LiteInner;
use crate::consumer::pull::inner::LiteQueue;
use crate::consumer::pull::inner::lock;
use crate::consumer::subscription::build_subscription_data;
use crate::consumer::topic_rates::TopicRates;
use crate::error::ClientError;
use crate::error::ErrorKind;
use crate::error::Result;
use crate::producer::trace_dispatcher;
use crate::trace::TraceRole;

const STATE_CREATED: u8 = 0;
const STATE_RUNNING: u8 = 1;
const STATE_SHUTDOWN: u8 = 2;

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

impl PullConsumerBuilder {
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
