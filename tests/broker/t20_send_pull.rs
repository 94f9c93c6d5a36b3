//! End-to-end: a NameServer and a 3-replica broker group in process, over real sockets. Sends go
//! through `raftmq_client::Producer`; consumption uses raw PULL_MESSAGE calls.
//!
//! - t20: 10,000 messages over 8 queues from 16 concurrent senders are all consumed exactly once,
//!   in queue order, with tags, keys and properties intact, from the leader and from a follower.
//! - t21: a pull suspended on an empty queue returns within 100 ms of a commit.
//! - t22: bad input gets RocketMQ's code and remark and stores nothing; a follower refuses writes
//!   with the leader hint.
//! - t23: every request code the broker serves, sent malformed to the leader and to a follower, and
//!   every code the NameServer serves, to it (no fields; random field names; the headers' field
//!   names with garbage values; random bodies; seeded, the seed printed, `RAFTMQ_FUZZ_SEED` replays
//!   it): each is answered, the NameServer still routes the topic, the group keeps a ready leader,
//!   and every message stored before reads back unchanged. The same under the plain ACL: half with
//!   a real or unknown `AccessKey` and a garbage `Signature`, half signed by the admin account.

use crate::harness;

use std::collections::BTreeMap;
use std::collections::HashMap;
use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;
use std::time::Instant;

use anyhow::Context;
use anyhow::Result;
use bytes::Bytes;
use harness::group::Group;
use harness::group::drain_queue;
use harness::group::pull;
use raftmq_client::Admin;
use raftmq_client::Producer;
use raftmq_common::message::Message;
use raftmq_common::message::msg_id::OffsetMsgId;
use raftmq_common::protocol::RemotingCommand;
use raftmq_common::protocol::RequestCode;
use raftmq_common::protocol::ResponseCode;
use raftmq_common::protocol::body::topic::TopicConfig;
use raftmq_common::protocol::header::send::SendMessageRequestHeaderV2;
use raftmq_common::protocol::leader_hint::parse_leader_hint;
use raftmq_common::remoting::RemotingClient;

const WAIT: Duration = Duration::from_secs(20);

async fn create_topic(group: &Group, leader: u64, topic: &str, queues: i32) -> Result<()> {
    let admin = Admin::new(&group.namesrv_addr)?;
    let config = TopicConfig { read_queue_nums: queues, write_queue_nums: queues, ..TopicConfig::new(topic) };
    admin.create_topic(&group.addr(leader), &config).await?;
    admin.shutdown().await;
    Ok(())
}

/// Waits until replica `id` has applied every queue of `topic` up to `max`.
async fn wait_caught_up(group: &Group, id: u64, topic: &str, max: &BTreeMap<i32, u64>) -> Result<()> {
    let deadline = Instant::now() + WAIT;
    let store = group.brokers[&id].store();
    while max.iter().any(|(q, m)| store.queue_offsets(topic, *q).1 < *m) {
        anyhow::ensure!(Instant::now() < deadline, "replica {id} did not catch up");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ten_thousand_messages_over_eight_queues_consumed_once_in_order() -> Result<()> {
    const SENDERS: usize = 16;
    const PER_SENDER: usize = 625;
    const TOPIC: &str = "T20_ORDERS";
    let group = Group::start(3).await?;
    let leader = group.wait_leader(WAIT).await?;
    create_topic(&group, leader, TOPIC, 8).await?;
    let producer = Arc::new(Producer::builder("t20_producer").namesrv_addr(&group.namesrv_addr).build()?);
    producer.start().await?;

    let started = Instant::now();
    let mut senders = Vec::new();
    for s in 0..SENDERS {
        let producer = Arc::clone(&producer);
        senders.push(tokio::spawn(async move {
            let mut results = Vec::with_capacity(PER_SENDER);
            for i in 0..PER_SENDER {
                let tag = if i % 2 == 0 { "TagA" } else { "TagB" };
                let mut m = Message::new(TOPIC, format!("body-{s}-{i}")).with_tags(tag).with_keys(format!("k-{s}-{i}"));
                m.put_user_property("sender", s.to_string())?;
                m.put_user_property("seq", i.to_string())?;
                results.push((s, i, producer.send(m).await?));
            }
            anyhow::Ok(results)
        }));
    }
    let mut sent = HashMap::new();
    for task in senders {
        for (s, i, r) in task.await?? {
            sent.insert(r.msg_id.clone(), (s, i, r));
        }
    }
    eprintln!("sent {} messages in {:?}", sent.len(), started.elapsed());
    assert_eq!(sent.len(), SENDERS * PER_SENDER, "every send got its own msgId");

    let client = RemotingClient::new();
    let follower = group.brokers.keys().copied().find(|id| *id != leader).context("a follower")?;
    let max: BTreeMap<i32, u64> =
        (0..8).map(|q| (q, group.brokers[&leader].store().queue_offsets(TOPIC, q).1)).collect();
    wait_caught_up(&group, follower, TOPIC, &max).await?;
    let mut from_follower = Vec::new();
    for q in 0..8 {
        from_follower.extend(drain_queue(&client, &group.addr(follower), TOPIC, q).await?);
    }
    let mut seen = HashSet::new();
    let mut total = 0;
    for q in 0..8 {
        let messages = drain_queue(&client, &group.addr(leader), TOPIC, q).await?;
        let mut last_seq: HashMap<String, usize> = HashMap::new();
        for (index, m) in messages.iter().enumerate() {
            assert_eq!(m.queue_offset, index as i64, "queue {q} is dense and in order");
            assert_eq!(m.queue_id, q);
            let uniq = m.message.uniq_key().context("UNIQ_KEY")?.to_owned();
            let (s, i, result) = sent.get(&uniq).with_context(|| format!("{uniq} was never acknowledged"))?;
            assert!(seen.insert(uniq.clone()), "{uniq} consumed twice");
            assert_eq!(m.message.body, Bytes::from(format!("body-{s}-{i}")));
            assert_eq!(m.message.tags(), Some(if i % 2 == 0 { "TagA" } else { "TagB" }));
            assert_eq!(m.message.keys(), Some(format!("k-{s}-{i}").as_str()));
            assert_eq!(m.message.property("sender"), Some(s.to_string().as_str()));
            assert_eq!(m.message.property("CLUSTER"), Some("DefaultCluster"));
            assert_eq!((result.message_queue.queue_id, result.queue_offset), (q, m.queue_offset));
            let offset_msg_id: OffsetMsgId = result.offset_msg_id.parse()?;
            assert_eq!(offset_msg_id.commit_log_offset, m.commit_log_offset, "offsetMsgId names the record");
            // One sender's messages keep their send order inside a queue.
            let previous = last_seq.insert(s.to_string(), *i);
            assert!(previous.is_none_or(|p| p < *i), "sender {s} out of order in queue {q}");
        }
        total += messages.len();
    }
    assert_eq!(total, SENDERS * PER_SENDER);
    assert_eq!(seen.len(), sent.len(), "every acknowledged message consumed once");
    assert_eq!(from_follower.len(), total, "the follower serves the same committed messages");
    producer.shutdown().await;
    group.shutdown().await;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn suspended_pull_returns_within_100ms_of_a_commit() -> Result<()> {
    const TOPIC: &str = "T21_LONG_POLL";
    let group = Group::start(3).await?;
    let leader = group.wait_leader(WAIT).await?;
    create_topic(&group, leader, TOPIC, 1).await?;
    let client = RemotingClient::new();
    let addr = group.addr(leader);
    let waiting = {
        let (client, addr) = (client.clone(), addr.clone());
        tokio::spawn(async move {
            let p = pull(&client, &addr, "t21_group", TOPIC, 0, 0, 32, Some(10_000)).await;
            (p, Instant::now())
        })
    };
    let deadline = Instant::now() + WAIT;
    while group.brokers[&leader].store().suspended_pulls() == 0 {
        anyhow::ensure!(Instant::now() < deadline, "the pull was never suspended");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let producer = Producer::builder("t21_producer").namesrv_addr(&group.namesrv_addr).build()?;
    producer.start().await?;
    producer.send(Message::new(TOPIC, "wake up").with_tags("TagA")).await?;
    let committed_at = Instant::now();
    let (pulled, returned_at) = waiting.await?;
    let pulled = pulled?;
    assert_eq!(pulled.code, ResponseCode::Success, "{:?}", pulled.remark);
    assert_eq!(pulled.messages.len(), 1);
    let late = returned_at.saturating_duration_since(committed_at);
    assert!(late < Duration::from_millis(100), "the pull returned {late:?} after the commit");
    producer.shutdown().await;
    group.shutdown().await;
    Ok(())
}

fn send_v2(topic: &str, body: impl Into<Bytes>) -> RemotingCommand {
    let header = SendMessageRequestHeaderV2 {
        a: "t22_producer".into(),
        b: topic.into(),
        c: "TBW102".into(),
        d: 4,
        e: 0,
        f: 0,
        g: 1_700_000_000_000,
        h: 0,
        i: Some("TAGS\u{1}TagA\u{2}".into()),
        j: Some(0),
        k: Some(false),
        l: None,
        m: Some(false),
        n: None,
    };
    RemotingCommand::request_with_header(RequestCode::SendMessageV2, &header).with_body(body.into())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_input_gets_rocketmq_codes_and_stores_nothing() -> Result<()> {
    const TOPIC: &str = "T22_BAD";
    let group = Group::start(3).await?;
    let leader = group.wait_leader(WAIT).await?;
    create_topic(&group, leader, TOPIC, 4).await?;
    let client = RemotingClient::new();
    let addr = group.addr(leader);
    let store = group.brokers[&leader].store();
    let log_end_before = raftmq_broker::state::pull::CommitLogReader::max_offset(store.commit_log());
    let topics_before = store.metadata().topics.len();
    let timeout = harness::group::RPC_TIMEOUT;

    let oversized = client.invoke(&addr, send_v2(TOPIC, vec![b'x'; 4 * 1024 * 1024 + 1]), timeout).await?;
    assert_eq!(oversized.response_code(), ResponseCode::MessageIllegal);
    assert!(oversized.remark.as_deref().unwrap_or("").contains("MAX: 4194304"), "{:?}", oversized.remark);

    let bad_topic = client.invoke(&addr, send_v2("bad topic!", "x"), timeout).await?;
    assert_eq!(bad_topic.response_code(), ResponseCode::SystemError);
    assert!(bad_topic.remark.as_deref().unwrap_or("").contains("illegal characters"), "{:?}", bad_topic.remark);

    let forbidden = client.invoke(&addr, send_v2("SCHEDULE_TOPIC_XXXX", "x"), timeout).await?;
    assert_eq!(forbidden.response_code(), ResponseCode::NoPermission, "{:?}", forbidden.remark);

    // A PREPARED sysFlag without the TRAN_MSG property: stored, it would get no queue unit and never
    // be ended (a broker recognises a half by TRAN_MSG; tests/messages/t52_transaction.rs covers real halves).
    let mut half_by_flag = send_v2(TOPIC, "x");
    half_by_flag.ext_fields.insert("f".into(), "4".into());
    let refused = client.invoke(&addr, half_by_flag, timeout).await?;
    assert_eq!(refused.response_code(), ResponseCode::MessageIllegal, "{:?}", refused.remark);
    assert!(refused.remark.as_deref().unwrap_or("").contains("TRAN_MSG"), "{:?}", refused.remark);

    let mut malformed = send_v2(TOPIC, "x");
    malformed.ext_fields.shift_remove("b");
    let malformed = client.invoke(&addr, malformed, timeout).await?;
    assert_eq!(malformed.response_code(), ResponseCode::SystemError);
    assert!(malformed.remark.as_deref().unwrap_or("").contains("header"), "{:?}", malformed.remark);

    let mut not_a_number = send_v2(TOPIC, "x");
    not_a_number.ext_fields.insert("e".into(), "zero".into());
    let not_a_number = client.invoke(&addr, not_a_number, timeout).await?;
    assert_eq!(not_a_number.response_code(), ResponseCode::SystemError);

    let unknown = client.invoke(&addr, RemotingCommand::request(RequestCode::Unknown(9_999)), timeout).await?;
    assert_eq!(unknown.response_code(), ResponseCode::RequestCodeNotSupported);
    assert_eq!(unknown.remark.as_deref(), Some(" request type 9999 not supported"));

    let no_topic = client.invoke(&addr, send_v2("T22_NEVER_CREATED", "x").with_remark(""), timeout).await?;
    // Auto-creation from TBW102 is on by default: this one is stored (and is the only record).
    assert_eq!(no_topic.response_code(), ResponseCode::Success, "{:?}", no_topic.remark);

    for q in 0..4 {
        assert_eq!(store.queue_offsets(TOPIC, q), (0, 0), "no partial record in queue {q}");
    }
    assert_eq!(store.queue_offsets("bad topic!", 0), (0, 0));
    assert_eq!(store.metadata().topics.len(), topics_before + 1, "only the auto-created topic was added");
    let log_end_after = raftmq_broker::state::pull::CommitLogReader::max_offset(store.commit_log());
    assert!(log_end_after > log_end_before, "the valid send was stored");

    // A follower refuses writes with SERVICE_NOT_AVAILABLE and names the leader.
    let follower = group.brokers.keys().copied().find(|id| *id != leader).context("a follower")?;
    let refused = client.invoke(&group.addr(follower), send_v2(TOPIC, "x"), timeout).await?;
    assert_eq!(refused.response_code(), ResponseCode::ServiceNotAvailable);
    assert_eq!(parse_leader_hint(refused.remark.as_deref().unwrap_or("")), Some(addr.as_str()));
    group.shutdown().await;
    Ok(())
}

/// A batch whose stored records would make one Raft entry larger than a Raft RPC can carry (a
/// 4 MiB body of one-byte messages becomes about 5 times as many stored bytes) is refused as
/// MESSAGE_ILLEGAL before anything is proposed; the group keeps committing. Before the entry cap,
/// the leader stored such an entry and could never replicate it: every later write waited forever.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_batch_too_large_for_one_entry_is_refused_and_the_group_keeps_writing() -> Result<()> {
    const TOPIC: &str =
        "T24_BATCH_OF_ONE_BYTE_MESSAGES_WITH_A_TOPIC_NAME_AS_LONG_AS_ROCKETMQ_ALLOWS_SO_EACH_STORED_RECORD_GROWS";
    let group = Group::start(3).await?;
    let leader = group.wait_leader(WAIT).await?;
    create_topic(&group, leader, TOPIC, 1).await?;
    let client = RemotingClient::new();
    let addr = group.addr(leader);
    let store = group.brokers[&leader].store();
    let one = Message::new(TOPIC, Bytes::from_static(b"x"));
    let count =
        raftmq_common::limits::BATCH_BODY_SIZE_MAX_BYTES / raftmq_common::message::batch::encoded_entry_len(&one);
    let body = raftmq_common::message::batch::encode_batch(&vec![one; count])?;
    let mut batch = send_v2(TOPIC, body);
    batch.code = i32::from(RequestCode::SendBatchMessage);
    batch.ext_fields.insert("e".into(), "0".into());
    let refused = client.invoke(&addr, batch, harness::group::RPC_TIMEOUT).await?;
    assert_eq!(refused.response_code(), ResponseCode::MessageIllegal, "{:?}", refused.remark);
    assert!(refused.remark.as_deref().unwrap_or("").contains("one Raft entry"), "{:?}", refused.remark);
    assert_eq!(store.queue_offsets(TOPIC, 0), (0, 0), "nothing of the batch was stored");

    let stored = client.invoke(&addr, send_v2(TOPIC, "after"), harness::group::RPC_TIMEOUT).await?;
    assert_eq!(stored.response_code(), ResponseCode::Success, "{:?}", stored.remark);
    let mut caught_up = BTreeMap::new();
    caught_up.insert(0, 1);
    for id in group.brokers.keys() {
        wait_caught_up(&group, *id, TOPIC, &caught_up).await?;
    }
    group.shutdown().await;
    Ok(())
}

/// Names that become replicated metadata and ConsumeQueue directories are checked where they come
/// in. A 249-character consumer group is legal for a Java client, but its `%RETRY%` topic (256
/// bytes) cannot name a directory: before these checks a heartbeat created that topic and a
/// send-back stored a record in it, every replica failed the same apply, and the group never took a
/// write again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unstorable_group_and_topic_names_are_refused_where_they_come_in() -> Result<()> {
    use raftmq_common::protocol::body::JsonBody;
    use raftmq_common::protocol::body::heartbeat::ConsumerData;
    use raftmq_common::protocol::body::heartbeat::HeartbeatData;
    use raftmq_common::protocol::body::heartbeat::SubscriptionData;
    use raftmq_common::protocol::header::client::ConsumerSendMsgBackRequestHeader;
    use raftmq_common::protocol::header::client::GetConsumerListByGroupRequestHeader;

    const TOPIC: &str = "T25_NAMES";
    let group = Group::start(3).await?;
    let leader = group.wait_leader(WAIT).await?;
    create_topic(&group, leader, TOPIC, 1).await?;
    let client = RemotingClient::new();
    let addr = group.addr(leader);
    let store = group.brokers[&leader].store();
    let timeout = harness::group::RPC_TIMEOUT;
    let long_group = "g".repeat(249);
    let heartbeat_of = |groups: &[&str]| -> Result<RemotingCommand> {
        let consumer = |g: &&str| ConsumerData {
            group_name: (*g).into(),
            subscription_data_set: vec![SubscriptionData { topic: TOPIC.into(), ..SubscriptionData::default() }],
            ..ConsumerData::default()
        };
        let data = HeartbeatData {
            client_id: "t25@client".into(),
            consumer_data_set: groups.iter().map(consumer).collect(),
            producer_data_set: Vec::new(),
        };
        Ok(RemotingCommand::request(RequestCode::HeartBeat).with_body(data.encode()?))
    };
    let heartbeat = |group: &str| heartbeat_of(&[group]);
    let refused = |r: &RemotingCommand, what: &str| {
        assert_eq!(r.response_code(), ResponseCode::SystemError, "{what}: {:?}", r.remark);
    };

    for bad in [long_group.as_str(), "../escape"] {
        refused(&client.invoke(&addr, heartbeat(bad)?, timeout).await?, "heartbeat");
        let offset = harness::group::update_offset(&client, &addr, bad, TOPIC, 0, 1).await?;
        refused(&offset, "offset of a bad group");
        let back = ConsumerSendMsgBackRequestHeader {
            offset: 0,
            group: bad.into(),
            delay_level: -1,
            origin_msg_id: None,
            origin_topic: Some(TOPIC.into()),
            unit_mode: None,
            max_reconsume_times: None,
            bname: None,
        };
        let request = RemotingCommand::request_with_header(RequestCode::ConsumerSendMsgBack, &back);
        refused(&client.invoke(&addr, request, timeout).await?, "send-back");
    }
    let long = client.invoke(&addr, heartbeat(&long_group)?, timeout).await?;
    assert!(long.remark.as_deref().unwrap_or("").contains("longer than 248"), "{:?}", long.remark);
    let offset = harness::group::update_offset(&client, &addr, "g25", "../escape", 0, 1).await?;
    refused(&offset, "offset of a bad topic");
    // Offsets only for queues that exist: each is replicated state every snapshot carries.
    let unknown = harness::group::update_offset(&client, &addr, "g25", "T25_NEVER_CREATED", 0, 1).await?;
    assert_eq!(unknown.response_code(), ResponseCode::TopicNotExist, "{:?}", unknown.remark);
    for queue_id in [-1, 1, i32::MAX] {
        refused(&harness::group::update_offset(&client, &addr, "g25", TOPIC, queue_id, 1).await?, "queue out of range");
    }
    assert_eq!(store.metadata().offsets.query(TOPIC, "g25", 1), None, "nothing stored for queue 1");

    // A group one character shorter is fine: its retry topic is created and stored for. A client
    // heartbeating it together with a refused group still gets it registered.
    let fine = "g".repeat(248);
    let mixed = client.invoke(&addr, heartbeat_of(&[fine.as_str(), long_group.as_str()])?, timeout).await?;
    refused(&mixed, "a heartbeat with one bad group");
    let header = GetConsumerListByGroupRequestHeader { consumer_group: fine.clone() };
    let listed = client
        .invoke(&addr, RemotingCommand::request_with_header(RequestCode::GetConsumerListByGroup, &header), timeout)
        .await?;
    assert_eq!(listed.response_code(), ResponseCode::Success, "{:?}", listed.remark);
    assert!(String::from_utf8_lossy(&listed.body).contains("t25@client"), "{:?}", listed.body);
    let ok = client.invoke(&addr, heartbeat(&fine)?, timeout).await?;
    assert_eq!(ok.response_code(), ResponseCode::Success, "{:?}", ok.remark);
    assert_eq!(
        harness::group::update_offset(&client, &addr, &fine, TOPIC, 0, 0).await?.response_code(),
        ResponseCode::Success
    );
    let retry = format!("%RETRY%{fine}");
    let deadline = Instant::now() + WAIT;
    while store.metadata().topics.get(&retry).is_none() {
        anyhow::ensure!(Instant::now() < deadline, "the retry topic of the 248-character group was not created");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let topics = store.metadata().topics.to_wrapper().topic_config_table;
    assert!(!topics.keys().any(|t| t.contains("escape") || t.len() > 255), "{:?}", topics.keys().collect::<Vec<_>>());
    let stored = client.invoke(&addr, send_v2(TOPIC, "after"), timeout).await?;
    assert_eq!(stored.response_code(), ResponseCode::Success, "{:?}", stored.remark);
    // Its 255-character retry topic is past what a user may create, and can still be deleted.
    let delete = raftmq_common::protocol::header::admin::DeleteTopicRequestHeader { topic: retry.clone() };
    let request = RemotingCommand::request_with_header(RequestCode::DeleteTopicInBroker, &delete);
    let deleted = client.invoke(&addr, request, timeout).await?;
    assert_eq!(deleted.response_code(), ResponseCode::Success, "{:?}", deleted.remark);
    assert!(store.metadata().topics.get(&retry).is_none(), "deleted once the delete is answered");
    group.shutdown().await;
    Ok(())
}

/// The harness's ports (`tests/ports`) never collide with the kernel's own choices, nor with
/// each other: the CI failure they fix was a released port taken by a connection's local side.
#[test]
fn test_ports_are_distinct_and_outside_the_ephemeral_range() {
    let range = std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range").unwrap_or_default();
    let bounds: Vec<u16> = range.split_whitespace().filter_map(|b| b.parse().ok()).collect();
    let ports = harness::ports::free_ports(64);
    let base = harness::ports::free_ports_spaced(10, 3);
    let all: Vec<u16> = ports.iter().copied().chain([base, base + 10, base + 20]).collect();
    let distinct: HashSet<u16> = all.iter().copied().collect();
    assert_eq!(distinct.len(), all.len(), "a port handed out twice: {all:?}");
    match bounds[..] {
        [low, high] => assert!(all.iter().all(|p| !(low..=high).contains(p)), "{all:?} within {low}-{high}"),
        _ => eprintln!("no /proc/sys/net/ipv4/ip_local_port_range here: only distinctness is checked"),
    }
}

/// Field names the broker's request headers read (SEND_MESSAGE_V2's one-letter ones included),
/// for t23's garbage values.
const FUZZ_FIELD_NAMES: &[&str] = &[
    "topic",
    "group",
    "consumerGroup",
    "queueId",
    "queueOffset",
    "offset",
    "commitOffset",
    "maxMsgNums",
    "sysFlag",
    "brokerName",
    "bname",
    "nodeId",
    "clientId",
    "clientID",
    "msgId",
    "key",
    "maxNum",
    "beginTimestamp",
    "endTimestamp",
    "timestamp",
    "index",
    "count",
    "producerGroup",
    "transactionId",
    "tranStateTableOffset",
    "commitLogOffset",
    "fromTransactionCheck",
    "a",
    "b",
    "c",
    "d",
    "e",
    "f",
    "g",
    "h",
    "i",
    "j",
    "k",
    "l",
    "m",
    "n",
    "srcGroup",
    "destGroup",
    "isForce",
    "suspendTimeoutMillis",
    "subscription",
    "subVersion",
    "expressionType",
    "raftAddr",
    "remotingAddr",
    "to",
    "unitMode",
    "delayLevel",
    "originMsgId",
    "originTopic",
    "maxReconsumeTimes",
    "defaultTopic",
    "defaultTopicQueueNums",
    "properties",
    "bornTimestamp",
    "flag",
    "reconsumeTimes",
    "batch",
    "perm",
    "readQueueNums",
    "writeQueueNums",
    "topicFilterType",
    "topicSysFlag",
    "order",
    "clusterName",
    "jstackEnable",
    "isOrder",
    "clientAddr",
    "accessKey",
    "secretKey",
    "globalWhiteAddrs",
    "aclFileFullPath",
];

/// Values no header should take without a clean refusal; none is a small non-negative integer, so
/// no garbage names a real node, queue or offset.
const FUZZ_GARBAGE: &[&str] = &[
    "",
    " ",
    "-1",
    "-9223372036854775808",
    "9223372036854775808",
    "99999999999999999999999",
    "NaN",
    "1e9",
    "0x7f",
    "true",
    "null",
    "{",
    "[]",
    "\u{0}",
    "ü€𝄞",
    "%RETRY%",
    "a b",
    "../../etc/passwd",
    "2,3",
];

/// The seed of a t23 run: `RAFTMQ_FUZZ_SEED`, else a random one; printed with its replay command.
fn fuzz_seed(test: &str) -> Result<u64> {
    let seed: u64 = match std::env::var("RAFTMQ_FUZZ_SEED") {
        Ok(s) => s.parse().context("RAFTMQ_FUZZ_SEED")?,
        Err(_) => rand::random(),
    };
    println!("{test} seed {seed} (replay: RAFTMQ_FUZZ_SEED={seed} cargo test --test broker t20_send_pull::t23)");
    Ok(seed)
}

/// One malformed request for `code`, drawn from `rng`.
fn fuzz_request(code: RequestCode, variant: usize, rng: &mut rand::rngs::StdRng) -> RemotingCommand {
    use rand::Rng;
    use rand::seq::IndexedRandom;
    let mut request = RemotingCommand::request(code);
    let garbage = |rng: &mut rand::rngs::StdRng| -> String {
        if rng.random_ratio(1, 20) {
            "x".repeat(rng.random_range(1_000..20_000))
        } else {
            (*FUZZ_GARBAGE.choose(rng).unwrap_or(&"")).to_owned()
        }
    };
    match variant % 3 {
        // Nothing at all.
        0 => {}
        // Random names with random values.
        1 => {
            for _ in 0..rng.random_range(1..8) {
                let name: String = (0..rng.random_range(1..12)).map(|_| rng.random_range('a'..='z')).collect();
                let value = garbage(rng);
                request.ext_fields.insert(name.as_str().into(), value.as_str().into());
            }
        }
        // The names headers read, with garbage values.
        _ => {
            for _ in 0..rng.random_range(1..16) {
                let name = *FUZZ_FIELD_NAMES.choose(rng).unwrap_or(&"topic");
                let value = garbage(rng);
                request.ext_fields.insert(name.into(), value.as_str().into());
            }
        }
    }
    let body: Vec<u8> = match rng.random_range(0..4) {
        0 => Vec::new(),
        1 => (0..rng.random_range(1..4096)).map(|_| rng.random()).collect(),
        2 => br#"{"offsetTable":{{"brokerName":1}:x,"#.to_vec(),
        _ => b"brokerPermission=\nlistenPort=-1\n\xff\xfe=\x00".to_vec(),
    };
    request.with_body(body)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn malformed_requests_to_every_code_are_answered_and_lose_nothing() -> Result<()> {
    use rand::SeedableRng;
    const TOPIC: &str = "T23_KEPT";
    const VARIANTS_PER_CODE: usize = 6;
    let seed = fuzz_seed("t23")?;
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);

    let group = Group::start(3).await?;
    let leader = group.wait_leader(WAIT).await?;
    create_topic(&group, leader, TOPIC, 2).await?;
    let client = RemotingClient::new();
    for i in 0..20 {
        let r = client.invoke(&group.addr(leader), send_v2(TOPIC, format!("kept-{i}")), WAIT).await?;
        anyhow::ensure!(r.response_code() == ResponseCode::Success, "send {i}: {:?}", r.remark);
    }
    let stored = |addr: String| {
        let client = client.clone();
        async move {
            let mut bodies = Vec::new();
            for q in 0..2 {
                bodies.extend(drain_queue(&client, &addr, TOPIC, q).await?.into_iter().map(|m| m.message.body));
            }
            anyhow::Ok(bodies)
        }
    };
    let before = stored(group.addr(leader)).await?;
    anyhow::ensure!(before.len() == 20, "{} of 20 stored", before.len());
    let follower = group.brokers.keys().copied().find(|id| *id != leader).context("a follower")?;

    let mut answered: BTreeMap<String, usize> = BTreeMap::new();
    for code in raftmq_broker::processors::router::SERVED_CODES {
        let requests: Vec<(u64, RemotingCommand)> = (0..VARIANTS_PER_CODE)
            .map(|v| (if v % 2 == 0 { leader } else { follower }, fuzz_request(*code, v, &mut rng)))
            .collect();
        let calls = requests.into_iter().map(|(id, request)| {
            let (client, addr) = (client.clone(), group.addr(id));
            async move { (id, client.invoke(&addr, request, WAIT).await) }
        });
        for (id, outcome) in futures::future::join_all(calls).await {
            let response = outcome.with_context(|| format!("seed {seed}: {code:?} to replica {id} got no answer"))?;
            *answered.entry(format!("{:?}", response.response_code())).or_default() += 1;
        }
    }
    // The NameServer's codes too, to the group's NameServer.
    for code in raftmq_namesrv::processor::SERVED_CODES {
        let calls = (0..VARIANTS_PER_CODE).map(|v| {
            let (client, request) = (client.clone(), fuzz_request(code, v, &mut rng));
            let addr = group.namesrv_addr.clone();
            async move { client.invoke(&addr, request, WAIT).await }
        });
        for outcome in futures::future::join_all(calls.collect::<Vec<_>>()).await {
            let response = outcome.with_context(|| format!("seed {seed}: {code:?} to the NameServer got no answer"))?;
            *answered.entry(format!("{:?}", response.response_code())).or_default() += 1;
        }
    }
    println!("t23 answers by code: {answered:?}");
    let admin = Admin::new(&group.namesrv_addr)?;
    let route = admin.topic_route(TOPIC).await.with_context(|| format!("seed {seed}: the route after"))?;
    anyhow::ensure!(route.queue_datas.iter().any(|q| q.read_queue_nums == 2), "seed {seed}: {route:?}");
    admin.shutdown().await;

    // The group still serves: a ready leader (a transfer may have moved it), a send, and every
    // message stored before, unchanged, from the leader and from the follower.
    let leader = group.wait_leader(WAIT).await?;
    let r = client.invoke(&group.addr(leader), send_v2(TOPIC, "after"), WAIT).await?;
    anyhow::ensure!(r.response_code() == ResponseCode::Success, "seed {seed}: send after: {:?}", r.remark);
    for id in group.brokers.keys() {
        let now = stored(group.addr(*id)).await?;
        anyhow::ensure!(
            now.len() >= 20 && now.iter().filter(|b| **b != *"after").eq(before.iter()),
            "seed {seed}: replica {id}"
        );
    }
    group.shutdown().await;
    Ok(())
}

/// t23 under the plain ACL: the same malformed requests to every served code of a 1-node group
/// with `aclEnable`, half carrying an `AccessKey` (a real account's or an unknown one) with a
/// garbage `Signature`, half properly signed by the admin account so the garbage reaches the
/// processors: each is answered, and the admin is still served afterwards.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn malformed_requests_under_the_acl_are_answered() -> Result<()> {
    use rand::Rng;
    use rand::SeedableRng;
    const ACL: &str = "globalWhiteRemoteAddresses:\naccounts:\n  - accessKey: t23admin\n    secretKey: t23-admin-secret\n    admin: true\n";
    let seed = fuzz_seed("t23 (ACL)")?;
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    let dir = tempfile::tempdir()?;
    let acl_file = dir.path().join("plain_acl.yml");
    std::fs::write(&acl_file, ACL)?;
    let group = Group::start_with(1, |c| {
        c.acl_enable = true;
        c.acl_file = Some(acl_file.clone());
        c.inner_access_key = Some("t23admin".into());
        c.inner_secret_key = Some("t23-admin-secret".into());
    })
    .await?;
    let leader = group.wait_leader(WAIT).await?;
    let addr = group.addr(leader);
    let client = RemotingClient::new();
    // Signed as the admin: the garbage passes the ACL and reaches the processors.
    let admin_creds = Arc::new(raftmq_client::SessionCredentials::new("t23admin", "t23-admin-secret")?);
    let signed =
        RemotingClient::with_credentials(raftmq_common::remoting::ProcessorTable::new(), false, Some(admin_creds));
    let mut answered: BTreeMap<String, usize> = BTreeMap::new();
    for code in raftmq_broker::processors::router::SERVED_CODES {
        let requests: Vec<(bool, RemotingCommand)> = (0..6)
            .map(|v| {
                let mut request = fuzz_request(*code, v, &mut rng);
                if v % 2 == 1 {
                    return (true, request);
                }
                let key = if rng.random_bool(0.5) { "t23admin" } else { "t23-nobody" };
                request.ext_fields.insert("AccessKey".into(), key.into());
                let signature: String = (0..rng.random_range(0..40)).map(|_| rng.random_range('!'..='~')).collect();
                request.ext_fields.insert("Signature".into(), signature.as_str().into());
                (false, request)
            })
            .collect();
        let calls = requests.into_iter().map(|(sign, request)| {
            let (client, addr) = (if sign { signed.clone() } else { client.clone() }, addr.clone());
            async move { client.invoke(&addr, request, WAIT).await }
        });
        for outcome in futures::future::join_all(calls).await {
            let response = outcome.with_context(|| format!("seed {seed}: {code:?} got no answer"))?;
            *answered.entry(format!("{:?}", response.response_code())).or_default() += 1;
        }
    }
    println!("t23 (ACL) answers by code: {answered:?}");
    let admin = Admin::with_credentials(
        &group.namesrv_addr,
        Some(raftmq_client::SessionCredentials::new("t23admin", "t23-admin-secret")?),
    )?;
    admin.broker_runtime_info(&addr).await.with_context(|| format!("seed {seed}: the admin is still served"))?;
    admin.shutdown().await;
    group.shutdown().await;
    Ok(())
}
