//! `ClientManager`: the clients connected to this broker (RocketMQ's `ConsumerManager` +
//! `ProducerManager` + `ClientHousekeepingService`), and the gRPC producers reachable for
//! transaction check-back ([`TransactionCheckers`]). Local, not replicated: clients heartbeat every
//! broker of the group. Orderly consumers' queue locks are replicated instead
//! ([`crate::services::rebalance_lock`]).
//!
//! Invariants: a channel is keyed by its connection id, so a reconnecting client replaces nothing it
//! should not; a channel silent for [`BROKER_CLIENT_CHANNEL_EXPIRED_MS`] or whose connection closed is
//! removed, and a consumer group whose client set changed is reported so its members are notified
//! (NOTIFY_CONSUMER_IDS_CHANGED) and rebalance at once; a group with no channel left is forgotten.

use std::collections::BTreeSet;
use std::collections::HashMap;
use std::sync::Mutex;

use raftmq_common::limits::BROKER_CLIENT_CHANNEL_EXPIRED_MS;
use raftmq_common::message::validate::is_retry_topic;
use raftmq_common::protocol::LanguageCode;
use raftmq_common::protocol::body::connection::Connection as ConnectionBody;
use raftmq_common::protocol::body::heartbeat::ConsumeFromWhere;
use raftmq_common::protocol::body::heartbeat::ConsumeType;
use raftmq_common::protocol::body::heartbeat::ConsumerData;
use raftmq_common::protocol::body::heartbeat::MessageModel;
use raftmq_common::protocol::body::heartbeat::SubscriptionData;
use raftmq_common::remoting::Connection;
use raftmq_common::sync::lock;

use crate::services::transaction_checker::TransactionCheckers;

/// One client connection of a group.
#[derive(Debug, Clone)]
pub struct ClientChannel {
    /// `clientID` (`ip@instanceName`).
    pub client_id: String,
    /// The connection, to send requests back.
    pub connection: Connection,
    /// Last heartbeat (ms).
    pub last_update_ms: u64,
    /// The client's language, from its heartbeat's remoting header.
    pub language: LanguageCode,
    /// The client's `MQVersion` ordinal, from the same header.
    pub version: i32,
}

impl ClientChannel {
    /// The admin view of this channel (`Connection` of GET_*_CONNECTION_LIST).
    pub fn to_connection_body(&self) -> ConnectionBody {
        ConnectionBody {
            client_addr: self.connection.peer_addr().to_string(),
            client_id: self.client_id.clone(),
            language: self.language.name().to_owned(),
            version: self.version,
        }
    }
}

/// What the broker knows of a consumer group.
#[derive(Debug, Clone)]
pub struct ConsumerGroupInfo {
    /// Channels by connection id.
    pub channels: HashMap<u64, ClientChannel>,
    /// Subscriptions by topic.
    pub subscriptions: HashMap<String, SubscriptionData>,
    /// Pull or push.
    pub consume_type: ConsumeType,
    /// Clustering or broadcasting.
    pub message_model: MessageModel,
    /// Where a new group starts.
    pub consume_from_where: ConsumeFromWhere,
}

impl ConsumerGroupInfo {
    /// Client ids, sorted and distinct.
    pub fn client_ids(&self) -> Vec<String> {
        let ids: BTreeSet<&str> = self.channels.values().map(|c| c.client_id.as_str()).collect();
        ids.into_iter().map(str::to_owned).collect()
    }
}

/// Connected producers and consumers.
#[derive(Debug, Default)]
pub struct ClientManager {
    consumers: Mutex<HashMap<String, ConsumerGroupInfo>>,
    producers: Mutex<HashMap<String, HashMap<u64, ClientChannel>>>,
    /// Rotates [`ClientManager::producer_connection`]'s choice.
    producer_turn: std::sync::atomic::AtomicUsize,
    /// Producers asked over another protocol (gRPC Telemetry streams).
    checkers: TransactionCheckers,
}

impl ClientManager {
    /// Nobody connected.
    pub fn new() -> Self {
        ClientManager::default()
    }

    /// HEART_BEAT of a consumer (`registerConsumer`). Returns whether the group's client set changed.
    pub fn register_consumer(&self, data: &ConsumerData, channel: ClientChannel) -> bool {
        let mut consumers = lock(&self.consumers);
        let info = consumers.entry(data.group_name.clone()).or_insert_with(|| ConsumerGroupInfo {
            channels: HashMap::new(),
            subscriptions: HashMap::new(),
            consume_type: data.consume_type,
            message_model: data.message_model,
            consume_from_where: data.consume_from_where,
        });
        info.consume_type = data.consume_type;
        info.message_model = data.message_model;
        info.consume_from_where = data.consume_from_where;
        let before = info.client_ids();
        info.channels.insert(channel.connection.id(), channel);
        // Newer versions replace older ones; topics the heartbeat no longer lists are dropped, except
        // the retry topic, which clients subscribe implicitly (`ConsumerGroupInfo.updateSubscription`).
        let listed: BTreeSet<&str> = data.subscription_data_set.iter().map(|s| s.topic.as_str()).collect();
        info.subscriptions.retain(|topic, _| listed.contains(topic.as_str()) || is_retry_topic(topic));
        for sub in &data.subscription_data_set {
            match info.subscriptions.get(&sub.topic) {
                Some(old) if old.sub_version >= sub.sub_version => {}
                _ => {
                    info.subscriptions.insert(sub.topic.clone(), sub.clone());
                }
            }
        }
        info.client_ids() != before
    }

    /// HEART_BEAT of a producer.
    pub fn register_producer(&self, group: &str, channel: ClientChannel) {
        lock(&self.producers).entry(group.to_owned()).or_default().insert(channel.connection.id(), channel);
    }

    /// Whether a producer of `group` is connected, over remoting or as a registered checker.
    pub fn has_producer(&self, group: &str) -> bool {
        lock(&self.producers).get(group).is_some_and(|channels| channels.values().any(|c| !c.connection.is_closed()))
            || self.checkers.has_open(group)
    }

    /// The producers reached for check-back over another protocol (gRPC).
    pub fn transaction_checkers(&self) -> &TransactionCheckers {
        &self.checkers
    }

    /// The live channels of a producer group, by client id; `None` when the group never connected
    /// (GET_PRODUCER_CONNECTION_LIST).
    pub fn producer_channels(&self, group: &str) -> Option<Vec<ClientChannel>> {
        let producers = lock(&self.producers);
        let mut live: Vec<ClientChannel> =
            producers.get(group)?.values().filter(|c| !c.connection.is_closed()).cloned().collect();
        live.sort_by(|a, b| a.client_id.cmp(&b.client_id));
        Some(live)
    }

    /// A live connection of a producer group (`getAvailableChannel`), turn by turn across calls so
    /// transaction checks spread over the group's producers.
    pub fn producer_connection(&self, group: &str) -> Option<Connection> {
        let producers = lock(&self.producers);
        let mut live: Vec<&ClientChannel> =
            producers.get(group)?.values().filter(|c| !c.connection.is_closed()).collect();
        if live.is_empty() {
            return None;
        }
        live.sort_by_key(|c| c.connection.id());
        let turn = self.producer_turn.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        live.get(turn % live.len()).map(|c| c.connection.clone())
    }

    /// The live connection of producer client `client_id` in any group, the most recently heard one
    /// when it has several (`ProducerManager.findChannel`): where a request/reply reply is pushed.
    pub fn producer_connection_of_client(&self, client_id: &str) -> Option<Connection> {
        let producers = lock(&self.producers);
        producers
            .values()
            .flat_map(HashMap::values)
            .filter(|c| c.client_id == client_id && !c.connection.is_closed())
            .max_by_key(|c| c.last_update_ms)
            .map(|c| c.connection.clone())
    }

    /// UNREGISTER_CLIENT: removes the connection's channel from the groups. Returns consumer groups
    /// whose client set changed.
    pub fn unregister(
        &self,
        connection_id: u64,
        producer_group: Option<&str>,
        consumer_group: Option<&str>,
    ) -> Vec<String> {
        if let Some(group) = producer_group {
            let mut producers = lock(&self.producers);
            if let Some(channels) = producers.get_mut(group) {
                channels.remove(&connection_id);
                if channels.is_empty() {
                    producers.remove(group);
                }
            }
        }
        let mut changed = Vec::new();
        if let Some(group) = consumer_group {
            let mut consumers = lock(&self.consumers);
            if let Some(info) = consumers.get_mut(group) {
                if info.channels.remove(&connection_id).is_some() {
                    changed.push(group.to_owned());
                }
                if info.channels.is_empty() {
                    consumers.remove(group);
                }
            }
        }
        changed
    }

    /// Removes every channel of a closed connection. Returns consumer groups whose client set changed.
    pub fn connection_closed(&self, connection_id: u64) -> Vec<String> {
        self.remove_channels(|id, _| id == connection_id)
    }

    /// Removes channels silent since before `now_ms - 120 s` (`scanNotActiveChannel`).
    pub fn expire(&self, now_ms: u64) -> Vec<String> {
        let cutoff = now_ms.saturating_sub(BROKER_CLIENT_CHANNEL_EXPIRED_MS);
        self.remove_channels(|_, c| c.last_update_ms < cutoff || c.connection.is_closed())
    }

    fn remove_channels(&self, dead: impl Fn(u64, &ClientChannel) -> bool) -> Vec<String> {
        {
            let mut producers = lock(&self.producers);
            for channels in producers.values_mut() {
                channels.retain(|id, c| !dead(*id, c));
            }
            producers.retain(|_, channels| !channels.is_empty());
        }
        let mut changed = Vec::new();
        let mut consumers = lock(&self.consumers);
        for (group, info) in consumers.iter_mut() {
            let before = info.channels.len();
            info.channels.retain(|id, c| !dead(*id, c));
            if info.channels.len() != before {
                changed.push(group.clone());
            }
        }
        consumers.retain(|_, info| !info.channels.is_empty());
        changed
    }

    /// A group's registration, if any client of it is connected.
    pub fn consumer_group(&self, group: &str) -> Option<ConsumerGroupInfo> {
        lock(&self.consumers).get(group).cloned()
    }

    /// Groups with a connected client subscribed to `topic` (`queryTopicConsumeByWho`).
    pub fn groups_subscribing(&self, topic: &str) -> Vec<String> {
        lock(&self.consumers)
            .iter()
            .filter(|(_, info)| info.subscriptions.contains_key(topic))
            .map(|(g, _)| g.clone())
            .collect()
    }

    /// A group's subscription of `topic` from its heartbeats.
    pub fn subscription(&self, group: &str, topic: &str) -> Result<SubscriptionData, SubscriptionMissing> {
        let consumers = lock(&self.consumers);
        let info = consumers.get(group).ok_or(SubscriptionMissing::Group)?;
        info.subscriptions.get(topic).cloned().ok_or(SubscriptionMissing::Topic)
    }

    /// Client ids of a consumer group (GET_CONSUMER_LIST_BY_GROUP).
    pub fn consumer_ids(&self, group: &str) -> Option<Vec<String>> {
        lock(&self.consumers).get(group).map(ConsumerGroupInfo::client_ids)
    }

    /// Connections of a consumer group's clients.
    pub fn consumer_connections(&self, group: &str) -> Vec<Connection> {
        lock(&self.consumers)
            .get(group)
            .map(|info| info.channels.values().map(|c| c.connection.clone()).collect())
            .unwrap_or_default()
    }

    /// (client id, connection) of each of a group's connected clients.
    pub fn consumer_clients(&self, group: &str) -> Vec<(String, Connection)> {
        lock(&self.consumers)
            .get(group)
            .map(|info| info.channels.values().map(|c| (c.client_id.clone(), c.connection.clone())).collect())
            .unwrap_or_default()
    }

    /// The connection of consumer `client_id` of `group`, if it is connected here.
    pub fn consumer_connection(&self, group: &str, client_id: &str) -> Option<Connection> {
        lock(&self.consumers)
            .get(group)?
            .channels
            .values()
            .find(|c| c.client_id == client_id)
            .map(|c| c.connection.clone())
    }

    /// Producer groups with at least one connected client.
    pub fn producer_groups(&self) -> Vec<String> {
        lock(&self.producers).keys().cloned().collect()
    }
}

/// Why a pull has no registered subscription.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SubscriptionMissing {
    /// No client of the group heartbeated here.
    Group,
    /// The group does not subscribe to the topic.
    Topic,
}
