//! Request/reply messaging (RocketMQ 4.6+) on a NameServer and a 3-replica group in process
//! (harness `t40_cluster`), with the SDK on both sides: a requester's `Producer::request`, a push
//! consumer that receives the requests, and a replier producer that answers each with
//! `create_reply_message` (sent as SEND_REPLY_MESSAGE_V2); the broker stores the reply in
//! `<cluster>_REPLY_TOPIC` and pushes it to the requester (PUSH_REPLY_MESSAGE_TO_CLIENT).
//!
//! - t77: concurrent requests each get their own reply (by correlation id), and the replies are
//!   stored; a reply to a client that is not connected is refused with SYSTEM_ERROR naming it; a
//!   "reply" to a user topic is refused MESSAGE_ILLEGAL; a request nobody answers times out.

use crate::harness;

use std::time::Duration;

use anyhow::Context;
use anyhow::Result;
use anyhow::ensure;
use harness::cluster::Cluster;
use harness::cluster::WAIT;
use raftmq_client::Admin;
use raftmq_client::Producer;
use raftmq_client::PushConsumer;
use raftmq_client::consumer::ConsumeConcurrentlyContext;
use raftmq_client::consumer::ConsumeConcurrentlyStatus;
use raftmq_client::consumer::ConsumeFrom;
use raftmq_client::error::ErrorKind;
use raftmq_client::reply::create_reply_message;
use raftmq_common::message::Message;
use raftmq_common::message::MessageExt;
use raftmq_common::message::properties;
use raftmq_common::protocol::ResponseCode;
use tokio::sync::mpsc;

const REQUESTS: usize = 12;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn requests_get_their_own_replies_and_the_broker_refuses_unknown_requesters() -> Result<()> {
    let cluster = Cluster::start(3).await?;
    let topic = "T77Requests";
    cluster.create_topic(topic, 4).await?;
    let requester = Producer::builder("t77-requesters").namesrv_addr(&cluster.namesrv_addr).build()?;
    requester.start().await?;
    let replier = Producer::builder("t77-repliers").namesrv_addr(&cluster.namesrv_addr).build()?;
    replier.start().await?;

    // The consumer hands each request to a task that answers it with "re:<body>".
    let (tx, mut requests) = mpsc::unbounded_channel::<MessageExt>();
    let consumer = PushConsumer::builder("t77-responders")
        .namesrv_addr(&cluster.namesrv_addr)
        .instance_name("t77-responders")
        .subscribe(topic, "*")
        .consume_from(ConsumeFrom::FirstOffset)
        .rebalance_interval(Duration::from_secs(1))
        .route_poll_interval(Duration::from_secs(1))
        .listener_concurrently(move |msgs: &[MessageExt], _ctx: &mut ConsumeConcurrentlyContext| {
            for m in msgs {
                let _ = tx.send(m.clone());
            }
            ConsumeConcurrentlyStatus::ConsumeSuccess
        })
        .build()?;
    consumer.start().await?;
    let answering = replier.clone();
    let answers = tokio::spawn(async move {
        while let Some(request) = requests.recv().await {
            let body = format!("re:{}", String::from_utf8_lossy(&request.message.body));
            let reply = create_reply_message(&request, body.into_bytes())?;
            answering.send(reply).await.context("sending a reply")?;
        }
        anyhow::Ok(())
    });

    let asked = (0..REQUESTS).map(|i| {
        let requester = requester.clone();
        async move {
            let reply = requester.request(Message::new(topic, format!("q{i}").into_bytes()), WAIT).await;
            (i, reply)
        }
    });
    let replies = futures::future::join_all(asked).await;
    if replies.iter().any(|(_, r)| r.is_err()) && answers.is_finished() {
        anyhow::bail!("requests failed after the answering task stopped: {:?}", answers.await);
    }
    for (i, reply) in replies {
        let reply = reply.with_context(|| format!("request q{i}"))?;
        let body = String::from_utf8_lossy(&reply.message.body).into_owned();
        ensure!(body == format!("re:q{i}"), "request q{i} got the reply {body:?}");
        ensure!(reply.message.topic.ends_with("_REPLY_TOPIC"), "reply topic {}", reply.message.topic);
        ensure!(reply.message.property(properties::PUSH_REPLY_TIME).is_some(), "the broker stamps its push");
        ensure!(reply.message.property(properties::CORRELATION_ID).is_some(), "the reply names its request");
    }

    // Every reply was stored before it was pushed (storeReplyMessageEnable, the default).
    let leader = cluster.wait_leader(WAIT).await?;
    let admin = Admin::new(&cluster.namesrv_addr)?;
    let reply_topic = raftmq_common::message::validate::reply_topic("DefaultCluster");
    let stored = admin.max_offset(&cluster.addr(leader), &reply_topic, 0).await?;
    ensure!(stored >= REQUESTS as i64, "{stored} replies stored in {reply_topic}, expected {REQUESTS}");

    // A reply for a client no broker knows: refused, naming it (after the replier's retries).
    let mut orphan = Message::new("Orphans", b"?".to_vec());
    orphan.properties.insert(properties::CLUSTER, "DefaultCluster");
    orphan.properties.insert(properties::REPLY_TO_CLIENT, "10.9.9.9@nobody");
    orphan.properties.insert(properties::CORRELATION_ID, "orphan-1");
    let orphan = MessageExt { message: orphan, ..MessageExt::default() };
    let refused = replier.send(create_reply_message(&orphan, b"lost".to_vec())?).await;
    let err = refused.err().context("a reply to an unknown client is refused")?;
    ensure!(
        matches!(err.kind, ErrorKind::Broker { code: ResponseCode::SystemError, .. })
            && err.to_string().contains("10.9.9.9@nobody"),
        "{err}"
    );

    // A reply is taken for the cluster's reply topic only: not a way around the ACL into any topic.
    let mut elsewhere = Message::new(topic, b"sneaky".to_vec());
    elsewhere.properties.insert(properties::MSG_TYPE, "reply");
    elsewhere.properties.insert(properties::REPLY_TO_CLIENT, requester.client_id());
    let refused = replier.send(elsewhere).await;
    let err = refused.err().context("a reply to a user topic is refused")?;
    ensure!(
        matches!(err.kind, ErrorKind::Broker { code: ResponseCode::MessageIllegal, .. })
            && err.to_string().contains("_REPLY_TOPIC"),
        "{err}"
    );

    // A request nobody consumes: the requester times out.
    cluster.create_topic("T77Unanswered", 1).await?;
    let unanswered =
        requester.request(Message::new("T77Unanswered", b"anyone?".to_vec()), Duration::from_millis(800)).await;
    ensure!(matches!(unanswered, Err(ref e) if e.kind == ErrorKind::Timeout), "{unanswered:?}");

    consumer.shutdown().await;
    // The task ends only with an error (the listener keeps its sender): a failed reply is one.
    ensure!(!answers.is_finished(), "the answering task stopped: {:?}", answers.await);
    answers.abort();
    requester.shutdown().await;
    replier.shutdown().await;
    admin.shutdown().await;
    cluster.shutdown().await
}
