//! Transactions over gRPC: the transaction id a half's SendResultEntry carries, and the
//! END_TRANSACTION an EndTransactionRequest becomes. Pure.
//!
//! The id is opaque to clients and holds what END_TRANSACTION needs: `<offsetMsgId>:<queueOffset>`
//! of the half (the offsetMsgId names its CommitLog offset, identical on every replica; the queue
//! offset is its place in the half queue), so any replica can end it with no per-client state.
//! gRPC producers have no producer group; halves are stored with [`producer_group_of`] their topic,
//! which END_TRANSACTION checks against the half's PGROUP.

use raftmq_common::message::msg_id::OffsetMsgId;
use raftmq_common::protocol::RemotingCommand;
use raftmq_common::protocol::RequestCode;
use raftmq_common::protocol::header::transaction::EndTransactionRequestHeader;
use raftmq_common::protocol::header::transaction::commit_or_rollback;

use crate::pb::Code;
use crate::pb::EndTransactionRequest;
use crate::pb::Status;
use crate::pb::TransactionResolution;
use crate::pb::TransactionSource;
use crate::status::status;

/// Prefix of the producer group of a gRPC producer's half messages (followed by the topic).
pub const GRPC_PRODUCER_GROUP_PREFIX: &str = "GRPC_PRODUCER_";

/// The producer group a gRPC half message of `topic` is stored with.
pub fn producer_group_of(topic: &str) -> String {
    format!("{GRPC_PRODUCER_GROUP_PREFIX}{topic}")
}

/// The transaction id of a half stored at `offset_msg_id`, `queue_offset` of the half queue.
pub fn transaction_id(offset_msg_id: &str, queue_offset: i64) -> String {
    format!("{offset_msg_id}:{queue_offset}")
}

/// The half's CommitLog offset and half-queue offset named by a transaction id.
pub fn parse_transaction_id(id: &str) -> Result<(i64, i64), Status> {
    let invalid =
        || status(Code::InvalidTransactionId, format!("transaction id {id:?} was not issued by this cluster"));
    let (msg_id, queue_offset) = id.rsplit_once(':').ok_or_else(invalid)?;
    let at: OffsetMsgId = msg_id.parse().map_err(|_| invalid())?;
    let queue_offset: i64 = queue_offset.parse().map_err(|_| invalid())?;
    if at.commit_log_offset < 0 || queue_offset < 0 {
        return Err(invalid());
    }
    Ok((at.commit_log_offset, queue_offset))
}

/// The END_TRANSACTION request an EndTransactionRequest becomes.
pub fn end_transaction_command(request: &EndTransactionRequest) -> Result<RemotingCommand, Status> {
    let topic = request.topic.as_ref().map(|t| t.name.as_str()).unwrap_or_default();
    if topic.is_empty() {
        return Err(status(Code::IllegalTopic, "the topic is missing"));
    }
    if request.message_id.is_empty() {
        return Err(status(Code::IllegalMessageId, "the message id is missing"));
    }
    let (commit_log_offset, tran_state_table_offset) = parse_transaction_id(&request.transaction_id)?;
    let commit_or_rollback = match TransactionResolution::try_from(request.resolution) {
        Ok(TransactionResolution::Commit) => commit_or_rollback::COMMIT_TYPE,
        Ok(TransactionResolution::Rollback) => commit_or_rollback::ROLLBACK_TYPE,
        _ => return Err(status(Code::BadRequest, "the resolution must be COMMIT or ROLLBACK")),
    };
    let header = EndTransactionRequestHeader {
        producer_group: producer_group_of(topic),
        tran_state_table_offset,
        commit_log_offset,
        commit_or_rollback,
        from_transaction_check: Some(request.source == TransactionSource::SourceServerCheck as i32),
        msg_id: request.message_id.clone(),
        transaction_id: Some(request.transaction_id.clone()),
        bname: None,
    };
    Ok(RemotingCommand::request_with_header(RequestCode::EndTransaction, &header))
}

#[cfg(test)]
mod tests {
    use std::net::SocketAddr;

    use super::*;
    use crate::pb::Resource;

    #[test]
    fn a_transaction_id_names_the_half_and_nothing_else_passes() {
        let at = OffsetMsgId::new(SocketAddr::from(([127, 0, 0, 1], 10911)), 4_096).to_string();
        let id = transaction_id(&at, 7);
        assert_eq!(parse_transaction_id(&id).unwrap(), (4_096, 7));
        for bad in ["", "x", "abc:1", &format!("{at}:x"), &format!("{at}:-1"), "7"] {
            assert_eq!(parse_transaction_id(bad).unwrap_err().code, Code::InvalidTransactionId as i32, "{bad}");
        }
    }

    #[test]
    fn end_transaction_carries_the_halfs_offsets_group_and_resolution() {
        let at = OffsetMsgId::new(SocketAddr::from(([127, 0, 0, 1], 10911)), 512).to_string();
        let mut request = EndTransactionRequest {
            topic: Some(Resource { resource_namespace: String::new(), name: "t".into() }),
            message_id: "01AB".into(),
            transaction_id: transaction_id(&at, 3),
            resolution: TransactionResolution::Rollback as i32,
            source: TransactionSource::SourceClient as i32,
            trace_context: String::new(),
        };
        let command = end_transaction_command(&request).unwrap();
        let h: EndTransactionRequestHeader = command.decode_header().unwrap();
        assert_eq!((h.commit_log_offset, h.tran_state_table_offset), (512, 3));
        assert_eq!(h.commit_or_rollback, commit_or_rollback::ROLLBACK_TYPE);
        assert_eq!(h.producer_group, "GRPC_PRODUCER_t");
        assert_eq!(h.from_transaction_check, Some(false));
        request.resolution = TransactionResolution::Unspecified as i32;
        assert_eq!(end_transaction_command(&request).unwrap_err().code, Code::BadRequest as i32);
        request.resolution = TransactionResolution::Commit as i32;
        request.topic = None;
        assert_eq!(end_transaction_command(&request).unwrap_err().code, Code::IllegalTopic as i32);
    }
}
