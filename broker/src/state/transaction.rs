//! Transactional messages, the stored side (RocketMQ's `TransactionalMessageService` and its
//! bridge): the half and op records and the pure decisions over them, and the leader's
//! bookkeeping of which transactions are ended and where the check stands, read back from the
//! half and op queues. END_TRANSACTION is [`crate::processors::end_transaction`]; the check-back
//! service is [`crate::services::transaction_check`].
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
//! - For [`raftmq_common::limits::TRANSACTION_NO_PRODUCER_GRACE_MS`] after a leader starts, a due half whose producer group
//!   has not connected to it holds the round (its producers are still finding the new leader);
//!   after that, as in Java, a check with nobody to ask still counts.
//! - Disk input never panics the service: a half or op that is gone or not a record is skipped with
//!   a warning. One that could not be read now (EIO, EMFILE: [`RecordAtError::Unreadable`]) is not
//!   skipped: reading stops before it and the round retries after a backoff, so no half loses its
//!   check (and no op its END) to a transient error.

use std::collections::BTreeMap;
use std::collections::BTreeSet;
use std::collections::HashSet;
use std::collections::VecDeque;
use std::net::SocketAddr;
use std::sync::Mutex;
use std::sync::MutexGuard;

use bytes::Bytes;
use raftmq_common::limits::TRANSACTION_ENDED_MEMORY_MAX_COUNT;
use raftmq_common::limits::TRANSACTION_OP_PENDING_MAX_COUNT;
use raftmq_common::limits::TRANSACTION_OP_READ_BATCH_MAX_COUNT;
use raftmq_common::message::Message;
use raftmq_common::message::MessageExt;
use raftmq_common::message::properties;
use raftmq_common::message::record::DecodeOptions;
use raftmq_common::message::record::decode_record_bytes;
use raftmq_common::message::sys_flag::TransactionType;
use raftmq_common::message::sys_flag::with_transaction_type;
use raftmq_common::message::validate::RMQ_SYS_TRANS_CHECK_MAX_TIME_TOPIC;
use raftmq_common::message::validate::RMQ_SYS_TRANS_HALF_TOPIC;
use raftmq_common::message::validate::RMQ_SYS_TRANS_OP_HALF_TOPIC;
use thiserror::Error;
use tracing::debug;
use tracing::info;
use tracing::warn;

use crate::state::commit_log::RecordAtError;
use crate::state::commit_log::record_at;
use crate::state::consume_queue::CqUnit;
use crate::state::real_queue::RestoreError;
use crate::state::real_queue::real_queue;
use crate::state::store::MessageStore;

/// The group whose consumer offsets hold the check progress (`MixAll.CID_SYS_RMQ_TRANS`).
pub const CID_RMQ_SYS_TRANS: &str = "CID_RMQ_SYS_TRANS";
/// Tag of an op record (`TransactionalMessageUtil.REMOVETAG`).
pub const REMOVE_TAG: &str = "d";
/// The half and op topics have one queue.
pub(crate) const HALF_QUEUE_ID: i32 = 0;

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

pub(crate) fn real_target(half: &MessageExt) -> Result<(String, i32), HalfError> {
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
pub(crate) struct EndedMemory {
    pub(crate) ahead: BTreeSet<i64>,
    pub(crate) behind: HashSet<i64>,
    /// `behind`, earliest named first.
    pub(crate) behind_order: VecDeque<i64>,
    pub(crate) capacity: usize,
}

impl EndedMemory {
    pub(crate) fn new(capacity: usize) -> Self {
        EndedMemory { ahead: BTreeSet::new(), behind: HashSet::new(), behind_order: VecDeque::new(), capacity }
    }

    pub(crate) fn contains(&self, offset: i64) -> bool {
        self.ahead.contains(&offset) || self.behind.contains(&offset)
    }

    /// Remembers `offset`, given the check progress; one already known keeps its place.
    pub(crate) fn insert(&mut self, offset: i64, progress: i64) {
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
    pub(crate) fn advance(&mut self, progress: i64) {
        while let Some(offset) = self.ahead.first().copied().filter(|o| *o < progress) {
            self.ahead.pop_first();
            self.remember_behind(offset);
        }
    }

    pub(crate) fn remember_behind(&mut self, offset: i64) {
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
pub(crate) struct LeaderView {
    pub(crate) term: u64,
    /// Next half queue offset the check round looks at (replicated as `replicated.0` once proposed).
    pub(crate) half_next: i64,
    /// Next op queue offset to read.
    pub(crate) op_read_next: i64,
    /// Ops read whose halves are not all behind `half_next`: op offset → largest half offset named.
    pub(crate) pending_ops: BTreeMap<i64, i64>,
    /// Half offsets an op names: the chain roots of ended transactions, and the copies their ENDs
    /// named (read back, or written by this leader), behind the progress too, so a repeated
    /// END_TRANSACTION, or one for another record of the same chain, is recognised; the earliest
    /// named are forgotten past [`TRANSACTION_ENDED_MEMORY_MAX_COUNT`] (then a repeat may commit
    /// again: at least once).
    pub(crate) ended: EndedMemory,
    /// Chain roots an END_TRANSACTION is ending right now.
    pub(crate) ending: HashSet<i64>,
    /// The op progress as loaded. The ops before it name only halves behind the check progress,
    /// but their chains may have copies ahead of it: they are read back as well (as many ops as the
    /// memory's behind part holds) to fill `ended`, and never hold or move the op progress.
    pub(crate) op_floor: i64,
    /// (half, op) progress as last replicated.
    pub(crate) replicated: (i64, i64),
    /// When this leader loaded the view (the no-producer grace runs from here).
    pub(crate) loaded_at: std::time::Instant,
}

impl LeaderView {
    pub(crate) fn load(store: &MessageStore, term: u64) -> LeaderView {
        let (half_min, _) = store.queue_offsets(RMQ_SYS_TRANS_HALF_TOPIC, HALF_QUEUE_ID);
        let (op_min, _) = store.queue_offsets(RMQ_SYS_TRANS_OP_HALF_TOPIC, HALF_QUEUE_ID);
        let (half, op) = {
            let meta = store.metadata();
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
    pub(crate) fn read_ops(&mut self, store: &MessageStore) -> bool {
        if self.pending_ops.len() >= TRANSACTION_OP_PENDING_MAX_COUNT {
            // Nothing more can be read until the progress catches up; a half whose op is unread may
            // be checked once more (a duplicate check, never a loss).
            warn!(pending = self.pending_ops.len(), "transaction ops far ahead of the check progress; reading paused");
            return true;
        }
        let (min, max) = store.queue_offsets(RMQ_SYS_TRANS_OP_HALF_TOPIC, HALF_QUEUE_ID);
        let from = self.op_read_next.max(i64::try_from(min).unwrap_or(i64::MAX));
        let Ok(from_u) = u64::try_from(from) else { return true };
        if from_u >= max {
            self.op_read_next = from;
            return true;
        }
        let units = read_units(store, RMQ_SYS_TRANS_OP_HALF_TOPIC, from_u, TRANSACTION_OP_READ_BATCH_MAX_COUNT);
        let mut read = 0;
        for (i, unit) in units.iter().enumerate() {
            let op_offset = from + i as i64;
            let halves = match read_message(store, unit) {
                Ok(op) if op.message.tags() == Some(REMOVE_TAG) => parse_op_body(&op.message.body),
                Ok(_) => Vec::new(),
                Err(e @ RecordAtError::Unreadable { .. }) => {
                    // Not read: this op and the ones after it are read again next time.
                    warn!(op_offset, error = %e, "transaction op cannot be read now; retrying later");
                    self.op_read_next = op_offset;
                    return false;
                }
                Err(e) => {
                    warn!(op_offset, error = %e, "transaction op unreadable; skipped");
                    Vec::new()
                }
            };
            self.note_ended(op_offset, &halves);
            read = i + 1;
        }
        self.op_read_next = from + read as i64;
        u64::try_from(self.op_read_next).is_ok_and(|n| n >= max)
    }

    pub(crate) fn note_ended(&mut self, op_offset: i64, halves: &[i64]) {
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
    pub(crate) fn advance(&mut self, half_next: i64) {
        self.half_next = self.half_next.max(half_next);
        let progress = self.half_next;
        self.ended.advance(progress);
        self.pending_ops.retain(|_, max| *max >= progress);
    }

    /// The op progress: every op before it names only halves behind the check progress.
    pub(crate) fn op_next(&self) -> i64 {
        self.pending_ops.keys().next().copied().unwrap_or(self.op_read_next).max(self.op_floor)
    }

    /// Whether the chain of the half at `offset` (whose root is `root`) is ended.
    pub(crate) fn is_ended(&self, offset: i64, root: i64) -> bool {
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
pub(crate) enum ViewError {
    /// A later term's view replaced it: the caller lost leadership in between.
    Superseded,
}

impl TransactionState {
    /// Nothing known yet; loaded by the first use in a term.
    pub fn new() -> Self {
        TransactionState::default()
    }

    pub(crate) fn lock(&self) -> MutexGuard<'_, Option<LeaderView>> {
        self.view.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// `f` on the view of `term` (loaded if the view is an older term's; refused if a newer one's),
    /// after reading at most one batch of new ops; `f` learns whether every op is read.
    pub(crate) fn with_view<R>(
        &self,
        store: &MessageStore,
        term: u64,
        f: impl FnOnce(&mut LeaderView, bool) -> R,
    ) -> Result<R, ViewError> {
        let mut guard = self.lock();
        match guard.as_ref().map(|v| v.term) {
            Some(t) if t > term => return Err(ViewError::Superseded),
            Some(t) if t == term => {}
            _ => *guard = Some(LeaderView::load(store, term)),
        }
        let Some(view) = guard.as_mut() else { return Err(ViewError::Superseded) };
        let caught_up = view.read_ops(store);
        Ok(f(view, caught_up))
    }

    /// Claims the chain of `half` (rooted at `root`) for one END_TRANSACTION of `term`; released by
    /// dropping the claim.
    pub(crate) fn claim<'a>(
        &'a self,
        store: &MessageStore,
        term: u64,
        half: i64,
        root: i64,
    ) -> Result<Claim<'a>, ClaimRefused> {
        self.with_view(store, term, |v, caught_up| {
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
    pub(crate) fn chain_state(&self, term: u64, offset: i64, root: i64) -> Result<ChainState, ViewError> {
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
pub(crate) enum ChainState {
    /// An op names its chain: the round passes it.
    Ended,
    /// An END_TRANSACTION of its chain is being written: the round stops at it.
    Ending,
    /// Unanswered so far: the round decides.
    Open,
}

/// Why an END_TRANSACTION does not write.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ClaimRefused {
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
pub(crate) struct Claim<'a> {
    state: &'a TransactionState,
    term: u64,
    half: i64,
    root: i64,
    ended: bool,
}

impl Claim<'_> {
    pub(crate) fn ended(mut self) {
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

pub(crate) fn read_units(store: &MessageStore, topic: &str, from: u64, max: usize) -> Vec<CqUnit> {
    let cq = store.consume_queues();
    match cq.get(topic, HALF_QUEUE_ID).and_then(|q| q.read(from, max)) {
        Some(units) => units.iter().map(|(_, u)| u).collect(),
        None => Vec::new(),
    }
}

pub(crate) fn read_message(store: &MessageStore, unit: &CqUnit) -> Result<MessageExt, RecordAtError> {
    if !unit.is_message() {
        return Err(RecordAtError::NotARecord { offset: unit.phy_offset, reason: "not a message unit".into() });
    }
    read_at(store, unit.phy_offset)
}

/// The message at `phy_offset`; [`RecordAtError::Unreadable`] when it could not be read now.
pub(crate) fn read_at(store: &MessageStore, phy_offset: i64) -> Result<MessageExt, RecordAtError> {
    let bytes = record_at(store.commit_log(), phy_offset)?;
    decode_record_bytes(&bytes, DecodeOptions::default())
        .map(|(m, _)| m)
        .map_err(|e| RecordAtError::NotARecord { offset: phy_offset, reason: e.to_string() })
}

/// The root of `half`'s chain, trusted only when the record at the claimed root is the same
/// transaction ([`is_same_transaction`]); otherwise (purged, unreadable, or another transaction)
/// the half is its own root, which can cost a duplicate commit but never ends another transaction.
pub(crate) fn verified_root(store: &MessageStore, half: &MessageExt) -> i64 {
    let claimed = chain_root(half);
    if claimed == half.queue_offset {
        return claimed;
    }
    let Ok(at) = u64::try_from(claimed) else { return half.queue_offset };
    match read_units(store, RMQ_SYS_TRANS_HALF_TOPIC, at, 1).first().map(|unit| read_message(store, unit)) {
        Some(Ok(root)) if root.queue_offset == claimed && is_same_transaction(&root, half) => claimed,
        _ => {
            debug!(half = half.queue_offset, claimed, "the claimed chain root is not this transaction's; ignored");
            half.queue_offset
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::state::queue_offset::has_queue_offset;

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
