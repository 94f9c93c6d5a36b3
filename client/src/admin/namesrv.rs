//! NameServer calls: routes, cluster info, topic lists, KV config, write permission. Reads ask one
//! NameServer; writes (KV config, topic deletion) go to every NameServer, as the Java client does,
//! because NameServers share no state. Write-permission switches name the NameServer to tell.

use std::collections::BTreeMap;
use std::collections::BTreeSet;

use raftmq_common::protocol::RemotingCommand;
use raftmq_common::protocol::RequestCode;
use raftmq_common::protocol::ResponseCode;
use raftmq_common::protocol::body::register::ClusterInfo;
use raftmq_common::protocol::body::register::KvTable;
use raftmq_common::protocol::body::register::TopicList;
use raftmq_common::protocol::body::route::TopicRouteData;
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

use super::client::Admin;
use super::response::decode_body;
use super::response::decode_header;
use super::response::success;
use crate::error::Result;

impl Admin {
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
}
