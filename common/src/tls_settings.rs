//! TLS settings of client remoting as RocketMQ names them (`TlsSystemConfig`): the server's mode
//! (`tls.server.mode`: disabled, permissive, enforcing), its certificate and key, the client side
//! (`tls.enable`, `tls.client.*`). Pure data read from config files; `remoting::tls_server` and
//! `remoting::tls_client` turn it into rustls configurations.
//!
//! Invariants after [`TlsServerSettings::validate`] / [`TlsClientSettings::validate`]:
//! - a certificate path comes with its key path;
//! - `enforcing` has a certificate (a server that could serve no one is refused at start);
//! - client authentication other than `none` has a trust root to check clients against;
//! - a client that verifies the server (`tls.client.authServer`, default true) has a trust root.

use std::path::PathBuf;

use serde::Deserialize;
use serde::Serialize;

/// `tls.server.mode` (Java's `TlsMode`): what a server does with the first byte of a connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum TlsMode {
    /// Plaintext only: a TLS handshake is refused (the connection is closed).
    Disabled,
    /// Both on one port: a first byte 0x16 (a TLS handshake record) starts TLS, any other is
    /// plaintext. RocketMQ's default; without a certificate it serves plaintext only.
    #[default]
    Permissive,
    /// TLS only: a plaintext client is answered with an error naming the mode, then closed.
    Enforcing,
}

impl TlsMode {
    /// The name as the config key takes it.
    pub fn name(self) -> &'static str {
        match self {
            TlsMode::Disabled => "disabled",
            TlsMode::Permissive => "permissive",
            TlsMode::Enforcing => "enforcing",
        }
    }
}

/// `tls.server.need.client.auth` (Netty's `ClientAuth`): whether clients present certificates.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ClientAuth {
    /// No client certificate is asked for.
    #[default]
    None,
    /// A client certificate is asked for and checked when given; a client without one is served.
    Optional,
    /// Every client must present a certificate signed by `tls.server.trustCertPath` (mutual TLS).
    Require,
}

/// Why TLS settings are refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct TlsSettingsError(pub String);

/// A server's TLS settings (broker `listenPort`, NameServer).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TlsServerSettings {
    /// `tls.server.mode`.
    pub mode: TlsMode,
    /// `tls.server.certPath`: the certificate chain, PEM, leaf first. Re-read when it changes.
    pub cert_path: Option<PathBuf>,
    /// `tls.server.keyPath`: the private key, PEM (PKCS#8, PKCS#1 or SEC1), unencrypted.
    pub key_path: Option<PathBuf>,
    /// `tls.server.trustCertPath`: CA certificates client certificates are checked against.
    pub trust_cert_path: Option<PathBuf>,
    /// `tls.server.need.client.auth`.
    pub need_client_auth: ClientAuth,
}

impl TlsServerSettings {
    /// Whether the server serves TLS at all: a certificate is configured and the mode is not
    /// `disabled`.
    pub fn serves_tls(&self) -> bool {
        self.mode != TlsMode::Disabled && self.cert_path.is_some()
    }

    /// Checks the invariants of the module header.
    pub fn validate(&self) -> Result<(), TlsSettingsError> {
        match (&self.cert_path, &self.key_path) {
            (Some(_), None) => return Err(err("tls.server.certPath is set without tls.server.keyPath")),
            (None, Some(_)) => return Err(err("tls.server.keyPath is set without tls.server.certPath")),
            _ => {}
        }
        if self.mode == TlsMode::Enforcing && self.cert_path.is_none() {
            return Err(err(
                "tls.server.mode=enforcing needs a certificate: set tls.server.certPath and tls.server.keyPath",
            ));
        }
        if self.need_client_auth != ClientAuth::None && self.trust_cert_path.is_none() {
            return Err(err(
                "tls.server.need.client.auth=optional|require needs tls.server.trustCertPath (the CA client \
                 certificates are checked against)",
            ));
        }
        Ok(())
    }
}

/// A client's TLS settings (the broker's own calls with `tls.enable`, the SDK's `use_tls`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TlsClientSettings {
    /// `tls.client.trustCertPath`: CA certificates the server's certificate is checked against.
    pub trust_cert_path: Option<PathBuf>,
    /// `tls.client.certPath`: a client certificate chain for servers that ask for one.
    pub cert_path: Option<PathBuf>,
    /// `tls.client.keyPath`: its key.
    pub key_path: Option<PathBuf>,
    /// `tls.client.authServer`: check the server's certificate and name (default true; Java's
    /// default false trusts any server, which a man in the middle can be).
    pub auth_server: bool,
}

impl Default for TlsClientSettings {
    fn default() -> Self {
        TlsClientSettings { trust_cert_path: None, cert_path: None, key_path: None, auth_server: true }
    }
}

impl TlsClientSettings {
    /// Settings that check the server against the CA certificates in `trust_cert_path`.
    pub fn trusting(trust_cert_path: impl Into<PathBuf>) -> Self {
        TlsClientSettings { trust_cert_path: Some(trust_cert_path.into()), ..TlsClientSettings::default() }
    }

    /// Checks the invariants of the module header.
    pub fn validate(&self) -> Result<(), TlsSettingsError> {
        match (&self.cert_path, &self.key_path) {
            (Some(_), None) => return Err(err("tls.client.certPath is set without tls.client.keyPath")),
            (None, Some(_)) => return Err(err("tls.client.keyPath is set without tls.client.certPath")),
            _ => {}
        }
        if self.auth_server && self.trust_cert_path.is_none() {
            return Err(err(
                "TLS to servers needs tls.client.trustCertPath (the CA that signed the servers' certificates); \
                 tls.client.authServer=false skips the check (test networks only)",
            ));
        }
        Ok(())
    }
}

fn err(message: &str) -> TlsSettingsError {
    TlsSettingsError(message.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn modes_read_as_rocketmq_writes_them() {
        #[derive(Deserialize)]
        struct M {
            m: TlsMode,
            a: ClientAuth,
        }
        let m: M = toml::from_str("m = \"enforcing\"\na = \"require\"").expect("parse");
        assert_eq!((m.m, m.a), (TlsMode::Enforcing, ClientAuth::Require));
        assert!(toml::from_str::<M>("m = \"strict\"\na = \"none\"").is_err());
        assert_eq!(TlsMode::default(), TlsMode::Permissive);
    }

    #[test]
    fn settings_that_cannot_work_are_refused_by_name() {
        let mut s = TlsServerSettings { mode: TlsMode::Enforcing, ..TlsServerSettings::default() };
        assert!(s.validate().unwrap_err().0.contains("tls.server.certPath"));
        s.cert_path = Some("c.pem".into());
        assert!(s.validate().unwrap_err().0.contains("tls.server.keyPath"));
        s.key_path = Some("k.pem".into());
        assert!(s.validate().is_ok() && s.serves_tls());
        s.need_client_auth = ClientAuth::Require;
        assert!(s.validate().unwrap_err().0.contains("trustCertPath"));
        let permissive = TlsServerSettings::default();
        assert!(permissive.validate().is_ok() && !permissive.serves_tls());

        let c = TlsClientSettings::default();
        assert!(c.validate().unwrap_err().0.contains("tls.client.trustCertPath"));
        assert!(TlsClientSettings { auth_server: false, ..c }.validate().is_ok());
        assert!(TlsClientSettings::trusting("ca.pem").validate().is_ok());
    }
}
