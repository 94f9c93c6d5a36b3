//! Consumer and producer groups: subscription group configs, consume progress, and the clients
//! connected to a broker (connections, running info, the offsets they hold in memory).

use std::collections::BTreeMap;

use raftmq_common::message::MessageQueue;
use raftmq_common::message::validate::validate_group;
use raftmq_common::protocol::RemotingCommand;
use raftmq_common::protocol::RequestCode;
use raftmq_common::protocol::body::JsonBody;
use raftmq_common::protocol::body::connection::ConsumerConnection;
use raftmq_common::protocol::body::connection::ProducerConnection;
use raftmq_common::protocol::body::consume_stats::ConsumeStats;
use raftmq_common::protocol::body::consume_stats::ConsumeStatsList;
use raftmq_common::protocol::body::consume_time_span::QueryConsumeTimeSpanBody;
use raftmq_common::protocol::body::consume_time_span::QueueTimeSpan;
use raftmq_common::protocol::body::consumer_running_info::ConsumerRunningInfo;
use raftmq_common::protocol::body::consumer_status::GetConsumerStatusBody;
use raftmq_common::protocol::body::subscription_group::SubscriptionGroupConfig;
use raftmq_common::protocol::header::admin::DeleteSubscriptionGroupRequestHeader;
use raftmq_common::protocol::header::admin::GetConsumeStatsInBrokerHeader;
use raftmq_common::protocol::header::admin::GetConsumeStatsRequestHeader;
use raftmq_common::protocol::header::admin::GetConsumerConnectionListRequestHeader;
use raftmq_common::protocol::header::admin::GetConsumerRunningInfoRequestHeader;
use raftmq_common::protocol::header::admin::GetProducerConnectionListRequestHeader;
use raftmq_common::protocol::header::admin::QueryConsumeTimeSpanRequestHeader;
use raftmq_common::protocol::header::client::GetConsumerStatusRequestHeader;

use super::client::Admin;
use super::response::decode_body;
use crate::error::ClientError;
use crate::error::ErrorKind;
use crate::error::Result;

impl Admin {
    /// Creates or updates a consumer group on the broker at `addr` (`updateSubGroup`,
    /// UPDATE_AND_CREATE_SUBSCRIPTIONGROUP).
    pub async fn create_subscription_group(&self, addr: &str, config: &SubscriptionGroupConfig) -> Result<()> {
        let op = "updateSubGroup";
        validate_group(&config.group_name)
            .map_err(|e| ClientError::invalid_argument(op, e.to_string()).with_context("group", &config.group_name))?;
        let body = config
            .encode()
            .map_err(|e| ClientError::new(ErrorKind::InvalidArgument, op, "unencodable group config").with_source(e))?;
        let request = RemotingCommand::request(RequestCode::UpdateAndCreateSubscriptiongroup).with_body(body);
        self.broker_call(op, addr, request).await.map(drop).map_err(|e| e.with_context("group", &config.group_name))
    }

    /// Deletes consumer group `group` from the broker at `addr` (`deleteSubGroup`,
    /// DELETE_SUBSCRIPTIONGROUP); its committed offsets stay unless `remove_offset` (Java 4.9's
    /// `-r`), which drops them too.
    pub async fn delete_subscription_group(&self, addr: &str, group: &str, remove_offset: bool) -> Result<()> {
        let op = "deleteSubGroup";
        validate_group(group)
            .map_err(|e| ClientError::invalid_argument(op, e.to_string()).with_context("group", group))?;
        let header =
            DeleteSubscriptionGroupRequestHeader { group_name: group.to_owned(), remove_offset: Some(remove_offset) };
        let request = RemotingCommand::request_with_header(RequestCode::DeleteSubscriptiongroup, &header);
        self.broker_call(op, addr, request).await.map(drop).map_err(|e| e.with_context("group", group))
    }

    /// A consumer group's progress on the broker at `addr`, one topic or all (`consumerProgress`,
    /// GET_CONSUME_STATS).
    pub async fn consume_stats(&self, addr: &str, consumer_group: &str, topic: Option<&str>) -> Result<ConsumeStats> {
        let op = "consumerProgress";
        let header =
            GetConsumeStatsRequestHeader { consumer_group: consumer_group.to_owned(), topic: topic.map(str::to_owned) };
        let request = RemotingCommand::request_with_header(RequestCode::GetConsumeStats, &header);
        let response = self.broker_call(op, addr, request).await?;
        decode_body(op, &response)
    }

    /// Every consumer group's progress on the broker at `addr` (`brokerConsumeStats`,
    /// GET_BROKER_CONSUME_STATS); only ordered topics when `order_only`.
    pub async fn broker_consume_stats(&self, addr: &str, order_only: bool) -> Result<ConsumeStatsList> {
        let op = "brokerConsumeStats";
        let header = GetConsumeStatsInBrokerHeader { is_order: order_only };
        let request = RemotingCommand::request_with_header(RequestCode::GetBrokerConsumeStats, &header);
        let response = self.broker_call(op, addr, request).await?;
        decode_body(op, &response)
    }

    /// Per queue of `topic` on the broker at `addr`: the store times of its first and last message,
    /// of the last one `group` consumed, and how long the next has waited (QUERY_CONSUME_TIME_SPAN,
    /// `queryConsumeTimeSpan`).
    pub async fn consume_time_span(&self, addr: &str, topic: &str, group: &str) -> Result<Vec<QueueTimeSpan>> {
        let op = "queryConsumeTimeSpan";
        let header = QueryConsumeTimeSpanRequestHeader { topic: topic.to_owned(), group: group.to_owned() };
        let request = RemotingCommand::request_with_header(RequestCode::QueryConsumeTimeSpan, &header);
        let response = self.broker_call(op, addr, request).await.map_err(|e| e.with_context("topic", topic))?;
        decode_body::<QueryConsumeTimeSpanBody>(op, &response).map(|body| body.consume_time_span_set)
    }

    /// The live clients, subscriptions and consume settings of a consumer group connected to the
    /// broker at `addr` (`consumerConnection`, GET_CONSUMER_CONNECTION_LIST; CONSUMER_NOT_ONLINE when
    /// none is).
    pub async fn consumer_connection(&self, addr: &str, consumer_group: &str) -> Result<ConsumerConnection> {
        let op = "consumerConnection";
        let header = GetConsumerConnectionListRequestHeader { consumer_group: consumer_group.to_owned() };
        let request = RemotingCommand::request_with_header(RequestCode::GetConsumerConnectionList, &header);
        let response = self.broker_call(op, addr, request).await?;
        decode_body(op, &response)
    }

    /// What consumer `client_id` of `consumer_group` reports about itself (`consumerStatus`,
    /// GET_CONSUMER_RUNNING_INFO), relayed by the broker at `addr`, which must hold the client's
    /// connection; `jstack` asks for a stack dump (only JVM clients have one).
    pub async fn consumer_running_info(
        &self,
        addr: &str,
        consumer_group: &str,
        client_id: &str,
        jstack: bool,
    ) -> Result<ConsumerRunningInfo> {
        let op = "consumerStatus";
        let header = GetConsumerRunningInfoRequestHeader {
            consumer_group: consumer_group.to_owned(),
            client_id: client_id.to_owned(),
            jstack_enable: Some(jstack),
        };
        let request = RemotingCommand::request_with_header(RequestCode::GetConsumerRunningInfo, &header);
        let response = self.broker_call(op, addr, request).await?;
        decode_body(op, &response)
    }

    /// The offsets of `topic` each consumer of `group` connected to the broker at `addr` holds in
    /// memory, keyed by client id (`getConsumerStatus`, INVOKE_BROKER_TO_GET_CONSUMER_STATUS; the
    /// broker asks each client with GET_CONSUMER_STATUS_FROM_CLIENT). `client_id` asks only that
    /// client. A client that does not answer is missing from the table; none connected is an error.
    pub async fn consumer_status(
        &self,
        addr: &str,
        topic: &str,
        group: &str,
        client_id: Option<&str>,
    ) -> Result<BTreeMap<String, BTreeMap<MessageQueue, i64>>> {
        let op = "getConsumerStatus";
        let header = GetConsumerStatusRequestHeader {
            topic: topic.to_owned(),
            group: group.to_owned(),
            client_addr: client_id.map(str::to_owned),
        };
        let request = RemotingCommand::request_with_header(RequestCode::InvokeBrokerToGetConsumerStatus, &header);
        let response = self.broker_call(op, addr, request).await?;
        decode_body::<GetConsumerStatusBody>(op, &response).map(|b| b.consumer_table)
    }

    /// The live clients of a producer group connected to the broker at `addr`
    /// (`producerConnection`, GET_PRODUCER_CONNECTION_LIST).
    pub async fn producer_connection(&self, addr: &str, producer_group: &str) -> Result<ProducerConnection> {
        let op = "producerConnection";
        let header = GetProducerConnectionListRequestHeader { producer_group: producer_group.to_owned() };
        let request = RemotingCommand::request_with_header(RequestCode::GetProducerConnectionList, &header);
        let response = self.broker_call(op, addr, request).await?;
        decode_body(op, &response)
    }
}
