//! [`Admin`]: the administration calls behind `mqadmin` (`DefaultMQAdminExt` / `MQClientAPIImpl`):
//! NameServer queries and writes, and broker-side topic, group, offset and message-query calls.
//!
//! Invariants:
//! - NameServer reads ask one NameServer (failover, last good first); NameServer writes (KV config,
//!   topic deletion) go to **every** NameServer, as the Java client does, because NameServers share
//!   no state.
//! - Broker writes go to a group's brokerId 0 address only: in raftmq that is the Raft leader, which
//!   replicates the change to its group; a follower would refuse it.
//! - Every call is bounded by the admin's timeout; every non-SUCCESS answer is an
//!   [`ErrorKind::Broker`] error carrying the code and remark.

use std::collections::BTreeMap;
use std::collections::BTreeSet;
use std::time::Duration;

use bytes::Bytes;
use raftmq_common::limits::RPC_TIMEOUT_DEFAULT_MS;
use raftmq_common::message::MessageExt;
use raftmq_common::message::MessageQueue;
use raftmq_common::message::compress::uncompress_stored_body;
use raftmq_common::message::msg_id::OffsetMsgId;
use raftmq_common::message::record::DecodeOptions;
use raftmq_common::message::record::decode_all;
use raftmq_common::message::sys_flag;
use raftmq_common::message::validate::AUTO_CREATE_TOPIC_KEY_TOPIC;
use raftmq_common::message::validate::validate_group;
use raftmq_common::message::validate::validate_topic;
use raftmq_common::protocol::RemotingCommand;
use raftmq_common::protocol::RequestCode;
use raftmq_common::protocol::ResponseCode;
use raftmq_common::protocol::body::JsonBody;
use raftmq_common::protocol::body::consume_stats::ConsumeStats;
use raftmq_common::protocol::body::consumer_offset::ConsumerOffsetSerializeWrapper;
use raftmq_common::protocol::body::register::ClusterInfo;
use raftmq_common::protocol::body::register::KvTable;
use raftmq_common::protocol::body::register::TopicConfigSerializeWrapper;
use raftmq_common::protocol::body::register::TopicList;
use raftmq_common::protocol::body::route::BrokerData;
use raftmq_common::protocol::body::route::MASTER_ID;
use raftmq_common::protocol::body::route::TopicRouteData;
use raftmq_common::protocol::body::subscription_group::SubscriptionGroupConfig;
use raftmq_common::protocol::body::topic::TopicConfig;
use raftmq_common::protocol::body::topic_stats::TopicStatsTable;
use raftmq_common::protocol::header::CommandHeader;
use raftmq_common::protocol::header::admin::CreateTopicRequestHeader;
use raftmq_common::protocol::header::admin::DeleteTopicRequestHeader;
use raftmq_common::protocol::header::admin::GetConsumeStatsRequestHeader;
use raftmq_common::protocol::header::admin::GetTopicStatsInfoRequestHeader;
use raftmq_common::protocol::header::admin::ResetOffsetRequestHeader;
use raftmq_common::protocol::header::namesrv::DeleteKvConfigRequestHeader;
use raftmq_common::protocol::header::namesrv::DeleteTopicFromNamesrvRequestHeader;
use raftmq_common::protocol::header::namesrv::GetKvConfigRequestHeader;
use raftmq_common::protocol::header::namesrv::GetKvConfigResponseHeader;
use raftmq_common::protocol::header::namesrv::GetKvListByNamespaceRequestHeader;
use raftmq_common::protocol::header::namesrv::GetRouteInfoRequestHeader;
use raftmq_common::protocol::header::namesrv::GetTopicsByClusterRequestHeader;
use raftmq_common::protocol::header::namesrv::PutKvConfigRequestHeader;
use raftmq_common::protocol::header::offset::GetMaxOffsetRequestHeader;
use raftmq_common::protocol::header::offset::GetMaxOffsetResponseHeader;
use raftmq_common::protocol::header::offset::GetMinOffsetRequestHeader;
use raftmq_common::protocol::header::offset::GetMinOffsetResponseHeader;
use raftmq_common::protocol::header::offset::QueryConsumerOffsetRequestHeader;
use raftmq_common::protocol::header::offset::QueryConsumerOffsetResponseHeader;
use raftmq_common::protocol::header::offset::SearchOffsetRequestHeader;
use raftmq_common::protocol::header::offset::SearchOffsetResponseHeader;
use raftmq_common::protocol::header::offset::UpdateConsumerOffsetRequestHeader;
use raftmq_common::protocol::header::query::QueryMessageRequestHeader;
use raftmq_common::protocol::header::query::ViewMessageRequestHeader;
use raftmq_common::remoting::RemotingClient;

use crate::error::ClientError;
use crate::error::ErrorKind;
use crate::error::Result;
use crate::namesrv::NamesrvClient;
use crate::namesrv::parse_namesrv_addrs;

/// An admin client; clones share connections.
#[derive(Debug, Clone)]
pub struct Admin {
    remoting: RemotingClient,
    namesrv: NamesrvClient,
    timeout: Duration,
}

impl Admin {
    /// An admin for the NameServers in `namesrv_addr` (`"ip:port;ip:port"`), 3 s per call.
    pub fn new(namesrv_addr: &str) -> Result<Self> {
        let remoting = RemotingClient::new();
        let namesrv = NamesrvClient::new(remoting.clone(), parse_namesrv_addrs(namesrv_addr))?;
        Ok(Admin { remoting, namesrv, timeout: Duration::from_millis(RPC_TIMEOUT_DEFAULT_MS) })
    }

    /// Sets the deadline of each call.
    pub fn with_timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// Closes every connection.
    pub async fn shutdown(&self) {
        self.remoting.close().await;
    }

    async fn namesrv_call(&self, op: &'static str, request: RemotingCommand) -> Result<RemotingCommand> {
        let response = self.namesrv.invoke(op, request, self.timeout).await?;
        success(op, response)
    }

    async fn broker_call(&self, op: &'static str, addr: &str, request: RemotingCommand) -> Result<RemotingCommand> {
        let response = self
            .remoting
            .invoke(addr, request, self.timeout)
            .await
            .map_err(|e| ClientError::remoting(op, e).with_context("addr", addr))?;
        success(op, response).map_err(|e| e.with_context("addr", addr))
    }

    // ---- NameServer ----

    /// The route of `topic` (`topicRoute`); TOPIC_NOT_EXIST is a [`ErrorKind::Broker`] error.
    pub async fn topic_route(&self, topic: &str) -> Result<TopicRouteData> {
        let header = GetRouteInfoRequestHeader { topic: topic.to_owned(), accept_standard_json_only: Some(true) };
        let request = RemotingCommand::request_with_header(RequestCode::GetRouteinfoByTopic, &header);
        let response = self.namesrv_call("topicRoute", request).await.map_err(|e| e.with_context("topic", topic))?;
        decode_body("topicRoute", &response)
    }

    /// Clusters, groups and addresses (`clusterList`, GET_BROKER_CLUSTER_INFO).
    pub async fn cluster_info(&self) -> Result<ClusterInfo> {
        let response =
            self.namesrv_call("clusterList", RemotingCommand::request(RequestCode::GetBrokerClusterInfo)).await?;
        decode_body("clusterList", &response)
    }

    /// Every topic the NameServer knows (`topicList`, GET_ALL_TOPIC_LIST_FROM_NAMESERVER).
    pub async fn all_topics(&self) -> Result<BTreeSet<String>> {
        let request = RemotingCommand::request(RequestCode::GetAllTopicListFromNameserver);
        let response = self.namesrv_call("topicList", request).await?;
        decode_body::<TopicList>("topicList", &response).map(|l| l.topic_list)
    }

    /// The topics served by `cluster` (GET_TOPICS_BY_CLUSTER).
    pub async fn topics_by_cluster(&self, cluster: &str) -> Result<BTreeSet<String>> {
        let header = GetTopicsByClusterRequestHeader { cluster: cluster.to_owned() };
        let request = RemotingCommand::request_with_header(RequestCode::GetTopicsByCluster, &header);
        let response = self.namesrv_call("topicsByCluster", request).await?;
        decode_body::<TopicList>("topicsByCluster", &response).map(|l| l.topic_list)
    }

    /// Removes `topic` (only `cluster`'s queues when given) from every NameServer (DELETE_TOPIC_IN_NAMESRV).
    pub async fn delete_topic_in_namesrv(&self, topic: &str, cluster: Option<&str>) -> Result<()> {
        let header =
            DeleteTopicFromNamesrvRequestHeader { topic: topic.to_owned(), cluster_name: cluster.map(str::to_owned) };
        let request = RemotingCommand::request_with_header(RequestCode::DeleteTopicInNamesrv, &header);
        self.namesrv.invoke_all("deleteTopicInNamesrv", request, self.timeout).await
    }

    /// Sets a KV config on every NameServer (PUT_KV_CONFIG).
    pub async fn put_kv_config(&self, namespace: &str, key: &str, value: &str) -> Result<()> {
        let header =
            PutKvConfigRequestHeader { namespace: namespace.to_owned(), key: key.to_owned(), value: value.to_owned() };
        let request = RemotingCommand::request_with_header(RequestCode::PutKvConfig, &header);
        self.namesrv.invoke_all("putKvConfig", request, self.timeout).await
    }

    /// A KV config value; `None` when the NameServer has none (QUERY_NOT_FOUND).
    pub async fn get_kv_config(&self, namespace: &str, key: &str) -> Result<Option<String>> {
        let op = "getKvConfig";
        let header = GetKvConfigRequestHeader { namespace: namespace.to_owned(), key: key.to_owned() };
        let request = RemotingCommand::request_with_header(RequestCode::GetKvConfig, &header);
        let response = self.namesrv.invoke(op, request, self.timeout).await?;
        if response.response_code() == ResponseCode::QueryNotFound {
            return Ok(None);
        }
        let response = success(op, response)?;
        let header: GetKvConfigResponseHeader = decode_header(op, &response)?;
        Ok(header.value)
    }

    /// Deletes a KV config on every NameServer (DELETE_KV_CONFIG).
    pub async fn delete_kv_config(&self, namespace: &str, key: &str) -> Result<()> {
        let header = DeleteKvConfigRequestHeader { namespace: namespace.to_owned(), key: key.to_owned() };
        let request = RemotingCommand::request_with_header(RequestCode::DeleteKvConfig, &header);
        self.namesrv.invoke_all("deleteKvConfig", request, self.timeout).await
    }

    /// One KV namespace (GET_KVLIST_BY_NAMESPACE); empty when the NameServer has none.
    pub async fn kv_list_by_namespace(&self, namespace: &str) -> Result<BTreeMap<String, String>> {
        let op = "getKvListByNamespace";
        let header = GetKvListByNamespaceRequestHeader { namespace: namespace.to_owned() };
        let request = RemotingCommand::request_with_header(RequestCode::GetKvlistByNamespace, &header);
        let response = self.namesrv.invoke(op, request, self.timeout).await?;
        if response.response_code() == ResponseCode::QueryNotFound {
            return Ok(BTreeMap::new());
        }
        let response = success(op, response)?;
        decode_body::<KvTable>(op, &response).map(|t| t.table)
    }

    /// `(brokerName, brokerId 0 address)` of every group of `cluster` that has one
    /// (`CommandUtil.fetchMasterAddrByClusterName`).
    pub async fn master_addrs_of_cluster(&self, cluster: &str) -> Result<Vec<(String, String)>> {
        let info = self.cluster_info().await?;
        let names = info.cluster_addr_table.get(cluster).ok_or_else(|| {
            ClientError::invalid_argument("clusterMasters", "no such cluster").with_context("cluster", cluster)
        })?;
        Ok(names
            .iter()
            .filter_map(|name| {
                let addr = info.broker_addr_table.get(name)?.broker_addrs.get(&MASTER_ID)?;
                Some((name.clone(), addr.clone()))
            })
            .collect())
    }

    /// The brokerId 0 address of `broker_name`.
    pub async fn master_addr_of_group(&self, broker_name: &str) -> Result<String> {
        let info = self.cluster_info().await?;
        info.broker_addr_table.get(broker_name).and_then(|bd| bd.broker_addrs.get(&MASTER_ID)).cloned().ok_or_else(
            || {
                ClientError::new(ErrorKind::NoRoute, "groupMaster", "the group has no brokerId 0 (leader) address")
                    .with_context("broker", broker_name)
            },
        )
    }

    // ---- Brokers ----

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

    /// A consumer group's committed offset of one queue; `None` when the broker has none (QUERY_NOT_FOUND).
    pub async fn query_consumer_offset(
        &self,
        addr: &str,
        consumer_group: &str,
        topic: &str,
        queue_id: i32,
    ) -> Result<Option<i64>> {
        let op = "queryConsumerOffset";
        let header = QueryConsumerOffsetRequestHeader {
            consumer_group: consumer_group.to_owned(),
            topic: topic.to_owned(),
            queue_id,
            bname: None,
        };
        let request = RemotingCommand::request_with_header(RequestCode::QueryConsumerOffset, &header);
        let response = self
            .remoting
            .invoke(addr, request, self.timeout)
            .await
            .map_err(|e| ClientError::remoting(op, e).with_context("addr", addr))?;
        if response.response_code() == ResponseCode::QueryNotFound {
            return Ok(None);
        }
        let response = success(op, response)?;
        decode_header::<QueryConsumerOffsetResponseHeader>(op, &response).map(|h| Some(h.offset))
    }

    /// The next offset to be written in one queue (GET_MAX_OFFSET).
    pub async fn max_offset(&self, addr: &str, topic: &str, queue_id: i32) -> Result<i64> {
        let op = "getMaxOffset";
        let header = GetMaxOffsetRequestHeader { topic: topic.to_owned(), queue_id, bname: None };
        let request = RemotingCommand::request_with_header(RequestCode::GetMaxOffset, &header);
        let response = self.broker_call(op, addr, request).await?;
        decode_header::<GetMaxOffsetResponseHeader>(op, &response).map(|h| h.offset)
    }

    /// The oldest offset still stored in one queue (GET_MIN_OFFSET).
    pub async fn min_offset(&self, addr: &str, topic: &str, queue_id: i32) -> Result<i64> {
        let op = "getMinOffset";
        let header = GetMinOffsetRequestHeader { topic: topic.to_owned(), queue_id, bname: None };
        let request = RemotingCommand::request_with_header(RequestCode::GetMinOffset, &header);
        let response = self.broker_call(op, addr, request).await?;
        decode_header::<GetMinOffsetResponseHeader>(op, &response).map(|h| h.offset)
    }

    /// Every queue's offsets of `topic` on the broker at `addr` (`topicStatus`, GET_TOPIC_STATS_INFO).
    pub async fn topic_stats(&self, addr: &str, topic: &str) -> Result<TopicStatsTable> {
        let op = "topicStatus";
        let header = GetTopicStatsInfoRequestHeader { topic: topic.to_owned() };
        let request = RemotingCommand::request_with_header(RequestCode::GetTopicStatsInfo, &header);
        let response = self.broker_call(op, addr, request).await.map_err(|e| e.with_context("topic", topic))?;
        decode_body(op, &response)
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

    /// Every committed offset of every group on the broker at `addr` (GET_ALL_CONSUMER_OFFSET).
    pub async fn all_consumer_offset(&self, addr: &str) -> Result<ConsumerOffsetSerializeWrapper> {
        let op = "getAllConsumerOffset";
        let response = self.broker_call(op, addr, RemotingCommand::request(RequestCode::GetAllConsumerOffset)).await?;
        decode_body(op, &response)
    }

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

    /// The first offset of one queue stored at or after `timestamp_ms` (SEARCH_OFFSET_BY_TIMESTAMP).
    pub async fn search_offset(&self, addr: &str, topic: &str, queue_id: i32, timestamp_ms: i64) -> Result<i64> {
        let op = "searchOffset";
        let header =
            SearchOffsetRequestHeader { topic: topic.to_owned(), queue_id, timestamp: timestamp_ms, bname: None };
        let request = RemotingCommand::request_with_header(RequestCode::SearchOffsetByTimestamp, &header);
        let response = self.broker_call(op, addr, request).await?;
        decode_header::<SearchOffsetResponseHeader>(op, &response).map(|h| h.offset)
    }

    /// Sets a consumer group's committed offset of one queue and waits for the answer
    /// (UPDATE_CONSUMER_OFFSET, sent two-way, unlike a consumer's periodic oneway commit).
    pub async fn update_consumer_offset(
        &self,
        addr: &str,
        consumer_group: &str,
        topic: &str,
        queue_id: i32,
        offset: i64,
    ) -> Result<()> {
        let header = UpdateConsumerOffsetRequestHeader {
            consumer_group: consumer_group.to_owned(),
            topic: topic.to_owned(),
            queue_id,
            commit_offset: offset,
            bname: None,
        };
        let request = RemotingCommand::request_with_header(RequestCode::UpdateConsumerOffset, &header);
        self.broker_call("updateConsumerOffset", addr, request).await.map(drop)
    }

    /// Asks the broker at `addr` to reset `group`'s offsets of `topic` to `timestamp_ms`
    /// (`resetOffsetByTime`, INVOKE_BROKER_TO_RESET_OFFSET); returns the new offset of each queue.
    /// Java brokers answer CONSUMER_NOT_ONLINE when no consumer of the group is connected.
    pub async fn reset_offset_by_time(
        &self,
        addr: &str,
        topic: &str,
        group: &str,
        timestamp_ms: i64,
        force: bool,
    ) -> Result<BTreeMap<MessageQueue, i64>> {
        let op = "resetOffsetByTime";
        let header = ResetOffsetRequestHeader {
            topic: topic.to_owned(),
            group: group.to_owned(),
            timestamp: timestamp_ms,
            is_force: force,
        };
        let request = RemotingCommand::request_with_header(RequestCode::InvokeBrokerToResetOffset, &header);
        let response = self.broker_call(op, addr, request).await?;
        if response.body.is_empty() {
            return Ok(BTreeMap::new());
        }
        decode_body::<ResetOffsetBody>(op, &response).map(|b| b.offset_table)
    }

    /// The message stored at `commit_log_offset` on the broker at `addr` (`queryMsgById`,
    /// VIEW_MESSAGE_BY_ID); the body is decompressed.
    pub async fn view_message(&self, addr: &str, commit_log_offset: i64) -> Result<MessageExt> {
        let op = "queryMsgById";
        let header = ViewMessageRequestHeader { offset: commit_log_offset };
        let request = RemotingCommand::request_with_header(RequestCode::ViewMessageById, &header);
        let response = self.broker_call(op, addr, request).await?;
        let mut msgs = decode_messages(op, &response.body)?;
        if msgs.len() != 1 {
            return Err(ClientError::new(ErrorKind::Protocol, op, format!("{} records in the answer", msgs.len())));
        }
        msgs.pop().ok_or_else(|| ClientError::new(ErrorKind::Protocol, op, "no record in the answer"))
    }

    /// The message an offsetMsgId names (`queryMsgById`). Asks the store host it encodes first; when
    /// that host is gone or cannot answer (a failover moved the group on), asks the replicas of the
    /// host's group (leader first), then those of every other group, for the same physical offset:
    /// replicas of a Raft group hold identical bytes at identical offsets, and an answer is accepted
    /// only if its STOREHOST and PHYSICALOFFSET are the id's, so another group's record never passes.
    pub async fn view_message_by_id(&self, id: &OffsetMsgId) -> Result<MessageExt> {
        let host = id.store_host.to_string();
        let first_error = match self.view_message(&host, id.commit_log_offset).await {
            Ok(m) if m.store_host == id.store_host && m.commit_log_offset == id.commit_log_offset => return Ok(m),
            Ok(m) => ClientError::new(
                ErrorKind::Protocol,
                "queryMsgById",
                format!("{host} answered the record of {} at {}", m.store_host, m.commit_log_offset),
            ),
            Err(e) => e,
        };
        let Ok(cluster) = self.cluster_info().await else { return Err(first_error) };
        let mut groups: Vec<&BrokerData> = cluster.broker_addr_table.values().collect();
        // The host's own group first (a stable sort keeps the rest in name order).
        groups.sort_by_key(|g| !g.broker_addrs.values().any(|a| *a == host));
        for group in groups {
            // brokerId 0 (the leader) first: BTreeMap order.
            for addr in group.broker_addrs.values().filter(|a| **a != host) {
                if let Ok(m) = self.view_message(addr, id.commit_log_offset).await
                    && m.store_host == id.store_host
                    && m.commit_log_offset == id.commit_log_offset
                {
                    return Ok(m);
                }
            }
        }
        Err(first_error)
    }

    /// Messages of `topic` whose KEYS (or, with `unique_key`, UNIQ_KEY) contain `key`, stored between
    /// the two times, from the broker at `addr` (`queryMsgByKey`, QUERY_MESSAGE through the IndexFile).
    /// A broker with nothing indexed answers QUERY_NOT_FOUND: an empty list.
    pub async fn query_message(&self, addr: &str, query: &QueryMessageRequestHeader) -> Result<Vec<MessageExt>> {
        let op = if query.unique_key_query == Some(true) { "queryMsgById" } else { "queryMsgByKey" };
        let request = RemotingCommand::request_with_header(RequestCode::QueryMessage, query);
        let response = self
            .remoting
            .invoke(addr, request, self.timeout)
            .await
            .map_err(|e| ClientError::remoting(op, e).with_context("addr", addr))?;
        if response.response_code() == ResponseCode::QueryNotFound {
            return Ok(Vec::new());
        }
        let response = success(op, response).map_err(|e| e.with_context("addr", addr))?;
        decode_messages(op, &response.body)
    }
}

/// INVOKE_BROKER_TO_RESET_OFFSET's answer (`ResetOffsetBody`): queue → new offset, fastjson-keyed.
#[derive(Debug, Default, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase", default)]
struct ResetOffsetBody {
    #[serde(with = "raftmq_common::protocol::body::fastjson::object_keys")]
    offset_table: BTreeMap<MessageQueue, i64>,
}

impl JsonBody for ResetOffsetBody {
    const NAME: &'static str = "ResetOffsetBody";
}

/// Records of a QUERY_MESSAGE / VIEW_MESSAGE_BY_ID answer, bodies decompressed as a consumer sees them.
fn decode_messages(op: &'static str, body: &Bytes) -> Result<Vec<MessageExt>> {
    let bad = |what: &str, e: &dyn std::fmt::Display| ClientError::new(ErrorKind::Protocol, op, format!("{what}: {e}"));
    let mut msgs = decode_all(body, DecodeOptions::default()).map_err(|e| bad("bad message records", &e))?;
    for msg in &mut msgs {
        if sys_flag::is_compressed(msg.sys_flag) {
            msg.message.body = uncompress_stored_body(msg.sys_flag, &msg.message.body)
                .map_err(|e| bad("message body does not decompress", &e))?;
            msg.sys_flag = sys_flag::clear_compressed(msg.sys_flag);
        }
    }
    Ok(msgs)
}

fn success(op: &'static str, response: RemotingCommand) -> Result<RemotingCommand> {
    match response.response_code() {
        ResponseCode::Success => Ok(response),
        code => Err(ClientError::broker(op, code, response.remark)),
    }
}

fn decode_body<T: JsonBody>(op: &'static str, response: &RemotingCommand) -> Result<T> {
    T::decode(&response.body)
        .map_err(|e| ClientError::new(ErrorKind::Protocol, op, format!("bad {} body", T::NAME)).with_source(e))
}

fn decode_header<H: CommandHeader>(op: &'static str, response: &RemotingCommand) -> Result<H> {
    response
        .decode_header()
        .map_err(|e| ClientError::new(ErrorKind::Protocol, op, "bad response header").with_source(e))
}
