//! [`BrokerHttp`]: the console's HTTP/1.1 client of the brokers' admin API (`/api/v1/...`). One
//! connection per call (the console polls every few seconds; a kept-alive pool would hold sockets
//! to brokers that went away), the broker's `adminToken` as the bearer token, JSON both ways.
//!
//! Invariants: every call ends within its deadline (connect, request and answer together); an
//! answer is read up to [`CONSOLE_UPSTREAM_ANSWER_MAX_BYTES`] and must be JSON; nothing a broker
//! answers is trusted as more than data to show (it is re-serialised, never echoed as HTML).

use std::time::Duration;

use axum::body::Bytes;
use axum::http::Method;
use axum::http::Request;
use axum::http::StatusCode;
use axum::http::header;
use http_body_util::BodyExt;
use http_body_util::Full;
use http_body_util::Limited;
use hyper_util::rt::TokioIo;
use raftmq_common::limits::CONSOLE_UPSTREAM_ANSWER_MAX_BYTES;
use serde_json::Value;
use tokio::net::TcpStream;

/// Why a call to a broker's admin API failed before it had an answer.
#[derive(Debug, thiserror::Error)]
pub enum UpstreamError {
    /// No connection (the broker is down, or its admin port is not reachable from here).
    #[error("admin API at {addr} unreachable: {reason}")]
    Unreachable {
        /// `host:port`.
        addr: String,
        /// What the connect or the exchange said.
        reason: String,
    },
    /// No answer in time.
    #[error("admin API at {addr} did not answer within {ms} ms")]
    Timeout {
        /// `host:port`.
        addr: String,
        /// The deadline.
        ms: u128,
    },
    /// An answer that is not JSON, or too large.
    #[error("admin API at {addr} answered {status} with no JSON: {reason}")]
    BadAnswer {
        /// `host:port`.
        addr: String,
        /// HTTP status.
        status: u16,
        /// Why it was not read.
        reason: String,
    },
}

/// A broker's answer: its status and JSON body.
#[derive(Debug, Clone)]
pub struct Answer {
    /// HTTP status.
    pub status: StatusCode,
    /// The JSON body (`{code, message}` on an error).
    pub body: Value,
}

impl Answer {
    /// 2xx.
    pub fn ok(&self) -> bool {
        self.status.is_success()
    }

    /// The error text of a non-2xx answer (the API's `message`, else the status).
    pub fn message(&self) -> String {
        self.body["message"].as_str().map_or_else(|| self.status.to_string(), str::to_owned)
    }
}

/// The client; cheap to clone.
#[derive(Debug, Clone)]
pub struct BrokerHttp {
    token: Option<String>,
}

impl BrokerHttp {
    /// A client sending `token` (the brokers' `adminToken`) as `Authorization: Bearer`, if any.
    pub fn new(token: Option<String>) -> Self {
        BrokerHttp { token }
    }

    /// `method path` (path and query, already encoded) at `addr` with an optional JSON `body`,
    /// within `deadline`.
    pub async fn call(
        &self,
        addr: &str,
        method: Method,
        path: &str,
        body: Option<&Value>,
        deadline: Duration,
    ) -> Result<Answer, UpstreamError> {
        match tokio::time::timeout(deadline, self.exchange(addr, method, path, body)).await {
            Ok(result) => result,
            Err(_) => Err(UpstreamError::Timeout { addr: addr.to_owned(), ms: deadline.as_millis() }),
        }
    }

    async fn exchange(
        &self,
        addr: &str,
        method: Method,
        path: &str,
        body: Option<&Value>,
    ) -> Result<Answer, UpstreamError> {
        let unreachable = |reason: String| UpstreamError::Unreachable { addr: addr.to_owned(), reason };
        let stream = TcpStream::connect(addr).await.map_err(|e| unreachable(e.to_string()))?;
        let (mut sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
            .await
            .map_err(|e| unreachable(e.to_string()))?;
        // The connection task ends with the exchange (or when the deadline drops `sender`).
        tokio::spawn(async move {
            let _ = connection.await;
        });
        let mut request = Request::builder().method(method).uri(path).header(header::HOST, addr);
        if let Some(token) = &self.token {
            request = request.header(header::AUTHORIZATION, format!("Bearer {token}"));
        }
        let payload = match body {
            Some(v) => {
                request = request.header(header::CONTENT_TYPE, "application/json");
                Bytes::from(serde_json::to_vec(v).unwrap_or_default())
            }
            None => Bytes::new(),
        };
        let request = request.body(Full::new(payload)).map_err(|e| unreachable(e.to_string()))?;
        let response = sender.send_request(request).await.map_err(|e| unreachable(e.to_string()))?;
        let status = response.status();
        let bad = |reason: String| UpstreamError::BadAnswer { addr: addr.to_owned(), status: status.as_u16(), reason };
        let bytes = Limited::new(response.into_body(), CONSOLE_UPSTREAM_ANSWER_MAX_BYTES)
            .collect()
            .await
            .map_err(|e| bad(e.to_string()))?
            .to_bytes();
        let body = serde_json::from_slice(&bytes).map_err(|e| bad(e.to_string()))?;
        Ok(Answer { status, body })
    }
}

/// `s` as one percent-encoded path segment or query value (RFC 3986 unreserved characters kept):
/// topic names may hold `%` and `|`.
pub fn encode_component(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'~') {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn components_are_encoded() {
        assert_eq!(encode_component("%DLQ%g|1 x/y"), "%25DLQ%25g%7C1%20x%2Fy");
        assert_eq!(encode_component("Topic_A-1.b~"), "Topic_A-1.b~");
    }
}
