//! [`Connection`]: one TCP connection carrying RocketMQ frames both ways, shared by the server and
//! the client so that opaque correlation, dispatch and closing exist once.
//!
//! ```text
//!   invoke / invoke_oneway / responses ──► bounded mpsc<Bytes> ──► writer task ──► socket
//!   socket ──► reader task ──┬─ response ──► pending[opaque] (oneshot) ──► the waiting invoke
//!                            └─ request  ──► spawned task: ProcessorTable ──► response ──► mpsc
//! ```
//!
//! Invariants:
//! - Every request this side sends has an entry in `pending` from before it is queued until its
//!   response arrives, its caller gives up (timeout or cancellation), or the connection closes;
//!   a closed connection holds no entries and accepts none, so no caller waits forever.
//! - A connection closes once ([`CloseReason`] is set once): the reason is recorded before pending
//!   callers are failed, so they can report it, and the close hook runs exactly once.
//! - A connection made with credentials (`ConnectionSetup::credentials`, plain ACL) signs every
//!   request it sends just before encoding it, after its opaque is set; a retried request is signed
//!   again. Responses are never signed, and server connections have no credentials.
//! - The reader and writer tasks, and dispatch of the peer's requests, live in `connection_tasks`.

use std::collections::HashMap;
use std::collections::hash_map::Entry;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::Mutex;
use std::sync::MutexGuard;
use std::sync::OnceLock;
use std::sync::atomic::AtomicI32;
use std::sync::atomic::AtomicU64;
use std::sync::atomic::AtomicUsize;
use std::sync::atomic::Ordering;
use std::time::Duration;

use bytes::Bytes;
use tokio::sync::Notify;
use tokio::sync::Semaphore;
use tokio::sync::mpsc;
use tokio::sync::oneshot;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

pub use super::close_reason::CloseReason;
pub use super::close_reason::ConnectionClosed;
pub use super::close_reason::ConnectionClosedHook;
use super::error::RemotingError;
use super::server_limits::ServerLimits;
use crate::limits::CONNECTION_INFLIGHT_MAX_COUNT;
use crate::protocol::RemotingCommand;
use crate::protocol::acl::SessionCredentials;
use crate::protocol::command::FLAG_ONEWAY;
use crate::protocol::command::FLAG_RESPONSE;

/// A handle to one live (or closed) connection; cheap to clone.
#[derive(Clone)]
pub struct Connection {
    pub(crate) inner: Arc<ConnectionInner>,
}

pub(crate) struct ConnectionInner {
    pub(crate) id: u64,
    pub(crate) peer_addr: SocketAddr,
    pub(crate) local_addr: SocketAddr,
    /// `peer_addr` as errors print it.
    pub(crate) peer: String,
    pub(crate) frames: mpsc::Sender<Bytes>,
    pub(crate) pending: Mutex<PendingCalls>,
    pub(crate) opaque: Arc<AtomicI32>,
    pub(crate) close_reason: OnceLock<CloseReason>,
    pub(crate) closed: CancellationToken,
    pub(crate) on_closed: Option<ConnectionClosedHook>,
    /// See [`ConnectionSetup::coalesce_writes`].
    pub(crate) coalesce_writes: bool,
    /// See [`ConnectionSetup::credentials`].
    pub(crate) credentials: Option<Arc<SessionCredentials>>,
    /// Server connections only: queued bytes, idle time (see `connection_tasks`).
    pub(crate) limits: Option<ServerLimits>,
    /// Bytes of the frames queued for the writer and not yet written.
    pub(crate) queued_bytes: AtomicUsize,
    /// Woken by the writer after each flush (a reader paused on `queued_bytes` waits on it).
    pub(crate) drained: Notify,
    /// When the connection started; `last_active_ms` counts from it.
    pub(crate) born: Instant,
    /// Last frame read or flush written, in ms since `born`.
    pub(crate) last_active_ms: AtomicU64,
    /// 1 + the ms since `born` of the last frame read (0: none yet).
    pub(crate) last_read_ms: AtomicU64,
    /// Requests from the peer being processed now (permits of at most
    /// `CONNECTION_CONCURRENT_REQUESTS_MAX_COUNT`).
    pub(crate) requests: Arc<Semaphore>,
}

#[derive(Default)]
pub(crate) struct PendingCalls {
    pub(crate) closed: bool,
    pub(crate) calls: HashMap<i32, oneshot::Sender<RemotingCommand>>,
}

impl std::fmt::Debug for Connection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Connection")
            .field("id", &self.inner.id)
            .field("peer_addr", &self.inner.peer_addr)
            .field("closed", &self.inner.close_reason.get())
            .finish()
    }
}

impl Connection {
    /// Process-unique id.
    pub fn id(&self) -> u64 {
        self.inner.id
    }

    /// The peer's address.
    pub fn peer_addr(&self) -> SocketAddr {
        self.inner.peer_addr
    }

    /// This side's address.
    pub fn local_addr(&self) -> SocketAddr {
        self.inner.local_addr
    }

    /// Whether the connection has closed (or is closing).
    pub fn is_closed(&self) -> bool {
        self.inner.close_reason.get().is_some()
    }

    /// Why the connection closed, once it has.
    pub fn close_reason(&self) -> Option<CloseReason> {
        self.inner.close_reason.get().cloned()
    }

    /// Waits until the connection closes and says why.
    pub async fn closed(&self) -> CloseReason {
        self.inner.closed.cancelled().await;
        self.reason_or_local()
    }

    /// Calls waiting for a response on this connection.
    pub fn pending_count(&self) -> usize {
        self.lock_pending().calls.len()
    }

    /// Closes the connection: pending calls fail, frames already queued are still flushed.
    pub fn close(&self) {
        self.close_with(CloseReason::Local);
    }

    /// Sends a request and waits for its response until `timeout` passes.
    pub async fn invoke(&self, request: RemotingCommand, timeout: Duration) -> Result<RemotingCommand, RemotingError> {
        self.invoke_until(request, deadline_after(timeout), timeout).await
    }

    /// Sends a oneway request: flagged oneway, no response expected. Returns once the frame is
    /// queued for writing; waits at most `timeout` for room in the queue.
    pub async fn invoke_oneway(&self, request: RemotingCommand, timeout: Duration) -> Result<(), RemotingError> {
        if self.is_closed() {
            return Err(self.not_connected());
        }
        let mut request = request.into_oneway();
        request.flag &= !FLAG_RESPONSE;
        request.opaque = self.inner.opaque.fetch_add(1, Ordering::Relaxed);
        if let Some(credentials) = &self.inner.credentials {
            credentials.sign(&mut request);
        }
        let frame = request.encode()?.freeze();
        self.queue_frame(frame, deadline_after(timeout), timeout).await
    }

    /// [`Self::invoke`] with an absolute deadline; `timeout` is only reported in errors.
    pub(crate) async fn invoke_until(
        &self,
        mut request: RemotingCommand,
        deadline: Instant,
        timeout: Duration,
    ) -> Result<RemotingCommand, RemotingError> {
        request.flag &= !(FLAG_RESPONSE | FLAG_ONEWAY);
        let (opaque, response) = self.register_call()?;
        // Removes the entry whichever way this call ends, including when the caller drops it.
        let mut pending = PendingGuard { connection: self, opaque, armed: true };
        request.opaque = opaque;
        if let Some(credentials) = &self.inner.credentials {
            credentials.sign(&mut request);
        }
        let frame = request.encode()?.freeze();
        self.queue_frame(frame, deadline, timeout).await?;
        match tokio::time::timeout_at(deadline, response).await {
            Ok(Ok(response)) => {
                // The reader removed the entry before it sent the response.
                pending.armed = false;
                Ok(response)
            }
            Ok(Err(_)) => {
                Err(RemotingError::ConnectionClosed { addr: self.inner.peer.clone(), reason: self.reason_or_local() })
            }
            Err(_) => Err(RemotingError::Timeout { addr: self.inner.peer.clone(), timeout_ms: millis(timeout) }),
        }
    }

    fn register_call(&self) -> Result<(i32, oneshot::Receiver<RemotingCommand>), RemotingError> {
        let (tx, rx) = oneshot::channel();
        let mut pending = self.lock_pending();
        if pending.closed {
            drop(pending);
            return Err(self.not_connected());
        }
        if pending.calls.len() >= CONNECTION_INFLIGHT_MAX_COUNT {
            return Err(RemotingError::TooManyInFlight {
                addr: self.inner.peer.clone(),
                limit: CONNECTION_INFLIGHT_MAX_COUNT,
            });
        }
        // The table holds fewer entries than there are i32 values, so this finds a free opaque;
        // a collision needs 2^32 calls while one stays pending.
        loop {
            let opaque = self.inner.opaque.fetch_add(1, Ordering::Relaxed);
            if let Entry::Vacant(slot) = pending.calls.entry(opaque) {
                slot.insert(tx);
                return Ok((opaque, rx));
            }
        }
    }

    async fn queue_frame(&self, frame: Bytes, deadline: Instant, timeout: Duration) -> Result<(), RemotingError> {
        let len = frame.len();
        self.inner.queued_bytes.fetch_add(len, Ordering::Relaxed);
        let result = match tokio::time::timeout_at(deadline, self.inner.frames.send(frame)).await {
            Ok(Ok(())) => return Ok(()),
            Ok(Err(_)) => Err(self.not_connected()),
            Err(_) => Err(RemotingError::SendTimeout { addr: self.inner.peer.clone(), timeout_ms: millis(timeout) }),
        };
        self.inner.queued_bytes.fetch_sub(len, Ordering::Relaxed);
        result
    }

    /// Bytes queued for the writer and not yet written.
    pub fn queued_bytes(&self) -> usize {
        self.inner.queued_bytes.load(Ordering::Relaxed)
    }

    /// `at` in ms since the connection was born.
    fn ms_since_born(&self, at: Instant) -> u64 {
        millis(at.saturating_duration_since(self.inner.born))
    }

    /// Records that the connection made progress (a frame read, a flush written).
    pub(crate) fn touch(&self) {
        self.inner.last_active_ms.store(self.ms_since_born(Instant::now()), Ordering::Relaxed);
    }

    /// Records a frame read from the peer (progress, and a sign of life).
    pub(crate) fn touch_read(&self) {
        let ms = self.ms_since_born(Instant::now());
        self.inner.last_active_ms.store(ms, Ordering::Relaxed);
        self.inner.last_read_ms.store(ms.saturating_add(1), Ordering::Relaxed);
    }

    /// Whether a frame was read from the peer at or after `since` (to the millisecond).
    pub fn heard_since(&self, since: Instant) -> bool {
        // `last_read_ms` is 1 + the read's ms: 0 (nothing read) never passes.
        self.inner.last_read_ms.load(Ordering::Relaxed) > self.ms_since_born(since)
    }

    fn not_connected(&self) -> RemotingError {
        RemotingError::NotConnected { addr: self.inner.peer.clone(), reason: self.reason_or_local() }
    }

    fn reason_or_local(&self) -> CloseReason {
        self.inner.close_reason.get().cloned().unwrap_or(CloseReason::Local)
    }

    fn lock_pending(&self) -> MutexGuard<'_, PendingCalls> {
        // The table stays consistent across a panic (single insert/remove), so poisoning is moot.
        self.inner.pending.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Closes once: records the reason, fails pending calls, stops both tasks, runs the hook.
    pub(crate) fn close_with(&self, reason: CloseReason) {
        if self.inner.close_reason.set(reason.clone()).is_err() {
            return;
        }
        let failed = {
            let mut pending = self.lock_pending();
            pending.closed = true;
            std::mem::take(&mut pending.calls)
        };
        // Dropping the senders wakes every waiting call with the reason recorded above.
        drop(failed);
        self.inner.closed.cancel();
        tracing::debug!(connection_id = self.inner.id, peer = %self.inner.peer, %reason, "connection closed");
        if let Some(hook) = &self.inner.on_closed {
            hook(&ConnectionClosed { connection_id: self.inner.id, peer_addr: self.inner.peer_addr, reason });
        }
    }

    pub(crate) fn complete_call(&self, response: RemotingCommand) {
        let waiter = self.lock_pending().calls.remove(&response.opaque);
        match waiter {
            // The caller may have given up between our remove and this send; nothing to do then.
            Some(waiter) => drop(waiter.send(response)),
            None => tracing::debug!(peer = %self.inner.peer, opaque = response.opaque,
                "response to an unknown or timed-out request dropped"),
        }
    }
}

/// Drops a call's pending entry when the call ends for any reason.
struct PendingGuard<'a> {
    connection: &'a Connection,
    opaque: i32,
    armed: bool,
}

impl Drop for PendingGuard<'_> {
    fn drop(&mut self) {
        if self.armed {
            self.connection.lock_pending().calls.remove(&self.opaque);
        }
    }
}

/// `now + timeout`, saturating: a caller passing `Duration::MAX` means "no deadline", not a panic.
pub(crate) fn deadline_after(timeout: Duration) -> Instant {
    let now = Instant::now();
    now.checked_add(timeout).unwrap_or_else(|| now + Duration::from_secs(30 * 365 * 86_400))
}

pub(crate) fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

#[cfg(test)]
pub(crate) mod tests {
    use std::sync::atomic::AtomicI32;

    use tokio::net::TcpListener;
    use tokio::net::TcpStream;
    use tokio_util::sync::CancellationToken;
    use tokio_util::task::TaskTracker;

    use super::*;
    use crate::remoting::connection_tasks::ConnectionSetup;
    use crate::remoting::processor::ProcessorTable;

    /// Two connected ends on loopback, each dispatching through its own table.
    pub(crate) async fn loopback_pair(near: ProcessorTable, far: ProcessorTable) -> (Connection, Connection) {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let (near_stream, accepted) =
            tokio::join!(TcpStream::connect(listener.local_addr().unwrap()), listener.accept());
        let setup = |processors| ConnectionSetup {
            processors: Arc::new(processors),
            opaque: Arc::new(AtomicI32::new(0)),
            io_tasks: TaskTracker::new(),
            request_tasks: TaskTracker::new(),
            refuse_requests: CancellationToken::new(),
            refusal_remark: Arc::default(),
            on_closed: None,
            coalesce_writes: false,
            credentials: None,
            limits: None,
        };
        let near = Connection::spawn(near_stream.unwrap(), setup(near)).unwrap();
        let far = Connection::spawn(accepted.unwrap().0, setup(far)).unwrap();
        (near, far)
    }

    #[test]
    fn deadline_after_saturates() {
        assert!(deadline_after(Duration::MAX) > Instant::now() + Duration::from_secs(86_400));
    }

    #[tokio::test]
    async fn close_fails_pending_calls_and_refuses_new_ones() {
        let mut far = ProcessorTable::new();
        far.register_default(Arc::new(crate::remoting::processor_fn(|_ctx, _req| std::future::pending())));
        let (near, _far) = loopback_pair(ProcessorTable::new(), far).await;
        let call =
            near.invoke(RemotingCommand::request(crate::protocol::RequestCode::HeartBeat), Duration::from_secs(30));
        let closer = async {
            while near.pending_count() == 0 {
                tokio::task::yield_now().await;
            }
            near.close();
        };
        let (result, ()) = tokio::join!(call, closer);
        let err = result.unwrap_err();
        assert!(matches!(&err, RemotingError::ConnectionClosed { reason: CloseReason::Local, .. }), "{err}");
        assert_eq!(near.pending_count(), 0);
        let err = near
            .invoke(RemotingCommand::request(crate::protocol::RequestCode::HeartBeat), Duration::from_secs(1))
            .await
            .unwrap_err();
        assert!(matches!(err, RemotingError::NotConnected { .. }), "{err}");
        assert!(!err.is_outcome_unknown());
        assert_eq!(near.closed().await, CloseReason::Local);
    }
}
