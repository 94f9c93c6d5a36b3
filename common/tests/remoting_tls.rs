//! TLS of the remoting transport, as RocketMQ's `tls.server.mode` works: a real `RemotingServer`
//! and real `RemotingClient`s (or raw sockets) on 127.0.0.1, certificates made at test time by a
//! CA of the test's own (`src/dev_certs.rs`, no key committed).
//!
//! - enforcing: a TLS client is served, a plaintext one answered SYSTEM_ERROR naming the mode,
//!   each of its pipelined requests too;
//! - permissive: both on one port; disabled (no TLS configured): a TLS client's handshake fails;
//! - a handshake that never finishes holds an admission slot until `TLS_HANDSHAKE_TIMEOUT_MS`;
//! - a certificate rotated on disk is what the next handshake presents; a bad file keeps the old;
//! - `need.client.auth=require` refuses a client without a certificate.

#[path = "../../src/dev_certs.rs"]
#[allow(dead_code)]
mod dev_certs;

use std::net::SocketAddr;
use std::path::Path;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use anyhow::Result;
use anyhow::bail;
use anyhow::ensure;
use dev_certs::DevCa;
use dev_certs::write_file;
use raftmq_common::limits::TLS_HANDSHAKE_TIMEOUT_MS;
use raftmq_common::protocol::RemotingCommand;
use raftmq_common::protocol::RequestCode;
use raftmq_common::protocol::ResponseCode;
use raftmq_common::remoting::ClientTls;
use raftmq_common::remoting::ConnectionContext;
use raftmq_common::remoting::ProcessorTable;
use raftmq_common::remoting::RemotingClient;
use raftmq_common::remoting::RemotingError;
use raftmq_common::remoting::RemotingServer;
use raftmq_common::remoting::ServerLimits;
use raftmq_common::remoting::ServerOptions;
use raftmq_common::remoting::ServerTls;
use raftmq_common::remoting::processor_fn;
use raftmq_common::remoting::tls_files;
use raftmq_common::remoting::tls_server::TLS_REQUIRED_REMARK;
use raftmq_common::tls_settings::ClientAuth;
use raftmq_common::tls_settings::TlsClientSettings;
use raftmq_common::tls_settings::TlsMode;
use raftmq_common::tls_settings::TlsServerSettings;
use rustls::pki_types::CertificateDer;
use rustls::pki_types::ServerName;
use rustls::pki_types::pem::PemObject;
use tokio::io::AsyncReadExt;
use tokio::io::AsyncWriteExt;
use tokio::net::TcpSocket;
use tokio::net::TcpStream;

/// Bounds every wait; reaching it is a failure, never a synchronisation.
const SAFETY: Duration = Duration::from_secs(60);
const RPC: Duration = Duration::from_secs(10);

async fn bounded<F: Future>(what: &str, f: F) -> Result<F::Output> {
    tokio::time::timeout(SAFETY, f).await.with_context(|| format!("{what} did not finish within {SAFETY:?}"))
}

/// A CA and a server certificate for 127.0.0.1 in a temporary directory.
struct Pki {
    ca: DevCa,
    dir: tempfile::TempDir,
}

impl Pki {
    fn new() -> Result<Pki> {
        let pki = Pki { ca: DevCa::new("remoting_tls test CA")?, dir: tempfile::tempdir()? };
        write_file(&pki.ca_path(), pki.ca.cert_pem(), 0o644)?;
        pki.rotate("server one")?;
        Ok(pki)
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    fn ca_path(&self) -> PathBuf {
        self.path("ca.pem")
    }

    /// Writes a new server certificate and key (key first); returns the certificate, DER.
    fn rotate(&self, name: &str) -> Result<CertificateDer<'static>> {
        let issued = self.ca.issue(name, &[])?;
        write_file(&self.path("server.key"), &issued.key_pem, 0o600)?;
        write_file(&self.path("server.pem"), &issued.cert_pem, 0o644)?;
        Ok(CertificateDer::from_pem_slice(issued.cert_pem.as_bytes())?)
    }

    fn server(&self, mode: TlsMode) -> TlsServerSettings {
        TlsServerSettings {
            mode,
            cert_path: Some(self.path("server.pem")),
            key_path: Some(self.path("server.key")),
            ..TlsServerSettings::default()
        }
    }

    fn client(&self) -> Result<ClientTls> {
        Ok(ClientTls::from_settings(&TlsClientSettings::trusting(self.ca_path()))?)
    }
}

fn echo_table() -> ProcessorTable {
    let mut table = ProcessorTable::new();
    let echo = processor_fn(|_ctx: ConnectionContext, request: RemotingCommand| async move {
        Some(RemotingCommand::success().with_body(request.body.clone()))
    });
    table.register(RequestCode::HeartBeat, Arc::new(echo));
    table
}

async fn server_with(tls: Option<ServerTls>, limits: ServerLimits) -> Result<RemotingServer> {
    let options = ServerOptions::default().tls(tls).limits(limits);
    Ok(RemotingServer::bind_with("127.0.0.1:0".parse()?, echo_table(), options).await?)
}

async fn heartbeat(client: &RemotingClient, addr: SocketAddr) -> Result<RemotingCommand, RemotingError> {
    client.invoke(&addr.to_string(), RemotingCommand::request(RequestCode::HeartBeat), RPC).await
}

async fn assert_served(client: &RemotingClient, addr: SocketAddr, who: &str) -> Result<()> {
    let response = heartbeat(client, addr).await.with_context(|| format!("{who}: heartbeat"))?;
    ensure!(response.response_code() == ResponseCode::Success, "{who}: {response:?}");
    Ok(())
}

fn tls_client(tls: ClientTls) -> RemotingClient {
    RemotingClient::with_tls(ProcessorTable::new(), false, None, Some(tls))
}

/// The certificate a TLS handshake with `addr` presents (trusting `ca`).
async fn presented_cert(addr: SocketAddr, ca: &Path) -> Result<CertificateDer<'static>> {
    let roots = tls_files::read_roots("ca", ca)?;
    let config = rustls::ClientConfig::builder_with_provider(tls_files::provider())
        .with_safe_default_protocol_versions()?
        .with_root_certificates(roots)
        .with_no_client_auth();
    let connector = tokio_rustls::TlsConnector::from(Arc::new(config));
    let tcp = TcpStream::connect(addr).await?;
    let tls = connector.connect(ServerName::try_from("127.0.0.1")?, tcp).await?;
    let certs = tls.get_ref().1.peer_certificates().context("no peer certificate")?;
    Ok(certs.first().context("empty chain")?.clone().into_owned())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn enforcing_serves_tls_and_answers_plaintext_with_an_error_naming_the_mode() -> Result<()> {
    let pki = Pki::new()?;
    let tls = ServerTls::from_settings(&pki.server(TlsMode::Enforcing))?.context("serves TLS")?;
    let server = server_with(Some(tls), ServerLimits::default()).await?;
    let addr = server.local_addr();

    let secure = tls_client(pki.client()?);
    assert_served(&secure, addr, "TLS client").await?;
    let plain = RemotingClient::new();
    let refused = bounded("the plaintext call", heartbeat(&plain, addr)).await?;
    match refused {
        Ok(response) => {
            ensure!(response.response_code() == ResponseCode::SystemError, "{response:?}");
            let remark = response.remark.clone().unwrap_or_default();
            ensure!(remark == TLS_REQUIRED_REMARK && remark.contains("enforcing"), "{remark}");
        }
        Err(e) => bail!("the plaintext client got no answer naming the mode: {e}"),
    }
    let listed = server.connection_count();
    ensure!(listed == 1, "only the TLS connection is served, {listed} listed");
    server.shutdown().await;
    Ok(())
}

/// A plaintext client with several requests in flight on its new connection (as a producer's
/// route lookup beside another call) gets the refusal for each one, none sees the connection
/// closed under it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn enforcing_answers_every_pipelined_plaintext_request() -> Result<()> {
    let pki = Pki::new()?;
    let tls = ServerTls::from_settings(&pki.server(TlsMode::Enforcing))?.context("serves TLS")?;
    let server = server_with(Some(tls), ServerLimits::default()).await?;
    let mut socket = TcpStream::connect(server.local_addr()).await?;
    let requests: Vec<RemotingCommand> = (0..3).map(|_| RemotingCommand::request(RequestCode::HeartBeat)).collect();
    let mut pipelined = Vec::new();
    for request in &requests {
        pipelined.extend_from_slice(&request.encode()?);
    }
    socket.write_all(&pipelined).await?;
    for request in &requests {
        let len = bounded("a refusal's length", socket.read_u32()).await??;
        let mut frame = vec![0u8; usize::try_from(len)?];
        bounded("a refusal's frame", socket.read_exact(&mut frame)).await??;
        let response = RemotingCommand::decode_frame(frame.into())?;
        ensure!(response.opaque == request.opaque, "answers in order: {response:?}");
        ensure!(response.response_code() == ResponseCode::SystemError, "{response:?}");
        ensure!(response.remark.as_deref() == Some(TLS_REQUIRED_REMARK), "{response:?}");
    }
    drop(socket);
    ensure!(server.connection_count() == 0, "the plaintext connection is never served");
    server.shutdown().await;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn permissive_serves_tls_and_plaintext_on_one_port() -> Result<()> {
    let pki = Pki::new()?;
    let tls = ServerTls::from_settings(&pki.server(TlsMode::Permissive))?.context("serves TLS")?;
    let server = server_with(Some(tls), ServerLimits::default()).await?;
    let addr = server.local_addr();
    let (secure, plain) = (tls_client(pki.client()?), RemotingClient::new());
    for round in 0..3 {
        assert_served(&secure, addr, &format!("TLS client, round {round}")).await?;
        assert_served(&plain, addr, &format!("plaintext client, round {round}")).await?;
    }
    ensure!(server.connection_count() == 2, "one connection each");
    server.shutdown().await;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn disabled_refuses_a_tls_client_and_serves_plaintext() -> Result<()> {
    let pki = Pki::new()?;
    // With a certificate configured and the mode disabled, the server serves no TLS at all.
    ensure!(ServerTls::from_settings(&pki.server(TlsMode::Disabled))?.is_none());
    let server = server_with(None, ServerLimits::default()).await?;
    let addr = server.local_addr();
    match bounded("the TLS call", heartbeat(&tls_client(pki.client()?), addr)).await? {
        Err(RemotingError::Connect { source, .. }) => {
            ensure!(source.to_string().contains("TLS handshake"), "{source}");
        }
        other => bail!("a TLS client of a plaintext server must fail its handshake, got {other:?}"),
    }
    assert_served(&RemotingClient::new(), addr, "plaintext client").await?;
    server.shutdown().await;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_checks_the_server_certificate_against_its_trust_root() -> Result<()> {
    let pki = Pki::new()?;
    let tls = ServerTls::from_settings(&pki.server(TlsMode::Enforcing))?.context("serves TLS")?;
    let server = server_with(Some(tls), ServerLimits::default()).await?;
    let addr = server.local_addr();
    // A client trusting another CA refuses the server.
    let other = Pki::new()?;
    match heartbeat(&tls_client(other.client()?), addr).await {
        Err(RemotingError::Connect { source, .. }) => ensure!(source.to_string().contains("TLS"), "{source}"),
        other => bail!("an untrusted server certificate must fail the handshake, got {other:?}"),
    }
    // Without checking (`tls.client.authServer=false`), it is served.
    let unchecked =
        ClientTls::from_settings(&TlsClientSettings { auth_server: false, ..TlsClientSettings::default() })?;
    assert_served(&tls_client(unchecked), addr, "unchecked client").await?;
    server.shutdown().await;
    Ok(())
}

#[tokio::test(start_paused = true)]
async fn a_handshake_that_never_finishes_holds_its_slot_until_the_handshake_timeout() -> Result<()> {
    let pki = Pki::new()?;
    let tls = ServerTls::from_settings(&pki.server(TlsMode::Enforcing))?.context("serves TLS")?;
    let limits = ServerLimits { connections_per_host_max_count: 1, ..ServerLimits::default() };
    let server = server_with(Some(tls), limits).await?;
    let addr = server.local_addr();
    let started = tokio::time::Instant::now();
    let connect_from = |from: &'static str| async move {
        let socket = TcpSocket::new_v4()?;
        socket.bind(format!("{from}:0").parse()?)?;
        anyhow::Ok(socket.connect(addr).await?)
    };
    // A handshake record's first bytes, then silence.
    let mut stalled = connect_from("127.0.0.2").await?;
    stalled.write_all(&[0x16, 0x03, 0x01]).await?;
    // Its slot is taken: a second connection from the same host is closed at accept.
    let mut second = connect_from("127.0.0.2").await?;
    let mut buf = [0u8; 16];
    let n = bounded("the second connection closed", second.read(&mut buf)).await?.unwrap_or(0);
    ensure!(n == 0, "the second connection from one host must be closed");
    // The stalled one is closed once the handshake deadline passed (virtual time).
    let n = bounded("the stalled handshake closed", stalled.read(&mut buf)).await?.unwrap_or(0);
    ensure!(n == 0, "no bytes to a stalled handshake");
    let waited = started.elapsed();
    ensure!(waited >= Duration::from_millis(TLS_HANDSHAKE_TIMEOUT_MS), "closed after {waited:?}");
    // The slot is free again: the next connection from that host is admitted (a plaintext
    // request is answered with the enforcing refusal, not closed at accept).
    let mut next = connect_from("127.0.0.2").await?;
    next.write_all(&RemotingCommand::request(RequestCode::HeartBeat).encode()?).await?;
    let n = bounded("an answer on the freed slot", next.read(&mut buf)).await??;
    ensure!(n > 0, "the next connection from that host is admitted");
    server.shutdown().await;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rotated_certificate_is_presented_to_the_next_connection_and_a_bad_one_is_ignored() -> Result<()> {
    let pki = Pki::new()?;
    let first = CertificateDer::from_pem_file(pki.path("server.pem"))?;
    let tls = ServerTls::from_settings(&pki.server(TlsMode::Enforcing))?.context("serves TLS")?;
    let reloader = tls.cert().clone();
    let server = server_with(Some(tls), ServerLimits::default()).await?;
    let addr = server.local_addr();
    ensure!(presented_cert(addr, &pki.ca_path()).await? == first, "the first certificate is served");

    let second = pki.rotate("server two")?;
    ensure!(second != first);
    let deadline = tokio::time::Instant::now() + SAFETY;
    loop {
        if presented_cert(addr, &pki.ca_path()).await? == second {
            break;
        }
        ensure!(tokio::time::Instant::now() < deadline, "the rotated certificate was never served");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    ensure!(reloader.reload_count() >= 1);

    // A certificate file that is not PEM: logged, the served certificate stays.
    write_file(&pki.path("server.pem"), "not a certificate\n", 0o644)?;
    ensure!(!reloader.check(), "a bad file is not loaded");
    ensure!(presented_cert(addr, &pki.ca_path()).await? == second, "the previous certificate is kept");
    server.shutdown().await;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn required_client_certificates_refuse_a_client_without_one() -> Result<()> {
    let pki = Pki::new()?;
    let settings = TlsServerSettings {
        need_client_auth: ClientAuth::Require,
        trust_cert_path: Some(pki.ca_path()),
        ..pki.server(TlsMode::Enforcing)
    };
    let server = server_with(ServerTls::from_settings(&settings)?, ServerLimits::default()).await?;
    let addr = server.local_addr();
    let anonymous = tls_client(pki.client()?);
    ensure!(heartbeat(&anonymous, addr).await.is_err(), "a client without a certificate is refused");
    let issued = pki.ca.issue("client", &[])?;
    write_file(&pki.path("client.key"), &issued.key_pem, 0o600)?;
    write_file(&pki.path("client.pem"), &issued.cert_pem, 0o644)?;
    let with_cert = ClientTls::from_settings(&TlsClientSettings {
        cert_path: Some(pki.path("client.pem")),
        key_path: Some(pki.path("client.key")),
        ..TlsClientSettings::trusting(pki.ca_path())
    })?;
    assert_served(&tls_client(with_cert), addr, "client with a certificate").await?;
    server.shutdown().await;
    Ok(())
}
