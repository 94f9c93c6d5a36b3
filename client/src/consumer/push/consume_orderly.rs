//! Orderly consumption (`ConsumeMessageOrderlyService`): one task per queue at a time, holding the
//! queue's mutex across listener calls; in clustering only while the broker lock is held and
//! fresh. A suspended batch is consumed again after a pause; past `maxReconsumeTimes` it goes to
//! the broker (DLQ) so the queue can move on.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use raftmq_common::limits as L;
use raftmq_common::message::MessageExt;
use raftmq_common::message::MessageQueue;
use raftmq_common::message::trace::ConsumeReturnType;

use crate::consumer::listener::ConsumeOrderlyContext;
use crate::consumer::listener::ConsumeOrderlyStatus;
use crate::consumer::process_queue::ProcessQueue;
use crate::consumer::push::builder::Listener;
use crate::consumer::push::inner::PushInner;

impl PushInner {
    pub(super) async fn consume_orderly(self: Arc<Self>, mq: MessageQueue, pq: Arc<ProcessQueue>) {
        let mq_lock = self.mq_lock(&mq);
        let _queue_guard = tokio::select! {
            biased;
            _ = self.shutdown.cancelled() => return,
            g = mq_lock.lock_owned() => g,
        };
        let Listener::Orderly(listener) = self.listener.clone() else { return };
        let suspend_ms = i64::try_from(self.config.suspend_current_queue_time.as_millis()).unwrap_or(i64::MAX);
        loop {
            if pq.is_dropped() || self.shutdown.is_cancelled() {
                return;
            }
            if self.clustering() && (!pq.is_locked() || pq.is_lock_expired(L::CONSUMER_LOCK_MAX_LIVE_MS)) {
                match self.client.lock_batch(&mq.broker_name, vec![mq.clone()]).await {
                    Ok(set) if set.contains(&mq) => pq.set_locked(true),
                    _ => {
                        pq.set_locked(false);
                        if !self.pause(self.config.suspend_current_queue_time).await {
                            return;
                        }
                        continue;
                    }
                }
            }
            let mut msgs = pq.take_messages(self.config.consume_message_batch_max_size);
            if msgs.is_empty() {
                return;
            }
            self.reset_retry_topic(&mut msgs);
            if self.shutdown.is_cancelled() {
                return;
            }
            let listener = listener.clone();
            let mut ctx =
                ConsumeOrderlyContext { message_queue: mq.clone(), suspend_current_queue_time_millis: suspend_ms };
            let batch = msgs.clone();
            let traced = self.trace_before(&msgs);
            let call_started = std::time::Instant::now();
            let call = self.consume_pool.run(move || {
                let status = listener.consume_message(&batch, &mut ctx);
                (status, ctx)
            });
            let (status, suspend, outcome) = match call.await {
                Ok((status, ctx)) => {
                    let outcome = match status {
                        ConsumeOrderlyStatus::Success => ConsumeReturnType::Success,
                        ConsumeOrderlyStatus::SuspendCurrentQueueAMoment => ConsumeReturnType::Failed,
                    };
                    (status, ctx.suspend_current_queue_time_millis, outcome)
                }
                Err(e) => {
                    tracing::warn!(mq = ?mq, error = %e, "orderly listener panicked; suspending the queue");
                    (ConsumeOrderlyStatus::SuspendCurrentQueueAMoment, suspend_ms, ConsumeReturnType::Exception)
                }
            };
            self.trace_after(traced, outcome, call_started, msgs.len());
            let ok = if status == ConsumeOrderlyStatus::Success { msgs.len() } else { 0 };
            self.record_consume(&mq, &pq, call_started, ok, msgs.len() - ok);
            match status {
                ConsumeOrderlyStatus::Success => {
                    self.stats.consume_ok.fetch_add(msgs.len() as u64, Ordering::Relaxed);
                    if let Some(offset) = pq.commit() {
                        pq.unless_dropped(|| self.offset_store.update_offset(&mq, offset, false));
                    }
                }
                ConsumeOrderlyStatus::SuspendCurrentQueueAMoment => {
                    self.stats.consume_failed.fetch_add(msgs.len() as u64, Ordering::Relaxed);
                    if self.give_up_orderly(&mq, &msgs).await {
                        if let Some(offset) = pq.commit() {
                            pq.unless_dropped(|| self.offset_store.update_offset(&mq, offset, false));
                        }
                        continue;
                    }
                    pq.make_messages_to_consume_again(&msgs);
                    let pause = Duration::from_millis(u64::try_from(suspend.max(10)).unwrap_or(10));
                    if !self.pause(pause).await {
                        return;
                    }
                }
            }
        }
    }

    /// Orderly `checkReconsumeTimes`: once a batch has been retried `maxReconsumeTimes`, its messages
    /// go to the broker (DLQ) so the queue can move on. Returns whether the batch is done with.
    pub(super) async fn give_up_orderly(&self, mq: &MessageQueue, msgs: &[MessageExt]) -> bool {
        let max = self.max_reconsume_times();
        if !msgs.iter().any(|m| m.reconsume_times >= max) {
            return false;
        }
        for msg in msgs {
            if let Err(e) = self.send_message_back(msg, mq, -1).await {
                tracing::warn!(mq = ?mq, error = %e, "orderly send-back failed; suspending the queue");
                return false;
            }
        }
        true
    }
}
