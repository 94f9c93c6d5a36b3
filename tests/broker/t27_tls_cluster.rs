//! Issue 32 (TLS for client remoting): the SDK with `use_tls` sends and pulls through a real
//! 3-replica group whose remoting ports and NameServer are TLS-enforcing, the replicas' own calls
//! (registration, peer calls) over TLS too; the Raft port keeps its cluster-secret signatures.
//!
//! Certificates are made at test time (harness `tls`).

use crate::harness;

use std::collections::BTreeSet;
use std::time::Duration;

use anyhow::Context;
use anyhow::Result;
use anyhow::ensure;
use harness::group::Group;
use harness::tls::TestPki;
use raftmq_client::Admin;
use raftmq_client::Producer;
use raftmq_client::PullConsumer;
use raftmq_client::SendStatus;
use raftmq_client::consumer::ConsumeFrom;
use raftmq_common::message::Message;
use raftmq_common::protocol::body::topic::TopicConfig;
use raftmq_common::tls_settings::TlsMode;

const WAIT: Duration = Duration::from_secs(60);
const TOPIC: &str = "T27_TLS_CLUSTER";
const MESSAGES: usize = 200;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn t27_the_sdk_with_use_tls_sends_and_pulls_through_a_tls_enforcing_3_node_group() -> Result<()> {
    let pki = TestPki::new()?;
    let group =
        Group::start_custom(3, |n| pki.namesrv(n, TlsMode::Enforcing), |b| pki.broker(b, TlsMode::Enforcing)).await?;
    let leader = group.wait_leader(WAIT).await?;
    for id in 1..=3 {
        ensure!(
            group.configs[&id].tls_server().serves_tls() && group.configs[&id].tls_enable,
            "replica {id} enforces TLS and calls over TLS"
        );
    }

    // The topic through the admin SDK over TLS; its route through the TLS NameServer, which the
    // replicas registered with over TLS.
    let admin = Admin::with_tls(&group.namesrv_addr, None, Some(pki.client()))?;
    let config = TopicConfig { read_queue_nums: 4, write_queue_nums: 4, ..TopicConfig::new(TOPIC) };
    admin.create_topic(&group.addr(leader), &config).await.context("create the topic over TLS")?;
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        match admin.topic_route(TOPIC).await {
            Ok(route) if route.queue_datas.iter().any(|q| q.read_queue_nums == 4) => break,
            _ if tokio::time::Instant::now() > deadline => anyhow::bail!("the topic never reached the NameServer"),
            _ => tokio::time::sleep(Duration::from_millis(50)).await,
        }
    }

    let producer = Producer::builder("t27_producer")
        .namesrv_addr(&group.namesrv_addr)
        .use_tls(true)
        .tls_trust_cert_path(pki.ca_path())
        .build()?;
    producer.start().await?;
    let mut sent = BTreeSet::new();
    for i in 0..MESSAGES {
        let body = format!("tls-{i}");
        let result = producer.send(Message::new(TOPIC, body.clone())).await.with_context(|| format!("send {i}"))?;
        ensure!(result.status == SendStatus::SendOk, "send {i}: {result:?}");
        sent.insert(body);
    }

    let consumer = PullConsumer::builder("t27_consumer")
        .namesrv_addr(&group.namesrv_addr)
        .use_tls(true)
        .tls_trust_cert_path(pki.ca_path())
        .subscribe(TOPIC, "*")
        .consume_from(ConsumeFrom::FirstOffset)
        .build()?;
    consumer.start().await?;
    let mut received = BTreeSet::new();
    let deadline = tokio::time::Instant::now() + WAIT;
    while received.len() < sent.len() {
        ensure!(tokio::time::Instant::now() < deadline, "pulled {} of {} within {WAIT:?}", received.len(), sent.len());
        for msg in consumer.poll(Duration::from_millis(500)).await? {
            received.insert(String::from_utf8_lossy(&msg.message.body).into_owned());
        }
    }
    ensure!(received == sent, "every message sent over TLS is pulled over TLS, once");

    consumer.shutdown().await;
    producer.shutdown().await;
    admin.shutdown().await;
    group.shutdown().await;
    Ok(())
}
