//! ReceiveMessage as RocketMQ's proxy serves it (`ReceiveMessageActivity`), over the broker's
//! remoting POP: the request's limits decided here, the stored records turned into the stream of
//! responses (the messages, then one status). Pure.
//!
//! - `fifo` is the subscription group's `consumeMessageOrderly` (the proxy takes it from the client
//!   settings it merged from the group's config).
//! - The long-polling time is the request's `long_polling_timeout` (else the server's default),
//!   bounded by the call's deadline less a margin for the answer to travel back.

use std::time::Duration;

use raftmq_common::protocol::body::subscription_group::SubscriptionGroupConfig;

/// Whether a subscription group receives each message group in order.
pub fn is_fifo(config: &SubscriptionGroupConfig) -> bool {
    config.consume_message_orderly
}

/// Time left of a call for the broker's answer to reach the client.
pub const ANSWER_MARGIN_MS: u64 = 1_000;

/// How long a receive may wait for messages: `requested` (the server's `default_ms` when absent),
/// at most the call's `deadline` less [`ANSWER_MARGIN_MS`] and `max_ms`.
pub fn polling_ms(requested: Option<Duration>, deadline: Option<Duration>, default_ms: u64, max_ms: u64) -> u64 {
    let wanted = requested.map_or(default_ms, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX));
    let room = deadline
        .map_or(u64::MAX, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX).saturating_sub(ANSWER_MARGIN_MS));
    wanted.min(room).min(max_ms)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fifo_is_the_groups_orderly_flag() {
        let mut config = SubscriptionGroupConfig::new("g");
        assert!(!is_fifo(&config));
        config.consume_message_orderly = true;
        assert!(is_fifo(&config));
    }

    #[test]
    fn polling_is_bounded_by_the_deadline_and_the_maximum() {
        let s = Duration::from_secs;
        assert_eq!(polling_ms(Some(s(20)), Some(s(30)), 15_000, 60_000), 20_000);
        assert_eq!(polling_ms(Some(s(20)), Some(s(10)), 15_000, 60_000), 9_000);
        assert_eq!(polling_ms(None, None, 15_000, 60_000), 15_000);
        assert_eq!(polling_ms(Some(s(120)), None, 15_000, 60_000), 60_000);
        assert_eq!(polling_ms(Some(s(5)), Some(Duration::from_millis(500)), 15_000, 60_000), 0);
    }
}
