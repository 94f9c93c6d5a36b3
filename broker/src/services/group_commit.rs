//! Group commit of sends: concurrent SEND_MESSAGE requests are batched into one Raft entry, their queue
//! offsets assigned by the leader just before the entry is handed to Raft (docs/raft-log.md#queue-offsets,
//! [`crate::state::queue_offset`]).
//!
//! ```text
//! send processors ──SendRequest (records encoded, QUEUEOFFSET blank)──▶ bounded queue ──▶ one batcher task
//!   batcher: drain up to BROKER_GROUP_COMMIT_MAX_{COUNT,BYTES} ─▶ readiness gate ─▶ assign + patch QUEUEOFFSET
//!            ─▶ propose(MESSAGES) polled once (enqueued in raft, in order) ─▶ in flight (≤ BROKER_SEND_INFLIGHT_ENTRIES_MAX_COUNT)
//!   applied ─▶ payload_pos ─▶ each request: (queueOffset, physical offset) per record ─▶ SEND_OK
//! ```
//!
//! Invariants:
//! - Offsets are assigned and the proposal enqueued in raft's channel in one step of the single
//!   batcher task (the first poll of `propose` enqueues it; tokio's bounded channel is FIFO), so
//!   entries reach the log in assignment order and apply finds every offset where it expects it.
//! - The offset table is rebuilt from applied state when the term or the topic generation changes,
//!   and after any failed or rejected entry once the entries in flight have settled, so a failure
//!   never leaves a hole that later entries would be rejected for forever.
//! - Every request is answered exactly once: stored, refused, or (at shutdown) dropped, which the
//!   submitter reports as a refusal.
//! - Caps are soft: a batch stops growing at the first request that reaches a cap, so one request
//!   larger than a cap still travels (alone). The hard limit is one Raft entry
//!   ([`RaftNode::payload_max_bytes`](raftmq_raft::RaftNode::payload_max_bytes)): a larger request
//!   is refused (MESSAGE_ILLEGAL) before it is queued, so no entry outgrows what an AppendEntries
//!   carries.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use bytes::BytesMut;
use futures::StreamExt;
use futures::stream::FuturesUnordered;
use raftmq_common::limits::BROKER_GROUP_COMMIT_MAX_BYTES;
use raftmq_common::limits::BROKER_GROUP_COMMIT_MAX_COUNT;
use raftmq_common::limits::BROKER_SEND_INFLIGHT_ENTRIES_MAX_COUNT;
use raftmq_common::limits::BROKER_SEND_QUEUE_MAX_COUNT;
use raftmq_common::message::CompactString;
use raftmq_common::message::record::patch_queue_offset;
use raftmq_raft::AppPayload;
use raftmq_raft::Applied;
use raftmq_raft::ProposeError;
use tokio::sync::mpsc;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;
use tracing::debug;
use tracing::warn;

use crate::services::replica::Replica;
use crate::services::replica::WriteError;
use crate::state::entry::tag;
use crate::state::queue_offset::QueueOffsetTable;
use crate::state::store::ApplyOutcome;

/// Where one record of a request sits in its encoded buffer and which queue it goes to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecordSlot {
    /// Topic.
    pub topic: CompactString,
    /// Queue.
    pub queue_id: i32,
    /// Whether the record takes a queue offset (not PREPARED/ROLLBACK).
    pub has_queue_offset: bool,
    /// Byte offset of the record in [`SendRequest::records`].
    pub at: usize,
}

/// Records of one send request, encoded (QUEUEOFFSET and PHYSICALOFFSET still to be written).
#[derive(Debug)]
pub struct SendRequest {
    /// The records back to back.
    pub records: BytesMut,
    /// One slot per record, in order.
    pub slots: Vec<RecordSlot>,
}

/// Where a stored record went.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StoredRecord {
    /// Its queue offset.
    pub queue_offset: i64,
    /// Its physical CommitLog offset.
    pub phy_offset: i64,
}

type Reply = oneshot::Sender<Result<Vec<StoredRecord>, WriteError>>;

struct Queued {
    request: SendRequest,
    reply: Reply,
}

/// Submits sends to the batcher task. Cheap to clone.
#[derive(Debug, Clone)]
pub struct GroupCommit {
    tx: mpsc::Sender<Queued>,
    /// The soft cap of one entry's records (see [`GroupCommit::entry_max_bytes`]).
    entry_max_bytes: usize,
    /// The records one request may hold: what one Raft entry holds.
    request_max_bytes: usize,
}

impl GroupCommit {
    /// Starts the batcher task; it stops when `cancel` fires or every `GroupCommit` is dropped.
    pub fn spawn(replica: Arc<Replica>, cancel: CancellationToken) -> (GroupCommit, JoinHandle<()>) {
        let (tx, rx) = mpsc::channel(BROKER_SEND_QUEUE_MAX_COUNT);
        // Config keeps a segment ≥ 2 × maxMessageSize, so half a segment holds any one request.
        let half_segment = usize::try_from(replica.store().segment_size() / 2).unwrap_or(usize::MAX);
        let entry_max_bytes = BROKER_GROUP_COMMIT_MAX_BYTES.min(half_segment);
        let request_max_bytes = replica.node().payload_max_bytes();
        let batcher = Batcher {
            replica,
            table: QueueOffsetTable::new(),
            table_key: None,
            must_reset: false,
            entry_max_bytes,
            carry: None,
        };
        let handle = tokio::spawn(batcher.run(rx, cancel));
        (GroupCommit { tx, entry_max_bytes, request_max_bytes }, handle)
    }

    /// Record bytes one entry gathers before it stops taking requests: what a broker-made request
    /// (delayed deliveries, transaction checks) should stay within.
    pub fn entry_max_bytes(&self) -> usize {
        self.entry_max_bytes
    }

    /// Stores the records; returns once they are committed and applied (or refused).
    pub async fn submit(&self, request: SendRequest) -> Result<Vec<StoredRecord>, WriteError> {
        if request.records.len() > self.request_max_bytes {
            return Err(WriteError::TooLarge(format!(
                "the request's {} stored bytes exceed what one Raft entry holds ({} bytes)",
                request.records.len(),
                self.request_max_bytes
            )));
        }
        let (reply, rx) = oneshot::channel();
        self.tx.try_send(Queued { request, reply }).map_err(|e| match e {
            mpsc::error::TrySendError::Full(_) => {
                WriteError::Busy("[PCBUSY_CLEAN_QUEUE]broker busy, start flow control for a while".into())
            }
            mpsc::error::TrySendError::Closed(_) => WriteError::Fatal("is shutting down".into()),
        })?;
        rx.await.unwrap_or_else(|_| Err(WriteError::Fatal("is shutting down".into())))
    }
}

/// One request of a proposed entry.
struct Member {
    reply: Reply,
    /// Start of the request's records in the payload.
    base: usize,
    /// Its records in [`InFlight::records`].
    records: std::ops::Range<usize>,
}

/// One proposed entry: its requests, and (queue offset, position in its request's buffer) of every
/// record, request after request (one list per entry, not one per request).
struct InFlight {
    requests: Vec<Member>,
    records: Vec<(i64, usize)>,
}

type Proposal = Pin<Box<dyn Future<Output = (Result<Applied, ProposeError>, InFlight)> + Send>>;

struct Batcher {
    replica: Arc<Replica>,
    table: QueueOffsetTable,
    /// (term, topic generation) the table was built for.
    table_key: Option<(u64, u64)>,
    /// An entry failed: rebuild the table once the entries in flight have settled.
    must_reset: bool,
    /// Record bytes one entry carries at most (several requests only while they fit).
    entry_max_bytes: usize,
    /// A request drained that did not fit the last entry: it starts the next one.
    carry: Option<Queued>,
}

impl Batcher {
    async fn run(mut self, mut rx: mpsc::Receiver<Queued>, cancel: CancellationToken) {
        let mut inflight: FuturesUnordered<Proposal> = FuturesUnordered::new();
        loop {
            let draining = self.must_reset && !inflight.is_empty();
            let can_take = inflight.len() < BROKER_SEND_INFLIGHT_ENTRIES_MAX_COUNT && !draining;
            if can_take && let Some(first) = self.carry.take() {
                let batch = drain(first, &mut rx, self.entry_max_bytes, &mut self.carry);
                if let Some(p) = self.propose(batch).await {
                    inflight.push(p);
                }
                continue;
            }
            tokio::select! {
                biased;
                _ = cancel.cancelled() => break,
                Some((result, entry)) = inflight.next(), if !inflight.is_empty() => self.finish(result, entry),
                queued = rx.recv(), if can_take => {
                    let Some(first) = queued else { break };
                    let batch = drain(first, &mut rx, self.entry_max_bytes, &mut self.carry);
                    if let Some(p) = self.propose(batch).await {
                        inflight.push(p);
                    }
                }
            }
        }
        // Requests still queued or in flight are answered by dropping their reply senders.
        self.carry = None;
        rx.close();
    }

    async fn propose(&mut self, batch: Vec<Queued>) -> Option<Proposal> {
        let term = match self.replica.check_writable() {
            Ok(term) => term,
            Err(e) => {
                batch.into_iter().for_each(|q| {
                    let _ = q.reply.send(Err(e.clone()));
                });
                return None;
            }
        };
        let key = (term, self.replica.store().topic_generation());
        if self.table_key != Some(key) || self.must_reset {
            self.table.reset();
            self.table_key = Some(key);
            self.must_reset = false;
        }
        let store = Arc::clone(self.replica.store());
        let total: usize = batch.iter().map(|q| q.request.records.len()).sum();
        let mut payload = Vec::with_capacity(total);
        let mut requests = Vec::with_capacity(batch.len());
        let mut offsets = Vec::with_capacity(batch.iter().map(|q| q.request.slots.len()).sum());
        for Queued { mut request, reply } in batch {
            let base = payload.len();
            let first = offsets.len();
            for slot in &request.slots {
                let offset = if slot.has_queue_offset {
                    let next = self
                        .table
                        .reserve(&slot.topic, slot.queue_id, 1, || store.queue_offsets(&slot.topic, slot.queue_id).1);
                    i64::try_from(next).unwrap_or(i64::MAX)
                } else {
                    0
                };
                let record = request.records.get_mut(slot.at..).unwrap_or_default();
                // The send processor encoded these records itself: the patch cannot miss.
                if let Err(e) = patch_queue_offset(record, offset) {
                    warn!(error = %e, "cannot patch a queue offset into a record we encoded");
                }
                offsets.push((offset, slot.at));
            }
            payload.extend_from_slice(&request.records);
            requests.push(Member { reply, base, records: first..offsets.len() });
        }
        let node = Arc::clone(self.replica.node());
        let entry = InFlight { requests, records: offsets };
        let mut proposal: Proposal =
            Box::pin(async move { (node.propose(AppPayload::new(tag::MESSAGES, payload)).await, entry) });
        // The first poll hands the entry to raft (or queues for its channel, FIFO): from here on its
        // place in the log is fixed relative to the next batch.
        match futures::poll!(&mut proposal) {
            std::task::Poll::Ready((result, entry)) => {
                self.finish(result, entry);
                None
            }
            std::task::Poll::Pending => Some(proposal),
        }
    }

    fn finish(&mut self, result: Result<Applied, ProposeError>, entry: InFlight) {
        let outcome = match result {
            Ok(applied) => match ApplyOutcome::decode(&applied.reply) {
                ApplyOutcome::Stored { payload_pos } => Ok(payload_pos),
                ApplyOutcome::Rejected(why) => Err(WriteError::Rejected(why)),
                // Committed, but not applied here: stored on the others, so never "not stored".
                ApplyOutcome::LocalFailure(why) => Err(WriteError::OutcomeUnknown(why)),
                ApplyOutcome::Done | ApplyOutcome::Granted(_) | ApplyOutcome::Issued(_) => {
                    Err(WriteError::Rejected("MESSAGES entry applied as metadata".into()))
                }
            },
            Err(e) => Err(self.replica.propose_error(e)),
        };
        match outcome {
            Ok(payload_pos) => {
                let payload_pos = i64::try_from(payload_pos).unwrap_or(i64::MAX);
                for Member { reply, base, records } in entry.requests {
                    let stored = entry
                        .records
                        .get(records)
                        .unwrap_or_default()
                        .iter()
                        .map(|(queue_offset, at)| StoredRecord {
                            queue_offset: *queue_offset,
                            phy_offset: payload_pos.saturating_add((base + at) as i64),
                        })
                        .collect();
                    // The submitter may have given up (connection closed); nothing to do then.
                    let _ = reply.send(Ok(stored));
                }
            }
            Err(e) => {
                debug!(error = %e, "group-commit entry failed; queue offsets are rebuilt from applied state");
                self.must_reset = true;
                for member in entry.requests {
                    let _ = member.reply.send(Err(e.clone()));
                }
            }
        }
    }
}

/// `first` and the requests queued behind it, while they fit one entry; one that does not fit is left
/// in `carry` for the next entry.
fn drain(first: Queued, rx: &mut mpsc::Receiver<Queued>, max_bytes: usize, carry: &mut Option<Queued>) -> Vec<Queued> {
    let mut count = first.request.slots.len();
    let mut bytes = first.request.records.len();
    let mut batch = vec![first];
    while count < BROKER_GROUP_COMMIT_MAX_COUNT && bytes < max_bytes {
        match rx.try_recv() {
            Ok(q) if bytes + q.request.records.len() > max_bytes => {
                *carry = Some(q);
                break;
            }
            Ok(q) => {
                count += q.request.slots.len();
                bytes += q.request.records.len();
                batch.push(q);
            }
            Err(_) => break,
        }
    }
    batch
}
