//! Headers of END_TRANSACTION (37, producer → broker, oneway) and CHECK_TRANSACTION_STATE (39, broker →
//! producer, oneway), RESUME_CHECK_HALF_MESSAGE (323), plus the `commitOrRollback` values.
//!
//! `commitLogOffset` is the half message's CommitLog physical offset (decoded by the client from the
//! offsetMsgId); `tranStateTableOffset` is its queue offset in `RMQ_SYS_TRANS_HALF_TOPIC`.

use super::ext_header::ext_header;

/// `commitOrRollback` values: the transaction bits of the message sysFlag (`MessageSysFlag`).
pub mod commit_or_rollback {
    /// Unknown state: the producer could not decide; the broker checks back later.
    pub const NOT_TYPE: i32 = 0;
    /// Half message (never sent in END_TRANSACTION; listed for completeness).
    pub const PREPARED_TYPE: i32 = 0x4;
    /// Commit the half message.
    pub const COMMIT_TYPE: i32 = 0x8;
    /// Roll the half message back.
    pub const ROLLBACK_TYPE: i32 = 0xC;
}

ext_header! {
    /// END_TRANSACTION (37) request.
    pub struct EndTransactionRequestHeader {
        /// Producer group.
        required producer_group: String => "producerGroup",
        /// Queue offset of the half message.
        required tran_state_table_offset: i64 => "tranStateTableOffset",
        /// CommitLog offset of the half message.
        required commit_log_offset: i64 => "commitLogOffset",
        /// One of [`commit_or_rollback`].
        required commit_or_rollback: i32 => "commitOrRollback",
        /// This answers a CHECK_TRANSACTION_STATE; Java sends `false` when unset.
        optional from_transaction_check: Option<bool> => "fromTransactionCheck",
        /// The half message's client msgId (`UNIQ_KEY`).
        required msg_id: String => "msgId",
        /// Transaction id.
        optional transaction_id: Option<String> => "transactionId",
        /// Target broker name (`RpcRequestHeader.bname`).
        optional bname: Option<String> => "bname",
    }
}

ext_header! {
    /// CHECK_TRANSACTION_STATE (39) request, broker → producer; the body is the half message record.
    pub struct CheckTransactionStateRequestHeader {
        /// Queue offset of the half message.
        required tran_state_table_offset: i64 => "tranStateTableOffset",
        /// CommitLog offset of the half message.
        required commit_log_offset: i64 => "commitLogOffset",
        /// The half message's client msgId (`UNIQ_KEY`).
        optional msg_id: Option<String> => "msgId",
        /// Transaction id.
        optional transaction_id: Option<String> => "transactionId",
        /// The half message's offsetMsgId.
        optional offset_msg_id: Option<String> => "offsetMsgId",
        /// Target broker name (`RpcRequestHeader.bname`).
        optional bname: Option<String> => "bname",
    }
}

ext_header! {
    /// Legacy `CheckTransactionStateResponseHeader` (unused by 4.x clients, which answer with
    /// END_TRANSACTION); kept so every Java header has a counterpart.
    pub struct CheckTransactionStateResponseHeader {
        /// Producer group.
        required producer_group: String => "producerGroup",
        /// Queue offset of the half message.
        required tran_state_table_offset: i64 => "tranStateTableOffset",
        /// CommitLog offset of the half message.
        required commit_log_offset: i64 => "commitLogOffset",
        /// One of [`commit_or_rollback`].
        required commit_or_rollback: i32 => "commitOrRollback",
    }
}

ext_header! {
    /// RESUME_CHECK_HALF_MESSAGE (323) request: check a half message again now.
    pub struct ResumeCheckHalfMessageRequestHeader {
        /// The half message's msgId.
        optional msg_id: Option<String> => "msgId",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::header::ext_header::testing::check_header;

    #[test]
    fn transaction_headers_satisfy_header_properties() {
        check_header::<EndTransactionRequestHeader>();
        check_header::<CheckTransactionStateRequestHeader>();
        check_header::<CheckTransactionStateResponseHeader>();
        check_header::<ResumeCheckHalfMessageRequestHeader>();
    }
}
