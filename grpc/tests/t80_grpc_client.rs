//! t80: the official RocketMQ 5 Rust client (`rocketmq` 5.0.0 from crates.io, apache/rocketmq-clients)
//! against a 3-replica raftmq group serving the gRPC MessagingService on every replica.
//!
//! Its `Producer` sends normal, FIFO (message group), delay (delivery timestamp) and
//! transactional messages (one committed, one rolled back, one left open that the broker's
//! check-back asks about on the producer's Telemetry stream and the checker commits) through the
//! leader's gRPC port, and
//! normal messages through a follower's port (relayed to the leader). (rocketmq 5.0.0 cannot be
//! given a list of addresses as its access point: it builds one URI of the whole list.) Then raftmq's own remoting pulls read the topics back from the leader:
//! exactly the acknowledged and committed messages are stored, once each, with RocketMQ's
//! properties (UNIQ_KEY = the client's message id, TAGS, KEYS, __SHARDINGKEY, TIMER_DELIVER_MS),
//! each message group in one queue in send order, the delayed message not stored before its time.
//!
//! Its `SimpleConsumer` consumes over POP (ReceiveMessage → the broker's replicated POP_MESSAGE):
//! every message received once with its properties and delivery attempt 1 and acked; a message
//! left unacked comes back after its invisible time from the retry topic with delivery attempt 2;
//! ChangeInvisibleDuration answers a new receipt handle and the old one is then stale
//! (INVALID_RECEIPT_HANDLE), as is an acked one; ForwardMessageToDeadLetterQueue puts a message in
//! `%DLQ%<group>`; a group with `consumeMessageOrderly` receives each message group in send order.
//! The RPCs rocketmq 5.0.0 does not call (ChangeInvisibleDuration, forwarding to the DLQ, acks of
//! stale handles) are called on the replica's `Messaging` service in process, with the receipt
//! handles the client received. rocketmq 5.0.0 has no PushConsumer.
//! Waits poll with a deadline; nothing sleeps to synchronise.

use crate::group;

use std::collections::BTreeMap;
use std::collections::BTreeSet;
use std::collections::HashMap;
use std::sync::Arc;
use std::sync::Mutex;
use std::time::Duration;
use std::time::Instant;

use anyhow::Context;
use anyhow::Result;
use anyhow::bail;
use group::Group;
use group::drain_queue;
use raftmq_client::Admin;
use raftmq_common::message::MessageExt;
use raftmq_common::message::properties;
use raftmq_common::protocol::body::subscription_group::SubscriptionGroupConfig;
use raftmq_common::protocol::body::topic::TopicConfig;
use raftmq_common::remoting::RemotingClient;
use raftmq_grpc::GrpcServer;
use raftmq_grpc::pb::messaging_service_server::MessagingService;
use raftmq_grpc::service::Messaging;
use rocketmq::Producer;
use rocketmq::SimpleConsumer;
use rocketmq::conf::ClientOption;
use rocketmq::conf::ProducerOption;
use rocketmq::conf::SimpleConsumerOption;
use rocketmq::model::common::FilterExpression;
use rocketmq::model::common::FilterType;
use rocketmq::model::message::AckMessageEntry;
use rocketmq::model::message::MessageBuilder;
use rocketmq::model::message::MessageView;
use rocketmq::model::transaction::Transaction;
use rocketmq::model::transaction::TransactionResolution;

const TOPIC: &str = "GrpcTopic";
const FIFO_TOPIC: &str = "GrpcFifoTopic";
const QUEUES: i32 = 4;
/// How long the whole exchange may take on a loaded 2-core machine.
const WAIT: Duration = Duration::from_secs(60);
/// How far in the future the delayed message is due.
const DELAY_MS: i64 = 2_000;
/// RocketMQ's timer precision (`timerPrecisionMs`, 1 s): a timer message is never stored in its
/// topic earlier than its time minus this.
const TIMER_PRECISION_MS: i64 = 1_000;

fn now_ms() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_millis() as i64).unwrap_or(0)
}

fn client_option(access_url: &str) -> ClientOption {
    let mut option = ClientOption::default();
    option.set_access_url(access_url);
    option.set_timeout(Duration::from_secs(10));
    option
}

fn producer_option() -> ProducerOption {
    let mut option = ProducerOption::default();
    option.set_topics(vec![TOPIC, FIFO_TOPIC]);
    option
}

async fn start_producer(access_url: &str) -> Result<Producer> {
    let mut producer =
        Producer::new(producer_option(), client_option(access_url)).map_err(|e| anyhow::anyhow!("{e:?}"))?;
    producer.start().await.map_err(|e| anyhow::anyhow!("producer start via {access_url}: {e:?}"))?;
    Ok(producer)
}

/// Every message of `topic` on the leader, by UNIQ_KEY (fails on a duplicate).
async fn stored(client: &RemotingClient, leader: &str, topic: &str) -> Result<BTreeMap<String, MessageExt>> {
    let mut out = BTreeMap::new();
    for queue_id in 0..QUEUES {
        for m in drain_queue(client, leader, topic, queue_id).await? {
            let id = m.message.property(properties::UNIQ_KEY).context("a stored message has no UNIQ_KEY")?.to_owned();
            if let Some(first) = out.insert(id.clone(), m) {
                bail!("{id} is stored twice (first at queue {} offset {})", first.queue_id, first.queue_offset);
            }
        }
    }
    Ok(out)
}

/// Polls `topic` on the current leader until exactly `expected` ids are stored, or fails naming
/// what is missing or extra.
async fn wait_stored(
    client: &RemotingClient,
    group: &Group,
    topic: &str,
    expected: &BTreeSet<String>,
) -> Result<BTreeMap<String, MessageExt>> {
    let deadline = Instant::now() + WAIT;
    loop {
        let leader = group.addr(group.wait_leader(WAIT).await?);
        let now = stored(client, &leader, topic).await?;
        let ids: BTreeSet<String> = now.keys().cloned().collect();
        if let Some(extra) = ids.difference(expected).next() {
            bail!("{topic} holds {extra}, which was never acknowledged or was rolled back");
        }
        if ids == *expected {
            return Ok(now);
        }
        if Instant::now() > deadline {
            bail!("{topic} still misses {:?}", expected.difference(&ids).collect::<Vec<_>>());
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// One transactional half of `body`, not yet ended.
async fn send_half(producer: &Producer, body: &str) -> Result<impl Transaction> {
    let message = MessageBuilder::transaction_message_builder(TOPIC, body.as_bytes().to_vec())
        .set_tag("TagT")
        .build()
        .map_err(|e| anyhow::anyhow!("{e:?}"))?;
    producer.send_transaction_message(message).await.map_err(|e| anyhow::anyhow!("half send: {e:?}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn t80_rocketmq5_producer_normal_fifo_delay_transactional_through_grpc() -> Result<()> {
    let group = Group::start_with(3, |c| {
        // Check-back soon after a half is left open, so the orphaned transaction is recovered quickly.
        c.transaction_time_out = Duration::from_secs(1);
        c.transaction_check_interval = Duration::from_millis(300);
    })
    .await?;
    let leader_id = group.wait_leader(WAIT).await?;
    let leader = group.addr(leader_id);
    let mut servers = BTreeMap::new();
    for (id, broker) in &group.brokers {
        let server = GrpcServer::bind(broker.bridge(), "127.0.0.1:0".parse()?).await?;
        servers.insert(*id, server);
    }
    let grpc_url = |id: u64| format!("127.0.0.1:{}", servers[&id].local_addr().port());
    let follower_id = *group.brokers.keys().find(|id| **id != leader_id).context("no follower")?;

    let admin = Admin::new(&group.namesrv_addr)?;
    for topic in [TOPIC, FIFO_TOPIC] {
        let config = TopicConfig { read_queue_nums: QUEUES, write_queue_nums: QUEUES, ..TopicConfig::new(topic) };
        admin.create_topic(&leader, &config).await?;
    }
    admin.shutdown().await;
    // A follower answers QueryRoute from its own applied state: wait until it has both topics.
    let deadline = Instant::now() + WAIT;
    while [TOPIC, FIFO_TOPIC].iter().any(|t| group.brokers.values().any(|b| b.bridge().topic(t).is_none())) {
        if Instant::now() > deadline {
            bail!("the topics never reached every replica");
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }

    let producer = start_producer(&grpc_url(leader_id)).await?;
    let mut expected = BTreeSet::new();
    let mut normal = BTreeMap::new();

    // Normal messages: tag, two keys, a user property.
    for i in 0..8 {
        let message = MessageBuilder::builder()
            .set_topic(TOPIC)
            .set_tag("TagA")
            .set_keys(vec![format!("key-{i}"), format!("order-{i}")])
            .set_properties(HashMap::from([("color", "blue")]))
            .set_body(format!("normal-{i} ☃").into_bytes())
            .build()
            .map_err(|e| anyhow::anyhow!("{e:?}"))?;
        let receipt = producer.send(message).await.map_err(|e| anyhow::anyhow!("normal send {i}: {e:?}"))?;
        normal.insert(receipt.message_id().to_owned(), i);
        expected.insert(receipt.message_id().to_owned());
    }

    // Delay: due DELAY_MS from now (rocketmq 5.0.0 takes the delivery time in whole seconds).
    let deliver_at_secs = (now_ms() + DELAY_MS) / 1_000 + 1;
    let deliver_at_ms = deliver_at_secs * 1_000;
    let delayed = MessageBuilder::delay_message_builder(TOPIC, b"delayed".to_vec(), deliver_at_secs)
        .set_tag("TagD")
        .build()
        .map_err(|e| anyhow::anyhow!("{e:?}"))?;
    let delayed_id =
        producer.send(delayed).await.map_err(|e| anyhow::anyhow!("delay send: {e:?}"))?.message_id().to_owned();
    expected.insert(delayed_id.clone());

    // FIFO: two message groups, five messages each, interleaved.
    let mut fifo: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for step in 0..5 {
        for g in ["order-A", "order-B"] {
            let message = MessageBuilder::fifo_message_builder(FIFO_TOPIC, format!("{g}/{step}").into_bytes(), g)
                .set_tag("TagF")
                .build()
                .map_err(|e| anyhow::anyhow!("{e:?}"))?;
            let receipt = producer.send(message).await.map_err(|e| anyhow::anyhow!("fifo send {g}/{step}: {e:?}"))?;
            fifo.entry(g.to_owned()).or_default().push(receipt.message_id().to_owned());
        }
    }

    // Transactions: one committed, one rolled back at once; one left open (its local transaction
    // "unknown") that the broker's check-back asks about on the producer's Telemetry stream, and
    // the checker commits. Only that one may be asked: the checker rolls back any other.
    let to_commit_on_check: Arc<Mutex<BTreeSet<String>>> = Arc::default();
    let checked: Arc<Mutex<Vec<(String, String)>>> = Arc::default();
    let checker = {
        let (to_commit_on_check, checked) = (Arc::clone(&to_commit_on_check), Arc::clone(&checked));
        Box::new(move |transaction_id: String, message: MessageView| {
            let id = message.message_id().to_owned();
            let commit = to_commit_on_check.lock().is_ok_and(|ids| ids.contains(&id));
            if let Ok(mut checked) = checked.lock() {
                checked.push((id, transaction_id));
            }
            if commit { TransactionResolution::COMMIT } else { TransactionResolution::ROLLBACK }
        })
    };
    let mut tx_producer =
        Producer::new_transaction_producer(producer_option(), client_option(&grpc_url(leader_id)), checker)
            .map_err(|e| anyhow::anyhow!("{e:?}"))?;
    tx_producer.start().await.map_err(|e| anyhow::anyhow!("transaction producer start: {e:?}"))?;
    let committed = send_half(&tx_producer, "committed").await?;
    let committed_id = committed.message_id().to_owned();
    assert!(!committed.transaction_id().is_empty(), "a half's receipt carries a transaction id");
    committed.commit().await.map_err(|e| anyhow::anyhow!("commit: {e:?}"))?;
    expected.insert(committed_id.clone());
    let rolled_back = send_half(&tx_producer, "rolled back").await?;
    let rolled_back_id = rolled_back.message_id().to_owned();
    rolled_back.rollback().await.map_err(|e| anyhow::anyhow!("rollback: {e:?}"))?;
    let orphan = send_half(&tx_producer, "committed on check-back").await?;
    let orphan_id = orphan.message_id().to_owned();
    let orphan_transaction_id = orphan.transaction_id().to_owned();
    to_commit_on_check.lock().map_err(|_| anyhow::anyhow!("poisoned"))?.insert(orphan_id.clone());
    // Neither committed nor rolled back: the producer's local transaction is UNKNOWN.
    drop(orphan);
    expected.insert(orphan_id.clone());

    // Through a follower: relayed to the leader.
    let mut relayed = Vec::new();
    for url in [grpc_url(follower_id)] {
        let p = start_producer(&url).await?;
        for i in 0..3 {
            let message = MessageBuilder::builder()
                .set_topic(TOPIC)
                .set_tag("TagR")
                .set_body(format!("relayed-{i}").into_bytes())
                .build()
                .map_err(|e| anyhow::anyhow!("{e:?}"))?;
            let id =
                p.send(message).await.map_err(|e| anyhow::anyhow!("send via {url}: {e:?}"))?.message_id().to_owned();
            expected.insert(id.clone());
            relayed.push(id);
        }
        p.shutdown().await.map_err(|e| anyhow::anyhow!("{e:?}"))?;
    }

    let client = RemotingClient::new();
    let topic = wait_stored(&client, &group, TOPIC, &expected).await?;
    assert!(!topic.contains_key(&rolled_back_id), "the rolled-back message is never stored in its topic");
    for (id, i) in &normal {
        let m = &topic[id].message;
        assert_eq!(m.property(properties::TAGS), Some("TagA"));
        assert_eq!(m.property(properties::KEYS), Some(format!("key-{i} order-{i}").as_str()));
        assert_eq!(m.property("color"), Some("blue"));
        assert_eq!(m.body.as_ref(), format!("normal-{i} ☃").as_bytes());
    }
    let d = &topic[&delayed_id];
    assert_eq!(d.message.property(properties::TIMER_DELIVER_MS), Some(deliver_at_ms.to_string().as_str()));
    assert!(
        d.store_timestamp >= deliver_at_ms - TIMER_PRECISION_MS,
        "the delayed message was stored at {}, before its time {deliver_at_ms}",
        d.store_timestamp
    );
    assert_eq!(topic[&committed_id].message.body.as_ref(), b"committed");
    assert_eq!(topic[&orphan_id].message.body.as_ref(), b"committed on check-back");
    let checked = checked.lock().map_err(|_| anyhow::anyhow!("poisoned"))?.clone();
    assert!(checked.iter().all(|(id, _)| *id == orphan_id), "only the open transaction is checked, not {checked:?}");
    let (_, check_transaction_id) = checked.first().context("the open transaction was committed without a check")?;
    assert_ne!(
        *check_transaction_id, orphan_transaction_id,
        "a check names the check copy of the half, not the half itself"
    );
    for id in &relayed {
        assert_eq!(topic[id].message.property(properties::TAGS), Some("TagR"));
    }

    let fifo_expected: BTreeSet<String> = fifo.values().flatten().cloned().collect();
    let stored_fifo = wait_stored(&client, &group, FIFO_TOPIC, &fifo_expected).await?;
    for (g, ids) in &fifo {
        let queues: BTreeSet<i32> = ids.iter().map(|id| stored_fifo[id].queue_id).collect();
        assert_eq!(queues.len(), 1, "message group {g} is in one queue, not {queues:?}");
        let offsets: Vec<i64> = ids.iter().map(|id| stored_fifo[id].queue_offset).collect();
        assert!(offsets.windows(2).all(|w| w[0] < w[1]), "group {g} is stored in send order: {offsets:?}");
        for id in ids {
            assert_eq!(stored_fifo[id].message.property(properties::SHARDING_KEY), Some(g.as_str()));
        }
    }
    println!(
        "t80: {} messages in {TOPIC} and {} in {FIFO_TOPIC} as sent by rocketmq 5.0.0 over gRPC; rolled back {rolled_back_id} absent",
        topic.len(),
        stored_fifo.len()
    );

    producer.shutdown().await.map_err(|e| anyhow::anyhow!("{e:?}"))?;
    tx_producer.shutdown().await.map_err(|e| anyhow::anyhow!("{e:?}"))?;
    for server in servers.into_values() {
        server.shutdown().await;
    }
    group.shutdown().await;
    Ok(())
}

const POP_TOPIC: &str = "GrpcPopTopic";
const POP_FIFO_TOPIC: &str = "GrpcPopFifoTopic";
const POP_GROUP: &str = "GrpcPopGroup";
const FIFO_GROUP: &str = "GrpcFifoGroup";
/// How long a message received and not acked stays invisible.
const INVISIBLE: Duration = Duration::from_secs(3);

fn any_tag() -> FilterExpression {
    FilterExpression::new(FilterType::Tag, "*")
}

fn resource(name: &str) -> Option<raftmq_grpc::pb::Resource> {
    Some(raftmq_grpc::pb::Resource { resource_namespace: String::new(), name: name.to_owned() })
}

async fn start_consumer(access_url: &str, group: &str, topic: &str) -> Result<SimpleConsumer> {
    let mut option = SimpleConsumerOption::default();
    option.set_consumer_group(group);
    option.set_topics(vec![topic]);
    let mut client = client_option(access_url);
    // A receive finding nothing returns within this (the server holds it for a second less).
    client.set_long_polling_timeout(Duration::from_secs(4));
    let mut consumer = SimpleConsumer::new(option, client).map_err(|e| anyhow::anyhow!("{e:?}"))?;
    consumer.start().await.map_err(|e| anyhow::anyhow!("simple consumer start: {e:?}"))?;
    Ok(consumer)
}

/// Acks `handle` of a message of `POP_TOPIC` through the service in process; the entry's code.
async fn ack_code(service: &Messaging, message_id: &str, handle: &str) -> Result<i32> {
    let request = raftmq_grpc::pb::AckMessageRequest {
        group: resource(POP_GROUP),
        topic: resource(POP_TOPIC),
        entries: vec![raftmq_grpc::pb::AckMessageEntry {
            message_id: message_id.to_owned(),
            receipt_handle: handle.to_owned(),
            lite_topic: None,
        }],
    };
    let response = service.ack_message(tonic::Request::new(request)).await?.into_inner();
    let entry = response.entries.first().context("an ack answers each entry")?;
    Ok(entry.status.as_ref().context("an entry has a status")?.code)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn t80_rocketmq5_simple_consumer_pop_ack_change_retry_dlq_fifo_through_grpc() -> Result<()> {
    use raftmq_grpc::pb::Code;

    let group = Group::start(3).await?;
    let leader_id = group.wait_leader(WAIT).await?;
    let leader = group.addr(leader_id);
    let mut servers = BTreeMap::new();
    for (id, broker) in &group.brokers {
        servers.insert(*id, GrpcServer::bind(broker.bridge(), "127.0.0.1:0".parse()?).await?);
    }
    let url = format!("127.0.0.1:{}", servers[&leader_id].local_addr().port());
    let service = Messaging::new(
        group.brokers[&leader_id].bridge(),
        servers[&leader_id].local_addr().port(),
        tokio_util::sync::CancellationToken::new(),
    );

    let admin = Admin::new(&group.namesrv_addr)?;
    for topic in [POP_TOPIC, POP_FIFO_TOPIC] {
        let config = TopicConfig { read_queue_nums: QUEUES, write_queue_nums: QUEUES, ..TopicConfig::new(topic) };
        admin.create_topic(&leader, &config).await?;
    }
    let orderly = SubscriptionGroupConfig { consume_message_orderly: true, ..SubscriptionGroupConfig::new(FIFO_GROUP) };
    admin.create_subscription_group(&leader, &orderly).await?;
    admin.shutdown().await;

    let mut option = ProducerOption::default();
    option.set_topics(vec![POP_TOPIC, POP_FIFO_TOPIC]);
    let mut producer = Producer::new(option, client_option(&url)).map_err(|e| anyhow::anyhow!("{e:?}"))?;
    producer.start().await.map_err(|e| anyhow::anyhow!("producer start: {e:?}"))?;
    let mut sent = BTreeMap::new();
    for i in 0..12 {
        let message = MessageBuilder::builder()
            .set_topic(POP_TOPIC)
            .set_tag("TagP")
            .set_keys(vec![format!("pop-{i}")])
            .set_body(format!("pop-{i}").into_bytes())
            .build()
            .map_err(|e| anyhow::anyhow!("{e:?}"))?;
        let id = producer.send(message).await.map_err(|e| anyhow::anyhow!("send {i}: {e:?}"))?.message_id().to_owned();
        sent.insert(id, format!("pop-{i}"));
    }

    // Receive everything once: the first message is left unacked, the second renewed first.
    let consumer = start_consumer(&url, POP_GROUP, POP_TOPIC).await?;
    let mut received: BTreeMap<String, MessageView> = BTreeMap::new();
    let mut left: Option<String> = None;
    let mut renewed: Option<(String, String, String)> = None;
    let deadline = Instant::now() + WAIT;
    while received.len() < sent.len() {
        if Instant::now() > deadline {
            bail!("received only {} of {} messages", received.len(), sent.len());
        }
        let batch = consumer
            .receive_with(POP_TOPIC, &any_tag(), 32, INVISIBLE)
            .await
            .map_err(|e| anyhow::anyhow!("receive: {e:?}"))?;
        for m in batch {
            let id = m.message_id().to_owned();
            if left.as_ref() == Some(&id) {
                continue; // its invisible time ended already: it is the retry checked below
            }
            assert!(!received.contains_key(&id), "{id} was received twice before its invisible time ended");
            assert_eq!(sent.get(&id).map(|b| b.as_bytes()), Some(m.body()), "{id}'s body");
            assert_eq!((m.topic(), m.tag()), (POP_TOPIC, Some("TagP")));
            assert_eq!(m.delivery_attempt(), 1, "{id} is delivered for the first time");
            assert!(!m.receipt_handle().is_empty(), "a received message carries its receipt handle");
            if left.is_none() {
                left = Some(id.clone());
            } else if renewed.is_none() {
                let old = m.receipt_handle();
                let request = raftmq_grpc::pb::ChangeInvisibleDurationRequest {
                    group: resource(POP_GROUP),
                    topic: resource(POP_TOPIC),
                    receipt_handle: old.clone(),
                    invisible_duration: Some(prost_types::Duration { seconds: 30, nanos: 0 }),
                    message_id: id.clone(),
                    lite_topic: None,
                    suspend: None,
                };
                let changed = service.change_invisible_duration(tonic::Request::new(request)).await?.into_inner();
                assert_eq!(changed.status.as_ref().map(|s| s.code), Some(Code::Ok as i32), "{changed:?}");
                assert!(!changed.receipt_handle.is_empty() && changed.receipt_handle != old, "a new receipt handle");
                renewed = Some((id.clone(), old, changed.receipt_handle));
            } else {
                consumer.ack(&m).await.map_err(|e| anyhow::anyhow!("ack {id}: {e:?}"))?;
            }
            received.insert(id, m);
        }
    }
    let (renewed_id, old_handle, new_handle) = renewed.context("no message was renewed")?;
    assert_eq!(
        ack_code(&service, &renewed_id, &old_handle).await?,
        Code::InvalidReceiptHandle as i32,
        "renewed: stale"
    );
    assert_eq!(ack_code(&service, &renewed_id, &new_handle).await?, Code::Ok as i32);
    assert_eq!(ack_code(&service, &renewed_id, &new_handle).await?, Code::InvalidReceiptHandle as i32, "acked: stale");
    assert_eq!(ack_code(&service, &renewed_id, "not a handle").await?, Code::InvalidReceiptHandle as i32);

    // The unacked message comes back from the retry topic, its second attempt; nothing else does.
    let left = left.context("no message was left unacked")?;
    let deadline = Instant::now() + WAIT;
    let again = loop {
        if Instant::now() > deadline {
            bail!("the unacked message {left} never came back");
        }
        let batch = consumer
            .receive_with(POP_TOPIC, &any_tag(), 32, INVISIBLE)
            .await
            .map_err(|e| anyhow::anyhow!("receive: {e:?}"))?;
        let mut found = None;
        for m in batch {
            assert_eq!(m.message_id(), left, "only the unacked message is delivered again");
            found = Some(m);
        }
        if let Some(m) = found {
            break m;
        }
    };
    assert_eq!(again.delivery_attempt(), 2, "the second delivery is attempt 2");
    assert_eq!((again.topic(), again.body()), (POP_TOPIC, sent[&left].as_bytes()), "the original topic and body");
    consumer.ack(&again).await.map_err(|e| anyhow::anyhow!("ack of the retry: {e:?}"))?;

    // Forwarded to the dead-letter queue: stored in %DLQ%<group>, and acked.
    let message = MessageBuilder::builder()
        .set_topic(POP_TOPIC)
        .set_body(b"dead letter".to_vec())
        .build()
        .map_err(|e| anyhow::anyhow!("{e:?}"))?;
    let dead_id = producer.send(message).await.map_err(|e| anyhow::anyhow!("send: {e:?}"))?.message_id().to_owned();
    let deadline = Instant::now() + WAIT;
    let dead = loop {
        if Instant::now() > deadline {
            bail!("{dead_id} was never received");
        }
        let batch = consumer
            .receive_with(POP_TOPIC, &any_tag(), 32, Duration::from_secs(30))
            .await
            .map_err(|e| anyhow::anyhow!("receive: {e:?}"))?;
        if let Some(m) = batch.into_iter().find(|m| m.message_id() == dead_id) {
            break m;
        }
    };
    let request = raftmq_grpc::pb::ForwardMessageToDeadLetterQueueRequest {
        group: resource(POP_GROUP),
        topic: resource(POP_TOPIC),
        receipt_handle: dead.receipt_handle(),
        message_id: dead_id.clone(),
        delivery_attempt: 1,
        max_delivery_attempts: 16,
        lite_topic: None,
    };
    let forwarded = service.forward_message_to_dead_letter_queue(tonic::Request::new(request)).await?.into_inner();
    assert_eq!(forwarded.status.as_ref().map(|s| s.code), Some(Code::Ok as i32), "{forwarded:?}");
    assert_eq!(ack_code(&service, &dead_id, &dead.receipt_handle()).await?, Code::InvalidReceiptHandle as i32, "acked");
    let client = RemotingClient::new();
    let dlq = format!("%DLQ%{POP_GROUP}");
    let in_dlq = drain_queue(&client, &leader, &dlq, 0).await?;
    assert!(
        in_dlq.iter().any(|m| m.message.property(properties::UNIQ_KEY) == Some(dead_id.as_str())),
        "{dead_id} is in {dlq}"
    );
    consumer.shutdown().await.map_err(|e| anyhow::anyhow!("{e:?}"))?;

    // FIFO: a group with consumeMessageOrderly receives each message group in send order.
    let mut fifo_sent: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for step in 0..5 {
        for g in ["fifo-A", "fifo-B"] {
            let message = MessageBuilder::fifo_message_builder(POP_FIFO_TOPIC, format!("{g}/{step}").into_bytes(), g)
                .build()
                .map_err(|e| anyhow::anyhow!("{e:?}"))?;
            let id =
                producer.send(message).await.map_err(|e| anyhow::anyhow!("fifo send: {e:?}"))?.message_id().to_owned();
            fifo_sent.entry(g.to_owned()).or_default().push(id);
        }
    }
    let fifo_consumer = start_consumer(&url, FIFO_GROUP, POP_FIFO_TOPIC).await?;
    let mut fifo_received: BTreeMap<String, Vec<String>> = BTreeMap::new();
    let deadline = Instant::now() + WAIT;
    while fifo_received.values().map(Vec::len).sum::<usize>() < 10 {
        if Instant::now() > deadline {
            bail!("FIFO consumer received only {fifo_received:?}");
        }
        let batch = fifo_consumer
            .receive_with(POP_FIFO_TOPIC, &any_tag(), 32, Duration::from_secs(30))
            .await
            .map_err(|e| anyhow::anyhow!("fifo receive: {e:?}"))?;
        for m in batch {
            let g = m.message_group().context("a FIFO message carries its message group")?.to_owned();
            fifo_received.entry(g).or_default().push(m.message_id().to_owned());
            fifo_consumer.ack(&m).await.map_err(|e| anyhow::anyhow!("fifo ack: {e:?}"))?;
        }
    }
    assert_eq!(fifo_received, fifo_sent, "each message group is received once, in send order");
    fifo_consumer.shutdown().await.map_err(|e| anyhow::anyhow!("{e:?}"))?;
    println!(
        "t80 POP: {} received and acked, one retried with attempt 2, one renewed, one dead-lettered, FIFO in order",
        received.len()
    );

    producer.shutdown().await.map_err(|e| anyhow::anyhow!("{e:?}"))?;
    drop(service);
    for server in servers.into_values() {
        server.shutdown().await;
    }
    group.shutdown().await;
    Ok(())
}
