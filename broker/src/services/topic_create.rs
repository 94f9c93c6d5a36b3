//! Topics a broker creates for itself when a path needs one that does not exist yet (RocketMQ's
//! `createTopicInSendMessageBackMethod`): `%RETRY%` and `%DLQ%` topics, the transaction half, op
//! and check-max topics. Invariant: creation is a replicated TOPIC_UPSERT proposed by the leader,
//! so every replica agrees on what exists; the NameServers hear of it at once.

use raftmq_common::protocol::RemotingCommand;
use raftmq_common::protocol::body::topic::TopicConfig;
use tokio::sync::Notify;

use crate::services::replica::Replica;
use crate::state::entry::BrokerCommand;
use crate::state::store::MessageStore;
use crate::state::store::now_ms;

/// The topic's config, proposing `config` first when the topic does not exist yet; `register_now`
/// wakes NameServer registration.
pub async fn ensure_topic(
    store: &MessageStore,
    replica: &Replica,
    broker_name: &str,
    register_now: &Notify,
    config: TopicConfig,
) -> Result<TopicConfig, RemotingCommand> {
    if let Some(existing) = store.metadata().topics.get(&config.topic_name) {
        return Ok(existing.clone());
    }
    tracing::info!(topic = %config.topic_name, queues = config.write_queue_nums, "creating a send-back topic");
    let command = BrokerCommand::TopicUpsert { proposed_at_ms: now_ms() as i64, config: config.clone() };
    replica.propose(&command).await.map_err(|e| e.to_response(broker_name))?;
    register_now.notify_one();
    Ok(config)
}
