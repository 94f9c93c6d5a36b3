//! UpdateOffset, GetOffset and QueryOffset as RocketMQ's proxy serves them (`OffsetActivity`),
//! over the broker's remoting offset codes. Pure.
//!
//! | RPC | remoting request | answer |
//! |---|---|---|
//! | UpdateOffset | UPDATE_CONSUMER_OFFSET (the replicated commit a 4.x consumer makes) | OK |
//! | GetOffset | QUERY_CONSUMER_OFFSET | the group's offset; QUERY_NOT_FOUND is OFFSET_NOT_FOUND |
//! | QueryOffset BEGINNING | GET_MIN_OFFSET | the queue's first retained offset |
//! | QueryOffset END | GET_MAX_OFFSET | the offset after its last message |
//! | QueryOffset TIMESTAMP | SEARCH_OFFSET_BY_TIMESTAMP | the first offset stored at or after it |
//!
//! Checked before anything is sent: the group (ILLEGAL_CONSUMER_GROUP), the queue's topic
//! (ILLEGAL_TOPIC, its namespace already joined; unknown here is TOPIC_NOT_FOUND), its broker
//! group (another one's queue is BAD_REQUEST), its id (below the topic's queue count, else
//! BAD_REQUEST), an UpdateOffset's offset (not negative, else ILLEGAL_OFFSET) and a TIMESTAMP
//! query's timestamp (required, BAD_REQUEST). Who answers is the bridge's rule: the leader; a
//! follower relays the reads and refuses a commit with the leader's address
//! (MASTER_PERSISTENCE_TIMEOUT), since a relayed commit could land after newer ones.

use raftmq_common::message::validate::validate_topic;
use raftmq_common::protocol::RemotingCommand;
use raftmq_common::protocol::RequestCode;
use raftmq_common::protocol::ResponseCode;
use raftmq_common::protocol::body::topic::TopicConfig;
use raftmq_common::protocol::header::offset::GetMaxOffsetRequestHeader;
use raftmq_common::protocol::header::offset::GetMaxOffsetResponseHeader;
use raftmq_common::protocol::header::offset::GetMinOffsetRequestHeader;
use raftmq_common::protocol::header::offset::GetMinOffsetResponseHeader;
use raftmq_common::protocol::header::offset::QueryConsumerOffsetRequestHeader;
use raftmq_common::protocol::header::offset::QueryConsumerOffsetResponseHeader;
use raftmq_common::protocol::header::offset::SearchOffsetRequestHeader;
use raftmq_common::protocol::header::offset::SearchOffsetResponseHeader;
use raftmq_common::protocol::header::offset::UpdateConsumerOffsetRequestHeader;

use crate::pb::Code;
use crate::pb::MessageQueue;
use crate::pb::QueryOffsetPolicy;
use crate::pb::Status;
use crate::status::of_remoting;
use crate::status::ok;
use crate::status::status;

/// One queue of this broker group that a request names, checked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QueueRef<'a> {
    /// The topic.
    pub topic: &'a str,
    /// The queue id, below the topic's queue count.
    pub queue_id: i32,
}

/// The queue `queue` names, checked against this broker group (`broker_name`) and the topic's
/// config (`topic_config`, `None` when the topic does not exist here).
pub fn queue_of<'a>(
    queue: Option<&'a MessageQueue>,
    broker_name: &str,
    topic_config: impl FnOnce(&str) -> Option<TopicConfig>,
) -> Result<QueueRef<'a>, Status> {
    let queue = queue.ok_or_else(|| status(Code::BadRequest, "the message queue is missing"))?;
    let resource = queue.topic.as_ref().ok_or_else(|| status(Code::IllegalTopic, "the topic is missing"))?;
    let topic = resource.name.as_str();
    validate_topic(topic).map_err(|e| status(Code::IllegalTopic, e.to_string()))?;
    if let Some(broker) = queue.broker.as_ref().filter(|b| !b.name.is_empty() && b.name != broker_name) {
        return Err(status(
            Code::BadRequest,
            format!("the queue is on broker group {}, not {broker_name}: ask that group's endpoints", broker.name),
        ));
    }
    let config = topic_config(topic)
        .ok_or_else(|| status(Code::TopicNotFound, format!("topic {topic} does not exist on this cluster")))?;
    let queues = config.read_queue_nums.max(config.write_queue_nums);
    if !(0..queues).contains(&queue.id) {
        return Err(status(
            Code::BadRequest,
            format!("queue id {} is out of range: topic {topic} has {queues} queues", queue.id),
        ));
    }
    Ok(QueueRef { topic, queue_id: queue.id })
}

/// The UPDATE_CONSUMER_OFFSET committing `offset` for `group` on `queue`; a negative offset is
/// ILLEGAL_OFFSET.
pub fn update_command(group: &str, queue: QueueRef<'_>, offset: i64) -> Result<RemotingCommand, Status> {
    if offset < 0 {
        return Err(status(Code::IllegalOffset, format!("the offset {offset} is negative")));
    }
    let header = UpdateConsumerOffsetRequestHeader {
        consumer_group: group.to_owned(),
        topic: queue.topic.to_owned(),
        queue_id: queue.queue_id,
        commit_offset: offset,
        bname: None,
    };
    Ok(RemotingCommand::request_with_header(RequestCode::UpdateConsumerOffset, &header))
}

/// The status of the broker's answer to UPDATE_CONSUMER_OFFSET.
pub fn update_answer(answer: &RemotingCommand) -> Status {
    match answer.response_code() {
        ResponseCode::Success => ok(),
        code => of_remoting(code, answer.remark.as_deref()),
    }
}

/// The QUERY_CONSUMER_OFFSET of `group`'s offset on `queue`.
pub fn get_command(group: &str, queue: QueueRef<'_>) -> RemotingCommand {
    let header = QueryConsumerOffsetRequestHeader {
        consumer_group: group.to_owned(),
        topic: queue.topic.to_owned(),
        queue_id: queue.queue_id,
        // OFFSET_NOT_FOUND when nothing is committed, not the 4.x answer 0 for a young queue.
        set_zero_if_not_found: Some(false),
        bname: None,
    };
    RemotingCommand::request_with_header(RequestCode::QueryConsumerOffset, &header)
}

fn bad_answer(code: &str, e: impl std::fmt::Display) -> (Status, i64) {
    (status(Code::InternalServerError, format!("bad {code} answer: {e}")), 0)
}

/// The status and offset of the broker's answer to QUERY_CONSUMER_OFFSET: OFFSET_NOT_FOUND when
/// the group has committed none on the queue.
pub fn get_answer(answer: &RemotingCommand) -> (Status, i64) {
    match answer.response_code() {
        ResponseCode::Success => match answer.decode_header::<QueryConsumerOffsetResponseHeader>() {
            Ok(h) => (ok(), h.offset),
            Err(e) => bad_answer("QUERY_CONSUMER_OFFSET", e),
        },
        ResponseCode::QueryNotFound => {
            (status(Code::OffsetNotFound, "the consumer group has no offset committed on this queue"), 0)
        }
        code => (of_remoting(code, answer.remark.as_deref()), 0),
    }
}

/// The remoting request of a QueryOffset by `policy` (a raw proto enum value) on `queue`;
/// `timestamp_ms` is required by TIMESTAMP.
pub fn query_command(policy: i32, timestamp_ms: Option<i64>, queue: QueueRef<'_>) -> Result<RemotingCommand, Status> {
    let (topic, queue_id) = (queue.topic.to_owned(), queue.queue_id);
    match QueryOffsetPolicy::try_from(policy) {
        Ok(QueryOffsetPolicy::Beginning) => Ok(RemotingCommand::request_with_header(
            RequestCode::GetMinOffset,
            &GetMinOffsetRequestHeader { topic, queue_id, bname: None },
        )),
        Ok(QueryOffsetPolicy::End) => Ok(RemotingCommand::request_with_header(
            RequestCode::GetMaxOffset,
            &GetMaxOffsetRequestHeader { topic, queue_id, bname: None },
        )),
        Ok(QueryOffsetPolicy::Timestamp) => {
            let timestamp = timestamp_ms
                .ok_or_else(|| status(Code::BadRequest, "the TIMESTAMP query offset policy needs a timestamp"))?;
            Ok(RemotingCommand::request_with_header(
                RequestCode::SearchOffsetByTimestamp,
                &SearchOffsetRequestHeader { topic, queue_id, timestamp, bname: None },
            ))
        }
        Err(_) => Err(status(Code::BadRequest, format!("unsupported query offset policy {policy}"))),
    }
}

/// A proto timestamp in ms since the epoch, as the proxy reads it (`Timestamps.toMillis`).
pub fn timestamp_ms(t: &prost_types::Timestamp) -> i64 {
    t.seconds.saturating_mul(1_000).saturating_add(i64::from(t.nanos) / 1_000_000)
}

/// The status and offset of the broker's answer to the request [`query_command`] made.
pub fn query_answer(answer: &RemotingCommand, request_code: RequestCode) -> (Status, i64) {
    let code = answer.response_code();
    if code != ResponseCode::Success {
        return (of_remoting(code, answer.remark.as_deref()), 0);
    }
    let offset = match request_code {
        RequestCode::GetMinOffset => answer.decode_header::<GetMinOffsetResponseHeader>().map(|h| h.offset),
        RequestCode::GetMaxOffset => answer.decode_header::<GetMaxOffsetResponseHeader>().map(|h| h.offset),
        _ => answer.decode_header::<SearchOffsetResponseHeader>().map(|h| h.offset),
    };
    match offset {
        Ok(offset) => (ok(), offset),
        Err(e) => bad_answer(&format!("{request_code:?}"), e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pb::Broker;
    use crate::pb::Resource;

    fn mq(topic: &str, id: i32, broker: &str) -> MessageQueue {
        MessageQueue {
            topic: Some(Resource { resource_namespace: String::new(), name: topic.into() }),
            id,
            permission: 0,
            broker: Some(Broker { name: broker.into(), id: 0, endpoints: None }),
            accept_message_types: Vec::new(),
        }
    }

    fn topics(name: &str) -> Option<TopicConfig> {
        (name == "T").then(|| TopicConfig { read_queue_nums: 4, write_queue_nums: 2, ..TopicConfig::new("T") })
    }

    fn code(r: Result<impl std::fmt::Debug, Status>) -> i32 {
        r.map_or_else(|s| s.code, |_| Code::Ok as i32)
    }

    #[test]
    fn a_queue_is_checked_against_this_group_and_the_topic() {
        let q = mq("T", 3, "broker-a");
        assert_eq!(queue_of(Some(&q), "broker-a", topics).unwrap(), QueueRef { topic: "T", queue_id: 3 });
        let no_broker = MessageQueue { broker: None, ..mq("T", 0, "") };
        assert_eq!(code(queue_of(Some(&no_broker), "broker-a", topics)), Code::Ok as i32);
        let table = [
            (mq("T", 4, "broker-a"), Code::BadRequest),
            (mq("T", -1, "broker-a"), Code::BadRequest),
            (mq("T", 0, "broker-b"), Code::BadRequest),
            (mq("U", 0, "broker-a"), Code::TopicNotFound),
            (mq("bad topic!", 0, "broker-a"), Code::IllegalTopic),
            (mq("", 0, "broker-a"), Code::IllegalTopic),
        ];
        for (q, expected) in table {
            assert_eq!(code(queue_of(Some(&q), "broker-a", topics)), expected as i32, "{q:?}");
        }
        assert_eq!(code(queue_of(None, "broker-a", topics)), Code::BadRequest as i32);
    }

    #[test]
    fn an_update_is_the_remoting_commit_and_a_negative_offset_is_illegal() {
        let q = QueueRef { topic: "T", queue_id: 1 };
        let h: UpdateConsumerOffsetRequestHeader = update_command("G", q, 42).unwrap().decode_header().unwrap();
        assert_eq!((h.consumer_group.as_str(), h.topic.as_str(), h.queue_id, h.commit_offset), ("G", "T", 1, 42));
        assert_eq!(code(update_command("G", q, -1)), Code::IllegalOffset as i32);
        assert_eq!(update_answer(&RemotingCommand::success()).code, Code::Ok as i32);
        let follower =
            RemotingCommand::response(ResponseCode::ServiceNotAvailable, Some("leader=1.2.3.4:10911".into()));
        assert_eq!(update_answer(&follower).code, Code::MasterPersistenceTimeout as i32);
    }

    #[test]
    fn a_get_answers_the_offset_or_offset_not_found() {
        let q = QueueRef { topic: "T", queue_id: 2 };
        let h: QueryConsumerOffsetRequestHeader = get_command("G", q).decode_header().unwrap();
        assert_eq!((h.consumer_group.as_str(), h.topic.as_str(), h.queue_id), ("G", "T", 2));
        let found = RemotingCommand::success().with_header(&QueryConsumerOffsetResponseHeader { offset: 7 });
        let (s, offset) = get_answer(&found);
        assert_eq!((s.code, offset), (Code::Ok as i32, 7));
        let none = RemotingCommand::response(ResponseCode::QueryNotFound, Some("Not found".into()));
        assert_eq!(get_answer(&none).0.code, Code::OffsetNotFound as i32);
    }

    #[test]
    fn a_query_by_policy_is_min_max_or_search_by_time() {
        let q = QueueRef { topic: "T", queue_id: 0 };
        let codes = [
            (QueryOffsetPolicy::Beginning, RequestCode::GetMinOffset),
            (QueryOffsetPolicy::End, RequestCode::GetMaxOffset),
            (QueryOffsetPolicy::Timestamp, RequestCode::SearchOffsetByTimestamp),
        ];
        for (policy, request_code) in codes {
            assert_eq!(query_command(policy as i32, Some(5), q).unwrap().request_code(), request_code);
        }
        let h: SearchOffsetRequestHeader =
            query_command(QueryOffsetPolicy::Timestamp as i32, Some(1_234), q).unwrap().decode_header().unwrap();
        assert_eq!(h.timestamp, 1_234);
        assert_eq!(code(query_command(QueryOffsetPolicy::Timestamp as i32, None, q)), Code::BadRequest as i32);
        assert_eq!(code(query_command(9, None, q)), Code::BadRequest as i32);
        let t = prost_types::Timestamp { seconds: 2, nanos: 345_000_000 };
        assert_eq!(timestamp_ms(&t), 2_345);
        let max = RemotingCommand::success().with_header(&GetMaxOffsetResponseHeader { offset: 9 });
        let (s, offset) = query_answer(&max, RequestCode::GetMaxOffset);
        assert_eq!((s.code, offset), (Code::Ok as i32, 9));
        let busy = RemotingCommand::response(ResponseCode::SystemBusy, None);
        assert_eq!(query_answer(&busy, RequestCode::GetMinOffset).0.code, Code::TooManyRequests as i32);
    }
}
