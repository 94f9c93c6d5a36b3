//! [`Console`]: the running console — its HTTP listener (static page and JSON API behind the gate,
//! bodies bounded) and its sampler task. Started by `raftmq console` and `raftmq dev`.
//!
//! The listener is the brokers' admin listener (`AdminServer::bind_router`): the same bounds on
//! connections (in all and per host), header read time and connection lifetime.
//!
//! Invariants: every call is answered within [`CONSOLE_REQUEST_TIMEOUT_MS`] (504 past it);
//! [`Console::shutdown`] stops accepting, lets running calls finish and returns within the admin
//! listener's shutdown bound.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::extract::DefaultBodyLimit;
use axum::extract::Request;
use axum::http::StatusCode;
use axum::middleware::Next;
use axum::response::IntoResponse;
use axum::response::Response;
use raftmq_broker::http::server::AdminServer;
use raftmq_client::Admin;
use raftmq_client::SessionCredentials;
use raftmq_common::limits::CONSOLE_BODY_MAX_BYTES;
use raftmq_common::limits::CONSOLE_REQUEST_TIMEOUT_MS;
use raftmq_common::limits::CONSOLE_UPSTREAM_TIMEOUT_MS;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;
use tracing::info;

use crate::config::ConfigError;
use crate::config::ConsoleConfig;
use crate::history::History;
use crate::session::Sessions;
use crate::state::ConsoleState;
use crate::topology::Discovery;
use crate::upstream::BrokerHttp;

/// Why the console did not start.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    /// A refused configuration.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// The NameServer list or the ACL account is malformed.
    #[error("{0}")]
    Client(String),
    /// The listener could not bind.
    #[error("binding {addr}: {source}")]
    Bind {
        /// Where.
        addr: SocketAddr,
        /// Why.
        source: std::io::Error,
    },
}

/// The running console.
#[derive(Debug)]
pub struct Console {
    addr: SocketAddr,
    stop: CancellationToken,
    server: AdminServer,
    sampler: JoinHandle<()>,
    state: Arc<ConsoleState>,
}

impl Console {
    /// Checks `config`, binds, and serves until [`Console::shutdown`].
    pub async fn start(config: ConsoleConfig) -> Result<Console, StartError> {
        config.validate()?;
        let credentials = match &config.credentials {
            Some((ak, sk)) => {
                Some(SessionCredentials::new(ak.clone(), sk.clone()).map_err(|e| StartError::Client(e.to_string()))?)
            }
            None => None,
        };
        let timeout = Duration::from_millis(CONSOLE_UPSTREAM_TIMEOUT_MS);
        let admin = Admin::with_credentials(&config.namesrv_addr, credentials.clone())
            .map_err(|e| StartError::Client(e.to_string()))?
            .with_timeout(timeout)
            .with_cluster_key(config.cluster_key.clone());
        let namesrv_admins = config
            .namesrv_addr
            .split(';')
            .map(str::trim)
            .filter(|a| !a.is_empty())
            .map(|a| {
                Admin::with_credentials(a, credentials.clone())
                    .map(|admin| (a.to_owned(), admin.with_timeout(timeout)))
                    .map_err(|e| StartError::Client(e.to_string()))
            })
            .collect::<Result<Vec<_>, _>>()?;
        let listen = config.listen;
        let state = Arc::new(ConsoleState {
            http: BrokerHttp::new(config.token.clone()),
            config,
            admin,
            namesrv_admins,
            discovery: Discovery::new(),
            sessions: Sessions::new(),
            history: History::new(),
            resend_producer: tokio::sync::OnceCell::new(),
        });
        let app = crate::api::routes()
            .merge(crate::assets::routes())
            .fallback(|| async { crate::api::error::ApiError::not_found("no such page") })
            .layer(DefaultBodyLimit::max(CONSOLE_BODY_MAX_BYTES))
            .layer(axum::middleware::from_fn(bounded))
            .layer(axum::middleware::from_fn_with_state(Arc::clone(&state), crate::gate::gate))
            .with_state(Arc::clone(&state));
        let server = AdminServer::bind_router(app, listen, None)
            .await
            .map_err(|source| StartError::Bind { addr: listen, source })?;
        let addr = server.local_addr();
        let stop = CancellationToken::new();
        let sampler = tokio::spawn(crate::sampler::run(Arc::clone(&state), stop.clone()));
        info!(%addr, "web console listening");
        Ok(Console { addr, stop, server, sampler, state })
    }

    /// The bound address.
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    /// Stops serving and sampling; closes upstream connections.
    pub async fn shutdown(self) {
        self.stop.cancel();
        self.server.shutdown().await;
        let _ = self.sampler.await;
        if let Some(p) = self.state.resend_producer.get() {
            p.shutdown().await;
        }
        self.state.admin.shutdown().await;
        for (_, admin) in &self.state.namesrv_admins {
            admin.shutdown().await;
        }
    }
}

/// Answers 504 when a console call runs past [`CONSOLE_REQUEST_TIMEOUT_MS`] (a relayed change may
/// still be applied; the cluster page shows the outcome).
async fn bounded(request: Request, next: Next) -> Response {
    let deadline = Duration::from_millis(CONSOLE_REQUEST_TIMEOUT_MS);
    match tokio::time::timeout(deadline, next.run(request)).await {
        Ok(response) => response,
        Err(_) => crate::api::error::ApiError::new(
            StatusCode::GATEWAY_TIMEOUT,
            format!("no answer within {CONSOLE_REQUEST_TIMEOUT_MS} ms; a change may still be applied"),
        )
        .into_response(),
    }
}
