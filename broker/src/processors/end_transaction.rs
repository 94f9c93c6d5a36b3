//! END_TRANSACTION (RocketMQ's `EndTransactionProcessor`) and RESUME_CHECK_HALF_MESSAGE: a ready
//! leader ends a half at most once (a commit stores the real record and its op record in one Raft
//! entry; a rollback its op record), or puts a given-up half back for checking. The records and the
//! bookkeeping are [`crate::state::transaction`].

use raftmq_common::message::MessageExt;
use raftmq_common::message::msg_id::OffsetMsgId;
use raftmq_common::message::properties;
use raftmq_common::message::validate::RMQ_SYS_TRANS_CHECK_MAX_TIME_TOPIC;
use raftmq_common::message::validate::RMQ_SYS_TRANS_HALF_TOPIC;
use raftmq_common::message::validate::RMQ_SYS_TRANS_OP_HALF_TOPIC;
use raftmq_common::protocol::RemotingCommand;
use raftmq_common::protocol::ResponseCode;
use raftmq_common::protocol::header::transaction::EndTransactionRequestHeader;
use raftmq_common::protocol::header::transaction::ResumeCheckHalfMessageRequestHeader;
use raftmq_common::protocol::header::transaction::commit_or_rollback;
use tracing::debug;
use tracing::warn;

use crate::context::BrokerContext;
use crate::processors::send_back::ensure_topic;
use crate::services::schedule::redirect_delayed;
use crate::services::timer::redirect_timer;
use crate::services::transaction_check::encode_request;
use crate::state::store::now_ms;
use crate::state::topic_config::one_queue_topic;
use crate::state::transaction::ClaimRefused;
use crate::state::transaction::chain_root;
use crate::state::transaction::check_copy;
use crate::state::transaction::committed_message;
use crate::state::transaction::op_message;
use crate::state::transaction::read_at;
use crate::state::transaction::real_target;
use crate::state::transaction::verified_root;

fn refuse(code: ResponseCode, remark: impl Into<String>) -> RemotingCommand {
    RemotingCommand::response(code, Some(remark.into()))
}

// ---------------------------------------------------------------------------------------------
// RESUME_CHECK_HALF_MESSAGE.
// ---------------------------------------------------------------------------------------------

/// RESUME_CHECK_HALF_MESSAGE (323, `mqadmin resumeCheckHalfMessage`): the half at an offsetMsgId,
/// typically one given up to TRANS_CHECK_MAX_TIME_TOPIC after `transactionCheckMax` checks, is put
/// back at the half queue's end with its check count at 0, so the next check round asks its
/// producer again. Stricter than Java, which re-puts whatever message the id names: only a half (in
/// the half queue, or given up) is taken; anything else is SYSTEM_ERROR saying why.
pub async fn resume_check_half_message(ctx: &BrokerContext, request: &RemotingCommand) -> RemotingCommand {
    match resume_check(ctx, request).await {
        Ok(response) | Err(response) => response,
    }
}

async fn resume_check(ctx: &BrokerContext, request: &RemotingCommand) -> Result<RemotingCommand, RemotingCommand> {
    let fail = |remark: String| RemotingCommand::response(ResponseCode::SystemError, Some(remark));
    let h: ResumeCheckHalfMessageRequestHeader =
        request.decode_header().map_err(|e| fail(format!("the request header is invalid: {e}")))?;
    let id = h.msg_id.as_deref().filter(|s| !s.is_empty()).ok_or_else(|| fail("msgId is missing".to_owned()))?;
    let at: OffsetMsgId = id.parse().map_err(|e| fail(format!("{id} is not an offsetMsgId: {e}")))?;
    ctx.replica.check_writable().map_err(|e| e.to_response(&ctx.config.broker_name))?;
    let half = read_at(&ctx.store, at.commit_log_offset).map_err(|e| fail(format!("no message at {id}: {e}")))?;
    let root = match half.message.topic.as_str() {
        RMQ_SYS_TRANS_HALF_TOPIC => chain_root(&half),
        // A given-up copy names its chain's root; without one the resumed copy is its own root
        // (a negative claim counts as absent, see `chain_root`).
        RMQ_SYS_TRANS_CHECK_MAX_TIME_TOPIC => half
            .message
            .property(properties::TRAN_PREPARED_QUEUE_OFFSET)
            .and_then(|r| r.parse::<i64>().ok())
            .filter(|r| *r >= 0)
            .unwrap_or(-1),
        other => return Err(fail(format!("the message {id} is in {other}, not a half message"))),
    };
    ensure_topic(ctx, one_queue_topic(RMQ_SYS_TRANS_HALF_TOPIC)).await?;
    let mut copy = check_copy(&half, 0, root, ctx.store_host, now_ms() as i64);
    copy.message.topic = RMQ_SYS_TRANS_HALF_TOPIC.into();
    let records = encode_request(&[copy]).map_err(|e| fail(format!("the half cannot be encoded: {e}")))?;
    ctx.store_records(records)
        .await
        .map_err(|e| fail(format!("Put message back to RMQ_SYS_TRANS_HALF_TOPIC failed: {e}")))?;
    tracing::info!(msg_id = id, "half message put back for checking");
    Ok(RemotingCommand::success())
}

// ---------------------------------------------------------------------------------------------
// END_TRANSACTION.
// ---------------------------------------------------------------------------------------------

/// END_TRANSACTION (37). Usually oneway: the answer only matters to callers that wait for one.
pub async fn end_transaction(ctx: &BrokerContext, request: &RemotingCommand) -> RemotingCommand {
    match end(ctx, request).await {
        Ok(response) | Err(response) => response,
    }
}

async fn end(ctx: &BrokerContext, request: &RemotingCommand) -> Result<RemotingCommand, RemotingCommand> {
    let h: EndTransactionRequestHeader = request
        .decode_header()
        .map_err(|e| refuse(ResponseCode::SystemError, format!("the END_TRANSACTION header is invalid: {e}")))?;
    let from_check = h.from_transaction_check.unwrap_or(false);
    let commit = match h.commit_or_rollback {
        commit_or_rollback::COMMIT_TYPE => true,
        commit_or_rollback::ROLLBACK_TYPE => false,
        commit_or_rollback::NOT_TYPE => {
            debug!(msg_id = %h.msg_id, from_check, "transaction state unknown; the broker will check back");
            return Ok(RemotingCommand::success());
        }
        other => {
            return Err(refuse(ResponseCode::SystemError, format!("commitOrRollback {other} is not 0, 8 or 12")));
        }
    };
    let Some(term) = ctx.replica.ready_term() else {
        debug!(msg_id = %h.msg_id, "END_TRANSACTION on a replica that is not the ready leader; the leader's check resolves it");
        return Err(refuse(ResponseCode::SlaveNotAvailable, "Store is not in master status"));
    };
    let half = read_at(&ctx.store, h.commit_log_offset)
        .map_err(|e| refuse(ResponseCode::SystemError, format!("Find prepared transaction message failed: {e}")))?;
    check_prepare_message(&half, &h)?;
    if commit {
        check_real_queue(ctx, &half)?;
    }
    let root = verified_root(&ctx.store, &half);
    let claim = match ctx.transactions.claim(&ctx.store, term, half.queue_offset, root) {
        Ok(claim) => claim,
        Err(ClaimRefused::AlreadyEnded) => {
            debug!(msg_id = %h.msg_id, half = half.queue_offset, root, "transaction already ended; nothing written");
            return Ok(RemotingCommand::success());
        }
        Err(ClaimRefused::Loading) => {
            return Err(refuse(
                ResponseCode::SystemBusy,
                "the new leader is still loading transaction state; it will check back",
            ));
        }
        Err(ClaimRefused::Superseded) => {
            return Err(refuse(ResponseCode::SlaveNotAvailable, "Store is not in master status"));
        }
    };
    write_end(ctx, term, &half, root, commit).await?;
    claim.ended();
    debug!(msg_id = %h.msg_id, commit, from_check, "transaction ended");
    Ok(RemotingCommand::success())
}

/// A commit needs its real topic and queue to exist still (an operator may have deleted the topic
/// since the half was stored); otherwise the half stays to be checked, and in the end given up.
fn check_real_queue(ctx: &BrokerContext, half: &MessageExt) -> Result<(), RemotingCommand> {
    let (topic, queue_id) = real_target(half).map_err(|e| refuse(ResponseCode::SystemError, e.to_string()))?;
    let meta = ctx.store.metadata();
    match meta.topics.get(&topic) {
        Some(config) if queue_id < config.write_queue_nums => Ok(()),
        Some(config) => Err(refuse(
            ResponseCode::SystemError,
            format!(
                "queue {queue_id} of topic {topic} does not exist any more ({} write queues)",
                config.write_queue_nums
            ),
        )),
        None => Err(refuse(ResponseCode::TopicNotExist, format!("the topic {topic} does not exist any more"))),
    }
}

/// `checkPrepareMessage`, plus: the record must be a half message with a real topic.
fn check_prepare_message(half: &MessageExt, h: &EndTransactionRequestHeader) -> Result<(), RemotingCommand> {
    real_target(half).map_err(|e| refuse(ResponseCode::SystemError, e.to_string()))?;
    if half.message.property(properties::PGROUP) != Some(h.producer_group.as_str()) {
        return Err(refuse(ResponseCode::SystemError, "The producer group wrong"));
    }
    if half.queue_offset != h.tran_state_table_offset {
        return Err(refuse(ResponseCode::SystemError, "The transaction state table offset wrong"));
    }
    if half.commit_log_offset != h.commit_log_offset {
        return Err(refuse(ResponseCode::SystemError, "The commit log offset wrong"));
    }
    Ok(())
}

async fn write_end(
    ctx: &BrokerContext,
    term: u64,
    half: &MessageExt,
    root: i64,
    commit: bool,
) -> Result<(), RemotingCommand> {
    let broker_name = &ctx.config.broker_name;
    ensure_topic(ctx, one_queue_topic(RMQ_SYS_TRANS_OP_HALF_TOPIC)).await?;
    // The claim is this term's: a leader of a later term keeps its own, and must not be raced.
    if ctx.replica.ready_term() != Some(term) {
        return Err(refuse(ResponseCode::SlaveNotAvailable, "Store is not in master status"));
    }
    let now = now_ms() as i64;
    let mut records = Vec::with_capacity(2);
    if commit {
        let mut committed = committed_message(half, ctx.store_host, now)
            .map_err(|e| refuse(ResponseCode::SystemError, e.to_string()))?;
        // A timer the half asked for starts now (Java times the committed record); it was checked
        // when the half was sent, so only a config changed since can refuse it: stored at once then.
        let levels = ctx.store.delay_levels_ms();
        let max_delay_ms = ctx.live.current().timer_max_delay_sec.saturating_mul(1000);
        match redirect_timer(&mut committed, now, levels, max_delay_ms) {
            Ok(true) => {
                redirect_delayed(&mut committed, levels.len());
            }
            Ok(false) => {}
            Err(e) => warn!(offset = half.commit_log_offset, error = %e, "committed without its timer"),
        }
        records.push(committed);
    }
    records.push(op_message(half.queue_offset, root, ctx.store_host, now));
    let request = encode_request(&records).map_err(|e| refuse(ResponseCode::MessageIllegal, e))?;
    ctx.store_records(request).await.map_err(|e| e.to_response(broker_name))?;
    Ok(())
}
