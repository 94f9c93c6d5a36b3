//! Issue 32 (certificates reloaded on change, optional admin HTTPS): a TLS-enforcing broker
//! serves a certificate rotated on disk to the next connection without a restart (checked on the
//! certificate a new handshake presents), keeps serving clients connected before, and keeps the
//! old certificate when a new file is bad; its admin API over HTTPS (`adminHttpsEnable`, the same
//! certificate files) answers `/readyz` and presents the rotated certificate too.
//!
//! Certificates are made at test time (harness `tls`); the broker finds a change by polling the
//! files (`TLS_CERT_RELOAD_POLL_MS`), so the test polls for the new certificate with a deadline.

use crate::harness;

use std::time::Duration;

use anyhow::Context;
use anyhow::Result;
use anyhow::ensure;
use harness::dev_certs::write_file;
use harness::group::Group;
use harness::tls::TestPki;
use raftmq_client::Producer;
use raftmq_client::SendStatus;
use raftmq_common::message::Message;
use raftmq_common::tls_settings::TlsMode;
use rustls::pki_types::CertificateDer;
use rustls::pki_types::pem::PemObject;

const WAIT: Duration = Duration::from_secs(30);
const TOPIC: &str = "T28_TLS_ROTATION";

/// Polls until a new connection to `addr` is presented `want`.
async fn until_presented(pki: &TestPki, addr: &str, want: &CertificateDer<'static>) -> Result<()> {
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        if pki.presented_cert(addr).await? == *want {
            return Ok(());
        }
        ensure!(tokio::time::Instant::now() < deadline, "{addr} never presented the rotated certificate");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn t28_a_rotated_certificate_is_served_to_the_next_connection_and_admin_https_answers() -> Result<()> {
    let pki = TestPki::new()?;
    let first = CertificateDer::from_pem_file(pki.cert_path())?;
    let group = Group::start_custom(
        1,
        |n| pki.namesrv(n, TlsMode::Enforcing),
        |b| {
            pki.broker(b, TlsMode::Enforcing);
            b.admin_https_enable = true;
        },
    )
    .await?;
    group.wait_leader(WAIT).await?;
    let broker = group.addr(1);
    let admin = group.admin_addr(1)?;

    // Admin HTTPS: /readyz over TLS, with the remoting certificate.
    let deadline = tokio::time::Instant::now() + WAIT;
    while pki.https_get(&admin, "/readyz").await.context("GET /readyz over HTTPS")? != 200 {
        ensure!(tokio::time::Instant::now() < deadline, "/readyz never answered 200 over HTTPS");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    ensure!(pki.presented_cert(&admin).await? == first, "admin HTTPS presents the configured certificate");
    ensure!(pki.presented_cert(&broker).await? == first, "remoting presents the configured certificate");

    // A client connected before the rotation.
    let producer =
        Producer::builder("t28_producer").namesrv_addr(&group.namesrv_addr).tls(Some(pki.client())).build()?;
    producer.start().await?;
    let send = |body: &'static str| {
        let producer = &producer;
        async move {
            let deadline = tokio::time::Instant::now() + WAIT;
            loop {
                match producer.send(Message::new(TOPIC, body)).await {
                    Ok(r) if r.status == SendStatus::SendOk => return anyhow::Ok(()),
                    Ok(r) => anyhow::bail!("{body}: {r:?}"),
                    Err(e) if tokio::time::Instant::now() > deadline => return Err(e).context(body),
                    Err(_) => tokio::time::sleep(Duration::from_millis(100)).await,
                }
            }
        }
    };
    send("before the rotation").await?;

    // Rotation on disk: the next connection (remoting and admin) gets the new certificate.
    let second = pki.rotate("server two")?;
    ensure!(second != first);
    until_presented(&pki, &broker, &second).await?;
    until_presented(&pki, &admin, &second).await?;
    ensure!(pki.https_get(&admin, "/readyz").await? == 200, "/readyz after the rotation");
    send("after the rotation, on the connection opened before").await?;
    let fresh = Producer::builder("t28_fresh").namesrv_addr(&group.namesrv_addr).tls(Some(pki.client())).build()?;
    fresh.start().await?;
    let r = fresh.send(Message::new(TOPIC, "a new client after the rotation")).await?;
    ensure!(r.status == SendStatus::SendOk, "{r:?}");

    // A bad new certificate file: logged, the previous certificate kept.
    write_file(&pki.cert_path(), "-----BEGIN CERTIFICATE-----\nbm90IGEgY2VydA==\n-----END CERTIFICATE-----\n", 0o644)?;
    // Several poll periods pass while new connections keep getting the second certificate.
    for _ in 0..20 {
        ensure!(pki.presented_cert(&broker).await? == second, "a bad file must not replace the certificate");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }

    fresh.shutdown().await;
    producer.shutdown().await;
    group.shutdown().await;
    Ok(())
}
