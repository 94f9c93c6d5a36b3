//! The transaction check-back service (RocketMQ's `TransactionalMessageCheckService`): every
//! `transactionCheckInterval` the ready leader reads the half queue from its check progress, passes
//! ended chains, gives up halves checked `transactionCheckMax` times, re-puts due halves as copies
//! and asks a producer of their group with CHECK_TRANSACTION_STATE (a gRPC producer through its
//! registered checker, [`crate::services::transaction_checker`]); the progress is replicated as
//! consumer offsets of `CID_RMQ_SYS_TRANS`. Decisions and bookkeeping are
//! [`crate::state::transaction`]. Invariant: the progress passes a half only after its copy (or its
//! discard copy) is committed, or once its chain is ended.

use std::collections::HashSet;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use bytes::BytesMut;
use raftmq_common::limits::RPC_TIMEOUT_DEFAULT_MS;
use raftmq_common::limits::TRANSACTION_CHECK_BATCH_MAX_COUNT;
use raftmq_common::limits::TRANSACTION_CHECK_RETRY_BACKOFF_MS;
use raftmq_common::limits::TRANSACTION_NO_PRODUCER_GRACE_MS;
use raftmq_common::message::MessageExt;
use raftmq_common::message::msg_id::OffsetMsgId;
use raftmq_common::message::properties;
use raftmq_common::message::record::encode_record_into;
use raftmq_common::message::validate::RMQ_SYS_TRANS_CHECK_MAX_TIME_TOPIC;
use raftmq_common::message::validate::RMQ_SYS_TRANS_HALF_TOPIC;
use raftmq_common::message::validate::RMQ_SYS_TRANS_OP_HALF_TOPIC;
use raftmq_common::protocol::RemotingCommand;
use raftmq_common::protocol::RequestCode;
use raftmq_common::protocol::header::transaction::CheckTransactionStateRequestHeader;
use tokio::sync::Notify;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;
use tracing::debug;
use tracing::warn;

use crate::config::live_config::LiveConfig;
use crate::services::client_manager::ClientManager;
use crate::services::group_commit::RecordSlot;
use crate::services::group_commit::SendRequest;
use crate::services::group_commit::StoredRecord;
use crate::services::record_writer::RecordWriter;
use crate::services::replica::Replica;
use crate::services::topic_create::ensure_topic;
use crate::services::transaction_checker::CheckRequest;
use crate::state::commit_log::RecordAtError;
use crate::state::entry::BrokerCommand;
use crate::state::entry::OffsetCommit;
use crate::state::queue_offset::has_queue_offset;
use crate::state::store::MessageStore;
use crate::state::store::now_ms;
use crate::state::topic_config::one_queue_topic;
use crate::state::transaction::CID_RMQ_SYS_TRANS;
use crate::state::transaction::ChainState;
use crate::state::transaction::HALF_QUEUE_ID;
use crate::state::transaction::HalfDecision;
use crate::state::transaction::TransactionState;
use crate::state::transaction::check_copy;
use crate::state::transaction::check_times;
use crate::state::transaction::decide_half;
use crate::state::transaction::discard_copy;
use crate::state::transaction::read_message;
use crate::state::transaction::read_units;
use crate::state::transaction::real_target;
use crate::state::transaction::verified_root;

pub(crate) fn encode_request(records: &[MessageExt]) -> Result<SendRequest, String> {
    let mut out = BytesMut::new();
    let mut slots = Vec::with_capacity(records.len());
    for r in records {
        let at = out.len();
        encode_record_into(r, &mut out).map_err(|e| e.to_string())?;
        slots.push(RecordSlot {
            topic: r.message.topic.clone(),
            queue_id: r.queue_id,
            has_queue_offset: has_queue_offset(r.sys_flag),
            at,
        });
    }
    Ok(SendRequest { records: out, slots })
}

// ---------------------------------------------------------------------------------------------
// The check service.
// ---------------------------------------------------------------------------------------------

/// What the check-back service uses.
#[derive(Debug)]
pub struct CheckHandles {
    /// `transactionCheckInterval`.
    pub check_interval: Duration,
    /// `brokerName`, for CHECK_TRANSACTION_STATE and refusals.
    pub broker_name: String,
    /// The config now (`transactionTimeOut`, `transactionCheckMax`).
    pub live: Arc<LiveConfig>,
    /// The applied state (half and op queues).
    pub store: Arc<MessageStore>,
    /// The Raft group.
    pub replica: Arc<Replica>,
    /// Stores the check copies.
    pub writer: RecordWriter,
    /// The leader's transaction bookkeeping, shared with END_TRANSACTION.
    pub transactions: Arc<TransactionState>,
    /// Connected producers, asked to check.
    pub clients: Arc<ClientManager>,
    /// STOREHOST (`brokerIP1:listenPort`).
    pub store_host: SocketAddr,
    /// Wakes NameServer registration when a topic was created.
    pub register_now: Arc<Notify>,
}

/// Starts the check service; it checks only while this replica is a ready leader, the first round
/// one `transactionCheckInterval` after it became one (producers need that long to heartbeat a new
/// leader, and a check with no producer to ask would spend one of the half's checks for nothing).
pub fn spawn(h: Arc<CheckHandles>, cancel: CancellationToken) -> JoinHandle<()> {
    tokio::spawn(run(h, cancel))
}

async fn run(h: Arc<CheckHandles>, cancel: CancellationToken) {
    let interval = h.check_interval;
    let mut leadership = h.replica.leadership_watch();
    let mut watching = true;
    // (term, when its first round is due)
    let mut leading: Option<(u64, tokio::time::Instant)> = None;
    loop {
        let now = tokio::time::Instant::now();
        let wait = match h.replica.ready_term() {
            None => {
                leading = None;
                interval.min(Duration::from_millis(500))
            }
            Some(term) => match leading {
                Some((t, due)) if t == term && due <= now => match round(&h, term).await {
                    Ok(()) => interval,
                    Err(()) => Duration::from_millis(TRANSACTION_CHECK_RETRY_BACKOFF_MS),
                },
                Some((t, due)) if t == term => due - now,
                _ => {
                    leading = Some((term, now + interval));
                    // END_TRANSACTION is refused until the ops are read back: read them now.
                    if catch_up_ops(&h, term).await.is_err() {
                        leading = None;
                    }
                    interval
                }
            },
        };
        tokio::select! {
            biased;
            _ = cancel.cancelled() => break,
            changed = leadership.changed(), if watching => watching = changed.is_ok(),
            _ = tokio::time::sleep(wait) => {}
        }
    }
}

/// Reads the op queue up to its end, one batch per lock hold (END_TRANSACTION waits for this on a
/// new leader).
async fn catch_up_ops(h: &CheckHandles, term: u64) -> Result<(), ()> {
    let mut read_to = None;
    loop {
        let (caught_up, next) =
            h.transactions.with_view(&h.store, term, |v, caught_up| (caught_up, v.op_read_next)).map_err(|_| ())?;
        if caught_up {
            return Ok(());
        }
        if read_to == Some(next) {
            // No op read in a whole pass: one cannot be read now (logged); the caller retries later.
            return Err(());
        }
        read_to = Some(next);
        tokio::task::yield_now().await;
    }
}

/// One pass over the half queue, from the check progress to where the queue ended when the pass
/// began: the copies it re-puts are the next pass's business (Java stops at halves stored after the
/// round started).
async fn round(h: &CheckHandles, term: u64) -> Result<(), ()> {
    // Every op must be known before a half is judged unanswered.
    catch_up_ops(h, term).await?;
    let (_, round_end) = h.store.queue_offsets(RMQ_SYS_TRANS_HALF_TOPIC, HALF_QUEUE_ID);
    loop {
        let (passed, more) = round_batch(h, term, round_end).await?;
        propose_progress(h, term).await;
        if !more || passed == 0 {
            return Ok(());
        }
    }
}

/// A record the round stores: a check copy (and whether its producer is asked now) or a discard.
struct Put {
    record: MessageExt,
    check: bool,
}

/// Looks at one batch of halves below `round_end`; returns how many it passed and whether there
/// are more to look at in this round.
async fn round_batch(h: &CheckHandles, term: u64, round_end: u64) -> Result<(usize, bool), ()> {
    let (timeout, check_max) = h.live.read(|c| (c.transaction_time_out, c.transaction_check_max));
    let timeout_ms = u64::try_from(timeout.as_millis()).unwrap_or(u64::MAX);
    let (min, max) = h.store.queue_offsets(RMQ_SYS_TRANS_HALF_TOPIC, HALF_QUEUE_ID);
    let end = max.min(round_end);
    let batch_end = |from: i64| from.saturating_add(TRANSACTION_CHECK_BATCH_MAX_COUNT as i64);
    let (from, ended, ending, in_grace) = h
        .transactions
        .with_view(&h.store, term, |v, _| {
            // Retention may have purged halves the progress had not reached (Java: OFFSET_ILLEGAL, jump).
            let from = v.half_next.max(i64::try_from(min).unwrap_or(i64::MAX));
            let ended: HashSet<i64> = (from..batch_end(from)).filter(|o| v.ended.contains(*o)).collect();
            let in_grace = v.loaded_at.elapsed() < Duration::from_millis(TRANSACTION_NO_PRODUCER_GRACE_MS);
            (from, ended, v.ending.clone(), in_grace)
        })
        .map_err(|_| ())?;
    let Ok(from_u) = u64::try_from(from) else { return Ok((0, false)) };
    if from_u >= end {
        return Ok((0, false));
    }
    let count = usize::try_from(end - from_u).unwrap_or(usize::MAX).min(TRANSACTION_CHECK_BATCH_MAX_COUNT);
    let units = read_units(&h.store, RMQ_SYS_TRANS_HALF_TOPIC, from_u, count);
    let now = now_ms() as i64;
    let mut passed = 0usize;
    let mut puts: Vec<Put> = Vec::new();
    let mut put_bytes = 0usize;
    let mut stopped = false;
    let mut unread = false;
    let max_bytes = h.writer.entry_max_bytes();
    for (i, unit) in units.iter().enumerate() {
        // The copies go as one request: within one group-commit entry (a copy is about its half's
        // size), so it never nears what one Raft entry holds.
        if !puts.is_empty() && put_bytes.saturating_add(usize::try_from(unit.size).unwrap_or(usize::MAX)) > max_bytes {
            break;
        }
        let offset = from + i as i64;
        if ended.contains(&offset) {
            passed = i + 1;
            continue;
        }
        if ending.contains(&offset) {
            // Its END_TRANSACTION is being written: look again next round rather than check it.
            stopped = true;
            break;
        }
        let half = match read_message(&h.store, unit) {
            Ok(h) => h,
            Err(e @ RecordAtError::Unreadable { .. }) => {
                // Never skipped: the progress stops before it and the round retries after a backoff.
                warn!(half = offset, error = %e, "half message cannot be read now; retrying later");
                unread = true;
                break;
            }
            Err(e) => {
                warn!(half = offset, error = %e, "half message unreadable; skipped");
                passed = i + 1;
                continue;
            }
        };
        let root = verified_root(&h.store, &half);
        if root != offset {
            // A check copy: its chain may have ended through another of its records.
            match h.transactions.chain_state(term, offset, root).map_err(|_| ())? {
                ChainState::Ended => {
                    passed = i + 1;
                    continue;
                }
                ChainState::Ending => {
                    stopped = true;
                    break;
                }
                ChainState::Open => {}
            }
        }
        let put = match decide_half(&half, now, timeout_ms, check_max) {
            HalfDecision::Wait(_) => {
                stopped = true;
                break;
            }
            HalfDecision::Discard => {
                warn!(half = offset, msg_id = ?half.message.uniq_key(), "half message checked too often; moved to TRANS_CHECK_MAX_TIME_TOPIC");
                Put { record: discard_copy(&half, root, h.store_host, now), check: false }
            }
            HalfDecision::Immune => Put { record: check_copy(&half, 0, root, h.store_host, now), check: false },
            HalfDecision::Check
                if in_grace && !h.clients.has_producer(half.message.property(properties::PGROUP).unwrap_or("")) =>
            {
                // A new leader: its producers may not have heartbeaten it yet. Java would spend a
                // check on nobody (and after transactionCheckMax give the half up); wait instead.
                stopped = true;
                break;
            }
            HalfDecision::Check => Put {
                record: check_copy(&half, check_times(&half).saturating_add(1), root, h.store_host, now),
                check: true,
            },
        };
        put_bytes = put_bytes.saturating_add(usize::try_from(unit.size).unwrap_or(0));
        puts.push(put);
        passed = i + 1;
    }
    if !puts.is_empty() {
        if puts.iter().any(|p| p.record.message.topic == RMQ_SYS_TRANS_CHECK_MAX_TIME_TOPIC) {
            ensure_topic(
                &h.store,
                &h.replica,
                &h.broker_name,
                &h.register_now,
                one_queue_topic(RMQ_SYS_TRANS_CHECK_MAX_TIME_TOPIC),
            )
            .await
            .map_err(|_| ())?;
        }
        let records: Vec<MessageExt> = puts.iter().map(|p| p.record.clone()).collect();
        let request = encode_request(&records).map_err(|e| warn!(error = %e, "check copies cannot be encoded"))?;
        let stored = h.writer.store_records(request).await.map_err(|e| {
            debug!(error = %e, "check copies not stored; the round retries");
        })?;
        for (put, at) in puts.into_iter().zip(stored) {
            if put.check {
                send_check(h, put.record, at);
            }
        }
    }
    let next = from + passed as i64;
    h.transactions.with_view(&h.store, term, |v, _| v.advance(next)).map_err(|_| ())?;
    if unread {
        return Err(());
    }
    let more = !stopped && u64::try_from(next).is_ok_and(|n| n < end);
    Ok((passed, more))
}

/// Replicates the check progress when it moved.
async fn propose_progress(h: &CheckHandles, term: u64) {
    let Ok((half, op, replicated)) =
        h.transactions.with_view(&h.store, term, |v, _| (v.half_next, v.op_next(), v.replicated))
    else {
        return;
    };
    if (half, op) == replicated {
        return;
    }
    let commit = |topic: &str, offset: i64| OffsetCommit {
        topic: topic.to_owned(),
        group: CID_RMQ_SYS_TRANS.to_owned(),
        queue_id: HALF_QUEUE_ID,
        offset,
    };
    let command = BrokerCommand::ConsumerOffsets(vec![
        commit(RMQ_SYS_TRANS_HALF_TOPIC, half),
        commit(RMQ_SYS_TRANS_OP_HALF_TOPIC, op),
    ]);
    match h.replica.propose(&command).await {
        Ok(()) => {
            let mut guard = h.transactions.lock();
            if let Some(v) = guard.as_mut().filter(|v| v.term == term) {
                v.replicated = (half, op);
            }
        }
        // Proposed again after the next round; a new leader re-checks from the replicated progress.
        Err(e) => debug!(error = %e, "transaction check progress not replicated yet"),
    }
}

/// `sendCheckMessage`: asks one producer of the half's group about the copy just stored: over its
/// remoting connection (CHECK_TRANSACTION_STATE, oneway) or, with none, a registered checker (a gRPC
/// producer's Telemetry stream).
fn send_check(h: &CheckHandles, mut copy: MessageExt, at: StoredRecord) {
    let group = copy.message.property(properties::PGROUP).unwrap_or_default().to_owned();
    let connection = h.clients.producer_connection(&group);
    let checker = if connection.is_none() { h.clients.transaction_checkers().pick(&group) } else { None };
    if connection.is_none() && checker.is_none() {
        debug!(group, half = at.queue_offset, "no producer of the group connected; the half is checked again later");
        return;
    }
    let offset_msg_id = OffsetMsgId::new(h.store_host, at.phy_offset).to_string();
    let uniq = copy.message.uniq_key().map(str::to_owned);
    let header = CheckTransactionStateRequestHeader {
        tran_state_table_offset: at.queue_offset,
        commit_log_offset: at.phy_offset,
        msg_id: uniq.clone(),
        transaction_id: uniq,
        offset_msg_id: Some(offset_msg_id),
        bname: Some(h.broker_name.clone()),
    };
    // The producer sees the message as it was sent: real topic and queue (Java restores them).
    if let Ok((topic, queue_id)) = real_target(&copy) {
        copy.message.topic = topic.into();
        copy.queue_id = queue_id;
    }
    copy.queue_offset = at.queue_offset;
    copy.commit_log_offset = at.phy_offset;
    let Some(connection) = connection else {
        if let Some(checker) = checker
            && !checker.check(CheckRequest { header, message: copy })
        {
            debug!(group, half = at.queue_offset, "check not delivered to the gRPC producer; checked again later");
        }
        return;
    };
    let mut body = BytesMut::new();
    if let Err(e) = encode_record_into(&copy, &mut body) {
        warn!(error = %e, "check message cannot be encoded");
        return;
    }
    let request = RemotingCommand::request_with_header(RequestCode::CheckTransactionState, &header)
        .with_body(body.freeze())
        .into_oneway();
    tokio::spawn(async move {
        if let Err(e) = connection.invoke_oneway(request, Duration::from_millis(RPC_TIMEOUT_DEFAULT_MS)).await {
            debug!(peer = %connection.peer_addr(), error = %e, "CHECK_TRANSACTION_STATE not delivered");
        }
    });
}
