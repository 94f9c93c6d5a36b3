//! [`ServerTls`]: what a remoting server does with a new connection under `tls.server.mode`, as
//! RocketMQ's `NettyRemotingServer.HandshakeHandler` does: it looks at the first byte.
//!
//! ```text
//!   accept ─▶ admission slot ─▶ peek 1 byte ─┬─ 0x16 (TLS handshake record) ─▶ handshake ─▶ TLS connection
//!                                            └─ other ─┬─ permissive ─▶ plaintext connection
//!                                                      └─ enforcing  ─▶ SYSTEM_ERROR "TLS required", close
//! ```
//!
//! Invariants:
//! - Only a server with a certificate and a mode other than `disabled` peeks
//!   ([`ServerTls::from_settings`] is `None` otherwise): a plaintext-only server is unchanged, and a
//!   TLS client that reaches it sends a handshake record that is no frame, so its connection is
//!   closed as a bad frame (Java's `disabled` closes it too).
//! - The wait for the first byte is bounded by the server's idle limit, the handshake by
//!   [`TLS_HANDSHAKE_TIMEOUT_MS`]; the connection holds its admission slot meanwhile, so peers
//!   that never finish a handshake are counted and closed.
//! - An enforcing server answers each of a plaintext client's requests (frames of at most
//!   [`TLS_PLAINTEXT_REFUSAL_FRAME_MAX_BYTES`], a bounded number, within the handshake deadline)
//!   with SYSTEM_ERROR and a remark naming the mode, so the client's error says what to set, then
//!   closes; nothing of any request is processed.
//! - The certificate is a [`CertReloader`]'s: new connections get a rotated one.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use rustls::ServerConfig;
use rustls::server::WebPkiClientVerifier;
use tokio::io::AsyncReadExt;
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;
use tokio_rustls::TlsAcceptor;

use super::cert_reloader::CertReloader;
use super::stream::RemotingStream;
use super::tls_files::TlsError;
use super::tls_files::provider;
use super::tls_files::read_roots;
use crate::limits::TLS_HANDSHAKE_TIMEOUT_MS;
use crate::limits::TLS_PLAINTEXT_REFUSAL_FRAME_MAX_BYTES;
use crate::limits::TLS_PLAINTEXT_REFUSAL_REQUESTS_MAX;
use crate::protocol::RemotingCommand;
use crate::protocol::ResponseCode;
use crate::tls_settings::ClientAuth;
use crate::tls_settings::TlsMode;
use crate::tls_settings::TlsServerSettings;

/// The first byte of a TLS connection: a handshake record (`HANDSHAKE_MAGIC_CODE` in Java).
pub const TLS_HANDSHAKE_RECORD_BYTE: u8 = 0x16;

/// The remark an enforcing server answers a plaintext request with.
pub const TLS_REQUIRED_REMARK: &str = "TLS required: this server runs tls.server.mode=enforcing and refuses \
                                       plaintext connections; connect with TLS (client tls.enable=true, SDK use_tls)";

/// Why a new connection was not turned into a remoting connection.
#[derive(Debug, thiserror::Error)]
pub enum TlsRefusal {
    /// The peer closed, or said nothing within the wait.
    #[error("no first byte: {0}")]
    Silent(String),
    /// A plaintext client reached an enforcing server.
    #[error("plaintext connection refused (tls.server.mode=enforcing)")]
    Plaintext,
    /// The TLS handshake failed or took longer than [`TLS_HANDSHAKE_TIMEOUT_MS`].
    #[error("TLS handshake failed: {0}")]
    Handshake(String),
}

/// A server's TLS: its mode and acceptor.
#[derive(Clone)]
pub struct ServerTls {
    mode: TlsMode,
    acceptor: TlsAcceptor,
    reloader: Arc<CertReloader>,
}

impl std::fmt::Debug for ServerTls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServerTls").field("mode", &self.mode).field("cert", &self.reloader).finish()
    }
}

impl ServerTls {
    /// The TLS of a server with `settings`; `None` when it serves no TLS (no certificate, or
    /// `disabled`). Loads the certificate (an error stops the server from starting) and starts
    /// watching its files.
    pub fn from_settings(settings: &TlsServerSettings) -> Result<Option<ServerTls>, TlsError> {
        settings.validate().map_err(|e| TlsError::Settings(e.0))?;
        if !settings.serves_tls() {
            return Ok(None);
        }
        let (Some(cert), Some(key)) = (&settings.cert_path, &settings.key_path) else {
            return Ok(None);
        };
        let reloader = CertReloader::load(("tls.server.certPath", "tls.server.keyPath"), cert, key)?;
        let builder = ServerConfig::builder_with_provider(provider()).with_safe_default_protocol_versions()?;
        let builder = match (settings.need_client_auth, &settings.trust_cert_path) {
            (ClientAuth::None, _) | (_, None) => builder.with_no_client_auth(),
            (auth, Some(trust)) => {
                let roots = read_roots("tls.server.trustCertPath", trust)?;
                let verifier = WebPkiClientVerifier::builder_with_provider(roots, provider());
                let verifier = if auth == ClientAuth::Optional { verifier.allow_unauthenticated() } else { verifier };
                builder.with_client_cert_verifier(
                    verifier.build().map_err(|e| TlsError::Settings(format!("tls.server.trustCertPath: {e}")))?,
                )
            }
        };
        let config = builder.with_cert_resolver(reloader.clone());
        Ok(Some(ServerTls { mode: settings.mode, acceptor: TlsAcceptor::from(Arc::new(config)), reloader }))
    }

    /// TLS for an HTTP server (the admin API): always TLS, HTTP/1.1 by ALPN, no client certificate.
    /// `names` are the settings naming the two files.
    pub fn https(
        names: (&'static str, &'static str),
        cert_path: &std::path::Path,
        key_path: &std::path::Path,
    ) -> Result<ServerTls, TlsError> {
        let reloader = CertReloader::load(names, cert_path, key_path)?;
        let mut config = ServerConfig::builder_with_provider(provider())
            .with_safe_default_protocol_versions()?
            .with_no_client_auth()
            .with_cert_resolver(reloader.clone());
        config.alpn_protocols = vec![b"http/1.1".to_vec()];
        Ok(ServerTls { mode: TlsMode::Enforcing, acceptor: TlsAcceptor::from(Arc::new(config)), reloader })
    }

    /// `tls.server.mode`.
    pub fn mode(&self) -> TlsMode {
        self.mode
    }

    /// The certificate served, kept current with its files.
    pub fn cert(&self) -> &Arc<CertReloader> {
        &self.reloader
    }

    /// A TLS handshake on `stream`, bounded by [`TLS_HANDSHAKE_TIMEOUT_MS`].
    pub async fn handshake(&self, stream: TcpStream) -> Result<tokio_rustls::server::TlsStream<TcpStream>, TlsRefusal> {
        let handshake = self.acceptor.accept(stream);
        match tokio::time::timeout(Duration::from_millis(TLS_HANDSHAKE_TIMEOUT_MS), handshake).await {
            Ok(Ok(tls)) => Ok(tls),
            Ok(Err(e)) => Err(TlsRefusal::Handshake(e.to_string())),
            Err(_) => Err(TlsRefusal::Handshake(format!("not finished within {TLS_HANDSHAKE_TIMEOUT_MS} ms"))),
        }
    }

    /// Turns a new connection into a plaintext or TLS stream by its first byte (see the module
    /// header), waiting at most `first_byte_wait` for that byte.
    pub async fn accept(&self, stream: TcpStream, first_byte_wait: Duration) -> Result<RemotingStream, TlsRefusal> {
        let mut first = [0u8; 1];
        let peeked = match tokio::time::timeout(first_byte_wait, stream.peek(&mut first)).await {
            Ok(Ok(n)) => n,
            Ok(Err(e)) => return Err(TlsRefusal::Silent(e.to_string())),
            Err(_) => return Err(TlsRefusal::Silent(format!("nothing within {} s", first_byte_wait.as_secs()))),
        };
        if peeked == 0 {
            return Err(TlsRefusal::Silent("closed by the peer".to_owned()));
        }
        if first[0] == TLS_HANDSHAKE_RECORD_BYTE {
            let tls = self.handshake(stream).await?;
            return Ok(RemotingStream::Tls(Box::new(tokio_rustls::TlsStream::Server(tls))));
        }
        match self.mode {
            TlsMode::Enforcing => {
                refuse_plaintext(stream).await;
                Err(TlsRefusal::Plaintext)
            }
            TlsMode::Permissive | TlsMode::Disabled => Ok(RemotingStream::Plain(stream)),
        }
    }
}

/// Answers each request a plaintext client sends (at most [`TLS_PLAINTEXT_REFUSAL_REQUESTS_MAX`],
/// all within the handshake deadline) with [`TLS_REQUIRED_REMARK`], then closes. Every request is
/// answered, not only the first: a client may have several in flight on its new connection (a
/// route lookup beside a heartbeat), and each must learn what to set rather than see the
/// connection closed under it.
async fn refuse_plaintext(mut stream: TcpStream) {
    let answer = async {
        for _ in 0..TLS_PLAINTEXT_REFUSAL_REQUESTS_MAX {
            let len = match stream.read_u32().await {
                Ok(len) => usize::try_from(len).unwrap_or(usize::MAX),
                // The client closed after reading its answers.
                Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => break,
                Err(e) => return Err(e),
            };
            if len > TLS_PLAINTEXT_REFUSAL_FRAME_MAX_BYTES {
                break;
            }
            let mut frame = vec![0u8; len];
            stream.read_exact(&mut frame).await?;
            let Ok(request) = RemotingCommand::decode_frame(Bytes::from(frame)) else { break };
            if request.is_response() || request.is_oneway() {
                continue;
            }
            let response = RemotingCommand::response(ResponseCode::SystemError, Some(TLS_REQUIRED_REMARK.to_owned()))
                .answering(&request);
            if let Ok(bytes) = response.encode() {
                stream.write_all(&bytes).await?;
            }
        }
        stream.shutdown().await
    };
    match tokio::time::timeout(Duration::from_millis(TLS_HANDSHAKE_TIMEOUT_MS), answer).await {
        Ok(Ok(())) => {}
        Ok(Err(e)) => tracing::debug!(error = %e, "plaintext client gone before its refusal"),
        Err(_) => tracing::debug!("plaintext client still connected at the refusal deadline; closed"),
    }
}
