//! The pull task of one held queue (`PullMessageService`): flow control (cached count, bytes, span,
//! orderly lock), PULL_MESSAGE long polls, the pull status handling, and the hand-off of found
//! messages to the `ProcessQueue` and the consume service.
//!
//! Invariant: a pull task stops as soon as its queue is dropped or the consumer shuts down; it
//! commits an offset only while its queue is still held.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use raftmq_common::message::MessageExt;
use raftmq_common::message::MessageQueue;
use raftmq_common::protocol::body::heartbeat::SubscriptionData;
use raftmq_common::protocol::body::route::MASTER_ID;
use raftmq_common::protocol::header::pull::pull_sys_flag;
use tokio::time::Instant;

use crate::consumer::offset_store::ReadOffsetType;
use crate::consumer::process_queue::ProcessQueue;
use crate::consumer::pull_api::PullStatus;
use crate::consumer::pull_api::process_pull_response;
use crate::consumer::push::builder::Listener;
use crate::consumer::push::inner::PushInner;
use crate::error::ClientError;
use crate::error::ErrorKind;
use crate::error::Result;
use crate::failover::is_leader_change;

impl PushInner {
    /// Why the queue must not be pulled now, if it must not.
    pub(super) fn flow_control(&self, pq: &ProcessQueue) -> Option<&'static str> {
        if pq.msg_count() > self.config.consumer.pull_threshold_for_queue {
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
    pub(super) async fn wait_for_space(&self, pq: &ProcessQueue) -> bool {
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

    pub(super) async fn pull_loop(self: Arc<Self>, mq: MessageQueue, pq: Arc<ProcessQueue>, mut offset: i64) {
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
                    // A leader change (the route was refreshed, rate-limited, by the failed pull):
                    // pull again at once; anything else backs off as Java does.
                    if is_leader_change(&e) {
                        continue;
                    }
                    if !self.pause(self.config.consumer.pull_delay_when_exception).await {
                        return;
                    }
                }
            }
        }
    }

    pub(super) async fn pull_once(
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
        let commit = commit_offset.unwrap_or(0);
        let header = self.config.consumer.pull_header(mq, offset, sub, sys_flag, commit, None);
        let response = tokio::select! {
            biased;
            _ = self.shutdown.cancelled() => {
                return Err(ClientError::new(ErrorKind::Shutdown, "pullMessage", "consumer shutting down"));
            }
            r = self.client.pull(mq, &found.addr, &header, self.config.consumer.pull_timeout_when_suspend) => r?,
        };
        let result = process_pull_response(&response, sub).map_err(|e| e.with_context("addr", &found.addr));
        if let Err(e) = &result {
            self.client.failover_after(mq, &found.addr, e).await;
        }
        result
    }

    pub(super) fn submit(self: &Arc<Self>, mq: &MessageQueue, pq: &Arc<ProcessQueue>, msgs: Vec<MessageExt>) {
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
}
