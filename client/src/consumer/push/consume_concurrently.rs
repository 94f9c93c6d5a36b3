//! Concurrent consumption (`ConsumeMessageConcurrentlyService`): batches go to listener threads;
//! consumed messages settle on that thread, the rest are sent back (or retried locally).
//!
//! Invariant: a batch's offsets leave the process queue only once settled, so the committed
//! offset (the smallest in flight) never passes an unconsumed message.

use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use raftmq_common::message::MessageExt;
use raftmq_common::message::MessageQueue;
use raftmq_common::message::trace::ConsumeReturnType;

use crate::consumer::listener::ConsumeConcurrentlyContext;
use crate::consumer::listener::ConsumeConcurrentlyStatus;
use crate::consumer::process_queue::ProcessQueue;
use crate::consumer::push::builder::Listener;
use crate::consumer::push::inner::PushInner;

impl PushInner {
    pub(super) fn spawn_concurrently(
        self: &Arc<Self>,
        mq: Arc<MessageQueue>,
        pq: Arc<ProcessQueue>,
        msgs: Vec<MessageExt>,
        delay: Option<Duration>,
    ) {
        let Some(d) = delay else { return self.consume_concurrently(mq, pq, msgs) };
        let me = self.clone();
        self.consume_tasks.spawn(async move {
            if me.pause(d).await {
                me.consume_concurrently(mq, pq, msgs);
            }
        });
    }

    /// Hands one batch to a listener thread. The common outcome, every message consumed, is settled
    /// on that thread (it only touches the process queue and the offset table); anything else
    /// (send-back, reconsume, a panic) goes back to the runtime. So a consumed message costs one
    /// hand-off, not a task, a hand-off and a wake-up back.
    pub(super) fn consume_concurrently(
        self: &Arc<Self>,
        mq: Arc<MessageQueue>,
        pq: Arc<ProcessQueue>,
        msgs: Vec<MessageExt>,
    ) {
        if pq.is_dropped() || self.shutdown.is_cancelled() {
            return;
        }
        let Listener::Concurrently(listener) = self.listener.clone() else { return };
        let me = self.clone();
        // Shutdown waits for a queued or running job as for a task.
        let token = self.consume_tasks.token();
        let runtime = tokio::runtime::Handle::current();
        // The pool can refuse a job only while it has no thread and cannot start one; keep what
        // reconsuming the batch needs then (a copy only until the first thread exists).
        let fallback = (!self.consume_pool.has_threads()).then(|| (mq.clone(), pq.clone(), msgs.clone()));
        let job = move || {
            // Re-checked here: the job may have waited in the pool's queue while the queue was dropped
            // or the consumer shut down; its messages are then not consumed and their offset is not
            // committed (delivered again, never lost).
            if pq.is_dropped() || me.shutdown.is_cancelled() {
                return;
            }
            let view = me.retry_view(&msgs);
            let mut ctx = ConsumeConcurrentlyContext {
                message_queue: Arc::clone(&mq),
                delay_level_when_next_consume: 0,
                ack_index: i32::MAX,
            };
            let seen = view.as_deref().unwrap_or(&msgs);
            let traced = me.trace_before(seen);
            let call_started = std::time::Instant::now();
            let (status, outcome) =
                match std::panic::catch_unwind(AssertUnwindSafe(|| listener.consume_message(seen, &mut ctx))) {
                    Ok(ConsumeConcurrentlyStatus::ConsumeSuccess) => {
                        (ConsumeConcurrentlyStatus::ConsumeSuccess, ConsumeReturnType::Success)
                    }
                    Ok(ConsumeConcurrentlyStatus::ReconsumeLater) => {
                        (ConsumeConcurrentlyStatus::ReconsumeLater, ConsumeReturnType::Failed)
                    }
                    Err(_) => {
                        tracing::warn!(mq = ?mq, "listener panicked; reconsuming later");
                        ctx.ack_index = -1;
                        (ConsumeConcurrentlyStatus::ReconsumeLater, ConsumeReturnType::Exception)
                    }
                };
            me.trace_after(traced, outcome, call_started, seen.len());
            let ok = consumed_count(status, &ctx, msgs.len());
            me.record_consume(&mq, &pq, call_started, ok, msgs.len() - ok);
            if me.settle_if_all_consumed(status, &ctx, &mq, &pq, &msgs) {
                return;
            }
            let view = view.unwrap_or_else(|| msgs.clone());
            let inner = me.clone();
            me.consume_tasks.spawn_on(
                async move { inner.process_consume_result(status, ctx, &mq, &pq, msgs, view).await },
                &runtime,
            );
            drop(token);
        };
        if let Err(e) = self.consume_pool.execute(job) {
            let Some((mq, pq, msgs)) = fallback else {
                // Unreachable (a pool with a thread accepts every job); the batch stays cached.
                tracing::error!(error = %e, "cannot run the listener");
                return;
            };
            // As a listener that failed: sent back (or retried locally), so the queue moves on.
            tracing::error!(mq = ?mq, error = %e, "cannot run the listener; reconsuming the batch later");
            let ctx = ConsumeConcurrentlyContext {
                message_queue: Arc::clone(&mq),
                delay_level_when_next_consume: 0,
                ack_index: -1,
            };
            let me = self.clone();
            self.consume_tasks.spawn(async move {
                let view = me.retry_view(&msgs).unwrap_or_else(|| msgs.clone());
                me.process_consume_result(ConsumeConcurrentlyStatus::ReconsumeLater, ctx, &mq, &pq, msgs, view).await;
            });
        }
    }

    /// [`Self::process_consume_result`] for the case where the listener consumed the whole batch,
    /// which needs no I/O; returns false (and does nothing) otherwise.
    pub(super) fn settle_if_all_consumed(
        &self,
        status: ConsumeConcurrentlyStatus,
        ctx: &ConsumeConcurrentlyContext,
        mq: &MessageQueue,
        pq: &ProcessQueue,
        msgs: &[MessageExt],
    ) -> bool {
        if consumed_count(status, ctx, msgs.len()) < msgs.len() {
            return false;
        }
        self.stats.consume_ok.fetch_add(msgs.len() as u64, Ordering::Relaxed);
        if let Some(offset) = pq.remove_messages(msgs) {
            pq.unless_dropped(|| self.offset_store.update_offset(mq, offset, true));
        }
        true
    }

    /// `ConsumeMessageConcurrentlyService.processConsumeResult`. `msgs` are the cached messages,
    /// `view` what the listener saw (original topics restored).
    pub(super) async fn process_consume_result(
        self: &Arc<Self>,
        status: ConsumeConcurrentlyStatus,
        ctx: ConsumeConcurrentlyContext,
        mq: &MessageQueue,
        pq: &Arc<ProcessQueue>,
        msgs: Vec<MessageExt>,
        view: Vec<MessageExt>,
    ) {
        let n = msgs.len();
        let ok = consumed_count(status, &ctx, n);
        self.stats.consume_ok.fetch_add(ok as u64, Ordering::Relaxed);
        self.stats.consume_failed.fetch_add((n - ok) as u64, Ordering::Relaxed);
        let mut back_failed: Vec<MessageExt> = Vec::new();
        if self.clustering() {
            for (cached, seen) in msgs.iter().zip(view.iter()).skip(ok) {
                let delay = ctx.delay_level_when_next_consume;
                if let Err(e) = self.send_message_back(seen, mq, delay).await {
                    tracing::warn!(mq = ?mq, offset = cached.queue_offset, error = %e, "send-back failed; reconsuming locally");
                    let mut again = cached.clone();
                    again.reconsume_times = again.reconsume_times.saturating_add(1);
                    back_failed.push(again);
                }
            }
        } else if ok < n {
            tracing::warn!(mq = ?mq, failed = n - ok, "broadcasting: failed messages are dropped");
        }
        let done: Vec<MessageExt> =
            msgs.into_iter().filter(|m| !back_failed.iter().any(|f| f.queue_offset == m.queue_offset)).collect();
        if !back_failed.is_empty() {
            self.spawn_concurrently(
                Arc::new(mq.clone()),
                pq.clone(),
                back_failed,
                Some(self.config.reconsume_local_delay),
            );
        }
        if let Some(offset) = pq.remove_messages(&done) {
            pq.unless_dropped(|| self.offset_store.update_offset(mq, offset, true));
        }
    }
}

/// How many of a batch of `n` the listener consumed (`ackIndex + 1` on success, none otherwise).
fn consumed_count(status: ConsumeConcurrentlyStatus, ctx: &ConsumeConcurrentlyContext, n: usize) -> usize {
    match status {
        ConsumeConcurrentlyStatus::ConsumeSuccess => {
            usize::try_from(ctx.ack_index.saturating_add(1)).unwrap_or(0).min(n)
        }
        ConsumeConcurrentlyStatus::ReconsumeLater => 0,
    }
}
