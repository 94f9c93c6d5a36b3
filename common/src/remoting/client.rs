//! [`RemotingClient`] (`NettyRemotingClient`): calls remote addresses over one lazily opened
//! connection per address.
//!
//! Invariants:
//! - At most one live connection per address: concurrent first calls wait on the address's connect
//!   lock and share the connection the first one opens.
//! - A closed connection is never reused: the next call to that address connects again.
//! - Every call is bounded by its timeout, connect included ([`CONNECT_TIMEOUT_MS`] at most).
//! - A call that times out with nothing read from the peer since it began closes its connection
//!   ([`CloseReason::Unresponsive`]): a dead path is dialled afresh, never waited on.
//! - Requests the server sends on a connection (NOTIFY_CONSUMER_IDS_CHANGED, CHECK_TRANSACTION_STATE,
//!   ...) go to the client's processor, or are answered REQUEST_CODE_NOT_SUPPORTED without one.
//! - Opaques come from one counter per client, so they are unique across its connections in logs.
//! - A client with TLS ([`RemotingClient::with_tls`]) opens every connection with a handshake,
//!   within the call's deadline and [`TLS_HANDSHAKE_TIMEOUT_MS`]; it never falls back to plaintext.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::Mutex;
use std::sync::MutexGuard;
use std::sync::atomic::AtomicBool;
use std::sync::atomic::AtomicI32;
use std::sync::atomic::Ordering;
use std::time::Duration;

use tokio::net::TcpStream;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use super::close_reason::CloseReason;
use super::connection::Connection;
use super::connection::deadline_after;
use super::connection_tasks::ConnectionSetup;
use super::error::RemotingError;
use super::processor::ProcessorTable;
use super::processor::RequestProcessor;
use super::stream::RemotingStream;
use super::tls_client::ClientTls;
use crate::limits::CONNECT_TIMEOUT_MS;
use crate::limits::CONNECTION_CLOSE_FLUSH_MAX_MS;
use crate::limits::TLS_HANDSHAKE_TIMEOUT_MS;
use crate::protocol::RemotingCommand;
use crate::protocol::acl::SessionCredentials;

/// A remoting client; clones share connections.
#[derive(Clone)]
pub struct RemotingClient {
    inner: Arc<ClientInner>,
}

struct ClientInner {
    connections: Mutex<HashMap<String, Connection>>,
    /// One lock per address so a slow connect does not hold up calls to other addresses.
    connect_locks: Mutex<HashMap<String, Arc<tokio::sync::Mutex<()>>>>,
    setup: ConnectionSetup,
    /// Set once by `close` (or drop); checked on every call, so an atomic rather than a token
    /// (whose check takes a lock).
    closed: AtomicBool,
    tls: Option<ClientTls>,
}

impl std::fmt::Debug for RemotingClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let addrs: Vec<String> = lock(&self.inner.connections).keys().cloned().collect();
        f.debug_struct("RemotingClient").field("connections", &addrs).finish()
    }
}

impl Default for RemotingClient {
    fn default() -> Self {
        Self::new()
    }
}

impl RemotingClient {
    /// A client that answers server requests REQUEST_CODE_NOT_SUPPORTED.
    pub fn new() -> Self {
        Self::with_processors(ProcessorTable::new())
    }

    /// A client whose `processor` handles every request a server sends on its connections.
    pub fn with_processor<P: RequestProcessor>(processor: Arc<P>) -> Self {
        let mut table = ProcessorTable::new();
        table.register_default(processor);
        Self::with_processors(table)
    }

    /// A client that dispatches server requests through `processors`.
    pub fn with_processors(processors: ProcessorTable) -> Self {
        Self::with_options(processors, false)
    }

    /// [`Self::with_processors`], choosing whether requests sent at the same moment leave in one
    /// write (see `ConnectionSetup::coalesce_writes`): for many concurrent callers, like a
    /// producer's senders.
    pub fn with_options(processors: ProcessorTable, coalesce_writes: bool) -> Self {
        Self::with_credentials(processors, coalesce_writes, None)
    }

    /// [`Self::with_options`] whose every request is signed with `credentials` (plain ACL,
    /// `AclClientRPCHook`), NameServer calls included, as Java's client signs them.
    pub fn with_credentials(
        processors: ProcessorTable,
        coalesce_writes: bool,
        credentials: Option<Arc<SessionCredentials>>,
    ) -> Self {
        Self::with_tls(processors, coalesce_writes, credentials, None)
    }

    /// [`Self::with_credentials`] whose connections are TLS when `tls` is set (`useTLS`).
    pub fn with_tls(
        processors: ProcessorTable,
        coalesce_writes: bool,
        credentials: Option<Arc<SessionCredentials>>,
        tls: Option<ClientTls>,
    ) -> Self {
        let tasks = TaskTracker::new();
        let setup = ConnectionSetup {
            processors: Arc::new(processors),
            opaque: Arc::new(AtomicI32::new(0)),
            io_tasks: tasks.clone(),
            request_tasks: tasks,
            // A client never refuses server requests; only closing the connection stops them.
            refuse_requests: CancellationToken::new(),
            refusal_remark: Arc::default(),
            on_closed: None,
            coalesce_writes,
            credentials,
            limits: None,
        };
        Self {
            inner: Arc::new(ClientInner {
                connections: Mutex::default(),
                connect_locks: Mutex::default(),
                setup,
                closed: AtomicBool::new(false),
                tls,
            }),
        }
    }

    /// Sends `request` to `addr` ("host:port") and waits for the response, at most `timeout` in all.
    pub async fn invoke(
        &self,
        addr: &str,
        request: RemotingCommand,
        timeout: Duration,
    ) -> Result<RemotingCommand, RemotingError> {
        self.invoke_until(addr, request, deadline_after(timeout), timeout).await
    }

    /// [`Self::invoke`] by an absolute `deadline`, for a caller that has read the clock already;
    /// `timeout` is only named in errors.
    pub async fn invoke_until(
        &self,
        addr: &str,
        request: RemotingCommand,
        deadline: Instant,
        timeout: Duration,
    ) -> Result<RemotingCommand, RemotingError> {
        let connection = self.connect_until(addr, deadline).await?;
        let result = connection.invoke_until(request, deadline, timeout).await;
        if let Err(RemotingError::Timeout { timeout_ms, .. }) = &result {
            // When the call began: its deadline less its timeout (no clock read on the answered path).
            let began = deadline.checked_sub(timeout).unwrap_or(deadline);
            if !connection.heard_since(began) {
                // RocketMQ's client closes a channel whose sync call timed out
                // (`clientCloseSocketIfTimeout`); this one only when the peer sent nothing at all
                // meanwhile. Otherwise a connection whose packets a partition dropped can stay
                // stalled in TCP's retransmission backoff long after the network healed, and every
                // call would queue behind it.
                tracing::warn!(
                    addr,
                    timeout_ms,
                    connection_id = connection.id(),
                    "closing a connection that sent nothing within a call's timeout; the next call connects again"
                );
                connection.close_with(CloseReason::Unresponsive(*timeout_ms));
            }
        }
        result
    }

    /// Sends a oneway `request` to `addr`; returns once it is queued for writing, at most `timeout`.
    pub async fn invoke_oneway(
        &self,
        addr: &str,
        request: RemotingCommand,
        timeout: Duration,
    ) -> Result<(), RemotingError> {
        let deadline = deadline_after(timeout);
        let connection = self.connect_until(addr, deadline).await?;
        let remaining = deadline.saturating_duration_since(Instant::now());
        connection.invoke_oneway(request, remaining).await
    }

    /// The live connection to `addr`, opening one if needed (within [`CONNECT_TIMEOUT_MS`]).
    pub async fn connection(&self, addr: &str) -> Result<Connection, RemotingError> {
        self.connect_until(addr, Instant::now() + Duration::from_millis(CONNECT_TIMEOUT_MS)).await
    }

    /// The live connection to `addr` if there is one; never connects.
    pub fn cached_connection(&self, addr: &str) -> Option<Connection> {
        lock(&self.inner.connections).get(addr).filter(|c| !c.is_closed()).cloned()
    }

    /// Whether connections are TLS.
    pub fn uses_tls(&self) -> bool {
        self.inner.tls.is_some()
    }

    /// Closes every connection and refuses further calls. Frames already queued are flushed
    /// (bounded by [`CONNECTION_CLOSE_FLUSH_MAX_MS`]) before this returns.
    pub async fn close(&self) {
        self.inner.closed.store(true, Ordering::SeqCst);
        self.inner.close_connections();
        self.inner.setup.io_tasks.close();
        let flush = Duration::from_millis(CONNECTION_CLOSE_FLUSH_MAX_MS * 2);
        if tokio::time::timeout(flush, self.inner.setup.io_tasks.wait()).await.is_err() {
            tracing::warn!("remoting client tasks still running after close");
        }
    }

    async fn connect_until(&self, addr: &str, deadline: Instant) -> Result<Connection, RemotingError> {
        if self.inner.closed.load(Ordering::SeqCst) {
            return Err(RemotingError::ClientClosed);
        }
        if let Some(connection) = self.cached_connection(addr) {
            return Ok(connection);
        }
        let connect_lock = lock(&self.inner.connect_locks).entry(addr.to_string()).or_default().clone();
        let timed_out = || RemotingError::Connect {
            addr: addr.to_string(),
            source: std::io::Error::new(std::io::ErrorKind::TimedOut, "connect deadline passed"),
        };
        let _connecting = tokio::time::timeout_at(deadline, connect_lock.lock()).await.map_err(|_| timed_out())?;
        // Another call may have connected while this one waited for the lock.
        if let Some(connection) = self.cached_connection(addr) {
            return Ok(connection);
        }
        let connect_deadline = deadline.min(Instant::now() + Duration::from_millis(CONNECT_TIMEOUT_MS));
        let stream = match tokio::time::timeout_at(connect_deadline, TcpStream::connect(addr)).await {
            Ok(Ok(stream)) => stream,
            Ok(Err(source)) => return Err(RemotingError::Connect { addr: addr.to_string(), source }),
            Err(_) => return Err(timed_out()),
        };
        let stream = match &self.inner.tls {
            None => RemotingStream::Plain(stream),
            Some(tls) => {
                let handshake_deadline = deadline.min(Instant::now() + Duration::from_millis(TLS_HANDSHAKE_TIMEOUT_MS));
                match tokio::time::timeout_at(handshake_deadline, tls.connect(addr, stream)).await {
                    Ok(Ok(stream)) => stream,
                    Ok(Err(source)) => return Err(RemotingError::Connect { addr: addr.to_string(), source }),
                    Err(_) => return Err(timed_out()),
                }
            }
        };
        let connection = Connection::spawn(stream, self.inner.setup.clone())
            .map_err(|source| RemotingError::Connect { addr: addr.to_string(), source })?;
        tracing::debug!(addr, connection_id = connection.id(), "connected");
        lock(&self.inner.connections).insert(addr.to_string(), connection.clone());
        // close() may have run while this call connected; it must not leave a connection behind.
        if self.inner.closed.load(Ordering::SeqCst) {
            connection.close();
            return Err(RemotingError::ClientClosed);
        }
        Ok(connection)
    }
}

impl ClientInner {
    fn close_connections(&self) {
        let connections: Vec<Connection> = lock(&self.connections).drain().map(|(_, c)| c).collect();
        for connection in connections {
            connection.close();
        }
    }
}

impl Drop for ClientInner {
    fn drop(&mut self) {
        self.closed.store(true, Ordering::SeqCst);
        self.close_connections();
    }
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    // Every critical section here is a single map operation; a poisoned map is still consistent.
    mutex.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}
