//! AckMessage, ChangeInvisibleDuration and ForwardMessageToDeadLetterQueue over the broker's
//! remoting codes, as RocketMQ's proxy serves them (`AckMessageActivity`,
//! `ChangeInvisibleDurationActivity`, `ForwardMessageToDLQActivity`). Pure.
//!
//! The receipt handle is the broker's `extraInfo` ([`ExtraInfo`]) as a receive issued it: it names
//! the queue (of the topic or of its POP retry topic) and the message's offset, which ACK_MESSAGE
//! and CHANGE_MESSAGE_INVISIBLETIME carry beside it. A handle that does not parse, lacks the offset
//! or names another broker group is INVALID_RECEIPT_HANDLE before anything is sent; the broker's
//! NO_MESSAGE ("stale receipt handle": redelivered, renewed, acked or revived since) is
//! INVALID_RECEIPT_HANDLE too.
//!
//! Forwarding to the dead-letter queue is the proxy's: CONSUMER_SEND_MSG_BACK with delay level -1
//! (the message goes to `%DLQ%<group>` at once) of the message's CommitLog offset, then an ack of
//! the handle, so the message is neither redelivered nor lost.

use raftmq_common::message::validate::pop_retry_topic;
use raftmq_common::protocol::RemotingCommand;
use raftmq_common::protocol::RequestCode;
use raftmq_common::protocol::ResponseCode;
use raftmq_common::protocol::header::client::ConsumerSendMsgBackRequestHeader;
use raftmq_common::protocol::header::pop::AckMessageRequestHeader;
use raftmq_common::protocol::header::pop::ChangeInvisibleTimeRequestHeader;
use raftmq_common::protocol::header::pop::ChangeInvisibleTimeResponseHeader;
use raftmq_common::protocol::header::pop::ExtraInfo;
use raftmq_common::protocol::header::pop::PopTopicType;

use crate::pb::AckMessageResultEntry;
use crate::pb::ChangeInvisibleDurationRequest;
use crate::pb::Code;
use crate::pb::Status;
use crate::receive::invisible_ms;
use crate::status::of_remoting;
use crate::status::ok;
use crate::status::status;

/// A receipt handle this broker group issued, with the message's queue offset.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Receipt {
    /// The parsed handle.
    pub info: ExtraInfo,
    /// The message's offset in the queue the handle names.
    pub queue_offset: i64,
}

impl Receipt {
    /// The topic whose queue the handle names: `topic` or its POP retry topic for `group`.
    pub fn stored_topic(&self, group: &str, topic: &str) -> String {
        match self.info.topic_type {
            PopTopicType::Normal => topic.to_owned(),
            PopTopicType::Retry => pop_retry_topic(group, topic),
        }
    }
}

fn invalid(why: impl Into<String>) -> Status {
    status(Code::InvalidReceiptHandle, why)
}

/// Reads a receipt handle issued by broker group `broker_name`.
pub fn receipt(handle: &str, broker_name: &str) -> Result<Receipt, Status> {
    if handle.is_empty() {
        return Err(invalid("the receipt handle is missing"));
    }
    let info = ExtraInfo::parse(handle).map_err(|e| invalid(e.to_string()))?;
    let queue_offset = info.queue_offset.ok_or_else(|| invalid("the receipt handle does not name its message"))?;
    if info.broker_name != broker_name {
        return Err(invalid(format!(
            "the receipt handle was issued by broker group {}, not {broker_name}",
            info.broker_name
        )));
    }
    Ok(Receipt { info, queue_offset })
}

/// The status of a broker's answer to ACK_MESSAGE or CHANGE_MESSAGE_INVISIBLETIME.
pub fn receipt_answer_status(answer: &RemotingCommand) -> Status {
    match answer.response_code() {
        ResponseCode::Success => ok(),
        ResponseCode::NoMessage => invalid(answer.remark.clone().unwrap_or_else(|| "stale receipt handle".to_owned())),
        code => of_remoting(code, answer.remark.as_deref()),
    }
}

/// The ACK_MESSAGE of one entry.
pub fn ack_command(group: &str, topic: &str, receipt: &Receipt) -> RemotingCommand {
    let header = AckMessageRequestHeader {
        consumer_group: group.to_owned(),
        topic: topic.to_owned(),
        queue_id: receipt.info.queue_id,
        extra_info: receipt.info.to_string(),
        offset: receipt.queue_offset,
    };
    RemotingCommand::request_with_header(RequestCode::AckMessage, &header)
}

/// One entry's result.
pub fn ack_result(message_id: &str, receipt_handle: &str, status: Status) -> AckMessageResultEntry {
    AckMessageResultEntry {
        message_id: message_id.to_owned(),
        receipt_handle: receipt_handle.to_owned(),
        status: Some(status),
    }
}

/// The status of a whole AckMessage: the entries' one status when they agree, else
/// MULTIPLE_RESULTS.
pub fn overall_status(entries: &[AckMessageResultEntry]) -> Status {
    let mut codes = entries.iter().filter_map(|e| e.status.as_ref());
    let Some(first) = codes.next() else {
        return status(Code::BadRequest, "no entry to acknowledge");
    };
    if codes.all(|s| s.code == first.code) {
        return first.clone();
    }
    status(Code::MultipleResults, "the entries have different results; see each entry")
}

/// The CHANGE_MESSAGE_INVISIBLETIME of a request, with the receipt it renews.
pub fn change_command(
    request: &ChangeInvisibleDurationRequest,
    group: &str,
    topic: &str,
    broker_name: &str,
) -> Result<(RemotingCommand, Receipt), Status> {
    let receipt = receipt(&request.receipt_handle, broker_name)?;
    let invisible = invisible_ms(request.invisible_duration.as_ref())?;
    let header = ChangeInvisibleTimeRequestHeader {
        consumer_group: group.to_owned(),
        topic: topic.to_owned(),
        queue_id: receipt.info.queue_id,
        extra_info: receipt.info.to_string(),
        offset: receipt.queue_offset,
        invisible_time: invisible as i64,
    };
    Ok((RemotingCommand::request_with_header(RequestCode::ChangeMessageInvisibletime, &header), receipt))
}

/// The status and the new receipt handle of a broker's answer to CHANGE_MESSAGE_INVISIBLETIME:
/// the old handle with the new pop time (epoch) and invisible time.
pub fn change_answer(answer: &RemotingCommand, old: &Receipt) -> (Status, String) {
    let status = receipt_answer_status(answer);
    if status.code != Code::Ok as i32 {
        return (status, String::new());
    }
    match answer.decode_header::<ChangeInvisibleTimeResponseHeader>() {
        Ok(h) => {
            let renewed = ExtraInfo { pop_time: h.pop_time, invisible_time: h.invisible_time, ..old.info.clone() };
            (status, renewed.to_string())
        }
        Err(e) => (
            crate::status::status(Code::InternalServerError, format!("bad CHANGE_MESSAGE_INVISIBLETIME answer: {e}")),
            String::new(),
        ),
    }
}

/// The CONSUMER_SEND_MSG_BACK that moves the message at `commit_log_offset` to `%DLQ%<group>`.
pub fn dead_letter_command(group: &str, topic: &str, message_id: &str, commit_log_offset: i64) -> RemotingCommand {
    let header = ConsumerSendMsgBackRequestHeader {
        offset: commit_log_offset,
        group: group.to_owned(),
        // Negative: straight to the dead-letter queue, whatever the reconsume count.
        delay_level: -1,
        origin_msg_id: Some(message_id.to_owned()),
        origin_topic: Some(topic.to_owned()),
        unit_mode: Some(false),
        max_reconsume_times: None,
        bname: None,
    };
    RemotingCommand::request_with_header(RequestCode::ConsumerSendMsgBack, &header)
}

#[cfg(test)]
mod tests {
    use super::*;

    const HANDLE: &str = "5 1000 15000 0 0 broker-a 2 6";

    fn change(handle: &str, seconds: i64) -> ChangeInvisibleDurationRequest {
        ChangeInvisibleDurationRequest {
            group: None,
            topic: None,
            receipt_handle: handle.into(),
            invisible_duration: Some(prost_types::Duration { seconds, nanos: 0 }),
            message_id: "ID".into(),
            lite_topic: None,
            suspend: None,
        }
    }

    #[test]
    fn a_receipt_names_this_brokers_message_or_is_invalid() {
        let r = receipt(HANDLE, "broker-a").unwrap();
        assert_eq!((r.info.queue_id, r.queue_offset), (2, 6));
        assert_eq!(r.stored_topic("G", "T"), "T");
        let retry = receipt("0 1000 15000 0 1 broker-a 0 3", "broker-a").unwrap();
        assert_eq!(retry.stored_topic("G", "T"), "%RETRY%G_T");
        for bad in ["", "garbage", "5 1000 15000 0 0 broker-a 2", "5 1000 15000 0 0 broker-b 2 6"] {
            assert_eq!(receipt(bad, "broker-a").unwrap_err().code, Code::InvalidReceiptHandle as i32, "{bad:?}");
        }
    }

    #[test]
    fn an_ack_carries_the_handle_queue_and_offset() {
        let r = receipt(HANDLE, "broker-a").unwrap();
        let h: AckMessageRequestHeader = ack_command("G", "T", &r).decode_header().unwrap();
        assert_eq!((h.consumer_group.as_str(), h.topic.as_str()), ("G", "T"));
        assert_eq!((h.queue_id, h.offset, h.extra_info.as_str()), (2, 6, HANDLE));
    }

    #[test]
    fn broker_answers_become_entry_statuses_and_one_overall_status() {
        let stale = RemotingCommand::response(ResponseCode::NoMessage, Some("stale receipt handle: acked".into()));
        assert_eq!(receipt_answer_status(&stale).code, Code::InvalidReceiptHandle as i32);
        assert_eq!(receipt_answer_status(&RemotingCommand::success()).code, Code::Ok as i32);
        let okay = ack_result("a", HANDLE, ok());
        let bad = ack_result("b", "x", receipt_answer_status(&stale));
        assert_eq!(overall_status(&[okay.clone(), okay.clone()]).code, Code::Ok as i32);
        assert_eq!(overall_status(std::slice::from_ref(&bad)).code, Code::InvalidReceiptHandle as i32);
        assert_eq!(overall_status(&[okay, bad]).code, Code::MultipleResults as i32);
    }

    #[test]
    fn a_change_answers_the_renewed_handle() {
        let (command, old) = change_command(&change(HANDLE, 30), "G", "T", "broker-a").unwrap();
        let h: ChangeInvisibleTimeRequestHeader = command.decode_header().unwrap();
        assert_eq!((h.queue_id, h.offset, h.invisible_time), (2, 6, 30_000));
        let answer = RemotingCommand::success().with_header(&ChangeInvisibleTimeResponseHeader {
            pop_time: 2_000,
            invisible_time: 30_000,
            revive_qid: 0,
        });
        let (status, handle) = change_answer(&answer, &old);
        assert_eq!(status.code, Code::Ok as i32);
        assert_eq!(handle, "5 2000 30000 0 0 broker-a 2 6");
        let stale = RemotingCommand::response(ResponseCode::NoMessage, None);
        assert_eq!(change_answer(&stale, &old).0.code, Code::InvalidReceiptHandle as i32);
        assert_eq!(
            change_command(&change(HANDLE, 0), "G", "T", "broker-a").unwrap_err().code,
            Code::IllegalInvisibleTime as i32
        );
    }

    #[test]
    fn a_dead_letter_is_a_send_back_straight_to_the_dlq() {
        let h: ConsumerSendMsgBackRequestHeader = dead_letter_command("G", "T", "ID", 4_096).decode_header().unwrap();
        assert_eq!((h.offset, h.delay_level, h.group.as_str()), (4_096, -1, "G"));
        assert_eq!((h.origin_msg_id.as_deref(), h.origin_topic.as_deref()), (Some("ID"), Some("T")));
    }
}
