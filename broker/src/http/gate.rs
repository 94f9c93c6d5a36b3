//! The gate every admin HTTP call passes before its handler: who may call `/api/v1/` (the bearer
//! token), from where (Host and Origin, so a web page cannot drive the API through a browser), with
//! what (JSON bodies only), and when (not while the broker drains). The decisions are pure
//! functions of the request head; [`gate_api`] applies them.
//!
//! Invariants:
//! - With `adminToken` set, every `/api/v1/` call carries `Authorization: Bearer <adminToken>`;
//!   the comparison takes the same time whatever the guess (its length included).
//! - Without `adminToken` the server binds loopback only (`Broker::start`), and a call to
//!   `/api/v1/` must name a loopback host (`Host: 127.0.0.1:…`, `localhost`, `[::1]`): a DNS name
//!   rebound to 127.0.0.1 by a web page is refused. Under `aclEnable` the API is closed without a
//!   token (the ACL guards the remoting port; this one must not be a way around it).
//! - A request carrying `Origin` (only browsers send it) must come from the page's own origin, and
//!   `Sec-Fetch-Site: cross-site` is refused: a cross-site form or `fetch` never reaches a handler.
//! - A body sent to `/api/v1/` (or any `Content-Type` given) must be `application/json` (415
//!   otherwise): a `text/plain` POST, which browsers send cross-site without asking, is no call.
//! - Probes and documents (`/livez`, `/readyz`, `/metrics`, `/api/openapi.json`) are open: they
//!   show no message, offset or secret, and load balancers and Prometheus call them without one.

use std::net::IpAddr;
use std::sync::atomic::Ordering;

use axum::extract::Request;
use axum::extract::State;
use axum::http::HeaderMap;
use axum::http::Method;
use axum::http::StatusCode;
use axum::http::header::AUTHORIZATION;
use axum::http::header::CONTENT_LENGTH;
use axum::http::header::CONTENT_TYPE;
use axum::http::header::HOST;
use axum::http::header::ORIGIN;
use axum::http::header::TRANSFER_ENCODING;
use axum::middleware::Next;
use axum::response::IntoResponse;
use axum::response::Response;
use sha1::Digest;
use sha1::Sha1;

use crate::http::Shared;
use crate::http::error::ApiError;
use crate::http::error::code;

/// Where the API is: every path under it passes the whole gate.
const API_PREFIX: &str = "/api/v1/";

/// Why a call is refused before its handler.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refusal {
    /// No token, or the wrong one (401).
    Token(&'static str),
    /// Under `aclEnable` without an `adminToken` (403).
    ClosedUnderAcl,
    /// Host or Origin names another site (403).
    Site(String),
    /// A body that is not `application/json` (415).
    MediaType(String),
    /// The broker is shutting down (503).
    Draining,
}

impl Refusal {
    fn into_error(self) -> ApiError {
        match self {
            Refusal::Token(why) => ApiError::new(StatusCode::UNAUTHORIZED, code::UNAUTHORIZED, why),
            Refusal::ClosedUnderAcl => ApiError::new(
                StatusCode::FORBIDDEN,
                code::UNAUTHORIZED,
                "the plain ACL is on (aclEnable): set adminToken to use the admin API",
            ),
            Refusal::Site(why) => ApiError::new(StatusCode::FORBIDDEN, code::FORBIDDEN_ORIGIN, why),
            Refusal::MediaType(why) => {
                ApiError::new(StatusCode::UNSUPPORTED_MEDIA_TYPE, code::UNSUPPORTED_MEDIA_TYPE, why)
            }
            Refusal::Draining => {
                ApiError::new(StatusCode::SERVICE_UNAVAILABLE, code::NOT_READY, "the broker is shutting down")
            }
        }
    }
}

/// What the gate knows of the broker.
#[derive(Debug, Clone, Copy)]
pub struct GatePolicy<'a> {
    /// `adminToken`.
    pub token: Option<&'a str>,
    /// `aclEnable`.
    pub acl: bool,
    /// Shutting down.
    pub draining: bool,
}

/// The gate's decision for a request with `method`, `path` and `headers`.
pub fn check(policy: GatePolicy<'_>, method: &Method, path: &str, headers: &HeaderMap) -> Result<(), Refusal> {
    if !path.starts_with(API_PREFIX) {
        return Ok(());
    }
    check_site(headers, policy.token.is_some())?;
    check_media_type(headers)?;
    match policy.token {
        Some(token) => check_token(headers, token)?,
        None if policy.acl => return Err(Refusal::ClosedUnderAcl),
        None => {}
    }
    let read = matches!(*method, Method::GET | Method::HEAD);
    if !read && policy.draining {
        return Err(Refusal::Draining);
    }
    Ok(())
}

/// The axum middleware applying [`check`].
pub async fn gate_api(State(ctx): State<Shared>, request: Request, next: Next) -> Response {
    let policy = GatePolicy {
        token: ctx.config.admin_token.as_deref(),
        acl: ctx.acl.is_some(),
        draining: ctx.draining.load(Ordering::Acquire),
    };
    match check(policy, request.method(), request.uri().path(), request.headers()) {
        Ok(()) => next.run(request).await,
        Err(refusal) => refusal.into_error().into_response(),
    }
}

/// The site and media-type rules alone (no token, no draining): what a browser-facing server of
/// the same family (the web console, `console/`) applies before its own login check. `token_set`:
/// the server has a token, so it may serve hosts beyond loopback.
pub fn check_browser_request(headers: &HeaderMap, token_set: bool) -> Result<(), Refusal> {
    check_site(headers, token_set)?;
    check_media_type(headers)
}

/// The status and JSON body `{code, message}` a refusal is answered with.
pub fn refusal_response(refusal: Refusal) -> Response {
    refusal.into_error().into_response()
}

fn check_token(headers: &HeaderMap, token: &str) -> Result<(), Refusal> {
    let given = headers.get(AUTHORIZATION).and_then(|v| v.to_str().ok()).and_then(|v| {
        let (scheme, rest) = v.split_once(' ')?;
        scheme.eq_ignore_ascii_case("bearer").then_some(rest.trim())
    });
    match given {
        Some(given) if same_secret(given.as_bytes(), token.as_bytes()) => Ok(()),
        Some(_) => Err(Refusal::Token("wrong token")),
        None => Err(Refusal::Token("Authorization: Bearer <adminToken> required")),
    }
}

/// Compares digests of both without an early exit: the time taken tells neither how much of a
/// guess was right nor how long the secret is.
pub fn same_secret(given: &[u8], secret: &[u8]) -> bool {
    let a = Sha1::digest(given);
    let b = Sha1::digest(secret);
    let differ = a.iter().zip(b.iter()).fold(0u8, |acc, (x, y)| acc | (x ^ y));
    // Equal digests of unequal inputs would need a SHA-1 second preimage; the length check is free.
    std::hint::black_box(differ) == 0 && given.len() == secret.len()
}

fn check_site(headers: &HeaderMap, token_set: bool) -> Result<(), Refusal> {
    let host = headers.get(HOST).and_then(|v| v.to_str().ok()).unwrap_or("");
    if !token_set && !is_loopback_host(host) {
        return Err(Refusal::Site(format!(
            "Host {host:?} is not a loopback address: without adminToken the API answers only 127.0.0.1, [::1] \
             and localhost"
        )));
    }
    if headers.get("sec-fetch-site").is_some_and(|v| v.as_bytes().eq_ignore_ascii_case(b"cross-site")) {
        return Err(Refusal::Site("a cross-site browser request".to_owned()));
    }
    if let Some(origin) = headers.get(ORIGIN) {
        let origin = origin.to_str().unwrap_or("");
        let same =
            origin.strip_prefix("http://").or_else(|| origin.strip_prefix("https://")).is_some_and(|o| o == host);
        if !same {
            return Err(Refusal::Site(format!("Origin {origin:?} is not this server ({host:?})")));
        }
    }
    Ok(())
}

/// `127.0.0.1`, `[::1]:8080`, `localhost:8080`, `x.localhost` (RFC 6761 keeps these on this host).
fn is_loopback_host(host: &str) -> bool {
    let name = match host.strip_prefix('[') {
        Some(rest) => rest.split_once(']').map_or("", |(ip, _)| ip),
        None => host
            .rsplit_once(':')
            .map_or(host, |(name, port)| if port.bytes().all(|b| b.is_ascii_digit()) { name } else { host }),
    };
    let name = name.trim_end_matches('.').to_ascii_lowercase();
    name == "localhost" || name.ends_with(".localhost") || name.parse::<IpAddr>().is_ok_and(|ip| ip.is_loopback())
}

fn check_media_type(headers: &HeaderMap) -> Result<(), Refusal> {
    let has_body = headers.contains_key(TRANSFER_ENCODING)
        || headers
            .get(CONTENT_LENGTH)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.trim().parse::<u64>().map_or(true, |n| n > 0));
    let media = headers.get(CONTENT_TYPE).map(|v| v.to_str().unwrap_or("?"));
    match media {
        None if !has_body => Ok(()),
        None => Err(Refusal::MediaType("a body needs Content-Type: application/json".to_owned())),
        Some(media) => {
            let essence = media.split(';').next().unwrap_or("").trim();
            if essence.eq_ignore_ascii_case("application/json") {
                Ok(())
            } else {
                Err(Refusal::MediaType(format!("Content-Type {media:?}: only application/json is accepted")))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use axum::http::HeaderValue;

    use super::*;

    fn headers(pairs: &[(&'static str, &'static str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.insert(*k, HeaderValue::from_static(v));
        }
        h
    }

    const OPEN: GatePolicy<'static> = GatePolicy { token: None, acl: false, draining: false };
    const TOKEN: GatePolicy<'static> = GatePolicy { token: Some("s3cret"), acl: false, draining: false };

    #[test]
    fn secrets_compare_whole() {
        assert!(same_secret(b"abc", b"abc"));
        assert!(!same_secret(b"abc", b"abd"));
        assert!(!same_secret(b"abc", b"ab"));
        assert!(!same_secret(b"", b"a"));
        assert!(same_secret(b"", b""));
    }

    #[test]
    fn probes_pass_whatever_the_request() {
        let hostile =
            headers(&[("host", "evil.example"), ("origin", "http://evil.example"), ("content-type", "text/plain")]);
        for path in ["/livez", "/readyz", "/metrics", "/api/openapi.json"] {
            assert_eq!(check(TOKEN, &Method::GET, path, &hostile), Ok(()), "{path}");
            assert_eq!(check(OPEN, &Method::GET, path, &hostile), Ok(()), "{path}");
        }
    }

    #[test]
    fn with_a_token_every_api_call_needs_it() {
        let none = headers(&[("host", "broker-1.internal:8080")]);
        let wrong = headers(&[("host", "broker-1.internal:8080"), ("authorization", "Bearer s3cre")]);
        let right = headers(&[("host", "broker-1.internal:8080"), ("authorization", "bearer s3cret")]);
        for method in [Method::GET, Method::POST, Method::DELETE] {
            assert!(matches!(check(TOKEN, &method, "/api/v1/status", &none), Err(Refusal::Token(_))));
            assert!(matches!(check(TOKEN, &method, "/api/v1/status", &wrong), Err(Refusal::Token(_))));
            assert_eq!(check(TOKEN, &method, "/api/v1/status", &right), Ok(()), "any Host with the token");
        }
    }

    #[test]
    fn without_a_token_only_loopback_hosts() {
        for host in ["127.0.0.1:8080", "localhost", "LOCALHOST:1", "[::1]:8080", "a.localhost", "127.1.2.3"] {
            let h = headers(&[("host", host)]);
            assert_eq!(check(OPEN, &Method::GET, "/api/v1/status", &h), Ok(()), "{host}");
        }
        for host in ["evil.example", "evil.example:8080", "10.0.0.1:8080", "", "localhost.evil.example"] {
            let h = headers(&[("host", host)]);
            assert!(matches!(check(OPEN, &Method::GET, "/api/v1/status", &h), Err(Refusal::Site(_))), "{host}");
        }
        let acl = GatePolicy { acl: true, ..OPEN };
        assert_eq!(
            check(acl, &Method::GET, "/api/v1/status", &headers(&[("host", "127.0.0.1")])),
            Err(Refusal::ClosedUnderAcl)
        );
    }

    #[test]
    fn a_cross_site_text_plain_post_is_refused() {
        let form = headers(&[
            ("host", "127.0.0.1:8080"),
            ("origin", "https://evil.example"),
            ("content-type", "text/plain"),
            ("content-length", "20"),
        ]);
        assert!(matches!(check(OPEN, &Method::POST, "/api/v1/topics", &form), Err(Refusal::Site(_))));
        let fetch = headers(&[("host", "127.0.0.1:8080"), ("sec-fetch-site", "cross-site")]);
        assert!(matches!(check(OPEN, &Method::POST, "/api/v1/topics", &fetch), Err(Refusal::Site(_))));
        let same = headers(&[("host", "127.0.0.1:8080"), ("origin", "http://127.0.0.1:8080")]);
        assert_eq!(check(OPEN, &Method::POST, "/api/v1/topics", &same), Ok(()));
    }

    #[test]
    fn bodies_must_be_json() {
        let plain = headers(&[("host", "127.0.0.1"), ("content-type", "text/plain"), ("content-length", "2")]);
        assert!(matches!(check(OPEN, &Method::POST, "/api/v1/topics", &plain), Err(Refusal::MediaType(_))));
        let untyped = headers(&[("host", "127.0.0.1"), ("content-length", "2")]);
        assert!(matches!(check(OPEN, &Method::POST, "/api/v1/topics", &untyped), Err(Refusal::MediaType(_))));
        let chunked = headers(&[("host", "127.0.0.1"), ("transfer-encoding", "chunked")]);
        assert!(matches!(check(OPEN, &Method::POST, "/api/v1/topics", &chunked), Err(Refusal::MediaType(_))));
        let json = headers(&[
            ("host", "127.0.0.1"),
            ("content-type", "Application/JSON; charset=utf-8"),
            ("content-length", "2"),
        ]);
        assert_eq!(check(OPEN, &Method::POST, "/api/v1/topics", &json), Ok(()));
        let empty = headers(&[("host", "127.0.0.1"), ("content-length", "0")]);
        assert_eq!(check(OPEN, &Method::DELETE, "/api/v1/topics/T", &empty), Ok(()));
    }

    #[test]
    fn draining_refuses_changes_not_reads() {
        let h = headers(&[("host", "127.0.0.1")]);
        let draining = GatePolicy { draining: true, ..OPEN };
        assert_eq!(check(draining, &Method::GET, "/api/v1/status", &h), Ok(()));
        assert_eq!(check(draining, &Method::POST, "/api/v1/ops/transfer-leader", &h), Err(Refusal::Draining));
    }
}
