//! The broker's admin HTTP server (axum, JSON) on `adminPort`: health probes, Prometheus metrics and
//! the admin API of this replica. Started by `Broker::start`, stopped by `Broker::shutdown`.
//!
//! ```text
//! GET  /livez /readyz /metrics /api/openapi.json      probes.rs
//! GET  /api/v1/status                                 status.rs   (Raft view of this replica)
//! GET, PATCH /api/v1/config                           config.rs   (this replica's config, runtime keys)
//! *    /api/v1/topics[/{topic}]                       topics.rs   ┐ changes go through the same
//! *    /api/v1/groups[/{group}[/progress]]            groups.rs   ┘ replicated commands as remoting
//! GET  /api/v1/messages/{msgId|by-key|by-time}        messages.rs (processors/query.rs)
//! GET  /api/v1/messages/{msgId}/trace                 messages.rs (message trace records)
//! POST /api/v1/ops/{transfer-leader,reset-offset}     ops.rs
//! POST /api/v1/ops/nodes, DELETE /api/v1/ops/nodes/{id}  membership.rs (add / remove a node)
//!
//! request ─▶ deadline (ADMIN_HTTP_REQUEST_TIMEOUT_MS) ─▶ token + draining gate (mutations; under
//!         aclEnable every /api/v1/ call)
//!         ─▶ body limit ─▶ handler ─▶ JSON | ApiError {code, message}
//! ```
//!
//! Invariants: GETs are open (under `aclEnable` the `/api/v1/` ones need the token too, and the API
//! is closed without an `adminToken`); POST/PUT/PATCH/DELETE need `Authorization: Bearer
//! <adminToken>` when the key is set, and are refused (503) once the broker drains. Only the leader changes replicated state; a
//! follower answers 421 NOT_LEADER naming the leader. Every call is bounded in time and body size,
//! and no input panics a handler (all parsing goes through [`error`]'s extractors).
//!
//! Port 0 binds an ephemeral port (tests); [`AdminServer::local_addr`] tells which.
//!
//! Adding routes: a module returns a [`Routes`] built with [`Routes::route`] and [`routes`] merges
//! it in one line; every path must also be in `openapi.json` (a unit test checks).

pub mod config;
pub mod error;
pub mod groups;
pub mod membership;
pub mod messages;
pub mod ops;
pub mod probes;
pub mod status;
pub mod topics;

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use axum::Router;
use axum::extract::DefaultBodyLimit;
use axum::extract::Request;
use axum::extract::State;
use axum::http::Method;
use axum::http::StatusCode;
use axum::http::header::AUTHORIZATION;
use axum::middleware::Next;
use axum::response::IntoResponse;
use axum::response::Response;
use axum::routing::MethodRouter;
use raftmq_common::limits::ADMIN_HTTP_BODY_MAX_BYTES;
use raftmq_common::limits::ADMIN_HTTP_REQUEST_TIMEOUT_MS;
use raftmq_common::limits::ADMIN_HTTP_SHUTDOWN_MAX_MS;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;
use tracing::info;
use tracing::warn;

use crate::context::BrokerContext;
use crate::http::error::ApiError;
use crate::http::error::ApiResult;
use crate::http::error::code;
use crate::state::entry::BrokerCommand;

/// The state every handler gets.
pub type Shared = Arc<BrokerContext>;

/// A set of routes and the paths they serve (so the OpenAPI document can be checked against them).
#[derive(Debug, Default)]
pub struct Routes {
    router: Router<Shared>,
    paths: Vec<&'static str>,
}

impl Routes {
    /// No routes.
    pub fn new() -> Self {
        Routes::default()
    }

    /// Adds `path` (axum syntax, `{param}`) served by `method_router`.
    pub fn route(mut self, path: &'static str, method_router: MethodRouter<Shared>) -> Self {
        self.router = self.router.route(path, method_router);
        self.paths.push(path);
        self
    }

    /// Adds every route of `other`.
    pub fn merge(mut self, other: Routes) -> Self {
        self.router = self.router.merge(other.router);
        self.paths.extend(other.paths);
        self
    }

    /// The paths served.
    pub fn paths(&self) -> &[&'static str] {
        &self.paths
    }
}

/// Every route of the admin server.
pub fn routes() -> Routes {
    Routes::new()
        .merge(probes::routes())
        .merge(status::routes())
        .merge(config::routes())
        .merge(topics::routes())
        .merge(groups::routes())
        .merge(messages::routes())
        .merge(ops::routes())
        .merge(membership::routes())
}

/// The complete router over `ctx`: routes, JSON fallbacks, token gate, body limit and deadline.
pub fn router(ctx: Shared) -> Router {
    routes()
        .router
        .fallback(|| async { ApiError::not_found(code::NOT_FOUND, "no such route") })
        .method_not_allowed_fallback(|| async {
            ApiError::new(StatusCode::METHOD_NOT_ALLOWED, code::METHOD_NOT_ALLOWED, "method not allowed on this route")
        })
        .layer(DefaultBodyLimit::max(ADMIN_HTTP_BODY_MAX_BYTES))
        .layer(axum::middleware::from_fn_with_state(Arc::clone(&ctx), gate_api))
        .layer(axum::middleware::from_fn(bounded))
        .with_state(ctx)
}

/// Answers 504 TIMEOUT when a call runs past its deadline (a replicated change then may or may not
/// have been applied; the message says so).
async fn bounded(request: Request, next: Next) -> Response {
    let deadline = Duration::from_millis(ADMIN_HTTP_REQUEST_TIMEOUT_MS);
    match tokio::time::timeout(deadline, next.run(request)).await {
        Ok(response) => response,
        Err(_) => ApiError::new(
            StatusCode::GATEWAY_TIMEOUT,
            code::TIMEOUT,
            format!("no answer within {ADMIN_HTTP_REQUEST_TIMEOUT_MS} ms; a change may still be applied"),
        )
        .into_response(),
    }
}

/// Compares without an early exit, so the time taken does not tell how much of a guess was right.
fn same_secret(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// Mutations (anything but GET/HEAD) need the bearer token when `adminToken` is set, then a
/// broker that is not draining. Under the plain ACL (`aclEnable`) every `/api/v1/` call needs the token, reads included (they
/// show message bodies and offsets), and without an `adminToken` the API is closed: the ACL
/// guards the remoting port, and this port must not be a way around it.
async fn gate_api(State(ctx): State<Shared>, request: Request, next: Next) -> Response {
    let acl_guarded = ctx.acl.is_some() && request.uri().path().starts_with("/api/v1/");
    let read = matches!(*request.method(), Method::GET | Method::HEAD);
    if read && !acl_guarded {
        return next.run(request).await;
    }
    if acl_guarded && ctx.config.admin_token.is_none() {
        return ApiError::new(
            StatusCode::FORBIDDEN,
            code::UNAUTHORIZED,
            "the plain ACL is on (aclEnable): set adminToken to use the admin API",
        )
        .into_response();
    }
    if let Some(token) = &ctx.config.admin_token {
        let given = request.headers().get(AUTHORIZATION).and_then(|v| v.to_str().ok()).and_then(|v| {
            let (scheme, rest) = v.split_once(' ')?;
            scheme.eq_ignore_ascii_case("bearer").then_some(rest.trim())
        });
        match given {
            Some(given) if same_secret(given.as_bytes(), token.as_bytes()) => {}
            Some(_) => {
                return ApiError::new(StatusCode::UNAUTHORIZED, code::UNAUTHORIZED, "wrong token").into_response();
            }
            None => {
                return ApiError::new(
                    StatusCode::UNAUTHORIZED,
                    code::UNAUTHORIZED,
                    "Authorization: Bearer <token> required",
                )
                .into_response();
            }
        }
    }
    if !read && ctx.draining.load(Ordering::Acquire) {
        return ApiError::new(StatusCode::SERVICE_UNAVAILABLE, code::NOT_READY, "the broker is shutting down")
            .into_response();
    }
    next.run(request).await
}

/// `Ok` when this replica may take a replicated change now; else NOT_LEADER / NOT_READY.
pub(crate) fn ensure_writable(ctx: &BrokerContext) -> ApiResult<()> {
    ctx.replica.check_writable().map(|_| ()).map_err(|e| ApiError::from_write(e, &ctx.replica))
}

/// Proposes `command` (topics, groups, offsets) and waits until it is applied here, exactly as the
/// remoting admin processor does; the NameServer registration is refreshed afterwards.
pub(crate) async fn replicate(ctx: &BrokerContext, command: BrokerCommand) -> ApiResult<()> {
    ctx.replica.propose(&command).await.map_err(|e| ApiError::from_write(e, &ctx.replica))?;
    ctx.register_now.notify_one();
    Ok(())
}

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
        let listener = tokio::net::TcpListener::bind(addr).await?;
        let addr = listener.local_addr()?;
        let cancel = CancellationToken::new();
        let stop = cancel.clone();
        let app = router(ctx);
        let task = tokio::spawn(async move {
            let served = axum::serve(listener, app).with_graceful_shutdown(stop.cancelled_owned()).await;
            if let Err(e) = served {
                warn!(error = %e, "admin HTTP server failed");
            }
        });
        info!(%addr, "admin HTTP server listening");
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

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use super::*;

    #[test]
    fn every_route_is_in_the_openapi_document_and_nothing_else_is() {
        let doc: serde_json::Value = serde_json::from_str(probes::OPENAPI_JSON).expect("openapi.json is JSON");
        assert!(doc["openapi"].as_str().is_some_and(|v| v.starts_with("3.")), "an OpenAPI 3 document");
        let documented: BTreeSet<&str> = doc["paths"].as_object().expect("paths").keys().map(String::as_str).collect();
        let routes = routes();
        let served: BTreeSet<&str> = routes.paths().iter().copied().collect();
        assert_eq!(served.len(), routes.paths().len(), "a path is routed twice");
        let undocumented: Vec<_> = served.difference(&documented).collect();
        assert!(undocumented.is_empty(), "routes missing from openapi.json: {undocumented:?}");
        let stale: Vec<_> = documented.difference(&served).collect();
        assert!(stale.is_empty(), "openapi.json documents paths nobody serves: {stale:?}");
        for (path, item) in doc["paths"].as_object().expect("paths") {
            for (method, op) in item.as_object().expect("path item").iter().filter(|(k, _)| *k != "parameters") {
                assert!(op["responses"].is_object(), "{method} {path} has no responses");
            }
        }
    }

    #[test]
    fn secrets_compare_whole() {
        assert!(same_secret(b"abc", b"abc"));
        assert!(!same_secret(b"abc", b"abd"));
        assert!(!same_secret(b"abc", b"ab"));
        assert!(!same_secret(b"", b"a"));
    }
}
