//! [`AdminServer`]: the admin HTTP listener, serving [`crate::http::router`] over HTTP/1.1 with
//! bounded connections.
//!
//! ```text
//!   TcpListener ─accept─▶ over a limit? close ─▶ hyper http1 (header read timeout) ─▶ router
//!                          (total, per host)        └─ lifetime cap: graceful close, then drop
//! ```
//!
//! Invariants:
//! - At most [`ADMIN_HTTP_CONNECTIONS_MAX_COUNT`] connections, [`ADMIN_HTTP_CONNECTIONS_PER_HOST_MAX_COUNT`]
//!   from one address; a connection beyond either is closed at once, so a slow-loris client holds
//!   a bounded share and probes from elsewhere are still answered.
//! - A request head (and an idle keep-alive wait) takes at most [`ADMIN_HTTP_HEADER_READ_TIMEOUT_MS`];
//!   a handler, its body read included, at most the request deadline (`router`); a connection lives
//!   at most [`ADMIN_HTTP_CONNECTION_MAX_MS`], then finishes its call and closes (or is dropped when
//!   its peer does not read the answer).
//! - With HTTPS (`adminHttpsEnable`) every connection is TLS: the handshake runs inside the
//!   connection's task, holding its admission slot, within `TLS_HANDSHAKE_TIMEOUT_MS`; the
//!   certificate is re-read when its files change (`CertReloader`).
//! - [`AdminServer::shutdown`] stops accepting, lets running calls finish, then returns within
//!   [`ADMIN_HTTP_SHUTDOWN_MAX_MS`].

use std::net::SocketAddr;
use std::time::Duration;

use axum::Router;
use hyper_util::rt::TokioIo;
use hyper_util::rt::TokioTimer;
use hyper_util::service::TowerToHyperService;
use raftmq_common::limits::ADMIN_HTTP_CONNECTION_MAX_MS;
use raftmq_common::limits::ADMIN_HTTP_CONNECTIONS_MAX_COUNT;
use raftmq_common::limits::ADMIN_HTTP_CONNECTIONS_PER_HOST_MAX_COUNT;
use raftmq_common::limits::ADMIN_HTTP_HEADER_READ_TIMEOUT_MS;
use raftmq_common::limits::ADMIN_HTTP_REQUEST_TIMEOUT_MS;
use raftmq_common::limits::ADMIN_HTTP_SHUTDOWN_MAX_MS;
use raftmq_common::remoting::ServerTls;
use raftmq_common::remoting::admission::Admission;
use raftmq_common::remoting::admission::AdmissionSlot;
use tokio::net::TcpListener;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tracing::debug;
use tracing::info;
use tracing::warn;

use crate::http::Shared;
use crate::http::router;

/// The running admin HTTP server.
#[derive(Debug)]
pub struct AdminServer {
    addr: SocketAddr,
    cancel: CancellationToken,
    task: JoinHandle<()>,
}

impl AdminServer {
    /// Binds `addr` (port 0: an ephemeral port) and serves [`router`] over `ctx`.
    pub async fn bind(ctx: Shared, addr: SocketAddr) -> std::io::Result<AdminServer> {
        Self::bind_router(router(ctx), addr, None).await
    }

    /// [`Self::bind`], over HTTPS when `tls` is set.
    pub async fn bind_with_tls(ctx: Shared, addr: SocketAddr, tls: Option<ServerTls>) -> std::io::Result<AdminServer> {
        Self::bind_router(router(ctx), addr, tls).await
    }

    /// Binds `addr` and serves `app` under this listener's bounds (connections, header read
    /// timeout, lifetime, shutdown), over HTTPS when `tls` is set: the web console (`console/`)
    /// serves its page through it too.
    pub async fn bind_router(app: Router, addr: SocketAddr, tls: Option<ServerTls>) -> std::io::Result<AdminServer> {
        let listener = TcpListener::bind(addr).await?;
        let addr = listener.local_addr()?;
        let cancel = CancellationToken::new();
        let https = tls.is_some();
        let task = tokio::spawn(accept_loop(listener, app, tls, cancel.clone()));
        info!(%addr, https, "admin HTTP server listening");
        Ok(AdminServer { addr, cancel, task })
    }

    /// The bound address.
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    /// Stops accepting, lets running calls finish (each is bounded by its deadline), then returns.
    pub async fn shutdown(self) {
        self.cancel.cancel();
        let wait = Duration::from_millis(ADMIN_HTTP_SHUTDOWN_MAX_MS);
        let abort = self.task.abort_handle();
        if tokio::time::timeout(wait, self.task).await.is_err() {
            warn!("admin HTTP connections did not close in time");
            abort.abort();
        }
    }
}

async fn accept_loop(listener: TcpListener, app: Router, tls: Option<ServerTls>, stop: CancellationToken) {
    let admission = Admission::new(ADMIN_HTTP_CONNECTIONS_MAX_COUNT, ADMIN_HTTP_CONNECTIONS_PER_HOST_MAX_COUNT);
    let connections = TaskTracker::new();
    loop {
        let accepted = tokio::select! {
            biased;
            _ = stop.cancelled() => break,
            accepted = listener.accept() => accepted,
        };
        let (stream, peer) = match accepted {
            Ok(accepted) => accepted,
            Err(e) => {
                // Out of file descriptors, typically: pause instead of spinning.
                warn!(error = %e, "admin HTTP accept failed");
                tokio::select! {
                    _ = stop.cancelled() => break,
                    _ = tokio::time::sleep(Duration::from_millis(100)) => continue,
                }
            }
        };
        let slot = match admission.admit(peer.ip()) {
            Ok(slot) => slot,
            Err(refused) => {
                debug!(%peer, %refused, "admin HTTP connection closed at accept");
                drop(stream);
                continue;
            }
        };
        let (app, stop) = (app.clone(), stop.clone());
        match tls.clone() {
            None => connections.spawn(serve_connection(stream, app, slot, stop)),
            Some(tls) => connections.spawn(async move {
                let handshake = tokio::select! {
                    _ = stop.cancelled() => return,
                    handshake = tls.handshake(stream) => handshake,
                };
                match handshake {
                    Ok(stream) => serve_connection(stream, app, slot, stop).await,
                    Err(e) => debug!(%peer, error = %e, "admin HTTPS connection closed"),
                }
            }),
        };
    }
    drop(listener);
    connections.close();
    connections.wait().await;
}

async fn serve_connection<S>(stream: S, app: Router, slot: AdmissionSlot, stop: CancellationToken)
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    let _slot = slot;
    let service = TowerToHyperService::new(app);
    let mut builder = hyper::server::conn::http1::Builder::new();
    builder.timer(TokioTimer::new()).header_read_timeout(Duration::from_millis(ADMIN_HTTP_HEADER_READ_TIMEOUT_MS));
    let conn = builder.serve_connection(TokioIo::new(stream), service);
    tokio::pin!(conn);
    let lifetime = tokio::time::sleep(Duration::from_millis(ADMIN_HTTP_CONNECTION_MAX_MS));
    tokio::pin!(lifetime);
    tokio::select! {
        result = conn.as_mut() => {
            if let Err(e) = result {
                debug!(error = %e, "admin HTTP connection ended");
            }
            return;
        }
        _ = stop.cancelled() => {}
        _ = &mut lifetime => {}
    }
    // Finish the call in progress, then close; a peer that does not read its answer is dropped.
    conn.as_mut().graceful_shutdown();
    let grace = Duration::from_millis(ADMIN_HTTP_REQUEST_TIMEOUT_MS);
    if let Ok(Err(e)) = tokio::time::timeout(grace, conn).await {
        debug!(error = %e, "admin HTTP connection ended");
    }
}
