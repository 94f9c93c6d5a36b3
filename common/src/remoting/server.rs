//! [`RemotingServer`] (`NettyRemotingServer`): accepts TCP connections and dispatches their requests
//! to a [`ProcessorTable`].
//!
//! ```text
//!   TcpListener ──accept──► Connection (reader + writer tasks) ──request──► processor task
//!                                 │ close ──► connection table removal ──► on_connection_closed hook
//! ```
//!
//! Invariants:
//! - A bad frame closes only the connection it arrived on; the listener and other connections
//!   carry on.
//! - [`RemotingServer::shutdown`] runs in order: stop accepting (the port is released), refuse new
//!   requests (SERVICE_NOT_AVAILABLE, which 4.x producers retry elsewhere; its remark is the owner's
//!   when set, e.g. a leader hint), wait for in-flight
//!   requests up to [`SHUTDOWN_DRAIN_MAX_MS`], close every connection (queued responses are still
//!   flushed), wait for the connection tasks. It is idempotent.
//! - Dropping the server without `shutdown` stops accepting and closes connections at once.
//! - Every connection holds an admission slot while it is listed: at most
//!   `connections_max_count` in all and `connections_per_host_max_count` from one address
//!   ([`ServerLimits`]); one more is closed at accept, before any of its bytes is read. Queued
//!   response bytes and idle time are bounded per connection (`connection_tasks`).
//! - With TLS ([`ServerOptions::tls`]) a connection is listed once its first byte decided what it
//!   is and its handshake finished (`tls_server`); it holds its admission slot from accept on, and
//!   the wait is bounded (first byte: the idle limit; handshake: `TLS_HANDSHAKE_TIMEOUT_MS`).

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::Mutex;
use std::sync::MutexGuard;
use std::sync::OnceLock;
use std::sync::atomic::AtomicI32;
use std::time::Duration;

use tokio::net::TcpListener;
use tokio::net::TcpSocket;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use super::admission::Admission;
use super::admission::AdmissionSlot;
use super::close_reason::CloseReason;
use super::close_reason::ConnectionClosed;
use super::close_reason::ConnectionClosedHook;
use super::connection::Connection;
use super::connection_tasks::ConnectionSetup;
use super::processor::ProcessorTable;
use super::server_limits::ServerLimits;
use super::stream::RemotingStream;
use super::tls_server::ServerTls;
use super::tls_server::TlsRefusal;
use crate::limits::CONNECTION_CLOSE_FLUSH_MAX_MS;
use crate::limits::SERVER_ACCEPT_BACKLOG_COUNT;
use crate::limits::SERVER_ACCEPT_ERROR_BACKOFF_MS;
use crate::limits::SHUTDOWN_DRAIN_MAX_MS;

/// Options of a [`RemotingServer`] beyond its processors.
#[derive(Clone, Default)]
pub struct ServerOptions {
    on_connection_closed: Option<ConnectionClosedHook>,
    coalesce_writes: bool,
    limits: ServerLimits,
    tls: Option<ServerTls>,
}

impl std::fmt::Debug for ServerOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServerOptions")
            .field("on_connection_closed", &self.on_connection_closed.is_some())
            .field("coalesce_writes", &self.coalesce_writes)
            .field("limits", &self.limits)
            .field("tls", &self.tls.as_ref().map(ServerTls::mode))
            .finish()
    }
}

impl ServerOptions {
    /// Calls `hook` once for every connection that closes, whatever the reason (the NameServer
    /// drops a broker's routes at once; the broker expires client channels). It runs on a
    /// connection task and must not block.
    pub fn on_connection_closed(mut self, hook: impl Fn(&ConnectionClosed) + Send + Sync + 'static) -> Self {
        self.on_connection_closed = Some(Arc::new(hook));
        self
    }

    /// Responses finished together leave in one write (see `ConnectionSetup::coalesce_writes`):
    /// for servers of many concurrent requests, like the broker's client port. Default off.
    pub fn coalesce_writes(mut self, on: bool) -> Self {
        self.coalesce_writes = on;
        self
    }

    /// Connection limits other than the defaults (tests of the limits themselves).
    pub fn limits(mut self, limits: ServerLimits) -> Self {
        self.limits = limits;
        self
    }

    /// Serves TLS as `tls.server.mode` says (`None`: plaintext only, the default).
    pub fn tls(mut self, tls: Option<ServerTls>) -> Self {
        self.tls = tls;
        self
    }
}

/// Open connections, each with its admission slot (freed when the entry goes).
type ConnectionTable = Arc<Mutex<HashMap<u64, (Connection, AdmissionSlot)>>>;

/// A listening remoting server.
pub struct RemotingServer {
    local_addr: SocketAddr,
    connections: ConnectionTable,
    stop_accepting: CancellationToken,
    refuse_requests: CancellationToken,
    refusal_remark: Arc<OnceLock<String>>,
    accept_task: Mutex<Option<JoinHandle<()>>>,
    io_tasks: TaskTracker,
    request_tasks: TaskTracker,
}

impl std::fmt::Debug for RemotingServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RemotingServer")
            .field("local_addr", &self.local_addr)
            .field("connections", &self.connection_count())
            .finish()
    }
}

impl RemotingServer {
    /// Binds `addr` (port 0 picks a free port) and starts accepting.
    pub async fn bind(addr: SocketAddr, processors: ProcessorTable) -> std::io::Result<Self> {
        Self::bind_with(addr, processors, ServerOptions::default()).await
    }

    /// [`Self::bind`] with options.
    pub async fn bind_with(
        addr: SocketAddr,
        processors: ProcessorTable,
        options: ServerOptions,
    ) -> std::io::Result<Self> {
        let socket = if addr.is_ipv4() { TcpSocket::new_v4()? } else { TcpSocket::new_v6()? };
        // A restarted server must get its port back while old connections sit in TIME_WAIT.
        socket.set_reuseaddr(true)?;
        socket.bind(addr)?;
        let listener = socket.listen(SERVER_ACCEPT_BACKLOG_COUNT)?;
        let local_addr = listener.local_addr()?;

        let connections: ConnectionTable = Arc::default();
        let table = connections.clone();
        let coalesce_writes = options.coalesce_writes;
        let user_hook = options.on_connection_closed;
        let on_closed: ConnectionClosedHook = Arc::new(move |event: &ConnectionClosed| {
            lock(&table).remove(&event.connection_id);
            if let Some(hook) = &user_hook {
                hook(event);
            }
        });
        let server = RemotingServer {
            local_addr,
            connections: connections.clone(),
            stop_accepting: CancellationToken::new(),
            refuse_requests: CancellationToken::new(),
            refusal_remark: Arc::default(),
            accept_task: Mutex::new(None),
            io_tasks: TaskTracker::new(),
            request_tasks: TaskTracker::new(),
        };
        let setup = ConnectionSetup {
            processors: Arc::new(processors),
            opaque: Arc::new(AtomicI32::new(0)),
            io_tasks: server.io_tasks.clone(),
            request_tasks: server.request_tasks.clone(),
            refuse_requests: server.refuse_requests.clone(),
            refusal_remark: server.refusal_remark.clone(),
            on_closed: Some(on_closed),
            coalesce_writes,
            credentials: None,
            limits: Some(options.limits),
        };
        let admission =
            Admission::new(options.limits.connections_max_count, options.limits.connections_per_host_max_count);
        let accept = accept_loop(listener, setup, connections, admission, options.tls, server.stop_accepting.clone());
        *lock(&server.accept_task) = Some(tokio::spawn(accept));
        tracing::info!(%local_addr, "remoting server listening");
        Ok(server)
    }

    /// The address actually bound.
    pub fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }

    /// Open connections.
    pub fn connection_count(&self) -> usize {
        lock(&self.connections).len()
    }

    /// Handles to the open connections.
    pub fn connections(&self) -> Vec<Connection> {
        lock(&self.connections).values().map(|(c, _)| c.clone()).collect()
    }

    /// The remark of the SERVICE_NOT_AVAILABLE answers to requests that arrive during
    /// [`Self::shutdown`] (default [`crate::remoting::SHUTTING_DOWN_REMARK`]): a broker that handed its leadership
    /// over names the new leader there, so clients that read the hint go straight to it. The first
    /// call wins.
    pub fn set_refusal_remark(&self, remark: String) {
        if self.refusal_remark.set(remark).is_err() {
            tracing::debug!(local_addr = %self.local_addr, "refusal remark already set");
        }
    }

    /// Stops accepting, lets in-flight requests finish (at most [`SHUTDOWN_DRAIN_MAX_MS`]), then
    /// closes every connection.
    pub async fn shutdown(&self) {
        self.stop_accepting.cancel();
        self.refuse_requests.cancel();
        let accept_task = lock(&self.accept_task).take();
        if let Some(task) = accept_task {
            // The listener is dropped when the loop ends; a panic there has been logged by tokio.
            drop(task.await);
        }
        self.request_tasks.close();
        let drain = Duration::from_millis(SHUTDOWN_DRAIN_MAX_MS);
        if tokio::time::timeout(drain, self.request_tasks.wait()).await.is_err() {
            tracing::warn!(local_addr = %self.local_addr, in_flight = self.request_tasks.len(),
                "shutdown drain deadline passed; closing connections with requests in flight");
        }
        for connection in self.connections() {
            connection.close_with(CloseReason::Shutdown);
        }
        self.io_tasks.close();
        // Writers give up on their own after CONNECTION_CLOSE_FLUSH_MAX_MS; the margin covers scheduling.
        let flush = Duration::from_millis(CONNECTION_CLOSE_FLUSH_MAX_MS * 2);
        if tokio::time::timeout(flush, self.io_tasks.wait()).await.is_err() {
            tracing::warn!(local_addr = %self.local_addr, "connection tasks still running after shutdown");
        }
        tracing::info!(local_addr = %self.local_addr, "remoting server stopped");
    }
}

impl Drop for RemotingServer {
    fn drop(&mut self) {
        self.stop_accepting.cancel();
        self.refuse_requests.cancel();
        for connection in self.connections() {
            connection.close_with(CloseReason::Shutdown);
        }
    }
}

async fn accept_loop(
    listener: TcpListener,
    setup: ConnectionSetup,
    connections: ConnectionTable,
    admission: Admission,
    tls: Option<ServerTls>,
    stop: CancellationToken,
) {
    loop {
        let accepted = tokio::select! {
            biased;
            _ = stop.cancelled() => return,
            accepted = listener.accept() => accepted,
        };
        match accepted {
            Ok((stream, peer)) => {
                let slot = match admission.admit(peer.ip()) {
                    Ok(slot) => slot,
                    Err(refused) => {
                        // Closed before a byte is read: the peer sees its connection closed at once.
                        tracing::debug!(%peer, %refused, "connection closed at accept");
                        drop(stream);
                        continue;
                    }
                };
                match &tls {
                    None => accepted_connection(stream.into(), peer, slot, &setup, &connections),
                    Some(tls) => {
                        // The first byte and the handshake are awaited off the accept loop.
                        let (tls, setup, connections, stop) =
                            (tls.clone(), setup.clone(), connections.clone(), stop.clone());
                        setup.io_tasks.clone().spawn(async move {
                            let first_byte_wait = setup.limits.map_or(Duration::MAX, |l| l.idle_max);
                            let decided = tokio::select! {
                                _ = stop.cancelled() => return,
                                decided = tls.accept(stream, first_byte_wait) => decided,
                            };
                            match decided {
                                Ok(stream) => accepted_connection(stream, peer, slot, &setup, &connections),
                                Err(refusal @ TlsRefusal::Silent(_)) => {
                                    tracing::debug!(%peer, %refusal, "connection closed before it was served");
                                }
                                Err(refusal) => {
                                    tracing::info!(%peer, %refusal, "connection closed before it was served")
                                }
                            }
                        });
                    }
                }
            }
            Err(e) => {
                tracing::warn!(error = %e, "accept failed");
                tokio::select! {
                    _ = stop.cancelled() => return,
                    _ = tokio::time::sleep(Duration::from_millis(SERVER_ACCEPT_ERROR_BACKOFF_MS)) => {}
                }
            }
        }
    }
}

fn accepted_connection(
    stream: RemotingStream,
    peer: SocketAddr,
    slot: AdmissionSlot,
    setup: &ConnectionSetup,
    connections: &ConnectionTable,
) {
    let is_tls = stream.is_tls();
    match Connection::spawn(stream, setup.clone()) {
        Ok(connection) => {
            tracing::debug!(%peer, connection_id = connection.id(), tls = is_tls, "connection accepted");
            lock(connections).insert(connection.id(), (connection.clone(), slot));
            // It may have closed before it was listed; the hook then found nothing to remove.
            if connection.is_closed() {
                lock(connections).remove(&connection.id());
            }
        }
        Err(e) => tracing::warn!(%peer, error = %e, "cannot set up an accepted connection"),
    }
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    // Every critical section here is a single map operation; a poisoned table is still consistent.
    mutex.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}
