//! `refuse`: the response frame of a refused request, a response code with its remark. Every
//! processor answers a refusal this way, so a client reads the same shape whatever refused it.

use raftmq_common::protocol::RemotingCommand;
use raftmq_common::protocol::ResponseCode;

/// A response with `code` and `remark`.
pub fn refuse(code: ResponseCode, remark: impl Into<String>) -> RemotingCommand {
    RemotingCommand::response(code, Some(remark.into()))
}
