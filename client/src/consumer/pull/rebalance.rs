//! The lite pull consumer's rebalance in subscribe mode, and taking a queue (either mode): its start
//! offset from the store or `consumeFrom`, read lazily by its fetch loop in assign mode.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::sync::Mutex;
use std::sync::atomic::AtomicBool;
use std::sync::atomic::AtomicU64;
use std::sync::atomic::Ordering;

use raftmq_common::message::MessageQueue;
use raftmq_common::protocol::body::heartbeat::MessageModel;
use tokio::sync::Notify;

use crate::consumer::offset_store::compute_pull_from_where;
use crate::consumer::pull::inner::LiteInner;
use crate::consumer::pull::inner::LiteQueue;
use crate::consumer::pull::inner::OFFSET_UNKNOWN;
use crate::consumer::pull::inner::lock;
use crate::consumer::rebalance::allocate;
use crate::error::ErrorKind;
use crate::error::Result;

impl LiteInner {
    pub(super) async fn rebalance(self: &Arc<Self>) {
        for topic in self.subscriptions.keys() {
            let Ok(mqs) = self.client.subscribe_queues(topic).await else { continue };
            let allocated: BTreeSet<MessageQueue> = if self.config.consumer.message_model == MessageModel::Clustering {
                let cids = match self.client.find_consumer_ids(topic).await {
                    Ok(cids) if !cids.is_empty() => cids,
                    _ => continue,
                };
                let all: Vec<MessageQueue> = mqs.into_iter().collect();
                allocate(&self.config.consumer.allocate_strategy, &self.client.client_id, &all, &cids)
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

    /// Takes `mq` from its start offset. With `lazy` (assign mode) a start offset that cannot be
    /// read now (a stale route after a failover, a broker restarting) is read by the queue's fetch
    /// loop, retried as Java's pull task retries, instead of failing `start`; rebalance mode
    /// leaves the queue to its next round.
    pub(super) async fn add_queue(self: &Arc<Self>, mq: &MessageQueue, lazy: bool) -> Result<()> {
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
}
