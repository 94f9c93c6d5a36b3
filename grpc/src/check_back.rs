//! Transaction check-back of a gRPC producer: the broker's check service asks a
//! [`TransactionChecker`]; this one queues a `RecoverOrphanedTransactionCommand` on the producer's
//! Telemetry stream (as RocketMQ proxy's `GrpcClientChannel.checkTransactionState`), and the client
//! answers with EndTransaction, source SERVER_CHECK, carrying the transaction id given here.
//!
//! The transaction id names the check copy (its offsetMsgId and half-queue offset, see
//! [`crate::transaction`]), exactly what CHECK_TRANSACTION_STATE gives a remoting producer to end.

use raftmq_broker::services::transaction_checker::CheckRequest;
use raftmq_broker::services::transaction_checker::TransactionChecker;
use tokio::sync::mpsc;

use crate::message::pb_message;
use crate::pb::RecoverOrphanedTransactionCommand;
use crate::pb::TelemetryCommand;
use crate::pb::telemetry_command::Command;
use crate::transaction::transaction_id;

/// What a Telemetry stream's writer takes.
pub type Outbox = mpsc::Sender<Result<TelemetryCommand, tonic::Status>>;

/// The command that asks the producer about the half in `request`. Pure.
pub fn recover_command(request: &CheckRequest) -> TelemetryCommand {
    let offset_msg_id =
        request.header.offset_msg_id.clone().unwrap_or_else(|| request.message.offset_msg_id().to_string());
    TelemetryCommand {
        status: None,
        command: Some(Command::RecoverOrphanedTransactionCommand(RecoverOrphanedTransactionCommand {
            message: Some(pb_message(&request.message, None)),
            transaction_id: transaction_id(&offset_msg_id, request.header.tran_state_table_offset),
        })),
    }
}

/// A producer's Telemetry stream as the broker's check service sees it.
#[derive(Debug)]
pub struct TelemetryChecker {
    outbox: Outbox,
}

impl TelemetryChecker {
    /// Checks written to `outbox`.
    pub fn new(outbox: Outbox) -> Self {
        TelemetryChecker { outbox }
    }
}

impl TransactionChecker for TelemetryChecker {
    fn check(&self, request: CheckRequest) -> bool {
        self.outbox.try_send(Ok(recover_command(&request))).is_ok()
    }

    fn is_open(&self) -> bool {
        !self.outbox.is_closed()
    }
}

#[cfg(test)]
mod tests {
    use raftmq_common::message::MessageExt;
    use raftmq_common::message::msg_id::OffsetMsgId;
    use raftmq_common::protocol::header::transaction::CheckTransactionStateRequestHeader;

    use super::*;
    use crate::transaction::parse_transaction_id;

    fn request() -> CheckRequest {
        let mut message = MessageExt {
            message: raftmq_common::message::Message::new("T", &b"half"[..]),
            store_host: "127.0.0.1:10911".parse().unwrap(),
            commit_log_offset: 8_192,
            queue_offset: 5,
            ..MessageExt::default()
        };
        message.message.set_uniq_key("01HALF");
        let at = OffsetMsgId::new(message.store_host, 8_192).to_string();
        let header = CheckTransactionStateRequestHeader {
            tran_state_table_offset: 5,
            commit_log_offset: 8_192,
            msg_id: Some("01HALF".into()),
            transaction_id: Some("01HALF".into()),
            offset_msg_id: Some(at),
            bname: Some("b".into()),
        };
        CheckRequest { header, message }
    }

    #[test]
    fn a_check_names_the_copy_and_carries_the_message_as_sent() {
        let command = recover_command(&request());
        let Some(Command::RecoverOrphanedTransactionCommand(c)) = command.command else {
            panic!("not a recover command")
        };
        assert_eq!(parse_transaction_id(&c.transaction_id).unwrap(), (8_192, 5), "EndTransaction ends the copy");
        let m = c.message.unwrap();
        assert_eq!((m.topic.unwrap().name.as_str(), m.body.as_slice()), ("T", &b"half"[..]));
        assert_eq!(m.system_properties.unwrap().message_id, "01HALF");
    }

    #[test]
    fn a_checker_queues_until_its_stream_is_gone() {
        let (tx, mut rx) = mpsc::channel(1);
        let checker = TelemetryChecker::new(tx);
        assert!(checker.is_open());
        assert!(checker.check(request()));
        assert!(!checker.check(request()), "a full outbox refuses; the half is checked again later");
        assert!(rx.try_recv().is_ok());
        drop(rx);
        assert!(!checker.is_open() && !checker.check(request()));
    }
}
