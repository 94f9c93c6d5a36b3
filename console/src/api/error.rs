//! [`ApiError`]: how a console JSON call fails — a status and `{"error": "..."}` that the page
//! shows as it is. A broker's refusal keeps the broker's status and message; a broker that is down
//! is a 502 naming it, so the page can say which one.

use axum::Json;
use axum::http::StatusCode;
use axum::response::IntoResponse;
use axum::response::Response;

use crate::upstream::Answer;
use crate::upstream::UpstreamError;

/// A failed console call.
#[derive(Debug, Clone)]
pub struct ApiError {
    /// Status.
    pub status: StatusCode,
    /// What the page shows.
    pub message: String,
}

/// The result of a console handler.
pub type ApiResult<T> = Result<T, ApiError>;

impl ApiError {
    /// A status and message.
    pub fn new(status: StatusCode, message: impl Into<String>) -> Self {
        ApiError { status, message: message.into() }
    }

    /// 400.
    pub fn invalid(message: impl Into<String>) -> Self {
        ApiError::new(StatusCode::BAD_REQUEST, message)
    }

    /// 404.
    pub fn not_found(message: impl Into<String>) -> Self {
        ApiError::new(StatusCode::NOT_FOUND, message)
    }

    /// 502: an upstream (NameServer, broker) failed.
    pub fn upstream(message: impl Into<String>) -> Self {
        ApiError::new(StatusCode::BAD_GATEWAY, message)
    }

    /// A broker's non-2xx answer, as the broker gave it.
    pub fn from_answer(addr: &str, answer: &Answer) -> Self {
        let status = StatusCode::from_u16(answer.status.as_u16()).unwrap_or(StatusCode::BAD_GATEWAY);
        ApiError::new(status, format!("{addr}: {}", answer.message()))
    }
}

impl From<UpstreamError> for ApiError {
    fn from(e: UpstreamError) -> Self {
        ApiError::upstream(e.to_string())
    }
}

impl From<raftmq_client::ClientError> for ApiError {
    fn from(e: raftmq_client::ClientError) -> Self {
        ApiError::upstream(e.to_string())
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        (self.status, Json(serde_json::json!({ "error": self.message }))).into_response()
    }
}
