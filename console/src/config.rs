//! [`ConsoleConfig`]: what `raftmq console` (and `raftmq dev`) start the console with.
//!
//! Invariant (checked by [`ConsoleConfig::validate`]): without a token the console listens on a
//! loopback address only, as the brokers' admin API does without `adminToken`.

use std::net::SocketAddr;

use raftmq_common::limits::ADMIN_TOKEN_MIN_BYTES;

/// The console's settings.
#[derive(Debug, Clone)]
pub struct ConsoleConfig {
    /// NameServers, `ip:port;ip:port`.
    pub namesrv_addr: String,
    /// Where the console listens (port 0: an ephemeral port).
    pub listen: SocketAddr,
    /// The brokers' `adminToken`: sent to their admin API, and the console's login token. Without
    /// it the console needs no login and binds loopback only.
    pub token: Option<String>,
    /// Plain-ACL account (`accessKey`, `secretKey`) for the remoting calls, when the brokers run
    /// with `aclEnable` (an account with `admin: true`).
    pub credentials: Option<(String, String)>,
    /// The cluster secret as a key: NameServers that have one refuse unsigned writes (a topic's
    /// route deleted with the topic).
    pub cluster_key: Option<raftmq_common::protocol::cluster_signature::ClusterKey>,
}

/// A configuration the console refuses.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// Listening beyond loopback with nothing guarding the console.
    #[error("the console listens on {0} without a token: give a token (--token) or a loopback address")]
    OpenBeyondLoopback(SocketAddr),
    /// A token too short to guess-proof.
    #[error("the token has {0} bytes; at least {ADMIN_TOKEN_MIN_BYTES} are needed")]
    ShortToken(usize),
    /// No NameServer.
    #[error("no NameServer address given")]
    NoNamesrv,
}

impl ConsoleConfig {
    /// Refuses a console open to other hosts without a token.
    pub fn validate(&self) -> Result<(), ConfigError> {
        if self.namesrv_addr.trim().is_empty() {
            return Err(ConfigError::NoNamesrv);
        }
        match &self.token {
            None if !self.listen.ip().is_loopback() => Err(ConfigError::OpenBeyondLoopback(self.listen)),
            Some(t) if t.len() < ADMIN_TOKEN_MIN_BYTES => Err(ConfigError::ShortToken(t.len())),
            _ => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_token_means_loopback_only() {
        let mut c = ConsoleConfig {
            namesrv_addr: "127.0.0.1:9876".into(),
            listen: "0.0.0.0:8000".parse().unwrap(),
            token: None,
            credentials: None,
            cluster_key: None,
        };
        assert!(matches!(c.validate(), Err(ConfigError::OpenBeyondLoopback(_))));
        c.token = Some("short".into());
        assert!(matches!(c.validate(), Err(ConfigError::ShortToken(5))));
        c.token = Some("a-long-enough-token".into());
        assert!(c.validate().is_ok());
        c.token = None;
        c.listen = "127.0.0.1:0".parse().unwrap();
        assert!(c.validate().is_ok());
    }
}
