//! [`ClientError`]: every failure the SDK reports, shaped like apache/rocketmq-clients' Rust
//! `ClientError { kind, message, operation, context, source }`.
//!
//! The [`ErrorKind`] answers the two questions a caller acts on:
//! - [`ClientError::is_outcome_unknown`]: the request reached the network and may have been applied
//!   (no answer before the deadline, or the connection dropped while waiting). A send that ends this
//!   way is **not** a failure: the message may be stored. Resending the same [`Message`] keeps its
//!   `UNIQ_KEY`, so consumers can tell a duplicate.
//! - [`ClientError::is_retryable`]: trying again (later, or elsewhere) may succeed.
//!
//! Invariant: a remoting timeout always maps to [`ErrorKind::Timeout`], never to a plain failure.
//!
//! [`Message`]: raftmq_common::message::Message

use std::fmt;

use raftmq_common::protocol::ResponseCode;
use raftmq_common::remoting::RemotingError;

/// A boxed error cause.
pub type BoxError = Box<dyn std::error::Error + Send + Sync + 'static>;

/// The SDK's result type.
pub type Result<T, E = ClientError> = std::result::Result<T, E>;

/// What kind of failure a [`ClientError`] is.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ErrorKind {
    /// Refused on the client before any network call (bad topic, empty body, bad batch, bad config).
    #[error("invalid argument")]
    InvalidArgument,
    /// The broker or NameServer answered with an error code.
    #[error("broker answered {code}")]
    Broker {
        /// The response code.
        code: ResponseCode,
        /// The response remark.
        remark: Option<String>,
    },
    /// No NameServer knows a writable route for the topic.
    #[error("no route")]
    NoRoute,
    /// The request was sent and no answer came before the deadline: it may have been applied.
    #[error("timed out; outcome unknown")]
    Timeout,
    /// The connection closed after the request was sent: it may have been applied.
    #[error("outcome unknown")]
    OutcomeUnknown,
    /// The deadline passed before the request could be sent; nothing was sent in this attempt.
    #[error("deadline exceeded before sending")]
    DeadlineExceeded,
    /// No connection could be used; the request was not sent.
    #[error("connection failed")]
    Connection,
    /// The client or the server is overloaded (write queue full, too many calls in flight,
    /// SYSTEM_BUSY); the request was not applied.
    #[error("busy")]
    Busy,
    /// The producer or admin is not started, or was shut down.
    #[error("shut down or not started")]
    Shutdown,
    /// A response that does not follow the protocol (missing header fields, bad JSON body).
    #[error("protocol error")]
    Protocol,
}

/// A failed SDK operation.
#[derive(Debug, thiserror::Error)]
#[error("{operation} failed: {kind}: {message}{}", render_context(.context))]
pub struct ClientError {
    /// What went wrong.
    pub kind: ErrorKind,
    /// The API operation, e.g. `"send"`, `"route"`, `"createTopic"`.
    pub operation: &'static str,
    /// Human-readable detail.
    pub message: String,
    /// Where: `("topic", ..)`, `("broker", ..)`, `("queue", ..)`, `("addr", ..)`.
    pub context: Vec<(&'static str, String)>,
    /// The underlying cause.
    #[source]
    pub source: Option<BoxError>,
}

fn render_context(context: &[(&'static str, String)]) -> String {
    if context.is_empty() {
        return String::new();
    }
    let pairs: Vec<String> = context.iter().map(|(k, v)| format!("{k}={v}")).collect();
    format!(" [{}]", pairs.join(", "))
}

impl ClientError {
    /// An error of `kind` raised by `operation`.
    pub fn new(kind: ErrorKind, operation: &'static str, message: impl Into<String>) -> Self {
        ClientError { kind, operation, message: message.into(), context: Vec::new(), source: None }
    }

    /// Adds a context pair.
    pub fn with_context(mut self, key: &'static str, value: impl fmt::Display) -> Self {
        self.context.push((key, value.to_string()));
        self
    }

    /// Sets the cause.
    pub fn with_source(mut self, source: impl Into<BoxError>) -> Self {
        self.source = Some(source.into());
        self
    }

    /// A client-side validation failure.
    pub fn invalid_argument(operation: &'static str, message: impl Into<String>) -> Self {
        Self::new(ErrorKind::InvalidArgument, operation, message)
    }

    /// A broker or NameServer error response.
    pub fn broker(operation: &'static str, code: ResponseCode, remark: Option<String>) -> Self {
        // The kind already renders the code ("broker answered CODE(n)"); the message is the remark.
        let message = remark.clone().unwrap_or_else(|| "(no remark)".to_owned());
        Self::new(ErrorKind::Broker { code, remark }, operation, message)
    }

    /// A remoting failure, classified.
    pub fn remoting(operation: &'static str, err: RemotingError) -> Self {
        let kind = match &err {
            RemotingError::Timeout { .. } => ErrorKind::Timeout,
            RemotingError::ConnectionClosed { .. } => ErrorKind::OutcomeUnknown,
            RemotingError::Connect { .. } | RemotingError::NotConnected { .. } => ErrorKind::Connection,
            RemotingError::SendTimeout { .. } | RemotingError::TooManyInFlight { .. } => ErrorKind::Busy,
            RemotingError::Encode(_) => ErrorKind::InvalidArgument,
            RemotingError::ClientClosed => ErrorKind::Shutdown,
        };
        Self::new(kind, operation, err.to_string()).with_source(err)
    }

    /// The response code when the peer answered with an error.
    pub fn response_code(&self) -> Option<ResponseCode> {
        match &self.kind {
            ErrorKind::Broker { code, .. } => Some(*code),
            _ => None,
        }
    }

    /// The peer's remark when it answered with an error.
    pub fn remark(&self) -> Option<&str> {
        match &self.kind {
            ErrorKind::Broker { remark, .. } => remark.as_deref(),
            _ => None,
        }
    }

    /// Whether the request may have been applied although the call failed (timeout, connection
    /// lost while waiting). Such a send is not a failure: check before resending.
    pub fn is_outcome_unknown(&self) -> bool {
        matches!(self.kind, ErrorKind::Timeout | ErrorKind::OutcomeUnknown)
    }

    /// Whether another attempt may succeed. Broker errors are retryable exactly when a RocketMQ
    /// producer retries them (`ResponseCode::is_producer_retryable`); outcome-unknown errors are
    /// retryable but may duplicate.
    pub fn is_retryable(&self) -> bool {
        match &self.kind {
            ErrorKind::Broker { code, .. } => code.is_producer_retryable(),
            ErrorKind::Timeout
            | ErrorKind::OutcomeUnknown
            | ErrorKind::DeadlineExceeded
            | ErrorKind::Connection
            | ErrorKind::Busy => true,
            ErrorKind::InvalidArgument | ErrorKind::NoRoute | ErrorKind::Shutdown | ErrorKind::Protocol => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use raftmq_common::remoting::CloseReason;

    use super::*;

    #[test]
    fn remoting_errors_are_classified() {
        let addr = || "127.0.0.1:1".to_owned();
        let cases = [
            (RemotingError::Timeout { addr: addr(), timeout_ms: 5 }, ErrorKind::Timeout, true, true),
            (
                RemotingError::ConnectionClosed { addr: addr(), reason: CloseReason::PeerClosed },
                ErrorKind::OutcomeUnknown,
                true,
                true,
            ),
            (
                RemotingError::Connect { addr: addr(), source: std::io::ErrorKind::ConnectionRefused.into() },
                ErrorKind::Connection,
                false,
                true,
            ),
            (RemotingError::TooManyInFlight { addr: addr(), limit: 1 }, ErrorKind::Busy, false, true),
            (RemotingError::ClientClosed, ErrorKind::Shutdown, false, false),
        ];
        for (err, kind, unknown, retryable) in cases {
            let e = ClientError::remoting("send", err);
            assert_eq!(e.kind, kind);
            assert_eq!(e.is_outcome_unknown(), unknown, "{e}");
            assert_eq!(e.is_retryable(), retryable, "{e}");
            assert!(std::error::Error::source(&e).is_some());
        }
    }

    #[test]
    fn broker_errors_follow_the_producer_retry_set() {
        let e = ClientError::broker("send", ResponseCode::ServiceNotAvailable, Some("leader=1.2.3.4:10911".into()));
        assert!(e.is_retryable() && !e.is_outcome_unknown());
        assert_eq!(e.response_code(), Some(ResponseCode::ServiceNotAvailable));
        assert_eq!(e.remark(), Some("leader=1.2.3.4:10911"));
        assert!(!ClientError::broker("send", ResponseCode::MessageIllegal, None).is_retryable());
    }

    #[test]
    fn a_broker_refusal_names_its_code_once() {
        let e = ClientError::broker("queryCq", ResponseCode::SystemError, Some("3@T is not exist!".into()));
        assert_eq!(e.to_string(), "queryCq failed: broker answered SYSTEM_ERROR(1): 3@T is not exist!");
        let bare = ClientError::broker("send", ResponseCode::SystemBusy, None);
        assert_eq!(bare.to_string(), "send failed: broker answered SYSTEM_BUSY(2): (no remark)");
    }

    #[test]
    fn display_names_operation_kind_and_context() {
        let e = ClientError::new(ErrorKind::NoRoute, "send", "no route info of this topic")
            .with_context("topic", "T")
            .with_context("broker", "broker-a");
        assert_eq!(e.to_string(), "send failed: no route: no route info of this topic [topic=T, broker=broker-a]");
    }
}
