//! The transactional workload: transaction producers (`t<i>.<incarnation>`), the listener's rule
//! that decides each value's transaction, and the wait for the brokers' check-back service to
//! settle every half before the final drain.
//!
//! ```text
//! t<i>: invoke ─▶ send_message_in_transaction(value) ─▶ half stored ─▶ listener.execute(value)
//!         ─▶ END_TRANSACTION (oneway) ─▶ record: commit intent ok (queue, no offset) │ rollback intent fail
//!       (send error: fail / info exactly as a plain send; info retires the process)
//! broker check-back (every TRANSACTION_CHECK_INTERVAL_MS, halves older than TRANSACTION_TIME_OUT_MS)
//!         ─▶ listener.check(value) ─▶ END_TRANSACTION
//! after heal + quiet: settle() polls every group leader until the check progress of
//!   CID_RMQ_SYS_TRANS reaches the half queue's max offset twice, one check interval apart;
//!   only then do the tx producers stop answering checks
//! ```
//!
//! Invariants:
//! - The decision is a pure function of the value ([`TxIntent::of_value`]): counter % 4 = 0 commit,
//!   1 rollback, 2 unknown then commit on check, 3 unknown then rollback on check. Execute, check and
//!   the checkers therefore agree on every value without sharing state.
//! - A committed transaction is recorded `ok` and must show up in the final read (`lost`); a
//!   rolled-back one is recorded `fail` and must never be read (`unexpected`'s `aborted_reads`,
//!   which also covers rollback values whose send ended `info`: no path makes them visible).
//! - An `ok` carries the real queue but no offset: the SendResult's queue offset is the half's
//!   offset in `RMQ_SYS_TRANS_HALF_TOPIC`, and recorded against the real queue it would collide
//!   with real messages in `offsets` and order nothing in `reorder` (a check-committed value lands
//!   after later sends anyway). `reorder` skips sends without an offset.
//! - Delivery of a committed transaction is at least once (docs/broker.md#transactional-messages:
//!   a late END_TRANSACTION and a check answer are two commits), so `duplicated` allows store
//!   duplicates of transactional values.
//! - A send status other than SEND_OK makes the SDK roll back without asking the listener; a lost
//!   END_TRANSACTION would then be checked, and the check answers by the value, so a commit-intent
//!   value is then recorded `info` (unknown), never `ok` or `fail`.

use std::sync::Arc;
use std::time::Duration;

use raftmq_client::ClientError;
use raftmq_client::Producer;
use raftmq_client::SendStatus;
use raftmq_client::transaction::LocalTransactionState;
use raftmq_client::transaction::TransactionListener;
use raftmq_client::transaction::TransactionProducer;
use raftmq_client::transaction::TransactionSendResult;
use raftmq_common::message::Message;
use raftmq_common::message::MessageExt;
use raftmq_common::message::validate::RMQ_SYS_TRANS_HALF_TOPIC;
use raftmq_common::protocol::body::consumer_offset::ConsumerOffsetSerializeWrapper;
use tokio::sync::watch;
use tokio::task::JoinSet;
use tokio::time::Instant;

pub use crate::cluster::TRANSACTION_CHECK_INTERVAL_MS;
pub use crate::cluster::TRANSACTION_TIME_OUT_MS;
use crate::db::Db;
use crate::history::Op;
use crate::history::OpF;
use crate::history::OpType;
use crate::history::Recorder;
use crate::workload::SEND_TIMEOUT_MS;
use crate::workload::WorkloadConfig;
use crate::workload::send_definitely_failed;
use crate::workload::settle_twice;

/// The transaction producers' group.
pub const TX_PRODUCER_GROUP: &str = "jepsen_tx_producers";
/// How long the final wait for the check-back service may take.
pub const TX_SETTLE_TIMEOUT_MS: u64 = 60_000;
/// Period of the final wait's look at each leader's check progress.
pub const TX_SETTLE_POLL_MS: u64 = 200;
/// The check-back service's consumer group (RocketMQ's `CID_RMQ_SYS_TRANS`): its offset on the
/// half queue is the check progress.
pub const CHECK_PROGRESS_GROUP: &str = "CID_RMQ_SYS_TRANS";
/// The value of the final wait's history record.
pub const SETTLE_LABEL: &str = "transaction checks settle";

/// What happens to one value's transaction, from its counter.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TxIntent {
    /// Executed as commit.
    Commit,
    /// Executed as rollback.
    Rollback,
    /// Executed as unknown; the check answers commit.
    UnknownThenCommit,
    /// Executed as unknown; the check answers rollback.
    UnknownThenRollback,
}

impl TxIntent {
    /// The intent of a transaction producer's value `t<i>.<incarnation>-<counter>`; `None` for any
    /// other value (plain producers' values included).
    pub fn of_value(value: &str) -> Option<TxIntent> {
        let (process, counter) = value.rsplit_once('-')?;
        let (i, incarnation) = process.strip_prefix('t')?.split_once('.')?;
        let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
        if !digits(i) || !digits(incarnation) || !digits(counter) {
            return None;
        }
        let counter: u64 = counter.parse().ok()?;
        Some(match counter % 4 {
            0 => TxIntent::Commit,
            1 => TxIntent::Rollback,
            2 => TxIntent::UnknownThenCommit,
            _ => TxIntent::UnknownThenRollback,
        })
    }

    /// What `execute_local_transaction` answers.
    pub fn execute(self) -> LocalTransactionState {
        match self {
            TxIntent::Commit => LocalTransactionState::CommitMessage,
            TxIntent::Rollback => LocalTransactionState::RollbackMessage,
            TxIntent::UnknownThenCommit | TxIntent::UnknownThenRollback => LocalTransactionState::Unknown,
        }
    }

    /// What `check_local_transaction` answers: the final decision.
    pub fn check(self) -> LocalTransactionState {
        if self.commits() { LocalTransactionState::CommitMessage } else { LocalTransactionState::RollbackMessage }
    }

    /// Whether the transaction finally commits.
    pub fn commits(self) -> bool {
        matches!(self, TxIntent::Commit | TxIntent::UnknownThenCommit)
    }

    /// Whether the commit comes from a check answer (the half stays unknown until then).
    pub fn via_check(self) -> bool {
        matches!(self, TxIntent::UnknownThenCommit | TxIntent::UnknownThenRollback)
    }
}

/// The listener: decides by the value alone. A body that is not one of ours is rolled back (it
/// can only be a corrupted half; committing it would invent a value).
#[derive(Debug, Default)]
pub struct JepsenTxListener;

fn intent_of_body(body: &[u8]) -> Option<TxIntent> {
    std::str::from_utf8(body).ok().and_then(TxIntent::of_value)
}

impl TransactionListener for JepsenTxListener {
    fn execute_local_transaction(
        &self,
        msg: &Message,
        _arg: &(dyn std::any::Any + Send + Sync),
    ) -> LocalTransactionState {
        intent_of_body(&msg.body).map_or(LocalTransactionState::RollbackMessage, TxIntent::execute)
    }

    fn check_local_transaction(&self, msg: &MessageExt) -> LocalTransactionState {
        intent_of_body(&msg.message.body).map_or(LocalTransactionState::RollbackMessage, TxIntent::check)
    }
}

fn tx_producer_of(namesrv: &str, instance: &str) -> Result<TransactionProducer, ClientError> {
    let builder = Producer::builder(TX_PRODUCER_GROUP)
        .namesrv_addr(namesrv)
        .instance_name(instance)
        .send_timeout(Duration::from_millis(SEND_TIMEOUT_MS))
        // One attempt per op, as the plain producers: a retry could store a half twice.
        .retry_times_when_send_failed(0)
        .retry_times_when_send_async_failed(0);
    TransactionProducer::builder(builder, Arc::new(JepsenTxListener)).build()
}

/// The completion of one transactional send; false when the outcome is unknown (the process retires).
pub fn record_tx_send(
    rec: &Recorder,
    process: &str,
    value: &str,
    result: &Result<TransactionSendResult, ClientError>,
) -> bool {
    let r = match result {
        Ok(r) => r,
        Err(e) if send_definitely_failed(e) => {
            rec.record(Op::new(OpType::Fail, OpF::Send, process).value(value).error(e.to_string()));
            return true;
        }
        Err(e) => {
            rec.record(Op::new(OpType::Info, OpF::Send, process).value(value).error(e.to_string()));
            return false;
        }
    };
    let Some(intent) = TxIntent::of_value(value) else {
        // Not one of ours: nothing decides it, so nothing is promised.
        rec.record(Op::new(OpType::Info, OpF::Send, process).value(value).error("not a transactional value"));
        return false;
    };
    let q = format!("{}:{}", r.send_result.message_queue.broker_name, r.send_result.message_queue.queue_id);
    let state = r.local_transaction_state;
    let ended_by_listener = r.send_result.status == SendStatus::SendOk;
    if !ended_by_listener && intent.commits() {
        // The SDK rolled back on its own; a check (if that END is lost) would answer commit.
        let why = format!("{:?}: rolled back by the SDK, a check may still commit it", r.send_result.status);
        rec.record(Op::new(OpType::Info, OpF::Send, process).value(value).queue(q).error(why));
        return false;
    }
    let commits = match state {
        LocalTransactionState::CommitMessage => true,
        LocalTransactionState::RollbackMessage => false,
        LocalTransactionState::Unknown => intent.commits(),
    };
    if commits {
        rec.record(Op::new(OpType::Ok, OpF::Send, process).value(value).queue(q));
    } else {
        let why = format!("transaction rolled back ({})", state.name());
        rec.record(Op::new(OpType::Fail, OpF::Send, process).value(value).queue(q).error(why));
    }
    true
}

async fn tx_producer(
    i: usize,
    namesrv: String,
    topic: String,
    rec: Recorder,
    stop: watch::Receiver<bool>,
    mut keep_alive: watch::Receiver<bool>,
) {
    let p = match tx_producer_of(&namesrv, &format!("t{i}")) {
        Ok(p) => p,
        Err(e) => {
            tracing::warn!(producer = i, error = %e, "transaction producer not built");
            return;
        }
    };
    if let Err(e) = p.start().await {
        tracing::warn!(producer = i, error = %e, "transaction producer did not start");
        return;
    }
    let (mut incarnation, mut counter) = (0u32, 0u64);
    while !*stop.borrow() {
        let process = format!("t{i}.{incarnation}");
        let value = format!("{process}-{counter}");
        counter += 1;
        rec.record(Op::new(OpType::Invoke, OpF::Send, &process).value(&value));
        let result = p.send_message_in_transaction(Message::new(topic.clone(), value.clone()), &()).await;
        if !record_tx_send(&rec, &process, &value, &result) {
            incarnation += 1;
            counter = 0;
        }
    }
    // The brokers' checks of unknown halves still need answers: stay up until the final wait is over.
    while !*keep_alive.borrow() {
        if keep_alive.changed().await.is_err() {
            break;
        }
    }
    p.shutdown().await;
}

/// Starts `cfg.tx_producers` transaction producers: they send until `stop`, then answer checks
/// until `done` turns true.
pub fn spawn(
    db: &Db,
    cfg: &WorkloadConfig,
    rec: &Recorder,
    stop: &watch::Receiver<bool>,
    done: &watch::Receiver<bool>,
) -> JoinSet<()> {
    let namesrv = db.layout.namesrv_addr();
    let mut set = JoinSet::new();
    for i in 0..cfg.tx_producers {
        set.spawn(tx_producer(i, namesrv.clone(), cfg.topic.clone(), rec.clone(), stop.clone(), done.clone()));
    }
    set
}

/// One group leader's check progress on the half queue and the half queue's max offset.
async fn progress_of(db: &Db, group: &str) -> Result<(i64, i64), String> {
    let admin = db.admin();
    let addr = admin.master_addr_of_group(group).await.map_err(|e| e.to_string())?;
    let max = admin.max_offset(&addr, RMQ_SYS_TRANS_HALF_TOPIC, 0).await.map_err(|e| e.to_string())?;
    let offsets = admin.all_consumer_offset(&addr).await.map_err(|e| e.to_string())?;
    let key = ConsumerOffsetSerializeWrapper::key(RMQ_SYS_TRANS_HALF_TOPIC, CHECK_PROGRESS_GROUP);
    let progress = offsets.offset_table.get(&key).and_then(|q| q.get(&0)).copied().unwrap_or(0);
    Ok((progress, max))
}

/// Whether every half every group stored has been ended: each leader's check progress has reached
/// its half queue's max offset. `Err` says which group is behind and why.
async fn settled_now(db: &Db) -> Result<(), String> {
    let mut behind = Vec::new();
    for g in db.layout.groups() {
        match progress_of(db, &g).await {
            Ok((progress, max)) if progress >= max => {}
            Ok((progress, max)) => behind.push(format!("{g}: check progress {progress} < half max {max}")),
            Err(e) => behind.push(format!("{g}: {e}")),
        }
    }
    if behind.is_empty() { Ok(()) } else { Err(behind.join("; ")) }
}

/// Waits until every group's transaction checks have settled, twice with one check interval in
/// between (a half stored or an answer applied late shows up in the second look), or until
/// `deadline`. Records a `transaction checks settle` op: `ok` when settled, `info` with what was
/// still behind otherwise (the checkers then report any committed value that never appeared).
pub async fn settle(db: &Db, rec: &Recorder, deadline: Instant) -> bool {
    let confirm = Duration::from_millis(TRANSACTION_CHECK_INTERVAL_MS);
    let poll = Duration::from_millis(TX_SETTLE_POLL_MS);
    settle_twice(rec, SETTLE_LABEL, confirm, poll, deadline, || settled_now(db)).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_counter_decides_every_transaction() {
        use LocalTransactionState::*;
        let cases: Vec<(&str, Option<TxIntent>)> = vec![
            ("t0.0-0", Some(TxIntent::Commit)),
            ("t0.0-1", Some(TxIntent::Rollback)),
            ("t3.12-2", Some(TxIntent::UnknownThenCommit)),
            ("t1.0-3", Some(TxIntent::UnknownThenRollback)),
            ("t1.0-4", Some(TxIntent::Commit)),
            ("t10.7-1001", Some(TxIntent::Rollback)),
            ("p0.0-0", None),
            ("a1.2-3", None),
            ("t0-1", None),
            ("t0.0-", None),
            ("t.0-1", None),
            ("t0.x-1", None),
            ("t0.0-1-2", None),
            ("ghost", None),
        ];
        for (value, want) in cases {
            assert_eq!(TxIntent::of_value(value), want, "{value}");
        }
        let decisions = [
            (TxIntent::Commit, CommitMessage, CommitMessage, true),
            (TxIntent::Rollback, RollbackMessage, RollbackMessage, false),
            (TxIntent::UnknownThenCommit, Unknown, CommitMessage, true),
            (TxIntent::UnknownThenRollback, Unknown, RollbackMessage, false),
        ];
        for (intent, execute, check, commits) in decisions {
            assert_eq!((intent.execute(), intent.check(), intent.commits()), (execute, check, commits), "{intent:?}");
        }
    }

    #[test]
    fn the_listener_answers_by_the_body_alone() {
        let l = JepsenTxListener;
        let msg = |v: &str| Message::new("jepsen", v.to_owned());
        assert_eq!(l.execute_local_transaction(&msg("t0.0-4"), &()), LocalTransactionState::CommitMessage);
        assert_eq!(l.execute_local_transaction(&msg("t0.0-6"), &()), LocalTransactionState::Unknown);
        assert_eq!(l.execute_local_transaction(&msg("garbage"), &()), LocalTransactionState::RollbackMessage);
        let ext = |v: &str| MessageExt { message: msg(v), ..MessageExt::default() };
        assert_eq!(l.check_local_transaction(&ext("t0.0-6")), LocalTransactionState::CommitMessage);
        assert_eq!(l.check_local_transaction(&ext("t0.0-7")), LocalTransactionState::RollbackMessage);
        assert_eq!(l.check_local_transaction(&ext("t0.0-8")), LocalTransactionState::CommitMessage);
    }

    #[test]
    fn sends_are_recorded_by_their_final_decision() {
        use raftmq_client::SendResult;
        use raftmq_client::transaction::TransactionSendResult;
        use raftmq_common::message::MessageQueue;
        let result = |status, state| {
            Ok(TransactionSendResult {
                send_result: SendResult {
                    status,
                    msg_id: "m".into(),
                    offset_msg_id: String::new(),
                    message_queue: MessageQueue::new("jepsen", "broker-a", 1),
                    queue_offset: 77,
                    transaction_id: None,
                    region_id: String::new(),
                    trace_on: false,
                },
                local_transaction_state: state,
            })
        };
        let rec = Recorder::in_memory();
        let ok = SendStatus::SendOk;
        assert!(record_tx_send(&rec, "t0.0", "t0.0-0", &result(ok, LocalTransactionState::CommitMessage)));
        assert!(record_tx_send(&rec, "t0.0", "t0.0-1", &result(ok, LocalTransactionState::RollbackMessage)));
        assert!(record_tx_send(&rec, "t0.0", "t0.0-2", &result(ok, LocalTransactionState::Unknown)));
        assert!(record_tx_send(&rec, "t0.0", "t0.0-3", &result(ok, LocalTransactionState::Unknown)));
        let flush = SendStatus::FlushDiskTimeout;
        assert!(!record_tx_send(&rec, "t0.0", "t0.0-4", &result(flush, LocalTransactionState::RollbackMessage)));
        assert!(record_tx_send(&rec, "t0.1", "t0.1-1", &result(flush, LocalTransactionState::RollbackMessage)));
        let ops = rec.ops();
        let kinds: Vec<OpType> = ops.iter().map(|o| o.kind).collect();
        assert_eq!(
            kinds,
            vec![OpType::Ok, OpType::Fail, OpType::Ok, OpType::Fail, OpType::Info, OpType::Fail],
            "commit intents ok, rollback intents fail, an SDK rollback of a commit intent unknown"
        );
        assert!(
            ops.iter().all(|o| o.queue.as_deref() == Some("broker-a:1") && o.offset.is_none()),
            "the real queue, never the half's offset"
        );
    }
}
