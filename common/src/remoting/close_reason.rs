//! Why and when a connection closed: [`CloseReason`] (recorded once per connection, reported to
//! every caller still waiting on it) and the [`ConnectionClosed`] notice its owner's hook gets.

use std::net::SocketAddr;
use std::sync::Arc;

/// Why a connection closed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CloseReason {
    /// The peer closed the connection.
    PeerClosed,
    /// A socket error.
    Io(String),
    /// The peer sent bytes that are not a valid frame (oversized, bad length, undecodable header).
    BadFrame(String),
    /// This side closed it ([`Connection::close`], or the client was closed).
    Local,
    /// The server is shutting down.
    Shutdown,
    /// The peer let more response bytes queue than the server holds for it (it does not read).
    SlowReader(usize),
    /// Nothing read or written, and no request in progress, for this long (seconds).
    Idle(u64),
    /// A call to the peer timed out after this many ms with nothing at all read from the peer
    /// since it was sent: the connection is presumed dead (a partition that dropped its packets, a
    /// peer that stopped), and the next call connects again instead of queueing behind it.
    Unresponsive(u64),
}

impl std::fmt::Display for CloseReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CloseReason::PeerClosed => f.write_str("closed by the peer"),
            CloseReason::Io(e) => write!(f, "i/o error: {e}"),
            CloseReason::BadFrame(e) => write!(f, "bad frame: {e}"),
            CloseReason::Local => f.write_str("closed locally"),
            CloseReason::Shutdown => f.write_str("server shutdown"),
            CloseReason::SlowReader(bytes) => write!(f, "the peer does not read: {bytes} response bytes queued"),
            CloseReason::Idle(secs) => write!(f, "idle for {secs} s"),
            CloseReason::Unresponsive(ms) => write!(f, "nothing heard from the peer within a call's {ms} ms"),
        }
    }
}

/// Reported once when a connection closes.
#[derive(Debug, Clone)]
pub struct ConnectionClosed {
    /// The connection's id.
    pub connection_id: u64,
    /// The peer's address.
    pub peer_addr: SocketAddr,
    /// Why it closed.
    pub reason: CloseReason,
}

/// Called once per closed connection, on the task that noticed the close; must not block.
pub type ConnectionClosedHook = Arc<dyn Fn(&ConnectionClosed) + Send + Sync>;
