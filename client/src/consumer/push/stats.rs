//! [`ConsumerStats`]: the counters a push consumer keeps (pulls, flow control, consume outcomes,
//! rebalances), for monitoring and tests. Relaxed atomics: each counter is read on its own.

use std::sync::atomic::AtomicU64;

/// Counters a [`PushConsumer`](crate::consumer::PushConsumer) keeps, for monitoring and tests.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ConsumerStats {
    /// PULL_MESSAGE responses handled.
    pub pulls: u64,
    /// Times a pull was held back because a queue's cache was full (`queueFlowControlTimes`).
    pub flow_control_times: u64,
    /// Messages whose listener call succeeded.
    pub consume_ok: u64,
    /// Messages whose listener call failed.
    pub consume_failed: u64,
    /// Completed rebalances.
    pub rebalances: u64,
}

#[derive(Debug, Default)]
pub(super) struct Stats {
    pub(super) pulls: AtomicU64,
    pub(super) flow_control_times: AtomicU64,
    pub(super) consume_ok: AtomicU64,
    pub(super) consume_failed: AtomicU64,
    pub(super) rebalances: AtomicU64,
}
