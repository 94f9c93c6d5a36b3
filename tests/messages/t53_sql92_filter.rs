//! SQL92 message filtering (`enablePropertyFilter`) end to end: a NameServer and a broker group in
//! process (harness `t40_cluster`), the SDK's producer and push consumer, and raw remoting for
//! CHECK_CLIENT_CONFIG.
//!
//! - t75: a push consumer subscribed with `MessageSelector::Sql92` gets exactly the messages whose
//!   properties make the expression TRUE (missing properties are unknown, not a match), in queue
//!   order; CHECK_CLIENT_CONFIG accepts the expression and refuses a broken one with
//!   SUBSCRIPTION_PARSE_FAILED.
//! - t76: a broker with `enablePropertyFilter` off (RocketMQ's default) refuses SQL92 consumers with
//!   SYSTEM_ERROR and RocketMQ's remark, at CHECK_CLIENT_CONFIG and at PULL_MESSAGE; the SDK's
//!   consumer fails at start; a broken expression fails at build.

use crate::harness;

use std::collections::BTreeSet;
use std::time::Duration;

use anyhow::Result;
use anyhow::ensure;
use harness::cluster::Cluster;
use harness::cluster::Collector;
use harness::cluster::WAIT;
use raftmq_client::Producer;
use raftmq_client::PushConsumer;
use raftmq_client::consumer::ConsumeFrom;
use raftmq_client::consumer::ConsumeOrderlyContext;
use raftmq_client::consumer::ConsumeOrderlyStatus;
use raftmq_client::consumer::MessageSelector;
use raftmq_common::message::Message;
use raftmq_common::message::MessageExt;
use raftmq_common::protocol::RemotingCommand;
use raftmq_common::protocol::RequestCode;
use raftmq_common::protocol::ResponseCode;
use raftmq_common::protocol::body::JsonBody;
use raftmq_common::protocol::body::heartbeat::CheckClientRequestBody;
use raftmq_common::protocol::body::heartbeat::SubscriptionData;
use raftmq_common::protocol::header::pull::PullMessageRequestHeader;
use raftmq_common::protocol::header::pull::pull_sys_flag;
use raftmq_common::remoting::RemotingClient;

const RPC: Duration = Duration::from_secs(5);

fn sql_subscription(topic: &str, expression: &str) -> SubscriptionData {
    SubscriptionData {
        topic: topic.into(),
        sub_string: expression.into(),
        expression_type: "SQL92".into(),
        ..SubscriptionData::default()
    }
}

async fn check_client(addr: &str, topic: &str, expression: &str) -> Result<RemotingCommand> {
    let client = RemotingClient::new();
    let body = CheckClientRequestBody {
        client_id: "127.0.0.1@t75".into(),
        group: "t75-check".into(),
        subscription_data: sql_subscription(topic, expression),
    };
    let request = RemotingCommand::request(RequestCode::CheckClientConfig).with_body(body.encode()?);
    let response = client.invoke(addr, request, RPC).await?;
    client.close().await;
    Ok(response)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sql92_subscription_gets_exactly_the_matching_messages() -> Result<()> {
    let cluster = Cluster::start_with(3, |c| c.enable_property_filter = true).await?;
    let topic = "T75Sql";
    // One queue and an orderly listener: when the last message arrives, every earlier one has
    // been either delivered or filtered out.
    cluster.create_topic(topic, 1).await?;
    let expression = "a > 5 AND region = 'eu'";
    let leader = cluster.wait_leader(WAIT).await?;
    let ok = check_client(&cluster.addr(leader), topic, expression).await?;
    ensure!(ok.response_code() == ResponseCode::Success, "{ok:?}");
    let broken = check_client(&cluster.addr(leader), topic, "a > AND").await?;
    ensure!(broken.response_code() == ResponseCode::SubscriptionParseFailed, "{broken:?}");

    let producer = Producer::builder("t75-producers").namesrv_addr(&cluster.namesrv_addr).build()?;
    producer.start().await?;
    let mut want = BTreeSet::new();
    for i in 0..20 {
        let mut msg = Message::new(topic, format!("m{i}").into_bytes()).with_tags(if i % 2 == 0 { "A" } else { "B" });
        // Every fifth message has no `a` (unknown: not a match); regions alternate in threes.
        if i % 5 != 0 {
            msg.put_user_property("a", i.to_string())?;
        }
        msg.put_user_property("region", if (i / 3) % 2 == 0 { "eu" } else { "us" })?;
        if i % 5 != 0 && i > 5 && (i / 3) % 2 == 0 {
            want.insert(format!("m{i}"));
        }
        producer.send(msg).await?;
    }
    // The last message matches, so its arrival closes the test.
    let mut last = Message::new(topic, b"last".to_vec());
    last.put_user_property("a", "100")?;
    last.put_user_property("region", "eu")?;
    producer.send(last).await?;
    want.insert("last".to_owned());
    ensure!(want.len() > 3, "the expression must select some and not all: {want:?}");

    let seen = Collector::default();
    let sink = seen.clone();
    let consumer = PushConsumer::builder("t75-consumers")
        .namesrv_addr(&cluster.namesrv_addr)
        .instance_name("t75")
        .subscribe_selector(topic, MessageSelector::Sql92(expression.into()))
        .consume_from(ConsumeFrom::FirstOffset)
        .rebalance_interval(Duration::from_secs(1))
        .route_poll_interval(Duration::from_secs(1))
        .heartbeat_interval(Duration::from_millis(500))
        .listener_orderly(move |msgs: &[MessageExt], _ctx: &mut ConsumeOrderlyContext| {
            sink.record("c", msgs);
            ConsumeOrderlyStatus::Success
        })
        .build()?;
    consumer.start().await?;
    seen.wait_until("the last message", |r| r.iter().any(|m| m.body == "last")).await?;
    let bodies = seen.bodies();
    let got: BTreeSet<String> = bodies.iter().cloned().collect();
    ensure!(got == want, "got {got:?}, want {want:?}");
    ensure!(bodies.len() == want.len(), "each once: {bodies:?}");
    consumer.shutdown().await;
    producer.shutdown().await;
    cluster.shutdown().await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sql92_is_refused_unless_enabled() -> Result<()> {
    let cluster = Cluster::start(1).await?;
    let topic = "T76Sql";
    cluster.create_topic(topic, 1).await?;
    let addr = cluster.addr(cluster.wait_leader(WAIT).await?);
    let remark = "The broker does not support consumer to filter message by SQL92";
    let check = check_client(&addr, topic, "a > 1").await?;
    ensure!(check.response_code() == ResponseCode::SystemError, "{check:?}");
    ensure!(check.remark.as_deref() == Some(remark), "{:?}", check.remark);

    let header = PullMessageRequestHeader {
        consumer_group: "t76-consumers".into(),
        topic: topic.into(),
        queue_id: 0,
        queue_offset: 0,
        max_msg_nums: 32,
        // The subscription travels in the request.
        sys_flag: pull_sys_flag::SUBSCRIPTION,
        commit_offset: 0,
        suspend_timeout_millis: 0,
        subscription: Some("a > 1".into()),
        sub_version: 0,
        expression_type: Some("SQL92".into()),
        bname: None,
    };
    let client = RemotingClient::new();
    let pull =
        client.invoke(&addr, RemotingCommand::request_with_header(RequestCode::PullMessage, &header), RPC).await?;
    ensure!(pull.response_code() == ResponseCode::SystemError, "{pull:?}");
    ensure!(pull.remark.as_deref() == Some(remark), "{:?}", pull.remark);
    client.close().await;

    // The SDK asks before it starts (`checkClientInBroker`) and fails there, not on every pull.
    let consumer = PushConsumer::builder("t76-consumers")
        .namesrv_addr(&cluster.namesrv_addr)
        .subscribe_selector(topic, MessageSelector::Sql92("a > 1".into()))
        .listener_orderly(|_: &[MessageExt], _: &mut ConsumeOrderlyContext| ConsumeOrderlyStatus::Success)
        .build()?;
    let refused = consumer.start().await.err().map(|e| e.to_string()).unwrap_or_default();
    ensure!(refused.contains("does not support consumer to filter message by SQL92"), "start: {refused:?}");
    // A broken expression never reaches a broker: the builder refuses it.
    let broken = PushConsumer::builder("t76-broken")
        .namesrv_addr(&cluster.namesrv_addr)
        .subscribe_selector(topic, MessageSelector::Sql92("a >".into()))
        .listener_orderly(|_: &[MessageExt], _: &mut ConsumeOrderlyContext| ConsumeOrderlyStatus::Success)
        .build();
    ensure!(broken.is_err(), "a broken SQL92 expression is refused at build");
    cluster.shutdown().await
}
