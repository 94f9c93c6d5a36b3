//! The gate every console request passes: the admin API's browser rules
//! (`raftmq_broker::http::gate::check_browser_request`: a loopback Host unless a token is set, a
//! same-origin Origin, no cross-site fetch, JSON bodies) on `/console/api/`, then the session
//! cookie when a token is set (login and the session probe excepted); and on every answer the
//! headers that keep the page to itself: a Content-Security-Policy allowing only its own scripts,
//! styles and connections, no framing, no sniffing, no referrer.
//!
//! Invariant: with a token set, no `/console/api/` call but `session` and `login` reaches a handler
//! without a live session; static assets hold no secret and are served to anyone who reaches the
//! listener (which without a token is loopback only).

use std::sync::Arc;

use axum::extract::Request;
use axum::extract::State;
use axum::http::HeaderValue;
use axum::http::StatusCode;
use axum::http::header;
use axum::middleware::Next;
use axum::response::IntoResponse;
use axum::response::Response;
use raftmq_broker::http::gate::check_browser_request;
use raftmq_broker::http::gate::refusal_response;

use crate::api::error::ApiError;
use crate::state::ConsoleState;

/// Where the JSON API is.
const API_PREFIX: &str = "/console/api/";

/// The page's policy: its own origin only; SVG charts are drawn inline by script.
const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; \
                   connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'";

/// The axum middleware.
pub async fn gate(State(s): State<Arc<ConsoleState>>, request: Request, next: Next) -> Response {
    let path = request.uri().path();
    let mut response = if path.starts_with(API_PREFIX) {
        let open = matches!(path, "/console/api/session" | "/console/api/login");
        match check_browser_request(request.headers(), s.config.token.is_some()) {
            Err(refusal) => refusal_response(refusal),
            Ok(()) if s.config.token.is_some() && !open && !s.sessions.valid(request.headers()) => {
                ApiError::new(StatusCode::UNAUTHORIZED, "log in first").into_response()
            }
            Ok(()) => next.run(request).await,
        }
    } else {
        next.run(request).await
    };
    let h = response.headers_mut();
    h.insert(header::CONTENT_SECURITY_POLICY, HeaderValue::from_static(CSP));
    h.insert(header::X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff"));
    h.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    h.insert(header::REFERRER_POLICY, HeaderValue::from_static("no-referrer"));
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    response
}
