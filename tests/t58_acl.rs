//! Plain ACL on a real broker (`aclEnable`, RocketMQ's `plain_acl.yml`): a NameServer and a
//! one-node group in process (harness `t40_cluster`), the SDK's producer, pull consumer and admin
//! signing with `SessionCredentials`, and the CLI's `--accessKey` / `--secretKey`.
//!
//! - t58: an admin account creates the topic, others may not; every served code is checked
//!   (unsigned reads refused too); the inner account's secret is masked in the config read-out; a
//!   producer account sends to the topic it may publish and nowhere else, and may not pull; a
//!   consumer account consumes what was sent, with a pull consumer and with a push consumer; a
//!   missing key, an unknown key and a wrong secret are each refused with Java's reason; the CLI
//!   signs with the flags and with the environment, and refuses a key without its secret.

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
use raftmq_client::PushConsumer;
use raftmq_client::SessionCredentials;
use raftmq_client::consumer::ConsumeConcurrentlyContext;
use raftmq_client::consumer::ConsumeConcurrentlyStatus;
use raftmq_client::consumer::ConsumeFrom;
use raftmq_common::message::Message;
use raftmq_common::message::MessageExt;
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
      - t58-push=SUB
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

/// The status of `GET path` (a bare HTTP/1.1 request; the test needs no HTTP client crate).
async fn http_status(addr: std::net::SocketAddr, path: &str) -> Result<u16> {
    use tokio::io::AsyncReadExt;
    use tokio::io::AsyncWriteExt;
    let mut stream = tokio::net::TcpStream::connect(addr).await?;
    stream.write_all(format!("GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n").as_bytes()).await?;
    let mut raw = Vec::new();
    tokio::time::timeout(CALL_TIMEOUT, stream.read_to_end(&mut raw)).await??;
    let text = String::from_utf8_lossy(&raw);
    Ok(text.split(' ').nth(1).context("status line")?.parse()?)
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
        c.inner_access_key = Some("t58admin".into());
        c.inner_secret_key = Some("t58-admin-secret".into());
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
    // The inner account's secret is masked in the config read-out.
    let props = admin.broker_config(&addr).await?;
    ensure!(props.get("innerAccessKey").map(String::as_str) == Some("t58admin"), "{props:?}");
    ensure!(props.get("innerSecretKey").map(String::as_str) == Some("******"), "{props:?}");

    // The admin HTTP API is no way around the ACL: closed without an adminToken; probes stay open.
    let http_addr = cluster.broker(leader).and_then(|b| b.admin_addr()).context("admin address")?;
    ensure!(http_status(http_addr, "/api/v1/status").await? == 403);
    ensure!(http_status(http_addr, "/api/v1/messages/by-key?topic=T58Orders&key=k").await? == 403);
    ensure!(http_status(http_addr, "/livez").await? == 200);

    // Every served code is checked, reads included.
    let unsigned_raw = RemotingClient::new();
    for code in [RequestCode::GetBrokerRuntimeInfo, RequestCode::GetAllTopicConfig, RequestCode::QueryConsumerOffset] {
        let r = unsigned_raw.invoke(&addr, RemotingCommand::request(code), CALL_TIMEOUT).await?;
        ensure!(r.response_code() == ResponseCode::SystemError, "{code}: {r:?}");
        ensure!(r.remark.as_deref() == Some("AclException: No accessKey is configured"), "{code}: {r:?}");
    }
    unsigned_raw.close().await;

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
    ensure!(r.remark.as_deref().unwrap_or_default().contains("No default permission for topic:T58Orders"), "{r:?}");
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

    // So does a push consumer (its heartbeat names the group's retry topic, which the group covers).
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    let offsets = tempfile::tempdir()?;
    let push = PushConsumer::builder("t58-push")
        .namesrv_addr(&cluster.namesrv_addr)
        .subscribe(TOPIC, "*")
        .consume_from(ConsumeFrom::FirstOffset)
        .offset_store_dir(offsets.path())
        .credentials(creds("t58consumer", "t58-consumer-secret"))
        .listener_concurrently(move |msgs: &[MessageExt], _ctx: &mut ConsumeConcurrentlyContext| {
            for m in msgs {
                let _ = tx.send(m.msg_id());
            }
            ConsumeConcurrentlyStatus::ConsumeSuccess
        })
        .build()?;
    push.start().await?;
    let mut pushed = BTreeSet::new();
    let deadline = tokio::time::Instant::now() + WAIT;
    while pushed.len() < MESSAGES {
        match tokio::time::timeout_at(deadline, rx.recv()).await {
            Ok(Some(id)) => {
                pushed.insert(id);
            }
            _ => anyhow::bail!("the push consumer got {} of {MESSAGES}", pushed.len()),
        }
    }
    push.shutdown().await;
    ensure!(pushed == sent);

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
    let stderr = String::from_utf8_lossy(&out.stderr);
    ensure!(!out.status.success() && stderr.contains("--secretKey"), "a key needs its secret: {stderr}");

    cluster.shutdown().await.context("shutdown")
}

/// Starts a group of `n` under [`ACL`], with or without the inner account, and creates [`TOPIC`].
async fn acl_group(n: u64, inner: bool, acl_file: std::path::PathBuf) -> Result<(Cluster, Admin)> {
    let cluster = Cluster::start_with(n, move |c| {
        c.acl_enable = true;
        c.acl_file = Some(acl_file.clone());
        if inner {
            c.inner_access_key = Some("t58admin".into());
            c.inner_secret_key = Some("t58-admin-secret".into());
        }
    })
    .await?;
    let leader = cluster.wait_leader(WAIT).await?;
    let admin = Admin::with_credentials(&cluster.namesrv_addr, Some(creds("t58admin", "t58-admin-secret")))?;
    let topic = TopicConfig { read_queue_nums: 2, write_queue_nums: 2, ..TopicConfig::new(TOPIC) };
    admin.create_topic(&cluster.addr(leader), &topic).await?;
    Ok((cluster, admin))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn t58_a_group_under_acl_relays_its_clients_signatures_and_signs_its_own_calls() -> Result<()> {
    let dir = tempfile::tempdir()?;
    let acl_file = dir.path().join("plain_acl.yml");
    std::fs::write(&acl_file, ACL)?;
    let (cluster, admin) = acl_group(3, true, acl_file.clone()).await?;
    let leader = cluster.wait_leader(WAIT).await?;
    admin.update_consumer_offset(&cluster.addr(leader), GROUP, TOPIC, 0, 7).await?;

    // A follower relays QUERY_CONSUMER_OFFSET to the leader as it came: the consumer's own
    // signature passes there, and an unsigned query is refused.
    let follower = *cluster.configs.keys().find(|id| **id != leader).expect("3 nodes");
    let consumer_admin =
        Admin::with_credentials(&cluster.namesrv_addr, Some(creds("t58consumer", "t58-consumer-secret")))?;
    let offset = consumer_admin.query_consumer_offset(&cluster.addr(follower), GROUP, TOPIC, 0).await?;
    ensure!(offset == Some(7), "relayed query answered {offset:?}");
    let unsigned = Admin::new(&cluster.namesrv_addr)?;
    let e = unsigned.query_consumer_offset(&cluster.addr(follower), GROUP, TOPIC, 0).await.expect_err("unsigned");
    ensure!(e.to_string().contains("No accessKey is configured"), "{e}");
    // The producer account may not read the group's offsets.
    let producer_admin =
        Admin::with_credentials(&cluster.namesrv_addr, Some(creds("t58producer", "t58-producer-secret")))?;
    let e = producer_admin.query_consumer_offset(&cluster.addr(leader), GROUP, TOPIC, 0).await.expect_err("no SUB");
    ensure!(e.to_string().contains("No default permission for group:t58-group"), "{e}");

    // A leadership transfer polls the new leader's status with the inner account, and only an
    // admin may ask for one.
    let broker_name = cluster.configs[&leader].broker_name.clone();
    let e = consumer_admin.transfer_leader(&broker_name, Some(follower)).await.expect_err("not an admin");
    ensure!(e.to_string().contains("Need admin permission"), "{e}");
    let report = admin.transfer_leader(&broker_name, Some(follower)).await?;
    ensure!(report.leader == Some(follower), "{report:?}");
    cluster.shutdown().await?;

    // Without the inner account the same transfer cannot confirm its new leader: the peers refuse
    // the replica's own unsigned status calls (the boot warns about it).
    let (cluster, admin) = acl_group(3, false, acl_file).await?;
    let leader = cluster.wait_leader(WAIT).await?;
    let follower = *cluster.configs.keys().find(|id| **id != leader).expect("3 nodes");
    let broker_name = cluster.configs[&leader].broker_name.clone();
    let outcome = admin.transfer_leader(&broker_name, Some(follower)).await;
    let e = outcome.expect_err("a transfer confirmed without the inner account");
    // Raft moved leadership; only the confirmation through the new leader's status was refused.
    ensure!(e.to_string().contains(&format!("(leader now Some({follower}))")), "{e}");
    cluster.shutdown().await.context("shutdown")
}
