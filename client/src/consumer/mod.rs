//! Consumers: [`PushConsumer`] (`DefaultMQPushConsumer`) and [`PullConsumer`]
//! (`DefaultLitePullConsumer`), RocketMQ 4.x semantics over the remoting protocol.
//!
//! Modules in data-flow order:
//! - `consumer_config`: the options both consumers share, their checks and setters.
//! - [`subscription`]: tag expressions → `SubscriptionData`, the client-side tag re-check.
//! - [`rebalance`]: queue allocation strategies (pure, Java-exact).
//! - `client_instance`: client id, NOTIFY_CONSUMER_IDS_CHANGED, every consumer-side broker call.
//! - [`offset_store`]: remote (clustering) and local-file (broadcasting) offsets.
//! - [`pull_api`]: PULL_MESSAGE responses → [`PullResult`].
//! - `process_queue`: per-queue cache; committed offset = smallest in flight.
//! - [`listener`]: listener traits and statuses.
//! - [`send_back`]: the retry message sent when CONSUMER_SEND_MSG_BACK fails.
//! - [`push`]: [`PushConsumer`]; [`pull`]: [`PullConsumer`] (folders, one file per concept).
//! - [`default_pull`]: [`DefaultPullConsumer`] (`DefaultMQPullConsumer`): pulls by queue and offset.

pub(crate) mod client_instance;
pub(crate) mod consume_pool;
pub(crate) mod consumer_config;
pub mod default_pull;
pub mod listener;
pub mod offset_store;
pub(crate) mod process_queue;
pub mod pull;
pub mod pull_api;
pub mod push;
pub mod rebalance;
pub mod send_back;
pub mod subscription;
pub(crate) mod topic_rates;

pub use default_pull::DefaultPullConsumer;
pub use default_pull::DefaultPullConsumerBuilder;
pub use listener::ConsumeConcurrentlyContext;
pub use listener::ConsumeConcurrentlyStatus;
pub use listener::ConsumeOrderlyContext;
pub use listener::ConsumeOrderlyStatus;
pub use listener::MessageListenerConcurrently;
pub use listener::MessageListenerOrderly;
pub use offset_store::ConsumeFrom;
pub use pull::PullConsumer;
pub use pull::PullConsumerBuilder;
pub use pull_api::PullResult;
pub use pull_api::PullStatus;
pub use push::ConsumerStats;
pub use push::PushConsumer;
pub use push::PushConsumerBuilder;
pub use raftmq_common::protocol::body::heartbeat::MessageModel;
pub use rebalance::AllocateStrategy;
pub use rebalance::MachineRoomResolver;
pub use subscription::MessageSelector;
