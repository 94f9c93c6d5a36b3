//! Reading an answer: SUCCESS or a [`ClientError`] carrying the code and remark, JSON bodies and
//! headers, and message records (bodies decompressed as a consumer sees them).

use bytes::Bytes;
use raftmq_common::message::MessageExt;
use raftmq_common::message::compress::uncompress_stored_body;
use raftmq_common::message::record::DecodeOptions;
use raftmq_common::message::record::decode_all;
use raftmq_common::message::sys_flag;
use raftmq_common::protocol::RemotingCommand;
use raftmq_common::protocol::ResponseCode;
use raftmq_common::protocol::body::JsonBody;
use raftmq_common::protocol::header::CommandHeader;

use crate::error::ClientError;
use crate::error::ErrorKind;
use crate::error::Result;

/// Records of a QUERY_MESSAGE / VIEW_MESSAGE_BY_ID answer, bodies decompressed as a consumer sees them.
pub(super) fn decode_messages(op: &'static str, body: &Bytes) -> Result<Vec<MessageExt>> {
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

pub(super) fn success(op: &'static str, response: RemotingCommand) -> Result<RemotingCommand> {
    match response.response_code() {
        ResponseCode::Success => Ok(response),
        code => Err(ClientError::broker(op, code, response.remark)),
    }
}

pub(super) fn decode_body<T: JsonBody>(op: &'static str, response: &RemotingCommand) -> Result<T> {
    T::decode(&response.body)
        .map_err(|e| ClientError::new(ErrorKind::Protocol, op, format!("bad {} body", T::NAME)).with_source(e))
}

pub(super) fn decode_header<H: CommandHeader>(op: &'static str, response: &RemotingCommand) -> Result<H> {
    response
        .decode_header()
        .map_err(|e| ClientError::new(ErrorKind::Protocol, op, "bad response header").with_source(e))
}
