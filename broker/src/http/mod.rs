//! The broker's admin HTTP server (axum, JSON) on `adminPort`: health probes, Prometheus metrics and
//! the admin API of this replica. Started by `Broker::start`, stopped by `Broker::shutdown`.
//!
//! ```text
//! GET  /livez /readyz /metrics /api/openapi.json      probes.rs   (open: no token, any Host)
//! GET  /api/v1/status                                 status.rs   (Raft view of this replica)
//! GET, PATCH /api/v1/config                           config.rs   (this replica's config, runtime keys)
//! *    /api/v1/topics[/{topic}]                       topics.rs   ┐ changes go through the same
//! *    /api/v1/groups[/{group}[/progress]]            groups.rs   ┘ replicated commands as remoting
//! GET  /api/v1/messages/{msgId|by-key|by-time}        messages.rs (processors/query.rs)
//! GET  /api/v1/messages/{msgId}/trace                 messages.rs (message trace records)
//! POST /api/v1/ops/{transfer-leader,reset-offset}     ops.rs
//! POST /api/v1/ops/nodes, DELETE /api/v1/ops/nodes/{id}  membership.rs (add / remove a node)
//!
//! connection ─▶ server.rs (connection limits, header read timeout, lifetime)
//!   request ─▶ deadline (ADMIN_HTTP_REQUEST_TIMEOUT_MS) ─▶ gate.rs (token, Host/Origin, JSON
//!           bodies, draining) ─▶ body limit ─▶ handler ─▶ JSON | ApiError {code, message}
//! ```
//!
//! Invariants: without `adminToken` the server binds loopback only (`Broker::start`); with it every
//! `/api/v1/` call needs `Authorization: Bearer <adminToken>` (see [`gate`] for Host, Origin and
//! Content-Type). Changes are refused (503) once the broker drains. Only the leader changes
//! replicated state; a follower answers 421 NOT_LEADER naming the leader. Every call is bounded in
//! time and body size, and no input panics a handler (all parsing goes through [`error`]'s
//! extractors).
//!
//! Port 0 binds an ephemeral port (tests); [`server::AdminServer::local_addr`] tells which.
//!
//! Adding routes: a module returns a [`Routes`] built with [`Routes::route`] and [`routes`] merges
//! it in one line; every path must also be in `openapi.json` (a unit test checks).

pub mod config;
pub mod error;
pub mod gate;
pub mod groups;
pub mod handles;
pub mod membership;
pub mod messages;
pub mod ops;
pub mod probes;
pub mod server;
pub mod status;
pub mod topics;

use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::extract::DefaultBodyLimit;
use axum::extract::Request;
use axum::http::StatusCode;
use axum::middleware::Next;
use axum::response::IntoResponse;
use axum::response::Response;
use axum::routing::MethodRouter;
use raftmq_common::limits::ADMIN_HTTP_BODY_MAX_BYTES;
use raftmq_common::limits::ADMIN_HTTP_REQUEST_TIMEOUT_MS;

use crate::http::error::ApiError;
use crate::http::error::ApiResult;
use crate::http::error::code;
use crate::http::handles::HttpHandles;
use crate::state::entry::BrokerCommand;

/// The state every handler gets.
pub type Shared = Arc<HttpHandles>;

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
        .layer(axum::middleware::from_fn_with_state(Arc::clone(&ctx), gate::gate_api))
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

/// `Ok` when this replica may take a replicated change now; else NOT_LEADER / NOT_READY.
pub(crate) fn ensure_writable(ctx: &HttpHandles) -> ApiResult<()> {
    ctx.replica.check_writable().map(|_| ()).map_err(|e| ApiError::from_write(e, &ctx.replica))
}

/// Proposes `command` (topics, groups, offsets) and waits until it is applied here, exactly as the
/// remoting admin processor does; the NameServer registration is refreshed afterwards.
pub(crate) async fn replicate(ctx: &HttpHandles, command: BrokerCommand) -> ApiResult<()> {
    ctx.replica.propose(&command).await.map_err(|e| ApiError::from_write(e, &ctx.replica))?;
    ctx.register_now.notify_one();
    Ok(())
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
}
