//! [`Producer`]: sends messages the way RocketMQ 4.x's `DefaultMQProducer` does, so a broker cannot
//! tell it from a Java client (SEND_MESSAGE_V2 / SEND_BATCH_MESSAGE, header fields `a`..`n`).
//!
//! ```text
//! send(msg) ─► validate (= broker's rules) ─► UNIQ_KEY, WAIT, compress ≥ 4 KiB ─► publish info
//!   (cache │ NameServer │ TBW102 default route) ─► attempt loop, at most 1 + retries, one deadline:
//!     MqFaultStrategy picks a queue (round-robin, avoids the last failed group and backed-off ones)
//!     ─► brokerId 0 address ─► SEND_MESSAGE_V2 ─► SUCCESS / FLUSH_* / SLAVE_NOT_AVAILABLE → SendResult
//!        retryable code → next attempt on another group; SERVICE_NOT_AVAILABLE "leader=ip:port" →
//!        the route moves to that leader and the same queue is tried there
//!        connection refused, or SERVICE_NOT_AVAILABLE without a usable hint, and no other group →
//!        failover step: the group's route is refreshed (rate-limited, shared) and the same queue
//!        tried at the new leader, or at another replica, which names the leader or takes the write
//!        timeout / connection lost after sending / no answer while the group's route moved to
//!        another leader (probed every PRODUCER_SEND_STALL_PROBE_MS) → outcome unknown: returned,
//!        never retried (the group's route is refreshed, a dropped address made suspect)
//! ```
//!
//! Invariants:
//! - Nothing touches the network before the message passed client-side validation.
//! - A send whose outcome is unknown is never retried by the producer (that could store it twice);
//!   the caller gets [`ErrorKind::Timeout`]/[`ErrorKind::OutcomeUnknown`] and may resend the same
//!   `Message`, whose `UNIQ_KEY` is kept so consumers can deduplicate.
//! - Every attempt shares the send's one deadline (`sendMsgTimeout`); attempts are bounded by
//!   [`PRODUCER_SEND_ATTEMPTS_MAX_COUNT`]. Failover steps within one group (a hint, a dead leader,
//!   a group electing) do not count as `retryTimesWhenSendFailed` tries: a leader change costs a
//!   send time, not its retries; [`FAILOVER_STEPS_MAX`] and the deadline bound them.
//! - Ordered sends (selector, sharding key, explicit queue) never move to another queue; only a
//!   failover step (hint, dead leader, group electing) retries them, on the same queue.
//! - Heartbeats (HEART_BEAT with `producerDataSet`, brokerId 0 of every cached route, at start, every
//!   [`CLIENT_HEARTBEAT_INTERVAL_DEFAULT_MS`], as soon as a topic's route is first used, and within
//!   [`PRODUCER_HEARTBEAT_ROUTE_CHECK_MS`] of a change of a group's leader address), as Java's
//!   `MQClientInstance` sends them: brokers list the group's connections for `producerConnection`,
//!   and send CHECK_TRANSACTION_STATE only to producers they know
//!   ([`crate::transaction::TransactionProducer`]). `ProducerBuilder::heartbeat(false)` turns them off.
//! - With `enable_msg_trace`, every attempt that got an answer is traced (a Pub record per message,
//!   as Java's `SendMessageTraceHookImpl`) after the answer, never before it and never delaying it;
//!   sends to the trace topic itself are not traced.
//!
//! Files: `api.rs` the public API, `builder.rs` the options, `inner.rs` what a producer holds,
//! `outgoing.rs` a message made ready for the wire, `send_loop.rs` the attempt loop above,
//! `heartbeat.rs` the heartbeats. This one only re-exports (children import each other, never it).

mod api;
mod builder;
mod heartbeat;
mod inner;
mod outgoing;
mod send_loop;

pub(crate) use api::trace_dispatcher;
pub use builder::DEFAULT_TOPIC_QUEUE_NUMS_DEFAULT;
pub use builder::ProducerBuilder;
pub use builder::RETRY_TIMES_WHEN_SEND_FAILED_DEFAULT;
pub use inner::Producer;

#[cfg(test)]
mod tests {
    use std::net::Ipv4Addr;

    use super::*;
    use std::net::IpAddr;
    use std::time::Duration;

    use raftmq_common::limits::COMPRESS_BODY_OVER_BYTES;
    use raftmq_common::message::Message;
    use raftmq_common::message::MessageQueue;
    use raftmq_common::message::properties;

    use crate::error::ErrorKind;
    use raftmq_common::message::sys_flag;
    use raftmq_common::protocol::header::send::SendMessageRequestHeaderV2;

    fn producer() -> Producer {
        Producer::builder("PG")
            .namesrv_addr("127.0.0.1:1")
            .client_ip(IpAddr::V4(Ipv4Addr::new(10, 0, 0, 7)))
            .instance_name("i1")
            .build()
            .unwrap()
    }

    #[test]
    fn compression_is_chosen_on_the_builder() {
        let b = ProducerBuilder::new("g").compress_type(sys_flag::CompressionType::Lz4).compress_level(3);
        assert_eq!((b.compression.kind, b.compression.level), (sys_flag::CompressionType::Lz4, 3));
    }

    #[test]
    fn builder_refuses_bad_options() {
        assert!(Producer::builder("bad group!").namesrv_addr("a:1").build().is_err());
        assert!(Producer::builder("PG").build().is_err(), "no NameServer");
        assert!(Producer::builder("PG").namesrv_addr("a:1").send_timeout(Duration::ZERO).build().is_err());
        assert!(Producer::builder("PG").namesrv_addr("a:1").retry_times_when_send_failed(99).build().is_err());
        assert!(Producer::builder("PG").namesrv_addr("a:1").max_message_size_bytes(5 << 20).build().is_err());
        assert_eq!(producer().client_id(), "10.0.0.7@i1");
    }

    #[test]
    fn prepare_sets_uniq_key_wait_and_compresses_at_the_threshold() {
        let p = producer();
        let mut small = Message::new("T", vec![7u8; COMPRESS_BODY_OVER_BYTES - 1]);
        let out = p.prepare(&mut small, "send").unwrap();
        assert_eq!(out.sys_flag, 0);
        assert_eq!(out.body.len(), COMPRESS_BODY_OVER_BYTES - 1);
        assert_eq!(small.property(properties::WAIT), Some("true"));
        assert_eq!(out.msg_id.len(), 32);
        assert_eq!(small.uniq_key(), Some(out.msg_id.as_str()));
        // A resend keeps the id.
        assert_eq!(p.prepare(&mut small, "send").unwrap().msg_id, out.msg_id);

        let mut big = Message::new("T", vec![7u8; COMPRESS_BODY_OVER_BYTES]);
        let out = p.prepare(&mut big, "send").unwrap();
        assert_eq!(out.sys_flag, sys_flag::COMPRESSED | sys_flag::COMPRESSION_ZLIB_TYPE);
        assert!(out.body.len() < COMPRESS_BODY_OVER_BYTES);
    }

    #[test]
    fn retry_topic_counters_move_to_the_header() {
        let p = producer();
        let mut m = Message::new("%RETRY%G", &b"x"[..]);
        m.properties.insert(properties::RECONSUME_TIME, "3");
        m.properties.insert(properties::MAX_RECONSUME_TIMES, "16");
        let out = p.prepare(&mut m, "send").unwrap();
        assert_eq!((out.reconsume_times, out.max_reconsume_times), (3, Some(16)));
        assert!(!out.properties.contains(properties::RECONSUME_TIME));
        let req = p.send_command(&out, &MessageQueue::new("%RETRY%G", "b", 0));
        let h: SendMessageRequestHeaderV2 = req.decode_header().unwrap();
        assert_eq!((h.j, h.l, h.m, h.k), (Some(3), Some(16), Some(false), Some(false)));
    }

    #[tokio::test]
    async fn sends_before_start_and_after_shutdown_fail_without_network() {
        let p = producer();
        let err = p.send(Message::new("T", &b"x"[..])).await.unwrap_err();
        assert_eq!(err.kind, ErrorKind::Shutdown);
        p.start().await.unwrap();
        p.shutdown().await;
        assert_eq!(p.send(Message::new("T", &b"x"[..])).await.unwrap_err().kind, ErrorKind::Shutdown);
        assert_eq!(p.start().await.unwrap_err().kind, ErrorKind::Shutdown);
    }
}
