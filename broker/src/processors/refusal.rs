//! `refuse`: the response frame of a refused request, a response code with its remark, and
//! [`header`], the refusal of a header that does not decode. Every processor answers a refusal
//! this way, so a client reads the same shape whatever refused it.

use raftmq_common::protocol::RemotingCommand;
use raftmq_common::protocol::ResponseCode;
use raftmq_common::protocol::header::CommandHeader;

/// A response with `code` and `remark`.
pub fn refuse(code: ResponseCode, remark: impl Into<String>) -> RemotingCommand {
    RemotingCommand::response(code, Some(remark.into()))
}

/// The request's header, or SYSTEM_ERROR saying why it does not decode.
pub fn header<H: CommandHeader>(request: &RemotingCommand) -> Result<H, RemotingCommand> {
    request
        .decode_header()
        .map_err(|e| refuse(ResponseCode::SystemError, format!("the request header is invalid: {e}")))
}
