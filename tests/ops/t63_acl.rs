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
//! - t58 (three nodes): accounts edited over the wire (UPDATE_AND_CREATE_ACL_CONFIG and its family)
//!   reach every replica's own file at one version, through the leader or relayed by a follower;
//!   only a signed admin edits, with Java's validation; concurrent edits are all kept; after the
//!   leader dies the next one edits on and the old leader, back, catches up; the CLI edits and lists
//!   every replica's version; GET_BROKER_CLUSTER_ACL_CONFIG (`getAccessConfigSubCommand`, SDK and
//!   CLI) shows every replica's file in force to an admin only; a broker without `aclEnable` refuses
//!   with a remark saying why.

use crate::harness;

use std::collections::BTreeSet;
use std::time::Duration;

use anyhow::Context;
use anyhow::Result;
use anyhow::ensure;
use harness::cluster::Cluster;
use harness::cluster::WAIT;
use raftmq_client::Admin;
use raftmq_client::Producer;
use raftmq_client::PullConsumer;
use raftmq_client::PushConsumer;
use raftmq_client::SessionCredentials;
use raftmq_client::admin::PlainAccessConfig;
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
async fn accounts_send_consume_and_administer_only_what_their_acl_grants() -> Result<()> {
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
    harness::cluster::until(
        "the topic's route",
        || async { Ok(admin.topic_route(TOPIC).await.is_ok()) },
        |found| *found,
    )
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
async fn a_group_under_acl_relays_its_clients_signatures_and_signs_its_own_calls() -> Result<()> {
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
    cluster.wait_followers_live(WAIT).await?;
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
    cluster.wait_followers_live(WAIT).await?;
    let outcome = admin.transfer_leader(&broker_name, Some(follower)).await;
    let e = outcome.expect_err("a transfer confirmed without the inner account");
    // Raft moved leadership; only the confirmation through the new leader's status was refused.
    ensure!(e.to_string().contains(&format!("(leader now Some({follower}))")), "{e}");
    cluster.shutdown().await.context("shutdown")
}

/// Replica `id`'s version of the ACL file (GET_BROKER_CLUSTER_ACL_INFO), once it reaches `counter`.
async fn acl_counter_reaches(cluster: &Cluster, admin: &Admin, id: u64, counter: i64) -> Result<()> {
    let addr = cluster.addr(id);
    harness::cluster::until(
        &format!("replica {id} at ACL version {counter}"),
        || async { Ok(admin.acl_version(&addr).await?.version.counter) },
        |c| *c == counter,
    )
    .await
    .map(drop)
}

fn acl_file_of(cluster: &Cluster, id: u64) -> Result<String> {
    Ok(std::fs::read_to_string(cluster.configs[&id].acl_file_path())?)
}

fn newcomer(secret: &str) -> PlainAccessConfig {
    PlainAccessConfig {
        access_key: "t58newcomer".into(),
        secret_key: secret.into(),
        default_topic_perm: Some("DENY".into()),
        topic_perms: Some(vec![format!("{TOPIC}=PUB")]),
        ..PlainAccessConfig::default()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acl_edits_over_the_wire_reach_every_replica_and_survive_a_failover() -> Result<()> {
    // Each replica reads its own file (the default path under its store), all starting from ACL.
    let mut cluster = Cluster::start_with(3, |c| {
        c.acl_enable = true;
        c.inner_access_key = Some("t58admin".into());
        c.inner_secret_key = Some("t58-admin-secret".into());
        let path = c.acl_file_path();
        std::fs::create_dir_all(path.parent().expect("a config dir")).expect("create the config dir");
        std::fs::write(&path, ACL).expect("write the ACL file");
    })
    .await?;
    let leader = cluster.wait_leader(WAIT).await?;
    let ids: Vec<u64> = cluster.configs.keys().copied().collect();
    let follower = *ids.iter().find(|id| **id != leader).expect("3 nodes");
    let admin = Admin::with_credentials(&cluster.namesrv_addr, Some(creds("t58admin", "t58-admin-secret")))?;
    let topic = TopicConfig { read_queue_nums: 2, write_queue_nums: 2, ..TopicConfig::new(TOPIC) };
    admin.create_topic(&cluster.addr(leader), &topic).await?;
    let e = refused_send(&cluster, Some(creds("t58newcomer", "t58-newcomer-secret")), TOPIC).await?;
    ensure!(e.contains("No acl config for t58newcomer"), "{e}");

    // An admin creates an account on the leader: it works as soon as the call returns, and every
    // replica's file holds it at the same version.
    admin.update_acl_config(&cluster.addr(leader), &newcomer("t58-newcomer-secret")).await?;
    let p = producer(&cluster, Some(creds("t58newcomer", "t58-newcomer-secret")))?;
    p.start().await?;
    p.send(Message::new(TOPIC, b"from the newcomer".to_vec())).await.context("the new account sends")?;
    p.shutdown().await;
    for id in &ids {
        acl_counter_reaches(&cluster, &admin, *id, 1).await?;
        let file = acl_file_of(&cluster, *id)?;
        ensure!(file.contains("t58newcomer") && file.contains("counter: 1"), "replica {id}: {file}");
    }
    // Only an admin may edit accounts (Java lets any signed account).
    let producer_admin =
        Admin::with_credentials(&cluster.namesrv_addr, Some(creds("t58producer", "t58-producer-secret")))?;
    let e = producer_admin.update_acl_config(&cluster.addr(leader), &newcomer("t58-stolen-secret")).await;
    ensure!(e.as_ref().is_err_and(|e| e.to_string().contains("Need admin permission")), "{e:?}");
    ensure!(admin.acl_version(&cluster.addr(leader)).await?.version.counter == 1, "nothing was written");
    // Java's validation, with its failure code and without echoing the secret.
    let e = admin.update_acl_config(&cluster.addr(leader), &newcomer("123456")).await.expect_err("short secret");
    ensure!(e.response_code() == Some(ResponseCode::UPDATE_AND_CREATE_ACL_CONFIG_FAILED), "{e}");
    ensure!(e.to_string().contains("longer than 6") && !e.to_string().contains("123456"), "{e}");

    // A follower relays an edit (signature intact) to the leader: a new secret, everywhere.
    admin.update_acl_config(&cluster.addr(follower), &newcomer("t58-newcomer-secret-2")).await?;
    for id in &ids {
        acl_counter_reaches(&cluster, &admin, *id, 2).await?;
    }
    let e = refused_send(&cluster, Some(creds("t58newcomer", "t58-newcomer-secret")), TOPIC).await?;
    ensure!(e.contains("Check signature failed"), "the old secret: {e}");

    // The global white list, then a delete; a second delete of the account succeeds (a cluster-wide
    // `mqadmin -c` repeats it on every replica).
    admin.update_global_white_addrs(&cluster.addr(leader), &["10.255.255.*".to_owned()]).await?;
    admin.delete_acl_config(&cluster.addr(leader), "t58newcomer").await?;
    admin.delete_acl_config(&cluster.addr(follower), "t58newcomer").await?;
    for id in &ids {
        acl_counter_reaches(&cluster, &admin, *id, 4).await?;
        let file = acl_file_of(&cluster, *id)?;
        ensure!(file.contains("10.255.255.*") && !file.contains("t58newcomer"), "replica {id}: {file}");
    }
    let e = refused_send(&cluster, Some(creds("t58newcomer", "t58-newcomer-secret-2")), TOPIC).await?;
    ensure!(e.contains("No acl config for t58newcomer"), "{e}");

    // Concurrent edits through the leader and through a follower: none is lost, each is counted.
    let edits = (0..6).map(|i| {
        let (admin, addr) = (admin.clone(), cluster.addr(if i % 2 == 0 { leader } else { follower }));
        tokio::spawn(async move {
            let account = PlainAccessConfig { access_key: format!("t58burst{i}"), ..newcomer("t58-burst-secret") };
            admin.update_acl_config(&addr, &account).await
        })
    });
    for edit in futures::future::join_all(edits).await {
        edit??;
    }
    for id in &ids {
        acl_counter_reaches(&cluster, &admin, *id, 10).await?;
        let file = acl_file_of(&cluster, *id)?;
        ensure!((0..6).all(|i| file.contains(&format!("t58burst{i}"))), "replica {id}: {file}");
    }

    // The leader dies: the new one edits on from the group's last version, and the old leader,
    // back, catches up with the edit it missed.
    cluster.kill(leader);
    let next = cluster.wait_leader(WAIT).await?;
    ensure!(next != leader, "leadership moved");
    admin.update_acl_config(&cluster.addr(next), &newcomer("t58-newcomer-secret-3")).await?;
    for id in ids.iter().filter(|id| **id != leader) {
        acl_counter_reaches(&cluster, &admin, *id, 11).await?;
    }
    cluster.start_replica(leader).await?;
    acl_counter_reaches(&cluster, &admin, leader, 11).await?;
    let file = acl_file_of(&cluster, leader)?;
    ensure!(file.contains("t58newcomer") && file.contains("counter: 11"), "the old leader: {file}");

    // The CLI: an edit on the group by name, and every replica's version.
    let ns = cluster.namesrv_addr.clone();
    let broker_name = cluster.configs[&leader].broker_name.clone();
    let cluster_name = cluster.configs[&leader].broker_cluster_name.clone();
    let signed = ["--accessKey", "t58admin", "--secretKey", "t58-admin-secret"];
    let mut args = vec!["admin", "updateAclConfig", "-n", &ns, "-b", &broker_name, "-a", "t58cliuser"];
    args.extend(["-s", "t58-cli-secret", "-t", "T58Orders=PUB,Other=SUB", "-m", "false"]);
    args.extend(signed);
    let out = cli(&args, &[]).await?;
    ensure!(out.status.success(), "updateAclConfig: {}", String::from_utf8_lossy(&out.stderr));
    for id in &ids {
        acl_counter_reaches(&cluster, &admin, *id, 12).await?;
    }
    let mut args = vec!["admin", "clusterAclConfigVersion", "-n", &ns, "-c", &cluster_name, "--json"];
    args.extend(signed);
    let out = cli(&args, &[]).await?;
    ensure!(out.status.success(), "clusterAclConfigVersion: {}", String::from_utf8_lossy(&out.stderr));
    let rows: serde_json::Value = serde_json::from_slice(&out.stdout)?;
    let rows = rows.as_array().context("one row per replica")?;
    ensure!(rows.len() == ids.len(), "{rows:?}");
    for row in rows {
        let files = row["files"].as_object().context("files")?;
        ensure!(files.values().all(|v| v["counter"] == 12), "{row}");
    }

    // GET_BROKER_CLUSTER_ACL_CONFIG (`getAccessConfigSubCommand`): any replica shows the file in
    // force, secrets included, to an admin; anyone else is refused.
    for id in &ids {
        acl_counter_reaches(&cluster, &admin, *id, 12).await?;
        let config = admin.acl_config(&cluster.addr(*id)).await?;
        ensure!(config.global_white_addrs == ["10.255.255.*"], "replica {id}: {config:?}");
        let user = config.plain_access_configs.iter().find(|c| c.access_key == "t58cliuser");
        ensure!(
            user.is_some_and(|u| u.secret_key == "******" && u.topic_perms == ["T58Orders=PUB", "Other=SUB"]),
            "replica {id}: {config:?}"
        );
    }
    let e = producer_admin.acl_config(&cluster.addr(follower)).await.expect_err("not an admin");
    ensure!(e.to_string().contains("Need admin permission"), "{e}");
    let mut args = vec!["admin", "getAccessConfigSubCommand", "-n", &ns, "-c", &cluster_name];
    args.extend(signed);
    let out = cli(&args, &[]).await?;
    let printed = String::from_utf8_lossy(&out.stdout);
    ensure!(out.status.success(), "getAccessConfigSubCommand: {}", String::from_utf8_lossy(&out.stderr));
    ensure!(
        printed.contains("globalWhiteRemoteAddresses: [10.255.255.*]")
            && printed.contains("  accessKey         : t58cliuser")
            && printed.contains("  topicPerms        : [T58Orders=PUB, Other=SUB]")
            && !printed.contains("t58-cli-secret"),
        "{printed}"
    );
    cluster.shutdown().await?;

    // Without aclEnable the edits are refused with a remark that says why.
    let plain = Cluster::start(1).await?;
    let only = plain.wait_leader(WAIT).await?;
    let plain_admin = Admin::new(&plain.namesrv_addr)?;
    let e = plain_admin.update_acl_config(&plain.addr(only), &newcomer("t58-newcomer-secret")).await;
    ensure!(e.as_ref().is_err_and(|e| e.to_string().contains("aclEnable = false")), "{e:?}");
    ensure!(plain_admin.acl_version(&plain.addr(only)).await.is_err(), "no ACL, no version");
    let e = plain_admin.acl_config(&plain.addr(only)).await;
    ensure!(e.as_ref().is_err_and(|e| e.to_string().contains("aclEnable = false")), "{e:?}");
    plain.shutdown().await.context("shutdown")
}
