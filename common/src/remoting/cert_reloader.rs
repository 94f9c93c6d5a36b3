//! [`CertReloader`]: a TLS server's certificate and key, re-read when their files change, so a
//! rotated certificate is served to the next connection without a restart (Java's broker watches
//! the same files with its `FileWatchService`).
//!
//! Invariants:
//! - Every handshake gets the pair loaded last ([`rustls::server::ResolvesServerCert`]); a
//!   connection keeps the certificate it was opened with.
//! - A change is noticed by the files' modification time and length, polled every
//!   [`TLS_CERT_RELOAD_POLL_MS`]. A new pair that does not load (unreadable, not PEM, a key that
//!   does not match the certificate) is logged once and the old pair kept; it is tried again when
//!   either file changes again (a rotation that writes the certificate, then the key, succeeds at
//!   the second change).
//! - The watch task holds the reloader weakly: it ends once the server that owns it is gone.

use std::path::Path;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::Mutex;
use std::sync::RwLock;
use std::sync::Weak;
use std::sync::atomic::AtomicU64;
use std::sync::atomic::Ordering;
use std::time::Duration;
use std::time::SystemTime;

use rustls::server::ClientHello;
use rustls::server::ResolvesServerCert;
use rustls::sign::CertifiedKey;

use super::tls_files::TlsError;
use super::tls_files::certified_key;
use crate::limits::TLS_CERT_RELOAD_POLL_MS;

/// What tells a changed file from an unchanged one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct FileStamp {
    modified: Option<SystemTime>,
    len: u64,
}

fn stamp(path: &Path) -> Option<FileStamp> {
    let meta = std::fs::metadata(path).ok()?;
    Some(FileStamp { modified: meta.modified().ok(), len: meta.len() })
}

/// A certificate and key pair kept current with its files.
pub struct CertReloader {
    /// The setting names of the two files, for messages.
    names: (&'static str, &'static str),
    cert_path: PathBuf,
    key_path: PathBuf,
    current: RwLock<Arc<CertifiedKey>>,
    /// The stamps of the files when they were last read (whether or not they loaded).
    seen: Mutex<(Option<FileStamp>, Option<FileStamp>)>,
    /// Successful reloads since start.
    reloads: AtomicU64,
}

impl std::fmt::Debug for CertReloader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CertReloader")
            .field("cert_path", &self.cert_path)
            .field("key_path", &self.key_path)
            .field("reloads", &self.reloads.load(Ordering::Relaxed))
            .finish()
    }
}

impl CertReloader {
    /// Loads the pair (an error if it does not load: a server does not start without one) and,
    /// inside a tokio runtime, starts watching the files. `names` are the settings naming the
    /// files (`("tls.server.certPath", "tls.server.keyPath")`).
    pub fn load(names: (&'static str, &'static str), cert_path: &Path, key_path: &Path) -> Result<Arc<Self>, TlsError> {
        let stamps = (stamp(cert_path), stamp(key_path));
        let pair = certified_key((names.0, cert_path), (names.1, key_path))?;
        let reloader = Arc::new(CertReloader {
            names,
            cert_path: cert_path.to_owned(),
            key_path: key_path.to_owned(),
            current: RwLock::new(pair),
            seen: Mutex::new(stamps),
            reloads: AtomicU64::new(0),
        });
        if tokio::runtime::Handle::try_current().is_ok() {
            tokio::spawn(watch(Arc::downgrade(&reloader)));
        }
        Ok(reloader)
    }

    /// The pair served to new connections.
    pub fn current(&self) -> Arc<CertifiedKey> {
        self.current.read().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// Successful reloads since start.
    pub fn reload_count(&self) -> u64 {
        self.reloads.load(Ordering::Relaxed)
    }

    /// Looks at the files once; reloads the pair when either changed. True when a new pair is
    /// now served.
    pub fn check(&self) -> bool {
        let now = (stamp(&self.cert_path), stamp(&self.key_path));
        {
            let mut seen = self.seen.lock().unwrap_or_else(|p| p.into_inner());
            if *seen == now {
                return false;
            }
            *seen = now;
        }
        match certified_key((self.names.0, &self.cert_path), (self.names.1, &self.key_path)) {
            Ok(pair) => {
                *self.current.write().unwrap_or_else(|p| p.into_inner()) = pair;
                self.reloads.fetch_add(1, Ordering::Relaxed);
                tracing::info!(cert = %self.cert_path.display(), key = %self.key_path.display(),
                    "TLS certificate reloaded; new connections get it");
                true
            }
            Err(e) => {
                tracing::warn!(error = %e, "TLS certificate files changed but do not load; the previous certificate is kept");
                false
            }
        }
    }
}

impl ResolvesServerCert for CertReloader {
    fn resolve(&self, _client_hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        Some(self.current())
    }
}

async fn watch(reloader: Weak<CertReloader>) {
    let mut tick = tokio::time::interval(Duration::from_millis(TLS_CERT_RELOAD_POLL_MS));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        let Some(reloader) = reloader.upgrade() else { return };
        reloader.check();
    }
}
