//! Offset resets: a group's consumption of a topic moved to the messages stored since a time
//! (`mqadmin resetOffsetByTime`, the dashboard's "reset offset"; RocketMQ's
//! `Broker2Client.resetOffset`).
//!
//! ```text
//! INVOKE_BROKER_TO_RESET_OFFSET (222) ─┐                 ┌─▶ CONSUMER_OFFSETS entry through Raft
//! POST /api/v1/ops/reset-offset ───────┴─▶ plan (pure) ──┤
//!                                                        └─▶ RESET_CONSUMER_CLIENT_OFFSET (220,
//!                                                            oneway) to every consumer of the group
//! ```
//!
//! As in Java, each queue goes to the first offset stored at or after the time (the max offset for
//! a time of -1), but only backwards unless forced: a queue whose committed offset is already
//! below that point keeps it. Java's broker leaves the committing to its consumers: each running
//! one drops its cached messages, takes the new offsets and stores them. This broker also commits
//! the table through Raft before it tells them, so the reset holds for a consumer that is
//! restarting, and after a failover. A running consumer that never hears of the reset (a lost
//! oneway) would commit its old offsets over it; the admin sees the consumers it was sent to.
//!
//! Java answers CONSUMER_NOT_ONLINE when no consumer of the group is connected, and `mqadmin`
//! then falls back to rewriting each queue with UPDATE_CONSUMER_OFFSET; the remoting request does
//! the same here. The HTTP operation commits either way (it is meant for a stopped group too).

use raftmq_common::limits::ADMIN_PROGRESS_QUEUES_MAX_COUNT;
use raftmq_common::message::MessageQueue;
use raftmq_common::protocol::RemotingCommand;
use raftmq_common::protocol::RequestCode;
use raftmq_common::protocol::ResponseCode;
use raftmq_common::protocol::body::JsonBody;
use raftmq_common::protocol::body::reset_offset::ResetOffsetBody;
use raftmq_common::protocol::header::admin::ResetOffsetRequestHeader;
use raftmq_common::remoting::Connection;
use tracing::debug;
use tracing::info;

use crate::context::BrokerContext;
use crate::processors::client_manage::send_oneway_to_all;
use crate::processors::query::offset_by_time;
use crate::services::replica::Replica;
use crate::services::replica::WriteError;
use crate::state::entry::BrokerCommand;
use crate::state::entry::OffsetCommit;
use crate::state::store::MessageStore;

/// A time of -1: reset to the end of every queue (skip everything stored).
pub const RESET_TO_MAX_TIMESTAMP: i64 = -1;

/// One queue of a planned reset.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QueueReset {
    /// Queue.
    pub queue_id: i32,
    /// The group's committed offset before, if it had one.
    pub previous: Option<i64>,
    /// The first offset stored at or after the time (or the max offset).
    pub timestamp_offset: i64,
    /// The offset the group consumes next after the reset.
    pub offset: i64,
}

/// Java's rule: the time's offset when forced, when the group has no offset, or when it moves
/// the group backwards; otherwise the group keeps its offset.
pub fn reset_to(timestamp_offset: i64, previous: Option<i64>, force: bool) -> i64 {
    match previous {
        Some(p) if !force && timestamp_offset >= p => p,
        _ => timestamp_offset,
    }
}

/// The reset of every read queue of `topic` (at most [`ADMIN_PROGRESS_QUEUES_MAX_COUNT`]) from
/// this replica's applied state; `None` when the topic does not exist here.
pub fn plan(store: &MessageStore, topic: &str, group: &str, timestamp_ms: i64, force: bool) -> Option<Vec<QueueReset>> {
    let read_queues = store.metadata().topics.get(topic)?.read_queue_nums;
    let queues = usize::try_from(read_queues).unwrap_or(0).min(ADMIN_PROGRESS_QUEUES_MAX_COUNT);
    let rows = (0..queues)
        .filter_map(|q| i32::try_from(q).ok())
        .map(|queue_id| {
            let at = if timestamp_ms == RESET_TO_MAX_TIMESTAMP {
                store.queue_offsets(topic, queue_id).1
            } else {
                offset_by_time(store, topic, queue_id, timestamp_ms)
            };
            let timestamp_offset = i64::try_from(at).unwrap_or(i64::MAX);
            let previous = store.metadata().offsets.query(topic, group, queue_id);
            QueueReset { queue_id, previous, timestamp_offset, offset: reset_to(timestamp_offset, previous, force) }
        })
        .collect();
    Some(rows)
}

/// Commits the planned offsets as one replicated CONSUMER_OFFSETS entry (applying it stores
/// whatever it says, backwards too).
pub async fn commit(replica: &Replica, topic: &str, group: &str, rows: &[QueueReset]) -> Result<(), WriteError> {
    if rows.is_empty() {
        return Ok(());
    }
    let commits = rows
        .iter()
        .map(|r| OffsetCommit {
            topic: topic.to_owned(),
            group: group.to_owned(),
            queue_id: r.queue_id,
            offset: r.offset,
        })
        .collect();
    replica.propose(&BrokerCommand::ConsumerOffsets(commits)).await
}

/// The planned offsets keyed by queue, as `ResetOffsetBody` carries them.
pub fn body(broker_name: &str, topic: &str, rows: &[QueueReset]) -> ResetOffsetBody {
    let offset_table = rows.iter().map(|r| (MessageQueue::new(topic, broker_name, r.queue_id), r.offset)).collect();
    ResetOffsetBody { offset_table }
}

/// Sends RESET_CONSUMER_CLIENT_OFFSET (oneway) to each of `consumers`, in the background.
pub fn notify_consumers(consumers: Vec<Connection>, header: &ResetOffsetRequestHeader, body: &ResetOffsetBody) {
    if consumers.is_empty() {
        return;
    }
    let encoded = match body.encode() {
        Ok(b) => b,
        Err(e) => {
            debug!(error = %e, "a reset table that does not encode is not sent");
            return;
        }
    };
    let request =
        RemotingCommand::request_with_header(RequestCode::ResetConsumerClientOffset, header).with_body(encoded);
    send_oneway_to_all(consumers, request);
}

fn refuse(code: ResponseCode, remark: String) -> RemotingCommand {
    RemotingCommand::response(code, Some(remark))
}

/// INVOKE_BROKER_TO_RESET_OFFSET: plan, commit, tell the group's consumers; the answer's body is
/// the new offset table.
pub async fn invoke_broker_to_reset_offset(ctx: &BrokerContext, request: &RemotingCommand) -> RemotingCommand {
    let h: ResetOffsetRequestHeader = match request.decode_header() {
        Ok(h) => h,
        Err(e) => return refuse(ResponseCode::SystemError, format!("the request header is invalid: {e}")),
    };
    let Some(rows) = plan(&ctx.store, &h.topic, &h.group, h.timestamp, h.is_force) else {
        return refuse(
            ResponseCode::SystemError,
            format!("[reset-offset] reset offset failed, no topic in this broker. topic={}", h.topic),
        );
    };
    let consumers = ctx.clients.consumer_connections(&h.group);
    if consumers.is_empty() {
        return refuse(
            ResponseCode::ConsumerNotOnline,
            format!(
                "Consumer not online, so can not reset offset, Group: {} Topic: {} Timestamp: {}",
                h.group, h.topic, h.timestamp
            ),
        );
    }
    if let Err(e) = commit(&ctx.replica, &h.topic, &h.group, &rows).await {
        return e.to_response(&ctx.config.broker_name);
    }
    let table = body(&ctx.config.broker_name, &h.topic, &rows);
    let encoded = match table.encode() {
        Ok(b) => b,
        Err(e) => return refuse(ResponseCode::SystemError, e.to_string()),
    };
    info!(group = %h.group, topic = %h.topic, timestamp = h.timestamp, force = h.is_force, consumers = consumers.len(), "consumer offsets reset");
    notify_consumers(consumers, &h, &table);
    RemotingCommand::success().with_body(encoded)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resets_move_backwards_unless_forced() {
        assert_eq!(reset_to(5, Some(9), false), 5, "backwards: taken");
        assert_eq!(reset_to(12, Some(9), false), 9, "forwards: kept");
        assert_eq!(reset_to(9, Some(9), false), 9);
        assert_eq!(reset_to(12, Some(9), true), 12, "forced: taken either way");
        assert_eq!(reset_to(12, None, false), 12, "no offset yet: taken");
    }
}
