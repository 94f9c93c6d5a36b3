//! The push consumer's rebalance (`RebalancePushImpl`): which queues it holds, taking a queue
//! (orderly: LOCK_BATCH_MQ first; start offset from the store or `consumeFrom`) and releasing one
//! (offset stored two-way, then orderly UNLOCK_BATCH_MQ), applying broker-pushed offset resets, and
//! renewing orderly locks.
//!
//! Invariant: rebalances and offset resets run on one task, so two never interleave; a released
//! orderly queue is unlocked only after its running listener call ended (or the wait timed out,
//! then the broker lock expires instead).

use std::collections::BTreeMap;
use std::collections::BTreeSet;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use raftmq_common::message::MessageQueue;

use crate::consumer::offset_store::compute_pull_from_where;
use crate::consumer::process_queue::ProcessQueue;
use crate::consumer::push::inner::PushInner;
use crate::consumer::push::inner::lock;
use crate::consumer::rebalance::allocate;
use crate::error::ClientError;
use crate::error::ErrorKind;
use crate::error::Result;

/// How long a rebalance waits for an orderly listener call to end before unlocking a lost queue
/// (Java tries the consume lock for 1 s).
const ORDERLY_RELEASE_WAIT: Duration = Duration::from_secs(1);

impl PushInner {
    pub(super) async fn do_rebalance(self: &Arc<Self>) {
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
                allocate(&self.config.consumer.allocate_strategy, &self.client.client_id, &all, &cids)
                    .into_iter()
                    .collect()
            } else {
                mqs
            };
            self.update_process_queue_table(&topic, allocated).await;
        }
        self.assignment.send_replace(self.assigned());
        self.stats.rebalances.fetch_add(1, Ordering::Relaxed);
    }

    pub(super) async fn update_process_queue_table(self: &Arc<Self>, topic: &str, allocated: BTreeSet<MessageQueue>) {
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
    pub(super) async fn apply_offset_resets(self: &Arc<Self>) {
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
    pub(super) async fn release_queue(&self, mq: &MessageQueue, pq: &Arc<ProcessQueue>, reset: Option<i64>) {
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
    pub(super) async fn persist_released(&self, mq: &MessageQueue) {
        if let Err(e) = self.offset_store.persist_confirmed(mq).await {
            tracing::warn!(mq = ?mq, error = %e, "released queue's offset not stored; its next owner may redeliver");
        }
        self.offset_store.remove_offset(mq);
    }

    pub(super) async fn add_queue(self: &Arc<Self>, mq: &MessageQueue) -> Result<()> {
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
        let offset =
            compute_pull_from_where(&self.offset_store, &self.client, mq, self.config.consumer.consume_from).await?;
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

    pub(super) async fn lock_all(&self) {
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

    pub(super) async fn unlock_all(&self) {
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
}
