//! Plain ACL on a real broker (`aclEnable`, RocketMQ's `plain_acl.yml`): a NameServer and a
//! one-node group in process (harness `t40_cluster`), the SDK's producer, pull consumer and admin
//! signing with `SessionCredentials`, and the CLI's `--accessKey` / `--secretKey`.
//!
//! - t58: an admin account creates the topic, others may not; a producer account sends to the
//!   topic it may publish and nowhere else; a consumer account consumes what was sent; a missing
//!   key, an unknown key and a wrong secret are each refused with Java's reason; the CLI signs
//!   with the flags and with the environment.

mod ports;
mod t40_cluster;

use std::collections::BTreeSet;
use std::time::Duration;

use anyhow::Context;
use anyhow::Result;
use anyhow::ensure;
use raftmq_client::Admin;
use raftmq_client::Producer;
use raftmq_client::PullConsumer;
use raftmq_client::SessionCredentials;
use raftmq_client::consumer::ConsumeFrom;
use raftmq_common::message::Message;
use raftmq_common::protocol::RemotingCommand;
use raftmq_common::protocol::RequestCode;
use raftmq_common::protocol::ResponseCode;
use raftmq_common::protocol::body::topic::TopicConfig;
use raftmq_common::protocol::header::pull::PullMessageRequestHeader;
use raftmq_common::remoting::ProcessorTable;
use raftmq_common::remoting::RemotingClient;
use t40_cluster::Cluster;
use t40_cluster::WAIT;

const TOPIC: &str = "T58Orders";
const GROUP: &str = "t58-group";
const MESSAGES: usize = 10;
const CALL_TIMEOUT: Duration = Duration::from_secs(5);

const ACL: &str = r#"
globalWhiteRemoteAddresses:
accounts:
  - accessKey: t58admin
    secretKey: t58-admin-secret
    admin: true
  - accessKey: t58producer
    secretKey: t58-producer-secret
    defaultTopicPerm: DENY
    defaultGroupPerm: DENY
    topicPerms:
      - T58Orders=PUB
  - accessKey: t58consumer
    secretKey: t58-consumer-secret
    defaultTopicPerm: DENY
    defaultGroupPerm: DENY
    topicPerms:
      - T58Orders=SUB
    groupPerms:
      - t58-group=SUB
"#;

fn creds(ak: &str, sk: &str) -> SessionCredentials {
    SessionCredentials::new(ak, sk).expect("test credentials are valid")
}

fn producer(cluster: &Cluster, credentials: Option<SessionCredentials>) -> Result<Producer> {
    Ok(Producer::builder("t58-producers")
        .namesrv_addr(&cluster.namesrv_addr)
        .retry_times_when_send_failed(0)
        .credentials(credentials)
        .build()?)
}

/// The remark of a send refused by the broker.
async fn refused_send(cluster: &Cluster, credentials: Option<SessionCredentials>, topic: &str) -> Result<String> {
    let p = producer(cluster, credentials)?;
    p.start().await?;
    let result = p.send(Message::new(topic, b"nope".to_vec())).await;
    p.shutdown().await;
    let e = match result {
        Ok(r) => anyhow::bail!("a send to {topic} was accepted: {r:?}"),
        Err(e) => e,
    };
    ensure!(e.response_code() == Some(ResponseCode::SystemError), "{e}");
    Ok(e.remark().unwrap_or_default().to_owned())
}

async fn cli(args: &[&str], env: &[(&str, &str)]) -> Result<std::process::Output> {
    let mut cmd = tokio::process::Command::new(env!("CARGO_BIN_EXE_raftmq"));
    cmd.args(args).env_remove("RAFTMQ_ACCESS_KEY").env_remove("RAFTMQ_SECRET_KEY");
    for (k, v) in env {
        cmd.env(k, v);
    }
    Ok(cmd.output().await?)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn t58_accounts_send_consume_and_administer_only_what_their_acl_grants() -> Result<()> {
    let dir = tempfile::tempdir()?;
    let acl_file = dir.path().join("plain_acl.yml");
    std::fs::write(&acl_file, ACL)?;
    let file = acl_file.clone();
    let cluster = Cluster::start_with(1, move |c| {
        c.acl_enable = true;
        c.acl_file = Some(file.clone());
    })
    .await?;
    let leader = cluster.wait_leader(WAIT).await?;
    let addr = cluster.addr(leader);
    let topic = TopicConfig { read_queue_nums: 2, write_queue_nums: 2, ..TopicConfig::new(TOPIC) };

    // Creating a topic is an admin code: refused without a key and for a non-admin account.
    let unsigned = Admin::new(&cluster.namesrv_addr)?;
    let e = unsigned.create_topic(&addr, &topic).await.expect_err("no key");
    ensure!(e.to_string().contains("No accessKey is configured"), "{e}");
    let consumer_admin =
        Admin::with_credentials(&cluster.namesrv_addr, Some(creds("t58consumer", "t58-consumer-secret")))?;
    let e = consumer_admin.create_topic(&addr, &topic).await.expect_err("not an admin");
    ensure!(
        e.to_string().contains("Need admin permission for request code=17, but accessKey=t58consumer is not"),
        "{e}"
    );
    let admin = Admin::with_credentials(&cluster.namesrv_addr, Some(creds("t58admin", "t58-admin-secret")))?;
    admin.create_topic(&addr, &topic).await?;
    t40_cluster::until("the topic's route", || async { Ok(admin.topic_route(TOPIC).await.is_ok()) }, |found| *found)
        .await?;

    // The producer account publishes to its topic.
    let p = producer(&cluster, Some(creds("t58producer", "t58-producer-secret")))?;
    p.start().await?;
    let mut sent = BTreeSet::new();
    for i in 0..MESSAGES {
        let r = p.send(Message::new(TOPIC, format!("order-{i}").into_bytes())).await?;
        sent.insert(r.msg_id.clone());
    }
    p.shutdown().await;
    ensure!(sent.len() == MESSAGES);

    // ... and nowhere else; no key, an unknown key and a wrong secret are refused with Java's reason.
    let remark = refused_send(&cluster, Some(creds("t58producer", "t58-producer-secret")), "T58Other").await?;
    ensure!(remark.contains("No default permission for topic:T58Other"), "{remark}");
    let remark = refused_send(&cluster, None, TOPIC).await?;
    ensure!(remark.contains("No accessKey is configured"), "{remark}");
    let remark = refused_send(&cluster, Some(creds("t58stranger", "whatever-secret")), TOPIC).await?;
    ensure!(remark.contains("No acl config for t58stranger"), "{remark}");
    let remark = refused_send(&cluster, Some(creds("t58producer", "not-the-secret")), TOPIC).await?;
    ensure!(remark.contains("Check signature failed for accessKey=t58producer"), "{remark}");

    // The producer account may not pull (PUB only), checked on a raw signed PULL_MESSAGE.
    let raw = RemotingClient::with_credentials(
        ProcessorTable::new(),
        false,
        Some(std::sync::Arc::new(creds("t58producer", "t58-producer-secret"))),
    );
    let header = PullMessageRequestHeader {
        consumer_group: GROUP.into(),
        topic: TOPIC.into(),
        queue_id: 0,
        queue_offset: 0,
        max_msg_nums: 32,
        sys_flag: 0,
        commit_offset: 0,
        suspend_timeout_millis: 0,
        subscription: Some("*".into()),
        sub_version: 0,
        expression_type: None,
        bname: None,
    };
    let pull = RemotingCommand::request_with_header(RequestCode::PullMessage, &header);
    let r = raw.invoke(&addr, pull, CALL_TIMEOUT).await?;
    ensure!(r.response_code() == ResponseCode::SystemError, "{r:?}");
    ensure!(r.remark.as_deref().unwrap_or_default().contains("No permission for topic:T58Orders"), "{r:?}");
    raw.close().await;

    // The consumer account reads everything that was sent.
    let consumer = PullConsumer::builder(GROUP)
        .namesrv_addr(&cluster.namesrv_addr)
        .subscribe(TOPIC, "*")
        .consume_from(ConsumeFrom::FirstOffset)
        .credentials(creds("t58consumer", "t58-consumer-secret"))
        .build()?;
    consumer.start().await?;
    let mut received = BTreeSet::new();
    let deadline = tokio::time::Instant::now() + WAIT;
    while received.len() < MESSAGES && tokio::time::Instant::now() < deadline {
        for m in consumer.poll(Duration::from_secs(1)).await? {
            received.insert(m.msg_id());
        }
    }
    consumer.shutdown().await;
    ensure!(received == sent, "consumed {} of {MESSAGES}", received.len());

    // The CLI signs with its flags, or with the environment.
    let ns = cluster.namesrv_addr.clone();
    let out = cli(
        &["send", "-n", &ns, "-t", TOPIC, "--accessKey", "t58producer", "--secretKey", "t58-producer-secret", "cli"],
        &[],
    )
    .await?;
    let stdout = String::from_utf8_lossy(&out.stdout);
    ensure!(out.status.success() && stdout.starts_with("SEND_OK"), "{stdout}{}", String::from_utf8_lossy(&out.stderr));
    let env = [("RAFTMQ_ACCESS_KEY", "t58admin"), ("RAFTMQ_SECRET_KEY", "t58-admin-secret")];
    let out = cli(&["admin", "updateTopic", "-n", &ns, "-b", &addr, "-t", "T58FromCli"], &env).await?;
    ensure!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let out = cli(&["admin", "updateTopic", "-n", &ns, "-b", &addr, "-t", "T58Unsigned"], &[]).await?;
    let stderr = String::from_utf8_lossy(&out.stderr);
    ensure!(!out.status.success() && stderr.contains("No accessKey is configured"), "{stderr}");
    let out = cli(&["send", "-n", &ns, "-t", TOPIC, "--accessKey", "t58producer", "x"], &[]).await?;
    ensure!(!out.status.success(), "a key without its secret is refused by the CLI");

    cluster.shutdown().await.context("shutdown")
}
