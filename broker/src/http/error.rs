//! `ApiError`: how every admin HTTP call fails — a 4xx/5xx status and a JSON body
//! `{"code": "<STABLE_UPPER_SNAKE>", "message": "..."}` (a refused write to a follower adds
//! `leader_id` / `leader_addr`). Also the extractors that turn malformed paths, queries and bodies
//! into these errors instead of axum's plain-text rejections.
//!
//! Codes are API: scripts match on them, so a code is never renamed or reused for another meaning.

use axum::Json;
use axum::body::Bytes;
use axum::extract::FromRequest;
use axum::extract::FromRequestParts;
use axum::extract::Request;
use axum::http::StatusCode;
use axum::http::request::Parts;
use axum::response::IntoResponse;
use axum::response::Response;
use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::services::replica::Replica;
use crate::services::replica::WriteError;

/// Stable error codes.
pub mod code {
    /// The body is not the JSON the call expects.
    pub const BAD_JSON: &str = "BAD_JSON";
    /// A path or query parameter, name or value is invalid.
    pub const INVALID_ARGUMENT: &str = "INVALID_ARGUMENT";
    /// The body is larger than the limit.
    pub const PAYLOAD_TOO_LARGE: &str = "PAYLOAD_TOO_LARGE";
    /// A mutating call without the right `Authorization: Bearer` token.
    pub const UNAUTHORIZED: &str = "UNAUTHORIZED";
    /// Host or Origin names another site (DNS rebinding, a cross-site browser request).
    pub const FORBIDDEN_ORIGIN: &str = "FORBIDDEN_ORIGIN";
    /// A body that is not `application/json`.
    pub const UNSUPPORTED_MEDIA_TYPE: &str = "UNSUPPORTED_MEDIA_TYPE";
    /// No such route.
    pub const NOT_FOUND: &str = "NOT_FOUND";
    /// The route exists but not for this method.
    pub const METHOD_NOT_ALLOWED: &str = "METHOD_NOT_ALLOWED";
    /// Unknown topic.
    pub const TOPIC_NOT_FOUND: &str = "TOPIC_NOT_FOUND";
    /// Unknown subscription group.
    pub const GROUP_NOT_FOUND: &str = "GROUP_NOT_FOUND";
    /// No message there.
    pub const MESSAGE_NOT_FOUND: &str = "MESSAGE_NOT_FOUND";
    /// Create of something that exists.
    pub const ALREADY_EXISTS: &str = "ALREADY_EXISTS";
    /// This replica does not lead; retry at `leader_id` / `leader_addr`.
    pub const NOT_LEADER: &str = "NOT_LEADER";
    /// Recovering, just elected, or draining.
    pub const NOT_READY: &str = "NOT_READY";
    /// Too many writes queued.
    pub const BUSY: &str = "BUSY";
    /// The write was refused; nothing changed.
    pub const WRITE_REJECTED: &str = "WRITE_REJECTED";
    /// The write may or may not have been applied.
    pub const WRITE_OUTCOME_UNKNOWN: &str = "WRITE_OUTCOME_UNKNOWN";
    /// The replica cannot serve (storage failure, shutting down).
    pub const UNAVAILABLE: &str = "UNAVAILABLE";
    /// The call ran past its deadline.
    pub const TIMEOUT: &str = "TIMEOUT";
    /// A Raft management call failed.
    pub const RAFT_ERROR: &str = "RAFT_ERROR";
}

/// The JSON body of an error.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ErrorBody {
    /// One of [`code`].
    pub code: &'static str,
    /// For people.
    pub message: String,
    /// With `NOT_LEADER`: the leader's Raft id, when known.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub leader_id: Option<u64>,
    /// With `NOT_LEADER`: the leader's remoting address, when known.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub leader_addr: Option<String>,
}

/// A failed admin call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiError {
    /// HTTP status.
    pub status: StatusCode,
    /// Body.
    pub body: ErrorBody,
}

impl ApiError {
    /// An error with `status`, `code` and `message`.
    pub fn new(status: StatusCode, code: &'static str, message: impl Into<String>) -> Self {
        ApiError { status, body: ErrorBody { code, message: message.into(), leader_id: None, leader_addr: None } }
    }

    /// 400 INVALID_ARGUMENT.
    pub fn invalid(message: impl Into<String>) -> Self {
        ApiError::new(StatusCode::BAD_REQUEST, code::INVALID_ARGUMENT, message)
    }

    /// 404 with `code`.
    pub fn not_found(code: &'static str, message: impl Into<String>) -> Self {
        ApiError::new(StatusCode::NOT_FOUND, code, message)
    }

    /// 421 NOT_LEADER naming the leader as this replica knows it.
    pub fn not_leader(replica: &Replica) -> Self {
        let leader_id = replica.leadership().leader_id;
        let mut e = ApiError::new(
            StatusCode::MISDIRECTED_REQUEST,
            code::NOT_LEADER,
            format!("node {} is not the leader of broker {}", replica.node_id(), replica.broker_name()),
        );
        e.body.leader_id = leader_id;
        e.body.leader_addr = replica.leader_addr();
        e
    }

    /// The HTTP form of a refused replicated write.
    pub fn from_write(e: WriteError, replica: &Replica) -> Self {
        match e {
            WriteError::NotLeader { leader_addr } => {
                let mut err = ApiError::not_leader(replica);
                err.body.leader_addr = leader_addr.or(err.body.leader_addr);
                err
            }
            WriteError::NotReady => ApiError::new(StatusCode::SERVICE_UNAVAILABLE, code::NOT_READY, e.to_string()),
            WriteError::Busy(_) => ApiError::new(StatusCode::SERVICE_UNAVAILABLE, code::BUSY, e.to_string()),
            WriteError::OutcomeUnknown(_) => {
                ApiError::new(StatusCode::GATEWAY_TIMEOUT, code::WRITE_OUTCOME_UNKNOWN, e.to_string())
            }
            WriteError::Rejected(_) => ApiError::new(StatusCode::CONFLICT, code::WRITE_REJECTED, e.to_string()),
            WriteError::TooLarge(_) => {
                ApiError::new(StatusCode::PAYLOAD_TOO_LARGE, code::PAYLOAD_TOO_LARGE, e.to_string())
            }
            WriteError::Fatal(_) | WriteError::DiskFull(_) => {
                ApiError::new(StatusCode::SERVICE_UNAVAILABLE, code::UNAVAILABLE, e.to_string())
            }
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        (self.status, Json(self.body)).into_response()
    }
}

/// Result of a handler.
pub type ApiResult<T> = Result<T, ApiError>;

/// A JSON body, rejected as 400 BAD_JSON (or 413) in our error format.
#[derive(Debug)]
pub struct ApiJson<T>(pub T);

impl<S: Send + Sync, T: DeserializeOwned> FromRequest<S> for ApiJson<T> {
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &S) -> Result<Self, ApiError> {
        let bytes = Bytes::from_request(req, state).await.map_err(|e| {
            let code =
                if e.status() == StatusCode::PAYLOAD_TOO_LARGE { code::PAYLOAD_TOO_LARGE } else { code::BAD_JSON };
            ApiError::new(e.status(), code, e.body_text())
        })?;
        serde_json::from_slice(&bytes)
            .map(ApiJson)
            .map_err(|e| ApiError::new(StatusCode::BAD_REQUEST, code::BAD_JSON, format!("invalid JSON body: {e}")))
    }
}

/// A path parameter, rejected as 400 INVALID_ARGUMENT.
#[derive(Debug)]
pub struct ApiPath<T>(pub T);

impl<S: Send + Sync, T: DeserializeOwned + Send> FromRequestParts<S> for ApiPath<T> {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, ApiError> {
        axum::extract::Path::<T>::from_request_parts(parts, state)
            .await
            .map(|p| ApiPath(p.0))
            .map_err(|e| ApiError::invalid(e.body_text()))
    }
}

/// Query parameters, rejected as 400 INVALID_ARGUMENT.
#[derive(Debug)]
pub struct ApiQuery<T>(pub T);

impl<S: Send + Sync, T: DeserializeOwned> FromRequestParts<S> for ApiQuery<T> {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, ApiError> {
        axum::extract::Query::<T>::from_request_parts(parts, state)
            .await
            .map(|q| ApiQuery(q.0))
            .map_err(|e| ApiError::invalid(e.body_text()))
    }
}
