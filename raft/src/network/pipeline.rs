//! The client side of pipelined replication: openraft's `stream_append` for one follower,
//! with several AppendEntries in flight at once so that the follower's fsync of batch N
//! overlaps the transfer of batch N+1 and the leader's next read.
//!
//! ```text
//! openraft request stream ──▶ Pipeline ──StreamAppend{stream_id, seq}──▶ Transport::call ─┐ (concurrent)
//!                               ▲  window: ≤ count, ≤ bytes in flight                     │
//!   responses, in seq order ◀───┴── FuturesOrdered ◀──────────────────────────────────────┘
//! ```
//!
//! Invariants: requests carry consecutive `seq` from 0 and the receiver hands them to openraft
//! in that order ([`super::append_stream`]); replies are yielded in request order; the first
//! error (transport, refusal, `Conflict`, `HigherVote`) is the stream's last item and every
//! request still in flight is abandoned — openraft then starts a new stream (a new id) from
//! what was acknowledged. A stream with nothing answered for `soft_ttl` while requests are in
//! flight ends with a timeout (the idle policy openraft asks of streaming transports).
//!
//! A stream whose input holds a single request (heartbeats, probes) is sent as a plain
//! AppendEntries: no stream state on the receiver for the commonest one-shot case.

use std::sync::OnceLock;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use futures::future::BoxFuture;
use futures::stream::FuturesOrdered;
use futures::{FutureExt, Stream, StreamExt};
use openraft::error::{NetworkError, RPCError, Timeout};
use openraft::network::{RPCOption, RPCTypes};
use openraft::raft::{AppendEntriesRequest, AppendEntriesResponse, StreamAppendError, StreamAppendResult};
use tokio::time::Instant;

use super::peer_client::{CallError, PeerClient};
use super::stream_window::StreamWindow;
use super::transport::Transport;
use super::wire::{RaftReply, RaftRequest};
use crate::type_config::{LogId, TypeConfig};

/// One item of openraft's response stream.
pub(crate) type StreamItem = Result<StreamAppendResult<TypeConfig>, RPCError<TypeConfig>>;

/// Process-unique stream ids, offset by a random base so that two processes (leaders) never
/// share one.
fn next_stream_id() -> u64 {
    static BASE: OnceLock<u64> = OnceLock::new();
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let base = *BASE.get_or_init(rand::random::<u64>);
    base.wrapping_add(NEXT.fetch_add(1, Ordering::Relaxed))
}

/// `(prev, last]` of a request: the last log id it makes durable when it succeeds.
fn last_log_id(rpc: &AppendEntriesRequest<TypeConfig>) -> Option<LogId> {
    rpc.entries.last().map(|e| e.log_id).or(rpc.prev_log_id)
}

/// openraft's stream result of a unary reply. A `Conflict` without a `prev_log_id` cannot come
/// from a correct follower (nothing conflicts with the empty prefix); it is a network error
/// rather than the panic openraft's own conversion would be.
pub(crate) fn unary_result(
    resp: AppendEntriesResponse<TypeConfig>,
    prev: Option<LogId>,
    last: Option<LogId>,
) -> Result<StreamAppendResult<TypeConfig>, String> {
    Ok(match resp {
        AppendEntriesResponse::Success => Ok(last),
        AppendEntriesResponse::PartialSuccess(m) => Ok(m),
        AppendEntriesResponse::Conflict => Err(StreamAppendError::Conflict(prev.ok_or("conflict before log start")?)),
        AppendEntriesResponse::HigherVote(v) => Err(StreamAppendError::HigherVote(v)),
    })
}

/// A request in flight resolves to its encoded size and its reply.
type InFlight<'s> = BoxFuture<'s, (u64, Result<RaftReply, CallError>)>;

/// The state of one pipelined stream.
struct Pipeline<'s, T, S> {
    peer: &'s PeerClient<T>,
    input: S,
    input_done: bool,
    /// A request taken from the input before the window had room for it.
    held: Option<AppendEntriesRequest<TypeConfig>>,
    window: StreamWindow,
    stream_id: u64,
    next_seq: u64,
    inflight: FuturesOrdered<InFlight<'s>>,
    inflight_bytes: u64,
    /// Longest wait for a reply while requests are in flight.
    idle: Duration,
    /// Deadline of one request (transport level); the idle policy usually fires first.
    call_timeout: Duration,
    last_progress: Instant,
    ended: bool,
}

impl<'s, T, S> Pipeline<'s, T, S>
where
    T: Transport,
    S: Stream<Item = AppendEntriesRequest<TypeConfig>> + Send + Unpin + 'static,
{
    fn has_room(&self) -> bool {
        self.inflight.is_empty() || (self.inflight.len() < self.window.count && self.inflight_bytes < self.window.bytes)
    }

    fn send(&mut self, rpc: AppendEntriesRequest<TypeConfig>) {
        if self.inflight.is_empty() {
            self.last_progress = Instant::now();
        }
        let req = RaftRequest::StreamAppend { stream_id: self.stream_id, seq: self.next_seq, rpc };
        self.next_seq += 1;
        let bytes = req.size_hint() as u64;
        self.inflight_bytes += bytes;
        let (peer, timeout) = (self.peer, self.call_timeout);
        self.inflight.push_back(Box::pin(async move { (bytes, peer.call(&req, timeout).await) }));
    }

    fn end(&mut self, item: StreamItem) -> Option<StreamItem> {
        self.ended = true;
        self.held = None;
        self.inflight = FuturesOrdered::new();
        Some(item)
    }

    fn reply_item(&self, reply: Result<RaftReply, CallError>) -> StreamItem {
        let t = self.call_timeout;
        match reply {
            Ok(RaftReply::StreamAppend(r)) => Ok(r),
            Ok(other) => Err(self.peer.rpc_error(
                CallError::Garbage(format!("unexpected reply {other:?}")),
                RPCTypes::AppendEntries,
                t,
            )),
            Err(e) => Err(self.peer.rpc_error(e, RPCTypes::AppendEntries, t)),
        }
    }

    /// The next reply in request order, sending from the input whenever the window has room.
    async fn next_item(&mut self) -> Option<StreamItem> {
        if self.ended {
            return None;
        }
        loop {
            let room = self.has_room();
            if room && let Some(rpc) = self.held.take() {
                self.send(rpc);
                continue;
            }
            let want_input = room && !self.input_done;
            if !want_input && self.inflight.is_empty() {
                return None;
            }
            let idle_at = self.last_progress + self.idle;
            tokio::select! {
                biased;
                Some((bytes, reply)) = self.inflight.next(), if !self.inflight.is_empty() => {
                    self.inflight_bytes -= bytes;
                    self.last_progress = Instant::now();
                    let item = self.reply_item(reply);
                    return if matches!(item, Ok(Ok(_))) { Some(item) } else { self.end(item) };
                }
                rpc = self.input.next(), if want_input => match rpc {
                    Some(rpc) => self.send(rpc),
                    None => self.input_done = true,
                },
                () = tokio::time::sleep_until(idle_at), if !self.inflight.is_empty() => {
                    let timeout = Timeout {
                        action: RPCTypes::AppendEntries,
                        id: self.peer.id(),
                        target: self.peer.target(),
                        timeout: self.idle,
                    };
                    return self.end(Err(RPCError::Timeout(timeout)));
                }
            }
        }
    }
}

/// openraft's `stream_append` over `peer`, pipelined within `window`.
pub(crate) async fn stream_append<'s, T, S>(
    peer: &'s PeerClient<T>,
    mut input: S,
    option: RPCOption,
    window: StreamWindow,
) -> Result<futures::stream::BoxStream<'s, StreamItem>, RPCError<TypeConfig>>
where
    T: Transport,
    S: Stream<Item = AppendEntriesRequest<TypeConfig>> + Send + Unpin + 'static,
{
    let Some(first) = input.next().await else {
        return Ok(futures::stream::empty().boxed());
    };
    // An input that is already exhausted after one request (heartbeat, probe) goes unary.
    let held = match input.next().now_or_never() {
        Some(None) => {
            let (prev, last) = (first.prev_log_id, last_log_id(&first));
            let t = option.soft_ttl();
            let item = match peer.call(&RaftRequest::AppendEntries(first), t).await {
                Ok(RaftReply::AppendEntries(r)) => unary_result(r, prev, last)
                    .map_err(|m| RPCError::Network(NetworkError::from_string(format!("{}: {m}", peer.target())))),
                Ok(other) => Err(peer.rpc_error(
                    CallError::Garbage(format!("unexpected reply {other:?}")),
                    RPCTypes::AppendEntries,
                    t,
                )),
                Err(e) => Err(peer.rpc_error(e, RPCTypes::AppendEntries, t)),
            };
            return Ok(futures::stream::once(async move { item }).boxed());
        }
        Some(Some(second)) => Some(second),
        None => None,
    };
    let mut p = Pipeline {
        peer,
        input,
        input_done: false,
        held,
        window,
        stream_id: next_stream_id(),
        next_seq: 0,
        inflight: FuturesOrdered::new(),
        inflight_bytes: 0,
        idle: option.soft_ttl(),
        call_timeout: option.soft_ttl().saturating_mul(u32::try_from(window.count).unwrap_or(u32::MAX).max(1)),
        last_progress: Instant::now(),
        ended: false,
    };
    p.send(first);
    Ok(futures::stream::unfold(p, |mut p| async move { p.next_item().await.map(|item| (item, p)) }).boxed())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::type_config::{Vote, log_id};

    #[test]
    fn unary_results_never_panic() {
        let prev = Some(log_id(1, 4));
        let last = Some(log_id(1, 9));
        assert_eq!(unary_result(AppendEntriesResponse::Success, prev, last), Ok(Ok(last)));
        assert_eq!(unary_result(AppendEntriesResponse::PartialSuccess(prev), prev, last), Ok(Ok(prev)));
        assert_eq!(
            unary_result(AppendEntriesResponse::Conflict, prev, last),
            Ok(Err(StreamAppendError::Conflict(log_id(1, 4))))
        );
        assert!(unary_result(AppendEntriesResponse::Conflict, None, last).is_err());
        let v = Vote::new_committed(3, 2);
        assert_eq!(
            unary_result(AppendEntriesResponse::HigherVote(v), prev, last),
            Ok(Err(StreamAppendError::HigherVote(v)))
        );
    }

    #[test]
    fn stream_ids_are_distinct() {
        let a = next_stream_id();
        let b = next_stream_id();
        assert_ne!(a, b);
    }
}
