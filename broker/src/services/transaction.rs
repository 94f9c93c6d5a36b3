//! Transactional messages (RocketMQ's `TransactionalMessageService`, `EndTransactionProcessor` and
//! `TransactionalMessageCheckService`) on a Raft group.
//!
//! ```text
//! producer SEND (TRAN_MSG=true) ─▶ redirect_half: RMQ_SYS_TRANS_HALF_TOPIC queue 0, sysFlag NOT_TYPE,
//!                                  REAL_TOPIC / REAL_QID kept ─▶ group commit ─▶ SEND_OK (half offsets)
//! producer END_TRANSACTION (oneway) ─▶ ready leader: half read back at commitLogOffset, checked
//!   COMMIT:   [real-topic record (sysFlag COMMIT), op record "d" naming the half] ─▶ ONE entry
//!   ROLLBACK: [op record]                                                         ─▶ one entry
//! ready leader, every transactionCheckInterval (ops read first; halves up to the queue's end as
//! the round began):
//!   ended ─▶ pass; checked transactionCheckMax times ─▶ copy to TRANS_CHECK_MAX_TIME_TOPIC;
//!   transactionTimeOut not passed since birth (a copy: since its check) ─▶ stop;
//!   CHECK_IMMUNITY_TIME_IN_SECONDS not passed ─▶ copy re-put, count unchanged;
//!   else ─▶ copy re-put at the half queue's end (TRANSACTION_CHECK_TIMES + 1) ─▶
//!   CHECK_TRANSACTION_STATE (oneway) to a producer of PGROUP ─▶ it answers with END_TRANSACTION
//!   ─▶ progress: consumer offsets of CID_RMQ_SYS_TRANS on the half and op queues (replicated)
//! ```
//!
//! Invariants and guarantees:
//! - A half message gets a ConsumeQueue unit in the half topic only; no consumer of the real topic
//!   sees anything before a commit. A commit stores the real record and its op record in one Raft
//!   entry, so after any crash either both exist or neither does (Java writes them apart).
//! - Only a ready leader ends transactions or checks; a follower answers SLAVE_NOT_AVAILABLE
//!   (END_TRANSACTION is oneway, so the producer never sees it: the next leader's check resolves
//!   the half instead).
//! - A transaction is ended at most once, whichever of its records the END_TRANSACTION names. A
//!   half and its check copies form a chain: each copy names the chain's root (the original half's
//!   queue offset) in `TRAN_PREPARED_QUEUE_OFFSET`, and an op names the root as well as the record
//!   ended. An END_TRANSACTION for any record of a chain that an op already names, or that another
//!   END_TRANSACTION is ending, answers SUCCESS and writes nothing, and the check round passes every
//!   record of an ended chain. So a producer's late answer to its own send and its answer to a
//!   check commit once, where Java commits twice. A new leader reads the op queue back before it
//!   ends anything (from before the op progress, as many ops as its memory of ended chains holds),
//!   so this holds across leader changes. That memory is bounded (`EndedMemory`:
//!   [`TRANSACTION_ENDED_MEMORY_MAX_COUNT`] offsets ahead of the check progress and as many behind
//!   it, the earliest named forgotten first); past it a repeat may commit again, which is at least
//!   once, as in RocketMQ. A claimed root is trusted
//!   only if the record there is the same transaction (UNIQ_KEY and PGROUP), and a new half never
//!   claims one (the send drops the property), so no END can end another transaction. A copy is checked again only a
//!   transactionTimeOut after its own check, so an answer on its way is not asked for twice.
//! - The check progress moves past a half only after its copy (or its discard copy) is committed,
//!   or once its chain is ended, and is proposed right after.
//! - For [`TRANSACTION_NO_PRODUCER_GRACE_MS`] after a leader starts, a due half whose producer group
//!   has not connected to it holds the round (its producers are still finding the new leader);
//!   after that, as in Java, a check with nobody to ask still counts.
//! - Disk input never panics the service: an unreadable half or op is skipped with a warning.

use std::collections::BTreeMap;
use std::collections::BTreeSet;
use std::collections::HashSet;
use std::collections::VecDeque;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::Mutex;
use std::sync::MutexGuard;
use std::time::Duration;

use bytes::Bytes;
use bytes::BytesMut;
use raftmq_common::limits::RPC_TIMEOUT_DEFAULT_MS;
use raftmq_common::limits::TRANSACTION_CHECK_BATCH_MAX_COUNT;
use raftmq_common::limits::TRANSACTION_CHECK_RETRY_BACKOFF_MS;
use raftmq_common::limits::TRANSACTION_ENDED_MEMORY_MAX_COUNT;
use raftmq_common::limits::TRANSACTION_NO_PRODUCER_GRACE_MS;
use raftmq_common::limits::TRANSACTION_OP_PENDING_MAX_COUNT;
use raftmq_common::limits::TRANSACTION_OP_READ_BATCH_MAX_COUNT;
use raftmq_common::message::Message;
use raftmq_common::message::MessageExt;
use raftmq_common::message::msg_id::OffsetMsgId;
use raftmq_common::message::properties;
use raftmq_common::message::record::DecodeOptions;
use raftmq_common::message::record::decode_record_bytes;
use raftmq_common::message::record::encode_record_into;
use raftmq_common::message::sys_flag::TransactionType;
use raftmq_common::message::sys_flag::with_transaction_type;
use raftmq_common::message::validate::RMQ_SYS_TRANS_CHECK_MAX_TIME_TOPIC;
use raftmq_common::message::validate::RMQ_SYS_TRANS_HALF_TOPIC;
use raftmq_common::message::validate::RMQ_SYS_TRANS_OP_HALF_TOPIC;
use raftmq_common::protocol::RemotingCommand;
use raftmq_common::protocol::RequestCode;
use raftmq_common::protocol::ResponseCode;
use raftmq_common::protocol::header::transaction::CheckTransactionStateRequestHeader;
use raftmq_common::protocol::header::transaction::EndTransactionRequestHeader;
use raftmq_common::protocol::header::transaction::ResumeCheckHalfMessageRequestHeader;
use raftmq_common::protocol::header::transaction::commit_or_rollback;
use thiserror::Error;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;
use tracing::debug;
use tracing::info;
use tracing::warn;

use crate::context::BrokerContext;
use crate::processors::send_back::ensure_topic;
use crate::services::group_commit::RecordSlot;
use crate::services::group_commit::SendRequest;
use crate::services::group_commit::StoredRecord;
use crate::services::schedule::redirect_delayed;
use crate::services::timer::redirect_timer;
use crate::state::commit_log::record_at;
use crate::state::consume_queue::CqUnit;
use crate::state::entry::BrokerCommand;
use crate::state::entry::OffsetCommit;
use crate::state::queue_offset::has_queue_offset;
use crate::state::real_queue::RestoreError;
use crate::state::real_queue::real_queue;
use crate::state::store::now_ms;
use crate::state::topic_config::one_queue_topic;

/// The group whose consumer offsets hold the check progress (`MixAll.CID_SYS_RMQ_TRANS`).
pub const CID_RMQ_SYS_TRANS: &str = "CID_RMQ_SYS_TRANS";
/// Tag of an op record (`TransactionalMessageUtil.REMOVETAG`).
pub const REMOVE_TAG: &str = "d";
/// The half and op topics have one queue.
const HALF_QUEUE_ID: i32 = 0;

fn refuse(code: ResponseCode, remark: impl Into<String>) -> RemotingCommand {
    RemotingCommand::response(code, Some(remark.into()))
}

// ---------------------------------------------------------------------------------------------
// Pure decisions and record shapes.
// ---------------------------------------------------------------------------------------------

/// `parseHalfMessageInner`: the half of a transactional send goes to the half topic's queue 0 with
/// its real topic and queue kept in properties, and without the transaction bits, so that it gets
/// a unit in the half queue (a PREPARED record gets none). A DELAY is dropped: Java's producer
/// clears it, and a half must never take the delay queue's path. So is the check bookkeeping a
/// producer may carry over from a message it consumed and re-sends (Java's immunity copies keep
/// `TRAN_PREPARED_QUEUE_OFFSET` in the committed message): a new half starts its own chain.
pub fn redirect_half(msg: &mut MessageExt) {
    let real_topic = std::mem::replace(&mut msg.message.topic, RMQ_SYS_TRANS_HALF_TOPIC.into());
    msg.message.properties.insert(properties::REAL_TOPIC, real_topic);
    msg.message.properties.insert(properties::REAL_QID, msg.queue_id.to_string());
    for key in [properties::DELAY, properties::TRAN_PREPARED_QUEUE_OFFSET, properties::TRANSACTION_CHECK_TIMES] {
        msg.message.properties.remove(key);
    }
    msg.sys_flag = with_transaction_type(msg.sys_flag, TransactionType::Not);
    msg.queue_id = HALF_QUEUE_ID;
}

/// Why a record cannot be ended or checked as a half message.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum HalfError {
    /// The record is not in the half topic.
    #[error("the message at that offset is not a half message (topic {0})")]
    NotAHalf(String),
    /// `REAL_TOPIC` is missing.
    #[error("the half message has no REAL_TOPIC")]
    NoRealTopic,
    /// `REAL_QID` is missing or not a queue id.
    #[error("the half message has REAL_QID {0:?}")]
    BadRealQueueId(Option<String>),
}

fn real_target(half: &MessageExt) -> Result<(String, i32), HalfError> {
    if half.message.topic != RMQ_SYS_TRANS_HALF_TOPIC {
        return Err(HalfError::NotAHalf(half.message.topic.to_string()));
    }
    let (topic, queue_id) = real_queue(&half.message.properties).map_err(|e| match e {
        RestoreError::NoRealTopic => HalfError::NoRealTopic,
        RestoreError::BadRealQueueId(qid) => HalfError::BadRealQueueId(qid),
    })?;
    Ok((topic.to_owned(), queue_id))
}

/// `endMessageTransaction`: the committed record of a half, in its real topic and queue, sysFlag
/// COMMIT, pointing back at the half. Unlike Java (which copies the properties string before it
/// clears them), the bookkeeping properties are gone: a consumer's send-back of a committed
/// message must not look like a new half.
pub fn committed_message(
    half: &MessageExt,
    store_host: SocketAddr,
    store_timestamp: i64,
) -> Result<MessageExt, HalfError> {
    let (topic, queue_id) = real_target(half)?;
    let mut message = half.message.clone();
    message.topic = topic.into();
    for key in [
        properties::REAL_TOPIC,
        properties::REAL_QID,
        properties::TRAN_MSG,
        properties::TRANSACTION_CHECK_TIMES,
        properties::TRAN_PREPARED_QUEUE_OFFSET,
    ] {
        message.properties.remove(key);
    }
    Ok(MessageExt {
        message,
        queue_id,
        sys_flag: with_transaction_type(half.sys_flag, TransactionType::Commit),
        born_timestamp: half.born_timestamp,
        born_host: half.born_host,
        store_timestamp,
        store_host,
        reconsume_times: half.reconsume_times,
        prepared_transaction_offset: half.commit_log_offset,
        ..MessageExt::default()
    })
}

/// `addRemoveTagInTransactionOp`: the op record saying the half at `half_queue_offset` is ended,
/// and with it its chain (named too when the half is a check copy: see [`chain_root`]). The body
/// is a comma-separated list, as Java 5.x writes and reads it.
pub fn op_message(half_queue_offset: i64, root: i64, store_host: SocketAddr, now_ms: i64) -> MessageExt {
    let body =
        if root == half_queue_offset { half_queue_offset.to_string() } else { format!("{half_queue_offset},{root}") };
    let message = Message::new(RMQ_SYS_TRANS_OP_HALF_TOPIC, Bytes::from(body)).with_tags(REMOVE_TAG);
    MessageExt {
        message,
        queue_id: HALF_QUEUE_ID,
        born_timestamp: now_ms,
        born_host: store_host,
        store_timestamp: now_ms,
        store_host,
        ..MessageExt::default()
    }
}

/// The half queue offsets an op record names: Java 4.x writes one, 5.x a comma-separated list.
/// Anything unparsable is ignored (a broken op can only cause an extra check).
pub fn parse_op_body(body: &[u8]) -> Vec<i64> {
    std::str::from_utf8(body)
        .map(|s| s.split(',').filter_map(|o| o.trim().parse::<i64>().ok()).filter(|o| *o >= 0).collect())
        .unwrap_or_default()
}

/// `TRANSACTION_CHECK_TIMES` of a half (0 when absent or unreadable).
pub fn check_times(half: &MessageExt) -> u32 {
    half.message.properties.get(properties::TRANSACTION_CHECK_TIMES).and_then(|t| t.parse().ok()).unwrap_or(0)
}

/// The half queue offset of the original half a record claims to descend from: a check copy names
/// it in `TRAN_PREPARED_QUEUE_OFFSET` (as Java's immunity copies do), an original is its own root.
/// A value that cannot be a root (unparsable, negative, or after the record itself) counts as
/// absent. A claim is only trusted once [`is_same_transaction`] holds for the record at the root
/// (see `verified_root`): a wrong root could end another transaction.
pub fn chain_root(half: &MessageExt) -> i64 {
    half.message
        .property(properties::TRAN_PREPARED_QUEUE_OFFSET)
        .and_then(|r| r.parse::<i64>().ok())
        .filter(|r| (0..=half.queue_offset).contains(r))
        .unwrap_or(half.queue_offset)
}

/// Whether `root` (the record at a claimed chain root) is the original of `half`: the same
/// transaction id (UNIQ_KEY) from the same producer group. Without a transaction id nothing is.
pub fn is_same_transaction(root: &MessageExt, half: &MessageExt) -> bool {
    let uniq = half.message.uniq_key();
    uniq.is_some()
        && root.message.uniq_key() == uniq
        && root.message.property(properties::PGROUP) == half.message.property(properties::PGROUP)
}

/// `renewHalfMessageInner`: the copy of a half re-put at the half queue's end before a check, with
/// its check count raised and its chain's `root` named. Born time and host are kept: the copy is
/// as old as its original.
pub fn check_copy(
    half: &MessageExt,
    checks: u32,
    root: i64,
    store_host: SocketAddr,
    store_timestamp: i64,
) -> MessageExt {
    let mut message = half.message.clone();
    message.properties.insert(properties::TRANSACTION_CHECK_TIMES, checks.to_string());
    message.properties.insert(properties::TRAN_PREPARED_QUEUE_OFFSET, root.to_string());
    MessageExt {
        message,
        queue_id: HALF_QUEUE_ID,
        sys_flag: half.sys_flag,
        born_timestamp: half.born_timestamp,
        born_host: half.born_host,
        store_timestamp,
        store_host,
        reconsume_times: half.reconsume_times,
        ..MessageExt::default()
    }
}

/// `DefaultTransactionalMessageCheckListener.resolveDiscardMsg`: a half checked too often is given
/// up to `TRANS_CHECK_MAX_TIME_TOPIC`, where an operator can still find it.
pub fn discard_copy(half: &MessageExt, root: i64, store_host: SocketAddr, store_timestamp: i64) -> MessageExt {
    let mut copy = check_copy(half, check_times(half), root, store_host, store_timestamp);
    copy.message.topic = RMQ_SYS_TRANS_CHECK_MAX_TIME_TOPIC.into();
    copy
}

/// What the check round does with one half.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HalfDecision {
    /// Checked `transactionCheckMax` times already: give it up.
    Discard,
    /// Too young to check: stop the round, come back in this many ms.
    Wait(u64),
    /// Old enough to check, but its `CHECK_IMMUNITY_TIME_IN_SECONDS` has not passed: re-put it
    /// (the count unchanged) and go on, so one immune half never holds up the others.
    Immune,
    /// Ask its producer.
    Check,
}

/// `needDiscard` / `isNeedCheck`: a half is checked once `transactionTimeOut` has passed since it
/// was born or, for a copy, since its previous check was sent (Java measures copies from their
/// birth too, which re-checks a copy at the very next round even when its answer is on the way).
/// `CHECK_IMMUNITY_TIME_IN_SECONDS` (from birth) defers the first check further. A time in the
/// future (the producer's clock is ahead) is due at once, as in Java.
pub fn decide_half(half: &MessageExt, now_ms: i64, timeout_ms: u64, check_max: u32) -> HalfDecision {
    let checks = check_times(half);
    if checks >= check_max {
        return HalfDecision::Discard;
    }
    let since = if checks == 0 { half.born_timestamp } else { half.store_timestamp };
    let age_ms = u64::try_from(now_ms.saturating_sub(since)).unwrap_or(u64::MAX);
    if age_ms < timeout_ms {
        return HalfDecision::Wait(timeout_ms - age_ms);
    }
    let immunity_ms = half
        .message
        .properties
        .get(properties::CHECK_IMMUNITY_TIME_IN_SECONDS)
        .and_then(|s| s.parse::<u64>().ok())
        .map_or(0, |s| s.saturating_mul(1_000));
    let born_age_ms = u64::try_from(now_ms.saturating_sub(half.born_timestamp)).unwrap_or(u64::MAX);
    if checks == 0 && born_age_ms < immunity_ms { HalfDecision::Immune } else { HalfDecision::Check }
}

// ---------------------------------------------------------------------------------------------
// The leader's view: which halves are ended, where the check stands.
// ---------------------------------------------------------------------------------------------

/// The half offsets ops named, in two parts of `capacity` each. Those the check progress has not
/// reached are what the round looks for: kept in order, they move behind once the progress passes
/// them. Those behind (recognising a repeated END, or a later copy by its chain's root) are
/// forgotten earliest named first, not lowest first: a long-lived chain's root is low. Past either
/// capacity a repeat may commit again (at least once, as in RocketMQ).
#[derive(Debug)]
struct EndedMemory {
    ahead: BTreeSet<i64>,
    behind: HashSet<i64>,
    /// `behind`, earliest named first.
    behind_order: VecDeque<i64>,
    capacity: usize,
}

impl EndedMemory {
    fn new(capacity: usize) -> Self {
        EndedMemory { ahead: BTreeSet::new(), behind: HashSet::new(), behind_order: VecDeque::new(), capacity }
    }

    fn contains(&self, offset: i64) -> bool {
        self.ahead.contains(&offset) || self.behind.contains(&offset)
    }

    /// Remembers `offset`, given the check progress; one already known keeps its place.
    fn insert(&mut self, offset: i64, progress: i64) {
        if self.contains(offset) {
            return;
        }
        if offset >= progress {
            self.ahead.insert(offset);
            if self.ahead.len() > self.capacity {
                // The highest: the round reaches it last, and may check it once more.
                self.ahead.pop_last();
            }
        } else {
            self.remember_behind(offset);
        }
    }

    /// The check progress moved to `progress`: what it passed moves behind.
    fn advance(&mut self, progress: i64) {
        while let Some(offset) = self.ahead.first().copied().filter(|o| *o < progress) {
            self.ahead.pop_first();
            self.remember_behind(offset);
        }
    }

    fn remember_behind(&mut self, offset: i64) {
        if self.behind.insert(offset) {
            self.behind_order.push_back(offset);
        }
        while self.behind_order.len() > self.capacity {
            if let Some(forgotten) = self.behind_order.pop_front() {
                self.behind.remove(&forgotten);
            }
        }
    }
}

/// What a ready leader knows of its half and op queues, rebuilt from replicated state each term.
#[derive(Debug)]
struct LeaderView {
    term: u64,
    /// Next half queue offset the check round looks at (replicated as `replicated.0` once proposed).
    half_next: i64,
    /// Next op queue offset to read.
    op_read_next: i64,
    /// Ops read whose halves are not all behind `half_next`: op offset → largest half offset named.
    pending_ops: BTreeMap<i64, i64>,
    /// Half offsets an op names: the chain roots of ended transactions, and the copies their ENDs
    /// named (read back, or written by this leader), behind the progress too, so a repeated
    /// END_TRANSACTION, or one for another record of the same chain, is recognised; the earliest
    /// named are forgotten past [`TRANSACTION_ENDED_MEMORY_MAX_COUNT`] (then a repeat may commit
    /// again: at least once).
    ended: EndedMemory,
    /// Chain roots an END_TRANSACTION is ending right now.
    ending: HashSet<i64>,
    /// The op progress as loaded. The ops before it name only halves behind the check progress,
    /// but their chains may have copies ahead of it: they are read back as well (as many ops as the
    /// memory's behind part holds) to fill `ended`, and never hold or move the op progress.
    op_floor: i64,
    /// (half, op) progress as last replicated.
    replicated: (i64, i64),
    /// When this leader loaded the view (the no-producer grace runs from here).
    loaded_at: std::time::Instant,
}

impl LeaderView {
    fn load(ctx: &BrokerContext, term: u64) -> LeaderView {
        let (half_min, _) = ctx.store.queue_offsets(RMQ_SYS_TRANS_HALF_TOPIC, HALF_QUEUE_ID);
        let (op_min, _) = ctx.store.queue_offsets(RMQ_SYS_TRANS_OP_HALF_TOPIC, HALF_QUEUE_ID);
        let (half, op) = {
            let meta = ctx.store.metadata();
            let q = |topic: &str| meta.offsets.query(topic, CID_RMQ_SYS_TRANS, HALF_QUEUE_ID);
            (q(RMQ_SYS_TRANS_HALF_TOPIC), q(RMQ_SYS_TRANS_OP_HALF_TOPIC))
        };
        let half_next = half.unwrap_or(0).max(i64::try_from(half_min).unwrap_or(i64::MAX));
        let op_min = i64::try_from(op_min).unwrap_or(i64::MAX);
        let op_next = op.unwrap_or(0).max(op_min);
        // An op names one or two offsets (the record ended, and its chain's root).
        let memory = i64::try_from(TRANSACTION_ENDED_MEMORY_MAX_COUNT / 2).unwrap_or(i64::MAX);
        let op_read_next = op_next.saturating_sub(memory).max(op_min);
        info!(term, half_next, op_next, op_read_next, "transaction check state loaded on this leader");
        LeaderView {
            term,
            half_next,
            op_read_next,
            pending_ops: BTreeMap::new(),
            ended: EndedMemory::new(TRANSACTION_ENDED_MEMORY_MAX_COUNT),
            ending: HashSet::new(),
            op_floor: op_next,
            replicated: (half.unwrap_or(-1), op.unwrap_or(-1)),
            loaded_at: std::time::Instant::now(),
        }
    }

    /// Reads at most one batch of the op records appended since the last look (the caller holds
    /// the view's lock: the work per call is bounded). Returns whether every op is read.
    fn read_ops(&mut self, ctx: &BrokerContext) -> bool {
        if self.pending_ops.len() >= TRANSACTION_OP_PENDING_MAX_COUNT {
            // Nothing more can be read until the progress catches up; a half whose op is unread may
            // be checked once more (a duplicate check, never a loss).
            warn!(pending = self.pending_ops.len(), "transaction ops far ahead of the check progress; reading paused");
            return true;
        }
        let (min, max) = ctx.store.queue_offsets(RMQ_SYS_TRANS_OP_HALF_TOPIC, HALF_QUEUE_ID);
        let from = self.op_read_next.max(i64::try_from(min).unwrap_or(i64::MAX));
        let Ok(from_u) = u64::try_from(from) else { return true };
        if from_u >= max {
            self.op_read_next = from;
            return true;
        }
        let units = read_units(ctx, RMQ_SYS_TRANS_OP_HALF_TOPIC, from_u, TRANSACTION_OP_READ_BATCH_MAX_COUNT);
        for (i, unit) in units.iter().enumerate() {
            let op_offset = from + i as i64;
            let halves = match read_message(ctx, unit) {
                Ok(op) if op.message.tags() == Some(REMOVE_TAG) => parse_op_body(&op.message.body),
                Ok(_) => Vec::new(),
                Err(e) => {
                    warn!(op_offset, error = %e, "transaction op unreadable; skipped");
                    Vec::new()
                }
            };
            self.note_ended(op_offset, &halves);
        }
        self.op_read_next = from + units.len() as i64;
        u64::try_from(self.op_read_next).is_ok_and(|n| n >= max)
    }

    fn note_ended(&mut self, op_offset: i64, halves: &[i64]) {
        for h in halves {
            self.ended.insert(*h, self.half_next);
        }
        if op_offset < self.op_floor {
            // Behind the replicated op progress: read back for `ended` only.
            return;
        }
        if let Some(max) = halves.iter().copied().filter(|h| *h >= self.half_next).max() {
            self.pending_ops.insert(op_offset, max);
        }
    }

    /// Moves the check progress to `half_next` (never back).
    fn advance(&mut self, half_next: i64) {
        self.half_next = self.half_next.max(half_next);
        let progress = self.half_next;
        self.ended.advance(progress);
        self.pending_ops.retain(|_, max| *max >= progress);
    }

    /// The op progress: every op before it names only halves behind the check progress.
    fn op_next(&self) -> i64 {
        self.pending_ops.keys().next().copied().unwrap_or(self.op_read_next).max(self.op_floor)
    }

    /// Whether the chain of the half at `offset` (whose root is `root`) is ended.
    fn is_ended(&self, offset: i64, root: i64) -> bool {
        self.ended.contains(root) || self.ended.contains(offset)
    }
}

/// The leader's transaction bookkeeping, shared by END_TRANSACTION and the check service.
#[derive(Debug, Default)]
pub struct TransactionState {
    view: Mutex<Option<LeaderView>>,
}

/// Why the view of a term cannot be used.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ViewError {
    /// A later term's view replaced it: the caller lost leadership in between.
    Superseded,
}

impl TransactionState {
    /// Nothing known yet; loaded by the first use in a term.
    pub fn new() -> Self {
        TransactionState::default()
    }

    fn lock(&self) -> MutexGuard<'_, Option<LeaderView>> {
        self.view.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// `f` on the view of `term` (loaded if the view is an older term's; refused if a newer one's),
    /// after reading at most one batch of new ops; `f` learns whether every op is read.
    fn with_view<R>(
        &self,
        ctx: &BrokerContext,
        term: u64,
        f: impl FnOnce(&mut LeaderView, bool) -> R,
    ) -> Result<R, ViewError> {
        let mut guard = self.lock();
        match guard.as_ref().map(|v| v.term) {
            Some(t) if t > term => return Err(ViewError::Superseded),
            Some(t) if t == term => {}
            _ => *guard = Some(LeaderView::load(ctx, term)),
        }
        let Some(view) = guard.as_mut() else { return Err(ViewError::Superseded) };
        let caught_up = view.read_ops(ctx);
        Ok(f(view, caught_up))
    }

    /// Claims the chain of `half` (rooted at `root`) for one END_TRANSACTION of `term`; released by
    /// dropping the claim.
    fn claim<'a>(&'a self, ctx: &BrokerContext, term: u64, half: i64, root: i64) -> Result<Claim<'a>, ClaimRefused> {
        self.with_view(ctx, term, |v, caught_up| {
            if v.is_ended(half, root) || v.ending.contains(&root) {
                Err(ClaimRefused::AlreadyEnded)
            } else if !caught_up {
                // An op not read yet may name it: ending it now could commit it twice.
                Err(ClaimRefused::Loading)
            } else {
                v.ending.insert(root);
                Ok(())
            }
        })
        .map_err(|_| ClaimRefused::Superseded)??;
        Ok(Claim { state: self, term, half, root, ended: false })
    }

    /// Whether the chain of the half at `offset` is ended, or being ended, in `term`'s view.
    fn chain_state(&self, term: u64, offset: i64, root: i64) -> Result<ChainState, ViewError> {
        let guard = self.lock();
        let v = guard.as_ref().filter(|v| v.term == term).ok_or(ViewError::Superseded)?;
        Ok(if v.is_ended(offset, root) {
            ChainState::Ended
        } else if v.ending.contains(&root) {
            ChainState::Ending
        } else {
            ChainState::Open
        })
    }
}

/// Where a half's transaction stands, as far as this leader knows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ChainState {
    /// An op names its chain: the round passes it.
    Ended,
    /// An END_TRANSACTION of its chain is being written: the round stops at it.
    Ending,
    /// Unanswered so far: the round decides.
    Open,
}

/// Why an END_TRANSACTION does not write.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ClaimRefused {
    /// An op names the half already, or another request is ending it.
    AlreadyEnded,
    /// The new leader is still reading its op queue back.
    Loading,
    /// Leadership moved on while the request waited.
    Superseded,
}

/// One END_TRANSACTION's hold on a chain; the drop releases it (also when the request fails or
/// its task is cancelled), recording the chain (and the half ended) when [`Claim::ended`] was
/// called.
struct Claim<'a> {
    state: &'a TransactionState,
    term: u64,
    half: i64,
    root: i64,
    ended: bool,
}

impl Claim<'_> {
    fn ended(mut self) {
        self.ended = true;
    }
}

impl Drop for Claim<'_> {
    fn drop(&mut self) {
        let mut guard = self.state.lock();
        if let Some(v) = guard.as_mut().filter(|v| v.term == self.term) {
            v.ending.remove(&self.root);
            if self.ended {
                v.ended.insert(self.root, v.half_next);
                v.ended.insert(self.half, v.half_next);
            }
        }
    }
}

fn read_units(ctx: &BrokerContext, topic: &str, from: u64, max: usize) -> Vec<CqUnit> {
    let cq = ctx.store.consume_queues();
    match cq.get(topic, HALF_QUEUE_ID).and_then(|q| q.read(from, max)) {
        Some(units) => units.iter().map(|(_, u)| u).collect(),
        None => Vec::new(),
    }
}

fn read_message(ctx: &BrokerContext, unit: &CqUnit) -> Result<MessageExt, String> {
    if !unit.is_message() {
        return Err("not a message unit".into());
    }
    read_at(ctx, unit.phy_offset)
}

fn read_at(ctx: &BrokerContext, phy_offset: i64) -> Result<MessageExt, String> {
    let bytes = record_at(ctx.store.commit_log(), phy_offset).map_err(|e| e.to_string())?;
    decode_record_bytes(&bytes, DecodeOptions::default()).map(|(m, _)| m).map_err(|e| e.to_string())
}

/// The root of `half`'s chain, trusted only when the record at the claimed root is the same
/// transaction ([`is_same_transaction`]); otherwise (purged, unreadable, or another transaction)
/// the half is its own root, which can cost a duplicate commit but never ends another transaction.
fn verified_root(ctx: &BrokerContext, half: &MessageExt) -> i64 {
    let claimed = chain_root(half);
    if claimed == half.queue_offset {
        return claimed;
    }
    let Ok(at) = u64::try_from(claimed) else { return half.queue_offset };
    match read_units(ctx, RMQ_SYS_TRANS_HALF_TOPIC, at, 1).first().map(|unit| read_message(ctx, unit)) {
        Some(Ok(root)) if root.queue_offset == claimed && is_same_transaction(&root, half) => claimed,
        _ => {
            debug!(half = half.queue_offset, claimed, "the claimed chain root is not this transaction's; ignored");
            half.queue_offset
        }
    }
}

fn encode_request(records: &[MessageExt]) -> Result<SendRequest, String> {
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
    let half = read_at(ctx, at.commit_log_offset).map_err(|e| fail(format!("no message at {id}: {e}")))?;
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
    let half = read_at(ctx, h.commit_log_offset)
        .map_err(|e| refuse(ResponseCode::SystemError, format!("Find prepared transaction message failed: {e}")))?;
    check_prepare_message(&half, &h)?;
    if commit {
        check_real_queue(ctx, &half)?;
    }
    let root = verified_root(ctx, &half);
    let claim = match ctx.transactions.claim(ctx, term, half.queue_offset, root) {
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

// ---------------------------------------------------------------------------------------------
// The check service.
// ---------------------------------------------------------------------------------------------

/// Starts the check service; it checks only while this replica is a ready leader, the first round
/// one `transactionCheckInterval` after it became one (producers need that long to heartbeat a new
/// leader, and a check with no producer to ask would spend one of the half's checks for nothing).
pub fn spawn(ctx: Arc<BrokerContext>, cancel: CancellationToken) -> JoinHandle<()> {
    tokio::spawn(run(ctx, cancel))
}

async fn run(ctx: Arc<BrokerContext>, cancel: CancellationToken) {
    let interval = ctx.config.transaction_check_interval;
    let mut leadership = ctx.replica.leadership_watch();
    let mut watching = true;
    // (term, when its first round is due)
    let mut leading: Option<(u64, tokio::time::Instant)> = None;
    loop {
        let now = tokio::time::Instant::now();
        let wait = match ctx.replica.ready_term() {
            None => {
                leading = None;
                interval.min(Duration::from_millis(500))
            }
            Some(term) => match leading {
                Some((t, due)) if t == term && due <= now => match round(&ctx, term).await {
                    Ok(()) => interval,
                    Err(()) => Duration::from_millis(TRANSACTION_CHECK_RETRY_BACKOFF_MS),
                },
                Some((t, due)) if t == term => due - now,
                _ => {
                    leading = Some((term, now + interval));
                    // END_TRANSACTION is refused until the ops are read back: read them now.
                    if catch_up_ops(&ctx, term).await.is_err() {
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
async fn catch_up_ops(ctx: &BrokerContext, term: u64) -> Result<(), ()> {
    while !ctx.transactions.with_view(ctx, term, |_, caught_up| caught_up).map_err(|_| ())? {
        tokio::task::yield_now().await;
    }
    Ok(())
}

/// One pass over the half queue, from the check progress to where the queue ended when the pass
/// began: the copies it re-puts are the next pass's business (Java stops at halves stored after the
/// round started).
async fn round(ctx: &BrokerContext, term: u64) -> Result<(), ()> {
    // Every op must be known before a half is judged unanswered.
    catch_up_ops(ctx, term).await?;
    let (_, round_end) = ctx.store.queue_offsets(RMQ_SYS_TRANS_HALF_TOPIC, HALF_QUEUE_ID);
    loop {
        let (passed, more) = round_batch(ctx, term, round_end).await?;
        propose_progress(ctx, term).await;
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
async fn round_batch(ctx: &BrokerContext, term: u64, round_end: u64) -> Result<(usize, bool), ()> {
    let (timeout, check_max) = ctx.live.read(|c| (c.transaction_time_out, c.transaction_check_max));
    let timeout_ms = u64::try_from(timeout.as_millis()).unwrap_or(u64::MAX);
    let (min, max) = ctx.store.queue_offsets(RMQ_SYS_TRANS_HALF_TOPIC, HALF_QUEUE_ID);
    let end = max.min(round_end);
    let batch_end = |from: i64| from.saturating_add(TRANSACTION_CHECK_BATCH_MAX_COUNT as i64);
    let (from, ended, ending, in_grace) = ctx
        .transactions
        .with_view(ctx, term, |v, _| {
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
    let units = read_units(ctx, RMQ_SYS_TRANS_HALF_TOPIC, from_u, count);
    let now = now_ms() as i64;
    let mut passed = 0usize;
    let mut puts: Vec<Put> = Vec::new();
    let mut put_bytes = 0usize;
    let mut stopped = false;
    let max_bytes = ctx.group_commit.entry_max_bytes();
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
        let half = match read_message(ctx, unit) {
            Ok(h) => h,
            Err(e) => {
                warn!(half = offset, error = %e, "half message unreadable; skipped");
                passed = i + 1;
                continue;
            }
        };
        let root = verified_root(ctx, &half);
        if root != offset {
            // A check copy: its chain may have ended through another of its records.
            match ctx.transactions.chain_state(term, offset, root).map_err(|_| ())? {
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
                Put { record: discard_copy(&half, root, ctx.store_host, now), check: false }
            }
            HalfDecision::Immune => Put { record: check_copy(&half, 0, root, ctx.store_host, now), check: false },
            HalfDecision::Check
                if in_grace && !ctx.clients.has_producer(half.message.property(properties::PGROUP).unwrap_or("")) =>
            {
                // A new leader: its producers may not have heartbeaten it yet. Java would spend a
                // check on nobody (and after transactionCheckMax give the half up); wait instead.
                stopped = true;
                break;
            }
            HalfDecision::Check => Put {
                record: check_copy(&half, check_times(&half).saturating_add(1), root, ctx.store_host, now),
                check: true,
            },
        };
        put_bytes = put_bytes.saturating_add(usize::try_from(unit.size).unwrap_or(0));
        puts.push(put);
        passed = i + 1;
    }
    if !puts.is_empty() {
        if puts.iter().any(|p| p.record.message.topic == RMQ_SYS_TRANS_CHECK_MAX_TIME_TOPIC) {
            ensure_topic(ctx, one_queue_topic(RMQ_SYS_TRANS_CHECK_MAX_TIME_TOPIC)).await.map_err(|_| ())?;
        }
        let records: Vec<MessageExt> = puts.iter().map(|p| p.record.clone()).collect();
        let request = encode_request(&records).map_err(|e| warn!(error = %e, "check copies cannot be encoded"))?;
        let stored = ctx.store_records(request).await.map_err(|e| {
            debug!(error = %e, "check copies not stored; the round retries");
        })?;
        for (put, at) in puts.into_iter().zip(stored) {
            if put.check {
                send_check(ctx, put.record, at);
            }
        }
    }
    let next = from + passed as i64;
    ctx.transactions.with_view(ctx, term, |v, _| v.advance(next)).map_err(|_| ())?;
    let more = !stopped && u64::try_from(next).is_ok_and(|n| n < end);
    Ok((passed, more))
}

/// Replicates the check progress when it moved.
async fn propose_progress(ctx: &BrokerContext, term: u64) {
    let Ok((half, op, replicated)) =
        ctx.transactions.with_view(ctx, term, |v, _| (v.half_next, v.op_next(), v.replicated))
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
    match ctx.replica.propose(&command).await {
        Ok(()) => {
            let mut guard = ctx.transactions.lock();
            if let Some(v) = guard.as_mut().filter(|v| v.term == term) {
                v.replicated = (half, op);
            }
        }
        // Proposed again after the next round; a new leader re-checks from the replicated progress.
        Err(e) => debug!(error = %e, "transaction check progress not replicated yet"),
    }
}

/// `sendCheckMessage`: asks one producer of the half's group about the copy just stored, oneway.
fn send_check(ctx: &BrokerContext, mut copy: MessageExt, at: StoredRecord) {
    let group = copy.message.property(properties::PGROUP).unwrap_or_default().to_owned();
    let Some(connection) = ctx.clients.producer_connection(&group) else {
        debug!(group, half = at.queue_offset, "no producer of the group connected; the half is checked again later");
        return;
    };
    let offset_msg_id = OffsetMsgId::new(ctx.store_host, at.phy_offset).to_string();
    let uniq = copy.message.uniq_key().map(str::to_owned);
    let header = CheckTransactionStateRequestHeader {
        tran_state_table_offset: at.queue_offset,
        commit_log_offset: at.phy_offset,
        msg_id: uniq.clone(),
        transaction_id: uniq,
        offset_msg_id: Some(offset_msg_id),
        bname: Some(ctx.config.broker_name.clone()),
    };
    // The producer sees the message as it was sent: real topic and queue (Java restores them).
    if let Ok((topic, queue_id)) = real_target(&copy) {
        copy.message.topic = topic.into();
        copy.queue_id = queue_id;
    }
    copy.queue_offset = at.queue_offset;
    copy.commit_log_offset = at.phy_offset;
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

#[cfg(test)]
mod tests {
    use super::*;

    fn host() -> SocketAddr {
        "10.0.0.1:10911".parse().unwrap()
    }

    fn half(born: i64) -> MessageExt {
        let mut message = Message::new("Orders", &b"body"[..]).with_tags("TagA");
        message.properties.insert(properties::TRAN_MSG, "true");
        message.properties.insert(properties::PGROUP, "tx-group");
        message.properties.insert(properties::DELAY, "3");
        message.properties.insert(properties::UNIQ_KEY, "TX-1");
        let mut m = MessageExt {
            message,
            queue_id: 5,
            sys_flag: raftmq_common::message::sys_flag::TRANSACTION_PREPARED_TYPE,
            born_timestamp: born,
            born_host: host(),
            store_host: host(),
            ..MessageExt::default()
        };
        redirect_half(&mut m);
        m.queue_offset = 7;
        m.commit_log_offset = 4242;
        m
    }

    #[test]
    fn a_half_goes_to_the_half_queue_without_transaction_bits_or_delay() {
        let h = half(0);
        assert_eq!((h.message.topic.as_str(), h.queue_id), (RMQ_SYS_TRANS_HALF_TOPIC, 0));
        assert_eq!(TransactionType::of(h.sys_flag), TransactionType::Not);
        assert!(has_queue_offset(h.sys_flag), "a half needs a unit in the half queue");
        assert_eq!(h.message.property(properties::REAL_TOPIC), Some("Orders"));
        assert_eq!(h.message.property(properties::REAL_QID), Some("5"));
        assert_eq!(h.message.property(properties::DELAY), None);
        // A re-sent message that a check copy once produced starts a chain of its own.
        let mut resent = Message::new("Orders", &b"body"[..]);
        resent.properties.insert(properties::TRAN_PREPARED_QUEUE_OFFSET, "3");
        resent.properties.insert(properties::TRANSACTION_CHECK_TIMES, "14");
        let mut resent = MessageExt { message: resent, queue_offset: 9, ..MessageExt::default() };
        redirect_half(&mut resent);
        assert_eq!(resent.message.property(properties::TRAN_PREPARED_QUEUE_OFFSET), None);
        assert_eq!(check_times(&resent), 0);
        assert_eq!(chain_root(&resent), 9);
    }

    #[test]
    fn a_commit_restores_the_real_queue_and_points_at_the_half() {
        let c = committed_message(&half(1), host(), 99).unwrap();
        assert_eq!((c.message.topic.as_str(), c.queue_id), ("Orders", 5));
        assert_eq!(TransactionType::of(c.sys_flag), TransactionType::Commit);
        assert_eq!(c.prepared_transaction_offset, 4242);
        assert_eq!((c.born_timestamp, c.store_timestamp), (1, 99));
        assert_eq!(c.message.tags(), Some("TagA"));
        assert_eq!(c.message.property(properties::PGROUP), Some("tx-group"));
        for gone in [properties::REAL_TOPIC, properties::REAL_QID, properties::TRAN_MSG] {
            assert_eq!(c.message.property(gone), None, "{gone}");
        }
        let mut plain = half(1);
        plain.message.topic = "Orders".into();
        assert_eq!(committed_message(&plain, host(), 0), Err(HalfError::NotAHalf("Orders".into())));
        let mut bad = half(1);
        bad.message.properties.insert(properties::REAL_QID, "-1");
        assert_eq!(committed_message(&bad, host(), 0), Err(HalfError::BadRealQueueId(Some("-1".into()))));
    }

    #[test]
    fn op_bodies_name_half_offsets() {
        let op = op_message(7, 7, host(), 5);
        assert_eq!((op.message.topic.as_str(), op.message.tags()), (RMQ_SYS_TRANS_OP_HALF_TOPIC, Some(REMOVE_TAG)));
        assert_eq!(parse_op_body(&op.message.body), vec![7]);
        assert_eq!(parse_op_body(&op_message(9, 2, host(), 5).message.body), vec![9, 2], "a copy names its root");
        assert_eq!(parse_op_body(b"1,2,3,"), vec![1, 2, 3], "5.x batches ops");
        assert_eq!(parse_op_body(b"x,-4,9"), vec![9]);
        assert_eq!(parse_op_body(&[0xff, 0xfe]), Vec::<i64>::new());
    }

    #[test]
    fn check_copies_name_the_root_of_their_chain_and_commits_drop_it() {
        let original = half(1_000);
        assert_eq!(chain_root(&original), 7, "an original is its own root");
        let mut copy = check_copy(&original, 1, chain_root(&original), host(), 10_000);
        copy.queue_offset = 30;
        assert_eq!(copy.message.property(properties::TRAN_PREPARED_QUEUE_OFFSET), Some("7"));
        assert_eq!(chain_root(&copy), 7);
        let mut copy_of_copy = check_copy(&copy, 2, chain_root(&copy), host(), 20_000);
        copy_of_copy.queue_offset = 55;
        assert_eq!(chain_root(&copy_of_copy), 7, "the root is kept, not the copy's offset");
        assert!(is_same_transaction(&original, &copy_of_copy));
        let mut other = original.clone();
        other.message.properties.insert(properties::UNIQ_KEY, "TX-2");
        assert!(!is_same_transaction(&other, &copy_of_copy), "another transaction id");
        other.message.properties.insert(properties::UNIQ_KEY, "TX-1");
        other.message.properties.insert(properties::PGROUP, "another-group");
        assert!(!is_same_transaction(&other, &copy_of_copy), "another producer group");
        let mut anonymous = copy_of_copy.clone();
        anonymous.message.properties.remove(properties::UNIQ_KEY);
        let mut anonymous_root = original.clone();
        anonymous_root.message.properties.remove(properties::UNIQ_KEY);
        assert!(!is_same_transaction(&anonymous_root, &anonymous), "no id: no chain");
        let mut immune = check_copy(&original, 0, 7, host(), 10_000);
        immune.queue_offset = 31;
        assert_eq!(chain_root(&immune), 7);
        for bogus in ["56", "-1", "x", ""] {
            let mut b = copy_of_copy.clone();
            b.message.properties.insert(properties::TRAN_PREPARED_QUEUE_OFFSET, bogus);
            assert_eq!(chain_root(&b), 55, "{bogus:?} cannot be a root");
        }
        let committed = committed_message(&copy_of_copy, host(), 1).unwrap();
        assert_eq!(committed.message.property(properties::TRAN_PREPARED_QUEUE_OFFSET), None);
        assert_eq!(committed.prepared_transaction_offset, copy_of_copy.commit_log_offset);
    }

    #[test]
    fn an_ended_chain_covers_all_its_records_and_old_ops_never_move_the_progress_back() {
        let mut v = LeaderView {
            term: 1,
            half_next: 40,
            op_read_next: 0,
            pending_ops: BTreeMap::new(),
            ended: EndedMemory::new(TRANSACTION_ENDED_MEMORY_MAX_COUNT),
            ending: HashSet::new(),
            replicated: (40, 8),
            loaded_at: std::time::Instant::now(),
            op_floor: 8,
        };
        // Read back from before the op progress: op 3 ended the copy at 30 of the chain rooted at 7.
        v.note_ended(3, &[30, 7]);
        // Behind the op progress, an op naming a half ahead of the check progress (a reset moved
        // it back, or a broken body) neither holds nor moves the op progress.
        v.note_ended(5, &[1 << 40]);
        assert!(v.pending_ops.is_empty(), "{:?}", v.pending_ops);
        v.op_read_next = 6;
        assert_eq!(v.op_next(), 8, "ops read back behind the progress do not move it back");
        assert!(v.is_ended(45, 7), "a later copy of the chain is ended with it");
        assert!(v.is_ended(30, 30) && v.is_ended(7, 7));
        assert!(!v.is_ended(45, 12));
        v.op_read_next = 9;
        assert_eq!(v.op_next(), 9);
    }

    #[test]
    fn the_ended_memory_keeps_what_the_round_needs_and_forgets_the_earliest_named_behind() {
        let mut m = EndedMemory::new(3);
        // Behind the progress (200): named 7, 100, 101, then 5.
        for offset in [7, 100, 101] {
            m.insert(offset, 200);
        }
        m.insert(100, 200);
        assert!(m.contains(7) && m.contains(100) && m.contains(101), "a repeat takes no room");
        m.insert(5, 200);
        assert!(!m.contains(7), "7 was named first");
        assert!(m.contains(5) && m.contains(100) && m.contains(101));
        // Ahead of it: never pushed out by what is named behind.
        for offset in [300, 250, 260] {
            m.insert(offset, 200);
        }
        for offset in [1, 2, 3] {
            m.insert(offset, 200);
        }
        assert!(m.contains(250) && m.contains(260) && m.contains(300));
        m.insert(280, 200);
        assert!(!m.contains(300), "past capacity ahead, the highest goes: the round reaches it last");
        // The progress passes 250 and 260: they move behind, the earliest named there go.
        m.advance(270);
        assert!(m.contains(250) && m.contains(260) && m.contains(280));
        assert!(!m.contains(1) && !m.contains(2), "pushed out behind");
        assert_eq!((m.ahead.len(), m.behind.len(), m.behind_order.len()), (1, 3, 3));
    }

    #[test]
    fn halves_are_checked_after_the_timeout_and_given_up_after_the_maximum() {
        let h = half(1_000);
        assert_eq!(decide_half(&h, 1_500, 6_000, 15), HalfDecision::Wait(5_500));
        assert_eq!(decide_half(&h, 7_000, 6_000, 15), HalfDecision::Check);
        assert_eq!(decide_half(&h, 0, 6_000, 15), HalfDecision::Check, "born in the future");
        let copy = check_copy(&h, 15, 7, host(), 10_000);
        assert_eq!(check_times(&copy), 15);
        assert_eq!((copy.born_timestamp, copy.store_timestamp, copy.queue_id), (1_000, 10_000, 0));
        assert_eq!(copy.message.topic, RMQ_SYS_TRANS_HALF_TOPIC);
        assert_eq!(decide_half(&copy, 11_000, 6_000, 15), HalfDecision::Discard);
        assert_eq!(discard_copy(&copy, 7, host(), 11).message.topic, RMQ_SYS_TRANS_CHECK_MAX_TIME_TOPIC);
    }

    #[test]
    fn a_copy_waits_a_timeout_after_its_check_and_immunity_defers_only_the_first() {
        let h = half(1_000);
        let copy = check_copy(&h, 1, 7, host(), 10_000);
        // Born long ago, but checked at 10 s: its answer is on the way.
        assert_eq!(decide_half(&copy, 12_000, 6_000, 15), HalfDecision::Wait(4_000));
        assert_eq!(decide_half(&copy, 16_000, 6_000, 15), HalfDecision::Check);
        let mut immune = h.clone();
        immune.message.properties.insert(properties::CHECK_IMMUNITY_TIME_IN_SECONDS, "60");
        assert_eq!(decide_half(&immune, 2_000, 6_000, 15), HalfDecision::Wait(5_000), "the timeout first");
        assert_eq!(decide_half(&immune, 7_000, 6_000, 15), HalfDecision::Immune, "re-put, not a stop");
        assert_eq!(decide_half(&immune, 61_000, 6_000, 15), HalfDecision::Check);
        immune.message.properties.insert(properties::CHECK_IMMUNITY_TIME_IN_SECONDS, "x");
        assert_eq!(decide_half(&immune, 7_000, 6_000, 15), HalfDecision::Check, "unparsable: no immunity");
    }

    #[test]
    fn ops_ahead_of_the_progress_hold_the_op_progress_back() {
        let mut v = LeaderView {
            term: 1,
            half_next: 10,
            op_read_next: 0,
            pending_ops: BTreeMap::new(),
            ended: EndedMemory::new(TRANSACTION_ENDED_MEMORY_MAX_COUNT),
            ending: HashSet::new(),
            replicated: (-1, -1),
            loaded_at: std::time::Instant::now(),
            op_floor: 0,
        };
        v.note_ended(0, &[5]);
        v.note_ended(1, &[12]);
        v.note_ended(2, &[11, 15]);
        v.op_read_next = 3;
        assert!([5, 11, 12, 15].iter().all(|h| v.ended.contains(*h)), "behind the progress too");
        assert_eq!(v.op_next(), 1, "op 0 names a half behind the progress only");
        v.advance(13);
        assert_eq!(v.op_next(), 2);
        v.advance(16);
        assert_eq!(v.op_next(), 3);
        v.advance(2);
        assert_eq!(v.half_next, 16, "the progress never moves back");
        assert!(v.ended.contains(12), "a repeated END of a passed half is still recognised");
    }
}
