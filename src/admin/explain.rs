//! The error a command reports: a broker that lacks a request (REQUEST_CODE_NOT_SUPPORTED) gets one
//! clear sentence naming the command and the request code; any other error keeps the SDK's, with
//! the command's name as context.

use anyhow::anyhow;
use raftmq_client::ClientError;
use raftmq_common::protocol::RequestCode;
use raftmq_common::protocol::ResponseCode;

/// Whether the broker refused the request because it does not implement it.
pub(super) fn not_supported(e: &ClientError) -> bool {
    e.response_code() == Some(ResponseCode::RequestCodeNotSupported)
}

/// The error a command reports: a clear sentence when the broker lacks the request, else the SDK's.
pub(super) fn explain(command: &str, request: RequestCode, e: ClientError) -> anyhow::Error {
    if not_supported(&e) {
        anyhow!("{command}: the broker does not support {} yet", request.name())
    } else {
        anyhow::Error::new(e).context(command.to_owned())
    }
}
