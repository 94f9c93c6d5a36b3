//! [`PushConsumer`]: RocketMQ 4.x's `DefaultMQPushConsumer`: long-polls every assigned queue and
//! hands the messages to a listener, concurrently or in queue order.
//!
//! ```text
//!  start ─► routes ─► HEART_BEAT (every broker, every 30 s)
//!  rebalance (start, every 20 s, NOTIFY_CONSUMER_IDS_CHANGED) ─► GET_CONSUMER_LIST_BY_GROUP ─► allocate
//!     new queue: [orderly: LOCK_BATCH_MQ] ─► offset (store / consumeFrom) ─► ProcessQueue + pull task
//!     lost queue: drop ─► store offset (two-way) ─► [orderly: UNLOCK_BATCH_MQ]
//!  pull task per queue: flow control (count, bytes, span) ─► PULL_MESSAGE (suspend 15 s, commit bit)
//!     FOUND ─► ProcessQueue ─► listener thread (ConsumePool) ─► offset = smallest in flight
//!     NO_NEW / NO_MATCHED ─► next offset;  OFFSET_MOVED ─► jump to nextBeginOffset (offset reset)
//!  concurrent ReconsumeLater ─► CONSUMER_SEND_MSG_BACK ─failed─► SEND to %RETRY%<group> (inner producer)
//!     ─failed─► consumed again locally; clustering subscribes %RETRY%<group>, whose messages reach
//!     the listener with their original topic (RETRY_TOPIC)
//!  shutdown ─► stop pulls ─► wait for running listeners ─► store offsets (two-way) ─► unlock ─► UNREGISTER_CLIENT
//! ```
//!
//! Invariants:
//! - A queue's committed offset is the smallest offset still in flight (`ProcessQueue`), and only
//!   moves forward through consumption; a crash redelivers, it never skips.
//! - Orderly: one task per queue at a time, enforced twice: the process queue's consuming flag and a
//!   per-queue mutex held across listener calls (so a queue dropped and re-added by a rebalance cannot
//!   run on two tasks); in clustering a queue is consumed only while its broker lock is held and fresh.
//! - Rebalances run on one task, so two never interleave.
//! - Every wait is on a notification, the shutdown token, or a configured interval; no lock is held
//!   across an `.await`.
//! - With `enable_msg_trace`, a batch's SubBefore is queued just before the listener call and its
//!   SubAfter just after (a refusal or a panic as failed), never waiting on the trace dispatcher; the
//!   dispatcher is flushed last at shutdown, after the running listener calls finished.
//!
//! Files, in the order a message goes through them:
//! - `builder`: [`PushConsumerBuilder`], options and defaults.
//! - `consumer`: [`PushConsumer`], the facade: build, start, timers, shutdown.
//! - `inner`: `PushInner`, the shared state; heartbeat, running info, direct consumption, trace hooks.
//! - `rebalance`: which queues are held; taking, releasing, locking them.
//! - `pull_loop`: one pull task per held queue, flow control, hand-off to the consume service.
//! - `consume_concurrently` / `consume_orderly`: the two consume services.
//! - `retry`: send-back, the retry topic, `maxReconsumeTimes`.
//! - `stats`: [`ConsumerStats`].

mod builder;
mod consume_concurrently;
mod consume_orderly;
mod consumer;
mod inner;
mod pull_loop;
mod rebalance;
mod retry;
mod stats;

pub use builder::PushConsumerBuilder;
pub use consumer::PushConsumer;
pub use stats::ConsumerStats;
