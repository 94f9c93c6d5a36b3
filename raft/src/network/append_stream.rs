//! The receiving side of pipelined replication: [`AppendStreams`] turns the `StreamAppend`
//! requests of each stream, which may arrive in any order (the transport processes requests
//! concurrently), back into one ordered input of openraft's `Raft::stream_append`, and answers
//! each request with openraft's result for it.
//!
//! ```text
//! handle(stream_id, seq, rpc) ─▶ early[seq] ─(next_seq present)─▶ feed (mpsc) ─▶ Raft::stream_append
//!        ▲ awaits its oneshot        replies: FIFO of oneshots, pushed as fed     │ results in order
//!        └──────────────────────────── driver task pops one per result ◀──────────┘
//! ```
//!
//! openraft queues request N+1 in its core while the log store still syncs N, so the follower's
//! fsync overlaps the transfer of what follows.
//!
//! Invariants: a request reaches openraft only after every lower `seq` of its stream did; the
//! reply FIFO holds exactly the fed requests not yet answered, in feed order (both change under
//! the stream's lock), so the n-th result answers the n-th fed request. Anything irregular (a
//! duplicate or far-ahead `seq`, a full feed, an openraft error, no progress for
//! `APPEND_STREAM_IDLE_MAX_MS`) ends the stream: its waiting requests are refused and the
//! sender opens a new stream. At most `APPEND_STREAMS_MAX_COUNT` streams live at once.

use raftmq_common::sync::lock;
use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::StreamExt;
use openraft::raft::AppendEntriesRequest;
use tokio::sync::{mpsc, oneshot};
use tokio::time::Instant;

use super::wire::RaftReply;
use crate::config::APPEND_STREAM_INFLIGHT_MAX_COUNT;
use crate::state_machine::Raft;
use crate::type_config::{NodeId, TypeConfig};

/// A stream without progress (no request fed, no result) for this long ends; its sender has
/// long given up (it waits at most a heartbeat interval).
pub const APPEND_STREAM_IDLE_MAX_MS: u64 = 3_000;
/// Most streams one node serves at once (one per leader and follower is the norm; ended ones
/// linger until their idle limit).
pub const APPEND_STREAMS_MAX_COUNT: usize = 64;

const WINDOW: usize = APPEND_STREAM_INFLIGHT_MAX_COUNT as usize;

type Request = AppendEntriesRequest<TypeConfig>;

struct StreamState {
    next_seq: u64,
    /// Requests that arrived before a lower `seq`, each with its reply channel.
    early: BTreeMap<u64, (Request, oneshot::Sender<RaftReply>)>,
    /// Input of openraft's stream; `None` once the stream ended.
    feed: Option<mpsc::Sender<Request>>,
    /// Reply channels of the fed requests, oldest first.
    replies: VecDeque<oneshot::Sender<RaftReply>>,
    last_progress: Instant,
}

impl StreamState {
    fn is_ended(&self) -> bool {
        self.feed.is_none()
    }

    /// Drop everything: waiting requests see their channel close and are refused.
    fn end(&mut self) {
        self.feed = None;
        self.early.clear();
        self.replies.clear();
    }

    /// Accept `seq` and feed every request that is now in order.
    fn accept(&mut self, seq: u64, rpc: Request, reply: oneshot::Sender<RaftReply>) -> Result<(), String> {
        if seq < self.next_seq || self.early.contains_key(&seq) {
            return Err(format!("duplicate seq {seq}"));
        }
        if seq - self.next_seq >= WINDOW as u64 {
            return Err(format!("seq {seq} is more than {WINDOW} ahead of {}", self.next_seq));
        }
        self.early.insert(seq, (rpc, reply));
        while let Some((rpc, reply)) = self.early.remove(&self.next_seq) {
            let feed = self.feed.as_ref().ok_or("stream ended")?;
            feed.try_send(rpc).map_err(|e| format!("stream input: {e}"))?;
            self.replies.push_back(reply);
            self.next_seq += 1;
            self.last_progress = Instant::now();
        }
        Ok(())
    }
}

type Slot = Arc<Mutex<StreamState>>;

/// Counts since the node started (monitoring and tests).
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct StreamStats {
    /// Stream requests received.
    pub requests: u64,
    /// Of those, requests that arrived before a lower `seq` of their stream (buffered).
    pub reordered: u64,
    /// Streams started.
    pub streams: u64,
}

#[derive(Default)]
struct Counters {
    requests: AtomicU64,
    reordered: AtomicU64,
    streams: AtomicU64,
}

/// The live streams of one node. Cheap to clone.
#[derive(Clone, Default)]
pub struct AppendStreams {
    streams: Arc<Mutex<HashMap<u64, Slot>>>,
    counters: Arc<Counters>,
}

impl AppendStreams {
    /// What this node's streams have seen.
    pub fn stats(&self) -> StreamStats {
        let c = &self.counters;
        StreamStats {
            requests: c.requests.load(Ordering::Relaxed),
            reordered: c.reordered.load(Ordering::Relaxed),
            streams: c.streams.load(Ordering::Relaxed),
        }
    }

    /// Streams currently served.
    pub fn len(&self) -> usize {
        lock(&self.streams).len()
    }

    /// Whether no stream is served.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Hand request `seq` of `stream_id` to `raft` in order and wait for its result.
    pub async fn handle(&self, id: NodeId, raft: &Raft, stream_id: u64, seq: u64, rpc: Request) -> RaftReply {
        let slot = match self.slot(raft, stream_id) {
            Ok(s) => s,
            Err(why) => return RaftReply::Refused(format!("node {id}: {why}")),
        };
        let (tx, rx) = oneshot::channel();
        self.counters.requests.fetch_add(1, Ordering::Relaxed);
        {
            let mut st = lock(&slot);
            if seq > st.next_seq {
                self.counters.reordered.fetch_add(1, Ordering::Relaxed);
            }
            if st.is_ended() {
                return RaftReply::Refused(format!("node {id}: stream {stream_id:#x} ended"));
            }
            if let Err(why) = st.accept(seq, rpc, tx) {
                tracing::debug!(id, stream_id, seq, %why, "ending an append stream");
                st.end();
                drop(st);
                self.remove(stream_id, &slot);
                return RaftReply::Refused(format!("node {id}: stream {stream_id:#x}: {why}"));
            }
        }
        // The driver answers or ends the stream (dropping `tx`) within its idle limit; the
        // timeout only guards against a driver that vanished.
        let wait = Duration::from_millis(APPEND_STREAM_IDLE_MAX_MS * 2);
        match tokio::time::timeout(wait, rx).await {
            Ok(Ok(reply)) => reply,
            Ok(Err(_)) | Err(_) => RaftReply::Refused(format!("node {id}: stream {stream_id:#x} ended")),
        }
    }

    /// The stream's state, starting the stream (and its driver) on its first request.
    fn slot(&self, raft: &Raft, stream_id: u64) -> Result<Slot, String> {
        let mut streams = lock(&self.streams);
        if let Some(s) = streams.get(&stream_id) {
            return Ok(Arc::clone(s));
        }
        if streams.len() >= APPEND_STREAMS_MAX_COUNT {
            // Make room from streams that ended or went idle (their driver removes them too,
            // but only when its timer fires).
            let idle = Duration::from_millis(APPEND_STREAM_IDLE_MAX_MS);
            streams.retain(|_, s| {
                let st = lock(s);
                !st.is_ended() && st.last_progress.elapsed() < idle
            });
            if streams.len() >= APPEND_STREAMS_MAX_COUNT {
                return Err(format!("{APPEND_STREAMS_MAX_COUNT} append streams already open"));
            }
        }
        let (feed, rx) = mpsc::channel(WINDOW);
        let slot: Slot = Arc::new(Mutex::new(StreamState {
            next_seq: 0,
            early: BTreeMap::new(),
            feed: Some(feed),
            replies: VecDeque::new(),
            last_progress: Instant::now(),
        }));
        streams.insert(stream_id, Arc::clone(&slot));
        drop(streams);
        self.counters.streams.fetch_add(1, Ordering::Relaxed);
        let input = futures::stream::unfold(rx, |mut rx| async move { rx.recv().await.map(|r| (r, rx)) });
        let output = raft.stream_append(input);
        tokio::spawn(drive(self.clone(), stream_id, Arc::clone(&slot), output));
        Ok(slot)
    }

    fn remove(&self, stream_id: u64, slot: &Slot) {
        let mut streams = lock(&self.streams);
        if streams.get(&stream_id).is_some_and(|s| Arc::ptr_eq(s, slot)) {
            streams.remove(&stream_id);
        }
    }
}

/// Deliver openraft's results to the waiting requests, in order, until the stream ends.
async fn drive<O>(streams: AppendStreams, stream_id: u64, slot: Slot, output: O)
where
    O: futures::Stream<
            Item = Result<openraft::raft::StreamAppendResult<TypeConfig>, openraft::error::Fatal<TypeConfig>>,
        >,
{
    let idle = Duration::from_millis(APPEND_STREAM_IDLE_MAX_MS);
    let mut output = std::pin::pin!(output);
    loop {
        let next = tokio::time::timeout(idle, output.next()).await;
        let mut st = lock(&slot);
        let (reply, last) = match next {
            Err(_) if st.last_progress.elapsed() < idle => continue,
            Err(_) => break,
            Ok(None) => break,
            Ok(Some(Ok(r))) => {
                let last = r.is_err();
                (RaftReply::StreamAppend(r), last)
            }
            Ok(Some(Err(fatal))) => (RaftReply::Refused(format!("raft stopped: {fatal}")), true),
        };
        let Some(tx) = st.replies.pop_front() else {
            tracing::error!(stream_id, "append stream result without a waiting request");
            break;
        };
        st.last_progress = Instant::now();
        // The request's waiter may have been cancelled; the result stands regardless.
        let _ = tx.send(reply);
        if last {
            break;
        }
    }
    lock(&slot).end();
    streams.remove(stream_id, &slot);
}
