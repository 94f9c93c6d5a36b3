//! Certificates for a TLS cluster on one machine: a self-signed CA and server certificates it
//! signs, as PEM files (`raftmq dev --tls`; the TLS tests make theirs with the same code, included
//! by `tests/harness/tls.rs`, so no private key is ever committed).
//!
//! Invariants:
//! - A server certificate names `localhost` and `127.0.0.1` (and whatever else it is asked to),
//!   as IP address and DNS SANs: clients check the address they dial against it.
//! - Keys are written owner-only (0600); [`ensure_dev_certs`] never rewrites existing files, so a
//!   restarted dev cluster serves the same certificates its clients already trust.
//!
//! Self-contained (rcgen, std, anyhow only) because the test harness includes it by path.

use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;
use std::path::PathBuf;

use anyhow::Context;
use anyhow::Result;
use rcgen::BasicConstraints;
use rcgen::CertificateParams;
use rcgen::DnType;
use rcgen::ExtendedKeyUsagePurpose;
use rcgen::IsCa;
use rcgen::Issuer;
use rcgen::KeyPair;
use rcgen::KeyUsagePurpose;

/// A certificate authority held in memory.
pub struct DevCa {
    issuer: Issuer<'static, KeyPair>,
    cert_pem: String,
}

/// A certificate and its key, PEM.
pub struct IssuedCert {
    /// The certificate.
    pub cert_pem: String,
    /// Its private key (PKCS#8).
    pub key_pem: String,
}

impl DevCa {
    /// A new self-signed CA named `name`.
    pub fn new(name: &str) -> Result<DevCa> {
        let mut params = CertificateParams::new(Vec::<String>::new()).context("CA parameters")?;
        params.distinguished_name.push(DnType::CommonName, name);
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
        let key = KeyPair::generate().context("CA key")?;
        let cert = params.self_signed(&key).context("self-signing the CA")?;
        Ok(DevCa { issuer: Issuer::new(params, key), cert_pem: cert.pem() })
    }

    /// The CA certificate, PEM: what clients trust (`tls.client.trustCertPath`).
    pub fn cert_pem(&self) -> &str {
        &self.cert_pem
    }

    /// A server (and client) certificate for `localhost`, `127.0.0.1` and `extra_names`, with a
    /// fresh key.
    pub fn issue(&self, common_name: &str, extra_names: &[&str]) -> Result<IssuedCert> {
        let mut names = vec!["localhost".to_owned(), "127.0.0.1".to_owned()];
        names.extend(extra_names.iter().map(|n| (*n).to_owned()));
        let mut params = CertificateParams::new(names).context("certificate parameters")?;
        params.distinguished_name.push(DnType::CommonName, common_name);
        params.key_usages = vec![KeyUsagePurpose::DigitalSignature, KeyUsagePurpose::KeyEncipherment];
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth, ExtendedKeyUsagePurpose::ClientAuth];
        let key = KeyPair::generate().context("certificate key")?;
        let cert = params.signed_by(&key, &self.issuer).context("signing the certificate")?;
        Ok(IssuedCert { cert_pem: cert.pem(), key_pem: key.serialize_pem() })
    }
}

/// The files of a TLS dev cluster.
#[derive(Debug, Clone)]
pub struct DevCertFiles {
    /// The CA certificate clients trust.
    pub ca_cert: PathBuf,
    /// The servers' certificate (every NameServer and broker of the dev cluster shares it).
    pub server_cert: PathBuf,
    /// Its key.
    pub server_key: PathBuf,
}

impl DevCertFiles {
    /// Where they live under `dir`.
    pub fn in_dir(dir: &Path) -> DevCertFiles {
        DevCertFiles {
            ca_cert: dir.join("ca.pem"),
            server_cert: dir.join("server.pem"),
            server_key: dir.join("server.key"),
        }
    }
}

/// Makes a CA and a server certificate in `dir` unless all three files exist; whether it made them.
pub fn ensure_dev_certs(dir: &Path) -> Result<(DevCertFiles, bool)> {
    let files = DevCertFiles::in_dir(dir);
    if files.ca_cert.exists() && files.server_cert.exists() && files.server_key.exists() {
        return Ok((files, false));
    }
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let ca = DevCa::new("raftmq dev CA")?;
    let server = ca.issue("raftmq dev server", &[])?;
    write_file(&files.ca_cert, ca.cert_pem(), 0o644)?;
    // The key before the certificate: a server watching the pair never sees a certificate
    // without its key.
    write_file(&files.server_key, &server.key_pem, 0o600)?;
    write_file(&files.server_cert, &server.cert_pem, 0o644)?;
    Ok((files, true))
}

/// Writes `text` to `path` with `mode`, replacing it whole (a temporary file renamed into place,
/// so a reader sees the old file or the new one).
pub fn write_file(path: &Path, text: &str, mode: u32) -> Result<()> {
    let tmp = path.with_extension("tmp");
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(mode)
        .open(&tmp)
        .with_context(|| format!("creating {}", tmp.display()))?;
    file.write_all(text.as_bytes()).with_context(|| format!("writing {}", tmp.display()))?;
    file.sync_all().with_context(|| format!("syncing {}", tmp.display()))?;
    std::fs::rename(&tmp, path).with_context(|| format!("renaming {} into place", path.display()))
}
