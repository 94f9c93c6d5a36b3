//! [`RefusalLog`]: a refused request is logged at warn, once per connection, request code and
//! response code, with the client's address and the reason (the response's remark), so an operator
//! sees why a client fails (a header or body this server cannot read) without a line per request.
//!
//! Invariants: a (connection, request code, response code) triple logs at most once while it is
//! remembered; at most `lines_per_second` lines are written in any one-second window overall, the
//! rest counted and reported with the next line written; memory is bounded by
//! [`RefusalLog::REMEMBERED_MAX`] triples (when full, the memory restarts empty, so a long-lived
//! refusal may log once more).

use std::collections::HashSet;
use std::net::SocketAddr;
use std::sync::Mutex;
use std::sync::PoisonError;
use std::time::Duration;
use std::time::Instant;

use crate::protocol::RemotingCommand;
use crate::protocol::ResponseCode;

/// What was logged and how many lines the current window has left.
#[derive(Debug)]
struct State {
    seen: HashSet<(u64, i32, i32)>,
    window_start: Option<Instant>,
    lines_in_window: u32,
    suppressed: u64,
}

/// Logs refused requests once per (connection, request code, response code), rate-limited.
#[derive(Debug)]
pub struct RefusalLog {
    state: Mutex<State>,
    lines_per_second: u32,
}

/// Why a refusal was or was not written (for tests and callers that count).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Logged {
    /// The response is not a refusal.
    NotARefusal,
    /// Written at warn.
    Written,
    /// This connection already had this refusal logged.
    AlreadyLogged,
    /// Over the overall rate limit; counted in the next line written.
    RateLimited,
}

impl Default for RefusalLog {
    fn default() -> Self {
        RefusalLog::new(RefusalLog::LINES_PER_SECOND)
    }
}

impl RefusalLog {
    /// The default overall limit.
    pub const LINES_PER_SECOND: u32 = 10;
    /// The most (connection, request code, response code) triples remembered.
    pub const REMEMBERED_MAX: usize = 65_536;

    /// A log writing at most `lines_per_second` lines a second.
    pub fn new(lines_per_second: u32) -> Self {
        RefusalLog {
            state: Mutex::new(State { seen: HashSet::new(), window_start: None, lines_in_window: 0, suppressed: 0 }),
            lines_per_second,
        }
    }

    /// Whether `response` refuses its request: SYSTEM_ERROR, the code Java (and every processor
    /// here) answers a header or body that does not decode with, and REQUEST_CODE_NOT_SUPPORTED.
    pub fn is_refusal(response: &RemotingCommand) -> bool {
        matches!(response.response_code(), ResponseCode::SystemError | ResponseCode::RequestCodeNotSupported)
    }

    /// Logs `response` to `request` on connection `connection_id` from `peer` when it is a refusal
    /// not yet logged for this connection and codes, within the rate limit.
    pub fn note(
        &self,
        connection_id: u64,
        peer: SocketAddr,
        request: &RemotingCommand,
        response: &RemotingCommand,
    ) -> Logged {
        // Every response passes here: the peer is formatted only for a refusal.
        if !Self::is_refusal(response) {
            return Logged::NotARefusal;
        }
        self.note_at(connection_id, &peer.to_string(), request, response, Instant::now())
    }

    /// [`RefusalLog::note`] with the connection given by id and address, at `now`.
    pub fn note_at(
        &self,
        connection_id: u64,
        peer: &str,
        request: &RemotingCommand,
        response: &RemotingCommand,
        now: Instant,
    ) -> Logged {
        if !Self::is_refusal(response) {
            return Logged::NotARefusal;
        }
        let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        let key = (connection_id, request.code, response.code);
        if state.seen.contains(&key) {
            return Logged::AlreadyLogged;
        }
        let window_over = state.window_start.is_none_or(|start| now.duration_since(start) >= Duration::from_secs(1));
        if window_over {
            state.window_start = Some(now);
            state.lines_in_window = 0;
        }
        if state.lines_in_window >= self.lines_per_second {
            // Not remembered: the next refusal on this connection may be logged once the window
            // has room again.
            state.suppressed += 1;
            return Logged::RateLimited;
        }
        state.lines_in_window += 1;
        if state.seen.len() >= Self::REMEMBERED_MAX {
            state.seen.clear();
        }
        state.seen.insert(key);
        let suppressed = std::mem::take(&mut state.suppressed);
        drop(state);
        tracing::warn!(
            peer,
            connection = connection_id,
            request_code = request.code,
            response_code = response.code,
            reason = response.remark.as_deref().unwrap_or(""),
            suppressed_before = suppressed,
            "refused a request (logged once per connection and code)"
        );
        Logged::Written
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::RequestCode;

    fn refused() -> RemotingCommand {
        RemotingCommand::response(ResponseCode::SystemError, Some("the request header is invalid".into()))
    }

    #[test]
    fn once_per_connection_and_code() {
        let log = RefusalLog::new(100);
        let now = Instant::now();
        let send = RemotingCommand::request(RequestCode::SendMessageV2);
        let heartbeat = RemotingCommand::request(RequestCode::HeartBeat);
        assert_eq!(log.note_at(1, "10.0.0.1:1", &send, &refused(), now), Logged::Written);
        assert_eq!(log.note_at(1, "10.0.0.1:1", &send, &refused(), now), Logged::AlreadyLogged);
        assert_eq!(log.note_at(1, "10.0.0.1:1", &heartbeat, &refused(), now), Logged::Written);
        assert_eq!(log.note_at(2, "10.0.0.1:2", &send, &refused(), now), Logged::Written);
        assert_eq!(log.note_at(1, "10.0.0.1:1", &send, &RemotingCommand::success(), now), Logged::NotARefusal);
    }

    #[test]
    fn at_most_n_lines_a_second_overall() {
        let log = RefusalLog::new(3);
        let start = Instant::now();
        let send = RemotingCommand::request(RequestCode::SendMessageV2);
        let written = (0..10).filter(|c| log.note_at(*c, "p", &send, &refused(), start) == Logged::Written).count();
        assert_eq!(written, 3);
        // A rate-limited connection is not remembered: it logs once the next window opens.
        let later = start + Duration::from_secs(1);
        assert_eq!(log.note_at(9, "p", &send, &refused(), later), Logged::Written);
        assert_eq!(log.note_at(0, "p", &send, &refused(), later), Logged::AlreadyLogged);
    }
}
