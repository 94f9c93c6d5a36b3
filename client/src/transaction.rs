//! [`TransactionProducer`]: RocketMQ 4.x transactional messages, producer side
//! (`TransactionMQProducer`, `DefaultMQProducerImpl.sendMessageInTransaction` / `endTransaction` /
//! `checkTransactionState`, `ClientRemotingProcessor.checkTransactionState`).
//!
//! ```text
//! send_message_in_transaction(msg, arg)
//!   ├─ refuse DELAY; set TRAN_MSG=true, PGROUP=<group>
//!   ├─ synchronous send (usual retry loop); the producer adds sysFlag PREPARED (0x4) ──► broker stores a half
//!   ├─ SEND_OK ─► __transactionId__ := response transactionId (if any)
//!   │             listener.execute_local_transaction(&msg, arg)   (panic ⇒ Unknown)
//!   │  FLUSH_DISK_TIMEOUT / FLUSH_SLAVE_TIMEOUT / SLAVE_NOT_AVAILABLE ⇒ RollbackMessage, listener not run
//!   └─ END_TRANSACTION (37, oneway) ─► brokerId 0 of the group that took the half
//!        commitOrRollback 8 / 12 / 0, commitLogOffset from the offsetMsgId, tranStateTableOffset =
//!        queueOffset, msgId = UNIQ_KEY, fromTransactionCheck=false; a failure is logged, not returned
//!
//! broker ──CHECK_TRANSACTION_STATE (39, oneway; body = the half's CommitLog record)──► connection
//!   processor (on the read task): decode, PGROUP must be our group, try_send to a bounded queue
//!   (full ⇒ dropped with a warning; the broker checks again later) ─► never answers the frame
//!   check worker (one at a time): listener.check_local_transaction(&MessageExt) on a blocking thread
//!   (panic ⇒ Unknown) ─► END_TRANSACTION (oneway, fromTransactionCheck=true, offsets and transactionId
//!   copied from the check header) on the connection the check came on
//! ```
//!
//! Invariants:
//! - A half message is sent only through the synchronous path, so the END_TRANSACTION always names
//!   the group, queue offset and CommitLog offset of the half the broker acknowledged.
//! - The listener never runs on a connection's read task: a slow check cannot stall responses.
//! - At most [`CHECK_REQUEST_HOLD_MAX_DEFAULT_COUNT`] (configurable) checks wait; one runs at a time
//!   (Java: 1 thread, 2000 queued).
//! - A oneway CHECK_TRANSACTION_STATE is never answered with a response frame; the answer is a new
//!   oneway request.
//! - Network input never panics: a check with a bad header or body is logged and dropped.
//! - With `enable_msg_trace` on its producer, each END_TRANSACTION (after the local transaction, or
//!   answering a check) is traced as it is sent, without waiting on the trace dispatcher.
//!
//! Deviation: Java clears a `DELAY` level on a transactional message; this client refuses it (as
//! rocketmq-client-rust does), so a caller never gets an undelayed message it asked to delay.
//! The transaction id a listener sees is the message's `UNIQ_KEY` (Java's `msg.getTransactionId()`),
//! plus `__transactionId__` when the broker returned a transactionId.

use std::any::Any;
use std::net::SocketAddr;
use std::panic::AssertUnwindSafe;
use std::panic::catch_unwind;
use std::str::FromStr;
use std::sync::Arc;
use std::sync::Mutex;
use std::sync::Weak;
use std::time::Duration;

use bytes::Bytes;
use raftmq_common::limits::RPC_TIMEOUT_DEFAULT_MS;
use raftmq_common::message::Message;
use raftmq_common::message::MessageExt;
use raftmq_common::message::OffsetMsgId;
use raftmq_common::message::compress::uncompress_stored_body;
use raftmq_common::message::properties;
use raftmq_common::message::record::DecodeOptions;
use raftmq_common::message::record::decode_record_bytes;
use raftmq_common::message::sys_flag;
use raftmq_common::protocol::RemotingCommand;
use raftmq_common::protocol::RequestCode;
use raftmq_common::protocol::header::transaction::CheckTransactionStateRequestHeader;
use raftmq_common::protocol::header::transaction::EndTransactionRequestHeader;
use raftmq_common::protocol::header::transaction::commit_or_rollback;
use raftmq_common::remoting::Connection;
use raftmq_common::remoting::ConnectionContext;
use raftmq_common::remoting::ProcessorTable;
use raftmq_common::remoting::processor_fn;
use raftmq_common::sync::lock;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

use crate::error::ClientError;
use crate::error::ErrorKind;
use crate::error::Result;
use crate::producer::Producer;
use crate::producer::ProducerBuilder;
use crate::send_result::SendResult;
use crate::send_result::SendStatus;

/// `TransactionMQProducer.checkRequestHoldMax`: checks waiting for the listener before new ones are dropped.
pub const CHECK_REQUEST_HOLD_MAX_DEFAULT_COUNT: usize = 2_000;
/// Deadline of the END_TRANSACTION answering a check (Java hard-codes 3000 ms).
pub const CHECK_ANSWER_TIMEOUT_MS: u64 = RPC_TIMEOUT_DEFAULT_MS;
/// User property carrying the broker's transactionId (`sendMessageInTransaction`).
pub const TRANSACTION_ID_PROPERTY: &str = "__transactionId__";

/// What the local transaction decided (`LocalTransactionState`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum LocalTransactionState {
    /// Deliver the message.
    CommitMessage,
    /// Discard the message.
    RollbackMessage,
    /// Not decided yet: the broker will ask again (CHECK_TRANSACTION_STATE).
    Unknown,
}

impl LocalTransactionState {
    /// The END_TRANSACTION `commitOrRollback` value: 8, 12 or 0.
    pub fn commit_or_rollback(self) -> i32 {
        match self {
            LocalTransactionState::CommitMessage => commit_or_rollback::COMMIT_TYPE,
            LocalTransactionState::RollbackMessage => commit_or_rollback::ROLLBACK_TYPE,
            LocalTransactionState::Unknown => commit_or_rollback::NOT_TYPE,
        }
    }

    /// Java's constant name (`COMMIT_MESSAGE`, `ROLLBACK_MESSAGE`, `UNKNOW`).
    pub fn name(self) -> &'static str {
        match self {
            LocalTransactionState::CommitMessage => "COMMIT_MESSAGE",
            LocalTransactionState::RollbackMessage => "ROLLBACK_MESSAGE",
            LocalTransactionState::Unknown => "UNKNOW",
        }
    }
}

/// The application's side of a transaction (`TransactionListener`). Both methods are synchronous,
/// as in Java; a panic counts as [`LocalTransactionState::Unknown`].
pub trait TransactionListener: Send + Sync + 'static {
    /// Runs the local transaction for the half message `msg` just stored (`executeLocalTransaction`).
    /// Runs on the task that called [`TransactionProducer::send_message_in_transaction`], so it
    /// occupies that runtime worker while it runs: a local transaction that blocks for long (a
    /// database call) belongs in `tokio::task::block_in_place` or on a caller outside the runtime.
    /// `arg` is what that call was given.
    fn execute_local_transaction(&self, msg: &Message, arg: &(dyn Any + Send + Sync)) -> LocalTransactionState;

    /// Tells the broker's check what became of the transaction of `msg` (`checkLocalTransaction`).
    /// Runs on a blocking thread, one check at a time. `msg` is the half as stored, topic and queue
    /// restored; its transaction id is its `UNIQ_KEY` (`msg.msg_id()`).
    fn check_local_transaction(&self, msg: &MessageExt) -> LocalTransactionState;
}

/// The outcome of [`TransactionProducer::send_message_in_transaction`] (`TransactionSendResult`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TransactionSendResult {
    /// The half message's send result (msgId = UNIQ_KEY = transaction id).
    pub send_result: SendResult,
    /// What was reported in END_TRANSACTION.
    pub local_transaction_state: LocalTransactionState,
}

/// Builds a [`TransactionProducer`] from a [`ProducerBuilder`] (every producer option applies).
pub struct TransactionProducerBuilder {
    producer: ProducerBuilder,
    listener: Arc<dyn TransactionListener>,
    check_request_hold_max: usize,
}

impl std::fmt::Debug for TransactionProducerBuilder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TransactionProducerBuilder")
            .field("producer", &self.producer)
            .field("check_request_hold_max", &self.check_request_hold_max)
            .finish()
    }
}

impl TransactionProducerBuilder {
    /// Checks waiting for the listener beyond which new ones are dropped (`checkRequestHoldMax`, 2000).
    pub fn check_request_hold_max(mut self, count: usize) -> Self {
        self.check_request_hold_max = count;
        self
    }

    /// Builds the producer (not started); heartbeats are on, so brokers can send checks.
    pub fn build(self) -> Result<TransactionProducer> {
        if self.check_request_hold_max == 0 {
            return Err(ClientError::invalid_argument(
                "buildTransactionProducer",
                "checkRequestHoldMax must be positive",
            ));
        }
        let (checks, queue) = mpsc::channel(self.check_request_hold_max);
        let group = self.producer.group().to_owned();
        let mut table = ProcessorTable::new();
        table.register(
            RequestCode::CheckTransactionState,
            Arc::new(processor_fn(move |ctx, request| {
                accept_check(&ctx, &request, &group, &checks);
                // The check is oneway: nothing is ever written back for it.
                async { None }
            })),
        );
        let producer = self.producer.heartbeat(true).build_with_processors(table)?;
        let inner =
            TxInner { producer, listener: self.listener, queue: Mutex::new(Some(queue)), worker: Mutex::new(None) };
        Ok(TransactionProducer { inner: Arc::new(inner) })
    }
}

/// A producer of transactional messages (`TransactionMQProducer`); clones share everything.
#[derive(Clone)]
pub struct TransactionProducer {
    inner: Arc<TxInner>,
}

struct TxInner {
    producer: Producer,
    listener: Arc<dyn TransactionListener>,
    /// Taken by the check worker at start.
    queue: Mutex<Option<mpsc::Receiver<CheckRequest>>>,
    worker: Mutex<Option<JoinHandle<()>>>,
}

impl std::fmt::Debug for TransactionProducer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TransactionProducer").field("producer", &self.inner.producer).finish()
    }
}

/// A check accepted by the processor, waiting for the listener.
struct CheckRequest {
    header: CheckTransactionStateRequestHeader,
    msg: MessageExt,
    /// The connection the check came on: the answer goes back on it (Java: the channel's address).
    connection: Connection,
    peer: SocketAddr,
}

impl TransactionProducer {
    /// A builder for a transaction producer configured like `producer`, answering with `listener`.
    pub fn builder(producer: ProducerBuilder, listener: Arc<dyn TransactionListener>) -> TransactionProducerBuilder {
        TransactionProducerBuilder { producer, listener, check_request_hold_max: CHECK_REQUEST_HOLD_MAX_DEFAULT_COUNT }
    }

    /// The underlying producer: plain sends share its connections, routes and heartbeats.
    pub fn producer(&self) -> &Producer {
        &self.inner.producer
    }

    /// Starts the check worker, the route refresh and the heartbeats (`initTransactionEnv` + `start`).
    pub async fn start(&self) -> Result<()> {
        self.inner.producer.start().await?;
        if let Some(queue) = lock(&self.inner.queue).take() {
            let worker = tokio::spawn(run_check_worker(queue, Arc::downgrade(&self.inner)));
            *lock(&self.inner.worker) = Some(worker);
        }
        Ok(())
    }

    /// Stops the check worker (queued checks are dropped; the broker checks again) and the producer.
    pub async fn shutdown(&self) {
        if let Some(worker) = lock(&self.inner.worker).take() {
            worker.abort();
        }
        self.inner.producer.shutdown().await;
    }

    /// Sends `msg` as a half message, runs the local transaction and reports its outcome with a
    /// oneway END_TRANSACTION (`sendMessageInTransaction`). Fails only when the half was not
    /// stored (or its outcome is unknown); a failed END_TRANSACTION is logged, and the broker's
    /// check settles the transaction later.
    pub async fn send_message_in_transaction(
        &self,
        mut msg: Message,
        arg: &(dyn Any + Send + Sync),
    ) -> Result<TransactionSendResult> {
        let op = "sendMessageInTransaction";
        if msg.delay_time_level() != 0 {
            return Err(ClientError::invalid_argument(op, "a transactional message cannot be delayed (DELAY is set)")
                .with_context("topic", &msg.topic));
        }
        let producer = &self.inner.producer;
        msg.properties.insert(properties::TRAN_MSG, "true");
        msg.properties.insert(properties::PGROUP, producer.producer_group());
        let send_result = producer.send_in_place(&mut msg, op).await?;
        let (state, remark) = match send_result.status {
            SendStatus::SendOk => {
                if let Some(id) = send_result.transaction_id.as_deref().filter(|id| !id.is_empty()) {
                    msg.properties.insert(TRANSACTION_ID_PROPERTY, id);
                }
                let listener = &self.inner.listener;
                run_listener("executeLocalTransactionBranch", || listener.execute_local_transaction(&msg, arg))
            }
            // Stored, but not as durably as asked: Java rolls back without asking the application.
            SendStatus::FlushDiskTimeout | SendStatus::FlushSlaveTimeout | SendStatus::SlaveNotAvailable => {
                (LocalTransactionState::RollbackMessage, None)
            }
        };
        if state != LocalTransactionState::CommitMessage {
            tracing::info!(msg_id = %send_result.msg_id, state = state.name(), "local transaction not committed");
        }
        if let Err(e) = self.end_transaction(&msg, &send_result, state, remark).await {
            tracing::warn!(msg_id = %send_result.msg_id, state = state.name(), error = %e,
                "local transaction decided, but END_TRANSACTION failed; the broker will check back");
        }
        Ok(TransactionSendResult { send_result, local_transaction_state: state })
    }

    /// END_TRANSACTION for a half just sent, oneway to the brokerId 0 of the group that stored it.
    async fn end_transaction(
        &self,
        msg: &Message,
        sent: &SendResult,
        state: LocalTransactionState,
        remark: Option<String>,
    ) -> Result<()> {
        let op = "endTransaction";
        let producer = &self.inner.producer;
        // Java decodes the offsetMsgId, falling back to the msgId when the broker sent none.
        let id = if sent.offset_msg_id.is_empty() { &sent.msg_id } else { &sent.offset_msg_id };
        let commit_log_offset = OffsetMsgId::from_str(id)
            .map_err(|e| ClientError::new(ErrorKind::Protocol, op, "undecodable offsetMsgId").with_source(e))?
            .commit_log_offset;
        let broker_name = &sent.message_queue.broker_name;
        let addr = producer
            .routes()
            .broker_addr_in_publish(broker_name)
            .ok_or_else(|| ClientError::new(ErrorKind::NoRoute, op, format!("The broker[{broker_name}] not exist")))?;
        let header = EndTransactionRequestHeader {
            producer_group: producer.producer_group().to_owned(),
            tran_state_table_offset: sent.queue_offset,
            commit_log_offset,
            commit_or_rollback: state.commit_or_rollback(),
            from_transaction_check: Some(false),
            msg_id: sent.msg_id.clone(),
            transaction_id: sent.transaction_id.clone(),
            bname: Some(broker_name.clone()),
        };
        let transaction_id = sent.transaction_id.as_deref().unwrap_or_default();
        producer.trace_end_transaction(msg, &sent.msg_id, transaction_id, &addr, state.name(), false);
        let request = self.end_transaction_request(&header, remark);
        producer
            .remoting()
            .invoke_oneway(&addr, request, producer.send_timeout())
            .await
            .map_err(|e| ClientError::remoting(op, e).with_context("addr", &addr))
    }

    fn end_transaction_request(&self, header: &EndTransactionRequestHeader, remark: Option<String>) -> RemotingCommand {
        let mut request = RemotingCommand::request_with_header(RequestCode::EndTransaction, header).into_oneway();
        request.remark = remark;
        request.serialize_type = self.inner.producer.serialize_type();
        request
    }

    /// Answers one check (`checkTransactionState`'s runnable, after the listener).
    async fn answer_check(&self, check: CheckRequest, state: LocalTransactionState, remark: Option<String>) {
        let header = EndTransactionRequestHeader {
            producer_group: self.inner.producer.producer_group().to_owned(),
            tran_state_table_offset: check.header.tran_state_table_offset,
            commit_log_offset: check.header.commit_log_offset,
            commit_or_rollback: state.commit_or_rollback(),
            from_transaction_check: Some(true),
            msg_id: check.msg.msg_id(),
            transaction_id: check.header.transaction_id.clone(),
            bname: check.header.bname.clone(),
        };
        let transaction_id = header.transaction_id.as_deref().unwrap_or_default();
        let peer = check.peer.to_string();
        let producer = &self.inner.producer;
        producer.trace_end_transaction(&check.msg.message, &header.msg_id, transaction_id, &peer, state.name(), true);
        let request = self.end_transaction_request(&header, remark);
        let timeout = Duration::from_millis(CHECK_ANSWER_TIMEOUT_MS);
        let sent = if check.connection.is_closed() {
            // The broker is still at that address; Java looks the channel up by it too.
            let addr = check.peer.to_string();
            self.inner.producer.remoting().invoke_oneway(&addr, request, timeout).await
        } else {
            check.connection.invoke_oneway(request, timeout).await
        };
        match sent {
            Ok(()) => tracing::debug!(msg_id = %header.msg_id, state = state.name(), broker = %check.peer,
                "transaction check answered"),
            Err(e) => tracing::warn!(msg_id = %header.msg_id, state = state.name(), broker = %check.peer, error = %e,
                "END_TRANSACTION answering a check failed; the broker will check again"),
        }
    }
}

/// The processor's part of a check: decode, match the group, queue. Runs on the read task, so it
/// never blocks and never calls the listener.
fn accept_check(ctx: &ConnectionContext, request: &RemotingCommand, group: &str, checks: &mpsc::Sender<CheckRequest>) {
    let peer = ctx.peer_addr();
    let header = match request.decode_header::<CheckTransactionStateRequestHeader>() {
        Ok(h) => h,
        Err(e) => {
            tracing::warn!(broker = %peer, error = %e, "bad CHECK_TRANSACTION_STATE header; dropped");
            return;
        }
    };
    let msg = match decode_half(&request.body) {
        Ok(msg) => msg,
        Err(e) => {
            tracing::warn!(broker = %peer, error = %e, "bad CHECK_TRANSACTION_STATE body; dropped");
            return;
        }
    };
    match msg.message.property(properties::PGROUP) {
        Some(g) if g == group => {}
        other => {
            tracing::warn!(broker = %peer, group = ?other, msg_id = %msg.msg_id(),
                "checkTransactionState, pick producer by group failed; dropped");
            return;
        }
    }
    let check = CheckRequest { header, msg, connection: ctx.connection().clone(), peer };
    match checks.try_send(check) {
        Ok(()) => {}
        Err(mpsc::error::TrySendError::Full(check)) => tracing::warn!(broker = %peer, msg_id = %check.msg.msg_id(),
            "too many transaction checks waiting; dropped (the broker checks again)"),
        Err(mpsc::error::TrySendError::Closed(_)) => {
            tracing::debug!(broker = %peer, "transaction check after shutdown; dropped")
        }
    }
}

/// The half message of a check body: exactly one CommitLog record, its body decompressed as
/// `execute_local_transaction` saw it (Java decodes with `deCompressBody=true`).
fn decode_half(body: &Bytes) -> std::result::Result<MessageExt, String> {
    let (mut msg, _len) = decode_record_bytes(body, DecodeOptions::default()).map_err(|e| e.to_string())?;
    if sys_flag::is_compressed(msg.sys_flag) {
        msg.message.body = uncompress_stored_body(msg.sys_flag, &msg.message.body).map_err(|e| e.to_string())?;
        msg.sys_flag = sys_flag::clear_compressed(msg.sys_flag);
    }
    Ok(msg)
}

/// Runs checks one at a time until the producer is gone or shut down.
async fn run_check_worker(mut queue: mpsc::Receiver<CheckRequest>, producer: Weak<TxInner>) {
    while let Some(check) = queue.recv().await {
        let Some(inner) = producer.upgrade() else { return };
        let listener = inner.listener.clone();
        let msg = check.msg.clone();
        // A blocking thread: the listener may do I/O of its own, and must not stall a runtime worker.
        let decided = tokio::task::spawn_blocking(move || {
            run_listener("checkLocalTransactionState", || listener.check_local_transaction(&msg))
        })
        .await;
        let (state, remark) = decided.unwrap_or_else(|e| {
            (LocalTransactionState::Unknown, Some(format!("checkLocalTransactionState task ended: {e}")))
        });
        TransactionProducer { inner }.answer_check(check, state, remark).await;
    }
}

/// Calls the listener; a panic is [`LocalTransactionState::Unknown`] with Java's remark.
fn run_listener(what: &str, call: impl FnOnce() -> LocalTransactionState) -> (LocalTransactionState, Option<String>) {
    // The listener's state is the application's; nothing of ours is observed after a panic.
    match catch_unwind(AssertUnwindSafe(call)) {
        Ok(state) => (state, None),
        Err(panic) => {
            let text = panic
                .downcast_ref::<&str>()
                .map(|s| (*s).to_owned())
                .or_else(|| panic.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "panic".to_owned());
            tracing::warn!(listener = what, panic = %text, "transaction listener panicked; state UNKNOW");
            (LocalTransactionState::Unknown, Some(format!("{what} exception: {text}")))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn states_map_to_commit_or_rollback_values() {
        assert_eq!(LocalTransactionState::CommitMessage.commit_or_rollback(), 8);
        assert_eq!(LocalTransactionState::RollbackMessage.commit_or_rollback(), 12);
        assert_eq!(LocalTransactionState::Unknown.commit_or_rollback(), 0);
        assert_eq!(LocalTransactionState::Unknown.name(), "UNKNOW");
    }

    #[test]
    fn a_panicking_listener_is_unknown_with_a_remark() {
        let (state, remark) = run_listener("executeLocalTransactionBranch", || panic!("db down"));
        assert_eq!(state, LocalTransactionState::Unknown);
        assert_eq!(remark.as_deref(), Some("executeLocalTransactionBranch exception: db down"));
        assert_eq!(
            run_listener("x", || LocalTransactionState::CommitMessage),
            (LocalTransactionState::CommitMessage, None)
        );
    }

    #[test]
    fn bad_check_bodies_are_errors_not_panics() {
        assert!(decode_half(&Bytes::new()).is_err());
        assert!(decode_half(&Bytes::from_static(&[0, 0, 0, 9, 1, 2, 3, 4, 5])).is_err());
    }

    #[test]
    fn a_compressed_half_reaches_the_check_listener_decompressed() {
        use bytes::BytesMut;
        use raftmq_common::message::compress::compress_body;
        use raftmq_common::message::record::encode_record_into;
        let plain = Bytes::from(vec![b'x'; 8192]);
        let compressed = compress_body(&plain);
        let mut half = MessageExt {
            message: Message::new("T", compressed),
            sys_flag: sys_flag::COMPRESSED | sys_flag::COMPRESSION_ZLIB_TYPE,
            ..MessageExt::default()
        };
        half.message.properties.insert(properties::PGROUP, "g");
        let mut out = BytesMut::new();
        encode_record_into(&half, &mut out).expect("encodes");
        let decoded = decode_half(&out.freeze()).expect("decodes");
        assert_eq!(decoded.message.body, plain);
        assert!(!sys_flag::is_compressed(decoded.sys_flag));
    }
}
