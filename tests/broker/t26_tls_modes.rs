//! Issue 32 (TLS for client remoting, as RocketMQ's `tls.server.mode`): a NameServer and a broker
//! in each mode, spoken to through the SDK.
//!
//! - enforcing: a producer with `use_tls` sends; one without gets an error naming the mode
//!   ("TLS required ... tls.server.mode=enforcing"), nothing of its request processed;
//! - permissive: a TLS producer and a plaintext one both send through the same ports;
//! - disabled (a certificate configured, TLS off): a TLS producer's handshake fails, a plaintext one
//!   sends.
//!
//! Certificates are made at test time (harness `tls`).

use crate::harness;

use std::time::Duration;

use anyhow::Context;
use anyhow::Result;
use anyhow::bail;
use anyhow::ensure;
use harness::group::Group;
use harness::tls::TestPki;
use raftmq_client::Producer;
use raftmq_client::SendStatus;
use raftmq_client::TlsClientSettings;
use raftmq_common::message::Message;
use raftmq_common::tls_settings::TlsMode;

const WAIT: Duration = Duration::from_secs(30);
const TOPIC: &str = "T26_TLS";

async fn group_in(mode: TlsMode, pki: &TestPki) -> Result<Group> {
    let group = Group::start_custom(1, |n| pki.namesrv(n, mode), |b| pki.broker(b, mode)).await?;
    group.wait_leader(WAIT).await?;
    Ok(group)
}

async fn producer(group: &Group, name: &str, tls: Option<TlsClientSettings>) -> Result<Producer> {
    let producer = Producer::builder(name)
        .namesrv_addr(&group.namesrv_addr)
        .tls(tls)
        .send_timeout(Duration::from_secs(5))
        .retry_times_when_send_failed(0)
        .build()?;
    producer.start().await?;
    Ok(producer)
}

/// Sends until one is SEND_OK (the topic is auto-created on the first send; its route may take a
/// moment to reach the NameServer); the last error if none is within `WAIT`.
async fn sends(producer: &Producer, body: &str) -> Result<()> {
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        match producer.send(Message::new(TOPIC, body.to_owned())).await {
            Ok(r) if r.status == SendStatus::SendOk => return Ok(()),
            Ok(r) => bail!("send answered {:?}", r.status),
            Err(e) if tokio::time::Instant::now() > deadline => return Err(e).context("no SEND_OK"),
            Err(_) => tokio::time::sleep(Duration::from_millis(100)).await,
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn t26a_enforcing_serves_tls_clients_and_tells_plaintext_ones_what_to_set() -> Result<()> {
    let pki = TestPki::new()?;
    let group = group_in(TlsMode::Enforcing, &pki).await?;
    let secure = producer(&group, "t26a_tls", Some(pki.client())).await?;
    sends(&secure, "over TLS").await?;

    let plain = producer(&group, "t26a_plain", None).await?;
    let refused = plain.send(Message::new(TOPIC, "in clear")).await;
    match refused {
        Ok(r) => bail!("a plaintext send to an enforcing cluster succeeded: {r:?}"),
        Err(e) => {
            let text = format!("{e:#} {e:?}");
            ensure!(text.contains("TLS required") && text.contains("enforcing"), "unclear error: {text}");
        }
    }
    plain.shutdown().await;
    secure.shutdown().await;
    group.shutdown().await;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn t26b_permissive_serves_tls_and_plaintext_on_the_same_ports() -> Result<()> {
    let pki = TestPki::new()?;
    let group = group_in(TlsMode::Permissive, &pki).await?;
    let secure = producer(&group, "t26b_tls", Some(pki.client())).await?;
    let plain = producer(&group, "t26b_plain", None).await?;
    for round in 0..3 {
        sends(&secure, &format!("tls {round}")).await?;
        sends(&plain, &format!("plain {round}")).await?;
    }
    // The broker's port really serves TLS (and is not plaintext to both).
    pki.presented_cert(&group.addr(1)).await.context("a TLS handshake with the broker")?;
    secure.shutdown().await;
    plain.shutdown().await;
    group.shutdown().await;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn t26c_disabled_refuses_tls_and_serves_plaintext() -> Result<()> {
    let pki = TestPki::new()?;
    let group = group_in(TlsMode::Disabled, &pki).await?;
    let plain = producer(&group, "t26c_plain", None).await?;
    sends(&plain, "in clear").await?;
    let secure = producer(&group, "t26c_tls", Some(pki.client())).await?;
    match secure.send(Message::new(TOPIC, "over TLS")).await {
        Ok(r) => bail!("a TLS send to a TLS-disabled cluster succeeded: {r:?}"),
        Err(e) => ensure!(format!("{e:#} {e:?}").contains("TLS handshake"), "unclear error: {e:#}"),
    }
    ensure!(pki.presented_cert(&group.addr(1)).await.is_err(), "the broker's port must refuse TLS");
    plain.shutdown().await;
    secure.shutdown().await;
    group.shutdown().await;
    Ok(())
}
