//! The cluster secret as broker and NameServer configs name it (`clusterSecret` or
//! `clusterSecretFile`, the same on every member), and the start-up rule around it: a node whose
//! cluster port is reachable beyond loopback needs one, unless `insecureClusterWithoutSecret`
//! says otherwise out loud.
//!
//! Invariants: a secret is [`CLUSTER_SECRET_MIN_BYTES`]..=[`CLUSTER_SECRET_MAX_BYTES`] bytes once
//! the file's trailing whitespace (a final newline) is dropped; `Debug` never shows it.

use std::net::IpAddr;
use std::path::PathBuf;

use crate::limits::CLUSTER_SECRET_MAX_BYTES;
use crate::limits::CLUSTER_SECRET_MIN_BYTES;
use crate::protocol::cluster_signature::ClusterKey;

/// Config key: the secret itself.
pub const CLUSTER_SECRET_KEY: &str = "clusterSecret";
/// Config key: a file holding the secret (preferred: the secret stays out of the config).
pub const CLUSTER_SECRET_FILE_KEY: &str = "clusterSecretFile";
/// Config key: start without a secret although a cluster port is reachable beyond loopback.
pub const INSECURE_KEY: &str = "insecureClusterWithoutSecret";

/// A cluster secret.
#[derive(Clone, PartialEq, Eq)]
pub struct ClusterSecret(Vec<u8>);

impl std::fmt::Debug for ClusterSecret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ClusterSecret(***)")
    }
}

/// Why the cluster secret could not be taken.
#[derive(Debug, thiserror::Error)]
pub enum ClusterSecretError {
    /// Both keys are set.
    #[error("set either {CLUSTER_SECRET_KEY} or {CLUSTER_SECRET_FILE_KEY}, not both")]
    Both,
    /// The file could not be read.
    #[error("cannot read {CLUSTER_SECRET_FILE_KEY} {path}: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// Too short or too long.
    #[error(
        "the cluster secret has {len} bytes; it needs {CLUSTER_SECRET_MIN_BYTES} to {CLUSTER_SECRET_MAX_BYTES} \
         (e.g. `openssl rand -hex 32`)"
    )]
    Length {
        /// Its length.
        len: usize,
    },
    /// A cluster port is reachable beyond loopback and there is no secret.
    #[error(
        "{what} {addr} is not a loopback address, and no cluster secret is set: set {CLUSTER_SECRET_FILE_KEY} \
         (a file holding e.g. `openssl rand -hex 32`) or {CLUSTER_SECRET_KEY}, the same on every broker and \
         NameServer; or {INSECURE_KEY}=true to run unauthenticated on a trusted test network"
    )]
    Required {
        /// Which address (`raftAddr`, `bindAddress`, `namesrvAddr`).
        what: &'static str,
        /// The address.
        addr: String,
    },
}

impl ClusterSecret {
    /// A secret of these bytes, checked for length.
    pub fn new(bytes: Vec<u8>) -> Result<Self, ClusterSecretError> {
        if !(CLUSTER_SECRET_MIN_BYTES..=CLUSTER_SECRET_MAX_BYTES).contains(&bytes.len()) {
            return Err(ClusterSecretError::Length { len: bytes.len() });
        }
        Ok(ClusterSecret(bytes))
    }

    /// The secret a config names: `secret` itself or the contents of `file` (trailing whitespace
    /// dropped); neither set is `None`.
    pub fn from_config(secret: &str, file: &str) -> Result<Option<Self>, ClusterSecretError> {
        match (secret.is_empty(), file.trim().is_empty()) {
            (true, true) => Ok(None),
            (false, false) => Err(ClusterSecretError::Both),
            (false, true) => Self::new(secret.as_bytes().to_vec()).map(Some),
            (true, false) => {
                let path = PathBuf::from(file.trim());
                let mut bytes = std::fs::read(&path).map_err(|source| ClusterSecretError::Read { path, source })?;
                while bytes.last().is_some_and(u8::is_ascii_whitespace) {
                    bytes.pop();
                }
                Self::new(bytes).map(Some)
            }
        }
    }

    /// The HMAC key of this secret.
    pub fn key(&self) -> ClusterKey {
        ClusterKey::new(&self.0)
    }
}

/// Whether `host` (an IP, `localhost`, or `host:port`) only reaches this machine.
pub fn is_loopback(addr: &str) -> bool {
    let addr = addr.trim();
    if let Ok(ip) = addr.parse::<IpAddr>() {
        return ip.is_loopback();
    }
    if let Ok(sa) = addr.parse::<std::net::SocketAddr>() {
        return sa.ip().is_loopback();
    }
    let host = match addr.rsplit_once(':') {
        Some((h, port)) if !port.is_empty() && port.bytes().all(|b| b.is_ascii_digit()) => h,
        _ => addr,
    };
    host.eq_ignore_ascii_case("localhost")
}

/// The start-up rule: every address in `addrs` (what, address) is loopback, or there is a secret,
/// or the insecure opt-out is on.
pub fn require_secret<'a>(
    secret: Option<&ClusterSecret>,
    insecure: bool,
    addrs: impl IntoIterator<Item = (&'static str, &'a str)>,
) -> Result<(), ClusterSecretError> {
    if secret.is_some() || insecure {
        return Ok(());
    }
    match addrs.into_iter().find(|(_, a)| !is_loopback(a)) {
        Some((what, addr)) => Err(ClusterSecretError::Required { what, addr: addr.to_owned() }),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_addresses() {
        for a in ["127.0.0.1", "127.0.0.1:9876", "localhost:1", "LOCALHOST", "::1", "[::1]:40911", "127.8.9.10:1"] {
            assert!(is_loopback(a), "{a}");
        }
        for a in ["0.0.0.0", "0.0.0.0:9876", "10.0.0.1:10911", "::", "[::]:1", "broker-1:40911", "", "example.com"] {
            assert!(!is_loopback(a), "{a}");
        }
    }

    #[test]
    fn secrets_from_value_or_file() -> anyhow::Result<()> {
        assert!(ClusterSecret::from_config("", "")?.is_none());
        assert!(matches!(ClusterSecret::from_config("short", ""), Err(ClusterSecretError::Length { len: 5 })));
        let dir = tempfile::tempdir()?;
        let file = dir.path().join("cluster.secret");
        std::fs::write(&file, "0123456789abcdef0123456789abcdef\n")?;
        let from_file = ClusterSecret::from_config("", file.to_str().expect("utf-8"))?;
        let from_value = ClusterSecret::from_config("0123456789abcdef0123456789abcdef", "")?;
        assert_eq!(from_file, from_value);
        assert!(from_file.is_some());
        assert!(matches!(ClusterSecret::from_config("x", "y"), Err(ClusterSecretError::Both)));
        assert!(matches!(
            ClusterSecret::from_config("", "/nonexistent/cluster.secret"),
            Err(ClusterSecretError::Read { .. })
        ));
        assert_eq!(format!("{from_value:?}"), "Some(ClusterSecret(***))");
        Ok(())
    }

    #[test]
    fn a_reachable_port_needs_a_secret_or_the_opt_out() -> anyhow::Result<()> {
        let secret = ClusterSecret::new(b"0123456789abcdef".to_vec())?;
        let open = [("raftAddr", "127.0.0.1:40911"), ("namesrvAddr", "10.0.0.9:9876")];
        let e = require_secret(None, false, open).expect_err("refused").to_string();
        assert!(e.contains("namesrvAddr 10.0.0.9:9876") && e.contains(CLUSTER_SECRET_FILE_KEY), "{e}");
        require_secret(Some(&secret), false, open)?;
        require_secret(None, true, open)?;
        require_secret(None, false, [("bindAddress", "127.0.0.1")])?;
        Ok(())
    }
}
