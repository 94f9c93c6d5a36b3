//! t83: the plain ACL (`aclEnable`) for RocketMQ 5 gRPC clients, on a 3-replica group serving gRPC on
//! every replica. The official Rust client (`rocketmq` 5.0.0), given an access key and secret, signs
//! every call (`authorization: MQv2-HMAC-SHA1 …` over `x-mq-date-time`), as Java's proxy checks it.
//!
//! - A producer account sends through a follower's port: the follower admits the call, signs the
//!   SEND_MESSAGE it becomes as that account, and the leader checks that signature after the relay.
//!   A consumer account receives every message (POP) and acks it. Both start (QueryRoute, the
//!   Telemetry `Settings`) only as what their accounts allow.
//! - Refused with gRPC PERMISSION_DENIED and Java's reason, nothing stored: a wrong secret, an
//!   unknown key, no credentials, a send to a topic the account may not publish (also its own topic
//!   in a namespace: the name is joined before the check), a receive and an
//!   offset read by an account without SUB, a Telemetry `Settings` publishing a topic the account
//!   may not (the trace topic beside it notwithstanding); a client with a wrong secret never sends.
//! - Without `aclEnable` credentials are ignored (t80, t81, t82).
//!
//! Waits poll with a deadline; nothing sleeps to synchronise.

use crate::group;

use std::collections::BTreeMap;
use std::collections::BTreeSet;
use std::time::Duration;
use std::time::Instant;

use anyhow::Context;
use anyhow::Result;
use anyhow::bail;
use anyhow::ensure;
use futures::StreamExt;
use group::Group;
use group::drain_queue;
use raftmq_client::Admin;
use raftmq_client::SessionCredentials;
use raftmq_common::message::validate::RMQ_SYS_TRACE_TOPIC;
use raftmq_common::protocol::body::subscription_group::SubscriptionGroupConfig;
use raftmq_common::protocol::body::topic::TopicConfig;
use raftmq_common::remoting::ProcessorTable;
use raftmq_common::remoting::RemotingClient;
use raftmq_grpc::GrpcServer;
use raftmq_grpc::pb;
use raftmq_grpc::pb::messaging_service_client::MessagingServiceClient;
use raftmq_grpc::pb::messaging_service_server::MessagingService;
use raftmq_grpc::service::Messaging;
use rocketmq::Producer;
use rocketmq::SimpleConsumer;
use rocketmq::conf::ClientOption;
use rocketmq::conf::ProducerOption;
use rocketmq::conf::SimpleConsumerOption;
use rocketmq::model::common::FilterExpression;
use rocketmq::model::common::FilterType;
use rocketmq::model::message::MessageBuilder;
use tokio_util::sync::CancellationToken;
use tonic::transport::Endpoint;

const TOPIC: &str = "GrpcAclOrders";
const OTHER_TOPIC: &str = "GrpcAclPayments";
const GROUP: &str = "grpc-acl-readers";
const QUEUES: i32 = 4;
const MESSAGES: usize = 8;
const WAIT: Duration = Duration::from_secs(60);
const INVISIBLE: Duration = Duration::from_secs(30);

const ACL: &str = r#"
globalWhiteRemoteAddresses:
accounts:
  - accessKey: t83admin
    secretKey: t83-admin-secret
    admin: true
  - accessKey: t83producer
    secretKey: t83-producer-secret
    defaultTopicPerm: DENY
    defaultGroupPerm: DENY
    topicPerms:
      - GrpcAclOrders=PUB
  - accessKey: t83consumer
    secretKey: t83-consumer-secret
    defaultTopicPerm: DENY
    defaultGroupPerm: DENY
    topicPerms:
      - GrpcAclOrders=SUB
    groupPerms:
      - grpc-acl-readers=SUB
"#;

fn client_option(access_url: &str, keys: Option<(&str, &str)>) -> ClientOption {
    let mut option = ClientOption::default();
    option.set_access_url(access_url);
    option.set_timeout(Duration::from_secs(10));
    // A receive finding nothing returns within this (the server holds it for a second less).
    option.set_long_polling_timeout(Duration::from_secs(4));
    if let Some((access_key, secret_key)) = keys {
        option.set_access_key(access_key);
        option.set_secret_key(secret_key);
    }
    option
}

async fn start_producer(access_url: &str, keys: Option<(&str, &str)>) -> Result<Producer> {
    let mut option = ProducerOption::default();
    option.set_topics(vec![TOPIC]);
    let mut producer = Producer::new(option, client_option(access_url, keys)).map_err(|e| anyhow::anyhow!("{e:?}"))?;
    producer.start().await.map_err(|e| anyhow::anyhow!("producer start via {access_url}: {e:?}"))?;
    Ok(producer)
}

async fn start_consumer(access_url: &str, keys: Option<(&str, &str)>) -> Result<SimpleConsumer> {
    let mut option = SimpleConsumerOption::default();
    option.set_consumer_group(GROUP);
    option.set_topics(vec![TOPIC]);
    let mut consumer =
        SimpleConsumer::new(option, client_option(access_url, keys)).map_err(|e| anyhow::anyhow!("{e:?}"))?;
    consumer.start().await.map_err(|e| anyhow::anyhow!("simple consumer start: {e:?}"))?;
    Ok(consumer)
}

fn message(topic: &str, body: &str) -> Result<impl rocketmq::model::message::Message> {
    MessageBuilder::builder()
        .set_topic(topic)
        .set_tag("TagA")
        .set_body(body.as_bytes().to_vec())
        .build()
        .map_err(|e| anyhow::anyhow!("{e:?}"))
}

/// `message` as a request carrying the metadata a client with `keys` sends.
fn signed<T>(message: T, keys: Option<(&str, &str)>) -> Result<tonic::Request<T>> {
    let mut request = tonic::Request::new(message);
    if let Some((access_key, secret_key)) = keys {
        let date_time = "20261207T170000Z";
        let signature = hex_hmac_sha1(secret_key, date_time);
        let authorization =
            format!("MQv2-HMAC-SHA1 Credential={access_key}, SignedHeaders=x-mq-date-time, Signature={signature}");
        request.metadata_mut().insert("authorization", authorization.parse()?);
        request.metadata_mut().insert("x-mq-date-time", date_time.parse()?);
    }
    Ok(request)
}

/// A SendMessage to `topic` in `namespace` ("" for none) through the service in process, with the
/// metadata a client with `keys` sends; the gRPC status when refused, the proto code otherwise.
async fn send_in_process(
    service: &Messaging,
    (namespace, topic): (&str, &str),
    keys: Option<(&str, &str)>,
) -> Result<Result<i32, tonic::Status>> {
    let message = pb::Message {
        topic: Some(pb::Resource { resource_namespace: namespace.into(), name: topic.into() }),
        body: b"refused".to_vec(),
        system_properties: Some(pb::SystemProperties {
            message_id: "01T83000000000000000000001".into(),
            body_encoding: pb::Encoding::Identity as i32,
            message_type: pb::MessageType::Normal as i32,
            ..Default::default()
        }),
        ..Default::default()
    };
    let request = signed(pb::SendMessageRequest { messages: vec![message] }, keys)?;
    Ok(match service.send_message(request).await {
        Ok(response) => Ok(response.into_inner().status.context("a status")?.code),
        Err(status) => Err(status),
    })
}

/// What rocketmq-clients puts after `Signature=`: the hex of HMAC-SHA1 keyed by the secret.
fn hex_hmac_sha1(secret_key: &str, text: &str) -> String {
    use base64::Engine;
    let base64 = raftmq_common::protocol::acl::signature(text.as_bytes(), secret_key);
    let raw = base64::engine::general_purpose::STANDARD.decode(base64).expect("our own Base64");
    raw.iter().map(|b| format!("{b:02x}")).collect()
}

fn denied(result: Result<i32, tonic::Status>, reason: &str) -> Result<()> {
    match result {
        Err(status) if status.code() == tonic::Code::PermissionDenied && status.message().contains(reason) => Ok(()),
        other => bail!("expected PERMISSION_DENIED with {reason:?}, got {other:?}"),
    }
}

/// Every message stored in `topic`, read by the admin over remoting, by body.
async fn stored_bodies(client: &RemotingClient, leader: &str, topic: &str) -> Result<BTreeSet<String>> {
    let mut out = BTreeSet::new();
    for queue_id in 0..QUEUES {
        for m in drain_queue(client, leader, topic, queue_id).await? {
            ensure!(out.insert(String::from_utf8_lossy(&m.message.body).into_owned()), "stored twice");
        }
    }
    Ok(out)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn t83_grpc_clients_under_acl_act_as_their_accounts_through_leader_and_follower() -> Result<()> {
    let dir = tempfile::tempdir()?;
    let acl_file = dir.path().join("plain_acl.yml");
    std::fs::write(&acl_file, ACL)?;
    let group = Group::start_with(3, |c| {
        c.acl_enable = true;
        c.acl_file = Some(acl_file.clone());
    })
    .await?;
    let leader_id = group.wait_leader(WAIT).await?;
    let leader = group.addr(leader_id);
    let follower_id = *group.brokers.keys().find(|id| **id != leader_id).context("no follower")?;
    let mut servers = BTreeMap::new();
    for (id, broker) in &group.brokers {
        servers.insert(*id, GrpcServer::bind(broker.bridge(), "127.0.0.1:0".parse()?).await?);
    }
    let follower_url = format!("127.0.0.1:{}", servers[&follower_id].local_addr().port());
    let leader_url = format!("127.0.0.1:{}", servers[&leader_id].local_addr().port());
    let on_follower = Messaging::new(
        group.brokers[&follower_id].bridge(),
        servers[&follower_id].local_addr().port(),
        CancellationToken::new(),
    );

    let admin_keys = SessionCredentials::new("t83admin", "t83-admin-secret")?;
    let admin = Admin::with_credentials(&group.namesrv_addr, Some(admin_keys.clone()))?;
    for topic in [TOPIC, OTHER_TOPIC] {
        let config = TopicConfig { read_queue_nums: QUEUES, write_queue_nums: QUEUES, ..TopicConfig::new(topic) };
        admin.create_topic(&leader, &config).await?;
    }
    admin.create_subscription_group(&leader, &SubscriptionGroupConfig::new(GROUP)).await?;
    admin.shutdown().await;
    let deadline = Instant::now() + WAIT;
    while group.brokers.values().any(|b| b.bridge().topic(OTHER_TOPIC).is_none()) {
        ensure!(Instant::now() < deadline, "the topics never reached every replica");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }

    // Sends relayed by a follower, signed there as the producer account, checked by the leader.
    let producer_keys = Some(("t83producer", "t83-producer-secret"));
    let producer = start_producer(&follower_url, producer_keys).await?;
    let mut sent = BTreeSet::new();
    for i in 0..MESSAGES {
        let body = format!("order-{i}");
        producer.send(message(TOPIC, &body)?).await.map_err(|e| anyhow::anyhow!("send {i}: {e:?}"))?;
        sent.insert(body);
    }

    // Refusals, each with Java's reason; none of them stores anything.
    let wrong = send_in_process(&on_follower, ("", TOPIC), Some(("t83producer", "guessed"))).await?;
    denied(wrong, "Check signature failed for accessKey=t83producer")?;
    denied(
        send_in_process(&on_follower, ("", TOPIC), Some(("t83stranger", "x"))).await?,
        "No acl config for t83stranger",
    )?;
    denied(send_in_process(&on_follower, ("", TOPIC), None).await?, "No accessKey is configured")?;
    let elsewhere = send_in_process(&on_follower, ("", OTHER_TOPIC), producer_keys).await?;
    denied(elsewhere, "No default permission for topic:GrpcAclPayments")?;
    // A namespace is joined before the check: PUB on the topic is not PUB on `tenant%topic`.
    let namespaced = send_in_process(&on_follower, ("tenant", TOPIC), producer_keys).await?;
    denied(namespaced, &format!("No default permission for topic:tenant%{TOPIC}"))?;
    let mut refused = Producer::new(
        {
            let mut option = ProducerOption::default();
            option.set_topics(vec![TOPIC]);
            option
        },
        client_option(&leader_url, Some(("t83producer", "guessed"))),
    )
    .map_err(|e| anyhow::anyhow!("{e:?}"))?;
    let start = refused.start().await;
    ensure!(start.is_err() || refused.send(message(TOPIC, "never")?).await.is_err(), "a wrong secret must not send");

    // The producer account may not consume, nor read a reader group's offsets.
    let topic_resource = || Some(pb::Resource { resource_namespace: String::new(), name: TOPIC.into() });
    let group_resource = || Some(pb::Resource { resource_namespace: String::new(), name: GROUP.into() });
    let receive = pb::ReceiveMessageRequest {
        group: group_resource(),
        message_queue: Some(pb::MessageQueue { topic: topic_resource(), ..Default::default() }),
        ..Default::default()
    };
    let refused = on_follower.receive_message(signed(receive, producer_keys)?).await.err();
    denied(Err(refused.context("a receive was admitted")?), "No default permission for group:grpc-acl-readers")?;
    let get = pb::GetOffsetRequest {
        group: group_resource(),
        message_queue: Some(pb::MessageQueue { topic: topic_resource(), ..Default::default() }),
    };
    let refused = on_follower.get_offset(signed(get, producer_keys)?).await.err();
    denied(Err(refused.context("an offset read was admitted")?), "No default permission")?;

    // A Telemetry Settings naming a topic the account may not publish ends its stream refused,
    // the trace topic beside it notwithstanding (so it never takes that topic's transaction checks).
    let channel = Endpoint::from_shared(format!("http://{follower_url}"))?.connect().await.context("gRPC channel")?;
    let mut client = MessagingServiceClient::new(channel);
    let publishing = |topics: &[&str]| pb::TelemetryCommand {
        command: Some(pb::telemetry_command::Command::Settings(pb::Settings {
            pub_sub: Some(pb::settings::PubSub::Publishing(pb::Publishing {
                topics: topics
                    .iter()
                    .map(|t| pb::Resource { resource_namespace: String::new(), name: (*t).into() })
                    .collect(),
                ..Default::default()
            })),
            ..Default::default()
        })),
        ..Default::default()
    };
    for (topics, refusal) in [
        (vec![TOPIC], None),
        (vec![RMQ_SYS_TRACE_TOPIC, OTHER_TOPIC], Some("No default permission for topic:GrpcAclPayments")),
    ] {
        let outbound = futures::stream::iter(vec![publishing(&topics)]).chain(futures::stream::pending());
        let mut inbound = client.telemetry(signed(outbound, producer_keys)?).await?.into_inner();
        let first = tokio::time::timeout(WAIT, inbound.next()).await?.context("the stream ended at once")?;
        match (first, refusal) {
            (Ok(answer), None) => {
                ensure!(matches!(answer.command, Some(pb::telemetry_command::Command::Settings(_))), "{answer:?}")
            }
            (Err(status), Some(reason)) => denied(Err(status), reason)?,
            (other, _) => bail!("publishing {topics:?}: {other:?}"),
        }
    }

    // The consumer account receives every message once and acks it.
    let consumer = start_consumer(&leader_url, Some(("t83consumer", "t83-consumer-secret"))).await?;
    let any = FilterExpression::new(FilterType::Tag, "*");
    let mut received = BTreeSet::new();
    let deadline = Instant::now() + WAIT;
    while received.len() < sent.len() {
        ensure!(Instant::now() < deadline, "received {} of {}", received.len(), sent.len());
        let batch =
            consumer.receive_with(TOPIC, &any, 32, INVISIBLE).await.map_err(|e| anyhow::anyhow!("receive: {e:?}"))?;
        for m in batch {
            let body = String::from_utf8_lossy(m.body()).into_owned();
            consumer.ack(&m).await.map_err(|e| anyhow::anyhow!("ack {body}: {e:?}"))?;
            ensure!(received.insert(body.clone()), "{body} received twice");
        }
    }
    assert_eq!(received, sent);

    // Exactly the accepted sends are stored.
    let reader = RemotingClient::with_credentials(ProcessorTable::new(), false, Some(std::sync::Arc::new(admin_keys)));
    assert_eq!(stored_bodies(&reader, &leader, TOPIC).await?, sent);
    assert_eq!(stored_bodies(&reader, &leader, OTHER_TOPIC).await?, BTreeSet::new());

    for server in servers.into_values() {
        server.shutdown().await;
    }
    group.shutdown().await;
    Ok(())
}
