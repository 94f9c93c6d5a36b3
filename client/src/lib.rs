//! raftmq-client: the RocketMQ 4.x client SDK: producer, admin, push and lite pull consumers.
//!
//! Modules in data-flow order:
//! - `client_config`: the options every client builder shares (Java's `ClientConfig`); `clock`:
//!   wall-clock milliseconds.
//! - [`error`]: [`ClientError`] with `is_retryable()` / `is_outcome_unknown()`.
//! - [`namesrv`]: which NameServer to ask (failover, last good first).
//! - [`route`]: topic routes, publish/subscribe queues, the leader-hint convention.
//! - [`failover`]: suspect addresses, which replica to ask, the per-group refresh rate.
//! - [`fault_strategy`]: latency-based avoidance of failed or slow broker groups.
//! - [`selector`]: queue selectors for partition-ordered sends.
//! - [`send_result`]: [`SendResult`], [`SendStatus`], response mapping.
//! - [`producer`]: [`Producer`] / [`ProducerBuilder`]; [`body_compression`]: which bodies it
//!   compresses (zlib, LZ4, ZSTD).
//! - [`transaction`]: [`TransactionProducer`] and [`TransactionListener`]: half messages,
//!   END_TRANSACTION, answers to the broker's CHECK_TRANSACTION_STATE.
//! - `trace`: message trace (`enableMsgTrace`): the dispatcher that sends trace records.
//! - [`admin`]: [`Admin`]: NameServer and broker administration calls.
//! - [`consumer`]: [`PushConsumer`], [`PullConsumer`] and [`DefaultPullConsumer`] (rebalance,
//!   offsets, listeners).
//!
//! ```no_run
//! # async fn demo() -> raftmq_client::Result<()> {
//! use raftmq_client::Producer;
//! use raftmq_common::message::Message;
//!
//! let producer = Producer::builder("OrderProducers").namesrv_addr("127.0.0.1:9876").build()?;
//! producer.start().await?;
//! let result = producer.send(Message::new("TopicTest", "hello").with_tags("TagA")).await?;
//! println!("{} {:?} {}", result.msg_id, result.status, result.queue_offset);
//! producer.shutdown().await;
//! # Ok(())
//! # }
//! ```

pub mod admin;
pub mod body_compression;
mod client_config;
mod clock;
pub mod consumer;
pub mod error;
pub mod failover;
pub mod fault_strategy;
pub mod namesrv;
pub mod producer;
pub mod reply;
pub mod route;
pub mod selector;
pub mod send_result;
pub(crate) mod trace;
pub mod transaction;

pub use admin::Admin;
pub use consumer::DefaultPullConsumer;
pub use consumer::PullConsumer;
pub use consumer::PushConsumer;
pub use error::ClientError;
pub use error::ErrorKind;
pub use error::Result;
pub use producer::Producer;
pub use producer::ProducerBuilder;
pub use raftmq_common::message::sys_flag::CompressionType;
pub use raftmq_common::protocol::acl::SessionCredentials;
pub use raftmq_common::tls_settings::TlsClientSettings;
pub use selector::MessageQueueSelector;
pub use selector::SelectMessageQueueByHash;
pub use send_result::SendResult;
pub use send_result::SendStatus;
pub use transaction::LocalTransactionState;
pub use transaction::TransactionListener;
pub use transaction::TransactionProducer;
pub use transaction::TransactionProducerBuilder;
pub use transaction::TransactionSendResult;
