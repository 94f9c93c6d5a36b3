//! Broker statistics: runtime counters (GET_BROKER_RUNTIME_INFO) and one named statistic over the
//! last minute, hour and day (VIEW_BROKER_STATS_DATA).

use raftmq_common::protocol::RemotingCommand;
use raftmq_common::protocol::RequestCode;
use raftmq_common::protocol::body::broker_stats::BrokerStatsData;
use raftmq_common::protocol::body::register::KvTable;
use raftmq_common::protocol::header::admin::ViewBrokerStatsDataRequestHeader;

use super::client::Admin;
use super::response::decode_body;
use crate::error::Result;

impl Admin {
    /// The broker's runtime counters (`brokerStatus`, GET_BROKER_RUNTIME_INFO): key → value.
    pub async fn broker_runtime_info(&self, addr: &str) -> Result<KvTable> {
        let op = "brokerStatus";
        let response = self.broker_call(op, addr, RemotingCommand::request(RequestCode::GetBrokerRuntimeInfo)).await?;
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
}
