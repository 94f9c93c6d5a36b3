//! The tasks that run a [`Connection`]: [`Connection::spawn`] starts a reader and a writer on a
//! socket; the reader completes our calls and hands the peer's requests to the [`ProcessorTable`],
//! each on its own task; the writer drains the frame queue to the socket.
//!
//! Invariants:
//! - Requests from the peer run concurrently, at most
//!   [`CONNECTION_CONCURRENT_REQUESTS_MAX_COUNT`] at a time; beyond that the peer gets SYSTEM_BUSY.
//!   The reader never waits for a processor, so responses to our own requests always get through
//!   (a processor may itself call the peer on this connection).
//! - The transport, not the processor, ties a response to its request (opaque, serialize type,
//!   response flag); a panicking processor is answered SYSTEM_ERROR.
//! - A server connection ([`ServerLimits`]) stops reading the peer's requests while more than
//!   `read_pause_queued_bytes` of responses wait for the writer, and closes when a response would
//!   pass `queued_max_bytes` (a peer that never reads pins at most that); it closes after
//!   `idle_max` without a read, a write or a request in progress. `queued_bytes` counts every
//!   frame from queueing until its batch is flushed.
//! - On close the writer flushes what is already queued (bounded by
//!   [`CONNECTION_CLOSE_FLUSH_MAX_MS`]), so responses finished before a graceful shutdown are sent.

use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::sync::Mutex;
use std::sync::OnceLock;
use std::sync::atomic::AtomicI32;
use std::sync::atomic::AtomicU64;
use std::sync::atomic::AtomicUsize;
use std::sync::atomic::Ordering;
use std::time::Duration;

use bytes::Bytes;
use futures::FutureExt;
use futures::StreamExt;
use tokio::io::AsyncWriteExt;
use tokio::io::BufWriter;
use tokio::sync::Notify;
use tokio::sync::OwnedSemaphorePermit;
use tokio::sync::Semaphore;
use tokio::sync::mpsc;
use tokio::time::Instant;
use tokio_util::codec::FramedRead;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use super::close_reason::CloseReason;
use super::close_reason::ConnectionClosedHook;
use super::codec::CodecError;
use super::codec::RemotingCodec;
use super::connection::Connection;
use super::connection::ConnectionInner;
use super::connection::PendingCalls;
use super::processor::ConnectionContext;
use super::processor::ProcessorTable;
use super::server_limits::ServerLimits;
use super::stream::ReadHalf;
use super::stream::RemotingStream;
use super::stream::WriteHalf;
use crate::limits::CONNECTION_CLOSE_FLUSH_MAX_MS;
use crate::limits::CONNECTION_CONCURRENT_REQUESTS_MAX_COUNT;
use crate::limits::CONNECTION_WRITE_BATCH_MAX_COUNT;
use crate::limits::CONNECTION_WRITE_QUEUE_MAX_COUNT;
use crate::protocol::RemotingCommand;
use crate::protocol::ResponseCode;
use crate::protocol::acl::SessionCredentials;
use crate::protocol::command::FLAG_ONEWAY;
use crate::protocol::command::FLAG_RESPONSE;

const WRITE_BUFFER_BYTES: usize = 64 * 1024;
const READ_BUFFER_BYTES: usize = 64 * 1024;

/// RocketMQ's remark when a processor's pool rejects a request (`NettyRemotingAbstract`).
const OVERLOAD_REMARK: &str = "[OVERLOAD]system busy, start flow control for a while";
/// The remark of a request refused during a graceful shutdown, unless the owner set another
/// ([`super::server::RemotingServer::set_refusal_remark`]).
pub const SHUTTING_DOWN_REMARK: &str = "[SHUTDOWN]the server is shutting down, try another one";

static NEXT_CONNECTION_ID: AtomicU64 = AtomicU64::new(1);

/// What a server or client gives each connection it starts.
#[derive(Clone)]
pub(crate) struct ConnectionSetup {
    /// Handles requests from the peer.
    pub processors: Arc<ProcessorTable>,
    /// Source of opaques for requests this side sends; shared by all connections of one owner.
    pub opaque: Arc<AtomicI32>,
    /// Reader and writer tasks are spawned here, so the owner can wait for them.
    pub io_tasks: TaskTracker,
    /// Request processing tasks are spawned here, so a graceful shutdown can drain them.
    pub request_tasks: TaskTracker,
    /// Once cancelled, new requests from the peer are refused (graceful shutdown).
    pub refuse_requests: CancellationToken,
    /// The remark of those refusals when set (a stopping broker names its group's new leader);
    /// [`SHUTTING_DOWN_REMARK`] otherwise.
    pub refusal_remark: Arc<OnceLock<String>>,
    /// Told when the connection closes.
    pub on_closed: Option<ConnectionClosedHook>,
    /// The writer yields once before a small batch so that frames finished at the same moment
    /// leave in one write: fewer syscalls for many concurrent requests (a broker's clients, a
    /// producer), one scheduler pass of latency for each (off for Raft RPC, whose commit latency
    /// bounds a group's throughput).
    pub coalesce_writes: bool,
    /// Every request this side sends is signed with these (plain ACL); `None` on servers.
    pub credentials: Option<Arc<SessionCredentials>>,
    /// A server's bounds on queued response bytes and idle time; `None` on clients.
    pub limits: Option<ServerLimits>,
}

impl Connection {
    /// Starts the reader and writer tasks of `stream` (plain or TLS, handshake done).
    pub(crate) fn spawn(stream: impl Into<RemotingStream>, setup: ConnectionSetup) -> std::io::Result<Connection> {
        let stream = stream.into();
        // Nagle would hold small responses back for the peer's delayed ACK.
        stream.tcp().set_nodelay(true)?;
        let peer_addr = stream.peer_addr()?;
        let local_addr = stream.local_addr()?;
        let (read_half, write_half) = stream.into_split();
        let (frames, frames_rx) = mpsc::channel(CONNECTION_WRITE_QUEUE_MAX_COUNT);
        let connection = Connection {
            inner: Arc::new(ConnectionInner {
                id: NEXT_CONNECTION_ID.fetch_add(1, Ordering::Relaxed),
                peer_addr,
                local_addr,
                peer: peer_addr.to_string(),
                frames,
                pending: Mutex::new(PendingCalls::default()),
                opaque: setup.opaque.clone(),
                close_reason: OnceLock::new(),
                closed: CancellationToken::new(),
                on_closed: setup.on_closed.clone(),
                coalesce_writes: setup.coalesce_writes,
                credentials: setup.credentials.clone(),
                limits: setup.limits,
                queued_bytes: AtomicUsize::new(0),
                drained: Notify::new(),
                born: Instant::now(),
                last_active_ms: AtomicU64::new(0),
                last_read_ms: AtomicU64::new(0),
                requests: Arc::new(Semaphore::new(CONNECTION_CONCURRENT_REQUESTS_MAX_COUNT)),
            }),
        };
        let writer = connection.clone();
        setup.io_tasks.spawn(async move { writer.write_loop(frames_rx, write_half).await });
        if let Some(limits) = setup.limits {
            let watchdog = connection.clone();
            setup.io_tasks.spawn(async move { watchdog.close_when_idle(limits.idle_max).await });
        }
        let reader = connection.clone();
        let io_tasks = setup.io_tasks.clone();
        io_tasks.spawn(async move { reader.read_loop(read_half, setup).await });
        Ok(connection)
    }

    /// Closes the connection once it has read nothing, written nothing and run no request of the
    /// peer's for `idle_max` (Java's `IdleStateHandler` with `serverChannelMaxIdleTimeSeconds`).
    async fn close_when_idle(self, idle_max: Duration) {
        let idle_ms = u64::try_from(idle_max.as_millis()).unwrap_or(u64::MAX);
        loop {
            let last = self.inner.last_active_ms.load(Ordering::Relaxed);
            let due = self.inner.born + Duration::from_millis(last.saturating_add(idle_ms));
            tokio::select! {
                _ = self.inner.closed.cancelled() => return,
                _ = tokio::time::sleep_until(due) => {}
            }
            if self.inner.last_active_ms.load(Ordering::Relaxed) != last {
                continue;
            }
            if self.inner.requests.available_permits() < CONNECTION_CONCURRENT_REQUESTS_MAX_COUNT {
                // A request in progress (a parked pull) is activity: look again a period later.
                self.touch();
                continue;
            }
            tracing::info!(peer = %self.inner.peer, connection_id = self.inner.id, idle_secs = idle_max.as_secs(),
                "closing an idle connection");
            self.close_with(CloseReason::Idle(idle_max.as_secs()));
            return;
        }
    }

    /// Waits while more than `pause_bytes` of responses are queued: a peer that does not read its
    /// answers gets no more of its requests read. False once the connection closed.
    async fn wait_drained(&self, pause_bytes: usize) -> bool {
        loop {
            let drained = self.inner.drained.notified();
            tokio::pin!(drained);
            drained.as_mut().enable();
            if self.inner.queued_bytes.load(Ordering::Relaxed) <= pause_bytes {
                return true;
            }
            tokio::select! {
                _ = self.inner.closed.cancelled() => return false,
                _ = drained => {}
            }
        }
    }

    /// Queues a response frame of the peer's request. On a server connection whose queue would pass
    /// `queued_max_bytes` the connection is closed instead (the peer does not read).
    async fn queue_response(&self, frame: Bytes) {
        let len = frame.len();
        let queued = self.inner.queued_bytes.fetch_add(len, Ordering::Relaxed) + len;
        if let Some(limits) = self.inner.limits
            && queued > limits.queued_max_bytes
        {
            self.inner.queued_bytes.fetch_sub(len, Ordering::Relaxed);
            tracing::warn!(peer = %self.inner.peer, connection_id = self.inner.id, queued,
                "closing a connection whose peer does not read its responses");
            self.close_with(CloseReason::SlowReader(queued));
            return;
        }
        // Fails only when the connection closed; the peer has nothing left to receive it.
        if self.inner.frames.send(frame).await.is_err() {
            self.inner.queued_bytes.fetch_sub(len, Ordering::Relaxed);
        }
    }

    async fn read_loop(self, read_half: ReadHalf, setup: ConnectionSetup) {
        let mut frames = FramedRead::with_capacity(read_half, RemotingCodec::new(), READ_BUFFER_BYTES);
        let requests = Arc::clone(&self.inner.requests);
        let pause_bytes = setup.limits.map(|l| l.read_pause_queued_bytes);
        let reason = loop {
            if let Some(pause_bytes) = pause_bytes
                && !self.wait_drained(pause_bytes).await
            {
                return;
            }
            let next = tokio::select! {
                biased;
                _ = self.inner.closed.cancelled() => return,
                next = frames.next() => next,
            };
            match next {
                None => break CloseReason::PeerClosed,
                Some(Err(CodecError::Io(e))) => break CloseReason::Io(e.to_string()),
                Some(Err(e)) => {
                    tracing::warn!(peer = %self.inner.peer, connection_id = self.inner.id, error = %e,
                        "closing connection after a bad frame");
                    break CloseReason::BadFrame(e.to_string());
                }
                Some(Ok(command)) if command.is_response() => {
                    self.touch_read();
                    self.complete_call(command);
                }
                Some(Ok(command)) => {
                    self.touch_read();
                    self.accept_request(command, &setup, &requests);
                }
            }
        };
        self.close_with(reason);
    }

    fn accept_request(&self, request: RemotingCommand, setup: &ConnectionSetup, requests: &Arc<Semaphore>) {
        if setup.refuse_requests.is_cancelled() {
            let remark = setup.refusal_remark.get().map_or(SHUTTING_DOWN_REMARK, String::as_str);
            self.refuse(&request, ResponseCode::ServiceNotAvailable, remark);
            return;
        }
        let Ok(permit) = requests.clone().try_acquire_owned() else {
            tracing::warn!(peer = %self.inner.peer, code = request.code, "too many concurrent requests on one connection");
            self.refuse(&request, ResponseCode::SystemBusy, OVERLOAD_REMARK);
            return;
        };
        let connection = self.clone();
        let processors = setup.processors.clone();
        setup.request_tasks.spawn(async move { connection.run_request(processors, request, permit).await });
    }

    /// Answers without running a processor; never waits, so the reader keeps reading.
    fn refuse(&self, request: &RemotingCommand, code: ResponseCode, remark: &str) {
        if request.is_oneway() {
            return;
        }
        let response = RemotingCommand::response(code, Some(remark.to_string())).answering(request);
        match response.encode() {
            // A full queue means the peer is not reading; it will time out, as it would anyway.
            Ok(frame) => {
                let frame = frame.freeze();
                let len = frame.len();
                if self.inner.frames.try_send(frame).is_ok() {
                    self.inner.queued_bytes.fetch_add(len, Ordering::Relaxed);
                }
            }
            Err(e) => tracing::warn!(peer = %self.inner.peer, error = %e, "cannot encode a refusal"),
        }
    }

    async fn run_request(
        self,
        processors: Arc<ProcessorTable>,
        request: RemotingCommand,
        _permit: OwnedSemaphorePermit,
    ) {
        let code = request.code;
        let opaque = request.opaque;
        let oneway = request.is_oneway();
        let serialize_type = request.serialize_type;
        let ctx = ConnectionContext::new(self.clone());
        let outcome = AssertUnwindSafe(processors.dispatch(ctx, request)).catch_unwind().await;
        let response = match outcome {
            Ok(response) => response,
            Err(_) => {
                tracing::error!(peer = %self.inner.peer, code, "request processor panicked");
                Some(RemotingCommand::response(
                    ResponseCode::SystemError,
                    Some(format!("processing request code {code} failed: processor panicked")),
                ))
            }
        };
        let Some(mut response) = response else { return };
        if oneway {
            return;
        }
        // The transport ties the answer to the request, whatever the processor set.
        response.opaque = opaque;
        response.serialize_type = serialize_type;
        response.flag = (response.flag | FLAG_RESPONSE) & !FLAG_ONEWAY;
        let frame = match response.encode() {
            Ok(frame) => frame.freeze(),
            Err(e) => {
                tracing::error!(peer = %self.inner.peer, code, error = %e, "cannot encode a response");
                let fallback = RemotingCommand::response(
                    ResponseCode::SystemError,
                    Some(format!("cannot encode the response: {e}")),
                );
                match fallback.answering(&response).encode() {
                    Ok(frame) => frame.freeze(),
                    Err(_) => return,
                }
            }
        };
        self.queue_response(frame).await;
    }

    async fn write_loop(self, frames: mpsc::Receiver<Bytes>, write_half: WriteHalf) {
        let flush_deadline = async {
            self.inner.closed.cancelled().await;
            tokio::time::sleep(Duration::from_millis(CONNECTION_CLOSE_FLUSH_MAX_MS)).await;
        };
        let result = tokio::select! {
            result = self.write_frames(frames, write_half) => result,
            _ = flush_deadline => Err(std::io::Error::new(std::io::ErrorKind::TimedOut, "flush on close timed out")),
        };
        if let Err(e) = result {
            tracing::debug!(peer = %self.inner.peer, error = %e, "connection writer stopped");
            self.close_with(CloseReason::Io(e.to_string()));
        }
    }

    async fn write_frames(&self, mut frames: mpsc::Receiver<Bytes>, write_half: WriteHalf) -> std::io::Result<()> {
        let coalesce = self.inner.coalesce_writes;
        let mut out = BufWriter::with_capacity(WRITE_BUFFER_BYTES, write_half);
        let mut batch = Vec::with_capacity(CONNECTION_WRITE_BATCH_MAX_COUNT);
        let mut closing = false;
        loop {
            let count = if closing {
                frames.recv_many(&mut batch, CONNECTION_WRITE_BATCH_MAX_COUNT).await
            } else {
                tokio::select! {
                    biased;
                    _ = self.inner.closed.cancelled() => {
                        // Refuse new frames but still send the ones already queued.
                        frames.close();
                        closing = true;
                        continue;
                    }
                    count = frames.recv_many(&mut batch, CONNECTION_WRITE_BATCH_MAX_COUNT) => count,
                }
            };
            if count == 0 {
                break;
            }
            if coalesce && count < CONNECTION_WRITE_BATCH_MAX_COUNT {
                // Frames finished together (a group commit acknowledges many sends at once) are
                // queued by their tasks one by one: one pass of the scheduler lets them line up
                // behind this one and leave in the same write. Measured on a 1-node send bench:
                // 0.58 → 0.025 `sendto`s per message, +25-50 % msg/s.
                tokio::task::yield_now().await;
                while batch.len() < CONNECTION_WRITE_BATCH_MAX_COUNT {
                    match frames.try_recv() {
                        Ok(frame) => batch.push(frame),
                        Err(_) => break,
                    }
                }
            }
            let mut written = 0;
            for frame in batch.drain(..) {
                out.write_all(&frame).await?;
                written += frame.len();
            }
            out.flush().await?;
            self.inner.queued_bytes.fetch_sub(written, Ordering::Relaxed);
            self.touch();
            self.inner.drained.notify_waiters();
        }
        out.shutdown().await
    }
}
