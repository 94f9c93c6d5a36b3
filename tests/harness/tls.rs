//! TLS for the end-to-end tests: a CA of the test's own and a server certificate for 127.0.0.1
//! made at test time (`src/dev_certs.rs`, the code `raftmq dev --tls` uses; no key is committed),
//! configs that serve or call TLS with them, and a raw TLS client that shows the certificate a
//! server presented.

use std::path::PathBuf;
use std::sync::Arc;

use anyhow::Context;
use anyhow::Result;
use raftmq_broker::BrokerConfig;
use raftmq_common::remoting::tls_files;
use raftmq_common::tls_settings::TlsClientSettings;
use raftmq_common::tls_settings::TlsMode;
use raftmq_namesrv::NamesrvConfig;
use rustls::pki_types::CertificateDer;
use rustls::pki_types::ServerName;
use rustls::pki_types::pem::PemObject;
use tokio::io::AsyncReadExt;
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;

use super::dev_certs::DevCa;
use super::dev_certs::write_file;

/// A CA and the servers' certificate files in a temporary directory.
pub struct TestPki {
    pub ca: DevCa,
    dir: tempfile::TempDir,
}

impl TestPki {
    /// A new CA with a first server certificate (`server one`).
    pub fn new() -> Result<TestPki> {
        let pki = TestPki { ca: DevCa::new("raftmq test CA")?, dir: tempfile::tempdir()? };
        write_file(&pki.ca_path(), pki.ca.cert_pem(), 0o644)?;
        pki.rotate("server one")?;
        Ok(pki)
    }

    /// The CA certificate clients trust.
    pub fn ca_path(&self) -> PathBuf {
        self.dir.path().join("ca.pem")
    }

    /// The servers' certificate.
    pub fn cert_path(&self) -> PathBuf {
        self.dir.path().join("server.pem")
    }

    /// Its key.
    pub fn key_path(&self) -> PathBuf {
        self.dir.path().join("server.key")
    }

    /// Replaces the server certificate and key on disk (key first, each file renamed into place);
    /// the new certificate, DER.
    pub fn rotate(&self, name: &str) -> Result<CertificateDer<'static>> {
        let issued = self.ca.issue(name, &[])?;
        write_file(&self.key_path(), &issued.key_pem, 0o600)?;
        write_file(&self.cert_path(), &issued.cert_pem, 0o644)?;
        Ok(CertificateDer::from_pem_slice(issued.cert_pem.as_bytes())?)
    }

    /// Client settings trusting this CA.
    pub fn client(&self) -> TlsClientSettings {
        TlsClientSettings::trusting(self.ca_path())
    }

    /// `config` serving TLS in `mode` with this certificate; its own calls use TLS when `mode` is
    /// enforcing (the replicas call each other's remoting ports).
    pub fn broker(&self, config: &mut BrokerConfig, mode: TlsMode) {
        config.tls_server_mode = mode;
        config.tls_server_cert_path = Some(self.cert_path());
        config.tls_server_key_path = Some(self.key_path());
        if mode == TlsMode::Enforcing {
            config.tls_enable = true;
            config.tls_client_trust_cert_path = Some(self.ca_path());
        }
    }

    /// A NameServer `config` serving TLS in `mode` with this certificate.
    pub fn namesrv(&self, config: &mut NamesrvConfig, mode: TlsMode) {
        config.tls_server_mode = mode;
        config.tls_server_cert_path = Some(self.cert_path());
        config.tls_server_key_path = Some(self.key_path());
    }

    /// A TLS connection to `addr` (`127.0.0.1:port`) trusting this CA.
    pub async fn connect(&self, addr: &str) -> Result<tokio_rustls::client::TlsStream<TcpStream>> {
        let roots = tls_files::read_roots("ca", &self.ca_path())?;
        let mut config = rustls::ClientConfig::builder_with_provider(tls_files::provider())
            .with_safe_default_protocol_versions()?
            .with_root_certificates(roots)
            .with_no_client_auth();
        config.alpn_protocols = vec![b"http/1.1".to_vec()];
        let connector = tokio_rustls::TlsConnector::from(Arc::new(config));
        let tcp = TcpStream::connect(addr).await?;
        Ok(connector.connect(ServerName::try_from("127.0.0.1")?, tcp).await?)
    }

    /// The certificate the server at `addr` presents to a new connection.
    pub async fn presented_cert(&self, addr: &str) -> Result<CertificateDer<'static>> {
        let tls = self.connect(addr).await?;
        let certs = tls.get_ref().1.peer_certificates().context("no peer certificate")?;
        Ok(certs.first().context("empty chain")?.clone().into_owned())
    }

    /// `GET path` over HTTPS; the status code.
    pub async fn https_get(&self, addr: &str, path: &str) -> Result<u16> {
        let mut tls = self.connect(addr).await?;
        let request = format!("GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n");
        tls.write_all(request.as_bytes()).await?;
        let mut raw = Vec::new();
        // A server may close without TLS close_notify; what arrived before counts.
        if let Err(e) = tls.read_to_end(&mut raw).await
            && raw.is_empty()
        {
            return Err(e.into());
        }
        let text = String::from_utf8_lossy(&raw);
        Ok(text.split(' ').nth(1).context("status line")?.parse()?)
    }
}
