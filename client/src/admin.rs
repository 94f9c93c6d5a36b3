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
//! - Group administration (raftmq's private RAFT_ADD_NODE, RAFT_REMOVE_NODE, RAFT_TRANSFER_LEADERSHIP)
//!   goes to the group's leader: brokerId 0 first, then wherever a `leader=<ip:port>` hint points,
//!   at most [`LEADER_HINT_HOPS_MAX`] times; it is bounded by [`MEMBERSHIP_CHANGE_TIMEOUT_MS`] (or
//!   the admin's timeout if longer), since adding a node waits for it to catch up.
//!   [`Admin::group_status_all`] asks every member for its own view (RAFT_GROUP_STATUS).

use std::collections::BTreeMap;
use std::collections::BTreeSet;
use std::time::Duration;

use bytes::Bytes;
use std::sync::Arc;

use raftmq_common::limits::MEMBERSHIP_CHANGE_TIMEOUT_MS;
use raftmq_common::limits::RAFT_NODE_IDS_MAX_COUNT;
use raftmq_common::limits::RPC_TIMEOUT_DEFAULT_MS;
use raftmq_common::message::MessageExt;
use raftmq_common::message::MessageQueue;
use raftmq_common::message::compress::uncompress_stored_body;
use raftmq_common::message::msg_id::OffsetMsgId;
use raftmq_common::message::record::DecodeOptions;
use raftmq_common::message::record::decode_all;
use raftmq_common::message::sys_flag;
use raftmq_common::message::trace::TRACE_TOPIC_DEFAULT;
use raftmq_common::message::trace::TraceView;
use raftmq_common::message::trace::views_of;
use raftmq_common::message::validate::AUTO_CREATE_TOPIC_KEY_TOPIC;
use raftmq_common::message::validate::validate_group;
use raftmq_common::message::validate::validate_topic;
use raftmq_common::protocol::RemotingCommand;
use raftmq_common::protocol::RequestCode;
use raftmq_common::protocol::ResponseCode;
use raftmq_common::protocol::acl::SessionCredentials;
use raftmq_common::protocol::body::JsonBody;
use raftmq_common::protocol::body::acl_config::GetBrokerClusterAclConfigResponseBody;
use raftmq_common::protocol::body::broker_stats::BrokerStatsData;
use raftmq_common::protocol::body::connection::ConsumerConnection;
use raftmq_common::protocol::body::connection::ProducerConnection;
use raftmq_common::protocol::body::consume_directly::ConsumeMessageDirectlyResult;
use raftmq_common::protocol::body::consume_queue_data::QueryConsumeQueueResponseBody;
use raftmq_common::protocol::body::consume_stats::ConsumeStats;
use raftmq_common::protocol::body::consume_stats::ConsumeStatsList;
use raftmq_common::protocol::body::consume_time_span::QueryConsumeTimeSpanBody;
use raftmq_common::protocol::body::consume_time_span::QueueTimeSpan;
use raftmq_common::protocol::body::consumer_offset::ConsumerOffsetSerializeWrapper;
use raftmq_common::protocol::body::consumer_running_info::ConsumerRunningInfo;
use raftmq_common::protocol::body::consumer_status::GetConsumerStatusBody;
use raftmq_common::protocol::body::group_list::GroupList;
use raftmq_common::protocol::body::membership::AddNodeRequest;
use raftmq_common::protocol::body::membership::GroupStatus;
use raftmq_common::protocol::body::membership::MembershipReport;
use raftmq_common::protocol::body::membership::RemoveNodeRequest;
use raftmq_common::protocol::body::membership::TransferLeadershipRequest;
use raftmq_common::protocol::body::register::ClusterInfo;
use raftmq_common::protocol::body::register::KvTable;
use raftmq_common::protocol::body::register::TopicConfigSerializeWrapper;
use raftmq_common::protocol::body::register::TopicList;
use raftmq_common::protocol::body::reset_offset::ResetOffsetBody;
use raftmq_common::protocol::body::route::BrokerData;
use raftmq_common::protocol::body::route::MASTER_ID;
use raftmq_common::protocol::body::route::TopicRouteData;
use raftmq_common::protocol::body::subscription_group::SubscriptionGroupConfig;
use raftmq_common::protocol::body::topic::DataVersion;
use raftmq_common::protocol::body::topic::TopicConfig;
use raftmq_common::protocol::body::topic_stats::TopicStatsTable;
use raftmq_common::protocol::header::CommandHeader;
use raftmq_common::protocol::header::acl::CreateAccessConfigRequestHeader;
use raftmq_common::protocol::header::acl::DeleteAccessConfigRequestHeader;
use raftmq_common::protocol::header::acl::GetBrokerAclConfigResponseHeader;
use raftmq_common::protocol::header::acl::UpdateGlobalWhiteAddrsConfigRequestHeader;
use raftmq_common::protocol::header::acl::join_list;
use raftmq_common::protocol::header::admin::CloneGroupOffsetRequestHeader;
use raftmq_common::protocol::header::admin::CreateTopicRequestHeader;
use raftmq_common::protocol::header::admin::DeleteSubscriptionGroupRequestHeader;
use raftmq_common::protocol::header::admin::DeleteTopicRequestHeader;
use raftmq_common::protocol::header::admin::GetConsumeStatsInBrokerHeader;
use raftmq_common::protocol::header::admin::GetConsumeStatsRequestHeader;
use raftmq_common::protocol::header::admin::GetConsumerConnectionListRequestHeader;
use raftmq_common::protocol::header::admin::GetConsumerRunningInfoRequestHeader;
use raftmq_common::protocol::header::admin::GetProducerConnectionListRequestHeader;
use raftmq_common::protocol::header::admin::GetTopicStatsInfoRequestHeader;
use raftmq_common::protocol::header::admin::QueryConsumeTimeSpanRequestHeader;
use raftmq_common::protocol::header::admin::QueryTopicConsumeByWhoRequestHeader;
use raftmq_common::protocol::header::admin::ResetOffsetRequestHeader;
use raftmq_common::protocol::header::admin::ViewBrokerStatsDataRequestHeader;
use raftmq_common::protocol::header::client::ConsumeMessageDirectlyResultRequestHeader;
use raftmq_common::protocol::header::client::GetConsumerStatusRequestHeader;
use raftmq_common::protocol::header::namesrv::AddWritePermOfBrokerRequestHeader;
use raftmq_common::protocol::header::namesrv::AddWritePermOfBrokerResponseHeader;
use raftmq_common::protocol::header::namesrv::DeleteKvConfigRequestHeader;
use raftmq_common::protocol::header::namesrv::DeleteTopicFromNamesrvRequestHeader;
use raftmq_common::protocol::header::namesrv::GetKvConfigRequestHeader;
use raftmq_common::protocol::header::namesrv::GetKvConfigResponseHeader;
use raftmq_common::protocol::header::namesrv::GetKvListByNamespaceRequestHeader;
use raftmq_common::protocol::header::namesrv::GetRouteInfoRequestHeader;
use raftmq_common::protocol::header::namesrv::GetTopicsByClusterRequestHeader;
use raftmq_common::protocol::header::namesrv::PutKvConfigRequestHeader;
use raftmq_common::protocol::header::namesrv::WipeWritePermOfBrokerRequestHeader;
use raftmq_common::protocol::header::namesrv::WipeWritePermOfBrokerResponseHeader;
use raftmq_common::protocol::header::offset::GetMaxOffsetRequestHeader;
use raftmq_common::protocol::header::offset::GetMaxOffsetResponseHeader;
use raftmq_common::protocol::header::offset::GetMinOffsetRequestHeader;
use raftmq_common::protocol::header::offset::GetMinOffsetResponseHeader;
use raftmq_common::protocol::header::offset::QueryBrokerOffsetResponseHeader;
use raftmq_common::protocol::header::offset::QueryConsumerOffsetRequestHeader;
use raftmq_common::protocol::header::offset::QueryConsumerOffsetResponseHeader;
use raftmq_common::protocol::header::offset::SearchOffsetRequestHeader;
use raftmq_common::protocol::header::offset::SearchOffsetResponseHeader;
use raftmq_common::protocol::header::offset::UpdateConsumerOffsetRequestHeader;
use raftmq_common::protocol::header::pull::PullMessageRequestHeader;
use raftmq_common::protocol::header::pull::pull_sys_flag;
use raftmq_common::protocol::header::query::QueryConsumeQueueRequestHeader;
use raftmq_common::protocol::header::query::QueryMessageRequestHeader;
use raftmq_common::protocol::header::query::ViewMessageRequestHeader;
use raftmq_common::protocol::header::transaction::ResumeCheckHalfMessageRequestHeader;
use raftmq_common::protocol::leader_hint::parse_leader_hint;
use raftmq_common::remoting::ProcessorTable;
use raftmq_common::remoting::RemotingClient;

use crate::consumer::PullResult;
use crate::consumer::pull_api::process_pull_response;
use crate::consumer::subscription::build_subscription_data;
use crate::error::ClientError;
use crate::error::ErrorKind;
use crate::error::Result;
use crate::namesrv::NamesrvClient;
use crate::namesrv::parse_namesrv_addrs;

/// Leader hints a group-administration call follows before giving up.
pub const LEADER_HINT_HOPS_MAX: usize = 3;

/// A plain ACL account to create or update (the one type client and broker share).
pub use raftmq_common::protocol::acl_account::PlainAccessConfig;

/// One broker's plain ACL version (Java's `ClusterAclVersionInfo`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AclVersionInfo {
    /// The cluster.
    pub cluster_name: String,
    /// The broker group.
    pub broker_name: String,
    /// The broker.
    pub broker_addr: String,
    /// The ACL file's `dataVersion`.
    pub version: DataVersion,
    /// Each ACL file's `dataVersion`, by path.
    pub files: BTreeMap<String, DataVersion>,
}

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
        Self::with_credentials(namesrv_addr, None)
    }

    /// [`Self::new`] signing every request with `credentials` (plain ACL; admin requests need an
    /// account with `admin: true` on a broker with `aclEnable`).
    pub fn with_credentials(namesrv_addr: &str, credentials: Option<SessionCredentials>) -> Result<Self> {
        let remoting = RemotingClient::with_credentials(ProcessorTable::new(), false, credentials.map(Arc::new));
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

    /// The NameServers this admin asks, as configured.
    pub fn namesrv_addrs(&self) -> &[String] {
        self.namesrv.addrs()
    }

    /// Clears the write bit of every queue of group `broker_name` in the NameServer at
    /// `namesrv_addr` (`wipeWritePerm`, WIPE_WRITE_PERM_OF_BROKER): producers stop choosing the
    /// group, consumers still read it. NameServers share nothing, so ask each one. Returns the
    /// number of topics changed.
    pub async fn wipe_write_perm(&self, namesrv_addr: &str, broker_name: &str) -> Result<i32> {
        let op = "wipeWritePerm";
        let header = WipeWritePermOfBrokerRequestHeader { broker_name: broker_name.to_owned() };
        let request = RemotingCommand::request_with_header(RequestCode::WipeWritePermOfBroker, &header);
        let response = self.broker_call(op, namesrv_addr, request).await?;
        let header: WipeWritePermOfBrokerResponseHeader = decode_header(op, &response)?;
        Ok(header.wipe_topic_count)
    }

    /// Gives every queue of group `broker_name` read and write permission again in the NameServer
    /// at `namesrv_addr` (`addWritePerm`, ADD_WRITE_PERM_OF_BROKER). Returns the number of topics
    /// changed.
    pub async fn add_write_perm(&self, namesrv_addr: &str, broker_name: &str) -> Result<i32> {
        let op = "addWritePerm";
        let header = AddWritePermOfBrokerRequestHeader { broker_name: broker_name.to_owned() };
        let request = RemotingCommand::request_with_header(RequestCode::AddWritePermOfBroker, &header);
        let response = self.broker_call(op, namesrv_addr, request).await?;
        let header: AddWritePermOfBrokerResponseHeader = decode_header(op, &response)?;
        Ok(header.add_topic_count)
    }

    /// The config of the NameServer at `namesrv_addr` (`getNamesrvConfig`, GET_NAMESRV_CONFIG),
    /// key by key as its properties text lists it. NameServers share nothing, so ask each one.
    pub async fn namesrv_config(&self, namesrv_addr: &str) -> Result<BTreeMap<String, String>> {
        self.config_of("getNamesrvConfig", namesrv_addr, RequestCode::GetNamesrvConfig).await
    }

    /// Changes keys of the running NameServer at `namesrv_addr` (`updateNamesrvConfig`,
    /// UPDATE_NAMESRV_CONFIG): all or none; a key that needs a restart is refused. Not written to
    /// its config file.
    pub async fn update_namesrv_config(&self, namesrv_addr: &str, updates: &BTreeMap<String, String>) -> Result<()> {
        self.update_config_of("updateNamesrvConfig", namesrv_addr, RequestCode::UpdateNamesrvConfig, updates).await
    }

    /// A server's config as the properties text a `code` request answers, key by key.
    async fn config_of(&self, op: &'static str, addr: &str, code: RequestCode) -> Result<BTreeMap<String, String>> {
        let response = self.broker_call(op, addr, RemotingCommand::request(code)).await?;
        let text = std::str::from_utf8(&response.body)
            .map_err(|e| ClientError::new(ErrorKind::Protocol, op, "the config is not UTF-8").with_source(e))?;
        Ok(raftmq_common::protocol::body::properties_text::decode(text))
    }

    /// A `code` request carrying `updates` as properties text.
    async fn update_config_of(
        &self,
        op: &'static str,
        addr: &str,
        code: RequestCode,
        updates: &BTreeMap<String, String>,
    ) -> Result<()> {
        let body = raftmq_common::protocol::body::properties_text::encode(updates);
        self.broker_call(op, addr, RemotingCommand::request(code).with_body(body)).await.map(drop)
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

    /// The CommitLog span of the broker at `addr` in bytes, `(min, max)` (QUERY_BROKER_OFFSET):
    /// from the retention boundary to the committed end, as that replica has applied them.
    pub async fn broker_offset(&self, addr: &str) -> Result<(i64, i64)> {
        let op = "queryBrokerOffset";
        let request = RemotingCommand::request(RequestCode::QueryBrokerOffset);
        let response = self.broker_call(op, addr, request).await?;
        decode_header::<QueryBrokerOffsetResponseHeader>(op, &response).map(|h| (h.min_offset, h.offset))
    }

    /// Every queue's offsets of `topic` on the broker at `addr` (`topicStatus`, GET_TOPIC_STATS_INFO).
    pub async fn topic_stats(&self, addr: &str, topic: &str) -> Result<TopicStatsTable> {
        let op = "topicStatus";
        let header = GetTopicStatsInfoRequestHeader { topic: topic.to_owned() };
        let request = RemotingCommand::request_with_header(RequestCode::GetTopicStatsInfo, &header);
        let response = self.broker_call(op, addr, request).await.map_err(|e| e.with_context("topic", topic))?;
        decode_body(op, &response)
    }

    /// One statistic of the broker at `addr` over the last minute, hour and day (`statsAll`,
    /// VIEW_BROKER_STATS_DATA): `stats_name` as Java's `BrokerStatsManager` names it
    /// (`TOPIC_PUT_NUMS`, `GROUP_GET_NUMS`, ...), `stats_key` the topic, `topic@group` or cluster.
    pub async fn view_broker_stats_data(
        &self,
        addr: &str,
        stats_name: &str,
        stats_key: &str,
    ) -> Result<BrokerStatsData> {
        let op = "viewBrokerStatsData";
        let header =
            ViewBrokerStatsDataRequestHeader { stats_name: stats_name.to_owned(), stats_key: stats_key.to_owned() };
        let request = RemotingCommand::request_with_header(RequestCode::ViewBrokerStatsData, &header);
        let response = self.broker_call(op, addr, request).await.map_err(|e| e.with_context("stats", stats_name))?;
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

    /// Up to `count` ConsumeQueue units of `topic`'s queue `queue_id` from `index` on the broker at
    /// `addr`, the queue's bounds, and with `group` its subscription and whether each unit passes it
    /// (QUERY_CONSUME_QUEUE, `queryCq`). Returns the body and the broker's remark (set when `index`
    /// is outside the queue).
    pub async fn query_consume_queue(
        &self,
        addr: &str,
        topic: &str,
        queue_id: i32,
        index: i64,
        count: i32,
        group: Option<&str>,
    ) -> Result<(QueryConsumeQueueResponseBody, Option<String>)> {
        let op = "queryCq";
        let header = QueryConsumeQueueRequestHeader {
            topic: Some(topic.to_owned()),
            queue_id: Some(queue_id),
            index: Some(index),
            count: Some(count),
            consumer_group: group.map(str::to_owned),
        };
        let request = RemotingCommand::request_with_header(RequestCode::QueryConsumeQueue, &header);
        let response = self.broker_call(op, addr, request).await.map_err(|e| e.with_context("topic", topic))?;
        let body = decode_body::<QueryConsumeQueueResponseBody>(op, &response)?;
        Ok((body, response.remark.clone()))
    }

    /// Has the broker at `addr` delete expired CommitLog segments in its next retention rounds
    /// whatever its `deleteWhen` hours (DELETE_EXPIRED_COMMITLOG, `deleteExpiredCommitLog`); the
    /// group's leader decides the purge, every replica follows it.
    pub async fn delete_expired_commit_log(&self, addr: &str) -> Result<()> {
        let request = RemotingCommand::request(RequestCode::DeleteExpiredCommitlog);
        self.broker_call("deleteExpiredCommitLog", addr, request).await.map(drop)
    }

    /// Has the broker at `addr` delete its ConsumeQueue files and IndexFiles below the CommitLog's
    /// minimum now (CLEAN_EXPIRED_CONSUMEQUEUE, `cleanExpiredCQ`).
    pub async fn clean_expired_consume_queue(&self, addr: &str) -> Result<()> {
        let request = RemotingCommand::request(RequestCode::CleanExpiredConsumequeue);
        self.broker_call("cleanExpiredCQ", addr, request).await.map(drop)
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

    /// Has consumer `client_id` of `consumer_group` hand the message `offset_msg_id` to its
    /// listener once (`queryMsgById -g -d`, CONSUME_MESSAGE_DIRECTLY), through the broker at
    /// `addr`, which must hold both the message and the client's connection; no offset moves.
    pub async fn consume_message_directly(
        &self,
        addr: &str,
        consumer_group: &str,
        client_id: &str,
        offset_msg_id: &str,
    ) -> Result<ConsumeMessageDirectlyResult> {
        let op = "consumeMessageDirectly";
        let header = ConsumeMessageDirectlyResultRequestHeader {
            consumer_group: consumer_group.to_owned(),
            client_id: Some(client_id.to_owned()),
            msg_id: Some(offset_msg_id.to_owned()),
            broker_name: None,
        };
        let request = RemotingCommand::request_with_header(RequestCode::ConsumeMessageDirectly, &header);
        let response = self.broker_call(op, addr, request).await?;
        decode_body(op, &response)
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

    /// The broker's runtime counters (`brokerStatus`, GET_BROKER_RUNTIME_INFO): key → value.
    pub async fn broker_runtime_info(&self, addr: &str) -> Result<KvTable> {
        let op = "brokerStatus";
        let response = self.broker_call(op, addr, RemotingCommand::request(RequestCode::GetBrokerRuntimeInfo)).await?;
        decode_body(op, &response)
    }

    /// The config of the broker at `addr` (`getBrokerConfig`, GET_BROKER_CONFIG): every key with its
    /// value as text, as the broker's properties text lists them (secrets masked by the broker).
    pub async fn broker_config(&self, addr: &str) -> Result<BTreeMap<String, String>> {
        self.config_of("getBrokerConfig", addr, RequestCode::GetBrokerConfig).await
    }

    /// Changes keys of the config of the broker at `addr` while it runs (`updateBrokerConfig`,
    /// UPDATE_BROKER_CONFIG), as Java properties text. The broker takes all of them or none, and
    /// refuses a key that cannot change while it runs.
    pub async fn update_broker_config(&self, addr: &str, updates: &BTreeMap<String, String>) -> Result<()> {
        self.update_config_of("updateBrokerConfig", addr, RequestCode::UpdateBrokerConfig, updates).await
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

    /// Copies group `src`'s committed offsets of `topic` (of every topic it has offsets for when
    /// `None`) to group `dest` on the broker at `addr` (`cloneGroupOffset`, CLONE_GROUP_OFFSET).
    /// Unless `offline`, a topic `src`'s online clients do not subscribe to is skipped.
    pub async fn clone_group_offset(
        &self,
        addr: &str,
        src: &str,
        dest: &str,
        topic: Option<&str>,
        offline: bool,
    ) -> Result<()> {
        let op = "cloneGroupOffset";
        for group in [src, dest] {
            validate_group(group)
                .map_err(|e| ClientError::invalid_argument(op, e.to_string()).with_context("group", group))?;
        }
        let header = CloneGroupOffsetRequestHeader {
            src_group: src.to_owned(),
            dest_group: dest.to_owned(),
            topic: topic.map(str::to_owned),
            offline: Some(offline),
        };
        let request = RemotingCommand::request_with_header(RequestCode::CloneGroupOffset, &header);
        self.broker_call(op, addr, request).await.map(drop)
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

    /// Puts the half message an offsetMsgId names back for checking, its check count at 0
    /// (`resumeCheckHalfMessage`, RESUME_CHECK_HALF_MESSAGE): typically one given up to
    /// TRANS_CHECK_MAX_TIME_TOPIC after `transactionCheckMax` checks. Sent to the current leader of
    /// the group whose replica stored it (replicas hold the record at the same offset), or to the
    /// store host itself when no route names its group. Returns the address that took it.
    pub async fn resume_check_half_message(&self, id: &OffsetMsgId) -> Result<String> {
        let op = "resumeCheckHalfMessage";
        let host = id.store_host.to_string();
        let group = self.cluster_info().await.ok().and_then(|cluster| {
            cluster
                .broker_addr_table
                .values()
                .find(|g| g.broker_addrs.values().any(|a| *a == host))
                .map(|g| g.broker_name.clone())
        });
        let addr = match group {
            Some(name) => self.master_addr_of_group(&name).await.unwrap_or(host),
            None => host,
        };
        let header = ResumeCheckHalfMessageRequestHeader { msg_id: Some(id.to_string()) };
        let request = RemotingCommand::request_with_header(RequestCode::ResumeCheckHalfMessage, &header);
        self.broker_call(op, &addr, request).await?;
        Ok(addr)
    }

    // ---- Plain ACL (RocketMQ 4.9.8's ACL administration) ----

    /// Creates or updates an account of the plain ACL of the group the broker at `addr` belongs to
    /// (`updateAclConfig`, UPDATE_AND_CREATE_ACL_CONFIG). The leader replicates the edit to every
    /// replica's ACL file; a follower relays it there. Needs an `admin` account when the broker
    /// checks signatures. An existing account keeps the fields left `None`; `admin` is always set.
    pub async fn update_acl_config(&self, addr: &str, config: &PlainAccessConfig) -> Result<()> {
        let op = "updateAclConfig";
        let join = |list: &Option<Vec<String>>| list.as_deref().map(join_list);
        let header = CreateAccessConfigRequestHeader {
            access_key: config.access_key.clone(),
            secret_key: Some(config.secret_key.clone()),
            white_remote_address: config.white_remote_address.clone(),
            admin: Some(config.admin),
            default_topic_perm: config.default_topic_perm.clone(),
            default_group_perm: config.default_group_perm.clone(),
            topic_perms: join(&config.topic_perms),
            group_perms: join(&config.group_perms),
        };
        let request = RemotingCommand::request_with_header(RequestCode::UpdateAndCreateAclConfig, &header);
        self.broker_call(op, addr, request).await.map(drop).map_err(|e| e.with_context("accessKey", &config.access_key))
    }

    /// Removes account `access_key` from the plain ACL of the group the broker at `addr` belongs to
    /// (`deleteAclConfig`, DELETE_ACL_CONFIG). Removing an absent account succeeds.
    pub async fn delete_acl_config(&self, addr: &str, access_key: &str) -> Result<()> {
        let op = "deleteAclConfig";
        let header = DeleteAccessConfigRequestHeader { access_key: access_key.to_owned() };
        let request = RemotingCommand::request_with_header(RequestCode::DeleteAclConfig, &header);
        self.broker_call(op, addr, request).await.map(drop).map_err(|e| e.with_context("accessKey", access_key))
    }

    /// Replaces the plain ACL's `globalWhiteRemoteAddresses` of the group the broker at `addr`
    /// belongs to (`updateGlobalWhiteAddr`, UPDATE_GLOBAL_WHITE_ADDRS_CONFIG).
    pub async fn update_global_white_addrs(&self, addr: &str, addresses: &[String]) -> Result<()> {
        let op = "updateGlobalWhiteAddr";
        let header = UpdateGlobalWhiteAddrsConfigRequestHeader {
            global_white_addrs: join_list(addresses),
            acl_file_full_path: None,
        };
        let request = RemotingCommand::request_with_header(RequestCode::UpdateGlobalWhiteAddrsConfig, &header);
        self.broker_call(op, addr, request).await.map(drop)
    }

    /// Up to `max` messages of queue `mq` from `offset`, as `group` (Java's tools
    /// pull as `TOOLS_CONSUMER`), filtered by the tag expression `sub_expression` (PULL_MESSAGE
    /// without suspending or committing, `DefaultMQPullConsumer.pull`). NO_NEW_MSG,
    /// NO_MATCHED_MSG and OFFSET_ILLEGAL are results, not errors.
    pub async fn pull(
        &self,
        addr: &str,
        group: &str,
        mq: &MessageQueue,
        offset: i64,
        max: i32,
        sub_expression: &str,
    ) -> Result<PullResult> {
        let op = "pullMessage";
        let sub = build_subscription_data(&mq.topic, sub_expression, 0);
        let header = PullMessageRequestHeader {
            consumer_group: group.to_owned(),
            topic: mq.topic.clone(),
            queue_id: mq.queue_id,
            queue_offset: offset,
            max_msg_nums: max,
            sys_flag: pull_sys_flag::build(false, false, true, false, false),
            commit_offset: 0,
            suspend_timeout_millis: 0,
            subscription: Some(sub.sub_string.clone()),
            sub_version: sub.sub_version,
            expression_type: Some(sub.expression_type.clone()),
            bname: None,
        };
        let request = RemotingCommand::request_with_header(RequestCode::PullMessage, &header);
        let response = self
            .remoting
            .invoke(addr, request, self.timeout)
            .await
            .map_err(|e| ClientError::remoting(op, e).with_context("addr", addr))?;
        process_pull_response(&response, &sub).map_err(|e| e.with_context("addr", addr))
    }

    /// The plain ACL in force on the broker at `addr`: its global white addresses and every
    /// account, secret keys included (`getAccessConfigSubCommand`, GET_BROKER_CLUSTER_ACL_CONFIG);
    /// a raftmq broker answers an admin account only.
    pub async fn acl_config(&self, addr: &str) -> Result<GetBrokerClusterAclConfigResponseBody> {
        let op = "getAccessConfigSubCommand";
        let response =
            self.broker_call(op, addr, RemotingCommand::request(RequestCode::GetBrokerClusterAclConfig)).await?;
        decode_body(op, &response)
    }

    /// The version of the plain ACL file in force on the broker at `addr` (`clusterAclConfigVersion`,
    /// GET_BROKER_CLUSTER_ACL_INFO): every replica of a group shows the same one once it has applied
    /// the group's last edit.
    pub async fn acl_version(&self, addr: &str) -> Result<AclVersionInfo> {
        let op = "clusterAclConfigVersion";
        let response =
            self.broker_call(op, addr, RemotingCommand::request(RequestCode::GetBrokerClusterAclInfo)).await?;
        let h: GetBrokerAclConfigResponseHeader = decode_header(op, &response)?;
        let version: DataVersion = serde_json::from_str(&h.version)
            .map_err(|e| ClientError::new(ErrorKind::Protocol, op, "bad version JSON").with_source(e))?;
        let files: BTreeMap<String, DataVersion> = match h.all_acl_file_version.as_deref() {
            None | Some("") => BTreeMap::new(),
            Some(json) => serde_json::from_str(json)
                .map_err(|e| ClientError::new(ErrorKind::Protocol, op, "bad allAclFileVersion JSON").with_source(e))?,
        };
        Ok(AclVersionInfo {
            cluster_name: h.cluster_name,
            broker_name: h.broker_name,
            broker_addr: h.broker_addr,
            version,
            files,
        })
    }

    // ---- Raft group administration (raftmq private codes) ----

    /// One member's view of its group (RAFT_GROUP_STATUS). A broker without group administration
    /// answers REQUEST_CODE_NOT_SUPPORTED.
    pub async fn group_status(&self, addr: &str) -> Result<GroupStatus> {
        let op = "groupStatus";
        let response = self.broker_call(op, addr, RemotingCommand::request(RequestCode::RaftGroupStatus)).await?;
        decode_body(op, &response)
    }

    /// Every member's view of group `broker` (a group name, or one member's `ip:port`): the members
    /// the NameServer lists, then every voter and learner the answers name. Keyed by address; a
    /// member that did not answer has its error.
    pub async fn group_status_all(&self, broker: &str) -> Result<BTreeMap<String, Result<GroupStatus>>> {
        let mut pending: BTreeSet<String> = self.group_addrs(broker).await?;
        let mut views = BTreeMap::new();
        while let Some(addr) = pending.pop_first() {
            let view = self.group_status(&addr).await;
            if let Ok(status) = &view {
                for m in status.voters.iter().chain(&status.learners) {
                    if !m.remoting_addr.is_empty() && !views.contains_key(&m.remoting_addr) && m.remoting_addr != addr {
                        pending.insert(m.remoting_addr.clone());
                    }
                }
            }
            views.insert(addr, view);
            if views.len() >= RAFT_NODE_IDS_MAX_COUNT {
                break;
            }
        }
        Ok(views)
    }

    /// Adds node `id` to group `broker` (RAFT_ADD_NODE): a learner first, a voter once caught up.
    pub async fn add_node(
        &self,
        broker: &str,
        id: u64,
        remoting_addr: &str,
        raft_addr: &str,
    ) -> Result<MembershipReport> {
        let body = AddNodeRequest { id, raft_addr: raft_addr.to_owned(), remoting_addr: remoting_addr.to_owned() };
        self.membership_call("addNode", broker, RequestCode::RaftAddNode, &body).await
    }

    /// Removes node `id` (voter or learner, the leader included) from group `broker` (RAFT_REMOVE_NODE).
    pub async fn remove_node(&self, broker: &str, id: u64) -> Result<MembershipReport> {
        self.membership_call("removeNode", broker, RequestCode::RaftRemoveNode, &RemoveNodeRequest { id, term: 0 })
            .await
    }

    /// Hands group `broker`'s leadership to node `to`, or to any caught-up voter
    /// (RAFT_TRANSFER_LEADERSHIP); returns once the new leader takes writes.
    pub async fn transfer_leader(&self, broker: &str, to: Option<u64>) -> Result<MembershipReport> {
        let body = TransferLeadershipRequest { to };
        self.membership_call("transferLeader", broker, RequestCode::RaftTransferLeadership, &body).await
    }

    /// Addresses of group `broker`'s members the NameServer lists (`broker` may be one address).
    async fn group_addrs(&self, broker: &str) -> Result<BTreeSet<String>> {
        if broker.contains(':') {
            return Ok(BTreeSet::from([broker.to_owned()]));
        }
        let info = self.cluster_info().await?;
        let addrs: BTreeSet<String> = info
            .broker_addr_table
            .get(broker)
            .map(|bd| bd.broker_addrs.values().cloned().collect())
            .unwrap_or_default();
        if addrs.is_empty() {
            return Err(ClientError::new(ErrorKind::NoRoute, "groupStatus", "no member of the group is registered")
                .with_context("broker", broker));
        }
        Ok(addrs)
    }

    /// Sends a group-administration request to the leader of `broker`, following leader hints.
    async fn membership_call<B: JsonBody>(
        &self,
        op: &'static str,
        broker: &str,
        code: RequestCode,
        body: &B,
    ) -> Result<MembershipReport> {
        let body = body.encode().map_err(|e| ClientError::invalid_argument(op, e.to_string()))?;
        let mut addr = match broker.contains(':') {
            true => broker.to_owned(),
            false => match self.master_addr_of_group(broker).await {
                Ok(addr) => addr,
                // No leader registered (e.g. it was just removed): any member can point at it.
                Err(_) => self.group_addrs(broker).await?.pop_first().unwrap_or_default(),
            },
        };
        let timeout = self.timeout.max(Duration::from_millis(MEMBERSHIP_CHANGE_TIMEOUT_MS));
        for _ in 0..=LEADER_HINT_HOPS_MAX {
            let request = RemotingCommand::request(code).with_body(Bytes::from(body.clone()));
            let response = self
                .remoting
                .invoke(&addr, request, timeout)
                .await
                .map_err(|e| ClientError::remoting(op, e).with_context("addr", &addr))?;
            if response.response_code() == ResponseCode::ServiceNotAvailable
                && let Some(leader) = response.remark.as_deref().and_then(parse_leader_hint)
                && leader != addr
            {
                addr = leader.to_owned();
                continue;
            }
            let response = success(op, response).map_err(|e| e.with_context("addr", &addr))?;
            return decode_body(op, &response);
        }
        Err(ClientError::new(ErrorKind::NoRoute, op, "leader hints did not lead to the leader")
            .with_context("addr", addr))
    }

    /// What the trace records say happened to the message `msg_id` (`queryMsgTraceById`): its
    /// Pub, SubBefore, SubAfter and EndTransaction records in `trace_topic` (default
    /// `RMQ_SYS_TRACE_TOPIC`), from every group of the trace topic's route, oldest first.
    pub async fn query_msg_trace_by_id(&self, msg_id: &str, trace_topic: Option<&str>) -> Result<Vec<TraceView>> {
        let topic = trace_topic.unwrap_or(TRACE_TOPIC_DEFAULT);
        let route = self.topic_route(topic).await.map_err(|e| e.with_context("traceTopic", topic))?;
        let query = QueryMessageRequestHeader {
            topic: topic.to_owned(),
            key: msg_id.to_owned(),
            max_num: raftmq_common::limits::ADMIN_QUERY_MESSAGE_DEFAULT_COUNT,
            begin_timestamp: 0,
            end_timestamp: i64::MAX,
            unique_key_query: None,
        };
        let mut views = Vec::new();
        let (mut answered, mut last_error) = (false, None);
        for bd in &route.broker_datas {
            let Some(addr) = bd.select_broker_addr() else { continue };
            // As Java's `queryMessage`: a group that cannot answer is skipped, the others still count.
            let msgs = match self.query_message(addr, &query).await {
                Ok(msgs) => msgs,
                Err(e) => {
                    tracing::warn!(addr, trace_topic = topic, error = %e, "queryMsgTraceById: a group did not answer");
                    last_error = Some(e);
                    continue;
                }
            };
            answered = true;
            // The IndexFile matches key hashes; only messages that carry the id are trace records of it.
            for m in msgs.iter().filter(|m| m.message.key_list().any(|k| k == msg_id)) {
                let body = String::from_utf8_lossy(&m.message.body);
                views.extend(views_of(msg_id, &body, &m.born_host.ip().to_string()));
            }
        }
        if let (false, Some(mut e)) = (answered, last_error) {
            e.operation = "queryMsgTraceById";
            return Err(e.with_context("traceTopic", topic));
        }
        views.sort_by_key(|v| v.timestamp_ms);
        Ok(views)
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
