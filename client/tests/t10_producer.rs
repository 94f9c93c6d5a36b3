//! Producer against a real NameServer and scripted brokers: what reaches the broker (codes, V2
//! header fields, properties, batch and compressed bodies), queue selection (round-robin, sharding
//! keys, default-topic auto-creation), failover (retry on another group, leader hints), the
//! outcome-unknown timeout, and client-side validation before any network call.

mod common;

use std::collections::BTreeMap;
use std::collections::BTreeSet;
use std::time::Duration;
use std::time::SystemTime;
use std::time::UNIX_EPOCH;

use anyhow::Context;
use anyhow::Result;
use common::Behavior;
use common::FakeBroker;
use common::closed_addr;
use common::send_header;
use common::start_namesrv;
use common::start_producer;
use raftmq_client::ErrorKind;
use raftmq_client::SelectMessageQueueByHash;
use raftmq_client::SendStatus;
use raftmq_client::route::format_leader_hint;
use raftmq_common::message::Message;
use raftmq_common::message::MessageQueue;
use raftmq_common::message::Properties;
use raftmq_common::message::batch::decode_batch;
use raftmq_common::message::compress::uncompress_stored_body;
use raftmq_common::message::properties;
use raftmq_common::message::sys_flag;
use raftmq_common::protocol::RequestCode;
use raftmq_common::protocol::ResponseCode;
use raftmq_common::protocol::body::topic::perm;
use raftmq_common::protocol::header::send::SendMessageRequestHeaderV2;

const TOPIC: &str = "TopicTest";
const RW: i32 = perm::READ_WRITE;

fn now_ms() -> i64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_millis() as i64).unwrap_or(0)
}

fn msg(body: &str) -> Message {
    Message::new(TOPIC, body.to_owned()).with_tags("TagA").with_keys("k1 k2")
}

/// One group with one node, registered with `topics`.
async fn broker(namesrv: &str, name: &str, topics: &[(&str, i32, i32)]) -> Result<FakeBroker> {
    let b = FakeBroker::start(name, 0).await?;
    b.register(namesrv, topics).await?;
    Ok(b)
}

fn queue_of(result: &raftmq_client::SendResult) -> (String, i32) {
    (result.message_queue.broker_name.clone(), result.message_queue.queue_id)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sync_async_callback_and_oneway_reach_the_broker_with_java_headers() -> Result<()> {
    let ns = start_namesrv().await?;
    let ns_addr = ns.local_addr().to_string();
    let b = broker(&ns_addr, "broker-a", &[(TOPIC, 4, RW)]).await?;
    let producer = start_producer(&ns_addr, |b| b).await?;

    let before = now_ms();
    let result = producer.send(msg("sync")).await?;
    assert_eq!(result.status, SendStatus::SendOk);
    assert_eq!(result.message_queue.topic, TOPIC);
    assert_eq!(result.message_queue.broker_name, "broker-a");
    assert_eq!(result.msg_id.len(), 32, "UNIQ_KEY of an IPv4 client");
    assert_eq!(result.offset_msg_id.len(), 32, "offsetMsgId of an IPv4 broker");

    let sends = b.sends();
    assert_eq!(sends.len(), 1);
    let request = &sends[0];
    assert_eq!(request.request_code(), RequestCode::SendMessageV2);
    assert!(!request.is_oneway());
    // Every V2 field, as DefaultMQProducerImpl.sendKernelImpl fills them.
    let v2: SendMessageRequestHeaderV2 = request.decode_header()?;
    assert_eq!((v2.a.as_str(), v2.b.as_str(), v2.c.as_str(), v2.d), ("TestProducerGroup", TOPIC, "TBW102", 4));
    assert_eq!((v2.e, v2.f, v2.h), (result.message_queue.queue_id, 0, 0));
    assert!(v2.g >= before && v2.g <= now_ms(), "bornTimestamp is the client clock");
    assert_eq!((v2.j, v2.k, v2.l, v2.m), (Some(0), Some(false), None, Some(false)));
    assert_eq!(v2.n.as_deref(), Some("broker-a"));
    let props = Properties::from_wire_str(v2.i.as_deref().context("properties")?);
    assert_eq!(props.get(properties::TAGS), Some("TagA"));
    assert_eq!(props.get(properties::KEYS), Some("k1 k2"));
    assert_eq!(props.get(properties::WAIT), Some("true"));
    assert_eq!(props.get(properties::UNIQ_KEY), Some(result.msg_id.as_str()));
    assert_eq!(&request.body[..], b"sync");

    let async_result = producer.send_async(msg("async")).await?;
    assert_eq!(async_result.status, SendStatus::SendOk);
    assert_ne!(async_result.msg_id, result.msg_id);

    let (tx, rx) = tokio::sync::oneshot::channel();
    producer.send_with_callback(msg("callback"), move |r| {
        // The receiver lives until the assertion below; a failed send would show up there.
        let _ = tx.send(r);
    });
    let callback_result = rx.await??;
    assert_eq!(callback_result.status, SendStatus::SendOk);

    producer.send_oneway(msg("oneway")).await?;
    b.wait_for_requests(4).await?;
    let sends = b.sends();
    assert_eq!(sends.len(), 4);
    let bodies: Vec<&[u8]> = sends.iter().map(|r| &r.body[..]).collect();
    assert_eq!(bodies, vec![&b"sync"[..], b"async", b"callback", b"oneway"]);
    assert!(sends[3].is_oneway() && !sends[1].is_oneway());

    producer.shutdown().await;
    b.shutdown().await;
    ns.shutdown().await;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn batch_is_one_send_batch_message_with_per_message_ids() -> Result<()> {
    let ns = start_namesrv().await?;
    let ns_addr = ns.local_addr().to_string();
    let b = broker(&ns_addr, "broker-a", &[(TOPIC, 2, RW)]).await?;
    let producer = start_producer(&ns_addr, |b| b).await?;

    let messages: Vec<Message> = (0..3).map(|i| msg(&format!("m{i}")).with_keys(format!("key-{i}"))).collect();
    let result = producer.send_batch(messages).await?;
    let sends = b.sends();
    assert_eq!(sends.len(), 1);
    let request = &sends[0];
    assert_eq!(request.request_code(), RequestCode::SendBatchMessage);
    let v2: SendMessageRequestHeaderV2 = request.decode_header()?;
    assert_eq!((v2.b.as_str(), v2.m, v2.f), (TOPIC, Some(true), 0));
    let batch_props = Properties::from_wire_str(v2.i.as_deref().context("properties")?);
    assert_eq!(batch_props.get(properties::WAIT), Some("true"));
    assert_eq!(batch_props.get(properties::UNIQ_KEY), None, "ids live on the inner messages");

    let inner = decode_batch(&request.body, TOPIC)?;
    assert_eq!(inner.len(), 3);
    let ids: Vec<&str> = inner.iter().map(|m| m.uniq_key().unwrap_or_default()).collect();
    assert_eq!(result.msg_id, ids.join(","));
    assert_eq!(ids.iter().collect::<BTreeSet<_>>().len(), 3);
    for (i, m) in inner.iter().enumerate() {
        assert_eq!(&m.body[..], format!("m{i}").as_bytes());
        assert_eq!(m.keys(), Some(format!("key-{i}").as_str()));
        assert_eq!(m.tags(), Some("TagA"));
    }
    assert_eq!(result.offset_msg_id.split(',').count(), 3);

    producer.shutdown().await;
    b.shutdown().await;
    ns.shutdown().await;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn round_robin_spreads_sends_over_every_queue_of_every_group() -> Result<()> {
    let ns = start_namesrv().await?;
    let ns_addr = ns.local_addr().to_string();
    let a = broker(&ns_addr, "broker-a", &[(TOPIC, 4, RW)]).await?;
    let b = broker(&ns_addr, "broker-b", &[(TOPIC, 4, RW)]).await?;
    let producer = start_producer(&ns_addr, |b| b).await?;

    let mut hits: BTreeMap<(String, i32), usize> = BTreeMap::new();
    for i in 0..16 {
        let r = producer.send(msg(&format!("m{i}"))).await?;
        *hits.entry(queue_of(&r)).or_default() += 1;
    }
    assert_eq!(hits.len(), 8, "every queue used: {hits:?}");
    assert!(hits.values().all(|n| *n == 2), "evenly: {hits:?}");
    assert_eq!((a.sends().len(), b.sends().len()), (8, 8));

    producer.shutdown().await;
    a.shutdown().await;
    b.shutdown().await;
    ns.shutdown().await;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sharding_key_keeps_each_key_on_one_queue() -> Result<()> {
    let ns = start_namesrv().await?;
    let ns_addr = ns.local_addr().to_string();
    let a = broker(&ns_addr, "broker-a", &[(TOPIC, 4, RW)]).await?;
    let b = broker(&ns_addr, "broker-b", &[(TOPIC, 4, RW)]).await?;
    let producer = start_producer(&ns_addr, |b| b).await?;

    // The publish queues in selector order: groups by name, queue ids ascending.
    let queues: Vec<MessageQueue> =
        ["broker-a", "broker-b"].iter().flat_map(|g| (0..4).map(move |q| MessageQueue::new(TOPIC, *g, q))).collect();
    let mut used = BTreeSet::new();
    for key in ["order-1", "order-2", "order-3", "order-4", "order-5"] {
        let expected = &queues[SelectMessageQueueByHash::index_of(key, queues.len()).context("index")?];
        for i in 0..4 {
            let r = producer.send_orderly(msg(&format!("{key}-{i}")), key).await?;
            assert_eq!(&r.message_queue, expected, "key {key}");
        }
        used.insert(expected.clone());
    }
    assert!(used.len() > 1, "different keys spread over queues");

    // An explicit queue and a closure selector.
    let target = MessageQueue::new(TOPIC, "broker-b", 3);
    assert_eq!(producer.send_to_queue(msg("direct"), &target).await?.message_queue, target);
    let last = |qs: &[MessageQueue], _: &Message, _: &()| qs.len().checked_sub(1);
    assert_eq!(producer.send_with_selector(msg("selected"), &last, &()).await?.message_queue, target);
    let wrong_topic = MessageQueue::new("Other", "broker-b", 0);
    assert_eq!(producer.send_to_queue(msg("x"), &wrong_topic).await.unwrap_err().kind, ErrorKind::InvalidArgument);

    producer.shutdown().await;
    a.shutdown().await;
    b.shutdown().await;
    ns.shutdown().await;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn retry_leaves_a_failing_group_and_avoids_it_afterwards() -> Result<()> {
    let ns = start_namesrv().await?;
    let ns_addr = ns.local_addr().to_string();
    let a = broker(&ns_addr, "broker-a", &[(TOPIC, 2, RW)]).await?;
    let b = broker(&ns_addr, "broker-b", &[(TOPIC, 2, RW)]).await?;
    a.set_behavior(Behavior::Fail(ResponseCode::ServiceNotAvailable, "store is not writable".into()));
    let producer = start_producer(&ns_addr, |b| b).await?;

    for i in 0..10 {
        let r = producer.send(msg(&format!("m{i}"))).await?;
        assert_eq!(r.message_queue.broker_name, "broker-b");
    }
    // The first send that picked broker-a failed over to broker-b; after that broker-a is backed off.
    assert_eq!(a.request_count(), 1);
    assert_eq!(b.sends().len(), 10);

    // A code the producer does not retry ends the send at once.
    b.set_behavior(Behavior::Fail(ResponseCode::MessageIllegal, "bad message".into()));
    let before = b.request_count();
    let err = producer.send(msg("illegal")).await.unwrap_err();
    assert_eq!(err.response_code(), Some(ResponseCode::MessageIllegal), "{err}");
    assert!(!err.is_retryable() && !err.is_outcome_unknown());
    assert_eq!(b.request_count(), before + 1);

    // Every group failing: all attempts used, the last code reported.
    b.set_behavior(Behavior::Fail(ResponseCode::SystemBusy, "busy".into()));
    let err = producer.send(msg("busy")).await.unwrap_err();
    assert_eq!(err.response_code(), Some(ResponseCode::SystemBusy), "{err}");
    assert!(err.message.starts_with("Send [3] times"), "{err}");

    producer.shutdown().await;
    a.shutdown().await;
    b.shutdown().await;
    ns.shutdown().await;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn leader_hint_moves_the_group_to_the_named_leader() -> Result<()> {
    let ns = start_namesrv().await?;
    let ns_addr = ns.local_addr().to_string();
    // One group, two nodes: the NameServer still lists the old leader as brokerId 0.
    let old = FakeBroker::start("broker-a", 0).await?;
    let new = FakeBroker::start("broker-a", 1).await?;
    old.register(&ns_addr, &[(TOPIC, 2, RW)]).await?;
    new.register(&ns_addr, &[(TOPIC, 2, RW)]).await?;
    let remark = format!("broker-a: this node is not the Raft leader; {}", format_leader_hint(&new.addr));
    old.set_behavior(Behavior::Fail(ResponseCode::ServiceNotAvailable, remark));
    let producer = start_producer(&ns_addr, |b| b).await?;

    let first = producer.send(msg("first")).await?;
    assert_eq!(first.message_queue.broker_name, "broker-a");
    assert_eq!((old.request_count(), new.sends().len()), (1, 1));
    // The hinted attempt used the same queue at the new leader.
    let (old_q, new_q) = (send_header(&old.sends()[0])?.queue_id, send_header(&new.sends()[0])?.queue_id);
    assert_eq!(old_q, new_q);
    assert_eq!(producer.routes().broker_addr_in_publish("broker-a").as_deref(), Some(new.addr.as_str()));

    // The next sends go straight to the leader.
    for i in 0..3 {
        producer.send(msg(&format!("next-{i}"))).await?;
    }
    assert_eq!((old.request_count(), new.sends().len()), (1, 4));

    producer.shutdown().await;
    old.shutdown().await;
    new.shutdown().await;
    ns.shutdown().await;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hanging_broker_gives_an_outcome_unknown_timeout_not_a_failure() -> Result<()> {
    let ns = start_namesrv().await?;
    let ns_addr = ns.local_addr().to_string();
    let a = broker(&ns_addr, "broker-a", &[(TOPIC, 2, RW)]).await?;
    let b = broker(&ns_addr, "broker-b", &[(TOPIC, 2, RW)]).await?;
    a.set_behavior(Behavior::Hang);
    b.set_behavior(Behavior::Hang);
    let producer = start_producer(&ns_addr, |b| b.send_timeout(Duration::from_millis(300))).await?;

    let mut sent = msg("maybe stored");
    sent.set_uniq_key("AC1100010000000000000000000000FF");
    let err = producer.send(sent).await.unwrap_err();
    assert_eq!(err.kind, ErrorKind::Timeout, "{err}");
    assert!(err.is_outcome_unknown());
    // Never retried: a second copy could be stored.
    assert_eq!(a.request_count() + b.request_count(), 1);
    let request = a.sends().into_iter().chain(b.sends()).next().context("the one attempt")?;
    let props = Properties::from_wire_str(send_header(&request)?.properties.as_deref().unwrap_or(""));
    assert_eq!(props.get(properties::UNIQ_KEY), Some("AC1100010000000000000000000000FF"), "caller's id kept");

    producer.shutdown().await;
    a.shutdown().await;
    b.shutdown().await;
    ns.shutdown().await;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_send_stalled_while_the_leader_moved_is_outcome_unknown_and_never_resent() -> Result<()> {
    // The old leader may have committed the message before it stopped answering (a SIGSTOPped
    // leader, a killed container): resending it to the new leader stores it twice (jepsen soak 25,
    // seed 34002). The stall ends early, outcome unknown; the next message goes to the new leader.
    let ns = start_namesrv().await?;
    let ns_addr = ns.local_addr().to_string();
    let old = FakeBroker::start("broker-a", 0).await?;
    let new = FakeBroker::start("broker-a", 1).await?;
    old.register(&ns_addr, &[(TOPIC, 2, RW)]).await?;
    new.register(&ns_addr, &[(TOPIC, 2, RW)]).await?;
    old.set_behavior(Behavior::Hang);
    // Default settings: the 3 s send timeout and the stall probe as users have them.
    let producer = start_producer(&ns_addr, |b| b).await?;

    let stalled = tokio::spawn({
        let producer = producer.clone();
        async move { producer.send(msg("maybe stored")).await }
    });
    old.wait_for_requests(1).await?;
    // The group elects `new`: it now registers as the writable node (brokerId 0).
    let namesrv_client = raftmq_common::remoting::RemotingClient::new();
    common::register_broker(&namesrv_client, &ns_addr, "broker-a", 0, &new.addr, &[(TOPIC, 2, RW)]).await?;

    let err = stalled.await?.expect_err("the stalled send has no answer");
    assert_eq!(err.kind, ErrorKind::OutcomeUnknown, "{err}");
    assert!(err.to_string().contains(&new.addr), "names the new leader: {err}");
    assert!(new.sends().is_empty(), "the stalled message must not be resent");

    let next = producer.send(msg("next")).await?;
    assert_eq!(next.message_queue.broker_name, "broker-a");
    assert_eq!((old.sends().len(), new.sends().len()), (1, 1));

    producer.shutdown().await;
    old.shutdown().await;
    new.shutdown().await;
    ns.shutdown().await;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn validation_fails_before_any_network_call() -> Result<()> {
    // Nothing listens at the NameServer address: any network call would be a Connection error.
    let producer = start_producer(&closed_addr()?, |b| b.max_message_size_bytes(1024)).await?;
    let cases: Vec<(&str, Message)> = vec![
        ("empty body", Message::new(TOPIC, Vec::<u8>::new())),
        ("bad topic", Message::new("bad topic!", "x")),
        ("blank topic", Message::new("", "x")),
        ("forbidden topic", Message::new("SCHEDULE_TOPIC_XXXX", "x")),
        ("too large", Message::new(TOPIC, vec![b'x'; 1025])),
    ];
    for (what, m) in cases {
        let err = producer.send(m.clone()).await.unwrap_err();
        assert_eq!(err.kind, ErrorKind::InvalidArgument, "{what}: {err}");
        assert_eq!(producer.send_oneway(m.clone()).await.unwrap_err().kind, ErrorKind::InvalidArgument, "{what}");
        assert_eq!(producer.send_orderly(m, "k").await.unwrap_err().kind, ErrorKind::InvalidArgument, "{what}");
    }
    let mixed = vec![Message::new(TOPIC, "a"), Message::new("Other", "b")];
    assert_eq!(producer.send_batch(mixed).await.unwrap_err().kind, ErrorKind::InvalidArgument);
    let mut delayed = Message::new(TOPIC, "a");
    delayed.set_delay_time_level(3);
    assert_eq!(producer.send_batch(vec![delayed]).await.unwrap_err().kind, ErrorKind::InvalidArgument);
    assert_eq!(producer.send_batch(vec![]).await.unwrap_err().kind, ErrorKind::InvalidArgument);
    assert!(producer.routes().cached_topics().is_empty(), "no route was looked up");

    // A valid message does reach for the network, and fails there.
    let err = producer.send(Message::new(TOPIC, "ok")).await.unwrap_err();
    assert_eq!(err.kind, ErrorKind::Connection, "{err}");
    producer.shutdown().await;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn large_bodies_are_compressed_and_inflate_to_the_original() -> Result<()> {
    let ns = start_namesrv().await?;
    let ns_addr = ns.local_addr().to_string();
    let b = broker(&ns_addr, "broker-a", &[(TOPIC, 1, RW)]).await?;
    let producer = start_producer(&ns_addr, |b| b).await?;

    // Seeded text: compressible, but not trivially.
    let seed = 0x5eed_u64;
    println!("body seed {seed:#x}");
    let mut x = seed;
    let body: Vec<u8> = (0..10 * 1024)
        .map(|_| {
            x = x.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1_442_695_040_888_963_407);
            b"abcdefgh "[(x >> 60) as usize % 9]
        })
        .collect();
    producer.send(Message::new(TOPIC, body.clone())).await?;
    producer.send(Message::new(TOPIC, vec![b'y'; 100])).await?;

    let sends = b.sends();
    let big = send_header(&sends[0])?;
    assert_eq!(big.sys_flag & sys_flag::COMPRESSED, sys_flag::COMPRESSED);
    assert!(sends[0].body.len() < body.len());
    assert_eq!(&uncompress_stored_body(big.sys_flag, &sends[0].body)?[..], &body[..]);
    let small = send_header(&sends[1])?;
    assert_eq!(small.sys_flag & sys_flag::COMPRESSED, 0);
    assert_eq!(sends[1].body.len(), 100);

    producer.shutdown().await;
    b.shutdown().await;
    ns.shutdown().await;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unknown_topic_is_sent_along_the_default_topic_route() -> Result<()> {
    let ns = start_namesrv().await?;
    let ns_addr = ns.local_addr().to_string();
    // The broker serves TBW102 with 8 queues; the producer caps an auto-created topic at 4.
    let b = broker(&ns_addr, "broker-a", &[("TBW102", 8, perm::READ_WRITE | perm::INHERIT)]).await?;
    let producer = start_producer(&ns_addr, |b| b).await?;

    let mut queues = BTreeSet::new();
    for i in 0..8 {
        let r = producer.send(Message::new("BrandNewTopic", format!("m{i}"))).await?;
        assert_eq!(r.message_queue.topic, "BrandNewTopic");
        queues.insert(r.message_queue.queue_id);
    }
    assert_eq!(queues, (0..4).collect::<BTreeSet<_>>());
    for request in b.sends() {
        let h = send_header(&request)?;
        assert_eq!(
            (h.topic.as_str(), h.default_topic.as_str(), h.default_topic_queue_nums),
            ("BrandNewTopic", "TBW102", 4)
        );
    }

    producer.shutdown().await;
    b.shutdown().await;
    ns.shutdown().await;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_route_anywhere_is_a_no_route_error() -> Result<()> {
    let ns = start_namesrv().await?;
    let ns_addr = ns.local_addr().to_string();
    let b = broker(&ns_addr, "broker-a", &[(TOPIC, 1, RW)]).await?;
    let producer = start_producer(&ns_addr, |b| b).await?;
    let err = producer.send(Message::new("NoSuchTopic", "x")).await.unwrap_err();
    assert_eq!(err.kind, ErrorKind::NoRoute, "{err}");
    assert_eq!(b.request_count(), 0);
    producer.shutdown().await;
    b.shutdown().await;
    ns.shutdown().await;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn route_polling_picks_up_a_new_group() -> Result<()> {
    let ns = start_namesrv().await?;
    let ns_addr = ns.local_addr().to_string();
    let a = broker(&ns_addr, "broker-a", &[(TOPIC, 2, RW)]).await?;
    let producer = start_producer(&ns_addr, |b| b.route_poll_interval(Duration::from_millis(50))).await?;
    producer.send(msg("before")).await?;
    let queues =
        |p: &raftmq_client::Producer| p.routes().cached_publish_info(TOPIC).map_or(0, |i| i.message_queues().len());
    assert_eq!(queues(&producer), 2);

    let b = broker(&ns_addr, "broker-b", &[(TOPIC, 2, RW)]).await?;
    // The refresh runs on the producer's own timer: poll for its effect, bounded.
    let deadline = tokio::time::Instant::now() + common::EVENTUALLY_MAX;
    while queues(&producer) != 4 {
        assert!(tokio::time::Instant::now() < deadline, "route refresh did not pick up broker-b");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let mut groups = BTreeSet::new();
    for i in 0..4 {
        groups.insert(producer.send(msg(&format!("after-{i}"))).await?.message_queue.broker_name);
    }
    assert_eq!(groups.len(), 2);

    producer.shutdown().await;
    a.shutdown().await;
    b.shutdown().await;
    ns.shutdown().await;
    Ok(())
}

/// A NameServer whose host is gone never answers (a connect to a vanished container hangs rather
/// than being refused): a producer given it first and a live one second still finds the route and
/// sends within its send timeout (the default, 3 s: without an even share per NameServer, the
/// silent one took all of it).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_silent_first_namesrv_does_not_take_the_whole_send_timeout() -> Result<()> {
    let namesrv = start_namesrv().await?;
    let live = namesrv.local_addr().to_string();
    let silent = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let silent_addr = silent.local_addr()?.to_string();
    // Accepts and holds every connection, reads nothing, answers nothing.
    let holder = tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((stream, _)) = silent.accept().await {
            held.push(stream);
        }
    });
    let b = broker(&live, "broker-a", &[("TopicSilentNs", 4, RW)]).await?;
    let producer = start_producer(&format!("{silent_addr};{live}"), |p| p).await?;
    let r = producer.send(Message::new("TopicSilentNs", "hello")).await?;
    assert_eq!(r.status, SendStatus::SendOk);
    producer.shutdown().await;
    b.shutdown().await;
    holder.abort();
    Ok(())
}
