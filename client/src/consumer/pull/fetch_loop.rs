//! The fetch task of one assigned queue: pauses while `pull_threshold_for_queue` messages wait to
//! be polled, PULL_MESSAGE in `pullSyncImpl(block=true)` form, and the batches it queues for
//! `poll`, tagged with the queue's fetch state and generation.
//!
//! Invariant: a seek or a release aborts the in-flight fetch, and a batch fetched before it is
//! never handed to `poll`.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use raftmq_common::message::MessageQueue;
use raftmq_common::protocol::body::heartbeat::SubscriptionData;
use raftmq_common::protocol::body::route::MASTER_ID;
use raftmq_common::protocol::header::pull::pull_sys_flag;
use tokio::time::Instant;

use crate::consumer::offset_store::compute_pull_from_where;
use crate::consumer::pull::inner::ConsumeRequest;
use crate::consumer::pull::inner::LiteInner;
use crate::consumer::pull::inner::LiteQueue;
use crate::consumer::pull::inner::OFFSET_UNKNOWN;
use crate::consumer::pull::inner::lock;
use crate::consumer::pull_api::PullStatus;
use crate::consumer::pull_api::process_pull_response;
use crate::error::Result;
use crate::failover::is_leader_change;

impl LiteInner {
    pub(super) async fn fetch_loop(self: Arc<Self>, mq: MessageQueue, queue: Arc<LiteQueue>) {
        let Some(sub) = self.subscriptions.get(&mq.topic).cloned() else { return };
        let mut broker_id = MASTER_ID;
        loop {
            if queue.dropped.load(Ordering::Acquire) || self.shutdown.is_cancelled() {
                return;
            }
            let wake = queue.wake.notified();
            let reset = queue.reset.notified();
            tokio::pin!(wake);
            tokio::pin!(reset);
            wake.as_mut().enable();
            reset.as_mut().enable();
            if queue.cached.load(Ordering::Acquire) >= self.config.consumer.pull_threshold_for_queue {
                tokio::select! {
                    biased;
                    _ = self.shutdown.cancelled() => return,
                    _ = &mut reset => continue,
                    _ = &mut wake => continue,
                }
            }
            let (offset, generation) = *lock(&queue.pull);
            if offset == OFFSET_UNKNOWN {
                let read = tokio::select! {
                    biased;
                    _ = self.shutdown.cancelled() => return,
                    _ = &mut reset => continue,
                    r = compute_pull_from_where(&self.offset_store, &self.client, &mq, self.config.consumer.consume_from) => r,
                };
                match read {
                    Ok(start) => {
                        let mut pull = lock(&queue.pull);
                        if pull.1 == generation {
                            pull.0 = start;
                        }
                    }
                    Err(e) => {
                        tracing::warn!(mq = ?mq, error = %e, "start offset not read");
                        tokio::select! {
                            biased;
                            _ = self.shutdown.cancelled() => return,
                            _ = &mut reset => {}
                            _ = tokio::time::sleep(self.config.consumer.pull_delay_when_exception) => {}
                        }
                    }
                }
                continue;
            }
            let outcome = tokio::select! {
                biased;
                _ = self.shutdown.cancelled() => return,
                // A seek (or drop) makes the in-flight fetch pointless.
                _ = &mut reset => continue,
                r = self.fetch(&mq, &sub, offset, broker_id) => r,
            };
            match outcome {
                Ok(result) => {
                    broker_id = result.suggest_which_broker_id;
                    {
                        let mut pull = lock(&queue.pull);
                        if pull.1 != generation {
                            continue;
                        }
                        pull.0 = result.next_begin_offset;
                    }
                    if result.status == PullStatus::OffsetIllegal {
                        tracing::warn!(mq = ?mq, offset, next = result.next_begin_offset, "fetch offset illegal; jumping");
                    }
                    if result.msgs.is_empty() {
                        continue;
                    }
                    queue.cached.fetch_add(result.msgs.len() as u64, Ordering::AcqRel);
                    let request =
                        ConsumeRequest { mq: mq.clone(), queue: Arc::clone(&queue), generation, msgs: result.msgs };
                    tokio::select! {
                        biased;
                        _ = self.shutdown.cancelled() => return,
                        sent = self.tx.send(request) => if sent.is_err() { return },
                    }
                }
                Err(e) => {
                    tracing::warn!(mq = ?mq, offset, error = %e, "fetch failed");
                    broker_id = MASTER_ID;
                    // A leader change: the failed fetch refreshed the route (rate-limited); go on.
                    if is_leader_change(&e) {
                        continue;
                    }
                    tokio::select! {
                        biased;
                        _ = self.shutdown.cancelled() => return,
                        _ = &mut reset => {}
                        _ = tokio::time::sleep(self.config.consumer.pull_delay_when_exception) => {}
                    }
                }
            }
        }
    }

    pub(super) async fn fetch(
        &self,
        mq: &MessageQueue,
        sub: &SubscriptionData,
        offset: i64,
        broker_id: i64,
    ) -> Result<crate::consumer::pull_api::PullResult> {
        let found = self.client.broker_addr("pullMessage", mq, broker_id, false).await?;
        // `pullSyncImpl(block=true)`: suspend, subscription in the header, lite-pull bit; no commit.
        let sys_flag = pull_sys_flag::build(false, true, true, false, true);
        let header = self.config.consumer.pull_header(mq, offset, sub, sys_flag, 0, Some(sub.sub_string.clone()));
        let started = Instant::now();
        let response =
            self.client.pull(mq, &found.addr, &header, self.config.consumer.pull_timeout_when_suspend).await?;
        let result = match process_pull_response(&response, sub) {
            Ok(result) => result,
            Err(e) => {
                let e = e.with_context("addr", &found.addr);
                self.client.failover_after(mq, &found.addr, &e).await;
                return Err(e);
            }
        };
        let answered = Instant::now();
        let rt_ms = u64::try_from((answered - started).as_millis()).unwrap_or(u64::MAX);
        self.topic_stats.pulled(&mq.topic, (answered - self.epoch).as_secs(), rt_ms, result.msgs.len());
        Ok(result)
    }
}
