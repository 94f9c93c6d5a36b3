//! [`ClientTls`]: a remoting client's TLS (`tls.enable` on a broker's own calls, the SDK's
//! `use_tls`), as Java's `NettyRemotingClient` with `useTLS`: every connection it opens starts
//! with a TLS handshake.
//!
//! Invariants:
//! - With `tls.client.authServer` (the default) the server's certificate must chain to
//!   `tls.client.trustCertPath` and name the host dialled (a DNS name, or an IP address SAN when
//!   the address is an IP, as broker addresses usually are).
//! - Without it any certificate is taken (Java's default, `InsecureTrustManagerFactory`): the
//!   traffic is encrypted but a man in the middle is not detected; the handshake's signatures are
//!   still checked. Test networks only.
//! - A handshake is bounded by the caller's connect deadline; a failure names the address and
//!   the likely cause.

use std::net::IpAddr;
use std::sync::Arc;

use rustls::ClientConfig;
use rustls::DigitallySignedStruct;
use rustls::SignatureScheme;
use rustls::client::danger::HandshakeSignatureValid;
use rustls::client::danger::ServerCertVerified;
use rustls::client::danger::ServerCertVerifier;
use rustls::crypto::CryptoProvider;
use rustls::pki_types::CertificateDer;
use rustls::pki_types::ServerName;
use rustls::pki_types::UnixTime;
use tokio::net::TcpStream;
use tokio_rustls::TlsConnector;

use super::stream::RemotingStream;
use super::tls_files::TlsError;
use super::tls_files::certified_key;
use super::tls_files::provider;
use super::tls_files::read_certs;
use super::tls_files::read_key;
use super::tls_files::read_roots;
use crate::tls_settings::TlsClientSettings;

/// A client's TLS connector.
#[derive(Clone)]
pub struct ClientTls {
    connector: TlsConnector,
}

impl std::fmt::Debug for ClientTls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClientTls").finish_non_exhaustive()
    }
}

impl ClientTls {
    /// The connector of `settings` (trust roots and the client certificate read now).
    pub fn from_settings(settings: &TlsClientSettings) -> Result<ClientTls, TlsError> {
        settings.validate().map_err(|e| TlsError::Settings(e.0))?;
        let builder = ClientConfig::builder_with_provider(provider()).with_safe_default_protocol_versions()?;
        let builder = match (&settings.trust_cert_path, settings.auth_server) {
            (Some(trust), true) => builder.with_root_certificates(read_roots("tls.client.trustCertPath", trust)?),
            _ => builder.dangerous().with_custom_certificate_verifier(Arc::new(AnyServerCert(provider()))),
        };
        let config = match (&settings.cert_path, &settings.key_path) {
            (Some(cert), Some(key)) => {
                // Read and paired as a server's are, so a mismatched key is named at start.
                certified_key(("tls.client.certPath", cert), ("tls.client.keyPath", key))?;
                builder.with_client_auth_cert(
                    read_certs("tls.client.certPath", cert)?,
                    read_key("tls.client.keyPath", key)?,
                )?
            }
            _ => builder.with_no_client_auth(),
        };
        Ok(ClientTls { connector: TlsConnector::from(Arc::new(config)) })
    }

    /// A TLS handshake with the server at `addr` ("host:port") over `stream`.
    pub async fn connect(&self, addr: &str, stream: TcpStream) -> std::io::Result<RemotingStream> {
        let name = server_name(addr)?;
        let tls = self.connector.connect(name, stream).await.map_err(|e| {
            std::io::Error::new(
                e.kind(),
                format!(
                    "TLS handshake with {addr} failed: {e} (does the server serve TLS, tls.server.mode \
                     permissive or enforcing with a certificate, and does its certificate name {addr}?)"
                ),
            )
        })?;
        Ok(RemotingStream::Tls(Box::new(tokio_rustls::TlsStream::Client(tls))))
    }
}

/// The name a server's certificate must carry: the host part of `addr` (`[v6]:port` too).
fn server_name(addr: &str) -> std::io::Result<ServerName<'static>> {
    let host = addr.rsplit_once(':').map_or(addr, |(host, _)| host);
    let host = host.trim_start_matches('[').trim_end_matches(']');
    if let Ok(ip) = host.parse::<IpAddr>() {
        return Ok(ServerName::IpAddress(ip.into()));
    }
    ServerName::try_from(host.to_owned()).map_err(|e| {
        std::io::Error::new(std::io::ErrorKind::InvalidInput, format!("{addr}: not a host name for TLS: {e}"))
    })
}

/// `tls.client.authServer=false`: any server certificate, signatures still checked.
#[derive(Debug)]
struct AnyServerCert(Arc<CryptoProvider>);

impl ServerCertVerifier for AnyServerCert {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(message, cert, dss, &self.0.signature_verification_algorithms)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(message, cert, dss, &self.0.signature_verification_algorithms)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_server_name_is_the_host_dialled() {
        assert!(matches!(server_name("127.0.0.1:10911"), Ok(ServerName::IpAddress(_))));
        assert!(matches!(server_name("[::1]:10911"), Ok(ServerName::IpAddress(_))));
        assert!(matches!(server_name("broker-a.example:10911"), Ok(ServerName::DnsName(_))));
        assert!(server_name("bad host:1").is_err());
    }
}
