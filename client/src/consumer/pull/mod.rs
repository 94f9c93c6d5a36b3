//! [`PullConsumer`]: RocketMQ 4.x's `DefaultLitePullConsumer`: background tasks fetch the assigned
//! queues into a bounded cache and the application takes batches with [`PullConsumer::poll`].
//!
//! ```text
//!  subscribe(topic, expr) ─► rebalance (as the push consumer) ─┐
//!  assign(queues) ─────────────────────────────────────────────┴► one fetch task per queue:
//!     PULL_MESSAGE (suspend, subscription + lite bits) ─► ConsumeRequest ─► bounded channel ─► poll()
//!  poll: consumed offset of the queue = last polled + 1; auto-commit every interval (inside poll)
//!  seek(mq, offset): new generation ─► in-flight fetch aborted, cached batches of the old one discarded
//!  commit(): consumed offsets ─► offset store ─► stored two-way (auto-commit: oneway; shutdown: two-way)
//! ```
//!
//! Invariants:
//! - A batch reaches `poll` only if it was fetched in the queue's current generation (after the last
//!   seek) and the queue is still assigned; so after `seek(mq, o)` the next batch of `mq` starts at `o`.
//! - Fetching pauses while a queue has `pull_threshold_for_queue` messages fetched but not polled.
//! - A committed offset is one returned by `poll` (+1), never ahead of it.
//! - With `enable_msg_trace`, each batch `poll` returns is traced as handed over and consumed (a
//!   SubBefore and a successful SubAfter, both at once as Java's lite consumer records them), without
//!   waiting on the trace dispatcher; the dispatcher is flushed last at shutdown. Java records them
//!   when a batch is fetched, so it also traces batches a `seek` or a rebalance then discards; here
//!   only what the application received is traced.
//!
//! Files:
//! - `builder`: [`PullConsumerBuilder`], options and defaults.
//! - `consumer`: [`PullConsumer`], the facade: build, start, poll, seek, commit, shutdown.
//! - `inner`: `LiteInner`, the shared state; heartbeat and running info.
//! - `rebalance`: subscribe-mode rebalance, taking a queue.
//! - `fetch_loop`: one fetch task per assigned queue.

mod builder;
mod consumer;
mod fetch_loop;
mod inner;
mod rebalance;

pub use builder::LITE_PULL_BATCH_SIZE_DEFAULT_COUNT;
pub use builder::LITE_PULL_BROKER_SUSPEND_MAX_MS;
pub use builder::PullConsumerBuilder;
pub use consumer::PullConsumer;
