//! Headers of RocketMQ 5's POP consumption: POP_MESSAGE (200050), ACK_MESSAGE (200051) and
//! CHANGE_MESSAGE_INVISIBLETIME (200053), and the receipt string a popped message is acked by,
//! `extraInfo` (Java's `ExtraInfoUtil`).
//!
//! ```text
//! extraInfo = ckOffset popTime invisibleTime reviveQid topicType brokerName queueId queueOffset
//!             (space separated; topicType "0" the topic itself, "1" its POP retry topic v1)
//! startOffsetInfo = topicType queueId startOffset [; ...]
//! msgOffsetInfo   = topicType queueId offset,offset,... [; ...]
//! orderCountInfo  = topicType queueId count [; ...]
//! ```
//!
//! Invariants: [`ExtraInfo::parse`] accepts exactly what [`ExtraInfo`]'s `Display` writes (and the
//! 7-field form Java's older clients send, without the message's own offset); a string over
//! `POP_RECEIPT_HANDLE_MAX_BYTES` or with a field out of range is refused, never panicked on.
//! `popTime` doubles as the receipt's epoch: the broker issues a distinct one per pop and per
//! invisible-time change, so a receipt from an earlier delivery is recognisably stale.

use std::fmt;

use super::ext_header::ext_header;
use crate::limits::POP_RECEIPT_HANDLE_MAX_BYTES;

ext_header! {
    /// POP_MESSAGE (200050) request.
    pub struct PopMessageRequestHeader {
        /// Consumer group.
        required consumer_group: String => "consumerGroup",
        /// Topic (never its retry topic: the broker pops that too).
        required topic: String => "topic",
        /// Queue, or -1 for any queue of the topic.
        required queue_id: i32 => "queueId",
        /// At most this many messages (1..=32).
        required max_msg_nums: i32 => "maxMsgNums",
        /// How long a popped message stays invisible, ms.
        required invisible_time: i64 => "invisibleTime",
        /// How long the broker may hold the request when nothing is ready, ms.
        required poll_time: i64 => "pollTime",
        /// When the client sent the request, ms since the epoch.
        required born_time: i64 => "bornTime",
        /// Where a group without an offset starts: 0 = the queue's min offset, 1 = its max.
        required init_mode: i32 => "initMode",
        /// "TAG" or "SQL92".
        optional exp_type: Option<String> => "expType",
        /// The subscription expression.
        optional exp: Option<String> => "exp",
        /// FIFO: a queue with a message in flight is not popped again until it is acked.
        optional order: Option<bool> => "order",
        /// The client's id of this attempt (retries of one pop share it).
        optional attempt_id: Option<String> => "attemptId",
    }
}

ext_header! {
    /// POP_MESSAGE (200050) response.
    pub struct PopMessageResponseHeader {
        /// The pop's time: the epoch of every receipt it issued.
        required pop_time: i64 => "popTime",
        /// The invisible time granted, ms.
        required invisible_time: i64 => "invisibleTime",
        /// Java's revive queue; raftmq has one table per group and answers 0.
        required revive_qid: i32 => "reviveQid",
        /// Messages left behind the popped ones in the queues looked at.
        required rest_num: i64 => "restNum",
        /// `topicType queueId startOffset` per queue popped, `;` separated.
        optional start_offset_info: Option<String> => "startOffsetInfo",
        /// `topicType queueId offset,offset,...` per queue popped, `;` separated.
        optional msg_offset_info: Option<String> => "msgOffsetInfo",
        /// `topicType queueId deliveryCount` per queue popped in FIFO mode.
        optional order_count_info: Option<String> => "orderCountInfo",
    }
}

ext_header! {
    /// ACK_MESSAGE (200051) request.
    pub struct AckMessageRequestHeader {
        /// Consumer group.
        required consumer_group: String => "consumerGroup",
        /// The original topic (the receipt says whether the message came from its retry topic).
        required topic: String => "topic",
        /// The message's queue.
        required queue_id: i32 => "queueId",
        /// The receipt, as POP_MESSAGE or CHANGE_MESSAGE_INVISIBLETIME issued it.
        required extra_info: String => "extraInfo",
        /// The message's queue offset.
        required offset: i64 => "offset",
    }
}

ext_header! {
    /// CHANGE_MESSAGE_INVISIBLETIME (200053) request.
    pub struct ChangeInvisibleTimeRequestHeader {
        /// Consumer group.
        required consumer_group: String => "consumerGroup",
        /// The original topic.
        required topic: String => "topic",
        /// The message's queue.
        required queue_id: i32 => "queueId",
        /// The receipt being renewed.
        required extra_info: String => "extraInfo",
        /// The message's queue offset.
        required offset: i64 => "offset",
        /// The new invisible time from now, ms.
        required invisible_time: i64 => "invisibleTime",
    }
}

ext_header! {
    /// CHANGE_MESSAGE_INVISIBLETIME (200053) response: the new receipt is the old one with this
    /// popTime and invisibleTime.
    pub struct ChangeInvisibleTimeResponseHeader {
        /// The new epoch.
        required pop_time: i64 => "popTime",
        /// The invisible time granted, ms.
        required invisible_time: i64 => "invisibleTime",
        /// Java's revive queue; 0 here.
        required revive_qid: i32 => "reviveQid",
    }
}

/// Which topic a popped message was read from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum PopTopicType {
    /// The topic the consumer subscribed to ("0").
    Normal,
    /// Its POP retry topic `%RETRY%{group}_{topic}` ("1").
    Retry,
}

impl PopTopicType {
    /// The wire digit.
    pub fn as_str(self) -> &'static str {
        match self {
            PopTopicType::Normal => "0",
            PopTopicType::Retry => "1",
        }
    }

    fn parse(raw: &str) -> Option<Self> {
        match raw {
            "0" => Some(PopTopicType::Normal),
            "1" => Some(PopTopicType::Retry),
            _ => None,
        }
    }
}

/// A popped message's receipt (`extraInfo`; the gRPC receipt handle).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExtraInfo {
    /// The queue's start offset when it was popped (Java's check point offset).
    pub ck_offset: i64,
    /// The epoch: the pop's or the last change's time, ms.
    pub pop_time: i64,
    /// The invisible time granted at `pop_time`, ms.
    pub invisible_time: i64,
    /// Java's revive queue (0 here).
    pub revive_qid: i32,
    /// Normal or retry topic.
    pub topic_type: PopTopicType,
    /// The broker group that issued it.
    pub broker_name: String,
    /// The queue, in the topic `topic_type` names.
    pub queue_id: i32,
    /// The message's offset in that queue (absent in the older 7-field form).
    pub queue_offset: Option<i64>,
}

/// Why a receipt string was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ExtraInfoError {
    /// Longer than `POP_RECEIPT_HANDLE_MAX_BYTES`.
    #[error("the receipt handle has {len} bytes, more than {max}")]
    TooLong {
        /// Its length.
        len: usize,
        /// The bound.
        max: usize,
    },
    /// Not 7 or 8 space-separated fields of the right types.
    #[error("the receipt handle is malformed: {0}")]
    Malformed(&'static str),
}

impl ExtraInfo {
    /// Reads a receipt string.
    pub fn parse(raw: &str) -> Result<ExtraInfo, ExtraInfoError> {
        if raw.len() > POP_RECEIPT_HANDLE_MAX_BYTES {
            return Err(ExtraInfoError::TooLong { len: raw.len(), max: POP_RECEIPT_HANDLE_MAX_BYTES });
        }
        let fields: Vec<&str> = raw.split(' ').collect();
        if fields.len() != 7 && fields.len() != 8 {
            return Err(ExtraInfoError::Malformed("expected 7 or 8 space-separated fields"));
        }
        let number =
            |i: usize, what: &'static str| fields[i].parse::<i64>().map_err(|_| ExtraInfoError::Malformed(what));
        let ck_offset = number(0, "the start offset is not a number")?;
        let pop_time = number(1, "the pop time is not a number")?;
        let invisible_time = number(2, "the invisible time is not a number")?;
        let revive_qid =
            fields[3].parse::<i32>().map_err(|_| ExtraInfoError::Malformed("the revive queue is not a number"))?;
        let topic_type =
            PopTopicType::parse(fields[4]).ok_or(ExtraInfoError::Malformed("the topic type is not 0 or 1"))?;
        let broker_name = fields[5].to_owned();
        if broker_name.is_empty() {
            return Err(ExtraInfoError::Malformed("the broker name is empty"));
        }
        let queue_id =
            fields[6].parse::<i32>().map_err(|_| ExtraInfoError::Malformed("the queue id is not a number"))?;
        let queue_offset = match fields.get(7) {
            Some(_) => Some(number(7, "the queue offset is not a number")?),
            None => None,
        };
        if ck_offset < 0 || pop_time < 0 || invisible_time < 0 || queue_id < 0 || queue_offset.is_some_and(|o| o < 0) {
            return Err(ExtraInfoError::Malformed("a field is negative"));
        }
        Ok(ExtraInfo {
            ck_offset,
            pop_time,
            invisible_time,
            revive_qid,
            topic_type,
            broker_name,
            queue_id,
            queue_offset,
        })
    }
}

impl fmt::Display for ExtraInfo {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} {} {} {} {} {} {}",
            self.ck_offset,
            self.pop_time,
            self.invisible_time,
            self.revive_qid,
            self.topic_type.as_str(),
            self.broker_name,
            self.queue_id
        )?;
        if let Some(offset) = self.queue_offset {
            write!(f, " {offset}")?;
        }
        Ok(())
    }
}

/// One queue's part of a POP_MESSAGE response's offset fields.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PoppedQueue {
    /// Normal or retry topic.
    pub topic_type: PopTopicType,
    /// The queue.
    pub queue_id: i32,
    /// Its start offset when popped.
    pub start_offset: i64,
    /// The offsets popped from it, ascending.
    pub offsets: Vec<i64>,
    /// FIFO only: how many times its messages were delivered before (Java's order count).
    pub order_count: Option<i32>,
}

/// `startOffsetInfo`, `msgOffsetInfo` and `orderCountInfo` of `queues` (queues with no offsets
/// are left out of `msgOffsetInfo`, as Java leaves them out).
pub fn offset_infos(queues: &[PoppedQueue]) -> (String, String, Option<String>) {
    let mut start = Vec::new();
    let mut msg = Vec::new();
    let mut order = Vec::new();
    for q in queues {
        let t = q.topic_type.as_str();
        start.push(format!("{t} {} {}", q.queue_id, q.start_offset));
        if !q.offsets.is_empty() {
            let offsets: Vec<String> = q.offsets.iter().map(i64::to_string).collect();
            msg.push(format!("{t} {} {}", q.queue_id, offsets.join(",")));
        }
        if let Some(count) = q.order_count {
            order.push(format!("{t} {} {count}", q.queue_id));
        }
    }
    let order = if order.is_empty() { None } else { Some(order.join(";")) };
    (start.join(";"), msg.join(";"), order)
}

/// The start offset `startOffsetInfo` gives a (topic type, queue), as a client reads it to build
/// each message's receipt.
pub fn start_offset_of(start_offset_info: &str, topic_type: PopTopicType, queue_id: i32) -> Option<i64> {
    start_offset_info.split(';').find_map(|part| {
        let mut fields = part.split(' ');
        let t = PopTopicType::parse(fields.next()?)?;
        let q = fields.next()?.parse::<i32>().ok()?;
        let offset = fields.next()?.parse::<i64>().ok()?;
        (t == topic_type && q == queue_id && fields.next().is_none()).then_some(offset)
    })
}

/// The delivery count `orderCountInfo` gives a (topic type, queue).
pub fn order_count_of(order_count_info: &str, topic_type: PopTopicType, queue_id: i32) -> Option<i32> {
    order_count_info.split(';').find_map(|part| {
        let mut fields = part.split(' ');
        let t = PopTopicType::parse(fields.next()?)?;
        let q = fields.next()?.parse::<i32>().ok()?;
        let count = fields.next()?.parse::<i32>().ok()?;
        (t == topic_type && q == queue_id && fields.next().is_none()).then_some(count)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> ExtraInfo {
        ExtraInfo {
            ck_offset: 10,
            pop_time: 1_700_000_000_123,
            invisible_time: 30_000,
            revive_qid: 0,
            topic_type: PopTopicType::Retry,
            broker_name: "broker-a".into(),
            queue_id: 3,
            queue_offset: Some(12),
        }
    }

    #[test]
    fn extra_info_round_trips_in_java_layout() {
        let info = sample();
        let text = info.to_string();
        assert_eq!(text, "10 1700000000123 30000 0 1 broker-a 3 12");
        assert_eq!(ExtraInfo::parse(&text), Ok(info));
        let seven = ExtraInfo::parse("10 5 30000 0 0 broker-a 3").unwrap();
        assert_eq!(seven.queue_offset, None);
        assert_eq!(seven.topic_type, PopTopicType::Normal);
    }

    #[test]
    fn malformed_receipts_are_refused_not_panicked_on() {
        for bad in [
            "",
            "1 2 3",
            "a 2 3 0 0 b 1 1",
            "1 2 3 0 2 b 1 1",
            "1 2 3 0 0  1 1",
            "1 -2 3 0 0 b 1 1",
            "1 2 3 0 0 b 1 1 9",
        ] {
            assert!(ExtraInfo::parse(bad).is_err(), "{bad:?}");
        }
        let long = "1".repeat(POP_RECEIPT_HANDLE_MAX_BYTES + 1);
        assert!(matches!(ExtraInfo::parse(&long), Err(ExtraInfoError::TooLong { .. })));
    }

    #[test]
    fn offset_infos_are_java_formatted_and_read_back() {
        let queues = [
            PoppedQueue {
                topic_type: PopTopicType::Normal,
                queue_id: 0,
                start_offset: 5,
                offsets: vec![5, 6],
                order_count: None,
            },
            PoppedQueue {
                topic_type: PopTopicType::Retry,
                queue_id: 0,
                start_offset: 1,
                offsets: vec![],
                order_count: None,
            },
        ];
        let (start, msg, order) = offset_infos(&queues);
        assert_eq!(start, "0 0 5;1 0 1");
        assert_eq!(msg, "0 0 5,6");
        assert_eq!(order, None);
        assert_eq!(start_offset_of(&start, PopTopicType::Retry, 0), Some(1));
        assert_eq!(start_offset_of(&start, PopTopicType::Normal, 1), None);
        assert_eq!(order_count_of("0 2 3", PopTopicType::Normal, 2), Some(3));
    }
}
