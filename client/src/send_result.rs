//! [`SendResult`] and [`SendStatus`]: what a successful send reports (`SendResult.java`,
//! `SendStatus.java`), and the mapping from a broker's send response to them
//! (`MQClientAPIImpl.processSendResponse`).
//!
//! Invariant: only SUCCESS, FLUSH_DISK_TIMEOUT, FLUSH_SLAVE_TIMEOUT and SLAVE_NOT_AVAILABLE make a
//! result; the three non-OK statuses mean the message **is stored** but not yet as durable as asked.
//! Every other code is a [`ErrorKind::Broker`] error.

use raftmq_common::message::MessageQueue;
use raftmq_common::protocol::RemotingCommand;
use raftmq_common::protocol::ResponseCode;
use raftmq_common::protocol::header::send::SendMessageResponseHeader;

use crate::error::ClientError;
use crate::error::ErrorKind;
use crate::error::Result;

/// How far a stored message got.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SendStatus {
    /// Stored as requested.
    SendOk,
    /// Stored, but the synchronous flush did not finish in time.
    FlushDiskTimeout,
    /// Stored on the leader, but replication did not finish in time.
    FlushSlaveTimeout,
    /// Stored on the leader; no replica available for synchronous replication.
    SlaveNotAvailable,
}

impl SendStatus {
    /// The status for a response code; `None` for codes that are errors.
    pub fn from_response_code(code: ResponseCode) -> Option<Self> {
        match code {
            ResponseCode::Success => Some(SendStatus::SendOk),
            ResponseCode::FlushDiskTimeout => Some(SendStatus::FlushDiskTimeout),
            ResponseCode::FlushSlaveTimeout => Some(SendStatus::FlushSlaveTimeout),
            ResponseCode::SlaveNotAvailable => Some(SendStatus::SlaveNotAvailable),
            _ => None,
        }
    }

    /// RocketMQ's name (`SEND_OK`, …).
    pub fn name(self) -> &'static str {
        match self {
            SendStatus::SendOk => "SEND_OK",
            SendStatus::FlushDiskTimeout => "FLUSH_DISK_TIMEOUT",
            SendStatus::FlushSlaveTimeout => "FLUSH_SLAVE_TIMEOUT",
            SendStatus::SlaveNotAvailable => "SLAVE_NOT_AVAILABLE",
        }
    }
}

/// A send the broker accepted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SendResult {
    /// How durable the message is.
    pub status: SendStatus,
    /// The client message id (`UNIQ_KEY`); comma-joined for a batch.
    pub msg_id: String,
    /// The broker's offsetMsgId (store host + CommitLog offset); comma-joined for a batch.
    pub offset_msg_id: String,
    /// The queue the message went to.
    pub message_queue: MessageQueue,
    /// Its ConsumeQueue offset (the first one for a batch).
    pub queue_offset: i64,
    /// The transaction id of a half message.
    pub transaction_id: Option<String>,
    /// The broker's region (`MSG_REGION`), `DefaultRegion` when not sent.
    pub region_id: String,
    /// Whether the broker has tracing on (`TRACE_ON` != "false").
    pub trace_on: bool,
}

/// `MixAll.DEFAULT_TRACE_REGION_ID`.
pub const DEFAULT_TRACE_REGION_ID: &str = "DefaultRegion";

/// Turns a send response from `broker_name` into a result or an error.
pub fn process_send_response(
    response: &RemotingCommand,
    topic: &str,
    broker_name: &str,
    msg_id: &str,
) -> Result<SendResult> {
    let code = response.response_code();
    let Some(status) = SendStatus::from_response_code(code) else {
        return Err(ClientError::broker("send", code, response.remark.clone()));
    };
    let header: SendMessageResponseHeader = response.decode_header().map_err(|e| {
        ClientError::new(ErrorKind::Protocol, "send", "bad SendMessageResponseHeader; the message is stored")
            .with_source(e)
    })?;
    let region_id = response
        .ext_fields
        .get(raftmq_common::protocol::header::send::MSG_REGION_KEY)
        .filter(|r| !r.is_empty())
        .map_or_else(|| DEFAULT_TRACE_REGION_ID.to_owned(), |r| r.to_string());
    let trace_on = response.ext_fields.get(raftmq_common::protocol::header::send::TRACE_ON_KEY).map(|v| v.as_str())
        != Some("false");
    Ok(SendResult {
        status,
        msg_id: msg_id.to_owned(),
        offset_msg_id: header.msg_id,
        message_queue: MessageQueue::new(topic, broker_name, header.queue_id),
        queue_offset: header.queue_offset,
        transaction_id: header.transaction_id,
        region_id,
        trace_on,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn response(code: ResponseCode) -> RemotingCommand {
        RemotingCommand::response(code, Some("r".to_owned())).with_header(&SendMessageResponseHeader {
            msg_id: "OFF".into(),
            queue_id: 3,
            queue_offset: 42,
            transaction_id: None,
        })
    }

    #[test]
    fn statuses_follow_process_send_response() {
        let table = [
            (ResponseCode::Success, Some(SendStatus::SendOk)),
            (ResponseCode::FlushDiskTimeout, Some(SendStatus::FlushDiskTimeout)),
            (ResponseCode::FlushSlaveTimeout, Some(SendStatus::FlushSlaveTimeout)),
            (ResponseCode::SlaveNotAvailable, Some(SendStatus::SlaveNotAvailable)),
            (ResponseCode::ServiceNotAvailable, None),
            (ResponseCode::MessageIllegal, None),
        ];
        for (code, want) in table {
            let got = process_send_response(&response(code), "T", "b", "U");
            match want {
                Some(status) => {
                    let r = got.unwrap();
                    assert_eq!(r.status, status);
                    assert_eq!((r.msg_id.as_str(), r.offset_msg_id.as_str(), r.queue_offset), ("U", "OFF", 42));
                    assert_eq!(r.message_queue, MessageQueue::new("T", "b", 3));
                    assert_eq!((r.region_id.as_str(), r.trace_on), (DEFAULT_TRACE_REGION_ID, true));
                }
                None => assert_eq!(got.unwrap_err().response_code(), Some(code)),
            }
        }
    }

    #[test]
    fn missing_header_fields_are_a_protocol_error() {
        let err = process_send_response(&RemotingCommand::success(), "T", "b", "U").unwrap_err();
        assert_eq!(err.kind, ErrorKind::Protocol);
    }
}
