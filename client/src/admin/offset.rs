//! Queue and consumer offsets: min/max/by-time offsets of a queue, a group's committed offsets (read,
//! set, reset by time, cloned to another group), the CommitLog's span.

use std::collections::BTreeMap;

use raftmq_common::message::MessageQueue;
use raftmq_common::message::validate::validate_group;
use raftmq_common::protocol::RemotingCommand;
use raftmq_common::protocol::RequestCode;
use raftmq_common::protocol::ResponseCode;
use raftmq_common::protocol::body::consumer_offset::ConsumerOffsetSerializeWrapper;
use raftmq_common::protocol::body::reset_offset::ResetOffsetBody;
use raftmq_common::protocol::header::admin::CloneGroupOffsetRequestHeader;
use raftmq_common::protocol::header::admin::ResetOffsetRequestHeader;
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

use super::client::Admin;
use super::response::decode_body;
use super::response::decode_header;
use super::response::success;
use crate::error::ClientError;
use crate::error::Result;

impl Admin {
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
            set_zero_if_not_found: None,
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

    /// Every committed offset of every group on the broker at `addr` (GET_ALL_CONSUMER_OFFSET).
    pub async fn all_consumer_offset(&self, addr: &str) -> Result<ConsumerOffsetSerializeWrapper> {
        let op = "getAllConsumerOffset";
        let response = self.broker_call(op, addr, RemotingCommand::request(RequestCode::GetAllConsumerOffset)).await?;
        decode_body(op, &response)
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
}
