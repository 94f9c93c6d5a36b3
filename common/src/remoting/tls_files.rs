//! Certificates, keys and trust roots read from PEM files (RocketMQ's `tls.*Path` keys), with
//! errors that name the file and the key that points at it.
//!
//! Invariants:
//! - A file larger than [`TLS_PEM_FILE_MAX_BYTES`] is refused before it is read whole.
//! - A certificate and its key are paired only when the key signs for the certificate
//!   ([`certified_key`]): a rotation caught half-way (new certificate, old key) is refused, not
//!   served.
//! - The crypto provider is rustls' `ring` one, named here once ([`provider`]).

use std::io::Read;
use std::path::Path;
use std::sync::Arc;

use rustls::RootCertStore;
use rustls::crypto::CryptoProvider;
use rustls::pki_types::CertificateDer;
use rustls::pki_types::PrivateKeyDer;
use rustls::pki_types::pem::PemObject;
use rustls::sign::CertifiedKey;

use crate::limits::TLS_PEM_FILE_MAX_BYTES;

/// Why TLS material could not be loaded or a TLS configuration built.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    /// A file could not be read.
    #[error("cannot read {what} {path}: {source}")]
    Read {
        /// Which setting names the file (`tls.server.certPath`, ...).
        what: &'static str,
        /// The file.
        path: String,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// A file holds no usable PEM item of the kind expected, or is too large.
    #[error("{what} {path}: {reason}")]
    Content {
        /// Which setting names the file.
        what: &'static str,
        /// The file.
        path: String,
        /// What is wrong with it.
        reason: String,
    },
    /// The settings cannot work together.
    #[error("{0}")]
    Settings(String),
    /// rustls refused the configuration.
    #[error("TLS configuration refused: {0}")]
    Rustls(#[from] rustls::Error),
}

/// The crypto provider of every TLS configuration here: rustls' `ring` (small, built with the C
/// compiler already here, where the default `aws-lc-rs` builds a large C library). rustls 0.23.48 deprecates it for
/// lacking post-quantum key exchange: classical X25519/P-256 key exchange is what RocketMQ's Java
/// peers offer too; moving to `aws-lc-rs` is the way to hybrid post-quantum groups.
#[allow(deprecated)]
pub fn provider() -> Arc<CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

fn read_bounded(what: &'static str, path: &Path) -> Result<Vec<u8>, TlsError> {
    let shown = || path.display().to_string();
    let file = std::fs::File::open(path).map_err(|source| TlsError::Read { what, path: shown(), source })?;
    let mut bytes = Vec::new();
    file.take(TLS_PEM_FILE_MAX_BYTES + 1).read_to_end(&mut bytes).map_err(|source| TlsError::Read {
        what,
        path: shown(),
        source,
    })?;
    if bytes.len() as u64 > TLS_PEM_FILE_MAX_BYTES {
        return Err(TlsError::Content {
            what,
            path: shown(),
            reason: format!("larger than {TLS_PEM_FILE_MAX_BYTES} bytes"),
        });
    }
    Ok(bytes)
}

/// The certificates (PEM `CERTIFICATE` blocks, leaf first) of the file at `path`.
pub fn read_certs(what: &'static str, path: &Path) -> Result<Vec<CertificateDer<'static>>, TlsError> {
    let bytes = read_bounded(what, path)?;
    let content = |reason: String| TlsError::Content { what, path: path.display().to_string(), reason };
    let certs = CertificateDer::pem_slice_iter(&bytes)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| content(format!("not PEM certificates: {e}")))?;
    if certs.is_empty() {
        return Err(content("holds no PEM CERTIFICATE block".to_owned()));
    }
    Ok(certs)
}

/// The private key (PKCS#8, PKCS#1 or SEC1 PEM, unencrypted) of the file at `path`.
pub fn read_key(what: &'static str, path: &Path) -> Result<PrivateKeyDer<'static>, TlsError> {
    let bytes = read_bounded(what, path)?;
    PrivateKeyDer::from_pem_slice(&bytes).map_err(|e| TlsError::Content {
        what,
        path: path.display().to_string(),
        reason: format!("no unencrypted PEM private key: {e}"),
    })
}

/// A trust store of every certificate in the file at `path`.
pub fn read_roots(what: &'static str, path: &Path) -> Result<Arc<RootCertStore>, TlsError> {
    let mut roots = RootCertStore::empty();
    for cert in read_certs(what, path)? {
        roots.add(cert).map_err(|e| TlsError::Content {
            what,
            path: path.display().to_string(),
            reason: format!("not a usable CA certificate: {e}"),
        })?;
    }
    Ok(Arc::new(roots))
}

/// The certificate chain at `cert_path` with the key at `key_path`, checked to belong together.
pub fn certified_key(
    (cert_what, cert_path): (&'static str, &Path),
    (key_what, key_path): (&'static str, &Path),
) -> Result<Arc<CertifiedKey>, TlsError> {
    let certs = read_certs(cert_what, cert_path)?;
    let key = read_key(key_what, key_path)?;
    let signing_key = provider().key_provider.load_private_key(key).map_err(|e| TlsError::Content {
        what: key_what,
        path: key_path.display().to_string(),
        reason: format!("unsupported private key: {e}"),
    })?;
    let certified = CertifiedKey::new(certs, signing_key);
    certified.keys_match().map_err(|e| TlsError::Content {
        what: key_what,
        path: key_path.display().to_string(),
        reason: format!("does not belong to the certificate in {}: {e}", cert_path.display()),
    })?;
    Ok(Arc::new(certified))
}
