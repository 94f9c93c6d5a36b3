//! `PopService`: the leader side of POP consumption (RocketMQ 5's `PopMessageProcessor`,
//! `AckMessageProcessor`, `ChangeInvisibleTimeProcessor` and `PopReviveService`) over the
//! replicated POP table ([`crate::state::pop`]).
//!
//! ```text
//! pop ──▶ (plan lock) read each queue from its projected cursor ─▶ one POP entry (every queue's
//!         plan, one epoch) queued ─▶ (lock released) applied ─▶ the records, popTime = the epoch
//!         nothing found ─▶ long poll on the queues' arrivals (and the retry topic's, made or
//!         not yet) until pollTime ends
//!         refused by apply (a queue changed meanwhile) ─▶ planned again
//! ack ──▶ queued; whoever holds the settle lock proposes every queued ack as one entry
//! change ─▶ (settle lock) one entry ─▶ the new epoch
//! revive (every POP_REVIVE_INTERVAL_MS, leader) ─▶ (settle lock) expired deliveries re-put into
//!         %RETRY%{group}_{topic} with reconsumeTimes + 1 (or %DLQ%{group} past retryMaxTimes),
//!         each record marked POP_REVIVE_OF, whose apply removes the delivery from the table
//! ```
//!
//! Invariants:
//! - Pops are pipelined: each is planned on the applied table plus the pops this leader queued
//!   and has not seen applied (the [`Projection`]: their cursors, and their queues held for FIFO),
//!   and entries queued one after the other apply in that order. The apply checks every plan
//!   against the table (`PopRefusal::CursorMoved`), so a projection that is wrong (a pop before
//!   it refused, a new term) costs a retry, never a message handed out twice.
//! - Acks, changes and revives run under one settle lock and wait for their entry to apply, so a
//!   revive never re-puts a message whose ack or change is in flight (that one waits, then finds
//!   it stale). A new leader writes only after the entries of earlier terms are applied (the
//!   readiness gate).
//! - A pop answers only after its entry applied: a failover never hands out a message the new
//!   leader does not know is in flight.
//! - Times are the table's ([`TableClock`]), so expiry never depends on the replicas' wall clocks.

use std::collections::BTreeMap;
use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::Mutex;
use std::time::Duration;

use bytes::Bytes;
use bytes::BytesMut;
use raftmq_common::limits::POP_ACK_BATCH_MAX_COUNT;
use raftmq_common::limits::POP_PLAN_ATTEMPTS_MAX;
use raftmq_common::limits::POP_REVIVE_BATCH_MAX_COUNT;
use raftmq_common::limits::POP_REVIVE_INTERVAL_MS;
use raftmq_common::message::properties;
use raftmq_common::message::record::DecodeOptions;
use raftmq_common::message::record::decode_record_bytes;
use raftmq_common::message::record::encode_record_into;
use raftmq_common::message::record::patch_reconsume_times;
use raftmq_common::message::record::peek_queue_offset;
use raftmq_common::message::validate::dlq_topic;
use raftmq_common::message::validate::pop_retry_topic;
use raftmq_common::protocol::body::topic::TopicConfig;
use raftmq_common::protocol::header::pop::PopTopicType;
use raftmq_common::protocol::header::pop::PoppedQueue;
use raftmq_common::sync::lock;
use tokio::sync::Notify;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;
use tracing::debug;
use tracing::info;
use tracing::warn;

use crate::services::group_commit::RecordSlot;
use crate::services::group_commit::SendRequest;
use crate::services::record_writer::RecordWriter;
use crate::services::replica::Replica;
use crate::services::replica::WriteError;
use crate::services::table_clock::TableClock;
use crate::services::topic_create::ensure_topic;
use crate::state::entry::BrokerCommand;
use crate::state::entry::PopOp;
use crate::state::pop::InFlight;
use crate::state::pop::PopPlan;
use crate::state::pop::PopQueue;
use crate::state::pop::PopReviveMark;
use crate::state::pop::Receipt;
use crate::state::pull::GetMessageRequest;
use crate::state::pull::MessageFilter;
use crate::state::pull::OffsetCheck;
use crate::state::pull::PullLimits;
use crate::state::pull::get_message;
use crate::state::queue_offset::has_queue_offset;
use crate::state::store::ApplyOutcome;
use crate::state::store::MessageStore;
use crate::state::store::now_ms;

/// One POP_MESSAGE as the service sees it (validated by the processor).
#[derive(Debug, Clone)]
pub struct PopRequest {
    /// Consumer group.
    pub group: String,
    /// The topic subscribed to.
    pub topic: String,
    /// One queue, or every readable queue of the topic.
    pub queue_id: Option<i32>,
    /// At most this many messages.
    pub max_count: usize,
    /// Invisible time to grant, ms.
    pub invisible_ms: u64,
    /// How long to wait for messages when none are ready, ms.
    pub poll_ms: u64,
    /// A group without an offset starts at the queue's end (`ConsumeInitMode.MAX`), else its start.
    pub init_at_max: bool,
    /// The subscription's filter.
    pub filter: MessageFilter,
    /// FIFO: a queue with a message in flight is held; expired ones are re-popped in place.
    pub fifo: bool,
    /// The group's retryMaxTimes (a FIFO message past it goes to the DLQ).
    pub retry_max_times: u32,
}

/// What a pop handed out.
#[derive(Debug, Clone, Default)]
pub struct Popped {
    /// The epoch (popTime) of every receipt.
    pub epoch_ms: u64,
    /// Messages behind the popped ones in the queues looked at.
    pub rest_count: i64,
    /// The queues popped, for the response's offset fields.
    pub queues: Vec<PoppedQueue>,
    /// The records, as stored (FIFO re-pops with reconsumeTimes = earlier deliveries).
    pub records: Vec<Bytes>,
}

/// Handles the service needs.
#[derive(Debug)]
pub struct PopHandles {
    /// Leader view and proposals.
    pub replica: Arc<Replica>,
    /// ConsumeQueues, CommitLog and the POP table.
    pub store: Arc<MessageStore>,
    /// Group commit for revived records.
    pub writer: RecordWriter,
    /// This broker group's name (receipts, topic creation refusals).
    pub broker_name: String,
    /// STOREHOST of revived records.
    pub store_host: SocketAddr,
    /// Wakes NameServer registration when a retry or DLQ topic is created.
    pub register_now: Arc<Notify>,
    /// Transfer limits of one read.
    pub pull_limits: PullLimits,
}

type AckWaiter = oneshot::Sender<Result<bool, WriteError>>;

/// Pops this leader queued and has not seen applied, per queue: what the next plan starts from.
#[derive(Debug, Default)]
struct Projection {
    /// The term the pops were queued in; another term's are forgotten.
    term: u64,
    queues: HashMap<PopQueue, Projected>,
}

#[derive(Debug, Clone, Copy)]
struct Projected {
    /// The cursor after the newest pop queued.
    cursor: i64,
    /// Pops of the queue queued and not yet answered by apply.
    pending: u32,
    /// One of them was refused or its outcome is unknown: plan on the applied table until all
    /// are answered.
    broken: bool,
}

/// A pop queued for the log: counted in the [`Projection`] until dropped, which answers it
/// (also when the pop's future is dropped while it waits: then as unknown).
struct Queued<'a> {
    projection: &'a Mutex<Projection>,
    term: u64,
    queues: Vec<PopQueue>,
    /// Apply issued it; otherwise the projection of its queues is broken until they settle.
    applied: bool,
}

impl<'a> Queued<'a> {
    fn new(projection: &'a Mutex<Projection>, term: u64, plans: &[PopPlan]) -> Self {
        let mut p = lock(projection);
        for plan in plans {
            let q =
                p.queues.entry(plan.queue.clone()).or_insert(Projected { cursor: plan.to, pending: 0, broken: false });
            q.cursor = plan.to;
            q.pending += 1;
        }
        Queued { projection, term, queues: plans.iter().map(|p| p.queue.clone()).collect(), applied: false }
    }
}

impl Drop for Queued<'_> {
    fn drop(&mut self) {
        let mut p = lock(self.projection);
        if p.term != self.term {
            return;
        }
        for queue in &self.queues {
            if let Some(q) = p.queues.get_mut(queue) {
                q.pending = q.pending.saturating_sub(1);
                q.broken |= !self.applied;
                if q.pending == 0 {
                    p.queues.remove(queue);
                }
            }
        }
    }
}

/// The leader side of POP.
#[derive(Debug)]
pub struct PopService {
    h: PopHandles,
    clock: TableClock,
    /// Held by a pop while it plans and queues its entry, not while the entry commits.
    plan: tokio::sync::Mutex<()>,
    /// Pops queued and not applied (under `plan` for reading and adding; completions update it).
    projection: Mutex<Projection>,
    /// Held by ack batches, changes and revive passes while they plan, propose and wait for apply.
    settle: tokio::sync::Mutex<()>,
    /// Acks waiting for the next ack entry.
    pending_acks: Mutex<Vec<(Receipt, AckWaiter)>>,
    /// Rotates where a pop of every queue starts, so no queue starves.
    next_queue: std::sync::atomic::AtomicUsize,
}

/// The cursor of a queue a group never popped: its committed offset, else where `init_at_max`
/// says (RocketMQ's `getInitOffset`: retry topics always from their start; a young queue, whose
/// minimum is still 0, from its start too), never below the queue's minimum.
fn initial_cursor(committed: Option<i64>, min: i64, max: i64, init_at_max: bool, is_retry: bool) -> i64 {
    let start = match committed {
        Some(c) if c >= 0 => c,
        _ if is_retry || !init_at_max || min <= 0 => min,
        _ => max,
    };
    start.max(min)
}

impl PopService {
    /// A service over `h`.
    pub fn new(h: PopHandles) -> Self {
        PopService {
            h,
            clock: TableClock::new(),
            plan: tokio::sync::Mutex::new(()),
            projection: Mutex::new(Projection::default()),
            settle: tokio::sync::Mutex::new(()),
            pending_acks: Mutex::new(Vec::new()),
            next_queue: std::sync::atomic::AtomicUsize::new(0),
        }
    }

    /// The broker group's name (what receipts carry).
    pub fn broker_name(&self) -> &str {
        &self.h.broker_name
    }

    fn stamp(&self, term: u64) -> u64 {
        let table_clock = self.h.store.metadata().pop.clock_ms();
        self.clock.stamp(term, table_clock)
    }

    /// POP_MESSAGE: messages and their epoch, waiting up to `poll_ms` for some when none are ready
    /// (an empty [`Popped`] then).
    pub async fn pop(&self, request: &PopRequest) -> Result<Popped, WriteError> {
        let deadline = tokio::time::Instant::now() + Duration::from_millis(request.poll_ms);
        let mut refused = 0;
        loop {
            let (popped, mut watched) = match self.pop_once(request).await {
                // Apply refused the plan: a queue changed between the plan and the apply.
                Err(WriteError::Rejected(why)) if refused + 1 < POP_PLAN_ATTEMPTS_MAX => {
                    refused += 1;
                    debug!(%why, attempt = refused, "a pop was refused by apply; planned again");
                    continue;
                }
                other => other?,
            };
            if !popped.records.is_empty() || tokio::time::Instant::now() >= deadline {
                return Ok(popped);
            }
            // The group's retry topic is made (one queue) by the revive that puts its first message:
            // watched before it exists, that revive wakes the pop as Java's wakes a pop of the topic.
            if !request.fifo {
                let retry = pop_retry_topic(&request.group, &request.topic);
                if self.h.store.metadata().topics.get(&retry).is_none() {
                    watched.push((retry, 0, 0));
                }
            }
            // Park on every queue looked at: an apply that adds a unit wakes the pop.
            let wait_ms = deadline.saturating_duration_since(tokio::time::Instant::now());
            let deadline_ms = now_ms().saturating_add(wait_ms.as_millis() as u64);
            let mut waiters = Vec::new();
            let mut ready = false;
            for (topic, queue_id, offset) in &watched {
                match self.h.store.suspend_pull(topic, *queue_id, *offset, request.filter.clone(), deadline_ms) {
                    Ok(Some((id, rx))) => waiters.push((id, rx)),
                    // Something arrived meanwhile.
                    Ok(None) => ready = true,
                    // Too many parked requests: answer what we have.
                    Err(_) => return Ok(popped),
                }
            }
            if !ready && !waiters.is_empty() {
                let receivers = waiters.iter_mut().map(|(_, rx)| rx);
                let any = futures::future::select_all(receivers);
                let _ = tokio::time::timeout(wait_ms, any).await;
            } else if !ready {
                // FIFO queues all held: nothing to park on but their acks; wait out the time.
                tokio::time::sleep(wait_ms.min(Duration::from_millis(POP_REVIVE_INTERVAL_MS))).await;
            }
            for (id, _) in waiters {
                self.h.store.cancel_pull(id);
            }
        }
    }

    /// The candidate (read topic, queue, type) of a pop, retry topic first.
    fn candidates(&self, request: &PopRequest) -> Vec<(String, i32, PopTopicType)> {
        let meta = self.h.store.metadata();
        let mut out = Vec::new();
        if !request.fifo {
            let retry = pop_retry_topic(&request.group, &request.topic);
            if let Some(config) = meta.topics.get(&retry) {
                for q in 0..config.read_queue_nums.max(0) {
                    out.push((retry.clone(), q, PopTopicType::Retry));
                }
            }
        }
        match request.queue_id {
            Some(q) => out.push((request.topic.clone(), q, PopTopicType::Normal)),
            None => {
                let queues = meta.topics.get(&request.topic).map_or(0, |c| c.read_queue_nums.max(0));
                let start = self.next_queue.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                for i in 0..queues {
                    let q = ((start + i as usize) % queues as usize) as i32;
                    out.push((request.topic.clone(), q, PopTopicType::Normal));
                }
            }
        }
        out
    }

    /// One attempt: the popped messages (maybe none) and the (topic, queue, cursor) looked at.
    async fn pop_once(&self, request: &PopRequest) -> Result<(Popped, Vec<(String, i32, i64)>), WriteError> {
        let planning = self.plan.lock().await;
        let term = self.h.replica.check_writable()?;
        let now = self.stamp(term);
        let projected: HashMap<PopQueue, Projected> = {
            let mut projection = lock(&self.projection);
            if projection.term != term {
                *projection = Projection { term, queues: HashMap::new() };
            }
            projection.queues.clone()
        };
        let mut plans = Vec::new();
        let mut records: Vec<Bytes> = Vec::new();
        let mut watched = Vec::new();
        let mut rest = 0i64;
        let mut remaining = request.max_count;
        // A queue the table has no state for yet: apply takes any cursor for it, so nothing may be
        // planned on top of this pop until it applied.
        let mut first_pop = false;
        for (topic, queue_id, topic_type) in self.candidates(request) {
            let key = PopQueue { group: request.group.clone(), topic: topic.clone(), queue_id };
            let (state, committed) = {
                let meta = self.h.store.metadata();
                (meta.pop.queue(&key).cloned(), meta.offsets.query(&topic, &request.group, queue_id))
            };
            let (min, max) = self.h.store.queue_offsets(&topic, queue_id);
            let (min, max) = (min as i64, max as i64);
            let queued = projected.get(&key).filter(|p| !p.broken);
            let cursor = match (queued, &state) {
                (Some(p), _) => p.cursor,
                (None, Some(s)) => s.cursor,
                (None, None) => {
                    initial_cursor(committed, min, max, request.init_at_max, topic_type == PopTopicType::Retry)
                }
            };
            if remaining == 0 {
                rest += (max - cursor).max(0);
                continue;
            }
            if request.fifo && projected.contains_key(&key) {
                // A pop of it is on its way: held as if in flight.
                rest += (max - cursor).max(0);
                continue;
            }
            if request.fifo
                && let Some(s) = &state
                && !s.in_flight.is_empty()
            {
                // Held until acked; once its time ended, re-popped in place (attempt + 1).
                let due: Vec<(i64, InFlight)> = s
                    .in_flight
                    .iter()
                    .filter(|(_, f)| f.invisible_until_ms <= now && f.attempt < request.retry_max_times.max(1))
                    .map(|(o, f)| (*o, *f))
                    .collect();
                if due.len() != s.in_flight.len() || due.is_empty() {
                    rest += (max - cursor).max(0);
                    continue;
                }
                let mut again = Vec::new();
                for (offset, f) in due.iter().take(remaining) {
                    if let Some(mut record) = self.read_one(&topic, queue_id, *offset) {
                        let mut bytes = BytesMut::from(&record[..]);
                        if patch_reconsume_times(&mut bytes, f.attempt as i32).is_ok() {
                            record = bytes.freeze();
                        }
                        records.push(record);
                        again.push(*offset);
                    }
                }
                remaining -= again.len();
                plans.push(PopPlan {
                    queue: key,
                    from: cursor,
                    to: cursor,
                    offsets: Vec::new(),
                    again,
                    invisible_ms: request.invisible_ms,
                    fifo: true,
                });
                continue;
            }
            let start = cursor.max(min);
            let result = {
                let queues = self.h.store.consume_queues();
                let req = GetMessageRequest {
                    offset: start,
                    max_msg_nums: remaining as i32,
                    filter: &request.filter,
                    offset_check: OffsetCheck::Keep,
                };
                get_message(queues.get(&topic, queue_id), &req, self.h.store.commit_log(), &self.h.pull_limits)
            };
            let to = result.next_begin_offset.max(start);
            let mut offsets = Vec::with_capacity(result.messages.len());
            for record in result.messages {
                match peek_queue_offset(&record) {
                    Ok(offset) if offset >= start && offset < to && offsets.last().is_none_or(|l| *l < offset) => {
                        offsets.push(offset);
                        records.push(record);
                    }
                    _ => warn!(%topic, queue_id, "a record read for a pop is not where its queue says; skipped"),
                }
            }
            remaining = remaining.saturating_sub(offsets.len());
            rest += (max - to).max(0);
            if to == cursor && offsets.is_empty() {
                watched.push((topic, queue_id, to));
                continue;
            }
            if offsets.is_empty() {
                watched.push((topic.clone(), queue_id, to));
            }
            first_pop |= state.is_none();
            plans.push(PopPlan {
                queue: key,
                from: cursor,
                to,
                offsets,
                again: Vec::new(),
                invisible_ms: request.invisible_ms,
                fifo: request.fifo,
            });
        }
        if plans.is_empty() {
            return Ok((Popped { rest_count: rest, ..Popped::default() }, watched));
        }
        let command = BrokerCommand::Pop { stamp_ms: now, op: PopOp::Pop(plans.clone()) };
        let applied = self.h.replica.submit_for_outcome(&command).await?;
        let mut queued = Queued::new(&self.projection, term, &plans);
        let held = if first_pop {
            Some(planning)
        } else {
            drop(planning);
            None
        };
        let outcome = applied.await;
        drop(held);
        queued.applied = matches!(outcome, Ok(ApplyOutcome::Issued(_)));
        drop(queued);
        let epoch_ms = match outcome? {
            ApplyOutcome::Issued(epoch_ms) => epoch_ms,
            other => return Err(WriteError::Rejected(format!("a pop was applied as {other:?}"))),
        };
        let queues = plans
            .iter()
            .filter(|p| !p.offsets.is_empty() || !p.again.is_empty())
            .map(|p| PoppedQueue {
                topic_type: if p.queue.topic == request.topic { PopTopicType::Normal } else { PopTopicType::Retry },
                queue_id: p.queue.queue_id,
                start_offset: p.from,
                offsets: p.again.iter().chain(p.offsets.iter()).copied().collect(),
                order_count: request.fifo.then_some(0),
            })
            .collect();
        Ok((Popped { epoch_ms, rest_count: rest, queues, records }, watched))
    }

    /// The record at `offset` of a queue, if it is still stored.
    fn read_one(&self, topic: &str, queue_id: i32, offset: i64) -> Option<Bytes> {
        let all = MessageFilter::all();
        let queues = self.h.store.consume_queues();
        let req = GetMessageRequest { offset, max_msg_nums: 1, filter: &all, offset_check: OffsetCheck::Keep };
        let result = get_message(queues.get(topic, queue_id), &req, self.h.store.commit_log(), &self.h.pull_limits);
        result.messages.into_iter().next().filter(|r| peek_queue_offset(r).ok() == Some(offset))
    }

    /// ACK_MESSAGE: whether the receipt's message was in flight and is now acked for good
    /// (`false`: stale). Acks waiting together go in one entry.
    pub async fn ack(&self, receipt: Receipt) -> Result<bool, WriteError> {
        self.h.replica.check_writable()?;
        let (tx, rx) = oneshot::channel();
        lock(&self.pending_acks).push((receipt, tx));
        {
            let _settle = self.settle.lock().await;
            self.flush_acks_locked().await;
        }
        rx.await.unwrap_or_else(|_| Err(WriteError::OutcomeUnknown("the ack batch was dropped".into())))
    }

    /// Proposes every queued ack (call with the settle lock held).
    async fn flush_acks_locked(&self) {
        loop {
            let batch: Vec<(Receipt, AckWaiter)> = {
                let mut pending = lock(&self.pending_acks);
                let n = pending.len().min(POP_ACK_BATCH_MAX_COUNT);
                pending.drain(..n).collect()
            };
            if batch.is_empty() {
                return;
            }
            let receipts: Vec<Receipt> = batch.iter().map(|(r, _)| r.clone()).collect();
            let result = match self.h.replica.check_writable() {
                Ok(term) => {
                    let command = BrokerCommand::Pop { stamp_ms: self.stamp(term), op: PopOp::Ack(receipts) };
                    self.h.replica.propose_for_outcome(&command).await
                }
                Err(e) => Err(e),
            };
            match result {
                Ok(ApplyOutcome::Granted(taken)) if taken.len() == batch.len() => {
                    for ((_, tx), ok) in batch.into_iter().zip(taken) {
                        let _ = tx.send(Ok(ok));
                    }
                }
                Ok(other) => {
                    let why = format!("an ack batch was applied as {other:?}");
                    for (_, tx) in batch {
                        let _ = tx.send(Err(WriteError::Rejected(why.clone())));
                    }
                }
                Err(e) => {
                    for (_, tx) in batch {
                        let _ = tx.send(Err(e.clone()));
                    }
                }
            }
        }
    }

    /// CHANGE_MESSAGE_INVISIBLETIME: the new epoch, or `None` when the receipt is stale.
    pub async fn change_invisible(&self, receipt: Receipt, invisible_ms: u64) -> Result<Option<u64>, WriteError> {
        let _settle = self.settle.lock().await;
        let term = self.h.replica.check_writable()?;
        self.flush_acks_locked().await;
        let command =
            BrokerCommand::Pop { stamp_ms: self.stamp(term), op: PopOp::ChangeInvisible { receipt, invisible_ms } };
        match self.h.replica.propose_for_outcome(&command).await {
            Ok(ApplyOutcome::Issued(epoch_ms)) => Ok(Some(epoch_ms)),
            Err(WriteError::Rejected(why)) if why.starts_with("stale receipt handle") => Ok(None),
            Ok(other) => Err(WriteError::Rejected(format!("a change was applied as {other:?}"))),
            Err(e) => Err(e),
        }
    }

    /// One revive pass: re-puts up to `POP_REVIVE_BATCH_MAX_COUNT` expired deliveries; how many.
    pub async fn revive_once(&self) -> Result<usize, WriteError> {
        let _settle = self.settle.lock().await;
        let term = self.h.replica.check_writable()?;
        self.flush_acks_locked().await;
        let now = self.stamp(term);
        let due = {
            let meta = self.h.store.metadata();
            let attempts_max = |group: &str| meta.groups.get(group).map_or(16, |g| g.retry_max_times.max(1) as u32);
            meta.pop.expired(now, attempts_max, POP_REVIVE_BATCH_MAX_COUNT)
        };
        if due.is_empty() {
            return Ok(0);
        }
        let mut by_target: BTreeMap<String, Vec<Bytes>> = BTreeMap::new();
        let mut revived = 0;
        for (receipt, f) in &due {
            let Some(stored) = self.read_one(&receipt.queue.topic, receipt.queue.queue_id, receipt.offset) else {
                // Retention removed it: nothing to deliver again; the revive mark cannot be put, so
                // an ack-shaped removal keeps the table from holding it forever.
                self.drop_lost(receipt).await?;
                continue;
            };
            let Ok((original, _)) = decode_record_bytes(&stored, DecodeOptions::default()) else {
                warn!(topic = %receipt.queue.topic, offset = receipt.offset, "an expired POP message does not decode; dropped");
                self.drop_lost(receipt).await?;
                continue;
            };
            let group = &receipt.queue.group;
            let origin_topic = original
                .message
                .properties
                .get(properties::RETRY_TOPIC)
                .map(str::to_owned)
                .unwrap_or_else(|| original.message.topic.to_string());
            let retry_max = self.h.store.metadata().groups.get(group).map_or(16, |g| g.retry_max_times.max(0));
            let times = if f.fifo { f.attempt as i32 } else { original.reconsume_times.saturating_add(1) };
            let target = if times > retry_max || f.fifo {
                self.ensure(dlq_config(group)).await?
            } else {
                self.ensure(pop_retry_config(group, &origin_topic)).await?
            };
            let mark = PopReviveMark {
                group: group.clone(),
                origin_topic: origin_topic.clone(),
                read_topic: receipt.queue.topic.clone(),
                queue_id: receipt.queue.queue_id,
                offset: receipt.offset,
                epoch_ms: receipt.epoch_ms,
            };
            let mut message = original.message.clone();
            message.topic = target.topic_name.as_str().into();
            if !message.properties.contains_key(properties::RETRY_TOPIC) {
                message.properties.insert(properties::RETRY_TOPIC, origin_topic.as_str());
            }
            if message.properties.get(properties::ORIGIN_MESSAGE_ID).is_none_or(|id| id.is_empty()) {
                message.properties.insert(properties::ORIGIN_MESSAGE_ID, original.offset_msg_id().to_string());
            }
            message.properties.insert(properties::POP_REVIVE_OF, mark.value());
            let revived_msg = raftmq_common::message::MessageExt {
                message,
                queue_id: 0,
                sys_flag: original.sys_flag,
                born_timestamp: original.born_timestamp,
                born_host: original.born_host,
                store_timestamp: now_ms() as i64,
                store_host: self.h.store_host,
                reconsume_times: times,
                ..Default::default()
            };
            let mut record = BytesMut::new();
            if let Err(e) = encode_record_into(&revived_msg, &mut record) {
                warn!(error = %e, "an expired POP message cannot be re-put; dropped");
                self.drop_lost(receipt).await?;
                continue;
            }
            by_target.entry(target.topic_name.clone()).or_default().push(record.freeze());
            revived += 1;
        }
        for (topic, records) in by_target {
            let mut bytes = BytesMut::new();
            let mut slots = Vec::with_capacity(records.len());
            for r in &records {
                slots.push(RecordSlot {
                    topic: topic.as_str().into(),
                    queue_id: 0,
                    has_queue_offset: has_queue_offset(0),
                    at: bytes.len(),
                });
                bytes.extend_from_slice(r);
            }
            self.h.writer.store_records(SendRequest { records: bytes, slots }).await?;
            debug!(%topic, count = records.len(), "expired POP messages re-put");
        }
        Ok(revived)
    }

    /// Removes a delivery whose message can no longer be read (as an ack would).
    async fn drop_lost(&self, receipt: &Receipt) -> Result<(), WriteError> {
        let term = self.h.replica.check_writable()?;
        let command = BrokerCommand::Pop { stamp_ms: self.stamp(term), op: PopOp::Ack(vec![receipt.clone()]) };
        self.h.replica.propose(&command).await
    }

    async fn ensure(&self, config: TopicConfig) -> Result<TopicConfig, WriteError> {
        ensure_topic(&self.h.store, &self.h.replica, &self.h.broker_name, &self.h.register_now, config)
            .await
            .map_err(|refusal| WriteError::Rejected(refusal.remark.unwrap_or_default()))
    }

    /// Runs revive passes every `POP_REVIVE_INTERVAL_MS` while this replica leads, until `cancel`.
    pub fn spawn_revive(self: &Arc<Self>, cancel: CancellationToken) -> JoinHandle<()> {
        let service = Arc::clone(self);
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(Duration::from_millis(POP_REVIVE_INTERVAL_MS));
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                tokio::select! {
                    _ = cancel.cancelled() => return,
                    _ = tick.tick() => {}
                }
                if service.h.replica.ready_term().is_none() || service.h.store.metadata().pop.in_flight_count() == 0 {
                    continue;
                }
                match service.revive_once().await {
                    Ok(0) => {}
                    Ok(n) => info!(count = n, "expired POP messages revived"),
                    Err(e) => debug!(error = %e, "POP revive pass failed; the next pass retries"),
                }
            }
        })
    }
}

/// `%RETRY%{group}_{topic}` as RocketMQ 5 creates it: one queue.
fn pop_retry_config(group: &str, topic: &str) -> TopicConfig {
    TopicConfig {
        read_queue_nums: 1,
        write_queue_nums: 1,
        perm: raftmq_common::protocol::body::topic::perm::READ_WRITE,
        ..TopicConfig::new(pop_retry_topic(group, topic))
    }
}

/// `%DLQ%{group}`: one queue.
fn dlq_config(group: &str) -> TopicConfig {
    TopicConfig {
        read_queue_nums: 1,
        write_queue_nums: 1,
        perm: raftmq_common::protocol::body::topic::perm::READ_WRITE,
        ..TopicConfig::new(dlq_topic(group))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_new_group_starts_where_rocketmq_starts_it() {
        // A committed offset wins, never below the queue's minimum.
        assert_eq!(initial_cursor(Some(7), 0, 10, true, false), 7);
        assert_eq!(initial_cursor(Some(2), 5, 10, false, false), 5);
        // MAX on an old queue: only new messages; on a young queue (min 0): everything.
        assert_eq!(initial_cursor(None, 3, 10, true, false), 10);
        assert_eq!(initial_cursor(None, 0, 10, true, false), 0);
        // MIN, and retry topics whatever the mode: from the start.
        assert_eq!(initial_cursor(None, 3, 10, false, false), 3);
        assert_eq!(initial_cursor(None, 3, 10, true, true), 3);
    }
}
