//! CommitLog and ConsumeQueue maintenance and inspection on one broker: purge expired CommitLog
//! segments, clean ConsumeQueue files below the CommitLog's minimum, list ConsumeQueue units.

use raftmq_common::protocol::RemotingCommand;
use raftmq_common::protocol::RequestCode;
use raftmq_common::protocol::body::consume_queue_data::QueryConsumeQueueResponseBody;
use raftmq_common::protocol::header::query::QueryConsumeQueueRequestHeader;

use super::client::Admin;
use super::response::decode_body;
use crate::error::Result;

impl Admin {
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
}
