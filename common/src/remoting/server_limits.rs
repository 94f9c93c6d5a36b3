//! [`ServerLimits`]: what a remoting server grants one peer — connections (in all and per host),
//! response bytes queued on a connection, and idle time — with defaults from [`crate::limits`].
//! Client connections have none of these (they bound their own calls).

use std::time::Duration;

use crate::limits::SERVER_CONNECTION_IDLE_MAX_SECS;
use crate::limits::SERVER_CONNECTION_QUEUED_MAX_BYTES;
use crate::limits::SERVER_CONNECTION_READ_PAUSE_QUEUED_BYTES;
use crate::limits::SERVER_CONNECTIONS_MAX_COUNT;
use crate::limits::SERVER_CONNECTIONS_PER_HOST_MAX_COUNT;

/// Limits of a remoting server's connections.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ServerLimits {
    /// Connections held at once; more are closed at accept.
    pub connections_max_count: usize,
    /// Connections held from one address.
    pub connections_per_host_max_count: usize,
    /// Queued response bytes above which the connection stops reading requests until they drain.
    pub read_pause_queued_bytes: usize,
    /// Queued response bytes above which the connection is closed.
    pub queued_max_bytes: usize,
    /// No read, no write and no request in progress for this long closes the connection.
    pub idle_max: Duration,
}

impl Default for ServerLimits {
    fn default() -> Self {
        ServerLimits {
            connections_max_count: SERVER_CONNECTIONS_MAX_COUNT,
            connections_per_host_max_count: SERVER_CONNECTIONS_PER_HOST_MAX_COUNT,
            read_pause_queued_bytes: SERVER_CONNECTION_READ_PAUSE_QUEUED_BYTES,
            queued_max_bytes: SERVER_CONNECTION_QUEUED_MAX_BYTES,
            idle_max: Duration::from_secs(SERVER_CONNECTION_IDLE_MAX_SECS),
        }
    }
}
