//! Topic calls on brokers: create or update (at each group's leader), delete (brokers, then every
//! NameServer), configs, per-queue offsets, and who consumes a topic.

use std::collections::BTreeSet;

use raftmq_common::message::validate::AUTO_CREATE_TOPIC_KEY_TOPIC;
use raftmq_common::message::validate::validate_topic;
use raftmq_common::protocol::RemotingCommand;
use raftmq_common::protocol::RequestCode;
use raftmq_common::protocol::body::group_list::GroupList;
use raftmq_common::protocol::body::register::TopicConfigSerializeWrapper;
use raftmq_common::protocol::body::topic::TopicConfig;
use raftmq_common::protocol::body::topic_stats::TopicStatsTable;
use raftmq_common::protocol::header::admin::CreateTopicRequestHeader;
use raftmq_common::protocol::header::admin::DeleteTopicRequestHeader;
use raftmq_common::protocol::header::admin::GetTopicStatsInfoRequestHeader;
use raftmq_common::protocol::header::admin::QueryTopicConsumeByWhoRequestHeader;

use super::client::Admin;
use super::response::decode_body;
use crate::error::ClientError;
use crate::error::Result;

impl Admin {
    /// Creates or updates `config` on the broker at `addr` (UPDATE_AND_CREATE_TOPIC).
    pub async fn create_topic(&self, addr: &str, config: &TopicConfig) -> Result<()> {
        let op = "updateTopic";
        validate_topic(&config.topic_name)
            .map_err(|e| ClientError::invalid_argument(op, e.to_string()).with_context("topic", &config.topic_name))?;
        if config.read_queue_nums <= 0 || config.write_queue_nums <= 0 {
            return Err(ClientError::invalid_argument(op, "queue numbers must be positive")
                .with_context("topic", &config.topic_name));
        }
        let header = CreateTopicRequestHeader {
            topic: config.topic_name.clone(),
            default_topic: AUTO_CREATE_TOPIC_KEY_TOPIC.to_owned(),
            read_queue_nums: config.read_queue_nums,
            write_queue_nums: config.write_queue_nums,
            perm: config.perm,
            topic_filter_type: config.topic_filter_type.as_str().to_owned(),
            topic_sys_flag: Some(config.topic_sys_flag),
            order: config.order,
        };
        let request = RemotingCommand::request_with_header(RequestCode::UpdateAndCreateTopic, &header);
        self.broker_call(op, addr, request).await.map(drop).map_err(|e| e.with_context("topic", &config.topic_name))
    }

    /// Creates or updates `config` on every group of `cluster` (at each group's leader). Returns
    /// the addresses written.
    pub async fn create_topic_in_cluster(&self, cluster: &str, config: &TopicConfig) -> Result<Vec<String>> {
        let masters = self.master_addrs_of_cluster(cluster).await?;
        let mut written = Vec::with_capacity(masters.len());
        for (_, addr) in masters {
            self.create_topic(&addr, config).await?;
            written.push(addr);
        }
        Ok(written)
    }

    /// Creates or updates `config` on one group, at its leader. Returns the address written.
    pub async fn create_topic_in_group(&self, broker_name: &str, config: &TopicConfig) -> Result<String> {
        let addr = self.master_addr_of_group(broker_name).await?;
        self.create_topic(&addr, config).await?;
        Ok(addr)
    }

    /// Deletes `topic` on the broker at `addr` (DELETE_TOPIC_IN_BROKER).
    pub async fn delete_topic_in_broker(&self, addr: &str, topic: &str) -> Result<()> {
        let header = DeleteTopicRequestHeader { topic: topic.to_owned() };
        let request = RemotingCommand::request_with_header(RequestCode::DeleteTopicInBroker, &header);
        self.broker_call("deleteTopicInBroker", addr, request).await.map(drop)
    }

    /// `deleteTopic -c`: deletes `topic` on every group leader of `cluster`, then on every NameServer.
    pub async fn delete_topic(&self, topic: &str, cluster: &str) -> Result<()> {
        for (_, addr) in self.master_addrs_of_cluster(cluster).await? {
            self.delete_topic_in_broker(&addr, topic).await?;
        }
        self.delete_topic_in_namesrv(topic, Some(cluster)).await
    }

    /// Every topic config of the broker at `addr` (GET_ALL_TOPIC_CONFIG).
    pub async fn all_topic_config(&self, addr: &str) -> Result<TopicConfigSerializeWrapper> {
        let op = "getAllTopicConfig";
        let response = self.broker_call(op, addr, RemotingCommand::request(RequestCode::GetAllTopicConfig)).await?;
        decode_body(op, &response)
    }

    /// Every queue's offsets of `topic` on the broker at `addr` (`topicStatus`, GET_TOPIC_STATS_INFO).
    pub async fn topic_stats(&self, addr: &str, topic: &str) -> Result<TopicStatsTable> {
        let op = "topicStatus";
        let header = GetTopicStatsInfoRequestHeader { topic: topic.to_owned() };
        let request = RemotingCommand::request_with_header(RequestCode::GetTopicStatsInfo, &header);
        let response = self.broker_call(op, addr, request).await.map_err(|e| e.with_context("topic", topic))?;
        decode_body(op, &response)
    }

    /// The consumer groups of `topic` the broker at `addr` knows: subscribed by a connected client or
    /// with a committed offset (`queryTopicConsumeByWho`, QUERY_TOPIC_CONSUME_BY_WHO).
    pub async fn topic_consume_by_who(&self, addr: &str, topic: &str) -> Result<BTreeSet<String>> {
        let op = "queryTopicConsumeByWho";
        let header = QueryTopicConsumeByWhoRequestHeader { topic: topic.to_owned() };
        let request = RemotingCommand::request_with_header(RequestCode::QueryTopicConsumeByWho, &header);
        let response = self.broker_call(op, addr, request).await.map_err(|e| e.with_context("topic", topic))?;
        decode_body::<GroupList>(op, &response).map(|body| body.group_list)
    }
}
