//! [`RemotingError`]: why a remoting call failed, and what the caller may conclude from it.
//!
//! Two questions matter to a caller and each variant answers both:
//! - [`RemotingError::is_outcome_unknown`]: the request may have reached the peer and been processed
//!   (a timeout, or the connection dropped while waiting). A retry of a non-idempotent request (a
//!   send) may then duplicate it.
//! - [`RemotingError::is_retryable`]: trying again (on this or another address) may succeed.

use thiserror::Error;

use super::close_reason::CloseReason;
use crate::protocol::EncodeError;

/// Why a remoting call failed.
#[derive(Debug, Error)]
pub enum RemotingError {
    /// No connection could be made; the request was not sent.
    #[error("connect to {addr} failed: {source}")]
    Connect {
        /// The remote address.
        addr: String,
        /// The socket error (`TimedOut` when the connect deadline passed).
        #[source]
        source: std::io::Error,
    },
    /// No response within the deadline. The request was sent and may have been processed.
    #[error("request to {addr} timed out after {timeout_ms} ms; it may or may not have been processed")]
    Timeout {
        /// The remote address.
        addr: String,
        /// The deadline that passed.
        timeout_ms: u64,
    },
    /// The connection's write queue stayed full until the deadline; the request was not sent.
    #[error("request to {addr} not sent: the write queue stayed full for {timeout_ms} ms")]
    SendTimeout {
        /// The remote address.
        addr: String,
        /// The deadline that passed.
        timeout_ms: u64,
    },
    /// The connection closed after the request was sent and before its response arrived.
    #[error(
        "connection to {addr} closed while waiting for the response ({reason}); it may or may not have been processed"
    )]
    ConnectionClosed {
        /// The remote address.
        addr: String,
        /// Why the connection closed (a bad frame from the peer shows up here).
        reason: CloseReason,
    },
    /// The connection was already closed; the request was not sent.
    #[error("connection to {addr} is closed ({reason}); request not sent")]
    NotConnected {
        /// The remote address.
        addr: String,
        /// Why the connection closed.
        reason: CloseReason,
    },
    /// The request could not be encoded (too large, or a code the binary header cannot carry).
    #[error("cannot encode request: {0}")]
    Encode(#[from] EncodeError),
    /// The connection already has the maximum number of calls waiting for responses.
    #[error("{limit} requests to {addr} already wait for responses; request not sent")]
    TooManyInFlight {
        /// The remote address.
        addr: String,
        /// The per-connection limit.
        limit: usize,
    },
    /// The client was closed.
    #[error("the remoting client is closed")]
    ClientClosed,
}

impl RemotingError {
    /// Whether the request may have been processed by the peer even though the call failed.
    pub fn is_outcome_unknown(&self) -> bool {
        matches!(self, RemotingError::Timeout { .. } | RemotingError::ConnectionClosed { .. })
    }

    /// Whether another attempt may succeed. Check [`Self::is_outcome_unknown`] before retrying a
    /// request that must not be applied twice.
    pub fn is_retryable(&self) -> bool {
        match self {
            RemotingError::Connect { .. }
            | RemotingError::Timeout { .. }
            | RemotingError::SendTimeout { .. }
            | RemotingError::ConnectionClosed { .. }
            | RemotingError::NotConnected { .. }
            | RemotingError::TooManyInFlight { .. } => true,
            RemotingError::Encode(_) | RemotingError::ClientClosed => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classification_table() {
        let addr = || "127.0.0.1:1".to_string();
        let cases: Vec<(RemotingError, bool, bool)> = vec![
            (
                RemotingError::Connect { addr: addr(), source: std::io::ErrorKind::ConnectionRefused.into() },
                false,
                true,
            ),
            (RemotingError::Timeout { addr: addr(), timeout_ms: 1 }, true, true),
            (RemotingError::SendTimeout { addr: addr(), timeout_ms: 1 }, false, true),
            (RemotingError::ConnectionClosed { addr: addr(), reason: CloseReason::PeerClosed }, true, true),
            (RemotingError::NotConnected { addr: addr(), reason: CloseReason::PeerClosed }, false, true),
            (RemotingError::Encode(EncodeError::CodeOutOfRange { code: 1 << 20 }), false, false),
            (RemotingError::TooManyInFlight { addr: addr(), limit: 1 }, false, true),
            (RemotingError::ClientClosed, false, false),
        ];
        for (err, unknown, retryable) in cases {
            assert_eq!(err.is_outcome_unknown(), unknown, "{err}");
            assert_eq!(err.is_retryable(), retryable, "{err}");
        }
    }
}
